//! The audit trail: one JSON line when a tool call that runs something
//! starts, and one when it ends (the two share an `id`), appended to a
//! private file (`--audit-log`) that rotates at a bounded size; and
//! `shellkeep audit`, which reads it back (with its rotations) as one line
//! per command.
//!
//! The start line is written before the command starts, straight to the
//! file (`O_APPEND`, no buffer of ours), so a server killed mid-command
//! leaves it. A write error never fails a call: it is logged on stderr once
//! (and once more when writing works again) and the call goes on. Lines are
//! bounded: the command is masked (the masking function the server is
//! given) and cut to [`COMMAND_BOUND`] characters, text sent with
//! `is_input` is never recorded (only its size: it may be a password), and
//! every other field is small. This module runs nothing and words no reply.
//!
//! A call made over HTTP carries its principal (`principal` on its start
//! and end lines), and its session is named `PRINCIPAL/NAME`, as
//! `shellkeep ls` names it: two principals' `default` are two sessions
//! here too.
//!
//! A server also writes a `server_start` line (its pid, its start time in
//! clock ticks, the boot it runs in, where its full outputs go) and a
//! `server_end` line when it ends normally. A server that starts reads the
//! log's tail (at most [`TAIL_BYTES`], under an exclusive lock so that two
//! servers starting together do not both claim the same dead one) for
//! earlier servers with a start line, no end line, and a pid that is gone
//! or belongs to another process now (its start time differs): each gets a
//! `server_died` line, written once, and those that were running commands
//! are reported once, in the new server's first reply. `shellkeep audit`
//! shows a command that was still running when its server died as
//! `server_died`, one stopped when its server ended as `server_ended`, and
//! one whose session was closed or reset as `closed` or `reset`.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{self, BufRead, Read, Seek, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use clap::Args;
use serde::{Deserialize, Serialize};
use shellkeep_engine::keys::Input;
use shellkeep_engine::oneshot::{RunOutcome, RunStatus};
use shellkeep_engine::policy::Decision;
use shellkeep_engine::registry::JobEnded;
use shellkeep_engine::session::{Activity, Call, NotRun, Outcome, Reply, SessionError, WaitEnded};
use shellkeep_engine::{private_fs, runtime_dir};

/// What hides secrets in text written to the log: the identity unless the
/// server is given a masker.
pub type Mask = Arc<dyn Fn(&str) -> String + Send + Sync>;

/// The identity: nothing is masked (for tests; the server masks with its
/// secrets).
#[cfg(test)]
pub fn no_mask() -> Mask {
    Arc::new(str::to_owned)
}

/// Characters of a command kept in a line; a longer one is cut, and the
/// line says how long it was.
pub const COMMAND_BOUND: usize = 2000;

/// The smallest `--audit-log-max-mib` (10 KiB: room for a few lines).
const MIN_MIB: f64 = 0.01;
/// The largest `--audit-log-max-mib`.
const MAX_MIB: f64 = 1_048_576.0;
/// The most rotated files `--audit-log-keep` may ask for.
const MAX_KEEP: u32 = 1000;
/// Bytes of the log's end (the current file, then the last rotation) a
/// starting server reads to find servers that died.
pub const TAIL_BYTES: u64 = 1024 * 1024;
/// The most dead servers one start claims and reports (the oldest first;
/// the next start claims the rest): the notice stays a few KiB.
const MAX_DEAD_SERVERS: usize = 3;

/// The server's audit flags, as written.
#[derive(Debug, Args)]
pub struct AuditArgs {
    /// Append one JSON line to FILE when a tool call that runs something
    /// starts and one when it ends (created private, mode 0600; a symlink or
    /// a file of another user is refused). The server notes its own start
    /// and end there too: the next server with the same FILE says, once,
    /// if this one died with commands running. Default:
    /// `$XDG_STATE_HOME/shellkeep/audit.jsonl`, else
    /// `~/.local/state/shellkeep/audit.jsonl`.
    #[arg(long, value_name = "FILE", env = "SHELLKEEP_AUDIT_LOG")]
    pub audit_log: Option<PathBuf>,
    /// Keep no audit log (and so say nothing of an earlier server that
    /// died with commands running).
    #[arg(long, conflicts_with = "audit_log")]
    pub no_audit_log: bool,
    /// MiB the audit log may reach before it is rotated to FILE.1 (FILE.1
    /// to FILE.2, and so on); from 0.01 to 1048576.
    #[arg(long, default_value_t = 10.0, env = "SHELLKEEP_AUDIT_LOG_MAX_MIB")]
    pub audit_log_max_mib: f64,
    /// Rotated audit logs kept (FILE.1 … FILE.N, the oldest dropped); from
    /// 0 to 1000.
    #[arg(long, default_value_t = 5, env = "SHELLKEEP_AUDIT_LOG_KEEP")]
    pub audit_log_keep: u32,
}

/// `shellkeep audit`: what ran, as one line per command.
#[derive(Debug, Args)]
pub struct AuditQuery {
    /// Only calls that started within this long: `90s`, `30m`, `1h`, `2d`.
    #[arg(long)]
    pub since: Option<String>,
    /// Only commands that failed: a non-zero exit code, killed, timed out,
    /// not executed, refused or cancelled.
    #[arg(long)]
    pub failed: bool,
    /// The audit log (its rotations FILE.1, FILE.2, … are read too);
    /// default: the server's default log.
    #[arg(value_name = "FILE", env = "SHELLKEEP_AUDIT_LOG")]
    pub file: Option<PathBuf>,
}

/// The audit log of one server: where it goes, its bounds, and the open
/// file. Shared by every call; each line is one `write` under a lock.
pub struct AuditLog {
    path: PathBuf,
    max_bytes: u64,
    keep: u32,
    mask: Mask,
    /// Names this server in every id (`<server>-<n>`): several servers may
    /// share one file.
    server: String,
    next_id: AtomicU64,
    /// The id of the call that started each running background job, by
    /// session: the job's end line carries it.
    jobs: Mutex<HashMap<String, String>>,
    writer: Mutex<Writer>,
    /// Earlier servers found dead at start with commands running, until
    /// the first reply takes them.
    dead: Mutex<Vec<DeadServer>>,
}

/// The open file, and whether the last write failed (so that a failure is
/// logged once, not once per line).
struct Writer {
    file: Option<File>,
    failing: bool,
}

impl AuditLog {
    /// The log `args` ask for, opened (created private) now so that a bad
    /// path stops start-up with a clear error; the default log when none
    /// is named (one that cannot be opened is left out with a warning: a
    /// read-only home must not stop the server); `None` with
    /// `--no-audit-log`.
    pub fn open(args: &AuditArgs, mask: Mask) -> anyhow::Result<Option<Arc<AuditLog>>> {
        if args.no_audit_log {
            return Ok(None);
        }
        let (path, named) = match &args.audit_log {
            Some(path) => (path.clone(), true),
            None => match default_log() {
                Some(path) => (path, false),
                None => return Ok(None),
            },
        };
        let mib = args.audit_log_max_mib;
        anyhow::ensure!(
            (MIN_MIB..=MAX_MIB).contains(&mib),
            "--audit-log-max-mib must be from {MIN_MIB} to {MAX_MIB}, got {mib}"
        );
        anyhow::ensure!(
            args.audit_log_keep <= MAX_KEEP,
            "--audit-log-keep must be from 0 to {MAX_KEEP}, got {}",
            args.audit_log_keep
        );
        match AuditLog::with_limits(&path, (mib * 1_048_576.0) as u64, args.audit_log_keep, mask) {
            Ok(log) => Ok(Some(Arc::new(log))),
            Err(err) if named => {
                Err(err).with_context(|| format!("--audit-log {}", path.display()))
            }
            Err(err) => {
                tracing::warn!(
                    path = %path.display(),
                    "no audit log: the default one cannot be opened ({err}); name another with \
                     --audit-log, or turn it off with --no-audit-log"
                );
                Ok(None)
            }
        }
    }

    /// A log at `path` that rotates past `max_bytes`, keeping `keep` old
    /// files.
    fn with_limits(path: &Path, max_bytes: u64, keep: u32, mask: Mask) -> io::Result<AuditLog> {
        let file = open_log(path)?;
        Ok(AuditLog {
            path: path.to_owned(),
            max_bytes,
            keep,
            mask,
            server: private_fs::random_hex(4)?,
            next_id: AtomicU64::new(1),
            jobs: Mutex::default(),
            writer: Mutex::new(Writer { file: Some(file), failing: false }),
            dead: Mutex::default(),
        })
    }

    /// Writes this server's `server_start` line, then looks for earlier
    /// servers of this log that died (see the module's header): each gets
    /// its `server_died` line now, and those that had commands running are
    /// kept for [`AuditLog::take_dead_servers`].
    pub fn server_started(&self, facts: &ServerFacts) {
        let pid = std::process::id();
        let id = format!("{}-0", self.server);
        let line = Line {
            time: rfc3339(SystemTime::now()),
            event: "server_start",
            id: &id,
            pid: Some(pid),
            pid_start: runtime_dir::start_ticks(pid),
            boot_id: boot_id(),
            full_output_dir: Some(facts.full_output_dir.display().to_string()),
            output_prefix: Some(facts.output_prefix.clone()),
            ..Line::default()
        };
        self.write(&line);
        let dead = self.claim_dead_servers();
        *self.dead.lock().unwrap_or_else(PoisonError::into_inner) = dead;
    }

    /// Writes this server's `server_end` line: it is ending normally, and
    /// has stopped (or is stopping) everything it ran.
    pub fn server_ended(&self) {
        let id = format!("{}-0", self.server);
        let line = Line {
            time: rfc3339(SystemTime::now()),
            event: "server_end",
            id: &id,
            ..Line::default()
        };
        self.write(&line);
    }

    /// The earlier servers found dead with commands running, once: the
    /// first call takes them, later calls get none.
    pub fn take_dead_servers(&self) -> Vec<DeadServer> {
        std::mem::take(&mut *self.dead.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Reads the log's tail under an exclusive lock, writes a `server_died`
    /// line for each earlier server that is gone without an end line, and
    /// returns those that were running commands. Reading and writing under
    /// one lock means a dead server is claimed by one starting server only.
    fn claim_dead_servers(&self) -> Vec<DeadServer> {
        use nix::fcntl::{Flock, FlockArg};
        let lock = match File::open(&self.path) {
            Ok(file) => Flock::lock(file, FlockArg::LockExclusive).map_err(|(_, err)| err),
            Err(err) => {
                tracing::warn!("cannot read the audit log {}: {err}", self.path.display());
                return Vec::new();
            }
        };
        if let Err(err) = &lock {
            tracing::warn!("cannot lock the audit log {}: {err}", self.path.display());
        }
        let records = read_tail(&self.path, TAIL_BYTES);
        let boot = boot_id();
        let alive = |start: &Record| server_alive(start, boot.as_deref());
        let dead = dead_servers(&records, &self.server, &alive);
        for server in &dead {
            let id = format!("{}-0", server.server);
            let line = Line {
                time: rfc3339(SystemTime::now()),
                event: "server_died",
                id: &id,
                pid: Some(server.pid),
                commands: Some(server.commands.len()),
                detail: Some(format!(
                    "found gone by the server started after it (pid {})",
                    std::process::id()
                )),
                ..Line::default()
            };
            self.write(&line);
        }
        drop(lock);
        dead.into_iter().filter(|server| !server.commands.is_empty()).collect()
    }

    /// Writes `start`'s line and returns the call it begins, whose end line
    /// is written by [`AuditCall`]'s `end_*` methods, or when it is dropped
    /// (the call's task went away: `cancel`).
    pub fn begin(self: &Arc<Self>, client: Option<Client>, mut start: Start) -> AuditCall {
        let id = format!("{}-{}", self.server, self.next_id.fetch_add(1, Ordering::Relaxed));
        start.command = start.command.map(|command| (self.mask)(&command));
        let (command, command_chars) = cut_command(start.command.as_deref());
        let line = Line {
            time: rfc3339(SystemTime::now()),
            event: "start",
            id: &id,
            client: client.as_ref(),
            principal: start.principal.as_deref(),
            tool: start.tool,
            call: start.call,
            session: start.session.as_deref(),
            command,
            command_chars,
            key: start.key.as_deref(),
            input_bytes: start.input_bytes,
            category: start.category.as_deref(),
            limits: start.limits,
            ..Line::default()
        };
        self.write(&line);
        if start.call == "background"
            && let Some(session) = &start.session
        {
            let mut jobs = self.jobs.lock().unwrap_or_else(PoisonError::into_inner);
            jobs.insert(session.clone(), id.clone());
        }
        AuditCall { log: Some(Arc::clone(self)), id, start, started: Instant::now(), ended: false }
    }

    /// Writes the `job_end` line of a background job the server reports
    /// ended, with the id of the call that started it. A principal's job
    /// comes with its session named `PRINCIPAL/NAME`, as [`Start::by`]
    /// named it.
    pub fn job_ended(&self, job: &JobEnded) {
        let started = self.jobs.lock().unwrap_or_else(PoisonError::into_inner).remove(&job.session);
        let id = started.unwrap_or_else(|| {
            format!("{}-{}", self.server, self.next_id.fetch_add(1, Ordering::Relaxed))
        });
        let (command, command_chars) = cut_command(Some(&(self.mask)(&job.command)));
        let signal = signal_of(job.exit_code);
        let line = Line {
            time: rfc3339(SystemTime::now()),
            event: "job_end",
            id: &id,
            tool: "terminal",
            call: "background",
            session: Some(&job.session),
            command,
            command_chars,
            status: Some("completed"),
            exit_code: Some(job.exit_code),
            reason: signal.map(|_| "signal"),
            detail: signal.map(|signal| format!("signal {signal}")),
            duration_ms: Some(job.ran_for.as_millis() as u64),
            ..Line::default()
        };
        self.write(&line);
    }

    /// Appends `line` (rotating first if it would pass the bound); a
    /// failure is logged and the call goes on.
    /// Every string of the line (a session's name, a command, a detail)
    /// is masked here, whatever put it there.
    fn write(&self, line: &Line<'_>) {
        let mut value = match serde_json::to_value(line) {
            Ok(value) => value,
            Err(err) => return tracing::error!("cannot build an audit line: {err}"),
        };
        crate::mask_json(&mut value, &*self.mask);
        let mut text = value.to_string();
        text.push('\n');
        let mut writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        match self.append(&mut writer.file, text.as_bytes()) {
            Ok(()) if writer.failing => {
                writer.failing = false;
                tracing::warn!("the audit log {} is written again", self.path.display());
            }
            Ok(()) => {}
            Err(err) if !writer.failing => {
                writer.failing = true;
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
    fn append(&self, file: &mut Option<File>, bytes: &[u8]) -> io::Result<()> {
        let current = match (file.as_ref(), std::fs::symlink_metadata(&self.path)) {
            (Some(open), Ok(on_disk)) => {
                let open = open.metadata()?;
                (open.dev(), open.ino()) == (on_disk.dev(), on_disk.ino())
            }
            _ => false,
        };
        if !current {
            *file = None;
            *file = Some(open_log(&self.path)?);
        }
        let size = file.as_ref().map_or(Ok(0), |f| f.metadata().map(|m| m.len()))?;
        if size > 0 && size + bytes.len() as u64 > self.max_bytes {
            *file = None;
            rotate(&self.path, self.keep)?;
            *file = Some(open_log(&self.path)?);
        }
        let Some(open) = file.as_mut() else { unreachable!("opened above") };
        open.write_all(bytes)
    }
}

/// Opens the log for appending through `private_fs`: created 0600, never
/// through a symlink, and only a regular file of ours.
fn open_log(path: &Path) -> io::Result<File> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty() && !p.exists()) {
        private_fs::ensure_private_dir(&std::path::absolute(parent)?)?;
    }
    private_fs::open_private_append(path)
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

fn ignore_missing(result: io::Result<()>) -> io::Result<()> {
    match result {
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// What a server's `server_start` line says of where its outputs go.
#[derive(Debug, Clone)]
pub struct ServerFacts {
    /// The directory its full outputs are saved in.
    pub full_output_dir: PathBuf,
    /// The prefix of its files there (`shellkeep-<pid>-<hex>`).
    pub output_prefix: String,
}

/// An earlier server of the same log that is gone without having ended
/// normally (killed, crashed, its machine rebooted).
#[derive(Debug, Clone, PartialEq)]
pub struct DeadServer {
    /// Its name in the log's ids.
    pub server: String,
    /// Its process id.
    pub pid: u32,
    /// When it started (RFC 3339), if its start line says.
    pub started: Option<String>,
    /// The commands it was running: started and not ended, as far as the
    /// log's tail tells.
    pub commands: Vec<DeadCommand>,
    /// Where it saved full outputs, if its start line says.
    pub full_output_dir: Option<String>,
    /// The prefix of its files there.
    pub output_prefix: Option<String>,
}

/// A command that was running when its server died.
#[derive(Debug, Clone, PartialEq)]
pub struct DeadCommand {
    /// Its session (`(run)` for the `run` tool).
    pub session: String,
    /// The command, masked and cut as the log holds it.
    pub command: String,
    /// Whether it was a background job.
    pub background: bool,
}

/// The servers in `records` (the log's tail, oldest first) other than
/// `own` that started, have no `server_end` or `server_died` line, and are
/// not `alive`: at most [`MAX_DEAD_SERVERS`], each with the commands the
/// log shows it running.
fn dead_servers(records: &[Record], own: &str, alive: &dyn Fn(&Record) -> bool) -> Vec<DeadServer> {
    let mut settled: HashSet<&str> = records
        .iter()
        .filter(|record| matches!(record.event.as_str(), "server_end" | "server_died"))
        .map(Record::server)
        .collect();
    let rows = rows(records);
    let mut dead = Vec::new();
    for start in records.iter().filter(|record| record.event == "server_start") {
        let server = start.server();
        if server == own || settled.contains(server) || alive(start) {
            continue;
        }
        settled.insert(server);
        let Some(pid) = start.pid else { continue };
        let commands = rows
            .iter()
            .filter(|row| row.server == server && row.is_command() && row.is_open())
            .map(|row| DeadCommand {
                session: row.session.clone(),
                command: row.command.clone(),
                background: row.call == "background",
            })
            .collect();
        dead.push(DeadServer {
            server: server.to_owned(),
            pid,
            started: start.time.clone(),
            commands,
            full_output_dir: start.full_output_dir.clone(),
            output_prefix: start.output_prefix.clone(),
        });
        if dead.len() == MAX_DEAD_SERVERS {
            break;
        }
    }
    dead
}

/// Whether the server whose `server_start` line is `start` still runs: its
/// pid has the start time it recorded, in this boot (`boot`). A line
/// without these facts (an older server's) counts as alive: nothing can
/// be said of it.
fn server_alive(start: &Record, boot: Option<&str>) -> bool {
    let (Some(pid), Some(then)) = (start.pid, start.pid_start) else { return true };
    if let (Some(recorded), Some(boot)) = (start.boot_id.as_deref(), boot)
        && recorded != boot
    {
        return false;
    }
    // A zombie has ended: only its parent has not reaped it yet.
    let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| stat.rsplit_once(") ").map(|(_, rest)| rest.starts_with('Z')))
        .unwrap_or(false);
    !zombie && runtime_dir::start_ticks(pid) == Some(then)
}

/// This boot's id (`/proc/sys/kernel/random/boot_id`): pids and clock
/// ticks start again after a reboot.
fn boot_id() -> Option<String> {
    let text = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let id = text.trim();
    (!id.is_empty() && id.len() <= 64).then(|| id.to_owned())
}

/// The lines of the last `bound` bytes of the log at `path` and, if it is
/// shorter, of the end of its first rotation (`path.1`), oldest first. A
/// line cut by the bound is left out; lines that are not audit lines are
/// skipped.
fn read_tail(path: &Path, bound: u64) -> Vec<Record> {
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

/// The client that made the call, from its `initialize` request.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Client {
    name: String,
    version: String,
}

impl Client {
    /// The client `info` names, each part cut to 100 characters.
    pub fn new(info: &rmcp::model::Implementation) -> Client {
        Client { name: cut(&info.name, 100).0, version: cut(&info.version, 100).0 }
    }
}

/// The limits a command runs under, in seconds.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct LimitsSec {
    pub exec_sec: f64,
    pub no_output_sec: f64,
}

/// What a call's start line says, from what the tool knows before it runs
/// anything.
#[derive(Debug, Clone, Default)]
pub struct Start {
    tool: &'static str,
    /// `command`, `background`, `reset`, `input`, `key` or `poll` for
    /// `terminal`; the tool's name otherwise.
    call: &'static str,
    /// The HTTP principal that made the call (`None`: the local client).
    principal: Option<String>,
    /// The session, as `PRINCIPAL/NAME` for a principal's (the name a
    /// person's view gives it), so that two principals' sessions of one
    /// name stay apart in the log.
    session: Option<String>,
    command: Option<String>,
    key: Option<String>,
    input_bytes: Option<usize>,
    category: Option<String>,
    limits: Option<LimitsSec>,
}

impl Start {
    /// A `terminal` call on `session`: `call`, under `decision` (none for a
    /// background job, which has no limit).
    pub fn terminal(session: &str, call: &Call, decision: Option<&Decision>) -> Start {
        let (kind, command, key, input_bytes) = match call {
            Call::Run { command } if decision.is_none() => {
                ("background", Some(command), None, None)
            }
            Call::Run { command } => ("command", Some(command), None, None),
            Call::Reset { then } => ("reset", then.as_ref(), None, None),
            Call::Input(Input::Text(text)) => ("input", None, None, Some(text.len())),
            // Names only: text in a list is recorded by its size.
            Call::Input(keys @ Input::Keys(_)) => {
                let text = Some(keys.text_bytes()).filter(|&bytes| bytes > 0);
                ("key", None, keys.describe(), text)
            }
            Call::Poll => ("poll", None, None, None),
        };
        let about_command = command.is_some();
        Start {
            tool: "terminal",
            call: kind,
            session: Some(session.to_owned()),
            command: command.cloned(),
            key,
            input_bytes,
            ..Start::decided(decision.filter(|_| about_command))
        }
    }

    /// A `run` call of `command` under `decision`.
    pub fn run(command: &str, decision: &Decision) -> Start {
        Start {
            tool: "run",
            call: "run",
            command: Some(command.to_owned()),
            ..Start::decided(Some(decision))
        }
    }

    /// A `session_close` call on `session`.
    pub fn session_close(session: &str) -> Start {
        Start {
            tool: "session_close",
            call: "session_close",
            session: Some(session.to_owned()),
            ..Start::default()
        }
    }

    /// The same call made by `principal` (`None`: the local client): its
    /// session named `PRINCIPAL/NAME`, and the principal on its lines.
    pub fn by(mut self, principal: Option<&str>) -> Start {
        if let Some(principal) = principal {
            self.session = self.session.map(|session| format!("{principal}/{session}"));
            self.principal = Some(principal.to_owned());
        }
        self
    }

    fn decided(decision: Option<&Decision>) -> Start {
        Start {
            category: decision.map(|d| d.category.clone().unwrap_or_else(|| "explicit".to_owned())),
            limits: decision.map(|d| LimitsSec {
                exec_sec: d.limits.exec.as_secs_f64(),
                no_output_sec: d.limits.no_output.as_secs_f64(),
            }),
            ..Start::default()
        }
    }
}

/// What a call's end line says.
#[derive(Debug, Clone, Default, PartialEq)]
struct End {
    status: &'static str,
    exit_code: Option<i32>,
    reason: Option<&'static str>,
    detail: Option<String>,
    termination_mode: Option<&'static str>,
    /// How long the command ran (so far, if it still runs); else the call.
    duration: Option<Duration>,
    output_bytes: Option<u64>,
    /// The command the reply is about, when the call named none itself
    /// (input, a key, a poll) or a close stopped one.
    command: Option<String>,
    /// The command's number in its session, to match a later poll's end
    /// with the call that started it.
    command_number: Option<u64>,
}

/// A call that wrote its start line: its end line is written once, by an
/// `end_*` method or, if the call's task goes away first, on drop.
pub struct AuditCall {
    log: Option<Arc<AuditLog>>,
    id: String,
    start: Start,
    started: Instant,
    ended: bool,
}

impl AuditCall {
    /// A call nothing is written for: the server has no audit log.
    pub fn none() -> AuditCall {
        AuditCall {
            log: None,
            id: String::new(),
            start: Start::default(),
            started: Instant::now(),
            ended: true,
        }
    }

    /// Ends a `terminal` call with what the engine replied; `output_bytes`:
    /// what the command printed so far.
    pub fn end_terminal(
        mut self,
        executed: &Result<Reply, SessionError>,
        output_bytes: Option<u64>,
    ) {
        let end = terminal_end(&self.start, executed, output_bytes);
        self.finish(end);
    }

    /// Ends a `run` call with its outcome; `output_bytes`: both streams.
    pub fn end_run(mut self, outcome: &RunOutcome, output_bytes: u64) {
        self.finish(run_end(outcome, output_bytes));
    }

    /// Ends a `session_close` call: the session was closed (or `default`
    /// reset) with its last words, or the call was refused with `error`.
    pub fn end_session_close(mut self, closed: Result<(&Activity, bool), &str>, output_bytes: u64) {
        self.finish(close_end(closed, output_bytes));
    }

    fn finish(&mut self, mut end: End) {
        self.ended = true;
        let Some(log) = &self.log else { return };
        end.duration = end.duration.or(Some(self.started.elapsed()));
        let command =
            end.command.as_deref().map(|c| (log.mask)(c)).or_else(|| self.start.command.clone());
        let (command, command_chars) = cut_command(command.as_deref());
        let line = Line {
            time: rfc3339(SystemTime::now()),
            event: "end",
            id: &self.id,
            principal: self.start.principal.as_deref(),
            tool: self.start.tool,
            call: self.start.call,
            session: self.start.session.as_deref(),
            command,
            command_chars,
            key: self.start.key.as_deref(),
            status: Some(end.status),
            exit_code: end.exit_code,
            reason: end.reason,
            detail: end.detail.as_deref().map(|d| cut(&(log.mask)(d), 200).0),
            termination_mode: end.termination_mode,
            duration_ms: end.duration.map(|d| d.as_millis() as u64),
            output_bytes: end.output_bytes,
            command_number: end.command_number,
            ..Line::default()
        };
        log.write(&line);
        // A job that ended within the call that started it has no end to
        // report later.
        if self.start.call == "background"
            && end.status != "running"
            && let Some(session) = &self.start.session
        {
            log.jobs.lock().unwrap_or_else(PoisonError::into_inner).remove(session);
        }
    }
}

impl Drop for AuditCall {
    /// The call's task went away before it could say how it ended: the
    /// client cancelled it or the server is stopping.
    fn drop(&mut self) {
        if !self.ended {
            self.finish(End { status: "cancelled", reason: Some("cancel"), ..End::default() });
        }
    }
}

/// The end of a `terminal` call, from the engine's reply.
fn terminal_end(
    start: &Start,
    executed: &Result<Reply, SessionError>,
    output_bytes: Option<u64>,
) -> End {
    let reply = match executed {
        Ok(reply) => reply,
        Err(SessionError::Cancelled) => {
            return End { status: "not_executed", reason: Some("cancel"), ..End::default() };
        }
        Err(err) => {
            return End {
                status: "refused",
                reason: Some("not_executed"),
                detail: Some(err.to_string()),
                ..End::default()
            };
        }
    };
    let about_command = !matches!(reply.outcome, Outcome::Idle | Outcome::NotExecuted { .. });
    let mut end = End {
        exit_code: reply.exit_code(),
        duration: about_command.then_some(reply.duration),
        output_bytes: output_bytes.filter(|_| about_command),
        command: (start.command.is_none() && !reply.command.is_empty())
            .then(|| reply.command.clone()),
        command_number: reply.number.filter(|_| about_command),
        ..End::default()
    };
    (end.status, end.reason) = match &reply.outcome {
        Outcome::Idle => ("idle", (start.call == "reset").then_some("reset")),
        Outcome::Completed { exit_code } => {
            let reason = if start.key.as_deref() == Some("C-c") {
                Some("C-c")
            } else {
                signal_of(*exit_code).map(|_| "signal")
            };
            ("completed", reason)
        }
        Outcome::Killed { limit, mode, .. } => {
            end.termination_mode = Some(mode.as_str());
            end.detail = Some(format!("ran unwatched past its limit of {} s", limit.as_secs_f64()));
            ("killed", Some("limit"))
        }
        Outcome::Running { why } => {
            let reason = match why {
                WaitEnded::Cancelled => Some("cancel"),
                WaitEnded::SessionClosing => Some("close"),
                WaitEnded::NoNewOutput(_)
                | WaitEnded::Timeout(_)
                | WaitEnded::MaxWait(_)
                | WaitEnded::FullScreen => None,
            };
            ("running", reason)
        }
        Outcome::WaitingForInput { .. } => ("waiting_for_input", None),
        Outcome::Incomplete => ("incomplete", None),
        Outcome::IntegrationDamaged => ("integration_damaged", None),
        Outcome::NeverStarted { .. } => ("not_executed", Some("never_started")),
        Outcome::NotExecuted { command, why } => {
            end.command = Some(command.clone());
            end.exit_code = None;
            end.detail = Some(match why {
                NotRun::CommandRunning { .. } => "another command is running".to_owned(),
                NotRun::Incomplete => "an incomplete command is held".to_owned(),
                NotRun::NotAtPrompt { pid, command_line } => {
                    format!("the shell is not at its prompt: {pid} {command_line}")
                }
                NotRun::IntegrationDamaged => "the shell integration is damaged".to_owned(),
                NotRun::PersonHolds { .. } => "a person holds the session for writing".to_owned(),
            });
            ("not_executed", Some("not_executed"))
        }
    };
    if let Some(signal) = end.exit_code.and_then(signal_of).filter(|_| end.reason == Some("signal"))
    {
        end.detail = Some(format!("signal {signal}"));
    }
    end
}

/// The end of a `run` call, from its outcome.
fn run_end(outcome: &RunOutcome, output_bytes: u64) -> End {
    let (reason, detail) = match outcome.status() {
        RunStatus::Timeout => {
            (Some("limit"), outcome.timeout_reason().map(|reason| reason.as_str().to_owned()))
        }
        RunStatus::Error if outcome.cancelled() => {
            (Some("cancel"), Some("killed by the client's cancellation".to_owned()))
        }
        RunStatus::Error => (Some("not_executed"), None),
        RunStatus::Success => match signal_of(outcome.exit_code()) {
            Some(signal) => (Some("signal"), Some(format!("signal {signal}"))),
            None => (None, None),
        },
    };
    End {
        status: outcome.status().as_str(),
        exit_code: Some(outcome.exit_code()),
        reason,
        detail,
        termination_mode: outcome.termination_mode().map(|mode| mode.as_str()),
        duration: Some(outcome.duration),
        output_bytes: Some(output_bytes),
        ..End::default()
    }
}

/// The end of a `session_close` call.
fn close_end(closed: Result<(&Activity, bool), &str>, output_bytes: u64) -> End {
    match closed {
        Ok((activity, reset)) => {
            let command = match activity {
                Activity::Running { command, .. } => Some(command.clone()),
                _ => None,
            };
            End {
                status: if reset { "reset" } else { "closed" },
                reason: Some("close"),
                detail: command.is_some().then(|| "its running command was stopped".to_owned()),
                output_bytes: Some(output_bytes),
                command,
                ..End::default()
            }
        }
        Err(error) => End {
            status: "refused",
            reason: Some("not_executed"),
            detail: Some(error.to_owned()),
            ..End::default()
        },
    }
}

/// The signal a shell's exit code says killed the command (128 + N).
fn signal_of(exit_code: i32) -> Option<i32> {
    (129..=128 + 64).contains(&exit_code).then(|| exit_code - 128)
}

/// A command as a line holds it: cut to [`COMMAND_BOUND`] characters;
/// when cut, how many characters it had.
fn cut_command(command: Option<&str>) -> (Option<String>, Option<usize>) {
    let Some(command) = command else { return (None, None) };
    let (text, was_cut) = cut(command, COMMAND_BOUND);
    (Some(text), was_cut.then(|| command.chars().count()))
}

/// `text`'s first `bound` characters, and whether anything was left out.
fn cut(text: &str, bound: usize) -> (String, bool) {
    match text.char_indices().nth(bound) {
        Some((at, _)) => (text[..at].to_owned(), true),
        None => (text.to_owned(), false),
    }
}

/// One line of the log, start or end: fields that do not apply are left
/// out.
#[derive(Debug, Default, Serialize)]
struct Line<'a> {
    time: String,
    event: &'static str,
    id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    client: Option<&'a Client>,
    /// The HTTP principal that made the call.
    #[serde(skip_serializing_if = "Option::is_none")]
    principal: Option<&'a str>,
    #[serde(skip_serializing_if = "str::is_empty")]
    tool: &'static str,
    #[serde(skip_serializing_if = "str::is_empty")]
    call: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    session: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    command: Option<String>,
    /// The command's length in characters, when it was cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    command_chars: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    key: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    input_bytes: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    category: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    limits: Option<LimitsSec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    exit_code: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    termination_mode: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    duration_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    command_number: Option<u64>,
    /// `server_start` and `server_died`: the server's process id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pid: Option<u32>,
    /// `server_start`: the server's start time in clock ticks after boot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pid_start: Option<u64>,
    /// `server_start`: the boot the server runs in.
    #[serde(skip_serializing_if = "Option::is_none")]
    boot_id: Option<String>,
    /// `server_start`: where the server saves full outputs.
    #[serde(skip_serializing_if = "Option::is_none")]
    full_output_dir: Option<String>,
    /// `server_start`: the prefix of its files there.
    #[serde(skip_serializing_if = "Option::is_none")]
    output_prefix: Option<String>,
    /// `server_died`: how many commands it was running.
    #[serde(skip_serializing_if = "Option::is_none")]
    commands: Option<usize>,
}

/// `shellkeep audit`: prints one line per command of `query.file` and its
/// rotations (time, session, status, exit code, duration, command), oldest
/// first. A command whose call handed control back while it ran shows the
/// end a later call on its session reported.
pub fn print(query: &AuditQuery, out: &mut impl Write) -> anyhow::Result<()> {
    let since = query.since.as_deref().map(parse_span).transpose()?;
    let now = SystemTime::now();
    let cutoff = since.map(|span| now.checked_sub(span).unwrap_or(UNIX_EPOCH));
    let mut records = Vec::new();
    let mut unreadable = 0;
    let file = match &query.file {
        Some(file) => file.clone(),
        None => default_log().context(
            "no audit log named, and no default one (neither XDG_STATE_HOME nor HOME is set): \
             name the file",
        )?,
    };
    for path in log_files(&file)? {
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

/// `file`'s rotations, oldest first, then `file` itself.
fn log_files(file: &Path) -> anyhow::Result<Vec<PathBuf>> {
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
struct Record {
    time: Option<String>,
    event: String,
    id: String,
    #[serde(default)]
    tool: String,
    #[serde(default)]
    call: String,
    session: Option<String>,
    command: Option<String>,
    key: Option<String>,
    input_bytes: Option<u64>,
    status: Option<String>,
    exit_code: Option<i32>,
    duration_ms: Option<u64>,
    command_number: Option<u64>,
    pid: Option<u32>,
    pid_start: Option<u64>,
    boot_id: Option<String>,
    full_output_dir: Option<String>,
    output_prefix: Option<String>,
}

impl Record {
    /// The server that wrote it: the part of the id before the dash.
    fn server(&self) -> &str {
        self.id.split('-').next().unwrap_or("")
    }
}

/// One command as `shellkeep audit` prints it.
#[derive(Debug, Clone, PartialEq)]
struct Row {
    /// The server that ran it (not printed).
    server: String,
    /// The kind of call that started it (not printed).
    call: String,
    time: Option<String>,
    session: String,
    status: String,
    exit_code: Option<i32>,
    duration_ms: Option<u64>,
    command: String,
}

impl Row {
    /// Whether it failed: a non-zero exit code, or a status that is not a
    /// success (killed, timeout, error, not executed, refused, cancelled,
    /// integration damaged).
    fn failed(&self) -> bool {
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
    fn is_command(&self) -> bool {
        matches!(self.call.as_str(), "command" | "background" | "run")
    }

    /// Whether, as far as the log says, it had not ended.
    fn is_open(&self) -> bool {
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
fn rows(records: &[Record]) -> Vec<Row> {
    let mut order: Vec<&str> = Vec::new();
    let mut first_index = HashMap::new();
    let mut starts = HashMap::new();
    let mut ends = HashMap::new();
    let mut job_ends = HashMap::new();
    // (server, session, command number) → the last end that says how the
    // command finished.
    let mut finished = HashMap::new();
    // (server, session) → the calls that closed or reset it, in order.
    let mut stops: HashMap<(&str, &str), Vec<(usize, &Record)>> = HashMap::new();
    // server → how it ended.
    let mut fates = HashMap::new();
    for (index, record) in records.iter().enumerate() {
        let id = record.id.as_str();
        match record.event.as_str() {
            "start" | "end" if !first_index.contains_key(id) => {
                first_index.insert(id, index);
                order.push(id);
            }
            _ => {}
        }
        match record.event.as_str() {
            "start" => {
                starts.insert(id, record);
            }
            "end" => {
                ends.insert(id, record);
                if let (Some(session), Some(number), Some("completed" | "killed")) =
                    (&record.session, record.command_number, record.status.as_deref())
                {
                    finished.insert((record.server(), session.as_str(), number), record);
                }
                let closed = record.tool == "session_close"
                    && matches!(record.status.as_deref(), Some("closed" | "reset"));
                let reset = record.call == "reset" && record.status.as_deref() == Some("idle");
                if let Some(session) = record.session.as_deref().filter(|_| closed || reset) {
                    stops.entry((record.server(), session)).or_default().push((index, record));
                }
            }
            "job_end" => {
                job_ends.insert(id, record);
            }
            "server_died" => {
                fates.insert(record.server(), "server_died");
            }
            "server_end" => {
                fates.entry(record.server()).or_insert("server_ended");
            }
            _ => {}
        }
    }
    let mut rows = Vec::new();
    for id in order {
        let (start, end) = (starts.get(id).copied(), ends.get(id).copied());
        let Some(first) = start.or(end) else { continue };
        if first.call == "poll" {
            continue;
        }
        let end = job_ends.get(id).copied().or(end);
        let end = end.map(|end| match (&end.session, end.command_number, end.status.as_deref()) {
            (Some(session), Some(number), Some("running" | "waiting_for_input")) => {
                finished.get(&(end.server(), session.as_str(), number)).copied().unwrap_or(end)
            }
            _ => end,
        });
        let command = match (first.command.as_deref(), first.key.as_deref(), first.input_bytes) {
            (Some(command), _, _) => command.to_owned(),
            (None, Some(key), _) => format!("<key {key}>"),
            (None, None, Some(bytes)) => format!("<input: {bytes} bytes>"),
            (None, None, None) => format!("<{}>", first.call.replace('_', " ")),
        };
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
            command,
        };
        if row.is_open() {
            let since = first_index.get(id).copied().unwrap_or(0);
            let stop = first.session.as_deref().and_then(|session| {
                stops.get(&(first.server(), session))?.iter().find(|(at, _)| *at > since)
            });
            if let Some((_, stop)) = stop {
                row.status = match stop.status.as_deref() {
                    Some("closed") => "closed".to_owned(),
                    _ => "reset".to_owned(),
                };
                row.exit_code = None;
                row.duration_ms = between(first.time.as_deref(), stop.time.as_deref());
            } else if let Some(fate) = fates.get(first.server()) {
                row.status = (*fate).to_owned();
                row.exit_code = None;
                row.duration_ms = None;
            }
        }
        rows.push(row);
    }
    rows
}

/// Milliseconds from `from` to `to` (RFC 3339 times), if both are known.
fn between(from: Option<&str>, to: Option<&str>) -> Option<u64> {
    let (from, to) = (parse_rfc3339(from?)?, parse_rfc3339(to?)?);
    Some(to.duration_since(from).ok()?.as_millis() as u64)
}

/// A span such as `90s`, `30m`, `1h`, `2d` (a bare number is seconds).
fn parse_span(text: &str) -> anyhow::Result<Duration> {
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

/// `time` in RFC 3339, UTC, to the millisecond: `2026-11-25T14:41:36.123Z`.
pub(crate) fn rfc3339(time: SystemTime) -> String {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (days, rest) = (secs / 86400, secs % 86400);
    let (year, month, day) = civil_from_days(days as i64);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        since.subsec_millis()
    )
}

/// The time an [`rfc3339`] string names (fractions of a second optional).
fn parse_rfc3339(text: &str) -> Option<SystemTime> {
    let text = text.strip_suffix('Z')?;
    let (date, time) = text.split_once('T')?;
    let mut date = date.splitn(3, '-').map(str::parse::<i64>);
    let (year, month, day) = (date.next()?.ok()?, date.next()?.ok()?, date.next()?.ok()?);
    let (time, fraction) = time.split_once('.').unwrap_or((time, ""));
    let mut time = time.splitn(3, ':').map(str::parse::<u64>);
    let (hour, minute, second) = (time.next()?.ok()?, time.next()?.ok()?, time.next()?.ok()?);
    let millis = match fraction {
        "" => 0,
        digits => format!("{digits:0<3}")[..3].parse::<u64>().ok()?,
    };
    let days = u64::try_from(days_from_civil(year, month, day)).ok()?;
    let secs = days * 86400 + hour * 3600 + minute * 60 + second;
    Some(UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_millis(millis))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * (month + if month > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The date of a day since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let days = days + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests;

/// The audit log a server keeps when none is named:
/// `audit.jsonl` in the state directory ([`crate::config::state_dir`]).
pub fn default_log() -> Option<PathBuf> {
    Some(crate::config::state_dir()?.join("audit.jsonl"))
}
