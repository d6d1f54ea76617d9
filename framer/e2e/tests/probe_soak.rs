//! `mcp-probe --soak` against real server processes, both ways: the
//! well-behaved fixture passes on both transports, with every kind of call
//! sent and answered; a fixture that answers no request in N (`--lose-every`)
//! FAILs with the lost calls named; one that keeps more bytes every second
//! (`--leak-per-second`) FAILs on memory growth. Each run is short (the
//! verdicts need seconds, not minutes) and watched; third-party servers are
//! soaked by `scripts/sdk-clients`.

#![cfg(target_os = "linux")]

use std::process::Command;
use std::time::Duration;

use mcp_framer_e2e::support::probe::{ProbeRun, run_probe, temp_json, validate};
use serde_json::Value;

/// Each run is under a minute even in a debug build on a loaded machine.
const WATCHDOG: Duration = Duration::from_secs(180);

fn schema() -> Value {
    serde_json::from_str(include_str!("../../probe/report.schema.json")).expect("the schema is JSON")
}

/// Runs `mcp-probe --only soak` with `flags` against `server`; returns the
/// run and its soak check.
fn soak(label: &str, flags: &[&str], server: &[&str]) -> (ProbeRun, Value) {
    let json = temp_json("mcp-probe-soak", label);
    let mut command = Command::new(env!("CARGO_BIN_EXE_probe_cli"));
    command.args(["-q", "--only", "soak", "--step-timeout", "5s"]).args(flags);
    command.arg("--json").arg(&json).arg("--").args(server);
    let run = run_probe(command, &json, WATCHDOG, &format!("mcp-probe --soak {label}"));
    let report = run.report.clone().unwrap_or_else(|| panic!("no report:\n{}", run.text));
    validate(&schema(), &report, "report");
    let checks = report["checks"].as_array().expect("checks");
    let check = checks.iter().find(|c| c["name"] == "soak").unwrap_or_else(|| panic!("no soak:\n{}", run.text)).clone();
    for other in checks.iter().filter(|c| c["name"] != "soak") {
        assert_eq!(other["verdict"], "SKIP", "--only soak runs the soak alone:\n{}", run.text);
    }
    assert_eq!(report["leftover_processes"], Value::Array(vec![]), "{}", run.text);
    (run, check)
}

fn evidence(check: &Value) -> String {
    check["evidence"].as_array().expect("evidence").iter().filter_map(Value::as_str).collect::<Vec<_>>().join("\n")
}

const FIXTURE_TOOLS: [&str; 4] = ["--large", r#"large {"bytes":200000}"#, "--slow", r#"slow {"seconds":5}"#];

#[test]
fn the_fixture_passes_a_soak_with_every_kind_of_call_on_both_transports() {
    let fixture = env!("CARGO_BIN_EXE_probe_fixture");
    let v2 = env!("CARGO_BIN_EXE_v2_server");
    let v2_tools = ["--large", r#"big {"bytes":200000}"#, "--slow", r#"slow {"ms":5000}"#];
    for (label, flags, server, number) in [
        ("stdio", [&["--soak", "7s", "--concurrency", "4"][..], &FIXTURE_TOOLS].concat(), fixture, 12),
        (
            "stdio-v2",
            [&["--soak", "7s", "--concurrency", "4", "--transport", "stdio-v2"][..], &v2_tools].concat(),
            v2,
            9,
        ),
    ] {
        let (run, check) = soak(label, &flags, &[server]);
        assert_eq!((check["verdict"].as_str(), check["number"].as_u64()), (Some("PASS"), Some(number)), "{}", run.text);
        assert_eq!(run.exit, Some(0), "{}", run.text);
        let m = &check["measurements"];
        assert_eq!((m["lost"].as_u64(), m["wrong"].as_u64()), (Some(0), Some(0)), "{label}: {}", run.text);
        for kind in ["liveness", "tools-list", "unknown-tool", "large", "slow", "dropped"] {
            assert!(
                m["kinds"][kind]["calls"].as_u64().is_some_and(|n| n > 0),
                "{label}: no {kind} call:\n{}",
                run.text
            );
        }
        // Every unknown-tool call was answered, and with an error.
        let unknown = &m["kinds"]["unknown-tool"];
        assert_eq!(unknown["answered"], unknown["calls"], "{label}: {}", run.text);
        assert_eq!(unknown["errors"], unknown["calls"], "{label}: {}", run.text);
        // The slow calls were given up (the cancellation sent), not lost.
        assert!(m["kinds"]["slow"]["gave_up"].as_u64().is_some_and(|n| n > 0), "{label}: {}", run.text);
        assert!(m["rss_samples_kib"].as_array().is_some_and(|s| s.len() >= 6), "{label}: {}", run.text);
        assert!(evidence(&check).contains("within 16 MiB of the middle third"), "{label}: {}", run.text);
    }
}

#[test]
fn a_server_that_drops_answers_fails_the_soak_with_the_lost_calls_named() {
    let flags = [&["--soak", "6s", "--concurrency", "4"][..], &FIXTURE_TOOLS].concat();
    let (run, check) = soak("lose", &flags, &[env!("CARGO_BIN_EXE_probe_fixture"), "--lose-every", "50"]);
    assert_eq!(check["verdict"], "FAIL", "{}", run.text);
    assert_eq!(run.exit, Some(1), "{}", run.text);
    assert!(check["measurements"]["lost"].as_u64().is_some_and(|n| n > 0), "{}", run.text);
    let evidence = evidence(&check);
    assert!(evidence.contains("owed answers lost"), "{evidence}");
    assert!(evidence.contains("not answered within 5.00 s"), "{evidence}");
}

#[test]
fn a_server_that_grows_fails_the_soak_on_growth() {
    // 4 MiB a second: the last third's median is about 10 MiB over the
    // middle one's in 8 s, against a bound of 1 MiB.
    let flags = ["--soak", "8s", "--concurrency", "2", "--soak-growth", "1MiB"];
    let (run, check) = soak("leak", &flags, &[env!("CARGO_BIN_EXE_probe_fixture"), "--leak-per-second", "4194304"]);
    assert_eq!(check["verdict"], "FAIL", "{}", run.text);
    let m = &check["measurements"];
    assert_eq!(m["lost"], 0, "nothing lost: the memory alone fails it:\n{}", run.text);
    let thirds = m["rss_thirds_mib"].as_array().expect("thirds");
    let growth = thirds[2].as_f64().unwrap() - thirds[1].as_f64().unwrap();
    assert!(growth > 1.0, "{thirds:?}");
    assert!(evidence(&check).contains("over the middle one (bound --soak-growth 1 MiB)"), "{}", run.text);
}
