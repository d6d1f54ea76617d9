//! `pipe_writer`: a child process that floods its stdout with newline-delimited
//! JSON-RPC frames, for the pipe backpressure benchmarks.
//!
//! # Output
//!
//! stdout carries only frames: copies of one message of the selected
//! [`shapes`](mcp_framer_benches::shapes), each followed by `\n`. The byte stream is
//! written with `write(2)` calls of `--write-size` bytes each (the last one may
//! be shorter), so write boundaries fall anywhere inside frames. stdout is
//! written through a duplicate of fd 1, never through std's line-buffered
//! `Stdout`.
//!
//! At exit it prints one line on stderr:
//!
//! ```text
//! pipe_writer: bytes=<n> frames=<n> write_blocked_us=<n> elapsed_us=<n> writes=<n> pipe_size=<n> cpu=<n|none>
//! ```
//!
//! * `bytes`: every byte written to stdout (`\n` included);
//! * `frames`: complete frames written;
//! * `write_blocked_us`: the sum of the wall-clock durations of every
//!   `write(2)` call on stdout, i.e. the time the writer spent blocked because
//!   the pipe was full (a write into a pipe with room costs about a
//!   microsecond);
//! * `elapsed_us`: from just before the first write to just after the last;
//! * `pipe_size`: the pipe capacity as `F_GETPIPE_SZ` reports it (after
//!   `--pipe-size`), `0` if stdout is not a pipe.
//!
//! # Flags
//!
//! * `--shape request|tools-list|text|notification-text|notification-tools-list|notification-source`
//!   (default `request`): the message, see [`Shape`]; a `notification-<payload>`
//!   is a `notifications/message` whose `data` is that
//!   [`Payload`](mcp_framer_benches::pipe::Payload).
//! * `--frame-bytes N` (default 65536): the exact message size, excluding
//!   `\n`, for every shape but `request` (about 200 B).
//! * `--total-bytes N` (default 64 MiB): write `ceil(N / (frame_bytes + 1))`
//!   frames (at least one).
//! * `--frames N`: write exactly `N` frames (overrides `--total-bytes`).
//! * `--write-size N` (default 65536): bytes per `write(2)` call.
//! * `--pipe-size N`: enlarge (or shrink) the stdout pipe with `F_SETPIPE_SZ`
//!   before writing; the kernel rounds up to a power-of-two number of pages.
//! * `--cpu N`: pin this process to CPU `N` with `sched_setaffinity` before
//!   writing.
//! * `--wait`: once ready to write (message built, pipe sized, CPU pinned),
//!   print `pipe_writer: ready` on stderr and read stdin to its end or to its
//!   first `\n`, whichever comes first, before the first write. A benchmark
//!   closes the child's stdin (or, when a client library owns it, sends one
//!   line) to start the clock without counting process start-up or message
//!   construction.
//!
//! Exit status: 0 after writing everything; 1 if stdout fails (for example
//! `EPIPE` because the reader went away), after printing the stderr line with
//! the counts so far; 2 on bad flags.

use std::fs::File;
use std::io::{self, BufRead, Write};
use std::os::fd::AsFd;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use mcp_framer_benches::pipe::Shape;
use rustix::pipe::{fcntl_getpipe_size, fcntl_setpipe_size};
use rustix::thread::{CpuSet, sched_setaffinity};

struct Options {
    shape: Shape,
    frame_bytes: usize,
    total_bytes: u64,
    frames: Option<u64>,
    write_size: usize,
    pipe_size: Option<usize>,
    cpu: Option<usize>,
    wait: bool,
}

impl Options {
    fn parse(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
        let mut options = Options {
            shape: Shape::Request,
            frame_bytes: 64 << 10,
            total_bytes: 64 << 20,
            frames: None,
            write_size: 64 << 10,
            pipe_size: None,
            cpu: None,
            wait: false,
        };
        while let Some(flag) = args.next() {
            if flag == "--wait" {
                options.wait = true;
                continue;
            }
            let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
            if flag == "--shape" {
                options.shape = value.parse()?;
                continue;
            }
            let number = value.parse::<u64>().map_err(|e| format!("{flag} {value}: {e}"))?;
            let size = usize::try_from(number).map_err(|e| format!("{flag} {value}: {e}"))?;
            match flag.as_str() {
                "--frame-bytes" => options.frame_bytes = size,
                "--total-bytes" => options.total_bytes = number,
                "--frames" => options.frames = Some(number),
                "--write-size" => options.write_size = size,
                "--pipe-size" => options.pipe_size = Some(size),
                "--cpu" => options.cpu = Some(size),
                _ => return Err(format!("unknown flag {flag}")),
            }
        }
        if options.write_size == 0 {
            return Err("--write-size must be positive".into());
        }
        Ok(options)
    }

    fn frames(&self, line_len: usize) -> u64 {
        self.frames.unwrap_or_else(|| self.total_bytes.div_ceil(line_len as u64).max(1))
    }
}

/// Counts kept while writing.
#[derive(Default)]
struct Counts {
    bytes: u64,
    blocked: Duration,
    writes: u64,
}

/// Writes `total` bytes of the periodic stream of `line`s, `write_size` bytes
/// per call, timing each call.
fn write_stream(out: &mut File, line: &[u8], total: u64, write_size: usize, counts: &mut Counts) -> io::Result<()> {
    // Any `write_size` bytes of the stream starting at offset `o` are the
    // contiguous slice `period[o % line.len()..]` of enough repeated lines.
    let copies = write_size.div_ceil(line.len()) + 1;
    let period = line.repeat(copies);
    while counts.bytes < total {
        let offset = (counts.bytes % line.len() as u64) as usize;
        let want = (total - counts.bytes).min(write_size as u64) as usize;
        let chunk = &period[offset..offset + want];
        let start = Instant::now();
        let result = out.write(chunk);
        counts.blocked += start.elapsed();
        counts.writes += 1;
        match result {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => counts.bytes += n as u64,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn pin_to(cpu: usize) -> io::Result<()> {
    let mut set = CpuSet::new();
    set.set(cpu);
    sched_setaffinity(None, &set)?;
    Ok(())
}

fn main() -> ExitCode {
    let options = match Options::parse(std::env::args().skip(1)) {
        Ok(options) => options,
        Err(e) => {
            eprintln!("pipe_writer: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(cpu) = options.cpu
        && let Err(e) = pin_to(cpu)
    {
        eprintln!("pipe_writer: cannot pin to CPU {cpu}: {e}");
        return ExitCode::from(2);
    }
    let mut out = match io::stdout().as_fd().try_clone_to_owned() {
        Ok(fd) => File::from(fd),
        Err(e) => {
            eprintln!("pipe_writer: cannot duplicate stdout: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(size) = options.pipe_size
        && let Err(e) = fcntl_setpipe_size(&out, size)
    {
        eprintln!("pipe_writer: F_SETPIPE_SZ {size}: {e}");
        return ExitCode::from(2);
    }
    let pipe_size = fcntl_getpipe_size(&out).unwrap_or(0);

    let mut line = options.shape.message(options.frame_bytes);
    line.push(b'\n');
    if options.wait {
        eprintln!("pipe_writer: ready");
        if let Err(e) = io::stdin().lock().read_until(b'\n', &mut Vec::new()) {
            eprintln!("pipe_writer: waiting on stdin: {e}");
            return ExitCode::FAILURE;
        }
    }
    let total = options.frames(line.len()) * line.len() as u64;
    let mut counts = Counts::default();
    let start = Instant::now();
    let result = write_stream(&mut out, &line, total, options.write_size, &mut counts);
    let elapsed = start.elapsed();
    drop(out);

    let cpu = options.cpu.map_or_else(|| "none".to_string(), |cpu| cpu.to_string());
    eprintln!(
        "pipe_writer: bytes={} frames={} write_blocked_us={} elapsed_us={} writes={} pipe_size={pipe_size} cpu={cpu}",
        counts.bytes,
        counts.bytes / line.len() as u64,
        counts.blocked.as_micros(),
        elapsed.as_micros(),
        counts.writes,
    );
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pipe_writer: stdout: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Options, String> {
        Options::parse(s.split_whitespace().map(String::from))
    }

    #[test]
    fn frame_count_rounds_up_to_whole_frames() {
        assert_eq!(parse("--total-bytes 402").unwrap().frames(201), 2);
        assert_eq!(parse("--total-bytes 403").unwrap().frames(201), 3);
        assert_eq!(parse("--total-bytes 0").unwrap().frames(201), 1);
        assert_eq!(parse("--frames 7 --total-bytes 1000000").unwrap().frames(201), 7);
    }

    #[test]
    fn flags_are_checked() {
        let options = parse("--shape text --frame-bytes 4096 --wait --cpu 1").unwrap();
        assert_eq!((options.shape, options.frame_bytes, options.wait, options.cpu), (Shape::Text, 4096, true, Some(1)));
        assert!(parse("--shape nope").is_err());
        assert!(parse("--write-size 0").is_err());
        assert!(parse("--frames").is_err());
        assert!(parse("--bogus 1").is_err());
    }

    #[test]
    fn every_write_slice_continues_the_stream() {
        let mut line = Shape::Request.message(0);
        line.push(b'\n');
        let (read, write) = std::io::pipe().unwrap();
        let reader = std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let mut read = read;
            std::io::Read::read_to_end(&mut read, &mut bytes).unwrap();
            bytes
        });
        let mut out = File::from(std::os::fd::OwnedFd::from(write));
        let mut counts = Counts::default();
        let total = 5 * line.len() as u64;
        write_stream(&mut out, &line, total, 77, &mut counts).unwrap();
        drop(out);
        assert_eq!(reader.join().unwrap(), line.repeat(5));
        assert_eq!(counts.writes, total.div_ceil(77));
    }
}
