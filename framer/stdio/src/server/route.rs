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
use mcp_framer_jsonrpc::{ErrorObject, Id, Message, OwnedId, RawJson, protocol};

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
    /// While a front's request is routed under its key: the id the client
    /// sent, for the handler to see.
    pub(crate) client_id: Option<OwnedId>,
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
        // The 2026-07-28 rules: `server/discover`, and any request whose
        // `_meta` carries a per-request member, is modern and must carry
        // them all with a version served (-32602, -32022). A request without
        // them is served as the legacy era serves it, before `initialize` as
        // after (as this server always has).
        if let Err(error) = protocol::check_request(method, params, true) {
            bump(&self.counters.protocol_errors);
            tracing::debug!(id = %excerpt(&id.to_string()), method = %excerpt(method), code = error.code, "request refused by the protocol's rules");
            return self.reply_error(&id, &error);
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
            client_id: self.client_id.take(),
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
        self.cancel(params.request_id.into_owned(), params.reason.as_deref().unwrap_or(""));
    }

    /// Cancels request `id` (a `notifications/cancelled`, or a front's
    /// cancellation of one of its requests), counted by the state it was in.
    pub(crate) fn cancel(&mut self, id: OwnedId, reason: &str) {
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

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    use crate::server::Server;

    /// Sends `requests` (one line each) to a fresh server, then EOF; returns
    /// the replies in order and the report's protocol error count.
    async fn exchange(requests: &[Value]) -> (Vec<Value>, u64) {
        let (mut host_in, server_out) = tokio::io::duplex(1 << 16);
        let (server_in, mut host_out) = tokio::io::duplex(1 << 16);
        let serving = tokio::spawn(Server::new("t", "1").serve(server_in, server_out));
        for request in requests {
            let mut line = serde_json::to_vec(request).unwrap();
            line.push(b'\n');
            host_out.write_all(&line).await.unwrap();
        }
        drop(host_out);
        let mut replies = Vec::new();
        let mut lines = BufReader::new(&mut host_in).lines();
        while let Some(line) = lines.next_line().await.unwrap() {
            replies.push(serde_json::from_str(&line).unwrap());
        }
        let report = serving.await.unwrap();
        (replies, report.protocol_errors)
    }

    fn request(id: i64, method: &str, meta: Option<Value>) -> Value {
        match meta {
            Some(meta) => json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {"_meta": meta}}),
            None => json!({"jsonrpc": "2.0", "id": id, "method": method}),
        }
    }

    /// The 2026-07-28 rules on the server: `server/discover` and any request
    /// carrying a per-request `_meta` member are modern and must carry the
    /// version and capabilities (-32602 otherwise), with a version served
    /// (-32022 otherwise, naming the supported ones); a request without them
    /// is served as the legacy era serves it, unchanged.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn modern_requests_follow_the_2026_07_28_rules_and_legacy_ones_are_unchanged() {
        let version = "io.modelcontextprotocol/protocolVersion";
        let capabilities = "io.modelcontextprotocol/clientCapabilities";
        let (replies, refused) = exchange(&[
            request(1, "server/discover", None),
            request(2, "server/discover", Some(json!({version: "2026-07-28", capabilities: {}}))),
            request(3, "tools/list", Some(json!({version: "2026-07-28"}))),
            request(4, "tools/list", Some(json!({version: "1999-01-01", capabilities: {}}))),
            request(5, "tools/list", Some(json!({version: "2026-07-28", capabilities: {}}))),
            request(6, "tools/list", None),
            request(7, "ping", None),
        ])
        .await;
        let by_id =
            |id: i64| replies.iter().find(|r| r["id"] == id).unwrap_or_else(|| panic!("no reply {id}: {replies:?}"));
        assert_eq!(by_id(1)["error"]["code"], -32602, "{}", by_id(1));
        assert_eq!(by_id(2)["result"]["supportedVersions"][0], "2026-07-28", "{}", by_id(2));
        assert_eq!(by_id(3)["error"]["code"], -32602, "{}", by_id(3));
        let unsupported = &by_id(4)["error"];
        assert_eq!(unsupported["code"], -32022, "{unsupported}");
        assert_eq!(unsupported["data"]["requested"], "1999-01-01", "{unsupported}");
        assert!(unsupported["data"]["supported"].as_array().is_some_and(|v| v.contains(&json!("2025-11-25"))));
        assert!(by_id(5)["result"]["tools"].is_array(), "{}", by_id(5));
        assert!(by_id(6)["result"]["tools"].is_array(), "{}", by_id(6));
        assert_eq!(by_id(7)["result"], json!({}), "{}", by_id(7));
        assert_eq!(refused, 3);
    }
}
