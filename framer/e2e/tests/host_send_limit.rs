//! `SessionConfig::max_send`: a frame over the server's limit is refused
//! before anything is written, and the session goes on.

#![cfg(unix)]

mod host_support;

use host_support::{config, second_request, spawn, text, tool, watchdog};
use mcp_framer_jsonrpc::EncodeError;
use mcp_framer_stdio::host::RequestError;
use serde_json::json;

const LIMIT: usize = 4096;

#[tokio::test]
async fn a_frame_over_max_send_is_refused_unwritten_and_the_session_goes_on() {
    watchdog("send limit", async {
        let (session, _inbound) = spawn(config().with_max_send(LIMIT));
        // Within the limit: sent and answered.
        let fits = "é".repeat(1000); // 2,000 bytes of text
        let echoed = session.request("tools/call", &tool("echo", json!({"text": fits}))).await.expect("echo");
        assert_eq!(text(&echoed), fits);
        let sent = session.metrics().requests_sent;

        // 2,100 characters, 4,200 bytes of text: over the limit in bytes.
        let over = "é".repeat(2100);
        let refused = session.request("tools/call", &tool("echo", json!({"text": over}))).await;
        let Err(RequestError::Encode(EncodeError::TooLarge { len, max })) = refused else {
            panic!("expected TooLarge, got {refused:?}");
        };
        assert_eq!(max, LIMIT);
        assert!(len > LIMIT && len < LIMIT + 400, "the frame's own length: {len}");
        let notified = session.notify("notifications/message", &json!({"data": over})).await;
        assert!(matches!(notified, Err(RequestError::Encode(EncodeError::TooLarge { .. }))), "{notified:?}");
        assert_eq!(session.metrics().requests_sent, sent, "nothing was written");

        // The session is untouched: the next request is answered at once.
        second_request(&session).await;
        session.shutdown().await;
    })
    .await;
}
