//! A request's deadline runs from when it is written, whether or not anyone
//! awaits it: at the deadline it fails, `notifications/cancelled` reaches
//! the server and its pending entry is freed. The fixture's `silent` tool
//! never answers.

mod host_support;

use std::future::Future;
use std::task::Poll;
use std::time::{Duration, Instant};

use host_support::{config, eventually, reports, spawn, tool, watchdog};
use mcp_framer_e2e::hostile::report as hostile;
use mcp_framer_stdio::host::{PendingRequest, Received, RequestError};
use serde_json::json;

/// The requests' deadline: long enough that a loaded machine's delays (in
/// sending five requests, in waking their requesters) stay well under it,
/// so the bounds below tell one deadline from several.
const TIMEOUT: Duration = Duration::from_secs(1);

/// The outcome of `request` if it is ready the first time it is polled
/// ("at once", whatever the machine's load); `None` if it would wait.
async fn settled(request: PendingRequest) -> Option<Result<Received, RequestError>> {
    let mut outcome = std::pin::pin!(request.response());
    match std::future::poll_fn(|cx| Poll::Ready(outcome.as_mut().poll(cx))).await {
        Poll::Ready(outcome) => Some(outcome),
        Poll::Pending => None,
    }
}

fn silent() -> serde_json::Value {
    tool("silent", json!({}))
}

fn timed_out(outcome: &Result<mcp_framer_stdio::host::Received, RequestError>) -> bool {
    matches!(outcome, Err(RequestError::TimedOut { cancellation_sent: true, oversize_skipped: 0, after, .. }) if *after == TIMEOUT)
}

#[tokio::test]
async fn requests_kept_but_never_awaited_still_time_out_and_cancel() {
    watchdog("requests never awaited", async {
        let (session, _inbound) = spawn(config().with_request_timeout(TIMEOUT));
        let started = Instant::now();
        let mut kept = Vec::new();
        for _ in 0..5 {
            kept.push(session.start("tools/call", &silent()).await.expect("sent"));
        }
        // Nobody awaits them: each fails at its deadline, cancels, and leaves
        // the pending table.
        eventually(&session, "five timeouts", |s| s.metrics().timeouts == 5).await;
        let failed_after = started.elapsed();
        assert!(failed_after >= TIMEOUT, "{failed_after:?}");
        assert_eq!(session.metrics().cancellations_sent, 5);
        eventually(&session, "the server got five cancellations", |s| reports(s, hostile::CANCEL).len() == 5).await;
        let ids: Vec<i64> = kept.iter().map(|r| r.id()).collect();
        let cancelled: Vec<i64> =
            reports(&session, hostile::CANCEL).iter().map(|r| r["id"].as_i64().expect("an id")).collect();
        assert_eq!(cancelled, ids);
        // Awaited afterwards, each returns its failure at once: ready when
        // first polled.
        for request in kept {
            let outcome = settled(request).await.expect("the failure was ready, not waited for");
            assert!(timed_out(&outcome), "{outcome:?}");
        }
        // Freed: cancelling them now finds nothing.
        for id in ids {
            assert!(!session.cancel(id, "too late").await);
        }
        session.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn requests_awaited_one_after_another_all_fail_at_their_own_deadline() {
    watchdog("sequential awaits", async {
        let (session, _inbound) = spawn(config().with_request_timeout(TIMEOUT));
        let started = Instant::now();
        let mut requests = Vec::new();
        for _ in 0..5 {
            requests.push(session.start("tools/call", &silent()).await.expect("sent"));
        }
        for request in requests {
            let outcome = request.response().await;
            assert!(timed_out(&outcome), "{outcome:?}");
        }
        // Five deadlines that run together end together: about one timeout
        // in all, not five (the bound leaves two timeouts for a loaded
        // machine's delays).
        let all = started.elapsed();
        assert!(all >= TIMEOUT && all < TIMEOUT * 3, "{all:?}");

        // A response awaited after its deadline has passed fails at once
        // (ready when first polled), not one timeout later; the failure is
        // `with_timeout`'s shorter deadline, not the session's.
        let late = session.start("tools/call", &silent()).await.expect("sent");
        let shorter = late.with_timeout(Duration::from_millis(200));
        eventually(&session, "the sixth timeout", |s| s.metrics().timeouts == 6).await;
        let outcome = settled(shorter).await.expect("the failure was ready, not waited for");
        assert!(
            matches!(outcome, Err(RequestError::TimedOut { cancellation_sent: true, after, .. }) if after == Duration::from_millis(200)),
            "{outcome:?}"
        );
        session.shutdown().await;
    })
    .await;
}
