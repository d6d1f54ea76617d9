//! The kept benchmark records (`benches/records/`, `benches/RECORDS.md`)
//! parse and are complete, the newest one measured the code as it is, and
//! the README's results table is the latest record's, as
//! `scripts/results-table` writes it.

use std::path::Path;
use std::process::Command;

use mcp_framer_benches::record;
use serde_json::{Value, json};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the benches crate is in the workspace")
}

#[test]
fn every_kept_record_parses_and_is_complete() {
    let dir = root().join(record::RECORDS_DIR);
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).expect("benches/records exists") {
        let path = entry.expect("a directory entry").path();
        if path.extension().is_some_and(|e| e == "json") {
            let record = record::load(&path).unwrap_or_else(|e| panic!("{e}"));
            // A kept record comes from a run of every suite: each carries its
            // benches into the BMF.
            let bmf = record["bmf"].as_object().expect("checked by load");
            for prefix in ["framing_", "parse_", "pipe/", "gate/"] {
                assert!(bmf.keys().any(|k| k.starts_with(prefix)), "{}: no {prefix}* bench in its BMF", path.display());
            }
            for (group, _) in record::PAYLOADS {
                // A version 1 record had no flat text at 64 KiB and 1 MiB.
                if record["upgraded_from"] == 1 && group.ends_with("iB-text") {
                    continue;
                }
                for reader in record::CHARTED {
                    let id = format!("pipe/{group}/unpinned/{reader}");
                    assert!(bmf[&id]["cpu-us-per-mib"]["value"].is_number(), "{}: no {id} CPU per MiB", path.display());
                }
            }
            assert!(record["slow_consumer"]["rows"].as_array().is_some_and(|r| !r.is_empty()), "{}", path.display());
            if record["upgraded_from"] != 1 {
                assert!(bmf.keys().any(|k| k.starts_with("scale/")), "{}: no scale/* bench", path.display());
            }
            // Records since the stdio_v2 bench was added carry its rows.
            if !record["stdio_v2"].is_null() {
                let rows = record["stdio_v2"]["rows"].as_array();
                assert!(rows.is_some_and(|r| r.len() >= 2), "{}: no stdio_v2 rows", path.display());
            }
            let unmeasured: Vec<&Value> =
                record["ratios"].as_array().into_iter().flatten().filter(|r| r["verdict"] == "n/a").collect();
            assert!(unmeasured.is_empty(), "{}: targets not measured: {unmeasured:#?}", path.display());
            seen += 1;
        }
    }
    assert!(seen > 0, "no record in {}", dir.display());
}

#[test]
fn the_readme_table_is_the_latest_records() {
    let latest = record::latest(&root().join(record::RECORDS_DIR)).unwrap_or_else(|e| panic!("{e}"));
    let name = latest.strip_prefix(root()).expect("under the root").to_string_lossy().into_owned();
    let record = record::load(&latest).unwrap_or_else(|e| panic!("{e}"));
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let table = record::current_table(&readme).expect("the README has the results-table markers");
    assert_eq!(
        table,
        record::readme_table(&record, &name),
        "README.md's results table is not {name}'s: run scripts/results-table"
    );
}

#[test]
fn splice_replaces_only_the_marked_section() {
    let readme = format!("before\n{}\nold\n{}\nafter\n", record::BEGIN, record::END);
    let table = format!("{}\nnew\n{}\n", record::BEGIN, record::END);
    let spliced = record::splice(&readme, &table).expect("markers");
    assert_eq!(spliced, format!("before\n{table}after\n"));
    assert_eq!(record::current_table(&spliced), Some(table.as_str()));
    assert!(record::splice("no markers", &table).is_none());
}

#[test]
fn latest_is_the_record_whose_run_ended_last_whatever_its_name() {
    let dir = std::env::temp_dir().join(format!("mcp-records-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    // Another machine's name sorts first; a record without a time in its
    // name came from the same day: neither decides, the `date` does.
    for (name, date) in [
        ("2026-11-30-cpu-2cpu.json", "2026-11-30T23:59:00Z"),
        ("2026-12-01-xeon-2cpu-0831.json", "2026-12-01T08:31:00Z"),
        ("2026-12-01-amd-epyc-2cpu.json", "2026-12-01T12:05:00Z"),
        ("2026-12-01-xeon-2cpu.json", "2026-12-01T07:00:00Z"),
    ] {
        std::fs::write(dir.join(name), format!(r#"{{"date": "{date}"}}"#)).expect("write");
    }
    let latest = record::latest(&dir).expect("a record");
    std::fs::remove_dir_all(&dir).expect("clean up");
    assert_eq!(latest.file_name().and_then(|n| n.to_str()), Some("2026-12-01-amd-epyc-2cpu.json"));
}

/// What a change below `framer/` or `benches/` may touch without a fresh
/// record: the records themselves, docs and charts.
const NOT_MEASURED: [&str; 3] = [":(exclude)benches/records", ":(exclude,glob)**/*.md", ":(exclude,glob)**/*.svg"];

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).current_dir(root()).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// A change that can move a figure comes with a fresh record: no file below
/// `framer/` or `benches/` (but the records, docs and charts) changed in a
/// commit after the newest record's, and that record was of a clean tree.
/// Uncommitted changes do not count: commit the code, then record it
/// (`scripts/bench-report --quick --keep`) and commit the record.
#[test]
fn the_newest_record_measured_the_code_as_it_is() {
    let latest = record::latest(&root().join(record::RECORDS_DIR)).unwrap_or_else(|e| panic!("{e}"));
    let record = record::load(&latest).unwrap_or_else(|e| panic!("{e}"));
    let name = latest.strip_prefix(root()).expect("under the root").display().to_string();
    if git(&["rev-parse", "--is-inside-work-tree"]).as_deref() != Some("true") {
        eprintln!("SKIPPED: not a git checkout; cannot tell whether {name} measured this code");
        return;
    }
    let commit = record["commit"].as_str().expect("checked by load");
    if git(&["cat-file", "-e", &format!("{commit}^{{commit}}")]).is_none() {
        eprintln!("SKIPPED: {name}'s commit {commit} is not in this checkout (a shallow clone?)");
        return;
    }
    assert_ne!(record["dirty"], true, "{name} measured uncommitted changes: record a clean tree");
    let range = format!("{commit}..HEAD");
    let mut args = vec!["log", "--format=", "--name-only", range.as_str(), "--", "framer", "benches"];
    args.extend(NOT_MEASURED);
    let changed = git(&args).expect("git log");
    let mut changed: Vec<&str> = changed.lines().filter(|l| !l.is_empty()).collect();
    changed.sort_unstable();
    changed.dedup();
    assert!(
        changed.is_empty(),
        "{} files changed below framer/ or benches/ after {name}'s commit {commit}, so the README's figures may \
         not be today's code's: run scripts/bench-report --quick --keep and commit the record. The first: {:#?}",
        changed.len(),
        &changed[..changed.len().min(20)]
    );
}

/// A small record, checked by `record::check`: one target, its benches.
fn record_with(ratio: Value, bmf: Value) -> Value {
    json!({
        "format": "mcp-framer bench record", "version": record::VERSION, "commit": "0123456789abcdef",
        "date": "2026-12-02T00:00:00Z", "mode": "quick", "clock": "wall-clock", "command": "test",
        "machine": {"cpu": "test", "nproc": 2}, "load": {"before": [1.0, 1.0, 1.0], "after": [1.0, 1.0, 1.0]},
        "ratios": [ratio], "bmf": bmf,
    })
}

fn ratio(value: f64, low: f64, high: f64, verdict: &str) -> Value {
    json!({"suite": "pipe", "group": "pipe/200B-text/unpinned", "of": "a", "vs": "b", "measure": "throughput",
           "value": value, "low": low, "high": high, "target": 1.5, "verdict": verdict, "floor": false, "why": "test"})
}

fn bmf() -> Value {
    let m = json!({"ns-per-mib": {"value": 2.0, "lower_value": 1.0, "upper_value": 3.0}});
    json!({"pipe/200B-text/unpinned/a": m, "pipe/200B-text/unpinned/b": m})
}

#[test]
fn check_holds_each_verdict_to_its_spread_and_target() {
    for (value, low, high, verdict) in [
        (2.0, 1.5, 2.5, "PASS"),
        (1.2, 1.1, 1.4, "MISS"),
        (1.6, 1.4, 1.8, "within noise"),
        (1.45, 1.4, 1.5, "within noise"),
    ] {
        assert_eq!(record::check(&record_with(ratio(value, low, high, verdict), bmf())), Ok(()), "{verdict}");
        for wrong in ["PASS", "MISS", "within noise"].into_iter().filter(|w| *w != verdict) {
            let error = record::check(&record_with(ratio(value, low, high, wrong), bmf())).unwrap_err();
            assert!(error.contains(&format!("give {verdict}, not {wrong}")), "{error}");
        }
    }
    let error = record::check(&record_with(ratio(2.0, 2.1, 2.5, "PASS"), bmf())).unwrap_err();
    assert!(error.contains("low <= value <= high"), "{error}");
    let unmeasured = json!({"suite": "pipe", "group": "g", "of": "a", "vs": "b", "measure": "throughput",
        "value": null, "target": 1.5, "verdict": "PASS", "floor": false, "why": "test"});
    assert!(record::check(&record_with(unmeasured, bmf())).is_err(), "an unmeasured target is n/a");
}

#[test]
fn check_rejects_an_invalid_bmf() {
    let valid = ratio(2.0, 1.5, 2.5, "PASS");
    let mut reversed = bmf();
    reversed["pipe/200B-text/unpinned/a"]["ns-per-mib"]["lower_value"] = json!(2.5);
    let error = record::check(&record_with(valid.clone(), reversed)).unwrap_err();
    assert!(error.contains("lower_value <= value <= upper_value"), "{error}");
    let mut text = bmf();
    text["pipe/200B-text/unpinned/b"]["ns-per-mib"]["value"] = json!("2.0");
    assert!(record::check(&record_with(valid.clone(), text)).unwrap_err().contains("no finite value"));
    let mut missing = bmf();
    missing.as_object_mut().expect("an object").remove("pipe/200B-text/unpinned/b");
    assert!(record::check(&record_with(valid, missing)).unwrap_err().contains("no bmf"));
}

#[test]
fn a_version_1_record_reads_in_version_2_units() {
    let v1 = json!({
        "format": "mcp-framer bench record", "version": 1, "commit": "8ddc517", "clock": "wall-clock",
        "ratios": [{"group": "pipe/64KiB/unpinned", "value": 2.0}],
        "bmf": {"pipe/64KiB/unpinned/rmcp": {
            // 64 MiB per iteration in 0.5 s.
            "latency": {"value": 5e8, "lower_value": 4e8, "upper_value": 6e8},
            "throughput": {"value": 134217728.0, "lower_value": 111848106.7, "upper_value": 167772160.0},
            "cpu-per-mib": {"value": 11071.0, "lower_value": 10000.0, "upper_value": 12000.0}}},
    });
    let v2 = record::upgrade(v1);
    assert_eq!(v2["version"], record::VERSION);
    let bench = &v2["bmf"]["pipe/64KiB-tools-list/unpinned/rmcp"];
    assert_eq!(bench["ns-per-mib"]["value"], 5e8 / 64.0);
    assert_eq!(bench["mib-per-s"]["value"], 128.0);
    assert_eq!(bench["cpu-us-per-mib"]["value"], 11071.0);
    assert_eq!(v2["ratios"][0]["group"], "pipe/64KiB-tools-list/unpinned");
    assert_eq!((&v2["ratios"][0]["low"], &v2["ratios"][0]["high"]), (&json!(2.0), &json!(2.0)));
}
