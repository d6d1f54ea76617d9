//! The nine checks. Each starts its own server (so a server that one check
//! wedges or kills does not spoil the next), runs under `--check-timeout`,
//! and fills in a [`CheckResult`].

mod backpressure;
mod bad_input;
mod cancellation;
mod framing;
mod handshake;
mod hygiene;
mod request_size;
mod response_limits;
mod shutdown;

use std::str::FromStr;
use std::time::Instant;

use crate::progress::Progress;
use crate::report::{CheckResult, Verdict};
use crate::target::Target;

/// A check, by name or number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CheckId {
    /// 1: nothing but JSON-RPC on stdout.
    StdoutHygiene,
    /// 2: `initialize`, `notifications/initialized`, `tools/list`.
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
}

impl CheckId {
    /// Every check, in order.
    pub const ALL: [CheckId; 9] = [
        CheckId::StdoutHygiene,
        CheckId::Handshake,
        CheckId::BadInput,
        CheckId::RequestSize,
        CheckId::Framing,
        CheckId::ResponseLimits,
        CheckId::Backpressure,
        CheckId::Cancellation,
        CheckId::Shutdown,
    ];

    /// Its number, 1 to 9.
    pub fn number(self) -> u8 {
        Self::ALL.iter().position(|&c| c == self).map_or(0, |i| i as u8 + 1)
    }

    /// Its name on the command line and in the report.
    pub fn name(self) -> &'static str {
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
        }
    }

    /// Why it matters, in one line.
    pub fn why(self) -> &'static str {
        match self {
            CheckId::StdoutHygiene => {
                "stdout is the protocol channel: a banner or log line there is a parse error in every host, and a strict host drops the session"
            }
            CheckId::Handshake => {
                "a host waits for initialize before anything else; a slow or malformed answer means the server never becomes usable"
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
        }
    }

    fn result(self) -> CheckResult {
        CheckResult::new(self.number(), self.name(), self.title(), self.why())
    }
}

impl FromStr for CheckId {
    type Err = String;

    fn from_str(text: &str) -> Result<CheckId, String> {
        let text = text.trim();
        CheckId::ALL.into_iter().find(|c| c.name() == text || c.number().to_string() == text).ok_or_else(|| {
            let names: Vec<&str> = CheckId::ALL.iter().map(|c| c.name()).collect();
            format!("unknown check {text:?}; use a number 1-9 or one of {}", names.join(", "))
        })
    }
}

/// Runs the checks selected by `--only` / `--skip`, in order; deselected
/// checks are reported as SKIP.
pub async fn run_all(target: &Target) -> Vec<CheckResult> {
    let args = &target.args;
    let selected = |c: &CheckId| (args.only.is_empty() || args.only.contains(c)) && !args.skip.contains(c);
    let count = CheckId::ALL.iter().filter(|c| selected(c)).count();
    let progress = Progress::new(count, args.quiet);
    let mut results = Vec::new();
    let mut index = 0;
    for check in CheckId::ALL {
        let mut result = check.result();
        if !selected(&check) {
            result.skip("not selected (--only / --skip)");
            results.push(result);
            continue;
        }
        progress.start(index, check);
        index += 1;
        let started = Instant::now();
        let run = run_one(check, target, &progress, &mut result);
        if tokio::time::timeout(args.check_timeout, run).await.is_err() {
            result.note(
                Verdict::Fail,
                format!("the check did not finish within --check-timeout {}", crate::fmt_duration(args.check_timeout)),
            );
        }
        result.duration_ms = started.elapsed().as_millis() as u64;
        // A check's server is not needed any more: kill its group now, so a
        // wedged one does not burn CPU during the next check.
        target.kill_groups();
        progress.done(&result);
        results.push(result);
    }
    if let Some(hygiene) = results.iter_mut().find(|r| r.name == CheckId::StdoutHygiene.name())
        && hygiene.verdict != Verdict::Skip
    {
        hygiene::finish(target, hygiene);
    }
    progress.finish();
    results
}

/// Starts a server on raw pipes and completes the handshake; on failure,
/// accounts for what it printed and says why.
async fn raw_session(target: &Target, check: &str) -> Result<crate::raw::RawConn, String> {
    let mut conn = crate::raw::RawConn::spawn(target).map_err(|e| format!("the server could not be started: {e}"))?;
    if let Err(e) = conn.initialize(target).await {
        target.account_raw(check, &conn);
        return Err(format!("no session to test: {e}"));
    }
    Ok(conn)
}

async fn run_one(check: CheckId, target: &Target, progress: &Progress, result: &mut CheckResult) {
    match check {
        CheckId::StdoutHygiene => hygiene::run(target, progress, result).await,
        CheckId::Handshake => handshake::run(target, progress, result).await,
        CheckId::BadInput => bad_input::run(target, progress, result).await,
        CheckId::RequestSize => request_size::run(target, progress, result).await,
        CheckId::Framing => framing::run(target, progress, result).await,
        CheckId::ResponseLimits => response_limits::run(target, progress, result).await,
        CheckId::Backpressure => backpressure::run(target, progress, result).await,
        CheckId::Cancellation => cancellation::run(target, progress, result).await,
        CheckId::Shutdown => shutdown::run(target, progress, result).await,
    }
}
