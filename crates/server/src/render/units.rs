//! The one formatter of durations and the one formatter of byte counts
//! every reply uses, plus counts with separators and the rounded seconds
//! of structured content.
//!
//! Not for sentences: callers put the units in theirs. Each style of a
//! formatter is a variant, so two replies that state the same quantity
//! the same way share one code path.

use std::time::Duration;

/// How a duration is stated: the styles of [`duration`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Secs {
    /// Seconds with no unit, as OpenHands prints a timeout: `30`, `2.5`.
    Bare,
    /// Seconds with their unit, whole from ten on: `30 s`, `2.5 s`, `13 s`.
    Unit,
    /// A limit for people: whole days, hours or minutes when it is a whole
    /// number of them and at least two minutes (`30 minutes`, `2 hours`,
    /// `1 day`), else as [`Secs::Unit`].
    Span,
}

/// The one duration formatter: `duration` stated in `style`.
pub(crate) fn duration(duration: Duration, style: Secs) -> String {
    let secs = duration.as_secs_f64();
    let plural = |n: u64, unit: &str| format!("{n} {unit}{}", if n == 1 { "" } else { "s" });
    match (style, duration.as_secs()) {
        (Secs::Bare, _) if secs.fract() == 0.0 => format!("{secs:.0}"),
        (Secs::Bare, _) => format!("{secs:.1}"),
        (Secs::Span, n) if duration.subsec_nanos() == 0 && n >= 120 => match n {
            n if n.is_multiple_of(86_400) => plural(n / 86_400, "day"),
            n if n.is_multiple_of(3_600) => plural(n / 3_600, "hour"),
            n if n.is_multiple_of(60) => plural(n / 60, "minute"),
            _ => format!("{secs:.0} s"),
        },
        _ if secs >= 10.0 || secs.fract() == 0.0 => format!("{secs:.0} s"),
        _ => format!("{secs:.1} s"),
    }
}

/// Seconds as OpenHands prints them: [`Secs::Bare`].
pub(crate) fn plain_secs(value: Duration) -> String {
    duration(value, Secs::Bare)
}

/// Seconds with their unit: [`Secs::Unit`].
pub(crate) fn seconds(value: Duration) -> String {
    duration(value, Secs::Unit)
}

/// A length of time as a limit is stated: [`Secs::Span`].
pub(crate) fn span(value: Duration) -> String {
    duration(value, Secs::Span)
}

/// Seconds with one decimal, as every duration in structured content is
/// given (a number, not words).
pub(crate) fn round_secs(duration: Duration) -> f64 {
    (duration.as_secs_f64() * 10.0).round() / 10.0
}

/// How a byte count is stated: the styles of [`byte_count`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bytes {
    /// An amount: `512 B`, `3.2 KiB`, `48.1 MiB`.
    Amount,
    /// A size limit: whole GiB or MiB when it is a whole number of them,
    /// `0 B`, else as [`Bytes::Amount`].
    Limit,
    /// A memory limit: whole GiB or MiB, else MiB with one decimal.
    Memory,
}

/// The one byte formatter: `n` bytes stated in `style`.
pub(crate) fn byte_count(n: u64, style: Bytes) -> String {
    const KIB: u64 = 1 << 10;
    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    let mib = || format!("{:.1} MiB", n as f64 / MIB as f64);
    match (style, n) {
        (Bytes::Limit, 0) => "0 B".to_owned(),
        (Bytes::Limit | Bytes::Memory, n) if n.is_multiple_of(GIB) => format!("{} GiB", n / GIB),
        (Bytes::Limit | Bytes::Memory, n) if n.is_multiple_of(MIB) => format!("{} MiB", n / MIB),
        (Bytes::Memory, _) => mib(),
        (_, 0..KIB) => format!("{n} B"),
        (_, KIB..MIB) => format!("{:.1} KiB", n as f64 / KIB as f64),
        _ => mib(),
    }
}

/// A memory limit: [`Bytes::Memory`].
pub(crate) fn limit_bytes(n: u64) -> String {
    byte_count(n, Bytes::Memory)
}

/// A size limit: [`Bytes::Limit`].
pub(crate) fn size(n: u64) -> String {
    byte_count(n, Bytes::Limit)
}

/// An amount of bytes: [`Bytes::Amount`].
pub(crate) fn bytes(n: u64) -> String {
    byte_count(n, Bytes::Amount)
}

/// A count for people, with thousands separated: `30,000`.
pub(crate) fn count(n: u64) -> String {
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
            (plain_secs(secs(30)), "30"),
            (plain_secs(Duration::from_millis(12_500)), "12.5"),
            (seconds(Duration::from_millis(2_500)), "2.5 s"),
            (seconds(Duration::from_millis(12_500)), "12 s"),
            (seconds(secs(1800)), "1800 s"),
            (bytes(512), "512 B"),
            (bytes(3277), "3.2 KiB"),
            (bytes(48 << 20), "48.0 MiB"),
            (limit_bytes(512 << 20), "512 MiB"),
            (limit_bytes(2 << 30), "2 GiB"),
            (limit_bytes(3 << 19), "1.5 MiB"),
            (limit_bytes(1 << 19), "0.5 MiB"),
            (size(1 << 19), "512.0 KiB"),
        ];
        for (got, expected) in cases {
            assert_eq!(got, expected);
        }
    }
}
