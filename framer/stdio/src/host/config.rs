//! How a host runs: the one configuration both layers read
//! ([`Connection`](super::Connection) and [`Session`](super::Session)), the
//! overload rules of its inbound queue, and the shutdown sequence's waits.
//!
//! Nothing here does I/O; every other host module may import this one, and
//! this one imports none of them.

use crate::setters::setters;
use std::time::Duration;

use mcp_framer::Config;

/// Default bound on the bytes held by the application's inbound queue:
/// 64 MiB, four messages at the default transport limit.
pub const DEFAULT_MAX_QUEUED_BYTES: usize = 64 << 20;

/// Default bound on the excerpt of a skipped line: 120 bytes.
pub const DEFAULT_EXCERPT: usize = 120;

/// The message of the reply sent under [`OverloadPolicy::Reject`] (code
/// [`OVERLOADED`](mcp_framer_jsonrpc::OVERLOADED)).
pub const OVERLOADED_MESSAGE: &str = "host overloaded: request dropped, try again later";

/// The message of the "method not found" ([`METHOD_NOT_FOUND`](mcp_framer_jsonrpc::METHOD_NOT_FOUND))
/// reply to a server request when the application dropped its inbound
/// receiver: the host takes no server requests.
///
/// **The no-consumer rule.** Once the application has dropped its inbound
/// receiver, each server request is answered -32601 with this message, and
/// anything else the queue would have carried (notifications, responses
/// nobody asked for) is dropped. Both count in
/// [`unconsumed`](super::MetricsSnapshot::unconsumed), never as overload
/// (see [`Overload`]); reports of skipped lines are not messages and are not
/// counted there.
pub const NO_CONSUMER_MESSAGE: &str = "this host takes no server requests";

/// How a host session runs, at both layers: [`Connection`](super::Connection)
/// reads every field but [`request_timeout`](SessionConfig::request_timeout),
/// which belongs to [`Session`](super::Session)'s request table. Every field
/// has a default; build one from the default with the `with_*` setters (the
/// fields may grow, so the struct is `#[non_exhaustive]`).
///
/// The receive side and the send side have one name each, as on the server
/// (`ServerConfig` has the same two): the transport limit of what is read is
/// [`framer`](SessionConfig::framer)`.max_frame` (set it with
/// [`with_max_receive`](SessionConfig::with_max_receive)), the limit of what
/// is written is [`max_send`](SessionConfig::max_send).
///
/// ```
/// use std::time::Duration;
/// use mcp_framer_stdio::host::{Overload, OverloadPolicy, SessionConfig};
///
/// // Opt in to absorbing bursts: wait at most 10 ms per overload episode.
/// let overload = Overload::default().with_policy(OverloadPolicy::Drop).with_max_wait(Duration::from_millis(10));
/// let config = SessionConfig::default()
///     .with_max_receive(8 << 20)
///     .with_overload(overload)
///     .with_request_timeout(Duration::from_secs(30));
/// assert_eq!(config.framer.max_frame, 8 << 20);
/// assert_eq!(config.overload.max_queued_bytes, 64 << 20); // the queue is bounded by bytes
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SessionConfig {
    /// How stdout is framed: the transport limit in bytes
    /// ([`Config::max_frame`], default 16 MiB; the reader never parses a
    /// frame over it) and what happens to a frame over it
    /// ([`Config::oversize`]: skip to its `\n` and go on, or end the session).
    pub framer: Config,
    /// The most bytes of one frame this host sends (its JSON, `\n`
    /// excluded): the server's transport limit, if the host knows it. A
    /// message over it is refused before anything is written
    /// ([`EncodeError::TooLarge`](mcp_framer_jsonrpc::EncodeError::TooLarge)),
    /// and the session goes on; sent anyway, the server would discard it and
    /// the request would wait out its timeout (or, for some servers, the
    /// server would exit). Default `usize::MAX`: no check.
    pub max_send: usize,
    /// The inbound queue's byte bound, wait budget and policy.
    pub overload: Overload,
    /// The most bytes of a skipped line quoted in reports (the head of a
    /// [`Preview`](crate::Preview), cut at a character boundary). Default:
    /// [`DEFAULT_EXCERPT`].
    pub excerpt: usize,
    /// [`Session`](super::Session) only: how long a request waits for its
    /// response before it fails and a `notifications/cancelled` is sent.
    /// Default 60 s. The deadline runs from when the request was written,
    /// whether or not anyone awaits its [`PendingRequest`](super::PendingRequest).
    pub request_timeout: Duration,
    /// How long one frame may take to be written to the child's stdin.
    /// Default 10 s. A write that takes longer ends the session
    /// ([`CloseReason::StdinStalled`](super::CloseReason::StdinStalled)).
    pub write_timeout: Duration,
    /// Bytes of stderr kept for diagnostics (the tail of a
    /// [`Preview`](crate::Preview), cut at a character boundary). Default 64 KiB.
    pub stderr_tail: usize,
    /// How stderr lines are forwarded to `tracing`. Default `Debug`.
    pub stderr_log: StderrLog,
    /// Once the child exited (or stdout closed), how long to wait for stdout
    /// and stderr to reach end of file (or for the child to exit) before the
    /// session is declared over. Default 1 s. If the child exited and its
    /// stdout is still open then (a process it left holds it), the reader
    /// stops all the same: the inbound queue ends once what was queued is
    /// taken, and what is left of the process tree is killed. A session
    /// that ends on its own limits (oversize under `Fail`, overload, a read
    /// error) kills the child and waits for it up to the longer of this and
    /// [`ShutdownConfig::after_kill`], so its [`Closed`](super::Closed)
    /// carries the exit status.
    pub exit_grace: Duration,
    /// The shutdown sequence's waits.
    pub shutdown: ShutdownConfig,
    /// Spawn the server as the root of a process tree of its own, and stop
    /// the whole tree, so its own children go too: a new process group on
    /// unix (signalled), a Job Object on Windows (terminated). Default `true`.
    pub process_tree: bool,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            framer: Config::default(),
            max_send: usize::MAX,
            overload: Overload::default(),
            excerpt: DEFAULT_EXCERPT,
            request_timeout: Duration::from_secs(60),
            write_timeout: Duration::from_secs(10),
            stderr_tail: 64 * 1024,
            stderr_log: StderrLog::Debug,
            exit_grace: Duration::from_secs(1),
            shutdown: ShutdownConfig::default(),
            process_tree: true,
        }
    }
}

setters!(SessionConfig {
    framer: Config => with_framer,
    max_send: usize => with_max_send,
    overload: Overload => with_overload,
    excerpt: usize => with_excerpt,
    request_timeout: Duration => with_request_timeout,
    write_timeout: Duration => with_write_timeout,
    stderr_tail: usize => with_stderr_tail,
    stderr_log: StderrLog => with_stderr_log,
    exit_grace: Duration => with_exit_grace,
    shutdown: ShutdownConfig => with_shutdown,
    process_tree: bool => with_process_tree,
});

impl SessionConfig {
    /// Sets the transport limit of what is read, in bytes
    /// ([`framer`](SessionConfig::framer)`.max_frame`).
    #[must_use]
    pub fn with_max_receive(mut self, bytes: usize) -> SessionConfig {
        self.framer.max_frame = bytes;
        self
    }
}

/// How long each step of the shutdown sequence waits for the child to exit
/// ([`Session::shutdown`](super::Session::shutdown),
/// [`Connection::shutdown`](super::Connection::shutdown)). Build one from the
/// default with the `with_*` setters (`#[non_exhaustive]`: the fields may
/// grow).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ShutdownConfig {
    /// After closing stdin (servers SHOULD exit on end of input). Default 2 s.
    pub after_stdin: Duration,
    /// After SIGTERM. Default 2 s. Not used on Windows, which has no such
    /// request: the job is terminated once `after_stdin` has passed.
    pub after_term: Duration,
    /// After SIGKILL (only the kernel is left to wait for). Default 2 s.
    pub after_kill: Duration,
}

impl Default for ShutdownConfig {
    fn default() -> Self {
        let two = Duration::from_secs(2);
        ShutdownConfig { after_stdin: two, after_term: two, after_kill: two }
    }
}

setters!(ShutdownConfig {
    after_stdin: Duration => with_after_stdin,
    after_term: Duration => with_after_term,
    after_kill: Duration => with_after_kill,
});

impl ShutdownConfig {
    /// Sets all three waits to `each`.
    pub fn with_each(self, each: Duration) -> ShutdownConfig {
        ShutdownConfig { after_stdin: each, after_term: each, after_kill: each }
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

/// What the reader does with a server message that does not fit in the
/// application's queue once it may no longer wait for room (at once by
/// default; see [`Overload`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum OverloadPolicy {
    /// Drop the message and count it in
    /// [`overload_dropped`](super::MetricsSnapshot::overload_dropped).
    Drop,
    /// Answer a server request with a JSON-RPC error
    /// ([`OVERLOADED`](mcp_framer_jsonrpc::OVERLOADED), [`OVERLOADED_MESSAGE`])
    /// and drop it, counted in
    /// [`overload_rejected`](super::MetricsSnapshot::overload_rejected), so the
    /// server is not left waiting for an answer. Anything else cannot be
    /// answered: it is dropped and counted as under `Drop`. The default.
    #[default]
    Reject,
    /// End the session on purpose: the reader stops, the child is killed and
    /// every pending request fails with
    /// [`CloseReason::Overloaded`](super::CloseReason::Overloaded), so the
    /// caller can start a new session.
    EndSession,
}

/// How the reader hands messages to the application's queue, which is
/// bounded by bytes. The reader keeps draining the server's stdout whatever
/// the application does: a message that does not fit gets the
/// [`OverloadPolicy`] (drop, reject, end the session), and reading goes on.
///
/// **What is counted.** Every item queued (message or report) counts its
/// frame's bytes plus a fixed [`ITEM_OVERHEAD`](super::ITEM_OVERHEAD) for the
/// item itself, from when the reader queues it until the application drops
/// it (not merely takes it), and at most `max_queued_bytes` are held at once;
/// so a flood of tiny messages is bounded as surely as a few large ones. One
/// message always fits when none is held, whatever its size (it then counts
/// as the whole bound). The messages of one read are handed over together in
/// one shared buffer (see [`Reader`](super::Reader)) and count until the
/// last of them is dropped, since that is when their buffer is freed. A
/// clone is the application's own copy and does not count. So the memory a
/// stalled application makes the host hold is bounded by the larger of
/// `max_queued_bytes` and one message. (A batch's buffer then goes back to
/// the reader for a later read, emptied: the reader keeps at most two
/// buffers and two item vectors, at most [`Config::retain`](mcp_framer::Config::retain)
/// bytes in all, outside this bound; see [`Reader`](super::Reader).)
///
/// **What is never refused: a response owed.** On a
/// [`Connection`](super::Connection), a request written with
/// [`Connection::send`](super::Connection::send) makes its response owed
/// until it arrives or a `notifications/cancelled` naming its id is sent. A
/// response or error response for an owed id, or the report of an oversize
/// response whose recovered id is owed, is queued whatever the policy and
/// whatever the wait budget: it counts against the bound when it fits, and is
/// queued outside the bound when it does not. What responses hold beyond the
/// bound is so limited by the requests the application has in flight (each
/// at most the transport limit). A response nobody asked for (or one that
/// comes after its cancellation) is treated like a notification. (A
/// [`Session`](super::Session) hands responses to their requests directly,
/// never through the queue.)
///
/// **Overload episode.** An episode starts when a message does not fit, and
/// ends only once the application has dropped what it held to at most half
/// the bound (not as soon as one message fits). Each episode is counted in
/// [`overload_episodes`](super::MetricsSnapshot::overload_episodes). During an
/// episode, a message that fits is still queued.
///
/// **`max_wait` is a budget per episode, not per message.**
///
/// * `max_wait` zero (**the default**): the reader never waits and arms no
///   timer. A message that does not fit gets the policy at once, so the
///   server is never paced by the application; the price is that a burst
///   larger than the bound is shed even if the application would have caught
///   up a moment later.
/// * `max_wait` above zero (opt in, for a host that prefers absorbing short
///   bursts to shedding): a message that does not fit may wait for room, but
///   the waits of one episode add up to at most `max_wait`, however many of
///   them succeed. Once the budget is spent, every message that does not fit
///   gets the policy at once until the episode ends. The trade-off: a
///   steadily slow application paces the reader, and so holds the server in
///   `write(2)` (unable to read its stdin, cancellations included), for up to
///   `max_wait` per episode; then the reader sheds until the application has
///   caught up halfway.
///
/// An episode is logged at `WARN` when it starts (the bound, the policy) and
/// when it ends (how many messages it dropped and how many server requests
/// it rejected); each message refused is logged at `DEBUG`.
///
/// **Letting the application run.** A message that does not fit is not
/// refused at once: the reader first yields to the runtime a few times (no
/// timer, no wait on the application), so a consumer that keeps up, which on
/// a current-thread runtime may simply not have had a turn, makes room. Only
/// if none is made does the episode start; within an episode the policy
/// applies at once. Past half the bound, the reader also yields once after
/// each read's messages it queues. So by default nothing is lost to a
/// consumer that keeps up, and a stalled one never holds the reader.
///
/// A closed queue (the application dropped its receiver) is not an overload:
/// [`NO_CONSUMER_MESSAGE`] states what happens then. Time spent waiting is
/// counted in [`dispatch_wait`](super::MetricsSnapshot::dispatch_wait)
/// (always zero by default); refused messages in
/// [`overload_dropped`](super::MetricsSnapshot::overload_dropped) or
/// [`overload_rejected`](super::MetricsSnapshot::overload_rejected).
///
/// ```
/// use std::time::Duration;
/// use mcp_framer_stdio::host::{ITEM_OVERHEAD, Overload, OverloadPolicy, Reader, SessionConfig};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let note = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n";
/// let stdout = note.repeat(5);
/// // Room for two of them.
/// let two = 2 * (note.len() - 1 + ITEM_OVERHEAD);
///
/// // The default: never wait. Nobody consumes this queue.
/// assert_eq!(Overload::default().max_wait, Duration::ZERO);
/// assert_eq!(Overload::default().policy, OverloadPolicy::Reject);
/// let config = SessionConfig::default().with_overload(Overload::default().with_max_queued_bytes(two));
/// let (inbound, _queue) = mcp_framer_stdio::host::inbound_channel();
/// let reader = Reader::new(&config, inbound);
/// let metrics = reader.metrics();
/// reader.run(stdout.as_bytes()).await;
/// let m = metrics.snapshot();
/// assert_eq!((m.delivered, m.overload_dropped, m.overload_episodes), (2, 3, 1));
/// assert_eq!(m.dispatch_wait, Duration::ZERO);
///
/// // Opt in: wait at most 20 ms in total for the whole episode; the first
/// // message that does not fit uses the budget up, the next two get the
/// // policy at once.
/// let overload = Overload::default()
///     .with_max_queued_bytes(two)
///     .with_policy(OverloadPolicy::Drop)
///     .with_max_wait(Duration::from_millis(20));
/// let (inbound, _queue) = mcp_framer_stdio::host::inbound_channel();
/// let reader = Reader::new(&SessionConfig::default().with_overload(overload), inbound);
/// let metrics = reader.metrics();
/// reader.run(stdout.as_bytes()).await;
/// let m = metrics.snapshot();
/// assert_eq!((m.delivered, m.overload_dropped, m.overload_episodes), (2, 3, 1));
/// assert!(m.dispatch_wait >= Duration::from_millis(20));
/// # }
/// ```
///
/// Build one from the default with the `with_*` setters (the fields may grow,
/// so the struct is `#[non_exhaustive]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Overload {
    /// What a message that does not fit gets. Default: [`OverloadPolicy::Reject`].
    pub policy: OverloadPolicy,
    /// The most the reader may wait for room in the queue, in total, per
    /// overload episode. Default: zero (never wait).
    pub max_wait: Duration,
    /// The most bytes held by the queue and by the application (see above),
    /// at least 1 and at most `u32::MAX` (values outside are clamped).
    /// Default: [`DEFAULT_MAX_QUEUED_BYTES`].
    pub max_queued_bytes: usize,
}

impl Default for Overload {
    fn default() -> Self {
        Overload {
            policy: OverloadPolicy::default(),
            max_wait: Duration::ZERO,
            max_queued_bytes: DEFAULT_MAX_QUEUED_BYTES,
        }
    }
}

setters!(Overload {
    policy: OverloadPolicy => with_policy,
    max_wait: Duration => with_max_wait,
    max_queued_bytes: usize => with_max_queued_bytes,
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_receive_limit_takes_one_call_and_sits_where_the_server_has_it() {
        let config = SessionConfig::default().with_max_receive(4096).with_max_send(2048);
        assert_eq!((config.framer.max_frame, config.max_send), (4096, 2048));
        assert_eq!(SessionConfig::default().framer, Config::default());
        assert_eq!(ShutdownConfig::default(), ShutdownConfig::default().with_each(Duration::from_secs(2)));
    }
}
