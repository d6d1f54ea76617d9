//! A slow consumer cannot pace the pipe. The application takes at least 2 ms
//! per message while the fixture streams 1,200 notifications of 1 KiB, far
//! more than the pipe (64 KiB) and the inbound queue (256) hold.
//!
//! The same stream runs twice, one session after the other, with the same
//! consumer: once with the host's **defaults** (the reader never waits for
//! room: a notification that does not fit is dropped at once), and once with
//! a session that opts in to waiting longer than the whole run, which makes
//! its reader consumer-paced (coupled). The child reports how long its
//! `write(2)` calls were blocked; the test compares the two in the same run,
//! with a wide margin, and checks the counts. The consumer's cost is large
//! next to the reader's own (a debug build's, on a loaded machine), so the
//! two differ by far more than the margin.

#![cfg(unix)]

mod host_support;

use std::time::Duration;

use host_support::{config, payload, second_request, spawn, tool, watchdog};
use mcp_framer_stdio::host::{ITEM_OVERHEAD, Inbound, MetricsSnapshot, Overload, OverloadPolicy, SessionConfig};
use serde_json::json;

const MESSAGES: u64 = 1_200;
/// The inbound queue: far fewer messages than the stream.
const QUEUE: usize = 256;
/// The queue's byte bound: room for `QUEUE` of the stream's messages.
const QUEUE_BYTES: usize = QUEUE * (FRAME_BYTES as usize + ITEM_OVERHEAD);
const FRAME_BYTES: u64 = 1024;
/// The consumer's cost per message (a tokio sleep: at least this long).
const PER_MESSAGE: Duration = Duration::from_millis(2);

/// What one stream cost the child, and what the host did with it.
struct Run {
    /// The child's time blocked in `write(2)` during the stream.
    blocked: Duration,
    /// The session's counters once the stream's response arrived (every
    /// notification comes before it on stdout, so they are all counted).
    metrics: MetricsSnapshot,
}

/// Streams `MESSAGES` notifications through a session with `config` to a
/// consumer that spends `PER_MESSAGE` on each.
async fn stream_to_a_slow_consumer(config: SessionConfig) -> Run {
    let (session, mut inbound) = spawn(config);
    let consumer = tokio::spawn(async move {
        while let Some(item) = inbound.recv().await {
            assert!(matches!(item, Inbound::Notification(_)), "{item:?}");
            tokio::time::sleep(PER_MESSAGE).await;
        }
    });

    let arguments = json!({"count": MESSAGES, "frame_bytes": FRAME_BYTES, "kind": "message"});
    let response = session.request("tools/call", &tool("stream", arguments)).await.expect("stream");
    let stream = payload(&response)["structuredContent"].clone();
    assert_eq!(stream["notifications"], MESSAGES);
    let blocked = Duration::from_micros(stream["blocked_write_us"].as_u64().expect("blocked_write_us"));
    // The server still reads its stdin.
    second_request(&session).await;
    let metrics = session.metrics();

    session.shutdown().await;
    consumer.abort();
    Run { blocked, metrics }
}

#[tokio::test]
async fn with_the_defaults_a_slow_consumer_does_not_hold_the_child_in_write() {
    watchdog("slow consumer", async {
        // The default overload policy, with a queue smaller than the stream
        // (the default bound, 64 MiB, would hold all of it).
        let small = Overload::default().with_max_queued_bytes(QUEUE_BYTES);
        let defaults = config().with_overload(small);
        assert_eq!(defaults.overload, Overload::default().with_max_queued_bytes(QUEUE_BYTES));
        assert_eq!(defaults.overload.max_wait, Duration::ZERO);
        let decoupled = stream_to_a_slow_consumer(defaults).await;

        // The reference: a reader allowed to wait for the consumer longer
        // than the whole run is paced by it, as a coupled reader is.
        let paced =
            config().with_overload(small.with_policy(OverloadPolicy::Drop).with_max_wait(Duration::from_secs(60)));
        let coupled = stream_to_a_slow_consumer(paced).await;

        eprintln!(
            "slow consumer: child blocked in write {:?} with the defaults ({:?}), {:?} consumer-paced ({:?})",
            decoupled.blocked, decoupled.metrics, coupled.blocked, coupled.metrics
        );

        // Counts. Defaults: every notification delivered or dropped, at
        // least one dropped, and the reader never waited at all.
        let d = decoupled.metrics;
        assert_eq!(d.delivered + d.overload_dropped, MESSAGES, "{d:?}");
        assert!(d.overload_dropped > 0 && d.overload_episodes >= 1, "{d:?}");
        assert_eq!((d.overload_rejected, d.dispatch_wait), (0, Duration::ZERO), "{d:?}");
        // Consumer-paced: nothing dropped, the reader waited.
        let c = coupled.metrics;
        assert_eq!((c.delivered, c.overload_dropped), (MESSAGES, 0), "{c:?}");
        assert!(c.dispatch_wait > Duration::ZERO, "{c:?}");

        // The child's own report. Paced, it waits for the consumer to make
        // room for everything the pipe and the queue cannot hold (at least
        // ~900 messages x 2 ms); under half of that is a floor that any
        // machine meets. With the defaults it is blocked a small fraction of
        // that: what the reader itself takes, a few tens of milliseconds.
        assert!(coupled.blocked > Duration::from_millis(800), "the reference was not paced: {:?}", coupled.blocked);
        assert!(
            decoupled.blocked * 4 < coupled.blocked,
            "with the defaults the child was blocked {:?}, consumer-paced {:?}",
            decoupled.blocked,
            coupled.blocked
        );
    })
    .await;
}
