//! The release criteria, one test each, with the real fixture server over
//! real pipes: a response just under the transport limit, just over it
//! (under both oversize policies), a giant single field, many small blocks,
//! malformed JSON, noisy stderr, an accidental log line on stdout, and a
//! cancellation during output. Each is followed by a small second request
//! that must succeed promptly (`host_support::SECOND_REQUEST`), unless the
//! policy ended the session; then the error and a restart are checked.

mod host_support;

use std::time::{Duration, Instant};

use host_support::{config, eventually, payload, reports, second_request, spawn, text, tool, watchdog};
use mcp_framer::{Config, FrameError, OversizePolicy};
use mcp_framer_e2e::hostile::report as hostile;
use mcp_framer_jsonrpc::Id;
use mcp_framer_stdio::host::{CloseReason, Inbound, RequestError, Session, SessionConfig, SkippedFrame};
use serde_json::json;

/// The transport limit used by the limit tests.
const LIMIT: usize = 64 * 1024;

fn limited(oversize: OversizePolicy) -> SessionConfig {
    config().with_framer(Config::DEFAULT.with_max_frame(LIMIT).with_oversize(oversize))
}

/// A `sized` tool call whose response line is exactly `frame_bytes` long.
fn sized(frame_bytes: usize) -> serde_json::Value {
    tool("sized", json!({"frame_bytes": frame_bytes}))
}

#[tokio::test]
async fn a_response_just_under_and_exactly_at_the_limit_is_delivered() {
    watchdog("just under the limit", async {
        let (session, _inbound) = spawn(limited(OversizePolicy::Skip));
        for frame_bytes in [LIMIT - 1, LIMIT] {
            let response = session.request("tools/call", &sized(frame_bytes)).await.expect("delivered");
            assert_eq!(response.frame().len(), frame_bytes);
        }
        let metrics = session.metrics();
        assert_eq!((metrics.largest_frame, metrics.oversize_frames, metrics.discarded_bytes), (LIMIT as u64, 0, 0));
        second_request(&session).await;
        session.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_response_just_over_the_limit_is_skipped_and_the_session_continues() {
    watchdog("just over the limit, Skip", async {
        let (session, mut inbound) = spawn(limited(OversizePolicy::Skip));
        let request = session.start("tools/call", &sized(LIMIT + 1)).await.expect("sent");
        let Some(Inbound::Skipped(SkippedFrame::Oversize { len, id, .. })) = inbound.recv().await else {
            panic!("the oversize frame is reported")
        };
        assert_eq!(len, LIMIT as u64 + 1);
        // Never parsed whole, but its id is recovered: the request fails at
        // once, and nothing is cancelled (it was answered).
        assert_eq!(id, Some(Id::Number(request.id())));
        let failed = request.response().await;
        assert!(
            matches!(&failed, Err(RequestError::Oversize { len, max, .. }) if *len == LIMIT as u64 + 1 && *max == LIMIT as u64),
            "{failed:?}"
        );
        let metrics = session.metrics();
        assert_eq!((metrics.oversize_frames, metrics.discarded_bytes), (1, LIMIT as u64 + 1));
        assert_eq!((metrics.cancellations_sent, metrics.oversize_responses), (0, 1));
        assert!(session.closed().is_none());
        second_request(&session).await;
        session.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_response_just_over_the_limit_under_fail_ends_the_session_and_a_restart_works() {
    watchdog("just over the limit, Fail", async {
        // No exit grace at all: the kill's own wait (`after_kill`) is what
        // lets the close carry the exit status, however loaded the machine.
        let (session, _inbound) = spawn(limited(OversizePolicy::Fail).with_exit_grace(Duration::ZERO));
        let failed = session.request("tools/call", &sized(LIMIT + 1)).await;
        let Err(RequestError::Closed(closed)) = failed else { panic!("the session must end: {failed:?}") };
        assert!(
            matches!(closed.reason(), CloseReason::Oversize(FrameError::Oversize { max_frame, seen })
                if *max_frame == LIMIT as u64 && *seen > LIMIT as u64),
            "{closed}"
        );
        // The child was killed on purpose: SIGKILL (its job terminated on
        // Windows), not a normal exit.
        let status = closed.exit_status().expect("the child was reaped");
        assert!(mcp_framer_e2e::support::killed(&status), "{closed}");
        // The message is for humans: its wording is its contract.
        let message = closed.to_string();
        assert!(message.contains("transport limit") && message.contains("killed"), "{message}");
        // Later requests fail at once with the same error.
        assert!(matches!(session.request("ping", &()).await, Err(RequestError::Closed(_))));
        assert_eq!(session.metrics().exit_status, Some(status));

        // Restart: a new session works.
        let (restarted, _inbound) = spawn(limited(OversizePolicy::Fail));
        second_request(&restarted).await;
        restarted.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_giant_single_field_is_delivered_whole() {
    watchdog("giant field", async {
        let (session, _inbound) = spawn(config());
        let bytes = 4 << 20;
        let response = session.request("tools/call", &tool("giant_field", json!({"bytes": bytes}))).await.expect("ok");
        let result = payload(&response);
        let blob = result["structuredContent"]["blob"].as_str().expect("blob");
        assert_eq!(blob.len(), bytes);
        assert!(blob.bytes().all(|b| b.is_ascii_alphanumeric()));
        second_request(&session).await;
        session.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn many_small_blocks_are_delivered() {
    watchdog("many small blocks", async {
        let (session, _inbound) = spawn(config());
        let arguments = json!({"count": 20_000, "block_bytes": 16});
        let response = session.request("tools/call", &tool("many_blocks", arguments)).await.expect("ok");
        let result = payload(&response);
        let blocks = result["content"].as_array().expect("content");
        assert_eq!(blocks.len(), 20_000);
        assert!(blocks.iter().all(|block| block["text"].as_str().is_some_and(|t| t.len() == 16)));
        assert_eq!(blocks[19_999]["text"], "19999:bbbbbbbbbb");
        second_request(&session).await;
        session.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn malformed_json_is_counted_reported_and_skipped() {
    watchdog("malformed JSON", async {
        let (session, mut inbound) = spawn(config());
        let response = session.request("tools/call", &tool("malformed", json!({}))).await.expect("ok");
        assert_eq!(text(&response), "malformed line sent before this frame");
        let Some(Inbound::Skipped(SkippedFrame::Invalid { error, excerpt, len })) = inbound.recv().await else {
            panic!("the malformed line is reported")
        };
        assert_eq!(error.code(), -32700);
        assert!(excerpt.to_text().starts_with(r#"{"jsonrpc":"2.0","id":@@garbage"#), "{excerpt:?}");
        assert!(len <= 120 || !excerpt.is_whole());
        let metrics = session.metrics();
        assert_eq!((metrics.parse_errors, metrics.non_json_lines, metrics.frames), (1, 0, 2));
        second_request(&session).await;
        session.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn noisy_stderr_never_blocks_the_session() {
    watchdog("50 MiB of stderr", async {
        let (session, _inbound) = spawn(config());
        let flood = 50 << 20;
        let response = session.request("tools/call", &tool("stderr_flood", json!({"bytes": flood}))).await.expect("ok");
        assert!(text(&response).starts_with(&format!("wrote {flood} bytes to stderr")), "{}", text(&response));
        second_request(&session).await;
        // Everything written before the response was drained and counted;
        // only the tail is kept.
        eventually(&session, "stderr drained", |s| s.metrics().stderr_bytes >= flood as u64).await;
        let metrics = session.metrics();
        assert!(metrics.stderr_lines > flood as u64 / 100, "{} lines", metrics.stderr_lines);
        let tail = session.stderr_tail();
        // The last 64 KiB, after a marker line with the counts.
        assert!(tail.starts_with("[preview: last "), "{}", &tail[..100]);
        assert!(tail.len() <= 64 * 1024 + 100 && tail.len() > 32 * 1024, "tail of {} bytes", tail.len());
        assert!(tail.contains("WARN stderr_flood line"));
        session.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn an_accidental_log_line_on_stdout_is_reported_and_skipped() {
    watchdog("log line on stdout", async {
        let (session, mut inbound) = spawn(config());
        let line = "INFO server started on port 8080 \u{1f680}";
        let response = session.request("tools/call", &tool("log_line", json!({"text": line}))).await.expect("ok");
        assert_eq!(text(&response), "log line sent before this frame");
        let Some(Inbound::Skipped(SkippedFrame::NotJson { len, excerpt })) = inbound.recv().await else {
            panic!("the log line is reported")
        };
        assert_eq!((len, excerpt.to_text(), excerpt.is_whole()), (line.len(), line.to_owned(), true));
        let metrics = session.metrics();
        assert_eq!((metrics.parse_errors, metrics.non_json_lines), (1, 1));
        second_request(&session).await;
        session.shutdown().await;
    })
    .await;
}

/// Pieces of [`slow_stream`]'s response.
const CHUNKS: u64 = 300;

/// A slow response: `CHUNKS` pieces of 4 KiB, 100 ms apart (30 s in all
/// unless cancelled): far longer than the second request may take, so a
/// cancellation that did not stop it shows there too.
fn slow_stream() -> serde_json::Value {
    tool("slow_stream", json!({"chunks": CHUNKS, "interval_ms": 100, "chunk_bytes": 4096}))
}

#[tokio::test]
async fn a_cancellation_during_output_reaches_the_server_and_the_late_response_is_ignored() {
    watchdog("cancellation during output", async {
        let (session, _inbound) = spawn(config());
        let request = session.start("tools/call", &slow_stream()).await.expect("sent");
        // Wait until the response has started to arrive.
        eventually(&session, "first bytes of the slow response", |s| s.metrics().stdout_bytes > 0).await;
        assert!(session.cancel(request.id(), "the user pressed stop").await);
        assert!(matches!(request.response().await, Err(RequestError::Cancelled { reason }) if reason == "the user pressed stop"));
        // The server finishes the frame at once (a frame cannot be
        // retracted); the host drains it, counts it and ignores it.
        eventually(&session, "late response drained", |s| s.metrics().late_responses == 1).await;
        second_request(&session).await;
        // The server's report lines: it read the cancellation while the
        // request was in flight, and stopped pacing mid-frame.
        assert_eq!(reports(&session, hostile::CANCEL), [json!({"id": 1, "in_flight": true})]);
        let cancelled = reports(&session, hostile::CANCELLED);
        let [cancelled] = &cancelled[..] else { panic!("one cancelled report: {cancelled:?}") };
        assert_eq!(cancelled["id"], 1);
        let bytes = cancelled["bytes"].as_u64().expect("bytes");
        assert!(bytes > 0 && bytes < CHUNKS * 4096, "cancelled mid-frame: {cancelled}");
        let metrics = session.metrics();
        assert_eq!((metrics.cancellations_sent, metrics.responses, metrics.late_responses), (1, 1, 1));
        session.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_timeout_sends_the_cancellation_itself() {
    watchdog("timeout during output", async {
        let (session, _inbound) = spawn(config());
        let request = session.start("tools/call", &slow_stream()).await.expect("sent");
        let sent = Instant::now();
        // The deadline falls during the output: 300 ms after its first bytes
        // arrived (a loaded machine may take a while to get there).
        eventually(&session, "first bytes of the slow response", |s| s.metrics().stdout_bytes > 0).await;
        let timed_out = request.with_timeout(sent.elapsed() + Duration::from_millis(300)).response().await;
        assert!(
            matches!(&timed_out, Err(RequestError::TimedOut { cancellation_sent: true, method, .. }) if &**method == "tools/call"),
            "{timed_out:?}"
        );
        eventually(&session, "late response drained", |s| s.metrics().late_responses == 1).await;
        second_request(&session).await;
        assert_eq!(reports(&session, hostile::CANCEL), [json!({"id": 1, "in_flight": true})]);
        let metrics = session.metrics();
        assert_eq!((metrics.timeouts, metrics.cancellations_sent), (1, 1));
        session.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn initialize_is_never_cancelled() {
    watchdog("initialize timeout", async {
        // A server that never answers and echoes its stdin to stderr.
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_proc_fixture"));
        command.arg("stdin-to-stderr");
        let (session, _inbound) = Session::spawn(command, config()).expect("spawn proc_fixture");
        let short = Duration::from_millis(100);
        let init = session.start("initialize", &json!({"protocolVersion": "2025-11-25"})).await.expect("sent");
        let Err(RequestError::TimedOut { cancellation_sent, .. }) = init.with_timeout(short).response().await else {
            panic!("initialize got an answer from stdin-to-stderr?")
        };
        assert!(!cancellation_sent, "initialize MUST NOT be cancelled");
        let ping = session.start("ping", &()).await.expect("sent");
        let explicit = session.start("ping", &()).await.expect("sent");
        assert!(!session.cancel(1, "never").await, "initialize cannot be cancelled explicitly either");
        assert!(session.cancel(explicit.id(), "explicit").await);
        let Err(RequestError::TimedOut { cancellation_sent, .. }) = ping.with_timeout(short).response().await else {
            panic!("ping got an answer from stdin-to-stderr?")
        };
        assert!(cancellation_sent);
        drop(explicit);
        let report = session.shutdown().await;
        let sent: Vec<&str> = report.stderr_tail.lines().filter(|l| l.contains("notifications/cancelled")).collect();
        assert_eq!(
            sent,
            [
                r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3,"reason":"explicit"}}"#,
                r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"reason":"timed out after 100ms"}}"#,
            ]
        );
        assert_eq!(report.metrics.cancellations_sent, 2);
        assert_eq!(report.metrics.timeouts, 2);
    })
    .await;
}
