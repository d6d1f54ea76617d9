//! Why the probe could not produce a report.

/// Why the probe could not produce a report.
#[derive(Debug)]
#[non_exhaustive]
pub enum ProbeError {
    /// The server could not be started at all.
    Spawn(std::io::Error),
    /// `--large` or `--slow` names a tool the server does not list.
    UnknownTool {
        /// `--large` or `--slow`.
        option: &'static str,
        /// The name given.
        name: String,
        /// The tools the server lists.
        tools: Vec<String>,
    },
    /// The arguments given for a tool do not fit its `inputSchema`.
    BadArguments {
        /// `--large` or `--slow`.
        option: &'static str,
        /// The tool.
        name: String,
        /// What does not fit.
        problems: Vec<String>,
    },
    /// The tools could not be listed (for `--list-tools`).
    NoTools(String),
}

impl std::fmt::Display for ProbeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProbeError::Spawn(e) => write!(f, "the server could not be started: {e}"),
            ProbeError::UnknownTool { option, name, tools } => write!(
                f,
                "{option} {name:?}: the server has no such tool; its tools: {} (see --list-tools)",
                if tools.is_empty() { "none".to_owned() } else { tools.join(", ") }
            ),
            ProbeError::BadArguments { option, name, problems } => write!(
                f,
                "{option} {name:?}: the arguments do not fit the tool's inputSchema: {} (see --list-tools)",
                problems.join("; ")
            ),
            ProbeError::NoTools(why) => write!(f, "the tools could not be listed: {why}"),
        }
    }
}

impl std::error::Error for ProbeError {}
