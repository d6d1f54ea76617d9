//! **EXPERIMENTAL.** `stdio-v2`: MCP over HTTP/2 on a child process's stdin
//! and stdout, host and server.
//!
//! This crate tracks a proposal of the MCP transports working group ("HTTP
//! over STDIO": run Streamable HTTP over the subprocess's pipes instead of
//! newline-delimited JSON-RPC, as a transport named `stdio-v2` beside
//! `stdio`, chosen by explicit configuration, no in-band negotiation). The
//! proposal's wire format is **not final**; neither is this crate's, and its
//! version stays below 0.1 until it is. Nothing here changes the newline
//! transport ([`mcp_framer_stdio`]), its behaviour or its defaults.
//!
//! The mapping, and every choice the proposal leaves open (marked "ours"),
//! are in `STDIO-V2.md` beside this crate. In short:
//!
//! * one HTTP/2 connection with prior knowledge; the host (the parent) is the
//!   HTTP/2 client and writes the child's stdin, the server (the child)
//!   reads stdin and writes stdout;
//! * each client JSON-RPC message is one `POST /mcp` whose body is the
//!   message, with the 2026-07-28 Streamable HTTP headers
//!   ([`wire`]); a request is answered `200` with a JSON body, or with an
//!   event stream when progress comes before the result; a notification
//!   `202`;
//! * server-initiated notifications ride the `subscriptions/listen` stream;
//! * a reset stream (`RST_STREAM`) cancels its request, child process trees
//!   included; `notifications/cancelled` still works;
//! * the transport limit is a byte limit on each message body, counted as
//!   DATA arrives and enforced before any parse.
//!
//! [`server`] puts an HTTP/2 front on [`mcp_framer_stdio::server::Server`]'s
//! dispatcher (the same tools, admission, cancellation and replies as the
//! newline server). [`host`] spawns a server and talks to it.
//!
//! Selection is explicit on both sides: a `stdio-v2` server that receives
//! newline JSON answers one newline JSON-RPC error saying so and ends; a
//! `stdio-v2` host whose child answers newline JSON fails at once with
//! [`host::Error::Selection`].
//!
//! # Example
//!
//! A host calling a `stdio-v2` server, then cancelling a call (the README's
//! example):
//!
//! ```no_run
//! use mcp_framer_stdio_v2::host::{Client, HostConfig};
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let client = Client::spawn(tokio::process::Command::new("my-server"), HostConfig::default()).await?;
//!     let tools = client.request("tools/list", &serde_json::json!({})).await?;
//!     println!("{}", tools.result());
//!     let call = client.call("tools/call", &serde_json::json!({"name": "slow", "arguments": {}})).await?;
//!     call.cancel(); // RST_STREAM: the server cancels the call, its child processes included
//!     client.shutdown().await;
//!     Ok(())
//! }
//! ```
//!
//! A server that serves either transport from one binary, told from the
//! client's first bytes ([`server::serve_any_stdio`]; [`server::serve_stdio`]
//! requires `stdio-v2`):
//!
//! ```no_run
//! use mcp_framer_stdio::server::Server;
//! use mcp_framer_stdio_v2::server::{V2Config, serve_any_stdio};
//!
//! #[tokio::main]
//! async fn main() -> std::io::Result<()> {
//!     let server = Server::new("my-server", "1.0.0"); // add tools with `.tool(...)`
//!     let served = serve_any_stdio(server, V2Config::default()).await?;
//!     eprintln!("{served:?}");
//!     Ok(())
//! }
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod host;
mod io;
pub mod server;
pub mod wire;
