//! The encoder: every message the host or the server sends, as one line.

use std::fmt;

use serde::Serialize;

use crate::{ErrorObject, Id};

/// Writes JSON-RPC 2.0 messages as frames: one compact JSON object, then
/// exactly one `\n`, at most [`max_frame`](Self::max_frame) bytes before the
/// `\n`.
///
/// Each value is serialized once by serde_json, straight into the frame,
/// never re-parsed. Members are written in the order `jsonrpc`, `id`,
/// `method`, `params` / `result` / `error`.
///
/// # The newline rule
///
/// A frame never contains a `\n` or a `\r` before its final `\n`: every raw
/// `\n` and `\r` byte in the serialized JSON is replaced by a space. This
/// never changes a valid JSON value, because in valid JSON (RFC 8259) those
/// bytes can only be insignificant whitespace:
///
/// - inside a string, characters below U+0020 must be escaped (`\n` is
///   written as the two bytes `\` `n`); serde_json always escapes them;
/// - outside strings, JSON has only structural characters, literals, numbers
///   and whitespace (space, tab, `\n`, `\r`);
/// - a byte below 0x80 is never part of a multi-byte UTF-8 character.
///
/// So serde_json's own output never holds one, and the only way one gets in
/// is the whitespace of a caller's pre-serialized JSON (a serde_json
/// `RawValue` is written verbatim), e.g. pretty-printed arguments. Replacing
/// keeps such a message deliverable and its value intact, where refusing it
/// would fail a valid message; and whatever a raw value holds, the frame stays
/// one line. `\r` goes too, so that readers that also end lines at a bare
/// `\r` see one line.
///
/// # The size limit
///
/// A frame whose JSON (without its `\n`) is longer than `max_frame` bytes is
/// refused with [`EncodeError::TooLarge`], the peer's transport limit being
/// the reason: a peer discards a frame over its limit, so a request or a
/// response sent anyway would never be answered or matched. The message is
/// serialized whole before it is measured.
///
/// # Example
///
/// ```
/// use mcp_framer_jsonrpc::{Encoder, EncodeError, ErrorObject, Id};
/// use serde_json::json;
///
/// let encoder = Encoder::new(1 << 20);
/// let frame = encoder.request(&Id::Number(1), "tools/call", &json!({"name": "echo"}))?;
/// assert_eq!(frame, b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\"}}\n");
/// // Params that serialize to `null` are left out.
/// let frame = encoder.notification("notifications/initialized", &())?;
/// assert_eq!(frame, b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n");
/// let frame = encoder.error_response(None, &ErrorObject::standard(-32700))?;
/// assert_eq!(frame, b"{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":\"Parse error\"}}\n");
///
/// let small = Encoder::new(32);
/// let Err(EncodeError::TooLarge { len, max: 32 }) = small.response(&Id::Number(1), &"x".repeat(40)) else { panic!() };
/// assert_eq!(len, 76);
/// # Ok::<(), EncodeError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Encoder {
    max_frame: usize,
}

impl Encoder {
    /// An encoder whose frames are at most `max_frame` bytes, `\n` excluded
    /// (the peer's transport limit).
    pub const fn new(max_frame: usize) -> Encoder {
        Encoder { max_frame }
    }

    /// An encoder without a size limit (for a sender that does not know its
    /// peer's limit).
    pub const fn unlimited() -> Encoder {
        Encoder::new(usize::MAX)
    }

    /// The largest frame this encoder writes, in bytes, `\n` excluded.
    pub const fn max_frame(&self) -> usize {
        self.max_frame
    }

    /// A request frame. Params that serialize to `null` (`&()`, `&None`) are
    /// left out.
    pub fn request<P: Serialize + ?Sized>(
        &self,
        id: &Id<'_>,
        method: &str,
        params: &P,
    ) -> Result<Vec<u8>, EncodeError> {
        let mut frame = Frame::new();
        frame.member(b"id", id)?;
        frame.member(b"method", method)?;
        frame.optional(b"params", params)?;
        frame.finish(self.max_frame)
    }

    /// A notification frame. Params that serialize to `null` are left out.
    pub fn notification<P: Serialize + ?Sized>(&self, method: &str, params: &P) -> Result<Vec<u8>, EncodeError> {
        let mut frame = Frame::new();
        frame.member(b"method", method)?;
        frame.optional(b"params", params)?;
        frame.finish(self.max_frame)
    }

    /// A success response frame (a `null` result is written: it is a result).
    pub fn response<R: Serialize + ?Sized>(&self, id: &Id<'_>, result: &R) -> Result<Vec<u8>, EncodeError> {
        let mut frame = Frame::new();
        frame.member(b"id", id)?;
        frame.member(b"result", result)?;
        frame.finish(self.max_frame)
    }

    /// An error response frame; `id: None` writes `"id":null` (the answer to
    /// a frame whose id could not be read).
    pub fn error_response(&self, id: Option<&Id<'_>>, error: &ErrorObject) -> Result<Vec<u8>, EncodeError> {
        let mut frame = Frame::new();
        frame.member(b"id", &id)?;
        frame.member(b"error", error)?;
        frame.finish(self.max_frame)
    }

    /// A frame of one whole message built elsewhere (another SDK's typed
    /// message, which writes its own `jsonrpc` member): serialized once,
    /// then the same newline rule and size limit as every other frame. The
    /// message is not checked to be JSON-RPC; it must serialize to one
    /// JSON value.
    ///
    /// ```
    /// use mcp_framer_jsonrpc::{Encoder, EncodeError};
    /// use serde_json::json;
    ///
    /// let message = json!({"jsonrpc": "2.0", "id": 1, "result": {}});
    /// assert_eq!(Encoder::new(64).message(&message)?, b"{\"id\":1,\"jsonrpc\":\"2.0\",\"result\":{}}\n");
    /// assert!(matches!(Encoder::new(8).message(&message), Err(EncodeError::TooLarge { len: 36, max: 8 })));
    /// # Ok::<(), EncodeError>(())
    /// ```
    pub fn message<M: Serialize + ?Sized>(&self, message: &M) -> Result<Vec<u8>, EncodeError> {
        let mut bytes = Vec::with_capacity(128);
        serde_json::to_writer(&mut bytes, message)?;
        Frame { bytes }.finish_value(self.max_frame)
    }
}

/// Why a message could not become a frame.
#[derive(Debug)]
#[non_exhaustive]
pub enum EncodeError {
    /// A value failed to serialize (its `Serialize` impl returned an error,
    /// or a map had non-string keys).
    Serialize(serde_json::Error),
    /// The frame would be over the transport limit.
    TooLarge {
        /// The frame's length in bytes, `\n` excluded.
        len: usize,
        /// The limit ([`Encoder::max_frame`]).
        max: usize,
    },
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EncodeError::Serialize(err) => write!(f, "serialization failed: {err}"),
            EncodeError::TooLarge { len, max } => {
                write!(f, "message of {len} bytes exceeds the transport limit of {max} bytes")
            }
        }
    }
}

impl std::error::Error for EncodeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            EncodeError::Serialize(err) => Some(err),
            EncodeError::TooLarge { .. } => None,
        }
    }
}

impl From<serde_json::Error> for EncodeError {
    fn from(err: serde_json::Error) -> EncodeError {
        EncodeError::Serialize(err)
    }
}

/// A frame being written: `{"jsonrpc":"2.0"`, then `,"key":value` members.
struct Frame {
    bytes: Vec<u8>,
}

impl Frame {
    fn new() -> Frame {
        let mut bytes = Vec::with_capacity(128);
        bytes.extend_from_slice(br#"{"jsonrpc":"2.0""#);
        Frame { bytes }
    }

    /// Writes `,"key":value` (`key` needs no escaping) and returns where the
    /// value starts.
    fn member<V: Serialize + ?Sized>(&mut self, key: &[u8], value: &V) -> serde_json::Result<usize> {
        self.bytes.extend_from_slice(b",\"");
        self.bytes.extend_from_slice(key);
        self.bytes.extend_from_slice(b"\":");
        let value_at = self.bytes.len();
        serde_json::to_writer(&mut self.bytes, value)?;
        Ok(value_at)
    }

    /// As [`member`](Self::member), but left out when `value` serializes to
    /// `null`.
    fn optional<V: Serialize + ?Sized>(&mut self, key: &[u8], value: &V) -> serde_json::Result<()> {
        let mark = self.bytes.len();
        let value_at = self.member(key, value)?;
        if self.bytes[value_at..] == *b"null" {
            self.bytes.truncate(mark);
        }
        Ok(())
    }

    /// Closes the object, checks the limit, applies the newline rule and
    /// appends the one `\n`.
    fn finish(mut self, max_frame: usize) -> Result<Vec<u8>, EncodeError> {
        self.bytes.push(b'}');
        self.finish_value(max_frame)
    }

    /// Checks the limit of a complete value, applies the newline rule and
    /// appends the one `\n`.
    fn finish_value(mut self, max_frame: usize) -> Result<Vec<u8>, EncodeError> {
        let len = self.bytes.len();
        if len > max_frame {
            return Err(EncodeError::TooLarge { len, max: max_frame });
        }
        let mut at = 0;
        while let Some(found) = memchr::memchr2(b'\n', b'\r', &self.bytes[at..]) {
            self.bytes[at + found] = b' ';
            at += found + 1;
        }
        self.bytes.push(b'\n');
        Ok(self.bytes)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use serde_json::value::RawValue;

    use super::*;
    use crate::{Kind, parse, scan};

    /// The frame without its `\n`, checking it has exactly one, at the end.
    fn line(frame: &[u8]) -> &[u8] {
        assert_eq!(frame.iter().filter(|&&b| b == b'\n').count(), 1, "exactly one newline");
        assert!(!frame.contains(&b'\r'), "no carriage return");
        frame.strip_suffix(b"\n").expect("ends in a newline")
    }

    const ENCODER: Encoder = Encoder::unlimited();

    #[test]
    fn every_frame_is_one_object_and_one_newline() {
        let id = Id::Number(7);
        let frame = ENCODER
            .request(&id, "tools/call", &json!({"name": "echo", "arguments": {"text": "a\nb\r\u{1f980}"}}))
            .unwrap();
        let message = parse(line(&frame)).unwrap();
        assert_eq!((message.kind(), message.id(), message.method()), (Kind::Request, Some(&id), Some("tools/call")));
        let params: serde_json::Value = message.payload().unwrap().deserialize().unwrap();
        assert_eq!(params["arguments"]["text"], "a\nb\r\u{1f980}");

        let frame = ENCODER.request(&Id::from("x"), "ping", &()).unwrap();
        assert_eq!(line(&frame), br#"{"jsonrpc":"2.0","id":"x","method":"ping"}"#);
        let frame = ENCODER.notification("notifications/initialized", &None::<()>).unwrap();
        assert_eq!(line(&frame), br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        let frame = ENCODER.notification("notifications/progress", &json!({"progress": 1})).unwrap();
        assert_eq!(line(&frame), br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}"#);
        let frame = ENCODER.error_response(Some(&Id::from("s")), &ErrorObject::new(-32000, "busy")).unwrap();
        assert_eq!(line(&frame), br#"{"jsonrpc":"2.0","id":"s","error":{"code":-32000,"message":"busy"}}"#);
        let error = ErrorObject::internal("boom").with_data(json!({"line": 3}));
        let frame = ENCODER.error_response(None, &error).unwrap();
        assert_eq!(
            line(&frame),
            br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"boom","data":{"line":3}}}"#
        );
        let frame = ENCODER.response(&Id::Number(1), &json!({})).unwrap();
        assert_eq!(line(&frame), br#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
        let frame = ENCODER.response(&Id::Number(1), &()).unwrap();
        assert_eq!(line(&frame), br#"{"jsonrpc":"2.0","id":1,"result":null}"#);
    }

    #[test]
    fn every_kind_parses_back_to_what_was_encoded() {
        let id = Id::from("a\"b\n");
        let error = ErrorObject::new(-32601, "no\r\nsuch");
        let frames = [
            (ENCODER.request(&id, "m\n", &json!([1])).unwrap(), Kind::Request, Some("[1]")),
            (ENCODER.notification("m\n", &json!([1])).unwrap(), Kind::Notification, Some("[1]")),
            (ENCODER.response(&id, &json!("r")).unwrap(), Kind::Response, Some("\"r\"")),
            (ENCODER.error_response(Some(&id), &error).unwrap(), Kind::ErrorResponse, None),
        ];
        for (frame, kind, payload) in frames {
            let message = parse(line(&frame)).unwrap();
            assert_eq!(message.kind(), kind);
            assert_eq!(message.id(), (kind != Kind::Notification).then_some(&id));
            if let Some(method) = message.method() {
                assert_eq!(method, "m\n");
            }
            match payload {
                Some(payload) => assert_eq!(message.payload().unwrap().get(), payload),
                None => assert_eq!(message.payload().unwrap().deserialize::<ErrorObject>().unwrap(), error),
            }
        }
    }

    #[test]
    fn raw_json_with_newlines_in_whitespace_stays_one_line_and_keeps_its_value() {
        let raw =
            RawValue::from_string("{\r\n  \"text\": \"keep \\n escaped\",\n\t\"n\": [1,\r2]\n}".to_owned()).unwrap();
        for frame in [
            ENCODER.request(&Id::Number(1), "echo", &raw).unwrap(),
            ENCODER.notification("echo", &raw).unwrap(),
            ENCODER.response(&Id::Number(1), &raw).unwrap(),
        ] {
            let message = parse(line(&frame)).unwrap();
            let value: serde_json::Value = message.payload().unwrap().deserialize().unwrap();
            assert_eq!(value, json!({"text": "keep \n escaped", "n": [1, 2]}));
        }
        // Pretty-printed values of every shape: the frame is one line and
        // the value survives.
        let values = [
            json!({"a": [1, {"b": null, "c": "x\ny\r"}], "d": {}, "e": [], "f": -0.5e-3, "g": true}),
            json!([[[["deep"]]], "\u{2028}\u{85}", {"k\n": "v\r\n"}]),
            json!("only a string\n"),
        ];
        for value in values {
            let pretty = serde_json::to_string_pretty(&value).unwrap();
            assert!(pretty.contains('\n') || !value.is_object());
            let raw = RawValue::from_string(pretty.replace('\n', "\r\n")).unwrap();
            let frame = ENCODER.response(&Id::Number(2), &raw).unwrap();
            let message = parse(line(&frame)).unwrap();
            assert_eq!(message.payload().unwrap().deserialize::<serde_json::Value>().unwrap(), value);
        }
    }

    #[test]
    fn raw_newlines_in_valid_json_are_only_whitespace() {
        // Every position of a `\n` or `\r` byte inserted into a valid text
        // either breaks the JSON or is whitespace: replacing it by a space
        // leaves the same value. (The claim the newline rule rests on.)
        let seed = r#"{"a":[1,-2.5e3,"x\u00e9\n",true,null],"é🦀":{"c":"\\"}}"#;
        let value: serde_json::Value = serde_json::from_str(seed).unwrap();
        let mut whitespace = 0;
        for at in 0..=seed.len() {
            for byte in [b'\n', b'\r'] {
                let mut bytes = seed.as_bytes().to_vec();
                bytes.insert(at, byte);
                let Ok(text) = std::str::from_utf8(&bytes) else { continue };
                let valid = scan::top_level(text).is_ok();
                assert_eq!(valid, serde_json::from_str::<serde_json::Value>(text).is_ok(), "{text:?}");
                if valid {
                    whitespace += 1;
                    let spaced = text.replace(['\n', '\r'], " ");
                    assert_eq!(serde_json::from_str::<serde_json::Value>(&spaced).unwrap(), value, "{text:?}");
                }
            }
        }
        assert!(whitespace > 20, "{whitespace}");
    }

    #[test]
    fn the_limit_counts_bytes_without_the_newline() {
        let frame = ENCODER.response(&Id::Number(1), "é").unwrap();
        let len = frame.len() - 1;
        assert_eq!(len, r#"{"jsonrpc":"2.0","id":1,"result":"é"}"#.len());
        assert_eq!(Encoder::new(len).response(&Id::Number(1), "é").unwrap(), frame);
        let err = Encoder::new(len - 1).response(&Id::Number(1), "é").unwrap_err();
        assert!(matches!(err, EncodeError::TooLarge { len: l, max } if l == len && max == len - 1), "{err:?}");
        assert_eq!(err.to_string(), format!("message of {len} bytes exceeds the transport limit of {} bytes", len - 1));
        let err = Encoder::new(10).error_response(None, &ErrorObject::standard(-32700)).unwrap_err();
        assert!(matches!(err, EncodeError::TooLarge { max: 10, .. }), "{err:?}");
    }

    #[test]
    fn a_whole_message_gets_the_newline_rule_and_the_limit() {
        let raw =
            RawValue::from_string("{\"jsonrpc\":\"2.0\",\r\n\"id\":\"a\",\n\"result\":{\"t\":\"x\\ny\"}}".to_owned())
                .unwrap();
        let frame = ENCODER.message(&raw).unwrap();
        let message = parse(line(&frame)).unwrap();
        assert_eq!((message.kind(), message.id()), (Kind::Response, Some(&Id::from("a"))));
        assert_eq!(message.payload().unwrap().deserialize::<serde_json::Value>().unwrap(), json!({"t": "x\ny"}));
        let len = frame.len() - 1;
        assert_eq!(Encoder::new(len).message(&raw).unwrap(), frame);
        let err = Encoder::new(len - 1).message(&raw).unwrap_err();
        assert!(matches!(err, EncodeError::TooLarge { len: l, max } if l == len && max == len - 1), "{err:?}");
        use std::collections::BTreeMap;
        let bad: BTreeMap<(u8, u8), u8> = [((1, 2), 3)].into();
        assert!(matches!(ENCODER.message(&bad), Err(EncodeError::Serialize(_))));
    }

    #[test]
    fn serialize_errors_are_typed() {
        use std::collections::BTreeMap;
        let bad: BTreeMap<(u8, u8), u8> = [((1, 2), 3)].into();
        let err = ENCODER.notification("m", &bad).unwrap_err();
        assert!(matches!(err, EncodeError::Serialize(_)), "{err:?}");
        assert!(std::error::Error::source(&err).is_some());
    }
}
