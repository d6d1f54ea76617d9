//! The session's two tasks: the HTTP/2 connection, watched for a stalled
//! stdin, and the stderr drain.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::io::AsyncReadExt;

use super::shared::Shared;
use crate::io::StallClock;

/// Drives the HTTP/2 connection until it ends, recording why; ends it if a
/// write to the child's stdin stays pending for `write_timeout`.
pub(super) async fn drive<C>(connection: C, shared: Weak<Shared>, clock: Arc<StallClock>, write_timeout: Duration)
where
    C: std::future::Future<Output = Result<(), h2::Error>>,
{
    let mut connection = std::pin::pin!(connection);
    let mut tick = tokio::time::interval((write_timeout / 4).max(Duration::from_millis(10)));
    let reason = loop {
        tokio::select! {
            done = &mut connection => break match done {
                Ok(()) => "the HTTP/2 connection closed".to_owned(),
                Err(e) => format!("the HTTP/2 connection failed: {e}"),
            },
            _ = tick.tick() => if clock.stalled_for(write_timeout) {
                break format!("the server stopped reading its stdin (a write pending for {write_timeout:?})");
            },
        }
    };
    if let Some(shared) = shared.upgrade() {
        shared.closed.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(reason);
        shared.ended.send_replace(true);
    }
}

/// Drains the child's stderr to EOF into the bounded tail.
pub(super) async fn drain_stderr(mut stderr: tokio::process::ChildStderr, shared: Weak<Shared>) {
    let mut buf = vec![0u8; 8192];
    loop {
        let n = match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let Some(shared) = shared.upgrade() else { return };
        shared.stderr_bytes.fetch_add(n as u64, Ordering::Relaxed);
        shared.stderr.lock().unwrap_or_else(|e| e.into_inner()).push(&buf[..n]);
    }
}
