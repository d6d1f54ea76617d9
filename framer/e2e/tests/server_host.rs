//! Both halves together: the host transport (`mcp_framer_stdio::host::Session`)
//! drives the `lib_server` fixture (built on `mcp_framer_stdio::server`) over real
//! pipes. Cancellations race responses on purpose; whatever state each
//! request was in when its cancellation arrived, the counts on both sides
//! must agree: every response the server sent for a cancelled request is one
//! the host counted as late and ignored, and the session stays healthy.

use std::time::{Duration, Instant};

use mcp_framer_e2e::lib_server::report as lib_server;
use mcp_framer_e2e::{report, support};
use mcp_framer_stdio::host::{RequestError, Session, SessionConfig};
use serde_json::{Value, json};

/// The watchdog: the whole exchange, shutdown included. A hang guard: the
/// exchange takes seconds in a debug build on a loaded machine.
const WATCHDOG: Duration = Duration::from_secs(120);
const ROUNDS: u64 = 24;
/// How long the ping after each round may take: milliseconds unless the
/// session is still blocked by the round (a host that stopped draining the
/// cancelled frame, a server stuck writing it), which would be forever.
const PING: Duration = Duration::from_secs(5);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_ignores_every_response_that_races_its_cancellation() {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_lib_server"));
    command.env("RUST_BACKTRACE", "0");
    let (session, _inbound) = Session::spawn(command, SessionConfig::default()).expect("spawn lib_server");
    let pid = session.pid();
    let exchange = async {
        let (mut cancels_sent, mut completed_first) = (0u64, 0u64);
        for round in 0..ROUNDS {
            // A 256 KiB result: four pipes' worth, so the cancellation can land
            // while the handler runs, while the frame is being written, or after.
            let call = json!({"name": "big", "arguments": {"bytes": 256 * 1024}});
            let pending = session.start("tools/call", &call).await.expect("request written");
            tokio::time::sleep(Duration::from_micros(round * 1500)).await;
            if session.cancel(pending.id(), "racing on purpose").await {
                cancels_sent += 1;
                let outcome = pending.response().await;
                assert!(matches!(outcome, Err(RequestError::Cancelled { .. })), "{outcome:?}");
            } else {
                completed_first += 1; // the response won the race
                assert!(pending.response().await.is_ok());
            }
            let sent = Instant::now();
            let pong = session.request("ping", &json!({})).await.expect("ping answered");
            assert_eq!(pong.payload(), Some("{}"));
            assert!(sent.elapsed() < PING, "ping took {:?}", sent.elapsed());
        }
        (cancels_sent, completed_first)
    };
    let Ok((cancels_sent, completed_first)) = tokio::time::timeout(WATCHDOG, exchange).await else {
        panic!("WATCHDOG: the exchange with lib_server (pid {pid:?}) hung; stderr:\n{}", session.stderr_tail());
    };
    // Each round's outcome was asserted as it happened; the host's own
    // counters must agree with what the rounds saw.
    let metrics = session.metrics();
    assert_eq!(metrics.cancellations_sent, cancels_sent, "{metrics:?}");
    assert_eq!(metrics.requests_sent, 2 * ROUNDS, "{metrics:?}");
    assert_eq!(metrics.responses, completed_first + ROUNDS, "matched: the uncancelled calls and every ping");
    let report = support::watchdog(WATCHDOG, "the shutdown of lib_server", session.shutdown()).await;
    assert!(report.exit_status.is_some_and(|s| s.success()), "{:?}", report.exit_status);

    let server: Value = report::last(&report.stderr_tail, lib_server::REPORT).expect("server report");
    let cancels = &server["cancels"];
    let count = |state: &str| cancels[state].as_u64().unwrap();
    assert_eq!(count("queued") + count("running") + count("writing") + count("ignored"), cancels_sent, "{server}");
    // A cancellation that found the request writing or already done let its
    // response out; the host, having given up on it, ignored it as late.
    assert_eq!(metrics.late_responses, count("writing") + count("ignored"), "{server}");
    assert_eq!(server["requests"], 2 * ROUNDS);
    // Every frame the server wrote: the responses that won the race, the
    // late ones, and the pings; a request cancelled while queued or running
    // sent nothing.
    assert_eq!(server["frames_out"], completed_first + count("writing") + count("ignored") + ROUNDS, "{server}");
    assert_eq!(server["malformed"], 0);
    eprintln!(
        "cancellations: sent {cancels_sent}, queued {}, running {}, writing {}, done {}; \
         responses first {completed_first}; host late {}",
        count("queued"),
        count("running"),
        count("writing"),
        count("ignored"),
        metrics.late_responses
    );
}
