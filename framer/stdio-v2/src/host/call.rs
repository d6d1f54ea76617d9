//! One request in flight: its stream, its answer read under the limit,
//! and what a caller gets from it.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use h2::{Reason, SendStream};
use mcp_framer_jsonrpc::{ErrorObject, Message, OwnedId};
use mcp_framer_stdio::{Keep, Preview};
use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, mpsc, oneshot};

use super::body::{self, Piece};
use super::error::Error;
use super::shared::{Shared, bump};
use crate::wire;

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

/// Where a call's answer is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum State {
    /// Before the head.
    Waiting,
    /// A `200` JSON body is coming.
    Json { status: u16 },
    /// A `200` event stream is coming.
    Events { status: u16 },
    /// Answered, failed or cancelled.
    Done,
}

/// A request in flight: its stream. Dropping it before its response (or
/// calling [`Call::cancel`]) resets the stream, which cancels the request.
///
/// Its answer is taken off the connection by a task of its own as it
/// arrives, whether or not the call is read (see [`Client`](super::Client)
/// for the bound on what that holds).
pub struct Call {
    pub(super) id: OwnedId,
    pub(super) method: String,
    pub(super) stream: Option<SendStream<Bytes>>,
    pub(super) state: State,
    /// What the receiving task hands over.
    pub(super) pieces: mpsc::UnboundedReceiver<Piece>,
    /// Tells the receiving task to read the body (taken when sent).
    pub(super) demand: Option<oneshot::Sender<()>>,
    /// A piece taken early (the head, by `started` or while the body was
    /// being sent).
    pub(super) peeked: Option<Piece>,
    pub(super) shared: Arc<Shared>,
    pub(super) max: usize,
    pub(super) deadline: tokio::time::Instant,
    pub(super) timeout: Duration,
    pub(super) finished: bool,
    /// The answer came before the request body was all sent.
    pub(super) body_unfinished: bool,
    /// The call's place among [`HostConfig::max_calls`](super::HostConfig::max_calls).
    pub(super) slot: Option<OwnedSemaphorePermit>,
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

    /// Marks the call answered: its slot is given back.
    fn finish(&mut self) {
        self.finished = true;
        self.state = State::Done;
        self.slot = None;
    }

    /// Resets the stream if the call is not finished; counted as a
    /// cancellation when `cancel` is set.
    fn reset_as(&mut self, cancel: bool) {
        if !self.finished {
            if cancel {
                bump(&self.shared.counters.cancelled);
            }
            if let Some(stream) = self.stream.as_mut() {
                stream.send_reset(Reason::CANCEL);
            }
        }
        self.finish();
    }

    fn reset(&mut self) {
        self.reset_as(true);
    }

    /// The next piece of the answer, within the deadline; with `demand`,
    /// the body is asked for too.
    pub(super) async fn piece_as(&mut self, demand: bool) -> Result<Piece, Error> {
        if let Some(piece) = self.peeked.take() {
            return Ok(piece);
        }
        if demand && let Some(demand) = self.demand.take() {
            let _ = demand.send(());
        }
        match tokio::time::timeout_at(self.deadline, self.pieces.recv()).await {
            Err(_) => Err(self.timed_out()),
            Ok(Some(piece)) => Ok(piece),
            Ok(None) => {
                self.finish();
                Err(self.shared.closed("the answer's stream ended").await)
            }
        }
    }

    /// The next piece of the answer, the body asked for.
    pub(super) async fn piece(&mut self) -> Result<Piece, Error> {
        self.piece_as(true).await
    }

    /// Waits for the answer's head (its status), without reading its body:
    /// from then on the response is being sent (a JSON body waits in its
    /// stream's window until the call is read).
    pub async fn started(&mut self) -> Result<u16, Error> {
        if let Some(Piece::Head { status, .. }) = &self.peeked {
            return Ok(*status);
        }
        if self.state != State::Waiting {
            return Err(Error::Protocol { status: 0, detail: "the answer's head was already read".into() });
        }
        match self.piece_as(false).await? {
            Piece::Head { status, content_type } => {
                self.peeked = Some(Piece::Head { status, content_type });
                Ok(status)
            }
            other => Err(self.failure(other).await),
        }
    }

    /// The error a piece that ends the call early carries.
    pub(super) async fn failure(&mut self, piece: Piece) -> Error {
        match piece {
            Piece::TooLarge(seen) => self.too_large(seen),
            Piece::Failed(e) => {
                self.finish();
                self.shared.stream_failed(e, "the request's stream failed").await
            }
            Piece::Ended => {
                self.finish();
                self.shared.closed("the event stream ended without a response").await
            }
            Piece::Head { .. } | Piece::Body(_) | Piece::Event(..) => {
                self.finish();
                Error::Protocol { status: 0, detail: "the answer came out of order".into() }
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
        self.reset_as(false);
        Error::ResponseTooLarge { method: self.method.clone(), seen, max: self.max }
    }

    /// The error an answer that is not a success carries (its body read
    /// under the limit).
    pub(super) async fn error_from(&mut self, status: u16) -> Option<Error> {
        let bytes = match self.piece().await {
            Ok(Piece::Body(bytes)) => bytes,
            Ok(other) => return Some(self.failure(other).await),
            Err(e) => return Some(e),
        };
        self.finish();
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
            let state = self.state;
            if state == State::Done {
                return None;
            }
            let piece = match self.piece().await {
                Ok(piece) => piece,
                Err(e) => return Some(Err(e)),
            };
            match (state, piece) {
                (State::Waiting, Piece::Head { status, content_type }) => {
                    if status == 200 && body::is(&content_type, wire::EVENT_STREAM) {
                        self.state = State::Events { status };
                    } else if status == 200 && body::is(&content_type, wire::JSON) {
                        self.state = State::Json { status };
                    } else {
                        let error = self.error_from(status).await.unwrap_or(Error::Protocol {
                            status,
                            detail: format!("no JSON-RPC answer (content type {content_type:?})"),
                        });
                        self.finish();
                        return Some(Err(error));
                    }
                }
                (State::Json { status }, Piece::Body(bytes)) => {
                    self.finish();
                    return Some(self.final_message(bytes, status, Vec::new()).map(Item::Response));
                }
                (State::Events { status }, Piece::Event(event, permit)) => {
                    drop(permit);
                    let is_response = mcp_framer_jsonrpc::parse(&event)
                        .map(|m| matches!(m, Message::Response { .. } | Message::ErrorResponse { .. }))
                        .unwrap_or(false);
                    if is_response {
                        self.finish();
                        return Some(self.final_message(event, status, Vec::new()).map(Item::Response));
                    }
                    bump(&self.shared.counters.events);
                    return Some(Ok(Item::Notification(event)));
                }
                (_, piece) => return Some(Err(self.failure(piece).await)),
            }
        }
    }

    fn final_message(&self, bytes: Bytes, status: u16, notifications: Vec<Bytes>) -> Result<Response, Error> {
        bump(&self.shared.counters.responses);
        let message = mcp_framer_jsonrpc::parse(&bytes).map_err(|e| Error::Protocol {
            status,
            detail: format!("the response is not JSON-RPC ({e}): {}", Preview::new(&bytes, Keep::Head(256))),
        })?;
        let answered = message.id().map(|id| id.clone().into_owned());
        // An error about a request the server could not read says `null`.
        let null_error = answered.is_none() && matches!(message, Message::ErrorResponse { .. });
        if !null_error && answered.as_ref() != Some(&self.id) {
            return Err(Error::WrongId {
                expected: self.id.clone(),
                got: answered,
                preview: Preview::new(&bytes, Keep::Head(256)).to_text(),
            });
        }
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
