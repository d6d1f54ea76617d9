//! The `stdio-v2` checks on concurrent streams: head-of-line (a request
//! answered while a large result streams) and cancellation (a reset stream
//! stops the call and the processes it started).

use std::time::Duration;

use mcp_framer_stdio_v2::host::{self, Item};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::{host_config, open, open_with};
use crate::duration::{fmt_duration, within};
use crate::processes::{keep_alive, list, snapshot, started_since};
use crate::progress::Progress;
use crate::report::{CheckResult, Verdict};
use crate::target::Target;

/// The probe's HTTP/2 window for the large result's stream: a result
/// larger than this cannot have been sent whole while the probe read none
/// of it.
const HOL_WINDOW: u32 = 64 << 10;

/// How often the server's process group is looked at.
const POLL: Duration = Duration::from_millis(50);

/// Check 5 (needs `--large`): the large call's answer starts, the probe
/// reads none of its body (the stream's window, [`HOL_WINDOW`], fills),
/// and a liveness request is sent: answered within `--ping-timeout` while
/// the result waits, PASS; answered only once the result is read, FAIL
/// (the head-of-line blocking `stdio-v2` exists to remove).
pub(super) async fn head_of_line(target: &Target, progress: &Progress, result: &mut CheckResult) {
    let limits = &target.limits;
    let Some(tool) = &target.options.large else {
        return result.skip("needs a tool with a large result: --large 'NAME {json args}'");
    };
    let config = host_config(target).with_stream_window(HOL_WINDOW);
    let session = match open_with(target, config).await {
        Ok(session) => session,
        Err(e) => return result.note(Verdict::Fail, format!("no session to test: {e}")),
    };
    progress.step(format!("calling {}", tool.name));
    let started = Instant::now();
    let params = session.tool_params(tool, None);
    let mut call = match tokio::time::timeout(limits.step_timeout, session.client.call("tools/call", &params)).await {
        Ok(Ok(call)) => call,
        Ok(Err(e)) => return result.note(Verdict::Fail, format!("tools/call {tool} could not be sent: {e}")),
        Err(_) => return result.note(Verdict::Fail, format!("tools/call {tool} could not be sent in time")),
    };
    match tokio::time::timeout(limits.step_timeout, call.started()).await {
        Ok(Ok(status)) => result.info(format!(
            "the large result started (HTTP {status}) {} after the call",
            fmt_duration(started.elapsed())
        )),
        Ok(Err(e)) => return result.note(Verdict::Fail, format!("tools/call {tool} failed: {e}")),
        Err(_) => {
            return result.note(
                Verdict::Fail,
                format!("the answer to tools/call {tool} did not start {}", within(limits.step_timeout)),
            );
        }
    }
    result.measure("head_ms", started.elapsed().as_millis() as u64);

    progress.step("a request while the large result waits");
    let (method, params) = session.liveness();
    let asked = Instant::now();
    let mut ping = Box::pin(session.client.request(method, &params));
    let before = tokio::time::timeout(limits.ping_timeout, &mut ping).await;
    let answered_first = match before {
        Ok(Ok(_) | Err(host::Error::Rpc { .. })) => {
            let took = asked.elapsed();
            result.measure("ping_ms", took.as_millis() as u64);
            Some(took)
        }
        Ok(Err(e)) => {
            result.note(Verdict::Fail, format!("{method} failed while the large result waited: {e}"));
            drop(ping);
            return session.end(target).await;
        }
        Err(_) => None,
    };

    progress.step("reading the large result");
    let read = tokio::time::timeout(limits.step_timeout, call.response()).await;
    let bytes = match read {
        Ok(Ok(response)) => response.message.len(),
        Ok(Err(e)) => {
            result.note(Verdict::Fail, format!("the large result failed: {e}"));
            drop(ping);
            return session.end(target).await;
        }
        Err(_) => {
            result.note(Verdict::Fail, format!("the large result did not end {}", within(limits.step_timeout)));
            drop(ping);
            return session.end(target).await;
        }
    };
    result.measure("large_bytes", bytes as u64);
    match answered_first {
        Some(_) if bytes <= HOL_WINDOW as usize => result.note(
            Verdict::Warn,
            format!(
                "could not tell: the result of {bytes} bytes fits in the stream's window ({HOL_WINDOW} bytes), so it \
                 may have been sent whole before the request; use a larger --large"
            ),
        ),
        Some(took) => result.info(format!(
            "{method} was answered in {} while the large result ({bytes} bytes) waited unread past the stream's \
             window of {HOL_WINDOW} bytes: no head-of-line blocking",
            fmt_duration(took)
        )),
        None => {
            let after = tokio::time::timeout(limits.step_timeout, &mut ping).await;
            let what = match after {
                Ok(Ok(_) | Err(host::Error::Rpc { .. })) => {
                    format!(
                        "answered only after the large result ({bytes} bytes) was read, {} after it was sent",
                        fmt_duration(asked.elapsed())
                    )
                }
                Ok(Err(e)) => format!("not answered, even after the large result was read: {e}"),
                Err(_) => "not answered, even after the large result was read".to_owned(),
            };
            result.behaviour("head-of-line-blocking");
            result.note(
                Verdict::Fail,
                format!(
                    "{method} got nothing {} while the large result waited: {what} (head-of-line blocking)",
                    within(limits.ping_timeout)
                ),
            );
        }
    }
    drop(ping);
    session.end(target).await;
}

const TOKEN: &str = "mcp-probe-cancel";

/// Check 6 (needs `--slow`): once the slow call shows it runs (progress on
/// its stream, or a process it started), its stream is reset
/// (`Call::cancel`); a second request must be answered within
/// `--step-timeout`, and no process the call started may outlive
/// `--cancel-grace` plus `--cancel-watch`.
pub(super) async fn cancellation(target: &Target, progress: &Progress, result: &mut CheckResult) {
    let limits = &target.limits;
    let Some(tool) = &target.options.slow else {
        return result.skip("needs a tool that runs for a while: --slow 'NAME {json args}'");
    };
    let session = match open(target).await {
        Ok(session) => session,
        Err(e) => return result.note(Verdict::Fail, format!("no session to test: {e}")),
    };
    let pgid = session.pid;
    let before = snapshot(pgid);
    progress.step(format!("calling {}", tool.name));
    let params = session.tool_params(tool, Some(TOKEN));
    let started = Instant::now();
    let call = match tokio::time::timeout(limits.step_timeout, session.client.call("tools/call", &params)).await {
        Ok(Ok(call)) => call,
        Ok(Err(e)) => return result.note(Verdict::Fail, format!("tools/call {tool} could not be sent: {e}")),
        Err(_) => return result.note(Verdict::Fail, format!("tools/call {tool} could not be sent in time")),
    };
    // The call is driven in a task of its own (its items come on a
    // channel) until the cancel, which resets its stream.
    let (items, mut received) = mpsc::unbounded_channel::<Result<Item, String>>();
    let (cancel, cancelled) = oneshot::channel::<()>();
    let driver = tokio::spawn(async move {
        let mut call = call;
        let reset = {
            let drive = async {
                while let Some(item) = call.next().await {
                    let last = !matches!(item, Ok(Item::Notification(_)));
                    let _ = items.send(item.map_err(|e| e.to_string()));
                    if last {
                        break;
                    }
                }
            };
            tokio::select! {
                _ = drive => false,
                _ = cancelled => true,
            }
        };
        if reset {
            call.cancel();
        }
        reset
    });
    let deadline = started + limits.slow_start;
    let (mut first_progress, mut children, mut finished) = (None, Vec::new(), None);
    while Instant::now() < deadline && first_progress.is_none() && children.is_empty() && finished.is_none() {
        let wake = (Instant::now() + POLL).min(deadline);
        match tokio::time::timeout_at(wake, received.recv()).await {
            Ok(Some(Ok(Item::Notification(_)))) => first_progress = Some(started.elapsed()),
            Ok(Some(Ok(Item::Response(_)))) => finished = Some("returned a result".to_owned()),
            Ok(Some(Err(e))) => finished = Some(format!("failed: {e}")),
            Ok(None) => finished = Some("ended".to_owned()),
            Err(_) => {}
        }
        children = started_since(pgid, &before);
    }
    if let Some(what) = finished {
        result.note(
            Verdict::Warn,
            format!(
                "could not tell: the slow tool {what} {} after the call, before it could be cancelled; use longer \
                 --slow arguments",
                fmt_duration(started.elapsed())
            ),
        );
        return session.end(target).await;
    }
    // A process may start a little after the first progress.
    tokio::time::sleep(POLL).await;
    children = started_since(pgid, &before);
    match first_progress {
        Some(after) => result.info(format!("first progress notification {} after the call", fmt_duration(after))),
        None => result.info(format!(
            "no progress notification {} (progress is optional; judged by the other signals)",
            within(started.elapsed())
        )),
    }
    if crate::processes::SCANS_PROCESSES {
        if children.is_empty() {
            result.info("the call started no process under the server (none to watch)");
        } else {
            result.info(format!("the call started {} process(es): {}", children.len(), list(&children)));
        }
    }
    result.measure("children_started", children.len() as u64);

    progress.step("resetting the call's stream");
    let cancelled_at = Instant::now();
    let _ = cancel.send(());
    match tokio::time::timeout(limits.step_timeout, driver).await {
        Ok(Ok(true)) => result.info("the call's stream was reset (RST_STREAM CANCEL)"),
        Ok(Ok(false)) => result.info("the call ended just before its stream could be reset"),
        Ok(Err(e)) => result.note(Verdict::Warn, format!("the call's task failed: {e}")),
        Err(_) => result.note(Verdict::Fail, "the call's stream could not be reset within --step-timeout"),
    }

    progress.step("the next request after the reset, watching the call's processes");
    let next = async { session.ping(limits.step_timeout).await.map(|_| cancelled_at.elapsed()) };
    let watch_end = cancelled_at + limits.cancel_grace + limits.cancel_watch;
    let watch = async {
        let mut survivors = children.clone();
        let mut gone_after = None;
        while !survivors.is_empty() && Instant::now() < watch_end {
            tokio::time::sleep(POLL).await;
            keep_alive(&mut survivors);
            if survivors.is_empty() {
                gone_after = Some(cancelled_at.elapsed());
            }
        }
        (survivors, gone_after)
    };
    let (next, (survivors, gone_after)) = tokio::join!(next, watch);
    match &next {
        Ok(after) => result.info(format!(
            "the next request ({}) after the reset was answered {} after it",
            session.liveness().0,
            fmt_duration(*after)
        )),
        Err(e) => result.note(Verdict::Fail, format!("the next request after the reset failed: {e}")),
    }
    result.measure("ping_after_cancel_ms", next.as_ref().ok().map(|d| d.as_millis() as u64));
    result.measure("first_progress_ms", first_progress.map(|d| d.as_millis() as u64));
    result.measure(
        "children_survived",
        json!(survivors.iter().map(|p| json!({"pid": p.pid, "cmdline": p.cmdline})).collect::<Vec<Value>>()),
    );
    if !crate::processes::SCANS_PROCESSES {
        result.info(crate::processes::NO_SCAN);
    } else if !children.is_empty() {
        match (survivors.is_empty(), gone_after) {
            (true, Some(after)) => {
                result.info(format!("every process the call started was gone {} after the reset", fmt_duration(after)))
            }
            (true, None) => result.info("every process the call started was gone at the reset"),
            (false, _) => {
                result.behaviour("cancel-leaves-child");
                result.note(
                    Verdict::Fail,
                    format!(
                        "{} process(es) the cancelled call started still alive {} after the reset: {}",
                        survivors.len(),
                        fmt_duration(cancelled_at.elapsed()),
                        list(&survivors)
                    ),
                );
            }
        }
    }
    session.end(target).await;
}
