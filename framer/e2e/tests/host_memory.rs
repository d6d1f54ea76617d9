//! A frame is held once: a fresh host process reading a frame at its 16 MiB
//! limit, or a 64 MiB oversize frame, raises its peak resident memory
//! (`VmHWM`, read from `/proc/self/status` by the `hwm_host` fixture) by at
//! most the limit plus 4 MiB. Growing the frame in place and handing its
//! storage to the requester (never a second copy) is what keeps it there.
//!
//! Each case runs in a fresh process, under the watchdog below (and the
//! fixture's own 240 s one): hang guards, not speeds.

#![cfg(unix)]

use std::process::Command;
use std::time::Duration;

use mcp_framer_e2e::support;

/// The default transport limit, which `hwm_host` uses.
const LIMIT: u64 = mcp_framer::DEFAULT_MAX_FRAME as u64;
/// What reading one frame may add to the peak: the limit plus 4 MiB.
const BOUND_KIB: u64 = (LIMIT + (4 << 20)) / 1024;
/// A hang guard: a case takes seconds, tens on a loaded machine.
const WATCHDOG: Duration = Duration::from_secs(300);

/// Runs `hwm_host` for one frame of `frame_bytes`; returns its report.
async fn measure(frame_bytes: u64) -> serde_json::Value {
    let output = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_hwm_host"))
            .args([env!("CARGO_BIN_EXE_hostile_server"), &frame_bytes.to_string()])
            .output()
            .expect("run hwm_host")
    })
    .await
    .expect("join");
    assert!(output.status.success(), "hwm_host failed: {}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("one JSON line")
}

fn rise_kib(report: &serde_json::Value) -> u64 {
    report["hwm_kib"].as_u64().unwrap() - report["idle_hwm_kib"].as_u64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_at_the_limit_is_held_once() {
    assert_eq!(LIMIT, 16 << 20);
    let report = support::watchdog(WATCHDOG, "16 MiB frame", measure(LIMIT)).await;
    eprintln!("frame at the limit: {report}");
    assert_eq!(report["outcome"], "response", "{report}");
    assert_eq!(report["len"], LIMIT, "{report}");
    let rise = rise_kib(&report);
    assert!(rise <= BOUND_KIB, "VmHWM rose by {rise} KiB for a {LIMIT}-byte frame (bound {BOUND_KIB} KiB): {report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversize_frame_is_held_at_most_up_to_the_limit() {
    let frame = 64 << 20;
    let report = support::watchdog(WATCHDOG, "64 MiB frame", measure(frame)).await;
    eprintln!("oversize frame: {report}");
    assert_eq!(report["outcome"], "oversize", "{report}");
    assert_eq!(report["len"], frame, "{report}");
    let rise = rise_kib(&report);
    assert!(
        rise <= BOUND_KIB,
        "VmHWM rose by {rise} KiB for a {frame}-byte oversize frame (bound {BOUND_KIB} KiB): {report}"
    );
}
