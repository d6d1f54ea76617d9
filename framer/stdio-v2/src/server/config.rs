//! [`V2Config`] (the front's limits and their defaults), [`V2Report`] (what
//! a session did) and the counters behind it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use mcp_framer_stdio::server::ServeReport;

/// The front's limits. The transport limit and the response limit are the
/// [`Server`](mcp_framer_stdio::server::Server)'s own ([`ServerConfig::framer`](mcp_framer_stdio::server::ServerConfig::framer)`.max_frame`,
/// [`ServerConfig::max_send`](mcp_framer_stdio::server::ServerConfig::max_send)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct V2Config {
    /// How long a write to the output may stay pending (the host not reading
    /// stdout) before the session ends. Default 30 s.
    /// The same timeout applies to each stream: a response or event that
    /// has waited that long for the client's window (the client stopped
    /// reading that stream) ends that stream with `RST_STREAM` (`CANCEL`),
    /// counted in [`V2Report::stalled_streams`], so that its bytes leave
    /// the dispatcher's budget.
    pub stall_timeout: Duration,
    /// The HTTP/2 window of each stream the client opens (how much request
    /// body may arrive unread). Default 1 MiB.
    pub stream_window: u32,
    /// The connection's HTTP/2 window. Default 16 MiB.
    pub connection_window: u32,
    /// The streams a client may have open at once (`SETTINGS_MAX_CONCURRENT_STREAMS`).
    /// Default 1024.
    pub max_concurrent_streams: u32,
    /// The most bytes of one request's header list (HPACK-decoded, as RFC
    /// 9113 counts `SETTINGS_MAX_HEADER_LIST_SIZE`): a larger one is refused
    /// by h2 before the stream reaches the front (`431`, or a reset while
    /// its CONTINUATION frames arrive), so headers count against no other
    /// budget. Default 16 KiB, hyper's.
    pub max_header_list_size: u32,
    /// `subscriptions/listen` streams open at once; one more is answered
    /// `503`. Each holds at most [`V2Config::stream_backlog`] bytes of
    /// notifications waiting for its window. Default 8.
    pub max_listeners: usize,
    /// Streams the client reset that h2 keeps before it ends the connection
    /// with `ENHANCE_YOUR_CALM` (a reset flood; h2's
    /// `max_pending_accept_reset_streams`). Default 128: above h2's 20, since
    /// a legitimate host that drops a burst of calls at once (16 in the
    /// soak) resets them faster than a loaded server accepts them; a flood
    /// still ends the connection.
    pub max_pending_accept_reset_streams: usize,
    /// Streams this side reset for the client's protocol errors before h2
    /// ends the connection (h2's `max_local_error_reset_streams`). Default
    /// 1024, h2's.
    pub max_local_error_reset_streams: usize,
    /// Bytes of notifications (progress, a tool's messages) that may wait
    /// for one request stream's window, and of change notifications for one
    /// listen stream; more are dropped and counted. Default 1 MiB.
    pub stream_backlog: usize,
    /// Bytes of request bodies held at once while they arrive, over every
    /// stream, until each is handed to the dispatcher. A body whose next
    /// DATA frame would go over it is answered `503` with -32000 (server
    /// overloaded) and the rest of it is read and thrown away; counted in
    /// [`V2Report::busy_bodies`]. `None` (the default): the transport limit,
    /// so that, as on the newline transport, what is held is one request's
    /// worth of bytes (plus HTTP/2's unread window), however many streams
    /// the client opens.
    pub max_assembling: Option<usize>,
}

impl Default for V2Config {
    fn default() -> Self {
        V2Config {
            stall_timeout: Duration::from_secs(30),
            stream_window: 1 << 20,
            connection_window: 16 << 20,
            max_concurrent_streams: 1024,
            max_header_list_size: 16 << 10,
            max_listeners: 8,
            max_pending_accept_reset_streams: 128,
            max_local_error_reset_streams: 1024,
            stream_backlog: 1 << 20,
            max_assembling: None,
        }
    }
}

impl V2Config {
    /// Sets [`V2Config::stall_timeout`].
    #[must_use]
    pub fn with_stall_timeout(mut self, timeout: Duration) -> V2Config {
        self.stall_timeout = timeout;
        self
    }

    /// Sets [`V2Config::stream_window`].
    #[must_use]
    pub fn with_stream_window(mut self, bytes: u32) -> V2Config {
        self.stream_window = bytes;
        self
    }

    /// Sets [`V2Config::max_assembling`].
    #[must_use]
    pub fn with_max_assembling(mut self, bytes: usize) -> V2Config {
        self.max_assembling = Some(bytes);
        self
    }

    /// Sets [`V2Config::max_header_list_size`].
    #[must_use]
    pub fn with_max_header_list_size(mut self, bytes: u32) -> V2Config {
        self.max_header_list_size = bytes;
        self
    }

    /// Sets [`V2Config::max_concurrent_streams`].
    #[must_use]
    pub fn with_max_concurrent_streams(mut self, streams: u32) -> V2Config {
        self.max_concurrent_streams = streams;
        self
    }

    /// Sets [`V2Config::stream_backlog`].
    #[must_use]
    pub fn with_stream_backlog(mut self, bytes: usize) -> V2Config {
        self.stream_backlog = bytes;
        self
    }
}

/// What a `stdio-v2` session did: the dispatcher's [`ServeReport`] and the
/// front's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct V2Report {
    /// The dispatcher's report (requests, tool errors, cancellations...).
    pub serve: ServeReport,
    /// HTTP/2 streams the client opened.
    pub streams: u64,
    /// Request POSTs handed to the dispatcher.
    pub requests: u64,
    /// Notification POSTs handed to the dispatcher.
    pub notifications: u64,
    /// `subscriptions/listen` streams opened.
    pub listeners: u64,
    /// Streams on another path or with another method (`404`, `405`).
    pub bad_routes: u64,
    /// Bodies over the transport limit (`413`).
    pub oversize_bodies: u64,
    /// The bytes of those bodies that arrived, read and thrown away (a
    /// refused `content-length` counts only what was then sent).
    pub oversize_bytes: u64,
    /// Bodies refused `503` because the bodies arriving at once held
    /// [`V2Config::max_assembling`] bytes.
    pub busy_bodies: u64,
    /// The bytes of those bodies that arrived, read and thrown away.
    pub busy_bytes: u64,
    /// Bodies that were not one JSON-RPC request or notification (`400`).
    pub malformed_bodies: u64,
    /// Requests whose headers were missing or contradicted the body (`400`).
    pub header_mismatches: u64,
    /// Requests refused because their id (or their progress token) was in
    /// flight (`400`).
    pub duplicate_ids: u64,
    /// Request streams the client reset while their request was in flight:
    /// each became a `notifications/cancelled`.
    pub resets: u64,
    /// Responses that came for a request no stream waited for any more
    /// (reset or cancelled), and responses with a `null` id (none comes
    /// from this front's dispatcher: its keys are its own): dropped.
    pub late_responses: u64,
    /// Server notifications that belonged to no waiting stream and no
    /// listener asked for (and progress whose request was gone): dropped.
    pub notifications_dropped: u64,
    /// Notifications of a request (progress, a tool's messages) dropped
    /// because their stream already had [`V2Config::stream_backlog`] bytes
    /// waiting for window.
    pub progress_dropped: u64,
    /// Change notifications not delivered to one listen stream because its
    /// backlog was full (counted once per listener that missed it, also
    /// when another listener got it).
    pub listener_drops: u64,
    /// `subscriptions/listen` streams refused (`503`): [`V2Config::max_listeners`] open.
    pub listeners_refused: u64,
    /// Streams reset because the client left their window shut for
    /// [`V2Config::stall_timeout`] with a response or event waiting.
    pub stalled_streams: u64,
    /// Responses dropped because their stream was reset (by the client, or
    /// for a stall) while they waited for window or were being sent.
    pub responses_unsent: u64,
    /// The session ended because the output stalled for
    /// [`V2Config::stall_timeout`].
    pub stalled: bool,
    /// The HTTP/2 connection's error, if it ended with one (the client
    /// closing the pipes, even mid-write, is not one).
    pub connection_error: Option<String>,
}

#[derive(Debug, Default)]
pub(super) struct Counters {
    pub(super) streams: AtomicU64,
    pub(super) requests: AtomicU64,
    pub(super) notifications: AtomicU64,
    pub(super) listeners: AtomicU64,
    pub(super) bad_routes: AtomicU64,
    pub(super) oversize_bodies: AtomicU64,
    pub(super) oversize_bytes: AtomicU64,
    pub(super) busy_bodies: AtomicU64,
    pub(super) busy_bytes: AtomicU64,
    pub(super) malformed_bodies: AtomicU64,
    pub(super) header_mismatches: AtomicU64,
    pub(super) duplicate_ids: AtomicU64,
    pub(super) resets: AtomicU64,
    pub(super) late_responses: AtomicU64,
    pub(super) notifications_dropped: AtomicU64,
    pub(super) progress_dropped: AtomicU64,
    pub(super) listener_drops: AtomicU64,
    pub(super) listeners_refused: AtomicU64,
    pub(super) stalled_streams: AtomicU64,
    pub(super) responses_unsent: AtomicU64,
}

pub(super) fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

impl Counters {
    pub(super) fn report(&self, serve: ServeReport) -> V2Report {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        V2Report {
            serve,
            streams: get(&self.streams),
            requests: get(&self.requests),
            notifications: get(&self.notifications),
            listeners: get(&self.listeners),
            bad_routes: get(&self.bad_routes),
            oversize_bodies: get(&self.oversize_bodies),
            oversize_bytes: get(&self.oversize_bytes),
            busy_bodies: get(&self.busy_bodies),
            busy_bytes: get(&self.busy_bytes),
            malformed_bodies: get(&self.malformed_bodies),
            header_mismatches: get(&self.header_mismatches),
            duplicate_ids: get(&self.duplicate_ids),
            resets: get(&self.resets),
            late_responses: get(&self.late_responses),
            notifications_dropped: get(&self.notifications_dropped),
            progress_dropped: get(&self.progress_dropped),
            listener_drops: get(&self.listener_drops),
            listeners_refused: get(&self.listeners_refused),
            stalled_streams: get(&self.stalled_streams),
            responses_unsent: get(&self.responses_unsent),
            stalled: false,
            connection_error: None,
        }
    }
}
