//! Regenerates the framer's committed fuzz seeds (`corpus/<target>/`) and the
//! conformance vectors (`corpus/vectors/`). Ignored by default; run with
//!
//! ```text
//! cargo test -p mcp-framer --features check --test corpus_generate -- --ignored
//! ```
//!
//! Seeds are written in the byte layout the fuzz targets decode (see
//! `mcp_framer::check::Setup`), checked to decode back to what was meant, and
//! checked to pass. Vector expectations come from the real framer (read-into
//! mode, the vector's chunks as reads) and must agree with the reference
//! model.

mod common;

use std::fs;
use std::path::Path;

use common::corpus_dir;
use mcp_framer::check::{
    self, LineSpec, OversizeCase, ReaderCase, Setup, check_adversarial_reader, check_oversize_recovery,
    check_split_boundary, decode_setup_and_payload,
};
use mcp_framer::{Bom, Config, EmptyLines, OversizePolicy};

fn config(max_frame: usize) -> Config {
    Config::DEFAULT.with_max_frame(max_frame)
}

fn fail(max_frame: usize) -> Config {
    config(max_frame).with_oversize(OversizePolicy::Fail)
}

fn keep_cr(c: Config) -> Config {
    c.with_strip_cr(false)
}

fn deliver(c: Config) -> Config {
    c.with_empty_lines(EmptyLines::Deliver)
}

fn keep_bom(c: Config) -> Config {
    c.with_bom(Bom::Keep)
}

fn setup(config: Config, chunks: &[usize]) -> Setup {
    Setup { config, chunks: chunks.to_vec() }
}

/// A payload seed: name, setup, bytes.
type Seed = (String, Setup, Vec<u8>);

/// The hostile inputs every target is seeded with.
fn payload_seeds() -> Vec<Seed> {
    let mut seeds: Vec<Seed> = Vec::new();
    let mut add = |name: &str, setup: Setup, bytes: &[u8]| seeds.push((name.to_string(), setup, bytes.to_vec()));

    let quoted = br#"{"jsonrpc":"2.0","id":1,"result":{"text":"say \"hi\" C:\\dir\\file \\u00e9 \\n \\\" end"}}"#;
    add("quotes_backslashes", setup(config(4096), &[7]), &[&quoted[..], b"\n", quoted, b"\n"].concat());
    add(
        "quotes_backslashes_at_limit",
        setup(config(quoted.len()), &[]),
        &[&quoted[..], b"\n", quoted, b"x\n"].concat(),
    );

    // Multibyte UTF-8, the stream cut inside the character at every byte.
    for ch in ["é", "中", "😀"] {
        let line = format!("{{\"t\":\"{ch}\"}}\n");
        let at = line.find(ch).unwrap();
        for cut in 0..=ch.len() {
            add(&format!("utf8_{}byte_cut{cut}", ch.len()), setup(config(64), &[at + cut, 4096]), line.as_bytes());
        }
    }
    // 4-byte emoji against a byte limit: 4 emoji = 16 bytes fit, 5 do not.
    add("emoji_at_limit_and_over", setup(config(16), &[3]), "😀😀😀😀\n😀😀😀😀😀\n👍\n".as_bytes());
    add("emoji_over_limit_fail", setup(fail(16), &[5]), "👍\n😀😀😀😀😀\n👍\n".as_bytes());

    let long = "x".repeat(3000);
    add("long_no_spaces", setup(config(4096), &[1000]), format!("{long}\n{long}{long}\n{long}").as_bytes());
    add("long_no_spaces_oversize", setup(config(100), &[64]), format!("{long}\nok\n").as_bytes());

    add("crlf", setup(config(8), &[2]), b"a\r\nbb\r\n\r\ncc\r\n");
    add("crlf_kept", setup(keep_cr(config(8)), &[2]), b"a\r\nbb\r\n\r\ncc\r\n");
    add("cr_split_from_lf", setup(config(8), &[9, 1]), b"12345678\r\nok\n");
    add("bare_cr", setup(config(16), &[1]), b"a\rb\r\r\n\rc\n\r");
    add("blank_lines", setup(config(16), &[3]), b"\n\n{}\n\r\n\n[]\n\n");
    add("blank_lines_delivered", setup(deliver(config(16)), &[3]), b"\n\n{}\n\r\n\n[]\n\n");
    add("bom", setup(config(16), &[]), b"\xEF\xBB\xBF{}\n[]\n");
    add("bom_split", setup(config(16), &[1]), b"\xEF\xBB\xBF{}\n\xEF\xBB\xBF[]\n");
    add("bom_kept", setup(keep_bom(config(16)), &[2]), b"\xEF\xBB\xBF{}\n");
    add("bom_partial_at_eof", setup(config(16), &[1]), b"\xEF\xBB");
    add("bom_then_newline", setup(config(0), &[]), b"\xEF\xBB\xBF\n\n");
    add("nul_bytes", setup(config(16), &[2]), b"{\0}\n\0\n\0\0\0\r\n");
    add("invalid_utf8", setup(config(16), &[3]), b"\xFF\xFE\xC3\x28\n\xED\xA0\x80\n\xC0\xAF\n\xF0\x9F\x98");

    // The limit boundary, with and without '\r', both policies.
    for (name, c) in [("skip", config(8)), ("fail", fail(8))] {
        add(&format!("at_limit_{name}"), setup(c, &[]), b"12345678\n12345678\r\nok\n");
        add(&format!("limit_plus_one_{name}"), setup(c, &[4]), b"ok\n123456789\nok\n");
        add(&format!("limit_plus_one_cr_{name}"), setup(c, &[4]), b"ok\n123456789\r\nok\n");
        add(&format!("at_limit_cr_kept_{name}"), setup(keep_cr(c), &[]), b"1234567\r\n12345678\r\nok\n");
    }
    add("partial_frame_at_eof", setup(config(16), &[5]), b"{\"id\":1}\n{\"id\":");
    add("oversize_partial_at_eof", setup(config(4), &[3]), b"ok\n0123456789");
    add(
        "oversize_between_normal_one_chunk",
        setup(config(16), &[]),
        b"{\"id\":1}\n{\"id\":2,\"pad\":\"xxxxxxxxxxxxxxxx\"}\n{\"id\":3}\n",
    );
    add(
        "oversize_between_normal_one_chunk_fail",
        setup(fail(16), &[]),
        b"{\"id\":1}\n{\"id\":2,\"pad\":\"xxxxxxxxxxxxxxxx\"}\n{\"id\":3}\n",
    );
    add("oversize_many_small_chunks", setup(config(8), &[1, 2, 3]), b"a\n0123456789abcdef\r\nb\n");
    add("limit_zero", setup(config(0), &[1]), b"\n\r\na\n\n");
    add("limit_one", setup(config(1), &[1]), b"a\nab\na\r\n\r\n");
    add(
        "small_read_size",
        setup(config(16).with_read_size(3), &[]),
        b"{\"id\":1}\n{\"id\":22}\nxxxxxxxxxxxxxxxxxxxx\n",
    );
    seeds
}

/// The oversize_recovery seeds: line structures.
fn line_seeds() -> Vec<(String, OversizeCase)> {
    use LineSpec::*;
    let case = |c: Config, chunks: &[usize], lines: &[LineSpec]| OversizeCase {
        setup: setup(c, chunks),
        lines: lines.to_vec(),
    };
    let normal = Normal { len: 12, fill: 0 };
    let quotes = Normal { len: 7, fill: 2 }; // '"', '#', ... ,'(' : a quote among them
    let backslash = Normal { len: 5, fill: 60 }; // '\\' is at offset 60
    let over = Oversize { extra: 9, cr: false };
    let over_cr = Oversize { extra: 0, cr: true };
    let mut seeds = Vec::new();
    for (policy, c) in [("skip", config(16)), ("fail", fail(16))] {
        let mut add = |name: &str, chunks: &[usize], lines: &[LineSpec]| {
            seeds.push((format!("{name}_{policy}"), case(c, chunks, lines)));
        };
        add("oversize_between_normal", &[], &[normal, over, normal]);
        add("oversize_between_normal_split", &[5], &[normal, over, quotes, over_cr, backslash]);
        add("oversize_at_limit_plus_one_cr", &[17, 1], &[over_cr, normal]);
        add("crlf_at_limit", &[3], &[Crlf { len: 16 }, normal, Empty { cr: true }, Empty { cr: false }, normal]);
        add(
            "multibyte_at_limit_and_over",
            &[7],
            &[Multibyte { chars: 4, width: 2 }, Multibyte { chars: 5, width: 2 }, normal],
        );
        add(
            "multibyte_2_and_3_byte",
            &[1],
            &[Multibyte { chars: 8, width: 0 }, Multibyte { chars: 6, width: 1 }, normal],
        );
        add("unterminated_normal", &[4], &[normal, Unterminated { len: 9 }]);
        add("unterminated_oversize", &[4], &[normal, Unterminated { len: 30 }]);
        add("two_oversize_in_a_row", &[2, 30], &[over, over, normal]);
    }
    seeds.push(("crlf_at_limit_cr_kept".into(), case(keep_cr(config(16)), &[], &[Crlf { len: 16 }, Crlf { len: 15 }])));
    seeds.push((
        "empty_lines_delivered".into(),
        case(deliver(config(4)), &[1], &[Empty { cr: true }, over, Empty { cr: false }]),
    ));
    seeds.push((
        "limit_zero".into(),
        case(
            config(0),
            &[1],
            &[Normal { len: 3, fill: 0 }, over, Empty { cr: true }, Multibyte { chars: 1, width: 2 }],
        ),
    ));
    seeds.push((
        "large_limit_small_reads".into(),
        case(config(4096).with_read_size(7), &[], &[Oversize { extra: 2000, cr: true }, normal]),
    ));
    seeds
}

fn write_seed(target: &str, name: &str, bytes: &[u8]) {
    let dir = corpus_dir().join(target);
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join(name), bytes).unwrap();
}

fn clear_dir(dir: &Path) {
    if dir.exists() {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_file() && path.file_name().is_some_and(|n| n != "README.md") {
                fs::remove_file(path).unwrap();
            }
        }
    }
}

#[test]
#[ignore = "writes corpus/; run by hand to regenerate"]
fn regenerate_seeds() {
    for target in ["split_boundary", "adversarial_reader", "oversize_recovery"] {
        clear_dir(&corpus_dir().join(target));
    }
    for (name, setup, payload) in payload_seeds() {
        let bytes = [setup.encode(), payload.clone()].concat();
        assert_eq!(decode_setup_and_payload(&bytes), (setup.clone(), &payload[..]), "{name} does not round-trip");
        check_split_boundary(&setup, &payload);
        write_seed("split_boundary", &name, &bytes);

        // The reader seeds add empty reads (WouldBlock) and interruptions.
        let plan =
            if setup.chunks.is_empty() { vec![0, 0xFFFF, 4096] } else { [&[0, 0xFFFF][..], &setup.chunks].concat() };
        let plan = plan.into_iter().take(check::MAX_CHUNKS).collect();
        let reader = Setup { chunks: plan, ..setup };
        let bytes = [reader.encode(), payload.clone()].concat();
        let (decoded, stream) = decode_setup_and_payload(&bytes);
        assert_eq!(decoded, reader, "{name} (reader) does not round-trip");
        check_adversarial_reader(&ReaderCase { setup: decoded, stream });
        write_seed("adversarial_reader", &name, &bytes);
    }
    for (name, case) in line_seeds() {
        let bytes = case.encode();
        let decoded: OversizeCase =
            arbitrary::Arbitrary::arbitrary_take_rest(arbitrary::Unstructured::new(&bytes)).unwrap();
        assert_eq!(decoded, case, "{name} does not round-trip");
        check_oversize_recovery(&case);
        write_seed("oversize_recovery", &name, &bytes);
    }
}

/// A conformance vector before its expectations: name, the rule it pins,
/// config, input, chunk sizes (cycled until the input is used up).
struct Spec {
    name: &'static str,
    rule: &'static str,
    config: Config,
    input: Vec<u8>,
    chunks: Vec<usize>,
}

fn spec(name: &'static str, rule: &'static str, config: Config, input: &[u8], chunks: &[usize]) -> Spec {
    Spec { name, rule, config, input: input.to_vec(), chunks: chunks.to_vec() }
}

/// Chunk sizes written out in full: they add up to `len` exactly.
fn explicit_chunks(chunks: &[usize], len: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut left = len;
    let mut i = 0;
    while left > 0 {
        let size = if chunks.iter().all(|&c| c == 0) { left } else { chunks[i % chunks.len()].min(left) };
        out.push(size);
        left -= size;
        i += 1;
    }
    out
}

fn vector_specs() -> Vec<Spec> {
    let c16 = config(16);
    let long = "a".repeat(5000);
    let json_line =
        br#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"caf\u00e9 \"q\" \\ done"}]}}"#;
    vec![
        spec("frame_simple", "a frame is the bytes before \\n", c16, b"{\"id\":1}\n", &[]),
        spec("frames_two_in_one_chunk", "several frames in one read", c16, b"{\"id\":1}\n{\"id\":2}\n", &[]),
        spec(
            "frame_split_across_chunks",
            "a frame split over reads is delivered whole",
            c16,
            b"{\"id\":1}\n{\"id\":2}\n",
            &[3],
        ),
        spec("frame_byte_by_byte", "one byte per read", c16, b"{\"a\":[1,2]}\n", &[1]),
        spec(
            "empty_reads_between_chunks",
            "a read of 0 bytes (nothing available) changes nothing",
            c16,
            b"{}\n[]\n",
            &[0, 2, 0, 0, 1],
        ),
        spec("empty_input", "no bytes, no events", c16, b"", &[]),
        spec("crlf_stripped", "one trailing \\r is stripped by default", c16, b"{\"id\":1}\r\n", &[]),
        spec("crlf_kept", "strip_cr=false keeps the \\r in the frame", keep_cr(c16), b"{\"id\":1}\r\n", &[]),
        spec("crlf_split_between_cr_and_lf", "\\r and \\n in different reads", c16, b"ab\r\ncd\r\n", &[3]),
        spec("bare_cr_is_content", "a bare \\r is never a delimiter", c16, b"a\rb\n\rc\n", &[]),
        spec("double_cr_strips_one", "only one \\r is stripped", c16, b"ab\r\r\n", &[]),
        spec("bare_cr_at_eof", "a \\r with no \\n at end of stream is a truncated frame", c16, b"ok\n\r", &[]),
        spec("empty_lines_skipped", "empty lines are skipped and counted by default", c16, b"\n\n{}\n\n", &[]),
        spec("empty_lines_delivered", "empty_lines=deliver yields empty frames", deliver(c16), b"\n{}\n\n", &[]),
        spec("crlf_empty_line_skipped", "\\r\\n is an empty line when \\r is stripped", c16, b"\r\n{}\r\n\r\n", &[]),
        spec(
            "crlf_empty_line_delivered",
            "an empty \\r\\n line is delivered as an empty frame",
            deliver(c16),
            b"\r\n{}\r\n",
            &[],
        ),
        spec(
            "crlf_not_empty_when_cr_kept",
            "with strip_cr=false, \\r\\n is the frame \"\\r\"",
            keep_cr(c16),
            b"\r\n\n",
            &[],
        ),
        spec("bom_stripped", "a BOM at stream start is stripped and counted", c16, b"\xEF\xBB\xBF{}\n", &[]),
        spec("bom_kept", "bom=keep keeps it in the first frame", keep_bom(c16), b"\xEF\xBB\xBF{}\n", &[]),
        spec("bom_split_byte_by_byte", "a BOM split over reads is still stripped", c16, b"\xEF\xBB\xBF{}\n", &[1]),
        spec("bom_partial_at_eof", "a BOM prefix then end of stream is a truncated frame", c16, b"\xEF\xBB", &[1]),
        spec(
            "bom_not_at_start_is_content",
            "a BOM after the first byte is frame content",
            c16,
            b"{}\n\xEF\xBB\xBF[]\n",
            &[],
        ),
        spec("bom_then_empty_line", "BOM stripped, then an empty line skipped", c16, b"\xEF\xBB\xBF\n{}\n", &[]),
        spec("frame_at_limit", "exactly max_frame bytes is delivered", config(8), b"12345678\n", &[]),
        spec(
            "frame_at_limit_plus_one_skip",
            "max_frame + 1 is oversize: started, then skipped with its exact length",
            config(8),
            b"123456789\nok\n",
            &[],
        ),
        spec(
            "frame_at_limit_plus_one_fail",
            "under fail, max_frame + 1 stops the framer",
            fail(8),
            b"ok\n123456789\nok\n",
            &[],
        ),
        spec(
            "frame_at_limit_with_cr",
            "a stripped \\r does not count toward the limit",
            config(8),
            b"12345678\r\n",
            &[],
        ),
        spec(
            "frame_at_limit_with_cr_split",
            "limit bytes + \\r in one read, \\n in the next: still delivered",
            config(8),
            b"12345678\r\nok\n",
            &[9, 1, 3],
        ),
        spec(
            "frame_at_limit_plus_one_with_cr",
            "max_frame + 1 bytes then \\r\\n is oversize; len excludes the \\r",
            config(8),
            b"123456789\r\nok\n",
            &[],
        ),
        spec(
            "cr_counts_when_kept",
            "with strip_cr=false the \\r counts: max_frame bytes + \\r is oversize",
            keep_cr(config(8)),
            b"12345678\r\n1234567\r\n",
            &[],
        ),
        spec(
            "cr_then_byte_past_limit",
            "limit bytes + \\r + another byte: over the limit",
            config(8),
            b"12345678\rx\nok\n",
            &[9, 1, 1, 3],
        ),
        spec(
            "oversize_between_normal_one_chunk",
            "frames around an oversize frame in one read survive",
            config(16),
            b"{\"id\":1}\n{\"id\":2,\"pad\":\"xxxxxxxxxxxxxxxx\"}\n{\"id\":3}\n",
            &[],
        ),
        spec(
            "oversize_between_normal_fail",
            "under fail nothing after the first oversize frame is delivered",
            fail(16),
            b"{\"id\":1}\n{\"id\":2,\"pad\":\"xxxxxxxxxxxxxxxx\"}\n{\"id\":3}\n",
            &[],
        ),
        spec(
            "oversize_reported_before_newline",
            "oversize is reported as soon as the limit is passed (seen < len)",
            config(8),
            b"0123456789abcdef\nok\n",
            &[10, 4, 6],
        ),
        spec(
            "oversize_fail_before_newline",
            "under fail the error comes before the \\n arrives; later bytes are discarded",
            fail(8),
            b"0123456789abcdef\nok\n",
            &[10, 4, 6],
        ),
        spec(
            "oversize_at_eof",
            "an oversize partial frame at end of stream: started, then truncated (oversize)",
            config(4),
            b"ok\n0123456789",
            &[],
        ),
        spec(
            "two_oversize_in_a_row",
            "each oversize frame is reported once",
            config(4),
            b"0123456\nabcdefgh\nok\n",
            &[3],
        ),
        spec("oversize_then_eof_after_newline", "oversize frame ends the stream", config(4), b"0123456\n", &[2]),
        spec(
            "partial_frame_at_eof",
            "a partial frame at end of stream is truncated, never delivered",
            c16,
            b"{\"id\":1}\n{\"id\":",
            &[],
        ),
        spec("only_newlines", "a stream of empty lines", c16, b"\n\n\n", &[1]),
        spec("limit_zero", "max_frame 0: only empty lines pass", config(0), b"\n\r\na\n", &[]),
        spec("limit_one", "max_frame 1", config(1), b"a\nab\na\r\n", &[1]),
        spec(
            "multibyte_counted_in_bytes",
            "the limit counts bytes, not chars: 4 x U+1F600 = 16 bytes fits, 5 do not",
            c16,
            "😀😀😀😀\n😀😀😀😀😀\n".as_bytes(),
            &[],
        ),
        spec(
            "multibyte_split_inside_char",
            "a 4-byte character split over reads",
            c16,
            "[\"😀\"]\n".as_bytes(),
            &[3, 1, 1, 1, 10],
        ),
        spec(
            "two_and_three_byte_chars",
            "2- and 3-byte characters, split after each byte",
            c16,
            "é中\n".as_bytes(),
            &[1],
        ),
        spec("nul_bytes", "NUL bytes are frame content", c16, b"{\0}\n\0\n", &[]),
        spec(
            "invalid_utf8",
            "bytes are framed without UTF-8 validation",
            c16,
            b"\xFF\xFE\n\xC3\x28\n\xED\xA0\x80\n",
            &[2],
        ),
        spec("quotes_and_backslashes", "JSON escapes are frame content", config(4096), json_line, &[]),
        spec(
            "long_string_without_spaces",
            "a 5000-byte frame in 1000-byte reads",
            config(8192),
            format!("{long}\n").as_bytes(),
            &[1000],
        ),
        spec(
            "long_string_oversize",
            "a 5000-byte frame over a 4096 limit, in 1000-byte reads",
            config(4096),
            format!("{long}\nok\n").as_bytes(),
            &[1000],
        ),
        spec(
            "fail_discards_everything_after",
            "under fail every later byte is counted as discarded",
            fail(4),
            b"0123456789\n\nok\nmore\n",
            &[4],
        ),
        spec("largest_frame_tracked", "largest_frame is the longest delivered frame", c16, b"a\nabcdef\nabc\n", &[]),
        spec(
            "delivered_empty_and_crlf_kept",
            "deliver empties with strip_cr=false",
            deliver(keep_cr(c16)),
            b"\n\r\n\r\r\n",
            &[],
        ),
    ]
}

#[test]
#[ignore = "writes corpus/vectors/; run by hand to regenerate"]
fn regenerate_vectors() {
    use common::{config_to_json, error_to_json, event_to_json, hex, stats_to_json};
    use mcp_framer::check::{Mode, normalize, reference, run};
    use serde_json::json;

    let dir = corpus_dir().join("vectors");
    fs::create_dir_all(&dir).unwrap();
    for path in fs::read_dir(&dir).unwrap() {
        let path = path.unwrap().path();
        if path.extension().is_some_and(|e| e == "json") {
            fs::remove_file(path).unwrap();
        }
    }
    let specs = vector_specs();
    for (i, s) in specs.iter().enumerate() {
        let chunks = explicit_chunks(&s.chunks, s.input.len());
        let got = run(&s.config, &s.input, &chunks, Mode::ReadInto);
        assert_eq!(
            normalize(&s.config, got.clone()),
            reference(&s.config, &s.input),
            "{}: framer vs reference",
            s.name
        );
        let vector = json!({
            "name": s.name,
            "rule": s.rule,
            "config": config_to_json(&s.config),
            "input_hex": hex(&s.input),
            "input_text": String::from_utf8_lossy(&s.input),
            "chunks": chunks,
            "events": got.events.iter().map(event_to_json).collect::<Vec<_>>(),
            "error": error_to_json(&got.error),
            "stats": stats_to_json(&got.stats),
        });
        let text = serde_json::to_string_pretty(&vector).unwrap() + "\n";
        fs::write(dir.join(format!("{:03}-{}.json", i + 1, s.name.replace('_', "-"))), text).unwrap();
    }
    assert!(specs.len() >= 40);
}
