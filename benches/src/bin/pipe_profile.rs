//! `pipe_profile`: one pipe strategy, run in a loop for a profiler (issue 31,
//! "where a message's CPU goes"; the record is
//! `benches/records/profiles/2026-12-02-host-session.txt`).
//!
//! Runs the pipe bench's `host-session`, `raw-drain` or `hand-written`
//! strategy ([`mcp_framer_benches::readers`], the code the bench runs)
//! against the real `pipe_writer` child (`notifications/message` whose `data` is one flat
//! text string, 64 KiB writes, default pipe, unpinned), `--runs` times, on a
//! tokio runtime of the flavour asked (`multi`: the default multi-thread
//! runtime; `current`: one thread, as the pipe bench's `block_on`). Prints,
//! per run and in total, the process's CPU time over the timed window
//! (`CLOCK_PROCESS_CPUTIME_ID`, every thread, the child excluded) per MiB,
//! and the user/system split from `/proc/self/stat` (10 ms ticks: read it
//! over several runs). No empty baseline is taken off: a run of 64 MiB
//! spends well under 1% of its CPU on start-up and exit.
//!
//! ```text
//! pipe_profile <host-session|raw-drain|hand-written> <frame bytes> [--mib N] [--runs N] [--flavor multi|current] [--child-cpu N]
//! ```
//!
//! `--child-cpu N` pins the child to CPU `N` (`pipe_writer --cpu`); pin this
//! process with `taskset` (`taskset -c 0 pipe_profile … --child-cpu 1`: split
//! CPUs; `taskset -c 0 pipe_profile …`: the child inherits CPU 0, same CPU).
//!
//! Run it under `perf record` / `perf stat` / `strace -c -f` (the child is
//! another process: filter it out by command name, `pipe_writer`).

use std::process::ExitCode;
use std::time::Duration;

use mcp_framer_benches::pipe::{self, Payload, Shape, Writer};
use mcp_framer_benches::readers;

const TIMEOUT: Duration = Duration::from_secs(120);

fn main() -> ExitCode {
    match run(std::env::args().skip(1).collect()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pipe_profile: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `pipe_writer`, built beside this binary.
fn writer_exe() -> Result<String, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let writer = exe.with_file_name("pipe_writer");
    writer.exists().then(|| writer.to_string_lossy().into_owned()).ok_or_else(|| {
        format!("{} not built (cargo build --profile bench -p mcp-framer-benches --bin pipe_writer)", writer.display())
    })
}

fn run(args: Vec<String>) -> Result<(), String> {
    let usage = "pipe_profile <host-session|raw-drain|hand-written> <frame bytes> [--mib N] [--runs N] [--flavor multi|current] [--child-cpu N]";
    let strategy = args.first().ok_or(usage)?.clone();
    let frame_bytes: usize = args.get(1).ok_or(usage)?.parse().map_err(|e| format!("frame bytes: {e}"))?;
    let (mut mib, mut runs, mut flavor, mut child_cpu) = (64u64, 5usize, "multi".to_owned(), None);
    let mut rest = args[2..].iter();
    while let Some(flag) = rest.next() {
        let value = rest.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--mib" => mib = value.parse().map_err(|e| format!("--mib: {e}"))?,
            "--runs" => runs = value.parse().map_err(|e| format!("--runs: {e}"))?,
            "--flavor" => flavor = value.clone(),
            "--child-cpu" => child_cpu = Some(value.parse().map_err(|e| format!("--child-cpu: {e}"))?),
            _ => return Err(format!("unknown flag {flag}; {usage}")),
        }
    }
    let runtime = match flavor.as_str() {
        "multi" => tokio::runtime::Builder::new_multi_thread().enable_all().build(),
        "current" => tokio::runtime::Builder::new_current_thread().enable_all().build(),
        other => return Err(format!("unknown flavor {other}")),
    }
    .map_err(|e| format!("runtime: {e}"))?;
    let writer =
        Writer { cpu: child_cpu, ..Writer::with_total(Shape::Notification(Payload::Text), frame_bytes, mib << 20) };
    let mib_per_run = writer.bytes() as f64 / f64::from(1 << 20);
    println!(
        "strategy={strategy} frame_bytes={frame_bytes} line_len={} frames={} MiB/run={mib_per_run:.2} runs={runs} flavor={flavor}",
        writer.line_len, writer.frames
    );
    let exe = writer_exe()?;
    let (mut cpu_total, mut ticks_total) = (Duration::ZERO, (0u64, 0u64, 0u64));
    let mut per_run = Vec::with_capacity(runs);
    for i in 0..runs {
        let ticks = stat_ticks()?;
        let run = match strategy.as_str() {
            "host-session" => runtime.block_on(readers::run_session(&exe, &writer, TIMEOUT))?,
            "raw-drain" => {
                let run = pipe::run(&exe, &writer, TIMEOUT, readers::raw_drain)?;
                if run.count != writer.bytes() {
                    return Err(format!("read {} bytes of {}", run.count, writer.bytes()));
                }
                run
            }
            "hand-written" => {
                let run = pipe::run(&exe, &writer, TIMEOUT, |stdout| {
                    runtime
                        .block_on(async { readers::hand_written(tokio::process::ChildStdout::from_std(stdout)?).await })
                })?;
                if run.count != writer.frames {
                    return Err(format!("read {} frames of {}", run.count, writer.frames));
                }
                run
            }
            other => return Err(format!("unknown strategy {other}; {usage}")),
        };
        let after = stat_ticks()?;
        ticks_total.0 += after.0 - ticks.0;
        ticks_total.1 += after.1 - ticks.1;
        ticks_total.2 += after.2 - ticks.2;
        cpu_total += run.cpu;
        per_run.push(run.cpu.as_secs_f64() * 1e3 / mib_per_run);
        println!(
            "run {i}: cpu_ms_per_mib={:.3} wall_ms={:.1} mib_per_s={:.0}",
            run.cpu.as_secs_f64() * 1e3 / mib_per_run,
            run.elapsed.as_secs_f64() * 1e3,
            mib_per_run / run.elapsed.as_secs_f64()
        );
    }
    let total_mib = mib_per_run * runs as f64;
    per_run.sort_by(f64::total_cmp);
    println!(
        "total: median_cpu_ms_per_mib={:.3} min={:.3} max={:.3} cpu_ms_per_mib={:.3} ns_per_message={:.0} user_ticks={} sys_ticks={} (user {:.0}%) minor_faults_per_mib={:.1} (ticks and faults of the whole run, spawn included)",
        per_run.get(runs / 2).copied().unwrap_or(f64::NAN),
        per_run.first().copied().unwrap_or(f64::NAN),
        per_run.last().copied().unwrap_or(f64::NAN),
        cpu_total.as_secs_f64() * 1e3 / total_mib,
        cpu_total.as_nanos() as f64 / (writer.frames as f64 * runs as f64),
        ticks_total.0,
        ticks_total.1,
        100.0 * ticks_total.0 as f64 / (ticks_total.0 + ticks_total.1).max(1) as f64,
        ticks_total.2 as f64 / total_mib
    );
    Ok(())
}

/// utime and stime of this process, in clock ticks, and its minor page
/// faults (`/proc/self/stat`).
fn stat_ticks() -> Result<(u64, u64, u64), String> {
    let stat = std::fs::read_to_string("/proc/self/stat").map_err(|e| format!("/proc/self/stat: {e}"))?;
    // Fields after the command name (which ends at the last ')'): state is
    // field 3, utime 14, stime 15.
    let rest = &stat[stat.rfind(')').ok_or("no ')' in /proc/self/stat")? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3).and_then(|v| v.parse().ok()).ok_or("short /proc/self/stat");
    Ok((field(14)?, field(15)?, field(10)?))
}
