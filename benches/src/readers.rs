//! The readers the `pipe` bench (`benches/benches/readers`) and the
//! `pipe_profile` harness both run against the `pipe_writer` child: the raw
//! drain (the physical limit), the reader a user would write by hand, and the
//! host's whole [`Session`]. One copy of each, so that the profile measures
//! what the bench measures.

use std::io::{self, Read};
use std::time::{Duration, Instant};

use futures::StreamExt;
use mcp_framer_stdio::host::{Inbound, Session, SessionConfig};
use tokio::io::AsyncRead;
use tokio_util::codec::{FramedRead, LinesCodec};

use crate::pipe::{self, ProcessCpu, Report, Watchdog, Writer};

/// Bytes per `read` for every reader: one default pipe's capacity, and the
/// framer's default read size.
pub const READ_SIZE: usize = crate::shapes::PIPE_READ;

/// The transport limit every framing reader enforces: the framer's default.
pub const MAX_FRAME: usize = mcp_framer::DEFAULT_MAX_FRAME;

/// The one line a reader that owns the child's stdin sends to start it
/// (`pipe_writer --wait` starts at its first `\n`).
pub const START_METHOD: &str = "bench/start";

/// An error for what a reader did not expect.
pub fn unexpected(what: impl std::fmt::Debug) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("unexpected {what:?}"))
}

/// The physical limit: read into a 64 KiB buffer and discard. Returns bytes.
pub fn raw_drain(mut input: impl Read) -> io::Result<u64> {
    let mut buf = vec![0u8; READ_SIZE];
    let mut bytes = 0;
    loop {
        match input.read(&mut buf) {
            Ok(0) => return Ok(bytes),
            Ok(n) => bytes += n as u64,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// The reader a user would write by hand: tokio-util's `FramedRead` with
/// `LinesCodec` (limited to [`MAX_FRAME`]) and `serde_json::from_str::<Value>`
/// on each line, so the application gets a value it can use. Every line must
/// be a JSON object. Returns frames.
pub async fn hand_written(input: impl AsyncRead + Unpin) -> io::Result<u64> {
    let mut lines = FramedRead::with_capacity(input, LinesCodec::new_with_max_length(MAX_FRAME), READ_SIZE);
    let mut frames = 0;
    while let Some(line) = lines.next().await {
        let value: serde_json::Value = serde_json::from_str(&line.map_err(unexpected)?).map_err(unexpected)?;
        if !value.is_object() {
            return Err(unexpected(value));
        }
        frames += 1;
    }
    Ok(frames)
}

/// Runs `writer` under a host [`Session`] (the project's whole host: reader,
/// writer, stderr and supervisor tasks, default no-loss queue) and counts the
/// notifications a consumer receives, in batches of up to 256. The clock runs
/// from the start line to the session's end (the child exited and stdout
/// reached its end). Asserts no drop and every message a notification.
pub async fn run_session(exe: &str, writer: &Writer, timeout: Duration) -> Result<pipe::Run, String> {
    let config = SessionConfig::default().with_max_receive(MAX_FRAME);
    let command = tokio::process::Command::from(writer.command(exe));
    let (session, mut queue) = Session::spawn(command, config).map_err(|e| format!("spawn {exe}: {e}"))?;
    let watchdog = Watchdog::arm(session.pid().ok_or("no pid")?, timeout);
    // The child's stderr goes to the session's tail: poll it (untimed set-up;
    // the watchdog bounds it).
    while !session.stderr_tail().contains("pipe_writer: ready") {
        if session.closed().is_some() {
            return Err(format!("child not ready: {:?}", session.stderr_tail()));
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let cpu = ProcessCpu::start();
    let start = Instant::now();
    session.notify(START_METHOD, &()).await.map_err(|e| format!("start: {e}"))?;
    let mut frames = 0;
    let mut batch = Vec::with_capacity(256);
    while queue.recv_many(&mut batch, 256).await > 0 {
        for item in batch.drain(..) {
            match item {
                Inbound::Notification(_) => frames += 1,
                other => return Err(format!("unexpected {other:?}")),
            }
        }
    }
    let closed = session.wait_closed().await;
    let elapsed = start.elapsed();
    let cpu = cpu.elapsed();
    let fired = watchdog.fired();
    drop(watchdog);
    if fired {
        return Err(format!("the watchdog killed the child after {timeout:?}"));
    }
    let status = closed.exit_status().ok_or_else(|| format!("no exit status: {:?}", closed.reason()))?;
    if !status.success() {
        return Err(format!("child {status}; stderr: {:?}", closed.stderr_tail()));
    }
    let metrics = session.metrics();
    if (metrics.delivered, metrics.overload_dropped, metrics.parse_errors) != (frames, 0, 0) {
        return Err(format!("{frames} received, metrics {metrics:?}"));
    }
    let report = Report::parse(closed.stderr_tail())?;
    check_report(writer, &report)?;
    Ok(pipe::Run { started: start, elapsed, cpu, count: frames, report })
}

/// Whether the child wrote what `writer` asked for.
pub fn check_report(writer: &Writer, report: &Report) -> Result<(), String> {
    if (report.bytes, report.frames) != (writer.bytes(), writer.frames) {
        return Err(format!("child wrote {report:?}, expected {} bytes in {} frames", writer.bytes(), writer.frames));
    }
    Ok(())
}
