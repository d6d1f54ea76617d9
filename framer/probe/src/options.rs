//! What the probe is asked to do: the server command, the tools to use, the
//! checks selected, and a plain [`Limits`] struct with every time and size
//! the checks use (the command line fills them in; a library caller starts
//! from [`Limits::default`]).

use std::time::Duration;

use mcp_framer_stdio::host::Era;

use crate::check_id::CheckId;

/// What makes the exit status (and [`Summary::exit_code`](crate::Summary)) 1.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FailOn {
    /// A FAIL, or a process left behind (the default).
    #[default]
    Fail,
    /// A WARN or worse.
    Warn,
}

impl FailOn {
    /// `"fail"` or `"warn"`.
    pub fn as_str(self) -> &'static str {
        match self {
            FailOn::Fail => "fail",
            FailOn::Warn => "warn",
        }
    }
}

impl std::str::FromStr for FailOn {
    type Err = String;

    fn from_str(text: &str) -> Result<FailOn, String> {
        match text.trim() {
            "fail" => Ok(FailOn::Fail),
            "warn" => Ok(FailOn::Warn),
            other => Err(format!("unknown --fail-on {other:?}: use fail or warn")),
        }
    }
}

/// The transport the server is probed over.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Transport {
    /// Newline-delimited JSON-RPC on stdin and stdout (the default): the
    /// eleven checks of [`CheckId::ALL`].
    #[default]
    Stdio,
    /// **Experimental** `stdio-v2`: HTTP/2 with prior knowledge on stdin and
    /// stdout (`mcp_framer_stdio_v2`): the eight checks of
    /// [`CheckId::STDIO_V2`].
    StdioV2,
}

impl Transport {
    /// `"stdio"` or `"stdio-v2"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Stdio => "stdio",
            Transport::StdioV2 => "stdio-v2",
        }
    }

    /// The checks run over this transport, in order.
    pub fn checks(self) -> &'static [CheckId] {
        match self {
            Transport::Stdio => &CheckId::ALL,
            Transport::StdioV2 => &CheckId::STDIO_V2,
        }
    }
}

impl std::str::FromStr for Transport {
    type Err = String;

    fn from_str(text: &str) -> Result<Transport, String> {
        match text.trim() {
            "stdio" => Ok(Transport::Stdio),
            "stdio-v2" => Ok(Transport::StdioV2),
            other => Err(format!("unknown transport {other:?}: use stdio or stdio-v2")),
        }
    }
}

/// Every time and size a check uses.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// How long the handshake (`server/discover`, then `initialize`) may take.
    pub init_timeout: Duration,
    /// How long any other request may take (tool calls included).
    pub step_timeout: Duration,
    /// How long a liveness request may take after an incident.
    pub ping_timeout: Duration,
    /// How long to wait for the reply to each bad input (check 3).
    pub reply_wait: Duration,
    /// Most pages of `tools/list` followed.
    pub max_pages: u32,
    /// Smallest padded request (check 4).
    pub min_request: usize,
    /// Largest padded request (check 4).
    pub max_request: usize,
    /// Bisection steps (check 4).
    pub bisect_steps: u32,
    /// Delay between the bytes of a request written one byte at a time (check 5).
    pub byte_delay: Duration,
    /// The probe's transport limit for the server's frames.
    pub max_frame: usize,
    /// How long the probe stops reading the server's stdout (check 7).
    pub pause: Duration,
    /// Bytes written to the server's stdin while its stdout is blocked (check 7).
    pub stdin_probe: usize,
    /// How long the server may take to answer once reading resumes (check 7).
    pub recover_timeout: Duration,
    /// How long to wait for the slow tool to show it is running (checks 8, 9).
    pub slow_start: Duration,
    /// Output still allowed after a cancellation (in flight) (check 8).
    pub cancel_grace: Duration,
    /// How long to watch after the grace (check 8).
    pub cancel_watch: Duration,
    /// How long the server may take to exit once its stdin is closed (check 9).
    pub exit_timeout: Duration,
    /// How long the server may take to exit after SIGTERM (check 9).
    pub term_timeout: Duration,
    /// The most time one check may take, all its steps together.
    pub check_timeout: Duration,
    /// Bytes of a line quoted as evidence.
    pub excerpt: usize,
    /// How far the median RSS of a soak's last third may exceed its middle
    /// third's (`--soak`).
    pub soak_growth: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        let s = Duration::from_secs;
        let ms = Duration::from_millis;
        Limits {
            init_timeout: s(10),
            step_timeout: s(10),
            ping_timeout: s(1),
            reply_wait: ms(500),
            max_pages: 100,
            min_request: 1 << 10,
            max_request: 16 << 20,
            bisect_steps: 6,
            byte_delay: ms(2),
            max_frame: 64 << 20,
            pause: s(2),
            stdin_probe: 256 << 10,
            recover_timeout: s(5),
            slow_start: s(5),
            cancel_grace: ms(500),
            cancel_watch: s(1),
            exit_timeout: s(2),
            term_timeout: s(2),
            check_timeout: s(120),
            excerpt: 120,
            soak_growth: 16 << 20,
        }
    }
}

/// A probe run: the server and everything the checks need.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Options {
    /// The server command and its arguments.
    pub command: Vec<String>,
    /// Run only these checks (empty: all).
    pub only: Vec<CheckId>,
    /// Skip these checks.
    pub skip: Vec<CheckId>,
    /// A tool whose result is large (checks 6 and 7).
    pub large: Option<ToolSpec>,
    /// A tool that runs for a while (checks 8 and 9).
    pub slow: Option<ToolSpec>,
    /// A tool that writes to its stderr (`stdio-v2`'s stderr check).
    pub noisy: Option<ToolSpec>,
    /// The transport probed.
    pub transport: Transport,
    /// The legacy protocol version offered in `initialize`.
    pub protocol_version: String,
    /// `None`: probe the era (`server/discover`, then `initialize`); `Some`:
    /// that era only.
    pub era: Option<Era>,
    /// What makes the exit status 1.
    pub fail_on: FailOn,
    /// No progress display on stderr.
    pub quiet: bool,
    /// `--soak`: after the checks, the soak check with these settings.
    pub soak: Option<Soak>,
    /// Times and sizes.
    pub limits: Limits,
}

impl Options {
    /// Options for `command` with every default.
    pub fn new(command: Vec<String>) -> Options {
        Options {
            command,
            only: Vec::new(),
            skip: Vec::new(),
            large: None,
            slow: None,
            noisy: None,
            transport: Transport::Stdio,
            protocol_version: mcp_framer_jsonrpc::protocol::NEWEST_LEGACY.to_owned(),
            era: None,
            fail_on: FailOn::Fail,
            quiet: true,
            soak: None,
            limits: Limits::default(),
        }
    }

    /// Whether `check` runs (the soak only with [`soak`](Options::soak)).
    pub fn selected(&self, check: CheckId) -> bool {
        if check == CheckId::Soak && self.soak.is_none() {
            return false;
        }
        (self.only.is_empty() || self.only.contains(&check)) && !self.skip.contains(&check)
    }
}

/// `--soak`: how long the soak check's traffic runs, and how many callers
/// share its session (`--concurrency`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Soak {
    /// How long the traffic runs.
    pub duration: Duration,
    /// Callers sharing the session.
    pub concurrency: usize,
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
pub(crate) fn parse_tool(text: &str) -> Result<ToolSpec, String> {
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
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
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
pub(crate) fn parse_size(text: &str) -> Result<usize, String> {
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
