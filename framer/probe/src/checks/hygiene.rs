//! Check 1: nothing but JSON-RPC on stdout, from the first byte.

use serde_json::Value;
use tokio::time::Instant;

use crate::progress::Progress;
use crate::raw::{RawConn, RawEvent};
use crate::report::{CheckResult, Verdict};
use crate::target::Target;

pub(super) async fn run(target: &Target, progress: &Progress, result: &mut CheckResult) {
    let limits = &target.limits;
    let mut conn = match target.spawn_raw() {
        Ok(conn) => conn,
        Err(e) => return result.note(Verdict::Fail, format!("the server could not be started: {e}")),
    };
    let (method, params) = target.opening_request();
    progress.step(format!("{method}, counting stdout bytes before its answer"));
    let started = Instant::now();
    let Ok(id) = conn.send_request(method, &params, limits.init_timeout).await else {
        return result.note(Verdict::Fail, format!("{method} could not be written: the server is not reading stdin"));
    };
    let deadline = started + limits.init_timeout;
    let (mut lines, mut bytes, mut first, mut messages) = (0u64, 0u64, None, 0u64);
    let mut answered = false;
    while let Some(event) = conn.next_event(deadline).await {
        match event {
            RawEvent::Message(m) if m.answers(id) => {
                answered = true;
                break;
            }
            RawEvent::Message(_) => messages += 1,
            RawEvent::NotJsonRpc { len, excerpt } => {
                lines += 1;
                bytes += len as u64 + 1;
                first.get_or_insert(excerpt);
            }
            RawEvent::Oversize { len } => {
                lines += 1;
                bytes += len + 1;
            }
            RawEvent::Cut { len } => {
                lines += 1;
                bytes += len;
            }
            RawEvent::Eof => break,
        }
    }
    result.measure("pre_initialize_bytes", bytes);
    result.measure("pre_initialize_lines", lines);
    if !answered {
        result.note(
            Verdict::Warn,
            format!("{method} was not answered (see the handshake check): only the output before it counted"),
        );
    }
    match first {
        Some(excerpt) => result.note(
            Verdict::Fail,
            format!("{bytes} bytes in {lines} non-JSON-RPC line(s) on stdout before {method} was answered; first: {excerpt:?}"),
        ),
        None => result.info(format!("0 bytes of non-JSON-RPC output on stdout before {method} was answered")),
    }
    if messages > 0 {
        result.info(format!("{messages} JSON-RPC message(s) arrived before the {method} response"));
    }
    if answered {
        progress.step("tools/list, then the next request");
        if method == "initialize" {
            let _ = conn
                .write(&RawConn::notification_frame("notifications/initialized", &Value::Null), limits.step_timeout)
                .await;
        }
        if let Ok(id) = conn.send_request("tools/list", &target.params(Value::Null), limits.step_timeout).await {
            let _ = conn.response(id, limits.step_timeout).await;
        }
        let _ = conn.ping(limits.step_timeout).await;
    }
    // The pre-initialize lines were tallied above; the rest go to the
    // probe-wide tally like every other check's.
    let before = conn.log.iter().position(|e| matches!(e, RawEvent::Message(m) if m.answers(id)));
    if let Some(before) = before {
        conn.log.drain(..=before);
    }
    target.account_raw("stdout-hygiene", &conn);
}

/// Adds what every other check saw on stdout and stderr.
pub(super) fn finish(target: &Target, result: &mut CheckResult) {
    let noise = target.noise.lock().unwrap_or_else(|e| e.into_inner());
    result.measure("non_jsonrpc_lines", noise.lines);
    result.measure("non_jsonrpc_bytes", noise.bytes);
    result.measure("stderr_bytes", noise.stderr_bytes);
    if noise.lines == 0 {
        result.info("no line that is not JSON-RPC on stdout during the whole probe");
    } else {
        result.note(
            Verdict::Fail,
            format!("{} line(s), {} bytes, on stdout were not JSON-RPC during the probe", noise.lines, noise.bytes),
        );
        for excerpt in &noise.excerpts {
            result.info(format!("  {excerpt}"));
        }
    }
    result.info(format!(
        "{} bytes on stderr, all servers together (stderr is free-form; reported only)",
        noise.stderr_bytes
    ));
}
