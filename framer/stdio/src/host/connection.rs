//! The lower layer of the host: one server process and its stdio, without a
//! request table. It spawns, reads, queues, writes and stops; what the
//! messages mean is its user's business.

use std::io;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;

use tokio::process::{ChildStderr, Command};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::AbortHandle;

use super::config::SessionConfig;
use super::error::{CloseReason, Closed, WriteError};
use super::inbound::{InboundQueue, inbound_channel};
use super::metrics::{Metrics, MetricsSnapshot};
use super::owed::Owed;
use super::reader::{Answers, Reader, Responses};
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
///   the [`Overload`](super::Overload) rules for what does not fit (a
///   response to a request sent here is never refused). An
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
    /// The responses owed to this connection's user (none inside a session,
    /// whose request table takes them).
    owed: Option<Arc<Owed>>,
    /// The reader, stderr and writer tasks, in this order, stopped by
    /// `shutdown`. The first two read until the last process holding the
    /// server's stdout or stderr lets go.
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
        let (connection, queue, _) = Connection::start(command, config, None, None)?;
        Ok((connection, queue))
    }

    /// [`spawn`](Connection::spawn), with the server's stderr given
    /// `stderr` instead of drained by the connection: inherited, the null
    /// device, a file, or a pipe whose read end is returned (the caller must
    /// then read it: a server whose stderr pipe fills stops). The stderr
    /// tail then stays empty and nothing of stderr is counted. For a
    /// transport that keeps another SDK's builder shape (rmcp's
    /// `builder(cmd).stderr(..)`).
    pub fn spawn_with_stderr(
        command: Command,
        config: SessionConfig,
        stderr: Stdio,
    ) -> io::Result<(Connection, InboundQueue, Option<ChildStderr>)> {
        Connection::start(command, config, None, Some(stderr))
    }

    /// Spawns `command`; with `responses`, the reader hands responses to
    /// them instead of queueing them (a [`Session`](super::Session)); with
    /// `stderr`, the server's stderr is that, and what it pipes is returned.
    pub(crate) fn start(
        mut command: Command,
        config: SessionConfig,
        responses: Option<Arc<dyn Responses>>,
        stderr: Option<Stdio>,
    ) -> io::Result<(Connection, InboundQueue, Option<ChildStderr>)> {
        let drained = stderr.is_none();
        command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(stderr.unwrap_or_else(Stdio::piped));
        let (mut child, killer) = tree::spawn(&mut command, config.process_tree)?;
        let piped = || io::Error::other("the child's stdio was not piped");
        let stdin = child.take_stdin().ok_or_else(piped)?;
        let stdout = child.take_stdout().ok_or_else(piped)?;
        let stderr = child.take_stderr();
        let pid = child.id();

        let metrics = Arc::new(Metrics::default());
        let tail = Arc::new(StderrTail::new(config.stderr_tail));
        let (stalled_tx, stalled) = oneshot::channel();
        let (writer, writer_task) =
            Writer::spawn_watched(stdin, config.write_timeout, Arc::clone(&metrics), Some(stalled_tx));
        let (inbound, queue) = inbound_channel();
        let owed = responses.is_none().then(Arc::<Owed>::default);
        let answers = match (&responses, &owed) {
            (Some(responses), _) => Answers::Table(Arc::clone(responses)),
            (None, owed) => Answers::Owed(Arc::clone(owed.as_ref().expect("owed without a table"))),
        };
        let reader = Reader::with_metrics(&config, inbound, Arc::clone(&metrics)).attach(writer.clone(), answers);
        // Dropped before the end of stdout (the runtime shuts down, maybe
        // after the server exited and left a process holding stdout): the
        // tree goes, so no read is left pending.
        let mut guard = tree::Guard::for_tree(killer.clone());
        let reader = tokio::spawn(async move {
            let report = reader.run(stdout).await;
            guard.disarm();
            report
        });
        let (stderr, given) = match stderr {
            Some(stderr) if drained => {
                (tokio::spawn(drain_stderr(stderr, Arc::clone(&tail), Arc::clone(&metrics), config.stderr_log)), None)
            }
            given => (tokio::spawn(async {}), given),
        };
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
            Connection { writer, metrics, tail, reason, signals, exit, closed, pid, killer, config, owed, tasks };
        Ok((connection, queue, given))
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
    ///
    /// A request's response becomes owed: it (or its error response, or the
    /// report of its oversize response) is never refused by the overload
    /// policy, until it arrives or a `notifications/cancelled` naming its id
    /// is sent (see [`Overload`](super::Overload)).
    pub async fn send(&self, frame: Vec<u8>) -> Result<(), WriteError> {
        self.note_sending(&frame);
        self.writer.write(frame).await
    }

    /// What `frame` means for the responses owed.
    fn note_sending(&self, frame: &[u8]) {
        if let Some(owed) = &self.owed {
            owed.sending(frame);
        }
    }

    /// Queues one frame for the writer without waiting; `false` if the
    /// writer's queue is full or the connection is closed. For callers that
    /// must never wait, such as drop guards sending a cancellation.
    pub fn try_send(&self, frame: Vec<u8>) -> bool {
        self.note_sending(&frame);
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
        if self.exit.borrow().is_some() && self.killer.tree() {
            // The server was just reaped: what its children left in its tree
            // goes too, now, while the group's id cannot be anyone else's.
            self.sweep();
        }
        // Let the supervisor publish the end with the final status.
        let _ = tokio::time::timeout(self.config.exit_grace * 2, self.wait_closed()).await;
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
    /// shuts down).
    ///
    /// Only what can still be the server's is signalled, however late this
    /// runs (a handle may outlive everything; see [`may_kill`](Connection::may_kill)).
    pub fn kill(&self) {
        if self.may_kill() {
            self.sweep();
        }
    }

    /// Whether [`kill`](Connection::kill) would signal anything now. The
    /// server, while the supervisor has not recorded its exit: its pid is
    /// not free yet. Once it has, its process group only while a process
    /// still holds the server's stdout or stderr open (the reader or the
    /// stderr drain is still reading), since a group id is not given to a
    /// new process while any member lives. After that the group may be
    /// empty and its id given to a stranger: nothing is sent. That is why the
    /// group is swept once at the end instead, right after the server's
    /// reaping: by [`shutdown`](Connection::shutdown), and by the supervisor
    /// when the connection ends. (A Job Object is a handle of its own:
    /// terminating an empty job does nothing.)
    pub fn may_kill(&self) -> bool {
        let reaped = self.exit.borrow().is_some();
        let pipes_held = self.tasks[..2].iter().any(|task| !task.is_finished());
        !reaped || (self.killer.tree() && pipes_held)
    }

    /// Kills the tree (or the server alone), whether or not it can still be
    /// the server's: for the moments when it certainly is.
    fn sweep(&self) {
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

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut command = Command::new("sh");
        command.args(["-c", script]);
        command
    }

    /// A late kill (a handle's, `Drop`'s) signals the server's tree only
    /// while it can still be the server's: the old rule signalled a tree at
    /// any time, long after its group was empty and its id free for reuse.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_late_kill_signals_only_what_can_still_be_the_servers() {
        // The grace is what the second check looks inside: long enough that
        // a loaded machine cannot let it pass between the exit and the check.
        let config = SessionConfig::default().with_exit_grace(std::time::Duration::from_secs(2));
        for tree in [true, false] {
            let config = SessionConfig { process_tree: tree, ..config };
            // Alive: its pid and its group are its own.
            let (connection, _queue) = Connection::spawn(sh("read line"), config).unwrap();
            assert!(connection.may_kill(), "tree {tree}: the server runs");
            // Exited and reaped, a process it left holding its stdout: the
            // group still has a member, so its id is still the server's.
            let (connection, _queue) = Connection::spawn(sh("sleep 5 & exec true"), config).unwrap();
            let mut exit = connection.exit.clone();
            exit.wait_for(Option::is_some).await.unwrap();
            assert_eq!(connection.may_kill(), tree, "tree {tree}: reaped, stdout held until the grace ends");
            // The connection ends: its group was swept, its pipes are closed.
            connection.wait_closed().await;
            tokio::time::timeout(std::time::Duration::from_secs(10), async {
                while connection.may_kill() {
                    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                }
            })
            .await
            .unwrap_or_else(|_| panic!("tree {tree}: a late kill would still signal a group that may be a stranger's"));
        }
    }
}
