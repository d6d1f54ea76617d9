//! What a stdin loop does with a framer event before any method is looked
//! at: a blank line is skipped, a frame that is not a JSON-RPC message and a
//! frame over the transport limit are answered by the transport itself (with
//! the error the JSON-RPC spec calls for, and the request's id when it can
//! be recovered, `null` otherwise), and everything else is a message. One
//! place for these rules: the [stdin loop](super::stdin) applies them.

use super::report::Counters;
use super::writer::Outbox;
use crate::counter::bump;
use crate::preview::{MESSAGE_BYTES, clip};
use mcp_framer::Event;
use mcp_framer_jsonrpc::{ErrorObject, INVALID_REQUEST, Message};

/// What became of one framer event.
pub(crate) enum Screened<'a> {
    /// A JSON-RPC message, parsed, with its frame.
    Message(&'a [u8], Message<'a>),
    /// The transport's own answer (an error response), to be written.
    Reply(Vec<u8>),
    /// Nothing to do (a blank line, the start of an oversize frame, a frame
    /// cut off by EOF); counted and logged.
    Skip,
}

/// Screens `event` under the receive limit `max_frame`, answering through
/// `outbox` (within its send limit); counts and logs what is not a message.
pub(crate) fn screen<'a>(
    event: Event<&'a [u8]>,
    max_frame: usize,
    outbox: &Outbox,
    counters: &Counters,
) -> Screened<'a> {
    match event {
        Event::Frame(frame) => {
            if frame.iter().all(|b| matches!(b, b' ' | b'\t' | b'\r')) {
                // One rule for blank lines: whitespace only (or nothing) is not a
                // message, and gets no reply.
                bump(&counters.blank_lines);
                tracing::debug!(len = frame.len(), "blank line skipped");
                return Screened::Skip;
            }
            match mcp_framer_jsonrpc::parse(frame) {
                Ok(message) => Screened::Message(frame, message),
                Err(err) => {
                    bump(&counters.malformed);
                    tracing::warn!(code = err.code(), id = ?err.id(), %err, "malformed message");
                    let error = ErrorObject::new(err.code(), clip(&err.to_string(), MESSAGE_BYTES));
                    Screened::Reply(outbox.error_frame(err.id(), &error))
                }
            }
        }
        Event::OversizeStarted { seen } => {
            tracing::warn!(seen, "incoming message over the transport limit; discarding it");
            Screened::Skip
        }
        Event::OversizeSkipped { len } => {
            bump(&counters.oversize);
            tracing::warn!(len, max = max_frame, "oversize message discarded");
            Screened::Reply(outbox.error_frame(None, &oversize_error(len, false, max_frame)))
        }
        Event::Truncated { len, oversize: true } => {
            bump(&counters.oversize);
            tracing::warn!(len, max = max_frame, "stdin ended inside an oversize message; discarded");
            let message = format!(
                "message of at least {len} bytes (cut off by the end of stdin) exceeds the transport limit \
                 of {max_frame} bytes"
            );
            Screened::Reply(outbox.error_frame(None, &ErrorObject::new(INVALID_REQUEST, message)))
        }
        Event::Truncated { len, oversize: false } => {
            tracing::warn!(len, "stdin ended inside a message; its bytes were dropped");
            Screened::Skip
        }
    }
}

/// The error a server answers a message over the transport limit with:
/// -32600 (invalid request), sent with a `null` id (the message was never
/// parsed), its message naming the length (`at_least`: the reader stopped
/// counting at `len`) and the limit `max_frame`. The newline transport's
/// answer to an oversize frame; the experimental `stdio-v2` server answers
/// an oversize body with the same error.
///
/// ```
/// use mcp_framer_stdio::server::oversize_error;
/// let error = oversize_error(20, false, 16);
/// assert_eq!(error.code, -32600);
/// assert_eq!(error.message, "message of 20 bytes exceeds the transport limit of 16 bytes");
/// assert_eq!(oversize_error(17, true, 16).message, "message of at least 17 bytes exceeds the transport limit of 16 bytes");
/// ```
pub fn oversize_error(len: u64, at_least: bool, max_frame: usize) -> ErrorObject {
    let at_least = if at_least { "at least " } else { "" };
    ErrorObject::new(
        INVALID_REQUEST,
        format!("message of {at_least}{len} bytes exceeds the transport limit of {max_frame} bytes"),
    )
}
