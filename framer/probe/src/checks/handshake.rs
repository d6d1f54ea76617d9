//! Check 2: the handshake in the server's era — `server/discover` first
//! (2026-07-28), `initialize` on any error or timeout — within the limit,
//! a known protocol version, capabilities, the next request answered, and
//! `tools/list` followed through `nextCursor`.

use std::collections::HashSet;

use mcp_framer_jsonrpc::protocol::{NEWEST, VERSIONS};
use mcp_framer_stdio::host::Era;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::duration::fmt_duration;
use crate::progress::Progress;
use crate::report::{CheckResult, Verdict};
use crate::target::{Started, Target};

/// The handshake result's `capabilities` (an object, FAIL otherwise) and
/// `serverInfo` (with a name, WARN otherwise): for either transport.
pub(crate) fn judge_identity(
    result: &mut CheckResult,
    method: &str,
    capabilities: Option<&Value>,
    server_info: Option<&Value>,
) {
    match capabilities.and_then(Value::as_object) {
        Some(caps) => {
            let names: Vec<&str> = caps.keys().map(String::as_str).collect();
            result.measure("capabilities", json!(names));
            result.info(format!("capabilities: {}", if names.is_empty() { "none".into() } else { names.join(", ") }));
        }
        None => result.note(Verdict::Fail, format!("the {method} result has no capabilities object")),
    }
    match server_info {
        Some(info) if info.get("name").is_some_and(Value::is_string) => result.info(format!("serverInfo: {info}")),
        _ => result.note(Verdict::Warn, format!("the {method} result has no serverInfo with a name")),
    }
}

pub(super) async fn run(target: &Target, progress: &Progress, result: &mut CheckResult) {
    let limits = &target.limits;
    progress.step("server/discover, then initialize");
    let started = Instant::now();
    let Started { session, mut inbound, opened } = match target.start(target.session_config()).await {
        Ok(started) => started,
        Err(e) => return result.note(Verdict::Fail, e),
    };
    let took = started.elapsed();
    let method = match opened.era {
        Era::Modern => "server/discover",
        Era::Legacy => "initialize",
    };
    result.measure("era", opened.era.as_str());
    result.measure("handshake_ms", took.as_millis() as u64);
    result.measure("offered_versions", json!(opened.offered_versions));
    result.measure("handshake_frame_bytes", opened.response.frame().len() as u64);
    match (&opened.era, &opened.fallback_reason) {
        (Era::Modern, _) => result.info(format!(
            "modern era: server/discover answered, supportedVersions {}",
            opened.offered_versions.join(", ")
        )),
        (Era::Legacy, Some(why)) => {
            result.info(format!("legacy era: {why}; initialize followed, as the 2026-07-28 revision says"))
        }
        (Era::Legacy, None) => result.info("legacy era (--era legacy): initialize only"),
    }
    result.info(format!(
        "the handshake was answered in {} (limit {} per request)",
        fmt_duration(took),
        fmt_duration(limits.init_timeout)
    ));

    let init = &opened.result;
    let version = opened.protocol_version.as_str();
    result.measure("protocol_version", version);
    let offered = match opened.era {
        Era::Modern => NEWEST,
        Era::Legacy => target.options.protocol_version.as_str(),
    };
    if !VERSIONS.contains(&version) {
        result.note(
            Verdict::Warn,
            format!("protocolVersion {version:?} is not a published MCP version ({})", VERSIONS.join(", ")),
        );
    } else if version == offered {
        result.info(format!("protocolVersion {version:?}, as asked"));
    } else {
        result.info(format!("protocolVersion {version:?} (asked {offered:?}; a server may pick another it supports)"));
    }
    let capabilities = init.get("capabilities");
    judge_identity(result, method, capabilities, opened.server_info());
    if opened.era == Era::Modern && init.get("resultType").and_then(Value::as_str) != Some("complete") {
        result.note(Verdict::Warn, "the DiscoverResult has no resultType \"complete\" (required from 2026-07-28)");
    }

    progress.step("the next request");
    let (next, _) = target.liveness();
    match target.ping(&session, limits.step_timeout).await {
        Ok(_) => result.info(format!("the next request ({next}) was answered")),
        Err(e) => result.note(Verdict::Fail, format!("after the handshake, {next} failed: {e}")),
    }

    if capabilities.and_then(|c| c.get("tools")).is_none() {
        result.info("no tools capability: tools/list not checked");
        return target.account("handshake", &session, &mut inbound);
    }
    progress.step("tools/list");
    let mut cursor: Option<String> = None;
    let mut seen_cursors = HashSet::new();
    let (mut pages, mut tools) = (0u32, Vec::<String>::new());
    loop {
        let params = match &cursor {
            Some(cursor) => json!({ "cursor": cursor }),
            None => Value::Null,
        };
        let page: Value = match session.request("tools/list", &target.params(params)).await {
            Ok(response) => response.deserialize_payload().unwrap_or(Value::Null),
            Err(e) => {
                result.note(Verdict::Fail, format!("tools/list page {} failed: {e}", pages + 1));
                break;
            }
        };
        pages += 1;
        match page.get("tools").and_then(Value::as_array) {
            Some(list) => tools.extend(list.iter().filter_map(|t| t.get("name")?.as_str().map(str::to_owned))),
            None => {
                result.note(Verdict::Fail, format!("tools/list page {pages} has no tools array"));
                break;
            }
        }
        match page.get("nextCursor").and_then(Value::as_str) {
            None => break,
            Some(next) if !seen_cursors.insert(next.to_owned()) => {
                result.note(
                    Verdict::Fail,
                    format!("tools/list returned cursor {next:?} twice: a host following it loops forever"),
                );
                break;
            }
            Some(_) if pages >= limits.max_pages => {
                result.note(
                    Verdict::Warn,
                    format!("tools/list still had a nextCursor after --max-pages {}", limits.max_pages),
                );
                break;
            }
            Some(next) => cursor = Some(next.to_owned()),
        }
    }
    result.measure("tools_list_pages", pages);
    result.measure("tools", json!(tools));
    let shown: Vec<&str> = tools.iter().take(12).map(String::as_str).collect();
    result.info(format!(
        "tools/list: {} tool(s) in {pages} page(s): {}{}",
        tools.len(),
        shown.join(", "),
        if tools.len() > shown.len() { ", ..." } else { "" }
    ));
    target.account("handshake", &session, &mut inbound);
}
