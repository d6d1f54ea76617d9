//! Pipe backpressure with real spawned children.
//!
//! Each iteration spawns `pipe_writer`, which writes one shape of JSON-RPC
//! message over and over (64 KiB per `write`) into a real OS pipe, and reads
//! it to the end with one strategy; the time runs from the child's start
//! signal (after its start-up) to its exit. Every iteration asserts the count:
//! bytes for the raw drain, frames for the others, and the child's own report
//! of what it wrote.
//!
//! Strategies (see `readers`): `raw-drain` (read and discard: the physical
//! limit), `framer-blocking` (this crate's framer, `Framer::read_from`),
//! `envelope-blocking` (the same loop with `mcp_framer_jsonrpc::parse` on each frame,
//! in place: what validating costs without tokio, a copy or a queue),
//! `host-reader` (the host transport's tokio reader task,
//! `mcp_framer_stdio::host::Reader`: framing, parsing, one copy per
//! message, a bounded queue to a consumer task that counts, taking up to 256
//! messages per wake-up with `recv_many`), `framer-task`
//! (the same task and queue with framing only, no parsing: what the
//! classification costs),
//! `framedread-lines` (tokio-util `FramedRead` + `LinesCodec`) and
//! `read-until` (`BufReader::read_until`). `…+pipe1MiB` runs the child with
//! its pipe enlarged to 1 MiB by `F_SETPIPE_SZ`; the others use the default
//! 64 KiB pipe.
//!
//! The readers a user would pick instead of this project's host, each
//! receiving every message as a value the application can use:
//! `host-session` (`mcp_framer_stdio::host::Session` spawns the child; a
//! consumer task counts the notifications; no drops asserted), `rmcp`
//! (rmcp's `TokioChildProcess` spawns it; `Transport::receive` until the end)
//! `rmcp-service-tokiochildprocess` and `rmcp-service-childprocess` (a whole
//! rmcp client service, `serve_directly`, over rmcp's `TokioChildProcess` and
//! over `mcp_framer_rmcp::ChildProcess`; its `ClientHandler` counts the
//! notifications: what an rmcp application gets with each transport)
//! and `hand-written` (`FramedRead` + `LinesCodec` +
//! `serde_json::from_str::<Value>` per line). The two that own the child
//! start it by sending one line on its stdin instead of closing it.
//!
//! The child writes `notifications/message` ([`pipe::notification_with`]):
//! every reader, rmcp's typed one included, takes them unasked. What their
//! `data` holds decides what a reader that builds values pays, so every
//! group names its payload ([`Payload`]): `text` (one flat string of plain
//! words) at 200 B, 64 KiB and 1 MiB; `tools-list` (a `tools/list` result:
//! many small objects) at 64 KiB; `source` (escaped source text: quotes,
//! tabs, escaped newlines, a little non-ASCII) at 1 MiB.
//!
//! Benchmark ids: `pipe/<size>-<payload>/<placement>/<strategy>`, placement
//! one of `same-cpu` (reader and child pinned to the first allowed CPU),
//! `split-cpus` (reader on the first, child on the second) and `unpinned`.
//! The tokio strategies use a current-thread runtime on the pinned thread.
//! Each benchmark takes 10 samples of the same number of iterations
//! (criterion's flat sampling: an iteration reads a whole stream, so the
//! linear ramp of 1 + 2 + … + 10 iterations would cost 55 of them).
//!
//! Besides criterion's wall-clock time, every iteration measures the CPU
//! time of this process (the reader: every thread, user and system time)
//! over the same span, minus an empty baseline (the same strategy reading a
//! one-frame stream), per MiB read beyond that frame: at 64 KiB and 1 MiB the writing child
//! sets the pace, so wall time cannot tell the readers apart, CPU time can.
//! Written to `<criterion dir>/pipe_cpu.json`, which `scripts/bench-report`
//! reads (`benches/RECORDS.md`).
//!
//! `MCP_BENCH_QUICK=1`: 64 MiB per iteration; otherwise 1 GiB. Run: `cargo
//! bench -p mcp-framer-benches --bench pipe` (every placement and strategy;
//! `scripts/bench-report --quick` runs only the benchmarks its targets and
//! the README's table name).

mod readers;

use std::io;
use std::process::ChildStdout;
use std::time::Duration;

use criterion::{Criterion, SamplingMode, Throughput};
use mcp_framer_benches::pipe::{self, Cpus, Payload, Placement, Shape, Writer};
use mcp_framer_benches::readers as shared;
use mcp_framer_benches::results;
use mcp_framer_stdio::host::ReaderEnd;
use serde_json::json;
use tokio::runtime::Runtime;

use readers::Queue;

const WRITER: &str = env!("CARGO_BIN_EXE_pipe_writer");

/// The groups: size name, payload, size asked for.
const SHAPES: [(&str, Payload, usize); 5] = [
    ("200B", Payload::Text, 200),
    ("64KiB", Payload::ToolsList, 64 << 10),
    ("64KiB", Payload::Text, 64 << 10),
    ("1MiB", Payload::Source, 1 << 20),
    ("1MiB", Payload::Text, 1 << 20),
];

/// The enlarged pipe.
const BIG_PIPE: usize = 1 << 20;

/// The default Linux pipe.
const DEFAULT_PIPE: u64 = 64 << 10;

/// The queue of the decoupled reader: roomy enough that a consumer that only
/// counts never makes the reader drop.
const QUEUE: Queue = Queue { capacity: 4096, max_wait: Duration::from_millis(100) };

/// The most items the counting consumer takes from the queue per wake-up
/// (`Receiver::recv_many`): one lock on the queue's permits per batch instead
/// of one per message.
const CONSUMER_BATCH: usize = 256;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Strategy {
    RawDrain,
    FramerBlocking,
    EnvelopeBlocking,
    HostReader,
    FramerTask,
    FramedLines,
    ReadUntil,
    HostSession,
    HandWritten,
    Rmcp,
    RmcpServiceStock,
    RmcpServiceAdapter,
}

impl Strategy {
    fn name(self) -> &'static str {
        match self {
            Strategy::RawDrain => "raw-drain",
            Strategy::FramerBlocking => "framer-blocking",
            Strategy::EnvelopeBlocking => "envelope-blocking",
            Strategy::HostReader => "host-reader",
            Strategy::FramerTask => "framer-task",
            Strategy::FramedLines => "framedread-lines",
            Strategy::ReadUntil => "read-until",
            Strategy::HostSession => "host-session",
            Strategy::HandWritten => "hand-written",
            Strategy::Rmcp => "rmcp",
            Strategy::RmcpServiceStock => "rmcp-service-tokiochildprocess",
            Strategy::RmcpServiceAdapter => "rmcp-service-childprocess",
        }
    }

    /// Runs the child once and reads it to its end: through [`pipe::run`],
    /// or, for a client library that spawns the child itself, through
    /// [`shared::run_session`] / [`readers::run_rmcp`].
    fn run(self, writer: &Writer, timeout: Duration, runtime: &Runtime) -> Result<pipe::Run, String> {
        match self {
            Strategy::HostSession => runtime.block_on(shared::run_session(WRITER, writer, timeout)),
            Strategy::Rmcp => runtime.block_on(readers::run_rmcp(WRITER, writer, timeout)),
            Strategy::RmcpServiceStock => {
                runtime.block_on(readers::run_rmcp_service(WRITER, writer, timeout, readers::RmcpTransport::Stock))
            }
            Strategy::RmcpServiceAdapter => {
                runtime.block_on(readers::run_rmcp_service(WRITER, writer, timeout, readers::RmcpTransport::Adapter))
            }
            _ => pipe::run(WRITER, writer, timeout, |stdout| self.read(stdout, runtime)),
        }
    }

    /// Reads `stdout` to its end; returns bytes for the raw drain, frames
    /// for the others.
    fn read(self, stdout: ChildStdout, runtime: &Runtime) -> io::Result<u64> {
        match self {
            Strategy::RawDrain => shared::raw_drain(stdout),
            Strategy::FramerBlocking => readers::framer_blocking(stdout, |_| {}),
            Strategy::EnvelopeBlocking => readers::framer_blocking(stdout, |frame| {
                let message = mcp_framer_jsonrpc::parse(frame).expect("the child writes valid messages");
                std::hint::black_box(message.kind());
            }),
            Strategy::ReadUntil => readers::read_until(stdout),
            Strategy::HandWritten => {
                runtime.block_on(async { shared::hand_written(tokio::process::ChildStdout::from_std(stdout)?).await })
            }
            Strategy::HostSession | Strategy::Rmcp | Strategy::RmcpServiceStock | Strategy::RmcpServiceAdapter => {
                unreachable!("{} spawns the child itself", self.name())
            }
            Strategy::FramedLines => {
                runtime.block_on(async { readers::framed_lines(tokio::process::ChildStdout::from_std(stdout)?).await })
            }
            Strategy::HostReader => runtime.block_on(async {
                let stdout = tokio::process::ChildStdout::from_std(stdout)?;
                let (reader, mut queue, metrics) = readers::spawn_host_reader(
                    stdout,
                    mcp_framer_stdio::host::DEFAULT_MAX_QUEUED_BYTES,
                    QUEUE.max_wait,
                );
                let mut frames = 0;
                let mut batch = Vec::with_capacity(CONSUMER_BATCH);
                while queue.recv_many(&mut batch, CONSUMER_BATCH).await > 0 {
                    for item in batch.drain(..) {
                        assert!(readers::is_message(&item), "unexpected {item:?}");
                        frames += 1;
                    }
                }
                let report = reader.await.map_err(io::Error::other)?;
                assert!(matches!(report.end, ReaderEnd::Eof), "{:?}", report.end);
                let metrics = metrics.snapshot();
                assert_eq!(
                    (metrics.delivered, metrics.overload_dropped),
                    (frames, 0),
                    "a counting consumer never overloads"
                );
                Ok(frames)
            }),
            Strategy::FramerTask => runtime.block_on(async {
                let stdout = tokio::process::ChildStdout::from_std(stdout)?;
                let (reader, mut queue) = readers::spawn_decoupled(stdout, QUEUE);
                let mut frames = 0;
                let mut batch = Vec::with_capacity(CONSUMER_BATCH);
                while queue.recv_many(&mut batch, CONSUMER_BATCH).await > 0 {
                    frames += batch.len() as u64;
                    batch.clear();
                }
                let delivery = reader.await.map_err(io::Error::other)??;
                assert_eq!((delivery.delivered, delivery.dropped), (frames, 0), "a counting consumer never overloads");
                Ok(frames)
            }),
        }
    }
}

/// What a run covers: the strategies, and those also run with the big pipe.
const STRATEGIES: [Strategy; 12] = [
    Strategy::RawDrain,
    Strategy::FramerBlocking,
    Strategy::EnvelopeBlocking,
    Strategy::HostReader,
    Strategy::HostSession,
    Strategy::HandWritten,
    Strategy::Rmcp,
    Strategy::RmcpServiceStock,
    Strategy::RmcpServiceAdapter,
    Strategy::FramerTask,
    Strategy::FramedLines,
    Strategy::ReadUntil,
];
const BIG_PIPE_STRATEGIES: [Strategy; 2] = [Strategy::RawDrain, Strategy::FramerBlocking];

fn main() {
    let quick = mcp_framer_benches::shapes::quick();
    let (total, measurement, timeout) = if quick {
        (64u64 << 20, Duration::from_secs(1), Duration::from_secs(30))
    } else {
        (1u64 << 30, Duration::from_secs(8), Duration::from_secs(120))
    };
    eprintln!("pipe: {} MiB per iteration ({})", total >> 20, if quick { "quick" } else { "full" });
    let mut criterion = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(1))
        .measurement_time(measurement)
        .nresamples(mcp_framer_benches::shapes::resamples())
        .configure_from_args();
    let allowed = Cpus::current().expect("sched_getaffinity");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
    let mut cpu = serde_json::Map::new();

    for placement in Placement::ALL {
        let child_cpu = match placement.apply(&allowed) {
            Ok(cpu) => cpu,
            Err(e) => {
                eprintln!("pipe: skipping {}: {e}", placement.name());
                continue;
            }
        };
        for (size_name, payload, frame_bytes) in SHAPES {
            let shape = Shape::Notification(payload);
            let writer = Writer { cpu: child_cpu, ..Writer::with_total(shape, frame_bytes, total) };
            let group_name = format!("pipe/{size_name}-{}/{}", payload.name(), placement.name());
            let mut group = criterion.benchmark_group(group_name.as_str());
            group.throughput(Throughput::Bytes(writer.bytes()));
            group.sampling_mode(SamplingMode::Flat);
            let runs =
                STRATEGIES.iter().map(|&s| (s, None)).chain(BIG_PIPE_STRATEGIES.iter().map(|&s| (s, Some(BIG_PIPE))));
            for (strategy, pipe_size) in runs {
                let id = match pipe_size {
                    None => strategy.name().to_string(),
                    Some(_) => format!("{}+pipe1MiB", strategy.name()),
                };
                let writer = Writer { pipe_size, ..writer };
                // CPU per MiB of each iteration, the empty baseline taken off.
                let mut cpu_per_mib: Vec<f64> = Vec::new();
                let mut empty = None;
                group.bench_function(id.as_str(), |b| {
                    let empty = *empty.get_or_insert_with(|| empty_baseline(strategy, &writer, timeout, &runtime, &id));
                    b.iter_custom(|iters| {
                        let mut elapsed = Duration::ZERO;
                        for _ in 0..iters {
                            let run = checked_run(strategy, &writer, timeout, &runtime, &id);
                            // The baseline read one frame: what is left is the rest.
                            let mib = (writer.bytes() - writer.line_len as u64) as f64 / f64::from(1 << 20);
                            cpu_per_mib.push(run.cpu.saturating_sub(empty).as_nanos() as f64 / mib);
                            elapsed += run.elapsed;
                        }
                        elapsed
                    });
                });
                if let Some(empty) = empty {
                    let entry = json!({
                        "at": results::now_unix(),
                        "bytes_per_iteration": writer.bytes(),
                        "empty_baseline_ns": empty.as_nanos() as u64,
                        "empty_baseline_bytes": writer.line_len,
                        "cpu_ns_per_mib": cpu_per_mib,
                    });
                    cpu.insert(format!("{group_name}/{id}"), entry);
                }
            }
            group.finish();
        }
    }
    criterion.final_summary();
    if !cpu.is_empty() {
        match results::merge_into(CPU_FILE, CPU_ABOUT, cpu) {
            Ok(path) => eprintln!("pipe: CPU per MiB written to {}", path.display()),
            Err(e) => eprintln!("pipe: cannot write the CPU per MiB: {e}"),
        }
    }
}

/// The file in criterion's directory that holds the CPU per MiB.
const CPU_FILE: &str = "pipe_cpu.json";
const CPU_ABOUT: &str = "CPU time of the reading process (CLOCK_PROCESS_CPUTIME_ID: every thread, user and system) \
    per MiB read, from the child's start signal to its exit, one value per iteration: (CPU time - the empty \
    baseline) / (bytes - the baseline's bytes), the empty baseline being the median CPU time of the same strategy \
    reading a one-frame stream; written by benches/benches/pipe.rs";

/// One run of `strategy` over `writer`, its count and the child's pipe size
/// checked.
fn checked_run(strategy: Strategy, writer: &Writer, timeout: Duration, runtime: &Runtime, id: &str) -> pipe::Run {
    let run = strategy.run(writer, timeout, runtime).unwrap_or_else(|e| panic!("{id}: {e}"));
    let expected = if strategy == Strategy::RawDrain { writer.bytes() } else { writer.frames };
    assert_eq!(run.count, expected, "{id}: count read");
    let pipe_bytes = writer.pipe_size.map_or(DEFAULT_PIPE, |size| size as u64);
    assert_eq!(run.report.pipe_size, pipe_bytes, "{id}: the child's pipe size");
    run
}

/// Runs of the empty baseline: the most CPU a strategy spends on a stream
/// whatever its length (starting, the last wake-ups, the child's exit).
const EMPTY_RUNS: usize = 3;

/// The median CPU time of `strategy` reading a stream of one frame of the
/// same shape: what a run costs that is not per byte, taken off each
/// iteration's CPU time before dividing by the bytes.
fn empty_baseline(strategy: Strategy, writer: &Writer, timeout: Duration, runtime: &Runtime, id: &str) -> Duration {
    let one = Writer { frames: 1, ..*writer };
    let mut cpu: Vec<Duration> =
        (0..EMPTY_RUNS).map(|_| checked_run(strategy, &one, timeout, runtime, id).cpu).collect();
    cpu.sort();
    cpu[EMPTY_RUNS / 2]
}
