//! The decoder: [`parse`] and the routing rules it shares with the
//! simd-json oracle of the `check` feature.

use std::borrow::Cow;

use crate::scan::{self, ScanError};
use crate::{Id, Kind, Message, ParseError, ParseErrorKind, RawJson};

/// Classifies `frame` (one line, without its `\n`) as a JSON-RPC message,
/// borrowing its routing fields and leaving its payload unparsed.
///
/// # Contract
///
/// - The whole frame must be UTF-8 (checked first, over every byte:
///   [`ParseErrorKind::InvalidUtf8`]) and exactly one JSON value
///   ([`Malformed`](ParseErrorKind::Malformed)). Both are JSON-RPC
///   [-32700](crate::PARSE_ERROR).
/// - The value must be an object ([`NotAnObject`](ParseErrorKind::NotAnObject):
///   batches are not supported, MCP removed them), with `"jsonrpc": "2.0"`
///   ([`BadVersion`](ParseErrorKind::BadVersion)). Both are
///   [-32600](crate::INVALID_REQUEST).
/// - Then ([`InvalidShape`](ParseErrorKind::InvalidShape), -32600 — the
///   first rule that fails wins, in this order):
///   1. none of `jsonrpc`, `id`, `method`, `params`, `result`, `error` may
///      appear twice (other keys are ignored, duplicates included);
///   2. `id`, when present, is a string, an integer in the `i64` range, or
///      `null` (fractions, exponents like `1e3`, larger integers are not ids);
///   3. with a `method` (which must be a string): no `result`, no `error`; an
///      `id` makes it a [`Request`](Message::Request) (a `null` id is
///      refused), no `id` a [`Notification`](Message::Notification);
///   4. without `method`: exactly one of `result` (a
///      [`Response`](Message::Response), non-null `id` required) and `error`
///      (an [`ErrorResponse`](Message::ErrorResponse), `id` required, `null`
///      allowed).
///
///   `BadVersion` is checked before these rules, except rule 1.
/// - Every -32600 error carries the frame's id when it had one valid `id`
///   ([`ParseError::id`]), so a server can answer the request.
/// - A present key keeps its value even when that value is `null`:
///   `"result": null` is a valid response, `"params": null` is handed over as
///   written.
///
/// ```
/// use mcp_framer_jsonrpc::{parse, ParseErrorKind, Kind};
///
/// assert_eq!(parse(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)?.kind(), Kind::Notification);
/// assert_eq!(parse(b"[1]").unwrap_err().kind(), ParseErrorKind::NotAnObject);
/// assert_eq!(parse(b"\xff").unwrap_err().kind(), ParseErrorKind::InvalidUtf8);
/// // The offset of the first invalid byte: a cut 2-byte character, after an
/// // ASCII run long enough for the vectorised check.
/// let cut = format!("{{\"a\":\"{}é", "x".repeat(100)).into_bytes();
/// let error = parse(&cut[..cut.len() - 1]).unwrap_err();
/// assert_eq!(error.detail(), "invalid byte at offset 106");
/// # Ok::<(), mcp_framer_jsonrpc::ParseError>(())
/// ```
pub fn parse(frame: &[u8]) -> Result<Message<'_>, ParseError> {
    let text = utf8(frame)?;
    let top = scan::top_level(text).map_err(|e| match e {
        ScanError::Malformed(at) if at >= text.len() => {
            ParseError::new(ParseErrorKind::Malformed, "unexpected end of the frame")
        }
        ScanError::Malformed(at) => ParseError::new(ParseErrorKind::Malformed, format!("invalid JSON at offset {at}")),
        ScanError::NotAnObject => ParseError::new(ParseErrorKind::NotAnObject, not_an_object(text)),
    })?;
    if let Some(key) = top.duplicate {
        return Err(ParseError::new(ParseErrorKind::InvalidShape, format!("duplicate field `{key}`")));
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

/// The frame as text. `simdutf8` validates (vectorised); on failure
/// `std::str::from_utf8` finds the offset of the first invalid byte for the
/// error.
fn utf8(frame: &[u8]) -> Result<&str, ParseError> {
    simdutf8::basic::from_utf8(frame).map_err(|_| {
        let at = std::str::from_utf8(frame).err().map_or(0, |e| e.valid_up_to());
        ParseError::new(ParseErrorKind::InvalidUtf8, format!("invalid byte at offset {at}"))
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

/// Applies the JSON-RPC rules ([`parse`], rules 2 to 4) to the routing
/// facts.
pub(crate) fn route(fields: Fields<'_>) -> Result<Routed<'_>, ParseError> {
    let error = |kind, detail: &'static str| {
        let id = match &fields.id {
            IdField::Valid(id) => Some(id.to_owned_id()),
            _ => None,
        };
        Err(ParseError::new(kind, detail).with_id(id))
    };
    let shape = |detail| error(ParseErrorKind::InvalidShape, detail);
    if !fields.version_ok {
        return error(ParseErrorKind::BadVersion, "\"jsonrpc\" must be the string \"2.0\"");
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

#[cfg(test)]
mod tests;
