//! Recovering the id of a response too large to read whole, from a bounded
//! head and tail of it.

use crate::scan::{key, known_key, skip_member_value, skip_value, skip_ws};
use crate::{Id, OwnedId};

/// Slots of the scanner's `KEYS` the recovery looks at.
const ID: usize = 1;
const METHOD: usize = 2;
const RESULT: usize = 4;
const ERROR: usize = 5;

/// The top-level `id` of a response frame of which only the first bytes
/// (`head`) and the last bytes (`tail`) are known, `len` being the frame's
/// exact length in bytes (so `len - head.len() - tail.len()` bytes between
/// them are unknown). A pure function: it allocates only for a frame wholly
/// seen and for a string id.
///
/// A host that discards a frame over its transport limit keeps such a head
/// and tail (a few KiB each) and asks this function which request the frame
/// answered, so that request can fail at once instead of waiting for its
/// timeout. Servers put the `id` near the start (Python's SDK:
/// `{"jsonrpc":"2.0","id":7,"result":…}`) or last (JavaScript's:
/// `{"result":…,"jsonrpc":"2.0","id":7}`); both are found.
///
/// # Contract
///
/// It returns `Some(id)` only when all of this holds in the bytes it saw:
///
/// * the head is the start of one JSON object, read member by member from
///   its `{` with the parser's validating scanner, and the tail is the end
///   of that object, read member by member backwards from its `}` (a value
///   is delimited backwards, then validated forwards); nothing either side
///   read is malformed;
/// * exactly one **top-level** `"id"` key was seen, with its whole value
///   (an `id` inside a nested value or inside a string is not top level and
///   is skipped with the value that holds it), and no `"id"` key was cut by
///   the unseen middle;
/// * a top-level `"result"` or `"error"` key was seen (it is a response) and
///   no top-level `"method"` key (it is not a request from the server,
///   whose ids are the server's own);
/// * the id's value is what [`Id`] deserializes with serde_json: a string
///   or an integer in the `i64` range (not `null`, a fraction, an exponent).
///
/// Otherwise it returns `None`: the id is not known safely, and the caller
/// must not guess. Keys are compared after unescaping (`"\u0069d"` is
/// `"id"`). A key, string or number that runs into the unseen middle, or a
/// backslash run that starts there (which leaves a quote's meaning unknown),
/// ends that side's reading. When `head` and `tail` cover the whole frame,
/// it is read whole and must be one JSON object.
///
/// **Guarantee** (checked by the `id_recovery` fuzz target on frames split
/// every way): for any frame that serde_json deserializes as an object with
/// at most one top-level `id`, a returned id equals that `id` (a frame with
/// two top-level `id` keys has no id for serde_json, which refuses it; one
/// of them may be hidden in the unseen middle, so no answer can be checked
/// for it). It never panics, whatever the bytes.
///
/// ```
/// use mcp_framer_jsonrpc::{recover_response_id, Id};
///
/// // JavaScript writes the id last; the middle (a huge result) is unseen.
/// let head = br#"{"result":{"content":[{"type":"text","text":"aaaa"#;
/// let tail = br#"aaaa"}]},"jsonrpc":"2.0","id":7}"#;
/// assert_eq!(recover_response_id(head, tail, 74_000_000), Some(Id::Number(7)));
///
/// // An "id" inside the result, or a server request, is not the response's id.
/// let tail = br#"aaaa","id":7}]}}"#;
/// assert_eq!(recover_response_id(head, tail, 74_000_000), None);
/// let head = br#"{"jsonrpc":"2.0","id":7,"method":"sampling/createMessage","params":{"x":""#;
/// assert_eq!(recover_response_id(head, b"\"}}", 74_000_000), None);
/// ```
pub fn recover_response_id(head: &[u8], tail: &[u8], len: u64) -> Option<OwnedId> {
    let seen_len = head.len() as u64 + tail.len() as u64;
    if seen_len > len {
        return None;
    }
    let (front, back) = if seen_len == len {
        let whole = [head, tail].concat();
        let front = forward(&whole)?;
        if front.end.is_none_or(|end| !is_blank(&whole[end..])) {
            return None;
        }
        return decide(&front, &Seen::default());
    } else {
        (forward(head)?, backward(tail)?)
    };
    match (front.end, back.end) {
        // The whole object lies on one side: the rest must be blank.
        (Some(end), _) => (is_blank(&head[end..]) && is_blank(tail)).then(|| decide(&front, &Seen::default()))?,
        (None, Some(start)) => (is_blank(head) && is_blank(&tail[..start])).then(|| decide(&Seen::default(), &back))?,
        (None, None) => decide(&front, &back),
    }
}

/// What one side's reading found among the top-level members.
#[derive(Debug, Default)]
struct Seen<'a> {
    /// Top-level `id` keys seen with their whole value.
    ids: usize,
    /// The raw JSON of the first of them (in reading order).
    id: Option<&'a [u8]>,
    /// A top-level `id` key whose value the unseen middle cut.
    id_cut: bool,
    /// A top-level `result` or `error` key.
    reply: bool,
    /// A top-level `method` key.
    method: bool,
    /// Reading reached the object's other end: the index after its `}`
    /// (forward) or of its `{` (backward).
    end: Option<usize>,
}

impl<'a> Seen<'a> {
    /// Notes a top-level key, and for `id` its whole value.
    fn note(&mut self, slot: Option<usize>, value: &'a [u8]) {
        match slot {
            Some(ID) => {
                self.ids += 1;
                self.id.get_or_insert(value);
            }
            Some(METHOD) => self.method = true,
            Some(RESULT | ERROR) => self.reply = true,
            _ => {}
        }
    }
}

/// The rules of the contract over what both sides saw.
fn decide(front: &Seen<'_>, back: &Seen<'_>) -> Option<OwnedId> {
    if front.id_cut || back.id_cut || front.ids + back.ids != 1 {
        return None;
    }
    if !(front.reply || back.reply) || front.method || back.method {
        return None;
    }
    let raw = front.id.or(back.id)?;
    serde_json::from_slice::<Id<'_>>(raw).ok().map(Id::into_owned)
}

fn is_blank(b: &[u8]) -> bool {
    b.iter().all(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r'))
}

/// Whether the scanner stopped because the bytes ran out (not on a byte that
/// is not JSON).
fn ran_out(at: usize, b: &[u8]) -> bool {
    at >= b.len()
}

/// Reads the top-level members of the object that `b` starts, from its `{`,
/// until `b` ends or the object does. `None` if `b` is not the start of a
/// JSON object.
fn forward(b: &[u8]) -> Option<Seen<'_>> {
    let mut seen = Seen::default();
    let mut i = skip_ws(b, 0);
    match b.get(i) {
        None => return Some(seen),
        Some(b'{') => {}
        Some(_) => return None,
    }
    i = skip_ws(b, i + 1);
    if b.get(i) == Some(&b'}') {
        seen.end = Some(i + 1);
        return Some(seen);
    }
    loop {
        let (key, after_colon) = match key(b, i) {
            Ok(found) => found,
            Err(at) => return ran_out(at, b).then_some(seen),
        };
        let slot = known_key(&b[key.raw], key.escaped);
        let start = skip_ws(b, after_colon);
        let end = match skip_member_value(b, start) {
            Ok((end, _)) => end,
            Err(at) if ran_out(at, b) => {
                seen.note(slot.filter(|&slot| slot != ID), b"");
                seen.id_cut |= slot == Some(ID);
                return Some(seen);
            }
            Err(_) => return None,
        };
        i = skip_ws(b, end);
        match b.get(i) {
            // A number may go on in the unseen bytes.
            None => {
                seen.note(slot.filter(|&slot| slot != ID), b"");
                seen.id_cut |= slot == Some(ID);
                return Some(seen);
            }
            Some(b',' | b'}') => seen.note(slot, &b[start..end]),
            Some(_) => return None,
        }
        if b[i] == b'}' {
            seen.end = Some(i + 1);
            return Some(seen);
        }
        i = skip_ws(b, i + 1);
    }
}

/// Where a backward step landed.
enum Back {
    /// The index of the first byte of what was delimited.
    At(usize),
    /// The bytes ran out before it was certain (it starts in the unseen
    /// middle, or a backslash run before a quote does).
    Cut,
    /// Not the end of a JSON object.
    Invalid,
}

/// The index before the whitespace that ends at `j`.
fn rskip_ws(b: &[u8], mut j: usize) -> usize {
    while j > 0 && matches!(b[j - 1], b' ' | b'\t' | b'\n' | b'\r') {
        j -= 1;
    }
    j
}

/// The opening quote of the string whose closing quote is at `close`: the
/// nearest quote before it preceded by an even run of backslashes (in JSON
/// text every quote inside a string is escaped, the opening one never is).
fn string_start(b: &[u8], close: usize) -> Back {
    let mut k = close;
    loop {
        let Some(quote) = b[..k].iter().rposition(|&c| c == b'"') else { return Back::Cut };
        let mut run = quote;
        while run > 0 && b[run - 1] == b'\\' {
            run -= 1;
        }
        if run == 0 {
            // The quote, or its backslash run, may continue the unseen bytes.
            return Back::Cut;
        }
        if (quote - run) % 2 == 0 {
            return Back::At(quote);
        }
        k = run;
    }
}

/// The start of the JSON value that ends just before `j` (`j > 0`). Only
/// delimits: the caller validates the value forwards.
fn value_start(b: &[u8], j: usize) -> Back {
    let last = j - 1;
    let start = match b[last] {
        b'"' => return string_start(b, last),
        b'0'..=b'9' => {
            let mut k = last;
            while k > 0 && matches!(b[k - 1], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E') {
                k -= 1;
            }
            k
        }
        b'e' | b'l' => {
            let Some(word) = [&b"true"[..], b"false", b"null"].into_iter().find(|word| b[..j].ends_with(word)) else {
                return Back::Invalid;
            };
            j - word.len()
        }
        b'}' | b']' => {
            let mut depth = 0usize;
            let mut k = j;
            loop {
                if k == 0 {
                    return Back::Cut;
                }
                k -= 1;
                match b[k] {
                    b'}' | b']' => depth += 1,
                    b'{' | b'[' => {
                        depth -= 1;
                        if depth == 0 {
                            break k;
                        }
                    }
                    b'"' => match string_start(b, k) {
                        Back::At(open) => k = open,
                        other => return other,
                    },
                    _ => {}
                }
            }
        }
        _ => return Back::Invalid,
    };
    // Nothing before it in `b`: what precedes may be in the unseen bytes.
    if start == 0 { Back::Cut } else { Back::At(start) }
}

/// Reads the top-level members of the object that `b` ends, backwards from
/// its `}`, until `b` starts or the object does. `None` if `b` is not the end
/// of a JSON object.
fn backward(b: &[u8]) -> Option<Seen<'_>> {
    let mut seen = Seen::default();
    let mut j = rskip_ws(b, b.len());
    if j == 0 {
        return Some(seen);
    }
    if b[j - 1] != b'}' {
        return None;
    }
    j -= 1;
    let mut first = true;
    loop {
        j = rskip_ws(b, j);
        if j == 0 {
            return Some(seen);
        }
        if first && b[j - 1] == b'{' {
            seen.end = Some(j - 1);
            return Some(seen);
        }
        first = false;
        let start = match value_start(b, j) {
            Back::At(start) => start,
            Back::Cut => return Some(seen),
            Back::Invalid => return None,
        };
        if skip_value(b, start) != Ok(j) {
            return None;
        }
        let colon = rskip_ws(b, start);
        if colon == 0 {
            return Some(seen);
        }
        if b[colon - 1] != b':' {
            return None;
        }
        let close = rskip_ws(b, colon - 1);
        if close == 0 {
            return Some(seen);
        }
        if b[close - 1] != b'"' {
            return None;
        }
        let open = match string_start(b, close - 1) {
            Back::At(open) => open,
            Back::Cut => return Some(seen),
            Back::Invalid => return None,
        };
        match key(b, open) {
            Ok((key, after_colon)) if after_colon == colon => {
                seen.note(known_key(&b[key.raw], key.escaped), &b[start..j]);
            }
            _ => return None,
        }
        let before = rskip_ws(b, open);
        if before == 0 {
            return Some(seen);
        }
        match b[before - 1] {
            b',' => j = before - 1,
            b'{' => {
                seen.end = Some(before - 1);
                return Some(seen);
            }
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every split of `frame` into a head of `h` bytes and a tail of `t`.
    fn all_splits(frame: &str) -> impl Iterator<Item = (usize, usize)> + '_ {
        (0..=frame.len()).flat_map(move |h| (0..=frame.len() - h).map(move |t| (h, t)))
    }

    fn recover(frame: &str, h: usize, t: usize) -> Option<OwnedId> {
        let b = frame.as_bytes();
        recover_response_id(&b[..h], &b[b.len() - t..], b.len() as u64)
    }

    #[test]
    fn ids_first_or_last_are_found_with_a_gap() {
        let python = r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"xxxxxxxxxxxxxxxx"}]}}"#;
        let javascript =
            r#"{"result":{"content":[{"type":"text","text":"xxxxxxxxxxxxxxxx"}]},"jsonrpc":"2.0","id":"a\"b"}"#;
        assert_eq!(recover(python, 40, 5), Some(Id::Number(7)));
        assert_eq!(recover(javascript, 20, 30), Some(Id::from("a\"b")));
        let seven = python.find('7').unwrap();
        let result_key = python.find("\"result\":").unwrap() + 9;
        assert_eq!(recover(python, seven + 1, 5), None, "the id may go on in the gap");
        assert_eq!(recover(python, result_key - 1, 5), None, "no result key yet");
        assert_eq!(recover(python, result_key, 5), Some(Id::Number(7)));
        assert_eq!(recover(javascript, 5, 8), None, "the id string starts in the gap");
        for frame in [python, javascript] {
            assert!(recover(frame, frame.len(), 0).is_some());
            assert!(recover(frame, 0, frame.len()).is_some());
        }
    }

    #[test]
    fn never_disagrees_with_serde_json_on_any_split() {
        let frames = [
            r#"{"jsonrpc":"2.0","id":7,"result":{"id":8,"s":"\"id\":9,"}}"#,
            r#"{"result":["\\\"id\\\":3",{"id":4}],"jsonrpc":"2.0","id":-12}"#,
            r#" { "\u0069d" : "x\\" , "error" : {"code":1,"message":"id"} } "#,
            r#"{"id":1,"result":true,"id":2}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"x","params":{"id":3}}"#,
            r#"{"result":null,"id":1.0}"#,
            r#"{"result":[true,false,null,-0.5e3,{}],"id":"\u00e9"}"#,
        ];
        for frame in frames {
            let top: Result<Top, _> = serde_json::from_str(frame);
            let value: serde_json::Value = serde_json::from_str(frame).unwrap();
            for (h, t) in all_splits(frame) {
                let Some(id) = recover(frame, h, t) else { continue };
                // Two top-level ids (one may be unseen): serde_json refuses it.
                let Ok(top) = top.as_ref() else { continue };
                assert_eq!(top.id.as_ref(), Some(&serde_json::to_value(&id).unwrap()), "{frame} ({h}, {t})");
                assert!(value.get("result").is_some() || value.get("error").is_some());
            }
        }
        let after = |frame: &str, pattern: &str| frame.find(pattern).unwrap() + pattern.len();
        assert_eq!(recover(frames[0], after(frames[0], "\"result\":"), 0), Some(Id::Number(7)));
        assert_eq!(recover(frames[2], after(frames[2], "\"error\" :"), 0), Some(Id::from("x\\")));
        assert_eq!(recover(frames[3], 8, 8), None, "two ids");
        assert_eq!(recover(frames[4], frames[4].len(), 0), None, "a request");
        assert_eq!(recover(frames[5], 0, 10), None, "not an id");
    }

    #[derive(serde::Deserialize)]
    struct Top {
        #[serde(default)]
        id: Option<serde_json::Value>,
    }

    #[test]
    fn garbage_and_inconsistent_lengths_give_none() {
        assert_eq!(recover_response_id(b"{\"id\":1,", b"\"result\":1}", 5), None);
        assert_eq!(recover_response_id(b"[", b"]", 100), None);
        assert_eq!(recover_response_id(b"", b"", 100), None);
        assert_eq!(recover_response_id(b"{\"id\":1,\"result\":", b"x}", 100), None);
        assert_eq!(recover_response_id(b"{\"id\":1,\"result\":", b"\\\"x\"}", 100), Some(Id::Number(1)));
    }
}
