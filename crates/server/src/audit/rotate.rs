//! The audit log's file: appending one line with one `write`, and rotating
//! the file at its bound (`FILE` to `FILE.1`, … up to `FILE.N`).
//!
//! It builds no line and reads nothing back. It holds that the log is only
//! ever a private regular file of ours (created 0600 through `private_fs`,
//! never through a symlink), and that a write error never fails a call: it
//! is logged once, and once more when writing works again.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use shellkeep_engine::{ensure_private_dir, open_private_append};

/// The open log file and its bounds, and whether the last write failed (so
/// that a failure is logged once, not once per line).
pub(super) struct Writer {
    path: PathBuf,
    /// The size past which the file is rotated before a line is appended.
    max_bytes: u64,
    /// Rotated files kept.
    keep: u32,
    file: Option<File>,
    failing: bool,
}

impl Writer {
    /// The log at `path` opened (created private) now, so that a bad path
    /// is an error at once; it rotates past `max_bytes`, keeping `keep`
    /// old files.
    pub(super) fn open(path: &Path, max_bytes: u64, keep: u32) -> io::Result<Writer> {
        let file = open_log(path)?;
        Ok(Writer { path: path.to_owned(), max_bytes, keep, file: Some(file), failing: false })
    }

    /// Appends `bytes` (one whole line); a failure is logged once and the
    /// call that wrote it goes on.
    pub(super) fn write(&mut self, bytes: &[u8]) {
        match self.append(bytes) {
            Ok(()) if self.failing => {
                self.failing = false;
                tracing::warn!("the audit log {} is written again", self.path.display());
            }
            Ok(()) => {}
            Err(err) if !self.failing => {
                self.failing = true;
                tracing::error!(
                    "cannot write the audit log {}: {err}; calls go on, and their lines are \
                     lost until it can be written again",
                    self.path.display()
                );
            }
            Err(_) => {}
        }
    }

    /// One `write` of `bytes` at the end of the log: reopened if another
    /// server rotated it (or it was removed), rotated first if `bytes` would
    /// take it past `max_bytes`.
    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        // One look at the path and one at the open file (which also gives
        // its size) per line.
        let current = match (self.file.as_ref(), std::fs::symlink_metadata(&self.path)) {
            (Some(open), Ok(on_disk)) => Some(open.metadata()?)
                .filter(|open| (open.dev(), open.ino()) == (on_disk.dev(), on_disk.ino())),
            _ => None,
        };
        let size = match current {
            Some(open) => open.len(),
            None => {
                self.file = None;
                let file = open_log(&self.path)?;
                let size = file.metadata()?.len();
                self.file = Some(file);
                size
            }
        };
        if size > 0 && size + bytes.len() as u64 > self.max_bytes {
            self.file = None;
            rotate(&self.path, self.keep)?;
            self.file = Some(open_log(&self.path)?);
        }
        let Some(open) = self.file.as_mut() else { unreachable!("opened above") };
        open.write_all(bytes)
    }
}

/// Opens the log for appending through `private_fs`: created 0600, never
/// through a symlink, and only a regular file of ours.
fn open_log(path: &Path) -> io::Result<File> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty() && !p.exists()) {
        ensure_private_dir(&std::path::absolute(parent)?)?;
    }
    open_private_append(path)
}

/// Moves `path` to `path.1`, `path.1` to `path.2`, … up to `path.keep`
/// (dropping the oldest); with `keep` 0 the log is just removed.
fn rotate(path: &Path, keep: u32) -> io::Result<()> {
    let numbered = |n: u32| {
        let mut name = path.as_os_str().to_owned();
        name.push(format!(".{n}"));
        PathBuf::from(name)
    };
    if keep == 0 {
        return ignore_missing(std::fs::remove_file(path));
    }
    for n in (1..keep).rev() {
        ignore_missing(std::fs::rename(numbered(n), numbered(n + 1)))?;
    }
    ignore_missing(std::fs::rename(path, numbered(1)))
}

/// `result`, with a file that is not there counted as done.
fn ignore_missing(result: io::Result<()>) -> io::Result<()> {
    match result {
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}
