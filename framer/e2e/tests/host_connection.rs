//! The host's lower layer, [`Connection`], against real processes: every
//! message on the queue in order (responses included), an oversize response
//! reported in its place with its id, length and limit, and a `Drop` that
//! kills the whole process group with no runtime running. Each test has a
//! watchdog.

#![cfg(unix)]

mod host_support;

use std::time::{Duration, Instant};

use host_support::{config, fixture, tool, watchdog};
use mcp_framer_jsonrpc::Id;
use mcp_framer_stdio::host::{CloseReason, Connection, Inbound, SkippedFrame};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_and_oversize_reports_arrive_in_order_with_their_ids() {
    watchdog("connection", async {
        for _ in 0..20 {
            let (connection, mut inbound) =
                Connection::spawn(fixture(&[]), config().with_max_receive(64 * 1024)).expect("spawn");
            let encoder = connection.encoder();
            let big = tool("sized", json!({"frame_bytes": 70_000}));
            connection.send(encoder.request(&Id::Number(1), "tools/call", &big).unwrap()).await.expect("sent");
            connection.send(encoder.request(&Id::Number(2), "ping", &()).unwrap()).await.expect("sent");
            let first = inbound.recv().await;
            let Some(Inbound::Skipped(SkippedFrame::Oversize { len, max, id })) = first else { panic!("{first:?}") };
            assert_eq!((len, max, id), (70_000, 64 * 1024, Some(Id::Number(1))));
            // Its accounting is done by the time it is seen.
            let m = connection.metrics();
            assert_eq!((m.oversize_frames, m.discarded_bytes), (1, 70_000), "{m:?}");
            let second = inbound.recv().await;
            let Some(Inbound::Response(pong)) = second else { panic!("{second:?}") };
            assert_eq!(pong.id(), Some(&Id::Number(2)));
            assert_eq!(connection.metrics().delivered, 1, "a message; the report is counted as oversize");
            let report = connection.shutdown().await;
            assert!(report.exit_status.is_some(), "{report:?}");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_message_taken_from_the_queue_is_already_counted() {
    watchdog("connection metrics", async {
        let (connection, mut inbound) = Connection::spawn(fixture(&[]), config()).expect("spawn");
        let (mut taken, mut bytes) = (0, 0);
        for round in 0..20 {
            let arguments = json!({"count": 200, "frame_bytes": 300, "kind": "message"});
            let frame = connection.encoder().request(&Id::Number(round), "tools/call", &tool("stream", arguments));
            connection.send(frame.unwrap()).await.expect("sent");
            loop {
                let Some(item) = inbound.recv().await else { panic!("the queue ended") };
                let received = match item {
                    Inbound::Notification(received) | Inbound::Response(received) => received,
                    other => panic!("{other:?}"),
                };
                taken += 1;
                bytes += received.frame().len() as u64 + 1;
                let m = connection.metrics();
                assert!(m.delivered >= taken && m.stdout_bytes >= bytes && m.frames >= taken, "{taken}: {m:?}");
                if matches!(received.kind(), mcp_framer_jsonrpc::Kind::Response) {
                    break;
                }
            }
        }
        assert_eq!(taken, 20 * 201);
        connection.shutdown().await;
    })
    .await;
}

/// Whether process `pid` is gone or a zombie.
fn dead(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

#[test]
fn dropping_a_connection_kills_its_group_with_no_runtime_running() {
    // A current-thread runtime runs its tasks only inside `block_on`: once
    // that returns, no task of the connection can run, while the runtime
    // (and so its tasks, whose drop would kill the tree) still exists.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (connection, pids) = runtime.block_on(async {
        watchdog("spawn a server with a grandchild", async {
            let mut command = tokio::process::Command::new("sh");
            // The grandchild's pid on stdout (a line that is not JSON-RPC), then wait.
            command.args(["-c", "sleep 1000 & echo \"pid $!\"; wait"]);
            let (connection, mut inbound) = Connection::spawn(command, config()).expect("spawn");
            let Some(Inbound::Skipped(SkippedFrame::NotJson { excerpt, .. })) = inbound.recv().await else {
                panic!("the grandchild's pid")
            };
            let grandchild: u32 = excerpt.to_text().trim_start_matches("pid ").parse().expect("a pid");
            let leader = connection.pid().expect("pid");
            (connection, [leader, grandchild])
        })
        .await
    });
    assert!(!dead(pids[1]), "the grandchild runs before the drop");
    drop(connection);
    let started = Instant::now();
    while !pids.iter().all(|&pid| dead(pid)) {
        assert!(started.elapsed() < Duration::from_secs(5), "still alive after the drop: {pids:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(runtime);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_leaves_nothing_of_the_group_behind_while_the_connection_lives() {
    watchdog("shutdown kills leftovers", async {
        // The server exits at end of stdin; its grandchild would not.
        let (connection, _inbound, grandchild) =
            spawn_with_grandchild("sleep 1000 & echo \"pid $!\"; cat >/dev/null").await;
        let report = connection.shutdown().await;
        assert!(report.exit_status.is_some_and(|s| s.success()), "{report:?}");
        dies(grandchild, "the grandchild outlived the shutdown").await;
        drop(connection);
    })
    .await;
}

/// Waits (5 s at most, a kill being a matter of milliseconds) until `pid`
/// is dead; panics with `what` if it is not.
async fn dies(pid: u32, what: &str) {
    let started = Instant::now();
    while !dead(pid) {
        assert!(started.elapsed() < Duration::from_secs(5), "{what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Spawns `sh -c script` on a connection; the script's first line on stdout
/// is `pid N` (a line that is not JSON-RPC): returns N.
async fn spawn_with_grandchild(script: &str) -> (Connection, mcp_framer_stdio::host::InboundQueue, u32) {
    let mut command = tokio::process::Command::new("sh");
    command.args(["-c", script]);
    let (connection, mut inbound) = Connection::spawn(command, config()).expect("spawn");
    let Some(Inbound::Skipped(SkippedFrame::NotJson { excerpt, .. })) = inbound.recv().await else {
        panic!("the grandchild's pid")
    };
    let grandchild = excerpt.to_text().trim_start_matches("pid ").parse().expect("a pid");
    (connection, inbound, grandchild)
}

/// A server that exits while a process it left holds its stdout: the
/// connection ends after the exit grace all the same. Its queue ends, so a
/// transport reading it (an rmcp client's) sees the end and fails what is
/// pending, and what the server left in its tree is killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_exits_ends_its_connection_though_a_leftover_holds_stdout() {
    watchdog("exit with stdout held", async {
        for _ in 0..5 {
            let (connection, mut inbound, grandchild) =
                spawn_with_grandchild("sleep 1000 & echo \"pid $!\"; echo 'out of cheese' >&2; exit 3").await;
            // Without the end, this waits until the watchdog.
            assert!(inbound.recv().await.is_none(), "nothing else was written");
            let closed = connection.closed().expect("published before the queue ends");
            assert!(matches!(closed.reason(), CloseReason::Exited), "{closed}");
            assert_eq!(closed.exit_status().and_then(|s| s.code()), Some(3), "{closed}");
            assert!(closed.to_string().contains("out of cheese"), "{closed}");
            dies(grandchild, "the leftover outlived the connection").await;
            drop(connection);
        }
    })
    .await;
}

/// A server that exits on its own, having started a process that holds
/// none of its pipes: the connection sweeps its process group as it ends,
/// while the group's id cannot be anyone else's (later kills will send
/// nothing: see `Connection::may_kill`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_exits_leaves_nothing_of_its_group_when_its_connection_ends() {
    watchdog("detached leftover", async {
        for _ in 0..5 {
            let (connection, mut inbound, leftover) =
                spawn_with_grandchild("sleep 1000 </dev/null >/dev/null 2>&1 & echo \"pid $!\"; exit 0").await;
            assert!(inbound.recv().await.is_none());
            let closed = connection.wait_closed().await;
            assert!(matches!(closed.reason(), CloseReason::Exited), "{closed}");
            dies(leftover, "the leftover outlived the connection's end").await;
            assert!(!connection.may_kill(), "reaped, its pipes closed: a late kill sends nothing");
        }
    })
    .await;
}
