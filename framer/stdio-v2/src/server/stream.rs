//! One stream: its route, its body, its headers, handing the message to the
//! dispatcher, and sending what comes back within the client's window.

use std::future::poll_fn;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use h2::server::SendResponse;
use h2::{Reason, RecvStream, SendStream};
use http::{HeaderValue, Method, Request, StatusCode};
use mcp_framer_jsonrpc::{Encoder, ErrorObject, INVALID_REQUEST, Id, Message, OwnedId};
use mcp_framer_stdio::server::{Inlet, oversize_error};
use serde::Deserialize;

use super::body::{Assembling, BodyEnd, Share, read_body, skip_body};
use super::config::{Counters, bump};
use super::heads::{event_stream, json_response, status_only};
use super::listen::{ListenFilter, listen};
use super::routes::{Out, Refused, Routes, Waiting};
use crate::io::{Unsent, send_chunks};
use crate::wire::{self, Params, check_headers};

/// What every stream task shares.
#[derive(Debug)]
pub(super) struct Front {
    pub(super) max_body: usize,
    pub(super) assembling: Arc<Assembling>,
    pub(super) stall: Duration,
    pub(super) inlet: Inlet,
    pub(super) routes: Arc<Routes>,
    pub(super) counters: Arc<Counters>,
}

/// An answer the front gives itself (errors, refusals), as one JSON body.
fn error_body(id: Option<&OwnedId>, error: &ErrorObject) -> Bytes {
    let mut frame = Encoder::unlimited().error_response(id, error).unwrap_or_else(|_| {
        br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"error reply could not be encoded"}}"#.to_vec()
    });
    if frame.last() == Some(&b'\n') {
        frame.pop();
    }
    Bytes::from(frame)
}

impl Front {
    /// Serves one stream (see the [module](super) for the contract).
    pub(super) async fn handle(self: Arc<Self>, request: Request<RecvStream>, mut respond: SendResponse<Bytes>) {
        let (parts, mut body) = request.into_parts();
        if parts.uri.path() != wire::ENDPOINT || parts.method != Method::POST {
            bump(&self.counters.bad_routes);
            let mut response = status_only(StatusCode::NOT_FOUND);
            if parts.uri.path() == wire::ENDPOINT {
                *response.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
                response.headers_mut().insert(http::header::ALLOW, HeaderValue::from_static("POST"));
            }
            // Answered, then the body (if any) read to its end and thrown
            // away: a reset here would make some clients (curl) fail the
            // request instead of reading the answer.
            let ended = body.is_end_stream();
            let _ = respond.send_response(response, true);
            if !ended {
                skip_body(&mut body).await;
            }
            return;
        }
        let declared = parts
            .headers
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        let mut share = Share::new(&self.assembling);
        let bytes = match read_body(&mut body, declared, self.max_body, &mut share).await {
            Ok(bytes) => bytes,
            Err(BodyEnd::Busy { received }) => {
                bump(&self.counters.busy_bodies);
                drop(share);
                let max = self.assembling.max();
                tracing::warn!(max, "request bodies arriving at once over the budget; refused");
                let error = ErrorObject::new(
                    mcp_framer_jsonrpc::OVERLOADED,
                    format!(
                        "server overloaded: the request bodies arriving at once may hold {max} bytes; send it again later"
                    ),
                );
                self.send_whole(&mut respond, StatusCode::SERVICE_UNAVAILABLE, error_body(None, &error)).await;
                let skipped = received + skip_body(&mut body).await;
                self.counters.busy_bytes.fetch_add(skipped, Ordering::Relaxed);
                return;
            }
            Err(BodyEnd::Oversize { len, at_least, received }) => {
                drop(share);
                bump(&self.counters.oversize_bodies);
                tracing::warn!(len, at_least, max = self.max_body, "request body over the transport limit; refused");
                let error = oversize_error(len, at_least, self.max_body);
                self.send_whole(&mut respond, StatusCode::PAYLOAD_TOO_LARGE, error_body(None, &error)).await;
                let skipped = received + skip_body(&mut body).await;
                self.counters.oversize_bytes.fetch_add(skipped, Ordering::Relaxed);
                return;
            }
            Err(BodyEnd::Reset) => {
                drop(share);
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
                self.send_whole(&mut respond, StatusCode::BAD_REQUEST, error_body(id.as_ref(), &object)).await;
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
                self.send_whole(&mut respond, StatusCode::BAD_REQUEST, error_body(None, &object)).await;
                return;
            }
        };
        let id = message.id().map(Id::to_owned_id);
        let params = Params::read(message.payload());
        if let Err(problem) = check_headers(&parts.headers, method, &params, request) {
            bump(&self.counters.header_mismatches);
            tracing::warn!(?problem, method, "request headers refused");
            self.send_whole(&mut respond, StatusCode::BAD_REQUEST, error_body(id.as_ref(), &problem.error())).await;
            return;
        }
        let Some(id) = id else {
            let cancelled = (method == "notifications/cancelled").then(|| cancelled_id(message.payload()));
            drop(message);
            return self.notification(bytes, cancelled, share, respond).await;
        };
        if method == wire::LISTEN {
            let filter = ListenFilter::read(message.payload());
            drop(share);
            return listen(&self.routes, &self.counters, id, filter, respond, self.stall).await;
        }
        let waiting = match self.routes.enter(&id, params.progress_token()).await {
            Ok(waiting) => waiting,
            Err(Refused::Closed) => {
                let _ = respond.send_response(status_only(StatusCode::SERVICE_UNAVAILABLE), true);
                return;
            }
            Err(Refused::Duplicate(why)) => {
                bump(&self.counters.duplicate_ids);
                let object = ErrorObject::new(INVALID_REQUEST, why);
                self.send_whole(&mut respond, StatusCode::BAD_REQUEST, error_body(Some(&id), &object)).await;
                return;
            }
        };
        drop(message);
        bump(&self.counters.requests);
        let submitted = self.inlet.request(OwnedId::Number(waiting.key), bytes).await;
        drop(share);
        if !submitted {
            self.routes.leave(waiting.key);
            let _ = respond.send_response(status_only(StatusCode::SERVICE_UNAVAILABLE), true);
            return;
        }
        self.answer(id, waiting, respond).await;
    }

    /// A notification POST: `202`. `notifications/cancelled` (its request's
    /// id, when it names one) cancels the request under its key and resets
    /// the request's stream; others go to the dispatcher.
    async fn notification(
        &self,
        bytes: Vec<u8>,
        cancelled: Option<Option<OwnedId>>,
        share: Share,
        mut respond: SendResponse<Bytes>,
    ) {
        bump(&self.counters.notifications);
        let accepted = match cancelled {
            Some(id) => {
                // The client's id means nothing to the dispatcher: the
                // cancellation goes under the request's key.
                if let Some(key) = id.and_then(|id| self.routes.cancel_client_id(&id)) {
                    self.inlet.cancel(OwnedId::Number(key), "notifications/cancelled");
                }
                true
            }
            None => self.inlet.notification(bytes).await,
        };
        drop(share);
        let status = if accepted { StatusCode::ACCEPTED } else { StatusCode::SERVICE_UNAVAILABLE };
        let _ = respond.send_response(status_only(status), true);
    }

    /// Waits for the request's messages and sends them: JSON, or an event
    /// stream once a notification comes first. A reset by the client (or a
    /// stall) cancels the request; a response that was on its way is
    /// counted.
    async fn answer(&self, id: OwnedId, waiting: Waiting, mut respond: SendResponse<Bytes>) {
        let Waiting { key, mut rx, queued } = waiting;
        let mut stream: Option<SendStream<Bytes>> = None;
        loop {
            let out = tokio::select! {
                biased;
                out = rx.recv() => out,
                _ = poll_fn(|cx| match stream.as_mut() {
                    Some(stream) => stream.poll_reset(cx),
                    None => respond.poll_reset(cx),
                }) => return self.reset(key, &id, &mut rx),
            };
            match out {
                Some(Out::Event(piece)) => {
                    let sending = match stream.as_mut() {
                        Some(stream) => stream,
                        None => match respond.send_response(event_stream(), false) {
                            Ok(opened) => stream.insert(opened),
                            Err(_) => return self.reset(key, &id, &mut rx),
                        },
                    };
                    let sent = send_chunks(sending, piece.chunks.iter().cloned(), false, self.stall).await;
                    queued.fetch_sub(piece.backlog, Ordering::Relaxed);
                    if let Err(unsent) = sent {
                        return self.unsent(key, &id, unsent, stream.as_mut(), &mut rx);
                    }
                }
                Some(Out::Final { json, sse_head, status }) => {
                    let sent = match stream.as_mut() {
                        Some(stream) => {
                            let mut chunks = json.chunks.clone();
                            chunks[0] = sse_event_head(&sse_head, &chunks[0]);
                            chunks.push(Bytes::from_static(b"\n\n"));
                            send_chunks(stream, chunks, true, self.stall).await
                        }
                        None => match respond.send_response(json_response(status), false) {
                            Ok(opened) => {
                                send_chunks(stream.insert(opened), json.chunks.clone(), true, self.stall).await
                            }
                            Err(_) => Err(Unsent::Gone),
                        },
                    };
                    drop(json);
                    if let Err(unsent) = sent {
                        bump(&self.counters.responses_unsent);
                        if unsent == Unsent::Stalled {
                            bump(&self.counters.stalled_streams);
                            if let Some(stream) = stream.as_mut() {
                                stream.send_reset(Reason::CANCEL);
                            }
                        }
                        tracing::debug!(%id, ?unsent, "the response's stream ended before it was sent");
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

    /// A send stopped: a stall resets the stream; either way the request is
    /// cancelled.
    fn unsent(
        &self,
        key: i64,
        id: &OwnedId,
        unsent: Unsent,
        stream: Option<&mut SendStream<Bytes>>,
        rx: &mut tokio::sync::mpsc::UnboundedReceiver<Out>,
    ) {
        if unsent == Unsent::Stalled {
            bump(&self.counters.stalled_streams);
            tracing::warn!(%id, timeout = ?self.stall, "the client left a stream's window shut: stream reset");
            if let Some(stream) = stream {
                stream.send_reset(Reason::CANCEL);
            }
        }
        self.reset(key, id, rx)
    }

    /// The client reset the stream of request `key` (or it stalled): if it
    /// is still in flight, the dispatcher cancels it; a response already
    /// routed to the stream is counted as unsent.
    fn reset(&self, key: i64, id: &OwnedId, rx: &mut tokio::sync::mpsc::UnboundedReceiver<Out>) {
        rx.close();
        while let Ok(out) = rx.try_recv() {
            if matches!(out, Out::Final { .. }) {
                bump(&self.counters.responses_unsent);
            }
        }
        if !self.routes.leave(key) {
            return;
        }
        bump(&self.counters.resets);
        tracing::info!(%id, key, "request stream reset by the client: cancelling the request");
        self.inlet.cancel(OwnedId::Number(key), "stream reset");
    }

    /// Sends a whole JSON answer with `status`.
    async fn send_whole(&self, respond: &mut SendResponse<Bytes>, status: StatusCode, body: Bytes) {
        if let Ok(mut stream) = respond.send_response(json_response(status), false) {
            let _ = send_chunks(&mut stream, [body], true, self.stall).await;
        }
    }
}

/// The first chunk of a response as an SSE event: `data: ` and the client
/// id's head, then what followed the head in the JSON chunk.
fn sse_event_head(sse_head: &Bytes, first: &Bytes) -> Bytes {
    // `first` starts with the JSON head (`{"jsonrpc":"2.0","id":<id>`), which
    // `sse_head` repeats after `data: `.
    let json_head = sse_head.len() - 6;
    let mut event = Vec::with_capacity(sse_head.len() + first.len() - json_head.min(first.len()));
    event.extend_from_slice(sse_head);
    event.extend_from_slice(&first[json_head.min(first.len())..]);
    Bytes::from(event)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(frame: &str) -> Option<mcp_framer_jsonrpc::RawJson<'_>> {
        mcp_framer_jsonrpc::parse(frame.as_bytes()).unwrap().payload()
    }

    #[test]
    fn a_cancellation_names_its_request() {
        let cancelled =
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a","reason":"r"}}"#;
        assert_eq!(cancelled_id(payload(cancelled)), Some(Id::from("a".to_owned())));
        assert_eq!(cancelled_id(payload(r#"{"jsonrpc":"2.0","method":"notifications/cancelled"}"#)), None);
    }

    #[test]
    fn a_response_becomes_one_event_with_the_same_bytes() {
        let head = Bytes::from_static(br#"data: {"jsonrpc":"2.0","id":"x""#);
        let first = Bytes::from_static(br#"{"jsonrpc":"2.0","id":"x","result":{}}"#);
        assert_eq!(&sse_event_head(&head, &first)[..], br#"data: {"jsonrpc":"2.0","id":"x","result":{}}"#);
    }
}
