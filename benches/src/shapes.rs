//! Realistic MCP JSON-RPC messages for the benches, in three shapes:
//!
//! * [`tools_call_request`]: a client's `tools/call` request, about 200 B;
//! * [`tools_list_result`]: a server's `tools/list` result, many tools with
//!   their JSON Schemas, padded to an exact size (64 KiB in the benches);
//! * [`large_text_result`]: a `tools/call` result whose one text block is a
//!   large file dump (source lines with quotes, tabs, escaped newlines and a
//!   little non-ASCII text), padded to an exact size (8 MiB in the benches).
//!
//! Each builder returns one message **without** its `\n`; it never contains a
//! raw `\n` byte (newlines inside strings are JSON-escaped, as the stdio
//! transport requires). [`stream`] repeats a shape into a newline-delimited
//! stream.
//!
//! ```
//! use mcp_framer_benches::shapes::{stream, tools_list_result};
//!
//! let one = tools_list_result(64 * 1024);
//! assert_eq!(one.len(), 64 * 1024);
//! let (bytes, frames) = stream(|_| tools_list_result(64 * 1024), 1 << 20);
//! assert_eq!(frames, 16);
//! assert_eq!(bytes.len(), 16 * (64 * 1024 + 1));
//! ```

use serde_json::{Value, json};

/// One read from a Linux pipe at its default size: the chunk size the benches
/// feed their strategies with.
pub const PIPE_READ: usize = 64 * 1024;

/// Whether `MCP_BENCH_QUICK` is set (and not `0`): the benches then shorten
/// warm-up and measurement and use smaller streams. `scripts/bench-report
/// --quick` sets it.
pub fn quick() -> bool {
    std::env::var_os("MCP_BENCH_QUICK").is_some_and(|v| !v.is_empty() && v != "0")
}

/// Bootstrap resamples of criterion's analysis: its default (100,000) in a
/// full run, 10,000 in a quick one. With the default, analysis took about
/// 10 s per benchmark here, several times its 1-2.5 s of measurement
/// (`time MCP_BENCH_QUICK=1 cargo bench -p mcp-framer-benches --bench pipe --
/// 'pipe/200B/split-cpus/'`, 9 benchmarks: 105 s, and 29 s with 10,000;
/// the quick pipe suite in `scripts/bench-report --quick` went from 698 s
/// to 180 s). The medians the report uses are computed from the samples,
/// not resampled; only criterion's confidence intervals get coarser.
pub fn resamples() -> usize {
    if quick() { 10_000 } else { 100_000 }
}

/// A `tools/call` request with request id `id`: about 200 bytes.
pub fn tools_call_request(id: u64) -> Vec<u8> {
    let msg = json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": "tools/call",
        "params": {
            "name": "search_files",
            "arguments": {"path": "/home/dev/project/src", "pattern": "fn main", "max_results": 50},
            "_meta": {"progressToken": id},
        },
    });
    serde_json::to_vec(&msg).expect("a Value always serializes")
}

/// One tool of a `tools/list` result: name, description and input schema.
fn tool(i: usize) -> Value {
    json!({
        "name": format!("repo_tool_{i}"),
        "title": format!("Repository tool #{i}"),
        "description": "Searches the repository for files whose contents match a pattern and returns \
                        the matching lines with their paths and line numbers. Binary files are skipped.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Directory to search, relative to the workspace root"},
                "pattern": {"type": "string", "description": "Regular expression to look for"},
                "max_results": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100},
                "include_hidden": {"type": "boolean", "default": false},
            },
            "required": ["path", "pattern"],
            "additionalProperties": false,
        },
        "annotations": {"readOnlyHint": true, "openWorldHint": false},
    })
}

fn tools_list_message(tools: Vec<Value>) -> Value {
    json!({"jsonrpc": "2.0", "id": 2, "result": {"tools": tools}})
}

/// A `tools/list` result of exactly `target_bytes` bytes (or the smallest
/// such message with one tool, if `target_bytes` is smaller than that): as
/// many tools as fit, the last tool's description padded with words.
pub fn tools_list_result(target_bytes: usize) -> Vec<u8> {
    let mut tools = vec![tool(0)];
    let mut len = encoded_len(&tools_list_message(tools.clone()));
    loop {
        let next = tool(tools.len());
        let grown = len + encoded_len(&next) + 1; // + the ','
        if grown > target_bytes {
            break;
        }
        tools.push(next);
        len = grown;
    }
    let last = tools.last_mut().expect("at least one tool");
    let mut description = last["description"].as_str().expect("a string").to_owned();
    pad_ascii(&mut description, target_bytes.saturating_sub(len));
    last["description"] = Value::String(description);
    let out = encode(&tools_list_message(tools));
    debug_assert!(out.len() == target_bytes || target_bytes < out.len());
    out
}

/// Lines of a source file: quotes, tabs and (later escaped) newlines, with a
/// little 2-, 3- and 4-byte UTF-8.
const FILE_LINES: [&str; 8] = [
    "fn main() {\n",
    "\tlet greeting = \"héllo, wörld\";\n",
    "\tprintln!(\"{greeting} — {}\", args.len());\n",
    "\t// Déjà vu: parse the \"config\" before anything else.\n",
    "\tlet path = r\"C:\\Users\\dev\\config.toml\";\n",
    "\tlet emoji = \"🦀 ok\";\n",
    "\tfor (i, line) in text.lines().enumerate() { total += line.len() * i; }\n",
    "}\n\n",
];

/// A `tools/call` result of exactly `target_bytes` bytes (or the smallest
/// such message, if `target_bytes` is smaller): one text block holding a
/// large file dump, then `isError: false`.
pub fn large_text_result(target_bytes: usize) -> Vec<u8> {
    let message = |text: String| {
        json!({
            "jsonrpc": "2.0",
            "id": 7,
            "result": {"content": [{"type": "text", "text": text}], "isError": false},
        })
    };
    let empty = encoded_len(&message(String::new()));
    let budget = target_bytes.saturating_sub(empty);
    // Whole lines while they fit (counting their escaped length), then pad.
    let mut text = String::with_capacity(budget);
    let mut used = 0;
    for line in FILE_LINES.iter().cycle() {
        let cost = escaped_len(line);
        if used + cost > budget {
            break;
        }
        text.push_str(line);
        used += cost;
    }
    pad_ascii(&mut text, budget - used);
    let out = encode(&message(text));
    debug_assert!(out.len() == target_bytes || target_bytes < empty);
    out
}

/// Repeats a shape into a newline-delimited stream of at least `total_bytes`
/// bytes (and at least one message): message `i` is `shape(i)` followed by
/// `\n`. Returns the stream and the number of messages in it.
///
/// # Panics
///
/// If a message contains a raw `\n`.
pub fn stream(mut shape: impl FnMut(u64) -> Vec<u8>, total_bytes: usize) -> (Vec<u8>, u64) {
    let mut out = Vec::with_capacity(total_bytes);
    let mut frames = 0;
    while frames == 0 || out.len() < total_bytes {
        let msg = shape(frames);
        assert!(!msg.contains(&b'\n'), "message {frames} contains a raw newline");
        out.extend_from_slice(&msg);
        out.push(b'\n');
        frames += 1;
    }
    (out, frames)
}

fn encode(msg: &Value) -> Vec<u8> {
    serde_json::to_vec(msg).expect("a Value always serializes")
}

fn encoded_len(msg: &Value) -> usize {
    encode(msg).len()
}

/// The length of `s` once JSON-escaped, without the quotes.
fn escaped_len(s: &str) -> usize {
    encoded_len(&Value::String(s.to_owned())) - 2
}

/// Appends exactly `n` bytes of plain ASCII words (no byte needs escaping).
fn pad_ascii(s: &mut String, n: usize) {
    const WORDS: &[u8] = b" lorem ipsum dolor sit amet consectetur adipiscing elit";
    s.extend(WORDS.iter().cycle().take(n).map(|&b| char::from(b)));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(msg: &[u8]) -> Value {
        serde_json::from_slice(msg).expect("valid JSON")
    }

    #[test]
    fn tools_call_request_is_a_200_byte_tools_call() {
        let msg = tools_call_request(12_345);
        assert!((180..=220).contains(&msg.len()), "{} bytes", msg.len());
        let v = parse(&msg);
        assert_eq!(v["method"], "tools/call");
        assert_eq!(v["id"], 12_345);
    }

    #[test]
    fn sized_shapes_hit_their_target_exactly() {
        for target in [1000, 4096, 64 * 1024, 1 << 20] {
            let list = tools_list_result(target);
            assert_eq!(list.len(), target);
            assert!(parse(&list)["result"]["tools"].as_array().unwrap().len() > 1 || target < 2000);
            let text = large_text_result(target);
            assert_eq!(text.len(), target);
            let v = parse(&text);
            assert!(v["result"]["content"][0]["text"].as_str().unwrap().contains('🦀') || target < 2000);
        }
    }

    #[test]
    fn too_small_targets_give_the_smallest_message() {
        assert!(tools_list_result(10).len() > 10);
        assert!(large_text_result(10).len() > 10);
        parse(&tools_list_result(10));
        parse(&large_text_result(10));
    }

    #[test]
    fn stream_counts_messages_and_has_no_stray_newlines() {
        let (bytes, frames) = stream(tools_call_request, 100_000);
        assert!(bytes.len() >= 100_000);
        assert_eq!(memchr::memchr_iter(b'\n', &bytes).count() as u64, frames);
        assert!(bytes.ends_with(b"\n"));
        let (bytes, frames) = stream(|_| large_text_result(1 << 20), 4 << 20);
        assert_eq!(frames, 4, "the last message may overshoot the total, never undershoot");
        assert_eq!(bytes.len(), 4 * ((1 << 20) + 1));
    }
}
