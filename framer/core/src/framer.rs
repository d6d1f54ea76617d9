//! The framer: a state machine over the [`Buffer`], fed by read-into or push.

use core::ops::Range;

use crate::buffer::Buffer;
use crate::newline::Newline;
use crate::{Bom, Config, EmptyLines, Event, FrameError, OversizePolicy, Stats};

const BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];

/// A zero-copy, byte-counting newline framer for MCP's stdio transport.
///
/// Sans-IO: it never reads or writes by itself. Feed it in one of two ways,
/// both zero-copy for complete frames:
///
/// * **Read-into**: [`spare`](Framer::spare) lends spare space in the
///   framer's own buffer, the caller reads the OS pipe straight into it and
///   [`commit`](Framer::commit)s the byte count, then drains
///   [`next_event`](Framer::next_event) until it returns `Ok(None)`.
/// * **Push**: [`push`](Framer::push) takes a chunk the caller owns; frames
///   wholly inside it come back as slices of the chunk itself, and only a
///   partial tail is copied into the framer.
///
/// Call [`finish`](Framer::finish) at end of stream; a partial frame left over
/// is then reported as [`Event::Truncated`], never delivered, never dropped
/// silently.
///
/// # Contract
///
/// * A frame is the bytes before a `\n`. The framer works on bytes and does
///   not validate UTF-8 or JSON: NUL bytes, invalid UTF-8 and binary data are
///   framed like anything else, and no input makes it panic.
/// * The limit [`Config::max_frame`] counts **bytes**: those of the message
///   without its `\n`, and without its trailing `\r` when
///   [`Config::strip_cr`] strips it. Exactly `max_frame` is delivered,
///   `max_frame + 1` is oversize. A frame over the limit is never delivered
///   and never buffered: it is reported as soon as it passes the limit
///   ([`Event::OversizeStarted`]) and then, under [`OversizePolicy::Skip`],
///   discarded up to its `\n` and reported again with its exact length
///   ([`Event::OversizeSkipped`]); under [`OversizePolicy::Fail`] the framer
///   stops and every later event call returns the same [`FrameError`].
/// * One trailing `\r` is stripped by default; a bare `\r` is never a
///   delimiter. Empty lines are skipped and counted by default. A UTF-8 BOM at
///   stream start is stripped and counted by default. See [`Config`].
/// * "Need more input" is not an error: the event calls return `Ok(None)`.
/// * The same bytes give the same events however they are chunked, in either
///   mode, except for the `seen` count of [`Event::OversizeStarted`] and
///   [`FrameError::Oversize`], which reports how far the frame had got when
///   the framer noticed.
/// * Each byte is searched for `\n` once: the search resumes where it stopped,
///   so a frame split into N chunks costs O(size), not O(size × N).
/// * Bytes buffered never exceed `max_frame + 1 + read_size` (the `+ 1` is a
///   `\r` that may yet be stripped), and an oversize frame's bytes are never
///   kept. Once the buffer has grown, framing allocates nothing.
/// * Every byte is counted in [`Stats`]; see there for the identity.
///
/// # Example: read-into
///
/// ```
/// use mcp_framer::{Config, Event, Framer};
///
/// let mut pipe: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\r\n\n{\"partial\":";
/// let mut framer = Framer::new(Config::with_max_frame(1024));
/// let mut frames = Vec::new();
/// loop {
///     let n = std::io::Read::read(&mut pipe, framer.spare()).unwrap();
///     if n == 0 {
///         framer.finish();
///     } else {
///         framer.commit(n);
///     }
///     while let Some(event) = framer.next_event().unwrap() {
///         match event {
///             Event::Frame(frame) => frames.push(frame.to_vec()),
///             other => frames.push(format!("{other:?}").into_bytes()),
///         }
///     }
///     if n == 0 {
///         break;
///     }
/// }
/// assert_eq!(frames[0], b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}");
/// assert_eq!(frames[1], b"Truncated { len: 11, oversize: false }");
/// assert_eq!(framer.stats().empty_lines, 1);
/// ```
#[derive(Debug)]
pub struct Framer {
    pub(crate) config: Config,
    pub(crate) buf: Buffer,
    pub(crate) stats: Stats,
    /// The `\n` searcher picked for this CPU.
    newline: Newline,
    /// Waiting for the first bytes to tell whether they are a BOM.
    bom_pending: bool,
    /// Discarding an oversize frame up to its `\n`.
    discard: Option<Discard>,
    /// An event to return before anything else.
    queued: Option<Raw>,
    /// Bytes searched for `\n` so far: equals the bytes searched at most
    /// once each (tests check the no-rescan guarantee with it).
    pub(crate) scanned: u64,
    /// The sticky error under [`OversizePolicy::Fail`].
    failed: Option<FrameError>,
    /// [`Framer::finish`] was called.
    eof: bool,
    /// End of stream and everything reported.
    done: bool,
}

/// The oversize frame being discarded.
#[derive(Clone, Copy, Debug)]
struct Discard {
    /// Raw bytes of the frame so far (its `\r` included).
    raw: u64,
    /// Whether the last byte so far was `\r`.
    last_cr: bool,
}

/// Where a frame's bytes are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Src {
    /// In the framer's buffer.
    Buf(Range<usize>),
    /// In the chunk being pushed.
    Chunk(Range<usize>),
}

/// An event before its frame is turned into a slice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Raw {
    Frame(Src),
    OversizeStarted { seen: u64 },
    OversizeSkipped { len: u64 },
    Truncated { len: u64, oversize: bool },
}

impl Raw {
    pub(crate) fn into_event<F>(self, frame: impl FnOnce(Src) -> F) -> Event<F> {
        match self {
            Raw::Frame(src) => Event::Frame(frame(src)),
            Raw::OversizeStarted { seen } => Event::OversizeStarted { seen },
            Raw::OversizeSkipped { len } => Event::OversizeSkipped { len },
            Raw::Truncated { len, oversize } => Event::Truncated { len, oversize },
        }
    }
}

/// What a complete line turned out to be.
enum Line {
    Empty,
    Frame { len: usize },
    Oversize { len: u64 },
}

impl Framer {
    /// A framer with the given configuration. Allocates nothing until the
    /// first byte arrives.
    pub fn new(config: Config) -> Framer {
        Framer {
            config,
            buf: Buffer::default(),
            stats: Stats::default(),
            newline: Newline::new(),
            bom_pending: config.bom == Bom::Strip,
            discard: None,
            queued: None,
            scanned: 0,
            failed: None,
            eof: false,
            done: false,
        }
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The counters so far.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Bytes held in the buffer: a partial frame, plus any complete frames not
    /// yet returned.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// The size of the buffer's storage in bytes: what the framer holds on the
    /// heap. At most `max_frame + 1 + read_size` in read-into mode.
    pub fn capacity(&self) -> usize {
        self.buf.bytes().len()
    }

    /// Whether an oversize frame is being discarded up to its `\n`.
    pub fn is_discarding(&self) -> bool {
        self.discard.is_some()
    }

    /// Whether [`finish`](Framer::finish) was called and every event has been
    /// returned.
    pub fn is_finished(&self) -> bool {
        self.done
    }

    /// The sticky error, if the framer stopped under [`OversizePolicy::Fail`].
    pub fn error(&self) -> Option<FrameError> {
        self.failed
    }

    /// Lends spare space in the framer's buffer for one read: at least
    /// [`Config::read_size`](Config#structfield.read_size) bytes. Read into it, then [`commit`](Framer::commit)
    /// the number of bytes read.
    ///
    /// # Panics
    ///
    /// If the bytes already committed have not been drained with
    /// [`next_event`](Framer::next_event) and holding them plus a read would
    /// exceed the buffer cap (`max_frame + 1 + read_size`).
    pub fn spare(&mut self) -> &mut [u8] {
        let cap = self.config.buffer_cap();
        self.buf.spare(self.config.read_size(), cap)
    }

    /// Marks `n` bytes of the space lent by [`spare`](Framer::spare) as read.
    ///
    /// # Panics
    ///
    /// If `n` exceeds the length of that space, or after
    /// [`finish`](Framer::finish).
    pub fn commit(&mut self, n: usize) {
        assert!(!self.eof, "commit after finish");
        self.buf.commit(n);
        self.stats.bytes_in += n as u64;
        if self.failed.is_some() {
            self.stats.discarded_bytes += n as u64;
            self.buf.clear();
        }
        self.note_high_water();
    }

    /// Marks end of stream. The next event calls return the remaining frames,
    /// then [`Event::Truncated`] if a partial frame is left, then `None`.
    pub fn finish(&mut self) {
        self.eof = true;
    }

    /// The next event from the bytes committed so far, or `Ok(None)` when more
    /// input is needed (or, after [`finish`](Framer::finish), when the stream
    /// is done). The frame borrows the framer's buffer.
    #[inline(always)]
    pub fn next_event(&mut self) -> Result<Option<Event<&[u8]>>, FrameError> {
        match self.next_plain_buffered() {
            Some(frame) => Ok(Some(Event::Frame(&self.buf.bytes()[frame]))),
            None => self.next_event_general(),
        }
    }

    /// [`next_event`](Framer::next_event) off the fast path: kept out of line
    /// so the fast path stays small enough to inline into the caller's loop.
    #[inline(never)]
    fn next_event_general(&mut self) -> Result<Option<Event<&[u8]>>, FrameError> {
        let raw = self.step_buffered()?;
        Ok(raw.map(|raw| raw.into_event(|src| &self.buf.bytes()[src.buffered()])))
    }

    /// Whether no special state is in force: nothing queued, no BOM decision
    /// pending, no discard, not stopped, not at end of stream. The fast paths
    /// run only then.
    #[inline]
    fn is_plain(&self) -> bool {
        !self.bom_pending && !self.eof && self.discard.is_none() && self.queued.is_none() && self.failed.is_none()
    }

    /// The read-into fast path: the next frame when it is complete in the
    /// buffer, within the limit and not empty, in plain state. Otherwise it
    /// leaves everything it searched marked as searched (so
    /// [`step_buffered`](Framer::step_buffered) resumes at the `\n` it found,
    /// or after the bytes without one) and returns `None`.
    #[inline(always)]
    fn next_plain_buffered(&mut self) -> Option<Range<usize>> {
        if !self.is_plain() {
            return None;
        }
        let (start, scan, end) = (self.buf.start, self.buf.scan, self.buf.end);
        let bytes = self.buf.bytes();
        let Some(i) = self.newline.find(&bytes[scan..end]) else {
            self.scanned += (end - scan) as u64;
            self.buf.scan = end;
            return None;
        };
        let newline = scan + i;
        let raw_len = newline - start;
        let cr = self.config.strip_cr && raw_len > 0 && bytes[newline - 1] == b'\r';
        let len = raw_len - usize::from(cr);
        if len == 0 || len > self.config.max_frame {
            self.scanned += i as u64;
            self.buf.scan = newline;
            return None;
        }
        self.scanned += i as u64 + 1;
        self.buf.consume_to(newline + 1);
        self.count_frame(len, cr);
        Some(start..start + len)
    }

    /// Counts a delivered frame of `len` bytes, and its stripped `\r`.
    #[inline(always)]
    fn count_frame(&mut self, len: usize, cr: bool) {
        self.stats.delimiters += 1;
        self.stats.cr_stripped += u64::from(cr);
        self.stats.frames += 1;
        self.stats.frame_bytes += len as u64;
        self.stats.largest_frame = self.stats.largest_frame.max(len as u64);
    }

    /// The push fast path: the next frame that lies wholly inside
    /// `chunk[*pos..]`, in plain state, with nothing buffered and a rest of
    /// the chunk that cannot exceed the limit. A rest without `\n` becomes the
    /// partial tail. Returns `Err(())` when the general path must take over;
    /// it then has searched nothing.
    #[inline(always)]
    pub(crate) fn next_plain_pushed(&mut self, chunk: &[u8], pos: &mut usize) -> Result<Option<Range<usize>>, ()> {
        if !self.is_plain() || self.buf.len() != 0 || chunk.len() - *pos > self.config.max_frame {
            return Err(());
        }
        loop {
            let rest = &chunk[*pos..];
            let Some(i) = self.newline.find(rest) else {
                self.scanned += rest.len() as u64;
                *pos = chunk.len();
                if !rest.is_empty() {
                    // Within the limit: checked above.
                    self.buf.append(rest);
                    self.buf.scan = self.buf.end;
                    self.note_high_water();
                }
                return Ok(None);
            };
            self.scanned += i as u64 + 1;
            let line = *pos;
            *pos += i + 1;
            let cr = self.config.strip_cr && i > 0 && rest[i - 1] == b'\r';
            let len = i - usize::from(cr);
            if len == 0 && self.config.empty_lines == EmptyLines::Skip {
                self.stats.delimiters += 1;
                self.stats.cr_stripped += u64::from(cr);
                self.stats.empty_lines += 1;
                continue;
            }
            self.count_frame(len, cr);
            return Ok(Some(line..line + len));
        }
    }

    fn note_high_water(&mut self) {
        let held = self.buf.len() as u64;
        if held > self.stats.buffered_high_water {
            self.stats.buffered_high_water = held;
        }
    }

    /// Classifies a complete line of `raw_len` bytes (its `\n` excluded) and
    /// counts it. `ends_with_cr` tells whether its last byte is `\r`.
    fn classify(&mut self, raw_len: usize, ends_with_cr: bool) -> Line {
        self.stats.delimiters += 1;
        let cr = usize::from(self.config.strip_cr && ends_with_cr);
        let len = raw_len - cr;
        if len > self.config.max_frame {
            self.stats.oversize_frames += 1;
            self.stats.discarded_bytes += raw_len as u64;
            return Line::Oversize { len: len as u64 };
        }
        self.stats.cr_stripped += cr as u64;
        if len == 0 && self.config.empty_lines == EmptyLines::Skip {
            self.stats.empty_lines += 1;
            return Line::Empty;
        }
        self.stats.frames += 1;
        self.stats.frame_bytes += len as u64;
        self.stats.largest_frame = self.stats.largest_frame.max(len as u64);
        Line::Frame { len }
    }

    /// Whether a candidate of `raw_len` bytes without its `\n` yet, ending in
    /// `last`, is certainly over the limit whatever follows.
    fn exceeds(&self, raw_len: usize, last: u8) -> bool {
        let may_strip = usize::from(self.config.strip_cr && last == b'\r');
        raw_len - may_strip > self.config.max_frame
    }

    /// A complete line was oversize: report it per the policy. Its bytes are
    /// already counted as discarded.
    fn oversize_complete(&mut self, raw_len: usize, len: u64) -> Result<Option<Raw>, FrameError> {
        match self.config.oversize {
            OversizePolicy::Skip => {
                self.queued = Some(Raw::OversizeSkipped { len });
                Ok(Some(Raw::OversizeStarted { seen: raw_len as u64 }))
            }
            OversizePolicy::Fail => {
                // Under Fail every byte from the frame's start on is
                // discarded, its '\n' too, whatever the chunking.
                self.stats.delimiters -= 1;
                self.stats.discarded_bytes += 1;
                Err(self.fail(raw_len as u64))
            }
        }
    }

    /// A partial candidate of `raw` bytes (already out of the buffer and
    /// counted as discarded) passed the limit.
    fn oversize_partial(&mut self, raw: u64, last: u8) -> Result<Option<Raw>, FrameError> {
        self.stats.oversize_frames += 1;
        self.stats.discarded_bytes += raw;
        match self.config.oversize {
            OversizePolicy::Skip => {
                self.discard = Some(Discard { raw, last_cr: last == b'\r' });
                Ok(Some(Raw::OversizeStarted { seen: raw }))
            }
            OversizePolicy::Fail => Err(self.fail(raw)),
        }
    }

    /// Stops the framer. Everything still buffered is discarded and counted.
    fn fail(&mut self, seen: u64) -> FrameError {
        let err = FrameError::Oversize { seen, max_frame: self.config.max_frame as u64 };
        self.stats.discarded_bytes += self.buf.len() as u64;
        self.buf.clear();
        self.discard = None;
        self.queued = None;
        self.failed = Some(err);
        err
    }

    /// Handles a BOM at stream start, looking at the first buffered bytes.
    /// Returns `false` while it cannot tell yet.
    fn settle_bom(&mut self) -> bool {
        let live = self.buf.live();
        let n = live.len().min(BOM.len());
        if live[..n] != BOM[..n] {
            self.bom_pending = false;
        } else if n == BOM.len() {
            let start = self.buf.start + BOM.len();
            self.buf.consume_to(start);
            self.stats.bom_bytes += BOM.len() as u64;
            self.bom_pending = false;
        } else if self.eof {
            self.bom_pending = false;
        }
        !self.bom_pending
    }

    /// The read-into state machine: the next event from buffered bytes.
    pub(crate) fn step_buffered(&mut self) -> Result<Option<Raw>, FrameError> {
        loop {
            if let Some(err) = self.failed {
                return Err(err);
            }
            if let Some(raw) = self.queued.take() {
                return Ok(Some(raw));
            }
            if self.done {
                return Ok(None);
            }
            if self.bom_pending && !self.settle_bom() {
                return Ok(None);
            }
            if let Some(mut discard) = self.discard {
                let unscanned = self.buf.unscanned();
                let found = self.newline.find(unscanned);
                let upto = found.unwrap_or(unscanned.len());
                self.scanned += found.map_or(upto, |i| i + 1) as u64;
                if upto > 0 {
                    discard.last_cr = unscanned[upto - 1] == b'\r';
                }
                discard.raw += upto as u64;
                self.stats.discarded_bytes += upto as u64;
                if let Some(i) = found {
                    let after = self.buf.scan + i + 1;
                    self.buf.consume_to(after);
                    self.discard = None;
                    self.stats.delimiters += 1;
                    let cr = u64::from(self.config.strip_cr && discard.last_cr);
                    return Ok(Some(Raw::OversizeSkipped { len: discard.raw - cr }));
                }
                self.buf.clear();
                if self.eof {
                    self.discard = None;
                    self.done = true;
                    return Ok(Some(Raw::Truncated { len: discard.raw, oversize: true }));
                }
                self.discard = Some(discard);
                return Ok(None);
            }
            let found = self.newline.find(self.buf.unscanned());
            self.scanned += found.map_or(self.buf.unscanned().len(), |i| i + 1) as u64;
            match found {
                Some(i) => {
                    let start = self.buf.start;
                    let newline = self.buf.scan + i;
                    let raw_len = newline - start;
                    let ends_with_cr = raw_len > 0 && self.buf.bytes()[newline - 1] == b'\r';
                    self.buf.consume_to(newline + 1);
                    match self.classify(raw_len, ends_with_cr) {
                        Line::Empty => continue,
                        Line::Frame { len } => return Ok(Some(Raw::Frame(Src::Buf(start..start + len)))),
                        Line::Oversize { len } => return self.oversize_complete(raw_len, len),
                    }
                }
                None => {
                    self.buf.scan = self.buf.end;
                    let partial = self.buf.len();
                    if partial == 0 {
                        if self.eof {
                            self.done = true;
                        }
                        return Ok(None);
                    }
                    let last = self.buf.bytes()[self.buf.end - 1];
                    if self.exceeds(partial, last) {
                        self.buf.clear();
                        return self.oversize_partial(partial as u64, last);
                    }
                    if self.eof {
                        self.buf.clear();
                        self.stats.truncated_bytes += partial as u64;
                        self.done = true;
                        return Ok(Some(Raw::Truncated { len: partial as u64, oversize: false }));
                    }
                    return Ok(None);
                }
            }
        }
    }

    /// The push state machine: the next event from buffered bytes followed by
    /// `chunk[*pos..]`. Advances `pos` past what it consumed; copies into the
    /// buffer only a partial tail (or the rest of a frame whose head is
    /// already buffered).
    pub(crate) fn step_push(&mut self, chunk: &[u8], pos: &mut usize) -> Result<Option<Raw>, FrameError> {
        loop {
            if self.failed.is_some() {
                let rest = (chunk.len() - *pos) as u64;
                self.stats.discarded_bytes += rest;
                *pos = chunk.len();
            }
            // Buffered bytes come first: a queued event, unscanned bytes left
            // by a dropped `Push`, a pending BOM decision at end of stream.
            let buffered_first = self.failed.is_some() || self.queued.is_some() || self.buf.scan < self.buf.end;
            if buffered_first && let Some(raw) = self.step_buffered()? {
                return Ok(Some(raw));
            }
            if *pos == chunk.len() {
                return Ok(None);
            }
            assert!(!self.eof, "push after finish");
            if self.bom_pending {
                // Take only bytes that continue a BOM; they cannot be '\n'.
                while self.bom_pending && *pos < chunk.len() {
                    let k = self.buf.len();
                    if chunk[*pos] != BOM[k] {
                        self.bom_pending = false;
                        break;
                    }
                    self.buf.append(&chunk[*pos..*pos + 1]);
                    self.buf.scan = self.buf.end;
                    *pos += 1;
                    self.settle_bom();
                }
                self.note_high_water();
                continue;
            }
            let rest = &chunk[*pos..];
            let found = self.newline.find(rest);
            self.scanned += found.map_or(rest.len(), |i| i + 1) as u64;
            if let Some(mut discard) = self.discard {
                let upto = found.unwrap_or(rest.len());
                if upto > 0 {
                    discard.last_cr = rest[upto - 1] == b'\r';
                }
                discard.raw += upto as u64;
                self.stats.discarded_bytes += upto as u64;
                if found.is_none() {
                    *pos = chunk.len();
                    self.discard = Some(discard);
                    return Ok(None);
                }
                *pos += upto + 1;
                self.discard = None;
                self.stats.delimiters += 1;
                let cr = u64::from(self.config.strip_cr && discard.last_cr);
                return Ok(Some(Raw::OversizeSkipped { len: discard.raw - cr }));
            }
            let partial = self.buf.len();
            let Some(i) = found else {
                // No '\n' in the rest of the chunk: it is a partial tail.
                let total = partial + rest.len();
                let last = rest[rest.len() - 1];
                *pos = chunk.len();
                if self.exceeds(total, last) {
                    self.buf.clear();
                    return self.oversize_partial(total as u64, last);
                }
                self.buf.append(rest);
                self.buf.scan = self.buf.end;
                self.note_high_water();
                return Ok(None);
            };
            let newline = *pos + i;
            let raw_len = partial + i;
            let ends_with_cr = if i > 0 {
                chunk[newline - 1] == b'\r'
            } else {
                partial > 0 && self.buf.bytes()[self.buf.end - 1] == b'\r'
            };
            let line_start = *pos;
            *pos = newline + 1;
            match self.classify(raw_len, ends_with_cr) {
                Line::Empty => {
                    self.buf.clear();
                    continue;
                }
                Line::Oversize { len } => {
                    self.buf.clear();
                    return self.oversize_complete(raw_len, len);
                }
                Line::Frame { len } if partial == 0 => {
                    return Ok(Some(Raw::Frame(Src::Chunk(line_start..line_start + len))));
                }
                Line::Frame { len } => {
                    // The frame's head is buffered: complete it there.
                    self.buf.append(&chunk[line_start..newline]);
                    self.note_high_water();
                    let start = self.buf.start;
                    self.buf.clear();
                    return Ok(Some(Raw::Frame(Src::Buf(start..start + len))));
                }
            }
        }
    }

    /// Moves the unconsumed rest of a pushed chunk into the buffer, unscanned,
    /// so no byte is lost when a [`Push`](crate::Push) is dropped early.
    pub(crate) fn keep_rest(&mut self, rest: &[u8]) {
        if rest.is_empty() {
            return;
        }
        if self.failed.is_some() {
            self.stats.discarded_bytes += rest.len() as u64;
            return;
        }
        self.buf.append(rest);
        self.note_high_water();
    }
}

impl Src {
    fn buffered(self) -> Range<usize> {
        match self {
            Src::Buf(range) => range,
            Src::Chunk(_) => unreachable!("read-into mode yields only buffered frames"),
        }
    }
}

#[cfg(test)]
mod tests;
