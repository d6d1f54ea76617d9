//! `lib_server`: an MCP server built on `mcp_framer_stdio::server`, offering the
//! hostile tools the process tests need, so the hostile cases run through the
//! real library (the serve loop, the request table, the writer, capture and
//! budgets). Diagnostics go to stderr as report lines.
//!
//! # Flags
//!
//! Parsed by [`Args`] (clap; `--help` lists them): `--max-concurrent N`
//! (default 16), `--max-queued N` (256), `--grace-ms N` (shutdown grace,
//! 5000), `--max-frame N` (transport limit for stdin and the response limit,
//! 16 MiB), `--control-queue-bytes N` (the reply backlog, 1 MiB). Unset
//! flags keep `ServerConfig`'s defaults.
//!
//! # Report lines
//!
//! What tests read from stderr are report lines ([`crate::report`]; tags in
//! [`report`]): `tool_started` `{"id","tool"}` when a handler starts,
//! `child_spawned` `{"id","pid"}`, `connected` `{"id","addr"}`, and at exit
//! `report` with the serve loop's counters (`mcp_framer_stdio::server::ServeReport`)
//! plus `tools_started`, the ids of every handler that started, in order.
//! Every `tracing` event (the library's own included) is a `trace` report
//! line with the event's fields.
//!
//! # Tools
//!
//! * `echo` (`text`): the text back.
//! * `slow` (`ms` = 30000): waits `ms` milliseconds (cancellable), then
//!   answers `slept`.
//! * `subprocess` (`script` = `sleep 30 & sleep 30; wait`, or `command`,
//!   an array of program and arguments, which takes precedence and needs no
//!   shell): runs `sh -c script` (or `command`) in its own process tree
//!   tied to the request; reports the child
//!   pid on stderr (`child_spawned`) and as a `notifications/progress`
//!   (message `pid N`) when the call has a progress token; answers with the
//!   exit status.
//! * `capture` (`script`, `head` = 1024, `tail` = 1024, `timeout_ms`): runs
//!   `sh -c script` under bounded capture; answers with the summary, the
//!   previews and the exact counts in `structuredContent`.
//! * `slow_read` (`addr`, `max_bytes` = 1 MiB): connects to `addr` over TCP
//!   and reads byte by byte until EOF (an abortable remote operation);
//!   reports `connected`; answers with the byte count.
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
//! * `fail` (`message`): returns an internal error (`RpcError::internal`),
//!   which the library turns into a tool failure (`isError: true`).
//! * `bad_args` (`message`): returns an invalid-params error, which stays a
//!   JSON-RPC error.
//! * `undeclared`: returns `structuredContent` although the tool declares no
//!   `outputSchema` (the library leaves it out).
//!
//! `search`, `preview` and `capture` declare the `outputSchema` of their
//! `structuredContent`.
//!
//! When stdin ends, the final `report` line is printed and the process exits
//! 0; after `SIGTERM` or `SIGINT` (handled by `serve_stdio` like stdin EOF,
//! without waiting for running calls) it exits `128 + signal` after the
//! `report` line.

mod tools;
mod trace;

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use mcp_framer::Config;
use mcp_framer_stdio::Preview;
use mcp_framer_stdio::server::{Budget, ServeReport, Server, ServerConfig, Tool};
use serde_json::{Value, json};

use tools::{
    bad_args, big, capture, echo, fail, leak, log, panics, preview, search, slow, slow_read, subprocess, undeclared,
};

/// Tags of the `lib_server` report lines (see [`crate::report`]).
pub mod report {
    /// A handler started: `{"id","tool"}`.
    pub const TOOL_STARTED: &str = "tool_started";
    /// `subprocess` spawned its child: `{"id","pid"}`.
    pub const CHILD_SPAWNED: &str = "child_spawned";
    /// `slow_read` connected: `{"id","addr"}`.
    pub const CONNECTED: &str = "connected";
    /// The serve loop's final counters, plus `tools_started`; the last line.
    pub const REPORT: &str = "report";
    /// A `tracing` event (the library's and the tools'):
    /// `{"level","target","message",<its fields>...}`, each field a JSON
    /// string, number or boolean (`Debug`-formatted fields as strings).
    pub const TRACE: &str = "trace";
}

/// An MCP server built on `mcp_framer_stdio::server`, for process tests.
#[derive(Debug, Clone, Parser)]
#[command(name = "lib_server")]
pub struct Args {
    /// Requests run at once.
    #[arg(long, value_name = "N")]
    pub max_concurrent: Option<usize>,
    /// Requests queued behind them.
    #[arg(long, value_name = "N")]
    pub max_queued: Option<usize>,
    /// Shutdown grace after stdin EOF, in milliseconds.
    #[arg(long, value_name = "MS")]
    pub grace_ms: Option<u64>,
    /// Transport limit for stdin frames, and the response limit, in bytes.
    #[arg(long, value_name = "BYTES")]
    pub max_frame: Option<usize>,
    /// Bytes reserved for the stdin loop's replies (the reply backlog).
    #[arg(long, value_name = "BYTES")]
    pub control_queue_bytes: Option<usize>,
}

impl Args {
    /// The server configuration these flags ask for.
    pub fn config(&self) -> ServerConfig {
        let mut config = ServerConfig::default();
        if let Some(n) = self.max_concurrent {
            config.max_concurrent = n;
        }
        if let Some(n) = self.max_queued {
            config.max_queued = n;
        }
        if let Some(ms) = self.grace_ms {
            config.shutdown_grace = Duration::from_millis(ms);
        }
        if let Some(n) = self.max_frame {
            config.framer = Config::DEFAULT.with_max_frame(n);
            config.max_send = n;
        }
        if let Some(n) = self.control_queue_bytes {
            config.control_queue_bytes = n;
        }
        config
    }
}

fn object_schema() -> Value {
    json!({"type": "object"})
}

/// The server with every tool, configured by `config`.
pub fn server(config: ServerConfig) -> Server {
    let tool = |name: &str, description: &str| Tool::new(name, description, object_schema());
    Server::new("lib-server", env!("CARGO_PKG_VERSION"))
        .with_config(config)
        .tool(tool("echo", "Echo `text`"), echo)
        .tool(tool("slow", "Wait `ms` milliseconds"), slow)
        .tool(tool("subprocess", "Run `script` in a process group"), subprocess)
        .tool(
            tool("capture", "Run `script` under bounded capture").with_output_schema(tools::capture_schema()),
            capture,
        )
        .tool(tool("slow_read", "Read from `addr` byte by byte"), slow_read)
        .tool(tool("leak", "Leak a child process and a task, then return"), leak)
        .tool(tool("big", "Return `bytes` bytes of text"), big)
        .tool(
            tool("search", "Budgeted listing with cursors")
                .with_output_schema(Budget::output_schema(json!({"type": "object"}))),
            search,
        )
        .tool(tool("preview", "Bounded preview of a body").with_output_schema(Preview::output_schema()), preview)
        .tool(tool("panic", "Panic in the handler"), panics)
        .tool(tool("log", "Log through every channel"), log)
        .tool(tool("fail", "Fail with an internal error"), fail)
        .tool(tool("bad_args", "Refuse the arguments"), bad_args)
        .tool(tool("undeclared", "structuredContent without an outputSchema"), undeclared)
}

/// The fields of the final `report` line.
pub fn report_json(report: &ServeReport) -> Value {
    json!({
        "requests": report.requests,
        "notifications": report.notifications,
        "malformed": report.malformed,
        "oversize": report.oversize,
        "blank_lines": report.blank_lines,
        "unknown_methods": report.unknown_methods,
        "protocol_errors": report.protocol_errors,
        "duplicate_ids": report.duplicate_ids,
        "overloaded": report.overloaded,
        "repeated_initialize": report.repeated_initialize,
        "handler_panics": report.handler_panics,
        "tool_errors": report.tool_errors,
        "oversize_results": report.oversize_results,
        "undeclared_structured": report.undeclared_structured,
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
        "stdin_pauses": report.stdin_pauses,
        "unflushed_frames": report.unflushed_frames,
        "signal": report.signal,
        "frames_in": report.framer.frames,
        "bytes_in": report.framer.bytes_in,
        "error": report.error,
        "tools_started": tools::started_ids(),
    })
}

/// Runs the fixture with the process's own arguments.
pub fn main() -> ExitCode {
    main_from(std::env::args_os())
}

/// Runs the fixture with `argv` (the first item is the program name) on the
/// process's stdio until stdin reaches EOF; exit code 0 after the `report`
/// line, 1 if stdio cannot be taken, 2 for a bad argument.
pub fn main_from(argv: impl IntoIterator<Item = impl Into<OsString> + Clone>) -> ExitCode {
    let args: Args = match crate::parse_args(argv) {
        Ok(args) => args,
        Err(code) => return code,
    };
    {
        use tracing_subscriber::layer::SubscriberExt;
        let subscriber = tracing_subscriber::registry()
            .with(trace::ReportLines)
            .with(tracing_subscriber::filter::LevelFilter::DEBUG);
        if tracing::subscriber::set_global_default(subscriber).is_err() {
            eprintln!("lib_server: a tracing subscriber is already set; trace report lines are off");
        }
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("lib_server: cannot start the runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(server(args.config()).serve_stdio()) {
        Ok(report) => {
            crate::report::emit(report::REPORT, &report_json(&report));
            // Leftover tasks (a leaked handler's) must not delay the exit.
            runtime.shutdown_background();
            match report.signal {
                Some(signal) => ExitCode::from(u8::try_from(128 + signal).unwrap_or(u8::MAX)),
                None => ExitCode::SUCCESS,
            }
        }
        Err(err) => {
            eprintln!("lib_server: cannot take stdio: {err}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_set_the_config_and_unset_ones_keep_the_defaults() {
        let argv =
            ["lib_server", "--max-concurrent", "1", "--max-queued", "3", "--grace-ms", "300", "--max-frame=4096"];
        let config = Args::try_parse_from(argv).unwrap().config();
        assert_eq!((config.max_concurrent, config.max_queued), (1, 3));
        assert_eq!(config.shutdown_grace, Duration::from_millis(300));
        assert_eq!((config.framer.max_frame, config.max_send), (4096, 4096));

        let (defaults, expected) = (Args::try_parse_from(["lib_server"]).unwrap().config(), ServerConfig::default());
        assert_eq!((defaults.max_concurrent, defaults.max_queued), (expected.max_concurrent, expected.max_queued));
        assert_eq!(defaults.shutdown_grace, expected.shutdown_grace);
        assert!(Args::try_parse_from(["lib_server", "--max-queued", "many"]).is_err());
        assert!(Args::try_parse_from(["lib_server", "--no-such-flag", "1"]).is_err());
    }
}
