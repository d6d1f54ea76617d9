//! [`Head`]: the routing fields of one classified frame (kind, id, method,
//! where its payload lies), parsed once by whoever read the frame and kept
//! beside it, so that nothing downstream parses the frame again. The host's
//! `Received` and the server's `IncomingFrame` both carry one.

use std::ops::Range;

use mcp_framer_jsonrpc::{Id, Kind, Message, OwnedId};

/// The routing fields of a message and where its frame lies in its buffer.
/// The method and the payload are ranges of the frame when they can be (no
/// allocation); their text is read back from the frame.
#[derive(Clone, Debug)]
pub(crate) struct Head {
    /// The frame's bytes in its buffer.
    pub(crate) frame: Range<usize>,
    pub(crate) kind: Kind,
    pub(crate) id: Option<OwnedId>,
    method: Option<Text>,
    /// Where the payload lies in the frame; empty when there is none (a JSON
    /// value is never empty).
    payload: Range<usize>,
}

/// A string field: where its text lies in the frame when it had no escapes
/// (no allocation), or its decoded copy.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Text {
    InFrame(Range<usize>),
    Decoded(Box<str>),
}

impl Head {
    /// The routing fields of `message`, parsed from `frame`, which lies at
    /// `at` in its buffer: no allocation unless the method has escapes or the
    /// id is a string.
    pub(crate) fn new(at: usize, frame: &[u8], message: &Message<'_>) -> Head {
        let payload = message.payload().and_then(|raw| subslice(frame, raw.get().as_bytes()));
        debug_assert_eq!(payload.is_some(), message.payload().is_some(), "the parser borrows payloads from the frame");
        Head {
            frame: at..at + frame.len(),
            kind: message.kind(),
            id: message.id().map(Id::to_owned_id),
            method: message.method().map(|method| match subslice(frame, method.as_bytes()) {
                Some(range) => Text::InFrame(range),
                None => Text::Decoded(method.into()),
            }),
            payload: payload.unwrap_or(0..0),
        }
    }

    /// The same message, its frame at `at` in its buffer.
    #[cfg(feature = "host")]
    pub(crate) fn at(mut self, at: usize) -> Head {
        self.frame = at..at + self.frame.len();
        self
    }

    /// The method (requests and notifications), read from `buffer`, the
    /// buffer the frame lies in.
    pub(crate) fn method<'a>(&'a self, buffer: &'a [u8]) -> Option<&'a str> {
        match self.method.as_ref()? {
            // The parser checked the frame is UTF-8: this re-checks only the
            // method's few bytes.
            Text::InFrame(range) => std::str::from_utf8(&buffer[self.frame.clone()][range.clone()]).ok(),
            Text::Decoded(method) => Some(method),
        }
    }

    /// The payload's raw JSON (`params`, `result` or `error`), read from
    /// `buffer`, the buffer the frame lies in.
    pub(crate) fn payload<'a>(&self, buffer: &'a [u8]) -> Option<&'a str> {
        // The parser checked that the whole frame is UTF-8, so this only
        // re-checks the payload's bytes (vectorised: payloads can be large).
        let range = self.payload.clone();
        if range.is_empty() { None } else { simdutf8::basic::from_utf8(&buffer[self.frame.clone()][range]).ok() }
    }
}

/// Where `part` lies inside `whole`, if it is a subslice of it.
fn subslice(whole: &[u8], part: &[u8]) -> Option<Range<usize>> {
    let start = part.as_ptr().addr().checked_sub(whole.as_ptr().addr())?;
    let end = start.checked_add(part.len())?;
    (end <= whole.len()).then_some(start..end)
}
