//! The reader: the task that owns the server's stdout and never stops
//! draining it.

use crate::setters::setters;
use std::io;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::task::JoinHandle;

use super::inbound::{Frames, Head, Inbound, InboundSender, Received, SkippedFrame};
use super::metrics::Metrics;
use super::outgoing;
use super::overload::{Dispatch, NO_CONSUMER_MESSAGE, OVERLOADED, OVERLOADED_MESSAGE, Offer, Overload, OverloadPolicy};
use super::pending::{Lookup, Pending};
use super::session::RequestError;
use super::writer::Writer;
use crate::counter::{add, bump};
use crate::{Keep, Preview, Previewer};
use mcp_framer::{Config, Event, FrameError, Framer, Stats};
use mcp_framer_jsonrpc::{self as envelope, EnvelopeError, Id, Kind, METHOD_NOT_FOUND, Message, OwnedId};

/// Bytes kept from each end of a frame that may pass the transport limit, to
/// recover its id if it does ([`recover_response_id`](mcp_framer_jsonrpc::recover_response_id)).
pub const OVERSIZE_GLIMPSE: usize = 4096;

/// A bounded head and tail of the current line, kept from the read that may
/// push it over the limit on, until it ends.
#[derive(Debug)]
struct Glimpse {
    kept: Previewer,
    /// The line's offset in the stream (to tell it from the next line).
    start: u64,
    /// The framer reported this line oversize.
    oversize: bool,
    /// The line's `\n` arrived.
    ended: bool,
}

/// Default bound on the excerpt of a skipped line: 120 bytes.
pub const DEFAULT_EXCERPT: usize = 120;

/// How a [`Reader`] frames, hands over and reports. Build one from the
/// default with the `with_*` setters (the fields may grow, so the struct is
/// `#[non_exhaustive]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReaderConfig {
    /// The framer's configuration: the transport limit in bytes
    /// ([`Config::max_frame`], default 16 MiB) and what happens to a frame
    /// over it ([`Config::oversize`]: skip to its `\n` and go on, or end the
    /// session).
    pub framer: Config,
    /// The wait bound and the policy for a full inbound queue.
    pub overload: Overload,
    /// The most bytes of a skipped line quoted in reports (the head of a
    /// [`Preview`], cut at a character boundary). Default: [`DEFAULT_EXCERPT`].
    pub excerpt: usize,
}

impl Default for ReaderConfig {
    fn default() -> Self {
        ReaderConfig { framer: Config::default(), overload: Overload::default(), excerpt: DEFAULT_EXCERPT }
    }
}

setters!(ReaderConfig {
    framer: Config => with_framer,
    overload: Overload => with_overload,
    excerpt: usize => with_excerpt,
});

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
    /// A message did not fit in the inbound queue (see [`Overload`]) under
    /// [`OverloadPolicy::EndSession`].
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
/// classifies each frame with the JSON-RPC [envelope](mcp_framer_jsonrpc) and
/// routes it. It only ever waits for the pipe (and, only if a host opts in
/// with [`Overload::max_wait`], for room in the inbound queue, at most that
/// long in total per overload episode). To let the application run before
/// the queue fills, it yields to the runtime (no timer) past the queue's
/// high-water mark and a few times before a message that does not fit gets
/// the policy; see [`Overload`].
///
/// Each read takes at most [`Config::read_size`] bytes (and at most
/// [`Config::max_frame`]), so a line grows by at most one read at a time:
/// from the read that may push a line over the limit on, the reader keeps a
/// bounded head and tail of it ([`OVERSIZE_GLIMPSE`] bytes each, cut from
/// the bytes it reads) and, if the framer discards it as oversize, recovers
/// the id of the response it was (see [`SkippedFrame::Oversize`]).
///
/// * Responses go straight to the request waiting for them (inside a
///   [`Session`](super::Session)), never through the queue. A standalone
///   reader queues them as [`Inbound::Response`].
/// * Server requests and notifications are copied out of the framer (one copy,
///   after framing) and queued as [`Inbound::Request`] /
///   [`Inbound::Notification`]; when the queue stays full the
///   [`OverloadPolicy`] applies.
/// * **Order is kept.** A response wakes its requester only after every
///   message the server wrote before it was queued (or shed by the overload
///   rules) and counted in `delivered`: a progress notification is never
///   behind the result it announced. With a nonzero [`Overload::max_wait`]
///   a response can so wait for queue room, within that budget.
/// * Oversize frames, lines that are not JSON-RPC and a partial frame at end
///   of file are counted, logged with `tracing` (with a bounded excerpt) and
///   reported as [`Inbound::Skipped`]; reading goes on, except for an oversize
///   frame under [`OversizePolicy::Fail`](mcp_framer::OversizePolicy::Fail).
///
/// **One hand-off per read.** The messages of one read (and the reports of
/// what it skipped) are copied into one shared buffer and queued as one batch
/// when the whole batch fits in the queue at once (by count and by bytes; its
/// bytes then count against [`Overload::max_queued_bytes`] until the last of
/// its messages is dropped). Otherwise they are offered one by one, each with
/// a copy of its own, and those that do not fit get the [`Overload`] rules.
/// The application takes them one by one ([`InboundQueue::recv`](super::InboundQueue::recv))
/// or many at a time ([`InboundQueue::recv_many`](super::InboundQueue::recv_many)).
/// The [metrics](Reader::metrics) are published once per read, and before
/// a response wakes its requester.
///
/// A [`Session`](super::Session) runs one on the child's stdout. It can also
/// run on any [`AsyncRead`], which is how benchmarks measure the host's read
/// path:
///
/// ```
/// use mcp_framer_stdio::host::{Inbound, Reader, ReaderConfig, ReaderEnd};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let stdout: &[u8] = b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\
///                       INFO oops, a log line\n\
///                       {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n";
/// let (inbound, mut queue) = mcp_framer_stdio::host::inbound_channel(16);
/// let reader = Reader::new(ReaderConfig::default(), inbound);
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
    config: ReaderConfig,
    dispatch: Dispatch<Inbound>,
    metrics: Arc<Metrics>,
    pending: Option<Arc<Pending>>,
    writer: Option<Writer>,
    warned_overload: bool,
    /// The head and tail of a long line that may pass (or passed) the limit.
    glimpse: Option<Glimpse>,
    /// While an oversize frame is discarded: `discarded_bytes` before it.
    discard_base: Option<u64>,
    /// What the current read queues, handed over at its end.
    batch: Batch,
}

/// The messages and reports of one read, in order, their frames copied into
/// one buffer.
#[derive(Debug, Default)]
struct Batch {
    bytes: Vec<u8>,
    items: Vec<Item>,
    /// How many items are messages.
    messages: usize,
}

#[derive(Debug)]
enum Item {
    Message(Head),
    Skipped(SkippedFrame),
}

impl Batch {
    /// Copies `frame` in and keeps the routing fields of its `message`;
    /// `hint`: the bytes the read left in the framer, to size the buffer once.
    fn push(&mut self, frame: &[u8], message: &Message<'_>, hint: usize) {
        if self.bytes.capacity() == 0 {
            self.bytes.reserve(hint.max(frame.len()));
        }
        let head = Head::new(self.bytes.len(), frame, message);
        self.bytes.extend_from_slice(frame);
        self.items.push(Item::Message(head));
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

impl Glimpse {
    /// Keeps the bytes of a chunk just read that continue the line: up to
    /// its `\n`, if the chunk has one.
    fn push_line(&mut self, chunk: &[u8]) {
        if self.ended {
            return;
        }
        let end = chunk.iter().position(|&b| b == b'\n');
        self.kept.push(&chunk[..end.unwrap_or(chunk.len())]);
        self.ended = end.is_some();
    }
}

impl Reader {
    /// A reader that queues what it reads into `inbound`, with fresh metrics.
    pub fn new(config: ReaderConfig, inbound: InboundSender) -> Reader {
        Reader::with_metrics(config, inbound, Arc::default())
    }

    /// A reader that counts into `metrics`.
    pub fn with_metrics(config: ReaderConfig, inbound: InboundSender, metrics: Arc<Metrics>) -> Reader {
        let dispatch = Dispatch::new(inbound.0, config.overload, Arc::clone(&metrics));
        Reader {
            config,
            dispatch,
            metrics,
            pending: None,
            writer: None,
            warned_overload: false,
            glimpse: None,
            discard_base: None,
            batch: Batch::default(),
        }
    }

    /// Routes responses to `pending` and sends overload replies through
    /// `writer`.
    pub(crate) fn for_session(mut self, pending: Arc<Pending>, writer: Writer) -> Reader {
        self.pending = Some(pending);
        self.writer = Some(writer);
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
        let mut framer = Framer::new(self.config.framer);
        // Each read takes at most this much: a line grows by at most one read
        // at a time, so its head is kept before the read that may push it over
        // the limit, and no line starts and passes the limit within one read.
        let read_cap = self.config.framer.read_size.max(1).min(self.config.framer.max_frame.max(1));
        let end = loop {
            self.watch_long_line(&framer, read_cap);
            let spare = framer.spare();
            let cap = spare.len().min(read_cap);
            let read = stdout.read(&mut spare[..cap]).await;
            if let (Ok(n), Some(glimpse)) = (&read, &mut self.glimpse) {
                glimpse.push_line(&spare[..*n]);
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
                    let end = self.drain(&mut framer).await.err().unwrap_or(ReaderEnd::ReadFailed(e));
                    break end;
                }
            };
            if eof {
                framer.finish();
            }
            if let Err(end) = self.drain(&mut framer).await {
                break end;
            }
            if self.glimpse.as_ref().is_some_and(|glimpse| glimpse.ended && !glimpse.oversize) {
                // The long line ended within the limit.
                self.glimpse = None;
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

    /// Before a read: if the current line (the bytes buffered after the last
    /// drain) plus one read may pass the transport limit, starts keeping its
    /// head and tail (or goes on keeping them).
    fn watch_long_line(&mut self, framer: &Framer, read_cap: usize) {
        if framer.is_discarding() {
            return;
        }
        let partial = framer.buffered_bytes();
        if partial.len().saturating_add(read_cap) <= self.config.framer.max_frame {
            self.glimpse = None;
            return;
        }
        let start = framer.stats().bytes_in - partial.len() as u64;
        if self.glimpse.as_ref().is_some_and(|glimpse| glimpse.start == start && !glimpse.ended) {
            return;
        }
        let mut kept = Previewer::new(Keep::HeadAndTail { head: OVERSIZE_GLIMPSE, tail: OVERSIZE_GLIMPSE });
        kept.push(partial);
        self.glimpse = Some(Glimpse { kept, start, oversize: false, ended: false });
    }

    /// Handles every event the framer has, then hands what they queue over
    /// as one batch.
    async fn drain(&mut self, framer: &mut Framer) -> Result<(), ReaderEnd> {
        let hint = framer.buffered();
        let end = loop {
            match framer.next_event() {
                Ok(None) => break Ok(()),
                Ok(Some(Event::Frame(frame))) => {
                    if let Some(response) = self.classify(frame, hint) {
                        // What came before a response on stdout is queued
                        // and counted, and the metrics are published, before
                        // its requester wakes.
                        self.flush().await?;
                        self.publish(framer);
                        self.route_response(response);
                    }
                }
                Ok(Some(Event::OversizeStarted { seen })) => {
                    let max = self.config.framer.max_frame;
                    tracing::warn!(
                        "a frame passed the transport limit ({seen} bytes seen, limit {max}): discarding it"
                    );
                    self.discard_base = Some(framer.stats().discarded_bytes - seen);
                    if let Some(glimpse) = &mut self.glimpse {
                        // Ours only if it saw exactly the frame's bytes so far.
                        glimpse.oversize = glimpse.kept.total_bytes() == seen;
                    }
                }
                Ok(Some(Event::OversizeSkipped { len })) => {
                    self.discard_base = None;
                    let id = self.recover_id(len);
                    tracing::warn!("discarded an oversize frame of {len} bytes (id {id:?}); reading goes on");
                    self.oversize_response(len, id.as_ref());
                    self.report(SkippedFrame::Oversize { len, id });
                }
                Ok(Some(Event::Truncated { len, oversize })) => {
                    self.discard_base = None;
                    self.glimpse = None;
                    tracing::warn!("stdout closed in the middle of a frame: {len} bytes truncated");
                    self.report(SkippedFrame::Truncated { len, oversize });
                }
                Err(e) => {
                    tracing::error!("{e}: ending the session");
                    break Err(ReaderEnd::Oversize(e));
                }
            }
        };
        self.flush().await?;
        end
    }

    /// Hands the batch over: in one queue operation if it all fits now,
    /// else message by message under the overload rules.
    async fn flush(&mut self) -> Result<(), ReaderEnd> {
        if self.batch.items.is_empty() {
            return Ok(());
        }
        let Batch { bytes, items, messages } = std::mem::take(&mut self.batch);
        if !self.dispatch.is_closed()
            && let Some(held) = self.dispatch.reserve_batch(items.len(), messages, bytes.len())
        {
            let frames = Frames::new(bytes, Some(held));
            let batch = items
                .into_iter()
                .map(|item| match item {
                    Item::Message(head) => inbound(Received::in_frames(&frames, head)),
                    Item::Skipped(skipped) => Inbound::Skipped(skipped),
                })
                .collect();
            drop(frames);
            match self.dispatch.send_batch(batch) {
                Ok(()) => {
                    add(&self.metrics.delivered, messages as u64);
                    self.warned_overload &= self.dispatch.is_overloaded();
                    self.dispatch.after_delivery().await;
                }
                Err(batch) => batch.into_iter().filter(|item| !matches!(item, Inbound::Skipped(_))).for_each(|item| {
                    self.unconsumed(item);
                }),
            }
            return Ok(());
        }
        for item in items {
            match item {
                Item::Message(head) => self.deliver(inbound(Received::copied(&bytes, head))).await?,
                Item::Skipped(skipped) => {
                    self.dispatch.offer_now(Inbound::Skipped(skipped));
                }
            }
        }
        Ok(())
    }

    /// The id of the oversize frame of `len` bytes just discarded, from the
    /// head and tail kept of it, if it can be told safely.
    fn recover_id(&mut self, len: u64) -> Option<OwnedId> {
        let glimpse = self.glimpse.take().filter(|glimpse| glimpse.oversize)?;
        // `len` leaves out a stripped `\r`; the glimpse has every raw byte.
        let total = glimpse.kept.total_bytes();
        if total != len && total != len + 1 {
            return None;
        }
        let preview = glimpse.kept.preview();
        envelope::recover_response_id(preview.head(), preview.tail(), total)
    }

    /// Fails the request an oversize response answered, at once; otherwise
    /// lets every waiting request know one was skipped.
    fn oversize_response(&mut self, len: u64, id: Option<&OwnedId>) {
        let Some(pending) = &self.pending else { return };
        let max = self.config.framer.max_frame as u64;
        let waiter = match id {
            Some(Id::Number(id)) => match pending.take(*id) {
                Lookup::Waiting(waiter) => Some((*id, waiter)),
                Lookup::Late => {
                    bump(&self.metrics.late_responses);
                    None
                }
                Lookup::Unknown => None,
            },
            _ => None,
        };
        match waiter {
            Some((id, waiter)) => {
                bump(&self.metrics.oversize_responses);
                tracing::warn!(
                    "request {id} ({}) failed: its response of {len} bytes is over the limit",
                    waiter.method
                );
                let error = RequestError::Oversize { method: waiter.method.clone(), len, max };
                let _ = waiter.reply.send(Err(error));
            }
            None => pending.note_oversize(),
        }
    }

    /// Parses one frame and adds it to the batch if it goes to the queue;
    /// returns a copy of it if it is a response for the pending table, to be
    /// routed once the batch before it is handed over.
    fn classify(&mut self, frame: &[u8], hint: usize) -> Option<Received> {
        match envelope::parse(frame) {
            Ok(message) => match message.kind() {
                Kind::Response | Kind::ErrorResponse if self.pending.is_some() => Some(Received::new(frame, &message)),
                _ => {
                    self.batch.push(frame, &message, hint);
                    None
                }
            },
            Err(error) => {
                self.skip_invalid(frame, error);
                None
            }
        }
    }

    /// Hands a response to the request waiting for it.
    fn route_response(&mut self, received: Received) {
        let Some(pending) = &self.pending else { return };
        let lookup = match received.id() {
            Some(Id::Number(id)) => pending.take(*id),
            _ => Lookup::Unknown,
        };
        match lookup {
            Lookup::Waiting(waiter) => {
                bump(&self.metrics.responses);
                let outcome = match received.kind() {
                    Kind::ErrorResponse => Err(RequestError::from_error_response(received)),
                    _ => Ok(received),
                };
                // The requester may have just given up; its guard counts that.
                let _ = waiter.reply.send(outcome);
            }
            Lookup::Late => {
                bump(&self.metrics.late_responses);
                tracing::debug!("late response for request {:?} ignored", received.id());
            }
            Lookup::Unknown => {
                bump(&self.metrics.unexpected_responses);
                tracing::warn!("response for unknown request id {:?} ignored", received.id());
            }
        }
    }

    /// Counts and reports a frame the envelope rejected.
    fn skip_invalid(&mut self, frame: &[u8], error: EnvelopeError) {
        bump(&self.metrics.parse_errors);
        let excerpt = Preview::new(frame, Keep::Head(self.config.excerpt));
        let len = frame.len();
        let starts_like_json = matches!(frame.iter().find(|b| !b.is_ascii_whitespace()), Some(b'{' | b'['));
        if starts_like_json {
            tracing::warn!("skipped an invalid JSON-RPC frame of {len} bytes ({error}): {excerpt:?}");
            self.report(SkippedFrame::Invalid { error, len, excerpt });
        } else {
            bump(&self.metrics.non_json_lines);
            tracing::warn!("skipped a non-JSON line of {len} bytes on stdout: {excerpt:?}");
            self.report(SkippedFrame::NotJson { len, excerpt });
        }
    }

    /// Adds a report to the batch: queued with it, or on its own only if
    /// there is room right now.
    fn report(&mut self, skipped: SkippedFrame) {
        self.batch.items.push(Item::Skipped(skipped));
    }

    /// Queues a message, applying the overload policy if the queue stays
    /// full.
    async fn deliver(&mut self, mut item: Inbound) -> Result<(), ReaderEnd> {
        if self.dispatch.is_closed() {
            self.unconsumed(item);
            return Ok(());
        }
        let queued = match &mut item {
            Inbound::Request(received) | Inbound::Notification(received) | Inbound::Response(received) => {
                self.dispatch.reserve(received.frame().len()).await.map(|queued| received.hold(queued))
            }
            Inbound::Skipped(_) => Some(()),
        };
        let offer = match queued {
            Some(()) => self.dispatch.offer(item).await,
            None => Offer::Refused(item),
        };
        let item = match offer {
            Offer::Delivered => {
                bump(&self.metrics.delivered);
                self.warned_overload &= self.dispatch.is_overloaded();
                self.dispatch.after_delivery().await;
                return Ok(());
            }
            Offer::Closed(item) => {
                self.unconsumed(item);
                return Ok(());
            }
            Offer::Refused(item) => item,
        };
        let policy = self.config.overload.policy;
        if !self.warned_overload {
            self.warned_overload = true;
            tracing::warn!(
                "inbound queue full (wait budget per episode {:?}, at most {} bytes held): \
                 applying the overload policy {policy:?}",
                self.config.overload.max_wait,
                self.config.overload.max_queued_bytes
            );
        }
        match (policy, &item, &self.writer) {
            (OverloadPolicy::EndSession, ..) => return Err(ReaderEnd::Overloaded),
            (OverloadPolicy::Reject, Inbound::Request(request), Some(writer)) => {
                if let Some(id) = request.id() {
                    let reply = outgoing::error_response(id, OVERLOADED, OVERLOADED_MESSAGE);
                    if writer.try_write(reply) {
                        bump(&self.metrics.overload_rejected);
                        return Ok(());
                    }
                }
            }
            _ => {}
        }
        bump(&self.metrics.overload_dropped);
        tracing::debug!("dropped by the overload policy: {item:?}");
        Ok(())
    }

    /// A message nobody will receive (the application dropped its receiver):
    /// a server request is answered "method not found" (this host takes no
    /// server requests), anything else is dropped; both are counted in
    /// `unconsumed`, never as overload.
    fn unconsumed(&mut self, item: Inbound) {
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
    use mcp_framer::OversizePolicy;

    fn config(policy: OverloadPolicy) -> ReaderConfig {
        ReaderConfig::default()
            .with_framer(Config::DEFAULT.with_max_frame(256))
            .with_overload(Overload::default().with_policy(policy).with_max_wait(Duration::from_millis(1)))
    }

    const REQUEST: &str = r#"{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{}}"#;

    #[tokio::test]
    async fn skips_and_reports_what_is_not_a_message_and_keeps_reading() {
        let big = format!("{{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"params\":\"{}\"}}", "y".repeat(300));
        let input = format!(
            "{big}\nnot json at all\n{{\"jsonrpc\":\"1.0\",\"id\":1,\"result\":{{}}}}\n{REQUEST}\n{{\"jsonrpc\":\"2.0\""
        );
        let (tx, mut rx) = crate::host::inbound_channel(16);
        let reader = Reader::new(config(OverloadPolicy::Drop), tx);
        let metrics = reader.metrics();
        let report = reader.run(input.as_bytes()).await;
        assert!(matches!(report.end, ReaderEnd::Eof));
        assert_eq!(report.stats.accounted_bytes(), input.len() as u64);
        let mut items = Vec::new();
        while let Ok(item) = rx.try_recv() {
            items.push(item);
        }
        assert!(
            matches!(&items[0], Inbound::Skipped(SkippedFrame::Oversize { len, id: None }) if *len == big.len() as u64)
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
        let (tx, mut rx) = crate::host::inbound_channel(16);
        let reader = Reader::new(ReaderConfig::default(), tx);
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

    #[tokio::test]
    async fn a_batch_counts_against_the_byte_bound_until_its_last_message_is_dropped() {
        let note = r#"{"jsonrpc":"2.0","method":"n"}"#;
        let overload = Overload::default().with_policy(OverloadPolicy::Drop).with_max_queued_bytes(4 * note.len());
        let (tx, mut rx) = crate::host::inbound_channel(16);
        let reader = Reader::new(ReaderConfig::default().with_overload(overload), tx);
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
        let (tx, mut rx) = crate::host::inbound_channel(1);
        let overload = Overload::default().with_policy(OverloadPolicy::Drop).with_max_wait(Duration::from_secs(60));
        let pending = Arc::new(Pending::default());
        let mut reply = pending.insert(7, "tools/call").unwrap();
        let (stdin, _child_stdin) = tokio::io::duplex(4096);
        let (writer, _task) = Writer::spawn(stdin, Duration::from_secs(5), Arc::default());
        let reader =
            Reader::new(ReaderConfig::default().with_overload(overload), tx).for_session(Arc::clone(&pending), writer);
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
        assert_eq!(m.delivered, 2, "both notifications before it were counted");
        assert_eq!((m.frames, m.stdout_bytes), (3, input.len() as u64), "the framer's counts were published");
        assert!(matches!(rx.recv().await, Some(Inbound::Notification(_))));
        assert!(matches!(rx.recv().await, Some(Inbound::Notification(_))));
        drop(server);
        assert!(matches!(reader.await.unwrap().end, ReaderEnd::Eof));
        let m = metrics.snapshot();
        assert_eq!((m.delivered, m.overload_dropped, m.responses), (3, 0, 1));
    }

    #[tokio::test]
    async fn oversize_under_fail_ends_the_reader() {
        let input = format!("{REQUEST}\n{}\n{REQUEST}\n", "z".repeat(1000));
        let mut config = config(OverloadPolicy::Drop);
        config.framer.oversize = OversizePolicy::Fail;
        let (tx, mut rx) = crate::host::inbound_channel(16);
        let report = Reader::new(config, tx).run(input.as_bytes()).await;
        assert!(matches!(report.end, ReaderEnd::Oversize(FrameError::Oversize { max_frame: 256, .. })));
        assert!(matches!(rx.try_recv(), Ok(Inbound::Request(_))));
        assert!(rx.try_recv().is_err());
    }

    #[tokio::test]
    async fn overload_policies_drop_reject_or_end() {
        let input = format!("{REQUEST}\n{REQUEST}\n{{\"jsonrpc\":\"2.0\",\"method\":\"n\"}}\n{REQUEST}\n");

        // Drop: one delivered, three dropped.
        let (tx, _rx) = crate::host::inbound_channel(1);
        let reader = Reader::new(config(OverloadPolicy::Drop), tx);
        let metrics = reader.metrics();
        assert!(matches!(reader.run(input.as_bytes()).await.end, ReaderEnd::Eof));
        let m = metrics.snapshot();
        assert_eq!((m.delivered, m.overload_dropped, m.overload_rejected, m.overload_episodes), (1, 3, 0, 1));

        // Reject: the two extra requests are answered, the notification dropped.
        let (tx, _rx) = crate::host::inbound_channel(1);
        let (stdin, mut child_stdin) = tokio::io::duplex(4096);
        let (writer, _task) = Writer::spawn(stdin, Duration::from_secs(5), Arc::default());
        let reader = Reader::new(config(OverloadPolicy::Reject), tx).for_session(Arc::default(), writer.clone());
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
        let (tx, _rx) = crate::host::inbound_channel(1);
        let report = Reader::new(config(OverloadPolicy::EndSession), tx).run(input.as_bytes()).await;
        assert!(matches!(report.end, ReaderEnd::Overloaded));
    }
}
