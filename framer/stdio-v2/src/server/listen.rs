//! `subscriptions/listen`: the long-lived event stream that carries the
//! server's change notifications (2026-07-28 removed the GET stream).
//!
//! The stream opens with `notifications/subscriptions/acknowledged`, then
//! carries each change notification its filter asked for (ours: the three
//! `*ListChanged` flags; `resourceSubscriptions` is not honoured and left
//! out of the acknowledgment), tagged with
//! `_meta["io.modelcontextprotocol/subscriptionId"]` = the listen request's
//! id. At most [`V2Config::max_listeners`](super::V2Config::max_listeners)
//! are open at once; each holds at most
//! [`V2Config::stream_backlog`](super::V2Config::stream_backlog) bytes
//! waiting for its window.

use std::future::poll_fn;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use h2::server::SendResponse;
use mcp_framer_jsonrpc::{Encoder, OwnedId};
use serde::Deserialize;

use super::config::{Counters, bump};
use super::heads::{event_stream, status_only};
use super::routes::{Out, Routes};
use crate::io::send_chunks;
use crate::wire;

/// A `subscriptions/listen` request's `notifications` filter.
#[derive(Debug, Default, Deserialize)]
pub(super) struct ListenFilter {
    #[serde(rename = "toolsListChanged", default)]
    tools: bool,
    #[serde(rename = "promptsListChanged", default)]
    prompts: bool,
    #[serde(rename = "resourcesListChanged", default)]
    resources: bool,
}

impl ListenFilter {
    pub(super) fn read(params: Option<mcp_framer_jsonrpc::RawJson<'_>>) -> ListenFilter {
        #[derive(Deserialize)]
        struct Listen {
            #[serde(default)]
            notifications: ListenFilter,
        }
        params.and_then(|p| serde_json::from_str::<Listen>(p.get()).ok()).map(|l| l.notifications).unwrap_or_default()
    }

    fn methods(&self) -> Vec<&'static str> {
        let mut methods = Vec::new();
        if self.tools {
            methods.push("notifications/tools/list_changed");
        }
        if self.prompts {
            methods.push("notifications/prompts/list_changed");
        }
        if self.resources {
            methods.push("notifications/resources/list_changed");
        }
        methods
    }

    fn acknowledged(&self) -> serde_json::Value {
        let mut ack = serde_json::Map::new();
        for (on, name) in [
            (self.tools, "toolsListChanged"),
            (self.prompts, "promptsListChanged"),
            (self.resources, "resourcesListChanged"),
        ] {
            if on {
                ack.insert(name.into(), true.into());
            }
        }
        ack.into()
    }
}

/// Serves one listen stream until the client resets it or the session
/// ends; a stream whose window stays shut for `stall` is reset.
pub(super) async fn listen(
    routes: &Routes,
    counters: &Counters,
    id: OwnedId,
    filter: ListenFilter,
    mut respond: SendResponse<Bytes>,
    stall: Duration,
) {
    let Some((mut rx, queued)) = routes.listen(&id, filter.methods()) else {
        bump(&counters.listeners_refused);
        let _ = respond.send_response(status_only(http::StatusCode::SERVICE_UNAVAILABLE), true);
        return;
    };
    bump(&counters.listeners);
    let Ok(mut stream) = respond.send_response(event_stream(), false) else { return routes.unlisten(&id) };
    let ack = Encoder::unlimited().notification(
        "notifications/subscriptions/acknowledged",
        &serde_json::json!({"_meta": {"io.modelcontextprotocol/subscriptionId": id}, "notifications": filter.acknowledged()}),
    );
    if let Ok(ack) = ack
        && send_chunks(&mut stream, [wire::sse_event(ack.strip_suffix(b"\n").unwrap_or(&ack))], false, stall)
            .await
            .is_err()
    {
        return routes.unlisten(&id);
    }
    loop {
        let out = tokio::select! {
            out = rx.recv() => out,
            _ = poll_fn(|cx| stream.poll_reset(cx)) => return routes.unlisten(&id),
        };
        match out {
            Some(Out::Event(piece)) => {
                let sent = send_chunks(&mut stream, piece.chunks.iter().cloned(), false, stall).await;
                queued.fetch_sub(piece.backlog, Ordering::Relaxed);
                if let Err(unsent) = sent {
                    if unsent == crate::io::Unsent::Stalled {
                        bump(&counters.stalled_streams);
                        stream.send_reset(h2::Reason::CANCEL);
                    }
                    return routes.unlisten(&id);
                }
            }
            Some(Out::Final { .. }) => {}
            None => {
                let _ = stream.send_data(Bytes::new(), true);
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::routes::with_subscription_id;

    fn payload(frame: &str) -> Option<mcp_framer_jsonrpc::RawJson<'_>> {
        mcp_framer_jsonrpc::parse(frame.as_bytes()).unwrap().payload()
    }

    #[test]
    fn listen_notifications_are_tagged_and_filtered() {
        let frame = br#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#;
        let tagged = with_subscription_id(frame, &OwnedId::Number(7)).unwrap();
        let tagged: serde_json::Value = serde_json::from_slice(&tagged).unwrap();
        assert_eq!(tagged["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 7);
        let listen = r#"{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true,"resourceSubscriptions":["a"]}}}"#;
        let filter = ListenFilter::read(payload(listen));
        assert_eq!(filter.methods(), ["notifications/tools/list_changed"]);
        assert_eq!(filter.acknowledged(), serde_json::json!({"toolsListChanged": true}));
        assert!(ListenFilter::read(None).methods().is_empty());
    }
}
