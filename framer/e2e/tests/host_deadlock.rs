//! The failure mode and its fix, with real processes and real pipes.
//!
//! 1. A parent that never reads the child's stdout asks for an 8 MiB
//!    response: after 1 s the child is alive, has not finished writing, and
//!    reported backpressure on stderr. Then it is killed.
//! 2. The same request through the host transport completes (or, under a
//!    smaller limit, is refused by it) and the child finishes its write.

#![cfg(unix)]

mod host_support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use host_support::{config, fixture_stats, payload, second_request, spawn, text, tool, watchdog};
use mcp_framer::{Config, OversizePolicy};
use mcp_framer_e2e::hostile::report as hostile;
use mcp_framer_e2e::report;
use mcp_framer_jsonrpc::Id;
use mcp_framer_stdio::host::{Inbound, RequestError, ShutdownStage, SkippedFrame};
use serde_json::json;

const EIGHT_MIB: usize = 8 << 20;

/// Kills the child when dropped: the watchdog of the naive-parent test, which
/// holds no session (every wait in it is bounded, so it ends, and the drop
/// kills the child, even when an assertion fails).
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_parent_that_never_reads_stdout_deadlocks_the_server() {
    let mut child = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_hostile_server"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn hostile_server"),
    );
    // Keep stdout open and never read it: that is the bug being reproduced.
    let _stdout = child.0.stdout.take().expect("stdout");
    let stderr = child.0.stderr.take().expect("stderr");
    let (lines, stderr_lines) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let mut stdin = child.0.stdin.take().expect("stdin");
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                         "params": {"name": "big", "arguments": {"bytes": EIGHT_MIB}}});
    writeln!(stdin, "{request}").expect("write the request");

    // The first report comes once a write() has blocked for 50 ms (building
    // 8 MiB takes the unoptimized fixture a moment, longer on a loaded
    // machine, so wait for it, bounded by a hang guard).
    let mut stderr = Vec::new();
    loop {
        let line = stderr_lines.recv_timeout(Duration::from_secs(60)).unwrap_or_else(|e| {
            panic!("no backpressure reported on stderr within 60 s ({e}): {stderr:#?}");
        });
        let first = report::parse(&line, hostile::BACKPRESSURE).is_some();
        stderr.push(line);
        if first {
            break;
        }
    }
    thread::sleep(Duration::from_secs(1));
    assert!(child.0.try_wait().expect("try_wait").is_none(), "the child should still be alive, blocked in write()");
    stderr.extend(stderr_lines.try_iter());
    let stderr = stderr.join("\n");
    let last = report::last(&stderr, hostile::BACKPRESSURE).expect("a backpressure report");
    let (done, len) =
        (last["frame_done"].as_u64().expect("frame_done"), last["frame_len"].as_u64().expect("frame_len"));
    assert!(len > EIGHT_MIB as u64, "the frame holds the 8 MiB text plus the rest of its message: {last}");
    assert!(done < len, "the child must not have finished writing: {last}");
    assert!(last["blocked_ms"].as_u64().expect("blocked_ms") >= 50, "{last}");
    assert_eq!(report::last(&stderr, hostile::STATS), None, "the child must not have finished: {stderr}");
    drop(child); // kill it
}

#[tokio::test]
async fn the_transport_drains_the_same_response_and_the_child_finishes() {
    watchdog("8 MiB through the transport", async {
        let (session, _inbound) = spawn(config());
        let response = session
            .request("tools/call", &tool("big", json!({"bytes": EIGHT_MIB})))
            .await
            .unwrap_or_else(|e| panic!("the 8 MiB request failed: {e}"));
        let text = text(&response);
        assert_eq!(text.len(), EIGHT_MIB);
        assert!(text.bytes().all(|b| b == b'x'));

        // The child finished its write: every byte it wrote reached us.
        let stats = fixture_stats(&session).await;
        let metrics = session.metrics();
        assert_eq!(stats["frames"], 1);
        assert_eq!(stats["bytes_written"], response.frame().len() as u64 + 1);
        assert_eq!(metrics.largest_frame, response.frame().len() as u64);
        second_request(&session).await;

        let shutdown = session.shutdown().await;
        assert_eq!(shutdown.stage, ShutdownStage::StdinClosed);
        assert!(shutdown.exit_status.is_some_and(|s| s.success()));
        // The child ended normally: its last line is the final stats report,
        // which counts every byte it wrote (all of which we read).
        let last = shutdown.stderr_tail.lines().last().unwrap_or_default();
        let stats = report::parse(last, hostile::STATS).unwrap_or_else(|| panic!("not a stats line: {last:?}"));
        assert_eq!(stats["bytes_written"], shutdown.metrics.stdout_bytes, "{stats}");
    })
    .await;
}

#[tokio::test]
async fn the_transport_refuses_the_same_response_by_its_limit_and_the_child_finishes() {
    watchdog("8 MiB over a 1 MiB limit", async {
        let limit = 1 << 20;
        let mut config = config();
        config.framer = Config::DEFAULT.with_max_frame(limit).with_oversize(OversizePolicy::Skip);
        let (session, mut inbound) = spawn(config);
        let request = session.start("tools/call", &tool("big", json!({"bytes": EIGHT_MIB}))).await.expect("sent");
        // A frame discarded by the limit is never parsed whole; its id is
        // recovered from its head, so its request fails at once, naming the
        // frame's exact length and the limit, and no cancellation is sent.
        let Some(Inbound::Skipped(SkippedFrame::Oversize { len, id, .. })) = inbound.recv().await else {
            panic!("the oversize frame is reported")
        };
        assert!(len > EIGHT_MIB as u64);
        let request_id = request.id();
        assert_eq!(id, Some(Id::Number(request_id)));
        let refused = request.response().await;
        assert!(
            matches!(&refused, Err(RequestError::Oversize { len: l, max, .. }) if *l == len && *max == limit as u64),
            "{refused:?}"
        );
        assert!(!session.cancel(request_id, "nothing left to cancel").await);

        // The child finished writing all 8 MiB: nothing it wrote was left in
        // the pipe, and the discarded bytes were never held.
        let stats = fixture_stats(&session).await;
        let metrics = session.metrics();
        assert_eq!(stats["bytes_written"], len + 1);
        assert_eq!((metrics.oversize_frames, metrics.discarded_bytes, metrics.oversize_in_progress), (1, len, 0));
        assert_eq!((metrics.oversize_responses, metrics.cancellations_sent, metrics.timeouts), (1, 0, 0));
        assert!(metrics.buffered_high_water <= (limit + 1 + Config::default().read_size) as u64);
        assert_eq!(payload(&session.request("ping", &()).await.expect("ping")), json!({}));
        second_request(&session).await;
        session.shutdown().await;
    })
    .await;
}
