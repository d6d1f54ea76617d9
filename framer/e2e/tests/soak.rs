//! The soak binary, briefly, on both transports and both runtimes: real
//! processes, every kind of call and every hostile caller, nothing wrong
//! and nothing lost, and a report with what `scripts/soak` reads. (The
//! memory verdict needs minutes; `scripts/soak` runs it.)
#![cfg(unix)]

use std::process::Command;
use std::time::Duration;

use mcp_framer_e2e::support::probe::run_watched;
use serde_json::Value;

fn soak(transport: &str, runtime: &str) -> Value {
    let dir = std::env::temp_dir().join(format!("mcp-soak-test-{}-{transport}-{runtime}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("report.json");
    let mut command = Command::new(env!("CARGO_BIN_EXE_soak"));
    command
        .args(["--transport", transport, "--runtime", runtime, "--duration", "6", "--callers", "4"])
        .args(["--server", env!("CARGO_BIN_EXE_soak_server"), "--stderr-flood", "64", "--storm", "4"])
        .arg("--json")
        .arg(&json);
    let output = run_watched(command, Duration::from_secs(240), &format!("the {transport} soak"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap_or_else(|e| {
        panic!("no report ({e}); exit {:?}\n{stdout}\n{}", output.status, String::from_utf8_lossy(&output.stderr))
    }))
    .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!((report["wrong"].as_u64(), report["lost"].as_u64()), (Some(0), Some(0)), "{stdout}");
    for kind in ["echo", "ping", "give_up", "is_error", "invalid_params", "oversize", "reset_storm"] {
        assert!(report["kinds"][kind]["calls"].as_u64().is_some_and(|n| n > 0), "no {kind} calls:\n{stdout}");
    }
    for side in ["host", "server"] {
        assert!(report["rss"][side]["peak_mib"].as_f64().is_some_and(|mib| mib > 0.0), "{side}: {stdout}");
    }
    assert!(report["rss"]["samples"].as_array().is_some_and(|s| s.len() >= 5), "{stdout}");
    assert!(!report["server_report"].is_null(), "the server's report line was not read:\n{stdout}");
    report
}

#[test]
fn a_short_soak_of_each_transport_loses_nothing_and_counts_its_cancellations() {
    {
        let newline = soak("newline", "current-thread");
        let cancels = &newline["cancellation"];
        assert!(cancels["host"]["cancellations_sent"].as_u64().is_some_and(|n| n > 0), "{cancels}");
        assert!(cancels["server"]["cancels"]["running"].as_u64().is_some_and(|n| n > 0), "{cancels}");

        let v2 = soak("stdio-v2", "multi-thread");
        let cancels = &v2["cancellation"];
        assert!(cancels["host"]["cancellations_sent"].as_u64().is_some_and(|n| n > 0), "{cancels}");
        assert!(cancels["server"]["v2_resets"].as_u64().is_some_and(|n| n > 0), "{cancels}");
        assert!(cancels["server"]["v2_oversize_bodies"].as_u64().is_some_and(|n| n > 0), "{cancels}");
    }
}
