//! The `stdio-v2` host (`mcp_framer_stdio_v2::host::Client`) under what an
//! application or a server may do to it, between real processes: calls the
//! application never reads, the per-request `_meta` and `Mcp-Param-*`
//! headers, the host's bounds. The server is the `v2_server` fixture. Every
//! test runs under a watchdog on the multi-thread runtime.
#![cfg(unix)]

use std::sync::Arc;
use std::time::Duration;

use mcp_framer_e2e::support::watchdog;
use mcp_framer_stdio_v2::host::{Client, HostConfig};
use serde_json::{Value, json};

const WATCHDOG: Duration = Duration::from_secs(120);

fn v2_command(args: &[&str]) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_v2_server"));
    command.args(args);
    command
}

async fn spawn(args: &[&str], config: HostConfig) -> Client {
    Client::spawn(v2_command(args), config).await.expect("the v2 fixture starts a stdio-v2 session")
}

fn call_params(tool: &str, arguments: Value) -> Value {
    json!({"name": tool, "arguments": arguments})
}

/// Issue 37, defect 5: 17 or more calls whose results nobody reads (2 MiB
/// each: more than the 16 MiB connection window together) must not stall the
/// others: calls in flight are bounded against the connection window (at
/// most `max_calls`, the window at least `(max_calls + 1) × stream_window`).
///
/// The results are then read all at once. Read one after another, they can
/// wait on the server's side: only the results that fit the dispatcher's
/// writer budget are committed (each holds its bytes until they are sent),
/// so a call whose result is not among them waits until one of those is
/// read, or until the server ends a stream stalled for `stall_timeout`
/// (30 s). That is the server's budget working as stated, not the host's
/// window, which is what this test is about.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_nobody_reads_cannot_exhaust_the_connection_window() {
    watchdog(WATCHDOG, "unread calls beside a ping", async {
        const CALLS: usize = 20;
        const BYTES: u64 = 2 << 20;
        for round in 0..2 {
            let client = Arc::new(spawn(&[], HostConfig::default()).await);
            let mut unread = Vec::new();
            for _ in 0..CALLS {
                unread.push(client.call("tools/call", &call_params("big", json!({"bytes": BYTES}))).await.unwrap());
            }
            // Give the server time to fill every window it is given.
            tokio::time::sleep(Duration::from_millis(500)).await;
            for i in 0..3 {
                let answered = tokio::time::timeout(Duration::from_secs(20), client.request("ping", &json!({}))).await;
                let response = answered
                    .unwrap_or_else(|_| panic!("round {round}: ping {i} stalled behind {CALLS} unread calls"))
                    .expect("ping answered");
                assert_eq!(response.result(), json!({}));
            }
            // Nothing owed was lost: every unread result arrives whole.
            let read = unread.into_iter().map(|call| tokio::spawn(call.response()));
            for (i, task) in read.collect::<Vec<_>>().into_iter().enumerate() {
                let response = task.await.expect("a read task").unwrap_or_else(|e| panic!("call {i}: {e}"));
                assert_eq!(response.text().len() as u64, BYTES, "call {i}");
            }
            Arc::into_inner(client).unwrap().shutdown().await;
        }
    })
    .await;
}
