//! The command line: every limit and every time is a flag with a default;
//! [`Cli::into_options`] turns it into the library's [`Options`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{FromArgMatches, Parser};

use crate::check_id::CheckId;
use crate::options::{FailOn, Limits, Options, Soak, ToolSpec, Transport, parse_duration, parse_size, parse_tool};

/// The text after `--help`: the checks, by number and name, then the
/// units and an example.
fn after_help() -> String {
    let newline: Vec<String> = CheckId::ALL.iter().map(|c| format!("{} {}", c.number(), c.name())).collect();
    let v2: Vec<&str> = CheckId::STDIO_V2.iter().map(|c| c.name()).collect();
    format!(
        "Checks: {}.\nWith --transport stdio-v2 (select by name): {}.\n\
         With --soak DURATION, after them: {} soak (minutes of mixed traffic; --only soak for it alone).\n\
         Durations: 500ms, 2s, 1.5 (seconds). Sizes: 4096, 64KiB, 16MiB.\n\
         Example: mcp-probe --large 'dump {{\"bytes\":4000000}}' --slow 'count {{\"seconds\":10}}' -- python server.py",
        newline.join(", "),
        v2.join(", "),
        CheckId::Soak.number()
    )
}

/// Check an MCP stdio server against the transport's release criteria.
///
/// Runs the server (everything after `--`) once per check, sends it the
/// inputs that wedge careless servers, and reports PASS / WARN / FAIL / SKIP
/// per check with the evidence. Exit status: 0 when no check FAILs (with
/// `--fail-on warn`: none WARNs either), 1 when one does, 2 on a usage error
/// (a `--large`/`--slow` tool the server does not list included) or a server
/// that could not be started.
#[derive(Clone, Debug, Parser)]
#[command(name = "mcp-probe", version, about, long_about = None)]
pub struct Cli {
    /// List the server's tools with their input schemas (and which look
    /// suitable for --large and --slow), then exit.
    #[arg(long)]
    pub(crate) list_tools: bool,
    /// What makes the exit status 1: a FAIL (default), or a WARN too.
    #[arg(long, default_value = "fail", value_name = "fail|warn")]
    pub(crate) fail_on: FailOn,
    /// The protocol era: `auto` probes with `server/discover` and falls back
    /// to `initialize`; `modern` and `legacy` use that era only.
    #[arg(long, default_value = "auto", value_parser = parse_era, value_name = "auto|modern|legacy")]
    pub(crate) era: EraArg,
    /// The transport: `stdio` (newline-delimited JSON-RPC) or the
    /// experimental `stdio-v2` (HTTP/2 with prior knowledge on stdin and stdout).
    #[arg(long, default_value = "stdio", value_name = "stdio|stdio-v2")]
    pub(crate) transport: Transport,
    /// Write the report as JSON (schema `mcp-probe-report`, version 5) to FILE.
    #[arg(long, value_name = "FILE")]
    pub(crate) json: Option<PathBuf>,
    /// Write the report as JUnit XML to FILE: one test case per check (a
    /// FAIL, or with --fail-on warn a WARN, is a failure; a SKIP skipped).
    #[arg(long, value_name = "FILE")]
    pub(crate) junit: Option<PathBuf>,
    /// Run only these checks (names or numbers, comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "CHECKS")]
    pub(crate) only: Vec<CheckId>,
    /// Skip these checks (names or numbers, comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "CHECKS")]
    pub(crate) skip: Vec<CheckId>,
    /// A tool whose result is large (checks 6, 7, 10 and 11): its name, then its JSON arguments.
    #[arg(long, value_name = "'NAME {ARGS}'", value_parser = parse_tool)]
    pub(crate) large: Option<ToolSpec>,
    /// A tool that runs for a while, ideally sending progress (checks 8 and 9): its name, then its JSON arguments.
    #[arg(long, value_name = "'NAME {ARGS}'", value_parser = parse_tool)]
    pub(crate) slow: Option<ToolSpec>,
    /// A tool that writes to its stderr (the stderr check): its name, then its JSON arguments.
    #[arg(long, value_name = "'NAME {ARGS}'", value_parser = parse_tool)]
    pub(crate) noisy: Option<ToolSpec>,
    /// The protocol version offered in `initialize` (legacy era).
    #[arg(long, default_value = mcp_framer_jsonrpc::protocol::NEWEST_LEGACY)]
    pub(crate) protocol_version: String,
    /// How long `initialize` may take to be answered.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub(crate) init_timeout: Duration,
    /// How long any other request may take to be answered (tool calls included).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub(crate) step_timeout: Duration,
    /// How long a `ping` may take after an incident before the server counts as deaf.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub(crate) ping_timeout: Duration,
    /// How long to wait for the reply to each bad input (check 3).
    #[arg(long, default_value = "500ms", value_parser = parse_duration)]
    pub(crate) reply_wait: Duration,
    /// Most pages of `tools/list` followed (check 2).
    #[arg(long, default_value_t = 100)]
    pub(crate) max_pages: u32,
    /// Smallest padded request (check 4).
    #[arg(long, default_value = "1KiB", value_parser = parse_size)]
    pub(crate) min_request: usize,
    /// Largest padded request (check 4); raise it to look for a limit above 16 MiB.
    #[arg(long, default_value = "16MiB", value_parser = parse_size)]
    pub(crate) max_request: usize,
    /// Bisection steps between the largest answered and the first failed size (check 4).
    #[arg(long, default_value_t = 6)]
    pub(crate) bisect_steps: u32,
    /// Delay between the bytes of the request written one byte at a time (check 5).
    #[arg(long, default_value = "2ms", value_parser = parse_duration)]
    pub(crate) byte_delay: Duration,
    /// The probe's transport limit for the server's frames.
    #[arg(long, default_value = "64MiB", value_parser = parse_size)]
    pub(crate) max_frame: usize,
    /// How long the probe stops reading the server's stdout (check 7).
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub(crate) pause: Duration,
    /// Bytes written to the server's stdin while its stdout is blocked (check 7;
    /// more than a pipe holds, so the write completes only if the server reads).
    #[arg(long, default_value = "256KiB", value_parser = parse_size)]
    pub(crate) stdin_probe: usize,
    /// How long the server may take to answer a `ping` once reading resumes (check 7).
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub(crate) recover_timeout: Duration,
    /// How long to wait for the slow tool to show it runs: progress, output or a child process (checks 8, 9).
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub(crate) slow_start: Duration,
    /// Messages still allowed after the cancellation (in flight) (check 8).
    #[arg(long, default_value = "500ms", value_parser = parse_duration)]
    pub(crate) cancel_grace: Duration,
    /// How long to watch for messages and child processes after the grace (check 8).
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub(crate) cancel_watch: Duration,
    /// How long the server may take to exit once its stdin is closed (checks 9 and 10).
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub(crate) exit_timeout: Duration,
    /// How long the server may take to exit after SIGTERM (check 9).
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub(crate) term_timeout: Duration,
    /// The most time one check may take, all its steps together.
    #[arg(long, default_value = "120s", value_parser = parse_duration)]
    pub(crate) check_timeout: Duration,
    /// Bytes of a line quoted as evidence.
    #[arg(long, default_value = "120B", value_parser = parse_size)]
    pub(crate) excerpt: usize,
    /// After the checks, soak the server for DURATION (`5m`, `90s`): mixed
    /// traffic from --concurrency callers over one session, using only what
    /// it offers (--large and --slow when given), with latency per kind and
    /// the server's memory sampled every second. FAILs on a lost or wrong
    /// answer, or memory growth past --soak-growth. `--only soak` runs it alone.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) soak: Option<Duration>,
    /// Callers sharing the session during --soak.
    #[arg(long, default_value_t = 8, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub(crate) concurrency: u16,
    /// The most the median RSS of the soak's last third may exceed its middle third's.
    #[arg(long, default_value = "16MiB", value_parser = parse_size)]
    pub(crate) soak_growth: usize,
    /// No progress display.
    #[arg(long, short)]
    pub(crate) quiet: bool,
    /// The server command and its arguments (after `--`).
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true, value_name = "SERVER")]
    pub(crate) command: Vec<String>,
}

/// `--era`: `None` is `auto`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct EraArg(pub(crate) Option<mcp_framer_stdio::host::Era>);

fn parse_era(text: &str) -> Result<EraArg, String> {
    use mcp_framer_stdio::host::Era;
    match text.trim() {
        "auto" => Ok(EraArg(None)),
        "modern" => Ok(EraArg(Some(Era::Modern))),
        "legacy" => Ok(EraArg(Some(Era::Legacy))),
        other => Err(format!("unknown era {other:?}: use auto, modern or legacy")),
    }
}

impl Cli {
    /// The process's arguments, parsed; on `--help` or `--version` prints
    /// and exits with 0, on a usage error prints it and exits with 2.
    pub fn from_env() -> Cli {
        let matches = Cli::command_with_help().get_matches();
        let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
        if let Err(message) = cli.validate() {
            Cli::command_with_help().error(clap::error::ErrorKind::ArgumentConflict, message).exit();
        }
        cli
    }

    /// What the flags cannot say alone: the soak check named with
    /// `--only` needs `--soak DURATION`.
    pub(crate) fn validate(&self) -> Result<(), String> {
        if self.soak.is_none() && self.only.contains(&CheckId::Soak) {
            return Err("--only soak needs --soak DURATION (how long to soak, e.g. --soak 5m)".into());
        }
        Ok(())
    }

    /// The command line's definition, with the check list (from
    /// [`CheckId::ALL`] and [`CheckId::STDIO_V2`]) after the help.
    pub(crate) fn command_with_help() -> clap::Command {
        <Cli as clap::CommandFactory>::command().after_help(after_help())
    }

    /// `--junit FILE`: where the report's JUnit XML goes, if anywhere.
    pub fn junit(&self) -> Option<&Path> {
        self.junit.as_deref()
    }

    /// `--json FILE`: where the report's JSON goes, if anywhere.
    pub fn json(&self) -> Option<&Path> {
        self.json.as_deref()
    }

    /// `--list-tools`: list the server's tools instead of running checks.
    pub fn list_tools(&self) -> bool {
        self.list_tools
    }

    /// The library's options: the server command, the checks and tools
    /// selected, and every limit.
    pub fn into_options(self) -> Options {
        let limits = Limits {
            init_timeout: self.init_timeout,
            step_timeout: self.step_timeout,
            ping_timeout: self.ping_timeout,
            reply_wait: self.reply_wait,
            max_pages: self.max_pages,
            min_request: self.min_request,
            max_request: self.max_request,
            bisect_steps: self.bisect_steps,
            byte_delay: self.byte_delay,
            max_frame: self.max_frame,
            pause: self.pause,
            stdin_probe: self.stdin_probe,
            recover_timeout: self.recover_timeout,
            slow_start: self.slow_start,
            cancel_grace: self.cancel_grace,
            cancel_watch: self.cancel_watch,
            exit_timeout: self.exit_timeout,
            term_timeout: self.term_timeout,
            check_timeout: self.check_timeout,
            excerpt: self.excerpt,
            soak_growth: self.soak_growth,
        };
        let mut options = Options::new(self.command);
        options.only = self.only;
        options.skip = self.skip;
        options.large = self.large;
        options.slow = self.slow;
        options.noisy = self.noisy;
        options.transport = self.transport;
        options.protocol_version = self.protocol_version;
        options.era = self.era.0;
        options.fail_on = self.fail_on;
        options.quiet = self.quiet;
        options.soak = self.soak.map(|duration| Soak { duration, concurrency: usize::from(self.concurrency) });
        options.limits = limits;
        options
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sizes_durations_and_tools() {
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("1KiB"), Ok(1024));
        assert_eq!(parse_size("120B"), Ok(120));
        assert!(parse_size("3 parsecs").is_err());
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("soon").is_err());
        let tool = parse_tool(r#"dump {"bytes": 10}"#).unwrap();
        assert_eq!((tool.name.as_str(), tool.arguments["bytes"].as_u64()), ("dump", Some(10)));
        assert_eq!(parse_tool("slow").unwrap().arguments, serde_json::json!({}));
        assert!(parse_tool("x [1]").is_err());
    }

    #[test]
    fn the_flags_defaults_are_the_librarys() {
        let args = Cli::try_parse_from(["mcp-probe", "--", "x"]).unwrap();
        assert!(!args.list_tools);
        let options = args.into_options();
        assert_eq!(options.limits, Limits::default());
        assert_eq!((options.fail_on, options.era), (FailOn::Fail, None));
        assert_eq!(options.transport, Transport::Stdio, "stdio unless asked");
        assert_eq!(options.protocol_version, Options::new(vec![]).protocol_version);
        let warn = Cli::try_parse_from(["mcp-probe", "--fail-on", "warn", "--era", "modern", "--", "x"]).unwrap();
        assert_eq!(warn.fail_on, FailOn::Warn);
        assert_eq!(warn.era, EraArg(Some(mcp_framer_stdio::host::Era::Modern)));
        assert!(Cli::try_parse_from(["mcp-probe", "--fail-on", "never", "--", "x"]).is_err());
        let v2 = Cli::try_parse_from(["mcp-probe", "--transport", "stdio-v2", "--only", "head-of-line", "--", "x"]);
        let v2 = v2.unwrap().into_options();
        assert_eq!((v2.transport, v2.only.as_slice()), (Transport::StdioV2, &[CheckId::HeadOfLine][..]));
        assert!(Cli::try_parse_from(["mcp-probe", "--transport", "http", "--", "x"]).is_err());
        assert_eq!(Options::new(vec![]).soak, None, "no soak unless asked");
        let soak =
            Cli::try_parse_from(["mcp-probe", "--soak", "2m", "--concurrency", "32", "--only", "soak", "--", "x"]);
        let soak = soak.unwrap().into_options();
        assert_eq!(soak.soak, Some(Soak { duration: Duration::from_secs(120), concurrency: 32 }));
        assert_eq!(soak.only, [CheckId::Soak]);
        assert!(Cli::try_parse_from(["mcp-probe", "--soak", "1m", "--concurrency", "0", "--", "x"]).is_err());
        let no_duration = Cli::try_parse_from(["mcp-probe", "--only", "soak", "--", "x"]).unwrap();
        assert!(no_duration.validate().unwrap_err().contains("--soak DURATION"));
        assert_eq!(
            Cli::try_parse_from(["mcp-probe", "--soak", "9s", "--only", "soak", "--", "x"]).unwrap().validate(),
            Ok(())
        );
    }

    #[test]
    fn the_server_command_follows_the_double_dash() {
        let args = Cli::try_parse_from(["mcp-probe", "--only", "bad-input,9", "--", "node", "--x", "s.js"]).unwrap();
        assert_eq!(args.command, ["node", "--x", "s.js"]);
        assert_eq!(args.only, [CheckId::BadInput, CheckId::Shutdown]);
        assert!(Cli::try_parse_from(["mcp-probe"]).is_err(), "a server command is required");
        assert!(Cli::try_parse_from(["mcp-probe", "--only", "nope", "--", "x"]).is_err());
        let help = Cli::command_with_help().render_long_help().to_string();
        for check in CheckId::ALL {
            assert!(help.contains(&format!("{} {}", check.number(), check.name())), "{check:?} not in:\n{help}");
        }
        for check in CheckId::STDIO_V2 {
            assert!(help.contains(check.name()), "{check:?} not in:\n{help}");
        }
    }
}
