//! The two hosts the soak drives, behind one small interface: the newline
//! host (`mcp_framer_stdio::host::Session`) and the stdio-v2 host
//! (`mcp_framer_stdio_v2::host::Client`). Each call ends in a [`Reply`],
//! which the caller checks against what its kind must get.

use std::time::Duration;

use mcp_framer_jsonrpc::Id;
use mcp_framer_stdio::host::{RequestError, Session, SessionConfig};
use mcp_framer_stdio_v2::host::{Client, Error as V2Error, HostConfig};
use serde_json::Value;

/// How one call ended.
#[derive(Debug)]
pub enum Reply {
    /// A result (the `result` member).
    Result(Value),
    /// A JSON-RPC error with this code.
    Error(i64),
    /// Given up at its deadline; whether the cancellation was sent.
    GaveUp {
        /// `notifications/cancelled` (newline) or `RST_STREAM` (stdio-v2) sent.
        cancellation_sent: bool,
    },
    /// Dropped by its caller before its answer (on purpose).
    Dropped,
    /// No answer that the protocol owed: the session's request timeout,
    /// the session's end, a write error. `lost` when an answer was owed.
    Failed(String),
}

/// The host of one soak: a spawned server and the client side.
#[derive(Debug)]
pub enum Host {
    /// The newline host.
    Newline(Session),
    /// The stdio-v2 host.
    V2(Client),
}

/// The session's own request timeout: an owed answer later than this is lost.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

fn v2_reply(result: Result<mcp_framer_stdio_v2::host::Response, V2Error>) -> Reply {
    match result {
        Ok(response) => match serde_json::from_slice::<Value>(&response.message) {
            Ok(mut message) => Reply::Result(message["result"].take()),
            Err(e) => Reply::Failed(format!("the response does not parse: {e}")),
        },
        Err(V2Error::Rpc { error, .. }) => Reply::Error(error.code),
        Err(V2Error::TimedOut { .. }) => Reply::GaveUp { cancellation_sent: true },
        Err(e) => Reply::Failed(e.to_string()),
    }
}

fn newline_reply(result: Result<mcp_framer_stdio::host::Received, RequestError>) -> Reply {
    match result {
        Ok(received) => match received.payload().map(serde_json::from_str::<Value>) {
            Some(Ok(result)) => Reply::Result(result),
            Some(Err(e)) => Reply::Failed(format!("the result does not parse: {e}")),
            None => Reply::Failed("a response without a result".into()),
        },
        Err(RequestError::Rpc { code, .. }) => Reply::Error(code),
        Err(RequestError::TimedOut { cancellation_sent, .. }) => Reply::GaveUp { cancellation_sent },
        Err(e) => Reply::Failed(e.to_string()),
    }
}

impl Host {
    /// Spawns `command` under the newline host or the stdio-v2 host.
    pub async fn spawn(v2: bool, command: tokio::process::Command) -> Result<Host, String> {
        if v2 {
            let config = HostConfig::default().with_request_timeout(REQUEST_TIMEOUT);
            Client::spawn(command, config).await.map(Host::V2).map_err(|e| e.to_string())
        } else {
            let config = SessionConfig::default().with_request_timeout(REQUEST_TIMEOUT);
            let (session, mut inbound) = Session::spawn(command, config).map_err(|e| e.to_string())?;
            // Drained (the error a server sends for an oversize line has no id).
            tokio::spawn(async move { while inbound.recv().await.is_some() {} });
            Ok(Host::Newline(session))
        }
    }

    /// The server's pid.
    pub async fn pid(&self) -> Option<u32> {
        match self {
            Host::Newline(session) => session.pid(),
            Host::V2(client) => client.pid().await,
        }
    }

    /// Sends `method` and waits for its answer, giving up after `give_up`
    /// when given (the cancellation is then sent).
    pub async fn call(&self, method: &str, params: &Value, give_up: Option<Duration>) -> Reply {
        match self {
            Host::Newline(session) => {
                let pending = match session.start(method, params).await {
                    Ok(pending) => pending,
                    Err(e) => return newline_reply(Err(e)),
                };
                let pending = match give_up {
                    Some(after) => pending.with_timeout(after),
                    None => pending,
                };
                newline_reply(pending.response().await)
            }
            Host::V2(client) => {
                let call = match client.call(method, params).await {
                    Ok(call) => call,
                    Err(e) => return v2_reply(Err(e)),
                };
                match give_up {
                    // Dropping the call at the deadline resets its stream.
                    Some(after) => match tokio::time::timeout(after, call.response()).await {
                        Ok(answer) => v2_reply(answer),
                        Err(_) => Reply::GaveUp { cancellation_sent: true },
                    },
                    None => v2_reply(call.response().await),
                }
            }
        }
    }

    /// Sends `method` and drops it `after` its send, before its answer.
    pub async fn call_and_drop(&self, method: &str, params: &Value, after: Duration) -> Reply {
        match self {
            Host::Newline(session) => match session.start(method, params).await {
                Ok(pending) => {
                    tokio::time::sleep(after).await;
                    drop(pending);
                    Reply::Dropped
                }
                Err(e) => newline_reply(Err(e)),
            },
            Host::V2(client) => match client.call(method, params).await {
                Ok(call) => {
                    tokio::time::sleep(after).await;
                    drop(call);
                    Reply::Dropped
                }
                Err(e) => v2_reply(Err(e)),
            },
        }
    }

    /// Sends `n` calls of `method` and drops them all at once (a reset
    /// storm: `n` cancellations in a burst).
    pub async fn storm(&self, method: &str, params: &Value, n: usize) -> Result<(), String> {
        match self {
            Host::Newline(session) => {
                let mut calls = Vec::with_capacity(n);
                for _ in 0..n {
                    calls.push(session.start(method, params).await.map_err(|e| e.to_string())?);
                }
                drop(calls);
            }
            Host::V2(client) => {
                let mut calls = Vec::with_capacity(n);
                for _ in 0..n {
                    calls.push(client.call(method, params).await.map_err(|e| e.to_string())?);
                }
                drop(calls);
            }
        }
        Ok(())
    }

    /// Sends `method`, waits `stall` without reading the answer (on
    /// stdio-v2: once its head came, its body left unread in the window),
    /// then reads it.
    pub async fn call_stalled(&self, method: &str, params: &Value, stall: Duration) -> Reply {
        match self {
            Host::Newline(session) => match session.start(method, params).await {
                Ok(pending) => {
                    tokio::time::sleep(stall).await;
                    newline_reply(pending.response().await)
                }
                Err(e) => newline_reply(Err(e)),
            },
            Host::V2(client) => match client.call(method, params).await {
                Ok(mut call) => {
                    if let Err(e) = call.started().await {
                        return v2_reply(Err(e));
                    }
                    tokio::time::sleep(stall).await;
                    v2_reply(call.response().await)
                }
                Err(e) => v2_reply(Err(e)),
            },
        }
    }

    /// Sends a `tools/call` of `echo` whose body is `bytes` long, over the
    /// server's transport limit. The newline server skips the line and
    /// answers with a `null` id, so the request is given up after
    /// `give_up`; the stdio-v2 server answers `413` with -32600 at once.
    pub async fn call_oversize(&self, bytes: usize, serial: u64, give_up: Duration) -> Reply {
        let params = serde_json::json!({"name": "echo", "arguments": {"text": "o".repeat(bytes)}});
        match self {
            Host::Newline(_) => self.call("tools/call", &params, Some(give_up)).await,
            Host::V2(client) => {
                let id = Id::Str(format!("oversize-{serial}").into());
                let body = serde_json::json!({"jsonrpc": "2.0", "id": format!("oversize-{serial}"),
                                              "method": "tools/call", "params": params});
                let body = serde_json::to_vec(&body).unwrap_or_default();
                match client.call_raw(id, "tools/call", body).await {
                    Ok(call) => match tokio::time::timeout(give_up, call.response()).await {
                        Ok(answer) => v2_reply(answer),
                        Err(_) => Reply::GaveUp { cancellation_sent: true },
                    },
                    Err(e) => v2_reply(Err(e)),
                }
            }
        }
    }

    /// The host's cancellation counters: (cancellations sent, request
    /// timeouts) for newline; (streams reset by the host, oversize
    /// answers) for stdio-v2; plus every counter as JSON.
    pub fn counters(&self) -> Value {
        match self {
            Host::Newline(session) => {
                let m = session.metrics();
                serde_json::json!({
                    "requests_sent": m.requests_sent, "responses": m.responses,
                    "cancellations_sent": m.cancellations_sent, "timeouts": m.timeouts,
                    "late_responses": m.late_responses, "unexpected_responses": m.unexpected_responses,
                    "oversize_frames": m.oversize_frames, "stderr_bytes": m.stderr_bytes,
                    "buffer_capacity": m.buffer_capacity, "buffered_high_water": m.buffered_high_water,
                    "overload_dropped": m.overload_dropped, "write_errors": m.write_errors,
                })
            }
            Host::V2(client) => {
                let c = client.counters();
                serde_json::json!({
                    "requests_sent": c.requests, "responses": c.responses, "cancellations_sent": c.cancelled,
                    "oversize_responses": c.oversize_responses, "body_bytes": c.body_bytes,
                    "stderr_bytes": c.stderr_bytes,
                })
            }
        }
    }

    /// Ends the session; the server's stderr tail (with its `report` line).
    pub async fn shutdown(self) -> (Option<std::process::ExitStatus>, String) {
        match self {
            Host::Newline(session) => {
                let report = session.shutdown().await;
                (report.exit_status, report.stderr_tail)
            }
            Host::V2(client) => {
                let ended = client.shutdown().await;
                (ended.exit_status, ended.stderr_tail)
            }
        }
    }
}
