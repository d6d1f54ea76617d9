//! The payload as [`parse`](crate::parse) hands it over: JSON text checked,
//! not built.

use std::fmt;

use serde::Deserialize;

/// One JSON value as written in a frame: a slice of the frame, checked to be
/// well-formed JSON (RFC 8259, the grammar serde_json accepts) but never
/// built into a tree nor copied.
///
/// Only [`parse`](crate::parse) makes one, so the text is always exactly one
/// JSON value without surrounding whitespace. Build what you need from it with
/// [`deserialize`](Self::deserialize) (a struct, a `serde_json::Value`, or a
/// serde_json `&RawValue` to embed in a message you serialize), or read the
/// text with [`get`](Self::get).
///
/// ```
/// use mcp_framer_jsonrpc::parse;
/// use serde::Deserialize;
///
/// #[derive(Deserialize)]
/// struct Call<'a> {
///     name: &'a str,
/// }
///
/// let frame = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}"#;
/// let params = parse(frame)?.payload().expect("params");
/// assert_eq!(params.get(), r#"{"name":"echo"}"#);
/// assert_eq!(params.to_string(), r#"{"name":"echo"}"#);
/// let call: Call<'_> = params.deserialize()?; // borrows from `frame`
/// assert_eq!(call.name, "echo");
/// // A serde_json `&RawValue` (feature `raw_value`), borrowed, to forward it:
/// let forward: &serde_json::value::RawValue = params.deserialize()?;
/// assert_eq!(forward.get(), params.get());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct RawJson<'a> {
    json: &'a str,
}

impl<'a> RawJson<'a> {
    /// Wraps `json`, which the scanner has validated as one JSON value.
    pub(crate) fn new(json: &'a str) -> RawJson<'a> {
        RawJson { json }
    }

    /// The JSON text, exactly as written in the frame (a slice of it).
    pub fn get(&self) -> &'a str {
        self.json
    }

    /// Deserializes the value into `T` with serde_json; `T` may borrow from
    /// the frame (`&'a str` fields, `&'a RawValue`). The error is serde_json's
    /// (the text is valid JSON, so it is a type mismatch).
    pub fn deserialize<T: Deserialize<'a>>(&self) -> serde_json::Result<T> {
        serde_json::from_str(self.json)
    }
}

/// The JSON text.
impl fmt::Display for RawJson<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.json)
    }
}

impl fmt::Debug for RawJson<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("RawJson").field(&self.json).finish()
    }
}
