//! The timeout policy: command categories, their limits, and how a command
//! is matched to one. (Being written.)

use std::time::Duration;

/// The two limits a command runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The longest the command may run in all.
    pub exec: Duration,
    /// The longest the command may go without printing anything.
    pub no_output: Duration,
}
