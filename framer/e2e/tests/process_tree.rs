//! A server's process tree, on unix and Windows alike: whatever the server
//! starts goes with it when the host drops or shuts down its connection, and
//! a cancelled tool call takes its grandchild down (a process group on
//! unix, a Job Object on Windows). The grandchild is a `proc_fixture hold`
//! that keeps the server's pipes open (on Windows a plain `Child::kill`
//! would orphan it and no EOF would ever come); its lock file is the
//! liveness check, the same on both platforms. Every wait is a bounded
//! condition, every test has a watchdog, and the runtime is multi-threaded.

use std::path::Path;
use std::time::Duration;

use mcp_framer_e2e::support::{eventually, eventually_async, lock_held, lock_path, watchdog};
use mcp_framer_stdio::host::{
    CloseReason, Connection, RequestError, Session, SessionConfig, ShutdownConfig, ShutdownStage,
};
use serde_json::json;
use tokio::process::Command;

/// A hang guard: a test takes seconds in a debug build on a loaded machine.
const WATCHDOG: Duration = Duration::from_secs(120);
/// How long a started holder may take to take its lock, and a killed one
/// to let go of it; how long a server may take to exit at each step of a
/// shutdown; how long a request may take. Milliseconds, in fact: a bound
/// only a defect reaches.
const BOUND: Duration = Duration::from_secs(30);
const ROUNDS: usize = 3;

/// The default configuration with shutdown waits of [`BOUND`]: a test
/// asserts the step a server exits at, which a slow machine must not move.
fn config() -> SessionConfig {
    SessionConfig::default().with_shutdown(ShutdownConfig::default().with_each(BOUND))
}

fn fixture(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_proc_fixture"));
    command.args(args);
    command
}

/// A server that starts a lock holder, then waits for it (`then` = None),
/// or reads its stdin to EOF (`--read-stdin`), or exits at once (`--exit`).
fn holder(lock: &Path, then: Option<&str>) -> Command {
    let lock = lock.to_str().expect("utf-8 temp path");
    let mut command = fixture(&["spawn-holder", lock]);
    command.args(then);
    command
}

async fn held(lock: &Path) {
    assert!(eventually_async(BOUND, || lock_held(lock)).await, "the grandchild never took {}", lock.display());
}

async fn released(lock: &Path, what: &str) {
    assert!(
        eventually_async(BOUND, || !lock_held(lock)).await,
        "{what}: the grandchild still holds {}",
        lock.display()
    );
    let _ = std::fs::remove_file(lock);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_connection_kills_the_server_and_its_grandchild() {
    watchdog(WATCHDOG, "drop kills the tree", async {
        for _ in 0..ROUNDS {
            let lock = lock_path("drop");
            let (connection, _inbound) = Connection::spawn(holder(&lock, None), config()).expect("spawn");
            held(&lock).await;
            drop(connection);
            released(&lock, "after the drop").await;
        }
    })
    .await;
}

/// [`released`] for a test outside any runtime.
fn released_blocking(lock: &Path, what: &str) {
    assert!(eventually(BOUND, || !lock_held(lock)), "{what}: the grandchild still holds {}", lock.display());
    let _ = std::fs::remove_file(lock);
}

/// Spawns a holder's server on `runtime`, with `then` as in [`holder`], and
/// returns its connection once the holder has its lock (under the watchdog).
fn spawn_held(runtime: &tokio::runtime::Runtime, lock: &Path, then: Option<&str>) -> Connection {
    runtime.block_on(watchdog(WATCHDOG, "spawn a holder", async {
        let (connection, _inbound) = Connection::spawn(holder(lock, then), config()).expect("spawn");
        held(lock).await;
        connection
    }))
}

#[test]
fn dropping_a_connection_kills_the_tree_with_no_runtime_running() {
    for _ in 0..ROUNDS {
        let lock = lock_path("idle");
        // A current-thread runtime runs its tasks only inside `block_on`:
        // from here on the connection's tasks exist but cannot run (so
        // neither the supervisor nor a task's drop can do the killing).
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let connection = spawn_held(&runtime, &lock, None);
        assert!(lock_held(&lock), "the grandchild runs before the drop");
        drop(connection);
        released_blocking(&lock, "after a drop with the runtime idle");
        drop(runtime);
    }
}

#[test]
fn a_runtime_shut_down_after_its_server_exited_does_not_wait_for_the_leftovers() {
    for _ in 0..ROUNDS {
        let lock = lock_path("exited");
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let connection = spawn_held(&runtime, &lock, Some("--exit"));
        // The server is gone; the holder it left keeps stdout open.
        let closed = runtime.block_on(watchdog(WATCHDOG, "the server's exit", connection.wait_closed()));
        assert!(matches!(closed.reason(), CloseReason::Exited), "{closed}");
        // The connection's end swept the tree and stopped the reader (or, if
        // the runtime goes first, dropping the reader kills the tree): the
        // runtime's shutdown does not wait for the holder (on Windows a
        // pending read is a blocking call that would).
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            drop(runtime);
            let _ = done.send(());
        });
        finished.recv_timeout(BOUND).expect("the runtime's shutdown waited for the server's leftovers");
        released_blocking(&lock, "after the runtime's shutdown");
        drop(connection);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_removes_what_the_exited_server_left_in_its_tree() {
    watchdog(WATCHDOG, "shutdown kills the leftovers", async {
        for _ in 0..ROUNDS {
            let lock = lock_path("shutdown");
            // The server exits at the end of its stdin, leaving the holder.
            let (connection, _inbound) =
                Connection::spawn(holder(&lock, Some("--read-stdin")), config()).expect("spawn");
            held(&lock).await;
            let report = connection.shutdown().await;
            assert_eq!(report.stage, ShutdownStage::StdinClosed, "{report:?}");
            assert!(report.exit_status.is_some_and(|s| s.success()), "{report:?}");
            // The connection is still alive: the shutdown itself killed the tree.
            released(&lock, "after the shutdown").await;
            drop(connection);
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_call_kills_its_grandchild_and_the_next_request_completes() {
    let mut command = Command::new(env!("CARGO_BIN_EXE_lib_server"));
    command.env("RUST_BACKTRACE", "0");
    let (session, _inbound) = Session::spawn(command, config()).expect("spawn lib_server");
    watchdog(WATCHDOG, "cancellation reaches the grandchild", async {
        let init = json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "process_tree", "version": "0"}});
        session.request("initialize", &init).await.expect("initialize");
        session.notify("notifications/initialized", &json!({})).await.expect("initialized");
        for _ in 0..ROUNDS {
            let lock = lock_path("cancel");
            let holder = lock.to_str().expect("utf-8 temp path");
            let program = env!("CARGO_BIN_EXE_proc_fixture");
            let call = json!({"name": "subprocess", "arguments": {"command": [program, "spawn-holder", holder]}});
            let pending = session.start("tools/call", &call).await.expect("sent");
            held(&lock).await;
            assert!(session.cancel(pending.id(), "process_tree test").await, "cancellation sent");
            let outcome = pending.response().await;
            assert!(matches!(outcome, Err(RequestError::Cancelled { .. })), "{outcome:?}");
            released(&lock, "after the cancellation").await;
            let ping = session.start("ping", &json!({})).await.expect("sent").with_timeout(BOUND);
            assert!(ping.response().await.is_ok(), "the next request completes after a cancel");
        }
    })
    .await;
    let report = watchdog(WATCHDOG, "lib_server shutdown", session.shutdown()).await;
    assert!(report.exit_status.is_some_and(|s| s.success()), "{report:?}");
}
