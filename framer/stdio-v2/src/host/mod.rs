//! The `stdio-v2` host: spawn a server, talk HTTP/2 to it over its stdin
//! and stdout.
//!
//! [`Client::spawn`] starts the command in a process tree of its own
//! ([`mcp_framer_stdio::tree`]: a process group on unix, a Job Object on
//! Windows) with piped stdio, drains its stderr to EOF into a bounded tail
//! (a [`Previewer`](mcp_framer_stdio::Previewer) keeping the last [`HostConfig::stderr_tail`] bytes),
//! and runs the HTTP/2 client connection (prior knowledge) over the two
//! pipes in a task of its own, so the child's stdout is read for as long as
//! the connection lives, whatever the application does; a slow consumer
//! pushes back on its own stream only (HTTP/2 flow control).
//!
//! # Contract
//!
//! * **Selection.** The child must answer the preface with an HTTP/2
//!   SETTINGS frame within [`HostConfig::startup_timeout`]. If its first
//!   bytes are newline JSON (a `stdio` server answers the preface with a
//!   -32700 line), [`Client::spawn`] fails at once with
//!   [`Error::Selection`], saying the server speaks `stdio`, not
//!   `stdio-v2`, and quoting a bounded preview of what it wrote; other bytes,
//!   an exit or silence give [`Error::Startup`] with the exit status and the
//!   stderr tail. The child is stopped in each case.
//! * **Requests.** Each message is one `POST /mcp` with the headers
//!   [`request_headers`](crate::wire::request_headers) builds from the body.
//!   [`Client::request`] returns the result, or the server's JSON-RPC error
//!   as [`Error::Rpc`] (with the HTTP status); [`Client::call`] is the
//!   streaming form ([`Call::next`] yields each event-stream notification,
//!   then the response). Ids are the client's (integers from 1).
//! * **The limit.** Each response body, and each event of an event stream,
//!   is counted as its DATA arrives (and on `content-length` up front)
//!   against [`HostConfig::max_receive`] before any parse; over it the call
//!   fails with [`Error::ResponseTooLarge`] naming the bytes seen and the
//!   limit, its stream is reset, and the session goes on. Counted in
//!   [`HostCounters::oversize_responses`].
//! * **Calls nobody reads** cannot hold up the others: at most
//!   [`HostConfig::max_calls`] are in flight, and the connection window is
//!   at least `(max_calls + 1) × stream_window`
//!   ([`HostConfig::effective_connection_window`]); each call's answer is
//!   received by a task of its own under the limit (a JSON body once the
//!   call is read past its head, an event stream ahead into a budget of
//!   `max_receive` bytes). STDIO-V2.md states the most memory the host holds.
//! * **What the server may not do.** Push is off; a head over
//!   [`HostConfig::max_header_list`] fails its call; a response with
//!   another id fails it with [`Error::WrongId`]; content types compare
//!   case-insensitively; event streams are read as the SSE specification
//!   says (CR, LF, CRLF, BOM, fields, comments).
//! * **The 2026-07-28 shape.** Requests carry the per-request `_meta`, and
//!   `tools/call` the `Mcp-Param-{Name}` headers `x-mcp-header` asks for
//!   (see [`HostConfig::protocol_version`] and [`Client::request`]).
//! * **Cancellation.** [`Call::cancel`], or dropping an unfinished
//!   [`Call`] (a dropped `request` future included), resets its stream
//!   (`RST_STREAM(CANCEL)`): the server cancels the request (its tasks and
//!   process trees). Counted in [`HostCounters::cancelled`]. A stream the
//!   server resets (a request cancelled by `notifications/cancelled`) fails
//!   its call with [`Error::Reset`]; the session goes on.
//! * **Deadlines.** A request fails with [`Error::TimedOut`] after
//!   [`HostConfig::request_timeout`] (its stream is reset). A write to the
//!   child's stdin pending for [`HostConfig::write_timeout`] (the child is
//!   not reading) ends the session: every call fails with
//!   [`Error::Closed`], and the child is stopped.
//! * **The end.** When the connection ends (the child exited or closed
//!   stdout, a protocol error such as a stray write on stdout, a stall),
//!   every call in flight and every later one fails with [`Error::Closed`],
//!   which says why, with the exit status when the child has exited and the
//!   stderr tail. [`Client::shutdown`] closes the connection (`GOAWAY`, then
//!   stdin), waits [`HostConfig::exit_grace`] for the child, sends `SIGTERM`
//!   to its tree (unix), waits again, then kills the tree; dropping the
//!   client kills the tree at once.
//! * **Server notifications** that belong to no request come on the stream
//!   [`Client::listen`] opens (`subscriptions/listen`).
//!
//! # Example
//!
//! ```no_run
//! use mcp_framer_stdio_v2::host::{Client, HostConfig, Item};
//! use serde_json::json;
//!
//! # async fn demo() -> Result<(), mcp_framer_stdio_v2::host::Error> {
//! let client = Client::spawn(tokio::process::Command::new("my-v2-server"), HostConfig::default()).await?;
//! let tools = client.request("tools/list", &json!({})).await?;
//! println!("{}", tools.result());
//!
//! // The streaming form: progress events, then the response.
//! let params = json!({"name": "build", "arguments": {}, "_meta": {"progressToken": "b1"}});
//! let mut call = client.call("tools/call", &params).await?;
//! while let Some(item) = call.next().await {
//!     match item? {
//!         Item::Notification(progress) => eprintln!("{}", String::from_utf8_lossy(&progress)),
//!         Item::Response(response) => println!("{}", response.text()),
//!     }
//! }
//! // Dropping an unfinished call resets its stream: the server cancels it.
//! let ended = client.shutdown().await;
//! eprintln!("exit {:?}; stderr:\n{}", ended.exit_status, ended.stderr_tail);
//! # Ok(())
//! # }
//! ```

mod body;
mod call;
mod client;
mod config;
mod drive;
mod error;
mod headers;
mod shared;
mod startup;

pub use call::{Call, Item, Response};
pub use client::{Client, Ended};
pub use config::HostConfig;
pub use error::{Closed, Error};
pub use shared::HostCounters;
