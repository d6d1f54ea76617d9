//! The committed corpus: where it lives, and a replay of a fuzz target's
//! seeds and kept crashes through its check function. Shared with the
//! JSON-RPC crate's corpus replay (by `#[path]`), so it depends on nothing
//! but std.
#![allow(dead_code)] // each test file uses its half

use std::fs;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

/// The repository's `corpus/` directory, or the directory named by the
/// `MCP_FRAMER_CORPUS` environment variable (for a vendored copy of the
/// crate, whose corpus lives elsewhere).
pub fn corpus_dir() -> PathBuf {
    match std::env::var_os("MCP_FRAMER_CORPUS") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../corpus"),
    }
}

/// Files in `dir`, sorted, README files excluded. A missing directory is empty.
pub fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else { return Vec::new() };
    let mut paths: Vec<PathBuf> = entries
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && !p.file_name().unwrap().to_string_lossy().starts_with("README"))
        .collect();
    paths.sort();
    paths
}

/// Runs `check` on every seed and regression file of `target`; fails with the
/// names of all files that panicked. Returns how many files ran.
pub fn replay(target: &str, check: impl Fn(&[u8])) -> usize {
    let mut paths = files(&corpus_dir().join(target));
    assert!(!paths.is_empty(), "no committed seeds for {target}");
    paths.extend(files(&corpus_dir().join("regressions").join(target)));
    let failed: Vec<String> = paths
        .iter()
        .filter(|path| {
            let bytes = fs::read(path).unwrap();
            catch_unwind(AssertUnwindSafe(|| check(&bytes))).is_err()
        })
        .map(|path| path.display().to_string())
        .collect();
    assert!(failed.is_empty(), "{target}: {} of {} files failed: {failed:#?}", failed.len(), paths.len());
    paths.len()
}
