//! The client side of one server session: spawn, requests and their
//! responses, timeouts and cancellation, answers to server requests, and
//! shutdown.

use crate::setters::setters;
use std::fmt;
use std::io;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use serde::Serialize;
use tokio::process::Command;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::AbortHandle;
use tokio::time::Instant;

use super::inbound::{InboundQueue, Received, inbound_channel};
use super::metrics::{Metrics, MetricsSnapshot};
use super::outgoing;
use super::overload::DEFAULT_INBOUND_CAPACITY;
use super::pending::Pending;
use super::reader::{Reader, ReaderConfig};
use super::stderr::{StderrLog, StderrTail, drain_stderr};
use super::supervisor::{Reason, Signal, Supervisor, stop_child};
use super::writer::{WriteError, Writer};
use crate::counter::bump;
use crate::{Keep, Preview};
use mcp_framer::FrameError;
use mcp_framer_jsonrpc::{EncodeError, Encoder, ErrorObject, INTERNAL_ERROR, Id, OwnedId};

/// The method that is never cancelled (MCP: "the `initialize` request MUST
/// NOT be cancelled by clients").
const INITIALIZE: &str = "initialize";

/// How long each step of [`Session::shutdown`] waits for the child to exit.
/// Build one from the default with the `with_*` setters (`#[non_exhaustive]`:
/// the fields may grow).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ShutdownConfig {
    /// After closing stdin (servers SHOULD exit on end of input). Default 2 s.
    pub after_stdin: Duration,
    /// After SIGTERM. Default 2 s.
    pub after_term: Duration,
    /// After SIGKILL (only the kernel is left to wait for). Default 2 s.
    pub after_kill: Duration,
}

impl Default for ShutdownConfig {
    fn default() -> Self {
        let two = Duration::from_secs(2);
        ShutdownConfig { after_stdin: two, after_term: two, after_kill: two }
    }
}

setters!(ShutdownConfig {
    after_stdin: Duration => with_after_stdin,
    after_term: Duration => with_after_term,
    after_kill: Duration => with_after_kill,
});

impl ShutdownConfig {
    /// Sets all three waits to `each`.
    pub fn with_each(self, each: Duration) -> ShutdownConfig {
        ShutdownConfig { after_stdin: each, after_term: each, after_kill: each }
    }
}

/// How a [`Session`] runs. Every field has a default; build one from the
/// default with the `with_*` setters (the fields may grow, so the struct is
/// `#[non_exhaustive]`; a field can also be assigned on a value).
///
/// ```
/// use std::time::Duration;
/// use mcp_framer_stdio::host::{Overload, OverloadPolicy, ReaderConfig, SessionConfig};
/// use mcp_framer::{Config, OversizePolicy};
///
/// let framer = Config::DEFAULT.with_max_frame(8 << 20).with_oversize(OversizePolicy::Fail);
/// // Opt in to absorbing bursts: wait at most 10 ms per overload episode.
/// let overload = Overload::default().with_policy(OverloadPolicy::Drop).with_max_wait(Duration::from_millis(10));
/// let config = SessionConfig::default()
///     .with_reader(ReaderConfig::default().with_framer(framer).with_overload(overload))
///     .with_request_timeout(Duration::from_secs(30));
/// assert_eq!(config.reader.overload.max_queued_bytes, 64 << 20); // the queue is bounded by bytes
/// assert_eq!(config.reader.framer.max_frame, 8 << 20);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SessionConfig {
    /// The stdout reader: transport limit, oversize policy, overload policy.
    pub reader: ReaderConfig,
    /// Capacity of the inbound queue (server requests and notifications), in
    /// messages. Default [`DEFAULT_INBOUND_CAPACITY`](super::DEFAULT_INBOUND_CAPACITY):
    /// no count limit in practice, so the queue is bounded by bytes,
    /// [`Overload::max_queued_bytes`](super::Overload::max_queued_bytes)
    /// (64 MiB), and a burst of small messages fits while the application
    /// keeps up. A smaller capacity adds a count limit; messages beyond it,
    /// arriving faster than the application takes them, get the overload
    /// policy. Values above the default are clamped to it.
    pub inbound_capacity: usize,
    /// How long a request waits for its response before it fails and a
    /// `notifications/cancelled` is sent. Default 60 s. The deadline runs
    /// from when the request was written, whether or not anyone awaits its
    /// [`PendingRequest`].
    pub request_timeout: Duration,
    /// How long one frame may take to be written to the child's stdin.
    /// Default 10 s. A write that takes longer ends the session
    /// ([`CloseReason::StdinStalled`]).
    pub write_timeout: Duration,
    /// Bytes of stderr kept for diagnostics (the tail of a [`Preview`](crate::Preview),
    /// cut at a character boundary). Default 64 KiB.
    pub stderr_tail: usize,
    /// How stderr lines are forwarded to `tracing`. Default `Debug`.
    pub stderr_log: StderrLog,
    /// Once the child exited (or stdout closed), how long to wait for stdout
    /// and stderr to reach end of file (or for the child to exit) before the
    /// session is declared over. Default 1 s.
    pub exit_grace: Duration,
    /// The shutdown sequence's waits.
    pub shutdown: ShutdownConfig,
    /// Spawn the server as the leader of a new process group and signal the
    /// whole group, so its own children go too. Default `true`.
    pub process_group: bool,
    /// The most bytes of one frame this host sends (its JSON, `\n`
    /// excluded): the server's transport limit, if the host knows it. A
    /// request, notification or response over it is refused before anything
    /// is written, with [`RequestError::Encode`]`(`[`EncodeError::TooLarge`]`)`,
    /// and the session goes on; sent anyway, the server would discard it and
    /// the request would wait out its timeout (or, for some servers, the
    /// server would exit). Default `usize::MAX`: no check.
    pub max_send: usize,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            reader: ReaderConfig::default(),
            inbound_capacity: DEFAULT_INBOUND_CAPACITY,
            request_timeout: Duration::from_secs(60),
            write_timeout: Duration::from_secs(10),
            stderr_tail: 64 * 1024,
            stderr_log: StderrLog::Debug,
            exit_grace: Duration::from_secs(1),
            shutdown: ShutdownConfig::default(),
            process_group: true,
            max_send: usize::MAX,
        }
    }
}

setters!(SessionConfig {
    reader: ReaderConfig => with_reader,
    inbound_capacity: usize => with_inbound_capacity,
    request_timeout: Duration => with_request_timeout,
    write_timeout: Duration => with_write_timeout,
    stderr_tail: usize => with_stderr_tail,
    stderr_log: StderrLog => with_stderr_log,
    exit_grace: Duration => with_exit_grace,
    shutdown: ShutdownConfig => with_shutdown,
    process_group: bool => with_process_group,
    max_send: usize => with_max_send,
});

/// Why a session ended.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum CloseReason {
    /// The server exited on its own.
    Exited,
    /// The server closed its stdout but did not exit within the grace period.
    StdoutClosed,
    /// A frame passed the transport limit under
    /// [`OversizePolicy::Fail`](mcp_framer::OversizePolicy::Fail); the server was
    /// killed. Start a new session.
    Oversize(FrameError),
    /// A message did not fit in the inbound queue (see
    /// [`Overload`](super::Overload)) under
    /// [`OverloadPolicy::EndSession`](super::OverloadPolicy::EndSession); the
    /// server was killed.
    Overloaded,
    /// Reading the server's stdout failed; the server was killed.
    ReadFailed(Arc<io::Error>),
    /// The server stopped reading its stdin: a frame could not be written
    /// within [`SessionConfig::write_timeout`]. Every pending request failed
    /// at once and the server was stopped as [`Session::shutdown`] does
    /// (stdin closed, SIGTERM, SIGKILL, per [`SessionConfig::shutdown`]).
    StdinStalled(WriteError),
    /// [`Session::shutdown`] was called.
    Shutdown,
}

impl fmt::Display for CloseReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CloseReason::Exited => f.write_str("the server exited"),
            CloseReason::StdoutClosed => f.write_str("the server closed its stdout"),
            CloseReason::Oversize(e) => write!(f, "session ended on purpose: {e}; the server was killed"),
            CloseReason::Overloaded => {
                f.write_str("session ended on purpose: the application did not take messages; the server was killed")
            }
            CloseReason::ReadFailed(e) => write!(f, "reading the server's stdout failed ({e}); the server was killed"),
            CloseReason::StdinStalled(e) => {
                write!(
                    f,
                    "session ended on purpose: the server stopped reading its stdin ({e}); the server was stopped"
                )
            }
            CloseReason::Shutdown => f.write_str("the session was shut down"),
        }
    }
}

/// How a session ended: the reason, the exit status and the end of stderr.
/// Every request pending at that moment, and every later one, fails with it.
#[derive(Debug)]
#[non_exhaustive]
pub struct Closed {
    reason: CloseReason,
    exit_status: Option<ExitStatus>,
    stderr_tail: String,
}

/// The most stderr quoted by `Closed`'s `Display`.
const QUOTED_STDERR: usize = 1024;

impl Closed {
    pub(crate) fn new(reason: CloseReason, exit_status: Option<ExitStatus>, stderr_tail: String) -> Closed {
        Closed { reason, exit_status, stderr_tail }
    }

    /// Why the session ended.
    pub fn reason(&self) -> &CloseReason {
        &self.reason
    }

    /// The server's exit status, if it had exited.
    pub fn exit_status(&self) -> Option<ExitStatus> {
        self.exit_status
    }

    /// The end of the server's stderr (at most
    /// [`SessionConfig::stderr_tail`] bytes, after a marker line saying how
    /// many bytes came before them if any were dropped).
    pub fn stderr_tail(&self) -> &str {
        &self.stderr_tail
    }
}

impl fmt::Display for Closed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.reason)?;
        match self.exit_status {
            Some(status) => write!(f, "; server process {status}")?,
            None => f.write_str("; server process still running")?,
        }
        let tail = self.stderr_tail.trim_end();
        if tail.is_empty() {
            return f.write_str("; stderr was empty");
        }
        let quoted = Preview::new(tail.as_bytes(), Keep::Tail(QUOTED_STDERR));
        write!(f, "; stderr tail:\n{quoted}")
    }
}

/// Why a request failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum RequestError {
    /// The server answered with a JSON-RPC error.
    Rpc {
        /// The error code.
        code: i64,
        /// The error message.
        message: String,
        /// The whole error response (its payload is the error object, `data`
        /// included), boxed to keep the error small.
        response: Box<Received>,
    },
    /// No response within the timeout, counted from when the request was
    /// written. `notifications/cancelled` was sent (`cancellation_sent`),
    /// except for `initialize`, which is never cancelled; a late response
    /// will be drained, counted and ignored.
    TimedOut {
        /// The request's method.
        method: Box<str>,
        /// The timeout.
        after: Duration,
        /// Whether `notifications/cancelled` was queued.
        cancellation_sent: bool,
        /// Oversize frames skipped while it waited whose id could not be
        /// recovered: one of them may have been its response.
        oversize_skipped: u64,
    },
    /// Its response passed the transport limit
    /// ([`Config::max_frame`](mcp_framer::Config::max_frame)) and was
    /// discarded; its id was recovered from the frame's head or tail, so the
    /// request failed at once. No cancellation is sent: it was answered.
    Oversize {
        /// The request's method.
        method: Box<str>,
        /// The response frame's exact length in bytes.
        len: u64,
        /// The transport limit in bytes.
        max: u64,
    },
    /// [`Session::cancel`] cancelled it.
    Cancelled {
        /// The reason given.
        reason: String,
    },
    /// The session ended before the response came (the error names the exit
    /// status and quotes the stderr tail).
    Closed(Arc<Closed>),
    /// The request could not be written to the server's stdin.
    Write(WriteError),
    /// The message could not be encoded (its params or result did not
    /// serialize), or its frame is over [`SessionConfig::max_send`]
    /// ([`EncodeError::TooLarge`]). Nothing was written.
    Encode(EncodeError),
}

impl RequestError {
    /// The error for an error response.
    pub(crate) fn from_error_response(response: Received) -> RequestError {
        let (code, message) = match response.deserialize_payload::<ErrorObject>() {
            Ok(error) => (error.code, error.message),
            Err(e) => {
                let payload = Preview::new(response.payload().unwrap_or("").as_bytes(), Keep::Head(120));
                (INTERNAL_ERROR, format!("malformed error object ({e}): {payload}"))
            }
        };
        RequestError::Rpc { code, message, response: Box::new(response) }
    }
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestError::Rpc { code, message, .. } => write!(f, "the server answered with error {code}: {message}"),
            RequestError::TimedOut { method, after, cancellation_sent, oversize_skipped } => {
                write!(f, "{method} got no response within {after:?}")?;
                if *cancellation_sent {
                    f.write_str("; cancellation sent")?;
                }
                match oversize_skipped {
                    0 => Ok(()),
                    n => write!(
                        f,
                        "; {n} oversize frame(s) were skipped while it waited (their ids could not be recovered): \
                         one may have been its response"
                    ),
                }
            }
            RequestError::Oversize { method, len, max } => {
                write!(
                    f,
                    "the response to {method} was {len} bytes, over the transport limit of {max} bytes; discarded"
                )
            }
            RequestError::Cancelled { reason } => write!(f, "cancelled: {reason}"),
            RequestError::Closed(closed) => write!(f, "{closed}"),
            RequestError::Write(e) => write!(f, "{e}"),
            RequestError::Encode(e) => write!(f, "the message could not be encoded: {e}"),
        }
    }
}

impl std::error::Error for RequestError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RequestError::Write(e) => Some(e),
            RequestError::Encode(e) => Some(e),
            _ => None,
        }
    }
}

/// What the session shares with its pending requests.
#[derive(Debug)]
struct Shared {
    pending: Arc<Pending>,
    writer: Writer,
    metrics: Arc<Metrics>,
}

impl Shared {
    /// Stops waiting for `id` and, unless it is `initialize`, queues
    /// `notifications/cancelled` without waiting. Returns whether it was
    /// queued.
    fn give_up(&self, id: i64, reason: &str) -> bool {
        let Some(waiter) = self.pending.abandon(id) else {
            return false;
        };
        if &*waiter.method == INITIALIZE {
            return false;
        }
        let queued = self.writer.try_write(outgoing::cancelled(&Id::Number(id), reason));
        if queued {
            bump(&self.metrics.cancellations_sent);
        } else {
            tracing::warn!("could not queue the cancellation of request {id}: the writer is gone or full");
        }
        queued
    }

    /// Request `id`'s deadline passed: fails it with
    /// [`RequestError::TimedOut`] and sends the cancellation (not for
    /// `initialize`), if it is still waiting.
    fn expire(&self, id: i64, after: Duration) {
        let Some(waiter) = self.pending.abandon(id) else { return };
        let cancellation_sent = &*waiter.method != INITIALIZE && {
            let reason = format!("timed out after {after:?}");
            let queued = self.writer.try_write(outgoing::cancelled(&Id::Number(id), &reason));
            if queued {
                bump(&self.metrics.cancellations_sent);
            }
            queued
        };
        bump(&self.metrics.timeouts);
        let oversize_skipped = self.pending.oversize_since(waiter.oversize_mark);
        let error =
            RequestError::TimedOut { method: waiter.method.clone(), after, cancellation_sent, oversize_skipped };
        let _ = waiter.reply.send(Err(error));
    }
}

/// Arms request `id`'s deadline: `after` from `sent`. The timer holds the
/// session weakly, and the pending table stops it once the request is no
/// longer waiting.
fn arm(shared: &Arc<Shared>, id: i64, sent: Instant, after: Duration) {
    let weak = Arc::downgrade(shared);
    let timer = tokio::spawn(async move {
        tokio::time::sleep_until(sent + after).await;
        if let Some(shared) = weak.upgrade() {
            shared.expire(id, after);
        }
    });
    shared.pending.arm(id, timer.abort_handle());
}

/// A request that was written and waits for its response. Get the outcome
/// with [`response`](PendingRequest::response). Its deadline runs from when
/// it was written, whether or not `response` is awaited: at the deadline the
/// request fails, `notifications/cancelled` is sent (except for
/// `initialize`) and its pending entry is freed. Dropping it before the
/// outcome gives up on the request and sends `notifications/cancelled` too.
#[derive(Debug)]
#[must_use = "dropping a PendingRequest cancels the request"]
pub struct PendingRequest {
    id: i64,
    outcome: oneshot::Receiver<Result<Received, RequestError>>,
    /// When it was written: its deadline runs from here.
    sent: Instant,
    shared: Arc<Shared>,
    finished: bool,
}

impl PendingRequest {
    /// The request's id (for [`Session::cancel`]).
    pub fn id(&self) -> i64 {
        self.id
    }

    /// Replaces the session's request timeout for this request. The new
    /// deadline still runs from when the request was written (a deadline
    /// already past fails it at once).
    pub fn with_timeout(self, timeout: Duration) -> PendingRequest {
        arm(&self.shared, self.id, self.sent, timeout);
        self
    }

    /// Waits for the outcome: the response, or the failure at the deadline
    /// (the request was then given up and `notifications/cancelled` sent
    /// with the reason "timed out after …", never for `initialize`), or the
    /// end of the session.
    pub async fn response(mut self) -> Result<Received, RequestError> {
        let outcome = (&mut self.outcome).await;
        self.finished = true;
        match outcome {
            Ok(outcome) => outcome,
            Err(_) => Err(RequestError::Closed(
                self.shared
                    .pending
                    .closed()
                    .unwrap_or_else(|| Arc::new(Closed::new(CloseReason::Shutdown, None, String::new()))),
            )),
        }
    }
}

impl Drop for PendingRequest {
    fn drop(&mut self) {
        if !self.finished {
            self.shared.give_up(self.id, "the requester went away");
        }
    }
}

/// How the child was stopped by [`Session::shutdown`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ShutdownStage {
    /// It had exited before shutdown began.
    AlreadyExited,
    /// It exited after its stdin was closed.
    StdinClosed,
    /// It exited after SIGTERM.
    Terminated,
    /// It exited after SIGKILL.
    Killed,
    /// It had not been reaped after SIGKILL and the last wait.
    StillRunning,
}

/// What [`Session::shutdown`] observed.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// The exit status, if the child was reaped.
    pub exit_status: Option<ExitStatus>,
    /// Which step of the sequence it took.
    pub stage: ShutdownStage,
    /// The final metrics (also logged at `DEBUG`).
    pub metrics: MetricsSnapshot,
    /// The end of stderr.
    pub stderr_tail: String,
}

/// One MCP server process and the client side of its stdio session.
///
/// [`Session::spawn`] starts the command with piped stdin, stdout and stderr
/// and four tasks: the [`Reader`] on stdout (it never stops draining), the
/// stderr drain, the writer on stdin (one whole frame at a time, each within
/// [`SessionConfig::write_timeout`]), and a supervisor that reaps the child.
/// Server requests and notifications arrive on the returned queue; responses
/// go straight to their request.
///
/// * Requests get ids 1, 2, 3... and wait at most
///   [`SessionConfig::request_timeout`]; a timeout sends
///   `notifications/cancelled` with the `requestId` and a reason (never for
///   `initialize`), and so does dropping a [`PendingRequest`] or calling
///   [`Session::cancel`]. Late responses are drained, counted and ignored.
/// * When the child exits, every pending request fails with
///   [`RequestError::Closed`], whose message names the exit status and
///   quotes the stderr tail.
/// * [`Session::shutdown`] closes stdin, waits, sends SIGTERM, waits, sends
///   SIGKILL. Dropping the session kills the child.
///
/// Needs a tokio runtime with I/O and time enabled (unix only).
///
/// ```
/// use mcp_framer_stdio::host::{Session, SessionConfig, ShutdownStage};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // A tiny "server": answers the first request, then reads stdin until EOF.
/// let mut command = tokio::process::Command::new("sh");
/// command.args(["-c", r#"read line; echo '{"jsonrpc":"2.0","id":1,"result":{"ok":true}}'; cat >/dev/null"#]);
/// let (session, _inbound) = Session::spawn(command, SessionConfig::default())?;
///
/// let response = session.request("ping", &()).await?;
/// assert_eq!(response.payload(), Some(r#"{"ok":true}"#));
///
/// let report = session.shutdown().await;
/// assert_eq!(report.stage, ShutdownStage::StdinClosed);
/// assert!(report.exit_status.is_some_and(|status| status.success()));
/// assert_eq!(report.metrics.responses, 1);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Session {
    shared: Arc<Shared>,
    config: SessionConfig,
    next_id: AtomicI64,
    tail: Arc<StderrTail>,
    reason: Arc<Reason>,
    signals: mpsc::Sender<Signal>,
    exit: watch::Receiver<Option<ExitStatus>>,
    closed: watch::Receiver<Option<Arc<Closed>>>,
    pid: Option<u32>,
    /// The reader, stderr and writer tasks, stopped by `shutdown`.
    tasks: [AbortHandle; 3],
}

impl Session {
    /// Spawns `command` as an MCP server on stdio. Returns the session and
    /// the queue of server requests, notifications and reports (see
    /// [`Inbound`](super::Inbound)). Consume the queue, or drop it: a host that drops it
    /// takes no server requests (each is answered -32601, method not found,
    /// saying so) and no notifications; both are counted in
    /// [`unconsumed`](MetricsSnapshot::unconsumed), never as overload.
    pub fn spawn(mut command: Command, config: SessionConfig) -> io::Result<(Session, InboundQueue)> {
        command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
        if config.process_group {
            command.process_group(0);
        }
        let mut child = command.spawn()?;
        let piped = || io::Error::other("the child's stdio was not piped");
        let stdin = child.stdin.take().ok_or_else(piped)?;
        let stdout = child.stdout.take().ok_or_else(piped)?;
        let stderr = child.stderr.take().ok_or_else(piped)?;
        let pid = child.id();

        let metrics = Arc::new(Metrics::default());
        let pending = Arc::new(Pending::default());
        let tail = Arc::new(StderrTail::new(config.stderr_tail));
        let (stalled_tx, stalled) = oneshot::channel();
        let (writer, writer_task) =
            Writer::spawn_watched(stdin, config.write_timeout, Arc::clone(&metrics), Some(stalled_tx));
        let (inbound, queue) = inbound_channel(config.inbound_capacity);
        let reader = Reader::with_metrics(config.reader, inbound, Arc::clone(&metrics))
            .for_session(Arc::clone(&pending), writer.clone())
            .spawn(stdout);
        let stderr = tokio::spawn(drain_stderr(stderr, Arc::clone(&tail), Arc::clone(&metrics), config.stderr_log));
        let (signals, signals_rx) = mpsc::channel(8);
        let (exit_tx, exit) = watch::channel(None);
        let (closed_tx, closed) = watch::channel(None);
        let reason = Arc::new(Reason::default());
        let tasks = [reader.abort_handle(), stderr.abort_handle(), writer_task.abort_handle()];
        tokio::spawn(
            Supervisor {
                child,
                process_group: config.process_group,
                signals: signals_rx,
                reader,
                stderr,
                pending: Arc::clone(&pending),
                tail: Arc::clone(&tail),
                metrics: Arc::clone(&metrics),
                reason: Arc::clone(&reason),
                exit: exit_tx,
                closed: closed_tx,
                grace: config.exit_grace,
                session_gone: false,
                stalled,
                writer: writer.clone(),
                steps: config.shutdown,
            }
            .run(),
        );
        let shared = Arc::new(Shared { pending, writer, metrics });
        let session =
            Session { shared, config, next_id: AtomicI64::new(1), tail, reason, signals, exit, closed, pid, tasks };
        Ok((session, queue))
    }

    /// Sends a request and waits for its response (at most
    /// [`SessionConfig::request_timeout`]). `params` is anything
    /// serializable; a value that serializes to `null` (`&()`, `&None`)
    /// means no params. An error response becomes [`RequestError::Rpc`].
    pub async fn request<P: Serialize + ?Sized>(&self, method: &str, params: &P) -> Result<Received, RequestError> {
        self.start(method, params).await?.response().await
    }

    /// Sends a request and returns as soon as it is written, with a handle
    /// to await, time-bound or cancel it.
    pub async fn start<P: Serialize + ?Sized>(&self, method: &str, params: &P) -> Result<PendingRequest, RequestError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let frame = self.encoder().request(&Id::Number(id), method, params).map_err(RequestError::Encode)?;
        let outcome = self.shared.pending.insert(id, method).map_err(RequestError::Closed)?;
        let mut request =
            PendingRequest { id, outcome, sent: Instant::now(), shared: Arc::clone(&self.shared), finished: false };
        if let Err(e) = self.shared.writer.write(frame).await {
            // Never (wholly) sent: nothing to cancel.
            request.finished = true;
            self.shared.pending.abandon(id);
            return Err(RequestError::Write(e));
        }
        request.sent = Instant::now();
        arm(&self.shared, id, request.sent, self.config.request_timeout);
        bump(&self.shared.metrics.requests_sent);
        Ok(request)
    }

    /// The encoder of what the application sends, with
    /// [`SessionConfig::max_send`] as its limit.
    fn encoder(&self) -> Encoder {
        Encoder::new(self.config.max_send)
    }

    /// Sends a notification.
    pub async fn notify<P: Serialize + ?Sized>(&self, method: &str, params: &P) -> Result<(), RequestError> {
        let frame = self.encoder().notification(method, params).map_err(RequestError::Encode)?;
        self.shared.writer.write(frame).await.map_err(RequestError::Write)
    }

    /// Answers a server request with a result.
    pub async fn respond<R: Serialize + ?Sized>(&self, id: &OwnedId, result: &R) -> Result<(), RequestError> {
        let frame = self.encoder().response(id, result).map_err(RequestError::Encode)?;
        self.shared.writer.write(frame).await.map_err(RequestError::Write)
    }

    /// Answers a server request with a JSON-RPC error.
    pub async fn respond_error(&self, id: &OwnedId, code: i64, message: &str) -> Result<(), RequestError> {
        self.shared.writer.write(outgoing::error_response(id, code, message)).await.map_err(RequestError::Write)
    }

    /// Cancels request `id`: its [`PendingRequest`] fails with
    /// [`RequestError::Cancelled`] and `notifications/cancelled` is written
    /// with `reason`. Returns `false`, and does nothing, if the request is
    /// not pending or is `initialize` (which MUST NOT be cancelled).
    pub async fn cancel(&self, id: i64, reason: &str) -> bool {
        if self.shared.pending.method(id).is_none_or(|method| &*method == INITIALIZE) {
            return false;
        }
        let Some(waiter) = self.shared.pending.abandon(id) else {
            return false;
        };
        let _ = waiter.reply.send(Err(RequestError::Cancelled { reason: reason.to_owned() }));
        let written = self.shared.writer.write(outgoing::cancelled(&Id::Number(id), reason)).await;
        if written.is_ok() {
            bump(&self.shared.metrics.cancellations_sent);
        }
        true
    }

    /// The metrics so far.
    pub fn metrics(&self) -> MetricsSnapshot {
        self.shared.metrics.snapshot()
    }

    /// The end of the server's stderr so far.
    pub fn stderr_tail(&self) -> String {
        self.tail.text()
    }

    /// The server's process id (also its process group id when
    /// [`SessionConfig::process_group`] is on).
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// How the session ended, if it has.
    pub fn closed(&self) -> Option<Arc<Closed>> {
        self.closed.borrow().clone()
    }

    /// Waits until the session ends (the child exited, or the session was
    /// ended on purpose) and says how.
    pub async fn wait_closed(&self) -> Arc<Closed> {
        let mut closed = self.closed.clone();
        let ended = closed.wait_for(Option::is_some).await.map(|closed| closed.clone());
        match ended {
            Ok(Some(closed)) => closed,
            _ => Arc::new(Closed::new(CloseReason::Shutdown, None, self.tail.text())),
        }
    }

    /// Ends the session as the MCP spec says: close the server's stdin, wait,
    /// SIGTERM, wait, SIGKILL, wait (each wait per [`ShutdownConfig`]).
    /// Pending requests fail with [`CloseReason::Shutdown`]. The final
    /// metrics are logged at `DEBUG` and returned.
    pub async fn shutdown(self) -> ShutdownReport {
        self.reason.set(CloseReason::Shutdown);
        let stage = stop_child(&self.shared.writer, &self.exit, &self.signals, self.config.shutdown).await;
        // Let the supervisor close the pending table with the final status.
        let _ = tokio::time::timeout(self.config.exit_grace * 2, self.wait_closed()).await;
        // Whatever still holds stdout or stderr open (a grandchild) is no
        // longer this session's business.
        for task in &self.tasks {
            task.abort();
        }
        let report = ShutdownReport {
            exit_status: *self.exit.borrow(),
            stage,
            metrics: self.metrics(),
            stderr_tail: self.tail.text(),
        };
        tracing::debug!(metrics = ?report.metrics, stage = ?report.stage, "MCP server session shut down");
        report
    }
}
