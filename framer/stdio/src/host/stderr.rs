//! The stderr drain: a task that reads the child's stderr until it closes,
//! keeps the last bytes for diagnostics, counts bytes and lines and forwards
//! lines to `tracing`. It never waits on anyone, so a server that floods
//! stderr never blocks on it.

use std::sync::{Arc, Mutex, PoisonError};

use tokio::io::{AsyncRead, AsyncReadExt};

use super::config::StderrLog;
use super::metrics::Metrics;
use crate::counter::add;
use crate::{Keep, Preview, Previewer};
use mcp_framer::{Bom, Config, EmptyLines, Event, Framer, OversizePolicy};

/// Most bytes read from stderr per `read`.
const READ_SIZE: usize = 16 * 1024;
/// Bytes read per `read` at first: a quiet server's stderr costs one small
/// buffer; each read that fills it doubles it, up to [`READ_SIZE`].
const FIRST_READ_SIZE: usize = 128;
/// Longest line forwarded to `tracing`; a longer line is reported by its
/// length only (it stays in the tail).
const MAX_LOGGED_LINE: usize = 4096;
/// The `tracing` target of forwarded stderr lines.
const TARGET: &str = "mcp_framer_stdio::host::stderr";

/// The last bytes a child wrote to its stderr, kept for diagnostics (error
/// messages quote them when the child exits): a tail [`Preview`] of at most
/// its capacity, shared by the drain and the session.
#[derive(Debug)]
pub(crate) struct StderrTail {
    kept: Mutex<Previewer>,
}

impl StderrTail {
    /// An empty tail that keeps at most `capacity` bytes.
    pub(crate) fn new(capacity: usize) -> StderrTail {
        StderrTail { kept: Mutex::new(Previewer::new(Keep::Tail(capacity))) }
    }

    /// Appends bytes, dropping the oldest ones beyond the capacity.
    pub(crate) fn push(&self, bytes: &[u8]) {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner).push(bytes);
    }

    /// The stream so far: the last bytes, with the count of all of them.
    pub(crate) fn preview(&self) -> Preview {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner).preview()
    }

    /// [`preview`](StderrTail::preview) as text: the kept bytes (cut at a
    /// character boundary, lossy elsewhere) after a marker line if bytes were
    /// dropped.
    pub(crate) fn text(&self) -> String {
        self.preview().to_text()
    }
}

impl StderrLog {
    fn enabled(self) -> bool {
        match self {
            StderrLog::Off => false,
            StderrLog::Debug => tracing::enabled!(target: TARGET, tracing::Level::DEBUG),
            StderrLog::Info => tracing::enabled!(target: TARGET, tracing::Level::INFO),
        }
    }

    fn emit(self, event: Event<&[u8]>) {
        let text = match event {
            Event::Frame(line) => String::from_utf8_lossy(line),
            Event::OversizeSkipped { len } => {
                format!("[a stderr line of {len} bytes, over the {MAX_LOGGED_LINE} bytes forwarded per line]").into()
            }
            Event::OversizeStarted { .. } | Event::Truncated { .. } => return,
        };
        match self {
            StderrLog::Off => {}
            StderrLog::Debug => tracing::debug!(target: TARGET, "{text}"),
            StderrLog::Info => tracing::info!(target: TARGET, "{text}"),
        }
    }
}

/// Splits stderr into lines with the core [`Framer`] (push mode): a line of
/// at most [`MAX_LOGGED_LINE`] bytes is forwarded, a longer one is discarded
/// as it streams by and reported by its length, empty lines are skipped, a
/// trailing `\r` is stripped. The framer holds at most one line, and its
/// `\n` count is the line count.
#[derive(Debug)]
struct Lines {
    level: StderrLog,
    framer: Framer,
}

impl Lines {
    fn new(level: StderrLog) -> Lines {
        let config = Config::DEFAULT
            .with_max_frame(MAX_LOGGED_LINE)
            .with_oversize(OversizePolicy::Skip)
            .with_empty_lines(EmptyLines::Skip)
            .with_bom(Bom::Keep);
        Lines { level, framer: Framer::new(config) }
    }

    /// Frames `chunk` and forwards its lines; returns how many `\n` it held.
    fn feed(&mut self, chunk: &[u8]) -> u64 {
        let before = self.framer.stats().delimiters;
        let (level, enabled) = (self.level, self.level.enabled());
        let mut push = self.framer.push(chunk);
        // Under `OversizePolicy::Skip` the framer never fails.
        while let Ok(Some(event)) = push.next_event() {
            if enabled {
                level.emit(event);
            }
        }
        drop(push);
        self.framer.stats().delimiters - before
    }

    /// At end of stream: forwards an unfinished last line (not counted as a
    /// line).
    fn finish(&mut self) {
        if self.framer.buffered() > 0 || self.framer.is_discarding() {
            self.feed(b"\n");
        }
    }
}

/// Reads `stderr` until end of stream or a read error, into `tail`, counting
/// `stderr_bytes` and `stderr_lines` in `metrics` and forwarding lines at
/// `level`. Never waits for anything but the pipe.
pub(crate) async fn drain_stderr<R>(mut stderr: R, tail: Arc<StderrTail>, metrics: Arc<Metrics>, level: StderrLog)
where
    R: AsyncRead + Unpin,
{
    let mut buf = vec![0u8; FIRST_READ_SIZE];
    let mut lines = Lines::new(level);
    loop {
        let n = match stderr.read(&mut buf).await {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                tracing::warn!("reading the server's stderr failed: {e}");
                break;
            }
        };
        if n == buf.len() && n < READ_SIZE {
            buf.resize(2 * n, 0);
        }
        let chunk = &buf[..n];
        add(&metrics.stderr_bytes, n as u64);
        tail.push(chunk);
        add(&metrics.stderr_lines, lines.feed(chunk));
    }
    lines.finish();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_the_last_bytes_whatever_the_pushes() {
        let tail = StderrTail::new(10);
        tail.push(b"");
        assert_eq!(tail.preview().tail(), b"");
        assert_eq!(tail.text(), "");
        tail.push(b"0123456789abcdef");
        assert_eq!(tail.preview().tail(), b"6789abcdef");
        tail.push(b"XY");
        assert_eq!(tail.preview().tail(), b"89abcdefXY");
        assert_eq!(tail.text(), "[preview: last 10 of 18 bytes; 8 bytes not shown]\n89abcdefXY");
        let zero = StderrTail::new(0);
        zero.push(b"abc");
        assert_eq!((zero.preview().tail(), zero.preview().dropped_bytes()), (&b""[..], 3));
    }

    #[test]
    fn tail_text_starts_at_a_character_boundary() {
        let tail = StderrTail::new(3);
        tail.push("ab\u{e9}cd".as_bytes()); // é is C3 A9; the last 3 bytes are A9 'c' 'd'
        assert_eq!(tail.preview().tail(), b"cd");
        assert_eq!(tail.text(), "[preview: last 2 of 6 bytes; 4 bytes not shown]\ncd");
    }

    #[tokio::test]
    async fn drain_counts_bytes_and_lines_and_keeps_the_tail() {
        let input = b"first line\nsecond\npartial".repeat(1000);
        let tail = Arc::new(StderrTail::new(64));
        let metrics = Arc::new(Metrics::default());
        drain_stderr(&input[..], Arc::clone(&tail), Arc::clone(&metrics), StderrLog::Debug).await;
        let snapshot = metrics.snapshot();
        assert_eq!(snapshot.stderr_bytes, input.len() as u64);
        assert_eq!(snapshot.stderr_lines, 2000, "the unfinished last line is not counted");
        assert_eq!(tail.preview().tail(), &input[input.len() - 64..]);
        assert_eq!(tail.preview().total_bytes(), input.len() as u64);
    }

    #[test]
    fn lines_hold_at_most_one_bounded_line_and_count_every_newline() {
        let mut lines = Lines::new(StderrLog::Info);
        assert_eq!(lines.feed(&vec![b'x'; MAX_LOGGED_LINE * 3]), 0);
        assert!(lines.framer.buffered() <= MAX_LOGGED_LINE + 1, "{}", lines.framer.buffered());
        assert!(lines.framer.is_discarding(), "a line over the limit is discarded as it streams");
        assert_eq!(lines.feed(b"xx\nshort\r\n\n\nlast"), 4, "oversize, CRLF and empty lines all count");
        let stats = *lines.framer.stats();
        assert_eq!((stats.oversize_frames, stats.frames, stats.empty_lines), (1, 1, 2));
        lines.finish();
        assert_eq!(lines.framer.stats().frames, 2, "the unfinished last line is forwarded at the end");
        assert_eq!(lines.framer.buffered(), 0);
    }
}
