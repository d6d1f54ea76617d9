//! The byte bound of a queue: the host's inbound queue of server messages and
//! the server's stdout queue both count the bytes they hold with it.
//!
//! # Contract
//!
//! * A [`ByteBound`] of `max` bytes hands out [`Held`] guards. The bytes of
//!   the guards alive never add up to more than `max`: an item is admitted
//!   only if its bytes fit in what is left, and they are given back when its
//!   guard is dropped. A guard cannot be cloned, so nothing spends the
//!   budget twice or behind the bound's back.
//! * An item larger than the whole bound counts as exactly `max` bytes: it
//!   is admitted only when nothing else is held, and then holds everything,
//!   so one item always fits, whatever its size, and never more than one such
//!   item at a time.
//! * [`ByteBound::try_acquire`] never waits. [`ByteBound::acquire`] waits for
//!   room, first come first served, and is cancel-safe; once the bound is
//!   [closed](ByteBound::close) every waiter wakes with `None` and nothing is
//!   admitted any more.
//! * `max` is at least 1 and at most `u32::MAX` bytes (the semaphore counts in
//!   `u32`); values outside are clamped.
//!
//! It is a tokio [`Semaphore`] with one permit per byte, and fair: a waiting
//! `acquire` of a large item collects the permits released while it waits
//! (tokio's batch semaphore hands a queued `acquire_many` every free permit)
//! and, until it has them all, later small items and every `try_acquire`
//! find no room even though the bytes held are well under the bound. So a
//! bound whose small items must never wait behind a large one is a bound of
//! their own: the server's stdout queue has two (tool results, which wait;
//! the stdin loop's replies, reserved); the host's inbound queue has one
//! waiter at most (the reader, and only under an opt-in wait budget).

use std::fmt;
use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A bound on the bytes held by the items of a queue. Clones share the bound.
#[derive(Clone)]
pub(crate) struct ByteBound {
    room: Arc<Semaphore>,
    max: usize,
}

/// The bytes of one item, counted against its [`ByteBound`] until dropped.
pub(crate) struct Held {
    _permit: OwnedSemaphorePermit,
}

impl ByteBound {
    /// A bound of `max` bytes (clamped to `1..=u32::MAX`).
    pub(crate) fn new(max: usize) -> ByteBound {
        let max = max.clamp(1, u32::MAX as usize);
        ByteBound { room: Arc::new(Semaphore::new(max)), max }
    }

    /// What an item of `len` bytes counts for: its length, at most `max`.
    fn cost(&self, len: usize) -> u32 {
        // `max` fits in a u32 (see `new`).
        len.min(self.max) as u32
    }

    /// Admits an item of `len` bytes if it fits now; never waits.
    pub(crate) fn try_acquire(&self, len: usize) -> Option<Held> {
        let permit = Arc::clone(&self.room).try_acquire_many_owned(self.cost(len)).ok()?;
        Some(Held { _permit: permit })
    }

    /// Waits until an item of `len` bytes fits and admits it; `None` once the
    /// bound is closed. Cancel-safe.
    pub(crate) async fn acquire(&self, len: usize) -> Option<Held> {
        let permit = Arc::clone(&self.room).acquire_many_owned(self.cost(len)).await.ok()?;
        Some(Held { _permit: permit })
    }

    /// Bytes held by the items alive.
    pub(crate) fn held(&self) -> usize {
        self.max - self.room.available_permits().min(self.max)
    }

    /// The bound, in bytes (after clamping).
    #[cfg_attr(not(feature = "host"), allow(dead_code))] // the server never asks
    pub(crate) fn max(&self) -> usize {
        self.max
    }

    /// Wakes every waiter with `None` and admits nothing from now on.
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    pub(crate) fn close(&self) {
        self.room.close();
    }
}

impl fmt::Debug for ByteBound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ByteBound").field("held", &self.held()).field("max", &self.max).finish()
    }
}

impl fmt::Debug for Held {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Held").field("bytes", &self._permit.num_permits()).finish()
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    use super::*;

    #[test]
    fn bytes_are_held_until_dropped_and_never_over_the_bound() {
        let bound = ByteBound::new(100);
        let a = bound.try_acquire(60).expect("60 of 100");
        let b = bound.try_acquire(40).expect("exactly at the bound");
        assert!(bound.try_acquire(1).is_none(), "one byte over the bound");
        assert_eq!(bound.held(), 100);
        drop(b);
        assert!(bound.try_acquire(41).is_none(), "40 free");
        let c = bound.try_acquire(40).expect("room again once dropped");
        drop((a, c));
        assert_eq!(bound.held(), 0);
        assert!(bound.try_acquire(0).is_some(), "an empty item always fits");
    }

    #[test]
    fn an_item_over_the_bound_fits_alone_and_holds_everything() {
        let bound = ByteBound::new(100);
        let huge = bound.try_acquire(250).expect("one item always fits when none is held");
        assert_eq!(bound.held(), 100);
        assert!(bound.try_acquire(1).is_none());
        drop(huge);
        let small = bound.try_acquire(1).unwrap();
        assert!(bound.try_acquire(250).is_none(), "not while anything else is held");
        drop(small);
        assert!(bound.try_acquire(250).is_some());
    }

    #[test]
    fn zero_and_huge_bounds_are_clamped() {
        let zero = ByteBound::new(0);
        assert_eq!(zero.max(), 1);
        let one = zero.try_acquire(10).expect("one item at a time");
        assert!(zero.try_acquire(10).is_none());
        drop(one);
        assert_eq!(ByteBound::new(usize::MAX).max(), u32::MAX as usize);
    }

    #[tokio::test]
    async fn a_waiter_gets_room_when_it_is_released_and_none_once_closed() {
        let bound = ByteBound::new(10);
        let all = bound.acquire(10).await.unwrap();
        let mut waiting = pin!(bound.acquire(5));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(waiting.as_mut().poll(&mut cx).is_pending());
        drop(all);
        assert!(matches!(waiting.as_mut().poll(&mut cx), Poll::Ready(Some(_))));

        let held = bound.acquire(10).await;
        let mut refused = pin!(bound.acquire(1));
        assert!(refused.as_mut().poll(&mut cx).is_pending());
        bound.close();
        assert!(matches!(refused.as_mut().poll(&mut cx), Poll::Ready(None)), "woken by close");
        drop(held);
        assert!(bound.try_acquire(1).is_none(), "closed: nothing admitted");
    }
}
