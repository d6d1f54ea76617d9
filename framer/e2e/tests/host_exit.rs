//! The child's end: dying mid-frame, exiting on its own, and the shutdown
//! sequence (stdin close, SIGTERM, SIGKILL) against servers that ignore each
//! step.

#![cfg(unix)]

mod host_support;

use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use host_support::{PATIENCE, SHUTDOWN_STEP, config, spawn, tool, watchdog};
use mcp_framer_e2e::hostile::report as hostile;
use mcp_framer_e2e::report;
use mcp_framer_stdio::host::{
    CloseReason, Inbound, RequestError, Session, ShutdownConfig, ShutdownStage, SkippedFrame,
};
use serde_json::json;

#[tokio::test]
async fn a_child_dying_mid_frame_is_truncated_and_pending_requests_fail_with_its_status() {
    watchdog("exit mid-frame", async {
        let (session, mut inbound) = spawn(config());
        // The fixture handles requests in order: the ping waits behind the
        // request that kills the server, so both are pending when it dies.
        let dying = session.start("tools/call", &tool("exit_mid_frame", json!({"code": 3}))).await.expect("sent");
        let behind = session.start("tools/call", &tool("ping", json!({}))).await.expect("sent");

        for request in [dying, behind] {
            let failed = request.response().await;
            let Err(RequestError::Closed(closed)) = failed else { panic!("expected the session to end: {failed:?}") };
            assert!(matches!(closed.reason(), CloseReason::Exited), "{closed}");
            assert_eq!(closed.exit_status().and_then(|s| s.code()), Some(3));
            // The error's message is for humans, so its wording is what is
            // checked here: it names the exit status and quotes the child's
            // stderr tail, in which the fixture's report line (structured)
            // must be intact.
            let message = closed.to_string();
            assert!(message.contains("exit status: 3"), "{message}");
            let quoted = message.lines().find_map(|line| report::parse(line, hostile::EXIT_MID_FRAME));
            let quoted = quoted.unwrap_or_else(|| panic!("the stderr tail is quoted: {message}"));
            assert_eq!(quoted["code"], 3, "{quoted}");
            assert!(quoted["written"].as_u64() < quoted["frame_len"].as_u64(), "{quoted}");
        }
        let Some(Inbound::Skipped(SkippedFrame::Truncated { len, oversize: false })) = inbound.recv().await else {
            panic!("the partial frame is reported")
        };
        let metrics = session.metrics();
        assert!(len > 0);
        // Exactly what the child reports it wrote before exiting.
        let exit = report::last(&session.stderr_tail(), hostile::EXIT_MID_FRAME).expect("exit report");
        assert_eq!(exit["written"], len, "{exit}");
        assert_eq!((metrics.truncated_bytes, metrics.frames), (len, 0));
        assert_eq!(metrics.stdout_bytes, len);
        assert_eq!(metrics.exit_status.and_then(|s| s.code()), Some(3));
        // New requests fail at once.
        assert!(matches!(session.request("ping", &()).await, Err(RequestError::Closed(_))));
        assert_eq!(session.shutdown().await.stage, ShutdownStage::AlreadyExited);
    })
    .await;
}

/// A session on `sh -c script` whose shutdown waits `ignored` after each
/// of its first `skipped` steps (the steps the script ignores: waiting them
/// out proves nothing but takes time) and the generous `SHUTDOWN_STEP` after
/// the others (a step that ends the script ends it in milliseconds).
fn sh(script: &str, skipped: usize) -> Session {
    let ignored = Duration::from_millis(300);
    let wait = |step: usize| if step < skipped { ignored } else { SHUTDOWN_STEP };
    let shutdown =
        ShutdownConfig::default().with_after_stdin(wait(0)).with_after_term(wait(1)).with_after_kill(wait(2));
    let mut command = tokio::process::Command::new("sh");
    command.args(["-c", script]);
    Session::spawn(command, config().with_shutdown(shutdown)).expect("spawn sh").0
}

#[tokio::test]
async fn shutdown_closes_stdin_then_terminates_then_kills() {
    watchdog("shutdown stages", async {
        // Exits at end of input.
        let report = sh("cat >/dev/null", 0).shutdown().await;
        assert_eq!(report.stage, ShutdownStage::StdinClosed);
        assert_eq!(report.exit_status.and_then(|s| s.code()), Some(0));

        // Ignores end of input, dies on SIGTERM.
        let report = sh("exec sleep 30", 1).shutdown().await;
        assert_eq!(report.stage, ShutdownStage::Terminated);
        assert_eq!(report.exit_status.and_then(|s| s.signal()), Some(15));

        // Ignores end of input and SIGTERM: only SIGKILL ends it.
        let stubborn = sh("trap '' TERM; echo ready >&2; while :; do sleep 0.05; done", 2);
        while !stubborn.stderr_tail().contains("ready") {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let report = stubborn.shutdown().await;
        assert_eq!(report.stage, ShutdownStage::Killed);
        assert_eq!(report.exit_status.and_then(|s| s.signal()), Some(9));
    })
    .await;
}

#[tokio::test]
async fn dropping_a_session_kills_its_server() {
    watchdog("drop kills", async {
        let session = sh("exec sleep 30", 0);
        let pid = session.pid().expect("pid");
        let proc_path = format!("/proc/{pid}");
        assert!(std::path::Path::new(&proc_path).exists());
        drop(session);
        // The supervisor kills and reaps it: the pid disappears (in
        // milliseconds; the bound is a hang guard).
        let deadline = std::time::Instant::now() + PATIENCE;
        while std::path::Path::new(&proc_path).exists() {
            assert!(std::time::Instant::now() < deadline, "pid {pid} still exists after the session was dropped");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
}
