//! The hand-off from the reader to the application: a bounded queue, a bound
//! on how long the reader waits for room in it, and the policy applied when
//! the queue stays full.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc::{self, error::SendTimeoutError, error::TrySendError};

use super::metrics::{Metrics, bump};

/// The JSON-RPC error code of the reply sent under [`OverloadPolicy::Reject`]
/// (-32000 is the first of JSON-RPC's implementation-defined server errors).
pub const OVERLOADED: i64 = -32000;

/// The message of the reply sent under [`OverloadPolicy::Reject`].
pub const OVERLOADED_MESSAGE: &str = "host overloaded: request dropped, try again later";

/// What the reader does with a server message when the application's queue
/// stayed full for the whole [`Overload::max_wait`].
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

/// How the reader hands messages to a full queue.
///
/// The reader first tries to queue a message without waiting. If the queue is
/// full it waits for room, at most `max_wait`. If the wait runs out the queue
/// is **overloaded**: that message and every later one that does not fit at
/// once get the [`OverloadPolicy`], with no further waiting, until a message
/// fits again. So the reader waits at most `max_wait` per overload episode,
/// never per message, and a slow consumer cannot throttle the pipe.
///
/// ```
/// use std::time::Duration;
/// use mcp_framer::host::{Overload, OverloadPolicy};
///
/// let overload = Overload { policy: OverloadPolicy::Drop, max_wait: Duration::from_millis(5) };
/// assert_eq!(Overload::default().policy, OverloadPolicy::Reject);
/// # let _ = overload;
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Overload {
    /// What to do when the queue stays full. Default: [`OverloadPolicy::Reject`].
    pub policy: OverloadPolicy,
    /// The longest the reader waits for room before the policy applies.
    /// Default: 100 ms.
    pub max_wait: Duration,
}

impl Default for Overload {
    fn default() -> Self {
        Overload { policy: OverloadPolicy::default(), max_wait: Duration::from_millis(100) }
    }
}

/// The result of offering an item to the queue.
#[derive(Debug)]
pub(crate) enum Offer<T> {
    /// Queued.
    Delivered,
    /// The queue is overloaded (or its receiver is gone): apply the policy.
    Refused(T),
}

/// The sending side of the application queue, with the wait bound and the
/// overload state. Owned by the reader.
#[derive(Debug)]
pub(crate) struct Dispatch<T> {
    queue: mpsc::Sender<T>,
    max_wait: Duration,
    overloaded: bool,
    metrics: Arc<Metrics>,
}

impl<T> Dispatch<T> {
    pub(crate) fn new(queue: mpsc::Sender<T>, max_wait: Duration, metrics: Arc<Metrics>) -> Self {
        Dispatch { queue, max_wait, overloaded: false, metrics }
    }

    /// Queues `item`, waiting for room at most `max_wait` and only when not
    /// already overloaded. Time spent waiting is added to the metrics. A
    /// closed queue (receiver dropped) counts as permanently full.
    pub(crate) async fn offer(&mut self, item: T) -> Offer<T> {
        let item = match self.queue.try_send(item) {
            Ok(()) => {
                self.overloaded = false;
                return Offer::Delivered;
            }
            Err(TrySendError::Closed(item)) => return Offer::Refused(item),
            Err(TrySendError::Full(item)) if self.overloaded => return Offer::Refused(item),
            Err(TrySendError::Full(item)) => item,
        };
        let started = Instant::now();
        let sent = self.queue.send_timeout(item, self.max_wait).await;
        self.metrics.add_dispatch_wait(started.elapsed());
        match sent {
            Ok(()) => Offer::Delivered,
            Err(SendTimeoutError::Timeout(item)) => {
                self.overloaded = true;
                bump(&self.metrics.overload_episodes);
                Offer::Refused(item)
            }
            Err(SendTimeoutError::Closed(item)) => Offer::Refused(item),
        }
    }

    /// Queues `item` only if there is room right now (for reports, which
    /// are also counted in the metrics and need no policy).
    pub(crate) fn offer_now(&mut self, item: T) -> bool {
        self.queue.try_send(item).is_ok()
    }

    /// Whether the last offer found the queue overloaded.
    #[cfg(test)]
    pub(crate) fn is_overloaded(&self) -> bool {
        self.overloaded
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn waits_once_per_episode_then_refuses_at_once_until_room_returns() {
        let metrics = Arc::new(Metrics::default());
        let (tx, mut rx) = mpsc::channel(1);
        let mut dispatch = Dispatch::new(tx, Duration::from_millis(20), Arc::clone(&metrics));
        assert!(matches!(dispatch.offer(1).await, Offer::Delivered));

        let started = Instant::now();
        assert!(matches!(dispatch.offer(2).await, Offer::Refused(2)));
        assert!(started.elapsed() >= Duration::from_millis(20));
        assert!(dispatch.is_overloaded());
        // Overloaded: refused without waiting (a generous bound, far below
        // the 100 waits it would take otherwise).
        let started = Instant::now();
        for i in 0..100 {
            assert!(matches!(dispatch.offer(i).await, Offer::Refused(_)));
        }
        assert!(started.elapsed() < Duration::from_millis(20 * 100));
        let snapshot = metrics.snapshot();
        assert_eq!(snapshot.overload_episodes, 1);
        assert!(snapshot.dispatch_wait >= Duration::from_millis(20));

        // Room again: delivered, and the episode is over.
        assert_eq!(rx.recv().await, Some(1));
        assert!(matches!(dispatch.offer(3).await, Offer::Delivered));
        assert!(!dispatch.is_overloaded());
        assert!(!dispatch.offer_now(4));
        drop(rx);
        assert!(matches!(dispatch.offer(5).await, Offer::Refused(5)));
    }
}
