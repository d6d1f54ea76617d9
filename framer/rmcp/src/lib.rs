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
//! **Versions.** rmcp's traits must be the same crate on both sides: this
//! crate depends on rmcp `3.11` (any 3.x from 3.11), so a user's
//! `rmcp = "3.11"` resolves to the same one. [`rmcp`] is re-exported for
//! those who would rather name it through this crate.
#![deny(missing_docs)]
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub use rmcp;

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
