//! Opening a session in either protocol era, as the 2026-07-28 revision's
//! stdio binding describes: probe with `server/discover` first; a
//! `DiscoverResult` (or a recognised modern error) means a modern server,
//! anything else — any other error, a timeout, a malformed answer — means a
//! legacy one, and the `initialize` handshake follows. The fallback never
//! depends on one error code.
//!
//! One handshake for every transport: [`handshake`] asks only what
//! [`HandshakeTransport`] offers (a request within a deadline, a
//! notification), which [`Session`] implements here with its public API and
//! `mcp-framer-stdio-v2`'s `Client` implements over HTTP/2. The versions,
//! eras, method names and `_meta` keys are [`mcp_framer_jsonrpc::protocol`]'s.

use std::fmt;
use std::future::Future;
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

/// How a failed request counts in the handshake: the cases it tells apart.
#[derive(Debug)]
#[non_exhaustive]
pub enum Failure {
    /// The server answered with a JSON-RPC error.
    Rpc {
        /// The error's code.
        code: i64,
        /// The error's message.
        message: String,
        /// The error's `data`, if any.
        data: Option<Value>,
    },
    /// No answer within the deadline.
    TimedOut(Duration),
    /// The session ended.
    Closed,
    /// Anything else: the request could not be sent, or its answer was not
    /// one the transport accepts.
    Other,
}

/// What [`handshake`] needs of a client session, whatever transport carries
/// it: one request answered within a deadline, one notification, and how a
/// failure counts. [`Session`] implements it; so does
/// `mcp_framer_stdio_v2::host::Client`, so both transports open a session
/// the same way (the same fallback, the same retry after -32022).
pub trait HandshakeTransport {
    /// What carried an answer (a [`Received`] frame on the newline
    /// transport).
    type Response;
    /// Why a request or notification failed.
    type Error: std::error::Error;

    /// Sends the request `method` with `params` and waits at most `timeout`
    /// for its answer: the `result` (`Value::Null` when the answer carries
    /// none that parses) and the response.
    fn request_within(
        &self,
        method: &str,
        params: &Value,
        timeout: Duration,
    ) -> impl Future<Output = Result<(Value, Self::Response), Self::Error>> + Send;

    /// Sends the notification `method` with `params`, within `timeout`.
    fn notify_within(
        &self,
        method: &str,
        params: &Value,
        timeout: Duration,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// How `error` counts.
    fn failure(error: &Self::Error) -> Failure;
}

impl HandshakeTransport for Session {
    type Response = Received;
    type Error = RequestError;

    async fn request_within(
        &self,
        method: &str,
        params: &Value,
        timeout: Duration,
    ) -> Result<(Value, Received), RequestError> {
        let response = self.start(method, params).await?.with_timeout(timeout).response().await?;
        Ok((response.deserialize_payload().unwrap_or(Value::Null), response))
    }

    async fn notify_within(&self, method: &str, params: &Value, _timeout: Duration) -> Result<(), RequestError> {
        // A notification waits only for its write, which the session's
        // `write_timeout` bounds.
        self.notify(method, params).await
    }

    fn failure(error: &RequestError) -> Failure {
        match error {
            RequestError::Rpc { code, message, response } => {
                let error: Value = response.deserialize_payload().unwrap_or(Value::Null);
                Failure::Rpc { code: *code, message: message.clone(), data: error.get("data").cloned() }
            }
            RequestError::TimedOut { after, .. } => Failure::TimedOut(*after),
            RequestError::Closed(_) => Failure::Closed,
            _ => Failure::Other,
        }
    }
}

/// An open session: the era found and what the server said.
#[derive(Debug)]
#[non_exhaustive]
pub struct Handshaken<R = Received> {
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
    /// The response that carried it (on the newline transport, its frame
    /// length is the server's first answer's size).
    pub response: R,
    /// The `_meta` to put in every later request (modern era), or `None`.
    pub meta: Option<Value>,
}

impl<R> Handshaken<R> {
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

/// Why no session could be opened; `E` is the transport's error
/// ([`HandshakeTransport::Error`]).
#[derive(Debug)]
#[non_exhaustive]
pub enum HandshakeError<E = RequestError> {
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
    ClosedDuringDiscover(E),
    /// `initialize` was not answered within
    /// [`HandshakeOptions::initialize_timeout`].
    InitializeTimedOut(Duration),
    /// `initialize` failed.
    Initialize(E),
    /// `initialize`'s result is not a JSON object.
    Malformed(String),
    /// `notifications/initialized` could not be sent.
    Initialized(E),
}

impl<E: fmt::Display> fmt::Display for HandshakeError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HandshakeError::NoModernVersion { detail } => write!(f, "no usable modern protocol version: {detail}"),
            HandshakeError::ClosedDuringDiscover(e) => write!(f, "the session ended during server/discover: {e}"),
            HandshakeError::InitializeTimedOut(after) => write!(f, "initialize was not answered within {after:?}"),
            HandshakeError::Initialize(e) => write!(f, "initialize failed: {e}"),
            HandshakeError::Malformed(e) => write!(f, "the initialize result is malformed: {e}"),
            HandshakeError::Initialized(e) => write!(f, "notifications/initialized could not be sent: {e}"),
        }
    }
}

impl<E: fmt::Debug + fmt::Display> std::error::Error for HandshakeError<E> {}

/// What the modern probe found.
enum Probe<R> {
    Modern(Box<Handshaken<R>>),
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

async fn discover<T: HandshakeTransport>(
    session: &T,
    options: &HandshakeOptions,
    version: &str,
) -> Result<Probe<T::Response>, HandshakeError<T::Error>> {
    let meta = options.modern_meta(version);
    let params = json!({ "_meta": meta });
    let error = match session.request_within(DISCOVER, &params, options.discover_timeout).await {
        Ok((result, response)) => {
            let offered = strings(result.get("supportedVersions"));
            if offered.is_empty() || !result.is_object() {
                return Ok(Probe::NotModern("server/discover was answered without supportedVersions".to_owned()));
            }
            let Some(chosen) = choose(&offered, version) else {
                return Err(HandshakeError::NoModernVersion { detail: format!("supportedVersions {offered:?}") });
            };
            let meta = options.modern_meta(&chosen);
            return Ok(Probe::Modern(Box::new(Handshaken {
                era: Era::Modern,
                protocol_version: chosen,
                offered_versions: offered,
                fallback_reason: None,
                result,
                response,
                meta: Some(meta),
            })));
        }
        Err(error) => error,
    };
    match T::failure(&error) {
        Failure::Rpc { code, message, data } if code == UNSUPPORTED_PROTOCOL_VERSION => {
            let offered = strings(data.as_ref().and_then(|d| d.get("supported")));
            match choose(&offered, version) {
                Some(chosen) if chosen != version => Box::pin(discover(session, options, &chosen)).await,
                _ => Err(HandshakeError::NoModernVersion {
                    detail: format!("error {code} {message:?}, supported {offered:?}"),
                }),
            }
        }
        Failure::Rpc { code, message, .. } => {
            Ok(Probe::NotModern(format!("server/discover got error {code}: {message:?}")))
        }
        Failure::TimedOut(after) => Ok(Probe::NotModern(format!("server/discover was not answered within {after:?}"))),
        Failure::Closed => Err(HandshakeError::ClosedDuringDiscover(error)),
        Failure::Other => Ok(Probe::NotModern(format!("server/discover failed: {error}"))),
    }
}

async fn initialize<T: HandshakeTransport>(
    session: &T,
    options: &HandshakeOptions,
) -> Result<Handshaken<T::Response>, HandshakeError<T::Error>> {
    let params = json!({
        "protocolVersion": options.legacy_version,
        "capabilities": options.capabilities,
        "clientInfo": options.client_info,
    });
    let (result, response) = session.request_within(INITIALIZE, &params, options.initialize_timeout).await.map_err(
        |e| match T::failure(&e) {
            Failure::TimedOut(after) => HandshakeError::InitializeTimedOut(after),
            _ => HandshakeError::Initialize(e),
        },
    )?;
    if !result.is_object() {
        return Err(HandshakeError::Malformed(format!("not an object: {result}")));
    }
    let version = result.get("protocolVersion").and_then(Value::as_str).unwrap_or("").to_owned();
    session
        .notify_within(INITIALIZED, &Value::Null, options.initialize_timeout)
        .await
        .map_err(HandshakeError::Initialized)?;
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
pub async fn handshake<T: HandshakeTransport>(
    session: &T,
    options: &HandshakeOptions,
) -> Result<Handshaken<T::Response>, HandshakeError<T::Error>> {
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
