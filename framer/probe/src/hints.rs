//! Known SDK behaviours behind verdicts, kept as data in one table: each
//! check records the behaviours it saw ([`CheckResult::behaviour`]); after
//! the run, each one found here becomes a [`Hint`] that names the SDK and
//! says what to change. The SDK is told from the behaviours that only one
//! SDK shows (its fingerprints), then from `serverInfo`, then from the
//! runtime the server command starts; when none tells, the hint names every
//! SDK known to behave so.

use serde_json::Value;

use crate::report::{Hint, Report};

/// The official TypeScript SDK's stdio server transport (v1
/// `@modelcontextprotocol/sdk`, v2 `@modelcontextprotocol/server`).
const TS: &str = "the TypeScript SDK (StdioServerTransport)";
/// The official Python SDK's stdio server (`mcp`).
const PY: &str = "the Python SDK (mcp.server.stdio)";
/// A Node server that calls `process.exit()` itself.
const NODE_EXIT: &str = "a Node server calling process.exit() (mthines/lorekit PR #383, apify/mcpc PR #17)";

/// One known behaviour.
struct Row {
    /// The name a check records.
    behaviour: &'static str,
    /// The SDKs known to show it.
    sdks: &'static [&'static str],
    /// Whether it singles out its SDK (a fingerprint).
    fingerprint: bool,
    /// What to change.
    advice: &'static str,
}

/// The table.
const TABLE: &[Row] = &[
    Row {
        behaviour: "silent-on-parse-error",
        sdks: &[TS, PY],
        fingerprint: false,
        advice: "its transport drops a line it cannot parse without a reply; answer -32700 with id null, as JSON-RPC \
                 2.0 says",
    },
    Row {
        behaviour: "silent-on-invalid-request",
        sdks: &[TS, PY],
        fingerprint: false,
        advice: "its transport drops a batch or a message without \"jsonrpc\":\"2.0\" silently; answer -32600",
    },
    Row {
        behaviour: "invalid-utf8-served",
        sdks: &[TS, PY],
        fingerprint: false,
        advice: "stdin is decoded leniently (Buffer.toString, or errors=\"replace\" in Python), so invalid UTF-8 \
                 becomes U+FFFD and the request is served; decode strictly and answer -32700",
    },
    Row {
        behaviour: "exits-over-10mib",
        sdks: &[TS],
        fingerprint: true,
        advice: "its ReadBuffer has a fatal 10 MiB cap (typescript-sdk #2239): the transport closes and every \
                 pending request is lost; keep requests under 10 MiB or skip oversize lines instead",
    },
    Row {
        behaviour: "deaf-over-10mib",
        sdks: &[TS],
        fingerprint: true,
        advice: "its ReadBuffer has a 10 MiB cap (typescript-sdk #2239): past it the transport closes, and a \
                 process that outlives its transport stays alive but answers nothing; exit when the transport \
                 closes, and keep requests under 10 MiB",
    },
    Row {
        behaviour: "slow-large-request",
        sdks: &[TS],
        fingerprint: false,
        advice: "its reader joins every chunk onto the whole buffer (Buffer.concat), so a large request takes \
                 quadratic time; scan only the new chunk for the newline",
    },
    Row {
        behaviour: "cancel-leaves-child",
        sdks: &[TS, PY],
        fingerprint: false,
        advice: "the SDK's cancellation aborts the handler's signal/task only; a tool must kill the processes it \
                 started when it is cancelled (a process group, and a kill on abort)",
    },
    Row {
        behaviour: "cuts-last-frame-at-exit",
        sdks: &[NODE_EXIT],
        fingerprint: false,
        advice: "Node writes to a pipe asynchronously, and process.exit() drops what process.stdout still holds; at \
                 stdin's end, exit once stdout has drained (process.stdout.write(\"\", () => process.exit(0))) or \
                 let the event loop end by itself",
    },
    Row {
        behaviour: "outlives-stdin-while-busy",
        sdks: &[TS, PY],
        fingerprint: false,
        advice: "stdin EOF ends the transport but the running handler keeps the process alive; on EOF, cancel the \
                 running calls and kill their processes",
    },
];

/// `serverInfo` names that identify an SDK's default.
fn from_server_info(info: Option<&Value>) -> Option<&'static str> {
    let name = info?.get("name")?.as_str()?.to_ascii_lowercase();
    if name.contains("fastmcp") || name.contains("mcpserver") { Some(PY) } else { None }
}

/// The runtime the server command starts, from its program's name or, for
/// a script, its `#!` line: `python…` suggests the Python SDK, `node`,
/// `npx`, `bun`, `deno` or `tsx` the TypeScript one. The weakest evidence,
/// used only when no fingerprint and no `serverInfo` tells.
fn from_command(command: &[String]) -> Option<&'static str> {
    let program = command.first()?;
    let shebang = std::fs::read(program)
        .ok()
        .filter(|bytes| bytes.starts_with(b"#!"))
        .map(|bytes| String::from_utf8_lossy(&bytes[..bytes.len().min(128)]).lines().next().unwrap_or("").to_owned());
    let name = program.rsplit('/').next().unwrap_or(program);
    [name, shebang.as_deref().unwrap_or("")].iter().find_map(|text| {
        let text = text.to_ascii_lowercase();
        if text.contains("python") || text.starts_with("uv") {
            Some(PY)
        } else if ["node", "npx", "bun", "deno", "tsx"].iter().any(|r| text.contains(r)) {
            Some(TS)
        } else {
            None
        }
    })
}

/// Adds the hints for every behaviour seen to the report and to the
/// evidence of the check that saw it.
pub(crate) fn apply(report: &mut Report) {
    let seen = |b: &str| report.checks.iter().any(|c| c.behaviours.contains(&b));
    let identified = TABLE
        .iter()
        .find(|row| row.fingerprint && seen(row.behaviour))
        .map(|row| row.sdks[0])
        .or_else(|| from_server_info(report.server_info.as_ref()))
        .or_else(|| from_command(&report.server));
    let mut hints = Vec::new();
    for check in &mut report.checks {
        for behaviour in &check.behaviours {
            let Some(row) = TABLE.iter().find(|r| r.behaviour == *behaviour) else { continue };
            let sdk = match identified {
                Some(sdk) if row.sdks.contains(&sdk) => sdk.to_owned(),
                _ => format!("known in {}", row.sdks.join(" and in ")),
            };
            check.evidence.push(format!("hint: {behaviour}: {sdk}: {}", row.advice));
            hints.push(Hint { check: check.name, behaviour: row.behaviour, sdk, advice: row.advice });
        }
    }
    report.hints = hints;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_is_unique_and_names_an_sdk() {
        for (i, row) in TABLE.iter().enumerate() {
            assert!(!row.sdks.is_empty() && !row.advice.is_empty(), "{}", row.behaviour);
            assert!(TABLE[i + 1..].iter().all(|r| r.behaviour != row.behaviour), "{} twice", row.behaviour);
            assert!(!row.fingerprint || row.sdks.len() == 1, "a fingerprint names one SDK: {}", row.behaviour);
        }
        assert_eq!(from_server_info(Some(&serde_json::json!({"name": "FastMCP"}))), Some(PY));
        assert_eq!(from_server_info(Some(&serde_json::json!({"name": "weather"}))), None);
        let command = |args: &[&str]| from_command(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>());
        assert_eq!(command(&["/venv/bin/python3", "server.py"]), Some(PY));
        assert_eq!(command(&["node", "server.mjs"]), Some(TS));
        assert_eq!(command(&["/nonexistent/server"]), None);
        let script = std::env::temp_dir().join(format!("mcp-probe-hint-{}", std::process::id()));
        std::fs::write(&script, "#!/usr/bin/env node\nconsole.log(1)\n").unwrap();
        assert_eq!(command(&[script.to_str().unwrap()]), Some(TS));
        let _ = std::fs::remove_file(&script);
    }
}
