//! The server side: [`stdio()`], a `Transport<RoleServer>` on the server
//! library's raw stdio transport, and [`capture`] for tool handlers.

use std::collections::{HashSet, VecDeque};
use std::future::Future;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::RoleServer;
use rmcp::model::{ErrorCode, ErrorData, JsonRpcError, JsonRpcMessage, JsonRpcVersion2_0, RequestId};
use rmcp::service::{RequestContext, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::process::Command;
use tokio::sync::Notify;

use crate::decode::{AdapterCounts, Counters, bump, decode, request_id};
use mcp_framer_jsonrpc::{EncodeError, INTERNAL_ERROR, INVALID_REQUEST, Kind};
use mcp_framer_stdio::server::{
    Capture, CaptureOptions, Incoming, Outgoing, Scope, ServeReport, ServerConfig, stdio_transport,
};

/// This process's stdin and stdout as an rmcp server transport: the swap
/// for `rmcp::transport::stdio()`, with the default [`ServerConfig`].
///
/// ```no_run
/// use rmcp::{ServerHandler, ServiceExt};
///
/// #[derive(Clone)]
/// struct MyServer;
/// impl ServerHandler for MyServer {}
///
/// #[tokio::main]
/// async fn main() -> Result<(), Box<dyn std::error::Error>> {
///     let service = MyServer.serve(mcp_framer_rmcp::stdio()).await?;
///     service.waiting().await?;
///     Ok(())
/// }
/// ```
///
/// Below rmcp's service is the server library's raw transport
/// ([`mcp_framer_stdio::server::transport`]): the byte limit on requests;
/// malformed, non-UTF-8 and oversize requests answered by the transport
/// itself with the right JSON-RPC error and id (or `id: null`); one task
/// that owns stdout and writes whole frames only; stdin read on while
/// stdout is blocked, within the reserved budget, so a cancellation still
/// lands; `SIGTERM` and `SIGINT` treated as the end of stdin. On pipes
/// (as a host spawns a server) no read holds a thread, so shutdown never
/// waits on one.
///
/// What this type adds is translation: frames decoded straight into rmcp's
/// type for their kind; a well-formed request rmcp's types reject answered
/// -32600 with its id (stock rmcp answers with `id: null`); a response over
/// [`ServerConfig::max_send`] replaced by a -32603 error for its id; each
/// counted ([`AdapterCounts`]) and logged.
///
/// It must run inside a tokio runtime. If the process's stdio cannot be
/// taken, the error is logged and the transport ends at once: `serve`
/// fails as it does on a closed stdin.
pub fn stdio() -> Stdio {
    stdio_with_config(ServerConfig::default())
}

/// [`stdio()`] with the server library's configuration: limits and budgets.
pub fn stdio_with_config(config: ServerConfig) -> Stdio {
    match stdio_transport(config) {
        Ok((outgoing, incoming)) => Stdio::with_halves(Ok((outgoing, incoming)), config),
        Err(error) => {
            tracing::error!(%error, "the process's stdio could not be taken for MCP");
            Stdio::with_halves(Err(Arc::new(error)), config)
        }
    }
}

/// An rmcp server transport on stdio (see [`stdio()`]). Implements
/// [`Transport`] and nothing else.
#[derive(Debug)]
pub struct Stdio {
    halves: Result<(Outgoing, Incoming), Arc<io::Error>>,
    counters: Arc<Counters>,
    /// Requests handed to rmcp and not answered yet.
    in_flight: Arc<InFlight>,
    /// After the end of stdin: how long in-flight requests may still run.
    grace: Duration,
    /// When the end of stdin was seen.
    eof_at: Option<Instant>,
    /// Cancellations to hand rmcp before the end of its input.
    cancels: VecDeque<RequestId>,
}

/// The ids of the requests rmcp is handling, and a wake-up when one is
/// answered.
#[derive(Debug, Default)]
struct InFlight {
    ids: Mutex<HashSet<RequestId>>,
    answered: Notify,
}

impl InFlight {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<RequestId>> {
        self.ids.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Stdio {
    /// An rmcp transport on the halves of a raw server transport (one on
    /// other streams than the process's stdio, say, from
    /// [`transport`](mcp_framer_stdio::server::transport)).
    pub fn new(outgoing: Outgoing, incoming: Incoming, config: ServerConfig) -> Stdio {
        Stdio::with_halves(Ok((outgoing, incoming)), config)
    }

    fn with_halves(halves: Result<(Outgoing, Incoming), Arc<io::Error>>, config: ServerConfig) -> Stdio {
        Stdio {
            halves,
            counters: Arc::default(),
            in_flight: Arc::default(),
            grace: config.shutdown_grace,
            eof_at: None,
            cancels: VecDeque::new(),
        }
    }

    /// At the end of stdin, as the serve loop does: in-flight requests may
    /// finish for [`ServerConfig::shutdown_grace`]; a shutdown signal, or
    /// the end of the grace, cancels the rest (rmcp gets a
    /// `notifications/cancelled` for each, so their handlers' tokens fire
    /// and their subprocesses' groups are killed) before its input ends.
    /// Without this, rmcp alone waits 5 s for them, whatever signal comes.
    /// Cancel-safe: its state lives in `self`.
    async fn finish(&mut self) -> Option<RequestId> {
        if let Some(id) = self.cancels.pop_front() {
            return Some(id);
        }
        let eof_at = *self.eof_at.get_or_insert_with(Instant::now);
        let (_, incoming) = self.halves.as_mut().ok()?;
        loop {
            let answered = self.in_flight.answered.notified();
            if self.in_flight.lock().is_empty() {
                return None;
            }
            let why = tokio::select! {
                () = answered => continue,
                number = incoming.signalled() => format!("signal {number} received"),
                () = tokio::time::sleep_until((eof_at + self.grace).into()) => {
                    format!("still running {:?} after the end of stdin", self.grace)
                }
            };
            let ids: Vec<RequestId> = self.in_flight.lock().drain().collect();
            tracing::warn!(count = ids.len(), reason = %why, "cancelling the requests still in flight");
            self.cancels.extend(ids);
            return self.cancels.pop_front();
        }
    }

    /// A cloneable handle: the transport's counters and the adapter's.
    pub fn handle(&self) -> StdioHandle {
        StdioHandle {
            outgoing: self.halves.as_ref().ok().map(|(o, _)| o.clone()),
            counters: Arc::clone(&self.counters),
        }
    }
}

/// A handle to a [`Stdio`] transport, usable after `serve` moved it.
#[derive(Clone, Debug)]
pub struct StdioHandle {
    outgoing: Option<Outgoing>,
    counters: Arc<Counters>,
}

impl StdioHandle {
    /// The raw transport's counters (`None` if stdio could not be taken).
    pub fn report(&self) -> Option<ServeReport> {
        self.outgoing.as_ref().map(Outgoing::report)
    }

    /// What the adapter counted.
    pub fn counts(&self) -> AdapterCounts {
        self.counters.snapshot()
    }
}

/// The frame for `item`, or for the error that replaces it: a response over
/// the limit becomes a short -32603 error for its id.
fn encode(outgoing: &Outgoing, item: &TxJsonRpcMessage<RoleServer>, counters: &Counters) -> io::Result<Vec<u8>> {
    let encoder = outgoing.encoder();
    match (encoder.message(item), item) {
        (Ok(frame), _) => Ok(frame),
        (Err(EncodeError::TooLarge { len, max }), JsonRpcMessage::Response(response)) => {
            bump(&counters.oversize_errors);
            tracing::warn!(id = %response.id, len, max, "result over the send limit; answering with an error");
            let message = format!("result of {len} bytes exceeds the transport limit of {max} bytes; not sent");
            let error = error_message(Some(response.id.clone()), INTERNAL_ERROR, message);
            encoder.message(&error).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
        }
        (Err(e), _) => Err(io::Error::new(io::ErrorKind::InvalidInput, e)),
    }
}

fn error_message(id: Option<rmcp::model::RequestId>, code: i64, message: String) -> TxJsonRpcMessage<RoleServer> {
    // The table's codes are JSON-RPC's, within an i32.
    let error = ErrorData { code: ErrorCode(code as i32), message: message.into(), data: None };
    JsonRpcMessage::Error(JsonRpcError { jsonrpc: JsonRpcVersion2_0, id, error })
}

impl Transport<RoleServer> for Stdio {
    type Error = io::Error;

    fn send(&mut self, item: TxJsonRpcMessage<RoleServer>) -> impl Future<Output = io::Result<()>> + Send + 'static {
        if let JsonRpcMessage::Response(rmcp::model::JsonRpcResponse { id, .. })
        | JsonRpcMessage::Error(JsonRpcError { id: Some(id), .. }) = &item
            && self.in_flight.lock().remove(id)
        {
            self.in_flight.answered.notify_waiters();
        }
        let sent =
            self.halves.as_ref().map_err(|e| io::Error::new(e.kind(), e.to_string())).and_then(|(outgoing, _)| {
                let frame = encode(outgoing, &item, &self.counters)?;
                Ok((outgoing.clone(), frame))
            });
        async move {
            let (outgoing, frame) = sent?;
            outgoing.send(frame).await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            if self.eof_at.is_some() {
                let id = self.finish().await?;
                return Some(cancelled(id));
            }
            let (outgoing, incoming) = self.halves.as_mut().ok()?;
            // Cancel-safe: the queue keeps what a dropped future did not take;
            // a rejected request's answer is queued without waiting.
            let Some(frame) = incoming.recv().await else {
                self.eof_at = Some(Instant::now());
                continue;
            };
            match decode(frame.kind(), frame.frame()) {
                Ok(message) => {
                    if let JsonRpcMessage::Request(request) = &message {
                        self.in_flight.lock().insert(request.id.clone());
                    }
                    return Some(message);
                }
                Err(error) => {
                    bump(&self.counters.rejected);
                    let id = mcp_framer_jsonrpc::parse(frame.frame()).ok().and_then(|m| m.id().map(request_id));
                    tracing::warn!(kind = ?frame.kind(), ?id, %error, "client message rejected by rmcp's types");
                    if frame.kind() == Kind::Request {
                        let text = format!("request rejected: {error}");
                        let reply = error_message(id, INVALID_REQUEST, text);
                        if let Ok(reply) = encode(outgoing, &reply, &self.counters) {
                            let outgoing = outgoing.clone();
                            tokio::spawn(async move { outgoing.send(reply).await });
                        }
                    }
                }
            }
        }
    }

    async fn close(&mut self) -> io::Result<()> {
        match &self.halves {
            Ok((outgoing, _)) => outgoing.close().await,
            Err(_) => Ok(()),
        }
    }
}

/// The `notifications/cancelled` rmcp gets for a request abandoned at
/// shutdown.
fn cancelled(id: RequestId) -> RxJsonRpcMessage<RoleServer> {
    let note = serde_json::json!({
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": id, "reason": "the server is shutting down"},
    });
    let note = serde_json::from_value(note).expect("a cancellation is a client notification");
    JsonRpcMessage::Notification(note)
}

/// Runs `command` for an rmcp tool handler under its request's
/// cancellation token (`context.ct`), with the server library's bounded
/// capture ([`mcp_framer_stdio::server::capture`]): stdout and stderr
/// drained concurrently into bounded previews, the child leading a process
/// group of its own. When rmcp cancels the request (the client sent
/// `notifications/cancelled`, or the service is shutting down), the whole
/// group is killed at once and the capture returns with
/// [`Ending::Cancelled`](mcp_framer_stdio::server::Ending::Cancelled).
///
/// ```no_run
/// use mcp_framer_stdio::server::CaptureOptions;
/// use rmcp::RoleServer;
/// use rmcp::service::RequestContext;
///
/// async fn grep(context: RequestContext<RoleServer>) -> std::io::Result<String> {
///     let mut command = tokio::process::Command::new("grep");
///     command.args(["-rn", "--max-count=20", "TODO", "."]);
///     let run = mcp_framer_rmcp::capture(&context, &mut command, CaptureOptions::default()).await?;
///     Ok(format!("{}\n{}", run.stdout.to_text(), run.summary()))
/// }
/// ```
pub async fn capture(
    context: &RequestContext<RoleServer>,
    command: &mut Command,
    options: CaptureOptions,
) -> io::Result<Capture> {
    let scope = Scope::new();
    let cancelled = async {
        context.ct.cancelled().await;
        scope.cancel();
        std::future::pending::<()>().await
    };
    tokio::select! {
        run = mcp_framer_stdio::server::capture(command, options, &scope) => run,
        () = cancelled => unreachable!("pending never resolves"),
    }
}
