//! MCP's stdio transport on tokio, built on the [`mcp_framer`] core and the
//! [`mcp_framer_jsonrpc`] parser.
//!
//! A host, spawning a server (the README's first example; feature `host`):
//!
//! ```rust,no_run
//! # #[cfg(feature = "host")]
//! # mod example {
//! use mcp_framer_stdio::host::{Session, SessionConfig};
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let mut command = tokio::process::Command::new("node");
//!     command.arg("my-server.js");
//!     let (session, mut inbound) = Session::spawn(command, SessionConfig::default())?;
//!     tokio::spawn(async move { while let Some(_message) = inbound.recv().await { /* notifications, server requests */ } });
//!     let tools = session.request("tools/list", &serde_json::json!({})).await?;
//!     println!("{}", tools.payload().unwrap_or("null"));
//!     session.shutdown().await;
//!     Ok(())
//! }
//! # }
//! # fn main() {}
//! ```
//!
//! stdio is a bounded byte pipe (64 KiB on Linux), not a message bus: a host
//! that stops reading a server's stdout makes the server block in `write()`
//! and stop reading stdin. This crate has both ends of the pipe:
//!
//! - [`host`] (feature `host`): spawn a server and drain its stdout for as
//!   long as it runs, whatever the application does with the messages.
//! - [`server`] (feature `server`): a stdin loop that frames and dispatches
//!   but never waits on a handler (it pauses only when the host has stopped
//!   draining stdout past a bounded backlog), a bounded
//!   dispatcher, content budgets, and cancellation that reaches every
//!   producer, child processes included.
//!
//! Neither feature implies the other. Both run on unix and Windows. A
//! server's tree of processes is a process group on unix (signalled) and a
//! Job Object on Windows (terminated); what differs between the two is said
//! where it applies (no SIGTERM step on Windows, Ctrl-C and Ctrl-Break in
//! place of SIGINT and SIGTERM, stdout not redirected to stderr). With
//! either on, the crate root has the bounded
//! [`Preview`] both sides use (skipped lines and the stderr tail on the host,
//! subprocess captures and body previews on the server).
//!
//! Each item has one path: `mcp_framer_stdio::host::…`,
//! `mcp_framer_stdio::server::…`, or the crate root for what both share;
//! [`tree`] is the process-tree spawn and kill both use, public for a
//! program that drives a child's pipes itself.
#![deny(missing_docs)]
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

/// The README's Rust examples, compiled as doctests so that they stay in
/// step with the crate (both features: the README shows both sides).
#[cfg(all(doctest, feature = "host", feature = "server"))]
#[doc = include_str!("../README.md")]
pub struct ReadmeExamples;

#[cfg(any(feature = "host", feature = "server"))]
mod bound;
#[cfg(any(feature = "host", feature = "server"))]
mod counter;
#[cfg(any(feature = "host", feature = "server"))]
mod head;
#[cfg(feature = "host")]
#[cfg_attr(docsrs, doc(cfg(feature = "host")))]
pub mod host;
#[cfg(any(feature = "host", feature = "server"))]
mod preview;
#[cfg(feature = "server")]
#[cfg_attr(docsrs, doc(cfg(feature = "server")))]
pub mod server;
#[cfg(any(feature = "host", feature = "server"))]
mod setters;

#[cfg(any(feature = "host", feature = "server"))]
pub mod tree;

#[cfg(any(feature = "host", feature = "server"))]
pub use preview::{Keep, Preview, Previewer};
