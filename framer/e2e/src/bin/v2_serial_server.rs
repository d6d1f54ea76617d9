//! `v2_serial_server`: a deliberately defective `stdio-v2` server for the
//! probe's head-of-line check. It speaks HTTP/2 with prior knowledge on
//! stdin and stdout, but answers its streams ONE AT A TIME: each answer is
//! sent whole (waiting for the client's window) before the next request is
//! read, so a large result holds up every answer behind it — the newline
//! transport's head-of-line blocking, kept.
//!
//! It answers `server/discover` (modern only), `ping`, `tools/list` (one
//! tool, `big`) and `tools/call big {"bytes": N}` (N bytes of text,
//! default 1 MiB); a notification gets `202`; anything else `404` with
//! -32601. It exits when the connection ends.
//!
//! Defect switches, for the probe's other `stdio-v2` checks:
//! `--exit-on-bad-json` (a body that is not JSON ends the process, the
//! connection with it); `--limit N` with `--over-limit 400|silent` (a body
//! over N bytes is answered `400` -32600, or never answered).

use std::future::poll_fn;
use std::process::ExitCode;
use std::sync::OnceLock;

use bytes::Bytes;
use h2::RecvStream;
use h2::server::SendResponse;
use serde_json::{Value, json};

/// The defect switches.
#[derive(Debug, Default)]
struct Defects {
    exit_on_bad_json: bool,
    limit: Option<usize>,
    silent_over_limit: bool,
}

static DEFECTS: OnceLock<Defects> = OnceLock::new();

fn defects() -> &'static Defects {
    DEFECTS.get_or_init(|| {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let value = |flag: &str| args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1));
        Defects {
            exit_on_bad_json: args.iter().any(|a| a == "--exit-on-bad-json"),
            limit: value("--limit").and_then(|n| n.parse().ok()),
            silent_over_limit: value("--over-limit").is_some_and(|v| v == "silent"),
        }
    })
}

fn main() -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("v2_serial_server: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("v2_serial_server: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn serve() -> Result<(), Box<dyn std::error::Error>> {
    let (input, output) = mcp_framer_stdio::server::take_stdio()?;
    let mut connection = h2::server::handshake(tokio::io::join(input, output)).await?;
    // The accept loop drives the connection (window updates included); the
    // worker answers the requests it queues, one at a time.
    let (queue, mut queued) = tokio::sync::mpsc::unbounded_channel();
    let worker = tokio::spawn(async move {
        // Requests never answered (`--over-limit silent`): kept, not reset.
        let mut unanswered = Vec::new();
        while let Some((request, respond)) = queued.recv().await {
            let request: http::Request<RecvStream> = request;
            if let Ok(Some(respond)) = answer(request.into_body(), respond).await {
                unanswered.push(respond);
            }
        }
    });
    while let Some(accepted) = connection.accept().await {
        match accepted {
            Ok(pair) => {
                let _ = queue.send(pair);
            }
            Err(_) => break,
        }
    }
    drop(queue);
    let _ = worker.await;
    Ok(())
}

/// Answers one request; the stream back when it is to stay unanswered.
async fn answer(
    mut body: RecvStream,
    mut respond: SendResponse<Bytes>,
) -> Result<Option<SendResponse<Bytes>>, h2::Error> {
    let mut bytes = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk?;
        let _ = body.flow_control().release_capacity(chunk.len());
        bytes.extend_from_slice(&chunk);
    }
    let defects = defects();
    if defects.limit.is_some_and(|limit| bytes.len() > limit) {
        if defects.silent_over_limit {
            return Ok(Some(respond));
        }
        let reply = json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": "too large"}});
        return send(respond, 400, reply).await.map(|()| None);
    }
    let message: Value = match serde_json::from_slice(&bytes) {
        Ok(message) => message,
        Err(_) if defects.exit_on_bad_json => std::process::exit(3),
        Err(_) => Value::Null,
    };
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    let method = message.get("method").and_then(Value::as_str).unwrap_or("");
    if id.is_null() {
        let accepted = http::Response::builder().status(202).body(()).unwrap_or_default();
        respond.send_response(accepted, true)?;
        return Ok(None);
    }
    let args = &message["params"]["arguments"];
    let (status, reply) = match method {
        "server/discover" => (
            200,
            json!({"result": {
                "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {}},
                "resultType": "complete",
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "v2_serial_server", "version": "0"}},
            }}),
        ),
        "ping" => (200, json!({"result": {}})),
        "tools/list" => (
            200,
            json!({"result": {"tools": [
                {"name": "big", "description": "Return `bytes` bytes of text", "inputSchema": {"type": "object"}},
            ]}}),
        ),
        "tools/call" if message["params"]["name"] == "big" => {
            let text = "x".repeat(args.get("bytes").and_then(Value::as_u64).unwrap_or(1 << 20) as usize);
            (200, json!({"result": {"content": [{"type": "text", "text": text}]}}))
        }
        _ => (404, json!({"error": {"code": -32601, "message": format!("method not found: {method}")}})),
    };
    let mut reply = reply;
    reply["jsonrpc"] = json!("2.0");
    reply["id"] = id;
    send(respond, status, reply).await.map(|()| None)
}

/// Sends `reply` whole, as the client's window allows.
async fn send(mut respond: SendResponse<Bytes>, status: u16, reply: Value) -> Result<(), h2::Error> {
    let mut data = Bytes::from(serde_json::to_vec(&reply).unwrap_or_default());
    let head = http::Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .header("content-length", data.len())
        .body(())
        .unwrap_or_default();
    let mut stream = respond.send_response(head, false)?;
    // The whole answer, as the client's window allows, before anything else.
    while !data.is_empty() {
        stream.reserve_capacity(data.len());
        let granted = match poll_fn(|cx| stream.poll_capacity(cx)).await {
            Some(granted) => granted?,
            None => return Ok(()),
        };
        let chunk = data.split_to(granted.min(data.len()));
        stream.send_data(chunk, data.is_empty())?;
    }
    Ok(())
}
