//! One of the two rooms of `process` with `unsafe` code (the other,
//! `namespace`, makes a confined owner's PID namespace), each block with
//! its `// SAFETY:` comment: the commands we build and what their children
//! do between fork and exec (join the control group, the resource limits
//! and CPU priority (the `limits` step), default signal handling and mask,
//! the parent-death signal, the PID namespace, a new session on the PTY,
//! passed descriptors, the sandbox), the subreaper flag, the guard's own
//! descriptors and signals, peer credentials, a terminal's window size,
//! and the Landlock, seccomp and namespace probes. Nothing else here:
//! scanning `/proc`, stopping processes and the registry of our children
//! live in rooms without `unsafe`.
#![allow(unsafe_code)]

use std::ffi::OsStr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, OnceLock};

use nix::sys::signal::Signal;

use super::child_env::{NONINTERACTIVE_UNSET, SERVER_ONLY, child_env};
use super::children::{spawn_registered, spawn_std};
use super::namespace::{self, Namespace, Step};
use super::scope::{ChildRules, SCOPE_VAR, Scope};
use crate::cgroup;

/// What a child of `scope` does between fork and exec to join its control
/// group: the descriptor to write `0` to, or the error to fail with.
fn joiner(scope: &Scope) -> Joiner {
    match scope.group_state() {
        Ok(Some(group)) => Joiner::Join(Arc::clone(group)),
        Ok(None) => Joiner::Nothing,
        Err(err) => Joiner::Fail(err.raw_os_error().unwrap_or(libc::EIO)),
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
/// above the errno, so [`super::spawn()`] can say what went wrong.
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

// ---- The `limits` step: resource limits and CPU priority (`crate::limits`) ----

/// What a child of `scope` does between fork and exec for its resource
/// limits: join the v1 groups that limit it, set its resource limits of the
/// process, and lower its CPU priority.
fn child_limits(scope: &Scope) -> ChildLimits {
    // SAFETY: getpriority reads this process's nice value; errno is cleared
    // first because -1 is a valid value.
    let current = unsafe {
        *libc::__errno_location() = 0;
        libc::getpriority(libc::PRIO_PROCESS as _, 0)
    };
    match scope.limits_state() {
        Ok(owner) => {
            let (address_space, processes) = owner.rlimits();
            ChildLimits {
                groups: owner.joins().to_vec(),
                address_space,
                processes,
                // Never below the server's own: only root may raise a
                // priority.
                nice: (owner.asked().nice > current).then_some(owner.asked().nice),
                fail: None,
            }
        }
        Err(err) => ChildLimits {
            groups: Vec::new(),
            address_space: None,
            processes: None,
            nice: None,
            fail: Some(err.raw_os_error().unwrap_or(libc::EIO)),
        },
    }
}

/// The `limits` step of a child, prepared before the fork.
#[derive(Clone)]
struct ChildLimits {
    /// Groups to join (their `cgroup.procs` stay open while the `Arc`s live).
    groups: Vec<Arc<cgroup::Group>>,
    /// `RLIMIT_AS`, in bytes.
    address_space: Option<u64>,
    /// `RLIMIT_NPROC`.
    processes: Option<u64>,
    /// The nice value to set, when above the server's.
    nice: Option<i32>,
    /// The limits could not be applied: fail with this errno.
    fail: Option<i32>,
}

/// The errors a child reports when its limits could not be applied carry
/// this tag above the errno, so [`spawn_error`] can say what went wrong.
const LIMITS_FAILED: i32 = 0x4c00_0000;

impl ChildLimits {
    /// Only async-signal-safe calls: this runs between fork and exec.
    fn apply(&self) -> std::io::Result<()> {
        let failed = |errno: i32| std::io::Error::from_raw_os_error(LIMITS_FAILED | errno);
        let last = || std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO);
        if let Some(errno) = self.fail {
            return Err(failed(errno));
        }
        for group in &self.groups {
            // SAFETY: write(2) on a descriptor the parent opened before the
            // fork, from a static buffer; async-signal-safe.
            if unsafe { libc::write(group.procs_fd(), b"0".as_ptr().cast(), 1) } != 1 {
                return Err(failed(last()));
            }
        }
        for (resource, value) in
            [(libc::RLIMIT_AS, self.address_space), (libc::RLIMIT_NPROC, self.processes)]
        {
            let Some(value) = value else { continue };
            let limit = libc::rlimit { rlim_cur: value, rlim_max: value };
            // SAFETY: setrlimit reads the struct on the stack; async-signal-safe.
            if unsafe { libc::setrlimit(resource, &limit) } == -1 {
                return Err(failed(last()));
            }
        }
        if let Some(nice) = self.nice {
            // SAFETY: setpriority changes this process's nice value only;
            // async-signal-safe.
            if unsafe { libc::setpriority(libc::PRIO_PROCESS as _, 0, nice) } == -1 {
                return Err(failed(last()));
            }
        }
        Ok(())
    }
}

// ---- end of the `limits` step ----

/// The errors a child reports when its sandbox could not be applied carry
/// this tag above the errno.
const CONFINE_FAILED: i32 = 0x4b00_0000;

/// The sandbox step, last between fork and exec: `no_new_privs`, the
/// Landlock ruleset, the seccomp filters (see `sandbox`). Nothing happens
/// for an unconfined owner.
///
/// Only async-signal-safe calls: this runs between fork and exec (the
/// ruleset and the filters were built by the parent; loading a filter is
/// `prctl` and `seccomp`, no allocation).
fn confine(confinement: Option<&ChildRules>) -> std::io::Result<()> {
    let Some(confinement) = confinement else { return Ok(()) };
    if confinement.landlock.is_none() && confinement.filters.is_empty() {
        return Ok(());
    }
    let failed = || {
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO);
        std::io::Error::from_raw_os_error(CONFINE_FAILED | errno)
    };
    // SAFETY: PR_SET_NO_NEW_PRIVS only sets a flag of this process; no
    // memory is passed.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } == -1 {
        return Err(failed());
    }
    if let Some(ruleset) = &confinement.landlock {
        // SAFETY: landlock_restrict_self takes a ruleset descriptor the
        // parent created and flags; no memory is passed.
        let rc = unsafe {
            libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0 as libc::c_uint)
        };
        if rc != 0 {
            return Err(failed());
        }
    }
    for filter in &confinement.filters {
        if seccompiler::apply_filter(filter).is_err() {
            return Err(failed());
        }
    }
    Ok(())
}

/// Whether this kernel takes seccomp filters that make a call fail with an
/// errno: `seccomp(SECCOMP_GET_ACTION_AVAIL, SECCOMP_RET_ERRNO)` (Linux
/// 4.14; fails where seccomp filters are not built in).
pub(crate) fn seccomp_filters_available() -> bool {
    const SECCOMP_GET_ACTION_AVAIL: libc::c_ulong = 2;
    const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
    let action = SECCOMP_RET_ERRNO;
    // SAFETY: the kernel reads one u32 from `action`, which lives across
    // the call; nothing is written.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            SECCOMP_GET_ACTION_AVAIL,
            0 as libc::c_uint,
            &raw const action,
        )
    };
    rc == 0
}

/// Spawns `command` (built by this module) and registers the child as ours.
pub(crate) fn spawn(
    command: &mut tokio::process::Command,
) -> std::io::Result<tokio::process::Child> {
    spawn_registered(|| command.spawn().map_err(spawn_error), tokio::process::Child::id)
}

/// The error [`spawn()`] returns: a failed join named as such.
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
        Some(_) if namespace::describe(&err).is_some() => {
            let words = namespace::describe(&err).unwrap_or_default();
            std::io::Error::new(
                err.kind(),
                format!("could not start the new process in a PID namespace of its own: {words}"),
            )
        }
        Some(code) if code & !0xffff == LIMITS_FAILED => {
            let cause = std::io::Error::from_raw_os_error(code & 0xffff);
            std::io::Error::new(
                cause.kind(),
                format!(
                    "could not apply the resource limits to the new process: {cause}; start the \
                     server with --memory-max none and --tasks-max none to run without them"
                ),
            )
        }
        Some(code) if code & !0xffff == CONFINE_FAILED => {
            let cause = std::io::Error::from_raw_os_error(code & 0xffff);
            std::io::Error::new(
                cause.kind(),
                format!("could not apply the sandbox to the new process: {cause}"),
            )
        }
        _ => err,
    }
}

/// Starts a child that joins a group under `dir` between fork and exec,
/// and checks that the kernel lists it there.
pub(super) fn prove_cgroup(dir: &Path) -> Result<(), String> {
    use std::os::unix::process::CommandExt as _;
    let probe = cgroup::Group::create_in(dir, "probe").map_err(|err| err.to_string())?;
    let joiner = Joiner::Join(Arc::clone(&probe));
    #[allow(clippy::disallowed_methods, reason = "process/spawn.rs is where children are built")]
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

/// Starts `cat /proc/self/stat` in a PID namespace of its own (see
/// `namespace`) and checks that it is pid 2 there, as its private `/proc`
/// says; or says why the host refuses.
pub(super) fn prove_namespace() -> Result<(), String> {
    use std::io::Read as _;
    use std::os::unix::process::CommandExt as _;
    let namespace = Namespace::prepare(None, user_namespace);
    let parent = std::process::id();
    let signals = SignalReset::new();
    #[allow(clippy::disallowed_methods, reason = "process/spawn.rs is where children are built")]
    let mut command = std::process::Command::new("cat");
    command
        .arg("/proc/self/stat")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0);
    // SAFETY: as in `group_command`: only async-signal-safe calls.
    unsafe {
        command.pre_exec(move || {
            signals.apply();
            die_with_parent(parent)?;
            namespace.enter(false)
        });
    }
    let mut child = spawn_std(&mut command).map_err(|err| {
        let why = namespace::describe(&err).unwrap_or_else(|| err.to_string());
        format!(
            "no PID namespace of its own for a sandboxed command on this host ({why}); the \
             control group, scope markers and orphan guard still contain what it starts"
        )
    })?;
    let mut stat = String::new();
    let read = child.stdout.take().map(|mut out| out.read_to_string(&mut stat));
    let status = child.wait();
    match (read, status) {
        (Some(Ok(_)), Ok(status)) if status.success() && stat.starts_with("2 (cat)") => Ok(()),
        _ => Err(format!(
            "a command started in a PID namespace of its own did not see itself as pid 2 in its \
             own /proc (it read {:?})",
            stat.split(')').next().unwrap_or_default()
        )),
    }
}

/// The user namespace every keeper of this server enters, made once (see
/// [`make_user_namespace`]), or the code of why it could not be.
pub(super) fn user_namespace() -> Result<libc::c_int, i32> {
    use std::os::fd::AsRawFd as _;
    static MADE: OnceLock<Result<std::os::fd::OwnedFd, i32>> = OnceLock::new();
    match MADE.get_or_init(make_user_namespace) {
        Ok(fd) => Ok(fd.as_raw_fd()),
        Err(code) => Err(*code),
    }
}

/// Makes the user namespace the keepers enter: a child (`cat`, which waits
/// on its stdin) unshares one before it execs; this process writes its
/// maps (only its own uid and gid onto themselves; as root, every id onto
/// itself), keeps a descriptor of it, and lets the child end.
///
/// Not in each keeper, because a keeper is a fork of the server, which is
/// not dumpable (`private_fs::make_process_undumpable`): its `/proc/self`
/// files are root's, and a user without privileges could not write its own
/// maps. The child has exec'd, so it is dumpable again, and its maps are
/// the server's to write.
fn make_user_namespace() -> Result<std::os::fd::OwnedFd, i32> {
    let errno = |err: &std::io::Error| err.raw_os_error().unwrap_or(libc::EIO);
    let mut holder = user_namespace_holder().map_err(|err| Step::User.code(errno(&err)))?;
    let pid = holder.id();
    let uid = nix::unistd::geteuid().as_raw();
    let gid = nix::unistd::getegid().as_raw();
    let maps = if uid == 0 {
        // Root (without CAP_SYS_ADMIN, or it would need none) maps every id
        // onto itself, so that a command may still become another user
        // (`apt` drops to `_apt`, `setpriv`, `su`) and groups may be set.
        let all = format!("0 0 {}\n", u32::MAX);
        vec![("uid_map", all.clone()), ("gid_map", all)]
    } else {
        vec![
            ("setgroups", "deny".to_owned()),
            ("uid_map", format!("{uid} {uid} 1\n")),
            ("gid_map", format!("{gid} {gid} 1\n")),
        ]
    };
    let made = maps
        .into_iter()
        .try_for_each(|(file, map)| std::fs::write(format!("/proc/{pid}/{file}"), map))
        .map_err(|err| Step::Maps.code(errno(&err)))
        .and_then(|()| {
            std::fs::File::open(format!("/proc/{pid}/ns/user"))
                .map(std::os::fd::OwnedFd::from)
                .map_err(|err| Step::Maps.code(errno(&err)))
        });
    drop(holder.stdin.take());
    let _ = holder.wait();
    made
}

/// A child that has unshared a user namespace and waits on its stdin
/// (`cat`), for [`namespace`] to write the namespace's maps and keep a
/// descriptor of it; closing its stdin ends it.
fn user_namespace_holder() -> std::io::Result<std::process::Child> {
    use std::os::unix::process::CommandExt as _;
    let parent = std::process::id();
    #[allow(clippy::disallowed_methods, reason = "process/spawn.rs is where children are built")]
    let mut command = std::process::Command::new("cat");
    command.stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::null()).process_group(0);
    // SAFETY: the closure runs in the child between fork and exec and only
    // calls unshare, prctl and getppid (async-signal-safe).
    unsafe {
        command.pre_exec(move || {
            if libc::unshare(libc::CLONE_NEWUSER) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            die_with_parent(parent)
        });
    }
    spawn_std(&mut command)
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

/// A command for `program` that starts in a new process group of its own,
/// with the non-interactive environment, `scope`'s marker, default signal
/// handling and a parent-death signal.
pub(crate) fn group_command(program: impl AsRef<OsStr>, scope: &Scope) -> tokio::process::Command {
    #[allow(clippy::disallowed_methods, reason = "process/spawn.rs is where children are built")]
    let mut command = tokio::process::Command::new(program);
    command
        .envs(child_env().iter().map(|(name, value)| (name, value)))
        .env(SCOPE_VAR, scope.value());
    for name in NONINTERACTIVE_UNSET.iter().chain(SERVER_ONLY) {
        command.env_remove(name);
    }
    command.process_group(0);
    let parent = std::process::id();
    let signals = SignalReset::new();
    let joiner = joiner(scope);
    let limits = child_limits(scope);
    let namespace =
        scope.namespace().then(|| Namespace::prepare(scope.report().map(|r| &**r), user_namespace));
    let confinement = scope.confinement().cloned();
    // SAFETY: the closure runs in the child between fork and exec and only
    // calls async-signal-safe functions (write, setrlimit, setpriority,
    // sigaction, sigprocmask, prctl, getppid, _exit, landlock_restrict_self,
    // seccomp, and the namespace's: see `Namespace::enter`); the joiner, the
    // limits, the namespace's set-up and the confinement are only read.
    unsafe {
        command.pre_exec(move || {
            joiner.apply()?;
            limits.apply()?;
            signals.apply();
            die_with_parent(parent)?;
            if let Some(namespace) = &namespace {
                // Returns in the process that execs (pid 2 inside), which
                // stays in the group the keeper leads; the keeper never
                // returns, so only that process is confined.
                namespace.enter(false)?;
            }
            confine(confinement.as_deref())
        });
    }
    command
}

/// Like [`group_command`], and the child also gets each `(fd, target)` of
/// `fds` as its descriptor number `target` (for input passed through a
/// pipe). The caller keeps `fds` open until the command is spawned and
/// closes them after. At most eight descriptors.
pub(crate) fn group_command_with_fds(
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

/// A copy of `fd` at the lowest free descriptor at or above `min`, closed
/// on exec: for a descriptor a child inherits, kept clear of the numbers
/// the child's start-up file moves its own descriptors to.
pub(crate) fn dup_at_least(fd: &OwnedFd, min: RawFd) -> std::io::Result<OwnedFd> {
    let raw = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_DUPFD_CLOEXEC(min))?;
    // SAFETY: `fcntl` just returned this new descriptor, owned by nobody
    // else.
    Ok(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw) })
}

/// A command for `program` that runs as the leader of a new session whose
/// controlling terminal is the PTY `slave`, with the non-interactive
/// environment, `scope`'s marker, default signal handling and a
/// parent-death signal.
///
/// Each descriptor of `inherited` stays open in the child at its own
/// number (it is not closed on exec): the shell's end of the completion
/// channel and its sealed keys file, which the shell moves where it wants
/// them. (Installing them at fixed numbers here could overwrite a
/// descriptor the spawn itself relies on.)
pub(crate) fn pty_command(
    program: impl AsRef<OsStr>,
    slave: &OwnedFd,
    scope: &Scope,
    inherited: &[&OwnedFd],
) -> std::io::Result<tokio::process::Command> {
    #[allow(clippy::disallowed_methods, reason = "process/spawn.rs is where children are built")]
    let mut command = tokio::process::Command::new(program);
    command
        .envs(child_env().iter().map(|(name, value)| (name, value)))
        .env(SCOPE_VAR, scope.value());
    for name in NONINTERACTIVE_UNSET.iter().chain(SERVER_ONLY) {
        command.env_remove(name);
    }
    command
        .stdin(Stdio::from(slave.try_clone()?))
        .stdout(Stdio::from(slave.try_clone()?))
        .stderr(Stdio::from(slave.try_clone()?));
    let parent = std::process::id();
    let signals = SignalReset::new();
    let joiner = joiner(scope);
    let limits = child_limits(scope);
    let namespace =
        scope.namespace().then(|| Namespace::prepare(scope.report().map(|r| &**r), user_namespace));
    let inherited: Vec<i32> = inherited.iter().map(|fd| fd.as_raw_fd()).collect();
    let confinement = scope.confinement().cloned();
    // SAFETY: the closure runs in the child between fork and exec and only
    // calls async-signal-safe functions (write, setrlimit, setpriority,
    // sigaction, sigprocmask, setsid, ioctl, fcntl, prctl, getppid,
    // landlock_restrict_self, seccomp, and the namespace's: see
    // `Namespace::enter`); the joiner, the limits, the namespace's set-up
    // and the confinement are only read.
    unsafe {
        command.pre_exec(move || {
            joiner.apply()?;
            limits.apply()?;
            signals.apply();
            if let Some(namespace) = &namespace {
                // The spawned child stays outside as the keeper, with the
                // server's parent-death signal; what returns is the shell
                // (pid 2 inside), which makes the terminal's session below
                // and dies with the namespace's init.
                die_with_parent(parent)?;
                namespace.enter(true)?;
            }
            for &fd in &inherited {
                if libc::fcntl(fd, libc::F_SETFD, 0) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            nix::unistd::setsid()?;
            // Make the PTY (already dup'ed onto fd 0) the controlling
            // terminal of the new session, so job control and ^C work.
            if libc::ioctl(0, libc::TIOCSCTTY as _, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            if namespace.is_none() {
                die_with_parent(parent)?;
            }
            confine(confinement.as_deref())
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
pub(crate) fn guard_command(program: impl AsRef<OsStr>) -> std::process::Command {
    use std::os::unix::process::CommandExt as _;
    #[allow(clippy::disallowed_methods, reason = "process/spawn.rs is where children are built")]
    let mut command = std::process::Command::new(program);
    command.envs(child_env().iter().map(|(name, value)| (name, value))).env_remove(SCOPE_VAR);
    for name in SERVER_ONLY {
        command.env_remove(name);
    }
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

/// The window size (rows, columns) of the terminal open on `fd`
/// (`TIOCGWINSZ`): for a person's terminal that watches a session.
pub fn terminal_size(fd: &impl AsRawFd) -> std::io::Result<(u16, u16)> {
    let mut size = libc::winsize { ws_row: 0, ws_col: 0, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: `size` is valid for a write of a `winsize`, which is what
    // TIOCGWINSZ writes; the descriptor is only read.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCGWINSZ, &raw mut size) };
    if rc == -1 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((size.ws_row, size.ws_col))
}

/// For the orphan guard process: blocks SIGTERM (in the calling thread,
/// and so in threads it starts later), asks for it as the parent-death
/// signal, and returns a non-blocking `signalfd` that becomes readable when
/// it arrives. The guard then wakes when the server dies, and a SIGTERM
/// from anyone else only wakes it too. The parent may already be gone: the
/// caller checks `getppid()` after this.
pub(crate) fn parent_death_wakeup() -> std::io::Result<OwnedFd> {
    use nix::sys::signalfd::{SfdFlags, SignalFd};
    let mut mask = nix::sys::signal::SigSet::empty();
    mask.add(Signal::SIGTERM);
    mask.thread_block()?;
    let wake = SignalFd::with_flags(&mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)?;
    nix::sys::prctl::set_pdeathsig(Signal::SIGTERM)?;
    Ok(OwnedFd::from(wake))
}

/// Makes this process a child subreaper, so that orphans of everything it
/// started stay its descendants (`PR_SET_CHILD_SUBREAPER`).
pub(super) fn become_subreaper() -> std::io::Result<()> {
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER only sets a flag on this
    // process; no memory is passed.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } == -1 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
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
pub(crate) fn ignore_interrupt_and_hangup() -> std::io::Result<()> {
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::process::terminate::wait_until;
    use crate::process::{Targets, TerminationMode, spawn, terminate};

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
            #[allow(
                clippy::disallowed_methods,
                reason = "process/spawn.rs is where children are built"
            )]
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

    /// A child that cannot make its namespace does not start, and the
    /// error says which step failed and why: a confined owner never starts
    /// outside the namespace its report promises.
    #[tokio::test]
    async fn a_child_that_cannot_make_its_namespace_does_not_start() {
        let not_one = std::fs::File::open("/dev/null").expect("/dev/null");
        let namespace = Namespace::with_a_bad_user_namespace(not_one.as_raw_fd());
        #[allow(
            clippy::disallowed_methods,
            reason = "process/spawn.rs is where children are built"
        )]
        let mut command = tokio::process::Command::new("true");
        command.process_group(0);
        // SAFETY: only the namespace's async-signal-safe set-up between fork
        // and exec.
        unsafe {
            command.pre_exec(move || namespace.enter(false));
        }
        let err = spawn(&mut command).expect_err("the spawn fails");
        let text = err.to_string();
        assert!(text.contains("could not start the new process in a PID namespace"), "{text}");
        assert!(text.contains("user namespace could not be entered: Invalid argument"), "{text}");
        drop(not_one);
    }

    /// A child that cannot join its control group does not start, and the
    /// error says so: containment is never silently off.
    #[tokio::test]
    async fn a_child_that_cannot_join_its_group_does_not_start() {
        let joiner = Joiner::Fail(libc::EACCES);
        #[allow(
            clippy::disallowed_methods,
            reason = "process/spawn.rs is where children are built"
        )]
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
