//! The experimental `stdio-v2` server front (`mcp_framer_stdio_v2::server`)
//! under arbitrary request streams, over an in-process byte pipe with a real
//! HTTP/2 client (the `h2` crate): bodies cut into arbitrary DATA frames,
//! with no `content-length`, the true one or a false one, under or over a
//! small body limit, well-formed or not, and streams reset at any point.
//!
//! What must hold, for every case:
//!
//! * the body limit is enforced on the bytes that arrive, before any parse:
//!   a stream whose body (or whose declared `content-length`) is over the
//!   limit is answered `413` with the transport's typed error (-32600), and
//!   nothing over the limit is ever answered `200`;
//! * a well-formed request under the limit, not reset, with a true or absent
//!   `content-length`, is answered `200` with a JSON-RPC response for its id,
//!   or `503` with -32000 when the bodies arriving at once would take the
//!   front's body budget (by default the limit) over;
//! * a malformed body under the limit gets a `400` (never a `200`);
//! * a reset stream gets nothing the client must wait for, and the session
//!   survives it: after every stream, a last `ping` is answered;
//! * nothing hangs (each case has a deadline), and at the client's end the
//!   front returns its report, whose counts cover what the client saw.
#![no_main]

use std::time::Duration;

use arbitrary::Arbitrary;
use bytes::Bytes;
use h2::Reason;
use libfuzzer_sys::fuzz_target;
use mcp_framer_stdio::server::{Server, ServerConfig};
use mcp_framer_stdio_v2::server::{V2Config, serve};
use mcp_framer_stdio_v2::wire::{self, Params};

#[global_allocator]
static ALLOCATOR: mcp_framer_fuzz::LimitedAlloc = mcp_framer_fuzz::LimitedAlloc;

/// The most streams one case opens (each one task and one HTTP/2 stream).
const MAX_STREAMS: usize = 12;
/// The deadline of one case: nothing in it waits on a timer, so reaching it
/// is a hang.
const DEADLINE: Duration = Duration::from_secs(20);

#[derive(Debug, Arbitrary)]
struct Case {
    /// The body limit: 128 + this % 8192 bytes (the last ping, 66 bytes, fits).
    limit: u16,
    streams: Vec<StreamCase>,
}

#[derive(Debug, Clone, Arbitrary)]
struct StreamCase {
    body: Body,
    /// The sizes of the DATA frames the body is cut into (each 1 + n % 4096
    /// bytes, none empty; the rest in one frame, empty only if nothing is
    /// left).
    chunks: Vec<u16>,
    length: Length,
    /// Reset the stream after this many frames instead of ending the body.
    reset_after: Option<u8>,
}

#[derive(Debug, Clone, Arbitrary)]
enum Body {
    /// `ping` with a `pad` of this many bytes in its params.
    Ping(u16),
    /// `tools/call` of `echo` with a text of this many bytes.
    Echo(u16),
    /// Any bytes, sent with `ping`'s headers.
    Raw(Vec<u8>),
}

#[derive(Debug, Clone, Copy, Arbitrary)]
enum Length {
    Absent,
    True,
    /// A `content-length` that may be false.
    Declared(u32),
}

/// What the client may see on one stream.
#[derive(Debug, PartialEq)]
enum Expect {
    /// 200, a JSON-RPC response whose id is the one given.
    Answered(u64),
    /// 413 with -32600.
    TooLarge,
    /// Anything but a 200.
    NotOk,
    /// Anything (a reset stream, a false `content-length` under the limit,
    /// or raw bytes that may happen to be a valid request).
    Any,
}

fn body_of(body: &Body, id: u64) -> (&'static str, Vec<u8>) {
    match body {
        Body::Ping(pad) => {
            let pad = "p".repeat(usize::from(*pad));
            (
                "ping",
                format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping","params":{{"pad":"{pad}"}}}}"#).into_bytes(),
            )
        }
        Body::Echo(len) => {
            let text = "e".repeat(usize::from(*len));
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"{text}"}}}}}}"#
            );
            ("tools/call", body.into_bytes())
        }
        Body::Raw(bytes) => ("ping", bytes.clone()),
    }
}

async fn echo(
    call: mcp_framer_stdio::server::Call,
) -> Result<mcp_framer_stdio::server::ToolResult, mcp_framer_stdio::server::RpcError> {
    let args: serde_json::Value = call.args()?;
    Ok(mcp_framer_stdio::server::ToolResult::text(args["text"].as_str().unwrap_or_default()))
}

/// One stream: sends its frames, then waits for its answer; the status and
/// the body, or why the stream ended without an answer.
async fn run_stream(
    mut client: h2::client::SendRequest<Bytes>,
    method: &'static str,
    body: Vec<u8>,
    case: &StreamCase,
) -> Result<(u16, Vec<u8>), String> {
    let mut headers = {
        let message = mcp_framer_jsonrpc::parse(&body).ok();
        let params = Params::read(message.as_ref().and_then(|m| m.payload()));
        wire::request_headers(method, &params, "2025-11-25")
    };
    match case.length {
        Length::Absent => {}
        Length::True => {
            headers.insert(http::header::CONTENT_LENGTH, body.len().into());
        }
        Length::Declared(n) => {
            headers.insert(http::header::CONTENT_LENGTH, n.into());
        }
    }
    let mut request = http::Request::post(wire::ENDPOINT).body(()).map_err(|e| e.to_string())?;
    *request.headers_mut() = headers;
    *request.uri_mut() = http::Uri::from_static("http://stdio/mcp");
    client = client.ready().await.map_err(|e| format!("not ready: {e}"))?;
    let (response, mut send) = client.send_request(request, false).map_err(|e| format!("not sent: {e}"))?;
    let mut rest = &body[..];
    // A server may answer before the body ends (a 413) and reset the rest
    // with NO_ERROR: a refused send then ends the sending, not the stream.
    let mut open = true;
    for (sent, size) in case.chunks.iter().enumerate() {
        if case.reset_after == Some(sent as u8) {
            send.send_reset(Reason::CANCEL);
            return Err("reset".into());
        }
        if rest.is_empty() {
            // No empty DATA frames: h2 ends a connection that sends more
            // than 100 of them (ENHANCE_YOUR_CALM), a flood guard, not the
            // front's behaviour.
            break;
        }
        let size = (1 + usize::from(*size) % 4096).min(rest.len());
        let (now, later) = rest.split_at(size);
        if send.send_data(Bytes::copy_from_slice(now), false).is_err() {
            open = false;
            break;
        }
        rest = later;
    }
    if case.reset_after.is_some() {
        send.send_reset(Reason::CANCEL);
        return Err("reset".into());
    }
    if open {
        let _ = send.send_data(Bytes::copy_from_slice(rest), true);
    }
    let response = response.await.map_err(|e| format!("no response: {e}"))?;
    let status = response.status().as_u16();
    let mut body = response.into_body();
    let mut bytes = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.map_err(|e| format!("body cut: {e}"))?;
        let _ = body.flow_control().release_capacity(chunk.len());
        bytes.extend_from_slice(&chunk);
    }
    Ok((status, bytes))
}

fn expect(case: &StreamCase, body: &[u8], id: u64, limit: usize) -> Expect {
    if case.reset_after.is_some() {
        return Expect::Any;
    }
    let declared = match case.length {
        Length::Declared(n) => Some(n as usize),
        Length::True => Some(body.len()),
        Length::Absent => None,
    };
    if declared.is_some_and(|n| n != body.len()) {
        // HTTP/2 resets a stream whose DATA contradicts its content-length
        // (PROTOCOL_ERROR), which may come before the server's answer.
        return Expect::NotOk;
    }
    if declared.is_some_and(|n| n > limit) {
        return Expect::TooLarge;
    }
    if body.len() > limit {
        return Expect::TooLarge;
    }
    match case.body {
        Body::Raw(_) => Expect::Any,
        _ => Expect::Answered(id),
    }
}

fn check(what: &Expect, got: &Result<(u16, Vec<u8>), String>, case: &StreamCase) {
    match (what, got) {
        (Expect::Any, _) => {}
        (Expect::NotOk, Ok((200, body))) => {
            panic!("answered 200 where the stream was refused: {case:?} -> {}", String::from_utf8_lossy(body))
        }
        (Expect::NotOk, _) => {}
        // The bodies arriving at once share the front's budget (by default
        // the limit): a stream whose DATA would go over it is refused 503.
        (Expect::TooLarge | Expect::Answered(_), Ok((503, body))) => {
            let text = String::from_utf8_lossy(body);
            assert!(text.contains("-32000"), "a 503 without the overloaded error: {text}");
        }
        (Expect::TooLarge, Ok((413, body))) => {
            let text = String::from_utf8_lossy(body);
            assert!(text.contains("-32600"), "a 413 without the typed error: {text}");
        }
        (Expect::TooLarge, other) => panic!("over the limit but not refused with 413: {case:?} -> {other:?}"),
        (Expect::Answered(id), Ok((200, body))) => {
            let value: serde_json::Value = serde_json::from_slice(body).expect("a 200 carries a JSON body");
            assert_eq!(value["id"], *id, "answered for another id: {value}");
            assert!(value.get("result").is_some() || value.get("error").is_some(), "{value}");
        }
        (Expect::Answered(id), other) => panic!("request {id} under the limit not answered 200: {case:?} -> {other:?}"),
    }
}

fn run(case: Case) {
    let limit = 128 + usize::from(case.limit) % 8192;
    let streams: Vec<&StreamCase> = case.streams.iter().take(MAX_STREAMS).collect();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    runtime.block_on(async {
        let outcome = tokio::time::timeout(DEADLINE, async {
            let (client_io, server_io) = tokio::io::duplex(1 << 16);
            let (server_in, server_out) = tokio::io::split(server_io);
            let server = Server::new("fuzz", "0")
                .with_config(ServerConfig::default().with_max_receive(limit))
                .tool(mcp_framer_stdio::server::Tool::new("echo", "echo", serde_json::json!({"type": "object"})), echo);
            let front = tokio::spawn(serve(server, server_in, server_out, V2Config::default()));
            let (client, connection) = h2::client::handshake(client_io).await.expect("the handshake");
            let driver = tokio::spawn(connection);

            let mut tasks = Vec::new();
            for (index, stream) in streams.iter().enumerate() {
                let id = index as u64 + 1;
                let (method, body) = body_of(&stream.body, id);
                let expected = expect(stream, &body, id, limit);
                let client = client.clone();
                let owned = (*stream).clone();
                tasks.push((
                    expected,
                    *stream,
                    tokio::spawn(async move { run_stream(client, method, body, &owned).await }),
                ));
            }
            let (mut too_large, mut busy) = (0, 0);
            for (expected, stream, task) in tasks {
                let got = task.await.expect("a stream task panicked");
                check(&expected, &got, stream);
                too_large += u64::from(matches!(got, Ok((413, _))));
                busy += u64::from(matches!(got, Ok((503, _))));
            }

            // The session survives: a last ping is answered.
            let last = StreamCase { body: Body::Ping(0), chunks: Vec::new(), length: Length::True, reset_after: None };
            let (method, body) = body_of(&last.body, 1_000_000);
            let got = run_stream(client.clone(), method, body.clone(), &last).await;
            check(&Expect::Answered(1_000_000), &got, &last);

            drop(client);
            driver.abort();
            let report = front.await.expect("the front panicked").expect("the front ended with an error");
            assert!(report.oversize_bodies >= too_large, "413s seen {too_large}, counted {}", report.oversize_bodies);
            assert!(report.busy_bodies >= busy, "503s seen {busy}, counted {}", report.busy_bodies);
            assert!(report.streams >= 1, "{report:?}");
        })
        .await;
        outcome.expect("a stdio-v2 case did not finish within its deadline (a hang)");
    });
}

fuzz_target!(init: mcp_framer_fuzz::limit_allocations(), |case: Case| {
    run(case);
});
