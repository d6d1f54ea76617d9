//! The upper layer of the host: a [`Connection`] plus the request table.
//! Requests and their responses, timeouts and cancellation, answers to
//! server requests.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use serde::Serialize;
use tokio::process::Command;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::config::SessionConfig;
use super::connection::Connection;
use super::error::{CloseReason, Closed, RequestError};
use super::inbound::{InboundQueue, Received};
use super::metrics::{Metrics, MetricsSnapshot};
use super::outgoing;
use super::pending::Pending;
use super::supervisor::ShutdownReport;
use super::writer::Writer;
use crate::counter::bump;
use mcp_framer_jsonrpc::{Encoder, Id, OwnedId};

/// The method that is never cancelled (MCP: "the `initialize` request MUST
/// NOT be cancelled by clients").
const INITIALIZE: &str = "initialize";

/// What the session shares with its pending requests.
#[derive(Debug)]
struct Shared {
    pending: Arc<Pending>,
    writer: Writer,
    metrics: Arc<Metrics>,
    request_timeout: Duration,
}

impl Shared {
    /// Queues `notifications/cancelled` for request `id` without waiting and
    /// counts it; returns whether it was queued.
    fn queue_cancellation(&self, id: i64, reason: &str) -> bool {
        let queued = self.writer.try_write(outgoing::cancelled(&Id::Number(id), reason));
        if queued {
            bump(&self.metrics.cancellations_sent);
        } else {
            tracing::warn!("could not queue the cancellation of request {id}: the writer is gone or full");
        }
        queued
    }

    /// Stops waiting for `id` and, unless it is `initialize`, queues
    /// `notifications/cancelled` without waiting. Returns whether it was
    /// queued.
    fn give_up(&self, id: i64, reason: &str) -> bool {
        let Some(waiter) = self.pending.abandon(id) else {
            return false;
        };
        &*waiter.method != INITIALIZE && self.queue_cancellation(id, reason)
    }

    /// Request `id`'s deadline passed: fails it with
    /// [`RequestError::TimedOut`] and sends the cancellation (not for
    /// `initialize`), if it is still waiting. The counters are updated
    /// before the requester wakes.
    fn expire(&self, id: i64, after: Duration) {
        let Some(waiter) = self.pending.abandon(id) else { return };
        let cancellation_sent =
            &*waiter.method != INITIALIZE && self.queue_cancellation(id, &format!("timed out after {after:?}"));
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

/// One MCP server process and the client side of its stdio session: a
/// [`Connection`] and the request table.
///
/// [`Session::spawn`] starts the command as [`Connection::spawn`] does (the
/// reader that never stops draining, the bounded queue, the stderr drain,
/// the writer with its stall detection, the supervisor); the reader hands
/// responses straight to the request waiting for them. Server requests and
/// notifications arrive on the returned queue.
///
/// * Requests get ids 1, 2, 3... and wait at most
///   [`SessionConfig::request_timeout`]; a timeout sends
///   `notifications/cancelled` with the `requestId` and a reason (never for
///   `initialize`), and so does dropping a [`PendingRequest`] or calling
///   [`Session::cancel`]. Late responses are drained, counted and ignored.
/// * An oversize response whose id was recovered fails its request at once
///   with [`RequestError::Oversize`].
/// * When the child exits, every pending request fails with
///   [`RequestError::Closed`], whose message names the exit status and
///   quotes the stderr tail.
/// * **Whoever is woken sees the state that woke them.** A response, an
///   oversize failure, a timeout, a cancellation and the end of the session
///   each wake their requester only after the metrics count what caused it
///   (and, for the end, after [`Session::closed`] says so).
/// * [`Session::shutdown`] closes stdin, waits, sends SIGTERM, waits, sends
///   SIGKILL (on Windows: closes stdin, waits, terminates the job). Dropping
///   the session kills the child's tree.
///
/// Needs a tokio runtime with I/O and time enabled.
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
    connection: Connection,
    shared: Arc<Shared>,
    next_id: AtomicI64,
}

impl Session {
    /// Spawns `command` as an MCP server on stdio. Returns the session and
    /// the queue of server requests, notifications and reports (see
    /// [`Inbound`](super::Inbound)). Consume the queue, or drop it: a host that drops it
    /// takes no server requests (each is answered -32601, method not found,
    /// saying so) and no notifications; both are counted in
    /// [`unconsumed`](MetricsSnapshot::unconsumed), never as overload.
    pub fn spawn(command: Command, config: SessionConfig) -> io::Result<(Session, InboundQueue)> {
        let pending = Arc::new(Pending::default());
        let (connection, queue, _) = Connection::start(command, config, Some(Arc::clone(&pending) as _), None)?;
        let shared = Arc::new(Shared {
            pending,
            writer: connection.writer().clone(),
            metrics: Arc::clone(connection.counters()),
            request_timeout: config.request_timeout,
        });
        Ok((Session { connection, shared, next_id: AtomicI64::new(1) }, queue))
    }

    /// The connection underneath: the process, its stdio and its metrics.
    pub fn connection(&self) -> &Connection {
        &self.connection
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
        bump(&self.shared.metrics.requests_sent);
        arm(&self.shared, id, request.sent, self.shared.request_timeout);
        Ok(request)
    }

    /// The encoder of what the application sends, with
    /// [`SessionConfig::max_send`] as its limit.
    fn encoder(&self) -> Encoder {
        self.connection.encoder()
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

    /// Cancels request `id`: `notifications/cancelled` is queued with
    /// `reason` and counted, then its [`PendingRequest`] fails with
    /// [`RequestError::Cancelled`]. Returns `false`, and does nothing, if the
    /// request is not pending or is `initialize` (which MUST NOT be
    /// cancelled).
    pub async fn cancel(&self, id: i64, reason: &str) -> bool {
        if self.shared.pending.method(id).is_none_or(|method| &*method == INITIALIZE) {
            return false;
        }
        let Some(waiter) = self.shared.pending.abandon(id) else {
            return false;
        };
        if !self.shared.queue_cancellation(id, reason) {
            // The writer's queue is full: wait for room rather than not say it.
            let written = self.shared.writer.write(outgoing::cancelled(&Id::Number(id), reason)).await;
            if written.is_ok() {
                bump(&self.shared.metrics.cancellations_sent);
            }
        }
        let _ = waiter.reply.send(Err(RequestError::Cancelled { reason: reason.to_owned() }));
        true
    }

    /// The metrics so far.
    pub fn metrics(&self) -> MetricsSnapshot {
        self.connection.metrics()
    }

    /// The end of the server's stderr so far.
    pub fn stderr_tail(&self) -> String {
        self.connection.stderr_tail()
    }

    /// The server's process id (also its process group id on unix when
    /// [`SessionConfig::process_tree`] is on).
    pub fn pid(&self) -> Option<u32> {
        self.connection.pid()
    }

    /// How the session ended, if it has.
    pub fn closed(&self) -> Option<Arc<Closed>> {
        self.connection.closed()
    }

    /// Waits until the session ends (the child exited, or the session was
    /// ended on purpose) and says how.
    pub async fn wait_closed(&self) -> Arc<Closed> {
        self.connection.wait_closed().await
    }

    /// Ends the session as the MCP spec says: close the server's stdin, wait,
    /// SIGTERM, wait, SIGKILL, wait (each wait per
    /// [`ShutdownConfig`](super::ShutdownConfig); on Windows: close stdin,
    /// wait, terminate the job, wait). Pending requests fail with
    /// [`CloseReason::Shutdown`]. The final metrics are logged at `DEBUG` and
    /// returned.
    pub async fn shutdown(self) -> ShutdownReport {
        self.connection.shutdown().await
    }
}
