//! Building child processes, signalling them, and containing what they start.
//!
//! This is the only module that builds a child `Command` or contains
//! `unsafe` code, and the one that sends signals (`cgroup` only SIGKILLs the
//! members of a frozen group). Every child we start gets the same
//! non-interactive environment, default signal dispositions and an empty
//! signal mask (so a server started under `nohup` still gives its shell a
//! working ^C), its own process group (or, for a PTY shell, its own
//! session), a parent-death signal, a scope marker, and, in a cgroup mode,
//! its owner's control group, joined before exec; the one exception to the
//! parent-death signal is the orphan guard, which exists to outlive the
//! server. It does not know about sessions, policies or MCP.
//!
//! # Containment
//!
//! In a cgroup mode ([`init_containment`], `cgroup`), every owner has a
//! control group its child joins between fork and exec; nothing it starts
//! leaves it without privileges, and stopping the owner kills the group.
//! The rest is the second net there, and the only one in markers mode:
//! every child carries an inherited marker in its environment,
//! `SHELLKEEP_SCOPE=<server token>/<owner>` ([`Scope`]), which every
//! descendant inherits whatever it does to its group or session (a terminal
//! shell exports `<owner>/c<seq>` for each command, so one command's
//! processes can be told apart). Stopping an owner stops every process of
//! ours whose `/proc/PID/environ` carries its marker, plus the groups,
//! sessions and descendants it names, plus the processes of ours with no
//! readable marker of a live owner (a marker of an owner that never
//! existed or has ended counts as none) that descend from it or are adopted
//! orphans attributed to it ([`Targets`], [`Unmarked`]). The server is a
//! child subreaper ([`reap_adopted_orphans`]), so orphans stay its
//! descendants. What still escapes in markers mode: an unmarked orphan
//! taken for another owner's (see [`Unmarked`]), a process relabelled with
//! another live owner's marker (stopped with that owner), one alive after a
//! server SIGKILL (the guard only sees markers, groups and sessions), and
//! in every mode a process that asks something outside our tree
//! (`systemd-run`, `at`, a daemon) to start it.
#![allow(unsafe_code)]

use std::collections::{BTreeSet, HashMap, HashSet};
use std::ffi::OsStr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::time::Instant;

use crate::cgroup;

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
/// or session; in a cgroup mode it also has a control group of its own,
/// which the child joins before it runs anything.
#[derive(Debug, Clone)]
pub struct Scope {
    inner: Arc<ScopeInner>,
}

#[derive(Debug)]
struct ScopeInner {
    /// `<server token>/<kind>-<n>`.
    value: String,
    /// Its control group (a cgroup mode), or why it could not be made:
    /// then every spawn in this scope fails, containment is never silently
    /// off.
    group: Result<Option<Arc<cgroup::Group>>, Arc<std::io::Error>>,
}

impl Drop for ScopeInner {
    fn drop(&mut self) {
        LIVE_OWNERS.lock().unwrap_or_else(PoisonError::into_inner).remove(&self.value);
        owner_ended(&self.value);
    }
}

/// The values of every scope of this process that is alive (handed out and
/// not yet dropped): only their markers count as marked ([`classify`]).
static LIVE_OWNERS: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

impl PartialEq for Scope {
    fn eq(&self, other: &Scope) -> bool {
        self.inner.value == other.inner.value
    }
}

impl Eq for Scope {}

impl Scope {
    /// A new owner, unique within this process: `kind` says what it is
    /// (`shell`, `run`), for people reading `/proc` and the cgroup tree.
    /// Owners of kind `shell` and `run` are candidates when an unmarked
    /// orphan is attributed by its start time ([`Unmarked`]).
    pub fn new(kind: &str) -> Scope {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let value = format!("{}/{kind}-{n}", server_token());
        LIVE_OWNERS.lock().unwrap_or_else(PoisonError::into_inner).insert(value.clone());
        if matches!(kind, "shell" | "run") {
            owner_started(&value);
        }
        let group = cgroup::Group::create(&format!("{kind}-{n}")).map_err(|err| {
            tracing::error!("{err}; nothing can be started in this scope");
            Arc::new(err)
        });
        if let Ok(Some(group)) = &group {
            let mut live = LIVE_GROUPS.lock().unwrap_or_else(PoisonError::into_inner);
            live.retain(|(_, group)| group.strong_count() > 0);
            live.push((value.clone(), Arc::downgrade(group)));
        }
        Scope { inner: Arc::new(ScopeInner { value, group }) }
    }

    /// The marker's value, as set in [`SCOPE_VAR`].
    pub fn value(&self) -> &str {
        &self.inner.value
    }

    /// The mark that finds this owner's processes (the marks of its
    /// commands, `<value>/c<seq>`, included).
    pub fn mark(&self) -> Mark {
        Mark::Exact(self.inner.value.clone())
    }

    /// Its control group, in a cgroup mode.
    pub fn group(&self) -> Option<&Arc<cgroup::Group>> {
        self.inner.group.as_ref().ok().and_then(Option::as_ref)
    }

    /// What a child of this scope does between fork and exec to join the
    /// group: the descriptor to write `0` to, or the error to fail with.
    fn joiner(&self) -> Joiner {
        match &self.inner.group {
            Ok(Some(group)) => Joiner::Join(Arc::clone(group)),
            Ok(None) => Joiner::Nothing,
            Err(err) => Joiner::Fail(err.raw_os_error().unwrap_or(libc::EIO)),
        }
    }
}

/// How a child joins its scope's control group between fork and exec.
#[derive(Clone)]
enum Joiner {
    /// No cgroup mode.
    Nothing,
    /// Write `0` to this group's `cgroup.procs` (the `Arc` keeps the
    /// descriptor open until the command is dropped).
    Join(Arc<cgroup::Group>),
    /// The group could not be made: fail with this errno.
    Fail(i32),
}

/// The errors a child reports when joining its group failed carry this tag
/// above the errno, so [`spawn`] can say what went wrong.
const JOIN_FAILED: i32 = 0x4a00_0000;

impl Joiner {
    /// Only async-signal-safe calls: this runs between fork and exec.
    fn apply(&self) -> std::io::Result<()> {
        let fd = match self {
            Joiner::Nothing => return Ok(()),
            Joiner::Fail(errno) => {
                return Err(std::io::Error::from_raw_os_error(JOIN_FAILED | errno));
            }
            Joiner::Join(group) => group.procs_fd(),
        };
        // SAFETY: write(2) on a descriptor the parent opened before the
        // fork, from a static buffer; async-signal-safe.
        let written = unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) };
        if written == 1 {
            Ok(())
        } else {
            let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO);
            Err(std::io::Error::from_raw_os_error(JOIN_FAILED | errno))
        }
    }
}

/// The error [`spawn`] returns: a failed join named as such.
fn spawn_error(err: std::io::Error) -> std::io::Error {
    match err.raw_os_error() {
        Some(code) if code & !0xffff == JOIN_FAILED => {
            let cause = std::io::Error::from_raw_os_error(code & 0xffff);
            std::io::Error::new(
                cause.kind(),
                format!(
                    "could not put the new process in its control group ({} containment): \
                     {cause}; start the server with {}=markers to run without control groups",
                    cgroup::active().mode.as_str(),
                    cgroup::MODE_VAR
                ),
            )
        }
        _ => err,
    }
}

/// Which scope markers a sweep looks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mark {
    /// This marker value, or one that extends it with `/…` (the marks of
    /// one terminal command, `<owner>/c<seq>`): one owner's processes, or
    /// one command's.
    Exact(String),
    /// Any marker with this server token: everything a server started.
    Token(String),
}

/// What [`Mark::matches`] found in an environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Marked {
    /// A marker this mark matches.
    Yes,
    /// A marker of another live owner of this server, or of one of its
    /// commands.
    Other,
    /// No marker of a live owner of this server: a cleared or replaced
    /// environment, or one relabelled with an owner that never existed or
    /// has ended.
    Unmarked,
}

impl Mark {
    /// Whether `environ` (a `/proc/PID/environ`: NUL-separated
    /// `NAME=value` entries) carries this mark.
    #[cfg(test)]
    fn matches(&self, environ: &[u8]) -> bool {
        marker_values(environ).any(|value| self.matches_value(value))
    }

    fn matches_value(&self, value: &[u8]) -> bool {
        let (Mark::Exact(prefix) | Mark::Token(prefix)) = self;
        value.strip_prefix(prefix.as_bytes()).is_some_and(|rest| match self {
            Mark::Exact(_) => rest.is_empty() || rest.first() == Some(&b'/'),
            Mark::Token(_) => rest.first() == Some(&b'/'),
        })
    }
}

/// The values of every `SHELLKEEP_SCOPE=` entry in `environ`.
fn marker_values(environ: &[u8]) -> impl Iterator<Item = &[u8]> {
    let prefix = SCOPE_VAR.len() + 1;
    environ
        .split(|&b| b == 0)
        .filter(move |entry| {
            entry.len() > prefix
                && entry.starts_with(SCOPE_VAR.as_bytes())
                && entry[SCOPE_VAR.len()] == b'='
        })
        .map(move |entry| &entry[prefix..])
}

/// How `environ` relates to `marks`: see [`Marked`]. A marker of this
/// server counts only when it names a live owner (`<token>/<owner>`, or a
/// command of it, `<token>/<owner>/c<seq>`): any process can set
/// `SHELLKEEP_SCOPE` for what it starts, and one relabelled with a made-up
/// or ended owner must still be found by the rules for unmarked processes.
/// A mark that names a value outright (`Mark::Exact` of the owner being
/// stopped, `Mark::Token` of the whole server) matches whatever it names.
fn classify(marks: &[Mark], environ: &[u8]) -> Marked {
    let live = LIVE_OWNERS.lock().unwrap_or_else(PoisonError::into_inner);
    classify_among(marks, environ, server_token(), |owner| live.contains(owner))
}

/// [`classify`] with this server's `token` and which owners are alive.
fn classify_among(
    marks: &[Mark],
    environ: &[u8],
    token: &str,
    alive: impl Fn(&str) -> bool,
) -> Marked {
    let mut ours = false;
    for value in marker_values(environ) {
        if marks.iter().any(|mark| mark.matches_value(value)) {
            return Marked::Yes;
        }
        ours |= live_owner_of(value, token).is_some_and(&alive);
    }
    if ours { Marked::Other } else { Marked::Unmarked }
}

/// The owner a marker value of this server's `token` names, when it has the
/// shape of one we hand out: `<token>/<name>` or `<token>/<name>/c<seq>`.
fn live_owner_of<'a>(value: &'a [u8], token: &str) -> Option<&'a str> {
    let value = std::str::from_utf8(value).ok()?;
    let name = value.strip_prefix(token)?.strip_prefix('/')?;
    let owner_len = token.len() + 1 + name.find('/').unwrap_or(name.len());
    let (owner, command) = value.split_at(owner_len);
    let command_ok = command.is_empty()
        || command
            .strip_prefix("/c")
            .is_some_and(|seq| !seq.is_empty() && seq.bytes().all(|b| b.is_ascii_digit()));
    (owner_len > token.len() + 1 && command_ok).then_some(owner)
}

/// Owners (`shell` and `run` scopes) with the time they started and, once
/// their scope is gone, ended, in clock ticks since boot: what an unmarked
/// orphan is attributed by ([`Unmarked`]). Ended owners are kept (at most
/// [`OWNERS_KEPT`]) so that an orphan born while two owners lived stays
/// ambiguous after one ended.
static OWNERS: Mutex<Vec<OwnerSpan>> = Mutex::new(Vec::new());
const OWNERS_KEPT: usize = 4096;

#[derive(Debug, Clone)]
struct OwnerSpan {
    value: String,
    started: u64,
    ended: Option<u64>,
}

fn owner_started(value: &str) {
    let mut owners = OWNERS.lock().unwrap_or_else(PoisonError::into_inner);
    if owners.len() >= OWNERS_KEPT
        && let Some(oldest) = owners.iter().position(|owner| owner.ended.is_some())
    {
        owners.remove(oldest);
    }
    owners.push(OwnerSpan { value: value.to_owned(), started: boot_ticks_now(), ended: None });
}

fn owner_ended(value: &str) {
    let now = boot_ticks_now();
    let mut owners = OWNERS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(owner) = owners.iter_mut().find(|owner| owner.value == value) {
        owner.ended = Some(now);
    }
}

/// The owner an unmarked orphan that started at `started` ticks is
/// attributed to: the newest of the owners alive then (the most specific
/// guess: a `run` or a session opened while an older session was open);
/// `None` when none was. Start times are clock ticks (10 ms): an orphan
/// born in the tick its owner ended is not given to that owner, whose stop
/// is over (it would then be nobody's until the server ends), but to one
/// still alive.
fn owner_at(started: u64) -> Option<String> {
    let owners = OWNERS.lock().unwrap_or_else(PoisonError::into_inner);
    owners
        .iter()
        .filter(|owner| owner.started <= started && owner.ended.is_none_or(|end| end > started))
        .max_by_key(|owner| owner.started)
        .map(|owner| owner.value.clone())
}

/// Chooses the containment of this process, once, before anything is
/// started: the first mode of `requested` the host allows (see `cgroup`),
/// proved by starting a child that joins a test group. A mode that fails is
/// logged and the next one tried; a mode asked for by name that fails is an
/// error. Returns the containment in use.
pub fn init_containment(requested: cgroup::Requested) -> Result<&'static cgroup::Active, String> {
    let mut unavailable = Vec::new();
    for mode in requested.candidates() {
        if mode == cgroup::Mode::Markers {
            return Ok(cgroup::set_active(cgroup::Active { mode, dir: None, unavailable }));
        }
        match cgroup::prepare(mode).and_then(|dir| match prove_cgroup(&dir) {
            Ok(()) => Ok(dir),
            Err(err) => {
                // The host seemed to allow it: worth a warning, unlike a
                // host that plainly does not.
                tracing::warn!("{} containment failed its proof: {err}", mode.as_str());
                let _ = cgroup::kill_tree(&dir);
                Err(err)
            }
        }) {
            Ok(dir) => {
                tracing::debug!("containment: {} in {}", mode.as_str(), dir.display());
                return Ok(cgroup::set_active(cgroup::Active {
                    mode,
                    dir: Some(dir),
                    unavailable,
                }));
            }
            Err(why) => {
                if requested != cgroup::Requested::Auto {
                    return Err(format!("{} containment is not available: {why}", mode.as_str()));
                }
                tracing::info!("{} containment is not available: {why}", mode.as_str());
                unavailable.push(format!("{}: {why}", mode.as_str()));
            }
        }
    }
    Err("no containment mode was asked for".into())
}

/// Starts a child that joins a group under `dir` between fork and exec,
/// and checks that the kernel lists it there.
fn prove_cgroup(dir: &Path) -> Result<(), String> {
    use std::os::unix::process::CommandExt as _;
    let probe = cgroup::Group::create_in(dir, "probe").map_err(|err| err.to_string())?;
    let joiner = Joiner::Join(Arc::clone(&probe));
    #[allow(clippy::disallowed_methods)]
    let mut command = std::process::Command::new("cat");
    command.stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::null());
    // SAFETY: the closure runs in the child between fork and exec and only
    // calls write(2) on a descriptor opened before the fork.
    unsafe {
        command.pre_exec(move || joiner.apply());
    }
    let mut child = spawn_std(&mut command)
        .map_err(|err| format!("a child could not join a test group: {}", spawn_error(err)))?;
    let pid = child.id() as i32;
    let joined = probe.members().contains(&pid);
    drop(child.stdin.take());
    let _ = child.wait();
    if joined {
        Ok(())
    } else {
        Err(format!("a child was not found in its test group {}", probe.path().display()))
    }
}

/// The Landlock ABI version the kernel offers
/// (`landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)`),
/// or why there is none.
pub fn landlock_abi() -> std::io::Result<i64> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_ulong = 1;
    // SAFETY: with a null attribute pointer and size 0, the call only
    // returns the ABI version; no memory is read or written.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if abi < 0 { Err(std::io::Error::last_os_error()) } else { Ok(abi) }
}

/// Whether seccomp filters are available, and this process's mode: from
/// `Seccomp:` in `/proc/self/status` and `prctl(PR_GET_SECCOMP)`.
pub fn seccomp_status() -> String {
    // SAFETY: PR_GET_SECCOMP reads a flag of this process; no memory is
    // passed.
    let mode = unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) };
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = status
        .lines()
        .find_map(|line| line.strip_prefix("Seccomp:"))
        .map(|value| value.trim().to_owned());
    match (field.as_deref(), mode) {
        (None, -1) => "not available (the kernel has no seccomp)".to_owned(),
        (_, 2) | (Some("2"), _) => {
            "available; this process already runs under a seccomp filter (mode 2)".to_owned()
        }
        _ => "available (mode 0: this process runs without a filter)".to_owned(),
    }
}

/// Ends this server's containment: kills everything left in its control
/// group directory and removes the directory (nothing in markers mode).
pub fn end_containment() {
    if let Some(dir) = cgroup::server_dir()
        && let Err(err) = cgroup::kill_tree(dir)
    {
        tracing::warn!("{err}");
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
    let joiner = scope.joiner();
    // SAFETY: the closure runs in the child between fork and exec and only
    // calls async-signal-safe functions (write, sigaction, sigprocmask,
    // prctl, getppid, _exit); the joiner is only read.
    unsafe {
        command.pre_exec(move || {
            joiner.apply()?;
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
    let joiner = scope.joiner();
    let channel = channel.map(AsRawFd::as_raw_fd);
    // SAFETY: the closure runs in the child between fork and exec and only
    // calls async-signal-safe functions (write, sigaction, sigprocmask,
    // setsid, ioctl, fcntl, prctl, getppid); the joiner is only read.
    unsafe {
        command.pre_exec(move || {
            joiner.apply()?;
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
/// own, with default signal handling, stdout to `/dev/null` and stderr
/// inherited for its logs. The caller sets its stdin to the guard's end of
/// its channel (closing the other end is how the guard learns the server
/// has ended).
///
/// Unlike every other child it gets no parent-death signal and no scope
/// marker, because its whole job is to outlive the server and stop what
/// carries the marker (it asks for a parent-death signal it handles itself:
/// [`parent_death_wakeup`]). Its own process group keeps a ^C meant for the
/// server's terminal, or a kill of the server's group, from reaching it.
/// Its stdout is never the server's: that is the MCP channel.
pub fn guard_command(program: impl AsRef<OsStr>) -> std::process::Command {
    use std::os::unix::process::CommandExt as _;
    #[allow(clippy::disallowed_methods)]
    let mut command = std::process::Command::new(program);
    command.envs(NONINTERACTIVE_ENV.iter().copied()).env_remove(SCOPE_VAR);
    command.process_group(0);
    command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::inherit());
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

/// The orphan guard's channel, taken from its stdin: a close-on-exec copy,
/// with `/dev/null` put in its place, so that nothing the guard might ever
/// start could inherit it.
pub fn guard_channel_from_stdin() -> std::io::Result<OwnedFd> {
    use std::os::fd::FromRawFd as _;
    // SAFETY: fcntl duplicates fd 0 into a new descriptor that nothing else
    // owns; it is wrapped in an `OwnedFd` at once.
    let channel = unsafe { libc::fcntl(0, libc::F_DUPFD_CLOEXEC, 3) };
    if channel == -1 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `channel` was just created above and is owned by no one else.
    let channel = unsafe { OwnedFd::from_raw_fd(channel) };
    let null = std::fs::File::open("/dev/null")?;
    // SAFETY: dup2 replaces fd 0, which no Rust object owns here (stdin is
    // only ever used through the copy above).
    if unsafe { libc::dup2(null.as_raw_fd(), 0) } == -1 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(channel)
}

/// The process id and user id of whoever made the other end of `socket`
/// (`SO_PEERCRED`; for a socket pair, the process that created the pair).
pub fn peer_credentials(socket: &impl AsRawFd) -> std::io::Result<(i32, u32)> {
    let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writes of the sizes given; the
    // kernel writes at most `len` bytes.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&raw mut cred).cast(),
            &mut len,
        )
    };
    if rc == -1 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((cred.pid, cred.uid))
}

/// For the orphan guard process: blocks SIGTERM (in the calling thread,
/// and so in threads it starts later), asks for it as the parent-death
/// signal, and returns a non-blocking `signalfd` that becomes readable when
/// it arrives. The guard then wakes when the server dies, and a SIGTERM
/// from anyone else only wakes it too. The parent may already be gone: the
/// caller checks `getppid()` after this.
pub fn parent_death_wakeup() -> std::io::Result<OwnedFd> {
    use nix::sys::signalfd::{SfdFlags, SignalFd};
    let mut mask = nix::sys::signal::SigSet::empty();
    mask.add(Signal::SIGTERM);
    mask.thread_block()?;
    let wake = SignalFd::with_flags(&mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)?;
    nix::sys::prctl::set_pdeathsig(Signal::SIGTERM)?;
    Ok(OwnedFd::from(wake))
}

/// Children we started ourselves, by pid and start time, so that the reaper
/// of adopted orphans never takes the exit status of a child a `Child`
/// handle waits for. Held across each spawn, so a child that exits at once
/// is registered before the reaper can see its zombie.
static SPAWNED: Mutex<Vec<(i32, u64)>> = Mutex::new(Vec::new());

/// Spawns `command` (built by this module) and registers the child as ours.
pub fn spawn(command: &mut tokio::process::Command) -> std::io::Result<tokio::process::Child> {
    let mut spawned = SPAWNED.lock().unwrap_or_else(PoisonError::into_inner);
    let child = command.spawn().map_err(spawn_error)?;
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
/// the jobs of a shell: their leader is gone or was orphaned (its parent is
/// no longer in the session: `(sleep 300 &)` leaves such a group behind),
/// and some member started at or after `since_ticks`. These belong to the
/// command that started then. A group whose leader's parent is the shell,
/// or a nested shell in the session, is that shell's job.
pub fn orphaned_groups(shell_pid: i32, since_ticks: u64) -> Vec<i32> {
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

/// What a stop reaches: every live process that is in one of `groups`,
/// `sessions` or `cgroups`, descends from one of `roots`, carries one of
/// `marks` in its environment, or is an unmarked process of ours that
/// `unmarked` attributes to the stop; never this process or one in
/// `exclude`, and (with `spare_jobs_of`) the shell's own jobs only when named
/// by `groups`, `sessions`, `roots` or `cgroups`.
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
    /// Control groups: everything in them (and under them) is reached, and
    /// killed as a whole after the grace period.
    pub cgroups: Vec<Arc<cgroup::Group>>,
    /// Processes of ours whose environment carries no marker of a live
    /// owner of this server (cleared, unreadable: non-dumpable, another
    /// user's, or relabelled with a made-up or ended owner): which of them
    /// this stop reaches.
    pub unmarked: Option<Unmarked>,
    /// Processes never reached (the orphan guard).
    pub exclude: Vec<i32>,
    /// A shell whose own jobs the sweeps by marker and by attribution never
    /// reach: the shell, every process group led by a child of the shell
    /// (other than `groups`), and their descendants. For stopping one
    /// command of a shell.
    pub spare_jobs_of: Option<i32>,
    /// Send SIGHUP before SIGTERM: interactive bash ignores SIGTERM but not
    /// SIGHUP, and passes SIGHUP on to its jobs.
    pub hangup: bool,
}

/// Which unmarked processes of ours (see [`Targets::unmarked`]) a stop
/// reaches: those that started at or after `since` and either descend
/// (now) from `under`, are in `cgroup`, or descend from an orphan the
/// server adopted (its parent is the server, which did not start it) that
/// is attributed to `owner`. An adopted orphan has lost its ancestry, so it
/// is attributed by its start time: to the newest `shell` or `run` owner
/// alive when it started. When several were alive (a `run` while a session
/// is open, two sessions), an orphan of the older one is taken for the
/// newer one's: stopped when that one stops, missed when its own owner
/// stops, and in any case stopped when the server ends. In a cgroup mode
/// the group decides instead, exactly.
#[derive(Debug, Clone, Default)]
pub struct Unmarked {
    /// The owner's scope value.
    pub owner: String,
    /// Clock ticks since boot (see [`boot_ticks_now`]).
    pub since: u64,
    /// A process whose descendants are the owner's (its shell, its bash).
    pub under: Option<i32>,
    /// The owner's control group.
    pub cgroup: Option<Arc<cgroup::Group>>,
}

impl Targets {
    /// Everything `scope` owns.
    pub fn scope(scope: &Scope) -> Targets {
        Targets {
            marks: vec![scope.mark()],
            cgroups: scope.group().cloned().into_iter().collect(),
            unmarked: Some(Unmarked {
                owner: scope.value().to_owned(),
                cgroup: scope.group().cloned(),
                ..Unmarked::default()
            }),
            ..Targets::default()
        }
    }

    /// Everything this server started: its descendants (orphans included,
    /// once [`reap_adopted_orphans`] made it a subreaper) and whatever
    /// carries its token, except `exclude`. Its control-group directory is
    /// killed apart, when the containment ends ([`end_containment`]).
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
            all.push((stat.pid, stat.ppid, stat.pgrp, stat.session, stat.start_ticks));
            if self.roots.contains(&Root { pid: stat.pid, start_ticks: stat.start_ticks }) {
                live_roots.push(stat.pid);
            }
        });
        let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
        let mut parent: HashMap<i32, (i32, u64)> = HashMap::new();
        for &(pid, ppid, _, _, start) in &all {
            children.entry(ppid).or_default().push(pid);
            parent.insert(pid, (ppid, start));
        }
        let descendants = |roots: Vec<i32>| {
            let mut reached: HashSet<i32> = HashSet::new();
            let mut stack = roots;
            while let Some(pid) = stack.pop() {
                if reached.insert(pid) {
                    stack.extend(children.get(&pid).into_iter().flatten());
                }
            }
            reached
        };
        let reached = descendants(live_roots);
        let spared = match self.spare_jobs_of {
            Some(shell) => {
                let leaders: Vec<i32> = all
                    .iter()
                    .filter(|&&(pid, ppid, pgrp, ..)| {
                        ppid == shell && pgrp == pid && !self.groups.contains(&pgrp)
                    })
                    .map(|&(pid, ..)| pid)
                    .collect();
                let mut jobs: Vec<i32> = all
                    .iter()
                    .filter(|&&(_, _, pgrp, ..)| leaders.contains(&pgrp))
                    .map(|&(pid, ..)| pid)
                    .collect();
                jobs.push(shell);
                let mut spared = descendants(jobs);
                spared.insert(shell);
                spared
            }
            None => HashSet::new(),
        };
        let in_cgroups: HashSet<i32> =
            self.cgroups.iter().flat_map(|group| group.members()).collect();
        let unmarked_cgroup: HashSet<i32> = self
            .unmarked
            .as_ref()
            .and_then(|unmarked| unmarked.cgroup.as_ref())
            .map(|group| group.members().into_iter().collect())
            .unwrap_or_default();
        let under: HashSet<i32> = self
            .unmarked
            .as_ref()
            .and_then(|unmarked| unmarked.under)
            .map(|pid| descendants(vec![pid]))
            .unwrap_or_default();
        // The ancestor of `pid` whose parent is this server, if any.
        let top_of = |pid: i32| {
            let mut current = pid;
            for _ in 0..4096 {
                let (ppid, start) = *parent.get(&current)?;
                if ppid == me {
                    return Some((current, start));
                }
                current = ppid;
            }
            None
        };
        let spawned: Vec<(i32, u64)> =
            SPAWNED.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let mut members = Vec::new();
        for &(pid, _, pgrp, session, start) in &all {
            if pid == me || self.exclude.contains(&pid) {
                continue;
            }
            // What is named outright is reached; the shell's jobs are spared
            // only from the sweeps by marker and by attribution.
            let found = reached.contains(&pid)
                || self.groups.contains(&pgrp)
                || self.sessions.contains(&session)
                || in_cgroups.contains(&pid)
                || !spared.contains(&pid)
                    && match self.environ_marked(pid) {
                        Marked::Yes => true,
                        Marked::Other => false,
                        Marked::Unmarked => self.unmarked.as_ref().is_some_and(|unmarked| {
                            start >= unmarked.since
                                && (under.contains(&pid)
                                    || unmarked_cgroup.contains(&pid)
                                    || top_of(pid).is_some_and(|top| {
                                        !spawned.contains(&top)
                                            && owner_at(top.1).as_deref()
                                                == Some(unmarked.owner.as_str())
                                    }))
                        }),
                    };
            if found {
                members.push(pid);
            }
        }
        members
    }

    /// Whether `pid`'s environment carries one of the marks ([`classify`]);
    /// an environment that cannot be read (a non-dumpable process, another
    /// user's) counts as unmarked.
    fn environ_marked(&self, pid: i32) -> Marked {
        if self.marks.is_empty() && self.unmarked.is_none() {
            return Marked::Other;
        }
        match std::fs::read(format!("/proc/{pid}/environ")) {
            Ok(environ) => classify(&self.marks, &environ),
            Err(_) => Marked::Unmarked,
        }
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

    /// Kills the control groups as a whole.
    fn kill_cgroups(&self) {
        for group in &self.cgroups {
            if let Err(err) = group.kill() {
                tracing::warn!("cannot kill the control group {}: {err}", group.path().display());
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
/// `targets.hangup`) and SIGCONT, then, after `grace`, the control groups'
/// kill and SIGKILL to whatever else is still alive. Processes that appear
/// meanwhile (a fork in progress) get the same. Returns `None` when there
/// was nothing alive to stop.
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
        targets.kill_cgroups();
        let members = targets.members();
        targets.signal(&members, Signal::SIGKILL);
        members.is_empty()
    })
    .await;
    Some(TerminationMode::Hard)
}

/// Sends SIGKILL at once to every process `targets` reach (the control
/// groups as a whole), a few rounds to catch forks in progress; for paths
/// that cannot wait (a dropped run).
pub fn kill_now(targets: &Targets) {
    for _ in 0..3 {
        targets.kill_cgroups();
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
/// started) and, when given, everything `scope` owns (its control group,
/// what carries its marker, what descends from the shell, and unmarked
/// orphans attributed to it): SIGHUP, SIGTERM and SIGCONT, then the
/// group's kill and SIGKILL to whatever is left after `grace`.
pub async fn terminate_session(sid: i32, scope: Option<&Scope>, grace: Duration) {
    let mut targets = scope.map(Targets::scope).unwrap_or_default();
    targets.sessions.push(sid);
    targets.roots.extend(Root::of(sid));
    if let Some(unmarked) = &mut targets.unmarked {
        unmarked.under = Some(sid);
    }
    targets.hangup = true;
    terminate(&targets, grace).await;
}

/// What stopping one command of the terminal shell `shell_pid` reaches
/// (`C-c`, the execution-limit kill): the groups it left behind in the
/// shell's session, every process carrying the command's own marker
/// (`<shell's scope>/c<seq>`, which the shell exports before it runs
/// command `seq`) in any session, and unmarked processes of the shell's
/// owner that started at or after `since`; never the shell or its own jobs
/// (groups led by a child of the shell). The caller adds the foreground
/// group.
pub fn command_targets(shell_pid: i32, seq: u64, since: u64) -> Targets {
    let scope = shell_scope(shell_pid);
    let group = scope.as_deref().and_then(cgroup_of_owner);
    Targets {
        groups: orphaned_groups(shell_pid, since),
        marks: scope.iter().map(|value| Mark::Exact(format!("{value}/c{seq}"))).collect(),
        unmarked: scope.map(|owner| Unmarked {
            owner,
            since,
            under: Some(shell_pid),
            cgroup: group,
        }),
        spare_jobs_of: Some(shell_pid),
        ..Targets::default()
    }
}

/// The scope value a shell we started carries, from its environment at
/// start (what we set; a shell cannot change its own `/proc/PID/environ`
/// by exporting).
fn shell_scope(shell_pid: i32) -> Option<String> {
    let environ = std::fs::read(format!("/proc/{shell_pid}/environ")).ok()?;
    let token = Mark::Token(server_token().to_owned());
    marker_values(&environ)
        .find(|value| token.matches_value(value))
        .map(|value| String::from_utf8_lossy(value).into_owned())
}

/// The live control group of the owner `value`, if it has one.
fn cgroup_of_owner(value: &str) -> Option<Arc<cgroup::Group>> {
    LIVE_GROUPS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .filter_map(|(owner, group)| (owner == value).then(|| group.upgrade()).flatten())
        .next()
}

/// The control groups of live scopes, by owner value, so that a command's
/// stop finds its shell's group from the shell's pid.
static LIVE_GROUPS: Mutex<Vec<(String, std::sync::Weak<cgroup::Group>)>> = Mutex::new(Vec::new());

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

    #[test]
    fn an_owner_mark_finds_its_commands_marks_and_nothing_longer() {
        let owner = Mark::Exact("abc/shell-1".into());
        let command = Mark::Exact("abc/shell-1/c7".into());
        let env = |value: &str| format!("A=1\0SHELLKEEP_SCOPE={value}\0").into_bytes();
        assert!(owner.matches(&env("abc/shell-1/c7")) && owner.matches(&env("abc/shell-1")));
        assert!(!owner.matches(&env("abc/shell-10")) && !owner.matches(&env("abc/shell-10/c1")));
        assert!(command.matches(&env("abc/shell-1/c7")));
        assert!(!command.matches(&env("abc/shell-1/c70")) && !command.matches(&env("abc/shell-1")));
    }

    #[test]
    fn environments_without_a_live_owners_marker_are_unmarked() {
        let token = server_token();
        let mine = Mark::Exact(format!("{token}/run-1"));
        let env = |value: &str| format!("SHELLKEEP_SCOPE={value}\0").into_bytes();
        let live = [format!("{token}/run-1"), format!("{token}/shell-2")];
        let of = |value: &str| {
            classify_among(std::slice::from_ref(&mine), &env(value), token, |owner| {
                live.iter().any(|live| live == owner)
            })
        };
        assert_eq!(of(&format!("{token}/run-1")), Marked::Yes);
        for other in ["shell-2", "shell-2/c7"] {
            assert_eq!(of(&format!("{token}/{other}")), Marked::Other, "{other}");
        }
        // Made up, ended, never handed out, or not of a shape we hand out.
        for relabelled in [
            "ghost",
            "run-99",
            "run-99/c1",
            "shell-20",
            "shell-2/x",
            "shell-2/c",
            "shell-2/c1/c2",
            "",
            "/shell-2",
        ] {
            assert_eq!(of(&format!("{token}/{relabelled}")), Marked::Unmarked, "{relabelled}");
        }
        for foreign in ["x", "otherserver/shell-2", "", "shell-2"] {
            assert_eq!(of(foreign), Marked::Unmarked, "{foreign}");
        }
        assert_eq!(classify(&[mine], b"\0\0\0"), Marked::Unmarked);
    }

    #[test]
    fn a_scope_is_a_live_owner_until_it_is_dropped() {
        let scope = Scope::new("test");
        let env = format!("SHELLKEEP_SCOPE={}/c3\0", scope.value()).into_bytes();
        assert_eq!(classify(&[], &env), Marked::Other);
        drop(scope);
        assert_eq!(classify(&[], &env), Marked::Unmarked);
    }

    #[test]
    fn an_orphan_goes_to_the_newest_owner_alive_at_its_birth() {
        let base = boot_ticks_now() + 1_000_000;
        {
            let mut owners = OWNERS.lock().unwrap_or_else(PoisonError::into_inner);
            for (value, started, ended) in
                [("t/old", base, None), ("t/new", base + 10, Some(base + 20))]
            {
                owners.push(OwnerSpan { value: value.into(), started, ended });
            }
        }
        assert_eq!(owner_at(base + 5).as_deref(), Some("t/old"));
        assert_eq!(owner_at(base + 15).as_deref(), Some("t/new"));
        assert_eq!(owner_at(base + 25).as_deref(), Some("t/old"));
        // Born in the tick the newer owner ended: the live one takes it.
        assert_eq!(owner_at(base + 20).as_deref(), Some("t/old"));
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

    /// The control group alone finds and kills what left every group,
    /// session and environment, then the server's directory goes.
    #[tokio::test]
    async fn a_control_group_kills_what_nothing_else_finds() {
        for mode in [cgroup::Mode::Cgroup2, cgroup::Mode::Cgroup1] {
            let dir = match cgroup::prepare(mode) {
                Ok(dir) => dir,
                Err(why) => {
                    eprintln!("{}: skipped, not available here: {why}", mode.as_str());
                    continue;
                }
            };
            let group = cgroup::Group::create_in(&dir, "test").expect("a group");
            let joiner = Joiner::Join(Arc::clone(&group));
            #[allow(clippy::disallowed_methods)]
            let mut command = tokio::process::Command::new("bash");
            command
                .arg("-c")
                .arg(
                    "(env -i setsid sleep 300 &); (setsid bash -c 'trap \"\" TERM; sleep 300' &); \
                     trap '' TERM; exec sleep 300",
                )
                .stdin(Stdio::null());
            // SAFETY: only write(2) between fork and exec (see Joiner::apply).
            unsafe {
                command.pre_exec(move || joiner.apply());
            }
            let mut child = spawn(&mut command).expect("spawn bash");
            // Three sleeps, each past its `trap`: no shell left that SIGTERM kills.
            let sleeps = || {
                let comm = |pid: i32| std::fs::read_to_string(format!("/proc/{pid}/comm"));
                group
                    .members()
                    .into_iter()
                    .filter(move |&pid| comm(pid).is_ok_and(|c| c == "sleep\n"))
            };
            assert!(wait_until(Duration::from_secs(10), || sleeps().count() == 3).await);
            let targets = Targets { cgroups: vec![Arc::clone(&group)], ..Targets::default() };
            let mode_used = terminate(&targets, Duration::from_millis(200)).await;
            assert_eq!(mode_used, Some(TerminationMode::Hard), "{}", mode.as_str());
            assert_eq!(group.members(), Vec::<i32>::new(), "{}", mode.as_str());
            child.wait().await.expect("reaped");
            drop(group);
            cgroup::kill_tree(&dir).expect("the directory is removed");
            assert!(!dir.exists());
        }
    }

    /// A child that cannot join its control group does not start, and the
    /// error says so: containment is never silently off.
    #[tokio::test]
    async fn a_child_that_cannot_join_its_group_does_not_start() {
        let joiner = Joiner::Fail(libc::EACCES);
        #[allow(clippy::disallowed_methods)]
        let mut command = tokio::process::Command::new("true");
        // SAFETY: only returns an error between fork and exec.
        unsafe {
            command.pre_exec(move || joiner.apply());
        }
        let err = spawn(&mut command).expect_err("the spawn fails");
        let text = err.to_string();
        assert!(text.contains("could not put the new process in its control group"), "{text}");
        assert!(text.contains("Permission denied") && text.contains("=markers"), "{text}");
    }
}
