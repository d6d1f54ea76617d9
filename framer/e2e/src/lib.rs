//! Fixture MCP servers and the helpers shared by every test that spawns a
//! real process.
//!
//! * [`hostile`]: a misbehaving server written without the library (blocks
//!   in `write(2)`, writes junk on stdout, dies mid-frame, ...), the peer the
//!   host transport is tested against. Binary: `hostile_server`.
//! * [`lib_server`]: a server built on `mcp_framer_stdio::server`, offering
//!   the tools the server-side process tests need. Binary: `lib_server`.
//! * [`probe_fixture`]: a small server on plain threads whose switches each
//!   reproduce one defect `mcp-probe` checks for. Binary: `probe_fixture`
//!   (and `probe_cli`, the probe itself, for the tests).
//! * [`v2_server`]: the `lib_server` tools behind the experimental
//!   `stdio-v2` front (HTTP/2 over stdio), plus a few tools of its own.
//!   Binary: `v2_server`.
//! * [`soak`]: minutes of mixed traffic on either transport, memory
//!   sampled, a verdict (binaries `soak` and `soak_server`; `scripts/soak`).
//! * [`report`]: the machine-readable stderr lines both fixtures write.
//! * [`support`]: watchdogs, polling, and process-group checks for the tests.
//!
//! The binaries are thin: each calls its module's `main`. The `deadlock`
//! example runs the hostile fixture by re-executing itself with
//! `--serve-hostile`, so it needs no separately built binary.
//!
//! Unix only, like `mcp-framer-stdio`.

/// The repository README's Rust examples, compiled as doctests so that
/// they stay in step with the API (`no_run`: they read stdin or spawn a
/// server that isn't here).
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeExamples;

pub mod hostile;
pub mod lib_server;
pub mod probe_fixture;
pub mod report;
pub mod soak;
pub mod support;
pub mod v2_server;

use std::ffi::OsString;
use std::process::ExitCode;

/// Parses a fixture's command line; on `--help` or an error, prints what
/// clap has to say and returns the exit code to end with (0 or 2).
fn parse_args<A: clap::Parser>(argv: impl IntoIterator<Item = impl Into<OsString> + Clone>) -> Result<A, ExitCode> {
    A::try_parse_from(argv).map_err(|err| {
        let _ = err.print();
        ExitCode::from(u8::try_from(err.exit_code()).unwrap_or(2))
    })
}
