//! Receiving one call's answer: a task per call reads it off the
//! connection, giving window back as it goes (issue 37, defect 5: calls the
//! application never reads cannot hold up the others).
//!
//! What it holds is bounded per call:
//! * a JSON body is read once the call asks for it (its first
//!   [`Call::next`](super::Call::next) past the head); until then at most
//!   one stream window of it waits in h2, and the connection window the
//!   host announces, at least `(max_calls + 1) × stream_window`, covers
//!   that for every call in flight. Read, it is held as its chunks, at most
//!   [`max_receive`](super::HostConfig::max_receive) bytes (one more chunk
//!   and the call fails with `TooLarge`), and assembled once into an
//!   allocation of exactly its length (no growth chunk by chunk, no
//!   reservation from a declared `content-length`);
//! * an event stream: the partial event in its [`SseReader`] (at most
//!   `max_receive` + 6 bytes) and the events not yet taken by the
//!   application, at most `max_receive` bytes together (a budget of
//!   permits). When that budget is full the task stops reading: that
//!   stream alone waits for window, holding at most `stream_window` bytes
//!   of the connection's.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use h2::RecvStream;
use h2::client::ResponseFuture;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};

use super::shared::Shared;
use crate::wire::{self, SseReader};

/// What the receiving task hands the call, in order: a head, then a body,
/// or events and an end.
pub(super) enum Piece {
    /// The answer's head.
    Head {
        /// The HTTP status.
        status: u16,
        /// The `content-type`, as sent.
        content_type: String,
    },
    /// A whole body (any status but a `200` event stream).
    Body(Bytes),
    /// One event's data, and its share of the call's event budget (given
    /// back when the event is dropped).
    Event(Bytes, OwnedSemaphorePermit),
    /// The event stream ended.
    Ended,
    /// The body or an event passed the limit: the bytes seen then.
    TooLarge(u64),
    /// The stream failed (reset by the server, or the connection ended).
    Failed(h2::Error),
}

/// Whether `content_type` names `media_type` (case-insensitively, with or
/// without parameters such as `; charset=utf-8`).
pub(super) fn is(content_type: &str, media_type: &str) -> bool {
    content_type.split(';').next().unwrap_or("").trim().eq_ignore_ascii_case(media_type)
}

/// The permits one event takes from the call's budget of `max` bytes.
fn permits_for(len: usize, max: usize) -> u32 {
    len.clamp(1, max.max(1)).min(Semaphore::MAX_PERMITS).min(u32::MAX as usize) as u32
}

/// The event budget of a call whose limit is `max` bytes.
pub(super) fn event_budget(max: usize) -> Arc<Semaphore> {
    Arc::new(Semaphore::new(max.clamp(1, Semaphore::MAX_PERMITS.min(u32::MAX as usize))))
}

/// Receives one answer into `tx` until it ends, the call is dropped (`tx`
/// closed) or the stream fails.
pub(super) async fn receive(
    response: ResponseFuture,
    tx: mpsc::UnboundedSender<Piece>,
    demand: oneshot::Receiver<()>,
    max: usize,
    budget: Arc<Semaphore>,
    shared: Arc<Shared>,
) {
    let answer = tokio::select! {
        answer = response => answer,
        _ = tx.closed() => return,
    };
    let answer = match answer {
        Ok(answer) => answer,
        Err(e) => {
            let _ = tx.send(Piece::Failed(e));
            return;
        }
    };
    let status = answer.status().as_u16();
    let header = |name| answer.headers().get(name).and_then(|v: &http::HeaderValue| v.to_str().ok());
    let content_type = header(http::header::CONTENT_TYPE).unwrap_or("").to_owned();
    let declared = header(http::header::CONTENT_LENGTH).and_then(|v| v.parse::<u64>().ok());
    let events = status == 200 && is(&content_type, wire::EVENT_STREAM);
    if tx.send(Piece::Head { status, content_type }).is_err() {
        return;
    }
    if let Some(len) = declared
        && len > max as u64
    {
        let _ = tx.send(Piece::TooLarge(len));
        return;
    }
    let body = answer.into_body();
    if !events {
        // A body is read once the call asks for it: until then it waits in
        // its stream's window (at most `stream_window`, which the connection
        // window covers for every call in flight).
        tokio::select! {
            _ = demand => {}
            _ = tx.closed() => return,
        }
    }
    let end =
        if events { events_of(body, &tx, max, &budget, &shared).await } else { body_of(body, max, &shared).await };
    if let Some(end) = end {
        let _ = tx.send(end);
    }
}

/// The next chunk, its window given back and its bytes counted; `None` at
/// the end of the body.
async fn chunk(body: &mut RecvStream, shared: &Shared) -> Option<Result<Bytes, h2::Error>> {
    let chunk = body.data().await?;
    if let Ok(chunk) = &chunk {
        let _ = body.flow_control().release_capacity(chunk.len());
        shared.counters.body_bytes.fetch_add(chunk.len() as u64, Ordering::Relaxed);
    }
    Some(chunk)
}

/// A whole body of at most `max` bytes.
async fn body_of(mut body: RecvStream, max: usize, shared: &Shared) -> Option<Piece> {
    let mut chunks: Vec<Bytes> = Vec::new();
    let mut total = 0usize;
    loop {
        match chunk(&mut body, shared).await {
            None => break,
            Some(Err(e)) => return Some(Piece::Failed(e)),
            Some(Ok(chunk)) => {
                total += chunk.len();
                if total > max {
                    return Some(Piece::TooLarge(total as u64));
                }
                if !chunk.is_empty() {
                    chunks.push(chunk);
                }
            }
        }
    }
    Some(Piece::Body(assemble(chunks, total)))
}

/// One buffer of exactly `total` bytes from `chunks` (no copy for one).
fn assemble(mut chunks: Vec<Bytes>, total: usize) -> Bytes {
    if chunks.len() <= 1 {
        return chunks.pop().unwrap_or_default();
    }
    let mut whole = Vec::with_capacity(total);
    for chunk in &chunks {
        whole.extend_from_slice(chunk);
    }
    Bytes::from(whole)
}

/// An event stream's events, each within `max` and all those not yet taken
/// within the `budget`.
async fn events_of(
    mut body: RecvStream,
    tx: &mpsc::UnboundedSender<Piece>,
    max: usize,
    budget: &Arc<Semaphore>,
    shared: &Shared,
) -> Option<Piece> {
    let mut reader = SseReader::new(max);
    let mut out = Vec::new();
    loop {
        let chunk = tokio::select! {
            chunk = chunk(&mut body, shared) => chunk,
            _ = tx.closed() => return None,
        };
        let chunk = match chunk {
            None => return Some(Piece::Ended),
            Some(Err(e)) => return Some(Piece::Failed(e)),
            Some(Ok(chunk)) => chunk,
        };
        if let Err(too_large) = reader.push(&chunk, &mut out) {
            return Some(Piece::TooLarge(too_large.seen));
        }
        for event in out.drain(..) {
            let permits = permits_for(event.len(), max);
            let permit = tokio::select! {
                permit = Arc::clone(budget).acquire_many_owned(permits) => permit.ok()?,
                _ = tx.closed() => return None,
            };
            tx.send(Piece::Event(event, permit)).ok()?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types_compare_without_case_or_parameters() {
        assert!(is("application/json", wire::JSON));
        assert!(is("Application/JSON; charset=utf-8", wire::JSON));
        assert!(is(" text/event-stream ;charset=UTF-8", wire::EVENT_STREAM));
        assert!(!is("application/json-seq", wire::JSON));
        assert!(!is("text/plain", wire::JSON));
        assert!(!is("", wire::JSON));
    }

    #[test]
    fn bodies_are_assembled_into_exactly_their_length() {
        let chunks = vec![Bytes::from_static(b"ab"), Bytes::from_static(b"cde"), Bytes::from_static(b"f")];
        let whole = assemble(chunks, 6);
        assert_eq!(&whole[..], b"abcdef");
        assert_eq!(assemble(vec![Bytes::from_static(b"x")], 1), Bytes::from_static(b"x"));
        assert!(assemble(Vec::new(), 0).is_empty());
        assert_eq!(permits_for(0, 16), 1);
        assert_eq!(permits_for(100, 16), 16);
    }
}
