//! Reading the log back: `shellkeep audit`, one line per command of a log
//! and its rotations, and the bounded tail a starting server reads.
//!
//! It writes nothing. It holds that a command whose call handed control
//! back while it ran shows how it ended as far as the log tells: the end a
//! later call on its session reported, else a close or reset of that
//! session, else its server's fate (`server_died`, `server_ended`).

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufRead, Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use serde::Deserialize;

use super::{AuditQuery, MAX_KEEP, default_log, parse_rfc3339};

/// `shellkeep audit`: prints one line per command of `query.file` and its
/// rotations (time, session, status, exit code, duration, command), oldest
/// first. A command whose call handed control back while it ran shows the
/// end a later call on its session reported.
pub(crate) fn print(query: &AuditQuery, out: &mut impl Write) -> anyhow::Result<()> {
    let since = query.since.as_deref().map(parse_span).transpose()?;
    let now = SystemTime::now();
    let cutoff = since.map(|span| now.checked_sub(span).unwrap_or(UNIX_EPOCH));
    let file = match &query.file {
        Some(file) => file.clone(),
        None => default_log().context(
            "no audit log named, and no default one (neither XDG_STATE_HOME nor HOME is set): \
             name the file",
        )?,
    };
    let records = read_all(&file)?;
    for row in rows(&records) {
        let started = row.time.as_deref().and_then(parse_rfc3339);
        if let (Some(cutoff), Some(started)) = (cutoff, started)
            && started < cutoff
        {
            continue;
        }
        if query.failed && !row.failed() {
            continue;
        }
        writeln!(out, "{}", row.format())?;
    }
    Ok(())
}

/// Every audit line of `file` and its rotations, oldest first; lines that
/// are not audit lines are skipped, and counted in one warning.
fn read_all(file: &Path) -> anyhow::Result<Vec<Record>> {
    let mut records = Vec::new();
    let mut unreadable = 0;
    for path in log_files(file)? {
        let file = File::open(&path).with_context(|| format!("cannot read {}", path.display()))?;
        for line in io::BufReader::new(file).lines() {
            let line = line.with_context(|| format!("cannot read {}", path.display()))?;
            match serde_json::from_str::<Record>(&line) {
                Ok(record) => records.push(record),
                Err(_) => unreadable += 1,
            }
        }
    }
    if unreadable > 0 {
        tracing::warn!("{unreadable} lines of the audit log are not audit lines; skipped");
    }
    Ok(records)
}

/// `file`'s rotations, oldest first, then `file` itself.
pub(super) fn log_files(file: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for n in 1..=MAX_KEEP {
        let mut name = file.as_os_str().to_owned();
        name.push(format!(".{n}"));
        let path = PathBuf::from(name);
        if !path.exists() {
            break;
        }
        files.push(path);
    }
    files.reverse();
    anyhow::ensure!(
        file.exists() || !files.is_empty(),
        "{} does not exist: give the file the server's --audit-log names",
        file.display()
    );
    if file.exists() {
        files.push(file.to_owned());
    }
    Ok(files)
}

/// One line of the log as read back.
#[derive(Debug, Clone, Default, Deserialize)]
pub(super) struct Record {
    pub(super) time: Option<String>,
    pub(super) event: String,
    pub(super) id: String,
    #[serde(default)]
    pub(super) tool: String,
    #[serde(default)]
    pub(super) call: String,
    pub(super) session: Option<String>,
    pub(super) command: Option<String>,
    pub(super) key: Option<String>,
    pub(super) input_bytes: Option<u64>,
    pub(super) status: Option<String>,
    pub(super) exit_code: Option<i32>,
    pub(super) duration_ms: Option<u64>,
    pub(super) command_number: Option<u64>,
    pub(super) pid: Option<u32>,
    pub(super) pid_start: Option<u64>,
    pub(super) boot_id: Option<String>,
    pub(super) full_output_dir: Option<String>,
    pub(super) output_prefix: Option<String>,
}

impl Record {
    /// The server that wrote it: the part of the id before the dash.
    pub(super) fn server(&self) -> &str {
        self.id.split('-').next().unwrap_or("")
    }
}

/// One command as `shellkeep audit` prints it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Row {
    /// The server that ran it (not printed).
    pub(super) server: String,
    /// The kind of call that started it (not printed).
    pub(super) call: String,
    pub(super) time: Option<String>,
    pub(super) session: String,
    pub(super) status: String,
    pub(super) exit_code: Option<i32>,
    pub(super) duration_ms: Option<u64>,
    pub(super) command: String,
}

impl Row {
    /// Whether it failed: a non-zero exit code, or a status that is not a
    /// success (killed, timeout, error, not executed, refused, cancelled,
    /// integration damaged).
    pub(super) fn failed(&self) -> bool {
        let fine = [
            "completed",
            "success",
            "idle",
            "closed",
            "reset",
            "running",
            "waiting_for_input",
            "incomplete",
            "unfinished",
            "server_ended",
        ];
        self.exit_code.is_some_and(|code| code != 0) || !fine.contains(&self.status.as_str())
    }

    /// Whether it runs a command (not input, a key, a poll or a close).
    pub(super) fn is_command(&self) -> bool {
        matches!(self.call.as_str(), "command" | "background" | "run")
    }

    /// Whether, as far as the log says, it had not ended.
    pub(super) fn is_open(&self) -> bool {
        matches!(self.status.as_str(), "running" | "waiting_for_input" | "unfinished")
    }

    fn format(&self) -> String {
        let exit = self.exit_code.map_or_else(|| "-".to_owned(), |code| code.to_string());
        let duration = self
            .duration_ms
            .map_or_else(|| "-".to_owned(), |ms| format!("{:.1}s", ms as f64 / 1000.0));
        format!(
            "{:<24} {:<12} {:<19} {:>4} {:>8}  {}",
            self.time.as_deref().unwrap_or("-"),
            self.session,
            self.status,
            exit,
            duration,
            self.command.replace('\n', "\\n")
        )
    }
}

/// The rows `records` make: one per call that runs something (polls only
/// tell how an earlier command ended), in the order the calls started.
///
/// A command whose last end said it was still running takes the end a
/// later call on its session reported (a poll, input, a background job's
/// end line); else a later `session_close` or `reset` of its session ended
/// it (`closed`, `reset`, timed to that call's end); else its server's fate
/// if the log has it (`server_died`, `server_ended`).
pub(super) fn rows(records: &[Record]) -> Vec<Row> {
    let index = CallIndex::new(records);
    index.order.iter().filter_map(|id| index.row(id)).collect()
}

/// What the log says of each call, gathered in one pass over its lines.
#[derive(Default)]
struct CallIndex<'a> {
    /// Call ids in the order their first line came.
    order: Vec<&'a str>,
    /// Where each call's first line is in the log.
    first_index: HashMap<&'a str, usize>,
    starts: HashMap<&'a str, &'a Record>,
    ends: HashMap<&'a str, &'a Record>,
    job_ends: HashMap<&'a str, &'a Record>,
    /// (server, session, command number) → the last end that says how the
    /// command finished.
    finished: HashMap<(&'a str, &'a str, u64), &'a Record>,
    /// (server, session) → the calls that closed or reset it, in order.
    stops: HashMap<(&'a str, &'a str), Vec<(usize, &'a Record)>>,
    /// server → how it ended.
    fates: HashMap<&'a str, &'static str>,
}

impl<'a> CallIndex<'a> {
    /// The index of `records`, oldest first.
    fn new(records: &'a [Record]) -> CallIndex<'a> {
        let mut index = CallIndex::default();
        for (at, record) in records.iter().enumerate() {
            index.note(at, record);
        }
        index
    }

    /// Takes in `record`, the `at`-th line of the log.
    fn note(&mut self, at: usize, record: &'a Record) {
        let id = record.id.as_str();
        match record.event.as_str() {
            "start" | "end" if !self.first_index.contains_key(id) => {
                self.first_index.insert(id, at);
                self.order.push(id);
            }
            _ => {}
        }
        match record.event.as_str() {
            "start" => {
                self.starts.insert(id, record);
            }
            "end" => self.note_end(at, record),
            "job_end" => {
                self.job_ends.insert(id, record);
            }
            "server_died" => {
                self.fates.insert(record.server(), "server_died");
            }
            "server_end" => {
                self.fates.entry(record.server()).or_insert("server_ended");
            }
            _ => {}
        }
    }

    /// Takes in an `end` line: the call's end, how its command finished,
    /// and whether it closed or reset its session.
    fn note_end(&mut self, at: usize, record: &'a Record) {
        self.ends.insert(record.id.as_str(), record);
        if let (Some(session), Some(number), Some("completed" | "killed")) =
            (&record.session, record.command_number, record.status.as_deref())
        {
            self.finished.insert((record.server(), session.as_str(), number), record);
        }
        let closed = record.tool == "session_close"
            && matches!(record.status.as_deref(), Some("closed" | "reset"));
        let reset = record.call == "reset" && record.status.as_deref() == Some("idle");
        if let Some(session) = record.session.as_deref().filter(|_| closed || reset) {
            self.stops.entry((record.server(), session)).or_default().push((at, record));
        }
    }

    /// The row of call `id`, unless it is a poll.
    fn row(&self, id: &str) -> Option<Row> {
        let first = self.starts.get(id).or(self.ends.get(id)).copied()?;
        if first.call == "poll" {
            return None;
        }
        let end = self.last_end(id);
        let mut row = Row {
            server: first.server().to_owned(),
            call: first.call.clone(),
            time: first.time.clone(),
            session: match first.tool.as_str() {
                "run" => "(run)".to_owned(),
                _ => first.session.clone().unwrap_or_default(),
            },
            status: end
                .and_then(|end| end.status.clone())
                .unwrap_or_else(|| "unfinished".to_owned()),
            exit_code: end.and_then(|end| end.exit_code),
            duration_ms: end.and_then(|end| end.duration_ms),
            command: command_text(first),
        };
        if row.is_open() {
            self.settle(&mut row, id, first);
        }
        Some(row)
    }

    /// The end that says most of how call `id` ended: a background job's
    /// end line, else its own end, replaced by a later end of its command
    /// if its own said it was still running.
    fn last_end(&self, id: &str) -> Option<&'a Record> {
        let end = self.job_ends.get(id).or(self.ends.get(id)).copied()?;
        Some(match (&end.session, end.command_number, end.status.as_deref()) {
            (Some(session), Some(number), Some("running" | "waiting_for_input")) => {
                self.finished.get(&(end.server(), session.as_str(), number)).copied().unwrap_or(end)
            }
            _ => end,
        })
    }

    /// Ends the open `row` of call `id` (started by `first`) by a later
    /// close or reset of its session, else by its server's fate.
    fn settle(&self, row: &mut Row, id: &str, first: &Record) {
        let since = self.first_index.get(id).copied().unwrap_or(0);
        let stop = first.session.as_deref().and_then(|session| {
            self.stops.get(&(first.server(), session))?.iter().find(|(at, _)| *at > since)
        });
        if let Some((_, stop)) = stop {
            row.status = match stop.status.as_deref() {
                Some("closed") => "closed".to_owned(),
                _ => "reset".to_owned(),
            };
            row.exit_code = None;
            row.duration_ms = between(first.time.as_deref(), stop.time.as_deref());
        } else if let Some(fate) = self.fates.get(first.server()) {
            row.status = (*fate).to_owned();
            row.exit_code = None;
            row.duration_ms = None;
        }
    }
}

/// What a row shows of the call `first` starts: its command, else the key
/// it sent, else the size of its input, else the kind of call.
fn command_text(first: &Record) -> String {
    match (first.command.as_deref(), first.key.as_deref(), first.input_bytes) {
        (Some(command), _, _) => command.to_owned(),
        (None, Some(key), _) => format!("<key {key}>"),
        (None, None, Some(bytes)) => format!("<input: {bytes} bytes>"),
        (None, None, None) => format!("<{}>", first.call.replace('_', " ")),
    }
}

/// Milliseconds from `from` to `to` (RFC 3339 times), if both are known.
pub(super) fn between(from: Option<&str>, to: Option<&str>) -> Option<u64> {
    let (from, to) = (parse_rfc3339(from?)?, parse_rfc3339(to?)?);
    Some(to.duration_since(from).ok()?.as_millis() as u64)
}

/// A span such as `90s`, `30m`, `1h`, `2d` (a bare number is seconds).
pub(super) fn parse_span(text: &str) -> anyhow::Result<Duration> {
    let text = text.trim();
    let (number, unit) =
        text.split_at(text.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(text.len()));
    let scale = match unit {
        "" | "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        _ => anyhow::bail!("--since {text}: give a number and s, m, h or d, as in 1h"),
    };
    let value: f64 = number
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite() && *v >= 0.0)
        .with_context(|| format!("--since {text}: give a number and s, m, h or d, as in 1h"))?;
    Duration::try_from_secs_f64(value * scale)
        .map_err(|_| anyhow::anyhow!("--since {text} is too long"))
}

/// The lines of the last `bound` bytes of the log at `path` and, if it is
/// shorter, of the end of its first rotation (`path.1`), oldest first. A
/// line cut by the bound is left out; lines that are not audit lines are
/// skipped.
pub(super) fn read_tail(path: &Path, bound: u64) -> Vec<Record> {
    let mut pieces = Vec::new();
    let mut left = bound;
    let mut rotated = path.as_os_str().to_owned();
    rotated.push(".1");
    for file in [path.to_owned(), PathBuf::from(rotated)] {
        if left == 0 {
            break;
        }
        let Ok(mut opened) = File::open(&file) else { continue };
        let Ok(len) = opened.metadata().map(|meta| meta.len()) else { continue };
        let from = len.saturating_sub(left);
        let mut bytes = Vec::new();
        if opened.seek(io::SeekFrom::Start(from)).is_err()
            || opened.take(left).read_to_end(&mut bytes).is_err()
        {
            continue;
        }
        left = left.saturating_sub(bytes.len() as u64);
        if from > 0 {
            // The first line starts before what was read.
            let start = memchr_newline(&bytes).map_or(bytes.len(), |at| at + 1);
            bytes.drain(..start);
        }
        pieces.push(bytes);
    }
    pieces
        .iter()
        .rev()
        .flat_map(|bytes| bytes.split(|&b| b == b'\n'))
        .filter_map(|line| serde_json::from_slice::<Record>(line).ok())
        .collect()
}

/// Where the first line feed in `bytes` is.
fn memchr_newline(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == b'\n')
}
