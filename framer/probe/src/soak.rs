//! `--soak DURATION` (the `soak` check): minutes of mixed traffic against
//! any server, using only what it offers, with the answers counted, the
//! latency per kind, and the server's memory over time.
//!
//! `--concurrency N` callers (default 8) share one session and loop, each
//! drawing its next call from a seeded plan:
//!
//! | kind | what | owed an answer |
//! |---|---|---|
//! | `liveness` | `ping` (legacy) or `server/discover` (modern) | yes |
//! | `tools-list` | `tools/list` (a result must carry `tools`) | yes |
//! | `unknown-tool` | `tools/call` of a tool it does not list (must be an error) | yes |
//! | `large` | the `--large` tool (only with `--large`) | yes |
//! | `slow` | the `--slow` tool, given up after 20 to 200 ms: the cancellation is sent (`notifications/cancelled`, or a reset stream on `stdio-v2`) | no |
//! | `dropped` | `liveness`, dropped 0 to 5 ms after its send (cancelled) | no |
//!
//! An owed call not answered within `--step-timeout` is **lost**; a result
//! of the wrong shape (a `tools/list` result without `tools`, an unknown
//! tool's call that succeeds) is **wrong**; an error is an answer.
//!
//! Every second the probe samples the resident memory of the server's
//! process tree (the server and its descendants: an `npx` or `uv run`
//! wrapper's child is counted; `VmRSS` of `/proc/<pid>/status`, Linux only:
//! elsewhere the soak says it did not measure memory).
//!
//! The verdict: FAIL on a lost or wrong answer, on the session ending
//! before the time is up, or when the median RSS of the last third of the
//! run exceeds the middle third's by more than `--soak-growth` (16 MiB; the
//! first third is warm-up). A run too short for six samples gives no
//! memory verdict, and says so.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use mcp_framer_stdio::host::{Received, RequestError, Session};
use mcp_framer_stdio_v2::host::{self as v2host, Call};
use serde_json::{Value, json};

use crate::check_id::CheckId;
use crate::duration::{fmt_duration, not_answered, within};
use crate::options::{Soak, Transport};
use crate::progress::Progress;
use crate::report::{CheckResult, Verdict};
use crate::stats::{Histogram, proc_status_kib, slope, thirds};
use crate::target::Target;
use crate::v2::V2Session;

/// A name no server lists: the `unknown-tool` calls.
const NO_SUCH_TOOL: &str = "mcp-probe-soak-no-such-tool";
/// Fewer RSS samples than this give no memory verdict.
const MIN_SAMPLES: usize = 6;
/// Examples of lost or wrong answers kept as evidence.
const EXAMPLES: usize = 5;

/// The kinds of call, in the report's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Liveness,
    ToolsList,
    UnknownTool,
    Large,
    Slow,
    Dropped,
}

impl Kind {
    const ALL: [Kind; 6] = [Kind::Liveness, Kind::ToolsList, Kind::UnknownTool, Kind::Large, Kind::Slow, Kind::Dropped];

    fn name(self) -> &'static str {
        match self {
            Kind::Liveness => "liveness",
            Kind::ToolsList => "tools-list",
            Kind::UnknownTool => "unknown-tool",
            Kind::Large => "large",
            Kind::Slow => "slow",
            Kind::Dropped => "dropped",
        }
    }

    /// Whether the protocol owes this call an answer.
    fn owed(self) -> bool {
        !matches!(self, Kind::Slow | Kind::Dropped)
    }
}

/// How one call ended.
#[derive(Debug)]
enum Reply {
    Result(Value),
    Error,
    GaveUp,
    Dropped,
    /// Not answered: the deadline, the session's end, a write error.
    Failed {
        reason: String,
        closed: bool,
    },
}

/// The session the callers share: the newline host or the `stdio-v2` host.
enum Conn {
    Newline(Session),
    V2(V2Session),
}

fn newline_reply(outcome: Result<Received, RequestError>) -> Reply {
    match outcome {
        Ok(received) => match received.payload().map(serde_json::from_str::<Value>) {
            Some(Ok(result)) => Reply::Result(result),
            Some(Err(e)) => Reply::Failed { reason: format!("the result does not parse: {e}"), closed: false },
            None => Reply::Failed { reason: "a response without a result".into(), closed: false },
        },
        Err(RequestError::Rpc { .. }) => Reply::Error,
        Err(RequestError::TimedOut { .. }) => Reply::GaveUp,
        Err(e @ RequestError::Closed(_)) => Reply::Failed { reason: e.to_string(), closed: true },
        Err(e) => Reply::Failed { reason: e.to_string(), closed: false },
    }
}

fn v2_reply(outcome: Result<v2host::Response, v2host::Error>) -> Reply {
    match outcome {
        Ok(response) => match serde_json::from_slice::<Value>(&response.message) {
            Ok(mut message) => match message.get_mut("result") {
                Some(result) => Reply::Result(result.take()),
                None => Reply::Error,
            },
            Err(e) => Reply::Failed { reason: format!("the response does not parse: {e}"), closed: false },
        },
        Err(v2host::Error::Rpc { .. }) => Reply::Error,
        Err(v2host::Error::TimedOut { .. }) => Reply::GaveUp,
        Err(e @ v2host::Error::Closed(_)) => Reply::Failed { reason: e.to_string(), closed: true },
        Err(e) => Reply::Failed { reason: e.to_string(), closed: false },
    }
}

impl Conn {
    fn params(&self, target: &Target, params: Value) -> Value {
        match self {
            Conn::Newline(_) => target.params(params),
            Conn::V2(session) => session.params(params),
        }
    }

    fn liveness(&self, target: &Target) -> (&'static str, Value) {
        match self {
            Conn::Newline(_) => target.liveness(),
            Conn::V2(session) => session.liveness(),
        }
    }

    /// Sends `method`; waits for its answer at most `wait` (then gives up
    /// on it: the cancellation is sent), or drops it after `drop_after`.
    async fn call(&self, method: &str, params: &Value, wait: Duration, drop_after: Option<Duration>) -> Reply {
        match self {
            Conn::Newline(session) => {
                let pending = match session.start(method, params).await {
                    Ok(pending) => pending,
                    Err(e) => return newline_reply(Err(e)),
                };
                if let Some(after) = drop_after {
                    tokio::time::sleep(after).await;
                    drop(pending);
                    return Reply::Dropped;
                }
                newline_reply(pending.with_timeout(wait).response().await)
            }
            Conn::V2(session) => {
                let call: Call = match session.client.call(method, params).await {
                    Ok(call) => call,
                    Err(e) => return v2_reply(Err(e)),
                };
                if let Some(after) = drop_after {
                    tokio::time::sleep(after).await;
                    drop(call);
                    return Reply::Dropped;
                }
                // Dropping the call at the deadline resets its stream.
                match tokio::time::timeout(wait, call.response()).await {
                    Ok(outcome) => v2_reply(outcome),
                    Err(_) => Reply::GaveUp,
                }
            }
        }
    }

    async fn pid(&self) -> Option<u32> {
        match self {
            Conn::Newline(session) => session.pid(),
            Conn::V2(session) => session.pid,
        }
    }
}

/// A kind's counts.
#[derive(Default)]
struct Tally {
    calls: u64,
    answered: u64,
    errors: u64,
    wrong: u64,
    lost: u64,
    gave_up: u64,
    dropped: u64,
    latency: Histogram,
}

/// What the callers share: the tallies, the first examples, and whether
/// the session ended.
struct Seen {
    tallies: Vec<Tally>,
    examples: Vec<String>,
    closed: Option<String>,
}

/// A small seeded generator (xorshift64*): a caller's plan is the same
/// from run to run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Every call the callers send, built once: each kind's method and
/// params, and its share of the traffic.
struct Plan {
    liveness: (&'static str, Value),
    tools_list: Value,
    unknown_tool: Value,
    large: Option<Value>,
    slow: Option<Value>,
    step: Duration,
    weights: Vec<(Kind, u64)>,
}

impl Plan {
    fn new(target: &Target, conn: &Conn) -> Plan {
        let tool = |name: &str, arguments: &Value| conn.params(target, json!({ "name": name, "arguments": arguments }));
        let large = target.options.large.as_ref().map(|t| tool(&t.name, &t.arguments));
        let slow = target.options.slow.as_ref().map(|t| tool(&t.name, &t.arguments));
        let mut weights = vec![(Kind::Liveness, 4), (Kind::ToolsList, 2), (Kind::UnknownTool, 1), (Kind::Dropped, 1)];
        if large.is_some() {
            weights.push((Kind::Large, 1));
        }
        if slow.is_some() {
            weights.push((Kind::Slow, 1));
        }
        Plan {
            liveness: conn.liveness(target),
            tools_list: conn.params(target, json!({})),
            unknown_tool: tool(NO_SUCH_TOOL, &json!({})),
            large,
            slow,
            step: target.limits.step_timeout,
            weights,
        }
    }

    fn draw(&self, rng: &mut Rng) -> Kind {
        let total: u64 = self.weights.iter().map(|(_, w)| w).sum();
        let mut pick = rng.below(total);
        for (kind, weight) in &self.weights {
            if pick < *weight {
                return *kind;
            }
            pick -= weight;
        }
        Kind::Liveness
    }
}

/// One call of `kind`, checked: what it counts as.
async fn one_call(plan: &Plan, conn: &Conn, kind: Kind, rng: &mut Rng, seen: &Mutex<Seen>) {
    let step = plan.step;
    let (method, params, wait, drop_after) = match kind {
        Kind::Liveness => (plan.liveness.0, &plan.liveness.1, step, None),
        Kind::ToolsList => ("tools/list", &plan.tools_list, step, None),
        Kind::UnknownTool => ("tools/call", &plan.unknown_tool, step, None),
        Kind::Large => ("tools/call", plan.large.as_ref().unwrap_or(&plan.unknown_tool), step, None),
        Kind::Slow => {
            let give_up = Duration::from_millis(20 + rng.below(181));
            ("tools/call", plan.slow.as_ref().unwrap_or(&plan.unknown_tool), give_up, None)
        }
        Kind::Dropped => (plan.liveness.0, &plan.liveness.1, step, Some(Duration::from_millis(rng.below(6)))),
    };
    let started = Instant::now();
    let reply = conn.call(method, params, wait, drop_after).await;
    let took = started.elapsed();
    let mut seen = seen.lock().unwrap_or_else(PoisonError::into_inner);
    let Seen { tallies, examples, closed } = &mut *seen;
    let tally = &mut tallies[Kind::ALL.iter().position(|k| *k == kind).unwrap_or(0)];
    tally.calls += 1;
    let mut example = |text: String| {
        if examples.len() < EXAMPLES {
            examples.push(text);
        }
    };
    match reply {
        Reply::Result(result) => {
            tally.answered += 1;
            tally.latency.record(took);
            let is_error = result.get("isError") == Some(&Value::Bool(true));
            let wrong = match kind {
                Kind::ToolsList => (!result.get("tools").is_some_and(Value::is_array))
                    .then(|| "a tools/list result without a tools array".to_owned()),
                Kind::UnknownTool => {
                    (!is_error).then(|| format!("a call of {NO_SUCH_TOOL:?}, which it does not list, succeeded"))
                }
                _ => None,
            };
            if is_error {
                tally.errors += 1;
            }
            if let Some(why) = wrong {
                tally.wrong += 1;
                example(format!("wrong ({}): {why}", kind.name()));
            }
        }
        Reply::Error => {
            tally.answered += 1;
            tally.errors += 1;
            tally.latency.record(took);
        }
        Reply::GaveUp if kind.owed() => {
            tally.lost += 1;
            example(format!("lost ({}): {}", kind.name(), not_answered(method, wait)));
        }
        Reply::GaveUp => tally.gave_up += 1,
        Reply::Dropped => tally.dropped += 1,
        Reply::Failed { reason, closed: ended } => {
            tally.lost += 1;
            example(format!("lost ({}): {method}: {reason}", kind.name()));
            if ended && closed.is_none() {
                *closed = Some(reason);
            }
        }
    }
}

/// The resident memory of `pid` and its descendants, in KiB, and how many
/// processes that is; `None` where `/proc` cannot be read.
fn tree_rss_kib(pid: u32) -> Option<(u64, usize)> {
    let mut total = proc_status_kib(&pid.to_string(), "VmRSS")?;
    let children = crate::processes::descendants(pid);
    for child in &children {
        total += proc_status_kib(&child.pid.to_string(), "VmRSS").unwrap_or(0);
    }
    Some((total, children.len() + 1))
}

fn ms(us: u64) -> f64 {
    (us as f64 / 10.0).round() / 100.0
}

fn mib(kib: f64) -> f64 {
    (kib / 1024.0 * 10.0).round() / 10.0
}

/// The check's deadline: the traffic, the last calls' answers, the start
/// and the end.
pub(crate) fn deadline(target: &Target, soak: Soak) -> Duration {
    let limits = &target.limits;
    soak.duration + limits.step_timeout * 2 + limits.init_timeout + limits.exit_timeout + Duration::from_secs(10)
}

/// Runs the soak over `--transport`'s host and fills in `result`.
pub(crate) async fn run(target: &Target, soak: Soak, progress: &Progress, result: &mut CheckResult) {
    progress.step("the handshake");
    let conn = match target.options.transport {
        Transport::Stdio => match target.start(target.session_config()).await {
            Ok(started) => {
                let mut inbound = started.inbound;
                // Server notifications and requests are not the soak's to
                // answer: drained, so the session's queue never fills.
                tokio::spawn(async move { while inbound.recv().await.is_some() {} });
                Conn::Newline(started.session)
            }
            Err(e) => return result.note(Verdict::Fail, format!("no session to soak: {e}")),
        },
        Transport::StdioV2 => match crate::v2::open(target).await {
            Ok(session) => Conn::V2(session),
            Err(e) => return result.note(Verdict::Fail, format!("no session to soak: {e}")),
        },
    };
    let conn = Arc::new(conn);
    let pid = conn.pid().await;
    let plan = Arc::new(Plan::new(target, &conn));
    progress.step(format!(
        "{} of traffic, {} callers ({})",
        fmt_duration(soak.duration),
        soak.concurrency,
        plan.weights.iter().map(|(k, _)| k.name()).collect::<Vec<_>>().join(", ")
    ));
    let seen = Arc::new(Mutex::new(Seen {
        tallies: Kind::ALL.iter().map(|_| Tally::default()).collect(),
        examples: Vec::new(),
        closed: None,
    }));
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let ends = started + soak.duration;
    let mut callers = tokio::task::JoinSet::new();
    for caller in 0..soak.concurrency.max(1) {
        let (conn, seen, stop, plan) = (conn.clone(), seen.clone(), stop.clone(), plan.clone());
        callers.spawn(async move {
            let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (caller as u64 + 1).wrapping_mul(0xbf58_476d_1ce4_e5b9));
            while Instant::now() < ends && !stop.load(Ordering::Relaxed) {
                let kind = plan.draw(&mut rng);
                one_call(&plan, &conn, kind, &mut rng, &seen).await;
                if seen.lock().unwrap_or_else(PoisonError::into_inner).closed.is_some() {
                    stop.store(true, Ordering::Relaxed);
                }
            }
        });
    }
    // One RSS sample a second while the callers run.
    let mut samples: Vec<(f64, f64)> = Vec::new();
    let mut processes = 0;
    let mut measured = pid.is_some();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            joined = callers.join_next() => if joined.is_none() { break },
            _ = tick.tick() => {
                if let Some((kib, n)) = pid.and_then(tree_rss_kib) {
                    samples.push((started.elapsed().as_secs_f64(), kib as f64));
                    processes = processes.max(n);
                } else if Instant::now() < ends {
                    measured = measured && !samples.is_empty();
                }
            }
        }
    }
    let elapsed = started.elapsed();
    let seen = std::mem::replace(
        &mut *seen.lock().unwrap_or_else(PoisonError::into_inner),
        Seen { tallies: Vec::new(), examples: Vec::new(), closed: None },
    );
    verdict(target, soak, elapsed, &seen, &samples, processes, measured, result);
    if let Ok(Conn::V2(session)) = Arc::try_unwrap(conn) {
        session.end(target).await;
    }
}

#[allow(clippy::too_many_arguments)]
fn verdict(
    target: &Target,
    soak: Soak,
    elapsed: Duration,
    seen: &Seen,
    samples: &[(f64, f64)],
    processes: usize,
    measured: bool,
    result: &mut CheckResult,
) {
    let calls: u64 = seen.tallies.iter().map(|t| t.calls).sum();
    let lost: u64 = seen.tallies.iter().map(|t| t.lost).sum();
    let wrong: u64 = seen.tallies.iter().map(|t| t.wrong).sum();
    let per_second = calls as f64 / elapsed.as_secs_f64().max(1e-3);
    result.measure("soak_duration_s", (elapsed.as_secs_f64() * 10.0).round() / 10.0);
    result.measure("concurrency", soak.concurrency);
    result.measure("calls", calls);
    result.measure("calls_per_second", (per_second * 10.0).round() / 10.0);
    result.measure("lost", lost);
    result.measure("wrong", wrong);
    let mut kinds = serde_json::Map::new();
    for (kind, t) in Kind::ALL.iter().zip(&seen.tallies) {
        if t.calls == 0 {
            continue;
        }
        kinds.insert(
            kind.name().to_owned(),
            json!({
                "calls": t.calls, "answered": t.answered, "errors": t.errors, "wrong": t.wrong, "lost": t.lost,
                "gave_up": t.gave_up, "dropped": t.dropped,
                "p50_ms": ms(t.latency.quantile_us(0.5)), "p99_ms": ms(t.latency.quantile_us(0.99)),
                "max_ms": ms(t.latency.max_us()),
            }),
        );
        if t.answered > 0 {
            result.info(format!(
                "{}: {} calls, {} answered ({} errors), {} given up, {} dropped, {} lost; latency p50 {} ms, p99 {} ms, max {} ms",
                kind.name(),
                t.calls,
                t.answered,
                t.errors,
                t.gave_up,
                t.dropped,
                t.lost,
                ms(t.latency.quantile_us(0.5)),
                ms(t.latency.quantile_us(0.99)),
                ms(t.latency.max_us())
            ));
        } else {
            result.info(format!(
                "{}: {} calls, {} given up, {} dropped, {} lost",
                kind.name(),
                t.calls,
                t.gave_up,
                t.dropped,
                t.lost
            ));
        }
    }
    result.measure("kinds", Value::Object(kinds));
    result.info(format!(
        "{calls} calls in {} by {} callers ({per_second:.0} a second)",
        fmt_duration(elapsed),
        soak.concurrency
    ));
    if let Some(reason) = &seen.closed {
        result.note(Verdict::Fail, format!("the session ended during the soak: {reason}"));
    }
    if lost > 0 {
        result.note(Verdict::Fail, format!("{lost} owed answers lost (not answered within --step-timeout, or never)"));
    }
    if wrong > 0 {
        result.note(Verdict::Fail, format!("{wrong} answers of the wrong shape"));
    }
    for example in &seen.examples {
        result.info(example.clone());
    }
    memory(target, samples, processes, measured, result);
}

/// The memory verdict: the last third's median within `--soak-growth` of
/// the middle third's.
fn memory(target: &Target, samples: &[(f64, f64)], processes: usize, measured: bool, result: &mut CheckResult) {
    let bound_kib = (target.limits.soak_growth / 1024) as f64;
    if !measured || samples.is_empty() {
        result.info("memory not measured: no /proc/<pid>/status for the server here (Linux only)");
        return;
    }
    let values: Vec<f64> = samples.iter().map(|(_, kib)| *kib).collect();
    let peak = values.iter().copied().fold(0.0, f64::max);
    result.measure("rss_samples_kib", values.iter().map(|v| *v as u64).collect::<Vec<_>>());
    result.measure("rss_peak_mib", mib(peak));
    result.measure("rss_processes", processes);
    if values.len() < MIN_SAMPLES {
        result.info(format!(
            "memory: {} RSS samples, too few for thirds (soak at least {MIN_SAMPLES} s); peak {} MiB",
            values.len(),
            mib(peak)
        ));
        return;
    }
    let [first, middle, last] = thirds(&values);
    let tail = &samples[samples.len() / 3..];
    let per_minute = slope(tail) * 60.0;
    result.measure("rss_thirds_mib", json!([mib(first), mib(middle), mib(last)]));
    result.measure("rss_slope_mib_per_min", mib(per_minute));
    result.measure("rss_growth_bound_mib", mib(bound_kib));
    let line = format!(
        "RSS of the server's tree ({processes} process{}): medians by third {} / {} / {} MiB, slope {} MiB/min over the last two thirds, peak {} MiB",
        if processes == 1 { "" } else { "es" },
        mib(first),
        mib(middle),
        mib(last),
        mib(per_minute),
        mib(peak)
    );
    if last - middle > bound_kib {
        result.note(
            Verdict::Fail,
            format!(
                "{line}: the last third grew {} MiB over the middle one (bound --soak-growth {} MiB)",
                mib(last - middle),
                mib(bound_kib)
            ),
        );
    } else {
        result.info(format!("{line}: within {} MiB of the middle third", mib(bound_kib)));
    }
}

/// The soak check, after `checks` (the transport's list): `None` without
/// `--soak`; SKIP when not selected, or when the `stdio-v2` selection check
/// found no session. Runs under its own deadline ([`deadline`], not
/// `--check-timeout`).
pub(crate) async fn check(target: &Target, checks: &[CheckResult]) -> Option<CheckResult> {
    let soak = target.options.soak?;
    let id = CheckId::Soak;
    let number = checks.len() as u8 + 1;
    let mut result = CheckResult::new(number, id.name(), id.title(), id.why());
    if !target.options.selected(id) {
        result.skip("not selected (--only / --skip)");
        return Some(result);
    }
    let selection = checks.iter().find(|c| c.name == CheckId::Selection.name());
    if selection.is_some_and(|c| c.verdict == Verdict::Fail) {
        result.skip("no stdio-v2 session: see the selection check");
        return Some(result);
    }
    let progress = Progress::new(1, target.options.quiet);
    progress.start(0, id);
    let started = Instant::now();
    let limit = deadline(target, soak);
    if tokio::time::timeout(limit, run(target, soak, &progress, &mut result)).await.is_err() {
        result.note(Verdict::Fail, format!("the soak did not finish {}", within(limit)));
    }
    result.duration_ms = started.elapsed().as_millis() as u64;
    target.kill_trees();
    progress.done(&result);
    progress.finish();
    Some(result)
}
