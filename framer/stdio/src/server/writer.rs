//! The single writer that owns stdout, and the [`Outbox`] every other task
//! hands it frames through.
//!
//! # Contract
//!
//! * Only the writer task writes to the protocol output, and it writes
//!   **whole frames only**: one serialized JSON object followed by one `\n`.
//!   A frame is serialized completely before it is queued, so a handler that
//!   is cancelled or panics can never leave half a frame: it either queued a
//!   whole frame or nothing.
//! * Frames are written by [`mcp_framer_jsonrpc::Encoder`]: one line
//!   whatever a raw value holds (its newline rule), never over the response
//!   limit — error replies included ([`Outbox::error_frame`]). The
//!   [`Outbox`] holds that limit: whoever sends asks it for the encoder.
//! * Frames are written in the order they were queued. The queue is bounded
//!   in bytes by two budgets (the crate's byte bound; a frame larger than a
//!   budget is admitted alone):
//!   - **results**: what tool calls send (results, notifications). Their
//!     tasks wait for room, first come first served.
//!   - **control** (reserved): the replies of the stdin loop (`initialize`,
//!     `ping`, `tools/list`, every error reply). No handler ever takes from
//!     it, so a small reply never waits behind a large result. When it is
//!     full the stdin loop waits for room (and so stops reading stdin); no
//!     reply is ever dropped while stdout works.
//! * When stdout fails (the host went away) the writer stops, wakes every
//!   waiter, and frames queued later are dropped (and counted).

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use serde::Serialize;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use tokio_util::sync::CancellationToken;

use super::report::Counters;
use crate::bound::{ByteBound, Held};
use crate::counter::{add, bump};
use crate::preview::excerpt;
use mcp_framer_jsonrpc::{Encoder, ErrorObject, OwnedId};

/// A frame for an error response (`id: null` when `id` is `None`), never
/// over `max` bytes. An error whose frame is over `max` (a handler's huge
/// message or `data`) is replaced by a short internal error saying so, so the
/// request still gets its answer; if even that is over `max` (the id itself
/// is huge), the short error goes with a `null` id and names an excerpt of
/// the id in its message.
fn encode_error(id: Option<&OwnedId>, error: &ErrorObject, max: usize) -> Vec<u8> {
    let encoder = Encoder::new(max);
    encoder.error_response(id, error).unwrap_or_else(|err| {
        tracing::error!(id = ?id.map(|id| excerpt(&id.to_string()).into_owned()), code = error.code, %err,
            "error response too large; sending a short one");
        let short = ErrorObject::internal(format!("error {} not sent: {err}", error.code));
        encoder.error_response(id, &short).unwrap_or_else(|_| {
            let id = id.map(|id| id.to_string()).unwrap_or_default();
            let short =
                ErrorObject::internal(format!("error {} for request id {} not sent: {err}", error.code, excerpt(&id)));
            // A null id and a message of bounded length: over `max` only for
            // a limit below about 200 bytes, which no peer uses.
            Encoder::unlimited().error_response(None, &short).expect("an error object without data always serializes")
        })
    })
}

/// What the writer is sent.
pub(crate) enum Msg {
    Frame(QueuedFrame),
    /// Flush and stop.
    Close,
}

/// A whole frame on its way to stdout. Dropping it (written or not) releases
/// its room in the queue and runs its `done` hook.
pub(crate) struct QueuedFrame {
    pub(crate) bytes: Vec<u8>,
    /// The request a notification belongs to (a tool call's progress and
    /// messages): what a front that answers each request on its own stream
    /// routes it by. `None` for responses (their id says it) and replies.
    pub(crate) request: Option<OwnedId>,
    _room: Option<Held>,
    done: Option<Box<dyn FnOnce() + Send>>,
    pending: Arc<AtomicU64>,
}

impl Drop for QueuedFrame {
    fn drop(&mut self) {
        self.pending.fetch_sub(1, Relaxed);
        if let Some(done) = self.done.take() {
            done();
        }
    }
}

/// The handle every task queues frames through. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Outbox {
    tx: mpsc::UnboundedSender<Msg>,
    results: ByteBound,
    control: ByteBound,
    encoder: Encoder,
    pending: Arc<AtomicU64>,
    counters: Arc<Counters>,
    /// Cancelled when the writer stops (closed, or stdout failed).
    stopped: CancellationToken,
}

/// The writer's end of an [`Outbox`].
pub(crate) struct Inbox {
    rx: mpsc::UnboundedReceiver<Msg>,
    bounds: [ByteBound; 2],
    stopped: CancellationToken,
}

impl Inbox {
    /// The next frame to write; `None` at [`Msg::Close`] or once every
    /// [`Outbox`] is gone.
    pub(crate) async fn next(&mut self) -> Option<QueuedFrame> {
        match self.rx.recv().await? {
            Msg::Frame(frame) => Some(frame),
            Msg::Close => None,
        }
    }

    /// Whether no frame waits now.
    pub(crate) fn is_empty(&self) -> bool {
        self.rx.is_empty()
    }

    /// The writer has stopped: wakes every task waiting for room, refuses
    /// later frames (dropped and counted) and tells [`Outbox::stopped`].
    pub(crate) fn stop(&mut self) {
        for bound in &self.bounds {
            bound.close();
        }
        self.rx.close();
        self.stopped.cancel();
    }
}

impl Outbox {
    /// An outbox whose queue holds at most `results_bytes` bytes of frames
    /// from tool calls plus `control_bytes` bytes of replies from the stdin
    /// loop, each frame at most `max_send` bytes of JSON.
    pub(crate) fn new(
        results_bytes: usize,
        control_bytes: usize,
        max_send: usize,
        counters: Arc<Counters>,
    ) -> (Outbox, Inbox) {
        let (results, control) = (ByteBound::new(results_bytes), ByteBound::new(control_bytes));
        let (tx, rx) = mpsc::unbounded_channel();
        let pending = Arc::new(AtomicU64::new(0));
        let stopped = CancellationToken::new();
        let inbox = Inbox { rx, bounds: [results.clone(), control.clone()], stopped: stopped.clone() };
        let encoder = Encoder::new(max_send);
        (Outbox { tx, results, control, encoder, pending, counters, stopped }, inbox)
    }

    /// The encoder of every frame sent: its limit is the send limit.
    pub(crate) fn encoder(&self) -> Encoder {
        self.encoder
    }

    /// A frame for an error response (`id: null` when `id` is `None`),
    /// never over the send limit. An error whose frame is over it (a
    /// handler's huge message or `data`) is replaced by a short -32603
    /// saying so, so the request still gets its answer; if even that is over
    /// the limit (the id itself is huge), the short error goes with a `null`
    /// id and names an excerpt of the id in its message.
    pub(crate) fn error_frame(&self, id: Option<&OwnedId>, error: &ErrorObject) -> Vec<u8> {
        encode_error(id, error, self.encoder.max_frame())
    }

    /// A frame for the response to `id` with `result`, or, when that is over
    /// the send limit, the -32603 error frame saying so.
    pub(crate) fn response_frame(&self, id: &OwnedId, result: &impl Serialize) -> Vec<u8> {
        self.encoder.response(id, result).unwrap_or_else(|err| self.error_frame(Some(id), &ErrorObject::internal(err)))
    }

    /// Resolves once the writer has stopped: closed, or stdout failed.
    pub(crate) async fn stopped(&self) {
        self.stopped.cancelled().await
    }

    /// Frames queued and not yet written.
    pub(crate) fn pending(&self) -> u64 {
        self.pending.load(Relaxed)
    }

    /// Waits for room in the results budget for a frame of `len` bytes;
    /// `None` once stdout is gone. Cancel-safe.
    pub(crate) async fn reserve(&self, len: usize) -> Option<Held> {
        self.results.acquire(len).await
    }

    /// Room in the control budget for a reply of `len` bytes, if there is
    /// some now.
    pub(crate) fn try_reserve_control(&self, len: usize) -> Option<Held> {
        self.control.try_acquire(len)
    }

    /// The size of the control budget, in bytes.
    pub(crate) fn control_budget(&self) -> usize {
        self.control.max()
    }

    /// Waits for room in the control budget; `None` once stdout is gone.
    /// Cancel-safe.
    pub(crate) async fn reserve_control(&self, len: usize) -> Option<Held> {
        self.control.acquire(len).await
    }

    /// Queues a frame in reserved room (`None`: room accounted elsewhere, as
    /// for the bounded set of shutdown replies). `done` runs once the frame
    /// is written (or dropped because stdout is gone).
    pub(crate) fn push(&self, bytes: Vec<u8>, room: Option<Held>, done: Option<Box<dyn FnOnce() + Send>>) {
        self.push_for(None, bytes, room, done);
    }

    /// [`Outbox::push`] for a frame that belongs to request `request` (a
    /// tool call's notification): the tag travels with the frame.
    pub(crate) fn push_for(
        &self,
        request: Option<OwnedId>,
        bytes: Vec<u8>,
        room: Option<Held>,
        done: Option<Box<dyn FnOnce() + Send>>,
    ) {
        self.pending.fetch_add(1, Relaxed);
        let frame = QueuedFrame { bytes, request, _room: room, done, pending: Arc::clone(&self.pending) };
        if self.tx.send(Msg::Frame(frame)).is_err() {
            // The writer is gone; the frame is dropped.
            bump(&self.counters.replies_dropped);
        }
    }

    /// Counts a reply that could not be queued because stdout is gone.
    pub(crate) fn dropped(&self, bytes: usize) {
        bump(&self.counters.replies_dropped);
        tracing::warn!(bytes, "stdout is gone: reply dropped");
    }

    /// Serializes and queues a notification of request `request` (tagged
    /// with it, see [`QueuedFrame::request`]), waiting for room.
    pub(crate) async fn notify(&self, request: &OwnedId, method: &str, params: &impl Serialize) -> bool {
        let bytes = match self.encoder.notification(method, params) {
            Ok(bytes) => bytes,
            Err(err) => {
                tracing::warn!(method, %err, "notification not sent");
                return false;
            }
        };
        let Some(room) = self.reserve(bytes.len()).await else { return false };
        self.push_for(Some(request.clone()), bytes, Some(room), None);
        true
    }

    /// Tells the writer to flush what is queued and stop.
    pub(crate) fn close(&self) {
        let _ = self.tx.send(Msg::Close);
    }
}

/// The writer task: writes each queued frame whole, flushes whenever the
/// queue runs empty, stops on [`Msg::Close`] or on the first write error.
pub(crate) async fn run_writer<W: AsyncWrite + Unpin>(
    mut inbox: Inbox,
    mut out: W,
    counters: Arc<Counters>,
) -> io::Result<()> {
    let result = async {
        while let Some(frame) = inbox.next().await {
            out.write_all(&frame.bytes).await?;
            bump(&counters.frames_out);
            add(&counters.bytes_out, frame.bytes.len() as u64);
            drop(frame);
            if inbox.is_empty() {
                out.flush().await?;
            }
        }
        out.flush().await
    }
    .await;
    if let Err(err) = &result {
        tracing::error!(%err, "stdout write failed; no more frames can be sent");
    }
    // Wake tasks waiting for room and refuse later frames.
    inbox.stop();
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_frames_never_exceed_the_limit() {
        let max = 300;
        let huge = ErrorObject::internal("m".repeat(1000));
        let frame = encode_error(Some(&OwnedId::Number(7)), &huge, max);
        assert!(frame.len() - 1 <= max, "{}", String::from_utf8_lossy(&frame));
        assert!(frame.starts_with(br#"{"jsonrpc":"2.0","id":7,"error":{"code":-32603"#));
        // An id too large to echo: the answer goes with a null id and names
        // an excerpt of it.
        let id = OwnedId::from("i".repeat(400));
        let frame = encode_error(Some(&id), &ErrorObject::standard(-32601), max);
        let text = String::from_utf8(frame).unwrap();
        assert!(text.len() - 1 <= max, "{text}");
        assert!(text.starts_with(r#"{"jsonrpc":"2.0","id":null,"#), "{text}");
        assert!(text.contains("… (402 bytes)"), "{text}");
    }
}
