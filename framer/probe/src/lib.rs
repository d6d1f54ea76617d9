//! `mcp-probe`: check any MCP stdio server against the transport's release
//! criteria, from the command line or as a library.
//!
//! ```sh
//! mcp-probe -- node my-server.js          # human report, exit 1 if any check FAILs
//! mcp-probe --list-tools -- python server.py
//! mcp-probe --fail-on warn --json report.json --large 'dump {"bytes":4000000}' --slow 'count {"seconds":10}' -- python server.py
//! ```
//!
//! The checks of [`CheckId::ALL`], each run against a fresh server process
//! (the root of a process tree of its own, killed at the end: a process
//! group on unix, a Job Object on Windows): stdout hygiene, handshake, bad
//! input, incoming size limit, framing, response limits, backpressure,
//! cancellation, shutdown, the last frame at exit and stderr volume. Each gives a [`Verdict`], the evidence and one line on why it
//! matters; see the README for the criteria. The era is found once, as the
//! 2026-07-28 revision says: `server/discover` first, `initialize` on any
//! error or timeout.
//!
//! `--transport stdio-v2` (**experimental**, [`Transport::StdioV2`]) probes
//! a server speaking HTTP/2 on its stdin and stdout instead, over the
//! `mcp-framer-stdio-v2` host client, with the checks of
//! [`CheckId::STDIO_V2`]; see the README.
//!
//! The library's surface: [`run`] with [`Options`] (and their [`Limits`]),
//! the [`Report`] with its [`Verdict`]s, [`list_tools`], and [`ProbeError`];
//! [`Cli`] is the command line the `mcp-probe` binary parses into
//! [`Options`].
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
mod duration;
mod error;
mod growth;
mod hints;
mod junit;
mod options;
mod processes;
mod progress;
mod raw;
mod report;
mod soak;
pub mod stats;
mod suite;
mod target;
mod tools;
mod v2;

use std::time::{Instant, SystemTime, UNIX_EPOCH};

pub use check_id::CheckId;
pub use cli::Cli;
pub use error::ProbeError;
pub use options::{FailOn, Limits, Options, Soak, ToolSpec, Transport};
pub use processes::Leftover;
pub use report::{CheckResult, Hint, Opening, Report, SCHEMA, SCHEMA_VERSION, Summary, Verdict};
pub use tools::{ToolInfo, ToolList};

/// Runs the selected checks against the server and returns the report.
/// Every server process tree it started is killed before it returns.
///
/// The server is started once first: to tell "cannot start" from a failing
/// check, to find its era, and to check `--large` and `--slow` against its
/// `tools/list` (a tool it does not list is an error, not a run of WARNs).
pub async fn run(options: Options) -> Result<Report, ProbeError> {
    let started = Instant::now();
    let started_at = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let target = target::Target::new(options);
    let mut checks = match target.options.transport {
        Transport::Stdio => {
            if let Err(e) = tools::open_and_list(&target).await {
                target.kill_all().await;
                return Err(e);
            }
            target.kill_trees();
            checks::run_all(&target).await
        }
        Transport::StdioV2 => match v2::run_all(&target).await {
            Ok(checks) => checks,
            Err(e) => {
                target.kill_all().await;
                return Err(e);
            }
        },
    };
    checks.extend(soak::check(&target, &checks).await);
    let leftover_processes = target.kill_all().await;
    let server_info = target.server_info.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let mut report = Report {
        schema: report::SCHEMA,
        version: report::SCHEMA_VERSION,
        probe_version: env!("CARGO_PKG_VERSION"),
        transport: target.options.transport.as_str(),
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
    let listed = match target.options.transport {
        Transport::Stdio => tools::list(&target).await,
        Transport::StdioV2 => v2::list(&target).await,
    };
    target.kill_all().await;
    listed
}
