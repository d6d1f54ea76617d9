//! What a soak measures, in memory it can state: latency histograms of a
//! fixed size, RSS samples (one a second), and the arithmetic of the
//! verdict (medians by third, the slope). Shared by `mcp-probe --soak` and
//! the project's own soak (`framer/e2e`, `scripts/soak`).
//!
//! ```
//! use std::time::Duration;
//! use mcp_probe::stats::{Histogram, thirds};
//!
//! let mut latency = Histogram::default();
//! for ms in 1..=100 {
//!     latency.record(Duration::from_millis(ms));
//! }
//! assert!(latency.quantile_us(0.5) >= 50_000 && latency.quantile_us(0.5) <= 53_125);
//! assert_eq!(latency.max_us(), 100_000);
//! assert_eq!(thirds(&[1.0, 1.0, 2.0, 2.0, 9.0, 9.0]), [1.0, 2.0, 9.0]);
//! ```

use std::time::Duration;

/// Sub-buckets per power of two: percentiles within 1/16 (6 %).
const SUB: u32 = 16;
/// Microseconds up to 2^36 (19 hours).
const BUCKETS: usize = (37 * SUB) as usize;

/// A latency histogram in microseconds: log-linear buckets, a fixed
/// 4.7 KiB whatever the number of calls, so counting does not move the RSS
/// it measures. The maximum is exact.
#[derive(Debug, Clone)]
pub struct Histogram {
    counts: Box<[u64; BUCKETS]>,
    count: u64,
    max_us: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram { counts: Box::new([0; BUCKETS]), count: 0, max_us: 0 }
    }
}

fn bucket_of(us: u64) -> usize {
    let us = us.max(1);
    let power = 63 - us.leading_zeros();
    let index = if power < SUB.trailing_zeros() {
        us as u32
    } else {
        let shift = power - SUB.trailing_zeros();
        let sub = ((us >> shift) as u32) - SUB;
        (shift + 1) * SUB + sub
    };
    (index as usize).min(BUCKETS - 1)
}

/// The upper edge of bucket `index`, in microseconds.
fn bucket_top(index: usize) -> u64 {
    let index = index as u32;
    if index < SUB {
        return u64::from(index);
    }
    let shift = index / SUB - 1;
    let sub = index % SUB;
    (u64::from(SUB + sub + 1) << shift) - 1
}

impl Histogram {
    /// Counts one latency.
    pub fn record(&mut self, latency: Duration) {
        let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.counts[bucket_of(us)] += 1;
        self.count += 1;
        self.max_us = self.max_us.max(us);
    }

    /// Adds `other`'s counts.
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += b;
        }
        self.count += other.count;
        self.max_us = self.max_us.max(other.max_us);
    }

    /// How many were counted.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The largest, exact, in microseconds.
    pub fn max_us(&self) -> u64 {
        self.max_us
    }

    /// The `q` quantile (0..=1) in microseconds: the top of its bucket (at
    /// most 1/16 above), never above the maximum. 0 when empty.
    pub fn quantile_us(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (index, n) in self.counts.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return bucket_top(index).min(self.max_us);
            }
        }
        self.max_us
    }
}

/// `VmRSS` (or another `Vm*` field) of `/proc/<pid>/status` in KiB (Linux).
pub fn proc_status_kib(pid: &str, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|line| {
        let rest = line.strip_prefix(field)?.strip_prefix(':')?;
        rest.trim().strip_suffix("kB")?.trim().parse().ok()
    })
}

/// The median of `values` (0 when empty).
pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    if sorted.len().is_multiple_of(2) { (sorted[mid - 1] + sorted[mid]) / 2.0 } else { sorted[mid] }
}

/// The medians of the first, middle and last thirds of `series` (by
/// sample, the samples being a second apart).
pub fn thirds(series: &[f64]) -> [f64; 3] {
    let n = series.len();
    let cut = |i: usize| i * n / 3;
    [median(&series[..cut(1)]), median(&series[cut(1)..cut(2)]), median(&series[cut(2)..])]
}

/// The least-squares slope of `(t, y)`, in y per unit of t (0 with fewer
/// than two points).
pub fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    if points.len() < 2 {
        return 0.0;
    }
    let (mt, my) = points.iter().fold((0.0, 0.0), |(a, b), (t, y)| (a + t / n, b + y / n));
    let (num, den) =
        points.iter().fold((0.0, 0.0), |(num, den), (t, y)| (num + (t - mt) * (y - my), den + (t - mt) * (t - mt)));
    if den == 0.0 { 0.0 } else { num / den }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_within_a_sixteenth_and_never_above_the_max() {
        let mut h = Histogram::default();
        for us in 1..=10_000u64 {
            h.record(Duration::from_micros(us));
        }
        for (q, exact) in [(0.5, 5000.0), (0.99, 9900.0)] {
            let got = h.quantile_us(q) as f64;
            assert!(got >= exact && got <= exact * 1.07, "q{q}: {got} for {exact}");
        }
        assert_eq!((h.quantile_us(1.0), h.max_us(), h.count()), (10_000, 10_000, 10_000));
        assert_eq!(Histogram::default().quantile_us(0.5), 0);
        for us in [0, 1, 15, 16, 17, 1000, 1 << 30] {
            assert!(bucket_top(bucket_of(us)) >= us, "{us}");
        }
    }

    #[test]
    fn thirds_medians_and_slope() {
        let series: Vec<f64> = (0..9).map(f64::from).collect();
        assert_eq!(thirds(&series), [1.0, 4.0, 7.0]);
        assert_eq!(median(&[3.0, 1.0, 2.0, 10.0]), 2.5);
        let line: Vec<(f64, f64)> = (0..10).map(|t| (f64::from(t), 2.0 * f64::from(t) + 1.0)).collect();
        assert!((slope(&line) - 2.0).abs() < 1e-9);
        assert!(proc_status_kib("self", "VmRSS").is_some_and(|kib| kib > 0));
    }
}
