//! Runs conformance vectors against a Rust reader, under the runner contract
//! of `corpus/vectors/README.md`: cases come on stdin, one JSON object a line
//! (`{"case": NAME, "vector": PATH, "limit": "vector" | "default"}`), and
//! what the reader did comes out on stdout as JSON lines, a `hello` first,
//! then each case's events ending with its `end`.
//!
//! ```text
//! vectors_runner core   # mcp-framer's push API under the vector's config: the reference
//! vectors_runner rmcp   # rmcp's AsyncRwTransport, what rmcp's stdio() and TokioChildProcess read with
//! vectors_runner id     # mcp_framer_jsonrpc::recover_response_id on corpus/vectors-id
//! ```
//!
//! `core` reports exactly the vector's events, error and counters. `rmcp`
//! reports what rmcp itself reports: the messages `receive()` returns, and its
//! `tracing` events, which carry the text of every line it could not parse
//! (the line it handed to serde_json, after its own `\r` and BOM stripping),
//! the lines it ignored and the lines it dropped over its limit. A line that
//! is not UTF-8 is reported by rmcp without its text (`hex: null`).
//!
//! Every case has a deadline of 120 s (`end` state `timeout`).

use std::collections::VecDeque;
use std::io::{BufRead, Write};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use mcp_framer::{Bom, Config, EmptyLines, Event, FrameError, Framer, OversizePolicy, Stats};
use rmcp::RoleServer;
use rmcp::transport::Transport;
use rmcp::transport::async_rw::{AsyncRwTransport, DEFAULT_MAX_LINE_LENGTH};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, ReadBuf};

const CASE_DEADLINE: Duration = Duration::from_secs(120);

fn main() {
    let reader = std::env::args().nth(1).unwrap_or_default();
    let mut out = std::io::stdout().lock();
    let hello = match reader.as_str() {
        "core" => json!({"type": "hello", "reader": "mcp-framer", "exact": true,
            "limit": {"default": mcp_framer::DEFAULT_MAX_FRAME, "configurable": true,
                      "counts": "the bytes of one line without its \\n and without a stripped trailing \\r"}}),
        "rmcp" => json!({"type": "hello", "reader": "rmcp AsyncRwTransport",
            "limit": {"default": DEFAULT_MAX_LINE_LENGTH, "configurable": true,
                      "counts": "the bytes of one line with its \\r and its \\n"}}),
        "id" => json!({"type": "hello", "reader": "mcp-framer-jsonrpc recover_response_id", "exact": true}),
        _ => {
            eprintln!("usage: vectors_runner core|rmcp|id < cases (JSON lines)");
            std::process::exit(2);
        }
    };
    if reader == "rmcp" {
        tracing::subscriber::set_global_default(tracing_subscriber::layer::SubscriberExt::with(
            tracing_subscriber::registry(),
            LogLayer,
        ))
        .expect("the only subscriber");
    }
    emit(&mut out, &hello);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().expect("runtime");
    for line in std::io::stdin().lock().lines() {
        let line = line.expect("stdin");
        if line.trim().is_empty() {
            continue;
        }
        let case: Value = serde_json::from_str(&line).expect("a case is one JSON object");
        let name = case["case"].as_str().expect("case.case").to_string();
        let path = case["vector"].as_str().expect("case.vector");
        let vector: Value =
            serde_json::from_slice(&std::fs::read(path).expect("read the vector")).expect("vector JSON");
        let events = match reader.as_str() {
            "core" => run_core(&vector),
            "rmcp" => {
                let limit =
                    (case["limit"] == "vector").then(|| vector["config"]["max_frame"].as_u64().unwrap() as usize);
                runtime.block_on(run_rmcp(&vector, limit))
            }
            _ => run_id(&vector),
        };
        for mut event in events {
            event["case"] = json!(name);
            emit(&mut out, &event);
        }
    }
}

fn emit(out: &mut impl Write, value: &Value) {
    serde_json::to_writer(&mut *out, value).expect("stdout");
    out.write_all(b"\n").expect("stdout");
    out.flush().expect("stdout");
}

const DIGITS: &[u8; 16] = b"0123456789abcdef";

fn hex(bytes: &[u8]) -> String {
    let mut text = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        text.push(DIGITS[usize::from(b >> 4)] as char);
        text.push(DIGITS[usize::from(b & 15)] as char);
    }
    text
}

fn unhex(text: &str) -> Vec<u8> {
    let digit = |c: u8| match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        _ => panic!("not lower-case hex: {c:?}"),
    };
    text.as_bytes().chunks_exact(2).map(|pair| digit(pair[0]) << 4 | digit(pair[1])).collect()
}

/// The vector's bytes and its reads.
fn input_and_chunks(vector: &Value) -> (Vec<u8>, Vec<usize>) {
    let input = unhex(vector["input_hex"].as_str().expect("input_hex"));
    let chunks = vector["chunks"].as_array().expect("chunks").iter().map(|c| c.as_u64().unwrap() as usize).collect();
    (input, chunks)
}

fn config(vector: &Value) -> Config {
    let c = &vector["config"];
    Config::DEFAULT
        .with_max_frame(c["max_frame"].as_u64().expect("max_frame") as usize)
        .with_oversize(if c["oversize"] == "fail" { OversizePolicy::Fail } else { OversizePolicy::Skip })
        .with_strip_cr(c["strip_cr"].as_bool().expect("strip_cr"))
        .with_empty_lines(if c["empty_lines"] == "deliver" { EmptyLines::Deliver } else { EmptyLines::Skip })
        .with_bom(if c["bom"] == "keep" { Bom::Keep } else { Bom::Strip })
}

/// The reference: the push API, draining after each read and after the end
/// of stream, exactly as the vectors' README says to run them.
fn run_core(vector: &Value) -> Vec<Value> {
    let (input, chunks) = input_and_chunks(vector);
    let mut framer = Framer::new(config(vector));
    let mut events = Vec::new();
    let mut error = None;
    let started = Instant::now();
    let mut last_frame = None;
    // One event call: records its event; false once the reads are drained
    // (or the framer stopped).
    let mut step = |next: Result<Option<Event<&[u8]>>, FrameError>| -> bool {
        let event = match next {
            Ok(Some(event)) => event,
            Ok(None) => return false,
            Err(err) => {
                error.get_or_insert(err);
                return false;
            }
        };
        events.push(match event {
            Event::Frame(frame) => {
                last_frame = Some(started.elapsed());
                json!({"type": "frame", "hex": hex(frame)})
            }
            Event::OversizeStarted { seen } => json!({"type": "oversize_started", "seen": seen}),
            Event::OversizeSkipped { len } => json!({"type": "oversize_skipped", "len": len}),
            Event::Truncated { len, oversize } => json!({"type": "truncated", "len": len, "oversize": oversize}),
        });
        true
    };
    let mut pos = 0;
    for &size in &chunks {
        let mut push = framer.push(&input[pos..pos + size]);
        pos += size;
        while step(push.next_event()) {}
    }
    framer.finish();
    while step(framer.next_event()) {}
    let error = match error {
        None => Value::Null,
        Some(FrameError::Oversize { seen, max_frame }) => {
            json!({"type": "oversize", "seen": seen, "max_frame": max_frame})
        }
        Some(other) => json!({"type": other.to_string()}),
    };
    let state = if error.is_null() { "eof" } else { "failed" };
    events.push(json!({"type": "end", "state": state, "error": error, "stats": stats_json(framer.stats()),
                       "seconds": last_frame.map(|t| t.as_secs_f64())}));
    events
}

fn stats_json(s: &Stats) -> Value {
    json!({"bytes_in": s.bytes_in, "frames": s.frames, "frame_bytes": s.frame_bytes, "largest_frame": s.largest_frame,
           "oversize_frames": s.oversize_frames, "discarded_bytes": s.discarded_bytes, "empty_lines": s.empty_lines,
           "delimiters": s.delimiters, "cr_stripped": s.cr_stripped, "bom_bytes": s.bom_bytes,
           "truncated_bytes": s.truncated_bytes})
}

fn run_id(vector: &Value) -> Vec<Value> {
    let head = vector["head"].as_str().expect("head").as_bytes();
    let tail = vector["tail"].as_str().expect("tail").as_bytes();
    let len = vector["len"].as_u64().expect("len");
    let id = mcp_framer_jsonrpc::recover_response_id(head, tail, len);
    vec![json!({"type": "end", "state": "eof", "id": serde_json::to_value(id).expect("an id is JSON")})]
}

/// The vector's reads, as an `AsyncRead`: each poll returns (at most) the
/// rest of the current read; a read of 0 bytes is a poll that finds nothing
/// yet (`Pending`, woken at once); after the last read, end of stream.
struct Reads {
    input: Vec<u8>,
    sizes: VecDeque<usize>,
    pos: usize,
    left: usize,
    consumed: Arc<Mutex<(usize, Option<Instant>)>>,
}

impl AsyncRead for Reads {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        while self.left == 0 {
            match self.sizes.pop_front() {
                None => return Poll::Ready(Ok(())),
                Some(0) => {
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                Some(size) => self.left = size,
            }
        }
        let n = self.left.min(buf.remaining());
        let pos = self.pos;
        buf.put_slice(&self.input[pos..pos + n]);
        self.pos += n;
        self.left -= n;
        let mut consumed = self.consumed.lock().unwrap();
        consumed.0 = self.pos;
        consumed.1.get_or_insert_with(Instant::now);
        Poll::Ready(Ok(()))
    }
}

/// One `tracing` event of rmcp's: level and formatted message.
static LOG: Mutex<Vec<(tracing::Level, String)>> = Mutex::new(Vec::new());

struct LogLayer;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for LogLayer {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: tracing_subscriber::layer::Context<'_, S>) {
        if !event.metadata().target().starts_with("rmcp") {
            return;
        }
        struct Message(String);
        impl tracing::field::Visit for Message {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" {
                    self.0 = format!("{value:?}");
                }
            }
        }
        let mut message = Message(String::new());
        event.record(&mut message);
        LOG.lock().unwrap().push((*event.metadata().level(), message.0));
    }
}

/// rmcp's reader: `AsyncRwTransport::<RoleServer, _, _>::receive` until it
/// returns `None`, its limit set to `limit` when given. Its log lines are
/// turned into the contract's events as they come (they are emitted inside
/// `receive`, in order).
async fn run_rmcp(vector: &Value, limit: Option<usize>) -> Vec<Value> {
    let (input, chunks) = input_and_chunks(vector);
    let total = input.len();
    let consumed = Arc::new(Mutex::new((0, None)));
    let reads = Reads { input, sizes: chunks.into(), pos: 0, left: 0, consumed: consumed.clone() };
    let mut transport = AsyncRwTransport::<RoleServer, _, _>::new(reads, tokio::io::sink());
    if let Some(limit) = limit {
        transport = transport.with_max_line_length(limit);
    }
    LOG.lock().unwrap().clear();
    let mut events: Vec<Value> = Vec::new();
    let mut open_frame = false;
    let mut last_frame = None;
    let state = tokio::time::timeout(CASE_DEADLINE, async {
        loop {
            let message = transport.receive().await;
            let frames_before = events.iter().filter(|e| e["type"] == "frame").count();
            for (level, text) in LOG.lock().unwrap().drain(..) {
                rmcp_log_event(level, &text, &mut events, &mut open_frame);
            }
            let done = message.is_none();
            if let Some(message) = message {
                events.push(json!({"type": "frame", "hex": null, "outcome": "message",
                                   "json": serde_json::to_value(&message).expect("a message is JSON")}));
            }
            if events.iter().filter(|e| e["type"] == "frame").count() > frames_before {
                last_frame = Some(Instant::now());
            }
            if done {
                break;
            }
        }
    })
    .await
    .map_or("timeout", |()| "eof");
    let (at, first_read) = *consumed.lock().unwrap();
    let state = if state == "eof" && at < total { "closed" } else { state };
    let seconds = first_read.zip(last_frame).map(|(first, last)| last.duration_since(first).as_secs_f64());
    events.push(json!({"type": "end", "state": state, "seconds": seconds}));
    events
}

/// Maps one of rmcp's log lines (async_rw.rs, rmcp 3.11) to contract events.
/// A line rmcp could not parse is logged with its text ("Failed to parse
/// message receive: LINE | Error: E") and then classified ("Ignoring
/// unparsable incoming message" for invalid JSON, dropped; "Protocol error on
/// incoming message" for JSON that is not a message, answered with Invalid
/// Request). A line that is not UTF-8 gets only the classification.
fn rmcp_log_event(level: tracing::Level, text: &str, events: &mut Vec<Value>, open_frame: &mut bool) {
    const FAILED: &str = "Failed to parse message receive: ";
    if let Some(rest) = text.strip_prefix(FAILED) {
        let line = rest.rsplit_once(" | Error: ").map_or(rest, |(line, _)| line);
        events.push(json!({"type": "frame", "hex": hex(line.as_bytes())}));
        *open_frame = true;
        return;
    }
    let outcome = if text.starts_with("Ignoring unparsable incoming message") {
        Some(("ignored", "dropped, logged at debug level"))
    } else if text.starts_with("Protocol error on incoming message") {
        Some(("rejected", "not a JSON-RPC message: answered with Invalid Request"))
    } else if text.starts_with("Ignoring non-MCP notification") {
        Some(("ignored", "a notification of an unknown method: dropped"))
    } else {
        None
    };
    if let Some((outcome, detail)) = outcome {
        if !std::mem::take(open_frame) {
            events.push(json!({"type": "frame", "hex": null}));
        }
        let frame = events.last_mut().expect("the frame just pushed");
        frame["outcome"] = json!(outcome);
        frame["detail"] = json!(detail);
    } else if text.starts_with("Incoming message exceeded the maximum line length") {
        events.push(json!({"type": "oversize", "detail": text}));
    } else if level <= tracing::Level::WARN {
        events.push(json!({"type": "error", "message": text}));
    }
}
