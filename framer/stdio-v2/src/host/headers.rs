//! What a request carries beyond its body's own members (2026-07-28): the
//! per-request `_meta` (`io.modelcontextprotocol/protocolVersion`,
//! `…/clientCapabilities`, `…/clientInfo`), and the `Mcp-Param-{Name}`
//! headers a tool's `inputSchema` asks for with `x-mcp-header` ("Custom
//! Headers from Tool Parameters" in the Streamable HTTP text).

use std::collections::HashMap;
use std::sync::Mutex;

use http::{HeaderMap, HeaderName, HeaderValue};
use mcp_framer_jsonrpc::protocol::{
    Era, INITIALIZE, META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_PROTOCOL_VERSION,
};
use serde_json::{Map, Value, json};

use crate::wire;

/// `Mcp-Param-` as HTTP/2 sends header names (lower case).
const PARAM_PREFIX: &str = "mcp-param-";

/// The largest integer a header may mirror (JavaScript's safe range).
const SAFE_INTEGER: i64 = (1 << 53) - 1;

/// Whether a request for `method` carries the modern `_meta` when the
/// session speaks `version`: a modern version, a session that did not open
/// with `initialize`, and a method that belongs to no legacy-only step
/// (`initialize`, `ping`, `notifications/initialized`).
pub(super) fn modern_meta_for(method: &str, version: &str, legacy_session: bool) -> bool {
    Era::of(version) == Era::Modern && !legacy_session && Era::of_method(method) != Some(Era::Legacy)
}

/// `params` (an object, or null/absent) with the per-request members added
/// to its `_meta`; members already there win. Other `params` are left as
/// they are.
pub(super) fn with_request_meta(params: Value, version: &str, capabilities: &Value, info: &Value) -> Value {
    let mut params = match params {
        Value::Object(map) => map,
        Value::Null => Map::new(),
        other => return other,
    };
    let meta = params.entry("_meta").or_insert_with(|| json!({}));
    if let Value::Object(meta) = meta {
        meta.entry(META_PROTOCOL_VERSION).or_insert_with(|| json!(version));
        meta.entry(META_CLIENT_CAPABILITIES).or_insert_with(|| capabilities.clone());
        meta.entry(META_CLIENT_INFO).or_insert_with(|| info.clone());
    }
    Value::Object(params)
}

/// Whether `method` opens the legacy era for the session.
pub(super) fn opens_legacy(method: &str) -> bool {
    method == INITIALIZE
}

/// One `x-mcp-header` annotation: the property path in the arguments and
/// the header's name portion.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Annotation {
    path: Vec<String>,
    name: String,
}

/// The annotations of one tool's `inputSchema`, or why the tool is invalid
/// (the rules of "Schema Extension": a token name, unique regardless of
/// case, on a `string`, `integer` or `boolean` property reached through
/// `properties` keys alone).
pub(super) fn annotations(schema: &Value) -> Result<Vec<Annotation>, String> {
    let mut found = Vec::new();
    walk(schema, &mut Vec::new(), true, &mut found)?;
    let mut seen = std::collections::HashSet::new();
    for a in &found {
        if !seen.insert(a.name.to_ascii_lowercase()) {
            return Err(format!("x-mcp-header {:?} is not unique (regardless of case)", a.name));
        }
    }
    Ok(found)
}

fn walk(schema: &Value, path: &mut Vec<String>, reachable: bool, found: &mut Vec<Annotation>) -> Result<(), String> {
    match schema {
        Value::Object(map) => {
            if let Some(name) = map.get("x-mcp-header") {
                let at = path.join(".");
                if !reachable || path.is_empty() {
                    return Err(format!("x-mcp-header at {at:?} is not on a property reached by `properties` alone"));
                }
                let name = name.as_str().ok_or_else(|| format!("x-mcp-header at {at:?} is not a string"))?;
                let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
                if name.is_empty() || !name.bytes().all(token) {
                    return Err(format!("x-mcp-header {name:?} is not an HTTP token"));
                }
                match map.get("type").and_then(Value::as_str) {
                    Some("string" | "integer" | "boolean") => {}
                    other => return Err(format!("x-mcp-header {name:?} is on a property of type {other:?}")),
                }
                found.push(Annotation { path: path.clone(), name: name.to_owned() });
            }
            for (key, value) in map {
                if key == "properties"
                    && let Value::Object(properties) = value
                {
                    for (property, schema) in properties {
                        path.push(property.clone());
                        walk(schema, path, reachable, found)?;
                        path.pop();
                    }
                } else if key != "x-mcp-header" {
                    walk(value, path, false, found)?;
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                walk(item, path, false, found)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// The header value of an argument: a string as is, an integer in the safe
/// range in decimal, a boolean as `true`/`false` (then encoded as the
/// "Value Encoding" says); `None` for anything else (the header is omitted).
fn header_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => n.as_i64().filter(|n| n.abs() <= SAFE_INTEGER).map(|n| n.to_string()),
        _ => None,
    }
}

/// The tools' annotations the session has seen (from `tools/list`).
#[derive(Debug, Default)]
pub(super) struct ToolHeaders(Mutex<HashMap<String, Vec<Annotation>>>);

impl ToolHeaders {
    /// Reads a `tools/list` result's tools: records each valid tool's
    /// annotations and returns the names of the invalid ones (with why),
    /// which the caller removes from the result.
    pub(super) fn learn(&self, result: &Value) -> Vec<(String, String)> {
        let mut invalid = Vec::new();
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        for tool in result.get("tools").and_then(Value::as_array).into_iter().flatten() {
            let Some(name) = tool.get("name").and_then(Value::as_str) else { continue };
            match annotations(tool.get("inputSchema").unwrap_or(&Value::Null)) {
                Ok(found) if found.is_empty() => {
                    map.remove(name);
                }
                Ok(found) => {
                    map.insert(name.to_owned(), found);
                }
                Err(why) => {
                    map.remove(name);
                    invalid.push((name.to_owned(), why));
                }
            }
        }
        invalid
    }

    /// Adds the `Mcp-Param-{Name}` headers of a `tools/call` of `tool` with
    /// `arguments`.
    pub(super) fn add(&self, tool: &str, arguments: Option<&Value>, headers: &mut HeaderMap) {
        let map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let (Some(found), Some(arguments)) = (map.get(tool), arguments) else { return };
        for a in found {
            let value = a.path.iter().try_fold(arguments, |v, key| v.get(key));
            let Some(text) = value.and_then(header_text) else { continue };
            let name = HeaderName::from_bytes(format!("{PARAM_PREFIX}{}", a.name.to_ascii_lowercase()).as_bytes());
            let value = HeaderValue::from_str(&wire::encode_header_value(&text));
            if let (Ok(name), Ok(value)) = (name, value) {
                headers.insert(name, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotations_follow_the_schema_extension_rules() {
        let schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "query": {"type": "string"},
            "opts": {"type": "object", "properties": {"n": {"type": "integer", "x-mcp-header": "N"}}}
        }});
        let found = annotations(&schema).unwrap();
        assert_eq!(found.len(), 2);
        let bad = [
            json!({"properties": {"a": {"type": "number", "x-mcp-header": "A"}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": "has space"}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": ""}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": "X"}, "b": {"type": "string", "x-mcp-header": "x"}}}),
            json!({"properties": {"a": {"type": "array", "items": {"type": "string", "x-mcp-header": "I"}}}}),
            json!({"oneOf": [{"properties": {"a": {"type": "string", "x-mcp-header": "O"}}}]}),
            json!({"type": "string", "x-mcp-header": "Root"}),
        ];
        for schema in bad {
            assert!(annotations(&schema).is_err(), "{schema}");
        }
    }

    #[test]
    fn param_headers_mirror_the_arguments_encoded() {
        let headers_of = |arguments: Value| {
            let tools = ToolHeaders::default();
            let list = json!({"tools": [{"name": "sql", "inputSchema": {"type": "object", "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "n": {"type": "integer", "x-mcp-header": "N"},
                "on": {"type": "boolean", "x-mcp-header": "On"}
            }}}, {"name": "broken", "inputSchema": {"properties": {"x": {"type": "number", "x-mcp-header": "X"}}}}]});
            let invalid = tools.learn(&list);
            assert_eq!(invalid.len(), 1);
            assert_eq!(invalid[0].0, "broken");
            let mut headers = HeaderMap::new();
            tools.add("sql", Some(&arguments), &mut headers);
            headers
        };
        let h = headers_of(json!({"region": "us-west1", "n": -7, "on": true}));
        assert_eq!(h["mcp-param-region"], "us-west1");
        assert_eq!(h["mcp-param-n"], "-7");
        assert_eq!(h["mcp-param-on"], "true");
        let h = headers_of(json!({"region": "Hello, 世界", "n": 1.5}));
        assert_eq!(h["mcp-param-region"], "=?base64?SGVsbG8sIOS4lueVjA==?=");
        assert!(!h.contains_key("mcp-param-n") && !h.contains_key("mcp-param-on"), "absent or not an integer: omitted");
    }

    #[test]
    fn the_modern_meta_is_added_where_it_belongs() {
        assert!(modern_meta_for("tools/call", "2026-07-28", false));
        assert!(!modern_meta_for("tools/call", "2026-07-28", true));
        assert!(!modern_meta_for("ping", "2026-07-28", false));
        assert!(!modern_meta_for("tools/call", "2025-11-25", false));
        let params = with_request_meta(
            json!({"name": "x", "_meta": {"progressToken": 1, META_PROTOCOL_VERSION: "mine"}}),
            "2026-07-28",
            &json!({}),
            &json!({"name": "n", "version": "1"}),
        );
        assert_eq!(params["_meta"][META_PROTOCOL_VERSION], "mine", "members already there win");
        assert_eq!(params["_meta"]["progressToken"], 1);
        assert_eq!(params["_meta"][META_CLIENT_INFO]["name"], "n");
        assert_eq!(params["_meta"][META_CLIENT_CAPABILITIES], json!({}));
    }
}
