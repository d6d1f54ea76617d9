//! `mcp-probe`: check any MCP stdio server against the transport's release
//! criteria, from the command line or as a library.
//!
//! ```sh
//! mcp-probe -- node my-server.js          # human report, exit 1 if any check FAILs
//! mcp-probe --list-tools -- python server.py
//! mcp-probe --fail-on warn --json report.json --large 'dump {"bytes":4000000}' --slow 'count {"seconds":10}' -- python server.py
//! ```
//!
//! Nine checks, each run against a fresh server process (in its own process
//! group, killed at the end): stdout hygiene, handshake, bad input, incoming
//! size limit, framing, response limits, backpressure, cancellation and
//! shutdown. Each gives a [`Verdict`], the evidence and one line on why it
//! matters; see the README for the criteria. The era is found once, as the
//! 2026-07-28 revision says: `server/discover` first, `initialize` on any
//! error or timeout.
//!
//! The library's surface: [`run`] with [`Options`] (and their [`Limits`]),
//! the [`Report`] with its [`Verdict`]s, [`list_tools`], and [`ProbeError`].
//!
//! ```no_run
//! # async fn demo() -> Result<(), mcp_probe::ProbeError> {
//! let mut options = mcp_probe::Options::new(vec!["python".into(), "server.py".into()]);
//! options.limits.step_timeout = std::time::Duration::from_secs(5);
//! let report = mcp_probe::run(options).await?;
//! assert!(report.summary.exit_code == 0 || report.summary.fail + report.summary.warn > 0);
//! # Ok(())
//! # }
//! ```

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod check_id;
mod checks;
mod cli;
mod error;
mod hints;
mod options;
mod progress;
mod raw;
mod report;
mod target;
mod tools;

use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;

pub use check_id::CheckId;
pub use error::ProbeError;
pub use options::{FailOn, Limits, Options, ToolSpec};
pub use report::{CheckResult, Hint, Leftover, Opening, Report, SCHEMA, SCHEMA_VERSION, Summary, Verdict};
pub use tools::{ToolInfo, ToolList};

/// Runs the selected checks against the server and returns the report.
/// Every server process group it started is killed before it returns.
///
/// The server is started once first: to tell "cannot start" from a failing
/// check, to find its era, and to check `--large` and `--slow` against its
/// `tools/list` (a tool it does not list is an error, not a run of WARNs).
pub async fn run(options: Options) -> Result<Report, ProbeError> {
    let started = Instant::now();
    let started_at = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let target = target::Target::new(options);
    if let Err(e) = tools::open_and_list(&target).await {
        target.kill_all().await;
        return Err(e);
    }
    target.kill_groups();
    let checks = checks::run_all(&target).await;
    let leftover_processes = target.kill_all().await;
    let server_info = target.server_info.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let mut report = Report {
        schema: report::SCHEMA,
        version: report::SCHEMA_VERSION,
        probe_version: env!("CARGO_PKG_VERSION"),
        server: target.options.command.clone(),
        server_info,
        opening: target.opened().map(|o| Opening {
            era: o.era.as_str(),
            protocol_version: o.version,
            offered_versions: o.offered,
            fallback: o.fallback,
        }),
        fail_on: target.options.fail_on.as_str(),
        started_at,
        duration_ms: started.elapsed().as_millis() as u64,
        checks,
        hints: Vec::new(),
        leftover_processes,
        summary: Default::default(),
    };
    hints::apply(&mut report);
    report.summarize(target.options.fail_on);
    Ok(report)
}

/// Starts the server once, opens a session (either era) and lists its tools
/// with their input schemas and a hint about which suit `--large` and
/// `--slow`.
pub async fn list_tools(options: Options) -> Result<ToolList, ProbeError> {
    let target = target::Target::new(options);
    let listed = tools::list(&target).await;
    target.kill_all().await;
    listed
}

/// The command-line entry point: parses the arguments, runs the probe,
/// prints the report, writes the JSON file. Exit status 0 (nothing at or
/// over `--fail-on`), 1 (something is) or 2 (usage error, unknown tool,
/// server not startable, report not writable).
pub fn main() -> ExitCode {
    let args = cli::Args::parse();
    let json = args.json.clone();
    let list = args.list_tools;
    let options = args.into_options();
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("mcp-probe: could not start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    if list {
        let listed = runtime.block_on(list_tools(options));
        runtime.shutdown_timeout(Duration::from_millis(100));
        return match listed {
            Ok(list) => {
                print!("{}", list.to_text());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("mcp-probe: {e}");
                ExitCode::from(2)
            }
        };
    }
    let report = match runtime.block_on(run(options)) {
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
