//! The one place output text passes, capped output (the head and tail an
//! agent is shown of a stream), and the disk budget of the one stored copy
//! of every output.
//!
//! `pass` is the one place every piece of output text passes, after
//! rendering (for `run`, after UTF-8 decoding) and before anything keeps,
//! shows, reports or announces it: a terminal command's text, a `run`
//! stream's, the unfinished line and full screen a reply shows, a progress
//! line, what background jobs print between commands, and the last line a
//! shell printed when it never reached its first prompt. It returns a
//! [`Passed`], the only type a view ([`CappedOutput`]) or a log
//! (`store::CommandLog`) takes in, and only `pass` makes one, so no text
//! reaches either without passing it. It is where secrets are masked
//! (`mask.rs`): with the session's or the run's [`Secrets`] and the
//! stream's state ([`Masking`]), so a secret split between pieces is
//! masked as if it came whole; text shown but not kept (an unfinished
//! line, a progress line) passes on a copy of that state.
//!
//! A [`CappedOutput`] is a view of a stream of (already rendered) text:
//! while the stream is within its cap it is shown whole; past it, memory
//! keeps only the first and last halves of the cap, and what is shown says
//! how many lines and characters were left out and where the complete
//! stream is. The cut falls on line boundaries: the head ends after a
//! line, the tail starts with one; only a line longer than half the cap is
//! cut inside, and the omission line says so. A cut never splits a masked
//! secret (`<secret-hidden>`). It writes no
//! file: the complete stream is the command's log (`store::CommandLog`),
//! and both are fed only by `store::OutputSink`. Memory stays bounded
//! however much a command prints (about twice the cap).
//!
//! Disk is bounded too. A [`SpillStore`] is one directory of full-output
//! files (the command logs) with two limits ([`SpillLimits`]): bytes per
//! command (all its streams together, each byte counted once) and bytes per
//! store (one server). A [`CommandSpill`] is one command's share; a file
//! that reaches a limit ends with a line saying where and why it was cut,
//! and [`Shown::full_output_cut`] says so. A store in a directory shared
//! across restarts has a [`Retention`]: files older than its age, then the
//! oldest beyond its total size, are deleted at start-up and whenever a new
//! file is added. Files are created with `private_fs` (new, 0600, no
//! symlinks).
//!
//! Retention deletes only what a store created: in a directory that is
//! marked as a store's own (the mark file [`DIR_MARK`], written when the
//! directory is new or empty, or by [`SpillStore::claim_dir`] for the
//! default location), only regular files of ours, mode 0600, with one link
//! and a store's name (`shellkeep-<pid>-<hex>-<name>.log|.stdout|.stderr`,
//! or `.cast` for a recording, `record.rs`). A
//! directory holding anything else is used without deleting anything.
//!
//! This module does not render terminal escapes: callers do that before.

use std::borrow::Cow;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use crate::mask::{MASK, Secrets, StreamMasker};
use crate::private_fs;

/// Output text that passed `pass`. Its fields are private and only `pass`
/// makes one, so every view and log write, which take only this, is text
/// that passed the one place.
#[derive(Debug)]
pub struct Passed<'a> {
    text: Cow<'a, str>,
    /// Secrets masked in it.
    masked: u64,
}

impl Passed<'_> {
    /// The text.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The text, owned.
    pub fn into_string(self) -> String {
        self.text.into_owned()
    }

    /// How many secrets were masked in it.
    pub fn masked(&self) -> u64 {
        self.masked
    }
}

/// How one stream of output is masked: the secrets, and the stream's
/// state (the undecided tail held back, what the last piece left open).
#[derive(Debug, Clone)]
pub struct Masking {
    secrets: Arc<Secrets>,
    stream: StreamMasker,
}

impl Masking {
    /// A stream masked with `secrets`, nothing held yet.
    pub fn new(secrets: Arc<Secrets>) -> Masking {
        Masking { secrets, stream: StreamMasker::new() }
    }

    /// The secrets.
    pub fn secrets(&self) -> &Arc<Secrets> {
        &self.secrets
    }
}

/// The one place every piece of output text passes, once, in order, before
/// anything keeps, shows, reports or announces it (see the module's
/// comment): it masks the secrets of `masking` in `text`, the next piece of
/// its stream, and returns what can be released; the undecided tail (the
/// beginning of what may be a secret) is held until the next piece, or
/// `end` (the stream ends here) releases it.
///
/// In the crate's own tests it marks `tests::PASS_WITNESS` wherever the
/// word appears, in a way that shows a second pass, so that a test can
/// prove every path of output takes this one, once.
pub(crate) fn pass<'a>(masking: &mut Masking, text: &'a str, end: bool) -> Passed<'a> {
    let (text, masked) = masking.stream.push(&masking.secrets, text, end);
    #[cfg(test)]
    if text.contains(tests::PASS_WITNESS) {
        return Passed { text: Cow::Owned(tests::mark_witness(&text)), masked };
    }
    Passed { text, masked }
}

/// Text shown but not kept (the line a command has not finished, a
/// progress line), as `pass` passes it after what `masking` holds: the
/// held text and `text`, masked as far as they can be decided now, leaving
/// the stream as it is. What this can show of a secret is the part that
/// was held while the rest of it was not printed yet, at most the first
/// [`crate::mask::PREVIEW_CHARS`] characters of a registered value
/// ([`StreamMasker::preview`]).
pub(crate) fn pass_shown(masking: &Masking, text: &str) -> Passed<'static> {
    let (text, masked) = masking.stream.preview(&masking.secrets, text);
    #[cfg(test)]
    if text.contains(tests::PASS_WITNESS) {
        return Passed { text: Cow::Owned(tests::mark_witness(&text)), masked };
    }
    Passed { text: Cow::Owned(text), masked }
}

/// What an agent is shown of a stream, and where the rest is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Shown {
    /// The text to show: the whole stream, or head, notice and tail.
    pub text: String,
    /// Whether anything was left out of `text`.
    pub truncated: bool,
    /// Characters left out of `text`.
    pub omitted_chars: u64,
    /// Lines (newline characters) left out of `text`.
    pub omitted_lines: u64,
    /// The file that holds the complete stream (the command's log), when
    /// what is shown left something out.
    pub full_output_path: Option<PathBuf>,
    /// Set when that file reached a size limit and the rest of the stream
    /// was not saved; the file ends with a line saying so.
    pub full_output_cut: Option<SpillCut>,
    /// Set when the full output could not be saved (the disk is full, the
    /// directory cannot be written): why. `full_output_path` is then unset.
    pub full_output_error: Option<String>,
    /// When `truncated`: the newline characters in the stream before the
    /// first character left out, so a reader can find that place by line.
    pub lines_before_omission: u64,
    /// When `truncated`: the byte range in `text` of the line that says what
    /// was left out (`[... N characters (M lines) omitted ...]`), so a reply
    /// can set it apart from the command's own text around it.
    pub omission: Option<std::ops::Range<usize>>,
    /// Secrets masked in `text` (each became `mask::MASK`).
    pub masked: u64,
}

impl Shown {
    /// Nothing to show.
    pub fn empty() -> Shown {
        Shown::default()
    }
}

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

impl std::fmt::Display for SpillCut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (what, bytes) = match self.limit {
            SpillLimit::PerCommand(bytes) => ("the limit per command", bytes),
            SpillLimit::PerServer(bytes) => ("the server's total limit", bytes),
        };
        write!(
            f,
            "cut after {} bytes: {what} of {} for saved output was reached",
            self.after_bytes,
            human_bytes(bytes)
        )
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

/// Where the complete stream of a [`CappedOutput`] is kept, as its command
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

/// A stream of text as a reply shows it: its head and tail, in memory
/// only. The complete stream is kept by the command's log
/// (`store::CommandLog`); [`CappedOutput::into_shown`] names it when the view
/// had to leave text out.
#[derive(Debug)]
pub struct CappedOutput {
    /// Characters kept at the start, and at the end, of the stream.
    half_cap: usize,
    /// Text at the start of the stream that an earlier reply already showed
    /// (see [`CappedOutput::push_seen`]): counted, never shown again.
    seen_chars: usize,
    seen_lines: usize,
    /// The first `half_cap` characters (the whole stream while it fits).
    head: String,
    head_chars: usize,
    /// Set once text went past the head: later text never goes into it,
    /// even when the head stopped short (before a masked secret).
    head_closed: bool,
    /// Text after the head; trimmed from the front once it is much longer
    /// than `half_cap` characters, to keep memory bounded.
    tail: String,
    tail_chars: usize,
    /// Whether the tail starts inside a line (text before it was dropped,
    /// and no line boundary was within reach).
    tail_in_line: bool,
    total_chars: u64,
    total_lines: u64,
    /// Secrets masked in the text pushed.
    masked: u64,
}

impl CappedOutput {
    /// A view that shows at most `cap` characters of what is new.
    pub fn new(cap: usize) -> CappedOutput {
        CappedOutput {
            half_cap: cap.max(2) / 2,
            seen_chars: 0,
            seen_lines: 0,
            head: String::new(),
            head_chars: 0,
            head_closed: false,
            tail: String::new(),
            tail_chars: 0,
            tail_in_line: false,
            total_chars: 0,
            total_lines: 0,
            masked: 0,
        }
    }

    /// Appends `text` to the stream.
    pub fn push(&mut self, text: &Passed<'_>) {
        self.masked += text.masked;
        self.push_text(text.as_str());
    }

    fn push_text(&mut self, mut text: &str) {
        if text.is_empty() {
            return;
        }
        let n_chars = count_chars(text);
        self.total_chars += n_chars as u64;
        self.total_lines += memchr_count(b'\n', text.as_bytes()) as u64;
        if !self.head_closed && self.head_chars < self.half_cap {
            let room = self.half_cap - self.head_chars;
            let mut split = byte_index_of_char(text, room);
            if split < text.len() {
                // A masked secret is pushed whole: it goes all to the tail
                // if it does not fit the head.
                split = outside_mask(text, split, Side::Before);
                self.head_closed = true;
            }
            let (into_head, rest) = text.split_at(split);
            self.head.push_str(into_head);
            self.head_chars += count_chars(into_head);
            text = rest;
        }
        if !text.is_empty() {
            self.tail.push_str(text);
            self.tail_chars += count_chars(text);
            if self.tail_chars > 4 * self.half_cap.max(1024) {
                self.trim_tail(self.half_cap);
            }
        }
    }

    /// Appends text an earlier reply already showed (the start of a line
    /// that was unfinished then): it is counted, but not shown again. Only
    /// at the start of the stream, before any [`CappedOutput::push`]; later
    /// it is pushed as usual.
    fn push_seen(&mut self, text: &str) {
        if self.head_chars > 0 || self.tail_chars > 0 {
            self.push_text(text);
            return;
        }
        let (chars, lines) = (count_chars(text), memchr_count(b'\n', text.as_bytes()));
        self.total_chars += chars as u64;
        self.total_lines += lines as u64;
        self.seen_chars += chars;
        self.seen_lines += lines;
    }

    /// Appends committed `text` that may begin with the line a reply showed
    /// unfinished (`shown`): that part is counted but not shown again; the
    /// rest is pushed as usual. Committed text that is only the beginning
    /// of that line (the first rows of a wrapped line, which scroll off the
    /// screen before the line ends) is counted as seen too, and `shown`
    /// keeps the rest of it for the next piece; otherwise `shown` is done
    /// with. Returns whether that line was cut when it was shown, so the
    /// reply where it ends must name the saved copy.
    pub fn push_continuing(&mut self, shown: &mut Option<ShownLine>, text: &Passed<'_>) -> bool {
        self.masked += text.masked;
        let text = text.as_str();
        let Some(line) = shown.take() else {
            self.push_text(text);
            return false;
        };
        if let Some(end) = line.prefix_in(text) {
            self.push_seen(&text[..end]);
            self.push_text(&text[end..]);
            return line.cut;
        }
        match line.after_beginning(text) {
            Some(rest) => {
                self.push_seen(text);
                *shown = rest;
                line.cut
            }
            None => {
                self.push_text(text);
                false
            }
        }
    }

    /// Whether the new text outgrew the cap, so what is shown leaves some
    /// of it out.
    pub fn is_cut(&self) -> bool {
        self.total_chars - self.seen_chars as u64 > (2 * self.half_cap) as u64
    }

    /// Ends the view and returns what to show. `saved`, when given, is
    /// where the complete stream is kept: named in the omission line of a
    /// cut view, and in the fields of [`Shown`] either way.
    pub fn into_shown(mut self, saved: Option<Saved>) -> Shown {
        let cut = self.is_cut();
        if cut {
            self.trim_tail(self.half_cap);
        }
        let saved = saved.unwrap_or_default();
        let mut text = self.head;
        // The head ends after its last whole line; without one, its only
        // line is longer than half the cap and is cut inside.
        let mut head_in_line = false;
        if cut {
            match text.rfind('\n') {
                Some(end) => text.truncate(end + 1),
                None => head_in_line = !text.is_empty(),
            }
        }
        if !cut {
            // Within the cap: everything not seen before is in memory, and
            // nothing was left out.
            text.push_str(&self.tail);
            return Shown {
                text,
                full_output_path: saved.path,
                full_output_cut: saved.cut,
                full_output_error: saved.error,
                masked: self.masked,
                ..Shown::default()
            };
        }
        let new_chars = self.total_chars - self.seen_chars as u64;
        let shown_chars = count_chars(&text) + self.tail_chars;
        let omitted_chars = new_chars.saturating_sub(shown_chars as u64);
        let head_lines = memchr_count(b'\n', text.as_bytes());
        let shown_lines =
            (head_lines + memchr_count(b'\n', self.tail.as_bytes()) + self.seen_lines) as u64;
        let omitted_lines = self.total_lines.saturating_sub(shown_lines);
        let lines_before_omission = (self.seen_lines + head_lines) as u64;
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        let omission_start = text.len();
        let inside = head_in_line || self.tail_in_line;
        text.push_str(&omission_line(omitted_chars, omitted_lines, inside, &saved));
        let omission = Some(omission_start..text.len());
        text.push_str(&self.tail);
        Shown {
            text,
            truncated: true,
            omitted_chars,
            omitted_lines,
            full_output_path: saved.path,
            full_output_cut: saved.cut,
            full_output_error: saved.error,
            lines_before_omission,
            omission,
            masked: self.masked,
        }
    }

    /// The last non-blank line pushed so far (for progress messages).
    pub fn last_line(&self) -> &str {
        let text = if self.tail.trim().is_empty() { &self.head } else { &self.tail };
        text.lines().rev().find(|line| !line.trim().is_empty()).unwrap_or("")
    }

    /// Drops characters from the front of the tail until at most `keep`
    /// remain, and on to the start of the next line when one starts in what
    /// is left; else (one line longer than `keep`) it starts inside that
    /// line, never inside a masked secret.
    fn trim_tail(&mut self, keep: usize) {
        if self.tail_chars <= keep {
            return;
        }
        let mut split = byte_index_of_char(&self.tail, self.tail_chars - keep);
        if self.tail.as_bytes()[split - 1] == b'\n' {
            self.tail_in_line = false;
        } else {
            // A line that starts in what is left, other than after its
            // last character.
            let rest = &self.tail.as_bytes()[split..];
            match rest[..rest.len().saturating_sub(1)].iter().position(|&b| b == b'\n') {
                Some(newline) => {
                    split += newline + 1;
                    self.tail_in_line = false;
                }
                None => {
                    split = outside_mask(&self.tail, split, Side::After);
                    self.tail_in_line = true;
                }
            }
        }
        self.tail_chars -= count_chars(&self.tail[..split]);
        self.tail.drain(..split);
    }
}

/// Which way [`outside_mask`] moves a cut.
#[derive(Clone, Copy)]
enum Side {
    /// To the start of the masked secret: the cut ends what is shown.
    Before,
    /// To its end: the cut starts what is shown.
    After,
}

/// The byte index `at` of `text`, moved out of a masked secret
/// (`<secret-hidden>`) it falls inside, so a cut never shows part of one.
fn outside_mask(text: &str, at: usize, side: Side) -> usize {
    // The mask is ASCII: its bytes can be compared wherever they are.
    let bytes = text.as_bytes();
    let first = at.saturating_sub(MASK.len() - 1);
    let inside = (first..at).find(|&start| bytes[start..].starts_with(MASK.as_bytes()));
    match (inside, side) {
        (Some(start), Side::Before) => start,
        (Some(start), Side::After) => start + MASK.len(),
        (None, _) => at,
    }
}

/// The line that says what a cut left out of a stream, and where the
/// complete stream is: `[... N characters (M lines) omitted; full output in
/// PATH ...]`, with its newline. `inside`: a line too long to show whole
/// was cut inside.
fn omission_line(omitted_chars: u64, omitted_lines: u64, inside: bool, saved: &Saved) -> String {
    let where_kept = match (&saved.error, &saved.path, saved.cut) {
        (None, Some(path), None) => format!("; full output in {}", path.display()),
        (None, Some(path), Some(cut)) => {
            format!("; full output in {} ({cut})", path.display())
        }
        (Some(err), _, _) => format!("; the full output could not be saved: {err}"),
        _ => String::new(),
    };
    let inside = if inside { ", cutting inside a line too long to show whole" } else { "" };
    format!(
        "[... {omitted_chars} characters ({omitted_lines} lines) omitted{inside}{where_kept} ...]\n"
    )
}

/// The characters `c` takes inside a JSON string, as serde_json writes it:
/// a quote, a backslash and the common control characters take two
/// (`\"`, `\n`), the other control characters six (`\u001b`).
fn json_weight(c: char) -> usize {
    match c {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
        c if (c as u32) < 0x20 => 6,
        _ => 1,
    }
}

/// The characters `text` takes inside a JSON string (a quote, a backslash
/// and a newline take two, other control characters six): what a client
/// that hands its model the structured content counts, and never less than
/// the text's own length.
pub fn json_chars(text: &str) -> usize {
    text.chars().map(json_weight).sum()
}

/// `budget` shared among pieces of `sizes`, fairly: a piece that needs
/// less than an equal share gets what it needs, and what it leaves is
/// shared among the others. The shares add up to at most `budget`, and a
/// piece never gets more than its size.
pub fn share(budget: usize, sizes: &[usize]) -> Vec<usize> {
    let mut shares = vec![0; sizes.len()];
    let mut order: Vec<usize> = (0..sizes.len()).collect();
    order.sort_by_key(|&i| sizes[i]);
    let mut left = budget;
    for (done, &i) in order.iter().enumerate() {
        let equal = left / (sizes.len() - done);
        shares[i] = sizes[i].min(equal);
        left -= shares[i];
    }
    shares
}

impl Shown {
    /// The characters what is shown takes inside a JSON string.
    pub fn json_chars(&self) -> usize {
        json_chars(&self.text)
    }

    /// Cuts what is shown further, so that the command's text in it takes
    /// at most `budget` characters inside a JSON string (the omission line,
    /// a notice of bounded size, is not counted, as [`CappedOutput`] does
    /// not count it against its cap): a reply that carries several
    /// outputs, or a `run` whose two streams share one cap, gives each a
    /// part of one budget. The cut falls on line boundaries as
    /// [`CappedOutput`]'s does (only a line too long for its half is cut
    /// inside, never inside a masked secret); the counts, the line the
    /// omission starts at and the omission line are updated, and `saved`
    /// (called only when nothing was cut before) says where the complete
    /// stream is. A screen or other text with no omission line is cut the
    /// same way, with one added.
    pub fn fit(&mut self, budget: usize, saved: impl FnOnce() -> Saved) {
        let total = self.json_chars();
        if total <= budget {
            return;
        }
        let omission = self
            .omission
            .clone()
            .filter(|range| self.text.get(range.clone()).is_some_and(|l| l.starts_with("[... ")));
        let (head, tail, mut inside) = match omission {
            Some(range) => {
                let line = &self.text[range.clone()];
                (
                    &self.text[..range.start],
                    &self.text[range.end..],
                    line.contains("cutting inside"),
                )
            }
            None => {
                let mut weight = 0;
                let mid = self
                    .text
                    .char_indices()
                    .find(|&(_, c)| {
                        weight += json_weight(c);
                        weight > total / 2
                    })
                    .map_or(self.text.len(), |(i, _)| i);
                (&self.text[..mid], &self.text[mid..], false)
            }
        };
        if !self.truncated {
            let saved = saved();
            self.full_output_path = saved.path;
            self.full_output_cut = saved.cut;
            self.full_output_error = saved.error;
        }
        let kept = Saved {
            path: self.full_output_path.clone(),
            cut: self.full_output_cut,
            error: self.full_output_error.clone(),
        };
        let room = budget;
        // The head: whole lines within half the room.
        let mut head_end = prefix_within(head, room / 2);
        if head_end < head.len() {
            match head[..head_end].rfind('\n') {
                Some(newline) => head_end = newline + 1,
                None => {
                    head_end = outside_mask(head, head_end, Side::Before);
                    inside |= head_end > 0;
                }
            }
        }
        let new_head = &head[..head_end];
        // The tail: whole lines within the rest of the room.
        // A head cut inside a line gets a newline before the omission line.
        let added = if new_head.is_empty() || new_head.ends_with('\n') { 0 } else { 2 };
        let tail_room = room.saturating_sub(json_chars(new_head) + added);
        let mut tail_start = suffix_within(tail, tail_room);
        if tail_start > 0 && tail.as_bytes()[tail_start - 1] != b'\n' {
            let rest = &tail.as_bytes()[tail_start..];
            match rest[..rest.len().saturating_sub(1)].iter().position(|&b| b == b'\n') {
                Some(newline) => tail_start += newline + 1,
                None => {
                    tail_start = outside_mask(tail, tail_start, Side::After);
                    inside |= tail_start < tail.len();
                }
            }
        }
        let new_tail = &tail[tail_start..];
        let dropped_head = &head[head_end..];
        let dropped_tail = &tail[..tail_start];
        let newlines = |text: &str| memchr_count(b'\n', text.as_bytes()) as u64;
        self.omitted_chars += (count_chars(dropped_head) + count_chars(dropped_tail)) as u64;
        self.omitted_lines += newlines(dropped_head) + newlines(dropped_tail);
        self.lines_before_omission = if self.truncated {
            self.lines_before_omission.saturating_sub(newlines(dropped_head))
        } else {
            newlines(new_head)
        };
        let mut text = new_head.to_owned();
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        let start = text.len();
        text.push_str(&omission_line(self.omitted_chars, self.omitted_lines, inside, &kept));
        self.omission = Some(start..text.len());
        text.push_str(new_tail);
        self.text = text;
        self.truncated = true;
    }
}

/// The byte length of the longest prefix of `text` within `room` JSON
/// characters.
fn prefix_within(text: &str, room: usize) -> usize {
    let mut weight = 0;
    for (i, c) in text.char_indices() {
        weight += json_weight(c);
        if weight > room {
            return i;
        }
    }
    text.len()
}

/// The byte index where the longest suffix of `text` within `room` JSON
/// characters starts.
fn suffix_within(text: &str, room: usize) -> usize {
    let mut weight = 0;
    for (i, c) in text.char_indices().rev() {
        weight += json_weight(c);
        if weight > room {
            return i + c.len_utf8();
        }
    }
    0
}

/// `text` cut to at most `cap` characters: its head and tail around a
/// notice that says how much was left out and `why_missing` (where the rest
/// is, or will be). Returns the text and the number of characters omitted.
/// For one line (an unfinished one): it is cut inside, never inside a
/// masked secret.
pub fn head_tail(text: &str, cap: usize, why_missing: &str) -> (String, u64) {
    let n_chars = count_chars(text);
    if n_chars <= cap {
        return (text.to_owned(), 0);
    }
    let half = cap / 2;
    let head_end = outside_mask(text, byte_index_of_char(text, half), Side::Before);
    let tail_start = outside_mask(text, byte_index_of_char(text, n_chars - half), Side::After);
    let omitted =
        (n_chars - count_chars(&text[..head_end]) - count_chars(&text[tail_start..])) as u64;
    let shown = format!(
        "{}\n[... {omitted} characters omitted{why_missing} ...]\n{}",
        &text[..head_end],
        &text[tail_start..]
    );
    (shown, omitted)
}

/// The unfinished line a reply showed, to recognise it when it has grown
/// or is committed. It holds the line's text: at most what the screen
/// holds of one line (its window), never more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShownLine {
    text: String,
    /// Part of it was left out of the reply (it was longer than the room),
    /// so the full output must keep it.
    cut: bool,
}

impl ShownLine {
    fn of(line: &str, cut: bool) -> Option<ShownLine> {
        (!line.is_empty()).then(|| ShownLine { text: line.to_owned(), cut })
    }

    /// The byte length of the shown line at the start of `text`, if `text`
    /// starts with it (or with it less its trailing blanks, which a
    /// committed line loses: a prompt shown as `ask> ` comes back as `ask>`
    /// where the line ended right there).
    fn prefix_in(&self, text: &str) -> Option<usize> {
        if text.starts_with(&self.text) {
            return Some(self.text.len());
        }
        let trimmed = self.text.trim_end_matches(' ');
        let end = trimmed.len();
        // Only where the line ends: `ask>` then a newline, or the end.
        (end > 0
            && text.starts_with(trimmed)
            && matches!(text.as_bytes().get(end), None | Some(b'\n')))
        .then_some(end)
    }

    /// When `text`, with no line end in it, is the beginning of the shown
    /// line and shorter than it: the rest of the line (`None` within the
    /// option when nothing is left).
    fn after_beginning(&self, text: &str) -> Option<Option<ShownLine>> {
        let rest =
            self.text.strip_prefix(text).filter(|_| !text.is_empty() && !text.contains('\n'))?;
        Some(ShownLine::of(rest, self.cut))
    }
}

/// What a reply shows of the line a command has not finished yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnfinishedLine {
    /// The text to show.
    pub text: String,
    /// Characters of it left out.
    pub omitted: u64,
    /// What to pass as `before` next time, and to
    /// [`CappedOutput::push_continuing`] when the line is committed.
    pub shown: Option<ShownLine>,
    /// Secrets masked in the line.
    pub masked: u64,
}

/// The unfinished `line` as a reply shows it: only what is new since
/// `before` (the line the last reply showed, if this one continues it),
/// cut to `room` characters (head and tail). Bound: `room` characters plus
/// a notice, however long the line; time linear in its length.
pub fn show_unfinished_line(line: &str, before: Option<&ShownLine>, room: usize) -> UnfinishedLine {
    let skip = before.and_then(|shown| shown.prefix_in(line)).unwrap_or(0);
    let why = " from this unfinished line; they will be in the full output file once it ends";
    let (text, omitted) = head_tail(&line[skip..], room, why);
    // A cut earlier part that is still unsaved stays owed to the file.
    let cut = omitted > 0 || before.is_some_and(|before| before.cut && skip > 0);
    UnfinishedLine { text, omitted, shown: ShownLine::of(line, cut), masked: 0 }
}

/// The file that marks a directory as a spill store's own, so that its
/// retention may delete files of ours in it. It is never deleted by pruning.
pub const DIR_MARK: &str = ".shellkeep-output";

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
pub const FILE_TAG: &str = "shellkeep-";

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

/// `bytes` in the largest binary unit that divides it (`100 MiB`).
pub fn human_bytes(bytes: u64) -> String {
    for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{} {unit}", bytes >> shift);
        }
    }
    format!("{bytes} bytes")
}

/// Number of characters in `text`, counted fast on its bytes.
pub fn count_chars(text: &str) -> usize {
    text.bytes().filter(|&b| (b as i8) >= -0x40).count()
}

fn memchr_count(needle: u8, haystack: &[u8]) -> usize {
    haystack.iter().filter(|&&b| b == needle).count()
}

/// Byte index of the `n`th character of `text` (its length if shorter).
pub fn byte_index_of_char(text: &str, n: usize) -> usize {
    text.char_indices().nth(n).map_or(text.len(), |(index, _)| index)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A word no other test prints: in test builds `pass` marks it, so
    /// that the surfaces of output show whether it passed there, and how
    /// often.
    pub(crate) const PASS_WITNESS: &str = "pass-witness-7f3a";

    /// `text` passed with nothing to mask, as a piece of a stream that ends.
    pub(crate) fn plain(text: &str) -> Passed<'_> {
        pass(&mut Masking::new(Arc::new(Secrets::none())), text, true)
    }

    /// `text` with [`PASS_WITNESS`] marked as `pass` marks it in tests:
    /// `<<` and `>>` around each appearance, so a text that passed twice
    /// shows it doubled and one that never passed shows it bare.
    pub(crate) fn mark_witness(text: &str) -> String {
        text.replace(PASS_WITNESS, &format!("<<{PASS_WITNESS}>>"))
    }

    /// How `text` shows the witness: (marked once, marked more than once,
    /// bare). Every appearance of the word is exactly one of them.
    pub(crate) fn witness_passes(text: &str) -> (usize, usize, usize) {
        let all = text.matches(PASS_WITNESS).count();
        let more = text.matches(&format!("<<<<{PASS_WITNESS}")).count();
        let marked = text.matches(&format!("<<{PASS_WITNESS}>>")).count();
        (marked - more, more, all - marked)
    }

    #[test]
    fn the_witness_shows_how_often_text_passed() {
        let word = PASS_WITNESS;
        assert_eq!(witness_passes(&format!("a {word} b")), (0, 0, 1));
        assert_eq!(witness_passes(plain(&format!("a {word} b\n")).as_str()), (1, 0, 0));
        let twice = plain(&format!("{word} and {word}")).into_string();
        assert_eq!(witness_passes(&twice), (2, 0, 0));
        assert_eq!(witness_passes(plain(&twice).as_str()), (0, 2, 0));
        // Other text passes untouched, without a copy.
        assert!(matches!(plain("plain").text, Cow::Borrowed("plain")));
    }

    /// Creates the file `name` in `store` as a command log does and writes
    /// `size` bytes into it; returns its path.
    fn saved_file(store: &Arc<SpillStore>, name: &str, size: usize) -> PathBuf {
        let (path, mut file) = store.command().create_file(name).expect("create");
        std::io::Write::write_all(&mut file, &vec![b'y'; size]).expect("write");
        path
    }

    fn saved_at(path: &str) -> Saved {
        Saved { path: Some(PathBuf::from(path)), ..Saved::default() }
    }

    #[test]
    fn short_streams_are_shown_whole() {
        let mut out = CappedOutput::new(100);
        out.push(&plain("hello "));
        out.push(&plain("world\n"));
        assert!(!out.is_cut());
        let shown = out.into_shown(None);
        assert_eq!(shown.text, "hello world\n");
        assert!(!shown.truncated);
        assert_eq!(shown.full_output_path, None);
    }

    #[test]
    fn long_streams_keep_head_and_tail_and_name_the_saved_copy() {
        let mut out = CappedOutput::new(20);
        let full: String = (0..1000).map(|i| format!("{i}\n")).collect();
        // Split into odd pieces, including multi-byte characters.
        for piece in full.as_bytes().chunks(7) {
            out.push(&plain(std::str::from_utf8(piece).expect("ascii")));
        }
        out.push(&plain("é€\n"));
        assert!(out.is_cut());
        let shown = out.into_shown(Some(saved_at("/saved/it.log")));
        assert!(shown.truncated);
        assert!(shown.text.starts_with("0\n1\n2\n3\n4\n"), "{}", shown.text);
        assert!(shown.text.ends_with("999\né€\n"), "{}", shown.text);
        // The tail starts with a whole line: "999", not "98" of "998".
        let expected_total = full.chars().count() as u64 + 3;
        assert_eq!(shown.omitted_chars, expected_total - 10 - 7);
        // The head holds lines 0-4 whole; line 5 starts the omission.
        assert_eq!(shown.lines_before_omission, 5);
        let omission = &shown.text[shown.omission.clone().expect("a notice")];
        assert!(omission.starts_with("[... ") && omission.ends_with(" ...]\n"), "{omission}");
        assert!(omission.contains("; full output in /saved/it.log ..."), "{omission}");
        assert_eq!(shown.full_output_path, Some(PathBuf::from("/saved/it.log")));
    }

    /// `text` pushed in pieces of `piece` bytes (at character boundaries)
    /// into a view of `cap` characters; its head, omission line and tail.
    fn cut(text: &str, cap: usize, piece: usize) -> (Shown, String, String, String) {
        let mut out = CappedOutput::new(cap);
        let mut rest = text;
        while !rest.is_empty() {
            let mut at = piece.min(rest.len());
            while !rest.is_char_boundary(at) {
                at += 1;
            }
            out.push(&plain(&rest[..at]));
            rest = &rest[at..];
        }
        let shown = out.into_shown(None);
        let range = shown.omission.clone().expect("cut");
        // A head cut inside a line gets a newline before the notice.
        let mut head = shown.text[..range.start].to_owned();
        if !text.starts_with(&head) {
            assert_eq!(head.pop(), Some('\n'), "the head comes from the text");
        }
        let notice = shown.text[range.clone()].to_owned();
        let tail = shown.text[range.end..].to_owned();
        (shown, head, notice, tail)
    }

    /// Issue 14: the head and tail of a cut fall on line boundaries, from
    /// several sides, and what is shown plus what is left out is the whole.
    #[test]
    fn cuts_fall_on_line_boundaries() {
        let short: String = (0..5000).map(|i| format!("line {i}\n")).collect();
        let mixed: String = (0..300)
            .map(
                |i| if i % 7 == 3 { format!("{}\n", "m".repeat(40 + i)) } else { format!("{i}\n") },
            )
            .collect();
        let wide: String =
            (0..400).map(|i| format!("{i} é€😀 ünïcödé {}\n", "ß".repeat(i % 13))).collect();
        for (name, text) in [("short lines", &short), ("a mix", &mixed), ("multi-byte", &wide)] {
            for (cap, piece) in [(200, 1), (200, 7), (1000, 4096), (333, 13)] {
                let (shown, head, notice, tail) = cut(text, cap, piece);
                let what = format!("{name}, cap {cap}, pieces of {piece}");
                assert!(head.ends_with('\n') && text.starts_with(&head), "{what}: {head:?}");
                assert!(text.ends_with(&tail), "{what}: {tail:?}");
                let before_tail = &text[..text.len() - tail.len()];
                assert!(before_tail.ends_with('\n'), "{what}: the tail starts a line: {tail:?}");
                assert!(!notice.contains("inside a line"), "{what}: {notice}");
                let shown_chars = count_chars(&head) + count_chars(&tail);
                assert_eq!(
                    shown_chars as u64 + shown.omitted_chars,
                    count_chars(text) as u64,
                    "{what}"
                );
                let lines = |t: &str| t.matches('\n').count() as u64;
                assert_eq!(
                    lines(&head) + lines(&tail) + shown.omitted_lines,
                    lines(text),
                    "{what}"
                );
                assert_eq!(shown.lines_before_omission, lines(&head), "{what}");
                assert!(shown_chars <= cap, "{what}: {shown_chars}");
                assert!(
                    notice.starts_with(&format!(
                        "[... {} characters ({} lines) omitted",
                        shown.omitted_chars, shown.omitted_lines
                    )),
                    "{what}: {notice}"
                );
            }
        }
    }

    /// Issue 14: a line longer than half the cap is the one cut inside a
    /// line, and the omission line says so.
    #[test]
    fn only_a_line_too_long_is_cut_inside() {
        let huge = format!("{}\n", "x".repeat(100_000));
        let (shown, head, notice, tail) = cut(&huge, 200, 4096);
        assert_eq!(
            (head.as_str(), tail.as_str()),
            ("x".repeat(100).as_str(), format!("{}\n", "x".repeat(99)).as_str())
        );
        assert_eq!(shown.omitted_chars, 100_001 - 200);
        assert!(notice.contains(", cutting inside a line too long to show whole"), "{notice}");
        // A huge line between short ones: the short lines are whole, the
        // huge one left out whole.
        let text = format!("a\nb\n{}\nc\nd\n", "y".repeat(10_000));
        let (_, head, notice, tail) = cut(&text, 200, 333);
        assert_eq!((head.as_str(), tail.as_str()), ("a\nb\n", "c\nd\n"));
        assert!(!notice.contains("inside a line"), "{notice}");
        // A huge first line and last line: both cut inside.
        let text = format!("{}\nmiddle\n{}", "h".repeat(5000), "t".repeat(5000));
        let (_, head, notice, tail) = cut(&text, 200, 97);
        assert_eq!(
            (head.as_str(), tail.as_str()),
            ("h".repeat(100).as_str(), "t".repeat(100).as_str())
        );
        assert!(notice.contains("inside a line"), "{notice}");
        // Multi-byte characters at the boundary of a line cut inside.
        let text = "é€😀".repeat(1000);
        let (shown, head, _, tail) = cut(&text, 100, 5);
        assert_eq!(count_chars(&head) + count_chars(&tail), 100);
        assert_eq!(shown.omitted_chars, 3000 - 100);
    }

    /// Issue 18: a reply's outputs share one budget counted as JSON writes
    /// them; a cut output is cut further, a whole one gets a cut, and
    /// either way what is shown, what is left out and the line the
    /// omission starts at add up to the stream.
    #[test]
    fn fitting_a_budget_counts_json_escapes_and_keeps_the_accounts() {
        let lines: String = (0..3000).map(|i| format!("\"{i}\"\\\t\u{1}\n")).collect();
        let long_line = format!("{}\n", "\u{1b}x".repeat(5000));
        let with_line: String = format!("start\n{long_line}end\n");
        for (text, cap) in
            [(&lines, 100_000), (&lines, 4_000), (&long_line, 100_000), (&with_line, 1_000)]
        {
            let mut out = CappedOutput::new(cap);
            out.push(&plain(text));
            let cut = out.is_cut();
            let mut shown = out.into_shown(cut.then(|| saved_at("/saved/it.log")));
            for budget in [3_000, 1_500, 700] {
                shown.fit(budget, || saved_at("/saved/it.log"));
                assert!(shown.truncated);
                let range = shown.omission.clone().expect("an omission line");
                let notice = &shown.text[range.clone()];
                let own = shown.json_chars() - json_chars(notice);
                assert!(own <= budget, "{own} > {budget}");
                assert!(notice.contains("; full output in /saved/it.log ..."), "{notice}");
                let head = &shown.text[..range.start];
                let tail = &shown.text[range.end..];
                assert!(text.starts_with(head.trim_end_matches('\n')), "the head is the start");
                assert!(text.ends_with(tail), "the tail is the end");
                let head_lines = head.matches('\n').count() as u64;
                if text.starts_with(head) {
                    assert_eq!(shown.lines_before_omission, head_lines);
                    let shown_chars = (count_chars(head) + count_chars(tail)) as u64;
                    assert_eq!(shown.omitted_chars + shown_chars, count_chars(text) as u64);
                    let all_lines = text.matches('\n').count() as u64;
                    assert_eq!(
                        shown.omitted_lines + head_lines + tail.matches('\n').count() as u64,
                        all_lines
                    );
                }
                assert!(
                    notice.contains(&format!(
                        "[... {} characters ({} lines)",
                        shown.omitted_chars, shown.omitted_lines
                    )),
                    "{notice}"
                );
            }
        }
        // Within the budget: untouched, and the saved copy is not asked for.
        let mut small = CappedOutput::new(100);
        small.push(&plain("ok\n"));
        let mut shown = small.into_shown(None);
        shown.fit(10, || unreachable!("nothing to cut"));
        assert_eq!((shown.text.as_str(), shown.truncated), ("ok\n", false));
    }

    #[test]
    fn a_budget_is_shared_fairly() {
        assert_eq!(share(100, &[10, 500]), vec![10, 90]);
        assert_eq!(share(100, &[500, 500]), vec![50, 50]);
        assert_eq!(share(100, &[30, 20, 10]), vec![30, 20, 10]);
        assert_eq!(share(90, &[100, 5, 100]), vec![42, 5, 43]);
        assert_eq!(share(10, &[]), Vec::<usize>::new());
        assert_eq!(json_chars("a\"\\\n\u{1b}é"), 1 + 2 + 2 + 2 + 6 + 1);
        assert_eq!(
            json_chars("a\"\\\n\u{1b}é"),
            serde_json::to_string("a\"\\\n\u{1b}é").unwrap().chars().count() - 2
        );
    }

    /// Issue 14: a cut never splits a masked secret, wherever it falls.
    #[test]
    fn a_cut_never_splits_a_masked_secret() {
        for offset in 0..MASK.len() + 2 {
            // One long line: the cut is inside it, near masks at every
            // offset from the head's end and the tail's start.
            let line = format!("{}{}", "a".repeat(100 - offset), MASK.repeat(400));
            let text = format!("{line}{}", "z".repeat(offset));
            let (_, head, _, tail) = cut(&text, 200, 4096);
            for part in [&head, &tail] {
                let rest = part.replace(MASK, "");
                assert!(!rest.contains('<') && !rest.contains('>'), "offset {offset}: {part:?}");
            }
            assert!(count_chars(&head) <= 100 && count_chars(&tail) <= 100, "offset {offset}");
            // An unfinished line is cut the same way.
            let (shown, _) = head_tail(&text, 200, "");
            let rest = shown.replace(MASK, "");
            assert!(!rest.contains('<') && !rest.contains('>'), "offset {offset}: {shown:?}");
        }
    }

    #[test]
    fn a_cut_or_unsaved_copy_is_named_in_the_omission_line() {
        let cut = SpillCut { after_bytes: 700, limit: SpillLimit::PerCommand(1000) };
        let saved = Saved { cut: Some(cut), ..saved_at("/saved/it.log") };
        let mut out = CappedOutput::new(10);
        out.push(&plain(&"a".repeat(100)));
        let shown = out.into_shown(Some(saved));
        assert!(shown.text.contains("full output in /saved/it.log (cut after 700 bytes"));
        assert_eq!(shown.full_output_cut, Some(cut));
        let mut out = CappedOutput::new(10);
        out.push(&plain(&"a".repeat(100)));
        let unsaved = Saved { error: Some("No space left".into()), ..Saved::default() };
        let shown = out.into_shown(Some(unsaved));
        assert!(shown.text.contains("the full output could not be saved: No space left"));
        assert_eq!(shown.full_output_error.as_deref(), Some("No space left"));
    }

    #[test]
    fn exactly_at_the_cap_is_not_truncated() {
        let mut out = CappedOutput::new(10);
        out.push(&plain("0123456789"));
        assert!(!out.is_cut());
        let shown = out.into_shown(None);
        assert_eq!((shown.text.as_str(), shown.truncated), ("0123456789", false));
    }

    #[test]
    fn text_seen_before_is_counted_but_not_shown_again() {
        // Small: shown only as the new part.
        let mut out = CappedOutput::new(100);
        out.push_seen("Password");
        out.push(&plain(": ok\n"));
        let shown = out.into_shown(None);
        assert_eq!((shown.text.as_str(), shown.truncated), (": ok\n", false));
        // Much seen text does not make the new text cut.
        let mut out = CappedOutput::new(100);
        out.push_seen(&"x".repeat(500));
        out.push(&plain("done\n"));
        assert!(!out.is_cut());
        assert_eq!(out.into_shown(None).text, "done\n");
        // Large new output after it: omitted counts only what is new, and
        // the omission starts after the seen lines.
        let mut out = CappedOutput::new(10);
        out.push_seen("seen\n");
        out.push(&plain(&"y".repeat(100)));
        let shown = out.into_shown(None);
        assert_eq!(shown.omitted_chars, 90);
        assert_eq!(shown.lines_before_omission, 1);
    }

    #[test]
    fn an_unfinished_line_is_shown_once_and_bounded() {
        let first = show_unfinished_line("Password", None, 100);
        assert_eq!((first.text.as_str(), first.omitted), ("Password", 0));
        // It grew: only the new part.
        let grown = show_unfinished_line("Password: ", first.shown.as_ref(), 100);
        assert_eq!(grown.text, ": ");
        // Unchanged: nothing.
        assert_eq!(show_unfinished_line("Password: ", grown.shown.as_ref(), 100).text, "");
        // Rewritten (a progress line after \r): shown whole again.
        let other = show_unfinished_line("Passw0rd", grown.shown.as_ref(), 100);
        assert_eq!(other.text, "Passw0rd");
        assert_eq!(show_unfinished_line("", other.shown.as_ref(), 100).shown, None);
        // Long: head and tail only, and the saved copy will be named.
        let long = "z".repeat(10_000);
        let cut = show_unfinished_line(&long, None, 100);
        assert_eq!(cut.omitted, 9_900);
        assert!(cut.text.len() < 300, "{}", cut.text);
        assert!(cut.shown.as_ref().is_some_and(|shown| shown.cut));
        let more = show_unfinished_line(&format!("{long}!"), cut.shown.as_ref(), 100);
        assert_eq!(more.text, "!");
        assert!(more.shown.as_ref().is_some_and(|shown| shown.cut), "still owed to the file");
    }

    #[test]
    fn a_committed_line_is_not_shown_again() {
        let line = show_unfinished_line("answer: ", None, 100);
        let mut out = CappedOutput::new(100);
        assert!(!out.push_continuing(&mut line.shown.clone(), &plain("answer: 42\nnext\n")));
        assert_eq!(out.into_shown(None).text, "42\nnext\n");
        // A different line is shown whole.
        let mut out = CappedOutput::new(100);
        out.push_continuing(&mut line.shown.clone(), &plain("done\n"));
        assert_eq!(out.into_shown(None).text, "done\n");
        // A line that was cut when shown asks for the saved copy.
        let long = "z".repeat(1000);
        let cut = show_unfinished_line(&long, None, 100);
        let mut out = CappedOutput::new(100);
        assert!(out.push_continuing(&mut cut.shown.clone(), &plain(&format!("{long}\n"))));
        assert_eq!(out.into_shown(None).text, "\n");
        // Issue 18: a wrapped line's first rows scroll off the screen and
        // are committed before the line ends: seen, and the rest is
        // recognised when it comes.
        let line = show_unfinished_line("first row|second row|", None, 100);
        let mut shown = line.shown.clone();
        let mut out = CappedOutput::new(100);
        out.push_continuing(&mut shown, &plain("first row|"));
        out.push_continuing(&mut shown, &plain("second row|and more\n"));
        assert_eq!(out.into_shown(None).text, "and more\n");
        assert_eq!(shown, None);
        // What comes after its beginning that is not the rest of it is
        // new, and ends the match.
        let mut shown = line.shown.clone();
        let mut out = CappedOutput::new(100);
        out.push_continuing(&mut shown, &plain("first"));
        out.push_continuing(&mut shown, &plain(" other\n"));
        assert_eq!(out.into_shown(None).text, " other\n");
        let mut shown = line.shown;
        let mut out = CappedOutput::new(100);
        out.push_continuing(&mut shown, &plain("first row|\n"));
        assert_eq!(out.into_shown(None).text, "first row|\n");
        assert_eq!(shown, None);
    }

    #[test]
    fn head_tail_bounds_any_text() {
        assert_eq!(head_tail("short", 10, ""), ("short".to_owned(), 0));
        let (shown, omitted) = head_tail(&"é".repeat(1000), 10, "; see the file");
        assert_eq!(omitted, 990);
        assert_eq!(
            shown,
            format!(
                "{}\n[... 990 characters omitted; see the file ...]\n{}",
                "é".repeat(5),
                "é".repeat(5)
            )
        );
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
