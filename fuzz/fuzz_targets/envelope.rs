//! One frame: the serde_json and simd-json envelope parsers classify it
//! alike. See `mcp_framer_jsonrpc::check::check_envelope_agrees`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_framer_jsonrpc::check::check_envelope_agrees;

fuzz_target!(|frame: &[u8]| {
    check_envelope_agrees(frame);
});
