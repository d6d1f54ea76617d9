//! The `stdio-v2` server: an HTTP/2 front on [`Server`]'s dispatcher.
//!
//! [`serve`] (any reader and writer) and [`serve_stdio`] (the process's
//! stdin and stdout, taken as the newline server takes them) accept one
//! HTTP/2 connection with prior knowledge and run the [`Server`] the caller
//! built — its tools, admission, cancellation reaching child process trees,
//! result budgets and protocol replies — behind it. The dispatcher runs on
//! in-process pipes: each accepted POST body goes in as one line, each line
//! it writes comes back to the stream that waits for it.
//!
//! # Contract
//!
//! * **Selection.** The first bytes must be the HTTP/2 preface. Newline JSON
//!   (`{` first) is answered with ONE newline JSON-RPC error line (-32600,
//!   the request's id when the first line gives it, `null` otherwise) saying
//!   that this server speaks `stdio-v2` and the client sent newline-delimited
//!   JSON-RPC; then the function returns an [`io::ErrorKind::InvalidData`]
//!   error saying the same (a binary prints it on stderr and exits). Other
//!   bytes: the same error, nothing written.
//! * **Routes.** `POST /mcp` only: another path is `404`, another method on
//!   it `405` (`allow: POST`), with no body; counted in
//!   [`V2Report::bad_routes`].
//! * **The transport limit** is [`ServerConfig::framer`](mcp_framer_stdio::server::ServerConfig::framer)`.max_frame` of the
//!   [`Server`] (the newline server's limit, one name): a body is counted as
//!   its DATA frames arrive (and on `content-length` up front), before any
//!   parse; one over the limit is answered `413` with the newline transport's
//!   error ([`oversize_error`]: -32600, `null` id) at once; then the rest
//!   of the body is read and thrown away, never held (ours: as the newline
//!   transport skips an oversize line; resetting the stream with NO_ERROR,
//!   which RFC 9113 8.1 allows, makes some clients, curl 7.88 among them,
//!   fail the request instead of reading the answer); the session goes on.
//!   Counted in [`V2Report::oversize_bodies`], their bytes read in
//!   [`V2Report::oversize_bytes`].
//! * **Memory for bodies.** The bodies arriving at once, over every stream,
//!   hold at most [`V2Config::max_assembling`] bytes (by default the
//!   transport limit: one request's worth, as on the newline transport); a
//!   body whose next DATA frame would go over is answered `503` with -32000
//!   at once and the rest of it is skipped; counted in
//!   [`V2Report::busy_bodies`] and [`V2Report::busy_bytes`]. What HTTP/2
//!   holds unread besides is bounded by the connection window.
//! * **Bodies.** A body that is not one JSON-RPC request or notification is
//!   answered `400` with the error the newline transport gives the same
//!   line (-32700 / -32600, the id when it can be recovered); counted in
//!   [`V2Report::malformed_bodies`]. A valid body reaches the dispatcher as
//!   one line: its JSON whitespace line breaks (the only place a valid JSON
//!   text can hold one) become spaces.
//! * **Headers** are checked against the body as [`check_headers`] says:
//!   `400` with -32020 (or -32022 for a version not served) and the
//!   request's id; counted in [`V2Report::header_mismatches`].
//! * **Answers.** A notification POST is `202` with no body. A request's
//!   answer is `200` `application/json` with the response as the body, or,
//!   when progress for it (its `params._meta.progressToken`) comes first,
//!   `200` `text/event-stream` (`x-accel-buffering: no`): one
//!   `data: <json>` event per message, the response last, then the end of
//!   the stream. Error responses take the status Streamable HTTP gives them:
//!   -32601 `404`, -32022, -32600 and -32700 `400`; other errors `200`.
//!   A second request with an id still in flight is `400` -32600 with that
//!   id (counted in [`V2Report::duplicate_ids`]); the first goes on.
//! * **Server notifications** that belong to no request go to every
//!   `subscriptions/listen` stream whose filter asked for them (ours: the
//!   three `*ListChanged` flags; `resourceSubscriptions` is not honoured and
//!   left out of the acknowledgment), each with
//!   `_meta["io.modelcontextprotocol/subscriptionId"]`, after the
//!   `notifications/subscriptions/acknowledged` event. One no stream wants is
//!   dropped and counted ([`V2Report::notifications_dropped`]), as is
//!   progress whose request is gone.
//! * **Cancellation.** A client's `RST_STREAM` on a request still in flight
//!   becomes `notifications/cancelled` for its id in the dispatcher (its
//!   scope: tasks, child process trees); counted in [`V2Report::resets`].
//!   A `notifications/cancelled` POST still works: it is forwarded, and the
//!   cancelled request's stream is reset (`CANCEL`). A response that comes
//!   for a request no stream waits for any more is dropped and counted
//!   ([`V2Report::late_responses`]).
//! * **Flow control and memory.** The connection is driven at all times by
//!   the accept loop; every stream has its own task, which sends only what
//!   the peer's window allows, so a stream waiting for window holds nobody
//!   else up. What waits is in memory, bounded by what is in flight: one
//!   response per request (each at most [`ServerConfig::max_send`](mcp_framer_stdio::server::ServerConfig::max_send)), and
//!   per stream at most [`V2Config::stream_backlog`] bytes of progress
//!   notifications (beyond that progress is dropped and counted in
//!   [`V2Report::progress_dropped`]; a response never is).
//! * **A stalled writer ends the session.** If a write to the output has
//!   been pending for [`V2Config::stall_timeout`] (the host stopped reading
//!   stdout), the connection is dropped, the dispatcher sees the end of its
//!   input and cancels what runs after its grace period, and the report says
//!   so ([`V2Report::stalled`]).
//! * **The end.** The end of the input (or a connection error, or a stall)
//!   ends the accept loop; the dispatcher then gets the end of its input
//!   and finishes as [`Server::serve`] says (in-flight calls get
//!   [`ServerConfig::shutdown_grace`](mcp_framer_stdio::server::ServerConfig::shutdown_grace)). A shutdown signal ([`serve_stdio`])
//!   is handed to the dispatcher, which answers every call still running
//!   (-32603); the connection is then closed with `GOAWAY`.

use std::collections::HashMap;
use std::future::{Future, poll_fn};
use std::io;
use std::pin::pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use h2::server::SendResponse;
use h2::{Reason, RecvStream, SendStream};
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use mcp_framer::{Config, Event, Framer};
use mcp_framer_jsonrpc::{
    Encoder, ErrorObject, INVALID_REQUEST, Id, METHOD_NOT_FOUND, Message, OwnedId, PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
};
use mcp_framer_stdio::server::{ServeReport, Server, oversize_error};
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream};
use tokio::sync::mpsc;

use crate::io::{Gone, Prefixed, StallClock, Stalling, send_data};
use crate::wire::{self, FirstBytes, Params, check_headers};

/// The front's limits. The transport limit and the response limit are the
/// [`Server`]'s own ([`ServerConfig::framer`](mcp_framer_stdio::server::ServerConfig::framer)`.max_frame`,
/// [`ServerConfig::max_send`](mcp_framer_stdio::server::ServerConfig::max_send)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct V2Config {
    /// How long a write to the output may stay pending (the host not reading
    /// stdout) before the session ends. Default 30 s.
    pub stall_timeout: Duration,
    /// The HTTP/2 window of each stream the client opens (how much request
    /// body may arrive unread). Default 1 MiB.
    pub stream_window: u32,
    /// The connection's HTTP/2 window. Default 16 MiB.
    pub connection_window: u32,
    /// The streams a client may have open at once (`SETTINGS_MAX_CONCURRENT_STREAMS`).
    /// Default 1024.
    pub max_concurrent_streams: u32,
    /// Bytes of progress notifications that may wait for one stream's
    /// window; more are dropped and counted. Default 1 MiB.
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
    /// (reset or cancelled): dropped.
    pub late_responses: u64,
    /// Server notifications that belonged to no waiting stream and no
    /// listener asked for (and progress whose request was gone): dropped.
    pub notifications_dropped: u64,
    /// Progress notifications dropped because their stream already had
    /// [`V2Config::stream_backlog`] bytes waiting for window.
    pub progress_dropped: u64,
    /// The session ended because the output stalled for
    /// [`V2Config::stall_timeout`].
    pub stalled: bool,
    /// The HTTP/2 connection's error, if it ended with one (the client
    /// closing the pipes, even mid-write, is not one).
    pub connection_error: Option<String>,
}

#[derive(Debug, Default)]
struct Counters {
    streams: AtomicU64,
    requests: AtomicU64,
    notifications: AtomicU64,
    listeners: AtomicU64,
    bad_routes: AtomicU64,
    oversize_bodies: AtomicU64,
    oversize_bytes: AtomicU64,
    busy_bodies: AtomicU64,
    busy_bytes: AtomicU64,
    malformed_bodies: AtomicU64,
    header_mismatches: AtomicU64,
    duplicate_ids: AtomicU64,
    resets: AtomicU64,
    late_responses: AtomicU64,
    notifications_dropped: AtomicU64,
    progress_dropped: AtomicU64,
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

impl Counters {
    fn report(&self, serve: ServeReport) -> V2Report {
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
            stalled: false,
            connection_error: None,
        }
    }
}

/// Serves `stdio-v2` on the process's stdin and stdout until the client
/// ends the connection or a shutdown signal comes. stdio is taken as
/// [`Server::serve_stdio`] takes it (on unix fd 0 then reads `/dev/null` and
/// fd 1 goes to stderr, so a stray `println!` or a child inheriting stdio
/// cannot corrupt the HTTP/2 stream), and `SIGTERM` / `SIGINT` (Windows:
/// Ctrl-C, Ctrl-Break) are handled as [`Server::serve_stdio`] handles them.
/// See the [module](self) for the contract; the error is a failure to take
/// stdio or a selection mismatch.
pub async fn serve_stdio(server: Server, config: V2Config) -> io::Result<V2Report> {
    let signals = mcp_framer_stdio::server::shutdown_signals()?;
    let (input, output) = mcp_framer_stdio::server::take_stdio()?;
    serve_until(server, input, output, config, signals).await
}

/// Serves `stdio-v2` on `input` and `output` until the client ends the
/// connection; see the [module](self) for the contract.
///
/// ```
/// use mcp_framer_stdio::server::Server;
/// use mcp_framer_stdio_v2::server::{V2Config, serve};
/// use tokio::io::{AsyncReadExt, AsyncWriteExt};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// // A newline client: one error line, then the end.
/// let (mut host_in, server_out) = tokio::io::duplex(1 << 16);
/// let (server_in, mut host_out) = tokio::io::duplex(1 << 16);
/// host_out.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"}\n").await.unwrap();
/// let error = serve(Server::new("demo", "1"), server_in, server_out, V2Config::default()).await.unwrap_err();
/// assert!(error.to_string().contains("stdio-v2"), "{error}");
/// let mut answer = String::new();
/// host_in.read_to_string(&mut answer).await.unwrap();
/// assert!(answer.starts_with(r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32600"#), "{answer}");
/// assert!(answer.ends_with('\n') && answer.lines().count() == 1);
/// # });
/// ```
pub async fn serve<R, W>(server: Server, input: R, output: W, config: V2Config) -> io::Result<V2Report>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    serve_until(server, input, output, config, std::future::pending()).await
}

/// The most of a newline client's first line read to recover its id.
const FIRST_LINE_MAX: usize = 64 << 10;
/// The in-process pipes' buffer to and from the dispatcher.
const DISPATCHER_PIPE: usize = 256 << 10;

async fn serve_until<R, W, S>(
    server: Server,
    mut input: R,
    mut output: W,
    config: V2Config,
    signal: S,
) -> io::Result<V2Report>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
    S: Future<Output = i32> + Send + 'static,
{
    let mut first = Vec::with_capacity(wire::PREFACE.len());
    loop {
        match wire::client_first_bytes(&first) {
            FirstBytes::Http2 => break,
            FirstBytes::Undecided => {
                let mut byte = [0u8; 24];
                let want = wire::PREFACE.len().saturating_sub(first.len()).max(1);
                let n = input.read(&mut byte[..want]).await?;
                if n == 0 {
                    tracing::info!(read = first.len(), "stdin ended before the HTTP/2 preface");
                    return Ok(V2Report::default());
                }
                first.extend_from_slice(&byte[..n]);
            }
            FirstBytes::NewlineJson => return Err(refuse_newline(first, input, output).await),
            FirstBytes::Other => {
                let _ = output.flush().await;
                let error = mismatch_error(&format!(
                    "the client's first bytes are neither the HTTP/2 preface nor JSON: {}",
                    mcp_framer_stdio::Preview::new(&first, mcp_framer_stdio::Keep::Head(24))
                ));
                tracing::error!(%error, "selection mismatch");
                return Err(error);
            }
        }
    }

    let counters = Arc::new(Counters::default());
    let server_config = *server.config();
    let (front_in, dispatcher_in) = tokio::io::duplex(DISPATCHER_PIPE);
    let (dispatcher_out, front_out) = tokio::io::duplex(DISPATCHER_PIPE);
    let (signal_tx, signal_rx) = tokio::sync::oneshot::channel::<i32>();
    let dispatcher = tokio::spawn(server.serve_until(dispatcher_in, dispatcher_out, async move {
        match signal_rx.await {
            Ok(number) => number,
            // No signal will come.
            Err(_) => std::future::pending().await,
        }
    }));
    let front = Arc::new(Front {
        max_body: server_config.framer.max_frame,
        assembling: AtomicUsize::new(0),
        max_assembling: config.max_assembling.unwrap_or(server_config.framer.max_frame),
        backlog: config.stream_backlog,
        encoder: Encoder::unlimited(),
        dispatcher: tokio::sync::Mutex::new(Some(front_in)),
        routes: Mutex::new(Routes::default()),
        counters: Arc::clone(&counters),
    });
    let router = tokio::spawn(route_dispatcher_output(Arc::clone(&front), front_out, server_config.max_send));

    let clock = Arc::new(StallClock::default());
    let io = tokio::io::join(
        Prefixed { prefix: first, at: 0, inner: input },
        Stalling { inner: output, clock: Arc::clone(&clock) },
    );
    let mut builder = h2::server::Builder::new();
    builder
        .initial_window_size(config.stream_window)
        .initial_connection_window_size(config.connection_window)
        .max_concurrent_streams(config.max_concurrent_streams)
        .max_send_buffer_size(1 << 20);
    let mut stalled = false;
    let mut connection_error = None;
    let mut signal = pin!(signal);
    let mut signal_tx = Some(signal_tx);
    let mut tick = tokio::time::interval((config.stall_timeout / 4).max(Duration::from_millis(10)));
    let handshake = builder.handshake::<_, Bytes>(io);
    let mut handshake = pin!(handshake);
    let connection = loop {
        tokio::select! {
            done = &mut handshake => break Some(done),
            _ = tick.tick() => if clock.stalled_for(config.stall_timeout) { stalled = true; break None },
        }
    };
    match connection {
        Some(Ok(mut connection)) => loop {
            tokio::select! {
                accepted = connection.accept() => match accepted {
                    Some(Ok((request, respond))) => {
                        bump(&counters.streams);
                        tokio::spawn(Arc::clone(&front).handle(request, respond));
                    }
                    Some(Err(error)) if peer_closed(&error) => {
                        tracing::debug!(%error, "the client closed the pipes");
                        break;
                    }
                    Some(Err(error)) => {
                        tracing::warn!(%error, "the HTTP/2 connection ended with an error");
                        connection_error = Some(error.to_string());
                        break;
                    }
                    None => break,
                },
                _ = tick.tick() => if clock.stalled_for(config.stall_timeout) {
                    tracing::error!(timeout = ?config.stall_timeout, "stdout stalled: the host stopped reading; ending the session");
                    stalled = true;
                    break;
                },
                number = &mut signal, if signal_tx.is_some() => {
                    if let Some(tx) = signal_tx.take() {
                        let _ = tx.send(number);
                    }
                    connection.graceful_shutdown();
                }
            }
        },
        Some(Err(error)) => {
            tracing::warn!(%error, "the HTTP/2 handshake failed");
            connection_error = Some(error.to_string());
        }
        None => {}
    }
    // The end of the dispatcher's input: it finishes within its grace.
    front.dispatcher.lock().await.take();
    front.routes.lock().unwrap_or_else(|e| e.into_inner()).close();
    let serve = match dispatcher.await {
        Ok(report) => report,
        Err(join) => {
            let mut report = ServeReport::default();
            report.error = Some(format!("dispatcher task failed: {join}"));
            report
        }
    };
    let _ = router.await;
    let mut report = counters.report(serve);
    report.stalled = stalled;
    report.connection_error = connection_error;
    drop(signal_tx);
    Ok(report)
}

/// Whether the connection ended because the client closed the pipes (a
/// write met a closed stdout, or stdin ended inside a frame): the end of
/// the session, as a clean end of input is, not an error.
fn peer_closed(error: &h2::Error) -> bool {
    error.get_io().is_some_and(|io| {
        matches!(io.kind(), io::ErrorKind::BrokenPipe | io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset)
    })
}

/// The selection-mismatch error.
fn mismatch_error(detail: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "selection mismatch: this server is configured for the `stdio-v2` transport (HTTP/2 over stdio) \
             and the client did not speak it: {detail}"
        ),
    )
}

/// Answers a newline client with one error line and returns the error.
async fn refuse_newline<R, W>(mut first: Vec<u8>, mut input: R, mut output: W) -> io::Error
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    // Read the rest of the first line, bounded, to recover the request's id.
    let mut chunk = [0u8; 4096];
    while !first.contains(&b'\n') && first.len() < FIRST_LINE_MAX {
        match tokio::time::timeout(Duration::from_millis(200), input.read(&mut chunk)).await {
            Ok(Ok(n)) if n > 0 => first.extend_from_slice(&chunk[..n]),
            _ => break,
        }
    }
    let line = first.split(|&b| b == b'\n').next().unwrap_or_default();
    let id = match mcp_framer_jsonrpc::parse(line) {
        Ok(message) => message.id().map(Id::to_owned_id),
        Err(error) => error.id().map(Id::to_owned_id),
    };
    let message = "this server is configured for the `stdio-v2` transport (HTTP/2 over stdio) and the client sent \
                   newline-delimited JSON-RPC (`stdio`): configure the client for `stdio-v2`";
    let error = ErrorObject::new(INVALID_REQUEST, message);
    if let Ok(mut frame) = Encoder::unlimited().error_response(id.as_ref(), &error) {
        if frame.last() != Some(&b'\n') {
            frame.push(b'\n');
        }
        let _ = output.write_all(&frame).await;
        let _ = output.flush().await;
    }
    let _ = output.shutdown().await;
    let error = mismatch_error("it sent newline-delimited JSON-RPC (`stdio`); answered with one error line");
    tracing::error!(%error, "selection mismatch");
    error
}

/// What the dispatcher wrote that a stream waits for.
#[derive(Debug)]
enum Out {
    /// A notification for the stream (progress; on a listener, a change).
    Event(Bytes),
    /// The request's response, with the HTTP status it gets.
    Final(Bytes, StatusCode),
}

/// A request in flight: where its response goes.
#[derive(Debug)]
struct Slot {
    tx: mpsc::UnboundedSender<Out>,
    token: Option<String>,
    /// Bytes of progress queued for the stream and not yet sent.
    queued: Arc<AtomicUsize>,
}

/// A `subscriptions/listen` stream.
#[derive(Debug)]
struct Listener {
    id: OwnedId,
    tx: mpsc::UnboundedSender<Out>,
    methods: Vec<&'static str>,
    queued: Arc<AtomicUsize>,
}

#[derive(Debug, Default)]
struct Routes {
    by_id: HashMap<OwnedId, Slot>,
    by_token: HashMap<String, OwnedId>,
    listeners: Vec<Listener>,
    closed: bool,
}

impl Routes {
    fn remove(&mut self, id: &OwnedId) -> Option<Slot> {
        let slot = self.by_id.remove(id)?;
        if let Some(token) = &slot.token {
            self.by_token.remove(token);
        }
        Some(slot)
    }

    /// The session is ending: every waiting stream sees its route gone.
    fn close(&mut self) {
        self.closed = true;
        self.listeners.clear();
    }
}

struct Front {
    max_body: usize,
    /// Bytes of bodies being received now, over every stream.
    assembling: AtomicUsize,
    max_assembling: usize,
    backlog: usize,
    encoder: Encoder,
    dispatcher: tokio::sync::Mutex<Option<DuplexStream>>,
    routes: Mutex<Routes>,
    counters: Arc<Counters>,
}

impl Front {
    fn routes(&self) -> std::sync::MutexGuard<'_, Routes> {
        self.routes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes one message into the dispatcher as one line; false if the
    /// dispatcher's input is closed.
    async fn submit(&self, mut line: Vec<u8>) -> bool {
        for b in &mut line {
            if matches!(*b, b'\n' | b'\r') {
                *b = b' ';
            }
        }
        line.push(b'\n');
        let mut dispatcher = self.dispatcher.lock().await;
        match dispatcher.as_mut() {
            Some(pipe) => pipe.write_all(&line).await.is_ok(),
            None => false,
        }
    }

    fn error_body(&self, id: Option<&OwnedId>, error: &ErrorObject) -> Bytes {
        let frame = self.encoder.error_response(id, error).unwrap_or_else(|_| {
            br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"error reply could not be encoded"}}"#
                .to_vec()
        });
        Bytes::from(frame)
    }

    async fn handle(self: Arc<Self>, request: Request<RecvStream>, mut respond: SendResponse<Bytes>) {
        let (parts, mut body) = request.into_parts();
        if parts.uri.path() != wire::ENDPOINT {
            bump(&self.counters.bad_routes);
            let _ = respond.send_response(status_only(StatusCode::NOT_FOUND), true);
            return;
        }
        if parts.method != Method::POST {
            bump(&self.counters.bad_routes);
            let mut response = status_only(StatusCode::METHOD_NOT_ALLOWED);
            response.headers_mut().insert(http::header::ALLOW, HeaderValue::from_static("POST"));
            let _ = respond.send_response(response, true);
            return;
        }
        let declared = parts
            .headers
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        let mut held = Held { front: &self, bytes: 0 };
        let bytes = match read_body(&mut body, declared, self.max_body, &mut held).await {
            Ok(bytes) => bytes,
            Err(BodyEnd::Busy { received }) => {
                bump(&self.counters.busy_bodies);
                drop(held);
                tracing::warn!(max = self.max_assembling, "request bodies arriving at once over the budget; refused");
                let error = ErrorObject::new(
                    mcp_framer_jsonrpc::OVERLOADED,
                    format!(
                        "server overloaded: the request bodies arriving at once hold {} bytes; send it again later",
                        self.max_assembling
                    ),
                );
                send_whole(&mut respond, StatusCode::SERVICE_UNAVAILABLE, self.error_body(None, &error)).await;
                let skipped = received + skip_body(&mut body).await;
                self.counters.busy_bytes.fetch_add(skipped, Ordering::Relaxed);
                return;
            }
            Err(BodyEnd::Oversize { len, at_least, received }) => {
                bump(&self.counters.oversize_bodies);
                tracing::warn!(len, at_least, max = self.max_body, "request body over the transport limit; refused");
                let error = oversize_error(len, at_least, self.max_body);
                send_whole(&mut respond, StatusCode::PAYLOAD_TOO_LARGE, self.error_body(None, &error)).await;
                let skipped = received + skip_body(&mut body).await;
                self.counters.oversize_bytes.fetch_add(skipped, Ordering::Relaxed);
                return;
            }
            Err(BodyEnd::Reset) => {
                tracing::debug!("request stream reset before its body ended");
                return;
            }
        };
        drop(body);
        let message = match mcp_framer_jsonrpc::parse(&bytes) {
            Ok(message) => message,
            Err(error) => {
                bump(&self.counters.malformed_bodies);
                tracing::warn!(code = error.code(), %error, "malformed request body");
                let id = error.id().map(Id::to_owned_id);
                let object = ErrorObject::new(error.code(), error.to_string());
                send_whole(&mut respond, StatusCode::BAD_REQUEST, self.error_body(id.as_ref(), &object)).await;
                return;
            }
        };
        let (request, method) = match (&message, message.method()) {
            (Message::Request { .. }, Some(method)) => (true, method),
            (Message::Notification { .. }, Some(method)) => (false, method),
            _ => {
                bump(&self.counters.malformed_bodies);
                let object = ErrorObject::new(
                    INVALID_REQUEST,
                    "a POST carries a JSON-RPC request or notification; this server takes no responses",
                );
                send_whole(&mut respond, StatusCode::BAD_REQUEST, self.error_body(None, &object)).await;
                return;
            }
        };
        let id = message.id().map(Id::to_owned_id);
        let params = Params::read(message.payload());
        if let Err(problem) = check_headers(&parts.headers, method, &params, request) {
            bump(&self.counters.header_mismatches);
            tracing::warn!(?problem, method, "request headers refused");
            let status = StatusCode::BAD_REQUEST;
            send_whole(&mut respond, status, self.error_body(id.as_ref(), &problem.error())).await;
            return;
        }
        let Some(id) = id else {
            // A notification: 202, and `notifications/cancelled` also ends the
            // cancelled request's stream.
            let cancelled = (method == "notifications/cancelled").then(|| cancelled_id(message.payload())).flatten();
            let method = method.to_owned();
            bump(&self.counters.notifications);
            let submitted = self.submit(bytes).await;
            drop(held);
            if let Some(id) = cancelled {
                // Dropping the slot ends the stream's wait: it is reset.
                self.routes().remove(&id);
            }
            let status = if submitted { StatusCode::ACCEPTED } else { StatusCode::SERVICE_UNAVAILABLE };
            tracing::debug!(method, %status, "notification");
            let _ = respond.send_response(status_only(status), true);
            return;
        };
        if method == wire::LISTEN {
            let filter = ListenFilter::read(message.payload());
            return self.listen(id, filter, respond).await;
        }
        let token = params.progress_token().map(str::to_owned);
        let (tx, rx) = mpsc::unbounded_channel();
        let queued = Arc::new(AtomicUsize::new(0));
        let refused = {
            let mut routes = self.routes();
            if routes.closed {
                Some(None)
            } else if routes.by_id.contains_key(&id) {
                Some(Some(format!("request id {id} is already in flight")))
            } else if let Some(token) = token.as_ref().filter(|token| routes.by_token.contains_key(*token)) {
                Some(Some(format!("progress token {token} is already in use by a request in flight")))
            } else {
                if let Some(token) = &token {
                    routes.by_token.insert(token.clone(), id.clone());
                }
                routes.by_id.insert(id.clone(), Slot { tx, token, queued: Arc::clone(&queued) });
                None
            }
        };
        match refused {
            Some(None) => {
                let _ = respond.send_response(status_only(StatusCode::SERVICE_UNAVAILABLE), true);
                return;
            }
            Some(Some(why)) => {
                bump(&self.counters.duplicate_ids);
                let object = ErrorObject::new(INVALID_REQUEST, why);
                send_whole(&mut respond, StatusCode::BAD_REQUEST, self.error_body(Some(&id), &object)).await;
                return;
            }
            None => {}
        }
        bump(&self.counters.requests);
        let submitted = self.submit(bytes).await;
        drop(held);
        if !submitted {
            self.routes().remove(&id);
            let _ = respond.send_response(status_only(StatusCode::SERVICE_UNAVAILABLE), true);
            return;
        }
        self.answer(id, rx, queued, respond).await;
    }

    /// Waits for the request's messages and sends them: JSON, or an event
    /// stream once progress comes first; a reset cancels the request.
    async fn answer(
        self: &Arc<Self>,
        id: OwnedId,
        mut rx: mpsc::UnboundedReceiver<Out>,
        queued: Arc<AtomicUsize>,
        mut respond: SendResponse<Bytes>,
    ) {
        let mut stream: Option<SendStream<Bytes>> = None;
        loop {
            let out = tokio::select! {
                out = rx.recv() => out,
                _ = poll_fn(|cx| match stream.as_mut() {
                    Some(stream) => stream.poll_reset(cx),
                    None => respond.poll_reset(cx),
                }) => return self.reset(&id),
            };
            match out {
                Some(Out::Event(event)) => {
                    let len = event.len();
                    let sending = match stream.as_mut() {
                        Some(stream) => stream,
                        None => match respond.send_response(event_stream(), false) {
                            Ok(opened) => stream.insert(opened),
                            Err(_) => return self.reset(&id),
                        },
                    };
                    let sent = send_data(sending, wire::sse_event(&event), false).await;
                    queued.fetch_sub(len, Ordering::Relaxed);
                    if sent.is_err() {
                        return self.reset(&id);
                    }
                }
                Some(Out::Final(frame, status)) => {
                    let sent = match stream.as_mut() {
                        Some(stream) => send_data(stream, wire::sse_event(&frame), true).await,
                        None => match respond.send_response(json_response(status), false) {
                            Ok(mut opened) => send_data(&mut opened, frame, true).await,
                            Err(_) => Err(Gone),
                        },
                    };
                    if sent.is_err() {
                        tracing::debug!(%id, "stream reset while its response was sent");
                    }
                    return;
                }
                None => {
                    // The route is gone: cancelled by notification, or the session ends.
                    match stream.as_mut() {
                        Some(stream) => stream.send_reset(Reason::CANCEL),
                        None => respond.send_reset(Reason::CANCEL),
                    }
                    return;
                }
            }
        }
    }

    /// The client reset the stream of request `id`: if it is still in
    /// flight, the dispatcher gets `notifications/cancelled` for it.
    fn reset(self: &Arc<Self>, id: &OwnedId) {
        if self.routes().remove(id).is_none() {
            return;
        }
        bump(&self.counters.resets);
        tracing::info!(%id, "request stream reset by the client: cancelling the request");
        let line = self
            .encoder
            .notification("notifications/cancelled", &serde_json::json!({"requestId": id, "reason": "stream reset"}));
        if let Ok(line) = line {
            // Off the stream's task: the stream is done, the write may wait.
            let front = Arc::clone(self);
            tokio::spawn(async move { front.submit(line).await });
        }
    }

    async fn listen(&self, id: OwnedId, filter: ListenFilter, mut respond: SendResponse<Bytes>) {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let queued = Arc::new(AtomicUsize::new(0));
        let open = {
            let mut routes = self.routes();
            if !routes.closed {
                let methods = filter.methods();
                routes.listeners.push(Listener { id: id.clone(), tx, methods, queued: Arc::clone(&queued) });
            }
            !routes.closed
        };
        if !open {
            let _ = respond.send_response(status_only(StatusCode::SERVICE_UNAVAILABLE), true);
            return;
        }
        bump(&self.counters.listeners);
        let Ok(mut stream) = respond.send_response(event_stream(), false) else { return self.unlisten(&id) };
        let ack = self.encoder.notification(
            "notifications/subscriptions/acknowledged",
            &serde_json::json!({"_meta": {"io.modelcontextprotocol/subscriptionId": id}, "notifications": filter.acknowledged()}),
        );
        if let Ok(ack) = ack
            && send_data(&mut stream, wire::sse_event(&ack), false).await.is_err()
        {
            return self.unlisten(&id);
        }
        loop {
            let out = tokio::select! {
                out = rx.recv() => out,
                _ = poll_fn(|cx| stream.poll_reset(cx)) => return self.unlisten(&id),
            };
            match out {
                Some(Out::Event(event) | Out::Final(event, _)) => {
                    let len = event.len();
                    let sent = send_data(&mut stream, wire::sse_event(&event), false).await;
                    queued.fetch_sub(len, Ordering::Relaxed);
                    if sent.is_err() {
                        return self.unlisten(&id);
                    }
                }
                None => {
                    let _ = stream.send_data(Bytes::new(), true);
                    return;
                }
            }
        }
    }

    fn unlisten(&self, id: &OwnedId) {
        self.routes().listeners.retain(|listener| &listener.id != id);
    }

    /// Routes one frame the dispatcher wrote.
    fn route(&self, frame: &[u8]) {
        let message = match mcp_framer_jsonrpc::parse(frame) {
            Ok(message) => message,
            Err(error) => {
                tracing::error!(%error, "the dispatcher wrote a frame that is not JSON-RPC; dropped");
                bump(&self.counters.notifications_dropped);
                return;
            }
        };
        match &message {
            Message::Response { id, .. } | Message::ErrorResponse { id: Some(id), .. } => {
                let status = match &message {
                    Message::ErrorResponse { .. } => status_of(message.payload()),
                    _ => StatusCode::OK,
                };
                let slot = self.routes().remove(&id.to_owned_id());
                match slot {
                    Some(slot) => {
                        let _ = slot.tx.send(Out::Final(Bytes::copy_from_slice(frame), status));
                    }
                    None => {
                        bump(&self.counters.late_responses);
                        tracing::debug!(%id, "late response dropped: no stream waits for it");
                    }
                }
            }
            Message::ErrorResponse { id: None, .. } => {
                bump(&self.counters.late_responses);
                tracing::warn!("an error response with a null id from the dispatcher: no stream to route it to");
            }
            Message::Notification { method, .. } => {
                if *method == "notifications/progress" {
                    self.route_progress(frame, message.payload());
                } else {
                    self.broadcast(method, frame);
                }
            }
            _ => {
                bump(&self.counters.notifications_dropped);
                tracing::warn!("a server request: stdio-v2 carries none (MRTR); dropped");
            }
        }
    }

    fn route_progress(&self, frame: &[u8], params: Option<mcp_framer_jsonrpc::RawJson<'_>>) {
        #[derive(Deserialize)]
        struct Progress<'a> {
            #[serde(rename = "progressToken", borrow)]
            token: &'a RawValue,
        }
        let token = params.and_then(|p| serde_json::from_str::<Progress<'_>>(p.get()).ok()).map(|p| p.token.get());
        let routes = self.routes();
        let slot = token.and_then(|token| routes.by_token.get(token)).and_then(|id| routes.by_id.get(id));
        match slot {
            Some(slot) if slot.queued.load(Ordering::Relaxed) + frame.len() <= self.backlog => {
                slot.queued.fetch_add(frame.len(), Ordering::Relaxed);
                let _ = slot.tx.send(Out::Event(Bytes::copy_from_slice(frame)));
            }
            Some(_) => {
                bump(&self.counters.progress_dropped);
            }
            None => {
                bump(&self.counters.notifications_dropped);
                tracing::debug!("progress for a request no stream waits for; dropped");
            }
        }
    }

    fn broadcast(&self, method: &str, frame: &[u8]) {
        let routes = self.routes();
        let mut delivered = false;
        for listener in routes.listeners.iter().filter(|l| l.methods.contains(&method)) {
            let Some(tagged) = with_subscription_id(frame, &listener.id) else { continue };
            if listener.queued.load(Ordering::Relaxed) + tagged.len() > self.backlog {
                continue;
            }
            listener.queued.fetch_add(tagged.len(), Ordering::Relaxed);
            delivered |= listener.tx.send(Out::Event(tagged)).is_ok();
        }
        if !delivered {
            bump(&self.counters.notifications_dropped);
            tracing::debug!(method, "server notification with no stream that wants it; dropped");
        }
    }
}

/// `frame` (a notification) with `params._meta["io.modelcontextprotocol/subscriptionId"]` set.
fn with_subscription_id(frame: &[u8], id: &OwnedId) -> Option<Bytes> {
    let mut value: serde_json::Value = serde_json::from_slice(frame).ok()?;
    let params = value.as_object_mut()?.entry("params").or_insert_with(|| serde_json::json!({}));
    let meta = params.as_object_mut()?.entry("_meta").or_insert_with(|| serde_json::json!({}));
    meta.as_object_mut()?.insert("io.modelcontextprotocol/subscriptionId".into(), serde_json::to_value(id).ok()?);
    serde_json::to_vec(&value).ok().map(Bytes::from)
}

/// A `subscriptions/listen` request's `notifications` filter (ours: the
/// three list-changed flags).
#[derive(Debug, Default, Deserialize)]
struct ListenFilter {
    #[serde(rename = "toolsListChanged", default)]
    tools: bool,
    #[serde(rename = "promptsListChanged", default)]
    prompts: bool,
    #[serde(rename = "resourcesListChanged", default)]
    resources: bool,
}

impl ListenFilter {
    fn read(params: Option<mcp_framer_jsonrpc::RawJson<'_>>) -> ListenFilter {
        #[derive(Deserialize)]
        struct Listen {
            #[serde(default)]
            notifications: ListenFilter,
        }
        params.and_then(|p| serde_json::from_str::<Listen>(p.get()).ok()).map(|l| l.notifications).unwrap_or_default()
    }

    fn methods(&self) -> Vec<&'static str> {
        let mut methods = Vec::new();
        if self.tools {
            methods.push("notifications/tools/list_changed");
        }
        if self.prompts {
            methods.push("notifications/prompts/list_changed");
        }
        if self.resources {
            methods.push("notifications/resources/list_changed");
        }
        methods
    }

    fn acknowledged(&self) -> serde_json::Value {
        let mut ack = serde_json::Map::new();
        for (on, name) in [
            (self.tools, "toolsListChanged"),
            (self.prompts, "promptsListChanged"),
            (self.resources, "resourcesListChanged"),
        ] {
            if on {
                ack.insert(name.into(), true.into());
            }
        }
        ack.into()
    }
}

/// The `requestId` of a `notifications/cancelled`.
fn cancelled_id(params: Option<mcp_framer_jsonrpc::RawJson<'_>>) -> Option<OwnedId> {
    #[derive(Deserialize)]
    struct Cancelled<'a> {
        #[serde(rename = "requestId", borrow)]
        request_id: Id<'a>,
    }
    let cancelled: Cancelled<'_> = serde_json::from_str(params?.get()).ok()?;
    Some(cancelled.request_id.into_owned())
}

/// The HTTP status of an error response (Streamable HTTP's: -32601 `404`;
/// -32022, -32600, -32700 `400`; ours: any other `200`).
fn status_of(error: Option<mcp_framer_jsonrpc::RawJson<'_>>) -> StatusCode {
    let code = error.and_then(|e| serde_json::from_str::<ErrorObject>(e.get()).ok()).map(|e| e.code);
    match code {
        Some(METHOD_NOT_FOUND) => StatusCode::NOT_FOUND,
        Some(UNSUPPORTED_PROTOCOL_VERSION | INVALID_REQUEST | PARSE_ERROR) => StatusCode::BAD_REQUEST,
        _ => StatusCode::OK,
    }
}

fn status_only(status: StatusCode) -> Response<()> {
    let mut response = Response::new(());
    *response.status_mut() = status;
    response
}

fn json_response(status: StatusCode) -> Response<()> {
    let mut response = status_only(status);
    response.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static(wire::JSON));
    response
}

fn event_stream() -> Response<()> {
    let mut response = status_only(StatusCode::OK);
    let headers: &mut HeaderMap = response.headers_mut();
    headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static(wire::EVENT_STREAM));
    headers.insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// Sends a whole JSON answer with `status`.
async fn send_whole(respond: &mut SendResponse<Bytes>, status: StatusCode, body: Bytes) {
    if let Ok(mut stream) = respond.send_response(json_response(status), false) {
        let _ = send_data(&mut stream, body, true).await;
    }
}

/// A body's share of [`Front::max_assembling`], given back when dropped
/// (once the body is in the dispatcher, or refused).
struct Held<'f> {
    front: &'f Front,
    bytes: usize,
}

impl Held<'_> {
    /// Takes `n` more bytes of the budget; false (nothing taken) if they do
    /// not fit.
    fn take(&mut self, n: usize) -> bool {
        let budget = &self.front.assembling;
        let fits = budget
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| {
                now.checked_add(n).filter(|&after| after <= self.front.max_assembling)
            })
            .is_ok();
        if fits {
            self.bytes += n;
        }
        fits
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.front.assembling.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

/// Why a body was not read whole.
enum BodyEnd {
    /// The bodies arriving at once would go over the budget: `received`
    /// bytes of this one had arrived (and were dropped).
    Busy { received: u64 },
    /// Over the limit: `len` bytes (at least, if the body went on), of
    /// which `received` arrived (and were dropped).
    Oversize { len: u64, at_least: bool, received: u64 },
    /// The client reset the stream.
    Reset,
}

/// Reads a request body under `max` bytes, counting as DATA arrives and
/// refusing a `content-length` over it before reading anything, each chunk
/// taken from the connection's budget (`held`) before it is kept. Window is
/// given back as the bytes are taken.
async fn read_body(
    body: &mut RecvStream,
    declared: Option<u64>,
    max: usize,
    held: &mut Held<'_>,
) -> Result<Vec<u8>, BodyEnd> {
    if let Some(len) = declared
        && len > max as u64
    {
        return Err(BodyEnd::Oversize { len, at_least: false, received: 0 });
    }
    let mut bytes = Vec::with_capacity(declared.unwrap_or(0) as usize);
    while let Some(chunk) = body.data().await {
        let chunk = chunk.map_err(|_| BodyEnd::Reset)?;
        let _ = body.flow_control().release_capacity(chunk.len());
        let len = bytes.len() + chunk.len();
        if len > max {
            return Err(BodyEnd::Oversize { len: len as u64, at_least: !body.is_end_stream(), received: len as u64 });
        }
        if !held.take(chunk.len()) {
            return Err(BodyEnd::Busy { received: len as u64 });
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

/// Reads the rest of a refused body to its end (or the stream's reset) and
/// throws it away, giving the window back; the bytes read.
async fn skip_body(body: &mut RecvStream) -> u64 {
    let mut skipped = 0;
    while let Some(Ok(chunk)) = body.data().await {
        let _ = body.flow_control().release_capacity(chunk.len());
        skipped += chunk.len() as u64;
    }
    skipped
}

/// Reads the dispatcher's output with the framer (its frames are at most
/// `max_send` bytes) and routes each frame; at its end, every waiting stream
/// sees its route gone.
async fn route_dispatcher_output(front: Arc<Front>, mut output: DuplexStream, max_send: usize) {
    let mut framer = Framer::new(Config::DEFAULT.with_max_frame(max_send));
    loop {
        // A read error ends the output as its end does.
        let n: usize = output.read(framer.spare()).await.unwrap_or_default();
        if n == 0 {
            framer.finish();
        } else {
            framer.commit(n);
        }
        loop {
            match framer.next_event() {
                Ok(Some(Event::Frame(frame))) => front.route(frame),
                Ok(Some(event)) => tracing::error!(?event, "the dispatcher wrote a frame over its own send limit"),
                Ok(None) => break,
                Err(error) => {
                    tracing::error!(%error, "reading the dispatcher's output failed");
                    break;
                }
            }
        }
        if n == 0 {
            break;
        }
    }
    let mut routes = front.routes();
    routes.close();
    routes.by_id.clear();
    routes.by_token.clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(frame: &str) -> Option<mcp_framer_jsonrpc::RawJson<'_>> {
        mcp_framer_jsonrpc::parse(frame.as_bytes()).unwrap().payload()
    }

    #[test]
    fn error_responses_take_the_streamable_http_status() {
        let error = |code: i64| format!(r#"{{"jsonrpc":"2.0","id":1,"error":{{"code":{code},"message":"m"}}}}"#);
        assert_eq!(status_of(payload(&error(-32601))), StatusCode::NOT_FOUND);
        for code in [-32022, -32600, -32700] {
            assert_eq!(status_of(payload(&error(code))), StatusCode::BAD_REQUEST, "{code}");
        }
        assert_eq!(status_of(payload(&error(-32602))), StatusCode::OK);
    }

    #[test]
    fn listen_notifications_are_tagged_and_filtered() {
        let frame = br#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#;
        let tagged = with_subscription_id(frame, &Id::Number(7)).unwrap();
        let tagged: serde_json::Value = serde_json::from_slice(&tagged).unwrap();
        assert_eq!(tagged["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 7);
        let listen = r#"{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true,"resourceSubscriptions":["a"]}}}"#;
        let filter = ListenFilter::read(payload(listen));
        assert_eq!(filter.methods(), ["notifications/tools/list_changed"]);
        assert_eq!(filter.acknowledged(), serde_json::json!({"toolsListChanged": true}));
        assert!(ListenFilter::read(None).methods().is_empty());
    }

    #[test]
    fn a_cancellation_names_its_request() {
        let cancelled =
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a","reason":"r"}}"#;
        assert_eq!(cancelled_id(payload(cancelled)), Some(Id::from("a".to_owned())));
        assert_eq!(cancelled_id(payload(r#"{"jsonrpc":"2.0","method":"notifications/cancelled"}"#)), None);
    }

    #[tokio::test]
    async fn the_sniffed_bytes_are_read_again_first() {
        let mut reader = Prefixed { prefix: b"PRI".to_vec(), at: 0, inner: &b" * HTTP"[..] };
        let mut all = String::new();
        reader.read_to_string(&mut all).await.unwrap();
        assert_eq!(all, "PRI * HTTP");
    }
}
