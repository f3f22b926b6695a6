//! Reading `/proc/PID/stat`: the live members of a process group or
//! session, the groups a command orphaned, start times in clock ticks since
//! boot, and [`Root`] (a pid with its start time). Reads only; its parser
//! also gives `runtime_dir` the start times that name server directories.

use std::collections::HashSet;
use std::time::Duration;

/// Process ids of the live (not zombie) processes in group `pgid`.
///
/// Zombies are not counted: where PID 1 does not reap orphans, a killed
/// grandchild can stay a zombie for ever, and it is dead all the same.
pub(crate) fn live_group_members(pgid: i32) -> Vec<i32> {
    scan_proc(|stat| stat.pgrp == pgid)
}

/// Process groups with a live member in session `sid`.
#[cfg(test)]
pub(crate) fn session_groups(sid: i32) -> std::collections::BTreeSet<i32> {
    let mut groups = std::collections::BTreeSet::new();
    for_each_proc(|stat| {
        if stat.session == sid {
            groups.insert(stat.pgrp);
        }
    });
    groups
}

/// Process groups in the session of the shell `shell_pid` that are not
/// the jobs of a shell: their leader is gone or was orphaned (its parent is
/// no longer in the session: `(sleep 300 &)` leaves such a group behind),
/// and some member started at or after `since_ticks`. These belong to the
/// command that started then. A group whose leader's parent is the shell,
/// or a nested shell in the session, is that shell's job.
pub(crate) fn orphaned_groups(shell_pid: i32, since_ticks: u64) -> Vec<i32> {
    let mut members = Vec::new();
    let mut in_session = HashSet::new();
    for_each_proc(|stat| {
        if stat.session == shell_pid {
            in_session.insert(stat.pid);
            if stat.pgrp != shell_pid {
                members.push((stat.pid, stat.ppid, stat.pgrp, stat.start_ticks));
            }
        }
    });
    let mut groups: Vec<i32> = members
        .iter()
        .filter(|&&(_, _, pgrp, start)| {
            let leader = members.iter().find(|&&(pid, ..)| pid == pgrp);
            start >= since_ticks && leader.is_none_or(|&(_, ppid, ..)| !in_session.contains(&ppid))
        })
        .map(|&(_, _, pgrp, _)| pgrp)
        .collect();
    groups.sort_unstable();
    groups.dedup();
    groups
}

/// Live processes in session `sid`.
pub(crate) fn live_session_members(sid: i32) -> Vec<i32> {
    scan_proc(|stat| stat.session == sid)
}

/// Live processes of session `sid` and their descendants (in sessions of
/// their own too: a program that gives its child a terminal of its own),
/// at most `limit` of them. One pass over `/proc`.
pub(crate) fn session_tree(sid: i32, limit: usize) -> Vec<i32> {
    let mut all = Vec::new();
    for_each_proc(|stat| all.push((stat.pid, stat.ppid, stat.session)));
    let mut tree: HashSet<i32> =
        all.iter().filter(|&&(_, _, session)| session == sid).map(|&(pid, ..)| pid).collect();
    // Each round adds one more generation; a parent listed after its
    // child is found in the next.
    loop {
        let before = tree.len();
        for &(pid, ppid, _) in &all {
            if tree.len() >= limit {
                break;
            }
            if tree.contains(&ppid) {
                tree.insert(pid);
            }
        }
        if tree.len() == before || tree.len() >= limit {
            break;
        }
    }
    let mut pids: Vec<i32> = tree.into_iter().collect();
    pids.sort_unstable();
    pids.truncate(limit);
    pids
}

/// The current time as clock ticks since boot, comparable with the start
/// times in `/proc/PID/stat`.
pub(crate) fn boot_ticks_now() -> u64 {
    let now = nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME)
        .map(|t| Duration::new(t.tv_sec() as u64, t.tv_nsec() as u32))
        .unwrap_or_default();
    let ticks_per_second = clock_ticks_per_second();
    now.as_secs() * ticks_per_second
        + u64::from(now.subsec_nanos()) * ticks_per_second / 1_000_000_000
}

fn clock_ticks_per_second() -> u64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK).ok().flatten().map_or(100, |t| t as u64)
}

/// A process identified by its pid and its start time, so that a pid the
/// kernel has given to a new process since is not taken for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Root {
    pub(super) pid: i32,
    pub(super) start_ticks: u64,
}

impl Root {
    /// Process `pid` started at `start_ticks` (clock ticks since boot).
    pub fn at(pid: i32, start_ticks: u64) -> Root {
        Root { pid, start_ticks }
    }

    /// Its pid.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// When it started, in clock ticks since boot.
    pub fn start_ticks(&self) -> u64 {
        self.start_ticks
    }

    /// Process `pid` as it is now; `None` if it is gone.
    pub fn of(pid: i32) -> Option<Root> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        parse_stat(pid, &text).map(|stat| Root { pid, start_ticks: stat.start_ticks })
    }
}

/// The fields of `/proc/PID/stat` we use.
pub(super) struct ProcStat {
    pub(super) pid: i32,
    pub(super) state: u8,
    pub(super) ppid: i32,
    pub(super) pgrp: i32,
    pub(super) session: i32,
    pub(super) start_ticks: u64,
}

pub(super) fn scan_proc(mut keep: impl FnMut(&ProcStat) -> bool) -> Vec<i32> {
    let mut pids = Vec::new();
    for_each_proc(|stat| {
        if keep(stat) {
            pids.push(stat.pid);
        }
    });
    pids
}

/// Calls `visit` for every live, non-zombie process on the machine.
pub(super) fn for_each_proc(mut visit: impl FnMut(&ProcStat)) {
    for_each_stat(|stat| {
        if stat.state != b'Z' && stat.state != b'X' {
            visit(stat);
        }
    });
}

/// Calls `visit` for every process on the machine, zombies included.
pub(super) fn for_each_stat(mut visit: impl FnMut(&ProcStat)) {
    let Ok(entries) = std::fs::read_dir("/proc") else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        if let Some(stat) = parse_stat(pid, &text) {
            visit(&stat);
        }
    }
}

/// The start time of process `pid` in clock ticks since boot (field 22 of
/// `/proc/PID/stat`), or `None` if it does not exist.
pub(crate) fn start_ticks(pid: i32) -> Option<u64> {
    Root::of(pid).map(|root| root.start_ticks)
}

/// The longest ancestry [`descends_from`] follows.
const ANCESTRY_LIMIT: usize = 4096;

/// Whether process `pid` (a zombie too) descends from `ancestor`, following
/// parents in `/proc/PID/stat`, at most [`ANCESTRY_LIMIT`] of them.
pub(super) fn descends_from(pid: i32, ancestor: i32) -> bool {
    let mut current = pid;
    for _ in 0..ANCESTRY_LIMIT {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{current}/stat")) else {
            return false;
        };
        let Some(stat) = parse_stat(current, &text) else { return false };
        if stat.ppid == ancestor {
            return true;
        }
        if stat.ppid <= 1 {
            return false;
        }
        current = stat.ppid;
    }
    false
}

/// The real user id of process `pid` (`Uid:` in `/proc/PID/status`, right
/// also for a non-dumpable process), `None` if it is gone.
pub(super) fn real_uid(pid: i32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find_map(|line| line.strip_prefix("Uid:"))?;
    line.split_ascii_whitespace().next()?.parse().ok()
}

/// The longest command line [`command_line`] returns, in characters.
pub(crate) const COMMAND_LINE_LIMIT: usize = 200;

/// Process `pid`'s command line, its arguments joined by spaces and cut at
/// `COMMAND_LINE_LIMIT` characters (with `…`), control characters shown
/// escaped; its name in brackets (`[kill]`) when it has no arguments to
/// read (a zombie, a kernel thread); `None` when it is gone.
pub fn command_line(pid: i32) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let raw = &raw[..raw.len().min(COMMAND_LINE_LIMIT * 4)];
    let mut line = String::from_utf8_lossy(raw)
        .trim_end_matches('\0')
        .split('\0')
        .collect::<Vec<_>>()
        .join(" ");
    if line.is_empty() {
        let name = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
        line = format!("[{}]", name.trim_end());
    }
    let mut shown: String = line
        .chars()
        .take(COMMAND_LINE_LIMIT)
        .flat_map(|c| if c.is_control() { c.escape_default().collect::<Vec<_>>() } else { vec![c] })
        .collect();
    if line.chars().count() > COMMAND_LINE_LIMIT {
        shown.push('…');
    }
    Some(shown)
}

/// Parses `/proc/PID/stat`. The command name is in parentheses and may
/// itself contain spaces and parentheses, so fields are counted from the
/// last `)`.
pub(super) fn parse_stat(pid: i32, text: &str) -> Option<ProcStat> {
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    // After the name: state(3) ppid(4) pgrp(5) session(6) ... starttime(22).
    Some(ProcStat {
        pid,
        state: *fields.first()?.as_bytes().first()?,
        ppid: fields.get(1)?.parse().ok()?,
        pgrp: fields.get(2)?.parse().ok()?,
        session: fields.get(3)?.parse().ok()?,
        start_ticks: fields.get(19)?.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::disallowed_methods, reason = "a plain child of the test, stopped by the test")]
    fn a_child_descends_from_us_and_its_command_line_is_read() {
        let mut child = std::process::Command::new("sleep").arg("30.5").spawn().expect("sleep");
        let pid = child.id() as i32;
        let me = std::process::id() as i32;
        assert!(descends_from(pid, me));
        assert!(!descends_from(me, pid));
        // Right after the fork the child may not have finished its exec
        // (its command line is then still empty or ours): wait for it,
        // with a deadline.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while command_line(pid).as_deref() != Some("sleep 30.5")
            && std::time::Instant::now() < deadline
        {
            std::thread::yield_now();
        }
        assert_eq!(command_line(pid).as_deref(), Some("sleep 30.5"));
        child.kill().expect("kill");
        child.wait().expect("wait");
        assert!(!descends_from(pid, me), "gone");
        assert_eq!(command_line(pid), None);
    }

    #[test]
    fn parses_stat_with_awkward_names() {
        let text =
            "1234 (a) b (c)) S 1 1234 1234 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 98765 1000 10";
        let stat = parse_stat(1234, text).expect("parses");
        assert_eq!(
            (stat.state, stat.pgrp, stat.session, stat.start_ticks),
            (b'S', 1234, 1234, 98765)
        );
    }
}
