//! Check 5: a request written one byte at a time, two requests in one
//! write, and a request whose `\r\n` is split across two writes: all must be
//! answered.

use serde_json::{Value, json};
use tokio::time::sleep;

use crate::duration::fmt_duration;
use crate::progress::Progress;
use crate::raw::RawConn;
use crate::report::{CheckResult, Verdict};
use crate::target::Target;

pub(super) async fn run(target: &Target, progress: &Progress, result: &mut CheckResult) {
    let limits = &target.limits;
    let mut conn = match super::raw_session(target, "framing").await {
        Ok(conn) => conn,
        Err(e) => return result.note(Verdict::Fail, e),
    };
    let mut outcomes = serde_json::Map::new();
    // The liveness request: `server/discover` (modern era) or `ping`.
    let m = conn.liveness_method();

    progress.step(format!("a {m} request written one byte at a time"));
    let id = conn.next_id();
    let frame = conn.liveness_frame(id, 0);
    let mut written = true;
    for byte in &frame {
        if conn.write(std::slice::from_ref(byte), limits.step_timeout).await.is_err() {
            written = false;
            break;
        }
        sleep(limits.byte_delay).await;
    }
    let answered = written && conn.response(id, limits.step_timeout).await.is_some();
    outcomes.insert("byte_at_a_time".into(), json!(answered));
    let what = format!(
        "a {m} request written one byte at a time ({} bytes, {} apart)",
        frame.len(),
        fmt_duration(limits.byte_delay)
    );
    if answered {
        result.info(format!("{what}: answered"))
    } else {
        result.note(Verdict::Fail, format!("{what}: not answered"))
    }

    progress.step(format!("two {m} requests in one write"));
    let (a, b) = (conn.next_id(), conn.next_id());
    let mut both = conn.liveness_frame(a, 0);
    both.extend(conn.liveness_frame(b, 0));
    let written = conn.write(&both, limits.step_timeout).await.is_ok();
    let mut got = Vec::new();
    if written {
        for id in [a, b] {
            if conn.response(id, limits.step_timeout).await.is_some() {
                got.push(id);
            }
        }
    }
    // Responses may come in either order: `response` skips the other one,
    // so look for it in the log too.
    let seen = |id: i64, conn: &RawConn| {
        conn.log.iter().any(|e| matches!(e, crate::raw::RawEvent::Message(m) if m.answers(id)))
    };
    let answered = written && seen(a, &conn) && seen(b, &conn);
    outcomes.insert("two_in_one_write".into(), json!(answered));
    if answered {
        result.info(format!("two {m} requests in one write: both answered"));
    } else {
        result.note(
            Verdict::Fail,
            format!(
                "two {m} requests in one write: answered {} of 2",
                [a, b].iter().filter(|&&id| seen(id, &conn)).count()
            ),
        );
    }

    progress.step(format!("a {m} request split across \\r\\n"));
    let id = conn.next_id();
    let mut frame = conn.liveness_frame(id, 0);
    frame.pop();
    frame.push(b'\r');
    let written = conn.write(&frame, limits.step_timeout).await.is_ok() && {
        sleep(limits.byte_delay.max(std::time::Duration::from_millis(20))).await;
        conn.write(b"\n", limits.step_timeout).await.is_ok()
    };
    let answered = written && conn.response(id, limits.step_timeout).await.is_some();
    let after = answered && conn.ping(limits.step_timeout).await.is_ok();
    outcomes.insert("split_crlf".into(), json!(answered && after));
    match (answered, after) {
        (true, true) => result
            .info(format!("a {m} request ending in \\r\\n, split between \\r and \\n: answered, and the next one too")),
        (true, false) => result.note(
            Verdict::Fail,
            format!("after a {m} request split between \\r and \\n, the next one was not answered"),
        ),
        _ => result
            .note(Verdict::Fail, format!("a {m} request ending in \\r\\n, split between \\r and \\n: not answered")),
    }
    result.measure("answered", Value::Object(outcomes));
    target.account_raw("framing", &conn);
}
