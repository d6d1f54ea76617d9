//! Our `stdio-v2` host against a server that is not ours: Node's built-in
//! `node:http2` (nghttp2), `framer/e2e/sdk/node_h2_server.mjs`, over the
//! child's pipes. Calls, concurrent calls beside a streaming result, a
//! reset; and each of the server's misbehaviours (a huge header, windows
//! never given back, push, CR-only SSE, a wrong id) ends in the right result
//! or a typed error, within deadlines. Skipped, loudly, when `node` is
//! missing. Every test runs under a watchdog on the multi-thread runtime.
#![cfg(unix)]

use std::sync::Arc;
use std::time::Duration;

use mcp_framer_e2e::support::{eventually_async, watchdog};
use mcp_framer_stdio_v2::host::{Client, Error, HostConfig, Item};
use serde_json::{Value, json};

const WATCHDOG: Duration = Duration::from_secs(120);

fn node() -> Option<&'static str> {
    let found = std::process::Command::new("node")
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        eprintln!("SKIPPED: `node` is not on PATH; the Node http2 server tests need Node 20 or later");
    }
    found.then_some("node")
}

async fn spawn(node: &str, switches: &[&str], config: HostConfig) -> Client {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/sdk/node_h2_server.mjs");
    let mut command = tokio::process::Command::new(node);
    command.arg(script).args(switches);
    Client::spawn(command, config).await.expect("the Node http2 server starts a stdio-v2 session")
}

fn call_params(tool: &str, arguments: Value) -> Value {
    json!({"name": tool, "arguments": arguments})
}

fn with_progress(tool: &str, arguments: Value, token: &str) -> Value {
    json!({"name": tool, "arguments": arguments, "_meta": {"progressToken": token}})
}

async fn echo(client: &Client, text: &str) {
    let response = client.request("tools/call", &call_params("echo", json!({"text": text}))).await.unwrap();
    assert_eq!(response.text(), text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_concurrent_calls_beside_a_stream_and_a_reset() {
    let Some(node) = node() else { return };
    watchdog(WATCHDOG, "node http2 server: calls", async {
        let client = Arc::new(spawn(node, &[], HostConfig::default()).await);
        let tools = client.request("tools/list", &json!({})).await.unwrap();
        let names: Vec<_> = tools.result()["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(names, ["echo", "big", "where", "slow"], "the tool with an invalid x-mcp-header is dropped");
        assert_eq!(client.counters().tools_rejected, 1);
        echo(&client, "Hello, 世界 \"quoted\" \\ back").await;
        let big = client.request("tools/call", &call_params("big", json!({"bytes": 3 << 20}))).await.unwrap();
        assert_eq!(big.text().len(), 3 << 20);

        // A streaming result, and ten calls answered while it streams.
        let mut slow =
            client.call("tools/call", &with_progress("slow", json!({"count": 10, "ms": 40}), "s1")).await.unwrap();
        let Some(Ok(Item::Notification(first))) = slow.next().await else { panic!("no progress first") };
        let first: Value = serde_json::from_slice(&first).unwrap();
        assert_eq!(first["params"]["progressToken"], "s1");
        let echoes: Vec<_> = (0..10)
            .map(|i| {
                let client = Arc::clone(&client);
                tokio::spawn(async move { echo(&client, &format!("beside {i}")).await })
            })
            .collect();
        for e in echoes {
            e.await.unwrap();
        }
        let response = slow.response().await.unwrap();
        assert_eq!(response.text(), "slow done");
        assert_eq!(response.notifications.len(), 9, "every progress event after the first");

        // A reset: the server sees its stream closed and stops; the session goes on.
        let mut doomed =
            client.call("tools/call", &with_progress("slow", json!({"count": 200, "ms": 20}), "s2")).await.unwrap();
        assert!(matches!(doomed.next().await, Some(Ok(Item::Notification(_)))));
        doomed.cancel();
        assert!(
            eventually_async(Duration::from_secs(20), || client.stderr_tail().contains("stopped at")).await,
            "the Node server saw the reset: {}",
            client.stderr_tail()
        );
        echo(&client, "after the reset").await;
        assert_eq!(client.counters().cancelled, 1);
        let ended = Arc::into_inner(client).unwrap().shutdown().await;
        assert!(ended.exit_status.is_some(), "the server ended: {}", ended.stderr_tail);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cr_only_line_ends_in_its_event_streams_are_read() {
    let Some(node) = node() else { return };
    watchdog(WATCHDOG, "node http2 server: CR-only SSE", async {
        let config = HostConfig::default().with_request_timeout(Duration::from_secs(30));
        let client = spawn(node, &["--cr-only"], config).await;
        for round in 0..3 {
            let token = format!("cr{round}");
            let params = with_progress("slow", json!({"count": 5, "ms": 10}), &token);
            let response = client.request("tools/call", &params).await.expect("a CR-only stream is answered");
            assert_eq!(response.text(), "slow done");
            assert_eq!(response.notifications.len(), 5);
        }
        client.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_response_header_is_a_typed_error_not_memory() {
    let Some(node) = node() else { return };
    watchdog(WATCHDOG, "node http2 server: huge header", async {
        for bytes in ["100000", "1048576"] {
            let config = HostConfig::default().with_request_timeout(Duration::from_secs(20));
            let client = spawn(node, &["--huge-header", bytes], config).await;
            let outcome = client.request("ping", &json!({})).await;
            match outcome {
                // Over the header-list limit: the stream refused (a block
                // that fits in a few frames), or the session ended (a
                // block larger than the limit on the wire).
                Err(Error::Reset { .. } | Error::Closed(_)) => {}
                other => panic!("{bytes}-byte header: {other:?}"),
            }
            client.shutdown().await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_gives_window_back_ends_in_timeouts_not_a_hang() {
    let Some(node) = node() else { return };
    watchdog(WATCHDOG, "node http2 server: no window", async {
        let config = HostConfig::default()
            .with_request_timeout(Duration::from_secs(3))
            .with_write_timeout(Duration::from_secs(3));
        let client = spawn(node, &["--no-window"], config).await;
        // Bodies larger than the 64 KiB windows it never gives back.
        let text = "w".repeat(200 << 10);
        let started = std::time::Instant::now();
        let outcome = client.request("tools/call", &call_params("echo", json!({"text": text}))).await;
        assert!(matches!(outcome, Err(Error::TimedOut { .. } | Error::Closed(_))), "{outcome:?}");
        let second = client.request("ping", &json!({})).await;
        assert!(second.is_err(), "a server that reads nothing answers nothing: {second:?}");
        assert!(started.elapsed() < Duration::from_secs(30), "both within their deadlines");
        client.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_is_off_and_a_wrong_id_is_a_typed_error() {
    let Some(node) = node() else { return };
    watchdog(WATCHDOG, "node http2 server: push and ids", async {
        // Push: the host announced ENABLE_PUSH 0, so nghttp2 refuses to push
        // and the answer comes as usual.
        let client = spawn(node, &["--push"], HostConfig::default()).await;
        echo(&client, "no push").await;
        let ended = client.shutdown().await;
        assert!(ended.stderr_tail.contains("push refused"), "{}", ended.stderr_tail);

        let client = spawn(node, &["--wrong-id"], HostConfig::default()).await;
        for _ in 0..2 {
            let outcome = client.request("tools/call", &call_params("echo", json!({"text": "x"}))).await;
            let Err(Error::WrongId { expected, got, .. }) = outcome else { panic!("{outcome:?}") };
            assert_ne!(got, Some(expected));
        }
        client.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_header_checks_it_serves_what_the_body_says() {
    let Some(node) = node() else { return };
    watchdog(WATCHDOG, "node http2 server: no header checks", async {
        // With its checks: a body the headers contradict gets 400 / -32020.
        let body = br#"{"jsonrpc":"2.0","id":"h1","method":"ping"}"#.to_vec();
        let client = spawn(node, &[], HostConfig::default()).await;
        let call = client.call_raw(mcp_framer_jsonrpc::Id::Str("h1".into()), "tools/list", body.clone()).await;
        let outcome = call.unwrap().response().await;
        assert!(matches!(&outcome, Err(Error::Rpc { status: 400, error }) if error.code == -32020), "{outcome:?}");
        client.shutdown().await;
        // Without: served as the body says (what mcp-probe must catch).
        let client = spawn(node, &["--no-header-checks"], HostConfig::default()).await;
        let call = client.call_raw(mcp_framer_jsonrpc::Id::Str("h1".into()), "tools/list", body).await;
        let response = call.unwrap().response().await.expect("served");
        assert_eq!(response.result(), json!({}));
        client.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_carry_the_modern_meta_and_mcp_param_headers_or_the_old_shape() {
    let Some(node) = node() else { return };
    watchdog(WATCHDOG, "node http2 server: _meta and Mcp-Param", async {
        let client = spawn(node, &[], HostConfig::default()).await;
        client.request("tools/list", &json!({})).await.unwrap();
        let params = call_params("where", json!({"region": "us-west1", "query": "SELECT 1"}));
        let response = client.request("tools/call", &params).await.unwrap();
        assert_eq!(response.text(), "ran in us-west1 (header us-west1)");
        let params = call_params("where", json!({"region": "Zürich"}));
        let response = client.request("tools/call", &params).await.unwrap();
        assert_eq!(response.text(), "ran in Zürich (header =?base64?WsO8cmljaA==?=)");
        let ended = client.shutdown().await;
        let line = ended.stderr_tail.lines().find(|l| l.contains("request tools/call")).expect("logged").to_owned();
        for needle in [
            r#""mcp-protocol-version":"2026-07-28""#,
            r#""io.modelcontextprotocol/protocolVersion":"2026-07-28""#,
            r#""io.modelcontextprotocol/clientCapabilities":{}"#,
            r#""io.modelcontextprotocol/clientInfo":{"name":"mcp-framer-stdio-v2""#,
            r#""mcp-name":"where""#,
        ] {
            assert!(line.contains(needle), "{needle} missing from {line}");
        }

        // The old shape, when asked for: no `_meta`, the legacy version.
        let client = spawn(node, &[], HostConfig::default().with_protocol_version("2025-11-25")).await;
        echo(&client, "old shape").await;
        let ended = client.shutdown().await;
        let line = ended.stderr_tail.lines().find(|l| l.contains("request tools/call")).expect("logged").to_owned();
        assert!(line.contains(r#""mcp-protocol-version":"2025-11-25""#) && line.ends_with("meta null"), "{line}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stderr_tail_is_empty_plain_or_says_what_was_cut() {
    let Some(node) = node() else { return };
    watchdog(WATCHDOG, "node http2 server: stderr tail wording", async {
        let client = spawn(node, &[], HostConfig::default()).await;
        assert_eq!(client.stderr_tail(), "", "a server that wrote nothing: an empty tail");
        echo(&client, "one").await;
        assert!(
            eventually_async(Duration::from_secs(20), || client.stderr_tail().contains("request tools/call")).await
        );
        let whole = client.stderr_tail();
        assert!(
            whole.starts_with("node_h2_server: request") && !whole.contains("[preview"),
            "shown whole, plain: {whole}"
        );
        client.shutdown().await;

        let mut config = HostConfig::default();
        config.stderr_tail = 64;
        let client = spawn(node, &[], config).await;
        for i in 0..3 {
            echo(&client, &format!("cut {i}")).await;
        }
        assert!(eventually_async(Duration::from_secs(20), || client.counters().stderr_bytes > 200).await);
        let cut = client.stderr_tail();
        assert!(cut.starts_with("[preview: last 64 of "), "a cut tail says what was cut: {cut}");
        client.shutdown().await;
    })
    .await;
}
