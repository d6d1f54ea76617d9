//! Split boundaries across real pipes: payloads whose multibyte characters
//! the child splits across `write(2)` calls, and 1-byte writes, arrive
//! byte-exact.

#![cfg(unix)]

mod host_support;

use host_support::{config, payload, second_request, spawn, text, tool, watchdog};
use serde_json::json;

/// Quotes, backslashes, escapes, 2/3/4-byte characters, a ZWJ sequence.
const TEXT: &str = "split \u{2713} h\u{e9}llo \"q\" back\\slash \u{1f600} \u{4e2d}\u{6587} \
                    \u{1f469}\u{200d}\u{1f469}\u{200d}\u{1f467} \u{10348} line\nbreak done";

#[tokio::test]
async fn one_byte_writes_and_writes_split_inside_characters_arrive_byte_exact() {
    watchdog("split writes", async {
        let (session, _inbound) = spawn(config());
        // write_size 1: every byte its own write(2). Larger sizes: the fixture
        // aligns the pieces so a boundary falls right after the lead byte of
        // the first multibyte character.
        for write_size in [1, 2, 3, 5, 7] {
            let arguments = json!({"text": TEXT, "write_size": write_size});
            let response = session.request("tools/call", &tool("split_writes", arguments)).await.expect("split");
            assert_eq!(text(&response), TEXT, "write_size {write_size}");
        }
        second_request(&session).await;
        session.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_hostile_payload_written_in_odd_chunks_matches_the_unsplit_one() {
    watchdog("hostile payload", async {
        let (session, _inbound) = spawn(config());
        let bytes = 64 * 1024;
        let whole = tool("hostile_payload", json!({"bytes": bytes, "chunk": 1 << 20}));
        let reference = session.request("tools/call", &whole).await.expect("unsplit");
        assert!(text(&reference).len() > bytes - 4);
        for chunk in [1, 7, 4093] {
            let split = tool("hostile_payload", json!({"bytes": bytes, "chunk": chunk}));
            let response = session.request("tools/call", &split).await.expect("split");
            // Same frame byte for byte, apart from the id.
            let id = response.id().expect("id").to_string();
            let expected = String::from_utf8(reference.frame().to_vec()).expect("UTF-8").replacen(
                r#""id":1,"#,
                &format!(r#""id":{id},"#),
                1,
            );
            assert_eq!(response.frame(), expected.as_bytes(), "chunk {chunk}");
        }
        // What the child wrote is what the host read, byte for byte (the
        // stats tool counts what was written before its own frame).
        let stats = session.request("tools/call", &tool("stats", json!({}))).await.expect("stats");
        let written = payload(&stats)["structuredContent"]["bytes_written"].as_u64().expect("bytes_written");
        assert_eq!(session.metrics().stdout_bytes, written + stats.frame().len() as u64 + 1);
        second_request(&session).await;
        session.shutdown().await;
    })
    .await;
}
