//! The frames the host sends, all written by [`mcp_framer_jsonrpc::Encoder`]
//! (one JSON object, one `\n`, its newline rule), and the two the host builds
//! on its own: `notifications/cancelled` and the overload reply.

use serde::Serialize;

use mcp_framer_jsonrpc::{Encoder, ErrorObject, Id};

/// The encoder of the frames the host builds on its own (a cancellation, an
/// error reply): small, so never size-checked. What the application sends
/// is checked against [`SessionConfig::max_send`](super::SessionConfig::max_send).
pub(crate) const ENCODER: Encoder = Encoder::unlimited();

/// `params` of `notifications/cancelled`.
#[derive(Serialize)]
struct Cancelled<'a> {
    #[serde(rename = "requestId")]
    request_id: &'a Id<'a>,
    reason: &'a str,
}

/// An error response frame without data.
pub(crate) fn error_response(id: &Id<'_>, code: i64, message: &str) -> Vec<u8> {
    ENCODER
        .error_response(Some(id), &ErrorObject::new(code, message))
        .expect("an error object without data always serializes")
}

/// A `notifications/cancelled` frame for `id`.
pub(crate) fn cancelled(id: &Id<'_>, reason: &str) -> Vec<u8> {
    let params = Cancelled { request_id: id, reason };
    ENCODER.notification("notifications/cancelled", &params).expect("an id and a string always serialize")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_frames_are_exact() {
        let frame = cancelled(&Id::Number(3), "timed out\nafter 1s");
        assert_eq!(
            frame,
            b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":3,\"reason\":\"timed out\\nafter 1s\"}}\n"
        );
        let frame = error_response(&Id::from("s"), -32000, "busy");
        assert_eq!(frame, b"{\"jsonrpc\":\"2.0\",\"id\":\"s\",\"error\":{\"code\":-32000,\"message\":\"busy\"}}\n");
    }
}
