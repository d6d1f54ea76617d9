//! Check 3: malformed input, one line at a time; each must get its error
//! (or, for a notification, nothing) and leave the server answering `ping`.

use mcp_framer_jsonrpc::{INVALID_REQUEST, Id, Kind, METHOD_NOT_FOUND, PARSE_ERROR};
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::progress::Progress;
use crate::raw::RawEvent;
use crate::report::{CheckResult, Verdict};
use crate::target::Target;

struct Case {
    label: &'static str,
    line: &'static [u8],
    /// The id the line carries, if any (a reply may name it instead of null).
    id: Option<i64>,
    /// The expected error code; `None`: no reply at all.
    expect: Option<i64>,
}

const CASES: [Case; 6] = [
    Case { label: "a line that is not JSON", line: b"this is not json\n", id: None, expect: Some(PARSE_ERROR) },
    Case {
        label: "invalid UTF-8",
        line: b"{\"jsonrpc\":\"2.0\",\"id\":901,\"method\":\"ping\",\"params\":{\"x\":\"\xff\xfe\"}}\n",
        id: Some(901),
        expect: Some(PARSE_ERROR),
    },
    Case { label: "a JSON array", line: b"[1,2,3]\n", id: None, expect: Some(INVALID_REQUEST) },
    Case {
        label: "a request without \"jsonrpc\":\"2.0\"",
        line: b"{\"id\":903,\"method\":\"ping\"}\n",
        id: Some(903),
        expect: Some(INVALID_REQUEST),
    },
    Case {
        label: "an unknown method",
        line: b"{\"jsonrpc\":\"2.0\",\"id\":904,\"method\":\"probe/no-such-method\"}\n",
        id: Some(904),
        expect: Some(METHOD_NOT_FOUND),
    },
    Case {
        label: "a notification with an unknown method",
        line: b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/probe-no-such-notification\"}\n",
        id: None,
        expect: None,
    },
];

/// What came back for one case.
enum Reply {
    Error { code: Option<i64>, id_null: bool },
    Result,
    Batch(String),
}

pub(super) async fn run(target: &Target, progress: &Progress, result: &mut CheckResult) {
    let args = &target.args;
    let mut conn = match super::raw_session(target, "bad-input").await {
        Ok(conn) => conn,
        Err(e) => return result.note(Verdict::Fail, e),
    };
    let mut cases = Vec::new();
    for case in &CASES {
        progress.step(format!("sending {}", case.label));
        if conn.write(case.line, args.step_timeout).await.is_err() {
            result.note(
                Verdict::Fail,
                format!("{}: the line could not be written: the server stopped reading", case.label),
            );
            break;
        }
        let deadline = Instant::now() + args.reply_wait;
        let mut reply = None;
        while let Some(event) = conn.next_event(deadline).await {
            match event {
                RawEvent::Message(m) if matches!(m.kind, Kind::ErrorResponse | Kind::Response) => {
                    let id_null = m.id.is_none();
                    if !(id_null || case.id.is_some_and(|id| m.id == Some(Id::Number(id)))) {
                        continue;
                    }
                    reply = Some(match m.kind {
                        Kind::ErrorResponse => Reply::Error { code: m.error_code(), id_null },
                        _ => Reply::Result,
                    });
                    break;
                }
                RawEvent::NotJsonRpc { excerpt, .. } if excerpt.starts_with('[') => {
                    // A batch reply: not JSON-RPC to a 2025-06-18 host, and
                    // not stdout noise either.
                    conn.log.pop();
                    reply = Some(Reply::Batch(excerpt));
                    break;
                }
                RawEvent::Eof => break,
                _ => {}
            }
        }
        let got = match &reply {
            None => "no reply".to_owned(),
            Some(Reply::Error { code, id_null }) => {
                format!(
                    "error {}{}",
                    code.map_or("without a code".into(), |c| c.to_string()),
                    if *id_null { " (id null)" } else { "" }
                )
            }
            Some(Reply::Result) => "a success result".to_owned(),
            Some(Reply::Batch(excerpt)) => format!("a batch reply {excerpt:?}"),
        };
        let expected = match case.expect {
            Some(code) => format!("expected error {code}"),
            None => "expected no reply".to_owned(),
        };
        let (verdict, what) = match (case.expect, &reply) {
            (None, None) => (Verdict::Pass, format!("{}: no reply, as expected", case.label)),
            (None, Some(_)) => {
                (Verdict::Warn, format!("{}: {got} ({expected}: a notification is never answered)", case.label))
            }
            (Some(_), None) => (
                Verdict::Fail,
                format!(
                    "{}: answered with nothing within {} ({expected})",
                    case.label,
                    crate::fmt_duration(args.reply_wait)
                ),
            ),
            (Some(code), Some(Reply::Error { code: Some(got_code), id_null })) if *got_code == code => {
                if case.id.is_none() && !id_null {
                    (Verdict::Warn, format!("{}: {got}, but the id should be null", case.label))
                } else {
                    (Verdict::Pass, format!("{}: {got}", case.label))
                }
            }
            (Some(_), Some(_)) => (Verdict::Warn, format!("{}: {got} ({expected})", case.label)),
        };
        result.note(verdict, what);
        let ping = conn.ping(args.ping_timeout).await;
        cases.push(json!({
            "input": case.label,
            "reply": got,
            "verdict": verdict,
            "ping_ms": ping.as_ref().ok().map(|d| d.as_millis() as u64),
        }));
        if let Err(e) = ping {
            result.note(Verdict::Fail, format!("after {}, the server went deaf: ping: {e}", case.label));
            break;
        }
    }
    let answered_all = cases.len() == CASES.len() && cases.iter().all(|c| c["ping_ms"] != Value::Null);
    if answered_all {
        result.info(format!(
            "a ping was answered within {} after each of the {} inputs",
            crate::fmt_duration(args.ping_timeout),
            CASES.len()
        ));
    }
    result.measure("cases", Value::Array(cases));
    target.account_raw("bad-input", &conn);
}
