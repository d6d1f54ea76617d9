//! One request in flight: its stream, its answer read under the limit,
//! and what a caller gets from it.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use h2::client::ResponseFuture;
use h2::{Reason, RecvStream, SendStream};
use mcp_framer_jsonrpc::{ErrorObject, Message, OwnedId};
use mcp_framer_stdio::{Keep, Preview};
use serde_json::Value;

use super::error::Error;
use super::shared::{Shared, bump};
use crate::wire::{self, SseReader};

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

pub(super) enum State {
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
    pub(super) id: OwnedId,
    pub(super) method: String,
    pub(super) stream: Option<SendStream<Bytes>>,
    pub(super) state: State,
    pub(super) sse: Option<SseReader>,
    pub(super) shared: Arc<Shared>,
    pub(super) max: usize,
    pub(super) deadline: tokio::time::Instant,
    pub(super) timeout: Duration,
    pub(super) finished: bool,
    /// The answer came before the request body was all sent.
    pub(super) body_unfinished: bool,
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
    pub(super) async fn head(&mut self) -> Result<http::Response<RecvStream>, Error> {
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

    pub(super) fn timed_out(&mut self) -> Error {
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
    pub(super) async fn error_from(&mut self, answer: http::Response<RecvStream>) -> Option<Error> {
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
