//! The writer: one task owns the child's stdin and writes whole frames, one
//! at a time, each under a time bound.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::error::WriteError;
use super::metrics::Metrics;
use crate::counter::bump;

/// Frames waiting for the writer task, at most.
const QUEUE: usize = 1024;

/// A job for the writer task (queued boxed: the channel keeps a block of 32
/// slots per connection, idle or not, so a slot is a pointer).
#[derive(Debug)]
enum Job {
    /// Write one frame (its `\n` included) and report how it went.
    Write { frame: Vec<u8>, done: Option<oneshot::Sender<Result<(), WriteError>>> },
    /// Write what is queued before this, then close stdin (the child sees
    /// end of file).
    Close { done: oneshot::Sender<()> },
}

/// A handle to the writer task; clones share it.
#[derive(Clone, Debug)]
pub(crate) struct Writer {
    jobs: mpsc::Sender<Box<Job>>,
}

impl Writer {
    /// Starts the writer task on `stdin`. Each frame must be written within
    /// `timeout`.
    #[cfg(test)]
    pub(crate) fn spawn<W>(stdin: W, timeout: Duration, metrics: Arc<Metrics>) -> (Writer, JoinHandle<()>)
    where
        W: AsyncWrite + Unpin + Send + 'static,
    {
        Writer::spawn_watched(stdin, timeout, metrics, None)
    }

    /// [`spawn`](Writer::spawn), and reports the first write that timed out
    /// (the child stopped reading its stdin) on `stalled`.
    pub(crate) fn spawn_watched<W>(
        stdin: W,
        timeout: Duration,
        metrics: Arc<Metrics>,
        stalled: Option<oneshot::Sender<WriteError>>,
    ) -> (Writer, JoinHandle<()>)
    where
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (jobs, queue) = mpsc::channel(QUEUE);
        let task = tokio::spawn(run(stdin, queue, timeout, metrics, stalled));
        (Writer { jobs }, task)
    }

    /// Writes one frame and waits until it is written or failed. The frame
    /// must be one serialized message followed by exactly one `\n`.
    pub(crate) async fn write(&self, frame: Vec<u8>) -> Result<(), WriteError> {
        let (done, result) = oneshot::channel();
        self.jobs.send(Box::new(Job::Write { frame, done: Some(done) })).await.map_err(|_| WriteError::Closed)?;
        result.await.unwrap_or(Err(WriteError::Closed))
    }

    /// Queues one frame without waiting; `false` if the queue is full or the
    /// writer is gone. For callers that must never wait: the reader (its
    /// overload replies) and drop guards (their cancellations).
    pub(crate) fn try_write(&self, frame: Vec<u8>) -> bool {
        self.jobs.try_send(Box::new(Job::Write { frame, done: None })).is_ok()
    }

    /// Writes what is already queued, then closes stdin. Returns when stdin
    /// is closed (or the writer is gone).
    pub(crate) async fn close(&self) {
        let (done, closed) = oneshot::channel();
        if self.jobs.send(Box::new(Job::Close { done })).await.is_ok() {
            let _ = closed.await;
        }
    }
}

/// The writer task: frames in order, whole, each within `timeout`.
async fn run<W: AsyncWrite + Unpin>(
    stdin: W,
    mut jobs: mpsc::Receiver<Box<Job>>,
    timeout: Duration,
    metrics: Arc<Metrics>,
    mut stalled: Option<oneshot::Sender<WriteError>>,
) {
    let mut stdin = Some(stdin);
    let mut broken = false;
    while let Some(job) = jobs.recv().await {
        match *job {
            Job::Write { frame, done } => {
                let result = match stdin.as_mut() {
                    None => Err(WriteError::Closed),
                    Some(_) if broken => Err(WriteError::Broken),
                    // Boxed: its timer would otherwise sit in every idle writer.
                    Some(pipe) => Box::pin(write_frame(pipe, &frame, timeout)).await,
                };
                if let Err(e) = &result {
                    bump(&metrics.write_errors);
                    // A partial frame or an I/O error leaves stdin unusable;
                    // a timeout before the first byte does not.
                    broken |= !matches!(e, WriteError::TimedOut { written: 0, .. } | WriteError::Closed);
                    tracing::warn!("{e}");
                    if let (WriteError::TimedOut { .. }, Some(stalled)) = (e, stalled.take()) {
                        let _ = stalled.send(e.clone());
                    }
                }
                if let Some(done) = done {
                    let _ = done.send(result);
                }
            }
            Job::Close { done } => {
                if let Some(mut pipe) = stdin.take() {
                    let _ = tokio::time::timeout(timeout, pipe.shutdown()).await;
                }
                let _ = done.send(());
            }
        }
    }
}

/// Writes the whole frame, or fails after `timeout` reporting how much of it
/// was written.
async fn write_frame<W: AsyncWrite + Unpin>(pipe: &mut W, frame: &[u8], timeout: Duration) -> Result<(), WriteError> {
    let mut written = 0;
    let all = async {
        while written < frame.len() {
            match pipe.write(&frame[written..]).await {
                Ok(0) => return Err(io::Error::from(io::ErrorKind::WriteZero)),
                Ok(n) => written += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        pipe.flush().await
    };
    let outcome = tokio::time::timeout(timeout, all).await;
    match outcome {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(WriteError::Io(Arc::new(e))),
        Err(_) => Err(WriteError::TimedOut { after: timeout, written, len: frame.len() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn frames_arrive_whole_and_in_order_then_stdin_closes() {
        let (stdin, mut child) = tokio::io::duplex(64);
        let metrics = Arc::new(Metrics::default());
        let (writer, task) = Writer::spawn(stdin, Duration::from_secs(5), metrics);
        let reader = tokio::spawn(async move {
            let mut all = Vec::new();
            child.read_to_end(&mut all).await.unwrap();
            all
        });
        let big = [vec![b'x'; 1000], b"\n".to_vec()].concat();
        let (a, b) = tokio::join!(writer.write(big.clone()), writer.write(b"{}\n".to_vec()));
        a.unwrap();
        b.unwrap();
        assert!(writer.try_write(b"[]\n".to_vec()));
        writer.close().await;
        assert!(matches!(writer.write(b"{}\n".to_vec()).await, Err(WriteError::Closed)));
        let all = reader.await.unwrap();
        let lines: Vec<&[u8]> = all.split_inclusive(|&b| b == b'\n').collect();
        assert_eq!(lines.len(), 3);
        assert!(lines.contains(&&big[..]) && lines.contains(&&b"{}\n"[..]));
        assert_eq!(lines[2], b"[]\n");
        drop(writer);
        task.await.unwrap();
    }

    #[tokio::test]
    async fn a_child_that_never_reads_times_the_write_out_and_breaks_stdin() {
        let (stdin, _child) = tokio::io::duplex(16);
        let metrics = Arc::new(Metrics::default());
        let (writer, _task) = Writer::spawn(stdin, Duration::from_millis(20), Arc::clone(&metrics));
        let frame = [vec![b'x'; 100], b"\n".to_vec()].concat();
        match writer.write(frame).await {
            Err(WriteError::TimedOut { written: 16, len: 101, .. }) => {}
            other => panic!("unexpected {other:?}"),
        }
        assert!(matches!(writer.write(b"{}\n".to_vec()).await, Err(WriteError::Broken)));
        assert_eq!(metrics.snapshot().write_errors, 2);
    }
}
