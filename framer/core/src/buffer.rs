//! The framer's byte buffer: growth that touches only what is lent and
//! holds a line once, rare tail moves, storage given away with a large frame
//! or given back after it, a hard cap.
//!
//! Layout, as in ripgrep's line buffer:
//!
//! ```text
//! 0 ...... start ...... scan ...... end ...... data.len() ...... data.capacity()
//!   consumed  | scanned, no '\n' | unscanned | spare, initialised | reserved, untouched
//! ```
//!
//! `start..end` is the live region: the current candidate frame plus any
//! complete frames not yet handed out. `scan` is where the next search for
//! `\n` resumes, so no byte is searched twice (tokio-util's `next_index`).
//!
//! Memory (all in safe code):
//!
//! * `data.len()` is the initialised prefix. Storage grows by reserving
//!   capacity and initialises only what [`spare`](Buffer::spare) lends or
//!   [`append`](Buffer::append) writes, so reserved pages the stream never
//!   reaches are never touched.
//! * **A line is held once.** Storage doubles while small; once a line
//!   outgrows 1 MiB it goes straight to the retention threshold if the line
//!   fits in it (storage the framer keeps: never released, so a session of
//!   large frames reuses it), else to its cap (`max_frame + 1 + read_size`
//!   for a framer), reserved but untouched, so the line grows to the limit
//!   without moving again. Every resize moves the live bytes to the front in
//!   place and resizes the allocation in place where the allocator can: the
//!   old and the new storage never both hold a large line.
//! * **A frame can be given away.** [`take`](Buffer::take) hands the storage
//!   holding a complete frame to its consumer and goes on with fresh storage
//!   holding only the bytes after it (at most one read), so a large frame is
//!   never copied out of the buffer.
//! * The live tail moves to the front (a *roll*) only when that is cheap: when
//!   it holds at most a quarter of the storage, or, early, when it is a tiny
//!   remnant and the room left could not take a frame as large as the largest
//!   seen. Otherwise the storage grows.
//! * Storage over the retention threshold is released at a read that finds
//!   little buffered, with hysteresis ([`Retention`]).

use alloc::vec::Vec;

/// When storage over the retention threshold is released.
///
/// The clock is the read: one call of [`Buffer::checkpoint`] per `spare` or
/// `push`. Storage over `retain` bytes is released at a checkpoint that finds
/// less than one read buffered once it has not been needed beyond `retain`
/// for more than `hold` such reads (the reads of a frame that is still
/// growing count neither way). `hold` starts at 0: after an isolated large frame
/// the storage goes back at the next read. A release is premature when the
/// storage must grow beyond `retain` again within [`PREMATURE`] reads; each
/// premature release doubles `hold` (up to [`MAX_HOLD`]), so a stream of
/// large frames settles on keeping its storage. A later large need that
/// comes after a calm halves it.
#[derive(Debug)]
pub(crate) struct Retention {
    /// Storage above this many bytes is released (the threshold).
    retain: usize,
    /// Reads the storage must go without a need beyond `retain`.
    hold: u32,
    /// Reads with less than one read buffered since the storage last needed
    /// more than `retain`.
    since_large: u32,
    /// Reads since the last release.
    since_release: u32,
    /// A release happened since the last need beyond `retain`.
    released: bool,
}

/// A regrowth within this many reads of a release makes it premature.
const PREMATURE: u32 = 16;
/// The most reads a large storage is kept after its last large need.
const MAX_HOLD: u32 = 64;

impl Retention {
    fn new(retain: usize) -> Retention {
        Retention { retain, hold: 0, since_large: 0, since_release: 0, released: false }
    }

    /// The storage needs `need` bytes now.
    fn needs(&mut self, need: usize) {
        if need <= self.retain {
            return;
        }
        if self.released {
            // The first large need since a release: was it premature?
            self.released = false;
            if self.since_release <= PREMATURE {
                self.hold = (self.hold * 2).clamp(1, MAX_HOLD);
            } else {
                self.hold /= 2;
            }
        }
        self.since_large = 0;
    }

    /// One read is about to happen with `need` bytes needed (live plus the
    /// read) in a storage of `capacity` bytes, `small` if less than one read
    /// is buffered: whether to release the storage now. Only small reads
    /// count as calm: the reads of a frame still growing count for nothing.
    fn release_now(&mut self, need: usize, capacity: usize, small: bool) -> bool {
        self.since_release = self.since_release.saturating_add(1);
        if small {
            self.since_large = self.since_large.saturating_add(1);
        }
        self.needs(need);
        if capacity > self.retain && small && self.since_large > self.hold {
            self.released = true;
            self.since_release = 0;
            return true;
        }
        false
    }
}

/// A growable byte buffer with `start`/`scan`/`end` cursors.
#[derive(Debug)]
pub(crate) struct Buffer {
    /// The storage. Its length is the initialised prefix (everything ever
    /// lent or written since it was allocated); its capacity is the storage
    /// reserved, untouched past the length.
    data: Vec<u8>,
    pub(crate) start: usize,
    pub(crate) scan: usize,
    pub(crate) end: usize,
    /// The most bytes a read has needed so far (live bytes plus the read):
    /// the size of the room that makes an early roll worth it.
    peak: usize,
    retention: Retention,
    /// Live bytes moved to the front so far, by rolls and by growth (tests
    /// compare it with the bytes read).
    pub(crate) moved: u64,
    /// Storage handed back by the consumer of a frame given away
    /// ([`recycle`](Buffer::recycle)), larger than `data`: the next growth
    /// moves into it instead of allocating. Capacity 0 when none.
    recycled: Vec<u8>,
}

impl Buffer {
    /// An empty buffer that releases storage beyond `retain` bytes.
    /// Allocates nothing.
    pub(crate) fn new(retain: usize) -> Buffer {
        Buffer {
            data: Vec::new(),
            start: 0,
            scan: 0,
            end: 0,
            peak: 0,
            retention: Retention::new(retain),
            moved: 0,
            recycled: Vec::new(),
        }
    }

    /// Bytes held: the live region.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.end - self.start
    }

    /// The live region.
    #[inline]
    pub(crate) fn live(&self) -> &[u8] {
        &self.data[self.start..self.end]
    }

    /// The initialised storage (the live region's ranges index into it).
    #[inline]
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.data
    }

    /// The storage reserved, in bytes.
    #[inline]
    pub(crate) fn capacity(&self) -> usize {
        self.data.capacity()
    }

    /// Drops every live byte. The storage keeps its size.
    #[inline]
    pub(crate) fn clear(&mut self) {
        self.start = 0;
        self.scan = 0;
        self.end = 0;
    }

    /// Consumes everything before `pos`. Bytes before `pos` stay readable
    /// until the next call that writes to the buffer.
    #[inline]
    pub(crate) fn consume_to(&mut self, pos: usize) {
        debug_assert!(pos <= self.end);
        self.start = pos;
        self.scan = self.scan.max(pos);
    }

    /// One read is about to happen, of at most `read` bytes: releases
    /// storage over the retention threshold if the policy says so
    /// ([`Retention`]). Call it once per read, before it.
    pub(crate) fn checkpoint(&mut self, read: usize) {
        let live = self.len();
        let need = live.saturating_add(read);
        if self.retention.release_now(need, self.data.capacity(), live < read) {
            self.peak = 0;
            self.relocate(need.min(self.retention.retain));
            self.release_recycled();
        }
        if live == 0 {
            // No frame in progress: nothing for recycled storage to grow.
            self.release_recycled();
        }
    }

    /// Takes back `storage` that a frame given away ([`take`](Buffer::take))
    /// lived in, once its consumer is done with it: kept for the next
    /// growth only while a frame is in progress (live bytes), the storage
    /// is at most [`LARGE`] and `storage` is larger than it, and no larger
    /// one is kept already; freed otherwise. So recycled storage sits beside
    /// at most 1 MiB of storage of its own, and is gone at the first read
    /// that finds nothing buffered. Its initialised bytes stay initialised
    /// (stale bytes of the old frame, overwritten by the reads lent them):
    /// they are not zeroed again.
    pub(crate) fn recycle(&mut self, storage: Vec<u8>) {
        let keep = self.start < self.end
            && self.data.capacity() <= LARGE
            && storage.capacity() > self.data.capacity().max(self.recycled.capacity());
        if keep {
            self.recycled = storage;
        }
    }

    /// Frees the recycled storage kept, if any.
    pub(crate) fn release_recycled(&mut self) {
        self.recycled = Vec::new();
    }

    /// The capacity of the storage kept for the next growth, in bytes.
    #[inline]
    pub(crate) fn recycled_capacity(&self) -> usize {
        self.recycled.capacity()
    }

    /// Lends spare space for one read: at least `min` bytes, growing the
    /// storage up to `cap` bytes if needed (see the module docs for when the
    /// live region moves). Only the bytes lent are initialised.
    #[cfg(test)]
    pub(crate) fn spare(&mut self, min: usize, cap: usize) -> &mut [u8] {
        self.prepare(min, cap);
        self.lent()
    }

    /// Makes at least `min` initialised bytes of spare space after `end`,
    /// growing the storage up to `cap` bytes if needed.
    pub(crate) fn prepare(&mut self, min: usize, cap: usize) {
        self.make_room(min, cap);
        // Within the capacity `make_room` reserved: no reallocation. (No
        // comparison: a resize to the length it has is a no-op, and a
        // `<` against `<=` there would be a mutant no test can tell apart.)
        let want = (self.end + min).max(self.data.len());
        self.data.resize(want, 0);
    }

    /// The initialised spare space after `end`.
    #[inline]
    pub(crate) fn lent(&mut self) -> &mut [u8] {
        let end = self.end;
        &mut self.data[end..]
    }

    /// Marks `n` bytes of the spare space as filled.
    #[inline]
    pub(crate) fn commit(&mut self, n: usize) {
        assert!(
            n <= self.data.len() - self.end,
            "commit({n}) exceeds the {} bytes lent by spare()",
            self.data.len() - self.end
        );
        self.end += n;
    }

    /// Appends `bytes` after the live region (push mode's partial tail).
    pub(crate) fn append(&mut self, bytes: &[u8]) {
        self.make_room(bytes.len(), usize::MAX);
        let end = self.end;
        // Overwrite what is initialised past `end`, extend by the rest
        // (within the capacity reserved: no reallocation).
        let overlap = (self.data.len() - end).min(bytes.len());
        self.data[end..end + overlap].copy_from_slice(&bytes[..overlap]);
        self.data.extend_from_slice(&bytes[overlap..]);
        self.end += bytes.len();
    }

    /// Ensures the capacity holds at least `min` bytes after `end`.
    fn make_room(&mut self, min: usize, cap: usize) {
        if self.start == self.end {
            self.clear();
        }
        let live = self.len();
        let need = live.checked_add(min).expect("buffer size overflows usize");
        self.peak = self.peak.max(need);
        let capacity = self.data.capacity();
        let room = capacity - self.end;
        // Early roll: a remnant of at most 1/64 of the storage (and at most
        // one read) moves to the front when the room left could not take a
        // frame as large as the largest so far. Then a large frame starts at
        // the front and does not meet the end of the storage, where moving
        // it would copy everything of it read so far.
        let early = self.start > 0 && live <= min.min(capacity / 64) && room < self.peak;
        if !early && room >= min {
            return;
        }
        // A roll frees the dead head. Worth it while the tail holds at most a
        // quarter of the storage: each roll then makes room for at least
        // three times the bytes it moves. A larger tail grows the storage.
        if self.start > 0 && (early || live <= capacity / 4) {
            self.roll();
            if capacity - self.end >= min {
                return;
            }
        }
        // The cap is an invariant of the caller, not a limit on input: the
        // framer discards a line as soon as it passes `max_frame`, so only a
        // caller that lends again without draining the events reaches it.
        // That is a bug in the caller, as an out-of-bounds index is, hence a
        // panic; ripgrep's line buffer returns an error at its cap because
        // input reaches it there (a long line), which cannot happen here.
        assert!(
            need <= cap,
            "framer buffer would exceed its cap ({need} > {cap} bytes): \
             call next_event until it returns None before lending more space"
        );
        self.retention.needs(need);
        // Recycled storage larger than this one takes the live bytes
        // instead of a reallocation (which would move them too), and the
        // line grows on in pages already touched.
        // (Kept only when larger than the storage, which grows only here:
        // any recycled storage is larger.)
        if self.recycled.capacity() != 0 {
            debug_assert!(self.recycled.capacity() > capacity);
            self.adopt_recycled();
            if self.data.capacity() - self.end >= min {
                return;
            }
        }
        // Small storage doubles. Once a line outgrows `LARGE`, the storage
        // goes straight to the retention threshold when the line fits in it
        // (kept storage, never released: growing past it to the cap would
        // be given back at the next calm read and regrown, its pages touched
        // again, for every large frame), else to the cap (when there is
        // one): reserved but untouched, it costs nothing, and the line then
        // grows to the limit without another move, so its bytes are never
        // held twice.
        let retain = self.retention.retain;
        let grown = match need > LARGE && cap != usize::MAX {
            // A retention threshold at or over the cap means the cap.
            true if need <= retain => retain.min(cap),
            true => cap,
            false => self.data.capacity().saturating_mul(2),
        };
        self.relocate(grown.clamp(need, cap.max(need)));
    }

    /// Moves the live region to the front of the recycled storage, which
    /// becomes the storage; the old one is freed.
    fn adopt_recycled(&mut self) {
        let mut storage = core::mem::take(&mut self.recycled);
        let live = self.len();
        // (A resize to the length it has is a no-op: no comparison to pin.)
        storage.resize(storage.len().max(live), 0);
        storage[..live].copy_from_slice(self.live());
        self.moved += live as u64;
        self.data = storage;
        self.scan -= self.start;
        self.end = live;
        self.start = 0;
    }

    /// Moves the live tail to the front of the storage.
    fn roll(&mut self) {
        self.data.copy_within(self.start..self.end, 0);
        self.moved += self.len() as u64;
        self.scan -= self.start;
        self.end -= self.start;
        self.start = 0;
    }

    /// Resizes the storage to `capacity` bytes (at least the live region),
    /// holding the live region at its front. The live bytes first move to
    /// the front in place, then the allocation is resized in place where
    /// the allocator can (`realloc`; for large blocks on Linux, `mremap`,
    /// which copies nothing): no second storage ever holds them beside the
    /// first, except for a small one the allocator cannot resize.
    fn relocate(&mut self, capacity: usize) {
        if self.start > 0 {
            self.roll();
        }
        self.data.truncate(self.end);
        let capacity = capacity.max(self.end);
        // One of the two is a no-op: `shrink_to` never grows, and
        // `reserve_exact` does nothing when the capacity is already there.
        // (Written without a comparison, which no test could pin at
        // equality: both calls do nothing then.)
        self.data.shrink_to(capacity);
        self.data.reserve_exact(capacity - self.data.len());
    }

    /// Gives away the storage, which holds `frame` (a complete frame before
    /// the live region), and goes on with fresh storage holding only the
    /// live region. The storage given away is cut to the frame's end, its
    /// untouched reserve to at most [`RECYCLE_SLACK`] past it.
    pub(crate) fn take(&mut self, frame: core::ops::Range<usize>) -> Vec<u8> {
        debug_assert!(frame.end <= self.start);
        let live = self.len();
        let mut fresh = Vec::with_capacity(live);
        fresh.extend_from_slice(self.live());
        self.moved += live as u64;
        let mut taken = core::mem::replace(&mut self.data, fresh);
        self.scan -= self.start;
        self.end = live;
        self.start = 0;
        self.peak = 0;
        taken.truncate(frame.end);
        // Untouched reserve past the frame is given back, but for a little
        // slack: storage recycled for a next frame of the same size then
        // holds it and what the read brings after it without growing.
        taken.shrink_to(frame.end.saturating_add(RECYCLE_SLACK));
        taken
    }
}

/// Above this many bytes, storage grows straight to its cap.
const LARGE: usize = 1 << 20;

/// Reserve kept past a frame given away: two default reads.
const RECYCLE_SLACK: usize = 128 << 10;

#[cfg(test)]
mod tests {
    use super::{Buffer, LARGE, MAX_HOLD, PREMATURE, RECYCLE_SLACK, Retention};
    use alloc::vec::Vec;

    /// Fills `buf` through `spare` and `commit` with `bytes`.
    fn read(buf: &mut Buffer, bytes: &[u8], min: usize) {
        buf.spare(min, usize::MAX)[..bytes.len()].copy_from_slice(bytes);
        buf.commit(bytes.len());
    }

    #[test]
    fn a_small_tail_rolls_early_when_a_frame_like_the_largest_would_not_fit() {
        let mut buf = Buffer::new(usize::MAX);
        read(&mut buf, &[b'a'; 6000], 8000);
        let storage = buf.capacity();
        assert_eq!(storage, 8000);
        buf.consume_to(5990);
        buf.scan = 5995;
        // 2000 bytes are free after `end`, enough for a read of 100 but not
        // for a frame as large as the largest need so far (8000).
        let spare = buf.spare(100, usize::MAX).len();
        assert_eq!((buf.start, buf.scan, buf.end), (0, 5, 10), "the 10 live bytes moved to the front");
        assert_eq!(buf.capacity(), storage, "rolling does not grow the storage");
        assert!(spare >= 100);
        assert_eq!(buf.live(), &[b'a'; 10]);
        assert_eq!(buf.moved, 10);
    }

    #[test]
    fn a_large_tail_stays_put_while_a_read_fits() {
        let mut buf = Buffer::new(usize::MAX);
        read(&mut buf, &[b'b'; 3000], 4000);
        buf.consume_to(1000);
        buf.spare(1000, usize::MAX);
        assert_eq!((buf.start, buf.end), (1000, 3000), "2000 live bytes > one read: not moved");
        assert!(buf.capacity() - buf.end >= 1000);
    }

    #[test]
    fn a_tail_over_a_quarter_of_the_storage_grows_it_instead_of_rolling() {
        let mut buf = Buffer::new(usize::MAX);
        read(&mut buf, &[b'c'; 4000], 4000);
        buf.consume_to(2000);
        let spare = buf.spare(4000, usize::MAX).len();
        assert_eq!(buf.capacity(), 8000, "doubled");
        assert_eq!((buf.start, buf.end), (0, 2000), "the live bytes were copied once, to the new front");
        assert_eq!(spare, 4000, "only the bytes lent are initialised");
        assert_eq!(buf.bytes().len(), 6000);
    }

    #[test]
    fn growth_initialises_only_what_is_lent() {
        let mut buf = Buffer::new(usize::MAX);
        for _ in 0..17 {
            let n = buf.spare(1 << 20, usize::MAX).len().min(1 << 20);
            buf.commit(n);
        }
        assert_eq!(buf.len(), 17 << 20);
        assert_eq!(buf.capacity(), 32 << 20, "reserved in doubling steps");
        assert_eq!(buf.bytes().len(), 17 << 20, "initialised: only the 17 reads");
    }

    #[test]
    fn a_line_past_one_mib_reserves_the_cap_in_one_step_and_never_moves_again() {
        let cap = 16 << 20;
        let mut buf = Buffer::new(usize::MAX);
        let mut moved_at_jump = None;
        while buf.len() < (15 << 20) {
            let n = buf.spare(64 << 10, cap).len().min(64 << 10);
            buf.commit(n);
            if buf.capacity() == cap && moved_at_jump.is_none() {
                moved_at_jump = Some(buf.moved);
            }
        }
        assert_eq!(buf.capacity(), cap, "straight to the cap");
        let moved = moved_at_jump.expect("reached the cap");
        assert!(moved <= 2 << 20, "only the small storage's bytes ever moved: {moved}");
        assert_eq!(buf.moved, moved, "no move after the jump");
        assert!(buf.bytes().len() < cap, "the cap is reserved, not touched");
    }

    /// A kept framer (`retain` at the limit) holds a large line in storage
    /// it keeps: growth past 1 MiB stops at `retain` when the line fits, so
    /// the storage is never over the threshold, never released at the next
    /// calm read, and the next large line reuses it without a move.
    #[test]
    fn a_large_line_that_fits_in_retain_grows_to_retain_and_stays() {
        let (retain, cap) = (8 << 20, (8 << 20) + 1 + (64 << 10));
        let mut buf = Buffer::new(retain);
        for round in 0..3 {
            // One 4 MiB line, in 64 KiB reads, then a calm read.
            let before = buf.moved;
            let mut written = 0;
            while written < 4 << 20 {
                buf.checkpoint(64 << 10);
                let n = buf.spare(64 << 10, cap).len().min(64 << 10);
                buf.commit(n);
                written += n;
            }
            assert_eq!(buf.capacity(), retain, "round {round}: grown to retain, not to the cap");
            let moved = buf.moved - before;
            buf.consume_to(buf.end);
            buf.checkpoint(64 << 10);
            assert_eq!(buf.capacity(), retain, "round {round}: kept after the line");
            if round > 0 {
                assert_eq!(moved, 0, "round {round}: the line grew in kept storage without a move");
            }
        }
    }

    #[test]
    fn take_gives_the_storage_away_and_keeps_only_what_follows_the_frame() {
        let mut buf = Buffer::new(usize::MAX);
        read(&mut buf, b"frame one\nrest", 4096);
        buf.consume_to(10);
        buf.scan = 12;
        let taken = buf.take(0..9);
        assert_eq!(taken, b"frame one", "cut to the frame's end");
        assert_eq!(buf.live(), b"rest");
        assert_eq!((buf.start, buf.scan, buf.end), (0, 2, 4), "the resume index moves with the rest");
        assert!(buf.capacity() < 4096, "fresh storage for the rest only");
        assert_eq!(buf.moved, 4, "the rest was moved, counted");
    }

    // The growth and retention rules, pinned one boundary at a time
    // (cargo-mutants on this file, issue 40: each test below kills
    // mutants that survived the tests above).

    /// A large need, then calm reads until the storage is released; returns
    /// the hold the need left and how many calm reads the release took.
    fn cycle(r: &mut Retention, retain: usize) -> (u32, u32) {
        r.needs(retain + 1);
        let hold = r.hold;
        let mut calm = 1;
        while !r.release_now(10, 2 * retain, true) {
            calm += 1;
            assert!(calm <= MAX_HOLD + 1, "never released");
        }
        (hold, calm)
    }

    #[test]
    fn each_premature_release_doubles_the_hold_up_to_its_maximum() {
        let retain = 1000;
        let mut r = Retention::new(retain);
        let cycles: Vec<_> = (0..9).map(|_| cycle(&mut r, retain)).collect();
        // Each large need comes right after a release: premature. The
        // storage goes at the calm read after `hold` of them.
        assert_eq!(
            cycles,
            [(0, 1), (1, 2), (2, 3), (4, 5), (8, 9), (16, 17), (32, 33), (64, 65), (64, 65)],
            "(hold, calm reads to the release)"
        );
    }

    #[test]
    fn a_release_that_proves_right_halves_the_hold() {
        let retain = 1000;
        let mut r = Retention::new(retain);
        for _ in 0..5 {
            cycle(&mut r, retain);
        }
        assert_eq!(r.hold, 8);
        // More than PREMATURE calm reads in storage within `retain` (nothing
        // to release), then a large need: the release was right.
        for _ in 0..=PREMATURE {
            assert!(!r.release_now(10, retain, true));
        }
        r.needs(retain + 1);
        assert_eq!(r.hold, 4, "halved");
        // Within PREMATURE reads of the next release it doubles again.
        while !r.release_now(10, 2 * retain, true) {}
        r.needs(retain + 1);
        assert_eq!(r.hold, 8);
    }

    #[test]
    fn storage_within_room_does_not_grow_even_when_smaller_than_the_largest_need() {
        let mut buf = Buffer::new(usize::MAX);
        buf.spare(8000, usize::MAX);
        buf.commit(10);
        // start is 0: nothing to roll early, and 7990 bytes are free.
        buf.spare(100, usize::MAX);
        assert_eq!((buf.capacity(), buf.start, buf.end), (8000, 0, 10));
    }

    #[test]
    fn a_remnant_rolls_early_only_when_the_room_is_below_the_largest_need() {
        let mut buf = Buffer::new(usize::MAX);
        read(&mut buf, &[b'd'; 4000], 4000);
        buf.consume_to(2000);
        buf.spare(4000, usize::MAX);
        assert_eq!((buf.capacity(), buf.peak, buf.start, buf.end), (8000, 6000, 0, 2000));
        // 10 live bytes and exactly the largest need free: no early roll.
        buf.consume_to(1990);
        buf.spare(100, usize::MAX);
        assert_eq!((buf.start, buf.end, buf.moved), (1990, 2000, 2000), "not rolled");
        // One byte less room than the largest need: rolled.
        buf.commit(1);
        buf.spare(100, usize::MAX);
        assert_eq!((buf.start, buf.end), (0, 11), "rolled");
    }

    #[test]
    fn growth_from_the_front_moves_nothing() {
        let mut buf = Buffer::new(usize::MAX);
        buf.spare(4000, usize::MAX);
        buf.commit(100);
        buf.spare(5000, usize::MAX);
        assert_eq!(buf.moved, 0, "the live bytes already start the storage: no roll counted");
        assert_eq!(buf.capacity(), 8000);
    }

    #[test]
    fn a_roll_that_leaves_too_little_room_grows_within_the_cap() {
        let mut buf = Buffer::new(usize::MAX);
        read(&mut buf, &[b'e'; 4000], 4000);
        buf.consume_to(3500);
        // 500 live bytes (an eighth) roll, leaving 3500 free of the 3800
        // asked: the storage grows too, doubling but clamped to the cap.
        let spare = buf.spare(3800, 5000).len();
        assert_eq!((buf.start, buf.end), (0, 500));
        assert_eq!(buf.capacity(), 5000, "doubled, clamped to the cap");
        assert_eq!(spare, 3800);
    }

    #[test]
    fn a_need_of_exactly_one_mib_still_doubles() {
        let mut buf = Buffer::new(usize::MAX);
        buf.spare(LARGE, 16 << 20);
        assert_eq!(buf.capacity(), LARGE, "not straight to the cap");
        buf.commit(LARGE);
        buf.spare(1, 16 << 20);
        assert_eq!(buf.capacity(), 16 << 20, "past one MiB: straight to the cap");
    }

    #[test]
    fn a_large_line_beyond_retain_grows_to_the_cap_not_to_retain() {
        let (retain, cap) = (2 << 20, 16 << 20);
        let mut buf = Buffer::new(retain);
        buf.spare(3 << 20, cap);
        assert_eq!(buf.capacity(), cap, "the line does not fit in retain");
        let mut kept = Buffer::new(retain);
        kept.spare(LARGE + 1, cap);
        assert_eq!(kept.capacity(), retain, "a line that fits goes to retain");
        let mut over = Buffer::new(cap * 2);
        over.spare(LARGE + 1, cap);
        assert_eq!(over.capacity(), cap, "retain over the cap means the cap");
    }

    /// A frame's storage given away and handed back: the next frame grows
    /// in it (the same allocation), moving only the bytes after the frame.
    #[test]
    fn recycled_storage_takes_the_next_growth_and_moves_only_the_live_bytes() {
        let mut buf = Buffer::new(usize::MAX);
        read(&mut buf, &[b'f'; 3000], 3000);
        buf.consume_to(2990);
        let taken = buf.take(0..2989);
        assert_eq!(buf.len(), 10);
        let (at, capacity) = (taken.as_ptr(), taken.capacity());
        assert!(capacity > buf.capacity());
        buf.recycle(taken);
        assert_eq!(buf.recycled_capacity(), capacity, "kept: 10 bytes of a frame in progress");
        let moved = buf.moved;
        buf.spare(1000, usize::MAX);
        assert_eq!((buf.bytes().as_ptr(), buf.capacity()), (at, capacity), "grown into the recycled storage");
        assert_eq!(buf.recycled_capacity(), 0);
        assert_eq!(buf.moved - moved, 10, "only the live bytes moved");
        assert_eq!(buf.live(), &[b'f'; 10]);
        assert_eq!((buf.start, buf.end), (0, 10));
    }

    #[test]
    fn recycled_storage_is_kept_only_while_a_frame_is_in_progress_and_it_is_larger() {
        // Nothing buffered: freed at once.
        let mut idle = Buffer::new(usize::MAX);
        idle.recycle(Vec::with_capacity(1 << 16));
        assert_eq!(idle.recycled_capacity(), 0);
        // Kept while bytes are buffered, freed at the first read that finds
        // none.
        let mut buf = Buffer::new(usize::MAX);
        read(&mut buf, b"partial", 512);
        buf.recycle(Vec::with_capacity(100));
        assert_eq!(buf.recycled_capacity(), 0, "not larger than the storage (512)");
        buf.recycle(Vec::with_capacity(512));
        assert_eq!(buf.recycled_capacity(), 0, "as large as the storage: nothing gained");
        buf.recycle(Vec::with_capacity(1 << 16));
        buf.recycle(Vec::with_capacity(1 << 15));
        assert_eq!(buf.recycled_capacity(), 1 << 16, "a smaller one does not replace it");
        buf.checkpoint(512);
        assert_eq!(buf.recycled_capacity(), 1 << 16, "a frame is still in progress");
        buf.consume_to(buf.end);
        buf.checkpoint(512);
        assert_eq!(buf.recycled_capacity(), 0, "nothing buffered: freed");
        // Never beside more than 1 MiB of storage of its own.
        let mut large = Buffer::new(usize::MAX);
        large.spare(LARGE + 1, usize::MAX);
        large.commit(1);
        large.recycle(Vec::with_capacity(4 << 20));
        assert_eq!(large.recycled_capacity(), 0, "own storage over 1 MiB");
        let mut at_large = Buffer::new(usize::MAX);
        at_large.spare(LARGE, usize::MAX);
        at_large.commit(1);
        at_large.recycle(Vec::with_capacity(4 << 20));
        assert_eq!(at_large.recycled_capacity(), 4 << 20, "own storage of exactly 1 MiB");
    }

    #[test]
    fn a_release_frees_recycled_storage_too() {
        let retain = 4096;
        let mut buf = Buffer::new(retain);
        buf.checkpoint(1000);
        buf.spare(8000, usize::MAX);
        buf.commit(10);
        buf.recycle(Vec::with_capacity(1 << 16));
        assert_eq!(buf.recycled_capacity(), 1 << 16);
        // A calm read with storage over `retain` and no hold: released.
        buf.checkpoint(1000);
        assert!(buf.capacity() <= retain);
        assert_eq!(buf.recycled_capacity(), 0);
    }

    #[test]
    fn a_frame_given_away_keeps_at_most_the_slack_past_its_end() {
        let mut buf = Buffer::new(usize::MAX);
        let cap = 16 << 20;
        buf.spare(2 << 20, cap);
        buf.commit(2 << 20);
        assert_eq!(buf.capacity(), cap);
        buf.consume_to(buf.end);
        let taken = buf.take(0..(2 << 20) - 1);
        assert_eq!(taken.len(), (2 << 20) - 1);
        assert_eq!(RECYCLE_SLACK, 128 << 10);
        assert_eq!(taken.capacity(), (2 << 20) - 1 + (128 << 10), "the slack stays for a recycled next frame");
    }

    #[test]
    fn adopting_recycled_storage_keeps_the_cursors_and_grows_on_within_the_cap() {
        // A live region past a consumed head moves to the recycled front.
        let mut buf = Buffer::new(usize::MAX);
        read(&mut buf, &[b'g'; 4000], 4000);
        buf.consume_to(2000);
        buf.scan = 2500;
        buf.recycle(Vec::with_capacity(16000));
        buf.spare(4000, usize::MAX);
        assert_eq!((buf.start, buf.scan, buf.end, buf.capacity()), (0, 500, 2000, 16000));
        assert_eq!(buf.live(), &[b'g'; 2000]);
        // Recycled storage too small for the need: it is taken, then grown
        // by the usual rule, within the cap.
        let mut small = Buffer::new(usize::MAX);
        read(&mut small, b"partial", 512);
        small.recycle(Vec::with_capacity(600));
        small.spare(1000, 1100);
        assert_eq!(small.capacity(), 1100, "doubled from 600, clamped to the cap");
        assert_eq!(small.live(), b"partial");
        // Room after adopting counts from the live bytes' end: 300 of 600
        // free is short of 400, so it grows (within the cap of 1000).
        let mut short = Buffer::new(usize::MAX);
        read(&mut short, &[b'h'; 300], 512);
        short.recycle(Vec::with_capacity(600));
        short.spare(400, 1000);
        assert_eq!(short.capacity(), 1000);
    }
}
