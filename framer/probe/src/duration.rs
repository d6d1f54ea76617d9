//! How evidence writes a duration, and the one wording of a wait that ran
//! out: "… within 2.00 s".

use std::fmt;
use std::time::Duration;

/// Formats a duration for evidence: `850 ms`, `2.00 s`.
pub(crate) fn fmt_duration(d: Duration) -> String {
    if d < Duration::from_secs(1) { format!("{} ms", d.as_millis()) } else { format!("{:.2} s", d.as_secs_f64()) }
}

/// `within 850 ms`: how every piece of evidence bounds a wait.
pub(crate) fn within(d: Duration) -> Within {
    Within(d)
}

/// A wait's bound as evidence writes it (see [`within`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Within(Duration);

impl fmt::Display for Within {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "within {}", fmt_duration(self.0))
    }
}

/// `{what} was not answered within {d}`: a request whose answer never came.
pub(crate) fn not_answered(what: impl fmt::Display, d: Duration) -> String {
    format!("{what} was not answered {}", within(d))
}

/// `no answer within {d}`.
pub(crate) fn no_answer(d: Duration) -> String {
    format!("no answer {}", within(d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn under_a_second_in_milliseconds_else_in_seconds() {
        assert_eq!(fmt_duration(Duration::from_micros(850_900)), "850 ms");
        assert_eq!(fmt_duration(Duration::from_secs(2)), "2.00 s");
    }

    #[test]
    fn a_wait_that_ran_out_has_one_wording() {
        let d = Duration::from_millis(1500);
        assert_eq!(within(d).to_string(), "within 1.50 s");
        assert_eq!(not_answered("tools/list", d), "tools/list was not answered within 1.50 s");
        assert_eq!(no_answer(Duration::from_millis(20)), "no answer within 20 ms");
    }
}
