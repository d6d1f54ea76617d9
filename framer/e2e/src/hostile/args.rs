//! The hostile fixture's command line.

use std::num::NonZeroUsize;

use clap::{Parser, ValueEnum};
use serde_json::{Value, json};

/// MCP server over stdio (newline-delimited JSON-RPC 2.0) for stdio
/// backpressure tests.
///
/// Tools: ping echo big sized giant_field many_blocks malformed stderr_flood
/// log_line slow_stream hostile_payload split_writes stream flood silent
/// ask_client exit_mid_frame exit_leaving_holder unreadable_error stats. Diagnostics go to stderr; the last stderr line at EOF is the
/// report line `stats: {json}`.
#[derive(Debug, Clone, Parser)]
#[command(name = "hostile_server")]
pub struct Args {
    /// Run TOOL at startup as if called via tools/call with id 0.
    #[arg(long, value_name = "TOOL")]
    pub on_start: Option<String>,
    /// Argument for --on-start (VALUE parsed as JSON, else a string);
    /// repeatable.
    #[arg(long, value_name = "KEY=VALUE", value_parser = parse_key_value)]
    pub arg: Vec<(String, Value)>,
    /// Default size of each write(2) on stdout.
    #[arg(long, value_name = "BYTES", default_value = "16384")]
    pub chunk: NonZeroUsize,
    /// How requests are dispatched.
    #[arg(long, value_name = "MODE", value_enum, default_value_t = Mode::Ordered)]
    pub dispatch: Mode,
}

/// Request dispatch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// One worker answers requests in arrival order; stdin is always read.
    Ordered,
    /// One thread per request; frames never interleave, order follows
    /// completion.
    Concurrent,
    /// Requests are handled on the stdin reader thread, so stdin is not
    /// read while stdout is blocked (the classic stdio deadlock).
    Inline,
}

fn parse_key_value(raw: &str) -> Result<(String, Value), String> {
    let (key, value) = raw.split_once('=').ok_or_else(|| format!("expected KEY=VALUE, got {raw:?}"))?;
    let value = serde_json::from_str(value).unwrap_or_else(|_| json!(value));
    Ok((key.to_owned(), value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse_as_before() {
        let args = Args::try_parse_from([
            "hostile_server",
            "--on-start",
            "sized",
            "--arg",
            "frame_bytes=300",
            "--arg=text=plain words",
            "--chunk=7",
            "--dispatch",
            "inline",
        ])
        .unwrap();
        assert_eq!(args.on_start.as_deref(), Some("sized"));
        assert_eq!(args.arg, [("frame_bytes".to_owned(), json!(300)), ("text".to_owned(), json!("plain words"))]);
        assert_eq!((args.chunk.get(), args.dispatch), (7, Mode::Inline));

        let defaults = Args::try_parse_from(["hostile_server"]).unwrap();
        assert_eq!((defaults.chunk.get(), defaults.dispatch, defaults.on_start), (16384, Mode::Ordered, None));
    }

    #[test]
    fn bad_flags_are_refused() {
        for argv in [
            &["x", "--chunk", "0"][..],
            &["x", "--dispatch", "sideways"],
            &["x", "--arg", "no-equals-sign"],
            &["x", "--unknown"],
            &["x", "--chunk"],
        ] {
            assert!(Args::try_parse_from(argv).is_err(), "{argv:?}");
        }
    }
}
