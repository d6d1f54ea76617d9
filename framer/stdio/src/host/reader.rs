//! The reader: the task that owns the server's stdout and never stops
//! draining it. It frames, classifies, batches and delivers; what the queue
//! has no room for is decided by the [overload rules](super::Overload), and
//! the id of an oversize response is recovered by its own module.

use std::fmt;
use std::io;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::runtime::{Handle, RuntimeFlavor};
use tokio::task::JoinHandle;

use super::config::{NO_CONSUMER_MESSAGE, OVERLOADED_MESSAGE, SessionConfig};
use super::error::Closed;
use super::inbound::{Frames, Inbound, InboundSender, Received, Sent, SkippedFrame};
use super::metrics::Metrics;
use super::outgoing;
use super::overload::{Dispatch, Verdict};
use super::owed::Owed;
use super::pool::Pool;
use super::recover::IdWatch;
use super::writer::Writer;
use crate::counter::bump;
use crate::head::Head;
use crate::{Keep, Preview};
use mcp_framer::{Config, Event, FrameError, Framer, Stats};
use mcp_framer_jsonrpc::{Kind, METHOD_NOT_FOUND, Message, OVERLOADED, OwnedId, ParseError};

/// Where a session's reader hands responses: the request table of the layer
/// above ([`Session`](super::Session)). The reader calls it only once every
/// message the server wrote before is queued (or shed by the overload
/// rules) and counted, and the framer's counts are published, so a woken
/// requester's [snapshot](super::Metrics::snapshot) already covers them.
pub(crate) trait Responses: Send + Sync + fmt::Debug {
    /// A response or error response arrived.
    fn response(&self, response: Received, metrics: &Metrics);
    /// An oversize frame of `len` bytes, over the limit of `max`, was
    /// discarded; `id` is the id recovered from it, if any (its report is
    /// queued or shed by then).
    fn oversize(&self, id: Option<&OwnedId>, len: u64, max: u64, metrics: &Metrics);
    /// The session ended: everything waiting fails with `closed`.
    fn close(&self, closed: Arc<Closed>);
}

/// Where a reader attached to a child's stdin hands responses.
#[derive(Debug)]
pub(crate) enum Answers {
    /// To a session's request table.
    Table(Arc<dyn Responses>),
    /// To the queue, never refusing those owed to the connection's user.
    Owed(Arc<Owed>),
}

/// Why a reader stopped.
#[derive(Debug)]
#[non_exhaustive]
pub enum ReaderEnd {
    /// Stdout reached end of file (the server exited or closed it). A
    /// partial frame left over was reported as [`SkippedFrame::Truncated`].
    Eof,
    /// Reading stdout failed.
    ReadFailed(io::Error),
    /// A frame passed the transport limit under
    /// [`OversizePolicy::Fail`](mcp_framer::OversizePolicy::Fail).
    Oversize(FrameError),
    /// A message did not fit in the inbound queue (see
    /// [`Overload`](super::Overload)) under
    /// [`OverloadPolicy::EndSession`](super::OverloadPolicy::EndSession).
    Overloaded,
}

/// What a reader did: why it stopped and the framer's byte accounting.
#[derive(Debug)]
#[non_exhaustive]
pub struct ReaderReport {
    /// Why it stopped.
    pub end: ReaderEnd,
    /// The framer's counters at the end (see [`Stats`] for the identity that
    /// accounts for every byte).
    pub stats: Stats,
}

/// The stdout reader: reads straight into the [`Framer`]'s buffer, frames,
/// classifies each frame with the JSON-RPC [parser](mcp_framer_jsonrpc::parse)
/// and delivers it. It only ever waits for the pipe, and for room in the
/// inbound queue only as the [overload rules](super::Overload) allow (not at
/// all by default).
///
/// Each read takes at most [`Config::read_size`](mcp_framer::Config#structfield.read_size)
/// bytes (and at most [`Config::max_frame`]), so a line grows by at most one
/// read at a time: from the read that may push a line over the limit on,
/// the reader keeps a bounded head and tail of it ([`OVERSIZE_GLIMPSE`](super::OVERSIZE_GLIMPSE)
/// bytes each, cut from the bytes it reads) and, if the framer discards it
/// as oversize, recovers the id of the response it was (see
/// [`SkippedFrame::Oversize`]).
///
/// * Inside a [`Session`](super::Session), responses go straight to the
///   request waiting for them, never through the queue. On a
///   [`Connection`](super::Connection), and standalone, they are queued as
///   [`Inbound::Response`], and the report of an oversize response whose id
///   was recovered is delivered like one.
/// * Server requests and notifications are queued as [`Inbound::Request`] /
///   [`Inbound::Notification`]; when the queue has no room the
///   [`OverloadPolicy`](super::OverloadPolicy) applies.
/// * **Order is kept, and so are the metrics.** Whoever the reader wakes (a
///   requester, for a response or for an oversize response whose id was
///   recovered) is woken only after every message the server wrote before
///   was queued (or shed by the overload rules) and counted in `delivered`,
///   and after the framer's counts are published: a progress notification is
///   never behind the result it announced, and a snapshot taken by the woken
///   requester already counts its frame. With a nonzero
///   [`Overload::max_wait`](super::Overload::max_wait) a response can so wait
///   for queue room, within that budget.
/// * Oversize frames, lines that are not JSON-RPC and a partial frame at end
///   of file are counted, logged with `tracing` (with a bounded excerpt) and
///   reported as [`Inbound::Skipped`]; reading goes on, except for an oversize
///   frame under [`OversizePolicy::Fail`](mcp_framer::OversizePolicy::Fail).
///
/// **A frame is held once.** The messages of one read (and the reports of
/// what it skipped) are copied into one shared buffer and queued as one batch
/// when the whole batch fits in the queue at once (its bytes then count
/// against [`Overload::max_queued_bytes`](super::Overload::max_queued_bytes)
/// until the last of its messages is dropped). A frame larger than the
/// storage the framer keeps ([`Config::retain`]) is not copied: the framer
/// gives its storage away with it ([`Framer::take_frame`]). Messages that do
/// not fit as a batch are offered one by one, and those that do not fit get
/// the [`Overload`](super::Overload) rules. The application takes them one
/// by one ([`InboundQueue::recv`](super::InboundQueue::recv)) or many at a
/// time ([`InboundQueue::recv_many`](super::InboundQueue::recv_many)). The
/// [metrics](Reader::metrics) are published once per read, and before every
/// hand-off: a message taken from the queue, or a woken requester, is
/// already counted (in `frames`, `stdout_bytes` and `delivered`).
///
/// **Large storage comes back too.** When the application drops a frame
/// that left with the framer's storage while the next frame is in progress
/// (bytes of it buffered, the framer's own storage at most 1 MiB), that
/// storage comes back and the frame in progress grows in it
/// ([`Framer::recycle`]): no fresh pages to fault in, no regrowth copies,
/// and still no copy of any frame. Between frames none is kept, in the pool
/// or the framer, so an idle connection holds no large storage; while a
/// frame is in progress, at most one recycled storage (at most the limit)
/// sits beside at most 1 MiB of the framer's own.
///
/// **Buffers come back.** When the application drops the last message of a
/// batch, the batch's buffer goes back to the reader, emptied, and so does
/// the batch's item vector once its last item is taken; a later read fills
/// them again instead of allocating (an allocator that hands freed memory
/// back to the system would otherwise make every read fault its pages in
/// afresh). On a current-thread runtime, when none has come back by the time
/// it has handed a batch over, the reader yields once, so that the
/// application gets to drop what it has taken (no timer, no wait on the
/// application). The reader keeps at most **two buffers and two item
/// vectors, of at most [`Config::retain`] bytes of capacity in all** (512 KiB
/// by default; an item vector counts its capacity times
/// [`ITEM_OVERHEAD`](super::ITEM_OVERHEAD)), plus its own list of a read's
/// items, at most 64 KiB: that is what an idle connection keeps besides the
/// framer's storage; what does not fit is freed. A kept buffer holds no
/// message and counts against no bound: the queue's byte bound counts the
/// frames of the messages alive and lets a batch's bytes go when its last
/// message is dropped, so the memory a stalled application makes the host
/// hold is that bound (or one message), plus the framer's buffer (at most
/// the limit plus one read), plus what the reader keeps.
///
/// A [`Connection`](super::Connection) runs one on the child's stdout. It can
/// also run on any [`AsyncRead`], which is how benchmarks measure the host's
/// read path:
///
/// ```
/// use mcp_framer_stdio::host::{Inbound, Reader, ReaderEnd, SessionConfig};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let stdout: &[u8] = b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\
///                       INFO oops, a log line\n\
///                       {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n";
/// let (inbound, mut queue) = mcp_framer_stdio::host::inbound_channel();
/// let reader = Reader::new(&SessionConfig::default(), inbound);
/// let metrics = reader.metrics();
/// let report = reader.run(stdout).await;
/// assert!(matches!(report.end, ReaderEnd::Eof));
/// assert!(matches!(queue.recv().await, Some(Inbound::Notification(n)) if n.method() == Some("notifications/message")));
/// assert!(matches!(queue.recv().await, Some(Inbound::Skipped(_))));
/// assert!(matches!(queue.recv().await, Some(Inbound::Response(_))));
/// let metrics = metrics.snapshot();
/// assert_eq!((metrics.frames, metrics.parse_errors, metrics.non_json_lines), (3, 1, 1));
/// # }
/// ```
#[derive(Debug)]
pub struct Reader {
    framer: Config,
    excerpt: usize,
    dispatch: Dispatch,
    metrics: Arc<Metrics>,
    /// The request table, inside a session.
    responses: Option<Arc<dyn Responses>>,
    /// The responses a connection's user is owed, never refused.
    owed: Option<Arc<Owed>>,
    /// Where overload and no-consumer replies go.
    writer: Option<Writer>,
    ids: IdWatch,
    /// While an oversize frame is discarded: `discarded_bytes` before it.
    discard_base: Option<u64>,
    /// What the current read queues, handed over at its end.
    batch: Batch,
    /// Where the buffers and item vectors of the batches it handed over come
    /// back to once the application is done with them.
    pool: Arc<Pool<Inbound>>,
    /// Whether it runs on a current-thread runtime, where the application
    /// gets to drop what it took only when the reader yields.
    one_thread: bool,
}

/// The messages and reports of one read, in order, their frames copied into
/// one buffer.
#[derive(Debug, Default)]
struct Batch {
    bytes: Vec<u8>,
    /// Kept from read to read (emptied), up to [`KEEP_ITEMS`].
    items: Vec<Item>,
    /// How many items are messages.
    messages: usize,
}

/// The most storage of its own the framer may have for the reader to keep a
/// large frame's storage given back for it (the framer's own rule, 1 MiB):
/// recycled storage never sits beside a large line.
const RECYCLE_BESIDE: usize = 1 << 20;

/// The most capacity, in bytes, the reader's own list of a read's items
/// keeps from one read to the next: one default read's worth (64 KiB).
const KEEP_ITEMS: usize = mcp_framer::DEFAULT_READ_SIZE;

#[derive(Debug)]
enum Item {
    Message(Head),
    /// A response owed to the application: never refused.
    Owed(Head),
    Skipped(SkippedFrame),
}

impl Item {
    /// A report; a batch without messages holds nothing else.
    fn into_report(self) -> Inbound {
        match self {
            Item::Skipped(skipped) => Inbound::Skipped(skipped),
            Item::Message(_) | Item::Owed(_) => unreachable!("a batch without messages holds reports only"),
        }
    }
}

impl Batch {
    /// Copies `frame` in and keeps the routing fields of its `message`;
    /// `hint`: the bytes the read left in the framer, to size the buffer once.
    /// `owed`: the message is a response owed to the application.
    /// The buffer is the first one in `pool`, or a fresh one.
    fn push(&mut self, frame: &[u8], message: &Message<'_>, hint: usize, owed: bool, pool: &Pool<Inbound>) {
        if self.bytes.capacity() == 0 {
            self.bytes = pool.take_buffer().unwrap_or_default();
            // Exact: a pooled buffer grows only when a read needs more than
            // it ever did, so it soon needs no more growing.
            self.bytes.reserve_exact(hint.max(frame.len()));
        }
        let head = Head::new(self.bytes.len(), frame, message);
        self.bytes.extend_from_slice(frame);
        self.items.push(if owed { Item::Owed(head) } else { Item::Message(head) });
        self.messages += 1;
    }
}

/// The queue item for the message `received`.
fn inbound(received: Received) -> Inbound {
    match received.kind() {
        Kind::Request => Inbound::Request(received),
        Kind::Notification => Inbound::Notification(received),
        Kind::Response | Kind::ErrorResponse => Inbound::Response(received),
    }
}

impl Reader {
    /// A reader that queues what it reads into `inbound`, with fresh metrics.
    /// It reads [`SessionConfig::framer`], [`SessionConfig::overload`] and
    /// [`SessionConfig::excerpt`].
    pub fn new(config: &SessionConfig, inbound: InboundSender) -> Reader {
        Reader::with_metrics(config, inbound, Arc::default())
    }

    /// A reader that counts into `metrics`.
    pub fn with_metrics(config: &SessionConfig, inbound: InboundSender, metrics: Arc<Metrics>) -> Reader {
        Reader {
            framer: config.framer,
            excerpt: config.excerpt,
            dispatch: Dispatch::new(inbound.0, config.overload, Arc::clone(&metrics)),
            metrics,
            responses: None,
            owed: None,
            writer: None,
            ids: IdWatch::default(),
            discard_base: None,
            batch: Batch::default(),
            pool: Arc::new(Pool::new(config.framer.retain)),
            one_thread: false,
        }
    }

    /// Sends overload and no-consumer replies through `writer`; inside a
    /// session, hands responses to `responses`; on a connection, never
    /// refuses the responses `owed`.
    pub(crate) fn attach(mut self, writer: Writer, answers: Answers) -> Reader {
        self.writer = Some(writer);
        match answers {
            Answers::Table(responses) => self.responses = Some(responses),
            Answers::Owed(owed) => self.owed = Some(owed),
        }
        self
    }

    /// The metrics this reader counts into.
    pub fn metrics(&self) -> Arc<Metrics> {
        Arc::clone(&self.metrics)
    }

    /// Runs the reader on its own task.
    pub fn spawn<R>(self, stdout: R) -> JoinHandle<ReaderReport>
    where
        R: AsyncRead + Unpin + Send + 'static,
    {
        tokio::spawn(self.run(stdout))
    }

    /// Reads `stdout` until end of file, a read error, or a fatal condition
    /// (an oversize frame under `Fail`, an overload under `EndSession`).
    pub async fn run<R: AsyncRead + Unpin>(mut self, mut stdout: R) -> ReaderReport {
        self.one_thread =
            Handle::try_current().is_ok_and(|runtime| runtime.runtime_flavor() == RuntimeFlavor::CurrentThread);
        let mut framer = Framer::new(self.framer);
        // Each read takes at most this much: a line grows by at most one read
        // at a time, so its head is kept before the read that may push it over
        // the limit, and no line starts and passes the limit within one read.
        let read_cap = {
            let config = framer.config();
            config.read_size.max(1).min(config.max_frame.max(1))
        };
        let end = loop {
            self.ids.before_read(&framer, read_cap);
            // A large frame's storage the application gave back: the frame
            // in progress grows in it (kept only while one is).
            if let Some(storage) = self.pool.take_large() {
                framer.recycle(storage);
            }
            let spare = framer.spare();
            let cap = spare.len().min(read_cap);
            let read = stdout.read(&mut spare[..cap]).await;
            if let Ok(n) = &read {
                self.ids.read(&spare[..*n]);
            }
            let eof = match read {
                Ok(0) => true,
                Ok(n) => {
                    framer.commit(n);
                    false
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    tracing::warn!("reading the server's stdout failed: {e}");
                    framer.finish();
                    let end = Box::pin(self.drain(&mut framer)).await.err().unwrap_or(ReaderEnd::ReadFailed(e));
                    break end;
                }
            };
            if eof {
                framer.finish();
            }
            // Boxed, once per read: the state of handing a read over would
            // otherwise sit in every reader's future, idle or not.
            if let Err(end) = Box::pin(self.drain(&mut framer)).await {
                break end;
            }
            self.ids.after_drain();
            // Between frames nothing recycled is kept, here or in the pool:
            // a reader that waits on a quiet pipe holds no large storage.
            let in_progress = framer.buffered() > 0 && framer.capacity() <= RECYCLE_BESIDE;
            self.pool.want_large(in_progress);
            if !in_progress {
                framer.release_recycled();
            }
            self.publish(&framer);
            if eof {
                break ReaderEnd::Eof;
            }
        };
        self.publish(&framer);
        ReaderReport { end, stats: *framer.stats() }
    }

    /// Mirrors the framer's counters into the metrics, with an oversize frame
    /// still being discarded counted as in progress, not yet as discarded.
    fn publish(&self, framer: &Framer) {
        let in_progress = match self.discard_base {
            Some(base) if framer.is_discarding() => framer.stats().discarded_bytes - base,
            _ => 0,
        };
        self.metrics.publish_framer(framer.stats(), framer.is_discarding().then_some(in_progress));
    }

    /// Handles every event the framer has, then hands what they queue over
    /// as one batch.
    async fn drain(&mut self, framer: &mut Framer) -> Result<(), ReaderEnd> {
        let hint = framer.buffered();
        // Frames over what the framer keeps anyway leave with its storage.
        let take_above = framer.config().retain;
        let end = loop {
            match framer.next_event() {
                Ok(None) => break Ok(()),
                Ok(Some(Event::Frame(frame))) => {
                    let message = match mcp_framer_jsonrpc::parse(frame) {
                        Ok(message) => message,
                        Err(error) => {
                            self.skip_invalid(frame, error);
                            continue;
                        }
                    };
                    let response = matches!(message.kind(), Kind::Response | Kind::ErrorResponse);
                    let routed = response && self.responses.is_some();
                    let owed = response && self.is_owed(message.id());
                    let large = frame.len() > take_above;
                    if !routed && !large {
                        self.batch.push(frame, &message, hint, owed, &self.pool);
                        continue;
                    }
                    let (len, head) = (frame.len(), Head::new(0, frame, &message));
                    let received = if large {
                        let (storage, at) =
                            framer.take_frame(len).expect("the reader's frames are in the framer's buffer");
                        // Its storage comes back for the next frame if one
                        // is in progress by the time it is dropped.
                        self.pool.want_large(framer.buffered() > 0 && framer.capacity() <= RECYCLE_BESIDE);
                        Received::owned(storage, at.start, head, &self.pool)
                    } else {
                        Received::copied(frame, head)
                    };
                    // What came before it on stdout is queued and counted
                    // first, and the metrics are published before anyone
                    // sees it.
                    self.flush(framer).await?;
                    self.publish(framer);
                    match &self.responses {
                        Some(responses) if routed => responses.response(received, &self.metrics),
                        _ if owed => self.deliver_owed(inbound(received)).await,
                        _ => self.deliver_one(inbound(received)).await?,
                    }
                }
                Ok(Some(Event::OversizeStarted { seen })) => {
                    let max = framer.config().max_frame;
                    tracing::warn!(
                        "a frame passed the transport limit ({seen} bytes seen, limit {max}): discarding it"
                    );
                    self.discard_base = Some(framer.stats().discarded_bytes - seen);
                    self.ids.oversize_started(seen);
                }
                Ok(Some(Event::OversizeSkipped { len })) => {
                    self.discard_base = None;
                    let id = self.ids.oversize_skipped(len);
                    let max = framer.config().max_frame as u64;
                    tracing::warn!("discarded an oversize frame of {len} bytes (id {id:?}); reading goes on");
                    let report = SkippedFrame::Oversize { len, max, id: id.clone() };
                    match self.responses.clone() {
                        Some(responses) => {
                            self.batch.items.push(Item::Skipped(report));
                            if id.is_some() {
                                // Its requester may wake: its report and what
                                // came before are handed over first.
                                self.flush(framer).await?;
                                self.publish(framer);
                            }
                            responses.oversize(id.as_ref(), len, max, &self.metrics);
                        }
                        // It stands for a response owed: delivered like one.
                        None if self.is_owed(id.as_ref()) => {
                            self.flush(framer).await?;
                            self.publish(framer);
                            self.deliver_owed(Inbound::Skipped(report)).await;
                        }
                        // A standalone reader owes nothing: a report with an
                        // id is offered like a response.
                        None if id.is_some() && self.owed.is_none() => {
                            self.flush(framer).await?;
                            self.publish(framer);
                            self.deliver_one(Inbound::Skipped(report)).await?;
                        }
                        None => self.batch.items.push(Item::Skipped(report)),
                    }
                }
                Ok(Some(Event::Truncated { len, oversize })) => {
                    self.discard_base = None;
                    self.ids.truncated();
                    tracing::warn!("stdout closed in the middle of a frame: {len} bytes truncated");
                    self.batch.items.push(Item::Skipped(SkippedFrame::Truncated { len, oversize }));
                }
                Err(e) => {
                    tracing::error!("{e}: ending the session");
                    break Err(ReaderEnd::Oversize(e));
                }
            }
        };
        self.flush(framer).await?;
        end
    }

    /// Hands the batch over: in one queue operation if it all fits now,
    /// else item by item under the overload rules. The framer's counts are
    /// published first, so whoever takes an item sees it counted.
    async fn flush(&mut self, framer: &Framer) -> Result<(), ReaderEnd> {
        if self.batch.items.is_empty() {
            return Ok(());
        }
        self.publish(framer);
        let (bytes, messages) = (std::mem::take(&mut self.batch.bytes), std::mem::take(&mut self.batch.messages));
        let mut items = std::mem::take(&mut self.batch.items);
        let result = self.hand_over(bytes, &mut items, messages).await;
        if items.capacity() * size_of::<Item>() <= KEEP_ITEMS {
            self.batch.items = items;
        }
        result
    }

    /// [`flush`](Reader::flush) of a batch of `items`, `messages` of them
    /// messages whose frames are in `bytes`; leaves `items` empty.
    async fn hand_over(&mut self, bytes: Vec<u8>, items: &mut Vec<Item>, messages: usize) -> Result<(), ReaderEnd> {
        if !self.dispatch.is_closed()
            && let Some(held) = self.dispatch.reserve_batch(items.len(), bytes.len())
        {
            let mut queued = self.pool.take_items().unwrap_or_default();
            queued.reserve_exact(items.len());
            // The messages' shared buffer holds the batch's bytes; a batch of
            // reports only holds them until taken.
            let held = if messages == 0 {
                queued.extend(items.drain(..).map(Item::into_report));
                self.pool.give_buffer(bytes);
                Some(held)
            } else {
                let frames = Frames::pooled(bytes, held, &self.pool);
                queued.extend(items.drain(..).map(|item| match item {
                    Item::Message(head) | Item::Owed(head) => inbound(Received::in_frames(&frames, head)),
                    Item::Skipped(skipped) => Inbound::Skipped(skipped),
                }));
                None
            };
            let sent = Box::new(Sent { items: queued, held, pool: Some(Arc::clone(&self.pool)) });
            match self.dispatch.send_batch(sent, messages as u64) {
                Ok(()) => {
                    self.dispatch.after_delivery().await;
                    if self.one_thread && self.pool.lacks_buffer() {
                        tokio::task::yield_now().await;
                    }
                }
                Err(sent) => sent.items.into_iter().for_each(|item| self.unconsumed(item)),
            }
            return Ok(());
        }
        for item in items.drain(..) {
            match item {
                Item::Message(head) => self.deliver_one(inbound(Received::copied_out(&bytes, head))).await?,
                Item::Owed(head) => self.deliver_owed(inbound(Received::copied_out(&bytes, head))).await,
                Item::Skipped(skipped) => {
                    self.dispatch.offer_report(Inbound::Skipped(skipped));
                }
            }
        }
        self.pool.give_buffer(bytes);
        Ok(())
    }

    /// [`deliver`](Reader::deliver), boxed: one item at a time is the slow
    /// path (a batch that does not fit, a large frame), and its state would
    /// otherwise sit in every reader's future.
    async fn deliver_one(&mut self, item: Inbound) -> Result<(), ReaderEnd> {
        Box::pin(self.deliver(item)).await
    }

    /// Whether a response with `id` is owed to a connection's user (it then
    /// no longer is: the caller delivers it).
    fn is_owed(&self, id: Option<&mcp_framer_jsonrpc::Id<'_>>) -> bool {
        match (&self.owed, id) {
            (Some(owed), Some(id)) => owed.settle(id),
            _ => false,
        }
    }

    /// Queues an item owed to the application, never refused (see
    /// [`Owed`]).
    async fn deliver_owed(&mut self, item: Inbound) {
        match self.dispatch.owed(item) {
            None => self.dispatch.after_delivery().await,
            Some(item) => self.unconsumed(item),
        }
    }

    /// Offers one item to the queue and carries out the verdict.
    async fn deliver(&mut self, item: Inbound) -> Result<(), ReaderEnd> {
        match self.dispatch.offer(item).await {
            Verdict::Queued => self.dispatch.after_delivery().await,
            Verdict::Unconsumed(item) => self.unconsumed(item),
            Verdict::End => return Err(ReaderEnd::Overloaded),
            Verdict::Reject(item) => self.reject(item),
            Verdict::Drop(item) => {
                bump(&self.metrics.overload_dropped);
                tracing::debug!("dropped by the overload policy: {item:?}");
            }
        }
        Ok(())
    }

    /// A server request the queue has no room for: answered with the
    /// overload error if the answer can be queued, else dropped.
    fn reject(&mut self, item: Inbound) {
        if let (Inbound::Request(request), Some(writer)) = (&item, &self.writer)
            && let Some(id) = request.id()
            && writer.try_write(outgoing::error_response(id, OVERLOADED, OVERLOADED_MESSAGE))
        {
            bump(&self.metrics.overload_rejected);
            return;
        }
        bump(&self.metrics.overload_dropped);
        tracing::debug!("dropped by the overload policy (its reply could not be queued): {item:?}");
    }

    /// Counts and reports a frame the parser rejected.
    fn skip_invalid(&mut self, frame: &[u8], error: ParseError) {
        bump(&self.metrics.parse_errors);
        let excerpt = Preview::new(frame, Keep::Head(self.excerpt));
        let len = frame.len();
        let starts_like_json = matches!(frame.iter().find(|b| !b.is_ascii_whitespace()), Some(b'{' | b'['));
        let skipped = if starts_like_json {
            tracing::warn!("skipped an invalid JSON-RPC frame of {len} bytes ({error}): {excerpt:?}");
            SkippedFrame::Invalid { error, len, excerpt }
        } else {
            bump(&self.metrics.non_json_lines);
            tracing::warn!("skipped a non-JSON line of {len} bytes on stdout: {excerpt:?}");
            SkippedFrame::NotJson { len, excerpt }
        };
        self.batch.items.push(Item::Skipped(skipped));
    }

    /// A message nobody will receive (the application dropped its receiver):
    /// the no-consumer rule of [`NO_CONSUMER_MESSAGE`]. Reports are not
    /// messages: the metrics count what they report.
    fn unconsumed(&mut self, item: Inbound) {
        if matches!(item, Inbound::Skipped(_)) {
            return;
        }
        bump(&self.metrics.unconsumed);
        if let (Inbound::Request(request), Some(writer)) = (&item, &self.writer)
            && let Some(id) = request.id()
        {
            if !writer.try_write(outgoing::error_response(id, METHOD_NOT_FOUND, NO_CONSUMER_MESSAGE)) {
                tracing::warn!("could not queue the answer to server request {id}: the writer is gone or full");
            }
            return;
        }
        tracing::trace!("no consumer for {item:?}");
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::AsyncReadExt as _;

    use super::*;
    use crate::host::pending::Pending;
    use crate::host::pool::SPARES;
    use crate::host::{Overload, OverloadPolicy};
    use mcp_framer::OversizePolicy;

    fn config(policy: OverloadPolicy) -> SessionConfig {
        SessionConfig::default()
            .with_max_receive(256)
            .with_overload(Overload::default().with_policy(policy).with_max_wait(Duration::from_millis(1)))
    }

    /// `config` with room for one message at a time.
    fn room_for_one(policy: OverloadPolicy) -> SessionConfig {
        let config = config(policy);
        config.with_overload(config.overload.with_max_queued_bytes(1))
    }

    const REQUEST: &str = r#"{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{}}"#;

    #[tokio::test]
    async fn skips_and_reports_what_is_not_a_message_and_keeps_reading() {
        let big = format!("{{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"params\":\"{}\"}}", "y".repeat(300));
        let input = format!(
            "{big}\nnot json at all\n{{\"jsonrpc\":\"1.0\",\"id\":1,\"result\":{{}}}}\n{REQUEST}\n{{\"jsonrpc\":\"2.0\""
        );
        let (tx, mut rx) = crate::host::inbound_channel();
        let reader = Reader::new(&config(OverloadPolicy::Drop), tx);
        let metrics = reader.metrics();
        let report = reader.run(input.as_bytes()).await;
        assert!(matches!(report.end, ReaderEnd::Eof));
        assert_eq!(report.stats.accounted_bytes(), input.len() as u64);
        let mut items = Vec::new();
        while let Ok(item) = rx.try_recv() {
            items.push(item);
        }
        assert!(
            matches!(&items[0], Inbound::Skipped(SkippedFrame::Oversize { len, id: None, max: 256 }) if *len == big.len() as u64)
        );
        assert!(
            matches!(&items[1], Inbound::Skipped(SkippedFrame::NotJson { len: 15, excerpt }) if excerpt.to_text() == "not json at all")
        );
        assert!(matches!(&items[2], Inbound::Skipped(SkippedFrame::Invalid { error, .. }) if error.code() == -32600));
        assert!(matches!(&items[3], Inbound::Request(r) if r.frame() == REQUEST.as_bytes()));
        assert!(matches!(&items[4], Inbound::Skipped(SkippedFrame::Truncated { len: 16, oversize: false })));
        let m = metrics.snapshot();
        assert_eq!((m.frames, m.oversize_frames, m.parse_errors, m.non_json_lines, m.delivered), (3, 1, 2, 1, 1));
        assert_eq!((m.truncated_bytes, m.stdout_bytes), (16, input.len() as u64));
    }

    #[tokio::test]
    async fn one_read_is_one_batch_in_one_buffer_held_until_its_last_message_is_dropped() {
        let note = r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"n":1}}"#;
        let input = format!("{note}\n{REQUEST}\nnot json\n{note}\n");
        let (tx, mut rx) = crate::host::inbound_channel();
        let reader = Reader::new(&SessionConfig::default(), tx);
        let metrics = reader.metrics();
        let report = reader.run(input.as_bytes()).await;
        assert!(matches!(report.end, ReaderEnd::Eof));
        let mut items = Vec::new();
        assert_eq!(rx.recv_many(&mut items, 16).await, 4, "the whole read at once, in order");
        let frames: Vec<&[u8]> = items
            .iter()
            .filter_map(|item| match item {
                Inbound::Notification(r) | Inbound::Request(r) => Some(r.frame()),
                _ => None,
            })
            .collect();
        assert_eq!(frames, [note.as_bytes(), REQUEST.as_bytes(), note.as_bytes()]);
        assert!(matches!(&items[2], Inbound::Skipped(SkippedFrame::NotJson { len: 8, .. })));
        // One buffer: each frame right after the one before.
        for pair in frames.windows(2) {
            assert_eq!(pair[1].as_ptr().addr(), pair[0].as_ptr().addr() + pair[0].len());
        }
        assert_eq!(metrics.snapshot().delivered, 3);
        assert!(rx.try_recv().is_err());
    }

    /// Where the buffer of `item`'s frame starts, if `item` is the first
    /// message of its batch.
    fn frame_at(item: &Inbound) -> *const u8 {
        match item {
            Inbound::Notification(received) => received.frame().as_ptr(),
            other => panic!("{other:?}"),
        }
    }

    /// Takes `n` items, however many batches they come in.
    async fn take(rx: &mut crate::host::InboundQueue, n: usize) -> Vec<Inbound> {
        let mut items = Vec::new();
        while items.len() < n {
            let left = n - items.len();
            assert!(rx.recv_many(&mut items, left).await > 0, "the reader ended early");
        }
        items
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_batchs_buffer_and_item_vector_come_back_for_a_later_read() {
        use tokio::io::AsyncWriteExt as _;
        let note = r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"n":1}}"#;
        let three = format!("{note}\n{note}\n{note}\n");
        tokio::time::timeout(Duration::from_secs(60), async {
            for _ in 0..20 {
                let (tx, mut rx) = crate::host::inbound_channel();
                let reader = Reader::new(&SessionConfig::default(), tx);
                let pool = Arc::clone(&reader.pool);
                let (mut server, stdout) = tokio::io::duplex(1 << 16);
                let reader = tokio::spawn(reader.run(stdout));
                // One write, one read, one batch.
                server.write_all(three.as_bytes()).await.unwrap();
                let first = take(&mut rx, 3).await;
                let at = frame_at(&first[0]);
                assert_eq!(pool.kept().0, 0, "the buffer is held while a message of it lives");
                let items_at = pool.items_at();
                assert_eq!(items_at.len(), 1, "the item vector came back once its last item was taken");
                drop(first);
                assert_eq!(pool.kept().0, 1, "the buffer came back with the last message dropped");
                server.write_all(three.as_bytes()).await.unwrap();
                let second = take(&mut rx, 3).await;
                assert_eq!(frame_at(&second[0]), at, "the next read filled the same buffer");
                assert_eq!(pool.items_at(), items_at, "and handed its items over in the same vector");
                drop(second);
                drop(server);
                assert!(matches!(reader.await.unwrap().end, ReaderEnd::Eof));
                assert!(rx.recv().await.is_none());
            }
        })
        .await
        .expect("watchdog");
    }

    /// On one thread the application runs only when the reader yields: the
    /// reader lends it a turn when no buffer has come back, so a consumer
    /// that drops what it takes keeps it within its pooled buffers even when
    /// twenty reads are ready at once.
    #[tokio::test(flavor = "current_thread")]
    async fn on_one_thread_a_consumer_that_keeps_up_gets_its_buffers_back_between_reads() {
        let note = r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"n":1}}"#;
        let notes = (20 * (64 << 10)) / (note.len() + 1);
        let input = format!("{note}\n").repeat(notes);
        tokio::time::timeout(Duration::from_secs(60), async {
            let (tx, mut rx) = crate::host::inbound_channel();
            let reader = Reader::new(&SessionConfig::default(), tx);
            // Everything is there to read before the reader starts.
            let (mut server, stdout) = tokio::io::duplex(input.len());
            use tokio::io::AsyncWriteExt as _;
            server.write_all(input.as_bytes()).await.unwrap();
            drop(server);
            let reader = tokio::spawn(reader.run(stdout));
            // Frames of one batch lie end to end in its buffer; a frame that
            // does not follow the one before starts a batch, at its buffer's
            // start.
            let (mut starts, mut next, mut taken) = (Vec::new(), std::ptr::null(), 0);
            while let Some(item) = rx.recv().await {
                let Inbound::Notification(received) = item else { panic!("{item:?}") };
                let frame = received.frame().as_ptr_range();
                if frame.start != next {
                    starts.push(frame.start);
                }
                next = frame.end;
                taken += 1;
            }
            assert_eq!(taken, notes);
            assert!(matches!(reader.await.unwrap().end, ReaderEnd::Eof));
            // The first reads are small (the framer's storage grows), and a
            // kept buffer too small for a read grows (it may move); the last
            // twenty reads are full ones.
            assert!(starts.len() >= 20, "{} batches", starts.len());
            let last: std::collections::HashSet<_> = starts[starts.len() - 20..].iter().collect();
            assert!(last.len() <= SPARES, "{} buffers for the last 20 batches", last.len());
        })
        .await
        .expect("watchdog");
    }

    /// Frames over `retain` leave with the framer's storage; dropped by a
    /// consumer while the next frame is in progress, that storage comes
    /// back and the next frame grows in it. Between frames none is kept.
    #[tokio::test(flavor = "current_thread")]
    async fn a_large_frames_storage_comes_back_for_a_later_frame_and_is_not_kept_between_frames() {
        use tokio::io::AsyncWriteExt as _;
        let body = "x".repeat(60 << 10);
        let note = format!(r#"{{"jsonrpc":"2.0","method":"notifications/message","params":{{"data":"{body}"}}}}"#);
        let frames = 12;
        let input = format!("{note}\n").repeat(frames);
        tokio::time::timeout(Duration::from_secs(60), async {
            let mut config = SessionConfig::default();
            config.framer.retain = 4096;
            let (tx, mut rx) = crate::host::inbound_channel();
            let reader = Reader::new(&config, tx);
            let pool = Arc::clone(&reader.pool);
            let (mut server, stdout) = tokio::io::duplex(16 << 10);
            let reader = tokio::spawn(reader.run(stdout));
            let writer = tokio::spawn(async move {
                server.write_all(input.as_bytes()).await.unwrap();
            });
            let mut received_frames = 0;
            while let Some(item) = rx.recv().await {
                let Inbound::Notification(received) = item else { panic!("{item:?}") };
                assert_eq!(received.frame(), note.as_bytes());
                received_frames += 1;
                drop(received);
            }
            writer.await.unwrap();
            assert!(matches!(reader.await.unwrap().end, ReaderEnd::Eof));
            assert_eq!(received_frames, frames);
            let back = pool.large_taken();
            assert!(back >= 1 && back < frames as u64, "storages given back to the framer: {back}");
            assert_eq!(pool.large_kept(), None, "the stream ended between frames: nothing large kept");
        })
        .await
        .expect("watchdog");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_pool_keeps_two_buffers_and_two_item_vectors_within_retain_however_many_come_back() {
        use tokio::io::AsyncWriteExt as _;
        let note = r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"n":1}}"#;
        tokio::time::timeout(Duration::from_secs(60), async {
            for retain in [1 << 20, 300] {
                let mut config = SessionConfig::default();
                config.framer.retain = retain;
                let (tx, mut rx) = crate::host::inbound_channel();
                let reader = Reader::new(&config, tx);
                let (pool, metrics) = (Arc::clone(&reader.pool), reader.metrics());
                let (mut server, stdout) = tokio::io::duplex(1 << 16);
                let reader = tokio::spawn(reader.run(stdout));
                // Ten batches of two messages, queued before any is taken,
                // then all alive at once.
                for batch in 1..=10 {
                    server.write_all(format!("{note}\n{note}\n").as_bytes()).await.unwrap();
                    while metrics.snapshot().delivered < 2 * batch {
                        tokio::task::yield_now().await;
                    }
                }
                assert_eq!(pool.kept(), (0, 0, 0), "nothing came back: each batch took fresh storage");
                let held = take(&mut rx, 20).await;
                let (buffers, items, _) = pool.kept();
                assert!(buffers == 0 && items <= SPARES, "{:?}", pool.kept());
                drop(held);
                let (buffers, items, bytes) = pool.kept();
                assert!(buffers <= SPARES && items <= SPARES && bytes <= retain, "{:?}", pool.kept());
                if retain > 1000 {
                    assert_eq!((buffers, items), (SPARES, SPARES), "ten came back: two of each are kept");
                } else {
                    assert!(buffers + items < 2 * SPARES, "a retain of 300 bytes does not hold them all");
                }
                drop(server);
                assert!(matches!(reader.await.unwrap().end, ReaderEnd::Eof));
            }
        })
        .await
        .expect("watchdog");
    }

    #[tokio::test]
    async fn a_batch_counts_against_the_byte_bound_until_its_last_message_is_dropped() {
        let note = r#"{"jsonrpc":"2.0","method":"n"}"#;
        let overload = Overload::default()
            .with_policy(OverloadPolicy::Drop)
            .with_max_queued_bytes(4 * (note.len() + crate::host::ITEM_OVERHEAD));
        let (tx, mut rx) = crate::host::inbound_channel();
        let reader = Reader::new(&SessionConfig::default().with_overload(overload), tx);
        let metrics = reader.metrics();
        let (mut server, stdout) = tokio::io::duplex(1 << 16);
        let reader = tokio::spawn(reader.run(stdout));
        use tokio::io::AsyncWriteExt as _;
        // Two messages in one write: one batch of 2 frames.
        server.write_all(format!("{note}\n{note}\n").as_bytes()).await.unwrap();
        let first = rx.recv().await.unwrap();
        let second = rx.recv().await.unwrap();
        drop(first);
        // Three more: only two fit while the batch's buffer lives (2 + 2 of 4).
        server.write_all(format!("{note}\n{note}\n{note}\n").as_bytes()).await.unwrap();
        let mut later = vec![rx.recv().await.unwrap(), rx.recv().await.unwrap()];
        drop(server);
        assert!(matches!(reader.await.unwrap().end, ReaderEnd::Eof));
        let m = metrics.snapshot();
        assert_eq!((m.delivered, m.overload_dropped), (4, 1), "the first batch still held its two frames");
        drop(second);
        later.clear();
        assert!(rx.recv().await.is_none());
    }

    #[tokio::test]
    async fn a_response_waits_until_what_preceded_it_is_queued() {
        let note = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#;
        let response = r#"{"jsonrpc":"2.0","id":7,"result":{}}"#;
        let input = format!("{note}\n{note}\n{response}\n{note}\n");
        // Room for one message; a full queue is waited on for a minute.
        let (tx, mut rx) = crate::host::inbound_channel();
        let overload = Overload::default()
            .with_policy(OverloadPolicy::Drop)
            .with_max_wait(Duration::from_secs(60))
            .with_max_queued_bytes(1);
        let pending = Arc::new(Pending::default());
        let mut reply = pending.insert(7, "tools/call").unwrap();
        let (stdin, _child_stdin) = tokio::io::duplex(4096);
        let (writer, _task) = Writer::spawn(stdin, Duration::from_secs(5), Arc::default());
        let reader = Reader::new(&SessionConfig::default().with_overload(overload), tx)
            .attach(writer, Answers::Table(Arc::clone(&pending) as Arc<dyn Responses>));
        let metrics = reader.metrics();
        let (mut server, stdout) = tokio::io::duplex(1 << 16);
        let reader = tokio::spawn(reader.run(stdout));
        use tokio::io::AsyncWriteExt as _;
        server.write_all(input.as_bytes()).await.unwrap();
        // Once the first notification is queued, the reader waits for room
        // for the second: the response behind it must not be routed yet.
        tokio::time::timeout(Duration::from_secs(10), async {
            while metrics.snapshot().delivered < 1 {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the first notification is queued");
        let early = reply.try_recv();
        assert!(
            matches!(early, Err(tokio::sync::oneshot::error::TryRecvError::Empty)),
            "the response overtook the notifications before it: {early:?}"
        );
        assert!(matches!(rx.recv().await, Some(Inbound::Notification(_))));
        let routed = tokio::time::timeout(Duration::from_secs(10), &mut reply).await.unwrap().unwrap().unwrap();
        assert_eq!(routed.frame(), response.as_bytes());
        let m = metrics.snapshot();
        assert!(m.delivered >= 2, "both notifications before it were counted: {m:?}");
        // The reader may have gone on to the notification after it by now.
        assert!(m.frames >= 3 && m.stdout_bytes == input.len() as u64, "the framer's counts were published: {m:?}");
        assert!(matches!(rx.recv().await, Some(Inbound::Notification(_))));
        assert!(matches!(rx.recv().await, Some(Inbound::Notification(_))));
        drop(server);
        assert!(matches!(reader.await.unwrap().end, ReaderEnd::Eof));
        let m = metrics.snapshot();
        assert_eq!((m.delivered, m.overload_dropped, m.responses), (3, 0, 1));
    }

    /// Every way a response reaches a connection's queue (in a batch, alone
    /// when large, as the report of an oversize response), owed or not,
    /// with no room at all for anything else.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_owed_response_is_never_refused_whatever_the_policy() {
        let note = r#"{"jsonrpc":"2.0","method":"notifications/message","params":{}}"#;
        let small = |id: u32| format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#);
        let large = |id: u32| format!(r#"{{"jsonrpc":"2.0","id":{id},"result":"{}"}}"#, "x".repeat(200));
        let oversize = |id: u32| format!(r#"{{"jsonrpc":"2.0","id":{id},"result":"{}"}}"#, "x".repeat(400));
        let error = |id: u32| format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":1,"message":"no"}}}}"#);
        for policy in [OverloadPolicy::Drop, OverloadPolicy::Reject] {
            for _ in 0..20 {
                let owed = Arc::new(Owed::default());
                for id in [1, 2, 3, 4] {
                    owed.sending(format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"m"}}"#).as_bytes());
                }
                // Ids 5 to 8 were never asked (or were cancelled): late.
                let mut input = String::new();
                for (owed_id, late_id) in [(1, 5), (2, 6), (3, 7), (4, 8)] {
                    let make = [small, large, oversize, error][owed_id as usize - 1];
                    input += &format!("{note}\n{note}\n{}\n{note}\n{}\n", make(owed_id), make(late_id));
                }
                let mut config = room_for_one(policy);
                // Frames over 100 bytes leave with the framer's storage; the
                // limit is 256.
                config.framer.retain = 100;
                let (tx, mut rx) = crate::host::inbound_channel();
                let (stdin, _child_stdin) = tokio::io::duplex(1 << 16);
                let (writer, _task) = Writer::spawn(stdin, Duration::from_secs(5), Arc::default());
                let reader = Reader::new(&config, tx).attach(writer, Answers::Owed(Arc::clone(&owed)));
                let metrics = reader.metrics();
                assert!(matches!(reader.run(input.as_bytes()).await.end, ReaderEnd::Eof));
                let mut answered = Vec::new();
                while let Ok(item) = rx.try_recv() {
                    match item {
                        Inbound::Response(r) => answered.push(r.id().cloned().unwrap()),
                        Inbound::Skipped(SkippedFrame::Oversize { id: Some(id), .. }) => answered.push(id),
                        _ => {}
                    }
                }
                let owed_ids: Vec<_> = [1, 2, 3, 4].map(mcp_framer_jsonrpc::Id::Number).into();
                assert_eq!(answered, owed_ids, "{policy:?}: every owed response, in order, and no late one");
                assert_eq!(owed.len(), 0, "each settled once");
                let m = metrics.snapshot();
                assert_eq!(m.delivered, 1 + 3, "{policy:?}: the first note and the three owed messages: {m:?}");
                assert_eq!(
                    m.overload_dropped,
                    11 + 3,
                    "the notes but the first, the late responses but the oversize one"
                );
                assert_eq!(m.oversize_frames, 2);
            }
        }
    }

    #[tokio::test]
    async fn oversize_under_fail_ends_the_reader() {
        let input = format!("{REQUEST}\n{}\n{REQUEST}\n", "z".repeat(1000));
        let mut config = config(OverloadPolicy::Drop);
        config.framer.oversize = OversizePolicy::Fail;
        let (tx, mut rx) = crate::host::inbound_channel();
        let report = Reader::new(&config, tx).run(input.as_bytes()).await;
        assert!(matches!(report.end, ReaderEnd::Oversize(FrameError::Oversize { max_frame: 256, .. })));
        assert!(matches!(rx.try_recv(), Ok(Inbound::Request(_))));
        assert!(rx.try_recv().is_err());
    }

    #[tokio::test]
    async fn overload_policies_drop_reject_or_end() {
        let input = format!("{REQUEST}\n{REQUEST}\n{{\"jsonrpc\":\"2.0\",\"method\":\"n\"}}\n{REQUEST}\n");

        // Drop: one delivered, three dropped.
        let (tx, _rx) = crate::host::inbound_channel();
        let reader = Reader::new(&room_for_one(OverloadPolicy::Drop), tx);
        let metrics = reader.metrics();
        assert!(matches!(reader.run(input.as_bytes()).await.end, ReaderEnd::Eof));
        let m = metrics.snapshot();
        assert_eq!((m.delivered, m.overload_dropped, m.overload_rejected, m.overload_episodes), (1, 3, 0, 1));

        // Reject: the two extra requests are answered, the notification dropped.
        let (tx, _rx) = crate::host::inbound_channel();
        let (stdin, mut child_stdin) = tokio::io::duplex(4096);
        let (writer, _task) = Writer::spawn(stdin, Duration::from_secs(5), Arc::default());
        let reader = Reader::new(&room_for_one(OverloadPolicy::Reject), tx)
            .attach(writer.clone(), Answers::Owed(Arc::default()));
        let metrics = reader.metrics();
        assert!(matches!(reader.run(input.as_bytes()).await.end, ReaderEnd::Eof));
        let m = metrics.snapshot();
        assert_eq!((m.delivered, m.overload_dropped, m.overload_rejected), (1, 1, 2));
        writer.close().await;
        let mut written = String::new();
        child_stdin.read_to_string(&mut written).await.unwrap();
        let expected = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":\"s1\",\"error\":{{\"code\":{OVERLOADED},\"message\":\"{OVERLOADED_MESSAGE}\"}}}}\n"
        );
        assert_eq!(written, expected.repeat(2));

        // EndSession: the reader stops at the first refusal.
        let (tx, _rx) = crate::host::inbound_channel();
        let report = Reader::new(&room_for_one(OverloadPolicy::EndSession), tx).run(input.as_bytes()).await;
        assert!(matches!(report.end, ReaderEnd::Overloaded));
    }
}
