//! The logs of one session's terminal commands (one log each) or of one
//! server's `run` commands (stdout and stderr, sharing the command's
//! budget), numbered from 1 and never reused, newest last, with retention:
//! at most [`StoreLimits::max_commands`] commands and
//! [`StoreLimits::max_bytes`] bytes; the oldest go first (their files
//! deleted), never the newest.
//!
//! Invariant: a command number always names the same command.
//!
//! It does not write or read the logs' text (the log does).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use super::log::{CommandLog, StoreError, Stream};
use super::spill::SpillStore;

/// Retention of one session's command outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreLimits {
    /// Commands whose output is kept, newest first.
    pub max_commands: usize,
    /// Bytes of output kept in all; the oldest commands go first.
    pub max_bytes: u64,
}

impl Default for StoreLimits {
    /// 100 commands and 256 MiB per session.
    fn default() -> StoreLimits {
        StoreLimits { max_commands: 100, max_bytes: 256 << 20 }
    }
}

/// The outputs of one session's commands, or of one server's `run`s.
pub struct OutputStore {
    spill: Arc<SpillStore>,
    /// Names the files, so sessions sharing a spill directory differ.
    label: String,
    limits: StoreLimits,
    logs: Mutex<VecDeque<Kept>>,
    /// The number of the last command begun (numbers start at 1 and are
    /// never reused, so a number always means the same command).
    last_number: std::sync::atomic::AtomicU64,
}

impl OutputStore {
    /// A store for the session (or the `run` commands) `label` writing its
    /// files into `spill`.
    pub fn new(spill: Arc<SpillStore>, label: &str, limits: StoreLimits) -> Arc<OutputStore> {
        Arc::new(OutputStore {
            spill,
            label: label.to_owned(),
            limits,
            logs: Mutex::new(VecDeque::new()),
            last_number: std::sync::atomic::AtomicU64::new(0),
        })
    }

    fn lock(&self) -> MutexGuard<'_, VecDeque<Kept>> {
        self.logs.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Starts the log of the next terminal command (one stream, files
    /// `<label>-cmd<N>-<tag>.log`), dropping the oldest beyond the
    /// retention limits.
    pub fn begin(&self, command: &str) -> Arc<CommandLog> {
        let (_, mut logs) =
            self.begin_logs(command, |number| vec![(format!("{}-cmd{number}", self.label), "log")]);
        logs.remove(0)
    }

    /// Starts the logs of the next `run` command: its stdout and stderr
    /// (files `<label>-<N>-<tag>.stdout` and `.stderr`), which share one
    /// budget under the per-command limit.
    pub fn begin_run(&self, command: &str) -> RunLogs {
        let (number, mut logs) = self.begin_logs(command, |number| {
            let stem = format!("{}-{number}", self.label);
            vec![(stem.clone(), "stdout"), (stem, "stderr")]
        });
        let stderr = logs.pop().expect("two logs");
        let stdout = logs.pop().expect("two logs");
        RunLogs { number, stdout, stderr }
    }

    /// Numbers the next command and makes its logs, one per `(file stem,
    /// extension)` that `names` gives for its number.
    fn begin_logs(
        &self,
        command: &str,
        names: impl FnOnce(u64) -> Vec<(String, &'static str)>,
    ) -> (u64, Vec<Arc<CommandLog>>) {
        let number = self.last_number.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let command: String = command.chars().take(200).collect();
        let budget = self.spill.command();
        let made: Vec<Arc<CommandLog>> = names(number)
            .into_iter()
            .map(|(stem, extension)| {
                Arc::new(CommandLog::new(number, command.clone(), budget.clone(), stem, extension))
            })
            .collect();
        let mut logs = self.lock();
        logs.push_back(Kept { number, logs: made.clone() });
        self.apply_retention(&mut logs);
        (number, made)
    }

    /// Drops the oldest commands while there are too many or they hold too
    /// much; the newest is always kept.
    fn apply_retention(&self, logs: &mut VecDeque<Kept>) {
        while logs.len() > self.limits.max_commands.max(1) {
            if let Some(old) = logs.pop_front() {
                old.discard();
            }
        }
        let mut total: u64 = logs.iter().map(Kept::bytes).sum();
        while total > self.limits.max_bytes && logs.len() > 1 {
            if let Some(old) = logs.pop_front() {
                total -= old.bytes();
                old.discard();
            }
        }
    }

    /// Applies the byte limit again (call when a command grew a lot).
    pub fn enforce(&self) {
        let mut logs = self.lock();
        self.apply_retention(&mut logs);
    }

    /// The log of command `number`, or the newest when `None` (its only
    /// stream, or its stdout).
    pub fn get(&self, number: Option<u64>) -> Result<Arc<CommandLog>, StoreError> {
        self.get_stream(number, Stream::Stdout)
    }

    /// The log of `stream` of command `number`, or of the newest command
    /// when `None`.
    pub fn get_stream(
        &self,
        number: Option<u64>,
        stream: Stream,
    ) -> Result<Arc<CommandLog>, StoreError> {
        let logs = self.lock();
        let (Some(first), Some(last)) = (logs.front(), logs.back()) else {
            return Err(StoreError::Empty);
        };
        let kept = match number {
            None => last,
            Some(asked) => logs
                .iter()
                .find(|kept| kept.number == asked)
                .ok_or(StoreError::NotKept { asked, first: first.number, last: last.number })?,
        };
        let index = match stream {
            Stream::Stdout => 0,
            Stream::Stderr => 1,
        };
        kept.logs.get(index).cloned().ok_or(StoreError::NoStream { number: kept.number, stream })
    }

    /// Bytes of output kept now.
    pub fn bytes(&self) -> u64 {
        self.lock().iter().map(Kept::bytes).sum()
    }

    /// Numbers of the commands kept, oldest first.
    pub fn numbers(&self) -> Vec<u64> {
        self.lock().iter().map(|kept| kept.number).collect()
    }

    /// Drops every log and deletes their files.
    pub fn clear(&self) {
        for kept in self.lock().drain(..) {
            kept.discard();
        }
    }
}

impl std::fmt::Debug for OutputStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputStore")
            .field("label", &self.label)
            .field("limits", &self.limits)
            .field("commands", &self.numbers())
            .finish()
    }
}

impl Drop for OutputStore {
    fn drop(&mut self) {
        // Files of a session that is gone stay for the retention of the
        // spill directory, like every full-output file: a path given to an
        // agent stays valid.
        for log in self.lock().iter().flat_map(|kept| &kept.logs) {
            log.flush();
        }
    }
}

/// One command in a store: its number and its logs (one per stream).
struct Kept {
    number: u64,
    logs: Vec<Arc<CommandLog>>,
}

impl Kept {
    fn bytes(&self) -> u64 {
        self.logs.iter().map(|log| log.bytes()).sum()
    }

    fn discard(&self) {
        for log in &self.logs {
            log.discard();
        }
    }
}

/// The two logs of one `run` command.
#[derive(Debug, Clone)]
pub struct RunLogs {
    /// The command's number in its store.
    pub number: u64,
    /// Its standard output.
    pub stdout: Arc<CommandLog>,
    /// Its standard error.
    pub stderr: Arc<CommandLog>,
}

#[cfg(test)]
pub(super) mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::output::SpillLimits;
    use crate::output::log::MEMORY_LIMIT;
    use crate::output::pass::tests::plain;

    /// A store of `limits` whose files go to `dir`.
    pub(in crate::output) fn store(dir: &std::path::Path, limits: StoreLimits) -> Arc<OutputStore> {
        let spill = SpillStore::new(dir.to_path_buf(), "", SpillLimits::default(), None);
        OutputStore::new(spill, "test", limits)
    }

    /// A fresh scratch directory for the test `name` (not created).
    pub(in crate::output) fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("shellkeep-store-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn retention_drops_the_oldest_commands_and_their_files() {
        let dir = scratch("retention");
        let store =
            store(&dir, StoreLimits { max_commands: 3, max_bytes: 3 * MEMORY_LIMIT as u64 });
        let mut paths = Vec::new();
        for _ in 1..=5 {
            let log = store.begin("big");
            log.push(&plain(&"y".repeat(MEMORY_LIMIT + 10)));
            log.finish(0);
            paths.push(log.path().expect("on disk"));
            store.enforce();
        }
        let kept = store.numbers();
        assert_eq!(kept.last(), Some(&5));
        assert!(kept.len() <= 3, "{kept:?}");
        assert!(!paths[0].exists(), "the oldest file is deleted");
        assert!(paths[4].exists());
        let err = store.get(Some(1)).expect_err("dropped");
        assert!(matches!(err, StoreError::NotKept { asked: 1, last: 5, .. }), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
