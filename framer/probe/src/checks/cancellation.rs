//! Check 8 (needs `--slow`): cancel a running tool call once it has
//! started; its progress must stop, a late result is allowed (and
//! reported), and the next request must be answered within a second.

use std::time::Duration;

use mcp_framer_stdio::host::Inbound;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::progress::Progress;
use crate::report::{CheckResult, Verdict};
use crate::target::Target;

const TOKEN: &str = "mcp-probe-cancel";

fn is_our_progress(item: &Inbound) -> bool {
    let Inbound::Notification(note) = item else { return false };
    if note.method() != Some("notifications/progress") {
        return false;
    }
    let params: Value = note.deserialize_payload().unwrap_or(Value::Null);
    params.get("progressToken").and_then(Value::as_str) == Some(TOKEN)
}

pub(super) async fn run(target: &Target, progress: &Progress, result: &mut CheckResult) {
    let args = &target.args;
    let Some(tool) = &args.slow else {
        return result.skip("needs a tool that runs for a while: --slow 'NAME {json args}'");
    };
    let (session, mut inbound, _) = match target.start(target.session_config()).await {
        Ok(started) => started,
        Err(e) => return result.note(Verdict::Fail, format!("no session to test: {e}")),
    };
    progress.step(format!("calling {}", tool.name));
    let params = json!({ "name": tool.name, "arguments": tool.arguments, "_meta": { "progressToken": TOKEN } });
    let started = Instant::now();
    let before = session.metrics().stdout_bytes;
    let pending = match session.start("tools/call", &params).await {
        Ok(pending) => pending,
        Err(e) => return result.note(Verdict::Fail, format!("tools/call {tool} could not be sent: {e}")),
    };
    let id = pending.id();
    // Keep the request alive (dropping it would cancel it) until the cancel.
    let outcome = tokio::spawn(pending.with_timeout(args.slow_start + args.step_timeout).response());
    let deadline = started + args.slow_start;
    let mut first_progress = None;
    while let Ok(Some(item)) = tokio::time::timeout_at(deadline, inbound.recv()).await {
        if is_our_progress(&item) {
            first_progress = Some(started.elapsed());
            break;
        }
    }
    if outcome.is_finished() {
        let finished = outcome.await;
        let what = match finished {
            Ok(Ok(_)) => "returned a result".to_owned(),
            Ok(Err(e)) => format!("failed: {e}"),
            Err(e) => format!("failed: {e}"),
        };
        result.note(
            Verdict::Warn,
            format!("the slow tool {what} before it could be cancelled: use longer --slow arguments"),
        );
        return target.account("cancellation", &session, &mut inbound);
    }
    match first_progress {
        Some(after) => {
            result.info(format!("first progress notification {} after the call", crate::fmt_duration(after)))
        }
        None => {
            let bytes = session.metrics().stdout_bytes - before;
            result.note(
                Verdict::Warn,
                format!(
                    "no progress notification within {} ({bytes} bytes of output meanwhile): cannot tell whether the producer stops",
                    crate::fmt_duration(args.slow_start)
                ),
            );
        }
    }
    progress.step("cancelling");
    let cancelled_at = Instant::now();
    session.cancel(id, "mcp-probe: cancellation check").await;
    let _ = outcome.await;

    progress.step("ping after the cancel");
    let ping = match session.start("ping", &()).await {
        Ok(pending) => pending.with_timeout(args.ping_timeout).response().await.map(|_| cancelled_at.elapsed()),
        Err(e) => Err(e),
    };
    match &ping {
        Ok(after) => {
            result.info(format!("a ping right after the cancel was answered in {}", crate::fmt_duration(*after)))
        }
        Err(e) => result.note(Verdict::Fail, format!("a ping right after the cancel failed: {e}")),
    }

    progress.step("watching for progress after the cancel");
    let grace_end = cancelled_at + args.cancel_grace;
    let watch_end = grace_end + args.cancel_watch;
    let (mut in_grace, mut after_grace, mut last) = (0u64, 0u64, None::<Duration>);
    while let Ok(Some(item)) = tokio::time::timeout_at(watch_end, inbound.recv()).await {
        if is_our_progress(&item) {
            let at = Instant::now();
            if at <= grace_end {
                in_grace += 1;
            } else {
                after_grace += 1;
                last = Some(at.duration_since(cancelled_at));
            }
        }
    }
    let metrics = session.metrics();
    result.measure("first_progress_ms", first_progress.map(|d| d.as_millis() as u64));
    result.measure("progress_in_grace", in_grace);
    result.measure("progress_after_grace", after_grace);
    result.measure("late_responses", metrics.late_responses);
    result.measure("ping_after_cancel_ms", ping.as_ref().ok().map(|d| d.as_millis() as u64));
    if first_progress.is_some() {
        if after_grace == 0 {
            result.info(format!(
                "progress stopped: {in_grace} notification(s) within the {} grace, none in the {} after",
                crate::fmt_duration(args.cancel_grace),
                crate::fmt_duration(args.cancel_watch)
            ));
        } else {
            result.note(
                Verdict::Fail,
                format!(
                    "the producer kept going: {after_grace} progress notification(s) after the {} grace, the last {} after the cancel",
                    crate::fmt_duration(args.cancel_grace),
                    crate::fmt_duration(last.unwrap_or_default())
                ),
            );
        }
    }
    match metrics.late_responses {
        0 => result.info("no late response to the cancelled call"),
        n => result.info(format!("{n} late response(s) to the cancelled call arrived (allowed; the host drops them)")),
    }
    target.account("cancellation", &session, &mut inbound);
}
