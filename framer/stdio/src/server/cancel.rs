//! Cancellation: the [`Scope`] that ties every producer a request starts
//! (child process groups, remote operations, tasks) to its tokio-util
//! [`CancellationToken`].

use std::fmt;
use std::future::Future;
use std::io;
use std::process::ExitStatus;
use std::sync::{Arc, Mutex, PoisonError};

use rustix::process::{Pid, Signal, kill_process_group};
use tokio::process::{Child, Command};
use tokio::task::{AbortHandle, JoinHandle};
use tokio_util::sync::CancellationToken;

/// The work was cancelled before it completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Cancelled;

impl fmt::Display for Cancelled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("cancelled")
    }
}

impl std::error::Error for Cancelled {}

impl From<Cancelled> for io::Error {
    fn from(_: Cancelled) -> io::Error {
        io::Error::new(io::ErrorKind::Interrupted, Cancelled)
    }
}

/// The producers a request owns, so that cancelling it reaches all of them: a
/// [`CancellationToken`] plus the child process groups and tasks started
/// through it. Clones share the same token and producers.
///
/// # Contract
///
/// * [`Scope::cancel`] cancels the token (idempotent; every waiter wakes),
///   then sends `SIGKILL` to every child
///   process group started with [`Scope::spawn_child`] that has not been
///   reaped yet, and aborts every task started with [`Scope::spawn_task`].
///   Work started on a scope that is already cancelled is refused
///   ([`Scope::spawn_child`] returns an error) or stopped at once.
/// * A [`ScopedChild`] dropped before it was reaped has its group killed and is
///   reaped by a background task, so no zombie is left behind.
/// * [`Scope::stop_producers`] does the killing and aborting without
///   cancelling the token; the server calls it when a request's handler
///   returns, so a request's producers never outlive it.
///
/// Each request served by [`Server`](super::Server) has one (see
/// [`Call::scope`](super::Call::scope)); build one with [`Scope::new`] to use
/// [`capture()`](super::capture()) or the helpers outside a server.
///
/// ```
/// use mcp_framer_stdio::server::{Cancelled, Scope};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let scope = Scope::new();
/// let mut child = scope.spawn_child(tokio::process::Command::new("sleep").arg("30"))?;
/// let pid = child.id().unwrap();
/// let remote = scope.abortable(std::future::pending::<()>());
/// scope.cancel(); // kills the `sleep` process group and ends `remote`
/// assert_eq!(remote.await, Err(Cancelled));
/// assert!(!child.wait().await?.success(), "pid {pid} was killed");
/// # Ok::<(), std::io::Error>(())
/// # }).unwrap();
/// ```
#[derive(Clone, Default)]
pub struct Scope {
    token: CancellationToken,
    producers: Arc<Mutex<Producers>>,
}

#[derive(Default)]
struct Producers {
    /// Process groups not reaped yet, with the key that unregisters them.
    groups: Vec<(u64, Pid)>,
    tasks: Vec<AbortHandle>,
    next_key: u64,
}

impl Scope {
    /// A scope with a fresh token and no producers.
    pub fn new() -> Scope {
        Scope::default()
    }

    /// The scope's token. Cancelling it directly cancels the token only; use
    /// [`Scope::cancel`] to stop the producers too.
    pub fn token(&self) -> &CancellationToken {
        &self.token
    }

    /// Whether the scope was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.token.is_cancelled()
    }

    /// Cancels the token, kills (`SIGKILL`) every live child process group and
    /// aborts every task started through this scope. Idempotent.
    pub fn cancel(&self) {
        self.token.cancel();
        self.stop_producers();
    }

    /// Kills every live child process group and aborts every task started
    /// through this scope, without cancelling the token: what the server does
    /// when a request ends, so that its producers never outlive it.
    pub fn stop_producers(&self) {
        let (groups, tasks) = {
            let mut producers = self.lock();
            (std::mem::take(&mut producers.groups), std::mem::take(&mut producers.tasks))
        };
        for (_, pgid) in groups {
            kill_group(pgid);
        }
        for task in tasks {
            task.abort();
        }
    }

    /// Spawns `command` as the leader of a new process group
    /// (`process_group(0)`), owned by this scope: cancelling the scope kills
    /// the whole group, so grandchildren that inherited the child's pipes die
    /// with it. Refused with [`io::ErrorKind::Interrupted`] if the scope is
    /// already cancelled.
    ///
    /// `command`'s stdio is used as configured. Set stdin explicitly (for
    /// example to `Stdio::null()`): a child that inherits the server's stdin
    /// could read protocol bytes. ([`Server::serve_stdio`](super::Server::serve_stdio)
    /// already points fd 0 at `/dev/null` and fd 1 at stderr for this reason.)
    pub fn spawn_child(&self, command: &mut Command) -> io::Result<ScopedChild> {
        command.process_group(0).kill_on_drop(true);
        let mut producers = self.lock();
        // Checked under the lock: `cancel` sets the flag before taking the
        // producers, so a group registered here is always killed.
        if self.is_cancelled() {
            return Err(Cancelled.into());
        }
        let child = command.spawn()?;
        let pgid = child.id().and_then(|pid| Pid::from_raw(pid as i32));
        let key = producers.next_key;
        producers.next_key += 1;
        if let Some(pgid) = pgid {
            producers.groups.push((key, pgid));
        }
        tracing::debug!(pid = child.id(), "spawned child process group");
        Ok(ScopedChild { child: Some(child), pgid, key, producers: Arc::clone(&self.producers) })
    }

    /// Runs a remote operation (or any future) until it completes (`Ok`) or
    /// the scope is cancelled (`Err(Cancelled)`); on cancellation the future
    /// is dropped, which closes the sockets and handles it owns. A
    /// cancellation wins over a future that is ready at the same poll.
    pub async fn abortable<F: Future>(&self, fut: F) -> Result<F::Output, Cancelled> {
        tokio::select! {
            biased;
            () = self.token.cancelled() => Err(Cancelled),
            out = fut => Ok(out),
        }
    }

    /// Spawns a tokio task owned by this scope: cancelling the scope aborts
    /// it. If the scope is already cancelled the task is aborted at once.
    pub fn spawn_task<F>(&self, fut: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let handle = tokio::spawn(fut);
        self.adopt_task(handle.abort_handle());
        handle
    }

    /// Ties an already spawned task to this scope, as
    /// [`spawn_task`](Scope::spawn_task) does.
    pub fn adopt_task(&self, task: AbortHandle) {
        let mut producers = self.lock();
        if self.is_cancelled() {
            task.abort();
            return;
        }
        producers.tasks.retain(|t| !t.is_finished());
        producers.tasks.push(task);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Producers> {
        self.producers.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl fmt::Debug for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let producers = self.lock();
        f.debug_struct("Scope")
            .field("cancelled", &self.is_cancelled())
            .field("groups", &producers.groups.len())
            .field("tasks", &producers.tasks.len())
            .finish()
    }
}

fn kill_group(pgid: Pid) {
    // ESRCH (the group is already gone) is the expected, harmless case.
    if let Err(err) = kill_process_group(pgid, Signal::KILL)
        && err != rustix::io::Errno::SRCH
    {
        tracing::warn!(pgid = pgid.as_raw_nonzero().get(), %err, "could not kill child process group");
    }
}

/// A child process leading its own process group, owned by a [`Scope`].
///
/// Until it is reaped ([`wait`](ScopedChild::wait) returned), cancelling the
/// scope kills its whole group. Dropping it unreaped kills the group too and
/// reaps it in the background. Once reaped, the group is forgotten (its id
/// could be reused), so background processes the child left behind after
/// exiting are not tracked.
pub struct ScopedChild {
    child: Option<Child>,
    pgid: Option<Pid>,
    key: u64,
    producers: Arc<Mutex<Producers>>,
}

impl ScopedChild {
    /// The child's pid, which is also its process group id; `None` once it
    /// has been reaped.
    pub fn id(&self) -> Option<u32> {
        self.child.as_ref().and_then(Child::id)
    }

    /// The tokio child, to take its pipes.
    pub fn child_mut(&mut self) -> &mut Child {
        self.child.as_mut().expect("child present until drop")
    }

    /// Waits for the child to exit and reaps it; its group is then no longer
    /// killed on cancellation. Cancel-safe: dropping this future leaves the
    /// child owned by the scope.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        let status = self.child_mut().wait().await?;
        self.forget_group();
        Ok(status)
    }

    /// Sends `SIGKILL` to the child's whole process group (unless it was
    /// already reaped). Call [`wait`](ScopedChild::wait) afterwards to reap it.
    pub fn kill_group(&self) {
        if let (Some(pgid), Some(_)) = (self.pgid, self.id()) {
            kill_group(pgid);
        }
    }

    fn forget_group(&mut self) {
        let key = self.key;
        let mut producers = self.producers.lock().unwrap_or_else(PoisonError::into_inner);
        producers.groups.retain(|(k, _)| *k != key);
        self.pgid = None;
    }
}

impl Drop for ScopedChild {
    fn drop(&mut self) {
        let Some(pgid) = self.pgid else { return }; // reaped
        let Some(mut child) = self.child.take() else { return };
        // Not reaped: the leader's pid still names this group.
        kill_group(pgid);
        self.forget_group();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = child.wait().await;
            });
        }
        // Outside a runtime, tokio's `kill_on_drop` and orphan reaping take over.
    }
}

impl fmt::Debug for ScopedChild {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScopedChild").field("pid", &self.id()).field("group_owned", &self.pgid.is_some()).finish()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
    }

    fn alive(pid: u32) -> bool {
        // A killed child that is not reaped yet is a zombie ("Z").
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|stat| stat[stat.rfind(')').unwrap() + 2..].split(' ').next() != Some("Z"))
    }

    #[test]
    fn a_cancel_before_the_wait_still_wakes_it() {
        runtime().block_on(async {
            let scope = Scope::new();
            scope.cancel();
            scope.cancel();
            tokio::time::timeout(Duration::from_secs(5), scope.token().cancelled()).await.expect("already cancelled");
            assert_eq!(scope.abortable(std::future::ready(1)).await, Err(Cancelled), "cancellation wins");
        });
    }

    #[test]
    fn a_cancel_wakes_every_waiter_and_wins_over_a_ready_future() {
        runtime().block_on(async {
            let scope = Scope::new();
            let waiters: Vec<_> = (0..3)
                .map(|_| {
                    let scope = scope.clone();
                    tokio::spawn(async move { scope.abortable(std::future::pending::<()>()).await })
                })
                .collect();
            tokio::task::yield_now().await;
            scope.cancel();
            for waiter in waiters {
                let woken = tokio::time::timeout(Duration::from_secs(5), waiter).await.expect("watchdog: not woken");
                assert_eq!(woken.unwrap(), Err(Cancelled));
            }
            // Not cancelled: the future's output.
            assert_eq!(Scope::new().abortable(std::future::ready(7)).await, Ok(7));
        });
    }

    #[test]
    fn cancelling_a_scope_aborts_its_tasks_and_refuses_new_work() {
        runtime().block_on(async {
            let scope = Scope::new();
            let task = scope.spawn_task(std::future::pending::<()>());
            scope.cancel();
            assert!(task.await.unwrap_err().is_cancelled());
            let late = scope.spawn_task(std::future::pending::<()>());
            assert!(late.await.unwrap_err().is_cancelled(), "aborted at once");
            let refused = scope.spawn_child(Command::new("true").stdin(std::process::Stdio::null()));
            assert_eq!(refused.unwrap_err().kind(), io::ErrorKind::Interrupted);
        });
    }

    #[test]
    fn stopping_producers_leaves_the_token_alone() {
        runtime().block_on(async {
            let scope = Scope::new();
            let mut child = scope.spawn_child(Command::new("sleep").arg("30")).unwrap();
            let task = scope.spawn_task(std::future::pending::<()>());
            scope.stop_producers();
            assert!(!scope.is_cancelled());
            // Watchdog: a producer that was not stopped fails the test, not hangs it.
            let watchdog = Duration::from_secs(10);
            let task = tokio::time::timeout(watchdog, task).await.expect("watchdog: task not aborted");
            assert!(task.unwrap_err().is_cancelled());
            let status = tokio::time::timeout(watchdog, child.wait()).await.expect("watchdog: child not killed");
            assert!(!status.unwrap().success(), "killed");
        });
    }

    #[test]
    fn dropping_an_unreaped_child_kills_and_reaps_it() {
        runtime().block_on(async {
            let scope = Scope::new();
            let child = scope.spawn_child(Command::new("sleep").arg("30")).unwrap();
            let pid = child.id().unwrap();
            assert!(alive(pid));
            drop(child);
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            while std::path::Path::new(&format!("/proc/{pid}")).exists() {
                assert!(std::time::Instant::now() < deadline, "child {pid} not reaped");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            assert!(format!("{scope:?}").contains("groups: 0"), "forgotten once reaped: {scope:?}");
        });
    }
}
