//! The process's own stdin and stdout, taken for the protocol, and the
//! signals that end the input: the server's only platform-specific I/O.
//!
//! * unix: fds 0 and 1 are duplicated for the loop, then fd 0 reads
//!   `/dev/null` and fd 1 writes to stderr; `SIGTERM` and `SIGINT` end the
//!   input, and a second one ends the process.
//! * Windows: tokio's stdin and stdout (the standard handles are left as
//!   they are: redirecting them needs `SetStdHandle`, which is `unsafe`, and
//!   this crate has none); Ctrl-C and Ctrl-Break end the input, and a second
//!   one ends the process.

use std::future::Future;
use std::io;

use tokio::io::{AsyncRead, AsyncWrite};

/// The protocol's input: the process's stdin, taken by [`take_stdio`].
pub type Input = Box<dyn AsyncRead + Unpin + Send>;
/// The protocol's output: the process's stdout, taken by [`take_stdio`].
pub type Output = Box<dyn AsyncWrite + Unpin + Send>;

#[cfg(unix)]
mod imp {
    use std::fs::File;
    use std::future::Future;
    use std::io::{self, Write as _};
    use std::os::fd::{AsFd, OwnedFd};
    use std::os::unix::fs::FileTypeExt;

    use super::{Input, Output};

    /// Takes the process's stdio for the protocol: duplicates fds 0 and 1
    /// (close-on-exec) for the serve loop, then points fd 0 at `/dev/null`
    /// and fd 1 at stderr, so that a stray `println!`, a library that
    /// prints, or a child process that inherits stdio can never write into
    /// the protocol stream or read protocol bytes.
    pub(crate) fn take() -> io::Result<(Input, Output)> {
        io::stdout().flush()?;
        let input = File::from(io::stdin().as_fd().try_clone_to_owned()?);
        let output = File::from(io::stdout().as_fd().try_clone_to_owned()?);
        let null = File::open("/dev/null")?;
        rustix::stdio::dup2_stdin(&null)?;
        rustix::stdio::dup2_stdout(io::stderr())?;
        let input: Input = if is_fifo(&input) {
            Box::new(tokio::net::unix::pipe::Receiver::from_owned_fd(OwnedFd::from(input))?)
        } else {
            Box::new(tokio::fs::File::from_std(input))
        };
        let output: Output = if is_fifo(&output) {
            Box::new(tokio::net::unix::pipe::Sender::from_owned_fd(OwnedFd::from(output))?)
        } else {
            Box::new(tokio::fs::File::from_std(output))
        };
        Ok((input, output))
    }

    fn is_fifo(file: &File) -> bool {
        file.metadata().is_ok_and(|meta| meta.file_type().is_fifo())
    }

    /// Resolves to the number of the first `SIGTERM` (15) or `SIGINT` (2).
    /// The next one ends the process as its default action does, from the
    /// signal handler itself (runtime or not): the first one sets the flag
    /// that the handler registered before it (signal-hook's chain, which
    /// tokio's handler is part of) checks.
    pub(crate) fn shutdown_signals() -> io::Result<impl Future<Output = i32> + Send + 'static> {
        use std::sync::Arc;
        use std::sync::atomic::AtomicBool;
        use tokio::signal::unix::{SignalKind, signal};
        let (term, int) = (SignalKind::terminate(), SignalKind::interrupt());
        let (mut on_term, mut on_int) = (signal(term)?, signal(int)?);
        let seen = Arc::new(AtomicBool::new(false));
        for number in [term.as_raw_value(), int.as_raw_value()] {
            signal_hook::flag::register_conditional_default(number, Arc::clone(&seen))?;
            signal_hook::flag::register(number, Arc::clone(&seen))?;
        }
        Ok(async move {
            tokio::select! {
                _ = on_term.recv() => term.as_raw_value(),
                _ = on_int.recv() => int.as_raw_value(),
            }
        })
    }
}

#[cfg(windows)]
mod imp {
    use std::future::Future;
    use std::io::{self, Write as _};

    use super::{Input, Output};

    /// Takes tokio's stdin and stdout (both on the blocking pool: Windows
    /// pipes given as standard handles are synchronous).
    pub(crate) fn take() -> io::Result<(Input, Output)> {
        io::stdout().flush()?;
        Ok((Box::new(tokio::io::stdin()), Box::new(tokio::io::stdout())))
    }

    /// Resolves to the number of the first console control event: Ctrl-C
    /// (`CTRL_C_EVENT` = 0) or Ctrl-Break (`CTRL_BREAK_EVENT` = 1). The next
    /// one ends the process with `STATUS_CONTROL_C_EXIT`, as the default
    /// handler does (from a task: tokio's handler stays registered, and
    /// Windows has no default to restore it to).
    pub(crate) fn shutdown_signals() -> io::Result<impl Future<Output = i32> + Send + 'static> {
        use tokio::signal::windows::{ctrl_break, ctrl_c};
        /// The exit status of a process ended by Ctrl-C.
        const STATUS_CONTROL_C_EXIT: u32 = 0xC000_013A;
        let (mut on_c, mut on_break) = (ctrl_c()?, ctrl_break()?);
        Ok(async move {
            let number = tokio::select! {
                _ = on_c.recv() => 0,
                _ = on_break.recv() => 1,
            };
            tokio::spawn(async move {
                tokio::select! {
                    _ = on_c.recv() => {}
                    _ = on_break.recv() => {}
                }
                std::process::exit(STATUS_CONTROL_C_EXIT as i32)
            });
            number
        })
    }
}

/// Takes the process's stdin and stdout for the protocol (see the module
/// docs for what each platform does to the standard streams). The one read
/// path of each platform is chosen here: on unix, pipes (as a host spawns a
/// server) are read and written without blocking, so neither a pending read
/// nor a stalled write holds a thread and shutting the runtime down never
/// waits on them; anything else (a file, a terminal), and everything on
/// Windows, whose standard handles are synchronous, goes through tokio's
/// blocking pool.
pub(crate) fn take() -> io::Result<(Input, Output)> {
    imp::take()
}

/// Takes the process's stdin and stdout for a protocol stream, exactly as
/// [`Server::serve_stdio`](super::Server::serve_stdio) takes them: on unix
/// fds 0 and 1 are duplicated for the caller, then fd 0 reads `/dev/null`
/// and fd 1 writes to stderr, so that a stray `println!` or a child that
/// inherits stdio cannot write into the stream; on Windows tokio's stdin and
/// stdout, the standard handles left as they are. Call it once, before
/// anything else reads stdin. For a transport of its own on the process's
/// stdio (the experimental `stdio-v2` server).
pub fn take_stdio() -> io::Result<(Input, Output)> {
    take()
}

/// Resolves to the number of the first signal that ends the input:
/// `SIGTERM` (15) or `SIGINT` (2) on unix, Ctrl-C (0) or Ctrl-Break (1) on
/// Windows. Handlers are installed when this is called, for good; once the
/// first signal has arrived, a second one ends the process at once, as if
/// no handler were installed (a user's second Ctrl-C). Public for a
/// transport of its own on the process's stdio, with
/// [`take_stdio`] and [`Server::serve_until`](super::Server::serve_until).
pub fn shutdown_signals() -> io::Result<impl Future<Output = i32> + Send + 'static> {
    imp::shutdown_signals()
}
