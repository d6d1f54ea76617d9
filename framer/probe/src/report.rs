//! The report: one result per check, rendered as text or as JSON.
//!
//! The JSON form is the contract for tools: its schema is
//! `report.schema.json` in this crate (`"schema": "mcp-probe-report"`,
//! `"version": 5`). A new field may appear in a minor release; a field is
//! removed or changes meaning only with a new `version`. Version 2 added
//! `opening`, `fail_on`, `hints`, each check's `behaviours` and each
//! leftover's `cmdline`; `summary.exit_code` now follows `fail_on` (with
//! the default `fail`, its meaning is version 1's). Version 3 added
//! `transport` (`"stdio"` or `"stdio-v2"`) and the `stdio-v2` checks'
//! names. Version 4 added the stdio checks `exit-flush` (10) and `stderr`
//! (11). Version 5 added the `soak` check (with `--soak` only: 12 in a
//! `stdio` report, 9 in a `stdio-v2` one).

use std::fmt::{self, Write as _};

use serde::Serialize;
use serde_json::{Map, Value};

use crate::options::FailOn;
use crate::processes::{Leftover, SCANS_PROCESSES};

/// The name of the report's JSON schema.
pub const SCHEMA: &str = "mcp-probe-report";
/// The version of the report's JSON schema.
pub const SCHEMA_VERSION: u32 = 5;

/// How a check came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Verdict {
    /// The server meets the criterion.
    Pass,
    /// The server works, but not as the specification says (a wrong error
    /// code, silence on a line a conforming host never sends, an unknown
    /// protocol version), or the check could not tell.
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
    /// The check's number: its place in its transport's list.
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
    /// Names of the known behaviours seen (`silent-on-parse-error`, ...),
    /// which the hints table maps to an SDK and a remedy.
    pub behaviours: Vec<&'static str>,
    /// How long the check ran, in milliseconds.
    pub duration_ms: u64,
}

impl CheckResult {
    /// A result that starts as PASS with no evidence.
    pub(crate) fn new(number: u8, name: &'static str, title: &'static str, why: &'static str) -> CheckResult {
        CheckResult {
            number,
            name,
            title,
            verdict: Verdict::Pass,
            why,
            evidence: Vec::new(),
            measurements: Map::new(),
            behaviours: Vec::new(),
            duration_ms: 0,
        }
    }

    /// Records a finding and lowers the verdict to `verdict` if it is worse
    /// (SKIP never lowers a verdict; use [`skip`](CheckResult::skip)).
    pub(crate) fn note(&mut self, verdict: Verdict, finding: impl Into<String>) {
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
    pub(crate) fn info(&mut self, finding: impl Into<String>) {
        self.note(Verdict::Pass, finding);
    }

    /// Marks the check skipped, with the reason.
    pub(crate) fn skip(&mut self, reason: impl Into<String>) {
        self.verdict = Verdict::Skip;
        self.evidence.push(format!("skipped: {}", reason.into()));
    }

    /// Records a known behaviour (see the hints table).
    pub(crate) fn behaviour(&mut self, name: &'static str) {
        if !self.behaviours.contains(&name) {
            self.behaviours.push(name);
        }
    }

    /// Records a measurement.
    pub(crate) fn measure(&mut self, key: &str, value: impl Into<Value>) {
        self.measurements.insert(key.to_owned(), value.into());
    }
}

/// How the sessions were opened: the era the first handshake found.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Opening {
    /// `"modern"` (`server/discover`) or `"legacy"` (`initialize`).
    pub era: &'static str,
    /// The protocol version in use.
    pub protocol_version: String,
    /// The versions the server offered (`supportedVersions`, or the one
    /// `initialize` answered with).
    pub offered_versions: Vec<String>,
    /// Why the modern probe fell back to `initialize`, if it did.
    pub fallback: Option<String>,
}

/// A known SDK's behaviour behind a verdict, and what to change.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Hint {
    /// The check it explains.
    pub check: &'static str,
    /// The behaviour seen.
    pub behaviour: &'static str,
    /// The SDK (or SDKs) known to behave so; the one identified first.
    pub sdk: String,
    /// What to change.
    pub advice: &'static str,
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
    /// The probe's exit status: 0 or 1 (a FAIL, a process left behind, or —
    /// with `fail_on` `warn` — a WARN).
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
    /// The transport probed: `"stdio"` or `"stdio-v2"`.
    pub transport: &'static str,
    /// The server command, as run.
    pub server: Vec<String>,
    /// The server's name and version (from `initialize` or
    /// `server/discover`), if it answered.
    pub server_info: Option<Value>,
    /// The era and versions found, if a handshake succeeded.
    pub opening: Option<Opening>,
    /// `"fail"` or `"warn"`: what makes `exit_code` 1.
    pub fail_on: &'static str,
    /// When the probe started (seconds since the Unix epoch).
    pub started_at: u64,
    /// How long the probe ran, in milliseconds.
    pub duration_ms: u64,
    /// One result per check, in order (skipped ones included).
    pub checks: Vec<CheckResult>,
    /// Known SDK behaviours behind the verdicts.
    pub hints: Vec<Hint>,
    /// Processes of any server's tree still alive after the probe killed
    /// the tree (should be empty; Linux only, see the text report).
    pub leftover_processes: Vec<Leftover>,
    /// The counts.
    pub summary: Summary,
}

impl Report {
    /// Fills in the summary from the checks.
    pub(crate) fn summarize(&mut self, fail_on: FailOn) {
        let count = |v| self.checks.iter().filter(|c| c.verdict == v).count();
        let (pass, warn, fail, skip) =
            (count(Verdict::Pass), count(Verdict::Warn), count(Verdict::Fail), count(Verdict::Skip));
        let warned = fail_on == FailOn::Warn && warn > 0;
        let exit_code = i32::from(fail > 0 || warned || !self.leftover_processes.is_empty());
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
        if self.transport != "stdio" {
            let _ = writeln!(out, "transport: {}", self.transport);
        }
        if let Some(info) = &self.server_info {
            let _ = writeln!(out, "server info: {info}");
        }
        if let Some(o) = &self.opening {
            let _ = writeln!(
                out,
                "era: {} (protocol {}; offered {}){}",
                o.era,
                o.protocol_version,
                o.offered_versions.join(", "),
                o.fallback.as_ref().map_or(String::new(), |f| format!("; modern probe: {f}"))
            );
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
        for hint in &self.hints {
            let _ = writeln!(out, "hint ({}, {}): {}: {}", hint.check, hint.behaviour, hint.sdk, hint.advice);
        }
        if !SCANS_PROCESSES {
            let _ = writeln!(out, "processes left behind: not checked on this platform (the scan reads Linux's /proc)");
        } else if self.leftover_processes.is_empty() {
            let _ = writeln!(out, "every server process group is gone");
        } else {
            let list: Vec<String> = self.leftover_processes.iter().map(Leftover::to_string).collect();
            let _ = writeln!(out, "FAIL: processes still alive after the probe: {}", list.join(", "));
        }
        let s = self.summary;
        let _ = writeln!(
            out,
            "summary: {} PASS, {} WARN, {} FAIL, {} SKIP in {:.1} s — exit {} (--fail-on {})",
            s.pass,
            s.warn,
            s.fail,
            s.skip,
            self.duration_ms as f64 / 1000.0,
            s.exit_code,
            self.fail_on
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
