//! The newline checks ([`CheckId::ALL`]). Each starts its own server (so a server that one check
//! wedges or kills does not spoil the next), runs under `--check-timeout`,
//! and fills in a [`CheckResult`].

mod backpressure;
mod bad_input;
mod cancellation;
mod exit_flush;
mod framing;
pub(crate) mod handshake;
mod hygiene;
pub(crate) mod request_size;
mod response_limits;
mod shutdown;
mod stderr;

use std::time::Instant;

use crate::check_id::CheckId;
use crate::progress::Progress;
use crate::report::{CheckResult, Verdict};
use crate::target::Target;

/// Runs the checks selected by `--only` / `--skip`, in order; deselected
/// checks are reported as SKIP.
pub(crate) async fn run_all(target: &Target) -> Vec<CheckResult> {
    let limits = &target.limits;
    let selected = |c: &CheckId| target.options.selected(*c);
    let count = CheckId::ALL.iter().filter(|c| selected(c)).count();
    let progress = Progress::new(count, target.options.quiet);
    let mut results = Vec::new();
    let mut index = 0;
    for check in CheckId::ALL {
        let mut result = CheckResult::new(check.number(), check.name(), check.title(), check.why());
        if !selected(&check) {
            result.skip("not selected (--only / --skip)");
            results.push(result);
            continue;
        }
        progress.start(index, check);
        index += 1;
        let started = Instant::now();
        let run = run_one(check, target, &progress, &mut result);
        if tokio::time::timeout(limits.check_timeout, run).await.is_err() {
            result.note(
                Verdict::Fail,
                format!(
                    "the check did not finish within --check-timeout {}",
                    crate::duration::fmt_duration(limits.check_timeout)
                ),
            );
        }
        result.duration_ms = started.elapsed().as_millis() as u64;
        // A check's server is not needed any more: kill its tree now, so a
        // wedged one does not burn CPU during the next check.
        target.kill_trees();
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

/// Starts a server on raw pipes and opens the session in the era found;
/// on failure, accounts for what it printed and says why.
async fn raw_session(target: &Target, check: &str) -> Result<crate::raw::RawConn, String> {
    target.open_raw().await.map_err(|(e, conn)| {
        if let Some(conn) = conn {
            target.account_raw(check, &conn);
        }
        format!("no session to test: {e}")
    })
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
        CheckId::ExitFlush => exit_flush::run(target, progress, result).await,
        CheckId::Stderr => stderr::run(target, progress, result).await,
        // `stdio-v2` only, or the soak (run after the list, by `run`): not
        // in `CheckId::ALL`, never run here.
        CheckId::Selection | CheckId::HeadOfLine | CheckId::Soak => {}
    }
}
