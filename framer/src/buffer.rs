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
    pub(crate) fn len(&self) -> usize {
        self.end - self.start
    }

    /// Bytes not yet searched for `\n`.
    pub(crate) fn unscanned(&self) -> &[u8] {
        &self.data[self.scan..self.end]
    }

    /// The live region.
    pub(crate) fn live(&self) -> &[u8] {
        &self.data[self.start..self.end]
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &self.data
    }

    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.data
    }

    /// Drops every live byte. The storage keeps its size.
    pub(crate) fn clear(&mut self) {
        self.start = 0;
        self.scan = 0;
        self.end = 0;
    }

    /// Consumes everything before `pos`. Bytes before `pos` stay readable
    /// until the next call that writes to the buffer.
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
        if self.data.len() - self.end >= min {
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
