//! Check 4: requests padded to growing sizes (doubling from
//! `--min-request` to `--max-request`, then bisecting around the first
//! failure): the largest one answered, what the first larger one got, and
//! whether the server still answers its liveness request (`ping`, or
//! `server/discover` in the modern era) afterwards.
//!
//! Each request is waited for as long as the growth of the answer times so
//! far allows ([`Growth`]: the time it should take, extrapolated, with a
//! wide margin), at least `--step-timeout` and at most [`MAX_PATIENCE`]
//! times it, so a slow machine slows the wait with the answers. A server
//! still alive that gives nothing within that wait is deaf (FAIL, and the
//! limit is bisected); one whose allowed time is over the cap is slow
//! (WARN, limit unknown).

use std::time::Duration;

use mcp_framer_jsonrpc::Kind;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::duration::fmt_duration;
use crate::progress::Progress;
use crate::raw::{RawConn, RawEvent, WriteFailure};
use crate::report::{CheckResult, Verdict};
use crate::target::Target;

/// What a padded request got.
#[derive(Debug)]
enum Outcome {
    Answered,
    ErrorReply {
        code: Option<i64>,
        message: String,
        id_null: bool,
    },
    /// No answer within the wait, the request written.
    Silence(Duration),
    Exited(String),
    /// The request not taken within the wait.
    WriteStalled(Duration),
}

impl Outcome {
    fn describe(&self) -> String {
        match self {
            Outcome::Answered => "answered".into(),
            Outcome::ErrorReply { code, message, id_null } => format!(
                "an error reply {}{}: {message:?}",
                code.map_or("without a code".into(), |c| c.to_string()),
                if *id_null { " (id null)" } else { "" }
            ),
            Outcome::Silence(waited) => format!("silence for {}", fmt_duration(*waited)),
            Outcome::Exited(how) => format!("the process exiting ({how})"),
            Outcome::WriteStalled(waited) => {
                format!("a write the server did not take within {} (it stopped reading)", fmt_duration(*waited))
            }
        }
    }

    fn is_error_reply(&self) -> bool {
        matches!(self, Outcome::ErrorReply { .. })
    }
}

/// A liveness request frame of about `size` bytes.
fn padded(conn: &RawConn, id: i64, size: usize) -> Vec<u8> {
    let empty = conn.liveness_frame(id, 1);
    conn.liveness_frame(id, size.saturating_sub(empty.len() - 2).max(1))
}

/// How the server ended, waiting a little for it to be reaped.
async fn exit_of(conn: &mut RawConn) -> Option<String> {
    let deadline = Instant::now() + Duration::from_millis(500);
    loop {
        if let Some(status) = conn.exit_status() {
            return Some(status.to_string());
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// What one attempt got, and how long the answer took (from the start of
/// the write): the write may take `wait`, and so may the answer after it.
async fn attempt(conn: &mut RawConn, size: usize, baseline: Option<i64>, wait: Duration) -> (Outcome, Duration) {
    let started = Instant::now();
    let id = conn.next_id();
    match conn.write(&padded(conn, id, size), wait).await {
        Ok(()) => {}
        Err(WriteFailure::Closed) => {
            let how = exit_of(conn).await.unwrap_or("stdin closed".into());
            return (Outcome::Exited(how), started.elapsed());
        }
        Err(WriteFailure::Stalled) => return (Outcome::WriteStalled(wait), started.elapsed()),
    }
    let deadline = Instant::now() + wait;
    let answer = conn
        .wait_for(deadline, |e| match e {
            RawEvent::Message(m) => m.answers(id) || (m.kind == Kind::ErrorResponse && m.id.is_none()),
            RawEvent::Eof => true,
            _ => false,
        })
        .await;
    let took = started.elapsed();
    let outcome = match answer {
        Some(RawEvent::Message(m)) if m.kind == Kind::Response => Outcome::Answered,
        // The same error the smallest request got: the server read it.
        Some(RawEvent::Message(m)) if m.id.is_some() && baseline.is_some() && m.error_code() == baseline => {
            Outcome::Answered
        }
        Some(RawEvent::Message(m)) => {
            let error: Value = m.payload.as_deref().and_then(|p| serde_json::from_str(p).ok()).unwrap_or(Value::Null);
            let message = error.get("message").and_then(Value::as_str).unwrap_or("").chars().take(160).collect();
            Outcome::ErrorReply { code: m.error_code(), message, id_null: m.id.is_none() }
        }
        _ => match exit_of(conn).await {
            Some(status) => Outcome::Exited(status),
            None => Outcome::Silence(wait),
        },
    };
    (outcome, took)
}

async fn start(target: &Target) -> Result<RawConn, String> {
    super::raw_session(target, "request-size").await
}

/// `1024 B 0 ms, 2048 B 1 ms, ...`
pub(crate) fn latencies(list: &[(usize, Duration)]) -> String {
    list.iter().map(|(size, took)| format!("{size} B {}", fmt_duration(*took))).collect::<Vec<_>>().join(", ")
}

/// Whether the answer times grow clearly faster than the sizes: the time
/// per byte of the largest request (at least a second) is four times or
/// more that of the first request that took 20 ms or more — a reader that
/// re-copies or re-scans its whole buffer on every read. (Linear readers
/// on a loaded machine stay well under that; a quadratic one over 16× the
/// size is at 16×.)
pub(crate) fn superlinear(list: &[(usize, Duration)]) -> bool {
    let per_byte = |(size, took): &(usize, Duration)| took.as_secs_f64() / *size as f64;
    let (Some(reference), Some(largest)) = (list.iter().find(|(_, t)| *t >= Duration::from_millis(20)), list.last())
    else {
        return false;
    };
    largest.1 >= Duration::from_secs(1)
        && largest.0 >= 4 * reference.0
        && per_byte(largest) >= 4.0 * per_byte(reference)
}

/// How many times the extrapolated time a request may take before its
/// silence counts as deafness: a server whose times steepen by about 1.6
/// more doublings than measured still counts as slow.
const MARGIN: f64 = 3.0;

/// Added to every patience: a fresh process's first large read, a loaded
/// machine.
const SLACK: Duration = Duration::from_secs(2);

/// How the answer times grew, and what that predicts for a larger request.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Growth {
    /// The time factor per doubling of the size, between the two largest
    /// answers: from 2 (linear) to 8 (cubic); a steeper or flatter
    /// measurement is clamped, noise being likelier than either.
    per_doubling: f64,
    /// The largest answered size and its time, the base of the prediction.
    base: (usize, Duration),
    /// The predicted time of the request asked about.
    expected: Duration,
    /// How long it may take before it is deaf: `expected` × [`MARGIN`] +
    /// [`SLACK`].
    pub(crate) patience: Duration,
}

impl Growth {
    /// The prediction for a request of `size` bytes from the answers so
    /// far (`(size, time)`, sizes growing); `None` with fewer than two
    /// distinct sizes. Times under 1 ms count as 1 ms.
    pub(crate) fn predict(answered: &[(usize, Duration)], size: usize) -> Option<Growth> {
        let mut by_size: Vec<(usize, Duration)> = answered.to_vec();
        by_size.sort_by_key(|(s, _)| *s);
        by_size.dedup_by_key(|(s, _)| *s);
        let [.., (s1, t1), (s2, t2)] = by_size[..] else { return None };
        let floor = |t: Duration| t.max(Duration::from_millis(1)).as_secs_f64();
        let exponent = ((floor(t2) / floor(t1)).ln() / (s2 as f64 / s1 as f64).ln()).clamp(1.0, 3.0);
        let expected = floor(t2) * (size as f64 / s2 as f64).max(1.0).powf(exponent);
        let patience = Duration::from_secs_f64(expected * MARGIN) + SLACK;
        Some(Growth {
            per_doubling: 2f64.powf(exponent),
            base: (s2, t2),
            expected: Duration::from_secs_f64(expected),
            patience,
        })
    }

    /// `its answers grew 3.3× per doubling (8388608 B in 665 ms): about
    /// 2.21 s expected for 16777216 B, 8.63 s allowed`
    pub(crate) fn describe(&self, size: usize) -> String {
        format!(
            "its answers grew {:.1}× per doubling ({} B in {}): about {} expected for {size} B, {} allowed",
            self.per_doubling,
            self.base.0,
            fmt_duration(self.base.1),
            fmt_duration(self.expected),
            fmt_duration(self.patience)
        )
    }
}

/// The most a doubling step waits, in `--step-timeout`s, however slowly
/// the answers so far grew: past it, silence is reported as slow, not
/// judged deaf.
const MAX_PATIENCE: u32 = 4;

/// How long a doubling step waits for a request of `size` bytes: as long as
/// the growth so far allows, at least `--step-timeout` and at most
/// [`MAX_PATIENCE`] times it. Measured on the same machine as the answers,
/// the wait scales with the machine's load as they do.
pub(crate) fn doubling_wait(limits: &crate::options::Limits, answered: &[(usize, Duration)], size: usize) -> Duration {
    let most = limits.step_timeout.saturating_mul(MAX_PATIENCE);
    Growth::predict(answered, size).map_or(limits.step_timeout, |g| g.patience.clamp(limits.step_timeout, most))
}

/// How long a request of `size` bytes is waited for: `--step-timeout`, or
/// less where the growth so far says it is due sooner.
pub(crate) fn wait_for(limits: &crate::options::Limits, answered: &[(usize, Duration)], size: usize) -> Duration {
    Growth::predict(answered, size).map_or(limits.step_timeout, |g| g.patience.min(limits.step_timeout))
}

/// After a write that did not finish, the connection is poisoned (the next
/// request would be glued to the unfinished line): a fresh server answers
/// the next step.
async fn fresh(target: &Target, conn: RawConn) -> Result<RawConn, String> {
    target.account_raw("request-size", &conn);
    drop(conn);
    target.kill_trees();
    start(target).await
}

pub(super) async fn run(target: &Target, progress: &Progress, result: &mut CheckResult) {
    let limits = &target.limits;
    let mut conn = match start(target).await {
        Ok(conn) => conn,
        Err(e) => return result.note(Verdict::Fail, e),
    };
    let mut size = limits.min_request.max(128);
    let mut largest = None;
    let mut failure = None;
    let mut answered: Vec<(usize, Duration)> = Vec::new();
    let mut baseline = None;
    while size <= limits.max_request {
        progress.step(format!("request of {size} bytes"));
        let wait = doubling_wait(limits, &answered, size);
        let (outcome, took) = attempt(&mut conn, size, baseline, wait).await;
        if let (true, Outcome::ErrorReply { code, id_null: false, .. }) =
            (answered.is_empty() && largest.is_none(), &outcome)
            && size == limits.min_request.max(128)
        {
            // The smallest request's error is the server's answer to the
            // liveness request itself: later ones are judged against it.
            baseline = *code;
            largest = Some(size);
            answered.push((size, took));
            size = size.saturating_mul(2).min(limits.max_request);
            continue;
        }
        if matches!(outcome, Outcome::Answered) {
            largest = Some(size);
            answered.push((size, took));
            if size == limits.max_request {
                break;
            }
            size = size.saturating_mul(2).min(limits.max_request);
        } else {
            failure = Some((size, outcome));
            break;
        }
    }
    result.measure(
        "latency_ms",
        json!(
            answered
                .iter()
                .map(|(size, took)| json!({"bytes": size, "ms": took.as_millis() as u64}))
                .collect::<Vec<_>>()
        ),
    );
    if !answered.is_empty() {
        result.info(format!("answer times (reported apart from the limit): {}", latencies(&answered)));
    }
    if superlinear(&answered) {
        result.behaviour("slow-large-request");
        result.info("the answer time grows faster than the request size: the server reads large requests slowly");
    }
    let Some((failed_size, outcome)) = failure else {
        result.measure("largest_answered", largest.unwrap_or(0) as u64);
        result.measure("first_failed", Value::Null);
        result.info(format!(
            "every request up to --max-request ({} bytes) was answered (raise --max-request to look higher)",
            limits.max_request
        ));
        return target.account_raw("request-size", &conn);
    };
    let method = conn.liveness_method();
    // Nothing within the wait from a server still alive: deaf if the growth
    // of its answer times says the answer was due well before, else slow.
    let growth = Growth::predict(&answered, failed_size);
    let waited = match outcome {
        Outcome::WriteStalled(waited) | Outcome::Silence(waited) if conn.exit_status().is_none() => Some(waited),
        _ => None,
    };
    // A newline server reads its stdin in order: a liveness request written
    // after a silent one, answered while that one still is not, shows that
    // the server read past it and dropped it, however slow its growth.
    let mut next = None;
    if let (Some(_), Outcome::Silence(_)) = (waited, &outcome) {
        progress.step("the next request after the silence");
        let seen = conn.log.len();
        let ping = conn.ping(limits.ping_timeout).await;
        let answers = conn.log[seen..]
            .iter()
            .filter(|e| matches!(e, RawEvent::Message(m) if matches!(m.kind, Kind::Response | Kind::ErrorResponse)))
            .count();
        next = Some((ping, answers));
    }
    let read_past = match &next {
        Some((Ok(took), 1)) => Some(*took),
        _ => None,
    };
    if let Some(waited) = waited
        && read_past.is_none()
        && growth.is_none_or(|g| g.patience > waited)
    {
        return slow(target, conn, result, failed_size, &outcome, largest.unwrap_or(0), growth).await;
    }
    result.info(format!("the first failure: a request of {failed_size} bytes got {}", outcome.describe()));
    match (read_past, waited, growth) {
        (Some(took), _, _) => result.info(format!(
            "dropped, not slow: the {method} written after it was answered in {} while it still was not",
            fmt_duration(took)
        )),
        (None, Some(_), Some(growth)) => result.info(format!("deaf, not slow: {}", growth.describe(failed_size))),
        _ => {}
    }
    let after = match (&outcome, next) {
        (Outcome::Exited(_), _) => Err("the process had exited".to_owned()),
        // The unfinished request still fills its stdin: nothing can be asked.
        (Outcome::WriteStalled(_), _) => Err("not asked (the unfinished request fills its stdin)".to_owned()),
        (_, Some((ping, _))) => ping.map(|_| ()),
        _ => {
            progress.step("the next request after the failure");
            conn.ping(limits.ping_timeout).await.map(|_| ())
        }
    };
    match (&outcome, &after) {
        (Outcome::ErrorReply { .. }, Ok(())) => result
            .info(format!("the next request was answered within {} afterwards", fmt_duration(limits.ping_timeout))),
        (Outcome::ErrorReply { .. }, Err(e)) => {
            result.note(Verdict::Fail, format!("the server went deaf after its error reply: {method}: {e}"))
        }
        (Outcome::Exited(how), _) => result.note(
            Verdict::Fail,
            format!("the server exited on a request of {failed_size} bytes ({how}): every pending request is lost"),
        ),
        (Outcome::WriteStalled(waited), _) => result.note(
            Verdict::Fail,
            format!(
                "the server stayed alive but went deaf: a request of {failed_size} bytes was not taken within {} \
                 (it stopped reading its stdin); every later request waits out its timeout",
                fmt_duration(*waited)
            ),
        ),
        (_, Ok(())) => result.note(
            Verdict::Fail,
            format!("the request of {failed_size} bytes got {}: its caller waits out its timeout", outcome.describe()),
        ),
        (_, Err(e)) => result.note(
            Verdict::Fail,
            format!(
                "the server went deaf after a request of {failed_size} bytes ({}); {method}: {e}",
                outcome.describe()
            ),
        ),
    }
    target.account_raw("request-size", &conn);
    conn.log.clear();
    let usable = outcome.is_error_reply() && after.is_ok();
    let mut current = if usable { Some(conn) } else { None };

    // Bisect between the largest answered and the first failed size. After
    // a failure that leaves the server unusable, each step needs a fresh
    // server. Each step waits as long as the growth so far allows (at most
    // --step-timeout); a write still stalled then from a live server is a
    // deaf one.
    let mut lo = largest.unwrap_or(0);
    let mut hi = failed_size;
    for _ in 0..limits.bisect_steps {
        if hi - lo <= 64 {
            break;
        }
        let mid = lo + (hi - lo) / 2;
        progress.step(format!("bisecting: request of {mid} bytes"));
        let mut conn = match current.take() {
            Some(conn) => conn,
            None => {
                target.kill_trees();
                match start(target).await {
                    Ok(conn) => conn,
                    Err(e) => {
                        result.note(Verdict::Warn, format!("bisection stopped: {e}"));
                        break;
                    }
                }
            }
        };
        let wait = wait_for(limits, &answered, mid);
        let (outcome, took) = attempt(&mut conn, mid, baseline, wait).await;
        target.account_raw("request-size", &conn);
        conn.log.clear();
        match outcome {
            Outcome::Answered => {
                lo = mid;
                answered.push((mid, took));
                current = Some(conn);
            }
            Outcome::WriteStalled(waited)
                if conn.exit_status().is_some()
                    || Growth::predict(&answered, mid).is_none_or(|g| g.patience > waited) =>
            {
                result.info(format!(
                    "bisection stopped: a request of {mid} bytes was not taken within --step-timeout {}",
                    fmt_duration(waited)
                ));
                break;
            }
            outcome => {
                hi = mid;
                if outcome.is_error_reply() {
                    current = Some(conn);
                }
            }
        }
    }
    result.measure("largest_answered", lo as u64);
    result.measure("first_failed", hi as u64);
    result.measure("failure", outcome.describe());
    result.info(format!("largest request answered: {lo} bytes; smallest failing: {hi} bytes (after bisection)"));
    if (10 << 20..=11 << 20).contains(&hi) && lo >= 10_000_000 {
        match outcome {
            Outcome::Exited(_) => result.behaviour("exits-over-10mib"),
            Outcome::WriteStalled(_) | Outcome::Silence(_) => result.behaviour("deaf-over-10mib"),
            _ => {}
        }
    }
    if usable {
        result.info(format!("the server's request limit is between {lo} and {hi} bytes, and it says so with an error"));
    }
}

/// A request that got nothing within its wait (at most [`MAX_PATIENCE`]
/// `--step-timeout`s) from a live server whose growth does not say it is
/// deaf (or that answered too few requests to tell): WARN, the limit
/// unknown. After a stalled write the connection
/// is poisoned, so a fresh server shows whether the server answers at all.
async fn slow(
    target: &Target,
    conn: RawConn,
    result: &mut CheckResult,
    failed_size: usize,
    outcome: &Outcome,
    largest: usize,
    growth: Option<Growth>,
) {
    let limits = &target.limits;
    let waited = match outcome {
        Outcome::Silence(waited) | Outcome::WriteStalled(waited) => *waited,
        _ => limits.step_timeout,
    };
    result.behaviour("slow-large-request");
    result.measure("largest_answered", largest as u64);
    result.measure("first_failed", Value::Null);
    result.measure("stalled_at", failed_size as u64);
    match growth {
        Some(growth) => result.info(format!("slow, not deaf: {}", growth.describe(failed_size))),
        None => result.info("too few answers to tell a slow server from a deaf one by their growth"),
    }
    if matches!(outcome, Outcome::Silence(_)) {
        target.account_raw("request-size", &conn);
        return result.note(
            Verdict::Warn,
            format!(
                "a request of {failed_size} bytes got no answer within {}: the server is slow (or stuck). Its \
                 limit above {largest} bytes is unknown: raise --step-timeout to measure it",
                fmt_duration(waited)
            ),
        );
    }
    let fresh = fresh(target, conn).await;
    let alive = match fresh {
        Ok(mut conn) => {
            let ping = conn.ping(limits.ping_timeout).await;
            target.account_raw("request-size", &conn);
            ping
        }
        Err(e) => Err(e),
    };
    match alive {
        Ok(_) => result.note(
            Verdict::Warn,
            format!(
                "a request of {failed_size} bytes was not taken within {}: the server reads slowly (or stopped \
                 reading); a fresh server answered at once. Its limit above {largest} bytes is unknown: raise \
                 --step-timeout to measure it",
                fmt_duration(waited)
            ),
        ),
        Err(e) => result.note(
            Verdict::Fail,
            format!("a request of {failed_size} bytes was not taken, and a fresh server did not answer either: {e}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_growth_so_far_predicts_the_next_answer_with_a_margin() {
        let ms = Duration::from_millis;
        let mib = 1 << 20;
        // desktop-commander 0.2.52: 3.3× per doubling; 16 MiB due in about
        // 2.2 s, so 10 s of silence is deafness.
        let measured = [(2 * mib, ms(60)), (4 * mib, ms(200)), (8 * mib, ms(665))];
        let growth = Growth::predict(&measured, 16 * mib).expect("two answers");
        assert!((growth.per_doubling - 3.325).abs() < 0.01, "{growth:?}");
        assert!((2200..2230).contains(&growth.expected.as_millis()), "{growth:?}");
        assert!(growth.patience < Duration::from_secs(10), "{growth:?}");
        assert!(growth.describe(16 * mib).starts_with("its answers grew 3.3× per doubling (8388608 B in 665 ms)"));
        // A quadratic reader (128 ms per MiB²) over a 1 s wait: slow.
        let quadratic = [(mib, ms(128)), (2 * mib, ms(512))];
        assert!(Growth::predict(&quadratic, 4 * mib).unwrap().patience > Duration::from_secs(1));
        // Fast answers: at least linear growth from 1 ms, plus the slack.
        let fast = Growth::predict(&[(1024, ms(0)), (2048, ms(0))], 4096).unwrap();
        assert_eq!(fast.per_doubling, 2.0);
        assert!(fast.patience >= SLACK && fast.patience < SLACK + ms(10), "{fast:?}");
        // A flat or shrinking time still counts as linear growth; a steep
        // one as cubic at most.
        let steep = Growth::predict(&[(mib, ms(10)), (2 * mib, ms(1000))], 4 * mib).unwrap();
        assert_eq!(steep.per_doubling, 8.0);
        assert_eq!(steep.expected, ms(8000));
        // Fewer than two sizes: no prediction.
        assert_eq!(Growth::predict(&[(mib, ms(5))], 2 * mib), None);
        assert_eq!(Growth::predict(&[(mib, ms(5)), (mib, ms(6))], 2 * mib), None);
    }

    #[test]
    fn only_a_clear_growth_counts_as_superlinear() {
        let ms = Duration::from_millis;
        let mib = 1 << 20;
        // Linear with noise (a loaded machine): not superlinear.
        let noisy = [(mib, ms(80)), (2 * mib, ms(122)), (4 * mib, ms(463)), (8 * mib, ms(542)), (16 * mib, ms(1100))];
        assert!(!superlinear(&noisy));
        // Quadratic: 16 times the size, 256 times the time.
        let quadratic = [(mib, ms(25)), (4 * mib, ms(400)), (16 * mib, ms(6400))];
        assert!(superlinear(&quadratic));
        // Too fast to tell.
        assert!(!superlinear(&[(mib, ms(1)), (16 * mib, ms(300))]));
        assert!(!superlinear(&[]));
    }
}
