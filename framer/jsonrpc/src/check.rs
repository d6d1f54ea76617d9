//! Differential check of the two JSON-RPC parsers (feature `check`,
//! unstable): [`parse`] (its own validating scanner, payload left
//! raw) and [`parse_in_place`] (simd-json, in place, the oracle) must
//! classify every frame alike. simd-json is reachable only through this
//! module; no stable item of the crate mentions it.
//!
//! # What is compared
//!
//! A normalised [`View`] of each outcome: for a message, its kind, id,
//! method and payload (compared as JSON values when serde_json can build
//! them: at most 128 levels deep); for an error, its kind and recovered id.
//! Error details (the parsers' wording and offsets) are not compared.
//!
//! # Documented differences
//!
//! The parser's scanner only checks the grammar of numbers and string
//! escapes in the raw payload (as serde_json does); simd-json converts every
//! number and decodes every escape. Two
//! classes of frame are therefore refused by [`parse_in_place`] as
//! [`Malformed`](ParseErrorKind::Malformed) where [`parse`] returns a
//! message or a -32600 error:
//!
//! 1. a number simd-json cannot represent: an integer outside
//!    `i64::MIN..=u64::MAX`, a number whose value overflows `f64`, or an
//!    exponent of more than about ten digits (found by
//!    [`has_unrepresentable_number`]);
//! 2. a `\u` escape of a lone surrogate (found by
//!    [`has_lone_surrogate_escape`], a scanner independent of the one
//!    [`parse_in_place`] uses to refuse them).
//!
//! For those frames the check accepts exactly that pair of outcomes, and
//! still panics on any other disagreement. Payloads are compared as decoded
//! by simd-json on both sides ([`parse`]'s raw text, the simd path's tape
//! re-encoded), so `-0` and long fractions compare by value.

use std::borrow::Cow;

use crate::{Id, Kind, OwnedId, ParseErrorKind, parse};

mod simd;
pub use simd::{InPlace, parse_in_place};

/// The outcome of one parser, reduced to what both must agree on.
#[derive(Clone, Debug, PartialEq)]
pub enum View {
    /// A message.
    Message {
        /// Its kind.
        kind: Kind,
        /// Its id.
        id: Option<OwnedId>,
        /// Its method.
        method: Option<String>,
        /// Its payload, decoded by simd-json and rendered canonically
        /// (`None` if simd-json cannot decode it).
        payload: Option<String>,
    },
    /// An error.
    Error {
        /// Its class.
        kind: ParseErrorKind,
        /// The recovered id.
        id: Option<OwnedId>,
    },
}

/// [`parse`]'s view of `frame`.
pub fn parse_view(frame: &[u8]) -> View {
    match parse(frame) {
        Ok(m) => View::Message {
            kind: m.kind(),
            id: m.id().map(Id::to_owned_id),
            method: m.method().map(ToString::to_string),
            payload: m.payload().and_then(|raw| json_value(raw.get().as_bytes().to_vec())),
        },
        Err(e) => View::Error { kind: e.kind(), id: e.id().cloned() },
    }
}

/// The simd-json path's view of `frame` (parsed in a copy).
pub fn simd_view(frame: &[u8]) -> View {
    let mut copy = frame.to_vec();
    match parse_in_place(&mut copy) {
        Ok(m) => View::Message {
            kind: m.kind(),
            id: m.id().map(Id::to_owned_id),
            method: m.method().map(ToString::to_string),
            payload: m
                .payload()
                .and_then(|value| json_value(simd_json::prelude::Writable::encode(&value).into_bytes())),
        },
        Err(e) => View::Error { kind: e.kind(), id: e.id().cloned() },
    }
}

/// Decodes a payload's JSON text with one decoder for both sides, so that
/// number text (`-0`, long fractions) compares by value, and renders it
/// canonically: object entries sorted, duplicates kept. (simd-json keeps
/// every duplicate key, and its maps compare unequal to themselves when a
/// key repeats with different values.)
fn json_value(mut text: Vec<u8>) -> Option<String> {
    simd_json::to_owned_value(&mut text).ok().as_ref().map(json_text)
}

fn json_text(value: &simd_json::OwnedValue) -> String {
    let mut out = String::new();
    canonical(value, 0, &mut out);
    out
}

/// Appends `value` with object entries sorted. Below 64 levels the rest is
/// written as is (deep frames are about nesting, not duplicate keys).
fn canonical(value: &simd_json::OwnedValue, depth: usize, out: &mut String) {
    use simd_json::prelude::{ValueAsArray, ValueAsObject, Writable};
    if depth >= 64 {
        out.push_str(&value.encode());
    } else if let Some(object) = value.as_object() {
        let mut entries: Vec<String> = object
            .iter()
            .map(|(key, item)| {
                let mut entry = serde_json::Value::from(key.as_str()).to_string();
                entry.push(':');
                canonical(item, depth + 1, &mut entry);
                entry
            })
            .collect();
        entries.sort();
        out.push('{');
        out.push_str(&entries.join(","));
        out.push('}');
    } else if let Some(array) = value.as_array() {
        out.push('[');
        for (i, item) in array.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            canonical(item, depth + 1, out);
        }
        out.push(']');
    } else {
        out.push_str(&value.encode());
    }
}

/// Panics, showing both views, unless [`parse`] and [`parse_in_place`]
/// agree on `frame` (see the module documentation for the two documented
/// differences it tolerates).
pub fn check_parse(frame: &[u8]) {
    let parsed = parse_view(frame);
    let simd = simd_view(frame);
    if parsed == simd || documented_difference(frame, &parsed, &simd) {
        return;
    }
    panic!(
        "the parsers disagree\n  frame ({} bytes): {:?}\n  parse:     {parsed:?}\n  simd-json: {simd:?}",
        frame.len(),
        excerpt(frame)
    );
}

/// The `id_recovery` fuzz target's check. `input` is two bytes, the head
/// and tail lengths (each clamped to what the frame has left), then one
/// frame. [`recover_response_id`](crate::recover_response_id) runs on that
/// split, on the whole frame, and on every split when the frame is short
/// (48 bytes or less). It must never panic, and whenever it returns an id
/// the frame must be a JSON object for serde_json, with a top-level
/// `result` or `error`, and, unless serde_json refuses it (two top-level
/// `id` keys, one possibly unseen), exactly that top-level `id`.
pub fn check_id_recovery(input: &[u8]) {
    let [h, t, frame @ ..] = input else { return };
    let len = frame.len();
    let h = usize::from(*h).min(len);
    let t = usize::from(*t).min(len - h);
    let mut splits = vec![(h, t), (len, 0), (0, len)];
    if len <= 48 {
        splits.extend((0..=len).flat_map(|h| (0..=len - h).map(move |t| (h, t))));
    }
    for (h, t) in splits {
        let recovered = crate::recover_response_id(&frame[..h], &frame[len - t..], len as u64);
        if let Some(id) = recovered {
            check_recovered(frame, h, t, &id);
        }
    }
}

/// The top-level `id` as serde_json sees it: a duplicate key is an error.
#[derive(serde::Deserialize)]
struct TopId {
    #[serde(default)]
    id: Option<serde_json::Value>,
}

fn check_recovered(frame: &[u8], h: usize, t: usize, id: &OwnedId) {
    let context = || format!("recovered {id:?} from a head of {h} and a tail of {t} bytes of {:?}", excerpt(frame));
    let value: serde_json::Value = match serde_json::from_slice(frame) {
        Ok(value) => value,
        // Not JSON: the unseen middle may hold anything; no id to compare.
        Err(_) => return,
    };
    let object = value.as_object().unwrap_or_else(|| panic!("not an object: {}", context()));
    assert!(object.contains_key("result") || object.contains_key("error"), "not a response: {}", context());
    let Ok(top) = serde_json::from_slice::<TopId>(frame) else { return };
    let expected = serde_json::to_value(id).expect("an id serializes");
    assert_eq!(top.id.as_ref(), Some(&expected), "{}", context());
}

fn documented_difference(frame: &[u8], parsed: &View, simd: &View) -> bool {
    let simd_refused = matches!(simd, View::Error { kind: ParseErrorKind::Malformed, .. });
    let parse_accepted =
        !matches!(parsed, View::Error { kind: ParseErrorKind::Malformed | ParseErrorKind::InvalidUtf8, .. });
    simd_refused && parse_accepted && (has_unrepresentable_number(frame) || has_lone_surrogate_escape(frame))
}

/// Whether `frame` has, outside strings, a number literal simd-json refuses:
/// an integer outside `i64::MIN..=u64::MAX`, a value that overflows `f64`,
/// or an exponent simd-json cannot hold (one whose digits but the last
/// exceed 2^32, as in `0e40777777777`, which is 0 to serde_json).
pub fn has_unrepresentable_number(frame: &[u8]) -> bool {
    tokens_outside_strings(frame).any(|token| {
        let Ok(text) = std::str::from_utf8(token) else { return false };
        if !token.first().is_some_and(|b| *b == b'-' || b.is_ascii_digit()) {
            return false;
        }
        if text.contains(['.', 'e', 'E']) {
            text.parse::<f64>().is_ok_and(f64::is_infinite) || exponent_too_long(text)
        } else {
            text.parse::<i64>().is_err() && text.parse::<u64>().is_err()
        }
    })
}

/// Whether the exponent of number `text` makes simd-json 0.17 give up: it
/// refuses to read another exponent digit once the value so far exceeds 2^32.
fn exponent_too_long(text: &str) -> bool {
    let Some(at) = text.find(['e', 'E']) else { return false };
    let exponent = text[at + 1..].trim_start_matches(['+', '-']);
    let Some(head) = exponent.get(..exponent.len().saturating_sub(1)) else { return false };
    let head = head.trim_start_matches('0');
    head.len() > 10 || head.parse::<u64>().is_ok_and(|n| n > 1 << 32)
}

/// Whether `frame` has, inside a string, a `\u` escape of a surrogate that
/// is not part of a high-low pair.
pub fn has_lone_surrogate_escape(frame: &[u8]) -> bool {
    let units = unicode_escapes(frame);
    let mut i = 0;
    while i < units.len() {
        let (at, unit) = units[i];
        match unit {
            0xD800..=0xDBFF => match units.get(i + 1) {
                Some(&(next_at, 0xDC00..=0xDFFF)) if next_at == at + 6 => i += 2,
                _ => return true,
            },
            0xDC00..=0xDFFF => return true,
            _ => i += 1,
        }
    }
    false
}

/// `(offset, code unit)` of every `\uXXXX` escape inside strings.
fn unicode_escapes(frame: &[u8]) -> Vec<(usize, u16)> {
    let mut out = Vec::new();
    let mut in_string = false;
    let mut i = 0;
    while i < frame.len() {
        match (in_string, frame[i]) {
            (false, b'"') | (true, b'"') => in_string = !in_string,
            (true, b'\\') => {
                if frame.get(i + 1) == Some(&b'u')
                    && let Some(hex) = frame.get(i + 2..i + 6)
                    && let Ok(unit) = u16::from_str_radix(&String::from_utf8_lossy(hex), 16)
                {
                    out.push((i, unit));
                }
                i += 1;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// Runs of non-structural, non-space bytes outside strings.
fn tokens_outside_strings(frame: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut in_string = false;
    let mut escaped = false;
    let mut mask = Vec::with_capacity(frame.len());
    for &b in frame {
        let outside = !in_string && b != b'"';
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else if b == b'"' {
            in_string = true;
        }
        mask.push(outside);
    }
    let mut start = 0;
    core::iter::from_fn(move || {
        while start < frame.len() {
            let separator = |i: usize| !mask[i] || b"{}[],: \t\r\n".contains(&frame[i]);
            while start < frame.len() && separator(start) {
                start += 1;
            }
            let end = (start..frame.len()).find(|&i| separator(i)).unwrap_or(frame.len());
            if end > start {
                let token = &frame[start..end];
                start = end;
                return Some(token);
            }
        }
        None
    })
}

fn excerpt(frame: &[u8]) -> Cow<'_, str> {
    const MAX: usize = 300;
    if frame.len() <= MAX {
        String::from_utf8_lossy(frame)
    } else {
        let head = String::from_utf8_lossy(&frame[..MAX]);
        Cow::Owned(std::format!("{head}… ({} more bytes)", frame.len() - MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Frames built to hit every rule and every known difference between
    /// the parsers.
    fn hostile_frames() -> Vec<Vec<u8>> {
        let texts: &[&str] = &[
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":[1,2,{"b":null}]}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"r\u0031"}}"#,
            r#"{"jsonrpc":"2.0","id":"x","result":{"content":[{"type":"text","text":"\"\\\/\b\f\n\r\t\u00e9\ud83e\udd80"}]}}"#,
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#,
            r#"{"jsonrpc":"2.0","id":-0,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":0.0,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":1e2,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":9223372036854775807,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":9223372036854775808,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":18446744073709551616,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":-9223372036854775809,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":[1e400]}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":123456789012345678901234567890}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":1e-400}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":0.000000000000000000000000000000000000000000000001}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":"\ud800"}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":"\udc00\ud800"}"#,
            r#"{"jsonrpc":"2.0","id":"\ud800","method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"\udfff"}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":"\u0000"}"#,
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"\u{1}\"}",
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"\t\"}",
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"\u{7f}\"}",
            r#"{"jsonrpc":"2.0","id":1,"result":"\x"}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":"\u12"}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":01}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":1.}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":-}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":+1}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":.5}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":1e}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":NaN}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":tru}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":nulll}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":[1,]}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"a":1,}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"a"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{1:2}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":1,}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":1}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":1}{}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":1} 1"#,
            r#"{"jsonrpc":"2.0" "id":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","method":"n"}"#,
            r#"{"jsonrpc":"2.0","jsonrpc":"2.0","id":1,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":1,"params":[],"params":{},"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":1,"result":2}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":{},"error":null}"#,
            r#"{"jsonrpc":"2.0","id":1,"id":1,"id":1,"method":"m"#,
            r#"{"jsonrpc":"2.0","\u006dethod":"m"}"#,
            r#"{"jsonrpc":"2.0","method":"m","x":1,"x":[2]}"#,
            r#"{"jsonrpc":"2.0","method":""}"#,
            r#"{"jsonrpc":"2.0","id":"","result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":"boom"}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":null}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":null,"error":null}"#,
            r#"{"jsonrpc":"2.0","id":false,"error":{}}"#,
            r#"{"jsonrpc":"2.0","error":{}}"#,
            r#"{"jsonrpc":"2.0","result":{}}"#,
            r#"{"jsonrpc":"2.0","id":{},"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":[],"result":{}}"#,
            r#"{"jsonrpc":"2.0","method":"m","params":7}"#,
            r#"{"jsonrpc":"2.0","method":["m"]}"#,
            r#"{"jsonrpc":"2.0"}"#,
            r#"{"jsonrpc":"2.00","id":1,"method":"m"}"#,
            r#"{"jsonrpc":"2.0\u0000","id":1,"method":"m"}"#,
            r#"{"jsonrpc":"\u0032.0","id":1,"method":"m"}"#,
            r#"{"JSONRPC":"2.0","id":1,"method":"m"}"#,
            r#"{}"#,
            r#"{ }"#,
            r#"[]"#,
            r#"[{"jsonrpc":"2.0","id":1,"method":"m"},{"jsonrpc":"2.0","method":"n"}]"#,
            r#""a""#,
            r#"1"#,
            r#"-1.5e3"#,
            r#"true"#,
            r#"null"#,
            r#"nul"#,
            "",
            " ",
            "\r",
            "\t \r ",
            "{",
            "}",
            "[",
            "\"",
            "\"\\",
            "{\"",
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"}\r",
            "\u{feff}{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"}",
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"}\u{0}",
            "\u{0}",
            "{\"jsonrpc\":\"2.0\",\u{b}\"id\":1,\"method\":\"m\"}",
            "{\"jsonrpc\":\"2.0\",\u{a0}\"id\":1,\"method\":\"m\"}",
            "{\"jsonrpc\":\"2.0\",\"id\":\"é🦀\",\"method\":\"ünïcödé\"}",
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":{\"k\":\"\u{2028}\u{2029}\"}}",
            "not json at all: a log line on stdout",
            "Traceback (most recent call last):",
        ];
        let mut frames: Vec<Vec<u8>> = texts.iter().map(|t| t.as_bytes().to_vec()).collect();
        frames.extend([
            b"\xff".to_vec(),
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"\xc3\"}".to_vec(),
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"\xed\xa0\x80\"}".to_vec(),
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"\xf4\x90\x80\x80\"}".to_vec(),
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"\xc0\xaf\"}".to_vec(),
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"abc".iter().chain(b"\xe2\x82").copied().collect(),
            b"{\"a\":\"\x01\xff".to_vec(),
            b"\"\xff".to_vec(),
            b"[\xff".to_vec(),
        ]);
        let depth = 3000;
        frames.push(format!("{}{}", "[".repeat(depth), "]".repeat(depth)).into_bytes());
        frames.push(
            format!(r#"{{"jsonrpc":"2.0","id":1,"result":{}1{}}}"#, "[".repeat(depth), "]".repeat(depth)).into_bytes(),
        );
        frames.push(format!(r#"{{"jsonrpc":"2.0","id":1,"result":{}}}"#, "[".repeat(depth)).into_bytes());
        frames.push(format!(r#"{{"jsonrpc":"2.0","id":1,"result":"{}"}}"#, "x\\\"".repeat(100_000)).into_bytes());
        frames.push(format!(r#"{{"jsonrpc":"2.0","id":1,"result":{}}}"#, "9".repeat(400)).into_bytes());
        frames.push(format!(r#"{{"jsonrpc":"2.0","id":1,"result":0.{}1}}"#, "0".repeat(400)).into_bytes());
        frames.push(format!(r#"{{"jsonrpc":"2.0","id":1,"result":1.{}}}"#, "5".repeat(800)).into_bytes());
        frames
    }

    /// Every file under the repository's `corpus/` (recursively), if any.
    fn corpus_frames() -> Vec<(String, Vec<u8>)> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../corpus");
        let mut out = Vec::new();
        let mut dirs = std::vec![root];
        while let Some(dir) = dirs.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else { continue };
            for entry in entries.flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                } else if let Ok(bytes) = std::fs::read(&path) {
                    out.push((path.display().to_string(), bytes));
                }
            }
        }
        out
    }

    #[test]
    fn parsers_agree_on_hostile_frames() {
        for frame in hostile_frames() {
            check_parse(&frame);
        }
    }

    #[test]
    fn parsers_agree_on_the_corpus_files_and_their_lines() {
        for (name, bytes) in corpus_frames() {
            let whole = std::panic::catch_unwind(|| check_parse(&bytes));
            assert!(whole.is_ok(), "corpus file {name} (whole)");
            for line in bytes.split(|&b| b == b'\n') {
                check_parse(line);
            }
        }
    }

    /// Byte mutations of valid frames (a fixed pseudo-random sequence): any
    /// disagreement panics.
    #[test]
    fn parsers_agree_on_mutated_frames() {
        let seeds = [
            &br#"{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"x","arguments":{"n":-1.5e3}}}"#[..],
            br#"{"jsonrpc":"2.0","id":"a\"b","result":{"content":[{"type":"text","text":"h\u00e9\n"}],"isError":false}}"#,
            br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"bad","data":[true,false,null]}}"#,
            br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":17,"reason":"t"}}"#,
        ];
        const ALPHABET: &[u8] = b"{}[]\",:\\ 0123456789.-+eEtrufalsn\"u\\dD8\x00\x1f\x7f\xc3\xa9\xff";
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = move |bound: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % bound as u64) as usize
        };
        for round in 0..20_000 {
            let mut frame = seeds[round % seeds.len()].to_vec();
            for _ in 0..1 + next(4) {
                let at = next(frame.len() + 1);
                match next(3) {
                    0 if at < frame.len() => {
                        frame.remove(at);
                    }
                    1 if at < frame.len() => frame[at] = ALPHABET[next(ALPHABET.len())],
                    _ => frame.insert(at, ALPHABET[next(ALPHABET.len())]),
                }
            }
            check_parse(&frame);
        }
    }

    #[test]
    fn documented_differences_are_detected_precisely() {
        assert!(has_unrepresentable_number(br#"{"a":18446744073709551616}"#));
        assert!(has_unrepresentable_number(br#"[-9223372036854775809]"#));
        assert!(has_unrepresentable_number(br#"[1e400]"#));
        assert!(!has_unrepresentable_number(br#"[18446744073709551615,-9223372036854775808,1e300,1e-400]"#));
        assert!(!has_unrepresentable_number(br#"{"a":"18446744073709551616 1e400"}"#));
        assert!(has_lone_surrogate_escape(br#"["\ud800"]"#));
        assert!(has_lone_surrogate_escape(br#"["\udc00\ud800"]"#));
        assert!(has_lone_surrogate_escape(br#"["\ud800x\udc00"]"#));
        assert!(!has_lone_surrogate_escape(br#"["\ud83e\udd80", "\\ud800"]"#));
        // The check still catches a disagreement outside those classes.
        let caught = std::panic::catch_unwind(|| {
            assert!(!documented_difference(
                br#"{"jsonrpc":"2.0","id":1,"result":1}"#,
                &View::Message { kind: Kind::Response, id: Some(Id::Number(1)), method: None, payload: None },
                &View::Error { kind: ParseErrorKind::Malformed, id: None },
            ));
        });
        assert!(caught.is_ok());
    }
}
