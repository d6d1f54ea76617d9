//! Recovering the id of an oversize response: a bounded head and tail of a
//! line that may pass the transport limit, kept from the bytes as they are
//! read, never the whole line.

use mcp_framer::Framer;
use mcp_framer_jsonrpc::{OwnedId, recover_response_id};

use crate::{Keep, Previewer};

/// Bytes kept from each end of a frame that may pass the transport limit, to
/// recover its id if it does ([`recover_response_id`]).
pub const OVERSIZE_GLIMPSE: usize = 4096;

/// Watches the long line of a stream: from the read that may push it over
/// the limit on, keeps [`OVERSIZE_GLIMPSE`] bytes of its head and of its
/// tail, and, once the framer has discarded it as oversize, recovers the id
/// of the response it was.
///
/// Its three steps follow each read: [`before_read`](IdWatch::before_read),
/// [`read`](IdWatch::read) with the bytes just read, and
/// [`after_drain`](IdWatch::after_drain) once the framer's events are
/// handled; in between, [`oversize_started`](IdWatch::oversize_started) and
/// [`oversize_skipped`](IdWatch::oversize_skipped) as the framer reports.
#[derive(Debug, Default)]
pub(crate) struct IdWatch {
    glimpse: Option<Glimpse>,
}

/// A bounded head and tail of the current line.
#[derive(Debug)]
struct Glimpse {
    kept: Previewer,
    /// The line's offset in the stream (to tell it from the next line).
    start: u64,
    /// The framer reported this line oversize.
    oversize: bool,
    /// The line's `\n` arrived.
    ended: bool,
}

impl IdWatch {
    /// Before a read of at most `read_cap` bytes: if the current line (the
    /// bytes buffered after the last drain) plus that read may pass the
    /// framer's limit, starts keeping its head and tail (or goes on).
    pub(crate) fn before_read(&mut self, framer: &Framer, read_cap: usize) {
        if framer.is_discarding() {
            return;
        }
        let partial = framer.buffered_bytes();
        if partial.len().saturating_add(read_cap) <= framer.config().max_frame {
            self.glimpse = None;
            return;
        }
        let start = framer.stats().bytes_in - partial.len() as u64;
        if self.glimpse.as_ref().is_some_and(|glimpse| glimpse.start == start && !glimpse.ended) {
            return;
        }
        let mut kept = Previewer::new(Keep::HeadAndTail { head: OVERSIZE_GLIMPSE, tail: OVERSIZE_GLIMPSE });
        kept.push(partial);
        self.glimpse = Some(Glimpse { kept, start, oversize: false, ended: false });
    }

    /// Keeps the bytes of a chunk just read that continue the line: up to
    /// its `\n`, if the chunk has one.
    pub(crate) fn read(&mut self, chunk: &[u8]) {
        let Some(glimpse) = &mut self.glimpse else { return };
        if glimpse.ended {
            return;
        }
        let end = chunk.iter().position(|&b| b == b'\n');
        glimpse.kept.push(&chunk[..end.unwrap_or(chunk.len())]);
        glimpse.ended = end.is_some();
    }

    /// The framer started discarding a line after `seen` bytes: it is ours
    /// only if we saw exactly its bytes so far.
    pub(crate) fn oversize_started(&mut self, seen: u64) {
        if let Some(glimpse) = &mut self.glimpse {
            glimpse.oversize = glimpse.kept.total_bytes() == seen;
        }
    }

    /// The framer discarded an oversize frame of `len` bytes: its id, if it
    /// can be told safely from the head and tail kept.
    pub(crate) fn oversize_skipped(&mut self, len: u64) -> Option<OwnedId> {
        let glimpse = self.glimpse.take().filter(|glimpse| glimpse.oversize)?;
        // `len` leaves out a stripped `\r`; the glimpse has every raw byte.
        let total = glimpse.kept.total_bytes();
        if total != len && total != len + 1 {
            return None;
        }
        let preview = glimpse.kept.preview();
        recover_response_id(preview.head(), preview.tail(), total)
    }

    /// Stdout ended inside a line: nothing to recover.
    pub(crate) fn truncated(&mut self) {
        self.glimpse = None;
    }

    /// After the framer's events: a long line that ended within the limit
    /// needs no glimpse any more.
    pub(crate) fn after_drain(&mut self) {
        if self.glimpse.as_ref().is_some_and(|glimpse| glimpse.ended && !glimpse.oversize) {
            self.glimpse = None;
        }
    }
}
