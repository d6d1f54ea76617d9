//! The counters of the host's metrics and of the server's report: atomics
//! that only grow (but for [`undo`], which takes back an `add` whose event
//! did not happen after all), updated with relaxed ordering (each value is exact; a set
//! of them read at once is not one atomic picture).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Adds `n` to a counter.
pub(crate) fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Relaxed);
}

/// Takes back `n` added ahead of an event that then did not happen (a
/// message counted as delivered before it was queued, whose queue closed).
#[cfg(feature = "host")]
pub(crate) fn undo(counter: &AtomicU64, n: u64) {
    counter.fetch_sub(n, Relaxed);
}

/// Adds one to a counter.
pub(crate) fn bump(counter: &AtomicU64) {
    add(counter, 1);
}

/// Reads a counter.
pub(crate) fn get(counter: &AtomicU64) -> u64 {
    counter.load(Relaxed)
}
