//! The rmcp adapter's two halves together, real processes, on unix and on
//! Windows alike: `ChildProcess` drives the example server on `stdio()` with
//! its defaults (`rmcp_server`). Its tools list, a 4 MiB result, an error
//! response over the send limit answered for its id, a call cancelled while
//! it runs, and then, with that call never answered, the end of stdin: the
//! server exits by itself before the host's shutdown has to terminate it.

use std::time::Duration;

use mcp_framer_e2e::support;
use mcp_framer_rmcp::ChildProcess;
use mcp_framer_stdio::host::ShutdownStage;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest};
use rmcp::service::PeerRequestOptions;
use serde_json::{Value, json};

fn call(tool: &str, arguments: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments.as_object().cloned().unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_server_serves_and_ends_by_itself() {
    support::watchdog(Duration::from_secs(300), "rmcp on both platforms", async {
        for _ in 0..3 {
            let transport =
                ChildProcess::new(tokio::process::Command::new(env!("CARGO_BIN_EXE_rmcp_server"))).expect("spawn");
            let handle = transport.handle();
            let service = ().serve(transport).await.expect("initialize");
            assert_eq!(service.list_all_tools().await.expect("tools/list").len(), 3);

            let result = service.call_tool(call("large", json!({"bytes": 4 << 20}))).await.expect("4 MiB");
            let text = result.content[0].as_text().map(|t| t.text.len());
            assert_eq!(text, Some(4 << 20));

            let answer = tokio::time::timeout(
                Duration::from_secs(30),
                service.call_tool(call("large", json!({"bytes": 17 << 20, "as_error": true}))),
            )
            .await
            .expect("answered");
            let Err(rmcp::ServiceError::McpError(error)) = answer else { panic!("{answer:?}") };
            assert_eq!(error.code.0, -32603, "{error:?}");

            let slow = ClientRequest::CallToolRequest(CallToolRequest::new(call("slow", json!({"seconds": 60}))));
            let running = service.send_cancellable_request(slow, PeerRequestOptions::no_options()).await.unwrap();
            tokio::time::sleep(Duration::from_millis(200)).await;
            running.cancel(Some("test".into())).await.unwrap();
            assert_eq!(service.list_all_tools().await.expect("tools/list after the cancel").len(), 3);

            let report = handle.shutdown().await;
            assert_eq!(report.stage, ShutdownStage::StdinClosed, "{report:?}; stderr: {}", handle.stderr_tail());
            assert_eq!(report.exit_status.and_then(|s| s.code()), Some(0), "{report:?}");
            let _ = service.cancel().await;
        }
    })
    .await;
}
