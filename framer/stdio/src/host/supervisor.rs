//! The supervisor: one task owns the child process. It signals it, reaps it,
//! and decides when and why the session ends, then fails every pending
//! request with that reason, the exit status and the stderr tail.

use std::process::ExitStatus;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::config::ShutdownConfig;
use super::error::{CloseReason, Closed, WriteError};
use super::metrics::{Metrics, MetricsSnapshot};
use super::reader::{ReaderEnd, ReaderReport, Responses};
use super::stderr::StderrTail;
use super::writer::Writer;
use crate::tree::{self, Child, Killer};

/// How the child was stopped by a shutdown
/// ([`Session::shutdown`](super::Session::shutdown),
/// [`Connection::shutdown`](super::Connection::shutdown)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ShutdownStage {
    /// It had exited before shutdown began.
    AlreadyExited,
    /// It exited after its stdin was closed.
    StdinClosed,
    /// It exited after SIGTERM (unix only: Windows has no such step).
    Terminated,
    /// It exited after SIGKILL to its group (unix) or once its job was
    /// terminated (Windows).
    Killed,
    /// It had not been reaped after SIGKILL and the last wait.
    StillRunning,
}

/// What a shutdown observed.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// The exit status, if the child was reaped.
    pub exit_status: Option<ExitStatus>,
    /// Which step of the sequence it took.
    pub stage: ShutdownStage,
    /// The final metrics (also logged at `DEBUG`).
    pub metrics: MetricsSnapshot,
    /// The end of stderr.
    pub stderr_tail: String,
}

/// A signal for the child.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Signal {
    /// SIGTERM: please exit (unix; nothing is sent on Windows).
    Term,
    /// SIGKILL to the group, or the job terminated.
    Kill,
}

/// The first reason given for ending the session; later ones are ignored.
#[derive(Debug, Default)]
pub(crate) struct Reason(Mutex<Option<CloseReason>>);

impl Reason {
    /// Records `reason` unless one was recorded already.
    pub(crate) fn set(&self, reason: CloseReason) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).get_or_insert(reason);
    }

    fn get(&self) -> Option<CloseReason> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

/// Everything the supervisor owns or reports to.
#[derive(Debug)]
pub(crate) struct Supervisor {
    pub(crate) child: Child,
    /// Stops the child's tree (or the child alone).
    pub(crate) killer: Killer,
    /// Signals from the session; closed when the session is dropped.
    pub(crate) signals: mpsc::Receiver<Signal>,
    pub(crate) reader: JoinHandle<ReaderReport>,
    pub(crate) stderr: JoinHandle<()>,
    /// The request table of a session, failed when the session ends.
    pub(crate) responses: Option<Arc<dyn Responses>>,
    pub(crate) tail: Arc<StderrTail>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) reason: Arc<Reason>,
    pub(crate) exit: watch::Sender<Option<ExitStatus>>,
    pub(crate) closed: watch::Sender<Option<Arc<Closed>>>,
    /// How long to wait, once the child exited or stdout closed, for the
    /// other (and for stderr's end) before the session is declared over.
    pub(crate) grace: Duration,
    /// The session was dropped (its signal channel closed).
    pub(crate) session_gone: bool,
    /// The writer's report of the first write that timed out.
    pub(crate) stalled: oneshot::Receiver<WriteError>,
    /// The writer, to close stdin when the session ends on a stall.
    pub(crate) writer: Writer,
    /// The shutdown sequence's waits, for a session ended on a stall.
    pub(crate) steps: ShutdownConfig,
}

/// The shutdown sequence, for [`Session::shutdown`](super::Session::shutdown)
/// and for a session that ends because the server stopped reading its
/// stdin: close stdin and wait, SIGTERM and wait (unix only), SIGKILL (or
/// terminate the job) and wait, each wait per `steps`. `signals` reaches the
/// supervisor.
pub(crate) async fn stop_child(
    writer: &Writer,
    exit: &watch::Receiver<Option<ExitStatus>>,
    signals: &mpsc::Sender<Signal>,
    steps: ShutdownConfig,
) -> ShutdownStage {
    let exited_within = async |bound: Duration| {
        let mut exit = exit.clone();
        tokio::time::timeout(bound, exit.wait_for(Option::is_some)).await.is_ok_and(|waited| waited.is_ok())
    };
    if exit.borrow().is_some() {
        return ShutdownStage::AlreadyExited;
    }
    let close_stdin_and_wait = async {
        writer.close().await;
        let mut exit = exit.clone();
        exit.wait_for(Option::is_some).await.is_ok()
    };
    if tokio::time::timeout(steps.after_stdin, close_stdin_and_wait).await.unwrap_or(false) {
        return ShutdownStage::StdinClosed;
    }
    if cfg!(unix) {
        let _ = signals.send(Signal::Term).await;
        if exited_within(steps.after_term).await {
            return ShutdownStage::Terminated;
        }
    }
    let _ = signals.send(Signal::Kill).await;
    if exited_within(steps.after_kill).await { ShutdownStage::Killed } else { ShutdownStage::StillRunning }
}

impl Supervisor {
    /// Runs until the child is reaped and the session is closed.
    pub(crate) async fn run(mut self) {
        // Dropped before the end (the runtime shuts down): the tree goes.
        let mut guard = tree::Guard::new(self.killer.clone());
        let mut status: Option<ExitStatus> = None;
        let mut reader_done = false;
        let mut deadline: Option<Instant> = None;
        let mut stall_seen = false;
        // Signals from the stop sequence of a session ended on a stall (made
        // only then: an idle connection holds no channel for it).
        let mut stop_rx: Option<mpsc::Receiver<Signal>> = None;
        while status.is_none() || !reader_done {
            let grace = async {
                match deadline {
                    Some(deadline) => tokio::time::sleep_until(deadline).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                signal = self.signals.recv(), if !self.session_gone => self.on_signal(signal),
                Some(signal) = stopping(&mut stop_rx) => self.signal(signal),
                stalled = &mut self.stalled, if !stall_seen => {
                    stall_seen = true;
                    if let Ok(error) = stalled {
                        let (stop, rx) = mpsc::channel(2);
                        stop_rx = Some(rx);
                        self.end_on_stall(error, stop);
                    }
                }
                waited = self.child.wait(), if status.is_none() => {
                    status = Some(self.reaped(waited));
                    guard.reaped();
                    deadline.get_or_insert_with(|| Instant::now() + self.grace);
                }
                report = &mut self.reader, if !reader_done => {
                    reader_done = true;
                    // A child killed here is reaped within the kill step's
                    // wait (only the kernel is left to wait for), so the
                    // close can report its status even on a loaded machine.
                    let wait = match fatal(report) {
                        Some(reason) => {
                            self.reason.set(reason);
                            self.signal(Signal::Kill);
                            self.grace.max(self.steps.after_kill)
                        }
                        None => self.grace,
                    };
                    deadline.get_or_insert_with(|| Instant::now() + wait);
                }
                () = grace => break,
            }
        }
        if status.is_some() {
            // Let stderr's last lines reach the tail before quoting it.
            let _ = tokio::time::timeout(self.grace, &mut self.stderr).await;
        }
        let reason =
            self.reason.get().unwrap_or(if status.is_some() { CloseReason::Exited } else { CloseReason::StdoutClosed });
        let closed = Arc::new(Closed::new(reason, status, self.tail.text()));
        match closed.reason() {
            CloseReason::Exited if status.is_some_and(|s| s.success()) => tracing::info!("{closed}"),
            CloseReason::Shutdown => tracing::debug!("{closed}"),
            _ => tracing::warn!("{closed}"),
        }
        tracing::debug!(metrics = ?self.metrics.snapshot(), "MCP server session closed");
        self.close(closed);
        if status.is_some() {
            if self.killer.tree() {
                // The server exited within the grace: what it left in its
                // tree goes now, while the tree's id cannot be anyone else's
                // (later kills send nothing once its pipes are closed; see
                // `Connection::may_kill`).
                if let Err(e) = self.killer.kill() {
                    tracing::trace!("sweeping the exited server's tree: {e}");
                }
            }
            if !reader_done {
                // Something it left held its stdout: the connection is over
                // all the same (published above). The reader stops, so its
                // queue ends once what it queued is taken.
                tracing::debug!("the server exited; its stdout still open after {:?}: the reader stops", self.grace);
                self.reader.abort();
            }
        }
        // Stdout closed but the child lives on: keep serving signals until
        // it exits, so it is always reaped.
        while status.is_none() {
            tokio::select! {
                signal = self.signals.recv(), if !self.session_gone => self.on_signal(signal),
                Some(signal) = stopping(&mut stop_rx) => self.signal(signal),
                waited = self.child.wait() => {
                    status = Some(self.reaped(waited));
                    guard.reaped();
                }
            }
        }
        guard.disarm();
        if self.session_gone {
            self.reader.abort();
            self.stderr.abort();
        }
    }

    /// The server stopped reading its stdin: the session ends now (every
    /// pending request fails at once, with that reason), and the child is
    /// stopped by the shutdown sequence, whose signals come back on `stop`.
    fn end_on_stall(&mut self, error: WriteError, stop: mpsc::Sender<Signal>) {
        self.reason.set(CloseReason::StdinStalled(error));
        let reason = self.reason.get().unwrap_or(CloseReason::Shutdown);
        let closed = Arc::new(Closed::new(reason, None, self.tail.text()));
        tracing::warn!("{closed}");
        self.close(closed);
        let (writer, exit, steps) = (self.writer.clone(), self.exit.subscribe(), self.steps);
        tokio::spawn(async move {
            let stage = stop_child(&writer, &exit, &stop, steps).await;
            tracing::debug!("the server that stopped reading its stdin was stopped: {stage:?}");
        });
    }

    /// Publishes how the session ended, then fails every request still
    /// waiting with it: a requester woken by the failure already sees it in
    /// [`Session::closed`](super::Session::closed).
    fn close(&self, closed: Arc<Closed>) {
        self.closed.send_replace(Some(Arc::clone(&closed)));
        if let Some(responses) = &self.responses {
            responses.close(closed);
        }
    }

    /// Handles what came on the signal channel: `None` means the session was
    /// dropped, so the child is killed.
    fn on_signal(&mut self, signal: Option<Signal>) {
        let signal = signal.unwrap_or_else(|| {
            self.session_gone = true;
            Signal::Kill
        });
        self.signal(signal);
    }

    /// Records the exit status of the reaped child.
    fn reaped(&mut self, waited: std::io::Result<ExitStatus>) -> ExitStatus {
        let status = waited.unwrap_or_else(|e| {
            // `wait` fails only if the child was already reaped elsewhere.
            tracing::error!("waiting for the server process failed: {e}");
            tree::failed_status()
        });
        self.metrics.record_exit(status);
        self.exit.send_replace(Some(status));
        status
    }

    /// Sends `signal` to the child (its whole tree when it roots one),
    /// unless it has been reaped already: a reaped pid may belong to another
    /// process by now.
    fn signal(&mut self, signal: Signal) {
        let Some(pid) = self.child.id() else { return };
        let sent = match signal {
            Signal::Term => self.killer.terminate(),
            Signal::Kill => self.killer.kill().map(|()| true),
        };
        match sent {
            Ok(true) => tracing::debug!("sent {signal:?} to the server (pid {pid})"),
            Ok(false) => tracing::debug!("no {signal:?} on this platform for the server (pid {pid})"),
            Err(e) => tracing::warn!("sending {signal:?} to the server (pid {pid}) failed: {e}"),
        }
    }
}

/// The next signal of a stall's stop sequence, if one runs; never otherwise.
async fn stopping(stop: &mut Option<mpsc::Receiver<Signal>>) -> Option<Signal> {
    match stop {
        Some(stop) => stop.recv().await,
        None => std::future::pending().await,
    }
}

/// The reason to end the session, if the reader stopped for one.
fn fatal(report: Result<ReaderReport, tokio::task::JoinError>) -> Option<CloseReason> {
    match report {
        Ok(ReaderReport { end: ReaderEnd::Eof, .. }) => None,
        Ok(ReaderReport { end: ReaderEnd::Oversize(e), .. }) => Some(CloseReason::Oversize(e)),
        Ok(ReaderReport { end: ReaderEnd::Overloaded, .. }) => Some(CloseReason::Overloaded),
        Ok(ReaderReport { end: ReaderEnd::ReadFailed(e), .. }) => Some(CloseReason::ReadFailed(Arc::new(e))),
        Err(e) if e.is_cancelled() => None,
        Err(e) => {
            Some(CloseReason::ReadFailed(Arc::new(std::io::Error::other(format!("the reader task failed: {e}")))))
        }
    }
}
