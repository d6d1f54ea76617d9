//! A slow consumer cannot throttle the pipe: the application takes 50 ms per
//! message while the fixture streams 10,000 notifications. The reader keeps
//! draining, the child is never blocked for long, and the counters show what
//! the overload policy did.

mod host_support;

use std::time::{Duration, Instant};

use host_support::{config, drain_now, payload, ping_within_a_second, spawn, tool, watchdog};
use mcp_framer::host::{Inbound, Overload, OverloadPolicy, ReaderConfig, SessionConfig};
use serde_json::json;

const MESSAGES: u64 = 10_000;
const PER_MESSAGE: Duration = Duration::from_millis(50);

/// "stdout backpressure observed: write blocked for N ms, ..." -> N.
fn blocked_ms(line: &str) -> u64 {
    let rest = line.strip_prefix("stdout backpressure observed: write blocked for ").expect("report format");
    rest.split_whitespace().next().and_then(|n| n.parse().ok()).expect("milliseconds")
}

#[tokio::test]
async fn a_slow_consumer_gets_what_fits_and_the_policy_drops_the_rest_without_blocking_the_child() {
    watchdog("slow consumer", async {
        let max_wait = Duration::from_millis(5);
        let config = SessionConfig {
            reader: ReaderConfig {
                overload: Overload { policy: OverloadPolicy::Drop, max_wait },
                ..ReaderConfig::default()
            },
            inbound_capacity: 64,
            ..config()
        };
        let (session, mut inbound) = spawn(config);

        // The application: 50 ms per message.
        let consumer = tokio::spawn(async move {
            let mut consumed = 0u64;
            while let Some(item) = inbound.recv().await {
                assert!(matches!(item, Inbound::Notification(_)), "{item:?}");
                consumed += 1;
                tokio::time::sleep(PER_MESSAGE).await;
                if consumed == 20 {
                    break;
                }
            }
            (consumed, inbound)
        });

        let started = Instant::now();
        let arguments = json!({"count": MESSAGES, "frame_bytes": 256, "kind": "message"});
        let response = session.request("tools/call", &tool("stream", arguments)).await.expect("stream");
        let elapsed = started.elapsed();
        let stream = payload(&response)["structuredContent"].clone();
        assert_eq!(stream["notifications"], MESSAGES);

        // A consumer-paced reader would need ~10,000 x 50 ms = 500 s; the
        // child streamed everything in a fraction of that.
        assert!(elapsed < Duration::from_secs(5), "the stream took {elapsed:?}");
        ping_within_a_second(&session).await;

        let (consumed, mut inbound) = consumer.await.expect("consumer");
        let queued = drain_now(&mut inbound).len() as u64;
        let metrics = session.metrics();
        // Every notification was either delivered or dropped, and counted.
        assert_eq!(metrics.delivered, consumed + queued);
        assert_eq!(metrics.delivered + metrics.overload_dropped, MESSAGES);
        assert_eq!(metrics.overload_rejected, 0);
        assert!(metrics.overload_dropped > MESSAGES / 2, "most were dropped: {metrics:?}");
        assert!(metrics.overload_episodes >= 1);
        // The reader waited at most `max_wait` per overload episode (plus
        // timer and scheduling slack), not 50 ms per message.
        let slack = Duration::from_millis(10);
        let bound = (max_wait + slack) * (metrics.overload_episodes as u32 + 1) * 2;
        assert!(metrics.dispatch_wait <= bound, "waited {:?} > {bound:?}: {metrics:?}", metrics.dispatch_wait);

        // The child was never held up for long: the fixture reports every
        // write(2) blocked for more than 50 ms. The policy allows 5 ms per
        // episode; 500 ms leaves room for a loaded CI machine and is still
        // far below what one consumer step (50 ms) times the queue would cost.
        let report = session.shutdown().await;
        let worst = report
            .stderr_tail
            .lines()
            .filter(|l| l.starts_with("stdout backpressure observed"))
            .map(blocked_ms)
            .max()
            .unwrap_or(0);
        assert!(worst < 500, "a write was blocked for {worst} ms");
        eprintln!(
            "slow consumer: stream {elapsed:?}, child blocked_write_us {}, worst reported block {worst} ms, \
             delivered {}, dropped {}, episodes {}, reader waited {:?}",
            stream["blocked_write_us"],
            metrics.delivered,
            metrics.overload_dropped,
            metrics.overload_episodes,
            metrics.dispatch_wait
        );
    })
    .await;
}
