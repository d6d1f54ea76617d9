//! The stderr drain: a task that reads the child's stderr until it closes,
//! keeps the last bytes in a ring for diagnostics, counts bytes and lines and
//! forwards lines to `tracing`. It never waits on anyone, so a server that
//! floods stderr never blocks on it.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::io::{AsyncRead, AsyncReadExt};

use super::metrics::{Metrics, add};

/// Bytes read from stderr per `read`.
const READ_SIZE: usize = 16 * 1024;
/// Longest line forwarded to `tracing`; longer lines are cut there.
const MAX_LOGGED_LINE: usize = 4096;
/// The `tracing` target of forwarded stderr lines.
const TARGET: &str = "mcp_framer_stdio::host::stderr";

/// The last bytes a child wrote to its stderr, kept for diagnostics (error
/// messages name them when the child exits). Bounded: it holds at most its
/// capacity, dropping the oldest bytes first.
///
/// ```
/// use mcp_framer_stdio::host::StderrTail;
///
/// let tail = StderrTail::new(8);
/// tail.push(b"hello ");
/// tail.push(b"world\n");
/// assert_eq!(tail.text(), "o world\n");
/// assert_eq!(tail.capacity(), 8);
/// ```
#[derive(Debug)]
pub struct StderrTail {
    ring: Mutex<VecDeque<u8>>,
    capacity: usize,
}

impl StderrTail {
    /// An empty tail that keeps at most `capacity` bytes.
    pub fn new(capacity: usize) -> StderrTail {
        StderrTail { ring: Mutex::new(VecDeque::new()), capacity }
    }

    /// The most bytes kept.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Appends bytes, dropping the oldest ones beyond the capacity.
    pub fn push(&self, bytes: &[u8]) {
        let keep = &bytes[bytes.len().saturating_sub(self.capacity)..];
        let mut ring = self.ring.lock().unwrap_or_else(PoisonError::into_inner);
        let overflow = (ring.len() + keep.len()).saturating_sub(self.capacity);
        ring.drain(..overflow);
        ring.extend(keep);
    }

    /// The bytes kept, oldest first.
    pub fn bytes(&self) -> Vec<u8> {
        let ring = self.ring.lock().unwrap_or_else(PoisonError::into_inner);
        ring.iter().copied().collect()
    }

    /// The bytes kept, as text (invalid UTF-8, such as a character cut by the
    /// ring's start, becomes U+FFFD).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes()).into_owned()
    }
}

/// How stderr lines are forwarded to `tracing`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StderrLog {
    /// Not forwarded (still counted and kept in the tail).
    Off,
    /// Forwarded at `DEBUG` (the default: the spec says stderr MAY carry any
    /// logging and a client SHOULD NOT treat it as an error).
    Debug,
    /// Forwarded at `INFO`.
    Info,
}

impl StderrLog {
    fn enabled(self) -> bool {
        match self {
            StderrLog::Off => false,
            StderrLog::Debug => tracing::enabled!(target: TARGET, tracing::Level::DEBUG),
            StderrLog::Info => tracing::enabled!(target: TARGET, tracing::Level::INFO),
        }
    }

    fn emit(self, line: &[u8], cut: bool) {
        let text = String::from_utf8_lossy(line);
        let cut = if cut { " [line cut]" } else { "" };
        match self {
            StderrLog::Off => {}
            StderrLog::Debug => tracing::debug!(target: TARGET, "{text}{cut}"),
            StderrLog::Info => tracing::info!(target: TARGET, "{text}{cut}"),
        }
    }
}

/// Splits stderr into lines for `tracing`, holding at most
/// [`MAX_LOGGED_LINE`] bytes of an unfinished line.
#[derive(Debug)]
struct LineLogger {
    level: StderrLog,
    line: Vec<u8>,
    cut: bool,
}

impl LineLogger {
    fn feed(&mut self, mut bytes: &[u8]) {
        if !self.level.enabled() {
            return;
        }
        while let Some(end) = memchr::memchr(b'\n', bytes) {
            self.take(&bytes[..end]);
            self.level.emit(&self.line, self.cut);
            self.line.clear();
            self.cut = false;
            bytes = &bytes[end + 1..];
        }
        self.take(bytes);
    }

    fn take(&mut self, bytes: &[u8]) {
        let room = MAX_LOGGED_LINE - self.line.len();
        self.cut |= bytes.len() > room;
        self.line.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    fn finish(&mut self) {
        if !self.line.is_empty() && self.level.enabled() {
            self.level.emit(&self.line, self.cut);
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
    let mut buf = vec![0u8; READ_SIZE];
    let mut logger = LineLogger { level, line: Vec::new(), cut: false };
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
        let chunk = &buf[..n];
        add(&metrics.stderr_bytes, n as u64);
        add(&metrics.stderr_lines, memchr::memchr_iter(b'\n', chunk).count() as u64);
        tail.push(chunk);
        logger.feed(chunk);
    }
    logger.finish();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_the_last_bytes_whatever_the_pushes() {
        let tail = StderrTail::new(10);
        tail.push(b"");
        assert_eq!(tail.bytes(), b"");
        tail.push(b"0123456789abcdef");
        assert_eq!(tail.bytes(), b"6789abcdef");
        tail.push(b"XY");
        assert_eq!(tail.bytes(), b"89abcdefXY");
        let zero = StderrTail::new(0);
        zero.push(b"abc");
        assert_eq!(zero.bytes(), b"");
    }

    #[test]
    fn tail_text_is_lossy_where_the_ring_cut_a_character() {
        let tail = StderrTail::new(3);
        tail.push("ab\u{e9}cd".as_bytes()); // é is C3 A9; the ring keeps A9 'c' 'd'
        assert_eq!(tail.bytes(), [0xA9, b'c', b'd']);
        assert_eq!(tail.text(), "\u{fffd}cd");
    }

    #[tokio::test]
    async fn drain_counts_bytes_and_lines_and_keeps_the_tail() {
        let input = b"first line\nsecond\npartial".repeat(1000);
        let tail = Arc::new(StderrTail::new(64));
        let metrics = Arc::new(Metrics::default());
        drain_stderr(&input[..], Arc::clone(&tail), Arc::clone(&metrics), StderrLog::Debug).await;
        let snapshot = metrics.snapshot();
        assert_eq!(snapshot.stderr_bytes, input.len() as u64);
        assert_eq!(snapshot.stderr_lines, 2000);
        assert_eq!(tail.bytes(), &input[input.len() - 64..]);
    }

    #[test]
    fn line_logger_holds_at_most_one_bounded_line() {
        let mut logger = LineLogger { level: StderrLog::Info, line: Vec::new(), cut: false };
        logger.take(&vec![b'x'; MAX_LOGGED_LINE * 3]);
        assert_eq!(logger.line.len(), MAX_LOGGED_LINE);
        assert!(logger.cut);
    }
}
