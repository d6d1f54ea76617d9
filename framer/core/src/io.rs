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
    /// let mut stdin: &[u8] = b"{\"jsonrpc\":\"2.0\",\"method\":\"ping\",\"id\":7}\n";
    /// let mut framer = Framer::new(Config::default());
    /// let mut count = 0;
    /// while framer.read_from(&mut stdin)? > 0 {
    ///     while let Some(Event::Frame(_frame)) = framer.next_event()? {
    ///         count += 1;
    ///     }
    /// }
    /// assert_eq!(count, 1);
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
