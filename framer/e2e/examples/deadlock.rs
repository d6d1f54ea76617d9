//! The stdio deadlock, and the same request through mcp-framer's host
//! transport.
//!
//! ```sh
//! cargo run -p mcp-framer-e2e --example deadlock            # or with --release
//! ```
//!
//! It runs the `hostile_server` fixture twice and asks each time for an 8 MiB
//! tool result:
//!
//! 1. with a naive parent that never reads the server's stdout: the server
//!    blocks in `write()` with the pipe full, reports backpressure on stderr,
//!    and stays stuck until it is killed;
//! 2. with [`Session`]: the reader drains stdout while the request waits, the
//!    response arrives, a second request is answered at once, and the
//!    session shuts down cleanly. The metrics are printed.
//!
//! The fixture: the example runs the `hostile_server` fixture (the
//! `mcp_framer_e2e::hostile` library) as a child process by re-executing
//! itself with `--serve-hostile` as the first argument; nothing else needs
//! to be built. Both parts are bounded by watchdogs, so the example never
//! hangs: part 1 kills its child after at most a few seconds, and part 2
//! gives up after [`WATCHDOG`].

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use std::{env, thread};

use mcp_framer_e2e::hostile::report as hostile;
use mcp_framer_e2e::report;
use mcp_framer_e2e::support::ChildWatchdog;
use mcp_framer_stdio::host::{MetricsSnapshot, Session, SessionConfig};
use serde_json::{Value, json};

const EIGHT_MIB: usize = 8 << 20;
/// The hidden first argument that makes this executable the fixture.
const SERVE_HOSTILE: &str = "--serve-hostile";
/// The most part 2 (and each of part 1's children) may take.
const WATCHDOG: Duration = Duration::from_secs(30);

fn main() -> ExitCode {
    let mut args = env::args_os();
    let program = args.next().unwrap_or_else(|| OsString::from("deadlock"));
    if args.next().is_some_and(|first| first == SERVE_HOSTILE) {
        // The child: run the fixture with the remaining arguments.
        return mcp_framer_e2e::hostile::main_from(std::iter::once(program).chain(args));
    }
    match demo() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("deadlock example failed: {err}");
            ExitCode::FAILURE
        }
    }
}

fn demo() -> Result<(), Box<dyn std::error::Error>> {
    let fixture = env::current_exe()?;
    println!("fixture: {} {SERVE_HOSTILE}\n", fixture.display());
    naive_parent(&fixture)?;
    println!();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    match runtime.block_on(async { tokio::time::timeout(WATCHDOG, transport(&fixture)).await }) {
        Ok(outcome) => outcome,
        Err(_) => Err(format!("watchdog: part 2 did not finish within {WATCHDOG:?}; its server was killed").into()),
    }
}

/// Part 1: a parent that sends the request and never reads stdout.
fn naive_parent(fixture: &Path) -> Result<(), Box<dyn std::error::Error>> {
    println!("== 1. naive parent: asks for {} MiB, never reads the server's stdout ==", EIGHT_MIB >> 20);
    let child = std::process::Command::new(fixture)
        .arg(SERVE_HOSTILE)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let child = std::sync::Arc::new(std::sync::Mutex::new(child));
    let lock = || child.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    // Whatever happens below, the child is killed within the limit.
    let watchdog = {
        let child = std::sync::Arc::clone(&child);
        ChildWatchdog::arm(WATCHDOG, "the naive parent's server", move || {
            let _ = child.lock().unwrap_or_else(std::sync::PoisonError::into_inner).kill();
        })
    };
    let _stdout = lock().stdout.take(); // held open, never read
    let stderr = lock().stderr.take().ok_or("no stderr")?;
    let (tx, lines) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut stdin = lock().stdin.take().ok_or("no stdin")?;
    let started = Instant::now();
    writeln!(stdin, "{}", call(1, "big", json!({"bytes": EIGHT_MIB})))?;
    stdin.flush()?;

    let backpressure = |line: &str| report::parse(line, hostile::BACKPRESSURE);
    let blocked = loop {
        match lines.recv_timeout(Duration::from_secs(10)) {
            Ok(line) => match backpressure(&line) {
                Some(fields) => break Some(fields),
                None => continue,
            },
            Err(_) => break None,
        }
    };
    thread::sleep(Duration::from_secs(1));
    let alive = lock().try_wait()?.is_none();
    let last = lines.try_iter().filter_map(|line| backpressure(&line)).last().or(blocked);
    println!("after {:.1} s: server alive = {alive}", started.elapsed().as_secs_f64());
    match last {
        Some(fields) => println!(
            "server stderr: a write(2) on stdout blocked ({} ms when reported, and never returned); \
             {} of {} frame bytes written",
            fields["blocked_ms"], fields["frame_done"], fields["frame_len"]
        ),
        None => println!("server stderr: no backpressure report (unexpected)"),
    }
    // A second request: the server's stdin reader takes it, but its worker
    // is stuck in write(), so it will never be answered.
    writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}))?;
    thread::sleep(Duration::from_millis(300));
    println!("a ping sent 300 ms ago is still unanswered; server alive = {}", lock().try_wait()?.is_none());
    lock().kill()?;
    let status = lock().wait()?;
    watchdog.disarm();
    println!("killed it: {status}. Nothing was wrong with the server; the parent stopped draining the pipe.");
    Ok(())
}

/// Part 2: the same request through the host transport.
async fn transport(fixture: &Path) -> Result<(), Box<dyn std::error::Error>> {
    println!("== 2. mcp-framer host transport: the same request ==");
    let mut command = tokio::process::Command::new(fixture);
    command.arg(SERVE_HOSTILE);
    let (session, _inbound) = Session::spawn(command, SessionConfig::default())?;

    let started = Instant::now();
    let response = session.request("tools/call", &json!({"name": "big", "arguments": {"bytes": EIGHT_MIB}})).await?;
    let result: Value = response.deserialize_payload()?;
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    println!(
        "response: {} bytes on the wire, text of {} bytes, in {:.0} ms",
        response.frame().len() + 1,
        text.len(),
        started.elapsed().as_secs_f64() * 1e3
    );

    let started = Instant::now();
    session.request("ping", &()).await?;
    println!("second request (ping) answered in {:.1} ms", started.elapsed().as_secs_f64() * 1e3);

    let stats: Value = session
        .request("tools/call", &json!({"name": "stats", "arguments": {}}))
        .await?
        .deserialize_payload::<Value>()?["structuredContent"]
        .clone();
    println!(
        "server side: {} bytes written, {} us spent in write(2), {} writes blocked > 50 ms",
        stats["bytes_written"], stats["blocked_write_us"], stats["backpressure_events"]
    );

    let report = session.shutdown().await;
    let status = report.exit_status.map_or_else(|| "not reaped".to_owned(), |s| s.to_string());
    println!("shutdown: {:?}, server {status}", report.stage);
    print_metrics(&report.metrics);
    Ok(())
}

fn print_metrics(m: &MetricsSnapshot) {
    println!("metrics:");
    let rows: [(&str, String); 14] = [
        ("stdout bytes received", m.stdout_bytes.to_string()),
        ("largest complete frame", format!("{} bytes", m.largest_frame)),
        ("parse errors", m.parse_errors.to_string()),
        ("time waiting for dispatcher room", format!("{:?}", m.dispatch_wait)),
        ("cancellations sent", m.cancellations_sent.to_string()),
        ("process exit", m.exit_status.map_or_else(|| "-".to_owned(), |s| s.to_string())),
        ("frames", m.frames.to_string()),
        ("oversize frames / bytes discarded", format!("{} / {}", m.oversize_frames, m.discarded_bytes)),
        ("non-JSON lines", m.non_json_lines.to_string()),
        ("dropped / rejected (overload)", format!("{} / {}", m.overload_dropped, m.overload_rejected)),
        ("requests sent / responses", format!("{} / {}", m.requests_sent, m.responses)),
        ("late responses ignored", m.late_responses.to_string()),
        ("stderr bytes / lines", format!("{} / {}", m.stderr_bytes, m.stderr_lines)),
        ("framer buffer high water", format!("{} bytes", m.buffered_high_water)),
    ];
    for (name, value) in rows {
        println!("  {name:<34} {value}");
    }
}

/// A `tools/call` request line.
fn call(id: u64, tool: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": arguments}})
}
