//! No message is lost to a consumer that keeps up. With
//! `SessionConfig::default()`, a consumer that does nothing but `recv()`
//! receives every notification of a child that writes them as fast as it
//! can, on tokio's multi-thread and current-thread runtimes: 200 B
//! notifications, then 64 KiB and 1 MiB ones.
//!
//! Volume: 1 GiB (and 1 MiB) of 200 B notifications per runtime, then
//! 128 MiB each of 64 KiB and of 1 MiB notifications. The fixture writes
//! many frames per `write(2)`; the run takes seconds even in a debug build.

#![cfg(unix)]

use std::time::{Duration, Instant};

use mcp_framer_e2e::support;
use mcp_framer_stdio::host::{Inbound, MetricsSnapshot, Session, SessionConfig};
use serde_json::json;
use tokio::process::Command;

/// Bytes of 200 B notifications per run.
const SMALL_BYTES: u64 = (1 << 30) + (1 << 20);
/// Bytes of each of the large kinds per run.
const LARGE_BYTES: u64 = 128 << 20;
const WATCHDOG: Duration = Duration::from_secs(240);

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
    let response = session
        .request("tools/call", &params)
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
    support::watchdog(WATCHDOG, runtime, async {
        for (frame_bytes, bytes) in [(200, SMALL_BYTES), (64 << 10, LARGE_BYTES), (1 << 20, LARGE_BYTES)] {
            let count = bytes.div_ceil(frame_bytes);
            let (m, received) = flood(count, frame_bytes).await;
            assert!(count * frame_bytes >= bytes);
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
