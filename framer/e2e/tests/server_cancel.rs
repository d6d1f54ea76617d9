//! Cancellation through the real library (`lib_server` fixture, real pipes):
//! one test per state a request can be in when `notifications/cancelled`
//! arrives — queued, running a remote operation, running a subprocess, writing
//! its response — plus late and unknown cancellations. Each is followed by a
//! small second request that must be answered within 1 s.

#![cfg(unix)]

mod server_support;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpListener;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use mcp_framer_e2e::lib_server::report as lib_server;
use mcp_framer_e2e::support::eventually;
use mcp_framer_e2e::support::proc::{live_group_members, pid_exists};
use serde_json::json;
use server_support::{Fixture, SECOND_REQUEST, WAIT};

/// No frame of `finished` answers any of `ids`.
fn assert_no_response(frames: &[server_support::Frame], ids: &[i64]) {
    for frame in frames {
        for id in ids {
            assert_ne!(frame.id(), Some(&json!(id)), "cancelled request {id} got a response: {:?}", frame.value);
        }
    }
}

/// Queued behind the concurrency bound: the request never starts and gets no
/// response; the loop still answers; the slot it waited for is freed.
#[test]
fn cancel_while_queued_never_starts_and_sends_nothing() {
    let mut server = Fixture::start(&["--max-concurrent", "1"]);
    server.call(1, "slow", json!({"ms": 30_000}));
    server.wait_started(1, WAIT);
    server.call(2, "slow", json!({"ms": 30_000}));
    server.cancel(json!(2));
    server.wait_cancellation(2, "queued", WAIT);

    // Answered at once although the only slot is taken.
    let sent = Instant::now();
    server.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}));
    assert_eq!(server.response(3, SECOND_REQUEST)["result"], json!({}));
    assert!(sent.elapsed() < SECOND_REQUEST);

    // Free the only slot; a tool call now runs at once.
    server.cancel(json!(1));
    server.wait_cancellation(1, "running", WAIT);
    let sent = Instant::now();
    server.call(4, "echo", json!({"text": "after"}));
    assert_eq!(server.response(4, SECOND_REQUEST)["result"]["content"][0]["text"], "after");
    assert!(sent.elapsed() < SECOND_REQUEST);

    let done = server.finish();
    assert!(done.status.success());
    assert_no_response(&done.frames, &[1, 2]);
    assert_eq!(done.report["tools_started"], json!([1, 4]), "request 2 never started");
    assert_eq!(done.report["cancels"]["queued"], 1);
    assert_eq!(done.report["cancels"]["running"], 1);
    assert_eq!(done.report["cancelled_at_shutdown"], 0);
}

/// During a remote operation: a local TCP server streams one byte every
/// 5 ms (for two minutes at most, longer than any wait here); the
/// cancellation aborts the read and the server's connection is closed.
#[test]
fn cancel_during_remote_read_closes_the_connection() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    listener.set_nonblocking(true).unwrap();
    let (closed_tx, closed_rx) = mpsc::channel();
    let streamed = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let streamed_by_server = streamed.clone();
    // Bounded: gives up after two minutes in all, and stops at the first
    // failed write.
    let streamer = thread::spawn(move || {
        let deadline = Instant::now() + 2 * WAIT;
        let mut conn = loop {
            match listener.accept() {
                Ok((conn, _)) => break conn,
                Err(e) if e.kind() == ErrorKind::WouldBlock && Instant::now() < deadline => {
                    thread::sleep(Duration::from_millis(5));
                }
                Err(e) => panic!("no connection: {e}"),
            }
        };
        conn.set_nonblocking(false).unwrap();
        conn.set_read_timeout(Some(Duration::from_millis(1))).unwrap();
        let mut sent = 0u64;
        while Instant::now() < deadline {
            // A read of 0 bytes is the peer's FIN; a failed write its RST.
            let eof = matches!(conn.read(&mut [0u8; 16]), Ok(0));
            if eof || conn.write_all(b"x").is_err() {
                let _ = closed_tx.send((Instant::now(), sent));
                return;
            }
            sent += 1;
            streamed_by_server.store(sent, std::sync::atomic::Ordering::Relaxed);
            thread::sleep(Duration::from_millis(5));
        }
    });

    let mut server = Fixture::start(&[]);
    server.call(1, "slow_read", json!({"addr": addr}));
    server.wait_report(lib_server::CONNECTED, WAIT, |fields| fields["id"] == 1);
    // The read is under way: some bytes have flowed.
    let flowing = Instant::now() + WAIT;
    while streamed.load(std::sync::atomic::Ordering::Relaxed) < 10 {
        assert!(Instant::now() < flowing, "the slow TCP server never got to stream");
        thread::sleep(Duration::from_millis(5));
    }
    let cancelled = Instant::now();
    server.cancel(json!(1));
    server.wait_cancellation(1, "running", WAIT);

    server.call(2, "echo", json!({"text": "next"}));
    assert_eq!(server.response(2, SECOND_REQUEST)["result"]["content"][0]["text"], "next");
    // The cancellation was handled and the next call answered promptly, not
    // when the read would have ended (never, or at the streamer's deadline).
    assert!(cancelled.elapsed() < 2 * SECOND_REQUEST, "{:?}", cancelled.elapsed());

    let (closed_at, sent) = closed_rx.recv_timeout(WAIT).expect("the connection was closed");
    assert!(sent > 0, "bytes were streaming before the cancellation");
    assert!(closed_at.duration_since(cancelled) < SECOND_REQUEST, "{:?}", closed_at.duration_since(cancelled));
    streamer.join().unwrap();

    let done = server.finish();
    assert_no_response(&done.frames, &[1]);
    assert_eq!(done.report["cancels"]["running"], 1);
}

/// During a subprocess: `sh` with two `sleep`s in its process group (5
/// minutes, longer than any wait here); after the cancellation the child is
/// reaped and no process of its group is alive.
#[test]
fn cancel_during_subprocess_kills_the_process_group() {
    let mut server = Fixture::start(&[]);
    server.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "subprocess", "arguments": {"script": "sleep 300 & sleep 300; wait"},
        "_meta": {"progressToken": "p1"}}}));
    let progress = server.notification("notifications/progress", WAIT);
    assert_eq!(progress["params"]["progressToken"], "p1");
    let message = progress["params"]["message"].as_str().unwrap();
    let pid: u32 = message.strip_prefix("pid ").unwrap().parse().unwrap();
    let spawned = server.wait_report(lib_server::CHILD_SPAWNED, WAIT, |fields| fields["id"] == 1);
    assert_eq!(spawned["pid"], pid, "the progress message and the report name the same child");
    assert!(eventually(WAIT, || live_group_members(pid).len() == 3), "sh and two sleeps run in group {pid}");

    server.cancel(json!(1));
    server.wait_cancellation(1, "running", WAIT);
    server.call(2, "echo", json!({"text": "next"}));
    assert_eq!(server.response(2, SECOND_REQUEST)["result"]["content"][0]["text"], "next");

    assert!(eventually(WAIT, || !pid_exists(pid)), "child {pid} killed and reaped");
    assert!(
        eventually(WAIT, || live_group_members(pid).is_empty()),
        "group {pid} still has live members: {:?}",
        live_group_members(pid)
    );
    let done = server.finish();
    assert_no_response(&done.frames, &[1]);
    assert_eq!(done.report["cancels"]["running"], 1);
}

/// After the final response started: stdout is not drained, so the writer
/// is blocked inside a 4 MiB frame; the cancellation is read anyway (stdin
/// is never blocked by stdout), changes nothing, and once the host drains
/// again the frame completes whole and the next request is answered.
#[test]
fn cancel_after_response_started_completes_the_frame() {
    const BYTES: usize = 4 << 20;
    let mut server = Fixture::start_paused(&[]);
    server.call(1, "big", json!({"bytes": BYTES}));
    let first = server.first_stdout_read(2 * WAIT);
    assert!(first > 0 && first < BYTES, "the frame is partly out: {first} bytes read");
    server.cancel(json!(1));
    server.wait_cancellation(1, "writing", WAIT);
    server.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}));
    // The ping is read while stdout is still blocked: stdin never waits for
    // stdout. (Its answer can only come after the late frame.)
    server.wait_stdin_read(WAIT);

    server.resume_stdout();
    // The host side ignores the late response: it only checks that the frame
    // is whole (valid JSON of the full size) and carries on.
    let late = server.next_frame(WAIT);
    assert_eq!(late.id(), Some(&json!(1)));
    assert_eq!(late.json()["result"]["content"][0]["text"].as_str().map(str::len), Some(BYTES));
    let ping = server.response_frame(2, SECOND_REQUEST);
    assert_eq!(ping.json()["result"], json!({}));
    // Timed from the end of the late frame: the host's own parsing of 4 MiB
    // (a debug build) is not the server's latency.
    assert!(ping.at.duration_since(late.at) < SECOND_REQUEST);

    let done = server.finish();
    assert!(done.frames.iter().all(|f| f.value.is_ok()), "only whole frames");
    assert_eq!(done.report["cancels"]["writing"], 1);
    assert_eq!(done.report["frames_out"], 2);
}

/// A cancel for a completed request, for an id never seen, for a string id
/// that only looks like a number id, for `initialize`, and malformed ones:
/// all ignored, and the session carries on.
#[test]
fn late_unknown_and_malformed_cancels_are_harmless() {
    let mut server = Fixture::start(&[]);
    server.send(&json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                        "params": {"protocolVersion": "2025-11-25", "capabilities": {}}}));
    assert_eq!(server.response(0, WAIT)["result"]["protocolVersion"], "2025-11-25");
    server.call(1, "echo", json!({"text": "done"}));
    assert_eq!(server.response(1, WAIT)["result"]["content"][0]["text"], "done");

    server.cancel(json!(1)); // late
    server.cancel(json!(999)); // unknown
    server.cancel(json!("1")); // a string id is another id
    server.cancel(json!(0)); // initialize cannot be cancelled
    server.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled"}));
    server.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": {"x": 1}}}));
    server.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"reason": "no id"}}));
    server.wait_report(lib_server::TRACE, WAIT, |fields| {
        fields["message"] == "cancellation ignored: initialize cannot be cancelled" && fields["id"] == "0"
    });
    server.wait_cancellation(999, "done-or-unknown", WAIT);

    let sent = Instant::now();
    server.call(2, "echo", json!({"text": "still here"}));
    assert_eq!(server.response(2, SECOND_REQUEST)["result"]["content"][0]["text"], "still here");
    assert!(sent.elapsed() < SECOND_REQUEST);

    let done = server.finish();
    let ids: Vec<_> = done.frames.iter().map(|f| f.id().cloned()).collect();
    assert_eq!(ids, [Some(json!(0)), Some(json!(1)), Some(json!(2))], "one response per request, nothing else");
    // The late cancel may still find request 1 in the writing state if it is
    // read before the writer has retired the frame it just wrote: a race the
    // spec allows, and harmless either way.
    let (ignored, writing) = (&done.report["cancels"]["ignored"], &done.report["cancels"]["writing"]);
    assert_eq!(ignored.as_u64().unwrap() + writing.as_u64().unwrap(), 4, "{}", done.report);
    assert!(ignored.as_u64().unwrap() >= 3, "unknown, string and initialize ids are ignored: {}", done.report);
    assert_eq!(done.report["cancels"]["malformed"], 3);
    assert_eq!(done.report["malformed"], 0, "a malformed cancel is ignored, not answered");
}

/// Not a cancellation, the same guarantee: a handler that returns while its
/// child process (handle leaked, a 5-minute `sleep`) and a task are still
/// running does not leave them behind; the request's scope stops them when
/// the handler returns.
#[test]
fn producers_do_not_outlive_their_request() {
    let mut server = Fixture::start(&[]);
    server.call(1, "leak", json!({}));
    let response = server.response(1, WAIT);
    let pid: u32 = response["result"]["content"][0]["text"].as_str().unwrap().parse().unwrap();
    assert!(eventually(WAIT, || live_group_members(pid).is_empty()), "the leaked child {pid} is still alive");
    let done = server.finish();
    assert!(done.status.success());
}
