//! The one formatter of durations and the one formatter of byte counts
//! every reply uses, plus counts with separators and the rounded seconds
//! of structured content.
//!
//! Not for sentences: callers put the units in theirs. Each style of a
//! formatter is a variant, so two replies that state the same quantity
//! the same way share one code path.

use std::time::Duration;

/// A limit in bytes: in MiB or GiB when it is a whole number of them.
pub fn limit_bytes(value: u64) -> String {
    const MIB: u64 = 1 << 20;
    if value.is_multiple_of(1 << 30) {
        format!("{} GiB", value >> 30)
    } else if value.is_multiple_of(MIB) {
        format!("{} MiB", value / MIB)
    } else {
        format!("{:.1} MiB", value as f64 / MIB as f64)
    }
}

/// Seconds as OpenHands prints them: `30`, `2.5`.
pub fn plain_secs(duration: Duration) -> String {
    let secs = duration.as_secs_f64();
    if secs.fract() == 0.0 { format!("{secs:.0}") } else { format!("{secs:.1}") }
}

pub fn seconds(duration: Duration) -> String {
    let secs = duration.as_secs_f64();
    if secs >= 10.0 || secs.fract() == 0.0 {
        format!("{secs:.0} s")
    } else {
        format!("{secs:.1} s")
    }
}

/// Seconds with one decimal, as every duration in structured content is
/// given (or whole milliseconds).
pub fn round_secs(duration: Duration) -> f64 {
    (duration.as_secs_f64() * 10.0).round() / 10.0
}

/// A length of time for people, as a limit is stated: `50 s`, `1.5 s`,
/// `30 minutes`, `2 hours`, `1 day`, `365 days`.
pub fn span(duration: Duration) -> String {
    let secs = duration.as_secs_f64();
    let whole = duration.subsec_nanos() == 0;
    let secs_whole = duration.as_secs();
    let plural = |n: u64, unit: &str| format!("{n} {unit}{}", if n == 1 { "" } else { "s" });
    match secs_whole {
        _ if !whole || secs_whole < 120 => seconds(duration),
        n if n.is_multiple_of(86_400) => plural(n / 86_400, "day"),
        n if n.is_multiple_of(3_600) => plural(n / 3_600, "hour"),
        n if n.is_multiple_of(60) => plural(n / 60, "minute"),
        _ => format!("{secs:.0} s"),
    }
}

/// A size limit for people: `256 MiB`, `1 GiB`, `1.5 MiB`, `0 B`.
pub fn size(n: u64) -> String {
    match n {
        0 => "0 B".to_owned(),
        n if n.is_multiple_of(1 << 30) => format!("{} GiB", n >> 30),
        n if n.is_multiple_of(1 << 20) => format!("{} MiB", n >> 20),
        n => bytes(n),
    }
}

/// A count for people, with thousands separated: `30,000`.
pub fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// A byte count for people: `512 B`, `3.2 KiB`, `48.1 MiB`.
pub fn bytes(n: u64) -> String {
    match n {
        0..1024 => format!("{n} B"),
        1024..1_048_576 => format!("{:.1} KiB", n as f64 / 1024.0),
        _ => format!("{:.1} MiB", n as f64 / 1_048_576.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_stated_in_plain_units() {
        let secs = Duration::from_secs;
        let cases = [
            (span(secs(50)), "50 s"),
            (span(Duration::from_millis(1500)), "1.5 s"),
            (span(secs(119)), "119 s"),
            (span(secs(1800)), "30 minutes"),
            (span(secs(60 * 61)), "61 minutes"),
            (span(secs(7200)), "2 hours"),
            (span(secs(86_400)), "1 day"),
            (span(secs(365 * 86_400)), "365 days"),
            (span(secs(3601)), "3601 s"),
            (size(256 << 20), "256 MiB"),
            (size(1 << 30), "1 GiB"),
            (size(0), "0 B"),
            (size(1536 << 10), "1.5 MiB"),
            (count(30_000), "30,000"),
            (count(100), "100"),
            (count(1_234_567), "1,234,567"),
        ];
        for (got, expected) in cases {
            assert_eq!(got, expected);
        }
    }
}
