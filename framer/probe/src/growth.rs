//! Answer times of growing requests, for both transports' request-size
//! checks: what the answers so far predict for a larger request (how long
//! to wait for it, and when its silence is deafness rather than
//! slowness), and how those times are reported. Sans-IO: sizes and
//! durations in, waits and evidence out.

use std::time::Duration;

use serde_json::json;

use crate::duration::fmt_duration;
use crate::options::Limits;
use crate::report::CheckResult;

/// `1024 B 0 ms, 2048 B 1 ms, ...`
pub(crate) fn latencies(list: &[(usize, Duration)]) -> String {
    list.iter().map(|(size, took)| format!("{size} B {}", fmt_duration(*took))).collect::<Vec<_>>().join(", ")
}

/// Whether the answer times grow clearly faster than the sizes: the time
/// per byte of the largest request (at least a second) is four times or
/// more that of the first request that took 20 ms or more — a reader that
/// re-copies or re-scans its whole buffer on every read. (Linear readers
/// on a loaded machine stay well under that; a quadratic one over 16× the
/// size is at 16×.)
pub(crate) fn superlinear(list: &[(usize, Duration)]) -> bool {
    let per_byte = |(size, took): &(usize, Duration)| took.as_secs_f64() / *size as f64;
    let (Some(reference), Some(largest)) = (list.iter().find(|(_, t)| *t >= Duration::from_millis(20)), list.last())
    else {
        return false;
    };
    largest.1 >= Duration::from_secs(1)
        && largest.0 >= 4 * reference.0
        && per_byte(largest) >= 4.0 * per_byte(reference)
}

/// How many times the extrapolated time a request may take before its
/// silence counts as deafness: a server whose times steepen by about 1.6
/// more doublings than measured still counts as slow.
const MARGIN: f64 = 3.0;

/// Added to every patience: a fresh process's first large read, a loaded
/// machine.
const SLACK: Duration = Duration::from_secs(2);

/// How the answer times grew, and what that predicts for a larger request.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Growth {
    /// The time factor per doubling of the size, between the two largest
    /// answers: from 2 (linear) to 8 (cubic); a steeper or flatter
    /// measurement is clamped, noise being likelier than either.
    per_doubling: f64,
    /// The largest answered size and its time, the base of the prediction.
    base: (usize, Duration),
    /// The predicted time of the request asked about.
    expected: Duration,
    /// How long it may take before it is deaf: `expected` × [`MARGIN`] +
    /// [`SLACK`].
    pub(crate) patience: Duration,
}

impl Growth {
    /// The prediction for a request of `size` bytes from the answers so
    /// far (`(size, time)`, sizes growing); `None` with fewer than two
    /// distinct sizes. Times under 1 ms count as 1 ms.
    pub(crate) fn predict(answered: &[(usize, Duration)], size: usize) -> Option<Growth> {
        let mut by_size: Vec<(usize, Duration)> = answered.to_vec();
        by_size.sort_by_key(|(s, _)| *s);
        by_size.dedup_by_key(|(s, _)| *s);
        let [.., (s1, t1), (s2, t2)] = by_size[..] else { return None };
        let floor = |t: Duration| t.max(Duration::from_millis(1)).as_secs_f64();
        let exponent = ((floor(t2) / floor(t1)).ln() / (s2 as f64 / s1 as f64).ln()).clamp(1.0, 3.0);
        let expected = floor(t2) * (size as f64 / s2 as f64).max(1.0).powf(exponent);
        let patience = Duration::from_secs_f64(expected * MARGIN) + SLACK;
        Some(Growth {
            per_doubling: 2f64.powf(exponent),
            base: (s2, t2),
            expected: Duration::from_secs_f64(expected),
            patience,
        })
    }

    /// `its answers grew 3.3× per doubling (8388608 B in 665 ms): about
    /// 2.21 s expected for 16777216 B, 8.63 s allowed`
    pub(crate) fn describe(&self, size: usize) -> String {
        format!(
            "its answers grew {:.1}× per doubling ({} B in {}): about {} expected for {size} B, {} allowed",
            self.per_doubling,
            self.base.0,
            fmt_duration(self.base.1),
            fmt_duration(self.expected),
            fmt_duration(self.patience)
        )
    }
}

/// The most a doubling step waits, in `--step-timeout`s, however slowly
/// the answers so far grew: past it, silence is reported as slow, not
/// judged deaf.
pub(crate) const MAX_PATIENCE: u32 = 4;

/// How long a doubling step waits for a request of `size` bytes: as long as
/// the growth so far allows, at least `--step-timeout` and at most
/// [`MAX_PATIENCE`] times it. Measured on the same machine as the answers,
/// the wait scales with the machine's load as they do.
pub(crate) fn doubling_wait(limits: &Limits, answered: &[(usize, Duration)], size: usize) -> Duration {
    let most = limits.step_timeout.saturating_mul(MAX_PATIENCE);
    Growth::predict(answered, size).map_or(limits.step_timeout, |g| g.patience.clamp(limits.step_timeout, most))
}

/// How long a request of `size` bytes is waited for: `--step-timeout`, or
/// less where the growth so far says it is due sooner.
pub(crate) fn wait_for(limits: &Limits, answered: &[(usize, Duration)], size: usize) -> Duration {
    Growth::predict(answered, size).map_or(limits.step_timeout, |g| g.patience.min(limits.step_timeout))
}

/// Reports the answer times of a check's growing requests (`what`: the
/// name and its plural, `("request", "requests")`): the `latency_ms` measurement, the times as
/// information, and the `slow-large-request` behaviour when they grow
/// [`superlinear`]ly.
pub(crate) fn report_answer_times(result: &mut CheckResult, answered: &[(usize, Duration)], what: (&str, &str)) {
    let rows: Vec<_> = answered.iter().map(|(b, t)| json!({"bytes": b, "ms": t.as_millis() as u64})).collect();
    result.measure("latency_ms", json!(rows));
    if !answered.is_empty() {
        result.info(format!("answer times (reported apart from the limit): {}", latencies(answered)));
    }
    if superlinear(answered) {
        result.behaviour("slow-large-request");
        let (one, many) = what;
        result.info(format!("the answer time grows faster than the {one} size: the server reads large {many} slowly"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_growth_so_far_predicts_the_next_answer_with_a_margin() {
        let ms = Duration::from_millis;
        let mib = 1 << 20;
        // desktop-commander 0.2.52: 3.3× per doubling; 16 MiB due in about
        // 2.2 s, so 10 s of silence is deafness.
        let measured = [(2 * mib, ms(60)), (4 * mib, ms(200)), (8 * mib, ms(665))];
        let growth = Growth::predict(&measured, 16 * mib).expect("two answers");
        assert!((growth.per_doubling - 3.325).abs() < 0.01, "{growth:?}");
        assert!((2200..2230).contains(&growth.expected.as_millis()), "{growth:?}");
        assert!(growth.patience < Duration::from_secs(10), "{growth:?}");
        assert!(growth.describe(16 * mib).starts_with("its answers grew 3.3× per doubling (8388608 B in 665 ms)"));
        // A quadratic reader (128 ms per MiB²) over a 1 s wait: slow.
        let quadratic = [(mib, ms(128)), (2 * mib, ms(512))];
        assert!(Growth::predict(&quadratic, 4 * mib).unwrap().patience > Duration::from_secs(1));
        // Fast answers: at least linear growth from 1 ms, plus the slack.
        let fast = Growth::predict(&[(1024, ms(0)), (2048, ms(0))], 4096).unwrap();
        assert_eq!(fast.per_doubling, 2.0);
        assert!(fast.patience >= SLACK && fast.patience < SLACK + ms(10), "{fast:?}");
        // A flat or shrinking time still counts as linear growth; a steep
        // one as cubic at most.
        let steep = Growth::predict(&[(mib, ms(10)), (2 * mib, ms(1000))], 4 * mib).unwrap();
        assert_eq!(steep.per_doubling, 8.0);
        assert_eq!(steep.expected, ms(8000));
        // Fewer than two sizes: no prediction.
        assert_eq!(Growth::predict(&[(mib, ms(5))], 2 * mib), None);
        assert_eq!(Growth::predict(&[(mib, ms(5)), (mib, ms(6))], 2 * mib), None);
    }

    #[test]
    fn only_a_clear_growth_counts_as_superlinear() {
        let ms = Duration::from_millis;
        let mib = 1 << 20;
        // Linear with noise (a loaded machine): not superlinear.
        let noisy = [(mib, ms(80)), (2 * mib, ms(122)), (4 * mib, ms(463)), (8 * mib, ms(542)), (16 * mib, ms(1100))];
        assert!(!superlinear(&noisy));
        // Quadratic: 16 times the size, 256 times the time.
        let quadratic = [(mib, ms(25)), (4 * mib, ms(400)), (16 * mib, ms(6400))];
        assert!(superlinear(&quadratic));
        // Too fast to tell.
        assert!(!superlinear(&[(mib, ms(1)), (16 * mib, ms(300))]));
        assert!(!superlinear(&[]));
    }
}
