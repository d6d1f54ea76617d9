//! Replays the conformance vectors of `recover_response_id`
//! (`corpus/vectors-id/*.json`, format in its README) on stable.

use std::fs;
use std::path::PathBuf;

use mcp_framer_jsonrpc::recover_response_id;

#[derive(serde::Deserialize)]
struct Vector {
    description: String,
    head: String,
    tail: String,
    len: u64,
    id: Option<serde_json::Value>,
}

#[test]
fn id_recovery_vectors_pass() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../corpus/vectors-id");
    let mut paths: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    paths.sort();
    assert!(paths.len() >= 20, "{} vectors", paths.len());
    let (mut found, mut refused) = (0, 0);
    for path in &paths {
        let vector: Vector = serde_json::from_slice(&fs::read(path).unwrap()).unwrap();
        let got = recover_response_id(vector.head.as_bytes(), vector.tail.as_bytes(), vector.len);
        let got_json = got.as_ref().map(|id| serde_json::to_value(id).unwrap());
        assert_eq!(got_json, vector.id, "{}: {}", path.display(), vector.description);
        if got.is_some() { found += 1 } else { refused += 1 }
    }
    assert!(found >= 8 && refused >= 8, "both outcomes covered: {found} found, {refused} refused");
    // The vectors' id forms: a number and a string at least.
    assert!(paths.iter().any(|p| p.to_string_lossy().contains("string-id")));
}
