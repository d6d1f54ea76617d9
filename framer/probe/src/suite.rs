//! The loop that runs one transport's list of checks, in order: each
//! selected check under `--check-timeout`, timed and shown, with the
//! server trees it started killed once it ends (so a wedged server does not
//! burn CPU during the next check). A deselected check is SKIP. A gate check
//! (stdio-v2's selection: every other check needs the session it finds) runs
//! even when deselected, and when it FAILs every check after it is SKIP.
//!
//! The transports differ only in the list, the gate and how one check runs
//! ([`crate::checks::run_all`], [`crate::v2::run_all`]).

use std::time::Instant;

use crate::check_id::CheckId;
use crate::duration::within;
use crate::progress::Progress;
use crate::report::{CheckResult, Verdict};
use crate::target::Target;

/// A check every later check needs, and what those are reported as when it
/// FAILs.
pub(crate) struct Gate {
    pub(crate) check: CheckId,
    pub(crate) skipped: &'static str,
}

/// Runs `checks` in order with `run_one`, numbering each by its place in
/// the list. An error from `run_one` ends the run (the probe itself could
/// not go on); a check that outlasts `--check-timeout` FAILs and the next
/// one runs.
pub(crate) async fn run<E>(
    target: &Target,
    checks: &[CheckId],
    gate: Option<Gate>,
    mut run_one: impl AsyncFnMut(CheckId, &Progress, &mut CheckResult) -> Result<(), E>,
) -> Result<Vec<CheckResult>, E> {
    let limits = &target.limits;
    let selected = |c: CheckId| target.options.selected(c);
    let is_gate = |c: CheckId| gate.as_ref().is_some_and(|g| g.check == c);
    let progress = Progress::new(checks.iter().filter(|&&c| selected(c)).count(), target.options.quiet);
    let fresh =
        |place: usize, check: CheckId| CheckResult::new(place as u8 + 1, check.name(), check.title(), check.why());
    let mut results = Vec::with_capacity(checks.len());
    let mut shown = 0;
    let mut gate_failed = false;
    for (place, &check) in checks.iter().enumerate() {
        let mut result = fresh(place, check);
        if !selected(check) && !is_gate(check) {
            result.skip("not selected (--only / --skip)");
            results.push(result);
            continue;
        }
        if gate_failed && let Some(gate) = &gate {
            result.skip(gate.skipped);
            results.push(result);
            continue;
        }
        if selected(check) {
            progress.start(shown, check);
            shown += 1;
        }
        let started = Instant::now();
        match tokio::time::timeout(limits.check_timeout, run_one(check, &progress, &mut result)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(_) => result.note(
                Verdict::Fail,
                format!("the check did not finish {} (--check-timeout)", within(limits.check_timeout)),
            ),
        }
        result.duration_ms = started.elapsed().as_millis() as u64;
        target.kill_trees();
        if is_gate(check) {
            gate_failed = result.verdict == Verdict::Fail;
            if !selected(check) && !gate_failed {
                // It ran for the checks after it; the check itself was not
                // asked for. (A failed gate is reported all the same: it is
                // why every check after it is skipped.)
                result = fresh(place, check);
                result.skip("not selected (--only / --skip)");
                results.push(result);
                continue;
            }
        }
        progress.done(&result);
        results.push(result);
    }
    progress.finish();
    Ok(results)
}
