//! Building child processes and signalling process groups.
//!
//! This is the only module that builds a child `Command`, sends signals or
//! contains `unsafe` code. Every child we start gets the same non-interactive
//! environment, its own process group (or, for a PTY shell, its own session)
//! and a parent-death signal, so that a server killed with SIGKILL does not
//! leave it behind; the one exception is the orphan guard, which exists to
//! outlive the server. It does not know about sessions, policies or MCP.
#![allow(unsafe_code)]

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::time::Instant;

/// Environment set for every child we start, terminal and one-shot alike.
///
/// Pagers and prompts are the classic ways an agent's command hangs forever
/// on a terminal nobody is watching; these defaults turn them off.
pub const NONINTERACTIVE_ENV: &[(&str, &str)] = &[
    ("PAGER", "cat"),
    ("GIT_PAGER", "cat"),
    ("MANPAGER", "cat"),
    ("SYSTEMD_PAGER", ""),
    ("GH_PAGER", "cat"),
    ("GIT_TERMINAL_PROMPT", "0"),
    ("GIT_EDITOR", "true"),
    ("DEBIAN_FRONTEND", "noninteractive"),
    ("PYTHONUNBUFFERED", "1"),
    ("PIP_NO_INPUT", "1"),
];

/// How a process group we stopped went away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TerminationMode {
    /// It exited within the grace period after SIGTERM.
    Soft,
    /// It was still alive after the grace period and got SIGKILL.
    Hard,
}

impl TerminationMode {
    /// The seed's spelling: `"soft"` or `"hard"`.
    pub fn as_str(self) -> &'static str {
        match self {
            TerminationMode::Soft => "soft",
            TerminationMode::Hard => "hard",
        }
    }
}

/// A command for `program` that starts in a new process group of its own,
/// with the non-interactive environment and a parent-death signal.
pub fn group_command(program: impl AsRef<OsStr>) -> tokio::process::Command {
    #[allow(clippy::disallowed_methods)]
    let mut command = tokio::process::Command::new(program);
    command.envs(NONINTERACTIVE_ENV.iter().copied());
    command.process_group(0);
    let parent = std::process::id();
    // SAFETY: the closure runs in the child between fork and exec and only
    // calls async-signal-safe functions (prctl, getppid, _exit).
    unsafe {
        command.pre_exec(move || die_with_parent(parent));
    }
    command
}

/// A command for `program` that runs as the leader of a new session whose
/// controlling terminal is the PTY `slave`, with the non-interactive
/// environment and a parent-death signal.
pub fn pty_command(
    program: impl AsRef<OsStr>,
    slave: &OwnedFd,
) -> std::io::Result<tokio::process::Command> {
    #[allow(clippy::disallowed_methods)]
    let mut command = tokio::process::Command::new(program);
    command.envs(NONINTERACTIVE_ENV.iter().copied());
    command
        .stdin(Stdio::from(slave.try_clone()?))
        .stdout(Stdio::from(slave.try_clone()?))
        .stderr(Stdio::from(slave.try_clone()?));
    let parent = std::process::id();
    // SAFETY: the closure runs in the child between fork and exec and only
    // calls async-signal-safe functions (setsid, ioctl, prctl, getppid).
    unsafe {
        command.pre_exec(move || {
            nix::unistd::setsid()?;
            // Make the PTY (already dup'ed onto fd 0) the controlling
            // terminal of the new session, so job control and ^C work.
            if libc::ioctl(0, libc::TIOCSCTTY as _, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            die_with_parent(parent)
        });
    }
    Ok(command)
}

/// A command for the orphan guard: `program` in a new process group of its
/// own, stdin piped (closing it is how the guard learns the server has
/// ended), stdout to `/dev/null` and stderr inherited for its logs.
///
/// Unlike every other child it gets no parent-death signal, because its whole
/// job is to outlive the server. Its own process group keeps a ^C meant for
/// the server's terminal, or a kill of the server's group, from reaching it.
/// Its stdout is never the server's: that is the MCP channel.
pub fn guard_command(program: impl AsRef<OsStr>) -> std::process::Command {
    use std::os::unix::process::CommandExt as _;
    #[allow(clippy::disallowed_methods)]
    let mut command = std::process::Command::new(program);
    command.envs(NONINTERACTIVE_ENV.iter().copied());
    command.process_group(0);
    command.stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::inherit());
    command
}

/// Makes the calling process ignore SIGINT and SIGHUP, so that a terminal
/// closing or a ^C does not end it. Only for the orphan guard process: the
/// setting is inherited by every child started afterwards.
pub fn ignore_interrupt_and_hangup() -> std::io::Result<()> {
    for signal in [Signal::SIGINT, Signal::SIGHUP] {
        // SAFETY: installing SIG_IGN runs no code of ours in signal context,
        // so there is no handler whose async-signal-safety could be wrong.
        unsafe { nix::sys::signal::signal(signal, nix::sys::signal::SigHandler::SigIgn) }?;
    }
    Ok(())
}

/// Asks the kernel to SIGKILL the calling (child) process when its parent
/// thread dies, and exits at once if the parent is already gone.
///
/// Only async-signal-safe calls: this runs between fork and exec.
fn die_with_parent(parent: u32) -> std::io::Result<()> {
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
    // The parent may have died between fork and prctl; then the signal
    // will never come, so leave now.
    if nix::unistd::getppid().as_raw() as u32 != parent {
        // SAFETY: _exit is async-signal-safe and ends the forked child only.
        unsafe { libc::_exit(1) };
    }
    Ok(())
}

/// Sends `signal` to every process in group `pgid`. Returns false when the
/// group no longer exists.
pub fn signal_group(pgid: i32, signal: Signal) -> bool {
    if pgid <= 1 {
        return false;
    }
    killpg(Pid::from_raw(pgid), signal).is_ok()
}

/// Process ids of the live (not zombie) processes in group `pgid`.
///
/// Zombies are not counted: where PID 1 does not reap orphans, a killed
/// grandchild can stay a zombie for ever, and it is dead all the same.
pub fn live_group_members(pgid: i32) -> Vec<i32> {
    scan_proc(|stat| stat.pgrp == pgid)
}

/// Process groups with a live member in session `sid`.
pub fn session_groups(sid: i32) -> BTreeSet<i32> {
    let mut groups = BTreeSet::new();
    for_each_proc(|stat| {
        if stat.session == sid {
            groups.insert(stat.pgrp);
        }
    });
    groups
}

/// Process groups in the session of the shell `shell_pid` that are not
/// the shell's jobs: their leader is gone or was not started by the shell
/// (`(sleep 300 &)` leaves such a group behind), and some member started at
/// or after `since_ticks`. These belong to the command that started then.
pub fn orphaned_groups(shell_pid: i32, since_ticks: u64) -> Vec<i32> {
    let mut members = Vec::new();
    for_each_proc(|stat| {
        if stat.session == shell_pid && stat.pgrp != shell_pid {
            members.push((stat.pid, stat.ppid, stat.pgrp, stat.start_ticks));
        }
    });
    let mut groups: Vec<i32> = members
        .iter()
        .filter(|&&(_, _, pgrp, start)| {
            let leader = members.iter().find(|&&(pid, ..)| pid == pgrp);
            start >= since_ticks && leader.is_none_or(|&(_, ppid, ..)| ppid != shell_pid)
        })
        .map(|&(_, _, pgrp, _)| pgrp)
        .collect();
    groups.sort_unstable();
    groups.dedup();
    groups
}

/// Whether process group `pgid` is blocked waiting for input from the
/// terminal `tty`: its leader is asleep in a read (or poll/select) on it.
///
/// The kernel has no event for this, so callers sample it; it reads a few
/// small files under `/proc`.
pub fn waiting_for_terminal_input(pgid: i32, tty: &std::path::Path) -> bool {
    // Only the group's leader is looked at: it is the program the agent
    // started (or the shell itself for `read`), and checking it costs a few
    // small reads instead of a scan of every process.
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pgid}/stat")) else { return false };
    parse_stat(pgid, &text).is_some_and(|stat| stat.state == b'S') && reads_terminal(pgid, tty)
}

fn reads_terminal(pid: i32, tty: &std::path::Path) -> bool {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/syscall")) else { return false };
    let mut fields = text.split_ascii_whitespace();
    let Some(number) = fields.next().and_then(|n| n.parse::<i64>().ok()) else { return false };
    let fd = fields.next().and_then(|a| i64::from_str_radix(a.trim_start_matches("0x"), 16).ok());
    let fd_is_tty = |fd: i64| {
        std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).is_ok_and(|target| target == tty)
    };
    if number == libc::SYS_read {
        return fd.is_some_and(fd_is_tty);
    }
    // Line editors (readline, prompt_toolkit) wait in poll or select before
    // reading; their fds are in user memory, so take stdin as the witness.
    POLL_SYSCALLS.contains(&number) && fd_is_tty(0)
}

#[cfg(target_arch = "x86_64")]
const POLL_SYSCALLS: &[i64] = &[
    libc::SYS_poll,
    libc::SYS_select,
    libc::SYS_pselect6,
    libc::SYS_ppoll,
    libc::SYS_epoll_wait,
    libc::SYS_epoll_pwait,
];
#[cfg(not(target_arch = "x86_64"))]
const POLL_SYSCALLS: &[i64] = &[libc::SYS_pselect6, libc::SYS_ppoll, libc::SYS_epoll_pwait];

/// Live processes in session `sid`.
pub fn live_session_members(sid: i32) -> Vec<i32> {
    scan_proc(|stat| stat.session == sid)
}

/// The current time as clock ticks since boot, comparable with the start
/// times in `/proc/PID/stat`.
pub fn boot_ticks_now() -> u64 {
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

/// Stops every process in each of `groups`: SIGTERM first, then SIGKILL to
/// whatever is still alive after `grace`. Returns `None` when there was
/// nothing alive to stop.
///
/// There is no kernel event for "a process group became empty", so the
/// grace period checks for survivors at a short, growing interval.
pub async fn terminate_groups(groups: &[i32], grace: Duration) -> Option<TerminationMode> {
    let alive = |groups: &[i32]| groups.iter().any(|&g| !live_group_members(g).is_empty());
    if !alive(groups) {
        return None;
    }
    for &group in groups {
        signal_group(group, Signal::SIGTERM);
        // A stopped process does not act on SIGTERM until it continues.
        signal_group(group, Signal::SIGCONT);
    }
    if wait_until(grace, || !alive(groups)).await {
        return Some(TerminationMode::Soft);
    }
    for &group in groups {
        signal_group(group, Signal::SIGKILL);
    }
    wait_until(Duration::from_secs(2), || !alive(groups)).await;
    Some(TerminationMode::Hard)
}

/// Stops every process in session `sid` (a PTY shell and everything it
/// started): SIGHUP, SIGTERM and SIGCONT to each of its groups, then SIGKILL
/// to whatever is left after `grace`. Interactive bash ignores SIGTERM but
/// not SIGHUP, and passes SIGHUP on to its jobs, hence both.
pub async fn terminate_session(sid: i32, grace: Duration) {
    for group in session_groups(sid) {
        for signal in [Signal::SIGHUP, Signal::SIGTERM, Signal::SIGCONT] {
            signal_group(group, signal);
        }
    }
    if wait_until(grace, || live_session_members(sid).is_empty()).await {
        return;
    }
    for group in session_groups(sid) {
        signal_group(group, Signal::SIGKILL);
    }
    wait_until(Duration::from_secs(2), || live_session_members(sid).is_empty()).await;
}

/// Waits until `done` holds or `limit` passes; returns whether it held.
async fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    let mut interval = Duration::from_millis(2);
    loop {
        if done() {
            return true;
        }
        let now = Instant::now();
        if now >= deadline {
            return false;
        }
        tokio::time::sleep(interval.min(deadline - now)).await;
        interval = (interval * 2).min(Duration::from_millis(50));
    }
}

/// The fields of `/proc/PID/stat` we use.
struct ProcStat {
    pid: i32,
    state: u8,
    ppid: i32,
    pgrp: i32,
    session: i32,
    start_ticks: u64,
}

fn scan_proc(mut keep: impl FnMut(&ProcStat) -> bool) -> Vec<i32> {
    let mut pids = Vec::new();
    for_each_proc(|stat| {
        if keep(stat) {
            pids.push(stat.pid);
        }
    });
    pids
}

/// Calls `visit` for every live, non-zombie process on the machine.
fn for_each_proc(mut visit: impl FnMut(&ProcStat)) {
    let Ok(entries) = std::fs::read_dir("/proc") else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        if let Some(stat) = parse_stat(pid, &text)
            && stat.state != b'Z'
            && stat.state != b'X'
        {
            visit(&stat);
        }
    }
}

/// Parses `/proc/PID/stat`. The command name is in parentheses and may
/// itself contain spaces and parentheses, so fields are counted from the
/// last `)`.
fn parse_stat(pid: i32, text: &str) -> Option<ProcStat> {
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
    fn parses_stat_with_awkward_names() {
        let text =
            "1234 (a) b (c)) S 1 1234 1234 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 98765 1000 10";
        let stat = parse_stat(1234, text).expect("parses");
        assert_eq!(
            (stat.state, stat.pgrp, stat.session, stat.start_ticks),
            (b'S', 1234, 1234, 98765)
        );
    }

    #[tokio::test]
    async fn terminate_groups_kills_a_whole_tree() {
        let mut child = group_command("bash")
            .arg("-c")
            .arg("trap '' TERM; sleep 300 & sleep 300 & wait")
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn bash");
        let pgid = child.id().expect("pid") as i32;
        // Wait until both sleeps exist, so the kill has a tree to kill.
        assert!(wait_until(Duration::from_secs(10), || live_group_members(pgid).len() >= 3).await);
        let mode = terminate_groups(&[pgid], Duration::from_millis(300)).await;
        // bash ignores SIGTERM, so it takes SIGKILL.
        assert_eq!(mode, Some(TerminationMode::Hard));
        assert!(live_group_members(pgid).is_empty());
        child.wait().await.expect("reaped");
    }
}
