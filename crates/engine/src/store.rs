//! The complete output of every command, kept exactly once, so that it can
//! be read back by line number while the command runs and after it ended;
//! and [`OutputSink`], the one way a command's output comes in.
//!
//! A [`CommandLog`] holds one stream of a command's output exactly as it
//! was committed (rendered, or for `run` decoded, before any cutting for
//! display). It is the only stored copy: what a reply shows is a view of it
//! (`output::CappedOutput`). While small it stays in memory; past
//! [`MEMORY_LIMIT`] bytes (or once a view was cut and must name a file)
//! everything goes to a private file of the [`SpillStore`], under its
//! per-command and per-server byte limits, each byte counted once (past a
//! limit the file ends with a line saying where it was cut, and the log's
//! lines and offsets are those saved: what comes after is only counted, as
//! [`NotSaved`]):
//! `CommandLog::write` is the one place that writes such a file. A sparse
//! index (the byte offset of every [`INDEX_STEP`]th line) lets a read start
//! near its first line instead of scanning the file from the top.
//!
//! An [`OutputStore`] keeps the logs of one session's commands (one log
//! each: the terminal merges stdout and stderr) or of one server's `run`
//! commands (two logs each, [`Stream::Stdout`] and [`Stream::Stderr`],
//! sharing the command's budget), newest last, with retention: at most
//! [`StoreLimits::max_commands`] commands and [`StoreLimits::max_bytes`]
//! bytes of output in all; the oldest are dropped first (their files
//! deleted), never the newest.
//!
//! [`OutputSink::push`] is the only way text reaches a log and a view: every
//! byte a command prints passes there once, in order, after rendering (for
//! `run`, after UTF-8 decoding) and before anything is kept, shown or
//! reported as progress, and it hands the text to `output::pass` (the one
//! place every piece of output passes, where secrets are masked, with the
//! stream's own masking state) before the log and the view, which take only
//! what `pass` returns; [`OutputSink::finish`] releases what `pass` held
//! back when the command ends. What is shown unkept (the unfinished line,
//! a full screen, a progress line) passes there too, through the sink;
//! what background jobs print between commands, through [`IdleOutput`].
//!
//! Bounds: memory per log is at most [`MEMORY_LIMIT`] bytes plus its index
//! (8 bytes per [`INDEX_STEP`] lines) and a 64 KiB write buffer; a read
//! returns at most [`READ_CAP`] characters. Writers are the PTY reader
//! thread (through the session's state lock); readers take the log's own
//! lock briefly and read the file through a separate handle.
//!
//! This module does not render terminal bytes or word replies.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::mask::Secrets;
use crate::output::{
    CappedOutput, CommandSpill, Masking, Passed, Saved, Shown, ShownLine, SpillCut, SpillStore,
    UnfinishedLine, count_chars, pass, pass_shown, show_unfinished_line,
};

/// Bytes of a command's output kept in memory before it moves to a file.
pub const MEMORY_LIMIT: usize = 8 * 1024;

/// One index entry per this many lines.
pub const INDEX_STEP: u64 = 1024;

/// The most characters one read returns; a longer line is cut.
pub const READ_CAP: usize = 30_000;

/// The most lines one read returns.
pub const MAX_READ_LINES: u64 = 5_000;

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

/// One stream of a `run` command; a terminal command has one stream
/// ([`Stream::Stdout`]), where its stdout and stderr meet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Stream {
    /// Standard output (a terminal command's whole output).
    #[default]
    Stdout,
    /// Standard error, kept apart by `run`.
    Stderr,
}

impl Stream {
    /// `stdout` or `stderr`.
    pub fn as_str(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

/// Why a read could not be served.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// No command has run in the session yet.
    #[error("no command has run in this session yet")]
    Empty,
    /// The command number is not (or no longer) kept.
    #[error("command {asked} is not kept: the session keeps commands {first} to {last}")]
    NotKept {
        /// The number asked for.
        asked: u64,
        /// The oldest kept.
        first: u64,
        /// The newest.
        last: u64,
    },
    /// The command has no such stream (a terminal command has only one).
    #[error("command {number} has no separate {}", stream.as_str())]
    NoStream {
        /// The command.
        number: u64,
        /// The stream asked for.
        stream: Stream,
    },
    /// The file could not be read.
    #[error("the output of command {number} could not be read from {path}: {error}")]
    Unreadable {
        /// The command.
        number: u64,
        /// Its file.
        path: PathBuf,
        /// What went wrong.
        error: String,
    },
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
                Arc::new(CommandLog {
                    number,
                    command: command.clone(),
                    budget: budget.clone(),
                    stem,
                    extension,
                    inner: Mutex::new(LogInner::default()),
                })
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

/// One stream of one command's complete output.
pub struct CommandLog {
    number: u64,
    /// The command, cut to 200 characters.
    command: String,
    /// The command's share of the disk limits, shared by all its streams.
    budget: CommandSpill,
    /// The file name without its random tag and extension (the file is
    /// made only when the output outgrows memory, so most commands cost no
    /// random draw).
    stem: String,
    extension: &'static str,
    inner: Mutex<LogInner>,
}

impl std::fmt::Debug for CommandLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandLog")
            .field("number", &self.number)
            .field("file", &format_args!("{}.{}", self.stem, self.extension))
            .finish()
    }
}

#[derive(Default)]
struct LogInner {
    /// The whole output while it is at most [`MEMORY_LIMIT`] bytes.
    memory: String,
    /// The file, once the output outgrew memory.
    /// Its writer is dropped (the file closed) once the command ended, so
    /// kept outputs hold no descriptor or buffer.
    file: Option<(PathBuf, Option<BufWriter<File>>)>,
    /// Bytes of output, in memory or in the file (not counting a cut line).
    bytes: u64,
    /// Newline characters in the output.
    newlines: u64,
    /// Whether the last byte is a newline (or nothing was written).
    ends_with_newline: bool,
    /// `index[k]` is the byte offset where line `k * INDEX_STEP` starts.
    index: Vec<u64>,
    /// The exit code once the command ended.
    exit_code: Option<i32>,
    ended: bool,
    /// Set when the file reached a byte limit. From then on `bytes`,
    /// `newlines` and `ends_with_newline` stay as they were (they describe
    /// what was saved, all that a read can return) and what comes after is
    /// only counted, in `unsaved`.
    cut: Option<SpillCut>,
    /// What the command printed past the cut.
    unsaved: Unsaved,
    /// Set when the file could not be written.
    error: Option<String>,
    /// Dropped by retention: nothing more is kept.
    discarded: bool,
}

/// Text counted but not saved, past a byte limit.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Unsaved {
    bytes: u64,
    newlines: u64,
    ends_with_newline: bool,
}

/// What a command printed past the byte limit that cut its saved output:
/// never saved, so no read returns it, and not counted in
/// [`LogPage::total_lines`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotSaved {
    /// Bytes.
    pub bytes: u64,
    /// Lines that start past the cut (the rest of a line the cut split is
    /// not one of them).
    pub lines: u64,
}

/// A page of a command's output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogPage {
    /// The command's number in its session.
    pub number: u64,
    /// The command (cut to 200 characters).
    pub command: String,
    /// The lines, each with its newline (the last may lack one).
    pub text: String,
    /// The number of the first line returned (0-based).
    pub first_line: u64,
    /// How many lines were returned.
    pub lines: u64,
    /// Lines in the output so far.
    pub total_lines: u64,
    /// Whether the command is still running.
    pub running: bool,
    /// Its exit code, once it ended.
    pub exit_code: Option<i32>,
    /// Whether the page was cut at [`READ_CAP`] characters.
    pub cut_at_cap: bool,
    /// Set when the saved output stops at a byte limit.
    pub saved_until: Option<SpillCut>,
    /// What was printed past that limit, when anything was.
    pub not_saved: Option<NotSaved>,
    /// Set when the output could not be saved (from some point on): why.
    pub save_error: Option<String>,
    /// Whether lines from `first_line + lines` on are counted in
    /// `total_lines` but were not saved (a limit or `save_error` stopped
    /// the file), so no read can return them.
    pub rest_unavailable: bool,
    /// The file holding the output, once it outgrew memory.
    pub path: Option<PathBuf>,
}

impl CommandLog {
    /// The command's number in its session.
    pub fn number(&self) -> u64 {
        self.number
    }

    fn lock(&self) -> MutexGuard<'_, LogInner> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Bytes of output kept.
    pub fn bytes(&self) -> u64 {
        self.lock().bytes
    }

    /// Complete lines so far (newline characters).
    pub fn complete_lines(&self) -> u64 {
        self.lock().newlines
    }

    /// Lines of output so far (a last line without its newline counts);
    /// past a byte limit, the lines saved.
    pub fn total_lines(&self) -> u64 {
        let inner = self.lock();
        total_lines(&inner)
    }

    /// Appends `text`; only [`OutputSink::push`] calls it.
    fn push(&self, text: &Passed<'_>) {
        let text = text.as_str();
        if text.is_empty() {
            return;
        }
        let mut inner = self.lock();
        if inner.discarded {
            return;
        }
        if inner.cut.is_some() {
            not_saved(&mut inner, text);
            return;
        }
        let start = inner.bytes;
        // Once a file could not be made, memory keeps only the beginning:
        // a later short piece appended there would be out of place.
        let kept = if inner.file.is_none()
            && inner.error.is_none()
            && inner.memory.len() + text.len() <= MEMORY_LIMIT
        {
            inner.memory.push_str(text);
            inner.bytes += text.len() as u64;
            text.len()
        } else {
            if inner.file.is_none() && inner.error.is_none() {
                self.open_file(&mut inner);
            }
            // Moving what was in memory may itself have reached a limit.
            if inner.cut.is_some() { 0 } else { self.write(&mut inner, text) }
        };
        counted(&mut inner, start, &text[..kept]);
        not_saved(&mut inner, &text[kept..]);
    }

    /// Records that the command ended with `exit_code`.
    pub fn finish(&self, exit_code: i32) {
        let mut inner = self.lock();
        inner.ended = true;
        inner.exit_code = Some(exit_code);
        if let Some((_, writer)) = &mut inner.file
            && let Some(mut writer) = writer.take()
            && let Err(err) = writer.flush()
        {
            inner.error.get_or_insert_with(|| err.to_string());
        }
    }

    /// Writes out what is buffered, so the file holds everything pushed so
    /// far; a failure is kept as the log's error.
    fn flush(&self) {
        let mut inner = self.lock();
        if let Some((_, Some(writer))) = &mut inner.file
            && let Err(err) = writer.flush()
        {
            inner.error.get_or_insert_with(|| err.to_string());
        }
    }

    /// The file holding the output, once it outgrew memory.
    pub fn path(&self) -> Option<PathBuf> {
        self.lock().file.as_ref().map(|(path, _)| path.clone())
    }

    /// Moves the output to its file now, if it is still in memory, so that
    /// a reply that left text out can name the file.
    pub fn keep_on_disk(&self) {
        let mut inner = self.lock();
        if inner.file.is_none() && inner.error.is_none() && !inner.discarded {
            self.open_file(&mut inner);
        }
    }

    /// Where the output is saved, as a cut reply names it; the file holds
    /// everything pushed so far. Once a write failed, no path: the error
    /// says why, and the file holds only the beginning.
    pub fn saved(&self) -> Saved {
        self.flush();
        let inner = self.lock();
        Saved {
            path: inner
                .file
                .as_ref()
                .filter(|_| inner.error.is_none())
                .map(|(path, _)| path.clone()),
            cut: inner.cut,
            error: inner.error.clone(),
        }
    }

    /// Lines `offset ..` (a negative `offset` counts from the end, as
    /// `tail -n`), at most `limit` of them and [`READ_CAP`] characters.
    pub fn read(&self, offset: i64, limit: u64) -> Result<LogPage, StoreError> {
        let limit = limit.clamp(1, MAX_READ_LINES);
        let mut inner = self.lock();
        let total = total_lines(&inner);
        let first = if offset < 0 {
            total.saturating_sub(offset.unsigned_abs())
        } else {
            (offset as u64).min(total)
        };
        let mut page = LogPage {
            number: self.number,
            command: self.command.clone(),
            text: String::new(),
            first_line: first,
            lines: 0,
            total_lines: total,
            running: !inner.ended,
            exit_code: inner.exit_code,
            cut_at_cap: false,
            saved_until: inner.cut,
            not_saved: not_saved_summary(&inner),
            save_error: inner.error.clone(),
            rest_unavailable: false,
            path: inner.file.as_ref().map(|(path, _)| path.clone()),
        };
        if first >= total {
            return Ok(page);
        }
        // Never past the lines counted: a file cut at a limit ends with a
        // line of ours saying so, which is not output.
        let limit = limit.min(total - first);
        let limit_lines = limit;
        // A page that ends before the lines counted, though neither its line
        // limit nor its character cap stopped it, met the end of what was
        // saved.
        let mark_end = |page: &mut LogPage| {
            page.rest_unavailable = (page.saved_until.is_some() || page.save_error.is_some())
                && !page.cut_at_cap
                && page.lines < limit_lines
                && page.first_line + page.lines < page.total_lines;
        };
        let unreadable = |path: &PathBuf, error: std::io::Error| StoreError::Unreadable {
            number: self.number,
            path: path.clone(),
            error: error.to_string(),
        };
        let state = &mut *inner;
        let Some((path, writer)) = &mut state.file else {
            let start = nth_line_start(&state.memory, first);
            collect_lines(&mut page, state.memory[start..].split_inclusive('\n'), limit);
            mark_end(&mut page);
            return Ok(page);
        };
        // A failed flush (the disk is full) ends what the file holds; what
        // it holds can still be read.
        if state.error.is_none()
            && let Some(writer) = writer
            && let Err(err) = writer.flush()
        {
            state.error = Some(err.to_string());
            page.save_error = state.error.clone();
        }
        let path = path.clone();
        // Start at the nearest indexed line at or before the first one.
        let k = (first / INDEX_STEP) as usize;
        let (start_line, start_byte) = match k.checked_sub(1).and_then(|i| state.index.get(i)) {
            Some(&byte) => (k as u64 * INDEX_STEP, byte),
            None => (0, 0),
        };
        let ends_with_newline = state.ends_with_newline;
        drop(inner);
        let mut file = File::open(&path).map_err(|err| unreadable(&path, err))?;
        file.seek(SeekFrom::Start(start_byte)).map_err(|err| unreadable(&path, err))?;
        let mut reader = BufReader::with_capacity(64 * 1024, file);
        for _ in start_line..first {
            if read_line_bounded(&mut reader, 0).map_err(|err| unreadable(&path, err))?.is_none() {
                break;
            }
        }
        let mut texts = Vec::new();
        let mut bytes_read = 0;
        while (texts.len() as u64) < limit && bytes_read <= READ_CAP * 4 {
            let line = read_line_bounded(&mut reader, READ_CAP * 4 + 4)
                .map_err(|err| unreadable(&path, err))?;
            let Some(mut bytes) = line else { break };
            bytes.push(b'\n');
            bytes_read += bytes.len();
            texts.push(String::from_utf8_lossy(&bytes).into_owned());
        }
        collect_lines(&mut page, texts.iter().map(String::as_str), limit);
        // The last line of a running command may lack its newline.
        if page.first_line + page.lines == total && !ends_with_newline && !page.cut_at_cap {
            page.text.pop();
        }
        mark_end(&mut page);
        Ok(page)
    }

    /// Drops the output and deletes its file (retention).
    fn discard(&self) {
        let mut inner = self.lock();
        inner.discarded = true;
        inner.memory = String::new();
        inner.index = Vec::new();
        if let Some((path, _)) = inner.file.take() {
            let _ = std::fs::remove_file(path);
        }
    }

    fn open_file(&self, inner: &mut LogInner) {
        let name = format!("{}-{}.{}", self.stem, random_tag(), self.extension);
        match self.budget.create_file(&name) {
            Ok((path, file)) => {
                let memory = std::mem::take(&mut inner.memory);
                inner.file = Some((path, Some(BufWriter::with_capacity(64 * 1024, file))));
                // What was in memory goes first; it was counted in `bytes`
                // and its lines. Where a limit cut it (the server's limit
                // was nearly reached), the lines past the cut are counted
                // again, as not saved.
                inner.bytes = 0;
                let kept = self.write(inner, &memory);
                if kept < memory.len() {
                    let (saved, rest) = memory.split_at(kept);
                    inner.newlines = saved.bytes().filter(|&b| b == b'\n').count() as u64;
                    inner.ends_with_newline = saved.is_empty() || saved.ends_with('\n');
                    inner.index.retain(|&start| start <= kept as u64);
                    not_saved(inner, rest);
                }
            }
            Err(err) => inner.error = Some(err.to_string()),
        }
    }

    /// Writes `text` within the byte limits; at a limit, the cut line. The
    /// one place a full-output file is written. Returns how much of `text`
    /// counts as the log's (all of it, unless a limit cut it).
    fn write(&self, inner: &mut LogInner, text: &str) -> usize {
        let Some((_, Some(writer))) = &mut inner.file else {
            // No file could be made: keep counting, keep nothing.
            inner.bytes += text.len() as u64;
            return text.len();
        };
        if inner.error.is_some() {
            // Once a write failed, nothing more is written: a later write
            // that succeeded (space freed) would leave a gap in the lines.
            inner.bytes += text.len() as u64;
            return text.len();
        }
        let (granted, stopped_by) = self.budget.grant(text.len() as u64);
        let mut end = granted as usize;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let mut result = writer.write_all(&text.as_bytes()[..end]);
        inner.bytes += end as u64;
        if let Some(limit) = stopped_by {
            let cut = SpillCut { after_bytes: inner.bytes, limit };
            inner.cut = Some(cut);
            let line = format!("\n[shellkeep: the full output stops here, {cut}.]\n");
            result = result.and_then(|()| writer.write_all(line.as_bytes()));
        }
        if let Err(err) = result {
            inner.error.get_or_insert_with(|| err.to_string());
        }
        end
    }
}

/// Counts `text`, which starts at byte `start` of the log, as the log's:
/// its lines, and an index entry for each line that starts inside it at a
/// multiple of [`INDEX_STEP`].
fn counted(inner: &mut LogInner, start: u64, text: &str) {
    if text.is_empty() {
        return;
    }
    let mut line = inner.newlines;
    for (i, byte) in text.bytes().enumerate() {
        if byte == b'\n' {
            line += 1;
            if line.is_multiple_of(INDEX_STEP) {
                inner.index.push(start + i as u64 + 1);
            }
        }
    }
    inner.newlines = line;
    inner.ends_with_newline = text.ends_with('\n');
}

/// Counts `text`, printed past the cut, as not saved.
fn not_saved(inner: &mut LogInner, text: &str) {
    if text.is_empty() {
        return;
    }
    let unsaved = &mut inner.unsaved;
    unsaved.bytes += text.len() as u64;
    unsaved.newlines += text.bytes().filter(|&b| b == b'\n').count() as u64;
    unsaved.ends_with_newline = text.ends_with('\n');
}

/// What was printed past the cut, when anything was.
fn not_saved_summary(inner: &LogInner) -> Option<NotSaved> {
    let unsaved = inner.unsaved;
    (unsaved.bytes > 0).then(|| {
        // The first newline past the cut ends a line the cut split; a last
        // line without its newline is a line.
        let split = u64::from(inner.bytes > 0 && !inner.ends_with_newline);
        let unfinished = u64::from(!unsaved.ends_with_newline);
        NotSaved {
            bytes: unsaved.bytes,
            lines: (unsaved.newlines + unfinished).saturating_sub(split),
        }
    })
}

/// The one way a command's output comes in: every piece of text a command
/// prints passes through [`OutputSink::push`], once and in order, after
/// rendering (for `run`, after UTF-8 decoding) and before anything is kept,
/// shown, reported as progress or announced. It passes the text through
/// `output::pass`, which masks secrets (holding back a tail that may begin
/// one until the next piece decides it), then appends it to the command's
/// log (the only stored copy) and feeds the view a reply shows (head and
/// tail in memory). Nothing else writes either.
#[derive(Debug)]
pub struct OutputSink {
    log: Arc<CommandLog>,
    /// What the next reply shows.
    view: CappedOutput,
    /// Characters a view shows.
    cap: usize,
    /// The unfinished line the last reply showed, so that the next view
    /// shows only what is new of it.
    line_shown: Option<ShownLine>,
    /// The view must name the saved copy even if it was not cut: it holds
    /// the rest of a line an earlier reply had to cut.
    name_saved: bool,
    /// The stream's secrets and masking state.
    masking: Masking,
}

impl OutputSink {
    /// A sink writing into `log`, whose views show at most `cap`
    /// characters each, masking `secrets`.
    pub fn new(log: Arc<CommandLog>, cap: usize, secrets: Arc<Secrets>) -> OutputSink {
        OutputSink {
            log,
            view: CappedOutput::new(cap),
            cap,
            line_shown: None,
            name_saved: false,
            masking: Masking::new(secrets),
        }
    }

    /// Takes in the next piece of the command's output: the log keeps it,
    /// the view shows it (less the start of a line an earlier reply
    /// showed). A view that outgrew its cap moves the log to its file, so
    /// that the reply can name it.
    pub fn push(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        let text = pass(&mut self.masking, text, false);
        self.keep(&text);
    }

    fn keep(&mut self, text: &Passed<'_>) {
        if text.as_str().is_empty() {
            return;
        }
        self.log.push(text);
        let was_cut = self.view.is_cut();
        if self.view.push_continuing(&mut self.line_shown, text) {
            self.name_saved = true;
            self.log.keep_on_disk();
        }
        if !was_cut && self.view.is_cut() {
            self.log.keep_on_disk();
        }
    }

    /// The command ended with `exit_code`: what `pass` held back is
    /// released (a command's last output is never held), and the log is
    /// finished.
    pub fn finish(&mut self, exit_code: i32) {
        let rest = pass(&mut self.masking, "", true);
        self.keep(&rest);
        self.log.finish(exit_code);
    }

    /// What a reply shows of the line the command has not finished (the
    /// screen's current line, not committed yet, so not kept): only what is
    /// new since the last reply showed it, cut to `room` characters. It
    /// passes after what the stream holds back (the start of a line cut at
    /// the rows of a long line that scrolled off the screen), so that a
    /// secret across that cut is masked too.
    pub fn show_unfinished(&mut self, line: &str, room: usize) -> UnfinishedLine {
        let passed = pass_shown(&self.masking, line);
        let mut shown = show_unfinished_line(passed.as_str(), self.line_shown.as_ref(), room);
        shown.masked = passed.masked();
        self.line_shown = shown.shown.clone();
        shown
    }

    /// What a reply shows of a full-screen program: its `screen` as it is
    /// now (not kept; its lines are kept as they scroll off or when it
    /// ends), and the secrets masked in it. The next reply shows the
    /// current line whole.
    pub fn show_screen(&mut self, screen: String) -> (String, u64) {
        self.line_shown = None;
        let passed = pass(&mut Masking::new(Arc::clone(self.masking.secrets())), &screen, true);
        let masked = passed.masked();
        (passed.into_string(), masked)
    }

    /// The line a progress report shows: the screen's newest line while
    /// there is one (not committed yet), else the last line of the view.
    pub fn progress_line(&self, screen_line: String) -> String {
        if screen_line.is_empty() {
            self.view.last_line().to_owned()
        } else {
            pass_shown(&self.masking, &screen_line).into_string()
        }
    }

    /// What a reply shows of the output since the last one; the next view
    /// starts empty.
    pub fn take_shown(&mut self) -> Shown {
        let view = std::mem::replace(&mut self.view, CappedOutput::new(self.cap));
        let name_saved = std::mem::take(&mut self.name_saved);
        let saved = (name_saved || view.is_cut()).then(|| self.log.saved());
        view.into_shown(saved)
    }

    /// The log every piece goes to.
    pub fn log(&self) -> &Arc<CommandLog> {
        &self.log
    }
}

/// What a session's terminal printed while no command ran (background
/// jobs, say), kept for the next reply that announces it: the sink of idle
/// time. No command owns the text, so there is no log; the view keeps the
/// newest [`IDLE_OUTPUT_CAP`] characters or so. Text comes in only through
/// [`IdleOutput::push`], which passes it through `output::pass` as
/// [`OutputSink::push`] does a command's, masking the session's secrets.
#[derive(Debug)]
pub struct IdleOutput {
    /// What was printed since the last [`IdleOutput::take`], its newest
    /// part once it outgrew the cap.
    text: String,
    /// Secrets masked in `text`.
    masked: u64,
    masking: Masking,
}

/// Keep about this much of what is printed between commands (bytes; the
/// newest, cut at a character boundary).
pub const IDLE_OUTPUT_CAP: usize = 8_000;

impl IdleOutput {
    /// An empty idle output masking `secrets`.
    pub fn new(secrets: Arc<Secrets>) -> IdleOutput {
        IdleOutput { text: String::new(), masked: 0, masking: Masking::new(secrets) }
    }

    /// Takes in the next piece of what the terminal printed while no
    /// command ran. Bound: at most twice [`IDLE_OUTPUT_CAP`] bytes are held.
    pub fn push(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        let passed = pass(&mut self.masking, text, false);
        self.append(&passed);
    }

    fn append(&mut self, passed: &Passed<'_>) {
        self.masked += passed.masked();
        self.text.push_str(passed.as_str());
        if self.text.len() > 2 * IDLE_OUTPUT_CAP {
            let cut = self.text.len() - IDLE_OUTPUT_CAP;
            let cut = (cut..self.text.len()).find(|&i| self.text.is_char_boundary(i)).unwrap_or(0);
            self.text.drain(..cut);
        }
    }

    /// Takes what was printed since the last time, and how many secrets
    /// were masked in it. What `pass` held back is released now, masked as
    /// far as it can be decided (background output comes in whole lines, so
    /// that is rarely anything).
    pub fn take(&mut self) -> (String, u64) {
        let rest = pass(&mut self.masking, "", true);
        self.append(&rest);
        (std::mem::take(&mut self.text), std::mem::take(&mut self.masked))
    }
}

/// Reads one line through its newline, keeping at most `keep` bytes of it
/// (memory stays bounded however long the line is); `None` at the end.
fn read_line_bounded(reader: &mut impl BufRead, keep: usize) -> std::io::Result<Option<Vec<u8>>> {
    let mut line = Vec::new();
    let mut any = false;
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(any.then_some(line));
        }
        any = true;
        let (chunk, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        let room = keep.saturating_sub(line.len());
        line.extend_from_slice(&chunk[..chunk.len().min(room)]);
        let used = done.unwrap_or(buf.len());
        reader.consume(used);
        if done.is_some() {
            return Ok(Some(line));
        }
    }
}

fn total_lines(inner: &LogInner) -> u64 {
    inner.newlines + u64::from(inner.bytes > 0 && !inner.ends_with_newline)
}

/// The byte offset where line `n` (0-based) of `text` starts.
fn nth_line_start(text: &str, n: u64) -> usize {
    if n == 0 {
        return 0;
    }
    text.match_indices('\n').nth((n - 1) as usize).map_or(text.len(), |(i, _)| i + 1)
}

/// Appends up to `limit` lines to `page`, within [`READ_CAP`] characters.
fn collect_lines<'a>(page: &mut LogPage, lines: impl Iterator<Item = &'a str>, limit: u64) {
    let mut chars = 0;
    for line in lines.take(limit as usize) {
        let n = count_chars(line);
        if chars + n > READ_CAP {
            if page.lines == 0 {
                // A single line longer than the cap: its beginning.
                let cut: String = line.chars().take(READ_CAP).collect();
                page.text.push_str(&cut);
                page.text.push('\n');
                page.lines = 1;
            }
            page.cut_at_cap = true;
            return;
        }
        chars += n;
        page.text.push_str(line);
        page.lines += 1;
    }
}

/// A short random tag, so file names cannot be guessed or collide (zeros
/// if the system has no randomness to give).
fn random_tag() -> String {
    crate::private_fs::random_hex(6).unwrap_or_else(|_| "0".repeat(12))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::SpillLimits;
    use crate::output::tests::plain;

    fn store(dir: &std::path::Path, limits: StoreLimits) -> Arc<OutputStore> {
        let spill = SpillStore::new(dir.to_path_buf(), "", SpillLimits::default(), None);
        OutputStore::new(spill, "test", limits)
    }

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("shellkeep-store-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn reads_by_offset_from_memory_and_from_a_file_alike() {
        let dir = scratch("pages");
        for n_lines in [5u64, 3_000, 10_000] {
            let store = store(&dir, StoreLimits::default());
            let log = store.begin("seq");
            let full: String = (0..n_lines).map(|i| format!("line {i}\n")).collect();
            for piece in full.as_bytes().chunks(777) {
                log.push(&plain(std::str::from_utf8(piece).expect("ascii")));
            }
            assert_eq!(log.total_lines(), n_lines);
            assert_eq!(log.path().is_some(), full.len() > MEMORY_LIMIT, "{n_lines}");
            for (offset, limit) in [(0i64, 3u64), (1, 2), (-2, 10), (n_lines as i64 - 1, 5)] {
                let page = log.read(offset, limit).expect("read");
                let first =
                    if offset < 0 { n_lines - offset.unsigned_abs() } else { offset as u64 };
                let expected: String =
                    (first..(first + limit).min(n_lines)).map(|i| format!("line {i}\n")).collect();
                assert_eq!(page.text, expected, "{n_lines} lines, offset {offset}");
                assert_eq!((page.first_line, page.total_lines), (first, n_lines));
                assert!(page.running);
            }
            if n_lines > 2 * INDEX_STEP {
                let page = log.read(2 * INDEX_STEP as i64 + 1, 2).expect("read");
                assert_eq!(page.text, format!("line {}\nline {}\n", 2049, 2050));
            }
            log.finish(3);
            let page = log.read(-1, 1).expect("read");
            assert_eq!((page.running, page.exit_code), (false, Some(3)));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_unfinished_last_line_counts_and_reads_without_a_newline() {
        let dir = scratch("unfinished");
        let store = store(&dir, StoreLimits::default());
        let log = store.begin("printf");
        log.push(&plain("a\nb"));
        assert_eq!(log.total_lines(), 2);
        assert_eq!(log.read(1, 5).expect("read").text, "b");
        let big = "x".repeat(MEMORY_LIMIT * 2);
        log.push(&plain(&big));
        let page = log.read(1, 5).expect("read");
        assert!(page.text.starts_with('b') && !page.text.ends_with('\n'), "{}", page.text.len());
        assert!(page.cut_at_cap || page.text.len() == 1 + big.len());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_ended_command_keeps_no_descriptor_open() {
        let dir = scratch("closed");
        let store = store(&dir, StoreLimits::default());
        let log = store.begin("big");
        log.push(&plain(&"z\n".repeat(MEMORY_LIMIT)));
        let path = log.path().expect("on disk");
        let open = || {
            std::fs::read_dir("/proc/self/fd")
                .expect("fds")
                .flatten()
                .filter(|fd| std::fs::read_link(fd.path()).is_ok_and(|target| target == path))
                .count()
        };
        assert_eq!(open(), 1, "the running command's file is open");
        log.finish(0);
        assert_eq!(open(), 0, "closed once the command ended");
        assert_eq!(log.read(-1, 1).expect("read").text, "z\n");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Follows a log page by page from `offset` 0 as an agent following
    /// "next" would; returns the text read and the last page.
    fn follow(log: &CommandLog) -> (String, LogPage) {
        let mut offset = 0;
        let mut text = String::new();
        for _ in 0..1000 {
            let page = log.read(offset as i64, 1000).expect("read");
            text.push_str(&page.text);
            let next = page.first_line + page.lines;
            if page.rest_unavailable || next >= page.total_lines {
                return (text, page);
            }
            assert!(next > offset, "offset {offset} again: {page:?}");
            offset = next;
        }
        panic!("no end after 1000 pages");
    }

    /// Issue 11, F12: when the output could not be saved, a read past
    /// what was saved says the rest is unavailable, rather than returning
    /// no lines and the offset it was given.
    #[test]
    fn lines_that_could_not_be_saved_are_said_to_be_unavailable() {
        // The directory cannot be made (its parent is a file): only what
        // fits in memory is kept.
        let dir = scratch("unsaved");
        std::fs::write(&dir, "a file, not a directory").expect("write");
        let store = store(&dir.join("output"), StoreLimits::default());
        let log = store.begin("seq");
        let full: String = (0..10_000).map(|i| format!("line {i}\n")).collect();
        for piece in full.as_bytes().chunks(777) {
            log.push(&plain(std::str::from_utf8(piece).expect("ascii")));
        }
        log.finish(0);
        assert_eq!(log.total_lines(), 10_000);
        let (text, last) = follow(&log);
        assert!(last.rest_unavailable, "{last:?}");
        assert!(last.save_error.as_deref().is_some_and(|e| e.contains("Not a directory")));
        assert!(
            full.starts_with(&text) && !text.is_empty(),
            "{:?}",
            &text[text.len().saturating_sub(50)..]
        );
        let far = log.read(5_000, 10).expect("read");
        assert_eq!((far.lines, far.rest_unavailable), (0, true));
        // Lines that were saved read as usual, with no such mark.
        let near = log.read(0, 2).expect("read");
        assert_eq!((near.text.as_str(), near.rest_unavailable), ("line 0\nline 1\n", false));
        let _ = std::fs::remove_file(&dir);
    }

    /// Issue 14: past a size limit, lines that were never saved were
    /// counted, so `offset: -2` returned nothing and the file's cut notice
    /// read as output. Now the lines and offsets are those saved, and what
    /// was not saved is said in bytes and lines, cut anywhere in a piece
    /// and anywhere in a line.
    #[test]
    fn past_a_size_limit_the_lines_are_those_saved() {
        let full: String = (0..10_000).map(|i| format!("line {i}\n")).collect();
        for (per_command, piece) in [(20_000u64, 4096), (20_000, 7), (6, 4096), (8_000, 1 << 20)] {
            let dir = scratch(&format!("limit-{per_command}-{piece}"));
            let spill = SpillStore::new(
                dir.clone(),
                "",
                SpillLimits { per_command, per_server: 1 << 20 },
                None,
            );
            let log = OutputStore::new(spill, "t", StoreLimits::default()).begin("seq");
            for part in full.as_bytes().chunks(piece) {
                log.push(&plain(std::str::from_utf8(part).expect("ascii")));
            }
            log.keep_on_disk();
            let saved = &full[..per_command as usize];
            let saved_lines = saved.split_inclusive('\n').count() as u64;
            let case = format!("limit {per_command}, pieces of {piece}");
            assert_eq!(log.total_lines(), saved_lines, "{case}");
            let (text, last) = follow(&log);
            assert_eq!(text, saved, "{case}");
            assert!(!last.rest_unavailable && last.saved_until.is_some(), "{case}: {last:?}");
            let unsaved = &full[per_command as usize..];
            let split = u64::from(!saved.ends_with('\n'));
            let lines = unsaved.split_inclusive('\n').count() as u64 - split;
            let expected = NotSaved { bytes: unsaved.len() as u64, lines };
            assert_eq!(last.not_saved, Some(expected), "{case}");
            // The last lines saved, the last without the newline it never got.
            let tail = log.read(-2, 10).expect("read");
            let mut lines = saved.split_inclusive('\n').rev().take(2).collect::<Vec<_>>();
            lines.reverse();
            assert_eq!(
                tail.text,
                lines.concat().trim_end_matches('\n').to_owned()
                    + &"\n".repeat(usize::from(split == 0)),
                "{case}"
            );
            assert_eq!(
                (tail.first_line + tail.lines, tail.total_lines),
                (saved_lines, saved_lines),
                "{case}"
            );
            assert_eq!(log.read(saved_lines as i64, 10).expect("read").lines, 0, "{case}");
            // The file says where it stops.
            let path = log.path().expect("a file");
            let on_disk = std::fs::read_to_string(path).expect("read");
            assert!(on_disk.starts_with(saved), "{case}");
            assert_eq!(on_disk.matches("the full output stops here").count(), 1, "{case}");
            let _ = std::fs::remove_dir_all(&dir);
        }
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
        let err = store.get(Some(1)).expect_err("dropped").to_string();
        assert!(err.contains("not kept") && err.contains("to 5"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
#[cfg(test)]
mod paging {
    use super::*;
    use crate::output::SpillLimits;
    use crate::output::tests::plain;

    #[test]
    fn paging_through_a_big_log_returns_every_line_once() {
        let dir =
            std::env::temp_dir().join(format!("shellkeep-store-{}-paging", std::process::id()));
        let spill = SpillStore::new(dir.clone(), "", SpillLimits::default(), None);
        let store = OutputStore::new(spill, "t", StoreLimits::default());
        let log = store.begin("seq");
        let full: String = (1..=200_000).map(|i| format!("build step {i:09}\n")).collect();
        for piece in full.as_bytes().chunks(4096) {
            log.push(&plain(std::str::from_utf8(piece).unwrap()));
        }
        let mut all = String::new();
        let mut offset = 0;
        loop {
            let page = log.read(offset as i64, 5000).unwrap();
            assert_eq!(page.first_line, offset);
            all.push_str(&page.text);
            offset += page.lines;
            if offset >= page.total_lines {
                break;
            }
        }
        assert_eq!(all.len(), full.len());
        assert!(all == full);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[cfg(test)]
mod sink {
    use super::*;
    use crate::output::tests::plain;
    use crate::output::{SpillLimit, SpillLimits};

    fn none() -> Arc<Secrets> {
        Arc::new(Secrets::none())
    }

    /// A scratch directory, removed when dropped.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(name: &str) -> Scratch {
            let dir = std::env::temp_dir().join(format!(
                "shellkeep-sink-{}-{name}-{}",
                std::process::id(),
                crate::private_fs::random_hex(4).expect("random")
            ));
            Scratch(dir)
        }

        fn store(&self, limits: SpillLimits, kept: StoreLimits) -> Arc<OutputStore> {
            OutputStore::new(SpillStore::new(self.0.clone(), "", limits, None), "t", kept)
        }

        /// The files in the directory and their sizes.
        fn files(&self) -> Vec<(PathBuf, u64)> {
            let mut files: Vec<_> = std::fs::read_dir(&self.0)
                .into_iter()
                .flatten()
                .flatten()
                .map(|entry| (entry.path(), entry.metadata().expect("stat").len()))
                .collect();
            files.sort();
            files
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
            let _ = std::fs::remove_file(&self.0);
        }
    }

    /// Every byte of a command's output is written once: a big output
    /// leaves exactly one file, of its size, however many replies showed
    /// parts of it; each cut reply names that file.
    #[test]
    fn a_big_output_is_stored_once_in_its_log() {
        let scratch = Scratch::new("once");
        let store = scratch.store(SpillLimits::default(), StoreLimits::default());
        let mut sink = OutputSink::new(store.begin("seq"), 20, none());
        let full: String = (0..50_000).map(|i| format!("{i}\n")).collect();
        let mut shown = Vec::new();
        for (i, piece) in full.as_bytes().chunks(4096).enumerate() {
            sink.push(std::str::from_utf8(piece).expect("ascii"));
            if i % 20 == 19 {
                shown.push(sink.take_shown());
            }
        }
        shown.push(sink.take_shown());
        sink.finish(0);
        let files = scratch.files();
        assert_eq!(files.len(), 1, "{files:?}");
        assert_eq!(files[0].1, full.len() as u64);
        assert_eq!(std::fs::read_to_string(&files[0].0).expect("read"), full);
        assert!(files[0].0.to_string_lossy().ends_with(".log"));
        for reply in &shown {
            assert!(reply.truncated);
            assert_eq!(reply.full_output_path.as_ref(), Some(&files[0].0));
            assert!(reply.text.contains(&format!("full output in {}", files[0].0.display())));
        }
    }

    /// A short output stays in memory: no file, nothing named.
    #[test]
    fn a_short_output_makes_no_file() {
        let scratch = Scratch::new("short");
        let store = scratch.store(SpillLimits::default(), StoreLimits::default());
        let mut sink = OutputSink::new(store.begin("echo"), 100, none());
        sink.push("hello\n");
        let shown = sink.take_shown();
        assert_eq!(
            (shown.text.as_str(), shown.truncated, shown.full_output_path),
            ("hello\n", false, None)
        );
        assert_eq!(sink.log().read(0, 10).expect("read").text, "hello\n");
        assert!(!scratch.0.exists(), "nothing on disk");
    }

    /// A cut view moves the log to its file at once (even while it would
    /// fit in memory), so the reply can name it.
    #[test]
    fn a_cut_view_names_a_file_even_for_a_small_output() {
        let scratch = Scratch::new("small-cut");
        let store = scratch.store(SpillLimits::default(), StoreLimits::default());
        let mut sink = OutputSink::new(store.begin("seq 100"), 10, none());
        let text: String = (0..100).map(|i| format!("{i}\n")).collect();
        sink.push(&text);
        let shown = sink.take_shown();
        let path = shown.full_output_path.expect("named");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), text);
        use std::os::unix::fs::MetadataExt;
        assert_eq!(std::fs::metadata(&path).expect("stat").mode() & 0o777, 0o600);
    }

    /// Issue 7, 1.4, now counted once: the per-command limit covers a
    /// run's stdout and stderr together, each byte once; past it the file
    /// says where it was cut, and what is shown says so. The files hold at
    /// most the limit, less their cut lines.
    #[test]
    fn the_per_command_limit_counts_each_byte_once() {
        let scratch = Scratch::new("percmd");
        let limits = SpillLimits { per_command: 1000, per_server: 1 << 20 };
        let store = scratch.store(limits, StoreLimits::default());
        let logs = store.begin_run("both");
        let mut stdout = OutputSink::new(logs.stdout, 10, none());
        let mut stderr = OutputSink::new(logs.stderr, 10, none());
        stdout.push(&"a".repeat(600));
        stderr.push(&"é".repeat(150));
        stdout.push(&"b".repeat(600));
        let (out, err) = (stdout.take_shown(), stderr.take_shown());
        let saved_out =
            std::fs::read_to_string(out.full_output_path.as_ref().expect("path")).expect("read");
        let saved_err =
            std::fs::read_to_string(err.full_output_path.as_ref().expect("path")).expect("read");
        assert_eq!(err.full_output_cut, None);
        assert_eq!(saved_err, "é".repeat(150));
        // 600 + 300 bytes so far: the second push of stdout gets 100 more.
        let cut = out.full_output_cut.expect("cut");
        assert_eq!(cut, SpillCut { after_bytes: 700, limit: SpillLimit::PerCommand(1000) });
        let cut_line = "\n[shellkeep: the full output stops here, cut after 700 bytes: the limit \
                        per command of 1000 bytes for saved output was reached.]\n";
        assert_eq!(saved_out, format!("{}{}{cut_line}", "a".repeat(600), "b".repeat(100)));
        assert!(out.text.contains("cut after 700 bytes"), "{}", out.text);
        // Everything on disk: the limit's bytes of output, and the cut line.
        let on_disk: u64 = scratch.files().iter().map(|(_, size)| size).sum();
        assert_eq!(on_disk, 1000 + cut_line.len() as u64);
        // Another command has its own budget.
        let mut other = OutputSink::new(store.begin("other"), 10, none());
        other.push(&"c".repeat(500));
        assert_eq!(other.take_shown().full_output_cut, None);
    }

    #[test]
    fn the_per_server_limit_covers_every_command() {
        let scratch = Scratch::new("perserver");
        let limits = SpillLimits { per_command: 1000, per_server: 1500 };
        let store = scratch.store(limits, StoreLimits::default());
        let shown = |text: &str| {
            let mut sink = OutputSink::new(store.begin("x"), 10, none());
            sink.push(text);
            sink.take_shown()
        };
        assert_eq!(shown(&"a".repeat(1000)).full_output_cut, None);
        let second = shown(&"b".repeat(700));
        assert_eq!(
            second.full_output_cut,
            Some(SpillCut { after_bytes: 500, limit: SpillLimit::PerServer(1500) })
        );
        assert!(second.text.contains("the server's total limit of 1500 bytes"), "{}", second.text);
        let third = shown(&"c".repeat(100));
        let saved = std::fs::read_to_string(third.full_output_path.expect("path")).expect("read");
        assert!(saved.starts_with("\n[shellkeep: the full output stops here, cut after 0 bytes"));
    }

    /// When no file can be made, a cut reply says why and names none.
    #[test]
    fn an_output_that_cannot_be_saved_says_why() {
        let scratch = Scratch::new("unsaved");
        std::fs::write(&scratch.0, "a file, not a directory").expect("write");
        let spill = SpillStore::new(scratch.0.join("output"), "", SpillLimits::default(), None);
        let store = OutputStore::new(spill, "t", StoreLimits::default());
        let mut sink = OutputSink::new(store.begin("x"), 10, none());
        sink.push(&"x".repeat(100));
        let shown = sink.take_shown();
        assert!(shown.truncated);
        assert_eq!(shown.full_output_path, None);
        assert!(shown.text.contains("could not be saved"), "{}", shown.text);
        let error = shown.full_output_error.expect("the error is given");
        assert!(error.contains("Not a directory"), "{error}");
    }

    /// The start of a line an earlier reply showed unfinished is kept in
    /// the log but not shown again; one the reply had to cut makes the
    /// reply where it ends name the saved copy, which holds it whole.
    #[test]
    fn a_line_shown_unfinished_is_kept_once_and_shown_once() {
        let scratch = Scratch::new("line");
        let store = scratch.store(SpillLimits::default(), StoreLimits::default());
        let mut sink = OutputSink::new(store.begin("ask"), 100, none());
        assert_eq!(sink.show_unfinished("answer: ", 100).text, "answer: ");
        assert_eq!(sink.show_unfinished("answer: ", 100).text, "", "shown once");
        sink.push("answer: 42\nnext\n");
        let shown = sink.take_shown();
        assert_eq!((shown.text.as_str(), shown.full_output_path), ("42\nnext\n", None));
        assert_eq!(sink.log().read(0, 10).expect("read").text, "answer: 42\nnext\n");
        let long = "z".repeat(1000);
        assert_eq!(sink.show_unfinished(&long, 100).omitted, 900);
        sink.push(&format!("{long}\n"));
        let shown = sink.take_shown();
        assert_eq!((shown.text.as_str(), shown.truncated), ("\n", false));
        let path = shown.full_output_path.expect("named");
        assert_eq!(
            std::fs::read_to_string(path).expect("read"),
            format!("answer: 42\nnext\n{long}\n")
        );
    }

    /// A full-screen view resets the shown line; progress reads the
    /// screen's line, else the view's last line.
    #[test]
    fn what_is_shown_before_it_is_committed_passes_the_sink() {
        let scratch = Scratch::new("screen");
        let store = scratch.store(SpillLimits::default(), StoreLimits::default());
        let mut sink = OutputSink::new(store.begin("top"), 100, none());
        sink.push("built 3 of 9\n\n");
        assert_eq!(sink.progress_line(String::new()), "built 3 of 9");
        assert_eq!(sink.progress_line("compiling x".into()), "compiling x");
        sink.show_unfinished("> ", 100);
        assert_eq!(sink.show_screen("full\nscreen".into()).0, "full\nscreen");
        assert_eq!(sink.show_unfinished("> ", 100).text, "> ", "shown whole again");
        assert_eq!(sink.log().read(0, 10).expect("read").text, "built 3 of 9\n\n");
    }

    /// A store of runs keeps each run's two streams under its number, and
    /// drops the oldest runs (both files) beyond its retention.
    #[test]
    fn runs_keep_two_streams_and_the_newest_runs() {
        let scratch = Scratch::new("runs");
        let store = scratch
            .store(SpillLimits::default(), StoreLimits { max_commands: 2, max_bytes: 1 << 30 });
        let mut paths = Vec::new();
        for n in 1..=3u64 {
            let logs = store.begin_run(&format!("run {n}"));
            assert_eq!(logs.number, n);
            logs.stdout.push(&plain(&format!("out {n}\n").repeat(MEMORY_LIMIT)));
            logs.stderr.push(&plain(&format!("err {n}\n").repeat(MEMORY_LIMIT)));
            logs.stdout.finish(0);
            logs.stderr.finish(0);
            paths.push([logs.stdout.path().expect("file"), logs.stderr.path().expect("file")]);
        }
        assert!(paths[2][0].to_string_lossy().ends_with(".stdout"), "{:?}", paths[2]);
        assert!(paths[2][1].to_string_lossy().ends_with(".stderr"), "{:?}", paths[2]);
        assert_eq!(store.numbers(), vec![2, 3]);
        assert!(paths[0].iter().all(|path| !path.exists()), "both files of run 1 are deleted");
        assert!(paths[1].iter().chain(&paths[2]).all(|path| path.exists()));
        let err = store.get_stream(Some(3), Stream::Stderr).expect("kept");
        assert_eq!(err.read(-1, 1).expect("read").text, "err 3\n");
        let out = store.get_stream(None, Stream::Stdout).expect("kept");
        assert_eq!(out.read(0, 1).expect("read").text, "out 3\n");
        let gone = store.get_stream(Some(1), Stream::Stderr).expect_err("dropped");
        assert!(matches!(gone, StoreError::NotKept { asked: 1, first: 2, last: 3 }), "{gone}");
        // A terminal command has one stream.
        store.begin("terminal");
        let none = store.get_stream(None, Stream::Stderr).expect_err("no stderr");
        assert!(matches!(none, StoreError::NoStream { number: 4, .. }), "{none}");
    }
}

/// Every path of output passes [`pass`] exactly once, end to end: a real
/// shell's committed text (reply and log, cut and spilled to a file), the
/// unfinished line and the full screen a reply shows, a progress report,
/// what a background job prints between commands, and both streams of a
/// `run` (view and log). In test builds `pass` marks a witness word (see
/// `output::tests`): a path that skipped it shows the word bare, one that
/// passed it twice shows it doubled. The commands spell the word in two
/// halves, so the echo of the typed line never holds it.
#[cfg(test)]
mod one_way_in {
    use std::sync::Mutex;
    use std::time::Duration;

    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::keys::Input;
    use crate::oneshot::{self, RunRequest};
    use crate::output::tests::{PASS_WITNESS, witness_passes};
    use crate::policy::Limits;
    use crate::session::{Call, Progress, ProgressHook, Reply, Request, Session, SessionConfig};

    /// The shell's words for printing the witness (`printf` of its halves).
    const PRINT: &str = "printf 'pass-%s' witness-7f3a";

    /// A scratch directory, removed when dropped.
    struct Scratch(PathBuf);

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn scratch(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!(
            "shellkeep-one-way-{}-{name}-{}",
            std::process::id(),
            crate::private_fs::random_hex(4).expect("random")
        ));
        std::fs::create_dir_all(dir.join("work")).expect("scratch");
        Scratch(dir)
    }

    /// Asserts that `text` (named `surface`) shows the witness `times`
    /// times, each marked exactly once.
    fn passed_once(surface: &str, text: &str, times: usize) {
        assert_eq!(
            witness_passes(text),
            (times, 0, 0),
            "{surface}: (passed once, more than once, never) for {PASS_WITNESS} in {text:?}"
        );
    }

    async fn call(session: &Session, request: Request) -> Reply {
        session.execute(request, CancellationToken::new()).await.expect("the call succeeds")
    }

    fn command(text: &str) -> Request {
        Request {
            call: Call::Run { command: text.into() },
            timeout: Some(Duration::from_secs(20)),
            ..Request::default()
        }
    }

    fn input(text: &str) -> Request {
        Request { call: Call::Input(Input::Text(text.into())), ..command(text) }
    }

    /// The whole log of the session's latest command.
    fn logged(session: &Session) -> String {
        let log = session.output().get(None).expect("a command in the store");
        let mut text = String::new();
        let mut offset = 0;
        loop {
            let page = log.read(offset as i64, MAX_READ_LINES).expect("the log reads");
            text.push_str(&page.text);
            offset += page.lines;
            if offset >= page.total_lines {
                return text;
            }
        }
    }

    /// Takes the session's last words until `done` holds for all taken so
    /// far (what background jobs print reaches the session on the reader
    /// thread, and its lines are committed when looked at); fails after
    /// 20 s.
    async fn wait_for_last_words(session: &Session, done: impl Fn(&str) -> bool) -> String {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let mut taken = String::new();
        while !done(&taken) {
            assert!(std::time::Instant::now() < deadline, "not within 20 s: {taken:?}");
            tokio::time::sleep(Duration::from_millis(10)).await;
            // Lines stay on the screen until something commits them.
            session.commit_screen();
            taken.push_str(&session.last_words().await.output);
        }
        taken
    }

    #[tokio::test]
    async fn every_path_of_output_passes_the_one_place_once() {
        let dir = scratch("terminal");
        let mut config = SessionConfig::new(
            "witness",
            dir.0.join("work"),
            dir.0.join("private"),
            dir.0.join("spill"),
        );
        config.user_rc = None;
        config.output_cap = 2_000;
        let session = Session::new(config);
        session.start().await.expect("the shell starts");

        // Committed text, cut in the reply and spilled to the log's file.
        let reply =
            call(&session, command(&format!("{PRINT}; echo; seq 1 20000; {PRINT}; echo"))).await;
        assert!(!reply.is_running(), "{reply:?}");
        assert!(reply.output.truncated, "{reply:?}");
        passed_once("a cut reply", &reply.output.text, 2);
        passed_once("a spilled log", &logged(&session), 2);

        // The unfinished line a reply shows while the program waits; the
        // rest of the line, once committed, is not shown again.
        let reply = call(&session, command(&format!("{PRINT}; read x; echo ' end'"))).await;
        assert!(reply.is_running(), "{reply:?}");
        passed_once("an unfinished line", &reply.output.text, 1);
        let reply = call(&session, input("y")).await;
        assert!(!reply.is_running(), "{reply:?}");
        passed_once("the rest of the line", &reply.output.text, 0);
        passed_once("its log", &logged(&session), 1);

        // A full-screen program's screen.
        let reply = call(
            &session,
            command(&format!("printf '\\e[?1049h'; {PRINT}; read x; printf '\\e[?1049l'")),
        )
        .await;
        assert!(reply.is_running(), "{reply:?}");
        passed_once("a full screen", &reply.output.text, 1);
        call(&session, input("y")).await;

        // A progress report shows the line the command is on.
        let lines = std::sync::Arc::new(Mutex::new(String::new()));
        let heard = std::sync::Arc::clone(&lines);
        let hook = ProgressHook::new(move |progress: Progress| {
            heard.lock().expect("lock").push_str(&format!("{}\n", progress.line));
        });
        let reply = call(
            &session,
            Request { progress: Some(hook), ..command(&format!("{PRINT}; sleep 1.5; echo")) },
        )
        .await;
        assert!(!reply.is_running(), "{reply:?}");
        let reports = lines.lock().expect("lock").clone();
        let shown = reports.lines().filter(|line| !line.is_empty()).count();
        assert!(shown > 0, "no progress report showed a line: {reports:?}");
        passed_once("progress reports", &reports, shown);
        passed_once("the reply after them", &reply.output.text, 1);

        // What a background job prints between commands (once told to:
        // after the command that started it ended).
        let go = dir.0.join("work/go");
        let job = format!("(while [ ! -e go ]; do sleep 0.02; done; {PRINT}; echo) &");
        let reply = call(&session, command(&job)).await;
        assert!(!reply.is_running(), "{reply:?}");
        std::fs::write(&go, "").expect("go");
        let idle = wait_for_last_words(&session, |taken| taken.contains(PASS_WITNESS)).await;
        passed_once("background output", &idle, 1);
        session.close().await;

        // Both streams of a `run`: the cut view and the complete log.
        let run_dir = scratch("run");
        let limits = Limits { exec: Duration::from_secs(20), no_output: Duration::from_secs(20) };
        let both = format!("{PRINT}; echo; seq 1 20000; {PRINT}; echo; {PRINT} >&2; echo >&2");
        let request =
            RunRequest { stream_cap: 2_000, ..RunRequest::new(both, limits, &run_dir.0, "run") };
        let store = Arc::clone(&request.output);
        let outcome = oneshot::run(request, CancellationToken::new()).await;
        assert!(outcome.stdout.truncated, "{outcome:?}");
        passed_once("run's cut stdout", &outcome.stdout.text, 2);
        passed_once("run's stderr", &outcome.stderr.text, 1);
        let stdout = store.get_stream(Some(outcome.number), Stream::Stdout).expect("stdout");
        let ends = [stdout.read(0, 1), stdout.read(-1, 1)].map(|page| page.expect("reads").text);
        passed_once("run's stdout log", &ends.concat(), 2);
        let stderr = store.get_stream(Some(outcome.number), Stream::Stderr).expect("stderr");
        passed_once("run's stderr log", &stderr.read(0, 10).expect("reads").text, 1);
    }

    /// A secret registered for a session and for `run`, and the forms of it
    /// that must never appear: the value, its base64 at each alignment, its
    /// URL and JSON encodings.
    const SECRET: &str = "Zq9!secret-VALUE_2026/xyz";

    fn forbidden() -> Vec<String> {
        let mut all = vec![SECRET.to_owned(), crate::mask::url_encode(SECRET)];
        all.extend((0..3).map(|k| crate::mask::base64_aligned(SECRET.as_bytes(), k)));
        let json = serde_json::to_string(SECRET).expect("json");
        all.push(json[1..json.len() - 1].to_owned());
        all
    }

    /// Asserts that `text` (named `surface`) holds no form of the secret.
    fn hidden(surface: &str, text: &str) {
        for form in forbidden() {
            assert!(!text.contains(&form), "{surface} shows {form:?}: {text:?}");
        }
    }

    fn secrets() -> Arc<crate::mask::Secrets> {
        Arc::new(crate::mask::Secrets::new([("T".to_owned(), SECRET.to_owned())], true))
    }

    /// Every file under `dir`, read.
    fn files_under(dir: &std::path::Path) -> Vec<(PathBuf, Vec<u8>)> {
        let mut found = Vec::new();
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                found.extend(files_under(&path));
            } else if let Ok(bytes) = std::fs::read(&path) {
                found.push((path, bytes));
            }
        }
        found
    }

    /// A registered secret printed by terminal commands in every way the
    /// issue lists (in pieces with a pause, redrawn by `\r`, on a full
    /// screen, by a background job, in the middle of 5 MB, across the
    /// renderer's line limit, base64-encoded) and by a `run` (stdout and
    /// stderr, in pieces) never appears raw or encoded in a reply, a
    /// progress line, a log or any file written; `$T` still works.
    #[tokio::test]
    async fn a_registered_secret_never_appears() {
        let dir = scratch("secret");
        let mut config = SessionConfig::new(
            "secret",
            dir.0.join("work"),
            dir.0.join("private"),
            dir.0.join("spill"),
        );
        config.user_rc = None;
        config.output_cap = 2_000;
        config.env = vec![("T".to_owned(), SECRET.to_owned())];
        config.secrets = secrets();
        let (rows, cols) = (usize::from(config.rows), usize::from(config.cols));
        let session = Session::new(config);
        session.start().await.expect("the shell starts");
        let mut seen = String::new();
        let mut masked = 0;
        let mut check = |surface: &str, reply: &Reply| {
            hidden(surface, &reply.output.text);
            seen.push_str(&reply.output.text);
            masked += reply.output.masked;
        };

        // A command that holds the secret itself is logged masked.
        let reply = call(&session, command(&format!("echo '{SECRET}' >/dev/null"))).await;
        check("a command holding it", &reply);
        let page = session.output().get(None).expect("kept").read(0, 1).expect("reads");
        hidden("its logged command", &page.command);

        // In pieces with a pause; and the secret still works in commands.
        let reply = call(
            &session,
            command(r#"printf '%s' "${T:0:5}"; sleep 0.3; printf '%s\n' "${T:5}"; echo ${#T}"#),
        )
        .await;
        check("a split printf", &reply);
        assert_eq!(reply.output.text, format!("<secret-hidden>\n{}\n", SECRET.len()));
        assert_eq!(reply.output.masked, 1);

        // A credential's shape, registered nowhere, split by a pause.
        let token = "0123456789abcdefghijABCDEFGHIJ012345";
        let shaped =
            format!("printf 'x ghp_{}'; sleep 0.3; printf '{} y\\n'", &token[..9], &token[9..]);
        let reply = call(&session, command(&shaped)).await;
        assert_eq!(reply.output.text, "x <secret-hidden> y\n");
        check("a GitHub token", &reply);

        // Encoded.
        let reply = call(
            &session,
            command(
                r#"for p in '' u us 'user:'; do printf '%s%s' "$p" "$T" | base64 -w0; echo; done; printf '%s' "$T" | jq -Rs . 2>/dev/null; python3 -c 'import os,urllib.parse;print(urllib.parse.quote(os.environ["T"],safe=""))' 2>/dev/null"#,
            ),
        )
        .await;
        check("encodings", &reply);

        // A progress line redrawn over it, reported while it runs.
        let lines = std::sync::Arc::new(Mutex::new(String::new()));
        let heard = std::sync::Arc::clone(&lines);
        let hook = ProgressHook::new(move |progress: Progress| {
            heard.lock().expect("lock").push_str(&format!("{}\n", progress.line));
        });
        let redraw =
            r#"for i in 1 2 3 4 5 6; do printf '\rstep %s %s' $i "$T"; sleep 0.3; done; echo"#;
        let reply = call(&session, Request { progress: Some(hook), ..command(redraw) }).await;
        check("a redrawn line", &reply);
        let reports = lines.lock().expect("lock").clone();
        assert!(reports.contains("<secret-hidden>"), "no progress showed the line: {reports:?}");
        hidden("progress", &reports);

        // A full-screen view.
        let reply = call(
            &session,
            command(r#"printf '\e[?1049h'; printf 'env T=%s\n' "$T"; read x; printf '\e[?1049l'"#),
        )
        .await;
        assert!(reply.is_running() && reply.screen, "{reply:?}");
        assert!(reply.output.text.contains("<secret-hidden>"), "{reply:?}");
        check("a full screen", &reply);
        check("after it", &call(&session, input("q")).await);

        // Longer than the window, shown unfinished, then ended. The rows of
        // a line that scroll off the window are final: the line is cut at
        // the start of the first row still in the window, and the secret
        // straddles that place.
        let cut = 20 * cols;
        let long = format!(
            r#"printf '%*s' {} '' | tr ' ' a; printf '%s' "$T"; printf '%*s' {} '' | tr ' ' b; read x; echo"#,
            cut - 10,
            rows * cols - SECRET.len(),
        );
        let reply = call(&session, command(&long)).await;
        assert!(reply.is_running(), "{reply:?}");
        // The line was cut inside the secret: its start is held, and shown
        // masked with the rest of the line.
        assert!(reply.output.text.contains("aaa<secret-hidden>bbb"), "{reply:?}");
        assert!(!reply.output.text.contains("2026/xyz"), "{reply:?}");
        check("an unfinished long line", &reply);
        check("its end", &call(&session, input("y")).await);
        hidden("its log", &logged(&session));

        // 5 MB with the secret in the middle.
        let big = r#"seq 1 400000; printf 'mid %s\n' "$T"; seq 1 400000"#;
        let reply = call(&session, command(big)).await;
        assert!(!reply.is_running() && reply.output.truncated, "{reply:?}");
        check("a 5 MB output", &reply);
        let log = logged(&session);
        assert!(log.len() > 5_000_000 && log.contains("mid <secret-hidden>\n"), "{}", log.len());
        hidden("its log", &log);

        // A background job's output, between commands.
        let job = r#"(sleep 0.3; printf 'bg %s\n' "$T") &"#;
        check("starting a job", &call(&session, command(job)).await);
        let idle = wait_for_last_words(&session, |taken| taken.contains("bg ")).await;
        assert!(idle.contains("bg <secret-hidden>"), "{idle:?}");
        hidden("background output", &idle);
        assert!(masked >= 8, "masks counted: {masked}");
        session.close().await;

        // Both streams of a `run`, in pieces.
        let run_dir = scratch("secret-run");
        let limits = Limits { exec: Duration::from_secs(20), no_output: Duration::from_secs(20) };
        let both = r#"printf '%s' "${T:0:7}"; sleep 0.3; printf '%s\n' "${T:7}"; printf 'err %s\n' "$T" >&2; seq 1 3000; printf '%s' "$T" | base64"#;
        let request = RunRequest {
            stream_cap: 2_000,
            env: vec![("T".to_owned(), SECRET.to_owned())],
            secrets: secrets(),
            ..RunRequest::new(both, limits, &run_dir.0, "run")
        };
        let store = Arc::clone(&request.output);
        let outcome = oneshot::run(request, CancellationToken::new()).await;
        assert!(outcome.stdout.text.starts_with("<secret-hidden>\n1\n"), "{outcome:?}");
        assert_eq!(outcome.stderr.text, "err <secret-hidden>\n");
        hidden("run's stdout", &outcome.stdout.text);
        hidden("run's stderr", &outcome.stderr.text);
        assert!(outcome.stdout.masked >= 1 && outcome.stderr.masked == 1, "{outcome:?}");
        for stream in [Stream::Stdout, Stream::Stderr] {
            let log = store.get_stream(Some(outcome.number), stream).expect("kept");
            hidden("run's log", &log.read(0, MAX_READ_LINES).expect("reads").text);
        }
        // A command that holds the secret itself is logged masked.
        let literal = format!("printf '%s\\n' '{SECRET}'");
        let request = RunRequest {
            secrets: secrets(),
            output: Arc::clone(&store),
            ..RunRequest::new(literal, limits, &run_dir.0, "run")
        };
        let outcome = oneshot::run(request, CancellationToken::new()).await;
        assert_eq!(outcome.stdout.text, "<secret-hidden>\n");
        let page = store.get(Some(outcome.number)).expect("kept").read(0, 10).expect("reads");
        hidden("run's logged command", &page.command);
        drop(store);

        // Every file written: the command logs, the shell's own files.
        for root in [&dir.0, &run_dir.0] {
            for (path, bytes) in files_under(root) {
                hidden(&path.display().to_string(), &String::from_utf8_lossy(&bytes));
            }
        }
        assert!(seen.contains("<secret-hidden>"));
    }
}
