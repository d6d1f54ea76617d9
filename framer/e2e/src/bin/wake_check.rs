//! Checks, against any stdio MCP server, that every wake-up of a host
//! [`Session`] agrees with its metrics: when a request's outcome arrives (a
//! response, an error response, an oversize failure), the snapshot taken at
//! once already counts that frame and every byte before it.
//!
//! ```text
//! wake_check [--runtime current|multi] [--repeat N] [--limit BYTES] [--initialize]
//!            [--method M] [--params JSON] -- COMMAND [ARGS...]
//! ```
//!
//! It spawns COMMAND in a session (transport limit `--limit`, default
//! 16 MiB), optionally runs the MCP handshake, then sends `--method` with
//! `--params` (default `tools/list`) `--repeat` times (default 100), one
//! after the other. For each outcome it checks the snapshot:
//!
//! * a response or an error response: `responses` counts it, and
//!   `stdout_bytes` is at least every frame so far, each with its `\n`;
//! * an oversize failure: `oversize_frames`, `oversize_responses` and
//!   `discarded_bytes` count it, and `stdout_bytes` as above.
//!
//! It prints one JSON line (`runtime`, `repeat`, `responses`, `oversize`,
//! `other_errors`, `disagreements`, `first_disagreement`) and exits 0 only if
//! nothing disagreed and no request failed otherwise. Every request has a
//! 60 s deadline and the whole run a watchdog of 10 minutes.

use std::time::Duration;

use clap::Parser;
use mcp_framer_jsonrpc::protocol::NEWEST_LEGACY;
use mcp_framer_stdio::host::{MetricsSnapshot, RequestError, Session, SessionConfig};
use serde_json::{Value, json};

/// The arguments.
#[derive(Debug, Parser)]
struct Args {
    /// `current` (tokio's current-thread runtime) or `multi` (multi-thread).
    #[arg(long, default_value = "multi")]
    runtime: String,
    /// How many requests, one after the other.
    #[arg(long, default_value_t = 100)]
    repeat: u64,
    /// The host's transport limit in bytes.
    #[arg(long, default_value_t = mcp_framer::DEFAULT_MAX_FRAME)]
    limit: usize,
    /// Run `initialize` and `notifications/initialized` first.
    #[arg(long)]
    initialize: bool,
    /// The method of each request.
    #[arg(long, default_value = "tools/list")]
    method: String,
    /// Its params, as JSON.
    #[arg(long, default_value = "null")]
    params: String,
    /// The server command.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

/// What the requests so far add up to.
#[derive(Debug, Default)]
struct Seen {
    responses: u64,
    oversize: u64,
    oversize_bytes: u64,
    /// Every frame received or discarded, each with its `\n`.
    stdout_bytes: u64,
    other_errors: u64,
    disagreements: u64,
    first_disagreement: Option<String>,
}

impl Seen {
    /// Compares the snapshot taken at a wake-up with what was seen.
    fn check(&mut self, at: u64, m: &MetricsSnapshot) {
        let mut wrong = Vec::new();
        if m.stdout_bytes < self.stdout_bytes {
            wrong.push(format!("stdout_bytes {} < {}", m.stdout_bytes, self.stdout_bytes));
        }
        if m.responses < self.responses {
            wrong.push(format!("responses {} < {}", m.responses, self.responses));
        }
        if m.oversize_frames < self.oversize || m.oversize_responses < self.oversize {
            wrong.push(format!(
                "oversize_frames {} / oversize_responses {} < {}",
                m.oversize_frames, m.oversize_responses, self.oversize
            ));
        }
        if m.discarded_bytes < self.oversize_bytes {
            wrong.push(format!("discarded_bytes {} < {}", m.discarded_bytes, self.oversize_bytes));
        }
        if !wrong.is_empty() {
            self.disagreements += 1;
            self.first_disagreement.get_or_insert_with(|| format!("request {at}: {}", wrong.join(", ")));
        }
    }
}

async fn run(args: &Args) -> Seen {
    let params: Value = serde_json::from_str(&args.params).expect("--params is JSON");
    let mut command = tokio::process::Command::new(&args.command[0]);
    command.args(&args.command[1..]);
    let config = SessionConfig::default().with_max_receive(args.limit).with_request_timeout(Duration::from_secs(60));
    let (session, _inbound) = Session::spawn(command, config).expect("spawn the server");
    let mut seen = Seen::default();
    if args.initialize {
        let hello = json!({
            "protocolVersion": NEWEST_LEGACY,
            "capabilities": {},
            "clientInfo": {"name": "wake_check", "version": "0.0.0"},
        });
        let response = session.request("initialize", &hello).await.expect("initialize");
        seen.responses += 1;
        seen.stdout_bytes += response.frame().len() as u64 + 1;
        session.notify("notifications/initialized", &()).await.expect("initialized");
    }
    for at in 0..args.repeat {
        let outcome = session.request(&args.method, &params).await;
        let metrics = session.metrics();
        match outcome {
            Ok(response) => {
                seen.responses += 1;
                seen.stdout_bytes += response.frame().len() as u64 + 1;
            }
            Err(RequestError::Rpc { response, .. }) => {
                seen.responses += 1;
                seen.stdout_bytes += response.frame().len() as u64 + 1;
            }
            Err(RequestError::Oversize { len, .. }) => {
                seen.oversize += 1;
                seen.oversize_bytes += len;
                seen.stdout_bytes += len + 1;
            }
            Err(e) => {
                eprintln!("wake_check: request {at} failed: {e}");
                seen.other_errors += 1;
                continue;
            }
        }
        seen.check(at, &metrics);
    }
    session.shutdown().await;
    seen
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let runtime = match args.runtime.as_str() {
        "current" => tokio::runtime::Builder::new_current_thread().enable_all().build(),
        "multi" => tokio::runtime::Builder::new_multi_thread().enable_all().build(),
        other => {
            eprintln!("wake_check: --runtime is current or multi, not {other:?}");
            return std::process::ExitCode::from(2);
        }
    }
    .expect("tokio runtime");
    let seen = runtime.block_on(async {
        tokio::time::timeout(Duration::from_secs(600), run(&args)).await.expect("wake_check: watchdog (10 min)")
    });
    let report = json!({
        "runtime": args.runtime,
        "repeat": args.repeat,
        "responses": seen.responses,
        "oversize": seen.oversize,
        "other_errors": seen.other_errors,
        "disagreements": seen.disagreements,
        "first_disagreement": seen.first_disagreement,
    });
    println!("{report}");
    if seen.disagreements == 0 && seen.other_errors == 0 {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    }
}
