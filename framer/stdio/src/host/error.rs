//! Why things fail in a host: a session's end ([`Closed`], [`CloseReason`]),
//! a request's failure ([`RequestError`]), a send's ([`SendError`]) and a
//! write's ([`WriteError`]).
//!
//! These are plain data: this module imports no other host module but the
//! message type an error response carries.

use std::fmt;
use std::io;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;

use super::inbound::Received;
use crate::{Keep, Preview};
use mcp_framer::FrameError;
use mcp_framer_jsonrpc::{EncodeError, ErrorObject, INTERNAL_ERROR};

/// Why a session ended.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum CloseReason {
    /// The server exited on its own.
    Exited,
    /// The server closed its stdout but did not exit within the grace period.
    StdoutClosed,
    /// A frame passed the transport limit under
    /// [`OversizePolicy::Fail`](mcp_framer::OversizePolicy::Fail); the server was
    /// killed. Start a new session.
    Oversize(FrameError),
    /// A message did not fit in the inbound queue (see
    /// [`Overload`](super::Overload)) under
    /// [`OverloadPolicy::EndSession`](super::OverloadPolicy::EndSession); the
    /// server was killed.
    Overloaded,
    /// Reading the server's stdout failed; the server was killed.
    ReadFailed(Arc<io::Error>),
    /// The server stopped reading its stdin: a frame could not be written
    /// within [`SessionConfig::write_timeout`](super::SessionConfig::write_timeout). Every pending request failed
    /// at once and the server was stopped as [`Session::shutdown`](super::Session::shutdown) does
    /// (stdin closed, SIGTERM, SIGKILL, per [`SessionConfig::shutdown`](super::SessionConfig::shutdown)).
    StdinStalled(WriteError),
    /// [`Session::shutdown`](super::Session::shutdown) or
    /// [`Connection::shutdown`](super::Connection::shutdown) was called.
    Shutdown,
}

impl fmt::Display for CloseReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CloseReason::Exited => f.write_str("the server exited"),
            CloseReason::StdoutClosed => f.write_str("the server closed its stdout"),
            CloseReason::Oversize(e) => write!(f, "session ended on purpose: {e}; the server was killed"),
            CloseReason::Overloaded => {
                f.write_str("session ended on purpose: the application did not take messages; the server was killed")
            }
            CloseReason::ReadFailed(e) => write!(f, "reading the server's stdout failed ({e}); the server was killed"),
            CloseReason::StdinStalled(e) => {
                write!(
                    f,
                    "session ended on purpose: the server stopped reading its stdin ({e}); the server was stopped"
                )
            }
            CloseReason::Shutdown => f.write_str("the session was shut down"),
        }
    }
}

/// How a session ended: the reason, the exit status and the end of stderr.
/// Every request pending at that moment, and every later one, fails with it.
#[derive(Debug)]
#[non_exhaustive]
pub struct Closed {
    reason: CloseReason,
    exit_status: Option<ExitStatus>,
    stderr_tail: String,
}

/// The most stderr quoted by `Closed`'s `Display`.
const QUOTED_STDERR: usize = 1024;

impl Closed {
    pub(crate) fn new(reason: CloseReason, exit_status: Option<ExitStatus>, stderr_tail: String) -> Closed {
        Closed { reason, exit_status, stderr_tail }
    }

    /// Why the session ended.
    pub fn reason(&self) -> &CloseReason {
        &self.reason
    }

    /// The server's exit status, if it had exited.
    pub fn exit_status(&self) -> Option<ExitStatus> {
        self.exit_status
    }

    /// The end of the server's stderr (at most
    /// [`SessionConfig::stderr_tail`](super::SessionConfig::stderr_tail) bytes, after a marker line saying how
    /// many bytes came before them if any were dropped).
    pub fn stderr_tail(&self) -> &str {
        &self.stderr_tail
    }
}

impl fmt::Display for Closed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.reason)?;
        match (self.exit_status, &self.reason) {
            (Some(status), _) => write!(f, "; server process {status}")?,
            (None, CloseReason::StdinStalled(_)) => {
                f.write_str(if cfg!(windows) {
                    "; the server process was still running when the session closed and is being stopped (stdin closed, then its job terminated)"
                } else {
                    "; the server process was still running when the session closed and is being stopped (stdin closed, then SIGTERM, then SIGKILL)"
                })?
            }
            (None, CloseReason::StdoutClosed) => f.write_str("; the server process was still running when the session closed")?,
            (None, _) => f.write_str("; the server process had not been reaped when the session closed")?,
        }
        let tail = self.stderr_tail.trim_end();
        if tail.is_empty() {
            return f.write_str("; stderr was empty");
        }
        let quoted = Preview::new(tail.as_bytes(), Keep::Tail(QUOTED_STDERR));
        write!(f, "; stderr tail:\n{quoted}")
    }
}

/// Why a request failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum RequestError {
    /// The server answered with a JSON-RPC error.
    Rpc {
        /// The error code.
        code: i64,
        /// The error message.
        message: String,
        /// The whole error response (its payload is the error object, `data`
        /// included), boxed to keep the error small.
        response: Box<Received>,
    },
    /// No response within the timeout, counted from when the request was
    /// written. `notifications/cancelled` was sent (`cancellation_sent`),
    /// except for `initialize`, which is never cancelled; a late response
    /// will be drained, counted and ignored.
    TimedOut {
        /// The request's method.
        method: Box<str>,
        /// The timeout.
        after: Duration,
        /// Whether `notifications/cancelled` was queued.
        cancellation_sent: bool,
        /// Oversize frames skipped while it waited whose id could not be
        /// recovered: one of them may have been its response.
        oversize_skipped: u64,
    },
    /// Its response passed the transport limit
    /// ([`Config::max_frame`](mcp_framer::Config::max_frame)) and was
    /// discarded; its id was recovered from the frame's head or tail, so the
    /// request failed at once. No cancellation is sent: it was answered.
    Oversize {
        /// The request's method.
        method: Box<str>,
        /// The response frame's exact length in bytes.
        len: u64,
        /// The transport limit in bytes.
        max: u64,
    },
    /// [`Session::cancel`](super::Session::cancel) cancelled it.
    Cancelled {
        /// The reason given.
        reason: String,
    },
    /// The session ended before the response came (the error names the exit
    /// status and quotes the stderr tail).
    Closed(Arc<Closed>),
    /// The request could not be written to the server's stdin.
    Write(WriteError),
    /// The message could not be encoded (its params or result did not
    /// serialize), or its frame is over [`SessionConfig::max_send`](super::SessionConfig::max_send)
    /// ([`EncodeError::TooLarge`]). Nothing was written.
    Encode(EncodeError),
}

impl RequestError {
    /// The error for an error response.
    pub(crate) fn from_error_response(response: Received) -> RequestError {
        let (code, message) = match response.deserialize_payload::<ErrorObject>() {
            Ok(error) => (error.code, error.message),
            Err(e) => {
                let payload = Preview::new(response.payload().unwrap_or("").as_bytes(), Keep::Head(120));
                (INTERNAL_ERROR, format!("malformed error object ({e}): {payload}"))
            }
        };
        RequestError::Rpc { code, message, response: Box::new(response) }
    }
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestError::Rpc { code, message, .. } => write!(f, "the server answered with error {code}: {message}"),
            RequestError::TimedOut { method, after, cancellation_sent, oversize_skipped } => {
                write!(f, "{method} got no response within {after:?}")?;
                if *cancellation_sent {
                    f.write_str("; cancellation sent")?;
                }
                match oversize_skipped {
                    0 => Ok(()),
                    n => write!(
                        f,
                        "; {n} oversize frame(s) were skipped while it waited (their ids could not be recovered): \
                         one may have been its response"
                    ),
                }
            }
            RequestError::Oversize { method, len, max } => {
                write!(
                    f,
                    "the response to {method} was {len} bytes, over the transport limit of {max} bytes; discarded"
                )
            }
            RequestError::Cancelled { reason } => write!(f, "cancelled: {reason}"),
            RequestError::Closed(closed) => write!(f, "{closed}"),
            RequestError::Write(e) => write!(f, "{e}"),
            RequestError::Encode(e) => write!(f, "the message could not be encoded: {e}"),
        }
    }
}

impl std::error::Error for RequestError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RequestError::Write(e) => Some(e),
            RequestError::Encode(e) => Some(e),
            _ => None,
        }
    }
}

/// Why a message could not be written to the child's stdin.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum WriteError {
    /// The child did not take the frame within the write timeout (it is not
    /// reading its stdin). If part of the frame was written, stdin can no
    /// longer carry whole frames and every later write fails with
    /// [`WriteError::Broken`].
    TimedOut {
        /// The write timeout.
        after: Duration,
        /// Bytes of the frame written before the timeout.
        written: usize,
        /// The frame's length, its `\n` included.
        len: usize,
    },
    /// Writing failed (typically `BrokenPipe`: the child closed stdin or
    /// exited).
    Io(Arc<io::Error>),
    /// An earlier write left a partial frame on stdin or failed; nothing more
    /// is written.
    Broken,
    /// Stdin was closed by a shutdown or the session ended.
    Closed,
}

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WriteError::TimedOut { after, written, len } => {
                write!(f, "the server did not read its stdin for {after:?} ({written} of {len} frame bytes written)")
            }
            WriteError::Io(e) => write!(f, "writing to the server's stdin failed: {e}"),
            WriteError::Broken => f.write_str("the server's stdin is unusable after an earlier failed write"),
            WriteError::Closed => f.write_str("the server's stdin is closed"),
        }
    }
}

impl std::error::Error for WriteError {}

/// Why a message could not be sent on a [`Connection`](super::Connection).
#[derive(Debug)]
#[non_exhaustive]
pub enum SendError {
    /// It could not be encoded (it did not serialize), or its frame is over
    /// [`SessionConfig::max_send`](super::SessionConfig::max_send)
    /// ([`EncodeError::TooLarge`]). Nothing was written.
    Encode(EncodeError),
    /// It could not be written to the server's stdin.
    Write(WriteError),
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::Encode(e) => write!(f, "the message could not be encoded: {e}"),
            SendError::Write(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for SendError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SendError::Encode(e) => Some(e),
            SendError::Write(e) => Some(e),
        }
    }
}

impl From<SendError> for RequestError {
    fn from(e: SendError) -> RequestError {
        match e {
            SendError::Encode(e) => RequestError::Encode(e),
            SendError::Write(e) => RequestError::Write(e),
        }
    }
}
