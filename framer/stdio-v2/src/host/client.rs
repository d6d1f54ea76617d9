//! The session: spawn, send requests and notifications, listen, shut down.

use std::fmt;
use std::process::ExitStatus;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use h2::client::SendRequest;
use http::{HeaderMap, Method, Request, StatusCode};
use mcp_framer_jsonrpc::protocol::{Era, NEWEST_LEGACY};
use mcp_framer_jsonrpc::{EncodeError, Encoder, Id, OwnedId};
use mcp_framer_stdio::host::{Failure, HandshakeTransport};
use mcp_framer_stdio::tree::Killer;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::{Semaphore, mpsc, oneshot};

use super::body;
use super::call::{Call, Response, State};
use super::config::HostConfig;
use super::error::Error;
use super::headers::{self, ToolHeaders};
use super::shared::{HostCounters, Shared, bump, counters_of};
use super::startup::{self, Started};
use crate::io::send_data;
use crate::wire::{self, Params};

/// A listen stream's deadline (in effect none).
const LISTEN_DEADLINE: Duration = Duration::from_secs(365 * 24 * 3600);

/// A `stdio-v2` session with a spawned server.
pub struct Client {
    send: SendRequest<Bytes>,
    shared: Arc<Shared>,
    config: HostConfig,
    next_id: AtomicI64,
    /// The session opened with `initialize`: no modern `_meta` is added.
    legacy_session: AtomicBool,
    /// The `x-mcp-header` annotations seen in `tools/list` results.
    tool_headers: ToolHeaders,
    /// One permit per call in flight ([`HostConfig::max_calls`]).
    slots: Arc<Semaphore>,
    encoder: Encoder,
    connection: tokio::task::JoinHandle<()>,
    stderr_drain: tokio::task::JoinHandle<()>,
    _kill_on_drop: KillOnDrop,
}

/// Kills the child's tree when the client is dropped (no runtime needed).
struct KillOnDrop(Killer);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
    }
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client").field("config", &self.config).field("counters", &self.counters()).finish()
    }
}

impl Client {
    /// Spawns `command` and starts a `stdio-v2` session with it; see the
    /// [module](super) for the contract. Needs a tokio runtime.
    pub async fn spawn(command: tokio::process::Command, config: HostConfig) -> Result<Client, Error> {
        let Started { send, shared, connection, stderr_drain } = startup::start(command, &config).await?;
        let shared_killer = shared.killer.clone();
        let slots = Arc::new(Semaphore::new(config.max_calls.clamp(1, Semaphore::MAX_PERMITS)));
        Ok(Client {
            slots,
            send,
            shared,
            config,
            next_id: AtomicI64::new(1),
            legacy_session: AtomicBool::new(false),
            tool_headers: ToolHeaders::default(),
            encoder: Encoder::unlimited(),
            connection,
            stderr_drain,
            _kill_on_drop: KillOnDrop(shared_killer),
        })
    }

    /// The counters so far.
    pub fn counters(&self) -> HostCounters {
        counters_of(&self.shared)
    }

    /// The end of the child's stderr so far, as text: empty when it wrote
    /// nothing; what it wrote, plain, when all of it is kept; the last
    /// [`HostConfig::stderr_tail`] bytes after a marker line saying how many
    /// earlier bytes were dropped otherwise (as the newline host's).
    pub fn stderr_tail(&self) -> String {
        self.shared.stderr_tail()
    }

    /// Sends a request and waits for its response (notifications that come
    /// on its event stream are kept in [`Response::notifications`]). A JSON-RPC
    /// error is [`Error::Rpc`]. Dropping the future cancels the request.
    ///
    /// A `tools/list` result is read for `x-mcp-header` annotations (later
    /// `tools/call`s carry the `Mcp-Param-{Name}` headers they ask for); a
    /// tool whose annotations break the rules is removed from the result,
    /// as the 2026-07-28 text requires, counted in
    /// [`HostCounters::tools_rejected`] and logged (`tracing` warning).
    pub async fn request<P: Serialize + ?Sized>(&self, method: &str, params: &P) -> Result<Response, Error> {
        let mut response = self.call(method, params).await?.response().await?;
        if method == "tools/list" {
            self.learn_tools(&mut response);
        }
        Ok(response)
    }

    /// Records the tools' `x-mcp-header` annotations of a `tools/list`
    /// result and removes the invalid tools from it.
    fn learn_tools(&self, response: &mut Response) {
        let Ok(mut message) = serde_json::from_slice::<Value>(&response.message) else { return };
        let invalid = self.tool_headers.learn(&message["result"]);
        if invalid.is_empty() {
            return;
        }
        for (tool, why) in &invalid {
            tracing::warn!(tool = %tool, "stdio-v2 host: tool definition rejected: {why}");
            bump(&self.shared.counters.tools_rejected);
        }
        if let Some(tools) = message["result"]["tools"].as_array_mut() {
            tools.retain(|t| !invalid.iter().any(|(name, _)| t["name"].as_str() == Some(name)));
        }
        if let Ok(bytes) = serde_json::to_vec(&message) {
            response.message = Bytes::from(bytes);
        }
    }

    /// Sends a request and returns its [`Call`]: the streaming form.
    pub async fn call<P: Serialize + ?Sized>(&self, method: &str, params: &P) -> Result<Call, Error> {
        let id = Id::Number(self.next_id.fetch_add(1, Ordering::Relaxed));
        let legacy = self.legacy_session.load(Ordering::Relaxed);
        if headers::opens_legacy(method) {
            self.legacy_session.store(true, Ordering::Relaxed);
        }
        let params = serde_json::to_value(params).map_err(|e| Error::Encode(EncodeError::Serialize(e)))?;
        let config = &self.config;
        let params = if headers::modern_meta_for(method, config.protocol_version, legacy) {
            headers::with_request_meta(
                params,
                config.protocol_version,
                &config.client_capabilities,
                &config.client_info,
            )
        } else {
            params
        };
        let body = self.encoder.request(&id, method, &params).map_err(Error::Encode)?;
        bump(&self.shared.counters.requests);
        let mut headers = self.headers_for(method, &body, legacy);
        if method == "tools/call"
            && let Some(tool) = params.get("name").and_then(Value::as_str)
        {
            self.tool_headers.add(tool, params.get("arguments"), &mut headers);
        }
        self.post(id, method, headers, Bytes::from(body)).await
    }

    /// The headers of a request body: those [`request_headers`](wire::request_headers)
    /// builds, and its `content-length`.
    fn headers_for(&self, method: &str, body: &[u8], legacy: bool) -> HeaderMap {
        let version = match self.config.protocol_version {
            v if legacy && Era::of(v) == Era::Modern => NEWEST_LEGACY,
            v => v,
        };
        let mut headers = match mcp_framer_jsonrpc::parse(body) {
            Ok(message) => wire::request_headers(method, &Params::read(message.payload()), version),
            Err(_) => wire::request_headers(method, &Params::default(), version),
        };
        headers.insert(http::header::CONTENT_LENGTH, body.len().into());
        headers
    }

    /// Sends `body` (one JSON-RPC request, as is: the caller chose its id)
    /// with the headers built from it; for tests of what the server does
    /// with odd bodies, headers built for `method`.
    pub async fn call_raw(&self, id: OwnedId, method: &str, body: Vec<u8>) -> Result<Call, Error> {
        let headers = self.headers_for(method, &body, self.legacy_session.load(Ordering::Relaxed));
        self.post(id, method, headers, Bytes::from(body)).await
    }

    /// Sends `body` with exactly `headers` (nothing added but the method and
    /// path, no `content-length` unless given): for tests of the server's
    /// header checks and of its limit counted on DATA as it arrives.
    pub async fn call_with_headers(
        &self,
        id: OwnedId,
        method: &str,
        headers: HeaderMap,
        body: Vec<u8>,
    ) -> Result<Call, Error> {
        self.post(id, method, headers, Bytes::from(body)).await
    }

    async fn post(&self, id: OwnedId, method: &str, headers: HeaderMap, body: Bytes) -> Result<Call, Error> {
        let mut request = Request::builder().method(Method::POST).uri(format!("http://localhost{}", wire::ENDPOINT));
        if let Some(map) = request.headers_mut() {
            *map = headers;
        }
        let request = request.body(()).map_err(|e| Error::Protocol { status: 0, detail: e.to_string() })?;
        let deadline = tokio::time::Instant::now() + self.config.request_timeout;
        let timed_out = || Error::TimedOut { method: method.to_owned(), after: self.config.request_timeout };
        // Waits for a slot among `max_calls`, then while the server's stream
        // limit is reached, within the deadline.
        let slot = match tokio::time::timeout_at(deadline, Arc::clone(&self.slots).acquire_owned()).await {
            Ok(Ok(slot)) => slot,
            Ok(Err(_)) => return Err(self.shared.closed("the session is closed").await),
            Err(_) => return Err(timed_out()),
        };
        let mut send = match tokio::time::timeout_at(deadline, self.send.clone().ready()).await {
            Ok(Ok(send)) => send,
            Ok(Err(_)) => return Err(self.shared.closed("the HTTP/2 connection is closed").await),
            Err(_) => return Err(timed_out()),
        };
        let (response, mut stream) = match send.send_request(request, body.is_empty()) {
            Ok(pair) => pair,
            Err(_) => return Err(self.shared.closed("the HTTP/2 connection is closed").await),
        };
        // The answer is taken off the connection as it arrives, read or not.
        let (tx, pieces) = mpsc::unbounded_channel();
        let (demand, demanded) = oneshot::channel();
        let max = self.config.max_receive;
        let budget = body::event_budget(max);
        tokio::spawn(body::receive(response, tx, demanded, max, budget, Arc::clone(&self.shared)));
        let mut call = Call {
            id,
            method: method.to_owned(),
            stream: None,
            state: State::Waiting,
            pieces,
            demand: Some(demand),
            peeked: None,
            shared: Arc::clone(&self.shared),
            max,
            deadline,
            timeout: self.config.request_timeout,
            finished: false,
            body_unfinished: false,
            slot: Some(slot),
        };
        if !body.is_empty() {
            // Send the body within the window; an early answer (a 413) ends it.
            let early = tokio::time::timeout_at(deadline, async {
                tokio::select! {
                    sent = send_data(&mut stream, body, true) => { let _ = sent; None }
                    piece = call.pieces.recv() => Some(piece),
                }
            })
            .await;
            match early {
                Ok(None) => {}
                Ok(Some(piece)) => {
                    // Answered before the whole body was taken (a 413): stop
                    // sending; the stream is reset once the answer is read.
                    call.body_unfinished = true;
                    call.peeked = piece;
                }
                Err(_) => {
                    call.stream = Some(stream);
                    return Err(call.timed_out());
                }
            }
        }
        call.stream = Some(stream);
        Ok(call)
    }

    /// Sends a notification; `Ok` once the server accepted it (`202`).
    pub async fn notify<P: Serialize + ?Sized>(&self, method: &str, params: &P) -> Result<(), Error> {
        let body = self.encoder.notification(method, params).map_err(Error::Encode)?;
        let message =
            mcp_framer_jsonrpc::parse(&body).map_err(|e| Error::Protocol { status: 0, detail: e.to_string() })?;
        let _ = message;
        let headers = self.headers_for(method, &body, self.legacy_session.load(Ordering::Relaxed));
        bump(&self.shared.counters.notifications);
        let mut call = self.post(Id::Number(0), method, headers, Bytes::from(body)).await?;
        let status = call.started().await?;
        call.peeked = None;
        if status == StatusCode::ACCEPTED.as_u16() {
            call.finished = true;
            return Ok(());
        }
        Err(call
            .error_from(status)
            .await
            .unwrap_or(Error::Protocol { status, detail: "a notification's answer must be 202".into() }))
    }

    /// Opens the `subscriptions/listen` stream with `filter` (the request's
    /// `notifications` member, e.g. `{"toolsListChanged": true}`); its
    /// [`Call::next`] yields the acknowledgment, then each notification.
    pub async fn listen(&self, filter: Value) -> Result<Call, Error> {
        let mut call = self.call(wire::LISTEN, &serde_json::json!({"notifications": filter})).await?;
        // A long-lived stream: no request deadline.
        call.deadline = tokio::time::Instant::now() + LISTEN_DEADLINE;
        Ok(call)
    }

    /// Ends the session: closes the connection (`GOAWAY` once no stream is
    /// open, then the child's stdin; a connection still busy after
    /// [`HostConfig::exit_grace`] is dropped), waits the same grace for the
    /// child, then sends `SIGTERM` to its tree (unix) and waits again, then
    /// kills the tree (whatever the child left in it too). Returns the exit
    /// status and the whole stderr tail (read to EOF, within the grace).
    pub async fn shutdown(self) -> Ended {
        let Client { send, shared, config, mut connection, stderr_drain, .. } = self;
        drop(send);
        if tokio::time::timeout(config.exit_grace, &mut connection).await.is_err() {
            connection.abort();
            let _ = connection.await;
        }
        let mut status = {
            let mut child = shared.child.lock().await;
            let mut status = tokio::time::timeout(config.exit_grace, child.wait()).await.ok().and_then(Result::ok);
            if status.is_none() {
                let _ = shared.killer.terminate();
                status = tokio::time::timeout(config.exit_grace, child.wait()).await.ok().and_then(Result::ok);
            }
            status
        };
        let _ = shared.killer.kill();
        if status.is_none() {
            let mut child = shared.child.lock().await;
            status = tokio::time::timeout(config.exit_grace, child.wait()).await.ok().and_then(Result::ok);
        }
        let _ = tokio::time::timeout(config.exit_grace, stderr_drain).await;
        Ended { exit_status: status, stderr_tail: shared.stderr_tail(), counters: counters_of(&shared) }
    }

    /// The child's pid, while it has not been reaped.
    pub async fn pid(&self) -> Option<u32> {
        self.shared.child.lock().await.id()
    }
}

/// What [`Client::shutdown`] found.
#[derive(Debug)]
#[non_exhaustive]
pub struct Ended {
    /// The child's exit status, if it exited (or was killed) within the graces.
    pub exit_status: Option<ExitStatus>,
    /// The end of its stderr.
    pub stderr_tail: String,
    /// The counters at the end.
    pub counters: HostCounters,
}

/// The newline host's handshake runs over `stdio-v2` as it is: the same
/// `server/discover` probe, the same retry after -32022 with the versions
/// its `data.supported` offers, the same fallback to `initialize`
/// ([`mcp_framer_stdio::host::handshake`]).
impl HandshakeTransport for Client {
    type Response = Response;
    type Error = Error;

    async fn request_within(
        &self,
        method: &str,
        params: &Value,
        timeout: Duration,
    ) -> Result<(Value, Response), Error> {
        match tokio::time::timeout(timeout, self.request(method, params)).await {
            Ok(answered) => answered.map(|response| (response.result(), response)),
            // Dropping the request resets its stream: the server cancels it.
            Err(_) => Err(Error::TimedOut { method: method.to_owned(), after: timeout }),
        }
    }

    async fn notify_within(&self, method: &str, params: &Value, timeout: Duration) -> Result<(), Error> {
        match tokio::time::timeout(timeout, self.notify(method, params)).await {
            Ok(sent) => sent,
            Err(_) => Err(Error::TimedOut { method: method.to_owned(), after: timeout }),
        }
    }

    fn failure(error: &Error) -> Failure {
        match error {
            Error::Rpc { error, .. } => {
                Failure::Rpc { code: error.code, message: error.message.clone(), data: error.data.clone() }
            }
            Error::TimedOut { after, .. } => Failure::TimedOut(*after),
            Error::Closed(_) => Failure::Closed,
            _ => Failure::Other,
        }
    }
}
