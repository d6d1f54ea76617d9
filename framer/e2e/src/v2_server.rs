//! `v2_server`: the [`lib_server`] tools (the same
//! [`Server`]) behind the experimental
//! `stdio-v2` front (`mcp_framer_stdio_v2::server`), for the process tests
//! of `stdio-v2`.
//!
//! # Flags
//!
//! Every `lib_server` flag (`--max-frame`, `--grace-ms`, ...), and:
//! `--stall-ms N` (the front's stall timeout, default 30000),
//! `--stream-backlog BYTES` (progress that may wait for one stream's
//! window, default 1 MiB) and
//! `--writer-queue-bytes BYTES` (the dispatcher's `writer_queue_bytes`:
//! bytes of results that may wait to be written, default 16 MiB) and
//! `--raw-stdio` (serve tokio's stdin and stdout as they are, WITHOUT the
//! stdio take-over: a tool that prints to stdout then corrupts the HTTP/2
//! stream; only for the test that shows it),
//! `--any` (dual mode: serve newline `stdio` or `stdio-v2`, whichever the
//! client's first bytes speak),
//! `--max-streams N` and `--max-header-list BYTES` (the front's
//! `max_concurrent_streams` and `max_header_list_size`).
//!
//! # Tools (beside `lib_server`'s)
//!
//! * `ticks` (`count` = 10, `ms` = 10): sends `count` progress
//!   notifications `ms` apart (when the call has a progress token), then
//!   answers `ticked N`, or with `bytes` (if given) `bytes` bytes of `y`;
//!   before answering it writes the report line [`TICKS_DONE`].
//! * `changed`: sends `notifications/tools/list_changed` (a notification
//!   that belongs to no request) and answers `sent`.
//! * `noise` (`bytes` = 1 MiB): writes `bytes` bytes of text to stderr,
//!   then answers `noisy`.
//! * `blocks` (`count` = 20000): answers with `count` text blocks
//!   (`block 0`, `block 1`, ...).
//!
//! # Report lines
//!
//! `lib_server`'s, and at the end `report` with the dispatcher's counters
//! (the fields of `lib_server`'s report) plus the front's under `"v2"`.
//! A selection mismatch is one line on stderr, `v2_server: <error>`, and
//! exit status 1.

use std::ffi::OsString;
use std::io::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use mcp_framer_stdio::server::{Call, RpcError, Server, Tool, ToolResult};
use mcp_framer_stdio_v2::server::{Served, V2Config, V2Report};
use serde_json::{Value, json};

use crate::lib_server;

/// The `stdio-v2` fixture's flags.
#[derive(Debug, Clone, Parser)]
#[command(name = "v2_server")]
pub struct V2Args {
    /// The `lib_server` flags.
    #[command(flatten)]
    pub server: lib_server::Args,
    /// The front's stall timeout, in milliseconds.
    #[arg(long, value_name = "MS")]
    pub stall_ms: Option<u64>,
    /// Bytes of progress that may wait for one stream's window.
    #[arg(long, value_name = "BYTES")]
    pub stream_backlog: Option<usize>,
    /// Bytes of results that may wait to be written
    /// (`ServerConfig::writer_queue_bytes`).
    #[arg(long, value_name = "BYTES")]
    pub writer_queue_bytes: Option<usize>,
    /// Serve tokio's stdin and stdout without taking them over (no fd
    /// redirection): a stray `println!` then reaches the HTTP/2 stream.
    #[arg(long)]
    pub raw_stdio: bool,
    /// Serve either transport, chosen from the client's first bytes.
    #[arg(long)]
    pub any: bool,
    /// The streams a client may open at once.
    #[arg(long, value_name = "N")]
    pub max_streams: Option<u32>,
    /// The largest header list accepted, in bytes.
    #[arg(long, value_name = "BYTES")]
    pub max_header_list: Option<u32>,
}

/// The report line `ticks` writes once it has sent its progress:
/// `{"id","count"}`.
pub const TICKS_DONE: &str = "ticks_done";

async fn ticks(call: Call) -> Result<ToolResult, RpcError> {
    let args: Value = call.args()?;
    let count = args.get("count").and_then(Value::as_u64).unwrap_or(10);
    let ms = args.get("ms").and_then(Value::as_u64).unwrap_or(10);
    for i in 0..count {
        call.progress(i as f64, Some(count as f64), Some("tick")).await;
        call.abortable(tokio::time::sleep(Duration::from_millis(ms))).await?;
    }
    crate::report::emit(TICKS_DONE, &json!({"id": call.id(), "count": count}));
    match args.get("bytes").and_then(Value::as_u64) {
        Some(bytes) => Ok(ToolResult::text("y".repeat(bytes as usize))),
        None => Ok(ToolResult::text(format!("ticked {count}"))),
    }
}

async fn changed(call: Call) -> Result<ToolResult, RpcError> {
    call.notify("notifications/tools/list_changed", json!({})).await;
    Ok(ToolResult::text("sent"))
}

async fn blocks(call: Call) -> Result<ToolResult, RpcError> {
    let args: Value = call.args()?;
    let count = args.get("count").and_then(Value::as_u64).unwrap_or(20_000);
    let content = (0..count).map(|i| json!({"type": "text", "text": format!("block {i}")})).collect();
    Ok(ToolResult { content, ..ToolResult::default() })
}

async fn noise(call: Call) -> Result<ToolResult, RpcError> {
    let args: Value = call.args()?;
    let bytes = args.get("bytes").and_then(Value::as_u64).unwrap_or(1 << 20) as usize;
    let line = "noise on stderr: the host drains it into a bounded tail\n".repeat(64);
    let mut left = bytes;
    let mut stderr = std::io::stderr().lock();
    while left > 0 {
        let n = left.min(line.len());
        let _ = stderr.write_all(&line.as_bytes()[..n]);
        left -= n;
    }
    Ok(ToolResult::text("noisy"))
}

/// The `lib_server` server with this fixture's tools added.
pub fn server(args: &V2Args) -> Server {
    let tool = |name: &str, description: &str| Tool::new(name, description, json!({"type": "object"}));
    let mut config = args.server.config();
    if let Some(bytes) = args.writer_queue_bytes {
        config.writer_queue_bytes = bytes;
    }
    lib_server::server(config)
        .tool(tool("ticks", "Send `count` progress notifications, then answer"), ticks)
        .tool(tool("changed", "Send notifications/tools/list_changed"), changed)
        .tool(tool("noise", "Write `bytes` bytes to stderr"), noise)
        .tool(tool("blocks", "Answer with `count` text blocks"), blocks)
}

/// The front's fields of the final `report` line.
pub fn v2_json(report: &V2Report) -> Value {
    json!({
        "streams": report.streams,
        "requests": report.requests,
        "notifications": report.notifications,
        "listeners": report.listeners,
        "bad_routes": report.bad_routes,
        "oversize_bodies": report.oversize_bodies,
        "oversize_bytes": report.oversize_bytes,
        "busy_bodies": report.busy_bodies,
        "busy_bytes": report.busy_bytes,
        "malformed_bodies": report.malformed_bodies,
        "header_mismatches": report.header_mismatches,
        "duplicate_ids": report.duplicate_ids,
        "resets": report.resets,
        "late_responses": report.late_responses,
        "notifications_dropped": report.notifications_dropped,
        "progress_dropped": report.progress_dropped,
        "listener_drops": report.listener_drops,
        "listeners_refused": report.listeners_refused,
        "stalled_streams": report.stalled_streams,
        "responses_unsent": report.responses_unsent,
        "stalled": report.stalled,
        "connection_error": report.connection_error,
    })
}

/// Runs the fixture with the process's own arguments.
pub fn main() -> ExitCode {
    main_from(std::env::args_os())
}

/// Runs the fixture with `argv` until the client ends the connection: exit
/// 0 after the `report` line (`128 + signal` after a signal), 1 on a
/// selection mismatch or when stdio cannot be taken, 2 for a bad argument.
pub fn main_from(argv: impl IntoIterator<Item = impl Into<OsString> + Clone>) -> ExitCode {
    let args: V2Args = match crate::parse_args(argv) {
        Ok(args) => args,
        Err(code) => return code,
    };
    let mut config = V2Config::default();
    if let Some(ms) = args.stall_ms {
        config = config.with_stall_timeout(Duration::from_millis(ms));
    }
    if let Some(bytes) = args.stream_backlog {
        config = config.with_stream_backlog(bytes);
    }
    if let Some(streams) = args.max_streams {
        config = config.with_max_concurrent_streams(streams);
    }
    if let Some(bytes) = args.max_header_list {
        config = config.with_max_header_list_size(bytes);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("v2_server: cannot start the runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let server = server(&args);
    let served = runtime.block_on(async move {
        if args.any {
            mcp_framer_stdio_v2::server::serve_any_stdio(server, config).await
        } else if args.raw_stdio {
            mcp_framer_stdio_v2::server::serve(server, tokio::io::stdin(), tokio::io::stdout(), config)
                .await
                .map(Served::V2)
        } else {
            mcp_framer_stdio_v2::server::serve_stdio(server, config).await.map(Served::V2)
        }
    });
    let code = match served {
        Ok(Served::Newline(report)) => {
            crate::report::emit(lib_server::report::REPORT, &lib_server::report_json(&report));
            match report.signal {
                Some(signal) => ExitCode::from(u8::try_from(128 + signal).unwrap_or(u8::MAX)),
                None => ExitCode::SUCCESS,
            }
        }
        Ok(Served::V2(report)) => {
            let mut fields = lib_server::report_json(&report.serve);
            fields["v2"] = v2_json(&report);
            crate::report::emit(lib_server::report::REPORT, &fields);
            match report.serve.signal {
                Some(signal) => ExitCode::from(u8::try_from(128 + signal).unwrap_or(u8::MAX)),
                None => ExitCode::SUCCESS,
            }
        }
        Err(err) => {
            eprintln!("v2_server: {err}");
            ExitCode::FAILURE
        }
    };
    runtime.shutdown_background();
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse_with_the_lib_server_ones() {
        let args =
            V2Args::try_parse_from(["v2_server", "--max-frame", "4096", "--stall-ms", "500", "--raw-stdio"]).unwrap();
        assert_eq!(args.server.config().framer.max_frame, 4096);
        assert_eq!((args.stall_ms, args.raw_stdio), (Some(500), true));
        assert!(V2Args::try_parse_from(["v2_server", "--stall-ms", "soon"]).is_err());
    }
}
