//! Error replies and the smaller input rules through the real library
//! (`lib_server` fixture, real pipes): error replies stay within the
//! transport limit whatever the client sent; a duplicate in-flight id gets
//! one answer that cannot be mistaken for the original's; blank lines follow
//! one rule; an unterminated oversize message at EOF is counted and answered;
//! a second `initialize` is refused.

#![cfg(unix)]

mod server_support;

use serde_json::{Value, json};
use server_support::{Fixture, SECOND_REQUEST, WAIT};

fn line(value: &Value) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(value).unwrap();
    bytes.push(b'\n');
    bytes
}

/// Requests that fit a 4096-byte limit but carry huge names: each error
/// reply fits the limit, echoes an excerpt with the name's length, and keeps
/// the id when the id fits.
#[test]
fn error_replies_stay_within_the_transport_limit() {
    const LIMIT: usize = 4096;
    let mut server = Fixture::start(&["--max-frame", "4096"]);
    let method = "é".repeat(1900); // 3800 bytes
    let tool = "t".repeat(4000);
    let huge_id = "i".repeat(4045);
    let requests = [
        json!({"jsonrpc": "2.0", "id": 1, "method": method}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool}}),
        json!({"jsonrpc": "2.0", "id": huge_id, "method": "x"}),
    ];
    for request in &requests {
        let bytes = line(request);
        assert!(bytes.len() - 1 <= LIMIT, "each request fits the limit");
        server.send_raw(&bytes);
    }
    // Params of the wrong type: serde's complaint quotes the string.
    let meta = "k".repeat(3900);
    server.send(&json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "echo", "_meta": meta}}));

    let unknown_method = server.response_frame(1, WAIT);
    let message = unknown_method.json()["error"]["message"].as_str().unwrap().to_owned();
    assert_eq!(unknown_method.json()["error"]["code"], -32601);
    assert_eq!(message, format!("method not found: {}… (3800 bytes)", "é".repeat(32)));

    let unknown_tool = server.response(2, WAIT);
    assert_eq!(unknown_tool["error"]["code"], -32602);
    assert_eq!(unknown_tool["error"]["message"], format!("unknown tool: {}… (4000 bytes)", "t".repeat(64)));

    // The id alone does not leave room for the error: a null id, naming an
    // excerpt of it.
    let too_long = server.next_frame(WAIT);
    assert_eq!(too_long.json()["id"], Value::Null, "{:?}", too_long.value);
    let said = too_long.json()["error"]["message"].as_str().unwrap();
    assert!(said.contains("… (4047 bytes)") && said.contains("not sent"), "{said}");

    let bad_params = server.response(4, WAIT);
    assert_eq!(bad_params["error"]["code"], -32602);
    let said = bad_params["error"]["message"].as_str().unwrap();
    assert!(said.starts_with("bad tools/call params: invalid type: string \"kkk"), "{said}");
    assert!(said.len() <= 600 && said.contains("… ("), "clipped: {said}");

    let done = server.finish();
    assert_eq!(done.frames.len(), 4);
    for frame in &done.frames {
        assert!(frame.len <= LIMIT, "a {}-byte reply over the {LIMIT}-byte limit", frame.len);
    }
}

/// The issue's case at the default 16 MiB limit: a request of 16,777,193
/// bytes, nearly all method name, gets a short reply.
#[test]
fn a_request_at_the_default_limit_gets_a_reply_within_it() {
    const LIMIT: usize = 16 << 20;
    let mut server = Fixture::start(&[]);
    let (head, tail) = (br#"{"jsonrpc":"2.0","id":1,"method":""#.as_slice(), br#""}"#.as_slice());
    let mut request = head.to_vec();
    request.resize(16_777_193 - tail.len(), b'm');
    request.extend_from_slice(tail);
    request.push(b'\n');
    server.send_raw(&request);
    let reply = server.response_frame(1, WAIT);
    assert_eq!(reply.json()["error"]["code"], -32601);
    assert!(reply.len <= 200, "{}-byte reply", reply.len);
    eprintln!("a {}-byte request got a {}-byte reply (limit {LIMIT})", request.len() - 1, reply.len);
    server.finish();
}

/// Two calls with id 8 in flight, and a ping with id 8: the duplicates are
/// not processed and are answered with a null id; the original's result is
/// the only frame carrying id 8. The original runs 3 s, so the duplicates
/// reach it in flight even on a loaded machine.
#[test]
fn a_duplicate_in_flight_id_gets_one_response_with_that_id() {
    let mut server = Fixture::start(&[]);
    server.call(8, "slow", json!({"ms": 3000}));
    server.wait_started(8, WAIT);
    server.call(8, "echo", json!({"text": "duplicate"}));
    server.send(&json!({"jsonrpc": "2.0", "id": 8, "method": "ping"}));
    for _ in 0..2 {
        let refused = server.next_frame(WAIT);
        assert_eq!(refused.json()["id"], Value::Null, "{:?}", refused.value);
        assert_eq!(refused.json()["error"]["code"], -32600);
        let message = refused.json()["error"]["message"].as_str().unwrap();
        assert!(message.starts_with("request id 8 is already in flight"), "{message}");
    }
    assert_eq!(server.response(8, WAIT)["result"]["content"][0]["text"], "slept");
    server.send(&json!({"jsonrpc": "2.0", "id": 9, "method": "ping"}));
    assert_eq!(server.response(9, SECOND_REQUEST)["result"], json!({}));

    let done = server.finish();
    let with_8: Vec<&Value> = done.frames.iter().map(|f| f.json()).filter(|v| v["id"] == 8).collect();
    assert_eq!(with_8.len(), 1, "only the original's result: {with_8:?}");
    assert_eq!(done.report["duplicate_ids"], 2);
    assert_eq!(done.report["tools_started"], json!([8]), "the duplicate call never ran");
}

/// One rule for blank lines: empty, spaces, tabs, `\r` — none is a message,
/// none gets a reply, all are counted.
#[test]
fn blank_lines_are_skipped_and_counted_whatever_their_whitespace() {
    let mut server = Fixture::start(&[]);
    server.send_raw(b"\n   \n\t \r\n\r\n");
    server.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}));
    assert_eq!(server.next_frame(WAIT).json()["id"], 1, "the ping is the first reply");
    let done = server.finish();
    assert_eq!(done.frames.len(), 1);
    assert_eq!(done.report["blank_lines"], 4, "{}", done.report);
    assert_eq!(done.report["malformed"], 0);
}

/// A message over the limit that stdin EOF cuts off is counted as oversize
/// and answered like any other oversize message.
#[test]
fn an_unterminated_oversize_message_at_eof_is_counted_and_answered() {
    let mut server = Fixture::start(&["--max-frame", "4096"]);
    server.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}));
    server.send_raw(&vec![b'x'; 10_000]);
    let done = server.finish();
    assert_eq!(done.report["oversize"], 1, "{}", done.report);
    assert_eq!(done.frames.len(), 2);
    let cut = done.frames[1].json();
    assert_eq!((&cut["id"], &cut["error"]["code"]), (&Value::Null, &json!(-32600)));
    assert!(cut["error"]["message"].as_str().unwrap().contains("cut off by the end of stdin"), "{cut}");
}

/// A second `initialize` in the same session is refused; the first stands.
#[test]
fn a_second_initialize_gets_an_error() {
    let mut server = Fixture::start(&[]);
    let initialize = |id| {
        json!({"jsonrpc": "2.0", "id": id, "method": "initialize",
               "params": {"protocolVersion": "2025-06-18", "capabilities": {}}})
    };
    server.send(&initialize(0));
    assert_eq!(server.response(0, WAIT)["result"]["protocolVersion"], "2025-06-18");
    server.send(&initialize(1));
    let again = server.response(1, WAIT);
    assert_eq!(again["error"]["code"], -32600, "{again}");
    assert!(again["error"]["message"].as_str().unwrap().contains("already"), "{again}");
    let done = server.finish();
    assert_eq!(done.report["repeated_initialize"], 1);
}
