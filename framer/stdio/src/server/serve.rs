//! [`Server`]: tools and their handlers, and the dispatcher it puts on the
//! server transport's [stdin loop](super::stdin) and writer; its shutdown.

use std::future::Future;
use std::io;
use std::ops::Not;
use std::pin::pin;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::config::ServerConfig;
use super::dispatch::Dispatcher;
use super::messages::{self, Inlet, Messages, Outlet, read_messages};
use super::replies::{self, Identity};
use super::report::{Counters, ServeReport};
use super::route::Router;
use super::stdin::{read_stdin, signal_name};
use super::stdio;
use super::table::Table;
use super::tool::{Call, RpcError, Tool, ToolResult, Tools};
use super::writer::{Outbox, run_writer};
use crate::counter::add;
use crate::preview::excerpt;

/// An MCP server: its identity, its tools, and its limits.
pub struct Server {
    identity: Identity,
    config: ServerConfig,
    tools: Tools,
}

impl Server {
    /// A server named `name` at `version`, with no tools and the default
    /// [`ServerConfig`].
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Server {
        let identity = Identity { name: name.into(), version: version.into(), instructions: None };
        Server { identity, config: ServerConfig::default(), tools: Tools::default() }
    }

    /// Sets the limits.
    pub fn with_config(mut self, config: ServerConfig) -> Server {
        self.config = config;
        self
    }

    /// Sets the `instructions` sent in the `initialize` result.
    pub fn with_instructions(mut self, instructions: impl Into<String>) -> Server {
        self.identity.instructions = Some(instructions.into());
        self
    }

    /// Adds a tool. `handler` is called once per `tools/call` with the
    /// request's [`Call`]; a tool with the same name replaces the earlier one.
    ///
    /// What the handler returns becomes the response:
    ///
    /// * `Ok(result)`: the result. Its `structuredContent` is sent only if
    ///   the tool declares an [`outputSchema`](Tool::with_output_schema).
    /// * `Err` with code [`INVALID_PARAMS`](mcp_framer_jsonrpc::INVALID_PARAMS)
    ///   (bad arguments, as [`Call::args`] reports them; a bad cursor): a
    ///   JSON-RPC error, a protocol problem.
    /// * `Err` with any other code, or a panic: a **tool failure**, sent as
    ///   a result with `isError: true` and a text block saying what went wrong
    ///   (the error's message; for a panic only that it panicked, the details
    ///   going to the log), so the model sees it.
    /// * A result over [`ServerConfig::max_send`]: a tool failure saying so.
    pub fn tool<F, Fut>(mut self, tool: Tool, handler: F) -> Server
    where
        F: Fn(Call) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ToolResult, RpcError>> + Send + 'static,
    {
        self.tools.insert(tool, Arc::new(move |call| Box::pin(handler(call))));
        self
    }

    /// The configuration in force.
    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    /// Serves requests read from `input`, writing frames to `output`, until
    /// `input` ends (or `output` fails). Returns the loop's counters.
    ///
    /// # Contract
    ///
    /// `Server` is a dispatcher on the server transport: reading stdin
    /// (the byte limit before any parse; malformed, oversize and blank
    /// lines), the reserved reply budget and the backpressure it gives,
    /// stdout, signals and a failed stdout are the [`transport`](super::transport)'s,
    /// and its contract states them; what follows is what the dispatcher
    /// adds.
    ///
    /// * **Every request gets exactly one response**, unless the client
    ///   cancelled it (`notifications/cancelled`, see [`State`](super::State)) or stdout
    ///   failed. No reply is ever dropped while the host reads stdout.
    ///   Requests the server gives up on at shutdown are answered too (-32603,
    ///   "request abandoned"), and their ids are logged.
    /// * **Replies never starve.** `initialize`, `server/discover`, `ping`
    ///   and `tools/list` are answered at once, as is every error reply, in
    ///   the transport's reserved reply budget that tool results never use.
    ///   Memory stays bounded: queued replies by the two budgets, results
    ///   waiting for room by the admission bound.
    /// * **Admission.** `tools/call` runs in a task of its own, at most
    ///   [`max_concurrent`](ServerConfig::max_concurrent) at once. A call is
    ///   admitted when the loop accepts it and stays admitted until its
    ///   response is queued for stdout; at most `max_concurrent +
    ///   max_queued` are admitted at any moment, however many arrive in one
    ///   read. A call beyond that is answered -32000 (overloaded) at once.
    /// * A frame that is not a JSON-RPC message is answered with the error the
    ///   JSON-RPC spec calls for (-32700 parse error, -32600 invalid request)
    ///   with the request id when one can be recovered, `null` otherwise; a
    ///   frame over the transport limit is discarded by the framer and
    ///   answered -32600 with a `null` id, one cut off by stdin EOF included.
    ///   A line of nothing but JSON whitespace (space, tab, `\r`) is, like an
    ///   empty line, not a message: skipped, counted
    ///   ([`ServeReport::blank_lines`]), not answered. Each case is counted
    ///   and logged; the loop continues.
    /// * Names the client sent (method, tool, id) are echoed in error
    ///   replies as an excerpt of at most 64 bytes, cut at a character
    ///   boundary, with their length.
    /// * The 2026-07-28 rules
    ///   ([`check_request`](mcp_framer_jsonrpc::protocol::check_request)):
    ///   `server/discover`, and any request whose `_meta` carries a
    ///   per-request member, must carry the version and the client
    ///   capabilities (-32602 otherwise) with a version served (-32022
    ///   otherwise, naming them); counted in [`ServeReport::protocol_errors`].
    ///   A request without them is served as the legacy era serves it.
    /// * A request whose id is already in flight (its response not yet
    ///   written) is not processed; it is answered -32600 with a **`null`
    ///   id**, so that a client matching responses by id cannot take it for
    ///   the original's response, which still comes, once, with the id.
    /// * A second `initialize` in a session is answered -32600. Responses
    ///   from the host are ignored (this server sends no requests). Other
    ///   methods get -32601. `notifications/cancelled` goes to the request
    ///   [table](super::State); a malformed one (no usable `requestId`) is ignored,
    ///   and `initialize` cannot be cancelled.
    /// * At stdin EOF (or a read error, or a sticky framer error under
    ///   `OversizePolicy::Fail`) the loop stops reading, lets in-flight requests
    ///   finish for at most [`ServerConfig::shutdown_grace`],
    ///   cancels the rest (their process trees are killed; they are answered,
    ///   logged and counted in [`ServeReport::cancelled_at_shutdown`]),
    ///   flushes the writer (again within the grace period) and returns its
    ///   [`ServeReport`]. A shutdown signal ([`Server::serve_stdio`] listens
    ///   for `SIGTERM` and `SIGINT`) does the same without waiting for the
    ///   running calls. A host that has stopped draining stdout by then
    ///   cannot hold the server: the
    ///   flush is abandoned at the deadline, the frame being written stays
    ///   unfinished (bytes cannot be retracted; the host's framer reports it as
    ///   truncated) and [`ServeReport::unflushed_frames`] counts what was not
    ///   written. If stdout fails, the host is gone: everything is cancelled at
    ///   once.
    ///
    /// ```
    /// use std::time::Duration;
    /// use mcp_framer_stdio::server::{Call, RpcError, Server, Tool, ToolResult};
    /// use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    ///
    /// async fn slow(call: Call) -> Result<ToolResult, RpcError> {
    ///     call.abortable(tokio::time::sleep(Duration::from_secs(30))).await?;
    ///     Ok(ToolResult::text("done"))
    /// }
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let server = Server::new("demo", "1").tool(Tool::new("slow", "Sleeps", serde_json::json!({})), slow);
    /// let (mut host_in, server_out) = tokio::io::duplex(1 << 16);
    /// let (server_in, mut host_out) = tokio::io::duplex(1 << 16);
    /// let serving = tokio::spawn(async move { server.serve(server_in, server_out).await });
    ///
    /// host_out.write_all(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow"}}
    /// {"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}
    /// {"jsonrpc":"2.0","id":2,"method":"ping"}
    /// "#).await.unwrap();
    /// let mut lines = BufReader::new(&mut host_in).lines();
    /// assert_eq!(lines.next_line().await.unwrap().unwrap(), r#"{"jsonrpc":"2.0","id":2,"result":{}}"#);
    /// drop(host_out); // EOF
    /// assert_eq!(lines.next_line().await.unwrap(), None, "nothing for the cancelled call");
    /// let report = serving.await.unwrap();
    /// assert_eq!((report.requests, report.cancels.running + report.cancels.queued), (2, 1));
    /// # });
    /// ```
    pub async fn serve<R, W>(self, input: R, output: W) -> ServeReport
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        serve(&self, input, output, std::future::pending()).await
    }

    /// [`Server::serve`] until `input` ends or `shutdown` resolves (to the
    /// number of the signal that asked for it, as [`shutdown_signals`](super::shutdown_signals)
    /// gives it): a resolved `shutdown` is handled as [`Server::serve_stdio`]
    /// handles `SIGTERM` (stop reading, cancel and answer every call still
    /// queued or running, flush within the grace period, return). For a
    /// front that owns the process's stdio itself and runs this dispatcher
    /// on in-process pipes (the experimental `stdio-v2` server does).
    pub async fn serve_until<R, W, S>(self, input: R, output: W, shutdown: S) -> ServeReport
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin + Send + 'static,
        S: Future<Output = i32>,
    {
        serve(&self, input, output, shutdown).await
    }

    /// Serves the process's stdin and stdout. First it takes them for the
    /// protocol: on unix fds 0 and 1 are duplicated for the loop, then fd 0
    /// is pointed at `/dev/null` and fd 1 at stderr, so nothing else in the
    /// process (a stray `println!`, a child inheriting stdio) can touch the
    /// protocol stream. On Windows the standard handles stay as they are
    /// (redirecting them needs `unsafe` code, which this crate has none of):
    /// print to stderr only, and give child processes a null or piped
    /// stdin and stdout.
    ///
    /// It also handles `SIGTERM` and `SIGINT` (on Windows Ctrl-C and
    /// Ctrl-Break) the way [`Server::serve`] describes for a shutdown
    /// signal: stop reading, cancel every call still queued or running
    /// (killing their process trees) and answer it, flush within the grace
    /// period, return. The report's [`signal`](ServeReport::signal) says
    /// which one; exiting with `128 + signal` is the shell's convention.
    /// The handlers stay installed for the life of the process (tokio's
    /// cannot be removed), but once the first signal has arrived the next
    /// one ends the process at once, as its default action does (on
    /// Windows: exit status `STATUS_CONTROL_C_EXIT`): a second Ctrl-C
    /// still stops a server that is slow to finish.
    ///
    /// stdin and stdout are read and written as
    /// [`stdio_transport`](super::stdio_transport) says (one read path per
    /// platform): on unix, pipes without blocking; a file or a terminal, and
    /// everything on Windows, through tokio's blocking pool, where a read or
    /// a write that never completes (a host that stopped draining) still
    /// holds a thread when this returns: end the process with
    /// `std::process::exit` rather than waiting for the runtime to drop.
    ///
    /// # If the server is killed with `SIGKILL`
    ///
    /// Nothing runs, so tool processes, which lead process groups of their
    /// own, outlive it until they exit by themselves (their stdout pipes to
    /// the server are closed, so a child that writes gets `EPIPE`). There is
    /// no parent-death backstop: `PR_SET_PDEATHSIG` would have to be set in
    /// the child between `fork` and `exec` (`pre_exec`, which needs `unsafe`,
    /// and this crate forbids it), and it fires when the *thread* that forked
    /// the child exits, not the process, so on tokio's runtime (whose
    /// blocking-pool threads retire after 10 s idle) it would kill healthy
    /// children. A supervisor that must `SIGKILL` a server should run it in
    /// a cgroup or PID namespace (systemd's `KillMode=control-group`, a
    /// container) to take the tool processes down with it.
    pub async fn serve_stdio(self) -> io::Result<ServeReport> {
        let shutdown = stdio::shutdown_signals()?;
        let (input, output) = stdio::take()?;
        Ok(serve(&self, input, output, shutdown).await)
    }

    /// Runs this dispatcher on the [message-level seam](super::Inlet): a
    /// front hands it whole messages through the [`Inlet`] and takes the
    /// frames it writes from the [`Outlet`]; the returned future serves
    /// until the front [ends](Inlet::end) the input (or drops the
    /// `Outlet`, or `shutdown` resolves) and returns the report. The
    /// contract is [`Server::serve`]'s, with the seam's rules
    /// ([`Inlet`]: keys, what is held, tags) in place of stdin's and
    /// stdout's.
    ///
    /// ```
    /// use mcp_framer_jsonrpc::OwnedId;
    /// use mcp_framer_stdio::server::Server;
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let (inlet, mut outlet, serving) = Server::new("demo", "1").serve_messages(std::future::pending());
    /// let serving = tokio::spawn(serving);
    /// // The client's id is 7; the front hands the request in under its own key, 1.
    /// assert!(inlet.request(OwnedId::Number(1), br#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#.to_vec()).await);
    /// let frame = outlet.next().await.unwrap();
    /// assert_eq!(frame.bytes(), b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n");
    /// drop(frame); // gives its bytes back to the budget
    /// inlet.end();
    /// assert!(outlet.next().await.is_none());
    /// assert_eq!(serving.await.unwrap().requests, 1);
    /// # });
    /// ```
    pub fn serve_messages<S>(self, shutdown: S) -> (Inlet, Outlet, impl Future<Output = ServeReport> + Send + 'static)
    where
        S: Future<Output = i32> + Send + 'static,
    {
        let config = self.config;
        let counters = Arc::new(Counters::default());
        let (outbox, inbox) =
            Outbox::new(config.writer_queue_bytes, config.control_queue_bytes, config.max_send, Arc::clone(&counters));
        let (inlet, messages) = messages::inlet(config.framer.max_frame);
        let (outlet, flushed) = messages::outlet(inbox);
        let serving = async move {
            let io = Io { input: Input::<tokio::io::Empty>::Messages(messages), writer: Writer::Front(flushed) };
            serve_on(&self, io, outbox, counters, shutdown).await
        };
        (inlet, outlet, serving)
    }
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tools: Vec<&str> = self.tools.iter().map(|tool| tool.name.as_str()).collect();
        f.debug_struct("Server")
            .field("name", &self.identity.name)
            .field("version", &self.identity.version)
            .field("tools", &tools)
            .field("config", &self.config)
            .finish()
    }
}

/// Where the dispatcher reads and writes: stdin and stdout, or a front's
/// [message seam](super::messages).
struct Io<R> {
    input: Input<R>,
    writer: Writer,
}

enum Input<R> {
    Stdin(R),
    Messages(Messages),
}

enum Writer {
    /// The task that writes stdout.
    Task(JoinHandle<io::Result<()>>),
    /// A front's [`Outlet`]: told once every frame was taken.
    Front(oneshot::Receiver<()>),
}

/// Serves `input` / `output` until `input` ends or `shutdown` resolves (to
/// the number of the signal that asked for it); see [`Server::serve`] for
/// the contract.
async fn serve<R, W, S>(server: &Server, input: R, output: W, shutdown: S) -> ServeReport
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
    S: Future<Output = i32>,
{
    let config = &server.config;
    let counters = Arc::new(Counters::default());
    let (outbox, inbox) =
        Outbox::new(config.writer_queue_bytes, config.control_queue_bytes, config.max_send, Arc::clone(&counters));
    let writer = tokio::spawn(run_writer(inbox, output, Arc::clone(&counters)));
    let io = Io { input: Input::Stdin(input), writer: Writer::Task(writer) };
    serve_on(server, io, outbox, counters, shutdown).await
}

/// The dispatcher on `io`: routes what is read, then the shutdown (grace,
/// abandoning, the flush within the grace).
async fn serve_on<R, S>(server: &Server, io: Io<R>, outbox: Outbox, counters: Arc<Counters>, shutdown: S) -> ServeReport
where
    R: AsyncRead + Unpin,
    S: Future<Output = i32>,
{
    let config = &server.config;
    let table = Arc::new(Table::default());
    let dispatcher = Dispatcher::new(
        Arc::clone(&table),
        config.max_concurrent,
        config.max_queued,
        outbox.clone(),
        Arc::clone(&counters),
    );
    let mut router = Router {
        identity: &server.identity,
        tools: &server.tools,
        tools_list: replies::tools_list(server.tools.iter()),
        table,
        outbox,
        dispatcher,
        counters,
        initialize_id: None,
        client_id: None,
    };
    let mut shutdown = pin!(shutdown);
    let outbox = router.outbox.clone();
    let counters = Arc::clone(&router.counters);
    let Io { input, mut writer } = io;
    let ended = match input {
        Input::Stdin(input) => {
            read_stdin(input, config.framer, &outbox, &counters, &mut router, shutdown.as_mut()).await
        }
        Input::Messages(messages) => read_messages(messages, &mut router, shutdown.as_mut()).await,
    };
    let (mut signal, stdout_gone, mut error) = (ended.signal, ended.stdout_failed, ended.error);
    let (queued, running, writing) = router.table.counts();
    match signal {
        Some(number) => {
            tracing::warn!(signal = signal_name(number), queued, running, writing, "signal received; shutting down")
        }
        None if !stdout_gone => tracing::info!(queued, running, writing, "stdin closed; finishing in-flight requests"),
        None => {}
    }

    let grace = config.shutdown_grace;
    let finished = stdout_gone.not()
        && signal.is_none()
        && tokio::select! {
            finished = router.dispatcher.drain(grace) => finished,
            number = shutdown.as_mut() => {
                signal = Some(number);
                tracing::warn!(signal = signal_name(number), "signal received during the shutdown grace");
                false
            }
        };
    if !finished {
        let why = match signal {
            Some(number) => format!("{} received", signal_name(number)),
            None if stdout_gone => "stdout failed".to_owned(),
            None => format!("still running {grace:?} after stdin closed"),
        };
        router.abandon_all(&why, stdout_gone).await;
    }
    outbox.close();
    let mut unflushed = 0;
    let writer_done = match &mut writer {
        // The writer has stopped: this returns at once.
        Writer::Task(task) if stdout_gone => task.await,
        Writer::Front(_) if stdout_gone => Ok(Ok(())),
        _ => {
            let flushed = tokio::select! {
                done = tokio::time::timeout(grace, writer.done()) => done.ok(),
                number = shutdown.as_mut(), if signal.is_none() => {
                    signal = Some(number);
                    None
                }
            };
            match flushed {
                Some(done) => done,
                None => {
                    unflushed = outbox.pending();
                    tracing::warn!(unflushed, "stdout not drained within the shutdown grace; giving up");
                    writer.abort();
                    Ok(Ok(()))
                }
            }
        }
    };
    match writer_done {
        Ok(Ok(())) => {}
        Ok(Err(err)) => error = error.or(Some(format!("stdout write failed: {err}"))),
        Err(join) => error = error.or(Some(format!("writer task failed: {join}"))),
    }
    let mut report = counters.report(ended.stats);
    report.error = error;
    report.signal = signal;
    report.unflushed_frames = unflushed;
    report
}

impl Writer {
    /// Resolves once every frame was written (the task's result), or taken
    /// by the front.
    async fn done(&mut self) -> Result<io::Result<()>, tokio::task::JoinError> {
        match self {
            Writer::Task(task) => task.await,
            Writer::Front(flushed) => {
                let _ = flushed.await;
                Ok(Ok(()))
            }
        }
    }

    fn abort(&self) {
        if let Writer::Task(task) = self {
            task.abort();
        }
    }
}

/// At most this many abandoned ids are named in the shutdown log line.
const LOGGED_IDS: usize = 32;

impl Router<'_> {
    /// Cancels every request still queued or running, kills their process
    /// groups, and answers each -32603 (unless stdout is gone); logs their
    /// ids and counts them.
    async fn abandon_all(&mut self, why: &str, stdout_gone: bool) {
        self.dispatcher.stop_starting();
        let abandoned = self.table.cancel_all();
        self.dispatcher.abort_all().await;
        if abandoned.is_empty() {
            return;
        }
        add(&self.counters.cancelled_at_shutdown, abandoned.len() as u64);
        let mut ids: Vec<String> =
            abandoned.iter().take(LOGGED_IDS).map(|id| excerpt(&id.to_string()).into_owned()).collect();
        if abandoned.len() > LOGGED_IDS {
            ids.push(format!("and {} more", abandoned.len() - LOGGED_IDS));
        }
        tracing::warn!(count = abandoned.len(), ids = %ids.join(", "), reason = why,
            "requests abandoned at shutdown: cancelled, their process groups killed");
        if stdout_gone {
            return;
        }
        // Outside the control budget: at most max_concurrent + max_queued
        // small frames (the admission bound).
        let error = RpcError::internal(format!("request abandoned: the server is shutting down ({why})"));
        for id in &abandoned {
            self.outbox.push(self.outbox.error_frame(Some(id), &error), None, None);
        }
    }
}
