//! An oversize response fails its request promptly when its id can be told
//! from the head or tail the reader kept of it (id first, as Python servers
//! write it, or last, as JavaScript servers do); when it cannot, the request
//! keeps its deadline and its error says an oversize frame was skipped while
//! it waited. And the metrics agree while a skip is in progress.

#![cfg(unix)]

mod host_support;

use std::time::{Duration, Instant};

use host_support::{PATIENCE, config, eventually, second_request, spawn, tool, watchdog};
use mcp_framer::{Config, OversizePolicy};
use mcp_framer_jsonrpc::Id;
use mcp_framer_stdio::host::{Inbound, RequestError, SessionConfig, SkippedFrame};
use serde_json::json;

const LIMIT: usize = 64 * 1024;
const FRAME: usize = 200 * 1024;

fn limited() -> SessionConfig {
    config().with_framer(Config::DEFAULT.with_max_frame(LIMIT).with_oversize(OversizePolicy::Skip))
}

fn sized(id_at: &str) -> serde_json::Value {
    tool("sized", json!({"frame_bytes": FRAME, "id_at": id_at}))
}

#[tokio::test]
async fn an_oversize_response_with_its_id_first_or_last_fails_its_request_at_once() {
    watchdog("oversize, id recovered", async {
        let (session, mut inbound) = spawn(limited());
        for (n, id_at) in ["start", "end"].into_iter().enumerate() {
            let started = Instant::now();
            let request = session.start("tools/call", &sized(id_at)).await.expect("sent");
            let id = request.id();
            let outcome = request.response().await;
            assert!(
                matches!(&outcome, Err(RequestError::Oversize { len, max, .. }) if *len == FRAME as u64 && *max == LIMIT as u64),
                "{id_at}: {outcome:?}"
            );
            // Promptly: not at the deadline (`PATIENCE`), a minute away.
            assert!(started.elapsed() < PATIENCE / 3, "{id_at}: {:?}", started.elapsed());
            let message = outcome.unwrap_err().to_string();
            assert!(message.contains(&FRAME.to_string()) && message.contains(&LIMIT.to_string()), "{message}");
            let Some(Inbound::Skipped(SkippedFrame::Oversize { len, id: recovered, .. })) = inbound.recv().await else {
                panic!("reported")
            };
            assert_eq!((len, recovered), (FRAME as u64, Some(Id::Number(id))));
            let m = session.metrics();
            assert_eq!((m.oversize_responses, m.oversize_frames), (n as u64 + 1, n as u64 + 1), "{m:?}");
            assert_eq!((m.cancellations_sent, m.timeouts), (0, 0), "answered: nothing to cancel");
        }
        second_request(&session).await;
        session.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn an_oversize_response_whose_id_cannot_be_told_leaves_the_request_to_its_deadline() {
    watchdog("oversize, id in the middle", async {
        let timeout = Duration::from_millis(800);
        let (session, mut inbound) = spawn(limited());
        let started = Instant::now();
        let request = session.start("tools/call", &sized("middle")).await.expect("sent");
        let Some(Inbound::Skipped(SkippedFrame::Oversize { len, id, .. })) = inbound.recv().await else {
            panic!("reported")
        };
        assert_eq!((len, id), (FRAME as u64, None));
        // The deadline, still from the send, set once the skip is seen (so a
        // loaded machine cannot let it pass before the skip): it fails the
        // request at `timeout`, or at once if that has passed already.
        let outcome = request.with_timeout(timeout).response().await;
        assert!(started.elapsed() >= timeout);
        assert!(
            matches!(&outcome, Err(RequestError::TimedOut { oversize_skipped: 1, cancellation_sent: true, .. })),
            "{outcome:?}"
        );
        let message = outcome.unwrap_err().to_string();
        assert!(message.contains("oversize frame(s) were skipped while it waited"), "{message}");
        assert_eq!(session.metrics().oversize_responses, 0);
        session.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn an_oversize_frame_counts_once_discarded_and_is_in_progress_until_then() {
    watchdog("metrics mid-skip", async {
        let (session, _inbound) = spawn(limited());
        // 256 KiB written in 16 pieces, 250 ms apart: the skip is in progress
        // and over the limit from the fifth piece (1 s in) to the last
        // (3.75 s), time enough to see it on a loaded machine.
        let slow = tool("slow_stream", json!({"chunks": 16, "interval_ms": 250, "chunk_bytes": 16 * 1024}));
        let request = session.start("tools/call", &slow).await.expect("sent");
        eventually(&session, "a skip in progress", |s| s.metrics().oversize_in_progress > LIMIT as u64).await;
        let mid = session.metrics();
        assert_eq!((mid.oversize_frames, mid.discarded_bytes), (0, 0), "counted only once discarded: {mid:?}");
        assert!(mid.oversize_in_progress <= mid.stdout_bytes, "{mid:?}");
        let outcome = request.response().await;
        let Err(RequestError::Oversize { len, .. }) = outcome else { panic!("{outcome:?}") };
        let done = session.metrics();
        assert_eq!((done.oversize_frames, done.discarded_bytes, done.oversize_in_progress), (1, len, 0), "{done:?}");
        assert!(len > mid.oversize_in_progress);
        session.shutdown().await;
    })
    .await;
}
