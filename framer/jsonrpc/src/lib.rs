//! The JSON-RPC 2.0 layer of mcp-framer: what lies between a frame (one
//! line of an MCP stdio stream, as the `mcp-framer` crate cuts it) and an
//! application.
//!
//! - **Decode**: [`parse`] classifies a frame as a request, notification,
//!   response or error response **without materialising its payload**.
//! - **Encode**: [`Encoder`] writes each kind of message as one frame: one
//!   JSON object, one `\n`, within a byte limit.
//! - **Errors**: the error codes and their standard messages
//!   ([`ERROR_CODES`]), and the one [`ErrorObject`] type both sides send and
//!   read.
//! - **Ids**: [`Id`] / [`OwnedId`], a string or an `i64`.
//! - **Recovery**: [`recover_response_id`] tells, from a bounded head and
//!   tail of a response too large to read, which request it answered, or
//!   says it cannot be told safely.
//!
//! The host and the server of `mcp-framer-stdio` both use this crate for
//! every message they read and write. It does no I/O, and has no unsafe code.
//!
//! # Decoding
//!
//! [`parse`] reads only the fields that route a message — `jsonrpc`, `id`,
//! `method` — and which of `result`/`error` is present, with its own
//! validating scanner. `params`, `result` and `error` stay [`RawJson`]
//! slices of the frame: they are checked to be well-formed JSON, never built
//! into a tree, never copied. Their content (object or array `params`, the
//! error object's fields) is the caller's business:
//! [`RawJson::deserialize`] builds whatever type it wants.
//!
//! ## Contract
//!
//! - The whole frame must be UTF-8 (checked first, over every byte:
//!   [`EnvelopeErrorKind::InvalidUtf8`]) and exactly one JSON value
//!   ([`Malformed`](EnvelopeErrorKind::Malformed)). Both are JSON-RPC
//!   [-32700](PARSE_ERROR).
//! - The value must be an object ([`NotAnObject`](EnvelopeErrorKind::NotAnObject):
//!   batches are not supported, MCP removed them), with `"jsonrpc": "2.0"`
//!   ([`BadVersion`](EnvelopeErrorKind::BadVersion)). Both are
//!   [-32600](INVALID_REQUEST).
//! - Then ([`InvalidShape`](EnvelopeErrorKind::InvalidShape), -32600 — the
//!   first rule that fails wins, in this order):
//!   1. none of `jsonrpc`, `id`, `method`, `params`, `result`, `error` may
//!      appear twice (other keys are ignored, duplicates included);
//!   2. `id`, when present, is a string, an integer in the `i64` range, or
//!      `null` (fractions, exponents like `1e3`, larger integers are not ids);
//!   3. with a `method` (which must be a string): no `result`, no `error`; an
//!      `id` makes it a [`Request`](Message::Request) (a `null` id is
//!      refused), no `id` a [`Notification`](Message::Notification);
//!   4. without `method`: exactly one of `result` (a
//!      [`Response`](Message::Response), non-null `id` required) and `error`
//!      (an [`ErrorResponse`](Message::ErrorResponse), `id` required, `null`
//!      allowed).
//!
//!   `BadVersion` is checked before these rules, except rule 1.
//! - Every -32600 error carries the frame's id when it had one valid `id`
//!   ([`EnvelopeError::id`]), so a server can answer the request.
//! - A present key keeps its value even when that value is `null`:
//!   `"result": null` is a valid response, `"params": null` is handed over as
//!   written.
//!
//! ```
//! use mcp_framer_jsonrpc::{parse, Id, Kind, Message};
//!
//! let frame = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo"}}"#;
//! let message = parse(frame)?;
//! assert_eq!(message.kind(), Kind::Request);
//! assert_eq!(message.id(), Some(&Id::Number(7)));
//! assert_eq!(message.method(), Some("tools/call"));
//! let Message::Request { params: Some(params), .. } = message else { unreachable!() };
//! assert_eq!(params.get(), r#"{"name":"echo"}"#); // a slice of `frame`, not a copy
//! let params: serde_json::Value = params.deserialize()?;
//! assert_eq!(params["name"], "echo");
//!
//! let response = parse(br#"{"jsonrpc":"2.0","id":"a","result":null}"#)?;
//! assert_eq!((response.kind(), response.id()), (Kind::Response, Some(&Id::from("a"))));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! A refused frame says what to answer ([`EnvelopeError::code`],
//! [`EnvelopeError::id`]); a server turns it into an error response:
//!
//! ```
//! use mcp_framer_jsonrpc::{parse, Encoder, ErrorObject};
//!
//! let error = parse(br#"{"jsonrpc":"2.0","id":3,"method":7}"#).unwrap_err();
//! let reply = Encoder::new(1 << 20).error_response(error.id(), &ErrorObject::from(&error))?;
//! assert!(reply.starts_with(br#"{"jsonrpc":"2.0","id":3,"error":{"code":-32600,"#));
//! # Ok::<(), mcp_framer_jsonrpc::EncodeError>(())
//! ```
//!
//! # Encoding
//!
//! [`Encoder`] serializes a message once, straight into its frame, and
//! applies one newline rule (a raw `\n` or `\r`, which in valid JSON can only
//! be whitespace, becomes a space) and one size check (a frame over the
//! peer's transport limit is an [`EncodeError::TooLarge`]). See its
//! documentation for why.
//!
//! ```
//! use mcp_framer_jsonrpc::{parse, Encoder, ErrorObject, Id, Kind, INVALID_PARAMS};
//!
//! let encoder = Encoder::new(16 << 20);
//! let frame = encoder.response(&Id::from("r1"), &serde_json::json!({"content": []}))?;
//! assert_eq!(frame, b"{\"jsonrpc\":\"2.0\",\"id\":\"r1\",\"result\":{\"content\":[]}}\n");
//!
//! let frame = encoder.error_response(Some(&Id::Number(4)), &ErrorObject::invalid_params("unknown tool: grep"))?;
//! let message = parse(frame.strip_suffix(b"\n").unwrap()).expect("the encoder writes valid messages");
//! assert_eq!(message.kind(), Kind::ErrorResponse);
//! let error: ErrorObject = message.payload().unwrap().deserialize().unwrap();
//! assert_eq!((error.code, error.message.as_str()), (INVALID_PARAMS, "unknown tool: grep"));
//! # Ok::<(), mcp_framer_jsonrpc::EncodeError>(())
//! ```
//!
//! # Features
//!
//! - `check` (unstable, hidden from the docs): the differential oracle the
//!   fuzz targets and the corpus replay run, which compares [`parse`] with a
//!   second parser built on simd-json. simd-json is reachable only through
//!   it and is no part of this crate's public API.

#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

use std::borrow::Cow;

use scan::ScanError;

#[cfg(feature = "check")]
#[doc(hidden)]
pub mod check;
mod codes;
mod encode;
mod error;
mod id;
mod raw;
mod recover;
mod scan;
#[cfg(test)]
mod tests;

pub use codes::{
    ERROR_CODES, ErrorObject, INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, OVERLOADED,
    PARSE_ERROR, standard_message,
};
pub use encode::{EncodeError, Encoder};
pub use error::{EnvelopeError, EnvelopeErrorKind};
pub use id::{Id, OwnedId};
pub use raw::RawJson;
pub use recover::recover_response_id;

/// A classified JSON-RPC 2.0 message, borrowing from its frame.
#[derive(Clone, Debug)]
pub enum Message<'a> {
    /// A call that expects an answer.
    Request {
        /// The id to answer to.
        id: Id<'a>,
        /// The method name.
        method: Cow<'a, str>,
        /// The parameters, as written (any JSON value, `null` included).
        params: Option<RawJson<'a>>,
    },
    /// A call without an id: no answer expected.
    Notification {
        /// The method name.
        method: Cow<'a, str>,
        /// The parameters, as written.
        params: Option<RawJson<'a>>,
    },
    /// A successful answer.
    Response {
        /// The id of the request answered.
        id: Id<'a>,
        /// The result, as written (may be `null`).
        result: RawJson<'a>,
    },
    /// A failed answer.
    ErrorResponse {
        /// The id of the request answered; `None` when the frame said `null`
        /// (the peer could not read the request's id).
        id: Option<Id<'a>>,
        /// The error object, as written.
        error: RawJson<'a>,
    },
}

/// The four kinds of JSON-RPC message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// [`Message::Request`].
    Request,
    /// [`Message::Notification`].
    Notification,
    /// [`Message::Response`].
    Response,
    /// [`Message::ErrorResponse`].
    ErrorResponse,
}

impl<'a> Message<'a> {
    /// The kind of message.
    pub fn kind(&self) -> Kind {
        match self {
            Message::Request { .. } => Kind::Request,
            Message::Notification { .. } => Kind::Notification,
            Message::Response { .. } => Kind::Response,
            Message::ErrorResponse { .. } => Kind::ErrorResponse,
        }
    }

    /// The id: always for requests and responses, never for notifications,
    /// and for error responses unless it was `null`.
    pub fn id(&self) -> Option<&Id<'a>> {
        match self {
            Message::Request { id, .. } | Message::Response { id, .. } => Some(id),
            Message::ErrorResponse { id, .. } => id.as_ref(),
            Message::Notification { .. } => None,
        }
    }

    /// The method of a request or notification.
    pub fn method(&self) -> Option<&str> {
        match self {
            Message::Request { method, .. } | Message::Notification { method, .. } => Some(method),
            Message::Response { .. } | Message::ErrorResponse { .. } => None,
        }
    }

    /// The payload as written: `params` of a request or notification (if
    /// present), `result` of a response, `error` of an error response.
    pub fn payload(&self) -> Option<RawJson<'a>> {
        match self {
            Message::Request { params, .. } | Message::Notification { params, .. } => *params,
            Message::Response { result, .. } => Some(*result),
            Message::ErrorResponse { error, .. } => Some(*error),
        }
    }
}

/// Classifies `frame` (one line, without its `\n`) as a JSON-RPC message,
/// borrowing its routing fields and leaving its payload unparsed. See the
/// [module documentation](self) for the rules and the error order.
///
/// ```
/// use mcp_framer_jsonrpc::{parse, EnvelopeErrorKind, Kind};
///
/// assert_eq!(parse(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)?.kind(), Kind::Notification);
/// assert_eq!(parse(b"[1]").unwrap_err().kind(), EnvelopeErrorKind::NotAnObject);
/// assert_eq!(parse(b"\xff").unwrap_err().kind(), EnvelopeErrorKind::InvalidUtf8);
/// // The offset of the first invalid byte: a cut 2-byte character, after an
/// // ASCII run long enough for the vectorised check.
/// let cut = format!("{{\"a\":\"{}é", "x".repeat(100)).into_bytes();
/// let error = parse(&cut[..cut.len() - 1]).unwrap_err();
/// assert_eq!(error.detail(), "invalid byte at offset 106");
/// # Ok::<(), mcp_framer_jsonrpc::EnvelopeError>(())
/// ```
pub fn parse(frame: &[u8]) -> Result<Message<'_>, EnvelopeError> {
    let text = utf8(frame)?;
    let top = scan::top_level(text).map_err(|e| match e {
        ScanError::Malformed(at) if at >= text.len() => {
            EnvelopeError::new(EnvelopeErrorKind::Malformed, "unexpected end of the frame")
        }
        ScanError::Malformed(at) => {
            EnvelopeError::new(EnvelopeErrorKind::Malformed, format!("invalid JSON at offset {at}"))
        }
        ScanError::NotAnObject => EnvelopeError::new(EnvelopeErrorKind::NotAnObject, not_an_object(text)),
    })?;
    if let Some(key) = top.duplicate {
        return Err(EnvelopeError::new(EnvelopeErrorKind::InvalidShape, format!("duplicate field `{key}`")));
    }
    let [jsonrpc, id, method, params, result, error] = top.values;
    let routing = Fields {
        version_ok: jsonrpc.is_some_and(version_is_2_0),
        id: id_field(id, top.is_escaped(1)),
        method: method_field(method, top.is_escaped(2)),
        has_result: result.is_some(),
        has_error: error.is_some(),
    };
    let routed = route(routing)?;
    Ok(match routed.kind {
        Kind::Request => Message::Request {
            id: routed.id.expect("routed request has an id"),
            method: routed.method.expect("routed request has a method"),
            params: params.map(RawJson::new),
        },
        Kind::Notification => Message::Notification {
            method: routed.method.expect("routed notification has a method"),
            params: params.map(RawJson::new),
        },
        Kind::Response => Message::Response {
            id: routed.id.expect("routed response has an id"),
            result: RawJson::new(result.expect("routed response has a result")),
        },
        Kind::ErrorResponse => Message::ErrorResponse {
            id: routed.id,
            error: RawJson::new(error.expect("routed error response has an error")),
        },
    })
}

/// The frame as text. `simdutf8` validates several times faster than
/// `std::str::from_utf8` on text with non-ASCII characters; std finds the
/// offset of the first invalid byte for the error.
fn utf8(frame: &[u8]) -> Result<&str, EnvelopeError> {
    simdutf8::basic::from_utf8(frame).map_err(|_| {
        let at = std::str::from_utf8(frame).err().map_or(0, |e| e.valid_up_to());
        EnvelopeError::new(EnvelopeErrorKind::InvalidUtf8, format!("invalid byte at offset {at}"))
    })
}

/// Names the type of a top-level value that is not an object.
fn not_an_object(text: &str) -> String {
    let what = match text.trim_start_matches([' ', '\t', '\r', '\n']).as_bytes().first() {
        Some(b'[') => "an array (batches are not supported)",
        Some(b'"') => "a string",
        Some(b'n') => "null",
        Some(b't' | b'f') => "a boolean",
        _ => "a number",
    };
    format!("top-level value is {what}")
}

fn version_is_2_0(raw: &str) -> bool {
    raw == "\"2.0\""
        || (raw.starts_with('"') && raw.contains('\\') && decode_string(raw, true).as_deref() == Some("2.0"))
}

/// The content of a JSON string literal (`raw` starts and ends with `"` and
/// was validated by the scanner), borrowed unless it has escapes
/// (`escaped`, as the scanner found). `None` if an escape encodes a lone
/// surrogate.
fn decode_string(raw: &str, escaped: bool) -> Option<Cow<'_, str>> {
    if escaped {
        serde_json::from_str::<String>(raw).ok().map(Cow::Owned)
    } else {
        Some(Cow::Borrowed(&raw[1..raw.len() - 1]))
    }
}

/// The `id` member's value as the scanner found it (`escaped`: a string with
/// escapes).
fn id_field(json: Option<&str>, escaped: bool) -> IdField<'_> {
    let Some(text) = json else { return IdField::Absent };
    match text.as_bytes().first() {
        Some(b'"') => decode_string(text, escaped).map_or(IdField::Invalid, |s| IdField::Valid(Id::Str(s))),
        Some(b'n') => IdField::Null,
        // A validated number is an integer unless it has a fraction or an
        // exponent.
        Some(b'-' | b'0'..=b'9') if !text.bytes().any(|c| matches!(c, b'.' | b'e' | b'E')) => {
            text.parse().map_or(IdField::Invalid, |n| IdField::Valid(Id::Number(n)))
        }
        _ => IdField::Invalid,
    }
}

/// The `method` member's value as the scanner found it (`escaped`: a string
/// with escapes).
fn method_field(json: Option<&str>, escaped: bool) -> MethodField<'_> {
    let Some(text) = json else { return MethodField::Absent };
    if text.starts_with('"') {
        decode_string(text, escaped).map_or(MethodField::Invalid, MethodField::Str)
    } else {
        MethodField::Invalid
    }
}

/// What a parser found in the `id` key.
#[derive(Debug)]
pub(crate) enum IdField<'a> {
    Absent,
    Null,
    Valid(Id<'a>),
    /// Present but not an id: a fraction, an out-of-range integer, a boolean,
    /// an object, an array, a string with a lone surrogate escape.
    Invalid,
}

/// What a parser found in the `method` key.
#[derive(Debug)]
pub(crate) enum MethodField<'a> {
    Absent,
    Str(Cow<'a, str>),
    /// Present but not a string (or a string with a lone surrogate escape).
    Invalid,
}

/// The routing facts of a top-level object without duplicate known keys, as
/// either parser found them. [`route`] applies the rules to them, so both
/// parsers classify alike.
#[derive(Debug)]
pub(crate) struct Fields<'a> {
    pub(crate) version_ok: bool,
    pub(crate) id: IdField<'a>,
    pub(crate) method: MethodField<'a>,
    pub(crate) has_result: bool,
    pub(crate) has_error: bool,
}

/// A classified message without its payload.
#[derive(Debug)]
pub(crate) struct Routed<'a> {
    pub(crate) kind: Kind,
    pub(crate) id: Option<Id<'a>>,
    pub(crate) method: Option<Cow<'a, str>>,
}

/// Applies the JSON-RPC rules (module documentation, rules 2 to 4) to the
/// routing facts.
pub(crate) fn route(fields: Fields<'_>) -> Result<Routed<'_>, EnvelopeError> {
    let error = |kind, detail: &'static str| {
        let id = match &fields.id {
            IdField::Valid(id) => Some(id.to_owned_id()),
            _ => None,
        };
        Err(EnvelopeError::new(kind, detail).with_id(id))
    };
    let shape = |detail| error(EnvelopeErrorKind::InvalidShape, detail);
    if !fields.version_ok {
        return error(EnvelopeErrorKind::BadVersion, "\"jsonrpc\" must be the string \"2.0\"");
    }
    if matches!(fields.id, IdField::Invalid) {
        return shape("\"id\" must be a string or an integer in the i64 range");
    }
    match (&fields.method, fields.has_result, fields.has_error) {
        (MethodField::Invalid, ..) => shape("\"method\" must be a string"),
        (MethodField::Str(_), true, _) | (MethodField::Str(_), _, true) => {
            shape("a request or notification has no \"result\" or \"error\"")
        }
        (MethodField::Str(_), false, false) => {
            let kind = match fields.id {
                IdField::Absent => Kind::Notification,
                IdField::Valid(_) => Kind::Request,
                IdField::Null | IdField::Invalid => return shape("a request's \"id\" must not be null"),
            };
            let MethodField::Str(method) = fields.method else { unreachable!() };
            let id = match fields.id {
                IdField::Valid(id) => Some(id),
                _ => None,
            };
            Ok(Routed { kind, id, method: Some(method) })
        }
        (MethodField::Absent, true, true) => shape("a response has \"result\" or \"error\", not both"),
        (MethodField::Absent, false, false) => shape("no \"method\", \"result\" or \"error\""),
        (MethodField::Absent, true, false) => match fields.id {
            IdField::Valid(id) => Ok(Routed { kind: Kind::Response, id: Some(id), method: None }),
            _ => shape("a response needs a string or integer \"id\""),
        },
        (MethodField::Absent, false, true) => match fields.id {
            IdField::Valid(id) => Ok(Routed { kind: Kind::ErrorResponse, id: Some(id), method: None }),
            IdField::Null => Ok(Routed { kind: Kind::ErrorResponse, id: None, method: None }),
            _ => shape("an error response needs an \"id\" (null allowed)"),
        },
    }
}
