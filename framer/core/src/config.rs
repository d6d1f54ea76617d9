//! Framer configuration: the transport limit and the line rules.

/// Default transport limit: 16 MiB per message.
///
/// Large enough for any tool result a well-behaved server should send (content
/// limits belong in the handler and are far smaller), small enough that one
/// misbehaving server cannot make a host hold more than 16 MiB + one read per
/// session. It matches the limit proposed for rmcp (PR #1049) and sits at the
/// top of the 8–16 MiB range other hosts use; an 8 MiB tool result, with the
/// rest of its JSON-RPC message, still fits.
pub const DEFAULT_MAX_FRAME: usize = 16 * 1024 * 1024;

/// Default amount of spare space lent per read in read-into mode: 64 KiB, one
/// Linux pipe's default capacity, so one `read` can empty a full pipe.
pub const DEFAULT_READ_SIZE: usize = 64 * 1024;

/// Default retention threshold: 512 KiB, eight default reads.
///
/// Storage beyond it is given back after the frame that needed it (see
/// [`Config::retain`]). Eight reads leave room for a stream of 64 KiB frames
/// to be read without moving most bytes twice; a session that once saw a
/// 16 MiB result is back to at most 512 KiB of storage once it is given back.
pub const DEFAULT_RETAIN: usize = 8 * DEFAULT_READ_SIZE;

/// What the framer does when a frame passes [`Config::max_frame`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum OversizePolicy {
    /// Report the frame as soon as it passes the limit
    /// ([`Event::OversizeStarted`](crate::Event::OversizeStarted)), discard
    /// its bytes up to the next `\n` without buffering them, report its exact
    /// length ([`Event::OversizeSkipped`](crate::Event::OversizeSkipped)) and
    /// carry on with the next frame. This is possible because MCP's stdio
    /// framing has an unambiguous end marker.
    #[default]
    Skip,
    /// Report the frame as an error
    /// ([`FrameError::Oversize`](crate::FrameError::Oversize)) and stop: every
    /// later call returns the same error, so the host ends the session and
    /// starts a new one.
    Fail,
}

/// What the framer does with an empty line (a bare `\n`, or `\r\n` when
/// [`Config::strip_cr`] is on).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum EmptyLines {
    /// Skip it and count it in [`Stats::empty_lines`](crate::Stats::empty_lines).
    #[default]
    Skip,
    /// Deliver it as an empty [`Event::Frame`](crate::Event::Frame).
    Deliver,
}

/// What the framer does with a UTF-8 byte order mark (`EF BB BF`) at the very
/// start of the stream. A BOM anywhere else is ordinary frame content.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Bom {
    /// Strip it and count its three bytes in
    /// [`Stats::bom_bytes`](crate::Stats::bom_bytes). MCP requires UTF-8 and
    /// a BOM is never valid JSON, but some Windows tools prepend one, so the
    /// tolerant choice costs nothing and loses nothing.
    #[default]
    Strip,
    /// Keep it as the first bytes of the first frame (the JSON layer will then
    /// reject that frame).
    Keep,
}

/// Framer configuration. Every field has a documented default. Build one
/// from [`Config::DEFAULT`] (or [`Config::default()`]) with the chainable
/// `with_*` setters, which are `const`:
///
/// ```
/// use mcp_framer::{Config, OversizePolicy};
///
/// const CONFIG: Config = Config::DEFAULT.with_max_frame(1 << 20).with_oversize(OversizePolicy::Fail);
/// assert_eq!(CONFIG.max_frame, 1 << 20);
/// assert!(CONFIG.strip_cr);
/// ```
///
/// The fields stay readable; the struct is `#[non_exhaustive]` so that new
/// settings can be added without breaking callers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Config {
    /// The transport limit, in **bytes**: the largest message the framer will
    /// deliver. It counts the bytes of one message without its `\n`, and
    /// without the one trailing `\r` when that is stripped. A frame of exactly
    /// `max_frame` bytes is delivered; `max_frame + 1` is oversize. Default:
    /// [`DEFAULT_MAX_FRAME`] (16 MiB).
    pub max_frame: usize,
    /// What to do with a frame over `max_frame`. Default: [`OversizePolicy::Skip`].
    pub oversize: OversizePolicy,
    /// Strip one `\r` immediately before each `\n`. A bare `\r` is never a
    /// delimiter either way. Default: `true`.
    pub strip_cr: bool,
    /// What to do with empty lines. Default: [`EmptyLines::Skip`].
    pub empty_lines: EmptyLines,
    /// What to do with a UTF-8 BOM at stream start. Default: [`Bom::Strip`].
    pub bom: Bom,
    /// The least spare space [`Framer::spare`](crate::Framer::spare) lends for
    /// one read, in bytes (values below 1 are treated as 1). The framer's
    /// buffer never grows beyond `max_frame + 1 + read_size`. Default:
    /// [`DEFAULT_READ_SIZE`] (64 KiB).
    pub read_size: usize,
    /// The retention threshold, in bytes: buffer storage beyond it is given
    /// back once the frame that needed it is consumed, at the next read that
    /// finds at most one read's worth buffered, with hysteresis so that a
    /// stream of large frames does not reallocate on every frame (the rule is
    /// under [Memory](crate::Framer#memory)). Storage within it is kept, so
    /// frames that fit allocate nothing once the buffer has grown.
    /// `usize::MAX` keeps all storage. Default: [`DEFAULT_RETAIN`] (512 KiB).
    pub retain: usize,
}

impl Config {
    /// The defaults, as a `const`.
    pub const DEFAULT: Config = Config {
        max_frame: DEFAULT_MAX_FRAME,
        oversize: OversizePolicy::Skip,
        strip_cr: true,
        empty_lines: EmptyLines::Skip,
        bom: Bom::Strip,
        read_size: DEFAULT_READ_SIZE,
        retain: DEFAULT_RETAIN,
    };

    /// With another transport limit, in bytes ([`Config::max_frame`]).
    #[must_use]
    pub const fn with_max_frame(mut self, max_frame: usize) -> Config {
        self.max_frame = max_frame;
        self
    }

    /// With another oversize policy ([`Config::oversize`]).
    #[must_use]
    pub const fn with_oversize(mut self, oversize: OversizePolicy) -> Config {
        self.oversize = oversize;
        self
    }

    /// Stripping one trailing `\r` or not ([`Config::strip_cr`]).
    #[must_use]
    pub const fn with_strip_cr(mut self, strip_cr: bool) -> Config {
        self.strip_cr = strip_cr;
        self
    }

    /// With another rule for empty lines ([`Config::empty_lines`]).
    #[must_use]
    pub const fn with_empty_lines(mut self, empty_lines: EmptyLines) -> Config {
        self.empty_lines = empty_lines;
        self
    }

    /// With another rule for a BOM at stream start ([`Config::bom`]).
    #[must_use]
    pub const fn with_bom(mut self, bom: Bom) -> Config {
        self.bom = bom;
        self
    }

    /// With another least read size, in bytes ([`Config::read_size`](Config#structfield.read_size)).
    #[must_use]
    pub const fn with_read_size(mut self, read_size: usize) -> Config {
        self.read_size = read_size;
        self
    }

    /// With another retention threshold, in bytes ([`Config::retain`]).
    #[must_use]
    pub const fn with_retain(mut self, retain: usize) -> Config {
        self.retain = retain;
        self
    }

    /// The most bytes a candidate frame may hold while it is still possibly
    /// within the limit: one more than `max_frame` when a trailing `\r` may
    /// yet be stripped.
    pub(crate) const fn max_candidate(&self) -> usize {
        self.max_frame.saturating_add(self.strip_cr as usize)
    }

    /// The hard cap on the framer's buffer in read-into mode: the largest
    /// candidate plus one read. (A BOM prefix still undecided at stream start
    /// holds up to 2 bytes, which matters only for limits below 2.)
    pub(crate) const fn buffer_cap(&self) -> usize {
        self.max_held().saturating_add(self.read_size())
    }

    /// The most bytes the framer keeps between reads.
    pub(crate) const fn max_held(&self) -> usize {
        if self.max_candidate() < 2 { 2 } else { self.max_candidate() }
    }

    pub(crate) const fn read_size(&self) -> usize {
        if self.read_size == 0 { 1 } else { self.read_size }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config::DEFAULT
    }
}
