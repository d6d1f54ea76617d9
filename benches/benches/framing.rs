//! `framing`: newline framing of the same JSON-RPC byte stream, fed in 64 KiB
//! chunks (one pipe read on Linux), by this framer and by its peers.
//!
//! Shapes (see `mcp_framer_benches::shapes`): 200 B `tools/call` requests,
//! 64 KiB `tools/list` results, 8 MiB text tool results, each repeated into a
//! stream of about 32 MiB (16 MiB with `MCP_BENCH_QUICK=1`, which also
//! shortens warm-up and measurement). Criterion groups are
//! `framing_<shape>`, one function per strategy:
//!
//! * `memchr_count`: `memchr_iter(b'\n', ..).count()` over the whole stream at
//!   once, no chunks, no frames: the scan limit.
//! * `copy_count`: each chunk copied into one 64 KiB scratch buffer (the
//!   stand-in for `read(2)`, as below), then `memchr`-counted there: the
//!   limit for read-into with a simulated read. Not a reachable one for
//!   large frames, whose bytes must stay contiguous in a large buffer.
//! * `read_into`: this framer in read-into mode. Each chunk is copied into
//!   `Framer::spare()`: that memcpy is the stand-in for `read(2)`, which would
//!   copy the pipe's bytes there in a real transport. Then `commit` and drain
//!   `next_event`.
//! * `push`: this framer in push mode, `Framer::push(chunk)`.
//! * `line_buffer`: the plain read-into framer a user writes by hand in
//!   about 80 lines ([`LineBuffer`]): a `Vec`, `memchr` from where the last
//!   search stopped, the unconsumed tail rolled to the front whenever a read
//!   does not fit after it, doubling when a line fills the buffer, a byte
//!   limit. The same simulated read as `read_into`.
//! * `read_until`: `BufRead::read_until(b'\n')` through a 64 KiB `BufReader`
//!   over a reader that yields 64 KiB chunks (also by memcpy). Unbounded.
//! * `lines_codec`: tokio-util `LinesCodec::new_with_max_length(16 MiB)`
//!   decoding from a `BytesMut` extended by each chunk.
//! * `naive`: append each chunk to a `String`, `find('\n')` from the start,
//!   `drain` the line. Rescans and shifts: slow, so it runs 10 flat samples.
//!
//! Every strategy keeps its buffers across iterations (a long-lived session),
//! frames the whole stream in each iteration and asserts, inside the timed
//! loop, that it found exactly the stream's frame count. Both framer modes use
//! the default `Config` (16 MiB limit). Throughput is the stream's bytes.
//!
//! Then the group `framing_large`: the cost of a frame as it grows, on
//! 32 MiB of 8 MiB frames and 32 MiB of 32 MiB frames (text results), read
//! into a framer with a 64 MiB limit. `kept_8MiB` / `kept_32MiB`: one framer
//! kept across iterations with `Config::retain` at the limit, so its storage
//! is reused (how a host keeps one framer per session); `fresh_8MiB` /
//! `fresh_32MiB`: a new framer per iteration, whose growth touches fresh
//! pages; `line_buffer_8MiB` / `line_buffer_32MiB`: the plain framer above,
//! kept (it never shrinks), the same ratio for a buffer with no policy;
//! `floor_8MiB` / `floor_32MiB`: [`contiguous_copy`], the least any reader
//! that keeps a frame contiguous does, whose own ratio is the memory
//! hierarchy's (a 32 MiB frame's bytes are written to 32 MiB of memory, an
//! 8 MiB frame's to the same 8 MiB four times). Equal bytes per iteration: the throughput ratio 32 MiB / 8 MiB is
//! the per-byte cost ratio, and a frame four times longer costs at most 4.5
//! times as much when it is at least 0.89.
//!
//! Criterion measures wall-clock time; with `MCP_BENCH_CLOCK=cpu` it measures
//! the thread's CPU time instead (see `support/cpu_time.rs`), as
//! `scripts/bench-report` always runs this suite (`cpu_time` in
//! `benches/report.toml`).
//!
//! Run: `cargo bench -p mcp-framer-benches --bench framing`, or through
//! `scripts/bench-report`, which prints the ratios against the targets.

#[path = "support/cpu_time.rs"]
mod cpu_time;

use std::hint::black_box;
use std::io::{BufRead, BufReader, Read};

use bytes::BytesMut;
use criterion::measurement::Measurement;
use criterion::{Criterion, SamplingMode, Throughput};
use mcp_framer::{Config, DEFAULT_MAX_FRAME, Event, Framer};
use mcp_framer_benches::shapes::{
    PIPE_READ as CHUNK, large_text_result, quick, stream, tools_call_request, tools_list_result,
};
use tokio_util::codec::{Decoder, LinesCodec};

/// A newline-delimited stream of one shape, and its frame count.
struct Shape {
    name: &'static str,
    bytes: Vec<u8>,
    frames: u64,
}

fn shapes() -> Vec<Shape> {
    let total = if quick() { 16 << 20 } else { 32 << 20 };
    let shape = |name, (bytes, frames)| Shape { name, bytes, frames };
    vec![
        shape("200B", stream(tools_call_request, total)),
        shape("64KiB", stream(|_| tools_list_result(64 << 10), total)),
        shape("8MiB", stream(|_| large_text_result(8 << 20), total)),
    ]
}

/// Counts a frame; any other event is a bug in the bench input.
fn count(event: Event<&[u8]>, frames: &mut u64) {
    match event {
        Event::Frame(frame) => {
            black_box(frame);
            *frames += 1;
        }
        other => panic!("unexpected event {other:?}"),
    }
}

fn copy_count(scratch: &mut [u8], stream: &[u8]) -> u64 {
    let mut frames = 0;
    for chunk in stream.chunks(CHUNK) {
        let read = &mut scratch[..chunk.len()];
        read.copy_from_slice(chunk);
        frames += memchr::memchr_iter(b'\n', black_box(&*read)).count() as u64;
    }
    frames
}

fn read_into(framer: &mut Framer, stream: &[u8]) -> u64 {
    let mut frames = 0;
    for chunk in stream.chunks(CHUNK) {
        let mut chunk = chunk;
        // A fresh framer lends less than a chunk for its first reads.
        while !chunk.is_empty() {
            // The stand-in for read(2): the kernel would copy the pipe's
            // bytes straight into the framer's spare space.
            let spare = framer.spare();
            let n = spare.len().min(chunk.len());
            spare[..n].copy_from_slice(&chunk[..n]);
            framer.commit(n);
            chunk = &chunk[n..];
            while let Some(event) = framer.next_event().expect("no frame is oversize") {
                count(event, &mut frames);
            }
        }
    }
    assert_eq!(framer.buffered(), 0, "the stream ends with a newline");
    frames
}

fn push(framer: &mut Framer, stream: &[u8]) -> u64 {
    let mut frames = 0;
    for chunk in stream.chunks(CHUNK) {
        let mut push = framer.push(chunk);
        while let Some(event) = push.next_event().expect("no frame is oversize") {
            count(event, &mut frames);
        }
    }
    assert_eq!(framer.buffered(), 0, "the stream ends with a newline");
    frames
}

/// The plain read-into line framer: what a user writes instead of vendoring
/// a framer. Bytes `start..end` are buffered; `searched` is where the next
/// `memchr` starts (the bytes before it hold no `\n`).
struct LineBuffer {
    buf: Vec<u8>,
    start: usize,
    searched: usize,
    end: usize,
    max_line: usize,
}

impl LineBuffer {
    fn new(max_line: usize) -> LineBuffer {
        LineBuffer { buf: vec![0; CHUNK], start: 0, searched: 0, end: 0, max_line }
    }

    /// Room for a read of `want` bytes after the buffered ones: rolls the
    /// tail to the front when it does not fit, doubles when that is not
    /// enough.
    fn spare(&mut self, want: usize) -> &mut [u8] {
        if self.buf.len() - self.end < want {
            self.buf.copy_within(self.start..self.end, 0);
            (self.end, self.searched, self.start) = (self.end - self.start, self.searched - self.start, 0);
            if self.buf.len() - self.end < want {
                let len = (self.buf.len() * 2).max(self.end + want);
                self.buf.resize(len, 0);
            }
        }
        &mut self.buf[self.end..self.end + want]
    }

    fn commit(&mut self, n: usize) {
        self.end += n;
    }

    /// The next whole line, without its `\n`.
    fn next_line(&mut self) -> Option<&[u8]> {
        match memchr::memchr(b'\n', &self.buf[self.searched..self.end]) {
            Some(at) => {
                let line = self.start..self.searched + at;
                (self.start, self.searched) = (line.end + 1, line.end + 1);
                Some(&self.buf[line])
            }
            None => {
                self.searched = self.end;
                assert!(self.end - self.start <= self.max_line, "a line over the limit");
                None
            }
        }
    }
}

fn line_buffer(lines: &mut LineBuffer, stream: &[u8]) -> u64 {
    let mut frames = 0;
    for chunk in stream.chunks(CHUNK) {
        lines.spare(chunk.len()).copy_from_slice(chunk);
        lines.commit(chunk.len());
        while let Some(line) = lines.next_line() {
            black_box(line);
            frames += 1;
        }
    }
    assert_eq!(lines.start, lines.end, "the stream ends with a newline");
    frames
}

/// A reader that yields at most 64 KiB per `read`, like a pipe.
struct Chunked<'a>(&'a [u8]);

impl Read for Chunked<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len().min(CHUNK).min(self.0.len());
        buf[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        Ok(n)
    }
}

fn read_until(line: &mut Vec<u8>, stream: &[u8]) -> u64 {
    let mut reader = BufReader::with_capacity(CHUNK, Chunked(stream));
    let mut frames = 0;
    loop {
        line.clear();
        if reader.read_until(b'\n', line).expect("reading a slice cannot fail") == 0 {
            return frames;
        }
        black_box(&line);
        frames += 1;
    }
}

fn lines_codec(codec: &mut LinesCodec, buf: &mut BytesMut, stream: &[u8]) -> u64 {
    let mut frames = 0;
    for chunk in stream.chunks(CHUNK) {
        buf.extend_from_slice(chunk);
        while let Some(line) = codec.decode(buf).expect("no line is oversize or invalid UTF-8") {
            black_box(line);
            frames += 1;
        }
    }
    assert!(buf.is_empty(), "the stream ends with a newline");
    frames
}

/// Append to a `String`, search from the start, drain. The UTF-8 bytes of a
/// character split across two chunks wait in `carry` (at most 3 bytes).
fn naive(text: &mut String, carry: &mut Vec<u8>, stream: &[u8]) -> u64 {
    let mut frames = 0;
    for chunk in stream.chunks(CHUNK) {
        let mut rest = chunk;
        if let Some(&lead) = carry.first() {
            let take = (utf8_width(lead) - carry.len()).min(rest.len());
            carry.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
            if carry.len() == utf8_width(lead) {
                text.push_str(std::str::from_utf8(carry).expect("valid UTF-8"));
                carry.clear();
            }
        }
        let whole = whole_chars(rest);
        text.push_str(std::str::from_utf8(&rest[..whole]).expect("valid UTF-8"));
        carry.extend_from_slice(&rest[whole..]);
        while let Some(i) = text.find('\n') {
            black_box(&text[..i]);
            text.drain(..=i);
            frames += 1;
        }
    }
    assert!(text.is_empty() && carry.is_empty(), "the stream ends with a newline");
    frames
}

/// The number of UTF-8 bytes of `lead`'s character.
fn utf8_width(lead: u8) -> usize {
    match lead {
        0x00..=0x7F => 1,
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        _ => 4,
    }
}

/// The length of `bytes` without a character cut off at its end.
fn whole_chars(bytes: &[u8]) -> usize {
    let tail = bytes.len().saturating_sub(3)..bytes.len();
    match tail.rev().find(|&i| bytes[i] & 0xC0 != 0x80) {
        Some(lead) if lead + utf8_width(bytes[lead]) > bytes.len() => lead,
        _ => bytes.len(),
    }
}

fn framing<M: Measurement>(c: &mut Criterion<M>) {
    for shape in shapes() {
        let (bytes, frames) = (&shape.bytes[..], shape.frames);
        let mut group = c.benchmark_group(format!("framing_{}", shape.name));
        group.throughput(Throughput::Bytes(bytes.len() as u64));

        group.bench_function("memchr_count", |b| {
            b.iter(|| assert_eq!(memchr::memchr_iter(b'\n', black_box(bytes)).count() as u64, frames))
        });
        let mut scratch = vec![0; CHUNK];
        group.bench_function("copy_count", |b| b.iter(|| assert_eq!(copy_count(&mut scratch, bytes), frames)));
        let mut framer = Framer::new(Config::default());
        group.bench_function("read_into", |b| b.iter(|| assert_eq!(read_into(&mut framer, bytes), frames)));
        let mut framer = Framer::new(Config::default());
        group.bench_function("push", |b| b.iter(|| assert_eq!(push(&mut framer, bytes), frames)));
        let mut lines = LineBuffer::new(DEFAULT_MAX_FRAME);
        group.bench_function("line_buffer", |b| b.iter(|| assert_eq!(line_buffer(&mut lines, bytes), frames)));
        let mut line = Vec::new();
        group.bench_function("read_until", |b| b.iter(|| assert_eq!(read_until(&mut line, bytes), frames)));
        let (mut codec, mut buf) = (LinesCodec::new_with_max_length(DEFAULT_MAX_FRAME), BytesMut::new());
        group
            .bench_function("lines_codec", |b| b.iter(|| assert_eq!(lines_codec(&mut codec, &mut buf, bytes), frames)));

        group.sample_size(10).sampling_mode(SamplingMode::Flat);
        let (mut text, mut carry) = (String::new(), Vec::new());
        group.bench_function("naive", |b| b.iter(|| assert_eq!(naive(&mut text, &mut carry, bytes), frames)));
        group.finish();
    }
}

/// The floor of any reader that keeps each frame contiguous: every chunk
/// copied (the stand-in for `read(2)`) to the end of the current frame in one
/// preallocated buffer of the frame's size and searched with `memchr`; the
/// bytes after a `\n` go to the front. No limit, no growth, no policy.
fn contiguous_copy(buf: &mut [u8], stream: &[u8]) -> u64 {
    let (mut frames, mut end) = (0, 0);
    for chunk in stream.chunks(CHUNK) {
        buf[end..end + chunk.len()].copy_from_slice(chunk);
        let mut from = end;
        end += chunk.len();
        while let Some(at) = memchr::memchr(b'\n', &buf[from..end]) {
            black_box(&buf[..from + at]);
            frames += 1;
            buf.copy_within(from + at + 1..end, 0);
            end -= from + at + 1;
            from = 0;
        }
    }
    assert_eq!(end, 0, "the stream ends with a newline");
    frames
}

/// The limit and retention of `framing_large`'s framers.
const LARGE_LIMIT: usize = 64 << 20;

fn framing_large<M: Measurement>(c: &mut Criterion<M>) {
    let mut group = c.benchmark_group("framing_large");
    group.sample_size(10).sampling_mode(SamplingMode::Flat);
    let config = Config::DEFAULT.with_max_frame(LARGE_LIMIT).with_retain(LARGE_LIMIT);
    for size in [8usize << 20, 32 << 20] {
        let (bytes, frames) = stream(|_| large_text_result(size), 32 << 20);
        let name = size >> 20;
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        let mut framer = Framer::new(config);
        group.bench_function(format!("kept_{name}MiB"), |b| {
            b.iter(|| assert_eq!(read_into(&mut framer, &bytes), frames))
        });
        group.bench_function(format!("fresh_{name}MiB"), |b| {
            b.iter(|| assert_eq!(read_into(&mut Framer::new(config), &bytes), frames))
        });
        let mut frame = vec![0; size + CHUNK];
        group.bench_function(format!("floor_{name}MiB"), |b| {
            b.iter(|| assert_eq!(contiguous_copy(&mut frame, &bytes), frames))
        });
        let mut lines = LineBuffer::new(LARGE_LIMIT);
        group.bench_function(format!("line_buffer_{name}MiB"), |b| {
            b.iter(|| assert_eq!(line_buffer(&mut lines, &bytes), frames))
        });
    }
    group.finish();
}

fn run<M: Measurement>(c: Criterion<M>) {
    let mut c = cpu_time::configured(c);
    framing(&mut c);
    framing_large(&mut c);
    c.final_summary();
}

bench_main!(run);
