//! Tool results as the MCP specification (2025-06-18) wants them, through the
//! real library (`lib_server` fixture, real pipes): tool failures are results
//! with `isError: true`, JSON-RPC errors are for protocol problems, and
//! structured results declare an `outputSchema` and carry their JSON in the
//! first text block.

#![cfg(unix)]

mod server_support;

use serde_json::{Value, json};
use server_support::{Fixture, WAIT};

#[test]
fn tool_failures_are_results_and_protocol_problems_are_errors() {
    let mut server = Fixture::start(&[]);
    server.call(1, "fail", json!({"message": "disk full"}));
    server.call(2, "panic", json!({"message": "boom"}));
    server.call(3, "bad_args", json!({"message": "pattern is required"}));
    server.call(4, "no_such_tool", json!({}));
    server.call(5, "search", json!({"cursor": "c1not-a-cursor"}));
    server.call(6, "echo", json!({"text": "fine"}));

    let failed = server.response(1, WAIT);
    assert_eq!(failed["result"]["isError"], true, "{failed}");
    assert_eq!(failed["result"]["content"], json!([{"type": "text", "text": "tool \"fail\" failed: disk full"}]));
    let panicked = server.response(2, WAIT);
    assert_eq!(panicked["result"]["isError"], true, "{panicked}");
    let said = panicked["result"]["content"][0]["text"].as_str().unwrap();
    assert!(said.contains("panicked") && !said.contains("boom"), "{said}");
    for id in [3, 4, 5] {
        let refused = server.response(id, WAIT);
        assert_eq!(refused["error"]["code"], -32602, "request {id}: {refused}");
    }
    let fine = server.response(6, WAIT);
    assert_eq!(fine["result"].get("isError"), None, "{fine}");

    let done = server.finish();
    assert_eq!((&done.report["tool_errors"], &done.report["handler_panics"]), (&json!(1), &json!(1)));
}

#[test]
fn structured_results_declare_a_schema_and_carry_their_json_as_text() {
    let mut server = Fixture::start(&[]);
    server.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    let tools = server.response(1, WAIT)["result"]["tools"].as_array().unwrap().clone();
    let declared: Vec<&str> =
        tools.iter().filter(|t| t.get("outputSchema").is_some()).map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(declared, ["capture", "search", "preview"]);
    for tool in tools.iter().filter(|t| t.get("outputSchema").is_some()) {
        assert_eq!(tool["outputSchema"]["type"], "object", "{tool}");
    }

    server.call(2, "search", json!({"count": 3}));
    server.call(3, "preview", json!({"bytes": 10, "max": 100}));
    server.call(4, "capture", json!({"script": "echo hi"}));
    for id in [2, 3, 4] {
        let result = server.response(id, WAIT)["result"].clone();
        let structured = &result["structuredContent"];
        assert!(structured.is_object(), "request {id}: {result}");
        let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(&text, structured, "the first text block is the structured JSON");
        assert_eq!(result["content"].as_array().unwrap().len(), 2, "plus one human block: {result}");
    }
    // Declared nowhere: the structured content is left out, the JSON text
    // and the summary stay.
    server.call(5, "undeclared", json!({}));
    let undeclared = server.response(5, WAIT)["result"].clone();
    assert_eq!(undeclared.get("structuredContent"), None, "{undeclared}");
    assert_eq!(undeclared["content"][0]["text"], r#"{"undeclared":true}"#);
    assert_eq!(undeclared["content"][1]["text"], "summary");

    let done = server.finish();
    assert_eq!(done.report["undeclared_structured"], 1);
}
