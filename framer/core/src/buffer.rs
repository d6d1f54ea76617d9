//! The framer's byte buffer: explicit growth, rolling the tail to the front,
//! a hard cap.
//!
//! Layout, as in ripgrep's line buffer:
//!
//! ```text
//! 0 ........ start ........ scan ........ end ........ data.len()
//!   consumed   | scanned, no '\n' | unscanned | spare (lent to reads)
//! ```
//!
//! `start..end` is the live region: the current candidate frame plus any
//! complete frames not yet handed out. `scan` is where the next search for
//! `\n` resumes, so no byte is searched twice (tokio-util's `next_index`).

use alloc::vec::Vec;

/// A growable byte buffer with `start`/`scan`/`end` cursors.
#[derive(Debug, Default)]
pub(crate) struct Buffer {
    /// Zero-initialised storage; `data.len()` is the usable capacity.
    data: Vec<u8>,
    pub(crate) start: usize,
    pub(crate) scan: usize,
    pub(crate) end: usize,
}

impl Buffer {
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

    #[inline]
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.data
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

    /// Lends spare space for one read: at least `min` bytes, growing the
    /// storage up to `cap` bytes if needed. Rolls the live region to the front
    /// first when that makes enough room, so storage grows only when the live
    /// region itself needs it.
    pub(crate) fn spare(&mut self, min: usize, cap: usize) -> &mut [u8] {
        self.make_room(min, cap);
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
        self.data[end..end + bytes.len()].copy_from_slice(bytes);
        self.end += bytes.len();
    }

    /// Ensures at least `min` spare bytes after `end`.
    fn make_room(&mut self, min: usize, cap: usize) {
        if self.start == self.end {
            self.clear();
        }
        // Roll early while the live tail is small (at most `min`, one read),
        // not only when the storage is full: then the next frame starts at
        // the front, and a large frame does not meet the end of the storage,
        // where rolling would move everything of it read so far (for 8 MiB
        // frames in a 16 MiB buffer that was 3/4 of all bytes). A caller that
        // drains before each read gets each byte moved at most once.
        let cheap_roll = self.start > 0 && self.len() <= min;
        if !cheap_roll && self.data.len() - self.end >= min {
            return;
        }
        if self.start > 0 {
            // Roll the live tail to the front.
            self.data.copy_within(self.start..self.end, 0);
            self.scan -= self.start;
            self.end -= self.start;
            self.start = 0;
            if self.data.len() - self.end >= min {
                return;
            }
        }
        let needed = self.end.checked_add(min).expect("buffer size overflows usize");
        assert!(
            needed <= cap,
            "framer buffer would exceed its cap ({needed} > {cap} bytes): \
             call next_event until it returns None before lending more space"
        );
        let doubled = self.data.len().saturating_mul(2);
        let new_len = doubled.clamp(needed, cap.max(needed));
        // Only the live bytes need to move; drop the dead tail before growing
        // so a reallocation copies `end` bytes, not the whole old storage.
        self.data.truncate(self.end);
        self.data.resize(new_len, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::Buffer;

    /// Fills `buf` through `spare` and `commit` with `bytes`.
    fn read(buf: &mut Buffer, bytes: &[u8], min: usize) {
        buf.spare(min, usize::MAX)[..bytes.len()].copy_from_slice(bytes);
        buf.commit(bytes.len());
    }

    #[test]
    fn a_small_tail_rolls_to_the_front_before_the_storage_is_full() {
        let mut buf = Buffer::default();
        read(&mut buf, &[b'a'; 100], 1000);
        let storage = buf.bytes().len();
        buf.consume_to(90);
        buf.scan = 95;
        // 900 bytes are free after `end`, enough for a read of 500: the old
        // policy rolled only when they were not.
        let spare = buf.spare(500, usize::MAX).len();
        assert_eq!((buf.start, buf.scan, buf.end), (0, 5, 10), "the 10 live bytes moved to the front");
        assert_eq!(buf.bytes().len(), storage, "rolling does not grow the storage");
        assert_eq!(spare, storage - 10);
        assert_eq!(buf.live(), &[b'a'; 10]);
    }

    #[test]
    fn a_large_tail_stays_put_while_a_read_fits() {
        let mut buf = Buffer::default();
        read(&mut buf, &[b'b'; 3000], 4000);
        buf.consume_to(1000);
        buf.spare(1000, usize::MAX);
        assert_eq!((buf.start, buf.end), (1000, 3000), "2000 live bytes > one read: not moved");
        assert!(buf.bytes().len() - buf.end >= 1000);
    }
}
