//! A server that stops reading its stdin ends the session: the write that
//! timed out fails, every pending request fails at once with a reason that
//! says the server stopped reading its stdin, `closed()` says so, and the
//! child is stopped by the shutdown sequence (here it ignores its closed
//! stdin, so SIGTERM ends it; on Windows, terminating its job).

mod host_support;

use std::time::{Duration, Instant};

use host_support::{eventually, spawn_busy_reader, tool, watchdog};
use mcp_framer_stdio::host::{CloseReason, RequestError, WriteError};
use serde_json::json;

#[tokio::test]
async fn a_write_stall_ends_the_session_and_stops_the_child() {
    watchdog("write stall", async {
        let write_timeout = Duration::from_millis(500);
        // Inline dispatch: while `slow_stream` runs (20 s), stdin is not read.
        let (session, _inbound, stream) = spawn_busy_reader(write_timeout).await;
        // One MiB to a server that reads nothing.
        let started = Instant::now();
        let big = tool("echo", json!({"text": "x".repeat(1 << 20)}));
        let stalled = session.request("tools/call", &big).await;
        // On unix the pipe takes 64 KiB of it. On Windows tokio hands a
        // child's stdin writes to its blocking pool, which takes the whole
        // frame at once: the bytes count as handed over, and the write
        // itself is what never completes.
        assert!(
            matches!(&stalled, Err(RequestError::Write(WriteError::TimedOut { written, len, .. }))
                if written < len || (cfg!(windows) && written == len)),
            "{stalled:?}"
        );
        // The session is closed now, and says why.
        let closed = session.closed().expect("closed at once");
        assert!(matches!(closed.reason(), CloseReason::StdinStalled(WriteError::TimedOut { .. })), "{closed}");
        assert!(closed.to_string().contains("stopped reading its stdin"), "{closed}");
        // The pending request failed at once, long before its stream ends
        // (20 s) or its deadline: the stall plus a scheduling delay, never
        // half the stream.
        let outcome = stream.response().await;
        assert!(
            matches!(&outcome, Err(RequestError::Closed(c)) if matches!(c.reason(), CloseReason::StdinStalled(_))),
            "{outcome:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
        // Every later request fails at once with the same reason.
        let later = session.request("ping", &()).await;
        assert!(matches!(&later, Err(RequestError::Closed(c)) if matches!(c.reason(), CloseReason::StdinStalled(_))));
        // The shutdown sequence stops the child: stdin closed (ignored, 500 ms),
        // then SIGTERM (on Windows the job terminated).
        eventually(&session, "the child was stopped", |s| s.metrics().exit_status.is_some()).await;
        let status = session.metrics().exit_status.expect("reaped");
        assert!(mcp_framer_e2e::support::terminated(&status), "{status:?}");
        let report = session.shutdown().await;
        assert!(report.exit_status.is_some());
    })
    .await;
}
