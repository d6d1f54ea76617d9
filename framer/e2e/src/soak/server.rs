//! `soak_server`: the server library with the six tools of the soak and
//! nothing else, on either transport (`--transport newline|stdio-v2`).
//!
//! Unlike `lib_server`, its tools keep nothing per call (no list of started
//! ids, no report line per call), so its memory over minutes is the
//! library's.
//!
//! # Tools
//!
//! `echo` (`text`), `big` (`bytes`: that many `x`), `slow` (`ms`,
//! cancellable), `fail` (a tool failure, `isError: true`), `bad_args`
//! (-32602), `panic` (the handler panics).
//!
//! # Flags
//!
//! `--transport newline|stdio-v2` (default `newline`), `--max-frame BYTES`
//! (the transport limit in and out, default 16 MiB), `--max-concurrent N`,
//! `--max-queued N`, `--worker-threads N` (the runtime's; default: one per
//! core), `--stderr-flood KIB` (write that many KiB per second of text to
//! stderr for the whole run, in 16 chunks: the host must drain it; default
//! 0).
//!
//! # Report
//!
//! At the end (stdin closed or the connection ended) the flood stops, and
//! one report line `report: {...}` goes to stderr: the serve loop's
//! counters (`lib_server`'s report fields), plus, on stdio-v2, the front's
//! under `"v2"`. Exit 0 (`128 + signal` after a signal), 1 when stdio
//! cannot be taken, 2 for a bad argument.

use std::ffi::OsString;
use std::io::Write as _;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clap::Parser;
use mcp_framer::Config;
use mcp_framer_stdio::server::{Call, RpcError, Server, ServerConfig, Tool, ToolResult};
use serde_json::{Value, json};

use crate::{lib_server, v2_server};

/// The soak server's flags.
#[derive(Debug, Clone, Parser)]
#[command(name = "soak_server")]
pub struct ServerArgs {
    /// `newline` or `stdio-v2`.
    #[arg(long, default_value = "newline")]
    pub transport: String,
    /// The transport limit of what is read and written, in bytes.
    #[arg(long, value_name = "BYTES")]
    pub max_frame: Option<usize>,
    /// Requests run at once.
    #[arg(long, value_name = "N")]
    pub max_concurrent: Option<usize>,
    /// Requests queued behind them.
    #[arg(long, value_name = "N")]
    pub max_queued: Option<usize>,
    /// The runtime's worker threads (default: one per core).
    #[arg(long, value_name = "N")]
    pub worker_threads: Option<usize>,
    /// KiB per second written to stderr for the whole run.
    #[arg(long, value_name = "KIB", default_value_t = 0)]
    pub stderr_flood: u64,
}

fn arg_u64(call: &Call, key: &str, default: u64) -> Result<u64, RpcError> {
    let args: Value = call.args()?;
    Ok(args.get(key).and_then(Value::as_u64).unwrap_or(default))
}

async fn echo(call: Call) -> Result<ToolResult, RpcError> {
    #[derive(serde::Deserialize)]
    struct Args {
        text: String,
    }
    let args: Args = call.args()?;
    Ok(ToolResult::text(args.text))
}

async fn big(call: Call) -> Result<ToolResult, RpcError> {
    Ok(ToolResult::text("x".repeat(arg_u64(&call, "bytes", 1 << 20)? as usize)))
}

async fn slow(call: Call) -> Result<ToolResult, RpcError> {
    let ms = arg_u64(&call, "ms", 1000)?;
    call.abortable(tokio::time::sleep(Duration::from_millis(ms))).await?;
    Ok(ToolResult::text("slept"))
}

async fn fail(_call: Call) -> Result<ToolResult, RpcError> {
    Err(RpcError::internal("failed on purpose"))
}

async fn bad_args(_call: Call) -> Result<ToolResult, RpcError> {
    Err(RpcError::invalid_params("arguments refused on purpose"))
}

async fn panics(_call: Call) -> Result<ToolResult, RpcError> {
    panic!("handler panic on purpose");
}

/// The six tools, configured by `config`.
pub fn server(config: ServerConfig) -> Server {
    let tool = |name: &str, description: &str| Tool::new(name, description, json!({"type": "object"}));
    Server::new("soak-server", env!("CARGO_PKG_VERSION"))
        .with_config(config)
        .tool(tool("echo", "Echo `text`"), echo)
        .tool(tool("big", "Return `bytes` bytes of text"), big)
        .tool(tool("slow", "Wait `ms` milliseconds"), slow)
        .tool(tool("fail", "Fail (isError)"), fail)
        .tool(tool("bad_args", "Refuse the arguments (-32602)"), bad_args)
        .tool(tool("panic", "Panic in the handler"), panics)
}

impl ServerArgs {
    /// The server configuration these flags ask for.
    pub fn config(&self) -> ServerConfig {
        let mut config = ServerConfig::default();
        if let Some(n) = self.max_frame {
            config.framer = Config::DEFAULT.with_max_frame(n);
            config.max_send = n;
        }
        if let Some(n) = self.max_concurrent {
            config.max_concurrent = n;
        }
        if let Some(n) = self.max_queued {
            config.max_queued = n;
        }
        config
    }
}

/// Writes `kib_per_s` KiB per second to stderr until `stop` is set.
fn flood(kib_per_s: u64, stop: Arc<AtomicBool>) {
    let chunk = "stderr flood: the host drains this into a bounded tail, whatever its rate\n"
        .repeat(1 + (kib_per_s as usize * 1024 / 16) / 75);
    let chunk = &chunk.as_bytes()[..(kib_per_s as usize * 1024 / 16).min(chunk.len())];
    while !stop.load(Ordering::Relaxed) {
        let _ = std::io::stderr().lock().write_all(chunk);
        std::thread::sleep(Duration::from_millis(1000 / 16));
    }
}

/// Runs the soak server with the process's own arguments.
pub fn main() -> ExitCode {
    main_from(std::env::args_os())
}

/// Runs the soak server with `argv` (the first item is the program name).
pub fn main_from(argv: impl IntoIterator<Item = impl Into<OsString> + Clone>) -> ExitCode {
    let args: ServerArgs = match crate::parse_args(argv) {
        Ok(args) => args,
        Err(code) => return code,
    };
    let v2 = match args.transport.as_str() {
        "newline" => false,
        "stdio-v2" => true,
        other => {
            eprintln!("soak_server: --transport is newline or stdio-v2, not {other:?}");
            return ExitCode::from(2);
        }
    };
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = args.worker_threads {
        builder.worker_threads(n.max(1));
    }
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("soak_server: cannot start the runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    let flooder = (args.stderr_flood > 0).then(|| {
        let stop = Arc::clone(&stop);
        let rate = args.stderr_flood;
        std::thread::spawn(move || flood(rate, stop))
    });
    let server = server(args.config());
    let served = runtime.block_on(async move {
        if v2 {
            let config = mcp_framer_stdio_v2::server::V2Config::default();
            mcp_framer_stdio_v2::server::serve_stdio(server, config).await.map(|report| {
                let mut fields = lib_server::report_json(&report.serve);
                fields["v2"] = v2_server::v2_json(&report);
                (fields, report.serve.signal)
            })
        } else {
            server.serve_stdio().await.map(|report| (lib_server::report_json(&report), report.signal))
        }
    });
    stop.store(true, Ordering::Relaxed);
    if let Some(flooder) = flooder {
        let _ = flooder.join();
    }
    runtime.shutdown_background();
    match served {
        Ok((mut fields, signal)) => {
            // The soak server keeps no list of started calls.
            if let Some(map) = fields.as_object_mut() {
                map.remove("tools_started");
            }
            crate::report::emit(lib_server::report::REPORT, &fields);
            match signal {
                Some(signal) => ExitCode::from(u8::try_from(128 + signal).unwrap_or(u8::MAX)),
                None => ExitCode::SUCCESS,
            }
        }
        Err(err) => {
            eprintln!("soak_server: {err}");
            ExitCode::FAILURE
        }
    }
}
