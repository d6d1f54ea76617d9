//! The client side: [`ChildProcess`], a `Transport<RoleClient>` on the host's
//! [`Connection`].

use std::collections::HashSet;
use std::future::Future;
use std::io;
use std::process::ExitStatus;
use std::sync::Arc;

use rmcp::RoleClient;
use rmcp::model::{
    ClientNotification, ErrorCode, ErrorData, JsonRpcError, JsonRpcMessage, JsonRpcVersion2_0, RequestId,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::process::{ChildStderr, Command};

use crate::decode::{AdapterCounts, Counters, bump, decode, request_id};
use mcp_framer_jsonrpc::{Encoder, RESPONSE_TOO_LARGE};
use mcp_framer_stdio::host::{
    Closed, Connection, Inbound, InboundQueue, MetricsSnapshot, SessionConfig, ShutdownReport, ShutdownStage,
    SkippedFrame, StderrLog, WriteError,
};

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
/// stdin closed, then SIGTERM and SIGKILL to the process group; on `Drop`,
/// a kill of the group that needs no running runtime; the metrics. This type
/// only translates:
///
/// * each frame the reader delivers is deserialized straight into rmcp's
///   type for its kind (the reader already classified it);
/// * an oversize response whose id was recovered reaches rmcp at once as an
///   error response for that id, code
///   [`RESPONSE_TOO_LARGE`](mcp_framer_jsonrpc::RESPONSE_TOO_LARGE), the
///   length and the limit in its message and `data`, so the request fails
///   instead of waiting forever;
/// * every frame rmcp cannot take is counted ([`AdapterCounts`]) and logged
///   at `WARN`: nothing is dropped silently.
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
    /// Ids of the requests sent and not yet answered, to count responses
    /// that answer none of them.
    sent: HashSet<rmcp::model::RequestId>,
}

impl ChildProcess {
    /// Spawns `command` with the default [`SessionConfig`]: stdin, stdout
    /// and stderr piped, in a process group of its own.
    pub fn new(command: impl Into<Command>) -> io::Result<ChildProcess> {
        ChildProcess::with_config(command, SessionConfig::default())
    }

    /// Spawns `command` with the host's configuration: limits, overload
    /// policy, stderr tail, shutdown timings.
    pub fn with_config(command: impl Into<Command>, config: SessionConfig) -> io::Result<ChildProcess> {
        let (connection, inbound) = Connection::spawn(command.into(), config)?;
        let encoder = connection.encoder();
        Ok(ChildProcess {
            connection: Arc::new(connection),
            inbound,
            encoder,
            counters: Arc::default(),
            sent: HashSet::new(),
        })
    }

    /// The path of `TokioChildProcess::builder(cmd).stderr(..).spawn()`.
    pub fn builder(command: impl Into<Command>) -> ChildProcessBuilder {
        ChildProcessBuilder { command: command.into(), config: SessionConfig::default() }
    }

    /// The child's process id (and process group id), as
    /// `TokioChildProcess::id`.
    pub fn id(&self) -> Option<u32> {
        self.connection.pid()
    }

    /// A cloneable handle to the child: metrics, stderr tail, shutdown.
    pub fn handle(&self) -> ChildProcessHandle {
        ChildProcessHandle { connection: Arc::clone(&self.connection), counters: Arc::clone(&self.counters) }
    }

    /// Stops the child as `TokioChildProcess::graceful_shutdown` does, over
    /// its process group: stdin closed, wait, SIGTERM, wait, SIGKILL (waits
    /// per [`SessionConfig::shutdown`]). An error only if the child outlived
    /// the SIGKILL wait.
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
                tracing::warn!(kind = ?received.kind(), id = ?received.id(), method = received.method(), %error,
                    frame = ?received, "server message rejected by rmcp's types; skipped");
                None
            }
        }
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
        let frame = self.encoder.message(&item);
        let connection = Arc::clone(&self.connection);
        async move {
            let frame = frame.map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
            connection.send(frame).await.map_err(write_error)
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            // Cancel-safe: the queue never loses an item to a dropped future,
            // and nothing below awaits.
            let item = self.inbound.recv().await?;
            if let Some(message) = self.translate(item) {
                return Some(message);
            }
        }
    }

    async fn close(&mut self) -> io::Result<()> {
        self.graceful_shutdown().await
    }
}

impl Drop for ChildProcess {
    /// Kills the child's process group at once ([`Connection::kill`]), from
    /// `Drop` itself: no runtime needed, whoever else holds a handle.
    fn drop(&mut self) {
        self.connection.kill();
    }
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
        ShutdownStage::StillRunning => Err(io::Error::other("the server is still running after SIGKILL")),
        _ => Ok(()),
    }
}

/// Builds a [`ChildProcess`]: the equivalent of `TokioChildProcessBuilder`.
#[derive(Debug)]
pub struct ChildProcessBuilder {
    command: Command,
    config: SessionConfig,
}

impl ChildProcessBuilder {
    /// The host's configuration.
    pub fn config(mut self, config: SessionConfig) -> ChildProcessBuilder {
        self.config = config;
        self
    }

    /// Where stderr lines go. Unlike stock rmcp (which inherits stderr by
    /// default), stderr is always piped and drained: counted, a bounded tail
    /// kept ([`ChildProcessHandle::stderr_tail`]), and each line forwarded
    /// to `tracing` at this level.
    pub fn stderr(mut self, log: StderrLog) -> ChildProcessBuilder {
        self.config.stderr_log = log;
        self
    }

    /// Spawns the child. The second member, always `None`, keeps
    /// `TokioChildProcessBuilder::spawn`'s shape: stderr is drained by the
    /// transport, read its tail from the handle.
    pub fn spawn(self) -> io::Result<(ChildProcess, Option<ChildStderr>)> {
        Ok((ChildProcess::with_config(self.command, self.config)?, None))
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

    /// The child's process id (and process group id).
    pub fn id(&self) -> Option<u32> {
        self.connection.pid()
    }

    /// How the connection ended, if it has.
    pub fn closed(&self) -> Option<Arc<Closed>> {
        self.connection.closed()
    }

    /// The child's exit status, once it has exited.
    pub fn exit_status(&self) -> Option<ExitStatus> {
        self.closed().and_then(|closed| closed.exit_status())
    }

    /// Stops the child: stdin closed, SIGTERM, SIGKILL, over the group
    /// ([`Connection::shutdown`]). rmcp's service then sees the end of
    /// input.
    pub async fn shutdown(&self) -> ShutdownReport {
        self.connection.shutdown().await
    }

    /// Kills the child's process group at once.
    pub fn kill(&self) {
        self.connection.kill();
    }
}

/// The error response that stands in for a response of `len` bytes over the
/// limit `max`: code [`RESPONSE_TOO_LARGE`], the length and the limit in its
/// message and in `data`.
pub(crate) fn too_large<Req, Resp, Not>(id: RequestId, len: u64, max: u64) -> JsonRpcMessage<Req, Resp, Not> {
    let message = format!("response of {len} bytes exceeds the transport limit of {max} bytes; it was discarded");
    let data = serde_json::json!({ "len": len, "max": max });
    // The code fits in an i32: the table's codes are JSON-RPC's.
    let code = ErrorCode(RESPONSE_TOO_LARGE as i32);
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
