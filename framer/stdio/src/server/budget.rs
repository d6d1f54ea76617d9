//! Result budgets and body previews as tool results.

use std::fmt;

use serde::Serialize;
use serde_json::value::{RawValue, to_raw_value};
use serde_json::{Value, json};

use super::tool::ToolResult;
use crate::Preview;

/// Result budgets: build a tool result from an iterator of items within an
/// item cap and a byte budget, with an opaque cursor to continue; and bounded
/// previews of byte bodies as tool results ([`Preview::into_result`]).
///
/// The transport limit protects the host's memory; the content budget protects
/// the model's context and belongs in the handler, near the source of the
/// expansion. Pass limits to the source first (a `LIMIT`, a page size, a
/// max-count) and use a [`Budget`] as the contract of the result.
///
/// # Contract
///
/// * The byte budget is measured on the **serialized JSON of the whole tool
///   result** (`structuredContent`, the text block carrying the same JSON
///   escaped as a string, and the summary block), so escaping, quotes,
///   backslashes and multibyte characters all count:
///   `serde_json::to_vec(&page.into_result()).len() <= max_bytes`, always.
/// * Items are pulled one at a time and the iterator is not pulled again once
///   the page is full: at most one item beyond the page is pulled (to know
///   whether there are more). Nothing is collected and trimmed afterwards.
/// * `structuredContent` holds `items`, `nextCursor` (only when more may
///   follow), `truncated`, `totalEstimate` only when the total is known (from
///   an exact `size_hint` or [`Page::with_total`]; never invented), and
///   `skipped` when an item alone was larger than the whole budget; it is
///   described by [`Budget::output_schema`]. The first text block carries
///   the same JSON (see [`ToolResult`]'s structured results); a second one
///   says, for the model, what was returned, what was left out and how to
///   continue.
/// * An item too large for any page is skipped and reported (at most one per
///   page), so resuming always makes progress: walking from the start with
///   each `nextCursor` visits every item exactly once, returned or reported.
/// * The cursor is opaque and stable: the same position in the same query
///   always gives the same cursor, and [`Resume::from_cursor`] rejects a
///   cursor minted for another query.
///
/// ```
/// use mcp_framer_stdio::server::{Budget, Resume};
///
/// let budget = Budget::new(50, 2048);
/// let query = "name contains \"é\"";
/// let all = (0..1000).map(|i| format!("file-{i}.\"rs\"\\é"));
/// let mut seen = Vec::new();
/// let mut cursor: Option<String> = None;
/// loop {
///     let at = Resume::from_cursor(cursor.as_deref(), query)?;
///     let page = budget.page_skipping(all.clone(), &at, "files")?;
///     seen.extend(page.items().iter().map(|raw| serde_json::from_str::<String>(raw.get()).unwrap()));
///     cursor = page.next_cursor();
///     let result = page.into_result();
///     assert!(serde_json::to_vec(&result)?.len() <= 2048);
///     if cursor.is_none() {
///         break;
///     }
/// }
/// assert_eq!(seen, all.collect::<Vec<_>>());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Build one with [`Budget::new`] (`#[non_exhaustive]`: the fields may grow).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Budget {
    /// The most items in one page (at least 1).
    pub max_items: usize,
    /// The most bytes of the serialized tool result.
    pub max_bytes: usize,
}

/// Why a page could not be built.
#[derive(Debug)]
#[non_exhaustive]
pub enum BudgetError {
    /// `max_items` is 0: no page could ever make progress.
    NoItems,
    /// The budget cannot hold even an empty result with its summary.
    TooSmall {
        /// The least `max_bytes` that can.
        min_bytes: usize,
    },
    /// An item failed to serialize.
    Serialize(serde_json::Error),
}

impl fmt::Display for BudgetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BudgetError::NoItems => f.write_str("budget allows no items"),
            BudgetError::TooSmall { min_bytes } => {
                write!(f, "byte budget too small: an empty result needs {min_bytes} bytes")
            }
            BudgetError::Serialize(err) => write!(f, "item failed to serialize: {err}"),
        }
    }
}

impl std::error::Error for BudgetError {}

/// A cursor that cannot be used for this query.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CursorError {
    /// Not a cursor this module made.
    Malformed,
    /// A cursor made for another query.
    OtherQuery,
}

impl fmt::Display for CursorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CursorError::Malformed => f.write_str("malformed cursor"),
            CursorError::OtherQuery => f.write_str("cursor belongs to another query"),
        }
    }
}

impl std::error::Error for CursorError {}

const CURSOR_PREFIX: &str = "c1";

/// Where a listing starts: at the beginning, or where a cursor left off.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Resume {
    offset: u64,
    query_key: u64,
}

impl Resume {
    /// The start of `query`'s items. `query` is anything that identifies the
    /// listing (tool name and arguments, say): cursors are bound to it.
    pub fn start(query: &str) -> Resume {
        Resume { offset: 0, query_key: fnv1a(query.as_bytes()) }
    }

    /// Resumes where `cursor` left off, or starts when there is no cursor.
    pub fn from_cursor(cursor: Option<&str>, query: &str) -> Result<Resume, CursorError> {
        let start = Resume::start(query);
        let Some(cursor) = cursor else { return Ok(start) };
        let hex = cursor.strip_prefix(CURSOR_PREFIX).filter(|h| h.len() == 32).ok_or(CursorError::Malformed)?;
        let word = |i: usize| u64::from_str_radix(&hex[i..i + 16], 16).map_err(|_| CursorError::Malformed);
        let (mixed, key) = (word(0)?, word(16)?);
        if key != start.query_key {
            return Err(CursorError::OtherQuery);
        }
        Ok(Resume { offset: mixed ^ key.rotate_left(17), query_key: key })
    }

    /// How many items of the listing come before this position: skip them
    /// at the source when it can seek (`OFFSET`, a file offset, a page token).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    fn cursor_at(&self, offset: u64) -> String {
        let mixed = offset ^ self.query_key.rotate_left(17);
        format!("{CURSOR_PREFIX}{mixed:016x}{:016x}", self.query_key)
    }
}

/// FNV-1a, 64-bit: a stable hash (std's `DefaultHasher` may change between
/// releases, which would break cursors across upgrades).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// An item left out because it alone was larger than the whole budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[non_exhaustive]
pub struct Skipped {
    /// Its position in the listing (0-based).
    pub index: u64,
    /// Its serialized size in bytes (it costs about twice that in a result:
    /// once in `structuredContent`, once escaped in the text block).
    pub bytes: u64,
}

/// One page of items within a [`Budget`]; turn it into a tool result with
/// [`Page::into_result`].
#[derive(Debug)]
pub struct Page {
    items: Vec<Box<RawValue>>,
    what: String,
    at: Resume,
    /// The offset after the last item pulled into this page (returned or
    /// skipped).
    end: u64,
    /// Where the next page starts, if more may follow.
    next: Option<u64>,
    total: Option<u64>,
    skipped: Option<Skipped>,
    /// Bytes of the items' JSON, commas included.
    items_bytes: usize,
    /// What the items cost in the result: their JSON, and again escaped in
    /// the text block.
    items_cost: usize,
}

impl Budget {
    /// A budget of `max_items` items and `max_bytes` bytes.
    pub const fn new(max_items: usize, max_bytes: usize) -> Budget {
        Budget { max_items, max_bytes }
    }

    /// Builds a page from `items`, which must yield the listing's items
    /// starting at `at.offset()`; `what` names them for the model (`"matching
    /// files"`). Stops pulling as soon as the page is full. `totalEstimate` is
    /// taken from `items.size_hint()` only when that is exact.
    pub fn page<I>(&self, items: I, at: &Resume, what: &str) -> Result<Page, BudgetError>
    where
        I: IntoIterator,
        I::Item: Serialize,
    {
        if self.max_items == 0 {
            return Err(BudgetError::NoItems);
        }
        let reserve = reserve_bytes(what);
        if reserve > self.max_bytes {
            return Err(BudgetError::TooSmall { min_bytes: reserve });
        }
        let room = self.max_bytes - reserve;
        let iter = items.into_iter();
        let total = match iter.size_hint() {
            (lower, Some(upper)) if lower == upper => Some(at.offset + lower as u64),
            _ => None,
        };
        let mut page = Page {
            items: Vec::new(),
            what: what.to_owned(),
            at: *at,
            end: at.offset,
            next: None,
            total,
            skipped: None,
            items_bytes: 0,
            items_cost: 0,
        };
        for item in iter {
            if page.items.len() == self.max_items {
                page.next = Some(page.end);
                break;
            }
            let raw = to_raw_value(&item).map_err(BudgetError::Serialize)?;
            let len = raw.get().len();
            // The item, and again escaped in the text block; a comma before
            // it in both unless it is the first.
            let cost = len + escaped_len(raw.get());
            let needed = cost + 2 * usize::from(!page.items.is_empty());
            if page.items_cost + needed <= room {
                page.items_cost += needed;
                page.items_bytes += len + usize::from(!page.items.is_empty());
                page.items.push(raw);
            } else if cost > room && page.skipped.is_none() {
                page.skipped = Some(Skipped { index: page.end, bytes: len as u64 });
            } else {
                page.next = Some(page.end);
                break;
            }
            page.end += 1;
        }
        Ok(page)
    }

    /// The JSON Schema of the `structuredContent` of a page whose items
    /// follow `item_schema`: declare it with
    /// [`Tool::with_output_schema`](super::Tool::with_output_schema).
    ///
    /// ```
    /// use mcp_framer_stdio::server::Budget;
    /// let schema = Budget::output_schema(serde_json::json!({"type": "string"}));
    /// assert_eq!(schema["properties"]["items"]["items"]["type"], "string");
    /// assert_eq!(schema["required"], serde_json::json!(["items", "truncated"]));
    /// ```
    pub fn output_schema(item_schema: Value) -> Value {
        let count = json!({"type": "integer", "minimum": 0});
        json!({
            "type": "object",
            "properties": {
                "items": {"type": "array", "items": item_schema},
                "nextCursor": {"type": "string"},
                "truncated": {"type": "boolean"},
                "totalEstimate": count,
                "skipped": {
                    "type": "object",
                    "properties": {"index": count, "bytes": count},
                    "required": ["index", "bytes"],
                },
            },
            "required": ["items", "truncated"],
        })
    }

    /// As [`page`](Budget::page), for a source that cannot seek: `items`
    /// yields the listing from its start and the first `at.offset()` items
    /// are pulled and discarded.
    pub fn page_skipping<I>(&self, items: I, at: &Resume, what: &str) -> Result<Page, BudgetError>
    where
        I: IntoIterator,
        I::Item: Serialize,
    {
        let skip = usize::try_from(at.offset).unwrap_or(usize::MAX);
        self.page(items.into_iter().skip(skip), at, what)
    }
}

impl Page {
    /// The items returned, serialized.
    pub fn items(&self) -> &[Box<RawValue>] {
        &self.items
    }

    /// The cursor to continue from, when more items may follow.
    pub fn next_cursor(&self) -> Option<String> {
        self.next.map(|offset| self.at.cursor_at(offset))
    }

    /// Whether items were left out (more may follow, or one was skipped).
    pub fn is_truncated(&self) -> bool {
        self.next.is_some() || self.skipped.is_some()
    }

    /// The item skipped because it alone exceeded the budget, if any.
    pub fn skipped(&self) -> Option<Skipped> {
        self.skipped
    }

    /// The total number of items in the listing, if known.
    pub fn total(&self) -> Option<u64> {
        self.total
    }

    /// Sets the known total (say, from a `COUNT`). Never pass a guess.
    pub fn with_total(mut self, total: u64) -> Page {
        self.total = Some(total);
        self
    }

    /// The tool result: `structuredContent` with `items`, `nextCursor`,
    /// `truncated`, `totalEstimate` and `skipped`, a text block carrying the
    /// same JSON, and a text summary for the model.
    pub fn into_result(self) -> ToolResult {
        let cursor = self.next_cursor();
        let summary = Summary {
            what: &self.what,
            returned: self.items.len() as u64,
            bytes: self.items_bytes as u64 + 2,
            first: self.at.offset + 1,
            last: self.end,
            total: self.total,
            skipped: self.skipped.map(|s| (s.index + 1, s.bytes)),
            remaining: self.total.map(|total| total.saturating_sub(self.end)),
            cursor: cursor.as_deref(),
        };
        let structured = Structured {
            items: &self.items,
            next_cursor: cursor.as_deref(),
            truncated: self.is_truncated(),
            total_estimate: self.total,
            skipped: self.skipped,
        };
        result(&summary.to_string(), &structured)
    }
}

#[derive(Serialize)]
struct Structured<'a> {
    items: &'a [Box<RawValue>],
    #[serde(rename = "nextCursor", skip_serializing_if = "Option::is_none")]
    next_cursor: Option<&'a str>,
    truncated: bool,
    #[serde(rename = "totalEstimate", skip_serializing_if = "Option::is_none")]
    total_estimate: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    skipped: Option<Skipped>,
}

fn result(text: &str, structured: &Structured<'_>) -> ToolResult {
    let structured = to_raw_value(structured).expect("plain data always serializes");
    ToolResult::text(text).with_structured_raw(structured)
}

/// The text for the model. Positions are 1-based.
struct Summary<'a> {
    what: &'a str,
    returned: u64,
    bytes: u64,
    first: u64,
    last: u64,
    total: Option<u64>,
    /// Position and size of the skipped item.
    skipped: Option<(u64, u64)>,
    /// Items after this page, when the total is known.
    remaining: Option<u64>,
    cursor: Option<&'a str>,
}

impl fmt::Display for Summary<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Returned {} {} ({} bytes of JSON)", self.returned, self.what, self.bytes)?;
        if self.last >= self.first {
            write!(f, ", covering #{}-#{}", self.first, self.last)?;
        }
        if let Some(total) = self.total {
            write!(f, " of {total}")?;
        }
        f.write_str(".")?;
        if let Some((position, bytes)) = self.skipped {
            write!(f, " Left out #{position}: alone it is {bytes} bytes of JSON, too large for the budget.")?;
        }
        let Some(cursor) = self.cursor else { return f.write_str(" That is all.") };
        match self.remaining {
            Some(remaining) => write!(f, " {remaining} more remain")?,
            None => f.write_str(" More may remain (the total is not known)")?,
        }
        write!(f, "; continue with cursor \"{cursor}\", or narrow the query.")
    }
}

/// The length of `json` once escaped as the contents of a JSON string, as
/// serde_json escapes it: `"` and `\` take 2 bytes, the control characters
/// 2 (`\n`, `\r`, `\t`, `\b`, `\f`) or 6 (`\u00XX`). Per byte, so the
/// escaped length of a concatenation is the sum of the parts'.
fn escaped_len(json: &str) -> usize {
    json.bytes()
        .map(|b| match b {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 2,
            0x00..=0x1f => 6,
            _ => 1,
        })
        .sum()
}

/// The most bytes a result with no items can take for this `what`: every
/// optional part present and every number at its widest.
fn reserve_bytes(what: &str) -> usize {
    let widest = u64::MAX;
    let cursor = Resume::start("").cursor_at(widest);
    let summary = Summary {
        what,
        returned: widest,
        bytes: widest,
        first: widest,
        last: widest,
        total: Some(widest),
        skipped: Some((widest, widest)),
        remaining: Some(widest),
        cursor: Some(&cursor),
    };
    let structured = Structured {
        items: &[],
        next_cursor: Some(&cursor),
        truncated: true,
        total_estimate: Some(widest),
        skipped: Some(Skipped { index: widest, bytes: widest }),
    };
    serde_json::to_vec(&result(&summary.to_string(), &structured)).map_or(usize::MAX, |v| v.len())
}

/// Body previews as tool results (feature `server`).
impl Preview {
    /// A tool result for a preview of a byte body such as a file or an HTTP
    /// response (see [`Preview::of_prefix`]): the text kept with the
    /// [marker](Preview::marker) saying what was left out; binary data
    /// ([`is_binary`](Preview::is_binary)) is never inlined (no base64 of
    /// arbitrary downloads in `content`), only described by its size and
    /// first bytes. `structuredContent` has `shownBytes`, `totalBytes` (when
    /// [complete](Preview::is_complete)), `truncated` and `binary`
    /// ([`Preview::output_schema`]); the first text block carries that JSON,
    /// the second the preview.
    ///
    /// ```
    /// use mcp_framer_stdio::{Keep, Preview};
    ///
    /// let png = Preview::of_prefix(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR", None, 4096);
    /// assert!(png.is_binary());
    /// let result = serde_json::to_value(png.into_result()).unwrap();
    /// let text = result["content"][1]["text"].as_str().unwrap();
    /// assert!(text.starts_with("[binary data: at least 16 bytes, starting 89 50 4e 47"));
    ///
    /// let body = "é".repeat(100); // 200 bytes
    /// let text = serde_json::to_value(Preview::new(body.as_bytes(), Keep::Head(51)).into_result()).unwrap();
    /// assert_eq!(text["structuredContent"]["shownBytes"], 50);
    /// ```
    pub fn into_result(self) -> ToolResult {
        #[derive(Serialize)]
        struct Meta {
            #[serde(rename = "shownBytes")]
            shown_bytes: usize,
            #[serde(rename = "totalBytes", skip_serializing_if = "Option::is_none")]
            total_bytes: Option<u64>,
            truncated: bool,
            binary: bool,
        }
        let binary = self.is_binary();
        let meta = Meta {
            shown_bytes: if binary { 0 } else { self.head().len() + self.tail().len() },
            total_bytes: self.is_complete().then_some(self.total_bytes()),
            truncated: binary || !self.is_whole(),
            binary,
        };
        let text = if binary {
            let signature: Vec<String> = self.head().iter().take(16).map(|b| format!("{b:02x}")).collect();
            format!(
                "[binary data: {}, starting {}; not shown (binary content is never inlined): \
                 read it with a bounded byte range or save it as an artifact]",
                self.size_text(),
                signature.join(" ")
            )
        } else {
            self.to_text()
        };
        let raw = to_raw_value(&meta).expect("plain data always serializes");
        ToolResult::text(text).with_structured_raw(raw)
    }

    /// The JSON Schema of the `structuredContent` of
    /// [`into_result`](Preview::into_result): declare it with
    /// [`Tool::with_output_schema`](crate::server::Tool::with_output_schema).
    pub fn output_schema() -> Value {
        let count = json!({"type": "integer", "minimum": 0});
        json!({
            "type": "object",
            "properties": {
                "shownBytes": count,
                "totalBytes": count,
                "truncated": {"type": "boolean"},
                "binary": {"type": "boolean"},
            },
            "required": ["shownBytes", "truncated", "binary"],
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    /// Items full of what escaping inflates: quotes, backslashes, control
    /// characters, 2/3/4-byte characters; sizes vary with `i`.
    fn hostile_items(count: usize) -> Vec<Value> {
        let pieces = ["\"", "\\", "\u{1}", "\n", "é", "€", "𝄞", "🙂", "a", "\\\"", "\u{7f}", "</script>"];
        (0..count)
            .map(|i| {
                let text: String = (0..(i * 7919) % 97).map(|k| pieces[(i + k * 31) % pieces.len()]).collect();
                json!({ "index": i, "path": format!("dir \"{i}\"\\file-é.rs"), "text": text })
            })
            .collect()
    }

    fn walk(items: &[Value], budget: Budget, query: &str) -> (Vec<Value>, Vec<u64>, usize) {
        let (mut seen, mut skipped, mut pages) = (Vec::new(), Vec::new(), 0);
        let mut cursor: Option<String> = None;
        loop {
            let at = Resume::from_cursor(cursor.as_deref(), query).unwrap();
            let page = budget.page_skipping(items.iter(), &at, "matches").unwrap();
            assert!(page.items().len() <= budget.max_items);
            assert_eq!(page.total(), Some(items.len() as u64), "exact size_hint gives the total");
            seen.extend(page.items().iter().map(|raw| serde_json::from_str::<Value>(raw.get()).unwrap()));
            skipped.extend(page.skipped().map(|s| s.index));
            cursor = page.next_cursor();
            let truncated = page.is_truncated();
            let result = page.into_result();
            let bytes = serde_json::to_vec(&result).unwrap();
            assert!(bytes.len() <= budget.max_bytes, "{} > {}", bytes.len(), budget.max_bytes);
            let parsed: Value = serde_json::from_slice(&bytes).unwrap();
            let structured = &parsed["structuredContent"];
            let carried: Value = serde_json::from_str(parsed["content"][0]["text"].as_str().unwrap()).unwrap();
            assert_eq!(&carried, structured, "the first text block carries the structured JSON");
            assert_eq!(structured["truncated"], json!(truncated));
            assert_eq!(structured.get("nextCursor").and_then(Value::as_str), cursor.as_deref());
            pages += 1;
            assert!(pages <= items.len() + 1, "no progress");
            if cursor.is_none() {
                return (seen, skipped, pages);
            }
        }
    }

    #[test]
    fn walking_the_cursors_visits_every_item_once_within_budget() {
        let items = hostile_items(400);
        // Each item costs its JSON twice (structuredContent and the text block).
        for (max_items, max_bytes) in [(1, 3000), (7, 4000), (50, 8192), (1000, 16 * 1024), (1000, 1 << 20)] {
            let budget = Budget::new(max_items, max_bytes);
            let (seen, skipped, pages) = walk(&items, budget, "q");
            assert!(skipped.is_empty(), "every item fits in {max_bytes} bytes");
            assert_eq!(seen, items, "budget {budget:?}: every item exactly once, in order");
            assert!(pages >= items.len().div_ceil(max_items));
        }
    }

    #[test]
    fn items_larger_than_the_budget_are_skipped_and_reported() {
        let mut items = hostile_items(30);
        items[0] = json!({"big": "\"".repeat(3000)}); // 6000+ bytes escaped
        items[11] = json!({"big": "é".repeat(4000)});
        items[12] = json!({"big": "\\".repeat(5000)});
        let budget = Budget::new(10, 2500);
        let (seen, skipped, _) = walk(&items, budget, "q");
        assert_eq!(skipped, vec![0, 11, 12]);
        let expected: Vec<Value> =
            items.iter().enumerate().filter(|(i, _)| ![0, 11, 12].contains(i)).map(|(_, v)| v.clone()).collect();
        assert_eq!(seen, expected);
    }

    #[test]
    fn the_budget_is_measured_on_escaped_json() {
        // 100 quotes are 100 bytes of text but 202 bytes of JSON, and 404
        // more once that JSON is escaped again in the text block.
        let item = "\"".repeat(100);
        assert_eq!(escaped_len(&serde_json::to_string(&item).unwrap()), 404);
        let at = Resume::start("q");
        let reserve = reserve_bytes("items");
        let exact = reserve + 3 * (202 + 404) + 2 * 2; // two commas in each copy
        let budget = Budget::new(100, exact);
        let page = budget.page(std::iter::repeat_n(&item, 10), &at, "items").unwrap();
        assert_eq!(page.items().len(), 3);
        assert_eq!(page.next_cursor(), Some(at.cursor_at(3)));
        assert!(serde_json::to_vec(&page.into_result()).unwrap().len() <= budget.max_bytes);
        let short = Budget::new(100, exact - 1).page(std::iter::repeat_n(&item, 10), &at, "items").unwrap();
        assert_eq!(short.items().len(), 2, "one byte less: the third no longer fits");
    }

    #[test]
    fn stops_pulling_once_the_page_is_full() {
        let mut pulled = 0;
        let source = std::iter::from_fn(|| {
            pulled += 1;
            Some(pulled)
        });
        let page = Budget::new(5, 1 << 20).page(source, &Resume::start("q"), "numbers").unwrap();
        assert_eq!(page.items().len(), 5);
        assert_eq!(pulled, 6, "one item past the page, to know that more follow");
        assert_eq!(page.total(), None, "an endless source has no total");
        let text = serde_json::to_value(page.into_result()).unwrap();
        assert_eq!(text["structuredContent"].get("totalEstimate"), None, "no invented total");
        let summary = text["content"][1]["text"].as_str().unwrap();
        assert!(summary.starts_with("Returned 5 numbers ("), "{summary}");
        assert!(summary.contains("More may remain (the total is not known); continue with cursor \"c1"), "{summary}");
    }

    #[test]
    fn last_page_says_that_is_all() {
        let page = Budget::new(10, 4096).page([1, 2, 3], &Resume::start("q"), "numbers").unwrap();
        assert!(!page.is_truncated() && page.next_cursor().is_none());
        let value = serde_json::to_value(page.into_result()).unwrap();
        assert_eq!(value["structuredContent"], json!({"items": [1, 2, 3], "truncated": false, "totalEstimate": 3}));
        assert_eq!(value["content"][0]["text"], r#"{"items":[1,2,3],"truncated":false,"totalEstimate":3}"#);
        assert_eq!(
            value["content"][1]["text"],
            "Returned 3 numbers (7 bytes of JSON), covering #1-#3 of 3. That is all."
        );
    }

    #[test]
    fn cursors_are_stable_and_bound_to_their_query() {
        let at = Resume::start("query A");
        let cursor = at.cursor_at(42);
        assert_eq!(cursor, Resume::start("query A").cursor_at(42), "stable");
        assert_eq!(Resume::from_cursor(Some(&cursor), "query A").unwrap().offset(), 42);
        assert_eq!(Resume::from_cursor(Some(&cursor), "query B"), Err(CursorError::OtherQuery));
        for bad in ["", "c1", "x1abc", &cursor[..cursor.len() - 1], &format!("{cursor}0"), &cursor.replace('c', "z")] {
            assert_eq!(Resume::from_cursor(Some(bad), "query A"), Err(CursorError::Malformed), "{bad:?}");
        }
        assert_eq!(Resume::from_cursor(None, "query A").unwrap().offset(), 0);
    }

    #[test]
    fn degenerate_budgets_are_errors() {
        let at = Resume::start("q");
        assert!(matches!(Budget::new(0, 4096).page([1], &at, "x"), Err(BudgetError::NoItems)));
        let Err(BudgetError::TooSmall { min_bytes }) = Budget::new(5, 10).page([1], &at, "x") else { panic!() };
        assert!(Budget::new(5, min_bytes).page([1], &at, "x").is_ok());
    }

    #[test]
    fn byte_previews_are_bounded_and_honest() {
        let text = Preview::of_prefix(b"hello world", Some(11), 100);
        assert!(text.is_whole() && text.marker().is_none());
        let result = serde_json::to_value(text.into_result()).unwrap();
        assert_eq!(result["content"][1]["text"], "hello world");
        assert_eq!(
            result["structuredContent"],
            json!({"shownBytes": 11, "totalBytes": 11, "truncated": false, "binary": false})
        );

        let cut = Preview::of_prefix("aé€𝄞".as_bytes(), None, 5);
        let result = serde_json::to_value(cut.into_result()).unwrap();
        assert_eq!(
            result["content"][1]["text"], "aé\n[preview: first 3 of at least 10 bytes; at least 7 bytes not shown]",
            "cut before the 3-byte char"
        );
        assert_eq!(result["structuredContent"], json!({"shownBytes": 3, "truncated": true, "binary": false}));

        let binary = Preview::of_prefix(&[0xff, 0xfe, 0, 1], Some(1 << 30), 100);
        assert!(binary.is_binary());
        let result = serde_json::to_value(binary.into_result()).unwrap();
        let shown = result["content"][1]["text"].as_str().unwrap();
        assert!(shown.starts_with("[binary data: 1073741824 bytes, starting ff fe 00 01; not shown"), "{shown}");
        assert_eq!(
            result["structuredContent"],
            json!({"shownBytes": 0, "totalBytes": 1073741824u64, "truncated": true, "binary": true})
        );

        let nul = Preview::of_prefix(b"text\0more", Some(9), 100);
        assert!(nul.is_binary(), "NUL bytes are not text");
        let whole_binary = serde_json::to_value(nul.into_result()).unwrap();
        assert_eq!(whole_binary["structuredContent"]["truncated"], true, "binary is never shown, so never whole");
    }
}
