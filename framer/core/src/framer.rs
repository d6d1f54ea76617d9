//! The framer: a state machine over the [`Buffer`], fed by read-into or push.

use alloc::vec::Vec;
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
///   kept. While frames stay within [`Config::retain`], framing allocates
///   nothing once the buffer has grown.
///
/// # Memory
///
/// * **Lazy, small start.** [`new`](Framer::new) allocates nothing. The first
///   [`spare`](Framer::spare) lends 512 bytes (or `read_size` if smaller),
///   and the lend doubles each time a read fills it, up to
///   [`Config::read_size`](Config#structfield.read_size). An idle session
///   holds less than a page, not a whole read.
/// * **Growth touches only what it uses.** The storage grows by reserving
///   capacity; only the bytes lent by `spare` (or copied in by `push`) are
///   ever written, so pages the stream never reaches are never made
///   resident. [`capacity`](Framer::capacity) and [`Stats::buffer_capacity`]
///   report the reservation, which may exceed what is resident.
/// * **Each byte is copied about once.** The unconsumed tail moves to the
///   front of the storage only when that is cheap: when it is at most a
///   quarter of the storage, or when it is a small remnant and the room left
///   could not take a frame as large as the largest so far. Otherwise the
///   storage grows.
/// * **Storage is given back.** Storage over [`Config::retain`] bytes is
///   released at the next read (`spare` or `push` call) that finds at most
///   one read's worth buffered, and replaced by one of at most `retain`
///   bytes, of which only the lent part is touched. Hysteresis keeps a
///   stream of large frames from reallocating on every frame: when storage
///   released has to grow past `retain` again within 16 reads, the release
///   was premature, and the framer then waits for more reads (doubling each
///   time, up to 64) without a need beyond `retain` before it releases
///   again; a release that proves right halves that wait. An isolated large
///   frame is released at the first read after it.
/// * **Fresh versus kept framers.** Fresh storage is untouched: a fresh
///   framer pays a first-touch page fault for every page a large frame
///   reaches. A host that keeps one framer per session for the session's
///   lifetime, as `mcp-framer-stdio`'s reader does, pays them once, for
///   storage within `retain`, and again only for frames beyond it. A host
///   that expects such frames often raises `retain` to its limit
///   (`Config::DEFAULT.with_max_frame(max).with_retain(max)`): it then holds
///   the storage of its largest frame so far, and pays first-touch faults
///   only for pages no earlier frame reached.
/// * **A frame's storage can come back.** A consumer that took a large
///   frame's storage ([`take_frame`](Framer::take_frame)) can hand it back
///   once done ([`recycle`](Framer::recycle)): the frame in progress then
///   grows in it, moving only its own bytes, instead of in fresh pages. It
///   is kept only while a frame is in progress and the framer's own
///   storage is at most 1 MiB, and freed at the first read that finds
///   nothing buffered: the framer holds at most its own storage plus one
///   such storage, and none between frames.
/// * Every byte is counted in [`Stats`]; see there for the identity.
///
/// # Example: read-into
///
/// ```
/// use mcp_framer::{Config, Event, Framer};
///
/// let mut pipe: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\r\n\n{\"partial\":";
/// let mut framer = Framer::new(Config::DEFAULT.with_max_frame(1024));
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
    /// What the framer is doing with the current line.
    phase: Phase,
    /// The least spare space the next [`Framer::spare`] lends: small at
    /// first, doubled by each read that fills it, up to the read size.
    lend: usize,
    /// [`Framer::finish`] was called: no byte will follow what is buffered.
    /// Independent of the phase (a line or a discard may be under way at end
    /// of stream); "finished" is derived from both and the buffer.
    pub(crate) eof: bool,
}

/// What the framer is doing with the current line. Only [`Phase::Framing`]
/// lets the fast paths run, so their gate is one compare.
#[derive(Clone, Copy, Debug)]
enum Phase {
    /// At stream start under [`Bom::Strip`], until the first bytes show
    /// whether they are a BOM.
    Start,
    /// Looking for the `\n` that ends the current line.
    Framing,
    /// Discarding an oversize frame up to its `\n`, which ends this phase.
    Discarding {
        /// Raw bytes of the frame so far (a trailing `\r` included).
        raw: u64,
        /// Whether the last of them was `\r`.
        last_cr: bool,
    },
    /// Stopped under [`OversizePolicy::Fail`]: every later event call returns
    /// the error, and every later byte is discarded.
    Stopped(FrameError),
}

/// The first lend of a fresh framer (at most the read size): less than a
/// page, so an idle session (one small answer so far) costs no whole page.
const INITIAL_LEND: usize = 512;

/// Where a frame's bytes are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Src {
    /// In the framer's buffer.
    Buf(Range<usize>),
    /// In the chunk being pushed.
    Chunk(Range<usize>),
}

impl Src {
    /// The frame's bytes, given the buffer's storage and the chunk being
    /// pushed (empty in read-into mode, which yields only buffered frames).
    #[inline]
    pub(crate) fn slice<'a>(self, buf: &'a [u8], chunk: &'a [u8]) -> &'a [u8] {
        match self {
            Src::Buf(range) => &buf[range],
            Src::Chunk(range) => &chunk[range],
        }
    }
}

impl Framer {
    /// A framer with the given configuration. Allocates nothing until the
    /// first byte arrives.
    pub fn new(config: Config) -> Framer {
        Framer {
            config,
            buf: Buffer::new(config.retain),
            stats: Stats::default(),
            newline: Newline::new(),
            phase: if config.bom == Bom::Strip { Phase::Start } else { Phase::Framing },
            lend: INITIAL_LEND.min(config.read_size()),
            eof: false,
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

    /// The bytes held in the buffer ([`buffered`](Framer::buffered) of them):
    /// once the event calls have returned `Ok(None)`, the current partial
    /// frame so far (empty while an oversize frame is being discarded, whose
    /// bytes are never kept). A host reads it to keep a bounded head of a
    /// long frame before the read that may push it over the limit.
    ///
    /// ```
    /// use mcp_framer::{Config, Framer};
    ///
    /// let mut framer = Framer::new(Config::DEFAULT);
    /// let chunk = b"{\"a\":1}\n{\"partial";
    /// framer.spare()[..chunk.len()].copy_from_slice(chunk);
    /// framer.commit(chunk.len());
    /// while framer.next_event().unwrap().is_some() {}
    /// assert_eq!(framer.buffered_bytes(), b"{\"partial");
    /// ```
    pub fn buffered_bytes(&self) -> &[u8] {
        self.buf.live()
    }

    /// The size of the buffer's storage in bytes: what the framer has
    /// reserved on the heap (only the part it has used is resident). At most
    /// `max_frame + 1 + read_size` in read-into mode; back within
    /// [`Config::retain`] after a large frame (see [Memory](Framer#memory)).
    /// Also in [`Stats::buffer_capacity`].
    ///
    /// ```
    /// use mcp_framer::{Config, Framer};
    ///
    /// let mut framer = Framer::new(Config::DEFAULT.with_retain(64 * 1024));
    /// assert_eq!(framer.capacity(), 0, "nothing allocated yet");
    /// let big = [vec![b'x'; 1 << 20], b"\n".to_vec()].concat();
    /// let mut push = framer.push(&big[..1000]);
    /// while push.next_event().unwrap().is_some() {}
    /// drop(push);
    /// for chunk in big[1000..].chunks(64 * 1024) {
    ///     let mut push = framer.push(chunk);
    ///     while push.next_event().unwrap().is_some() {}
    /// }
    /// assert!(framer.capacity() >= 1 << 20, "the partial frame needed 1 MiB");
    /// let mut push = framer.push(b"{}\n");
    /// while push.next_event().unwrap().is_some() {}
    /// drop(push);
    /// assert!(framer.capacity() <= 64 * 1024, "given back at the next read");
    /// ```
    pub fn capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// Whether an oversize frame is being discarded up to its `\n`.
    pub fn is_discarding(&self) -> bool {
        matches!(self.phase, Phase::Discarding { .. })
    }

    /// Whether [`finish`](Framer::finish) was called and every event has been
    /// returned.
    pub fn is_finished(&self) -> bool {
        self.eof && self.buf.len() == 0 && matches!(self.phase, Phase::Start | Phase::Framing)
    }

    /// The sticky error, if the framer stopped under [`OversizePolicy::Fail`].
    pub fn error(&self) -> Option<FrameError> {
        match self.phase {
            Phase::Stopped(err) => Some(err),
            _ => None,
        }
    }

    /// Lends spare space in the framer's buffer for one read. Read into it,
    /// then [`commit`](Framer::commit) the number of bytes read. A fresh
    /// framer lends at least 512 bytes (or
    /// [`Config::read_size`](Config#structfield.read_size) if smaller), and
    /// each read that fills what was lent doubles the least lend, up to
    /// `read_size`; a busy stream reaches `read_size` in a few reads. The
    /// space may be longer than that least. Call it once per read: it is also
    /// where storage beyond [`Config::retain`] is given back (see
    /// [Memory](Framer#memory)).
    ///
    /// # Panics
    ///
    /// If the bytes already committed have not been drained with
    /// [`next_event`](Framer::next_event) and holding them plus a read would
    /// exceed the buffer cap (`max_frame + 1 + read_size`).
    pub fn spare(&mut self) -> &mut [u8] {
        let cap = self.config.buffer_cap();
        self.buf.checkpoint(self.lend);
        self.buf.prepare(self.lend, cap);
        self.stats.buffer_capacity = self.buf.capacity() as u64;
        self.buf.lent()
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
        if n >= self.lend {
            self.lend = self.lend.saturating_mul(2).min(self.config.read_size());
        }
        if let Phase::Stopped(_) = self.phase {
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

    /// Gives away the storage that holds the frame [`next_event`](Framer::next_event)
    /// just returned, for a consumer that keeps a large frame: no copy of it
    /// is made. Call it right after `next_event` returned
    /// [`Event::Frame`]`(frame)`, with `len = frame.len()`, in read-into mode
    /// (the frames of [`push`](Framer::push) are not in the buffer). Returns
    /// the storage, cut to the frame's end, and where the frame lies in it;
    /// the framer goes on with fresh storage holding only the bytes buffered
    /// after the frame (at most one read), so memory never holds the frame
    /// twice. `None` when the frame is not in the buffer.
    ///
    /// Taking is worth it for frames larger than the storage the framer
    /// would keep anyway ([`Config::retain`]): a smaller frame is cheaper to
    /// copy than its storage is to regrow.
    ///
    /// ```
    /// use mcp_framer::{Config, Event, Framer};
    ///
    /// let mut framer = Framer::new(Config::DEFAULT);
    /// let chunk = b"{\"big\":1}\r\n{\"next";
    /// framer.spare()[..chunk.len()].copy_from_slice(chunk);
    /// framer.commit(chunk.len());
    /// let Some(Event::Frame(frame)) = framer.next_event().unwrap() else { panic!() };
    /// let len = frame.len();
    /// let (storage, at) = framer.take_frame(len).unwrap();
    /// assert_eq!(&storage[at], b"{\"big\":1}");
    /// assert_eq!(framer.buffered_bytes(), b"{\"next", "the rest stays with the framer");
    /// ```
    pub fn take_frame(&mut self, len: usize) -> Option<(Vec<u8>, Range<usize>)> {
        // A frame from the buffer ends at the `\n` just before `start`, and
        // before a `\r` stripped by the framer's own rule.
        let newline = self.buf.start.checked_sub(1)?;
        let bytes = self.buf.bytes();
        if bytes.get(newline) != Some(&b'\n') {
            return None;
        }
        let cr = self.config.strip_cr && newline > 0 && bytes[newline - 1] == b'\r';
        let end = newline - usize::from(cr);
        let start = end.checked_sub(len)?;
        let storage = self.buf.take(start..end);
        self.stats.buffer_capacity = self.buf.capacity() as u64;
        Some((storage, start..end))
    }

    /// Hands back the storage of a frame given away by
    /// [`take_frame`](Framer::take_frame) once its consumer is done with it,
    /// so that the next large frame grows in memory already touched instead
    /// of fresh pages. Nothing is copied out of `storage`: it is empty
    /// space. The framer keeps it only while a frame is in progress (bytes
    /// buffered), its own storage is at most 1 MiB and `storage` is larger
    /// (and larger than what it keeps already), until the frame's next
    /// growth moves its bytes into it; otherwise, and at the first read that
    /// finds nothing buffered, it is freed. So the framer holds at most one
    /// such storage, beside at most 1 MiB of its own, and none between
    /// frames: bytes buffered stay within `max_frame + 1 + read_size`, and
    /// storage held within that plus 1 MiB.
    ///
    /// ```
    /// use mcp_framer::{Config, Event, Framer};
    ///
    /// let mut framer = Framer::new(Config::DEFAULT);
    /// let chunk = b"{\"big\":1}\n{\"next";
    /// framer.spare()[..chunk.len()].copy_from_slice(chunk);
    /// framer.commit(chunk.len());
    /// let Some(Event::Frame(frame)) = framer.next_event().unwrap() else { panic!() };
    /// let len = frame.len();
    /// let (storage, _at) = framer.take_frame(len).unwrap();
    /// // ... the application is done with the frame:
    /// let capacity = storage.capacity();
    /// framer.recycle(storage);
    /// assert_eq!(framer.recycled_capacity(), capacity, "kept: a frame is in progress");
    /// framer.release_recycled();
    /// assert_eq!(framer.recycled_capacity(), 0);
    /// ```
    pub fn recycle(&mut self, storage: Vec<u8>) {
        self.buf.recycle(storage);
    }

    /// Frees the storage [`recycle`](Framer::recycle) kept, if any (a
    /// caller that finds nothing buffered after its events, and may wait
    /// long for the next read).
    pub fn release_recycled(&mut self) {
        self.buf.release_recycled();
    }

    /// The capacity of the storage [`recycle`](Framer::recycle) kept for
    /// the next growth, in bytes (0 when none).
    pub fn recycled_capacity(&self) -> usize {
        self.buf.recycled_capacity()
    }

    /// [`next_event`](Framer::next_event) off the fast path: kept out of line
    /// so the fast path stays small enough to inline into the caller's loop.
    #[inline(never)]
    fn next_event_general(&mut self) -> Result<Option<Event<&[u8]>>, FrameError> {
        let event = self.step(&[], &mut 0)?;
        Ok(event.map(|event| event.map(|src| src.slice(self.buf.bytes(), &[]))))
    }

    /// The read-into fast path: the next frame when it is complete in the
    /// buffer, within the limit and not empty, while framing. Otherwise it
    /// leaves everything it searched marked as searched (so
    /// [`step`](Framer::step) resumes at the `\n` it found, or after the
    /// bytes without one) and returns `None`.
    #[inline(always)]
    fn next_plain_buffered(&mut self) -> Option<Range<usize>> {
        if !matches!(self.phase, Phase::Framing) {
            return None;
        }
        let (start, scan, end) = (self.buf.start, self.buf.scan, self.buf.end);
        let bytes = self.buf.bytes();
        let Some(i) = self.newline.find(&bytes[scan..end]) else {
            self.buf.scan = end;
            return None;
        };
        let newline = scan + i;
        let raw_len = newline - start;
        let cr = self.config.strip_cr && raw_len > 0 && bytes[newline - 1] == b'\r';
        let len = raw_len - usize::from(cr);
        if len == 0 || len > self.config.max_frame {
            self.buf.scan = newline;
            return None;
        }
        self.buf.consume_to(newline + 1);
        self.count_line(len, cr);
        Some(start..start + len)
    }

    /// The push fast path: the next frame that lies wholly inside
    /// `chunk[*pos..]`, while framing, with nothing buffered and a rest of
    /// the chunk that cannot exceed the limit. A rest without `\n` becomes the
    /// partial tail. Returns `Err(())` when the general path must take over;
    /// it then has searched nothing.
    #[inline(always)]
    pub(crate) fn next_plain_pushed(&mut self, chunk: &[u8], pos: &mut usize) -> Result<Option<Range<usize>>, ()> {
        if !matches!(self.phase, Phase::Framing) || self.buf.len() != 0 || chunk.len() - *pos > self.config.max_frame {
            return Err(());
        }
        loop {
            let rest = &chunk[*pos..];
            let Some(i) = self.newline.find(rest) else {
                *pos = chunk.len();
                if !rest.is_empty() {
                    // Within the limit: checked above.
                    self.buf.append(rest);
                    self.buf.scan = self.buf.end;
                    self.note_high_water();
                }
                return Ok(None);
            };
            let line = *pos;
            *pos += i + 1;
            let cr = self.config.strip_cr && i > 0 && rest[i - 1] == b'\r';
            let len = i - usize::from(cr);
            if self.count_line(len, cr) {
                return Ok(Some(line..line + len));
            }
        }
    }

    /// Counts a complete line within the limit: `len` bytes, its `\n` and, if
    /// `cr`, a stripped `\r`. Returns whether it is delivered (`false` for an
    /// empty line skipped under [`EmptyLines::Skip`]).
    #[inline(always)]
    fn count_line(&mut self, len: usize, cr: bool) -> bool {
        self.stats.delimiters += 1;
        self.stats.cr_stripped += u64::from(cr);
        if len == 0 && self.config.empty_lines == EmptyLines::Skip {
            self.stats.empty_lines += 1;
            return false;
        }
        self.stats.frames += 1;
        self.stats.frame_bytes += len as u64;
        self.stats.largest_frame = self.stats.largest_frame.max(len as u64);
        true
    }

    fn note_high_water(&mut self) {
        self.stats.buffer_capacity = self.buf.capacity() as u64;
        let held = self.buf.len() as u64;
        if held > self.stats.buffered_high_water {
            self.stats.buffered_high_water = held;
        }
    }

    /// Whether a line of `raw_len` bytes (its `\n` excluded), whose last byte
    /// is `\r` if `ends_with_cr`, is over the limit. For a partial line this
    /// holds whatever follows: only a `\r` right before the `\n` is stripped.
    fn over_limit(&self, raw_len: usize, ends_with_cr: bool) -> bool {
        raw_len - usize::from(self.config.strip_cr && ends_with_cr) > self.config.max_frame
    }

    /// The state machine, for both modes: the next event from the buffered
    /// bytes followed by `chunk[*pos..]` (push mode; read-into passes an empty
    /// chunk). Advances `pos` past what it consumed. Copies into the buffer
    /// only a partial tail (or the rest of a frame whose head is already
    /// buffered), never an oversize frame's bytes.
    pub(crate) fn step(&mut self, chunk: &[u8], pos: &mut usize) -> Result<Option<Event<Src>>, FrameError> {
        loop {
            let event = match self.phase {
                Phase::Stopped(err) => {
                    self.stats.discarded_bytes += (chunk.len() - *pos) as u64;
                    *pos = chunk.len();
                    return Err(err);
                }
                Phase::Start => {
                    if !self.settle_bom(chunk, pos) {
                        return Ok(None);
                    }
                    continue;
                }
                Phase::Framing => self.frame(chunk, pos)?,
                Phase::Discarding { raw, last_cr } => self.discard(raw, last_cr, chunk, pos),
            };
            if event.is_some() {
                return Ok(event);
            }
            if self.buf.scan < self.buf.end || *pos < chunk.len() {
                continue;
            }
            // Every byte given so far is used.
            return Ok(if self.eof { self.end_of_stream() } else { None });
        }
    }

    /// The next bytes to search, as `(in_buffer, range)`: the buffer's
    /// unscanned bytes if there are any (a `Push` dropped early leaves some,
    /// and read-into mode has only those), else the rest of the chunk.
    #[inline]
    fn next_bytes(&self, chunk: &[u8], pos: usize) -> (bool, Range<usize>) {
        if self.buf.scan < self.buf.end { (true, self.buf.scan..self.buf.end) } else { (false, pos..chunk.len()) }
    }

    /// Framing: searches the next bytes for the `\n` that ends the current
    /// line, whose first `head` bytes are scanned and buffered. Returns `None`
    /// after skipping an empty line or when the bytes searched hold no `\n`.
    fn frame(&mut self, chunk: &[u8], pos: &mut usize) -> Result<Option<Event<Src>>, FrameError> {
        let (in_buf, range) = self.next_bytes(chunk, *pos);
        let (start, scan) = (self.buf.start, self.buf.scan);
        let head = scan - start;
        let bytes = if in_buf { &self.buf.bytes()[range.clone()] } else { &chunk[range.clone()] };
        let found = self.newline.find(bytes);
        let upto = found.unwrap_or(bytes.len());
        // The line's last byte before its '\n' (or so far).
        let last = match upto {
            0 if head > 0 => Some(self.buf.bytes()[scan - 1]),
            0 => None,
            n => Some(bytes[n - 1]),
        };
        let ends_with_cr = last == Some(b'\r');
        let raw_len = head + upto;
        let Some(i) = found else {
            // No '\n' yet: a partial line.
            if self.over_limit(raw_len, ends_with_cr) {
                // Certainly oversize: its bytes are never kept.
                self.buf.clear();
                if !in_buf {
                    *pos = chunk.len();
                }
                return self.oversize(raw_len as u64, ends_with_cr).map(Some);
            }
            if in_buf {
                self.buf.scan = range.end;
            } else if !range.is_empty() {
                self.buf.append(&chunk[range]);
                self.buf.scan = self.buf.end;
                self.note_high_water();
                *pos = chunk.len();
            }
            return Ok(None);
        };
        if self.over_limit(raw_len, ends_with_cr) {
            // Discard up to the '\n', which the discarding phase then finds.
            if in_buf {
                self.buf.consume_to(range.start + i);
            } else {
                self.buf.clear();
                *pos += i;
            }
            return self.oversize(raw_len as u64, ends_with_cr).map(Some);
        }
        let cr = self.config.strip_cr && ends_with_cr;
        let len = raw_len - usize::from(cr);
        let delivered = self.count_line(len, cr);
        let src = if in_buf {
            self.buf.consume_to(range.start + i + 1);
            Src::Buf(start..start + len)
        } else if head == 0 {
            let line = *pos;
            *pos += i + 1;
            Src::Chunk(line..line + len)
        } else {
            // The frame's head is buffered: complete it there.
            if delivered {
                self.buf.append(&chunk[range.start..range.start + i]);
                self.note_high_water();
            }
            *pos += i + 1;
            let start = self.buf.start;
            self.buf.clear();
            Src::Buf(start..start + len)
        };
        Ok(delivered.then_some(Event::Frame(src)))
    }

    /// Discarding: drops the next bytes up to and including the oversize
    /// frame's `\n`. Returns [`Event::OversizeSkipped`] once it is found.
    fn discard(&mut self, raw: u64, last_cr: bool, chunk: &[u8], pos: &mut usize) -> Option<Event<Src>> {
        let (in_buf, range) = self.next_bytes(chunk, *pos);
        let bytes = if in_buf { &self.buf.bytes()[range.clone()] } else { &chunk[range.clone()] };
        let found = self.newline.find(bytes);
        let upto = found.unwrap_or(bytes.len());
        let last_cr = if upto > 0 { bytes[upto - 1] == b'\r' } else { last_cr };
        let raw = raw + upto as u64;
        self.stats.discarded_bytes += upto as u64;
        let used = range.start + found.map_or(upto, |i| i + 1);
        if in_buf {
            self.buf.consume_to(used);
        } else {
            *pos = used;
        }
        if found.is_none() {
            self.phase = Phase::Discarding { raw, last_cr };
            return None;
        }
        self.stats.delimiters += 1;
        self.phase = Phase::Framing;
        let cr = u64::from(self.config.strip_cr && last_cr);
        Some(Event::OversizeSkipped { len: raw - cr })
    }

    /// End of stream, every byte used: reports what is left of the current
    /// line.
    fn end_of_stream(&mut self) -> Option<Event<Src>> {
        match self.phase {
            Phase::Discarding { raw, .. } => {
                self.phase = Phase::Framing;
                Some(Event::Truncated { len: raw, oversize: true })
            }
            Phase::Framing if self.buf.len() > 0 => {
                let partial = self.buf.len() as u64;
                self.buf.clear();
                self.stats.truncated_bytes += partial;
                Some(Event::Truncated { len: partial, oversize: false })
            }
            Phase::Framing | Phase::Start | Phase::Stopped(_) => None,
        }
    }

    /// A line passed the limit after `raw` bytes (its `\n` excluded), already
    /// out of the buffer; `last_cr` tells whether the last was `\r`. Counts
    /// them as discarded and reports the frame per the policy.
    fn oversize(&mut self, raw: u64, last_cr: bool) -> Result<Event<Src>, FrameError> {
        self.stats.oversize_frames += 1;
        self.stats.discarded_bytes += raw;
        match self.config.oversize {
            OversizePolicy::Skip => {
                self.phase = Phase::Discarding { raw, last_cr };
                Ok(Event::OversizeStarted { seen: raw })
            }
            OversizePolicy::Fail => {
                let err = FrameError::Oversize { seen: raw, max_frame: self.config.max_frame as u64 };
                // Everything from the frame's start on is discarded, its '\n'
                // too, whatever the chunking.
                self.stats.discarded_bytes += self.buf.len() as u64;
                self.buf.clear();
                self.phase = Phase::Stopped(err);
                Err(err)
            }
        }
    }

    /// At stream start: strips a BOM once the first bytes show one, taking
    /// from the chunk only bytes that continue it. Returns `false` while it
    /// cannot tell yet.
    fn settle_bom(&mut self, chunk: &[u8], pos: &mut usize) -> bool {
        loop {
            let live = self.buf.live();
            let n = live.len().min(BOM.len());
            if live[..n] != BOM[..n] {
                break;
            }
            if n == BOM.len() {
                let after = self.buf.start + BOM.len();
                self.buf.consume_to(after);
                self.stats.bom_bytes += BOM.len() as u64;
                break;
            }
            // The first `n` bytes of a BOM so far: the next byte decides.
            match chunk.get(*pos) {
                Some(&byte) if byte == BOM[n] => {
                    // A BOM byte is not '\n': no need to search it.
                    self.buf.append(&[byte]);
                    self.buf.scan = self.buf.end;
                    self.note_high_water();
                    *pos += 1;
                }
                Some(_) => break,
                None if self.eof => break,
                None => return false,
            }
        }
        self.phase = Phase::Framing;
        true
    }

    /// One push is about to be framed: gives back storage beyond
    /// [`Config::retain`] if the policy says so (see [Memory](Framer#memory)).
    pub(crate) fn checkpoint(&mut self) {
        self.buf.checkpoint(self.config.read_size());
        self.stats.buffer_capacity = self.buf.capacity() as u64;
    }

    /// Moves the unconsumed rest of a pushed chunk into the buffer, unscanned,
    /// so no byte is lost when a [`Push`](crate::Push) is dropped early.
    pub(crate) fn keep_rest(&mut self, rest: &[u8]) {
        if rest.is_empty() {
            return;
        }
        if let Phase::Stopped(_) = self.phase {
            self.stats.discarded_bytes += rest.len() as u64;
            return;
        }
        self.buf.append(rest);
        self.note_high_water();
    }

    /// Bytes searched for `\n` so far (tests check the no-rescan guarantee).
    #[cfg(test)]
    pub(crate) fn scanned(&self) -> u64 {
        self.newline.scanned()
    }
}

#[cfg(test)]
mod tests;
