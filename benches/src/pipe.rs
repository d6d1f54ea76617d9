//! Driving the `pipe_writer` child from the pipe benchmarks: its command line,
//! its stderr report, one timed run, CPU placement, and a watchdog that kills
//! it if a run hangs.

use std::io::{self, BufRead, BufReader, Read};
use std::process::{ChildStdout, Command, Stdio};
use std::str::FromStr;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process};
use rustix::thread::{CpuSet, sched_getaffinity, sched_setaffinity};

use crate::shapes;

/// The message the child repeats: the three shapes of [`shapes`], or a
/// `notifications/message` carrying one of the [`Payload`]s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// [`shapes::tools_call_request`]: about 200 B whatever the size asked.
    Request,
    /// [`shapes::tools_list_result`] of the size asked.
    ToolsList,
    /// [`shapes::large_text_result`] of the size asked.
    Text,
    /// A `notifications/message` (an MCP log message) of exactly the size
    /// asked whose `data` is the payload (see [`notification_with`]): what
    /// any MCP client, rmcp's included, takes from a server unasked, so every
    /// reader can be compared on it.
    Notification(Payload),
}

/// What a `notifications/message`'s `data` holds: the payload decides what a
/// reader that builds values pays per byte, so every pipe benchmark names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Payload {
    /// One flat JSON string of plain ASCII words: nothing to escape, no
    /// nested value; what a full JSON parser reads fastest.
    Text,
    /// A [`shapes::tools_list_result`]: many small objects (a `tools/list`
    /// result with its JSON Schemas), costly to build as a value.
    ToolsList,
    /// A [`shapes::large_text_result`]: a `tools/call` result whose one
    /// string is escaped source text (quotes, tabs, escaped newlines, a
    /// little non-ASCII).
    Source,
}

impl Payload {
    /// Every payload.
    pub const ALL: [Payload; 3] = [Payload::Text, Payload::ToolsList, Payload::Source];

    /// The name in benchmark ids and `pipe_writer --shape notification-<name>`.
    pub fn name(self) -> &'static str {
        match self {
            Payload::Text => "text",
            Payload::ToolsList => "tools-list",
            Payload::Source => "source",
        }
    }

    /// The payload [`notification`] picks for a size, the way a server's
    /// data grows: a log line under 4 KiB, a structured value under 512 KiB,
    /// a large escaped text above.
    pub fn by_size(bytes: usize) -> Payload {
        if bytes < 4 << 10 {
            Payload::Text
        } else if bytes < 512 << 10 {
            Payload::ToolsList
        } else {
            Payload::Source
        }
    }
}

impl Shape {
    /// The message, without its `\n`.
    pub fn message(self, bytes: usize) -> Vec<u8> {
        match self {
            Shape::Request => shapes::tools_call_request(1),
            Shape::ToolsList => shapes::tools_list_result(bytes),
            Shape::Text => shapes::large_text_result(bytes),
            Shape::Notification(payload) => notification_with(payload, bytes),
        }
    }

    /// The name `pipe_writer --shape` takes.
    pub fn name(self) -> &'static str {
        match self {
            Shape::Request => "request",
            Shape::ToolsList => "tools-list",
            Shape::Text => "text",
            Shape::Notification(Payload::Text) => "notification-text",
            Shape::Notification(Payload::ToolsList) => "notification-tools-list",
            Shape::Notification(Payload::Source) => "notification-source",
        }
    }

    /// Every shape.
    pub const ALL: [Shape; 6] = [
        Shape::Request,
        Shape::ToolsList,
        Shape::Text,
        Shape::Notification(Payload::Text),
        Shape::Notification(Payload::ToolsList),
        Shape::Notification(Payload::Source),
    ];
}

impl FromStr for Shape {
    type Err = String;

    fn from_str(s: &str) -> Result<Shape, String> {
        Shape::ALL.into_iter().find(|shape| shape.name() == s).ok_or_else(|| {
            let names: Vec<&str> = Shape::ALL.iter().map(|shape| shape.name()).collect();
            format!("unknown shape {s:?} ({})", names.join(", "))
        })
    }
}

/// The `notifications/message` message around a payload.
const NOTE_HEAD: &str =
    r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","logger":"bench","data":"#;
const NOTE_TAIL: &str = "}}";

/// A `notifications/message` of exactly `bytes` bytes (or the smallest one,
/// if `bytes` is smaller), without its `\n`, with the payload
/// [`Payload::by_size`] picks for that size. The CI gate's
/// `host_reader.note_*` benches read these.
pub fn notification(bytes: usize) -> Vec<u8> {
    notification_with(Payload::by_size(bytes), bytes)
}

/// A `notifications/message` of exactly `bytes` bytes (or the smallest one,
/// if `bytes` is smaller), without its `\n`, whose `data` is `payload`.
pub fn notification_with(payload: Payload, bytes: usize) -> Vec<u8> {
    let inner = bytes.saturating_sub(NOTE_HEAD.len() + NOTE_TAIL.len());
    let data = match payload {
        Payload::Text => {
            const WORDS: &[u8] = b"lorem ipsum dolor sit amet ";
            let mut text = vec![b'"'];
            text.extend(WORDS.iter().cycle().take(inner.saturating_sub(2)));
            text.push(b'"');
            text
        }
        Payload::ToolsList => shapes::tools_list_result(inner),
        Payload::Source => shapes::large_text_result(inner),
    };
    [NOTE_HEAD.as_bytes(), &data, NOTE_TAIL.as_bytes()].concat()
}

/// What the `pipe_writer` child writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Writer {
    /// The message.
    pub shape: Shape,
    /// The message size asked for (see [`Shape`]).
    pub frame_bytes: usize,
    /// The message size on the wire, `\n` included.
    pub line_len: usize,
    /// Number of frames.
    pub frames: u64,
    /// Bytes per `write(2)` call.
    pub write_size: usize,
    /// `F_SETPIPE_SZ` on the child's stdout, if set.
    pub pipe_size: Option<usize>,
    /// CPU the child pins itself to, if set.
    pub cpu: Option<usize>,
}

impl Writer {
    /// Enough `shape` messages of `frame_bytes` to make at least
    /// `total_bytes` (and at least one frame), written 64 KiB per call,
    /// default pipe, no pinning. Builds the message once to learn its size.
    pub fn with_total(shape: Shape, frame_bytes: usize, total_bytes: u64) -> Writer {
        let line_len = shape.message(frame_bytes).len() + 1;
        let frames = total_bytes.div_ceil(line_len as u64).max(1);
        Writer { shape, frame_bytes, line_len, frames, write_size: 64 << 10, pipe_size: None, cpu: None }
    }

    /// Bytes on the wire: every frame plus its `\n`.
    pub fn bytes(&self) -> u64 {
        self.frames * self.line_len as u64
    }

    /// The command that runs the child at `exe` with `--wait`: stdin, stdout
    /// and stderr piped. [`run`] drives it.
    pub fn command(&self, exe: &str) -> Command {
        let mut command = Command::new(exe);
        command.arg("--wait").arg("--shape").arg(self.shape.name());
        command.arg("--frame-bytes").arg(self.frame_bytes.to_string());
        command.arg("--frames").arg(self.frames.to_string());
        command.arg("--write-size").arg(self.write_size.to_string());
        if let Some(size) = self.pipe_size {
            command.arg("--pipe-size").arg(size.to_string());
        }
        if let Some(cpu) = self.cpu {
            command.arg("--cpu").arg(cpu.to_string());
        }
        command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        command
    }
}

/// One run of the child, as [`run`] measured it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    /// When the child was told to start writing.
    pub started: Instant,
    /// From the start signal to the child's exit, reading included.
    pub elapsed: Duration,
    /// The CPU time this process (every thread of the reader: tasks,
    /// runtime, user and kernel time) spent over the same span
    /// ([`ProcessCpu`]); the child's own CPU is not in it.
    pub cpu: Duration,
    /// What the reader returned (a frame or byte count).
    pub count: u64,
    /// The child's own report.
    pub report: Report,
}

/// Spawns the child for `writer`, waits until it is ready, starts the clock
/// and lets it write, hands its stdout to `read` (which reads to EOF and
/// returns what it counted), waits for the child and stops the clock.
/// Process start-up and message construction are not timed.
///
/// A watchdog kills the child after `timeout`. Errors (never a hang): the
/// child failed to start, died, was killed by the watchdog, exited non-zero,
/// did not write everything, or `read` failed.
pub fn run(
    exe: &str,
    writer: &Writer,
    timeout: Duration,
    read: impl FnOnce(ChildStdout) -> io::Result<u64>,
) -> Result<Run, String> {
    let mut child = writer.command(exe).spawn().map_err(|e| format!("spawn {exe}: {e}"))?;
    let watchdog = Watchdog::arm(child.id(), timeout);
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let (Some(stdin), Some(stdout), Some(stderr)) = (stdin, stdout, stderr) else {
        unreachable!("all three are piped");
    };
    let mut stderr = BufReader::new(stderr);
    let mut ready = String::new();
    stderr.read_line(&mut ready).map_err(|e| format!("child stderr: {e}"))?;
    if ready.trim_end() != "pipe_writer: ready" {
        let _ = child.kill();
        let _ = child.wait();
        return Err(format!("child not ready: {ready:?}"));
    }
    let cpu = ProcessCpu::start();
    let start = Instant::now();
    drop(stdin);
    let count = read(stdout);
    let status = child.wait().map_err(|e| format!("wait: {e}"));
    let elapsed = start.elapsed();
    let cpu = cpu.elapsed();
    let fired = watchdog.fired();
    drop(watchdog);
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).map_err(|e| format!("child stderr: {e}"))?;
    if fired {
        return Err(format!("the watchdog killed the child after {timeout:?}; stderr: {rest:?}"));
    }
    let count = count.map_err(|e| format!("reading the child's stdout: {e}"))?;
    let status = status?;
    if !status.success() {
        return Err(format!("child {status}; stderr: {rest:?}"));
    }
    let report = Report::parse(&rest)?;
    if (report.bytes, report.frames) != (writer.bytes(), writer.frames) {
        return Err(format!("child wrote {report:?}, expected {} bytes in {} frames", writer.bytes(), writer.frames));
    }
    Ok(Run { started: start, elapsed, cpu, count, report })
}

/// The CPU time of this whole process, every thread, user and system time
/// (`CLOCK_PROCESS_CPUTIME_ID`: what `getrusage(RUSAGE_SELF)` reports, in
/// nanoseconds), from [`ProcessCpu::start`]. A reader's cost per byte: on a
/// machine where the writing child, not the reader, sets the pace, wall-clock
/// time says nothing about the reader, its CPU time does.
#[derive(Clone, Copy, Debug)]
pub struct ProcessCpu(Duration);

impl ProcessCpu {
    /// Reads the clock.
    pub fn start() -> ProcessCpu {
        ProcessCpu(process_cpu_now())
    }

    /// CPU time used since [`ProcessCpu::start`].
    pub fn elapsed(self) -> Duration {
        process_cpu_now().saturating_sub(self.0)
    }

    /// CPU time used since the process started.
    pub fn since_start() -> Duration {
        process_cpu_now()
    }
}

fn process_cpu_now() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    let secs = u64::try_from(t.tv_sec).expect("CPU time is positive");
    Duration::new(secs, u32::try_from(t.tv_nsec).expect("nanoseconds fit"))
}

/// The child's closing stderr line, parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Report {
    /// Bytes written to stdout.
    pub bytes: u64,
    /// Complete frames written.
    pub frames: u64,
    /// Sum of the durations of all `write(2)` calls.
    pub write_blocked: Duration,
    /// From the first write to the end of the last.
    pub elapsed: Duration,
    /// Pipe capacity as the child saw it.
    pub pipe_size: u64,
}

impl Report {
    /// Finds and parses the `pipe_writer: bytes=… frames=…` line in the
    /// child's stderr. Errors name what is missing and quote the stderr.
    pub fn parse(stderr: &str) -> Result<Report, String> {
        let line = stderr
            .lines()
            .find(|line| line.starts_with("pipe_writer: bytes="))
            .ok_or_else(|| format!("no report line in the child's stderr: {stderr:?}"))?;
        let field = |name: &str| -> Result<u64, String> {
            line.split_whitespace()
                .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("no numeric {name} in {line:?}"))
        };
        Ok(Report {
            bytes: field("bytes")?,
            frames: field("frames")?,
            write_blocked: Duration::from_micros(field("write_blocked_us")?),
            elapsed: Duration::from_micros(field("elapsed_us")?),
            pipe_size: field("pipe_size")?,
        })
    }
}

/// Where the reading thread and the child run. Pipe throughput depends on it
/// several-fold, so every benchmark id names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Parent and child both pinned to the first allowed CPU.
    SameCpu,
    /// Parent on the first allowed CPU, child on the second.
    SplitCpus,
    /// Both free to run on any allowed CPU.
    Unpinned,
}

impl Placement {
    /// Every placement, in report order.
    pub const ALL: [Placement; 3] = [Placement::SameCpu, Placement::SplitCpus, Placement::Unpinned];

    /// The name used in benchmark ids.
    pub fn name(self) -> &'static str {
        match self {
            Placement::SameCpu => "same-cpu",
            Placement::SplitCpus => "split-cpus",
            Placement::Unpinned => "unpinned",
        }
    }

    /// Pins the calling thread for this placement and returns the CPU the
    /// child must pin itself to (`None`: inherit the calling thread's
    /// affinity). `allowed` is the process's CPU set captured at start-up.
    /// Fails if the placement needs two CPUs and fewer are allowed.
    pub fn apply(self, allowed: &Cpus) -> io::Result<Option<usize>> {
        let first = allowed.0.first().copied();
        let (parent, child) = match self {
            Placement::SameCpu => (first, first),
            Placement::SplitCpus => (first, allowed.0.get(1).copied()),
            Placement::Unpinned => {
                sched_setaffinity(None, &allowed.set())?;
                return Ok(None);
            }
        };
        let (Some(parent), Some(child)) = (parent, child) else {
            return Err(io::Error::other(format!("{} needs two allowed CPUs, have {:?}", self.name(), allowed.0)));
        };
        let mut set = CpuSet::new();
        set.set(parent);
        sched_setaffinity(None, &set)?;
        Ok(Some(child))
    }
}

/// The CPUs this process may run on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cpus(pub Vec<usize>);

impl Cpus {
    /// The calling thread's current affinity; call it before pinning anything.
    pub fn current() -> io::Result<Cpus> {
        let set = sched_getaffinity(None)?;
        Ok(Cpus((0..CpuSet::MAX_CPU).filter(|&cpu| set.is_set(cpu)).collect()))
    }

    fn set(&self) -> CpuSet {
        let mut set = CpuSet::new();
        for &cpu in &self.0 {
            set.set(cpu);
        }
        set
    }
}

/// Kills a child with `SIGKILL` if it is still running when the timeout
/// expires, so a stuck benchmark fails (the reader sees EOF early and its
/// count assertion fails) instead of hanging. Disarmed on drop: drop it right
/// after the child has been waited for.
#[derive(Debug)]
pub struct Watchdog {
    state: Arc<(Mutex<WatchState>, Condvar)>,
}

#[derive(Debug, Default)]
struct WatchState {
    disarmed: bool,
    fired: bool,
}

impl Watchdog {
    /// Starts watching the process `pid`.
    pub fn arm(pid: u32, timeout: Duration) -> Watchdog {
        let state = Arc::new((Mutex::new(WatchState::default()), Condvar::new()));
        let watched = Arc::clone(&state);
        thread::spawn(move || {
            let (lock, cvar) = &*watched;
            let guard = lock.lock().unwrap_or_else(PoisonError::into_inner);
            let (mut guard, _) = cvar
                .wait_timeout_while(guard, timeout, |state| !state.disarmed)
                .unwrap_or_else(PoisonError::into_inner);
            if !guard.disarmed {
                guard.fired = true;
                eprintln!("watchdog: child {pid} still running after {timeout:?}, killing it");
                if let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) {
                    let _ = kill_process(pid, Signal::KILL);
                }
            }
        });
        Watchdog { state }
    }

    /// Whether the timeout expired and the child was killed.
    pub fn fired(&self) -> bool {
        self.state.0.lock().unwrap_or_else(PoisonError::into_inner).fired
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        let (lock, cvar) = &*self.state;
        lock.lock().unwrap_or_else(PoisonError::into_inner).disarmed = true;
        cvar.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_parses_the_writer_line() {
        let stderr = "noise\npipe_writer: bytes=402 frames=2 write_blocked_us=17 elapsed_us=99 writes=1 pipe_size=65536 cpu=none\n";
        let report = Report::parse(stderr).unwrap();
        assert_eq!((report.bytes, report.frames, report.pipe_size), (402, 2, 65536));
        assert_eq!((report.write_blocked, report.elapsed), (Duration::from_micros(17), Duration::from_micros(99)));
        assert!(Report::parse("pipe_writer: stdout: broken pipe").is_err());
        assert!(Report::parse("pipe_writer: bytes=1 frames=x").is_err());
    }

    #[test]
    fn writer_totals_round_up_to_whole_frames() {
        let writer = Writer::with_total(Shape::ToolsList, 4095, 10_000);
        assert_eq!((writer.line_len, writer.frames, writer.bytes()), (4096, 3, 3 * 4096));
        assert_eq!(Writer::with_total(Shape::Text, 4095, 0).frames, 1);
        let request = Writer::with_total(Shape::Request, 0, 1);
        assert_eq!(request.line_len, shapes::tools_call_request(1).len() + 1);
    }

    #[test]
    fn notifications_hit_their_size_and_carry_their_payload() {
        for bytes in [200, 64 << 10, 1 << 20] {
            for payload in Payload::ALL {
                let note = notification_with(payload, bytes);
                // The smallest tools/list result is above 200 B.
                if payload != Payload::ToolsList || bytes > 4096 {
                    assert_eq!(note.len(), bytes, "{payload:?} at {bytes}");
                } else {
                    assert!(note.len() > bytes, "{payload:?} at {bytes}");
                }
                let value: serde_json::Value = serde_json::from_slice(&note).unwrap();
                assert_eq!(value["method"], "notifications/message");
                let data = &value["params"]["data"];
                match payload {
                    // One flat string: nothing escaped, nothing nested.
                    Payload::Text => assert!(data.is_string() && !note.contains(&b'\\'), "{bytes}"),
                    Payload::ToolsList => assert!(data["result"]["tools"].is_array(), "{bytes}"),
                    Payload::Source => assert!(data["result"]["content"][0]["text"].is_string(), "{bytes}"),
                }
            }
            assert_eq!(notification(bytes), notification_with(Payload::by_size(bytes), bytes));
        }
        assert_eq!(
            [200, 64 << 10, 1 << 20].map(Payload::by_size),
            [Payload::Text, Payload::ToolsList, Payload::Source],
            "the sizes the CI gate's notes use"
        );
        // Escaped source text: the payload that costs a parser its escapes.
        assert!(notification_with(Payload::Source, 1 << 20).windows(2).any(|w| w == br#"\""#));
    }

    #[test]
    fn shape_names_round_trip() {
        for shape in Shape::ALL {
            assert_eq!(shape.name().parse::<Shape>(), Ok(shape));
        }
        assert!("json".parse::<Shape>().is_err());
    }
}
