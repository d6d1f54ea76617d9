//! The responses a [`Connection`](super::Connection)'s user is owed: the ids
//! of the requests it sent and has neither had answered nor cancelled. The
//! reader never refuses a response for one of them, whatever the overload
//! policy (see [`Overload`](super::Overload)).

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};

use serde::Deserialize;

use mcp_framer_jsonrpc::{Id, Message, OwnedId};

/// MCP's notification that a request is abandoned.
const CANCELLED: &str = "notifications/cancelled";

/// The ids of the requests written and not yet answered or cancelled.
///
/// It learns them from the frames the connection sends: a request adds its
/// id, a `notifications/cancelled` removes the id it names (a response that
/// comes after it is late, and the overload policy applies to it as to a
/// notification). The reader removes an id when its response, its error
/// response or the report of its oversize response is queued. So what it
/// holds, and what the responses it vouches for hold, is bounded by the
/// requests the application has in flight.
#[derive(Debug, Default)]
pub(crate) struct Owed(Mutex<HashSet<OwnedId>>);

#[derive(Deserialize)]
struct CancelledParams<'a> {
    #[serde(rename = "requestId", borrow)]
    request_id: Id<'a>,
}

impl Owed {
    fn ids(&self) -> std::sync::MutexGuard<'_, HashSet<OwnedId>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Notes what `frame`, about to be written, means for the responses
    /// owed. A frame that is not a JSON-RPC message changes nothing (the
    /// server will answer it, if at all, with a `null` id).
    pub(crate) fn sending(&self, frame: &[u8]) {
        let frame = frame.strip_suffix(b"\n").unwrap_or(frame);
        match mcp_framer_jsonrpc::parse(frame) {
            Ok(Message::Request { id, .. }) => {
                self.ids().insert(id.into_owned());
            }
            Ok(Message::Notification { method, params: Some(params) }) if method == CANCELLED => {
                if let Ok(cancelled) = serde_json::from_str::<CancelledParams<'_>>(params.get()) {
                    self.ids().remove(&cancelled.request_id.into_owned());
                }
            }
            _ => {}
        }
    }

    /// Whether a response with `id` is owed; if so, it no longer is (the
    /// caller delivers it).
    pub(crate) fn settle(&self, id: &Id<'_>) -> bool {
        // A set of `Id<'static>` is searched with one (a copy only for a
        // string id: SDKs number their requests).
        self.ids().remove(&id.to_owned_id())
    }

    /// How many responses are owed.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.ids().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_owed_until_answered_or_cancelled() {
        let owed = Owed::default();
        owed.sending(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{}}\n");
        owed.sending(br#"{"jsonrpc":"2.0","id":"a","method":"ping"}"#);
        owed.sending(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        owed.sending(br#"{"jsonrpc":"2.0","id":9,"result":{}}"#);
        owed.sending(b"not json\n");
        assert_eq!(owed.len(), 2, "requests only");
        owed.sending(
            br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a","reason":"x"}}"#,
        );
        assert!(!owed.settle(&Id::from("a")), "cancelled: a late response is not owed");
        assert!(owed.settle(&Id::Number(1)));
        assert!(!owed.settle(&Id::Number(1)), "owed once");
        assert!(!owed.settle(&Id::Number(9)), "a response we sent is no request of ours");
        assert_eq!(owed.len(), 0);
    }

    #[test]
    fn a_malformed_cancellation_changes_nothing() {
        let owed = Owed::default();
        owed.sending(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#);
        owed.sending(br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":null}}"#);
        owed.sending(br#"{"jsonrpc":"2.0","method":"notifications/cancelled"}"#);
        assert!(owed.settle(&Id::Number(1)));
    }
}
