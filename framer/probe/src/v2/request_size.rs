//! `stdio-v2` check 4: the server's body limit. Liveness requests padded to
//! growing sizes (doubling from `--min-request` to `--max-request`), each
//! one POST on the same connection; the first refused one is bisected
//! against the largest answered, and when the refusal names the limit
//! (`... the transport limit of N bytes`, the newline transport's error)
//! a body of exactly N bytes must be answered and one of N + 1 refused.
//!
//! A refusal must be `413` with a JSON-RPC error (-32600), and the
//! connection must answer afterwards (an HTTP/2 stream's refusal costs that
//! stream only). Each request is waited for as the newline check waits
//! (the growth of the answer times so far, at least `--step-timeout`, at
//! most four times it): silence from a live server past the time its growth
//! allows is deafness (FAIL); silence it allows is slowness (WARN, limit
//! unknown).

use std::time::Duration;

use mcp_framer_jsonrpc::{INVALID_REQUEST, Id};
use mcp_framer_stdio::host::with_meta;
use mcp_framer_stdio_v2::host;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::{V2Session, open};
use crate::duration::{fmt_duration, no_answer, within};
use crate::growth::{Growth, doubling_wait, report_answer_times, wait_for};
use crate::progress::Progress;
use crate::report::{CheckResult, Verdict};
use crate::target::Target;

/// What a padded request got.
#[derive(Debug)]
enum Outcome {
    Answered,
    /// A JSON-RPC error with this status.
    Refused {
        status: u16,
        code: i64,
        message: String,
    },
    /// No answer within the wait.
    Silence(Duration),
    /// The session ended, or the answer was not JSON-RPC.
    Broken(String),
}

impl Outcome {
    fn describe(&self) -> String {
        match self {
            Outcome::Answered => "answered".into(),
            Outcome::Refused { status, code, message } => format!("HTTP {status} with {code}: {message:?}"),
            Outcome::Silence(waited) => no_answer(*waited),
            Outcome::Broken(why) => why.clone(),
        }
    }

    fn is_413(&self) -> bool {
        matches!(self, Outcome::Refused { status: 413, .. })
    }
}

/// A liveness request of exactly `size` bytes (or the smallest one, if
/// `size` is smaller), padded in its `_meta`.
fn padded(session: &V2Session, id: i64, size: usize) -> Vec<u8> {
    let (method, params) = session.liveness();
    let body = |pad: usize| {
        let params = with_meta(params.clone(), Some(&json!({ "probe/pad": "x".repeat(pad) })));
        serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).unwrap_or_default()
    };
    let empty = body(0).len();
    body(size.saturating_sub(empty))
}

/// One padded request within `wait`: what it got and how long it took.
async fn attempt(session: &V2Session, id: i64, size: usize, wait: Duration) -> (Outcome, Duration, usize) {
    let started = Instant::now();
    let body = padded(session, id, size);
    let len = body.len();
    let method = session.liveness().0;
    let asked = async { session.client.call_raw(Id::Number(id), method, body).await?.response().await };
    let outcome = match tokio::time::timeout(wait, asked).await {
        Ok(Ok(_)) => Outcome::Answered,
        Ok(Err(host::Error::Rpc { status: 200, .. })) => Outcome::Answered,
        Ok(Err(host::Error::Rpc { status, error })) => {
            Outcome::Refused { status, code: error.code, message: error.message.chars().take(160).collect() }
        }
        Ok(Err(host::Error::TimedOut { after, .. })) => Outcome::Silence(after),
        Ok(Err(e)) => Outcome::Broken(e.to_string()),
        Err(_) => Outcome::Silence(wait),
    };
    (outcome, started.elapsed(), len)
}

/// The limit a refusal names: `... the transport limit of N bytes`.
fn named_limit(message: &str) -> Option<usize> {
    let rest = message.split("limit of ").nth(1)?;
    rest.split_whitespace().next()?.parse().ok()
}

pub(super) async fn run(target: &Target, progress: &Progress, result: &mut CheckResult) {
    let limits = &target.limits;
    let mut session = match open(target).await {
        Ok(session) => session,
        Err(e) => return result.note(Verdict::Fail, format!("no session to test: {e}")),
    };
    let mut next_id = 1000;
    let mut id = || {
        next_id += 1;
        next_id
    };
    let mut size = limits.min_request.max(256);
    let mut answered: Vec<(usize, Duration)> = Vec::new();
    let mut failure = None;
    while size <= limits.max_request {
        progress.step(format!("a body of {size} bytes"));
        let wait = doubling_wait(limits, &answered, size);
        let (outcome, took, len) = attempt(&session, id(), size, wait).await;
        if matches!(outcome, Outcome::Answered) {
            answered.push((len, took));
            if size == limits.max_request {
                break;
            }
            size = size.saturating_mul(2).min(limits.max_request);
        } else {
            failure = Some((len, outcome));
            break;
        }
    }
    report_answer_times(result, &answered, ("body", "bodies"));
    let largest = answered.last().map_or(0, |(b, _)| *b);
    let Some((failed, outcome)) = failure else {
        result.measure("largest_answered", largest as u64);
        result.measure("first_failed", Value::Null);
        result.info(format!(
            "every body up to --max-request ({} bytes) was answered (raise --max-request to look higher)",
            limits.max_request
        ));
        return session.end(target).await;
    };
    result.info(format!("the first failure: a body of {failed} bytes got {}", outcome.describe()));
    if let Outcome::Silence(waited) = outcome {
        let growth = Growth::predict(&answered, failed);
        let alive = session.ping(limits.ping_timeout).await;
        result.measure("largest_answered", largest as u64);
        result.measure("first_failed", Value::Null);
        match (growth, alive) {
            (_, Err(e)) => result.note(
                Verdict::Fail,
                format!("the server went deaf on a body of {failed} bytes: no answer {}, and then {e}", within(waited)),
            ),
            (Some(g), Ok(_)) if g.patience <= waited => result.note(
                Verdict::Fail,
                format!(
                    "deaf, not slow: {}; nothing came for the body of {failed} bytes, though other requests are \
                     answered (its caller waits out its timeout)",
                    g.describe(failed)
                ),
            ),
            (_, Ok(_)) => {
                result.behaviour("slow-large-request");
                result.note(
                    Verdict::Warn,
                    format!(
                        "a body of {failed} bytes got no answer {} while other requests were answered: the \
                         server is slow (or stuck). Its limit above {largest} bytes is unknown: raise --step-timeout",
                        within(waited)
                    ),
                );
            }
        }
        return session.end(target).await;
    }
    // Is the connection still usable after the refusal?
    progress.step("the next request after the refusal");
    let after = session.ping(limits.ping_timeout).await;
    match (&outcome, &after) {
        (Outcome::Refused { status: 413, code, .. }, _) if *code == INVALID_REQUEST => {
            result.info(format!("refused with HTTP 413 and the typed error {code}"))
        }
        (Outcome::Refused { status: 413, code, .. }, _) => result.note(
            Verdict::Warn,
            format!("refused with HTTP 413, but error {code} (the newline transport's is {INVALID_REQUEST})"),
        ),
        (Outcome::Refused { status, .. }, _) => result.note(
            Verdict::Warn,
            format!("refused with HTTP {status}, not 413 (Content Too Large): a host cannot tell it from other errors"),
        ),
        _ => result.note(
            Verdict::Fail,
            format!("a body of {failed} bytes got {}: its caller has no answer", outcome.describe()),
        ),
    }
    match &after {
        Ok(took) => {
            result.info(format!("the connection survived: the next request was answered in {}", fmt_duration(*took)))
        }
        Err(e) => result.note(Verdict::Fail, format!("after the refusal the connection is dead: {e}")),
    }
    if after.is_err() {
        session.end(target).await;
        session = match open(target).await {
            Ok(session) => session,
            Err(e) => return result.note(Verdict::Warn, format!("no fresh session to bisect with: {e}")),
        };
    }

    // The limit the refusal names, if any; else bisection.
    let named = match &outcome {
        Outcome::Refused { message, .. } => named_limit(message).filter(|n| (largest..failed).contains(n)),
        _ => None,
    };
    let (mut lo, mut hi) = (largest, failed);
    let refused_with = match &outcome {
        Outcome::Refused { status, .. } => Some(*status),
        _ => None,
    };
    if let Some(limit) = named {
        result.measure("advertised_limit", limit as u64);
        progress.step(format!("bodies of {limit} and {} bytes (the limit its refusal names)", limit + 1));
        let wait = wait_for(limits, &answered, limit);
        let (at, _, at_len) = attempt(&session, id(), limit, wait).await;
        let (over, _, over_len) = attempt(&session, id(), limit + 1, wait).await;
        match (&at, &over) {
            (Outcome::Answered, o) if o.is_413() => {
                (lo, hi) = (at_len, over_len);
                result.info(format!(
                    "the refusal names a limit of {limit} bytes: a body of {at_len} bytes was answered, one of \
                     {over_len} bytes refused with 413"
                ));
            }
            _ => result.note(
                Verdict::Warn,
                format!(
                    "the refusal names a limit of {limit} bytes, but a body of {at_len} bytes got {} and one of \
                     {over_len} bytes got {}",
                    at.describe(),
                    over.describe()
                ),
            ),
        }
    } else {
        for _ in 0..limits.bisect_steps {
            if hi - lo <= 64 {
                break;
            }
            let mid = lo + (hi - lo) / 2;
            progress.step(format!("bisecting: a body of {mid} bytes"));
            let (got, took, len) = attempt(&session, id(), mid, wait_for(limits, &answered, mid)).await;
            match got {
                Outcome::Answered => {
                    lo = len;
                    answered.push((len, took));
                }
                // The same refusal as the first failure's.
                Outcome::Refused { status, .. } if Some(status) == refused_with => hi = len,
                got => {
                    result.info(format!("bisection stopped: a body of {len} bytes got {}", got.describe()));
                    break;
                }
            }
        }
    }
    result.measure("largest_answered", lo as u64);
    result.measure("first_failed", hi as u64);
    result.measure("failure", outcome.describe());
    result.info(format!("largest body answered: {lo} bytes; smallest refused: {hi} bytes"));
    session.end(target).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_is_read_from_the_newline_transports_error() {
        let message = "message of 524288 bytes exceeds the transport limit of 300000 bytes";
        assert_eq!(named_limit(message), Some(300000));
        assert_eq!(named_limit("message too large"), None);
        assert_eq!(named_limit("the limit of many bytes"), None);
    }
}
