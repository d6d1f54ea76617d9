//! Where the dispatcher's frames go: the requests in flight under the
//! front's keys, the listen streams, and the pump that routes each
//! [`OutFrame`] the dispatcher writes.
//!
//! # Contract
//!
//! * Every request the front hands over gets a **key** of its own (a number
//!   never used before in the session) and a slot holding the client's id.
//!   The client's id (and progress token) is in flight from the moment the
//!   request is accepted until its stream ends (answered, reset, cancelled);
//!   the key is the dispatcher's, so a client may reuse an id at once after
//!   a reset: the new request has a new key and can never meet the old one's
//!   state, nor receive its answer.
//! * A **response** (its id is the key) goes to its slot, the client's id put
//!   back in place of the key without copying the frame; one whose slot is
//!   gone (reset, cancelled) is dropped and counted in
//!   [`V2Report::late_responses`](super::V2Report::late_responses).
//! * A request's **notifications** (tagged with its key: progress, a tool's
//!   log messages) go on its stream, up to [`V2Config::stream_backlog`](super::V2Config::stream_backlog)
//!   bytes waiting (more are dropped and counted); **change notifications**
//!   (`notifications/*/list_changed`) go to every listen stream that asked
//!   for them, each with its subscription id, each listener within its own
//!   backlog (a listener that misses one is counted, whoever else got it).
//! * Every frame keeps the dispatcher's budget until its stream has sent it
//!   (or dropped it), so what waits for the client's windows is within the
//!   dispatcher's budgets.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use http::StatusCode;
use mcp_framer_jsonrpc::{
    ErrorObject, INVALID_REQUEST, METHOD_NOT_FOUND, OwnedId, PARSE_ERROR, UNSUPPORTED_PROTOCOL_VERSION,
};
use mcp_framer_stdio::server::{OutFrame, Outlet};
use tokio::sync::mpsc;

use super::config::{Counters, bump};

/// What a stream is sent: the bytes, and the dispatcher's frame whose budget
/// they hold until the stream is done with them.
#[derive(Debug)]
pub(super) struct Piece {
    /// The chunks to send, in order (zero copy of the frame where it is
    /// large).
    pub(super) chunks: Vec<Bytes>,
    /// Bytes counted against the stream's backlog (events only).
    pub(super) backlog: usize,
    pub(super) _frame: Option<OutFrame>,
}

/// What the dispatcher wrote that a stream waits for.
#[derive(Debug)]
pub(super) enum Out {
    /// A notification for the stream (a request's progress or message; on
    /// a listener, a change), as one SSE event.
    Event(Piece),
    /// The request's response, with the HTTP status it gets: the JSON
    /// (`json`) and the same as an SSE event (`sse`), whichever the stream
    /// needs.
    Final { json: Piece, sse_head: Bytes, status: StatusCode },
}

/// A request in flight.
#[derive(Debug)]
struct Slot {
    client_id: OwnedId,
    token: Option<String>,
    tx: mpsc::UnboundedSender<Out>,
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
struct Table {
    next_key: i64,
    /// Key → slot.
    slots: HashMap<i64, Slot>,
    /// The client's ids in flight → key.
    ids: HashMap<OwnedId, i64>,
    tokens: HashSet<String>,
    listeners: Vec<Listener>,
    closed: bool,
}

/// The receiving end a stream waits on, and what it holds in the table.
#[derive(Debug)]
pub(super) struct Waiting {
    pub(super) key: i64,
    pub(super) rx: mpsc::UnboundedReceiver<Out>,
    pub(super) queued: Arc<AtomicUsize>,
}

/// Why a request was not entered.
#[derive(Debug)]
pub(super) enum Refused {
    /// The session is ending.
    Closed,
    /// Its id or token is in flight: the message says which.
    Duplicate(String),
}

/// The routes, shared by the streams and the pump.
#[derive(Debug)]
pub(super) struct Routes {
    table: Mutex<Table>,
    /// Told whenever a request leaves the table.
    left: tokio::sync::Notify,
    backlog: usize,
    max_listeners: usize,
    counters: Arc<Counters>,
}

impl Routes {
    pub(super) fn new(backlog: usize, max_listeners: usize, counters: Arc<Counters>) -> Routes {
        Routes {
            table: Mutex::new(Table::default()),
            left: tokio::sync::Notify::new(),
            backlog,
            max_listeners,
            counters,
        }
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Enters a request: its key, or why not. An id (or token) in flight
    /// gets a short wait first: a client that resets a stream and reuses its
    /// id at once sends the `RST_STREAM` before the new `HEADERS`, but the
    /// old stream's task may not have seen the reset yet.
    pub(super) async fn enter(&self, client_id: &OwnedId, token: Option<&str>) -> Result<Waiting, Refused> {
        let until = tokio::time::Instant::now() + REUSE_WAIT;
        loop {
            let left = self.left.notified();
            match self.try_enter(client_id, token) {
                Err(Refused::Duplicate(why)) if tokio::time::Instant::now() < until => {
                    if tokio::time::timeout_at(until, left).await.is_err() {
                        return Err(Refused::Duplicate(why));
                    }
                }
                entered => return entered,
            }
        }
    }

    fn try_enter(&self, client_id: &OwnedId, token: Option<&str>) -> Result<Waiting, Refused> {
        let mut table = self.table();
        if table.closed {
            return Err(Refused::Closed);
        }
        if table.ids.contains_key(client_id) {
            return Err(Refused::Duplicate(format!("request id {client_id} is already in flight")));
        }
        if let Some(token) = token.filter(|token| table.tokens.contains(*token)) {
            return Err(Refused::Duplicate(format!("progress token {token} is already in use by a request in flight")));
        }
        table.next_key += 1;
        let key = table.next_key;
        let (tx, rx) = mpsc::unbounded_channel();
        let queued = Arc::new(AtomicUsize::new(0));
        let token = token.map(str::to_owned);
        if let Some(token) = &token {
            table.tokens.insert(token.clone());
        }
        table.ids.insert(client_id.clone(), key);
        table.slots.insert(key, Slot { client_id: client_id.clone(), token, tx, queued: Arc::clone(&queued) });
        Ok(Waiting { key, rx, queued })
    }

    /// Removes the request under `key` (its stream is done); true if it was
    /// still there.
    pub(super) fn leave(&self, key: i64) -> bool {
        let left = self.table().remove(key).is_some();
        self.left.notify_waiters();
        left
    }

    /// The key of the client's request `client_id`, removing it (a
    /// `notifications/cancelled` POST: its stream is then reset).
    pub(super) fn cancel_client_id(&self, client_id: &OwnedId) -> Option<i64> {
        let mut table = self.table();
        let key = *table.ids.get(client_id)?;
        table.remove(key);
        drop(table);
        self.left.notify_waiters();
        Some(key)
    }

    /// Enters a listen stream (its request's `id`), or `None` when
    /// [`V2Config::max_listeners`](super::V2Config::max_listeners) are open
    /// or the session is ending.
    pub(super) fn listen(
        &self,
        id: &OwnedId,
        methods: Vec<&'static str>,
    ) -> Option<(mpsc::UnboundedReceiver<Out>, Arc<AtomicUsize>)> {
        let mut table = self.table();
        if table.closed || table.listeners.len() >= self.max_listeners {
            return None;
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let queued = Arc::new(AtomicUsize::new(0));
        table.listeners.push(Listener { id: id.clone(), tx, methods, queued: Arc::clone(&queued) });
        Some((rx, queued))
    }

    pub(super) fn unlisten(&self, id: &OwnedId) {
        self.table().listeners.retain(|listener| &listener.id != id);
    }

    /// The session is ending: every waiting stream sees its route gone.
    pub(super) fn close(&self) {
        let mut table = self.table();
        table.closed = true;
        table.listeners.clear();
        table.slots.clear();
        table.ids.clear();
        table.tokens.clear();
    }

    /// Routes one frame the dispatcher wrote (see the [module](self)).
    pub(super) fn route(&self, frame: OutFrame) {
        if let Some(key) = frame.request().and_then(key_of) {
            return self.route_notification(Some(key), frame);
        }
        match response_key(frame.bytes()) {
            Some(Ok((key, after))) => self.route_response(key, after, frame),
            Some(Err(())) => {
                bump(&self.counters.late_responses);
                tracing::warn!(frame = %String::from_utf8_lossy(&frame.bytes()[..frame.bytes().len().min(200)]),
                    "a response without a key from the dispatcher: no stream to route it to");
            }
            None => self.route_notification(None, frame),
        }
    }

    fn route_response(&self, key: i64, after: usize, mut frame: OutFrame) {
        let slot = self.table().remove(key);
        self.left.notify_waiters();
        let Some(slot) = slot else {
            bump(&self.counters.late_responses);
            tracing::debug!(key, "late response dropped: no stream waits for it");
            return;
        };
        let status = status_of(frame.bytes(), after);
        let head = id_head(&slot.client_id);
        let mut bytes = frame.take_bytes();
        // The frame without its `\n`, from just after the key.
        bytes.pop();
        let rest = Bytes::from(bytes).slice(after..);
        let (chunks, frame) = if rest.len() <= SMALL {
            let mut whole = Vec::with_capacity(head.len() + rest.len());
            whole.extend_from_slice(&head);
            whole.extend_from_slice(&rest);
            (vec![Bytes::from(whole)], None)
        } else {
            (vec![head.clone(), rest], Some(frame))
        };
        let json = Piece { chunks, backlog: 0, _frame: frame };
        let mut sse_head = Vec::with_capacity(head.len() + 6);
        sse_head.extend_from_slice(b"data: ");
        sse_head.extend_from_slice(&head);
        let _ = slot.tx.send(Out::Final { json, sse_head: Bytes::from(sse_head), status });
    }

    fn route_notification(&self, key: Option<i64>, frame: OutFrame) {
        let method = method_of(frame.bytes());
        if method.as_deref().is_some_and(is_change) || key.is_none() {
            return self.broadcast(method.as_deref().unwrap_or_default(), frame);
        }
        let table = self.table();
        let slot = key.and_then(|key| table.slots.get(&key));
        match slot {
            Some(slot) if slot.queued.load(Ordering::Relaxed) + frame.bytes().len() <= self.backlog => {
                let len = frame.bytes().len();
                slot.queued.fetch_add(len, Ordering::Relaxed);
                let event = sse_event(frame.bytes());
                let _ = slot.tx.send(Out::Event(Piece { chunks: vec![event], backlog: len, _frame: Some(frame) }));
            }
            Some(_) => bump(&self.counters.progress_dropped),
            None => {
                bump(&self.counters.notifications_dropped);
                tracing::debug!(?method, "a notification of a request no stream waits for; dropped");
            }
        }
    }

    fn broadcast(&self, method: &str, frame: OutFrame) {
        let table = self.table();
        let mut delivered = false;
        for listener in table.listeners.iter().filter(|l| l.methods.contains(&method)) {
            let Some(tagged) = with_subscription_id(frame.bytes(), &listener.id) else { continue };
            if listener.queued.load(Ordering::Relaxed) + tagged.len() > self.backlog {
                bump(&self.counters.listener_drops);
                continue;
            }
            listener.queued.fetch_add(tagged.len(), Ordering::Relaxed);
            let len = tagged.len();
            let piece = Piece { chunks: vec![sse_event(&tagged)], backlog: len, _frame: None };
            delivered |= listener.tx.send(Out::Event(piece)).is_ok();
        }
        if !delivered {
            bump(&self.counters.notifications_dropped);
            tracing::debug!(method, "server notification with no stream that wants it; dropped");
        }
    }
}

impl Table {
    fn remove(&mut self, key: i64) -> Option<Slot> {
        let slot = self.slots.remove(&key)?;
        self.ids.remove(&slot.client_id);
        if let Some(token) = &slot.token {
            self.tokens.remove(token);
        }
        Some(slot)
    }
}

/// How long a request whose id (or token) is in flight waits for it to
/// leave before it is refused.
const REUSE_WAIT: std::time::Duration = std::time::Duration::from_millis(250);

/// Below this, a response is copied once into one DATA chunk rather than
/// sent as the client id's head plus a slice of the frame.
const SMALL: usize = 16 << 10;

/// The prefix of every frame the dispatcher's encoder writes with an id.
const ID_PREFIX: &[u8] = br#"{"jsonrpc":"2.0","id":"#;

/// `{"jsonrpc":"2.0","id":<client id>` (the rest of the frame follows).
fn id_head(id: &OwnedId) -> Bytes {
    let mut head = ID_PREFIX.to_vec();
    // An id always serializes.
    let _ = serde_json::to_writer(&mut head, id);
    Bytes::from(head)
}

/// For a response frame (it has an id): `Ok((key, offset just after the
/// key))`, or `Err` for a `null` or non-numeric id; `None` for a frame
/// without an id (a notification).
fn response_key(frame: &[u8]) -> Option<Result<(i64, usize), ()>> {
    let rest = frame.strip_prefix(ID_PREFIX)?;
    let digits = rest.iter().position(|b| !(b.is_ascii_digit() || *b == b'-')).unwrap_or(rest.len());
    let key = std::str::from_utf8(&rest[..digits]).ok().and_then(|d| d.parse::<i64>().ok());
    Some(key.map(|key| (key, ID_PREFIX.len() + digits)).ok_or(()))
}

fn key_of(id: &OwnedId) -> Option<i64> {
    match id {
        OwnedId::Number(key) => Some(*key),
        OwnedId::Str(_) => None,
    }
}

/// A notification's method.
fn method_of(frame: &[u8]) -> Option<String> {
    let message = mcp_framer_jsonrpc::parse(frame.strip_suffix(b"\n").unwrap_or(frame)).ok()?;
    message.method().map(str::to_owned)
}

/// Change notifications: the listen stream's, never a request's.
fn is_change(method: &str) -> bool {
    method.starts_with("notifications/") && method.ends_with("/list_changed")
}

/// `data: <frame>\n\n` for a frame (its `\n` dropped).
fn sse_event(frame: &[u8]) -> Bytes {
    crate::wire::sse_event(frame.strip_suffix(b"\n").unwrap_or(frame))
}

/// The HTTP status of a response frame whose id ends at `after` (the
/// encoder writes `result` or `error` right after the id): `200` for a
/// result; for an error Streamable HTTP's (-32601 `404`; -32022, -32600,
/// -32700 `400`; ours: any other `200`).
pub(super) fn status_of(frame: &[u8], after: usize) -> StatusCode {
    if !frame.get(after..).is_some_and(|rest| rest.starts_with(br#","error":"#)) {
        return StatusCode::OK;
    }
    let error = mcp_framer_jsonrpc::parse(frame.strip_suffix(b"\n").unwrap_or(frame))
        .ok()
        .and_then(|message| message.payload().and_then(|e| serde_json::from_str::<ErrorObject>(e.get()).ok()));
    match error.map(|e| e.code) {
        Some(METHOD_NOT_FOUND) => StatusCode::NOT_FOUND,
        Some(UNSUPPORTED_PROTOCOL_VERSION | INVALID_REQUEST | PARSE_ERROR) => StatusCode::BAD_REQUEST,
        _ => StatusCode::OK,
    }
}

/// Takes the dispatcher's frames and routes each until the dispatcher is
/// done; then every waiting stream sees its route gone.
pub(super) async fn pump(routes: Arc<Routes>, mut outlet: Outlet) {
    while let Some(frame) = outlet.next().await {
        routes.route(frame);
    }
    routes.close();
    // The outlet lives until here: dropping it earlier would be a failed
    // output for the dispatcher.
    drop(outlet);
}

/// `frame` (a notification) with `params._meta["io.modelcontextprotocol/subscriptionId"]` set.
pub(super) fn with_subscription_id(frame: &[u8], id: &OwnedId) -> Option<Vec<u8>> {
    let frame = frame.strip_suffix(b"\n").unwrap_or(frame);
    let mut value: serde_json::Value = serde_json::from_slice(frame).ok()?;
    let params = value.as_object_mut()?.entry("params").or_insert_with(|| serde_json::json!({}));
    let meta = params.as_object_mut()?.entry("_meta").or_insert_with(|| serde_json::json!({}));
    meta.as_object_mut()?.insert("io.modelcontextprotocol/subscriptionId".into(), serde_json::to_value(id).ok()?);
    serde_json::to_vec(&value).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_response_key_is_read_and_a_notification_has_none() {
        assert_eq!(response_key(br#"{"jsonrpc":"2.0","id":17,"result":{}}"#), Some(Ok((17, 24))));
        assert_eq!(response_key(br#"{"jsonrpc":"2.0","id":null,"error":{}}"#), Some(Err(())));
        assert_eq!(response_key(br#"{"jsonrpc":"2.0","method":"x"}"#), None);
        assert_eq!(&id_head(&OwnedId::from("a\"b"))[..], br#"{"jsonrpc":"2.0","id":"a\"b""#);
    }

    #[test]
    fn error_responses_take_the_streamable_http_status() {
        let error = |code: i64| format!(r#"{{"jsonrpc":"2.0","id":1,"error":{{"code":{code},"message":"m"}}}}"#);
        assert_eq!(status_of(error(-32601).as_bytes(), 23), StatusCode::NOT_FOUND);
        assert_eq!(status_of(error(-32600).as_bytes(), 23), StatusCode::BAD_REQUEST);
        assert_eq!(status_of(error(-32022).as_bytes(), 23), StatusCode::BAD_REQUEST);
        assert_eq!(status_of(error(-32603).as_bytes(), 23), StatusCode::OK);
        let result = br#"{"jsonrpc":"2.0","id":1,"result":{"error":{"code":-32601}}}"#;
        assert_eq!(status_of(result, 23), StatusCode::OK);
    }

    #[test]
    fn change_notifications_are_told_apart() {
        assert!(is_change("notifications/tools/list_changed"));
        assert!(!is_change("notifications/progress"));
        assert!(!is_change("notifications/message"));
    }
}
