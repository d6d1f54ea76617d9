//! A reader returning 0..N bytes per read (N chosen by the fuzzer), plus
//! `WouldBlock` and `Interrupted`, fed through `Framer::read_from`. See
//! `mcp_framer::check::check_adversarial_reader`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_framer::check::{ReaderCase, check_adversarial_reader, decode_setup_and_payload};

// `-malloc_limit_mb` without a sanitizer too; see `fuzz/src/lib.rs`.
#[global_allocator]
static ALLOCATOR: mcp_framer_fuzz::LimitedAlloc = mcp_framer_fuzz::LimitedAlloc;

fuzz_target!(init: mcp_framer_fuzz::limit_allocations(), |data: &[u8]| {
    let (setup, stream) = decode_setup_and_payload(data);
    check_adversarial_reader(&ReaderCase { setup, stream });
});
