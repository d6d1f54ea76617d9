//! Arbitrary bytes, chunk boundaries, limit and policy: every input mode
//! agrees with the reference model. See `mcp_framer::check::check_split_boundary`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_framer::check::{check_split_boundary, decode_setup_and_payload};

fuzz_target!(|data: &[u8]| {
    let (setup, payload) = decode_setup_and_payload(data);
    check_split_boundary(&setup, payload);
});
