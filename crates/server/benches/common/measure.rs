//! What the benchmarks measure with and how they print it: a field of
//! `/proc/<pid>/status`, a percentile of sorted samples, and times and
//! sizes as the tables show them.

use std::time::Duration;

use anyhow::Context;

/// A field of `/proc/<pid>/status`: sizes (`VmRSS:`, `VmHWM:`, in kB
/// there) in bytes, counts (`Threads:`) as they are.
pub(crate) fn proc_status(pid: u32, field: &str) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("read /proc/{pid}/status"))?;
    let value = status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .with_context(|| format!("no {field} in /proc/{pid}/status"))?
        .trim();
    match value.strip_suffix("kB") {
        Some(kib) => {
            Ok(kib.trim().parse::<u64>().with_context(|| format!("parse {field}"))? * 1024)
        }
        None => value.parse().with_context(|| format!("parse {field}")),
    }
}

/// The sample at `percent` of a sorted, non-empty slice (nearest rank).
pub(crate) fn percentile(sorted: &[Duration], percent: usize) -> Duration {
    let rank = (sorted.len() * percent).div_ceil(100).max(1);
    sorted[rank - 1]
}

/// A time in milliseconds, to the microsecond.
pub(crate) fn millis(duration: Duration) -> String {
    format!("{:.3} ms", duration.as_secs_f64() * 1000.0)
}

/// A size in kilobytes.
pub(crate) fn kilobytes(bytes: u64) -> String {
    format!("{:.0} kB", bytes as f64 / 1e3)
}

/// A size in megabytes, to a tenth.
pub(crate) fn megabytes(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}
