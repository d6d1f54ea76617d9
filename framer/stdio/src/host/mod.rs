//! The tokio host transport (feature `host`, unix and Windows): spawn an MCP server,
//! drain its stdout forever, hand messages to the application through a
//! bounded queue, and keep every request bounded in time.
//!
//! stdio is a bounded byte pipe: if a host stops reading a server's stdout,
//! the server blocks in `write()` mid-response and never reads the
//! cancellation or the next request on stdin. This module keeps that from
//! happening, in two layers:
//!
//! * [`Connection`] — the lower layer: one server process and its stdio,
//!   without a request table. It spawns the server in a process tree of its
//!   own (a process group on unix, a Job Object on Windows), drains stdout with the reader below, queues every classified
//!   message (responses included) on a queue bounded by bytes, drains
//!   stderr, writes stdin with stall detection, shuts down over the whole
//!   tree, and counts everything. Another SDK's transport builds on it and
//!   brings its own request table.
//! * [`Session`] — the upper layer: a `Connection` plus the request table
//!   (ids, deadlines, cancellation, matching responses).
//!
//! Their pieces:
//!
//! * [`Reader`] — a task owns the child's stdout and only reads: straight into
//!   the [`Framer`](mcp_framer::Framer)'s buffer, then classifies each frame with
//!   the [parser](mcp_framer_jsonrpc::parse). Inside a session, responses go
//!   to the request waiting for them; everything else goes to a queue whose
//!   consumer is the application. Lines that are not JSON-RPC are counted,
//!   reported with a bounded [`Preview`](crate::Preview) of their first bytes
//!   ([`SkippedFrame`]) and skipped.
//! * stderr is drained by its own task: its last bytes are kept (a bounded
//!   tail [`Preview`](crate::Preview), [`SessionConfig::stderr_tail`]), bytes
//!   and lines are counted, and lines are split by the core framer and
//!   forwarded to `tracing` ([`StderrLog`]); it never blocks.
//! * [`Session`]'s client side: one writer task writes one whole frame
//!   and one `\n` at a time, each within a timeout; a pending table matches
//!   responses by id; late responses are counted and ignored; when the child
//!   exits every pending request fails with the exit status and the stderr
//!   tail; [`Session::shutdown`] closes stdin, waits, sends SIGTERM, waits,
//!   sends SIGKILL.
//! * [`Metrics`] — counters readable at any time as a [`MetricsSnapshot`]:
//!   stdout bytes, largest frame, parse errors, time waiting for room in the
//!   queue, cancellations sent, the exit status, and more.
//!
//! # The rules
//!
//! 1. **Deadlines run from the send.** A request's timeout
//!    ([`SessionConfig::request_timeout`], or
//!    [`PendingRequest::with_timeout`]) is armed when the request is written,
//!    whether or not anyone awaits its [`PendingRequest`]. At the deadline the
//!    request fails ([`RequestError::TimedOut`]), `notifications/cancelled` is
//!    sent (never for `initialize`) and its pending entry is freed.
//! 2. **An oversize response fails its request at once.** While the reader
//!    discards a frame over the transport limit, it keeps a bounded head and
//!    tail of it ([`OVERSIZE_GLIMPSE`] bytes each, never the whole frame) and
//!    recovers the frame's top-level `id` from them
//!    ([`recover_response_id`](mcp_framer_jsonrpc::recover_response_id)).
//!    If a pending request has that id, it fails at once with
//!    [`RequestError::Oversize`] (the frame's exact length and the limit),
//!    counted in [`oversize_responses`](MetricsSnapshot::oversize_responses),
//!    and no cancellation is sent. If the id cannot be recovered safely, the
//!    request keeps its deadline and its error says how many oversize frames
//!    were skipped while it waited.
//! 3. **A write stall ends the session.** A frame not written to the child's
//!    stdin within [`SessionConfig::write_timeout`] ends the session with
//!    [`CloseReason::StdinStalled`]: every pending (and later) request fails
//!    at once, [`Session::closed`] says so, and the child is stopped by the
//!    shutdown sequence ([`SessionConfig::shutdown`]).
//! 4. **Without a consumer, the truth.** A host that dropped its inbound
//!    receiver takes no server requests: the rule is stated on
//!    [`NO_CONSUMER_MESSAGE`].
//! 5. **Nothing is lost to a consumer that keeps up; the reader never waits
//!    on the application for long.** The inbound queue is bounded by bytes,
//!    and what does not fit gets the [`OverloadPolicy`]: what is counted, how
//!    a consumer that keeps up gets room, overload episodes and the opt-in
//!    wait budget are stated once, on [`Overload`].
//! 6. **Metrics agree during a skip.** An oversize frame counts in
//!    [`oversize_frames`](MetricsSnapshot::oversize_frames) and its bytes in
//!    [`discarded_bytes`](MetricsSnapshot::discarded_bytes) once it is
//!    discarded to its end; until then its bytes are in the
//!    [`oversize_in_progress`](MetricsSnapshot::oversize_in_progress) gauge.
//!
//! # Example
//!
//! A real (tiny) server: `sh` answers the first request, prints a log line
//! on stdout by mistake, sends a notification, and exits with status 3 while
//! a second request is pending.
//!
//! ```
//! use mcp_framer_stdio::host::{Inbound, RequestError, Session, SessionConfig, SkippedFrame};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let script = r#"
//!     read request
//!     echo '{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}'
//!     echo 'INFO listening'
//!     echo '{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hi"}}'
//!     read request
//!     echo 'fatal: out of cheese' >&2
//!     exit 3
//! "#;
//! let mut command = tokio::process::Command::new("sh");
//! command.args(["-c", script]);
//! let (session, mut inbound) = Session::spawn(command, SessionConfig::default())?;
//!
//! let tools = session.request("tools/list", &()).await?;
//! assert_eq!(tools.payload(), Some(r#"{"tools":[]}"#));
//!
//! let Some(Inbound::Skipped(SkippedFrame::NotJson { excerpt, .. })) = inbound.recv().await else { panic!() };
//! assert_eq!(excerpt.to_text(), "INFO listening");
//! let Some(Inbound::Notification(note)) = inbound.recv().await else { panic!() };
//! assert_eq!(note.method(), Some("notifications/message"));
//!
//! let Err(RequestError::Closed(closed)) = session.request("ping", &()).await else { panic!() };
//! assert_eq!(closed.exit_status().and_then(|s| s.code()), Some(3));
//! assert!(closed.to_string().contains("exit status: 3"));
//! assert!(closed.to_string().contains("out of cheese"));
//!
//! let metrics = session.metrics();
//! assert_eq!((metrics.frames, metrics.non_json_lines, metrics.responses), (3, 1, 1));
//! # Ok(())
//! # }
//! ```

mod config;
mod connection;
mod error;
mod handshake;
mod inbound;
mod metrics;
mod outgoing;
mod overload;
mod owed;
mod pending;
mod pool;
mod reader;
mod recover;
mod session;
mod stderr;
mod supervisor;
mod writer;

pub use config::{
    DEFAULT_EXCERPT, DEFAULT_MAX_QUEUED_BYTES, NO_CONSUMER_MESSAGE, OVERLOADED_MESSAGE, Overload, OverloadPolicy,
    SessionConfig, ShutdownConfig, StderrLog,
};
pub use connection::Connection;
pub use error::{CloseReason, Closed, RequestError, SendError, WriteError};
pub use handshake::{
    Era, Failure, HandshakeError, HandshakeOptions, HandshakeTransport, Handshaken, handshake, with_meta,
};
pub use inbound::{ITEM_OVERHEAD, Inbound, InboundQueue, InboundSender, Received, SkippedFrame, inbound_channel};
pub use metrics::{Metrics, MetricsSnapshot};
pub use reader::{Reader, ReaderEnd, ReaderReport};
pub use recover::OVERSIZE_GLIMPSE;
pub use session::{PendingRequest, Session};
pub use supervisor::{ShutdownReport, ShutdownStage};
