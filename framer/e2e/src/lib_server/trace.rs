//! A `tracing` layer that writes every event as a `trace` report line, so
//! that tests match the library's events by their fields (`id`, `state`,
//! ...) instead of by the wording of formatted prose.

use std::fmt;

use serde_json::{Map, Value, json};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer};

use super::report;

/// Writes each event as `trace: {"level","target","message",<fields>...}`.
#[derive(Debug, Default)]
pub(super) struct ReportLines;

struct Fields(Map<String, Value>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().to_owned(), json!(format!("{value:?}")));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), json!(value));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_owned(), json!(value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_owned(), json!(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().to_owned(), json!(value));
    }
}

impl<S: Subscriber> Layer<S> for ReportLines {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let meta = event.metadata();
        let mut fields = Fields(Map::new());
        fields.0.insert("level".into(), json!(meta.level().as_str()));
        fields.0.insert("target".into(), json!(meta.target()));
        event.record(&mut fields);
        crate::report::emit(report::TRACE, &Value::Object(fields.0));
    }
}
