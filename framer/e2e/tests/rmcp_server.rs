//! The example rmcp server (`rmcp_server`, `#[tool]` on
//! `mcp_framer_rmcp::stdio()` with the defaults), real processes:
//! `mcp-probe` passes every check on it with `--large` and `--slow`; the same server on rmcp's own
//! `stdio()` (`--stock`) fails four, asserted so the README's list of
//! differences stays true; and a cancelled `run` call kills its process
//! group, driven by an rmcp client over `mcp_framer_rmcp::ChildProcess`.

#![cfg(unix)]

use std::process::{Command, Stdio};
use std::time::Duration;

use mcp_framer_e2e::support::proc::alive;
use mcp_framer_e2e::support::{self, ChildWatchdog};
use mcp_framer_rmcp::{ChildProcess, ChildProcessHandle};
use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest};
use rmcp::service::PeerRequestOptions;
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

/// A probe run is well under this; the watchdog kills it past it.
const WATCHDOG: Duration = Duration::from_secs(600);

/// Runs the probe on the example server with `server_args`; the verdict of
/// every check, by name, and the exit status.
fn probe(server_args: &[&str]) -> (Vec<(String, String)>, Option<i32>, String) {
    let json = std::env::temp_dir().join(format!("mcp-probe-rmcp-{}-{}.json", std::process::id(), server_args.len()));
    let mut command = Command::new(env!("CARGO_BIN_EXE_probe_cli"));
    // Short limits, with `--max-request` above the 16 MiB limit so the
    // request-size check finds it, and the shutdown check's own rule (its
    // defaults: 2 s to exit after stdin closed, 2 s after SIGTERM), which
    // the server meets with the defaults it was given (none).
    let fast = mcp_framer_e2e::support::fast_probe_with(&[
        "--max-request",
        "32MiB",
        "--check-timeout",
        "120s",
        "--exit-timeout",
        "2s",
        "--term-timeout",
        "2s",
    ]);
    command.args(fast).arg("--json").arg(&json).arg("--").arg(env!("CARGO_BIN_EXE_rmcp_server")).args(server_args);
    let child = command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
    let pid = child.id();
    let watchdog = ChildWatchdog::arm(WATCHDOG, "mcp-probe on rmcp_server", move || {
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    });
    let output = child.wait_with_output().expect("wait for the probe");
    assert!(!watchdog.disarm(), "the probe hung");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let report: Value = serde_json::from_slice(&std::fs::read(&json).expect("a JSON report")).expect("JSON");
    let _ = std::fs::remove_file(&json);
    assert_eq!(report["leftover_processes"], json!([]), "{text}");
    let verdicts = report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .map(|c| (c["name"].as_str().unwrap().to_owned(), c["verdict"].as_str().unwrap().to_owned()))
        .collect();
    (verdicts, output.status.code(), text)
}

#[test]
fn mcp_probe_passes_every_check_on_the_adapter() {
    let (verdicts, exit, text) = probe(&[]);
    assert_eq!(verdicts.len(), mcp_probe::CheckId::ALL.len(), "every stdio check ran: {text}");
    for (name, verdict) in &verdicts {
        assert_eq!(verdict, "PASS", "{name}:\n{text}");
    }
    assert_eq!(exit, Some(0), "{text}");
}

#[test]
fn the_same_server_on_stock_stdio_fails_four_checks() {
    let (verdicts, exit, text) = probe(&["--stock"]);
    let failed: Vec<&str> = verdicts.iter().filter(|(_, v)| v == "FAIL").map(|(n, _)| n.as_str()).collect();
    // stdout-hygiene: its error replies carry no `id` (JSON-RPC needs
    // `id: null`); bad-input: no reply to a line that is not JSON, to
    // invalid UTF-8, to a batch, to a wrong `jsonrpc`; request-size: an
    // oversize request gets silence, its caller waits out its timeout;
    // shutdown: with a call running, rmcp waits 5 s for it after the end of
    // stdin, whatever signal comes.
    assert_eq!(failed, ["stdout-hygiene", "bad-input", "request-size", "shutdown"], "{text}");
    assert!(verdicts.iter().all(|(_, v)| v == "PASS" || v == "FAIL"), "{text}");
    assert_eq!(exit, Some(1), "{text}");
}

/// The example server on `ChildProcess`, initialized, and its handle.
async fn example() -> (RunningService<RoleClient, ()>, ChildProcessHandle) {
    let transport = ChildProcess::new(tokio::process::Command::new(env!("CARGO_BIN_EXE_rmcp_server"))).expect("spawn");
    let handle = transport.handle();
    (().serve(transport).await.expect("initialize"), handle)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_run_kills_its_process_group() {
    support::watchdog(Duration::from_secs(240), "cancelled run", async {
        let (service, handle) = example().await;
        for round in 0..3 {
            let pidfile = std::env::temp_dir().join(format!("rmcp-run-{}-{round}", std::process::id()));
            let script = format!("sleep 300 & echo $! > {}; wait", pidfile.display());
            let params = CallToolRequestParams::new("run")
                .with_arguments(json!({"script": script}).as_object().cloned().unwrap_or_default());
            let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
            let call = service.send_cancellable_request(request, PeerRequestOptions::no_options()).await.unwrap();
            let written = support::eventually_async(Duration::from_secs(30), || {
                std::fs::read_to_string(&pidfile).is_ok_and(|s| s.trim().parse::<u32>().is_ok())
            })
            .await;
            assert!(written, "the tool's child started");
            let grandchild: u32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
            let _ = std::fs::remove_file(&pidfile);
            assert!(alive(grandchild));
            call.cancel(Some("stop".into())).await.unwrap();
            let gone = support::eventually_async(Duration::from_secs(30), || !alive(grandchild)).await;
            assert!(gone, "the cancellation reached the tool's process group (pid {grandchild})");
            // The server goes on.
            let tools = service.list_all_tools().await.expect("tools/list after the cancel");
            assert_eq!(tools.len(), 3);
        }
        service.cancel().await.unwrap();
        assert_eq!(handle.counts().rejected, 0);
        assert!(handle.closed().is_some());
    })
    .await;
}

/// SIGTERM is the end of stdin for `mcp_framer_rmcp::stdio()`: rmcp's
/// service sees its input end, finishes, and the server exits 0 while its
/// stdin is still open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_ends_the_server_as_stdin_eof_does() {
    support::watchdog(Duration::from_secs(240), "SIGTERM", async {
        for _ in 0..3 {
            let (service, handle) = example().await;
            assert_eq!(service.list_all_tools().await.expect("tools/list").len(), 3);
            let pid = handle.id().expect("a pid");
            let _ = Command::new("kill").args(["-TERM", &pid.to_string()]).status();
            let exited = support::eventually_async(Duration::from_secs(60), || handle.exit_status().is_some()).await;
            assert!(exited, "the server exited after SIGTERM; stderr: {}", handle.stderr_tail());
            assert_eq!(handle.exit_status().and_then(|s| s.code()), Some(0), "{}", handle.stderr_tail());
            let _ = service.cancel().await;
        }
    })
    .await;
}

/// Issue 28, defect 4: an error response over the server's send limit (a
/// handler's 17 MiB `data`) is not written either: its request gets a short
/// -32603 error for its id, at once, where it used to wait forever (rmcp has
/// no default request timeout).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_over_the_send_limit_becomes_a_short_error_for_its_id() {
    support::watchdog(Duration::from_secs(300), "oversize error", async {
        let (service, handle) = example().await;
        for _ in 0..3 {
            let params = CallToolRequestParams::new("large")
                .with_arguments(json!({"bytes": 17 << 20, "as_error": true}).as_object().cloned().unwrap_or_default());
            let answer =
                tokio::time::timeout(Duration::from_secs(120), service.call_tool(params)).await.expect("answered");
            let Err(rmcp::ServiceError::McpError(error)) = answer else { panic!("{answer:?}") };
            assert_eq!(error.code.0, -32603, "{error:?}");
            assert!(error.message.starts_with("error -32603 of "), "{error:?}");
            assert!(error.message.contains("exceeds the transport limit of 16777216 bytes"), "{error:?}");
            assert_eq!(error.data, None);
        }
        assert_eq!(handle.metrics().oversize_frames, 0, "nothing over the limit reached the host");
        assert_eq!(service.list_all_tools().await.expect("tools/list").len(), 3);
        service.cancel().await.unwrap();
    })
    .await;
}

/// A result over the server's send limit (16 MiB) is not written: its
/// `tools/call` gets a tool failure (`isError: true`) saying why, at once,
/// as the server library answers it, and the server goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_over_the_send_limit_becomes_a_tool_failure() {
    support::watchdog(Duration::from_secs(240), "oversize result", async {
        let (service, handle) = example().await;
        let params = CallToolRequestParams::new("large")
            .with_arguments(json!({"bytes": 17 << 20}).as_object().cloned().unwrap_or_default());
        let answer = tokio::time::timeout(Duration::from_secs(120), service.call_tool(params)).await.expect("answered");
        let failure = answer.expect("a result, not a JSON-RPC error");
        assert_eq!(failure.is_error, Some(true), "{failure:?}");
        let text = serde_json::to_string(&failure.content).unwrap();
        assert!(text.contains("exceeds the transport limit of 16777216 bytes"), "{text}");
        // Nothing over the limit reached the host.
        assert_eq!(handle.metrics().oversize_frames, 0);
        assert_eq!(service.list_all_tools().await.expect("tools/list").len(), 3);
        service.cancel().await.unwrap();
    })
    .await;
}
