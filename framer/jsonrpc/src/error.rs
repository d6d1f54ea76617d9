//! Why a frame is not a JSON-RPC message.

use std::borrow::Cow;
use std::fmt;

use crate::codes::{ErrorObject, INVALID_REQUEST, PARSE_ERROR};
use crate::id::OwnedId;

/// The class of an [`ParseError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ParseErrorKind {
    /// The frame is not UTF-8 (MCP frames must be). Code -32700.
    InvalidUtf8,
    /// The frame is not one JSON value (syntax error, truncated, trailing
    /// bytes, empty). Code -32700.
    Malformed,
    /// Valid JSON whose top level is not an object: a batch (array; MCP
    /// 2025-06-18 removed batching), a string, a number... Code -32600.
    NotAnObject,
    /// `"jsonrpc"` is missing or is not the string `"2.0"`. Code -32600.
    BadVersion,
    /// An object with `"jsonrpc": "2.0"` that is none of the four message
    /// kinds: bad `id` type, non-string `method`, duplicate key, missing or
    /// conflicting `method`/`result`/`error`... Code -32600.
    InvalidShape,
}

impl ParseErrorKind {
    /// The JSON-RPC error code a peer answers this with.
    pub fn code(self) -> i64 {
        match self {
            ParseErrorKind::InvalidUtf8 | ParseErrorKind::Malformed => PARSE_ERROR,
            ParseErrorKind::NotAnObject | ParseErrorKind::BadVersion | ParseErrorKind::InvalidShape => INVALID_REQUEST,
        }
    }

    fn describe(self) -> &'static str {
        match self {
            ParseErrorKind::InvalidUtf8 => "frame is not valid UTF-8",
            ParseErrorKind::Malformed => "frame is not valid JSON",
            ParseErrorKind::NotAnObject => "frame is not a JSON object",
            ParseErrorKind::BadVersion => "frame lacks \"jsonrpc\": \"2.0\"",
            ParseErrorKind::InvalidShape => "frame is not a JSON-RPC message",
        }
    }
}

/// Why [`parse`](crate::parse) refused a frame: it is not a JSON-RPC 2.0
/// message. The frame is rejected; the session can continue with the next
/// frame.
///
/// Every refusal is a `ParseError`, not only JSON-RPC's "Parse error":
/// [`code`](Self::code) is [`PARSE_ERROR`] (-32700) for a frame that is not
/// one UTF-8 JSON value, and [`INVALID_REQUEST`] (-32600) for JSON that is
/// not a message.
///
/// [`code`](Self::code) is the JSON-RPC error code to answer with, and
/// [`id`](Self::id) the request id to answer to, recovered when the frame
/// was an object whose `id` was a valid id (otherwise answer with a `null`
/// id, as JSON-RPC prescribes).
///
/// ```
/// use mcp_framer_jsonrpc::{parse, ParseErrorKind, Id};
///
/// let err = parse(br#"{"jsonrpc":"1.0","id":4,"method":"ping"}"#).unwrap_err();
/// assert_eq!(err.kind(), ParseErrorKind::BadVersion);
/// assert_eq!(err.code(), -32600);
/// assert_eq!(err.id(), Some(&Id::Number(4)));
///
/// let err = parse(b"{\"jsonrpc\":\"2.0\",").unwrap_err();
/// assert_eq!((err.kind(), err.code(), err.id()), (ParseErrorKind::Malformed, -32700, None));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct ParseError {
    kind: ParseErrorKind,
    id: Option<OwnedId>,
    detail: Cow<'static, str>,
}

impl ParseError {
    pub(crate) fn new(kind: ParseErrorKind, detail: impl Into<Cow<'static, str>>) -> Self {
        ParseError { kind, id: None, detail: detail.into() }
    }

    pub(crate) fn with_id(mut self, id: Option<OwnedId>) -> Self {
        self.id = id;
        self
    }

    /// The class of the error.
    pub fn kind(&self) -> ParseErrorKind {
        self.kind
    }

    /// The request id recovered from the frame: `Some` when the frame was a
    /// JSON object with exactly one `id` that is a string or an `i64`
    /// integer. Always `None` for -32700 errors.
    pub fn id(&self) -> Option<&OwnedId> {
        self.id.as_ref()
    }

    /// The JSON-RPC error code: -32700 (parse error) for
    /// [`InvalidUtf8`](ParseErrorKind::InvalidUtf8) and
    /// [`Malformed`](ParseErrorKind::Malformed), -32600 (invalid request)
    /// for the others.
    pub fn code(&self) -> i64 {
        self.kind.code()
    }

    /// What exactly was wrong (for logs; the wording is not stable).
    pub fn detail(&self) -> &str {
        &self.detail
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind.describe(), self.detail)?;
        if let Some(id) = &self.id {
            write!(f, " (id {id})")?;
        }
        Ok(())
    }
}

impl std::error::Error for ParseError {}

/// The answer to a frame [`parse`](crate::parse) refused: its code
/// ([`PARSE_ERROR`] or [`INVALID_REQUEST`]) and the error's text as the
/// message. (Answer it to [`ParseError::id`].)
impl From<&ParseError> for ErrorObject {
    fn from(error: &ParseError) -> ErrorObject {
        ErrorObject::new(error.code(), error.to_string())
    }
}
