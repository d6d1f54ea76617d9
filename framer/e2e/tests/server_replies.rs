//! The reply guarantee through the real library (`lib_server` fixture, real
//! pipes): every request gets exactly one response while the host reads
//! stdout, whatever arrives in one write; the stdin loop's replies never
//! wait behind large results; and past its bounded reply backlog the loop
//! stops reading stdin (counted, logged) instead of dropping replies.

#![cfg(unix)]

mod server_support;

use std::collections::HashMap;
use std::time::Instant;

use mcp_framer_e2e::lib_server::report as lib_server;
use serde_json::{Value, json};
use server_support::{Fixture, SECOND_REQUEST, WAIT};

/// `count` requests of five kinds, one line each, ids `0..count`, with the
/// error code each must get (`None`: a result).
fn burst(count: i64) -> (Vec<u8>, HashMap<i64, Option<i64>>) {
    let (mut bytes, mut expected) = (Vec::new(), HashMap::new());
    for id in 0..count {
        let (line, code) = match id % 5 {
            0 => (json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"}), None),
            1 => (json!({"jsonrpc": "2.0", "id": id, "method": "ping"}), None),
            2 => (json!({"jsonrpc": "2.0", "id": id, "method": "no/such/method"}), Some(-32601)),
            3 => (
                json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "no_such_tool"}}),
                Some(-32602),
            ),
            _ => (json!({"jsonrpc": "1.0", "id": id, "method": "ping"}), Some(-32600)),
        };
        bytes.extend(serde_json::to_vec(&line).unwrap());
        bytes.push(b'\n');
        expected.insert(id, code);
    }
    (bytes, expected)
}

/// Sends the burst in one write, drains stdout the whole time, and checks
/// that each request got exactly one response, of the right kind; returns
/// the report.
fn one_response_each(args: &[&str], count: i64) -> Value {
    let (bytes, expected) = burst(count);
    let mut server = Fixture::start(args);
    let started = Instant::now();
    server.send_raw(&bytes);
    let done = server.finish();
    assert!(done.status.success(), "{:?}", done.status);
    let mut answered: HashMap<i64, Option<i64>> = HashMap::new();
    for frame in &done.frames {
        let value = frame.json();
        let id = value["id"].as_i64().unwrap_or_else(|| panic!("a response without a usable id: {value}"));
        let code = value.get("error").map(|error| error["code"].as_i64().unwrap());
        assert!(answered.insert(id, code).is_none(), "request {id} answered twice");
    }
    assert_eq!(answered.len(), expected.len(), "requests answered: {} of {count}", answered.len());
    assert_eq!(answered, expected, "each answered as its kind requires");
    let report = done.report;
    assert_eq!(report["replies_dropped"], 0, "{report}");
    assert_eq!(report["frames_out"], count, "{report}");
    eprintln!(
        "{count} requests in one write ({} bytes), args {args:?}: {} answered in {:?}; stdin pauses {}",
        bytes.len(),
        answered.len(),
        started.elapsed(),
        report["stdin_pauses"]
    );
    report
}

/// The default configuration: 50,000 requests, 10,000 of them `tools/list`
/// (some 20 MB of replies), all answered exactly once.
#[test]
fn a_burst_of_50000_requests_in_one_write_gets_one_response_each() {
    let report = one_response_each(&[], 50_000);
    assert_eq!(report["requests"], 40_000, "{report}");
    assert_eq!(report["malformed"], 10_000, "{report}");
}

/// With a 4 KiB reply backlog the loop must pause stdin again and again
/// while the host drains: still one response per request.
#[test]
fn a_burst_through_a_small_reply_backlog_pauses_stdin_and_loses_nothing() {
    let report = one_response_each(&["--control-queue-bytes", "4096"], 10_000);
    assert!(report["stdin_pauses"].as_u64().unwrap() > 0, "the backlog never filled: {report}");
}

/// Two 8 MiB results occupy stdout (one being written, the host not
/// reading; one waiting for room). Pings are answered from the reserved
/// budget while that holds: the first 20 are read at once; a flood of 2,000
/// more fills the 4 KiB backlog, so the loop pauses stdin (and says so).
/// Once the host resumes, every ping is answered, the large frames arrive
/// whole, and pings sent afterwards are answered within a second.
#[test]
fn a_paused_host_gets_every_ping_answered_after_it_resumes() {
    const BIG: usize = 8 << 20;
    let ping = |id: i64| {
        let mut line = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "method": "ping"})).unwrap();
        line.push(b'\n');
        line
    };
    let mut server = Fixture::start_paused(&["--control-queue-bytes", "4096"]);
    server.call(1, "big", json!({"bytes": BIG}));
    server.call(2, "big", json!({"bytes": BIG}));
    assert!(server.first_stdout_read(2 * WAIT) < BIG, "the first frame is partly out");
    let pause_ids: Vec<i64> = (100..120).collect();
    server.send_raw(&pause_ids.iter().flat_map(|&id| ping(id)).collect::<Vec<u8>>());
    // Read while stdout is blocked: stdin never waits for tool results.
    server.wait_stdin_read(WAIT);

    let flood_ids: Vec<i64> = (1000..3000).collect();
    let flood = server.send_in_background(flood_ids.iter().flat_map(|&id| ping(id)).collect());
    let paused = server.wait_report(lib_server::TRACE, WAIT, |fields| {
        fields["message"].as_str().is_some_and(|m| m.starts_with("reply backlog full"))
    });
    assert_eq!(paused["backlog"], 4096, "{paused}");

    server.resume_stdout();
    for id in [1, 2] {
        let frame = server.response_frame(id, 2 * WAIT);
        assert_eq!(frame.json()["result"]["content"][0]["text"].as_str().map(str::len), Some(BIG), "whole");
    }
    for &id in pause_ids.iter().chain(&flood_ids) {
        assert_eq!(server.response(id, WAIT)["result"], json!({}), "ping {id}");
    }
    flood.join().expect("flood writer").expect("flood written");
    for id in 5000..5005 {
        let sent = Instant::now();
        server.send_raw(&ping(id));
        assert_eq!(server.response(id, SECOND_REQUEST)["result"], json!({}));
        assert!(sent.elapsed() < SECOND_REQUEST);
    }

    let done = server.finish();
    let report = &done.report;
    assert_eq!(report["replies_dropped"], 0, "{report}");
    assert!(report["stdin_pauses"].as_u64().unwrap() >= 1, "{report}");
    assert_eq!(report["frames_out"], 2 + 20 + 2000 + 5, "{report}");
    assert_eq!(done.frames.len(), 2 + 20 + 2000 + 5, "nothing else on stdout");
    eprintln!("paused host: {} pings answered after resuming; stdin pauses {}", 20 + 2000 + 5, report["stdin_pauses"]);
}
