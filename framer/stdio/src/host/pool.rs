//! The way back for a batch's storage. The reader copies the messages of one
//! read into one buffer and hands them over with one item vector (see
//! [`Reader`](super::Reader)); when the application drops the last message of
//! the batch its buffer comes back here, and when it has taken the batch's
//! last item the emptied item vector does. The reader takes them for a later
//! read instead of allocating afresh. Without it, every read allocates its
//! buffers and the application frees them, and an allocator that gives freed
//! memory back to the system (glibc trims its heap past 128 KiB free at the
//! top) makes every read fault its pages in again.
//!
//! # Contract
//!
//! * **Bounded.** A [`Pool`] keeps at most [`SPARES`] buffers and [`SPARES`]
//!   item vectors, and at most its `max_bytes` of capacity in all (a
//!   vector's capacity times the size of its element). What does not fit is
//!   freed as before; so is everything once the pool is dropped.
//! * **One large storage, only mid-frame.** The storage of a frame larger
//!   than `max_bytes` (one the framer gave away with its frame) is kept in
//!   one more slot, only while the reader has a frame in progress and its
//!   framer's own storage is at most 1 MiB, and the reader hands it to the
//!   framer at its next read ([`Framer::recycle`](mcp_framer::Framer::recycle)),
//!   so that the frame grows in pages already touched. Between frames the
//!   slot is emptied (freed): a reader waiting on a quiet pipe keeps none.
//! * **Holds no message.** What comes back is emptied first: a pooled buffer
//!   is spare capacity, not bytes of the queue, and counts against no queue
//!   bound (those count the frames' bytes of the messages alive).
//! * **Never waits.** Taking and giving back try the lock once: if the other
//!   side holds it at that instant, the buffer is freed (or a fresh one
//!   allocated) instead. Nothing here blocks a thread or a task.

use std::fmt;
use std::sync::Mutex;

/// How many buffers, and how many item vectors, a [`Pool`] keeps at most.
/// Two: the batch the application is taking and the one the reader fills.
pub(crate) const SPARES: usize = 2;

/// Spare buffers (`Vec<u8>`) and item vectors (`Vec<I>`) of one connection.
pub(crate) struct Pool<I> {
    spare: Mutex<Spare<I>>,
    max_bytes: usize,
}

struct Spare<I> {
    buffers: [Option<Vec<u8>>; SPARES],
    items: [Option<Vec<I>>; SPARES],
    /// The capacity kept, in bytes.
    bytes: usize,
    /// The storage of one large frame (more than `max_bytes`), kept only
    /// while the reader has a frame in progress, for its framer to grow in
    /// ([`Framer::recycle`](mcp_framer::Framer::recycle)).
    large: Option<Vec<u8>>,
    /// Whether the reader has a frame in progress: large storage is kept.
    want_large: bool,
    /// Large storages taken back by the reader so far (tests).
    large_taken: u64,
}

/// What `vec`'s capacity takes, in bytes.
fn bytes_of<T>(vec: &Vec<T>) -> usize {
    vec.capacity().saturating_mul(size_of::<T>())
}

/// Takes the first vector kept in `slots`, taking its capacity off `bytes`.
fn take<T>(slots: &mut [Option<Vec<T>>], bytes: &mut usize) -> Option<Vec<T>> {
    let vec = slots.iter_mut().find_map(Option::take)?;
    *bytes -= bytes_of(&vec);
    Some(vec)
}

/// Keeps `vec` (empty) in a free slot if its capacity fits in what is left
/// of `max`; otherwise gives it back.
fn keep<T>(slots: &mut [Option<Vec<T>>], bytes: &mut usize, max: usize, vec: Vec<T>) -> Result<(), Vec<T>> {
    let size = bytes_of(&vec);
    if size == 0 || size > max.saturating_sub(*bytes) {
        return Err(vec);
    }
    match slots.iter_mut().find(|slot| slot.is_none()) {
        Some(slot) => {
            *bytes += size;
            *slot = Some(vec);
            Ok(())
        }
        None => Err(vec),
    }
}

impl<I> Pool<I> {
    /// An empty pool that keeps at most `max_bytes` of capacity.
    pub(crate) fn new(max_bytes: usize) -> Pool<I> {
        Pool {
            spare: Mutex::new(Spare {
                buffers: [None, None],
                items: [None, None],
                bytes: 0,
                large: None,
                want_large: false,
                large_taken: 0,
            }),
            max_bytes,
        }
    }

    /// An empty buffer kept here, if any.
    pub(crate) fn take_buffer(&self) -> Option<Vec<u8>> {
        let mut spare = self.spare.try_lock().ok()?;
        let Spare { buffers, bytes, .. } = &mut *spare;
        take(buffers, bytes)
    }

    /// An empty item vector kept here, if any.
    pub(crate) fn take_items(&self) -> Option<Vec<I>> {
        let mut spare = self.spare.try_lock().ok()?;
        let Spare { items, bytes, .. } = &mut *spare;
        take(items, bytes)
    }

    /// Whether no buffer is kept here (a buffer being given back right now
    /// counts as kept).
    pub(crate) fn lacks_buffer(&self) -> bool {
        self.spare.try_lock().is_ok_and(|spare| spare.buffers.iter().all(Option::is_none))
    }

    /// Keeps `buffer`, emptied, if there is room; frees it otherwise. A
    /// buffer larger than the pool's bytes (a large frame's storage) is
    /// kept in the one large slot while the reader has a frame in progress
    /// ([`want_large`](Pool::want_large)) and the slot is free; it keeps
    /// its length, so its framer does not zero it again (its stale bytes
    /// are never read: they are lent to reads, which overwrite them).
    pub(crate) fn give_buffer(&self, mut buffer: Vec<u8>) {
        // Freed, when it is, after the lock is released.
        let _left = match self.spare.try_lock() {
            Ok(mut spare) => {
                let Spare { buffers, bytes, large, want_large, .. } = &mut *spare;
                if bytes_of(&buffer) > self.max_bytes {
                    match large {
                        None if *want_large => {
                            *large = Some(buffer);
                            None
                        }
                        _ => Some(buffer),
                    }
                } else {
                    buffer.clear();
                    keep(buffers, bytes, self.max_bytes, buffer).err()
                }
            }
            Err(_) => Some(buffer),
        };
    }

    /// The large frame's storage kept here, if any.
    pub(crate) fn take_large(&self) -> Option<Vec<u8>> {
        let mut spare = self.spare.try_lock().ok()?;
        let large = spare.large.take()?;
        spare.large_taken += 1;
        Some(large)
    }

    /// Whether the reader has a frame in progress, so a large frame's
    /// storage given back is kept for it; when not, what is kept is freed.
    /// Called by the reader before it hands a large frame over and after
    /// every read. If the lock is busy the large slot is left as it is
    /// until the next call.
    pub(crate) fn want_large(&self, want: bool) {
        let _left = match self.spare.try_lock() {
            Ok(mut spare) => {
                spare.want_large = want;
                if want { None } else { spare.large.take() }
            }
            Err(_) => None,
        };
    }

    /// Keeps `items`, emptied, if there is room; frees it otherwise.
    pub(crate) fn give_items(&self, mut items: Vec<I>) {
        items.clear();
        let _left = match self.spare.try_lock() {
            Ok(mut spare) => {
                let Spare { items: slots, bytes, .. } = &mut *spare;
                keep(slots, bytes, self.max_bytes, items).err()
            }
            Err(_) => Some(items),
        };
    }

    /// How many large storages the reader took back.
    #[cfg(test)]
    pub(crate) fn large_taken(&self) -> u64 {
        self.spare.lock().unwrap().large_taken
    }

    /// The capacity of the large storage kept, if any.
    #[cfg(test)]
    pub(crate) fn large_kept(&self) -> Option<usize> {
        self.spare.lock().unwrap().large.as_ref().map(Vec::capacity)
    }

    /// Where the item vectors kept start.
    #[cfg(test)]
    pub(crate) fn items_at(&self) -> Vec<*const I> {
        let spare = self.spare.lock().unwrap();
        spare.items.iter().flatten().map(|items| items.as_ptr()).collect()
    }

    /// What is kept: buffers, item vectors, bytes of capacity.
    #[cfg(test)]
    pub(crate) fn kept(&self) -> (usize, usize, usize) {
        let spare = self.spare.lock().unwrap();
        let buffers = spare.buffers.iter().flatten().count();
        (buffers, spare.items.iter().flatten().count(), spare.bytes)
    }
}

impl<I> fmt::Debug for Pool<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut debug = f.debug_struct("Pool");
        if let Ok(spare) = self.spare.try_lock() {
            debug.field("bytes", &spare.bytes);
        }
        debug.field("max_bytes", &self.max_bytes).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_comes_back_is_taken_again_empty() {
        let pool = Pool::<u64>::new(1 << 20);
        let mut buffer = Vec::with_capacity(1000);
        buffer.extend_from_slice(b"old frames");
        let at = buffer.as_ptr();
        pool.give_buffer(buffer);
        assert_eq!(pool.kept(), (1, 0, 1000));
        let again = pool.take_buffer().expect("kept");
        assert_eq!((again.as_ptr(), again.len(), again.capacity()), (at, 0, 1000), "the same storage, emptied");
        assert_eq!(pool.kept(), (0, 0, 0));
        assert!(pool.take_buffer().is_none());

        let items: Vec<u64> = Vec::with_capacity(10);
        let at = items.as_ptr();
        pool.give_items(items);
        assert_eq!(pool.kept(), (0, 1, 80), "counted by capacity times the item's size");
        assert_eq!(pool.take_items().map(|v| v.as_ptr()), Some(at));
    }

    #[test]
    fn the_pool_keeps_at_most_two_of_each_within_its_bytes() {
        let pool = Pool::<u64>::new(4096);
        for _ in 0..5 {
            pool.give_buffer(Vec::with_capacity(1000));
        }
        assert_eq!(pool.kept(), (SPARES, 0, 2000), "the third buffer on is freed");
        pool.give_buffer(Vec::with_capacity(2097));
        assert_eq!(pool.kept(), (SPARES, 0, 2000), "no slot free");
        let _one = pool.take_buffer().unwrap();
        pool.give_buffer(Vec::with_capacity(3097));
        assert_eq!(pool.kept(), (1, 0, 1000), "over what is left of the bytes");
        pool.give_items(Vec::with_capacity(300));
        assert_eq!(pool.kept(), (1, 1, 3400));
        pool.give_items(Vec::with_capacity(100));
        assert_eq!(pool.kept(), (1, 1, 3400), "800 more bytes would pass 4096");
        pool.give_items(Vec::with_capacity(80));
        assert_eq!(pool.kept(), (1, 2, 4040));
        pool.give_items(Vec::new());
        pool.give_buffer(Vec::new());
        assert_eq!(pool.kept(), (1, 2, 4040), "nothing to keep in an unallocated vector");
        // Over the pool's bytes: the large slot, while wanted.
        let large = Pool::<u64>::new(4096);
        large.give_buffer(Vec::with_capacity(8192));
        assert_eq!((large.kept(), large.large_kept()), ((0, 0, 0), None), "no frame in progress: freed");
        large.want_large(true);
        large.give_buffer(Vec::with_capacity(8192));
        large.give_buffer(Vec::with_capacity(9000));
        assert_eq!((large.kept(), large.large_kept()), ((0, 0, 0), Some(8192)), "one large slot");
        large.want_large(false);
        assert_eq!(large.large_kept(), None, "freed when no frame is in progress");
        large.want_large(true);
        large.give_buffer(Vec::with_capacity(8192));
        assert_eq!(large.take_large().map(|b| b.capacity()), Some(8192));
        assert_eq!(large.large_kept(), None);
        let small = Pool::<u8>::new(0);
        small.give_buffer(Vec::with_capacity(1));
        assert_eq!(small.kept(), (0, 0, 0), "a pool of no bytes keeps nothing");
    }
}
