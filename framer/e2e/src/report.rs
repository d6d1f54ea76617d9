//! Report lines: the machine-readable lines the fixtures write on stderr,
//! `<tag>: <JSON object>` on one line.
//!
//! stderr is the fixtures' only side channel (stdout is the protocol
//! stream, and may be deliberately blocked), so whatever a test needs to
//! know from it is a report line, parsed as JSON, never prose matched by
//! wording. Each line is written with a single `write_all`, so lines from
//! different threads never interleave inside one process.

use std::io::{self, Write};

use serde_json::Value;

/// The line for `tag` and `fields` (no trailing `\n`).
pub fn line(tag: &str, fields: &Value) -> String {
    format!("{tag}: {fields}")
}

/// Writes the report line for `tag` and `fields` to stderr, with its `\n`,
/// in one `write_all`. Errors are ignored: stderr is diagnostics only.
pub fn emit(tag: &str, fields: &Value) {
    let mut text = line(tag, fields);
    text.push('\n');
    let _ = io::stderr().lock().write_all(text.as_bytes());
}

/// The fields of `line` if it is a report line for `tag` whose JSON parses.
pub fn parse(line: &str, tag: &str) -> Option<Value> {
    let json = line.strip_prefix(tag)?.strip_prefix(": ")?;
    serde_json::from_str(json).ok()
}

/// The fields of every report line for `tag` in `text`, in order.
pub fn all<'a>(text: &'a str, tag: &'a str) -> impl Iterator<Item = Value> + 'a {
    text.lines().filter_map(move |line| parse(line, tag))
}

/// The fields of the last report line for `tag` in `text`.
pub fn last(text: &str, tag: &str) -> Option<Value> {
    all(text, tag).last()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn lines_round_trip_and_other_lines_do_not_parse() {
        let fields = json!({"id": "a\"b", "bytes": 3});
        let text =
            format!("prose\n{}\nstats: not json\nstatsx: {{}}\n{}\n", line("stats", &fields), line("x", &json!({})));
        assert_eq!(all(&text, "stats").collect::<Vec<_>>(), [fields]);
        assert_eq!(last(&text, "x"), Some(json!({})));
        assert_eq!(parse("prose", "stats"), None);
    }
}
