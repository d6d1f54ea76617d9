//! `hostile_server`: a small but real MCP server over stdio that tests and
//! benchmarks spawn to reproduce stdio backpressure and framing problems.
//!
//! # Wire contract
//!
//! * stdin: newline-delimited JSON-RPC 2.0, one object per line. Lines are read
//!   as bytes with `read_until(b'\n')`; a trailing `\r` is tolerated, blank
//!   lines are ignored. An unparseable line is logged on stderr and answered
//!   with error `-32700` and `"id": null`; a non-object (e.g. a batch array) or
//!   a malformed request gets `-32600`. Unknown request methods get `-32601`,
//!   unknown notifications are ignored.
//! * stdout carries only what the selected behaviour writes: protocol frames
//!   plus the deliberate junk that the `malformed`, `log_line` and
//!   `exit_mid_frame` tools emit. Every diagnostic goes to stderr.
//! * Methods: `initialize` (protocolVersion `2025-11-25`, capabilities
//!   `{"tools":{}}`, serverInfo name `hostile-server`), `ping` (`{}`),
//!   `tools/list`, `tools/call` (`params.name` selects a tool,
//!   `params.arguments` holds its options), `notifications/initialized`
//!   (ignored) and `notifications/cancelled` (`params.requestId`, number or
//!   string).
//!
//! # Writing
//!
//! stdout is written through a duplicate of fd 1 (no std `LineWriter`). A
//! frame is written whole while holding a single writer lock, so frames never
//! interleave. Each frame is split into `chunk`-byte `write(2)` calls (default
//! 16384, or `--chunk`; tools accept a per-call `chunk` argument). Each call is
//! timed: `blocked_write_us` is the sum of the wall-clock durations of all
//! `write(2)` calls on stdout. A watchdog thread prints
//! `stdout backpressure observed: ...` on stderr once per `write(2)` that has
//! been in progress for more than 50 ms, with the bytes written so far.
//!
//! Counters (reported by the `stats` tool and by the final stderr line
//! `stats: blocked_write_us=<n> bytes_written=<n> frames=<n>` printed when
//! stdin reaches EOF, on a fatal stdout error, and by `exit_mid_frame`):
//! * `bytes_written`: every byte written to stdout, junk lines and partial
//!   frames included, `\n` included;
//! * `frames`: complete protocol frames (responses and notifications); junk
//!   lines are counted separately as `junk_lines` (stats tool only);
//! * the `stats` tool reports the counters as they were before its own frame.
//!
//! # Tools
//!
//! Arguments are in parentheses, sizes in bytes. Every tool also accepts
//! `chunk` (write size) and `delay_ms` (cancellable wait before the tool runs,
//! without holding the writer lock).
//!
//! * `ping` -> text `pong`; `echo` (`text`) -> `{"content":[{"type":"text","text":<text>}]}`.
//! * `big` (`bytes` = 8 MiB): `result.content[0].text` is `bytes` `'x'` bytes.
//! * `sized` (`frame_bytes` = 1024): the response line is exactly `frame_bytes`
//!   bytes long, excluding the `\n` (the text is padded with `'a'`); `-32602`
//!   if smaller than the minimal frame.
//! * `giant_field` (`bytes` = 1 MiB): `structuredContent.blob` is one unbroken
//!   alphanumeric string of exactly `bytes` bytes.
//! * `many_blocks` (`count` = 1000, `block_bytes` = 16): `count` text blocks of
//!   exactly `block_bytes` ASCII bytes each.
//! * `malformed`: writes `{"jsonrpc":"2.0","id":` + garbage + `\n`, then the
//!   proper response on the next line.
//! * `stderr_flood` (`bytes` = 1 MiB): writes exactly `bytes` bytes of log lines
//!   to stderr, then answers.
//! * `log_line` (`text` = `INFO server started`): writes `text` + `\n` on
//!   stdout (an accidental print), then the proper response.
//! * `slow_stream` (`chunks` = 10, `interval_ms` = 100, `chunk_bytes` = 1024):
//!   one response of `chunks * chunk_bytes` bytes including `\n` (or the
//!   minimal frame if larger), written as `chunks` pieces with `interval_ms`
//!   sleeps in between, holding the writer lock throughout.
//! * `hostile_payload` (`bytes` = 64 KiB): text of about `bytes` raw UTF-8 bytes
//!   (before escaping) full of quotes, backslashes, control characters,
//!   embedded newlines, 2/3/4-byte characters, emoji and long unbroken runs.
//! * `split_writes` (`text`, `write_size` = 1, `interval_ms` = 0): the response
//!   is written `write_size` bytes per `write(2)`; the piece boundaries are
//!   aligned so that one falls right after the lead byte of the first
//!   multibyte character.
//! * `stream` (`count` = 100, `frame_bytes` = 256, `kind` = `message` |
//!   `progress`, `chunk`): `count` notifications (`notifications/message` or
//!   `notifications/progress`, using `params._meta.progressToken` if given),
//!   each exactly `frame_bytes` bytes excluding `\n` when possible, then a
//!   response whose `structuredContent` has `notifications`, `bytes`,
//!   `blocked_write_us` and `elapsed_ms` for the stream.
//! * `exit_mid_frame` (`code` = 3): writes the first half of a response (no
//!   `\n`) and exits the process with `code`.
//! * `stats`: `structuredContent` (and the text, as JSON) holds
//!   `blocked_write_us`, `bytes_written`, `frames`, `junk_lines`,
//!   `backpressure_events`.
//!
//! # Cancellation
//!
//! `notifications/cancelled` is handled by the stdin reader as soon as it is
//! read. A request cancelled before its first byte is written sends nothing
//! (stderr: `cancelled <id> after 0 bytes`). `slow_stream` and `split_writes`
//! cancelled mid-frame finish the frame immediately without further sleeps
//! (a frame cannot be retracted) and log `cancelled <id> after <n> bytes`,
//! where `n` is the number of frame bytes written when the cancellation was
//! noticed; `stream` stops between notifications and sends no response. `<id>`
//! is printed as JSON (strings are quoted).
//!
//! # Flags and dispatch
//!
//! `--on-start <tool>` with `--arg key=value` (value parsed as JSON, else taken
//! as a string) runs a tool at startup as if called with id 0. `--chunk <n>`
//! sets the default write size. `--dispatch ordered|concurrent|inline`:
//! `ordered` (default) keeps reading stdin on the main thread while a single
//! worker answers requests in arrival order; `concurrent` runs each request on
//! its own thread (frames still never interleave, but order follows
//! completion); `inline` handles requests on the reader thread, so stdin is not
//! read while stdout is blocked (the classic stdio deadlock) and cancellation
//! only applies to requests that have not started yet.

use std::collections::HashMap;
use std::fmt::Display;
use std::fs::File;
use std::io::{self, BufRead, Write};
use std::os::fd::AsFd;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, mpsc};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

const PROTOCOL_VERSION: &str = "2025-11-25";
const DEFAULT_CHUNK: usize = 16 * 1024;
/// A `write(2)` in progress for longer than this is reported as backpressure.
const BACKPRESSURE_AFTER: Duration = Duration::from_millis(50);
/// Upper bound for any size argument, to keep typos from exhausting memory.
const MAX_BYTES: u64 = 1 << 30;

const USAGE: &str = "\
usage: hostile_server [--on-start TOOL [--arg KEY=VALUE]...] [--chunk BYTES]
                      [--dispatch ordered|concurrent|inline] [--help]

MCP server over stdio (newline-delimited JSON-RPC 2.0) for stdio backpressure tests.
  --on-start TOOL       run TOOL at startup as if called via tools/call with id 0
  --arg KEY=VALUE       argument for --on-start (VALUE parsed as JSON, else a string)
  --chunk BYTES         default size of each write(2) on stdout (default 16384)
  --dispatch MODE       ordered (default): one worker, stdin always read;
                        concurrent: one thread per request;
                        inline: requests handled on the stdin reader thread
Tools: ping echo big sized giant_field many_blocks malformed stderr_flood log_line
       slow_stream hostile_payload split_writes stream exit_mid_frame stats
Diagnostics go to stderr; the last stderr line at EOF is
  stats: blocked_write_us=<n> bytes_written=<n> frames=<n>
";

/// Writes one diagnostic line to stderr with a single `write_all`.
fn log(msg: impl Display) {
    let line = format!("{msg}\n");
    let _ = io::stderr().lock().write_all(line.as_bytes());
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

fn as_u64(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

#[derive(Debug, Default)]
struct Stats {
    blocked_write_us: AtomicU64,
    bytes_written: AtomicU64,
    frames: AtomicU64,
    junk_lines: AtomicU64,
    backpressure_events: AtomicU64,
}

#[derive(Debug, Clone, Copy)]
struct Snapshot {
    blocked_write_us: u64,
    bytes_written: u64,
    frames: u64,
    junk_lines: u64,
    backpressure_events: u64,
}

impl Snapshot {
    fn json(&self) -> Value {
        json!({
            "blocked_write_us": self.blocked_write_us,
            "bytes_written": self.bytes_written,
            "frames": self.frames,
            "junk_lines": self.junk_lines,
            "backpressure_events": self.backpressure_events,
        })
    }

    fn line(&self) -> String {
        format!(
            "stats: blocked_write_us={} bytes_written={} frames={}",
            self.blocked_write_us, self.bytes_written, self.frames
        )
    }
}

/// State of the `write(2)` in progress, shared with the watchdog thread.
#[derive(Debug, Default)]
struct WriteWatch {
    /// Incremented when each `write(2)` starts.
    seq: AtomicU64,
    /// Start of the `write(2)` in progress, in µs since `Server::epoch`, plus
    /// one; zero when no write is in progress.
    since_us: AtomicU64,
    /// Bytes of the current frame written so far, and its total length.
    frame_done: AtomicU64,
    frame_len: AtomicU64,
}

/// Cancellation flag of one in-flight request; `sleep` wakes up on cancel.
#[derive(Debug, Default)]
struct Cancel {
    cancelled: Mutex<bool>,
    wake: Condvar,
}

impl Cancel {
    fn cancel(&self) {
        *lock(&self.cancelled) = true;
        self.wake.notify_all();
    }

    fn is_cancelled(&self) -> bool {
        *lock(&self.cancelled)
    }

    /// Sleeps for `d` or until cancelled; returns whether it is cancelled.
    fn sleep(&self, d: Duration) -> bool {
        let guard = lock(&self.cancelled);
        let (guard, _) =
            self.wake.wait_timeout_while(guard, d, |cancelled| !*cancelled).unwrap_or_else(PoisonError::into_inner);
        *guard
    }
}

#[derive(Debug)]
struct Server {
    out: Mutex<File>,
    stats: Stats,
    watch: WriteWatch,
    epoch: Instant,
    inflight: Mutex<HashMap<String, Arc<Cancel>>>,
    default_chunk: usize,
}

impl Server {
    fn now_us(&self) -> u64 {
        micros(self.epoch.elapsed())
    }

    /// Takes the writer lock; frames are only written through the guard.
    fn out(&self) -> Out<'_> {
        Out { server: self, file: lock(&self.out) }
    }

    fn snapshot(&self) -> Snapshot {
        let s = &self.stats;
        Snapshot {
            blocked_write_us: s.blocked_write_us.load(SeqCst),
            bytes_written: s.bytes_written.load(SeqCst),
            frames: s.frames.load(SeqCst),
            junk_lines: s.junk_lines.load(SeqCst),
            backpressure_events: s.backpressure_events.load(SeqCst),
        }
    }

    fn register(&self, id: &Value) -> Arc<Cancel> {
        let cancel = Arc::new(Cancel::default());
        if lock(&self.inflight).insert(id.to_string(), Arc::clone(&cancel)).is_some() {
            log(format_args!("duplicate in-flight request id {id}"));
        }
        cancel
    }

    fn unregister(&self, id: &Value, cancel: &Arc<Cancel>) {
        let mut inflight = lock(&self.inflight);
        let key = id.to_string();
        if inflight.get(&key).is_some_and(|c| Arc::ptr_eq(c, cancel)) {
            inflight.remove(&key);
        }
    }

    fn cancel(&self, id: &Value) {
        match lock(&self.inflight).get(&id.to_string()) {
            Some(cancel) => {
                log(format_args!("cancel requested for {id}"));
                cancel.cancel();
            }
            None => log(format_args!("cancel for unknown or finished request {id} ignored")),
        }
    }
}

/// Holder of the writer lock.
struct Out<'a> {
    server: &'a Server,
    file: MutexGuard<'a, File>,
}

impl Out<'_> {
    fn begin_frame(&mut self, len: usize) {
        self.server.watch.frame_len.store(as_u64(len), SeqCst);
        self.server.watch.frame_done.store(0, SeqCst);
    }

    fn end_frame(&mut self) {
        self.server.stats.frames.fetch_add(1, SeqCst);
    }

    /// Writes `piece` with one timed `write(2)` (more only on short writes or
    /// `EINTR`). Exits the process if stdout is unusable.
    fn write_piece(&mut self, piece: &[u8]) {
        let (stats, watch) = (&self.server.stats, &self.server.watch);
        let mut rest = piece;
        while !rest.is_empty() {
            watch.seq.fetch_add(1, SeqCst);
            watch.since_us.store(self.server.now_us() + 1, SeqCst);
            let started = Instant::now();
            let result = self.file.write(rest);
            let took = micros(started.elapsed());
            watch.since_us.store(0, SeqCst);
            stats.blocked_write_us.fetch_add(took, SeqCst);
            match result {
                Ok(0) => fatal_stdout(self.server, io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    stats.bytes_written.fetch_add(as_u64(n), SeqCst);
                    watch.frame_done.fetch_add(as_u64(n), SeqCst);
                    rest = &rest[n..];
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => fatal_stdout(self.server, e),
            }
        }
    }

    /// Writes a complete frame (ending in `\n`) in `chunk`-byte writes.
    fn frame(&mut self, frame: &[u8], chunk: usize) {
        self.begin_frame(frame.len());
        for piece in frame.chunks(chunk) {
            self.write_piece(piece);
        }
        self.end_frame();
    }

    /// Writes a non-protocol line (ending in `\n`) in one write.
    fn junk(&mut self, line: &[u8]) {
        self.begin_frame(line.len());
        self.write_piece(line);
        self.server.stats.junk_lines.fetch_add(1, SeqCst);
    }
}

fn fatal_stdout(server: &Server, err: io::Error) -> ! {
    log(format_args!("stdout write failed: {err}; exiting"));
    log(server.snapshot().line());
    std::process::exit(1)
}

/// Reports every `write(2)` that has been in progress for too long, once.
fn watchdog(server: &Server) {
    let watch = &server.watch;
    let mut reported = 0;
    loop {
        thread::sleep(Duration::from_millis(10));
        let seq = watch.seq.load(SeqCst);
        let since = watch.since_us.load(SeqCst);
        if since == 0 || seq == reported {
            continue;
        }
        let blocked = server.now_us().saturating_sub(since - 1);
        if blocked < micros(BACKPRESSURE_AFTER) || watch.seq.load(SeqCst) != seq {
            continue;
        }
        reported = seq;
        server.stats.backpressure_events.fetch_add(1, SeqCst);
        log(format_args!(
            "stdout backpressure observed: write blocked for {} ms, {} of {} frame bytes \
             written so far, {} bytes written in total",
            blocked / 1000,
            watch.frame_done.load(SeqCst),
            watch.frame_len.load(SeqCst),
            server.stats.bytes_written.load(SeqCst),
        ));
    }
}

#[derive(Debug)]
struct RpcError {
    code: i64,
    message: String,
}

impl RpcError {
    fn invalid_params(message: impl Into<String>) -> Self {
        Self { code: -32602, message: message.into() }
    }
}

/// Serializes `msg` followed by `\n`.
fn encode(msg: &Value) -> Vec<u8> {
    let mut frame = serde_json::to_vec(msg).expect("a serde_json::Value always serializes");
    frame.push(b'\n');
    frame
}

/// Length of the serialized `msg`, excluding the `\n`.
fn encoded_len(msg: &Value) -> usize {
    encode(msg).len() - 1
}

fn response(id: &Value, outcome: Result<Value, RpcError>) -> Value {
    match outcome {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(e) => json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {"code": e.code, "message": e.message},
        }),
    }
}

fn text_result(text: impl Into<String>) -> Value {
    json!({"content": [{"type": "text", "text": text.into()}]})
}

/// Builds `make(pad)` with `pad` a run of `'a'` such that the serialized
/// message is exactly `target` bytes (excluding `\n`); `Err(minimum)` if the
/// message is longer than `target` even with an empty pad.
fn pad_to(target: usize, make: impl Fn(String) -> Value) -> Result<Value, usize> {
    let min = encoded_len(&make(String::new()));
    if target < min {
        return Err(min);
    }
    let msg = make("a".repeat(target - min));
    debug_assert_eq!(encoded_len(&msg), target);
    Ok(msg)
}

fn log_cancelled(id: &Value, bytes: u64) {
    log(format_args!("cancelled {id} after {bytes} bytes"));
}

/// Writes `msg` unless the request was cancelled before its first byte.
fn send(server: &Server, id: &Value, cancel: &Cancel, msg: &Value, chunk: usize) {
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
            "exit_mid_frame" => self.exit_mid_frame(),
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
        let msg = pad_to(target, |pad| response(self.id, Ok(text_result(pad)))).map_err(|min| {
            RpcError::invalid_params(format!("frame_bytes {target} is below the minimal frame size {min}"))
        })?;
        self.send(&msg);
        Ok(None)
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

    fn exit_mid_frame(&self) -> Result<Option<Value>, RpcError> {
        let code = self.u64("code", 3)?;
        let code = i32::try_from(code)
            .ok()
            .filter(|c| *c <= 255)
            .ok_or_else(|| RpcError::invalid_params("argument `code` must be 0..=255"))?;
        let frame = encode(&response(self.id, Ok(text_result("this frame is never finished ".repeat(32)))));
        let half = frame.len() / 2;
        if let Some(mut out) = self.out() {
            out.begin_frame(frame.len());
            out.write_piece(&frame[..half]);
            log(format_args!("exit_mid_frame: wrote {half} of {} bytes, exiting with code {code}", frame.len()));
            log(self.server.snapshot().line());
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
        ("sized", "Response line of exactly `frame_bytes` bytes", &[("frame_bytes", "integer")]),
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
        ("exit_mid_frame", "Half a frame, then exit(code)", &[("code", "integer")]),
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

fn handle_request(server: &Server, id: &Value, method: &str, params: Option<Value>, cancel: &Cancel) {
    let outcome = match method {
        "initialize" => Ok(json!({
            "protocolVersion": PROTOCOL_VERSION,
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

#[derive(Debug)]
enum Job {
    Request {
        id: Value,
        method: String,
        params: Option<Value>,
        cancel: Arc<Cancel>,
    },
    /// An error response that needs no request handling (e.g. parse errors).
    Reply(Value),
}

fn run_job(server: &Server, job: Job) {
    match job {
        Job::Request { id, method, params, cancel } => {
            handle_request(server, &id, &method, params, &cancel);
            server.unregister(&id, &cancel);
        }
        Job::Reply(msg) => server.out().frame(&encode(&msg), server.default_chunk),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Ordered,
    Concurrent,
    Inline,
}

#[derive(Debug)]
enum Dispatcher {
    Inline(&'static Server),
    Ordered { jobs: mpsc::Sender<Job>, worker: JoinHandle<()> },
    Concurrent { server: &'static Server, workers: Vec<JoinHandle<()>> },
}

impl Dispatcher {
    fn new(mode: Mode, server: &'static Server) -> Self {
        match mode {
            Mode::Inline => Self::Inline(server),
            Mode::Concurrent => Self::Concurrent { server, workers: Vec::new() },
            Mode::Ordered => {
                let (jobs, queue) = mpsc::channel();
                let worker = thread::Builder::new()
                    .name("worker".into())
                    .spawn(move || queue.into_iter().for_each(|job| run_job(server, job)))
                    .expect("spawn worker thread");
                Self::Ordered { jobs, worker }
            }
        }
    }

    fn submit(&mut self, job: Job) {
        match self {
            Self::Inline(server) => run_job(server, job),
            Self::Ordered { jobs, .. } => {
                if jobs.send(job).is_err() {
                    log("worker thread is gone; request dropped");
                }
            }
            Self::Concurrent { server, workers } => {
                let server = *server;
                workers.retain(|w| !w.is_finished());
                workers.push(
                    thread::Builder::new()
                        .name("request".into())
                        .spawn(move || run_job(server, job))
                        .expect("spawn request thread"),
                );
            }
        }
    }

    /// Waits for all submitted jobs to finish.
    fn finish(self) {
        let workers = match self {
            Self::Inline(_) => Vec::new(),
            Self::Ordered { jobs, worker } => {
                drop(jobs);
                vec![worker]
            }
            Self::Concurrent { workers, .. } => workers,
        };
        for worker in workers {
            if worker.join().is_err() {
                log("a worker thread panicked");
            }
        }
    }
}

enum Incoming {
    Request {
        id: Value,
        method: String,
        params: Option<Value>,
    },
    Notification {
        method: String,
        params: Option<Value>,
    },
    /// A response from the client; this server sends no requests.
    Response,
    Invalid {
        id: Value,
        code: i64,
        message: String,
    },
}

fn classify(line: &[u8]) -> Incoming {
    let invalid = |id: Value, message: &str| Incoming::Invalid {
        id,
        code: -32600,
        message: format!("Invalid Request: {message}"),
    };
    let value: Value = match serde_json::from_slice(line) {
        Ok(value) => value,
        Err(e) => {
            log(format_args!("unparseable line ({} bytes): {e}", line.len()));
            return Incoming::Invalid { id: Value::Null, code: -32700, message: format!("Parse error: {e}") };
        }
    };
    let Value::Object(mut obj) = value else {
        return invalid(Value::Null, "expected a JSON object");
    };
    let id = obj.remove("id");
    let valid_id = id.as_ref().filter(|id| id.is_string() || id.is_number()).cloned();
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return invalid(valid_id.unwrap_or(Value::Null), "jsonrpc must be \"2.0\"");
    }
    let params = obj.remove("params");
    match (obj.remove("method"), id) {
        (Some(Value::String(method)), None) => Incoming::Notification { method, params },
        (Some(Value::String(method)), Some(_)) => match valid_id {
            Some(id) => Incoming::Request { id, method, params },
            None => invalid(Value::Null, "id must be a string or a number"),
        },
        (None, Some(_)) if obj.contains_key("result") || obj.contains_key("error") => Incoming::Response,
        _ => invalid(valid_id.unwrap_or(Value::Null), "method must be a string"),
    }
}

#[derive(Debug)]
struct Options {
    on_start: Option<String>,
    args: Map<String, Value>,
    chunk: usize,
    mode: Mode,
}

fn parse_options() -> Result<Options, String> {
    let mut opts = Options { on_start: None, args: Map::new(), chunk: DEFAULT_CHUNK, mode: Mode::Ordered };
    let mut argv = std::env::args().skip(1);
    while let Some(arg) = argv.next() {
        let (flag, inline_value) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => (flag.to_owned(), Some(value.to_owned())),
            _ => (arg, None),
        };
        if flag == "--help" || flag == "-h" {
            return Err(String::new());
        }
        if !["--on-start", "--arg", "--chunk", "--dispatch"].contains(&flag.as_str()) {
            return Err(format!("unknown argument {flag:?}"));
        }
        let value = inline_value.or_else(|| argv.next()).ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--on-start" => opts.on_start = Some(value),
            "--arg" => {
                let (key, raw) =
                    value.split_once('=').ok_or_else(|| format!("--arg expects KEY=VALUE, got {value:?}"))?;
                let parsed = serde_json::from_str(raw).unwrap_or_else(|_| json!(raw));
                opts.args.insert(key.to_owned(), parsed);
            }
            "--chunk" => {
                opts.chunk = value
                    .parse()
                    .ok()
                    .filter(|&n: &usize| n > 0)
                    .ok_or_else(|| format!("--chunk expects a positive integer, got {value:?}"))?;
            }
            "--dispatch" => {
                opts.mode = match value.as_str() {
                    "ordered" => Mode::Ordered,
                    "concurrent" => Mode::Concurrent,
                    "inline" => Mode::Inline,
                    _ => return Err(format!("unknown dispatch mode {value:?}")),
                };
            }
            _ => unreachable!("flag names are checked above"),
        }
    }
    if opts.on_start.is_none() && !opts.args.is_empty() {
        log("warning: --arg given without --on-start; ignored");
    }
    Ok(opts)
}

fn main() -> ExitCode {
    let opts = match parse_options() {
        Ok(opts) => opts,
        Err(message) => {
            if !message.is_empty() {
                log(format_args!("error: {message}"));
            }
            let _ = io::stderr().write_all(USAGE.as_bytes());
            return if message.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(2) };
        }
    };
    let out = match io::stdout().as_fd().try_clone_to_owned() {
        Ok(fd) => File::from(fd),
        Err(e) => {
            log(format_args!("cannot duplicate stdout: {e}"));
            return ExitCode::FAILURE;
        }
    };
    let server: &'static Server = Box::leak(Box::new(Server {
        out: Mutex::new(out),
        stats: Stats::default(),
        watch: WriteWatch::default(),
        epoch: Instant::now(),
        inflight: Mutex::new(HashMap::new()),
        default_chunk: opts.chunk,
    }));
    if let Err(e) = thread::Builder::new().name("backpressure-watchdog".into()).spawn(move || watchdog(server)) {
        log(format_args!("cannot start the backpressure watchdog: {e}"));
    }

    let mut dispatcher = Dispatcher::new(opts.mode, server);
    if let Some(tool) = opts.on_start {
        let id = json!(0);
        let cancel = server.register(&id);
        dispatcher.submit(Job::Request {
            id,
            method: "tools/call".into(),
            params: Some(json!({"name": tool, "arguments": opts.args})),
            cancel,
        });
    }

    let mut stdin = io::stdin().lock();
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match stdin.read_until(b'\n', &mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                log(format_args!("stdin read failed: {e}; treating as EOF"));
                break;
            }
        }
        let line = buf.strip_suffix(b"\n").unwrap_or(&buf);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match classify(line) {
            Incoming::Request { id, method, params } => {
                let cancel = server.register(&id);
                dispatcher.submit(Job::Request { id, method, params, cancel });
            }
            Incoming::Notification { method, params } => match method.as_str() {
                "notifications/initialized" => {}
                "notifications/cancelled" => match params.as_ref().and_then(|p| p.get("requestId")) {
                    Some(id) => server.cancel(id),
                    None => log("notifications/cancelled without params.requestId ignored"),
                },
                _ => log(format_args!("ignoring notification {method}")),
            },
            Incoming::Response => log("ignoring a response from the client"),
            Incoming::Invalid { id, code, message } => {
                log(format_args!("answering invalid message with {code}: {message}"));
                dispatcher.submit(Job::Reply(response(&id, Err(RpcError { code, message }))));
            }
        }
    }
    drop(stdin);
    log("stdin reached EOF; waiting for in-flight requests");
    dispatcher.finish();
    log(server.snapshot().line());
    ExitCode::SUCCESS
}
