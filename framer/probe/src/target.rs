//! The server under test: how to start it (once per check, each as the
//! root of a process tree of its own), the `initialize` it gets, and the
//! clean-up that kills every tree at the end.

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
use crate::processes::{Leftover, Trees};
use crate::raw::{RawConn, RawEvent, RawSetup};

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
    trees: Trees,
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
            trees: Trees::default(),
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

    /// Spawns the server on raw pipes (the root of a tree of its own,
    /// killed at the end).
    pub(crate) fn spawn_raw(&self) -> io::Result<RawConn> {
        let setup =
            RawSetup { max_frame: self.limits.max_frame, excerpt: self.limits.excerpt, liveness: self.liveness() };
        let conn = RawConn::spawn(self.command(), setup)?;
        if let Some(pid) = conn.pid() {
            self.trees.add(pid, Some(conn.killer()));
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
            self.trees.add(pid, None);
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

    /// Remembers a tree a `stdio-v2` client started (killed by its process
    /// group at the end, like a host session's).
    pub(crate) fn add_tree(&self, pid: u32) {
        self.trees.add(pid, None);
    }

    /// Kills every server tree started so far (they stay listed for
    /// [`kill_all`](Target::kill_all)).
    pub(crate) fn kill_trees(&self) {
        self.trees.kill();
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

    /// Kills every server tree the probe started and lists their
    /// processes still alive afterwards.
    pub(crate) async fn kill_all(&self) -> Vec<Leftover> {
        self.trees.kill_all().await
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
