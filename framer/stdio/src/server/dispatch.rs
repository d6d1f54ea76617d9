//! Dispatch: each `tools/call` runs in its own task, at most
//! `max_concurrent` at once; the others wait in the queue (state
//! [`Queued`](super::State::Queued)), at most `max_queued` of them.
//!
//! Each request gets a supervisor task that waits for a permit, starts the
//! handler in a task of its own (so a panic is caught and the handler can be
//! aborted), turns its outcome into one whole frame, reserves room for it in
//! the writer's queue and only then commits it (state
//! [`Writing`](super::State::Writing)). A request cancelled at any point
//! before that commit sends nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::time::Duration;

use serde_json::value::RawValue;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::cancel::Scope;
use super::report::Counters;
use super::table::Table;
use super::tool::{Call, Handler, RpcError};
use super::writer::{Outbox, encode_error};
use crate::counter::bump;
use mcp_framer_jsonrpc::{EncodeError, Encoder, OwnedId};

/// One `tools/call` to run.
pub(crate) struct Job {
    pub(crate) id: OwnedId,
    pub(crate) tool: Arc<str>,
    pub(crate) handler: Handler,
    pub(crate) arguments: Option<Box<RawValue>>,
    pub(crate) progress_token: Option<Box<RawValue>>,
}

/// Runs requests concurrently within the bound, and tracks their tasks.
pub(crate) struct Dispatcher {
    table: Arc<Table>,
    permits: Arc<Semaphore>,
    queued: Arc<AtomicUsize>,
    max_queued: usize,
    outbox: Outbox,
    counters: Arc<Counters>,
    tasks: JoinSet<()>,
}

impl Dispatcher {
    pub(crate) fn new(
        table: Arc<Table>,
        max_concurrent: usize,
        max_queued: usize,
        outbox: Outbox,
        counters: Arc<Counters>,
    ) -> Dispatcher {
        Dispatcher {
            table,
            permits: Arc::new(Semaphore::new(max_concurrent.max(1))),
            queued: Arc::new(AtomicUsize::new(0)),
            max_queued,
            outbox,
            counters,
            tasks: JoinSet::new(),
        }
    }

    /// Enters `job` in the table and spawns its supervisor. Never waits. The
    /// error is the reply to send instead (duplicate id, overload).
    pub(crate) fn dispatch(&mut self, job: Job) -> Result<(), RpcError> {
        while self.tasks.try_join_next().is_some() {}
        if self.permits.available_permits() == 0 && self.queued.load(SeqCst) >= self.max_queued {
            bump(&self.counters.overloaded);
            return Err(RpcError::new(
                mcp_framer_jsonrpc::OVERLOADED,
                format!("server overloaded: {} requests already queued", self.max_queued),
            ));
        }
        let scope = Scope::new();
        if !self.table.insert(job.id.clone(), scope.clone()) {
            bump(&self.counters.duplicate_ids);
            return Err(RpcError::new(
                mcp_framer_jsonrpc::INVALID_REQUEST,
                format!("request id {} is already in flight", job.id),
            ));
        }
        self.queued.fetch_add(1, SeqCst);
        let supervisor = Supervisor {
            table: Arc::clone(&self.table),
            permits: Arc::clone(&self.permits),
            queued: Arc::clone(&self.queued),
            outbox: self.outbox.clone(),
            counters: Arc::clone(&self.counters),
        };
        self.tasks.spawn(supervisor.run(job, scope));
        Ok(())
    }

    /// Waits up to `grace` for every request to finish; `true` if they did.
    pub(crate) async fn drain(&mut self, grace: Duration) -> bool {
        tokio::time::timeout(grace, async { while self.tasks.join_next().await.is_some() {} }).await.is_ok()
    }

    /// Aborts every supervisor and waits for them to stop.
    pub(crate) async fn abort_all(&mut self) {
        self.tasks.shutdown().await;
    }
}

/// What one request's task needs.
struct Supervisor {
    table: Arc<Table>,
    permits: Arc<Semaphore>,
    queued: Arc<AtomicUsize>,
    outbox: Outbox,
    counters: Arc<Counters>,
}

impl Supervisor {
    async fn run(self, job: Job, scope: Scope) {
        let Job { id, tool, handler, arguments, progress_token } = job;
        // Queued: wait for a permit unless cancelled first.
        let permit = tokio::select! {
            biased;
            () = scope.token().cancelled() => None,
            permit = Arc::clone(&self.permits).acquire_owned() => permit.ok(),
        };
        self.queued.fetch_sub(1, SeqCst);
        let Some(permit) = permit else { return };
        if !self.table.start(&id) {
            return; // cancelled between the permit and the start
        }
        tracing::debug!(id = %id, tool = %tool, "request started");
        let call = Call {
            id: id.clone(),
            tool: Arc::clone(&tool),
            arguments,
            progress_token,
            scope: scope.clone(),
            outbox: self.outbox.clone(),
        };
        // The handler runs in its own task: a panic is caught here, and
        // cancelling the scope aborts it.
        let handle = tokio::spawn(async move { handler(call).await });
        scope.adopt_task(handle.abort_handle());
        let outcome = handle.await;
        drop(permit);
        // Whatever the handler left running (tasks, child groups) ends with it.
        scope.stop_producers();
        let max = self.outbox.max_frame();
        let frame = match outcome {
            Ok(Ok(result)) => Encoder::new(max).response(&id, &result),
            Ok(Err(error)) => Ok(encode_error(Some(&id), &error, max)),
            Err(join) if join.is_panic() => {
                bump(&self.counters.handler_panics);
                tracing::error!(id = %id, tool = %tool, "tool handler panicked");
                let error = RpcError::internal(format!("tool {tool:?} failed: handler panicked"));
                Ok(encode_error(Some(&id), &error, max))
            }
            Err(_) => return self.abandon(&id, &scope), // aborted: cancelled
        };
        let frame = frame.unwrap_or_else(|err| {
            if matches!(err, EncodeError::TooLarge { .. }) {
                bump(&self.counters.oversize_results);
            }
            tracing::error!(id = %id, tool = %tool, %err, "result cannot be sent");
            encode_error(Some(&id), &RpcError::internal(format!("tool {tool:?} result not sent: {err}")), max)
        });
        let room = tokio::select! {
            biased;
            () = scope.token().cancelled() => None,
            room = self.outbox.reserve(frame.len()) => room,
        };
        let Some(room) = room else { return self.abandon(&id, &scope) };
        if !self.table.begin_writing(&id) {
            return; // cancelled: no response
        }
        let table = Arc::clone(&self.table);
        self.outbox.push(frame, Some(room), Some(Box::new(move || table.finish(&id))));
    }

    /// Ends a request without a response; removes its entry unless a
    /// cancellation already did.
    fn abandon(&self, id: &OwnedId, scope: &Scope) {
        if !scope.is_cancelled() {
            // Stdout is gone, or the handler was aborted at shutdown.
            self.table.finish(id);
        }
    }
}
