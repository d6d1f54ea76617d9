//! The serve loop: read stdin through the framer, classify each frame, answer
//! what can be answered at once, dispatch tool calls, apply cancellations,
//! and shut down cleanly at EOF.

use std::borrow::Cow;
use std::future::Future;
use std::io;
use std::ops::Not;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::time::Instant;

use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::task::{JoinError, JoinHandle};

use super::dispatch::{Dispatcher, Job};
use super::report::{Counters, ServeReport};
use super::screen::{Screened, screen};
use super::table::{CancelOutcome, Table};
use super::tool::RpcError;
use super::writer::{Outbox, encode_error, run_writer};
use super::{PROTOCOL_VERSIONS, Server};
use crate::counter::{add, bump};
use crate::preview::{MESSAGE_BYTES, clip, excerpt};
use mcp_framer::{Event, Framer};
use mcp_framer_jsonrpc::{Encoder, Id, Message, OwnedId, RawJson};

/// `tools/call` params, borrowed from the frame.
#[derive(Deserialize)]
struct CallParams<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(borrow, default)]
    arguments: Option<&'a RawValue>,
    #[serde(rename = "_meta", borrow, default)]
    meta: Option<Meta<'a>>,
}

#[derive(Deserialize)]
struct Meta<'a> {
    #[serde(rename = "progressToken", borrow, default)]
    progress_token: Option<&'a RawValue>,
}

/// `notifications/cancelled` params.
#[derive(Deserialize)]
struct CancelParams<'a> {
    #[serde(rename = "requestId", borrow)]
    request_id: Id<'a>,
    #[serde(borrow, default)]
    reason: Option<Cow<'a, str>>,
}

/// `initialize` params: only the version matters here.
#[derive(Deserialize)]
struct InitializeParams<'a> {
    #[serde(rename = "protocolVersion", borrow, default)]
    protocol_version: Option<Cow<'a, str>>,
}

/// The loop's state between frames.
struct Session<'s> {
    server: &'s Server,
    tools_list: Box<RawValue>,
    table: Arc<Table>,
    outbox: Outbox,
    dispatcher: Dispatcher,
    counters: Arc<Counters>,
    initialize_id: Option<OwnedId>,
}

/// How waiting for room for a reply ended.
enum Queued {
    /// Queued (or dropped and counted, stdout being gone).
    Done,
    /// A shutdown signal arrived first.
    Signal(i32),
    /// The writer stopped first (stdout failed).
    WriterDone(Result<io::Result<()>, JoinError>),
}

/// Serves `input` / `output` until `input` ends or `shutdown` resolves (to
/// the number of the signal that asked for it); see [`Server::serve`] for
/// the contract.
pub(crate) async fn serve<R, W, S>(server: &Server, mut input: R, output: W, shutdown: S) -> ServeReport
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
    S: Future<Output = i32>,
{
    let config = &server.config;
    let counters = Arc::new(Counters::default());
    let (outbox, inbox) =
        Outbox::new(config.writer_queue_bytes, config.control_queue_bytes, config.max_send, Arc::clone(&counters));
    let mut writer = tokio::spawn(run_writer(inbox, output, Arc::clone(&counters)));
    let table = Arc::new(Table::default());
    let dispatcher = Dispatcher::new(
        Arc::clone(&table),
        config.max_concurrent,
        config.max_queued,
        outbox.clone(),
        Arc::clone(&counters),
    );
    let mut session =
        Session { server, tools_list: server.tools_list(), table, outbox, dispatcher, counters, initialize_id: None };
    let mut framer = Framer::new(config.framer);
    let mut shutdown = pin!(shutdown);
    let mut error: Option<String> = None;
    let mut writer_done = None;
    let mut signal = None;

    'read: loop {
        let read = tokio::select! {
            biased;
            number = &mut shutdown => {
                signal = Some(number);
                break 'read;
            }
            done = &mut writer => {
                writer_done = Some(done);
                break 'read;
            }
            read = input.read(framer.spare()) => read,
        };
        match read {
            Ok(0) => framer.finish(),
            Ok(n) => framer.commit(n),
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) => {
                tracing::error!(%err, "stdin read failed; shutting down");
                error = Some(format!("stdin read failed: {err}"));
                break;
            }
        }
        loop {
            let reply = match framer.next_event() {
                Ok(Some(event)) => session.on_event(event),
                Ok(None) => break,
                Err(err) => {
                    tracing::error!(%err, "transport limit exceeded under OversizePolicy::Fail; shutting down");
                    error = Some(err.to_string());
                    break 'read;
                }
            };
            let Some(reply) = reply else { continue };
            match session.queue_reply(reply, &mut writer, shutdown.as_mut()).await {
                Queued::Done => {}
                Queued::Signal(number) => {
                    signal = Some(number);
                    break 'read;
                }
                Queued::WriterDone(done) => {
                    writer_done = Some(done);
                    break 'read;
                }
            }
        }
        if framer.is_finished() {
            let (queued, running, writing) = session.table.counts();
            tracing::info!(queued, running, writing, "stdin closed; finishing in-flight requests");
            break;
        }
    }
    if let Some(number) = signal {
        let (queued, running, writing) = session.table.counts();
        tracing::warn!(signal = signal_name(number), queued, running, writing, "signal received; shutting down");
    }

    let grace = config.shutdown_grace;
    let stdout_gone = writer_done.is_some();
    let finished = stdout_gone.not()
        && signal.is_none()
        && tokio::select! {
            finished = session.dispatcher.drain(grace) => finished,
            number = &mut shutdown => {
                signal = Some(number);
                tracing::warn!(signal = signal_name(number), "signal received during the shutdown grace");
                false
            }
        };
    if !finished {
        let why = match signal {
            Some(number) => format!("{} received", signal_name(number)),
            None if stdout_gone => "stdout failed".to_owned(),
            None => format!("still running {grace:?} after stdin closed"),
        };
        session.abandon_all(&why, stdout_gone).await;
    }
    session.outbox.close();
    let mut unflushed = 0;
    let writer_done = match writer_done {
        Some(done) => done,
        None => {
            let flushed = tokio::select! {
                done = tokio::time::timeout(grace, &mut writer) => done.ok(),
                number = &mut shutdown, if signal.is_none() => {
                    signal = Some(number);
                    None
                }
            };
            match flushed {
                Some(done) => done,
                None => {
                    unflushed = session.outbox.pending();
                    tracing::warn!(unflushed, "stdout not drained within the shutdown grace; giving up");
                    writer.abort();
                    Ok(Ok(()))
                }
            }
        }
    };
    match writer_done {
        Ok(Ok(())) => {}
        Ok(Err(err)) => error = error.or(Some(format!("stdout write failed: {err}"))),
        Err(join) => error = error.or(Some(format!("writer task failed: {join}"))),
    }
    let mut report = session.counters.report(*framer.stats());
    report.error = error;
    report.signal = signal;
    report.unflushed_frames = unflushed;
    report
}

/// The usual name of the signals the loop stops on.
fn signal_name(number: i32) -> &'static str {
    match number {
        2 => "SIGINT",
        15 => "SIGTERM",
        _ => "signal",
    }
}

/// A stdin pause this long (the host not draining stdout) is logged as a
/// warning when it ends.
const LONG_PAUSE_MS: u64 = 1000;

/// At most this many abandoned ids are named in the shutdown log line.
const LOGGED_IDS: usize = 32;

impl Session<'_> {
    /// Queues a reply of the stdin loop in the control budget. When the
    /// budget is full (the host is not draining stdout) the loop waits here,
    /// and so stops reading stdin, until the writer frees room, the writer
    /// stops, or a shutdown signal arrives; it never drops the reply.
    async fn queue_reply<S: Future<Output = i32>>(
        &self,
        frame: Vec<u8>,
        writer: &mut JoinHandle<io::Result<()>>,
        shutdown: Pin<&mut S>,
    ) -> Queued {
        if let Some(room) = self.outbox.try_reserve_control(frame.len()) {
            self.outbox.push(frame, Some(room), None);
            return Queued::Done;
        }
        bump(&self.counters.stdin_pauses);
        let backlog = self.server.config.control_queue_bytes;
        // Debug level: under a burst this happens at every few replies.
        tracing::debug!(backlog, bytes = frame.len(), "reply backlog full (host not draining stdout); pausing stdin");
        let paused = Instant::now();
        let len = frame.len();
        let outcome = tokio::select! {
            biased;
            number = shutdown => Queued::Signal(number),
            done = writer => Queued::WriterDone(done),
            room = self.outbox.reserve_control(len) => {
                let waited_ms = paused.elapsed().as_millis() as u64;
                match room {
                    Some(room) if waited_ms >= LONG_PAUSE_MS => {
                        tracing::warn!(waited_ms, backlog, "stdin was paused: the host did not drain stdout");
                        self.outbox.push(frame, Some(room), None);
                    }
                    Some(room) => self.outbox.push(frame, Some(room), None),
                    None => self.outbox.dropped(len),
                }
                return Queued::Done;
            }
        };
        // Shutting down: the reply still goes out if stdout allows (one frame
        // over the budget, bounded).
        self.outbox.push(frame, None, None);
        outcome
    }

    /// Cancels every request still queued or running, kills their process
    /// groups, and answers each -32603 (unless stdout is gone); logs their
    /// ids and counts them.
    async fn abandon_all(&mut self, why: &str, stdout_gone: bool) {
        self.dispatcher.stop_starting();
        let abandoned = self.table.cancel_all();
        self.dispatcher.abort_all().await;
        if abandoned.is_empty() {
            return;
        }
        add(&self.counters.cancelled_at_shutdown, abandoned.len() as u64);
        let mut ids: Vec<String> =
            abandoned.iter().take(LOGGED_IDS).map(|id| excerpt(&id.to_string()).into_owned()).collect();
        if abandoned.len() > LOGGED_IDS {
            ids.push(format!("and {} more", abandoned.len() - LOGGED_IDS));
        }
        tracing::warn!(count = abandoned.len(), ids = %ids.join(", "), reason = why,
            "requests abandoned at shutdown: cancelled, their process groups killed");
        if stdout_gone {
            return;
        }
        // Outside the control budget: at most max_concurrent + max_queued
        // small frames (the admission bound).
        let error = RpcError::internal(format!("request abandoned: the server is shutting down ({why})"));
        for id in &abandoned {
            self.outbox.push(encode_error(Some(id), &error, self.outbox.max_send()), None, None);
        }
    }

    fn max(&self) -> usize {
        self.outbox.max_send()
    }

    /// The reply to `event`, if it needs one.
    fn on_event(&mut self, event: Event<&[u8]>) -> Option<Vec<u8>> {
        match screen(event, self.server.config.framer.max_frame, self.max(), &self.counters) {
            Screened::Message(_, message) => self.on_message(message),
            Screened::Reply(reply) => Some(reply),
            Screened::Skip => None,
        }
    }

    fn on_message(&mut self, message: Message<'_>) -> Option<Vec<u8>> {
        match message {
            Message::Request { id, method, params } => {
                bump(&self.counters.requests);
                self.on_request(id.into_owned(), &method, params)
            }
            Message::Notification { method, params } => {
                bump(&self.counters.notifications);
                self.on_notification(&method, params);
                None
            }
            other => {
                bump(&self.counters.unexpected_responses);
                tracing::debug!(kind = ?other.kind(), id = ?other.id(), "ignoring a response: this server sends no requests");
                None
            }
        }
    }

    fn reply(&self, id: &OwnedId, result: &impl serde::Serialize) -> Option<Vec<u8>> {
        let max = self.max();
        let frame = Encoder::new(max)
            .response(id, result)
            .unwrap_or_else(|err| encode_error(Some(id), &RpcError::internal(err), max));
        Some(frame)
    }

    fn reply_error(&self, id: &OwnedId, error: &RpcError) -> Option<Vec<u8>> {
        Some(encode_error(Some(id), error, self.max()))
    }

    fn on_request(&mut self, id: OwnedId, method: &str, params: Option<RawJson<'_>>) -> Option<Vec<u8>> {
        if self.table.contains(&id) {
            // Answering with the id would let a client resolve the original
            // request with this error: a null id cannot be mistaken for it.
            bump(&self.counters.duplicate_ids);
            tracing::warn!(id = %excerpt(&id.to_string()), method = %excerpt(method), "duplicate request id in flight");
            let message = format!(
                "request id {} is already in flight; this duplicate was not processed",
                excerpt(&id.to_string())
            );
            return Some(encode_error(None, &RpcError::new(mcp_framer_jsonrpc::INVALID_REQUEST, message), self.max()));
        }
        match method {
            "initialize" if self.initialize_id.is_some() => {
                bump(&self.counters.repeated_initialize);
                tracing::warn!(id = %id, "initialize received twice");
                let message = "initialize was already received in this session";
                self.reply_error(&id, &RpcError::new(mcp_framer_jsonrpc::INVALID_REQUEST, message))
            }
            "initialize" => {
                let asked = params
                    .and_then(|p| p.deserialize::<InitializeParams<'_>>().ok())
                    .and_then(|p| p.protocol_version.map(Cow::into_owned));
                let result = self.server.initialize_result(asked.as_deref());
                self.initialize_id = Some(id.clone());
                self.reply(&id, &result)
            }
            // The 2026-07-28 revision's probe: answered before or without
            // `initialize`, and any number of times.
            "server/discover" => self.reply(&id, &self.server.discover_result()),
            "ping" => self.reply(&id, &serde_json::json!({})),
            "tools/list" => self.reply(&id, &self.tools_list),
            "tools/call" => self.on_call(id, params),
            _ => {
                bump(&self.counters.unknown_methods);
                let method = excerpt(method);
                tracing::debug!(id = %excerpt(&id.to_string()), %method, "unknown method");
                self.reply_error(
                    &id,
                    &RpcError::new(mcp_framer_jsonrpc::METHOD_NOT_FOUND, format!("method not found: {method}")),
                )
            }
        }
    }

    fn on_call(&mut self, id: OwnedId, params: Option<RawJson<'_>>) -> Option<Vec<u8>> {
        let parsed = params
            .ok_or_else(|| "missing params".to_owned())
            .and_then(|p| p.deserialize::<CallParams<'_>>().map_err(|err| err.to_string()));
        let params = match parsed {
            Ok(params) => params,
            Err(err) => {
                let message = format!("bad tools/call params: {}", clip(&err, MESSAGE_BYTES));
                return self.reply_error(&id, &RpcError::invalid_params(message));
            }
        };
        let Some((name, handler, structured)) = self.server.handler(&params.name) else {
            let error = RpcError::invalid_params(format!("unknown tool: {}", excerpt(&params.name)));
            return self.reply_error(&id, &error);
        };
        let job = Job {
            id: id.clone(),
            tool: name,
            handler,
            structured,
            arguments: params.arguments.map(RawValue::to_owned),
            progress_token: params.meta.and_then(|m| m.progress_token).map(RawValue::to_owned),
        };
        match self.dispatcher.dispatch(job) {
            Ok(()) => None,
            Err(error) => {
                tracing::warn!(id = %id, %error, "request refused");
                self.reply_error(&id, &error)
            }
        }
    }

    fn on_notification(&mut self, method: &str, params: Option<RawJson<'_>>) {
        match method {
            "notifications/cancelled" => self.on_cancel(params),
            "notifications/initialized" => tracing::debug!("client initialized"),
            _ => tracing::debug!(method, "ignoring notification"),
        }
    }

    fn on_cancel(&mut self, params: Option<RawJson<'_>>) {
        let Some(params) = params.and_then(|p| p.deserialize::<CancelParams<'_>>().ok()) else {
            bump(&self.counters.cancel_malformed);
            tracing::debug!("ignoring a malformed cancellation");
            return;
        };
        let id = params.request_id.into_owned();
        let reason = params.reason.as_deref().unwrap_or("");
        if self.initialize_id.as_ref() == Some(&id) {
            bump(&self.counters.cancel_ignored);
            tracing::info!(id = %id, "cancellation ignored: initialize cannot be cancelled");
            return;
        }
        let (counter, state) = match self.table.cancel(&id) {
            CancelOutcome::Queued => (&self.counters.cancel_queued, "queued"),
            CancelOutcome::Running => (&self.counters.cancel_running, "running"),
            CancelOutcome::Writing => (&self.counters.cancel_writing, "writing"),
            CancelOutcome::Unknown => (&self.counters.cancel_ignored, "done-or-unknown"),
        };
        bump(counter);
        tracing::info!(id = %id, state, reason, "cancellation");
    }
}

/// The protocol versions this server speaks, newest first.
pub(crate) fn negotiate(asked: Option<&str>) -> &'static str {
    PROTOCOL_VERSIONS.iter().find(|v| Some(**v) == asked).copied().unwrap_or(PROTOCOL_VERSIONS[0])
}
