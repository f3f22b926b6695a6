//! Building child processes, signalling them, and containing what they start.
//!
//! This is the only module that builds a child `Command`, sends signals or
//! contains `unsafe` code. Every child we start gets the same non-interactive
//! environment, default signal dispositions and an empty signal mask (so a
//! server started under `nohup` still gives its shell a working ^C), its own
//! process group (or, for a PTY shell, its own session), a parent-death
//! signal, and a scope marker; the one exception to the parent-death signal
//! is the orphan guard, which exists to outlive the server. It does not know
//! about sessions, policies or MCP.
//!
//! # Containment
//!
//! Process groups and sessions are not enough to find what a command
//! started: `setsid`, `setpgid(0, 0)` and `timeout` leave them. So every
//! child carries an inherited marker in its environment,
//! `SHELLKEEP_SCOPE=<server token>/<owner>` ([`Scope`]), that every
//! descendant inherits whatever it does to its group or session; stopping an
//! owner stops every process of ours whose `/proc/PID/environ` carries its
//! marker, plus the groups, sessions and descendants it names
//! ([`Targets`]). The server also makes itself a child subreaper
//! ([`reap_adopted_orphans`]), so orphans stay its descendants and a
//! process that clears its environment is still found by the server-wide
//! sweep at shutdown. What still escapes: a process that clears its
//! environment *and* is orphaned before its owner is stopped (until the
//! server ends), one that does so after a server SIGKILL (the guard only
//! sees markers, groups and sessions), a process whose environment we
//! cannot read (another user's, or a set-uid program's), and a process that
//! asks something outside our tree (`systemd-run`, `at`, a daemon) to start
//! it.
#![allow(unsafe_code)]

use std::collections::{BTreeSet, HashMap, HashSet};
use std::ffi::OsStr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};
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

/// The environment variable that marks every process we start and all
/// their descendants: `SHELLKEEP_SCOPE=<server token>/<owner>`.
pub const SCOPE_VAR: &str = "SHELLKEEP_SCOPE";

/// This process's random token, the first half of every scope marker it
/// hands out. Chosen once, on first use.
pub fn server_token() -> &'static str {
    static TOKEN: OnceLock<String> = OnceLock::new();
    TOKEN.get_or_init(|| {
        let mut bytes = [0u8; 12];
        if getrandom::fill(&mut bytes).is_err() {
            // Uniqueness only matters against other servers of this user;
            // the pid and the time nearly give it.
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            bytes[..4].copy_from_slice(&std::process::id().to_le_bytes());
            bytes[4..].copy_from_slice(&(now as u64).to_le_bytes());
        }
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    })
}

/// An owner of processes: a terminal shell or one `run` call. Its marker is
/// set in the environment of the child we start for it, so every process
/// that child starts carries it too, whatever it does to its process group
/// or session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    /// `<server token>/<kind>-<n>`.
    value: String,
}

impl Scope {
    /// A new owner, unique within this process: `kind` says what it is
    /// (`shell`, `run`), for people reading `/proc`.
    pub fn new(kind: &str) -> Scope {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        Scope { value: format!("{}/{kind}-{n}", server_token()) }
    }

    /// The marker's value, as set in [`SCOPE_VAR`].
    pub fn value(&self) -> &str {
        &self.value
    }

    /// The mark that finds this owner's processes.
    pub fn mark(&self) -> Mark {
        Mark::Exact(self.value.clone())
    }
}

/// Which scope markers a sweep looks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mark {
    /// Exactly this marker value: one owner's processes.
    Exact(String),
    /// Any marker with this server token: everything a server started.
    Token(String),
}

impl Mark {
    /// Whether `environ` (a `/proc/PID/environ`: NUL-separated
    /// `NAME=value` entries) carries this mark.
    fn matches(&self, environ: &[u8]) -> bool {
        let prefix = SCOPE_VAR.len() + 1;
        environ.split(|&b| b == 0).any(|entry| {
            entry.len() > prefix
                && entry.starts_with(SCOPE_VAR.as_bytes())
                && entry[SCOPE_VAR.len()] == b'='
                && match self {
                    Mark::Exact(value) => &entry[prefix..] == value.as_bytes(),
                    Mark::Token(token) => entry[prefix..]
                        .strip_prefix(token.as_bytes())
                        .is_some_and(|rest| rest.first() == Some(&b'/')),
                }
        })
    }
}

/// The absolute path of bash, found once on the server's own `PATH` (not a
/// command's `env`, which may override `PATH`); `/bin/bash` if it is not
/// there.
pub fn bash() -> &'static Path {
    static BASH: OnceLock<PathBuf> = OnceLock::new();
    BASH.get_or_init(|| {
        std::env::var_os("PATH")
            .iter()
            .flat_map(std::env::split_paths)
            .filter(|dir| dir.is_absolute())
            .map(|dir| dir.join("bash"))
            .find(|path| is_executable(path))
            .unwrap_or_else(|| PathBuf::from("/bin/bash"))
    })
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// A command for `program` that starts in a new process group of its own,
/// with the non-interactive environment, `scope`'s marker, default signal
/// handling and a parent-death signal.
pub fn group_command(program: impl AsRef<OsStr>, scope: &Scope) -> tokio::process::Command {
    #[allow(clippy::disallowed_methods)]
    let mut command = tokio::process::Command::new(program);
    command.envs(NONINTERACTIVE_ENV.iter().copied()).env(SCOPE_VAR, scope.value());
    command.process_group(0);
    let parent = std::process::id();
    let signals = SignalReset::new();
    // SAFETY: the closure runs in the child between fork and exec and only
    // calls async-signal-safe functions (sigaction, sigprocmask, prctl,
    // getppid, _exit).
    unsafe {
        command.pre_exec(move || {
            signals.apply();
            die_with_parent(parent)
        });
    }
    command
}

/// Like [`group_command`], and the child also gets each `(fd, target)` of
/// `fds` as its descriptor number `target` (for input passed through a
/// pipe). The caller keeps `fds` open until the command is spawned and
/// closes them after. At most eight descriptors.
pub fn group_command_with_fds(
    program: impl AsRef<OsStr>,
    scope: &Scope,
    fds: &[(&OwnedFd, RawFd)],
) -> tokio::process::Command {
    assert!(fds.len() <= 8, "at most eight descriptors can be passed to a child");
    let mut command = group_command(program, scope);
    let fds: Vec<(RawFd, RawFd)> =
        fds.iter().map(|(fd, target)| (fd.as_raw_fd(), *target)).collect();
    // SAFETY: runs between fork and exec after the closure installed by
    // `group_command`; fcntl, dup2 and close are async-signal-safe, and the
    // vector is only read, never allocated, here.
    unsafe {
        command.pre_exec(move || {
            // First move every source out of the way of every target, so
            // that installing one cannot overwrite another's source.
            let mut moved = [(-1, -1); 8];
            for (slot, &(fd, target)) in moved.iter_mut().zip(&fds) {
                let high = libc::fcntl(fd, libc::F_DUPFD, 100);
                if high == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                *slot = (high, target);
            }
            for &(high, target) in moved.iter().take(fds.len()) {
                if libc::dup2(high, target) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                libc::close(high);
            }
            Ok(())
        });
    }
    command
}

/// A command for `program` that runs as the leader of a new session whose
/// controlling terminal is the PTY `slave`, with the non-interactive
/// environment, `scope`'s marker, default signal handling and a
/// parent-death signal.
///
/// `channel`, when given, stays open in the child at its own number (it is
/// not closed on exec): the shell's end of the completion channel, which
/// the shell moves where it wants it. (Installing it at a fixed number here
/// could overwrite a descriptor the spawn itself relies on.)
pub fn pty_command(
    program: impl AsRef<OsStr>,
    slave: &OwnedFd,
    scope: &Scope,
    channel: Option<&OwnedFd>,
) -> std::io::Result<tokio::process::Command> {
    #[allow(clippy::disallowed_methods)]
    let mut command = tokio::process::Command::new(program);
    command.envs(NONINTERACTIVE_ENV.iter().copied()).env(SCOPE_VAR, scope.value());
    command
        .stdin(Stdio::from(slave.try_clone()?))
        .stdout(Stdio::from(slave.try_clone()?))
        .stderr(Stdio::from(slave.try_clone()?));
    let parent = std::process::id();
    let signals = SignalReset::new();
    let channel = channel.map(AsRawFd::as_raw_fd);
    // SAFETY: the closure runs in the child between fork and exec and only
    // calls async-signal-safe functions (sigaction, sigprocmask, setsid,
    // ioctl, fcntl, prctl, getppid).
    unsafe {
        command.pre_exec(move || {
            signals.apply();
            if let Some(fd) = channel
                && libc::fcntl(fd, libc::F_SETFD, 0) == -1
            {
                return Err(std::io::Error::last_os_error());
            }
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
/// own, with default signal handling, stdin piped (closing it is how the
/// guard learns the server has ended), stdout to `/dev/null` and stderr
/// inherited for its logs.
///
/// Unlike every other child it gets no parent-death signal and no scope
/// marker, because its whole job is to outlive the server and stop what
/// carries the marker. Its own process group keeps a ^C meant for the
/// server's terminal, or a kill of the server's group, from reaching it.
/// Its stdout is never the server's: that is the MCP channel.
pub fn guard_command(program: impl AsRef<OsStr>) -> std::process::Command {
    use std::os::unix::process::CommandExt as _;
    #[allow(clippy::disallowed_methods)]
    let mut command = std::process::Command::new(program);
    command.envs(NONINTERACTIVE_ENV.iter().copied()).env_remove(SCOPE_VAR);
    command.process_group(0);
    command.stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::inherit());
    let signals = SignalReset::new();
    // SAFETY: the closure runs in the child between fork and exec and only
    // calls async-signal-safe functions (sigaction, sigprocmask).
    unsafe {
        command.pre_exec(move || {
            signals.apply();
            Ok(())
        });
    }
    command
}

/// Children we started ourselves, by pid and start time, so that the reaper
/// of adopted orphans never takes the exit status of a child a `Child`
/// handle waits for. Held across each spawn, so a child that exits at once
/// is registered before the reaper can see its zombie.
static SPAWNED: Mutex<Vec<(i32, u64)>> = Mutex::new(Vec::new());

/// Spawns `command` (built by this module) and registers the child as ours.
pub fn spawn(command: &mut tokio::process::Command) -> std::io::Result<tokio::process::Child> {
    let mut spawned = SPAWNED.lock().unwrap_or_else(PoisonError::into_inner);
    let child = command.spawn()?;
    if let Some(pid) = child.id() {
        register(&mut spawned, pid as i32);
    }
    Ok(child)
}

/// [`spawn`] for a blocking `std` command (the orphan guard's).
pub fn spawn_std(command: &mut std::process::Command) -> std::io::Result<std::process::Child> {
    let mut spawned = SPAWNED.lock().unwrap_or_else(PoisonError::into_inner);
    let child = command.spawn()?;
    register(&mut spawned, child.id() as i32);
    Ok(child)
}

/// Registers `pid`. Outside the server nothing reaps, so the list is pruned
/// of children that are gone once it grows: it holds about as many entries
/// as there are live children, plus at most 256.
fn register(spawned: &mut Vec<(i32, u64)>, pid: i32) {
    if spawned.len() >= 256 {
        spawned.retain(|&(pid, start)| Root::of(pid).is_some_and(|root| root.start_ticks == start));
    }
    spawned.push((pid, Root::of(pid).map_or(0, |root| root.start_ticks)));
}

/// Makes this process a child subreaper, so that orphans of everything it
/// started stay its descendants, and reaps those orphans (zombies that are
/// children of ours but were not started by [`spawn`]) every time a child
/// changes state. Runs until the task is dropped; only the server calls it.
pub async fn reap_adopted_orphans() -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut children = signal(SignalKind::child())?;
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER only sets a flag on this
    // process; no memory is passed.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } == -1 {
        return Err(std::io::Error::last_os_error());
    }
    loop {
        reap_adopted_now();
        if children.recv().await.is_none() {
            return Ok(());
        }
    }
}

/// Reaps the zombies among our children that we did not spawn ourselves,
/// and forgets registered children that are gone. Returns how many it
/// reaped.
pub fn reap_adopted_now() -> usize {
    let me = std::process::id() as i32;
    let mut spawned = SPAWNED.lock().unwrap_or_else(PoisonError::into_inner);
    let mut present = HashSet::new();
    let mut zombies = Vec::new();
    for_each_stat(|stat| {
        present.insert((stat.pid, stat.start_ticks));
        if stat.ppid == me && stat.state == b'Z' {
            zombies.push((stat.pid, stat.start_ticks));
        }
    });
    spawned.retain(|entry| present.contains(entry));
    let mut reaped = 0;
    for zombie in zombies {
        if spawned.contains(&zombie) {
            continue;
        }
        let pid = Pid::from_raw(zombie.0);
        if nix::sys::wait::waitpid(pid, Some(nix::sys::wait::WaitPidFlag::WNOHANG)).is_ok() {
            reaped += 1;
        }
    }
    reaped
}

/// Restores default signal handling in a child between fork and exec:
/// every signal's disposition to `SIG_DFL` and an empty signal mask. A
/// server started under `nohup` or as a `&` job of a script ignores SIGHUP,
/// SIGINT or SIGQUIT, and ignored signals stay ignored across exec.
#[derive(Clone, Copy)]
struct SignalReset {
    /// The highest signal number, read before fork (`SIGRTMAX` is a libc
    /// call).
    last: libc::c_int,
}

impl SignalReset {
    fn new() -> SignalReset {
        SignalReset { last: libc::SIGRTMAX() }
    }

    /// Only async-signal-safe calls: this runs between fork and exec.
    fn apply(self) {
        for signal in 1..=self.last {
            if signal == libc::SIGKILL || signal == libc::SIGSTOP {
                continue;
            }
            // The raw system call, because the C library refuses the
            // signals it reserves for itself (32 and 33), which can be
            // inherited as ignored all the same. An all-zero kernel
            // `struct sigaction` is SIG_DFL with no flags in every layout
            // (handler, flags, [restorer,] mask); 32 bytes cover them all.
            let action: [u64; 4] = [0; 4];
            // SAFETY: `action` lives across the call and is at least as
            // large as the kernel's `struct sigaction`; no old action is
            // written back. Failures are fine: nothing else to do.
            unsafe {
                libc::syscall(
                    libc::SYS_rt_sigaction,
                    signal,
                    action.as_ptr(),
                    std::ptr::null_mut::<u64>(),
                    8usize,
                );
            }
        }
        // SAFETY: an empty set on the stack, passed by pointer for the call.
        unsafe {
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        }
    }
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

/// What a stop reaches: every live process that is in one of `groups` or
/// `sessions`, descends from one of `roots`, or carries one of `marks` in
/// its environment; never this process or one in `exclude`.
///
/// Each check is one scan of `/proc` (the `stat` of every process, and the
/// `environ` of those not already matched when there are marks), so its
/// cost grows with the number of processes on the machine, not with what
/// is found.
#[derive(Debug, Clone, Default)]
pub struct Targets {
    /// Process groups.
    pub groups: Vec<i32>,
    /// Sessions (a PTY shell and its jobs).
    pub sessions: Vec<i32>,
    /// Processes whose descendants (and themselves) are reached.
    pub roots: Vec<Root>,
    /// Scope markers.
    pub marks: Vec<Mark>,
    /// Processes never reached (the orphan guard).
    pub exclude: Vec<i32>,
    /// Send SIGHUP before SIGTERM: interactive bash ignores SIGTERM but not
    /// SIGHUP, and passes SIGHUP on to its jobs.
    pub hangup: bool,
}

impl Targets {
    /// Everything `scope` owns.
    pub fn scope(scope: &Scope) -> Targets {
        Targets { marks: vec![scope.mark()], ..Targets::default() }
    }

    /// Everything this server started: its descendants (orphans included,
    /// once [`reap_adopted_orphans`] made it a subreaper) and whatever
    /// carries its token, except `exclude`.
    pub fn whole_server(exclude: &[i32]) -> Targets {
        Targets {
            roots: Root::of(std::process::id() as i32).into_iter().collect(),
            marks: vec![Mark::Token(server_token().to_owned())],
            exclude: exclude.to_vec(),
            ..Targets::default()
        }
    }

    /// The live processes these targets reach now.
    pub fn members(&self) -> Vec<i32> {
        let me = std::process::id() as i32;
        let mut all = Vec::new();
        let mut live_roots = Vec::new();
        for_each_proc(|stat| {
            all.push((stat.pid, stat.ppid, stat.pgrp, stat.session));
            if self.roots.contains(&Root { pid: stat.pid, start_ticks: stat.start_ticks }) {
                live_roots.push(stat.pid);
            }
        });
        let mut reached: HashSet<i32> = HashSet::new();
        if !live_roots.is_empty() {
            let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
            for &(pid, ppid, ..) in &all {
                children.entry(ppid).or_default().push(pid);
            }
            let mut stack: Vec<i32> = live_roots;
            while let Some(pid) = stack.pop() {
                if reached.insert(pid) {
                    stack.extend(children.get(&pid).into_iter().flatten());
                }
            }
        }
        let mut members = Vec::new();
        for &(pid, _, pgrp, session) in &all {
            if pid == me || self.exclude.contains(&pid) {
                continue;
            }
            let found = reached.contains(&pid)
                || self.groups.contains(&pgrp)
                || self.sessions.contains(&session)
                || (!self.marks.is_empty() && self.marked(pid));
            if found {
                members.push(pid);
            }
        }
        members
    }

    fn marked(&self, pid: i32) -> bool {
        std::fs::read(format!("/proc/{pid}/environ"))
            .is_ok_and(|environ| self.marks.iter().any(|mark| mark.matches(&environ)))
    }

    /// Sends `signal` to every member, and to the groups and sessions'
    /// groups as a whole (atomic against a fork in progress within them).
    fn signal(&self, members: &[i32], signal: Signal) {
        for &group in &self.groups {
            signal_group(group, signal);
        }
        for &pid in members {
            if pid > 1 {
                let _ = nix::sys::signal::kill(Pid::from_raw(pid), signal);
            }
        }
    }
}

/// A process identified by its pid and its start time, so that a pid the
/// kernel has given to a new process since is not taken for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Root {
    pid: i32,
    start_ticks: u64,
}

impl Root {
    /// Process `pid` as it is now; `None` if it is gone.
    pub fn of(pid: i32) -> Option<Root> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        parse_stat(pid, &text).map(|stat| Root { pid, start_ticks: stat.start_ticks })
    }
}

/// Stops every process `targets` reach: SIGTERM (after SIGHUP when
/// `targets.hangup`) and SIGCONT, then SIGKILL to whatever is still alive
/// after `grace`. Processes that appear meanwhile (a fork in progress) get
/// the same. Returns `None` when there was nothing alive to stop.
///
/// There is no kernel event for "these processes are gone", so the grace
/// period checks for survivors at a short, growing interval.
pub async fn terminate(targets: &Targets, grace: Duration) -> Option<TerminationMode> {
    let members = targets.members();
    if members.is_empty() {
        return None;
    }
    let mut signalled: HashSet<i32> = HashSet::new();
    let mut polite = |members: &[i32]| {
        let fresh: Vec<i32> =
            members.iter().copied().filter(|pid| signalled.insert(*pid)).collect();
        if targets.hangup {
            targets.signal(&fresh, Signal::SIGHUP);
        }
        targets.signal(&fresh, Signal::SIGTERM);
        // A stopped process does not act on SIGTERM until it continues.
        targets.signal(&fresh, Signal::SIGCONT);
    };
    polite(&members);
    let gone = wait_until(grace, || {
        let members = targets.members();
        polite(&members);
        members.is_empty()
    })
    .await;
    if gone {
        return Some(TerminationMode::Soft);
    }
    wait_until(Duration::from_secs(2), || {
        let members = targets.members();
        targets.signal(&members, Signal::SIGKILL);
        members.is_empty()
    })
    .await;
    Some(TerminationMode::Hard)
}

/// Sends SIGKILL at once to every process `targets` reach, a few rounds to
/// catch forks in progress; for paths that cannot wait (a dropped run).
pub fn kill_now(targets: &Targets) {
    for _ in 0..3 {
        let members = targets.members();
        if members.is_empty() {
            return;
        }
        targets.signal(&members, Signal::SIGKILL);
    }
}

/// Stops every process in each of `groups`: SIGTERM first, then SIGKILL to
/// whatever is still alive after `grace`. Returns `None` when there was
/// nothing alive to stop.
pub async fn terminate_groups(groups: &[i32], grace: Duration) -> Option<TerminationMode> {
    terminate(&Targets { groups: groups.to_vec(), ..Targets::default() }, grace).await
}

/// Stops every process in session `sid` (a PTY shell and everything it
/// started) and, when given, everything `scope` owns (what left the session
/// with `setsid`): SIGHUP, SIGTERM and SIGCONT, then SIGKILL to whatever is
/// left after `grace`.
pub async fn terminate_session(sid: i32, scope: Option<&Scope>, grace: Duration) {
    let targets = Targets {
        sessions: vec![sid],
        marks: scope.map(Scope::mark).into_iter().collect(),
        hangup: true,
        ..Targets::default()
    };
    terminate(&targets, grace).await;
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
    for_each_stat(|stat| {
        if stat.state != b'Z' && stat.state != b'X' {
            visit(stat);
        }
    });
}

/// Calls `visit` for every process on the machine, zombies included.
fn for_each_stat(mut visit: impl FnMut(&ProcStat)) {
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

    #[test]
    fn marks_match_whole_entries_only() {
        let environ = b"A=1\0SHELLKEEP_SCOPE=abc/run-7\0B=SHELLKEEP_SCOPE=zzz/run-1\0";
        let exact = |value: &str| Mark::Exact(value.into()).matches(environ);
        let token = |value: &str| Mark::Token(value.into()).matches(environ);
        assert!(exact("abc/run-7"));
        assert!(!exact("abc/run-70") && !exact("abc/run-") && !exact("zzz/run-1"));
        assert!(token("abc"));
        assert!(!token("ab") && !token("abc/") && !token("zzz"));
        assert!(!Mark::Token("abc".into()).matches(b"SHELLKEEP_SCOPE=\0SHELLKEEP_SCOPEX=abc/1"));
    }

    #[tokio::test]
    async fn terminate_groups_kills_a_whole_tree() {
        let mut child = group_command("bash", &Scope::new("test"))
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
