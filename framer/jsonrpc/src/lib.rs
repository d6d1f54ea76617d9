//! The JSON-RPC 2.0 layer of mcp-framer: what lies between a frame (one
//! line of an MCP stdio stream, as the `mcp-framer` crate cuts it) and an
//! application.
//!
//! - **Decode**: [`parse`] classifies a frame as a request, notification,
//!   response or error response **without materialising its payload**.
//! - **Encode**: [`Encoder`] writes each kind of message as one frame: one
//!   JSON object, one `\n`, within a byte limit.
//! - **Errors**: the error codes and their standard messages
//!   ([`ERROR_CODES`]), and the one [`ErrorObject`] type both sides send and
//!   read.
//! - **Ids**: [`Id`] / [`OwnedId`], a string or an `i64`.
//! - **MCP**: [`protocol`], the vocabulary both sides share: the protocol
//!   versions, the eras, the per-request `_meta` rules of 2026-07-28 and the
//!   `initialize` negotiation.
//! - **Recovery**: [`recover_response_id`] tells, from a bounded head and
//!   tail of a response too large to read, which request it answered, or
//!   says it cannot be told safely.
//!
//! The host and the server of `mcp-framer-stdio` both use this crate for
//! every message they read and write. It does no I/O, and has no unsafe code.
//!
//! # Decoding
//!
//! [`parse`] reads only the fields that route a message — `jsonrpc`, `id`,
//! `method` — and which of `result`/`error` is present, with its own
//! validating scanner. `params`, `result` and `error` stay [`RawJson`]
//! slices of the frame: they are checked to be well-formed JSON, never built
//! into a tree, never copied. Their content (object or array `params`, the
//! error object's fields) is the caller's business:
//! [`RawJson::deserialize`] builds whatever type it wants. The rules, and
//! which error each refused frame gets, are stated on [`parse`].
//!
//! ```
//! use mcp_framer_jsonrpc::{parse, Id, Kind, Message};
//!
//! let frame = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo"}}"#;
//! let message = parse(frame)?;
//! assert_eq!(message.kind(), Kind::Request);
//! assert_eq!(message.id(), Some(&Id::Number(7)));
//! assert_eq!(message.method(), Some("tools/call"));
//! let Message::Request { params: Some(params), .. } = message else { unreachable!() };
//! assert_eq!(params.get(), r#"{"name":"echo"}"#); // a slice of `frame`, not a copy
//! let params: serde_json::Value = params.deserialize()?;
//! assert_eq!(params["name"], "echo");
//!
//! let response = parse(br#"{"jsonrpc":"2.0","id":"a","result":null}"#)?;
//! assert_eq!((response.kind(), response.id()), (Kind::Response, Some(&Id::from("a"))));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! A refused frame says what to answer ([`ParseError::code`],
//! [`ParseError::id`]); a server turns it into an error response:
//!
//! ```
//! use mcp_framer_jsonrpc::{parse, Encoder, ErrorObject};
//!
//! let error = parse(br#"{"jsonrpc":"2.0","id":3,"method":7}"#).unwrap_err();
//! let reply = Encoder::new(1 << 20).error_response(error.id(), &ErrorObject::from(&error))?;
//! assert!(reply.starts_with(br#"{"jsonrpc":"2.0","id":3,"error":{"code":-32600,"#));
//! # Ok::<(), mcp_framer_jsonrpc::EncodeError>(())
//! ```
//!
//! # Encoding
//!
//! [`Encoder`] serializes a message once, straight into its frame, and
//! applies one newline rule (a raw `\n` or `\r`, which in valid JSON can only
//! be whitespace, becomes a space) and one size check (a frame over the
//! peer's transport limit is an [`EncodeError::TooLarge`]). See its
//! documentation for why.
//!
//! ```
//! use mcp_framer_jsonrpc::{parse, Encoder, ErrorObject, Id, Kind, INVALID_PARAMS};
//!
//! let encoder = Encoder::new(16 << 20);
//! let frame = encoder.response(&Id::from("r1"), &serde_json::json!({"content": []}))?;
//! assert_eq!(frame, b"{\"jsonrpc\":\"2.0\",\"id\":\"r1\",\"result\":{\"content\":[]}}\n");
//!
//! let frame = encoder.error_response(Some(&Id::Number(4)), &ErrorObject::invalid_params("unknown tool: grep"))?;
//! let message = parse(frame.strip_suffix(b"\n").unwrap()).expect("the encoder writes valid messages");
//! assert_eq!(message.kind(), Kind::ErrorResponse);
//! let error: ErrorObject = message.payload().unwrap().deserialize().unwrap();
//! assert_eq!((error.code, error.message.as_str()), (INVALID_PARAMS, "unknown tool: grep"));
//! # Ok::<(), mcp_framer_jsonrpc::EncodeError>(())
//! ```
//!
//! # Features
//!
//! - `check` (unstable, hidden from the docs): the differential oracle the
//!   fuzz targets and the corpus replay run, which compares [`parse`] with a
//!   second parser built on simd-json. simd-json is reachable only through
//!   it and is no part of this crate's public API.

#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

/// The README's Rust example, compiled as a doctest so that it stays in step
/// with the API (it is also this page's first example, under "Decoding").
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeExamples;

#[cfg(feature = "check")]
#[doc(hidden)]
pub mod check;
mod codes;
mod encode;
mod error;
mod id;
mod message;
mod parse;
pub mod protocol;
mod raw;
mod recover;
mod scan;

pub use codes::{
    CONNECTION_CLOSED, ERROR_CODES, ErrorObject, HEADER_MISMATCH, INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST,
    INVALID_RESPONSE, METHOD_NOT_FOUND, MISSING_REQUIRED_CLIENT_CAPABILITY, OVERLOADED, PARSE_ERROR,
    RESPONSE_TOO_LARGE, UNSUPPORTED_PROTOCOL_VERSION, standard_message,
};
pub use encode::{EncodeError, Encoder};
pub use error::{ParseError, ParseErrorKind};
pub use id::{Id, OwnedId};
pub use message::{Kind, Message};
pub use parse::parse;
pub use raw::RawJson;
pub use recover::recover_response_id;
