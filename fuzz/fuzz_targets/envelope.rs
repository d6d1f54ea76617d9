//! One frame: the serde_json and simd-json envelope parsers classify it
//! alike. See `mcp_framer_jsonrpc::check::check_envelope_agrees`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_framer_jsonrpc::check::check_envelope_agrees;

// `-malloc_limit_mb` without a sanitizer too; see `fuzz/src/lib.rs`.
#[global_allocator]
static ALLOCATOR: mcp_framer_fuzz::LimitedAlloc = mcp_framer_fuzz::LimitedAlloc;

fuzz_target!(init: mcp_framer_fuzz::limit_allocations(), |frame: &[u8]| {
    check_envelope_agrees(frame);
});
