//! The experimental `stdio-v2` transport (HTTP/2 over a child's stdin and
//! stdout) between real processes: `mcp_framer_stdio_v2::host::Client`
//! against the `v2_server` fixture (the `lib_server` tools behind the
//! HTTP/2 front), and each side against the newline transport's other side.
//! Every test runs under a watchdog on the multi-thread runtime.
#![cfg(unix)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use mcp_framer_e2e::support::proc::alive;
use mcp_framer_e2e::support::{eventually_async, watchdog};
use mcp_framer_e2e::{report, v2_server};
use mcp_framer_jsonrpc::Id;
use mcp_framer_stdio_v2::host::{Client, Error, HostConfig, Item};
use mcp_framer_stdio_v2::wire;
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

fn with_progress(tool: &str, arguments: Value, token: &str) -> Value {
    json!({"name": tool, "arguments": arguments, "_meta": {"progressToken": token}})
}

/// The final `report` line of the fixture's stderr.
fn final_report(stderr: &str) -> Value {
    report::last(stderr, "report").unwrap_or_else(|| panic!("no report line in stderr:\n{stderr}"))
}

/// The pid the `subprocess` tool reports in its first progress notification.
async fn child_pid(call: &mut mcp_framer_stdio_v2::host::Call) -> u32 {
    let Some(Ok(Item::Notification(progress))) = call.next().await else { panic!("no pid progress") };
    let progress: Value = serde_json::from_slice(&progress).unwrap();
    let message = progress["params"]["message"].as_str().unwrap_or_default();
    message.strip_prefix("pid ").and_then(|pid| pid.parse().ok()).unwrap_or_else(|| panic!("not a pid: {progress}"))
}

async fn ping(client: &Client) {
    let response = client.request("ping", &json!({})).await.expect("ping answered");
    assert_eq!(response.result(), json!({}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_are_answered_beside_a_streaming_result() {
    watchdog(WATCHDOG, "concurrent calls beside a streaming result", async {
        let client = Arc::new(spawn(&[], HostConfig::default()).await);
        for round in 0..5 {
            let token = format!("round-{round}");
            let mut ticks = client
                .call("tools/call", &with_progress("ticks", json!({"count": 8, "ms": 30}), &token))
                .await
                .unwrap();
            // The first progress event: the call is streaming.
            let Some(Ok(Item::Notification(first))) = ticks.next().await else { panic!("no progress first") };
            let first: Value = serde_json::from_slice(&first).unwrap();
            assert_eq!(first["params"]["progressToken"], json!(token));
            // Ten calls while it streams, on the same pipe pair, all answered.
            let echoes: Vec<_> = (0..10)
                .map(|i| {
                    let client = Arc::clone(&client);
                    tokio::spawn(async move {
                        let text = format!("echo {i}");
                        let response =
                            client.request("tools/call", &call_params("echo", json!({"text": text}))).await.unwrap();
                        assert_eq!(response.text(), text);
                        assert_eq!(response.status, 200);
                    })
                })
                .collect();
            for echo in echoes {
                echo.await.unwrap();
            }
            // The streaming call then goes on: more progress, then its result.
            let mut progress = 1;
            let result = loop {
                match ticks.next().await.expect("the stream goes on").unwrap() {
                    Item::Notification(_) => progress += 1,
                    Item::Response(response) => break response,
                }
            };
            assert_eq!(progress, 8, "every progress notification came, in order, before the result");
            assert_eq!(result.text(), "ticked 8");
        }
        let client = Arc::into_inner(client).unwrap();
        let ended = client.shutdown().await;
        assert!(ended.exit_status.is_some_and(|s| s.success()), "{ended:?}");
        let report = final_report(&ended.stderr_tail);
        assert_eq!(report["v2"]["requests"], json!(5 * 11));
        assert_eq!(report["v2"]["resets"], json!(0));
    })
    .await;
}

/// A `ping` whose body is exactly `len` bytes (padded in its params).
fn ping_of_len(id: i64, len: usize) -> Vec<u8> {
    let bare = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping","params":{{"pad":""}}}}"#);
    let pad = "x".repeat(len - bare.len());
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping","params":{{"pad":"{pad}"}}}}"#).into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_at_the_limit_is_served_and_one_over_it_gets_413_and_the_typed_error() {
    watchdog(WATCHDOG, "body limit", async {
        const MAX: usize = 65_536;
        let client = spawn(&["--max-frame", "65536"], HostConfig::default()).await;
        let at = client.call_raw(Id::Number(1001), "ping", ping_of_len(1001, MAX)).await.unwrap();
        assert_eq!(at.response().await.expect("a body of exactly the limit is served").result(), json!({}));

        // One byte over, with content-length: refused before the body is read.
        let over = client.call_raw(Id::Number(1002), "ping", ping_of_len(1002, MAX + 1)).await.unwrap();
        match over.response().await {
            Err(Error::Rpc { status: 413, error }) => {
                assert_eq!(error.code, -32600);
                assert_eq!(
                    error.message,
                    format!("message of {} bytes exceeds the transport limit of {MAX} bytes", MAX + 1)
                );
            }
            other => panic!("expected 413 with -32600, got {other:?}"),
        }
        // Over, without content-length: counted on DATA as it arrives (4x the
        // limit: the server stops reading it).
        let body = ping_of_len(1003, 4 * MAX);
        let message = mcp_framer_jsonrpc::parse(&body).unwrap();
        let headers = wire::request_headers("ping", &wire::Params::read(message.payload()), "2025-11-25");
        let over = client.call_with_headers(Id::Number(1003), "ping", headers, body.clone()).await.unwrap();
        match over.response().await {
            Err(Error::Rpc { status: 413, error }) => {
                assert_eq!(error.code, -32600);
                assert!(error.message.starts_with("message of at least "), "{}", error.message);
            }
            other => panic!("expected 413 with -32600, got {other:?}"),
        }
        // The session goes on.
        ping(&client).await;
        let ended = client.shutdown().await;
        let report = final_report(&ended.stderr_tail);
        assert_eq!(report["v2"]["oversize_bodies"], json!(2), "{report}");
        assert_eq!(report["oversize"], json!(0), "the dispatcher never saw them");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_giant_single_field_and_many_blocks_arrive_whole() {
    watchdog(WATCHDOG, "giant field, many blocks", async {
        let client = spawn(&[], HostConfig::default()).await;
        let big = client.request("tools/call", &call_params("big", json!({"bytes": 4_000_000}))).await.unwrap();
        let text = big.text();
        assert_eq!(text.len(), 4_000_000);
        assert!(text.bytes().all(|b| b == b'x'));
        let blocks = client.request("tools/call", &call_params("blocks", json!({"count": 20_000}))).await.unwrap();
        let content = blocks.result()["content"].as_array().unwrap().clone();
        assert_eq!(content.len(), 20_000);
        assert_eq!(content[19_999]["text"], "block 19999");
        client.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_over_the_host_limit_fails_that_call_only() {
    watchdog(WATCHDOG, "host limit", async {
        let client = spawn(&[], HostConfig::default().with_max_receive(1 << 20)).await;
        match client.request("tools/call", &call_params("big", json!({"bytes": 2_000_000}))).await {
            Err(Error::ResponseTooLarge { method, seen, max }) => {
                assert_eq!((method.as_str(), max), ("tools/call", 1 << 20));
                assert!(seen > 1 << 20, "{seen}");
            }
            other => panic!("expected ResponseTooLarge, got {other:?}"),
        }
        // The same for an event of an event stream (the result after progress),
        // refused before its line ends.
        let mut streaming = client
            .call("tools/call", &with_progress("ticks", json!({"count": 1, "ms": 1, "bytes": 2_000_000}), "big-event"))
            .await
            .unwrap();
        assert!(matches!(streaming.next().await, Some(Ok(Item::Notification(_)))));
        match streaming.next().await {
            Some(Err(Error::ResponseTooLarge { seen, max, .. })) => assert!(seen > max as u64 && max == 1 << 20),
            other => panic!("expected ResponseTooLarge, got {other:?}"),
        }
        drop(streaming);
        ping(&client).await;
        assert_eq!(client.counters().oversize_responses, 2);
        assert_eq!(client.counters().cancelled, 0, "an oversize answer is not a cancellation");
        client.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_bodies_and_bad_headers_are_answered_400_and_the_session_goes_on() {
    watchdog(WATCHDOG, "malformed bodies", async {
        let client = spawn(&[], HostConfig::default()).await;
        let cut = br#"{"jsonrpc":"2.0","id":9,"method":"ping""#.to_vec();
        match client.call_raw(Id::Number(9), "ping", cut).await.unwrap().response().await {
            Err(Error::Rpc { status: 400, error }) => assert_eq!(error.code, -32700),
            other => panic!("expected 400 -32700, got {other:?}"),
        }
        // JSON whitespace line breaks are fine: the body reaches the dispatcher as one line.
        let spread = b"{\"jsonrpc\":\"2.0\",\n\"id\":10,\r\n\"method\":\"ping\"}\n".to_vec();
        let answered = client.call_raw(Id::Number(10), "ping", spread).await.unwrap().response().await.unwrap();
        assert_eq!(answered.result(), json!({}));
        // A missing header, and one that contradicts the body: -32020 with the id.
        let body = br#"{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"echo"}}"#.to_vec();
        let message = mcp_framer_jsonrpc::parse(&body).unwrap();
        let mut headers = wire::request_headers("tools/call", &wire::Params::read(message.payload()), "2025-11-25");
        headers.insert(wire::NAME, http::HeaderValue::from_static("slow"));
        match client
            .call_with_headers(Id::Number(11), "tools/call", headers.clone(), body.clone())
            .await
            .unwrap()
            .response()
            .await
        {
            Err(Error::Rpc { status: 400, error }) => {
                assert_eq!(error.code, -32020);
                assert!(error.message.contains("'slow'") && error.message.contains("'echo'"), "{}", error.message);
            }
            other => panic!("expected 400 -32020, got {other:?}"),
        }
        headers.remove(wire::METHOD);
        match client.call_with_headers(Id::Number(12), "tools/call", headers, body).await.unwrap().response().await {
            Err(Error::Rpc { status: 400, error }) => assert_eq!(error.code, -32020),
            other => panic!("expected 400 -32020, got {other:?}"),
        }
        // An unknown method: 404 with -32601.
        match client.request("no/such", &json!({})).await {
            Err(Error::Rpc { status: 404, error }) => assert_eq!(error.code, -32601),
            other => panic!("expected 404 -32601, got {other:?}"),
        }
        ping(&client).await;
        let ended = client.shutdown().await;
        let report = final_report(&ended.stderr_tail);
        assert_eq!(
            (report["v2"]["malformed_bodies"].clone(), report["v2"]["header_mismatches"].clone()),
            (json!(1), json!(2))
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn noisy_stderr_is_drained_into_a_bounded_tail_and_the_session_survives() {
    watchdog(WATCHDOG, "noisy stderr", async {
        let client = spawn(&[], HostConfig::default()).await;
        // Before the noise the tail holds all there was (nothing, or a few
        // lines): plain text, with no marker saying something was left out.
        let before = client.stderr_tail();
        assert!(!before.contains("[preview"), "a whole tail has no marker: {before:?}");
        let noisy = client.request("tools/call", &call_params("noise", json!({"bytes": 4 << 20}))).await.unwrap();
        assert_eq!(noisy.text(), "noisy");
        ping(&client).await;
        assert!(eventually_async(Duration::from_secs(30), || client.counters().stderr_bytes >= 4 << 20).await);
        let tail = client.stderr_tail();
        assert!(tail.len() <= (64 << 10) + 200, "the tail is bounded: {} bytes", tail.len());
        assert!(tail.contains("noise on stderr"));
        assert!(tail.starts_with("[preview: last "), "a cut tail says so: {:?}", &tail[..80.min(tail.len())]);
        client.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_printing_to_stdout_cannot_corrupt_the_connection() {
    watchdog(WATCHDOG, "stray stdout write, taken over", async {
        // serve_stdio takes stdout over: the println! goes to stderr.
        let client = spawn(&[], HostConfig::default()).await;
        let logged = client.request("tools/call", &call_params("log", json!({"text": "stray"}))).await.unwrap();
        assert_eq!(logged.text(), "logged");
        ping(&client).await;
        let ended = client.shutdown().await;
        assert!(ended.stderr_tail.contains("println: stray"), "the stray line went to stderr");
        assert!(ended.exit_status.is_some_and(|s| s.success()));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_take_over_a_stray_stdout_write_breaks_the_connection_loudly() {
    watchdog(WATCHDOG, "stray stdout write, raw stdio", async {
        let client = spawn(&["--raw-stdio"], HostConfig::default()).await;
        ping(&client).await;
        // The println! lands in the HTTP/2 stream: the host's HTTP/2 layer
        // sees a broken frame and ends the connection; the call fails at
        // once with the reason, it does not hang.
        match client.request("tools/call", &call_params("log", json!({"text": "stray"}))).await {
            Err(Error::Closed(closed)) => assert!(closed.reason.contains("HTTP/2"), "{closed}"),
            other => panic!("expected the session to end, got {other:?}"),
        }
        assert!(matches!(client.request("ping", &json!({})).await, Err(Error::Closed(_))));
        client.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_during_a_large_output_then_a_second_request_is_answered() {
    watchdog(WATCHDOG, "reset during output", async {
        let client = spawn(&["--max-frame", "67108864"], HostConfig::default().with_max_receive(64 << 20)).await;
        for _ in 0..3 {
            let mut big = client.call("tools/call", &call_params("big", json!({"bytes": 32 << 20}))).await.unwrap();
            assert_eq!(big.started().await.unwrap(), 200, "the response is being sent");
            big.cancel();
            let echo = client.request("tools/call", &call_params("echo", json!({"text": "after"}))).await.unwrap();
            assert_eq!(echo.text(), "after");
        }
        assert_eq!(client.counters().cancelled, 3);
        client.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_kills_the_process_tree_the_call_started() {
    watchdog(WATCHDOG, "reset kills the call's children", async {
        let client = spawn(&[], HostConfig::default()).await;
        for round in 0..3 {
            let token = format!("sub-{round}");
            let mut call = client
                .call(
                    "tools/call",
                    &with_progress("subprocess", json!({"script": "sleep 30 & sleep 30; wait"}), &token),
                )
                .await
                .unwrap();
            let pid = child_pid(&mut call).await;
            assert!(alive(pid), "the tool's child runs");
            drop(call); // RST_STREAM(CANCEL)
            assert!(eventually_async(Duration::from_secs(30), || !alive(pid)).await, "child {pid} outlived the reset");
        }
        ping(&client).await;
        let ended = client.shutdown().await;
        let report = final_report(&ended.stderr_tail);
        assert_eq!(report["v2"]["resets"], json!(3), "{report}");
        assert_eq!(report["cancels"]["running"], json!(3), "{report}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_cancelled_still_cancels_and_ends_the_stream() {
    watchdog(WATCHDOG, "notifications/cancelled", async {
        let client = spawn(&[], HostConfig::default()).await;
        let call = client.call("tools/call", &call_params("slow", json!({"ms": 30_000}))).await.unwrap();
        let id = call.id().clone();
        // Once the call runs, cancel it the stdio way.
        assert!(eventually_async(Duration::from_secs(30), || client.stderr_tail().contains("tool_started")).await);
        client.notify("notifications/cancelled", &json!({"requestId": id, "reason": "test"})).await.unwrap();
        match call.response().await {
            Err(Error::Reset { reason }) => assert!(reason.starts_with("CANCEL"), "{reason}"),
            other => panic!("expected the stream to be reset, got {other:?}"),
        }
        ping(&client).await;
        let ended = client.shutdown().await;
        let report = final_report(&ended.stderr_tail);
        assert_eq!(
            report["cancels"]["running"].as_u64().unwrap() + report["cancels"]["queued"].as_u64().unwrap(),
            1,
            "{report}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ping_is_answered_while_a_64_mib_result_streams() {
    watchdog(WATCHDOG, "head-of-line", async {
        const BIG: u64 = 64 << 20;
        let client =
            Arc::new(spawn(&["--max-frame", "83886080"], HostConfig::default().with_max_receive(80 << 20)).await);
        for round in 0..2 {
            let mut big = client.call("tools/call", &call_params("big", json!({"bytes": BIG}))).await.unwrap();
            assert_eq!(big.started().await.unwrap(), 200, "the large result is being sent");
            let before = client.counters().body_bytes;
            let order = Arc::new(AtomicU8::new(0));
            let big_done = {
                let order = Arc::clone(&order);
                tokio::spawn(async move {
                    let response = big.response().await.expect("the large result arrives");
                    let at = order.fetch_add(1, Ordering::SeqCst);
                    (response.text().len() as u64, at)
                })
            };
            ping(&client).await;
            let ping_at = order.fetch_add(1, Ordering::SeqCst);
            let big_bytes_by_then = client.counters().body_bytes - before;
            let (len, big_at) = big_done.await.unwrap();
            assert_eq!(len, BIG);
            assert!(ping_at < big_at, "round {round}: the ping was answered before the 64 MiB result ended");
            // Not merely before its last window: the result was far from done.
            assert!(
                big_bytes_by_then < BIG * 3 / 4,
                "round {round}: {big_bytes_by_then} of {BIG} bytes of the result had arrived when the ping was answered"
            );
        }
        Arc::into_inner(client).unwrap().shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_nobody_reads_holds_up_no_other_stream() {
    watchdog(WATCHDOG, "per-stream flow control", async {
        // Within the dispatcher's budget for results waiting for window
        // (`writer_queue_bytes`, 16 MiB by default): a result larger than it
        // holds the budget alone until read (or the stream stalls out), so
        // tool results wait, as on the newline transport; pings never do.
        const BIG: u64 = 8 << 20;
        let client =
            Arc::new(spawn(&["--max-frame", "83886080"], HostConfig::default().with_max_receive(80 << 20)).await);
        let mut big = client.call("tools/call", &call_params("big", json!({"bytes": BIG}))).await.unwrap();
        assert_eq!(big.started().await.unwrap(), 200);
        // The large result's stream is not read: its window fills and the
        // server waits on that stream alone. Other calls are answered.
        for i in 0..20 {
            ping(&client).await;
            let text = format!("while stalled {i}");
            let echo = client.request("tools/call", &call_params("echo", json!({"text": text}))).await.unwrap();
            assert_eq!(echo.text(), text);
        }
        let response = big.response().await.expect("the stalled result arrives once read");
        assert_eq!(response.text().len() as u64, BIG);
        Arc::into_inner(client).unwrap().shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listen_carries_server_notifications_that_belong_to_no_request() {
    watchdog(WATCHDOG, "listen", async {
        let client = spawn(&[], HostConfig::default()).await;
        // No listener: the notification is dropped and counted.
        client.request("tools/call", &call_params("changed", json!({}))).await.unwrap();
        let mut listen = client.listen(json!({"toolsListChanged": true})).await.unwrap();
        let Some(Ok(Item::Notification(ack))) = listen.next().await else { panic!("no acknowledgment") };
        let ack: Value = serde_json::from_slice(&ack).unwrap();
        assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
        assert_eq!(ack["params"]["notifications"], json!({"toolsListChanged": true}));
        let subscription = ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"].clone();
        client.request("tools/call", &call_params("changed", json!({}))).await.unwrap();
        let Some(Ok(Item::Notification(changed))) = listen.next().await else { panic!("no change notification") };
        let changed: Value = serde_json::from_slice(&changed).unwrap();
        assert_eq!(changed["method"], "notifications/tools/list_changed");
        assert_eq!(changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], subscription);
        listen.cancel();
        ping(&client).await;
        let ended = client.shutdown().await;
        let report = final_report(&ended.stderr_tail);
        assert_eq!(report["v2"]["notifications_dropped"], json!(1), "{report}");
        assert_eq!(report["v2"]["listeners"], json!(1), "{report}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v2_host_fails_at_once_against_a_newline_server() {
    watchdog(WATCHDOG, "v2 host, newline server", async {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_lib_server"));
        command.kill_on_drop(true);
        // A generous startup deadline: the failure must come from the answer, not the clock.
        let config = HostConfig::default().with_startup_timeout(Duration::from_secs(60));
        let started = std::time::Instant::now();
        match Client::spawn(command, config).await {
            Err(error @ Error::Selection { .. }) => {
                let text = error.to_string();
                assert!(text.contains("speaks `stdio` (newline-delimited JSON-RPC)"), "{text}");
                assert!(text.contains("-32700"), "the preview quotes what the server wrote: {text}");
            }
            other => panic!("expected a selection error, got {other:?}"),
        }
        assert!(started.elapsed() < Duration::from_secs(60), "it did not wait out the startup deadline");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newline_host_fails_at_once_against_the_v2_server() {
    use mcp_framer_stdio::host::{RequestError, Session, SessionConfig};
    watchdog(WATCHDOG, "newline host, v2 server", async {
        let (session, _inbound) = Session::spawn(v2_command(&[]), SessionConfig::default()).unwrap();
        match session.request("ping", &json!({})).await {
            Err(RequestError::Rpc { code, message, .. }) => {
                assert_eq!(code, -32600);
                assert!(message.contains("`stdio-v2`") && message.contains("newline-delimited"), "{message}");
            }
            other => panic!("expected an error response, got {other:?}"),
        }
        // Then EOF: the next request fails as closed, at once.
        match session.request("ping", &json!({})).await {
            Err(RequestError::Closed(closed)) => {
                assert!(closed.stderr_tail().contains("selection mismatch"), "{closed}");
            }
            Err(RequestError::Write(_)) => {}
            other => panic!("expected the session to be closed, got {other:?}"),
        }
        session.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_the_server_and_its_tree() {
    watchdog(WATCHDOG, "shutdown", async {
        let client = spawn(&["--grace-ms", "300"], HostConfig::default()).await;
        let server_pid = client.pid().await.unwrap();
        let mut call = client
            .call("tools/call", &with_progress("subprocess", json!({"script": "sleep 30 & sleep 30; wait"}), "t"))
            .await
            .unwrap();
        let pid = child_pid(&mut call).await;
        let waiting = tokio::spawn(call.response());
        let ended = client.shutdown().await;
        assert!(ended.exit_status.is_some(), "the server exited: {ended:?}");
        assert!(!alive(server_pid));
        assert!(eventually_async(Duration::from_secs(30), || !alive(pid)).await, "the call's child {pid} is gone");
        assert!(waiting.await.unwrap().is_err(), "the call in flight failed");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eof_on_stdin_ends_the_server() {
    watchdog(WATCHDOG, "EOF", async {
        // Before the preface: exit 0 at once.
        let mut command = v2_command(&[]);
        command.stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped()).kill_on_drop(true);
        let mut child = command.spawn().unwrap();
        drop(child.stdin.take());
        let status = child.wait().await.unwrap();
        assert!(status.success(), "{status}");
        // After a session: closing the connection ends the server, exit 0.
        let client = spawn(&[], HostConfig::default()).await;
        ping(&client).await;
        let ended = client.shutdown().await;
        assert!(ended.exit_status.is_some_and(|s| s.success()), "{ended:?}");
        assert!(final_report(&ended.stderr_tail)["v2"]["connection_error"].is_null(), "{}", ended.stderr_tail);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn startup_failures_are_typed_and_come_at_once() {
    watchdog(WATCHDOG, "startup failures", async {
        let sh = |script: &str| {
            let mut command = tokio::process::Command::new("sh");
            command.args(["-c", script]);
            command
        };
        let config = HostConfig::default().with_startup_timeout(Duration::from_secs(60));
        // Exits without a word: the exit status and the stderr tail.
        match Client::spawn(sh("echo going away >&2; exit 3"), config.clone()).await {
            Err(Error::Startup { reason, exit_status, stderr_tail }) => {
                // Before or after the preface was written: either way the exit is named.
                assert!(reason.contains("closed its stdout") || reason.contains("Broken pipe"), "{reason}");
                assert_eq!(exit_status.and_then(|s| s.code()), Some(3));
                assert!(stderr_tail.contains("going away"), "{stderr_tail:?}");
            }
            other => panic!("expected a startup error, got {other:?}"),
        }
        // Neither HTTP/2 nor JSON.
        match Client::spawn(sh("echo hello; sleep 30"), config.clone()).await {
            Err(Error::Startup { reason, .. }) => {
                assert!(reason.contains("neither HTTP/2 nor JSON") && reason.contains("hello"), "{reason}")
            }
            other => panic!("expected a startup error, got {other:?}"),
        }
        // Silence: the startup deadline.
        let quick = HostConfig::default().with_startup_timeout(Duration::from_millis(500));
        match Client::spawn(sh("sleep 30"), quick).await {
            Err(Error::Startup { reason, .. }) => assert!(reason.contains("wrote nothing"), "{reason}"),
            other => panic!("expected a startup error, got {other:?}"),
        }
    })
    .await;
}

/// The reading half of an HTTP/2 client that never reads the server's
/// stdout: every read stays pending.
struct NeverRead;

impl tokio::io::AsyncRead for NeverRead {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        _: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Pending
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_that_stops_reading_stdout_ends_the_session_after_the_stall_timeout() {
    watchdog(WATCHDOG, "stalled writer", async {
        use tokio::io::AsyncReadExt;
        let mut command = v2_command(&["--stall-ms", "500", "--grace-ms", "200"]);
        command
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn().unwrap();
        let stdin = child.stdin.take().unwrap();
        let _stdout = child.stdout.take().unwrap(); // held, never read
        let mut stderr = child.stderr.take().unwrap();
        let (mut send, connection) = h2::client::handshake(tokio::io::join(NeverRead, stdin)).await.unwrap();
        let driving = tokio::spawn(connection);
        let body =
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"big","arguments":{"bytes":8000000}}}"#;
        let message = mcp_framer_jsonrpc::parse(body).unwrap();
        let headers = wire::request_headers("tools/call", &wire::Params::read(message.payload()), "2025-11-25");
        let mut request = http::Request::builder().method("POST").uri("http://localhost/mcp").body(()).unwrap();
        *request.headers_mut() = headers;
        let (_response, mut stream) = send.send_request(request, false).unwrap();
        stream.send_data(bytes::Bytes::from_static(body), true).unwrap();
        // The server ends the session on its own: it exits, its report says why.
        let status = child.wait().await.unwrap();
        assert!(status.success(), "{status}");
        let mut text = String::new();
        stderr.read_to_string(&mut text).await.unwrap();
        let report = final_report(&text);
        assert_eq!(report["v2"]["stalled"], json!(true), "{report}");
        driving.abort();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_stops_reading_stdin_ends_the_session_after_the_write_timeout() {
    watchdog(WATCHDOG, "stalled stdin", async {
        // A child that answers the preface with an empty SETTINGS frame, then
        // never reads its stdin.
        let mut command = tokio::process::Command::new("sh");
        command.args(["-c", r"printf '\000\000\000\004\000\000\000\000\000'; sleep 30"]);
        let config = HostConfig::default().with_write_timeout(Duration::from_millis(500));
        let client = Client::spawn(command, config).await.expect("a SETTINGS frame starts the session");
        // More than the pipe holds (the peer's default window, 64 KiB, plus the preface and headers).
        let body = ping_of_len(1, 200_000);
        let call = client.call_raw(Id::Number(1), "ping", body).await.unwrap();
        match call.response().await {
            Err(Error::Closed(closed)) => assert!(closed.reason.contains("stopped reading its stdin"), "{closed}"),
            other => panic!("expected the session to end, got {other:?}"),
        }
        let ended = client.shutdown().await;
        assert!(ended.exit_status.is_some(), "the child was stopped");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_answers_the_calls_in_flight_and_ends_the_server() {
    use rustix::process::{Pid, Signal, kill_process};
    watchdog(WATCHDOG, "SIGTERM", async {
        let client = spawn(&[], HostConfig::default()).await;
        let pid = client.pid().await.unwrap();
        let mut slow = client.call("tools/call", &call_params("slow", json!({"ms": 30_000}))).await.unwrap();
        // The call runs once its handler reported it; then the signal.
        assert!(eventually_async(Duration::from_secs(30), || client.stderr_tail().contains("tool_started")).await);
        kill_process(Pid::from_raw(pid as i32).unwrap(), Signal::TERM).unwrap();
        match slow.next().await {
            Some(Err(Error::Rpc { error, .. })) => {
                assert_eq!(error.code, -32603);
                assert!(error.message.contains("SIGTERM"), "{}", error.message);
            }
            other => panic!("expected the call to be answered -32603, got {other:?}"),
        }
        let ended = client.shutdown().await;
        assert_eq!(ended.exit_status.and_then(|s| s.code()), Some(128 + 15), "{ended:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_request_with_an_id_or_token_in_flight_is_refused_and_the_first_goes_on() {
    watchdog(WATCHDOG, "duplicate ids", async {
        let client = spawn(&[], HostConfig::default()).await;
        let echo = |id: i64, token: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"first"}},"_meta":{{"progressToken":"{token}"}}}}}}"#
            )
            .into_bytes()
        };
        let hold = |id: i64, token: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"ticks","arguments":{{"count":2,"ms":20000}},"_meta":{{"progressToken":"{token}"}}}}}}"#
            )
            .into_bytes()
        };
        let mut first = client.call_raw(Id::Number(77), "tools/call", hold(77, "tok")).await.unwrap();
        assert!(matches!(first.next().await, Some(Ok(Item::Notification(_)))), "the first call runs");
        for (id, token) in [(77, "other"), (78, "tok")] {
            match client.call_raw(Id::Number(id), "tools/call", echo(id, token)).await.unwrap().response().await {
                Err(Error::Rpc { status: 400, error }) => {
                    assert_eq!(error.code, -32600);
                    assert!(error.message.contains("in flight"), "{}", error.message);
                }
                other => panic!("expected 400 -32600 for id {id}, token {token}, got {other:?}"),
            }
        }
        // The first is untouched: cancel it; a fresh id is served.
        first.cancel();
        let fresh = client.call_raw(Id::Number(79), "tools/call", echo(79, "tok2")).await.unwrap();
        assert_eq!(fresh.response().await.unwrap().text(), "first");
        let ended = client.shutdown().await;
        let report = final_report(&ended.stderr_tail);
        assert_eq!(report["v2"]["duplicate_ids"], json!(2), "{report}");
        assert_eq!(report["duplicate_ids"], json!(0), "the dispatcher never saw them");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_beyond_a_stalled_streams_backlog_is_dropped_and_counted_never_lost() {
    watchdog(WATCHDOG, "progress backlog", async {
        const TICKS: u64 = 3000;
        // The host takes an event stream off the connection into a budget of
        // `max_receive` bytes of events not yet read; past it, that stream
        // waits for window. A small limit makes the budget small.
        let config = HostConfig::default().with_stream_window(16 << 10).with_max_receive(64 << 10);
        let client = spawn(&["--stream-backlog", "8192"], config).await;
        let mut ticks = client
            .call("tools/call", &with_progress("ticks", json!({"count": TICKS, "ms": 0}), "flood"))
            .await
            .unwrap();
        // The event stream is not read until the tool has sent every
        // progress notification: its window fills, the rest waits in the
        // stream's backlog, and what does not fit is dropped and counted.
        assert!(
            eventually_async(Duration::from_secs(60), || client.stderr_tail().contains(v2_server::TICKS_DONE)).await,
            "the tool ran to its end"
        );
        let mut received = 0;
        let result = loop {
            match ticks.next().await.expect("the stream goes on").unwrap() {
                Item::Notification(_) => received += 1,
                Item::Response(response) => break response,
            }
        };
        assert_eq!(result.text(), format!("ticked {TICKS}"), "the response is never dropped");
        ping(&client).await;
        let ended = client.shutdown().await;
        let report = final_report(&ended.stderr_tail);
        let dropped = report["v2"]["progress_dropped"].as_u64().unwrap();
        assert!(dropped > 0, "the backlog overflowed: {report}");
        assert_eq!(received + dropped, TICKS, "every progress notification was delivered or counted: {report}");
    })
    .await;
}
