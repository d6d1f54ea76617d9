//! Regenerates the `parse` fuzz target's committed seeds
//! (`corpus/parse/`). Ignored by default; run with
//!
//! ```text
//! cargo test -p mcp-framer-jsonrpc --features check --test corpus_generate -- --ignored
//! ```
//!
//! Each seed is one frame, checked to pass the differential check first.

#[path = "../../core/tests/common/corpus.rs"]
mod corpus;

use std::fs;

/// The parse seeds: single frames (the target's input is the frame).
fn parse_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let raw: Vec<(&'static str, &[u8])> = vec![
        ("request", br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}"#),
        ("request_string_id", br#"{"jsonrpc":"2.0","id":"a-1","method":"ping"}"#),
        ("notification_cancelled", br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3,"reason":"user"}}"#),
        ("response", br#"{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"ok"}],"isError":false}}"#),
        ("response_null_result", br#"{"jsonrpc":"2.0","id":"x","result":null}"#),
        ("error_response", br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#),
        ("quotes_backslashes", br#"{"jsonrpc":"2.0","id":2,"method":"m\"q\\","params":["\"","\\","\/","\b\f\n\r\t","\u0000"]}"#),
        ("unicode_escapes", br#"{"jsonrpc":"2.0","id":"\u00e9\ud83d\ude00","method":"\u4e2d","params":{}}"#),
        ("lone_surrogate", br#"{"jsonrpc":"2.0","id":1,"method":"m","params":["\ud800"]}"#),
        ("big_integer", br#"{"jsonrpc":"2.0","id":1,"result":123456789012345678901234567890}"#),
        ("float_overflow", br#"{"jsonrpc":"2.0","id":1,"result":1e400}"#),
        ("id_out_of_range", br#"{"jsonrpc":"2.0","id":9223372036854775808,"method":"m"}"#),
        ("id_float", br#"{"jsonrpc":"2.0","id":1.5,"method":"m"}"#),
        ("negative_zero", br#"{"jsonrpc":"2.0","id":-0,"result":[-0,0.0,-0.0e0]}"#),
        ("duplicate_id", br#"{"jsonrpc":"2.0","id":1,"id":2,"method":"m"}"#),
        ("duplicate_other_key", br#"{"jsonrpc":"2.0","x":1,"x":2,"id":1,"method":"m"}"#),
        ("bad_version", br#"{"jsonrpc":"1.0","id":1,"method":"m"}"#),
        ("no_version", br#"{"id":1,"method":"m"}"#),
        ("batch", br#"[{"jsonrpc":"2.0","id":1,"method":"m"}]"#),
        ("not_an_object", b"42"),
        ("result_and_error", br#"{"jsonrpc":"2.0","id":1,"result":1,"error":{}}"#),
        ("method_not_string", br#"{"jsonrpc":"2.0","id":1,"method":7}"#),
        ("request_null_id", br#"{"jsonrpc":"2.0","id":null,"method":"m"}"#),
        ("params_null", br#"{"jsonrpc":"2.0","method":"m","params":null}"#),
        ("trailing_garbage", br#"{"jsonrpc":"2.0","id":1,"result":1} x"#),
        ("two_values", br#"{"jsonrpc":"2.0","id":1,"result":1}{}"#),
        ("truncated", br#"{"jsonrpc":"2.0","id":1,"result":{"a":"#),
        ("deep_nesting", b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}"),
        ("whitespace", b" \t{ \"jsonrpc\" : \"2.0\" ,\r\"id\":1 , \"result\" : true } \t"),
        ("trailing_cr", b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":true}\r"),
        ("bom", b"\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":true}"),
        ("nul_byte", b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"a\0b\"}"),
        ("nul_outside_string", b"{\"jsonrpc\":\"2.0\",\0\"id\":1,\"result\":1}"),
        ("invalid_utf8", b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"\xFF\xFE\"}"),
        ("invalid_utf8_overlong", b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"\xC0\xAF\"}"),
        ("empty", b""),
    ];
    let mut seeds: Vec<(&'static str, Vec<u8>)> = raw.into_iter().map(|(n, b)| (n, b.to_vec())).collect();
    seeds.push((
        "multibyte",
        "{\"jsonrpc\":\"2.0\",\"id\":\"é中😀\",\"method\":\"tools/call\",\"params\":{\"t\":\"😀👍🏽\"}}".into(),
    ));
    let long = "x".repeat(4000);
    seeds.push((
        "long_string_no_spaces",
        format!("{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"text\":\"{long}\"}}}}").into_bytes(),
    ));
    seeds
}

#[test]
#[ignore = "writes corpus/parse; run by hand to regenerate"]
fn regenerate_parse_seeds() {
    let dir = corpus::corpus_dir().join("parse");
    for old in corpus::files(&dir) {
        fs::remove_file(old).unwrap();
    }
    fs::create_dir_all(&dir).unwrap();
    for (name, frame) in parse_seeds() {
        mcp_framer_jsonrpc::check::check_parse(&frame);
        fs::write(dir.join(name), &frame).unwrap();
    }
}
