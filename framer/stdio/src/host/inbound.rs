//! What the reader hands over: owned messages ([`Received`]) and reports of
//! what it skipped ([`SkippedFrame`]).

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;

use std::pin::Pin;
use std::task::{Context, Poll};

use serde::Deserialize;
use tokio::sync::mpsc::{self, error::TryRecvError};

use super::config::DEFAULT_EXCERPT;
use super::pool::Pool;
use crate::bound::Held;
use crate::head::Head;
use crate::{Keep, Preview};
use mcp_framer_jsonrpc::{Kind, OwnedId, ParseError};

/// A message received from the server, owning a copy of its frame.
///
/// The reader copies each frame once, after framing and classification,
/// because the queue outlives the framer's buffer: the messages of one read
/// are copied into one shared buffer and handed over as one batch, each
/// [`Received`] a range of it (the buffer is freed when the last of them is
/// dropped). The routing fields were parsed by
/// [`mcp_framer_jsonrpc::parse`]; the payload (`params`,
/// `result` or `error`) was checked to be well-formed JSON but not built:
/// [`payload`](Received::payload) returns its raw text, a slice of the frame,
/// and [`deserialize_payload`](Received::deserialize_payload) builds whatever
/// type the application wants from it.
///
/// Clones and comparisons concern the message only: a clone is the
/// application's own copy of the frame and does not count against the queue's
/// byte bound.
pub struct Received {
    frames: Arc<Frames>,
    head: Head,
    /// The frame's bytes counted against the queue's byte bound while this
    /// message lives, when it was queued on its own (a batch's bytes are held
    /// by its shared buffer); `None` otherwise, and for clones.
    queued: Option<Held>,
}

/// The buffer a [`Received`] is a range of: one frame's copy, or the frames
/// of one read, with the bytes they count against the queue's byte bound
/// (given back when the last message of the buffer is dropped). A batch's
/// buffer then goes back to its reader's [`Pool`], emptied.
#[derive(Debug)]
pub(crate) struct Frames {
    bytes: Vec<u8>,
    _held: Option<Held>,
    pool: Option<Arc<Pool<Inbound>>>,
}

impl Frames {
    /// A buffer of frames, holding `held` until it is freed.
    pub(crate) fn new(bytes: Vec<u8>, held: Option<Held>) -> Arc<Frames> {
        Arc::new(Frames { bytes, _held: held, pool: None })
    }

    /// A batch's buffer of frames, holding `held` until its last message is
    /// dropped, when the buffer goes back to `pool`.
    pub(crate) fn pooled(bytes: Vec<u8>, held: Held, pool: &Arc<Pool<Inbound>>) -> Arc<Frames> {
        Arc::new(Frames { bytes, _held: Some(held), pool: Some(Arc::clone(pool)) })
    }
}

impl Drop for Frames {
    fn drop(&mut self) {
        // Before `_held` is given back: by the time the bound has room again,
        // the buffer is in the pool (or freed).
        if let Some(pool) = &self.pool {
            pool.give_buffer(std::mem::take(&mut self.bytes));
        }
    }
}

impl Clone for Received {
    fn clone(&self) -> Self {
        let mut head = self.head.clone();
        head.frame = 0..head.frame.len();
        Received { frames: Frames::new(self.frame().to_vec(), None), head, queued: None }
    }
}

impl PartialEq for Received {
    fn eq(&self, other: &Self) -> bool {
        // The routing fields are parsed from the frame: equal frames, equal messages.
        self.frame() == other.frame()
    }
}

impl Eq for Received {}

impl Received {
    /// Copies `frame` and the routing fields of its parsed `message`.
    #[cfg(test)]
    pub(crate) fn new(frame: &[u8], message: &mcp_framer_jsonrpc::Message<'_>) -> Received {
        Received::copied(frame, Head::new(0, frame, message))
    }

    /// A copy of its own of the message `head` describes in `bytes`.
    pub(crate) fn copied_out(bytes: &[u8], head: Head) -> Received {
        let frame = &bytes[head.frame.clone()];
        Received::copied(frame, head.at(0))
    }

    /// A copy of its own of `frame`, which `head` describes.
    pub(crate) fn copied(frame: &[u8], head: Head) -> Received {
        Received { frames: Frames::new(frame.to_vec(), None), head, queued: None }
    }

    /// The message `head` describes, at `at` in `storage` (a frame's storage
    /// taken from the framer: no copy). The storage goes back to `pool`
    /// once the last clone is dropped (the pool keeps it only while its
    /// reader has a frame in progress).
    pub(crate) fn owned(storage: Vec<u8>, at: usize, head: Head, pool: &Arc<Pool<Inbound>>) -> Received {
        let frames = Arc::new(Frames { bytes: storage, _held: None, pool: Some(Arc::clone(pool)) });
        Received { frames, head: head.at(at), queued: None }
    }

    /// The message `head` describes in `frames` (a shared buffer).
    pub(crate) fn in_frames(frames: &Arc<Frames>, head: Head) -> Received {
        Received { frames: Arc::clone(frames), head, queued: None }
    }

    /// Counts this message's frame against the queue's byte bound until it
    /// is dropped.
    pub(crate) fn hold(&mut self, queued: Held) {
        self.queued = Some(queued);
    }

    /// Request, notification, response or error response.
    pub fn kind(&self) -> Kind {
        self.head.kind
    }

    /// The id (requests and responses; error responses unless `null`).
    pub fn id(&self) -> Option<&OwnedId> {
        self.head.id.as_ref()
    }

    /// The method (requests and notifications).
    pub fn method(&self) -> Option<&str> {
        self.head.method(&self.frames.bytes)
    }

    /// The raw JSON text of `params` (if present), `result` or `error`,
    /// exactly as the server wrote it.
    pub fn payload(&self) -> Option<&str> {
        self.head.payload(&self.frames.bytes)
    }

    /// Deserializes the payload into `T` (`null` when there is none).
    ///
    /// ```
    /// # use mcp_framer_stdio::host::Received;
    /// # fn show(received: &Received) -> serde_json::Result<()> {
    /// let params: serde_json::Value = received.deserialize_payload()?;
    /// # Ok(()) }
    /// ```
    pub fn deserialize_payload<'a, T: Deserialize<'a>>(&'a self) -> serde_json::Result<T> {
        serde_json::from_str(self.payload().unwrap_or("null"))
    }

    /// The whole frame, without its `\n`.
    pub fn frame(&self) -> &[u8] {
        &self.frames.bytes[self.head.frame.clone()]
    }

    /// Takes the frame (a copy of it when other messages share its buffer).
    /// Its bytes stop counting against the queue's byte bound
    /// ([`Overload::max_queued_bytes`](super::Overload::max_queued_bytes))
    /// once the last message of its buffer is dropped.
    pub fn into_frame(self) -> Box<[u8]> {
        self.frame().into()
    }
}

impl fmt::Debug for Received {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Received")
            .field("kind", &self.head.kind)
            .field("id", &self.head.id)
            .field("method", &self.method())
            .field("frame_len", &self.head.frame.len())
            .field("frame", &Preview::new(self.frame(), Keep::Head(DEFAULT_EXCERPT)))
            .finish()
    }
}

/// Something the reader discarded and reports. The session goes on; each is
/// also counted in the [metrics](super::MetricsSnapshot).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum SkippedFrame {
    /// A frame over the transport limit was discarded up to its `\n`
    /// ([`OversizePolicy::Skip`](mcp_framer::OversizePolicy::Skip)). Never
    /// parsed whole: its id is recovered from a bounded head and tail of it
    /// when that is safe ([`recover_response_id`](mcp_framer_jsonrpc::recover_response_id)),
    /// and then the request it answered fails at once with
    /// [`RequestError::Oversize`](super::RequestError::Oversize); otherwise
    /// that request ends at its deadline, its error saying an oversize frame
    /// was skipped while it waited.
    Oversize {
        /// The frame's exact length in bytes.
        len: u64,
        /// The transport limit it passed, in bytes
        /// ([`Config::max_frame`](mcp_framer::Config::max_frame)).
        max: u64,
        /// The id of the response it was, when recovered. A
        /// [`Connection`](super::Connection) user fails the request with this
        /// id at once; a [`Session`](super::Session) does so itself.
        id: Option<OwnedId>,
    },
    /// A line that does not even start like JSON (first non-blank byte not
    /// `{` or `[`): typically a log line a server printed on stdout.
    NotJson {
        /// The line's length in bytes.
        len: usize,
        /// Its first bytes (at most [`SessionConfig::excerpt`](super::SessionConfig::excerpt)).
        excerpt: Preview,
    },
    /// A frame that is not a valid JSON-RPC message (malformed JSON, invalid
    /// UTF-8, a batch, a wrong `jsonrpc`...). The host never answers it: an
    /// error reply to a broken response is how reply storms start.
    Invalid {
        /// Why the parser rejected it.
        error: ParseError,
        /// The frame's length in bytes.
        len: usize,
        /// Its first bytes (at most [`SessionConfig::excerpt`](super::SessionConfig::excerpt)).
        excerpt: Preview,
    },
    /// Stdout closed in the middle of a frame; the partial frame is never
    /// delivered.
    Truncated {
        /// Bytes of the partial frame.
        len: u64,
        /// Whether it was an oversize frame being discarded.
        oversize: bool,
    },
}

/// What the reader hands to the application through the inbound queue.
#[derive(Debug)]
#[non_exhaustive]
pub enum Inbound {
    /// A request from the server; answer it with
    /// [`Session::respond`](super::Session::respond) or
    /// [`Session::respond_error`](super::Session::respond_error).
    Request(Received),
    /// A notification from the server.
    Notification(Received),
    /// A response or error response. Only from a
    /// [`Connection`](super::Connection) or a standalone
    /// [`Reader`](super::Reader) (a [`Session`](super::Session) routes
    /// responses to the requests waiting for them instead).
    Response(Received),
    /// Something the reader discarded. Reports are queued only when there is
    /// room at once: they never make the reader wait and never trigger the
    /// overload policy (the metrics count them all). The exception is the
    /// report of an oversize response whose recovered id is owed, on a
    /// [`Connection`](super::Connection): it stands for that response, and is
    /// never refused (see [`Overload`](super::Overload)).
    Skipped(SkippedFrame),
}

/// What one item costs in the queue's byte bound
/// ([`Overload::max_queued_bytes`](super::Overload::max_queued_bytes)) besides
/// its frame's bytes: the size of the item itself on this platform. So a
/// flood of tiny messages is bounded like a few large ones.
pub const ITEM_OVERHEAD: usize = std::mem::size_of::<Inbound>();

/// A queue of [`Inbound`] items from a [`Reader`](super::Reader) to the
/// application, bounded by bytes: the reader counts every item against
/// [`Overload::max_queued_bytes`](super::Overload::max_queued_bytes) (its
/// frame plus [`ITEM_OVERHEAD`]) until the application drops it, and applies
/// the [`Overload`](super::Overload) rules to what does not fit.
///
/// The reader hands over each read's messages as one batch: one queue
/// operation per read, not per message. The application still takes them one
/// by one ([`InboundQueue::recv`], or as a [`Stream`](futures_core::Stream))
/// or many at a time ([`InboundQueue::recv_many`]).
pub fn inbound_channel() -> (InboundSender, InboundQueue) {
    let (tx, rx) = mpsc::unbounded_channel();
    (InboundSender(tx), InboundQueue { rx, current: VecDeque::new(), held: None, pool: None })
}

/// The reader's end of an [`inbound_channel`]: give it to
/// [`Reader::new`](super::Reader::new).
#[derive(Debug)]
pub struct InboundSender(pub(crate) mpsc::UnboundedSender<Box<Sent>>);

/// What one queue operation carries: items in order, and the bytes they
/// hold in the bound that no message of theirs holds (reports), given back
/// once the application has taken the last of them; a batch's item vector
/// then goes back, emptied, to the `pool` it names. Sent boxed: a channel
/// keeps a block of 32 slots per connection, idle or not, so a slot is a
/// pointer rather than the batch.
#[derive(Debug)]
pub(crate) struct Sent {
    pub(crate) items: Vec<Inbound>,
    pub(crate) held: Option<Held>,
    pub(crate) pool: Option<Arc<Pool<Inbound>>>,
}

/// The application's end of an [`inbound_channel`]: server requests,
/// notifications and reports, in the order the server wrote them. Also a
/// [`Stream`](futures_core::Stream) of them, for `futures` and
/// `tokio-stream` combinators.
#[derive(Debug)]
pub struct InboundQueue {
    rx: mpsc::UnboundedReceiver<Box<Sent>>,
    /// The rest of the batch being taken.
    current: VecDeque<Inbound>,
    /// The bytes the batch being taken holds for its reports.
    held: Option<Held>,
    /// Where the batch's item vector goes once it is all taken.
    pool: Option<Arc<Pool<Inbound>>>,
}

impl InboundQueue {
    /// The next item of the batch being taken; once it is all taken, its
    /// reports' bytes go back to the bound and its item vector to the
    /// reader's pool (the queue keeps none: an idle connection's queue holds
    /// no vector).
    #[inline]
    fn next_taken(&mut self) -> Option<Inbound> {
        let item = self.current.pop_front();
        if self.current.is_empty() {
            self.held = None;
            let items = std::mem::take(&mut self.current);
            if let Some(pool) = self.pool.take() {
                // Empty: no item moves.
                pool.give_items(Vec::from(items));
            }
        }
        item
    }

    /// Makes `sent` the batch being taken.
    fn start(&mut self, sent: Sent) {
        self.current = VecDeque::from(sent.items);
        self.held = sent.held;
        self.pool = sent.pool;
    }

    /// The next item; `None` once the reader has stopped and every item was
    /// taken. Cancel-safe: an item is never lost when the future is dropped.
    #[inline]
    pub async fn recv(&mut self) -> Option<Inbound> {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// Polls for the next item: `Ready(None)` once the reader has stopped
    /// and every item was taken.
    #[inline]
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<Inbound>> {
        loop {
            if let Some(item) = self.next_taken() {
                return Poll::Ready(Some(item));
            }
            match self.rx.poll_recv(cx) {
                Poll::Ready(Some(sent)) => self.start(*sent),
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    /// [`recv`](InboundQueue::recv) for a thread outside the runtime.
    ///
    /// # Panics
    ///
    /// When called inside an asynchronous context (as tokio's `blocking_recv`).
    pub fn blocking_recv(&mut self) -> Option<Inbound> {
        loop {
            if let Some(item) = self.next_taken() {
                return Some(item);
            }
            let sent = self.rx.blocking_recv()?;
            self.start(*sent);
        }
    }

    /// The next item if one is queued now; [`TryRecvError::Disconnected`]
    /// once the reader has stopped and every item was taken.
    pub fn try_recv(&mut self) -> Result<Inbound, TryRecvError> {
        loop {
            if let Some(item) = self.next_taken() {
                return Ok(item);
            }
            let sent = self.rx.try_recv()?;
            self.start(*sent);
        }
    }

    /// Waits for at least one item, then moves up to `limit` of the items
    /// queued into `buffer`; returns how many. 0 means the reader has stopped
    /// and every item was taken (or `limit` is 0).
    pub async fn recv_many(&mut self, buffer: &mut Vec<Inbound>, limit: usize) -> usize {
        if limit == 0 {
            return 0;
        }
        let Some(first) = self.recv().await else { return 0 };
        buffer.push(first);
        let mut taken = 1;
        while taken < limit {
            match self.next_taken() {
                Some(item) => {
                    buffer.push(item);
                    taken += 1;
                }
                None => match self.rx.try_recv() {
                    Ok(sent) => self.start(*sent),
                    Err(_) => break,
                },
            }
        }
        taken
    }

    /// Takes nothing more: the reader then treats what it reads as
    /// unconsumed (see [`Overload`](super::Overload)). Items already queued
    /// can still be taken.
    pub fn close(&mut self) {
        self.rx.close();
    }
}

impl futures_core::Stream for InboundQueue {
    type Item = Inbound;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Inbound>> {
        self.get_mut().poll_recv(cx)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.current.len(), None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcp_framer_jsonrpc::{Id, parse};

    #[test]
    fn received_keeps_routing_fields_and_a_payload_slice() {
        let frame = br#"{"jsonrpc":"2.0","id":"a\"b","method":"sampling/create\u004dessage","params":{"x":[1,2]}}"#;
        let message = parse(frame).unwrap();
        let received = Received::new(frame, &message);
        assert_eq!(received.kind(), Kind::Request);
        assert_eq!(received.id(), Some(&Id::from("a\"b".to_owned())));
        assert_eq!(received.method(), Some("sampling/createMessage"));
        assert_eq!(received.payload(), Some(r#"{"x":[1,2]}"#));
        let params: serde_json::Value = received.deserialize_payload().unwrap();
        assert_eq!(params["x"][1], 2);
        assert_eq!(received.frame(), frame);

        let frame = br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        let received = Received::new(frame, &parse(frame).unwrap());
        assert_eq!((received.kind(), received.id(), received.payload()), (Kind::Notification, None, None));
        assert_eq!(received.deserialize_payload::<Option<u8>>().unwrap(), None);
    }

    #[test]
    fn clones_and_comparisons_ignore_the_queue_bytes() {
        let frame = br#"{"jsonrpc":"2.0","method":"n"}"#;
        let bound = crate::bound::ByteBound::new(100);
        let mut held = Received::new(frame, &parse(frame).unwrap());
        held.hold(bound.try_acquire(frame.len()).unwrap());
        let copy = held.clone();
        assert_eq!(bound.held(), frame.len(), "a clone spends no budget");
        assert_eq!(copy, held);
        let other = br#"{"jsonrpc":"2.0","method":"m"}"#;
        assert_ne!(copy, Received::new(other, &parse(other).unwrap()));
        drop(held);
        assert_eq!(bound.held(), 0, "the original gives its bytes back; the clone keeps none");
        drop(copy);
    }

    #[test]
    fn debug_shows_a_bounded_excerpt() {
        let frame = format!(r#"{{"jsonrpc":"2.0","method":"n","params":"{}"}}"#, "é".repeat(500));
        let received = Received::new(frame.as_bytes(), &parse(frame.as_bytes()).unwrap());
        let debug = format!("{received:?}");
        assert!(debug.len() < 400, "{debug}");
        assert!(debug.contains(&format!("total_bytes: {}", frame.len())), "{debug}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_queue_is_a_stream_of_the_batches_items_in_order() {
        use futures_core::Stream;

        let note = |n: u8| {
            let frame = format!(r#"{{"jsonrpc":"2.0","method":"n{n}"}}"#).into_bytes();
            let message = parse(&frame).unwrap();
            Inbound::Notification(Received::copied(&frame, Head::new(0, &frame, &message)))
        };
        let (tx, mut queue) = inbound_channel();
        let sender = tokio::spawn(async move {
            for batch in 0..50u8 {
                let items = (0..4).map(|i| note(batch * 4 + i)).collect();
                tx.0.send(Box::new(Sent { items, held: None, pool: None })).unwrap();
                tokio::task::yield_now().await;
            }
        });
        let mut seen = Vec::new();
        while let Some(item) = std::future::poll_fn(|cx| std::pin::Pin::new(&mut queue).poll_next(cx)).await {
            let Inbound::Notification(received) = item else { panic!("{item:?}") };
            seen.push(received.method().unwrap().to_owned());
            if seen.len() % 4 == 1 {
                assert_eq!(queue.size_hint().0, 3, "the rest of the batch is known");
            }
        }
        sender.await.unwrap();
        let expected: Vec<String> = (0..200).map(|n| format!("n{n}")).collect();
        assert_eq!(seen, expected, "every item, in order, then the end");
    }
}
