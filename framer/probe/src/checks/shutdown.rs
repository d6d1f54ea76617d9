//! Check 9: close stdin; the server should exit within `--exit-timeout`;
//! then SIGTERM (and SIGKILL); then no process of its group may be left.

use std::time::Duration;

use mcp_framer_stdio::host::{ShutdownConfig, ShutdownStage};
use tokio::time::Instant;

use crate::progress::Progress;
use crate::report::{CheckResult, Verdict};
use crate::target::{Target, group_members};

pub(super) async fn run(target: &Target, progress: &Progress, result: &mut CheckResult) {
    let args = &target.args;
    let steps = ShutdownConfig::default()
        .with_after_stdin(args.exit_timeout)
        .with_after_term(args.term_timeout)
        .with_after_kill(Duration::from_secs(1));
    let config = target.session_config().with_shutdown(steps);
    let (session, mut inbound, _) = match target.start(config).await {
        Ok(started) => started,
        Err(e) => return result.note(Verdict::Fail, format!("no session to test: {e}")),
    };
    if let Err(e) = session.request("ping", &()).await {
        result.note(Verdict::Warn, format!("the server did not answer a ping before shutdown: {e}"));
    }
    let pgid = session.pid();
    target.account("shutdown", &session, &mut inbound);
    progress.step("closing stdin");
    let started = Instant::now();
    let report = session.shutdown().await;
    let took = started.elapsed();
    let status = report.exit_status.map_or("not reaped".to_owned(), |s| s.to_string());
    result.measure("stage", format!("{:?}", report.stage));
    result.measure("shutdown_ms", took.as_millis() as u64);
    match report.stage {
        ShutdownStage::StdinClosed => {
            result.info(format!("exited {} after stdin was closed ({status})", crate::fmt_duration(took)))
        }
        ShutdownStage::AlreadyExited => {
            result.note(Verdict::Warn, format!("it had exited before stdin was closed ({status})"))
        }
        ShutdownStage::Terminated => result.note(
            Verdict::Fail,
            format!(
                "still running {} after stdin was closed; SIGTERM ended it ({status})",
                crate::fmt_duration(args.exit_timeout)
            ),
        ),
        ShutdownStage::Killed => result.note(
            Verdict::Fail,
            format!(
                "still running {} after stdin was closed and {} after SIGTERM; SIGKILL ended it",
                crate::fmt_duration(args.exit_timeout),
                crate::fmt_duration(args.term_timeout)
            ),
        ),
        ShutdownStage::StillRunning => result.note(Verdict::Fail, "still running after SIGKILL"),
        _ => result.note(Verdict::Warn, format!("ended at stage {:?}", report.stage)),
    }
    if let Some(pgid) = pgid {
        // The leader is gone; give its children a moment to follow.
        let deadline = Instant::now() + Duration::from_millis(500);
        let left = loop {
            let left = group_members(&[pgid]);
            if left.is_empty() || Instant::now() >= deadline {
                break left;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        result.measure("left_in_group", left.len() as u64);
        if left.is_empty() {
            result.info("no process of its group was left");
        } else {
            let list: Vec<String> = left.iter().map(|p| format!("{} ({})", p.pid, p.comm)).collect();
            result.note(Verdict::Fail, format!("processes of its group still alive: {}", list.join(", ")));
        }
    }
}
