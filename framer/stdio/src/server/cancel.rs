//! Cancellation: the [`Scope`] that ties every producer a request starts
//! (child process trees, remote operations, tasks) to its tokio-util
//! [`CancellationToken`].

use std::fmt;
use std::future::Future;
use std::io;
use std::process::ExitStatus;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::process::{ChildStderr, ChildStdin, ChildStdout, Command};
use tokio::task::{AbortHandle, JoinHandle};
use tokio_util::sync::CancellationToken;

use crate::tree::{self, Child, Killer};

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
/// [`CancellationToken`] plus the child process trees (a process group on
/// unix, a Job Object on Windows) and tasks started through it. Clones
/// share the same token and producers.
///
/// # Contract
///
/// * [`Scope::cancel`] cancels the token (idempotent; every waiter wakes),
///   then kills every child process tree started with [`Scope::spawn_child`]
///   that has not been reaped yet (`SIGKILL` to the group on unix, the job
///   terminated on Windows), and aborts every task started with [`Scope::spawn_task`].
///   Work started on a scope that is already cancelled is refused
///   ([`Scope::spawn_child`] returns an error) or stopped at once.
/// * A [`ScopedChild`] dropped before it was reaped has its tree killed and is
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
/// # #[cfg(unix)]
/// let mut command = tokio::process::Command::new("sleep");
/// # #[cfg(unix)]
/// command.arg("30");
/// # #[cfg(windows)]
/// # let mut command = tokio::process::Command::new("ping");
/// # #[cfg(windows)]
/// # command.args(["-n", "30", "127.0.0.1"]);
/// let mut child = scope.spawn_child(&mut command)?;
/// let pid = child.id().unwrap();
/// let remote = scope.abortable(std::future::pending::<()>());
/// scope.cancel(); // kills the child's process tree and ends `remote`
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
    /// Process trees not reaped yet, with the key that unregisters them.
    trees: Vec<(u64, Killer)>,
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

    /// Cancels the token, kills every live child process tree and
    /// aborts every task started through this scope. Idempotent.
    pub fn cancel(&self) {
        self.token.cancel();
        self.stop_producers();
    }

    /// Kills every live child process tree and aborts every task started
    /// through this scope, without cancelling the token: what the server does
    /// when a request ends, so that its producers never outlive it.
    pub fn stop_producers(&self) {
        let (trees, tasks) = {
            let mut producers = self.lock();
            (std::mem::take(&mut producers.trees), std::mem::take(&mut producers.tasks))
        };
        for (_, killer) in trees {
            kill_tree(&killer);
        }
        for task in tasks {
            task.abort();
        }
    }

    /// Spawns `command` as the root of a process tree of its own, owned by
    /// this scope: the leader of a new process group on unix
    /// (`process_group(0)`), the first process of a new Job Object on
    /// Windows (its creation flags are the job's). Cancelling the scope
    /// kills the whole tree, so grandchildren that inherited the child's
    /// pipes die with it. Refused with [`io::ErrorKind::Interrupted`] if the
    /// scope is already cancelled.
    ///
    /// `command`'s stdio is used as configured. Set stdin explicitly (for
    /// example to `Stdio::null()`): a child that inherits the server's stdin
    /// could read protocol bytes. ([`Server::serve_stdio`](super::Server::serve_stdio)
    /// already points fd 0 at `/dev/null` and fd 1 at stderr on unix for
    /// this reason.)
    pub fn spawn_child(&self, command: &mut Command) -> io::Result<ScopedChild> {
        let mut producers = self.lock();
        // Checked under the lock: `cancel` sets the flag before taking the
        // producers, so a tree registered here is always killed.
        if self.is_cancelled() {
            return Err(Cancelled.into());
        }
        let (child, killer) = tree::spawn(command, true)?;
        let key = producers.next_key;
        producers.next_key += 1;
        producers.trees.push((key, killer.clone()));
        tracing::debug!(pid = child.id(), "spawned child process tree");
        Ok(ScopedChild { child: Some(child), killer: Some(killer), key, producers: Arc::clone(&self.producers) })
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
            .field("trees", &producers.trees.len())
            .field("tasks", &producers.tasks.len())
            .finish()
    }
}

fn kill_tree(killer: &Killer) {
    // A tree already gone is the expected, harmless case (`Ok`).
    if let Err(err) = killer.kill() {
        tracing::warn!(%err, "could not kill a child process tree");
    }
}

/// A child process at the root of its own process tree (a process group on
/// unix, a Job Object on Windows), owned by a [`Scope`].
///
/// Until it is reaped ([`wait`](ScopedChild::wait) returned), cancelling the
/// scope kills its whole tree. Dropping it unreaped kills the tree too and
/// reaps it in the background. Once reaped, the tree is forgotten (on unix
/// its group id could be reused), so background processes the child left
/// behind after exiting are not tracked by the scope (on Windows they are
/// killed when the last handle to the job goes, with the `ScopedChild`).
pub struct ScopedChild {
    child: Option<Child>,
    /// `None` once reaped.
    killer: Option<Killer>,
    key: u64,
    producers: Arc<Mutex<Producers>>,
}

impl ScopedChild {
    /// The child's pid (on unix also its process group id); `None` once it
    /// has been reaped.
    pub fn id(&self) -> Option<u32> {
        self.child.as_ref().and_then(Child::id)
    }

    fn child_mut(&mut self) -> &mut Child {
        self.child.as_mut().expect("child present until drop")
    }

    /// Takes the child's stdin, if it was piped and not taken yet.
    pub fn take_stdin(&mut self) -> Option<ChildStdin> {
        self.child_mut().take_stdin()
    }

    /// Takes the child's stdout, if it was piped and not taken yet.
    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.child_mut().take_stdout()
    }

    /// Takes the child's stderr, if it was piped and not taken yet.
    pub fn take_stderr(&mut self) -> Option<ChildStderr> {
        self.child_mut().take_stderr()
    }

    /// Waits for the child to exit and reaps it; its tree is then no longer
    /// killed on cancellation. Cancel-safe: dropping this future leaves the
    /// child owned by the scope.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        let status = self.child_mut().wait().await?;
        self.forget_tree();
        Ok(status)
    }

    /// Kills the child's whole process tree (unless it was already reaped):
    /// `SIGKILL` to the group on unix, the job terminated on Windows. Call
    /// [`wait`](ScopedChild::wait) afterwards to reap it.
    pub fn kill_tree(&self) {
        if let (Some(killer), Some(_)) = (&self.killer, self.id()) {
            kill_tree(killer);
        }
    }

    fn forget_tree(&mut self) {
        let key = self.key;
        let mut producers = self.producers.lock().unwrap_or_else(PoisonError::into_inner);
        producers.trees.retain(|(k, _)| *k != key);
        self.killer = None;
    }
}

impl Drop for ScopedChild {
    fn drop(&mut self) {
        let Some(killer) = self.killer.take() else { return }; // reaped
        let Some(mut child) = self.child.take() else { return };
        // Not reaped: the tree is still ours to kill.
        kill_tree(&killer);
        self.forget_tree();
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
        f.debug_struct("ScopedChild").field("pid", &self.id()).field("tree_owned", &self.killer.is_some()).finish()
    }
}

#[cfg(all(test, unix))]
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
            // Milliseconds; the bound is a hang guard.
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            while std::path::Path::new(&format!("/proc/{pid}")).exists() {
                assert!(std::time::Instant::now() < deadline, "child {pid} not reaped");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            assert!(format!("{scope:?}").contains("trees: 0"), "forgotten once reaped: {scope:?}");
        });
    }
}
