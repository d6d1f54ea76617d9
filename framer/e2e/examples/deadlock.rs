//! The stdio deadlock, and the same request through mcp-framer's host
//! transport.
//!
//! ```sh
//! cargo run -p mcp-framer-benches --example deadlock            # add --release for an optimized fixture
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
//! Finding the fixture: examples do not get `CARGO_BIN_EXE_*` (only tests
//! and benches do), and `cargo run --example` does not build the package's
//! binaries. So the example uses `$HOSTILE_SERVER` if set; otherwise, when run
//! by cargo (`$CARGO` is set), it runs `cargo build --bin hostile_server` for
//! the same target directory and profile (quick when up to date); otherwise it
//! takes `hostile_server` from its own target directory
//! (`target/<profile>/hostile_server`, next to `examples/`).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};
use std::{env, io, thread};

use mcp_framer_stdio::host::{MetricsSnapshot, Session, SessionConfig};
use serde_json::{Value, json};

const EIGHT_MIB: usize = 8 << 20;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let fixture = fixture_path()?;
    println!("fixture: {}\n", fixture.display());
    naive_parent(&fixture)?;
    println!();
    tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(transport(&fixture))
}

/// Part 1: a parent that sends the request and never reads stdout.
fn naive_parent(fixture: &Path) -> Result<(), Box<dyn std::error::Error>> {
    println!("== 1. naive parent: asks for {} MiB, never reads the server's stdout ==", EIGHT_MIB >> 20);
    let mut child = std::process::Command::new(fixture)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let _stdout = child.stdout.take(); // held open, never read
    let stderr = child.stderr.take().ok_or("no stderr")?;
    let (tx, lines) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    let started = Instant::now();
    writeln!(stdin, "{}", call(1, "big", json!({"bytes": EIGHT_MIB})))?;
    stdin.flush()?;

    let blocked = loop {
        match lines.recv_timeout(Duration::from_secs(10)) {
            Ok(line) if line.starts_with("stdout backpressure observed") => break Some(line),
            Ok(_) => continue,
            Err(_) => break None,
        }
    };
    thread::sleep(Duration::from_secs(1));
    let alive = child.try_wait()?.is_none();
    let last = lines.try_iter().filter(|l| l.starts_with("stdout backpressure")).last().or(blocked);
    println!("after {:.1} s: server alive = {alive}", started.elapsed().as_secs_f64());
    match last {
        Some(line) => println!("server stderr: {line}"),
        None => println!("server stderr: no backpressure report (unexpected)"),
    }
    // A second request: the server's stdin reader takes it, but its worker
    // is stuck in write(), so it will never be answered.
    writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}))?;
    thread::sleep(Duration::from_millis(300));
    println!("a ping sent 300 ms ago is still unanswered; server alive = {}", child.try_wait()?.is_none());
    child.kill()?;
    let status = child.wait()?;
    println!("killed it: {status}. Nothing was wrong with the server; the parent stopped draining the pipe.");
    Ok(())
}

/// Part 2: the same request through the host transport.
async fn transport(fixture: &Path) -> Result<(), Box<dyn std::error::Error>> {
    println!("== 2. mcp-framer host transport: the same request ==");
    let command = tokio::process::Command::new(fixture);
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

/// Finds (or builds) the `hostile_server` fixture; see the module docs.
fn fixture_path() -> io::Result<PathBuf> {
    if let Some(path) = env::var_os("HOSTILE_SERVER") {
        return Ok(path.into());
    }
    let exe = env::current_exe()?;
    // <target>/<profile>/examples/deadlock
    let profile_dir = exe.parent().and_then(Path::parent).ok_or_else(|| io::Error::other("unexpected exe path"))?;
    let fixture = profile_dir.join("hostile_server");
    if let Some(cargo) = env::var_os("CARGO") {
        let target_dir = profile_dir.parent().ok_or_else(|| io::Error::other("unexpected exe path"))?;
        let mut build = std::process::Command::new(cargo);
        build
            .args(["build", "--quiet", "--bin", "hostile_server", "--manifest-path"])
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
            .env("CARGO_TARGET_DIR", target_dir);
        match profile_dir.file_name().and_then(|name| name.to_str()) {
            Some("debug") => {}
            Some("release") => {
                build.arg("--release");
            }
            Some(profile) => {
                build.args(["--profile", profile]);
            }
            None => {}
        }
        let status = build.status()?;
        if !status.success() {
            return Err(io::Error::other(format!("building hostile_server failed: {status}")));
        }
    }
    if fixture.exists() {
        Ok(fixture)
    } else {
        Err(io::Error::other(format!(
            "{} not found: run `cargo build -p mcp-framer-benches --bin hostile_server` or set HOSTILE_SERVER",
            fixture.display()
        )))
    }
}
