//! Check 8 (needs `--slow`): cancel a running tool call once it shows it
//! runs (progress, or a child process in the server's group). Judged by
//! what can be observed: no message for the call after the grace (the
//! 2026-07-28 rule: no further message for that request, progress
//! included; a late response is allowed in the legacy era), the next
//! request answered at once, and the processes the call started gone.
//! Progress is optional: its absence is not a defect.

use std::time::Duration;

use mcp_framer_stdio::host::{Era, Inbound};
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::duration::{fmt_duration, within};
use crate::processes::{keep_alive, list, snapshot, started_since};
use crate::progress::Progress;
use crate::report::{CheckResult, Verdict};
use crate::target::{Started, Target};

const TOKEN: &str = "mcp-probe-cancel";

/// How often the server's process group is looked at.
const POLL: Duration = Duration::from_millis(50);

fn is_our_progress(item: &Inbound) -> bool {
    let Inbound::Notification(note) = item else { return false };
    if note.method() != Some("notifications/progress") {
        return false;
    }
    let params: Value = note.deserialize_payload().unwrap_or(Value::Null);
    params.get("progressToken").and_then(Value::as_str) == Some(TOKEN)
}

pub(super) async fn run(target: &Target, progress: &Progress, result: &mut CheckResult) {
    let limits = &target.limits;
    let Some(tool) = &target.options.slow else {
        return result.skip("needs a tool that runs for a while: --slow 'NAME {json args}'");
    };
    let Started { session, mut inbound, .. } = match target.start(target.session_config()).await {
        Ok(started) => started,
        Err(e) => return result.note(Verdict::Fail, format!("no session to test: {e}")),
    };
    let pgid = session.pid();
    let before = snapshot(pgid);
    progress.step(format!("calling {}", tool.name));
    let params = json!({ "name": tool.name, "arguments": tool.arguments, "_meta": { "progressToken": TOKEN } });
    let started = Instant::now();
    let pending = match session.start("tools/call", &target.params(params)).await {
        Ok(pending) => pending,
        Err(e) => return result.note(Verdict::Fail, format!("tools/call {tool} could not be sent: {e}")),
    };
    let id = pending.id();
    // Keep the request alive (dropping it would cancel it) until the cancel.
    let outcome = tokio::spawn(pending.with_timeout(limits.slow_start + limits.step_timeout).response());
    // Wait until the call shows it runs: its first progress, or a process
    // it started; at most --slow-start.
    let deadline = started + limits.slow_start;
    let mut first_progress = None;
    let mut children = Vec::new();
    while Instant::now() < deadline && first_progress.is_none() && children.is_empty() && !outcome.is_finished() {
        let wake = (Instant::now() + POLL).min(deadline);
        if let Ok(Some(item)) = tokio::time::timeout_at(wake, inbound.recv()).await
            && is_our_progress(&item)
        {
            first_progress = Some(started.elapsed());
        }
        children = started_since(pgid, &before);
    }
    if outcome.is_finished() {
        let what = match outcome.await {
            Ok(Ok(_)) => "returned a result".to_owned(),
            Ok(Err(e)) => format!("failed: {e}"),
            Err(e) => format!("failed: {e}"),
        };
        result.note(
            Verdict::Warn,
            format!(
                "could not tell: the slow tool {what} {} after the call, before it could be cancelled (the missing signal: a call still running at the cancel); use longer --slow arguments",
                fmt_duration(started.elapsed())
            ),
        );
        return target.account("cancellation", &session, &mut inbound);
    }
    // A process may start a little after the first progress.
    tokio::time::sleep(POLL).await;
    children = started_since(pgid, &before);
    match first_progress {
        Some(after) => result.info(format!("first progress notification {} after the call", fmt_duration(after))),
        None => result.info(format!(
            "no progress notification {} (progress is optional; judged by the other signals)",
            within(started.elapsed())
        )),
    }
    // Where the platform lists no processes, that is said once, below.
    if crate::processes::SCANS_PROCESSES {
        if children.is_empty() {
            result.info("the call started no process in the server's group (none to watch)");
        } else {
            result.info(format!("the call started {} process(es): {}", children.len(), list(&children)));
        }
    }
    result.measure("children_started", children.len() as u64);

    progress.step("cancelling");
    let cancelled_at = Instant::now();
    session.cancel(id, "mcp-probe: cancellation check").await;
    let _ = outcome.await;

    progress.step("the next request after the cancel, watching the call's messages and processes");
    // The watch runs while the next request waits for its answer: a message
    // is timed when it arrives, not once a slow answer lets the watch start
    // (which would count what came within the grace as after it).
    let grace_end = cancelled_at + limits.cancel_grace;
    let watch_end = grace_end + limits.cancel_watch;
    let next = async { target.ping(&session, limits.ping_timeout).await.map(|_| cancelled_at.elapsed()) };
    let watch = async {
        let (mut in_grace, mut after_grace, mut last) = (0u64, 0u64, None::<Duration>);
        let mut late_in_grace = None;
        let mut survivors = children.clone();
        while Instant::now() < watch_end {
            let wake = (Instant::now() + POLL).min(watch_end);
            if let Ok(Some(item)) = tokio::time::timeout_at(wake, inbound.recv()).await
                && is_our_progress(&item)
            {
                let at = Instant::now();
                if at <= grace_end {
                    in_grace += 1;
                } else {
                    after_grace += 1;
                    last = Some(at.duration_since(cancelled_at));
                }
            }
            if late_in_grace.is_none() && Instant::now() >= grace_end {
                late_in_grace = Some(session.metrics().late_responses);
            }
            if !survivors.is_empty() && Instant::now() >= grace_end {
                keep_alive(&mut survivors);
            }
        }
        (in_grace, after_grace, last, late_in_grace, survivors)
    };
    let (ping, (in_grace, after_grace, last, late_in_grace, survivors)) = tokio::join!(next, watch);
    match &ping {
        Ok(after) => result.info(format!(
            "the next request ({}) after the cancel was answered in {}",
            target.liveness().0,
            fmt_duration(*after)
        )),
        Err(e) => result.note(Verdict::Fail, format!("the next request after the cancel failed: {e}")),
    }
    let metrics = session.metrics();
    let late_total = metrics.late_responses;
    let late_after_grace = late_total - late_in_grace.unwrap_or(late_total).min(late_total);
    result.measure("first_progress_ms", first_progress.map(|d| d.as_millis() as u64));
    result.measure("progress_in_grace", in_grace);
    result.measure("progress_after_grace", after_grace);
    result.measure("late_responses", late_total);
    result.measure("late_responses_after_grace", late_after_grace);
    result.measure("ping_after_cancel_ms", ping.as_ref().ok().map(|d| d.as_millis() as u64));
    result.measure(
        "children_survived",
        json!(survivors.iter().map(|p| json!({"pid": p.pid, "cmdline": p.cmdline})).collect::<Vec<_>>()),
    );
    if first_progress.is_some() || in_grace + after_grace > 0 {
        if after_grace == 0 {
            result.info(format!(
                "progress stopped: {in_grace} notification(s) within the {} grace, none in the {} after",
                fmt_duration(limits.cancel_grace),
                fmt_duration(limits.cancel_watch)
            ));
        } else {
            result.note(
                Verdict::Fail,
                format!(
                    "the producer kept going: {after_grace} progress notification(s) after the {} grace, the last {} after the cancel (2026-07-28: no further message for a cancelled request, progress included)",
                    fmt_duration(limits.cancel_grace),
                    fmt_duration(last.unwrap_or_default())
                ),
            );
        }
    }
    match (late_total, late_after_grace, target.era()) {
        (0, _, _) => result.info("no late response to the cancelled call"),
        (n, 0, _) => result.info(format!("{n} late response(s) to the cancelled call arrived within the grace (in flight at the cancel: allowed)")),
        (_, n, Era::Modern) => result.note(
            Verdict::Fail,
            format!("{n} response(s) to the cancelled call arrived after the {} grace: the 2026-07-28 revision says no further message for a cancelled request", fmt_duration(limits.cancel_grace)),
        ),
        (n, _, Era::Legacy) => result.info(format!("{n} late response(s) to the cancelled call arrived (allowed in the legacy era; the host drops them)")),
    }
    if !crate::processes::SCANS_PROCESSES {
        result.info(crate::processes::NO_SCAN);
    }
    if !children.is_empty() {
        if survivors.is_empty() {
            result.info(format!(
                "every process the call started was gone within the {} grace",
                fmt_duration(limits.cancel_grace)
            ));
        } else {
            result.behaviour("cancel-leaves-child");
            result.note(
                Verdict::Fail,
                format!(
                    "{} process(es) the cancelled call started still alive {} after the cancel: {}",
                    survivors.len(),
                    fmt_duration(cancelled_at.elapsed()),
                    list(&survivors)
                ),
            );
        }
    }
    target.account("cancellation", &session, &mut inbound);
}
