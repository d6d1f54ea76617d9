//! The command line: every limit and every time is a flag with a default.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

use crate::checks::CheckId;

/// Check an MCP stdio server against the transport's release criteria.
///
/// Runs the server (everything after `--`) once per check, sends it the
/// inputs that wedge careless servers, and reports PASS / WARN / FAIL / SKIP
/// per check with the evidence. Exit status: 0 when no check FAILs, 1 when
/// one does, 2 on a usage error or a server that could not be started.
#[derive(Clone, Debug, Parser)]
#[command(name = "mcp-probe", version, about, long_about = None)]
#[command(after_help = "Checks: 1 stdout-hygiene, 2 handshake, 3 bad-input, 4 request-size, 5 framing, \
6 response-limits, 7 backpressure, 8 cancellation, 9 shutdown.\n\
Durations: 500ms, 2s, 1.5 (seconds). Sizes: 4096, 64KiB, 16MiB.\n\
Example: mcp-probe --large 'dump {\"bytes\":4000000}' --slow 'count {\"seconds\":10}' -- python server.py")]
pub struct Args {
    /// Write the report as JSON (schema `mcp-probe-report`, version 1) to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Run only these checks (names or numbers, comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "CHECKS")]
    pub only: Vec<CheckId>,
    /// Skip these checks (names or numbers, comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "CHECKS")]
    pub skip: Vec<CheckId>,
    /// A tool whose result is large (checks 6 and 7): its name, then its JSON arguments.
    #[arg(long, value_name = "'NAME {ARGS}'", value_parser = parse_tool)]
    pub large: Option<ToolSpec>,
    /// A tool that runs for a while, ideally sending progress (check 8): its name, then its JSON arguments.
    #[arg(long, value_name = "'NAME {ARGS}'", value_parser = parse_tool)]
    pub slow: Option<ToolSpec>,
    /// The protocol version offered in `initialize`.
    #[arg(long, default_value = "2025-06-18")]
    pub protocol_version: String,
    /// How long `initialize` may take to be answered.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub init_timeout: Duration,
    /// How long any other request may take to be answered (tool calls included).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub step_timeout: Duration,
    /// How long a `ping` may take after an incident before the server counts as deaf.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub ping_timeout: Duration,
    /// How long to wait for the reply to each bad input (check 3).
    #[arg(long, default_value = "500ms", value_parser = parse_duration)]
    pub reply_wait: Duration,
    /// Most pages of `tools/list` followed (check 2).
    #[arg(long, default_value_t = 100)]
    pub max_pages: u32,
    /// Smallest padded request (check 4).
    #[arg(long, default_value = "1KiB", value_parser = parse_size)]
    pub min_request: usize,
    /// Largest padded request (check 4).
    #[arg(long, default_value = "64MiB", value_parser = parse_size)]
    pub max_request: usize,
    /// Bisection steps between the largest answered and the first failed size (check 4).
    #[arg(long, default_value_t = 6)]
    pub bisect_steps: u32,
    /// Delay between the bytes of the request written one byte at a time (check 5).
    #[arg(long, default_value = "2ms", value_parser = parse_duration)]
    pub byte_delay: Duration,
    /// The probe's transport limit for the server's frames.
    #[arg(long, default_value = "64MiB", value_parser = parse_size)]
    pub max_frame: usize,
    /// How long the probe stops reading the server's stdout (check 7).
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub pause: Duration,
    /// Bytes written to the server's stdin while its stdout is blocked (check 7;
    /// more than a pipe holds, so the write completes only if the server reads).
    #[arg(long, default_value = "256KiB", value_parser = parse_size)]
    pub stdin_probe: usize,
    /// How long the server may take to answer a `ping` once reading resumes (check 7).
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub recover_timeout: Duration,
    /// How long to wait for the slow tool's first progress notification (check 8).
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub slow_start: Duration,
    /// Progress still allowed after the cancellation (in flight) (check 8).
    #[arg(long, default_value = "500ms", value_parser = parse_duration)]
    pub cancel_grace: Duration,
    /// How long to watch for progress after the grace (check 8).
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub cancel_watch: Duration,
    /// How long the server may take to exit once its stdin is closed (check 9).
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub exit_timeout: Duration,
    /// How long the server may take to exit after SIGTERM (check 9).
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub term_timeout: Duration,
    /// The most time one check may take, all its steps together.
    #[arg(long, default_value = "120s", value_parser = parse_duration)]
    pub check_timeout: Duration,
    /// Bytes of a line quoted as evidence.
    #[arg(long, default_value = "120B", value_parser = parse_size)]
    pub excerpt: usize,
    /// No progress display.
    #[arg(long, short)]
    pub quiet: bool,
    /// The server command and its arguments (after `--`).
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true, value_name = "SERVER")]
    pub command: Vec<String>,
}

/// A tool to call: its name and its arguments.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSpec {
    /// The tool's name.
    pub name: String,
    /// Its arguments (a JSON object).
    pub arguments: serde_json::Value,
}

impl std::fmt::Display for ToolSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.name, self.arguments)
    }
}

/// Parses `NAME` or `NAME {json object}`.
pub fn parse_tool(text: &str) -> Result<ToolSpec, String> {
    let text = text.trim();
    let (name, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
    if name.is_empty() {
        return Err("expected a tool name, then optionally its JSON arguments".into());
    }
    let arguments = if rest.trim().is_empty() {
        serde_json::Value::Object(Default::default())
    } else {
        serde_json::from_str(rest.trim()).map_err(|e| format!("the arguments are not JSON: {e}"))?
    };
    if !arguments.is_object() {
        return Err("the arguments must be a JSON object".into());
    }
    Ok(ToolSpec { name: name.to_owned(), arguments })
}

/// Parses `500ms`, `2s`, `1.5` (seconds) or `1m`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, scale) = if let Some(n) = text.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = text.strip_suffix('m') {
        (n, 60.0)
    } else {
        (text, 1.0)
    };
    let value: f64 = number.trim().parse().map_err(|_| format!("not a duration: {text:?} (try 500ms, 2s)"))?;
    Duration::try_from_secs_f64(value * scale).map_err(|e| format!("not a duration: {text:?}: {e}"))
}

/// Parses a byte count: `4096`, `120B`, `64KiB`, `16MiB`, `1GiB` (also `K`, `M`, `G`, binary).
pub fn parse_size(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: usize = number.parse().map_err(|_| format!("not a size: {text:?} (try 4096, 64KiB, 16MiB)"))?;
    let scale: usize = match unit.trim() {
        "" | "B" => 1,
        "K" | "KiB" | "k" => 1 << 10,
        "M" | "MiB" => 1 << 20,
        "G" | "GiB" => 1 << 30,
        other => return Err(format!("unknown size unit {other:?} (use B, KiB, MiB, GiB)")),
    };
    number.checked_mul(scale).ok_or_else(|| format!("size too large: {text:?}"))
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
    fn the_server_command_follows_the_double_dash() {
        let args = Args::try_parse_from(["mcp-probe", "--only", "bad-input,9", "--", "node", "--x", "s.js"]).unwrap();
        assert_eq!(args.command, ["node", "--x", "s.js"]);
        assert_eq!(args.only, [CheckId::BadInput, CheckId::Shutdown]);
        assert!(Args::try_parse_from(["mcp-probe"]).is_err(), "a server command is required");
        assert!(Args::try_parse_from(["mcp-probe", "--only", "nope", "--", "x"]).is_err());
    }
}
