//! Shared helpers for the host transport's process tests (`host_*.rs`):
//! spawning the `hostile_server` fixture in a [`Session`], the watchdog, and
//! small JSON helpers.
//!
//! Watchdog: every test body runs inside [`watchdog`], the fixture library's
//! `support::watchdog` (a `tokio::time::timeout`) with the host limit. When it fires, the body's future is dropped, which
//! drops its `Session`s; a dropped session's supervisor SIGKILLs the child's
//! process group, and the runtime's shutdown drops the `Child` itself, which
//! was spawned with `kill_on_drop`. Then the test fails loudly. A panicking
//! assertion unwinds through the same drops. So no test can leave a child
//! behind or hang CI.

#![allow(dead_code, reason = "each test crate uses a different subset")]

use std::future::Future;
use std::time::{Duration, Instant};

use mcp_framer_e2e::{report, support};
use mcp_framer_stdio::host::{Inbound, InboundQueue, PendingRequest, Received, Session, SessionConfig, ShutdownConfig};
use serde_json::{Value, json};
use tokio::process::Command;

/// The most any host process test may take: a hang guard, not a speed. A
/// test takes seconds in a debug build on a loaded 2-core machine; only one
/// that hangs reaches this.
pub const WATCHDOG: Duration = Duration::from_secs(120);

/// How long a wait for something that must happen may take: a request's
/// deadline in [`config`], a condition in [`eventually`]. A hang guard too:
/// what a test waits for takes milliseconds to seconds, so only a defect
/// (the thing never happens) reaches it, and it fails with a message before
/// the watchdog fires.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// How long the "second request" after an incident may take
/// ([`second_request`]): milliseconds unless something still blocks the
/// session, even in a debug build on a loaded machine. The defects it
/// catches (a reader that stopped draining, a server or a writer stuck
/// behind the incident) make it wait for the blocker, and every blocker in
/// these tests lasts far longer (a 20 s stream, or forever).
pub const SECOND_REQUEST: Duration = Duration::from_secs(5);

/// Runs `body` under the watchdog; see the module documentation.
pub async fn watchdog<F: Future>(what: &str, body: F) -> F::Output {
    support::watchdog(WATCHDOG, what, body).await
}

/// The fixture server command with `args`.
pub fn fixture(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_hostile_server"));
    command.args(args);
    command
}

/// A session config for tests. The request and write deadlines are hang
/// guards ([`PATIENCE`], [`SHUTDOWN_STEP`]): a test that wants a deadline to
/// fire sets its own, short one. The exit grace is short, so a test whose
/// server leaves its stdout held ends quickly.
pub fn config() -> SessionConfig {
    SessionConfig::default()
        .with_request_timeout(PATIENCE)
        .with_write_timeout(PATIENCE)
        .with_exit_grace(Duration::from_millis(300))
        .with_shutdown(ShutdownConfig::default().with_each(SHUTDOWN_STEP))
}

/// Each wait of the shutdown sequence in [`config`]: how long a server may
/// take to exit after its stdin is closed, after SIGTERM, after SIGKILL. A
/// fixture exits in milliseconds; a test whose server ignores a step (which
/// waits the step out) sets a short wait for that step.
pub const SHUTDOWN_STEP: Duration = Duration::from_secs(10);

/// Spawns the fixture (no extra args) in a session.
pub fn spawn(config: SessionConfig) -> (Session, InboundQueue) {
    Session::spawn(fixture(&[]), config).expect("spawn hostile_server")
}

/// A session whose server has stopped reading its stdin: the fixture with
/// inline dispatch, busy for 20 s in a `slow_stream` call (returned), a write
/// timeout of `write_timeout`, and a shutdown whose first step (closing
/// stdin, which the busy server cannot see) is short.
pub async fn spawn_busy_reader(write_timeout: Duration) -> (Session, InboundQueue, PendingRequest) {
    let shutdown = ShutdownConfig::default().with_each(SHUTDOWN_STEP).with_after_stdin(Duration::from_millis(500));
    let config = config().with_write_timeout(write_timeout).with_shutdown(shutdown);
    let (session, inbound) = Session::spawn(fixture(&["--dispatch", "inline"]), config).expect("spawn");
    let slow = tool("slow_stream", json!({"chunks": 200, "interval_ms": 100, "chunk_bytes": 64}));
    let stream = session.start("tools/call", &slow).await.expect("sent");
    (session, inbound, stream)
}

/// `params` of a `tools/call` for `tool` with `arguments`.
pub fn tool(tool: &str, arguments: Value) -> Value {
    json!({"name": tool, "arguments": arguments})
}

/// The parsed payload of a response.
pub fn payload(response: &Received) -> Value {
    response.deserialize_payload().expect("the payload is JSON")
}

/// The first text block of a tool result.
pub fn text(response: &Received) -> String {
    let result = payload(response);
    result["content"][0]["text"].as_str().unwrap_or_else(|| panic!("no text content in {result}")).to_owned()
}

/// The "second request": a cheap `ping` tool call that must succeed within
/// [`SECOND_REQUEST`]. It proves the session still works and is not blocked
/// behind what came before.
pub async fn second_request(session: &Session) {
    let started = Instant::now();
    let params = tool("ping", json!({}));
    let response = tokio::time::timeout(SECOND_REQUEST, session.request("tools/call", &params))
        .await
        .unwrap_or_else(|_| {
            panic!("the second request took more than {SECOND_REQUEST:?}; stderr:\n{}", session.stderr_tail())
        })
        .unwrap_or_else(|e| panic!("the second request failed: {e}"));
    assert_eq!(text(&response), "pong");
    assert!(started.elapsed() < SECOND_REQUEST);
}

/// The fixture's write counters (the `stats` tool).
pub async fn fixture_stats(session: &Session) -> Value {
    let response = session.request("tools/call", &tool("stats", json!({}))).await.expect("stats");
    payload(&response)["structuredContent"].clone()
}

/// Every queued item available right now.
pub fn drain_now(inbound: &mut InboundQueue) -> Vec<Inbound> {
    let mut items = Vec::new();
    while let Ok(item) = inbound.try_recv() {
        items.push(item);
    }
    items
}

/// Waits (at most [`PATIENCE`]) until `condition` holds for the session.
pub async fn eventually(session: &Session, what: &str, condition: impl Fn(&Session) -> bool) {
    let held = support::eventually_async(PATIENCE, || condition(session)).await;
    assert!(held, "{what} did not happen within {PATIENCE:?}; metrics: {:?}", session.metrics());
}

/// The fields of every `tag` report line in the session's stderr tail.
pub fn reports(session: &Session, tag: &str) -> Vec<Value> {
    report::all(&session.stderr_tail(), tag).collect()
}
