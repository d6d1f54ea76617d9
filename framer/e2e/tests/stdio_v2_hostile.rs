//! A hostile (or careless) HTTP/2 client that is not ours against the
//! `stdio-v2` server (issue 37): Node's built-in `node:http2` (nghttp2
//! underneath), driven by `sdk/node_h2_client.mjs`, spawns the `v2_server`
//! fixture and talks to it straight over its stdin and stdout pipes. Each
//! test runs one scenario of the script, which prints one JSON line of
//! what it saw (statuses, timings, the server's `VmHWM`/`VmPeak` read from
//! `/proc` while it ran, its exit), and asserts the property. Each test
//! names the defect of issue 37 it proves.
//!
//! Node and the fixture run in their own process group under a watchdog
//! that kills the group; every wait inside the script has a deadline too.
//! The tests skip (loudly, on stderr) only when `node` is not installed.
#![cfg(unix)]

use std::os::unix::process::CommandExt as _;
use std::process::{Command, Stdio};
use std::time::Duration;

use mcp_framer_e2e::support::{ChildWatchdog, watchdog};
use serde_json::{Value, json};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/sdk/node_h2_client.mjs");
const SERVER: &str = env!("CARGO_BIN_EXE_v2_server");
const MIB: u64 = 1 << 20;
const KIB: u64 = 1 << 10;

/// Whether `node` runs; if not, says so on stderr (the test then skips).
fn have_node(test: &str) -> bool {
    let ok = Command::new("node").arg("--version").output().is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("SKIP {test}: `node` is not installed (Node 20+ runs the node:http2 client)");
    }
    ok
}

/// Runs `scenario` of the Node client against `v2_server server_args`,
/// with `env` (the script's `H2_*` knobs), under a watchdog of `limit`
/// that kills node and the server (one process group); the script's JSON
/// line. Runs on a blocking thread of the multi-thread runtime.
async fn scenario(scenario: &str, env: &[(&str, &str)], server_args: &[&str], limit: Duration) -> Value {
    let name = scenario.to_owned();
    let env: Vec<(String, String)> = env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    let args: Vec<String> = server_args.iter().map(|a| (*a).to_owned()).collect();
    let blocking = tokio::task::spawn_blocking(move || {
        let mut command = Command::new("node");
        command.arg(SCRIPT).arg(&name).arg(SERVER).args(&args).envs(env);
        command.process_group(0).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let child = command.spawn().expect("spawn node");
        let pgid = child.id();
        let dog = ChildWatchdog::arm(limit, format!("node scenario {name}"), move || {
            if let Some(pid) = i32::try_from(pgid).ok().and_then(rustix::process::Pid::from_raw) {
                let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
            }
        });
        let output = child.wait_with_output().expect("wait for node");
        assert!(!dog.disarm(), "the node scenario {name} hung and was killed");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let line = stdout.lines().rev().find(|l| l.starts_with('{')).unwrap_or_else(|| {
            panic!(
                "scenario {name}: no JSON line (exit {:?})\nstdout: {stdout}\nstderr: {}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            )
        });
        let out: Value = serde_json::from_str(line).expect("the script's line is JSON");
        assert!(out.get("crash").is_none(), "scenario {name} crashed: {}", out["crash"]);
        out
    });
    watchdog(limit + Duration::from_secs(30), scenario, blocking).await.expect("the scenario thread")
}

/// The script's JSON without the bulky final report (for messages).
fn brief(out: &Value) -> Value {
    let mut out = out.clone();
    if let Some(o) = out.as_object_mut() {
        o.remove("report");
    }
    out
}

/// The server was not killed by the script: it exited by itself.
fn assert_exited_by_itself(out: &Value) {
    assert!(out.get("killed").is_none(), "the server had to be killed: {}", brief(out));
}

// (a) The release criteria with a client that is not ours.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_criteria_hold_against_node_http2() {
    if !have_node("release") {
        return;
    }
    let out = scenario("release", &[], &[], Duration::from_secs(120)).await;
    let b = brief(&out);
    assert_eq!(out["initialize"]["status"], json!(200), "{b}");
    assert_eq!(out["initialize"]["version"], json!("2025-11-25"), "{b}");
    assert_eq!(out["initialized"]["status"], json!(202), "{b}");
    assert_eq!(out["discover"]["status"], json!(200), "{b}");
    assert!(out["discover"]["versions"].as_array().is_some_and(|v| v.contains(&json!("2026-07-28"))), "{b}");
    assert!(out["tools"].as_array().is_some_and(|t| t.contains(&json!("echo")) && t.contains(&json!("big"))), "{b}");
    assert_eq!(out["echo"], json!({"status": 200, "text": "hello"}), "{b}");
    let concurrent = out["concurrent"].as_array().expect("concurrent calls");
    assert_eq!(concurrent.len(), 10, "{b}");
    assert!(concurrent.iter().all(|c| c == &json!({"status": 200, "right": true})), "{b}");
    assert_eq!(
        out["streaming"],
        json!({"status": 200, "type": "text/event-stream", "progress": 8, "last_is_result": true}),
        "{b}"
    );
    // The slow call (30 s) was reset (CANCEL = 8); a ping after it is
    // answered long before the slow call would have ended.
    let reset = &out["after_reset"];
    assert_eq!(reset["slow_rst"], json!(8), "{b}");
    assert_eq!((&reset["ping_status"], &reset["ping_id"]), (&json!(200), &json!(7)), "{b}");
    assert!(reset["ping_ms"].as_f64().is_some_and(|ms| ms < 10_000.0), "{b}");
    assert_eq!(out["exit"]["code"], json!(0), "{b}");
    assert_eq!(out["report"]["v2"]["resets"], json!(1), "{b}");
}

// Defect 1: 40 calls of `big` (8 MiB each) with a 16 KiB stream window,
// read by nobody. The server's memory stays within the budget formula:
//
//   VmHWM <= idle + max_assembling + writer_queue_bytes + control_queue_bytes
//            + max_concurrent * 2 * max_send      (a handler's result and its encoding)
//            + connection_window                  (16 MiB of request bodies unread)
//            + streams * stream_window_of_the_peer (what h2 has in flight)
//            + 32 MiB                              (allocator and runtime slack)
//
// with --max-frame 9 MiB (max_send, and max_assembling by default),
// --writer-queue-bytes 9 MiB, control_queue_bytes 1 MiB (default),
// --max-concurrent 2: idle + 9 + 9 + 1 + 36 + 16 + 0.6 + 32 MiB, about
// idle + 104 MiB. Before the fix every response parked in an unbounded
// per-stream channel: streams x max_send, some 350 to 650 MiB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defect_1_unread_results_stay_within_the_response_budget() {
    if !have_node("defect 1") {
        return;
    }
    const MAX_FRAME: u64 = 9 * MIB;
    const WRITER_QUEUE: u64 = 9 * MIB;
    const CONTROL_QUEUE: u64 = MIB;
    const CONCURRENT: u64 = 2;
    const CONNECTION_WINDOW: u64 = 16 * MIB;
    const STREAMS: u64 = 40;
    const PEER_WINDOW: u64 = 16 * KIB;
    const SLACK: u64 = 32 * MIB;
    let (max_frame, writer_queue) = (MAX_FRAME.to_string(), WRITER_QUEUE.to_string());
    let out = scenario(
        "unread_big",
        &[("H2_COUNT", "40"), ("H2_BYTES", &(8 * MIB).to_string())],
        &["--max-frame", &max_frame, "--writer-queue-bytes", &writer_queue, "--max-concurrent", "2"],
        Duration::from_secs(240),
    )
    .await;
    let b = brief(&out);
    let idle = out["base_hwm_kib"].as_u64().expect("idle VmHWM") * KIB;
    let hwm = out["vmhwm_kib"].as_u64().expect("VmHWM") * KIB;
    let bound = idle
        + MAX_FRAME
        + WRITER_QUEUE
        + CONTROL_QUEUE
        + CONCURRENT * 2 * MAX_FRAME
        + CONNECTION_WINDOW
        + STREAMS * PEER_WINDOW
        + SLACK;
    assert!(
        hwm <= bound,
        "VmHWM {} MiB over the budget formula's {} MiB (idle {} MiB): {b}",
        hwm / MIB,
        bound / MIB,
        idle / MIB
    );
    // The control reply still gets through beside the unread streams.
    assert_eq!(out["ping"]["status"], json!(200), "{b}");
    assert_exited_by_itself(&out);
}

/// The server ended the connection on purpose: a GOAWAY node read, or the
/// server closing the session and exiting by itself with status 0 (node may
/// meet EPIPE on its own writes before it reads the GOAWAY).
fn ended_on_purpose(out: &Value) -> bool {
    !out["goaway"].is_null() || out["exit"]["code"] == json!(0)
}

// Defect 2: a 1 MiB header value is refused (431, or a stream or
// connection error), never answered 200. The header list is capped (about
// 16 KiB, as hyper does).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defect_2_a_1_mib_header_is_refused() {
    if !have_node("defect 2") {
        return;
    }
    let out = scenario("huge_header", &[("H2_HEADER_BYTES", &MIB.to_string())], &[], Duration::from_secs(120)).await;
    let b = brief(&out);
    assert_ne!(out["huge"]["status"], json!(200), "a 1 MiB header was served: {b}");
    let status = out["huge"]["status"].as_u64();
    assert!(status.is_none_or(|s| s == 431 || s == 400), "refused with a status that says why, or a reset: {b}");
    // The session survives, or the server ended it on purpose: a GOAWAY, or
    // (h2 ends the connection while the header block still arrives, so
    // node may see EPIPE before it reads the GOAWAY) the server ending the
    // session and exiting by itself with status 0.
    assert!(out["after"]["status"] == json!(200) || ended_on_purpose(&out), "{b}");
    assert_exited_by_itself(&out);
}

/// Defect 3: one `big` call whose stream waits for window (16 KiB,
/// unread), then `stop`; the server must exit within its shutdown grace
/// (500 ms here) + 1 s, with 1 s more for a loaded machine (node sees the
/// exit through its event loop).
async fn stop_with_a_blocked_stream(stop: &str, code: i64) {
    const GRACE_MS: f64 = 500.0;
    let out = scenario(
        "stop_blocked",
        &[("H2_STOP", stop), ("H2_EXIT_WAIT_MS", "15000")],
        &["--grace-ms", "500"],
        Duration::from_secs(120),
    )
    .await;
    let b = brief(&out);
    assert_eq!(out["blocked"], json!(true), "the stream never filled its window: {b}");
    let exit_ms = out["exit_ms"].as_f64();
    assert!(
        exit_ms.is_some_and(|ms| ms <= GRACE_MS + 1000.0 + 1000.0),
        "after {stop} with a stream waiting for window the server ran on (exit after {exit_ms:?} ms, >15 s if None): {b}"
    );
    assert_eq!(out["exit"]["code"], json!(code), "{b}");
    assert!(!out["report"].is_null(), "it wrote its report before it exited: {b}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defect_3_sigterm_with_a_blocked_stream_exits_within_the_grace() {
    if have_node("defect 3 SIGTERM") {
        stop_with_a_blocked_stream("TERM", 128 + 15).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defect_3_sigint_with_a_blocked_stream_exits_within_the_grace() {
    if have_node("defect 3 SIGINT") {
        stop_with_a_blocked_stream("INT", 128 + 2).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defect_3_stdin_eof_with_a_blocked_stream_exits_within_the_grace() {
    if have_node("defect 3 EOF") {
        stop_with_a_blocked_stream("EOF", 0).await;
    }
}

// Defect 4: `params.uri` of another type beside `params.name` must not
// hide the name from the `mcp-name` check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defect_4_the_name_check_cannot_be_bypassed() {
    if !have_node("defect 4") {
        return;
    }
    let out = scenario("name_bypass", &[], &[], Duration::from_secs(60)).await;
    let b = brief(&out);
    assert_eq!(out["control"], json!({"status": 400, "code": -32020}), "{b}");
    assert_eq!(out["bypass"]["status"], json!(400), "mcp-name: harmless ran `echo`: {b}");
    assert_eq!(out["bypass"]["code"], json!(-32020), "{b}");
    assert_eq!(out["bypass"]["id"], json!(1), "{b}");
    assert_eq!(out["report"]["tools_started"], json!([]), "no tool ran: {b}");
}

// Defect 6: an id reused right after its stream was reset (the call
// running in the dispatcher), 50 rounds, three times: each request is
// answered with its own result (never -32600 with a null id, never the old
// call's result, never left unanswered).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defect_6_an_id_reused_after_a_reset_gets_its_own_answer() {
    if !have_node("defect 6") {
        return;
    }
    for run in 0..3 {
        let out = scenario("id_reuse", &[("H2_ROUNDS", "50")], &[], Duration::from_secs(240)).await;
        let b = brief(&out);
        assert_eq!(out["bad"], json!([]), "run {run}: {b}");
        assert_eq!(out["answered"], json!(50), "run {run}: {b}");
        assert_exited_by_itself(&out);
    }
}

// Defect 8: 1000 streams each declaring a 16 MiB content-length and
// sending a few bytes reserve nothing by their declaration: the address
// space (VmPeak) grows by well under 1000 x 16 MiB = 16 GiB (bound: 2 GiB,
// threads and allocator arenas included), resident memory (VmHWM) by at
// most max_assembling + the connection window + 32 MiB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defect_8_declared_lengths_reserve_nothing() {
    if !have_node("defect 8") {
        return;
    }
    let out = scenario(
        "declared_length",
        &[("H2_COUNT", "1000"), ("H2_DECLARED", &(16 * MIB).to_string())],
        &[],
        Duration::from_secs(180),
    )
    .await;
    let b = brief(&out);
    let kib = |k: &str| out[k].as_u64().unwrap_or_else(|| panic!("{k}: {b}")) * KIB;
    let peak_rise = kib("vmpeak_kib").saturating_sub(kib("base_peak_kib"));
    assert!(peak_rise <= 2 << 30, "VmPeak rose by {} MiB: reserved by declared lengths: {b}", peak_rise / MIB);
    let hwm_rise = kib("vmhwm_kib").saturating_sub(kib("base_hwm_kib"));
    assert!(hwm_rise <= (16 + 16 + 32) * MIB, "VmHWM rose by {} MiB: {b}", hwm_rise / MIB);
    assert_eq!(out["ping"]["status"], json!(200), "{b}");
    assert_exited_by_itself(&out);
}

// Defect 9: a POST with a 2 MiB body to another path, and a GET on /mcp
// with one: 404 and 405, each stream ending cleanly (the body read and
// thrown away, no reset that loses the answer, as curl saw), and a ping
// after them answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defect_9_bad_routes_read_the_body_and_the_connection_survives() {
    if !have_node("defect 9") {
        return;
    }
    let out = scenario("bad_routes", &[("H2_BODY", &(2 * MIB).to_string())], &[], Duration::from_secs(120)).await;
    let b = brief(&out);
    assert_eq!(out["other"]["status"], json!(404), "{b}");
    assert_eq!(out["get"]["status"], json!(405), "{b}");
    assert!(out["other"]["error"].is_null(), "the 404's stream did not end cleanly: {b}");
    assert!(out["get"]["error"].is_null(), "the 405's stream did not end cleanly: {b}");
    assert_eq!(out["after"]["status"], json!(200), "{b}");
    assert_eq!(out["report"]["v2"]["bad_routes"], json!(2), "{b}");
    assert_exited_by_itself(&out);
}

// Floods: 20000 streams opened and reset at once, 20000 PING frames,
// 20000 SETTINGS frames. The server answers a ping after, or ended the
// connection on purpose (GOAWAY); it never hangs, exits by itself, and its
// resident memory stays under 96 MiB (about 9 MiB idle in a debug build). (A CONTINUATION flood needs
// raw frames, node:http2 always ends a header block: see
// `a_continuation_flood_ends_the_connection_early`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn floods_of_resets_pings_and_settings_are_survived_or_refused() {
    if !have_node("floods") {
        return;
    }
    for kind in ["reset", "ping", "settings"] {
        let out = scenario("flood", &[("H2_FLOOD", kind), ("H2_COUNT", "20000")], &[], Duration::from_secs(180)).await;
        let b = brief(&out);
        assert!(out["ping"]["status"] == json!(200) || ended_on_purpose(&out), "{kind}: {b}");
        let hwm = out["vmhwm_kib"].as_u64().expect("VmHWM") * KIB;
        assert!(hwm <= 64 * MIB + 32 * MIB, "{kind}: VmHWM {} MiB: {b}", hwm / MIB);
        assert_exited_by_itself(&out);
    }
}

// False lengths: a content-length larger than the body and one smaller
// than it are refused (a stream error or a 4xx, RFC 9113 8.1.1), never
// served; a ping after them is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn false_content_lengths_are_refused_and_the_session_goes_on() {
    if !have_node("false lengths") {
        return;
    }
    let out = scenario("false_lengths", &[], &[], Duration::from_secs(60)).await;
    let b = brief(&out);
    for case in ["declared_longer", "declared_shorter"] {
        let status = out[case]["status"].as_u64();
        assert!(status.is_none_or(|s| (400..500).contains(&s)), "{case}: {b}");
        assert!(status.is_some() || !out[case]["error"].is_null(), "{case}: neither a status nor a reset: {b}");
    }
    assert_eq!(out["after"]["status"], json!(200), "{b}");
    assert_eq!(out["report"]["tools_started"], json!([]), "no call ran: {b}");
    assert_exited_by_itself(&out);
}

// Defect 2, in raw frames: a header block that never ends (HEADERS without
// END_HEADERS, then ~16 KiB CONTINUATION frames). The server ends the
// connection on purpose (GOAWAY) once the block passes its header-list cap
// (~16 KiB): it reads at most 2 MiB of it (the cap, plus the pipe's and
// h2's read buffers), and its resident memory stays under 64 MiB (about
// 9 MiB idle in a debug build). Before the fix h2's 16 MiB default let ~20 MiB in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_continuation_flood_ends_the_connection_early() {
    if !have_node("continuation flood") {
        return;
    }
    let out = scenario("continuation_flood", &[("H2_COUNT", "4096")], &[], Duration::from_secs(120)).await;
    let b = brief(&out);
    assert!(!out["goaway"].is_null() || out["stdout_ended"] == json!(true), "never refused: {b}");
    let sent = out["sent_bytes"].as_u64().expect("sent_bytes");
    assert!(sent <= 2 * MIB, "{} KiB of one header block were read before the end: {b}", sent / KIB);
    let hwm = out["vmhwm_kib"].as_u64().expect("VmHWM") * KIB;
    assert!(hwm <= 32 * MIB + 32 * MIB, "VmHWM {} MiB: {b}", hwm / MIB);
    assert_exited_by_itself(&out);
}
