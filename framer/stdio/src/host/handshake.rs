//! Opening a session in either protocol era, as the 2026-07-28 revision's
//! stdio binding describes: probe with `server/discover` first; a
//! `DiscoverResult` (or a recognised modern error) means a modern server,
//! anything else — any other error, a timeout, a malformed answer — means a
//! legacy one, and the `initialize` handshake follows. The fallback never
//! depends on one error code.
//!
//! Built on [`Session`]'s public API only ([`Session::start`],
//! [`Session::notify`]). The versions, eras, method names and `_meta` keys
//! are [`mcp_framer_jsonrpc::protocol`]'s.

use std::fmt;
use std::time::Duration;

use mcp_framer_jsonrpc::UNSUPPORTED_PROTOCOL_VERSION;
pub use mcp_framer_jsonrpc::protocol::Era;
use mcp_framer_jsonrpc::protocol::{
    DISCOVER, INITIALIZE, INITIALIZED, META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_PROTOCOL_VERSION,
    META_SERVER_INFO, NEWEST, NEWEST_LEGACY,
};
use serde_json::{Value, json};

use super::{Received, RequestError, Session};

/// Which era to try, and how.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct HandshakeOptions {
    /// `None`: probe with `server/discover`, fall back to `initialize`
    /// (the default). `Some(era)`: that era only, no fallback.
    pub era: Option<Era>,
    /// The modern version asked for in `server/discover`. Default
    /// [`protocol::NEWEST`](mcp_framer_jsonrpc::protocol::NEWEST).
    pub modern_version: String,
    /// The version offered in `initialize`. Default
    /// [`protocol::NEWEST_LEGACY`](mcp_framer_jsonrpc::protocol::NEWEST_LEGACY).
    pub legacy_version: String,
    /// How long `server/discover` may take before the server counts as
    /// legacy. Default 5 s.
    pub discover_timeout: Duration,
    /// How long `initialize` may take. Default 10 s.
    pub initialize_timeout: Duration,
    /// `clientInfo` (name and version). Default `{"name": "mcp-framer-stdio", ...}`.
    pub client_info: Value,
    /// The client capabilities declared. Default `{}`.
    pub capabilities: Value,
}

impl Default for HandshakeOptions {
    fn default() -> HandshakeOptions {
        HandshakeOptions {
            era: None,
            modern_version: NEWEST.to_owned(),
            legacy_version: NEWEST_LEGACY.to_owned(),
            discover_timeout: Duration::from_secs(5),
            initialize_timeout: Duration::from_secs(10),
            client_info: json!({ "name": "mcp-framer-stdio", "version": env!("CARGO_PKG_VERSION") }),
            capabilities: json!({}),
        }
    }
}

crate::setters::setters!(HandshakeOptions {
    era: Option<Era> => with_era,
    modern_version: String => with_modern_version,
    legacy_version: String => with_legacy_version,
    discover_timeout: Duration => with_discover_timeout,
    initialize_timeout: Duration => with_initialize_timeout,
    client_info: Value => with_client_info,
    capabilities: Value => with_capabilities,
});

impl HandshakeOptions {
    /// The per-request `_meta` of the modern era for `version`.
    pub fn modern_meta(&self, version: &str) -> Value {
        json!({
            META_PROTOCOL_VERSION: version,
            META_CLIENT_INFO: self.client_info,
            META_CLIENT_CAPABILITIES: self.capabilities,
        })
    }
}

/// An open session: the era found and what the server said.
#[derive(Debug)]
#[non_exhaustive]
pub struct Handshaken {
    /// The era.
    pub era: Era,
    /// The version in use: the modern one chosen from the server's
    /// `supportedVersions`, or `initialize`'s `protocolVersion`.
    pub protocol_version: String,
    /// The versions the server offered (`supportedVersions` or the
    /// `data.supported` of an unsupported-version error); for a legacy
    /// server, the one it answered with.
    pub offered_versions: Vec<String>,
    /// Why the modern probe did not succeed, when the era is legacy after
    /// probing (`None` otherwise).
    pub fallback_reason: Option<String>,
    /// The `DiscoverResult` or the `initialize` result.
    pub result: Value,
    /// The response that carried it (its frame length is the server's first
    /// answer's size).
    pub response: Received,
    /// The `_meta` to put in every later request (modern era), or `None`.
    pub meta: Option<Value>,
}

impl Handshaken {
    /// The server's identity: `serverInfo` (legacy) or
    /// `_meta["io.modelcontextprotocol/serverInfo"]` (modern).
    pub fn server_info(&self) -> Option<&Value> {
        self.result.get("serverInfo").or_else(|| self.result.get("_meta")?.get(META_SERVER_INFO))
    }

    /// The server's capabilities.
    pub fn capabilities(&self) -> Option<&Value> {
        self.result.get("capabilities")
    }

    /// `params` with this era's `_meta` merged in (a no-op for legacy).
    /// `params` must be an object or null.
    pub fn params(&self, params: Value) -> Value {
        with_meta(params, self.meta.as_ref())
    }
}

/// `params` (an object or null) with the members of `meta` added to its
/// `_meta` (members already there win).
pub fn with_meta(params: Value, meta: Option<&Value>) -> Value {
    let Some(Value::Object(meta)) = meta else { return params };
    let mut params = match params {
        Value::Object(map) => map,
        _ => serde_json::Map::new(),
    };
    let slot = params.entry("_meta").or_insert_with(|| json!({}));
    if let Value::Object(existing) = slot {
        for (key, value) in meta {
            existing.entry(key.clone()).or_insert_with(|| value.clone());
        }
    }
    Value::Object(params)
}

/// Why no session could be opened.
#[derive(Debug)]
#[non_exhaustive]
pub enum HandshakeError {
    /// A modern server (it answered `server/discover` or a modern error)
    /// that offers no version this side knows, or (with
    /// [`HandshakeOptions::era`] = modern) a server that is not modern.
    NoModernVersion {
        /// What the server offered or answered.
        detail: String,
    },
    /// The session ended during the modern probe (some servers exit on a
    /// request before `initialize`): a fresh server needs
    /// `era: Some(Era::Legacy)`.
    ClosedDuringDiscover(RequestError),
    /// `initialize` failed.
    Initialize(RequestError),
    /// `initialize`'s result is not a JSON object.
    Malformed(String),
    /// `notifications/initialized` could not be sent.
    Initialized(RequestError),
}

impl fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HandshakeError::NoModernVersion { detail } => write!(f, "no usable modern protocol version: {detail}"),
            HandshakeError::ClosedDuringDiscover(e) => write!(f, "the session ended during server/discover: {e}"),
            HandshakeError::Initialize(RequestError::TimedOut { after, .. }) => {
                write!(f, "initialize was not answered within {after:?}")
            }
            HandshakeError::Initialize(e) => write!(f, "initialize failed: {e}"),
            HandshakeError::Malformed(e) => write!(f, "the initialize result is malformed: {e}"),
            HandshakeError::Initialized(e) => write!(f, "notifications/initialized could not be sent: {e}"),
        }
    }
}

impl std::error::Error for HandshakeError {}

/// What the modern probe found.
enum Probe {
    Modern(Box<Handshaken>),
    NotModern(String),
}

fn strings(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

/// Picks `wanted` if offered, else the newest offered modern version not
/// newer than `wanted`.
fn choose(offered: &[String], wanted: &str) -> Option<String> {
    if offered.iter().any(|v| v == wanted) {
        return Some(wanted.to_owned());
    }
    offered.iter().filter(|v| Era::of(v) == Era::Modern && v.as_str() <= wanted).max().cloned()
}

async fn discover(session: &Session, options: &HandshakeOptions, version: &str) -> Result<Probe, HandshakeError> {
    let meta = options.modern_meta(version);
    let params = json!({ "_meta": meta });
    let pending = match session.start(DISCOVER, &params).await {
        Ok(pending) => pending,
        Err(e @ RequestError::Closed(_)) => return Err(HandshakeError::ClosedDuringDiscover(e)),
        Err(e) => return Ok(Probe::NotModern(format!("server/discover could not be sent: {e}"))),
    };
    match pending.with_timeout(options.discover_timeout).response().await {
        Ok(response) => {
            let result: Value = response.deserialize_payload().unwrap_or(Value::Null);
            let offered = strings(result.get("supportedVersions"));
            if offered.is_empty() || !result.is_object() {
                return Ok(Probe::NotModern("server/discover was answered without supportedVersions".to_owned()));
            }
            let Some(chosen) = choose(&offered, version) else {
                return Err(HandshakeError::NoModernVersion { detail: format!("supportedVersions {offered:?}") });
            };
            let meta = options.modern_meta(&chosen);
            Ok(Probe::Modern(Box::new(Handshaken {
                era: Era::Modern,
                protocol_version: chosen,
                offered_versions: offered,
                fallback_reason: None,
                result,
                response,
                meta: Some(meta),
            })))
        }
        Err(RequestError::Rpc { code, message, response }) if code == UNSUPPORTED_PROTOCOL_VERSION => {
            let error: Value = response.deserialize_payload().unwrap_or(Value::Null);
            let offered = strings(error.get("data").and_then(|d| d.get("supported")));
            match choose(&offered, version) {
                Some(chosen) if chosen != version => Box::pin(discover(session, options, &chosen)).await,
                _ => Err(HandshakeError::NoModernVersion {
                    detail: format!("error {code} {message:?}, supported {offered:?}"),
                }),
            }
        }
        Err(RequestError::Rpc { code, message, .. }) => {
            Ok(Probe::NotModern(format!("server/discover got error {code}: {message:?}")))
        }
        Err(RequestError::TimedOut { after, .. }) => {
            Ok(Probe::NotModern(format!("server/discover was not answered within {after:?}")))
        }
        Err(e @ RequestError::Closed(_)) => Err(HandshakeError::ClosedDuringDiscover(e)),
        Err(e) => Ok(Probe::NotModern(format!("server/discover failed: {e}"))),
    }
}

async fn initialize(session: &Session, options: &HandshakeOptions) -> Result<Handshaken, HandshakeError> {
    let params = json!({
        "protocolVersion": options.legacy_version,
        "capabilities": options.capabilities,
        "clientInfo": options.client_info,
    });
    let pending = session.start(INITIALIZE, &params).await.map_err(HandshakeError::Initialize)?;
    let response =
        pending.with_timeout(options.initialize_timeout).response().await.map_err(HandshakeError::Initialize)?;
    let result: Value = response.deserialize_payload().map_err(|e| HandshakeError::Malformed(e.to_string()))?;
    if !result.is_object() {
        return Err(HandshakeError::Malformed(format!("not an object: {}", response.payload().unwrap_or(""))));
    }
    let version = result.get("protocolVersion").and_then(Value::as_str).unwrap_or("").to_owned();
    session.notify(INITIALIZED, &()).await.map_err(HandshakeError::Initialized)?;
    Ok(Handshaken {
        era: Era::Legacy,
        offered_versions: vec![version.clone()],
        protocol_version: version,
        fallback_reason: None,
        result,
        response,
        meta: None,
    })
}

/// Opens `session` in the era [`HandshakeOptions::era`] names, or — by
/// default — probes with `server/discover` and falls back to `initialize`
/// on any error or timeout that is not a recognised modern answer.
pub async fn handshake(session: &Session, options: &HandshakeOptions) -> Result<Handshaken, HandshakeError> {
    match options.era {
        Some(Era::Legacy) => return initialize(session, options).await,
        Some(Era::Modern) => {
            return match discover(session, options, &options.modern_version).await? {
                Probe::Modern(done) => Ok(*done),
                Probe::NotModern(detail) => Err(HandshakeError::NoModernVersion { detail }),
            };
        }
        None => {}
    }
    match discover(session, options, &options.modern_version).await? {
        Probe::Modern(done) => Ok(*done),
        Probe::NotModern(reason) => {
            let mut done = initialize(session, options).await?;
            done.fallback_reason = Some(reason);
            Ok(done)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_is_merged_without_overwriting() {
        let meta = json!({ "a": 1, "progressToken": "x" });
        let merged = with_meta(json!({ "name": "t", "_meta": { "progressToken": "mine" } }), Some(&meta));
        assert_eq!(merged, json!({ "name": "t", "_meta": { "progressToken": "mine", "a": 1 } }));
        assert_eq!(with_meta(Value::Null, Some(&meta)), json!({ "_meta": meta }));
        assert_eq!(with_meta(json!({ "k": 2 }), None), json!({ "k": 2 }));
    }

    #[test]
    fn a_version_is_chosen_only_from_the_modern_ones_offered() {
        let offered: Vec<String> = ["2026-07-28", "2025-11-25"].map(String::from).to_vec();
        assert_eq!(choose(&offered, "2026-07-28").as_deref(), Some("2026-07-28"));
        assert_eq!(choose(&["2025-11-25".to_owned()], "2026-07-28"), None);
        assert_eq!(choose(&offered, "2027-01-01").as_deref(), Some("2026-07-28"));
    }
}
