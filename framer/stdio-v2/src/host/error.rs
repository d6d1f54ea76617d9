//! Why a call or the session failed, in words and in types.

use std::fmt;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;

use mcp_framer_jsonrpc::{EncodeError, ErrorObject, OwnedId};
use mcp_framer_stdio::{Keep, Preview};

/// Why a call (or the session) failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The configured transport and the server's disagree: the child
    /// answered the HTTP/2 preface with newline-delimited JSON-RPC.
    Selection {
        /// A bounded preview of what the child wrote first.
        preview: String,
    },
    /// The child did not start a `stdio-v2` session: it exited, wrote
    /// something that is neither HTTP/2 nor JSON, or nothing within the
    /// startup timeout.
    Startup {
        /// What happened.
        reason: String,
        /// The child's exit status, if it had exited.
        exit_status: Option<ExitStatus>,
        /// The end of its stderr.
        stderr_tail: String,
    },
    /// The server answered with a JSON-RPC error (and this HTTP status).
    Rpc {
        /// The HTTP status of the answer.
        status: u16,
        /// The error object.
        error: ErrorObject,
    },
    /// The answer was not what `stdio-v2` allows (a status without a
    /// JSON-RPC body, a body that is not one JSON-RPC response, another
    /// content type).
    Protocol {
        /// The HTTP status.
        status: u16,
        /// What was wrong, with a bounded preview of the body.
        detail: String,
    },
    /// A response body or an event passed [`HostConfig::max_receive`](super::HostConfig::max_receive); the
    /// stream was reset (the newline host's
    /// `RequestError::Oversize`, for a body counted as it arrives).
    ResponseTooLarge {
        /// The request's method.
        method: String,
        /// Bytes seen when it passed the limit (the body is at least this
        /// long; exact when it came from `content-length`).
        seen: u64,
        /// The limit in bytes.
        max: usize,
    },
    /// No response within [`HostConfig::request_timeout`](super::HostConfig::request_timeout); the stream was
    /// reset (the server cancels the request).
    TimedOut {
        /// The request's method.
        method: String,
        /// The timeout.
        after: Duration,
    },
    /// The server reset the request's stream (`RST_STREAM`), the session
    /// going on: the request was cancelled on the server's side (a
    /// `notifications/cancelled` for it, or the server's own refusal).
    Reset {
        /// The reset's error code.
        reason: String,
    },
    /// The response's id is not its request's (a server that mixed up its
    /// answers); the call fails, the session goes on.
    WrongId {
        /// The request's id.
        expected: OwnedId,
        /// The response's id (`None`: absent).
        got: Option<OwnedId>,
        /// A bounded preview of the response.
        preview: String,
    },
    /// The message could not be encoded.
    Encode(EncodeError),
    /// The session ended: why, the exit status and the stderr tail.
    Closed(Arc<Closed>),
}

/// How a session ended.
#[derive(Debug)]
pub struct Closed {
    /// Why (the HTTP/2 connection's error, the child's exit, a stall...).
    pub reason: String,
    /// The child's exit status, if it had exited.
    pub exit_status: Option<ExitStatus>,
    /// The end of the child's stderr.
    pub stderr_tail: String,
}

impl fmt::Display for Closed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the stdio-v2 session ended: {}", self.reason)?;
        if let Some(status) = self.exit_status {
            write!(f, "; server process {status}")?;
        }
        quote_stderr(f, &self.stderr_tail)
    }
}

fn quote_stderr(f: &mut fmt::Formatter<'_>, tail: &str) -> fmt::Result {
    let tail = tail.trim_end();
    if tail.is_empty() {
        return f.write_str("; stderr was empty");
    }
    write!(f, "; stderr tail:\n{}", Preview::new(tail.as_bytes(), Keep::Tail(1024)))
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Selection { preview } => write!(
                f,
                "selection mismatch: the host is configured for `stdio-v2` (HTTP/2 over stdio) and the server \
                 speaks `stdio` (newline-delimited JSON-RPC): it answered the HTTP/2 preface with: {preview}"
            ),
            Error::Startup { reason, exit_status, stderr_tail } => {
                write!(f, "the server did not start a stdio-v2 session: {reason}")?;
                if let Some(status) = exit_status {
                    write!(f, "; server process {status}")?;
                }
                quote_stderr(f, stderr_tail)
            }
            Error::Rpc { status, error } => write!(f, "the server answered HTTP {status} with {error}"),
            Error::Protocol { status, detail } => write!(f, "unexpected answer (HTTP {status}): {detail}"),
            Error::ResponseTooLarge { method, seen, max } => write!(
                f,
                "the response to {method} passed the transport limit of {max} bytes ({seen} bytes seen); \
                 its stream was reset"
            ),
            Error::TimedOut { method, after } => write!(f, "{method} got no response within {after:?}; cancelled"),
            Error::Reset { reason } => write!(f, "the server reset the request's stream ({reason})"),
            Error::WrongId { expected, got, preview } => write!(
                f,
                "the response's id {} is not the request's ({expected:?}): {preview}",
                got.as_ref().map_or_else(|| "(none)".to_owned(), |id| format!("{id:?}"))
            ),
            Error::Encode(e) => write!(f, "the message could not be encoded: {e}"),
            Error::Closed(closed) => write!(f, "{closed}"),
        }
    }
}

impl std::error::Error for Error {}
