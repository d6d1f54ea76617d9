//! The serve loop: read stdin through the framer, classify each frame, answer
//! what can be answered at once, dispatch tool calls, apply cancellations,
//! and shut down cleanly at EOF.

use std::borrow::Cow;
use std::fs::File;
use std::io::{self, Write as _};
use std::os::fd::AsFd;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};

use super::dispatch::{Dispatcher, Job};
use super::report::{Counters, ServeReport};
use super::table::{CancelOutcome, Table};
use super::tool::RpcError;
use super::writer::{Outbox, encode_error, run_writer};
use super::{PROTOCOL_VERSIONS, Server};
use crate::counter::{add, bump};
use mcp_framer::{Event, Framer};
use mcp_framer_jsonrpc::{self as envelope, Encoder, Id, Message, OwnedId, RawJson};

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

/// Serves `input` / `output` until `input` ends; see the module docs.
pub(crate) async fn serve<R, W>(server: &Server, mut input: R, output: W) -> ServeReport
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let config = &server.config;
    let counters = Arc::new(Counters::default());
    let (outbox, inbox) = Outbox::new(config.writer_queue_bytes, config.max_response, Arc::clone(&counters));
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
    let mut error: Option<String> = None;
    let mut writer_done = None;

    'read: loop {
        let read = tokio::select! {
            read = input.read(framer.spare()) => read,
            done = &mut writer => {
                writer_done = Some(done);
                break 'read;
            }
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
            match framer.next_event() {
                Ok(Some(event)) => session.on_event(event),
                Ok(None) => break,
                Err(err) => {
                    tracing::error!(%err, "transport limit exceeded under OversizePolicy::Fail; shutting down");
                    error = Some(err.to_string());
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

    let grace = config.shutdown_grace;
    let stdout_gone = writer_done.is_some();
    if stdout_gone || !session.dispatcher.drain(grace).await {
        let cancelled = session.table.cancel_all();
        add(&session.counters.cancelled_at_shutdown, cancelled as u64);
        session.dispatcher.abort_all().await;
        if cancelled > 0 {
            tracing::warn!(cancelled, "requests still in flight at shutdown were cancelled");
        }
    }
    session.outbox.close();
    let mut unflushed = 0;
    let writer_done = match writer_done {
        Some(done) => done,
        None => match tokio::time::timeout(grace, &mut writer).await {
            Ok(done) => done,
            Err(_) => {
                unflushed = session.outbox.pending();
                tracing::warn!(unflushed, "stdout not drained within the shutdown grace; giving up");
                writer.abort();
                Ok(Ok(()))
            }
        },
    };
    match writer_done {
        Ok(Ok(())) => {}
        Ok(Err(err)) => error = error.or(Some(format!("stdout write failed: {err}"))),
        Err(join) => error = error.or(Some(format!("writer task failed: {join}"))),
    }
    let mut report = session.counters.report(*framer.stats());
    report.error = error;
    report.unflushed_frames = unflushed;
    report
}

impl Session<'_> {
    fn on_event(&mut self, event: Event<&[u8]>) {
        match event {
            Event::Frame(frame) => self.on_frame(frame),
            Event::OversizeStarted { seen } => {
                tracing::warn!(seen, "incoming message over the transport limit; discarding it");
            }
            Event::OversizeSkipped { len } => {
                bump(&self.counters.oversize);
                let max = self.server.config.framer.max_frame;
                let message = format!("message of {len} bytes exceeds the transport limit of {max} bytes");
                tracing::warn!(len, max, "oversize message discarded");
                let error = RpcError::new(envelope::INVALID_REQUEST, message);
                self.outbox.try_send(encode_error(None, &error, self.outbox.max_frame()));
            }
            Event::Truncated { len, .. } => {
                tracing::warn!(len, "stdin ended inside a message; its bytes were dropped");
            }
        }
    }

    fn on_frame(&mut self, frame: &[u8]) {
        match envelope::parse(frame) {
            Err(err) => {
                bump(&self.counters.malformed);
                tracing::warn!(code = err.code(), id = ?err.id(), %err, "malformed message");
                self.outbox.try_send(encode_error(err.id(), &RpcError::from(&err), self.outbox.max_frame()));
            }
            Ok(Message::Request { id, method, params }) => {
                bump(&self.counters.requests);
                self.on_request(id.into_owned(), &method, params);
            }
            Ok(Message::Notification { method, params }) => {
                bump(&self.counters.notifications);
                self.on_notification(&method, params);
            }
            Ok(other) => {
                bump(&self.counters.unexpected_responses);
                tracing::debug!(kind = ?other.kind(), id = ?other.id(), "ignoring a response: this server sends no requests");
            }
        }
    }

    fn reply(&self, id: &OwnedId, result: &impl serde::Serialize) {
        let max = self.outbox.max_frame();
        let frame = Encoder::new(max)
            .response(id, result)
            .unwrap_or_else(|err| encode_error(Some(id), &RpcError::internal(err), max));
        self.outbox.try_send(frame);
    }

    fn reply_error(&self, id: &OwnedId, error: &RpcError) {
        self.outbox.try_send(encode_error(Some(id), error, self.outbox.max_frame()));
    }

    fn on_request(&mut self, id: OwnedId, method: &str, params: Option<RawJson<'_>>) {
        match method {
            "initialize" => {
                let asked = params
                    .and_then(|p| p.deserialize::<InitializeParams<'_>>().ok())
                    .and_then(|p| p.protocol_version.map(Cow::into_owned));
                let result = self.server.initialize_result(asked.as_deref());
                self.initialize_id = Some(id.clone());
                self.reply(&id, &result);
            }
            "ping" => self.reply(&id, &serde_json::json!({})),
            "tools/list" => self.reply(&id, &self.tools_list),
            "tools/call" => self.on_call(id, params),
            _ => {
                bump(&self.counters.unknown_methods);
                tracing::debug!(id = %id, method, "unknown method");
                self.reply_error(
                    &id,
                    &RpcError::new(envelope::METHOD_NOT_FOUND, format!("method not found: {method}")),
                );
            }
        }
    }

    fn on_call(&mut self, id: OwnedId, params: Option<RawJson<'_>>) {
        let parsed = params
            .ok_or_else(|| "missing params".to_owned())
            .and_then(|p| p.deserialize::<CallParams<'_>>().map_err(|err| err.to_string()));
        let params = match parsed {
            Ok(params) => params,
            Err(err) => {
                return self.reply_error(&id, &RpcError::invalid_params(format!("bad tools/call params: {err}")));
            }
        };
        let Some((name, handler)) = self.server.handler(&params.name) else {
            let error = RpcError::invalid_params(format!("unknown tool: {}", params.name));
            return self.reply_error(&id, &error);
        };
        let job = Job {
            id: id.clone(),
            tool: name,
            handler,
            arguments: params.arguments.map(RawValue::to_owned),
            progress_token: params.meta.and_then(|m| m.progress_token).map(RawValue::to_owned),
        };
        if let Err(error) = self.dispatcher.dispatch(job) {
            tracing::warn!(id = %id, %error, "request refused");
            self.reply_error(&id, &error);
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

/// Takes the process's stdio for the protocol: duplicates fds 0 and 1
/// (close-on-exec) for the serve loop, then points fd 0 at `/dev/null` and
/// fd 1 at stderr, so that a stray `println!`, a library that prints, or a
/// child process that inherits stdio can never write into the protocol
/// stream or read protocol bytes.
pub(crate) fn take_stdio() -> io::Result<(File, File)> {
    io::stdout().flush()?;
    let input = io::stdin().as_fd().try_clone_to_owned()?;
    let output = io::stdout().as_fd().try_clone_to_owned()?;
    let null = File::open("/dev/null")?;
    rustix::stdio::dup2_stdin(&null)?;
    rustix::stdio::dup2_stdout(io::stderr())?;
    Ok((File::from(input), File::from(output)))
}

/// The protocol versions this server speaks, newest first.
pub(crate) fn negotiate(asked: Option<&str>) -> &'static str {
    PROTOCOL_VERSIONS.iter().find(|v| Some(**v) == asked).copied().unwrap_or(PROTOCOL_VERSIONS[0])
}
