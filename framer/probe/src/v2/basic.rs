//! The `stdio-v2` checks on one request at a time: selection, handshake,
//! bad input, stderr and shutdown.

use std::time::Duration;

use mcp_framer_jsonrpc::protocol::{Era, NEWEST, VERSIONS};
use mcp_framer_jsonrpc::{HEADER_MISMATCH, Id, METHOD_NOT_FOUND, PARSE_ERROR};
use mcp_framer_stdio_v2::host::{self, Item};
use mcp_framer_stdio_v2::wire;
use serde_json::json;
use tokio::time::Instant;

use super::{V2Session, connect, host_config, list_all, open};
use crate::duration::{fmt_duration, no_answer, not_answered, within};
use crate::error::ProbeError;
use crate::processes::{alive, group_members, server_processes};
use crate::progress::Progress;
use crate::report::{CheckResult, Verdict};
use crate::target::Target;

/// Check 1: the HTTP/2 handshake completes (the server speaks `stdio-v2`);
/// a newline server FAILs with what it wrote. Also the pre-flight: the
/// server's tools are listed and `--large`, `--slow` and `--noisy` checked
/// against them.
pub(super) async fn selection(
    target: &Target,
    progress: &Progress,
    result: &mut CheckResult,
) -> Result<(), ProbeError> {
    progress.step("the HTTP/2 preface");
    let started = Instant::now();
    let client = match connect(target, host_config(target)).await {
        Ok(client) => client,
        Err(e) => {
            result.measure("selection_ms", started.elapsed().as_millis() as u64);
            match &e {
                host::Error::Selection { preview } => {
                    result.measure("first_bytes", preview.as_str());
                    result.behaviour("speaks-stdio-not-v2");
                    result.note(
                        Verdict::Fail,
                        format!(
                            "the server speaks `stdio` (newline-delimited JSON-RPC), not `stdio-v2`: it answered the \
                             HTTP/2 preface {} with {preview:?}",
                            within(started.elapsed())
                        ),
                    );
                    result.info(format!("the client's error: {e}"));
                }
                _ => result.note(Verdict::Fail, format!("no stdio-v2 session: {e}")),
            }
            return Ok(());
        }
    };
    let took = started.elapsed();
    result.measure("selection_ms", took.as_millis() as u64);
    result.info(format!(
        "the HTTP/2 handshake (prior knowledge) completed in {}: the server speaks stdio-v2",
        fmt_duration(took)
    ));
    let pid = client.pid().await;
    let opened = match super::handshake(target, &client).await {
        Ok(opened) => opened,
        Err(e) => {
            // The handshake check says what went wrong; the tools cannot be listed.
            result.info(format!("the MCP handshake failed (see the handshake check): {e}"));
            drop(client);
            return Ok(());
        }
    };
    super::record(target, &opened);
    let session = V2Session { client, pid, opened };
    if session.opened.result.get("capabilities").and_then(|c| c.get("tools")).is_some() {
        progress.step("tools/list");
        if let Ok((tools, true)) = list_all(target, &session).await {
            let valid = crate::tools::validate(target, &tools);
            session.end(target).await;
            return valid;
        }
    }
    session.end(target).await;
    Ok(())
}

/// Check 2: `server/discover` or `initialize` as a POST; what came back.
pub(super) async fn handshake(target: &Target, progress: &Progress, result: &mut CheckResult) {
    let limits = &target.limits;
    progress.step("server/discover, then initialize");
    let session = match open(target).await {
        Ok(session) => session,
        Err(e) => return result.note(Verdict::Fail, e),
    };
    let opened = &session.opened;
    let method = opened.method();
    result.measure("era", opened.era.as_str());
    result.measure("handshake_ms", opened.took.as_millis() as u64);
    result.measure("offered_versions", json!(opened.offered));
    match (&opened.era, &opened.fallback) {
        (Era::Modern, _) => result.info(format!(
            "modern era: server/discover answered (200) over its own stream, supportedVersions {}",
            opened.offered.join(", ")
        )),
        (Era::Legacy, Some(why)) => result.info(format!("legacy era: {why}; initialize followed")),
        (Era::Legacy, None) => result.info("legacy era (--era legacy): initialize only"),
    }
    result.info(format!(
        "the handshake was answered in {} (limit {} per request)",
        fmt_duration(opened.took),
        fmt_duration(limits.init_timeout)
    ));
    let version = opened.version.as_str();
    result.measure("protocol_version", version);
    let asked = match opened.era {
        Era::Modern => NEWEST,
        Era::Legacy => target.options.protocol_version.as_str(),
    };
    if !VERSIONS.contains(&version) {
        result.note(Verdict::Warn, format!("protocolVersion {version:?} is not a published MCP version"));
    } else {
        result.info(format!("protocolVersion {version:?} (asked {asked:?})"));
    }
    let capabilities = opened.result.get("capabilities");
    crate::checks::handshake::judge_identity(result, method, capabilities, opened.server_info());
    progress.step("the next request");
    let (next, _) = session.liveness();
    match session.ping(limits.step_timeout).await {
        Ok(took) => result.info(format!("the next request ({next}) was answered in {}", fmt_duration(took))),
        Err(e) => result.note(Verdict::Fail, format!("after the handshake, {e}")),
    }
    if opened.result.get("capabilities").and_then(|c| c.get("tools")).is_some() {
        progress.step("tools/list");
        match list_all(target, &session).await {
            Ok((tools, complete)) => {
                let names: Vec<&str> = tools.iter().filter_map(|t| t.get("name")?.as_str()).collect();
                result.measure("tools", json!(names));
                result.info(format!(
                    "tools/list: {} tool(s){}",
                    names.len(),
                    if complete { "" } else { " (the list did not end within --max-pages)" }
                ));
            }
            Err(e) => result.note(Verdict::Fail, e),
        }
    }
    session.end(target).await;
}

/// One bad POST: what came back within the wait.
enum Answer {
    Error { status: u16, code: i64, message: String },
    Other(String),
}

async fn send_bad(
    session: &V2Session,
    id: i64,
    method: &str,
    headers: Option<http::HeaderMap>,
    body: Vec<u8>,
    wait: Duration,
) -> Answer {
    let client = &session.client;
    let asked = async {
        let call = match headers {
            Some(headers) => client.call_with_headers(Id::Number(id), method, headers, body).await?,
            None => client.call_raw(Id::Number(id), method, body).await?,
        };
        call.response().await
    };
    match tokio::time::timeout(wait, asked).await {
        Ok(Err(host::Error::Rpc { status, error })) => {
            Answer::Error { status, code: error.code, message: error.message }
        }
        Ok(Ok(response)) => {
            Answer::Other(format!("a success (HTTP {}): {}", response.status, excerpt(&response.message)))
        }
        Ok(Err(e)) => Answer::Other(e.to_string()),
        Err(_) => Answer::Other(no_answer(wait)),
    }
}

fn excerpt(bytes: &[u8]) -> String {
    mcp_framer_stdio::Preview::new(bytes, mcp_framer_stdio::Keep::Head(160)).to_text()
}

/// Judges one bad POST against the status and code expected, then whether
/// the connection still answers (returned).
#[allow(clippy::too_many_arguments)]
async fn judge(
    session: &V2Session,
    result: &mut CheckResult,
    label: &str,
    answer: Answer,
    status: u16,
    code: i64,
    ping: Duration,
    key: &str,
) -> bool {
    match answer {
        Answer::Error { status: got, code: got_code, message } if got == status && got_code == code => {
            result.measure(key, json!({"status": got, "code": got_code}));
            result.info(format!("{label}: HTTP {got} with {got_code} ({message:?})"));
        }
        Answer::Error { status: got, code: got_code, message } => {
            result.measure(key, json!({"status": got, "code": got_code}));
            result.note(
                Verdict::Warn,
                format!("{label}: HTTP {got} with {got_code} ({message:?}); expected HTTP {status} with {code}"),
            );
        }
        Answer::Other(what) => {
            result.measure(key, what.as_str());
            result.note(Verdict::Fail, format!("{label}: expected HTTP {status} with {code}, got {what}"));
        }
    }
    match session.ping(ping).await {
        Ok(took) => {
            let method = session.liveness().0;
            result.info(format!("the connection survived: {method} answered {} later", fmt_duration(took)));
            true
        }
        Err(e) => {
            result.note(Verdict::Fail, format!("after {label}, the connection is dead: {e}"));
            false
        }
    }
}

/// Check 3: a malformed JSON body gets 400 with -32700, a header that
/// contradicts the body 400 with -32020, an unknown method 404 with
/// -32601; after each the connection still answers.
pub(super) async fn bad_input(target: &Target, progress: &Progress, result: &mut CheckResult) {
    let limits = &target.limits;
    let session = match open(target).await {
        Ok(session) => session,
        Err(e) => return result.note(Verdict::Fail, format!("no session to test: {e}")),
    };
    let (method, params) = session.liveness();
    let wait = limits.step_timeout;

    progress.step("a body that is not JSON");
    let cut = format!(r#"{{"jsonrpc":"2.0","id":901,"method":"{method}""#).into_bytes();
    let answer = send_bad(&session, 901, method, None, cut, wait).await;
    let label = "a malformed JSON body";
    if !judge(&session, result, label, answer, 400, PARSE_ERROR, limits.ping_timeout, "malformed_body").await {
        result.info("the other cases were not sent (no connection left)");
        return session.end(target).await;
    }

    progress.step("a header that contradicts the body");
    let body = json!({"jsonrpc": "2.0", "id": 902, "method": method, "params": params});
    let body = serde_json::to_vec(&body).unwrap_or_default();
    let other = if method == "ping" { "tools/list" } else { "ping" };
    let version = session.opened.version.clone();
    let version = if VERSIONS.contains(&version.as_str()) { version } else { NEWEST.to_owned() };
    let mut headers = wire::request_headers(other, &wire::Params::default(), &version);
    headers.insert(http::header::CONTENT_LENGTH, body.len().into());
    let answer = match send_bad(&session, 902, method, Some(headers), body, wait).await {
        // Served is a FAIL, not a WARN: a server that executes one method
        // while an intermediary routes, authorizes or logs by another is
        // what the header rule exists to prevent.
        Answer::Other(what) if what.starts_with("a success") => Answer::Other(format!(
            "{what}: the server executed {method} while the header named {other}, so anything that routes or \
             authorizes by the header was misled"
        )),
        answer => answer,
    };
    let label = format!("a body for {method} under {}: {other}", wire::METHOD);
    if !judge(&session, result, &label, answer, 400, HEADER_MISMATCH, limits.ping_timeout, "header_mismatch").await {
        result.info("the last case was not sent (no connection left)");
        return session.end(target).await;
    }

    progress.step("an unknown method");
    let empty = session.params(json!({}));
    let unknown = session.client.request("mcp-probe/no-such-method", &empty);
    let answer = match tokio::time::timeout(wait, unknown).await {
        Ok(Err(host::Error::Rpc { status, error })) => {
            Answer::Error { status, code: error.code, message: error.message }
        }
        Ok(Ok(response)) => Answer::Other(format!("a success: {}", excerpt(&response.message))),
        Ok(Err(e)) => Answer::Other(e.to_string()),
        Err(_) => Answer::Other(no_answer(wait)),
    };
    judge(&session, result, "an unknown method", answer, 404, METHOD_NOT_FOUND, limits.ping_timeout, "unknown_method")
        .await;
    session.end(target).await;
}

/// Check 7: the server's stderr is drained into a bounded tail while the
/// session goes on; with `--noisy`, the tool's stderr (more than a pipe
/// holds, if it writes that much) is drained, its call answered, and the
/// tail stays within its bound.
pub(super) async fn stderr(target: &Target, progress: &Progress, result: &mut CheckResult) {
    let limits = &target.limits;
    let session = match open(target).await {
        Ok(session) => session,
        Err(e) => return result.note(Verdict::Fail, format!("no session to test: {e}")),
    };
    let before = session.client.counters().stderr_bytes;
    match &target.options.noisy {
        Some(tool) => {
            progress.step(format!("calling {}", tool.name));
            let params = session.tool_params(tool, None);
            let call = session.client.request("tools/call", &params);
            match tokio::time::timeout(limits.step_timeout, call).await {
                Ok(Ok(_) | Err(host::Error::Rpc { .. })) => result.info(format!("tools/call {tool} was answered")),
                Ok(Err(e)) => result.note(Verdict::Fail, format!("tools/call {tool} failed: {e}")),
                Err(_) => {
                    result.note(Verdict::Fail, not_answered(format_args!("tools/call {tool}"), limits.step_timeout))
                }
            }
        }
        None => result.info("no --noisy tool: judged on what the server writes to stderr on its own"),
    }
    // The drain runs beside the session: let it catch up with what the
    // call wrote before it answered.
    let deadline = Instant::now() + Duration::from_millis(500);
    let mut seen = session.client.counters().stderr_bytes;
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let now = session.client.counters().stderr_bytes;
        if now == seen && now > before {
            break;
        }
        seen = now;
    }
    let total = session.client.counters().stderr_bytes;
    let tail = session.client.stderr_tail();
    result.measure("stderr_bytes", total);
    result.measure("tail_bytes", tail.len() as u64);
    result.info(format!(
        "{total} bytes read from stderr; {} kept (the tail, at most {})",
        tail.len(),
        super::STDERR_TAIL
    ));
    if let Some(last) = tail.lines().rev().find(|l| !l.trim().is_empty()) {
        let last: String = last.chars().take(limits.excerpt).collect();
        result.info(format!("its last line: {last:?}"));
    }
    // The tail may carry one marker line saying what was dropped.
    if tail.len() > super::STDERR_TAIL + 256 {
        result.note(Verdict::Fail, format!("the stderr tail holds {} bytes, over its bound", tail.len()));
    }
    if target.options.noisy.is_some() && total == before {
        result.note(Verdict::Warn, "the --noisy tool wrote nothing to stderr: nothing was drained");
    }
    progress.step("the next request");
    match session.ping(limits.step_timeout).await {
        Ok(_) => result.info(format!("the session went on: {} answered", session.liveness().0)),
        Err(e) => result.note(Verdict::Fail, format!("after the stderr output, {e}")),
    }
    session.end(target).await;
}

/// Closes the connection (`GOAWAY`, then stdin) and judges how the server
/// ended: on its own within `--exit-timeout`, or only by a signal.
/// `before`: the server's processes before the close (taken before a busy
/// call's stream is reset).
async fn close_and_judge(
    target: &Target,
    session: V2Session,
    before: Vec<crate::processes::Leftover>,
    busy: Option<&str>,
    result: &mut CheckResult,
) {
    let limits = &target.limits;
    let during = busy.map_or(String::new(), |what| format!(" while {what} ran"));
    let key = if busy.is_some() { "busy_" } else { "" };
    let Some(pid) = session.pid else {
        return result.note(Verdict::Warn, "the server's pid was not known: its exit was not watched");
    };
    let stderr = session.client.counters().stderr_bytes;
    target.noise.lock().unwrap_or_else(|e| e.into_inner()).stderr_bytes += stderr;
    let started = Instant::now();
    // The leader is watched from outside: the client's shutdown sends
    // SIGTERM, then SIGKILL, after its graces.
    let most = limits.exit_timeout * 3 + limits.term_timeout + Duration::from_secs(1);
    let watch = async {
        while started.elapsed() < most {
            if crate::processes::SCANS_PROCESSES && !group_members(&[pid]).iter().any(|p| p.pid == pid) {
                return Some(started.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        None
    };
    let (ended, gone) = tokio::join!(tokio::time::timeout(most, session.client.shutdown()), watch);
    let took = started.elapsed();
    let Ok(ended) = ended else {
        return result.note(Verdict::Fail, format!("the shutdown did not finish {}{during}", within(most)));
    };
    let status = ended.exit_status;
    let described = status.map_or("not reaped".to_owned(), |s| s.to_string());
    let gone_after = gone.unwrap_or(took);
    result.measure(&format!("{key}exit_ms"), gone_after.as_millis() as u64);
    result.measure(&format!("{key}exit_status"), described.as_str());
    let signal = status.and_then(signal_of);
    match (status.map(|s| s.code().is_some()), signal) {
        (Some(true), _) if gone_after <= limits.exit_timeout => result
            .info(format!("exited {} after the connection was closed{during} ({described})", fmt_duration(gone_after))),
        (Some(true), _) => result.note(
            Verdict::Warn,
            format!(
                "exited on its own{during}, but {} after the connection was closed (--exit-timeout {})",
                fmt_duration(gone_after),
                fmt_duration(limits.exit_timeout)
            ),
        ),
        (_, Some(15)) => result.note(
            Verdict::Fail,
            format!(
                "still running {} after the connection was closed{during}; SIGTERM ended it ({described})",
                fmt_duration(limits.exit_timeout)
            ),
        ),
        (_, Some(9)) => result.note(
            Verdict::Fail,
            format!("still running after the connection was closed and after SIGTERM{during}; SIGKILL ended it"),
        ),
        _ => result.note(Verdict::Fail, format!("ended{during} as {described} after {}", fmt_duration(took))),
    }
    if !crate::processes::SCANS_PROCESSES {
        return result.info(crate::processes::NO_SCAN);
    }
    // Its group, and every process it had before the close wherever it is
    // now (a child leading a group of its own is not in the server's group,
    // and the client's kill of that group does not reach it).
    let deadline = Instant::now() + Duration::from_millis(500);
    let left = loop {
        let mut left = group_members(&[pid]);
        let orphans: Vec<_> =
            before.iter().filter(|p| alive(p.pid) && !left.iter().any(|l| l.pid == p.pid)).cloned().collect();
        left.extend(orphans);
        if left.is_empty() || Instant::now() >= deadline {
            break left;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    result.measure(&format!("{key}left_in_group"), left.len() as u64);
    result.measure(&format!("{key}children_before_close"), before.len() as u64);
    if left.is_empty() {
        result.info(format!(
            "no process of its tree was left{during} ({} process(es) under it before the close)",
            before.len()
        ));
    } else {
        let list: Vec<String> = left.iter().map(ToString::to_string).collect();
        result.note(Verdict::Fail, format!("processes of its tree still alive{during}: {}", list.join(", ")));
    }
}

#[cfg(unix)]
fn signal_of(status: std::process::ExitStatus) -> Option<i32> {
    std::os::unix::process::ExitStatusExt::signal(&status)
}

#[cfg(not(unix))]
fn signal_of(_status: std::process::ExitStatus) -> Option<i32> {
    None
}

/// Check 8: closing the connection ends the server and its tree within the
/// deadline; with `--slow`, also while the slow tool runs.
pub(super) async fn shutdown(target: &Target, progress: &Progress, result: &mut CheckResult) {
    let limits = &target.limits;
    let session = match open(target).await {
        Ok(session) => session,
        Err(e) => return result.note(Verdict::Fail, format!("no session to test: {e}")),
    };
    if let Err(e) = session.ping(limits.step_timeout).await {
        result.note(Verdict::Warn, format!("the server did not answer before the shutdown: {e}"));
    }
    progress.step("closing the connection");
    let before = server_processes(session.pid);
    close_and_judge(target, session, before, None, result).await;

    let Some(tool) = &target.options.slow else {
        return result.info("idle shutdown only: --slow adds a shutdown with a call in flight");
    };
    progress.step(format!("closing the connection while {} runs", tool.name));
    let session = match open(target).await {
        Ok(session) => session,
        Err(e) => return result.note(Verdict::Fail, format!("no second session to test: {e}")),
    };
    let params = session.tool_params(tool, Some("mcp-probe-shutdown"));
    let sent = tokio::time::timeout(limits.step_timeout, session.client.call("tools/call", &params)).await;
    let mut call = match sent {
        Ok(Ok(call)) => call,
        Ok(Err(e)) => return result.note(Verdict::Fail, format!("tools/call {tool} could not be sent: {e}")),
        Err(_) => return result.note(Verdict::Fail, format!("tools/call {tool} could not be sent in time")),
    };
    // Let it get going: its first progress, or a quarter of --slow-start.
    let first = tokio::time::timeout(limits.slow_start / 4, call.next()).await;
    if let Ok(Some(Ok(Item::Response(_)))) = first {
        result.note(
            Verdict::Warn,
            format!("the slow tool {tool} finished before the close: use longer --slow arguments"),
        );
    }
    // A process it starts may come a little after its first progress.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let before = server_processes(session.pid);
    // The client closes the connection once no stream is open: the call's
    // stream is reset (the server cancels it) and the connection closed
    // right after, while the tool still runs.
    drop(call);
    result.info("the call's stream was reset at the close (the client closes the connection once no stream is open)");
    let what = format!("tools/call {}", tool.name);
    close_and_judge(target, session, before, Some(&what), result).await;
}
