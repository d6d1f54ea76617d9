//! How evidence writes a duration.

use std::time::Duration;

/// Formats a duration for evidence: `850 ms`, `2.00 s`.
pub(crate) fn fmt_duration(d: Duration) -> String {
    if d < Duration::from_secs(1) { format!("{} ms", d.as_millis()) } else { format!("{:.2} s", d.as_secs_f64()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn under_a_second_in_milliseconds_else_in_seconds() {
        assert_eq!(fmt_duration(Duration::from_micros(850_900)), "850 ms");
        assert_eq!(fmt_duration(Duration::from_secs(2)), "2.00 s");
    }
}
