//! Fixture programs and shared helpers for the benches and process tests.
//!
//! The main job is `scripts/bench-report --quick` (`benches/report.toml`
//! says what it runs and the targets). Its records (`benches/records/`,
//! formats in `benches/RECORDS.md`) are where every figure the README shows
//! comes from. A record names the commit it measured, and
//! `tests/records.rs` fails when code below `framer/` or `benches/` changed
//! after the newest record's commit: a change that can move a figure comes
//! with a fresh record (`scripts/bench-report --quick --keep`, committed
//! with the README table and charts it rewrites).

pub mod pipe;
pub mod readers;
pub mod record;
pub mod results;
pub mod shapes;
