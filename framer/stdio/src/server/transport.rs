//! The raw server transport: the [stdin loop](super::stdin) and the stdout
//! writer with no dispatcher on them, for another SDK's server (an rmcp
//! adapter brings its own request handling). [`Server`](super::Server) is
//! the dispatcher this crate puts on the same two pieces.

use std::fmt;
use std::future::Future;
use std::io;
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, watch};
use tokio::task::{AbortHandle, JoinHandle};

use super::config::ServerConfig;
use super::report::{Counters, ServeReport};
use super::stdin::{Route, Routed, read_stdin, signal_name};
use super::stdio;
use super::writer::{Outbox, run_writer};
use crate::bound::{ByteBound, Held};
use crate::counter::bump;
use crate::head::Head;
use mcp_framer::Stats;
use mcp_framer_jsonrpc::{Encoder, ErrorObject, Kind, Message, OwnedId};

/// Starts a raw server transport on `input` and `output`: the stdin loop
/// and the stdout writer of [`Server::serve`](super::Server::serve), without
/// its dispatcher. Returns the sending half ([`Outgoing`]) and the messages
/// read ([`Incoming`]).
///
/// # Contract
///
/// The same as under [`Server::serve`](super::Server::serve), which is a
/// dispatcher on this transport; each rule is stated here:
///
/// * stdin is read straight into the [`Framer`](mcp_framer::Framer)'s
///   buffer under [`ServerConfig::framer`] (the byte limit on requests,
///   enforced before any parse; the same policies as the host).
/// * A frame that is not a JSON-RPC message (malformed JSON, not UTF-8, a
///   batch...) is answered by the transport with -32700 or -32600 and the
///   request's id when one can be recovered, `null` otherwise; a frame over
///   the limit is discarded unparsed and answered -32600 with a `null` id,
///   one cut off by the end of stdin included. A line of nothing but JSON
///   whitespace (space, tab, `\r`), like an empty line, is not a message:
///   skipped, not answered. Each case is counted ([`ServeReport`]) and
///   logged; reading goes on.
/// * Every other message is handed on, classified (kind, id, method:
///   [`IncomingFrame`]); the frames waiting for the SDK are bounded by bytes
///   (one transport limit, [`ServerConfig::framer`]`.max_frame`; a larger
///   frame waits alone), and while that backlog is full stdin is not read.
/// * One task owns `output` and writes whole frames only, in order, none
///   over [`ServerConfig::max_send`] (error replies included: one too large
///   is replaced by a short -32603). The SDK's frames wait for room in
///   [`ServerConfig::writer_queue_bytes`]; replies (the transport's own, and
///   the SDK's through [`Outgoing::reply`]) use the reserved
///   [`ServerConfig::control_queue_bytes`], so they never wait behind a
///   large result.
/// * **Backpressure.** While the host does not drain stdout, stdin is still
///   read (so a cancellation still lands) until that reply budget is full:
///   a bounded backlog of answered, unwritten requests. Then reading
///   **stops** until the host drains again (each pause counted in
///   [`ServeReport::stdin_pauses`] and logged at debug level; one of a
///   second or more logged as a warning when it ends): a host that does
///   not drain has broken liveness, and rejecting instead would need room
///   that does not exist.
/// * Reading ends at the end of stdin, a read error, the framer's sticky
///   error (`OversizePolicy::Fail`), when `shutdown` resolves (the number of
///   a signal: the SDK then sees the end of its input), or when stdout
///   fails (the host is gone); a signal or a stdout failure also ends a
///   wait for room.
///
/// Needs a tokio runtime.
///
/// ```
/// use mcp_framer_jsonrpc::{Id, Kind};
/// use mcp_framer_stdio::server::{ServerConfig, transport};
/// use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let (mut host_in, server_out) = tokio::io::duplex(1 << 16);
/// let (server_in, mut host_out) = tokio::io::duplex(1 << 16);
/// let (outgoing, mut incoming) = transport(server_in, server_out, ServerConfig::default(), std::future::pending());
/// host_out.write_all(b"{\"jsonrpc\":\"1.0\",\"id\":7,\"method\":\"ping\"}\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n").await?;
///
/// // The invalid request is answered by the transport, with its id.
/// let mut lines = BufReader::new(&mut host_in).lines();
/// let reply = lines.next_line().await?.unwrap();
/// assert!(reply.starts_with(r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32600"#), "{reply}");
/// // The ping is the SDK's to answer.
/// let ping = incoming.recv().await.unwrap();
/// assert_eq!(ping.kind(), Kind::Request);
/// outgoing.send(outgoing.encoder().response(&Id::Number(1), &serde_json::json!({}))?).await?;
/// assert_eq!(lines.next_line().await?.unwrap(), r#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
///
/// drop(host_out); // EOF
/// assert!(incoming.recv().await.is_none());
/// outgoing.close().await?;
/// assert_eq!(outgoing.report().malformed, 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
pub fn transport<R, W, S>(input: R, output: W, config: ServerConfig, shutdown: S) -> (Outgoing, Incoming)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
    S: Future<Output = i32> + Send + 'static,
{
    let counters = Arc::new(Counters::default());
    let (outbox, inbox) =
        Outbox::new(config.writer_queue_bytes, config.control_queue_bytes, config.max_send, Arc::clone(&counters));
    let writer = tokio::spawn(run_writer(inbox, output, Arc::clone(&counters)));
    let (tx, rx) = mpsc::unbounded_channel();
    let (signal_tx, signal) = watch::channel(None);
    let stats = Arc::new(Mutex::new(Stats::default()));
    let forwarder = Forwarder { tx, waiting: ByteBound::new(config.framer.max_frame) };
    let stdin = StdinTask {
        config,
        outbox: outbox.clone(),
        counters: Arc::clone(&counters),
        stats: Arc::clone(&stats),
        signal: signal_tx,
    };
    let reader = tokio::spawn(stdin.run(input, forwarder, shutdown)).abort_handle();
    let outgoing = Outgoing {
        outbox,
        writer: Arc::new(Mutex::new(Some(writer))),
        reader,
        counters,
        stats,
        grace: config.shutdown_grace,
    };
    (outgoing, Incoming { rx, signal })
}

/// [`transport`] on the process's stdin and stdout, taken for the protocol
/// as [`Server::serve_stdio`](super::Server::serve_stdio) takes them (on
/// unix fd 0 then reads `/dev/null` and fd 1 goes to stderr), with
/// `SIGTERM` and `SIGINT` (Windows: Ctrl-C and Ctrl-Break) treated as the
/// end of stdin.
///
/// On unix, when stdin and stdout are pipes (as a host spawns a server),
/// they are read and written without blocking, so neither a pending read
/// nor a stalled write holds a thread: shutting the runtime down never
/// waits on them. Otherwise (a file, a terminal, and always on Windows)
/// they go through tokio's blocking pool, and a pending read holds a thread
/// until it returns: after the end of the input, end the process (or shut
/// the runtime down with `shutdown_background`) rather than waiting for the
/// runtime to drop.
pub fn stdio_transport(config: ServerConfig) -> io::Result<(Outgoing, Incoming)> {
    let shutdown = stdio::shutdown_signals()?;
    let (input, output) = stdio::take()?;
    Ok(transport(input, output, config, shutdown))
}

/// A message the transport read, classified, owning its frame (without its
/// `\n`): its routing fields were parsed once, by the transport, and are
/// kept beside the frame, so an SDK never parses a frame to route it. Its
/// bytes count against the bound of frames waiting for the SDK until it is
/// dropped.
pub struct IncomingFrame {
    head: Head,
    frame: Vec<u8>,
    _waiting: Option<Held>,
}

impl IncomingFrame {
    /// Request, notification, response or error response, as the parser
    /// found it.
    pub fn kind(&self) -> Kind {
        self.head.kind
    }

    /// The id (requests and responses; error responses unless `null`).
    pub fn id(&self) -> Option<&OwnedId> {
        self.head.id.as_ref()
    }

    /// The method (requests and notifications).
    pub fn method(&self) -> Option<&str> {
        self.head.method(&self.frame)
    }

    /// The payload's raw JSON text (`params`, `result` or `error`), a slice
    /// of the frame; `None` when there is none.
    pub fn payload(&self) -> Option<&str> {
        self.head.payload(&self.frame)
    }

    /// The frame, a valid JSON-RPC message.
    pub fn frame(&self) -> &[u8] {
        &self.frame
    }
}

impl fmt::Debug for IncomingFrame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IncomingFrame")
            .field("kind", &self.head.kind)
            .field("id", &self.head.id)
            .field("method", &self.method())
            .field("len", &self.frame.len())
            .finish()
    }
}

/// The messages a [`transport`] reads, in order; ends at the end of stdin
/// (or a shutdown signal, or a read error).
#[derive(Debug)]
pub struct Incoming {
    rx: mpsc::UnboundedReceiver<IncomingFrame>,
    signal: watch::Receiver<Option<i32>>,
}

impl Incoming {
    /// The next message; `None` once stdin has ended and every message was
    /// taken. Cancel-safe: a message is never lost when the future is
    /// dropped.
    pub async fn recv(&mut self) -> Option<IncomingFrame> {
        self.rx.recv().await
    }

    /// Resolves to the shutdown signal's number once one has arrived,
    /// before or after the end of stdin (a signal also ends the messages);
    /// never if none does. What an SDK that lets in-flight requests finish
    /// after the end of stdin waits on to cancel them at once instead, as
    /// the serve loop does. Cancel-safe.
    pub async fn signalled(&mut self) -> i32 {
        let number = self.signal.wait_for(Option::is_some).await.map(|number| number.unwrap_or_default());
        match number {
            Ok(number) => number,
            Err(_) => std::future::pending().await,
        }
    }
}

/// The sending half of a [`transport`]: queues whole frames for the one
/// task that writes stdout. Cheap to clone.
#[derive(Clone)]
pub struct Outgoing {
    outbox: Outbox,
    writer: Arc<Mutex<Option<JoinHandle<io::Result<()>>>>>,
    reader: AbortHandle,
    counters: Arc<Counters>,
    stats: Arc<Mutex<Stats>>,
    grace: Duration,
}

impl Outgoing {
    /// The encoder of what this transport sends, with
    /// [`ServerConfig::max_send`] as its limit.
    pub fn encoder(&self) -> Encoder {
        self.outbox.encoder()
    }

    /// Queues `frame` (one message and its `\n`, as the
    /// [`encoder`](Outgoing::encoder) makes them), waiting for room in
    /// [`ServerConfig::writer_queue_bytes`] (a frame larger than that waits
    /// alone). `BrokenPipe` once stdout has failed or the transport was
    /// closed.
    pub async fn send(&self, frame: Vec<u8>) -> io::Result<()> {
        let gone = || io::Error::new(io::ErrorKind::BrokenPipe, "stdout is closed or failed");
        let room = self.outbox.reserve(frame.len()).await.ok_or_else(gone)?;
        self.outbox.push(frame, Some(room), None);
        Ok(())
    }

    /// A frame for an error response (`"id": null` when `id` is `None`) that
    /// is never over [`ServerConfig::max_send`], as every error reply of the
    /// serve loop: an error too large is replaced by a short -32603 saying
    /// so, and when the id alone is too large that goes with a `null` id and
    /// names an excerpt of the id.
    pub fn error_frame(&self, id: Option<&OwnedId>, error: &ErrorObject) -> Vec<u8> {
        self.outbox.error_frame(id, error)
    }

    /// Queues the frame in `pending`, a reply of the SDK's own (the answer
    /// to a request it cannot take), in the budget reserved for the
    /// transport's replies ([`ServerConfig::control_queue_bytes`]), so it
    /// never waits behind the SDK's results. When that budget is full (the
    /// host is not draining stdout) this waits for room, counted in
    /// [`ServeReport::stdin_pauses`]: an SDK that takes no message meanwhile
    /// lets the backlog of frames read fill, and then stdin is no longer
    /// read, as the serve loop does.
    ///
    /// Cancel-safe: the frame is taken from `pending` only once it has
    /// room, so a future dropped while waiting leaves it there. Once stdout
    /// has failed or the transport was closed the frame is taken, dropped
    /// and counted ([`ServeReport::replies_dropped`]), and this returns
    /// `BrokenPipe`.
    pub async fn reply(&self, pending: &mut Option<Vec<u8>>) -> io::Result<()> {
        let Some(len) = pending.as_ref().map(Vec::len) else { return Ok(()) };
        let room = match self.outbox.try_reserve_control(len) {
            Some(room) => Some(room),
            None => {
                bump(&self.counters.stdin_pauses);
                tracing::debug!(bytes = len, "reply backlog full (host not draining stdout); the SDK waits");
                self.outbox.reserve_control(len).await
            }
        };
        let frame = pending.take().unwrap_or_default();
        match room {
            Some(room) => {
                self.outbox.push(frame, Some(room), None);
                Ok(())
            }
            None => {
                self.outbox.dropped(len);
                Err(io::Error::new(io::ErrorKind::BrokenPipe, "stdout is closed or failed"))
            }
        }
    }

    /// Queues `frame`, a reply of the SDK's own, at once, outside the
    /// budgets: for the last replies after the end of the input, when
    /// waiting would no longer hold back reading and a host that does not
    /// drain stdout must not keep the server from ending (their number is
    /// bounded by the frames read before the end).
    pub fn reply_now(&self, frame: Vec<u8>) {
        self.outbox.push(frame, None, None);
    }

    /// Stops reading stdin, writes what is queued (for at most
    /// [`ServerConfig::shutdown_grace`]) and stops the writer. The error of
    /// a failed stdout, if it failed; `TimedOut` if the host did not drain
    /// stdout in time (the frames left are counted in
    /// [`ServeReport::unflushed_frames`] of the [`report`](Outgoing::report)).
    /// Later calls return `Ok(())` at once.
    pub async fn close(&self) -> io::Result<()> {
        self.reader.abort();
        self.outbox.close();
        let Some(mut writer) = self.writer.lock().unwrap_or_else(|e| e.into_inner()).take() else { return Ok(()) };
        match tokio::time::timeout(self.grace, &mut writer).await {
            Ok(Ok(written)) => written,
            Ok(Err(join)) => Err(io::Error::other(join)),
            Err(_) => {
                let unflushed = self.outbox.pending();
                tracing::warn!(unflushed, "stdout not drained within the shutdown grace; giving up");
                writer.abort();
                Err(io::Error::new(io::ErrorKind::TimedOut, format!("{unflushed} frames not written to stdout")))
            }
        }
    }

    /// The transport's counters so far (the framer's byte accounting once
    /// stdin has ended).
    pub fn report(&self) -> ServeReport {
        let mut report = self.counters.report(*self.stats.lock().unwrap_or_else(|e| e.into_inner()));
        report.unflushed_frames = self.outbox.pending();
        report
    }
}

impl fmt::Debug for Outgoing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Outgoing")
            .field("max_send", &self.outbox.encoder().max_frame())
            .field("pending", &self.outbox.pending())
            .finish()
    }
}

/// The raw transport's [`Route`]: every message goes to the SDK, in a
/// backlog bounded by bytes.
struct Forwarder {
    tx: mpsc::UnboundedSender<IncomingFrame>,
    /// The bytes of the frames waiting for the SDK: one transport limit (a
    /// larger frame waits alone).
    waiting: ByteBound,
}

impl Route for Forwarder {
    type Forward = IncomingFrame;

    fn route(&mut self, frame: &[u8], message: Message<'_>) -> Routed<IncomingFrame> {
        Routed::Forward(IncomingFrame { head: Head::new(0, frame, &message), frame: frame.to_vec(), _waiting: None })
    }

    async fn forward(&mut self, mut message: IncomingFrame) -> bool {
        let Some(held) = self.waiting.acquire(message.frame.len()).await else { return false };
        message._waiting = Some(held);
        self.tx.send(message).is_ok()
    }
}

/// The raw transport's stdin task: the stdin loop, then the end of the
/// messages for the SDK, then the wait for a signal after the end of stdin.
struct StdinTask {
    config: ServerConfig,
    outbox: Outbox,
    counters: Arc<Counters>,
    /// The framer's byte accounting, once stdin has ended.
    stats: Arc<Mutex<Stats>>,
    /// The shutdown signal, once one arrived (also after the end of stdin).
    signal: watch::Sender<Option<i32>>,
}

impl StdinTask {
    async fn run<R, S>(self, input: R, mut forwarder: Forwarder, shutdown: S)
    where
        R: AsyncRead + Unpin,
        S: Future<Output = i32>,
    {
        let mut shutdown = pin!(shutdown);
        let ended =
            read_stdin(input, self.config.framer, &self.outbox, &self.counters, &mut forwarder, shutdown.as_mut())
                .await;
        *self.stats.lock().unwrap_or_else(|e| e.into_inner()) = ended.stats;
        // The SDK sees the end of its messages now; a signal may still come.
        drop(forwarder);
        let number = match ended.signal {
            Some(number) => number,
            None => {
                let number = shutdown.await;
                tracing::warn!(signal = signal_name(number), "signal received after the end of stdin");
                number
            }
        };
        self.signal.send_replace(Some(number));
    }
}
