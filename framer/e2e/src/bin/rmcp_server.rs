//! An rmcp server built with `#[tool]`, served on `mcp_framer_rmcp::stdio()`
//! with the defaults a user gets (or, with `--stock`, on rmcp's own
//! `stdio()`, for comparison).
//!
//! Tools: `large {"bytes": n}` (a text result of `n` bytes; with `"as_error":
//! true`, an error whose `data` is that text), `slow {"seconds": s}` (a
//! progress notification every 100 ms for `s` seconds, stopped at once by a
//! cancellation) and `run {"script": "..."}` (`sh -c script` under the
//! request's cancellation token, with the bounded capture and the tree
//! kill: a cancelled call kills its children).
//!
//! Flags for tests: `--grace-ms N` sets `shutdown_grace`; `--linger-ms N`
//! keeps the process alive N ms after its service ended (a `main` that has
//! more to do), before it exits.

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
    /// Answer with an error whose `data` is the text instead.
    #[serde(default)]
    as_error: bool,
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
    #[tool(description = "A text result of `bytes` bytes (with `as_error`, an error whose `data` is that text)")]
    async fn large(
        &self,
        Parameters(LargeArgs { bytes, as_error }): Parameters<LargeArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let text = "x".repeat(bytes);
        if as_error {
            return Err(ErrorData::internal_error("a large error", Some(text.into())));
        }
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]))
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

    #[tool(description = "Runs `sh -c script` with a bounded capture; a cancellation kills its process tree")]
    async fn run(
        &self,
        Parameters(RunArgs { script }): Parameters<RunArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let mut command = tokio::process::Command::new("sh");
        command.args(["-c", &script]);
        let options = mcp_framer_rmcp::CaptureOptions::default();
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

/// The value of `--flag N`, if given.
fn flag(name: &str) -> Option<u64> {
    let args: Vec<String> = std::env::args().collect();
    let at = args.iter().position(|a| a == name)?;
    Some(args.get(at + 1).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("{name} takes a number")))
}

#[tokio::main]
async fn main() {
    let server = Example { tool_router: Example::tool_router() };
    let served = if std::env::args().any(|a| a == "--stock") {
        server.serve(rmcp::transport::stdio()).await
    } else if let Some(ms) = flag("--grace-ms") {
        let config = mcp_framer_rmcp::ServerConfig::default().with_shutdown_grace(Duration::from_millis(ms));
        server.serve(mcp_framer_rmcp::stdio_with_config(config)).await
    } else {
        server.serve(mcp_framer_rmcp::stdio()).await
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
    if let Some(ms) = flag("--linger-ms") {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
    // A pending blocking read of stock stdin may still hold a runtime thread.
    std::process::exit(code)
}
