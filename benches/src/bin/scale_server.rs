//! `scale_server`: the small MCP-like stdio server of the scale benchmark
//! (`benches/benches/scale.rs`). It answers each request on stdin with one
//! line on stdout: `big` with a response of exactly 16,000,000 bytes (its
//! `\n` excluded), any other method with an empty result. It exits at end of
//! stdin. Blocking std I/O, one thread: the server's own footprint is not
//! what the benchmark measures.

use std::io::{BufRead, BufReader, Write};

/// The length of the `big` response line, `\n` excluded.
const BIG: usize = 16_000_000;

fn main() {
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout().lock();
    let mut line = String::new();
    let mut reader = BufReader::with_capacity(4096, stdin.lock());
    loop {
        line.clear();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let Ok(request) = serde_json::from_str::<serde_json::Value>(&line) else { continue };
        let Some(id) = request.get("id") else { continue }; // a notification
        let id = id.to_string();
        let reply = if request["method"] == "big" {
            let head = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"text\":\"");
            let tail = "\"}}";
            let mut reply = Vec::with_capacity(BIG + 1);
            reply.extend_from_slice(head.as_bytes());
            reply.resize(BIG - tail.len(), b'x');
            reply.extend_from_slice(tail.as_bytes());
            debug_assert_eq!(reply.len(), BIG);
            reply
        } else {
            format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{}}}}").into_bytes()
        };
        let written = stdout.write_all(&reply).and_then(|()| stdout.write_all(b"\n")).and_then(|()| stdout.flush());
        if written.is_err() {
            return;
        }
    }
}
