//! stdout hygiene and input errors through the real library (`lib_server`
//! fixture, real pipes): panics and log calls inside handlers never reach
//! stdout, malformed and oversize input get the JSON-RPC errors the spec
//! calls for while the session continues, and stdin EOF shuts down within
//! the grace period.

#![cfg(unix)]

mod server_support;

use std::time::{Duration, Instant};

use mcp_framer_e2e::lib_server::report as lib_server;
use mcp_framer_e2e::report;
use mcp_framer_e2e::support::eventually;
use mcp_framer_e2e::support::proc::live_group_members;
use mcp_framer_jsonrpc::Kind;
use serde_json::{Value, json};
use server_support::{Fixture, SECOND_REQUEST, WAIT};

/// Every stdout line is a whole JSON-RPC response or notification.
fn assert_only_protocol(frames: &[server_support::Frame]) {
    for frame in frames {
        let value = frame.json();
        let bytes = serde_json::to_vec(value).unwrap();
        let message = mcp_framer_jsonrpc::parse(&bytes).unwrap_or_else(|e| panic!("not JSON-RPC: {e}: {value}"));
        assert!(matches!(message.kind(), Kind::Response | Kind::ErrorResponse | Kind::Notification), "{value}");
    }
}

#[test]
fn panics_and_logs_in_handlers_never_reach_stdout() {
    let mut server = Fixture::start(&[]);
    server.call(1, "panic", json!({"message": "boom-in-handler"}));
    server.call(2, "log", json!({"text": "LOGTEXT-7"}));
    // A panic is a tool failure: a result with isError, saying so without
    // the panic's text (that goes to the log).
    let panicked = server.response(1, WAIT);
    assert_eq!(panicked["result"]["isError"], true, "{panicked}");
    assert!(panicked["result"]["content"][0]["text"].as_str().unwrap().contains("panicked"));
    assert_eq!(server.response(2, WAIT)["result"]["content"][0]["text"], "logged");
    let sent = Instant::now();
    server.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}));
    assert_eq!(server.response(3, SECOND_REQUEST)["result"], json!({}));
    assert!(sent.elapsed() < SECOND_REQUEST);

    let done = server.finish();
    assert!(done.status.success());
    assert_eq!(done.frames.len(), 3, "three responses and nothing else: {:?}", done.frames);
    assert_only_protocol(&done.frames);
    for frame in &done.frames {
        let text = frame.json().to_string();
        assert!(!text.contains("LOGTEXT") && !text.contains("boom-in-handler"), "log or panic text on stdout: {text}");
    }
    // The tracing events, as the fixture's structured `trace` lines.
    let logged: Vec<(Value, Value)> = report::all(&done.stderr, lib_server::TRACE)
        .filter(|fields| fields["message"].as_str().is_some_and(|m| m.ends_with(": LOGTEXT-7")))
        .map(|fields| (fields["level"].clone(), fields["message"].clone()))
        .collect();
    assert_eq!(
        logged,
        [("INFO", "info: LOGTEXT-7"), ("WARN", "warn: LOGTEXT-7"), ("ERROR", "error: LOGTEXT-7")]
            .map(|(level, message)| (json!(level), json!(message))),
        "{}",
        done.stderr
    );
    // Raw text that reaches stderr outside tracing (the panic hook's message,
    // `eprintln!`, and `println!`, which serve_stdio pointed at stderr): the
    // text itself is what must arrive, so it is the oracle.
    for line in ["boom-in-handler", "eprintln: LOGTEXT-7", "println: LOGTEXT-7"] {
        assert!(done.stderr.contains(line), "{line:?} missing from stderr:\n{}", done.stderr);
    }
    assert_eq!(done.report["handler_panics"], 1);
}

#[test]
fn malformed_input_gets_json_rpc_errors_and_the_session_continues() {
    let mut server = Fixture::start(&[]);
    let lines: [&[u8]; 8] = [
        b"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":",
        b"{\"jsonrpc\":\"1.0\",\"id\":6,\"method\":\"ping\"}",
        b"[1,2]",
        b"\xff\xfe{}",
        b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"no/such/method\"}",
        b"{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/call\",\"params\":{\"name\":\"no_such_tool\"}}",
        b"",
        b"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\"}\r",
    ];
    for line in lines {
        server.send_raw(&[line, b"\n"].concat());
    }
    let mut answers = Vec::new();
    for _ in 0..7 {
        let frame = server.next_frame(WAIT);
        let value = frame.json();
        answers.push((value["id"].clone(), value["error"]["code"].clone()));
    }
    assert_eq!(
        answers,
        [
            (Value::Null, json!(-32700)),
            (json!(6), json!(-32600)),
            (Value::Null, json!(-32600)),
            (Value::Null, json!(-32700)),
            (json!(7), json!(-32601)),
            (json!(8), json!(-32602)),
            (json!(9), Value::Null),
        ]
    );
    let done = server.finish();
    assert_only_protocol(&done.frames);
    assert_eq!(done.report["malformed"], 4);
    assert_eq!(done.report["unknown_methods"], 1);
}

#[test]
fn oversize_input_is_answered_and_the_session_continues() {
    let mut server = Fixture::start(&["--max-frame", "4096"]);
    let text = "é".repeat(5000);
    server.call(1, "echo", json!({"text": text}));
    let frame = server.next_frame(WAIT);
    let error = frame.json();
    assert_eq!(error["id"], Value::Null, "the id cannot be read from a discarded message");
    assert_eq!(error["error"]["code"], -32600);
    assert!(error["error"]["message"].as_str().unwrap().contains("exceeds the transport limit of 4096 bytes"));
    server.call(2, "echo", json!({"text": "small"}));
    assert_eq!(server.response(2, SECOND_REQUEST)["result"]["content"][0]["text"], "small");
    // A result over the response limit becomes a tool failure instead.
    server.call(3, "big", json!({"bytes": 10_000}));
    let too_big = server.response(3, WAIT);
    assert_eq!(too_big["result"]["isError"], true, "{too_big}");
    let said = too_big["result"]["content"][0]["text"].as_str().unwrap();
    assert!(said.contains("result not sent") && said.contains("4096"), "{said}");
    let done = server.finish();
    assert_eq!(done.report["oversize"], 1);
    assert_eq!(done.report["oversize_results"], 1);
    assert!(done.frames.iter().all(|f| f.len <= 4096));
}

/// A loaded machine's delays, on top of what a server waits on purpose:
/// seconds, where a defect would wait minutes or forever.
const SLACK: Duration = Duration::from_secs(5);

/// At stdin EOF, work that ends within the grace period still gets its
/// response; work that does not is cancelled, its process group killed, its
/// id logged, and it is answered -32603 "abandoned"; the process exits
/// cleanly, within the grace and the bounded flush after it. The short work
/// (200 ms) fits the grace (3 s) with room to spare on a loaded machine; the
/// long work (5 minutes) would outlast the watchdog.
#[test]
fn stdin_eof_finishes_short_work_and_cancels_the_rest() {
    const GRACE: Duration = Duration::from_secs(3);
    let mut server = Fixture::start(&["--grace-ms", &GRACE.as_millis().to_string()]);
    server.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "subprocess", "arguments": {"script": "sleep 300"}, "_meta": {"progressToken": 2}}}));
    let progress = server.notification("notifications/progress", WAIT);
    let pid: u32 = progress["params"]["message"].as_str().unwrap()[4..].parse().unwrap();
    server.call(1, "slow", json!({"ms": 200}));
    server.wait_started(1, WAIT);

    let closed = Instant::now();
    let done = server.finish();
    let took = closed.elapsed();
    assert!(done.status.success(), "{:?}", done.status);
    assert!(took < 2 * GRACE + SLACK, "shutdown took {took:?}");
    assert!(took >= GRACE, "waited for the grace period: {took:?}");
    let answered: Vec<_> = done.frames.iter().filter_map(|f| f.id().cloned()).collect();
    assert_eq!(answered, [json!(1), json!(2)], "the short call finished; the long one was abandoned");
    let answer = |id: i64| done.frames.iter().find(|f| f.id() == Some(&json!(id))).unwrap().json();
    assert_eq!(answer(1)["result"]["content"][0]["text"], "slept");
    let abandoned = &answer(2)["error"];
    assert_eq!(abandoned["code"], -32603);
    assert!(abandoned["message"].as_str().unwrap().starts_with("request abandoned"), "{abandoned}");
    assert_eq!(done.report["cancelled_at_shutdown"], 1);
    let logged: Vec<Value> = report::all(&done.stderr, lib_server::TRACE)
        .filter(|fields| fields["message"].as_str().is_some_and(|m| m.starts_with("requests abandoned at shutdown")))
        .collect();
    assert_eq!(logged.len(), 1, "{}", done.stderr);
    assert_eq!((&logged[0]["ids"], &logged[0]["count"]), (&json!("2"), &json!(1)));
    assert!(eventually(WAIT, || live_group_members(pid).is_empty()), "child group {pid} killed");
}

/// At stdin EOF with a host that has stopped draining stdout, the flush is
/// bounded too: the server gives up after the grace period, says how many
/// frames it could not flush, and exits (without the bound it would wait
/// for the host forever). The host's framer then reports the unfinished
/// frame as truncated, never as a frame.
#[test]
fn stdin_eof_exits_within_the_bound_when_stdout_is_not_drained() {
    const GRACE: Duration = Duration::from_millis(300);
    let mut server = Fixture::start_paused(&["--grace-ms", &GRACE.as_millis().to_string()]);
    server.call(1, "big", json!({"bytes": 4 << 20}));
    assert!(server.first_stdout_read(2 * WAIT) > 0);
    let closed = Instant::now();
    server.close_stdin();
    let status = server.wait_exit(WAIT).expect("exited although stdout was never drained");
    assert!(status.success(), "{status:?}");
    assert!(closed.elapsed() < 2 * GRACE + SLACK, "took {:?}", closed.elapsed());
    let done = server.finish();
    assert_eq!(done.report["unflushed_frames"], 1, "{}", done.report);
    // The operator is told too: one warning carrying the same count.
    let warned = report::all(&done.stderr, lib_server::TRACE).filter(|fields| fields["unflushed"] == 1);
    assert_eq!(warned.map(|fields| fields["level"].clone()).collect::<Vec<_>>(), ["WARN"], "{}", done.stderr);
    assert_eq!(done.frames.len(), 1);
    let truncated = done.frames[0].value.as_ref().unwrap_err();
    assert!(truncated.starts_with("Truncated"), "{truncated}");
}
