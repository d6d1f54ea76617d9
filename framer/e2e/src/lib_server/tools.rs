//! The `lib_server` tools; see the module documentation of [`super`].

use std::process::Stdio;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use mcp_framer_stdio::server::{Budget, Call, CaptureOptions, Resume, RpcError, ToolResult};
use mcp_framer_stdio::{Keep, Preview};
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;

use super::report;

fn arg_u64(args: &Value, key: &str, default: u64) -> u64 {
    args.get(key).and_then(Value::as_u64).unwrap_or(default)
}

fn arg_str<'a>(args: &'a Value, key: &str, default: &'a str) -> &'a str {
    args.get(key).and_then(Value::as_str).unwrap_or(default)
}

/// Ids of the handlers that started, in order (for the final report).
static STARTED: Mutex<Vec<Value>> = Mutex::new(Vec::new());

/// The ids of every handler that has started so far.
pub(super) fn started_ids() -> Vec<Value> {
    STARTED.lock().unwrap_or_else(PoisonError::into_inner).clone()
}

/// Records and reports that the handler for `call` started; its arguments.
fn started(call: &Call) -> Result<Value, RpcError> {
    let id = json!(call.id());
    STARTED.lock().unwrap_or_else(PoisonError::into_inner).push(id.clone());
    crate::report::emit(report::TOOL_STARTED, &json!({"id": id, "tool": call.tool()}));
    call.args::<Value>()
}

pub(super) async fn echo(call: Call) -> Result<ToolResult, RpcError> {
    let args = started(&call)?;
    Ok(ToolResult::text(arg_str(&args, "text", "")))
}

pub(super) async fn slow(call: Call) -> Result<ToolResult, RpcError> {
    let args = started(&call)?;
    let ms = arg_u64(&args, "ms", 30_000);
    call.abortable(tokio::time::sleep(Duration::from_millis(ms))).await?;
    Ok(ToolResult::text("slept"))
}

pub(super) async fn subprocess(call: Call) -> Result<ToolResult, RpcError> {
    let args = started(&call)?;
    let argv: Vec<&str> =
        args.get("command").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    let mut command = match argv.split_first() {
        Some((program, rest)) => {
            let mut command = tokio::process::Command::new(program);
            command.args(rest);
            command
        }
        None => {
            let mut command = tokio::process::Command::new("sh");
            command.args(["-c", arg_str(&args, "script", "sleep 30 & sleep 30; wait")]);
            command
        }
    };
    command.stdin(Stdio::null()).stdout(Stdio::null());
    let mut child = call.spawn_child(&mut command).map_err(RpcError::internal)?;
    let pid = child.id().unwrap_or(0);
    crate::report::emit(report::CHILD_SPAWNED, &json!({"id": call.id(), "pid": pid}));
    call.progress(0.0, None, Some(&format!("pid {pid}"))).await;
    let status = child.wait().await.map_err(RpcError::internal)?;
    Ok(ToolResult::text(format!("child {pid} exited: {status}")))
}

pub(super) async fn capture(call: Call) -> Result<ToolResult, RpcError> {
    let args = started(&call)?;
    let mut command = tokio::process::Command::new("sh");
    command.args(["-c", arg_str(&args, "script", "true")]);
    let mut options = CaptureOptions::default()
        .with_stdout(Keep::HeadAndTail {
            head: arg_u64(&args, "head", 1024) as usize,
            tail: arg_u64(&args, "tail", 1024) as usize,
        })
        .with_stderr(Keep::Tail(arg_u64(&args, "tail", 1024) as usize));
    options.timeout = args.get("timeout_ms").and_then(Value::as_u64).map(Duration::from_millis);
    let run = call.capture(&mut command, options).await.map_err(RpcError::internal)?;
    let structured = json!({
        "ending": format!("{:?}", run.ending),
        "exitCode": run.status.code(),
        "stdout": {"total": run.stdout.total_bytes(), "dropped": run.stdout.dropped_bytes(),
                   "head": run.stdout.head().len(), "tail": run.stdout.tail().len()},
        "stderr": {"total": run.stderr.total_bytes(), "dropped": run.stderr.dropped_bytes(),
                   "tail": run.stderr.tail().len()},
    });
    Ok(ToolResult::text(run.summary()).with_structured(structured))
}

/// The JSON Schema of `capture`'s `structuredContent`.
pub(super) fn capture_schema() -> Value {
    let count = json!({"type": "integer", "minimum": 0});
    let stream = json!({"type": "object", "properties": {"total": count, "dropped": count, "head": count, "tail": count},
                        "required": ["total", "dropped", "tail"]});
    json!({
        "type": "object",
        "properties": {
            "ending": {"type": "string"},
            "exitCode": {"type": ["integer", "null"]},
            "stdout": stream,
            "stderr": stream,
        },
        "required": ["ending", "exitCode", "stdout", "stderr"],
    })
}

pub(super) async fn slow_read(call: Call) -> Result<ToolResult, RpcError> {
    let args = started(&call)?;
    let addr = arg_str(&args, "addr", "").to_owned();
    let max = arg_u64(&args, "max_bytes", 1 << 20);
    let id = call.id().clone();
    let read = async move {
        let mut stream = tokio::net::TcpStream::connect(&addr).await?;
        crate::report::emit(report::CONNECTED, &json!({"id": id, "addr": addr}));
        let (mut count, mut byte) = (0u64, [0u8; 1]);
        while count < max && stream.read(&mut byte).await? == 1 {
            count += 1;
        }
        Ok::<u64, std::io::Error>(count)
    };
    let count = call.abortable(read).await?.map_err(RpcError::internal)?;
    Ok(ToolResult::text(format!("read {count} bytes")))
}

pub(super) async fn leak(call: Call) -> Result<ToolResult, RpcError> {
    started(&call)?;
    let mut command = tokio::process::Command::new("sleep");
    command.arg("300").stdin(Stdio::null());
    let child = call.spawn_child(&mut command).map_err(RpcError::internal)?;
    let pid = child.id().unwrap_or(0);
    // A careless handler: the child handle is leaked (never dropped, never
    // waited) and a task is left running. The request's scope still owns both.
    std::mem::forget(child);
    call.scope().spawn_task(std::future::pending::<()>());
    Ok(ToolResult::text(format!("{pid}")))
}

pub(super) async fn big(call: Call) -> Result<ToolResult, RpcError> {
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

pub(super) async fn search(call: Call) -> Result<ToolResult, RpcError> {
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

pub(super) async fn preview(call: Call) -> Result<ToolResult, RpcError> {
    let args = started(&call)?;
    let bytes = arg_u64(&args, "bytes", 100_000) as usize;
    let body: Vec<u8> = match arg_str(&args, "kind", "text") {
        "binary" => (0..bytes).map(|i| (i * 7) as u8).collect(),
        _ => "ligne é\n".bytes().cycle().take(bytes).collect(),
    };
    Ok(Preview::of_prefix(&body, Some(bytes as u64), arg_u64(&args, "max", 1024) as usize).into_result())
}

pub(super) async fn panics(call: Call) -> Result<ToolResult, RpcError> {
    let args = started(&call)?;
    panic!("{}", arg_str(&args, "message", "handler panic on purpose"));
}

pub(super) async fn log(call: Call) -> Result<ToolResult, RpcError> {
    let args = started(&call)?;
    let text = arg_str(&args, "text", "log line");
    tracing::info!(id = %call.id(), "info: {text}");
    tracing::warn!(id = %call.id(), "warn: {text}");
    tracing::error!(id = %call.id(), "error: {text}");
    println!("println: {text}");
    eprintln!("eprintln: {text}");
    Ok(ToolResult::text("logged"))
}

pub(super) async fn fail(call: Call) -> Result<ToolResult, RpcError> {
    let args = started(&call)?;
    Err(RpcError::internal(arg_str(&args, "message", "failed on purpose")))
}

pub(super) async fn bad_args(call: Call) -> Result<ToolResult, RpcError> {
    let args = started(&call)?;
    Err(RpcError::invalid_params(arg_str(&args, "message", "arguments refused on purpose")))
}

pub(super) async fn undeclared(call: Call) -> Result<ToolResult, RpcError> {
    started(&call)?;
    Ok(ToolResult::text("summary").with_structured(json!({"undeclared": true})))
}
