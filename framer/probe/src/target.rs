//! The server under test: how to start it (once per check, each in its own
//! process group), the `initialize` it gets, and the clean-up that kills
//! every group at the end.

use std::io;
use std::sync::Mutex;
use std::time::Duration;

use mcp_framer::{Config, OversizePolicy};
use mcp_framer_stdio::host::{
    Inbound, InboundQueue, RequestError, Session, SessionConfig, ShutdownConfig, SkippedFrame,
};
use serde_json::{Value, json};
use tokio::process::Command;

use crate::args::Args;
use crate::report::Leftover;

/// Lines on stdout that were not JSON-RPC, from every server the probe ran.
#[derive(Debug, Default)]
pub struct Noise {
    /// How many.
    pub lines: u64,
    /// Their bytes.
    pub bytes: u64,
    /// The first few, with the check that saw them.
    pub excerpts: Vec<String>,
    /// Bytes on stderr, all servers together.
    pub stderr_bytes: u64,
}

/// The most excerpts kept.
const MAX_EXCERPTS: usize = 5;

impl Noise {
    /// Records one line that was not JSON-RPC.
    pub fn line(&mut self, check: &str, len: usize, excerpt: &str) {
        self.lines += 1;
        self.bytes += len as u64;
        if self.excerpts.len() < MAX_EXCERPTS {
            self.excerpts.push(format!("{check}: {len} bytes: {excerpt:?}"));
        }
    }
}

/// The server command and the probe's settings.
#[derive(Debug)]
pub struct Target {
    /// The parsed command line.
    pub args: Args,
    groups: Mutex<Vec<u32>>,
    /// Non-JSON-RPC stdout lines seen by every check.
    pub noise: Mutex<Noise>,
    /// The server's `serverInfo`, once a check saw it.
    pub server_info: Mutex<Option<Value>>,
}

impl Target {
    /// A target for `args`.
    pub fn new(args: Args) -> Target {
        Target { args, groups: Mutex::new(Vec::new()), noise: Mutex::default(), server_info: Mutex::new(None) }
    }

    /// The server command (stdio not set up).
    pub fn command(&self) -> Command {
        let mut command = Command::new(&self.args.command[0]);
        command.args(&self.args.command[1..]);
        command
    }

    /// Remembers a process group to kill at the end.
    pub fn register(&self, pgid: u32) {
        self.groups.lock().unwrap_or_else(|e| e.into_inner()).push(pgid);
    }

    /// The `initialize` params the probe sends.
    pub fn initialize_params(&self) -> Value {
        json!({
            "protocolVersion": self.args.protocol_version,
            "capabilities": {},
            "clientInfo": {"name": "mcp-probe", "version": env!("CARGO_PKG_VERSION")},
        })
    }

    /// The session config every check starts from: the probe's limit, short
    /// shutdown waits, stderr kept out of the way.
    pub fn session_config(&self) -> SessionConfig {
        let framer = Config::DEFAULT.with_max_frame(self.args.max_frame).with_oversize(OversizePolicy::Skip);
        SessionConfig::default()
            .with_framer(framer)
            .with_excerpt(self.args.excerpt)
            .with_request_timeout(self.args.step_timeout)
            .with_write_timeout(self.args.step_timeout)
            .with_exit_grace(Duration::from_millis(300))
            .with_shutdown(ShutdownConfig::default().with_each(Duration::from_millis(500)))
            .with_process_group(true)
    }

    /// Spawns a session with `config`.
    pub fn spawn(&self, config: SessionConfig) -> io::Result<(Session, InboundQueue)> {
        let spawned = Session::spawn(self.command(), config)?;
        if let Some(pid) = spawned.0.pid() {
            self.register(pid);
        }
        Ok(spawned)
    }

    /// Spawns a session and completes the handshake; returns the
    /// `initialize` result.
    pub async fn start(&self, config: SessionConfig) -> Result<(Session, InboundQueue, Value), String> {
        let (session, inbound) = self.spawn(config).map_err(|e| format!("the server could not be started: {e}"))?;
        let result = self.initialize(&session).await?;
        Ok((session, inbound, result))
    }

    /// `initialize` (within `--init-timeout`) then `notifications/initialized`.
    pub async fn initialize(&self, session: &Session) -> Result<Value, String> {
        let pending = session
            .start("initialize", &self.initialize_params())
            .await
            .map_err(|e| format!("initialize could not be sent: {e}"))?;
        let response = pending.with_timeout(self.args.init_timeout).response().await.map_err(|e| match e {
            RequestError::TimedOut { after, .. } => {
                format!("initialize was not answered within {}", crate::fmt_duration(after))
            }
            e => format!("initialize failed: {e}"),
        })?;
        let result: Value =
            response.deserialize_payload().map_err(|e| format!("initialize result is not JSON: {e}"))?;
        if let Some(info) = result.get("serverInfo") {
            self.server_info.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(|| info.clone());
        }
        session
            .notify("notifications/initialized", &())
            .await
            .map_err(|e| format!("notifications/initialized could not be sent: {e}"))?;
        Ok(result)
    }

    /// Notes what a session saw on stdout that was not JSON-RPC (from the
    /// reports left in its queue) and its stderr volume.
    pub fn account(&self, check: &str, session: &Session, inbound: &mut InboundQueue) {
        let mut noise = self.noise.lock().unwrap_or_else(|e| e.into_inner());
        while let Ok(item) = inbound.try_recv() {
            if let Inbound::Skipped(skipped) = item {
                note_skipped(&mut noise, check, &skipped);
            }
        }
        noise.stderr_bytes += session.metrics().stderr_bytes;
    }

    /// Sends SIGKILL to every process group started so far (they stay
    /// listed for [`kill_all`](Target::kill_all)).
    pub fn kill_groups(&self) {
        for &pgid in self.groups.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            kill_group(pgid);
        }
    }

    /// Notes the lines a raw connection saw on stdout that were not
    /// JSON-RPC, and its stderr volume.
    pub fn account_raw(&self, check: &str, conn: &crate::raw::RawConn) {
        let mut noise = self.noise.lock().unwrap_or_else(|e| e.into_inner());
        for event in &conn.log {
            if let crate::raw::RawEvent::NotJsonRpc { len, excerpt } = event {
                noise.line(check, *len, excerpt);
            }
        }
        noise.stderr_bytes += conn.counters().stderr_bytes.load(std::sync::atomic::Ordering::Relaxed);
    }

    /// Kills every process group the probe started and lists the processes
    /// of those groups still alive afterwards.
    pub async fn kill_all(&self) -> Vec<Leftover> {
        let groups = std::mem::take(&mut *self.groups.lock().unwrap_or_else(|e| e.into_inner()));
        for &pgid in &groups {
            kill_group(pgid);
        }
        // The kernel needs a moment to take killed processes down; poll.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        loop {
            let left = group_members(&groups);
            if left.is_empty() || tokio::time::Instant::now() >= deadline {
                return left;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Records a skipped frame in the noise tally.
pub fn note_skipped(noise: &mut Noise, check: &str, skipped: &SkippedFrame) {
    match skipped {
        SkippedFrame::NotJson { len, excerpt } => noise.line(check, *len, &excerpt.to_text()),
        SkippedFrame::Invalid { len, excerpt, .. } => noise.line(check, *len, &excerpt.to_text()),
        _ => {}
    }
}

/// Sends SIGKILL to process group `pgid` (ignoring a group that is gone).
pub fn kill_group(pgid: u32) {
    let Some(pid) = i32::try_from(pgid).ok().and_then(rustix::process::Pid::from_raw) else {
        return;
    };
    let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
}

/// Live (not zombie) processes whose process group is one of `groups`,
/// read from `/proc`.
pub fn group_members(groups: &[u32]) -> Vec<Leftover> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut left = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|name| name.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // pid (comm) state ppid pgrp ...: comm may hold spaces and parens.
        let Some((head, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let (Some(state), Some(pgrp)) = (fields.first(), fields.get(2).and_then(|p| p.parse::<u32>().ok())) else {
            continue;
        };
        if *state != "Z" && groups.contains(&pgrp) {
            let comm = head.split_once('(').map(|(_, c)| c.to_owned()).unwrap_or_default();
            left.push(Leftover { pid, comm });
        }
    }
    left
}
