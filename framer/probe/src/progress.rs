//! What the probe shows while it runs: an indicatif spinner when stderr is
//! a terminal, otherwise one plain status line per check on stderr.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use crate::check_id::CheckId;
use crate::report::CheckResult;

/// The progress display.
#[derive(Debug)]
pub(crate) struct Progress {
    bar: Option<ProgressBar>,
    plain: bool,
    total: usize,
}

impl Progress {
    /// A display for `total` checks: a spinner on a terminal, plain lines
    /// otherwise, nothing when `quiet`.
    pub(crate) fn new(total: usize, quiet: bool) -> Progress {
        if quiet {
            return Progress { bar: None, plain: false, total };
        }
        if std::io::stderr().is_terminal() {
            let bar = ProgressBar::new(total as u64);
            let style = ProgressStyle::with_template("{spinner} [{pos}/{len}] {prefix}: {wide_msg} {elapsed}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner());
            bar.set_style(style);
            bar.enable_steady_tick(Duration::from_millis(100));
            Progress { bar: Some(bar), plain: false, total }
        } else {
            Progress { bar: None, plain: true, total }
        }
    }

    /// A check starts.
    pub(crate) fn start(&self, index: usize, check: CheckId) {
        if let Some(bar) = &self.bar {
            bar.set_position(index as u64);
            bar.set_prefix(check.name());
            bar.set_message("starting");
        } else if self.plain {
            eprintln!("mcp-probe: [{}/{}] {} ...", index + 1, self.total, check.name());
        }
    }

    /// A step inside the running check (shown on a terminal only).
    pub(crate) fn step(&self, message: impl Into<String>) {
        if let Some(bar) = &self.bar {
            bar.set_message(message.into());
        }
    }

    /// A check ended.
    pub(crate) fn done(&self, result: &CheckResult) {
        let line = format!("{} {} ({:.1} s)", result.verdict, result.name, result.duration_ms as f64 / 1000.0);
        if let Some(bar) = &self.bar {
            bar.println(line);
        } else if self.plain {
            eprintln!("mcp-probe: {line}");
        }
    }

    /// The probe ended.
    pub(crate) fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
