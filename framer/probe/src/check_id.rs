//! The checks' names and numbers.

use std::str::FromStr;

/// A check, by name or number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CheckId {
    /// 1: nothing but JSON-RPC on stdout.
    StdoutHygiene,
    /// 2: `server/discover` or `initialize` (+ `notifications/initialized`), `tools/list`.
    Handshake,
    /// 3: malformed input gets the right errors and the server stays alive.
    BadInput,
    /// 4: the largest request the server takes, and what a larger one gets.
    RequestSize,
    /// 5: a request one byte at a time, two in one write, one split at `\r\n`.
    Framing,
    /// 6: the server's frame sizes, and life after the host skips one.
    ResponseLimits,
    /// 7: the server keeps reading stdin while its stdout is blocked.
    Backpressure,
    /// 8: cancellation stops the producer.
    Cancellation,
    /// 9: the server exits when stdin closes, leaving no process behind.
    Shutdown,
    /// 10: the last frame survives exit: a large result asked for just
    /// before stdin closes arrives whole (or an error for it does).
    ExitFlush,
    /// `stdio-v2` 1: the server speaks `stdio-v2` (the HTTP/2 handshake completes).
    Selection,
    /// `stdio-v2` 5: a request is answered while a large result streams.
    HeadOfLine,
    /// 11 (`stdio-v2` 7): stderr per request and for the handshake, within
    /// what a pipe holds (`stdio-v2`: drained into a bounded tail).
    Stderr,
    /// 12 (`stdio-v2` 9), only with `--soak DURATION`: minutes of mixed
    /// traffic, nothing lost, the server's memory flat.
    Soak,
}

impl CheckId {
    /// Every check, in order.
    pub const ALL: [CheckId; 11] = [
        CheckId::StdoutHygiene,
        CheckId::Handshake,
        CheckId::BadInput,
        CheckId::RequestSize,
        CheckId::Framing,
        CheckId::ResponseLimits,
        CheckId::Backpressure,
        CheckId::Cancellation,
        CheckId::Shutdown,
        CheckId::ExitFlush,
        CheckId::Stderr,
    ];

    /// The checks of `--transport stdio-v2`, in order: the newline checks
    /// that apply to an HTTP/2 session and three of its own. Numbered by
    /// their place here in a `stdio-v2` report.
    pub const STDIO_V2: [CheckId; 8] = [
        CheckId::Selection,
        CheckId::Handshake,
        CheckId::BadInput,
        CheckId::RequestSize,
        CheckId::HeadOfLine,
        CheckId::Cancellation,
        CheckId::Stderr,
        CheckId::Shutdown,
    ];

    /// Its number: its place in [`ALL`](CheckId::ALL), or for the two
    /// `stdio-v2`-only checks in [`STDIO_V2`](CheckId::STDIO_V2). A number
    /// on the command line names a check of `ALL`; a report numbers its
    /// checks by their place in its transport's list.
    pub fn number(self) -> u8 {
        if self == CheckId::Soak {
            return Self::ALL.len() as u8 + 1;
        }
        let place = |list: &[CheckId]| list.iter().position(|&c| c == self).map(|i| i as u8 + 1);
        place(&Self::ALL).or_else(|| place(&Self::STDIO_V2)).unwrap_or(0)
    }

    /// Its name on the command line and in the report.
    pub const fn name(self) -> &'static str {
        match self {
            CheckId::StdoutHygiene => "stdout-hygiene",
            CheckId::Handshake => "handshake",
            CheckId::BadInput => "bad-input",
            CheckId::RequestSize => "request-size",
            CheckId::Framing => "framing",
            CheckId::ResponseLimits => "response-limits",
            CheckId::Backpressure => "backpressure",
            CheckId::Cancellation => "cancellation",
            CheckId::Shutdown => "shutdown",
            CheckId::ExitFlush => "exit-flush",
            CheckId::Selection => "selection",
            CheckId::HeadOfLine => "head-of-line",
            CheckId::Stderr => "stderr",
            CheckId::Soak => "soak",
        }
    }

    /// Its title.
    pub fn title(self) -> &'static str {
        match self {
            CheckId::StdoutHygiene => "stdout hygiene",
            CheckId::Handshake => "handshake",
            CheckId::BadInput => "bad input survives",
            CheckId::RequestSize => "incoming size limit",
            CheckId::Framing => "framing robustness",
            CheckId::ResponseLimits => "response limits",
            CheckId::Backpressure => "backpressure",
            CheckId::Cancellation => "cancellation reaches the producer",
            CheckId::Shutdown => "shutdown",
            CheckId::ExitFlush => "the last frame survives exit",
            CheckId::Selection => "transport selection",
            CheckId::HeadOfLine => "no head-of-line blocking",
            CheckId::Stderr => "stderr within a pipe",
            CheckId::Soak => "minutes of mixed traffic",
        }
    }

    /// Why it matters, in one line.
    pub fn why(self) -> &'static str {
        match self {
            CheckId::StdoutHygiene => {
                "stdout is the protocol channel: a banner or log line there is a parse error in every host, and a strict host drops the session"
            }
            CheckId::Handshake => {
                "a host waits for the handshake (server/discover or initialize) before anything else; a slow or malformed answer means the server never becomes usable"
            }
            CheckId::BadInput => {
                "one bad line must cost one error reply, not the session: a server that goes deaf hangs every request after it"
            }
            CheckId::RequestSize => {
                "a request over the server's limit must get an error, not silence or a crash, or the host waits out its timeout and loses the session"
            }
            CheckId::Framing => {
                "pipes deliver bytes in arbitrary chunks; a server that assumes one read per message drops or merges requests"
            }
            CheckId::ResponseLimits => {
                "a response over the host's transport limit is skipped; the server must stay usable and say when it truncated"
            }
            CheckId::Backpressure => {
                "stdout is a 64 KiB pipe: a server that stops reading stdin while blocked on stdout deadlocks with a host that writes first"
            }
            CheckId::Cancellation => {
                "a cancel that does not reach the producer leaves it burning CPU and bandwidth, and its output queues ahead of the next answer"
            }
            CheckId::Shutdown => {
                "MCP ends a stdio session by closing stdin; a server that outlives it (or leaves children) leaks a process per session"
            }
            CheckId::ExitFlush => {
                "a server that exits at stdin's end with output still queued cuts its last frame: the host holds half a JSON line and a request that never completes"
            }
            CheckId::Selection => {
                "stdio-v2 is chosen by configuration, not negotiated: a host and a server that disagree must fail at once, saying so, not hang"
            }
            CheckId::HeadOfLine => {
                "stdio-v2 exists so that one large result does not hold up every other answer; a server that serializes its streams keeps the newline transport's worst defect"
            }
            CheckId::Stderr => {
                "stderr is a 64 KiB pipe too: a host that does not read it blocks a chatty server, and one that keeps all of it grows without bound"
            }
            CheckId::Soak => {
                "hosts run for days: a server that loses one answer in ten thousand, or grows with every call, passes every check of seconds and fails in production"
            }
        }
    }
}

impl FromStr for CheckId {
    type Err = String;

    fn from_str(text: &str) -> Result<CheckId, String> {
        let text = text.trim();
        let every = || CheckId::ALL.into_iter().chain([CheckId::Soak]);
        let by_number = every().find(|c| c.number().to_string() == text);
        let by_name = every().chain(CheckId::STDIO_V2).find(|c| c.name() == text);
        by_name.or(by_number).ok_or_else(|| {
            let mut names: Vec<&str> = CheckId::ALL.iter().map(|c| c.name()).collect();
            names.extend(CheckId::STDIO_V2.iter().map(|c| c.name()).filter(|n| !names.contains(n)).collect::<Vec<_>>());
            names.push(CheckId::Soak.name());
            format!(
                "unknown check {text:?}; use a number 1-{} (stdio) or one of {}",
                CheckId::ALL.len() + 1,
                names.join(", ")
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stdio_v2_checks_parse_by_name_and_numbers_stay_the_newline_ones() {
        for (i, check) in CheckId::ALL.into_iter().enumerate() {
            assert_eq!(check.number() as usize, i + 1, "{check:?}");
            assert_eq!((i + 1).to_string().parse::<CheckId>(), Ok(check));
        }
        assert_eq!(
            [CheckId::Selection, CheckId::HeadOfLine].map(CheckId::number),
            [1, 5],
            "the v2-only checks are numbered by their place in STDIO_V2"
        );
        for check in CheckId::STDIO_V2 {
            assert_eq!(check.name().parse::<CheckId>(), Ok(check));
        }
        assert_eq!(("12".parse::<CheckId>(), "soak".parse::<CheckId>()), (Ok(CheckId::Soak), Ok(CheckId::Soak)));
        assert!("11".parse::<CheckId>().is_ok() && "13".parse::<CheckId>().is_err());
        let unknown = "nope".parse::<CheckId>().unwrap_err();
        assert!(unknown.contains("head-of-line") && unknown.contains("framing"), "{unknown}");
    }

    /// The numbered rows of a README table (`| N | `name` | ...`) that
    /// starts after `heading`: each row's number and name, in order.
    fn readme_rows(readme: &str, heading: &str) -> Vec<(u8, String)> {
        let after = readme.split_once(heading).unwrap_or_else(|| panic!("no {heading:?} in the README")).1;
        after
            .lines()
            .skip_while(|line| !line.starts_with("| 1 |"))
            .take_while(|line| line.starts_with('|'))
            .map(|line| {
                let cells: Vec<&str> = line.split('|').map(str::trim).collect();
                (cells[1].parse().expect("a check number"), cells[2].trim_matches('`').to_owned())
            })
            .collect()
    }

    /// `CheckId` is the one list of checks: the report schema names exactly
    /// its checks, and both of the README's check tables list them in its
    /// order, numbered as reports number them.
    #[test]
    fn the_schema_and_the_readme_list_exactly_these_checks() {
        let schema: serde_json::Value =
            serde_json::from_str(include_str!("../report.schema.json")).expect("the schema is JSON");
        let check = &schema["properties"]["checks"]["items"]["properties"];
        let mut names: Vec<&str> = CheckId::ALL.iter().map(|c| c.name()).collect();
        names.extend(CheckId::STDIO_V2.iter().map(|c| c.name()).filter(|n| !names.contains(n)).collect::<Vec<_>>());
        names.push(CheckId::Soak.name());
        let mut in_schema: Vec<&str> =
            check["name"]["enum"].as_array().expect("an enum").iter().filter_map(|n| n.as_str()).collect();
        in_schema.sort_unstable();
        names.sort_unstable();
        assert_eq!(in_schema, names, "the schema's check names");
        assert_eq!(check["number"]["maximum"], CheckId::Soak.number(), "the schema's highest check number");

        let readme = include_str!("../README.md");
        let rows = |checks: &[CheckId]| -> Vec<(u8, String)> {
            checks.iter().enumerate().map(|(i, c)| (i as u8 + 1, c.name().to_owned())).collect()
        };
        assert_eq!(readme_rows(readme, "## The checks"), rows(&CheckId::ALL), "the README's stdio checks");
        assert_eq!(
            readme_rows(readme, "## `--transport stdio-v2`"),
            rows(&CheckId::STDIO_V2),
            "the README's stdio-v2 checks"
        );
    }
}
