//! Structured lines (normal, oversize, empty, CRLF, multibyte, unterminated):
//! frames after an oversize one survive byte-exact. See
//! `mcp_framer::check::check_oversize_recovery`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_framer::check::{OversizeCase, check_oversize_recovery};

// `-malloc_limit_mb` without a sanitizer too; see `fuzz/src/lib.rs`.
#[global_allocator]
static ALLOCATOR: mcp_framer_fuzz::LimitedAlloc = mcp_framer_fuzz::LimitedAlloc;

fuzz_target!(init: mcp_framer_fuzz::limit_allocations(), |case: OversizeCase| {
    check_oversize_recovery(&case);
});
