//! Check 4: requests padded to growing sizes (doubling from
//! `--min-request` to `--max-request`, then bisecting around the first
//! failure): the largest one answered, what the first larger one got, and
//! whether the server still answers `ping` afterwards.

use std::time::Duration;

use mcp_framer_jsonrpc::Kind;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::progress::Progress;
use crate::raw::{RawConn, RawEvent, WriteFailure};
use crate::report::{CheckResult, Verdict};
use crate::target::Target;

/// What a padded request got.
#[derive(Debug)]
enum Outcome {
    Answered,
    ErrorReply { code: Option<i64>, message: String, id_null: bool },
    Silence,
    Exited(String),
    WriteStalled,
}

impl Outcome {
    fn describe(&self, target: &Target) -> String {
        match self {
            Outcome::Answered => "answered".into(),
            Outcome::ErrorReply { code, message, id_null } => format!(
                "an error reply {}{}: {message:?}",
                code.map_or("without a code".into(), |c| c.to_string()),
                if *id_null { " (id null)" } else { "" }
            ),
            Outcome::Silence => format!("silence for {}", crate::report::fmt_duration(target.limits.step_timeout)),
            Outcome::Exited(how) => format!("the process exiting ({how})"),
            Outcome::WriteStalled => {
                format!(
                    "a write the server did not take within {} (it stopped reading)",
                    crate::report::fmt_duration(target.limits.step_timeout)
                )
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
/// the write).
async fn attempt(target: &Target, conn: &mut RawConn, size: usize, baseline: Option<i64>) -> (Outcome, Duration) {
    let started = Instant::now();
    let id = conn.next_id();
    match conn.write(&padded(conn, id, size), target.limits.step_timeout).await {
        Ok(()) => {}
        Err(WriteFailure::Closed) => {
            let how = exit_of(conn).await.unwrap_or("stdin closed".into());
            return (Outcome::Exited(how), started.elapsed());
        }
        Err(WriteFailure::Stalled) => return (Outcome::WriteStalled, started.elapsed()),
    }
    let deadline = Instant::now() + target.limits.step_timeout;
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
            None => Outcome::Silence,
        },
    };
    (outcome, took)
}

async fn start(target: &Target) -> Result<RawConn, String> {
    super::raw_session(target, "request-size").await
}

/// `1024 B 0 ms, 2048 B 1 ms, ...`
fn latencies(list: &[(usize, Duration)]) -> String {
    list.iter()
        .map(|(size, took)| format!("{size} B {}", crate::report::fmt_duration(*took)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether the answer times grow clearly faster than the sizes: the time
/// per byte of the largest request (at least a second) is four times or
/// more that of the first request that took 20 ms or more — a reader that
/// re-copies or re-scans its whole buffer on every read. (Linear readers
/// on a loaded machine stay well under that; a quadratic one over 16× the
/// size is at 16×.)
fn superlinear(list: &[(usize, Duration)]) -> bool {
    let per_byte = |(size, took): &(usize, Duration)| took.as_secs_f64() / *size as f64;
    let (Some(reference), Some(largest)) = (list.iter().find(|(_, t)| *t >= Duration::from_millis(20)), list.last())
    else {
        return false;
    };
    largest.1 >= Duration::from_secs(1)
        && largest.0 >= 4 * reference.0
        && per_byte(largest) >= 4.0 * per_byte(reference)
}

/// After a write that did not finish, the connection is poisoned (the next
/// request would be glued to the unfinished line): a fresh server answers
/// the next step.
async fn fresh(target: &Target, conn: RawConn) -> Result<RawConn, String> {
    target.account_raw("request-size", &conn);
    drop(conn);
    target.kill_groups();
    start(target).await
}

pub(super) async fn run(target: &Target, progress: &Progress, result: &mut CheckResult) {
    let args = &target.limits;
    let mut conn = match start(target).await {
        Ok(conn) => conn,
        Err(e) => return result.note(Verdict::Fail, e),
    };
    let mut size = args.min_request.max(128);
    let mut largest = None;
    let mut failure = None;
    let mut answered: Vec<(usize, Duration)> = Vec::new();
    let mut baseline = None;
    while size <= args.max_request {
        progress.step(format!("request of {size} bytes"));
        let (outcome, took) = attempt(target, &mut conn, size, baseline).await;
        if let (true, Outcome::ErrorReply { code, id_null: false, .. }) =
            (answered.is_empty() && largest.is_none(), &outcome)
            && size == args.min_request.max(128)
        {
            // The smallest request's error is the server's answer to the
            // liveness request itself: later ones are judged against it.
            baseline = *code;
            largest = Some(size);
            answered.push((size, took));
            size = size.saturating_mul(2).min(args.max_request);
            continue;
        }
        if matches!(outcome, Outcome::Answered) {
            largest = Some(size);
            answered.push((size, took));
            if size == args.max_request {
                break;
            }
            size = size.saturating_mul(2).min(args.max_request);
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
            args.max_request
        ));
        return target.account_raw("request-size", &conn);
    };
    if matches!(outcome, Outcome::WriteStalled) {
        // A slow reader is not a deaf one: ask a fresh server.
        progress.step("a fresh server after the unfinished write");
        result.measure("largest_answered", largest.unwrap_or(0) as u64);
        result.measure("first_failed", Value::Null);
        result.measure("stalled_at", failed_size as u64);
        let fresh = fresh(target, conn).await;
        let alive = match fresh {
            Ok(mut conn) => {
                let ping = conn.ping(args.ping_timeout).await;
                target.account_raw("request-size", &conn);
                ping
            }
            Err(e) => Err(e),
        };
        match alive {
            Ok(_) => {
                result.behaviour("slow-large-request");
                result.note(
                    Verdict::Warn,
                    format!(
                        "a request of {failed_size} bytes was not taken within --step-timeout {}: the server reads slowly (or stopped reading); a fresh server answered at once. Its limit above {} bytes is unknown: raise --step-timeout to measure it",
                        crate::report::fmt_duration(args.step_timeout),
                        largest.unwrap_or(0)
                    ),
                );
            }
            Err(e) => result.note(
                Verdict::Fail,
                format!(
                    "a request of {failed_size} bytes was not taken, and a fresh server did not answer either: {e}"
                ),
            ),
        }
        return;
    }
    result.info(format!("the first failure: a request of {failed_size} bytes got {}", outcome.describe(target)));
    progress.step("the next request after the failure");
    let after = match &outcome {
        Outcome::Exited(_) => Err("the process had exited".to_owned()),
        _ => conn.ping(args.ping_timeout).await.map(|_| ()),
    };
    match (&outcome, &after) {
        (Outcome::ErrorReply { .. }, Ok(())) => result.info(format!(
            "the next request was answered within {} afterwards",
            crate::report::fmt_duration(args.ping_timeout)
        )),
        (Outcome::ErrorReply { .. }, Err(e)) => {
            result.note(Verdict::Fail, format!("the server went deaf after its error reply: ping: {e}"))
        }
        (Outcome::Exited(how), _) => result.note(
            Verdict::Fail,
            format!("the server exited on a request of {failed_size} bytes ({how}): every pending request is lost"),
        ),
        (_, Ok(())) => result.note(
            Verdict::Fail,
            format!(
                "the request of {failed_size} bytes got {}: its caller waits out its timeout",
                outcome.describe(target)
            ),
        ),
        (_, Err(e)) => result.note(
            Verdict::Fail,
            format!(
                "the server went deaf after a request of {failed_size} bytes ({}); ping: {e}",
                outcome.describe(target)
            ),
        ),
    }
    target.account_raw("request-size", &conn);
    conn.log.clear();
    let usable = outcome.is_error_reply() && after.is_ok();
    let mut current = if usable { Some(conn) } else { None };

    // Bisect between the largest answered and the first failed size. After
    // a failure that leaves the server unusable, each step needs a fresh
    // server.
    let mut lo = largest.unwrap_or(0);
    let mut hi = failed_size;
    for _ in 0..args.bisect_steps {
        if hi - lo <= 64 {
            break;
        }
        let mid = lo + (hi - lo) / 2;
        progress.step(format!("bisecting: request of {mid} bytes"));
        let mut conn = match current.take() {
            Some(conn) => conn,
            None => {
                target.kill_groups();
                match start(target).await {
                    Ok(conn) => conn,
                    Err(e) => {
                        result.note(Verdict::Warn, format!("bisection stopped: {e}"));
                        break;
                    }
                }
            }
        };
        let (outcome, _) = attempt(target, &mut conn, mid, baseline).await;
        target.account_raw("request-size", &conn);
        conn.log.clear();
        if matches!(outcome, Outcome::Answered) {
            lo = mid;
            current = Some(conn);
        } else if matches!(outcome, Outcome::WriteStalled) {
            result.info(format!("bisection stopped: a request of {mid} bytes was not taken within --step-timeout"));
            break;
        } else {
            hi = mid;
            if outcome.is_error_reply() {
                current = Some(conn);
            }
        }
    }
    result.measure("largest_answered", lo as u64);
    result.measure("first_failed", hi as u64);
    result.measure("failure", outcome.describe(target));
    result.info(format!("largest request answered: {lo} bytes; smallest failing: {hi} bytes (after bisection)"));
    if matches!(outcome, Outcome::Exited(_)) && (10 << 20..=11 << 20).contains(&hi) && lo >= 10_000_000 {
        result.behaviour("exits-over-10mib");
    }
    if usable {
        result.info(format!("the server's request limit is between {lo} and {hi} bytes, and it says so with an error"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
