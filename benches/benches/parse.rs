//! `parse`: classifying one JSON-RPC frame, by strategy, for the three
//! shapes of `mcp_framer_benches::shapes` (200 B `tools/call` request,
//! 64 KiB `tools/list` result, 8 MiB text tool result).
//!
//! Criterion groups are `parse_<shape>`, one function per strategy:
//!
//! * `copy_only`: the harness alone (see below).
//! * `utf8_only`: `std::str::from_utf8` over the frame: what checking UTF-8
//!   alone costs with std, shown on its own. Every strategy checks it; the
//!   parser does so up front with `simdutf8` (vectorised, cheaper on
//!   non-ASCII text), serde_json and simd-json while they parse.
//! * `value`: `serde_json::from_slice::<serde_json::Value>`: the whole
//!   message built as a tree, classified, and dropped (freeing the tree is
//!   part of materialising it).
//! * `envelope`: [`mcp_framer_jsonrpc::parse`]: the routing fields
//!   borrowed, the payload kept as a `RawJson` slice (its own scanner).
//! * `simd_in_place`: [`mcp_framer_jsonrpc::check::parse_in_place`] (the unstable
//!   `check` feature, where simd-json lives as the differential oracle): simd-json on
//!   the `&mut` frame.
//!
//! simd-json rewrites the frame, so each iteration needs a fresh copy of it.
//! To keep the comparison fair, **every** strategy runs in the same harness:
//! each iteration first copies the frame into a reused buffer (hot in cache,
//! as a frame the framer has just read), inside the timed region. The copy's
//! cost is `copy_only`; in a real transport there is no copy (the framer
//! hands out frames in its own buffer; simd-json still needs its own copy).
//!
//! Then groups `parse_stream_<shape>`: the full path, a newline-delimited
//! stream of such frames (about 8 MiB; 4 frames of 8 MiB for the large
//! shape) pushed through [`Framer::push`] in 64 KiB chunks (one pipe read),
//! each frame classified:
//!
//! * `framer_envelope`: `Framer::push` + `mcp_framer_jsonrpc::parse`, on the stream as
//!   is (read-only, no copy);
//! * `framer_simd`: `Framer::push` + `parse_in_place` on a copy of each
//!   frame in a reused buffer (simd-json rewrites what it parses; the framer
//!   hands out read-only frames), the stream copied fresh per iteration
//!   (`iter_batched_ref`, copy untimed).
//!
//! Every strategy asserts its result inside the timed loop: the message
//! kind for single frames, the frame count and every frame's kind for
//! streams. Throughput is bytes (the frame, or the whole stream).
//! `MCP_BENCH_QUICK=1` shortens warm-up and measurement and halves the large
//! stream.
//!
//! Criterion measures wall-clock time; with `MCP_BENCH_CLOCK=cpu` it measures
//! the thread's CPU time instead (see `support/cpu_time.rs`), as
//! `scripts/bench-report` always runs this suite (`cpu_time` in
//! `benches/report.toml`).
//!
//! Run: `cargo bench -p mcp-framer-benches --bench parse`.

use std::hint::black_box;

use criterion::measurement::Measurement;
use criterion::{BatchSize, Bencher, Criterion, SamplingMode, Throughput};
use mcp_framer::{Config, Event, Framer};
use mcp_framer_benches::shapes::{large_text_result, quick, stream, tools_call_request, tools_list_result};
use mcp_framer_jsonrpc::check::parse_in_place;
use mcp_framer_jsonrpc::{Kind, parse};
use serde_json::Value;

#[path = "support/cpu_time.rs"]
mod cpu_time;

/// One read from a Linux pipe at its default size.
const CHUNK: usize = 64 * 1024;

/// One message shape: a frame, its kind, and a stream of such frames.
struct Shape {
    name: &'static str,
    frame: Vec<u8>,
    kind: Kind,
    stream: Vec<u8>,
    frames: u64,
}

fn shapes() -> Vec<Shape> {
    let small_stream = 8 << 20;
    let large_stream = if quick() { 16 << 20 } else { 32 << 20 };
    let shape = |name, build: &dyn Fn(u64) -> Vec<u8>, kind, total| {
        let (stream, frames) = stream(build, total);
        Shape { name, frame: build(0), kind, stream, frames }
    };
    vec![
        shape("200B", &tools_call_request, Kind::Request, small_stream),
        shape("64KiB", &|_| tools_list_result(64 << 10), Kind::Response, small_stream),
        shape("8MiB", &|_| large_text_result(8 << 20), Kind::Response, large_stream),
    ]
}

/// The kind of a message built as a `serde_json::Value`, by the same rules
/// as the parser (so `value` does the same job).
fn value_kind(value: &Value) -> Kind {
    let object = value.as_object().expect("an object");
    assert_eq!(object.get("jsonrpc").and_then(Value::as_str), Some("2.0"));
    let id = object.get("id").is_some_and(|id| id.is_string() || id.is_i64());
    match (object.contains_key("method"), object.contains_key("result"), object.contains_key("error")) {
        (true, false, false) if id => Kind::Request,
        (true, false, false) if !object.contains_key("id") => Kind::Notification,
        (false, true, false) if id => Kind::Response,
        (false, false, true) => Kind::ErrorResponse,
        _ => panic!("not a JSON-RPC message"),
    }
}

/// Runs `strategy` on a fresh copy of `frame` per iteration: the copy goes
/// into a reused buffer, inside the timed region (`copy_only` measures it).
fn on_fresh_copy<M: Measurement>(b: &mut Bencher<'_, M>, frame: &[u8], mut strategy: impl FnMut(&mut [u8])) {
    let mut buffer = frame.to_vec();
    b.iter(|| {
        buffer.copy_from_slice(frame);
        strategy(black_box(&mut buffer));
    })
}

fn single_frame<M: Measurement>(c: &mut Criterion<M>, shape: &Shape) {
    let mut group = c.benchmark_group(format!("parse_{}", shape.name));
    group.throughput(Throughput::Bytes(shape.frame.len() as u64));
    if shape.frame.len() > 1 << 20 {
        group.sample_size(10).sampling_mode(SamplingMode::Flat);
    }
    let (frame, kind) = (&shape.frame[..], shape.kind);

    group.bench_function("copy_only", |b| on_fresh_copy(b, frame, |_| {}));
    group.bench_function("utf8_only", |b| on_fresh_copy(b, frame, |f| assert!(std::str::from_utf8(f).is_ok())));
    group.bench_function("value", |b| {
        on_fresh_copy(b, frame, |f| {
            let value: Value = serde_json::from_slice(f).expect("valid JSON");
            assert_eq!(value_kind(&value), kind);
            // Dropped here, inside the timed region: freeing the tree is
            // part of materialising it.
        })
    });
    group.bench_function("envelope", |b| {
        on_fresh_copy(b, frame, |f| assert_eq!(parse(f).expect("a message").kind(), kind))
    });
    group.bench_function("simd_in_place", |b| {
        on_fresh_copy(b, frame, |f| assert_eq!(parse_in_place(f).expect("a message").kind(), kind))
    });
    group.finish();
}

fn framer_envelope(framer: &mut Framer, stream: &[u8], kind: Kind) -> u64 {
    let mut frames = 0;
    for chunk in stream.chunks(CHUNK) {
        let mut push = framer.push(chunk);
        while let Some(event) = push.next_event().expect("no frame is oversize") {
            let Event::Frame(frame) = event else { panic!("unexpected event {event:?}") };
            assert_eq!(parse(frame).expect("a message").kind(), kind);
            frames += 1;
        }
    }
    frames
}

fn framer_simd(framer: &mut Framer, stream: &mut [u8], kind: Kind) -> u64 {
    let mut frames = 0;
    let mut copy = Vec::new();
    for chunk in stream.chunks(CHUNK) {
        let mut push = framer.push(chunk);
        while let Some(event) = push.next_event().expect("no frame is oversize") {
            let Event::Frame(frame) = event else { panic!("unexpected event {event:?}") };
            copy.clear();
            copy.extend_from_slice(frame);
            assert_eq!(parse_in_place(&mut copy).expect("a message").kind(), kind);
            frames += 1;
        }
    }
    frames
}

fn full_path<M: Measurement>(c: &mut Criterion<M>, shape: &Shape) {
    let mut group = c.benchmark_group(format!("parse_stream_{}", shape.name));
    group.throughput(Throughput::Bytes(shape.stream.len() as u64));
    group.sample_size(10).sampling_mode(SamplingMode::Flat);
    let (stream, frames, kind) = (&shape.stream[..], shape.frames, shape.kind);

    let mut framer = Framer::new(Config::default());
    group.bench_function("framer_envelope", |b| {
        b.iter(|| assert_eq!(framer_envelope(&mut framer, black_box(stream), kind), frames))
    });
    let mut framer = Framer::new(Config::default());
    group.bench_function("framer_simd", |b| {
        b.iter_batched_ref(
            || stream.to_vec(),
            |copy| assert_eq!(framer_simd(&mut framer, black_box(copy), kind), frames),
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

fn run<M: Measurement>(c: Criterion<M>) {
    let mut c = cpu_time::configured(c);
    for shape in shapes() {
        single_frame(&mut c, &shape);
        full_path(&mut c, &shape);
    }
    c.final_summary();
}

bench_main!(run);
