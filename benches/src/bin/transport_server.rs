//! `transport_server`: the one child program of the `stdio_v2` benchmark
//! (`benches/benches/stdio_v2.rs`), so that newline framing and `stdio-v2`
//! are compared on the same server: the library's
//! [`Server`](mcp_framer_stdio::server::Server) with the same tools and
//! limits, served on stdin and stdout either as newline-delimited JSON-RPC
//! (`--transport stdio`, `Server::serve_stdio`) or as HTTP/2
//! (`--transport stdio-v2`, `mcp_framer_stdio_v2::server::serve_stdio`).
//!
//! Tools:
//!
//! * `blob` (`bytes`): one text block of exactly `bytes` bytes of `x`;
//! * `cpu`: this process's CPU time so far, every thread, user and system,
//!   in nanoseconds (the text of its one block): what
//!   the benchmark reads before and after a window to charge the server;
//! * `ping` is the protocol's own.
//!
//! Both limits (what it reads, what it writes) are [`LIMIT`], above the
//! benchmark's largest result. It exits at the end of its input.

use mcp_framer_stdio::server::{Call, RpcError, Server, ServerConfig, Tool, ToolResult};
use serde_json::{Value, json};

/// The transport limit both ways: the largest result the benchmark asks for
/// (64 MiB) and its envelope.
const LIMIT: usize = 80 << 20;

async fn blob(call: Call) -> Result<ToolResult, RpcError> {
    let args: Value = call.args()?;
    let bytes = args.get("bytes").and_then(Value::as_u64).ok_or_else(|| RpcError::invalid_params("bytes"))?;
    Ok(ToolResult::text("x".repeat(bytes as usize)))
}

async fn cpu(_call: Call) -> Result<ToolResult, RpcError> {
    let ns = mcp_framer_benches::pipe::ProcessCpu::since_start().as_nanos() as u64;
    Ok(ToolResult::text(ns.to_string()))
}

fn main() {
    let transport = std::env::args().skip_while(|a| a != "--transport").nth(1).unwrap_or_else(|| "stdio".into());
    let config = ServerConfig::default().with_max_receive(LIMIT).with_max_send(LIMIT).with_writer_queue_bytes(LIMIT);
    let schema = json!({"type": "object", "properties": {"bytes": {"type": "integer"}}, "required": ["bytes"]});
    let server = Server::new("transport_server", "0")
        .with_config(config)
        .tool(Tool::new("blob", "A text result of `bytes` bytes", schema), blob)
        .tool(Tool::new("cpu", "This process's CPU time so far, in ns", json!({"type": "object"})), cpu);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a runtime");
    let served = runtime.block_on(async {
        match transport.as_str() {
            "stdio" => server.serve_stdio().await.map(drop),
            "stdio-v2" => mcp_framer_stdio_v2::server::serve_stdio(server, Default::default()).await.map(drop),
            other => Err(std::io::Error::other(format!("--transport {other}: stdio or stdio-v2"))),
        }
    });
    // A blocked stdout write may still hold a runtime thread: exit
    // explicitly, without dropping the runtime.
    match served {
        Ok(()) => std::process::exit(0),
        Err(e) => {
            eprintln!("transport_server: {e}");
            std::process::exit(1)
        }
    }
}
