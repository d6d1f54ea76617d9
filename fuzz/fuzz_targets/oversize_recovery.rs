//! Structured lines (normal, oversize, empty, CRLF, multibyte, unterminated):
//! frames after an oversize one survive byte-exact. See
//! `mcp_framer::check::check_oversize_recovery`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_framer::check::{OversizeCase, check_oversize_recovery};

fuzz_target!(|case: OversizeCase| {
    check_oversize_recovery(&case);
});
