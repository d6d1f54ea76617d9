//! The protocol's own replies, built in one place: the results of
//! `initialize`, `server/discover`, `ping` and `tools/list`, and every error
//! a request can get before a tool runs (the version and `_meta` errors of
//! the 2026-07-28 revision come from [`protocol`], where those rules live).
//! The versions served are [`protocol::VERSIONS`], all of them. What is echoed from the client
//! (a method, a tool name, an id) is an excerpt of at most 64 bytes, cut at
//! a character boundary, with its length.

use serde_json::Value;
use serde_json::value::{RawValue, to_raw_value};

use super::tool::Tool;
use crate::preview::{MESSAGE_BYTES, clip, excerpt};
use mcp_framer_jsonrpc::{ErrorObject, INVALID_REQUEST, METHOD_NOT_FOUND, OwnedId, protocol};

/// Who the server is, as its replies say it.
#[derive(Debug)]
pub(crate) struct Identity {
    pub(crate) name: String,
    pub(crate) version: String,
    pub(crate) instructions: Option<String>,
}

impl Identity {
    /// The `initialize` result for a client that asked for `asked`: that
    /// version if it is a legacy one served, else the newest legacy one
    /// ([`protocol::negotiate`]).
    pub(crate) fn initialize_result(&self, asked: Option<&str>) -> Value {
        let mut result = serde_json::json!({
            "protocolVersion": protocol::negotiate(asked),
            "capabilities": { "tools": { "listChanged": false } },
            "serverInfo": { "name": self.name, "version": self.version },
        });
        if let Some(instructions) = &self.instructions {
            result["instructions"] = Value::from(instructions.as_str());
        }
        result
    }

    /// The `server/discover` result (2026-07-28): the versions served, the
    /// capabilities, and the identity in `_meta`.
    pub(crate) fn discover_result(&self) -> Value {
        let mut result = serde_json::json!({
            "resultType": "complete",
            "supportedVersions": protocol::VERSIONS,
            "capabilities": { "tools": { "listChanged": false } },
            "_meta": { protocol::META_SERVER_INFO: { "name": self.name, "version": self.version } },
        });
        if let Some(instructions) = &self.instructions {
            result["instructions"] = Value::from(instructions.as_str());
        }
        result
    }
}

/// The `ping` result.
pub(crate) fn pong() -> Value {
    serde_json::json!({})
}

/// The `tools/list` result, serialized once for the session.
pub(crate) fn tools_list<'t>(tools: impl Iterator<Item = &'t Tool>) -> Box<RawValue> {
    let tools: Vec<&Tool> = tools.collect();
    // `resultType`, `ttlMs` and `cacheScope` are required from 2026-07-28
    // on (earlier clients ignore them). The list is fixed for the server's
    // life, but a restart may change it: no freshness is promised (`ttlMs`
    // 0), and it is this server's own (`private`).
    let list = serde_json::json!({ "tools": tools, "resultType": "complete", "ttlMs": 0, "cacheScope": "private" });
    to_raw_value(&list).expect("tool descriptions serialize")
}

/// -32600 for a request whose id is already in flight. It goes with a
/// `null` id: answering with the id would let a client resolve the original
/// request with this error.
pub(crate) fn duplicate_id(id: &OwnedId) -> ErrorObject {
    let message =
        format!("request id {} is already in flight; this duplicate was not processed", excerpt(&id.to_string()));
    ErrorObject::new(INVALID_REQUEST, message)
}

/// -32600 for an `initialize` after the first.
pub(crate) fn repeated_initialize() -> ErrorObject {
    ErrorObject::new(INVALID_REQUEST, "initialize was already received in this session")
}

/// -32601 for a method this server does not have.
pub(crate) fn method_not_found(method: &str) -> ErrorObject {
    ErrorObject::new(METHOD_NOT_FOUND, format!("method not found: {}", excerpt(method)))
}

/// -32602 for `tools/call` params that are missing or not the expected
/// object (`why`, clipped).
pub(crate) fn bad_call_params(why: &str) -> ErrorObject {
    ErrorObject::invalid_params(format!("bad tools/call params: {}", clip(why, MESSAGE_BYTES)))
}

/// -32602 for a tool this server does not have.
pub(crate) fn unknown_tool(name: &str) -> ErrorObject {
    ErrorObject::invalid_params(format!("unknown tool: {}", excerpt(name)))
}
