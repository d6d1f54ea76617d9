//! The fuzz targets' inputs and checks (feature `check`).
//!
//! Each target decodes its bytes into one of the inputs below and calls one
//! `check_*` function; `cargo test` replays the committed seeds and crash
//! files through the same functions, on stable, without libFuzzer.
//!
//! # Byte layout
//!
//! Every input starts with the same [`Setup`] header, so that seeds are easy
//! to write by hand (missing bytes read as zero, as with
//! [`arbitrary::Unstructured`]):
//!
//! ```text
//! flags:u8  limit:u16le  read_size:u16le  n:u8  chunk:u16le × (n % 16)  rest…
//! ```
//!
//! * `flags`: bit 0 [`OversizePolicy::Fail`], bit 1 keep `\r`
//!   (`strip_cr = false`), bit 2 [`EmptyLines::Deliver`], bit 3 [`Bom::Keep`].
//!   Other bits are ignored (bit 4 once chose the removed `&mut` event
//!   calls; committed seeds still set it).
//! * `limit`: `max_frame = limit % 4097`, so small limits and oversize frames
//!   are common.
//! * `read_size`: the least spare space per read in read-into mode; `0` means
//!   the default.
//! * `chunk`: chunk sizes, cycled (see [`run`](super::run)); none means one
//!   chunk. For the reader target they are the sizes of successive reads,
//!   where `0` is a `WouldBlock` error and `0xFFFF` an `Interrupted` one.
//! * `rest`: the payload (`split_boundary`, `adversarial_reader`) or the
//!   [`LineSpec`]s, each in `arbitrary`'s derive format
//!   (`oversize_recovery`).

use alloc::vec;
use alloc::vec::Vec;

use arbitrary::{Arbitrary, Unstructured};

use super::{MODES, OwnedEvent, check_modes, escape, normalize, reference, run};
use crate::{Bom, Config, DEFAULT_READ_SIZE, EmptyLines, Event, FrameError, OversizePolicy};

/// Largest `max_frame` a [`Setup`] header encodes.
pub const MAX_LIMIT: usize = 4096;
/// Most chunk sizes a [`Setup`] header encodes.
pub const MAX_CHUNKS: usize = 15;

const FAIL: u8 = 1;
const KEEP_CR: u8 = 1 << 1;
const DELIVER_EMPTY: u8 = 1 << 2;
const KEEP_BOM: u8 = 1 << 3;

/// A framer configuration plus a chunking: the header of every fuzz input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Setup {
    /// The framer configuration.
    pub config: Config,
    /// Chunk (or read) sizes, cycled; empty means one chunk.
    pub chunks: Vec<usize>,
}

impl Setup {
    /// A setup with `config` and one chunk.
    pub fn new(config: Config) -> Setup {
        Setup { config, chunks: Vec::new() }
    }

    /// Decodes the header from the front of `u`.
    pub fn decode(u: &mut Unstructured<'_>) -> arbitrary::Result<Setup> {
        let flags = u8::arbitrary(u)?;
        let limit = usize::from(u16::arbitrary(u)?) % (MAX_LIMIT + 1);
        let read_size = usize::from(u16::arbitrary(u)?);
        let count = usize::from(u8::arbitrary(u)?) % (MAX_CHUNKS + 1);
        let mut chunks = Vec::with_capacity(count);
        for _ in 0..count {
            chunks.push(usize::from(u16::arbitrary(u)?));
        }
        let config = Config::DEFAULT
            .with_max_frame(limit)
            .with_oversize(if flags & FAIL != 0 { OversizePolicy::Fail } else { OversizePolicy::Skip })
            .with_strip_cr(flags & KEEP_CR == 0)
            .with_empty_lines(if flags & DELIVER_EMPTY != 0 { EmptyLines::Deliver } else { EmptyLines::Skip })
            .with_bom(if flags & KEEP_BOM != 0 { Bom::Keep } else { Bom::Strip })
            .with_read_size(if read_size == 0 { DEFAULT_READ_SIZE } else { read_size });
        Ok(Setup { config, chunks })
    }

    /// The header bytes that [`decode`](Setup::decode) turns back into this
    /// setup.
    ///
    /// # Panics
    ///
    /// If the setup cannot be encoded: `max_frame` over [`MAX_LIMIT`], more
    /// than [`MAX_CHUNKS`] chunks, a chunk or `read_size` over `u16::MAX`
    /// (`read_size` may also be [`DEFAULT_READ_SIZE`]).
    pub fn encode(&self) -> Vec<u8> {
        let c = &self.config;
        let mut flags = 0;
        flags |= if c.oversize == OversizePolicy::Fail { FAIL } else { 0 };
        flags |= if c.strip_cr { 0 } else { KEEP_CR };
        flags |= if c.empty_lines == EmptyLines::Deliver { DELIVER_EMPTY } else { 0 };
        flags |= if c.bom == Bom::Keep { KEEP_BOM } else { 0 };
        assert!(c.max_frame <= MAX_LIMIT, "max_frame {} does not fit the header", c.max_frame);
        assert!(self.chunks.len() <= MAX_CHUNKS, "{} chunk sizes do not fit the header", self.chunks.len());
        let read_size = if c.read_size == DEFAULT_READ_SIZE { 0 } else { c.read_size };
        let mut out = vec![flags];
        out.extend_from_slice(&u16_le(c.max_frame));
        out.extend_from_slice(&u16_le(read_size));
        out.push(self.chunks.len() as u8);
        for &chunk in &self.chunks {
            out.extend_from_slice(&u16_le(chunk));
        }
        out
    }
}

fn u16_le(n: usize) -> [u8; 2] {
    u16::try_from(n).unwrap_or_else(|_| panic!("{n} does not fit in a u16")).to_le_bytes()
}

/// Splits fuzz bytes into a [`Setup`] and the payload.
pub fn decode_setup_and_payload(data: &[u8]) -> (Setup, &[u8]) {
    let mut u = Unstructured::new(data);
    // Reading integers from `Unstructured` never fails: missing bytes are 0.
    let setup = Setup::decode(&mut u).expect("header decoding is infallible");
    (setup, u.take_rest())
}

/// Payloads up to this many bytes are also fed one byte at a time by
/// [`check_split_boundary`]. Byte-at-a-time costs a call into the framer per
/// byte and mode; longer payloads get it when the header asks for it (a chunk
/// list of `[1]`), as the committed seeds do.
pub const BYTEWISE_MAX: usize = 64;

/// The `split_boundary` property: the payload, cut into the given chunks, in
/// every input mode, gives the reference model's events, error and counters;
/// every byte is accounted for; the buffer stays within the limit plus one
/// chunk. The same holds in one piece and, for payloads of at most
/// [`BYTEWISE_MAX`] bytes, one byte at a time, so all chunkings agree.
///
/// The reference model runs once; each chunking and mode is compared with
/// its outcome. A chunking the header already gives (one piece, or one byte
/// at a time) is not run twice.
pub fn check_split_boundary(setup: &Setup, payload: &[u8]) {
    let config = &setup.config;
    let chunks = &setup.chunks[..];
    let expected = reference(config, payload);
    check_modes(config, payload, chunks, &expected);
    // One piece: no sizes, only empty reads, or a first chunk that takes it all.
    let one_piece = chunks.iter().all(|&size| size == 0) || chunks[0] >= payload.len();
    if !one_piece {
        check_modes(config, payload, &[], &expected);
    }
    if payload.len() <= BYTEWISE_MAX && chunks != [1] {
        check_modes(config, payload, &[1], &expected);
    }
}

/// One line of an `oversize_recovery` input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineSpec {
    /// Printable ASCII (quotes and backslashes included) of
    /// `len % (max_frame + 1)` bytes, then `\n`: always within the limit.
    Normal {
        /// Length, reduced modulo `max_frame + 1`.
        len: u16,
        /// Where the printable pattern starts.
        fill: u8,
    },
    /// `max_frame + 1 + extra % 2048` bytes, then `\r\n` if `cr`, else `\n`.
    Oversize {
        /// Bytes over the limit, reduced modulo 2048.
        extra: u16,
        /// End with `\r\n`.
        cr: bool,
    },
    /// `\n`, or `\r\n` if `cr`.
    Empty {
        /// End with `\r\n`.
        cr: bool,
    },
    /// Printable ASCII of `len % (max_frame + 1)` bytes, then `\r\n`: within
    /// the limit when `\r` is stripped, one byte over it at `max_frame` when
    /// it is not.
    Crlf {
        /// Length, reduced modulo `max_frame + 1`.
        len: u16,
    },
    /// `chars` copies of a 2-, 3- or 4-byte UTF-8 character (`é`, `中`,
    /// `😀`), then `\n`: over the limit when its **bytes** are.
    Multibyte {
        /// Number of characters.
        chars: u8,
        /// Character width in bytes: `2 + width % 3`.
        width: u8,
    },
    /// Printable ASCII of `len % (2 * max_frame + 2)` bytes and no `\n`: the
    /// end of the stream (later lines are ignored).
    Unterminated {
        /// Length, reduced modulo `2 * max_frame + 2`.
        len: u16,
    },
}

impl<'a> Arbitrary<'a> for LineSpec {
    /// The layout `#[derive(Arbitrary)]` gives (arbitrary 1.x), written out
    /// so that this module needs neither std nor the derive: a `u32` tag `t`
    /// picks variant `(t * 6) >> 32`, then the fields follow in order.
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(match (u64::from(u32::arbitrary(u)?) * 6) >> 32 {
            0 => LineSpec::Normal { len: u16::arbitrary(u)?, fill: u8::arbitrary(u)? },
            1 => LineSpec::Oversize { extra: u16::arbitrary(u)?, cr: bool::arbitrary(u)? },
            2 => LineSpec::Empty { cr: bool::arbitrary(u)? },
            3 => LineSpec::Crlf { len: u16::arbitrary(u)? },
            4 => LineSpec::Multibyte { chars: u8::arbitrary(u)?, width: u8::arbitrary(u)? },
            _ => LineSpec::Unterminated { len: u16::arbitrary(u)? },
        })
    }
}

/// The `oversize_recovery` input: a [`Setup`] and a sequence of lines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OversizeCase {
    /// Configuration and chunking.
    pub setup: Setup,
    /// The lines, in stream order.
    pub lines: Vec<LineSpec>,
}

impl<'a> Arbitrary<'a> for OversizeCase {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let setup = Setup::decode(u)?;
        let mut lines = Vec::new();
        while !u.is_empty() {
            lines.push(LineSpec::arbitrary(u)?);
        }
        Ok(OversizeCase { setup, lines })
    }
}

impl OversizeCase {
    /// The bytes that decode to this case: the header, then each line in
    /// `arbitrary`'s derive format (variant index as a `u32`, then fields).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = self.setup.encode();
        for line in &self.lines {
            let (index, fields): (u32, Vec<u8>) = match *line {
                LineSpec::Normal { len, fill } => (0, [&len.to_le_bytes()[..], &[fill]].concat()),
                LineSpec::Oversize { extra, cr } => (1, [&extra.to_le_bytes()[..], &[u8::from(cr)]].concat()),
                LineSpec::Empty { cr } => (2, vec![u8::from(cr)]),
                LineSpec::Crlf { len } => (3, len.to_le_bytes().to_vec()),
                LineSpec::Multibyte { chars, width } => (4, vec![chars, width]),
                LineSpec::Unterminated { len } => (5, len.to_le_bytes().to_vec()),
            };
            // The derive maps a u32 `t` to variant `(t * 6) >> 32`.
            let tag = ((u64::from(index) << 32).div_ceil(6)) as u32;
            out.extend_from_slice(&tag.to_le_bytes());
            out.extend_from_slice(&fields);
        }
        out
    }

    /// The lines as `(body, ending)` byte pairs, up to the first
    /// [`LineSpec::Unterminated`] (whose ending is empty).
    fn pieces(&self) -> Vec<(Vec<u8>, &'static [u8])> {
        let max = self.setup.config.max_frame;
        let mut pieces = Vec::new();
        for (i, line) in self.lines.iter().enumerate() {
            let fill = i as u8;
            let piece: (Vec<u8>, &'static [u8]) = match *line {
                LineSpec::Normal { len, fill } => (printable(usize::from(len) % (max + 1), fill), b"\n"),
                LineSpec::Oversize { extra, cr } => {
                    (printable(max + 1 + usize::from(extra) % 2048, fill), if cr { b"\r\n" } else { b"\n" })
                }
                LineSpec::Empty { cr } => (Vec::new(), if cr { b"\r\n" } else { b"\n" }),
                LineSpec::Crlf { len } => (printable(usize::from(len) % (max + 1), fill), b"\r\n"),
                LineSpec::Multibyte { chars, width } => {
                    let ch = ["é", "中", "😀"][usize::from(width % 3)];
                    (ch.repeat(usize::from(chars)).into_bytes(), b"\n")
                }
                LineSpec::Unterminated { len } => (printable(usize::from(len) % (2 * max + 2), fill), b""),
            };
            pieces.push(piece);
            if matches!(line, LineSpec::Unterminated { .. }) {
                break;
            }
        }
        pieces
    }

    /// The stream bytes and, derived from the lines independently of the
    /// reference model, the events and error they must produce (`seen` as 0)
    /// and the number of frames over the limit.
    pub fn expand(&self) -> (Vec<u8>, Vec<OwnedEvent>, Option<FrameError>, u64) {
        let config = &self.setup.config;
        let max = config.max_frame;
        let pieces = self.pieces();
        let mut input = Vec::with_capacity(pieces.iter().map(|(body, ending)| body.len() + ending.len()).sum());
        for (body, ending) in &pieces {
            input.extend_from_slice(body);
            input.extend_from_slice(ending);
        }
        let mut events = Vec::new();
        let mut oversize = 0;
        // Lines never start with a BOM, so the BOM rule never applies.
        for (body, ending) in pieces {
            let mut frame = body;
            if ending == b"\r\n" && !config.strip_cr {
                frame.push(b'\r');
            }
            let len = frame.len() as u64;
            let at_eof = ending.is_empty();
            if frame.len() > max {
                oversize += 1;
                if config.oversize == OversizePolicy::Fail {
                    // Nothing after the first oversize frame is delivered.
                    return (input, events, Some(FrameError::Oversize { seen: 0, max_frame: max as u64 }), oversize);
                }
                events.push(Event::OversizeStarted { seen: 0 });
                events.push(if at_eof {
                    Event::Truncated { len, oversize: true }
                } else {
                    Event::OversizeSkipped { len }
                });
            } else if at_eof {
                // A partial frame at end of stream is reported, never delivered.
                if len > 0 {
                    events.push(Event::Truncated { len, oversize: false });
                }
            } else if len > 0 || config.empty_lines == EmptyLines::Deliver {
                events.push(Event::Frame(frame));
            }
        }
        (input, events, None, oversize)
    }
}

/// `len` printable ASCII bytes (`' '..='~'`, so quotes and backslashes too),
/// starting at an offset into that range.
fn printable(len: usize, fill: u8) -> Vec<u8> {
    // Byte `i` is `' ' + (fill + i) % 95`: the 95 printable bytes, rotated to
    // start at `fill % 95`, repeated (copied a run at a time, not a byte at a
    // time: oversize lines are thousands of bytes).
    const PRINTABLE: [u8; 95] = {
        let mut all = [0; 95];
        let mut i = 0;
        while i < 95 {
            all[i] = b' ' + i as u8;
            i += 1;
        }
        all
    };
    let first = usize::from(fill) % 95;
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(&PRINTABLE[first..first + (95 - first).min(len)]);
    while out.len() < len {
        let n = (len - out.len()).min(95);
        out.extend_from_slice(&PRINTABLE[..n]);
    }
    out
}

/// The `oversize_recovery` property: in every input mode and the case's
/// chunking, every normal frame (also after any oversize frame) is delivered
/// byte-exact and in order; each oversize frame is reported once, with its
/// exact length; nothing beyond the limit is buffered between chunks; under
/// [`OversizePolicy::Fail`] nothing is delivered after the first oversize
/// frame, and every later call returns the same error. The expected events
/// come from the lines themselves, not from the reference model (which must
/// agree too).
pub fn check_oversize_recovery(case: &OversizeCase) {
    let config = &case.setup.config;
    let (input, events, error, oversize) = case.expand();
    let expected_oversize = if error.is_some() { 1 } else { oversize };
    let reference = reference(config, &input);
    assert_eq!(
        (&reference.events, &reference.error),
        (&events, &error),
        "the reference model disagrees with the line structure of {case:?}"
    );
    for mode in MODES {
        let got = normalize(config, run(config, &input, &case.setup.chunks, mode));
        let summary = || alloc::format!("{mode:?}, {case:?}, input {}", escape(&input));
        assert_eq!(got.events, events, "events differ: {}", summary());
        assert_eq!(got.error, error, "error differs: {}", summary());
        assert_eq!(got.stats.oversize_frames, expected_oversize, "oversize count differs: {}", summary());
        let delivered = events.iter().filter(|e| matches!(e, Event::Frame(_))).count() as u64;
        assert_eq!(got.stats.frames, delivered, "frame count differs: {}", summary());
        assert_eq!(got, reference, "stats differ from the reference: {}", summary());
    }
}

/// The `adversarial_reader` input: a [`Setup`] whose chunk sizes are the
/// reader's successive read results, and the stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReaderCase<'a> {
    /// Configuration and read plan.
    pub setup: Setup,
    /// The bytes the reader hands out.
    pub stream: &'a [u8],
}

/// A reader that follows a plan: each read returns the planned number of
/// bytes (clamped to the buffer and what is left), `WouldBlock` for a planned
/// 0, `Interrupted` for a planned `0xFFFF`, and end of stream only when the
/// data is used up. A plan with no byte-returning entry returns everything
/// in one read.
#[cfg(feature = "std")]
#[derive(Debug)]
pub struct PlannedReader<'a> {
    data: &'a [u8],
    plan: &'a [usize],
    /// Whether the plan has an entry that returns bytes (else: one read).
    progress: bool,
    next: usize,
    /// Reads that returned an error, of each kind: `(would_block, interrupted)`.
    pub errors: (u64, u64),
}

#[cfg(feature = "std")]
impl<'a> PlannedReader<'a> {
    /// A reader over `data` following `plan` (cycled).
    pub fn new(data: &'a [u8], plan: &'a [usize]) -> PlannedReader<'a> {
        let progress = plan.iter().any(|&n| n != 0 && n != 0xFFFF);
        PlannedReader { data, plan, progress, next: 0, errors: (0, 0) }
    }
}

#[cfg(feature = "std")]
impl std::io::Read for PlannedReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use std::io::ErrorKind;
        let planned = if self.data.is_empty() || !self.progress {
            usize::MAX
        } else {
            let n = self.plan[self.next % self.plan.len()];
            self.next += 1;
            n
        };
        match planned {
            0 => {
                self.errors.0 += 1;
                Err(ErrorKind::WouldBlock.into())
            }
            0xFFFF => {
                self.errors.1 += 1;
                Err(ErrorKind::Interrupted.into())
            }
            n => {
                let n = n.min(buf.len()).min(self.data.len());
                buf[..n].copy_from_slice(&self.data[..n]);
                self.data = &self.data[n..];
                Ok(n)
            }
        }
    }
}

/// The `adversarial_reader` property: driving [`Framer::read_from`] with a
/// [`PlannedReader`] (retrying after `WouldBlock`, draining after every read)
/// gives the reference model's events, error and counters; every byte is
/// accounted for; the buffer's storage never exceeds
/// `max_frame + 1 + read_size`.
///
/// [`Framer::read_from`]: crate::Framer::read_from
#[cfg(feature = "std")]
pub fn check_adversarial_reader(case: &ReaderCase<'_>) {
    use std::io::ErrorKind;

    use super::{Outcome, check_accounting};

    let config = &case.setup.config;
    let mut framer = crate::Framer::new(*config);
    let mut reader = PlannedReader::new(case.stream, &case.setup.chunks);
    let mut events = Vec::new();
    let mut error = None;
    let cap = (config.max_held() + config.read_size()) as u64;
    loop {
        let n = match framer.read_from(&mut reader) {
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => usize::MAX,
            Err(e) => panic!("read_from returned an unexpected error: {e}"),
        };
        assert!(framer.capacity() as u64 <= cap, "buffer storage {} exceeds {cap}", framer.capacity());
        loop {
            match framer.next_event().map(|e| e.map(|e| e.map(<[u8]>::to_vec))) {
                Ok(Some(event)) => events.push(event),
                Ok(None) => break,
                Err(err) => {
                    assert!(error.is_none_or(|first| first == err), "a later call returned another error: {err:?}");
                    error = Some(err);
                    break;
                }
            }
        }
        if error.is_none() {
            assert!(framer.buffered() <= config.max_held(), "{} bytes held between reads", framer.buffered());
        }
        if n == 0 {
            break;
        }
    }
    assert!(error.is_some() || framer.is_finished(), "end of stream drained but the framer is not finished");
    let stats = *framer.stats();
    check_accounting(&framer, &stats);
    assert!(stats.buffered_high_water <= cap, "high-water mark {} exceeds {cap}", stats.buffered_high_water);
    let got = normalize(config, Outcome { events, error, stats });
    let expected = reference(config, case.stream);
    assert_eq!(
        got,
        expected,
        "read_from disagrees with the reference model\nsetup: {:?}\nstream: {}\nerrors returned (WouldBlock, Interrupted): {:?}",
        case.setup,
        escape(case.stream),
        reader.errors
    );
}

#[cfg(test)]
mod tests {
    use alloc::vec::Vec;

    use super::printable;

    #[test]
    fn printable_is_the_rotated_printable_range() {
        for fill in [0, 1, 94, 95, 96, 200, 255] {
            for len in [0, 1, 94, 95, 96, 190, 191, 1000] {
                let want: Vec<u8> = (0..len).map(|i| b' ' + ((usize::from(fill) + i) % 95) as u8).collect();
                assert_eq!(printable(len, fill), want, "len {len}, fill {fill}");
            }
        }
    }
}
