//! Instruction-count benchmarks (gungraun + callgrind): the regression gate.
//!
//! Wall-clock time cannot gate on shared 2-core machines; the number of
//! instructions a run executes under callgrind does not move between runs, so
//! `scripts/bench-check` compares each bench's count (`Ir`) with the committed
//! baseline in `benches/baseline/instructions.json` and fails on a rise of
//! more than 2%. `scripts/bench-baseline` rewrites that baseline on purpose.
//!
//! Callgrind runs code about 50× slower than native, so the streams are small
//! (1-8 MiB) next to the criterion benches. Building them happens in the
//! `#[bench]` setup expressions, which callgrind does not count. Every bench
//! asserts what it framed or parsed: a wrong result panics and fails the run.
//!
//! Run: `cargo bench -p mcp-framer-benches --bench instructions` (needs
//! valgrind and `gungraun-runner` 0.20.0: `scripts/install-tools --only bench`).

use std::hint::black_box;

use gungraun::{library_benchmark, library_benchmark_group, main};
use mcp_framer::{Config, Event, Framer, OversizePolicy};
use mcp_framer_benches::shapes::{large_text_result, stream, tools_call_request, tools_list_result};
use mcp_framer_jsonrpc::{Id, Kind};

/// Bytes per simulated `read()` or pushed chunk: one Linux pipe's capacity.
const READ: usize = 64 * 1024;
const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;

/// What a framing run found; each bench compares it with what its stream holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Tally {
    frames: u64,
    frame_bytes: u64,
    oversize_skipped: u64,
    truncated: u64,
    /// Bytes the framer's [`Stats`](mcp_framer::Stats) account for: every byte of the stream.
    accounted: u64,
}

impl Tally {
    fn add(&mut self, event: Event<&[u8]>) {
        match event {
            Event::Frame(frame) => {
                self.frames += 1;
                self.frame_bytes += frame.len() as u64;
            }
            Event::OversizeStarted { .. } => {}
            Event::OversizeSkipped { .. } => self.oversize_skipped += 1,
            Event::Truncated { .. } => self.truncated += 1,
        }
    }
}

/// A byte stream, the framer configuration to read it with, and what framing
/// it must give.
#[derive(Debug)]
struct Stream {
    bytes: Vec<u8>,
    config: Config,
    expect: Tally,
}

impl Stream {
    fn new(config: Config) -> Stream {
        Stream { bytes: Vec::new(), config, expect: Tally::default() }
    }

    /// Appends `frame` and its `\n`; `frame` must not contain `\n`.
    fn frame(&mut self, frame: &[u8]) {
        self.bytes.extend_from_slice(frame);
        self.bytes.push(b'\n');
        self.expect.accounted = self.bytes.len() as u64;
        if frame.len() > self.config.max_frame {
            self.expect.oversize_skipped += 1;
        } else {
            self.expect.frames += 1;
            self.expect.frame_bytes += frame.len() as u64;
        }
    }

    /// `shape(i)` for message `i`, repeated to at least `total` bytes (at
    /// least one message), under the default configuration.
    fn repeated(shape: impl FnMut(u64) -> Vec<u8>, total: usize) -> Stream {
        let (bytes, frames) = stream(shape, total);
        let accounted = bytes.len() as u64;
        let expect = Tally { frames, frame_bytes: accounted - frames, accounted, ..Tally::default() };
        Stream { bytes, config: Config::default(), expect }
    }
}

/// 200 B `tools/call` requests, 2 MiB of them.
fn call_200b() -> Stream {
    Stream::repeated(tools_call_request, 2 * MIB)
}

/// 64 KiB `tools/list` results, 1 MiB of them.
fn list_64k() -> Stream {
    let message = tools_list_result(64 * KIB);
    Stream::repeated(|_| message.clone(), MIB)
}

/// One 8 MiB text result.
fn text_8m() -> Stream {
    Stream::repeated(|_| large_text_result(8 * MIB), 0)
}

/// Under a 64 KiB limit with [`OversizePolicy::Skip`]: four rounds of fifty
/// 200 B requests then one 512 KiB result to discard.
fn oversize_skip() -> Stream {
    let config = Config::DEFAULT.with_max_frame(64 * KIB).with_oversize(OversizePolicy::Skip);
    let mut out = Stream::new(config);
    let oversize = large_text_result(512 * KIB);
    for round in 0..4 {
        for i in 0..50 {
            out.frame(&tools_call_request(round * 50 + i));
        }
        out.frame(&oversize);
    }
    assert_eq!(out.expect.oversize_skipped, 4, "the 512 KiB result must be over the limit");
    out
}

/// Read-into mode: each `read()` copies up to [`READ`] bytes into the framer's
/// spare space, then the events are drained. The copy stands in for the
/// kernel's copy in `read(2)`, so it is counted here where it would not be.
fn frame_read_into(stream: &Stream) -> Tally {
    let mut framer = Framer::new(stream.config);
    let mut tally = Tally::default();
    let mut input = &stream.bytes[..];
    loop {
        let spare = framer.spare();
        let n = spare.len().min(READ).min(input.len());
        spare[..n].copy_from_slice(&input[..n]);
        input = &input[n..];
        if n == 0 {
            framer.finish();
        } else {
            framer.commit(n);
        }
        while let Some(event) = framer.next_event().expect("Skip never fails") {
            tally.add(event);
        }
        if n == 0 {
            tally.accounted = framer.stats().accounted_bytes();
            return tally;
        }
    }
}

/// Push mode: the stream is pushed in [`READ`]-byte chunks the caller owns.
fn frame_push(stream: &Stream) -> Tally {
    let mut framer = Framer::new(stream.config);
    let mut tally = Tally::default();
    for chunk in stream.bytes.chunks(READ) {
        let mut push = framer.push(chunk);
        while let Some(event) = push.next_event().expect("Skip never fails") {
            tally.add(event);
        }
    }
    framer.finish();
    while let Some(event) = framer.next_event().expect("Skip never fails") {
        tally.add(event);
    }
    tally.accounted = framer.stats().accounted_bytes();
    tally
}

/// Frames `stream` with `mode` and panics unless it framed what the stream holds.
fn checked(stream: &Stream, mode: fn(&Stream) -> Tally) -> Tally {
    let tally = black_box(mode(black_box(stream)));
    assert_eq!(tally, stream.expect, "framed {} bytes", stream.bytes.len());
    tally
}

// Read-into mode on each stream.
#[library_benchmark]
#[bench::call_200b(call_200b())]
#[bench::list_64k(list_64k())]
#[bench::text_8m(text_8m())]
#[bench::oversize_skip(oversize_skip())]
fn read_into(stream: Stream) -> Tally {
    checked(&stream, frame_read_into)
}

// Push mode on each stream.
#[library_benchmark]
#[bench::call_200b(call_200b())]
#[bench::list_64k(list_64k())]
#[bench::text_8m(text_8m())]
#[bench::oversize_skip(oversize_skip())]
fn push(stream: Stream) -> Tally {
    checked(&stream, frame_push)
}

/// Frames to classify, and the kind, id and method each must parse to.
#[derive(Debug)]
struct Messages {
    frames: Vec<Vec<u8>>,
    ids: Vec<i64>,
    kind: Kind,
    method: Option<&'static str>,
}

impl Messages {
    fn check(&self, i: usize, kind: Kind, id: Option<&Id<'_>>, method: Option<&str>) {
        // A notification has no id: `ids` is empty.
        let expected = self.ids.get(i).map(|&n| Id::Number(n));
        assert_eq!((kind, id, method), (self.kind, expected.as_ref(), self.method), "message {i}");
    }
}

/// 1000 `tools/call` requests of about 200 B, ids 0 to 999.
fn requests_200b() -> Messages {
    let ids: Vec<i64> = (0..1000).collect();
    let frames = ids.iter().map(|&id| tools_call_request(id as u64)).collect();
    Messages { frames, ids, kind: Kind::Request, method: Some("tools/call") }
}

/// 16 `tools/list` results of 64 KiB (id 2).
fn results_64k() -> Messages {
    let frames = vec![tools_list_result(64 * KIB); 16];
    Messages { frames, ids: vec![2; 16], kind: Kind::Response, method: None }
}

/// One text tool result of 1 MiB (id 7): a long string with an escape every
/// few bytes (`\n`, `\t`, `\"`, `\\`) and non-ASCII text, the 8 MiB shape
/// scaled down.
fn text_1m() -> Messages {
    Messages { frames: vec![large_text_result(MIB)], ids: vec![7], kind: Kind::Response, method: None }
}

/// One `notifications/message` of 1 MiB whose `data` is one flat string of
/// plain words (the pipe bench's `text` payload): the scanner's long-run
/// path, with nothing to escape.
fn flat_1m() -> Messages {
    let frames = vec![mcp_framer_benches::pipe::notification_with(mcp_framer_benches::pipe::Payload::Text, MIB)];
    Messages { frames, ids: vec![], kind: Kind::Notification, method: Some("notifications/message") }
}

// The parser (its own scanner): routing fields borrowed, payload left a
// `RawJson` slice of the frame.
#[library_benchmark]
#[bench::call_200b(requests_200b())]
#[bench::list_64k(results_64k())]
#[bench::text_1m(text_1m())]
#[bench::flat_1m(flat_1m())]
fn parse(messages: Messages) -> usize {
    for (i, frame) in messages.frames.iter().enumerate() {
        let message = mcp_framer_jsonrpc::parse(black_box(frame)).expect("a valid message");
        messages.check(i, message.kind(), message.id(), message.method());
    }
    messages.frames.len()
}

// The simd-json parser (`check::parse_in_place`, the unstable oracle), in
// place on a `&mut` copy of each frame (the copy is counted; it is small next
// to the parse).
#[library_benchmark]
#[bench::call_200b(requests_200b())]
#[bench::list_64k(results_64k())]
fn parse_in_place(messages: Messages) -> usize {
    let mut scratch = Vec::new();
    for (i, frame) in messages.frames.iter().enumerate() {
        scratch.clear();
        scratch.extend_from_slice(frame);
        let message = mcp_framer_jsonrpc::check::parse_in_place(black_box(&mut scratch)).expect("a valid message");
        messages.check(i, message.kind(), message.id(), message.method());
    }
    messages.frames.len()
}

/// The host reader's hot path: a stream of notifications and how many
/// messages it holds.
struct HostStream {
    bytes: Vec<u8>,
    frames: u64,
}

/// Copies of a `notifications/message` of `bytes` bytes
/// (`mcp_framer_benches::pipe::notification`, what the pipe bench's child
/// writes), `total` bytes of them.
fn notifications(bytes: usize, total: usize) -> HostStream {
    let (bytes, frames) = stream(|_| mcp_framer_benches::pipe::notification(bytes), total);
    HostStream { bytes, frames }
}

// `mcp_framer_stdio::host::Reader` over an in-memory stream, in 64 KiB reads:
// framing, parsing, the copy out of the framer, the byte
// accounting and the hand-off to the inbound queue, then the consumer taking
// every message (the queue holds the whole stream: no yield, no overload).
// Polled by `futures::executor::block_on` on the bench's thread: the default
// reader needs no runtime (no timer, no I/O driver), and callgrind counted
// nothing under a tokio runtime's `block_on`.
#[library_benchmark]
#[bench::note_200b(notifications(200, MIB))]
#[bench::note_64k(notifications(64 * KIB, 2 * MIB))]
fn host_reader(host: HostStream) -> u64 {
    use mcp_framer_stdio::host::{Inbound, Reader, ReaderEnd, SessionConfig};
    let HostStream { bytes, frames } = host;
    let received = futures::executor::block_on(async {
        let (inbound, mut queue) = mcp_framer_stdio::host::inbound_channel();
        let reader = Reader::new(&SessionConfig::default(), inbound);
        let metrics = reader.metrics();
        let report = reader.run(black_box(&bytes[..])).await;
        assert!(matches!(report.end, ReaderEnd::Eof), "{:?}", report.end);
        let mut received = 0;
        while let Some(item) = queue.recv().await {
            assert!(matches!(item, Inbound::Notification(_)), "{item:?}");
            received += 1;
        }
        assert_eq!(metrics.snapshot().delivered, received);
        received
    });
    assert_eq!(received, frames);
    received
}

library_benchmark_group!(name = framer, benchmarks = [read_into, push]);
library_benchmark_group!(name = jsonrpc, benchmarks = [parse, parse_in_place]);
library_benchmark_group!(name = host, benchmarks = [host_reader]);
main!(library_benchmark_groups = [framer, jsonrpc, host]);
