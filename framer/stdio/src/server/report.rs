//! What a serve loop did: counters shared by its tasks, and the final report.

use std::sync::atomic::AtomicU64;

use crate::counter::get;
use mcp_framer::Stats;

/// What happened to `notifications/cancelled` messages, by the state the
/// request was in when the cancellation arrived.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct CancelCounts {
    /// Queued: the request never started and got no response.
    pub queued: u64,
    /// Running: its producers were stopped and it got no response.
    pub running: u64,
    /// Writing: its response was already committed and was completed.
    pub writing: u64,
    /// Done or unknown id, or `initialize` (cannot be cancelled): ignored.
    pub ignored: u64,
    /// Malformed (no usable `requestId`): ignored.
    pub malformed: u64,
}

/// The counters of one serve loop, returned by
/// [`Server::serve`](super::Server::serve).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServeReport {
    /// The stdin framer's byte accounting.
    pub framer: Stats,
    /// Requests received (valid messages with an id).
    pub requests: u64,
    /// Notifications received.
    pub notifications: u64,
    /// Frames that were not JSON-RPC messages (answered -32700 / -32600).
    pub malformed: u64,
    /// Frames over the transport limit (answered -32600 with a `null` id),
    /// an unterminated one cut off by stdin EOF included.
    pub oversize: u64,
    /// Lines holding nothing but JSON whitespace (space, tab, `\r`), empty
    /// lines included: not messages, so skipped without a reply.
    pub blank_lines: u64,
    /// Responses from the host (this server sends no requests): ignored.
    pub unexpected_responses: u64,
    /// Requests for methods this server does not have (answered -32601).
    pub unknown_methods: u64,
    /// Requests refused by the 2026-07-28 rules: a modern request (any
    /// `server/discover`, or a request whose `_meta` carries a per-request
    /// member) without its required `_meta` members (-32602), or naming a
    /// version not served (-32022, listing the supported ones).
    pub protocol_errors: u64,
    /// Requests whose id was already in flight (answered -32600 with a
    /// `null` id, so that the answer cannot be taken for the original's).
    pub duplicate_ids: u64,
    /// Requests refused because `max_concurrent + max_queued` calls were
    /// already admitted (answered -32000).
    pub overloaded: u64,
    /// `initialize` requests after the first (answered -32600).
    pub repeated_initialize: u64,
    /// Cancellations, by state.
    pub cancels: CancelCounts,
    /// Handlers that panicked (answered with a tool result, `isError: true`).
    pub handler_panics: u64,
    /// Handlers that returned an error other than invalid params (answered
    /// with a tool result, `isError: true`).
    pub tool_errors: u64,
    /// Results over the response limit (answered with a tool result,
    /// `isError: true`, saying so).
    pub oversize_results: u64,
    /// Results with `structuredContent` from a tool that declares no
    /// `outputSchema`: sent without it (their text block still carries the
    /// JSON).
    pub undeclared_structured: u64,
    /// Frames written to stdout, each whole.
    pub frames_out: u64,
    /// Bytes written to stdout, `\n` included.
    pub bytes_out: u64,
    /// Replies that could not be queued because stdout had failed (the host
    /// is gone). Never because a queue was full: the loop waits instead.
    pub replies_dropped: u64,
    /// Times the stdin loop stopped reading stdin because its reply backlog
    /// ([`ServerConfig::control_queue_bytes`](super::ServerConfig::control_queue_bytes))
    /// was full: the host was not draining stdout.
    pub stdin_pauses: u64,
    /// Requests still in flight at the shutdown deadline (or at a signal),
    /// then cancelled and answered -32603 "abandoned at shutdown"; their
    /// ids are logged.
    pub cancelled_at_shutdown: u64,
    /// The signal (`SIGTERM` = 15, `SIGINT` = 2; on Windows Ctrl-C = 0,
    /// Ctrl-Break = 1) that stopped the loop, if
    /// one did (only [`Server::serve_stdio`](super::Server::serve_stdio)
    /// listens for signals).
    pub signal: Option<i32>,
    /// The error that ended the loop early (stdin read or stdout write), if any.
    pub error: Option<String>,
    /// Frames still queued for stdout when the flush deadline passed.
    pub unflushed_frames: u64,
}

/// Counters updated by the serve loop's tasks.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) requests: AtomicU64,
    pub(crate) notifications: AtomicU64,
    pub(crate) malformed: AtomicU64,
    pub(crate) oversize: AtomicU64,
    pub(crate) blank_lines: AtomicU64,
    pub(crate) unexpected_responses: AtomicU64,
    pub(crate) unknown_methods: AtomicU64,
    pub(crate) protocol_errors: AtomicU64,
    pub(crate) duplicate_ids: AtomicU64,
    pub(crate) overloaded: AtomicU64,
    pub(crate) repeated_initialize: AtomicU64,
    pub(crate) cancel_queued: AtomicU64,
    pub(crate) cancel_running: AtomicU64,
    pub(crate) cancel_writing: AtomicU64,
    pub(crate) cancel_ignored: AtomicU64,
    pub(crate) cancel_malformed: AtomicU64,
    pub(crate) handler_panics: AtomicU64,
    pub(crate) tool_errors: AtomicU64,
    pub(crate) oversize_results: AtomicU64,
    pub(crate) undeclared_structured: AtomicU64,
    pub(crate) frames_out: AtomicU64,
    pub(crate) bytes_out: AtomicU64,
    pub(crate) replies_dropped: AtomicU64,
    pub(crate) stdin_pauses: AtomicU64,
    pub(crate) cancelled_at_shutdown: AtomicU64,
}

impl Counters {
    pub(crate) fn report(&self, framer: Stats) -> ServeReport {
        ServeReport {
            framer,
            requests: get(&self.requests),
            notifications: get(&self.notifications),
            malformed: get(&self.malformed),
            oversize: get(&self.oversize),
            blank_lines: get(&self.blank_lines) + framer.empty_lines,
            unexpected_responses: get(&self.unexpected_responses),
            unknown_methods: get(&self.unknown_methods),
            protocol_errors: get(&self.protocol_errors),
            duplicate_ids: get(&self.duplicate_ids),
            overloaded: get(&self.overloaded),
            repeated_initialize: get(&self.repeated_initialize),
            cancels: CancelCounts {
                queued: get(&self.cancel_queued),
                running: get(&self.cancel_running),
                writing: get(&self.cancel_writing),
                ignored: get(&self.cancel_ignored),
                malformed: get(&self.cancel_malformed),
            },
            handler_panics: get(&self.handler_panics),
            tool_errors: get(&self.tool_errors),
            oversize_results: get(&self.oversize_results),
            undeclared_structured: get(&self.undeclared_structured),
            frames_out: get(&self.frames_out),
            bytes_out: get(&self.bytes_out),
            replies_dropped: get(&self.replies_dropped),
            stdin_pauses: get(&self.stdin_pauses),
            cancelled_at_shutdown: get(&self.cancelled_at_shutdown),
            signal: None,
            error: None,
            unflushed_frames: 0,
        }
    }
}
