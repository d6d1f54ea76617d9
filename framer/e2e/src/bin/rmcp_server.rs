//! An rmcp server built with `#[tool]`, served on `mcp_framer_rmcp::stdio()`
//! (or, with `--stock`, on rmcp's own `stdio()`, for comparison).
//!
//! Tools: `large {"bytes": n}` (a text result of `n` bytes), `slow
//! {"seconds": s}` (a progress notification every 100 ms for `s` seconds,
//! stopped at once by a cancellation) and `run {"script": "..."}` (`sh -c
//! script` under the request's cancellation token, with the bounded capture
//! and the process-group kill: a cancelled call kills its children). At the
//! end of stdin, calls still running after 500 ms are cancelled.

use std::time::Duration;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, ProgressNotificationParam, ServerCapabilities, ServerConfig};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt, schemars, tool, tool_handler, tool_router};

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct LargeArgs {
    /// Bytes of text in the result.
    bytes: usize,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct SlowArgs {
    /// How long the call runs, sending progress every 100 ms.
    seconds: f64,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct RunArgs {
    /// A shell script, run with `sh -c`.
    script: String,
}

#[derive(Debug, Clone)]
struct Example {
    #[expect(dead_code, reason = "the tool_handler macro reads the router")]
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl Example {
    #[tool(description = "A text result of `bytes` bytes")]
    async fn large(&self, Parameters(LargeArgs { bytes }): Parameters<LargeArgs>) -> String {
        "x".repeat(bytes)
    }

    #[tool(description = "Runs for `seconds`, sending progress every 100 ms; a cancellation stops it")]
    async fn slow(
        &self,
        Parameters(SlowArgs { seconds }): Parameters<SlowArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let steps = (seconds * 10.0).ceil() as u32;
        let token = context.meta.get_progress_token();
        for step in 0..steps {
            if let Some(token) = &token {
                let progress =
                    ProgressNotificationParam::new(token.clone(), f64::from(step)).with_total(f64::from(steps));
                let _ = context.peer.notify_progress(progress).await;
            }
            tokio::select! {
                () = context.ct.cancelled() => return Err(ErrorData::internal_error("cancelled", None)),
                () = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
        }
        Ok(CallToolResult::success(vec![ContentBlock::text(format!("slept {seconds} s"))]))
    }

    #[tool(description = "Runs `sh -c script` with a bounded capture; a cancellation kills its process group")]
    async fn run(
        &self,
        Parameters(RunArgs { script }): Parameters<RunArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let mut command = tokio::process::Command::new("sh");
        command.args(["-c", &script]);
        let options = mcp_framer_stdio::server::CaptureOptions::default();
        let run = mcp_framer_rmcp::capture(&context, &mut command, options)
            .await
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let text = format!("{}\n{}", run.stdout.to_text(), run.summary());
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]))
    }
}

#[tool_handler]
impl ServerHandler for Example {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}

#[tokio::main]
async fn main() {
    let server = Example { tool_router: Example::tool_router() };
    let served = if std::env::args().any(|a| a == "--stock") {
        server.serve(rmcp::transport::stdio()).await
    } else {
        // At the end of stdin, in-flight calls get 500 ms, then are cancelled
        // (their process groups killed): a host that closed stdin is leaving.
        let config = mcp_framer_stdio::server::ServerConfig::default().with_shutdown_grace(Duration::from_millis(500));
        server.serve(mcp_framer_rmcp::stdio_with_config(config)).await
    };
    let code = match served {
        Ok(service) => match service.waiting().await {
            Ok(_) => 0,
            Err(e) => {
                eprintln!("rmcp_server: {e}");
                1
            }
        },
        Err(e) => {
            eprintln!("rmcp_server: {e}");
            1
        }
    };
    // A pending blocking read of stock stdin may still hold a runtime thread.
    std::process::exit(code)
}
