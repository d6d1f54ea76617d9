//! A zero-copy, byte-counting newline framer for MCP's stdio transport.
//!
//! MCP's stdio transport carries newline-delimited JSON-RPC: UTF-8, one
//! message per line, no embedded newlines. stdio is a bounded byte pipe (64 KiB
//! on Linux), not a message bus: a host that stops draining a server's stdout
//! makes the server block in `write()` and stop reading stdin. This crate's
//! core, [`Framer`], is the piece a transport needs to keep draining safely:
//! it finds frames without copying them, enforces the transport limit in
//! **bytes** before any JSON parsing, discards oversize frames to their `\n`
//! without buffering them, and counts every byte.
//!
//! The core is sans-IO and `no_std` + `alloc`; its only dependency is
//! `memchr`. It contains no `unsafe`.
//!
//! # Contract
//!
//! The rules are stated on [`Framer`] (framing, limit, oversize recovery,
//! memory bound, chunking independence), [`Config`] (defaults), [`Event`]
//! (what is reported) and [`Stats`] (byte accounting).
//!
//! # Example
//!
//! ```
//! use mcp_framer::{Config, Event, Framer, OversizePolicy};
//!
//! let config = Config::DEFAULT.with_max_frame(32).with_oversize(OversizePolicy::Skip);
//! let mut framer = Framer::new(config);
//! let stream = b"{\"id\":1}\r\n\n{\"id\":2,\"big\":\"xxxxxxxxxxxxxxxxxxxxxxxxx\"}\n{\"id\":3}\n{\"id\"";
//!
//! let mut events = Vec::new();
//! for chunk in stream.chunks(7) {
//!     let mut push = framer.push(chunk);
//!     while let Some(event) = push.next_event()? {
//!         events.push(event.map(|frame| String::from_utf8_lossy(frame).into_owned()));
//!     }
//! }
//! framer.finish();
//! while let Some(event) = framer.next_event()? {
//!     events.push(event.map(|frame| String::from_utf8_lossy(frame).into_owned()));
//! }
//!
//! assert_eq!(events[0], Event::Frame("{\"id\":1}".to_string()));
//! assert!(matches!(events[1], Event::OversizeStarted { seen } if seen >= 33));
//! assert_eq!(events[2], Event::OversizeSkipped { len: 42 });
//! assert_eq!(events[3], Event::Frame("{\"id\":3}".to_string()));
//! assert_eq!(events[4], Event::Truncated { len: 5, oversize: false });
//!
//! let stats = framer.stats();
//! assert_eq!((stats.frames, stats.oversize_frames, stats.empty_lines), (2, 1, 1));
//! assert_eq!(stats.accounted_bytes(), stats.bytes_in);
//! # Ok::<(), mcp_framer::FrameError>(())
//! ```
#![cfg_attr(not(feature = "std"), no_std)]
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

extern crate alloc;

mod buffer;
#[cfg(any(test, feature = "check"))]
#[doc(hidden)]
pub mod check;
mod config;
mod event;
mod framer;
#[cfg(feature = "std")]
mod io;
mod newline;
mod push;
mod stats;

pub use config::{Bom, Config, DEFAULT_MAX_FRAME, DEFAULT_READ_SIZE, DEFAULT_RETAIN, EmptyLines, OversizePolicy};
pub use event::{Event, FrameError};
pub use framer::Framer;
pub use push::Push;
pub use stats::Stats;
