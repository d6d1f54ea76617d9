//! The server side (feature `server`): a stdin serve loop that never wedges,
//! cancellation that reaches every producer, bounded subprocess capture, and
//! result budgets with cursors.
//!
//! A server built on this module answers every request exactly once (unless
//! the client cancels it); keeps reading stdin while its handlers run and
//! while stdout is blocked, up to a bounded backlog of replies, so a
//! `notifications/cancelled` is seen; admits at most `max_concurrent +
//! max_queued` tool calls at once; writes stdout from a single task, whole
//! frames only, never over the response limit; and stops the work a
//! cancelled request started — tasks, remote operations, and the child
//! process trees with their pipes — at a cancellation, at shutdown, and at
//! `SIGTERM` / `SIGINT` (Ctrl-C / Ctrl-Break on Windows). [`Server::serve`] states the contract.
//!
//! # Pieces
//!
//! * [`Server`]: tools and their handlers; [`Server::serve`] /
//!   [`Server::serve_stdio`] run the loop ([`Server::serve`] states its
//!   contract) and return a [`ServeReport`].
//! * The request table: states [`State::Queued`], [`State::Running`],
//!   [`State::Writing`] and done, and what a cancellation does in each.
//! * [`Call`]: what a handler gets — arguments, the request's [`Scope`]
//!   (a tokio-util `CancellationToken`, [`Scope::spawn_child`],
//!   [`Scope::abortable`], [`Scope::spawn_task`]) and notifications.
//! * [`capture()`]: bounded subprocess capture into a
//!   [`Preview`](crate::Preview) per stream.
//! * [`Budget`]: results within a budget, with cursors; and
//!   [`Preview::into_result`](crate::Preview::into_result): a bounded body
//!   preview as a tool result.
//!
//! Every item is exported here, at `mcp_framer_stdio::server::…`, and only
//! here (the modules are private).
//!
//! Logs are `tracing` events; this module never prints. stdout carries
//! protocol frames only.
//!
//! # Example: a minimal server with one cancellable tool
//!
//! ```no_run
//! use mcp_framer_stdio::server::{Call, CaptureOptions, RpcError, Server, Tool, ToolResult};
//! use serde_json::{Value, json};
//!
//! /// Runs `grep` below the current directory. If the host cancels the call,
//! /// the `grep` process tree is killed and no response is sent.
//! /// A failure to run `grep` is a tool failure: the model gets a result with
//! /// `isError: true` saying so. A missing pattern is a protocol error.
//! async fn search(call: Call) -> Result<ToolResult, RpcError> {
//!     let args: Value = call.args()?;
//!     let pattern = args["pattern"].as_str().ok_or_else(|| RpcError::invalid_params("pattern is required"))?;
//!     let mut grep = tokio::process::Command::new("grep");
//!     // First move: pass the limit to the command itself.
//!     grep.args(["-rn", "--max-count=20", "--", pattern, "."]);
//!     // Safety net: bounded previews of stdout and stderr, drained to EOF.
//!     let run = call.capture(&mut grep, CaptureOptions::default()).await.map_err(RpcError::internal)?;
//!     Ok(ToolResult::text(format!("{}\n{}", run.stdout.to_text(), run.summary())))
//! }
//!
//! #[tokio::main]
//! async fn main() -> std::io::Result<()> {
//!     let schema = json!({"type": "object", "properties": {"pattern": {"type": "string"}}, "required": ["pattern"]});
//!     let server = Server::new("grep-server", "0.1.0").tool(Tool::new("search", "Search files", schema), search);
//!     let report = server.serve_stdio().await?;
//!     eprintln!("served {} requests", report.requests);
//!     // A blocked stdout write may still hold a runtime thread: exit explicitly.
//!     std::process::exit(0)
//! }
//! ```

use crate::setters::setters;
use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use serde_json::value::{RawValue, to_raw_value};
use tokio::io::{AsyncRead, AsyncWrite};

use mcp_framer::{Config, DEFAULT_MAX_FRAME};

mod budget;
mod cancel;
mod capture;
mod dispatch;
mod report;
mod screen;
mod serve;
mod stdio;
mod table;
mod tool;
mod transport;
mod writer;

pub use budget::{Budget, BudgetError, CursorError, Page, Resume, Skipped};
pub use cancel::{Cancelled, Scope, ScopedChild};
pub use capture::{Capture, CaptureOptions, Ending, KILL_DRAIN_GRACE, capture};
pub use report::{CancelCounts, ServeReport};
pub use table::{CancelOutcome, State};
pub use tool::{Call, RpcError, Tool, ToolResult};
pub use transport::{Incoming, IncomingFrame, Outgoing, stdio_transport, transport};

use tool::Handler;

/// The MCP protocol versions this server accepts, newest first. `initialize`
/// answers with the client's version if it is one of these, else the newest.
pub const PROTOCOL_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// The modern (handshake-free) MCP protocol versions this server serves,
/// newest first: `server/discover` lists them (then [`PROTOCOL_VERSIONS`],
/// which `initialize` still serves), as the 2026-07-28 revision describes.
pub const MODERN_PROTOCOL_VERSIONS: &[&str] = &["2026-07-28"];

/// The default [`ServerConfig::control_queue_bytes`]: 1 MiB, some 28,000
/// `ping` replies.
pub const DEFAULT_CONTROL_QUEUE_BYTES: usize = 1 << 20;

/// The default [`ServerConfig::shutdown_grace`]: 1 s. A host that closes a
/// server's stdin waits about 2 s before it sends `SIGTERM` (the official
/// Python and TypeScript SDKs' clients do; `mcp-probe`'s shutdown check
/// gives 2 s too), so a server that lets its calls run longer after the end
/// of stdin is terminated rather than exiting by itself. One second leaves
/// the other second to cancel what still runs, flush and exit.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(1);

/// Limits of a serve loop. Build one from the default with the `with_*`
/// setters (the fields may grow, so the struct is `#[non_exhaustive]`).
///
/// ```
/// use std::time::Duration;
/// use mcp_framer_stdio::server::ServerConfig;
///
/// let config = ServerConfig::default().with_max_concurrent(4).with_shutdown_grace(Duration::from_secs(1));
/// assert_eq!((config.max_concurrent, config.max_queued), (4, 256));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerConfig {
    /// The stdin framer's configuration: the transport limit and line rules,
    /// the same as the host's. Default: [`Config::default`] (16 MiB, skip
    /// oversize messages).
    pub framer: Config,
    /// Tool calls running at once. Default: 16.
    pub max_concurrent: usize,
    /// Tool calls waiting for a slot; beyond this, calls are refused with
    /// -32000. Default: 256.
    pub max_queued: usize,
    /// The largest frame written, in bytes of JSON (without `\n`): the
    /// host's transport limit. A larger result is replaced by a tool failure
    /// saying so, a larger error by a short -32603. Default:
    /// [`DEFAULT_MAX_FRAME`]. (The receive limit is
    /// [`framer`](ServerConfig::framer)`.max_frame`, as on the host; set it
    /// with [`with_max_receive`](ServerConfig::with_max_receive).)
    pub max_send: usize,
    /// Bytes of tool-call frames (results, notifications) queued for stdout
    /// before handlers wait for room, at least 1 and at most `u32::MAX`
    /// (values outside are clamped); a frame larger than this is queued
    /// alone. Default: [`DEFAULT_MAX_FRAME`].
    pub writer_queue_bytes: usize,
    /// Bytes reserved for the stdin loop's own replies (`initialize`,
    /// `ping`, `tools/list`, every error reply) queued for stdout, apart from
    /// [`writer_queue_bytes`](ServerConfig::writer_queue_bytes), so that they
    /// never wait behind a large result. This is the bounded backlog of
    /// answered-but-unwritten requests: when it is full (the host is not
    /// draining stdout) the loop stops reading stdin until the writer frees
    /// room. Clamped like `writer_queue_bytes`. Default: 1 MiB.
    pub control_queue_bytes: usize,
    /// At stdin EOF: how long in-flight requests may still run, and then how
    /// long the writer may take to flush (at a signal: only the flush).
    /// Default: [`DEFAULT_SHUTDOWN_GRACE`], 1 s.
    pub shutdown_grace: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            framer: Config::default(),
            max_concurrent: 16,
            max_queued: 256,
            max_send: DEFAULT_MAX_FRAME,
            writer_queue_bytes: DEFAULT_MAX_FRAME,
            control_queue_bytes: DEFAULT_CONTROL_QUEUE_BYTES,
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
        }
    }
}

setters!(ServerConfig {
    framer: Config => with_framer,
    max_concurrent: usize => with_max_concurrent,
    max_queued: usize => with_max_queued,
    max_send: usize => with_max_send,
    writer_queue_bytes: usize => with_writer_queue_bytes,
    control_queue_bytes: usize => with_control_queue_bytes,
    shutdown_grace: Duration => with_shutdown_grace,
});

impl ServerConfig {
    /// Sets the transport limit of what is read, in bytes
    /// ([`framer`](ServerConfig::framer)`.max_frame`), as
    /// `SessionConfig::with_max_receive` does on the host.
    #[must_use]
    pub fn with_max_receive(mut self, bytes: usize) -> ServerConfig {
        self.framer.max_frame = bytes;
        self
    }
}

/// An MCP server: its identity, its tools, and its limits.
pub struct Server {
    name: String,
    version: String,
    instructions: Option<String>,
    config: ServerConfig,
    tools: Vec<(Tool, Arc<str>, Handler)>,
    by_name: HashMap<String, usize>,
}

impl Server {
    /// A server named `name` at `version`, with no tools and the default
    /// [`ServerConfig`].
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Server {
        Server {
            name: name.into(),
            version: version.into(),
            instructions: None,
            config: ServerConfig::default(),
            tools: Vec::new(),
            by_name: HashMap::new(),
        }
    }

    /// Sets the limits.
    pub fn with_config(mut self, config: ServerConfig) -> Server {
        self.config = config;
        self
    }

    /// Sets the `instructions` sent in the `initialize` result.
    pub fn with_instructions(mut self, instructions: impl Into<String>) -> Server {
        self.instructions = Some(instructions.into());
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
        let handler: Handler = Arc::new(move |call| Box::pin(handler(call)));
        let name: Arc<str> = Arc::from(tool.name.as_str());
        match self.by_name.get(&tool.name) {
            Some(&i) => self.tools[i] = (tool, name, handler),
            None => {
                self.by_name.insert(tool.name.clone(), self.tools.len());
                self.tools.push((tool, name, handler));
            }
        }
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
    /// * stdin is read in read-into mode straight into the [`Framer`](mcp_framer::Framer)'s buffer,
    ///   under [`ServerConfig::framer`] (the same
    ///   transport limit and policies as the host).
    /// * **Every request gets exactly one response**, unless the client
    ///   cancelled it (`notifications/cancelled`, see [`State`]) or stdout
    ///   failed. No reply is ever dropped while the host reads stdout.
    ///   Requests the server gives up on at shutdown are answered too (-32603,
    ///   "request abandoned"), and their ids are logged.
    /// * **Replies never starve.** `initialize`, `ping` and `tools/list` are
    ///   answered by the loop itself, as is every error reply; these replies
    ///   are queued in a budget of their own
    ///   ([`ServerConfig::control_queue_bytes`]) that tool results never
    ///   use, so they never wait behind a large result.
    /// * **Backpressure.** While the host does not drain stdout, the loop
    ///   keeps reading stdin (so cancellations still reach running calls)
    ///   until that reply budget is full: a bounded backlog of answered,
    ///   unwritten requests. Then it **stops reading stdin** until the host
    ///   drains again (each pause counted in [`ServeReport::stdin_pauses`]
    ///   and logged at debug level; a pause of a second or more logged as a
    ///   warning when it ends): a host that does not drain has broken
    ///   liveness, and rejecting instead would need room that does not exist.
    ///   A signal or a stdout failure still ends the loop while it waits.
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
    /// * Error replies respect the response limit: names the client sent
    ///   (method, tool, id) are echoed as an excerpt of at most 64 bytes, cut
    ///   at a character boundary, with their length; an error frame that
    ///   would still be over [`ServerConfig::max_send`] is replaced by a
    ///   short one (with a `null` id if the id alone is too large).
    /// * A request whose id is already in flight (its response not yet
    ///   written) is not processed; it is answered -32600 with a **`null`
    ///   id**, so that a client matching responses by id cannot take it for
    ///   the original's response, which still comes, once, with the id.
    /// * A second `initialize` in a session is answered -32600. Responses
    ///   from the host are ignored (this server sends no requests). Other
    ///   methods get -32601. `notifications/cancelled` goes to the request
    ///   [table](State); a malformed one (no usable `requestId`) is ignored,
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
        serve::serve(&self, input, output, std::future::pending()).await
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
    /// Reads and writes run on tokio's blocking pool. When this returns
    /// after a write that never completed (a host that stopped draining),
    /// that write still holds a thread: end the process with
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
        let (input, output) = stdio::take(stdio::Mode::Blocking)?;
        Ok(serve::serve(&self, input, output, shutdown).await)
    }

    /// The tool's name, handler, and whether it declares an output schema.
    fn handler(&self, name: &str) -> Option<(Arc<str>, Handler, bool)> {
        self.by_name.get(name).map(|&i| {
            let (tool, name, handler) = &self.tools[i];
            (Arc::clone(name), Arc::clone(handler), tool.output_schema.is_some())
        })
    }

    fn tools_list(&self) -> Box<RawValue> {
        let tools: Vec<&Tool> = self.tools.iter().map(|(tool, _, _)| tool).collect();
        // `resultType`, `ttlMs` and `cacheScope` are required from 2026-07-28
        // on (earlier clients ignore them). The list is fixed for the
        // server's life, but a restart may change it: no freshness is
        // promised (`ttlMs` 0), and it is this server's own (`private`).
        let list = serde_json::json!({ "tools": tools, "resultType": "complete", "ttlMs": 0, "cacheScope": "private" });
        to_raw_value(&list).expect("tool descriptions serialize")
    }

    /// The `server/discover` result (2026-07-28): the versions served, the
    /// capabilities, and the identity in `_meta`.
    fn discover_result(&self) -> Value {
        let versions: Vec<&str> = MODERN_PROTOCOL_VERSIONS.iter().chain(PROTOCOL_VERSIONS).copied().collect();
        let mut result = serde_json::json!({
            "resultType": "complete",
            "supportedVersions": versions,
            "capabilities": { "tools": { "listChanged": false } },
            "_meta": { "io.modelcontextprotocol/serverInfo": { "name": self.name, "version": self.version } },
        });
        if let Some(instructions) = &self.instructions {
            result["instructions"] = Value::from(instructions.as_str());
        }
        result
    }

    fn initialize_result(&self, asked: Option<&str>) -> Value {
        let mut result = serde_json::json!({
            "protocolVersion": serve::negotiate(asked),
            "capabilities": { "tools": { "listChanged": false } },
            "serverInfo": { "name": self.name, "version": self.version },
        });
        if let Some(instructions) = &self.instructions {
            result["instructions"] = Value::from(instructions.as_str());
        }
        result
    }
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tools: Vec<&str> = self.tools.iter().map(|(tool, _, _)| tool.name.as_str()).collect();
        f.debug_struct("Server")
            .field("name", &self.name)
            .field("version", &self.version)
            .field("tools", &tools)
            .field("config", &self.config)
            .finish()
    }
}
