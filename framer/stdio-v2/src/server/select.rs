//! Selection: what the client's first bytes say it speaks. The HTTP/2
//! preface can never begin a newline JSON-RPC stream, so a server can tell
//! the two transports apart from the first bytes alone.

use std::io;
use std::time::Duration;

use mcp_framer_jsonrpc::{Encoder, ErrorObject, INVALID_REQUEST, Id};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::wire::{self, FirstBytes};

/// The most of a newline client's first line read to recover its id.
const FIRST_LINE_MAX: usize = 64 << 10;

/// What the first bytes decided.
#[derive(Debug)]
pub(super) enum Spoken {
    /// The HTTP/2 preface.
    Http2,
    /// Newline JSON (`{` or `[` first, after JSON whitespace).
    Newline,
    /// Something else.
    Other,
    /// The input ended first.
    Nothing,
}

/// Reads the client's first bytes until they tell the transport (at most
/// the preface's 24); returns what they say and the bytes read.
pub(super) async fn first_bytes<R: AsyncRead + Unpin>(input: &mut R) -> io::Result<(Spoken, Vec<u8>)> {
    let mut first = Vec::with_capacity(wire::PREFACE.len());
    loop {
        match wire::client_first_bytes(&first) {
            FirstBytes::Http2 => return Ok((Spoken::Http2, first)),
            FirstBytes::NewlineJson => return Ok((Spoken::Newline, first)),
            FirstBytes::Other => return Ok((Spoken::Other, first)),
            FirstBytes::Undecided => {
                let mut byte = [0u8; 24];
                let want = wire::PREFACE.len().saturating_sub(first.len()).max(1);
                let n = input.read(&mut byte[..want]).await?;
                if n == 0 {
                    return Ok((Spoken::Nothing, first));
                }
                first.extend_from_slice(&byte[..n]);
            }
        }
    }
}

/// The selection-mismatch error.
pub(super) fn mismatch_error(detail: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "selection mismatch: this server is configured for the `stdio-v2` transport (HTTP/2 over stdio) \
             and the client did not speak it: {detail}"
        ),
    )
}

/// Answers a newline client with one error line and returns the error.
pub(super) async fn refuse_newline<R, W>(mut first: Vec<u8>, mut input: R, mut output: W) -> io::Error
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    // Read the rest of the first line, bounded, to recover the request's id.
    let mut chunk = [0u8; 4096];
    while !first.contains(&b'\n') && first.len() < FIRST_LINE_MAX {
        match tokio::time::timeout(Duration::from_millis(200), input.read(&mut chunk)).await {
            Ok(Ok(n)) if n > 0 => first.extend_from_slice(&chunk[..n]),
            _ => break,
        }
    }
    let line = first.split(|&b| b == b'\n').next().unwrap_or_default();
    let id = match mcp_framer_jsonrpc::parse(line) {
        Ok(message) => message.id().map(Id::to_owned_id),
        Err(error) => error.id().map(Id::to_owned_id),
    };
    let message = "this server is configured for the `stdio-v2` transport (HTTP/2 over stdio) and the client sent \
                   newline-delimited JSON-RPC (`stdio`): configure the client for `stdio-v2`";
    let error = ErrorObject::new(INVALID_REQUEST, message);
    if let Ok(mut frame) = Encoder::unlimited().error_response(id.as_ref(), &error) {
        if frame.last() != Some(&b'\n') {
            frame.push(b'\n');
        }
        let _ = output.write_all(&frame).await;
        let _ = output.flush().await;
    }
    let _ = output.shutdown().await;
    let error = mismatch_error("it sent newline-delimited JSON-RPC (`stdio`); answered with one error line");
    tracing::error!(%error, "selection mismatch");
    error
}

/// The other bytes' error.
pub(super) fn other_bytes(first: &[u8]) -> io::Error {
    let error = mismatch_error(&format!(
        "the client's first bytes are neither the HTTP/2 preface nor JSON: {}",
        mcp_framer_stdio::Preview::new(first, mcp_framer_stdio::Keep::Head(24))
    ));
    tracing::error!(%error, "selection mismatch");
    error
}
