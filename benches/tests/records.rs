//! The kept benchmark records (`benches/records/`, `benches/RECORDS.md`)
//! parse and are complete, and the README's results table is the latest
//! record's, as `scripts/results-table` writes it.

use std::path::Path;

use mcp_framer_benches::record;

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
            for size in record::SIZES {
                for reader in record::CHARTED {
                    let id = format!("pipe/{size}/unpinned/{reader}");
                    assert!(bmf[&id]["cpu-per-mib"]["value"].is_number(), "{}: no {id} CPU per MiB", path.display());
                }
            }
            assert!(record["slow_consumer"]["rows"].as_array().is_some_and(|r| !r.is_empty()), "{}", path.display());
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
fn latest_orders_by_date_then_time() {
    let dir = std::env::temp_dir().join(format!("mcp-records-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    for name in ["2026-11-30-cpu-2cpu.json", "2026-12-01-cpu-2cpu.json", "2026-12-01-cpu-2cpu-1130.json"] {
        std::fs::write(dir.join(name), "{}").expect("write");
    }
    let latest = record::latest(&dir).expect("a record");
    std::fs::remove_dir_all(&dir).expect("clean up");
    assert_eq!(latest.file_name().and_then(|n| n.to_str()), Some("2026-12-01-cpu-2cpu-1130.json"));
}
