//! What the client, its calls and its tasks share: the counters, the
//! child, its stderr tail and why the session ended.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use h2::Reason;
use mcp_framer_stdio::Previewer;
use mcp_framer_stdio::tree::{self, Killer};
use tokio::sync::watch;

use super::error::{Closed, Error};

/// The host's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct HostCounters {
    /// Requests sent.
    pub requests: u64,
    /// Notifications sent.
    pub notifications: u64,
    /// Responses received whole (results and JSON-RPC errors).
    pub responses: u64,
    /// Notifications received on event streams (progress, listen).
    pub events: u64,
    /// Responses or events over the limit (their streams reset).
    pub oversize_responses: u64,
    /// Body bytes received (DATA, every stream), counted as they arrive.
    pub body_bytes: u64,
    /// Calls cancelled by a stream reset (explicitly, by drop or by the
    /// request timeout).
    pub cancelled: u64,
    /// Tools removed from a `tools/list` result for an invalid
    /// `x-mcp-header` annotation.
    pub tools_rejected: u64,
    /// Bytes of stderr read.
    pub stderr_bytes: u64,
}

#[derive(Debug, Default)]
pub(super) struct Counters {
    pub(super) requests: AtomicU64,
    pub(super) notifications: AtomicU64,
    pub(super) responses: AtomicU64,
    pub(super) events: AtomicU64,
    pub(super) oversize_responses: AtomicU64,
    pub(super) body_bytes: AtomicU64,
    pub(super) cancelled: AtomicU64,
    pub(super) tools_rejected: AtomicU64,
}

pub(super) fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

pub(super) struct Shared {
    pub(super) counters: Counters,
    pub(super) stderr: Mutex<Previewer>,
    pub(super) stderr_bytes: AtomicU64,
    pub(super) child: tokio::sync::Mutex<tree::Child>,
    pub(super) killer: Killer,
    pub(super) closed: Mutex<Option<String>>,
    /// Set once the connection has ended and `closed` says why.
    pub(super) ended: watch::Sender<bool>,
}

impl Shared {
    pub(super) fn stderr_tail(&self) -> String {
        self.stderr.lock().unwrap_or_else(|e| e.into_inner()).preview().to_text()
    }

    /// The session's end as an error (waits briefly for the exit status).
    pub(super) async fn closed(&self, fallback: &str) -> Error {
        let reason =
            self.closed.lock().unwrap_or_else(|e| e.into_inner()).clone().unwrap_or_else(|| fallback.to_owned());
        let exit_status = {
            let mut child = self.child.lock().await;
            match tokio::time::timeout(Duration::from_millis(200), child.wait()).await {
                Ok(Ok(status)) => Some(status),
                _ => None,
            }
        };
        Error::Closed(Arc::new(Closed { reason, exit_status, stderr_tail: self.stderr_tail() }))
    }
}

impl Shared {
    /// The error for a stream that failed with `error`: the server's reset
    /// of this stream alone ([`Error::Reset`]), or the end of the session
    /// (waiting a moment for the connection task to say why).
    pub(super) async fn stream_failed(&self, error: h2::Error, what: &str) -> Error {
        if error.is_reset() && !*self.ended.borrow() {
            let reason = error.reason().unwrap_or(Reason::CANCEL);
            return Error::Reset { reason: format!("{reason:?}: {reason}") };
        }
        let mut ended = self.ended.subscribe();
        let _ = tokio::time::timeout(Duration::from_secs(1), ended.wait_for(|ended| *ended)).await;
        self.closed(&format!("{what}: {error}")).await
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let _ = self.killer.kill();
    }
}

impl Shared {
    pub(super) async fn startup_error(&self, reason: String) -> Error {
        let exit_status = {
            let mut child = self.child.lock().await;
            match tokio::time::timeout(Duration::from_millis(500), child.wait()).await {
                Ok(Ok(status)) => Some(status),
                _ => None,
            }
        };
        let _ = self.killer.kill();
        // Let the stderr drain catch up with what the child wrote before it went.
        tokio::time::sleep(Duration::from_millis(50)).await;
        Error::Startup { reason, exit_status, stderr_tail: self.stderr_tail() }
    }
}

pub(super) fn counters_of(shared: &Shared) -> HostCounters {
    let c = &shared.counters;
    let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
    HostCounters {
        requests: get(&c.requests),
        notifications: get(&c.notifications),
        responses: get(&c.responses),
        events: get(&c.events),
        oversize_responses: get(&c.oversize_responses),
        body_bytes: get(&c.body_bytes),
        cancelled: get(&c.cancelled),
        tools_rejected: get(&c.tools_rejected),
        stderr_bytes: shared.stderr_bytes.load(Ordering::Relaxed),
    }
}
