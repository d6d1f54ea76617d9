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
use mcp_framer_stdio::host::{Connection, Inbound, SkippedFrame};
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
        let mut command = tokio::process::Command::new("sh");
        // The server exits at end of stdin; its grandchild would not.
        command.args(["-c", "sleep 1000 & echo \"pid $!\"; cat >/dev/null"]);
        let (connection, mut inbound) = Connection::spawn(command, config()).expect("spawn");
        let Some(Inbound::Skipped(SkippedFrame::NotJson { excerpt, .. })) = inbound.recv().await else {
            panic!("the grandchild's pid")
        };
        let grandchild: u32 = excerpt.to_text().trim_start_matches("pid ").parse().expect("a pid");
        let report = connection.shutdown().await;
        assert!(report.exit_status.is_some_and(|s| s.success()), "{report:?}");
        let started = Instant::now();
        while !dead(grandchild) {
            assert!(started.elapsed() < Duration::from_secs(5), "the grandchild outlived the shutdown");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        drop(connection);
    })
    .await;
}
