//! `mcp-probe --transport stdio-v2`, real processes both: the `stdio-v2`
//! fixture (`v2_server`) passes every check that applies, its body limit is
//! found to the byte, a newline server (`lib_server`) FAILs the selection
//! at once (not after the startup timeout) with what it wrote and every
//! other check is SKIPped, the defects of `v2_serial_server` (one stream
//! answered at a time, an exit on a malformed body, a refusal other than
//! `413`, silence over its limit) FAIL or WARN their check, and the exit
//! status follows the verdicts (a WARN is exit 0, or 1 with `--fail-on
//! warn`; an unknown tool is exit 2).
//!
//! The probe binary is `probe_cli` (the `mcp-probe` binary's own
//! `main.rs`, built in this crate).

#![cfg(unix)]

use std::process::Command;
use std::time::Duration;

use mcp_framer_e2e::support::probe::{ProbeRun, run_probe, temp_json, validate};
use serde_json::Value;

/// Each probe run is well under this, even in a debug build on a loaded
/// machine; the watchdog kills it (and its servers) past it.
const WATCHDOG: Duration = Duration::from_secs(120);

/// The `stdio-v2` checks, in order.
const CHECKS: [&str; 8] =
    ["selection", "handshake", "bad-input", "request-size", "head-of-line", "cancellation", "stderr", "shutdown"];

/// The fixture's tools for the checks that need one: a result well over
/// the probe's stream window, a call that starts a process tree and sends
/// progress, a tool that writes more stderr than a pipe holds.
const TOOLS: &[&str] =
    &["--large", r#"big {"bytes":1048576}"#, "--slow", "subprocess {}", "--noisy", r#"noise {"bytes":1048576}"#];

struct Run {
    exit: Option<i32>,
    text: String,
    report: Option<Value>,
}

impl Run {
    fn report(&self) -> &Value {
        self.report.as_ref().unwrap_or_else(|| panic!("no JSON report; output:\n{}", self.text))
    }

    fn check(&self, name: &str) -> &Value {
        let checks = self.report()["checks"].as_array().expect("checks");
        checks.iter().find(|c| c["name"] == name).unwrap_or_else(|| panic!("no check {name}:\n{}", self.text))
    }

    fn verdict(&self, name: &str) -> &str {
        self.check(name)["verdict"].as_str().expect("verdict")
    }

    fn evidence(&self, name: &str) -> String {
        let evidence = self.check(name)["evidence"].as_array().expect("evidence");
        evidence.iter().filter_map(Value::as_str).collect::<Vec<_>>().join("\n")
    }

    fn measurement(&self, name: &str, key: &str) -> &Value {
        &self.check(name)["measurements"][key]
    }
}

/// Runs `probe_cli --transport stdio-v2 ARGS --json FILE -- SERVER SERVER_ARGS`
/// to its end under the watchdog.
fn probe(args: &[&str], server: &str, server_args: &[&str]) -> Run {
    let json = temp_json("mcp-probe-v2", server.rsplit('/').next().unwrap_or("server"));
    let mut command = Command::new(env!("CARGO_BIN_EXE_probe_cli"));
    command.args(["-q", "--transport", "stdio-v2"]).args(args);
    // Generous where an answer must come (a debug build, a loaded machine),
    // unless the test sets its own.
    if !args.contains(&"--ping-timeout") {
        command.args(["--ping-timeout", "5s"]);
    }
    command.arg("--json").arg(&json).arg("--").arg(server);
    command.args(server_args);
    let what = format!("mcp-probe --transport stdio-v2 {args:?} -- {server}");
    let ProbeRun { exit, text, report } = run_probe(command, &json, WATCHDOG, &what);
    Run { exit, text, report }
}

fn schema() -> Value {
    serde_json::from_str(include_str!("../../probe/report.schema.json")).expect("the schema is JSON")
}

#[test]
fn the_v2_fixture_passes_every_check_that_applies() {
    let run = probe(&[TOOLS, &["--max-request", "1MiB"]].concat(), env!("CARGO_BIN_EXE_v2_server"), &[]);
    for name in CHECKS {
        assert_eq!(run.verdict(name), "PASS", "{name}:\n{}", run.text);
    }
    assert_eq!(run.exit, Some(0), "{}", run.text);
    let report = run.report();
    validate(&schema(), report, "report");
    assert_eq!((report["version"].as_u64(), report["transport"].as_str()), (Some(5), Some("stdio-v2")));
    assert_eq!(report["summary"]["pass"], 8);
    assert_eq!(report["leftover_processes"], Value::Array(vec![]), "{}", run.text);
    assert_eq!(report["opening"]["era"], "modern", "{}", run.text);
    // Each check shows the property it judged, not just a verdict.
    assert!(run.evidence("selection").contains("the server speaks stdio-v2"), "{}", run.text);
    assert_eq!(run.measurement("bad-input", "malformed_body"), &serde_json::json!({"status": 400, "code": -32700}));
    assert_eq!(run.measurement("bad-input", "header_mismatch"), &serde_json::json!({"status": 400, "code": -32020}));
    assert!(run.evidence("bad-input").contains("the connection survived"), "{}", run.text);
    assert_eq!(run.measurement("request-size", "largest_answered"), 1 << 20, "{}", run.text);
    assert!(run.evidence("head-of-line").contains("no head-of-line blocking"), "{}", run.text);
    assert!(run.measurement("head-of-line", "large_bytes").as_u64() > Some(64 << 10), "{}", run.text);
    assert!(run.measurement("cancellation", "children_started").as_u64() >= Some(1), "{}", run.text);
    assert!(run.evidence("cancellation").contains("every process the call started was gone"), "{}", run.text);
    assert!(run.measurement("stderr", "stderr_bytes").as_u64() >= Some(1 << 20), "{}", run.text);
    assert!(run.measurement("stderr", "tail_bytes").as_u64() <= Some((16 << 10) + 256), "{}", run.text);
    assert!(run.measurement("shutdown", "busy_children_before_close").as_u64() >= Some(1), "{}", run.text);
    assert_eq!(run.measurement("shutdown", "busy_left_in_group"), 0, "{}", run.text);
    assert!(run.text.contains("summary: 8 PASS, 0 WARN, 0 FAIL, 0 SKIP"), "{}", run.text);
}

#[test]
fn the_body_limit_is_found_to_the_byte_and_refused_with_413() {
    let args = ["--only", "request-size", "--max-request", "1MiB"];
    let run = probe(&args, env!("CARGO_BIN_EXE_v2_server"), &["--max-frame", "300000"]);
    assert_eq!(run.verdict("request-size"), "PASS", "{}", run.text);
    assert_eq!(run.exit, Some(0), "{}", run.text);
    assert_eq!(run.measurement("request-size", "largest_answered"), 300000, "{}", run.text);
    assert_eq!(run.measurement("request-size", "first_failed"), 300001, "{}", run.text);
    assert_eq!(run.measurement("request-size", "advertised_limit"), 300000, "{}", run.text);
    let evidence = run.evidence("request-size");
    assert!(evidence.contains("HTTP 413 with -32600"), "{evidence}");
    assert!(evidence.contains("the connection survived"), "{evidence}");
    for other in CHECKS.iter().filter(|&&c| c != "request-size") {
        assert_eq!(run.verdict(other), "SKIP", "{other}:\n{}", run.text);
    }
    validate(&schema(), run.report(), "report");
}

#[test]
fn a_newline_server_fails_the_selection_at_once_quoting_what_it_wrote() {
    // A startup timeout far above the time allowed below: the FAIL must
    // come from the server's first bytes, not from waiting it out.
    let run = probe(&["--init-timeout", "100s", "--check-timeout", "110s"], env!("CARGO_BIN_EXE_lib_server"), &[]);
    assert_eq!(run.verdict("selection"), "FAIL", "{}", run.text);
    let evidence = run.evidence("selection");
    assert!(evidence.contains("speaks `stdio` (newline-delimited JSON-RPC), not `stdio-v2`"), "{evidence}");
    assert!(evidence.contains("-32700"), "the evidence quotes what the server wrote: {evidence}");
    assert!(run.measurement("selection", "first_bytes").as_str().is_some_and(|b| b.contains("\"jsonrpc\"")));
    let took = run.check("selection")["duration_ms"].as_u64().expect("duration");
    assert!(took < 50_000, "the selection FAIL took {took} ms: it waited for the timeout\n{}", run.text);
    for other in CHECKS.iter().filter(|&&c| c != "selection") {
        assert_eq!(run.verdict(other), "SKIP", "{other}:\n{}", run.text);
        assert!(run.evidence(other).contains("see the selection check"), "{}", run.text);
    }
    assert_eq!(run.exit, Some(1), "a FAIL is exit 1:\n{}", run.text);
    assert_eq!(run.report()["summary"]["exit_code"], 1);
    assert_eq!(run.report()["leftover_processes"], Value::Array(vec![]), "{}", run.text);
    validate(&schema(), run.report(), "report");
}

#[test]
fn the_exit_status_follows_the_verdicts() {
    // A large result inside the stream's window: head-of-line cannot tell (WARN).
    let small = ["--only", "head-of-line", "--large", r#"big {"bytes":1000}"#];
    let run = probe(&small, env!("CARGO_BIN_EXE_v2_server"), &[]);
    assert_eq!(run.verdict("head-of-line"), "WARN", "{}", run.text);
    assert!(run.evidence("head-of-line").contains("could not tell"), "{}", run.text);
    assert_eq!(run.exit, Some(0), "a WARN is exit 0 by default:\n{}", run.text);
    let strict = probe(&[&small[..], &["--fail-on", "warn"]].concat(), env!("CARGO_BIN_EXE_v2_server"), &[]);
    assert_eq!(strict.verdict("head-of-line"), "WARN", "{}", strict.text);
    assert_eq!(strict.exit, Some(1), "a WARN is exit 1 with --fail-on warn:\n{}", strict.text);
    // A tool the server does not list: a usage error, before any check.
    let unknown = probe(&["--slow", "no_such_tool {}"], env!("CARGO_BIN_EXE_v2_server"), &[]);
    assert_eq!(unknown.exit, Some(2), "{}", unknown.text);
    assert!(unknown.text.contains("no_such_tool") && unknown.text.contains("subprocess"), "{}", unknown.text);
    assert!(unknown.report.is_none(), "no report for a usage error");
}

#[test]
fn a_server_that_answers_one_stream_at_a_time_fails_head_of_line() {
    // v2_serial_server sends each answer whole before it reads the next
    // request: the liveness request waits behind the unread large result.
    let args = ["--only", "head-of-line", "--large", r#"big {"bytes":1048576}"#, "--ping-timeout", "2s"];
    let run = probe(&args, env!("CARGO_BIN_EXE_v2_serial_server"), &[]);
    assert_eq!(run.verdict("head-of-line"), "FAIL", "{}", run.text);
    let evidence = run.evidence("head-of-line");
    assert!(evidence.contains("got nothing within 2.00 s while the large result waited"), "{evidence}");
    assert!(evidence.contains("answered only after the large result (1048"), "{evidence}");
    assert_eq!(run.check("head-of-line")["behaviours"], serde_json::json!(["head-of-line-blocking"]));
    assert_eq!(run.exit, Some(1), "{}", run.text);
    assert_eq!(run.report()["leftover_processes"], Value::Array(vec![]), "{}", run.text);
    validate(&schema(), run.report(), "report");
}

#[test]
fn a_server_that_exits_on_a_malformed_body_fails_bad_input() {
    let run = probe(&["--only", "bad-input"], env!("CARGO_BIN_EXE_v2_serial_server"), &["--exit-on-bad-json"]);
    assert_eq!(run.verdict("bad-input"), "FAIL", "{}", run.text);
    let evidence = run.evidence("bad-input");
    assert!(evidence.contains("a malformed JSON body: expected HTTP 400 with -32700, got the stdio-v2 session ended"));
    assert!(evidence.contains("exit status: 3"), "the evidence says how the server ended: {evidence}");
    assert!(evidence.contains("the connection is dead"), "{evidence}");
    assert_eq!(run.exit, Some(1), "{}", run.text);
}

#[test]
fn a_refusal_other_than_413_warns_and_the_limit_is_still_bisected() {
    let args = ["--only", "request-size", "--max-request", "1MiB", "--bisect-steps", "6"];
    let run = probe(&args, env!("CARGO_BIN_EXE_v2_serial_server"), &["--limit", "300000", "--over-limit", "400"]);
    assert_eq!(run.verdict("request-size"), "WARN", "{}", run.text);
    assert!(run.evidence("request-size").contains("refused with HTTP 400, not 413"), "{}", run.text);
    let (lo, hi) =
        (run.measurement("request-size", "largest_answered"), run.measurement("request-size", "first_failed"));
    let (lo, hi) = (lo.as_u64().expect("largest"), hi.as_u64().expect("first failed"));
    assert!(lo <= 300000 && 300000 < hi && hi - lo <= (524288 - 262144) >> 6, "{lo}..{hi}:\n{}", run.text);
    assert_eq!(run.exit, Some(0), "a WARN is exit 0:\n{}", run.text);
}

#[test]
fn silence_over_the_limit_while_other_requests_are_answered_is_deaf() {
    let args = ["--only", "request-size", "--max-request", "1MiB", "--step-timeout", "3s"];
    let run = probe(&args, env!("CARGO_BIN_EXE_v2_serial_server"), &["--limit", "300000", "--over-limit", "silent"]);
    assert_eq!(run.verdict("request-size"), "FAIL", "{}", run.text);
    let evidence = run.evidence("request-size");
    // The wait is at least --step-timeout, longer when the answers so far
    // grew slowly (a loaded machine): the verdict does not depend on it.
    assert!(evidence.contains("a body of 524288 bytes got no answer within"), "{evidence}");
    assert!(evidence.contains("deaf, not slow"), "{evidence}");
    assert_eq!(run.exit, Some(1), "{}", run.text);
}

/// `node`, if it is on the PATH (the Node http2 server's tests need it).
fn node() -> Option<&'static str> {
    let found = Command::new("node").arg("--version").output().is_ok_and(|o| o.status.success());
    if !found {
        eprintln!("SKIPPED: `node` is not on PATH; the Node http2 server tests need Node 20 or later");
    }
    found.then_some("node")
}

#[test]
fn a_server_that_serves_a_body_its_method_header_contradicts_fails_bad_input() {
    // A server that is not ours (Node's own http2 module) that checks no
    // header: the body for one method is executed under another's header.
    let Some(node) = node() else { return };
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/sdk/node_h2_server.mjs");
    let run = probe(&["--only", "bad-input"], node, &[script, "--no-header-checks"]);
    assert_eq!(run.verdict("bad-input"), "FAIL", "{}", run.text);
    let evidence = run.evidence("bad-input");
    assert!(evidence.contains("expected HTTP 400 with -32020, got a success"), "{evidence}");
    assert!(evidence.contains("while the header named"), "{evidence}");
    assert!(evidence.contains("the connection survived"), "{evidence}");
    assert_eq!(run.exit, Some(1), "{}", run.text);
    // The same server with its header checks on: the contradiction is
    // refused as the text asks, and nothing FAILs.
    let checked = probe(&["--only", "bad-input"], node, &[script]);
    assert_eq!(
        checked.measurement("bad-input", "header_mismatch"),
        &serde_json::json!({"status": 400, "code": -32020}),
        "{}",
        checked.text
    );
    assert_ne!(checked.verdict("bad-input"), "FAIL", "{}", checked.text);
    assert_eq!(checked.exit, Some(0), "{}", checked.text);
}
