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
//! # Layers
//!
//! Like the host (a `Session` on a `Connection`), the server is a
//! dispatcher on a transport:
//!
//! * the **transport** ([`transport`], [`stdio_transport`]) owns stdin (one
//!   read loop: the framer, screening, the byte limit, pauses, signals, the
//!   end of input) and stdout (the one writer and its reserved reply
//!   budget); its contract is on [`transport`]. An SDK with its own request
//!   handling sits on it directly, as the rmcp adapter does;
//! * [`Server`] adds tools, admission, cancellation and the protocol's own
//!   replies; [`Server::serve`] / [`Server::serve_stdio`] run it on the
//!   transport's pieces, state what it adds, and return a [`ServeReport`].
//!
//! # Pieces
//!
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

mod budget;
mod cancel;
mod capture;
mod config;
mod dispatch;
mod messages;
mod replies;
mod report;
mod route;
mod screen;
mod serve;
mod stdin;
mod stdio;
mod table;
mod tool;
mod transport;
mod writer;

pub use budget::{Budget, BudgetError, CursorError, Page, Resume, Skipped};
pub use cancel::{Cancelled, Scope, ScopedChild};
pub use capture::{Capture, CaptureOptions, Ending, KILL_DRAIN_GRACE, capture};
pub use config::{DEFAULT_CONTROL_QUEUE_BYTES, DEFAULT_SHUTDOWN_GRACE, ServerConfig};
pub use messages::{Inlet, OutFrame, Outlet};
pub use report::{CancelCounts, ServeReport};
pub use screen::oversize_error;
pub use serve::Server;
pub use stdio::{Input, Output, shutdown_signals, take_stdio};
pub use table::{CancelOutcome, State};
pub use tool::{Call, RpcError, Tool, ToolResult};
pub use transport::{Incoming, IncomingFrame, Outgoing, stdio_transport, transport};
