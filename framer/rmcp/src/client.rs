//! The client side: [`ChildProcess`], a `Transport<RoleClient>` on the host's
//! [`Connection`].

use std::collections::{HashSet, VecDeque};
use std::future::Future;
use std::io;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::{
    ClientNotification, ErrorCode, ErrorData, JsonRpcError, JsonRpcMessage, JsonRpcVersion2_0, RequestId,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::process::{ChildStderr, Command};

use crate::decode::{AdapterCounts, Counters, bump, decode, request_id};
use mcp_framer_jsonrpc::{CONNECTION_CLOSED, Encoder, INVALID_RESPONSE, Kind, RESPONSE_TOO_LARGE};
use mcp_framer_stdio::host::{
    Closed, Connection, Inbound, InboundQueue, MetricsSnapshot, Overload, SessionConfig, ShutdownReport, ShutdownStage,
    SkippedFrame, StderrLog, WriteError,
};

/// The wait budget per overload episode of [`ChildProcess::default_config`].
pub const DEFAULT_MAX_WAIT: Duration = Duration::from_secs(10);

/// An MCP server spawned as a child process, as an rmcp client transport:
/// the swap for `rmcp::transport::TokioChildProcess`.
///
/// ```
/// use mcp_framer_rmcp::ChildProcess;
/// use rmcp::ServiceExt;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // A tiny server: answers `initialize`, then reads stdin to its end.
/// let mut command = tokio::process::Command::new("sh");
/// command.args(["-c", r#"read line
/// echo '{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"sh","version":"0"}}}'
/// cat >/dev/null"#]);
/// let transport = ChildProcess::new(command)?;
/// let handle = transport.handle();
/// let service = ().serve(transport).await?;
/// assert_eq!(service.peer_info().unwrap().server_info.as_ref().unwrap().name, "sh");
/// service.cancel().await?;
/// assert!(handle.closed().is_some());
/// assert_eq!(handle.metrics().delivered, 1);
/// # Ok(())
/// # }
/// ```
///
/// Everything below rmcp's service is the host's lower layer,
/// [`Connection`] (see its documentation for the rules): the byte limit
/// before any parse; a reader task that never stops draining stdout, with a
/// queue bounded by bytes and an overload policy; stderr drained into a
/// bounded tail; writes with stall detection; on [`close`](Transport::close)
/// the host's shutdown sequence ([`Connection::shutdown`]) over the server's
/// process tree ([`SessionConfig::process_tree`]); on `Drop`, a kill of the
/// tree that needs no running runtime; the metrics. A response to a request
/// rmcp sent is never dropped to make room, whatever the overload policy.
/// This type only translates, and makes sure no call waits forever for an
/// answer that came or can no longer come:
///
/// * each frame the reader delivers is deserialized straight into rmcp's
///   type for its kind (the reader already classified it);
/// * an oversize response whose id was recovered reaches rmcp at once as an
///   error response for that id, code
///   [`RESPONSE_TOO_LARGE`](mcp_framer_jsonrpc::RESPONSE_TOO_LARGE), the
///   length and the limit in its message and `data`;
/// * a response to a pending request that rmcp's types reject becomes an
///   error response for it, code
///   [`INVALID_RESPONSE`](mcp_framer_jsonrpc::INVALID_RESPONSE);
/// * when the server's messages end (it exited, even if a process it left
///   holds its stdout: the connection ends after
///   [`SessionConfig::exit_grace`]), each request still pending gets an
///   error response, code
///   [`CONNECTION_CLOSED`](mcp_framer_jsonrpc::CONNECTION_CLOSED), saying
///   why, with the exit status and the end of stderr;
/// * every frame rmcp cannot take is counted ([`AdapterCounts`]) and logged
///   at `WARN`: nothing is dropped silently.
///
/// One case remains where a call waits: an oversize response whose id could
/// not be recovered (neither its first nor its last 4 KiB show it). rmcp has
/// no default request timeout; give such calls one (the skipped frame is
/// counted in the metrics and in [`AdapterCounts::skipped`]):
///
/// ```no_run
/// # use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest};
/// # use rmcp::service::{PeerRequestOptions, RunningService};
/// # async fn call(service: &RunningService<rmcp::RoleClient, ()>) -> Result<(), Box<dyn std::error::Error>> {
/// let request = ClientRequest::CallToolRequest(CallToolRequest::new(CallToolRequestParams::new("search")));
/// let options = PeerRequestOptions::with_timeout(std::time::Duration::from_secs(120));
/// let answer = service.send_request_with_option(request, options).await?.await_response().await?;
/// # Ok(()) }
/// ```
///
/// `ChildProcess` implements [`Transport`] and nothing else, so `serve`
/// infers it unambiguously. Take a [`handle`](ChildProcess::handle) before
/// `serve` moves it, to read the metrics and the stderr tail or to stop the
/// child.
#[derive(Debug)]
pub struct ChildProcess {
    connection: Arc<Connection>,
    inbound: InboundQueue,
    encoder: Encoder,
    counters: Arc<Counters>,
    /// Ids of the requests sent and not yet answered: to count responses
    /// that answer none of them, to fail at once one whose response rmcp's
    /// types reject, and to fail those left when the connection ends.
    sent: HashSet<rmcp::model::RequestId>,
    /// Once the server's messages have ended: the failures of the requests
    /// left pending, handed to rmcp before its input ends.
    ending: Option<VecDeque<RxJsonRpcMessage<RoleClient>>>,
    /// [`into_inner`](ChildProcess::into_inner) took the connection: `Drop`
    /// leaves the child alone.
    released: bool,
}

impl ChildProcess {
    /// Spawns `command` with [`ChildProcess::default_config`]: stdin,
    /// stdout and stderr piped, in a process tree of its own.
    pub fn new(command: impl Into<Command>) -> io::Result<ChildProcess> {
        ChildProcess::with_config(command, ChildProcess::default_config())
    }

    /// The configuration [`new`](ChildProcess::new) and
    /// [`builder`](ChildProcess::builder) use: the host's
    /// [`SessionConfig::default`], but for a wait budget of
    /// [`DEFAULT_MAX_WAIT`] per overload episode
    /// ([`Overload::max_wait`](mcp_framer_stdio::host::Overload::max_wait)).
    /// Derive yours from it (`ChildProcess::default_config().with_max_receive(..)`).
    ///
    /// Why wait rather than drop at once, as the host does by default: the
    /// consumer here is rmcp's service loop, which never waits on the
    /// application (it hands each message to a task of its own), so a full
    /// queue means a burst faster than rmcp's decoding, not a stalled
    /// application. Without a wait, such a burst loses notifications that
    /// stock rmcp, paced by the pipe, delivers; with the budget it loses
    /// none, and the burst still ends sooner than over stock rmcp. The flood
    /// row of the adapter's battery measures it (`cargo test -p
    /// mcp-framer-e2e --test rmcp_client -- --nocapture a_flood` prints the
    /// messages dropped and the time waited for each transport): in a debug
    /// build on a loaded machine, rmcp falls behind and the wait is what
    /// saves the notifications; in a release build rmcp keeps up and
    /// nothing waits. The budget keeps the promise that the reader never
    /// stops draining for long: past it, within one episode, the policy
    /// sheds again.
    pub fn default_config() -> SessionConfig {
        SessionConfig::default().with_overload(Overload::default().with_max_wait(DEFAULT_MAX_WAIT))
    }

    /// Spawns `command` with the host's configuration: limits, overload
    /// policy, stderr tail, shutdown timings (start from
    /// [`default_config`](ChildProcess::default_config)).
    pub fn with_config(command: impl Into<Command>, config: SessionConfig) -> io::Result<ChildProcess> {
        let (connection, inbound) = Connection::spawn(command.into(), config)?;
        Ok(ChildProcess::on(connection, inbound))
    }

    fn on(connection: Connection, inbound: InboundQueue) -> ChildProcess {
        let encoder = connection.encoder();
        ChildProcess {
            connection: Arc::new(connection),
            inbound,
            encoder,
            counters: Arc::default(),
            sent: HashSet::new(),
            ending: None,
            released: false,
        }
    }

    /// The path of `TokioChildProcess::builder(cmd).stderr(..).spawn()`.
    pub fn builder(command: impl Into<Command>) -> ChildProcessBuilder {
        ChildProcessBuilder { command: command.into(), config: ChildProcess::default_config(), stderr: None }
    }

    /// The child's process id, as `TokioChildProcess::id`: `None` once the
    /// child has exited and was reaped.
    pub fn id(&self) -> Option<u32> {
        live_pid(&self.connection)
    }

    /// The [`Connection`] below, the closest to stock's `into_inner` (which
    /// hands over the child): the child, its pipes' tasks and its metrics,
    /// now kept alive by the returned `Arc` rather than by this transport.
    /// Dropping the transport this way leaves the child running; dropping
    /// the last `Arc` (handles hold one too) kills its process tree, and
    /// [`Connection::shutdown`] stops it gracefully.
    pub fn into_inner(mut self) -> Arc<Connection> {
        self.released = true;
        Arc::clone(&self.connection)
    }

    /// A cloneable handle to the child: metrics, stderr tail, shutdown.
    pub fn handle(&self) -> ChildProcessHandle {
        ChildProcessHandle { connection: Arc::clone(&self.connection), counters: Arc::clone(&self.counters) }
    }

    /// Stops the child as `TokioChildProcess::graceful_shutdown` does, but
    /// over its process tree: the host's shutdown sequence
    /// ([`Connection::shutdown`], waits per [`SessionConfig::shutdown`]). An
    /// error only if the child outlived the last wait.
    pub async fn graceful_shutdown(&mut self) -> io::Result<()> {
        shutdown_result(self.connection.shutdown().await)
    }

    /// The message rmcp gets for `item`, if any: `None` for what rmcp cannot
    /// take (counted and logged).
    fn translate(&mut self, item: Inbound) -> Option<RxJsonRpcMessage<RoleClient>> {
        let received = match item {
            Inbound::Request(received) | Inbound::Notification(received) | Inbound::Response(received) => received,
            Inbound::Skipped(SkippedFrame::Oversize { len, max, id: Some(id) }) => {
                bump(&self.counters.oversize_errors);
                let id = request_id(&id);
                self.sent.remove(&id);
                tracing::warn!(%id, len, max, "oversize response discarded; its request fails at once");
                return Some(too_large(id, len, max));
            }
            Inbound::Skipped(skipped) => {
                bump(&self.counters.skipped);
                tracing::warn!(?skipped, "server frame skipped by the transport");
                return None;
            }
            other => {
                bump(&self.counters.skipped);
                tracing::warn!(?other, "server item not understood by this adapter; skipped");
                return None;
            }
        };
        match decode(received.kind(), received.frame()) {
            Ok(message) => {
                if let JsonRpcMessage::Response(rmcp::model::JsonRpcResponse { id, .. })
                | JsonRpcMessage::Error(rmcp::model::JsonRpcError { id: Some(id), .. }) = &message
                    && !self.sent.remove(id)
                {
                    bump(&self.counters.unknown_ids);
                    tracing::warn!(%id, "response to no request in flight (late after a cancellation, or unknown)");
                }
                Some(message)
            }
            Err(error) => {
                bump(&self.counters.rejected);
                let response = matches!(received.kind(), Kind::Response | Kind::ErrorResponse);
                if let Some(id) = received.id().map(request_id).filter(|id| response && self.sent.remove(id)) {
                    bump(&self.counters.invalid_responses);
                    tracing::warn!(%id, %error, frame = ?received,
                        "response rejected by rmcp's types; its request fails at once");
                    let message = format!("the response to request {id} was rejected by rmcp's types: {error}");
                    let data = serde_json::json!({ "len": received.frame().len() });
                    return Some(error_response(id, INVALID_RESPONSE, message, data));
                }
                tracing::warn!(kind = ?received.kind(), id = ?received.id(), method = received.method(), %error,
                    frame = ?received, "server message rejected by rmcp's types; skipped");
                None
            }
        }
    }

    /// The server's messages have ended: the requests still pending fail,
    /// each with an error response saying how the connection ended (why,
    /// the exit status, the end of stderr), so no rmcp call waits forever.
    async fn end(&mut self) -> VecDeque<RxJsonRpcMessage<RoleClient>> {
        // Published within the exit grace of the end of stdout.
        let closed = self.connection.wait_closed().await;
        if !self.sent.is_empty() {
            tracing::warn!(pending = self.sent.len(), %closed, "the connection ended with requests pending; they fail");
        }
        let data = serde_json::json!({
            "exit_status": closed.exit_status().map(|status| status.to_string()),
            "stderr_tail": closed.stderr_tail(),
        });
        self.sent
            .drain()
            .map(|id| {
                bump(&self.counters.closed_pending);
                error_response(id, CONNECTION_CLOSED, closed.to_string(), data.clone())
            })
            .collect()
    }
}

impl Transport<RoleClient> for ChildProcess {
    type Error = io::Error;

    fn send(&mut self, item: TxJsonRpcMessage<RoleClient>) -> impl Future<Output = io::Result<()>> + Send + 'static {
        match &item {
            JsonRpcMessage::Request(request) => {
                self.sent.insert(request.id.clone());
            }
            JsonRpcMessage::Notification(note) => {
                if let ClientNotification::CancelledNotification(cancelled) = &note.notification
                    && let Some(id) = &cancelled.params.request_id
                {
                    self.sent.remove(id);
                }
            }
            _ => {}
        }
        // Encoded in the task rmcp spawns for the send, as stock rmcp does:
        // a large message never holds up rmcp's service loop.
        let (encoder, connection) = (self.encoder, Arc::clone(&self.connection));
        async move {
            let frame = encoder.message(&item).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
            connection.send(frame).await.map_err(write_error)
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            if let Some(ending) = &mut self.ending {
                return ending.pop_front();
            }
            // Cancel-safe: the queue never loses an item to a dropped future,
            // and the end is computed again if its wait is dropped.
            match self.inbound.recv().await {
                Some(item) => {
                    if let Some(message) = self.translate(item) {
                        return Some(message);
                    }
                }
                None => self.ending = Some(self.end().await),
            }
        }
    }

    async fn close(&mut self) -> io::Result<()> {
        self.graceful_shutdown().await
    }
}

impl Drop for ChildProcess {
    /// Kills the child's process tree at once ([`Connection::kill`]), from
    /// `Drop` itself: no runtime needed, whoever else holds a handle (unless
    /// [`into_inner`](ChildProcess::into_inner) took the connection).
    fn drop(&mut self) {
        if !self.released {
            self.connection.kill();
        }
    }
}

/// The connection's child pid while it is not reaped.
fn live_pid(connection: &Connection) -> Option<u32> {
    connection.pid().filter(|_| connection.metrics().exit_status.is_none())
}

/// The `std::io::Error` a failed write becomes (rmcp boxes it; a user who
/// downcasts sees the same type as with stock rmcp).
fn write_error(error: WriteError) -> io::Error {
    let kind = match &error {
        WriteError::TimedOut { .. } => io::ErrorKind::TimedOut,
        WriteError::Io(e) => e.kind(),
        _ => io::ErrorKind::BrokenPipe,
    };
    io::Error::new(kind, error)
}

fn shutdown_result(report: ShutdownReport) -> io::Result<()> {
    match report.stage {
        ShutdownStage::StillRunning => Err(io::Error::other("the server is still running after it was killed")),
        _ => Ok(()),
    }
}

/// Builds a [`ChildProcess`]: the equivalent of `TokioChildProcessBuilder`.
#[derive(Debug)]
pub struct ChildProcessBuilder {
    command: Command,
    config: SessionConfig,
    /// What the child's stderr is given instead of the drained tail.
    stderr: Option<Stdio>,
}

impl ChildProcessBuilder {
    /// The host's configuration (start from
    /// [`ChildProcess::default_config`]).
    pub fn config(mut self, config: SessionConfig) -> ChildProcessBuilder {
        self.config = config;
        self
    }

    /// What the child's stderr is, as `TokioChildProcessBuilder::stderr`
    /// takes it: `Stdio::inherit()` (stock's default: the host's own
    /// stderr), `Stdio::null()`, a file, or `Stdio::piped()`, whose read end
    /// [`spawn`](ChildProcessBuilder::spawn) returns (read it to the end:
    /// a server whose stderr pipe fills stops, as with stock rmcp). Without
    /// this call stderr is drained by the transport: counted, a bounded tail
    /// kept ([`ChildProcessHandle::stderr_tail`]), each line forwarded to
    /// `tracing` ([`stderr_log`](ChildProcessBuilder::stderr_log)); the
    /// tail is then also quoted in the errors of requests the server's exit
    /// fails.
    pub fn stderr(mut self, stderr: impl Into<Stdio>) -> ChildProcessBuilder {
        self.stderr = Some(stderr.into());
        self
    }

    /// The level at which the drained stderr's lines go to `tracing`.
    pub fn stderr_log(mut self, log: StderrLog) -> ChildProcessBuilder {
        self.config.stderr_log = log;
        self
    }

    /// Spawns the child. The second member is the read end of its stderr
    /// when [`stderr`](ChildProcessBuilder::stderr) gave it
    /// `Stdio::piped()`, as `TokioChildProcessBuilder::spawn` returns it;
    /// otherwise `None` (drained by the transport: read its tail from the
    /// handle).
    pub fn spawn(self) -> io::Result<(ChildProcess, Option<ChildStderr>)> {
        match self.stderr {
            None => Ok((ChildProcess::with_config(self.command, self.config)?, None)),
            Some(stderr) => {
                let (connection, inbound, piped) = Connection::spawn_with_stderr(self.command, self.config, stderr)?;
                Ok((ChildProcess::on(connection, inbound), piped))
            }
        }
    }
}

/// A cloneable handle to a [`ChildProcess`], usable after `serve` moved it.
/// Holding one does not keep the child alive past its transport's `Drop`.
#[derive(Clone, Debug)]
pub struct ChildProcessHandle {
    connection: Arc<Connection>,
    counters: Arc<Counters>,
}

impl ChildProcessHandle {
    /// The transport's metrics so far.
    pub fn metrics(&self) -> MetricsSnapshot {
        self.connection.metrics()
    }

    /// What the adapter counted so far.
    pub fn counts(&self) -> AdapterCounts {
        self.counters.snapshot()
    }

    /// The end of the child's stderr so far.
    pub fn stderr_tail(&self) -> String {
        self.connection.stderr_tail()
    }

    /// The child's process id: `None` once it has exited and was reaped.
    pub fn id(&self) -> Option<u32> {
        live_pid(&self.connection)
    }

    /// How the connection ended, if it has.
    pub fn closed(&self) -> Option<Arc<Closed>> {
        self.connection.closed()
    }

    /// The child's exit status, once it has exited.
    pub fn exit_status(&self) -> Option<ExitStatus> {
        self.closed().and_then(|closed| closed.exit_status())
    }

    /// Stops the child and its process tree with the host's shutdown sequence
    /// ([`Connection::shutdown`]). rmcp's service then sees the end of
    /// input.
    pub async fn shutdown(&self) -> ShutdownReport {
        self.connection.shutdown().await
    }

    /// Kills the child's process tree at once (nothing, once the tree can
    /// no longer be told from a stranger's: see [`Connection::kill`]).
    pub fn kill(&self) {
        self.connection.kill();
    }
}

/// The error response that stands in for a response of `len` bytes over the
/// limit `max`: code [`RESPONSE_TOO_LARGE`], the length and the limit in its
/// message and in `data`.
pub(crate) fn too_large<Req, Resp, Not>(id: RequestId, len: u64, max: u64) -> JsonRpcMessage<Req, Resp, Not> {
    let message = format!("response of {len} bytes exceeds the transport limit of {max} bytes; it was discarded");
    error_response(id, RESPONSE_TOO_LARGE, message, serde_json::json!({ "len": len, "max": max }))
}

/// An error response for request `id` that the transport hands rmcp in
/// place of the server's answer.
fn error_response<Req, Resp, Not>(
    id: RequestId,
    code: i64,
    message: String,
    data: serde_json::Value,
) -> JsonRpcMessage<Req, Resp, Not> {
    // The code fits in an i32: the table's codes are JSON-RPC's.
    let code = ErrorCode(code as i32);
    JsonRpcMessage::Error(JsonRpcError {
        jsonrpc: JsonRpcVersion2_0,
        id: Some(id),
        error: ErrorData { code, message: message.into(), data: Some(data) },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcp_framer_jsonrpc::Id;
    use rmcp::model::NumberOrString;

    #[test]
    fn too_large_names_the_length_and_the_limit() {
        let JsonRpcMessage::<(), (), ()>::Error(error) = too_large(NumberOrString::Number(4), 17 << 20, 16 << 20)
        else {
            panic!()
        };
        assert_eq!(error.id, Some(NumberOrString::Number(4)));
        assert_eq!(error.error.code.0 as i64, RESPONSE_TOO_LARGE);
        assert!(error.error.message.contains("17825792 bytes") && error.error.message.contains("16777216 bytes"));
        assert_eq!(error.error.data, Some(serde_json::json!({"len": 17825792u64, "max": 16777216u64})));
        assert_eq!(request_id(&Id::from("x")), NumberOrString::String("x".into()));
    }
}
