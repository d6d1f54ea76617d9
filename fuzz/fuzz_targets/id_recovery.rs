//! Two bytes (head and tail lengths), then one frame: recovering a
//! response's id from the frame's head and tail never panics and never
//! returns an id other than serde_json's top-level `id`. See
//! `mcp_framer_jsonrpc::check::check_id_recovery`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_framer_jsonrpc::check::check_id_recovery;

fuzz_target!(|input: &[u8]| {
    check_id_recovery(input);
});
