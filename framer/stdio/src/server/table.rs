//! The request table: each request id in flight, its state, and the
//! [`Scope`] that owns its producers.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::cancel::Scope;
use mcp_framer_jsonrpc::OwnedId;

/// Where a request is in its life.
///
/// # States and cancellation
///
/// A request enters as [`State::Queued`] (waiting for a concurrency permit),
/// becomes [`State::Running`] when its handler starts and
/// [`State::Writing`] once its response is committed to the writer; it leaves
/// the table when that frame has been written (done). A
/// `notifications/cancelled` for it:
///
/// * **queued**: the entry is removed and its token cancelled, so it never
///   starts and gets no response;
/// * **running**: the entry is removed and its [`Scope`] cancelled: token
///   cancelled, child process groups killed, tasks (the handler's own
///   included) aborted. No response is sent;
/// * **writing**: nothing happens; the frame completes (bytes cannot be
///   retracted);
/// * **done, or an unknown id**: ignored.
///
/// Transitions are checked under one lock, so a cancellation and a state
/// change never both win.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum State {
    /// Waiting for a concurrency permit; not started.
    Queued,
    /// Its handler is running.
    Running,
    /// Its response is committed to the writer.
    Writing,
}

/// What a cancellation did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CancelOutcome {
    /// Cancelled before it started.
    Queued,
    /// Cancelled while running: producers stopped.
    Running,
    /// Too late: the response is being written.
    Writing,
    /// Not in the table: done, or never seen.
    Unknown,
}

#[derive(Debug)]
struct Entry {
    state: State,
    scope: Scope,
}

/// The requests in flight, by id.
#[derive(Debug, Default)]
pub(crate) struct Table {
    entries: Mutex<HashMap<OwnedId, Entry>>,
}

impl Table {
    fn lock(&self) -> MutexGuard<'_, HashMap<OwnedId, Entry>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds a queued request; `false` if the id is already in flight.
    pub(crate) fn insert(&self, id: OwnedId, scope: Scope) -> bool {
        let mut entries = self.lock();
        if entries.contains_key(&id) {
            return false;
        }
        entries.insert(id, Entry { state: State::Queued, scope });
        true
    }

    /// Whether `id` is in flight (in any state: its response not yet
    /// written).
    pub(crate) fn contains(&self, id: &OwnedId) -> bool {
        self.lock().contains_key(id)
    }

    /// Queued -> Running; `false` if it was cancelled meanwhile.
    pub(crate) fn start(&self, id: &OwnedId) -> bool {
        self.advance(id, State::Queued, State::Running)
    }

    /// Running -> Writing; `false` if it was cancelled meanwhile.
    pub(crate) fn begin_writing(&self, id: &OwnedId) -> bool {
        self.advance(id, State::Running, State::Writing)
    }

    fn advance(&self, id: &OwnedId, from: State, to: State) -> bool {
        match self.lock().get_mut(id) {
            Some(entry) if entry.state == from => {
                entry.state = to;
                true
            }
            _ => false,
        }
    }

    /// Removes a request that is done (its frame written, or it ended without
    /// a response).
    pub(crate) fn finish(&self, id: &OwnedId) {
        self.lock().remove(id);
    }

    /// Handles `notifications/cancelled` for `id`; see the module docs.
    pub(crate) fn cancel(&self, id: &OwnedId) -> CancelOutcome {
        let removed = {
            let mut entries = self.lock();
            match entries.get(id).map(|e| e.state) {
                None => return CancelOutcome::Unknown,
                Some(State::Writing) => return CancelOutcome::Writing,
                Some(_) => entries.remove(id).expect("present"),
            }
        };
        // Killing and aborting happen outside the lock.
        removed.scope.cancel();
        match removed.state {
            State::Queued => CancelOutcome::Queued,
            _ => CancelOutcome::Running,
        }
    }

    /// The state of `id`, if in flight.
    #[cfg(test)]
    pub(crate) fn state(&self, id: &OwnedId) -> Option<State> {
        self.lock().get(id).map(|e| e.state)
    }

    /// How many requests are in each state: (queued, running, writing).
    pub(crate) fn counts(&self) -> (usize, usize, usize) {
        self.lock().values().fold((0, 0, 0), |(q, r, w), e| match e.state {
            State::Queued => (q + 1, r, w),
            State::Running => (q, r + 1, w),
            State::Writing => (q, r, w + 1),
        })
    }

    /// Cancels every queued or running request (shutdown); returns their
    /// ids. A request already writing is left to finish.
    pub(crate) fn cancel_all(&self) -> Vec<OwnedId> {
        let ids: Vec<OwnedId> = self.lock().keys().cloned().collect();
        ids.into_iter().filter(|id| matches!(self.cancel(id), CancelOutcome::Queued | CancelOutcome::Running)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancellation_depends_on_the_state() {
        let table = Table::default();
        let (queued, running, writing) = (OwnedId::Number(1), OwnedId::from("two".to_owned()), OwnedId::Number(3));
        let scopes = [Scope::new(), Scope::new(), Scope::new()];
        assert!(table.insert(queued.clone(), scopes[0].clone()));
        assert!(table.insert(running.clone(), scopes[1].clone()));
        assert!(table.insert(writing.clone(), scopes[2].clone()));
        assert!(!table.insert(queued.clone(), Scope::new()), "duplicate id in flight");
        assert!(table.start(&running));
        assert!(table.start(&writing) && table.begin_writing(&writing));
        assert_eq!(table.counts(), (1, 1, 1));

        assert_eq!(table.cancel(&queued), CancelOutcome::Queued);
        assert!(scopes[0].is_cancelled());
        assert!(!table.start(&queued), "a cancelled request never starts");

        assert_eq!(table.cancel(&running), CancelOutcome::Running);
        assert!(scopes[1].is_cancelled());
        assert!(!table.begin_writing(&running), "a cancelled request never writes");

        assert_eq!(table.cancel(&writing), CancelOutcome::Writing);
        assert!(!scopes[2].is_cancelled(), "a response being written is left alone");
        assert_eq!(table.state(&writing), Some(State::Writing));
        table.finish(&writing);

        assert_eq!(table.cancel(&writing), CancelOutcome::Unknown, "late cancel for a done request");
        assert_eq!(table.cancel(&OwnedId::Number(99)), CancelOutcome::Unknown);
        assert_eq!(table.counts(), (0, 0, 0));
    }

    #[test]
    fn string_and_number_ids_are_distinct() {
        let table = Table::default();
        assert!(table.insert(OwnedId::Number(7), Scope::new()));
        assert!(table.insert(OwnedId::from("7".to_owned()), Scope::new()));
        assert_eq!(table.cancel(&OwnedId::from("7".to_owned())), CancelOutcome::Queued);
        assert_eq!(table.state(&OwnedId::Number(7)), Some(State::Queued));
        assert!(table.contains(&OwnedId::Number(7)) && !table.contains(&OwnedId::from("7".to_owned())));
        assert_eq!(table.cancel_all(), [OwnedId::Number(7)]);
        assert!(!table.contains(&OwnedId::Number(7)), "cancelled ones leave the table");
    }
}
