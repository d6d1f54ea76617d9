//! Shared by the corpus generator and the corpus replay: where the corpus
//! lives and the JSON form of configs, events and counters used by the
//! conformance vectors (documented in `corpus/vectors/README.md`).
#![allow(dead_code)] // each test file uses its half

pub mod corpus;
pub use corpus::corpus_dir;

use mcp_framer::check::OwnedEvent;
use mcp_framer::{Bom, Config, EmptyLines, Event, FrameError, OversizePolicy, Stats};
use serde_json::{Value, json};

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn unhex(text: &str) -> Vec<u8> {
    assert!(text.len().is_multiple_of(2), "odd-length hex {text:?}");
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("bad hex")).collect()
}

pub fn config_to_json(c: &Config) -> Value {
    json!({
        "max_frame": c.max_frame,
        "oversize": match c.oversize { OversizePolicy::Skip => "skip", OversizePolicy::Fail => "fail" },
        "strip_cr": c.strip_cr,
        "empty_lines": match c.empty_lines { EmptyLines::Skip => "skip", EmptyLines::Deliver => "deliver" },
        "bom": match c.bom { Bom::Strip => "strip", Bom::Keep => "keep" },
    })
}

pub fn config_from_json(v: &Value) -> Config {
    let word = |key: &str| v[key].as_str().unwrap_or_else(|| panic!("config.{key} missing"));
    Config::DEFAULT
        .with_max_frame(v["max_frame"].as_u64().expect("config.max_frame") as usize)
        .with_oversize(match word("oversize") {
            "skip" => OversizePolicy::Skip,
            "fail" => OversizePolicy::Fail,
            other => panic!("config.oversize {other:?}"),
        })
        .with_strip_cr(v["strip_cr"].as_bool().expect("config.strip_cr"))
        .with_empty_lines(match word("empty_lines") {
            "skip" => EmptyLines::Skip,
            "deliver" => EmptyLines::Deliver,
            other => panic!("config.empty_lines {other:?}"),
        })
        .with_bom(match word("bom") {
            "strip" => Bom::Strip,
            "keep" => Bom::Keep,
            other => panic!("config.bom {other:?}"),
        })
}

pub fn event_to_json(e: &OwnedEvent) -> Value {
    match e {
        Event::Frame(bytes) => json!({ "type": "frame", "hex": hex(bytes) }),
        Event::OversizeStarted { seen } => json!({ "type": "oversize_started", "seen": seen }),
        Event::OversizeSkipped { len } => json!({ "type": "oversize_skipped", "len": len }),
        Event::Truncated { len, oversize } => json!({ "type": "truncated", "len": len, "oversize": oversize }),
    }
}

pub fn event_from_json(v: &Value) -> OwnedEvent {
    let num = |key: &str| v[key].as_u64().unwrap_or_else(|| panic!("event {v} lacks {key}"));
    match v["type"].as_str().expect("event.type") {
        "frame" => Event::Frame(unhex(v["hex"].as_str().expect("frame.hex"))),
        "oversize_started" => Event::OversizeStarted { seen: num("seen") },
        "oversize_skipped" => Event::OversizeSkipped { len: num("len") },
        "truncated" => Event::Truncated { len: num("len"), oversize: v["oversize"].as_bool().expect("oversize") },
        other => panic!("unknown event type {other:?}"),
    }
}

pub fn error_to_json(e: &Option<FrameError>) -> Value {
    match e {
        None => Value::Null,
        Some(FrameError::Oversize { seen, max_frame }) => {
            json!({ "type": "oversize", "seen": seen, "max_frame": max_frame })
        }
        Some(other) => panic!("no JSON form for {other:?}"),
    }
}

pub fn error_from_json(v: &Value) -> Option<FrameError> {
    match v {
        Value::Null => None,
        v => {
            assert_eq!(v["type"], "oversize", "unknown error {v}");
            Some(FrameError::Oversize {
                seen: v["seen"].as_u64().expect("error.seen"),
                max_frame: v["max_frame"].as_u64().expect("error.max_frame"),
            })
        }
    }
}

/// The counters a vector pins (all but `buffered_high_water`, which depends
/// on the implementation's buffering).
pub const STAT_FIELDS: [&str; 11] = [
    "bytes_in",
    "frames",
    "frame_bytes",
    "largest_frame",
    "oversize_frames",
    "discarded_bytes",
    "empty_lines",
    "delimiters",
    "cr_stripped",
    "bom_bytes",
    "truncated_bytes",
];

fn stat_values(s: &Stats) -> [u64; 11] {
    [
        s.bytes_in,
        s.frames,
        s.frame_bytes,
        s.largest_frame,
        s.oversize_frames,
        s.discarded_bytes,
        s.empty_lines,
        s.delimiters,
        s.cr_stripped,
        s.bom_bytes,
        s.truncated_bytes,
    ]
}

pub fn stats_to_json(s: &Stats) -> Value {
    let map = STAT_FIELDS.iter().zip(stat_values(s)).map(|(k, v)| (k.to_string(), json!(v))).collect();
    Value::Object(map)
}

/// `stats` with every pinned counter taken from the vector's JSON.
pub fn stats_from_json(v: &Value) -> Stats {
    let get = |key: &str| v[key].as_u64().unwrap_or_else(|| panic!("stats.{key} missing"));
    // `Stats` is non-exhaustive: start from the default (every counter 0,
    // `buffered_high_water` included) and set the pinned ones.
    let mut s = Stats::default();
    s.bytes_in = get("bytes_in");
    s.frames = get("frames");
    s.frame_bytes = get("frame_bytes");
    s.largest_frame = get("largest_frame");
    s.oversize_frames = get("oversize_frames");
    s.discarded_bytes = get("discarded_bytes");
    s.empty_lines = get("empty_lines");
    s.delimiters = get("delimiters");
    s.cr_stripped = get("cr_stripped");
    s.bom_bytes = get("bom_bytes");
    s.truncated_bytes = get("truncated_bytes");
    s
}
