//! `mcp-probe`: see the crate's README. Parses the command line, runs the
//! probe, prints the report and writes the JSON file. Exit status 0
//! (nothing at or over `--fail-on`), 1 (something is) or 2 (usage error,
//! unknown tool, server not startable, report (`--json`, `--junit`) not
//! writable).

use std::process::ExitCode;
use std::time::Duration;

use mcp_probe::Cli;

/// The entry point (public so that a test crate can build the same binary
/// from this file).
pub fn main() -> ExitCode {
    let cli = Cli::from_env();
    let json = cli.json().map(ToOwned::to_owned);
    let junit = cli.junit().map(ToOwned::to_owned);
    let list = cli.list_tools();
    let options = cli.into_options();
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("mcp-probe: could not start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    if list {
        let listed = runtime.block_on(mcp_probe::list_tools(options));
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
    let report = match runtime.block_on(mcp_probe::run(options)) {
        Ok(report) => report,
        Err(e) => {
            eprintln!("mcp-probe: {e}");
            return ExitCode::from(2);
        }
    };
    // Tasks still blocked on a dead server's pipes are not waited for.
    runtime.shutdown_timeout(Duration::from_millis(100));
    print!("{}", report.to_text());
    let json = json.map(|path| (path, serde_json::to_string_pretty(&report.to_json()).unwrap_or_default() + "\n"));
    let junit = junit.map(|path| (path, report.to_junit()));
    for (path, text) in json.into_iter().chain(junit) {
        if let Err(e) = std::fs::write(&path, text) {
            eprintln!("mcp-probe: could not write {}: {e}", path.display());
            return ExitCode::from(2);
        }
    }
    ExitCode::from(report.summary.exit_code as u8)
}
