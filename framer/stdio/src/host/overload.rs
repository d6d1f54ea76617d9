//! The hand-off from the reader to the application: a bounded queue, the
//! reader's wait budget for room in it (none by default), and the policy
//! applied to a message that does not fit.

use crate::setters::setters;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::sync::mpsc::{self, error::SendTimeoutError, error::TryRecvError, error::TrySendError};
use tokio::time::Instant;

use super::metrics::Metrics;
use crate::bound::{ByteBound, Held};
use crate::counter::bump;

/// The JSON-RPC error code of the reply sent under [`OverloadPolicy::Reject`]
/// (the project's one definition, in `mcp_framer_jsonrpc`).
pub use mcp_framer_jsonrpc::OVERLOADED;

/// The message of the reply sent under [`OverloadPolicy::Reject`].
pub const OVERLOADED_MESSAGE: &str = "host overloaded: request dropped, try again later";

/// The message of the "method not found" ([`METHOD_NOT_FOUND`](mcp_framer_jsonrpc::METHOD_NOT_FOUND))
/// reply to a server request when the application dropped its inbound
/// receiver: the host takes no server requests.
pub const NO_CONSUMER_MESSAGE: &str = "this host takes no server requests";

/// Default capacity of the inbound queue in messages: as many as tokio's
/// bounded queue allows, so the queue is bounded by bytes
/// ([`DEFAULT_MAX_QUEUED_BYTES`]), not by a count of messages.
pub const DEFAULT_INBOUND_CAPACITY: usize = tokio::sync::Semaphore::MAX_PERMITS;

/// How many times the reader yields to the runtime, letting the application
/// run, before a message that does not fit gets the policy. A consumer that
/// keeps up makes room within them; a stalled one does not.
pub(crate) const STALL_YIELDS: u32 = 64;

/// Default bound on the bytes of the messages in the application's queue:
/// 64 MiB, four messages at the default transport limit.
pub const DEFAULT_MAX_QUEUED_BYTES: usize = 64 << 20;

/// What the reader does with a server message that does not fit in the
/// application's queue once it may no longer wait for room (at once by
/// default; see [`Overload`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum OverloadPolicy {
    /// Drop the message and count it in
    /// [`overload_dropped`](super::MetricsSnapshot::overload_dropped).
    Drop,
    /// Answer a server request with a JSON-RPC error ([`OVERLOADED`]) and drop
    /// it, counted in [`overload_rejected`](super::MetricsSnapshot::overload_rejected),
    /// so the server is not left waiting for an answer. A notification cannot
    /// be answered: it is dropped and counted as under `Drop`. The default.
    #[default]
    Reject,
    /// End the session on purpose: the reader stops, the child is killed and
    /// every pending request fails with
    /// [`CloseReason::Overloaded`](super::CloseReason::Overloaded), so the
    /// caller can start a new session.
    EndSession,
}

/// How the reader hands messages to the application's bounded queue when it
/// is full. The reader keeps draining the server's stdout whatever the
/// application does: a message that does not fit gets the [`OverloadPolicy`]
/// (drop, reject, end the session), and reading goes on.
///
/// **Overload episode.** An episode starts when a message finds the queue
/// full (or over its byte bound, below), and ends only once the application
/// has drained the queue to at most half its capacity and half its byte bound
/// (not as soon as one message fits). Each episode is
/// counted in [`overload_episodes`](super::MetricsSnapshot::overload_episodes).
/// During an episode, a message that fits is still queued.
///
/// **`max_wait` is a budget per episode, not per message.**
///
/// * `max_wait` zero (**the default**): the reader never waits and arms no
///   timer. A message that does not fit gets the policy at once, so the
///   server is never paced by the application; the price is that a burst
///   larger than the queue is shed even if the application would have caught
///   up a moment later.
/// * `max_wait` above zero (opt in, for a host that prefers absorbing short
///   bursts to shedding): a message that does not fit may wait for room, but
///   the waits of one episode add up to at most `max_wait`, however many of
///   them succeed. Once the budget is spent, every message that does not fit
///   gets the policy at once until the episode ends. The trade-off: a
///   steadily slow application paces the reader, and so holds the server in
///   `write(2)` (unable to read its stdin, cancellations included), for up to
///   `max_wait` per episode; then the reader sheds until the application has
///   caught up halfway.
///
/// **Bytes queued.** Besides its capacity in messages, the queue is bounded in
/// bytes: the frames of the messages the reader has queued and the
/// application has not dropped yet add up to at most `max_queued_bytes`,
/// except that one message always fits when none is held, whatever its size
/// (it then counts as the whole bound). A message counts until it is
/// dropped; the messages of one read, handed over together in one shared
/// buffer (see [`Reader`](super::Reader)), count until the last of them is
/// dropped, since that is when their buffer is freed. A clone is the
/// application's own copy and does not count. A message over
/// the byte bound gets the policy at once, never waits, and is counted like
/// one that found the queue full. So the memory a stalled application makes
/// the host hold is bounded by the larger of `max_queued_bytes` and one
/// message, not by the capacity times the transport limit.
///
/// **Letting the application run.** A message that does not fit is not
/// refused at once: the reader first yields to the runtime a few times (no
/// timer, no wait on the application), so a consumer that keeps up, which on
/// a current-thread runtime may simply not have had a turn, makes room. Only
/// if none is made does the episode start; within an episode the policy
/// applies at once. Past half the byte bound or half the capacity, the reader
/// also yields once after each read's messages it queues. So by default nothing is
/// lost to a consumer that keeps up, and a stalled one never holds the reader.
///
/// A closed queue (the application dropped its receiver) is not an overload:
/// a server request is answered "method not found" ([`NO_CONSUMER_MESSAGE`]),
/// anything else is dropped, and both are counted in
/// [`unconsumed`](super::MetricsSnapshot::unconsumed).
/// Time spent waiting is counted in
/// [`dispatch_wait`](super::MetricsSnapshot::dispatch_wait) (always zero by
/// default); refused messages in
/// [`overload_dropped`](super::MetricsSnapshot::overload_dropped) or
/// [`overload_rejected`](super::MetricsSnapshot::overload_rejected).
///
/// ```
/// use std::time::Duration;
/// use mcp_framer_stdio::host::{Overload, OverloadPolicy, Reader, ReaderConfig};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let note = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n";
/// let stdout = note.repeat(5);
///
/// // The default: never wait. Nobody consumes this queue of two.
/// assert_eq!(Overload::default().max_wait, Duration::ZERO);
/// assert_eq!(Overload::default().policy, OverloadPolicy::Reject);
/// let (inbound, _queue) = mcp_framer_stdio::host::inbound_channel(2);
/// let reader = Reader::new(ReaderConfig::default(), inbound);
/// let metrics = reader.metrics();
/// reader.run(stdout.as_bytes()).await;
/// let m = metrics.snapshot();
/// assert_eq!((m.delivered, m.overload_dropped, m.overload_episodes), (2, 3, 1));
/// assert_eq!(m.dispatch_wait, Duration::ZERO);
///
/// // Opt in: wait at most 20 ms in total for the whole episode; the first
/// // message that does not fit uses the budget up, the next two get the
/// // policy at once.
/// let overload = Overload::default().with_policy(OverloadPolicy::Drop).with_max_wait(Duration::from_millis(20));
/// let (inbound, _queue) = mcp_framer_stdio::host::inbound_channel(2);
/// let reader = Reader::new(ReaderConfig::default().with_overload(overload), inbound);
/// let metrics = reader.metrics();
/// reader.run(stdout.as_bytes()).await;
/// let m = metrics.snapshot();
/// assert_eq!((m.delivered, m.overload_dropped, m.overload_episodes), (2, 3, 1));
/// assert!(m.dispatch_wait >= Duration::from_millis(20));
/// # }
/// ```
///
/// Build one from the default with the `with_*` setters (the fields may grow,
/// so the struct is `#[non_exhaustive]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Overload {
    /// What a message that does not fit gets. Default: [`OverloadPolicy::Reject`].
    pub policy: OverloadPolicy,
    /// The most the reader may wait for room in the queue, in total, per
    /// overload episode. Default: zero (never wait).
    pub max_wait: Duration,
    /// The most bytes of frames held in the queue and by the application
    /// (see above), at least 1 and at most `u32::MAX` (values outside are
    /// clamped). Default: [`DEFAULT_MAX_QUEUED_BYTES`].
    pub max_queued_bytes: usize,
}

impl Default for Overload {
    fn default() -> Self {
        Overload {
            policy: OverloadPolicy::default(),
            max_wait: Duration::ZERO,
            max_queued_bytes: DEFAULT_MAX_QUEUED_BYTES,
        }
    }
}

setters!(Overload {
    policy: OverloadPolicy => with_policy,
    max_wait: Duration => with_max_wait,
    max_queued_bytes: usize => with_max_queued_bytes,
});

/// The application queue: one queue operation per batch of items (the
/// reader sends each read's messages as one batch), bounded by a count of
/// items, not batches. An item counts from when it is sent until the
/// receiver takes it. One sender (the reader), one receiver.
pub(crate) fn channel<T>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    let room = Arc::new(Room {
        capacity: capacity.max(1),
        queued: AtomicUsize::new(0),
        waiting: AtomicBool::new(false),
        freed: Notify::new(),
    });
    let (tx, rx) = mpsc::unbounded_channel();
    (Sender { tx, room: Arc::clone(&room) }, Receiver { rx, current: Vec::new().into_iter(), room })
}

/// The count bound shared by both ends.
#[derive(Debug)]
struct Room {
    capacity: usize,
    /// Items sent and not yet taken.
    queued: AtomicUsize,
    /// The sender waits for room: the receiver wakes it when it takes items.
    waiting: AtomicBool,
    freed: Notify,
}

/// The sending end of [`channel`].
#[derive(Debug)]
pub(crate) struct Sender<T> {
    tx: mpsc::UnboundedSender<Vec<T>>,
    room: Arc<Room>,
}

impl<T> Sender<T> {
    /// The most items the queue holds.
    pub(crate) fn max_capacity(&self) -> usize {
        self.room.capacity
    }

    /// Room left, in items.
    pub(crate) fn capacity(&self) -> usize {
        self.room.capacity.saturating_sub(self.room.queued.load(SeqCst))
    }

    /// Whether the receiver is gone.
    pub(crate) fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }

    /// Queues one item if there is room now.
    pub(crate) fn try_send(&self, item: T) -> Result<(), TrySendError<T>> {
        self.try_send_batch(vec![item]).map_err(|e| match e {
            TrySendError::Full(mut batch) => TrySendError::Full(batch.pop().expect("one item")),
            TrySendError::Closed(mut batch) => TrySendError::Closed(batch.pop().expect("one item")),
        })
    }

    /// Queues every item of `batch` in one operation if there is room for
    /// all of them now.
    pub(crate) fn try_send_batch(&self, batch: Vec<T>) -> Result<(), TrySendError<Vec<T>>> {
        if self.tx.is_closed() {
            return Err(TrySendError::Closed(batch));
        }
        if batch.len() > self.capacity() {
            return Err(TrySendError::Full(batch));
        }
        let n = batch.len();
        self.room.queued.fetch_add(n, SeqCst);
        self.tx.send(batch).map_err(|e| {
            self.room.queued.fetch_sub(n, SeqCst);
            TrySendError::Closed(e.0)
        })
    }

    /// Queues `item`, waiting at most `timeout` for room.
    pub(crate) async fn send_timeout(&self, item: T, timeout: Duration) -> Result<(), SendTimeoutError<T>> {
        let deadline = Instant::now() + timeout;
        let mut item = item;
        let sent = loop {
            let mut freed = pin!(self.room.freed.notified());
            freed.as_mut().enable();
            self.room.waiting.store(true, SeqCst);
            item = match self.try_send(item) {
                Ok(()) => break Ok(()),
                Err(TrySendError::Closed(item)) => break Err(SendTimeoutError::Closed(item)),
                Err(TrySendError::Full(item)) => item,
            };
            tokio::select! {
                () = freed => {}
                () = self.tx.closed() => {}
                () = tokio::time::sleep_until(deadline) => break Err(SendTimeoutError::Timeout(item)),
            }
        };
        self.room.waiting.store(false, SeqCst);
        sent
    }
}

/// The receiving end of [`channel`]: takes items one by one (or many at a
/// time) out of the batches sent.
#[derive(Debug)]
pub(crate) struct Receiver<T> {
    rx: mpsc::UnboundedReceiver<Vec<T>>,
    /// The rest of the batch being taken.
    current: std::vec::IntoIter<T>,
    room: Arc<Room>,
}

impl<T> Receiver<T> {
    /// `n` items were taken: their room is free again.
    fn took(&self, n: usize) {
        if n > 0 {
            self.room.queued.fetch_sub(n, SeqCst);
            if self.room.waiting.load(SeqCst) {
                self.room.freed.notify_one();
            }
        }
    }

    /// The next item; `None` once the sender is gone and everything was taken.
    pub(crate) async fn recv(&mut self) -> Option<T> {
        loop {
            if let Some(item) = self.current.next() {
                self.took(1);
                return Some(item);
            }
            self.current = self.rx.recv().await?.into_iter();
        }
    }

    /// [`recv`](Receiver::recv) for a thread outside the runtime (panics
    /// inside an asynchronous context, like tokio's).
    pub(crate) fn blocking_recv(&mut self) -> Option<T> {
        loop {
            if let Some(item) = self.current.next() {
                self.took(1);
                return Some(item);
            }
            self.current = self.rx.blocking_recv()?.into_iter();
        }
    }

    /// The next item if one is queued now.
    pub(crate) fn try_recv(&mut self) -> Result<T, TryRecvError> {
        loop {
            if let Some(item) = self.current.next() {
                self.took(1);
                return Ok(item);
            }
            self.current = self.rx.try_recv()?.into_iter();
        }
    }

    /// Waits for at least one item, then moves up to `limit` of those queued
    /// into `buffer`. Returns how many; 0 only once the sender is gone and
    /// everything was taken (or `limit` is 0).
    pub(crate) async fn recv_many(&mut self, buffer: &mut Vec<T>, limit: usize) -> usize {
        if limit == 0 {
            return 0;
        }
        if self.current.len() == 0 {
            match self.rx.recv().await {
                Some(batch) => self.current = batch.into_iter(),
                None => return 0,
            }
        }
        let mut taken = 0;
        loop {
            let before = buffer.len();
            buffer.extend(self.current.by_ref().take(limit - taken));
            taken += buffer.len() - before;
            if taken == limit {
                break;
            }
            match self.rx.try_recv() {
                Ok(batch) => self.current = batch.into_iter(),
                Err(_) => break,
            }
        }
        self.took(taken);
        taken
    }

    /// Refuses anything more from the sender; what is queued can still be taken.
    pub(crate) fn close(&mut self) {
        self.rx.close();
    }
}

/// The result of offering an item to the queue.
#[derive(Debug)]
pub(crate) enum Offer<T> {
    /// Queued.
    Delivered,
    /// It does not fit and may not wait: apply the policy.
    Refused(T),
    /// The receiver is gone: nobody will take it.
    Closed(T),
}

/// The sending side of the application queue, with the wait budget and the
/// overload episode. Owned by the reader.
#[derive(Debug)]
pub(crate) struct Dispatch<T> {
    queue: Sender<T>,
    max_wait: Duration,
    /// The current overload episode, if any: how much of its wait budget has
    /// been spent.
    episode: Option<Duration>,
    /// Bytes of the queued messages not dropped yet.
    bytes: ByteBound,
    metrics: Arc<Metrics>,
}

impl<T> Dispatch<T> {
    pub(crate) fn new(queue: Sender<T>, overload: Overload, metrics: Arc<Metrics>) -> Self {
        Dispatch {
            queue,
            max_wait: overload.max_wait,
            episode: None,
            bytes: ByteBound::new(overload.max_queued_bytes),
            metrics,
        }
    }

    /// Counts `len` bytes against the byte bound for a message about to be
    /// offered, or `None` when they do not fit: the message then gets the
    /// policy at once, and an overload episode starts if none is running
    /// (with no wait budget: bytes never wait).
    ///
    /// Before refusing, it yields to the runtime up to [`STALL_YIELDS`]
    /// times, so a consumer that keeps up (on a current-thread runtime, one
    /// that had no chance to run) can make room: only a stalled consumer
    /// loses messages. Yielding waits on no timer and on nothing the
    /// application holds.
    pub(crate) async fn reserve(&mut self, len: usize) -> Option<Held> {
        let mut yields = 0;
        let held = loop {
            match self.bytes.try_acquire(len) {
                Some(held) => break Some(held),
                None if yields < STALL_YIELDS && self.episode.is_none() && !self.queue.is_closed() => {
                    yields += 1;
                    tokio::task::yield_now().await;
                }
                None => break None,
            }
        };
        if held.is_none() && self.episode.is_none() {
            bump(&self.metrics.overload_episodes);
            self.episode = Some(self.max_wait);
        }
        held
    }

    /// Whether the application dropped its receiver: nothing will be taken.
    pub(crate) fn is_closed(&self) -> bool {
        self.queue.is_closed()
    }

    /// After a message was queued: past the high-water mark (half the byte
    /// bound or half the capacity), yields once so the application gets to
    /// run before the queue fills (on a current-thread runtime the reader
    /// would otherwise fill it in one go).
    pub(crate) async fn after_delivery(&self) {
        let capacity = self.queue.max_capacity();
        let queued = capacity - self.queue.capacity();
        if self.episode.is_none() && (self.bytes.held() > self.bytes.max() / 2 || queued > capacity / 2) {
            tokio::task::yield_now().await;
        }
    }

    /// Bytes of queued messages not dropped yet.
    #[cfg(test)]
    pub(crate) fn held_bytes(&self) -> usize {
        self.bytes.held()
    }

    /// Queues `item` if it fits; otherwise starts an overload episode (if
    /// none is running) and waits for room only while the episode's budget
    /// lasts. See [`Overload`] for the contract.
    pub(crate) async fn offer(&mut self, item: T) -> Offer<T> {
        if self.episode.is_some() && self.drained_halfway() {
            self.episode = None;
        }
        let mut item = item;
        let mut yields = 0;
        let item = loop {
            match self.queue.try_send(item) {
                Ok(()) => return Offer::Delivered,
                Err(TrySendError::Closed(item)) => return Offer::Closed(item),
                Err(TrySendError::Full(full))
                    if yields < STALL_YIELDS && self.episode.is_none() && self.max_wait.is_zero() =>
                {
                    // Let a consumer that keeps up take some first.
                    item = full;
                    yields += 1;
                    tokio::task::yield_now().await;
                }
                Err(TrySendError::Full(item)) => break item,
            }
        };
        let spent = match self.episode {
            Some(spent) => spent,
            None => {
                bump(&self.metrics.overload_episodes);
                self.episode = Some(Duration::ZERO);
                Duration::ZERO
            }
        };
        let budget = self.max_wait.saturating_sub(spent);
        if budget.is_zero() {
            return Offer::Refused(item);
        }
        let started = Instant::now();
        let sent = self.queue.send_timeout(item, budget).await;
        let waited = started.elapsed();
        self.metrics.add_dispatch_wait(waited);
        match sent {
            Ok(()) => {
                self.episode = Some(spent + waited);
                Offer::Delivered
            }
            Err(SendTimeoutError::Timeout(item)) => {
                self.episode = Some(self.max_wait);
                Offer::Refused(item)
            }
            Err(SendTimeoutError::Closed(item)) => Offer::Closed(item),
        }
    }

    /// The fast path for a whole read: if `items` items, `messages` of them
    /// messages of `bytes` bytes in all, fit in the queue right now (by count
    /// and by bytes, without yielding), counts their bytes against the bound
    /// and returns them held; the caller then sends them as one batch with
    /// [`send_batch`](Dispatch::send_batch). `None`: offer them one by one.
    /// Ends an overload episode first if the queue has drained halfway.
    pub(crate) fn reserve_batch(&mut self, items: usize, messages: usize, bytes: usize) -> Option<Held> {
        if self.episode.is_some() && self.drained_halfway() {
            self.episode = None;
        }
        // A batch over the byte bound never fits, even when nothing is held
        // (only a single message does).
        if items > self.queue.capacity() || (bytes > self.bytes.max() && messages > 1) {
            return None;
        }
        self.bytes.try_acquire(bytes)
    }

    /// Sends a batch [`reserve_batch`](Dispatch::reserve_batch) made room
    /// for; gives it back if the receiver is gone.
    pub(crate) fn send_batch(&mut self, batch: Vec<T>) -> Result<(), Vec<T>> {
        self.queue.try_send_batch(batch).map_err(|e| match e {
            TrySendError::Full(batch) | TrySendError::Closed(batch) => batch,
        })
    }

    /// Whether the application has drained the queue to at most half its
    /// capacity and half its byte bound (which ends an overload episode).
    fn drained_halfway(&self) -> bool {
        let capacity = self.queue.max_capacity();
        capacity - self.queue.capacity() <= capacity / 2 && self.bytes.held() <= self.bytes.max() / 2
    }

    /// Queues `item` only if there is room right now (for reports, which
    /// are also counted in the metrics and need no policy).
    pub(crate) fn offer_now(&mut self, item: T) -> bool {
        self.queue.try_send(item).is_ok()
    }

    /// Whether an overload episode is running (it ends at the first offer
    /// after the queue has drained halfway).
    pub(crate) fn is_overloaded(&self) -> bool {
        self.episode.is_some()
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn dispatch(capacity: usize, max_wait: Duration) -> (Dispatch<u32>, Receiver<u32>, Arc<Metrics>) {
        let metrics = Arc::new(Metrics::default());
        let (tx, rx) = channel(capacity);
        let overload = Overload::default().with_max_wait(max_wait);
        (Dispatch::new(tx, overload, Arc::clone(&metrics)), rx, metrics)
    }

    /// Polls `offer(item)` without ever letting time pass: at most once per
    /// yield it may make ([`STALL_YIELDS`]) and once more. `None` if it
    /// would have waited (for a timer or for room).
    fn offer_without_waiting(dispatch: &mut Dispatch<u32>, item: u32) -> Option<Offer<u32>> {
        let mut offer = pin!(dispatch.offer(item));
        (0..=STALL_YIELDS).find_map(|_| match offer.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(offer) => Some(offer),
            Poll::Pending => None,
        })
    }

    async fn fill(dispatch: &mut Dispatch<u32>, n: u32) {
        for i in 0..n {
            assert!(matches!(dispatch.offer(i).await, Offer::Delivered), "offer {i} of {n}");
        }
    }

    #[tokio::test]
    async fn a_batch_is_one_send_and_its_items_count_until_taken() {
        let (tx, mut rx) = channel::<u32>(4);
        assert!(tx.try_send_batch(vec![1, 2, 3]).is_ok());
        assert_eq!((tx.capacity(), tx.max_capacity()), (1, 4));
        assert!(matches!(tx.try_send_batch(vec![4, 5]), Err(TrySendError::Full(batch)) if batch == [4, 5]));
        assert_eq!(rx.recv().await, Some(1));
        assert_eq!(tx.capacity(), 2, "an item frees its room when taken");
        assert!(tx.try_send(4).is_ok());
        let mut many = Vec::new();
        assert_eq!(rx.recv_many(&mut many, 2).await, 2);
        assert_eq!(rx.recv_many(&mut many, 8).await, 1, "the rest of the batch, then the next batch");
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
        assert!(tx.try_send(5).is_ok());
        assert_eq!(rx.try_recv(), Ok(5));
        assert_eq!(many, [2, 3, 4]);
        assert_eq!(tx.capacity(), 4);
        drop(tx);
        assert_eq!(rx.recv().await, None);
    }

    // The real clock: a zero-timeout wait would still go through the timer
    // (pending until its next tick) and add to `dispatch_wait`.
    #[tokio::test]
    async fn the_default_never_waits_not_even_once() {
        let (mut dispatch, mut rx, metrics) = dispatch(8, Overload::default().max_wait);
        fill(&mut dispatch, 8).await;
        for i in 0..100 {
            let offer = offer_without_waiting(&mut dispatch, 100 + i);
            assert!(matches!(offer, Some(Offer::Refused(n)) if n == 100 + i), "offer {i}: {offer:?}");
            if i % 10 == 0 {
                // A slot freed now fits the next offer at once, and the
                // episode goes on (the queue is still more than half full).
                assert!(rx.recv().await.is_some());
                assert!(matches!(offer_without_waiting(&mut dispatch, 7), Some(Offer::Delivered)));
            }
        }
        assert!(dispatch.is_overloaded());
        let m = metrics.snapshot();
        assert_eq!(m.dispatch_wait, Duration::ZERO);
        assert_eq!(m.overload_episodes, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn the_wait_budget_adds_up_across_successful_waits() {
        let (mut dispatch, mut rx, metrics) = dispatch(4, 50 * MS);
        fill(&mut dispatch, 4).await;
        // A steadily slow consumer: one message every 15 ms, for ever.
        let consumer = tokio::spawn(async move {
            loop {
                tokio::time::sleep(15 * MS).await;
                if rx.recv().await.is_none() {
                    break;
                }
            }
        });
        let start = Instant::now();
        // Three waits of 15 ms each succeed (45 ms of the budget)...
        for i in 0..3 {
            assert!(matches!(dispatch.offer(10 + i).await, Offer::Delivered), "wait {i}");
        }
        assert_eq!(start.elapsed(), 45 * MS);
        // ...the fourth gets the 5 ms left and is refused...
        assert!(matches!(dispatch.offer(13).await, Offer::Refused(13)));
        assert_eq!(start.elapsed(), 50 * MS);
        // ...and from then on a message that does not fit is refused at once,
        // however steadily the consumer frees slots.
        for i in 0..20 {
            tokio::time::sleep(5 * MS).await;
            let before = Instant::now();
            let _ = dispatch.offer(20 + i).await;
            assert_eq!(before.elapsed(), Duration::ZERO, "offer {i} waited");
        }
        let m = metrics.snapshot();
        assert_eq!(m.dispatch_wait, 50 * MS);
        assert_eq!(m.overload_episodes, 1);
        assert!(dispatch.is_overloaded());
        consumer.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn an_episode_ends_only_when_the_queue_has_drained_halfway() {
        let (mut dispatch, mut rx, metrics) = dispatch(4, 10 * MS);
        fill(&mut dispatch, 4).await;
        assert!(matches!(dispatch.offer(4).await, Offer::Refused(4)));
        assert_eq!(metrics.snapshot().dispatch_wait, 10 * MS);

        // One slot free (3 of 4 queued): the next message fits, the one after
        // is refused at once; the episode goes on.
        assert_eq!(rx.recv().await, Some(0));
        assert!(matches!(dispatch.offer(5).await, Offer::Delivered));
        let before = Instant::now();
        assert!(matches!(dispatch.offer(6).await, Offer::Refused(6)));
        assert_eq!(before.elapsed(), Duration::ZERO);
        assert!(dispatch.is_overloaded());

        // Drained to half (2 of 4): the episode ends at the next offer.
        assert_eq!(rx.recv().await, Some(1));
        assert_eq!(rx.recv().await, Some(2));
        assert!(matches!(dispatch.offer(7).await, Offer::Delivered));
        assert!(!dispatch.is_overloaded());
        assert!(matches!(dispatch.offer(8).await, Offer::Delivered));

        // Full again: a new episode, with a fresh budget.
        let before = Instant::now();
        assert!(matches!(dispatch.offer(9).await, Offer::Refused(9)));
        assert_eq!(before.elapsed(), 10 * MS);
        let m = metrics.snapshot();
        assert_eq!((m.overload_episodes, m.dispatch_wait), (2, 20 * MS));
    }

    #[tokio::test(start_paused = true)]
    async fn a_closed_queue_refuses_at_once_even_mid_wait() {
        let (mut dispatch, rx, metrics) = dispatch(1, Duration::from_secs(60));
        fill(&mut dispatch, 1).await;
        // The receiver goes away 5 ms into a wait allowed to last 60 s.
        let closer = tokio::spawn(async move {
            tokio::time::sleep(5 * MS).await;
            drop(rx);
        });
        let start = Instant::now();
        assert!(matches!(dispatch.offer(1).await, Offer::Closed(1)));
        assert_eq!(start.elapsed(), 5 * MS);
        closer.await.expect("closer");
        // Closed: refused without waiting, room or not.
        assert!(matches!(offer_without_waiting(&mut dispatch, 2), Some(Offer::Closed(2))));
        assert!(!dispatch.offer_now(3));
        assert_eq!(metrics.snapshot().dispatch_wait, 5 * MS);
    }

    #[tokio::test]
    async fn the_byte_bound_holds_until_messages_are_dropped_and_one_message_always_fits() {
        let (tx, _rx) = channel::<u32>(8);
        let metrics = Arc::new(Metrics::default());
        let overload = Overload::default().with_max_queued_bytes(100);
        let mut dispatch = Dispatch::new(tx, overload, Arc::clone(&metrics));
        // Nothing held: even a message over the whole bound fits.
        let huge = dispatch.reserve(250).await.expect("one message always fits when none is held");
        assert!(dispatch.reserve(1).await.is_none(), "250 of 100 bytes held");
        assert!(dispatch.is_overloaded(), "a refusal by bytes starts an episode");
        assert_eq!(metrics.snapshot().overload_episodes, 1);
        drop(huge);
        assert_eq!(dispatch.held_bytes(), 0);

        let a = dispatch.reserve(60).await.expect("60 of 100");
        let b = dispatch.reserve(40).await.expect("exactly at the bound");
        assert!(dispatch.reserve(1).await.is_none(), "one byte over the bound");
        assert_eq!(dispatch.held_bytes(), 100);
        drop(b);
        assert!(dispatch.reserve(41).await.is_none(), "40 bytes free");
        let c = dispatch.reserve(40).await.expect("room again once dropped");
        assert_eq!(dispatch.held_bytes(), 100);
        drop((a, c));
        assert_eq!(dispatch.held_bytes(), 0);
        assert_eq!(metrics.snapshot().overload_episodes, 1, "refusals within one episode start no other");
    }

    #[tokio::test]
    async fn a_reader_holds_at_most_the_byte_bound_for_an_application_that_keeps_its_messages() {
        use crate::host::{Inbound, Reader, ReaderConfig};

        let params = "x".repeat(1000);
        let note = format!("{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":\"{params}\"}}\n");
        let frame_len = note.len() - 1;
        let stdout = note.repeat(10);
        let overload = Overload::default().with_policy(OverloadPolicy::Drop).with_max_queued_bytes(3 * frame_len);
        // Room for 64 messages, but only three frames' worth of bytes.
        let (inbound, mut queue) = crate::host::inbound_channel(64);
        let reader = Reader::new(ReaderConfig::default().with_overload(overload), inbound);
        let metrics = reader.metrics();
        reader.run(stdout.as_bytes()).await;
        let m = metrics.snapshot();
        assert_eq!((m.delivered, m.overload_dropped, m.overload_episodes), (3, 7, 1));

        let mut kept = Vec::new();
        while let Ok(Inbound::Notification(received)) = queue.try_recv() {
            assert_eq!(received.frame().len(), frame_len);
            kept.push(received);
        }
        assert_eq!(kept.len(), 3);
    }

    #[tokio::test]
    async fn dropping_a_message_makes_room_under_the_byte_bound() {
        use tokio::io::AsyncWriteExt;

        use crate::host::{Inbound, Reader, ReaderConfig};

        let note = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n";
        let overload =
            Overload::default().with_policy(OverloadPolicy::Drop).with_max_queued_bytes(2 * (note.len() - 1));
        let (inbound, mut queue) = crate::host::inbound_channel(64);
        let reader = Reader::new(ReaderConfig::default().with_overload(overload), inbound);
        let metrics = reader.metrics();
        let (mut server, stdout) = tokio::io::duplex(1 << 16);
        let reader = tokio::spawn(reader.run(stdout));
        // Sends one message and waits until the reader has dealt with it.
        let mut seen = 0;
        let mut send = async |server: &mut tokio::io::DuplexStream| {
            server.write_all(note.as_bytes()).await.expect("write");
            seen += 1;
            let started = std::time::Instant::now();
            while metrics.snapshot().delivered + metrics.snapshot().overload_dropped < seen {
                assert!(started.elapsed() < Duration::from_secs(10), "the reader stalled");
                tokio::task::yield_now().await;
            }
            let m = metrics.snapshot();
            (m.delivered, m.overload_dropped)
        };
        assert_eq!(send(&mut server).await, (1, 0));
        assert_eq!(send(&mut server).await, (2, 0));
        assert_eq!(send(&mut server).await, (2, 1), "two frames held: the third is over the bound");
        let Some(Inbound::Notification(first)) = queue.recv().await else { panic!("a notification") };
        assert_eq!(send(&mut server).await, (2, 2), "received but still held by the application");
        drop(first);
        assert_eq!(send(&mut server).await, (3, 2), "dropped by the application: room again");
        drop(server);
        reader.await.expect("reader");
    }
}
