//! The soak: minutes of mixed traffic between real processes, on either
//! transport and either runtime, with nothing lost and memory flat.
//!
//! `soak` spawns `soak_server` (the server library with six tools, see
//! [`server`]) under the newline host (`mcp_framer_stdio::host::Session`)
//! or the stdio-v2 host (`mcp_framer_stdio_v2::host::Client`), and runs
//! `--callers N` concurrent callers (default 32) for `--duration S`
//! seconds, each drawing its calls from a seeded plan ([`traffic`]; its
//! first round makes every kind of call once, even past the duration on a
//! loaded machine): half
//! `echo` of 1 B to 64 KiB of hostile text (content checked), `ping`, `big`
//! results of 256 KiB to 4 MiB (length checked), `slow` calls given up after
//! 20 to 200 ms (they must time out with the cancellation sent), short
//! `slow` calls, tool failures (`isError`), invalid params (-32602),
//! handler panics (`isError`), and calls dropped before their answer.
//!
//! Hostile callers run beside them (unless `--no-hostile`): one that stops
//! reading a 4 MiB result for 1 to 4 s (then reads and checks it: it is
//! still owed), a reset storm (16 calls sent and dropped at once, four
//! times a second), a request over the server's transport limit every
//! second, and the server floods its stderr (`--stderr-flood`, 256 KiB/s).
//!
//! # What it reports
//!
//! Calls per second; per kind the calls, the wrong and the lost answers,
//! and the latency p50, p99 and max; both processes' `VmRSS` sampled every
//! second (`/proc/<pid>/status`; the host is the soak's own process), with
//! the median of each third, the slope of the last two thirds and the peak
//! (and `VmHWM`); the cancellation counters of the host and of the server
//! (from its final report line). `--json PATH` writes all of it, samples
//! included (`scripts/soak` turns it into BMF, a record and a chart).
//!
//! # The verdict
//!
//! PASS when: no answer is wrong; none is lost (an owed answer not received
//! within the session's 60 s request timeout, or at all); for both
//! processes, the median RSS of the last third is within `--growth-mib`
//! (16 MiB) of the middle third's (the first third is warm-up); and the
//! peak RSS stays within `start + 3 × 4 MiB × (callers + 2) + 32 MiB`: at
//! most one result of at most 4 MiB per caller in flight (plus the two
//! hostile callers that hold one), each held at most three times (the
//! handler's text, its encoded frame, the host's parsed copy), and 32 MiB
//! for the transports' windows and buffers (stdio-v2's 16 MiB connection
//! window, its 16 MiB of bodies assembling; the newline framers' buffers).
//! Exit 0 on PASS, 1 on FAIL, 2 for a bad argument or a server that does
//! not start.

pub mod server;
pub use mcp_probe::stats;
pub mod traffic;
pub mod transport;

use std::ffi::OsString;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use clap::Parser;
use serde_json::{Value, json};

use stats::{Histogram, proc_status_kib};
use traffic::{Kind, Planned, Rng};
use transport::{Host, Reply};

/// The server's transport limit in the soak: above the largest result
/// (4 MiB) with room for its JSON.
pub const SERVER_MAX_FRAME: usize = 6 << 20;
/// The most bytes of one result the plan asks for.
pub const LARGEST_RESULT: u64 = traffic::BIG_BYTES.1;
/// The room the peak bound leaves for the transports' windows and buffers.
pub const TRANSPORT_ROOM: u64 = 32 << 20;

/// The host's peak bound above its start: three of the largest results per
/// caller in flight (the result, its frame, its copy), plus the transports'
/// room.
fn host_room(callers: usize) -> u64 {
    3 * LARGEST_RESULT * (callers as u64 + 2) + TRANSPORT_ROOM
}

/// The server's peak bound above its start: stdio-v2's budget formula
/// (`framer/stdio-v2/STDIO-V2.md`, "The server's memory") for the soak
/// server's configuration (its 6 MiB transport limit, `max_concurrent`
/// as the soak starts it, the other defaults), the finished results waiting
/// for room taken at the largest result the plan asks for; it bounds the
/// newline server too, which holds a subset of those terms.
fn server_room(max_concurrent: u64) -> u64 {
    let max_frame = SERVER_MAX_FRAME as u64;
    let (connection_window, writer_queue, control_queue): (u64, u64, u64) = (16 << 20, 16 << 20, 1 << 20);
    let listeners_backlog: u64 = 8 << 20;
    max_frame // bodies arriving at once (max_assembling)
        + connection_window
        + max_frame // messages handed to the dispatcher
        + writer_queue
        + control_queue
        + max_concurrent * 2 * (LARGEST_RESULT + (64 << 10))
        + listeners_backlog
        + TRANSPORT_ROOM
}

/// The `--max-concurrent` the soak gives its server.
fn server_concurrency(callers: usize) -> usize {
    callers + 64
}

/// The soak's flags.
#[derive(Debug, Clone, Parser)]
#[command(name = "soak", about = "Mixed traffic between real processes for minutes; nothing lost, memory flat")]
pub struct Options {
    /// Seconds of traffic.
    #[arg(long, default_value_t = 60)]
    pub duration: u64,
    /// Concurrent callers.
    #[arg(long, default_value_t = 32)]
    pub callers: usize,
    /// `newline` or `stdio-v2`.
    #[arg(long, default_value = "newline")]
    pub transport: String,
    /// The host's runtime: `current-thread` or `multi-thread`.
    #[arg(long, default_value = "multi-thread")]
    pub runtime: String,
    /// Worker threads of the multi-thread runtime (default: one per core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Worker threads of the server's runtime (default: one per core).
    #[arg(long)]
    pub server_threads: Option<usize>,
    /// The plan's seed.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// KiB per second the server writes to stderr.
    #[arg(long, default_value_t = 256)]
    pub stderr_flood: u64,
    /// Calls sent and dropped at once by each burst of the reset storm
    /// (four bursts a second; 0: no storm).
    #[arg(long, default_value_t = 16)]
    pub storm: usize,
    /// Leave out the hostile callers (and the stderr flood).
    #[arg(long)]
    pub no_hostile: bool,
    /// The bound on RSS growth, last third against the middle third, in MiB.
    #[arg(long, default_value_t = 16)]
    pub growth_mib: u64,
    /// The server binary (default: `soak_server` beside this one).
    #[arg(long)]
    pub server: Option<std::path::PathBuf>,
    /// Write the whole report, samples included, as JSON here.
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
}

impl Options {
    fn v2(&self) -> Result<bool, String> {
        match self.transport.as_str() {
            "newline" => Ok(false),
            "stdio-v2" => Ok(true),
            other => Err(format!("--transport is newline or stdio-v2, not {other:?}")),
        }
    }

    fn runtime(&self) -> Result<tokio::runtime::Runtime, String> {
        let mut builder = match self.runtime.as_str() {
            "current-thread" => tokio::runtime::Builder::new_current_thread(),
            "multi-thread" => {
                let mut builder = tokio::runtime::Builder::new_multi_thread();
                if let Some(n) = self.threads {
                    builder.worker_threads(n.max(1));
                }
                builder
            }
            other => return Err(format!("--runtime is current-thread or multi-thread, not {other:?}")),
        };
        builder.enable_all().build().map_err(|e| format!("cannot start the runtime: {e}"))
    }

    /// The runtime's worker threads, as reported.
    fn worker_threads(&self) -> usize {
        match self.runtime.as_str() {
            "current-thread" => 1,
            _ => self.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
        }
    }
}

/// One kind's tally.
#[derive(Debug, Clone, Default)]
struct Tally {
    latency: Histogram,
    wrong: u64,
    lost: u64,
}

/// What the callers saw.
#[derive(Debug, Default)]
struct Seen {
    kinds: Vec<Tally>,
    /// The first few wrong or lost answers, described.
    examples: Vec<String>,
}

impl Seen {
    fn new() -> Seen {
        Seen { kinds: vec![Tally::default(); Kind::ALL.len()], examples: Vec::new() }
    }

    fn count(&mut self, kind: Kind, latency: Duration, verdict: Verdict) {
        let tally = &mut self.kinds[kind.index()];
        tally.latency.record(latency);
        let what = match verdict {
            Verdict::Right => return,
            Verdict::Wrong(what) => {
                tally.wrong += 1;
                format!("{}: wrong: {what}", kind.name())
            }
            Verdict::Lost(what) => {
                tally.lost += 1;
                format!("{}: lost: {what}", kind.name())
            }
        };
        if self.examples.len() < 10 {
            self.examples.push(what);
        }
    }

    fn merge(&mut self, other: Seen) {
        for (a, b) in self.kinds.iter_mut().zip(other.kinds) {
            a.latency.merge(&b.latency);
            a.wrong += b.wrong;
            a.lost += b.lost;
        }
        for example in other.examples {
            if self.examples.len() < 10 {
                self.examples.push(example);
            }
        }
    }
}

/// A checked reply.
#[derive(Debug)]
enum Verdict {
    Right,
    Wrong(String),
    Lost(String),
}

fn text_of(result: &Value) -> Option<&str> {
    match result["content"].as_array()?.as_slice() {
        [block] => block["text"].as_str(),
        _ => None,
    }
}

fn is_error(result: &Value) -> bool {
    result["isError"] == json!(true)
}

/// Checks `reply` against what `planned` must get.
fn check(planned: &Planned, reply: Reply) -> Verdict {
    let wrong = |what: String| Verdict::Wrong(what);
    match (planned, reply) {
        (_, Reply::Failed(why)) => Verdict::Lost(why),
        (Planned::Echo(text), Reply::Result(result)) => match text_of(&result) {
            Some(got) if got == text && !is_error(&result) => Verdict::Right,
            Some(got) => wrong(format!("{} bytes sent, {} bytes back, not the same text", text.len(), got.len())),
            None => wrong(format!("no single text block: {:.200}", result.to_string())),
        },
        (Planned::Ping, Reply::Result(result)) if result == json!({}) => Verdict::Right,
        (Planned::Big(bytes), Reply::Result(result)) => match text_of(&result) {
            Some(got) if got.len() as u64 == *bytes && got.bytes().all(|b| b == b'x') => Verdict::Right,
            got => wrong(format!("{bytes} bytes asked, {:?} bytes back", got.map(str::len))),
        },
        (Planned::GiveUp(_), Reply::GaveUp { cancellation_sent: true }) => Verdict::Right,
        (Planned::Short(_), Reply::Result(result)) if text_of(&result) == Some("slept") => Verdict::Right,
        (Planned::Fail | Planned::Panic, Reply::Result(result)) if is_error(&result) => Verdict::Right,
        (Planned::Invalid, Reply::Error(-32602)) => Verdict::Right,
        (Planned::Drop(_), Reply::Dropped) => Verdict::Right,
        (planned, reply) => wrong(format!("{:?} got {:.200}", planned.kind(), format!("{reply:?}"))),
    }
}

fn params(planned: &Planned) -> (&'static str, Value) {
    let tool = |name: &str, arguments: Value| json!({"name": name, "arguments": arguments});
    match planned {
        Planned::Echo(text) => ("tools/call", tool("echo", json!({"text": text}))),
        Planned::Ping => ("ping", json!({})),
        Planned::Big(bytes) => ("tools/call", tool("big", json!({"bytes": bytes}))),
        Planned::GiveUp(_) | Planned::Drop(_) => ("tools/call", tool("slow", json!({"ms": traffic::SLOW_NEVER_MS}))),
        Planned::Short(ms) => ("tools/call", tool("slow", json!({"ms": ms}))),
        Planned::Fail => ("tools/call", tool("fail", json!({}))),
        Planned::Invalid => ("tools/call", tool("bad_args", json!({}))),
        Planned::Panic => ("tools/call", tool("panic", json!({}))),
    }
}

/// How long past `--duration` an ordinary caller may go on to finish its
/// first round (every kind of the mix once): a soak of seconds on a loaded
/// machine still makes every kind of call.
const FIRST_ROUND_GRACE: Duration = Duration::from_secs(30);

/// Ordinary caller `index`: calls from its plan until `end`, and at least
/// its first round (up to [`FIRST_ROUND_GRACE`] past `end`).
async fn caller(host: Arc<Host>, index: usize, mut rng: Rng, end: Instant) -> Seen {
    let mut seen = Seen::new();
    let mut n = 0;
    let first_round = traffic::MIX.len() as u64;
    while Instant::now() < end || (n < first_round && Instant::now() < end + FIRST_ROUND_GRACE) {
        let planned = traffic::next_call(&mut rng, index, n);
        n += 1;
        let (method, params) = params(&planned);
        let started = Instant::now();
        let reply = match planned {
            Planned::GiveUp(after) => host.call(method, &params, Some(after)).await,
            Planned::Drop(after) => host.call_and_drop(method, &params, after).await,
            _ => host.call(method, &params, None).await,
        };
        seen.count(planned.kind(), started.elapsed(), check(&planned, reply));
    }
    seen
}

/// The hostile callers, one task each, until `end`.
async fn hostile(host: Arc<Host>, kind: Kind, burst: usize, mut rng: Rng, end: Instant) -> Seen {
    let mut seen = Seen::new();
    let mut serial = 0;
    while Instant::now() < end {
        serial += 1;
        let started = Instant::now();
        let verdict = match kind {
            Kind::Stalled => {
                let bytes = LARGEST_RESULT;
                let params = json!({"name": "big", "arguments": {"bytes": bytes}});
                let stall = Duration::from_millis(rng.range(1000, 4000));
                check(&Planned::Big(bytes), host.call_stalled("tools/call", &params, stall).await)
            }
            Kind::Storm => {
                let params = json!({"name": "slow", "arguments": {"ms": traffic::SLOW_NEVER_MS}});
                let verdict = match host.storm("tools/call", &params, burst).await {
                    Ok(()) => Verdict::Right,
                    Err(why) => Verdict::Lost(why),
                };
                tokio::time::sleep(Duration::from_millis(250)).await;
                verdict
            }
            _ => {
                let reply = host.call_oversize(SERVER_MAX_FRAME + 1024, serial, Duration::from_secs(5)).await;
                let verdict = match (&*host, reply) {
                    // The newline server cannot say which request it skipped.
                    (Host::Newline(_), Reply::GaveUp { cancellation_sent: true }) => Verdict::Right,
                    (Host::V2(_), Reply::Error(-32600)) => Verdict::Right,
                    (_, Reply::Failed(why)) => Verdict::Lost(why),
                    (_, reply) => Verdict::Wrong(format!("{:.200}", format!("{reply:?}"))),
                };
                tokio::time::sleep(Duration::from_millis(rng.range(500, 1500))).await;
                verdict
            }
        };
        seen.count(kind, started.elapsed(), verdict);
    }
    seen
}

/// One second's sample: seconds since the start, host and server RSS in KiB.
type Sample = (f64, u64, u64);

/// Samples both processes' `VmRSS` every second on a thread of its own
/// (so a busy runtime cannot skip a sample) until `stop`.
fn sampler(server_pid: u32, stop: Arc<AtomicBool>, samples: Arc<Mutex<Vec<Sample>>>) -> std::thread::JoinHandle<()> {
    let started = Instant::now();
    std::thread::spawn(move || {
        let pid = server_pid.to_string();
        while !stop.load(Ordering::Relaxed) {
            let host = proc_status_kib("self", "VmRSS").unwrap_or(0);
            let server = proc_status_kib(&pid, "VmRSS").unwrap_or(0);
            samples.lock().unwrap_or_else(PoisonError::into_inner).push((
                started.elapsed().as_secs_f64(),
                host,
                server,
            ));
            let next =
                Duration::from_secs(1).saturating_sub(Duration::from_nanos(started.elapsed().subsec_nanos().into()));
            std::thread::sleep(next);
        }
    })
}

fn mib(kib: f64) -> f64 {
    (kib / 1024.0 * 10.0).round() / 10.0
}

/// The RSS verdict of one process: its series (KiB), the growth bound and
/// the peak bound (MiB). Returns the JSON and the reasons it fails.
fn memory(
    name: &str,
    series: &[(f64, f64)],
    hwm_kib: Option<u64>,
    growth_mib: u64,
    room_bytes: u64,
) -> (Value, Vec<String>) {
    let values: Vec<f64> = series.iter().map(|(_, kib)| *kib).collect();
    let [first, middle, last] = stats::thirds(&values);
    let start = values.first().copied().unwrap_or(0.0);
    let peak = values.iter().copied().fold(0.0, f64::max).max(hwm_kib.unwrap_or(0) as f64);
    let tail = &series[series.len() / 3..];
    let slope_mib_per_min = stats::slope(tail) * 60.0 / 1024.0;
    let bound_kib = (start + room_bytes as f64 / 1024.0).round();
    let mut reasons = Vec::new();
    if values.len() < 6 {
        reasons.push(format!("{name}: {} RSS samples, too few for thirds (run at least 6 s)", values.len()));
    }
    if last - middle > (growth_mib * 1024) as f64 {
        reasons.push(format!(
            "{name}: RSS grew {:.1} MiB from the middle third to the last (bound {growth_mib} MiB)",
            mib(last - middle)
        ));
    }
    if peak > bound_kib {
        reasons.push(format!("{name}: peak RSS {:.1} MiB over its bound {:.1} MiB", mib(peak), mib(bound_kib)));
    }
    let json = json!({
        "start_mib": mib(start),
        "thirds_mib": [mib(first), mib(middle), mib(last)],
        "growth_mib": mib(last - middle),
        "slope_mib_per_min": (slope_mib_per_min * 100.0).round() / 100.0,
        "peak_mib": mib(peak),
        "hwm_mib": hwm_kib.map(|k| mib(k as f64)),
        "peak_bound_mib": mib(bound_kib),
    });
    (json, reasons)
}

/// The server's cancellation counters from its report line.
fn server_cancels(report: &Value) -> Value {
    json!({
        "cancels": report["cancels"],
        "cancelled_at_shutdown": report["cancelled_at_shutdown"],
        "handler_panics": report["handler_panics"],
        "tool_errors": report["tool_errors"],
        "oversize": report["oversize"],
        "overloaded": report["overloaded"],
        "v2_resets": report["v2"]["resets"],
        "v2_oversize_bodies": report["v2"]["oversize_bodies"],
        "v2_late_responses": report["v2"]["late_responses"],
        "replies_dropped": report["replies_dropped"],
    })
}

/// Runs the soak with the process's own arguments.
pub fn main() -> ExitCode {
    main_from(std::env::args_os())
}

/// Runs the soak with `argv` (the first item is the program name).
pub fn main_from(argv: impl IntoIterator<Item = impl Into<OsString> + Clone>) -> ExitCode {
    let options: Options = match crate::parse_args(argv) {
        Ok(options) => options,
        Err(code) => return code,
    };
    let (v2, runtime) = match options.v2().and_then(|v2| Ok((v2, options.runtime()?))) {
        Ok(pair) => pair,
        Err(why) => {
            eprintln!("soak: {why}");
            return ExitCode::from(2);
        }
    };
    // The watchdog: whatever happens, the process ends.
    let limit = Duration::from_secs(options.duration + 180);
    std::thread::spawn(move || {
        std::thread::sleep(limit);
        eprintln!("soak: the watchdog fired after {limit:?}; FAIL");
        std::process::exit(3);
    });
    match runtime.block_on(run(&options, v2)) {
        Ok(report) => {
            let pass = report["verdict"]["pass"] == json!(true);
            if let Some(path) = &options.json
                && let Err(e) = std::fs::write(path, format!("{report:#}\n"))
            {
                eprintln!("soak: cannot write {}: {e}", path.display());
                return ExitCode::FAILURE;
            }
            print_summary(&report);
            runtime.shutdown_background();
            if pass { ExitCode::SUCCESS } else { ExitCode::FAILURE }
        }
        Err(why) => {
            eprintln!("soak: {why}");
            ExitCode::from(2)
        }
    }
}

fn server_command(options: &Options, v2: bool) -> Result<tokio::process::Command, String> {
    let path = match &options.server {
        Some(path) => path.clone(),
        None => {
            std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?.with_file_name("soak_server")
        }
    };
    let mut command = tokio::process::Command::new(path);
    command.args(["--transport", if v2 { "stdio-v2" } else { "newline" }]);
    command.args(["--max-frame", &SERVER_MAX_FRAME.to_string()]);
    // Room for every caller and storm: the soak measures the transport, not admission.
    command.args(["--max-concurrent", &server_concurrency(options.callers).to_string(), "--max-queued", "1024"]);
    let flood = if options.no_hostile { 0 } else { options.stderr_flood };
    command.args(["--stderr-flood", &flood.to_string()]);
    if let Some(n) = options.server_threads {
        command.args(["--worker-threads", &n.to_string()]);
    }
    Ok(command)
}

async fn run(options: &Options, v2: bool) -> Result<Value, String> {
    let host = Arc::new(Host::spawn(v2, server_command(options, v2)?).await?);
    let pid = host.pid().await.ok_or("the server has no pid")?;
    let (stop, samples) = (Arc::new(AtomicBool::new(false)), Arc::new(Mutex::new(Vec::new())));
    let sampling = sampler(pid, Arc::clone(&stop), Arc::clone(&samples));

    let started = Instant::now();
    let end = started + Duration::from_secs(options.duration);
    let mut tasks = tokio::task::JoinSet::new();
    for index in 0..options.callers {
        tasks.spawn(caller(Arc::clone(&host), index, Rng::for_caller(options.seed, index), end));
    }
    if !options.no_hostile {
        for (i, kind) in [Kind::Stalled, Kind::Storm, Kind::Oversize].into_iter().enumerate() {
            if kind == Kind::Storm && options.storm == 0 {
                continue;
            }
            let rng = Rng::for_caller(options.seed, usize::MAX - i);
            tasks.spawn(hostile(Arc::clone(&host), kind, options.storm, rng, end));
        }
    }
    let mut seen = Seen::new();
    // Every call ends by the session's request timeout; past that, a caller
    // still running has lost an answer.
    let drain = tokio::time::sleep_until(
        (end + FIRST_ROUND_GRACE + transport::REQUEST_TIMEOUT + Duration::from_secs(10)).into(),
    );
    tokio::pin!(drain);
    let mut unfinished = 0;
    loop {
        tokio::select! {
            joined = tasks.join_next() => match joined {
                Some(Ok(part)) => seen.merge(part),
                Some(Err(e)) => { unfinished += 1; seen.examples.push(format!("a caller failed: {e}")); }
                None => break,
            },
            () = &mut drain => {
                unfinished += tasks.len();
                tasks.abort_all();
                break;
            }
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    // Let the last cancellations reach the server before its counters are read.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let host_counters = host.counters();
    let host = Arc::try_unwrap(host).map_err(|_| "a caller still holds the host")?;
    let hwm_server = proc_status_kib(&pid.to_string(), "VmHWM");
    stop.store(true, Ordering::Relaxed);
    let _ = sampling.join();
    let hwm_host = proc_status_kib("self", "VmHWM");
    let (exit_status, stderr_tail) = host.shutdown().await;
    let server_report = crate::report::last(&stderr_tail, crate::lib_server::report::REPORT).unwrap_or(Value::Null);

    let samples = samples.lock().unwrap_or_else(PoisonError::into_inner).clone();
    let host_series: Vec<(f64, f64)> = samples.iter().map(|(t, h, _)| (*t, *h as f64)).collect();
    let server_series: Vec<(f64, f64)> = samples.iter().map(|(t, _, s)| (*t, *s as f64)).collect();
    let (host_memory, mut reasons) =
        memory("host", &host_series, hwm_host, options.growth_mib, host_room(options.callers));
    let (server_memory, server_reasons) = memory(
        "server",
        &server_series,
        hwm_server,
        options.growth_mib,
        server_room(server_concurrency(options.callers) as u64),
    );
    reasons.extend(server_reasons);

    let mut kinds = serde_json::Map::new();
    let (mut calls, mut wrong, mut lost) = (0, 0, unfinished as u64);
    for kind in Kind::ALL {
        let tally = &seen.kinds[kind.index()];
        let h = &tally.latency;
        calls += h.count();
        wrong += tally.wrong;
        lost += tally.lost;
        if h.count() > 0 {
            kinds.insert(
                kind.name().into(),
                json!({"calls": h.count(), "wrong": tally.wrong, "lost": tally.lost,
                       "p50_us": h.quantile_us(0.5), "p99_us": h.quantile_us(0.99), "max_us": h.max_us()}),
            );
        }
    }
    if wrong > 0 {
        reasons.push(format!("{wrong} wrong answers"));
    }
    if lost > 0 {
        reasons.push(format!("{lost} lost answers ({unfinished} callers unfinished)"));
    }
    if server_report.is_null() {
        reasons.push("the server's report line is not in its stderr tail".into());
    }
    Ok(json!({
        "format": "mcp-framer soak",
        "version": 1,
        "transport": options.transport,
        "runtime": options.runtime,
        "threads": options.worker_threads(),
        "server_threads": options.server_threads,
        "callers": options.callers,
        "hostile": !options.no_hostile,
        "storm": if options.no_hostile { 0 } else { options.storm },
        "stderr_flood_kib_per_s": if options.no_hostile { 0 } else { options.stderr_flood },
        "seed": options.seed,
        "duration_s": options.duration,
        "elapsed_s": (elapsed * 10.0).round() / 10.0,
        "calls": calls,
        "calls_per_s": (calls as f64 / elapsed).round(),
        "wrong": wrong,
        "lost": lost,
        "kinds": kinds,
        "examples": seen.examples,
        "rss": {
            "source": "VmRSS of /proc/<pid>/status, every second; the host is the soak's own process",
            "samples": samples.iter().map(|(t, h, s)| json!([(t * 10.0).round() / 10.0, h, s])).collect::<Vec<_>>(),
            "host": host_memory,
            "server": server_memory,
        },
        "bounds": {
            "growth_mib": options.growth_mib,
            "growth": "median RSS of the last third minus the middle third's (the first third is warm-up)",
            "peak": "start + 3 × 4 MiB × (callers + 2) + 32 MiB",
        },
        "cancellation": {"host": host_counters, "server": server_cancels(&server_report)},
        "server_exit": exit_status.map(|s| s.to_string()),
        "server_report": server_report,
        "verdict": {"pass": reasons.is_empty(), "reasons": reasons},
    }))
}

fn print_summary(report: &Value) {
    println!(
        "soak: {} host, {} runtime ({} threads), {} callers{}, {} s: {} calls, {} calls/s; wrong {}, lost {}",
        report["transport"].as_str().unwrap_or("?"),
        report["runtime"].as_str().unwrap_or("?"),
        report["threads"],
        report["callers"],
        if report["hostile"] == json!(true) { " + hostile" } else { "" },
        report["elapsed_s"],
        report["calls"],
        report["calls_per_s"],
        report["wrong"],
        report["lost"],
    );
    println!(
        "{:<16}{:>10}{:>7}{:>6}{:>11}{:>11}{:>11}",
        "kind", "calls", "wrong", "lost", "p50 ms", "p99 ms", "max ms"
    );
    if let Some(kinds) = report["kinds"].as_object() {
        for (name, k) in kinds {
            let ms = |v: &Value| v.as_u64().unwrap_or(0) as f64 / 1000.0;
            let n = |v: &Value| v.as_u64().unwrap_or(0);
            println!(
                "{name:<16}{:>10}{:>7}{:>6}{:>11.2}{:>11.2}{:>11.2}",
                n(&k["calls"]),
                n(&k["wrong"]),
                n(&k["lost"]),
                ms(&k["p50_us"]),
                ms(&k["p99_us"]),
                ms(&k["max_us"])
            );
        }
    }
    for side in ["host", "server"] {
        let m = &report["rss"][side];
        println!(
            "{side} RSS MiB: start {}, thirds {} (growth {}), slope {} MiB/min, peak {} (bound {})",
            m["start_mib"],
            m["thirds_mib"],
            m["growth_mib"],
            m["slope_mib_per_min"],
            m["peak_mib"],
            m["peak_bound_mib"]
        );
    }
    println!("cancellation: {}", report["cancellation"]);
    let verdict = &report["verdict"];
    if verdict["pass"] == json!(true) {
        println!("PASS");
    } else {
        println!("FAIL: {}", verdict["reasons"]);
        for example in report["examples"].as_array().into_iter().flatten() {
            println!("  {}", example.as_str().unwrap_or_default());
        }
    }
}
