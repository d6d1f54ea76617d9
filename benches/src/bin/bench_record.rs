//! Draws what `scripts/bench-report` records (`benches/RECORDS.md`).
//!
//! ```text
//! bench-record charts <record.json> <dir>   # pipe.svg and slow_consumer.svg into <dir>
//! bench-record readme [--check]             # the README's results table and benches/*.svg
//!                                           #   from the latest record in benches/records/
//! ```
//!
//! `readme --check` changes nothing and exits 1 when the README's table is
//! not the latest record's (`scripts/results-table --check`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use mcp_framer_benches::record;

fn charts(record: &serde_json::Value, dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut written = Vec::new();
    let drawn = [("pipe.svg", record::pipe_chart(record)), ("slow_consumer.svg", record::slow_consumer_chart(record))];
    for (name, svg) in drawn {
        match svg {
            Ok(svg) => {
                let path = dir.join(name);
                std::fs::write(&path, svg).map_err(|e| format!("{}: {e}", path.display()))?;
                written.push(path);
            }
            Err(e) => eprintln!("bench-record: {name} not drawn: {e}"),
        }
    }
    Ok(written)
}

fn run(args: &[String]) -> Result<ExitCode, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().ok_or("no repository root")?;
    match args {
        [cmd, path, dir] if cmd == "charts" => {
            let record = record::load(Path::new(path))?;
            for path in charts(&record, Path::new(dir))? {
                println!("chart: {}", path.display());
            }
            Ok(ExitCode::SUCCESS)
        }
        [cmd, rest @ ..] if cmd == "readme" && rest.len() <= 1 => {
            let check = match rest {
                [] => false,
                [flag] if flag == "--check" => true,
                _ => return Err("usage: bench-record readme [--check]".into()),
            };
            let latest = record::latest(&root.join(record::RECORDS_DIR))?;
            let name = latest.strip_prefix(root).map_err(|e| e.to_string())?.to_string_lossy().into_owned();
            let record = record::load(&latest)?;
            let readme_path = root.join("README.md");
            let readme = std::fs::read_to_string(&readme_path).map_err(|e| e.to_string())?;
            let table = record::readme_table(&record, &name);
            if check {
                return Ok(if record::current_table(&readme) == Some(table.as_str()) {
                    println!("README.md's results table is {name}'s");
                    ExitCode::SUCCESS
                } else {
                    eprintln!("README.md's results table is not {name}'s: run scripts/results-table");
                    ExitCode::FAILURE
                });
            }
            let new = record::splice(&readme, &table)
                .ok_or_else(|| format!("README.md has no {} ... {} markers", record::BEGIN, record::END))?;
            std::fs::write(&readme_path, new).map_err(|e| e.to_string())?;
            println!("README.md: results table from {name}");
            for path in charts(&record, &root.join("benches"))? {
                println!("chart: {}", path.display());
            }
            Ok(ExitCode::SUCCESS)
        }
        _ => Err("usage: bench-record charts <record.json> <dir> | bench-record readme [--check]".into()),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    run(&args).unwrap_or_else(|e| {
        eprintln!("bench-record: {e}");
        ExitCode::from(2)
    })
}
