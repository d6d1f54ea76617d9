//! The server's tools: listed once at the start, `--large` and `--slow`
//! checked against them (name, then arguments against `inputSchema`), and
//! `--list-tools`.

use std::fmt::Write as _;

use serde_json::{Map, Value, json};

use crate::error::ProbeError;
use crate::target::Target;

/// One tool, as `--list-tools` shows it.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ToolInfo {
    /// Its name.
    pub name: String,
    /// Its description, if any.
    pub description: Option<String>,
    /// Its `inputSchema`, if any.
    pub input_schema: Option<Value>,
    /// `--large` and/or `--slow` with example arguments, when its name,
    /// description or schema suggest it suits that check.
    pub suggestions: Vec<String>,
}

/// The server's tools.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ToolList {
    /// The server command.
    pub server: Vec<String>,
    /// The era the session was opened in.
    pub era: &'static str,
    /// The tools, in the server's order.
    pub tools: Vec<ToolInfo>,
}

impl ToolList {
    /// The list as text.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "tools of {} ({} era): {}", self.server.join(" "), self.era, self.tools.len());
        for tool in &self.tools {
            let _ = writeln!(out, "\n{}", tool.name);
            if let Some(description) = &tool.description {
                let _ = writeln!(out, "    {}", description.replace('\n', " "));
            }
            match &tool.input_schema {
                Some(schema) => {
                    let _ = writeln!(out, "    inputSchema: {schema}");
                }
                None => {
                    let _ = writeln!(out, "    inputSchema: none");
                }
            }
            for suggestion in &tool.suggestions {
                let _ = writeln!(out, "    may suit: {suggestion}");
            }
        }
        let _ = writeln!(
            out,
            "\n--large wants a result well over 64 KiB (a few MB: the backpressure check needs more than a pipe holds);\n\
             --slow wants a call that runs for several seconds, ideally sending progress or starting a child process."
        );
        out
    }
}

/// Words (matched at the start of a word) in a tool's name or description
/// that suggest a large result, a long call.
const LARGE_WORDS: &[&str] = &["large", "dump", "big", "bytes", "size", "read", "fetch", "repeat", "length"];
const SLOW_WORDS: &[&str] = &["slow", "sleep", "wait", "delay", "count", "progress", "long-running", "duration"];
/// The same for the names of numeric properties.
const LARGE_PROPS: &[&str] = &["bytes", "size", "length", "chars"];
const SLOW_PROPS: &[&str] = &["seconds", "duration", "delay", "sleep", "wait"];

/// The first of `words` that starts a word of `text` (words are split at
/// anything but letters, digits and `-`; `long-running` stays one word).
fn mentions(text: &str, words: &'static [&'static str]) -> Option<&'static str> {
    let text = text.to_ascii_lowercase();
    let mut parts = text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')).flat_map(|w| {
        // `get-sum`: the whole word and each of its pieces.
        std::iter::once(w).chain(w.split('-'))
    });
    parts.find_map(|part| words.iter().find(|w| !part.is_empty() && part.starts_with(**w)).copied())
}

fn properties(schema: Option<&Value>) -> Map<String, Value> {
    schema.and_then(|s| s.get("properties")).and_then(Value::as_object).cloned().unwrap_or_default()
}

/// Example arguments: every required property, numbers sized for the
/// check (`bytes`-like: 4000000, time-like: 10), other types left as
/// placeholders.
fn example_arguments(schema: Option<&Value>, large: bool) -> Value {
    let required: Vec<&str> = schema
        .and_then(|s| s.get("required"))
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut args = Map::new();
    for (name, property) in properties(schema) {
        let numeric = matches!(property.get("type").and_then(Value::as_str), Some("integer" | "number"));
        let sized = mentions(&name, if large { LARGE_PROPS } else { SLOW_PROPS }).is_some();
        if numeric && (sized || required.contains(&name.as_str())) {
            args.insert(name, json!(if large { 4_000_000 } else { 10 }));
        } else if required.contains(&name.as_str()) {
            args.insert(name, json!("..."));
        }
    }
    Value::Object(args)
}

pub(crate) fn describe_tool(tool: &Value) -> Option<ToolInfo> {
    let name = tool.get("name")?.as_str()?.to_owned();
    let description = tool.get("description").and_then(Value::as_str).map(str::to_owned);
    let input_schema = tool.get("inputSchema").cloned();
    let text = format!("{name} {}", description.as_deref().unwrap_or(""));
    let mut suggestions = Vec::new();
    for (flag, words, props, large) in
        [("--large", LARGE_WORDS, LARGE_PROPS, true), ("--slow", SLOW_WORDS, SLOW_PROPS, false)]
    {
        let numeric = |p: &Value| matches!(p.get("type").and_then(Value::as_str), Some("integer" | "number"));
        let by_props =
            properties(input_schema.as_ref()).iter().filter(|(_, p)| numeric(p)).find_map(|(k, _)| mentions(k, props));
        if let Some(word) = mentions(&text, words).or(by_props) {
            let args = example_arguments(input_schema.as_ref(), large);
            suggestions.push(format!("{flag} '{name} {args}' (mentions {word:?})"));
        }
    }
    Some(ToolInfo { name, description, input_schema, suggestions })
}

/// Lists every tool (following `nextCursor` up to `--max-pages`); also
/// says whether the list is complete (no repeated cursor, no page left).
pub(crate) async fn list_all(
    target: &Target,
    session: &mcp_framer_stdio::host::Session,
) -> Result<(Vec<Value>, bool), String> {
    follow_pages(target.limits.max_pages, |params| async move {
        let response = session.request("tools/list", &target.params(params)).await;
        Ok(response.map_err(|e| format!("tools/list failed: {e}"))?.deserialize_payload().unwrap_or(Value::Null))
    })
    .await
}

/// Follows `tools/list`'s `nextCursor` through at most `max_pages` pages,
/// each fetched by `page` (its params: `{"cursor": ...}` or null): every
/// tool, and whether the list is complete.
pub(crate) async fn follow_pages<F, Fut>(max_pages: u32, mut page: F) -> Result<(Vec<Value>, bool), String>
where
    F: FnMut(Value) -> Fut,
    Fut: std::future::Future<Output = Result<Value, String>>,
{
    let mut cursor: Option<String> = None;
    let mut tools = Vec::new();
    for _ in 0..max_pages.max(1) {
        let params = match &cursor {
            Some(cursor) => json!({ "cursor": cursor }),
            None => Value::Null,
        };
        let page = page(params).await?;
        tools.extend(page.get("tools").and_then(Value::as_array).cloned().unwrap_or_default());
        match page.get("nextCursor").and_then(Value::as_str) {
            Some(next) if cursor.as_deref() != Some(next) => cursor = Some(next.to_owned()),
            Some(_) => return Ok((tools, false)),
            None => return Ok((tools, true)),
        }
    }
    Ok((tools, false))
}

fn type_fits(value: &Value, ty: &str) -> bool {
    match ty {
        "integer" => {
            value.as_i64().is_some() || value.as_u64().is_some() || value.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        "number" => value.is_number(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        "null" => value.is_null(),
        _ => true,
    }
}

/// What in `arguments` does not fit `schema`: missing required members,
/// members of the wrong type, unknown members when
/// `additionalProperties` is false.
pub(crate) fn schema_problems(schema: &Value, arguments: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let Some(args) = arguments.as_object() else { return vec!["the arguments are not an object".into()] };
    let props = properties(Some(schema));
    for name in schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
        if !args.contains_key(name) {
            problems.push(format!("{name:?} is required"));
        }
    }
    for (name, value) in args {
        match props.get(name) {
            Some(property) => {
                let types: Vec<&str> = match property.get("type") {
                    Some(Value::String(t)) => vec![t.as_str()],
                    Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
                    _ => continue,
                };
                if !types.iter().any(|t| type_fits(value, t)) {
                    problems.push(format!("{name:?} should be {}, not {value}", types.join(" or ")));
                }
            }
            None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => {
                problems.push(format!("{name:?} is not a property of the tool"));
            }
            None => {}
        }
    }
    problems
}

/// Checks `--large`, `--slow` and `--noisy` against the listed tools.
pub(crate) fn validate(target: &Target, tools: &[Value]) -> Result<(), ProbeError> {
    let names: Vec<String> = tools.iter().filter_map(|t| t.get("name")?.as_str().map(str::to_owned)).collect();
    let options = &target.options;
    for (option, spec) in [("--large", &options.large), ("--slow", &options.slow), ("--noisy", &options.noisy)] {
        let Some(spec) = spec else { continue };
        let Some(tool) = tools.iter().find(|t| t.get("name").and_then(Value::as_str) == Some(spec.name.as_str()))
        else {
            return Err(ProbeError::UnknownTool { option, name: spec.name.clone(), tools: names });
        };
        if let Some(schema) = tool.get("inputSchema") {
            let problems = schema_problems(schema, &spec.arguments);
            if !problems.is_empty() {
                return Err(ProbeError::BadArguments { option, name: spec.name.clone(), problems });
            }
        }
    }
    Ok(())
}

/// Starts the server once: an error if it cannot start; otherwise finds
/// its era, lists its tools and checks `--large`/`--slow` against them (a
/// server whose handshake or `tools/list` fails is left to the checks).
pub(crate) async fn open_and_list(target: &Target) -> Result<(), ProbeError> {
    match target.spawn_raw() {
        Ok(conn) => drop(conn),
        Err(e) => return Err(ProbeError::Spawn(e)),
    }
    target.kill_trees();
    let Ok(started) = target.start(target.session_config()).await else { return Ok(()) };
    if started.opened.capabilities().and_then(|c| c.get("tools")).is_none() {
        return Ok(());
    }
    let Ok((tools, complete)) = list_all(target, &started.session).await else { return Ok(()) };
    // An incomplete list (the handshake check says why) cannot show a
    // tool is missing.
    if complete { validate(target, &tools) } else { Ok(()) }
}

/// `--list-tools`.
pub(crate) async fn list(target: &Target) -> Result<ToolList, ProbeError> {
    if let Err(e) = target.spawn_raw() {
        return Err(ProbeError::Spawn(e));
    }
    target.kill_trees();
    let started = target.start(target.session_config()).await.map_err(ProbeError::NoTools)?;
    let (tools, _) = list_all(target, &started.session).await.map_err(ProbeError::NoTools)?;
    Ok(ToolList {
        server: target.options.command.clone(),
        era: started.opened.era.as_str(),
        tools: tools.iter().filter_map(describe_tool).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_checked_against_the_schema() {
        let schema = json!({
            "type": "object",
            "properties": { "bytes": { "type": "integer" }, "label": { "type": ["string", "null"] } },
            "required": ["bytes"],
            "additionalProperties": false,
        });
        assert!(schema_problems(&schema, &json!({ "bytes": 10 })).is_empty());
        assert!(schema_problems(&schema, &json!({ "bytes": 10, "label": null })).is_empty());
        assert_eq!(schema_problems(&schema, &json!({})), ["\"bytes\" is required"]);
        assert_eq!(schema_problems(&schema, &json!({ "bytes": "ten" })), ["\"bytes\" should be integer, not \"ten\""]);
        assert_eq!(schema_problems(&schema, &json!({ "bytes": 1, "x": 1 })), ["\"x\" is not a property of the tool"]);
        assert!(schema_problems(&json!({ "type": "object" }), &json!({ "anything": 1 })).is_empty());
    }

    #[test]
    fn suggestions_follow_names_and_schemas() {
        let dump = json!({ "name": "dump", "inputSchema": { "properties": { "bytes": { "type": "integer" } }, "required": ["bytes"] } });
        let info = describe_tool(&dump).unwrap();
        assert_eq!(info.suggestions, ["--large 'dump {\"bytes\":4000000}' (mentions \"dump\")"]);
        let sleep = json!({ "name": "nap", "description": "Sleeps for a while", "inputSchema": { "properties": { "seconds": { "type": "number" } } } });
        assert_eq!(describe_tool(&sleep).unwrap().suggestions, ["--slow 'nap {\"seconds\":10}' (mentions \"sleep\")"]);
        assert!(describe_tool(&json!({ "name": "echo" })).unwrap().suggestions.is_empty());
        // Words, not substrings: "along" is not "long", "ambiguous" not "big".
        let along = json!({ "name": "get-structured-content", "description": "Returns content along with a schema; ambiguous" });
        assert!(describe_tool(&along).unwrap().suggestions.is_empty());
        let op = json!({ "name": "trigger-long-running-operation", "inputSchema": { "properties": { "duration": { "type": "number" } } } });
        assert_eq!(
            describe_tool(&op).unwrap().suggestions,
            ["--slow 'trigger-long-running-operation {\"duration\":10}' (mentions \"duration\")"]
        );
    }
}
