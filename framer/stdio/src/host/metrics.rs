//! Session metrics: atomic counters written by the host tasks, read at any
//! time as a [`MetricsSnapshot`].

use std::process::ExitStatus;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use crate::counter::{add, get};
use mcp_framer::Stats;

/// The live counters of one session (or of one [`Reader`](super::Reader)).
///
/// Every counter only grows, except the gauges (`oversize_in_progress`,
/// `buffer_capacity`). The host tasks update them as they go, with
/// relaxed atomics, so reading them never blocks and never slows the reader;
/// [`Metrics::snapshot`] copies them out. Share one between tasks with an
/// `Arc`.
///
/// ```
/// use mcp_framer_stdio::host::Metrics;
///
/// let metrics = Metrics::default();
/// let snapshot = metrics.snapshot();
/// assert_eq!(snapshot.stdout_bytes, 0);
/// assert_eq!(snapshot.exit_status, None);
/// ```
#[derive(Debug, Default)]
pub struct Metrics {
    pub(crate) stdout_bytes: AtomicU64,
    pub(crate) frames: AtomicU64,
    pub(crate) largest_frame: AtomicU64,
    pub(crate) oversize_frames: AtomicU64,
    pub(crate) discarded_bytes: AtomicU64,
    pub(crate) truncated_bytes: AtomicU64,
    pub(crate) buffered_high_water: AtomicU64,
    pub(crate) buffer_capacity: AtomicU64,
    pub(crate) parse_errors: AtomicU64,
    pub(crate) non_json_lines: AtomicU64,
    pub(crate) delivered: AtomicU64,
    pub(crate) dispatch_wait_ns: AtomicU64,
    pub(crate) overload_episodes: AtomicU64,
    pub(crate) overload_dropped: AtomicU64,
    pub(crate) overload_rejected: AtomicU64,
    pub(crate) unconsumed: AtomicU64,
    pub(crate) oversize_in_progress: AtomicU64,
    pub(crate) oversize_responses: AtomicU64,
    pub(crate) requests_sent: AtomicU64,
    pub(crate) responses: AtomicU64,
    pub(crate) late_responses: AtomicU64,
    pub(crate) unexpected_responses: AtomicU64,
    pub(crate) timeouts: AtomicU64,
    pub(crate) cancellations_sent: AtomicU64,
    pub(crate) write_errors: AtomicU64,
    pub(crate) stderr_bytes: AtomicU64,
    pub(crate) stderr_lines: AtomicU64,
    pub(crate) exit_status: OnceLock<ExitStatus>,
}

impl Metrics {
    /// Copies the counters out. Each value is read atomically; the set is not
    /// one atomic picture while the session runs (a frame may be counted in
    /// `frames` and not yet in `delivered`). Once a request's response has
    /// arrived, the counters cover everything the server wrote before it,
    /// and the read that brought it.
    pub fn snapshot(&self) -> MetricsSnapshot {
        MetricsSnapshot {
            stdout_bytes: get(&self.stdout_bytes),
            frames: get(&self.frames),
            largest_frame: get(&self.largest_frame),
            oversize_frames: get(&self.oversize_frames),
            discarded_bytes: get(&self.discarded_bytes),
            truncated_bytes: get(&self.truncated_bytes),
            buffered_high_water: get(&self.buffered_high_water),
            buffer_capacity: get(&self.buffer_capacity),
            parse_errors: get(&self.parse_errors),
            non_json_lines: get(&self.non_json_lines),
            delivered: get(&self.delivered),
            dispatch_wait: Duration::from_nanos(get(&self.dispatch_wait_ns)),
            overload_episodes: get(&self.overload_episodes),
            overload_dropped: get(&self.overload_dropped),
            overload_rejected: get(&self.overload_rejected),
            unconsumed: get(&self.unconsumed),
            oversize_in_progress: get(&self.oversize_in_progress),
            oversize_responses: get(&self.oversize_responses),
            requests_sent: get(&self.requests_sent),
            responses: get(&self.responses),
            late_responses: get(&self.late_responses),
            unexpected_responses: get(&self.unexpected_responses),
            timeouts: get(&self.timeouts),
            cancellations_sent: get(&self.cancellations_sent),
            write_errors: get(&self.write_errors),
            stderr_bytes: get(&self.stderr_bytes),
            stderr_lines: get(&self.stderr_lines),
            exit_status: self.exit_status.get().copied(),
        }
    }

    /// Mirrors the framer's byte accounting (the framer lives inside the
    /// reader task; its counters are published after every read).
    /// `discarding` is the bytes so far of an oversize frame still being
    /// discarded: it is counted in `oversize_in_progress`, and in
    /// `oversize_frames` and `discarded_bytes` only once discarded to its end.
    pub(crate) fn publish_framer(&self, stats: &Stats, discarding: Option<u64>) {
        let set = |counter: &AtomicU64, value: u64| counter.store(value, Relaxed);
        let in_progress = discarding.unwrap_or(0);
        set(&self.stdout_bytes, stats.bytes_in);
        set(&self.frames, stats.frames);
        set(&self.largest_frame, stats.largest_frame);
        set(&self.oversize_frames, stats.oversize_frames - u64::from(discarding.is_some()));
        set(&self.discarded_bytes, stats.discarded_bytes - in_progress);
        set(&self.oversize_in_progress, in_progress);
        set(&self.truncated_bytes, stats.truncated_bytes);
        set(&self.buffered_high_water, stats.buffered_high_water);
        set(&self.buffer_capacity, stats.buffer_capacity);
    }

    /// Adds time the reader spent waiting for room in the inbound queue.
    pub(crate) fn add_dispatch_wait(&self, waited: Duration) {
        add(&self.dispatch_wait_ns, u64::try_from(waited.as_nanos()).unwrap_or(u64::MAX));
    }

    /// Records the child's exit status (the first one recorded wins).
    pub(crate) fn record_exit(&self, status: ExitStatus) {
        let _ = self.exit_status.set(status);
    }
}

/// A copy of a session's counters, taken by [`Metrics::snapshot`] or
/// [`Session::metrics`](super::Session::metrics). Bytes are bytes, never
/// chars; every count is since the session started.
///
/// The first six fields are the per-session values an MCP host should always
/// record: if `stdout_bytes` stops growing mid-result while the server lives,
/// suspect the server's write side; if it keeps growing while `delivered`
/// stalls, suspect the host's queue or its consumer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MetricsSnapshot {
    /// Bytes read from the child's stdout.
    pub stdout_bytes: u64,
    /// Length in bytes of the largest complete frame (at most the limit).
    pub largest_frame: u64,
    /// Frames the JSON-RPC parser rejected (malformed JSON, non-object,
    /// invalid UTF-8, wrong or missing `"jsonrpc": "2.0"`, no usable id or
    /// method). Includes `non_json_lines`.
    pub parse_errors: u64,
    /// Total time the reader waited for room in the inbound queue: always
    /// zero by default, at most [`Overload::max_wait`](super::Overload::max_wait)
    /// per overload episode when a host opts in.
    pub dispatch_wait: Duration,
    /// `notifications/cancelled` sent to the server (on timeout, on explicit
    /// cancel, or when a request's future was dropped).
    pub cancellations_sent: u64,
    /// The child's exit status, once it has exited and been reaped.
    pub exit_status: Option<ExitStatus>,

    /// Complete frames the framer delivered (before JSON parsing).
    pub frames: u64,
    /// Frames over the transport limit, each counted **once discarded to its
    /// end** (its `\n`, or end of stream), or at once under
    /// [`OversizePolicy::Fail`](mcp_framer::OversizePolicy::Fail). A frame still
    /// being discarded is in `oversize_in_progress` instead, so
    /// `oversize_frames` and `discarded_bytes` always describe the same
    /// frames.
    pub oversize_frames: u64,
    /// Bytes thrown away by the framer: the oversize frames counted in
    /// `oversize_frames`, and everything after an oversize frame under
    /// [`OversizePolicy::Fail`](mcp_framer::OversizePolicy::Fail).
    pub discarded_bytes: u64,
    /// A gauge: bytes discarded so far of the oversize frame being discarded
    /// right now (0 when none is). When its `\n` arrives they move to
    /// `discarded_bytes` and the frame to `oversize_frames`.
    pub oversize_in_progress: u64,
    /// Requests failed at once with
    /// [`RequestError::Oversize`](super::RequestError::Oversize): their
    /// response passed the transport limit and its id was recovered.
    pub oversize_responses: u64,
    /// Bytes of a partial frame left when stdout closed.
    pub truncated_bytes: u64,
    /// The most bytes the framer held at once (at most limit + 1 + one read).
    pub buffered_high_water: u64,
    /// A gauge: the framer's buffer storage now, in bytes reserved
    /// ([`Stats::buffer_capacity`]). It grows with large frames and goes back
    /// within [`Config::retain`](mcp_framer::Config::retain) after them, so
    /// a session that once received a large result does not keep its size.
    pub buffer_capacity: u64,
    /// Parse errors on lines that do not even start like JSON (first
    /// non-blank byte not `{` or `[`): a log line printed on stdout by mistake.
    pub non_json_lines: u64,
    /// Server requests and notifications handed to the application queue.
    pub delivered: u64,
    /// Overload episodes: times a message found the inbound queue full while
    /// no episode was running. An episode lasts until the application has
    /// drained the queue to half its capacity (see [`Overload`](super::Overload)).
    pub overload_episodes: u64,
    /// Messages dropped by the overload policy (under `Reject`, the
    /// notifications, which cannot be answered, and requests whose error reply
    /// could not be queued).
    pub overload_dropped: u64,
    /// Server requests answered with a "host overloaded" error and dropped.
    pub overload_rejected: u64,
    /// Server messages nobody receives because the application dropped its
    /// inbound receiver: requests (answered "method not found", this host
    /// takes no server requests) and notifications (dropped). Not overload.
    pub unconsumed: u64,
    /// Requests this session wrote to the server.
    pub requests_sent: u64,
    /// Responses matched to a waiting request.
    pub responses: u64,
    /// Responses for requests that had timed out or been cancelled: drained,
    /// counted here and ignored.
    pub late_responses: u64,
    /// Responses whose id matched no request this session sent: ignored.
    pub unexpected_responses: u64,
    /// Requests that hit their timeout.
    pub timeouts: u64,
    /// Messages that could not be written to the child's stdin.
    pub write_errors: u64,
    /// Bytes read from the child's stderr.
    pub stderr_bytes: u64,
    /// `\n`-terminated lines read from the child's stderr.
    pub stderr_lines: u64,
}
