//! Result budgets through the real library (`lib_server` fixture, real
//! pipes): a budgeted listing full of quotes, backslashes and multibyte text
//! stays within its byte budget on the wire and its cursors walk every item
//! exactly once; byte previews and subprocess captures stay bounded.

#![cfg(unix)]

mod server_support;

use serde_json::{Value, json};
use server_support::{Fixture, WAIT};

/// Bytes of the `result` value inside a response frame of `len` bytes.
fn result_len(frame_len: usize, id: i64) -> usize {
    frame_len - format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":").len() - 1
}

fn walk(server: &mut Fixture, first_id: i64, known_total: bool, max_bytes: usize) -> (Vec<u64>, i64) {
    let (mut indexes, mut id, mut cursor) = (Vec::new(), first_id, Value::Null);
    loop {
        let mut args = json!({"query": "q\"\\é", "count": 300, "max_items": 40, "max_bytes": max_bytes,
                              "known_total": known_total});
        if !cursor.is_null() {
            args["cursor"] = cursor.clone();
        }
        server.call(id, "search", args);
        let frame = server.response_frame(id, WAIT);
        let (response, frame_len) = (frame.json(), frame.len);
        let result = &response["result"];
        assert_eq!(serde_json::to_vec(result).unwrap().len(), result_len(frame_len, id));
        assert!(result_len(frame_len, id) <= max_bytes, "{} > {max_bytes}", result_len(frame_len, id));
        let structured = &result["structuredContent"];
        let items = structured["items"].as_array().unwrap();
        assert!(!items.is_empty() && items.len() <= 40);
        indexes.extend(items.iter().map(|item| item["index"].as_u64().unwrap()));
        // The first text block carries the structured JSON, the second the summary.
        let carried: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(&carried, structured);
        let text = result["content"][1]["text"].as_str().unwrap();
        if known_total {
            assert_eq!(structured["totalEstimate"], 300);
        } else {
            assert_eq!(structured.get("totalEstimate"), None, "never an invented total");
        }
        cursor = structured.get("nextCursor").cloned().unwrap_or(Value::Null);
        assert_eq!(structured["truncated"], json!(!cursor.is_null()));
        id += 1;
        if cursor.is_null() {
            assert!(text.ends_with("That is all."), "{text}");
            return (indexes, id);
        }
        assert!(text.contains(cursor.as_str().unwrap()), "the text tells how to continue: {text}");
        if !known_total {
            assert!(text.contains("the total is not known"), "{text}");
        }
    }
}

#[test]
fn search_cursors_walk_every_item_once_within_the_byte_budget() {
    let mut server = Fixture::start(&[]);
    let (indexes, next_id) = walk(&mut server, 1, true, 3000);
    assert_eq!(indexes, (0..300).collect::<Vec<_>>());
    let (indexes, next_id) = walk(&mut server, next_id, false, 5000);
    assert_eq!(indexes, (0..300).collect::<Vec<_>>());

    server.call(next_id, "search", json!({"cursor": "c1not-a-cursor"}));
    assert_eq!(server.response(next_id, WAIT)["error"]["code"], -32602);
    let done = server.finish();
    assert!(done.frames.iter().all(|f| f.value.is_ok()));
}

#[test]
fn byte_previews_and_captures_stay_bounded() {
    let mut server = Fixture::start(&[]);
    server.call(1, "preview", json!({"kind": "text", "bytes": 1_000_000, "max": 1000}));
    let text = server.response(1, WAIT);
    let shown = text["result"]["content"][1]["text"].as_str().unwrap();
    assert!(shown.len() < 1100);
    assert!(shown.ends_with("[preview: first 1000 of 1000000 bytes; 999000 bytes not shown]"), "{shown}");

    server.call(2, "preview", json!({"kind": "binary", "bytes": 1_000_000}));
    let binary = server.response(2, WAIT);
    assert!(binary["result"]["content"][1]["text"].as_str().unwrap().starts_with("[binary data: 1000000 bytes"));
    assert_eq!(binary["result"]["structuredContent"]["binary"], true);

    let script = "head -c 20000000 /dev/zero & head -c 30000000 /dev/zero >&2; wait";
    server.call(3, "capture", json!({"script": script, "head": 100, "tail": 200}));
    let capture = &server.response(3, WAIT)["result"]["structuredContent"];
    assert_eq!(capture["ending"], "Exited");
    assert_eq!(capture["stdout"], json!({"total": 20_000_000, "dropped": 20_000_000 - 300, "head": 100, "tail": 200}));
    assert_eq!(capture["stderr"], json!({"total": 30_000_000, "dropped": 30_000_000 - 200, "tail": 200}));
    server.finish();
}
