//! Slow consumer: what backpressure costs the server.
//!
//! A real child (`pipe_writer`) writes `N` notifications-sized messages (the
//! ~200 B `request` shape), one `write(2)` per message as a server does, and
//! reports how long it spent blocked in `write` and how long it took to write
//! everything. The host's consumer spends `X` µs of CPU per message. Readers:
//!
//! * `coupled`: reads the next message only when the consumer is ready (the
//!   framer in a blocking loop calling the consumer inline);
//! * `host reader, defaults`: the host transport's reader task
//!   (`mcp_framer_stdio::host::Reader`), which only reads, and the host's
//!   default queue (bounded by bytes, 64 MiB, not by a count of messages) to
//!   a consumer thread, with `OverloadPolicy::Drop` and the default
//!   `Overload::max_wait` (zero: never wait on a timer; a message that does
//!   not fit gets the policy once a few yields made no room);
//! * `host reader, queue 4096`: the same with the old default capacity of
//!   4096 messages, which a slow consumer fills;
//! * `host reader, max_wait 100 ms`: the same with the opt-in wait budget of
//!   100 ms per overload episode (an episode ends when the queue has drained
//!   halfway), which lets the consumer pace the reader for at most that long
//!   per episode;
//! * `drop when full`: a reference for the decoupled design, not the host's
//!   code: the framer in a tokio task offering each frame to the same queue
//!   with `try_send` and dropping it when the queue is full.
//!
//! Then **no drops at 1 GiB**: the property `framer/e2e/tests/host_no_drops.rs`
//! checks at a small volume, at a volume that takes a release build seconds.
//! The host reader with `SessionConfig::default()` reads 1 GiB of 200 B
//! `notifications/message` (then 128 MiB each of 64 KiB and of 1 MiB ones),
//! written 64 KiB per `write(2)`, into a queue whose only consumer is a task
//! that receives and drops each message, on tokio's current-thread and
//! multi-thread runtimes. A consumer that keeps up loses nothing: the bench
//! asserts every message delivered and received, none dropped or rejected,
//! and records the counts and the time.
//!
//! It prints a Markdown table (the median of three runs per row) and writes
//! it, and the same rows as JSON, to `<criterion dir>/slow_consumer/`
//! (`table.md`, `results.json`); `scripts/bench-report` keeps the JSON in its
//! record and draws the chart of the child's time blocked in `write` from it
//! (`benches/RECORDS.md`). Unpinned placement.
//!
//! Run: `cargo bench -p mcp-framer-benches --bench slow_consumer`
//! (`MCP_BENCH_QUICK=1`: fewer messages).

mod readers;

use std::fmt::Write as _;
use std::process::ChildStdout;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use mcp_framer_benches::pipe::{self, Payload, Run, Shape, Writer};
use mcp_framer_benches::results;
use mcp_framer_stdio::host::{Inbound, MetricsSnapshot, Overload, Reader, ReaderEnd, SessionConfig, inbound_channel};
use tokio::runtime::Runtime;

const WRITER: &str = env!("CARGO_BIN_EXE_pipe_writer");

/// Consumer time per message, µs.
const COSTS_US: [u64; 3] = [0, 20, 100];

/// Runs per row; the row shows the run with the median time to completion.
const REPEATS: usize = 3;

/// The host transport's default inbound queue bound, in bytes (checked
/// against `SessionConfig::default()` in `main`).
const CAPACITY: usize = mcp_framer_stdio::host::DEFAULT_MAX_QUEUED_BYTES;

/// A small byte bound, kept as a row: 1 MiB.
const SMALL_BYTES: usize = 1 << 20;

/// The drop-when-full reference's capacity, in messages.
const SMALL_QUEUE: usize = 4096;

/// The host transport's default wait budget per overload episode (checked
/// against `Overload::default()` in `main`).
const DEFAULT_WAIT: Duration = Duration::ZERO;

/// The no-drops runs: frame size and bytes per run (each at least this
/// much, in whole frames), the volume `host_no_drops` used to flood.
const NO_DROPS: [(usize, u64); 3] = [(200, 1 << 30), (64 << 10, 128 << 20), (1 << 20, 128 << 20)];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Strategy {
    Coupled,
    /// The host reader with this queue byte bound and wait budget per
    /// overload episode.
    HostReader(usize, Duration),
    /// `try_send`, drop when full.
    DropWhenFull,
}

impl Strategy {
    const ALL: [Strategy; 5] = [
        Strategy::Coupled,
        Strategy::HostReader(CAPACITY, DEFAULT_WAIT),
        Strategy::HostReader(SMALL_BYTES, DEFAULT_WAIT),
        Strategy::HostReader(CAPACITY, Duration::from_millis(100)),
        Strategy::DropWhenFull,
    ];

    fn name(self) -> String {
        match self {
            Strategy::Coupled => "coupled".into(),
            Strategy::HostReader(CAPACITY, wait) if wait == DEFAULT_WAIT => {
                format!("host reader, defaults (queue bounded by bytes, max_wait {wait:?})")
            }
            Strategy::HostReader(CAPACITY, wait) => format!("host reader, max_wait {wait:?} (opt-in)"),
            Strategy::HostReader(bytes, wait) => format!("host reader, queue {} KiB, max_wait {wait:?}", bytes >> 10),
            Strategy::DropWhenFull => format!("drop when full, queue {SMALL_QUEUE} (reference)"),
        }
    }
}

/// One measured run.
#[derive(Clone, Copy, Debug)]
struct Row {
    /// The child's time blocked in `write`.
    blocked: Duration,
    /// The child's time from first write to last.
    elapsed: Duration,
    /// Messages the consumer handled.
    handled: u64,
    /// Messages the overload policy dropped.
    dropped: u64,
    /// Time the reader waited for room in the queue (none for the coupled
    /// reader: it is the consumer).
    waited: Option<Duration>,
    /// The host reader's overload episodes (none for the other readers).
    episodes: Option<u64>,
    /// From the start signal until the consumer had handled its last message.
    host_done: Duration,
}

fn measure(strategy: Strategy, cost: Duration, writer: &Writer, runtime: &Runtime) -> Row {
    let timeout = Duration::from_secs(60);
    let fail = |e: String| -> ! { panic!("{} at {cost:?}: {e}", strategy.name()) };
    match strategy {
        Strategy::Coupled => {
            let run = pipe::run(WRITER, writer, timeout, |stdout| {
                readers::framer_blocking(stdout, |_frame| readers::spin_for(cost))
            })
            .unwrap_or_else(|e| fail(e));
            assert_eq!(run.count, writer.frames, "the coupled reader handles every message");
            row(&run, (run.count, 0, None, None), run.elapsed)
        }
        Strategy::HostReader(capacity, max_wait) => {
            let mut consumer = None;
            let mut delivery = None;
            let read = |stdout: ChildStdout| {
                runtime.block_on(async {
                    let stdout = tokio::process::ChildStdout::from_std(stdout)?;
                    let (reader, mut queue, metrics) = readers::spawn_host_reader(stdout, capacity, max_wait);
                    consumer = Some(spawn_consumer(move || queue.blocking_recv(), cost, readers::is_message));
                    let report = reader.await.map_err(std::io::Error::other)?;
                    assert!(matches!(report.end, ReaderEnd::Eof), "{:?}", report.end);
                    let metrics = metrics.snapshot();
                    if max_wait.is_zero() {
                        assert_eq!(metrics.dispatch_wait, Duration::ZERO, "the default never waits");
                    }
                    let episodes = Some(metrics.overload_episodes);
                    delivery = Some((metrics.delivered, metrics.overload_dropped, metrics.dispatch_wait, episodes));
                    Ok(metrics.frames)
                })
            };
            let run = pipe::run(WRITER, writer, timeout, read).unwrap_or_else(|e| fail(e));
            decoupled_row(&run, writer, consumer, delivery)
        }
        Strategy::DropWhenFull => {
            let mut consumer = None;
            let mut delivery = None;
            let read = |stdout: ChildStdout| {
                runtime.block_on(async {
                    let stdout = tokio::process::ChildStdout::from_std(stdout)?;
                    let queue = readers::Queue { capacity: SMALL_QUEUE, max_wait: Duration::ZERO };
                    let (reader, mut queue) = readers::spawn_decoupled(stdout, queue);
                    consumer = Some(spawn_consumer(move || queue.blocking_recv(), cost, |_| true));
                    let done = reader.await.map_err(std::io::Error::other)??;
                    assert_eq!(done.waited, Duration::ZERO, "never waits");
                    delivery = Some((done.delivered, done.dropped, done.waited, None));
                    Ok(done.delivered + done.dropped)
                })
            };
            let run = pipe::run(WRITER, writer, timeout, read).unwrap_or_else(|e| fail(e));
            decoupled_row(&run, writer, consumer, delivery)
        }
    }
}

/// The consumer thread: takes each queued item, checks it, spends `cost` on
/// it; returns how many it handled and when it finished.
fn spawn_consumer<T: Send + std::fmt::Debug + 'static>(
    mut next: impl FnMut() -> Option<T> + Send + 'static,
    cost: Duration,
    check: fn(&T) -> bool,
) -> JoinHandle<(u64, Instant)> {
    thread::spawn(move || {
        let mut handled = 0;
        while let Some(item) = next() {
            assert!(check(&item), "unexpected {item:?}");
            readers::spin_for(cost);
            handled += 1;
        }
        (handled, Instant::now())
    })
}

/// Checks a decoupled run's counts and makes its row.
fn decoupled_row(
    run: &Run,
    writer: &Writer,
    consumer: Option<JoinHandle<(u64, Instant)>>,
    delivery: Option<(u64, u64, Duration, Option<u64>)>,
) -> Row {
    let (handled, done) = consumer.expect("spawned").join().expect("the consumer thread");
    let (delivered, dropped, waited, episodes) = delivery.expect("the reader reported");
    assert_eq!(run.count, writer.frames, "the reader framed every message");
    assert_eq!((handled, delivered + dropped), (delivered, writer.frames), "every message handled or dropped");
    row(run, (handled, dropped, Some(waited), episodes), done - run.started)
}

/// A row from the child's report, `(handled, dropped, waited, episodes)` and
/// the host's completion time.
fn row(
    run: &Run,
    (handled, dropped, waited, episodes): (u64, u64, Option<Duration>, Option<u64>),
    host_done: Duration,
) -> Row {
    let report = &run.report;
    Row { blocked: report.write_blocked, elapsed: report.elapsed, handled, dropped, waited, episodes, host_done }
}

/// One no-drops run: a frame size on one runtime.
#[derive(Clone, Copy, Debug)]
struct NoDrops {
    runtime: &'static str,
    frame_bytes: usize,
    frames: u64,
    bytes: u64,
    /// The reader's counters at the end of the stream.
    metrics: MetricsSnapshot,
    /// Messages the consumer task received.
    received: u64,
    /// From the start signal to the child's exit, reading included.
    elapsed: Duration,
}

/// Streams `bytes` of `frame_bytes` notifications through the host reader
/// with the default configuration on `runtime`, to a consumer task that
/// only receives; asserts that nothing was lost.
fn no_drops(runtime: &Runtime, name: &'static str, frame_bytes: usize, bytes: u64) -> NoDrops {
    let writer = Writer::with_total(Shape::Notification(Payload::Text), frame_bytes, bytes);
    let mut counts = None;
    let read = |stdout: ChildStdout| {
        runtime.block_on(async {
            let stdout = tokio::process::ChildStdout::from_std(stdout)?;
            let (inbound, mut queue) = inbound_channel();
            let reader = Reader::new(&SessionConfig::default(), inbound);
            let metrics = reader.metrics();
            let consumer = tokio::spawn(async move {
                let mut received = 0u64;
                while let Some(item) = queue.recv().await {
                    assert!(matches!(item, Inbound::Notification(_)), "unexpected {item:?}");
                    received += 1;
                }
                received
            });
            let report = reader.spawn(stdout).await.map_err(std::io::Error::other)?;
            assert!(matches!(report.end, ReaderEnd::Eof), "{:?}", report.end);
            let received = consumer.await.map_err(std::io::Error::other)?;
            counts = Some((metrics.snapshot(), received));
            Ok(received)
        })
    };
    let run = pipe::run(WRITER, &writer, Duration::from_secs(600), read)
        .unwrap_or_else(|e| panic!("no drops, {name}, {frame_bytes} B: {e}"));
    let (metrics, received) = counts.expect("the reader reported");
    let m = &metrics;
    let frames = writer.frames;
    assert_eq!((m.frames, m.delivered, received), (frames, frames, frames), "{name}, {frame_bytes} B: {m:?}");
    assert_eq!((m.overload_dropped, m.overload_rejected, m.unconsumed), (0, 0, 0), "{name}, {frame_bytes} B: {m:?}");
    NoDrops { runtime: name, frame_bytes, frames, bytes: writer.bytes(), metrics, received, elapsed: run.elapsed }
}

/// Every no-drops run, on both runtimes.
fn no_drops_runs() -> Vec<NoDrops> {
    let current = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
    let multi = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let mut runs = Vec::new();
    for (name, runtime) in [("current-thread", &current), ("multi-thread", &multi)] {
        for (frame_bytes, bytes) in NO_DROPS {
            let run = no_drops(runtime, name, frame_bytes, bytes);
            eprintln!("slow_consumer: no drops, {name}, {frame_bytes} B: {run:?}");
            runs.push(run);
        }
    }
    runs
}

fn mib_per_s(bytes: u64, elapsed: Duration) -> f64 {
    bytes as f64 / (1 << 20) as f64 / elapsed.as_secs_f64()
}

fn no_drops_table(runs: &[NoDrops]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "No drops: `notifications/message` written 64 KiB per `write(2)`, read by the host reader with \
         `SessionConfig::default()` into a queue drained by a task that only receives; one run each."
    );
    let _ = writeln!(out);
    let _ =
        writeln!(out, "| runtime | frame (B) | frames | MiB | delivered | dropped | rejected | received | s | MiB/s |");
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for run in runs {
        let m = &run.metrics;
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {:.2} | {:.0} |",
            run.runtime,
            run.frame_bytes,
            run.frames,
            run.bytes >> 20,
            m.delivered,
            m.overload_dropped,
            m.overload_rejected,
            run.received,
            run.elapsed.as_secs_f64(),
            mib_per_s(run.bytes, run.elapsed)
        );
    }
    out
}

fn no_drops_json(runs: &[NoDrops]) -> serde_json::Value {
    let rows: Vec<serde_json::Value> = runs
        .iter()
        .map(|run| {
            serde_json::json!({
                "runtime": run.runtime,
                "frame_bytes": run.frame_bytes,
                "frames": run.frames,
                "bytes": run.bytes,
                "delivered": run.metrics.delivered,
                "dropped": run.metrics.overload_dropped,
                "rejected": run.metrics.overload_rejected,
                "received": run.received,
                "seconds": run.elapsed.as_secs_f64(),
                "mib_per_s": mib_per_s(run.bytes, run.elapsed),
            })
        })
        .collect();
    serde_json::Value::Array(rows)
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e3)
}

fn table(messages: u64, results: &[(u64, Strategy, Row)]) -> String {
    let mut out = String::new();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load = load.split_whitespace().next().unwrap_or("?").to_owned();
    let _ = writeln!(
        out,
        "{messages} messages of the ~200 B shape, one `write(2)` each, default 64 KiB pipe, unpinned; \
         median of {REPEATS} runs; load average {load} at the end."
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "| consumer µs/msg | reader | child blocked in write (ms) | child time to completion (ms) | handled | dropped | reader waited for the queue (ms) | overload episodes | host done (ms) |"
    );
    let _ = writeln!(out, "|---:|---|---:|---:|---:|---:|---:|---:|---:|");
    for (cost, strategy, row) in results {
        let _ = writeln!(
            out,
            "| {cost} | {} | {} | {} | {} | {} | {} | {} | {} |",
            strategy.name(),
            ms(row.blocked),
            ms(row.elapsed),
            row.handled,
            row.dropped,
            row.waited.map_or_else(|| "-".into(), ms),
            row.episodes.map_or_else(|| "-".into(), |n| n.to_string()),
            ms(row.host_done)
        );
    }
    out
}

/// The rows as JSON (`<criterion dir>/slow_consumer/results.json`), which
/// `scripts/bench-report` copies into its record and draws its chart from,
/// and the no-drops runs under `no_drops`.
fn results_json(messages: u64, results: &[(u64, Strategy, Row)], no_drops: &[NoDrops]) -> serde_json::Value {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let rows: Vec<serde_json::Value> = results
        .iter()
        .map(|(cost, strategy, row)| {
            serde_json::json!({
                "consumer_us": cost,
                "reader": strategy.name(),
                "blocked_ms": ms(row.blocked),
                "child_elapsed_ms": ms(row.elapsed),
                "handled": row.handled,
                "dropped": row.dropped,
                "waited_ms": row.waited.map(ms),
                "overload_episodes": row.episodes,
                "host_done_ms": ms(row.host_done),
            })
        })
        .collect();
    serde_json::json!({
        "at": results::now_unix(),
        "messages": messages,
        "repeats": REPEATS,
        "rows": rows,
        "no_drops": no_drops_json(no_drops),
    })
}

fn main() {
    assert_eq!(Overload::default().max_wait, DEFAULT_WAIT, "the host's default wait budget");
    assert_eq!(SessionConfig::default().overload.max_queued_bytes, CAPACITY, "the host's default queue bound");
    let quick = mcp_framer_benches::shapes::quick();
    let messages = if quick { 2_000 } else { 10_000 };
    let base = Writer::with_total(Shape::Request, 0, 0);
    let writer = Writer { frames: messages, write_size: base.line_len, ..base };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");

    let mut results = Vec::new();
    for cost_us in COSTS_US {
        let cost = Duration::from_micros(cost_us);
        for strategy in Strategy::ALL {
            let mut runs: Vec<Row> = (0..REPEATS).map(|_| measure(strategy, cost, &writer, &runtime)).collect();
            runs.sort_by_key(|row| row.elapsed);
            let row = runs[REPEATS / 2];
            eprintln!("slow_consumer: {cost_us} µs/msg, {}: {row:?}", strategy.name());
            results.push((cost_us, strategy, row));
        }
    }
    let no_drops = no_drops_runs();
    let table = format!("{}\n{}", table(messages, &results), no_drops_table(&no_drops));
    println!("{table}");
    match results::write_table("slow_consumer", &table, &results_json(messages, &results, &no_drops)) {
        Ok(dir) => println!("table and results: {}", dir.display()),
        Err(e) => eprintln!("slow_consumer: cannot write the table and results: {e}"),
    }
}
