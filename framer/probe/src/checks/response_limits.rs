//! Check 6 (needs `--large`): the frame sizes the server sends, what its
//! result says about truncation, and — with the probe's limit set just
//! below that frame — that the host skips it and the server still answers
//! `ping`.

use mcp_framer::{Config, OversizePolicy};
use mcp_framer_stdio::host::{Inbound, RequestError, SkippedFrame};
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::duration::{fmt_duration, within};
use crate::progress::Progress;
use crate::report::{CheckResult, Verdict};
use crate::target::Target;

/// The `tools/call` params for the `--large` or `--slow` tool.
pub(crate) fn call_params(tool: &crate::options::ToolSpec) -> Value {
    json!({ "name": tool.name, "arguments": tool.arguments })
}

/// Paths to members that speak about truncation or paging.
fn truncation_markers(value: &Value, path: &str, found: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, member) in map {
                let here = format!("{path}.{key}");
                let lower = key.to_ascii_lowercase();
                if lower.contains("truncat")
                    || lower == "nextcursor"
                    || lower.starts_with("total")
                    || lower == "hasmore"
                {
                    let shown = match member {
                        Value::String(s) if s.len() > 40 => format!("{:?}...", s.chars().take(40).collect::<String>()),
                        other if other.is_object() || other.is_array() => "{...}".into(),
                        other => other.to_string(),
                    };
                    found.push(format!("{here} = {shown}"));
                }
                truncation_markers(member, &here, found);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate().take(16) {
                truncation_markers(item, &format!("{path}[{i}]"), found);
            }
        }
        _ => {}
    }
}

pub(super) async fn run(target: &Target, progress: &Progress, result: &mut CheckResult) {
    let limits = &target.limits;
    let Some(tool) = &target.options.large else {
        return result.skip("needs a tool with a large result: --large 'NAME {json args}'");
    };
    let crate::target::Started { session, mut inbound, opened } = match target.start(target.session_config()).await {
        Ok(started) => started,
        Err(e) => return result.note(Verdict::Fail, format!("no session to test: {e}")),
    };
    // The second session's limit must leave room for the server's own
    // handshake answer (and the liveness request's, its size in the modern
    // era), or the check would fail itself.
    let floor = opened.response.frame().len();
    progress.step(format!("calling {}", tool.name));
    let started = Instant::now();
    let response = session.request("tools/call", &target.params(call_params(tool))).await;
    // A round trip after it: the reader has counted the result's frame by
    // the time the ping's answer is routed.
    let _ = target.ping(&session, limits.step_timeout).await;
    let metrics = session.metrics();
    target.account("response-limits", &session, &mut inbound);
    drop(session);
    let response = match response {
        Ok(response) => response,
        Err(e) => return result.note(Verdict::Fail, format!("tools/call {tool} failed: {e}")),
    };
    let frame = response.frame().len();
    result.measure("result_frame_bytes", frame as u64);
    result.measure("largest_frame_bytes", metrics.largest_frame);
    result.measure("frames", metrics.frames);
    result.info(format!(
        "tools/call {}: a result frame of {frame} bytes in {}; {} frame(s) in the session, the largest {} bytes",
        tool.name,
        fmt_duration(started.elapsed()),
        metrics.frames,
        metrics.largest_frame
    ));
    let payload: Value = response.deserialize_payload().unwrap_or(Value::Null);
    if payload.get("isError") == Some(&Value::Bool(true)) {
        result.note(Verdict::Warn, "the large tool reported isError: true; its frame is what was measured");
    }
    let mut markers = Vec::new();
    truncation_markers(&payload, "result", &mut markers);
    result.measure("truncation_markers", json!(markers));
    if markers.is_empty() {
        result.info("the result says nothing about truncation or paging (no truncated, nextCursor or total member)");
    } else {
        result.info(format!("truncation and paging members: {}", markers.join(", ")));
    }
    result.measure("handshake_frame_bytes", floor as u64);
    if frame <= floor + 1 {
        return result.note(
            Verdict::Warn,
            format!(
                "the --large result ({frame} bytes) is not larger than the server's own handshake answer ({floor} bytes): a limit below it would cut the handshake; use a larger --large result"
            ),
        );
    }

    let limit = frame - 1;
    progress.step(format!("same call with the probe's limit at {limit} bytes"));
    let framer = Config::DEFAULT.with_max_frame(limit).with_oversize(OversizePolicy::Skip);
    let config = target.session_config().with_framer(framer).with_excerpt(limits.excerpt);
    let crate::target::Started { session, mut inbound, .. } = match target.start(config).await {
        Ok(started) => started,
        Err(e) => return result.note(Verdict::Fail, format!("no second session: {e}")),
    };
    let pending = match session.start("tools/call", &target.params(call_params(tool))).await {
        Ok(pending) => pending,
        Err(e) => return result.note(Verdict::Fail, format!("the second tools/call could not be sent: {e}")),
    };
    let deadline = Instant::now() + limits.step_timeout;
    let mut skipped = None;
    while let Ok(Some(item)) = tokio::time::timeout_at(deadline, inbound.recv()).await {
        if let Inbound::Skipped(SkippedFrame::Oversize { len, .. }) = item {
            skipped = Some(len);
            break;
        }
    }
    // The host recovers the skipped response's id and fails its request at
    // once with the frame's length; anything else is reported as seen.
    match tokio::time::timeout(limits.step_timeout, pending.response()).await {
        Ok(Err(RequestError::Oversize { len, max, .. })) => result
            .info(format!("the probe's host failed the call at once: a {len}-byte response over its {max}-byte limit")),
        Ok(Ok(_)) => result.note(Verdict::Warn, "the call was answered within the lowered limit on the second try"),
        Ok(Err(e)) => result.info(format!("the probe's host ended the call: {e}")),
        Err(_) => result.info("the probe's host could not tell which request the skipped frame answered"),
    };
    match skipped {
        Some(len) => result.info(format!(
            "with the limit at {limit} bytes, the probe's host skipped a frame of {len} bytes and went on"
        )),
        None => result.note(
            Verdict::Warn,
            format!("with the limit at {limit} bytes, no frame over it came {}", within(limits.step_timeout)),
        ),
    }
    let ping = target.ping(&session, limits.ping_timeout).await.map(|_| ());
    let m = target.liveness().0;
    match ping {
        Ok(()) => result.info(format!("the server answered {m} {} after that", within(limits.ping_timeout))),
        Err(e) => {
            let closed = tokio::time::timeout(std::time::Duration::from_millis(500), session.wait_closed()).await;
            let exited = match closed.ok().and_then(|c| c.exit_status()) {
                Some(status) => format!(" (the server had exited: {status})"),
                None => String::new(),
            };
            result.note(Verdict::Fail, format!("after its oversize frame was skipped, {m}: {e}{exited}"))
        }
    }
    target.account("response-limits", &session, &mut inbound);
}
