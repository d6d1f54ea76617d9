//! `stdio-v2` against HTTP/2 peers that are not ours: the fixture server's
//! stdin and stdout bridged to a loopback TCP port by `socat` (one server
//! process per connection), then driven by `nghttp`, `curl
//! --http2-prior-knowledge` and `h2load` (Debian packages `nghttp2-client`,
//! `curl`, `socat`; `scripts/install-tools --only peers`). A missing tool
//! fails the test with that hint: these are the checks that the server is
//! not judged only by our own client.
//!
//! Every test runs under a watchdog; the bridge is killed on drop, and with
//! it each fixture server (its stdin closes).
#![cfg(unix)]

use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use mcp_framer_e2e::support::watchdog;
use tokio::process::{Child, Command};

const SERVER: &str = env!("CARGO_BIN_EXE_v2_server");
const LIMIT: Duration = Duration::from_secs(120);
/// Each peer's own deadline (its command line), well inside the watchdog.
const PEER_TIMEOUT_S: &str = "60";

/// The request-size limit the bridged fixture is started with.
const MAX_MESSAGE: usize = 64 * 1024;

fn require(tool: &str) -> PathBuf {
    let found = std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).map(|dir| dir.join(tool)).find(|path| path.is_file()));
    found.unwrap_or_else(|| {
        panic!("`{tool}` is not on PATH: install the HTTP/2 peers with `scripts/install-tools --only peers`")
    })
}

/// `socat` listening on a loopback port, one fixture server per connection;
/// socat's and the servers' stderr go to a log file ([`Bridge::log`]).
struct Bridge {
    port: u16,
    log: PathBuf,
    _socat: Child,
}

impl Bridge {
    async fn start(server_args: &str) -> Bridge {
        let socat = require("socat");
        let exec =
            if server_args.is_empty() { format!("EXEC:{SERVER}") } else { format!("EXEC:{SERVER} {server_args}") };
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let log = std::env::temp_dir().join(format!("mcp-framer-v2-bridge-{}-{n}.log", std::process::id()));
        // A port the kernel just gave out; socat binds it next (it retries
        // below if another process took it meanwhile).
        for _ in 0..5 {
            let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap().local_addr().unwrap().port();
            let mut child = Command::new(&socat)
                .arg(format!("TCP-LISTEN:{port},bind=127.0.0.1,reuseaddr,fork"))
                .arg(&exec)
                .stdin(Stdio::null())
                .stderr(std::fs::File::create(&log).expect("the bridge's log"))
                .kill_on_drop(true)
                .spawn()
                .expect("spawn socat");
            let deadline = Instant::now() + Duration::from_secs(20);
            while Instant::now() < deadline {
                if let Ok(Some(status)) = child.try_wait() {
                    eprintln!("socat exited ({status}) on port {port}; trying another");
                    break;
                }
                if TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_ok() {
                    return Bridge { port, log, _socat: child };
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        panic!("socat did not listen on a loopback port");
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// The last lines socat and the servers wrote on stderr.
    fn log(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.log);
    }
}

/// A modern (2026-07-28) request's body: the version and the client's
/// capabilities in `_meta`, as every request of that revision carries.
fn request(id: u64, method: &str, params: serde_json::Value) -> String {
    let mut params = params;
    params["_meta"] = serde_json::json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

fn body_file(name: &str, body: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("mcp-framer-v2-{}-{name}.json", std::process::id()));
    std::fs::write(&path, body).unwrap();
    path
}

struct Output {
    status: std::process::ExitStatus,
    stdout: String,
    stderr: String,
}

async fn run(tool: &str, args: &[&str]) -> Output {
    let out = Command::new(require(tool)).args(args).stdin(Stdio::null()).kill_on_drop(true).output().await;
    let out = out.unwrap_or_else(|e| panic!("run {tool}: {e}"));
    Output {
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `curl --http2-prior-knowledge`: one POST; the status code on the last
/// line, after the body.
async fn curl(url: &str, headers: &[(&str, &str)], body: &std::path::Path) -> (u16, String) {
    let data = format!("@{}", body.display());
    let mut args = vec!["--http2-prior-knowledge", "-sS", "--max-time", PEER_TIMEOUT_S, "-X", "POST"];
    let headers = as_args(headers);
    args.extend(headers.iter().map(String::as_str));
    args.extend(["--data-binary", &data, "-w", "\n%{http_code}", url]);
    let out = run("curl", &args).await;
    assert!(out.status.success(), "curl failed on {}: {}\n{}", body.display(), out.stderr, out.stdout);
    let (body, code) = out.stdout.rsplit_once('\n').expect("curl printed a status code");
    (code.trim().parse().expect("a status code"), body.to_owned())
}

/// The standard headers of a POST carrying `method`, as `-H` arguments
/// (nghttp and h2load take them as curl does).
fn header_args(method: &str) -> Vec<String> {
    as_args(&standard_headers(method))
}

/// `headers` as `-H name: value` arguments.
fn as_args(headers: &[(&str, &str)]) -> Vec<String> {
    headers.iter().flat_map(|(k, v)| ["-H".to_owned(), format!("{k}: {v}")]).collect()
}

fn standard_headers(method: &str) -> Vec<(&str, &str)> {
    vec![
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", method),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_gets_json_answers_and_typed_errors_over_the_bridge() {
    watchdog(LIMIT, "curl over the socat bridge", async {
        let bridge = Bridge::start(&format!("--max-frame {MAX_MESSAGE}")).await;
        let url = bridge.url();

        // A request: 200, application/json, the response for its id.
        let discover = body_file("discover", &request(1, "server/discover", serde_json::json!({})));
        let (code, body) = curl(&url, &standard_headers("server/discover"), &discover).await;
        assert_eq!(code, 200, "{body}\n{}", bridge.log());
        let answer: serde_json::Value = serde_json::from_str(&body).expect("a JSON body");
        assert_eq!(answer["id"], 1, "{body}");
        assert!(answer["result"]["supportedVersions"].is_array() || answer["result"].is_object(), "{body}");

        // Mcp-Method that does not match the body: 400 and -32020 for its id.
        let (code, body) = curl(&url, &standard_headers("tools/list"), &discover).await;
        assert_eq!(code, 400, "{body}");
        assert!(body.contains("-32020"), "{body}");

        // Malformed JSON: 400 and a parse error.
        let broken = body_file("broken", "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"");
        let (code, body) = curl(&url, &standard_headers("ping"), &broken).await;
        assert_eq!(code, 400, "{body}");
        assert!(body.contains("-32700"), "{body}");

        // A body one byte over the limit: 413 and the transport's typed error.
        let filler = "x".repeat(MAX_MESSAGE);
        let over = body_file(
            "over",
            &request(4, "tools/call", serde_json::json!({"name": "echo", "arguments": {"text": filler}})),
        );
        let mut headers = standard_headers("tools/call");
        headers.push(("mcp-name", "echo"));
        let (code, body) = curl(&url, &headers, &over).await;
        assert_eq!(code, 413, "{body}");
        assert!(body.contains("-32600"), "{body}");

        for path in [discover, broken, over] {
            let _ = std::fs::remove_file(path);
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nghttp_sees_http2_framing_and_a_json_response() {
    watchdog(LIMIT, "nghttp over the socat bridge", async {
        let bridge = Bridge::start("").await;
        let ping = body_file("ping", &request(7, "ping", serde_json::json!({})));
        let data = ping.display().to_string();
        let mut args = vec!["-v", "-t", PEER_TIMEOUT_S, "-d", data.as_str()];
        let headers = header_args("ping");
        args.extend(headers.iter().map(String::as_str));
        let url = bridge.url();
        args.push(&url);
        let out = run("nghttp", &args).await;
        assert!(out.status.success(), "nghttp failed:\n{}\n{}\n{}", out.stdout, out.stderr, bridge.log());
        // nghttp -v prints each frame it receives: the server's SETTINGS, the
        // response's HEADERS with the status and the JSON body.
        assert!(out.stdout.contains("recv SETTINGS frame"), "{}", out.stdout);
        assert!(out.stdout.contains(":status: 200"), "{}", out.stdout);
        assert!(out.stdout.contains("\"id\":7"), "{}", out.stdout);
        let _ = std::fs::remove_file(ping);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2load_completes_every_request_over_the_bridge() {
    watchdog(LIMIT, "h2load over the socat bridge", async {
        let bridge = Bridge::start("").await;
        let ping = body_file("h2load", &request(9, "ping", serde_json::json!({})));
        let data = ping.display().to_string();
        // Two connections (two server processes), one request in flight on
        // each: the same id is never in flight twice on one connection.
        let mut args = vec!["-n", "400", "-c", "2", "-m", "1", "-T", PEER_TIMEOUT_S, "-d", data.as_str()];
        let headers = header_args("ping");
        args.extend(headers.iter().map(String::as_str));
        let url = bridge.url();
        args.push(&url);
        let out = run("h2load", &args).await;
        assert!(out.status.success(), "h2load failed:\n{}\n{}\n{}", out.stdout, out.stderr, bridge.log());
        assert!(out.stdout.contains("400 succeeded"), "{}\n{}", out.stdout, bridge.log());
        assert!(out.stdout.contains("400 2xx"), "{}", out.stdout);
        let _ = std::fs::remove_file(ping);
    })
    .await;
}
