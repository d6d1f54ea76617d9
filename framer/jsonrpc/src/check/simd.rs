//! The simd-json parse path (feature `check`, unstable): the same classification as
//! [`parse`](crate::parse), on a `&mut [u8]` frame that simd-json parses in
//! place.

use std::borrow::Cow;

use simd_json::{ErrorType, Node, StaticNode, Tape};

use crate::parse::{Fields, IdField, MethodField, Routed, route};
use crate::{Id, Kind, ParseError, ParseErrorKind};

/// A message classified by [`parse_in_place`]: the routing fields, and the
/// simd-json tape of the whole frame for in-place access to the payload.
///
/// Strings (method, string ids, strings in the payload) borrow from the
/// frame, which simd-json has unescaped in place: after parsing, the frame's
/// bytes are no longer the JSON text that arrived.
#[derive(Debug)]
pub struct InPlace<'a> {
    tape: Tape<'a>,
    routed: Routed<'a>,
}

impl<'a> InPlace<'a> {
    /// The kind of message.
    pub fn kind(&self) -> Kind {
        self.routed.kind
    }

    /// The id, as [`Message::id`](crate::Message::id) returns it.
    pub fn id(&self) -> Option<&Id<'a>> {
        self.routed.id.as_ref()
    }

    /// The method of a request or notification.
    pub fn method(&self) -> Option<&str> {
        self.routed.method.as_deref()
    }

    /// The payload, as [`Message::payload`](crate::Message::payload) selects
    /// it (`params` if present, `result`, or `error`), as a view on the tape:
    /// nothing is copied or allocated.
    pub fn payload(&self) -> Option<simd_json::tape::Value<'_, 'a>> {
        let key = match self.routed.kind {
            Kind::Request | Kind::Notification => "params",
            Kind::Response => "result",
            Kind::ErrorResponse => "error",
        };
        self.tape.as_value().get(key)
    }

    /// The tape of the whole frame.
    pub fn tape(&self) -> &Tape<'a> {
        &self.tape
    }
}

/// Classifies `frame` like [`parse`](crate::parse), parsing it in place with
/// simd-json (which unescapes strings inside `frame`).
///
/// It agrees with [`parse`](crate::parse) on the kind, id, method, error
/// kind and recovered id of every frame, except on two classes of input that
/// it refuses as [`Malformed`](ParseErrorKind::Malformed) while
/// [`parse`](crate::parse) accepts them, because its scanner checks only the
/// grammar of numbers and escapes in the raw (unmaterialised) payload where
/// simd-json converts them:
///
/// - a number literal simd-json cannot represent, anywhere in the frame: an
///   integer outside `i64::MIN..=u64::MAX` (`18446744073709551616`), a
///   value that overflows `f64` (`1e400`), or an exponent of more than about
///   ten digits (`0e40777777777`);
/// - a `\u` escape of a lone surrogate (`"\ud800"`), anywhere in the frame.
///   simd-json 0.17 refuses some and silently decodes others as U+0000, so
///   this function refuses them all before simd-json runs.
///
/// It also refuses frames holding a NUL byte before simd-json runs:
/// simd-json 0.17 accepts `[true\0garbage]` as `[true]`. (The
/// parser's scanner refuses them too, so both paths agree.)
///
/// `mcp_framer_jsonrpc::check::check_parse` (feature `check`) checks the
/// agreement, and the two classes by the outcomes each
/// path returns.
///
/// The whole frame is checked as UTF-8 first (as [`parse`](crate::parse)
/// does), so [`InvalidUtf8`](ParseErrorKind::InvalidUtf8) wins over
/// syntax errors in both paths. After an error the frame's content is
/// unspecified (simd-json may have unescaped strings in it).
///
/// ```
/// use mcp_framer_jsonrpc::check::parse_in_place;
/// use mcp_framer_jsonrpc::{Id, Kind};
/// use simd_json::prelude::*;
///
/// let mut frame = br#"{"jsonrpc":"2.0","id":"a\u0062","method":"tools/call","params":{"n":1}}"#.to_vec();
/// let message = parse_in_place(&mut frame)?;
/// assert_eq!(message.kind(), Kind::Request);
/// assert_eq!(message.id(), Some(&Id::from("ab")));
/// assert_eq!(message.method(), Some("tools/call"));
/// let params = message.payload().expect("params");
/// assert_eq!(params.get("n").and_then(|n| n.as_u64()), Some(1));
/// # Ok::<(), mcp_framer_jsonrpc::ParseError>(())
/// ```
pub fn parse_in_place(frame: &mut [u8]) -> Result<InPlace<'_>, ParseError> {
    if let Err(e) = std::str::from_utf8(frame) {
        return Err(ParseError::new(
            ParseErrorKind::InvalidUtf8,
            format!("invalid byte at offset {}", e.valid_up_to()),
        ));
    }
    // simd-json accepts a NUL byte after `true`, `false` or `null` and skips
    // what follows it (`[true\0garbage]` parses as `[true]`); JSON never
    // contains a raw NUL, so such frames are refused here.
    if let Some(at) = memchr::memchr(0, frame) {
        return Err(ParseError::new(ParseErrorKind::Malformed, format!("NUL byte at offset {at}")));
    }
    // simd-json refuses some lone surrogate escapes and decodes others as
    // U+0000 (`"\ud800"`); refuse them all.
    if let Some(at) = lone_surrogate_escape(frame) {
        return Err(ParseError::new(
            ParseErrorKind::Malformed,
            format!("lone surrogate escape at offset {at} (not decodable)"),
        ));
    }
    // simd-json converts a float with 19 or more significant digits without
    // checking the byte after it (`1234567890123456789.0x` parses as a
    // number); refuse such a number when it is not followed by a delimiter.
    if let Some(at) = long_number_without_delimiter(frame) {
        return Err(ParseError::new(
            ParseErrorKind::Malformed,
            format!("number at offset {at} is not followed by a delimiter"),
        ));
    }
    let tape = simd_json::to_tape(frame).map_err(|e| match e.error() {
        ErrorType::InvalidUtf8 => ParseError::new(ParseErrorKind::InvalidUtf8, e.to_string()),
        _ => ParseError::new(ParseErrorKind::Malformed, e.to_string()),
    })?;
    let routed = route(fields(&tape.0)?)?;
    Ok(InPlace { tape, routed })
}

/// Reads the routing facts from the top-level object on the tape.
fn fields<'a>(nodes: &[Node<'a>]) -> Result<Fields<'a>, ParseError> {
    let len = match nodes.first() {
        Some(&Node::Object { len, .. }) => len,
        Some(other) => {
            let what = match other {
                Node::Array { .. } => "an array (batches are not supported)",
                Node::String(_) => "a string",
                Node::Static(StaticNode::Null) => "null",
                Node::Static(StaticNode::Bool(_)) => "a boolean",
                _ => "a number",
            };
            return Err(ParseError::new(ParseErrorKind::NotAnObject, format!("top-level value is {what}")));
        }
        None => return Err(ParseError::new(ParseErrorKind::Malformed, "empty tape")),
    };
    let mut fields = Fields {
        version_ok: false,
        id: IdField::Absent,
        method: MethodField::Absent,
        has_result: false,
        has_error: false,
    };
    let mut seen = [false; KEYS.len()];
    let mut at = 1;
    for _ in 0..len {
        let (Some(Node::String(key)), Some(value)) = (nodes.get(at), nodes.get(at + 1)) else {
            return Err(ParseError::new(ParseErrorKind::Malformed, "unexpected tape layout"));
        };
        at += 1 + span(value);
        let Some(slot) = KEYS.iter().position(|k| k == key) else { continue };
        if std::mem::replace(&mut seen[slot], true) {
            return Err(ParseError::new(ParseErrorKind::InvalidShape, format!("duplicate field `{key}`")));
        }
        match slot {
            0 => fields.version_ok = matches!(value, Node::String("2.0")),
            1 => fields.id = id_field(value),
            2 => {
                fields.method = match value {
                    Node::String(method) => MethodField::Str(Cow::Borrowed(method)),
                    _ => MethodField::Invalid,
                }
            }
            3 => {}
            4 => fields.has_result = true,
            _ => fields.has_error = true,
        }
    }
    Ok(fields)
}

/// The keys that route a message, in the order `fields` matches on.
const KEYS: [&str; 6] = ["jsonrpc", "id", "method", "params", "result", "error"];

/// How many tape nodes a value occupies, its own node included.
fn span(node: &Node<'_>) -> usize {
    match node {
        Node::Object { count, .. } | Node::Array { count, .. } => count + 1,
        _ => 1,
    }
}

fn id_field<'a>(node: &Node<'a>) -> IdField<'a> {
    match *node {
        Node::String(s) => IdField::Valid(Id::Str(Cow::Borrowed(s))),
        Node::Static(StaticNode::Null) => IdField::Null,
        Node::Static(StaticNode::I64(n)) => IdField::Valid(Id::Number(n)),
        Node::Static(StaticNode::U64(n)) => {
            i64::try_from(n).map_or(IdField::Invalid, |n| IdField::Valid(Id::Number(n)))
        }
        _ => IdField::Invalid,
    }
}

/// The offset of the first number, outside strings, that has at least 19
/// significant digits and is not a complete JSON number followed by
/// whitespace, a structural character or the end of the frame. Cheap on
/// frames without a long number: it samples every 19th byte for a run of 19
/// or more digits and dots (a number's significand is one such run) and
/// scans the frame only when it finds one.
pub(crate) fn long_number_without_delimiter(frame: &[u8]) -> Option<usize> {
    const LONG: usize = 19;
    // A run of LONG or more bytes covers a multiple of LONG: test only those.
    let digitish = |b: u8| b.wrapping_sub(b'0') < 10 || b == b'.';
    let mut has_long_run = false;
    let mut i = 0;
    while i < frame.len() {
        if digitish(frame[i]) {
            let left = frame[..i].iter().rev().take_while(|&&b| digitish(b)).count();
            let right = frame[i..].iter().take_while(|&&b| digitish(b)).count();
            if left + right >= LONG {
                has_long_run = true;
                break;
            }
        }
        i += LONG;
    }
    if !has_long_run {
        return None;
    }
    let delimiter = |b: u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | b',' | b':' | b'[' | b']' | b'{' | b'}' | b'"');
    let mut i = 0;
    while i < frame.len() {
        match frame[i] {
            b'"' => {
                // Skip the string: to its closing quote, past escapes.
                i += 1;
                loop {
                    let Some(found) = memchr::memchr2(b'"', b'\\', frame.get(i..).unwrap_or_default()) else {
                        return None; // an unterminated string: simd-json refuses it
                    };
                    i += found + 1;
                    if frame[i - 1] == b'"' {
                        break;
                    }
                    i += 1;
                }
            }
            b'-' | b'0'..=b'9' => {
                let len = frame[i..].iter().position(|&b| delimiter(b)).unwrap_or(frame.len() - i);
                let token = &frame[i..i + len];
                let digits = token.iter().take_while(|b| b.is_ascii_digit() || matches!(b, b'-' | b'.')).count();
                if digits >= LONG && !is_json_number(token) {
                    return Some(i);
                }
                i += len;
            }
            _ => i += 1,
        }
    }
    None
}

/// Whether `token` is exactly one JSON number.
fn is_json_number(token: &[u8]) -> bool {
    let digits = |t: &[u8]| t.iter().take_while(|b| b.is_ascii_digit()).count();
    let mut t = token.strip_prefix(b"-").unwrap_or(token);
    let int = digits(t);
    if int == 0 || (int > 1 && t[0] == b'0') {
        return false;
    }
    t = &t[int..];
    if let Some(rest) = t.strip_prefix(b".") {
        let frac = digits(rest);
        if frac == 0 {
            return false;
        }
        t = &rest[frac..];
    }
    if let Some(rest) = t.strip_prefix(b"e").or_else(|| t.strip_prefix(b"E")) {
        let rest = rest.strip_prefix(b"+").or_else(|| rest.strip_prefix(b"-")).unwrap_or(rest);
        let exp = digits(rest);
        if exp == 0 {
            return false;
        }
        t = &rest[exp..];
    }
    t.is_empty()
}

/// The offset of the first `\uXXXX` escape that encodes a surrogate not
/// part of a high-low pair, if any. Scans the whole frame without tracking
/// strings: a backslash outside a string makes the frame malformed anyway.
pub(crate) fn lone_surrogate_escape(frame: &[u8]) -> Option<usize> {
    let unit = |at: usize| -> Option<u16> {
        let hex = frame.get(at + 2..at + 6)?;
        let hex = std::str::from_utf8(hex).ok()?;
        u16::from_str_radix(hex, 16).ok()
    };
    let mut from = 0;
    while let Some(found) = memchr::memmem::find(&frame[from..], b"\\u") {
        let at = from + found;
        from = at + 2;
        // An odd number of backslashes before this one escapes it.
        let before = frame[..at].iter().rev().take_while(|&&b| b == b'\\').count();
        if before % 2 == 1 {
            continue;
        }
        match unit(at) {
            Some(0xD800..=0xDBFF) => {
                let low = frame.get(at + 6..at + 8) == Some(b"\\u") && matches!(unit(at + 6), Some(0xDC00..=0xDFFF));
                if !low {
                    return Some(at);
                }
                from = at + 12;
            }
            Some(0xDC00..=0xDFFF) => return Some(at),
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod long_number_tests {
    use super::{long_number_without_delimiter, parse_in_place};

    #[test]
    fn a_long_float_followed_by_junk_is_malformed_and_valid_long_numbers_pass() {
        for junk in ["123456789012345678901234567.9x0", "123456789012345678909e5x", "1234567890.123456789\u{7f}"] {
            let mut frame = format!("{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{junk}}}").into_bytes();
            assert!(long_number_without_delimiter(&frame).is_some(), "{junk}");
            assert!(parse_in_place(&mut frame).is_err(), "{junk}");
        }
        for fine in ["123456789012345678901234567.9", "-1234567890123456789012.5e-3", "\"12345678901234567890x\""] {
            let mut frame = format!("{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":[{fine}, 1]}}").into_bytes();
            assert_eq!(long_number_without_delimiter(&frame), None, "{fine}");
            assert!(parse_in_place(&mut frame).is_ok(), "{fine}");
        }
    }
}
