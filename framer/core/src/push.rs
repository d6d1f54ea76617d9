//! Push mode: frame a chunk the caller owns, zero-copy.

use crate::{Event, FrameError, Framer};

impl Framer {
    /// Frames `chunk`, a piece of the stream the caller owns. Drain the
    /// returned [`Push`] with [`Push::next_event`] until it returns `Ok(None)`.
    ///
    /// Frames that lie wholly inside `chunk` come back as slices of `chunk`
    /// itself. Only a partial tail is copied into the framer (and the rest of
    /// a frame whose head an earlier chunk left there). If the `Push` is
    /// dropped before it returns `None`, the unread rest of the chunk is moved
    /// into the framer's buffer, so no byte is lost; later event calls return
    /// it.
    ///
    /// ```
    /// use mcp_framer::{Config, Event, Framer};
    ///
    /// let mut framer = Framer::new(Config::default());
    /// let chunk = b"{\"id\":1}\n{\"id\":2}\n{\"id\"";
    /// let mut push = framer.push(chunk);
    /// let first = push.next_event().unwrap().unwrap();
    /// assert_eq!(first, Event::Frame(&b"{\"id\":1}"[..]));
    /// if let Event::Frame(frame) = first {
    ///     assert!(core::ptr::eq(frame.as_ptr(), chunk.as_ptr())); // zero-copy
    /// }
    /// assert_eq!(push.next_event().unwrap(), Some(Event::Frame(&b"{\"id\":2}"[..])));
    /// assert_eq!(push.next_event().unwrap(), None);
    /// drop(push);
    /// assert_eq!(framer.buffered(), 5); // the partial tail `{"id"`
    /// ```
    ///
    /// # Panics
    ///
    /// After [`finish`](Framer::finish), if `chunk` is not empty.
    pub fn push<'f, 'c>(&'f mut self, chunk: &'c [u8]) -> Push<'f, 'c> {
        assert!(!self.eof || chunk.is_empty(), "push after finish");
        self.stats.bytes_in += chunk.len() as u64;
        self.checkpoint();
        Push { framer: self, chunk, pos: 0 }
    }
}

/// A chunk being framed; see [`Framer::push`].
#[derive(Debug)]
pub struct Push<'f, 'c> {
    framer: &'f mut Framer,
    chunk: &'c [u8],
    pos: usize,
}

impl Push<'_, '_> {
    /// The next event, or `Ok(None)` when the chunk is used up and more input
    /// is needed.
    #[inline(always)]
    pub fn next_event(&mut self) -> Result<Option<Event<&[u8]>>, FrameError> {
        match self.framer.next_plain_pushed(self.chunk, &mut self.pos) {
            Ok(frame) => Ok(frame.map(|range| Event::Frame(&self.chunk[range]))),
            Err(()) => self.next_event_general(),
        }
    }

    /// [`next_event`](Push::next_event) off the fast path, out of line.
    #[inline(never)]
    fn next_event_general(&mut self) -> Result<Option<Event<&[u8]>>, FrameError> {
        let event = self.framer.step(self.chunk, &mut self.pos)?;
        Ok(event.map(|event| event.map(|src| src.slice(self.framer.buf.bytes(), self.chunk))))
    }

    /// The framer, for its counters.
    pub fn framer(&self) -> &Framer {
        self.framer
    }
}

impl Drop for Push<'_, '_> {
    fn drop(&mut self) {
        self.framer.keep_rest(&self.chunk[self.pos..]);
    }
}
