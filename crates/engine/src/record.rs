//! Recordings: every shell of a recorded session written as an asciinema
//! recording (asciicast v2), masked, bounded and private; and reading one
//! back for `shellkeep replay` ([`read_cast`], [`replay_delay`]).
//!
//! Not for: deciding which sessions are recorded (the server's
//! configuration does), playing a recording (the server's
//! `shellkeep replay`, from the pure parts here), masking (`mask.rs`,
//! through `terminal::RawMasker`), or the caps and retention of files
//! (`output::SpillStore`).
//!
//! Invariants: a recording never slows the terminal's reader: its sink,
//! [`Recording`], only queues, bounded by [`QUEUE_BOUND`], and a writer
//! thread of its own does the rest. Nothing is written unmasked, and no key
//! typed with echo off is written: every event is made by the [`Encoder`].
//! A recording is private and bounded: its file comes from its
//! [`Recorder`]'s own `SpillStore`, whose caps [`Writer::write`] asks
//! before every write.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime};

use crate::mask::Secrets;
use crate::output::{CommandSpill, Retention, SpillLimit, SpillLimits, SpillStore, human_bytes};
use crate::terminal::{RawMasker, Sink, Tap, Tapped, typed_at_prompt};

/// The longest label of a command's marker, in characters (after masking);
/// a longer command is cut and ends with `…`.
pub(crate) const MAX_LABEL_CHARS: usize = 1000;

/// The most bytes of a command's text queued for its marker; the rest is
/// dropped before masking (it would be cut from the label anyway).
pub(crate) const MAX_QUEUED_COMMAND: usize = 64 << 10;

/// The most bytes of taps waiting for a recording's writer; output beyond
/// it is dropped (and a marker says how much).
pub(crate) const QUEUE_BOUND: usize = 8 << 20;

/// What a queued tap costs beyond its bytes, so that many tiny taps are
/// bounded too.
const TAP_OVERHEAD: usize = 64;

/// After a batch of at least [`BATCH_BYTES`], the writer lets the next
/// batch gather this long.
const BATCH_WAIT: Duration = Duration::from_millis(50);

/// A batch this large (queued bytes) is output coming in a flood.
const BATCH_BYTES: usize = 32 << 10;

/// The default longest gap between two events of a recording.
pub const DEFAULT_IDLE_LIMIT: Duration = Duration::from_secs(2);

/// The file name's ending.
pub(crate) const EXTENSION: &str = "cast";

/// How a server records: where, how much, for how long.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordSettings {
    /// The directory of the recordings (made private if missing).
    pub dir: PathBuf,
    /// The cap of one recording (`per_command`) and of all this server
    /// writes (`per_server`), in bytes.
    pub limits: SpillLimits,
    /// When recordings are deleted (age, then total size of the
    /// directory's recordings and full outputs of ours).
    pub retention: Retention,
    /// The longest gap between two events, as written.
    pub idle_limit: Duration,
}

/// A server's recorder: starts one [`Recording`] per recorded shell.
///
/// It writes into a `SpillStore` of its own, in the directory the server
/// was given, whose limits are the cap per recording and the server's
/// total; past either, the file ends with a marker saying where and why it
/// was cut ([`Encoder::cut`]). Files are private (0600, created new through
/// `private_fs`, in a 0700 directory), and the store's retention deletes
/// old ones as it deletes full outputs (age, then total size).
pub struct Recorder {
    store: Arc<SpillStore>,
    idle_limit: Duration,
    /// Bytes that may wait in one recording's queue.
    queue_bound: usize,
    /// Recordings started, for their numbers.
    started: AtomicU64,
    /// Writer threads still running, and a signal when one ends.
    writers: Arc<(Mutex<usize>, Condvar)>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("dir", &self.store.dir())
            .field("idle_limit", &self.idle_limit)
            .finish_non_exhaustive()
    }
}

impl Recorder {
    /// A recorder writing into `settings.dir`, its file names starting with
    /// `prefix` (`output::server_prefix`, which retention recognises).
    pub fn new(settings: RecordSettings, prefix: &str) -> Arc<Recorder> {
        Arc::new(Recorder {
            store: SpillStore::new(settings.dir, prefix, settings.limits, Some(settings.retention)),
            idle_limit: settings.idle_limit,
            queue_bound: QUEUE_BOUND,
            started: AtomicU64::new(0),
            writers: Arc::new((Mutex::new(0), Condvar::new())),
        })
    }

    /// The directory of the recordings.
    pub fn dir(&self) -> &Path {
        self.store.dir()
    }

    /// Applies the retention now (at start-up); returns the files deleted.
    pub fn prune(&self) -> Vec<PathBuf> {
        self.store.prune()
    }

    /// Starts recording one shell of the session `session`, whose terminal
    /// is `rows` by `cols`, masking `secrets`: creates its file, writes the
    /// header and starts its writer thread. The returned sink goes to the
    /// shell's terminal (`Terminal::add_sink`).
    ///
    /// One file per shell (a session's reset starts a new file), named
    /// `shellkeep-<pid>-<hex>-<session>-<n>.cast`.
    pub fn start(
        &self,
        session: &str,
        secrets: Arc<Secrets>,
        (rows, cols): (u16, u16),
    ) -> std::io::Result<Recording> {
        let number = self.started.fetch_add(1, Ordering::Relaxed) + 1;
        let spill = self.store.command();
        let (path, file) = spill.create_file(&format!("{session}-{number}.{EXTENSION}"))?;
        let start = Instant::now();
        let header = header(
            (rows, cols),
            SystemTime::now(),
            self.idle_limit,
            &format!("shellkeep session {session}"),
        );
        let mut writer = Writer {
            file: std::io::BufWriter::with_capacity(1 << 20, file),
            spill,
            encoder: Encoder::new(secrets, start, self.idle_limit),
            stopped: false,
            lines: Vec::new(),
        };
        writer.write(header.as_bytes());
        let (queue, entries) = mpsc::channel();
        let pending = Arc::new(AtomicUsize::new(0));
        let writers = Arc::clone(&self.writers);
        *lock(&writers.0) += 1;
        let taken = Arc::clone(&pending);
        let spawned =
            std::thread::Builder::new().name("shellkeep-record".into()).spawn(move || {
                writer.run(&entries, &taken);
                let (count, ended) = &*writers;
                *lock(count) -= 1;
                ended.notify_all();
            });
        if let Err(err) = spawned {
            let (count, _) = &*self.writers;
            *lock(count) -= 1;
            return Err(err);
        }
        Ok(Recording { path, queue, pending, bound: self.queue_bound, skipped: 0 })
    }

    /// Waits, for at most `timeout`, until every writer has ended (each
    /// ends once it wrote its shell's exit, or when its sink is dropped);
    /// whether none is left. For the server's end, after its sessions
    /// closed.
    pub fn wait_idle(&self, timeout: Duration) -> bool {
        let (count, ended) = &*self.writers;
        let guard = lock(count);
        let (guard, _) = ended
            .wait_timeout_while(guard, timeout, |count| *count > 0)
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *guard == 0
    }
}

/// Locks `mutex`, even one a panicking thread left poisoned (a count
/// stays a count).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One shell's recording, as its terminal's sink: queues every tap for the
/// writer thread, never waits. Dropping it ends the recording once the
/// writer has written what was queued.
///
/// It runs in the terminal's reader thread and only queues the tap (an
/// `Arc` clone), at most [`QUEUE_BOUND`] bytes of them. Commands, sizes and
/// the exit are always queued (a command's text cut to
/// [`MAX_QUEUED_COMMAND`] bytes).
pub struct Recording {
    path: PathBuf,
    queue: mpsc::Sender<Entry>,
    /// Bytes queued and not yet taken by the writer.
    pending: Arc<AtomicUsize>,
    bound: usize,
    /// Bytes of output dropped since the last tap queued.
    skipped: u64,
}

impl std::fmt::Debug for Recording {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recording").field("path", &self.path).finish_non_exhaustive()
    }
}

impl Recording {
    /// The recording's file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Sink for Recording {
    fn tap(&mut self, tapped: &Tapped) {
        let (tap, bytes, droppable) = match &tapped.tap {
            Tap::Output(bytes) | Tap::Input { bytes, .. } => {
                (tapped.tap.clone(), bytes.len(), true)
            }
            Tap::Command(text) => {
                let text = cut_at_char(text, MAX_QUEUED_COMMAND);
                (Tap::Command(text.to_owned()), text.len(), false)
            }
            Tap::Resize { .. } => (tapped.tap.clone(), 0, false),
            Tap::Exit(how) => (tapped.tap.clone(), how.len(), false),
        };
        let cost = bytes + TAP_OVERHEAD;
        if droppable && self.pending.load(Ordering::Acquire) + cost > self.bound {
            self.skipped += bytes as u64;
            return;
        }
        self.pending.fetch_add(cost, Ordering::AcqRel);
        let entry = Entry {
            tapped: Tapped { at: tapped.at, mono: tapped.mono, tap },
            cost,
            skipped: std::mem::take(&mut self.skipped),
        };
        // A writer that is gone (it could not write) takes nothing more.
        let _ = self.queue.send(entry);
    }
}

/// A tap on its way to the writer.
struct Entry {
    tapped: Tapped,
    /// What it counts against the queue's bound.
    cost: usize,
    /// Bytes of output dropped just before it.
    skipped: u64,
}

/// The writer thread's side of a recording: one thread per recording
/// masks, encodes and writes, and ends with the shell (after the exit's
/// marker).
struct Writer {
    file: std::io::BufWriter<std::fs::File>,
    spill: CommandSpill,
    encoder: Encoder,
    /// Set once the recording was cut or could not be written: nothing
    /// more is written.
    stopped: bool,
    /// The lines of the entry at hand (reused).
    lines: Vec<u8>,
}

impl Writer {
    /// Writes every entry until the shell's end (nothing follows it) or
    /// until the sink is gone, flushing whenever the queue is empty; then
    /// what the maskers still hold. A flood of output is taken in batches,
    /// [`BATCH_WAIT`] apart.
    fn run(&mut self, entries: &mpsc::Receiver<Entry>, pending: &AtomicUsize) {
        let mut ended = false;
        while !ended {
            let Ok(first) = entries.recv() else { break };
            let mut next = Some(first);
            let mut batch = 0;
            while let Some(entry) = next {
                batch += entry.cost;
                pending.fetch_sub(entry.cost, Ordering::AcqRel);
                ended |= matches!(entry.tapped.tap, Tap::Exit(_));
                if !self.stopped {
                    let mut lines = std::mem::take(&mut self.lines);
                    lines.clear();
                    if entry.skipped > 0 {
                        self.encoder.gap(entry.tapped.mono, entry.skipped, &mut lines);
                    }
                    self.encoder.tap(&entry.tapped, &mut lines);
                    self.write(&lines);
                    self.lines = lines;
                }
                next = if ended { None } else { entries.try_recv().ok() };
            }
            self.flush();
            // A flood of output (a build, `seq`) is taken in batches, so
            // that the writer does not wake for every read of the terminal
            // and take the CPU from the shell's own work: at most
            // 1 / BATCH_WAIT wake-ups a second, and BATCH_WAIT's output
            // (far below the queue's bound) waits.
            if batch >= BATCH_BYTES && !ended {
                std::thread::sleep(BATCH_WAIT);
            }
        }
        if !self.stopped {
            let mut lines = Vec::new();
            self.encoder.end(&mut lines);
            self.write(&lines);
        }
        self.flush();
    }

    /// Writes `lines` if both caps allow all of them, else the marker of
    /// the cut, and stops: every line is written whole.
    fn write(&mut self, lines: &[u8]) {
        if self.stopped || lines.is_empty() {
            return;
        }
        let result = match self.spill.grant(lines.len() as u64) {
            (_, None) => self.file.write_all(lines),
            // The marker is the one line written past the cap.
            (_, Some(limit)) => {
                self.stopped = true;
                let mut cut = Vec::new();
                self.encoder.cut(limit, &mut cut);
                self.file.write_all(&cut)
            }
        };
        if let Err(err) = result {
            self.fail(&err);
        }
    }

    /// Writes out what the buffer holds (whole lines only).
    fn flush(&mut self) {
        if let Err(err) = self.file.flush() {
            self.fail(&err);
        }
    }

    /// Stops the recording after a write failed (a full disk), said once
    /// in the log.
    fn fail(&mut self, err: &std::io::Error) {
        if !self.stopped {
            tracing::warn!("a recording stopped: it cannot be written: {err}");
        }
        self.stopped = true;
    }
}

/// A recording's header line for a terminal of `rows` by `cols`: `width`,
/// `height`, `timestamp`, `idle_time_limit`, `title`, `env`.
pub(crate) fn header(
    (rows, cols): (u16, u16),
    timestamp: SystemTime,
    idle_limit: Duration,
    title: &str,
) -> String {
    let timestamp = timestamp.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let header = serde_json::json!({
        "version": 2,
        "width": cols,
        "height": rows,
        "timestamp": timestamp,
        "idle_time_limit": idle_limit.as_secs_f64(),
        "title": title,
        "env": {"SHELL": "bash", "TERM": "xterm-256color"},
    });
    format!("{header}\n")
}

/// Turns taps into asciicast v2 event lines: masking, the capped clock.
/// Pure but for its state; time is what the taps say.
///
/// Asciicast v2 (docs.asciinema.org/manual/asciicast/v2), not v3: the
/// asciinema CLI that Debian and Ubuntu ship (2.2) opens only v1 and v2
/// ("only asciicast v1 and v2 formats can be opened"); the 3.x CLI opens v2
/// as well, and every other tool that records an agent's terminal writes
/// v2. What v3 adds is written in v2's terms: times are absolute (seconds
/// since the start, capped: [`Encoder::advance`]), and the shell's exit,
/// v3's `x` event, is a marker.
///
/// Masked like `attach`: output and input each pass a
/// `terminal::RawMasker` with the session's secrets (a secret split
/// between chunks is masked as if it came whole; bytes that are not UTF-8
/// become U+FFFD), and a command's text is masked whole. Raw masking cannot
/// catch a secret broken up by escape sequences (a colour change in its
/// middle).
pub(crate) struct Encoder {
    secrets: Arc<Secrets>,
    output: RawMasker,
    input: RawMasker,
    idle_limit: Duration,
    /// The instant of the last event (or the start).
    last: Instant,
    /// The recording's time at `last`, gaps capped.
    elapsed: Duration,
    /// Whether the last input was typed with echo off (its marker is out).
    hidden_input: bool,
}

impl Encoder {
    /// An encoder for a recording that starts at `start`, with gaps capped
    /// at `idle_limit`.
    pub(crate) fn new(secrets: Arc<Secrets>, start: Instant, idle_limit: Duration) -> Encoder {
        Encoder {
            output: RawMasker::new(Arc::clone(&secrets)),
            input: RawMasker::new(Arc::clone(&secrets)),
            secrets,
            idle_limit,
            last: start,
            elapsed: Duration::ZERO,
            hidden_input: false,
        }
    }

    /// Appends the lines of one tap to `out`, each event on its own line
    /// ([`event`]):
    /// - `o`: the terminal's output, as the PTY gave it, and each agent
    ///   command as `$ ` and its text, as every view shows it
    ///   (`terminal::typed_at_prompt`): the terminal taps neither the echo
    ///   of the line that runs it nor the integration's markers (they carry
    ///   the marker nonce, a value that must never reach a file);
    /// - `r`: the window's new size, `"COLSxROWS"`;
    /// - `m`: a marker at the start of each agent command, labelled with its
    ///   text (at most [`MAX_LABEL_CHARS`] characters); and markers of our
    ///   own, worded as sentences: the shell's end, input typed with echo
    ///   off (not recorded), output left out because the writer fell behind
    ///   ([`Encoder::gap`]), and the cut at a size limit ([`Encoder::cut`]);
    /// - `i`: a person's keys, only those typed while the terminal echoed
    ///   them; keys typed with echo off (a password) are never written, only
    ///   a marker that some were typed.
    pub(crate) fn tap(&mut self, tapped: &Tapped, out: &mut Vec<u8>) {
        let time = self.advance(tapped.mono);
        match &tapped.tap {
            Tap::Output(bytes) => {
                let text = self.output.push(bytes);
                event(out, time, "o", &text);
            }
            Tap::Input { bytes, echo: true } => {
                self.hidden_input = false;
                let text = self.input.push(bytes);
                event(out, time, "i", &text);
            }
            Tap::Input { echo: false, .. } => {
                if !self.hidden_input {
                    self.hidden_input = true;
                    // What the input masker held is released, masked, first.
                    let held = self.input.finish();
                    event(out, time, "i", &held);
                    event(out, time, "m", "input typed with echo off: not recorded");
                }
            }
            Tap::Command(text) => {
                // The command as typed, masked on its own: what the output
                // masker holds stays held, since output may still come
                // after this tap (a background job's, printed while the
                // line is typed), and half a secret must not go out. shellkeep's
                // own commands have no text and show nothing.
                let masked = self.secrets.mask(text).0;
                let label = match cut_at_char_count(&masked, MAX_LABEL_CHARS) {
                    Some(cut) => format!("{cut}…"),
                    None => masked.to_string(),
                };
                event(out, time, "m", &label);
                if !masked.is_empty() {
                    event(out, time, "o", &typed_at_prompt(&masked));
                }
            }
            Tap::Resize { rows, cols } => event(out, time, "r", &format!("{cols}x{rows}")),
            Tap::Exit(how) => {
                self.release(time, out);
                let how = self.secrets.mask(how).0;
                // `how` names the shell already ("the shell ended") or
                // says what ended it ("the session was closed").
                let label = match how.starts_with("the shell") {
                    true => how.into_owned(),
                    false => format!("the shell ended: {how}"),
                };
                event(out, time, "m", &label);
            }
        }
    }

    /// Appends the marker of `skipped` bytes of output left out before the
    /// tap at `at`.
    pub(crate) fn gap(&mut self, at: Instant, skipped: u64, out: &mut Vec<u8>) {
        let time = self.advance(at);
        // The output before and after the gap are not one stream.
        self.release(time, out);
        let label =
            format!("the recording fell behind: {skipped} bytes of output were left out here");
        event(out, time, "m", &label);
    }

    /// Appends the marker of a cut at `limit`.
    pub(crate) fn cut(&mut self, limit: SpillLimit, out: &mut Vec<u8>) {
        let what = match limit {
            SpillLimit::PerCommand(bytes) => {
                format!("the limit of {} per recording", human_bytes(bytes))
            }
            SpillLimit::PerServer(bytes) => {
                format!("the server's limit of {} for all recordings", human_bytes(bytes))
            }
        };
        event(out, self.elapsed, "m", &format!("the recording was cut here: {what} was reached"));
    }

    /// Appends what the maskers still hold, at the end of the recording.
    pub(crate) fn end(&mut self, out: &mut Vec<u8>) {
        self.release(self.elapsed, out);
        let held = self.input.finish();
        event(out, self.elapsed, "i", &held);
    }

    /// Releases the output the masker holds back, as output at `time`.
    fn release(&mut self, time: Duration, out: &mut Vec<u8>) {
        let held = self.output.finish();
        event(out, time, "o", &held);
    }

    /// The recording's time of an event at `at`: the time of the last one
    /// plus the gap, capped at the idle limit, so a replay never waits long
    /// (the header's `idle_time_limit` says the same to players). Never
    /// goes back.
    fn advance(&mut self, at: Instant) -> Duration {
        let gap = at.saturating_duration_since(self.last);
        if at > self.last {
            self.last = at;
        }
        self.elapsed += gap.min(self.idle_limit);
        self.elapsed
    }
}

/// Appends the event `[time, code, data]` as a line (`data` escaped by
/// `serde_json`, straight into `out`); nothing for empty data.
fn event(out: &mut Vec<u8>, time: Duration, code: &str, data: &str) {
    if data.is_empty() {
        return;
    }
    let _ = write!(out, "[{}.{:06}, \"{code}\", ", time.as_secs(), time.subsec_micros());
    let _ = serde_json::to_writer(&mut *out, data);
    out.extend_from_slice(b"]\n");
}

/// `text` cut to at most `max` bytes, on a character boundary.
fn cut_at_char(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The first `max` characters of `text`, when it has more.
fn cut_at_char_count(text: &str, max: usize) -> Option<&str> {
    text.char_indices().nth(max).map(|(index, _)| &text[..index])
}

/// The longest line [`read_cast`] reads, in bytes.
pub(crate) const MAX_LINE: u64 = 16 << 20;

/// A recording's header, as [`read_cast`] reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct CastHeader {
    /// The terminal's columns.
    pub width: u64,
    /// The terminal's rows.
    pub height: u64,
    /// The longest pause the recording asks players to keep, in seconds.
    pub idle_time_limit: Option<f64>,
}

/// One event of a recording: its time (seconds since the start), its code
/// (`o`, `i`, `m`, `r`, …) and its data.
#[derive(Debug, Clone, PartialEq)]
pub struct CastEvent {
    /// Seconds since the start.
    pub time: f64,
    /// The event's code.
    pub code: String,
    /// The event's data.
    pub data: String,
}

/// Reads an asciicast v2 recording: its header, then its events one at a
/// time. Every line is bounded ([`MAX_LINE`]); an error names the line.
pub struct CastReader<R> {
    reader: R,
    line: u64,
    buffer: Vec<u8>,
}

/// Opens the recording `reader` reads: checks its header (version 2, a
/// width and a height).
pub fn read_cast<R: BufRead>(reader: R) -> Result<(CastHeader, CastReader<R>), String> {
    let mut cast = CastReader { reader, line: 0, buffer: Vec::new() };
    let Some(line) = cast.next_line()? else {
        return Err("the file is empty: no asciicast header".to_owned());
    };
    let header: serde_json::Value = serde_json::from_slice(line)
        .map_err(|err| format!("line 1 is not an asciicast header (JSON: {err})"))?;
    if header.get("version").and_then(serde_json::Value::as_u64) != Some(2) {
        return Err(format!(
            "line 1: only asciicast version 2 is read here, got version {}",
            header.get("version").map_or("(none)".to_owned(), ToString::to_string)
        ));
    }
    let size = |name: &str| {
        header
            .get(name)
            .and_then(serde_json::Value::as_u64)
            .ok_or_else(|| format!("line 1: the header has no {name}"))
    };
    let header = CastHeader {
        width: size("width")?,
        height: size("height")?,
        idle_time_limit: header
            .get("idle_time_limit")
            .and_then(serde_json::Value::as_f64)
            .filter(|limit| limit.is_finite() && *limit > 0.0),
    };
    Ok((header, cast))
}

impl<R: BufRead> CastReader<R> {
    /// The next event, or `None` at the end of the file.
    pub fn next_event(&mut self) -> Result<Option<CastEvent>, String> {
        let number = self.line + 1;
        let Some(line) = self.next_line()? else { return Ok(None) };
        let (time, code, data): (f64, String, String) = serde_json::from_slice(line)
            .map_err(|err| format!("line {number} is not an event [time, code, data]: {err}"))?;
        if !(time.is_finite() && time >= 0.0) {
            return Err(format!("line {number}: the time {time} is not a number of seconds"));
        }
        Ok(Some(CastEvent { time, code, data }))
    }

    /// The next line that is not blank, without the white space around it.
    fn next_line(&mut self) -> Result<Option<&[u8]>, String> {
        let text = |byte: &u8| !byte.is_ascii_whitespace();
        let range = loop {
            self.buffer.clear();
            self.line += 1;
            let read = <&mut R as std::io::Read>::take(&mut self.reader, MAX_LINE + 1)
                .read_until(b'\n', &mut self.buffer)
                .map_err(|err| format!("cannot read line {}: {err}", self.line))?;
            if read == 0 {
                return Ok(None);
            }
            if self.buffer.len() as u64 > MAX_LINE {
                return Err(format!("line {} is longer than {MAX_LINE} bytes", self.line));
            }
            if let (Some(start), Some(last)) =
                (self.buffer.iter().position(text), self.buffer.iter().rposition(text))
            {
                break start..last + 1;
            }
        };
        Ok(Some(&self.buffer[range]))
    }
}

/// How long a player waits before an event at `time` after one at
/// `previous` (seconds since the start): the gap, capped at `idle_limit`,
/// divided by `speed`.
pub fn replay_delay(previous: f64, time: f64, idle_limit: Option<f64>, speed: f64) -> Duration {
    let mut gap = (time - previous).max(0.0);
    if let Some(limit) = idle_limit {
        gap = gap.min(limit);
    }
    Duration::try_from_secs_f64(gap / speed).unwrap_or(Duration::ZERO)
}

#[cfg(test)]
mod tests {
    use std::io::BufReader;
    use std::os::unix::fs::PermissionsExt;

    use super::*;
    use crate::private_fs;

    const SECRET: &str = "s3cr3t-Value-9431";

    fn secrets() -> Arc<Secrets> {
        Arc::new(Secrets::new([("TOKEN".to_owned(), SECRET.to_owned())], false))
    }

    /// A tap at `ms` milliseconds after `start`.
    fn at(start: Instant, ms: u64, tap: Tap) -> Tapped {
        Tapped { at: SystemTime::now(), mono: start + Duration::from_millis(ms), tap }
    }

    fn output(bytes: &[u8]) -> Tap {
        Tap::Output(Arc::from(bytes))
    }

    /// The lines `taps` give with `secrets`, the end included.
    fn encode(secrets: Arc<Secrets>, taps: &[(u64, Tap)]) -> String {
        let start = Instant::now();
        let mut encoder = Encoder::new(secrets, start, DEFAULT_IDLE_LIMIT);
        let mut out = Vec::new();
        for (ms, tap) in taps {
            let tapped = at(start, *ms, copy(tap));
            encoder.tap(&tapped, &mut out);
        }
        encoder.end(&mut out);
        String::from_utf8(out).expect("UTF-8")
    }

    fn copy(tap: &Tap) -> Tap {
        tap.clone()
    }

    /// Every line of `lines` parsed as an event.
    fn events(lines: &str) -> Vec<(f64, String, String)> {
        lines
            .lines()
            .map(|line| serde_json::from_str(line).unwrap_or_else(|err| panic!("{line}: {err}")))
            .collect()
    }

    /// The data of the events with `code`, joined.
    fn joined(lines: &str, code: &str) -> String {
        events(lines).into_iter().filter(|(_, c, _)| c == code).map(|(_, _, d)| d).collect()
    }

    #[test]
    fn events_follow_the_v2_format() {
        let lines = encode(
            Arc::new(Secrets::none()),
            &[
                (0, output(b"$ ")),
                (100, Tap::Command("ls -l".to_owned())),
                (150, output(b"total 0\r\n")),
                (200, Tap::Resize { rows: 30, cols: 100 }),
                (250, Tap::Input { bytes: Arc::from(&b"y"[..]), echo: true }),
                (300, Tap::Input { bytes: Arc::from(&b"hunter22"[..]), echo: false }),
                (310, Tap::Input { bytes: Arc::from(&b"\r"[..]), echo: false }),
                (400, Tap::Exit("exit code 0".to_owned())),
            ],
        );
        assert_eq!(
            lines,
            "[0.000000, \"o\", \"$ \"]\n\
             [0.100000, \"m\", \"ls -l\"]\n\
             [0.100000, \"o\", \"$ ls -l\\r\\n\"]\n\
             [0.150000, \"o\", \"total 0\\r\\n\"]\n\
             [0.200000, \"r\", \"100x30\"]\n\
             [0.250000, \"i\", \"y\"]\n\
             [0.300000, \"m\", \"input typed with echo off: not recorded\"]\n\
             [0.400000, \"m\", \"the shell ended: exit code 0\"]\n"
        );
        let header = header(
            (24, 80),
            SystemTime::UNIX_EPOCH + Duration::from_secs(7),
            DEFAULT_IDLE_LIMIT,
            "t",
        );
        let header: serde_json::Value = serde_json::from_str(&header).expect("JSON");
        assert_eq!(header["version"], 2);
        assert_eq!((header["width"].as_u64(), header["height"].as_u64()), (Some(80), Some(24)));
        assert_eq!(header["timestamp"], 7);
        assert_eq!(header["idle_time_limit"], 2.0);
    }

    #[test]
    fn a_secret_is_masked_however_the_output_is_split() {
        let text = format!("token: {SECRET} and again {SECRET}\r\n");
        let bytes = text.as_bytes();
        for cut in 0..=bytes.len() {
            for second in cut..=bytes.len() {
                let lines = encode(
                    secrets(),
                    &[
                        (0, output(&bytes[..cut])),
                        (1, output(&bytes[cut..second])),
                        (2, output(&bytes[second..])),
                    ],
                );
                assert!(
                    !lines.contains(SECRET) && !lines.contains(&SECRET[..12]),
                    "{cut}/{second}: {lines}"
                );
                assert_eq!(
                    joined(&lines, "o"),
                    "token: <secret-hidden> and again <secret-hidden>\r\n",
                    "{cut}/{second}"
                );
            }
        }
    }

    /// A secret split around the next command's marker is masked too: the
    /// terminal may tap a command before the end of the last one's output.
    #[test]
    fn a_secret_split_around_a_command_is_masked() {
        let bytes = format!("token={SECRET}.\r\n").into_bytes();
        for cut in 0..=bytes.len() {
            let lines = encode(
                secrets(),
                &[
                    (0, output(&bytes[..cut])),
                    (1, Tap::Command("echo next".to_owned())),
                    (2, output(&bytes[cut..])),
                ],
            );
            assert!(!lines.contains(&SECRET[..9]), "{cut}: {lines}");
            let shown = joined(&lines, "o").replace("$ echo next\r\n", "");
            assert_eq!(shown, "token=<secret-hidden>.\r\n", "{cut}");
        }
    }

    #[test]
    fn commands_input_and_the_exit_are_masked() {
        let lines = encode(
            secrets(),
            &[
                (0, Tap::Command(format!("export T={SECRET}"))),
                (1, Tap::Input { bytes: Arc::from(&SECRET.as_bytes()[..5]), echo: true }),
                (2, Tap::Input { bytes: Arc::from(&SECRET.as_bytes()[5..]), echo: true }),
                (3, Tap::Exit(format!("killed while {SECRET}"))),
                (4, Tap::Exit("the shell ended".to_owned())),
            ],
        );
        assert!(!lines.contains(SECRET), "{lines}");
        assert_eq!(joined(&lines, "i"), "<secret-hidden>");
        assert_eq!(
            joined(&lines, "m"),
            "export T=<secret-hidden>the shell ended: killed while <secret-hidden>the shell ended"
        );
        // A long command is cut after masking.
        let long = format!("echo {SECRET} {}", "x".repeat(2 * MAX_LABEL_CHARS));
        let label = joined(&encode(secrets(), &[(0, Tap::Command(long))]), "m");
        assert_eq!(label.chars().count(), MAX_LABEL_CHARS + 1);
        assert!(label.starts_with("echo <secret-hidden> xx") && label.ends_with("x…"));
    }

    #[test]
    fn a_command_shows_as_typed_at_a_prompt_masked() {
        let lines = encode(
            secrets(),
            &[(0, Tap::Command(format!("echo {SECRET}\n  && true"))), (1, output(b"hello\r\n"))],
        );
        assert_eq!(joined(&lines, "o"), "$ echo <secret-hidden>\r\n>   && true\r\nhello\r\n");
        assert_eq!(joined(&lines, "m"), "echo <secret-hidden>\n  && true");
        // shellkeep's own commands have no text: nothing shows.
        let lines = encode(Arc::new(Secrets::none()), &[(0, Tap::Command(String::new()))]);
        assert_eq!(lines, "");
    }

    #[test]
    fn control_bytes_and_bytes_that_are_not_utf8_are_escaped() {
        let euro = "€".as_bytes();
        let lines = encode(
            Arc::new(Secrets::none()),
            &[
                (0, output(b"\x1b[1mbold\x1b[0m\x07\x00\t\"q\" \\ ")),
                (1, output(&[b'a', 0xff, b'b', euro[0]])),
                (2, output(&euro[1..])),
                (3, output(&[0xe2, 0x82])),
            ],
        );
        // One event per line, each valid JSON (asciinema 2 reads the file as
        // strict UTF-8, a line at a time).
        assert_eq!(lines.lines().count(), 4, "{lines}");
        assert!(lines.lines().all(|line| !line.contains('\x1b') && !line.contains('\0')));
        assert_eq!(joined(&lines, "o"), "\x1b[1mbold\x1b[0m\x07\x00\t\"q\" \\ a\u{FFFD}b€\u{FFFD}");
    }

    #[test]
    fn long_pauses_are_capped_at_the_idle_limit() {
        let lines = encode(
            Arc::new(Secrets::none()),
            &[
                (500, output(b"a")),
                (1_500, output(b"b")),
                (100_000, output(b"c")),
                (100_250, output(b"d")),
                (3_600_000, Tap::Exit("gone".to_owned())),
            ],
        );
        let times: Vec<f64> = events(&lines).into_iter().map(|(time, _, _)| time).collect();
        assert_eq!(times, [0.5, 1.5, 3.5, 3.75, 5.75]);
        // A tap that comes with an earlier instant never sends time back.
        let start = Instant::now();
        let mut encoder = Encoder::new(Arc::new(Secrets::none()), start, DEFAULT_IDLE_LIMIT);
        let mut out = Vec::new();
        encoder.tap(&at(start, 300, output(b"x")), &mut out);
        encoder.tap(&at(start, 100, output(b"y")), &mut out);
        let times: Vec<f64> = events(&String::from_utf8(out).expect("UTF-8"))
            .into_iter()
            .map(|(time, _, _)| time)
            .collect();
        assert_eq!(times, [0.3, 0.3]);
    }

    struct Scratch(PathBuf);

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn scratch(name: &str) -> Scratch {
        Scratch(std::env::temp_dir().join(format!(
            "shellkeep-record-test-{}-{name}-{}",
            std::process::id(),
            private_fs::random_hex(4).expect("random")
        )))
    }

    fn recorder(dir: &Path, limits: SpillLimits) -> Arc<Recorder> {
        let settings = RecordSettings {
            dir: dir.join("recordings"),
            limits,
            retention: Retention::default(),
            idle_limit: DEFAULT_IDLE_LIMIT,
        };
        Recorder::new(settings, &crate::output::server_prefix().expect("prefix"))
    }

    /// Records `taps` (output of `chunk` bytes each) through a real sink
    /// and writer thread; returns the file's text.
    fn record(recorder: &Recorder, taps: Vec<Tap>) -> (PathBuf, String) {
        let mut recording = recorder.start("dev", secrets(), (24, 80)).expect("start");
        let path = recording.path().to_owned();
        let start = Instant::now();
        for (i, tap) in taps.into_iter().enumerate() {
            recording.tap(&at(start, i as u64, tap));
        }
        drop(recording);
        assert!(recorder.wait_idle(Duration::from_secs(10)), "the writer did not end");
        let text = std::fs::read_to_string(&path).expect("read");
        (path, text)
    }

    #[test]
    fn a_recording_is_a_private_file_that_plays_back_as_recorded() {
        let dir = scratch("private");
        let recorder = recorder(&dir.0, SpillLimits::default());
        let (path, text) = record(
            &recorder,
            vec![
                output(b"$ "),
                Tap::Command("echo hi".to_owned()),
                output(b"hi\r\n$ "),
                Tap::Exit("exit code 0".to_owned()),
            ],
        );
        let name = path.file_name().expect("name").to_string_lossy().into_owned();
        assert!(name.starts_with("shellkeep-") && name.ends_with("-dev-1.cast"), "{name}");
        let mode =
            |path: &Path| std::fs::metadata(path).expect("meta").permissions().mode() & 0o777;
        assert_eq!((mode(&path), mode(recorder.dir())), (0o600, 0o700));
        let (header, mut reader) = read_cast(BufReader::new(text.as_bytes())).expect("header");
        assert_eq!((header.width, header.height, header.idle_time_limit), (80, 24, Some(2.0)));
        let mut read = Vec::new();
        while let Some(event) = reader.next_event().expect("event") {
            read.push((event.code, event.data));
        }
        let expected = [
            ("o", "$ "),
            ("m", "echo hi"),
            ("o", "$ echo hi\r\n"),
            ("o", "hi\r\n$ "),
            ("m", "the shell ended: exit code 0"),
        ];
        let expected: Vec<(String, String)> =
            expected.iter().map(|(c, d)| ((*c).to_owned(), (*d).to_owned())).collect();
        assert_eq!(read, expected);
        // A second shell of the session gets a file of its own.
        let (second, _) = record(&recorder, vec![output(b"x")]);
        assert!(second.to_string_lossy().ends_with("-dev-2.cast"));
    }

    /// Recordings are pruned as full outputs are: ours past their age go,
    /// a person's file in the same directory stays whatever its age.
    #[test]
    fn old_recordings_are_pruned_and_nothing_else() {
        let dir = scratch("prune");
        let recorder = recorder(&dir.0, SpillLimits::default());
        let (old, _) = record(&recorder, vec![output(b"old")]);
        let (new, _) = record(&recorder, vec![output(b"new")]);
        let theirs = recorder.dir().join("talk.cast");
        std::fs::write(&theirs, "{}").expect("write");
        let long_ago = SystemTime::now() - Duration::from_secs(30 * 86_400);
        for path in [&old, &theirs] {
            let file = std::fs::File::options().write(true).open(path).expect("open");
            file.set_modified(long_ago).expect("mtime");
        }
        // (The prune a new file starts in the background may take it first.)
        let removed = recorder.prune();
        assert!(removed.is_empty() || removed == [old.clone()], "{removed:?}");
        assert!(!old.exists() && new.exists() && theirs.exists());
    }

    /// The writer ends with the shell, while the terminal may still hold
    /// the sink: a server's end does not wait for a terminal someone holds.
    #[test]
    fn the_writer_ends_with_the_shell() {
        let dir = scratch("end");
        let recorder = recorder(&dir.0, SpillLimits::default());
        let mut recording = recorder.start("dev", secrets(), (24, 80)).expect("start");
        let start = Instant::now();
        recording.tap(&at(start, 0, output(b"bye\r\n")));
        recording.tap(&at(start, 1, Tap::Exit("exit code 0".to_owned())));
        assert!(recorder.wait_idle(Duration::from_secs(10)), "the writer did not end");
        recording.tap(&at(start, 2, output(b"after")));
        let text = std::fs::read_to_string(recording.path()).expect("read");
        assert!(text.ends_with("\"the shell ended: exit code 0\"]\n"), "{text}");
    }

    #[test]
    fn a_recording_stops_at_its_cap_with_a_marker() {
        let dir = scratch("cap");
        let cap = 4096;
        let recorder = recorder(&dir.0, SpillLimits { per_command: cap, per_server: 1 << 20 });
        let taps = (0..100)
            .map(|i| output(format!("line {i:04} {}\r\n", "y".repeat(80)).as_bytes()))
            .collect();
        let (path, text) = record(&recorder, taps);
        let lines: Vec<&str> = text.lines().collect();
        let last = lines.last().expect("lines");
        assert!(
            last.ends_with("\"m\", \"the recording was cut here: the limit of 4 KiB per recording was reached\"]"),
            "{last}"
        );
        let size = std::fs::metadata(&path).expect("meta").len();
        assert!(size <= cap + last.len() as u64 + 1, "{size}");
        assert!(size > cap - 200, "{size}");
        // Every line is whole, and nothing after the cut.
        let (_, mut reader) = read_cast(BufReader::new(text.as_bytes())).expect("header");
        let mut count = 0;
        while reader.next_event().expect("event").is_some() {
            count += 1;
        }
        assert_eq!(count, lines.len() - 1);

        // The server's total stops the next recording.
        let recorder =
            self::recorder(&dir.0, SpillLimits { per_command: 1 << 20, per_server: 3000 });
        let (_, first) = record(&recorder, vec![output(&[b'a'; 1000])]);
        assert!(!first.contains("cut here"));
        let (_, second) = record(&recorder, vec![output(&[b'b'; 1000]), output(&[b'c'; 1000])]);
        assert!(second.ends_with("\"the recording was cut here: the server's limit of 3000 bytes for all recordings was reached\"]\n"), "{second}");
        assert!(second.contains("bbbb") && !second.contains("cccc"));
    }

    #[test]
    fn output_past_the_queue_bound_is_left_out_with_a_marker() {
        let dir = scratch("queue");
        let recorder = recorder(&dir.0, SpillLimits::default());
        let spill = recorder.store.command();
        private_fs::ensure_private_dir(recorder.dir()).expect("dir");
        let (path, file) = spill.create_file("queue.cast").expect("file");
        // A sink whose writer does not run yet: its queue fills up.
        let (queue, entries) = mpsc::channel();
        let pending = Arc::new(AtomicUsize::new(0));
        let mut sink = Recording {
            path: path.clone(),
            queue,
            pending: Arc::clone(&pending),
            bound: 1000,
            skipped: 0,
        };
        let start = Instant::now();
        sink.tap(&at(start, 0, output(&[b'a'; 600])));
        sink.tap(&at(start, 1, output(&[b'b'; 600])));
        sink.tap(&at(start, 2, output(&[b'c'; 300])));
        // Commands, sizes and the exit are never left out.
        sink.tap(&at(start, 3, Tap::Command("make".to_owned())));
        sink.tap(&at(start, 4, Tap::Exit("exit code 2".to_owned())));
        drop(sink);
        let mut writer = Writer {
            file: std::io::BufWriter::new(file),
            spill,
            encoder: Encoder::new(Arc::new(Secrets::none()), start, DEFAULT_IDLE_LIMIT),
            stopped: false,
            lines: Vec::new(),
        };
        writer.run(&entries, &pending);
        assert_eq!(pending.load(Ordering::Acquire), 0);
        let text = std::fs::read_to_string(&path).expect("read");
        assert_eq!(joined(&text, "o"), "a".repeat(600) + "$ make\r\n");
        assert_eq!(
            joined(&text, "m"),
            "the recording fell behind: 900 bytes of output were left out heremakethe shell \
             ended: exit code 2"
        );
    }

    #[test]
    fn bad_recordings_are_clear_errors() {
        let open =
            |text: &str| read_cast(BufReader::new(text.as_bytes())).map(|(header, _)| header);
        assert_eq!(open("").unwrap_err(), "the file is empty: no asciicast header");
        assert_eq!(
            open("hello\n").unwrap_err().split(" (JSON").next(),
            Some("line 1 is not an asciicast header")
        );
        assert_eq!(
            open("{\"version\": 3, \"term\": {\"cols\": 80, \"rows\": 24}}\n").unwrap_err(),
            "line 1: only asciicast version 2 is read here, got version 3"
        );
        assert_eq!(
            open("{\"version\": 2, \"width\": 80}").unwrap_err(),
            "line 1: the header has no height"
        );
        let events = |text: &str| -> Result<Vec<CastEvent>, String> {
            let (_, mut reader) = read_cast(BufReader::new(text.as_bytes()))?;
            let mut events = Vec::new();
            while let Some(event) = reader.next_event()? {
                events.push(event);
            }
            Ok(events)
        };
        let header = "{\"version\": 2, \"width\": 80, \"height\": 24}\n";
        assert_eq!(
            events(&format!("{header}\n[1.5, \"o\", \"x\"]\r\n\n")).expect("blank lines").len(),
            1
        );
        let err = events(&format!("{header}[1.5, \"o\", \"x\"]\n[2, \"o\"]\n")).unwrap_err();
        assert!(err.starts_with("line 3 is not an event [time, code, data]"), "{err}");
        let err = events(&format!("{header}[-1, \"o\", \"x\"]\n")).unwrap_err();
        assert_eq!(err, "line 2: the time -1 is not a number of seconds");
        let long = format!("{header}[1, \"o\", \"{}\"]\n", "x".repeat(MAX_LINE as usize));
        assert_eq!(events(&long).unwrap_err(), format!("line 2 is longer than {MAX_LINE} bytes"));
    }

    #[test]
    fn replay_caps_pauses_and_follows_the_speed() {
        assert_eq!(replay_delay(1.0, 1.5, None, 1.0), Duration::from_millis(500));
        assert_eq!(replay_delay(1.0, 100.0, Some(2.0), 1.0), Duration::from_secs(2));
        assert_eq!(replay_delay(1.0, 100.0, Some(2.0), 4.0), Duration::from_millis(500));
        assert_eq!(replay_delay(5.0, 1.0, None, 1.0), Duration::ZERO);
    }
}
