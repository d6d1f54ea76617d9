//! What the framer reports: events and the one error.

use core::fmt;

/// One thing the framer found in the byte stream.
///
/// `F` is the frame type: `&[u8]` from [`Framer::next_event`](crate::Framer::next_event)
/// and [`Push::next_event`](crate::Push::next_event). An in-place parser
/// (simd-json) that needs `&mut [u8]` copies the frame first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Event<F> {
    /// A complete message, without its `\n` (and without its trailing `\r`
    /// when [`Config::strip_cr`](crate::Config::strip_cr) is on). At most
    /// [`Config::max_frame`](crate::Config::max_frame) bytes. Not validated:
    /// it may hold any bytes except `\n`.
    Frame(F),
    /// A candidate frame passed the limit. Reported as soon as that is
    /// certain, before its `\n` arrives, so a host can act early. `seen` is the
    /// number of the frame's bytes the framer had been given at that moment:
    /// at least `max_frame + 1`, and dependent on how the bytes were chunked.
    /// Its bytes are being discarded ([`OversizePolicy::Skip`](crate::OversizePolicy::Skip);
    /// under [`OversizePolicy::Fail`](crate::OversizePolicy::Fail) the framer
    /// returns [`FrameError::Oversize`] instead).
    OversizeStarted {
        /// Bytes of the frame seen so far.
        seen: u64,
    },
    /// The `\n` that ends an oversize frame arrived; the frame was discarded
    /// and framing continues after it. `len` is the frame's exact length,
    /// measured as [`Config::max_frame`](crate::Config::max_frame) measures it.
    /// Always preceded by [`Event::OversizeStarted`] for the same frame.
    OversizeSkipped {
        /// The exact length of the discarded frame.
        len: u64,
    },
    /// End of stream arrived with a partial frame (bytes but no `\n`). The
    /// partial frame is never delivered as a frame.
    Truncated {
        /// Bytes of the partial frame.
        len: u64,
        /// `true` if the partial frame was an oversize frame being discarded
        /// (its bytes are in `discarded_bytes`, not `truncated_bytes`).
        oversize: bool,
    },
}

impl<F> Event<F> {
    /// The frame, if this is [`Event::Frame`].
    pub fn frame(self) -> Option<F> {
        match self {
            Event::Frame(frame) => Some(frame),
            _ => None,
        }
    }

    /// Maps the frame type, leaving the other events unchanged.
    pub fn map<G>(self, f: impl FnOnce(F) -> G) -> Event<G> {
        match self {
            Event::Frame(frame) => Event::Frame(f(frame)),
            Event::OversizeStarted { seen } => Event::OversizeStarted { seen },
            Event::OversizeSkipped { len } => Event::OversizeSkipped { len },
            Event::Truncated { len, oversize } => Event::Truncated { len, oversize },
        }
    }
}

/// The framer stopped. Returned by every event call once it happened, so the
/// host can end the session and restart it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FrameError {
    /// A frame passed the limit under [`OversizePolicy::Fail`](crate::OversizePolicy::Fail).
    Oversize {
        /// Bytes of the frame seen when the limit was passed (at least
        /// `max_frame + 1`).
        seen: u64,
        /// The limit in force.
        max_frame: u64,
    },
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::Oversize { seen, max_frame } => {
                write!(f, "frame exceeds the transport limit: {seen} bytes seen, limit {max_frame} bytes")
            }
        }
    }
}

impl core::error::Error for FrameError {}
