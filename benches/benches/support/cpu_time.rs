//! A criterion measurement of the benchmarking thread's CPU time, for
//! `MCP_BENCH_CLOCK=cpu` (which `scripts/bench-report` sets for the suites
//! marked `cpu_time` in `benches/report.toml`).
//!
//! Wall-clock time counts the time the thread spends descheduled. On a
//! loaded 2-core machine that is most of it: 30 back-to-back runs of the
//! same 32 MiB scan took 5.3 to 25 ms wall-clock and 4.7 to 5.5 ms of CPU
//! time.
//! `CLOCK_THREAD_CPUTIME_ID` counts only the time the thread runs; caches
//! evicted by other processes still cost, so it is not noise-free either.
//! Include with `#[path = "support/cpu_time.rs"] mod cpu_time;`.

use criterion::measurement::{Measurement, ValueFormatter, WallTime};
use rustix::time::{ClockId, clock_gettime};

/// Whether `MCP_BENCH_CLOCK=cpu` asks for [`ThreadCpuTime`].
pub fn requested() -> bool {
    std::env::var("MCP_BENCH_CLOCK").is_ok_and(|v| v == "cpu")
}

/// The CPU time of the calling thread, in nanoseconds, as a criterion
/// measurement. Values are nanoseconds, formatted like wall-clock time.
#[derive(Clone, Copy, Debug)]
pub struct ThreadCpuTime;

fn now_ns() -> u64 {
    let t = clock_gettime(ClockId::ThreadCPUTime);
    u64::try_from(t.tv_sec).expect("CPU time is positive") * 1_000_000_000
        + u64::try_from(t.tv_nsec).expect("nanoseconds are positive")
}

/// Its formatter is wall-clock time's: both are nanoseconds.
static NANOSECONDS: WallTime = WallTime;

impl Measurement for ThreadCpuTime {
    type Intermediate = u64;
    type Value = u64;

    fn start(&self) -> u64 {
        now_ns()
    }

    fn end(&self, start: u64) -> u64 {
        now_ns() - start
    }

    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }

    fn zero(&self) -> u64 {
        0
    }

    fn to_f64(&self, value: &u64) -> f64 {
        *value as f64
    }

    fn formatter(&self) -> &dyn ValueFormatter {
        NANOSECONDS.formatter()
    }
}

/// Criterion as every suite here configures it: shorter warm-up and
/// measurement and fewer bootstrap resamples under `MCP_BENCH_QUICK`, then the
/// command-line arguments.
pub fn configured<M: Measurement>(c: criterion::Criterion<M>) -> criterion::Criterion<M> {
    let c = c.nresamples(mcp_framer_benches::shapes::resamples());
    let c = if mcp_framer_benches::shapes::quick() {
        c.warm_up_time(std::time::Duration::from_millis(500)).measurement_time(std::time::Duration::from_secs(2))
    } else {
        c
    };
    c.configure_from_args()
}

/// A `main` that runs `$run` with wall-clock time, or with thread CPU time
/// when `MCP_BENCH_CLOCK=cpu`.
#[macro_export]
macro_rules! bench_main {
    ($run:ident) => {
        fn main() {
            if cpu_time::requested() {
                $run(criterion::Criterion::default().with_measurement(cpu_time::ThreadCpuTime))
            } else {
                $run(criterion::Criterion::default())
            }
        }
    };
}
