//! The pending table: requests this session sent and still waits for, by id,
//! and the ids it gave up on (so their late responses are recognised).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::oneshot;
use tokio::task::AbortHandle;

use super::error::{Closed, RequestError};
use super::inbound::Received;
use super::metrics::Metrics;
use super::reader::Responses;
use crate::counter::bump;
use mcp_framer_jsonrpc::{Id, Kind, OwnedId};

/// How many abandoned ids are remembered to tell late responses from
/// unexpected ones. Older ones are forgotten (their late responses are then
/// counted as unexpected; both are ignored).
const REMEMBERED: usize = 4096;

/// Where a request's outcome goes.
pub(crate) type Reply = oneshot::Sender<Result<Received, RequestError>>;

/// A request waiting for its response.
#[derive(Debug)]
pub(crate) struct Waiter {
    pub(crate) reply: Reply,
    pub(crate) method: Box<str>,
    /// Oversize frames skipped (ids not recovered) before it was sent.
    pub(crate) oversize_mark: u64,
    /// Its deadline timer, stopped when the waiter leaves the table.
    pub(crate) timer: Timer,
}

/// A request's deadline task, aborted when dropped.
#[derive(Debug, Default)]
pub(crate) struct Timer(Option<AbortHandle>);

impl Drop for Timer {
    fn drop(&mut self) {
        if let Some(timer) = self.0.take() {
            timer.abort();
        }
    }
}

/// What a response's id refers to.
#[derive(Debug)]
pub(crate) enum Lookup {
    /// A request waiting for it (now removed from the table).
    Waiting(Waiter),
    /// A request that timed out or was cancelled.
    Late,
    /// Nothing this session is waiting for or gave up on.
    Unknown,
}

#[derive(Debug, Default)]
struct Table {
    waiting: HashMap<i64, Waiter>,
    abandoned: HashSet<i64>,
    abandoned_order: VecDeque<i64>,
    closed: Option<Arc<Closed>>,
    /// Oversize frames skipped whose id was not recovered.
    oversize_skipped: u64,
}

/// The pending table, shared by the session (inserts, abandons) and the
/// reader (lookups). Every operation holds the lock only for a map access.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    table: Mutex<Table>,
}

impl Pending {
    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers request `id`; fails if the session has ended.
    pub(crate) fn insert(
        &self,
        id: i64,
        method: &str,
    ) -> Result<oneshot::Receiver<Result<Received, RequestError>>, Arc<Closed>> {
        let mut table = self.lock();
        if let Some(closed) = &table.closed {
            return Err(Arc::clone(closed));
        }
        let (reply, outcome) = oneshot::channel();
        let oversize_mark = table.oversize_skipped;
        table.waiting.insert(id, Waiter { reply, method: method.into(), oversize_mark, timer: Timer::default() });
        Ok(outcome)
    }

    /// Gives waiting request `id` its deadline timer (replacing and stopping
    /// any earlier one); stops `timer` at once if the request is no longer
    /// waiting.
    pub(crate) fn arm(&self, id: i64, timer: AbortHandle) {
        let mut table = self.lock();
        match table.waiting.get_mut(&id) {
            Some(waiter) => waiter.timer = Timer(Some(timer)),
            None => timer.abort(),
        }
    }

    /// An oversize frame was skipped and its id not recovered: every request
    /// waiting now may have been its answer.
    pub(crate) fn note_oversize(&self) {
        self.lock().oversize_skipped += 1;
    }

    /// Oversize frames skipped without a recovered id since `mark`.
    pub(crate) fn oversize_since(&self, mark: u64) -> u64 {
        self.lock().oversize_skipped - mark
    }

    /// Finds the request a response with id `id` answers.
    pub(crate) fn take(&self, id: i64) -> Lookup {
        let mut table = self.lock();
        if let Some(waiter) = table.waiting.remove(&id) {
            return Lookup::Waiting(waiter);
        }
        if table.abandoned.remove(&id) {
            table.abandoned_order.retain(|&old| old != id);
            return Lookup::Late;
        }
        Lookup::Unknown
    }

    /// Stops waiting for `id` (timeout, cancellation, dropped future) and
    /// remembers it so its late response is recognised. Returns the waiter
    /// if it was still waiting.
    pub(crate) fn abandon(&self, id: i64) -> Option<Waiter> {
        let mut table = self.lock();
        let waiter = table.waiting.remove(&id)?;
        if table.abandoned_order.len() == REMEMBERED
            && let Some(oldest) = table.abandoned_order.pop_front()
        {
            table.abandoned.remove(&oldest);
        }
        table.abandoned.insert(id);
        table.abandoned_order.push_back(id);
        Some(waiter)
    }

    /// The method of waiting request `id`.
    pub(crate) fn method(&self, id: i64) -> Option<Box<str>> {
        self.lock().waiting.get(&id).map(|waiter| waiter.method.clone())
    }

    /// The session ended: every waiting request fails with `closed`, and so
    /// does every later [`insert`](Self::insert). The first call wins.
    pub(crate) fn close(&self, closed: Arc<Closed>) {
        let waiters: Vec<Waiter> = {
            let mut table = self.lock();
            if table.closed.is_some() {
                return;
            }
            table.closed = Some(Arc::clone(&closed));
            table.waiting.drain().map(|(_, waiter)| waiter).collect()
        };
        for waiter in waiters {
            let _ = waiter.reply.send(Err(RequestError::Closed(Arc::clone(&closed))));
        }
    }

    /// How the session ended, if it did.
    pub(crate) fn closed(&self) -> Option<Arc<Closed>> {
        self.lock().closed.clone()
    }

    /// The request `id` answers, if `id` is one of this session's.
    fn lookup(&self, id: Option<&OwnedId>) -> Lookup {
        match id {
            Some(Id::Number(id)) => self.take(*id),
            _ => Lookup::Unknown,
        }
    }

    /// Requests still waiting.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().waiting.len()
    }
}

impl Responses for Pending {
    fn response(&self, received: Received, metrics: &Metrics) {
        match self.lookup(received.id()) {
            Lookup::Waiting(waiter) => {
                bump(&metrics.responses);
                let outcome = match received.kind() {
                    Kind::ErrorResponse => Err(RequestError::from_error_response(received)),
                    _ => Ok(received),
                };
                // The requester may have just given up; its guard counts that.
                let _ = waiter.reply.send(outcome);
            }
            Lookup::Late => {
                bump(&metrics.late_responses);
                tracing::debug!("late response for request {:?} ignored", received.id());
            }
            Lookup::Unknown => {
                bump(&metrics.unexpected_responses);
                tracing::warn!("response for unknown request id {:?} ignored", received.id());
            }
        }
    }

    /// Fails the request an oversize response answered, at once; otherwise
    /// lets every waiting request know one was skipped.
    fn oversize(&self, id: Option<&OwnedId>, len: u64, max: u64, metrics: &Metrics) {
        match id.map(|id| (id, self.lookup(Some(id)))) {
            Some((id, Lookup::Waiting(waiter))) => {
                bump(&metrics.oversize_responses);
                tracing::warn!(
                    "request {id} ({}) failed: its response of {len} bytes is over the limit of {max}",
                    waiter.method
                );
                let error = RequestError::Oversize { method: waiter.method.clone(), len, max };
                let _ = waiter.reply.send(Err(error));
            }
            Some((_, Lookup::Late)) => bump(&metrics.late_responses),
            Some((_, Lookup::Unknown)) | None => self.note_oversize(),
        }
    }

    fn close(&self, closed: Arc<Closed>) {
        Pending::close(self, closed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::CloseReason;

    #[test]
    fn responses_find_their_waiter_once_and_late_ones_are_recognised() {
        let pending = Pending::default();
        let _one = pending.insert(1, "ping").unwrap();
        let _two = pending.insert(2, "tools/call").unwrap();
        assert!(matches!(pending.take(1), Lookup::Waiting(w) if &*w.method == "ping"));
        assert!(matches!(pending.take(1), Lookup::Unknown));
        assert!(pending.abandon(2).is_some());
        assert!(pending.abandon(2).is_none());
        assert!(matches!(pending.take(2), Lookup::Late));
        assert!(matches!(pending.take(2), Lookup::Unknown));
        assert_eq!(pending.len(), 0);
    }

    #[test]
    fn abandoned_ids_are_bounded() {
        let pending = Pending::default();
        for id in 0..(REMEMBERED as i64 + 10) {
            let _rx = pending.insert(id, "x").unwrap();
            pending.abandon(id);
        }
        assert!(matches!(pending.take(0), Lookup::Unknown));
        assert!(matches!(pending.take(REMEMBERED as i64 + 9), Lookup::Late));
        assert!(pending.lock().abandoned.len() <= REMEMBERED);
    }

    #[tokio::test]
    async fn closing_fails_every_waiter_and_every_later_request() {
        let pending = Pending::default();
        let waiting = pending.insert(1, "ping").unwrap();
        let closed = Arc::new(Closed::new(CloseReason::StdoutClosed, None, String::from("boom")));
        pending.close(Arc::clone(&closed));
        assert!(matches!(waiting.await.unwrap(), Err(RequestError::Closed(c)) if Arc::ptr_eq(&c, &closed)));
        assert!(pending.insert(2, "ping").is_err());
        assert!(pending.closed().is_some());
    }
}
