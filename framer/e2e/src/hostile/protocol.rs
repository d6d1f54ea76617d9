//! JSON-RPC encoding and the classification of input lines.

use serde_json::{Value, json};

use super::server::log;

/// A JSON-RPC error object.
#[derive(Debug)]
pub(super) struct RpcError {
    pub(super) code: i64,
    pub(super) message: String,
}

impl RpcError {
    pub(super) fn invalid_params(message: impl Into<String>) -> Self {
        Self { code: -32602, message: message.into() }
    }
}

/// Serializes `msg` followed by `\n`.
pub(super) fn encode(msg: &Value) -> Vec<u8> {
    let mut frame = serde_json::to_vec(msg).expect("a serde_json::Value always serializes");
    frame.push(b'\n');
    frame
}

/// Length of the serialized `msg`, excluding the `\n`.
pub(super) fn encoded_len(msg: &Value) -> usize {
    encode(msg).len() - 1
}

pub(super) fn response(id: &Value, outcome: Result<Value, RpcError>) -> Value {
    match outcome {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(e) => json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {"code": e.code, "message": e.message},
        }),
    }
}

pub(super) fn text_result(text: impl Into<String>) -> Value {
    json!({"content": [{"type": "text", "text": text.into()}]})
}

/// Builds `make(pad)` with `pad` a run of `'a'` such that the serialized
/// message is exactly `target` bytes (excluding `\n`); `Err(minimum)` if the
/// message is longer than `target` even with an empty pad.
pub(super) fn pad_to(target: usize, make: impl Fn(String) -> Value) -> Result<Value, usize> {
    let min = encoded_len(&make(String::new()));
    if target < min {
        return Err(min);
    }
    let msg = make("a".repeat(target - min));
    debug_assert_eq!(encoded_len(&msg), target);
    Ok(msg)
}

/// What one input line is.
pub(super) enum Incoming {
    Request {
        id: Value,
        method: String,
        params: Option<Value>,
    },
    Notification {
        method: String,
        params: Option<Value>,
    },
    /// A response from the client (to a request this server sent).
    Response(Value),
    Invalid {
        id: Value,
        code: i64,
        message: String,
    },
}

pub(super) fn classify(line: &[u8]) -> Incoming {
    let invalid = |id: Value, message: &str| Incoming::Invalid {
        id,
        code: -32600,
        message: format!("Invalid Request: {message}"),
    };
    let value: Value = match serde_json::from_slice(line) {
        Ok(value) => value,
        Err(e) => {
            log(format_args!("unparseable line ({} bytes): {e}", line.len()));
            return Incoming::Invalid { id: Value::Null, code: -32700, message: format!("Parse error: {e}") };
        }
    };
    let Value::Object(mut obj) = value else {
        return invalid(Value::Null, "expected a JSON object");
    };
    let id = obj.remove("id");
    let valid_id = id.as_ref().filter(|id| id.is_string() || id.is_number()).cloned();
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return invalid(valid_id.unwrap_or(Value::Null), "jsonrpc must be \"2.0\"");
    }
    let params = obj.remove("params");
    match (obj.remove("method"), id) {
        (Some(Value::String(method)), None) => Incoming::Notification { method, params },
        (Some(Value::String(method)), Some(_)) => match valid_id {
            Some(id) => Incoming::Request { id, method, params },
            None => invalid(Value::Null, "id must be a string or a number"),
        },
        (None, Some(id)) if obj.contains_key("result") || obj.contains_key("error") => {
            obj.insert("id".into(), id);
            Incoming::Response(Value::Object(obj))
        }
        _ => invalid(valid_id.unwrap_or(Value::Null), "method must be a string"),
    }
}
