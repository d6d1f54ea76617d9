//! `SIGTERM` and `SIGINT` through the real library (`lib_server` fixture,
//! real pipes): handled like stdin EOF without waiting for running calls —
//! every call is cancelled and answered, every tool process group is killed,
//! stdout is flushed, and the process exits `128 + signal` after its report.

#![cfg(unix)]

mod server_support;

use mcp_framer_e2e::lib_server::report as lib_server;
use mcp_framer_e2e::support::eventually;
use mcp_framer_e2e::support::proc::live_group_members;
use rustix::process::{Pid, Signal, kill_process, kill_process_group};
use serde_json::json;
use server_support::{Fixture, WAIT};

/// Starts five tool processes (two `sh` with two `sleep`s each, three
/// `sleep`s), sends `signal` to the server (or to its process group), and
/// checks that nothing survives and every call is answered.
fn signal_stops_every_tool(signal: Signal, to_group: bool) {
    let mut server = Fixture::start(&[]);
    for id in 0..5 {
        // Five minutes: only the signal's handling can end them within the test.
        let script = if id < 2 { "sleep 300 & sleep 300; wait" } else { "exec sleep 300" };
        server.call(id, "subprocess", json!({"script": script}));
    }
    let mut groups = Vec::new();
    for id in 0..5 {
        let spawned = server.wait_report(lib_server::CHILD_SPAWNED, WAIT, |fields| fields["id"] == id);
        groups.push(spawned["pid"].as_u64().unwrap() as u32);
    }
    let members = || groups.iter().map(|&group| live_group_members(group).len()).sum::<usize>();
    assert!(eventually(WAIT, || members() == 9), "2 × (sh + 2 sleeps) + 3 sleeps: {} alive", members());

    let pid = Pid::from_raw(server.pid() as i32).unwrap();
    if to_group { kill_process_group(pid, signal) } else { kill_process(pid, signal) }.expect("signal sent");
    let status = server.wait_exit(WAIT).expect("the server exited after the signal");
    assert_eq!(status.code(), Some(128 + signal.as_raw()), "{status:?}");
    assert!(eventually(WAIT, || members() == 0), "{} tool processes survived", members());

    let done = server.finish();
    assert_eq!(done.report["signal"], signal.as_raw(), "{}", done.report);
    assert_eq!(done.report["cancelled_at_shutdown"], 5);
    let mut answered: Vec<i64> = done.frames.iter().filter_map(|f| f.id().and_then(|id| id.as_i64())).collect();
    answered.sort_unstable();
    assert_eq!(answered, [0, 1, 2, 3, 4], "every call answered once");
    for frame in done.frames.iter().filter(|f| f.id().is_some()) {
        let message = frame.json()["error"]["message"].as_str().unwrap();
        assert!(message.starts_with("request abandoned") && message.contains("received"), "{message}");
    }
}

#[test]
fn sigterm_to_the_server_stops_every_tool_process() {
    signal_stops_every_tool(Signal::TERM, false);
}

#[test]
fn sigint_to_the_process_group_stops_every_tool_process() {
    signal_stops_every_tool(Signal::INT, true);
}
