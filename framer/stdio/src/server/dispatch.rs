//! Dispatch: each `tools/call` runs in its own task, at most
//! `max_concurrent` at once; the others wait in the queue (state
//! [`Queued`](super::State::Queued)).
//!
//! # Admission
//!
//! A call is **admitted** when the stdin loop accepts it, and stays admitted
//! until its response is committed to the writer's queue (or it ends without
//! one). At most `max_concurrent + max_queued` calls are admitted at any
//! moment: the loop takes an admission slot when it dispatches a call, never
//! waiting, and answers -32000 when none is free. What is counted is what was
//! admitted, not what has started, so a burst of calls in one read cannot
//! exceed the bound before any of them starts; and a finished call whose
//! result waits for room in the writer's queue still holds its slot, so the
//! results waiting outside the queue are bounded too.
//!
//! Each request gets a call_task task that waits for a concurrency permit,
//! starts the handler in a task of its own (so a panic is caught and the
//! handler can be aborted), turns its outcome into one whole frame, reserves
//! room for it in the writer's queue and only then commits it (state
//! [`Writing`](super::State::Writing)). A request cancelled at any point
//! before that commit sends nothing.

use std::sync::Arc;
use std::time::Duration;

use serde_json::value::RawValue;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

use super::cancel::Scope;
use super::report::Counters;
use super::table::Table;
use super::tool::{Call, Handler, RpcError, ToolResult};
use super::writer::Outbox;
use crate::counter::bump;
use mcp_framer_jsonrpc::{EncodeError, INVALID_PARAMS, OwnedId};

/// One `tools/call` to run.
pub(crate) struct Job {
    pub(crate) id: OwnedId,
    pub(crate) tool: Arc<str>,
    pub(crate) handler: Handler,
    /// Whether the tool declares an `outputSchema` (may send
    /// `structuredContent`).
    pub(crate) structured: bool,
    pub(crate) arguments: Option<Box<RawValue>>,
    pub(crate) progress_token: Option<Box<RawValue>>,
    /// The id the client sent, when the request came in under a front's key
    /// (`id`): what the handler sees as [`Call::id`].
    pub(crate) client_id: Option<OwnedId>,
}

/// Runs requests concurrently within the bound, and tracks their tasks.
pub(crate) struct Dispatcher {
    table: Arc<Table>,
    permits: Arc<Semaphore>,
    /// One per admitted call: `max_concurrent + max_queued`.
    slots: Arc<Semaphore>,
    max_concurrent: usize,
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
        let max_concurrent = max_concurrent.clamp(1, Semaphore::MAX_PERMITS);
        let max_queued = max_queued.min(Semaphore::MAX_PERMITS - max_concurrent);
        Dispatcher {
            table,
            permits: Arc::new(Semaphore::new(max_concurrent)),
            slots: Arc::new(Semaphore::new(max_concurrent + max_queued)),
            max_concurrent,
            max_queued,
            outbox,
            counters,
            tasks: JoinSet::new(),
        }
    }

    /// Admits `job` (see the module docs), enters it in the table and spawns
    /// its call_task. Never waits. The error is the reply to send instead
    /// (overload; a duplicate id, which the caller checks first).
    pub(crate) fn dispatch(&mut self, job: Job) -> Result<(), RpcError> {
        while self.tasks.try_join_next().is_some() {}
        let Ok(slot) = Arc::clone(&self.slots).try_acquire_owned() else {
            bump(&self.counters.overloaded);
            let (running, queued) = (self.max_concurrent, self.max_queued);
            return Err(RpcError::new(
                mcp_framer_jsonrpc::OVERLOADED,
                format!(
                    "server overloaded: {} calls already admitted ({running} running + {queued} queued); \
                     try again later",
                    running + queued
                ),
            ));
        };
        let scope = Scope::new();
        if !self.table.insert(job.id.clone(), scope.clone()) {
            bump(&self.counters.duplicate_ids);
            return Err(RpcError::new(mcp_framer_jsonrpc::INVALID_REQUEST, "request id already in flight"));
        }
        let call_task = CallTask {
            table: Arc::clone(&self.table),
            permits: Arc::clone(&self.permits),
            outbox: self.outbox.clone(),
            counters: Arc::clone(&self.counters),
        };
        self.tasks.spawn(call_task.run(job, scope, slot));
        Ok(())
    }

    /// Waits up to `grace` for every request to finish; `true` if they did.
    pub(crate) async fn drain(&mut self, grace: Duration) -> bool {
        tokio::time::timeout(grace, async { while self.tasks.join_next().await.is_some() {} }).await.is_ok()
    }

    /// Starts no more handlers: a queued call stays queued (until it is
    /// cancelled) even when a running one ends. For shutdown, before the
    /// cancellations, so that cancelling a running call does not start a
    /// queued one.
    pub(crate) fn stop_starting(&self) {
        self.permits.close();
    }

    /// Aborts every call_task and waits for them to stop.
    pub(crate) async fn abort_all(&mut self) {
        self.tasks.shutdown().await;
    }
}

/// What one request's task needs.
struct CallTask {
    table: Arc<Table>,
    permits: Arc<Semaphore>,
    outbox: Outbox,
    counters: Arc<Counters>,
}

impl CallTask {
    /// Runs one admitted call; `_slot` is its admission, given back when this
    /// returns (its frame committed, or no response).
    async fn run(self, job: Job, scope: Scope, _slot: OwnedSemaphorePermit) {
        let Job { id, tool, handler, structured, arguments, progress_token, client_id } = job;
        // Queued: wait for a permit unless cancelled first.
        let permit = tokio::select! {
            biased;
            () = scope.token().cancelled() => None,
            permit = Arc::clone(&self.permits).acquire_owned() => permit.ok(),
        };
        let Some(permit) = permit else { return };
        if !self.table.start(&id) {
            return; // cancelled between the permit and the start
        }
        tracing::debug!(id = %id, tool = %tool, "request started");
        let call = Call {
            id: client_id.unwrap_or_else(|| id.clone()),
            key: id.clone(),
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
        // The permit is held until the response is committed (or the call
        // ends without one): a finished call whose result waits for room
        // still counts against `max_concurrent`, so the results waiting
        // outside the writer's queue are at most `max_concurrent` (each with
        // its encoding), not every admitted call's.
        let _permit = permit;
        // Whatever the handler left running (tasks, child groups) ends with it.
        scope.stop_producers();
        let result = match outcome {
            Ok(Ok(result)) => self.declared(result, &id, &tool, structured),
            // Invalid arguments (or a bad cursor): a protocol error.
            Ok(Err(error)) if error.code == INVALID_PARAMS => {
                let frame = self.outbox.error_frame(Some(&id), &error);
                return self.commit(id, scope, frame).await;
            }
            Ok(Err(error)) => {
                bump(&self.counters.tool_errors);
                tracing::warn!(id = %id, tool = %tool, code = error.code, message = %error.message, "tool failed");
                ToolResult::error(format!("tool {tool:?} failed: {}", error.message))
            }
            Err(join) if join.is_panic() => {
                bump(&self.counters.handler_panics);
                tracing::error!(id = %id, tool = %tool, "tool handler panicked");
                ToolResult::error(format!("tool {tool:?} failed: its handler panicked (details in the server's log)"))
            }
            Err(_) => return self.abandon(&id, &scope), // aborted: cancelled
        };
        let frame = self.outbox.encoder().response(&id, &result).unwrap_or_else(|err| {
            if matches!(err, EncodeError::TooLarge { .. }) {
                bump(&self.counters.oversize_results);
            }
            tracing::error!(id = %id, tool = %tool, %err, "result cannot be sent");
            let failed = ToolResult::error(format!("tool {tool:?} result not sent: {err}"));
            self.outbox.response_frame(&id, &failed)
        });
        self.commit(id, scope, frame).await;
    }

    /// `result` as sent: without `structuredContent` if the tool declares no
    /// `outputSchema` (counted and logged; its text block carries the JSON).
    fn declared(&self, mut result: ToolResult, id: &OwnedId, tool: &str, structured: bool) -> ToolResult {
        if !structured && result.structured_content.take().is_some() {
            bump(&self.counters.undeclared_structured);
            tracing::warn!(id = %id, tool, "structuredContent left out: the tool declares no outputSchema");
        }
        result
    }

    /// Waits for room for `frame` and commits it (state Writing), unless the
    /// request is cancelled first.
    async fn commit(self, id: OwnedId, scope: Scope, frame: Vec<u8>) {
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
