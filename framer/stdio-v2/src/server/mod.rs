//! The `stdio-v2` server: an HTTP/2 front on [`Server`]'s dispatcher.
//!
//! [`serve`] (any reader and writer) and [`serve_stdio`] (the process's
//! stdin and stdout, taken as the newline server takes them) accept one
//! HTTP/2 connection with prior knowledge and run the [`Server`] the caller
//! built — its tools, admission, cancellation reaching child process trees,
//! result budgets and protocol replies — behind it. The dispatcher runs on
//! dispatcher's message-level seam ([`Server::serve_messages`]): each
//! accepted POST body goes in as one message under a key of the front's
//! own, each frame the dispatcher writes comes back to the stream that
//! waits for it, with no second framing pass. [`serve_any_stdio`] serves
//! either transport from one binary, chosen from the client's first bytes.
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
//!   it `405` (`allow: POST`), with no body; a body sent with it is read to
//!   its end and thrown away (no reset); counted in [`V2Report::bad_routes`].
//! * **Headers** are capped by h2 at [`V2Config::max_header_list_size`]
//!   (16 KiB, hyper's) before a stream reaches the front; streams at
//!   [`V2Config::max_concurrent_streams`]; a reset flood ends the
//!   connection ([`V2Config::max_pending_accept_reset_streams`]), and so do
//!   protocol-error floods ([`V2Config::max_local_error_reset_streams`]);
//!   h2 caps a CONTINUATION flood by the header list size.
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
//!   [`V2Report::busy_bodies`] and [`V2Report::busy_bytes`]. Nothing is
//!   reserved for a declared `content-length`: a false length reserves
//!   nothing. What HTTP/2 holds unread besides is bounded by the connection
//!   window.
//! * **Bodies.** A body that is not one JSON-RPC request or notification is
//!   answered `400` with the error the newline transport gives the same
//!   line (-32700 / -32600, the id when it can be recovered); counted in
//!   [`V2Report::malformed_bodies`]. A valid body reaches the dispatcher as
//!   one line: its JSON whitespace line breaks (the only place a valid JSON
//!   text can hold one) become spaces.
//! * **Headers** are checked against the body as [`check_headers`](crate::wire::check_headers) says:
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
//!   id (counted in [`V2Report::duplicate_ids`]); the first goes on. The
//!   dispatcher never sees a client's id: each request goes in under a key
//!   of the front's own, so an id reused right after a reset is a new
//!   request, answered with its own result.
//! * **A request's notifications** (progress, a tool's log messages) flow
//!   on its own stream, as the 2026-07-28 text says, up to
//!   [`V2Config::stream_backlog`] bytes waiting for the stream's window
//!   (more are dropped and counted in [`V2Report::progress_dropped`]; a
//!   response never is).
//! * **Change notifications** (`notifications/*/list_changed`) go to every
//!   `subscriptions/listen` stream whose filter asked for them (ours: the
//!   three `*ListChanged` flags; `resourceSubscriptions` is not honoured and
//!   left out of the acknowledgment), each with
//!   `_meta["io.modelcontextprotocol/subscriptionId"]`, after the
//!   `notifications/subscriptions/acknowledged` event. One no stream wants is
//!   dropped and counted ([`V2Report::notifications_dropped`]), as is a
//!   notification whose request is gone; a listener whose backlog is full
//!   misses it, counted in [`V2Report::listener_drops`]. At most
//!   [`V2Config::max_listeners`] listen streams are open (`503` beyond).
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
//!   else up. Every frame the dispatcher writes keeps its place in the
//!   dispatcher's budgets ([`ServerConfig::writer_queue_bytes`](mcp_framer_stdio::server::ServerConfig::writer_queue_bytes)
//!   for results, [`ServerConfig::control_queue_bytes`](mcp_framer_stdio::server::ServerConfig::control_queue_bytes)
//!   for the protocol's replies) until its stream has sent it: when they are
//!   full, tool results wait and then the dispatcher reads no more, as on
//!   the newline transport when stdout does not drain. A stream whose
//!   window stays shut for [`V2Config::stall_timeout`] with something to
//!   send is reset (`CANCEL`) and its request cancelled, counted in
//!   [`V2Report::stalled_streams`], so one stream left unread cannot hold
//!   the budget for good. `STDIO-V2.md` states the resulting bound on the
//!   server's memory as a formula.
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
//!   (-32603); the connection is then closed with `GOAWAY`. Every way out
//!   has a deadline: after a signal, the end of the input, a connection
//!   error or a stall, this returns within
//!   [`ServerConfig::shutdown_grace`](mcp_framer_stdio::server::ServerConfig::shutdown_grace)
//!   plus 750 ms, whatever streams still wait for window.

mod body;
mod config;
mod heads;
mod listen;
mod routes;
mod select;
mod stream;

use std::future::Future;
use std::io;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use mcp_framer_stdio::server::{ServeReport, Server};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::task::JoinSet;
use tokio::time::Instant;

pub use config::{V2Config, V2Report};
pub use mcp_framer_stdio::server::oversize_error;

use self::body::Assembling;
use self::config::{Counters, bump};
use self::routes::Routes;
use self::select::{Spoken, first_bytes, other_bytes, refuse_newline};
use self::stream::Front;
use crate::io::{StallClock, Stalling};

/// How long past the shutdown grace the front still drives the connection
/// (so the last answers can leave) before it returns regardless.
const PAST_GRACE: Duration = Duration::from_millis(750);

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

/// What a dual-mode server served.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Served {
    /// The client spoke newline-delimited JSON-RPC (`stdio`).
    Newline(ServeReport),
    /// The client spoke `stdio-v2`.
    V2(V2Report),
}

/// Serves the process's stdin and stdout in whichever transport the client
/// speaks, told from its first bytes: the HTTP/2 preface (which can never
/// begin a newline JSON-RPC stream) is `stdio-v2`, anything else is the
/// newline transport, served exactly as [`Server::serve_stdio`] serves it.
/// One binary then needs no configuration; a host still selects its
/// transport explicitly. To require one transport, call
/// [`Server::serve_stdio`] or [`serve_stdio`] instead.
pub async fn serve_any_stdio(server: Server, config: V2Config) -> io::Result<Served> {
    let signals = mcp_framer_stdio::server::shutdown_signals()?;
    let (input, output) = mcp_framer_stdio::server::take_stdio()?;
    serve_any_until(server, input, output, config, signals).await
}

/// [`serve_any_stdio`] on `input` and `output`.
///
/// ```
/// use mcp_framer_stdio::server::Server;
/// use mcp_framer_stdio_v2::server::{Served, V2Config, serve_any};
/// use tokio::io::{AsyncReadExt, AsyncWriteExt};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// // A newline client is served as the newline server serves it.
/// let (mut host_in, server_out) = tokio::io::duplex(1 << 16);
/// let (server_in, mut host_out) = tokio::io::duplex(1 << 16);
/// host_out.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"}\n").await.unwrap();
/// drop(host_out);
/// let served = serve_any(Server::new("demo", "1"), server_in, server_out, V2Config::default()).await.unwrap();
/// assert!(matches!(served, Served::Newline(ref report) if report.requests == 1), "{served:?}");
/// let mut answer = String::new();
/// host_in.read_to_string(&mut answer).await.unwrap();
/// assert_eq!(answer, "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n");
/// # });
/// ```
pub async fn serve_any<R, W>(server: Server, input: R, output: W, config: V2Config) -> io::Result<Served>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    serve_any_until(server, input, output, config, std::future::pending()).await
}

async fn serve_any_until<R, W, S>(
    server: Server,
    mut input: R,
    output: W,
    config: V2Config,
    signal: S,
) -> io::Result<Served>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
    S: Future<Output = i32> + Send + 'static,
{
    let (spoken, first) = first_bytes(&mut input).await?;
    let input = std::io::Cursor::new(first).chain(input);
    match spoken {
        Spoken::Http2 => Ok(Served::V2(connection(server, input, output, config, signal).await)),
        Spoken::Newline | Spoken::Other | Spoken::Nothing => {
            tracing::info!("the client speaks newline-delimited JSON-RPC: serving `stdio`");
            Ok(Served::Newline(server.serve_until(input, output, signal).await))
        }
    }
}

async fn serve_until<R, W, S>(
    server: Server,
    mut input: R,
    output: W,
    config: V2Config,
    signal: S,
) -> io::Result<V2Report>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
    S: Future<Output = i32> + Send + 'static,
{
    let (spoken, first) = first_bytes(&mut input).await?;
    match spoken {
        Spoken::Http2 => {
            let input = std::io::Cursor::new(first).chain(input);
            Ok(connection(server, input, output, config, signal).await)
        }
        Spoken::Nothing => {
            tracing::info!(read = first.len(), "stdin ended before the HTTP/2 preface");
            Ok(V2Report::default())
        }
        Spoken::Newline => Err(refuse_newline(first, input, output).await),
        Spoken::Other => Err(other_bytes(&first)),
    }
}

/// Whether the connection ended because the client closed the pipes (a
/// write met a closed stdout, or stdin ended inside a frame): the end of
/// the session, as a clean end of input is, not an error.
fn peer_closed(error: &h2::Error) -> bool {
    error.get_io().is_some_and(|io| {
        matches!(io.kind(), io::ErrorKind::BrokenPipe | io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset)
    })
}

/// One HTTP/2 connection, the preface first on `input`: the front on the
/// dispatcher's seam, until the connection ends; then the dispatcher's end,
/// all within the deadline (see the [module](self)).
async fn connection<R, W, S>(server: Server, input: R, output: W, config: V2Config, signal: S) -> V2Report
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
    S: Future<Output = i32> + Send + 'static,
{
    let counters = Arc::new(Counters::default());
    let server_config = *server.config();
    let grace = server_config.shutdown_grace;
    let max_frame = server_config.framer.max_frame;
    let (signal_tx, signal_rx) = tokio::sync::oneshot::channel::<i32>();
    let (inlet, outlet, serving) = server.serve_messages(async move {
        match signal_rx.await {
            Ok(number) => number,
            // No signal will come.
            Err(_) => std::future::pending().await,
        }
    });
    let mut dispatcher = tokio::spawn(serving);
    let routes = Arc::new(Routes::new(config.stream_backlog, config.max_listeners, Arc::clone(&counters)));
    let pump = tokio::spawn(routes::pump(Arc::clone(&routes), outlet));
    let front = Arc::new(Front {
        max_body: max_frame,
        assembling: Assembling::new(config.max_assembling.unwrap_or(max_frame)),
        stall: config.stall_timeout,
        inlet: inlet.clone(),
        routes: Arc::clone(&routes),
        counters: Arc::clone(&counters),
    });

    let clock = Arc::new(StallClock::default());
    let io = tokio::io::join(input, Stalling { inner: output, clock: Arc::clone(&clock) });
    let mut builder = h2::server::Builder::new();
    builder
        .initial_window_size(config.stream_window)
        .initial_connection_window_size(config.connection_window)
        .max_concurrent_streams(config.max_concurrent_streams)
        .max_header_list_size(config.max_header_list_size)
        .max_pending_accept_reset_streams(config.max_pending_accept_reset_streams)
        .max_local_error_reset_streams(Some(config.max_local_error_reset_streams))
        .max_send_buffer_size(1 << 20);
    let mut stalled = false;
    let mut connection_error = None;
    let mut signal = pin!(signal);
    let mut signal_tx = Some(signal_tx);
    // Set by a signal: past it, the connection is dropped whatever waits.
    let mut deadline: Option<Instant> = None;
    let mut streams = JoinSet::new();
    let mut tick = tokio::time::interval((config.stall_timeout / 4).max(Duration::from_millis(10)));
    let handshake = builder.handshake::<_, Bytes>(io);
    let mut handshake = pin!(handshake);
    let connected = loop {
        tokio::select! {
            done = &mut handshake => break Some(done),
            _ = tick.tick() => if clock.stalled_for(config.stall_timeout) { stalled = true; break None },
        }
    };
    match connected {
        Some(Ok(mut connection)) => loop {
            tokio::select! {
                accepted = connection.accept() => match accepted {
                    Some(Ok((request, respond))) => {
                        bump(&counters.streams);
                        streams.spawn(Arc::clone(&front).handle(request, respond));
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
                Some(_) = streams.join_next(), if !streams.is_empty() => {}
                _ = tick.tick() => if clock.stalled_for(config.stall_timeout) {
                    tracing::error!(timeout = ?config.stall_timeout, "stdout stalled: the host stopped reading; ending the session");
                    stalled = true;
                    break;
                },
                number = &mut signal, if signal_tx.is_some() => {
                    if let Some(tx) = signal_tx.take() {
                        let _ = tx.send(number);
                    }
                    deadline = Some(Instant::now() + grace + PAST_GRACE);
                    connection.graceful_shutdown();
                }
                () = sleep_until(deadline) => {
                    tracing::warn!("streams still open past the shutdown deadline; closing the connection");
                    break;
                }
            }
        },
        Some(Err(error)) => {
            tracing::warn!(%error, "the HTTP/2 handshake failed");
            connection_error = Some(error.to_string());
        }
        None => {}
    }
    // The end of the dispatcher's input: it finishes within its grace (a
    // signal already told it to answer what runs), and no later than the
    // deadline.
    inlet.end();
    let deadline = deadline.unwrap_or_else(|| Instant::now() + grace + PAST_GRACE);
    let serve = match tokio::time::timeout_at(deadline, &mut dispatcher).await {
        Ok(Ok(report)) => report,
        Ok(Err(join)) => {
            let mut report = ServeReport::default();
            report.error = Some(format!("dispatcher task failed: {join}"));
            report
        }
        Err(_) => {
            tracing::warn!("the dispatcher did not finish by the shutdown deadline; stopped");
            dispatcher.abort();
            let mut report = ServeReport::default();
            report.error = Some("the dispatcher did not finish by the shutdown deadline".to_owned());
            report
        }
    };
    routes.close();
    pump.abort();
    streams.abort_all();
    let mut report = counters.report(serve);
    report.stalled = stalled;
    report.connection_error = connection_error;
    drop(signal_tx);
    report
}

/// Sleeps until `deadline`, or for ever without one.
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn the_sniffed_bytes_are_read_again_first() {
        let mut reader = std::io::Cursor::new(b"PRI".to_vec()).chain(&b" * HTTP"[..]);
        let mut all = String::new();
        reader.read_to_string(&mut all).await.unwrap();
        assert_eq!(all, "PRI * HTTP");
    }
}
