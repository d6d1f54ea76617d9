//! Serializing the messages the host sends: one JSON object and exactly one
//! `\n` per frame.

use serde::Serialize;

use mcp_framer_jsonrpc::Id;

/// A JSON-RPC error object.
#[derive(Serialize)]
struct ErrorObject<'a> {
    code: i64,
    message: &'a str,
}

/// `params` of `notifications/cancelled`.
#[derive(Serialize)]
struct Cancelled<'a> {
    #[serde(rename = "requestId")]
    request_id: &'a Id<'a>,
    reason: &'a str,
}

/// Builds one frame: `{"jsonrpc":"2.0"` and then members, written straight
/// into the frame buffer by serde_json (each value is serialized once, never
/// re-parsed).
///
/// Compact serde_json output never contains a raw newline: inside strings it
/// is escaped as `\n`. A [`RawValue`](serde_json::value::RawValue) is written
/// verbatim, and its whitespace may hold `\n` or `\r`; in valid JSON those
/// bytes can only be whitespace, so [`Builder::finish`] replaces them by
/// spaces, which keeps the value and the framing intact.
struct Builder {
    frame: Vec<u8>,
}

impl Builder {
    fn new() -> Builder {
        let mut frame = Vec::with_capacity(128);
        frame.extend_from_slice(br#"{"jsonrpc":"2.0""#);
        Builder { frame }
    }

    fn member<V: Serialize + ?Sized>(mut self, key: &str, value: &V) -> serde_json::Result<Builder> {
        self.push_member(key, value)?;
        Ok(self)
    }

    /// As [`member`](Self::member), but omitted when `value` serializes to
    /// `null` (a `()` or a `None` means "no params").
    fn optional<V: Serialize + ?Sized>(mut self, key: &str, value: &V) -> serde_json::Result<Builder> {
        let mark = self.frame.len();
        let value_at = self.push_member(key, value)?;
        if self.frame[value_at..] == *b"null" {
            self.frame.truncate(mark);
        }
        Ok(self)
    }

    /// Writes `,"key":value` and returns where the value starts.
    fn push_member<V: Serialize + ?Sized>(&mut self, key: &str, value: &V) -> serde_json::Result<usize> {
        self.frame.push(b',');
        serde_json::to_writer(&mut self.frame, key)?;
        self.frame.push(b':');
        let value_at = self.frame.len();
        serde_json::to_writer(&mut self.frame, value)?;
        Ok(value_at)
    }

    /// Closes the object and appends the one `\n`.
    fn finish(mut self) -> Vec<u8> {
        for byte in self.frame.iter_mut().filter(|b| matches!(b, b'\n' | b'\r')) {
            *byte = b' ';
        }
        self.frame.extend_from_slice(b"}\n");
        self.frame
    }
}

/// A request frame. Params that serialize to `null` are omitted.
pub(crate) fn request<P: Serialize + ?Sized>(id: &Id<'_>, method: &str, params: &P) -> serde_json::Result<Vec<u8>> {
    Ok(Builder::new().member("id", id)?.member("method", method)?.optional("params", params)?.finish())
}

/// A notification frame. Params that serialize to `null` are omitted.
pub(crate) fn notification<P: Serialize + ?Sized>(method: &str, params: &P) -> serde_json::Result<Vec<u8>> {
    Ok(Builder::new().member("method", method)?.optional("params", params)?.finish())
}

/// A success response frame.
pub(crate) fn response<R: Serialize + ?Sized>(id: &Id<'_>, result: &R) -> serde_json::Result<Vec<u8>> {
    Ok(Builder::new().member("id", id)?.member("result", result)?.finish())
}

/// An error response frame.
pub(crate) fn error_response(id: &Id<'_>, code: i64, message: &str) -> Vec<u8> {
    let built = Builder::new().member("id", id).and_then(|b| b.member("error", &ErrorObject { code, message }));
    built.expect("an id, an integer and a string always serialize").finish()
}

/// A `notifications/cancelled` frame for `id`.
pub(crate) fn cancelled(id: &Id<'_>, reason: &str) -> Vec<u8> {
    let params = Cancelled { request_id: id, reason };
    notification("notifications/cancelled", &params).expect("an id and a string always serialize")
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use serde_json::value::RawValue;

    use super::*;
    use mcp_framer_jsonrpc::{Kind, parse};

    fn line(frame: &[u8]) -> &[u8] {
        assert_eq!(frame.iter().filter(|&&b| b == b'\n').count(), 1, "exactly one newline");
        frame.strip_suffix(b"\n").expect("ends in a newline")
    }

    #[test]
    fn every_frame_is_one_object_and_one_newline() {
        let id = Id::Number(7);
        let frame =
            request(&id, "tools/call", &json!({"name": "echo", "arguments": {"text": "a\nb\r\u{1f980}"}})).unwrap();
        let message = parse(line(&frame)).unwrap();
        assert_eq!((message.kind(), message.id(), message.method()), (Kind::Request, Some(&id), Some("tools/call")));
        let params: serde_json::Value = serde_json::from_str(message.payload().unwrap().get()).unwrap();
        assert_eq!(params["arguments"]["text"], "a\nb\r\u{1f980}");

        let frame = request(&Id::from("x"), "ping", &()).unwrap();
        assert_eq!(line(&frame), br#"{"jsonrpc":"2.0","id":"x","method":"ping"}"#);
        let frame = notification("notifications/initialized", &None::<()>).unwrap();
        assert_eq!(line(&frame), br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        let frame = cancelled(&Id::Number(3), "timed out after 1s");
        assert_eq!(
            line(&frame),
            br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3,"reason":"timed out after 1s"}}"#
        );
        let frame = error_response(&Id::from("s"), -32000, "busy");
        assert_eq!(line(&frame), br#"{"jsonrpc":"2.0","id":"s","error":{"code":-32000,"message":"busy"}}"#);
        let frame = response(&Id::Number(1), &json!({})).unwrap();
        assert_eq!(line(&frame), br#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
    }

    #[test]
    fn raw_params_with_newlines_in_whitespace_stay_one_line() {
        let raw = RawValue::from_string("{\r\n  \"text\": \"keep \\n escaped\"\n}".to_owned()).unwrap();
        let frame = request(&Id::Number(1), "echo", &raw).unwrap();
        let message = parse(line(&frame)).unwrap();
        let params: serde_json::Value = serde_json::from_str(message.payload().unwrap().get()).unwrap();
        assert_eq!(params, json!({"text": "keep \n escaped"}));
    }
}
