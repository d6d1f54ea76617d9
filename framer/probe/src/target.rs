//! The server under test: how to start it (once per check, each in its own
//! process group), the `initialize` it gets, and the clean-up that kills
//! every group at the end.

use std::io;
use std::sync::Mutex;
use std::time::Duration;

use mcp_framer::{Config, OversizePolicy};
use mcp_framer_stdio::host::{
    Era, HandshakeError, HandshakeOptions, Handshaken, Inbound, InboundQueue, RequestError, Session, SessionConfig,
    ShutdownConfig, SkippedFrame, handshake, with_meta,
};
use serde_json::{Value, json};
use tokio::process::Command;
use tokio::time::Instant;

use crate::options::{Limits, Options};
use crate::raw::{RawConn, RawEvent, RawSetup};
use crate::report::Leftover;

/// Lines on stdout that were not JSON-RPC, from every server the probe ran.
#[derive(Debug, Default)]
pub(crate) struct Noise {
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
    pub(crate) fn line(&mut self, check: &str, len: usize, excerpt: &str) {
        self.lines += 1;
        self.bytes += len as u64;
        if self.excerpts.len() < MAX_EXCERPTS {
            self.excerpts.push(format!("{check}: {len} bytes: {excerpt:?}"));
        }
    }
}

/// What the first handshake found; every later session uses that era.
#[derive(Clone, Debug)]
pub(crate) struct Opened {
    /// The era.
    pub(crate) era: Era,
    /// The protocol version in use.
    pub(crate) version: String,
    /// The versions the server offered.
    pub(crate) offered: Vec<String>,
    /// Why the modern probe fell back, if it did.
    pub(crate) fallback: Option<String>,
    /// The `_meta` of every modern request.
    pub(crate) meta: Option<Value>,
}

/// A started session.
pub(crate) struct Started {
    pub(crate) session: Session,
    pub(crate) inbound: InboundQueue,
    pub(crate) opened: Handshaken,
}

/// The server command and the probe's settings.
#[derive(Debug)]
pub(crate) struct Target {
    /// What to do.
    pub(crate) options: Options,
    /// Its times and sizes.
    pub(crate) limits: Limits,
    /// The era and versions, once the first handshake found them.
    pub(crate) opened: Mutex<Option<Opened>>,
    groups: Mutex<Vec<u32>>,
    /// Non-JSON-RPC stdout lines seen by every check.
    pub noise: Mutex<Noise>,
    /// The server's `serverInfo`, once a check saw it.
    pub server_info: Mutex<Option<Value>>,
}

impl Target {
    /// A target for `options`.
    pub(crate) fn new(options: Options) -> Target {
        Target {
            limits: options.limits.clone(),
            options,
            opened: Mutex::new(None),
            groups: Mutex::new(Vec::new()),
            noise: Mutex::default(),
            server_info: Mutex::new(None),
        }
    }

    /// The server command (stdio not set up).
    pub(crate) fn command(&self) -> Command {
        let mut command = Command::new(&self.options.command[0]);
        command.args(&self.options.command[1..]);
        command
    }

    /// What the first handshake found, if it succeeded.
    pub(crate) fn opened(&self) -> Option<Opened> {
        self.opened.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The era every session uses: the one found, else the one asked for,
    /// else legacy.
    pub(crate) fn era(&self) -> Era {
        self.opened().map(|o| o.era).or(self.options.era).unwrap_or(Era::Legacy)
    }

    /// `params` with the era's `_meta` (modern) merged in.
    pub(crate) fn params(&self, params: Value) -> Value {
        with_meta(params, self.opened().and_then(|o| o.meta).as_ref())
    }

    /// The handshake options for the next session: the era found so far, or
    /// (before the first) the one asked for, or probing.
    pub(crate) fn handshake_options(&self) -> HandshakeOptions {
        let era = self.opened().map(|o| o.era).or(self.options.era);
        HandshakeOptions::default()
            .with_era(era)
            .with_legacy_version(self.options.protocol_version.clone())
            .with_discover_timeout(self.limits.init_timeout)
            .with_initialize_timeout(self.limits.init_timeout)
            .with_client_info(json!({"name": "mcp-probe", "version": env!("CARGO_PKG_VERSION")}))
    }

    /// The request that opens a session in the current era (the first
    /// request the raw layer writes): `server/discover` or `initialize`.
    pub(crate) fn opening_request(&self) -> (&'static str, Value) {
        match self.era() {
            Era::Modern => ("server/discover", self.params(Value::Null)),
            Era::Legacy => ("initialize", self.initialize_params()),
        }
    }

    /// The request that shows a server is alive: `ping` (legacy), or
    /// `server/discover` (modern: the revision removed `ping`, and every
    /// modern server must answer `server/discover`). Any answer counts,
    /// an error included.
    pub(crate) fn liveness(&self) -> (&'static str, Value) {
        match self.era() {
            Era::Modern => ("server/discover", self.params(Value::Null)),
            Era::Legacy => ("ping", Value::Null),
        }
    }

    /// Spawns the server on raw pipes (in its own process group, killed at
    /// the end).
    pub(crate) fn spawn_raw(&self) -> io::Result<RawConn> {
        let setup =
            RawSetup { max_frame: self.limits.max_frame, excerpt: self.limits.excerpt, liveness: self.liveness() };
        let conn = RawConn::spawn(self.command(), setup)?;
        if let Some(pid) = conn.pid() {
            self.register(pid);
        }
        Ok(conn)
    }

    /// Spawns the server on raw pipes and opens the session in the era found.
    pub(crate) async fn open_raw(&self) -> Result<RawConn, (String, Option<RawConn>)> {
        let mut conn = self.spawn_raw().map_err(|e| (format!("the server could not be started: {e}"), None))?;
        match conn.open(self.opening_request(), self.limits.init_timeout).await {
            Ok(_) => Ok(conn),
            Err(e) => Err((e, Some(conn))),
        }
    }

    /// Sends the liveness request on `session` and waits at most `limit`.
    pub(crate) async fn ping(&self, session: &Session, limit: Duration) -> Result<Duration, String> {
        let started = Instant::now();
        let (method, params) = self.liveness();
        let pending = session.start(method, &params).await.map_err(|e| e.to_string())?;
        match pending.with_timeout(limit).response().await {
            Ok(_) | Err(RequestError::Rpc { .. }) => Ok(started.elapsed()),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Remembers a process group to kill at the end.
    pub(crate) fn register(&self, pgid: u32) {
        self.groups.lock().unwrap_or_else(|e| e.into_inner()).push(pgid);
    }

    /// The `initialize` params the probe sends.
    pub(crate) fn initialize_params(&self) -> Value {
        json!({
            "protocolVersion": self.options.protocol_version,
            "capabilities": {},
            "clientInfo": {"name": "mcp-probe", "version": env!("CARGO_PKG_VERSION")},
        })
    }

    /// The session config every check starts from: the probe's limit, short
    /// shutdown waits, stderr kept out of the way.
    pub(crate) fn session_config(&self) -> SessionConfig {
        let framer = Config::DEFAULT.with_max_frame(self.limits.max_frame).with_oversize(OversizePolicy::Skip);
        SessionConfig::default()
            .with_framer(framer)
            .with_excerpt(self.limits.excerpt)
            .with_request_timeout(self.limits.step_timeout)
            .with_write_timeout(self.limits.step_timeout)
            .with_exit_grace(Duration::from_millis(300))
            .with_shutdown(ShutdownConfig::default().with_each(Duration::from_millis(500)))
            .with_process_tree(true)
    }

    /// Spawns a session with `config`.
    pub(crate) fn spawn(&self, config: SessionConfig) -> io::Result<(Session, InboundQueue)> {
        let spawned = Session::spawn(self.command(), config)?;
        if let Some(pid) = spawned.0.pid() {
            self.register(pid);
        }
        Ok(spawned)
    }

    /// Spawns a session and opens it in the era found so far (the first
    /// call finds it: `server/discover`, then `initialize`; a server that
    /// exits on `server/discover` is restarted as a legacy one).
    pub(crate) async fn start(&self, config: SessionConfig) -> Result<Started, String> {
        let (session, inbound) = self.spawn(config).map_err(|e| format!("the server could not be started: {e}"))?;
        match handshake(&session, &self.handshake_options()).await {
            Ok(opened) => Ok(self.opened_with(session, inbound, opened)),
            Err(HandshakeError::ClosedDuringDiscover(e)) if self.opened().is_none() && self.options.era.is_none() => {
                let (session, inbound) =
                    self.spawn(config).map_err(|e| format!("the server could not be restarted: {e}"))?;
                let options = self.handshake_options().with_era(Some(Era::Legacy));
                let mut opened = handshake(&session, &options).await.map_err(|e| e.to_string())?;
                opened.fallback_reason = Some(format!("the server exited on server/discover ({e})"));
                Ok(self.opened_with(session, inbound, opened))
            }
            Err(e) => Err(e.to_string()),
        }
    }

    fn opened_with(&self, session: Session, inbound: InboundQueue, opened: Handshaken) -> Started {
        if let Some(info) = opened.server_info() {
            self.server_info.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(|| info.clone());
        }
        self.opened.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(|| Opened {
            era: opened.era,
            version: opened.protocol_version.clone(),
            offered: opened.offered_versions.clone(),
            fallback: opened.fallback_reason.clone(),
            meta: opened.meta.clone(),
        });
        Started { session, inbound, opened }
    }

    /// Notes what a session saw on stdout that was not JSON-RPC (from the
    /// reports left in its queue) and its stderr volume.
    pub(crate) fn account(&self, check: &str, session: &Session, inbound: &mut InboundQueue) {
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
    pub(crate) fn kill_groups(&self) {
        for &pgid in self.groups.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            kill_group(pgid);
        }
    }

    /// Notes the lines a raw connection saw on stdout that were not
    /// JSON-RPC, and its stderr volume.
    pub(crate) fn account_raw(&self, check: &str, conn: &RawConn) {
        let mut noise = self.noise.lock().unwrap_or_else(|e| e.into_inner());
        for event in &conn.log {
            if let RawEvent::NotJsonRpc { len, excerpt } = event {
                noise.line(check, *len, excerpt);
            }
        }
        noise.stderr_bytes += conn.counters().stderr_bytes.load(std::sync::atomic::Ordering::Relaxed);
    }

    /// Kills every process group the probe started and lists the processes
    /// of those groups still alive afterwards.
    pub(crate) async fn kill_all(&self) -> Vec<Leftover> {
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
pub(crate) fn note_skipped(noise: &mut Noise, check: &str, skipped: &SkippedFrame) {
    match skipped {
        SkippedFrame::NotJson { len, excerpt } => noise.line(check, *len, &excerpt.to_text()),
        SkippedFrame::Invalid { len, excerpt, .. } => noise.line(check, *len, &excerpt.to_text()),
        _ => {}
    }
}

/// Whether this platform lets the probe list a server's processes (the scan
/// reads Linux's `/proc`); where it does not, the checks say so.
pub(crate) const SCANS_PROCESSES: bool = cfg!(target_os = "linux");

/// What the evidence says where [`SCANS_PROCESSES`] is false.
pub(crate) const NO_SCAN: &str =
    "the server's child processes are not checked on this platform (the scan reads Linux's /proc)";

/// Sends SIGKILL to process group `pgid` (ignoring a group that is gone).
/// On Windows nothing: every session's server runs in a Job Object of its
/// own, terminated when the session is dropped.
#[cfg(not(unix))]
pub(crate) fn kill_group(_pgid: u32) {}

/// Sends SIGKILL to process group `pgid` (ignoring a group that is gone).
#[cfg(unix)]
pub(crate) fn kill_group(pgid: u32) {
    let Some(pid) = i32::try_from(pgid).ok().and_then(rustix::process::Pid::from_raw) else {
        return;
    };
    let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
}

/// `/proc/PID/cmdline`, its arguments joined by spaces (empty if gone).
#[cfg(unix)]
pub(crate) fn cmdline(pid: u32) -> String {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let args: Vec<String> =
        raw.split(|&b| b == 0).filter(|a| !a.is_empty()).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    args.join(" ")
}

/// Live processes whose process group is one of `groups`: the scan reads
/// Linux's `/proc`, so on other platforms none are found (the checks that
/// compare a server's children before and after say so in their evidence).
#[cfg(not(unix))]
pub(crate) fn group_members(_groups: &[u32]) -> Vec<Leftover> {
    Vec::new()
}

/// Live (not zombie) processes whose process group is one of `groups`,
/// read from `/proc`.
#[cfg(unix)]
pub(crate) fn group_members(groups: &[u32]) -> Vec<Leftover> {
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
            left.push(Leftover { pid, comm, cmdline: cmdline(pid) });
        }
    }
    left
}
