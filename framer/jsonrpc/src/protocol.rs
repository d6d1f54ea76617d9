//! The MCP vocabulary both sides share: the protocol versions, the two eras,
//! the per-request `_meta` fields of the modern era, and the rules a server
//! applies to every request.
//!
//! - **Versions**: [`VERSIONS`], every version known here, newest first,
//!   each once; [`MODERN_VERSIONS`] and [`LEGACY_VERSIONS`] are its two
//!   parts.
//! - **Eras** ([`Era`]): modern (2026-07-28 and later: no handshake, every
//!   request carries its version and the client's capabilities in `_meta`)
//!   and legacy (2025-11-25 and earlier: `initialize`, then
//!   `notifications/initialized`).
//! - **Rules**: [`check_request`] (which era a request is served in, and
//!   the error it gets when its `_meta` is missing or names a version not
//!   served) and [`negotiate`] (the version `initialize` answers with).
//!
//! The error codes are in the crate's one table
//! ([`UNSUPPORTED_PROTOCOL_VERSION`], [`INVALID_PARAMS`](crate::INVALID_PARAMS)...).
//!
//! ```
//! use mcp_framer_jsonrpc::protocol::{check_request, negotiate, Served};
//! use mcp_framer_jsonrpc::{parse, UNSUPPORTED_PROTOCOL_VERSION};
//!
//! let frame = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{
//!     "io.modelcontextprotocol/protocolVersion":"2026-07-28",
//!     "io.modelcontextprotocol/clientCapabilities":{}}}}"#;
//! let request = parse(frame)?;
//! let served = check_request(request.method().unwrap(), request.payload(), false);
//! assert_eq!(served, Ok(Served::Modern("2026-07-28")));
//!
//! let frame = br#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{
//!     "io.modelcontextprotocol/protocolVersion":"1900-01-01",
//!     "io.modelcontextprotocol/clientCapabilities":{}}}}"#;
//! let request = parse(frame)?;
//! let error = check_request(request.method().unwrap(), request.payload(), false).unwrap_err();
//! assert_eq!(error.code, UNSUPPORTED_PROTOCOL_VERSION);
//! assert_eq!(error.data.unwrap()["requested"], "1900-01-01");
//!
//! assert_eq!(negotiate(Some("2025-06-18")), "2025-06-18"); // `initialize`: the asked version if served,
//! assert_eq!(negotiate(Some("2031-01-01")), "2025-11-25"); // else the newest legacy one
//! # Ok::<(), mcp_framer_jsonrpc::ParseError>(())
//! ```

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::json;

use crate::codes::{ErrorObject, UNSUPPORTED_PROTOCOL_VERSION};
use crate::raw::RawJson;

/// Every MCP protocol version known here, newest first, each once: the
/// [modern](MODERN_VERSIONS) ones, then the [legacy](LEGACY_VERSIONS) ones.
/// A server lists them all in `server/discover`'s `supportedVersions` and in
/// an [unsupported-version error](unsupported_version)'s `data.supported`.
pub const VERSIONS: &[&str] = &["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// How many of [`VERSIONS`] are modern (they come first).
const MODERN_COUNT: usize = 1;

/// The modern versions of [`VERSIONS`], newest first: served per request,
/// without a handshake.
pub const MODERN_VERSIONS: &[&str] = VERSIONS.split_at(MODERN_COUNT).0;

/// The legacy versions of [`VERSIONS`], newest first: negotiated once by
/// `initialize` ([`negotiate`]).
pub const LEGACY_VERSIONS: &[&str] = VERSIONS.split_at(MODERN_COUNT).1;

/// The newest version known here (modern).
pub const NEWEST: &str = VERSIONS[0];

/// The newest legacy version: what `initialize` answers when the client
/// asked for a version not served, and what a host offers by default.
pub const NEWEST_LEGACY: &str = LEGACY_VERSIONS[0];

/// The first modern version: every version from this date on is modern.
pub const FIRST_MODERN: &str = "2026-07-28";

/// `_meta` key of a modern request: the protocol version it uses (a string;
/// required).
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key of a modern request: the client's capabilities relevant to it
/// (an object; required).
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key of a modern request: the client's name and version
/// (optional).
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// `_meta` key of a modern result: the server's name and version
/// (optional).
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// The modern era's probe and discovery request: answered with the versions,
/// capabilities and identity of the server.
pub const DISCOVER: &str = "server/discover";
/// The legacy era's opening request.
pub const INITIALIZE: &str = "initialize";
/// The legacy era's notification that ends the handshake.
pub const INITIALIZED: &str = "notifications/initialized";
/// The legacy era's liveness request (removed in 2026-07-28).
pub const PING: &str = "ping";

/// The protocol era of a version, a request or a server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Era {
    /// 2026-07-28 and later: no handshake; every request carries the
    /// version and client capabilities in `_meta`.
    Modern,
    /// 2025-11-25 and earlier: `initialize`, then
    /// `notifications/initialized`.
    Legacy,
}

impl Era {
    /// `"modern"` or `"legacy"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Era::Modern => "modern",
            Era::Legacy => "legacy",
        }
    }

    /// The era of `version` by its date (`YYYY-MM-DD`): modern from
    /// [`FIRST_MODERN`] on, legacy before, whether or not the version is
    /// one of [`VERSIONS`].
    ///
    /// ```
    /// use mcp_framer_jsonrpc::protocol::Era;
    /// assert_eq!(Era::of("2027-01-01"), Era::Modern);
    /// assert_eq!(Era::of("2025-11-25"), Era::Legacy);
    /// ```
    pub fn of(version: &str) -> Era {
        if version >= FIRST_MODERN { Era::Modern } else { Era::Legacy }
    }

    /// The era a method exists in only, if it is one of those:
    /// [`DISCOVER`] is modern; [`INITIALIZE`], [`INITIALIZED`] and [`PING`]
    /// are legacy (2026-07-28 removed them). `None` for a method both eras
    /// have (`tools/call`...) or neither knows.
    pub fn of_method(method: &str) -> Option<Era> {
        match method {
            DISCOVER => Some(Era::Modern),
            INITIALIZE | INITIALIZED | PING => Some(Era::Legacy),
            _ => None,
        }
    }
}

impl fmt::Display for Era {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The version `initialize` answers with: `asked` (its `protocolVersion`)
/// when it is one of [`LEGACY_VERSIONS`], else [`NEWEST_LEGACY`] (the
/// client then decides whether it can speak that). A modern version asked
/// in `initialize` gets the newest legacy one too: `initialize` opens the
/// legacy era only.
pub fn negotiate(asked: Option<&str>) -> &'static str {
    LEGACY_VERSIONS.iter().find(|v| Some(**v) == asked).copied().unwrap_or(NEWEST_LEGACY)
}

/// How a request is served: the outcome of [`check_request`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Served {
    /// Under the version the legacy handshake negotiated (or, for
    /// `initialize` itself, the one [`negotiate`] picks).
    Legacy,
    /// Statelessly, under this modern version (one of
    /// [`MODERN_VERSIONS`]), which its `_meta` named.
    Modern(&'static str),
}

/// The 2026-07-28 revision's rule for one request a dual-era server
/// received: the era it is served in, or the error to answer it with.
///
/// `params` is the request's `params` as [`parse`](crate::parse) gives it;
/// `initialized` says whether this connection has received `initialize`
/// (which selects the legacy era for the process, as the stdio binding
/// says). In order:
///
/// 1. [`INITIALIZE`] is legacy: `Ok(Legacy)` (the caller [`negotiate`]s;
///    whether it came twice is the caller's business).
/// 2. A request whose `params._meta` has any of the per-request members
///    ([`META_PROTOCOL_VERSION`], [`META_CLIENT_CAPABILITIES`],
///    [`META_CLIENT_INFO`]) is modern, whatever the connection's state:
///    - [`META_PROTOCOL_VERSION`] missing or not a string, or
///      [`META_CLIENT_CAPABILITIES`] missing or not an object:
///      [`INVALID_PARAMS`](crate::INVALID_PARAMS) (-32602) naming the missing members (the version
///      is checked first: the capabilities' shape belongs to it);
///    - a version not in [`MODERN_VERSIONS`] (a legacy version included: it
///      has no per-request form): [`unsupported_version`] (-32022);
///    - else `Ok(Modern(version))`.
/// 3. A request without those members (no `params`, params not an object,
///    no `_meta`) is legacy when the connection was `initialized` or the
///    method is legacy-only ([`PING`], [`INITIALIZED`]: allowed before the
///    handshake in the legacy era); otherwise — [`DISCOVER`], or any
///    request on a connection that never sent `initialize` — it is a modern
///    request missing its required members: [`missing_meta`] (-32602).
///
/// A `params` that cannot be read as an object with an object `_meta`
/// (`_meta` a string, a member given twice) gets [`INVALID_PARAMS`](crate::INVALID_PARAMS) when
/// the request must be modern (by rule 3), and is legacy otherwise.
///
/// Cost: one pass over `params` (the members other than `_meta`, and the
/// values inside the capabilities, are skipped, not built); the version is
/// borrowed from the frame unless it has escapes.
///
/// ```
/// use mcp_framer_jsonrpc::protocol::{check_request, Served};
/// use mcp_framer_jsonrpc::{parse, INVALID_PARAMS};
///
/// let ping = parse(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)?;
/// assert_eq!(check_request("ping", ping.payload(), false), Ok(Served::Legacy));
///
/// let list = parse(br#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#)?;
/// assert_eq!(check_request("tools/list", list.payload(), true), Ok(Served::Legacy));
/// let error = check_request("tools/list", list.payload(), false).unwrap_err();
/// assert_eq!(error.code, INVALID_PARAMS); // no `initialize`, no `_meta`
/// # Ok::<(), mcp_framer_jsonrpc::ParseError>(())
/// ```
pub fn check_request(method: &str, params: Option<RawJson<'_>>, initialized: bool) -> Result<Served, ErrorObject> {
    if method == INITIALIZE {
        return Ok(Served::Legacy);
    }
    let must_be_modern = method == DISCOVER || (!initialized && Era::of_method(method) != Some(Era::Legacy));
    let meta = match RequestMeta::read(params) {
        Ok(meta) => meta,
        Err(error) if must_be_modern => {
            return Err(ErrorObject::invalid_params(format!("the request's params._meta cannot be read: {error}")));
        }
        Err(_) => return Ok(Served::Legacy),
    };
    if !meta.is_modern() {
        return if must_be_modern { Err(missing_meta()) } else { Ok(Served::Legacy) };
    }
    meta.check().map(Served::Modern)
}

/// The error a modern request without its required `_meta` members gets:
/// [`INVALID_PARAMS`](crate::INVALID_PARAMS) (-32602), naming them.
pub fn missing_meta() -> ErrorObject {
    missing(&[META_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES])
}

fn missing(members: &[&str]) -> ErrorObject {
    let list = members.iter().map(|m| format!("`{m}`")).collect::<Vec<_>>().join(" and ");
    ErrorObject::invalid_params(format!("params._meta lacks {list}, required in every request from 2026-07-28 on"))
}

/// The 2026-07-28 revision's `UnsupportedProtocolVersionError` for a request
/// that named `requested`: code [`UNSUPPORTED_PROTOCOL_VERSION`] (-32022), a
/// message naming the supported versions, and `data` as the schema wants it,
/// `{"supported": [VERSIONS...], "requested": requested}` (every version
/// served, newest first: a legacy client can still `initialize`).
///
/// ```
/// use mcp_framer_jsonrpc::protocol::unsupported_version;
///
/// let error = unsupported_version("1900-01-01");
/// assert_eq!(error.code, -32022);
/// assert_eq!(error.data.as_ref().unwrap()["supported"][0], "2026-07-28");
/// assert!(error.message.contains("1900-01-01"));
/// ```
pub fn unsupported_version(requested: &str) -> ErrorObject {
    let message = format!("Unsupported protocol version {requested:?}; supported: {}", VERSIONS.join(", "));
    ErrorObject::new(UNSUPPORTED_PROTOCOL_VERSION, message)
        .with_data(json!({ "supported": VERSIONS, "requested": requested }))
}

/// The per-request members of a request's `params._meta`, read without
/// building the rest.
#[derive(Debug, Default, Deserialize)]
struct RequestMeta<'a> {
    #[serde(rename = "io.modelcontextprotocol/protocolVersion", borrow, default)]
    protocol_version: Option<Member<'a>>,
    #[serde(rename = "io.modelcontextprotocol/clientCapabilities", borrow, default)]
    client_capabilities: Option<Member<'a>>,
    #[serde(rename = "io.modelcontextprotocol/clientInfo", borrow, default)]
    client_info: Option<Member<'a>>,
}

/// `params` as far as this module reads it.
#[derive(Deserialize)]
struct Params<'a> {
    #[serde(rename = "_meta", borrow, default)]
    meta: Option<RequestMeta<'a>>,
}

impl<'a> RequestMeta<'a> {
    /// The members of `params._meta`; all absent when there is no `params`,
    /// `params` is not an object, or it has no (or a `null`) `_meta`.
    fn read(params: Option<RawJson<'a>>) -> serde_json::Result<RequestMeta<'a>> {
        let Some(params) = params else { return Ok(RequestMeta::default()) };
        if !params.get().starts_with('{') {
            return Ok(RequestMeta::default());
        }
        Ok(params.deserialize::<Params<'a>>()?.meta.unwrap_or_default())
    }

    /// Whether any per-request member is present (whatever its value).
    fn is_modern(&self) -> bool {
        self.protocol_version.is_some() || self.client_capabilities.is_some() || self.client_info.is_some()
    }

    fn check(&self) -> Result<&'static str, ErrorObject> {
        let version = match &self.protocol_version {
            Some(Member::String(version)) => Some(version.as_ref()),
            _ => None,
        };
        let capabilities = matches!(self.client_capabilities, Some(Member::Object));
        if let Some(version) = version {
            let Some(served) = MODERN_VERSIONS.iter().find(|v| **v == version) else {
                return Err(unsupported_version(version));
            };
            if capabilities {
                return Ok(served);
            }
        }
        let mut lacking = Vec::with_capacity(2);
        if version.is_none() {
            lacking.push(META_PROTOCOL_VERSION);
        }
        if !capabilities {
            lacking.push(META_CLIENT_CAPABILITIES);
        }
        Err(missing(&lacking))
    }
}

/// One `_meta` member, read without building it: a string (borrowed from
/// the frame unless it has escapes), an object, or anything else.
#[derive(Debug)]
enum Member<'a> {
    String(Cow<'a, str>),
    Object,
    Other,
}

impl<'de: 'a, 'a> Deserialize<'de> for Member<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(MemberVisitor(PhantomData))
    }
}

struct MemberVisitor<'a>(PhantomData<Member<'a>>);

impl<'de: 'a, 'a> Visitor<'de> for MemberVisitor<'a> {
    type Value = Member<'a>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Member<'a>, E> {
        Ok(Member::String(Cow::Borrowed(v)))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Member<'a>, E> {
        Ok(Member::String(Cow::Owned(v.to_owned())))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Member<'a>, E> {
        Ok(Member::String(Cow::Owned(v)))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Member<'a>, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Member::Object)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Member<'a>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Member::Other)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Member<'a>, E> {
        Ok(Member::Other)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Member<'a>, E> {
        Ok(Member::Other)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Member<'a>, E> {
        Ok(Member::Other)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Member<'a>, E> {
        Ok(Member::Other)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Member<'a>, E> {
        Ok(Member::Other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ERROR_CODES, INVALID_PARAMS, parse};

    fn check(method: &str, frame: &str, initialized: bool) -> Result<Served, ErrorObject> {
        let message = parse(frame.as_bytes()).expect("a valid request");
        check_request(method, message.payload(), initialized)
    }

    fn with_meta(meta: &str) -> String {
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{"x":[1,{{"y":2}}],"_meta":{meta}}}}}"#)
    }

    const V: &str = META_PROTOCOL_VERSION;
    const C: &str = META_CLIENT_CAPABILITIES;

    #[test]
    fn the_versions_are_newest_first_once_and_split_by_era() {
        assert!(VERSIONS.windows(2).all(|w| w[0] > w[1]), "{VERSIONS:?}");
        assert_eq!(MODERN_VERSIONS.len() + LEGACY_VERSIONS.len(), VERSIONS.len());
        assert!(MODERN_VERSIONS.iter().all(|v| Era::of(v) == Era::Modern), "{MODERN_VERSIONS:?}");
        assert!(LEGACY_VERSIONS.iter().all(|v| Era::of(v) == Era::Legacy), "{LEGACY_VERSIONS:?}");
        assert_eq!((NEWEST, NEWEST_LEGACY), ("2026-07-28", "2025-11-25"));
        assert_eq!(Era::of(FIRST_MODERN), Era::Modern);
        assert_eq!(Era::of("2026-07-27"), Era::Legacy);
    }

    #[test]
    fn initialize_answers_the_asked_legacy_version_else_the_newest_legacy_one() {
        for version in LEGACY_VERSIONS {
            assert_eq!(negotiate(Some(version)), *version);
        }
        assert_eq!(negotiate(Some("2026-07-28")), "2025-11-25");
        assert_eq!(negotiate(Some("1999-01-01")), "2025-11-25");
        assert_eq!(negotiate(None), "2025-11-25");
    }

    #[test]
    fn methods_of_one_era() {
        assert_eq!(Era::of_method("server/discover"), Some(Era::Modern));
        for method in ["initialize", "notifications/initialized", "ping"] {
            assert_eq!(Era::of_method(method), Some(Era::Legacy), "{method}");
        }
        assert_eq!(Era::of_method("tools/call"), None);
        assert_eq!(Era::Modern.to_string(), "modern");
        assert_eq!(Era::Legacy.as_str(), "legacy");
    }

    #[test]
    fn a_modern_request_with_its_members_is_served_in_its_version() {
        let frame = with_meta(&format!(r#"{{"{V}":"2026-07-28","{C}":{{"roots":{{}}}},"progressToken":3}}"#));
        for initialized in [false, true] {
            assert_eq!(check("tools/list", &frame, initialized), Ok(Served::Modern("2026-07-28")));
        }
        // An escaped version is read all the same (owned, not borrowed).
        let frame = with_meta(&format!(r#"{{"{V}":"2026-07-2\u0038","{C}":{{}}}}"#));
        assert_eq!(check("server/discover", &frame, false), Ok(Served::Modern("2026-07-28")));
    }

    #[test]
    fn a_modern_request_missing_a_member_gets_invalid_params_naming_it() {
        let cases = [
            (format!(r#"{{"{V}":"2026-07-28"}}"#), vec![C]),
            (format!(r#"{{"{V}":"2026-07-28","{C}":[]}}"#), vec![C]),
            (format!(r#"{{"{C}":{{}}}}"#), vec![V]),
            (format!(r#"{{"{V}":20260728,"{C}":{{}}}}"#), vec![V]),
            (r#"{"io.modelcontextprotocol/clientInfo":{"name":"c"}}"#.to_owned(), vec![V, C]),
        ];
        for (meta, lacking) in cases {
            let error = check("tools/list", &with_meta(&meta), true).expect_err(&meta);
            assert_eq!(error.code, INVALID_PARAMS, "{meta}");
            for member in [V, C] {
                assert_eq!(error.message.contains(member), lacking.contains(&member), "{meta}: {}", error.message);
            }
        }
    }

    #[test]
    fn a_version_not_served_per_request_gets_the_unsupported_version_error() {
        for version in ["1900-01-01", "2025-11-25", "2099-01-01"] {
            let frame = with_meta(&format!(r#"{{"{V}":"{version}"}}"#));
            let error = check("tools/call", &frame, false).expect_err(version);
            assert_eq!(error.code, UNSUPPORTED_PROTOCOL_VERSION);
            assert_eq!(error.data, Some(json!({ "supported": VERSIONS, "requested": version })));
            assert!(error.message.contains(version) && error.message.contains("2026-07-28"), "{}", error.message);
        }
    }

    #[test]
    fn without_members_the_connection_state_decides() {
        let frames = [
            r#"{"jsonrpc":"2.0","id":1,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":null}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":[1]}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":null}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"progressToken":1}}}"#,
        ];
        for frame in frames {
            assert_eq!(check("tools/list", frame, true), Ok(Served::Legacy), "{frame}");
            assert_eq!(check("ping", frame, false), Ok(Served::Legacy), "{frame}");
            assert_eq!(check("initialize", frame, false), Ok(Served::Legacy), "{frame}");
            assert_eq!(check("tools/list", frame, false), Err(missing_meta()), "{frame}");
            assert_eq!(check("server/discover", frame, true), Err(missing_meta()), "{frame}");
        }
        let error = missing_meta();
        assert_eq!(error.code, INVALID_PARAMS);
        assert!(error.message.contains(V) && error.message.contains(C), "{}", error.message);
    }

    #[test]
    fn unreadable_meta_is_invalid_params_only_where_the_request_must_be_modern() {
        let frames = [
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":"x"}}"#.to_owned(),
            with_meta(&format!(r#"{{"{V}":"2026-07-28","{V}":"2026-07-28","{C}":{{}}}}"#)),
        ];
        for frame in &frames {
            let error = check("tools/list", frame, false).expect_err(frame);
            assert_eq!(error.code, INVALID_PARAMS, "{frame}");
            assert!(error.message.contains("cannot be read"), "{}", error.message);
            assert_eq!(check("tools/list", frame, true), Ok(Served::Legacy), "{frame}");
        }
    }

    #[test]
    fn initialize_is_legacy_whatever_its_meta() {
        let frame = with_meta(&format!(r#"{{"{V}":"1900-01-01"}}"#));
        assert_eq!(check("initialize", &frame, false), Ok(Served::Legacy));
    }

    #[test]
    fn the_unsupported_version_code_is_in_the_table() {
        assert!(ERROR_CODES.contains(&(UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version")));
    }
}
