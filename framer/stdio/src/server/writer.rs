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
//!   limit.
//! * The queue is bounded in bytes (the crate's byte bound: a frame larger
//!   than the bound is queued alone). Handlers wait for room; the stdin loop
//!   never waits (it must keep reading cancellations), so its replies are
//!   dropped and counted when the queue is full.
//! * When stdout fails (the host went away) the writer stops, wakes every
//!   waiter, and frames queued later are dropped.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use serde::Serialize;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use super::report::Counters;
use super::tool::RpcError;
use crate::bound::{ByteBound, Held};
use crate::counter::{add, bump};
use mcp_framer_jsonrpc::{Encoder, OwnedId};

/// A frame for an error response (`id: null` when `id` is `None`). An error
/// whose frame is over `max` (a handler's huge message or `data`) is replaced
/// by a short internal error saying so, so the request still gets its answer.
pub(crate) fn encode_error(id: Option<&OwnedId>, error: &RpcError, max: usize) -> Vec<u8> {
    Encoder::new(max).error_response(id, error).unwrap_or_else(|err| {
        tracing::error!(id = ?id, code = error.code, %err, "error response too large; sending a short one");
        let short = RpcError::internal(format!("error {} not sent: {err}", error.code));
        Encoder::unlimited().error_response(id, &short).expect("an error object without data always serializes")
    })
}

/// What the writer is sent.
pub(crate) enum Msg {
    Frame(Outgoing),
    /// Flush and stop.
    Close,
}

/// A whole frame on its way to stdout. Dropping it (written or not) releases
/// its room in the queue and runs its `done` hook.
pub(crate) struct Outgoing {
    bytes: Vec<u8>,
    _room: Option<Held>,
    done: Option<Box<dyn FnOnce() + Send>>,
    pending: Arc<AtomicU64>,
}

impl Drop for Outgoing {
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
    room: ByteBound,
    max_frame: usize,
    pending: Arc<AtomicU64>,
    counters: Arc<Counters>,
}

/// The writer's end of an [`Outbox`].
pub(crate) struct Inbox {
    rx: mpsc::UnboundedReceiver<Msg>,
    room: ByteBound,
}

impl Outbox {
    /// An outbox whose queue holds at most `room_bytes` bytes of frames, each
    /// at most `max_frame` bytes of JSON.
    pub(crate) fn new(room_bytes: usize, max_frame: usize, counters: Arc<Counters>) -> (Outbox, Inbox) {
        let room = ByteBound::new(room_bytes);
        let (tx, rx) = mpsc::unbounded_channel();
        let pending = Arc::new(AtomicU64::new(0));
        let outbox = Outbox { tx, room: room.clone(), max_frame, pending, counters };
        (outbox, Inbox { rx, room })
    }

    pub(crate) fn max_frame(&self) -> usize {
        self.max_frame
    }

    /// Frames queued and not yet written.
    pub(crate) fn pending(&self) -> u64 {
        self.pending.load(Relaxed)
    }

    /// Waits for room for a frame of `len` bytes; `None` once stdout is gone.
    /// Cancel-safe.
    pub(crate) async fn reserve(&self, len: usize) -> Option<Held> {
        self.room.acquire(len).await
    }

    /// Queues a frame in reserved room. `done` runs once the frame is written
    /// (or dropped because stdout is gone).
    pub(crate) fn push(&self, bytes: Vec<u8>, room: Option<Held>, done: Option<Box<dyn FnOnce() + Send>>) {
        self.pending.fetch_add(1, Relaxed);
        let frame = Outgoing { bytes, _room: room, done, pending: Arc::clone(&self.pending) };
        // A send error means the writer is gone; the frame is dropped.
        let _ = self.tx.send(Msg::Frame(frame));
    }

    /// Queues a reply from the stdin loop without waiting: dropped and counted
    /// when the queue is full.
    pub(crate) fn try_send(&self, bytes: Vec<u8>) {
        match self.room.try_acquire(bytes.len()) {
            Some(room) => self.push(bytes, Some(room), None),
            None => {
                bump(&self.counters.replies_dropped);
                tracing::warn!(bytes = bytes.len(), "stdout queue full (host not draining?): reply dropped");
            }
        }
    }

    /// Serializes and queues a notification, waiting for room.
    pub(crate) async fn notify(&self, method: &str, params: &impl Serialize) -> bool {
        let bytes = match Encoder::new(self.max_frame).notification(method, params) {
            Ok(bytes) => bytes,
            Err(err) => {
                tracing::warn!(method, %err, "notification not sent");
                return false;
            }
        };
        let Some(room) = self.reserve(bytes.len()).await else { return false };
        self.push(bytes, Some(room), None);
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
        while let Some(msg) = inbox.rx.recv().await {
            let Msg::Frame(frame) = msg else { break };
            out.write_all(&frame.bytes).await?;
            bump(&counters.frames_out);
            add(&counters.bytes_out, frame.bytes.len() as u64);
            drop(frame);
            if inbox.rx.is_empty() {
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
    inbox.room.close();
    inbox.rx.close();
    result
}
