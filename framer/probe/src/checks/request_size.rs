//! Check 4: requests padded to growing sizes (doubling from
//! `--min-request` to `--max-request`, then bisecting around the first
//! failure): the largest one answered, what the first larger one got, and
//! whether the server still answers its liveness request (`ping`, or
//! `server/discover` in the modern era) afterwards.
//!
//! Each request is waited for as long as the growth of the answer times so
//! far allows ([`Growth`](crate::growth::Growth): the time it should take, extrapolated, with a
//! wide margin), at least `--step-timeout` and at most [`MAX_PATIENCE`](crate::growth::MAX_PATIENCE)
//! times it, so a slow machine slows the wait with the answers. A server
//! still alive that gives nothing within that wait is deaf (FAIL, and the
//! limit is bisected); one whose allowed time is over the cap is slow
//! (WARN, limit unknown).

use std::time::Duration;

use mcp_framer_jsonrpc::Kind;
use serde_json::Value;
use tokio::time::Instant;

use crate::duration::{fmt_duration, within};
use crate::growth::{Growth, doubling_wait, report_answer_times, wait_for};
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
                format!("a write the server did not take {} (it stopped reading)", within(*waited))
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
    report_answer_times(result, &answered, ("request", "requests"));
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
        (Outcome::ErrorReply { .. }, Ok(())) => {
            result.info(format!("the next request was answered {} afterwards", within(limits.ping_timeout)))
        }
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
                "the server stayed alive but went deaf: a request of {failed_size} bytes was not taken {} \
                 (it stopped reading its stdin); every later request waits out its timeout",
                within(*waited)
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

/// A request that got nothing within its wait (at most [`MAX_PATIENCE`](crate::growth::MAX_PATIENCE)
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
                "a request of {failed_size} bytes got no answer {}: the server is slow (or stuck). Its \
                 limit above {largest} bytes is unknown: raise --step-timeout to measure it",
                within(waited)
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
                "a request of {failed_size} bytes was not taken {}: the server reads slowly (or stopped \
                 reading); a fresh server answered at once. Its limit above {largest} bytes is unknown: raise \
                 --step-timeout to measure it",
                within(waited)
            ),
        ),
        Err(e) => result.note(
            Verdict::Fail,
            format!("a request of {failed_size} bytes was not taken, and a fresh server did not answer either: {e}"),
        ),
    }
}
