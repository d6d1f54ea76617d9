//! [`ServerConfig`]: the limits of a server's transport and of its
//! dispatcher, and their defaults.

use std::time::Duration;

use crate::setters::setters;
use mcp_framer::{Config, DEFAULT_MAX_FRAME};

/// The default [`ServerConfig::control_queue_bytes`]: 1 MiB, some 28,000
/// `ping` replies.
pub const DEFAULT_CONTROL_QUEUE_BYTES: usize = 1 << 20;

/// The default [`ServerConfig::shutdown_grace`]: 1 s. A host that closes a
/// server's stdin waits about 2 s before it sends `SIGTERM` (the official
/// Python and TypeScript SDKs' clients do; `mcp-probe`'s shutdown check
/// gives 2 s too), so a server that lets its calls run longer after the end
/// of stdin is terminated rather than exiting by itself. One second leaves
/// the other second to cancel what still runs, flush and exit.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(1);

/// Limits of a serve loop. Build one from the default with the `with_*`
/// setters (the fields may grow, so the struct is `#[non_exhaustive]`).
///
/// ```
/// use std::time::Duration;
/// use mcp_framer_stdio::server::ServerConfig;
///
/// let config = ServerConfig::default().with_max_concurrent(4).with_shutdown_grace(Duration::from_secs(1));
/// assert_eq!((config.max_concurrent, config.max_queued), (4, 256));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerConfig {
    /// The stdin framer's configuration: the transport limit and line rules,
    /// the same as the host's. Default: [`Config::default`] (16 MiB, skip
    /// oversize messages).
    pub framer: Config,
    /// Tool calls running at once. Default: 16.
    pub max_concurrent: usize,
    /// Tool calls waiting for a slot; beyond this, calls are refused with
    /// -32000. Default: 256.
    pub max_queued: usize,
    /// The largest frame written, in bytes of JSON (without `\n`): the
    /// host's transport limit. A larger result is replaced by a tool failure
    /// saying so, a larger error by a short -32603. Default:
    /// [`DEFAULT_MAX_FRAME`]. (The receive limit is
    /// [`framer`](ServerConfig::framer)`.max_frame`, as on the host; set it
    /// with [`with_max_receive`](ServerConfig::with_max_receive).)
    pub max_send: usize,
    /// Bytes of tool-call frames (results, notifications) queued for stdout
    /// before handlers wait for room, at least 1 and at most `u32::MAX`
    /// (values outside are clamped); a frame larger than this is queued
    /// alone. Default: [`DEFAULT_MAX_FRAME`].
    pub writer_queue_bytes: usize,
    /// Bytes reserved for the stdin loop's own replies (`initialize`,
    /// `ping`, `tools/list`, every error reply) queued for stdout, apart from
    /// [`writer_queue_bytes`](ServerConfig::writer_queue_bytes), so that they
    /// never wait behind a large result. This is the bounded backlog of
    /// answered-but-unwritten requests: when it is full (the host is not
    /// draining stdout) the loop stops reading stdin until the writer frees
    /// room. Clamped like `writer_queue_bytes`. Default: 1 MiB.
    pub control_queue_bytes: usize,
    /// At stdin EOF: how long in-flight requests may still run, and then how
    /// long the writer may take to flush (at a signal: only the flush).
    /// Default: [`DEFAULT_SHUTDOWN_GRACE`], 1 s.
    pub shutdown_grace: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            framer: Config::default(),
            max_concurrent: 16,
            max_queued: 256,
            max_send: DEFAULT_MAX_FRAME,
            writer_queue_bytes: DEFAULT_MAX_FRAME,
            control_queue_bytes: DEFAULT_CONTROL_QUEUE_BYTES,
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
        }
    }
}

setters!(ServerConfig {
    framer: Config => with_framer,
    max_concurrent: usize => with_max_concurrent,
    max_queued: usize => with_max_queued,
    max_send: usize => with_max_send,
    writer_queue_bytes: usize => with_writer_queue_bytes,
    control_queue_bytes: usize => with_control_queue_bytes,
    shutdown_grace: Duration => with_shutdown_grace,
});

impl ServerConfig {
    /// Sets the transport limit of what is read, in bytes
    /// ([`framer`](ServerConfig::framer)`.max_frame`), as
    /// `SessionConfig::with_max_receive` does on the host.
    #[must_use]
    pub fn with_max_receive(mut self, bytes: usize) -> ServerConfig {
        self.framer.max_frame = bytes;
        self
    }
}
