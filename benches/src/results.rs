//! Where the benches leave what criterion does not store, for
//! `scripts/bench-report` to put into its record (see `benches/RECORDS.md`).

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};

/// Criterion's output directory, as criterion picks it: `$CRITERION_HOME`,
/// else `<target>/criterion` (a bench runs from `<target>/<profile>/deps/`).
pub fn criterion_dir() -> Option<PathBuf> {
    if let Some(home) = std::env::var_os("CRITERION_HOME") {
        return Some(PathBuf::from(home));
    }
    let exe = std::env::current_exe().ok()?;
    Some(exe.parent()?.parent()?.parent()?.join("criterion"))
}

/// Seconds since the Unix epoch: when a measurement was written, so the
/// report can tell this run's results from older ones.
pub fn now_unix() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// Adds `entries` (bench id → object) to the JSON object file `name` in the
/// criterion directory, keeping the other ids already there (a filtered run
/// updates only what it measured), with `about` as its description.
pub fn merge_into(name: &str, about: &str, entries: Map<String, Value>) -> Result<PathBuf, String> {
    let dir = criterion_dir().ok_or("no criterion directory")?;
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let path = dir.join(name);
    let mut benches = std::fs::read(&path)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
        .and_then(|mut doc| doc.get_mut("benches").map(Value::take))
        .and_then(|benches| if let Value::Object(map) = benches { Some(map) } else { None })
        .unwrap_or_default();
    benches.extend(entries);
    let doc = json!({ "about": about, "benches": benches });
    let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
    std::fs::write(&path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}

/// Writes a bench's table (`table.md`) and its rows (`results.json`, `doc`
/// with an `at` from [`now_unix`]) to `<criterion dir>/<name>/`, for a bench
/// that is not criterion's; `scripts/bench-report` prints the table and
/// keeps the rows in its record. Returns the directory.
pub fn write_table(name: &str, table: &str, doc: &Value) -> Result<PathBuf, String> {
    let dir = criterion_dir().ok_or("no criterion directory")?.join(name);
    let json = serde_json::to_string_pretty(doc).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::write(dir.join("table.md"), table))
        .and_then(|()| std::fs::write(dir.join("results.json"), json + "\n"))
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(dir)
}
