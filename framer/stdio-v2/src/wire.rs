//! The wire both sides share: the endpoint, the headers a request carries
//! and how the server checks them against the body, the event-stream
//! framing, and how each side recognises the other's first bytes.
//!
//! Pure functions, no I/O: [`server`](crate::server) and
//! [`host`](crate::host) both use them, and they are unit-tested here.

use std::borrow::Cow;

use bytes::Bytes;
use http::HeaderMap;
use mcp_framer_jsonrpc::protocol::VERSIONS;
use mcp_framer_jsonrpc::{ErrorObject, HEADER_MISMATCH, RawJson};
use serde::Deserialize;
use serde_json::value::RawValue;

/// The one endpoint (ours: the path). Another path is answered `404`,
/// another method on it `405`.
pub const ENDPOINT: &str = "/mcp";
/// The protocol version header (`MCP-Protocol-Version`), lower case as HTTP/2
/// sends header names. It mirrors the body's
/// [`META_PROTOCOL_VERSION`](mcp_framer_jsonrpc::protocol::META_PROTOCOL_VERSION)
/// when the request carries one.
pub const PROTOCOL_VERSION: &str = "mcp-protocol-version";
/// The method header: the body's `method`, on every request.
pub const METHOD: &str = "mcp-method";
/// The name header: `params.name` (`tools/call`, `prompts/get`) or
/// `params.uri` (`resources/read`), Base64-sentinel encoded when it is not
/// a plain header-safe ASCII value.
pub const NAME: &str = "mcp-name";
/// The request's `Accept`: both content types a response may have.
pub const ACCEPT: &str = "application/json, text/event-stream";
/// A JSON body's content type.
pub const JSON: &str = "application/json";
/// An event stream's content type.
pub const EVENT_STREAM: &str = "text/event-stream";
/// The method that opens the long-lived stream of server notifications that
/// belong to no request.
pub const LISTEN: &str = "subscriptions/listen";
/// The 24 bytes an HTTP/2 client sends first (RFC 9113, 3.4).
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The methods whose request carries [`NAME`], and the params member it
/// mirrors.
pub fn name_member(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    }
}

/// The routing fields of a request's `params` that a header mirrors or a
/// front needs. Each member is read on its own: one member of an
/// unexpected type (`"uri": 0` beside `"name"`) hides none of the others,
/// so a header check cannot be slipped past by adding one.
#[derive(Debug, Default)]
pub struct Params<'a> {
    /// `params.name`.
    pub name: Member<'a>,
    /// `params.uri`.
    pub uri: Member<'a>,
    /// `params._meta.progressToken`, as written (a string or a number).
    pub progress_token: Option<&'a RawValue>,
    /// `params._meta["io.modelcontextprotocol/protocolVersion"]`.
    pub protocol_version: Member<'a>,
}

/// One member of `params` that should be a string.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub enum Member<'a> {
    /// Not there.
    #[default]
    Absent,
    /// A string.
    Text(Cow<'a, str>),
    /// There, but not a string (its JSON, as written).
    Other(&'a str),
}

impl<'a> Member<'a> {
    fn read(raw: Option<&'a RawValue>) -> Member<'a> {
        match raw {
            None => Member::Absent,
            Some(raw) => match serde_json::from_str::<Cow<'a, str>>(raw.get()) {
                Ok(text) => Member::Text(text),
                Err(_) => Member::Other(raw.get()),
            },
        }
    }

    /// The string, if it is one.
    pub fn text(&self) -> Option<&str> {
        match self {
            Member::Text(text) => Some(text),
            _ => None,
        }
    }
}

impl<'a> Params<'a> {
    /// Reads `params` (absent, `null` or not an object: no fields).
    ///
    /// ```
    /// use mcp_framer_jsonrpc::parse;
    /// use mcp_framer_stdio_v2::wire::{Member, Params};
    ///
    /// let body = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","uri":0}}"#;
    /// let message = parse(body).unwrap();
    /// let params = Params::read(message.payload());
    /// assert_eq!(params.name_for("tools/call"), Some("echo"));
    /// assert_eq!(params.uri, Member::Other("0"));
    /// ```
    pub fn read(params: Option<RawJson<'a>>) -> Params<'a> {
        #[derive(Deserialize)]
        struct Raw<'a> {
            #[serde(borrow, default)]
            name: Option<&'a RawValue>,
            #[serde(borrow, default)]
            uri: Option<&'a RawValue>,
            #[serde(rename = "_meta", borrow, default)]
            meta: Option<&'a RawValue>,
        }
        #[derive(Deserialize)]
        struct RawMeta<'a> {
            #[serde(rename = "progressToken", borrow, default)]
            progress_token: Option<&'a RawValue>,
            #[serde(rename = "io.modelcontextprotocol/protocolVersion", borrow, default)]
            protocol_version: Option<&'a RawValue>,
        }
        let Some(raw) = params.and_then(|raw| serde_json::from_str::<Raw<'a>>(raw.get()).ok()) else {
            return Params::default();
        };
        let meta = raw.meta.and_then(|meta| serde_json::from_str::<RawMeta<'a>>(meta.get()).ok());
        Params {
            name: Member::read(raw.name),
            uri: Member::read(raw.uri),
            progress_token: meta.as_ref().and_then(|meta| meta.progress_token),
            protocol_version: Member::read(meta.and_then(|meta| meta.protocol_version)),
        }
    }

    /// The member [`NAME`] mirrors for `method`, if the method has one.
    pub fn name_member_for(&self, method: &str) -> Option<&Member<'a>> {
        match name_member(method)? {
            "uri" => Some(&self.uri),
            _ => Some(&self.name),
        }
    }

    /// The value [`NAME`] mirrors for `method`, if it has one and it is a
    /// string.
    pub fn name_for(&self, method: &str) -> Option<&str> {
        self.name_member_for(method)?.text()
    }

    /// The progress token, as written.
    pub fn progress_token(&self) -> Option<&'a str> {
        self.progress_token.map(RawValue::get)
    }

    /// The per-request protocol version, if it is a string.
    pub fn protocol_version(&self) -> Option<&str> {
        self.protocol_version.text()
    }
}

/// The headers of a POST carrying `method` (with `params`), as the host
/// sends them: content type, accept, the protocol version (`version`: the
/// body's `_meta` version when it has one), [`METHOD`] and, for the three
/// named methods, [`NAME`] (encoded as [`encode_header_value`] says).
pub fn request_headers(method: &str, params: &Params<'_>, version: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    let value = |text: &str| http::HeaderValue::from_str(text).ok();
    headers.insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static(JSON));
    headers.insert(http::header::ACCEPT, http::HeaderValue::from_static(ACCEPT));
    if let Some(v) = value(params.protocol_version().unwrap_or(version)) {
        headers.insert(PROTOCOL_VERSION, v);
    }
    if let Some(v) = value(&encode_header_value(method)) {
        headers.insert(METHOD, v);
    }
    if let Some(name) = params.name_for(method)
        && let Some(v) = value(&encode_header_value(name))
    {
        headers.insert(NAME, v);
    }
    headers
}

/// What the server's header check found wrong: the `400` answer's error.
#[derive(Clone, Debug, PartialEq)]
pub enum HeaderProblem {
    /// A required header is missing or malformed, or does not match the body:
    /// -32020 (`HeaderMismatch`), its message saying which.
    Mismatch(String),
    /// The protocol version header names a version not served: -32022,
    /// listing the served ones.
    Unsupported(String),
}

impl HeaderProblem {
    /// The JSON-RPC error the `400` carries.
    pub fn error(&self) -> ErrorObject {
        match self {
            HeaderProblem::Mismatch(message) => ErrorObject::new(HEADER_MISMATCH, message.clone()),
            HeaderProblem::Unsupported(version) => mcp_framer_jsonrpc::protocol::unsupported_version(version),
        }
    }
}

/// Checks a POST's headers against its body (the 2026-07-28 "Server
/// Validation"): for a request, [`PROTOCOL_VERSION`] and [`METHOD`] are
/// required, [`NAME`] for the named methods; each must match the body
/// (after Base64-sentinel decoding), and the version must be one served
/// ([`VERSIONS`]). For a notification (ours: the revision defines no header
/// rules for notification POSTs) a header that is present must match; none is
/// required.
pub fn check_headers(
    headers: &HeaderMap,
    method: &str,
    params: &Params<'_>,
    request: bool,
) -> Result<(), HeaderProblem> {
    // Only `Mcp-Name` (and `Mcp-Param-*`) may carry the Base64 sentinel;
    // the method and the version are plain tokens, compared as sent.
    let get = |name: &str, encoded: bool| -> Result<Option<String>, HeaderProblem> {
        match headers.get(name) {
            None => Ok(None),
            Some(value) => {
                let text = value
                    .to_str()
                    .map_err(|_| HeaderProblem::Mismatch(format!("Header mismatch: {name} is not a valid value")))?;
                if !encoded {
                    return Ok(Some(text.to_owned()));
                }
                decode_header_value(text).map(Some).ok_or_else(|| {
                    HeaderProblem::Mismatch(format!("Header mismatch: {name} has a malformed Base64 value"))
                })
            }
        }
    };
    let missing =
        |name: &str| HeaderProblem::Mismatch(format!("Header mismatch: the required header {name} is missing"));
    let differs = |name: &str, header: &str, body: &str| {
        HeaderProblem::Mismatch(format!(
            "Header mismatch: {name} header value '{}' does not match body value '{}'",
            excerpt(header),
            excerpt(body)
        ))
    };
    let not_text = |name: &str, member: &str, json: &str| {
        HeaderProblem::Mismatch(format!(
            "Header mismatch: the body's {member} that {name} mirrors is not a string: {}",
            excerpt(json)
        ))
    };
    match get(METHOD, false)? {
        Some(header) if header != method => return Err(differs(METHOD, &header, method)),
        Some(_) => {}
        None if request => return Err(missing(METHOD)),
        None => {}
    }
    match get(PROTOCOL_VERSION, false)? {
        Some(header) => {
            if request && !VERSIONS.contains(&header.as_str()) {
                return Err(HeaderProblem::Unsupported(header));
            }
            match &params.protocol_version {
                Member::Text(body) if body != &header => return Err(differs(PROTOCOL_VERSION, &header, body)),
                Member::Other(json) => return Err(not_text(PROTOCOL_VERSION, "_meta protocol version", json)),
                _ => {}
            }
        }
        None if request => return Err(missing(PROTOCOL_VERSION)),
        None => {}
    }
    if let Some(member) = params.name_member_for(method) {
        let header = get(NAME, true)?;
        match (member, header) {
            (Member::Text(body), Some(header)) if header != *body => return Err(differs(NAME, &header, body)),
            (Member::Other(json), _) => return Err(not_text(NAME, name_member(method).unwrap_or("name"), json)),
            (Member::Absent, Some(header)) => return Err(differs(NAME, &header, "")),
            (Member::Text(_), None) if request => return Err(missing(NAME)),
            _ => {}
        }
    }
    Ok(())
}

/// At most this many bytes of a value are quoted in an error message.
const QUOTED: usize = 64;

fn excerpt(text: &str) -> Cow<'_, str> {
    if text.len() <= QUOTED {
        return Cow::Borrowed(text);
    }
    let mut end = QUOTED;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}... ({} bytes)", &text[..end], text.len()))
}

const SENTINEL_START: &str = "=?base64?";
const SENTINEL_END: &str = "?=";

/// A header value for `text`: itself when it is plain header-safe ASCII
/// (visible characters, inner spaces and tabs, no leading or trailing
/// whitespace, not shaped like the sentinel), else `=?base64?…?=` around its
/// UTF-8 in Base64 (the 2026-07-28 "Value Encoding").
///
/// ```
/// use mcp_framer_stdio_v2::wire::{decode_header_value, encode_header_value};
/// assert_eq!(encode_header_value("get_weather"), "get_weather");
/// assert_eq!(encode_header_value("Hello, 世界"), "=?base64?SGVsbG8sIOS4lueVjA==?=");
/// assert_eq!(decode_header_value("=?base64?SGVsbG8sIOS4lueVjA==?=").as_deref(), Some("Hello, 世界"));
/// ```
pub fn encode_header_value(text: &str) -> Cow<'_, str> {
    let safe = !text.is_empty()
        && text.bytes().all(|b| b == b'\t' || (0x20..=0x7e).contains(&b))
        && !text.starts_with([' ', '\t'])
        && !text.ends_with([' ', '\t'])
        && (!text.starts_with(SENTINEL_START) || !text.ends_with(SENTINEL_END));
    if safe {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(format!("{SENTINEL_START}{}{SENTINEL_END}", base64(text.as_bytes())))
    }
}

/// The value a header carries: decoded when it is in the Base64 sentinel
/// form, as is otherwise; `None` for a sentinel whose content is not Base64
/// of UTF-8.
pub fn decode_header_value(value: &str) -> Option<String> {
    match value.strip_prefix(SENTINEL_START).and_then(|rest| rest.strip_suffix(SENTINEL_END)) {
        Some(encoded) => String::from_utf8(unbase64(encoded)?).ok(),
        None => Some(value.to_owned()),
    }
}

/// Standard Base64 with padding (RFC 4648), which the sentinel uses; a
/// decoder that refuses missing or misplaced padding and any other
/// alphabet.
const BASE64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

fn base64(bytes: &[u8]) -> String {
    base64::Engine::encode(&BASE64, bytes)
}

fn unbase64(text: &str) -> Option<Vec<u8>> {
    base64::Engine::decode(&BASE64, text).ok()
}

/// One event of an event stream carrying `message` (one JSON text with no
/// raw line break, as every JSON-RPC frame is): `data: <message>\n\n`.
pub fn sse_event(message: &[u8]) -> Bytes {
    let mut event = Vec::with_capacity(message.len() + 8);
    event.extend_from_slice(b"data: ");
    event.extend_from_slice(message);
    event.extend_from_slice(b"\n\n");
    Bytes::from(event)
}

/// An event-stream reader with a byte limit on each event's data: push the
/// body's chunks as they arrive, take the messages out. It follows the SSE
/// specification's parsing rules (HTML, "Server-sent events", 9.2.5 and
/// 9.2.6): lines end with CRLF, LF or CR alone (a CRLF split between two
/// chunks counts once); a UTF-8 BOM at the start of the stream is stripped;
/// a line starting with `:` is a comment; a field is the line up to its
/// first `:` (one space after it is dropped; a line with no `:` is a field
/// with an empty value); `data` lines are joined with `\n`; `event`, `id`
/// (kept unless it holds a NUL) and `retry` (kept when all ASCII digits) are
/// read, other fields ignored; a blank line dispatches the event if it has
/// data. Every dispatched event's data is yielded, whatever its type.
///
/// The limit is checked on the bytes as they arrive: an event is refused as
/// soon as its lines pass the limit plus the 6 bytes of a `data: ` prefix,
/// before its line ends, and once whole if its data passes the limit.
#[derive(Debug)]
pub struct SseReader {
    max: usize,
    line: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
    /// Bytes of the current event (its lines), counted as they arrive,
    /// before the line is complete.
    event_bytes: u64,
    /// The last byte seen ended a line with CR: an LF next is its CRLF.
    after_cr: bool,
    /// Bytes of a leading BOM matched so far; `None` once the start of the
    /// stream is past.
    bom: Option<usize>,
    event_type: Vec<u8>,
    last_id: Vec<u8>,
    retry: Option<u64>,
}

/// An event over the limit: its bytes seen so far when it passed it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventTooLarge {
    /// Bytes of the event seen when it passed the limit (at least this long).
    pub seen: u64,
    /// The limit.
    pub max: usize,
}

const BOM: &[u8; 3] = b"\xEF\xBB\xBF";

impl SseReader {
    /// A reader that refuses an event over `max` bytes.
    pub fn new(max: usize) -> SseReader {
        SseReader {
            max,
            line: Vec::new(),
            data: Vec::new(),
            has_data: false,
            event_bytes: 0,
            after_cr: false,
            bom: Some(0),
            event_type: Vec::new(),
            last_id: Vec::new(),
            retry: None,
        }
    }

    /// The last event id the stream set (`id:`), empty if none.
    pub fn last_event_id(&self) -> &[u8] {
        &self.last_id
    }

    /// The reconnection time the stream asked for (`retry:`), in ms.
    pub fn retry(&self) -> Option<u64> {
        self.retry
    }

    /// Reads `chunk`, appending each complete event's data to `out`; fails
    /// as soon as an event passes the limit (the counting is on the bytes as
    /// they arrive, the line need not be complete).
    pub fn push(&mut self, chunk: &[u8], out: &mut Vec<Bytes>) -> Result<(), EventTooLarge> {
        let mut rest = self.skip_bom(chunk);
        while !rest.is_empty() {
            if std::mem::take(&mut self.after_cr) && rest[0] == b'\n' {
                rest = &rest[1..];
                continue;
            }
            let (part, end) = match rest.iter().position(|&b| b == b'\n' || b == b'\r') {
                Some(at) => (&rest[..at], Some(rest[at])),
                None => (rest, None),
            };
            rest = if end.is_some() { &rest[part.len() + 1..] } else { &[] };
            self.event_bytes += part.len() as u64;
            if self.event_bytes > self.max as u64 + 6 {
                return Err(EventTooLarge { seen: self.event_bytes, max: self.max });
            }
            self.line.extend_from_slice(part);
            if let Some(end) = end {
                self.after_cr = end == b'\r';
                self.end_line(out)?;
            }
        }
        Ok(())
    }

    /// `chunk` less the part of a leading BOM in it (a partial match that
    /// turns out not to be one is put back).
    fn skip_bom<'c>(&mut self, chunk: &'c [u8]) -> &'c [u8] {
        let Some(mut matched) = self.bom else { return chunk };
        let mut at = 0;
        while at < chunk.len() && matched < BOM.len() {
            if chunk[at] != BOM[matched] {
                self.bom = None;
                self.line.extend_from_slice(&BOM[..matched]);
                self.event_bytes += matched as u64;
                return &chunk[at..];
            }
            matched += 1;
            at += 1;
        }
        self.bom = if matched == BOM.len() { None } else { Some(matched) };
        &chunk[at..]
    }

    fn end_line(&mut self, out: &mut Vec<Bytes>) -> Result<(), EventTooLarge> {
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            if self.has_data {
                out.push(Bytes::from(std::mem::take(&mut self.data)));
            }
            self.has_data = false;
            self.event_bytes = 0;
            self.event_type.clear();
            return Ok(());
        }
        let (name, value) = match line.iter().position(|&b| b == b':') {
            Some(0) => (&[][..], None), // a comment
            Some(at) => {
                let value = &line[at + 1..];
                (&line[..at], Some(value.strip_prefix(b" ").unwrap_or(value)))
            }
            None => (&line[..], Some(&[][..])),
        };
        match (name, value) {
            (b"data", Some(value)) => {
                if self.has_data {
                    self.data.push(b'\n');
                }
                self.data.extend_from_slice(value);
                self.has_data = true;
                if self.data.len() > self.max {
                    return Err(EventTooLarge { seen: self.data.len() as u64, max: self.max });
                }
            }
            (b"event", Some(value)) => value.clone_into(&mut self.event_type),
            (b"id", Some(value)) if !value.contains(&0) => value.clone_into(&mut self.last_id),
            (b"retry", Some(value)) if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                self.retry = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok());
            }
            _ => {}
        }
        // Keep the line's allocation for the next one.
        self.line = line;
        self.line.clear();
        Ok(())
    }
}

/// What a peer's first bytes say about the transport it speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FirstBytes {
    /// Not enough bytes yet to tell.
    Undecided,
    /// The HTTP/2 connection start expected (the preface on the server, a
    /// SETTINGS frame on the host).
    Http2,
    /// Newline-delimited JSON (the first byte after JSON whitespace is `{`
    /// or `[`): the peer speaks `stdio`.
    NewlineJson,
    /// Something else.
    Other,
}

/// What the server makes of the first bytes on its stdin.
pub fn client_first_bytes(bytes: &[u8]) -> FirstBytes {
    let n = bytes.len().min(PREFACE.len());
    if bytes[..n] == PREFACE[..n] {
        return if n == PREFACE.len() { FirstBytes::Http2 } else { FirstBytes::Undecided };
    }
    json_or_other(bytes)
}

/// What the host makes of the first bytes on the child's stdout: an HTTP/2
/// server starts with a SETTINGS frame (a 9-byte header: a length, type
/// 0x4, flags 0, stream 0).
pub fn server_first_bytes(bytes: &[u8]) -> FirstBytes {
    if bytes.len() >= 9 {
        let settings = bytes[3] == 0x4 && bytes[4] & !0x1 == 0 && bytes[5..9] == [0, 0, 0, 0];
        if settings {
            return FirstBytes::Http2;
        }
    } else if bytes.first().is_none_or(|&b| b == 0) && bytes.get(3).is_none_or(|&b| b == 0x4) {
        // A SETTINGS frame's length is below 2^16 in practice: its first byte is 0.
        return FirstBytes::Undecided;
    }
    json_or_other(bytes)
}

fn json_or_other(bytes: &[u8]) -> FirstBytes {
    match bytes.iter().find(|b| !matches!(b, b' ' | b'\t' | b'\r' | b'\n')) {
        None => FirstBytes::Undecided,
        Some(b'{' | b'[') => FirstBytes::NewlineJson,
        Some(_) => FirstBytes::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(json: &str) -> Params<'_> {
        Params::read(Some(mcp_framer_jsonrpc::parse(json.as_bytes()).unwrap().payload().unwrap()))
    }

    #[test]
    fn base64_round_trips_and_refuses_garbage() {
        for text in ["", "a", "ab", "abc", "abcd", "Hello, 世界", " padded ", "line1\nline2", "=?base64?literal?="] {
            assert_eq!(unbase64(&base64(text.as_bytes())).unwrap(), text.as_bytes(), "{text:?}");
        }
        assert_eq!(base64(b" padded "), "IHBhZGRlZCA=");
        assert_eq!(base64(b"line1\nline2"), "bGluZTEKbGluZTI=");
        assert_eq!(encode_header_value("=?base64?literal?="), "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=");
        assert_eq!(encode_header_value(" padded "), "=?base64?IHBhZGRlZCA=?=");
        assert!(unbase64("abc").is_none() && unbase64("a===").is_none() && unbase64("ab=c").is_none());
        assert_eq!(decode_header_value("=?base64?!!!!?="), None);
    }

    #[test]
    fn headers_built_by_the_host_pass_the_server_check() {
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"Hello, 世界","arguments":{},"_meta":{"progressToken":"t1","io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
        let p = params(body);
        assert_eq!(p.progress_token(), Some("\"t1\""));
        let headers = request_headers("tools/call", &p, "2025-11-25");
        assert_eq!(headers[PROTOCOL_VERSION], "2026-07-28", "the body's version wins");
        assert_eq!(headers[NAME], "=?base64?SGVsbG8sIOS4lueVjA==?=");
        assert_eq!(check_headers(&headers, "tools/call", &p, true), Ok(()));
    }

    #[test]
    fn each_missing_or_contradicting_header_is_a_mismatch() {
        let p = params(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}"#);
        let good = request_headers("tools/call", &p, "2025-11-25");
        for name in [METHOD, PROTOCOL_VERSION, NAME] {
            let mut headers = good.clone();
            headers.remove(name);
            let Err(HeaderProblem::Mismatch(message)) = check_headers(&headers, "tools/call", &p, true) else {
                panic!("{name} missing passed")
            };
            assert!(message.contains(name), "{message}");
            assert_eq!(HeaderProblem::Mismatch(message).error().code, -32020);
            headers.insert(name, http::HeaderValue::from_static("other"));
            assert!(check_headers(&headers, "tools/call", &p, true).is_err(), "{name} contradicting passed");
        }
        // A version not served: -32022, even when it is well formed.
        let mut headers = good.clone();
        headers.insert(PROTOCOL_VERSION, http::HeaderValue::from_static("1999-01-01"));
        let problem = check_headers(&headers, "tools/call", &p, true).unwrap_err();
        assert_eq!(problem.error().code, -32022);
        // Notifications: nothing required, but what is there must match.
        let n = params(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#);
        assert_eq!(check_headers(&HeaderMap::new(), "notifications/cancelled", &n, false), Ok(()));
        let mut headers = HeaderMap::new();
        headers.insert(METHOD, http::HeaderValue::from_static("ping"));
        assert!(check_headers(&headers, "notifications/cancelled", &n, false).is_err());
    }

    #[test]
    fn a_raw_line_break_inside_a_string_is_not_json() {
        // The server maps LF and CR to spaces only after the body parsed: this
        // is what makes that safe.
        assert!(mcp_framer_jsonrpc::parse(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\nb\"}").is_err());
        assert!(mcp_framer_jsonrpc::parse(b"{\"jsonrpc\":\"2.0\",\n\"id\":1,\r\n\"method\":\"ab\"}").is_ok());
    }

    #[test]
    fn sse_reader_splits_events_anywhere_and_counts_before_the_line_ends() {
        let stream = b": comment\n\ndata: {\"a\":1}\n\ndata:{\"b\":2}\r\n\r\nevent: x\ndata: [1]\ndata: [2]\n\n";
        for split in 0..stream.len() {
            let mut reader = SseReader::new(64);
            let mut out = Vec::new();
            reader.push(&stream[..split], &mut out).unwrap();
            reader.push(&stream[split..], &mut out).unwrap();
            assert_eq!(out, [&b"{\"a\":1}"[..], b"{\"b\":2}", b"[1]\n[2]"], "split at {split}");
        }
        let mut reader = SseReader::new(16);
        let mut out = Vec::new();
        reader.push(&sse_event(&[b'x'; 16]), &mut out).unwrap();
        assert_eq!(out.len(), 1);
        // Over the limit with no line end in sight: refused as it arrives.
        let err = reader.push(b"data: 01234567890123456789", &mut out).unwrap_err();
        assert_eq!(err.max, 16);
        assert!(err.seen > 16);
    }

    #[test]
    fn sse_reader_takes_lf_cr_and_crlf_line_ends_split_anywhere() {
        let bodies: [&[u8]; 4] = [
            b"data: {\"a\":1}\n\ndata: {\"b\":2}\n\n",
            b"data: {\"a\":1}\r\rdata: {\"b\":2}\r\r",
            b"data: {\"a\":1}\r\n\r\ndata: {\"b\":2}\r\n\r\n",
            b"\xEF\xBB\xBFdata: {\"a\":1}\r\n\ndata: {\"b\":2}\r\r\n",
        ];
        for body in bodies {
            for split in 0..=body.len() {
                let mut reader = SseReader::new(64);
                let mut out = Vec::new();
                reader.push(&body[..split], &mut out).unwrap();
                reader.push(&body[split..], &mut out).unwrap();
                assert_eq!(
                    out,
                    [&b"{\"a\":1}"[..], b"{\"b\":2}"],
                    "{:?} split at {split}",
                    String::from_utf8_lossy(body)
                );
            }
        }
        // A CR alone ends a line: a CR-only stream dispatches without waiting
        // for an LF that never comes.
        let mut reader = SseReader::new(64);
        let mut out = Vec::new();
        reader.push(b"data: [1]\r\r", &mut out).unwrap();
        assert_eq!(out, [&b"[1]"[..]]);
    }

    #[test]
    fn sse_reader_reads_fields_and_comments_as_the_spec_says() {
        let body = b": a comment\nevent: message\nid: 7\nretry: 1500\nretry: soon\ndata\ndata:x\nunknown: y\n\n\
                     id: bad\0id\ndata: {}\n\nevent: only\n\n";
        let mut reader = SseReader::new(256);
        let mut out = Vec::new();
        reader.push(body, &mut out).unwrap();
        // `data` with no colon is an empty line of data; `data:x` needs no space.
        assert_eq!(out, [&b"\nx"[..], b"{}"]);
        assert_eq!(reader.last_event_id(), b"7", "an id holding NUL is ignored");
        assert_eq!(reader.retry(), Some(1500), "a retry that is not digits is ignored");
        // A BOM only at the very start: later it is data.
        let mut reader = SseReader::new(64);
        let mut out = Vec::new();
        reader.push(b"\xEF\xBB", &mut out).unwrap();
        reader.push(b"\xBFdata: 1\n\ndata: \xEF\xBB\xBF2\n\n", &mut out).unwrap();
        assert_eq!(out, [&b"1"[..], b"\xEF\xBB\xBF2"]);
        // Bytes that begin like a BOM and are not one are kept.
        let mut reader = SseReader::new(64);
        let mut out = Vec::new();
        reader.push(b"\xEF", &mut out).unwrap();
        reader.push(b"x\ndata: 3\n\n", &mut out).unwrap();
        assert_eq!(out, [&b"3"[..]]);
    }

    #[test]
    fn first_bytes_tell_the_transport() {
        assert_eq!(client_first_bytes(b"PRI * HT"), FirstBytes::Undecided);
        assert_eq!(client_first_bytes(PREFACE), FirstBytes::Http2);
        assert_eq!(client_first_bytes(b"  {\"jsonrpc\""), FirstBytes::NewlineJson);
        assert_eq!(client_first_bytes(b"GET / HTTP/1.1"), FirstBytes::Other);
        let settings = [0, 0, 6, 4, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 100];
        assert_eq!(server_first_bytes(&settings), FirstBytes::Http2);
        assert_eq!(server_first_bytes(&settings[..5]), FirstBytes::Undecided);
        assert_eq!(server_first_bytes(b"{\"jsonrpc\":\"2.0\""), FirstBytes::NewlineJson);
        assert_eq!(server_first_bytes(b"hello world"), FirstBytes::Other);
    }
}
