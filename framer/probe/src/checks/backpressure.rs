//! Check 7 (needs `--large`): stop reading the server's stdout while it
//! writes a large result; meanwhile send a `ping`, a
//! `notifications/cancelled` and more bytes than a pipe holds; then resume.
//! A server that reads stdin only between writes leaves those bytes unread:
//! with a host that writes before it reads, that is the deadlock.

use std::sync::atomic::Ordering;

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::time::{Instant, sleep, timeout};

use super::response_limits::call_params;
use crate::duration::{fmt_duration, not_answered, within};
use crate::progress::Progress;
use crate::raw::{RawConn, RawEvent};
use crate::report::{CheckResult, Verdict};
use crate::target::Target;

/// A pipe's default capacity on Linux; less than this queued means the
/// server's writes never blocked.
const PIPE: u64 = 64 * 1024;

pub(super) async fn run(target: &Target, progress: &Progress, result: &mut CheckResult) {
    let limits = &target.limits;
    let Some(tool) = &target.options.large else {
        return result.skip("needs a tool with a large result: --large 'NAME {json args}'");
    };
    let mut conn = match super::raw_session(target, "backpressure").await {
        Ok(conn) => conn,
        Err(e) => return result.note(Verdict::Fail, e),
    };
    // The liveness request: `server/discover` (modern era) or `ping`.
    let m = conn.liveness_method();
    // Make sure the server is past initialization before the pause.
    if let Err(e) = conn.ping(limits.step_timeout).await {
        target.account_raw("backpressure", &conn);
        return result.note(Verdict::Fail, format!("no answer to a first {m} request: {e}"));
    }
    // The check needs a result larger than a pipe holds: measure it first.
    progress.step(format!("measuring {}", tool.name));
    let measured = match conn.send_request("tools/call", &target.params(call_params(tool)), limits.step_timeout).await {
        Ok(id) => conn.response(id, limits.step_timeout).await.map(|m| m.len),
        Err(_) => None,
    };
    match measured {
        Some(len) if len as u64 > PIPE => {
            result.info(format!("the --large result is {len} bytes (more than a {PIPE}-byte pipe)"))
        }
        Some(len) => {
            target.account_raw("backpressure", &conn);
            return result.skip(format!(
                "needs a --large result larger than 64 KiB ({PIPE} bytes, a pipe's capacity) to block the server's stdout; {} gave {len} bytes",
                tool.name
            ));
        }
        None => {
            target.account_raw("backpressure", &conn);
            return result
                .note(Verdict::Fail, not_answered(format_args!("tools/call {}", tool.name), limits.step_timeout));
        }
    }
    progress.step(format!("not reading stdout for {} during {}", fmt_duration(limits.pause), tool.name));
    conn.pause(true);
    let paused_at = Instant::now();
    let Ok(call) = conn.send_request("tools/call", &target.params(call_params(tool)), limits.step_timeout).await else {
        conn.pause(false);
        target.account_raw("backpressure", &conn);
        return result.note(Verdict::Fail, "the tools/call could not be written");
    };
    // Let the server start writing and fill the pipe.
    sleep(limits.pause / 4).await;
    let ping = conn.next_id();
    let mut small = conn.liveness_frame(ping, 0);
    small.extend(RawConn::notification_frame(
        "notifications/cancelled",
        &json!({ "requestId": call, "reason": "mcp-probe: backpressure check" }),
    ));
    let big_ping = conn.next_id();
    let big = conn.liveness_frame(big_ping, limits.stdin_probe);
    let stdin_bytes = (small.len() + big.len()) as u64;
    let Some(mut stdin) = conn.take_stdin() else {
        conn.pause(false);
        return result.note(Verdict::Fail, "stdin is closed");
    };
    // Written from a task, so a stalled write can go on after the pause
    // without leaving half a frame behind.
    let mut writer = tokio::spawn(async move {
        let outcome = async {
            stdin.write_all(&small).await?;
            stdin.write_all(&big).await?;
            stdin.flush().await
        }
        .await;
        (stdin, outcome.is_ok(), Instant::now())
    });
    let left = limits.pause.saturating_sub(paused_at.elapsed());
    let during = timeout(left, &mut writer).await;
    let wrote_during_pause = matches!(&during, Ok(Ok((_, true, _))));
    let write_done_after = match &during {
        Ok(Ok((_, _, at))) => Some(at.duration_since(paused_at)),
        _ => None,
    };
    sleep(limits.pause.saturating_sub(paused_at.elapsed())).await;
    let exited_during_pause = conn.exit_status();

    progress.step("reading again");
    let resumed = Instant::now();
    conn.pause(false);
    let mut stdin_back = match during {
        Ok(Ok((stdin, ok, _))) => ok.then_some(stdin),
        Ok(Err(_)) => None,
        Err(_) => match timeout(limits.recover_timeout, writer).await {
            Ok(Ok((stdin, ok, _))) => ok.then_some(stdin),
            _ => None,
        },
    };
    if let Some(stdin) = stdin_back.take() {
        conn.put_stdin(stdin);
    }
    let deadline = resumed + limits.recover_timeout;
    let mut ping_at = None;
    let mut big_ping_at = None;
    let mut call_answer = None;
    while ping_at.is_none() || big_ping_at.is_none() {
        match conn.next_event(deadline).await {
            Some(RawEvent::Message(m)) if m.answers(ping) => ping_at = Some(resumed.elapsed()),
            Some(RawEvent::Message(m)) if m.answers(big_ping) => big_ping_at = Some(resumed.elapsed()),
            Some(RawEvent::Message(m)) if m.answers(call) => call_answer = Some(m),
            Some(RawEvent::Eof) | None => break,
            Some(_) => {}
        }
    }
    if call_answer.is_none() && ping_at.is_some() {
        // Its last bytes may still be on the way behind the pings.
        let settle = Instant::now() + std::time::Duration::from_millis(500);
        if let Some(RawEvent::Message(m)) = conn
            .wait_for(settle.min(deadline.max(settle)), |e| matches!(e, RawEvent::Message(m) if m.answers(call)))
            .await
        {
            call_answer = Some(m);
        }
    }
    let queued = conn.counters().queued_at_resume.load(Ordering::Relaxed);
    result.measure("stdout_queued_at_resume", if queued == u64::MAX { Value::Null } else { queued.into() });
    result.measure("stdin_bytes_sent_during_pause", stdin_bytes);
    result.measure("stdin_read_during_pause", wrote_during_pause);
    result.measure("recover_ms", ping_at.map(|d| d.as_millis() as u64));

    if queued != u64::MAX {
        result.info(format!("when reading resumed, {queued} bytes of the server's output were waiting in the pipe"));
    }
    if let Some(status) = exited_during_pause {
        return result.note(Verdict::Fail, format!("the server exited while its stdout was blocked ({status})"));
    }
    // Linux's pipe holds 16 pages: it is full when every page is taken, and
    // the first may be partly read already and the last partly written (a
    // write's first bytes that did not fit the page before), so a full pipe
    // can hold up to two pages less than 64 KiB.
    let blocked = queued != u64::MAX && queued >= PIPE - 2 * 4096;
    if !blocked && queued != u64::MAX {
        result.note(
            Verdict::Warn,
            format!("the server's output never filled the pipe ({queued} bytes queued): use a larger --large result to test backpressure"),
        );
    }
    match (wrote_during_pause, write_done_after) {
        (true, Some(after)) => result.info(format!(
            "while its stdout was blocked the server read all {stdin_bytes} bytes written to its stdin (a {m} request, a cancel and a {}-byte padded {m} request) in {}",
            limits.stdin_probe,
            fmt_duration(after)
        )),
        _ => result.note(
            Verdict::Fail,
            format!(
                "while its stdout was blocked the server did not read its stdin: {stdin_bytes} bytes (more than a pipe holds) could not be written in {}; a host that writes before it reads deadlocks with this server",
                fmt_duration(limits.pause)
            ),
        ),
    }
    match ping_at {
        Some(after) => result.info(format!(
            "the {m} request sent during the pause was answered {} after reading resumed",
            fmt_duration(after)
        )),
        None => result.note(
            Verdict::Fail,
            format!(
                "the {m} request sent during the pause was not answered {} of resuming",
                within(limits.recover_timeout)
            ),
        ),
    }
    if big_ping_at.is_none() && ping_at.is_some() {
        result.note(
            Verdict::Warn,
            format!("the {}-byte padded {m} request was not answered after resuming", limits.stdin_probe),
        );
    }
    match call_answer {
        Some(m) if m.error_code().is_some() => result.info(format!("the cancelled call ended with error {:?}", m.error_code())),
        Some(m) => result.info(format!(
            "the cancelled call's result still arrived ({} bytes; it was being written when the cancel came, which is allowed)",
            m.len
        )),
        None => result.info("the cancelled call sent no result: the cancel was honoured"),
    }
    target.account_raw("backpressure", &conn);
}
