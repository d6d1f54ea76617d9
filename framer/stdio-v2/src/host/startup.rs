//! Starting a session: spawn the child, run the HTTP/2 handshake over its
//! pipes and check, from its first bytes, that it speaks `stdio-v2`.

use std::io;
use std::process::Stdio;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use h2::client::SendRequest;
use mcp_framer_stdio::tree;
use mcp_framer_stdio::{Keep, Preview, Previewer};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::sync::watch;

use super::config::HostConfig;
use super::drive::{drain_stderr, drive};
use super::error::Error;
use super::shared::{Counters, Shared};
use crate::io::{StallClock, Stalling};
use crate::wire::{self, FirstBytes};

/// What the child's first bytes said.
#[derive(Clone, Debug, PartialEq)]
enum Verdict {
    Waiting,
    Http2,
    Newline(String),
    Other(String),
    Eof,
}

/// The child's stdout, reporting what its first bytes say.
struct Sniff<R> {
    inner: R,
    seen: Vec<u8>,
    verdict: Option<watch::Sender<Verdict>>,
}

/// Bytes of the child's first output kept for the verdict and its preview.
const SNIFF_BYTES: usize = 4096;

impl<R: AsyncRead + Unpin> AsyncRead for Sniff<R> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        let before = buf.filled().len();
        let poll = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        if self.verdict.is_none() {
            return poll;
        }
        let std::task::Poll::Ready(Ok(())) = &poll else { return poll };
        let new = &buf.filled()[before..];
        let eof = new.is_empty();
        let room = SNIFF_BYTES.saturating_sub(self.seen.len());
        let take = new.len().min(room);
        let new = new[..take].to_vec();
        self.seen.extend_from_slice(&new);
        let preview = || Preview::new(&self.seen, Keep::Head(512)).to_text();
        let verdict = match wire::server_first_bytes(&self.seen) {
            FirstBytes::Http2 => Verdict::Http2,
            FirstBytes::NewlineJson => Verdict::Newline(preview()),
            FirstBytes::Other => Verdict::Other(preview()),
            FirstBytes::Undecided if eof => Verdict::Eof,
            FirstBytes::Undecided => return poll,
        };
        let refuse = !matches!(verdict, Verdict::Http2 | Verdict::Eof);
        if let Some(tx) = self.verdict.take() {
            let _ = tx.send(verdict);
        }
        if refuse {
            return std::task::Poll::Ready(Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the server does not speak stdio-v2",
            )));
        }
        poll
    }
}

/// A session just started: the connection's handle and task, the shared
/// state and the stderr drain.
pub(super) struct Started {
    pub(super) send: SendRequest<Bytes>,
    pub(super) shared: Arc<Shared>,
    pub(super) connection: tokio::task::JoinHandle<()>,
    pub(super) stderr_drain: tokio::task::JoinHandle<()>,
}

/// Spawns `command` and waits until its first bytes say it speaks HTTP/2
/// (the module's "Selection" contract).
pub(super) async fn start(mut command: tokio::process::Command, config: &HostConfig) -> Result<Started, Error> {
    command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let startup = |reason: String| Error::Startup { reason, exit_status: None, stderr_tail: String::new() };
    let (mut child, killer) =
        tree::spawn(&mut command, true).map_err(|e| startup(format!("the command could not be spawned: {e}")))?;
    let (Some(stdin), Some(stdout), Some(stderr)) = (child.take_stdin(), child.take_stdout(), child.take_stderr())
    else {
        let _ = killer.kill();
        return Err(startup("the child's stdio could not be piped".into()));
    };
    let shared = Arc::new(Shared {
        counters: Counters::default(),
        stderr: Mutex::new(Previewer::new(Keep::Tail(config.stderr_tail))),
        stderr_bytes: AtomicU64::new(0),
        child: tokio::sync::Mutex::new(child),
        killer,
        closed: Mutex::new(None),
        ended: watch::channel(false).0,
    });
    let stderr_drain = tokio::spawn(drain_stderr(stderr, Arc::downgrade(&shared)));

    let (verdict_tx, mut verdict) = watch::channel(Verdict::Waiting);
    let clock = Arc::new(StallClock::default());
    let io = tokio::io::join(
        Sniff { inner: stdout, seen: Vec::new(), verdict: Some(verdict_tx) },
        Stalling { inner: stdin, clock: Arc::clone(&clock) },
    );
    let mut builder = h2::client::Builder::new();
    builder
        .initial_window_size(config.stream_window)
        .initial_connection_window_size(config.effective_connection_window())
        // A server may not push (RFC 9113, 8.4): a PUSH_PROMISE is a
        // connection error.
        .enable_push(false)
        .max_header_list_size(config.max_header_list)
        .max_send_buffer_size(1 << 20);
    let handshake = tokio::time::timeout(config.startup_timeout, builder.handshake::<_, Bytes>(io)).await;
    let (send, connection) = match handshake {
        Ok(Ok(pair)) => pair,
        Ok(Err(e)) => return Err(shared.startup_error(format!("the HTTP/2 handshake failed: {e}")).await),
        Err(_) => return Err(shared.startup_error("the HTTP/2 handshake did not complete".into()).await),
    };
    let connection = tokio::spawn(drive(connection, Arc::downgrade(&shared), clock, config.write_timeout));
    let decided = tokio::time::timeout(config.startup_timeout, verdict.wait_for(|v| *v != Verdict::Waiting)).await;
    let verdict = match decided {
        Ok(Ok(verdict)) => verdict.clone(),
        Ok(Err(_)) => Verdict::Eof,
        Err(_) => {
            let why = format!("it wrote nothing within {:?} of the HTTP/2 preface", config.startup_timeout);
            connection.abort();
            return Err(shared.startup_error(why).await);
        }
    };
    match verdict {
        Verdict::Http2 => {}
        Verdict::Newline(preview) => {
            connection.abort();
            let _ = shared.killer.kill();
            return Err(Error::Selection { preview });
        }
        Verdict::Other(preview) => {
            connection.abort();
            return Err(shared
                .startup_error(format!("it answered the preface with neither HTTP/2 nor JSON: {preview}"))
                .await);
        }
        Verdict::Eof | Verdict::Waiting => {
            connection.abort();
            return Err(shared.startup_error("it closed its stdout before answering the HTTP/2 preface".into()).await);
        }
    }
    Ok(Started { send, shared, connection, stderr_drain })
}
