//! Request bodies: read under the transport limit and the budget of bodies
//! arriving at once, or skipped to their end.
//!
//! # Contract
//!
//! * A body is counted as its DATA frames arrive, and on `content-length`
//!   up front, before any parse: over the limit is [`BodyEnd::Oversize`].
//! * Every byte kept is taken from the [`Assembling`] budget first, shared
//!   by all the streams: a declared length is taken whole before anything
//!   is reserved for it (so a false `content-length` reserves nothing
//!   beyond the budget), a body without one chunk by chunk. A body that
//!   does not fit is [`BodyEnd::Busy`]; nothing is ever waited for, since
//!   waiting while holding part of a body can deadlock two bodies against
//!   each other.
//! * Window is given back as the bytes are taken, and as skipped bytes are
//!   thrown away, so a refused body never holds the connection's window.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use h2::RecvStream;

/// The bytes of request bodies held at once, over every stream.
#[derive(Debug)]
pub(super) struct Assembling {
    used: AtomicUsize,
    max: usize,
}

impl Assembling {
    pub(super) fn new(max: usize) -> Arc<Assembling> {
        Arc::new(Assembling { used: AtomicUsize::new(0), max })
    }

    pub(super) fn max(&self) -> usize {
        self.max
    }
}

/// One body's share of the [`Assembling`] budget, given back when dropped
/// (once the body is handed to the dispatcher, or refused).
#[derive(Debug)]
pub(super) struct Share {
    budget: Arc<Assembling>,
    bytes: usize,
}

impl Share {
    pub(super) fn new(budget: &Arc<Assembling>) -> Share {
        Share { budget: Arc::clone(budget), bytes: 0 }
    }

    /// Takes `n` more bytes; false (nothing taken) if they do not fit.
    fn take(&mut self, n: usize) -> bool {
        let max = self.budget.max;
        let fits = self
            .budget
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| now.checked_add(n).filter(|&after| after <= max))
            .is_ok();
        if fits {
            self.bytes += n;
        }
        fits
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

/// Why a body was not read whole.
#[derive(Debug)]
pub(super) enum BodyEnd {
    /// The bodies arriving at once would go over the budget: `received`
    /// bytes of this one had arrived (and were dropped).
    Busy { received: u64 },
    /// Over the limit: `len` bytes (at least, if the body went on), of
    /// which `received` arrived (and were dropped).
    Oversize { len: u64, at_least: bool, received: u64 },
    /// The client reset the stream.
    Reset,
}

/// Reads a request body of at most `max` bytes into memory taken from
/// `share` first (see the [module](self)).
pub(super) async fn read_body(
    body: &mut RecvStream,
    declared: Option<u64>,
    max: usize,
    share: &mut Share,
) -> Result<Vec<u8>, BodyEnd> {
    if let Some(len) = declared
        && len > max as u64
    {
        return Err(BodyEnd::Oversize { len, at_least: false, received: 0 });
    }
    // Nothing is reserved for a declared length: a client may declare the
    // limit on every stream and send nothing. Memory follows what arrived
    // and was taken from the budget (h2 ends a stream whose DATA differs
    // from its `content-length`: `Reset` here).
    let mut bytes = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.map_err(|_| BodyEnd::Reset)?;
        let _ = body.flow_control().release_capacity(chunk.len());
        let len = bytes.len() + chunk.len();
        if len > max {
            return Err(BodyEnd::Oversize { len: len as u64, at_least: !body.is_end_stream(), received: len as u64 });
        }
        if !share.take(chunk.len()) {
            return Err(BodyEnd::Busy { received: len as u64 });
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

/// Reads the rest of a body to its end (or the stream's reset) and throws
/// it away, giving the window back; the bytes read.
pub(super) async fn skip_body(body: &mut RecvStream) -> u64 {
    let mut skipped = 0;
    while let Some(Ok(chunk)) = body.data().await {
        let _ = body.flow_control().release_capacity(chunk.len());
        skipped += chunk.len() as u64;
    }
    skipped
}
