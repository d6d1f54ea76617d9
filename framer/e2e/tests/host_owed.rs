//! A response is never dropped to make room. On a [`Connection`] with the
//! default configuration (a 64 MiB queue, the `Reject` policy, no wait), a
//! server floods notifications around the responses to two pending
//! requests while the application is busy elsewhere: the queue fills, the
//! notifications that do not fit are dropped and counted, and both
//! responses (one of 4 MiB) still arrive, in their place. On both runtimes.
//!
//! Volume: 2 × 96 MiB of 1 KiB notifications, well over the queue's 64 MiB
//! bound; the fixture writes many frames per `write(2)`. The application
//! reads nothing until the reader has taken all of it from the pipe, so the
//! queue overflows however fast the machine is. No speed is asserted: the
//! watchdog only catches a hang.

#![cfg(unix)]

use std::time::Duration;

use mcp_framer_e2e::support;
use mcp_framer_jsonrpc::Id;
use mcp_framer_stdio::host::{Connection, Inbound, SessionConfig};
use serde_json::{Value, json};
use tokio::process::Command;

/// Notifications per request, each `NOTE` bytes with its `\n`.
const NOTES: u64 = 96 << 10;
const NOTE: u64 = 1024;
/// The first result's size: a large response that does not fit either.
const RESULT: u64 = 4 << 20;
const WATCHDOG: Duration = Duration::from_secs(120);

async fn responses_survive_a_flood(runtime: &str) {
    support::watchdog(WATCHDOG, runtime, async {
        let mut command = Command::new(env!("CARGO_BIN_EXE_hostile_server"));
        command.args(["--chunk", "65536"]);
        let (connection, mut inbound) = Connection::spawn(command, SessionConfig::default()).expect("spawn");
        let encoder = connection.encoder();
        let flood = |result_bytes: u64| {
            let arguments = json!({"count": NOTES, "frame_bytes": NOTE, "result_bytes": result_bytes});
            json!({"name": "flood", "arguments": arguments})
        };
        // The fixture answers in order: 96 MiB of notifications, the 4 MiB
        // response to 1, 96 MiB more, the response to 2.
        for (id, result_bytes) in [(1, RESULT), (2, 0)] {
            let frame = encoder.request(&Id::Number(id), "tools/call", &flood(result_bytes)).unwrap();
            connection.send(frame).await.expect("sent");
        }
        // Busy elsewhere until every message has been queued or dropped.
        while connection.metrics().delivered + connection.metrics().overload_dropped < 2 * NOTES + 2 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let (mut notes, mut responses) = (0u64, Vec::new());
        while responses.len() < 2 {
            match inbound.recv().await {
                Some(Inbound::Notification(_)) => notes += 1,
                Some(Inbound::Response(response)) => {
                    let result: Value = response.deserialize_payload().expect("json");
                    let text = result["content"][0]["text"].as_str().unwrap_or_default().len() as u64;
                    responses.push((response.id().cloned(), text, notes));
                }
                Some(other) => panic!("{runtime}: {other:?}"),
                None => panic!("{runtime}: the queue ended; stderr: {}", connection.stderr_tail()),
            }
        }
        let m = connection.metrics();
        eprintln!("{runtime}: {m:?}");
        assert_eq!(responses[0].0, Some(Id::Number(1)), "{runtime}: {responses:?}");
        assert_eq!(responses[0].1, RESULT, "{runtime}: the 4 MiB result, whole");
        assert_eq!(responses[1].0, Some(Id::Number(2)), "{runtime}: {responses:?}");
        assert!(m.overload_dropped > 0, "{runtime}: the flood overflowed the queue: {m:?}");
        assert_eq!(m.overload_rejected, 0, "{runtime}: notifications are not rejected");
        assert_eq!(m.delivered, notes + 2, "{runtime}: {m:?}");
        assert_eq!(m.delivered + m.overload_dropped, 2 * NOTES + 2, "{runtime}: every message accounted for: {m:?}");
        assert!(m.overload_episodes >= 1, "{runtime}: {m:?}");
        connection.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_survive_a_flood_on_the_multi_thread_runtime() {
    responses_survive_a_flood("multi-thread").await;
}

#[tokio::test(flavor = "current_thread")]
async fn responses_survive_a_flood_on_the_current_thread_runtime() {
    responses_survive_a_flood("current-thread").await;
}
