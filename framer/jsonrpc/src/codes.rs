//! The error codes, with their standard messages, and the error object that
//! carries them: defined here once for the host and the server. JSON-RPC's
//! own codes, MCP's (-32020 to -32099 are the MCP specification's), and this
//! project's local ones.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// JSON-RPC's code for a frame that is not valid JSON (or not UTF-8).
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC's code for valid JSON that is not a valid request object.
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC's code for a method the peer does not have.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC's code for invalid method parameters (MCP: also an unknown tool,
/// bad tool arguments, a bad cursor).
pub const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC's code for an internal error (a handler panicked, a result could
/// not be sent, an error object could not be read).
pub const INTERNAL_ERROR: i64 = -32603;
/// MCP's code (2026-07-28) for a Streamable HTTP request whose headers
/// contradict its body. Defined for completeness: stdio has no headers.
pub const HEADER_MISMATCH: i64 = -32020;
/// MCP's code (2026-07-28) for a request that needs a client capability the
/// request's `io.modelcontextprotocol/clientCapabilities` did not declare;
/// `data.requiredCapabilities` lists the missing ones.
pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
/// MCP's code (2026-07-28) for a request whose protocol version the server
/// does not serve; `data` is `{"supported": [...], "requested": "..."}`
/// ([`protocol::unsupported_version`](crate::protocol::unsupported_version)
/// builds it).
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
/// The code a peer answers a request with when it is overloaded and drops
/// the request (the server's request queue is full; the host's inbound queue
/// is full under the `Reject` policy). -32000 is the first of JSON-RPC's
/// implementation-defined server errors (-32000 to -32099).
pub const OVERLOADED: i64 = -32000;
/// The code of the error response a host transport gives its SDK in place of
/// a response that was over the transport limit: the host discarded the
/// frame unparsed, recovered its `id`, and fails that request at once rather
/// than let it wait out its timeout. Its message names the frame's length
/// and the limit, and its `data` is `{"len": <bytes>, "max": <bytes>}`.
/// Never sent on the wire: the peer did answer, too largely. One of
/// JSON-RPC's implementation-defined server errors, clear of the ones SDKs
/// and MCP already give a meaning (-32000 overloaded here and "connection
/// closed" in the TypeScript SDK, -32001 its request timeout, -32002 MCP's
/// resource not found).
pub const RESPONSE_TOO_LARGE: i64 = -32010;
/// The code of the error response a host transport gives its SDK in place of
/// a well-formed response to one of its pending requests that the SDK's own
/// types could not read (an error object whose `code` is not an integer, a
/// result of a shape the SDK refuses): the request fails at once rather than
/// wait forever for an answer that came. Its message names the request and
/// what the SDK said. Never sent on the wire.
pub const INVALID_RESPONSE: i64 = -32011;
/// The code of the error response a host transport gives its SDK for each
/// request still pending when the connection ends (the server exited or
/// closed its stdout, was shut down or killed): its message says why, with
/// the exit status and the end of the server's stderr. Never sent on the
/// wire.
pub const CONNECTION_CLOSED: i64 = -32012;

/// Every code this crate defines, with its standard message (the JSON-RPC
/// 2.0 specification's wording for the predefined ones).
///
/// ```
/// use mcp_framer_jsonrpc::{ERROR_CODES, INVALID_PARAMS, standard_message};
///
/// assert!(ERROR_CODES.contains(&(INVALID_PARAMS, "Invalid params")));
/// assert_eq!(standard_message(-32601), Some("Method not found"));
/// assert_eq!(standard_message(-32099), None);
/// ```
pub const ERROR_CODES: [(i64, &str); 12] = [
    (PARSE_ERROR, "Parse error"),
    (INVALID_REQUEST, "Invalid Request"),
    (METHOD_NOT_FOUND, "Method not found"),
    (INVALID_PARAMS, "Invalid params"),
    (INTERNAL_ERROR, "Internal error"),
    (HEADER_MISMATCH, "Header mismatch"),
    (MISSING_REQUIRED_CLIENT_CAPABILITY, "Missing required client capability"),
    (UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version"),
    (OVERLOADED, "Overloaded"),
    (RESPONSE_TOO_LARGE, "Response too large"),
    (INVALID_RESPONSE, "Invalid response"),
    (CONNECTION_CLOSED, "Connection closed"),
];

/// The standard message of `code`, if it is one of [`ERROR_CODES`].
pub fn standard_message(code: i64) -> Option<&'static str> {
    ERROR_CODES.iter().find(|(c, _)| *c == code).map(|(_, message)| *message)
}

/// A JSON-RPC error object: the `error` member of an error response.
///
/// Serializes as `{"code":…,"message":…,"data":…}`, `data` only when set;
/// deserializes from any error object with an integer `code` and a string
/// `message` (`data` optional, other members ignored).
///
/// ```
/// use mcp_framer_jsonrpc::{ErrorObject, INVALID_PARAMS};
///
/// let error = ErrorObject::invalid_params("pattern is required");
/// assert_eq!(error.code, INVALID_PARAMS);
/// assert_eq!(serde_json::to_string(&error)?, r#"{"code":-32602,"message":"pattern is required"}"#);
/// assert_eq!(error.to_string(), "JSON-RPC error -32602: pattern is required");
///
/// let read: ErrorObject = serde_json::from_str(r#"{"code":-32000,"message":"busy","data":[1]}"#)?;
/// assert_eq!(read, ErrorObject::new(-32000, "busy").with_data(serde_json::json!([1])));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorObject {
    /// The error code ([`ERROR_CODES`] has the ones this crate defines).
    pub code: i64,
    /// A short description.
    pub message: String,
    /// Optional details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl ErrorObject {
    /// An error with `code` and `message`, without data.
    pub fn new(code: i64, message: impl Into<String>) -> ErrorObject {
        ErrorObject { code, message: message.into(), data: None }
    }

    /// `code` with its [standard message](standard_message) (`"Server
    /// error"` for a code outside the table).
    ///
    /// ```
    /// use mcp_framer_jsonrpc::{ErrorObject, METHOD_NOT_FOUND};
    /// assert_eq!(ErrorObject::standard(METHOD_NOT_FOUND).message, "Method not found");
    /// ```
    pub fn standard(code: i64) -> ErrorObject {
        ErrorObject::new(code, standard_message(code).unwrap_or("Server error"))
    }

    /// [`INVALID_PARAMS`] with `message`.
    pub fn invalid_params(message: impl fmt::Display) -> ErrorObject {
        ErrorObject::new(INVALID_PARAMS, message.to_string())
    }

    /// [`INTERNAL_ERROR`] with `message`.
    pub fn internal(message: impl fmt::Display) -> ErrorObject {
        ErrorObject::new(INTERNAL_ERROR, message.to_string())
    }

    /// Sets `data`.
    pub fn with_data(mut self, data: Value) -> ErrorObject {
        self.data = Some(data);
        self
    }
}

impl fmt::Display for ErrorObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JSON-RPC error {}: {}", self.code, self.message)
    }
}

impl std::error::Error for ErrorObject {}
