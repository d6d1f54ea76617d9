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
            Outcome::Silence => format!("silence for {}", crate::fmt_duration(target.args.step_timeout)),
            Outcome::Exited(how) => format!("the process exiting ({how})"),
            Outcome::WriteStalled => {
                format!(
                    "a write the server did not take within {} (it stopped reading)",
                    crate::fmt_duration(target.args.step_timeout)
                )
            }
        }
    }

    fn is_error_reply(&self) -> bool {
        matches!(self, Outcome::ErrorReply { .. })
    }
}

/// A `ping` frame of about `size` bytes.
fn padded(id: i64, size: usize) -> Vec<u8> {
    let empty = RawConn::request_frame(id, "ping", &json!({ "_meta": { "probe/pad": "" } }));
    RawConn::request_frame(
        id,
        "ping",
        &json!({ "_meta": { "probe/pad": "x".repeat(size.saturating_sub(empty.len() - 1)) } }),
    )
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

async fn attempt(target: &Target, conn: &mut RawConn, size: usize) -> Outcome {
    let id = conn.next_id();
    match conn.write(&padded(id, size), target.args.step_timeout).await {
        Ok(()) => {}
        Err(WriteFailure::Closed) => return Outcome::Exited(exit_of(conn).await.unwrap_or("stdin closed".into())),
        Err(WriteFailure::Stalled) => return Outcome::WriteStalled,
    }
    let deadline = Instant::now() + target.args.step_timeout;
    let answer = conn
        .wait_for(deadline, |e| match e {
            RawEvent::Message(m) => m.answers(id) || (m.kind == Kind::ErrorResponse && m.id.is_none()),
            RawEvent::Eof => true,
            _ => false,
        })
        .await;
    match answer {
        Some(RawEvent::Message(m)) if m.kind == Kind::Response => Outcome::Answered,
        Some(RawEvent::Message(m)) => {
            let error: Value = m.payload.as_deref().and_then(|p| serde_json::from_str(p).ok()).unwrap_or(Value::Null);
            let message = error.get("message").and_then(Value::as_str).unwrap_or("").chars().take(160).collect();
            Outcome::ErrorReply { code: m.error_code(), message, id_null: m.id.is_none() }
        }
        _ => match exit_of(conn).await {
            Some(status) => Outcome::Exited(status),
            None => Outcome::Silence,
        },
    }
}

async fn start(target: &Target) -> Result<RawConn, String> {
    super::raw_session(target, "request-size").await
}

pub(super) async fn run(target: &Target, progress: &Progress, result: &mut CheckResult) {
    let args = &target.args;
    let mut conn = match start(target).await {
        Ok(conn) => conn,
        Err(e) => return result.note(Verdict::Fail, e),
    };
    let mut size = args.min_request.max(128);
    let mut largest = None;
    let mut failure = None;
    while size <= args.max_request {
        progress.step(format!("request of {size} bytes"));
        let outcome = attempt(target, &mut conn, size).await;
        if matches!(outcome, Outcome::Answered) {
            largest = Some(size);
            if size == args.max_request {
                break;
            }
            size = size.saturating_mul(2).min(args.max_request);
        } else {
            failure = Some((size, outcome));
            break;
        }
    }
    let Some((failed_size, outcome)) = failure else {
        result.measure("largest_answered", largest.unwrap_or(0) as u64);
        result.measure("first_failed", Value::Null);
        result.info(format!("every request up to --max-request ({} bytes) was answered", args.max_request));
        return target.account_raw("request-size", &conn);
    };
    result.info(format!("the first failure: a request of {failed_size} bytes got {}", outcome.describe(target)));
    progress.step("ping after the failure");
    let after = match &outcome {
        Outcome::Exited(_) => Err("the process had exited".to_owned()),
        _ => conn.ping(args.ping_timeout).await.map(|_| ()),
    };
    match (&outcome, &after) {
        (Outcome::ErrorReply { .. }, Ok(())) => {
            result.info(format!("a ping was answered within {} afterwards", crate::fmt_duration(args.ping_timeout)))
        }
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
        let outcome = attempt(target, &mut conn, mid).await;
        target.account_raw("request-size", &conn);
        conn.log.clear();
        if matches!(outcome, Outcome::Answered) {
            lo = mid;
            current = Some(conn);
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
    if usable {
        result.info(format!("the server's request limit is between {lo} and {hi} bytes, and it says so with an error"));
    }
}
