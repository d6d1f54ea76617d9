//! The server side: [`stdio()`], a `Transport<RoleServer>` on the server
//! library's raw stdio transport, and [`capture`] for tool handlers.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::RoleServer;
use rmcp::model::{ClientNotification, JsonRpcError, JsonRpcMessage, JsonRpcNotification, RequestId};
use rmcp::service::{RequestContext, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::process::Command;
use tokio::sync::Notify;

use crate::decode::{AdapterCounts, Counters, bump, decode, request_id, transport_id};
use mcp_framer_jsonrpc::{EncodeError, ErrorObject, INVALID_REQUEST, Kind, OVERLOADED};
use mcp_framer_stdio::server::{
    Capture, CaptureOptions, Incoming, IncomingFrame, Outgoing, Scope, ServeReport, ServerConfig, stdio_transport,
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
/// lands. On unix, when stdin and stdout are pipes (as a host spawns a
/// server), no read holds a thread, so shutdown never waits on one.
///
/// What this type adds is translation, and what rmcp's service leaves
/// open:
///
/// * frames are decoded straight into rmcp's type for their kind; a
///   well-formed request rmcp's types reject is answered -32600 with its id
///   (stock rmcp answers with no id);
/// * a response or an error response over [`ServerConfig::max_send`] (or
///   one that fails to serialize) is replaced, as the server library
///   replaces it, so the request is still answered: a `tools/call` result
///   by a tool failure (`isError: true`) saying why, anything else by a
///   short -32603 error for its id;
/// * at most `max_concurrent + max_queued` requests
///   ([`ServerConfig`], 272 by default) are in flight at once (handed to
///   rmcp, not answered, not cancelled); one more is answered -32000 at
///   once, as the server library's serve loop does. rmcp runs every request
///   it is handed at once, so `max_concurrent` has no other meaning here.
///   (A handler that panics never answers, in rmcp: its request stays
///   counted until the end.)
///   The adapter's own replies use the reply budget
///   ([`ServerConfig::control_queue_bytes`]); while it is full no message is
///   taken, so stdin stops being read once its backlog is full;
/// * each message is encoded in the task rmcp spawns to send it, one at a
///   time, so a large result never holds rmcp's service loop;
/// * at the end of stdin, requests still in flight may finish for
///   [`ServerConfig::shutdown_grace`] (1 s by default; a cancelled request
///   is not waited for), then rmcp gets a cancellation for each; `SIGTERM`
///   and `SIGINT` (Windows: Ctrl-C and Ctrl-Break) are the end of stdin
///   and cancel at once. The handlers stay installed for the life of the
///   process, but the second signal ends it at once, as its default action
///   would (a user's second Ctrl-C).
///
/// Each replacement and refusal is counted ([`AdapterCounts`]) and logged.
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

/// At the end of stdin, once nothing is owed, how long rmcp's loop must
/// find nothing else to do before its input ends (see `Stdio::finish`): the
/// task of a send that just finished may take a moment to be seen done,
/// and a handler waits for that.
const QUIET: Duration = Duration::from_millis(20);

/// The most rmcp's loop is given, in all, to take what is ready after the
/// last thing owed (see `Stdio::finish`).
const QUIET_AT_MOST: Duration = Duration::from_millis(200);

/// An rmcp server transport on stdio (see [`stdio()`]). Implements
/// [`Transport`] and nothing else.
#[derive(Debug)]
pub struct Stdio {
    halves: Result<(Outgoing, Incoming), Arc<io::Error>>,
    counters: Arc<Counters>,
    /// What rmcp owes: requests in flight, sends in progress.
    in_flight: Arc<InFlight>,
    /// Requests in flight at most: `max_concurrent + max_queued`.
    admitted: usize,
    /// One message encoded at a time, and kept until the queue has room for
    /// it: the only encoded frame outside the queue's byte budget.
    turn: Arc<tokio::sync::Mutex<()>>,
    /// A reply of the adapter's own waiting for room in the reply budget;
    /// kept here so that a dropped `receive` loses nothing.
    reply: Option<Vec<u8>>,
    /// Frames taken while a reply waited for room (to see the end of the
    /// input meanwhile); they hold their bytes in the transport's backlog.
    ahead: VecDeque<IncomingFrame>,
    /// After the end of stdin: how long in-flight requests may still run.
    grace: Duration,
    /// Once stdin has ended: the end of rmcp's input.
    ending: Option<Ending>,
}

/// The end of rmcp's input, from the end of stdin on (see `Stdio::finish`).
#[derive(Debug)]
struct Ending {
    /// When in-flight requests stop being waited for.
    deadline: Instant,
    /// Whether they no longer are (the deadline passed, or a signal came).
    given_up: bool,
    /// Cancellations still to hand rmcp.
    cancels: VecDeque<RequestId>,
    /// How long rmcp's loop may go on taking events before its input ends.
    quiet_by: Option<Instant>,
}

impl Ending {
    fn new(grace: Duration) -> Ending {
        Ending { deadline: Instant::now() + grace, given_up: false, cancels: VecDeque::new(), quiet_by: None }
    }
}

/// What rmcp still owes before its input may end: the requests it is
/// handling and the messages it is sending; a wake-up at each change.
#[derive(Debug, Default)]
struct InFlight {
    pending: Mutex<Pending>,
    changed: Notify,
}

#[derive(Debug, Default)]
struct Pending {
    /// Requests handed to rmcp, not answered and not cancelled, and whether
    /// each is a `tools/call` (whose result over the limit becomes a tool
    /// failure, see [`encode`]).
    ids: HashMap<RequestId, bool>,
    /// Messages whose send has not finished (queued or failed).
    sends: usize,
}

impl InFlight {
    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `id` is no longer rmcp's to answer: its response is about to be
    /// queued, or its cancellation arrived (rmcp then never answers it).
    fn done(&self, id: &RequestId) {
        if self.lock().ids.remove(id).is_some() {
            self.changed.notify_waiters();
        }
    }

    /// Whether nothing is owed: no request in flight, no send in progress.
    fn idle(&self) -> bool {
        let pending = self.lock();
        pending.ids.is_empty() && pending.sends == 0
    }

    /// Counts a send until the returned guard is dropped.
    fn sending(self: &Arc<Self>) -> Sending {
        self.lock().sends += 1;
        Sending(Arc::clone(self))
    }
}

/// A send in progress (see [`InFlight::sending`]).
struct Sending(Arc<InFlight>);

impl Drop for Sending {
    fn drop(&mut self) {
        self.0.lock().sends -= 1;
        self.0.changed.notify_waiters();
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
            admitted: config.max_concurrent.saturating_add(config.max_queued).max(1),
            turn: Arc::default(),
            reply: None,
            ahead: VecDeque::new(),
            grace: config.shutdown_grace,
            ending: None,
        }
    }

    /// At the end of stdin, as the serve loop does: in-flight requests may
    /// finish for [`ServerConfig::shutdown_grace`]; a shutdown signal, or
    /// the end of the grace, cancels the rest (rmcp gets a
    /// `notifications/cancelled` for each, so their handlers' tokens fire
    /// and their subprocesses' trees are killed) before its input ends.
    /// Without this, rmcp alone waits 5 s for them, whatever signal comes.
    /// A cancelled request is not waited for: rmcp never answers it.
    ///
    /// Then rmcp's loop must take what is ready before its input ends: a
    /// handler that sent a notification waits for the loop to see that the
    /// send's task finished, and once its input has ended the loop no
    /// longer looks, but waits 5 s for its handlers. So the sends in
    /// progress are waited for (within the grace), then the input ends only
    /// after a [`QUIET`] spell in which rmcp's `select!` took nothing else
    /// (each event it takes drops this future and calls `receive` again),
    /// or [`QUIET_AT_MOST`] after it began looking for one. Cancel-safe:
    /// its state lives in `self`.
    async fn finish(&mut self) -> Option<RequestId> {
        let grace = self.grace;
        let ending = self.ending.get_or_insert_with(|| Ending::new(grace));
        if let Some(id) = ending.cancels.pop_front() {
            return Some(id);
        }
        let (_, incoming) = self.halves.as_mut().ok()?;
        while !ending.given_up {
            let changed = self.in_flight.changed.notified();
            if self.in_flight.idle() {
                break;
            }
            let why = tokio::select! {
                () = changed => continue,
                number = incoming.signalled() => format!("signal {number} received"),
                () = tokio::time::sleep_until(ending.deadline.into()) => {
                    format!("still running {grace:?} after the end of stdin")
                }
            };
            ending.given_up = true;
            let ids: Vec<RequestId> = self.in_flight.lock().ids.drain().map(|(id, _)| id).collect();
            if !ids.is_empty() {
                tracing::warn!(count = ids.len(), reason = %why, "cancelling the requests still in flight");
                ending.cancels.extend(ids);
                return ending.cancels.pop_front();
            }
        }
        // Bounded: a handler that sends notifications without end would
        // otherwise always have one ready.
        let quiet_by = *ending.quiet_by.get_or_insert_with(|| Instant::now() + QUIET_AT_MOST);
        tokio::time::sleep_until((Instant::now() + QUIET).min(quiet_by).into()).await;
        None
    }

    /// Waits until the adapter's pending reply is queued. Meanwhile frames
    /// are taken into `ahead` (bounded as if they still waited in the
    /// transport) only to see the end of the input, after which the reply
    /// goes at once: a host that stopped draining stdout cannot keep the
    /// server from ending. Cancel-safe.
    async fn flush_reply(&mut self) {
        let Stdio { halves, reply, ahead, ending, grace, .. } = self;
        let Ok((outgoing, incoming)) = halves.as_mut() else {
            *reply = None;
            return;
        };
        while reply.is_some() {
            if ending.is_some() {
                outgoing.reply_now(reply.take().unwrap_or_default());
                return;
            }
            tokio::select! {
                biased;
                sent = outgoing.reply(reply) => {
                    if sent.is_err() {
                        tracing::warn!("stdout is gone: the adapter's reply was dropped");
                    }
                }
                frame = incoming.recv() => match frame {
                    Some(frame) => ahead.push_back(frame),
                    None => *ending = Some(Ending::new(*grace)),
                },
            }
        }
    }

    /// Makes `error` the adapter's own answer to the request `id`, queued
    /// in the reply budget before the next message is taken.
    fn answer(&mut self, id: Option<&RequestId>, error: &ErrorObject) {
        if let Ok((outgoing, _)) = &self.halves {
            self.reply = Some(outgoing.error_frame(id.map(transport_id).as_ref(), error));
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

/// The frame for `item`, or for what replaces it when it cannot be sent
/// (over the limit, or failing to serialize), within the limit: the same
/// answer the server library gives for the same event. The result of a
/// `tools/call` (`tool_call`) becomes a tool failure, a result with
/// `isError: true` saying why, because the model reads tool failures and can
/// ask for less; any other response, and an error response, becomes a short
/// -32603 error for its id (those requests have no tool failure).
fn encode(
    outgoing: &Outgoing,
    item: &TxJsonRpcMessage<RoleServer>,
    tool_call: bool,
    counters: &Counters,
) -> io::Result<Vec<u8>> {
    let error = match outgoing.encoder().message(item) {
        Ok(frame) => return Ok(frame),
        Err(error) => error,
    };
    let (id, what) = match item {
        JsonRpcMessage::Response(response) => (Some(&response.id), "result".to_owned()),
        JsonRpcMessage::Error(JsonRpcError { id, error, .. }) => (id.as_ref(), format!("error {}", error.code.0)),
        _ => return Err(io::Error::new(io::ErrorKind::InvalidInput, error)),
    };
    bump(&counters.oversize_errors);
    tracing::warn!(?id, %error, "{what} could not be sent; answering with a short error");
    let message = match error {
        EncodeError::TooLarge { len, max } => {
            format!("{what} of {len} bytes exceeds the transport limit of {max} bytes; not sent")
        }
        error => format!("{what} not sent: {error}"),
    };
    let id = id.map(transport_id);
    if let (Some(id), JsonRpcMessage::Response(_), true) = (&id, item, tool_call) {
        let failure = serde_json::json!({"content": [{"type": "text", "text": message}], "isError": true});
        if let Ok(frame) = outgoing.encoder().response(id, &failure) {
            return Ok(frame);
        }
    }
    Ok(outgoing.error_frame(id.as_ref(), &ErrorObject::internal(message)))
}

/// The request id a response or an error response answers.
fn answers(item: &TxJsonRpcMessage<RoleServer>) -> Option<&RequestId> {
    match item {
        JsonRpcMessage::Response(response) => Some(&response.id),
        JsonRpcMessage::Error(error) => error.id.as_ref(),
        _ => None,
    }
}

/// The request a `notifications/cancelled` names.
fn cancels(message: &RxJsonRpcMessage<RoleServer>) -> Option<&RequestId> {
    match message {
        JsonRpcMessage::Notification(JsonRpcNotification {
            notification: ClientNotification::CancelledNotification(cancelled),
            ..
        }) => cancelled.params.request_id.as_ref(),
        _ => None,
    }
}

impl Transport<RoleServer> for Stdio {
    type Error = io::Error;

    /// Encodes and queues `item` in the returned future, which rmcp runs in
    /// a task of its own (as its stock transport does): a large result never
    /// holds rmcp's service loop. One message is encoded at a time and
    /// waits for room in [`ServerConfig::writer_queue_bytes`] before the
    /// next is encoded, so the frames waiting outside the queue are one at
    /// most; the others wait as rmcp's typed messages, one per request in
    /// flight (a bounded number, see [`stdio()`]) plus the notification
    /// each handler is sending.
    fn send(&mut self, item: TxJsonRpcMessage<RoleServer>) -> impl Future<Output = io::Result<()>> + Send + 'static {
        let outgoing =
            self.halves.as_ref().map(|(o, _)| o.clone()).map_err(|e| io::Error::new(e.kind(), e.to_string()));
        let (counters, in_flight, turn) =
            (Arc::clone(&self.counters), Arc::clone(&self.in_flight), Arc::clone(&self.turn));
        let sending = in_flight.sending();
        async move {
            let _sending = sending;
            let outgoing = outgoing?;
            let _turn = turn.lock().await;
            let tool_call = answers(&item).is_some_and(|id| in_flight.lock().ids.get(id) == Some(&true));
            let frame = encode(&outgoing, &item, tool_call, &counters);
            // Before the frame is queued: once written, the host may reuse
            // its id.
            if let Some(id) = answers(&item) {
                in_flight.done(id);
            }
            drop(item);
            outgoing.send(frame?).await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            self.flush_reply().await;
            let frame = match self.ahead.pop_front() {
                Some(frame) => Some(frame),
                None if self.ending.is_some() => None,
                // Cancel-safe: the queue keeps what a dropped future did not take.
                None => self.halves.as_mut().ok()?.1.recv().await,
            };
            let Some(frame) = frame else {
                let id = self.finish().await?;
                return Some(cancelled(id));
            };
            let message = match decode(frame.kind(), frame.frame()) {
                Ok(message) => message,
                Err(error) => {
                    bump(&self.counters.rejected);
                    let id = frame.id().map(request_id);
                    tracing::warn!(kind = ?frame.kind(), ?id, %error, "client message rejected by rmcp's types");
                    if frame.kind() == Kind::Request {
                        let error = ErrorObject::new(INVALID_REQUEST, format!("request rejected: {error}"));
                        self.answer(id.as_ref(), &error);
                    }
                    continue;
                }
            };
            if let JsonRpcMessage::Request(request) = &message {
                let mut in_flight = self.in_flight.lock();
                if in_flight.ids.len() >= self.admitted {
                    drop(in_flight);
                    bump(&self.counters.overloaded);
                    tracing::warn!(id = %request.id, admitted = self.admitted, "requests in flight at the bound; answering -32000");
                    let text = format!(
                        "server overloaded: {} requests already in flight (max_concurrent + max_queued); try again later",
                        self.admitted
                    );
                    self.answer(Some(&request.id), &ErrorObject::new(OVERLOADED, text));
                    continue;
                }
                let tool_call = frame.method() == Some("tools/call");
                if in_flight.ids.insert(request.id.clone(), tool_call).is_some() {
                    drop(in_flight);
                    bump(&self.counters.duplicate_ids);
                    tracing::warn!(id = %request.id, "duplicate request id in flight; answering -32600 with a null id");
                    // A null id: answered with the id, the error could be taken
                    // for the original request's response, which still comes.
                    let text =
                        format!("request id {} is already in flight; this duplicate was not processed", request.id);
                    self.answer(None, &ErrorObject::new(INVALID_REQUEST, text));
                    continue;
                }
            } else if let Some(id) = cancels(&message) {
                // rmcp drops a cancelled request's response: it is no longer
                // awaited at shutdown, nor counted against the bound.
                self.in_flight.done(id);
            }
            return Some(message);
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
/// drained concurrently into bounded previews, the child rooting a process
/// tree of its own (a process group on unix, a Job Object on Windows).
/// When rmcp cancels the request (the client sent
/// `notifications/cancelled`, or the service is shutting down), the whole
/// tree is killed at once and the capture returns with
/// [`Ending::Cancelled`](crate::Ending::Cancelled).
///
/// ```no_run
/// use mcp_framer_rmcp::CaptureOptions;
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

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{CallToolRequestParams, CallToolResponse, CallToolResult, ServerCapabilities};
    use rmcp::{ErrorData, ServerHandler, ServiceExt};
    use serde_json::{Value, json};
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines};

    /// `hold` runs until cancelled; `huge_error` fails with 1,000 bytes of
    /// `data`; `huge` returns 1,000 bytes of text.
    #[derive(Clone)]
    struct Tools;

    impl ServerHandler for Tools {
        fn get_info(&self) -> rmcp::model::ServerConfig {
            rmcp::model::ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
        }

        async fn call_tool(
            &self,
            request: CallToolRequestParams,
            context: RequestContext<RoleServer>,
        ) -> Result<CallToolResponse, ErrorData> {
            match &*request.name {
                "hold" => {
                    context.ct.cancelled().await;
                    Err(ErrorData::internal_error("cancelled", None))
                }
                "huge_error" => Err(ErrorData::internal_error("huge", Some(json!("x".repeat(1000))))),
                "huge" => {
                    Ok(CallToolResponse::Complete(CallToolResult::success(vec![rmcp::model::ContentBlock::text(
                        "x".repeat(1000),
                    )])))
                }
                _ => Ok(CallToolResponse::Complete(CallToolResult::success(vec![]))),
            }
        }
    }

    /// A host end: writes lines to the server, reads its lines.
    struct Host {
        to_server: DuplexStream,
        from_server: Lines<BufReader<DuplexStream>>,
    }

    impl Host {
        async fn send(&mut self, message: Value) {
            let mut line = serde_json::to_vec(&message).unwrap();
            line.push(b'\n');
            self.to_server.write_all(&line).await.unwrap();
        }

        async fn line(&mut self) -> String {
            let next = tokio::time::timeout(Duration::from_secs(10), self.from_server.next_line());
            next.await.expect("a line within 10 s").unwrap().expect("a line before the end")
        }

        async fn call(&mut self, id: Value, tool: &str) {
            self.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool}})).await;
        }

        async fn cancel(&mut self, id: i64) {
            self.send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id}}))
                .await;
        }
    }

    /// `Tools` served on a transport over in-memory pipes with `config`,
    /// initialized.
    async fn serve(config: ServerConfig) -> (Host, StdioHandle) {
        let (to_server, server_in) = tokio::io::duplex(1 << 16);
        let (server_out, from_server) = tokio::io::duplex(1 << 16);
        let (outgoing, incoming) =
            mcp_framer_stdio::server::transport(server_in, server_out, config, std::future::pending());
        let stdio = Stdio::new(outgoing, incoming, config);
        let handle = stdio.handle();
        tokio::spawn(async move {
            if let Ok(service) = Tools.serve(stdio).await {
                let _ = service.waiting().await;
            }
        });
        let mut host = Host { to_server, from_server: BufReader::new(from_server).lines() };
        host.send(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": mcp_framer_jsonrpc::protocol::NEWEST_LEGACY, "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"}}}))
            .await;
        assert!(host.line().await.contains(r#""id":0,"result""#));
        host.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
        (host, handle)
    }

    /// At most `max_concurrent + max_queued` requests are in flight; one
    /// more is answered -32000 at once, with its id; a cancelled request
    /// no longer counts (rmcp never answers it).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn requests_beyond_the_bound_are_answered_overloaded() {
        for _ in 0..20 {
            let config = ServerConfig::default().with_max_concurrent(1).with_max_queued(1);
            let (mut host, handle) = serve(config).await;
            host.call(json!(1), "hold").await;
            host.call(json!(2), "hold").await;
            host.call(json!(3), "hold").await;
            let refused = host.line().await;
            assert!(
                refused.starts_with(
                    r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32000,"message":"server overloaded: 2 requests"#
                ),
                "{refused}"
            );
            host.cancel(1).await;
            host.call(json!(4), "hold").await;
            host.send(json!({"jsonrpc": "2.0", "id": 5, "method": "ping"})).await;
            let refused = host.line().await;
            assert!(refused.starts_with(r#"{"jsonrpc":"2.0","id":5,"error":{"code":-32000"#), "{refused}");
            host.cancel(2).await;
            host.send(json!({"jsonrpc": "2.0", "id": 6, "method": "ping"})).await;
            assert_eq!(host.line().await, r#"{"jsonrpc":"2.0","id":6,"result":{}}"#);
            assert_eq!(handle.counts().overloaded, 2);
        }
    }

    /// What cannot be sent gets the server library's answer, within the
    /// limit: a `tools/call` result over `max_send` becomes a tool failure
    /// (`isError: true`) for its id; an error response over it a short
    /// -32603 error for its id; an id too large for even that gets the
    /// answer with a `null` id that names an excerpt of it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn what_cannot_be_sent_becomes_a_short_error_for_its_id() {
        for _ in 0..20 {
            let max = 300;
            let (mut host, handle) = serve(ServerConfig::default().with_max_send(max)).await;
            host.call(json!(1), "huge_error").await;
            let answer = host.line().await;
            assert!(answer.len() <= max, "{answer}");
            let error: Value = serde_json::from_str(&answer).unwrap();
            assert_eq!(error["id"], 1, "{answer}");
            assert_eq!(error["error"]["code"], -32603, "{answer}");
            let message = error["error"]["message"].as_str().unwrap();
            assert!(
                message.starts_with("error -32603 of ")
                    && message.ends_with("exceeds the transport limit of 300 bytes; not sent"),
                "{message}"
            );

            host.call(json!(3), "huge").await;
            let answer = host.line().await;
            assert!(answer.len() <= max, "{answer}");
            let failure: Value = serde_json::from_str(&answer).unwrap();
            assert_eq!(
                (failure["id"].clone(), failure["result"]["isError"].clone()),
                (json!(3), json!(true)),
                "{answer}"
            );
            let text = failure["result"]["content"][0]["text"].as_str().unwrap();
            assert!(
                text.starts_with("result of ") && text.ends_with("exceeds the transport limit of 300 bytes; not sent")
            );

            let id = "i".repeat(400);
            host.call(json!(id), "echo").await;
            let answer = host.line().await;
            assert!(answer.len() <= max, "{answer}");
            assert!(answer.starts_with(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32603"#), "{answer}");
            assert!(answer.contains("(402 bytes)"), "{answer}");
            assert_eq!(handle.counts().oversize_errors, 3);
        }
    }
}
