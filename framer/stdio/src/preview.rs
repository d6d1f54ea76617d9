//! Bounded previews of byte streams and bodies: the one cut rule the host
//! (skipped lines, the stderr tail) and the server (subprocess captures, body
//! previews) share.
//!
//! The cut rule is stated on [`Preview`].

#[cfg(feature = "server")]
use std::borrow::Cow;
use std::collections::VecDeque;
use std::fmt;

/// Which part of a stream a [`Preview`] keeps, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Keep {
    /// The first `n` bytes.
    Head(usize),
    /// The last `n` bytes.
    Tail(usize),
    /// The first `head` bytes and the last `tail` bytes after them.
    HeadAndTail {
        /// Bytes kept from the start.
        head: usize,
        /// Bytes kept from the end.
        tail: usize,
    },
}

impl Keep {
    /// The head and tail limits, in bytes.
    pub const fn limits(self) -> (usize, usize) {
        match self {
            Keep::Head(n) => (n, 0),
            Keep::Tail(n) => (0, n),
            Keep::HeadAndTail { head, tail } => (head, tail),
        }
    }
}

/// A bounded, honest preview of a byte stream or body: its first and/or
/// last bytes, cut at a character boundary, with the stream's length and the
/// number of bytes left out.
///
/// # The cut rule
///
/// * Limits count **bytes**. A [`Preview`] keeps at most the first `head`
///   and the last `tail` bytes of a stream ([`Keep`]); head and tail never
///   overlap.
/// * Wherever bytes are left out (between head and tail, after a head-only
///   preview, before a tail-only one, and after the last kept byte of a
///   stream that stopped early), the kept bytes are cut at a UTF-8
///   character boundary: a head loses the unfinished character at its end, a
///   tail the continuation bytes at its start (at most 3 bytes either way).
///   UTF-8 text is therefore never cut inside a character; other bytes are
///   kept as they are.
/// * The counts are exact: `head().len() + tail().len() + dropped_bytes() ==
///   total_bytes()`, the bytes a cut removed included. When the stream
///   stopped before its end ([`Preview::is_complete`] is `false`),
///   `total_bytes` counts the bytes seen and is a lower bound.
/// * Nothing is kept twice and nothing is collected and trimmed afterwards:
///   a [`Previewer`] holds at most `head + tail` bytes, however long the
///   stream.
///
/// ```
/// use mcp_framer_stdio::{Keep, Preview};
///
/// let body = "é".repeat(100); // 200 bytes
/// let preview = Preview::new(body.as_bytes(), Keep::Head(51));
/// assert_eq!(preview.head(), "é".repeat(25).as_bytes()); // 50 bytes, not half a character
/// assert_eq!((preview.total_bytes(), preview.dropped_bytes()), (200, 150));
/// assert_eq!(preview.to_text().lines().last(), Some("[preview: first 50 of 200 bytes; 150 bytes not shown]"));
///
/// let whole = Preview::new(b"INFO listening", Keep::Head(120));
/// assert!(whole.is_whole());
/// assert_eq!(whole.to_text(), "INFO listening");
/// ```
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Preview {
    head: Vec<u8>,
    tail: Vec<u8>,
    total: u64,
    complete: bool,
}

impl Preview {
    /// The preview of a whole body: `bytes` is all of it.
    pub fn new(bytes: &[u8], keep: Keep) -> Preview {
        let mut previewer = Previewer::new(keep);
        previewer.push(bytes);
        previewer.preview()
    }

    /// The head preview of a body of which only the prefix `read` was read
    /// (say, the first bytes of a file or of an HTTP response), keeping at
    /// most `max_head` bytes. `total` is the body's length when known (a file
    /// size, a `Content-Length`); without it the preview is not
    /// [complete](Preview::is_complete) and `total_bytes` is `read.len()`.
    ///
    /// ```
    /// use mcp_framer_stdio::Preview;
    ///
    /// let known = Preview::of_prefix(b"hello world", Some(1 << 20), 5);
    /// assert_eq!((known.head(), known.dropped_bytes()), (&b"hello"[..], (1 << 20) - 5));
    /// let unknown = Preview::of_prefix("aé€".as_bytes(), None, 100); // the prefix may end mid-character
    /// assert!(!unknown.is_complete() && !unknown.is_whole());
    /// assert_eq!(unknown.to_text(), "aé€\n[preview: first 6 of at least 6 bytes; the rest not shown]");
    /// ```
    pub fn of_prefix(read: &[u8], total: Option<u64>, max_head: usize) -> Preview {
        let mut previewer = Previewer::new(Keep::Head(max_head));
        previewer.push(read);
        match total {
            Some(total) => {
                let total = total.max(previewer.total);
                let head = &previewer.head[..];
                cut(head, &[], total, true)
            }
            None => previewer.preview_partial(),
        }
    }

    /// The first bytes kept.
    pub fn head(&self) -> &[u8] {
        &self.head
    }

    /// The last bytes kept (after the head, never overlapping it).
    pub fn tail(&self) -> &[u8] {
        &self.tail
    }

    /// The stream's length in bytes (a lower bound when the preview is not
    /// [complete](Preview::is_complete)).
    pub fn total_bytes(&self) -> u64 {
        self.total
    }

    /// Bytes of the stream kept in neither the head nor the tail.
    pub fn dropped_bytes(&self) -> u64 {
        self.total - self.head.len() as u64 - self.tail.len() as u64
    }

    /// Whether [`total_bytes`](Preview::total_bytes) is the stream's exact
    /// length: the stream was seen to its end, or its length was known.
    /// `false` for a stream abandoned early or a body of which only a prefix
    /// of unknown length was read.
    pub fn is_complete(&self) -> bool {
        self.complete
    }

    /// Whether every byte of the stream is in the head and the tail.
    pub fn is_whole(&self) -> bool {
        self.complete && self.dropped_bytes() == 0
    }

    /// Whether the kept bytes look binary: not UTF-8, or holding a NUL byte.
    /// (The cut rule never makes UTF-8 text look binary.)
    pub fn is_binary(&self) -> bool {
        let binary = |part: &[u8]| std::str::from_utf8(part).is_err() || part.contains(&0);
        binary(&self.head) || binary(&self.tail)
    }

    /// The size, for markers: `"N bytes"`, or `"at least N bytes"`.
    pub(crate) fn size_text(&self) -> String {
        if self.complete { format!("{} bytes", self.total) } else { format!("at least {} bytes", self.total) }
    }

    /// The marker that says what was left out, or `None` if the preview is
    /// whole: `[preview: first H and last T of N bytes; D bytes not shown]`.
    pub fn marker(&self) -> Option<String> {
        if self.is_whole() {
            return None;
        }
        let kept = match (self.head.len(), self.tail.len()) {
            (head, 0) => format!("first {head}"),
            (0, tail) => format!("last {tail}"),
            (head, tail) => format!("first {head} and last {tail}"),
        };
        let dropped = self.dropped_bytes();
        let left = match (self.complete, dropped) {
            (true, _) => format!("{dropped} bytes"),
            (false, 0) => "the rest".to_owned(),
            (false, _) => format!("at least {dropped} bytes"),
        };
        Some(format!("[preview: {kept} of {}; {left} not shown]", self.size_text()))
    }

    /// The kept bytes as text (invalid UTF-8 becomes U+FFFD), with the
    /// [marker](Preview::marker) on its own line where bytes were left out.
    pub fn to_text(&self) -> String {
        let mut out = String::from_utf8_lossy(&self.head).into_owned();
        if let Some(marker) = self.marker() {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(&marker);
            if !self.tail.is_empty() {
                out.push('\n');
            }
        }
        out.push_str(&String::from_utf8_lossy(&self.tail));
        out
    }
}

impl fmt::Display for Preview {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_text())
    }
}

impl fmt::Debug for Preview {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut debug = f.debug_struct("Preview");
        debug.field("head", &String::from_utf8_lossy(&self.head));
        if !self.tail.is_empty() {
            debug.field("tail", &String::from_utf8_lossy(&self.tail));
        }
        debug
            .field("total_bytes", &self.total)
            .field("dropped_bytes", &self.dropped_bytes())
            .field("complete", &self.complete)
            .finish()
    }
}

/// Keeps a bounded [`Preview`] of a stream fed to it in pieces: at most the
/// [`Keep`] limits in memory (see [`Preview`] for the cut rule), whatever the stream's length, and exact counts.
///
/// ```
/// use mcp_framer_stdio::{Keep, Previewer};
///
/// let mut stderr = Previewer::new(Keep::Tail(8));
/// stderr.push(b"hello ");
/// stderr.push(b"world\n");
/// let preview = stderr.preview();
/// assert_eq!(preview.tail(), b"o world\n");
/// assert_eq!((preview.total_bytes(), preview.dropped_bytes()), (12, 4));
/// ```
#[derive(Clone, Debug)]
pub struct Previewer {
    head_limit: usize,
    tail_limit: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: u64,
}

impl Previewer {
    /// An empty previewer keeping `keep`.
    pub fn new(keep: Keep) -> Previewer {
        let (head_limit, tail_limit) = keep.limits();
        Previewer { head_limit, tail_limit, head: Vec::new(), tail: VecDeque::new(), total: 0 }
    }

    /// Feeds the next bytes of the stream.
    pub fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let take = (self.head_limit - self.head.len()).min(bytes.len());
        self.head.extend_from_slice(&bytes[..take]);
        bytes = &bytes[take..];
        if bytes.len() >= self.tail_limit {
            self.tail.clear();
            self.tail.extend(&bytes[bytes.len() - self.tail_limit..]);
            return;
        }
        let overflow = (self.tail.len() + bytes.len()).saturating_sub(self.tail_limit);
        self.tail.drain(..overflow);
        self.tail.extend(bytes);
    }

    /// Bytes fed so far.
    pub fn total_bytes(&self) -> u64 {
        self.total
    }

    /// The preview of the stream so far, taken as complete: its total is
    /// exact.
    pub fn preview(&self) -> Preview {
        let (front, back) = self.tail.as_slices();
        cut(&self.head, &[front, back].concat(), self.total, true)
    }

    /// The preview of a stream that stopped before its end (abandoned, or
    /// only partly read): not [complete](Preview::is_complete), and its last
    /// kept bytes are cut at a character boundary too.
    pub fn preview_partial(&self) -> Preview {
        let (front, back) = self.tail.as_slices();
        cut(&self.head, &[front, back].concat(), self.total, false)
    }
}

/// Applies the cut rule to raw head and tail bytes of a stream of `total`
/// bytes.
fn cut(head: &[u8], tail: &[u8], total: u64, complete: bool) -> Preview {
    let mut head = head;
    let mut tail = tail;
    if total > (head.len() + tail.len()) as u64 {
        head = &head[..whole_chars_end(head)];
        tail = &tail[continuation_prefix(tail)..];
    }
    if !complete {
        if tail.is_empty() {
            head = &head[..whole_chars_end(head)];
        } else {
            tail = &tail[..whole_chars_end(tail)];
        }
    }
    Preview { head: head.to_vec(), tail: tail.to_vec(), total, complete }
}

/// The length of `bytes` without an unfinished UTF-8 character at its end
/// (a lead byte whose continuation bytes are missing).
fn whole_chars_end(bytes: &[u8]) -> usize {
    let n = bytes.len();
    for back in 1..=n.min(4) {
        let byte = bytes[n - back];
        if byte & 0xC0 == 0x80 {
            continue; // a continuation byte: look further back for its lead
        }
        let width = match byte {
            0x00..=0x7F => 1,
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => return n, // not a lead byte: not text we could cut better
        };
        return if width > back { n - back } else { n };
    }
    n
}

/// How many continuation bytes (at most 3) start `bytes`: the rest of a
/// character whose start was left out.
fn continuation_prefix(bytes: &[u8]) -> usize {
    bytes.iter().take(3).take_while(|&&b| b & 0xC0 == 0x80).count()
}

// Text from a peer, quoted in a message: a bounded head by the same cut rule.

/// The most bytes of a client-supplied name (a method or tool name, an id)
/// an error message echoes.
#[cfg(feature = "server")]
pub(crate) const ECHO_BYTES: usize = 64;

/// The most bytes of a message built from client input (a parser's
/// complaint, which may quote it).
#[cfg(feature = "server")]
pub(crate) const MESSAGE_BYTES: usize = 512;

/// A name as error messages echo it: [`clip`] to [`ECHO_BYTES`].
#[cfg(feature = "server")]
pub(crate) fn excerpt(text: &str) -> Cow<'_, str> {
    clip(text, ECHO_BYTES)
}

/// `text` whole if it is at most `max` bytes, else its first bytes cut by
/// [`Preview`]'s rule (never inside a character), then `…` and the full
/// length: at most `max` + 26 bytes.
#[cfg(feature = "server")]
pub(crate) fn clip(text: &str, max: usize) -> Cow<'_, str> {
    let preview = Preview::new(text.as_bytes(), Keep::Head(max));
    if preview.is_whole() {
        return Cow::Borrowed(text);
    }
    // The head of UTF-8 text, cut at a character boundary, is UTF-8.
    let head = String::from_utf8_lossy(preview.head());
    Cow::Owned(format!("{head}… ({} bytes)", preview.total_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Text full of 1-, 2-, 3- and 4-byte characters.
    fn mixed_text(chars: usize) -> String {
        ["a", "é", "€", "𝄞", "\n"].iter().cycle().take(chars).copied().collect()
    }

    fn check(preview: &Preview, stream: &[u8], keep: Keep) {
        let (head_limit, tail_limit) = keep.limits();
        let (head, tail) = (preview.head(), preview.tail());
        assert!(head.len() <= head_limit && tail.len() <= tail_limit, "{preview:?} over {keep:?}");
        assert_eq!(head.len() as u64 + tail.len() as u64 + preview.dropped_bytes(), preview.total_bytes());
        assert!(stream.starts_with(head) && stream.ends_with(tail), "{preview:?}");
        assert!(head.len() + tail.len() <= stream.len(), "head and tail overlap");
        if let Ok(text) = std::str::from_utf8(stream) {
            assert!(!preview.is_binary(), "UTF-8 cut inside a character: {preview:?}");
            // The cuts are the nearest character boundaries to the limits.
            if preview.dropped_bytes() > 0 {
                let head_end = (0..=head_limit.min(text.len())).rev().find(|&i| text.is_char_boundary(i)).unwrap();
                assert_eq!(head.len(), head_end, "{preview:?}");
                let tail_start = (text.len().saturating_sub(tail_limit)..=text.len())
                    .find(|&i| text.is_char_boundary(i) && i >= head_end)
                    .unwrap();
                assert_eq!(tail.len(), text.len() - tail_start, "{preview:?}");
            }
        }
    }

    #[test]
    fn every_split_and_every_limit_keeps_the_counts_exact_and_the_characters_whole() {
        let text = mixed_text(300);
        let binary: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        for stream in [text.as_bytes(), &binary[..]] {
            for keep in [
                Keep::Head(0),
                Keep::Head(7),
                Keep::Tail(7),
                Keep::Head(100),
                Keep::Tail(100),
                Keep::HeadAndTail { head: 70, tail: 131 },
                Keep::HeadAndTail { head: 1, tail: 2 },
                Keep::HeadAndTail { head: 10_000, tail: 10 },
            ] {
                for chunk in [1, 2, 3, 5, 99, 4096] {
                    let mut previewer = Previewer::new(keep);
                    for piece in stream.chunks(chunk) {
                        previewer.push(piece);
                    }
                    let preview = previewer.preview();
                    assert_eq!(preview, Preview::new(stream, keep), "chunking changes nothing");
                    assert_eq!(preview.total_bytes(), stream.len() as u64);
                    assert!(preview.is_complete());
                    check(&preview, stream, keep);
                }
            }
        }
    }

    #[test]
    fn raw_bytes_are_kept_exactly_when_nothing_is_cut_at_a_character() {
        let data: Vec<u8> = (0..=255u8).cycle().take(5000).collect();
        for keep in [Keep::Head(100), Keep::Tail(100), Keep::HeadAndTail { head: 70, tail: 130 }] {
            let preview = Preview::new(&data, keep);
            let (head, tail) = keep.limits();
            assert_eq!(preview.head(), &data[..head]);
            assert_eq!(preview.tail(), &data[data.len() - tail..]);
            assert_eq!(preview.dropped_bytes(), (data.len() - head - tail) as u64);
        }
    }

    #[test]
    fn a_whole_stream_is_never_cut() {
        // Head and tail together hold everything: no gap, no cut, even
        // where the limit falls inside a character.
        let text = "aé€𝄞";
        let preview = Preview::new(text.as_bytes(), Keep::HeadAndTail { head: 2, tail: 8 });
        assert!(preview.is_whole() && preview.marker().is_none());
        assert_eq!((preview.head(), preview.tail()), (&b"a\xC3"[..], &text.as_bytes()[2..]));
        assert_eq!(preview.to_text(), "a\u{fffd}\u{fffd}€𝄞", "the halves are bytes; only the text is lossy");
    }

    #[test]
    fn the_tail_drops_the_rest_of_a_character_it_starts_in() {
        let preview = Preview::new("ab\u{e9}cd".as_bytes(), Keep::Tail(3)); // keeps A9 'c' 'd' raw
        assert_eq!(preview.tail(), b"cd");
        assert_eq!(preview.dropped_bytes(), 4);
        assert_eq!(preview.to_text(), "[preview: last 2 of 6 bytes; 4 bytes not shown]\ncd");
    }

    #[test]
    fn markers_say_what_was_kept_and_what_was_not() {
        let data = b"0123456789";
        let both = Preview::new(data, Keep::HeadAndTail { head: 2, tail: 3 });
        assert_eq!(both.to_text(), "01\n[preview: first 2 and last 3 of 10 bytes; 5 bytes not shown]\n789");
        let tail = Preview::new(data, Keep::Tail(3));
        assert_eq!(tail.marker().unwrap(), "[preview: last 3 of 10 bytes; 7 bytes not shown]");

        let mut partial = Previewer::new(Keep::Head(4));
        partial.push(b"abcdefgh");
        let partial = partial.preview_partial();
        assert_eq!(partial.to_text(), "abcd\n[preview: first 4 of at least 8 bytes; at least 4 bytes not shown]");
        let prefix = Preview::of_prefix("aé€𝄞".as_bytes(), None, 5);
        assert_eq!(prefix.head(), "aé".as_bytes(), "cut before the 3-byte char");
        assert_eq!(prefix.marker().unwrap(), "[preview: first 3 of at least 10 bytes; at least 7 bytes not shown]");
    }

    #[test]
    fn a_partial_stream_is_cut_after_its_last_whole_character() {
        let mut stream = Previewer::new(Keep::Tail(16));
        stream.push("abc€".as_bytes());
        stream.push(&"€".as_bytes()[..2]); // a write in progress
        assert_eq!(stream.preview_partial().tail(), "abc€".as_bytes());
        assert_eq!(stream.preview_partial().dropped_bytes(), 2);
        assert_eq!(stream.preview().tail().len(), 8, "as complete, the raw bytes stay");
    }

    #[test]
    fn zero_limits_keep_nothing_and_count_everything() {
        let mut nothing = Previewer::new(Keep::HeadAndTail { head: 0, tail: 0 });
        nothing.push(b"abc");
        nothing.push(b"");
        let preview = nothing.preview();
        assert!(preview.head().is_empty() && preview.tail().is_empty());
        assert_eq!((preview.total_bytes(), preview.dropped_bytes()), (3, 3));
        assert_eq!(Preview::new(b"", Keep::Tail(0)).marker(), None);
    }

    #[test]
    fn binary_means_not_utf8_or_nul() {
        assert!(Preview::new(&[0xff, 0xfe, 0, 1], Keep::Head(100)).is_binary());
        assert!(Preview::new(b"text\0more", Keep::Head(100)).is_binary());
        assert!(!Preview::new("tëxt".as_bytes(), Keep::Head(2)).is_binary());
    }

    #[cfg(feature = "server")]
    #[test]
    fn names_are_clipped_at_a_character_boundary_with_their_length() {
        assert_eq!(excerpt("tools/call"), "tools/call");
        let long = "é".repeat(100); // 200 bytes
        let cut = excerpt(&long);
        assert_eq!(cut, format!("{}… (200 bytes)", "é".repeat(32)));
        let odd = format!("a{long}"); // the limit falls inside a character
        assert_eq!(excerpt(&odd), format!("a{}… (201 bytes)", "é".repeat(31)));
        assert!(clip(&"x".repeat(10_000), 512).len() <= 512 + 26);
    }
}
