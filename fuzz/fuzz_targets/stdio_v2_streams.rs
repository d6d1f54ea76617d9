//! The experimental `stdio-v2` server front (`mcp_framer_stdio_v2::server`)
//! under arbitrary request streams, over an in-process byte pipe with a real
//! HTTP/2 client (the `h2` crate): bodies cut into arbitrary DATA frames,
//! with no `content-length`, the true one or a false one, under or over a
//! small body limit, well-formed or not, and streams reset at any point;
//! header lists padded below and above the front's cap
//! ([`V2Config::max_header_list_size`], 16 KiB); ids shared between streams,
//! reused while in flight or right after a reset; and streams whose answer the
//! client never reads (their window, 16 KiB, stays full to the end).
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
//! * a header list over the cap is never answered `200` (h2 refuses it with
//!   `431` or a reset, and may end the connection: then the front still
//!   returns its report);
//! * an answer carries its own stream's id and, for `echo`, its own text:
//!   an id another stream uses at once (or used, then reset) gets its own
//!   call's result or a `400` with -32600 naming that id, never another
//!   call's result;
//! * streams left unread hold up no other stream: the last `ping` is
//!   answered while their windows stay full;
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
    /// `None`: the stream's own id (its place + 1). `Some(n)`: the shared
    /// id 1 + n % 3, which the first three streams also use.
    shared_id: Option<u8>,
    /// A header `x-pad` of this many bytes (the cap is 16 KiB).
    header_pad: Option<u16>,
    /// Read the answer's head only, and hold its body unread until the case
    /// ends.
    unread: bool,
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

/// The front's header-list cap (`V2Config::max_header_list_size`'s default).
const HEADER_CAP: usize = 16 << 10;
/// The most bytes of the other fields of a request's header list (RFC 9113
/// counts each field's name and value plus 32): a pad below
/// `HEADER_CAP - HEADER_SLACK` keeps the list under the cap.
const HEADER_SLACK: usize = 1024;
/// The client's window for each stream: an echo answer over it waits for a
/// stream left unread.
const CLIENT_STREAM_WINDOW: u32 = 16 << 10;

/// What the client may see on one stream.
#[derive(Debug, PartialEq)]
enum Expect {
    /// 200, a JSON-RPC response whose id is the one given (for `echo`, with
    /// its own text); with `shared`, also a 400 whose -32600 names the id.
    Answered { id: u64, echo: Option<usize>, shared: bool },
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

/// What one stream got: the status and the body (`None` when left unread),
/// or why the stream ended without an answer.
type Got = Result<(u16, Option<Vec<u8>>), String>;

/// One stream: sends its frames, then waits for its answer. A stream left
/// unread returns its body too, for the caller to hold.
async fn run_stream(
    mut client: h2::client::SendRequest<Bytes>,
    method: &'static str,
    body: Vec<u8>,
    case: &StreamCase,
) -> (Got, Option<h2::RecvStream>) {
    match send_and_read(&mut client, method, body, case).await {
        Ok((status, Read::Whole(bytes))) => (Ok((status, Some(bytes))), None),
        Ok((status, Read::Held(body))) => (Ok((status, None)), Some(body)),
        Err(why) => (Err(why), None),
    }
}

enum Read {
    Whole(Vec<u8>),
    Held(h2::RecvStream),
}

async fn send_and_read(
    client: &mut h2::client::SendRequest<Bytes>,
    method: &'static str,
    body: Vec<u8>,
    case: &StreamCase,
) -> Result<(u16, Read), String> {
    let mut headers = {
        let message = mcp_framer_jsonrpc::parse(&body).ok();
        let params = Params::read(message.as_ref().and_then(|m| m.payload()));
        wire::request_headers(method, &params, "2025-11-25")
    };
    if let Some(pad) = case.header_pad {
        let value = http::HeaderValue::from_str(&"h".repeat(usize::from(pad))).map_err(|e| e.to_string())?;
        headers.insert("x-pad", value);
    }
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
    *client = client.clone().ready().await.map_err(|e| format!("not ready: {e}"))?;
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
    if case.unread {
        return Ok((status, Read::Held(body)));
    }
    let mut bytes = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.map_err(|e| format!("body cut: {e}"))?;
        let _ = body.flow_control().release_capacity(chunk.len());
        bytes.extend_from_slice(&chunk);
    }
    Ok((status, Read::Whole(bytes)))
}

/// The id of the stream at `index`.
fn id_of(case: &StreamCase, index: usize) -> u64 {
    match case.shared_id {
        None => index as u64 + 1,
        Some(n) => 1 + u64::from(n % 3),
    }
}

/// Whether the header list may be over the cap (`Some(true)`: surely over;
/// `Some(false)`: near it, either way).
fn header_over(case: &StreamCase) -> Option<bool> {
    let pad = usize::from(case.header_pad?);
    if pad > HEADER_CAP {
        Some(true)
    } else if pad + HEADER_SLACK > HEADER_CAP {
        Some(false)
    } else {
        None
    }
}

fn expect(case: &StreamCase, body: &[u8], id: u64, shared: bool, limit: usize) -> Expect {
    if case.reset_after.is_some() {
        return Expect::Any;
    }
    match header_over(case) {
        Some(true) => return Expect::NotOk,
        Some(false) => return Expect::Any,
        None => {}
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
    let echo = match case.body {
        Body::Raw(_) => return Expect::Any,
        Body::Echo(len) => Some(usize::from(len)),
        Body::Ping(_) => None,
    };
    Expect::Answered { id, echo, shared }
}

fn check(what: &Expect, got: &Got, case: &StreamCase) {
    let text = |body: &Option<Vec<u8>>| body.as_deref().map(String::from_utf8_lossy).unwrap_or_default().into_owned();
    match (what, got) {
        (Expect::Any, _) => {}
        (Expect::NotOk, Ok((200, body))) => {
            panic!("answered 200 where the stream was refused: {case:?} -> {}", text(body))
        }
        (Expect::NotOk, _) => {}
        // The bodies arriving at once share the front's budget (by default
        // the limit): a stream whose DATA would go over it is refused 503.
        (Expect::TooLarge | Expect::Answered { .. }, Ok((503, body))) => {
            let text = text(body);
            assert!(body.is_none() || text.contains("-32000"), "a 503 without the overloaded error: {text}");
        }
        (Expect::TooLarge, Ok((413, body))) => {
            let text = text(body);
            assert!(body.is_none() || text.contains("-32600"), "a 413 without the typed error: {text}");
        }
        (Expect::TooLarge, other) => panic!("over the limit but not refused with 413: {case:?} -> {other:?}"),
        (Expect::Answered { id, echo, .. }, Ok((200, Some(body)))) => {
            let value: serde_json::Value = serde_json::from_slice(body).expect("a 200 carries a JSON body");
            assert_eq!(value["id"], *id, "answered for another id: {value}");
            assert!(value.get("result").is_some() || value.get("error").is_some(), "{value}");
            if let (Some(len), Some(_)) = (echo, value.get("result")) {
                let echoed = value["result"]["content"][0]["text"].as_str().map(str::len);
                assert_eq!(echoed, Some(*len), "answered with another call's result: {value}");
            }
        }
        (Expect::Answered { id, shared: true, .. }, Ok((400, Some(body)))) => {
            let value: serde_json::Value = serde_json::from_slice(body).expect("a 400 carries a JSON body");
            assert_eq!(value["id"], *id, "a duplicate refused under another id: {value}");
            assert_eq!(value["error"]["code"], -32600, "a duplicate refused without the typed error: {value}");
        }
        (Expect::Answered { shared: true, .. }, Ok((400, None))) => {}
        (Expect::Answered { .. }, Ok((200, None))) => {}
        (Expect::Answered { id, .. }, other) => {
            panic!("request {id} under the limit not answered 200: {case:?} -> {other:?}")
        }
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
            let (client, connection) = h2::client::Builder::new()
                .initial_window_size(CLIENT_STREAM_WINDOW)
                .initial_connection_window_size(16 << 20)
                .handshake(client_io)
                .await
                .expect("the handshake");
            let driver = tokio::spawn(connection);

            let ids: Vec<u64> = streams.iter().enumerate().map(|(index, stream)| id_of(stream, index)).collect();
            // A list over the cap may end the connection (h2's CONTINUATION
            // flood guard): then the last ping may fail, but not hang.
            let may_end = streams.iter().any(|stream| header_over(stream).is_some());
            let mut tasks = Vec::new();
            for (index, stream) in streams.iter().enumerate() {
                let id = ids[index];
                let shared = ids.iter().filter(|other| **other == id).count() > 1;
                let (method, body) = body_of(&stream.body, id);
                let expected = expect(stream, &body, id, shared, limit);
                let client = client.clone();
                let owned = (*stream).clone();
                tasks.push((
                    expected,
                    *stream,
                    tokio::spawn(async move { run_stream(client, method, body, &owned).await }),
                ));
            }
            let (mut too_large, mut busy) = (0, 0);
            let mut unread = Vec::new();
            for (expected, stream, task) in tasks {
                let (got, held) = task.await.expect("a stream task panicked");
                if !(may_end && got.is_err()) {
                    check(&expected, &got, stream);
                }
                too_large += u64::from(matches!(got, Ok((413, _))));
                busy += u64::from(matches!(got, Ok((503, _))));
                unread.extend(held);
            }

            // The session survives, whatever stays unread: a last ping is
            // answered.
            let last = StreamCase {
                body: Body::Ping(0),
                chunks: Vec::new(),
                length: Length::True,
                reset_after: None,
                shared_id: None,
                header_pad: None,
                unread: false,
            };
            let (method, body) = body_of(&last.body, 1_000_000);
            let (got, _) = run_stream(client.clone(), method, body.clone(), &last).await;
            let ended = may_end && got.is_err();
            if !ended {
                check(&Expect::Answered { id: 1_000_000, echo: None, shared: false }, &got, &last);
            }

            // Dropped unread, each of those streams is reset.
            drop(unread);
            drop(client);
            driver.abort();
            let report = front.await.expect("the front panicked").expect("the front ended with an error");
            assert!(report.oversize_bodies >= too_large, "413s seen {too_large}, counted {}", report.oversize_bodies);
            assert!(report.busy_bodies >= busy, "503s seen {busy}, counted {}", report.busy_bodies);
            // A connection h2 ended (a header list over the cap) says so.
            assert!(!ended || report.connection_error.is_some(), "the last ping failed, unexplained: {report:?}");
            assert!(report.streams >= 1 || report.connection_error.is_some(), "{report:?}");
        })
        .await;
        outcome.expect("a stdio-v2 case did not finish within its deadline (a hang)");
    });
}

fuzz_target!(init: mcp_framer_fuzz::limit_allocations(), |case: Case| {
    run(case);
});
