//! Small I/O pieces both sides use: a writer that notes how long a write has
//! been pending (the stall rule), and sending a body within the peer's
//! HTTP/2 window.

use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use h2::SendStream;
use tokio::io::AsyncWrite;

/// When the output's pending write began, if one is pending.
#[derive(Debug, Default)]
pub(crate) struct StallClock(Mutex<Option<Instant>>);

impl StallClock {
    pub(crate) fn note<T>(&self, poll: &Poll<T>) {
        let mut since = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match poll {
            Poll::Pending => {
                since.get_or_insert_with(Instant::now);
            }
            Poll::Ready(_) => *since = None,
        }
    }

    pub(crate) fn stalled_for(&self, timeout: Duration) -> bool {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).is_some_and(|since| since.elapsed() >= timeout)
    }
}

/// The output, noting in its [`StallClock`] how long a write has waited.
pub(crate) struct Stalling<W> {
    pub(crate) inner: W,
    pub(crate) clock: Arc<StallClock>,
}

impl<W: AsyncWrite + Unpin> AsyncWrite for Stalling<W> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.clock.note(&poll);
        poll
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.inner).poll_flush(cx);
        self.clock.note(&poll);
        poll
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The stream was reset or closed.
#[derive(Debug)]
pub(crate) struct Gone;

/// Sends `data` within the peer's window, chunk by chunk as window opens
/// (never buffering more than the window in h2); `Err` if the stream was
/// reset or closed meanwhile.
pub(crate) async fn send_data(stream: &mut SendStream<Bytes>, mut data: Bytes, end: bool) -> Result<(), Gone> {
    if data.is_empty() {
        return stream.send_data(data, end).map_err(|_| Gone);
    }
    while !data.is_empty() {
        stream.reserve_capacity(data.len());
        let window = match poll_fn(|cx| stream.poll_capacity(cx)).await {
            Some(Ok(n)) => n,
            _ => return Err(Gone),
        };
        if window == 0 {
            continue;
        }
        let chunk = data.split_to(window.min(data.len()));
        stream.send_data(chunk, end && data.is_empty()).map_err(|_| Gone)?;
    }
    Ok(())
}

/// Why [`send_chunks`] stopped.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Unsent {
    /// The stream was reset or closed.
    Gone,
    /// The peer left the window shut for the whole stall timeout.
    Stalled,
}

/// Sends `chunks` in order within the peer's window, as [`send_data`] does,
/// ending the stream after the last when `end`; a wait for window longer
/// than `stall` is [`Unsent::Stalled`] (the caller resets the stream).
pub(crate) async fn send_chunks(
    stream: &mut SendStream<Bytes>,
    chunks: impl IntoIterator<Item = Bytes>,
    end: bool,
    stall: Duration,
) -> Result<(), Unsent> {
    let mut chunks = chunks.into_iter().filter(|chunk| !chunk.is_empty()).peekable();
    if chunks.peek().is_none() {
        return if end { stream.send_data(Bytes::new(), true).map_err(|_| Unsent::Gone) } else { Ok(()) };
    }
    while let Some(mut data) = chunks.next() {
        let last = chunks.peek().is_none();
        while !data.is_empty() {
            stream.reserve_capacity(data.len());
            let window = match tokio::time::timeout(stall, poll_fn(|cx| stream.poll_capacity(cx))).await {
                Ok(Some(Ok(n))) => n,
                Ok(_) => return Err(Unsent::Gone),
                Err(_) => return Err(Unsent::Stalled),
            };
            if window == 0 {
                continue;
            }
            let chunk = data.split_to(window.min(data.len()));
            stream.send_data(chunk, end && last && data.is_empty()).map_err(|_| Unsent::Gone)?;
        }
    }
    Ok(())
}
