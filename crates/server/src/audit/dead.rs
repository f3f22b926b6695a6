//! Servers of one log that died: a starting server reads the log's tail
//! (under an exclusive lock, so that two servers starting together do not
//! both claim the same dead one) for earlier servers with a start line, no
//! end line, and a pid that is gone or belongs to another process now (its
//! start time differs, or the machine rebooted).
//!
//! It does not word the notice (`render` does). It holds that each dead
//! server gets its `server_died` line once, and that one start claims at
//! most [`MAX_DEAD_SERVERS`], the oldest first.

use std::collections::HashSet;
use std::fs::File;
use std::time::SystemTime;

use super::read::{Record, read_tail, rows};
use super::{AuditLog, Line, MAX_DEAD_SERVERS, TAIL_BYTES, rfc3339};
pub(crate) use crate::render::{DeadCommand, DeadServer};

impl AuditLog {
    /// Reads the log's tail under an exclusive lock, writes a `server_died`
    /// line for each earlier server that is gone without an end line, and
    /// returns those that were running commands. Reading and writing under
    /// one lock means a dead server is claimed by one starting server only.
    pub(super) fn claim_dead_servers(&self) -> Vec<DeadServer> {
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
}

/// The servers in `records` (the log's tail, oldest first) other than
/// `own` that started, have no `server_end` or `server_died` line, and are
/// not `alive`: at most [`MAX_DEAD_SERVERS`], each with the commands the
/// log shows it running.
pub(super) fn dead_servers(
    records: &[Record],
    own: &str,
    alive: &dyn Fn(&Record) -> bool,
) -> Vec<DeadServer> {
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
pub(super) fn server_alive(start: &Record, boot: Option<&str>) -> bool {
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
    !zombie && shellkeep_engine::start_ticks(pid) == Some(then)
}

/// This boot's id (`/proc/sys/kernel/random/boot_id`): pids and clock
/// ticks start again after a reboot.
pub(super) fn boot_id() -> Option<String> {
    let text = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let id = text.trim();
    (!id.is_empty() && id.len() <= 64).then(|| id.to_owned())
}
