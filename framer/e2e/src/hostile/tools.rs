//! The tools, `tools/list`, and request handling.

use std::io::{self, Write};
use std::sync::atomic::Ordering::SeqCst;
use std::time::{Duration, Instant};

use mcp_framer_jsonrpc::protocol::NEWEST_LEGACY;
use serde_json::{Map, Value, json};

use super::protocol::{RpcError, encode, pad_to, response, text_result};
use super::report;
use super::server::{Cancel, Out, Server, as_u64, log, micros};

/// Upper bound for any size argument, to keep typos from exhausting memory.
const MAX_BYTES: u64 = 1 << 30;

fn log_cancelled(id: &Value, bytes: u64) {
    crate::report::emit(report::CANCELLED, &json!({"id": id, "bytes": bytes}));
}

/// Writes `msg` unless the request was cancelled before its first byte.
pub(super) fn send(server: &Server, id: &Value, cancel: &Cancel, msg: &Value, chunk: usize) {
    let frame = encode(msg);
    let mut out = server.out();
    if cancel.is_cancelled() {
        log_cancelled(id, 0);
        return;
    }
    out.frame(&frame, chunk);
}

/// One `tools/call` in progress.
struct Call<'a> {
    server: &'a Server,
    id: &'a Value,
    args: Map<String, Value>,
    progress_token: Option<Value>,
    cancel: &'a Cancel,
    chunk: usize,
}

impl Call<'_> {
    fn u64(&self, key: &str, default: u64) -> Result<u64, RpcError> {
        match self.args.get(key) {
            None | Some(Value::Null) => Ok(default),
            Some(v) => v.as_u64().ok_or_else(|| {
                RpcError::invalid_params(format!("argument `{key}` must be a non-negative integer, got {v}"))
            }),
        }
    }

    fn size(&self, key: &str, default: u64) -> Result<usize, RpcError> {
        let n = self.u64(key, default)?;
        if n > MAX_BYTES {
            return Err(RpcError::invalid_params(format!("argument `{key}` = {n} exceeds the limit of {MAX_BYTES}")));
        }
        usize::try_from(n).map_err(|_| RpcError::invalid_params(format!("`{key}` too large")))
    }

    fn positive(&self, key: &str, default: u64) -> Result<usize, RpcError> {
        match self.size(key, default)? {
            0 => Err(RpcError::invalid_params(format!("argument `{key}` must be positive"))),
            n => Ok(n),
        }
    }

    fn millis(&self, key: &str, default: u64) -> Result<Duration, RpcError> {
        self.u64(key, default).map(Duration::from_millis)
    }

    fn string(&self, key: &str, default: &str) -> Result<String, RpcError> {
        match self.args.get(key) {
            None | Some(Value::Null) => Ok(default.to_owned()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(v) => Err(RpcError::invalid_params(format!("argument `{key}` must be a string, got {v}"))),
        }
    }

    fn send(&self, msg: &Value) {
        send(self.server, self.id, self.cancel, msg, self.chunk);
    }

    /// Takes the writer lock unless the call was cancelled before its first byte.
    fn out(&self) -> Option<Out<'_>> {
        let out = self.server.out();
        if self.cancel.is_cancelled() {
            log_cancelled(self.id, 0);
            return None;
        }
        Some(out)
    }

    /// Runs the tool. `Ok(Some(result))` is sent as the response; `Ok(None)`
    /// means the tool wrote (or deliberately skipped) its own output.
    fn run(&mut self, name: &str) -> Result<Option<Value>, RpcError> {
        self.chunk = self.positive("chunk", as_u64(self.server.default_chunk))?;
        let delay = self.millis("delay_ms", 0)?;
        if !delay.is_zero() && self.cancel.sleep(delay) {
            log_cancelled(self.id, 0);
            return Ok(None);
        }
        match name {
            "ping" => Ok(Some(text_result("pong"))),
            "echo" => Ok(Some(text_result(self.string("text", "")?))),
            "big" => Ok(Some(text_result("x".repeat(self.size("bytes", 8 << 20)?)))),
            "sized" => self.sized(),
            "giant_field" => self.giant_field(),
            "many_blocks" => self.many_blocks(),
            "malformed" => self.junk_then_reply(
                b"{\"jsonrpc\":\"2.0\",\"id\":@@garbage}{[\"not json\n",
                "malformed line sent before this frame",
            ),
            "stderr_flood" => self.stderr_flood(),
            "log_line" => {
                let mut line = self.string("text", "INFO server started")?;
                line.push('\n');
                self.junk_then_reply(line.as_bytes(), "log line sent before this frame")
            }
            "slow_stream" => self.slow_stream(),
            "hostile_payload" => Ok(Some(text_result(hostile_text(self.size("bytes", 64 << 10)?)))),
            "split_writes" => self.split_writes(),
            "stream" => self.stream(),
            "flood" => self.flood(),
            "silent" => {
                log(format_args!("request {} will never be answered", self.id));
                Ok(None)
            }
            "ask_client" => self.ask_client(),
            "exit_mid_frame" => self.exit_mid_frame(),
            "exit_leaving_holder" => self.exit_leaving_holder(),
            "unreadable_error" => {
                // Well-formed JSON-RPC, but no SDK's error type takes a
                // code that is not an integer.
                let error = json!({"code": 1.5, "message": "an error code that is not an integer"});
                let frame = encode(&json!({"jsonrpc": "2.0", "id": self.id, "error": error}));
                if let Some(mut out) = self.out() {
                    out.frame(&frame, self.chunk);
                }
                Ok(None)
            }
            "stats" => {
                let stats = self.server.snapshot().json();
                Ok(Some(json!({
                    "content": [{"type": "text", "text": stats.to_string()}],
                    "structuredContent": stats,
                })))
            }
            _ => Err(RpcError::invalid_params(format!("Unknown tool: {name}"))),
        }
    }

    fn sized(&self) -> Result<Option<Value>, RpcError> {
        let target = self.size("frame_bytes", 1024)?;
        let id_at = self.string("id_at", "start")?;
        let invalid =
            |min| RpcError::invalid_params(format!("frame_bytes {target} is below the minimal frame size {min}"));
        if id_at == "start" {
            // serde_json's map is sorted: `{"id":…,"jsonrpc":…,"result":…}`.
            let msg = pad_to(target, |pad| response(self.id, Ok(text_result(pad)))).map_err(invalid)?;
            self.send(&msg);
            return Ok(None);
        }
        // Written by hand, as JavaScript servers order their keys (id last),
        // or with the id between two long members (neither head nor tail).
        let id = self.id.to_string();
        let frame = |pad: &str| match id_at.as_str() {
            "end" => {
                format!(r#"{{"result":{{"content":[{{"type":"text","text":"{pad}"}}]}},"jsonrpc":"2.0","id":{id}}}"#)
            }
            _ => format!(
                r#"{{"jsonrpc":"2.0","result":{{"content":[{{"type":"text","text":"{pad}"}}]}},"id":{id},"pad":"{pad}"}}"#
            ),
        };
        if !matches!(id_at.as_str(), "end" | "middle") {
            return Err(RpcError::invalid_params(format!("`id_at` must be start, end or middle, got {id_at:?}")));
        }
        let min = frame("").len();
        let pads = if id_at == "end" { 1 } else { 2 };
        let room = target.checked_sub(min).ok_or_else(|| invalid(min))?;
        let mut text = frame(&"x".repeat(room / pads));
        while text.len() < target {
            text.insert(text.len() - 1, ' ');
        }
        text.push('\n');
        let Some(mut out) = self.out() else { return Ok(None) };
        out.frame(text.as_bytes(), self.chunk);
        Ok(None)
    }

    /// Sends the client a server request (`roots/list`, id `"roots-1"`)
    /// and `notifications` notifications; the client's answer is reported on
    /// stderr as a `client_response` line.
    fn ask_client(&self) -> Result<Option<Value>, RpcError> {
        let notifications = self.size("notifications", 3)?;
        self.send(&json!({"jsonrpc": "2.0", "id": "roots-1", "method": "roots/list"}));
        for seq in 0..notifications {
            let note = json!({"jsonrpc": "2.0", "method": "notifications/message",
                "params": {"level": "info", "data": {"seq": seq}}});
            self.send(&note);
        }
        Ok(Some(text_result(format!("asked the client and sent {notifications} notifications"))))
    }

    /// Writes `count` notifications of exactly `frame_bytes` bytes (their
    /// `\n` included) as fast as it can: one template, a 12-digit sequence
    /// number patched in, many frames per `write(2)`. For volume tests. Its
    /// result's text is padded to `result_bytes` bytes (default: not).
    fn flood(&self) -> Result<Option<Value>, RpcError> {
        const SEQ: &str = "000000000000";
        let count = self.u64("count", 1000)?;
        let frame_bytes = self.size("frame_bytes", 200)?;
        let make = |pad: String| {
            json!({"jsonrpc": "2.0", "method": "notifications/message",
                "params": {"level": "info", "data": {"seq": SEQ, "pad": pad}}})
        };
        let template = encode(&pad_to(frame_bytes.saturating_sub(1), make).map_err(|min| {
            RpcError::invalid_params(format!("frame_bytes {frame_bytes} is below the minimal frame size {}", min + 1))
        })?);
        let seq_at = template.windows(SEQ.len()).position(|w| w == SEQ.as_bytes()).expect("the template has a seq");
        let per_write = (self.chunk.max(frame_bytes) / frame_bytes).max(1);
        let started = Instant::now();
        let blocked_before = self.server.stats.blocked_write_us.load(SeqCst);
        let mut batch = Vec::with_capacity(per_write * frame_bytes);
        let mut seq = 0;
        while seq < count {
            batch.clear();
            while seq < count && batch.len() / frame_bytes < per_write {
                let at = batch.len() + seq_at;
                batch.extend_from_slice(&template);
                batch[at..at + SEQ.len()].copy_from_slice(format!("{seq:012}").as_bytes());
                seq += 1;
            }
            if self.cancel.is_cancelled() {
                log_cancelled(self.id, seq * as_u64(frame_bytes));
                return Ok(None);
            }
            let Some(mut out) = self.out() else { return Ok(None) };
            out.begin_frame(batch.len());
            out.write_piece(&batch);
            out.end_frame();
        }
        let blocked = self.server.stats.blocked_write_us.load(SeqCst) - blocked_before;
        // A result of at least `result_bytes` bytes of text, if asked.
        let mut text = format!("flooded {count} notifications");
        let pad = self.size("result_bytes", 0)?.saturating_sub(text.len());
        text.push_str(&".".repeat(pad));
        Ok(Some(json!({
            "content": [{"type": "text", "text": text}],
            "structuredContent": {
                "notifications": count,
                "bytes": count * as_u64(frame_bytes),
                "blocked_write_us": blocked,
                "elapsed_ms": micros(started.elapsed()) / 1000,
            },
        })))
    }

    fn giant_field(&self) -> Result<Option<Value>, RpcError> {
        const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        let n = self.size("bytes", 1 << 20)?;
        let blob: String = ALNUM.iter().cycle().take(n).map(|&b| char::from(b)).collect();
        Ok(Some(json!({
            "content": [{"type": "text", "text": format!("structuredContent.blob holds {n} bytes")}],
            "structuredContent": {"blob": blob},
        })))
    }

    fn many_blocks(&self) -> Result<Option<Value>, RpcError> {
        let count = self.size("count", 1000)?;
        let block_bytes = self.size("block_bytes", 16)?;
        let blocks: Vec<Value> = (0..count)
            .map(|i| {
                let mut text = format!("{i}:");
                text.truncate(block_bytes);
                let pad = block_bytes - text.len();
                text.extend(std::iter::repeat_n('b', pad));
                json!({"type": "text", "text": text})
            })
            .collect();
        Ok(Some(json!({"content": blocks})))
    }

    /// Writes `junk` and then the response, under one writer lock.
    fn junk_then_reply(&self, junk: &[u8], text: &str) -> Result<Option<Value>, RpcError> {
        let frame = encode(&response(self.id, Ok(text_result(text))));
        if let Some(mut out) = self.out() {
            out.junk(junk);
            out.frame(&frame, self.chunk);
        }
        Ok(None)
    }

    fn stderr_flood(&self) -> Result<Option<Value>, RpcError> {
        const BLOCK: usize = 64 << 10;
        let total = self.size("bytes", 1 << 20)?;
        let started = Instant::now();
        let mut remaining = total;
        let mut line_no = 0u64;
        let mut buf = Vec::with_capacity(BLOCK + 128);
        let mut stderr = io::stderr().lock();
        while remaining > 0 {
            buf.clear();
            while buf.len() < BLOCK.min(remaining) {
                let _ =
                    writeln!(buf, "WARN stderr_flood line {line_no:09} the quick brown fox jumps over the lazy dog");
                line_no += 1;
            }
            if buf.len() > remaining {
                buf.truncate(remaining);
                if let Some(last) = buf.last_mut() {
                    *last = b'\n';
                }
            }
            if stderr.write_all(&buf).is_err() {
                break;
            }
            remaining -= buf.len();
        }
        drop(stderr);
        Ok(Some(text_result(format!(
            "wrote {} bytes to stderr in {} ms",
            total - remaining,
            started.elapsed().as_millis()
        ))))
    }

    fn slow_stream(&self) -> Result<Option<Value>, RpcError> {
        let chunks = self.positive("chunks", 10)?;
        let interval = self.millis("interval_ms", 100)?;
        let chunk_bytes = self.positive("chunk_bytes", 1024)?;
        let target = chunks
            .checked_mul(chunk_bytes)
            .filter(|&n| as_u64(n) <= MAX_BYTES)
            .ok_or_else(|| RpcError::invalid_params("chunks * chunk_bytes is too large"))?;
        let make = |pad| response(self.id, Ok(text_result(pad)));
        let msg = pad_to(target - 1, make).unwrap_or_else(|_| make(String::new()));
        let frame = encode(&msg);
        let piece = frame.len().div_ceil(chunks);
        self.paced(&frame, piece, piece, interval);
        Ok(None)
    }

    fn split_writes(&self) -> Result<Option<Value>, RpcError> {
        let text = self.string("text", "split \u{2713} h\u{e9}llo \u{1f600} \u{4e2d}\u{6587} done")?;
        let write_size = self.positive("write_size", 1)?;
        let interval = self.millis("interval_ms", 0)?;
        let frame = encode(&response(self.id, Ok(text_result(text))));
        // Align the pieces so that one boundary falls right after the lead
        // byte of the first multibyte character.
        let first = match frame.iter().position(|b| !b.is_ascii()) {
            Some(p) if write_size > 1 => match (p + 1) % write_size {
                0 => write_size,
                r => r,
            },
            _ => write_size,
        };
        self.paced(&frame, first, write_size, interval);
        Ok(None)
    }

    /// Writes `frame` as a first piece of `first` bytes and then pieces of
    /// `size` bytes, sleeping `interval` between pieces, under one writer
    /// lock. A cancellation arriving mid-frame stops the sleeping; the rest of
    /// the frame is written immediately.
    fn paced(&self, frame: &[u8], first: usize, size: usize, interval: Duration) {
        let Some(mut out) = self.out() else { return };
        out.begin_frame(frame.len());
        let (head, tail) = frame.split_at(first.min(frame.len()));
        let mut written = 0;
        let mut cancelled_at = None;
        for (i, piece) in std::iter::once(head).chain(tail.chunks(size)).enumerate() {
            if i > 0 && cancelled_at.is_none() && self.cancel.sleep(interval) {
                cancelled_at = Some(written);
            }
            out.write_piece(piece);
            written += piece.len();
        }
        out.end_frame();
        drop(out);
        if let Some(n) = cancelled_at {
            log_cancelled(self.id, as_u64(n));
            log(format_args!(
                "completed frame for cancelled {} ({} bytes written without delay)",
                self.id,
                frame.len() - n
            ));
        }
    }

    fn stream(&self) -> Result<Option<Value>, RpcError> {
        let count = self.size("count", 100)?;
        let frame_bytes = self.size("frame_bytes", 256)?;
        let kind = self.string("kind", "message")?;
        if kind != "message" && kind != "progress" {
            return Err(RpcError::invalid_params(format!(
                "argument `kind` must be \"message\" or \"progress\", got {kind:?}"
            )));
        }
        let token = self.progress_token.clone().unwrap_or_else(|| json!("hostile-stream"));
        let started = Instant::now();
        let blocked_before = self.server.stats.blocked_write_us.load(SeqCst);
        let mut bytes = 0;
        for seq in 0..count {
            let make = |pad: String| {
                if kind == "message" {
                    json!({
                        "jsonrpc": "2.0",
                        "method": "notifications/message",
                        "params": {
                            "level": "info",
                            "logger": "hostile-server",
                            "data": {"seq": seq, "pad": pad},
                        },
                    })
                } else {
                    json!({
                        "jsonrpc": "2.0",
                        "method": "notifications/progress",
                        "params": {
                            "progressToken": token,
                            "progress": seq + 1,
                            "total": count,
                            "message": pad,
                        },
                    })
                }
            };
            let frame = encode(&pad_to(frame_bytes, make).unwrap_or_else(|_| make(String::new())));
            let mut out = self.server.out();
            if self.cancel.is_cancelled() {
                log_cancelled(self.id, bytes);
                return Ok(None);
            }
            out.frame(&frame, self.chunk);
            bytes += as_u64(frame.len());
        }
        let blocked = self.server.stats.blocked_write_us.load(SeqCst) - blocked_before;
        Ok(Some(json!({
            "content": [{"type": "text", "text": format!("streamed {count} notifications ({bytes} bytes)")}],
            "structuredContent": {
                "notifications": count,
                "bytes": bytes,
                "blocked_write_us": blocked,
                "elapsed_ms": micros(started.elapsed()) / 1000,
            },
        })))
    }

    /// Starts a process that holds this server's stdout (`sleep`, in the
    /// server's process group, its pid on stderr as `holder pid N`), writes
    /// a last word to stderr, and exits with `code` without answering.
    fn exit_leaving_holder(&self) -> Result<Option<Value>, RpcError> {
        let code = self.exit_code(7)?;
        let holder = std::process::Command::new("sleep")
            .arg("300")
            .stdin(std::process::Stdio::null())
            .spawn()
            .map_err(|e| RpcError::invalid_params(format!("could not start the holder: {e}")))?;
        eprintln!("holder pid {}", holder.id());
        eprintln!("fatal: exiting with {code}, a holder keeps stdout open");
        std::process::exit(code);
    }

    /// The `code` argument, an exit status (0 to 255).
    fn exit_code(&self, default: u64) -> Result<i32, RpcError> {
        i32::try_from(self.u64("code", default)?)
            .ok()
            .filter(|c| *c <= 255)
            .ok_or_else(|| RpcError::invalid_params("argument `code` must be 0..=255"))
    }

    fn exit_mid_frame(&self) -> Result<Option<Value>, RpcError> {
        let code = self.exit_code(3)?;
        let frame = encode(&response(self.id, Ok(text_result("this frame is never finished ".repeat(32)))));
        let half = frame.len() / 2;
        if let Some(mut out) = self.out() {
            out.begin_frame(frame.len());
            out.write_piece(&frame[..half]);
            let fields = json!({"code": code, "written": half, "frame_len": frame.len()});
            crate::report::emit(report::EXIT_MID_FRAME, &fields);
            self.server.snapshot().report();
            std::process::exit(code);
        }
        Ok(None)
    }
}

/// Roughly `bytes` bytes of text that is hard to escape and to split.
fn hostile_text(bytes: usize) -> String {
    const PIECES: &[&str] = &[
        "\"quoted\" ",
        "back\\slash\\\\ ",
        "\\\"fake-escape\\\" \\u0000 \\n ",
        "\u{e9}\u{f1}\u{df}\u{3a9} ",
        "\u{20ac}\u{4e2d}\u{6587}\u{65e5}\u{672c}\u{8a9e} ",
        "\u{1f600}\u{1f680}\u{1f980} ",
        "\u{1d11e} ",
        "\u{1f469}\u{200d}\u{1f469}\u{200d}\u{1f467} ",
        "line\nbreak\r\ttab ",
        "\u{0}\u{1}\u{1f}\u{7f} ",
        "\u{2028}\u{2029}\u{feff} ",
        "{\"jsonrpc\":\"2.0\",\"id\":1}\n",
    ];
    let mut text = String::with_capacity(bytes + 8);
    let mut round = 0usize;
    while text.len() < bytes {
        for piece in PIECES {
            text.push_str(piece);
        }
        let run = if round.is_multiple_of(2) { "Z" } else { "\u{fc}" };
        text.push_str(&run.repeat(2048));
        text.push_str(&"\u{1f980}".repeat(256));
        round += 1;
    }
    let mut end = bytes.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text
}

fn tools_list() -> Value {
    /// Name, description and `(property, JSON type)` pairs.
    type ToolSpec = (&'static str, &'static str, &'static [(&'static str, &'static str)]);
    const TOOLS: &[ToolSpec] = &[
        ("ping", "Cheap reply", &[]),
        ("echo", "Echo `text`", &[("text", "string")]),
        ("big", "One response with `bytes` 'x' bytes", &[("bytes", "integer")]),
        (
            "sized",
            "Response line of exactly `frame_bytes` bytes, its id at the start, end or middle (`id_at`)",
            &[("frame_bytes", "integer"), ("id_at", "string")],
        ),
        ("giant_field", "One giant string in structuredContent.blob", &[("bytes", "integer")]),
        ("many_blocks", "`count` small text blocks", &[("count", "integer"), ("block_bytes", "integer")]),
        ("malformed", "Malformed JSON line, then the response", &[]),
        ("stderr_flood", "`bytes` bytes of stderr logs, then the response", &[("bytes", "integer")]),
        ("log_line", "Plain log line on stdout, then the response", &[("text", "string")]),
        (
            "slow_stream",
            "One response written slowly in pieces",
            &[("chunks", "integer"), ("interval_ms", "integer"), ("chunk_bytes", "integer")],
        ),
        ("hostile_payload", "Text full of escapes and multibyte UTF-8", &[("bytes", "integer")]),
        (
            "split_writes",
            "Response in `write_size`-byte writes",
            &[("text", "string"), ("write_size", "integer"), ("interval_ms", "integer")],
        ),
        (
            "stream",
            "`count` notifications, then the response",
            &[("count", "integer"), ("frame_bytes", "integer"), ("kind", "string")],
        ),
        (
            "flood",
            "`count` notifications of `frame_bytes` bytes, many per write, then the response",
            &[("count", "integer"), ("frame_bytes", "integer"), ("result_bytes", "integer")],
        ),
        ("silent", "Never answers", &[]),
        (
            "ask_client",
            "A roots/list request to the client and `notifications` notifications",
            &[("notifications", "integer")],
        ),
        ("exit_mid_frame", "Half a frame, then exit(code)", &[("code", "integer")]),
        ("exit_leaving_holder", "Exit(code) without answering, a child left holding stdout", &[("code", "integer")]),
        ("unreadable_error", "An error response whose code is not an integer", &[]),
        ("stats", "Write statistics", &[]),
    ];
    let tools: Vec<Value> = TOOLS
        .iter()
        .map(|(name, description, props)| {
            let mut properties: Map<String, Value> =
                props.iter().map(|(p, ty)| ((*p).to_owned(), json!({"type": ty}))).collect();
            properties.insert("chunk".into(), json!({"type": "integer"}));
            properties.insert("delay_ms".into(), json!({"type": "integer"}));
            json!({
                "name": name,
                "description": description,
                "inputSchema": {"type": "object", "properties": properties},
            })
        })
        .collect();
    json!({"tools": tools})
}

fn call_tool(server: &Server, id: &Value, params: Option<Value>, cancel: &Cancel) {
    let chunk = server.default_chunk;
    let fail = |message: &str| {
        let msg = response(id, Err(RpcError::invalid_params(message)));
        send(server, id, cancel, &msg, chunk);
    };
    let mut params = match params {
        None => Map::new(),
        Some(Value::Object(params)) => params,
        Some(_) => return fail("params must be an object"),
    };
    let Some(Value::String(name)) = params.remove("name") else {
        return fail("params.name must be a string");
    };
    let args = match params.remove("arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(args)) => args,
        Some(_) => return fail("params.arguments must be an object"),
    };
    let progress_token = params.get("_meta").and_then(|meta| meta.get("progressToken")).cloned();
    let mut call = Call { server, id, args, progress_token, cancel, chunk };
    match call.run(&name) {
        Ok(None) => {}
        Ok(Some(result)) => call.send(&response(id, Ok(result))),
        Err(e) => call.send(&response(id, Err(e))),
    }
}

pub(super) fn handle_request(server: &Server, id: &Value, method: &str, params: Option<Value>, cancel: &Cancel) {
    let outcome = match method {
        "initialize" => Ok(json!({
            "protocolVersion": NEWEST_LEGACY,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "hostile-server", "version": env!("CARGO_PKG_VERSION")},
        })),
        "ping" => Ok(json!({})),
        "tools/list" => Ok(tools_list()),
        "tools/call" => return call_tool(server, id, params, cancel),
        _ => Err(RpcError { code: -32601, message: format!("Method not found: {method}") }),
    };
    send(server, id, cancel, &response(id, outcome), server.default_chunk);
}
