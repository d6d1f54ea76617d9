//! Check 10 (needs `--large`): the last frame survives exit. The probe asks
//! for the `--large` result, closes stdin right after the request is
//! written, and reads stdout to its end. Either the whole frame arrives or
//! an error for that id does; a frame cut short at EOF is a FAIL, with the
//! bytes received and where the cut fell. Three rounds, each on a fresh
//! server.
//!
//! The cut hardly depends on timing: the probe starts reading stdout only
//! once stdin is closed, so when the server sees its end of input at most
//! one pipe's worth of the result (64 KiB on Linux) has left it. A server
//! that exits then with the rest still queued in its process (Node's
//! `process.exit()` with a pending pipe write: mthines/lorekit PR #383,
//! apify/mcpc PR #17) loses it every time; one that drains before it exits,
//! or writes synchronously, delivers it whole every time.

use serde_json::json;
use tokio::time::Instant;

use crate::duration::fmt_duration;
use crate::progress::Progress;
use crate::raw::RawEvent;
use crate::report::{CheckResult, Verdict};
use crate::target::Target;

/// Rounds, each on a fresh server.
const ROUNDS: u32 = 3;

/// What one round saw.
#[derive(Debug, PartialEq, Eq)]
enum Ending {
    /// The whole result frame, then EOF.
    Whole { frame: usize },
    /// An error response for the call, then EOF.
    Error { code: Option<i64> },
    /// Stdout ended in the middle of a frame.
    Cut { frame_start: u64, received: u64, total: u64 },
    /// Stdout ended with neither an answer nor a partial frame.
    Unanswered { total: u64 },
    /// Stdout did not end within the wait (answered or not).
    StillOpen { answered: bool },
}

pub(super) async fn run(target: &Target, progress: &Progress, result: &mut CheckResult) {
    let Some(tool) = &target.options.large else {
        return result.skip("needs a tool with a large result: --large 'NAME {json args}'");
    };
    let mut cuts = Vec::new();
    for round in 1..=ROUNDS {
        progress.step(format!("round {round}/{ROUNDS}: tools/call {}, then stdin closed", tool.name));
        let ending = match one_round(target, tool).await {
            Ok(ending) => ending,
            Err(e) => return result.note(Verdict::Fail, format!("round {round}: {e}")),
        };
        let what = format!("round {round}: tools/call {} with stdin closed right after it", tool.name);
        match ending {
            Ending::Whole { frame } => {
                result.info(format!("{what}: the whole result ({frame} bytes) arrived, then EOF"))
            }
            Ending::Error { code } => {
                let code = code.map_or("without a code".to_owned(), |c| c.to_string());
                result.info(format!("{what}: an error for the call ({code}), then EOF"))
            }
            Ending::Cut { frame_start, received, total } => {
                cuts.push(received);
                let pipes = if received % PIPE == 0 {
                    format!(", exactly {} x 65,536", received / PIPE)
                } else {
                    String::new()
                };
                result.note(
                    Verdict::Fail,
                    format!(
                        "{what}: the last frame was cut at EOF: {received} bytes of it arrived{pipes} (it began at \
                         byte {frame_start} of stdout, which ended at byte {total}), and no newline; the server exited \
                         with the rest of its result still queued, and a host holds half a JSON line and a \
                         request that never completes"
                    ),
                );
                result.behaviour("cuts-last-frame-at-exit");
            }
            Ending::Unanswered { total } => result.note(
                Verdict::Warn,
                format!(
                    "{what}: stdout ended ({total} bytes after the handshake) with neither the result nor an error \
                     for the call; the request never completes (no broken frame, though)"
                ),
            ),
            Ending::StillOpen { answered } => result.note(
                Verdict::Warn,
                format!(
                    "{what}: {} and stdout still open {} after stdin was closed (see the shutdown check)",
                    if answered { "answered" } else { "no answer" },
                    fmt_duration(wait(target))
                ),
            ),
        }
    }
    result.measure("rounds", ROUNDS);
    result.measure("cut_rounds", cuts.len() as u64);
    result.measure("cut_at", cuts);
}

/// The pipe's size on Linux, which cuts tend to fall on.
const PIPE: u64 = 65_536;

/// How long a round reads stdout for: the step timeout and the exit
/// timeout.
fn wait(target: &Target) -> std::time::Duration {
    target.limits.step_timeout + target.limits.exit_timeout
}

/// One round: a fresh server, the handshake, the call, stdin closed, then
/// stdout read to its end.
async fn one_round(target: &Target, tool: &crate::options::ToolSpec) -> Result<Ending, String> {
    let limits = &target.limits;
    let mut conn = super::raw_session(target, "exit-flush").await?;
    let base = conn.counters().stdout_bytes.load(std::sync::atomic::Ordering::Relaxed);
    // Not reading stdout until stdin is closed: at most a pipe's worth of
    // the result has left the server when it sees EOF.
    conn.pause(true);
    let params = target.params(json!({ "name": tool.name, "arguments": tool.arguments }));
    let sent = conn.send_request("tools/call", &params, limits.step_timeout).await;
    conn.close_stdin();
    conn.pause(false);
    let id = sent.map_err(|e| format!("tools/call {} could not be written ({e:?})", tool.name))?;
    let deadline = Instant::now() + wait(target);
    let mut answer = None;
    let ending = loop {
        match conn.next_event(deadline).await {
            Some(RawEvent::Message(m)) if m.answers(id) => answer = Some(m),
            Some(RawEvent::Cut { len }) => {
                let total = conn.counters().stdout_bytes.load(std::sync::atomic::Ordering::Relaxed);
                break Ending::Cut { frame_start: total - len, received: len, total };
            }
            Some(RawEvent::Eof) => {
                let total = conn.counters().stdout_bytes.load(std::sync::atomic::Ordering::Relaxed);
                break match answer.take() {
                    Some(m) if m.error_code().is_some() || m.kind == mcp_framer_jsonrpc::Kind::ErrorResponse => {
                        Ending::Error { code: m.error_code() }
                    }
                    Some(m) => Ending::Whole { frame: m.len },
                    None => Ending::Unanswered { total: total - base },
                };
            }
            Some(_) => {}
            None => break Ending::StillOpen { answered: answer.is_some() },
        }
    };
    target.account_raw("exit-flush", &conn);
    Ok(ending)
}
