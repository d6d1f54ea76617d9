//! `--transport stdio-v2` (**experimental**): the checks that apply to a
//! server speaking HTTP/2 with prior knowledge on its stdin and stdout,
//! over the `stdio-v2` host client ([`mcp_framer_stdio_v2::host::Client`]).
//!
//! Each check starts its own server (the root of a process tree of its
//! own, listed with the others and killed at the end), runs under
//! `--check-timeout`, and puts a deadline on every step: the spawn and the
//! HTTP/2 handshake (`--init-timeout`), the MCP handshake (`--init-timeout`),
//! every request (`--step-timeout`, or the check's own wait). The first
//! check, `selection`, is the pre-flight too: when the server does not speak
//! `stdio-v2` it FAILs with what the server wrote and every other check is
//! SKIPped; when it does, its tools are listed and `--large`, `--slow` and
//! `--noisy` are checked against them (an unknown tool is a
//! [`ProbeError`], as with `stdio`).

mod basic;
mod request_size;
mod streams;

use std::time::{Duration, Instant};

use mcp_framer_jsonrpc::protocol::{Era, META_SERVER_INFO, VERSIONS};
use mcp_framer_stdio::host::with_meta;
use mcp_framer_stdio_v2::host::{self, Client, HostConfig};
use serde_json::{Value, json};

use crate::check_id::CheckId;
use crate::duration::{not_answered, within};
use crate::error::ProbeError;
use crate::progress::Progress;
use crate::report::CheckResult;
use crate::suite::Gate;
use crate::target::{Opened, Target};
use crate::tools::ToolList;

/// Bytes of the server's stderr each client keeps (its tail).
pub(crate) const STDERR_TAIL: usize = 16 << 10;

/// Added to `--init-timeout` around a spawn: the client's own startup
/// deadline is `--init-timeout`; this one only guards it.
const SPAWN_SLACK: Duration = Duration::from_secs(2);

/// What the MCP handshake of a `stdio-v2` session found.
#[derive(Clone, Debug)]
pub(crate) struct V2Opened {
    /// The era.
    pub(crate) era: Era,
    /// The protocol version in use.
    pub(crate) version: String,
    /// The versions the server offered.
    pub(crate) offered: Vec<String>,
    /// Why `server/discover` did not open the session, if it did not.
    pub(crate) fallback: Option<String>,
    /// The `_meta` of every modern request.
    pub(crate) meta: Option<Value>,
    /// The `DiscoverResult` or the `initialize` result.
    pub(crate) result: Value,
    /// How long the handshake took.
    pub(crate) took: Duration,
}

impl V2Opened {
    /// The request that opened the session.
    pub(crate) fn method(&self) -> &'static str {
        match self.era {
            Era::Modern => "server/discover",
            Era::Legacy => "initialize",
        }
    }

    /// `serverInfo` (legacy) or `_meta["io.modelcontextprotocol/serverInfo"]` (modern).
    pub(crate) fn server_info(&self) -> Option<&Value> {
        self.result.get("serverInfo").or_else(|| self.result.get("_meta")?.get(META_SERVER_INFO))
    }
}

/// An open `stdio-v2` session: the client, the server's pid (its process
/// group) and what the handshake found.
pub(crate) struct V2Session {
    pub(crate) client: Client,
    pub(crate) pid: Option<u32>,
    pub(crate) opened: V2Opened,
}

impl V2Session {
    /// `params` (an object or null) with the era's `_meta` merged in.
    pub(crate) fn params(&self, params: Value) -> Value {
        with_meta(params, self.opened.meta.as_ref())
    }

    /// The request that shows the server is alive: `ping` (legacy) or
    /// `server/discover` (modern), and its params.
    pub(crate) fn liveness(&self) -> (&'static str, Value) {
        match self.opened.era {
            Era::Modern => ("server/discover", self.params(Value::Null)),
            Era::Legacy => ("ping", json!({})),
        }
    }

    /// Sends the liveness request and waits at most `limit`; any answer
    /// counts (a JSON-RPC error included). How long it took.
    pub(crate) async fn ping(&self, limit: Duration) -> Result<Duration, String> {
        let started = Instant::now();
        let (method, params) = self.liveness();
        match tokio::time::timeout(limit, self.client.request(method, &params)).await {
            Ok(Ok(_) | Err(host::Error::Rpc { .. })) => Ok(started.elapsed()),
            Ok(Err(e)) => Err(format!("{method}: {e}")),
            Err(_) => Err(not_answered(method, limit)),
        }
    }

    /// A `tools/call` request's params for `tool`, with a progress token
    /// when given.
    pub(crate) fn tool_params(&self, tool: &crate::options::ToolSpec, token: Option<&str>) -> Value {
        let mut params = json!({ "name": tool.name, "arguments": tool.arguments });
        if let Some(token) = token {
            params["_meta"] = json!({ "progressToken": token });
        }
        self.params(params)
    }

    /// Notes the session's stderr volume and stops it (closes the
    /// connection; its tree is killed).
    pub(crate) async fn end(self, target: &Target) {
        let stderr = self.client.counters().stderr_bytes;
        target.noise.lock().unwrap_or_else(|e| e.into_inner()).stderr_bytes += stderr;
        let ended = self.client.shutdown();
        let _ = tokio::time::timeout(target.limits.exit_timeout * 3 + Duration::from_secs(1), ended).await;
    }
}

/// The client's settings for the probe's limits.
pub(crate) fn host_config(target: &Target) -> HostConfig {
    let limits = &target.limits;
    let mut config = HostConfig::default()
        .with_max_receive(limits.max_frame)
        .with_startup_timeout(limits.init_timeout)
        .with_request_timeout(limits.step_timeout.max(limits.init_timeout) + limits.slow_start);
    config.exit_grace = limits.exit_timeout;
    config.stderr_tail = STDERR_TAIL;
    if let Some(version) = VERSIONS.iter().find(|v| **v == target.options.protocol_version) {
        config.protocol_version = version;
    }
    config
}

/// Spawns the server and completes the HTTP/2 handshake (no MCP request
/// yet), within `--init-timeout`; its tree is listed for the end.
pub(crate) async fn connect(target: &Target, config: HostConfig) -> Result<Client, host::Error> {
    let limit = target.limits.init_timeout + SPAWN_SLACK;
    let client = match tokio::time::timeout(limit, Client::spawn(target.command(), config)).await {
        Ok(client) => client?,
        Err(_) => {
            return Err(host::Error::Startup {
                reason: format!("no HTTP/2 session {}", within(limit)),
                exit_status: None,
                stderr_tail: String::new(),
            });
        }
    };
    if let Some(pid) = client.pid().await {
        target.add_tree(pid);
    }
    Ok(client)
}

/// Spawns the server with `config` and opens an MCP session in the era
/// found so far (the first one finds it).
pub(crate) async fn open_with(target: &Target, config: HostConfig) -> Result<V2Session, String> {
    let client = connect(target, config).await.map_err(|e| e.to_string())?;
    let pid = client.pid().await;
    let opened = handshake(target, &client).await?;
    record(target, &opened);
    Ok(V2Session { client, pid, opened })
}

/// [`open_with`] the default settings.
pub(crate) async fn open(target: &Target) -> Result<V2Session, String> {
    open_with(target, host_config(target)).await
}

/// The MCP handshake, the newline host's own
/// ([`mcp_framer_stdio::host::handshake`] over the `stdio-v2` client):
/// `server/discover` (unless `--era legacy` or a legacy era was found),
/// retried once with a version the server offers after -32022, then
/// `initialize` (+ `notifications/initialized`) on any other error or
/// timeout, each within `--init-timeout`.
async fn handshake(target: &Target, client: &Client) -> Result<V2Opened, String> {
    let started = Instant::now();
    let opened =
        mcp_framer_stdio::host::handshake(client, &target.handshake_options()).await.map_err(|e| e.to_string())?;
    Ok(V2Opened {
        era: opened.era,
        version: opened.protocol_version,
        offered: opened.offered_versions,
        fallback: opened.fallback_reason,
        meta: opened.meta,
        result: opened.result,
        took: started.elapsed(),
    })
}

/// The first handshake fixes the era of every later session and the
/// report's `opening` and `server_info`.
fn record(target: &Target, opened: &V2Opened) {
    if let Some(info) = opened.server_info() {
        target.server_info.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(|| info.clone());
    }
    target.opened.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(|| Opened {
        era: opened.era,
        version: opened.version.clone(),
        offered: opened.offered.clone(),
        fallback: opened.fallback.clone(),
        meta: opened.meta.clone(),
    });
}

/// Lists every tool (following `nextCursor` up to `--max-pages`, each page
/// within `--step-timeout`); also says whether the list is complete.
pub(crate) async fn list_all(target: &Target, session: &V2Session) -> Result<(Vec<Value>, bool), String> {
    let limit = target.limits.step_timeout;
    crate::tools::follow_pages(target.limits.max_pages, |params| async move {
        let params = session.params(params);
        match tokio::time::timeout(limit, session.client.request("tools/list", &params)).await {
            Ok(Ok(response)) => Ok(response.result()),
            Ok(Err(e)) => Err(format!("tools/list failed: {e}")),
            Err(_) => Err(not_answered("tools/list", limit)),
        }
    })
    .await
}

/// `--list-tools --transport stdio-v2`.
pub(crate) async fn list(target: &Target) -> Result<ToolList, ProbeError> {
    let session = open(target).await.map_err(ProbeError::NoTools)?;
    let listed = list_all(target, &session).await;
    let era = session.opened.era.as_str();
    session.end(target).await;
    let (tools, _) = listed.map_err(ProbeError::NoTools)?;
    Ok(ToolList {
        server: target.options.command.clone(),
        era,
        tools: tools.iter().filter_map(crate::tools::describe_tool).collect(),
    })
}

/// Runs the selected `stdio-v2` checks in order ([`CheckId::STDIO_V2`],
/// through [`crate::suite::run`]); deselected ones are SKIP, and so is every
/// one after a failed selection.
pub(crate) async fn run_all(target: &Target) -> Result<Vec<CheckResult>, ProbeError> {
    match target.spawn_raw() {
        Ok(conn) => drop(conn),
        Err(e) => return Err(ProbeError::Spawn(e)),
    }
    target.kill_trees();
    let gate = Gate { check: CheckId::Selection, skipped: "no stdio-v2 session: see the selection check" };
    let run = async |check, progress: &Progress, result: &mut CheckResult| {
        match check {
            CheckId::Selection => return basic::selection(target, progress, result).await,
            CheckId::Handshake => basic::handshake(target, progress, result).await,
            CheckId::BadInput => basic::bad_input(target, progress, result).await,
            CheckId::RequestSize => request_size::run(target, progress, result).await,
            CheckId::HeadOfLine => streams::head_of_line(target, progress, result).await,
            CheckId::Cancellation => streams::cancellation(target, progress, result).await,
            CheckId::Stderr => basic::stderr(target, progress, result).await,
            CheckId::Shutdown => basic::shutdown(target, progress, result).await,
            // The newline-only checks are not in STDIO_V2.
            _ => {}
        }
        Ok(())
    };
    crate::suite::run(target, &CheckId::STDIO_V2, Some(gate), run).await
}
