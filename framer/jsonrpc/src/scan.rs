//! A validating JSON scanner: finds the top-level object's keys and value
//! spans, and checks the JSON grammar of everything else without building
//! anything.
//!
//! It accepts exactly what serde_json accepts (RFC 8259: no trailing
//! commas, no leading zeros, no raw control characters in strings, any
//! nesting depth), on text already known to be UTF-8. A `\u` escape is
//! checked for its four hex digits only: a lone surrogate is grammatical
//! JSON, as in serde_json's raw values. Errors are the byte offset where the
//! text stopped being JSON.
//!
//! It exists because the parser's cost is this scan: serde_json's own skip
//! (`IgnoredAny`, `&RawValue`) does more work, mostly per short string and
//! per escape.

/// The keys that route a message, in the order of [`TopLevel::values`].
pub(crate) const KEYS: [&str; 6] = ["jsonrpc", "id", "method", "params", "result", "error"];

/// The top-level object of a frame.
#[derive(Debug, Default)]
pub(crate) struct TopLevel<'a> {
    /// The JSON text of each of [`KEYS`] present, without surrounding
    /// whitespace.
    pub(crate) values: [Option<&'a str>; 6],
    /// Bit `slot` set: the value of `KEYS[slot]` is a string with escapes,
    /// which must be decoded; a string without one is its own content.
    pub(crate) escaped: u8,
    /// The first of [`KEYS`] that appeared twice.
    pub(crate) duplicate: Option<&'static str>,
}

impl TopLevel<'_> {
    /// Whether the value of `KEYS[slot]` is a string with escapes.
    pub(crate) fn is_escaped(&self, slot: usize) -> bool {
        self.escaped >> slot & 1 == 1
    }
}

/// Why [`top_level`] refused a text.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ScanError {
    /// Not JSON: the offset where it stopped being JSON.
    Malformed(usize),
    /// One JSON value, but not an object.
    NotAnObject,
}

/// Scans `text`, which must be exactly one JSON object with optional
/// surrounding whitespace, and returns the spans of its routing keys.
pub(crate) fn top_level(text: &str) -> Result<TopLevel<'_>, ScanError> {
    let b = text.as_bytes();
    let mut i = skip_ws(b, 0);
    if b.get(i) != Some(&b'{') {
        let end = skip_value(b, i).map_err(ScanError::Malformed)?;
        return match skip_ws(b, end) {
            end if end == b.len() => Err(ScanError::NotAnObject),
            end => Err(ScanError::Malformed(end)),
        };
    }
    let mut top = TopLevel::default();
    i = skip_ws(b, i + 1);
    if b.get(i) == Some(&b'}') {
        i += 1;
    } else {
        loop {
            let (key, after_colon) = key(b, i).map_err(ScanError::Malformed)?;
            let start = skip_ws(b, after_colon);
            let (end, escaped) = skip_member_value(b, start).map_err(ScanError::Malformed)?;
            if let Some(slot) = known_key(&b[key.raw.clone()], key.escaped) {
                if top.values[slot].is_some() {
                    top.duplicate = top.duplicate.or(Some(KEYS[slot]));
                }
                top.values[slot] = Some(&text[start..end]);
                top.escaped = top.escaped & !(1 << slot) | u8::from(escaped) << slot;
            }
            i = skip_ws(b, end);
            match b.get(i) {
                Some(b',') => i = skip_ws(b, i + 1),
                Some(b'}') => {
                    i += 1;
                    break;
                }
                _ => return Err(ScanError::Malformed(i)),
            }
        }
    }
    match skip_ws(b, i) {
        end if end == b.len() => Ok(top),
        end => Err(ScanError::Malformed(end)),
    }
}

/// [`skip_value`] for a top-level member's value, with the routing fields'
/// usual scalars (strings, numbers) skipped without its container machinery.
/// Returns the index after the value and whether it is a string with
/// escapes.
#[inline(always)]
pub(crate) fn skip_member_value(b: &[u8], i: usize) -> Result<(usize, bool), usize> {
    match b.get(i) {
        Some(b'"') => {
            let end = skip_plain(b, i + 1);
            if b.get(end) == Some(&b'"') {
                Ok((end + 1, false))
            } else {
                skip_escaped_string(b, end).map(|end| (end, true))
            }
        }
        Some(b'-' | b'0'..=b'9') => skip_number(b, i).map(|end| (end, false)),
        _ => skip_value(b, i).map(|end| (end, false)),
    }
}

/// Which of [`KEYS`] a key's raw content (between its quotes) names,
/// comparing after unescaping (when it has escapes).
#[inline(always)]
pub(crate) fn known_key(raw: &[u8], escaped: bool) -> Option<usize> {
    if escaped {
        let raw = core::str::from_utf8(raw).ok()?;
        let decoded: String = serde_json::from_str(&format!("\"{raw}\"")).ok()?;
        return KEYS.iter().position(|k| *k == decoded);
    }
    // One length switch and a word compare, not six string comparisons.
    match raw {
        b"jsonrpc" => Some(0),
        b"id" => Some(1),
        b"method" => Some(2),
        b"params" => Some(3),
        b"result" => Some(4),
        b"error" => Some(5),
        _ => None,
    }
}

/// The index of the first non-whitespace byte at or after `i`. Compact JSON
/// has none: one comparison decides.
#[inline(always)]
pub(crate) fn skip_ws(b: &[u8], mut i: usize) -> usize {
    if b.get(i).is_some_and(|&c| c > b' ') {
        return i;
    }
    while let Some(b' ' | b'\t' | b'\n' | b'\r') = b.get(i) {
        i += 1;
    }
    i
}

/// An object key as [`key`] found it.
pub(crate) struct Key {
    /// The key's raw content, between its quotes.
    pub(crate) raw: core::ops::Range<usize>,
    /// Whether the content has escapes (so must be decoded to compare).
    pub(crate) escaped: bool,
}

/// A key at `i` (a string), whitespace, and a `:`: returns the key and the
/// index after the colon.
#[inline(always)]
pub(crate) fn key(b: &[u8], i: usize) -> Result<(Key, usize), usize> {
    if b.get(i) != Some(&b'"') {
        return Err(i);
    }
    let plain = skip_plain(b, i + 1);
    let (end, escaped) =
        if b.get(plain) == Some(&b'"') { (plain + 1, false) } else { (skip_escaped_string(b, plain)?, true) };
    let colon = skip_ws(b, end);
    if b.get(colon) != Some(&b':') {
        return Err(colon);
    }
    Ok((Key { raw: i + 1..end - 1, escaped }, colon + 1))
}

/// Validates one JSON value starting at `i` and returns the index after it.
/// Iterative: nesting depth costs one bit per level, not stack frames.
pub(crate) fn skip_value(b: &[u8], mut i: usize) -> Result<usize, usize> {
    let mut open = Nesting::default();
    'value: loop {
        match b.get(i) {
            Some(b'"') => i = skip_string(b, i + 1)?,
            Some(b'{') => {
                i = skip_ws(b, i + 1);
                if b.get(i) == Some(&b'}') {
                    i += 1;
                } else {
                    open.push(true);
                    i = skip_ws(b, key(b, i)?.1);
                    continue 'value;
                }
            }
            Some(b'[') => {
                i = skip_ws(b, i + 1);
                if b.get(i) == Some(&b']') {
                    i += 1;
                } else {
                    open.push(false);
                    continue 'value;
                }
            }
            Some(b't') => i = literal(b, i, b"true")?,
            Some(b'f') => i = literal(b, i, b"false")?,
            Some(b'n') => i = literal(b, i, b"null")?,
            Some(b'-' | b'0'..=b'9') => i = skip_number(b, i)?,
            _ => return Err(i),
        }
        // After a value: close containers until one continues with a comma.
        loop {
            let Some(object) = open.top() else { return Ok(i) };
            i = skip_ws(b, i);
            match b.get(i) {
                Some(b',') => {
                    i = skip_ws(b, i + 1);
                    if object {
                        i = skip_ws(b, key(b, i)?.1);
                    }
                    continue 'value;
                }
                Some(b'}') if object => open.pop(),
                Some(b']') if !object => open.pop(),
                _ => return Err(i),
            }
            i += 1;
        }
    }
}

/// Open containers, innermost first: `true` for an object. The innermost
/// 64 levels live in a word (bit 0 the innermost); outer ones spill to the
/// heap.
#[derive(Default)]
struct Nesting {
    depth: usize,
    word: u64,
    spill: Vec<bool>,
}

impl Nesting {
    #[inline(always)]
    fn push(&mut self, object: bool) {
        if self.depth >= 64 {
            self.spill.push(self.word >> 63 == 1);
        }
        self.word = self.word << 1 | u64::from(object);
        self.depth += 1;
    }

    #[inline(always)]
    fn top(&self) -> Option<bool> {
        (self.depth != 0).then_some(self.word & 1 == 1)
    }

    #[inline(always)]
    fn pop(&mut self) {
        self.word >>= 1;
        self.depth -= 1;
        if self.depth >= 64 {
            self.word |= u64::from(self.spill.pop() == Some(true)) << 63;
        }
    }
}

fn literal(b: &[u8], i: usize, word: &[u8]) -> Result<usize, usize> {
    if b.get(i..i + word.len()) == Some(word) { Ok(i + word.len()) } else { Err(i) }
}

/// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?` at `i`.
fn skip_number(b: &[u8], mut i: usize) -> Result<usize, usize> {
    let digits = |mut i: usize| {
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        i
    };
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    match b.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => i = digits(i + 1),
        _ => return Err(i),
    }
    if b.get(i) == Some(&b'.') {
        if !b.get(i + 1).is_some_and(u8::is_ascii_digit) {
            return Err(i + 1);
        }
        i = digits(i + 1);
    }
    if let Some(b'e' | b'E') = b.get(i) {
        i += 1;
        if let Some(b'+' | b'-') = b.get(i) {
            i += 1;
        }
        if !b.get(i).is_some_and(u8::is_ascii_digit) {
            return Err(i);
        }
        i = digits(i);
    }
    Ok(i)
}

/// The rest of a string whose opening quote is before `i`: returns the
/// index after its closing quote. Inlined for the common string without
/// escapes; the escape loop is out of line.
#[inline(always)]
fn skip_string(b: &[u8], i: usize) -> Result<usize, usize> {
    let end = skip_plain(b, i);
    if b.get(end) == Some(&b'"') { Ok(end + 1) } else { skip_escaped_string(b, end) }
}

/// [`skip_string`] from a byte that is not plain (`\`, a control character
/// or the end of the text).
#[inline(never)]
fn skip_escaped_string(b: &[u8], mut i: usize) -> Result<usize, usize> {
    loop {
        match b.get(i) {
            Some(b'"') => return Ok(i + 1),
            Some(b'\\') => match b.get(i + 1).map_or(0, |&c| ESCAPE_LEN[usize::from(c)]) {
                2 => i += 2,
                6 if b.get(i + 2..i + 6).is_some_and(|hex| hex.iter().all(u8::is_ascii_hexdigit)) => i += 6,
                _ => return Err(i),
            },
            // A control character, or the end of the text.
            _ => return Err(i),
        }
        i = skip_plain(b, i);
    }
}

/// The length of an escape by the byte after its backslash: 2 for the
/// one-character escapes, 6 for `\u` (four hex digits follow), 0 for bytes
/// that start no escape. One load instead of a chain of comparisons.
const ESCAPE_LEN: [u8; 256] = {
    let mut len = [0; 256];
    let mut one_char = b"\"\\/bfnrt".as_slice();
    while let [c, rest @ ..] = one_char {
        len[*c as usize] = 2;
        one_char = rest;
    }
    len[b'u' as usize] = 6;
    len
};

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// The high bit of each byte of `word` (little-endian) that may be `"`, `\`
/// or a control character. The lowest set bit marks the first such byte
/// exactly; higher bits may be false positives (a borrow from a lower match),
/// so only the lowest is ever used.
#[inline(always)]
fn special(word: u64) -> u64 {
    let quote = word ^ (ONES * u64::from(b'"'));
    let backslash = word ^ (ONES * u64::from(b'\\'));
    (word.wrapping_sub(ONES * 0x20) & !word
        | quote.wrapping_sub(ONES) & !quote
        | backslash.wrapping_sub(ONES) & !backslash)
        & HIGH
}

/// The index of the first byte at or after `i` that is `"`, `\` or a
/// control character (or the end of `b`). Up to eight words of eight bytes
/// first (keys, ids, methods and the runs between escapes end there), then,
/// in a run that is still going, 64 bytes a step in a form the compiler
/// turns into vector compares (a long plain string: a third of the words'
/// time), then words, then bytes.
#[inline(always)]
fn skip_plain(b: &[u8], mut i: usize) -> usize {
    for _ in 0..8 {
        let Some(chunk) = b.get(i..i + 8) else { break };
        let found = special(u64::from_le_bytes(chunk.try_into().expect("8 bytes")));
        if found != 0 {
            return i + (found.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    i = skip_plain_blocks(b, i);
    while let Some(chunk) = b.get(i..i + 8) {
        let found = special(u64::from_le_bytes(chunk.try_into().expect("8 bytes")));
        if found != 0 {
            return i + (found.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while let Some(&byte) = b.get(i) {
        if byte == b'"' || byte == b'\\' || byte < 0x20 {
            break;
        }
        i += 1;
    }
    i
}

/// Bytes per step of [`skip_plain_blocks`].
const BLOCK: usize = 64;

/// The start of the first [`BLOCK`] at or after `i` that holds a byte
/// [`skip_plain`] stops at (or of the last partial block). The loop body
/// has no early exit and no data-dependent branch, so it vectorises.
#[inline(never)]
fn skip_plain_blocks(b: &[u8], mut i: usize) -> usize {
    while let Some(block) = b.get(i..i + BLOCK) {
        let mut stop = 0u8;
        for &c in block {
            stop |= u8::from(c == b'"') | u8::from(c == b'\\') | u8::from(c < 0x20);
        }
        if stop != 0 {
            break;
        }
        i += BLOCK;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The scanner's verdict on a whole text: one JSON value.
    fn valid(text: &str) -> bool {
        let b = text.as_bytes();
        skip_value(b, skip_ws(b, 0)).is_ok_and(|end| skip_ws(b, end) == b.len())
    }

    fn serde_valid(text: &str) -> bool {
        serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok()
    }

    /// Calls `check` on every UTF-8 text made from `seed` by inserting or
    /// replacing one byte, anywhere; returns how many.
    fn for_each_mutation(seed: &str, mut check: impl FnMut(&str)) -> usize {
        let mut checked = 0;
        for at in 0..=seed.len() {
            for byte in 0..=255u8 {
                for replace in [false, true] {
                    let mut bytes = seed.as_bytes().to_vec();
                    match (replace, at < bytes.len()) {
                        (false, _) => bytes.insert(at, byte),
                        (true, true) => bytes[at] = byte,
                        (true, false) => continue,
                    }
                    let Ok(text) = std::str::from_utf8(&bytes) else { continue };
                    check(text);
                    checked += 1;
                }
            }
        }
        checked
    }

    #[test]
    fn scanner_accepts_exactly_what_serde_json_accepts() {
        let seeds = [
            r#"{"a":[true,false,null,1,-2.5e3,"x\u00e9\n"],"b":{"c":0},"d":"0123456789abcdef\"\\"}"#,
            r#"[-0.0e-0,0,1E+5,10,[],{},[{}],{"k":[]}]"#,
            " { \"k\" : \"v\" , \"e\" : { } , \"f\" : [ ] } ",
            r#""\ud800\b\f\r\t\/ été 🦀""#,
        ];
        let mut checked = 0;
        for seed in seeds {
            assert!(valid(seed) && serde_valid(seed), "{seed}");
            checked += for_each_mutation(seed, |text| assert_eq!(valid(text), serde_valid(text), "{text:?}"));
        }
        assert!(checked > 40_000, "{checked}");
    }

    #[test]
    fn plain_runs_stop_at_the_first_special_byte_at_every_length_and_offset() {
        // Every path of `skip_plain`: the first eight words, 64-byte blocks
        // (from 128 bytes), whole words, then single bytes.
        let naive = |b: &[u8], i: usize| {
            b[i..].iter().position(|&c| c == b'"' || c == b'\\' || c < 0x20).map_or(b.len(), |at| i + at)
        };
        let mut checked = 0;
        for len in (0..150).chain([200, 263]) {
            let plain: Vec<u8> = (0..len).map(|k| b"abc def\x7f\xc3\xa9"[k % 9]).collect();
            for start in [0, 1, 7] {
                let start = start.min(len);
                assert_eq!(skip_plain(&plain, start), len, "no special byte, {len} bytes from {start}");
                for at in start..len {
                    for special in [b'"', b'\\', 0x00, 0x1f] {
                        let mut text = plain.clone();
                        text[at] = special;
                        if at + 3 < len {
                            text[at + 3] = b'"';
                        }
                        assert_eq!(skip_plain(&text, start), naive(&text, start), "{len} {start} {at} {special}");
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 40_000, "{checked}");
    }

    #[test]
    fn scanner_edge_cases_match_serde_json() {
        for text in [
            "",
            " ",
            "1",
            "-",
            "-0",
            "01",
            "1.",
            ".1",
            "1e",
            "1e+",
            "1E-0",
            "2.5e3",
            "tru",
            "nulls",
            "[1,]",
            "[,1]",
            "{,}",
            r#"{"a":}"#,
            r#"{"a" 1}"#,
            r#"{"a":1,}"#,
            r#"{1:1}"#,
            r#""\u12G4""#,
            r#""\x""#,
            "\"\u{7f}\"",
            "\"\t\"",
            "[1]]",
            "[[1]",
            "{}}",
            "\u{a0}1",
            "1 2",
            r#"["\"]"#,
            r#""\\""#,
            "[\"abcdefgh\\\"ijklmnop\"]",
        ] {
            assert_eq!(valid(text), serde_valid(text), "{text:?}");
        }
        // Deep nesting, past the 64 levels kept in a word, with both kinds.
        let deep = |levels: usize, close: &str| {
            let mut s = String::new();
            for level in 0..levels {
                s.push_str(if level % 3 == 0 { "{\"k\":" } else { "[" });
            }
            s.push('1');
            for level in (0..levels).rev() {
                s.push_str(if level % 3 == 0 { "}" } else { close });
            }
            s
        };
        assert!(valid(&deep(200, "]")));
        assert!(!valid(&deep(200, "}")));
        assert!(!valid(&deep(200, "]")[..deep(200, "]").len() - 1]));
    }

    /// `top_level`'s verdict on a text against serde_json's: one valid JSON
    /// value, and an object.
    fn top_level_agrees(text: &str) {
        let object = text.trim_start_matches([' ', '\t', '\n', '\r']).starts_with('{');
        assert_eq!(top_level(text).is_ok(), serde_valid(text) && object, "{text:?}");
    }

    #[test]
    fn top_level_member_values_match_serde_json_under_mutation() {
        // Every kind of top-level value (the scalar fast path and the nested
        // one), escaped and plain keys, whitespace around everything.
        let seeds = [
            r#"{"id":-12.5e+3,"jsonrpc":"2.0","method":"a\\b\u00e9","params":[1,{"k":null}]}"#,
            r#" { "\u0069d" : "x" , "result" : true , "n" : 0 , "e" : false } "#,
        ];
        let mut checked = 0;
        for seed in seeds {
            assert!(top_level(seed).is_ok(), "{seed}");
            checked += for_each_mutation(seed, top_level_agrees);
        }
        assert!(checked > 20_000, "{checked}");
    }

    #[test]
    fn every_escape_byte_and_special_offset_matches_serde_json() {
        // Each byte after a backslash, at each offset of a 16-byte window
        // (both halves of a word, and the byte-at-a-time tail), as a value
        // and as a top-level key.
        for byte in 0..=0x7fu8 {
            for offset in 0..20 {
                let pad = "a".repeat(offset);
                let c = char::from(byte);
                for text in [format!("\"{pad}\\{c}0123\""), format!("\"{pad}\\{c}\""), format!("\"{pad}{c}{pad}\"")] {
                    assert_eq!(valid(&text), serde_valid(&text), "{text:?}");
                    top_level_agrees(&format!("{{{text}:1}}"));
                }
            }
        }
        // Several escapes in one word, at every alignment, with a quote or
        // the end right after them, valid and not.
        for offset in 0..17 {
            for middle in [r"\n\t", r#"\"\\"#, r"\u00e9\n", r#"\n\""#, r"\ud83e\udd80x", r"\x", r"\u00g0", r"\\\"] {
                for tail in 0..10 {
                    let text = format!("\"{}{middle}{}\"", "a".repeat(offset), "b".repeat(tail));
                    assert_eq!(valid(&text), serde_valid(&text), "{text:?}");
                    let cut = &text[..text.len() - 1];
                    assert_eq!(valid(cut), serde_valid(cut), "{cut:?}");
                }
            }
        }
        // Long strings: plain, escape-dense, with multi-byte UTF-8, and a
        // control character or an unterminated end at every distance.
        let long = "xé\\n🦀\\\"\\u00e9ab".repeat(40);
        assert!(valid(&format!("\"{long}\"")) && serde_valid(&format!("\"{long}\"")));
        for cut in (0..long.len()).filter(|&cut| long.is_char_boundary(cut)) {
            let unterminated = format!("\"{}", &long[..cut]);
            assert_eq!(valid(&unterminated), serde_valid(&unterminated), "{unterminated:?}");
            let control = format!("\"{}\u{1}{}\"", &long[..cut], &long[cut..]);
            assert_eq!(valid(&control), serde_valid(&control), "{control:?}");
        }
    }

    #[test]
    fn top_level_finds_spans_duplicates_and_escaped_keys() {
        let top = top_level(r#" {"x":[1,{"id":2}], "\u0069d" : "a" ,"method":"m","id":3 } "#).unwrap();
        assert_eq!(top.values[1], Some("3"));
        assert_eq!(top.values[2], Some(r#""m""#));
        assert_eq!(top.duplicate, Some("id"));
        assert_eq!(top_level("[]").unwrap_err(), ScanError::NotAnObject);
        assert_eq!(top_level("{} x").unwrap_err(), ScanError::Malformed(3));
        assert_eq!(top_level(r#"{"a":1"#).unwrap_err(), ScanError::Malformed(6));
    }
}
