//! The lower layer of the host: one server process and its stdio, without a
//! request table. It spawns, reads, queues, writes and stops; what the
//! messages mean is its user's business.

use std::io;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;

use tokio::process::Command;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::AbortHandle;

use super::config::SessionConfig;
use super::error::{CloseReason, Closed, WriteError};
use super::inbound::{InboundQueue, inbound_channel};
use super::metrics::{Metrics, MetricsSnapshot};
use super::reader::{Reader, Responses};
use super::stderr::{StderrTail, drain_stderr};
use super::supervisor::{Reason, ShutdownReport, Signal, Supervisor, stop_child};
use super::writer::Writer;
use crate::tree::{self, Killer};
use mcp_framer_jsonrpc::Encoder;

/// One MCP server process and its stdio, without a request table: the layer
/// other transports build on (an adapter for another SDK brings its own
/// request table), and the one [`Session`](super::Session) is built on.
///
/// [`Connection::spawn`] starts the command with piped stdin, stdout and
/// stderr, in a process tree of its own (a process group on unix, a Job
/// Object on Windows; unless [`SessionConfig::process_tree`] is off), and
/// four tasks:
///
/// * the [`Reader`] on stdout: it never stops draining, never parses a frame
///   over [`SessionConfig::framer`]`.max_frame`, and queues every classified
///   message (requests, notifications **and responses**) and every report of
///   what it skipped on the returned [`InboundQueue`], bounded by bytes, with
///   the [`Overload`](super::Overload) rules for what does not fit. An
///   oversize response whose id was recovered arrives as
///   [`SkippedFrame::Oversize`](super::SkippedFrame::Oversize) with its id,
///   length and limit, in its place in the stream, so the request it answers
///   can fail at once;
/// * the stderr drain: counted, a bounded tail kept
///   ([`stderr_tail`](Connection::stderr_tail)), lines to `tracing`;
/// * the writer on stdin: one whole frame at a time, each within
///   [`SessionConfig::write_timeout`]; a frame not taken in time ends the
///   connection ([`CloseReason::StdinStalled`]) and stops the child;
/// * a supervisor that reaps the child and says how the connection ended
///   ([`closed`](Connection::closed)).
///
/// [`Connection::shutdown`] closes stdin, waits, sends SIGTERM to the group,
/// waits, sends SIGKILL (on Windows: closes stdin, waits, terminates the
/// job). Dropping the connection kills the tree at once, from `Drop`
/// itself, so it needs no running runtime.
///
/// Needs a tokio runtime with I/O and time enabled.
///
/// ```
/// use mcp_framer_stdio::host::{Connection, Inbound, SessionConfig, ShutdownStage};
/// use mcp_framer_jsonrpc::Id;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // A tiny "server": answers the first request, then reads stdin until EOF.
/// let mut command = tokio::process::Command::new("sh");
/// command.args(["-c", r#"read line; echo '{"jsonrpc":"2.0","id":"a","result":{}}'; cat >/dev/null"#]);
/// let (connection, mut inbound) = Connection::spawn(command, SessionConfig::default())?;
///
/// let frame = connection.encoder().request(&Id::from("a"), "ping", &())?;
/// connection.send(frame).await?;
/// // The response comes in the queue, like everything else.
/// let Some(Inbound::Response(response)) = inbound.recv().await else { panic!() };
/// assert_eq!(response.id(), Some(&Id::from("a")));
/// assert_eq!(connection.metrics().delivered, 1);
///
/// let report = connection.shutdown().await;
/// assert_eq!(report.stage, ShutdownStage::StdinClosed);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Connection {
    writer: Writer,
    metrics: Arc<Metrics>,
    tail: Arc<StderrTail>,
    reason: Arc<Reason>,
    signals: mpsc::Sender<Signal>,
    exit: watch::Receiver<Option<ExitStatus>>,
    closed: watch::Receiver<Option<Arc<Closed>>>,
    pid: Option<u32>,
    killer: Killer,
    config: SessionConfig,
    /// The reader, stderr and writer tasks, stopped by `shutdown`.
    tasks: [AbortHandle; 3],
}

impl Connection {
    /// Spawns `command` as an MCP server on stdio. Returns the connection and
    /// the queue of everything the server writes (see
    /// [`Inbound`](super::Inbound)). Consume the queue, or drop it: a
    /// connection whose queue was dropped answers server requests -32601
    /// (method not found, saying so) and drops the rest, counting both in
    /// [`unconsumed`](MetricsSnapshot::unconsumed).
    pub fn spawn(command: Command, config: SessionConfig) -> io::Result<(Connection, InboundQueue)> {
        Connection::start(command, config, None)
    }

    /// Spawns `command`; with `responses`, the reader hands responses to
    /// them instead of queueing them (a [`Session`](super::Session)).
    pub(crate) fn start(
        mut command: Command,
        config: SessionConfig,
        responses: Option<Arc<dyn Responses>>,
    ) -> io::Result<(Connection, InboundQueue)> {
        command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let (mut child, killer) = tree::spawn(&mut command, config.process_tree)?;
        let piped = || io::Error::other("the child's stdio was not piped");
        let stdin = child.take_stdin().ok_or_else(piped)?;
        let stdout = child.take_stdout().ok_or_else(piped)?;
        let stderr = child.take_stderr().ok_or_else(piped)?;
        let pid = child.id();

        let metrics = Arc::new(Metrics::default());
        let tail = Arc::new(StderrTail::new(config.stderr_tail));
        let (stalled_tx, stalled) = oneshot::channel();
        let (writer, writer_task) =
            Writer::spawn_watched(stdin, config.write_timeout, Arc::clone(&metrics), Some(stalled_tx));
        let (inbound, queue) = inbound_channel();
        let reader =
            Reader::with_metrics(&config, inbound, Arc::clone(&metrics)).attach(writer.clone(), responses.clone());
        // Dropped before the end of stdout (the runtime shuts down, maybe
        // after the server exited and left a process holding stdout): the
        // tree goes, so no read is left pending.
        let mut guard = tree::Guard::for_tree(killer.clone());
        let reader = tokio::spawn(async move {
            let report = reader.run(stdout).await;
            guard.disarm();
            report
        });
        let stderr = tokio::spawn(drain_stderr(stderr, Arc::clone(&tail), Arc::clone(&metrics), config.stderr_log));
        let (signals, signals_rx) = mpsc::channel(8);
        let (exit_tx, exit) = watch::channel(None);
        let (closed_tx, closed) = watch::channel(None);
        let reason = Arc::new(Reason::default());
        let tasks = [reader.abort_handle(), stderr.abort_handle(), writer_task.abort_handle()];
        tokio::spawn(
            Supervisor {
                child,
                killer: killer.clone(),
                signals: signals_rx,
                reader,
                stderr,
                responses,
                tail: Arc::clone(&tail),
                metrics: Arc::clone(&metrics),
                reason: Arc::clone(&reason),
                exit: exit_tx,
                closed: closed_tx,
                grace: config.exit_grace,
                session_gone: false,
                stalled,
                writer: writer.clone(),
                steps: config.shutdown,
            }
            .run(),
        );
        let connection =
            Connection { writer, metrics, tail, reason, signals, exit, closed, pid, killer, config, tasks };
        Ok((connection, queue))
    }

    /// The encoder of what this connection sends, with
    /// [`SessionConfig::max_send`] as its limit.
    pub fn encoder(&self) -> Encoder {
        Encoder::new(self.config.max_send)
    }

    /// Writes one frame (one message and its `\n`, as the
    /// [`encoder`](Connection::encoder) makes them) and waits until it is
    /// written, or failed: within [`SessionConfig::write_timeout`], or the
    /// connection ends ([`CloseReason::StdinStalled`]).
    pub async fn send(&self, frame: Vec<u8>) -> Result<(), WriteError> {
        self.writer.write(frame).await
    }

    /// Queues one frame for the writer without waiting; `false` if the
    /// writer's queue is full or the connection is closed. For callers that
    /// must never wait, such as drop guards sending a cancellation.
    pub fn try_send(&self, frame: Vec<u8>) -> bool {
        self.writer.try_write(frame)
    }

    /// The writer, for the layer above.
    pub(crate) fn writer(&self) -> &Writer {
        &self.writer
    }

    /// The metrics so far.
    pub fn metrics(&self) -> MetricsSnapshot {
        self.metrics.snapshot()
    }

    /// The counters, shared (for the layer above, which counts into them).
    pub(crate) fn counters(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The end of the server's stderr so far.
    pub fn stderr_tail(&self) -> String {
        self.tail.text()
    }

    /// The server's process id (also its process group id on unix when
    /// [`SessionConfig::process_tree`] is on).
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// The configuration in force.
    pub fn config(&self) -> &SessionConfig {
        &self.config
    }

    /// How the connection ended, if it has.
    pub fn closed(&self) -> Option<Arc<Closed>> {
        self.closed.borrow().clone()
    }

    /// Waits until the connection ends (the child exited, or it was ended
    /// on purpose) and says how.
    pub async fn wait_closed(&self) -> Arc<Closed> {
        let mut closed = self.closed.clone();
        let ended = closed.wait_for(Option::is_some).await.map(|closed| closed.clone());
        match ended {
            Ok(Some(closed)) => closed,
            _ => Arc::new(Closed::new(CloseReason::Shutdown, None, self.tail.text())),
        }
    }

    /// Ends the connection as the MCP spec says: close the server's stdin,
    /// wait, SIGTERM, wait, SIGKILL, wait (each wait per
    /// [`SessionConfig::shutdown`]; on Windows: close stdin, wait, terminate
    /// the job, wait); then whatever the server's children
    /// left in its tree is killed, so nothing of the server
    /// outlives the shutdown, whether or not the connection is dropped. The
    /// final metrics are logged at `DEBUG` and returned. Takes `&self` so that a transport shared with a
    /// handle can be stopped from either; a second call finds the child
    /// exited ([`ShutdownStage::AlreadyExited`](super::ShutdownStage::AlreadyExited)).
    pub async fn shutdown(&self) -> ShutdownReport {
        self.reason.set(CloseReason::Shutdown);
        let stage = stop_child(&self.writer, &self.exit, &self.signals, self.config.shutdown).await;
        // Let the supervisor publish the end with the final status.
        let _ = tokio::time::timeout(self.config.exit_grace * 2, self.wait_closed()).await;
        // The server exited (or was killed): what its children left in its
        // group goes too.
        self.kill();
        // Whatever still holds stdout or stderr open is no longer this
        // connection's business.
        for task in &self.tasks {
            task.abort();
        }
        let report = ShutdownReport {
            exit_status: *self.exit.borrow(),
            stage,
            metrics: self.metrics(),
            stderr_tail: self.tail.text(),
        };
        tracing::debug!(metrics = ?report.metrics, stage = ?report.stage, "MCP server session shut down");
        report
    }
}

impl Connection {
    /// Kills what is left of the server at once (what `Drop` does): its
    /// whole tree (what its children left behind too, after a shutdown
    /// whose server exited), or the server alone unless it was reaped. A
    /// plain signal on unix, the job terminated on Windows, so it works with
    /// no runtime running (the supervisor, which also kills the server when
    /// it sees the connection gone, may never run again once the runtime
    /// shuts down). A lone pid is signalled only while the supervisor has
    /// not recorded its exit, so it cannot belong to another process yet; a
    /// group id is not given to a new process while any member of the group
    /// lives, and stopping an empty group or job does nothing.
    pub fn kill(&self) {
        if !self.killer.tree() && self.exit.borrow().is_some() {
            return;
        }
        if let Err(e) = self.killer.kill() {
            tracing::trace!("killing the server (pid {:?}): {e}", self.pid);
        }
    }
}

impl Drop for Connection {
    /// [`kill`](Connection::kill): no process of the server outlives its
    /// connection.
    fn drop(&mut self) {
        self.kill();
    }
}
