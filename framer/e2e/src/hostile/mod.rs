//! `hostile_server`: a small but real MCP server over stdio that tests and
//! benchmarks spawn to reproduce stdio backpressure and framing problems.
//! The `hostile_server` binary and the `deadlock` example (which re-executes
//! itself with `--serve-hostile`) both call [`main_from`].
//!
//! # Memory: deliberately unbounded input lines
//!
//! stdin is read with `BufRead::read_until(b'\n')`, which grows its buffer to
//! hold the whole line: a 256 MiB line without `\n` costs this process
//! 256 MiB. That is on purpose. This fixture is the misbehaving peer the
//! transport is tested against, not an example of a server; the library
//! server (`mcp_framer_stdio::server`, driven by the `lib_server` fixture)
//! is the one with a transport limit.
//!
//! # Modules
//!
//! `args` (the command line), `protocol` (JSON-RPC encoding and the
//! classification of input lines), `server` (the stdout writer, its
//! counters and the backpressure watchdog), `tools` (every tool), `dispatch`
//! (the ordered, concurrent and inline request dispatchers).
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
//! `write(2)` calls on stdout. A watchdog thread prints the report line
//! `backpressure: {"blocked_ms":n,"frame_done":n,"frame_len":n,"bytes_written":n}`
//! on stderr once per `write(2)` that has been in progress for more than
//! 50 ms (`frame_done` of the `frame_len` bytes of the current frame are
//! written so far).
//!
//! # Report lines
//!
//! Every stderr line that tests read is a report line, `<tag>: <JSON object>`
//! (see [`crate::report`]; the tags are the `hostile::report::*` constants):
//! `backpressure`, `stats`, `cancel`, `cancelled` and `exit_mid_frame`. Other
//! stderr lines are prose for humans and may change.
//!
//! Counters (reported by the `stats` tool and by the final stderr report
//! line `stats: {"blocked_write_us":n,"bytes_written":n,"frames":n,...}`
//! printed when stdin reaches EOF, on a fatal stdout error, and by
//! `exit_mid_frame`):
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
//!   `\n`), reports `exit_mid_frame: {"code":c,"written":n,"frame_len":n}`
//!   and the `stats` line, and exits the process with `code`.
//! * `stats`: `structuredContent` (and the text, as JSON) holds
//!   `blocked_write_us`, `bytes_written`, `frames`, `junk_lines`,
//!   `backpressure_events`.
//!
//! # Cancellation
//!
//! `notifications/cancelled` is handled by the stdin reader as soon as it is
//! read; it reports `cancel: {"id":<id>,"in_flight":<bool>}` (`false`: the
//! request is unknown or finished, and the cancellation is ignored). A
//! request cancelled before its first byte is written sends nothing
//! (`cancelled: {"id":<id>,"bytes":0}`). `slow_stream` and `split_writes`
//! cancelled mid-frame finish the frame immediately without further sleeps
//! (a frame cannot be retracted) and report `cancelled: {"id":<id>,"bytes":n}`,
//! where `n` is the number of frame bytes written when the cancellation was
//! noticed; `stream` stops between notifications and sends no response.
//!
//! # Flags and dispatch
//!
//! Parsed by [`Args`] (clap; `--help` lists them). `--on-start <tool>` with
//! `--arg key=value` (value parsed as JSON, else taken as a string) runs a
//! tool at startup as if called with id 0. `--chunk <n>` sets the default
//! write size. `--dispatch ordered|concurrent|inline`:
//! `ordered` (default) keeps reading stdin on the main thread while a single
//! worker answers requests in arrival order; `concurrent` runs each request on
//! its own thread (frames still never interleave, but order follows
//! completion); `inline` handles requests on the reader thread, so stdin is not
//! read while stdout is blocked (the classic stdio deadlock) and cancellation
//! only applies to requests that have not started yet.

mod args;
mod dispatch;
mod protocol;
mod server;
mod tools;

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs::File;
use std::io::{self, BufRead};
use std::process::ExitCode;
use std::sync::Mutex;
use std::thread;
use std::time::Instant;

use serde_json::json;

pub use args::{Args, Mode};
use dispatch::{Dispatcher, Job};
use protocol::{Incoming, RpcError, classify, response};
use server::{Server, Stats, WriteWatch, log, watchdog};

/// Tags of the hostile fixture's report lines (see [`crate::report`]).
pub mod report {
    /// A `write(2)` on stdout blocked for more than 50 ms:
    /// `{"blocked_ms","frame_done","frame_len","bytes_written"}`.
    pub const BACKPRESSURE: &str = "backpressure";
    /// The write counters: `{"blocked_write_us","bytes_written","frames",
    /// "junk_lines","backpressure_events"}`; the last line at stdin EOF.
    pub const STATS: &str = "stats";
    /// A `notifications/cancelled` was read: `{"id","in_flight"}`.
    pub const CANCEL: &str = "cancel";
    /// A cancelled request stopped: `{"id","bytes"}`, the frame bytes
    /// written when the cancellation was noticed.
    pub const CANCELLED: &str = "cancelled";
    /// `exit_mid_frame` is about to exit: `{"code","written","frame_len"}`.
    pub const EXIT_MID_FRAME: &str = "exit_mid_frame";
    /// A response from the client (to `ask_client`'s request): the whole
    /// response object.
    pub const CLIENT_RESPONSE: &str = "client_response";
}

/// Runs the fixture with the process's own arguments.
pub fn main() -> ExitCode {
    main_from(std::env::args_os())
}

/// Runs the fixture with `argv` (the first item is the program name), on
/// the process's stdin, stdout and stderr, until stdin reaches EOF.
/// `--help` prints the usage; a bad argument prints it and returns exit
/// code 2.
pub fn main_from(argv: impl IntoIterator<Item = impl Into<OsString> + Clone>) -> ExitCode {
    crate::parse_args(argv).map_or_else(|code| code, run)
}

/// A second handle on stdout, written without Rust's stdout lock and buffer.
fn dup_stdout() -> io::Result<File> {
    #[cfg(unix)]
    let owned = std::os::fd::AsFd::as_fd(&io::stdout()).try_clone_to_owned()?;
    #[cfg(windows)]
    let owned = std::os::windows::io::AsHandle::as_handle(&io::stdout()).try_clone_to_owned()?;
    Ok(File::from(owned))
}

/// Serves stdio with parsed `args`; see the module documentation.
pub fn run(args: Args) -> ExitCode {
    if args.on_start.is_none() && !args.arg.is_empty() {
        log("warning: --arg given without --on-start; ignored");
    }
    let out = match dup_stdout() {
        Ok(file) => file,
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
        default_chunk: args.chunk.get(),
    }));
    if let Err(e) = thread::Builder::new().name("backpressure-watchdog".into()).spawn(move || watchdog(server)) {
        log(format_args!("cannot start the backpressure watchdog: {e}"));
    }

    let mut dispatcher = Dispatcher::new(args.dispatch, server);
    if let Some(tool) = args.on_start {
        let id = json!(0);
        let cancel = server.register(&id);
        let arguments: serde_json::Map<_, _> = args.arg.into_iter().collect();
        dispatcher.submit(Job::Request {
            id,
            method: "tools/call".into(),
            params: Some(json!({"name": tool, "arguments": arguments})),
            cancel,
        });
    }

    let mut stdin = io::stdin().lock();
    let mut buf = Vec::new();
    loop {
        buf.clear();
        // Unbounded on purpose; see "Memory" in the module documentation.
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
            Incoming::Response(response) => crate::report::emit(report::CLIENT_RESPONSE, &response),
            Incoming::Invalid { id, code, message } => {
                log(format_args!("answering invalid message with {code}: {message}"));
                dispatcher.submit(Job::Reply(response(&id, Err(RpcError { code, message }))));
            }
        }
    }
    drop(stdin);
    log("stdin reached EOF; waiting for in-flight requests");
    dispatcher.finish();
    server.snapshot().report();
    ExitCode::SUCCESS
}
