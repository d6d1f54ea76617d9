//! `host::handshake` over real pipes, in both protocol eras: the library
//! server answers `server/discover` (modern) and still serves `initialize`;
//! a legacy-only server is found by the fallback whatever it answers (an
//! error, silence, or exiting); a modern-only one cannot be opened as
//! legacy. Every case runs on the multi-thread runtime, three times.

#![cfg(unix)]

mod host_support;

use std::time::Duration;

use host_support::{config, payload, watchdog};
use mcp_framer_stdio::host::{Era, HandshakeError, HandshakeOptions, RequestError, Session, handshake};
use serde_json::{Value, json};
use tokio::process::Command;

const ROUNDS: usize = 3;

fn command(program: &str, args: &[&str]) -> Command {
    let mut command = Command::new(program);
    command.args(args);
    command
}

fn lib_server() -> Command {
    command(env!("CARGO_BIN_EXE_lib_server"), &[])
}

fn probe_fixture(args: &[&str]) -> Command {
    command(env!("CARGO_BIN_EXE_probe_fixture"), args)
}

/// The default options: a server that answers `server/discover` gets its
/// answer's era however loaded the machine (its deadline is seconds away).
fn options() -> HandshakeOptions {
    HandshakeOptions::default()
}

/// For a server that never answers `server/discover`: its deadline is
/// waited out in full, so it is short (silence stays silence under load).
fn silent_discover() -> HandshakeOptions {
    HandshakeOptions::default().with_discover_timeout(Duration::from_millis(500))
}

async fn open(command: Command, options: &HandshakeOptions) -> (Session, Result<Value, HandshakeError>) {
    let (session, _inbound) = Session::spawn(command, config()).expect("spawn");
    let opened = handshake(&session, options).await.map(|done| {
        json!({
            "era": done.era.as_str(),
            "version": done.protocol_version,
            "offered": done.offered_versions,
            "fallback": done.fallback_reason,
            "server": done.server_info().cloned(),
            "meta": done.meta,
        })
    });
    (session, opened)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_library_server_is_dual_era() {
    watchdog("dual-era lib_server", async {
        for _ in 0..ROUNDS {
            let (session, opened) = open(lib_server(), &options()).await;
            let opened = opened.expect("modern handshake");
            assert_eq!((opened["era"].as_str(), opened["version"].as_str()), (Some("modern"), Some("2026-07-28")));
            assert_eq!(opened["offered"][0], "2026-07-28");
            assert!(opened["offered"].as_array().unwrap().contains(&json!("2025-11-25")), "{opened}");
            assert_eq!(opened["server"]["name"], "lib-server");
            // A modern request carries the _meta; results say resultType.
            let meta = opened["meta"].clone();
            let list = session.request("tools/list", &json!({ "_meta": meta })).await.expect("tools/list");
            let list = payload(&list);
            assert_eq!(list["resultType"], "complete");
            assert!(list["tools"].as_array().is_some_and(|t| !t.is_empty()));
            let call = json!({ "name": "echo", "arguments": { "text": "hi" }, "_meta": meta });
            let echoed = payload(&session.request("tools/call", &call).await.expect("echo"));
            assert_eq!(
                (echoed["resultType"].as_str(), echoed["content"][0]["text"].as_str()),
                (Some("complete"), Some("hi"))
            );
            session.shutdown().await;

            // The legacy era is still served.
            let legacy = options().with_era(Some(Era::Legacy));
            let (session, opened) = open(lib_server(), &legacy).await;
            let opened = opened.expect("initialize");
            assert_eq!((opened["era"].as_str(), opened["version"].as_str()), (Some("legacy"), Some("2025-11-25")));
            assert_eq!(opened["meta"], Value::Null);
            session.request("ping", &()).await.expect("ping after initialize");
            session.shutdown().await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_server_is_found_by_the_fallback_whatever_it_answers() {
    watchdog("legacy fallback", async {
        for _ in 0..ROUNDS {
            // An error reply to server/discover.
            let (session, opened) = open(probe_fixture(&["--legacy-only"]), &options()).await;
            let opened = opened.expect("fallback");
            assert_eq!(opened["era"], "legacy");
            assert!(opened["fallback"].as_str().unwrap().contains("got error -32601"), "{opened}");
            session.shutdown().await;

            // Silence: a server that answers only initialize.
            let script = r#"while read -r line; do
                case "$line" in *'"initialize"'*)
                    id=$(printf '%s' "$line" | sed 's/.*"id":\([0-9]*\).*/\1/')
                    printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"sh"}}}\n' "$id";;
                esac
            done"#;
            let (session, opened) = open(command("sh", &["-c", script]), &silent_discover()).await;
            let opened = opened.expect("fallback after silence");
            assert_eq!((opened["era"].as_str(), opened["version"].as_str()), (Some("legacy"), Some("2025-06-18")));
            assert!(opened["fallback"].as_str().unwrap().contains("not answered within"), "{opened}");
            session.shutdown().await;

            // Exiting on server/discover: the caller restarts it as legacy.
            let (session, opened) = open(command("sh", &["-c", "read -r line; exit 4"]), &options()).await;
            assert!(matches!(opened, Err(HandshakeError::ClosedDuringDiscover(_))), "{opened:?}");
            session.shutdown().await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_only_server_opens_only_as_modern() {
    watchdog("modern-only", async {
        for _ in 0..ROUNDS {
            let (session, opened) = open(probe_fixture(&["--modern-only"]), &options()).await;
            let opened = opened.expect("modern");
            assert_eq!((opened["era"].as_str(), opened["offered"].clone()), (Some("modern"), json!(["2026-07-28"])));
            session.shutdown().await;

            let (session, opened) =
                open(probe_fixture(&["--modern-only"]), &options().with_era(Some(Era::Legacy))).await;
            assert!(matches!(opened, Err(HandshakeError::Initialize(_))), "{opened:?}");
            session.shutdown().await;

            // And a legacy-only one cannot be opened as modern.
            let modern = options().with_era(Some(Era::Modern));
            let (session, opened) = open(probe_fixture(&["--legacy-only"]), &modern).await;
            assert!(matches!(opened, Err(HandshakeError::NoModernVersion { .. })), "{opened:?}");
            session.shutdown().await;
        }
    })
    .await;
}

/// A modern version newer than any the library server knows: its
/// `server/discover` is answered -32022 with `data.supported`.
const UNKNOWN_MODERN: &str = "2099-01-01";

/// The retry after -32022: asked for a version it does not serve, the
/// server answers -32022 with the versions it does; the handshake asks
/// again with the newest of those not newer than its own, and opens the
/// session in that version, modern, with no fallback. One handshake, so the
/// same on both transports: here over newline stdio.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsupported_version_is_retried_with_one_the_server_offers_over_stdio() {
    watchdog("retry after -32022, stdio", async {
        let asked = options().with_modern_version(UNKNOWN_MODERN.to_owned());
        for _ in 0..ROUNDS {
            // The premise: this server refuses the unknown version with -32022.
            let (session, _inbound) = Session::spawn(lib_server(), config()).expect("spawn");
            let refused =
                session.request("server/discover", &json!({ "_meta": asked.modern_meta(UNKNOWN_MODERN) })).await;
            let Err(RequestError::Rpc { code, response, .. }) = refused else {
                panic!("the unknown version was not refused: {refused:?}")
            };
            assert_eq!(code, -32022, "{}", response.payload().unwrap_or(""));
            session.shutdown().await;

            let (session, opened) = open(lib_server(), &asked).await;
            let opened = opened.expect("opened after the retry");
            assert_eq!((opened["era"].as_str(), opened["version"].as_str()), (Some("modern"), Some("2026-07-28")));
            assert_eq!(opened["fallback"], Value::Null, "{opened}");
            assert_eq!(opened["meta"]["io.modelcontextprotocol/protocolVersion"], "2026-07-28", "{opened}");
            session.shutdown().await;
        }
    })
    .await;
}

/// The same retry over `stdio-v2`, through the same `handshake`, with
/// `mcp_framer_stdio_v2::host::Client` as its transport.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsupported_version_is_retried_with_one_the_server_offers_over_stdio_v2() {
    use mcp_framer_stdio_v2::host::{Client, Error, HostConfig};
    watchdog("retry after -32022, stdio-v2", async {
        let asked = options().with_modern_version(UNKNOWN_MODERN.to_owned());
        for _ in 0..ROUNDS {
            let spawn = || Client::spawn(Command::new(env!("CARGO_BIN_EXE_v2_server")), HostConfig::default());
            let client = spawn().await.expect("the v2 fixture starts");
            let refused =
                client.request("server/discover", &json!({ "_meta": asked.modern_meta(UNKNOWN_MODERN) })).await;
            let Err(Error::Rpc { error, .. }) = refused else {
                panic!("the unknown version was not refused: {refused:?}")
            };
            assert_eq!(error.code, -32022, "{error:?}");
            assert!(error.data.as_ref().is_some_and(|d| d["supported"].is_array()), "{error:?}");
            client.shutdown().await;

            let client = spawn().await.expect("the v2 fixture starts");
            let opened = handshake(&client, &asked).await.expect("opened after the retry");
            assert_eq!((opened.era, opened.protocol_version.as_str()), (Era::Modern, "2026-07-28"));
            assert_eq!(opened.fallback_reason, None);
            assert_eq!(
                opened.server_info().and_then(|i| i["name"].as_str()),
                Some("lib-server"),
                "{:?}",
                opened.result
            );
            client.shutdown().await;
        }
    })
    .await;
}
