//! Check 11: how much the server writes on stderr for the handshake and
//! for each request. The probe drains stderr, so it never gets stuck
//! itself; but a host that pipes stderr and never reads it blocks the
//! server once a pipe's worth is written (64 KiB on Linux), and some block
//! sooner. One request writing more than [`PER_REQUEST`], or the handshake
//! (start-up included) more than [`HANDSHAKE`], is a WARN that names the
//! hosts that would deadlock.
//!
//! Bytes are counted as the drain reads them; a request's share is what
//! arrives between writing it and its answer, and until stderr has been
//! quiet for [`QUIET`] (at most [`SETTLE`] after the answer).

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use crate::progress::Progress;
use crate::raw::RawConn;
use crate::report::{CheckResult, Verdict};
use crate::target::Target;

/// One request's stderr over this is a WARN: a pipe's capacity on Linux.
pub(crate) const PER_REQUEST: u64 = 64 * 1024;
/// The handshake's stderr (start-up included) over this is a WARN.
pub(crate) const HANDSHAKE: u64 = 4 * 1024;
/// Stderr quiet for this long ends a request's share.
const QUIET: Duration = Duration::from_millis(100);
/// The most a request's share is waited for after its answer.
const SETTLE: Duration = Duration::from_secs(1);

/// The hosts known to block on unread stderr, with the evidence.
pub(crate) const HOSTS: &str = "hosts that pipe stderr and never read it deadlock: mcp-go's client \
     (mark3labs/mcp-go #956: blocked at about 64 KB of stderr; PR #963 drains it), the TypeScript SDK v2 \
     client (a piped stderr is left unread), and a Python host that pipes stderr unread \
     (activeing123/mcptoon #19: one server/discover wrote 6 KB of warnings, then deadlock)";

/// Waits until stderr has been quiet for [`QUIET`], at most [`SETTLE`];
/// returns the bytes counted so far.
async fn settled(conn: &RawConn) -> u64 {
    let count = || conn.counters().stderr_bytes.load(Ordering::Relaxed);
    let deadline = Instant::now() + SETTLE;
    let mut last = count();
    let mut quiet_since = Instant::now();
    while Instant::now() < deadline {
        tokio::time::sleep(QUIET / 4).await;
        let now = count();
        if now != last {
            (last, quiet_since) = (now, Instant::now());
        } else if quiet_since.elapsed() >= QUIET {
            break;
        }
    }
    last
}

pub(super) async fn run(target: &Target, progress: &Progress, result: &mut CheckResult) {
    let limits = &target.limits;
    progress.step("the handshake");
    let mut conn = match super::raw_session(target, "stderr").await {
        Ok(conn) => conn,
        Err(e) => return result.note(Verdict::Fail, e),
    };
    let handshake = settled(&conn).await;
    let opening = target.opening_request().0;
    result.measure("handshake_stderr_bytes", handshake);
    if handshake > HANDSHAKE {
        result.note(
            Verdict::Warn,
            format!("{handshake} bytes on stderr from start-up to the {opening} answer (over {HANDSHAKE}); {HOSTS}"),
        );
        result.behaviour("stderr-flood");
    } else {
        result.info(format!("{handshake} bytes on stderr from start-up to the {opening} answer (at most {HANDSHAKE})"));
    }
    let mut requests: Vec<(String, Value)> = vec![
        (target.liveness().0.to_owned(), target.liveness().1),
        ("tools/list".to_owned(), target.params(json!({}))),
    ];
    for tool in [&target.options.large, &target.options.noisy].into_iter().flatten() {
        let params = target.params(json!({ "name": tool.name, "arguments": tool.arguments }));
        requests.push((format!("tools/call {}", tool.name), params));
    }
    let mut shares = Vec::new();
    for (what, params) in requests {
        progress.step(what.clone());
        let before = settled(&conn).await;
        let method = what.split(' ').next().unwrap_or(&what);
        let answered = match conn.send_request(method, &params, limits.step_timeout).await {
            Ok(id) => conn.response(id, limits.step_timeout).await.is_some(),
            Err(_) => false,
        };
        let bytes = settled(&conn).await - before;
        shares.push(json!({ "request": what, "bytes": bytes, "answered": answered }));
        if bytes > PER_REQUEST {
            result.note(
                Verdict::Warn,
                format!(
                    "{what} made the server write {bytes} bytes on stderr (over a {PER_REQUEST}-byte pipe); {HOSTS}"
                ),
            );
            result.behaviour("stderr-flood");
        } else {
            result.info(format!("{what}: {bytes} bytes on stderr{}", if answered { "" } else { " (not answered)" }));
        }
    }
    let most = shares.iter().filter_map(|s| s["bytes"].as_u64()).max().unwrap_or(0);
    result.measure("stderr_per_request", shares);
    result.measure("max_request_stderr_bytes", most);
    target.account_raw("stderr", &conn);
}
