//! The disk budget of full outputs: a [`SpillStore`] is one directory of
//! full-output files with two byte limits ([`SpillLimits`], per command and
//! per server, each byte counted once) and a [`Retention`] for a directory
//! shared across restarts; a [`CommandSpill`] is one command's share.
//! [`Saved`] and [`SpillCut`] say where a stream is kept and where a limit
//! cut its file.
//!
//! Invariant: retention deletes only what a store created: in a directory
//! marked as a store's own ([`DIR_MARK`]), only regular files of ours, mode
//! 0600, one link, with a store's name; files are created with `private_fs`
//! (new, 0600, no symlinks).
//!
//! It does not write output into files (the command log does).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use crate::private_fs;

/// Where a full-output file was cut, and which limit cut it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpillCut {
    /// Bytes of the stream the file holds before the cut line.
    pub after_bytes: u64,
    /// The limit that was reached.
    pub limit: SpillLimit,
}

/// One of the two limits of [`SpillLimits`], with its value in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpillLimit {
    /// The full output of one command.
    PerCommand(u64),
    /// All full outputs of one server together.
    PerServer(u64),
}

impl SpillCut {
    /// The words that say where a full-output file was cut, as the output
    /// itself carries them: in the omission line a view shows and in the
    /// line that ends the cut file. They belong to the output's text (which
    /// the engine writes) rather than to a reply; a reply words the
    /// [`SpillCut`] of its fields itself.
    pub(super) fn in_output(&self) -> String {
        let (what, bytes) = match self.limit {
            SpillLimit::PerCommand(bytes) => ("the limit per command", bytes),
            SpillLimit::PerServer(bytes) => ("the server's total limit", bytes),
        };
        format!(
            "cut after {} bytes: {what} of {} for saved output was reached",
            self.after_bytes,
            human_bytes(bytes)
        )
    }
}

/// For logs only: a reply words a cut itself.
impl std::fmt::Display for SpillCut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (which, bytes) = match self.limit {
            SpillLimit::PerCommand(bytes) => ("per-command", bytes),
            SpillLimit::PerServer(bytes) => ("per-server", bytes),
        };
        write!(f, "cut after {} bytes at the {which} limit of {bytes} bytes", self.after_bytes)
    }
}

/// Limits on the bytes written to full-output files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpillLimits {
    /// Bytes one command may write, over all its streams (stdout and stderr
    /// of a `run` together).
    pub per_command: u64,
    /// Bytes one store (one server) may write in all.
    pub per_server: u64,
}

impl SpillLimits {
    /// 100 MiB per command.
    pub const DEFAULT_PER_COMMAND: u64 = 100 << 20;
    /// 1 GiB per server.
    pub const DEFAULT_PER_SERVER: u64 = 1 << 30;
}

impl Default for SpillLimits {
    fn default() -> SpillLimits {
        SpillLimits {
            per_command: SpillLimits::DEFAULT_PER_COMMAND,
            per_server: SpillLimits::DEFAULT_PER_SERVER,
        }
    }
}

/// How long files are kept in a spill directory shared across restarts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Files last written longer ago than this are deleted.
    pub max_age: Duration,
    /// Beyond this many bytes in all, the oldest files are deleted.
    pub max_total: u64,
}

impl Default for Retention {
    /// Seven days and 1 GiB.
    fn default() -> Retention {
        Retention { max_age: Duration::from_secs(7 * 24 * 3600), max_total: 1 << 30 }
    }
}

/// A directory of full-output files with its limits.
#[derive(Debug)]
pub struct SpillStore {
    dir: PathBuf,
    /// Put before every file name, to keep servers sharing the directory
    /// apart; may be empty.
    prefix: String,
    limits: SpillLimits,
    retention: Option<Retention>,
    /// Whether the directory is marked as a store's own, so that the
    /// retention may delete files in it (see [`DIR_MARK`]); decided (and the
    /// mark written, for an empty directory) by the first prune or new file,
    /// before that file is made, or by [`SpillStore::claim_dir`].
    owned: Mutex<Option<bool>>,
    /// Bytes written by this store so far.
    written: AtomicU64,
    /// Whether a background prune is under way ([`PRUNE_IDLE`] and so on).
    pruning: Arc<AtomicU8>,
}

impl SpillStore {
    /// A store writing into `dir` (made private on first use if missing),
    /// naming files `<prefix>-<name>`. With a `retention`, old files are
    /// deleted whenever a file is added (call [`SpillStore::prune`] at
    /// start-up too), but only in a directory marked as a store's own: one
    /// that is marked already, or that is new or empty when the store first
    /// prunes or adds a file (it is marked then). A `prefix` other than
    /// `shellkeep-<pid>-<hex>` ([`server_prefix`]) turns retention off, since pruning recognises files by
    /// it.
    pub fn new(
        dir: PathBuf,
        prefix: &str,
        limits: SpillLimits,
        retention: Option<Retention>,
    ) -> Arc<SpillStore> {
        let store = SpillStore {
            dir,
            prefix: prefix.to_owned(),
            limits,
            retention,
            owned: Mutex::new(None),
            written: AtomicU64::new(0),
            pruning: Arc::new(AtomicU8::new(PRUNE_IDLE)),
        };
        if store.retention.is_some() && !is_server_prefix(prefix) {
            tracing::warn!(
                "full outputs in {} are never deleted: the file prefix {prefix:?} is not \
                 shellkeep-<pid>-<hex>",
                store.dir.display()
            );
        }
        Arc::new(store)
    }

    /// Whether the retention may delete files of ours in the directory,
    /// deciding it the first time the directory exists: marked, or empty
    /// (then marked now). Anything else in it makes it not ours for good.
    fn owns_dir(&self) -> bool {
        if self.retention.is_none() || !is_server_prefix(&self.prefix) {
            return false;
        }
        let mut owned = self.owned.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(owned) = *owned {
            return owned;
        }
        if !self.dir.exists() {
            // Not decided yet: the first new file makes it, and then it is ours.
            return false;
        }
        let decided = mark_if_empty(&self.dir);
        *owned = Some(decided);
        decided
    }

    /// Marks the store's directory as its own even though it holds files
    /// already: for the default location, which is shellkeep's by its path
    /// (earlier versions left their files there unmarked). Retention then
    /// deletes files of ours by name, owner and mode, never anything else.
    pub fn claim_dir(&self) -> std::io::Result<()> {
        if !is_marked(&self.dir) {
            write_mark(&self.dir)?;
        }
        *self.owned.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(true);
        Ok(())
    }

    /// Whether the retention may delete files in the directory: it has one,
    /// and the directory is marked as a store's own.
    pub fn prunes(&self) -> bool {
        self.owns_dir()
    }

    /// The directory of the files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The limits in force.
    pub fn limits(&self) -> SpillLimits {
        self.limits
    }

    /// A budget for one command's full output: everything written through
    /// it counts against the per-command limit together.
    pub fn command(self: &Arc<SpillStore>) -> CommandSpill {
        CommandSpill { store: Arc::clone(self), written: Arc::new(AtomicU64::new(0)) }
    }

    /// Applies the retention now; returns the files deleted.
    pub fn prune(&self) -> Vec<PathBuf> {
        match self.retention {
            Some(retention) if self.prunes() => prune_dir(&self.dir, retention, SystemTime::now()),
            _ => Vec::new(),
        }
    }

    /// Applies the retention on a short-lived thread of its own, so a new
    /// file never waits for a directory scan. If a prune is already under
    /// way, it goes once more when done instead (it may have missed this
    /// file). Time: one scan of the directory per round.
    fn prune_in_background(&self) {
        let Some(retention) = self.retention.filter(|_| self.prunes()) else { return };
        let before = self.pruning.swap(PRUNE_RUNNING_AGAIN, Ordering::AcqRel);
        if before != PRUNE_IDLE {
            return;
        }
        let (dir, pruning) = (self.dir.clone(), Arc::clone(&self.pruning));
        let spawned = std::thread::Builder::new().name("shellkeep-prune".into()).spawn(move || {
            // Go round while files were added during the last scan.
            while pruning.swap(PRUNE_RUNNING, Ordering::AcqRel) == PRUNE_RUNNING_AGAIN {
                prune_dir(&dir, retention, SystemTime::now());
                if pruning
                    .compare_exchange(
                        PRUNE_RUNNING,
                        PRUNE_IDLE,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    )
                    .is_ok()
                {
                    break;
                }
            }
        });
        if spawned.is_err() {
            self.pruning.store(PRUNE_IDLE, Ordering::Release);
        }
    }

    fn path_for(&self, name: &str) -> PathBuf {
        if self.prefix.is_empty() {
            self.dir.join(name)
        } else {
            self.dir.join(format!("{}-{name}", self.prefix))
        }
    }

    /// Creates a new full-output file (never an existing one, never through a
    /// symlink), making the directory private first if it is missing.
    fn create(&self, path: &Path) -> std::io::Result<File> {
        // Whether the directory is ours is decided before our first file
        // is in it.
        self.owns_dir();
        let file = match private_fs::create_new_file(path) {
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                private_fs::ensure_private_dir(&self.dir)?;
                self.owns_dir();
                private_fs::create_new_file(path)
            }
            other => other,
        }?;
        self.prune_in_background();
        Ok(file)
    }
}

/// No prune is under way.
const PRUNE_IDLE: u8 = 0;
/// A prune is under way.
const PRUNE_RUNNING: u8 = 1;
/// A prune is under way, and a file was added since it began.
const PRUNE_RUNNING_AGAIN: u8 = 2;

/// One command's share of a [`SpillStore`]; cheap to clone.
#[derive(Debug, Clone)]
pub struct CommandSpill {
    store: Arc<SpillStore>,
    /// Bytes this command wrote so far, over all its logs.
    written: Arc<AtomicU64>,
}

impl CommandSpill {
    /// Creates the new private file `name` in the store (pruning the store
    /// as every new file does); returns its path and the open file.
    pub fn create_file(&self, name: &str) -> std::io::Result<(PathBuf, File)> {
        let path = self.store.path_for(name);
        let file = self.store.create(&path)?;
        Ok((path, file))
    }

    /// Reserves up to `n` bytes under both limits; returns how many were
    /// granted and, when fewer than `n`, the limit that stopped the rest.
    pub fn grant(&self, n: u64) -> (u64, Option<SpillLimit>) {
        let limits = self.store.limits;
        let for_command = take(&self.written, limits.per_command, n);
        let for_server = take(&self.store.written, limits.per_server, for_command);
        if for_server < for_command {
            self.written.fetch_sub(for_command - for_server, Ordering::AcqRel);
        }
        let stopped_by = if for_command < n {
            Some(SpillLimit::PerCommand(limits.per_command))
        } else if for_server < n {
            Some(SpillLimit::PerServer(limits.per_server))
        } else {
            None
        };
        (for_server, stopped_by)
    }
}

/// Adds up to `n` to `counter` without passing `limit`; returns what was
/// added.
fn take(counter: &AtomicU64, limit: u64, n: u64) -> u64 {
    let mut granted = 0;
    let _ = counter.fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
        granted = n.min(limit.saturating_sub(used));
        Some(used + granted)
    });
    granted
}

/// Where the complete stream of a view (`view::CappedOutput`) is kept, as its command
/// log says: named in what is shown once the view was cut.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Saved {
    /// The file holding the complete stream.
    pub path: Option<PathBuf>,
    /// Set when that file reached a size limit.
    pub cut: Option<SpillCut>,
    /// Set when the stream could not be saved: why.
    pub error: Option<String>,
}

/// The file that marks a directory as a spill store's own, so that its
/// retention may delete files of ours in it. It is never deleted by pruning.
pub(crate) const DIR_MARK: &str = ".shellkeep-output";

/// What the mark file says to a person who finds it.
const DIR_MARK_TEXT: &str = "This directory holds full outputs of shellkeep commands, or \
    recordings of its sessions.\n\
    shellkeep deletes its own files here (named shellkeep-<pid>-<hex>-<name>.log, .stdout,\n\
    .stderr or .cast, mode 0600) after their retention; it never deletes any other file.\n";

/// Whether `dir` carries the mark: a regular file of ours (not a symlink).
fn is_marked(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(dir.join(DIR_MARK))
        .is_ok_and(|meta| meta.is_file() && meta.uid() == private_fs::euid())
}

fn write_mark(dir: &Path) -> std::io::Result<()> {
    private_fs::write_new_file(&dir.join(DIR_MARK), DIR_MARK_TEXT.as_bytes())
}

/// Whether `dir` is marked as a store's own, marking it first if it holds
/// nothing at all. A directory holding anything else is not ours to prune,
/// and the log says so once.
fn mark_if_empty(dir: &Path) -> bool {
    if is_marked(dir) {
        return true;
    }
    let empty = std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_none());
    if empty {
        match write_mark(dir) {
            Ok(()) => return true,
            // Another server marked it meanwhile.
            Err(_) if is_marked(dir) => return true,
            Err(err) => tracing::warn!("cannot mark {} as shellkeep's: {err}", dir.display()),
        }
    } else {
        tracing::warn!(
            "{} holds files shellkeep did not create, so no full output or recording is ever \
             deleted there (retention is off); give --full-output-dir (or --record) a new or \
             empty directory to have old ones deleted",
            dir.display()
        );
    }
    false
}

/// The fixed tag every name a server gives a full-output file starts with,
/// so that retention never takes a person's file for one of ours (a date
/// such as `2025-06-deploy.log` reads as `<pid>-<hex>-<name>` too).
pub(crate) const FILE_TAG: &str = "shellkeep-";

/// How many hexadecimal digits the random part of a server prefix has.
const PREFIX_HEX: usize = 6;

/// A new server file prefix: `shellkeep-<pid>-<6 random hex digits>`.
pub fn server_prefix() -> std::io::Result<String> {
    let random = private_fs::random_hex(PREFIX_HEX / 2)?;
    Ok(format!("{FILE_TAG}{}-{random}", std::process::id()))
}

/// Whether `prefix` is a server's file prefix: `shellkeep-<pid>-<hex>`, the
/// hex part exactly [`PREFIX_HEX`] lower-case digits.
fn is_server_prefix(prefix: &str) -> bool {
    let Some(untagged) = prefix.strip_prefix(FILE_TAG) else { return false };
    match untagged.split_once('-') {
        Some((pid, random)) => {
            !pid.is_empty()
                && pid.bytes().all(|b| b.is_ascii_digit())
                && random.len() == PREFIX_HEX
                && random.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        }
        None => false,
    }
}

/// Whether `name` is one a store with a server prefix gives its files:
/// `shellkeep-<pid>-<hex>-<name>` ending in `.log`, `.stdout` or `.stderr`
/// (full outputs) or `.cast` (recordings).
fn is_spill_file_name(name: &str) -> bool {
    let Some(untagged) = name.strip_prefix(FILE_TAG) else { return false };
    let mut fields = untagged.splitn(3, '-');
    let (Some(pid), Some(random), Some(rest)) = (fields.next(), fields.next(), fields.next())
    else {
        return false;
    };
    is_server_prefix(&format!("{FILE_TAG}{pid}-{random}"))
        && !rest.is_empty()
        && !rest.contains('/')
        && [".log", ".stdout", ".stderr", ".cast"]
            .iter()
            .any(|ext| rest.len() > ext.len() && rest.ends_with(ext))
}

/// Deletes, in `dir`, files of ours last written before `now` minus the
/// maximum age, then the oldest until the rest fit in the total size. Only
/// files a store created count (see [`is_ours_to_prune`]); anything else
/// (other names, directories, symlinks, other users' files, files with
/// other modes or more links) is neither deleted nor counted.
fn prune_dir(dir: &Path, retention: Retention, now: SystemTime) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let Ok(meta) = entry.path().symlink_metadata() else { continue };
        if is_ours_to_prune(&entry.file_name().to_string_lossy(), &meta) {
            let modified = meta.modified().unwrap_or(now);
            files.push((entry.path(), meta.len(), modified));
        }
    }
    let doomed = files_to_prune(files, retention, now);
    doomed.into_iter().filter(|path| std::fs::remove_file(path).is_ok()).collect()
}

/// Whether the file `name` with metadata `meta` (not followed) is one a
/// store created: a store's name, a regular file of ours, mode 0600, one
/// link.
fn is_ours_to_prune(name: &str, meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    is_spill_file_name(name)
        && meta.file_type().is_file()
        && meta.uid() == private_fs::euid()
        && meta.mode() & 0o7777 == 0o600
        && meta.nlink() == 1
}

/// Which of `files` (path, size, last written) the retention deletes.
fn files_to_prune(
    mut files: Vec<(PathBuf, u64, SystemTime)>,
    retention: Retention,
    now: SystemTime,
) -> Vec<PathBuf> {
    // Oldest first.
    files.sort_by_key(|(_, _, modified)| *modified);
    let mut total: u64 = files.iter().map(|(_, size, _)| size).sum();
    let mut doomed = Vec::new();
    for (path, size, modified) in files {
        let age = now.duration_since(modified).unwrap_or_default();
        if age > retention.max_age || total > retention.max_total {
            total -= size;
            doomed.push(path);
        }
    }
    doomed
}

/// `bytes` in the largest binary unit that divides it (`100 MiB`): the
/// words of a byte limit in the output's own text (`SpillCut::in_output`)
/// and in a recording's cut line (`record.rs`).
pub(crate) fn human_bytes(bytes: u64) -> String {
    for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{} {unit}", bytes >> shift);
        }
    }
    format!("{bytes} bytes")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Creates the file `name` in `store` as a command log does and writes
    /// `size` bytes into it; returns its path.
    fn saved_file(store: &Arc<SpillStore>, name: &str, size: usize) -> PathBuf {
        let (path, mut file) = store.command().create_file(name).expect("create");
        std::io::Write::write_all(&mut file, &vec![b'y'; size]).expect("write");
        path
    }

    #[test]
    fn retention_deletes_old_files_then_the_oldest_beyond_the_total() {
        let now = SystemTime::now();
        let day = Duration::from_secs(24 * 3600);
        let file = |name: &str, size, age_days: u64| {
            (PathBuf::from(name), size, now - day * age_days as u32)
        };
        let retention = Retention { max_age: 7 * day, max_total: 100 };
        let files = vec![
            file("ancient", 1, 30),
            file("old", 50, 5),
            file("middle", 40, 3),
            file("new", 30, 1),
            file("newest", 20, 0),
        ];
        // Ancient goes for its age; then 140 > 100: old goes, 90 fits.
        assert_eq!(
            files_to_prune(files, retention, now),
            vec![PathBuf::from("ancient"), PathBuf::from("old")]
        );
        assert_eq!(files_to_prune(Vec::new(), retention, now), Vec::<PathBuf>::new());
    }

    /// A file `name` in `dir` holding `size` bytes, last written `age` ago.
    fn aged_file(dir: &Path, name: &str, size: usize, age: Duration) -> PathBuf {
        let path = dir.join(name);
        private_fs::write_new_file(&path, &vec![b'x'; size]).expect("write");
        std::fs::File::options()
            .write(true)
            .open(&path)
            .and_then(|file| file.set_modified(SystemTime::now() - age))
            .expect("mtime");
        path
    }

    const DAY: Duration = Duration::from_secs(24 * 3600);

    /// A retention that deletes everything it may: older than a minute, or
    /// beyond one byte.
    const RUTHLESS: Retention = Retention { max_age: Duration::from_secs(60), max_total: 1 };

    /// What a user keeps in a directory: an old document, a file named like
    /// ours, a symlink named like ours (to a file of theirs) and a
    /// subdirectory named like ours.
    fn users_files(dir: &Path) -> Vec<PathBuf> {
        let thesis = aged_file(dir, "thesis.tex", 5000, 10 * DAY);
        let lookalike = aged_file(dir, "shellkeep-4242-abcdef-notes-cmd1-0a0b.log", 5000, 10 * DAY);
        let target = aged_file(dir, "target.txt", 10, 10 * DAY);
        let link = dir.join("shellkeep-4242-abcdef-link.log");
        std::os::unix::fs::symlink(&target, &link).expect("symlink");
        let subdir = dir.join("shellkeep-4242-abcdef-dir.log");
        std::fs::create_dir(&subdir).expect("mkdir");
        vec![thesis, lookalike, target, link, subdir]
    }

    fn assert_all_exist(paths: &[PathBuf]) {
        for path in paths {
            assert!(path.symlink_metadata().is_ok(), "{} was deleted", path.display());
        }
    }

    fn wait_for_pruning(store: &SpillStore) {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while store.pruning.load(Ordering::Acquire) != PRUNE_IDLE {
            assert!(std::time::Instant::now() < deadline, "the prune did not end");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn scratch_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "shellkeep-output-test-{}-{name}-{}",
            std::process::id(),
            private_fs::random_hex(4).expect("random")
        ));
        private_fs::create_private_dir(&dir).expect("dir");
        dir
    }

    /// Issue 11, F9: a directory given by flag that already holds a user's
    /// files is used, and nothing in it is ever deleted: not at start-up,
    /// not when files are added, not by age and not by size; not even a
    /// file named like ours (the directory is not marked as ours).
    #[test]
    fn a_directory_holding_other_files_is_never_pruned() {
        let dir = scratch_dir("foreign");
        let users = users_files(&dir);
        let store = SpillStore::new(
            dir.clone(),
            "shellkeep-77-a1b2c3",
            SpillLimits::default(),
            Some(RUTHLESS),
        );
        assert!(!store.prunes());
        assert_eq!(store.prune(), Vec::<PathBuf>::new(), "at start-up");
        let mut saved = Vec::new();
        for name in ["first", "second", "third"] {
            saved.push(saved_file(&store, &format!("{name}.log"), 1000));
            wait_for_pruning(&store);
        }
        assert_all_exist(&users);
        assert_all_exist(&saved);
        assert!(!dir.join(DIR_MARK).exists(), "a directory of someone else's is not marked");
        assert_eq!(std::fs::read(&users[0]).expect("thesis").len(), 5000);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Issue 19, F11: in a directory of our own, a user's old files mode
    /// 0600 whose names read as `<pid>-<hex>-<name>` (a date) are never
    /// pruned: every name a server gives its files carries the tag.
    #[test]
    fn date_named_files_of_a_user_are_not_taken_for_ours() {
        let dir = scratch_dir("dates");
        let store = SpillStore::new(
            dir.clone(),
            &server_prefix().expect("prefix"),
            SpillLimits::default(),
            Some(RUTHLESS),
        );
        let ours = saved_file(&store, "default-1-ab-part0.log", 1000);
        wait_for_pruning(&store);
        assert!(store.prunes(), "the empty directory is marked with our first file");
        let name = ours.file_name().expect("name").to_string_lossy().into_owned();
        assert!(name.starts_with(FILE_TAG) && is_spill_file_name(&name), "{name}");
        let users: Vec<PathBuf> = [
            "2025-06-deploy.log",
            "2025-06-deploy.txt",
            "20250601-ab-nightly.stderr",
            "1-a-b.stdout",
            "12-abcdef-run-1.log",
        ]
        .iter()
        .map(|name| aged_file(&dir, name, 100, 10 * DAY))
        .collect();
        let old = aged_file(&dir, &format!("{FILE_TAG}12-00ff00-old.log"), 10, 10 * DAY);
        // Ours go (the old one by age; the new one by size, here or on the
        // pruning thread its file started), theirs stay.
        let pruned = store.prune();
        assert!(pruned.contains(&old) && !old.exists(), "{pruned:?}");
        assert!(pruned.iter().all(|path| [&old, &ours].contains(&path)), "{pruned:?}");
        assert_all_exist(&users);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// In a directory of our own, pruning deletes our old files (by age and
    /// by size) and still nothing a store did not create: a user's file, a
    /// file with our name but another mode or more links, a symlink or a
    /// subdirectory named like ours, the mark itself.
    #[test]
    fn our_own_directory_is_pruned_of_our_files_only() {
        use std::os::unix::fs::PermissionsExt;
        let parent = scratch_dir("own");
        let dir = parent.join("output");
        let store = SpillStore::new(
            dir.clone(),
            "shellkeep-77-a1b2c3",
            SpillLimits::default(),
            Some(RUTHLESS),
        );
        // The directory is made (and marked) with the first file.
        let first = saved_file(&store, "first.log", 1000);
        wait_for_pruning(&store);
        assert!(store.prunes() && dir.join(DIR_MARK).is_file());
        let mut users = users_files(&dir);
        let loose = aged_file(&dir, "shellkeep-4242-abcdef-open-cmd1-0a0b.log", 10, 10 * DAY);
        std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let linked = aged_file(&dir, "shellkeep-4242-abcdef-linked-cmd1-0a0b.log", 10, 10 * DAY);
        std::fs::hard_link(&linked, dir.join("linked-copy")).expect("link");
        users.extend([loose, linked, dir.join(DIR_MARK)]);
        // The lookalike of `users_files` is, to us, one of our own files.
        let ours_by_age = users.remove(1);
        let old = aged_file(&dir, "shellkeep-12-00ff00-default-3-ab-part0.log", 10, 10 * DAY);
        let run = aged_file(&dir, "shellkeep-12-00ff00-run-1.stdout", 10, 10 * DAY);
        let removed = store.prune();
        for path in [&old, &run, &ours_by_age] {
            assert!(removed.contains(path), "{} not in {removed:?}", path.display());
        }
        // Pruned when it was added, or now: 1000 bytes are beyond the total.
        assert!(!first.exists());
        assert_all_exist(&users);
        // By size: newer files of ours beyond the total go too.
        let sized = Retention { max_age: 30 * DAY, max_total: 100 };
        let store = SpillStore::new(
            dir.clone(),
            "shellkeep-78-a1b2c3",
            SpillLimits::default(),
            Some(sized),
        );
        assert!(store.prunes(), "the mark is found again");
        let older = aged_file(&dir, "shellkeep-12-00ff00-older.log", 80, Duration::from_secs(120));
        let newer = aged_file(&dir, "shellkeep-12-00ff00-newer.log", 80, Duration::from_secs(60));
        assert_eq!(store.prune(), vec![older]);
        assert!(newer.exists());
        assert_all_exist(&users);
        let _ = std::fs::remove_dir_all(&parent);
    }

    #[test]
    fn store_names_are_recognised() {
        for name in [
            "shellkeep-12-a1b2c3-default-4-77-part0.log",
            "shellkeep-12-a1b2c3-tests-cmd3-00aa.log",
            "shellkeep-12-a1b2c3-run-1.stdout",
            "shellkeep-12-a1b2c3-run-1.stderr",
            "shellkeep-12-a1b2c3-default-1.cast",
        ] {
            assert!(is_spill_file_name(name), "{name}");
        }
        for name in [
            "thesis.tex",
            "shellkeep-12-a1b2c3-.log",
            "shellkeep-12-a1b2c3-notes.txt",
            "shellkeep-12-a1b2c3-.cast",
            "talk.cast",
            "shellkeep-x-a1b2c3-run-1.log",
            "12-a1b2c3-run-1.log",
            "shellkeep-12-a1b2-run-1.log",
            "shellkeep-2025-06-deploy.log",
            "2025-06-deploy.log",
            "20250601-ab-nightly.stderr",
            "12-A1B2C3-run-1.log",
            "shellkeep-12-a1b2c3.log",
            ".shellkeep-output",
        ] {
            assert!(!is_spill_file_name(name), "{name}");
        }
        // The names a store gives its files match.
        let store = SpillStore::new(
            PathBuf::from("/x"),
            "shellkeep-123-0a0b0c",
            SpillLimits::default(),
            None,
        );
        let path = store.path_for("default-1-ab-part0.log");
        assert!(is_spill_file_name(&path.file_name().expect("name").to_string_lossy()));
    }

    #[test]
    fn the_default_location_is_claimed_with_its_old_files() {
        let dir = scratch_dir("claim");
        let old = aged_file(&dir, "shellkeep-12-00ff00-old.log", 10, 10 * DAY);
        let store = SpillStore::new(
            dir.clone(),
            "shellkeep-77-a1b2c3",
            SpillLimits::default(),
            Some(RUTHLESS),
        );
        assert!(!store.prunes());
        store.claim_dir().expect("claim");
        assert!(store.prunes());
        assert_eq!(store.prune(), vec![old]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn adding_a_file_prunes_the_directory() {
        let dir = std::env::temp_dir().join(format!(
            "shellkeep-output-test-{}-added-{}",
            std::process::id(),
            private_fs::random_hex(4).expect("random")
        ));
        let retention = Retention { max_age: Duration::from_secs(3600), max_total: 150 };
        let store = SpillStore::new(
            dir.clone(),
            "shellkeep-1-abc123",
            SpillLimits::default(),
            Some(retention),
        );
        let spill = |name: &str| saved_file(&store, name, 100);
        let first = spill("first.log");
        std::fs::File::options()
            .write(true)
            .open(&first)
            .and_then(|file| file.set_modified(SystemTime::now() - Duration::from_secs(60)))
            .expect("mtime");
        let second = spill("second.log");
        assert_eq!(second, dir.join("shellkeep-1-abc123-second.log"));
        // 200 bytes > 150: the older file goes, on the pruning thread,
        // which the new file started before `spill` returned.
        wait_for_pruning(&store);
        assert!(!first.exists(), "{} was not pruned", first.display());
        assert!(second.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn limits_read_as_people_write_them() {
        assert_eq!(human_bytes(100 << 20), "100 MiB");
        assert_eq!(human_bytes(1 << 30), "1 GiB");
        assert_eq!(human_bytes(1000), "1000 bytes");
    }
}
