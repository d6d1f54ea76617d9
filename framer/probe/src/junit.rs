//! The report as JUnit XML (`--junit FILE`), so that CI systems show the
//! checks as tests: one `<testcase>` per check, named `NUMBER NAME`, with
//! its time; a FAIL (and, with `--fail-on warn`, a WARN) is a `<failure>`
//! whose message is the first finding at that level and whose text is the
//! evidence; a SKIP is `<skipped>` with the reason; every check's evidence
//! is its `<system-out>`. Processes left after the run are one more test
//! case, `leftover-processes`, failing when any survived, so the failures
//! agree with the exit status. The shape is the one the Jenkins JUnit
//! schema (`junit-10.xsd`, the xunit plugin's; GitHub's and GitLab's
//! readers take it too) describes.

use std::fmt::Write as _;

use crate::options::FailOn;
use crate::report::{Report, Verdict};

/// `text` with `&`, `<`, `>`, `"` escaped and the characters XML 1.0
/// cannot hold (control characters other than tab, newline, return)
/// replaced with U+FFFD.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// Seconds, as JUnit writes them.
fn seconds(ms: u64) -> String {
    format!("{:.3}", ms as f64 / 1000.0)
}

impl Report {
    /// The report as a JUnit XML document (see the module docs).
    pub fn to_junit(&self) -> String {
        let failing = |verdict: Verdict| {
            verdict == Verdict::Fail || (verdict == Verdict::Warn && self.fail_on == FailOn::Warn.as_str())
        };
        let failures = self.checks.iter().filter(|c| failing(c.verdict)).count()
            + usize::from(!self.leftover_processes.is_empty());
        let tests = self.checks.len() + 1;
        let skipped = self.checks.iter().filter(|c| c.verdict == Verdict::Skip).count();
        let time = seconds(self.duration_ms);
        let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        let _ = writeln!(
            out,
            "<testsuites name=\"mcp-probe\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\" time=\"{time}\">"
        );
        let _ = writeln!(
            out,
            "  <testsuite name=\"mcp-probe {}: {}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\" \
             skipped=\"{skipped}\" time=\"{time}\">",
            self.transport,
            escape(&self.server.join(" "))
        );
        out.push_str("    <properties>\n");
        let era = self.opening.as_ref().map(|o| format!("{} ({})", o.era, o.protocol_version));
        let properties = [
            ("probe_version", Some(self.probe_version.to_owned())),
            ("transport", Some(self.transport.to_owned())),
            ("server", Some(self.server.join(" "))),
            ("era", era),
            ("fail_on", Some(self.fail_on.to_owned())),
            ("exit_code", Some(self.summary.exit_code.to_string())),
        ];
        for (name, value) in properties {
            if let Some(value) = value {
                let _ = writeln!(out, "      <property name=\"{name}\" value=\"{}\"/>", escape(&value));
            }
        }
        out.push_str("    </properties>\n");
        for check in &self.checks {
            let _ = writeln!(
                out,
                "    <testcase name=\"{} {}\" classname=\"mcp-probe.{}\" time=\"{}\">",
                check.number,
                check.name,
                self.transport,
                seconds(check.duration_ms)
            );
            let evidence = check.evidence.join("\n");
            if failing(check.verdict) {
                let prefix = format!("{}: ", check.verdict);
                let first = check.evidence.iter().find(|e| e.starts_with(&prefix)).unwrap_or(&evidence);
                let _ = writeln!(
                    out,
                    "      <failure type=\"{}\" message=\"{}\">{}</failure>",
                    check.verdict,
                    escape(first),
                    escape(&evidence)
                );
            } else if check.verdict == Verdict::Skip {
                let reason = check.evidence.first().map_or("", |e| e.trim_start_matches("skipped: "));
                let _ = writeln!(out, "      <skipped message=\"{}\"/>", escape(reason));
            }
            let _ = writeln!(
                out,
                "      <system-out>{} {}: {}\n{}</system-out>",
                check.verdict,
                escape(check.title),
                escape(check.why),
                escape(&evidence)
            );
            out.push_str("    </testcase>\n");
        }
        let _ = writeln!(
            out,
            "    <testcase name=\"leftover-processes\" classname=\"mcp-probe.{}\" time=\"0.000\">",
            self.transport
        );
        if !self.leftover_processes.is_empty() {
            let list: Vec<String> = self.leftover_processes.iter().map(ToString::to_string).collect();
            let _ = writeln!(
                out,
                "      <failure type=\"FAIL\" message=\"processes survived the probe\">{}</failure>",
                escape(&list.join("\n"))
            );
        }
        out.push_str("    </testcase>\n  </testsuite>\n</testsuites>\n");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_control_characters_are_escaped() {
        assert_eq!(escape("a<b>&\"c\"\u{1}\t"), "a&lt;b&gt;&amp;&quot;c&quot;\u{FFFD}\t");
        assert_eq!(seconds(1234), "1.234");
    }
}
