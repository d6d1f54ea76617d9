//! Arbitrary bytes, chunk boundaries, limit and policy: every input mode
//! agrees with the reference model. See `mcp_framer::check::check_split_boundary`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_framer::check::{check_split_boundary, decode_setup_and_payload};

// `-malloc_limit_mb` without a sanitizer too; see `fuzz/src/lib.rs`.
#[global_allocator]
static ALLOCATOR: mcp_framer_fuzz::LimitedAlloc = mcp_framer_fuzz::LimitedAlloc;

fuzz_target!(init: mcp_framer_fuzz::limit_allocations(), |data: &[u8]| {
    let (setup, payload) = decode_setup_and_payload(data);
    check_split_boundary(&setup, payload);
});
