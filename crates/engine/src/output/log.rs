//! The complete output of one stream of one command, kept exactly once, so
//! that it can be read back by line while the command runs and after it
//! ended. A [`CommandLog`] stays in memory while small; past
//! [`MEMORY_LIMIT`] bytes, or when the sink asks, it moves to a private file
//! of the spill store under the byte limits (past a limit the file ends with
//! a line saying so, and what comes after is only counted, [`NotSaved`]). A
//! sparse index (every [`INDEX_STEP`]th line) lets a read start near its
//! first line.
//!
//! Invariant: `CommandLog::write` is the one place a full-output file is
//! written, and it writes only text that passed `pass`.
//!
//! Bounds: memory per log is at most [`MEMORY_LIMIT`] bytes, its index and a
//! 64 KiB write buffer; a read returns at most [`READ_CAP`] characters. It
//! does not decide when a log moves to its file, nor word replies.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

use super::measure::{count_chars, count_lines};
use super::pass::Passed;
use super::spill::{CommandSpill, Saved, SpillCut};

/// Bytes of a command's output kept in memory before it moves to a file.
pub(super) const MEMORY_LIMIT: usize = 8 * 1024;

/// One index entry per this many lines.
pub(super) const INDEX_STEP: u64 = 1024;

/// The most characters one read returns; a longer line is cut.
pub const READ_CAP: usize = 30_000;

/// The most lines one read returns.
pub const MAX_READ_LINES: u64 = 5_000;

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

/// Why a read could not be served: data for the server to word (its
/// `Display` is for logs).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// No command has run in the session (or no `run` was kept) yet.
    #[error("no command kept yet")]
    Empty,
    /// The command number is not (or no longer) kept.
    #[error("command {asked} not kept (kept: {first} to {last})")]
    NotKept {
        /// The number asked for.
        asked: u64,
        /// The oldest kept.
        first: u64,
        /// The newest.
        last: u64,
    },
    /// The command has no such stream (a terminal command has only one).
    #[error("command {number} has no {} stream", stream.as_str())]
    NoStream {
        /// The command.
        number: u64,
        /// The stream asked for.
        stream: Stream,
    },
    /// The file could not be read.
    #[error("reading the output of command {number} from {path}: {error}")]
    Unreadable {
        /// The command.
        number: u64,
        /// Its file.
        path: PathBuf,
        /// What went wrong.
        error: String,
    },
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
    /// The empty log of command `number` (`command`, cut to 200
    /// characters), writing its file `<stem>-<tag>.<extension>` through
    /// `budget` once it needs one.
    pub(super) fn new(
        number: u64,
        command: String,
        budget: CommandSpill,
        stem: String,
        extension: &'static str,
    ) -> CommandLog {
        CommandLog {
            number,
            command,
            budget,
            stem,
            extension,
            inner: Mutex::new(LogInner::default()),
        }
    }

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

    /// Appends `text`; only `OutputSink::push` calls it.
    pub(super) fn push(&self, text: &Passed<'_>) {
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
    pub(super) fn flush(&self) {
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
    /// `tail -n`), at most `limit` of them and [`READ_CAP`] characters: from
    /// memory, or from the file through the index.
    pub fn read(&self, offset: i64, limit: u64) -> Result<LogPage, StoreError> {
        let mut inner = self.lock();
        let mut page = self.page_at(&inner, offset);
        if page.first_line >= page.total_lines {
            return Ok(page);
        }
        // Never past the lines counted: a file cut at a limit ends with a
        // line of ours saying so, which is not output.
        let limit = limit.clamp(1, MAX_READ_LINES).min(page.total_lines - page.first_line);
        match file_start(&mut inner, &mut page) {
            None => {
                let start = nth_line_start(&inner.memory, page.first_line);
                collect_lines(&mut page, inner.memory[start..].split_inclusive('\n'), limit);
            }
            Some(from) => {
                // The file is read without the lock: writers go on meanwhile.
                drop(inner);
                self.read_file(&from, &mut page, limit)?;
            }
        }
        mark_end(&mut page, limit);
        Ok(page)
    }

    /// An empty page of the log as it is now, from the line `offset` names
    /// (a negative one counts from the end).
    fn page_at(&self, inner: &LogInner, offset: i64) -> LogPage {
        let total = total_lines(inner);
        let first = if offset < 0 {
            total.saturating_sub(offset.unsigned_abs())
        } else {
            (offset as u64).min(total)
        };
        LogPage {
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
            not_saved: not_saved_summary(inner),
            save_error: inner.error.clone(),
            rest_unavailable: false,
            path: inner.file.as_ref().map(|(path, _)| path.clone()),
        }
    }

    /// Reads `page` from the file, from the indexed line `from` names: skips
    /// to the page's first line, then takes up to `limit` lines (each kept to
    /// about four times [`READ_CAP`] bytes, so memory stays bounded).
    fn read_file(
        &self,
        from: &FileStart,
        page: &mut LogPage,
        limit: u64,
    ) -> Result<(), StoreError> {
        let unreadable = |error: std::io::Error| StoreError::Unreadable {
            number: self.number,
            path: from.path.clone(),
            error: error.to_string(),
        };
        let mut file = File::open(&from.path).map_err(unreadable)?;
        file.seek(SeekFrom::Start(from.byte)).map_err(unreadable)?;
        let mut reader = BufReader::with_capacity(64 * 1024, file);
        for _ in from.line..page.first_line {
            if read_line_bounded(&mut reader, 0).map_err(unreadable)?.is_none() {
                break;
            }
        }
        let mut texts = Vec::new();
        let mut bytes_read = 0;
        while (texts.len() as u64) < limit && bytes_read <= READ_CAP * 4 {
            let line = read_line_bounded(&mut reader, READ_CAP * 4 + 4).map_err(unreadable)?;
            let Some(mut bytes) = line else { break };
            bytes.push(b'\n');
            bytes_read += bytes.len();
            texts.push(String::from_utf8_lossy(&bytes).into_owned());
        }
        collect_lines(page, texts.iter().map(String::as_str), limit);
        // The last line of a running command may lack its newline.
        if page.first_line + page.lines == page.total_lines
            && !from.ends_with_newline
            && !page.cut_at_cap
        {
            page.text.pop();
        }
        Ok(())
    }

    /// Drops the output and deletes its file (retention).
    pub(super) fn discard(&self) {
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
                    inner.newlines = count_lines(saved.as_bytes()) as u64;
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
            let line = format!("\n[shellkeep: the full output stops here, {}.]\n", cut.in_output());
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
    unsaved.newlines += count_lines(text.as_bytes()) as u64;
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

/// Where a read of the file starts: the nearest indexed line at or before
/// the page's first one, and what the log knew of its end then.
struct FileStart {
    /// The file.
    path: PathBuf,
    /// The indexed line.
    line: u64,
    /// Its byte offset.
    byte: u64,
    /// Whether the log ended with a newline when the read began.
    ends_with_newline: bool,
}

/// Where a read of `page` starts in the log's file, or `None` while the log
/// is in memory. What is buffered is written out first; a failed flush (the
/// disk is full) ends what the file holds, and what it holds can still be
/// read.
fn file_start(inner: &mut LogInner, page: &mut LogPage) -> Option<FileStart> {
    let (path, writer) = inner.file.as_mut()?;
    if inner.error.is_none()
        && let Some(writer) = writer
        && let Err(err) = writer.flush()
    {
        inner.error = Some(err.to_string());
        page.save_error = inner.error.clone();
    }
    let k = (page.first_line / INDEX_STEP) as usize;
    let (line, byte) = match k.checked_sub(1).and_then(|i| inner.index.get(i)) {
        Some(&byte) => (k as u64 * INDEX_STEP, byte),
        None => (0, 0),
    };
    Some(FileStart { path: path.clone(), line, byte, ends_with_newline: inner.ends_with_newline })
}

/// Marks `page` (read with a line `limit`) as ending where the saved output
/// ends: a page that ends before the lines counted, though neither its line
/// limit nor its character cap stopped it, met the end of what was saved
/// (a limit or an error stopped the file).
fn mark_end(page: &mut LogPage, limit: u64) {
    page.rest_unavailable = (page.saved_until.is_some() || page.save_error.is_some())
        && !page.cut_at_cap
        && page.lines < limit
        && page.first_line + page.lines < page.total_lines;
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
    use crate::output::pass::tests::plain;
    use crate::output::store::tests::{scratch, store};
    use crate::output::{OutputStore, SpillLimits, SpillStore, StoreLimits};

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
        // The line (under the cap) comes whole from the file, still
        // without a newline.
        assert!(big.len() + 1 < READ_CAP, "the line must be under the cap");
        assert!(!page.cut_at_cap);
        assert_eq!((page.lines, page.total_lines), (1, 2));
        assert!(page.text == format!("b{big}"), "{}", page.text.len());
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
}

#[cfg(test)]
mod paging {
    use crate::output::pass::tests::plain;
    use crate::output::{OutputStore, SpillLimits, SpillStore, StoreLimits};

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
