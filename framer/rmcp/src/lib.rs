//! [mcp-framer](mcp_framer_stdio)'s stdio transport for
//! [rmcp](https://docs.rs/rmcp), the official Rust MCP SDK: a one-line swap
//! that keeps rmcp's typed models, its `#[tool]` macros and its service.
//!
//! Client side (feature `client`), spawning a server:
//!
//! ```no_run
//! # use rmcp::ServiceExt;
//! # #[cfg(feature = "client")]
//! # async fn run(cmd: tokio::process::Command, cmd2: tokio::process::Command) -> Result<(), Box<dyn std::error::Error>> {
//! # let cmd0 = cmd2;
//! # { let cmd = cmd0;
//! // before
//! let service = ().serve(rmcp::transport::TokioChildProcess::new(cmd)?).await?;
//! # }
//! // after
//! let service = ().serve(mcp_framer_rmcp::ChildProcess::new(cmd)?).await?;
//! # Ok(()) }
//! ```
//!
//! Server side (feature `server`), serving on this process's stdio:
//!
//! ```no_run
//! # use rmcp::{ServerHandler, ServiceExt};
//! # #[derive(Clone)] struct MyServer;
//! # impl ServerHandler for MyServer {}
//! # #[cfg(feature = "server")]
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! # { let _ = rmcp::transport::stdio;
//! // before
//! let service = MyServer.serve(rmcp::transport::stdio()).await?;
//! # }
//! // after
//! let service = MyServer.serve(mcp_framer_rmcp::stdio()).await?;
//! # Ok(()) }
//! ```
//!
//! This crate is a thin translation layer: framing, queueing, the process
//! and every budget live in [`mcp_framer_stdio`]; here a classified frame
//! becomes rmcp's message type (in one pass, straight into the variant its
//! kind names), an oversize response becomes an error response for its
//! request ([`RESPONSE_TOO_LARGE`](mcp_framer_jsonrpc::RESPONSE_TOO_LARGE)),
//! and what rmcp cannot take is counted and logged.
//!
//! **Features.** None is on by default: enable `client` for [`ChildProcess`]
//! (a host spawning a server), `server` for `stdio()` (serving on this
//! process's stdio), or both; each pulls only its half of rmcp and of
//! [`mcp_framer_stdio`]. (rmcp's own default features include its `server`:
//! a client-only user also sets `default-features = false` on rmcp.)
//! What a user configures is re-exported here, so no direct dependency on
//! [`mcp_framer_stdio`] is needed.
//!
//! **A call can still wait forever** when a response over the host's limit
//! has its `id` neither among its first nor its last few KiB (the host
//! discards the frame unread and recovers the id only from those; it counts
//! the frame and logs it): there is then no request to fail, and rmcp sets no
//! timeout on a request. Give calls that may return that much a timeout of
//! their own, with rmcp's `PeerRequestOptions::with_timeout` and
//! `send_request_with_option` (the README shows how).
//!
//! **Versions.** rmcp's traits must be the same crate on both sides: this
//! crate depends on rmcp `3.11` (any 3.x from 3.11), so a user's
//! `rmcp = "3.11"` resolves to the same one. [`rmcp`] is re-exported for
//! those who would rather name it through this crate.
#![deny(missing_docs)]
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub use rmcp;

/// The README's Rust examples, compiled as doctests so that they stay in
/// step with the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeExamples;

#[cfg(feature = "client")]
mod client;
#[cfg(any(feature = "client", feature = "server"))]
mod decode;
#[cfg(feature = "server")]
mod server;

#[cfg(feature = "client")]
pub use client::{ChildProcess, ChildProcessBuilder, ChildProcessHandle, DEFAULT_MAX_WAIT};
#[cfg(any(feature = "client", feature = "server"))]
pub use decode::AdapterCounts;
/// What a client configures and reads: the host's configuration, its
/// metrics, and how a connection ended.
#[cfg(feature = "client")]
pub use mcp_framer_stdio::host::{
    CloseReason, Closed, Connection, MetricsSnapshot, Overload, OverloadPolicy, SessionConfig, ShutdownConfig,
    ShutdownReport, ShutdownStage, StderrLog,
};
#[cfg(feature = "server")]
pub use server::{Stdio, StdioHandle, capture, stdio, stdio_with_config};

// Server side: what a server configures and reads, so that no direct
// `mcp-framer-stdio` dependency is needed. (`ServerConfig` is the transport's
// limits, not rmcp's `model::ServerConfig`, the server's info.)
#[cfg(feature = "server")]
pub use mcp_framer_stdio::server::{
    Capture, CaptureOptions, DEFAULT_CONTROL_QUEUE_BYTES, DEFAULT_SHUTDOWN_GRACE, Ending, KILL_DRAIN_GRACE,
    ServeReport, ServerConfig,
};
#[cfg(feature = "server")]
pub use mcp_framer_stdio::{Keep, Preview};
