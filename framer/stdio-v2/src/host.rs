//! The `stdio-v2` host: spawn a server, talk HTTP/2 to it over its stdin
//! and stdout.
//!
//! [`Client::spawn`] starts the command in a process tree of its own
//! ([`mcp_framer_stdio::tree`]: a process group on unix, a Job Object on
//! Windows) with piped stdio, drains its stderr to EOF into a bounded tail
//! (a [`Previewer`] keeping the last [`HostConfig::stderr_tail`] bytes),
//! and runs the HTTP/2 client connection (prior knowledge) over the two
//! pipes in a task of its own, so the child's stdout is read for as long as
//! the connection lives, whatever the application does; a slow consumer
//! pushes back on its own stream only (HTTP/2 flow control).
//!
//! # Contract
//!
//! * **Selection.** The child must answer the preface with an HTTP/2
//!   SETTINGS frame within [`HostConfig::startup_timeout`]. If its first
//!   bytes are newline JSON (a `stdio` server answers the preface with a
//!   -32700 line), [`Client::spawn`] fails at once with
//!   [`Error::Selection`], saying the server speaks `stdio`, not
//!   `stdio-v2`, and quoting a bounded preview of what it wrote; other bytes,
//!   an exit or silence give [`Error::Startup`] with the exit status and the
//!   stderr tail. The child is stopped in each case.
//! * **Requests.** Each message is one `POST /mcp` with the headers
//!   [`request_headers`](crate::wire::request_headers) builds from the body.
//!   [`Client::request`] returns the result, or the server's JSON-RPC error
//!   as [`Error::Rpc`] (with the HTTP status); [`Client::call`] is the
//!   streaming form ([`Call::next`] yields each event-stream notification,
//!   then the response). Ids are the client's (integers from 1).
//! * **The limit.** Each response body, and each event of an event stream,
//!   is counted as its DATA arrives (and on `content-length` up front)
//!   against [`HostConfig::max_receive`] before any parse; over it the call
//!   fails with [`Error::ResponseTooLarge`] naming the bytes seen and the
//!   limit, its stream is reset, and the session goes on. Counted in
//!   [`HostCounters::oversize_responses`].
//! * **Cancellation.** [`Call::cancel`], or dropping an unfinished
//!   [`Call`] (a dropped `request` future included), resets its stream
//!   (`RST_STREAM(CANCEL)`): the server cancels the request (its tasks and
//!   process trees). Counted in [`HostCounters::cancelled`]. A stream the
//!   server resets (a request cancelled by `notifications/cancelled`) fails
//!   its call with [`Error::Reset`]; the session goes on.
//! * **Deadlines.** A request fails with [`Error::TimedOut`] after
//!   [`HostConfig::request_timeout`] (its stream is reset). A write to the
//!   child's stdin pending for [`HostConfig::write_timeout`] (the child is
//!   not reading) ends the session: every call fails with
//!   [`Error::Closed`], and the child is stopped.
//! * **The end.** When the connection ends (the child exited or closed
//!   stdout, a protocol error such as a stray write on stdout, a stall),
//!   every call in flight and every later one fails with [`Error::Closed`],
//!   which says why, with the exit status when the child has exited and the
//!   stderr tail. [`Client::shutdown`] closes the connection (`GOAWAY`, then
//!   stdin), waits [`HostConfig::exit_grace`] for the child, sends `SIGTERM`
//!   to its tree (unix), waits again, then kills the tree; dropping the
//!   client kills the tree at once.
//! * **Server notifications** that belong to no request come on the stream
//!   [`Client::listen`] opens (`subscriptions/listen`).
//!
//! # Example
//!
//! ```no_run
//! use mcp_framer_stdio_v2::host::{Client, HostConfig, Item};
//! use serde_json::json;
//!
//! # async fn demo() -> Result<(), mcp_framer_stdio_v2::host::Error> {
//! let client = Client::spawn(tokio::process::Command::new("my-v2-server"), HostConfig::default()).await?;
//! let tools = client.request("tools/list", &json!({})).await?;
//! println!("{}", tools.result());
//!
//! // The streaming form: progress events, then the response.
//! let params = json!({"name": "build", "arguments": {}, "_meta": {"progressToken": "b1"}});
//! let mut call = client.call("tools/call", &params).await?;
//! while let Some(item) = call.next().await {
//!     match item? {
//!         Item::Notification(progress) => eprintln!("{}", String::from_utf8_lossy(&progress)),
//!         Item::Response(response) => println!("{}", response.text()),
//!     }
//! }
//! // Dropping an unfinished call resets its stream: the server cancels it.
//! let ended = client.shutdown().await;
//! eprintln!("exit {:?}; stderr:\n{}", ended.exit_status, ended.stderr_tail);
//! # Ok(())
//! # }
//! ```

use std::fmt;
use std::io;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use h2::client::{ResponseFuture, SendRequest};
use h2::{Reason, RecvStream, SendStream};
use http::{HeaderMap, Method, Request, StatusCode};
use mcp_framer_jsonrpc::protocol::NEWEST_LEGACY;
use mcp_framer_jsonrpc::{EncodeError, Encoder, ErrorObject, Id, Message, OwnedId};
use mcp_framer_stdio::tree::{self, Killer};
use mcp_framer_stdio::{Keep, Preview, Previewer};
use serde::Serialize;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, ReadBuf};
use tokio::sync::watch;

use crate::io::{StallClock, Stalling, send_data};
use crate::wire::{self, FirstBytes, Params, SseReader};

/// The host's limits and deadlines.
#[derive(Clone, Debug, PartialEq, Eq)]
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
    /// How long [`Client::shutdown`] waits for the child after closing the
    /// connection, and again after `SIGTERM`. Default 2 s.
    pub exit_grace: Duration,
    /// The HTTP/2 window of each stream (how much of a response may arrive
    /// unread). Default 1 MiB.
    pub stream_window: u32,
    /// The connection's HTTP/2 window. Default 16 MiB.
    pub connection_window: u32,
    /// The `mcp-protocol-version` header of a request whose body has no
    /// per-request version. Default the newest legacy version.
    pub protocol_version: &'static str,
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
            protocol_version: NEWEST_LEGACY,
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

    /// Sets [`HostConfig::stream_window`].
    #[must_use]
    pub fn with_stream_window(mut self, bytes: u32) -> HostConfig {
        self.stream_window = bytes;
        self
    }
}

/// Why a call (or the session) failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The configured transport and the server's disagree: the child
    /// answered the HTTP/2 preface with newline-delimited JSON-RPC.
    Selection {
        /// A bounded preview of what the child wrote first.
        preview: String,
    },
    /// The child did not start a `stdio-v2` session: it exited, wrote
    /// something that is neither HTTP/2 nor JSON, or nothing within the
    /// startup timeout.
    Startup {
        /// What happened.
        reason: String,
        /// The child's exit status, if it had exited.
        exit_status: Option<ExitStatus>,
        /// The end of its stderr.
        stderr_tail: String,
    },
    /// The server answered with a JSON-RPC error (and this HTTP status).
    Rpc {
        /// The HTTP status of the answer.
        status: u16,
        /// The error object.
        error: ErrorObject,
    },
    /// The answer was not what `stdio-v2` allows (a status without a
    /// JSON-RPC body, a body that is not one JSON-RPC response, another
    /// content type).
    Protocol {
        /// The HTTP status.
        status: u16,
        /// What was wrong, with a bounded preview of the body.
        detail: String,
    },
    /// A response body or an event passed [`HostConfig::max_receive`]; the
    /// stream was reset (the newline host's
    /// `RequestError::Oversize`, for a body counted as it arrives).
    ResponseTooLarge {
        /// The request's method.
        method: String,
        /// Bytes seen when it passed the limit (the body is at least this
        /// long; exact when it came from `content-length`).
        seen: u64,
        /// The limit in bytes.
        max: usize,
    },
    /// No response within [`HostConfig::request_timeout`]; the stream was
    /// reset (the server cancels the request).
    TimedOut {
        /// The request's method.
        method: String,
        /// The timeout.
        after: Duration,
    },
    /// The server reset the request's stream (`RST_STREAM`), the session
    /// going on: the request was cancelled on the server's side (a
    /// `notifications/cancelled` for it, or the server's own refusal).
    Reset {
        /// The reset's error code.
        reason: String,
    },
    /// The message could not be encoded.
    Encode(EncodeError),
    /// The session ended: why, the exit status and the stderr tail.
    Closed(Arc<Closed>),
}

/// How a session ended.
#[derive(Debug)]
pub struct Closed {
    /// Why (the HTTP/2 connection's error, the child's exit, a stall...).
    pub reason: String,
    /// The child's exit status, if it had exited.
    pub exit_status: Option<ExitStatus>,
    /// The end of the child's stderr.
    pub stderr_tail: String,
}

impl fmt::Display for Closed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the stdio-v2 session ended: {}", self.reason)?;
        if let Some(status) = self.exit_status {
            write!(f, "; server process {status}")?;
        }
        quote_stderr(f, &self.stderr_tail)
    }
}

fn quote_stderr(f: &mut fmt::Formatter<'_>, tail: &str) -> fmt::Result {
    let tail = tail.trim_end();
    if tail.is_empty() {
        return f.write_str("; stderr was empty");
    }
    write!(f, "; stderr tail:\n{}", Preview::new(tail.as_bytes(), Keep::Tail(1024)))
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Selection { preview } => write!(
                f,
                "selection mismatch: the host is configured for `stdio-v2` (HTTP/2 over stdio) and the server \
                 speaks `stdio` (newline-delimited JSON-RPC): it answered the HTTP/2 preface with: {preview}"
            ),
            Error::Startup { reason, exit_status, stderr_tail } => {
                write!(f, "the server did not start a stdio-v2 session: {reason}")?;
                if let Some(status) = exit_status {
                    write!(f, "; server process {status}")?;
                }
                quote_stderr(f, stderr_tail)
            }
            Error::Rpc { status, error } => write!(f, "the server answered HTTP {status} with {error}"),
            Error::Protocol { status, detail } => write!(f, "unexpected answer (HTTP {status}): {detail}"),
            Error::ResponseTooLarge { method, seen, max } => write!(
                f,
                "the response to {method} passed the transport limit of {max} bytes ({seen} bytes seen); \
                 its stream was reset"
            ),
            Error::TimedOut { method, after } => write!(f, "{method} got no response within {after:?}; cancelled"),
            Error::Reset { reason } => write!(f, "the server reset the request's stream ({reason})"),
            Error::Encode(e) => write!(f, "the message could not be encoded: {e}"),
            Error::Closed(closed) => write!(f, "{closed}"),
        }
    }
}

impl std::error::Error for Error {}

/// The host's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct HostCounters {
    /// Requests sent.
    pub requests: u64,
    /// Notifications sent.
    pub notifications: u64,
    /// Responses received whole (results and JSON-RPC errors).
    pub responses: u64,
    /// Notifications received on event streams (progress, listen).
    pub events: u64,
    /// Responses or events over the limit (their streams reset).
    pub oversize_responses: u64,
    /// Body bytes received (DATA, every stream), counted as they arrive.
    pub body_bytes: u64,
    /// Calls cancelled by a stream reset (explicitly, by drop or by the
    /// request timeout).
    pub cancelled: u64,
    /// Bytes of stderr read.
    pub stderr_bytes: u64,
}

#[derive(Debug, Default)]
struct Counters {
    requests: AtomicU64,
    notifications: AtomicU64,
    responses: AtomicU64,
    events: AtomicU64,
    oversize_responses: AtomicU64,
    body_bytes: AtomicU64,
    cancelled: AtomicU64,
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// What the child's first bytes said.
#[derive(Clone, Debug, PartialEq)]
enum Verdict {
    Waiting,
    Http2,
    Newline(String),
    Other(String),
    Eof,
}

/// The child's stdout, reporting what its first bytes say.
struct Sniff<R> {
    inner: R,
    seen: Vec<u8>,
    verdict: Option<watch::Sender<Verdict>>,
}

/// Bytes of the child's first output kept for the verdict and its preview.
const SNIFF_BYTES: usize = 4096;

impl<R: AsyncRead + Unpin> AsyncRead for Sniff<R> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        let before = buf.filled().len();
        let poll = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        if self.verdict.is_none() {
            return poll;
        }
        let std::task::Poll::Ready(Ok(())) = &poll else { return poll };
        let new = &buf.filled()[before..];
        let eof = new.is_empty();
        let room = SNIFF_BYTES.saturating_sub(self.seen.len());
        let take = new.len().min(room);
        let new = new[..take].to_vec();
        self.seen.extend_from_slice(&new);
        let preview = || Preview::new(&self.seen, Keep::Head(512)).to_text();
        let verdict = match wire::server_first_bytes(&self.seen) {
            FirstBytes::Http2 => Verdict::Http2,
            FirstBytes::NewlineJson => Verdict::Newline(preview()),
            FirstBytes::Other => Verdict::Other(preview()),
            FirstBytes::Undecided if eof => Verdict::Eof,
            FirstBytes::Undecided => return poll,
        };
        let refuse = !matches!(verdict, Verdict::Http2 | Verdict::Eof);
        if let Some(tx) = self.verdict.take() {
            let _ = tx.send(verdict);
        }
        if refuse {
            return std::task::Poll::Ready(Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the server does not speak stdio-v2",
            )));
        }
        poll
    }
}

struct Shared {
    counters: Counters,
    stderr: Mutex<Previewer>,
    stderr_bytes: AtomicU64,
    child: tokio::sync::Mutex<tree::Child>,
    killer: Killer,
    closed: Mutex<Option<String>>,
    /// Set once the connection has ended and `closed` says why.
    ended: watch::Sender<bool>,
}

impl Shared {
    fn stderr_tail(&self) -> String {
        self.stderr.lock().unwrap_or_else(|e| e.into_inner()).preview_partial().to_text()
    }

    /// The session's end as an error (waits briefly for the exit status).
    async fn closed(&self, fallback: &str) -> Error {
        let reason =
            self.closed.lock().unwrap_or_else(|e| e.into_inner()).clone().unwrap_or_else(|| fallback.to_owned());
        let exit_status = {
            let mut child = self.child.lock().await;
            match tokio::time::timeout(Duration::from_millis(200), child.wait()).await {
                Ok(Ok(status)) => Some(status),
                _ => None,
            }
        };
        Error::Closed(Arc::new(Closed { reason, exit_status, stderr_tail: self.stderr_tail() }))
    }
}

impl Shared {
    /// The error for a stream that failed with `error`: the server's reset
    /// of this stream alone ([`Error::Reset`]), or the end of the session
    /// (waiting a moment for the connection task to say why).
    async fn stream_failed(&self, error: h2::Error, what: &str) -> Error {
        if error.is_reset() && !*self.ended.borrow() {
            let reason = error.reason().unwrap_or(Reason::CANCEL);
            return Error::Reset { reason: format!("{reason:?}: {reason}") };
        }
        let mut ended = self.ended.subscribe();
        let _ = tokio::time::timeout(Duration::from_secs(1), ended.wait_for(|ended| *ended)).await;
        self.closed(&format!("{what}: {error}")).await
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let _ = self.killer.kill();
    }
}

/// A listen stream's deadline (in effect none).
const LISTEN_DEADLINE: Duration = Duration::from_secs(365 * 24 * 3600);

/// A `stdio-v2` session with a spawned server.
pub struct Client {
    send: SendRequest<Bytes>,
    shared: Arc<Shared>,
    config: HostConfig,
    next_id: AtomicI64,
    encoder: Encoder,
    connection: tokio::task::JoinHandle<()>,
    stderr_drain: tokio::task::JoinHandle<()>,
    _kill_on_drop: KillOnDrop,
}

/// Kills the child's tree when the client is dropped (no runtime needed).
struct KillOnDrop(Killer);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
    }
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client").field("config", &self.config).field("counters", &self.counters()).finish()
    }
}

impl Client {
    /// Spawns `command` and starts a `stdio-v2` session with it; see the
    /// [module](self) for the contract. Needs a tokio runtime.
    pub async fn spawn(mut command: tokio::process::Command, config: HostConfig) -> Result<Client, Error> {
        command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let startup = |reason: String| Error::Startup { reason, exit_status: None, stderr_tail: String::new() };
        let (mut child, killer) =
            tree::spawn(&mut command, true).map_err(|e| startup(format!("the command could not be spawned: {e}")))?;
        let (Some(stdin), Some(stdout), Some(stderr)) = (child.take_stdin(), child.take_stdout(), child.take_stderr())
        else {
            let _ = killer.kill();
            return Err(startup("the child's stdio could not be piped".into()));
        };
        let shared = Arc::new(Shared {
            counters: Counters::default(),
            stderr: Mutex::new(Previewer::new(Keep::Tail(config.stderr_tail))),
            stderr_bytes: AtomicU64::new(0),
            child: tokio::sync::Mutex::new(child),
            killer,
            closed: Mutex::new(None),
            ended: watch::channel(false).0,
        });
        let stderr_drain = tokio::spawn(drain_stderr(stderr, Arc::downgrade(&shared)));

        let (verdict_tx, mut verdict) = watch::channel(Verdict::Waiting);
        let clock = Arc::new(StallClock::default());
        let io = tokio::io::join(
            Sniff { inner: stdout, seen: Vec::new(), verdict: Some(verdict_tx) },
            Stalling { inner: stdin, clock: Arc::clone(&clock) },
        );
        let mut builder = h2::client::Builder::new();
        builder
            .initial_window_size(config.stream_window)
            .initial_connection_window_size(config.connection_window)
            .max_send_buffer_size(1 << 20);
        let handshake = tokio::time::timeout(config.startup_timeout, builder.handshake::<_, Bytes>(io)).await;
        let (send, connection) = match handshake {
            Ok(Ok(pair)) => pair,
            Ok(Err(e)) => return Err(shared.startup_error(format!("the HTTP/2 handshake failed: {e}")).await),
            Err(_) => return Err(shared.startup_error("the HTTP/2 handshake did not complete".into()).await),
        };
        let connection = tokio::spawn(drive(connection, Arc::downgrade(&shared), clock, config.write_timeout));
        let decided = tokio::time::timeout(config.startup_timeout, verdict.wait_for(|v| *v != Verdict::Waiting)).await;
        let verdict = match decided {
            Ok(Ok(verdict)) => verdict.clone(),
            Ok(Err(_)) => Verdict::Eof,
            Err(_) => {
                let why = format!("it wrote nothing within {:?} of the HTTP/2 preface", config.startup_timeout);
                connection.abort();
                return Err(shared.startup_error(why).await);
            }
        };
        match verdict {
            Verdict::Http2 => {}
            Verdict::Newline(preview) => {
                connection.abort();
                let _ = shared.killer.kill();
                return Err(Error::Selection { preview });
            }
            Verdict::Other(preview) => {
                connection.abort();
                return Err(shared
                    .startup_error(format!("it answered the preface with neither HTTP/2 nor JSON: {preview}"))
                    .await);
            }
            Verdict::Eof | Verdict::Waiting => {
                connection.abort();
                return Err(shared
                    .startup_error("it closed its stdout before answering the HTTP/2 preface".into())
                    .await);
            }
        }
        let shared_killer = shared.killer.clone();
        Ok(Client {
            send,
            shared,
            config,
            next_id: AtomicI64::new(1),
            encoder: Encoder::unlimited(),
            connection,
            stderr_drain,
            _kill_on_drop: KillOnDrop(shared_killer),
        })
    }

    /// The counters so far.
    pub fn counters(&self) -> HostCounters {
        counters_of(&self.shared)
    }

    /// The end of the child's stderr so far (at most
    /// [`HostConfig::stderr_tail`] bytes, after a marker line when earlier
    /// bytes were dropped).
    pub fn stderr_tail(&self) -> String {
        self.shared.stderr_tail()
    }

    /// Sends a request and waits for its response (notifications that come
    /// on its event stream are kept in [`Response::notifications`]). A JSON-RPC
    /// error is [`Error::Rpc`]. Dropping the future cancels the request.
    pub async fn request<P: Serialize + ?Sized>(&self, method: &str, params: &P) -> Result<Response, Error> {
        self.call(method, params).await?.response().await
    }

    /// Sends a request and returns its [`Call`]: the streaming form.
    pub async fn call<P: Serialize + ?Sized>(&self, method: &str, params: &P) -> Result<Call, Error> {
        let id = Id::Number(self.next_id.fetch_add(1, Ordering::Relaxed));
        let body = self.encoder.request(&id, method, params).map_err(Error::Encode)?;
        bump(&self.shared.counters.requests);
        self.call_raw(id, method, body).await
    }

    /// Sends `body` (one JSON-RPC request, as is: the caller chose its id)
    /// with the headers built from it; for tests of what the server does
    /// with odd bodies, headers built for `method`.
    pub async fn call_raw(&self, id: OwnedId, method: &str, body: Vec<u8>) -> Result<Call, Error> {
        let headers = match mcp_framer_jsonrpc::parse(&body) {
            Ok(message) => {
                let params = Params::read(message.payload());
                wire::request_headers(method, &params, self.config.protocol_version)
            }
            Err(_) => wire::request_headers(method, &Params::default(), self.config.protocol_version),
        };
        let mut headers = headers;
        headers.insert(http::header::CONTENT_LENGTH, body.len().into());
        self.post(id, method, headers, Bytes::from(body)).await
    }

    /// Sends `body` with exactly `headers` (nothing added but the method and
    /// path, no `content-length` unless given): for tests of the server's
    /// header checks and of its limit counted on DATA as it arrives.
    pub async fn call_with_headers(
        &self,
        id: OwnedId,
        method: &str,
        headers: HeaderMap,
        body: Vec<u8>,
    ) -> Result<Call, Error> {
        self.post(id, method, headers, Bytes::from(body)).await
    }

    async fn post(&self, id: OwnedId, method: &str, headers: HeaderMap, body: Bytes) -> Result<Call, Error> {
        let mut request = Request::builder().method(Method::POST).uri(format!("http://localhost{}", wire::ENDPOINT));
        if let Some(map) = request.headers_mut() {
            *map = headers;
        }
        let request = request.body(()).map_err(|e| Error::Protocol { status: 0, detail: e.to_string() })?;
        let deadline = tokio::time::Instant::now() + self.config.request_timeout;
        let timed_out = || Error::TimedOut { method: method.to_owned(), after: self.config.request_timeout };
        // Waits while the server's stream limit is reached, within the deadline.
        let mut send = match tokio::time::timeout_at(deadline, self.send.clone().ready()).await {
            Ok(Ok(send)) => send,
            Ok(Err(_)) => return Err(self.shared.closed("the HTTP/2 connection is closed").await),
            Err(_) => return Err(timed_out()),
        };
        let (response, mut stream) = match send.send_request(request, body.is_empty()) {
            Ok(pair) => pair,
            Err(_) => return Err(self.shared.closed("the HTTP/2 connection is closed").await),
        };
        let mut call = Call {
            id,
            method: method.to_owned(),
            stream: None,
            state: State::Waiting(response),
            sse: None,
            shared: Arc::clone(&self.shared),
            max: self.config.max_receive,
            deadline,
            timeout: self.config.request_timeout,
            finished: false,
            body_unfinished: false,
        };
        if !body.is_empty() {
            // Send the body within the window; an early answer (a 413) ends it.
            let State::Waiting(response) = &mut call.state else { unreachable!() };
            let early = tokio::time::timeout_at(deadline, async {
                tokio::select! {
                    sent = send_data(&mut stream, body, true) => { let _ = sent; None }
                    answer = response => Some(answer),
                }
            })
            .await;
            match early {
                Ok(None) => {}
                Ok(Some(answer)) => {
                    // Answered before the whole body was taken (a 413): stop
                    // sending; the stream is reset once the answer is read.
                    call.body_unfinished = true;
                    call.state = State::Early(Some(answer));
                }
                Err(_) => {
                    call.stream = Some(stream);
                    return Err(call.timed_out());
                }
            }
        }
        call.stream = Some(stream);
        Ok(call)
    }

    /// Sends a notification; `Ok` once the server accepted it (`202`).
    pub async fn notify<P: Serialize + ?Sized>(&self, method: &str, params: &P) -> Result<(), Error> {
        let body = self.encoder.notification(method, params).map_err(Error::Encode)?;
        let message =
            mcp_framer_jsonrpc::parse(&body).map_err(|e| Error::Protocol { status: 0, detail: e.to_string() })?;
        let mut headers = wire::request_headers(method, &Params::read(message.payload()), self.config.protocol_version);
        headers.insert(http::header::CONTENT_LENGTH, body.len().into());
        bump(&self.shared.counters.notifications);
        let mut call = self.post(Id::Number(0), method, headers, Bytes::from(body)).await?;
        let answer = call.head().await?;
        call.finished = true;
        match answer.status() {
            StatusCode::ACCEPTED => Ok(()),
            status => Err(call.error_from(answer).await.unwrap_or(Error::Protocol {
                status: status.as_u16(),
                detail: "a notification's answer must be 202".into(),
            })),
        }
    }

    /// Opens the `subscriptions/listen` stream with `filter` (the request's
    /// `notifications` member, e.g. `{"toolsListChanged": true}`); its
    /// [`Call::next`] yields the acknowledgment, then each notification.
    pub async fn listen(&self, filter: Value) -> Result<Call, Error> {
        let mut call = self.call(wire::LISTEN, &serde_json::json!({"notifications": filter})).await?;
        // A long-lived stream: no request deadline.
        call.deadline = tokio::time::Instant::now() + LISTEN_DEADLINE;
        Ok(call)
    }

    /// Ends the session: closes the connection (`GOAWAY` once no stream is
    /// open, then the child's stdin; a connection still busy after
    /// [`HostConfig::exit_grace`] is dropped), waits the same grace for the
    /// child, then sends `SIGTERM` to its tree (unix) and waits again, then
    /// kills the tree (whatever the child left in it too). Returns the exit
    /// status and the whole stderr tail (read to EOF, within the grace).
    pub async fn shutdown(self) -> Ended {
        let Client { send, shared, config, mut connection, stderr_drain, .. } = self;
        drop(send);
        if tokio::time::timeout(config.exit_grace, &mut connection).await.is_err() {
            connection.abort();
            let _ = connection.await;
        }
        let mut status = {
            let mut child = shared.child.lock().await;
            let mut status = tokio::time::timeout(config.exit_grace, child.wait()).await.ok().and_then(Result::ok);
            if status.is_none() {
                let _ = shared.killer.terminate();
                status = tokio::time::timeout(config.exit_grace, child.wait()).await.ok().and_then(Result::ok);
            }
            status
        };
        let _ = shared.killer.kill();
        if status.is_none() {
            let mut child = shared.child.lock().await;
            status = tokio::time::timeout(config.exit_grace, child.wait()).await.ok().and_then(Result::ok);
        }
        let _ = tokio::time::timeout(config.exit_grace, stderr_drain).await;
        Ended { exit_status: status, stderr_tail: shared.stderr_tail(), counters: counters_of(&shared) }
    }

    /// The child's pid, while it has not been reaped.
    pub async fn pid(&self) -> Option<u32> {
        self.shared.child.lock().await.id()
    }
}

impl Shared {
    async fn startup_error(&self, reason: String) -> Error {
        let exit_status = {
            let mut child = self.child.lock().await;
            match tokio::time::timeout(Duration::from_millis(500), child.wait()).await {
                Ok(Ok(status)) => Some(status),
                _ => None,
            }
        };
        let _ = self.killer.kill();
        // Let the stderr drain catch up with what the child wrote before it went.
        tokio::time::sleep(Duration::from_millis(50)).await;
        Error::Startup { reason, exit_status, stderr_tail: self.stderr_tail() }
    }
}

fn counters_of(shared: &Shared) -> HostCounters {
    let c = &shared.counters;
    let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
    HostCounters {
        requests: get(&c.requests),
        notifications: get(&c.notifications),
        responses: get(&c.responses),
        events: get(&c.events),
        oversize_responses: get(&c.oversize_responses),
        body_bytes: get(&c.body_bytes),
        cancelled: get(&c.cancelled),
        stderr_bytes: shared.stderr_bytes.load(Ordering::Relaxed),
    }
}

/// What [`Client::shutdown`] found.
#[derive(Debug)]
#[non_exhaustive]
pub struct Ended {
    /// The child's exit status, if it exited (or was killed) within the graces.
    pub exit_status: Option<ExitStatus>,
    /// The end of its stderr.
    pub stderr_tail: String,
    /// The counters at the end.
    pub counters: HostCounters,
}

/// Drives the HTTP/2 connection until it ends, recording why; ends it if a
/// write to the child's stdin stays pending for `write_timeout`.
async fn drive<C>(connection: C, shared: std::sync::Weak<Shared>, clock: Arc<StallClock>, write_timeout: Duration)
where
    C: std::future::Future<Output = Result<(), h2::Error>>,
{
    let mut connection = std::pin::pin!(connection);
    let mut tick = tokio::time::interval((write_timeout / 4).max(Duration::from_millis(10)));
    let reason = loop {
        tokio::select! {
            done = &mut connection => break match done {
                Ok(()) => "the HTTP/2 connection closed".to_owned(),
                Err(e) => format!("the HTTP/2 connection failed: {e}"),
            },
            _ = tick.tick() => if clock.stalled_for(write_timeout) {
                break format!("the server stopped reading its stdin (a write pending for {write_timeout:?})");
            },
        }
    };
    if let Some(shared) = shared.upgrade() {
        shared.closed.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(reason);
        shared.ended.send_replace(true);
    }
}

/// Drains the child's stderr to EOF into the bounded tail.
async fn drain_stderr(mut stderr: tokio::process::ChildStderr, shared: std::sync::Weak<Shared>) {
    let mut buf = vec![0u8; 8192];
    loop {
        let n = match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let Some(shared) = shared.upgrade() else { return };
        shared.stderr_bytes.fetch_add(n as u64, Ordering::Relaxed);
        shared.stderr.lock().unwrap_or_else(|e| e.into_inner()).push(&buf[..n]);
    }
}

/// A response: the whole JSON-RPC message, its HTTP status, and the
/// notifications that came before it on its event stream.
#[derive(Clone, Debug)]
pub struct Response {
    /// The HTTP status.
    pub status: u16,
    /// The JSON-RPC response, as received.
    pub message: Bytes,
    /// Notifications received on the request's event stream, in order.
    pub notifications: Vec<Bytes>,
}

impl Response {
    /// The `result` member, parsed (`Null` if absent).
    pub fn result(&self) -> Value {
        serde_json::from_slice::<Value>(&self.message)
            .ok()
            .and_then(|mut v| v.get_mut("result").map(Value::take))
            .unwrap_or(Value::Null)
    }

    /// The concatenated text blocks of a tool result.
    pub fn text(&self) -> String {
        let result = self.result();
        let blocks = result["content"].as_array().cloned().unwrap_or_default();
        blocks.iter().filter_map(|b| b["text"].as_str()).collect()
    }
}

/// One item of a call's answer.
#[derive(Clone, Debug)]
pub enum Item {
    /// A notification on the request's event stream.
    Notification(Bytes),
    /// The response (the last item).
    Response(Response),
}

enum State {
    Waiting(ResponseFuture),
    Early(Option<Result<http::Response<RecvStream>, h2::Error>>),
    Head(Option<Result<http::Response<RecvStream>, h2::Error>>),
    Json { body: RecvStream, status: u16 },
    Events { body: RecvStream, status: u16, ready: std::collections::VecDeque<Bytes> },
    Done,
}

/// A request in flight: its stream. Dropping it before its response (or
/// calling [`Call::cancel`]) resets the stream, which cancels the request.
pub struct Call {
    id: OwnedId,
    method: String,
    stream: Option<SendStream<Bytes>>,
    state: State,
    sse: Option<SseReader>,
    shared: Arc<Shared>,
    max: usize,
    deadline: tokio::time::Instant,
    timeout: Duration,
    finished: bool,
    /// The answer came before the request body was all sent.
    body_unfinished: bool,
}

impl fmt::Debug for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Call").field("id", &self.id).field("method", &self.method).finish()
    }
}

impl Call {
    /// The request's id.
    pub fn id(&self) -> &OwnedId {
        &self.id
    }

    /// Resets the stream (`RST_STREAM(CANCEL)`): the server cancels the
    /// request.
    pub fn cancel(mut self) {
        self.reset();
    }

    /// Resets the stream if the call is not finished; counted as a
    /// cancellation when `cancel` is set.
    fn reset_as(&mut self, cancel: bool) {
        if !self.finished {
            self.finished = true;
            if cancel {
                bump(&self.shared.counters.cancelled);
            }
            if let Some(stream) = self.stream.as_mut() {
                stream.send_reset(Reason::CANCEL);
            }
        }
        self.state = State::Done;
    }

    fn reset(&mut self) {
        self.reset_as(true);
    }

    /// Waits for the answer's head (its status), without reading its body:
    /// from then on the response is being sent.
    pub async fn started(&mut self) -> Result<u16, Error> {
        if let State::Waiting(_) | State::Early(_) = self.state {
            let answer = self.head().await?;
            let status = answer.status().as_u16();
            self.state = State::Head(Some(Ok(answer)));
            return Ok(status);
        }
        Err(Error::Protocol { status: 0, detail: "the answer's head was already read".into() })
    }

    /// Waits for the answer's head.
    async fn head(&mut self) -> Result<http::Response<RecvStream>, Error> {
        let answer = match &mut self.state {
            State::Waiting(response) => match tokio::time::timeout_at(self.deadline, response).await {
                Ok(answer) => answer,
                Err(_) => return Err(self.timed_out()),
            },
            State::Early(answer) | State::Head(answer) => {
                answer.take().unwrap_or_else(|| Err(h2::Error::from(Reason::INTERNAL_ERROR)))
            }
            _ => return Err(Error::Protocol { status: 0, detail: "the answer's head was already read".into() }),
        };
        match answer {
            Ok(answer) => Ok(answer),
            Err(e) => {
                self.finished = true;
                self.state = State::Done;
                Err(self.shared.stream_failed(e, "the request's stream failed").await)
            }
        }
    }

    fn timed_out(&mut self) -> Error {
        self.reset();
        Error::TimedOut { method: self.method.clone(), after: self.timeout }
    }

    fn too_large(&mut self, seen: u64) -> Error {
        bump(&self.shared.counters.oversize_responses);
        // Not a cancellation: the server did answer, too largely.
        self.finished = false;
        self.reset_as(false);
        Error::ResponseTooLarge { method: self.method.clone(), seen, max: self.max }
    }

    /// The error an answer that is not a success carries.
    async fn error_from(&mut self, answer: http::Response<RecvStream>) -> Option<Error> {
        let status = answer.status().as_u16();
        let mut body = answer.into_body();
        let bytes = match read_limited(&mut body, self.max, self.deadline, &self.shared.counters.body_bytes).await {
            Ok(bytes) => bytes,
            Err(ReadEnd::TooLarge(seen)) => return Some(self.too_large(seen)),
            Err(ReadEnd::TimedOut) => return Some(self.timed_out()),
            Err(ReadEnd::Failed(e)) => {
                return Some(self.shared.stream_failed(e, "the answer's body failed").await);
            }
        };
        match serde_json::from_slice::<Value>(&bytes).ok().and_then(|mut v| v.get_mut("error").map(Value::take)) {
            Some(error) => serde_json::from_value(error).ok().map(|error| Error::Rpc { status, error }),
            None if bytes.is_empty() => None,
            None => {
                Some(Error::Protocol { status, detail: format!("body: {}", Preview::new(&bytes, Keep::Head(256))) })
            }
        }
    }

    /// The next item: a notification of the event stream, or the response
    /// (then `None`). A JSON-RPC error response is [`Error::Rpc`].
    pub async fn next(&mut self) -> Option<Result<Item, Error>> {
        loop {
            match &mut self.state {
                State::Done => return None,
                State::Waiting(_) | State::Early(_) | State::Head(_) => {
                    let answer = match self.head().await {
                        Ok(answer) => answer,
                        Err(e) => return Some(Err(e)),
                    };
                    let status = answer.status().as_u16();
                    let content_type = answer
                        .headers()
                        .get(http::header::CONTENT_TYPE)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("")
                        .to_owned();
                    let declared = answer
                        .headers()
                        .get(http::header::CONTENT_LENGTH)
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.parse::<u64>().ok());
                    if let Some(len) = declared
                        && len > self.max as u64
                    {
                        return Some(Err(self.too_large(len)));
                    }
                    if status == 200 && content_type.starts_with(wire::EVENT_STREAM) {
                        self.sse = Some(SseReader::new(self.max));
                        self.state = State::Events { body: answer.into_body(), status, ready: Default::default() };
                    } else if status == 200 && content_type.starts_with(wire::JSON) {
                        self.state = State::Json { body: answer.into_body(), status };
                    } else {
                        self.finished = true;
                        self.state = State::Done;
                        let error = self.error_from(answer).await.unwrap_or(Error::Protocol {
                            status,
                            detail: format!("no JSON-RPC answer (content type {content_type:?})"),
                        });
                        return Some(Err(error));
                    }
                }
                State::Json { body, status } => {
                    let status = *status;
                    let read = read_limited(body, self.max, self.deadline, &self.shared.counters.body_bytes).await;
                    self.finished = true;
                    self.state = State::Done;
                    return Some(match read {
                        Ok(bytes) => self.final_message(bytes, status, Vec::new()).map(Item::Response),
                        Err(ReadEnd::TooLarge(seen)) => Err(self.too_large(seen)),
                        Err(ReadEnd::TimedOut) => Err(self.timed_out()),
                        Err(ReadEnd::Failed(e)) => Err(self.shared.stream_failed(e, "the response body failed").await),
                    });
                }
                State::Events { body, status, ready } => {
                    if let Some(event) = ready.pop_front() {
                        let status = *status;
                        let is_response = mcp_framer_jsonrpc::parse(&event)
                            .map(|m| matches!(m, Message::Response { .. } | Message::ErrorResponse { .. }))
                            .unwrap_or(false);
                        if is_response {
                            self.finished = true;
                            self.state = State::Done;
                            return Some(self.final_message(event, status, Vec::new()).map(Item::Response));
                        }
                        bump(&self.shared.counters.events);
                        return Some(Ok(Item::Notification(event)));
                    }
                    let chunk = match tokio::time::timeout_at(self.deadline, body.data()).await {
                        Err(_) => return Some(Err(self.timed_out())),
                        Ok(None) => {
                            self.finished = true;
                            self.state = State::Done;
                            return Some(Err(self.shared.closed("the event stream ended without a response").await));
                        }
                        Ok(Some(Err(e))) => {
                            self.finished = true;
                            self.state = State::Done;
                            return Some(Err(self.shared.stream_failed(e, "the event stream failed").await));
                        }
                        Ok(Some(Ok(chunk))) => chunk,
                    };
                    let _ = body.flow_control().release_capacity(chunk.len());
                    self.shared.counters.body_bytes.fetch_add(chunk.len() as u64, Ordering::Relaxed);
                    let mut out = Vec::new();
                    let pushed = self.sse.as_mut().map(|sse| sse.push(&chunk, &mut out)).unwrap_or(Ok(()));
                    if let Err(too_large) = pushed {
                        return Some(Err(self.too_large(too_large.seen)));
                    }
                    ready.extend(out);
                }
            }
        }
    }

    fn final_message(&self, bytes: Bytes, status: u16, notifications: Vec<Bytes>) -> Result<Response, Error> {
        bump(&self.shared.counters.responses);
        let message = mcp_framer_jsonrpc::parse(&bytes).map_err(|e| Error::Protocol {
            status,
            detail: format!("the response is not JSON-RPC ({e}): {}", Preview::new(&bytes, Keep::Head(256))),
        })?;
        match message {
            Message::Response { .. } => Ok(Response { status, message: bytes.clone(), notifications }),
            Message::ErrorResponse { .. } => {
                let error = message
                    .payload()
                    .and_then(|p| serde_json::from_str::<ErrorObject>(p.get()).ok())
                    .unwrap_or_else(|| ErrorObject::internal("malformed error object"));
                Err(Error::Rpc { status, error })
            }
            _ => Err(Error::Protocol { status, detail: "the answer is not a response".into() }),
        }
    }

    /// Waits for the response, keeping the notifications that come before it.
    pub async fn response(mut self) -> Result<Response, Error> {
        let mut notifications = Vec::new();
        while let Some(item) = self.next().await {
            match item? {
                Item::Notification(n) => notifications.push(n),
                Item::Response(mut response) => {
                    response.notifications = notifications;
                    return Ok(response);
                }
            }
        }
        Err(self.shared.closed("the answer ended without a response").await)
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        self.reset();
        if self.body_unfinished
            && let Some(stream) = self.stream.as_mut()
        {
            stream.send_reset(Reason::CANCEL);
        }
    }
}

enum ReadEnd {
    TooLarge(u64),
    TimedOut,
    Failed(h2::Error),
}

/// Reads a body under `max` bytes, counting DATA as it arrives.
async fn read_limited(
    body: &mut RecvStream,
    max: usize,
    deadline: tokio::time::Instant,
    received: &AtomicU64,
) -> Result<Bytes, ReadEnd> {
    let mut bytes = Vec::new();
    loop {
        let chunk = match tokio::time::timeout_at(deadline, body.data()).await {
            Err(_) => return Err(ReadEnd::TimedOut),
            Ok(None) => return Ok(Bytes::from(bytes)),
            Ok(Some(chunk)) => chunk.map_err(ReadEnd::Failed)?,
        };
        let _ = body.flow_control().release_capacity(chunk.len());
        received.fetch_add(chunk.len() as u64, Ordering::Relaxed);
        if bytes.len() + chunk.len() > max {
            return Err(ReadEnd::TooLarge((bytes.len() + chunk.len()) as u64));
        }
        bytes.extend_from_slice(&chunk);
    }
}
