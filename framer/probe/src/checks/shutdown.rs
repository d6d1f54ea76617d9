//! Check 9: close stdin; the server should exit within `--exit-timeout`;
//! then SIGTERM (and SIGKILL; on Windows: its job terminated); then no
//! process of its group may be left (checked on Linux).
//! With `--slow`, the same again while the slow tool runs: work in flight
//! must not keep the server (or its children) alive past its stdin.

use std::time::Duration;

use mcp_framer_stdio::host::{Inbound, Session, ShutdownConfig, ShutdownStage};
use serde_json::json;
use tokio::time::Instant;

use crate::duration::fmt_duration;
use crate::processes::{Leftover, group_members};
use crate::progress::Progress;
use crate::report::{CheckResult, Verdict};
use crate::target::{Started, Target};

/// Closes stdin (then SIGTERM, SIGKILL) and judges how the server ended;
/// `busy` names the work in flight, if any.
async fn close_and_judge(target: &Target, session: Session, busy: Option<&str>, result: &mut CheckResult) {
    let limits = &target.limits;
    let pgid = session.pid();
    let during = busy.map_or(String::new(), |what| format!(" while {what} ran"));
    let key = if busy.is_some() { "busy_" } else { "" };
    let started = Instant::now();
    let report = session.shutdown().await;
    let took = started.elapsed();
    let status = report.exit_status.map_or("not reaped".to_owned(), |s| s.to_string());
    result.measure(&format!("{key}stage"), format!("{:?}", report.stage));
    result.measure(&format!("{key}shutdown_ms"), took.as_millis() as u64);
    let idle_was_clean = result.measurements.get("stage").and_then(|s| s.as_str()) == Some("StdinClosed");
    if busy.is_some() && idle_was_clean && report.stage != ShutdownStage::StdinClosed {
        result.behaviour("outlives-stdin-while-busy");
    }
    match report.stage {
        ShutdownStage::StdinClosed => result
            .info(format!("exited {} after stdin was closed{during} ({status})", fmt_duration(took))),
        ShutdownStage::AlreadyExited => {
            result.note(Verdict::Warn, format!("it had exited before stdin was closed{during} ({status})"))
        }
        ShutdownStage::Terminated => result.note(
            Verdict::Fail,
            format!(
                "still running {} after stdin was closed{during}; SIGTERM ended it ({status})",
                fmt_duration(limits.exit_timeout)
            ),
        ),
        ShutdownStage::Killed if cfg!(windows) => result.note(
            Verdict::Fail,
            format!(
                "still running {} after stdin was closed{during}; terminating its job ended it (Windows has no SIGTERM step)",
                fmt_duration(limits.exit_timeout)
            ),
        ),
        ShutdownStage::Killed => result.note(
            Verdict::Fail,
            format!(
                "still running {} after stdin was closed{during} and {} after SIGTERM; SIGKILL ended it",
                fmt_duration(limits.exit_timeout),
                fmt_duration(limits.term_timeout)
            ),
        ),
        ShutdownStage::StillRunning if cfg!(windows) => {
            result.note(Verdict::Fail, format!("still running after its job was terminated{during}"))
        }
        ShutdownStage::StillRunning => result.note(Verdict::Fail, format!("still running after SIGKILL{during}")),
        _ => result.note(Verdict::Warn, format!("ended at stage {:?}{during}", report.stage)),
    }
    let Some(pgid) = pgid else { return };
    if !crate::processes::SCANS_PROCESSES {
        return result.info(crate::processes::NO_SCAN);
    }
    // The leader is gone; give its children a moment to follow.
    let deadline = Instant::now() + Duration::from_millis(500);
    let left = loop {
        let left = group_members(&[pgid]);
        if left.is_empty() || Instant::now() >= deadline {
            break left;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    result.measure(&format!("{key}left_in_group"), left.len() as u64);
    if left.is_empty() {
        result.info(format!("no process of its group was left{during}"));
    } else {
        let list: Vec<String> = left.iter().map(Leftover::to_string).collect();
        result.note(Verdict::Fail, format!("processes of its group still alive{during}: {}", list.join(", ")));
    }
}

pub(super) async fn run(target: &Target, progress: &Progress, result: &mut CheckResult) {
    let limits = &target.limits;
    let steps = ShutdownConfig::default()
        .with_after_stdin(limits.exit_timeout)
        .with_after_term(limits.term_timeout)
        .with_after_kill(Duration::from_secs(1));
    let config = target.session_config().with_shutdown(steps);
    let Started { session, mut inbound, .. } = match target.start(config).await {
        Ok(started) => started,
        Err(e) => return result.note(Verdict::Fail, format!("no session to test: {e}")),
    };
    if let Err(e) = target.ping(&session, limits.step_timeout).await {
        result.note(Verdict::Warn, format!("the server did not answer {} before shutdown: {e}", target.liveness().0));
    }
    target.account("shutdown", &session, &mut inbound);
    progress.step("closing stdin");
    close_and_judge(target, session, None, result).await;

    let Some(tool) = &target.options.slow else {
        return result.info("idle shutdown only: --slow adds a shutdown with a call in flight");
    };
    progress.step(format!("closing stdin while {} runs", tool.name));
    let Started { session, mut inbound, .. } = match target.start(config).await {
        Ok(started) => started,
        Err(e) => return result.note(Verdict::Fail, format!("no second session to test: {e}")),
    };
    let params =
        json!({ "name": tool.name, "arguments": tool.arguments, "_meta": { "progressToken": "mcp-probe-shutdown" } });
    let pending = match session.start("tools/call", &target.params(params)).await {
        Ok(pending) => pending,
        Err(e) => return result.note(Verdict::Fail, format!("tools/call {tool} could not be sent: {e}")),
    };
    // Let it get going: its first message, or a quarter of --slow-start.
    let deadline = Instant::now() + limits.slow_start / 4;
    while let Ok(Some(item)) = tokio::time::timeout_at(deadline, inbound.recv()).await {
        if matches!(item, Inbound::Notification(_)) {
            break;
        }
    }
    target.account("shutdown", &session, &mut inbound);
    let what = format!("tools/call {}", tool.name);
    close_and_judge(target, session, Some(&what), result).await;
    drop(pending);
}
