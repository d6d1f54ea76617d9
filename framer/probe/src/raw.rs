//! A raw pipe to a server: the probe's own small transport, for what the
//! host [`Session`](mcp_framer_stdio::host::Session) deliberately does not
//! offer: writing arbitrary bytes (invalid UTF-8, a request one byte at a
//! time, a request split across `\r\n`), and stopping reading stdout for a
//! while. Frames are split by the core [`Framer`] and classified by the
//! [parser](mcp_framer_jsonrpc::parse), like the host does; stderr is
//! drained and counted.

use std::io;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use mcp_framer::{Config, Event, Framer, OversizePolicy};
use mcp_framer_jsonrpc::{Encoder, Id, Kind, OwnedId, parse};
use mcp_framer_stdio::tree::{self, Child, Killer};
use mcp_framer_stdio::{Keep, Preview};
use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{ChildStdin, Command};
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, timeout};

use crate::duration::{no_answer, not_answered};

/// How a raw connection frames and quotes, and what shows the server is
/// alive: given by the caller, so this layer knows nothing of the probe's
/// targets (they depend on it, not the other way round).
#[derive(Clone, Debug)]
pub(crate) struct RawSetup {
    /// The probe's limit for the server's frames.
    pub(crate) max_frame: usize,
    /// Bytes of a line quoted as evidence.
    pub(crate) excerpt: usize,
    /// The liveness request: its method and params.
    pub(crate) liveness: (&'static str, serde_json::Value),
}

/// The most payload bytes kept per message (bigger payloads are measured,
/// not kept).
const KEPT_PAYLOAD: usize = 64 * 1024;

/// What came out of the server's stdout.
#[derive(Clone, Debug)]
pub(crate) enum RawEvent {
    /// A JSON-RPC message.
    Message(RawMessage),
    /// A line that is not JSON-RPC.
    NotJsonRpc {
        /// Its length in bytes.
        len: usize,
        /// Its first bytes.
        excerpt: String,
    },
    /// A frame over the probe's limit (skipped).
    Oversize {
        /// Its length in bytes.
        len: u64,
    },
    /// Stdout closed in the middle of a frame: `len` bytes of it came, and
    /// no `\n`.
    Cut {
        /// The bytes of the partial frame.
        len: u64,
    },
    /// Stdout closed.
    Eof,
}

/// A JSON-RPC message, with its payload when it is small.
#[derive(Clone, Debug)]
pub(crate) struct RawMessage {
    /// Its kind.
    pub(crate) kind: Kind,
    /// Its id, if any.
    pub(crate) id: Option<OwnedId>,
    /// Its payload (params, result or error), if at most 64 KiB.
    pub(crate) payload: Option<String>,
    /// The frame's length in bytes.
    pub(crate) len: usize,
}

impl RawMessage {
    /// The error code of an error response.
    pub(crate) fn error_code(&self) -> Option<i64> {
        let payload: serde_json::Value = serde_json::from_str(self.payload.as_deref()?).ok()?;
        payload.get("code")?.as_i64()
    }

    /// Whether this is a response (or error response) to `id`.
    pub(crate) fn answers(&self, id: i64) -> bool {
        matches!(self.kind, Kind::Response | Kind::ErrorResponse) && self.id == Some(Id::Number(id))
    }
}

/// Counters shared with the reader tasks.
#[derive(Debug, Default)]
pub(crate) struct RawCounters {
    /// Bytes read from stdout.
    pub(crate) stdout_bytes: AtomicU64,
    /// Bytes read from stderr.
    pub(crate) stderr_bytes: AtomicU64,
    /// Bytes waiting in the stdout pipe when reading last resumed after a
    /// pause (`FIONREAD`), or `u64::MAX` if unknown.
    pub(crate) queued_at_resume: AtomicU64,
}

/// Why a write failed.
#[derive(Debug, Serialize, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WriteFailure {
    /// Not all bytes were taken within the time limit (the server is not
    /// reading its stdin).
    Stalled,
    /// The pipe is closed (the server exited or closed stdin).
    Closed,
}

/// A server process driven through raw pipes.
#[derive(Debug)]
pub(crate) struct RawConn {
    stdin: Option<ChildStdin>,
    events: mpsc::UnboundedReceiver<RawEvent>,
    paused: watch::Sender<bool>,
    counters: Arc<RawCounters>,
    child: Child,
    killer: Killer,
    next_id: i64,
    excerpt: usize,
    liveness: (&'static str, serde_json::Value),
    /// Every event taken so far, in order (for evidence).
    pub(crate) log: Vec<RawEvent>,
}

impl RawConn {
    /// Spawns `command` on piped stdio as the root of a process tree of its
    /// own (the stdio crate's [`tree`]: a process group on unix, a Job
    /// Object on Windows), killed with the connection or by its
    /// [`killer`](RawConn::killer).
    pub(crate) fn spawn(mut command: Command, setup: RawSetup) -> io::Result<RawConn> {
        command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let (mut child, killer) = tree::spawn(&mut command, true)?;
        let missing = || io::Error::other("the child's stdio was not piped");
        let stdin = child.take_stdin().ok_or_else(missing)?;
        let mut stdout = child.take_stdout().ok_or_else(missing)?;
        let mut stderr = child.take_stderr().ok_or_else(missing)?;
        let counters = Arc::new(RawCounters { queued_at_resume: AtomicU64::new(u64::MAX), ..RawCounters::default() });
        let (events_tx, events) = mpsc::unbounded_channel();
        let (paused, mut paused_rx) = watch::channel(false);
        let excerpt = setup.excerpt;
        let config = Config::DEFAULT.with_max_frame(setup.max_frame).with_oversize(OversizePolicy::Skip);
        let out_counters = Arc::clone(&counters);
        tokio::spawn(async move {
            let mut framer = Framer::new(config);
            loop {
                let was_paused = *paused_rx.borrow_and_update();
                if paused_rx.wait_for(|paused| !paused).await.is_err() {
                    return;
                }
                if was_paused {
                    let queued = queued_bytes(&stdout);
                    out_counters.queued_at_resume.store(queued, Ordering::Relaxed);
                }
                // A pause stops reading at once, even in the middle of a
                // wait for bytes (reading is cancel-safe).
                let n = tokio::select! {
                    read = stdout.read(framer.spare()) => read.unwrap_or(0),
                    _ = paused_rx.wait_for(|paused| *paused) => continue,
                };
                if n == 0 {
                    framer.finish();
                } else {
                    framer.commit(n);
                    out_counters.stdout_bytes.fetch_add(n as u64, Ordering::Relaxed);
                }
                while let Ok(Some(event)) = framer.next_event() {
                    let event = match event {
                        Event::Frame(frame) => classify(frame, excerpt),
                        Event::OversizeSkipped { len } => RawEvent::Oversize { len },
                        Event::Truncated { len, .. } => RawEvent::Cut { len },
                        Event::OversizeStarted { .. } => continue,
                    };
                    if events_tx.send(event).is_err() {
                        return;
                    }
                }
                if n == 0 {
                    let _ = events_tx.send(RawEvent::Eof);
                    return;
                }
            }
        });
        let err_counters = Arc::clone(&counters);
        tokio::spawn(async move {
            let mut buf = vec![0; 16 * 1024];
            while let Ok(n) = stderr.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                err_counters.stderr_bytes.fetch_add(n as u64, Ordering::Relaxed);
            }
        });
        let liveness = setup.liveness;
        Ok(RawConn {
            stdin: Some(stdin),
            events,
            paused,
            counters,
            child,
            killer,
            next_id: 1,
            excerpt,
            liveness,
            log: Vec::new(),
        })
    }

    /// The shared counters.
    pub(crate) fn counters(&self) -> &RawCounters {
        &self.counters
    }

    /// Stops (`true`) or resumes (`false`) reading stdout.
    pub(crate) fn pause(&self, paused: bool) {
        self.paused.send_replace(paused);
    }

    /// Bytes of a line kept in an excerpt.
    pub(crate) fn excerpt_limit(&self) -> usize {
        self.excerpt
    }

    /// A fresh request id.
    pub(crate) fn next_id(&mut self) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// A request frame with its `\n`.
    pub(crate) fn request_frame(id: i64, method: &str, params: &serde_json::Value) -> Vec<u8> {
        let params = if params.is_null() { None } else { Some(params) };
        let mut frame = Encoder::unlimited().request(&Id::Number(id), method, &params).unwrap_or_default();
        frame.push(b'\n');
        frame
    }

    /// The era's liveness request (`ping`, or `server/discover`), its
    /// `_meta` padded with `pad` bytes, as a frame with its `\n`.
    pub(crate) fn liveness_frame(&self, id: i64, pad: usize) -> Vec<u8> {
        let (method, params) = &self.liveness;
        let params = if pad == 0 {
            params.clone()
        } else {
            mcp_framer_stdio::host::with_meta(
                params.clone(),
                Some(&serde_json::json!({ "probe/pad": "x".repeat(pad) })),
            )
        };
        Self::request_frame(id, method, &params)
    }

    /// A notification frame with its `\n`.
    pub(crate) fn notification_frame(method: &str, params: &serde_json::Value) -> Vec<u8> {
        let params = if params.is_null() { None } else { Some(params) };
        let mut frame = Encoder::unlimited().notification(method, &params).unwrap_or_default();
        frame.push(b'\n');
        frame
    }

    /// Writes `bytes` (and flushes) within `limit`.
    pub(crate) async fn write(&mut self, bytes: &[u8], limit: Duration) -> Result<(), WriteFailure> {
        let Some(stdin) = self.stdin.as_mut() else {
            return Err(WriteFailure::Closed);
        };
        let write = async {
            stdin.write_all(bytes).await?;
            stdin.flush().await
        };
        match timeout(limit, write).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(WriteFailure::Closed),
            Err(_) => Err(WriteFailure::Stalled),
        }
    }

    /// Takes the server's stdin (to write from another task); give it back
    /// with [`put_stdin`](RawConn::put_stdin).
    pub(crate) fn take_stdin(&mut self) -> Option<ChildStdin> {
        self.stdin.take()
    }

    /// Closes the server's stdin (its end of input, as a host ends a
    /// session).
    pub(crate) fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Gives the server's stdin back.
    pub(crate) fn put_stdin(&mut self, stdin: ChildStdin) {
        self.stdin = Some(stdin);
    }

    /// Sends a request; returns its id.
    pub(crate) async fn send_request(
        &mut self,
        method: &str,
        params: &serde_json::Value,
        limit: Duration,
    ) -> Result<i64, WriteFailure> {
        let id = self.next_id();
        self.write(&Self::request_frame(id, method, params), limit).await?;
        Ok(id)
    }

    /// The next event, waiting until `deadline`.
    pub(crate) async fn next_event(&mut self, deadline: Instant) -> Option<RawEvent> {
        let event = tokio::time::timeout_at(deadline, self.events.recv()).await.ok().flatten()?;
        self.log.push(event.clone());
        Some(event)
    }

    /// Takes events until one satisfies `want` or `deadline` passes; stdout
    /// closing ends the wait too (returns `Some(RawEvent::Eof)` only if
    /// `want` accepts it).
    pub(crate) async fn wait_for(
        &mut self,
        deadline: Instant,
        mut want: impl FnMut(&RawEvent) -> bool,
    ) -> Option<RawEvent> {
        loop {
            let event = self.next_event(deadline).await?;
            if want(&event) {
                return Some(event);
            }
            if matches!(event, RawEvent::Eof) {
                return None;
            }
        }
    }

    /// Waits for the response to `id`.
    pub(crate) async fn response(&mut self, id: i64, limit: Duration) -> Option<RawMessage> {
        let deadline = Instant::now() + limit;
        match self.wait_for(deadline, |e| matches!(e, RawEvent::Message(m) if m.answers(id))).await? {
            RawEvent::Message(m) => Some(m),
            _ => None,
        }
    }

    /// Sends the era's liveness request (`ping`, or `server/discover`) and
    /// waits at most `limit` for its answer (an error answer counts).
    pub(crate) async fn ping(&mut self, limit: Duration) -> Result<Duration, String> {
        let started = Instant::now();
        let id = self.next_id();
        if let Err(e) = self.write(&self.liveness_frame(id, 0), limit).await {
            return Err(format!("the {} could not be written ({e:?})", self.liveness.0));
        }
        let left = limit.saturating_sub(started.elapsed());
        match self.response(id, left).await {
            Some(_) => Ok(started.elapsed()),
            None => Err(match self.exit_status() {
                Some(status) => format!("the server exited ({status})"),
                None => no_answer(limit),
            }),
        }
    }

    /// The server's process id (on unix also its process group's).
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// What kills the server's whole tree.
    pub(crate) fn killer(&self) -> Killer {
        self.killer.clone()
    }

    /// The liveness request's method: `ping` or `server/discover`.
    pub(crate) fn liveness_method(&self) -> &'static str {
        self.liveness.0
    }

    /// Opens the session with `opening`: `server/discover` (modern), or
    /// `initialize` then `notifications/initialized` (legacy), each within
    /// `limit`.
    pub(crate) async fn open(
        &mut self,
        opening: (&'static str, serde_json::Value),
        limit: Duration,
    ) -> Result<RawMessage, String> {
        let (method, params) = opening;
        let id = self
            .send_request(method, &params, limit)
            .await
            .map_err(|e| format!("{method} could not be written ({e:?})"))?;
        let response = self.response(id, limit).await.ok_or_else(|| not_answered(method, limit))?;
        if method == "initialize" {
            self.write(&Self::notification_frame("notifications/initialized", &serde_json::Value::Null), limit)
                .await
                .map_err(|e| format!("notifications/initialized could not be written ({e:?})"))?;
        }
        Ok(response)
    }

    /// The exit status, if the server has exited.
    pub(crate) fn exit_status(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }
}

/// Classifies one frame.
fn classify(frame: &[u8], excerpt: usize) -> RawEvent {
    let quote = || Preview::new(frame, Keep::Head(excerpt)).to_text();
    match parse(frame) {
        Ok(message) => RawEvent::Message(RawMessage {
            kind: message.kind(),
            id: message.id().map(Id::to_owned_id),
            payload: message.payload().filter(|p| p.get().len() <= KEPT_PAYLOAD).map(|p| p.get().to_owned()),
            len: frame.len(),
        }),
        Err(_) => RawEvent::NotJsonRpc { len: frame.len(), excerpt: quote() },
    }
}

/// The bytes waiting in the pipe (`FIONREAD`); `u64::MAX` where unknown
/// (Windows).
#[cfg(unix)]
fn queued_bytes(stdout: &tokio::process::ChildStdout) -> u64 {
    rustix::io::ioctl_fionread(stdout).unwrap_or(u64::MAX)
}

/// The bytes waiting in the pipe: unknown on Windows (`u64::MAX`).
#[cfg(not(unix))]
fn queued_bytes(_stdout: &tokio::process::ChildStdout) -> u64 {
    u64::MAX
}
