//! Process trees: a child process and everything it starts, stopped as one.
//!
//! On unix the child leads a new process group (`process_group(0)`, so its
//! pid is the group's id) and the group is signalled with rustix. On
//! Windows the child is created in a Job Object of its own by process-wrap
//! (created suspended, assigned to the job, then resumed, so nothing it
//! starts escapes), the job is closed with kill-on-close, and terminating
//! the job ends every process in it.
//!
//! This is the crate's only platform-specific process code: the host's
//! connection and supervisor and the server's scopes use [`spawn`], a
//! [`Child`] to wait on and a [`Killer`] to stop it, and nothing else; the
//! host's tasks also hold a `Guard`, which kills the tree when the runtime
//! drops them before their end.
//!
//! The public part is [`spawn`], [`Child`] and [`Killer::kill`], for a
//! program that drives a child's pipes itself (as `mcp-probe` does) and
//! still wants its whole tree stopped on both platforms:
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use std::process::Stdio;
//! use mcp_framer_stdio::tree;
//!
//! let mut command = tokio::process::Command::new("node");
//! command.arg("server.js").stdin(Stdio::piped()).stdout(Stdio::piped());
//! let (mut child, killer) = tree::spawn(&mut command, true)?;
//! let stdin = child.take_stdin();
//! // ... drive the server ...
//! killer.kill()?; // the server and everything it started
//! let status = child.wait().await?;
//! # drop((stdin, status));
//! # Ok(())
//! # }
//! ```

use std::io;
use std::process::ExitStatus;

use tokio::process::{ChildStderr, ChildStdin, ChildStdout, Command};

/// Spawns `command` (with its stdio as configured and `kill_on_drop`), as
/// the root of a tree of its own when `tree` is set, the child alone
/// otherwise. On unix a tree's `command` gets `process_group(0)`; on
/// Windows its creation flags are the job's (suspended until assigned),
/// and dropping the [`Child`] and every [`Killer`] closes the job, which
/// ends every process in it. The error is the spawn's.
pub fn spawn(command: &mut Command, tree: bool) -> io::Result<(Child, Killer)> {
    command.kill_on_drop(true);
    imp::spawn(command, tree)
}

#[cfg(unix)]
mod imp {
    use std::io;
    use std::process::ExitStatus;

    use rustix::process::{Pid, Signal, kill_process, kill_process_group};
    use tokio::process::{ChildStderr, ChildStdin, ChildStdout, Command};

    pub(crate) fn spawn(command: &mut Command, tree: bool) -> io::Result<(super::Child, super::Killer)> {
        if tree {
            command.process_group(0);
        }
        let child = command.spawn()?;
        let pid = child.id().and_then(|id| i32::try_from(id).ok()).and_then(Pid::from_raw).filter(|p| *p != Pid::INIT);
        Ok((super::Child(Child(child)), super::Killer(Killer { pid, tree })))
    }

    #[derive(Debug)]
    pub(crate) struct Child(tokio::process::Child);

    impl Child {
        pub(crate) fn id(&self) -> Option<u32> {
            self.0.id()
        }
        pub(crate) fn stdin(&mut self) -> Option<ChildStdin> {
            self.0.stdin.take()
        }
        pub(crate) fn stdout(&mut self) -> Option<ChildStdout> {
            self.0.stdout.take()
        }
        pub(crate) fn stderr(&mut self) -> Option<ChildStderr> {
            self.0.stderr.take()
        }
        pub(crate) async fn wait(&mut self) -> io::Result<ExitStatus> {
            self.0.wait().await
        }
        pub(crate) fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
            self.0.try_wait()
        }
    }

    #[derive(Clone, Copy, Debug)]
    pub(crate) struct Killer {
        pid: Option<Pid>,
        tree: bool,
    }

    impl Killer {
        #[cfg(feature = "host")]
        pub(crate) fn tree(&self) -> bool {
            self.tree
        }
        pub(crate) fn kill(&self) -> io::Result<()> {
            self.send(Signal::KILL)
        }
        #[cfg(feature = "host")]
        pub fn terminate(&self) -> io::Result<bool> {
            self.send(Signal::TERM).map(|()| true)
        }
        fn send(&self, signal: Signal) -> io::Result<()> {
            let Some(pid) = self.pid else { return Ok(()) };
            let sent = if self.tree { kill_process_group(pid, signal) } else { kill_process(pid, signal) };
            match sent {
                // The group (or the process) is gone already: nothing to stop.
                Err(rustix::io::Errno::SRCH) => Ok(()),
                sent => sent.map_err(io::Error::from),
            }
        }
    }

    #[cfg(feature = "host")]
    pub(crate) fn failed_status() -> ExitStatus {
        std::os::unix::process::ExitStatusExt::from_raw(-1)
    }
}

#[cfg(windows)]
mod imp {
    use std::fmt;
    use std::future::poll_fn;
    use std::io;
    use std::process::ExitStatus;
    use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

    use process_wrap::tokio::{ChildWrapper, CommandWrap, JobObject, KillOnDrop};
    use tokio::process::{ChildStderr, ChildStdin, ChildStdout, Command};

    /// `ERROR_INTERNAL_ERROR`: seen once when a test fixture was spawned in
    /// a job under Wine 8 in CI, not reproduced in 45 further runs of the
    /// same tests under load.
    const ERROR_INTERNAL_ERROR: i32 = 1359;

    pub(crate) fn spawn(command: &mut Command, tree: bool) -> io::Result<(super::Child, super::Killer)> {
        let child: Box<dyn ChildWrapper> = if tree {
            // One retry on an internal error: a failed job spawn leaves
            // nothing running (process-wrap terminates the suspended child
            // when its job cannot be set up), so trying again is safe.
            match spawn_job(command) {
                Err(e) if e.raw_os_error() == Some(ERROR_INTERNAL_ERROR) => {
                    tracing::warn!("spawning in a job failed ({e}); retrying once");
                    spawn_job(command)?
                }
                spawned => spawned?,
            }
        } else {
            Box::new(command.spawn()?)
        };
        let shared = Arc::new(Mutex::new(child));
        Ok((super::Child(Child { shared: Arc::clone(&shared), tree }), super::Killer(Killer { shared, tree })))
    }

    /// Spawns `command` in a Job Object of its own. process-wrap owns the
    /// command while it spawns; it is given back (with the job's creation
    /// flags) whatever the outcome.
    fn spawn_job(command: &mut Command) -> io::Result<Box<dyn ChildWrapper>> {
        let mut wrap = CommandWrap::from(std::mem::replace(command, Command::new("")));
        wrap.wrap(JobObject).wrap(KillOnDrop);
        let spawned = wrap.spawn();
        *command = wrap.into_command();
        spawned
    }

    type Shared = Arc<Mutex<Box<dyn ChildWrapper>>>;

    fn lock(shared: &Shared) -> MutexGuard<'_, Box<dyn ChildWrapper>> {
        shared.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) struct Child {
        shared: Shared,
        tree: bool,
    }

    impl fmt::Debug for Child {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("Child").field("pid", &self.id()).field("job", &self.tree).finish()
        }
    }

    impl Child {
        pub(crate) fn id(&self) -> Option<u32> {
            lock(&self.shared).id()
        }
        pub(crate) fn stdin(&mut self) -> Option<ChildStdin> {
            lock(&self.shared).stdin().take()
        }
        pub(crate) fn stdout(&mut self) -> Option<ChildStdout> {
            lock(&self.shared).stdout().take()
        }
        pub(crate) fn stderr(&mut self) -> Option<ChildStderr> {
            lock(&self.shared).stderr().take()
        }
        /// Waits for the child itself, not for the whole job (process-wrap's
        /// job wait would block a thread of the blocking pool until the last
        /// process of the tree exits). The wait's state lives in tokio's
        /// child, so a wait future made at each poll, under the lock the
        /// killer shares, resumes the same wait.
        pub(crate) async fn wait(&mut self) -> io::Result<ExitStatus> {
            poll_fn(|cx| {
                let mut child = lock(&self.shared);
                let main: &mut dyn ChildWrapper = if self.tree { child.inner_mut() } else { &mut **child };
                main.wait().as_mut().poll(cx)
            })
            .await
        }
        /// The child itself, as [`wait`](Child::wait).
        pub(crate) fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
            let mut child = lock(&self.shared);
            let main: &mut dyn ChildWrapper = if self.tree { child.inner_mut() } else { &mut **child };
            main.try_wait()
        }
    }

    #[derive(Clone)]
    pub(crate) struct Killer {
        shared: Shared,
        tree: bool,
    }

    impl fmt::Debug for Killer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("Killer").field("job", &self.tree).finish()
        }
    }

    impl Killer {
        #[cfg(feature = "host")]
        pub(crate) fn tree(&self) -> bool {
            self.tree
        }
        /// Terminates the job (every process in it), or the child alone.
        pub(crate) fn kill(&self) -> io::Result<()> {
            match lock(&self.shared).start_kill() {
                // The child has exited and was reaped: nothing left to stop.
                Err(e) if !self.tree && e.kind() == io::ErrorKind::InvalidInput => Ok(()),
                sent => sent,
            }
        }
        #[cfg(feature = "host")]
        /// Windows has no signal that asks a process without a console to
        /// exit: `false`, nothing sent.
        pub fn terminate(&self) -> io::Result<bool> {
            Ok(false)
        }
    }

    #[cfg(feature = "host")]
    pub(crate) fn failed_status() -> ExitStatus {
        std::os::windows::process::ExitStatusExt::from_raw(u32::MAX)
    }
}

/// A spawned child: its pipes, its pid and its exit. Dropping it kills the
/// child (`kill_on_drop`); on Windows the job goes with the last of it and
/// its [`Killer`]s.
#[derive(Debug)]
pub struct Child(imp::Child);

impl Child {
    /// The child's pid; `None` once it has been reaped.
    pub fn id(&self) -> Option<u32> {
        self.0.id()
    }

    /// Takes the child's stdin, if piped and not taken yet.
    pub fn take_stdin(&mut self) -> Option<ChildStdin> {
        self.0.stdin()
    }

    /// Takes the child's stdout, if piped and not taken yet.
    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.0.stdout()
    }

    /// Takes the child's stderr, if piped and not taken yet.
    pub fn take_stderr(&mut self) -> Option<ChildStderr> {
        self.0.stderr()
    }

    /// Waits for the child itself to exit and reaps it (not the rest of its
    /// tree). Cancel-safe.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        self.0.wait().await
    }

    /// The child's exit status if it has exited (and reaps it), `None` while
    /// it runs; never waits. Like [`wait`](Child::wait), the child itself.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        self.0.try_wait()
    }
}

/// Stops a child's tree (or the child alone), from any thread, with no
/// runtime needed: usable from `Drop`. On unix a lone pid must only be
/// signalled while the child is not reaped (it may name another process
/// afterwards); a group id is not reused while any member lives, and a
/// job is a handle of its own, so trees are safe to kill at any time.
#[derive(Clone, Debug)]
pub struct Killer(imp::Killer);

impl Killer {
    #[cfg(feature = "host")]
    /// Whether the child was spawned as the root of a tree.
    pub(crate) fn tree(&self) -> bool {
        self.0.tree()
    }

    /// Kills at once: SIGKILL to the group (or the pid) on unix, the job
    /// (or the process) terminated on Windows. A tree already gone is `Ok`.
    pub fn kill(&self) -> io::Result<()> {
        self.0.kill()
    }

    #[cfg(feature = "host")]
    /// Asks to exit: SIGTERM to the group (or the pid) on unix, `Ok(true)`.
    /// Windows has no such request: `Ok(false)`, nothing sent.
    pub fn terminate(&self) -> io::Result<bool> {
        self.0.terminate()
    }
}

#[cfg(feature = "host")]
/// The status recorded when waiting for a child failed (it was reaped
/// elsewhere): -1 on unix, `u32::MAX` on Windows.
pub(crate) fn failed_status() -> ExitStatus {
    imp::failed_status()
}

/// Kills a tree if it is dropped armed: held by a host task's future, it
/// fires when the runtime shuts down (dropping every task) while the
/// connection still lives. On Windows tokio reads and writes a child's
/// pipes on the blocking pool, and the runtime's shutdown waits for those
/// calls: without the kill, it would wait until the server's whole tree
/// exited by itself.
#[cfg(feature = "host")]
#[derive(Debug)]
pub(crate) struct Guard(Option<Killer>);

#[cfg(feature = "host")]
impl Guard {
    /// Armed with `killer`.
    pub(crate) fn new(killer: Killer) -> Guard {
        Guard(Some(killer))
    }

    /// Armed with `killer` if it stops a tree (safe to kill at any time),
    /// disarmed for a lone child (whose pid may be reused once reaped).
    pub(crate) fn for_tree(killer: Killer) -> Guard {
        Guard(Some(killer).filter(Killer::tree))
    }

    /// The task ended on its own: nothing to kill.
    pub(crate) fn disarm(&mut self) {
        self.0 = None;
    }

    /// The child was reaped: a lone pid is no longer ours to kill (a tree
    /// still is).
    pub(crate) fn reaped(&mut self) {
        if self.0.as_ref().is_some_and(|killer| !killer.tree()) {
            self.0 = None;
        }
    }
}

#[cfg(feature = "host")]
impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(killer) = self.0.take()
            && let Err(e) = killer.kill()
        {
            tracing::trace!("killing the server as its runtime shuts down: {e}");
        }
    }
}
