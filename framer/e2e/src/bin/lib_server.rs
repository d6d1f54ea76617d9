//! `lib_server`: an MCP server built on `mcp_framer_stdio::server`, offering the
//! hostile tools the process tests need, so the hostile cases run through the
//! real library (the serve loop, the request table, the writer, capture and
//! budgets). Diagnostics go to stderr through a `tracing` subscriber.
//!
//! # Flags
//!
//! `--max-concurrent N` (default 16), `--max-queued N` (256), `--grace-ms N`
//! (shutdown grace, 5000), `--max-frame N` (transport limit for stdin and the
//! response limit, 16 MiB).
//!
//! # Tools
//!
//! Every tool logs `tool started` with its `id` and `tool` on stderr.
//!
//! * `echo` (`text`): the text back.
//! * `slow` (`ms` = 30000): waits `ms` milliseconds (cancellable), then
//!   answers `slept`.
//! * `subprocess` (`script` = `sleep 30 & sleep 30; wait`): runs `sh -c
//!   script` in its own process group tied to the request; reports the child
//!   pid on stderr (`child spawned pid=N`) and as a `notifications/progress`
//!   (message `pid N`) when the call has a progress token; answers with the
//!   exit status.
//! * `capture` (`script`, `head` = 1024, `tail` = 1024, `timeout_ms`): runs
//!   `sh -c script` under bounded capture; answers with the summary, the
//!   previews and the exact counts in `structuredContent`.
//! * `slow_read` (`addr`, `max_bytes` = 1 MiB): connects to `addr` over TCP
//!   and reads byte by byte until EOF (an abortable remote operation); logs
//!   `connected`; answers with the byte count.
//! * `leak`: spawns `sleep 30` in a process group and leaks its handle, leaves
//!   a task running, and answers with the child's pid at once.
//! * `big` (`bytes` = 8 MiB): one text block of `bytes` `'x'`.
//! * `search` (`query` = "", `count` = 1000, `cursor`, `max_items` = 50,
//!   `max_bytes` = 8192, `known_total` = true): a budgeted listing of `count`
//!   items full of quotes, backslashes and multibyte text, with cursors.
//! * `preview` (`kind` = text | binary, `bytes` = 100000, `max` = 1024): a
//!   bounded preview of a generated body.
//! * `panic` (`message`): panics inside the handler.
//! * `log` (`text`): logs `text` through tracing at info, warn and error, and
//!   also with `println!` and `eprintln!` (stdout is redirected to stderr by
//!   `serve_stdio`, so even `println!` cannot reach the protocol stream).
//!
//! When stdin ends, the final report is printed on stderr as one line,
//! `report: {json}`, and the process exits 0.

use std::process::Stdio;
use std::time::Duration;

use mcp_framer::Config;
use mcp_framer_stdio::server::{
    BodyLen, Budget, BytesPreview, Call, CaptureOptions, Preview, Resume, RpcError, ServeReport, Server, ServerConfig,
    Tool, ToolResult,
};
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;

fn arg_u64(args: &Value, key: &str, default: u64) -> u64 {
    args.get(key).and_then(Value::as_u64).unwrap_or(default)
}

fn arg_str<'a>(args: &'a Value, key: &str, default: &'a str) -> &'a str {
    args.get(key).and_then(Value::as_str).unwrap_or(default)
}

fn started(call: &Call) -> Result<Value, RpcError> {
    tracing::info!(id = %call.id(), tool = call.tool(), "tool started");
    call.args::<Value>()
}

async fn echo(call: Call) -> Result<ToolResult, RpcError> {
    let args = started(&call)?;
    Ok(ToolResult::text(arg_str(&args, "text", "")))
}

async fn slow(call: Call) -> Result<ToolResult, RpcError> {
    let args = started(&call)?;
    let ms = arg_u64(&args, "ms", 30_000);
    call.abortable(tokio::time::sleep(Duration::from_millis(ms))).await?;
    Ok(ToolResult::text("slept"))
}

async fn subprocess(call: Call) -> Result<ToolResult, RpcError> {
    let args = started(&call)?;
    let script = arg_str(&args, "script", "sleep 30 & sleep 30; wait");
    let mut command = tokio::process::Command::new("sh");
    command.args(["-c", script]).stdin(Stdio::null()).stdout(Stdio::null());
    let mut child = call.spawn_child(&mut command).map_err(RpcError::internal)?;
    let pid = child.id().unwrap_or(0);
    tracing::info!(id = %call.id(), pid, "child spawned pid={pid}");
    call.progress(0.0, None, Some(&format!("pid {pid}"))).await;
    let status = child.wait().await.map_err(RpcError::internal)?;
    Ok(ToolResult::text(format!("child {pid} exited: {status}")))
}

async fn capture(call: Call) -> Result<ToolResult, RpcError> {
    let args = started(&call)?;
    let mut command = tokio::process::Command::new("sh");
    command.args(["-c", arg_str(&args, "script", "true")]);
    let options = CaptureOptions {
        stdout: Preview::HeadAndTail {
            head: arg_u64(&args, "head", 1024) as usize,
            tail: arg_u64(&args, "tail", 1024) as usize,
        },
        stderr: Preview::Tail(arg_u64(&args, "tail", 1024) as usize),
        timeout: args.get("timeout_ms").and_then(Value::as_u64).map(Duration::from_millis),
    };
    let run = call.capture(&mut command, options).await.map_err(RpcError::internal)?;
    let structured = json!({
        "ending": format!("{:?}", run.ending),
        "exitCode": run.status.code(),
        "stdout": {"total": run.stdout.total_bytes, "dropped": run.stdout.dropped_bytes,
                   "head": run.stdout.head.len(), "tail": run.stdout.tail.len()},
        "stderr": {"total": run.stderr.total_bytes, "dropped": run.stderr.dropped_bytes,
                   "tail": run.stderr.tail.len()},
    });
    Ok(ToolResult::text(run.summary()).with_structured(structured))
}

async fn slow_read(call: Call) -> Result<ToolResult, RpcError> {
    let args = started(&call)?;
    let addr = arg_str(&args, "addr", "").to_owned();
    let max = arg_u64(&args, "max_bytes", 1 << 20);
    let id = call.id().clone();
    let read = async move {
        let mut stream = tokio::net::TcpStream::connect(&addr).await?;
        tracing::info!(id = %id, addr, "connected");
        let (mut count, mut byte) = (0u64, [0u8; 1]);
        while count < max && stream.read(&mut byte).await? == 1 {
            count += 1;
        }
        Ok::<u64, std::io::Error>(count)
    };
    let count = call.abortable(read).await?.map_err(RpcError::internal)?;
    Ok(ToolResult::text(format!("read {count} bytes")))
}

async fn leak(call: Call) -> Result<ToolResult, RpcError> {
    started(&call)?;
    let mut command = tokio::process::Command::new("sleep");
    command.arg("30").stdin(Stdio::null());
    let child = call.spawn_child(&mut command).map_err(RpcError::internal)?;
    let pid = child.id().unwrap_or(0);
    // A careless handler: the child handle is leaked (never dropped, never
    // waited) and a task is left running. The request's scope still owns both.
    std::mem::forget(child);
    call.scope().spawn_task(std::future::pending::<()>());
    Ok(ToolResult::text(format!("{pid}")))
}

async fn big(call: Call) -> Result<ToolResult, RpcError> {
    let args = started(&call)?;
    Ok(ToolResult::text("x".repeat(arg_u64(&args, "bytes", 8 << 20) as usize)))
}

/// Item `i` of the `search` listing: quotes, backslashes, control and
/// multibyte characters, of varying length.
fn search_item(i: u64) -> Value {
    const PIECES: [&str; 10] = ["\"", "\\", "é", "€", "𝄞", "🙂", "\u{1}", "a\\\"b", "\n", "日本"];
    let len = (i * 7919) % 61;
    let text: String = (0..len).map(|k| PIECES[((i + k * 31) % PIECES.len() as u64) as usize]).collect();
    json!({"index": i, "path": format!("src/\"{i}\"\\é.rs"), "line": i % 997, "text": text})
}

async fn search(call: Call) -> Result<ToolResult, RpcError> {
    let args = started(&call)?;
    let count = arg_u64(&args, "count", 1000);
    let query = format!("search {} {count}", arg_str(&args, "query", ""));
    let budget = Budget::new(arg_u64(&args, "max_items", 50) as usize, arg_u64(&args, "max_bytes", 8192) as usize);
    let at = Resume::from_cursor(args.get("cursor").and_then(Value::as_str), &query)
        .map_err(|err| RpcError::invalid_params(format!("cursor: {err}")))?;
    let page = if args.get("known_total").and_then(Value::as_bool).unwrap_or(true) {
        budget.page((at.offset()..count).map(search_item), &at, "matches")
    } else {
        // A source whose length is not known in advance.
        budget.page((at.offset()..count).map(search_item).filter(|_| true), &at, "matches")
    };
    Ok(page.map_err(RpcError::internal)?.into_result())
}

async fn preview(call: Call) -> Result<ToolResult, RpcError> {
    let args = started(&call)?;
    let bytes = arg_u64(&args, "bytes", 100_000) as usize;
    let body: Vec<u8> = match arg_str(&args, "kind", "text") {
        "binary" => (0..bytes).map(|i| (i * 7) as u8).collect(),
        _ => "ligne é\n".bytes().cycle().take(bytes).collect(),
    };
    Ok(BytesPreview::new(&body, BodyLen::Known(bytes as u64), arg_u64(&args, "max", 1024) as usize).into_result())
}

async fn panics(call: Call) -> Result<ToolResult, RpcError> {
    let args = started(&call)?;
    panic!("{}", arg_str(&args, "message", "handler panic on purpose"));
}

async fn log(call: Call) -> Result<ToolResult, RpcError> {
    let args = started(&call)?;
    let text = arg_str(&args, "text", "log line");
    tracing::info!(id = %call.id(), "info: {text}");
    tracing::warn!(id = %call.id(), "warn: {text}");
    tracing::error!(id = %call.id(), "error: {text}");
    println!("println: {text}");
    eprintln!("eprintln: {text}");
    Ok(ToolResult::text("logged"))
}

fn object_schema() -> Value {
    json!({"type": "object"})
}

fn server(config: ServerConfig) -> Server {
    let tool = |name: &str, description: &str| Tool::new(name, description, object_schema());
    Server::new("lib-server", env!("CARGO_PKG_VERSION"))
        .with_config(config)
        .tool(tool("echo", "Echo `text`"), echo)
        .tool(tool("slow", "Wait `ms` milliseconds"), slow)
        .tool(tool("subprocess", "Run `script` in a process group"), subprocess)
        .tool(tool("capture", "Run `script` under bounded capture"), capture)
        .tool(tool("slow_read", "Read from `addr` byte by byte"), slow_read)
        .tool(tool("leak", "Leak a child process and a task, then return"), leak)
        .tool(tool("big", "Return `bytes` bytes of text"), big)
        .tool(tool("search", "Budgeted listing with cursors"), search)
        .tool(tool("preview", "Bounded preview of a body"), preview)
        .tool(tool("panic", "Panic in the handler"), panics)
        .tool(tool("log", "Log through every channel"), log)
}

fn parse_flags() -> Result<ServerConfig, String> {
    let mut config = ServerConfig::default();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value: u64 = args.next().and_then(|v| v.parse().ok()).ok_or_else(|| format!("{flag} needs a number"))?;
        match flag.as_str() {
            "--max-concurrent" => config.max_concurrent = value as usize,
            "--max-queued" => config.max_queued = value as usize,
            "--grace-ms" => config.shutdown_grace = Duration::from_millis(value),
            "--max-frame" => {
                config.framer = Config::DEFAULT.with_max_frame(value as usize);
                config.max_response = value as usize;
            }
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    Ok(config)
}

fn report_json(report: &ServeReport) -> Value {
    json!({
        "requests": report.requests,
        "notifications": report.notifications,
        "malformed": report.malformed,
        "oversize": report.oversize,
        "unknown_methods": report.unknown_methods,
        "handler_panics": report.handler_panics,
        "cancels": {
            "queued": report.cancels.queued,
            "running": report.cancels.running,
            "writing": report.cancels.writing,
            "ignored": report.cancels.ignored,
            "malformed": report.cancels.malformed,
        },
        "cancelled_at_shutdown": report.cancelled_at_shutdown,
        "frames_out": report.frames_out,
        "bytes_out": report.bytes_out,
        "replies_dropped": report.replies_dropped,
        "unflushed_frames": report.unflushed_frames,
        "frames_in": report.framer.frames,
        "bytes_in": report.framer.bytes_in,
        "error": report.error,
    })
}

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_max_level(tracing::Level::DEBUG)
        .init();
    let config = match parse_flags() {
        Ok(config) => config,
        Err(err) => {
            eprintln!("lib_server: {err}");
            std::process::exit(2);
        }
    };
    match server(config).serve_stdio().await {
        Ok(report) => {
            eprintln!("report: {}", report_json(&report));
            std::process::exit(0);
        }
        Err(err) => {
            eprintln!("lib_server: cannot take stdio: {err}");
            std::process::exit(1);
        }
    }
}
