//! Every wake-up agrees with the metrics, on the multi-thread runtime, many
//! times over: a requester woken by a response, an oversize failure, a
//! deadline, the child's exit or a write stall finds, in the snapshot it
//! takes at once, what woke it. (On the current-thread runtime the reader
//! and the requester never run at the same time, which hides ordering bugs;
//! both runtimes are run.)
//!
//! The response and oversize cases run `wake_check` (which also runs in CI
//! against third-party servers, `scripts/wake-order`) against the
//! `hostile_server` fixture; the others run here, each under a watchdog.

#![cfg(unix)]

mod host_support;

use std::process::Command;
use std::time::Duration;

use host_support::{config, fixture, spawn_busy_reader, tool};
use mcp_framer_e2e::support;
use mcp_framer_stdio::host::{CloseReason, RequestError, Session};
use serde_json::json;

/// Runs `wake_check` with `args` against `hostile_server`; returns its report.
async fn wake_check(runtime: &str, args: &[&str]) -> serde_json::Value {
    let mut command = Command::new(env!("CARGO_BIN_EXE_wake_check"));
    command.args(["--runtime", runtime]).args(args).args(["--", env!("CARGO_BIN_EXE_hostile_server")]);
    let output = tokio::task::spawn_blocking(move || command.output().expect("run wake_check")).await.expect("join");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON line");
    assert!(output.status.success(), "{report} {}", String::from_utf8_lossy(&output.stderr));
    report
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversize_failures_and_responses_wake_after_their_accounting_on_both_runtimes() {
    support::watchdog(Duration::from_secs(120), "wake_check", async {
        let oversize = ["--repeat", "300", "--limit", "65536", "--method", "tools/call"];
        let sized = |bytes: u64| json!({"name": "sized", "arguments": {"frame_bytes": bytes}}).to_string();
        for runtime in ["multi", "current"] {
            let params = sized(70_000);
            let report = wake_check(runtime, &[&oversize[..], &["--params", &params]].concat()).await;
            assert_eq!(
                (report["oversize"].as_u64(), report["disagreements"].as_u64()),
                (Some(300), Some(0)),
                "{report}"
            );
            let params = sized(60_000);
            let report = wake_check(runtime, &[&oversize[..], &["--params", &params]].concat()).await;
            assert_eq!(
                (report["responses"].as_u64(), report["disagreements"].as_u64()),
                (Some(300), Some(0)),
                "{report}"
            );
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_wakes_after_the_timeout_and_its_cancellation_are_counted() {
    support::watchdog(Duration::from_secs(60), "deadlines", async {
        let (session, _inbound) = Session::spawn(fixture(&[]), config()).expect("spawn");
        for n in 1..=100 {
            let pending = session.start("tools/call", &tool("silent", json!({}))).await.expect("sent");
            let outcome = pending.with_timeout(Duration::from_millis(1)).response().await;
            let m = session.metrics();
            assert!(matches!(outcome, Err(RequestError::TimedOut { cancellation_sent: true, .. })), "{outcome:?}");
            assert!(m.timeouts >= n && m.cancellations_sent >= n, "timeout {n}: {m:?}");
        }
        session.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_end_of_the_session_is_published_before_its_requests_fail() {
    support::watchdog(Duration::from_secs(60), "exits", async {
        for _ in 0..20 {
            let (session, _inbound) = Session::spawn(fixture(&[]), config()).expect("spawn");
            let outcome = session.request("tools/call", &tool("exit_mid_frame", json!({"code": 3}))).await;
            let Err(RequestError::Closed(closed)) = outcome else { panic!("{outcome:?}") };
            assert!(session.closed().is_some(), "woken before closed() said so");
            assert!(matches!(closed.reason(), CloseReason::Exited), "{closed}");
            assert_eq!(session.metrics().exit_status.and_then(|s| s.code()), Some(3));
            assert_eq!(closed.exit_status().and_then(|s| s.code()), Some(3), "{closed}");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stall_wakes_its_requests_after_the_write_error_is_counted() {
    support::watchdog(Duration::from_secs(60), "stalls", async {
        for _ in 0..5 {
            let (session, _inbound, stream) = spawn_busy_reader(Duration::from_millis(200)).await;
            let big = tool("echo", json!({"text": "x".repeat(1 << 20)}));
            let stalled = session.request("tools/call", &big).await;
            assert!(matches!(stalled, Err(RequestError::Write(_))), "{stalled:?}");
            let outcome = stream.response().await;
            let Err(RequestError::Closed(closed)) = outcome else { panic!("{outcome:?}") };
            assert!(matches!(closed.reason(), CloseReason::StdinStalled(_)), "{closed}");
            assert!(session.closed().is_some(), "woken before closed() said so");
            assert!(session.metrics().write_errors >= 1);
            assert!(closed.to_string().contains("is being stopped"), "{closed}");
            drop(session);
        }
    })
    .await;
}
