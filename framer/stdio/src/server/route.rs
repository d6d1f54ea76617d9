//! The [`Server`](super::Server)'s route on the stdin loop: what each
//! message gets. Requests the protocol answers itself ([replies](super::replies))
//! are answered at once; `tools/call` goes to the [dispatcher](super::dispatch),
//! `notifications/cancelled` to the request [table](super::table).

use std::borrow::Cow;
use std::convert::Infallible;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::dispatch::{Dispatcher, Job};
use super::replies::{self, Identity};
use super::report::Counters;
use super::stdin::{Route, Routed};
use super::table::{CancelOutcome, Table};
use super::tool::Tools;
use super::writer::Outbox;
use crate::counter::bump;
use crate::preview::excerpt;
use mcp_framer_jsonrpc::{ErrorObject, Id, Message, OwnedId, RawJson};

/// `tools/call` params, borrowed from the frame.
#[derive(Deserialize)]
struct CallParams<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(borrow, default)]
    arguments: Option<&'a RawValue>,
    #[serde(rename = "_meta", borrow, default)]
    meta: Option<Meta<'a>>,
}

#[derive(Deserialize)]
struct Meta<'a> {
    #[serde(rename = "progressToken", borrow, default)]
    progress_token: Option<&'a RawValue>,
}

/// `notifications/cancelled` params.
#[derive(Deserialize)]
struct CancelParams<'a> {
    #[serde(rename = "requestId", borrow)]
    request_id: Id<'a>,
    #[serde(borrow, default)]
    reason: Option<Cow<'a, str>>,
}

/// `initialize` params: only the version matters here.
#[derive(Deserialize)]
struct InitializeParams<'a> {
    #[serde(rename = "protocolVersion", borrow, default)]
    protocol_version: Option<Cow<'a, str>>,
}

/// What one message gets.
type Reply = Routed<Infallible>;

/// The route's state between messages.
pub(crate) struct Router<'s> {
    pub(crate) identity: &'s Identity,
    pub(crate) tools: &'s Tools,
    /// `tools/list`, serialized once.
    pub(crate) tools_list: Box<RawValue>,
    pub(crate) table: Arc<Table>,
    pub(crate) outbox: Outbox,
    pub(crate) dispatcher: Dispatcher,
    pub(crate) counters: Arc<Counters>,
    /// The id of `initialize`, once received (it cannot be cancelled).
    pub(crate) initialize_id: Option<OwnedId>,
}

impl Route for Router<'_> {
    type Forward = Infallible;

    fn route(&mut self, _frame: &[u8], message: Message<'_>) -> Reply {
        match message {
            Message::Request { id, method, params } => self.on_request(id.into_owned(), &method, params),
            Message::Notification { method, params } => {
                self.on_notification(&method, params);
                Routed::Nothing
            }
            other => {
                tracing::debug!(kind = ?other.kind(), id = ?other.id(), "ignoring a response: this server sends no requests");
                Routed::Nothing
            }
        }
    }

    async fn forward(&mut self, item: Infallible) -> bool {
        match item {}
    }
}

impl Router<'_> {
    fn reply(&self, id: &OwnedId, result: &impl serde::Serialize) -> Reply {
        Routed::Reply(self.outbox.response_frame(id, result))
    }

    fn reply_error(&self, id: &OwnedId, error: &ErrorObject) -> Reply {
        Routed::Reply(self.outbox.error_frame(Some(id), error))
    }

    fn on_request(&mut self, id: OwnedId, method: &str, params: Option<RawJson<'_>>) -> Reply {
        if self.table.contains(&id) {
            bump(&self.counters.duplicate_ids);
            tracing::warn!(id = %excerpt(&id.to_string()), method = %excerpt(method), "duplicate request id in flight");
            return Routed::Reply(self.outbox.error_frame(None, &replies::duplicate_id(&id)));
        }
        match method {
            "initialize" if self.initialize_id.is_some() => {
                bump(&self.counters.repeated_initialize);
                tracing::warn!(id = %id, "initialize received twice");
                self.reply_error(&id, &replies::repeated_initialize())
            }
            "initialize" => {
                let asked = params
                    .and_then(|p| p.deserialize::<InitializeParams<'_>>().ok())
                    .and_then(|p| p.protocol_version.map(Cow::into_owned));
                let result = self.identity.initialize_result(asked.as_deref());
                self.initialize_id = Some(id.clone());
                self.reply(&id, &result)
            }
            // The 2026-07-28 revision's probe: answered before or without
            // `initialize`, and any number of times.
            "server/discover" => self.reply(&id, &self.identity.discover_result()),
            "ping" => self.reply(&id, &replies::pong()),
            "tools/list" => self.reply(&id, &self.tools_list),
            "tools/call" => self.on_call(id, params),
            _ => {
                bump(&self.counters.unknown_methods);
                tracing::debug!(id = %excerpt(&id.to_string()), method = %excerpt(method), "unknown method");
                self.reply_error(&id, &replies::method_not_found(method))
            }
        }
    }

    fn on_call(&mut self, id: OwnedId, params: Option<RawJson<'_>>) -> Reply {
        let parsed = params
            .ok_or_else(|| "missing params".to_owned())
            .and_then(|p| p.deserialize::<CallParams<'_>>().map_err(|err| err.to_string()));
        let params = match parsed {
            Ok(params) => params,
            Err(err) => return self.reply_error(&id, &replies::bad_call_params(&err)),
        };
        let Some((name, handler, structured)) = self.tools.handler(&params.name) else {
            return self.reply_error(&id, &replies::unknown_tool(&params.name));
        };
        let job = Job {
            id: id.clone(),
            tool: name,
            handler,
            structured,
            arguments: params.arguments.map(RawValue::to_owned),
            progress_token: params.meta.and_then(|m| m.progress_token).map(RawValue::to_owned),
        };
        match self.dispatcher.dispatch(job) {
            Ok(()) => Routed::Nothing,
            Err(error) => {
                tracing::warn!(id = %id, %error, "request refused");
                self.reply_error(&id, &error)
            }
        }
    }

    fn on_notification(&mut self, method: &str, params: Option<RawJson<'_>>) {
        match method {
            "notifications/cancelled" => self.on_cancel(params),
            "notifications/initialized" => tracing::debug!("client initialized"),
            _ => tracing::debug!(method, "ignoring notification"),
        }
    }

    fn on_cancel(&mut self, params: Option<RawJson<'_>>) {
        let Some(params) = params.and_then(|p| p.deserialize::<CancelParams<'_>>().ok()) else {
            bump(&self.counters.cancel_malformed);
            tracing::debug!("ignoring a malformed cancellation");
            return;
        };
        let id = params.request_id.into_owned();
        let reason = params.reason.as_deref().unwrap_or("");
        if self.initialize_id.as_ref() == Some(&id) {
            bump(&self.counters.cancel_ignored);
            tracing::info!(id = %id, "cancellation ignored: initialize cannot be cancelled");
            return;
        }
        let (counter, state) = match self.table.cancel(&id) {
            CancelOutcome::Queued => (&self.counters.cancel_queued, "queued"),
            CancelOutcome::Running => (&self.counters.cancel_running, "running"),
            CancelOutcome::Writing => (&self.counters.cancel_writing, "writing"),
            CancelOutcome::Unknown => (&self.counters.cancel_ignored, "done-or-unknown"),
        };
        bump(counter);
        tracing::info!(id = %id, state, reason, "cancellation");
    }
}
