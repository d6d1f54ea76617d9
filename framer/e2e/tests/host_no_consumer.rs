//! A host that dropped its inbound receiver takes no server requests: it
//! answers them -32601 (method not found) saying so, and counts them and the
//! notifications nobody receives as unconsumed, never as overload.

#![cfg(unix)]

mod host_support;

use host_support::{config, eventually, reports, spawn, text, tool, watchdog};
use mcp_framer_e2e::hostile::report as hostile;
use mcp_framer_jsonrpc::METHOD_NOT_FOUND;
use mcp_framer_stdio::host::NO_CONSUMER_MESSAGE;
use serde_json::json;

#[tokio::test]
async fn server_requests_get_method_not_found_and_nothing_counts_as_overload() {
    watchdog("no consumer", async {
        let (session, inbound) = spawn(config());
        drop(inbound);
        let response =
            session.request("tools/call", &tool("ask_client", json!({"notifications": 5}))).await.expect("call");
        assert_eq!(text(&response), "asked the client and sent 5 notifications");
        eventually(&session, "the server got an answer", |s| !reports(s, hostile::CLIENT_RESPONSE).is_empty()).await;
        let answer = &reports(&session, hostile::CLIENT_RESPONSE)[0];
        assert_eq!(answer["id"], "roots-1");
        assert_eq!(answer["error"]["code"], METHOD_NOT_FOUND);
        assert_eq!(answer["error"]["message"], NO_CONSUMER_MESSAGE);
        assert!(NO_CONSUMER_MESSAGE.contains("takes no server requests"));

        let m = session.metrics();
        assert_eq!(m.unconsumed, 6, "{m:?}");
        assert_eq!((m.delivered, m.overload_rejected, m.overload_dropped, m.overload_episodes), (0, 0, 0, 0), "{m:?}");
        session.shutdown().await;
    })
    .await;
}
