//! The audit trail of one server: one JSON line when a tool call that runs
//! something starts and one when it ends (the two share an `id`), its own
//! `server_start` and `server_end` lines, and a `server_died` line for an
//! earlier server of the same log found gone (`dead`). By job: `call`
//! builds a call's lines, `rotate` appends them to the file and rotates it,
//! `read` reads them back (`shellkeep audit`); this module holds the log
//! every call shares and the line format (its flags, as written, are
//! `cli`'s).
//!
//! It runs nothing and words no reply. It holds that a call's start line is
//! written before the command starts, straight to the file (`O_APPEND`, no
//! buffer of ours), so that a server killed mid-command leaves it; that a
//! write error never fails a call; and that every string of a line is
//! masked ([`AuditLog::write`]). A principal's session is named
//! `PRINCIPAL/NAME`, as `shellkeep ls` names it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context;
use serde::Serialize;
use shellkeep_engine::random_hex;

mod call;
mod dead;
mod read;
mod rotate;

pub(crate) use crate::cli::{AuditArgs, AuditQuery};
use call::LimitsSec;
pub(crate) use call::{AuditCall, Client, Start};
pub(crate) use dead::DeadServer;
pub(crate) use read::print;
use rotate::Writer;

/// What hides secrets in text written to the log: the identity unless the
/// server is given a masker.
pub(crate) type Mask = Arc<dyn Fn(&str) -> String + Send + Sync>;

/// The identity: nothing is masked (for tests; the server masks with its
/// secrets).
#[cfg(test)]
pub(crate) fn no_mask() -> Mask {
    Arc::new(str::to_owned)
}

/// Characters of a command kept in a line; a longer one is cut, and the
/// line says how long it was.
pub(crate) const COMMAND_BOUND: usize = 2000;

/// The smallest `--audit-log-max-mib` (10 KiB: room for a few lines).
const MIN_MIB: f64 = 0.01;
/// The largest `--audit-log-max-mib`.
const MAX_MIB: f64 = 1_048_576.0;
/// The most rotated files `--audit-log-keep` may ask for.
const MAX_KEEP: u32 = 1000;
/// Bytes of the log's end (the current file, then the last rotation) a
/// starting server reads to find servers that died.
pub(crate) const TAIL_BYTES: u64 = 1024 * 1024;
/// The most dead servers one start claims and reports (the oldest first;
/// the next start claims the rest): the notice stays a few KiB.
const MAX_DEAD_SERVERS: usize = 3;

/// The audit log of one server: where it goes, its bounds, and the open
/// file. Shared by every call; each line is one `write` under a lock.
pub(crate) struct AuditLog {
    /// The log's path (its tail is read back at start).
    path: PathBuf,
    mask: Mask,
    /// Names this server in every id (`<server>-<n>`): several servers may
    /// share one file.
    server: String,
    next_id: AtomicU64,
    /// The id of the call that started each running background job, by
    /// session: the job's end line carries it.
    jobs: Mutex<HashMap<String, String>>,
    /// The open file; each line is one `write` under this lock.
    writer: Mutex<Writer>,
    /// Earlier servers found dead at start with commands running, until
    /// the first reply takes them.
    dead: Mutex<Vec<DeadServer>>,
}

impl AuditLog {
    /// The log `args` ask for, opened (created private) now so that a bad
    /// path stops start-up with a clear error; the default log when none
    /// is named (one that cannot be opened is left out with a warning: a
    /// read-only home must not stop the server); `None` with
    /// `--no-audit-log`.
    pub(crate) fn open(args: &AuditArgs, mask: Mask) -> anyhow::Result<Option<Arc<AuditLog>>> {
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
    fn with_limits(
        path: &Path,
        max_bytes: u64,
        keep: u32,
        mask: Mask,
    ) -> std::io::Result<AuditLog> {
        let writer = Writer::open(path, max_bytes, keep)?;
        Ok(AuditLog {
            path: path.to_owned(),
            mask,
            server: random_hex(4)?,
            next_id: AtomicU64::new(1),
            jobs: Mutex::default(),
            writer: Mutex::new(writer),
            dead: Mutex::default(),
        })
    }

    /// Writes this server's `server_start` line, then looks for earlier
    /// servers of this log that died (see the module's header): each gets
    /// its `server_died` line now, and those that had commands running are
    /// kept for [`AuditLog::take_dead_servers`].
    pub(crate) fn server_started(&self, facts: &ServerFacts) {
        let pid = std::process::id();
        let id = format!("{}-0", self.server);
        let line = Line {
            time: rfc3339(SystemTime::now()),
            event: "server_start",
            id: &id,
            pid: Some(pid),
            pid_start: shellkeep_engine::start_ticks(pid),
            boot_id: dead::boot_id(),
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
    pub(crate) fn server_ended(&self) {
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
    pub(crate) fn take_dead_servers(&self) -> Vec<DeadServer> {
        std::mem::take(&mut *self.dead.lock().unwrap_or_else(PoisonError::into_inner))
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
        crate::render::mask_json(&mut value, &*self.mask);
        let mut text = value.to_string();
        text.push('\n');
        self.writer.lock().unwrap_or_else(PoisonError::into_inner).write(text.as_bytes());
    }
}

/// What a server's `server_start` line says of where its outputs go.
#[derive(Debug, Clone)]
pub(crate) struct ServerFacts {
    /// The directory its full outputs are saved in.
    pub full_output_dir: PathBuf,
    /// The prefix of its files there (`shellkeep-<pid>-<hex>`).
    pub output_prefix: String,
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

/// `time` in RFC 3339, UTC, to the millisecond: `2026-11-25T14:41:36.123Z`
/// (a time before 1970 is written as 1970's first instant).
pub(crate) fn rfc3339(time: SystemTime) -> String {
    humantime::format_rfc3339_millis(time.max(UNIX_EPOCH)).to_string()
}

/// The time an [`rfc3339`] string names (fractions of a second optional).
fn parse_rfc3339(text: &str) -> Option<SystemTime> {
    humantime::parse_rfc3339(text).ok()
}

/// The audit log a server keeps when none is named:
/// `audit.jsonl` in the state directory ([`crate::config::state_dir`]).
pub(crate) fn default_log() -> Option<PathBuf> {
    Some(crate::config::state_dir()?.join("audit.jsonl"))
}

#[cfg(test)]
mod tests;
