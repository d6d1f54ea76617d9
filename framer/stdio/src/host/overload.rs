//! The overload rules: what happens to an item the application's queue has
//! no room for. [`Dispatch`] decides, message by message, and returns a
//! [`Verdict`]; the reader does the I/O a verdict calls for (a reply, the end
//! of the session). See [`Overload`] for the contract.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::config::{Overload, OverloadPolicy};
use super::inbound::{ITEM_OVERHEAD, Inbound, Sent};
use super::metrics::Metrics;
use crate::bound::{ByteBound, Held};
use crate::counter::{add, bump, get, undo};

/// How many times the reader yields to the runtime, letting the application
/// run, before a message that does not fit gets the policy. A consumer that
/// keeps up makes room within them; a stalled one does not.
pub(crate) const STALL_YIELDS: u32 = 64;

/// What becomes of an item offered to the queue.
#[derive(Debug)]
pub(crate) enum Verdict {
    /// Queued.
    Queued,
    /// No room: drop it (and count it in `overload_dropped`).
    Drop(Inbound),
    /// No room: answer this server request with the overload error, or drop
    /// it if the answer cannot be queued.
    Reject(Inbound),
    /// No room: end the session ([`OverloadPolicy::EndSession`]).
    End,
    /// The application dropped its receiver: nobody will take it.
    Unconsumed(Inbound),
}

/// The sending side of the application queue: the byte bound, the wait
/// budget, the overload episode and the policy. Owned by the reader.
#[derive(Debug)]
pub(crate) struct Dispatch {
    queue: mpsc::UnboundedSender<Box<Sent>>,
    policy: OverloadPolicy,
    max_wait: Duration,
    /// The current overload episode, if any: how much of its wait budget has
    /// been spent, and what the counters of refused messages said when it
    /// began (its end reports what it refused).
    episode: Option<Duration>,
    refused_before: (u64, u64),
    /// Bytes of the queued items not dropped yet.
    bytes: ByteBound,
    metrics: Arc<Metrics>,
}

/// What an item costs in the byte bound: its frame plus the item itself.
pub(crate) fn cost(item: &Inbound) -> usize {
    let frame = match item {
        Inbound::Request(received) | Inbound::Notification(received) | Inbound::Response(received) => {
            received.frame().len()
        }
        Inbound::Skipped(_) => 0,
    };
    frame + ITEM_OVERHEAD
}

impl Dispatch {
    pub(crate) fn new(queue: mpsc::UnboundedSender<Box<Sent>>, overload: Overload, metrics: Arc<Metrics>) -> Self {
        Dispatch {
            queue,
            policy: overload.policy,
            max_wait: overload.max_wait,
            episode: None,
            refused_before: (0, 0),
            bytes: ByteBound::new(overload.max_queued_bytes),
            metrics,
        }
    }

    /// Whether the application dropped its receiver: nothing will be taken.
    pub(crate) fn is_closed(&self) -> bool {
        self.queue.is_closed()
    }

    /// Queues `item` if its bytes fit, after letting the application run a
    /// few times if they do not (a consumer that keeps up then makes room);
    /// within an overload episode's wait budget, waits for room; otherwise
    /// the policy decides.
    pub(crate) async fn offer(&mut self, item: Inbound) -> Verdict {
        if self.queue.is_closed() {
            return Verdict::Unconsumed(item);
        }
        self.end_episode_if_drained();
        let cost = cost(&item);
        let mut held = self.bytes.try_acquire(cost);
        let mut yields = 0;
        while held.is_none() && self.episode.is_none() && yields < STALL_YIELDS && !self.queue.is_closed() {
            yields += 1;
            tokio::task::yield_now().await;
            held = self.bytes.try_acquire(cost);
        }
        if held.is_none() {
            // Boxed: the overload path's timer and semaphore wait would
            // otherwise sit in every reader's state, overloaded or not.
            held = Box::pin(self.wait_for_room(cost)).await;
        }
        let Some(held) = held else {
            return match (self.policy, &item) {
                _ if self.queue.is_closed() => Verdict::Unconsumed(item),
                (OverloadPolicy::EndSession, _) => Verdict::End,
                (OverloadPolicy::Reject, Inbound::Request(_)) => Verdict::Reject(item),
                _ => Verdict::Drop(item),
            };
        };
        // Counted before it is queued: whoever takes it sees it counted.
        let message = u64::from(!matches!(item, Inbound::Skipped(_)));
        add(&self.metrics.delivered, message);
        match self.queue.send(sent(item, Some(held))) {
            Ok(()) => Verdict::Queued,
            Err(mut closed) => {
                undo(&self.metrics.delivered, message);
                Verdict::Unconsumed(closed.0.items.pop().expect("one item"))
            }
        }
    }

    /// No room for `cost` bytes: starts an overload episode if none is
    /// running, and waits for room while its budget lasts.
    async fn wait_for_room(&mut self, cost: usize) -> Option<Held> {
        let spent = match self.episode {
            Some(spent) => spent,
            None => {
                bump(&self.metrics.overload_episodes);
                self.refused_before = self.refused();
                tracing::warn!(
                    "inbound queue full ({} of at most {} bytes held; wait budget per episode {:?}): \
                     applying the overload policy {:?}",
                    self.bytes.held(),
                    self.bytes.max(),
                    self.max_wait,
                    self.policy
                );
                Duration::ZERO
            }
        };
        self.episode = Some(spent);
        let budget = self.max_wait.saturating_sub(spent);
        if budget.is_zero() {
            return None;
        }
        let started = Instant::now();
        let room = tokio::select! {
            held = tokio::time::timeout(budget, self.bytes.acquire(cost)) => held.ok().flatten(),
            () = self.queue.closed() => None,
        };
        let waited = started.elapsed();
        self.metrics.add_dispatch_wait(waited);
        self.episode = Some(if room.is_some() { spent + waited } else { self.max_wait });
        room
    }

    /// The fast path for a whole read: if its `items` items, of `frames`
    /// frame bytes in all, fit right now (without yielding), counts their
    /// bytes and returns them held; the caller then sends them as one batch
    /// with [`send_batch`](Dispatch::send_batch). `None`: offer them one by
    /// one.
    pub(crate) fn reserve_batch(&mut self, items: usize, frames: usize) -> Option<Held> {
        self.end_episode_if_drained();
        let bytes = frames + items * ITEM_OVERHEAD;
        // A batch over the byte bound never fits, even when nothing is held
        // (only a single item does).
        if self.queue.is_closed() || (bytes > self.bytes.max() && items > 1) {
            return None;
        }
        self.bytes.try_acquire(bytes)
    }

    /// Sends a batch [`reserve_batch`](Dispatch::reserve_batch) made room
    /// for, its `messages` counted as delivered first (whoever takes them
    /// sees them counted); gives it back if the receiver is gone.
    pub(crate) fn send_batch(&mut self, batch: Box<Sent>, messages: u64) -> Result<(), Box<Sent>> {
        add(&self.metrics.delivered, messages);
        self.queue.send(batch).map_err(|e| {
            undo(&self.metrics.delivered, messages);
            e.0
        })
    }

    /// Queues an item owed to the application (a response, or the report of
    /// an oversize response, for a request it is waiting on): never
    /// refused, whatever the policy. It counts against the byte bound when
    /// it fits; when it does not, it is queued all the same, outside the
    /// bound (what such items hold is bounded by the requests in flight).
    /// Gives it back if the receiver is gone.
    pub(crate) fn owed(&mut self, item: Inbound) -> Option<Inbound> {
        let held = self.bytes.try_acquire(cost(&item));
        let message = u64::from(!matches!(item, Inbound::Skipped(_)));
        add(&self.metrics.delivered, message);
        let mut closed = self.queue.send(sent(item, held)).err()?;
        undo(&self.metrics.delivered, message);
        closed.0.items.pop()
    }

    /// Queues a report only if there is room right now (reports are also
    /// counted in the metrics and never wait or get the policy).
    pub(crate) fn offer_report(&mut self, item: Inbound) -> bool {
        let Some(held) = self.bytes.try_acquire(cost(&item)) else { return false };
        self.queue.send(sent(item, Some(held))).is_ok()
    }

    /// After items were queued: past the high-water mark (half the byte
    /// bound), yields once so the application gets to run before the queue
    /// fills (on a current-thread runtime the reader would otherwise fill it
    /// in one go).
    pub(crate) async fn after_delivery(&self) {
        if self.episode.is_none() && self.bytes.held() > self.bytes.max() / 2 {
            tokio::task::yield_now().await;
        }
    }

    /// Ends the overload episode once the application has dropped what it
    /// held to at most half the byte bound.
    fn end_episode_if_drained(&mut self) {
        if self.episode.is_some() && self.bytes.held() <= self.bytes.max() / 2 {
            self.episode = None;
            let (dropped, rejected) = self.refused();
            let (dropped, rejected) = (dropped - self.refused_before.0, rejected - self.refused_before.1);
            tracing::warn!(
                dropped,
                rejected,
                "inbound queue drained to half its bound: the overload episode is over \
                 ({dropped} messages dropped, {rejected} server requests rejected during it)"
            );
        }
    }

    /// The counters of messages refused so far: dropped, rejected.
    fn refused(&self) -> (u64, u64) {
        (get(&self.metrics.overload_dropped), get(&self.metrics.overload_rejected))
    }

    /// Whether an overload episode is running.
    #[cfg(test)]
    pub(crate) fn is_overloaded(&self) -> bool {
        self.episode.is_some()
    }

    /// Bytes of queued items not dropped yet.
    #[cfg(test)]
    pub(crate) fn held_bytes(&self) -> usize {
        self.bytes.held()
    }
}

/// `item` alone, its bytes held (if they are counted): by the message until
/// it is dropped, or, for a report, until the application takes it.
fn sent(mut item: Inbound, held: Option<Held>) -> Box<Sent> {
    match &mut item {
        Inbound::Request(received) | Inbound::Notification(received) | Inbound::Response(received) => {
            if let Some(held) = held {
                received.hold(held);
            }
            Box::new(Sent { items: vec![item], held: None, pool: None })
        }
        Inbound::Skipped(_) => Box::new(Sent { items: vec![item], held, pool: None }),
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    use super::*;
    use crate::head::Head;
    use crate::host::inbound::{InboundQueue, Received, inbound_channel};

    const MS: Duration = Duration::from_millis(1);
    /// A notification, all of one size; `n` tells them apart.
    fn note(n: u32) -> Inbound {
        let frame = format!(r#"{{"jsonrpc":"2.0","method":"n","params":{{"n":"{n:03}"}}}}"#);
        let frame = frame.as_bytes();
        let message = mcp_framer_jsonrpc::parse(frame).unwrap();
        Inbound::Notification(Received::copied(frame, Head::new(0, frame, &message)))
    }

    /// What one `note` costs.
    fn one() -> usize {
        cost(&note(0))
    }

    fn n_of(item: &Inbound) -> u32 {
        match item {
            Inbound::Notification(received) => {
                let params: serde_json::Value = received.deserialize_payload().unwrap();
                params["n"].as_str().unwrap().parse().unwrap()
            }
            other => panic!("not a note: {other:?}"),
        }
    }

    /// A dispatch with room for `room` notes.
    fn dispatch(room: usize, max_wait: Duration) -> (Dispatch, InboundQueue, Arc<Metrics>) {
        let metrics = Arc::new(Metrics::default());
        let (tx, rx) = inbound_channel();
        let overload = Overload::default()
            .with_max_wait(max_wait)
            .with_max_queued_bytes(room * one())
            .with_policy(OverloadPolicy::Drop);
        (Dispatch::new(tx.0, overload, Arc::clone(&metrics)), rx, metrics)
    }

    /// Polls `offer(item)` without ever letting time pass: at most once per
    /// yield it may make ([`STALL_YIELDS`]) and once more. `None` if it
    /// would have waited (for a timer or for room).
    fn offer_without_waiting(dispatch: &mut Dispatch, item: Inbound) -> Option<Verdict> {
        let mut offer = pin!(dispatch.offer(item));
        (0..=STALL_YIELDS).find_map(|_| match offer.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(verdict) => Some(verdict),
            Poll::Pending => None,
        })
    }

    async fn fill(dispatch: &mut Dispatch, n: u32) {
        for i in 0..n {
            assert!(matches!(dispatch.offer(note(i)).await, Verdict::Queued), "offer {i} of {n}");
        }
    }

    // The real clock: a zero-timeout wait would still go through the timer
    // (pending until its next tick) and add to `dispatch_wait`.
    #[tokio::test]
    async fn the_default_never_waits_not_even_once() {
        let (mut dispatch, mut rx, metrics) = dispatch(8, Overload::default().max_wait);
        fill(&mut dispatch, 8).await;
        for i in 0..100 {
            let verdict = offer_without_waiting(&mut dispatch, note(100 + i));
            assert!(matches!(&verdict, Some(Verdict::Drop(item)) if n_of(item) == 100 + i), "offer {i}: {verdict:?}");
            if i % 10 == 0 {
                // A message dropped by the application frees its bytes; the
                // next offer fits at once, and the episode goes on (more
                // than half the bound is still held).
                drop(rx.recv().await.unwrap());
                assert!(matches!(offer_without_waiting(&mut dispatch, note(7)), Some(Verdict::Queued)));
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
            assert!(matches!(dispatch.offer(note(10 + i)).await, Verdict::Queued), "wait {i}");
        }
        assert_eq!(start.elapsed(), 45 * MS);
        // ...the fourth gets the 5 ms left and is refused...
        assert!(matches!(dispatch.offer(note(13)).await, Verdict::Drop(_)));
        assert_eq!(start.elapsed(), 50 * MS);
        // ...and from then on a message that does not fit is refused at once,
        // however steadily the consumer frees room.
        for i in 0..20 {
            tokio::time::sleep(5 * MS).await;
            let before = Instant::now();
            let _ = dispatch.offer(note(20 + i)).await;
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
        assert!(matches!(dispatch.offer(note(4)).await, Verdict::Drop(_)));
        assert_eq!(metrics.snapshot().dispatch_wait, 10 * MS);

        // Room for one (3 of 4 held): the next message fits, the one after
        // is refused at once; the episode goes on.
        assert_eq!(rx.recv().await.as_ref().map(n_of), Some(0));
        assert!(matches!(dispatch.offer(note(5)).await, Verdict::Queued));
        let before = Instant::now();
        assert!(matches!(dispatch.offer(note(6)).await, Verdict::Drop(_)));
        assert_eq!(before.elapsed(), Duration::ZERO);
        assert!(dispatch.is_overloaded());

        // Drained to half (2 of 4): the episode ends at the next offer.
        assert_eq!(rx.recv().await.as_ref().map(n_of), Some(1));
        assert_eq!(rx.recv().await.as_ref().map(n_of), Some(2));
        assert!(matches!(dispatch.offer(note(7)).await, Verdict::Queued));
        assert!(!dispatch.is_overloaded());
        assert!(matches!(dispatch.offer(note(8)).await, Verdict::Queued));

        // Full again: a new episode, with a fresh budget.
        let before = Instant::now();
        assert!(matches!(dispatch.offer(note(9)).await, Verdict::Drop(_)));
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
        assert!(matches!(dispatch.offer(note(1)).await, Verdict::Unconsumed(_)));
        assert_eq!(start.elapsed(), 5 * MS);
        closer.await.expect("closer");
        // Closed: refused without waiting, room or not.
        assert!(matches!(offer_without_waiting(&mut dispatch, note(2)), Some(Verdict::Unconsumed(_))));
        assert!(
            !dispatch.offer_report(Inbound::Skipped(crate::host::SkippedFrame::Truncated { len: 1, oversize: false }))
        );
        assert_eq!(metrics.snapshot().dispatch_wait, 5 * MS);
    }

    #[tokio::test]
    async fn the_policy_decides_and_one_message_always_fits() {
        let metrics = Arc::new(Metrics::default());
        let (tx, mut rx) = inbound_channel();
        let overload = Overload::default().with_max_queued_bytes(1).with_policy(OverloadPolicy::Reject);
        let mut dispatch = Dispatch::new(tx.0, overload, Arc::clone(&metrics));
        assert!(matches!(dispatch.offer(note(1)).await, Verdict::Queued), "nothing held: one message always fits");
        assert_eq!(dispatch.held_bytes(), 1, "and holds the whole bound");
        assert!(matches!(dispatch.offer(note(2)).await, Verdict::Drop(_)), "Reject drops what is not a request");
        let request = br#"{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage"}"#;
        let message = mcp_framer_jsonrpc::parse(request).unwrap();
        let request = Inbound::Request(Received::copied(request, Head::new(0, request, &message)));
        assert!(matches!(dispatch.offer(request).await, Verdict::Reject(Inbound::Request(_))));
        dispatch.policy = OverloadPolicy::EndSession;
        assert!(matches!(dispatch.offer(note(3)).await, Verdict::End));
        let kept = rx.recv().await.unwrap();
        assert_eq!(dispatch.held_bytes(), 1, "taken but not dropped: still held");
        drop(kept);
        assert_eq!(dispatch.held_bytes(), 0);
        assert_eq!(metrics.snapshot().overload_episodes, 1, "refusals within one episode start no other");
    }

    #[tokio::test]
    async fn reports_hold_their_bytes_until_taken() {
        let (mut dispatch, mut rx, _metrics) = dispatch(2, Duration::ZERO);
        let report = || Inbound::Skipped(crate::host::SkippedFrame::Truncated { len: 1, oversize: false });
        let mut queued = 0;
        while dispatch.offer_report(report()) {
            queued += 1;
            assert!(queued < 1000, "reports are bounded");
        }
        assert!(queued >= 2, "a report costs less than a note: {queued}");
        assert!(rx.try_recv().is_ok());
        assert!(dispatch.offer_report(report()), "taking a report gives its bytes back");
    }

    #[tokio::test]
    async fn a_reader_holds_at_most_the_byte_bound_for_an_application_that_keeps_its_messages() {
        use crate::host::{Reader, SessionConfig};

        let params = "x".repeat(1000);
        let note = format!("{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":\"{params}\"}}\n");
        let frame_len = note.len() - 1;
        let stdout = note.repeat(10);
        let overload = Overload::default()
            .with_policy(OverloadPolicy::Drop)
            .with_max_queued_bytes(3 * (frame_len + ITEM_OVERHEAD));
        // Room for only three frames' worth of bytes.
        let (inbound, mut queue) = inbound_channel();
        let reader = Reader::new(&SessionConfig::default().with_overload(overload), inbound);
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

        use crate::host::{Reader, SessionConfig};

        let note = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n";
        let overload = Overload::default()
            .with_policy(OverloadPolicy::Drop)
            .with_max_queued_bytes(2 * (note.len() - 1 + ITEM_OVERHEAD));
        let (inbound, mut queue) = inbound_channel();
        let reader = Reader::new(&SessionConfig::default().with_overload(overload), inbound);
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
