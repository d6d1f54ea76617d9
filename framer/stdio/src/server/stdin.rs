//! The server's one stdin loop: every server transport reads its input
//! here, and whatever sits on it (the [`Server`](super::Server)'s
//! dispatcher, or an SDK through the raw [`transport`](super::transport))
//! only routes the messages it is handed.
//!
//! # Contract
//!
//! * stdin is read straight into the [`Framer`]'s buffer, under the
//!   framer's configuration (the transport limit on what is read, before
//!   any parse).
//! * Each frame is screened first ([`screen`]): blank lines skipped, a frame
//!   that is not a JSON-RPC message or is over the limit answered by the
//!   transport itself. Every other message is counted by kind and handed to
//!   the [`Route`], borrowed from the framer's buffer (no copy).
//! * Replies (the transport's and the route's) go into the reserved control
//!   budget of the [`Outbox`]; when it is full (the host is not draining
//!   stdout), the loop waits for room and so stops reading stdin: each such
//!   pause is counted ([`ServeReport::stdin_pauses`](super::ServeReport::stdin_pauses)),
//!   logged at debug level, and as a warning when it lasted a second or more.
//!   A reply is never dropped while stdout works.
//! * A route that forwards messages (the raw transport) waits for room in
//!   its own backlog; meanwhile stdin is not read either.
//! * The loop ends at the end of stdin, a read error, a sticky framer error
//!   (`OversizePolicy::Fail`), a shutdown signal, the route refusing more
//!   messages, or the writer stopping (stdout failed): [`Ended`] says which.
//!   While it waits (for reply room, or for the route), a signal or a stdout
//!   failure still ends it.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncReadExt};

use super::report::Counters;
use super::screen::{Screened, screen};
use super::writer::Outbox;
use crate::counter::bump;
use mcp_framer::{Config, Framer, Stats};
use mcp_framer_jsonrpc::{Kind, Message};

/// What sits on the stdin loop: it decides what each message gets.
pub(crate) trait Route {
    /// What this route hands on to another task
    /// ([`Infallible`](std::convert::Infallible) for a route that answers
    /// everything itself).
    type Forward: Send;

    /// Routes one message, borrowed with its `frame` from the framer's
    /// buffer: nothing more to do, a reply to queue, or something to hand
    /// on.
    fn route(&mut self, frame: &[u8], message: Message<'_>) -> Routed<Self::Forward>;

    /// Hands on what [`route`](Route::route) returned, waiting for room;
    /// `false` when nobody takes messages any more (the loop then ends).
    /// Cancel-safe: dropped while waiting, nothing was handed on.
    fn forward(&mut self, item: Self::Forward) -> impl Future<Output = bool> + Send;
}

/// What a [`Route`] made of one message.
pub(crate) enum Routed<F> {
    /// Nothing to send.
    Nothing,
    /// A reply frame, for the control budget.
    Reply(Vec<u8>),
    /// To hand on ([`Route::forward`]).
    Forward(F),
}

/// How the stdin loop ended.
#[derive(Debug)]
pub(crate) struct Ended {
    /// The shutdown signal that ended it.
    pub(crate) signal: Option<i32>,
    /// The writer stopped while stdin was still read: stdout failed.
    pub(crate) stdout_failed: bool,
    /// A read error, or the framer's sticky error.
    pub(crate) error: Option<String>,
    /// The framer's byte accounting.
    pub(crate) stats: Stats,
}

/// Why the loop stops before the end of stdin.
pub(crate) enum Stop {
    Signal(i32),
    StdoutFailed,
    RouteGone,
}

/// A stdin pause this long (the host not draining stdout) is logged as a
/// warning when it ends.
const LONG_PAUSE_MS: u64 = 1000;

/// Reads `input` until it ends or the loop is stopped (see the module docs),
/// handing each message to `route`.
pub(crate) async fn read_stdin<R, T, S>(
    mut input: R,
    config: Config,
    outbox: &Outbox,
    counters: &Counters,
    route: &mut T,
    mut shutdown: Pin<&mut S>,
) -> Ended
where
    R: AsyncRead + Unpin,
    T: Route,
    S: Future<Output = i32>,
{
    let mut framer = Framer::new(config);
    let mut error = None;
    let stop = 'read: loop {
        let read = tokio::select! {
            biased;
            number = shutdown.as_mut() => break 'read Some(Stop::Signal(number)),
            () = outbox.stopped() => break 'read Some(Stop::StdoutFailed),
            read = input.read(framer.spare()) => read,
        };
        match read {
            Ok(0) => framer.finish(),
            Ok(n) => framer.commit(n),
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) => {
                tracing::error!(%err, "stdin read failed; treated as the end of stdin");
                error = Some(format!("stdin read failed: {err}"));
                break None;
            }
        }
        loop {
            let routed = match framer.next_event() {
                Ok(Some(event)) => match screen(event, config.max_frame, outbox, counters) {
                    Screened::Message(frame, message) => {
                        bump(match message.kind() {
                            Kind::Request => &counters.requests,
                            Kind::Notification => &counters.notifications,
                            _ => &counters.unexpected_responses,
                        });
                        route.route(frame, message)
                    }
                    Screened::Reply(reply) => Routed::Reply(reply),
                    Screened::Skip => continue,
                },
                Ok(None) => break,
                Err(err) => {
                    tracing::error!(%err, "transport limit exceeded under OversizePolicy::Fail; end of stdin");
                    error = Some(err.to_string());
                    break 'read None;
                }
            };
            let stopped = match routed {
                Routed::Nothing => None,
                Routed::Reply(reply) => queue_reply(reply, outbox, counters, shutdown.as_mut()).await,
                Routed::Forward(item) => tokio::select! {
                    biased;
                    number = shutdown.as_mut() => Some(Stop::Signal(number)),
                    () = outbox.stopped() => Some(Stop::StdoutFailed),
                    taken = route.forward(item) => (!taken).then_some(Stop::RouteGone),
                },
            };
            if stopped.is_some() {
                break 'read stopped;
            }
        }
        if framer.is_finished() {
            tracing::info!("stdin closed");
            break None;
        }
    };
    let mut ended = Ended { signal: None, stdout_failed: false, error, stats: *framer.stats() };
    match stop {
        Some(Stop::Signal(number)) => {
            tracing::warn!(signal = signal_name(number), "signal received: treated as the end of stdin");
            ended.signal = Some(number);
        }
        Some(Stop::StdoutFailed) => {
            tracing::warn!("stdout closed or failed: stdin is no longer read");
            ended.stdout_failed = true;
        }
        Some(Stop::RouteGone) => tracing::debug!("messages are no longer taken: stdin is no longer read"),
        None => {}
    }
    ended
}

/// Queues `frame`, a reply, in the control budget. When the budget is full
/// (the host is not draining stdout) this waits for room, and so the loop
/// stops reading stdin, until the writer frees room, the writer stops, or a
/// shutdown signal arrives; the reply is never dropped while stdout works.
pub(crate) async fn queue_reply<S: Future<Output = i32>>(
    frame: Vec<u8>,
    outbox: &Outbox,
    counters: &Counters,
    shutdown: Pin<&mut S>,
) -> Option<Stop> {
    let len = frame.len();
    if let Some(room) = outbox.try_reserve_control(len) {
        outbox.push(frame, Some(room), None);
        return None;
    }
    bump(&counters.stdin_pauses);
    let backlog = outbox.control_budget();
    // Debug level: under a burst this happens at every few replies.
    tracing::debug!(backlog, bytes = len, "reply backlog full (host not draining stdout); pausing stdin");
    let paused = Instant::now();
    let stop = tokio::select! {
        biased;
        number = shutdown => Stop::Signal(number),
        () = outbox.stopped() => Stop::StdoutFailed,
        room = outbox.reserve_control(len) => {
            match room {
                Some(room) => {
                    let waited_ms = paused.elapsed().as_millis() as u64;
                    if waited_ms >= LONG_PAUSE_MS {
                        tracing::warn!(waited_ms, backlog, "stdin was paused: the host did not drain stdout");
                    }
                    outbox.push(frame, Some(room), None);
                    return None;
                }
                None => {
                    outbox.dropped(len);
                    return Some(Stop::StdoutFailed);
                }
            }
        }
    };
    // Ending: the reply still goes out if stdout allows (one frame over the
    // budget, bounded); with stdout gone it is dropped and counted.
    outbox.push(frame, None, None);
    Some(stop)
}

/// The usual name of the signals that end the input (unix `SIGINT` and
/// `SIGTERM`, Windows Ctrl-C and Ctrl-Break).
pub(crate) fn signal_name(number: i32) -> &'static str {
    match number {
        2 if cfg!(unix) => "SIGINT",
        15 if cfg!(unix) => "SIGTERM",
        0 if cfg!(windows) => "Ctrl-C",
        1 if cfg!(windows) => "Ctrl-Break",
        _ => "signal",
    }
}
