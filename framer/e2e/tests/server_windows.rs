//! The server library's console-control events on Windows: Ctrl-Break
//! (and Ctrl-C) end its input like the end of stdin, every call is
//! answered, and it exits `128 + event`.
//!
//! Real Windows only: under Wine, `GenerateConsoleCtrlEvent` to a child's
//! console process group never delivers, so the test is ignored there
//! (`scripts/test-windows` runs under Wine); run it on Windows with
//! `cargo test -p mcp-framer-e2e --test server_windows -- --ignored`.
//! The unix counterpart (SIGTERM, SIGINT) is `server_signals.rs`.

#![cfg(windows)]

use std::io::{BufRead, BufReader, Write};
use std::os::windows::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use mcp_framer_e2e::support::ChildWatchdog;

/// `CREATE_NEW_PROCESS_GROUP`: the child gets a console process group of
/// its own, the only kind `GenerateConsoleCtrlEvent` can address.
const CREATE_NEW_PROCESS_GROUP: u32 = 0x0000_0200;

#[test]
#[ignore = "real Windows only: GenerateConsoleCtrlEvent never delivers under Wine"]
fn ctrl_break_ends_the_input_like_stdin_eof() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lib_server"))
        .creation_flags(CREATE_NEW_PROCESS_GROUP)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn lib_server");
    let pid = child.id();
    let watchdog = ChildWatchdog::arm(Duration::from_secs(20), "ctrl-break", move || {
        let _ = Command::new("taskkill").args(["/F", "/T", "/PID", &pid.to_string()]).status();
    });
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":1,"method":"ping"}}"#).expect("write");
    let mut line = String::new();
    stdout.read_line(&mut line).expect("read");
    assert!(line.contains(r#""id":1"#), "answered before the event: {line}");
    // SAFETY: a plain Win32 call with integer arguments; it touches no memory of ours.
    let sent = unsafe {
        windows_sys::Win32::System::Console::GenerateConsoleCtrlEvent(
            windows_sys::Win32::System::Console::CTRL_BREAK_EVENT,
            pid,
        )
    };
    assert_ne!(sent, 0, "GenerateConsoleCtrlEvent failed");
    // stdin stays open: only the event can end the loop.
    let status = child.wait().expect("wait");
    assert!(!watchdog.disarm(), "the server did not stop at Ctrl-Break");
    assert_eq!(status.code(), Some(129), "128 + CTRL_BREAK_EVENT (1)");
    drop(stdin);
}
