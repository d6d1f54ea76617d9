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

use crate::check_id::CheckId;
use crate::progress::Progress;
use crate::report::{CheckResult, Verdict};
use crate::target::Target;

/// Runs the checks selected by `--only` / `--skip`, in order
/// ([`crate::suite::run`]); deselected checks are reported as SKIP.
pub(crate) async fn run_all(target: &Target) -> Vec<CheckResult> {
    let run = async |check, progress: &Progress, result: &mut CheckResult| {
        run_one(check, target, progress, result).await;
        Ok::<(), std::convert::Infallible>(())
    };
    let Ok(mut results) = crate::suite::run(target, &CheckId::ALL, None, run).await;
    if let Some(hygiene) = results.iter_mut().find(|r| r.name == CheckId::StdoutHygiene.name())
        && hygiene.verdict != Verdict::Skip
    {
        hygiene::finish(target, hygiene);
    }
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
