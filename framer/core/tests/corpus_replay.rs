//! Replays, on stable and without libFuzzer, everything committed under
//! `corpus/`: every conformance vector (`corpus/vectors/*.json`), every fuzz
//! seed (`corpus/<target>/`) and every kept crash (`corpus/regressions/<target>/`),
//! through the same check functions the fuzz targets call.

mod common;

use std::fs;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;

use common::corpus::{files, replay};
use common::{config_from_json, corpus_dir, error_from_json, event_from_json, stats_from_json, unhex};
use mcp_framer::check::{
    MODES, OversizeCase, check_against_reference, check_every_split, check_oversize_recovery, check_split_boundary,
    decode_setup_and_payload, run,
};
use serde_json::Value;

#[test]
fn split_boundary_seeds_and_regressions_pass() {
    replay("split_boundary", |data| {
        let (setup, payload) = decode_setup_and_payload(data);
        check_split_boundary(&setup, payload);
        // The fuzz target feeds only short payloads one byte at a time (for
        // speed); on stable, every committed seed is also cut at every byte.
        if payload.len() <= 512 {
            check_every_split(&setup.config, payload);
        }
    });
}

#[test]
fn oversize_recovery_seeds_and_regressions_pass() {
    replay("oversize_recovery", |data| {
        let case: OversizeCase = arbitrary::Arbitrary::arbitrary_take_rest(arbitrary::Unstructured::new(data)).unwrap();
        check_oversize_recovery(&case);
    });
}

/// The reader target drives `Framer::read_from`, which needs `std`.
#[cfg(feature = "std")]
#[test]
fn adversarial_reader_seeds_and_regressions_pass() {
    use mcp_framer::check::{ReaderCase, check_adversarial_reader};
    replay("adversarial_reader", |data| {
        let (setup, stream) = decode_setup_and_payload(data);
        check_adversarial_reader(&ReaderCase { setup, stream });
    });
}

/// Checks one vector: in every input mode, with the vector's chunks, the
/// events (`seen` included), the error and the pinned counters are exactly
/// the expected ones, and the reference model agrees.
fn check_vector(vector: &Value) {
    let config = config_from_json(&vector["config"]);
    let input = unhex(vector["input_hex"].as_str().expect("input_hex"));
    let chunks: Vec<usize> =
        vector["chunks"].as_array().expect("chunks").iter().map(|c| c.as_u64().expect("chunk") as usize).collect();
    if !input.is_empty() {
        assert_eq!(chunks.iter().sum::<usize>(), input.len(), "chunk sizes must add up to the input length");
    }
    let events: Vec<_> = vector["events"].as_array().expect("events").iter().map(event_from_json).collect();
    let error = error_from_json(&vector["error"]);
    let stats = stats_from_json(&vector["stats"]);
    for mode in MODES {
        let mut got = run(&config, &input, &chunks, mode);
        got.stats.buffered_high_water = 0;
        got.stats.buffer_capacity = 0;
        assert_eq!(got.events, events, "{mode:?}: events");
        assert_eq!(got.error, error, "{mode:?}: error");
        assert_eq!(got.stats, stats, "{mode:?}: stats");
    }
    check_against_reference(&config, &input, &chunks);
}

#[test]
fn conformance_vectors_pass() {
    let paths: Vec<PathBuf> = files(&corpus_dir().join("vectors"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    assert!(paths.len() >= 40, "expected at least 40 vectors, found {}", paths.len());
    let failed: Vec<String> = paths
        .iter()
        .filter_map(|path| {
            let vector: Value = serde_json::from_slice(&fs::read(path).unwrap()).expect("vector is not valid JSON");
            let result = catch_unwind(AssertUnwindSafe(|| check_vector(&vector)));
            result.err().map(|_| path.display().to_string())
        })
        .collect();
    assert!(failed.is_empty(), "{} of {} vectors failed: {failed:#?}", failed.len(), paths.len());
}
