//! The host's limits and deadlines.

use std::time::Duration;

use mcp_framer_jsonrpc::protocol::NEWEST;

/// The host's limits and deadlines.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct HostConfig {
    /// The transport limit on each response body and each event-stream
    /// event, in bytes. Default 16 MiB (the newline transport's default).
    pub max_receive: usize,
    /// How long the child has to answer the HTTP/2 preface. Default 10 s.
    pub startup_timeout: Duration,
    /// A request's deadline, from its send. Default 120 s.
    pub request_timeout: Duration,
    /// How long a write to the child's stdin may stay pending before the
    /// session ends. Default 30 s.
    pub write_timeout: Duration,
    /// Bytes of stderr kept (the tail). Default 64 KiB.
    pub stderr_tail: usize,
    /// How long [`Client::shutdown`](super::Client::shutdown) waits for the child after closing the
    /// connection, and again after `SIGTERM`. Default 2 s.
    pub exit_grace: Duration,
    /// The HTTP/2 window of each stream (how much of a response may arrive
    /// unread). Default 1 MiB.
    pub stream_window: u32,
    /// The connection's HTTP/2 window. Default 16 MiB. The window used is
    /// at least `(max_calls + 1) × stream_window` (see
    /// [`HostConfig::effective_connection_window`]), so that calls whose
    /// event budget is full, each holding at most one stream window, can
    /// never take the whole connection window.
    pub connection_window: u32,
    /// Calls in flight at once (requests whose [`Call`](super::Call) is
    /// alive and unanswered, listen streams included); a call past it waits
    /// for a slot within its deadline. Each call holds at most about
    /// `2 × max_receive` bytes whether or not it is read, so this bounds
    /// the host's memory (STDIO-V2.md gives the formula). Default 64.
    pub max_calls: usize,
    /// The most bytes of one answer's header list (HPACK-decoded, as
    /// `SETTINGS_MAX_HEADER_LIST_SIZE` counts them) the host takes: a
    /// larger head fails its call (`REFUSED_STREAM`: [`Error::Reset`](super::Error::Reset)),
    /// or the session when its raw block alone is larger. Default 64 KiB
    /// (h2's own default is 16 MiB).
    pub max_header_list: u32,
    /// The protocol version the host speaks. A modern one (2026-07-28, the
    /// default) puts the per-request `_meta` in every request's `params`
    /// (`io.modelcontextprotocol/protocolVersion`, `…/clientCapabilities`
    /// from [`HostConfig::client_capabilities`], `…/clientInfo` from
    /// [`HostConfig::client_info`]; members the caller wrote win), except in
    /// `initialize`, `ping` and after an `initialize` (which opens the
    /// legacy era for the session). A legacy one (`2025-11-25`...) sends
    /// the old shape: no `_meta` added. Either way the
    /// `mcp-protocol-version` header mirrors the body's version when it has
    /// one, else says this version (the newest legacy one in a legacy
    /// session of a modern host).
    pub protocol_version: &'static str,
    /// `io.modelcontextprotocol/clientCapabilities` of modern requests.
    /// Default `{}`.
    pub client_capabilities: serde_json::Value,
    /// `io.modelcontextprotocol/clientInfo` of modern requests. Default
    /// this crate's name and version.
    pub client_info: serde_json::Value,
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            max_receive: mcp_framer::DEFAULT_MAX_FRAME,
            startup_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(120),
            write_timeout: Duration::from_secs(30),
            stderr_tail: 64 << 10,
            exit_grace: Duration::from_secs(2),
            stream_window: 1 << 20,
            connection_window: 16 << 20,
            max_calls: 64,
            max_header_list: 64 << 10,
            protocol_version: NEWEST,
            client_capabilities: serde_json::json!({}),
            client_info: serde_json::json!({"name": env!("CARGO_PKG_NAME"), "version": env!("CARGO_PKG_VERSION")}),
        }
    }
}

impl HostConfig {
    /// Sets [`HostConfig::max_receive`].
    #[must_use]
    pub fn with_max_receive(mut self, bytes: usize) -> HostConfig {
        self.max_receive = bytes;
        self
    }

    /// Sets [`HostConfig::startup_timeout`].
    #[must_use]
    pub fn with_startup_timeout(mut self, timeout: Duration) -> HostConfig {
        self.startup_timeout = timeout;
        self
    }

    /// Sets [`HostConfig::request_timeout`].
    #[must_use]
    pub fn with_request_timeout(mut self, timeout: Duration) -> HostConfig {
        self.request_timeout = timeout;
        self
    }

    /// Sets [`HostConfig::write_timeout`].
    #[must_use]
    pub fn with_write_timeout(mut self, timeout: Duration) -> HostConfig {
        self.write_timeout = timeout;
        self
    }

    /// Sets [`HostConfig::protocol_version`] (`"2025-11-25"` for the old
    /// shape: no per-request `_meta`).
    #[must_use]
    pub fn with_protocol_version(mut self, version: &'static str) -> HostConfig {
        self.protocol_version = version;
        self
    }

    /// Sets [`HostConfig::max_calls`].
    #[must_use]
    pub fn with_max_calls(mut self, calls: usize) -> HostConfig {
        self.max_calls = calls;
        self
    }

    /// The connection window the host announces:
    /// `max(connection_window, (max_calls + 1) × stream_window)`, at most
    /// 2^31 − 1 (HTTP/2's largest).
    pub fn effective_connection_window(&self) -> u32 {
        let floor = (self.max_calls.max(1) as u64 + 1) * u64::from(self.stream_window);
        floor.max(u64::from(self.connection_window)).min((1 << 31) - 1) as u32
    }

    /// Sets [`HostConfig::stream_window`].
    #[must_use]
    pub fn with_stream_window(mut self, bytes: u32) -> HostConfig {
        self.stream_window = bytes;
        self
    }
}
