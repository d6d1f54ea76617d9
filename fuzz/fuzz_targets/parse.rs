//! One frame: `mcp_framer_jsonrpc::parse` and the simd-json oracle classify
//! it alike. See `mcp_framer_jsonrpc::check::check_parse`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_framer_jsonrpc::check::check_parse;

// `-malloc_limit_mb` without a sanitizer too; see `fuzz/src/lib.rs`.
#[global_allocator]
static ALLOCATOR: mcp_framer_fuzz::LimitedAlloc = mcp_framer_fuzz::LimitedAlloc;

fuzz_target!(init: mcp_framer_fuzz::limit_allocations(), |frame: &[u8]| {
    check_parse(frame);
});
