//! `mcp-probe`: check any MCP stdio server against the transport's release
//! criteria, from the command line.
//!
//! ```sh
//! mcp-probe -- node my-server.js          # human report, exit 1 if any check FAILs
//! mcp-probe --json report.json --large 'dump {"bytes":4000000}' --slow 'count {"seconds":10}' -- python server.py
//! ```
//!
//! Nine checks, each run against a fresh server process (in its own process
//! group, killed at the end): stdout hygiene, handshake, bad input, incoming
//! size limit, framing, response limits, backpressure, cancellation and
//! shutdown. Each gives a [`Verdict`], the evidence and one
//! line on why it matters; see the README for the criteria.
//!
//! The checks that speak well-formed JSON-RPC drive the server through the
//! host transport's [`Session`](mcp_framer_stdio::host::Session); the ones
//! that must write arbitrary bytes or stop reading stdout use a small raw
//! pipe layer ([`raw`]) built on the same core framer and parser.
//!
//! The library exposes [`run`] and the report types so tools can embed the
//! probe; the binary is a thin wrapper around [`main`].

#![forbid(unsafe_code)]

pub mod args;
pub mod checks;
pub mod progress;
pub mod raw;
pub mod report;
pub mod target;

use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;

pub use args::Args;
pub use report::{Report, Verdict};

/// Formats a duration for evidence: `850 ms`, `2.00 s`.
pub fn fmt_duration(d: Duration) -> String {
    if d < Duration::from_secs(1) { format!("{} ms", d.as_millis()) } else { format!("{:.2} s", d.as_secs_f64()) }
}

/// Why the probe could not produce a report.
#[derive(Debug)]
pub enum ProbeError {
    /// The server could not be started at all.
    Spawn(std::io::Error),
}

impl std::fmt::Display for ProbeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProbeError::Spawn(e) => write!(f, "the server could not be started: {e}"),
        }
    }
}

impl std::error::Error for ProbeError {}

/// Runs the selected checks against the server and returns the report.
/// Every server process group it started is killed before it returns.
pub async fn run(args: Args) -> Result<Report, ProbeError> {
    let started = Instant::now();
    let started_at = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let target = target::Target::new(args);
    // Start it once to tell "cannot start" (exit 2) from a failing check.
    match raw::RawConn::spawn(&target) {
        Ok(conn) => drop(conn),
        Err(e) => {
            target.kill_all().await;
            return Err(ProbeError::Spawn(e));
        }
    }
    let checks = checks::run_all(&target).await;
    let leftover_processes = target.kill_all().await;
    let server_info = target.server_info.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let mut report = Report {
        schema: report::SCHEMA,
        version: report::SCHEMA_VERSION,
        probe_version: env!("CARGO_PKG_VERSION"),
        server: target.args.command.clone(),
        server_info,
        started_at,
        duration_ms: started.elapsed().as_millis() as u64,
        checks,
        leftover_processes,
        summary: Default::default(),
    };
    report.summarize();
    Ok(report)
}

/// The command-line entry point: parses the arguments, runs the probe,
/// prints the report, writes the JSON file. Exit status 0 (no FAIL), 1 (a
/// FAIL) or 2 (usage error, server not startable, report not writable).
pub fn main() -> ExitCode {
    let args = Args::parse();
    let json = args.json.clone();
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("mcp-probe: could not start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let report = match runtime.block_on(run(args)) {
        Ok(report) => report,
        Err(e) => {
            eprintln!("mcp-probe: {e}");
            return ExitCode::from(2);
        }
    };
    // Tasks still blocked on a dead server's pipes are not waited for.
    runtime.shutdown_timeout(Duration::from_millis(100));
    print!("{}", report.to_text());
    if let Some(path) = json {
        let text = serde_json::to_string_pretty(&report.to_json()).unwrap_or_default();
        if let Err(e) = std::fs::write(&path, text + "\n") {
            eprintln!("mcp-probe: could not write {}: {e}", path.display());
            return ExitCode::from(2);
        }
    }
    ExitCode::from(report.summary.exit_code as u8)
}
