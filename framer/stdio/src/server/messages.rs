//! The dispatcher's message-level seam: [`Server::serve_messages`](super::Server::serve_messages)
//! runs the same route, dispatcher, budgets and shutdown as
//! [`Server::serve`](super::Server::serve), but takes whole messages from a
//! front ([`Inlet`]) instead of framing stdin, and hands whole frames to it
//! ([`Outlet`]) instead of writing stdout. A front that frames its own
//! transport (the experimental `stdio-v2` HTTP/2 front) sits here, so there
//! is one dispatcher for both transports and no second framing pass.
//!
//! # Contract
//!
//! * **Keys.** A request comes in under a *key* the front chose: an id
//!   that the dispatcher uses in its request table and writes in the
//!   response in place of the client's id, so that a client reusing an id
//!   (even right after a cancellation) can never meet the dispatcher's state
//!   for an earlier request. The front keeps the client's id and puts it
//!   back. Keys must be unique among the requests in flight; a key in flight
//!   is answered -32600 with a `null` id, as a duplicate id is on stdin.
//! * **What is held, and the push-back.** Messages waiting for the
//!   dispatcher hold at most `max_frame` bytes (the transport limit; one
//!   larger message waits alone): [`Inlet::request`] and
//!   [`Inlet::notification`] wait for room. Frames on their way out hold the
//!   dispatcher's two budgets ([`ServerConfig::writer_queue_bytes`](super::ServerConfig::writer_queue_bytes)
//!   for tool results and notifications, [`ServerConfig::control_queue_bytes`](super::ServerConfig::control_queue_bytes)
//!   for the protocol's own replies) **until the front drops each
//!   [`OutFrame`]**, not merely until it is taken: a front that must wait for
//!   its peer (an HTTP/2 window) holds the budget while it waits, and a full
//!   budget stops tool results and, when the reply budget is full, the
//!   reading of messages, exactly as a stdout that does not drain does.
//! * **Tags.** A tool call's notifications (progress, log messages, any
//!   [`Call::notify`](super::Call::notify)) carry the key of their request
//!   ([`OutFrame::request`]); responses carry it as their id.
//! * **The end.** [`Inlet::end`] (or dropping every [`Inlet`]) is the end of
//!   the input: the dispatcher finishes as at the end of stdin (in-flight
//!   calls get the shutdown grace). Dropping the [`Outlet`] is a failed
//!   stdout: waiters wake, later frames are dropped and counted, everything
//!   is cancelled at once.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::report::Counters;
use super::route::Router;
use super::stdin::{Ended, Route, Routed, Stop, queue_reply};
use super::writer::{Inbox, QueuedFrame};
use crate::bound::{ByteBound, Held};
use crate::counter::bump;
use mcp_framer::Stats;
use mcp_framer_jsonrpc::{ErrorObject, Id, Kind, Message, OwnedId};

/// What a front hands the dispatcher.
pub(crate) enum Inbound {
    /// A JSON-RPC message; a request is routed under `key` instead of its id.
    Message { key: Option<OwnedId>, frame: Vec<u8>, _waiting: Held },
    /// Cancel the request under `key`.
    Cancel { key: OwnedId, reason: String },
}

/// The sending half of the seam: hands whole messages to the dispatcher.
/// Cheap to clone.
#[derive(Clone, Debug)]
pub struct Inlet {
    tx: mpsc::UnboundedSender<Inbound>,
    waiting: ByteBound,
    ended: CancellationToken,
}

impl Inlet {
    /// Hands a request to the dispatcher under `key` (see the
    /// [`Server::serve_messages`](super::Server::serve_messages)), waiting while the messages not yet taken hold the
    /// transport limit. `frame` is one JSON-RPC message (not parsed here: a
    /// frame that is not one is answered as on stdin). `false` once the
    /// input has ended. Cancel-safe.
    pub async fn request(&self, key: OwnedId, frame: Vec<u8>) -> bool {
        self.send(Some(key), frame).await
    }

    /// Hands a notification (or any message without a key) to the
    /// dispatcher; as [`Inlet::request`].
    pub async fn notification(&self, frame: Vec<u8>) -> bool {
        self.send(None, frame).await
    }

    async fn send(&self, key: Option<OwnedId>, frame: Vec<u8>) -> bool {
        if self.ended.is_cancelled() {
            return false;
        }
        let acquired = tokio::select! {
            held = self.waiting.acquire(frame.len()) => held,
            () = self.ended.cancelled() => None,
        };
        let Some(waiting) = acquired else { return false };
        self.tx.send(Inbound::Message { key, frame, _waiting: waiting }).is_ok()
    }

    /// Cancels the request under `key`, as `notifications/cancelled` does
    /// (counted by the state it was in; a key not in flight is ignored).
    /// Never waits.
    pub fn cancel(&self, key: OwnedId, reason: &str) -> bool {
        !self.ended.is_cancelled() && self.tx.send(Inbound::Cancel { key, reason: reason.to_owned() }).is_ok()
    }

    /// The end of the input: what was handed over is still routed, then the
    /// dispatcher finishes as at the end of stdin.
    pub fn end(&self) {
        self.ended.cancel();
        self.waiting.close();
    }
}

/// The receiving half of the seam: the frames the dispatcher writes, in
/// order. Dropping it is a failed stdout (see the [`Server::serve_messages`](super::Server::serve_messages)).
pub struct Outlet {
    inbox: Inbox,
    /// Told once the dispatcher closed the output and every frame was taken.
    flushed: Option<oneshot::Sender<()>>,
}

impl std::fmt::Debug for Outlet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outlet").field("closed", &self.flushed.is_none()).finish()
    }
}

impl Outlet {
    /// The next frame; `None` once the dispatcher has finished (its last
    /// frame taken). Cancel-safe.
    pub async fn next(&mut self) -> Option<OutFrame> {
        match self.inbox.next().await {
            Some(frame) => Some(OutFrame { frame }),
            None => {
                if let Some(flushed) = self.flushed.take() {
                    let _ = flushed.send(());
                }
                None
            }
        }
    }
}

impl Drop for Outlet {
    fn drop(&mut self) {
        self.inbox.stop();
    }
}

/// One whole frame the dispatcher wrote: a response (its id is the
/// request's key) or a notification. Its bytes count against the
/// dispatcher's budget until it is dropped.
pub struct OutFrame {
    frame: QueuedFrame,
}

impl OutFrame {
    /// The frame: one JSON-RPC message and its `\n`.
    pub fn bytes(&self) -> &[u8] {
        &self.frame.bytes
    }

    /// Moves the bytes out (zero copy); the budget stays held until the
    /// frame is dropped.
    pub fn take_bytes(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.frame.bytes)
    }

    /// The key of the request a notification belongs to (a tool call's
    /// progress or messages); `None` for responses and the protocol's
    /// replies.
    pub fn request(&self) -> Option<&OwnedId> {
        self.frame.request.as_ref()
    }
}

impl std::fmt::Debug for OutFrame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutFrame").field("len", &self.frame.bytes.len()).field("request", &self.frame.request).finish()
    }
}

/// The dispatcher's end of the seam, built with the [`Inlet`].
pub(crate) struct Messages {
    pub(crate) rx: mpsc::UnboundedReceiver<Inbound>,
    pub(crate) ended: CancellationToken,
}

/// A new seam: the front's [`Inlet`] and the dispatcher's [`Messages`];
/// messages not yet taken hold at most `max_frame` bytes.
pub(crate) fn inlet(max_frame: usize) -> (Inlet, Messages) {
    let (tx, rx) = mpsc::unbounded_channel();
    let ended = CancellationToken::new();
    (Inlet { tx, waiting: ByteBound::new(max_frame), ended: ended.clone() }, Messages { rx, ended })
}

/// The front's [`Outlet`] on the dispatcher's `inbox`, and what the
/// dispatcher waits on to know its frames were all taken.
pub(crate) fn outlet(inbox: Inbox) -> (Outlet, oneshot::Receiver<()>) {
    let (tx, rx) = oneshot::channel();
    (Outlet { inbox, flushed: Some(tx) }, rx)
}

/// The seam's read loop, the counterpart of [`read_stdin`](super::stdin::read_stdin):
/// each message is parsed, counted by kind and routed (a request under its
/// key), each cancellation goes to the table, until the input ends, a
/// signal comes or the front is gone.
pub(crate) async fn read_messages<S>(
    mut messages: Messages,
    router: &mut Router<'_>,
    mut shutdown: std::pin::Pin<&mut S>,
) -> Ended
where
    S: std::future::Future<Output = i32>,
{
    let outbox = router.outbox.clone();
    let counters = Arc::clone(&router.counters);
    let mut stats = Stats::default();
    let mut ended = false;
    let stop = loop {
        let inbound = tokio::select! {
            biased;
            number = shutdown.as_mut() => break Some(Stop::Signal(number)),
            () = outbox.stopped() => break Some(Stop::StdoutFailed),
            inbound = messages.rx.recv() => inbound,
            () = messages.ended.cancelled(), if !ended => {
                // Route what was handed over before the end, then stop.
                ended = true;
                messages.rx.close();
                continue;
            }
        };
        let Some(inbound) = inbound else { break None };
        let routed = match inbound {
            Inbound::Cancel { key, reason } => {
                router.cancel(key, &reason);
                continue;
            }
            Inbound::Message { key, frame, _waiting } => {
                stats.bytes_in += frame.len() as u64;
                stats.frames += 1;
                stats.frame_bytes += frame.len() as u64;
                stats.largest_frame = stats.largest_frame.max(frame.len() as u64);
                route_one(router, &counters, key, &frame)
            }
        };
        if let Routed::Reply(reply) = routed
            && let Some(stop) = queue_reply(reply, &outbox, &counters, shutdown.as_mut()).await
        {
            break Some(stop);
        }
    };
    let mut end = Ended { signal: None, stdout_failed: false, error: None, stats };
    match stop {
        Some(Stop::Signal(number)) => end.signal = Some(number),
        Some(Stop::StdoutFailed) => end.stdout_failed = true,
        Some(Stop::RouteGone) | None => {}
    }
    end
}

/// Parses one message and routes it, a request under `key`.
fn route_one(router: &mut Router<'_>, counters: &Counters, key: Option<OwnedId>, frame: &[u8]) -> Routed<()> {
    let message = match mcp_framer_jsonrpc::parse(frame) {
        Ok(message) => message,
        Err(error) => {
            bump(&counters.malformed);
            let object = ErrorObject::new(error.code(), error.to_string());
            let id = key.or_else(|| error.id().map(Id::to_owned_id));
            return Routed::Reply(router.outbox.error_frame(id.as_ref(), &object));
        }
    };
    bump(match message.kind() {
        Kind::Request => &counters.requests,
        Kind::Notification => &counters.notifications,
        _ => &counters.unexpected_responses,
    });
    let message = match (message, key) {
        (Message::Request { id, method, params }, Some(key)) => {
            router.client_id = Some(id.into_owned());
            Message::Request { id: key, method, params }
        }
        (message, _) => message,
    };
    let routed = router.route(frame, message);
    router.client_id = None;
    match routed {
        Routed::Nothing => Routed::Nothing,
        Routed::Reply(reply) => Routed::Reply(reply),
        Routed::Forward(never) => match never {},
    }
}
