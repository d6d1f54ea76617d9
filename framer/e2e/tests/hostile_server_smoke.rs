//! Smoke test for the `hostile_server` fixture: pipelined requests are all
//! answered in order, `sized` frames have the exact length, deliberate junk
//! lines land right before their response, diagnostics stay on stderr, and the
//! byte/frame counters match what the parent actually read.

#![cfg(unix)]

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use mcp_framer_e2e::hostile::report as hostile;
use mcp_framer_e2e::report;
use mcp_framer_e2e::support::ChildWatchdog;
use serde_json::{Value, json};

/// A hang guard: a run takes well under a second, even in a debug build on
/// a loaded machine.
const WATCHDOG: Duration = Duration::from_secs(60);

/// Output of one fixture run.
#[derive(Debug)]
struct Run {
    /// stdout lines without their `\n`.
    lines: Vec<Vec<u8>>,
    stdout_bytes: usize,
    stderr: String,
    status: ExitStatus,
}

/// Runs the fixture with `args`, writes `input` to its stdin, closes stdin
/// and collects everything. A watchdog (the fixture library's) kills the child
/// after [`WATCHDOG`].
fn run(args: &[&str], input: &[u8]) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_hostile_server"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn hostile_server");
    let mut stdin = child.stdin.take().expect("stdin");
    let stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let child: Arc<Mutex<Child>> = Arc::new(Mutex::new(child));
    let watchdog = {
        let child = Arc::clone(&child);
        ChildWatchdog::arm(WATCHDOG, "hostile_server", move || {
            let _ = child.lock().unwrap().kill();
        })
    };
    let stderr_reader = thread::spawn(move || {
        let mut text = String::new();
        stderr.read_to_string(&mut text).expect("read stderr");
        text
    });

    // The input is far below the pipe capacity, so writing it all before
    // reading cannot deadlock.
    stdin.write_all(input).expect("write stdin");
    drop(stdin);

    let mut reader = BufReader::new(stdout);
    let (mut lines, mut stdout_bytes) = (Vec::new(), 0);
    loop {
        let mut line = Vec::new();
        let n = reader.read_until(b'\n', &mut line).expect("read stdout");
        if n == 0 {
            break;
        }
        stdout_bytes += n;
        assert_eq!(line.pop(), Some(b'\n'), "unterminated stdout line");
        lines.push(line);
    }
    let status = loop {
        if let Some(status) = child.lock().unwrap().try_wait().expect("try_wait") {
            break status;
        }
        thread::sleep(Duration::from_millis(5));
    };
    assert!(!watchdog.disarm(), "hostile_server did not finish within {WATCHDOG:?}");
    let stderr = stderr_reader.join().expect("stderr thread");
    Run { lines, stdout_bytes, stderr, status }
}

fn request(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

fn call(id: u64, tool: &str, arguments: Value) -> Value {
    request(id, "tools/call", json!({"name": tool, "arguments": arguments}))
}

/// Parses a stdout line as a response and checks its id.
fn response(line: &[u8], id: u64) -> Value {
    let msg: Value = serde_json::from_slice(line)
        .unwrap_or_else(|e| panic!("line for id {id} is not JSON ({e}): {}", String::from_utf8_lossy(line)));
    assert_eq!(msg["jsonrpc"], "2.0");
    assert_eq!(msg["id"], id, "unexpected frame: {msg}");
    msg
}

fn text(msg: &Value) -> &str {
    msg["result"]["content"][0]["text"].as_str().unwrap_or_else(|| panic!("no text content in {msg}"))
}

/// The value of `key` in the final `stats` report line, which must be the
/// last line on stderr.
fn stat(stderr: &str, key: &str) -> u64 {
    let last = stderr.lines().last().unwrap_or_default();
    let stats = report::parse(last, hostile::STATS).unwrap_or_else(|| panic!("last stderr line: {last:?}"));
    stats[key].as_u64().unwrap_or_else(|| panic!("{key} missing in {stats}"))
}

#[test]
fn answers_pipelined_requests_and_places_junk_exactly() {
    let messages = [
        request(
            1,
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "smoke", "version": "0"}}),
        ),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        call(2, "ping", json!({})),
        call(3, "echo", json!({"text": "h\u{e9}llo \"\u{1f980}\"\n"})),
        call(4, "sized", json!({"frame_bytes": 1000})),
        call(5, "malformed", json!({})),
        call(6, "log_line", json!({})),
        request(7, "ping", json!({})),
        request(8, "no/such/method", json!({})),
        call(9, "stats", json!({})),
    ];
    let mut input = String::new();
    for msg in &messages {
        input.push_str(&msg.to_string());
        input.push_str("\r\n");
    }
    let run = run(&[], input.as_bytes());
    assert!(run.status.success(), "exit status {:?}", run.status);
    let lines = &run.lines;
    assert_eq!(lines.len(), 11, "stdout lines: {lines:#?}");

    let init = response(&lines[0], 1);
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
    assert_eq!(init["result"]["serverInfo"]["name"], "hostile-server");
    assert_eq!(text(&response(&lines[1], 2)), "pong");
    assert_eq!(text(&response(&lines[2], 3)), "h\u{e9}llo \"\u{1f980}\"\n");
    assert_eq!(lines[3].len(), 1000, "sized frame length excluding \\n");
    response(&lines[3], 4);
    assert!(lines[4].starts_with(br#"{"jsonrpc":"2.0","id":"#));
    assert!(serde_json::from_slice::<Value>(&lines[4]).is_err());
    response(&lines[5], 5);
    assert_eq!(lines[6], b"INFO server started");
    response(&lines[7], 6);
    assert_eq!(response(&lines[8], 7)["result"], json!({}));
    assert_eq!(response(&lines[9], 8)["error"]["code"], -32601);

    // `stats` reports the counters as they were before its own frame.
    let stats = &response(&lines[10], 9)["result"]["structuredContent"];
    let before: usize = lines[..10].iter().map(|l| l.len() + 1).sum();
    assert_eq!(stats["bytes_written"], before);
    assert_eq!(stats["frames"], 8);
    assert_eq!(stats["junk_lines"], 2);

    // Diagnostics stay on stderr; the final stats line counts what we read.
    assert!(!run.stderr.is_empty());
    assert_eq!(stat(&run.stderr, "frames"), 9);
    assert_eq!(stat(&run.stderr, "bytes_written"), run.stdout_bytes as u64);
    stat(&run.stderr, "blocked_write_us");
}

#[test]
fn on_start_runs_a_tool_without_any_request() {
    let run = run(&["--on-start", "sized", "--arg", "frame_bytes=300"], b"");
    assert!(run.status.success(), "exit status {:?}", run.status);
    assert_eq!(run.lines.len(), 1);
    assert_eq!(run.lines[0].len(), 300);
    response(&run.lines[0], 0);
    assert_eq!(stat(&run.stderr, "bytes_written"), 301);
}
