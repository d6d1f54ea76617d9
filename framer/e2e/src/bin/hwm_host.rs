//! A fresh host process that measures its own peak memory (`VmHWM`) while a
//! [`Session`] reads one large response from `hostile_server`: the fixture of
//! `tests/host_memory.rs`.
//!
//! `hwm_host SERVER FRAME_BYTES` spawns `SERVER` (the `hostile_server`
//! binary) under the default configuration (a 16 MiB transport limit), answers a `ping` (so every task
//! and buffer of the session exists), reads `VmHWM` as the idle baseline,
//! asks the `sized` tool for a response line of exactly `FRAME_BYTES` bytes,
//! waits for the outcome (the response, or `RequestError::Oversize`), drops
//! it, reads `VmHWM` again and prints one JSON line:
//! `{"idle_hwm_kib":…,"hwm_kib":…,"outcome":"response"|"oversize","len":…}`.
//! Everything has a deadline: the process exits 3 after 240 s whatever
//! happens (a hang guard: a debug build on a loaded machine takes seconds).

use std::time::Duration;

use mcp_framer_stdio::host::{RequestError, Session, SessionConfig};
use serde_json::json;

/// `VmHWM` of this process, in KiB.
fn vm_hwm_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status.lines().find(|line| line.starts_with("VmHWM:")).expect("VmHWM");
    line.split_whitespace().nth(1).and_then(|kib| kib.parse().ok()).expect("VmHWM in kB")
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, server, frame_bytes] = &args[..] else {
        eprintln!("usage: hwm_host SERVER FRAME_BYTES");
        std::process::exit(2);
    };
    let frame_bytes: u64 = frame_bytes.parse().expect("FRAME_BYTES");
    std::thread::spawn(|| {
        std::thread::sleep(Duration::from_secs(240));
        eprintln!("hwm_host: watchdog fired after 240 s");
        std::process::exit(3);
    });
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let line = runtime.block_on(async {
        let config = SessionConfig::default().with_request_timeout(Duration::from_secs(200));
        let (session, _inbound) = Session::spawn(tokio::process::Command::new(server), config).expect("spawn");
        session.request("ping", &()).await.expect("ping");
        let idle = vm_hwm_kib();
        let params = json!({"name": "sized", "arguments": {"frame_bytes": frame_bytes}});
        let (outcome, len) = match session.request("tools/call", &params).await {
            Ok(response) => ("response", response.frame().len() as u64),
            Err(RequestError::Oversize { len, .. }) => ("oversize", len),
            Err(e) => panic!("tools/call sized: {e}"),
        };
        let peak = vm_hwm_kib();
        session.shutdown().await;
        json!({"idle_hwm_kib": idle, "hwm_kib": peak, "outcome": outcome, "len": len}).to_string()
    });
    println!("{line}");
}
