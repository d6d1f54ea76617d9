//! The admission bound through the real library (`lib_server` fixture, real
//! pipes): however many calls arrive in one write, at most
//! `max_concurrent + max_queued` are admitted; every other one is answered
//! -32000 at once, and every admitted one is answered too (here at
//! shutdown, as abandoned).

#![cfg(unix)]

mod server_support;

use serde_json::json;
use server_support::{Fixture, WAIT};

/// The shutdown grace: the slow calls never finish within it, so it is how
/// long each trial waits at EOF, and also the time the server has to flush
/// the abandoned calls' replies. 100 ms lost replies under CI load (130 of
/// 272 unflushed); the test is about admission, not about shutdown speed, so
/// the grace is generous for a debug build on a loaded machine.
const GRACE_MS: &str = "3000";

/// Sends `calls` slow calls in one write to a server admitting `running +
/// queued`; returns how many were admitted, after checking that each call got
/// exactly one response.
fn admitted(calls: i64, running: usize, queued: usize) -> u64 {
    let bound = (running + queued) as i64;
    let (running_flag, queued_flag) = (running.to_string(), queued.to_string());
    let args = ["--max-concurrent", &running_flag, "--max-queued", &queued_flag, "--grace-ms", GRACE_MS];
    let mut server = Fixture::start(&args);
    let mut burst = Vec::new();
    for id in 0..calls {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                          "params": {"name": "slow", "arguments": {"ms": 30_000}}});
        burst.extend(serde_json::to_vec(&call).unwrap());
        burst.push(b'\n');
    }
    server.send_raw(&burst);
    // The refusals come at once; nothing else does while the calls sleep.
    let refused = (calls - bound).max(0);
    for _ in 0..refused {
        let frame = server.next_frame(WAIT);
        assert_eq!(frame.json()["error"]["code"], -32000, "{:?}", frame.value);
    }
    server.wait_stdin_read(WAIT);
    let done = server.finish();
    let report = &done.report;
    let overloaded = report["overloaded"].as_u64().unwrap();
    assert_eq!(done.frames.len() as i64, calls, "one response per call: {report}");
    let mut ids: Vec<i64> = done.frames.iter().map(|f| f.json()["id"].as_i64().unwrap()).collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..calls).collect::<Vec<_>>());
    let abandoned = done.frames.iter().filter(|f| f.json()["error"]["code"] == -32603).count() as u64;
    assert_eq!(abandoned, report["cancelled_at_shutdown"].as_u64().unwrap(), "{report}");
    assert_eq!(report["tools_started"].as_array().unwrap().len(), running.min(calls as usize), "{report}");
    calls as u64 - overloaded
}

/// 300 calls against 16 + 256, five times: exactly 272 admitted each time.
#[test]
fn the_admitted_count_never_exceeds_the_bound_across_trials() {
    let trials: Vec<u64> = (0..5).map(|_| admitted(300, 16, 256)).collect();
    eprintln!("300 slow calls in one write, bound 16 + 256: admitted per trial {trials:?}");
    assert_eq!(trials, [272; 5]);
}

/// 10,000 calls in one write, and a small bound: the bound holds exactly.
#[test]
fn a_large_burst_admits_exactly_the_bound() {
    assert_eq!(admitted(10_000, 16, 256), 272);
    assert_eq!(admitted(50, 2, 3), 5);
}
