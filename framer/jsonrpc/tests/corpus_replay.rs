//! Replays, on stable and without libFuzzer, the `parse` fuzz target's
//! committed seeds (`corpus/parse/`) and kept crashes
//! (`corpus/regressions/parse/`) through the check it calls.

#[path = "../../core/tests/common/corpus.rs"]
mod corpus;

#[test]
fn parse_seeds_and_regressions_pass() {
    let ran = corpus::replay("parse", mcp_framer_jsonrpc::check::check_parse);
    assert!(ran > 0);
}

#[test]
fn id_recovery_seeds_and_regressions_pass() {
    let ran = corpus::replay("id_recovery", mcp_framer_jsonrpc::check::check_id_recovery);
    assert!(ran > 0);
}
