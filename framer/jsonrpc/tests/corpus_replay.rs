//! Replays, on stable and without libFuzzer, the `envelope` fuzz target's
//! committed seeds (`corpus/envelope/`) and kept crashes
//! (`corpus/regressions/envelope/`) through the check it calls.

#[path = "../../core/tests/common/corpus.rs"]
mod corpus;

#[test]
fn envelope_seeds_and_regressions_pass() {
    let ran = corpus::replay("envelope", mcp_framer_jsonrpc::check::check_envelope_agrees);
    assert!(ran > 0);
}

#[test]
fn id_recovery_seeds_and_regressions_pass() {
    let ran = corpus::replay("id_recovery", mcp_framer_jsonrpc::check::check_id_recovery);
    assert!(ran > 0);
}
