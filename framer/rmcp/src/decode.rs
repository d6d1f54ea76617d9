//! From a classified frame to rmcp's message type, in one pass, and the
//! counts of what rmcp could not take.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use rmcp::model::{
    JsonRpcError, JsonRpcMessage, JsonRpcNotification, JsonRpcRequest, JsonRpcResponse, NumberOrString, RequestId,
};
use serde::de::DeserializeOwned;

#[cfg(feature = "server")]
use mcp_framer_jsonrpc::OwnedId;
use mcp_framer_jsonrpc::{Id, Kind};

/// Deserializes `frame`, already classified as `kind` by the transport's
/// parser, straight into that variant of rmcp's message: serde reads the
/// frame once, with no detour through a content tree to find its shape.
pub(crate) fn decode<Req, Resp, Not>(kind: Kind, frame: &[u8]) -> serde_json::Result<JsonRpcMessage<Req, Resp, Not>>
where
    Req: DeserializeOwned,
    Resp: DeserializeOwned,
    Not: DeserializeOwned,
{
    Ok(match kind {
        Kind::Request => JsonRpcMessage::Request(serde_json::from_slice::<JsonRpcRequest<Req>>(frame)?),
        Kind::Notification => JsonRpcMessage::Notification(serde_json::from_slice::<JsonRpcNotification<Not>>(frame)?),
        Kind::Response => JsonRpcMessage::Response(serde_json::from_slice::<JsonRpcResponse<Resp>>(frame)?),
        Kind::ErrorResponse => JsonRpcMessage::Error(serde_json::from_slice::<JsonRpcError>(frame)?),
    })
}

/// rmcp's id for one of the transport's.
pub(crate) fn request_id(id: &Id<'_>) -> RequestId {
    match id {
        Id::Number(n) => NumberOrString::Number(*n),
        Id::Str(s) => NumberOrString::String(Arc::from(s.as_ref())),
    }
}

/// The transport's id for one of rmcp's.
#[cfg(feature = "server")]
pub(crate) fn transport_id(id: &RequestId) -> OwnedId {
    match id {
        NumberOrString::Number(n) => Id::Number(*n),
        NumberOrString::String(s) => Id::from(s.to_string()),
    }
}

/// What the adapter counted: every frame the transport delivered that rmcp
/// could not take, and every report it turned into a message. (The
/// transport's own counts are in its metrics.)
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) rejected: AtomicU64,
    pub(crate) oversize_errors: AtomicU64,
    pub(crate) skipped: AtomicU64,
    pub(crate) unknown_ids: AtomicU64,
    pub(crate) invalid_responses: AtomicU64,
    pub(crate) closed_pending: AtomicU64,
    pub(crate) overloaded: AtomicU64,
    pub(crate) duplicate_ids: AtomicU64,
}

/// A snapshot of what the adapter counted, beside the transport's metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AdapterCounts {
    /// Well-formed JSON-RPC frames that rmcp's types rejected (an unknown
    /// method, params of the wrong shape...): logged at `WARN`, not handed on.
    pub rejected: u64,
    /// Client side: oversize responses whose id was recovered, handed to
    /// rmcp as an error response with code
    /// [`RESPONSE_TOO_LARGE`](mcp_framer_jsonrpc::RESPONSE_TOO_LARGE).
    /// Server side: responses and error responses rmcp gave that could not
    /// be sent (over `max_send`, or failing to serialize), replaced by a
    /// tool failure (`isError: true`) for a `tools/call` result, by a short
    /// -32603 error for their id otherwise.
    pub oversize_errors: u64,
    /// Reports of frames the transport skipped (not JSON, malformed, oversize
    /// without a recoverable id, cut off): logged at `WARN`.
    pub skipped: u64,
    /// Responses whose id matched no request sent (late after a
    /// cancellation, or never asked): logged at `WARN` and handed on, rmcp
    /// then drops them.
    pub unknown_ids: u64,
    /// Responses to a pending request that rmcp's types rejected (also
    /// counted in `rejected`): the request got an error response with code
    /// [`INVALID_RESPONSE`](mcp_framer_jsonrpc::INVALID_RESPONSE) instead,
    /// so it failed at once.
    pub invalid_responses: u64,
    /// Requests still pending when the server's messages ended: each got an
    /// error response with code
    /// [`CONNECTION_CLOSED`](mcp_framer_jsonrpc::CONNECTION_CLOSED) saying
    /// how the connection ended.
    pub closed_pending: u64,
    /// Server side: requests answered -32000 because `max_concurrent +
    /// max_queued` requests were already in flight (handed to rmcp and not
    /// answered yet), as the server library's serve loop does.
    pub overloaded: u64,
    /// Server side: requests whose id was already in flight, answered -32600
    /// with a `null` id (so the answer cannot be taken for the original's,
    /// which still comes), as the server library's serve loop does; not
    /// handed to rmcp.
    pub duplicate_ids: u64,
}

impl Counters {
    pub(crate) fn snapshot(&self) -> AdapterCounts {
        AdapterCounts {
            rejected: self.rejected.load(Relaxed),
            oversize_errors: self.oversize_errors.load(Relaxed),
            skipped: self.skipped.load(Relaxed),
            unknown_ids: self.unknown_ids.load(Relaxed),
            invalid_responses: self.invalid_responses.load(Relaxed),
            closed_pending: self.closed_pending.load(Relaxed),
            overloaded: self.overloaded.load(Relaxed),
            duplicate_ids: self.duplicate_ids.load(Relaxed),
        }
    }
}

pub(crate) fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{ServerJsonRpcMessage, ServerRequest, ServerResult};

    fn both(frame: &str) -> (ServerJsonRpcMessage, ServerJsonRpcMessage) {
        let message = mcp_framer_jsonrpc::parse(frame.as_bytes()).unwrap();
        let direct = decode(message.kind(), frame.as_bytes()).unwrap();
        let stock: ServerJsonRpcMessage = serde_json::from_str(frame).unwrap();
        (direct, stock)
    }

    #[test]
    fn each_kind_decodes_as_rmcp_decodes_it() {
        let frames = [
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hi"}],"isError":false}}"#,
            r#"{"jsonrpc":"2.0","id":"a","result":{}}"#,
            r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"no","data":[1]}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":0.5}}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#,
        ];
        for frame in frames {
            let (direct, stock) = both(frame);
            assert_eq!(serde_json::to_value(&direct).unwrap(), serde_json::to_value(&stock).unwrap(), "{frame}");
        }
        let (direct, _) = both(frames[4]);
        assert!(matches!(
            direct,
            JsonRpcMessage::Request(JsonRpcRequest { request: ServerRequest::PingRequest(_), .. })
        ));
        let (direct, _) = both(frames[0]);
        assert!(matches!(
            direct,
            JsonRpcMessage::Response(JsonRpcResponse { result: ServerResult::CallToolResult(_), .. })
        ));
    }

    #[test]
    fn a_wrong_version_is_rejected() {
        let frame = br#"{"jsonrpc":"1.0","id":1,"result":{}}"#;
        assert!(decode::<ServerRequest, ServerResult, rmcp::model::ServerNotification>(Kind::Response, frame).is_err());
    }
}
