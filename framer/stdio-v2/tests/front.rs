//! The server front over an in-process pipe, driven by a bare `h2` client:
//! HTTP/2 behaviour our own host never shows (it sends a body whole).

use std::time::Duration;

use bytes::Bytes;
use mcp_framer_stdio::server::{Server, ServerConfig};
use mcp_framer_stdio_v2::server::{V2Config, serve};
use mcp_framer_stdio_v2::wire::{self, Params};

/// A client that declares a body over the limit and has sent only part of
/// it gets the `413` and the typed error, not a bare reset: the front
/// answers while the client is still sending, and h2 resets the rest of the
/// request with NO_ERROR only once the answer is out (RFC 9113, 8.1), so
/// the client keeps the answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_413_reaches_a_client_that_is_still_sending_its_body() {
    for round in 0..20 {
        let (client_io, server_io) = tokio::io::duplex(1 << 16);
        let (input, output) = tokio::io::split(server_io);
        let server = Server::new("front", "0").with_config(ServerConfig::default().with_max_receive(1024));
        let front = tokio::spawn(serve(server, input, output, V2Config::default()));
        let (client, connection) = h2::client::handshake(client_io).await.expect("the handshake");
        let driver = tokio::spawn(connection);
        let mut client = client.ready().await.expect("ready");

        let mut headers = wire::request_headers("ping", &Params::default(), "2025-11-25");
        headers.insert(http::header::CONTENT_LENGTH, (1usize << 20).into());
        let mut request = http::Request::post("http://stdio/mcp").body(()).expect("a request");
        *request.headers_mut() = headers;
        let (response, mut send) = client.send_request(request, false).expect("sent");
        send.send_data(Bytes::from(vec![b' '; 512]), false).expect("the first part of the body");
        // The rest is never sent: the answer must come anyway.
        let response = tokio::time::timeout(Duration::from_secs(30), response)
            .await
            .unwrap_or_else(|_| panic!("round {round}: no answer within 30 s"))
            .unwrap_or_else(|e| panic!("round {round}: the stream ended without an answer: {e}"));
        assert_eq!(response.status(), 413, "round {round}");
        let mut body = response.into_body();
        let mut bytes = Vec::new();
        while let Some(chunk) = body.data().await {
            bytes.extend_from_slice(&chunk.expect("the answer's body"));
        }
        let text = String::from_utf8(bytes).expect("UTF-8");
        assert!(text.contains("\"code\":-32600") && text.contains("1048576"), "round {round}: {text}");

        drop(send);
        drop(client);
        // The connection's end: the front sees the end of its input.
        driver.abort();
        let report = tokio::time::timeout(Duration::from_secs(30), front)
            .await
            .expect("the front ends when the client goes")
            .expect("the front did not panic")
            .expect("the front ended without an error");
        assert_eq!(report.oversize_bodies, 1, "round {round}: {report:?}");
    }
}
