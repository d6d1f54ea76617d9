//! Check 2: `initialize` within the limit, a known protocol version,
//! capabilities, `notifications/initialized` accepted, `tools/list`
//! followed through `nextCursor`.

use std::collections::HashSet;

use serde_json::{Value, json};
use tokio::time::Instant;

use crate::progress::Progress;
use crate::report::{CheckResult, Verdict};
use crate::target::Target;

/// Protocol versions the MCP specification has published.
pub(crate) const KNOWN_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

pub(super) async fn run(target: &Target, progress: &Progress, result: &mut CheckResult) {
    let args = &target.args;
    let (session, mut inbound) = match target.spawn(target.session_config()) {
        Ok(spawned) => spawned,
        Err(e) => return result.note(Verdict::Fail, format!("the server could not be started: {e}")),
    };
    progress.step("initialize");
    let started = Instant::now();
    let init = match target.initialize(&session).await {
        Ok(init) => init,
        Err(e) => {
            result.note(Verdict::Fail, e);
            return target.account("handshake", &session, &mut inbound);
        }
    };
    let took = started.elapsed();
    result.measure("initialize_ms", took.as_millis() as u64);
    result.info(format!(
        "initialize answered in {} (limit {})",
        crate::fmt_duration(took),
        crate::fmt_duration(args.init_timeout)
    ));

    let version = init.get("protocolVersion").and_then(Value::as_str).unwrap_or("");
    result.measure("protocol_version", version);
    if version == args.protocol_version {
        result.info(format!("protocolVersion {version:?}, as offered"));
    } else if KNOWN_VERSIONS.contains(&version) {
        result.info(format!(
            "protocolVersion {version:?} (offered {:?}; a server may pick another it supports)",
            args.protocol_version
        ));
    } else {
        result.note(
            Verdict::Warn,
            format!("protocolVersion {version:?} is not a published MCP version ({})", KNOWN_VERSIONS.join(", ")),
        );
    }
    let capabilities = init.get("capabilities");
    match capabilities.and_then(Value::as_object) {
        Some(caps) => {
            let names: Vec<&str> = caps.keys().map(String::as_str).collect();
            result.measure("capabilities", json!(names));
            result.info(format!("capabilities: {}", if names.is_empty() { "none".into() } else { names.join(", ") }));
        }
        None => result.note(Verdict::Fail, "the initialize result has no capabilities object"),
    }
    match init.get("serverInfo") {
        Some(info) if info.get("name").is_some_and(Value::is_string) => result.info(format!("serverInfo: {info}")),
        _ => result.note(Verdict::Warn, "the initialize result has no serverInfo with a name"),
    }

    progress.step("ping after notifications/initialized");
    match session.request("ping", &()).await {
        Ok(_) => result.info("notifications/initialized accepted: the next request (ping) was answered"),
        Err(e) => result.note(Verdict::Fail, format!("after notifications/initialized, ping failed: {e}")),
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
        let page: Value = match session.request("tools/list", &params).await {
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
            Some(_) if pages >= args.max_pages => {
                result.note(
                    Verdict::Warn,
                    format!("tools/list still had a nextCursor after --max-pages {}", args.max_pages),
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
