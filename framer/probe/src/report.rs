//! The report: one result per check, rendered as text or as JSON.
//!
//! The JSON form is the contract for tools: its schema is
//! `report.schema.json` in this crate (`"schema": "mcp-probe-report"`,
//! `"version": 1`). A new field may appear in a minor release; a field is
//! removed or changes meaning only with a new `version`.

use std::fmt::{self, Write as _};

use serde::Serialize;
use serde_json::{Map, Value};

/// The name of the report's JSON schema.
pub const SCHEMA: &str = "mcp-probe-report";
/// The version of the report's JSON schema.
pub const SCHEMA_VERSION: u32 = 1;

/// How a check came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Verdict {
    /// The server meets the criterion.
    Pass,
    /// The server works, but not as the specification says (a wrong error
    /// code, an unknown protocol version) or the check could not tell.
    Warn,
    /// The server breaks the criterion: a host would hang, lose data or leak.
    Fail,
    /// The check did not run (the server lacks what it needs, or it was
    /// deselected).
    Skip,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verdict::Pass => "PASS",
            Verdict::Warn => "WARN",
            Verdict::Fail => "FAIL",
            Verdict::Skip => "SKIP",
        })
    }
}

/// One check's result.
#[derive(Clone, Debug, Serialize)]
pub struct CheckResult {
    /// The check's number (1 to 9).
    pub number: u8,
    /// Its name (`stdout-hygiene`, ...).
    pub name: &'static str,
    /// Its title.
    pub title: &'static str,
    /// The verdict: the worst of its findings.
    pub verdict: Verdict,
    /// One line saying why the criterion matters.
    pub why: &'static str,
    /// What was seen, one finding per line, in order.
    pub evidence: Vec<String>,
    /// The same findings as numbers and strings, for tools.
    pub measurements: Map<String, Value>,
    /// How long the check ran, in milliseconds.
    pub duration_ms: u64,
}

impl CheckResult {
    /// A result that starts as PASS with no evidence.
    pub fn new(number: u8, name: &'static str, title: &'static str, why: &'static str) -> CheckResult {
        CheckResult {
            number,
            name,
            title,
            verdict: Verdict::Pass,
            why,
            evidence: Vec::new(),
            measurements: Map::new(),
            duration_ms: 0,
        }
    }

    /// Records a finding and lowers the verdict to `verdict` if it is worse
    /// (SKIP never lowers a verdict; use [`skip`](CheckResult::skip)).
    pub fn note(&mut self, verdict: Verdict, finding: impl Into<String>) {
        // One finding, one line (a quoted stderr tail may hold newlines).
        let finding = finding.into().trim_end().replace('\n', " / ");
        let finding = match verdict {
            Verdict::Pass | Verdict::Skip => finding,
            Verdict::Warn => format!("WARN: {finding}"),
            Verdict::Fail => format!("FAIL: {finding}"),
        };
        self.evidence.push(finding);
        if verdict != Verdict::Skip && (self.verdict == Verdict::Skip || verdict > self.verdict) {
            self.verdict = verdict;
        }
    }

    /// Records a passing finding.
    pub fn info(&mut self, finding: impl Into<String>) {
        self.note(Verdict::Pass, finding);
    }

    /// Marks the check skipped, with the reason.
    pub fn skip(&mut self, reason: impl Into<String>) {
        self.verdict = Verdict::Skip;
        self.evidence.push(format!("skipped: {}", reason.into()));
    }

    /// Records a measurement.
    pub fn measure(&mut self, key: &str, value: impl Into<Value>) {
        self.measurements.insert(key.to_owned(), value.into());
    }
}

/// A process of the server's group found alive when the probe ended.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Leftover {
    /// Its process id.
    pub pid: u32,
    /// Its command name (`/proc/PID/comm`).
    pub comm: String,
}

/// Counts of each verdict and the exit status.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Summary {
    /// Checks that passed.
    pub pass: usize,
    /// Checks that warned.
    pub warn: usize,
    /// Checks that failed.
    pub fail: usize,
    /// Checks skipped.
    pub skip: usize,
    /// The probe's exit status: 0 (no FAIL) or 1 (a FAIL).
    pub exit_code: i32,
}

/// The whole report.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Always [`SCHEMA`].
    pub schema: &'static str,
    /// Always [`SCHEMA_VERSION`].
    pub version: u32,
    /// The probe's version.
    pub probe_version: &'static str,
    /// The server command, as run.
    pub server: Vec<String>,
    /// The server's name and version from `initialize`, if it answered.
    pub server_info: Option<Value>,
    /// When the probe started (seconds since the Unix epoch).
    pub started_at: u64,
    /// How long the probe ran, in milliseconds.
    pub duration_ms: u64,
    /// One result per check, in order (skipped ones included).
    pub checks: Vec<CheckResult>,
    /// Processes of any server's group still alive after the probe killed
    /// the group (should be empty).
    pub leftover_processes: Vec<Leftover>,
    /// The counts.
    pub summary: Summary,
}

impl Report {
    /// Fills in the summary from the checks.
    pub fn summarize(&mut self) {
        let count = |v| self.checks.iter().filter(|c| c.verdict == v).count();
        let (pass, warn, fail, skip) =
            (count(Verdict::Pass), count(Verdict::Warn), count(Verdict::Fail), count(Verdict::Skip));
        let exit_code = i32::from(fail > 0 || !self.leftover_processes.is_empty());
        self.summary = Summary { pass, warn, fail, skip, exit_code };
    }

    /// The report as JSON.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or_else(|e| Value::String(format!("report did not serialize: {e}")))
    }

    /// The report as text for a terminal.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "mcp-probe {} — server: {}", self.probe_version, self.server.join(" "));
        if let Some(info) = &self.server_info {
            let _ = writeln!(out, "server info: {info}");
        }
        for check in &self.checks {
            let _ = writeln!(out);
            let _ = writeln!(
                out,
                "{} {} {} ({}) — {:.1} s",
                check.number,
                check.verdict,
                check.title,
                check.name,
                check.duration_ms as f64 / 1000.0
            );
            let _ = writeln!(out, "    why: {}", check.why);
            for finding in &check.evidence {
                let _ = writeln!(out, "    - {finding}");
            }
        }
        let _ = writeln!(out);
        if self.leftover_processes.is_empty() {
            let _ = writeln!(out, "every server process group is gone");
        } else {
            let _ = writeln!(out, "FAIL: processes still alive after the probe: {:?}", self.leftover_processes);
        }
        let s = self.summary;
        let _ = writeln!(
            out,
            "summary: {} PASS, {} WARN, {} FAIL, {} SKIP in {:.1} s — exit {}",
            s.pass,
            s.warn,
            s.fail,
            s.skip,
            self.duration_ms as f64 / 1000.0,
            s.exit_code
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worst_finding_sets_the_verdict() {
        let mut check = CheckResult::new(1, "x", "X", "because");
        check.info("fine");
        assert_eq!(check.verdict, Verdict::Pass);
        check.note(Verdict::Fail, "broken");
        check.note(Verdict::Warn, "odd");
        assert_eq!(check.verdict, Verdict::Fail);
        assert_eq!(check.evidence, ["fine", "FAIL: broken", "WARN: odd"]);
        let mut skipped = CheckResult::new(2, "y", "Y", "because");
        skipped.skip("no tool");
        assert_eq!(skipped.verdict, Verdict::Skip);
    }
}
