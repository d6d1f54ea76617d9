//! Byte and frame accounting.

/// Counters kept by a [`Framer`](crate::Framer). All are `u64` and count
/// **bytes** (never chars) or events since the framer was created.
///
/// Every byte that enters is accounted for exactly once. Once the framer has
/// returned `None` (or an error) from its event calls, this identity holds:
///
/// ```text
/// bytes_in == frame_bytes + delimiters + cr_stripped + discarded_bytes
///           + bom_bytes + truncated_bytes + Framer::buffered()
/// ```
///
/// [`Stats::accounted_bytes`] computes the right-hand side less the buffered
/// part. Empty lines are not a separate byte class: their `\n` is in
/// `delimiters` and their stripped `\r`, if any, in `cr_stripped`.
///
/// `#[non_exhaustive]`: counters may be added. Outside this crate a value is
/// built from [`Stats::default()`] by assigning fields.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Stats {
    /// Bytes handed to the framer, by `commit` or `push`.
    pub bytes_in: u64,
    /// Frames delivered (empty ones too, under
    /// [`EmptyLines::Deliver`](crate::EmptyLines::Deliver)).
    pub frames: u64,
    /// Bytes of delivered frames, delimiters and stripped `\r` excluded.
    pub frame_bytes: u64,
    /// Length in bytes of the largest frame delivered.
    pub largest_frame: u64,
    /// Frames found over the limit (each counted once, when first detected).
    pub oversize_frames: u64,
    /// Bytes thrown away: every byte of an oversize frame except its `\n`
    /// (a trailing `\r` included), and, after a
    /// [`FrameError`](crate::FrameError), every byte that follows it.
    pub discarded_bytes: u64,
    /// Empty lines skipped under [`EmptyLines::Skip`](crate::EmptyLines::Skip).
    pub empty_lines: u64,
    /// `\n` delimiters consumed (of frames, empty lines and oversize frames).
    pub delimiters: u64,
    /// Trailing `\r` bytes stripped from delivered frames and empty lines.
    pub cr_stripped: u64,
    /// Bytes of a UTF-8 BOM stripped at stream start (0 or 3).
    pub bom_bytes: u64,
    /// Bytes of a partial frame left at end of stream and reported as
    /// [`Event::Truncated`](crate::Event::Truncated) (not counting the bytes
    /// of an oversize frame, which are already in `discarded_bytes`).
    pub truncated_bytes: u64,
    /// The most bytes the framer's buffer ever held at once.
    pub buffered_high_water: u64,
    /// The framer's buffer storage now, in bytes reserved: a gauge, not a
    /// counter ([`Framer::capacity`](crate::Framer::capacity)). It grows with
    /// the frames and goes back within
    /// [`Config::retain`](crate::Config::retain) after them; it depends on
    /// chunking and mode, like `buffered_high_water`.
    pub buffer_capacity: u64,
}

impl Stats {
    /// Bytes already assigned to a class: everything in `bytes_in` except what
    /// is still buffered as a partial frame.
    pub fn accounted_bytes(&self) -> u64 {
        self.frame_bytes
            + self.delimiters
            + self.cr_stripped
            + self.discarded_bytes
            + self.bom_bytes
            + self.truncated_bytes
    }
}
