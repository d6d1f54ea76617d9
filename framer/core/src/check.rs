//! Property checks shared by the fuzz targets, the conformance vectors and the
//! tests (feature `check`; not part of the stable API).
//!
//! Every `check_*` function takes an input and panics with a clear message
//! when a property fails. [`reference`] is a deliberately simple model that
//! frames the whole input at once; the real framer must always agree with it.

use alloc::format;
use alloc::vec::Vec;

use crate::{Bom, Config, EmptyLines, Event, FrameError, Framer, OversizePolicy, Stats};

#[cfg(feature = "check")]
mod targets;
#[cfg(feature = "check")]
pub use targets::*;

/// An event with an owned frame.
pub type OwnedEvent = Event<Vec<u8>>;

/// Everything a run produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Events in order.
    pub events: Vec<OwnedEvent>,
    /// The error that stopped the framer, if any (Fail policy).
    pub error: Option<FrameError>,
    /// Counters at the end.
    pub stats: Stats,
}

/// How bytes are fed to the framer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `spare` + `commit` + `next_event`.
    ReadInto,
    /// `push` + `Push::next_event`.
    Push,
}

/// All modes.
pub const MODES: [Mode; 2] = [Mode::ReadInto, Mode::Push];

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The reference model: frames `input` as a whole. `seen` in
/// [`Event::OversizeStarted`] and [`FrameError::Oversize`] is left at 0 (it
/// depends on chunking; see [`normalize`]). `buffered_high_water` and
/// `buffer_capacity` are 0.
pub fn reference(config: &Config, input: &[u8]) -> Outcome {
    let mut stats = Stats { bytes_in: input.len() as u64, ..Stats::default() };
    let mut events = Vec::new();
    let mut rest = input;
    if config.bom == Bom::Strip && rest.starts_with(BOM) {
        stats.bom_bytes = 3;
        rest = &rest[3..];
    }
    let max = config.max_frame as u64;
    while !rest.is_empty() {
        let (line, newline) = match find_newline(rest) {
            Some(i) => (&rest[..i], true),
            None => (rest, false),
        };
        let after = &rest[line.len() + usize::from(newline)..];
        let cr = u64::from(config.strip_cr && line.last() == Some(&b'\r'));
        let len = line.len() as u64 - cr;
        if len > max {
            stats.oversize_frames += 1;
            stats.discarded_bytes += line.len() as u64;
            if config.oversize == OversizePolicy::Fail {
                stats.discarded_bytes += u64::from(newline) + after.len() as u64;
                let error = FrameError::Oversize { seen: 0, max_frame: max };
                return Outcome { events, error: Some(error), stats };
            }
            events.push(Event::OversizeStarted { seen: 0 });
            if newline {
                stats.delimiters += 1;
                events.push(Event::OversizeSkipped { len });
            } else {
                events.push(Event::Truncated { len: line.len() as u64, oversize: true });
            }
        } else if !newline {
            stats.truncated_bytes += line.len() as u64;
            events.push(Event::Truncated { len: line.len() as u64, oversize: false });
        } else {
            stats.delimiters += 1;
            stats.cr_stripped += cr;
            if len == 0 && config.empty_lines == EmptyLines::Skip {
                stats.empty_lines += 1;
            } else {
                stats.frames += 1;
                stats.frame_bytes += len;
                stats.largest_frame = stats.largest_frame.max(len);
                events.push(Event::Frame(line[..len as usize].to_vec()));
            }
        }
        rest = after;
    }
    Outcome { events, error: None, stats }
}

/// The index of the first `\n` in `bytes`: the reference model's own search,
/// independent of the framer's (memchr's vector code), eight bytes per step.
///
/// A byte-at-a-time loop would be simpler, but under the fuzzer's comparison
/// tracing every byte compared is a call into libFuzzer: on the long streams
/// of `oversize_recovery` that loop took most of each run. The word test is
/// exact (see [`newline_mask`]); the unit test below holds it to the
/// byte-at-a-time definition at every position.
fn find_newline(bytes: &[u8]) -> Option<usize> {
    let mut words = bytes.chunks_exact(8);
    let mut at = 0;
    for word in &mut words {
        let mask = newline_mask(u64::from_le_bytes(word.try_into().expect("chunks of 8 bytes")));
        if mask != 0 {
            return Some(at + mask.trailing_zeros() as usize / 8);
        }
        at += 8;
    }
    words.remainder().iter().position(|&b| b == b'\n').map(|i| at + i)
}

/// `0x80` in each byte of `word` that is `\n`, `0` in every other byte. With
/// `x = word ^ 0x0A…`, a byte is `\n` iff its byte of `x` is 0. For one byte
/// `b` of `x`, `(b & 0x7F) + 0x7F` has its high bit set iff `b & 0x7F != 0`
/// and never carries into the next byte (at most `0xFE`); or-ing `b` adds
/// its own high bit, so the high bit is clear iff `b == 0`.
fn newline_mask(word: u64) -> u64 {
    const LOW7: u64 = u64::from_ne_bytes([0x7F; 8]);
    const NEWLINES: u64 = u64::from_ne_bytes([b'\n'; 8]);
    let x = word ^ NEWLINES;
    !(((x & LOW7) + LOW7) | x | LOW7)
}

/// Feeds `input` to a fresh framer in `mode`, cut into chunks of the given
/// sizes (cycled; a size of 0 is a read that returned nothing; sizes past the
/// input are clamped), then finishes the stream.
pub fn run(config: &Config, input: &[u8], chunks: &[usize], mode: Mode) -> Outcome {
    let mut framer = Framer::new(*config);
    let mut events = Vec::new();
    let mut error = None;
    let mut pos = 0;
    let mut sizes = CycleSizes::new(chunks);
    let mut max_chunk = 0;
    // Keep feeding after an error, as a host draining the pipe would: every
    // later call must return the same error.
    while pos < input.len() {
        let size = sizes.next().unwrap_or(usize::MAX).min(input.len() - pos);
        let chunk = &input[pos..pos + size];
        pos += size;
        max_chunk = max_chunk.max(size);
        let result = match mode {
            Mode::ReadInto => feed_read_into(&mut framer, chunk, &mut events),
            Mode::Push => {
                let mut push = framer.push(chunk);
                drain(|| push.next_event().map(|e| e.map(|e| e.map(<[u8]>::to_vec))), &mut events)
            }
        };
        note_error(&mut error, result, mode);
        // Between chunks, once drained, the framer holds at most one
        // candidate frame that may still be within the limit.
        assert!(
            framer.buffered() <= config.max_held(),
            "{mode:?}: {} bytes held after draining a chunk; the limit allows {}",
            framer.buffered(),
            config.max_held()
        );
    }
    framer.finish();
    let result = drain_buffered(&mut framer, &mut events);
    note_error(&mut error, result, mode);
    let stats = *framer.stats();
    check_accounting(&framer, &stats);
    let bound = config.max_held() as u64 + max_chunk as u64;
    assert!(
        stats.buffered_high_water <= bound,
        "{mode:?}: buffered high-water mark {} exceeds max_frame + 1 + largest chunk = {bound}",
        stats.buffered_high_water
    );
    Outcome { events, error, stats }
}

/// Cycles a size list; an empty (or all-zero) list means one chunk with the
/// whole input.
struct CycleSizes<'a> {
    sizes: &'a [usize],
    /// Whether every size is 0 (or there is none).
    empty: bool,
    i: usize,
}

impl<'a> CycleSizes<'a> {
    fn new(sizes: &'a [usize]) -> CycleSizes<'a> {
        CycleSizes { sizes, empty: sizes.iter().all(|&size| size == 0), i: 0 }
    }
}

impl Iterator for CycleSizes<'_> {
    type Item = usize;
    fn next(&mut self) -> Option<usize> {
        if self.empty {
            // Nothing but empty reads would never end: take the rest at once.
            return None;
        }
        let size = self.sizes[self.i % self.sizes.len()];
        self.i += 1;
        Some(size)
    }
}

fn note_error(first: &mut Option<FrameError>, result: Result<(), FrameError>, mode: Mode) {
    if let Err(err) = result {
        match first {
            Some(first) => assert_eq!(*first, err, "{mode:?}: a later call returned another error"),
            None => *first = Some(err),
        }
    } else {
        assert!(first.is_none(), "{mode:?}: a call succeeded after the framer failed with {first:?}");
    }
}

fn feed_read_into(framer: &mut Framer, mut chunk: &[u8], events: &mut Vec<OwnedEvent>) -> Result<(), FrameError> {
    // A 0-byte chunk is a read that returned nothing (e.g. EAGAIN): no commit.
    // A failed framer still accepts (and discards) bytes.
    if chunk.is_empty() {
        return drain_buffered(framer, events);
    }
    let mut result = Ok(());
    while !chunk.is_empty() {
        let spare = framer.spare();
        let n = spare.len().min(chunk.len());
        spare[..n].copy_from_slice(&chunk[..n]);
        framer.commit(n);
        chunk = &chunk[n..];
        if let Err(err) = drain_buffered(framer, events) {
            result = Err(err);
        }
    }
    result
}

fn drain_buffered(framer: &mut Framer, events: &mut Vec<OwnedEvent>) -> Result<(), FrameError> {
    drain(|| framer.next_event().map(|e| e.map(|e| e.map(<[u8]>::to_vec))), events)
}

fn drain(
    mut next: impl FnMut() -> Result<Option<OwnedEvent>, FrameError>,
    events: &mut Vec<OwnedEvent>,
) -> Result<(), FrameError> {
    while let Some(event) = next()? {
        events.push(event);
    }
    Ok(())
}

/// Panics unless every byte is accounted for exactly once.
pub fn check_accounting(framer: &Framer, stats: &Stats) {
    let accounted = stats.accounted_bytes() + framer.buffered() as u64;
    assert_eq!(
        accounted,
        stats.bytes_in,
        "byte accounting broken: frame {} + delimiters {} + cr {} + discarded {} + bom {} + truncated {} + buffered {} != bytes in {}",
        stats.frame_bytes,
        stats.delimiters,
        stats.cr_stripped,
        stats.discarded_bytes,
        stats.bom_bytes,
        stats.truncated_bytes,
        framer.buffered(),
        stats.bytes_in
    );
}

/// Replaces the chunking-dependent `seen` counts with 0, after checking that
/// each is plausible: over the limit, and no more than the frame's raw length.
pub fn normalize(config: &Config, mut outcome: Outcome) -> Outcome {
    let min_seen = config.max_frame as u64 + 1;
    let mut events = outcome.events.iter_mut().peekable();
    while let Some(event) = events.next() {
        if let Event::OversizeStarted { seen } = event {
            assert!(*seen >= min_seen, "OversizeStarted seen {seen} is not over the limit {}", config.max_frame);
            match events.peek() {
                Some(Event::OversizeSkipped { len }) => {
                    assert!(*seen <= len + 1, "OversizeStarted seen {seen} exceeds the frame's {len} bytes (+ CR)")
                }
                Some(Event::Truncated { len, oversize: true }) => {
                    assert!(*seen <= *len, "OversizeStarted seen {seen} exceeds the truncated frame's {len} bytes")
                }
                other => panic!("OversizeStarted followed by {other:?}, not by OversizeSkipped or Truncated"),
            }
            *seen = 0;
        }
    }
    if let Some(FrameError::Oversize { seen, .. }) = &mut outcome.error {
        assert!(*seen >= min_seen, "FrameError seen {seen} is not over the limit {}", config.max_frame);
        *seen = 0;
    }
    outcome.stats.buffered_high_water = 0;
    outcome.stats.buffer_capacity = 0;
    outcome
}

/// Feeds `input` in every mode with the given chunking and panics unless each
/// run agrees with the reference model: same events (up to `seen`), same
/// error, same counters, every byte accounted for, buffer within bounds.
/// Returns the reference model's outcome.
pub fn check_against_reference(config: &Config, input: &[u8], chunks: &[usize]) -> Outcome {
    let expected = reference(config, input);
    check_modes(config, input, chunks, &expected);
    expected
}

/// [`check_against_reference`] with the reference model's outcome for
/// `input` already computed (`expected`), so that a check trying several
/// chunkings of one input runs the model once.
pub fn check_modes(config: &Config, input: &[u8], chunks: &[usize], expected: &Outcome) {
    for mode in MODES {
        let got = normalize(config, run(config, input, chunks, mode));
        if got != *expected {
            panic!(
                "{mode:?} disagrees with the reference model\nconfig: {config:?}\nchunks: {chunks:?}\ninput: {}\n\
                 expected: {expected:#?}\ngot: {got:#?}",
                escape(input)
            );
        }
    }
}

/// Panics unless `input` gives the reference model's result cut at every
/// single byte position, read one byte at a time, and in one piece, in
/// every mode.
pub fn check_every_split(config: &Config, input: &[u8]) {
    let expected = check_against_reference(config, input, &[]);
    for cut in 0..=input.len() {
        check_modes(config, input, &[cut, usize::MAX], &expected);
    }
    check_modes(config, input, &[1], &expected);
}

/// A printable rendering of bytes for failure messages (truncated to 512).
pub fn escape(bytes: &[u8]) -> alloc::string::String {
    let shown = &bytes[..bytes.len().min(512)];
    let mut s: alloc::string::String = shown.escape_ascii().map(char::from).collect();
    if bytes.len() > shown.len() {
        s.push_str(&format!("… ({} bytes)", bytes.len()));
    }
    s
}

#[cfg(test)]
mod tests {
    use alloc::vec;

    use super::find_newline;

    #[test]
    fn find_newline_is_the_first_newline_at_every_position_and_length() {
        for len in 0..40 {
            // Bytes around '\n' (0x0A) and with the high bit set, which a
            // word test that carries across bytes would get wrong.
            for fill in [b'x', 0x0B, 0x09, 0x8A, 0xFF, 0x00, 0x80] {
                let mut bytes = vec![fill; len];
                assert_eq!(find_newline(&bytes), None, "len {len}, fill {fill:#x}");
                for at in (0..len).rev() {
                    bytes[at] = b'\n';
                    assert_eq!(find_newline(&bytes), Some(at), "len {len}, fill {fill:#x}, first at {at}");
                }
            }
        }
    }
}
