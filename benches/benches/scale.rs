//! `scale`: what N concurrent sessions cost a host, for N = 1, 10, 50, 200.
//!
//! Each configuration (a client and an N) runs in a **fresh parent process**
//! (this binary re-executed with `--child <client> <n>`), on a tokio
//! multi-thread runtime, against N children of `scale_server` (a small stdio
//! server: an empty result per request, one 16,000,000-byte response to
//! `big`). Per configuration it reports:
//!
//! * `spawn_ping_ms`: wall time to spawn the N children one after the other
//!   and get an answer to one `ping` from each, per session;
//! * `idle_kib`: the parent's anonymous memory growth per session once every
//!   session has answered its ping (`RssAnon` from `/proc/self/status`). The
//!   base is taken after one warm-up session of the same client (spawned,
//!   pinged, given one big response, shut down), so what a client pays once
//!   per process (its code's pages, which `VmRSS` counts as file-backed
//!   memory, the runtime's and the allocator's first structures) is not
//!   charged to every session: divided by N it would make a client with more
//!   code look heavier per session;
//! * `retained_kib`: the same after each session, one at a time, received
//!   one 16,000,000-byte response and the client dropped it;
//! * `threads`, `fds`: the parent's, idle with N sessions open;
//! * `shutdown_ms`: wall time to shut every session down (close stdin, wait
//!   for the exit), per session;
//! * `children_left`: children whose `/proc/<pid>` still exists afterwards
//!   (running or unreaped).
//!
//! Clients: `host` is `mcp_framer_stdio::host::Session` with its defaults;
//! `rmcp` is rmcp 3.11's `TokioChildProcess` driven through
//! `Transport::send`/`receive` (the official Rust SDK's stdio client
//! transport), shut down with `graceful_shutdown` (`Transport::close`);
//! `rmcp-adapter` is the same over `mcp_framer_rmcp::ChildProcess`. Each configuration runs
//! `MCP_SCALE_RUNS` times (default 3) and the table shows medians.
//!
//! The host also prints (stderr) its framers' storage after the big
//! responses, from `MetricsSnapshot::buffer_capacity`: what the framer keeps,
//! apart from what the allocator keeps. glibc's malloc raises its mmap
//! threshold after freeing a large block, so later large blocks come from
//! its arenas and freed memory may stay resident; run with
//! `MALLOC_MMAP_THRESHOLD_=131072` (which fixes the threshold) to see RSS
//! without that effect.
//!
//! It prints a Markdown table and writes it, and the same rows with every
//! run's values, to `<criterion dir>/scale/` (`table.md`, `results.json`);
//! `scripts/bench-report` keeps the rows in its record, puts them into its
//! BMF file and checks the rmcp adapter's memory target against them
//! (`benches/report.toml`, `benches/RECORDS.md`).
//!
//! Run: `cargo bench -p mcp-framer-benches --bench scale`: N = 1, 10, 50
//! and 200, or N = 50 alone with `MCP_BENCH_QUICK=1` (`MCP_SCALE_N=1,10,50`
//! chooses the Ns). Every child process has a watchdog: a configuration
//! that takes longer than 300 s is killed.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mcp_framer_benches::results;
use serde_json::json;

const SERVER: &str = env!("CARGO_BIN_EXE_scale_server");
/// The `big` response's length, `\n` excluded.
const BIG: usize = 16_000_000;
/// The most one configuration may take.
const WATCHDOG: Duration = Duration::from_secs(300);

/// One configuration's measurements.
#[derive(Clone, Copy, Debug, Default)]
struct Row {
    spawn_ping_ms: f64,
    idle_kib: f64,
    retained_kib: f64,
    threads: f64,
    fds: f64,
    shutdown_ms: f64,
    children_left: f64,
}

const FIELDS: [&str; 7] =
    ["spawn_ping_ms", "idle_kib", "retained_kib", "threads", "fds", "shutdown_ms", "children_left"];

impl Row {
    fn values(&self) -> [f64; 7] {
        [
            self.spawn_ping_ms,
            self.idle_kib,
            self.retained_kib,
            self.threads,
            self.fds,
            self.shutdown_ms,
            self.children_left,
        ]
    }

    fn from_values(v: [f64; 7]) -> Row {
        Row {
            spawn_ping_ms: v[0],
            idle_kib: v[1],
            retained_kib: v[2],
            threads: v[3],
            fds: v[4],
            shutdown_ms: v[5],
            children_left: v[6],
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        let client = args[i + 1].clone();
        let n: usize = args[i + 2].parse().expect("N");
        let row = child(&client, n);
        let line: Vec<String> = FIELDS.iter().zip(row.values()).map(|(k, v)| format!("\"{k}\":{v}")).collect();
        println!("scale: {{{}}}", line.join(","));
        return;
    }
    if args.iter().any(|a| a == "--list") {
        return; // `cargo bench -- --list`: nothing for criterion-style listing
    }
    let default_ns = if mcp_framer_benches::shapes::quick() { "50" } else { "1,10,50,200" };
    let ns: Vec<usize> = std::env::var("MCP_SCALE_N")
        .unwrap_or_else(|_| default_ns.into())
        .split(',')
        .map(|n| n.trim().parse().expect("MCP_SCALE_N: numbers"))
        .collect();
    let runs: usize = std::env::var("MCP_SCALE_RUNS").ok().and_then(|r| r.parse().ok()).unwrap_or(3);
    let mut table = String::from(
        "| N | client | spawn + ping ms/session | idle KiB/session | retained KiB/session | threads | fds | shutdown ms/session | children left |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let mut rows = Vec::new();
    for &n in &ns {
        for client in CLIENTS {
            let measured: Vec<Row> = (0..runs).map(|_| run_child(client, n)).collect();
            let median =
                Row::from_values(std::array::from_fn(|f| median(measured.iter().map(|r| r.values()[f]).collect())));
            let line = format!(
                "| {n} | {client} | {:.2} | {:.0} | {:.0} | {:.0} | {:.0} | {:.2} | {:.0} |",
                median.spawn_ping_ms,
                median.idle_kib,
                median.retained_kib,
                median.threads,
                median.fds,
                median.shutdown_ms,
                median.children_left
            );
            println!("{line}");
            table.push_str(&line);
            table.push('\n');
            rows.push(row_json(n, client, &median, &measured));
        }
    }
    let doc = json!({ "at": results::now_unix(), "runs": runs, "rows": rows });
    match results::write_table("scale", &table, &doc) {
        Ok(dir) => println!("table and results: {}", dir.display()),
        Err(e) => eprintln!("scale: cannot write the table and results: {e}"),
    }
}

/// The clients, in table order.
const CLIENTS: [&str; 3] = ["host", "rmcp", "rmcp-adapter"];

/// One configuration's row for `results.json`: the medians, and every run's
/// values under `runs` (what the report's spread comes from).
fn row_json(n: usize, client: &str, median: &Row, runs: &[Row]) -> serde_json::Value {
    let mut row = serde_json::Map::new();
    row.insert("n".into(), json!(n));
    row.insert("client".into(), json!(client));
    let mut samples = serde_json::Map::new();
    for (f, field) in FIELDS.iter().enumerate() {
        row.insert((*field).into(), json!(median.values()[f]));
        samples.insert((*field).into(), runs.iter().map(|r| r.values()[f]).collect());
    }
    row.insert("runs".into(), serde_json::Value::Object(samples));
    serde_json::Value::Object(row)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Runs one configuration in a fresh process of this binary, under a watchdog.
fn run_child(client: &str, n: usize) -> Row {
    let exe = std::env::current_exe().expect("own path");
    let child = Command::new(exe)
        .args(["--child", client, &n.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the measuring process");
    let pid = child.id();
    let watchdog = std::thread::spawn(move || {
        let deadline = Instant::now() + WATCHDOG;
        while Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(200));
            if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                return;
            }
        }
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    });
    let output = child.wait_with_output().expect("wait");
    drop(watchdog);
    assert!(output.status.success(), "{client} N={n}: {}", output.status);
    let text = String::from_utf8(output.stdout).expect("UTF-8");
    let json = text.lines().find_map(|l| l.strip_prefix("scale: ")).expect("a scale line");
    let value: serde_json::Value = serde_json::from_str(json).expect("JSON");
    Row::from_values(FIELDS.map(|k| value[k].as_f64().expect(k)))
}

/// The memory measured: anonymous resident memory (heap, stacks, anonymous
/// mappings), not the binary's pages.
const MEMORY: &str = "RssAnon:";

/// `/proc/self/status` field `key`, as a number (kB for sizes).
fn status(key: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status.lines().find(|l| l.starts_with(key)).expect(key);
    line[key.len()..].trim().trim_end_matches(" kB").parse().expect("a number")
}

fn fds() -> f64 {
    std::fs::read_dir("/proc/self/fd").expect("/proc/self/fd").count() as f64
}

fn server() -> tokio::process::Command {
    let mut command = tokio::process::Command::new(SERVER);
    command.kill_on_drop(true);
    command
}

/// Measures `client` with `n` sessions, in this (fresh) process.
fn child(client: &str, n: usize) -> Row {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let run = async |n: usize, base: f64| match client {
            "host" => host(n, base).await,
            "rmcp" => rmcp(n, base).await,
            "rmcp-adapter" => rmcp_adapter(n, base).await,
            other => panic!("unknown client {other}"),
        };
        // The warm-up: one session, measured from nothing and not reported.
        run(1, 0.0).await;
        run(n, status(MEMORY)).await
    })
}

fn left(pids: &[u32]) -> f64 {
    pids.iter().filter(|pid| std::path::Path::new(&format!("/proc/{pid}")).exists()).count() as f64
}

async fn host(n: usize, base: f64) -> Row {
    use mcp_framer_stdio::host::{Session, SessionConfig};
    let start = Instant::now();
    let mut sessions = Vec::with_capacity(n);
    let mut queues = Vec::with_capacity(n);
    for _ in 0..n {
        let (session, queue) = Session::spawn(server(), SessionConfig::default()).expect("spawn");
        session.request("ping", &()).await.expect("ping");
        sessions.push(session);
        queues.push(queue);
    }
    let spawn_ping = start.elapsed();
    let idle = status(MEMORY);
    let (threads, fds) = (status("Threads:"), fds());
    for session in &sessions {
        let big = session.request("big", &()).await.expect("big");
        assert_eq!(big.frame().len(), BIG, "the big response arrived whole");
        drop(big);
    }
    let retained = status(MEMORY);
    let storage: u64 = sessions.iter().map(|s| s.metrics().buffer_capacity).sum();
    eprintln!(
        "scale: host N={n}: framer storage after the big responses: {} KiB per session",
        storage / 1024 / n as u64
    );
    let pids: Vec<u32> = sessions.iter().filter_map(|s| s.pid()).collect();
    let start = Instant::now();
    for session in sessions {
        session.shutdown().await;
    }
    let shutdown = start.elapsed();
    drop(queues);
    row(n, base, idle, retained, threads, fds, spawn_ping, shutdown, left(&pids))
}

async fn rmcp(n: usize, base: f64) -> Row {
    use rmcp::transport::TokioChildProcess;
    rmcp_over(n, base, |command| TokioChildProcess::new(command).expect("spawn"), TokioChildProcess::id).await
}

/// rmcp over `mcp_framer_rmcp::ChildProcess`, driven as `rmcp` drives its own.
async fn rmcp_adapter(n: usize, base: f64) -> Row {
    use mcp_framer_rmcp::ChildProcess;
    rmcp_over(n, base, |command| ChildProcess::new(command).expect("spawn"), ChildProcess::id).await
}

/// `n` sessions of an rmcp client transport, through `Transport::send` /
/// `receive`, closed with `Transport::close` (each one's graceful shutdown).
async fn rmcp_over<T>(
    n: usize,
    base: f64,
    spawn: impl Fn(tokio::process::Command) -> T,
    id: impl Fn(&T) -> Option<u32>,
) -> Row
where
    T: rmcp::transport::Transport<rmcp::RoleClient, Error = std::io::Error>,
{
    use rmcp::model::{ClientJsonRpcMessage, ClientRequest, CustomRequest, JsonRpcMessage, NumberOrString};

    async fn call<T: rmcp::transport::Transport<rmcp::RoleClient>>(child: &mut T, id: i64, method: &str) -> usize {
        let request = ClientRequest::CustomRequest(CustomRequest::new(method, None));
        child.send(ClientJsonRpcMessage::request(request, NumberOrString::Number(id))).await.expect("send");
        match child.receive().await.expect("a response") {
            JsonRpcMessage::Response(response) => {
                assert_eq!(response.id, NumberOrString::Number(id));
                serde_json::to_vec(&response.result).map(|v| v.len()).unwrap_or(0)
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    let start = Instant::now();
    let mut children = Vec::with_capacity(n);
    for _ in 0..n {
        let mut child = spawn(server());
        call(&mut child, 1, "ping").await;
        children.push(child);
    }
    let spawn_ping = start.elapsed();
    let idle = status(MEMORY);
    let (threads, fds) = (status("Threads:"), fds());
    for child in &mut children {
        let len = call(child, 2, "big").await;
        assert!(len > BIG - 100, "the big response arrived whole ({len} bytes of result)");
    }
    let retained = status(MEMORY);
    let pids: Vec<u32> = children.iter().filter_map(&id).collect();
    let start = Instant::now();
    for mut child in children {
        child.close().await.expect("shutdown");
    }
    let shutdown = start.elapsed();
    row(n, base, idle, retained, threads, fds, spawn_ping, shutdown, left(&pids))
}

#[allow(clippy::too_many_arguments)]
fn row(
    n: usize,
    base: f64,
    idle: f64,
    retained: f64,
    threads: f64,
    fds: f64,
    spawn_ping: Duration,
    shutdown: Duration,
    children_left: f64,
) -> Row {
    let per = |kib: f64| (kib - base) / n as f64;
    Row {
        spawn_ping_ms: spawn_ping.as_secs_f64() * 1e3 / n as f64,
        idle_kib: per(idle),
        retained_kib: per(retained),
        threads,
        fds,
        shutdown_ms: shutdown.as_secs_f64() * 1e3 / n as f64,
        children_left,
    }
}
