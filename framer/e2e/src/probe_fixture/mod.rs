//! The `mcp-probe` fixture: a small MCP server, written on plain threads
//! and `std` pipes (no library transport, so the defects are easy to
//! reproduce), whose switches each reproduce one defect `mcp-probe` checks
//! for. With no switch it is well behaved, and the probe gives it all PASS.
//!
//! Tools: `large` (`{"bytes": N}`: a text result of N bytes, cut to
//! `--max-result` with `"truncated": true` in `structuredContent`) and
//! `slow` (`{"seconds": S, "interval_ms": I}`: a progress notification every
//! I ms, if the call had a progress token, then a result; cancellation
//! stops it). `tools/list` has two pages.
//!
//! | switch | defect | check that FAILs |
//! |---|---|---|
//! | `--banner` | a line on stdout before anything | 1 stdout-hygiene |
//! | `--deaf-over N` | stops reading and answering after a line over N bytes | 4 request-size |
//! | `--deaf-reader-over N` | stops reading (and stays alive) once it holds more than N bytes of an unfinished line, as a capped read buffer whose process outlives its transport | 4 request-size, the limit bisected |
//! | `--drop-over N` | drops a line over N bytes without a reply and answers on (even from a slow reader) | 4 request-size |
//! | `--exit-over N` | exits on a line over N bytes | 4 request-size |
//! | `--blocking-writes` | writes results from the reading thread, so it reads nothing while a write blocks | 7 backpressure |
//! | `--ignore-cancel` | `slow` keeps going (and sending progress) after a cancel | 8 cancellation |
//! | `--linger` | does not exit when stdin closes | 9 shutdown |
//! | `--looping-cursor` | `tools/list` hands out the same `nextCursor` forever | 2 handshake |
//! | `--drop-rest-of-read` | takes the first line of each `read(2)` and drops the rest | 5 framing |
//! | `--exit-after-large` | exits (status 5) once it has written a `large` result | 6 response-limits (and 7) |
//! | `--orphan-child` | a cancelled `slow` call leaves its child process running | 8 cancellation |
//! | `--orphan-child --child-own-group` | the same, its child leading a process group of its own (Unix) | 8 cancellation |
//! | `--linger-while-busy` | at stdin EOF, waits for running calls' child processes before exiting | 9 shutdown |
//! | `--cut-at-exit` | at stdin EOF, exits once its queued frames have started to be written, not finished (Node's `process.exit()` with a pending write) | 10 exit-flush |
//! | `--stderr-per-request N` | writes N bytes of warnings on stderr for every request | 11 stderr (WARN over 64 KiB) |
//! | `--stderr-at-start N` | writes N bytes of warnings on stderr at start-up | 11 stderr (WARN over 4 KiB) |
//! | `--lose-every N` | answers no request whose number is a multiple of N (from the 20th) | 12 soak (lost answers) |
//! | `--leak-per-second N` | keeps N more bytes for good every second (up to 256 MiB) | 12 soak (memory growth) |
//!
//! Switches that are not defects (the probe must not FAIL them):
//!
//! | switch | behaviour | expected |
//! |---|---|---|
//! | `--silent-on-malformed` | no reply to a line it cannot read (as the TypeScript and Python SDKs) | 3 bad-input WARN, exit 0 |
//! | `--quadratic-reader` | joins every 4 KiB read onto its whole buffer, sleeping 1 ms per MiB held: large requests are slow to read | 4 request-size not FAIL; latency reported |
//! | `--slow-reader MS` | sleeps MS ms per MiB read: the answer time grows in step with the size | 4 request-size not FAIL ("slow, not deaf") |
//! | `--modern-only` | 2026-07-28 only: answers `server/discover`; `initialize` and `ping` get -32601 | handshake PASS, modern era |
//! | `--legacy-only` | answers `initialize` only: `server/discover` gets -32601 | handshake PASS, legacy era |
//!
//! At stdin EOF it first finishes the `large` calls in flight and writes
//! every queued frame whole (the drain the `--cut-at-exit` defect skips).
//! By default it serves both eras (`server/discover` and `initialize`).
//! `slow` starts a child process (`sleep`) for the call's length, and kills
//! it when the call ends, is cancelled, or stdin closes.
//!
//! Binary: `probe_fixture`.

use std::collections::HashMap;
use std::io::{self, BufRead, Write};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use mcp_framer_jsonrpc::protocol::{META_SERVER_INFO, MODERN_VERSIONS, NEWEST, VERSIONS, negotiate};
use serde_json::{Value, json};

/// The fixture's switches.
#[derive(Clone, Debug, clap::Parser)]
#[command(
    name = "probe_fixture",
    about = "An MCP server with switches that reproduce the defects mcp-probe checks for"
)]
pub struct Args {
    /// Print a banner line on stdout before anything else.
    #[arg(long)]
    pub banner: bool,
    /// After reading a line over this many bytes, stop reading and answering (stay alive).
    #[arg(long, value_name = "BYTES")]
    pub deaf_over: Option<usize>,
    /// Exit (status 3) on reading a line over this many bytes.
    #[arg(long, value_name = "BYTES")]
    pub exit_over: Option<usize>,
    /// Send no reply to lines that are not valid JSON-RPC.
    #[arg(long)]
    pub silent_on_malformed: bool,
    /// Write every message from the thread that reads stdin (and run `large` there).
    #[arg(long)]
    pub blocking_writes: bool,
    /// Ignore `notifications/cancelled`: `slow` keeps sending progress and its result.
    #[arg(long)]
    pub ignore_cancel: bool,
    /// Do not exit when stdin closes (until a signal).
    #[arg(long)]
    pub linger: bool,
    /// `tools/list` returns the same `nextCursor` on every page.
    #[arg(long)]
    pub looping_cursor: bool,
    /// Take only the first line of each read from stdin and drop the rest of
    /// the read (the classic framing bug: two messages in one read lose one).
    #[arg(long)]
    pub drop_rest_of_read: bool,
    /// Exit (status 5) once a `large` result is written.
    #[arg(long)]
    pub exit_after_large: bool,
    /// A cancelled `slow` call leaves its child process running.
    #[arg(long)]
    pub orphan_child: bool,
    /// A `slow` call's child leads a process group of its own (Unix), so it
    /// is not in the server's group.
    #[arg(long)]
    pub child_own_group: bool,
    /// At stdin EOF, wait for the running calls' child processes before exiting.
    #[arg(long)]
    pub linger_while_busy: bool,
    /// Read stdin 4 KiB at a time, joining each read onto the whole buffer
    /// and sleeping 1 ms per MiB held (a quadratic reader).
    #[arg(long)]
    pub quadratic_reader: bool,
    /// Read stdin 64 KiB at a time and stop reading for good (staying
    /// alive) once more than this many bytes of an unfinished line are held.
    #[arg(long, value_name = "BYTES")]
    pub deaf_reader_over: Option<usize>,
    /// Read stdin 64 KiB at a time, sleeping this many milliseconds per MiB
    /// read (a slow but steady reader).
    #[arg(long, value_name = "MS")]
    pub slow_reader: Option<u64>,
    /// Read stdin 64 KiB at a time and drop a line over this many bytes
    /// without a reply, reading and answering on (a frame limit that says
    /// nothing).
    #[arg(long, value_name = "BYTES")]
    pub drop_over: Option<usize>,
    /// Serve only the 2026-07-28 era: `initialize` and `ping` get -32601.
    #[arg(long, conflicts_with = "legacy_only")]
    pub modern_only: bool,
    /// Serve only the legacy era: `server/discover` gets -32601.
    #[arg(long)]
    pub legacy_only: bool,
    /// At stdin EOF, exit as soon as every queued frame has started to be
    /// written (its first 64 KiB), cutting the rest.
    #[arg(long)]
    pub cut_at_exit: bool,
    /// Write this many bytes of warnings on stderr for every request.
    #[arg(long, value_name = "BYTES")]
    pub stderr_per_request: Option<usize>,
    /// Write this many bytes of warnings on stderr at start-up.
    #[arg(long, value_name = "BYTES")]
    pub stderr_at_start: Option<usize>,
    /// Answer no request whose number (counting every request, the
    /// handshake's included) is a multiple of N, from the 20th on.
    #[arg(long, value_name = "N")]
    pub lose_every: Option<u64>,
    /// Keep this many more bytes (written, so resident) every second, for
    /// good, up to 256 MiB in all: a server that grows at a steady rate,
    /// whatever the load.
    #[arg(long, value_name = "BYTES")]
    pub leak_per_second: Option<usize>,
    /// Lines over this many bytes get a -32600 error (and are not kept in memory).
    #[arg(long, default_value_t = 16 << 20, value_name = "BYTES")]
    pub request_limit: usize,
    /// The most bytes of text `large` returns; beyond, it says `"truncated": true`.
    #[arg(long, default_value_t = 32 << 20, value_name = "BYTES")]
    pub max_result: usize,
}

/// Where messages go: a writer thread (the default), or straight to stdout
/// from whichever thread has one (`--blocking-writes`).
#[derive(Clone)]
enum Out {
    /// Frames for the writer thread; `true` with a frame: exit (status 5)
    /// once it is written.
    Queue(mpsc::Sender<(Vec<u8>, bool)>),
    Direct(Arc<Mutex<io::Stdout>>),
}

impl Out {
    fn send(&self, message: &Value) {
        self.send_then(message, false);
    }

    /// Sends `message`; with `exit`, the process exits (status 5) once it
    /// is written.
    fn send_then(&self, message: &Value, exit: bool) {
        let mut frame = serde_json::to_vec(message).unwrap_or_default();
        frame.push(b'\n');
        match self {
            Out::Queue(queue) => {
                flow(|f| f.queued += 1);
                if queue.send((frame, exit)).is_err() {
                    flow(|f| f.queued -= 1);
                }
            }
            Out::Direct(stdout) => {
                let mut stdout = stdout.lock().unwrap_or_else(|e| e.into_inner());
                let _ = stdout.write_all(&frame);
                let _ = stdout.flush();
                if exit {
                    eprintln!("probe_fixture: a large result written; exiting (the --exit-after-large defect)");
                    std::process::exit(5);
                }
            }
        }
    }

    fn result(&self, id: &Value, result: Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }

    fn error(&self, id: &Value, code: i64, message: &str) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}));
    }
}

/// What is owed on stdout: `large` calls building their result, frames
/// queued for the writer, and whether it is writing one.
#[derive(Debug)]
struct Flow {
    building: usize,
    queued: usize,
    writing: bool,
    eof: bool,
    /// How many times the stdin watcher found stdin open with nothing to
    /// read (`--cut-at-exit`).
    idle: u64,
}

/// The fixture's [`Flow`], and its change signal.
static FLOW: (Mutex<Flow>, std::sync::Condvar) =
    (Mutex::new(Flow { building: 0, queued: 0, writing: false, eof: false, idle: 0 }), std::sync::Condvar::new());

/// Changes the [`Flow`] and wakes its waiters.
fn flow<T>(change: impl FnOnce(&mut Flow) -> T) -> T {
    let out = change(&mut FLOW.0.lock().unwrap_or_else(|e| e.into_inner()));
    FLOW.1.notify_all();
    out
}

/// Waits (at most 10 s) until nothing is building, queued or being written.
fn wait_flow() {
    let guard = FLOW.0.lock().unwrap_or_else(|e| e.into_inner());
    let _ = FLOW.1.wait_timeout_while(guard, Duration::from_secs(10), |f| f.building > 0 || f.queued > 0 || f.writing);
}

/// Writes one frame; with `--cut-at-exit`, in 64 KiB pieces, as an event
/// loop would: before each piece after the first, it waits until stdin has
/// been seen open and idle (two watcher rounds) or at its end, and at the
/// end it exits, dropping the rest. The cut does not depend on timing: a
/// closed stdin is never seen idle.
fn write_frame(stdout: &mut impl Write, frame: &[u8], cut_at_exit: bool) -> io::Result<()> {
    if !cut_at_exit {
        return stdout.write_all(frame).and_then(|()| stdout.flush());
    }
    for (i, piece) in frame.chunks(64 << 10).enumerate() {
        if i > 0 {
            let guard = FLOW.0.lock().unwrap_or_else(|e| e.into_inner());
            let from = guard.idle;
            let guard = FLOW.1.wait_while(guard, |f| !f.eof && f.idle < from + 2).unwrap_or_else(|e| e.into_inner());
            if guard.eof {
                eprintln!("probe_fixture: stdin closed; exiting with a frame half written (the --cut-at-exit defect)");
                std::process::exit(0);
            }
        }
        stdout.write_all(piece).and_then(|()| stdout.flush())?;
    }
    Ok(())
}

/// For `--cut-at-exit`: counts the moments stdin is open with nothing to
/// read (a 5 ms `poll` that times out; a closed stdin polls readable).
fn watch_stdin() {
    thread::spawn(|| {
        loop {
            #[cfg(unix)]
            let idle = {
                let stdin = io::stdin();
                let mut fds = [rustix::event::PollFd::new(&stdin, rustix::event::PollFlags::IN)];
                let timeout = rustix::event::Timespec { tv_sec: 0, tv_nsec: 5_000_000 };
                matches!(rustix::event::poll(&mut fds, Some(&timeout)), Ok(0))
            };
            #[cfg(not(unix))]
            let idle = true;
            if idle {
                flow(|f| f.idle += 1);
            } else {
                thread::sleep(Duration::from_millis(1));
            }
        }
    });
}

/// The running `slow` calls' child processes, by request id.
static CHILDREN: Mutex<Vec<(String, Child)>> = Mutex::new(Vec::new());

/// Kills and reaps the child process of call `id`, if it has one.
fn kill_child(id: &str) {
    let mut children = CHILDREN.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(at) = children.iter().position(|(key, _)| key == id) {
        let (_, mut child) = children.swap_remove(at);
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// What happens at stdin EOF: exit, after killing (or, with
/// `--linger-while-busy`, waiting for) the calls' child processes.
fn at_eof(args: &Args) -> ExitCode {
    // Finish what is owed on stdout first (with --cut-at-exit the writer
    // exits in the middle of a frame larger than 64 KiB instead).
    flow(|f| f.eof = true);
    wait_flow();
    let children = std::mem::take(&mut *CHILDREN.lock().unwrap_or_else(|e| e.into_inner()));
    for (_, mut child) in children {
        if args.linger_while_busy {
            eprintln!("probe_fixture: stdin closed; waiting for a call's child (the --linger-while-busy defect)");
        } else {
            let _ = child.kill();
        }
        let _ = child.wait();
    }
    if args.linger {
        eprintln!("probe_fixture: stdin closed; staying (the --linger defect)");
        loop {
            thread::sleep(Duration::from_secs(3600));
        }
    }
    ExitCode::SUCCESS
}

/// Reads one line into `line` (at most `limit + 1` bytes of it kept);
/// returns its full length without the `\n`, or `None` at end of input.
fn read_line(input: &mut impl BufRead, limit: usize, line: &mut Vec<u8>) -> io::Result<Option<usize>> {
    line.clear();
    let mut total = 0usize;
    loop {
        let chunk = input.fill_buf()?;
        if chunk.is_empty() {
            return Ok((total > 0).then_some(total));
        }
        let (part, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(at) => (&chunk[..at], true),
            None => (chunk, false),
        };
        let keep = part.len().min((limit + 1).saturating_sub(line.len()));
        line.extend_from_slice(&part[..keep]);
        total += part.len();
        let used = part.len() + usize::from(done);
        input.consume(used);
        if done {
            return Ok(Some(total));
        }
    }
}

/// Runs the fixture on the process's stdio.
pub fn main() -> ExitCode {
    let args: Args = match crate::parse_args(std::env::args_os()) {
        Ok(args) => args,
        Err(code) => return code,
    };
    if args.banner {
        println!("probe_fixture 1.0 starting (a banner on stdout: the defect)");
    }
    eprintln!("probe_fixture: ready");
    if let Some(bytes) = args.leak_per_second {
        leak(bytes);
    }
    if let Some(n) = args.stderr_at_start {
        warn_on_stderr(n, "start-up");
    }
    let out = if args.blocking_writes {
        Out::Direct(Arc::new(Mutex::new(io::stdout())))
    } else {
        let (queue, frames) = mpsc::channel::<(Vec<u8>, bool)>();
        let cut_at_exit = args.cut_at_exit;
        if cut_at_exit {
            watch_stdin();
        }
        thread::spawn(move || {
            let mut stdout = io::stdout().lock();
            for (frame, exit) in frames {
                flow(|f| (f.queued, f.writing) = (f.queued - 1, true));
                let written = write_frame(&mut stdout, &frame, cut_at_exit);
                flow(|f| f.writing = false);
                if written.is_err() {
                    return;
                }
                if exit {
                    eprintln!("probe_fixture: a large result written; exiting (the --exit-after-large defect)");
                    std::process::exit(5);
                }
            }
        });
        Out::Queue(queue)
    };
    let cancels: Arc<Mutex<HashMap<String, Arc<AtomicBool>>>> = Arc::default();
    let mut stdin = io::stdin().lock();
    let mut line = Vec::new();
    if args.drop_rest_of_read {
        let mut chunk = vec![0; 1 << 20];
        while let Ok(n) = io::Read::read(&mut stdin, &mut chunk) {
            if n == 0 {
                break;
            }
            match chunk[..n].iter().position(|&b| b == b'\n') {
                Some(end) => {
                    line.extend_from_slice(&chunk[..end]);
                    handle(&args, &out, &cancels, &line);
                    line.clear();
                }
                None => line.extend_from_slice(&chunk[..n]),
            }
        }
        return at_eof(&args);
    }
    if args.quadratic_reader {
        let mut chunk = vec![0; 4096];
        let mut held: Vec<u8> = Vec::new();
        while let Ok(n) = io::Read::read(&mut stdin, &mut chunk) {
            if n == 0 {
                break;
            }
            // The defect: the whole buffer is copied on every read, and
            // searched from its start.
            held = [&held[..], &chunk[..n]].concat();
            thread::sleep(Duration::from_millis((held.len() >> 20) as u64));
            while let Some(end) = held.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = held.drain(..=end).collect();
                let line = &line[..line.len() - 1];
                if line.len() > args.request_limit {
                    let message = format!("request too large: {} bytes (limit {})", line.len(), args.request_limit);
                    out.error(&Value::Null, -32600, &message);
                } else {
                    handle(&args, &out, &cancels, line);
                }
            }
        }
        return at_eof(&args);
    }
    if args.deaf_reader_over.is_some() || args.slow_reader.is_some() || args.drop_over.is_some() {
        chunked_reader(&args, &out, &cancels, &mut stdin);
        return at_eof(&args);
    }
    while let Ok(Some(len)) = read_line(&mut stdin, args.request_limit, &mut line) {
        if args.exit_over.is_some_and(|n| len > n) {
            eprintln!("probe_fixture: a {len}-byte line; exiting (the --exit-over defect)");
            return ExitCode::from(3);
        }
        if args.deaf_over.is_some_and(|n| len > n) {
            eprintln!("probe_fixture: a {len}-byte line; going deaf (the --deaf-over defect)");
            loop {
                thread::sleep(Duration::from_secs(3600));
            }
        }
        if len > args.request_limit {
            out.error(&Value::Null, -32600, &format!("request too large: {len} bytes (limit {})", args.request_limit));
            continue;
        }
        handle(&args, &out, &cancels, &line);
    }
    at_eof(&args)
}

/// Reads stdin 64 KiB at a time for `--deaf-reader-over`, `--slow-reader`
/// and `--drop-over`, serving each complete line.
fn chunked_reader(
    args: &Args,
    out: &Out,
    cancels: &Arc<Mutex<HashMap<String, Arc<AtomicBool>>>>,
    stdin: &mut impl io::Read,
) {
    let mut chunk = vec![0; 64 << 10];
    let mut held: Vec<u8> = Vec::new();
    while let Ok(n) = stdin.read(&mut chunk) {
        if n == 0 {
            return;
        }
        if let Some(ms) = args.slow_reader {
            thread::sleep(Duration::from_micros(ms * 1000 * n as u64 / (1 << 20)));
        }
        // Only the new bytes are searched: the time grows with the size
        // alone (and with --slow-reader's sleep).
        let mut from = held.len();
        held.extend_from_slice(&chunk[..n]);
        let over = |len: usize| args.deaf_reader_over.is_some_and(|cap| len > cap);
        while let Some(at) = held[from..].iter().position(|&b| b == b'\n') {
            if over(from + at) {
                go_deaf(from + at);
            }
            let line: Vec<u8> = held.drain(..=from + at).collect();
            if args.drop_over.is_some_and(|limit| line.len() - 1 > limit) {
                eprintln!(
                    "probe_fixture: a {}-byte line dropped without a reply (the --drop-over defect)",
                    line.len() - 1
                );
            } else {
                handle(args, out, cancels, &line[..line.len() - 1]);
            }
            from = 0;
        }
        if over(held.len()) {
            go_deaf(held.len());
        }
    }
}

/// The `--deaf-reader-over` defect: reads nothing more, answers nothing,
/// stays alive.
fn go_deaf(held: usize) -> ! {
    eprintln!("probe_fixture: {held} bytes of one line held; reading no more (the --deaf-reader-over defect)");
    loop {
        thread::sleep(Duration::from_secs(3600));
    }
}

/// `--leak-per-second`: a thread that keeps `bytes` more every second
/// (a tenth every 100 ms), up to 256 MiB.
fn leak(bytes: usize) {
    thread::spawn(move || {
        let mut kept: Vec<Vec<u8>> = Vec::new();
        while kept.len().saturating_mul(bytes / 10) < 256 << 20 {
            kept.push(vec![0x5a; bytes / 10]);
            thread::sleep(Duration::from_millis(100));
        }
        // Held for good.
        loop {
            thread::park();
        }
    });
}

/// `--lose-every` for one request: whether it goes unanswered.
fn soak_defects(args: &Args) -> bool {
    static REQUESTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = REQUESTS.fetch_add(1, Ordering::Relaxed) + 1;
    args.lose_every.is_some_and(|every| n >= 20 && n.is_multiple_of(every.max(1)))
}

fn handle(args: &Args, out: &Out, cancels: &Arc<Mutex<HashMap<String, Arc<AtomicBool>>>>, line: &[u8]) {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return;
    }
    let message: Value = match serde_json::from_slice(line) {
        Ok(message) => message,
        Err(e) => {
            if !args.silent_on_malformed {
                out.error(&Value::Null, -32700, &format!("Parse error: {e}"));
            }
            return;
        }
    };
    let Some(object) = message.as_object() else {
        if !args.silent_on_malformed {
            out.error(&Value::Null, -32600, "Invalid Request: not an object");
        }
        return;
    };
    let id = object.get("id").cloned();
    if object.get("jsonrpc") != Some(&json!("2.0")) {
        if !args.silent_on_malformed {
            out.error(&id.unwrap_or(Value::Null), -32600, "Invalid Request: jsonrpc must be \"2.0\"");
        }
        return;
    }
    let method = object.get("method").and_then(Value::as_str).unwrap_or("");
    let params = object.get("params").cloned().unwrap_or(Value::Null);
    if let (Some(n), Some(_)) = (args.stderr_per_request, &id) {
        warn_on_stderr(n, method);
    }
    if id.is_some() && soak_defects(args) {
        return;
    }
    let Some(id) = id else {
        if method == "notifications/cancelled" {
            let key = params.get("requestId").map(Value::to_string).unwrap_or_default();
            if let Some(flag) = cancels.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
                flag.store(true, Ordering::SeqCst);
            }
        }
        return;
    };
    match method {
        "server/discover" if args.legacy_only => out.error(&id, -32601, "Method not found: server/discover"),
        "server/discover" => {
            let versions = if args.modern_only { MODERN_VERSIONS } else { VERSIONS };
            out.result(
                &id,
                json!({
                    "resultType": "complete",
                    "supportedVersions": versions,
                    "capabilities": {"tools": {"listChanged": false}},
                    "_meta": {META_SERVER_INFO: {"name": "probe_fixture", "version": "1.0.0"}},
                }),
            );
        }
        "initialize" | "ping" if args.modern_only => {
            out.error(&id, -32601, &format!("Method not found: {method} (this server speaks {NEWEST} only)"))
        }
        "initialize" => {
            let version = negotiate(params.get("protocolVersion").and_then(Value::as_str));
            out.result(
                &id,
                json!({
                    "protocolVersion": version,
                    "capabilities": {"tools": {"listChanged": false}},
                    "serverInfo": {"name": "probe_fixture", "version": "1.0.0"},
                }),
            );
        }
        "ping" => out.result(&id, json!({})),
        "tools/list" => match params.get("cursor").and_then(Value::as_str) {
            _ if args.looping_cursor => out.result(&id, json!({"tools": [tool("large")], "nextCursor": "again"})),
            None => out.result(&id, json!({"tools": [tool("large")], "nextCursor": "page-2"})),
            Some("page-2") => out.result(&id, json!({"tools": [tool("slow")]})),
            Some(_) => out.error(&id, -32602, "Invalid params: unknown cursor"),
        },
        "tools/call" => call(args, out, cancels, id, &params),
        _ => out.error(&id, -32601, &format!("Method not found: {method}")),
    }
}

/// Writes `n` bytes of warning lines on stderr, about `what`.
fn warn_on_stderr(n: usize, what: &str) {
    let line = format!("probe_fixture: WARNING: a chatty warning while serving {what}\n");
    let mut text = line.repeat(n / line.len() + 1);
    text.truncate(n);
    let _ = io::stderr().lock().write_all(text.as_bytes());
}

fn tool(name: &str) -> Value {
    let description = match name {
        "large" => "Returns {bytes} bytes of text",
        _ => "Runs for {seconds}, sending progress every {interval_ms} ms",
    };
    let schema = match name {
        "large" => json!({"type": "object", "properties": {"bytes": {"type": "integer"}}}),
        _ => {
            json!({"type": "object", "properties": {"seconds": {"type": "number"}, "interval_ms": {"type": "integer"}}})
        }
    };
    json!({"name": name, "description": description, "inputSchema": schema})
}

fn call(args: &Args, out: &Out, cancels: &Arc<Mutex<HashMap<String, Arc<AtomicBool>>>>, id: Value, params: &Value) {
    let arguments = params.get("arguments").cloned().unwrap_or(Value::Null);
    match params.get("name").and_then(Value::as_str) {
        Some("large") => {
            let bytes = arguments.get("bytes").and_then(Value::as_u64).unwrap_or(1 << 20) as usize;
            let max = args.max_result;
            let exit = args.exit_after_large;
            flow(|f| f.building += 1);
            let large = {
                let out = out.clone();
                move || {
                    let sent = bytes.min(max);
                    let result = json!({
                        "content": [{"type": "text", "text": "x".repeat(sent)}],
                        "structuredContent": {"bytes": sent, "truncated": sent < bytes},
                    });
                    out.send_then(&json!({"jsonrpc": "2.0", "id": id, "result": result}), exit);
                    flow(|f| f.building -= 1);
                }
            };
            if args.blocking_writes {
                large();
            } else {
                thread::spawn(large);
            }
        }
        Some("slow") => {
            let seconds = arguments.get("seconds").and_then(Value::as_f64).unwrap_or(5.0);
            let interval = Duration::from_millis(arguments.get("interval_ms").and_then(Value::as_u64).unwrap_or(50));
            let token = params.get("_meta").and_then(|m| m.get("progressToken")).cloned();
            let cancelled = Arc::new(AtomicBool::new(false));
            cancels.lock().unwrap_or_else(|e| e.into_inner()).insert(id.to_string(), Arc::clone(&cancelled));
            let ignore = args.ignore_cancel;
            let orphan = args.orphan_child;
            let out = out.clone();
            let key = id.to_string();
            // The call's child process, for the call's length.
            let mut command = Command::new("sleep");
            command.arg(format!("{}", seconds.ceil() as u64 + 2)).stdin(Stdio::null()).stdout(Stdio::null());
            #[cfg(unix)]
            if args.child_own_group {
                std::os::unix::process::CommandExt::process_group(&mut command, 0);
            }
            let child = command.spawn();
            if let Ok(child) = child {
                CHILDREN.lock().unwrap_or_else(|e| e.into_inner()).push((key.clone(), child));
            }
            thread::spawn(move || {
                let started = Instant::now();
                let mut step = 0u64;
                while started.elapsed().as_secs_f64() < seconds {
                    if cancelled.load(Ordering::SeqCst) && !ignore {
                        if orphan {
                            eprintln!("probe_fixture: cancelled; its child keeps running (the --orphan-child defect)");
                        } else {
                            kill_child(&key);
                        }
                        return;
                    }
                    step += 1;
                    if let Some(token) = &token {
                        out.send(&json!({
                            "jsonrpc": "2.0",
                            "method": "notifications/progress",
                            "params": {"progressToken": token, "progress": step},
                        }));
                    }
                    thread::sleep(interval);
                }
                kill_child(&key);
                out.result(&id, json!({"content": [{"type": "text", "text": format!("{step} steps")}]}));
            });
        }
        Some(name) => out.error(&id, -32602, &format!("Invalid params: unknown tool {name:?}")),
        None => out.error(&id, -32602, "Invalid params: no tool name"),
    }
}
