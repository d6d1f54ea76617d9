//! No message is lost to a consumer that keeps up. With
//! `SessionConfig::default()`, a consumer that does nothing but `recv()`
//! receives every notification of a child that writes them as fast as it
//! can, on tokio's multi-thread and current-thread runtimes: 200 B
//! notifications, then 64 KiB and 1 MiB ones.
//!
//! Volume: 96 MiB of each kind per runtime, half as much again as the
//! queue's 64 MiB bound, so the queue's byte accounting goes round more than
//! once: a consumer that keeps up still finds room if every byte it took is
//! given back. The fixture writes many frames per `write(2)`; a debug build
//! takes seconds. The volume that measures this at scale (1 GiB of 200 B
//! notifications) is the slow-consumer bench's "no drops" run
//! (`benches/benches/slow_consumer.rs`), which records its counts.

#![cfg(unix)]

use std::time::{Duration, Instant};

use mcp_framer_e2e::support;
use mcp_framer_stdio::host::{Inbound, MetricsSnapshot, Session, SessionConfig};
use serde_json::json;
use tokio::process::Command;

/// Bytes of each kind of notification per run.
const BYTES: u64 = 96 << 20;
/// How long one flood may take: a hang guard. A debug build takes a few
/// seconds for each (tens on a loaded 2-core machine); the session's default
/// request timeout would be too close for that.
const DEADLINE: Duration = Duration::from_secs(180);
const WATCHDOG: Duration = Duration::from_secs(600);

/// Floods `count` notifications of `frame_bytes` to a do-nothing consumer
/// through a session with the default configuration; returns the metrics
/// once everything arrived, and what the consumer received.
async fn flood(count: u64, frame_bytes: u64) -> (MetricsSnapshot, u64) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_hostile_server"));
    command.args(["--chunk", "65536"]);
    let (session, mut inbound) = Session::spawn(command, SessionConfig::default()).expect("spawn");
    let consumer = tokio::spawn(async move {
        let mut received = 0u64;
        while let Some(item) = inbound.recv().await {
            if matches!(item, Inbound::Notification(_)) {
                received += 1;
            }
        }
        received
    });
    let started = Instant::now();
    let arguments = json!({"count": count, "frame_bytes": frame_bytes});
    let params = json!({"name": "flood", "arguments": arguments});
    let pending = session.start("tools/call", &params).await.expect("sent");
    let response = pending
        .with_timeout(DEADLINE)
        .response()
        .await
        .unwrap_or_else(|e| panic!("flood failed: {e}; stderr: {}", session.stderr_tail()));
    let stream: serde_json::Value = response.deserialize_payload().expect("json");
    assert_eq!(stream["structuredContent"]["notifications"], count);
    // Every notification precedes the response on stdout: all are counted.
    let metrics = session.metrics();
    let elapsed = started.elapsed();
    session.shutdown().await;
    let received = consumer.await.expect("consumer");
    eprintln!(
        "flood: {count} x {frame_bytes} B in {elapsed:?}: delivered {}, dropped {}, episodes {}, received {received}",
        metrics.delivered, metrics.overload_dropped, metrics.overload_episodes
    );
    (metrics, received)
}

async fn no_drops(runtime: &str) {
    assert!(BYTES > SessionConfig::default().overload.max_queued_bytes as u64, "more than the queue holds");
    support::watchdog(WATCHDOG, runtime, async {
        for frame_bytes in [200, 64 << 10, 1 << 20] {
            let count = BYTES.div_ceil(frame_bytes);
            let (m, received) = flood(count, frame_bytes).await;
            assert_eq!((m.delivered, m.overload_dropped, m.overload_rejected), (count, 0, 0), "{runtime}: {m:?}");
            assert_eq!((m.unconsumed, received), (0, count), "{runtime}: {m:?}");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_that_keeps_up_loses_nothing_on_the_multi_thread_runtime() {
    no_drops("multi-thread").await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_consumer_that_keeps_up_loses_nothing_on_the_current_thread_runtime() {
    no_drops("current-thread").await;
}
