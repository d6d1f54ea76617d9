//! Blocking convenience for `std::io::Read` sources (feature `std`).

use std::io::{ErrorKind, Read};

use crate::Framer;

impl Framer {
    /// Reads once from `reader` straight into the framer's buffer (read-into
    /// mode) and commits what was read. Returns the byte count; `0` means end
    /// of stream, and the framer is then [`finish`](Framer::finish)ed. Retries
    /// on `ErrorKind::Interrupted`. Drain [`next_event`](Framer::next_event)
    /// after every call.
    ///
    /// ```
    /// use mcp_framer::{Config, Event, Framer};
    ///
    /// let mut stdin: &[u8] = b"{\"jsonrpc\":\"2.0\",\"method\":\"ping\",\"id\":7}\n{\"id\":";
    /// let mut framer = Framer::new(Config::default());
    /// let mut events = Vec::new();
    /// loop {
    ///     let n = framer.read_from(&mut stdin)?;
    ///     // Drain every event after every read, not only frames: a
    ///     // truncated or oversize frame is reported too.
    ///     while let Some(event) = framer.next_event()? {
    ///         events.push(event.map(<[u8]>::to_vec));
    ///     }
    ///     if n == 0 {
    ///         break;
    ///     }
    /// }
    /// assert!(matches!(&events[0], Event::Frame(frame) if frame.starts_with(b"{\"jsonrpc\"")));
    /// assert_eq!(events[1], Event::Truncated { len: 6, oversize: false });
    /// assert!(framer.is_finished());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn read_from<R: Read + ?Sized>(&mut self, reader: &mut R) -> std::io::Result<usize> {
        loop {
            match reader.read(self.spare()) {
                Ok(0) => {
                    self.finish();
                    return Ok(0);
                }
                Ok(n) => {
                    self.commit(n);
                    return Ok(n);
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }
}
