//! `stdio_v2`: newline framing against the experimental `stdio-v2` (HTTP/2
//! over the child's pipes), the same child program on both: `transport_server`
//! (the library's `Server`, one `blob` tool) with `--transport stdio` or
//! `--transport stdio-v2`, driven by this project's host for each
//! (`mcp_framer_stdio::host::Session`, `mcp_framer_stdio_v2::host::Client`),
//! both with their defaults except the receive limit (80 MiB, above the
//! largest result). What it measures, per transport, each the median of
//! [`RUNS`] runs:
//!
//! * **results**: `tools/call blob` results of 200 B, 64 KiB and 1 MiB, 8
//!   calls in flight, until 16 MiB (200 B: 4 MiB) of results have arrived
//!   (a quarter of that with `MCP_BENCH_QUICK=1`): MiB/s of result text, the
//!   host's CPU per MiB (`ProcessCpu`: every thread of this process) and
//!   the server's (its own process CPU time, which its `cpu` tool returns,
//!   read before and after);
//! * **head-of-line**: a `ping` sent once the server has written
//!   [`PING_AFTER_BYTES`] of a 64 MiB result (its `wchar` in
//!   `/proc/<pid>/io`): how long the ping took, how long the large result
//!   took, and how much of the large result the server had written when
//!   the ping's answer came. Newline framing writes whole frames, so there
//!   the ping waits for the large frame (100%); HTTP/2 interleaves streams;
//! * **round trips**: `ping`s one at a time for [`ROUND_TRIP_WINDOW`]: µs per
//!   request and the host's CPU µs per request (what a small server's
//!   exchanges cost);
//! * **memory**: the host's anonymous memory per idle session (`RssAnon`,
//!   after one warm-up session, as in the `scale` bench) with 1 and 50
//!   sessions, each configuration in a fresh process of this binary, and the
//!   median server's resident memory (`VmRSS`);
//! * **outside reference**: `h2load` (nghttp2) against `transport_server
//!   --transport stdio-v2` through a `socat` bridge to a loopback port, one
//!   connection, one request in flight: requests per second. Skipped, and
//!   said so, when `h2load` or `socat` is not installed
//!   (`scripts/install-tools --only peers`).
//!
//! Every result is checked (its length) and every child process runs under
//! a watchdog ([`WATCHDOG`]). It prints a Markdown table and writes it, and
//! the same rows as JSON, to `<criterion dir>/stdio_v2/` (`table.md`,
//! `results.json`), which `scripts/bench-report` keeps in its record.
//!
//! Run: `cargo bench -p mcp-framer-benches --bench stdio_v2`.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcp_framer_benches::pipe::ProcessCpu;
use mcp_framer_benches::results;
use serde_json::{Value, json};

const SERVER: &str = env!("CARGO_BIN_EXE_transport_server");
/// Runs per measurement; the table shows the median.
const RUNS: usize = 3;
/// The most one configuration (a fresh process) may take.
const WATCHDOG: Duration = Duration::from_secs(300);
/// Calls in flight in the results measurement.
const IN_FLIGHT: usize = 8;
/// The large result of the head-of-line measurement.
const LARGE: usize = 64 << 20;
/// How much of the large result the server has written when the ping is
/// sent.
const PING_AFTER_BYTES: u64 = 8 << 20;
/// How long the round-trip measurement sends pings.
const ROUND_TRIP_WINDOW: Duration = Duration::from_secs(2);
/// Both hosts' receive limit: above [`LARGE`] and its envelope.
const LIMIT: usize = 80 << 20;
const TRANSPORTS: [&str; 2] = ["stdio", "stdio-v2"];
const SIZES: [(usize, &str); 3] = [(200, "200 B"), (64 << 10, "64 KiB"), (1 << 20, "1 MiB")];

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        let value = child(&args[i + 1], &args[i + 2], args.get(i + 3).map(String::as_str));
        println!("stdio_v2: {value}");
        return;
    }
    if args.iter().any(|a| a == "--list") {
        return;
    }
    let quick = mcp_framer_benches::shapes::quick();
    let mut rows: Vec<Value> = Vec::new();
    let mut table =
        String::from("| measure | size | stdio | stdio-v2 | stdio-v2 / stdio |\n|---|---|---:|---:|---:|\n");
    let mut add = |measure: &str, size: &str, unit: &str, runs: [Vec<f64>; 2]| {
        let [a, b] = [median(runs[0].clone()), median(runs[1].clone())];
        let ratio = if a > 0.0 { b / a } else { f64::NAN };
        let line = format!("| {measure} ({unit}) | {size} | {} | {} | {:.2} |", fmt(a), fmt(b), ratio);
        println!("{line}");
        table.push_str(&line);
        table.push('\n');
        for (transport, (median, samples)) in TRANSPORTS.iter().zip([(a, &runs[0]), (b, &runs[1])]) {
            rows.push(json!({
                "measure": measure, "size": size, "unit": unit, "transport": transport,
                "value": median, "runs": samples,
            }));
        }
    };

    for (size, label) in SIZES {
        let total = (if size < 1024 { 4 << 20 } else { 16 << 20 }) / if quick { 4 } else { 1 };
        let per: Vec<Vec<Value>> = TRANSPORTS
            .iter()
            .map(|t| (0..RUNS).map(|_| run_child(t, "results", Some(&format!("{size}:{total}")))).collect())
            .collect();
        add("results", label, "MiB/s", field(&per, "mib_per_s"));
        add("host CPU", label, "ms/MiB", field(&per, "host_cpu_ms_per_mib"));
        add("server CPU", label, "ms/MiB", field(&per, "server_cpu_ms_per_mib"));
    }

    let hol: Vec<Vec<Value>> =
        TRANSPORTS.iter().map(|t| (0..RUNS).map(|_| run_child(t, "head-of-line", None)).collect()).collect();
    add("ping beside a 64 MiB result", "ping", "ms", field(&hol, "ping_ms"));
    add("the 64 MiB result", "64 MiB", "ms", field(&hol, "large_ms"));
    add("the 64 MiB result written when the ping was answered", "64 MiB", "%", field(&hol, "written_at_ping_pct"));

    let trips: Vec<Vec<Value>> =
        TRANSPORTS.iter().map(|t| (0..RUNS).map(|_| run_child(t, "round-trips", None)).collect()).collect();
    add("round trip, one in flight", "ping", "µs", field(&trips, "us_per_request"));
    add("host CPU per round trip", "ping", "µs", field(&trips, "host_cpu_us_per_request"));

    for n in [1usize, 50] {
        let memory: Vec<Vec<Value>> = TRANSPORTS
            .iter()
            .map(|t| (0..RUNS).map(|_| run_child(t, "memory", Some(&n.to_string()))).collect())
            .collect();
        add("host memory per idle session", &format!("N = {n}"), "KiB", field(&memory, "host_kib"));
        add("server resident memory", &format!("N = {n}"), "KiB", field(&memory, "server_kib"));
    }

    let h2load = h2load_reference();
    let line = match &h2load {
        Ok(rps) => format!("| h2load through socat, one in flight (req/s) | ping | | {} | |", fmt(*rps)),
        Err(why) => format!("| h2load through socat | ping | | skipped: {why} | |"),
    };
    println!("{line}");
    table.push_str(&line);
    table.push('\n');
    let h2load = match h2load {
        Ok(rps) => json!({"requests_per_s": rps}),
        Err(why) => json!({"skipped": why}),
    };

    let doc = json!({ "at": results::now_unix(), "runs": RUNS, "quick": quick, "rows": rows, "h2load": h2load });
    match results::write_table("stdio_v2", &table, &doc) {
        Ok(dir) => println!("table and results: {}", dir.display()),
        Err(e) => eprintln!("stdio_v2: cannot write the table and results: {e}"),
    }
}

/// Field `name` of every run, per transport.
fn field(runs: &[Vec<Value>], name: &str) -> [Vec<f64>; 2] {
    std::array::from_fn(|t| runs[t].iter().map(|v| v[name].as_f64().expect(name)).collect())
}

fn fmt(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Runs one measurement in a fresh process of this binary, under a watchdog;
/// the JSON object it printed.
fn run_child(transport: &str, what: &str, arg: Option<&str>) -> Value {
    let exe = std::env::current_exe().expect("own path");
    let mut command = Command::new(exe);
    command.args(["--child", transport, what]).args(arg).stdout(Stdio::piped());
    let child = command.spawn().expect("spawn the measuring process");
    let pid = child.id();
    let (done, finished) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if finished.recv_timeout(WATCHDOG) == Err(std::sync::mpsc::RecvTimeoutError::Timeout) {
            eprintln!("stdio_v2: {pid} still running after {WATCHDOG:?}; killing it");
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
    });
    let output = child.wait_with_output().expect("wait");
    drop(done);
    let _ = watchdog.join();
    assert!(output.status.success(), "{transport} {what} {arg:?}: {}", output.status);
    let text = String::from_utf8(output.stdout).expect("UTF-8");
    let json = text.lines().find_map(|l| l.strip_prefix("stdio_v2: ")).expect("a stdio_v2 line");
    serde_json::from_str(json).expect("JSON")
}

fn server(transport: &str) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(SERVER);
    command.args(["--transport", transport]).kill_on_drop(true);
    command
}

/// Bytes process `pid` has written so far (`wchar` in `/proc/<pid>/io`).
fn written_by(pid: u32) -> u64 {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).expect("/proc/<pid>/io");
    let line = io.lines().find_map(|l| l.strip_prefix("wchar:")).expect("a wchar line");
    line.trim().parse().expect("a number")
}

/// `/proc/<pid>/status` field `key` (kB).
fn status_of(pid: &str, key: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/<pid>/status");
    let line = status.lines().find(|l| l.starts_with(key)).expect(key);
    line[key.len()..].trim().trim_end_matches(" kB").parse().expect("a number")
}

/// One of the two hosts, with the operations the measurements need (the
/// newline session boxed: the two differ much in size).
enum Host {
    Newline(Box<(mcp_framer_stdio::host::Session, mcp_framer_stdio::host::InboundQueue)>),
    V2(Box<mcp_framer_stdio_v2::host::Client>),
}

impl Host {
    async fn spawn(transport: &str) -> Host {
        match transport {
            "stdio" => {
                let config = mcp_framer_stdio::host::SessionConfig::default().with_max_receive(LIMIT);
                let (session, queue) =
                    mcp_framer_stdio::host::Session::spawn(server(transport), config).expect("spawn");
                Host::Newline(Box::new((session, queue)))
            }
            "stdio-v2" => {
                let config = mcp_framer_stdio_v2::host::HostConfig::default().with_max_receive(LIMIT);
                Host::V2(Box::new(
                    mcp_framer_stdio_v2::host::Client::spawn(server(transport), config).await.expect("spawn"),
                ))
            }
            other => panic!("unknown transport {other}"),
        }
    }

    /// Sends `method` and returns the length of the JSON-RPC response.
    async fn request(&self, method: &str, params: &Value) -> usize {
        match self {
            Host::Newline(newline) => newline.0.request(method, params).await.expect(method).frame().len(),
            Host::V2(client) => client.request(method, params).await.expect(method).message.len(),
        }
    }

    /// The server's CPU time so far (its `cpu` tool).
    async fn server_cpu(&self) -> Duration {
        let params = json!({"name": "cpu", "arguments": {}});
        let frame = match self {
            Host::Newline(newline) => newline.0.request("tools/call", &params).await.expect("cpu").frame().to_vec(),
            Host::V2(client) => client.request("tools/call", &params).await.expect("cpu").message.to_vec(),
        };
        let value: Value = serde_json::from_slice(&frame).expect("a JSON response");
        let text = value["result"]["content"][0]["text"].as_str().expect("the cpu tool's text");
        Duration::from_nanos(text.parse().expect("nanoseconds"))
    }

    async fn pid(&self) -> u32 {
        match self {
            Host::Newline(newline) => newline.0.pid().expect("a pid"),
            Host::V2(client) => client.pid().await.expect("a pid"),
        }
    }

    async fn shutdown(self) {
        match self {
            Host::Newline(newline) => {
                let (session, queue) = *newline;
                session.shutdown().await;
                drop(queue);
            }
            Host::V2(client) => {
                client.shutdown().await;
            }
        }
    }
}

/// Measures `what` over `transport` in this (fresh) process.
fn child(transport: &str, what: &str, arg: Option<&str>) -> Value {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        match what {
            "results" => {
                let (size, total) = arg.and_then(|a| a.split_once(':')).expect("size:total");
                results_run(transport, size.parse().expect("size"), total.parse().expect("total")).await
            }
            "head-of-line" => head_of_line(transport).await,
            "round-trips" => round_trips(transport).await,
            "memory" => memory(transport, arg.expect("n").parse().expect("n")).await,
            other => panic!("unknown measurement {other}"),
        }
    })
}

fn blob(bytes: usize) -> Value {
    json!({"name": "blob", "arguments": {"bytes": bytes}})
}

async fn results_run(transport: &str, size: usize, total: usize) -> Value {
    let host = Arc::new(Host::spawn(transport).await);
    host.request("ping", &json!({})).await;
    let calls = total.div_ceil(size);
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let server0 = host.server_cpu().await;
    let (cpu0, start) = (ProcessCpu::start(), Instant::now());
    let workers: Vec<_> = (0..IN_FLIGHT)
        .map(|_| {
            let (host, next) = (Arc::clone(&host), Arc::clone(&next));
            tokio::spawn(async move {
                let params = blob(size);
                while next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < calls {
                    let len = host.request("tools/call", &params).await;
                    assert!(len > size, "a result of {size} bytes arrived in {len} bytes");
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.expect("a worker panicked");
    }
    let (wall, cpu) = (start.elapsed(), cpu0.elapsed());
    let server = host.server_cpu().await - server0;
    let mib = (calls * size) as f64 / f64::from(1 << 20);
    Arc::into_inner(host).expect("the workers are done").shutdown().await;
    json!({
        "mib_per_s": mib / wall.as_secs_f64(),
        "host_cpu_ms_per_mib": cpu.as_secs_f64() * 1e3 / mib,
        "server_cpu_ms_per_mib": server.as_secs_f64() * 1e3 / mib,
    })
}

async fn head_of_line(transport: &str) -> Value {
    let host = Arc::new(Host::spawn(transport).await);
    host.request("ping", &json!({})).await;
    let pid = host.pid().await;
    let written = written_by(pid);
    let start = Instant::now();
    let large = {
        let host = Arc::clone(&host);
        tokio::spawn(async move {
            let len = host.request("tools/call", &blob(LARGE)).await;
            assert!(len > LARGE, "the large result arrived whole");
            Instant::now()
        })
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while written_by(pid) < written + PING_AFTER_BYTES {
        assert!(Instant::now() < deadline, "the server did not start writing the large result");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let sent = Instant::now();
    host.request("ping", &json!({})).await;
    let answered = Instant::now();
    // How much of the large result the server had written by then (its
    // framing and the ping's answer included: a few bytes per 16 KiB).
    let share = (written_by(pid) - written) as f64 / LARGE as f64;
    let large_done = large.await.expect("the large call panicked");
    Arc::into_inner(host).expect("the call is done").shutdown().await;
    json!({
        "ping_ms": (answered - sent).as_secs_f64() * 1e3,
        "large_ms": (large_done - start).as_secs_f64() * 1e3,
        "written_at_ping_pct": (share * 100.0).min(100.0),
    })
}

async fn round_trips(transport: &str) -> Value {
    let host = Host::spawn(transport).await;
    host.request("ping", &json!({})).await;
    let (cpu0, start) = (ProcessCpu::start(), Instant::now());
    let mut n = 0u64;
    while start.elapsed() < ROUND_TRIP_WINDOW {
        host.request("ping", &json!({})).await;
        n += 1;
    }
    let (wall, cpu) = (start.elapsed(), cpu0.elapsed());
    host.shutdown().await;
    json!({
        "us_per_request": wall.as_secs_f64() * 1e6 / n as f64,
        "host_cpu_us_per_request": cpu.as_secs_f64() * 1e6 / n as f64,
    })
}

async fn memory(transport: &str, n: usize) -> Value {
    // The warm-up: one session, not counted.
    let warm = Host::spawn(transport).await;
    warm.request("ping", &json!({})).await;
    warm.shutdown().await;
    let base = status_of("self", "RssAnon:");
    let mut hosts = Vec::with_capacity(n);
    for _ in 0..n {
        let host = Host::spawn(transport).await;
        host.request("ping", &json!({})).await;
        hosts.push(host);
    }
    let idle = status_of("self", "RssAnon:");
    let mut servers = Vec::with_capacity(n);
    for host in &hosts {
        servers.push(status_of(&host.pid().await.to_string(), "VmRSS:"));
    }
    for host in hosts {
        host.shutdown().await;
    }
    json!({"host_kib": (idle - base) / n as f64, "server_kib": median(servers)})
}

/// `h2load` against the server through a `socat` bridge: requests per
/// second, one connection, one request in flight.
fn h2load_reference() -> Result<f64, String> {
    let found = |tool: &str| Command::new("sh").args(["-c", &format!("command -v {tool}")]).output();
    for tool in ["h2load", "socat"] {
        if !found(tool).is_ok_and(|o| o.status.success()) {
            return Err(format!("{tool} not installed (scripts/install-tools --only peers)"));
        }
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?.local_addr().unwrap().port();
    let mut socat = Command::new("socat")
        .arg(format!("TCP-LISTEN:{port},bind=127.0.0.1,reuseaddr,fork"))
        .arg(format!("EXEC:{SERVER} --transport stdio-v2"))
        .stdin(Stdio::null())
        .spawn()
        .map_err(|e| format!("socat: {e}"))?;
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            let _ = socat.kill();
            return Err("socat did not listen".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let body = std::env::temp_dir().join(format!("stdio_v2-h2load-{}.json", std::process::id()));
    std::fs::write(&body, r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).map_err(|e| e.to_string())?;
    let requests = if mcp_framer_benches::shapes::quick() { "5000" } else { "20000" };
    let output = Command::new("timeout")
        .args(["120", "h2load", "-n", requests, "-c", "1", "-m", "1", "-d"])
        .arg(&body)
        .args(["-H", "content-type: application/json", "-H", "accept: application/json, text/event-stream"])
        .args(["-H", "mcp-protocol-version: 2025-11-25", "-H", "mcp-method: ping"])
        .arg(format!("http://127.0.0.1:{port}/mcp"))
        .output();
    let _ = socat.kill();
    let _ = socat.wait();
    let _ = std::fs::remove_file(&body);
    let output = output.map_err(|e| format!("h2load: {e}"))?;
    let text = String::from_utf8_lossy(&output.stdout);
    if !text.contains(&format!("{requests} succeeded")) {
        return Err(format!("h2load did not complete every request: {}", text.lines().last().unwrap_or("")));
    }
    // "finished in 1.23s, 8123.45 req/s, 1.2MB/s"
    let line = text.lines().find(|l| l.starts_with("finished in")).ok_or("no h2load summary")?;
    let rps = line.split(", ").nth(1).and_then(|f| f.strip_suffix(" req/s")).ok_or("no req/s")?;
    rps.parse().map_err(|e| format!("{rps}: {e}"))
}
