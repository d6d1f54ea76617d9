//! What a tool handler sees and returns: the [`Call`] context, the
//! [`ToolResult`], the [`RpcError`], and the [`Tool`] description.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_json::value::{RawValue, to_raw_value};
use tokio::process::Command;

use super::cancel::{Cancelled, Scope, ScopedChild};
use super::capture::{Capture, CaptureOptions, capture};
use super::writer::Outbox;
use mcp_framer_jsonrpc::OwnedId;

/// A tool's result: the `result` of a `tools/call` response.
///
/// Serializes as `{"content":[…],"structuredContent":…,"isError":true,"resultType":"complete"}`,
/// `structuredContent` and `isError` only when set.
///
/// # Structured results
///
/// A result with `structuredContent` follows the MCP specification's advice
/// (2025-06-18): its **first** content block is a text block carrying the
/// same JSON, serialized, for clients that read only text; a human summary,
/// if any, goes in a block after it. [`ToolResult::structured`] and
/// [`ToolResult::with_structured`] build it that way. The tool must declare
/// an [`outputSchema`](Tool::with_output_schema) in `tools/list`; the server
/// sends `structuredContent` only for a tool that does.
///
/// ```
/// use mcp_framer_stdio::server::ToolResult;
/// use serde_json::json;
///
/// let result = ToolResult::text("2 files match").with_structured(json!({"files": ["a.rs", "b.rs"]}));
/// let value = serde_json::to_value(&result)?;
/// assert_eq!(value["content"][0]["text"], r#"{"files":["a.rs","b.rs"]}"#);
/// assert_eq!(value["content"][1]["text"], "2 files match");
/// assert_eq!(value["structuredContent"], json!({"files": ["a.rs", "b.rs"]}));
/// # Ok::<(), serde_json::Error>(())
/// ```
///
/// # Tool failures
///
/// A tool that fails reports it as a result with `isError: true` and a text
/// block saying what went wrong ([`ToolResult::error`]), so the model sees
/// it; JSON-RPC errors are for protocol problems. The server turns a
/// handler's panic, and a handler's `Err` with any code but
/// [`INVALID_PARAMS`](mcp_framer_jsonrpc::INVALID_PARAMS), into such a
/// result (see [`Server::tool`](super::Server::tool)).
///
/// It serializes with `"resultType": "complete"` last: required in every
/// result from the 2026-07-28 revision on, and ignored by earlier clients.
#[derive(Clone, Debug, Default)]
pub struct ToolResult {
    /// Content blocks (`{"type":"text","text":…}` and the other MCP kinds).
    pub content: Vec<Value>,
    /// Machine-readable result, serialized once.
    pub structured_content: Option<Box<RawValue>>,
    /// Whether the tool failed (a tool error the model should see, as
    /// opposed to a protocol error, which is an [`RpcError`]).
    pub is_error: bool,
}

impl Serialize for ToolResult {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut out = serializer.serialize_struct("ToolResult", 4)?;
        out.serialize_field("content", &self.content)?;
        match &self.structured_content {
            Some(structured) => out.serialize_field("structuredContent", structured)?,
            None => out.skip_field("structuredContent")?,
        }
        if self.is_error {
            out.serialize_field("isError", &true)?;
        } else {
            out.skip_field("isError")?;
        }
        out.serialize_field("resultType", "complete")?;
        out.end()
    }
}

impl ToolResult {
    /// A result with one text block.
    pub fn text(text: impl Into<String>) -> ToolResult {
        ToolResult { content: vec![text_block(text.into())], ..ToolResult::default() }
    }

    /// A tool error with one text block (`isError: true`).
    pub fn error(text: impl Into<String>) -> ToolResult {
        ToolResult { is_error: true, ..ToolResult::text(text) }
    }

    /// A structured result: `structuredContent` is `value`, and the one text
    /// block carries it serialized.
    pub fn structured(value: &impl Serialize) -> Result<ToolResult, serde_json::Error> {
        Ok(ToolResult::default().with_structured_raw(to_raw_value(value)?))
    }

    /// Sets `structuredContent`, and puts its serialized JSON in a text block
    /// before the blocks already there (which then serve as the human
    /// summary).
    pub fn with_structured(self, value: Value) -> ToolResult {
        let raw = to_raw_value(&value).expect("a Value always serializes");
        self.with_structured_raw(raw)
    }

    /// As [`with_structured`](ToolResult::with_structured), from JSON
    /// already serialized.
    pub fn with_structured_raw(mut self, raw: Box<RawValue>) -> ToolResult {
        self.content.insert(0, text_block(raw.get().to_owned()));
        self.structured_content = Some(raw);
        self
    }
}

fn text_block(text: String) -> Value {
    let mut block = serde_json::Map::new();
    block.insert("type".into(), Value::from("text"));
    block.insert("text".into(), Value::from(text));
    Value::Object(block)
}

/// A JSON-RPC error, sent as the `error` of a response: the one error-object
/// type of [`mcp_framer_jsonrpc`], under the name handlers know it by.
///
/// Build it with [`RpcError::invalid_params`], [`RpcError::internal`] or
/// [`RpcError::new`] and a code from
/// [`mcp_framer_jsonrpc::ERROR_CODES`] (e.g.
/// [`METHOD_NOT_FOUND`](mcp_framer_jsonrpc::METHOD_NOT_FOUND)).
pub type RpcError = mcp_framer_jsonrpc::ErrorObject;

impl From<Cancelled> for RpcError {
    fn from(_: Cancelled) -> RpcError {
        // Never sent: a cancelled request gets no response.
        RpcError::new(mcp_framer_jsonrpc::INTERNAL_ERROR, "cancelled")
    }
}

/// The boxed future a handler returns.
pub(crate) type HandlerFuture = Pin<Box<dyn Future<Output = Result<ToolResult, RpcError>> + Send>>;
/// A type-erased tool handler.
pub(crate) type Handler = Arc<dyn Fn(Call) -> HandlerFuture + Send + Sync>;

/// The tools a server serves, in the order they were added, by name.
#[derive(Default)]
pub(crate) struct Tools {
    list: Vec<(Tool, Arc<str>, Handler)>,
    by_name: HashMap<String, usize>,
}

impl Tools {
    /// Adds `tool`; one of the same name is replaced, in its place.
    pub(crate) fn insert(&mut self, tool: Tool, handler: Handler) {
        let name: Arc<str> = Arc::from(tool.name.as_str());
        match self.by_name.get(&tool.name) {
            Some(&i) => self.list[i] = (tool, name, handler),
            None => {
                self.by_name.insert(tool.name.clone(), self.list.len());
                self.list.push((tool, name, handler));
            }
        }
    }

    /// The tool's name, handler, and whether it declares an output schema.
    pub(crate) fn handler(&self, name: &str) -> Option<(Arc<str>, Handler, bool)> {
        self.by_name.get(name).map(|&i| {
            let (tool, name, handler) = &self.list[i];
            (Arc::clone(name), Arc::clone(handler), tool.output_schema.is_some())
        })
    }

    /// The tools' descriptions, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Tool> {
        self.list.iter().map(|(tool, _, _)| tool)
    }
}

/// A tool as `tools/list` describes it.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct Tool {
    /// The name `tools/call` selects it by.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of its arguments.
    #[serde(rename = "inputSchema")]
    pub input_schema: Value,
    /// JSON Schema of its `structuredContent`, if it returns one. A tool
    /// without one never sends `structuredContent` (the server leaves it out
    /// of the result, logs and counts it; the text block still carries the
    /// JSON).
    #[serde(rename = "outputSchema", skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
}

impl Tool {
    /// A tool taking an object of arguments described by `input_schema`.
    pub fn new(name: impl Into<String>, description: impl Into<String>, input_schema: Value) -> Tool {
        Tool { name: name.into(), description: description.into(), input_schema, output_schema: None }
    }

    /// Declares the JSON Schema of the tool's `structuredContent` (an object
    /// schema, per MCP): required for a tool that returns one.
    /// [`Budget::output_schema`](super::Budget::output_schema) and
    /// [`Preview::output_schema`](crate::Preview::output_schema) describe
    /// the results this crate builds.
    pub fn with_output_schema(mut self, output_schema: Value) -> Tool {
        self.output_schema = Some(output_schema);
        self
    }
}

/// One `tools/call` request, as its handler sees it: the arguments, the
/// request's cancellation [`Scope`], and a way to send notifications.
///
/// Everything the handler starts through [`scope`](Call::scope) (or the
/// shortcuts here) is owned by the request: when a `notifications/cancelled`
/// arrives while it runs, the token is cancelled, child process trees are
/// killed, tasks are aborted, and the handler's own future is dropped at its
/// next `.await`. When the handler returns, whatever it started through the
/// scope and left running is stopped too. A handler doing blocking work
/// should check [`token`](Call::token) between steps.
pub struct Call {
    pub(crate) id: OwnedId,
    /// The id the dispatcher knows the request by (the client's id, or a
    /// front's key): what its notifications are tagged with.
    pub(crate) key: OwnedId,
    pub(crate) tool: Arc<str>,
    pub(crate) arguments: Option<Box<RawValue>>,
    pub(crate) progress_token: Option<Box<RawValue>>,
    pub(crate) scope: Scope,
    pub(crate) outbox: Outbox,
}

impl Call {
    /// The request id, as the client sent it.
    pub fn id(&self) -> &OwnedId {
        &self.id
    }

    /// The tool's name.
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// The `arguments` as sent (`None` when absent).
    pub fn arguments(&self) -> Option<&RawValue> {
        self.arguments.as_deref()
    }

    /// The arguments deserialized into `T` (absent arguments read as `{}`);
    /// a mismatch is an invalid-params error.
    pub fn args<T: DeserializeOwned>(&self) -> Result<T, RpcError> {
        let raw = self.arguments.as_deref().map_or("{}", RawValue::get);
        serde_json::from_str(raw).map_err(|err| RpcError::invalid_params(format!("bad arguments: {err}")))
    }

    /// The request's cancellation scope.
    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// The request's cancellation token (tokio-util's): wait on it with
    /// `cancelled().await`, or test it with `is_cancelled()`.
    pub fn token(&self) -> &tokio_util::sync::CancellationToken {
        self.scope.token()
    }

    /// [`Scope::spawn_child`] on the request's scope.
    pub fn spawn_child(&self, command: &mut Command) -> io::Result<ScopedChild> {
        self.scope.spawn_child(command)
    }

    /// [`capture`] under the request's scope.
    pub async fn capture(&self, command: &mut Command, options: CaptureOptions) -> io::Result<Capture> {
        capture(command, options, &self.scope).await
    }

    /// [`Scope::abortable`] on the request's scope.
    pub async fn abortable<F: Future>(&self, fut: F) -> Result<F::Output, Cancelled> {
        self.scope.abortable(fut).await
    }

    /// Sends a notification (`method`, `params`) to the host. Waits while the
    /// writer's queue is full; returns `false` if it could not be sent (the
    /// params do not serialize, the frame is over the limit, or stdout is
    /// closed).
    pub async fn notify(&self, method: &str, params: impl Serialize) -> bool {
        self.outbox.notify(&self.key, method, &params).await
    }

    /// Sends `notifications/progress` if the request asked for progress
    /// (`params._meta.progressToken`); returns whether one was sent.
    pub async fn progress(&self, progress: f64, total: Option<f64>, message: Option<&str>) -> bool {
        let Some(token) = self.progress_token.as_deref() else { return false };
        #[derive(Serialize)]
        struct Progress<'a> {
            #[serde(rename = "progressToken")]
            progress_token: &'a RawValue,
            progress: f64,
            #[serde(skip_serializing_if = "Option::is_none")]
            total: Option<f64>,
            #[serde(skip_serializing_if = "Option::is_none")]
            message: Option<&'a str>,
        }
        let params = Progress { progress_token: token, progress, total, message };
        self.outbox.notify(&self.key, "notifications/progress", &params).await
    }
}

impl fmt::Debug for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Call").field("id", &self.id).field("tool", &self.tool).field("scope", &self.scope).finish()
    }
}
