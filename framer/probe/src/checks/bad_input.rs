//! Check 3: malformed input, one line at a time; each should get its error
//! (or, for a notification, nothing) and must leave the server answering.
//!
//! FAIL is for what a host suffers: the server goes deaf or exits, answers
//! with the wrong id, writes a broken frame, or leaves a request a
//! conforming host does send (an unknown method) unanswered. Silence on, or
//! a success for, a line a conforming host never sends is a deviation from
//! JSON-RPC 2.0 but hangs nothing: WARN, saying what was expected and what
//! came back.

use mcp_framer_jsonrpc::{INVALID_REQUEST, Id, Kind, METHOD_NOT_FOUND, PARSE_ERROR};
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::duration::within;
use crate::progress::Progress;
use crate::raw::RawEvent;
use crate::report::{CheckResult, Verdict};
use crate::target::Target;

struct Case {
    label: &'static str,
    /// The line; `@M` stands for the era's liveness method and `@META` for
    /// its `_meta` member (modern era), so only the defect under test is
    /// wrong in it.
    line: &'static [u8],
    /// The id the line carries, if any (a reply may name it instead of null).
    id: Option<i64>,
    /// The expected error code; `None`: no reply at all.
    expect: Option<i64>,
    /// Whether a conforming host may send it (then silence hangs the host).
    host_sends: bool,
    /// The behaviour recorded when it goes unanswered.
    silent: &'static str,
}

const CASES: [Case; 6] = [
    Case {
        label: "a line that is not JSON",
        line: b"this is not json\n",
        id: None,
        expect: Some(PARSE_ERROR),
        host_sends: false,
        silent: "silent-on-parse-error",
    },
    Case {
        label: "invalid UTF-8",
        line: b"{\"jsonrpc\":\"2.0\",\"id\":901,\"method\":\"@M\",\"params\":{@META\"x\":\"\xff\xfe\"}}\n",
        id: Some(901),
        expect: Some(PARSE_ERROR),
        host_sends: false,
        silent: "silent-on-parse-error",
    },
    Case {
        label: "a JSON array",
        line: b"[1,2,3]\n",
        id: None,
        expect: Some(INVALID_REQUEST),
        host_sends: false,
        silent: "silent-on-invalid-request",
    },
    Case {
        label: "a request without \"jsonrpc\":\"2.0\"",
        line: b"{\"id\":903,\"method\":\"@M\",\"params\":{@META\"x\":1}}\n",
        id: Some(903),
        expect: Some(INVALID_REQUEST),
        host_sends: false,
        silent: "silent-on-invalid-request",
    },
    Case {
        label: "an unknown method",
        line: b"{\"jsonrpc\":\"2.0\",\"id\":904,\"method\":\"probe/no-such-method\",\"params\":{@META\"x\":1}}\n",
        id: Some(904),
        expect: Some(METHOD_NOT_FOUND),
        host_sends: true,
        silent: "silent-on-unknown-method",
    },
    Case {
        label: "a notification with an unknown method",
        line: b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/probe-no-such-notification\"}\n",
        id: None,
        expect: None,
        host_sends: true,
        silent: "",
    },
];

/// `case.line` with `@M` and `@META` filled in for the target's era.
fn line_for(target: &Target, line: &[u8]) -> Vec<u8> {
    let (method, _) = target.liveness();
    let meta = match target.params(Value::Null).get("_meta") {
        Some(meta) => format!("\"_meta\":{meta},"),
        None => String::new(),
    };
    let mut out = Vec::with_capacity(line.len() + meta.len());
    let mut rest = line;
    while let Some(at) = rest.iter().position(|&b| b == b'@') {
        out.extend_from_slice(&rest[..at]);
        rest = &rest[at..];
        if let Some(after) = rest.strip_prefix(b"@META") {
            out.extend_from_slice(meta.as_bytes());
            rest = after;
        } else if let Some(after) = rest.strip_prefix(b"@M") {
            out.extend_from_slice(method.as_bytes());
            rest = after;
        } else {
            out.push(b'@');
            rest = &rest[1..];
        }
    }
    out.extend_from_slice(rest);
    out
}

/// What came back for one case.
enum Reply {
    Error {
        code: Option<i64>,
        id_null: bool,
    },
    Result,
    /// A batch reply, and whether it is valid JSON-RPC 2.0 (an array of
    /// error responses with id null, one per element).
    Batch {
        excerpt: String,
        valid: bool,
    },
    /// A response with an id that is neither the line's nor null.
    WrongId(String),
    /// A line that is not JSON-RPC.
    Broken(String),
    /// Stdout closed.
    Exited,
}

/// Whether `text` is a valid batch reply to `[1,2,3]`: three error
/// responses, id null.
fn valid_batch(text: &str) -> bool {
    let Ok(Value::Array(items)) = serde_json::from_str::<Value>(text) else { return false };
    items.len() == 3
        && items.iter().all(|item| {
            item.get("jsonrpc") == Some(&json!("2.0"))
                && item.get("id") == Some(&Value::Null)
                && item.get("error").and_then(|e| e.get("code")).is_some_and(Value::is_i64)
        })
}

pub(super) async fn run(target: &Target, progress: &Progress, result: &mut CheckResult) {
    let limits = &target.limits;
    let mut conn = match super::raw_session(target, "bad-input").await {
        Ok(conn) => conn,
        Err(e) => return result.note(Verdict::Fail, e),
    };
    let mut cases = Vec::new();
    for case in &CASES {
        progress.step(format!("sending {}", case.label));
        if conn.write(&line_for(target, case.line), limits.step_timeout).await.is_err() {
            result.note(
                Verdict::Fail,
                format!("{}: the line could not be written: the server stopped reading", case.label),
            );
            break;
        }
        let deadline = Instant::now() + limits.reply_wait;
        let mut reply = None;
        while let Some(event) = conn.next_event(deadline).await {
            match event {
                RawEvent::Message(m) if matches!(m.kind, Kind::ErrorResponse | Kind::Response) => {
                    let id_null = m.id.is_none();
                    reply = Some(if !(id_null || case.id.is_some_and(|id| m.id == Some(Id::Number(id)))) {
                        Reply::WrongId(m.id.map(|id| id.to_string()).unwrap_or_default())
                    } else if m.kind == Kind::ErrorResponse {
                        Reply::Error { code: m.error_code(), id_null }
                    } else {
                        Reply::Result
                    });
                    break;
                }
                RawEvent::NotJsonRpc { excerpt, len } if excerpt.starts_with('[') => {
                    // A batch reply: not stdout noise. Whether it is valid
                    // needs the whole line, which a short excerpt may cut.
                    conn.log.pop();
                    let valid = len <= conn.excerpt_limit() && valid_batch(&excerpt);
                    reply = Some(Reply::Batch { excerpt, valid });
                    break;
                }
                RawEvent::NotJsonRpc { excerpt, .. } => {
                    reply = Some(Reply::Broken(excerpt));
                    break;
                }
                RawEvent::Eof => {
                    reply = Some(Reply::Exited);
                    break;
                }
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
            Some(Reply::Batch { excerpt, .. }) => format!("a batch reply {excerpt:?}"),
            Some(Reply::WrongId(id)) => format!("a response with id {id}"),
            Some(Reply::Broken(excerpt)) => format!("a line that is not JSON-RPC: {excerpt:?}"),
            Some(Reply::Exited) => "stdout closing".to_owned(),
        };
        let expected = match case.expect {
            Some(code) => format!("expected error {code}"),
            None => "expected no reply".to_owned(),
        };
        let label = case.label;
        let (verdict, what) = match (case.expect, &reply) {
            (_, Some(Reply::Exited)) => (Verdict::Fail, format!("{label}: the server closed stdout (it exited?)")),
            (_, Some(Reply::WrongId(id))) => (
                Verdict::Fail,
                format!(
                    "{label}: answered with id {id}, neither the line's nor null: a host resolves the wrong request"
                ),
            ),
            (_, Some(Reply::Broken(excerpt))) => {
                (Verdict::Fail, format!("{label}: the server wrote a line that is not JSON-RPC: {excerpt:?}"))
            }
            (None, None) => (Verdict::Pass, format!("{label}: no reply, as expected")),
            (None, Some(_)) => {
                (Verdict::Warn, format!("{label}: {got} ({expected}: a notification is never answered)"))
            }
            (Some(_), None) if case.host_sends => {
                result.behaviour(case.silent);
                (
                    Verdict::Fail,
                    format!(
                        "{label}: answered with nothing {} ({expected}): a host that sends it waits out its timeout",
                        within(limits.reply_wait)
                    ),
                )
            }
            (Some(_), None) => {
                result.behaviour(case.silent);
                (
                    Verdict::Warn,
                    format!(
                        "{label}: answered with nothing {} ({expected}); nothing hangs, since a conforming host never sends this line",
                        within(limits.reply_wait)
                    ),
                )
            }
            (Some(_), Some(Reply::Batch { valid: true, .. })) => {
                (Verdict::Pass, format!("{label}: {got}: a valid JSON-RPC 2.0 batch reply"))
            }
            (Some(PARSE_ERROR), Some(Reply::Result)) if case.id.is_some() => {
                result.behaviour("invalid-utf8-served");
                (Verdict::Warn, format!("{label}: {got} ({expected}): the bytes were replaced and the request served"))
            }
            (Some(code), Some(Reply::Error { code: Some(got_code), id_null })) if *got_code == code => {
                if case.id.is_none() && !id_null {
                    (Verdict::Warn, format!("{label}: {got}, but the id should be null"))
                } else {
                    (Verdict::Pass, format!("{label}: {got}"))
                }
            }
            (Some(_), Some(_)) => (Verdict::Warn, format!("{label}: {got} ({expected})")),
        };
        result.note(verdict, what);
        let ping = conn.ping(limits.ping_timeout).await;
        cases.push(json!({
            "input": case.label,
            "reply": got,
            "verdict": verdict,
            "ping_ms": ping.as_ref().ok().map(|d| d.as_millis() as u64),
        }));
        if let Err(e) = ping {
            result.note(
                Verdict::Fail,
                format!("after {}, the server went deaf: {}: {e}", case.label, target.liveness().0),
            );
            break;
        }
    }
    let answered_all = cases.len() == CASES.len() && cases.iter().all(|c| c["ping_ms"] != Value::Null);
    if answered_all {
        result.info(format!(
            "the next request ({}) was answered {} after each of the {} inputs",
            target.liveness().0,
            within(limits.ping_timeout),
            CASES.len()
        ));
    }
    result.measure("cases", Value::Array(cases));
    target.account_raw("bad-input", &conn);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Options;
    use crate::target::Opened;
    use mcp_framer_stdio::host::Era;

    #[test]
    fn lines_carry_the_eras_method_and_meta() {
        let target = Target::new(Options::new(vec!["server".into()]));
        assert_eq!(line_for(&target, CASES[3].line), b"{\"id\":903,\"method\":\"ping\",\"params\":{\"x\":1}}\n");
        assert_eq!(line_for(&target, CASES[0].line), CASES[0].line);
        *target.opened.lock().unwrap() = Some(Opened {
            era: Era::Modern,
            version: "2026-07-28".into(),
            offered: vec![],
            fallback: None,
            meta: Some(json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28"})),
        });
        let line = String::from_utf8_lossy(&line_for(&target, CASES[4].line)).into_owned();
        assert_eq!(
            line,
            "{\"jsonrpc\":\"2.0\",\"id\":904,\"method\":\"probe/no-such-method\",\"params\":{\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"},\"x\":1}}\n"
        );
        let utf8 = line_for(&target, CASES[1].line);
        assert!(
            utf8.starts_with(b"{\"jsonrpc\":\"2.0\",\"id\":901,\"method\":\"server/discover\",\"params\":{\"_meta\":")
        );
        assert!(utf8.ends_with(b"\"x\":\"\xff\xfe\"}}\n"));
    }
}
