//! Tests of the parse rules, run against [`parse`] (and, with feature
//! `check`, against `parse_in_place` through the same expectations).

use std::borrow::Cow;

use super::*;
use crate::{INVALID_REQUEST, OwnedId, PARSE_ERROR};

/// The outcome of one parser, reduced to what both parsers must agree on.
#[derive(Debug, PartialEq)]
enum Seen {
    Ok { kind: Kind, id: Option<OwnedId>, method: Option<String>, payload: Option<String> },
    Err { kind: ParseErrorKind, code: i64, id: Option<OwnedId> },
}

fn seen_parse(frame: &[u8]) -> Seen {
    match parse(frame) {
        Ok(m) => Seen::Ok {
            kind: m.kind(),
            id: m.id().map(Id::to_owned_id),
            method: m.method().map(str::to_owned),
            payload: m.payload().map(|p| p.get().to_owned()),
        },
        Err(e) => Seen::Err { kind: e.kind(), code: e.code(), id: e.id().cloned() },
    }
}

/// Checks `frame` with both parsers: same kind, id, method, error kind and
/// recovered id. Returns [`parse`]'s outcome (its payload is the
/// raw text; the simd path's payload is compared by re-serialising it).
fn seen(frame: &[u8]) -> Seen {
    let parsed = seen_parse(frame);
    #[cfg(feature = "check")]
    {
        let mut copy = frame.to_vec();
        let simd = match crate::check::parse_in_place(&mut copy) {
            Ok(m) => Seen::Ok {
                kind: m.kind(),
                id: m.id().map(Id::to_owned_id),
                method: m.method().map(str::to_owned),
                payload: m.payload().map(|p| simd_json::prelude::Writable::encode(&p)),
            },
            Err(e) => Seen::Err { kind: e.kind(), code: e.code(), id: e.id().cloned() },
        };
        let reparse = |p: &Option<String>| p.as_deref().map(|p| serde_json::from_str::<serde_json::Value>(p).unwrap());
        match (&parsed, &simd) {
            (Seen::Ok { kind, id, method, payload }, Seen::Ok { kind: k2, id: i2, method: m2, payload: p2 }) => {
                assert_eq!((kind, id, method), (k2, i2, m2), "paths disagree on {:?}", String::from_utf8_lossy(frame));
                assert_eq!(reparse(payload), reparse(p2), "payloads differ on {:?}", String::from_utf8_lossy(frame));
            }
            _ => assert_eq!(parsed, simd, "paths disagree on {:?}", String::from_utf8_lossy(frame)),
        }
    }
    parsed
}

fn ok(kind: Kind, id: Option<OwnedId>, method: Option<&str>, payload: Option<&str>) -> Seen {
    Seen::Ok { kind, id, method: method.map(str::to_owned), payload: payload.map(str::to_owned) }
}

fn err(kind: ParseErrorKind, id: Option<OwnedId>) -> Seen {
    Seen::Err { kind, code: kind.code(), id }
}

use ParseErrorKind::{BadVersion, InvalidShape, InvalidUtf8, Malformed, NotAnObject};

#[test]
fn classifies_the_four_kinds() {
    let cases: [(&str, Seen); 8] = [
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}"#,
            ok(Kind::Request, Some(Id::Number(1)), Some("tools/call"), Some(r#"{"name":"x"}"#)),
        ),
        (
            r#"{"jsonrpc":"2.0","id":"r-1","method":"ping"}"#,
            ok(Kind::Request, Some(Id::from("r-1")), Some("ping"), None),
        ),
        (
            r#"{"method":"notifications/cancelled","params":{"requestId":3},"jsonrpc":"2.0"}"#,
            ok(Kind::Notification, None, Some("notifications/cancelled"), Some(r#"{"requestId":3}"#)),
        ),
        (
            r#"{"jsonrpc":"2.0","id":2,"result":{"tools":[]}}"#,
            ok(Kind::Response, Some(Id::Number(2)), None, Some(r#"{"tools":[]}"#)),
        ),
        (r#"{"jsonrpc":"2.0","id":2,"result":null}"#, ok(Kind::Response, Some(Id::Number(2)), None, Some("null"))),
        (
            r#"{"jsonrpc":"2.0","id":-9,"error":{"code":-32601,"message":"no"}}"#,
            ok(Kind::ErrorResponse, Some(Id::Number(-9)), None, Some(r#"{"code":-32601,"message":"no"}"#)),
        ),
        (
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse"}}"#,
            ok(Kind::ErrorResponse, None, None, Some(r#"{"code":-32700,"message":"parse"}"#)),
        ),
        (
            " \t{ \"jsonrpc\" : \"2.0\" , \"method\" : \"m\" , \"params\" : null , \"extra\" : [1,{\"id\":[]}] }\r\n ",
            ok(Kind::Notification, None, Some("m"), Some("null")),
        ),
    ];
    for (frame, expected) in cases {
        assert_eq!(seen(frame.as_bytes()), expected, "{frame}");
    }
}

#[test]
fn every_error_kind_has_its_code() {
    let cases: [(&[u8], Seen); 10] = [
        (b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}", err(InvalidUtf8, None)),
        (b"\xc3", err(InvalidUtf8, None)),
        (b"", err(Malformed, None)),
        (b"   ", err(Malformed, None)),
        (br#"{"jsonrpc":"2.0","id":1,"method":"m""#, err(Malformed, None)),
        (br#"{"jsonrpc":"2.0","id":1,"method":"m"} x"#, err(Malformed, None)),
        (br#"[{"jsonrpc":"2.0","id":1,"method":"m"}]"#, err(NotAnObject, None)),
        (br#""jsonrpc""#, err(NotAnObject, None)),
        (br#"{"jsonrpc":"2.1","id":1,"method":"m"}"#, err(BadVersion, Some(Id::Number(1)))),
        (br#"{"jsonrpc":"2.0","id":1}"#, err(InvalidShape, Some(Id::Number(1)))),
    ];
    for (frame, expected) in cases {
        assert_eq!(seen(frame), expected, "{:?}", String::from_utf8_lossy(frame));
    }
    assert_eq!(InvalidUtf8.code(), PARSE_ERROR);
    assert_eq!(Malformed.code(), -32700);
    assert_eq!(NotAnObject.code(), INVALID_REQUEST);
    assert_eq!(BadVersion.code(), -32600);
    assert_eq!(InvalidShape.code(), -32600);
}

#[test]
fn invalid_utf8_wins_over_malformed_json() {
    // Broken JSON and a bad byte: the byte is reported (checked first).
    for frame in [&b"{\"a\":\"\xff"[..], b"\xfe{", b"[\"\xed\xa0\x80\"]", b"{\"jsonrpc\":\"2.0\",\"method\":\"\x80\""] {
        assert_eq!(seen(frame), err(InvalidUtf8, None), "{frame:?}");
    }
}

#[test]
fn bad_versions() {
    for frame in [
        r#"{"id":1,"method":"m"}"#,
        r#"{"jsonrpc":2.0,"id":1,"method":"m"}"#,
        r#"{"jsonrpc":"2","id":1,"method":"m"}"#,
        r#"{"jsonrpc":null,"id":1,"method":"m"}"#,
        r#"{"jsonrpc":"2.0 ","id":1,"method":"m"}"#,
        r#"{"jsonrpc":["2.0"],"id":1,"method":"m"}"#,
    ] {
        assert_eq!(seen(frame.as_bytes()), err(BadVersion, Some(Id::Number(1))), "{frame}");
    }
    // An escaped "2.0" is "2.0".
    let escaped = r#"{"jsonrpc":"2\u002e0","id":1,"method":"m"}"#;
    assert_eq!(seen(escaped.as_bytes()), ok(Kind::Request, Some(Id::Number(1)), Some("m"), None));
    // BadVersion is reported before a bad shape; the id is still recovered.
    assert_eq!(seen(br#"{"jsonrpc":"1.0","id":"x","result":1,"error":{}}"#), err(BadVersion, Some(Id::from("x"))));
}

#[test]
fn invalid_shapes() {
    let cases: [(&str, Option<OwnedId>); 14] = [
        (r#"{"jsonrpc":"2.0"}"#, None),
        (r#"{"jsonrpc":"2.0","id":1,"params":{}}"#, Some(Id::Number(1))),
        (r#"{"jsonrpc":"2.0","id":1,"method":5}"#, Some(Id::Number(1))),
        (r#"{"jsonrpc":"2.0","id":1,"method":null}"#, Some(Id::Number(1))),
        (r#"{"jsonrpc":"2.0","id":1,"method":"m","result":1}"#, Some(Id::Number(1))),
        (r#"{"jsonrpc":"2.0","id":1,"method":"m","error":{}}"#, Some(Id::Number(1))),
        (r#"{"jsonrpc":"2.0","id":null,"method":"m"}"#, None),
        (r#"{"jsonrpc":"2.0","id":1,"result":1,"error":{}}"#, Some(Id::Number(1))),
        (r#"{"jsonrpc":"2.0","result":1}"#, None),
        (r#"{"jsonrpc":"2.0","id":null,"result":1}"#, None),
        (r#"{"jsonrpc":"2.0","error":{"code":1}}"#, None),
        (r#"{"jsonrpc":"2.0","id":true,"method":"m"}"#, None),
        (r#"{"jsonrpc":"2.0","id":{"a":1},"method":"m"}"#, None),
        (r#"{"jsonrpc":"2.0","id":[1],"result":1}"#, None),
    ];
    for (frame, id) in cases {
        assert_eq!(seen(frame.as_bytes()), err(InvalidShape, id), "{frame}");
    }
}

#[test]
fn numeric_ids_are_i64_integers() {
    let id = |text: &str| seen(format!(r#"{{"jsonrpc":"2.0","id":{text},"method":"m"}}"#).as_bytes());
    assert_eq!(id("0"), ok(Kind::Request, Some(Id::Number(0)), Some("m"), None));
    assert_eq!(id("9223372036854775807"), ok(Kind::Request, Some(Id::Number(i64::MAX)), Some("m"), None));
    assert_eq!(id("-9223372036854775808"), ok(Kind::Request, Some(Id::Number(i64::MIN)), Some("m"), None));
    for beyond in ["9223372036854775808", "18446744073709551615"] {
        assert_eq!(id(beyond), err(InvalidShape, None), "{beyond}");
    }
    // Beyond simd-json's number range: see `simd_refuses_numbers_it_cannot_represent`.
    for beyond in ["-9223372036854775809", "18446744073709551616", "1e400"] {
        let frame = format!(r#"{{"jsonrpc":"2.0","id":{beyond},"method":"m"}}"#);
        assert_eq!(seen_parse(frame.as_bytes()), err(InvalidShape, None), "{beyond}");
    }
    for float in ["1.0", "1.5", "1e3", "1E3", "-2.5e-3", "0.0"] {
        assert_eq!(id(float), err(InvalidShape, None), "{float}");
    }
}

#[test]
fn ids_are_recovered_for_invalid_requests_only_when_valid() {
    assert_eq!(seen(br#"{"jsonrpc":"2.0","id":"\u00e9","method":7}"#), err(InvalidShape, Some(Id::from("é"))));
    assert_eq!(seen(br#"{"jsonrpc":"2.0","id":1.5,"method":7}"#), err(InvalidShape, None));
    // A duplicate id: which one would be the answer's? Neither.
    assert_eq!(seen(br#"{"jsonrpc":"2.0","id":1,"id":2,"method":"m"}"#), err(InvalidShape, None));
    // -32700 errors never carry an id.
    let e = parse(br#"{"jsonrpc":"2.0","id":1,"method":"m","#).unwrap_err();
    assert_eq!((e.kind(), e.id()), (Malformed, None));
    let e = parse(br#"{"jsonrpc":"3.0","id":"q"}"#).unwrap_err();
    assert_eq!(e.id(), Some(&Id::from("q")));
    assert!(e.to_string().contains("(id \"q\")"), "{e}");
}

#[test]
fn duplicate_known_keys_are_refused_unknown_ones_ignored() {
    for key in ["jsonrpc", "id", "method", "params", "result", "error"] {
        let frame =
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{{}},"result":1,"error":{{}},"{key}":0}}"#);
        assert_eq!(seen(frame.as_bytes()), err(InvalidShape, None), "{key}");
        let e = parse(frame.as_bytes()).unwrap_err();
        assert!(e.detail().contains("duplicate"), "{e}");
    }
    // Keys are compared after unescaping.
    assert_eq!(seen(br#"{"jsonrpc":"2.0","id":1,"\u0069d":2,"method":"m"}"#), err(InvalidShape, None));
    let frame = br#"{"jsonrpc":"2.0","x":1,"x":2,"id":1,"method":"m"}"#;
    assert_eq!(seen(frame), ok(Kind::Request, Some(Id::Number(1)), Some("m"), None));
    // A duplicate before a syntax error is still a syntax error.
    assert_eq!(seen(br#"{"id":1,"id":2,"#), err(Malformed, None));
}

#[test]
fn escaped_method_and_id_are_owned_plain_ones_borrowed() {
    let frame = br#"{"jsonrpc":"2.0","id":"a\"b\\c\u00e9\ud83d\ude00","method":"tools\/call\n"}"#;
    let message = parse(frame).unwrap();
    assert_eq!(message.id(), Some(&Id::from("a\"b\\cé😀")));
    assert_eq!(message.method(), Some("tools/call\n"));
    let Message::Request { id: Id::Str(Cow::Owned(_)), method: Cow::Owned(_), .. } = message else {
        panic!("escaped strings must be owned: {message:?}")
    };
    let plain = parse(br#"{"jsonrpc":"2.0","id":"abc","method":"ping"}"#).unwrap();
    let Message::Request { id: Id::Str(Cow::Borrowed(_)), method: Cow::Borrowed(_), .. } = plain else {
        panic!("plain strings must be borrowed: {plain:?}")
    };
    assert_eq!(seen(frame), ok(Kind::Request, Some(Id::from("a\"b\\cé😀")), Some("tools/call\n"), None));
}

#[test]
fn huge_payload_is_borrowed_not_copied() {
    let text = "x".repeat(4 << 20);
    let frame = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"content":[{{"type":"text","text":"{text}"}}]}}}}"#);
    let message = parse(frame.as_bytes()).unwrap();
    let result = message.payload().unwrap().get();
    let range = frame.as_bytes().as_ptr_range();
    assert!(range.contains(&result.as_ptr()), "result does not point into the frame");
    assert_eq!(result.len(), frame.len() - r#"{"jsonrpc":"2.0","id":1,"result":}"#.len());
    assert!(result.ends_with(r#""}]}"#));
}

#[test]
fn every_payload_is_a_slice_of_the_frame() {
    // What the old `&RawValue` protocol test guarded: no payload is copied
    // or re-parsed into new text, whatever its kind.
    for frame in [
        &br#"{"jsonrpc":"2.0","id":1,"method":"m","params":[1, 2]}"#[..],
        br#"{"jsonrpc":"2.0","method":"m","params":null}"#,
        br#"{"jsonrpc":"2.0","id":1,"result":"\u00e9"}"#,
        br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#,
    ] {
        let payload = parse(frame).unwrap().payload().unwrap().get();
        let start = payload.as_ptr().addr() - frame.as_ptr().addr();
        assert!(start + payload.len() <= frame.len(), "{payload}");
        assert_eq!(&frame[start..start + payload.len()], payload.as_bytes());
    }
}

#[test]
fn deep_nesting_in_the_payload_is_accepted() {
    // The parser's scanner has no depth limit (one bit per open level, no
    // recursion), unlike a serde_json `Value` (128 levels); nor has simd-json.
    let depth = 10_000;
    let frame = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{}{}}}"#, "[".repeat(depth), "]".repeat(depth));
    assert_eq!(parse(frame.as_bytes()).unwrap().kind(), Kind::Response);
    assert_eq!(seen(format!("{}{}", "[".repeat(depth), "]".repeat(depth)).as_bytes()), err(NotAnObject, None));
}

#[test]
fn ids_display_serialize_and_own() {
    let borrowed = Id::from("é\"");
    assert_eq!(borrowed.to_string(), r#""é\"""#);
    assert_eq!(Id::Number(-4).to_string(), "-4");
    assert_eq!(serde_json::to_string(&Id::Number(5)).unwrap(), "5");
    let owned: OwnedId = borrowed.to_owned_id();
    assert_eq!(owned, borrowed);
    assert!(matches!(borrowed.into_owned(), Id::Str(Cow::Owned(_))));
    assert!(serde_json::from_str::<Id<'_>>("1.5").is_err());
    assert!(serde_json::from_str::<Id<'_>>("9223372036854775808").is_err());
    assert_eq!(serde_json::from_str::<Id<'_>>(r#""a\nb""#).unwrap(), Id::from("a\nb"));
}

#[cfg(feature = "check")]
mod simd {
    use super::*;
    use crate::check::parse_in_place;
    use simd_json::prelude::ValueIntoString;

    fn in_place(frame: &[u8]) -> Result<Kind, ParseErrorKind> {
        parse_in_place(&mut frame.to_vec()).map(|m| m.kind()).map_err(|e| e.kind())
    }

    #[test]
    fn simd_refuses_numbers_it_cannot_represent() {
        for number in ["18446744073709551616", "-9223372036854775809", "1e400", "123456789012345678901234567890"] {
            let frame = format!(r#"{{"jsonrpc":"2.0","id":1,"result":[{number}]}}"#);
            assert_eq!(parse(frame.as_bytes()).unwrap().kind(), Kind::Response, "{number}");
            assert_eq!(in_place(frame.as_bytes()), Err(Malformed), "{number}");
        }
        // Within range both accept, including the u64 range beyond i64.
        let frame = br#"{"jsonrpc":"2.0","id":1,"result":[18446744073709551615,-9223372036854775808,1e308,1e-400]}"#;
        assert_eq!(in_place(frame), Ok(Kind::Response));
    }

    #[test]
    fn simd_refuses_lone_surrogates_serde_keeps_them_raw() {
        for text in [r#""\ud800""#, r#""\ud800x""#, r#""\udc00""#, r#""\ud800\u0041""#, r#""a\\\ud800""#] {
            let frame = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{text}}}"#);
            assert_eq!(parse(frame.as_bytes()).unwrap().kind(), Kind::Response, "{text}");
            assert_eq!(in_place(frame.as_bytes()), Err(Malformed), "{text}");
        }
        // Pairs and escaped backslashes are not lone surrogates.
        for text in [r#""\ud83e\udd80""#, r#""\\ud800""#, r#""\\\\ud800""#] {
            let frame = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{text}}}"#);
            assert_eq!(in_place(frame.as_bytes()), Ok(Kind::Response), "{text}");
        }
        // In a routing field: not an id for serde_json, not JSON for simd-json.
        let frame = br#"{"jsonrpc":"2.0","id":"\ud800","method":"m"}"#;
        assert_eq!(parse(frame).unwrap_err().kind(), InvalidShape);
        assert_eq!(in_place(frame), Err(Malformed));
    }

    #[test]
    fn simd_refuses_nul_bytes_like_serde() {
        for frame in [&b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":[true\0garbage]}"[..], b"\0", b"{\"a\":\"\0\"}"] {
            assert_eq!(in_place(frame), Err(Malformed), "{frame:?}");
            assert_eq!(parse(frame).unwrap_err().kind(), Malformed, "{frame:?}");
        }
    }

    #[test]
    fn simd_strings_borrow_from_the_unescaped_frame() {
        let mut frame = br#"{"jsonrpc":"2.0","id":"i\u0064","method":"tools\/call","params":{"t":"\"q\""}}"#.to_vec();
        let range = frame.as_ptr_range();
        let message = parse_in_place(&mut frame).unwrap();
        let Some(Id::Str(Cow::Borrowed(id))) = message.id() else { panic!("{message:?}") };
        assert_eq!(*id, "id");
        assert!(range.contains(&id.as_ptr()));
        assert!(range.contains(&message.method().unwrap().as_ptr()));
        let text = message.payload().and_then(|p| p.get("t")).and_then(|t| t.into_string()).unwrap();
        assert_eq!(text, "\"q\"");
        assert!(range.contains(&text.as_ptr()), "payload strings live in the frame");
    }
}
