//! A PID namespace per confined owner, whose init is ours: three
//! processes made between fork and exec of the command the server spawns
//! (the keeper, the init, the shell; see [`Namespace`]).
//!
//! Not here: the sandbox's rules (`sandbox`), the rest of what runs between
//! fork and exec (`spawn`), or whether to confine an owner (its scope).
//!
//! Invariant: what a sandboxed shell or `run` command starts cannot outlive
//! it, whatever it does to its group, session, environment or control
//! group; and everything between fork and exec is async-signal-safe (what
//! the child needs is prepared in the parent, nothing is allocated there).
#![allow(unsafe_code)]

use std::ffi::CStr;
use std::sync::OnceLock;

/// What a child needs to enter a namespace of its own, prepared in the
/// parent (the child may not allocate).
///
/// Three processes, all made between fork and exec of the command the
/// server spawns. Everything there is async-signal-safe: what the child
/// needs is prepared in the parent ([`Namespace::prepare`]), nothing is
/// allocated in the child.
///
/// Without privileges (or as root without CAP_SYS_ADMIN), a PID namespace
/// needs a user namespace. The server makes one, once
/// (`make_user_namespace`): a child unshares it before it execs `cat`,
/// and the server writes its maps (only its own uid and gid onto
/// themselves, so files keep their owners and a command has no capability
/// once it execs; as root, every id onto itself) and keeps a descriptor
/// of it. The keepers enter it with `setns`. They could not make their
/// own: a keeper is a fork of the server, which is not dumpable, so its
/// `/proc/self` files are root's and its maps unwritable to it (and
/// `unshare` of a user namespace needs a single-threaded process, which
/// the server is not).
///
/// The shell (pid 2 inside): the process that goes on to exec bash.
/// The rest of the child's set-up runs in it only: the new session and
/// controlling terminal, the descriptors it keeps, the sandbox's Landlock
/// and seccomp steps (so the keeper and the init are outside the
/// sandbox, and nothing inside can signal them). Everything it starts is
/// inside.
///
/// The keeper and the init are forks of the server that never exec: they
/// share its memory copy-on-write (a few pages each of their own), and
/// `ps` shows the server's command line for them, under the names
/// `shellkeep-ns` and `shellkeep-init` (`/proc/PID/comm`).
///
/// What the commands see: `$$` is 2; `ps`, `pgrep`, `kill`, `jobs -p`, `$!` and `/proc` all speak
/// the namespace's pids, and `ps` shows the init as pid 1. Without
/// privileges, the user namespace (one per server, shared by its sandboxed
/// owners: it only maps ids) shows files of users other than the server's
/// as owned by `nobody` (`ls -l /`), and supplementary groups as
/// `nogroup`; rights are unchanged (the kernel checks the real ids). As
/// root every id is mapped: nothing shows differently.
/// `sudo` cannot work there (nor anywhere under the sandbox's
/// `no_new_privs`). The mount namespace has the host's mounts, but a
/// command's `mount` (possible in its own user namespace) stays in it.
///
/// Where the host refuses: No user namespaces (`user.max_user_namespaces` 0, Ubuntu's AppArmor
/// restriction, a container's seccomp profile), or a `/proc` that cannot be
/// mounted (a container that masks parts of the host's): `namespace_probe` says
/// which step failed, once per process, and the sandbox keeps the
/// containment every owner has (control group, markers, guard), with
/// `Enforcement.namespace` false and the reason in its `missing`. The
/// start goes on: the namespace is a net under the sandbox, not part of a
/// mode.
#[derive(Clone, Debug)]
pub(crate) struct Namespace {
    /// The user namespace to enter first.
    user: UserNamespace,
    /// The write end of the owner's [`Report`], kept open by the keeper.
    report: Option<libc::c_int>,
}

/// The user namespace a keeper enters before it makes its PID namespace.
#[derive(Clone, Copy, Debug)]
enum UserNamespace {
    /// None: the server runs as root with CAP_SYS_ADMIN.
    Needless,
    /// The server's (a descriptor of `/proc/PID/ns/user`, open for the
    /// process's life: `spawn::user_namespace`).
    Enter(libc::c_int),
    /// It could not be made: fail with this code (a step and an errno).
    Fail(i32),
}

/// A pipe on which a keeper says that its shell left processes running
/// when it ended (one byte): they die with the namespace before the
/// server can count them, so the keeper counts them for it.
#[derive(Debug)]
pub(super) struct Report {
    /// The server's end, non-blocking.
    read: std::os::fd::OwnedFd,
    /// The keepers' end (each keeper keeps a copy).
    write: std::os::fd::OwnedFd,
}

impl Report {
    /// A new pipe, closed on exec at both ends.
    pub(super) fn new() -> std::io::Result<Report> {
        use nix::fcntl::OFlag;
        let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)?;
        Ok(Report { read, write })
    }

    /// Whether a keeper said so since the last call.
    pub(super) fn take(&self) -> bool {
        let mut said = false;
        let mut buf = [0u8; 64];
        while nix::unistd::read(&self.read, &mut buf).is_ok_and(|read| read > 0) {
            said = true;
        }
        said
    }
}

/// The process name the init gives itself (`ps` inside shows it as pid 1).
const INIT_NAME: &CStr = c"shellkeep-init";

/// The process name of the keeper, outside.
const KEEPER_NAME: &CStr = c"shellkeep-ns";

/// Signals the keeper ignores: the polite ones a group or a terminal gets,
/// which the shell inside acts on.
const KEEPER_IGNORES: [libc::c_int; 8] = [
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGTERM,
    libc::SIGPIPE,
    libc::SIGTSTP,
    libc::SIGTTIN,
    libc::SIGTTOU,
];

impl Namespace {
    /// A set-up whose user namespace cannot be entered (its descriptor is
    /// not one), for testing a failed start.
    #[cfg(test)]
    pub(crate) fn with_a_bad_user_namespace(not_one: libc::c_int) -> Namespace {
        Namespace { user: UserNamespace::Enter(not_one), report: None }
    }

    /// The set-up for this server: the server's user namespace
    /// (`user_namespace`, asked only when needed) unless it runs as root
    /// with CAP_SYS_ADMIN; the keeper reports on `report`, if given (the
    /// caller keeps it open until the spawn returned).
    pub(crate) fn prepare(
        report: Option<&Report>,
        user_namespace: impl FnOnce() -> Result<libc::c_int, i32>,
    ) -> Namespace {
        use std::os::fd::AsRawFd as _;
        // Root without CAP_SYS_ADMIN (a container's root, say) needs a user
        // namespace too, which maps root onto itself.
        let needed = !nix::unistd::geteuid().is_root() || !can_administer();
        let user = match needed.then(user_namespace) {
            None => UserNamespace::Needless,
            Some(Ok(fd)) => UserNamespace::Enter(fd),
            Some(Err(code)) => UserNamespace::Fail(code),
        };
        Namespace { user, report: report.map(|report| report.write.as_raw_fd()) }
    }

    /// Between fork and exec, in the spawned child: makes the namespace
    /// and its init, and returns only in the process that goes on to exec
    /// (pid 2 inside), or with the error that stopped the set-up (then
    /// nothing was left behind: the init, if it started, has exited). The
    /// spawned child itself never returns once the init is running: it
    /// becomes the keeper (see the module header) and ends as the shell
    /// ends.
    ///
    /// Only async-signal-safe calls: the caller has just been forked from a
    /// threaded process. `new_session`: the keeper leaves the server's
    /// session (a terminal shell, which makes a session of its own
    /// inside); otherwise it keeps the process group it was given, and so
    /// do the init and the shell.
    pub(crate) fn enter(&self, new_session: bool) -> std::io::Result<()> {
        match self.user {
            UserNamespace::Needless => {}
            UserNamespace::Enter(fd) => {
                // SAFETY: setns takes a descriptor the parent holds open and
                // changes only this (single-threaded) process's namespace.
                check(unsafe { libc::setns(fd, libc::CLONE_NEWUSER) })
                    .map_err(Step::Enter.tag())?;
            }
            UserNamespace::Fail(code) => return Err(std::io::Error::from_raw_os_error(code)),
        }
        // SAFETY: unshare only changes this (single-threaded) process's
        // namespaces; no memory is passed.
        check(unsafe { libc::unshare(libc::CLONE_NEWPID | libc::CLONE_NEWNS) })
            .map_err(Step::Namespaces.tag())?;
        // SAFETY: static NUL-terminated strings and null pointers where
        // mount(2) allows them; this remounts nothing, it only changes the
        // propagation of the (new, private) mount namespace's mounts.
        check(unsafe {
            libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            )
        })
        .map_err(Step::Private.tag())?;
        if new_session {
            // SAFETY: setsid takes no arguments; failing (already a group
            // leader) is reported.
            check(unsafe { libc::setsid() })?;
        }
        let (status_read, status_write) = pipe()?;
        let (go_read, go_write) = pipe()?;
        // SAFETY: fork in a single-threaded child; both sides below only
        // make async-signal-safe calls.
        let init = unsafe { libc::fork() };
        match init {
            -1 => Err(Step::Init.tag()(std::io::Error::last_os_error())),
            0 => {
                close(status_read);
                close(go_write);
                run_init(status_write, go_read)
            }
            init => {
                close(status_write);
                close(go_read);
                keep(init, status_read, go_write, self.report)
            }
        }
    }
}

/// Whether this process has CAP_SYS_ADMIN in its effective set (bit 21 of
/// `CapEff` in `/proc/self/status`), which PID and mount namespaces need
/// without a user namespace. Read once.
fn can_administer() -> bool {
    const CAP_SYS_ADMIN: u32 = 21;
    static CAN: OnceLock<bool> = OnceLock::new();
    *CAN.get_or_init(|| {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|status| {
                let caps = status.lines().find_map(|line| line.strip_prefix("CapEff:"))?;
                u64::from_str_radix(caps.trim(), 16).ok()
            })
            .is_some_and(|caps| caps & (1 << CAP_SYS_ADMIN) != 0)
    })
}

/// The keeper: waits for the init's word that the namespace is ready
/// (or why not), lets it go on, then waits for the shell's status and ends
/// as the shell did. Returns only the error of a set-up that failed.
///
/// The keeper (the pid `spawn` returns, outside the namespace): the
/// spawned child itself. It enters the server's user namespace where one
/// is needed, then it unshares the PID and mount
/// namespaces, makes every mount private (nothing mounted inside reaches
/// the host), and forks the init. It never execs: once the init says the
/// namespace is ready it closes every descriptor but one pipe (it must
/// not hold the spawn's close-on-exec error pipe, or the server's spawn
/// would wait for ever, nor the terminal), waits for the shell's wait
/// status from the init, waits for the init to be gone, and ends the way
/// the shell did (its exit code, or its signal, without a core dump), so
/// the server's wait on its child reads the shell's status. It ignores
/// the polite signals (a `run` command's group gets them, and the shell
/// in that group is the one to act on them); its parent-death signal is
/// SIGKILL, like every child of the server.
fn keep(
    init: libc::pid_t,
    status_read: libc::c_int,
    go_write: libc::c_int,
    report: Option<libc::c_int>,
) -> std::io::Result<()> {
    match read_i32(status_read) {
        Some(0) => {}
        Some(code) => {
            wait_for(init);
            return Err(std::io::Error::from_raw_os_error(code));
        }
        None => {
            wait_for(init);
            return Err(std::io::Error::other("the PID namespace's init ended while starting"));
        }
    }
    // SAFETY: write(2) of a static byte on a pipe this process owns.
    unsafe { libc::write(go_write, b"g".as_ptr().cast(), 1) };
    for signal in KEEPER_IGNORES {
        set_disposition(signal, libc::SIG_IGN);
    }
    close_all_but(status_read, report.unwrap_or(status_read));
    set_name(KEEPER_NAME);
    let status = read_i32(status_read);
    if read_i32(status_read) == Some(LEFT)
        && let Some(report) = report
    {
        // SAFETY: write(2) of a static byte on a pipe the parent made.
        unsafe { libc::write(report, b"l".as_ptr().cast(), 1) };
    }
    // The init kills everything left inside as it exits; once it is
    // reaped, nothing of the namespace is alive.
    wait_for(init);
    match status {
        Some(status) if libc::WIFEXITED(status) => exit(libc::WEXITSTATUS(status)),
        Some(status) if libc::WIFSIGNALED(status) => die_of(libc::WTERMSIG(status)),
        _ => die_of(libc::SIGKILL),
    }
}

/// The init (pid 1 inside): mounts the private `/proc`, forks the shell
/// (which returns from here to exec), tells the keeper, and reaps until
/// the shell ends.
///
/// The init (pid 1 inside): mounts a private `/proc`, forks the
/// shell, and then only reaps, in a loop, every process the namespace
/// orphans. It installs no signal handler, so the kernel drops every
/// signal a process inside sends it (`kill -9 1` included; under Landlock
/// ABI 6 the sandbox's signal scope refuses them first, the init being
/// outside the sandbox); only a process outside (the server, the guard)
/// can kill it. Its parent-death signal is SIGKILL, asked for before it
/// tells the keeper it is ready and confirmed by the keeper's answer (a
/// keeper that died before would never answer): when the keeper dies
/// (the server died, so the keeper got its own SIGKILL) the init dies,
/// and the kernel then kills everything in the namespace. When the shell
/// ends, the init passes its status to the keeper and exits, which also
/// ends everything left inside: a stop that ends the shell ends the
/// namespace.
fn run_init(status_write: libc::c_int, go_read: libc::c_int) -> std::io::Result<()> {
    // SAFETY: prctl sets this process's parent-death signal; no memory.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) };
    let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    // SAFETY: static NUL-terminated strings and a null data pointer.
    let mounted = unsafe {
        libc::mount(c"proc".as_ptr(), c"/proc".as_ptr(), c"proc".as_ptr(), flags, std::ptr::null())
    };
    if mounted == -1 {
        fail(status_write, Step::Proc);
    }
    // SAFETY: fork in this single-threaded process; the child only
    // returns to the caller's async-signal-safe set-up and exec.
    let shell = unsafe { libc::fork() };
    if shell == -1 {
        fail(status_write, Step::Shell);
    }
    if shell == 0 {
        close(status_write);
        close(go_read);
        return Ok(());
    }
    write_i32(status_write, 0);
    // The keeper answers once it has read that: then it was alive after
    // this process asked for its parent-death signal, which will come.
    let mut go = 0u8;
    let answered = loop {
        // SAFETY: reads at most one byte into a local.
        let read = unsafe { libc::read(go_read, (&raw mut go).cast(), 1) };
        if read == -1 && errno() == libc::EINTR {
            continue;
        }
        break read == 1;
    };
    if !answered {
        exit(1);
    }
    close_all_but(status_write, status_write);
    set_name(INIT_NAME);
    loop {
        let mut status = 0;
        // SAFETY: waitpid writes the status into a local.
        let reaped = unsafe { libc::waitpid(-1, &mut status, libc::__WALL) };
        if reaped == shell {
            // What the shell left is now the init's (its orphans are
            // reparented before it can be reaped): a live child of the
            // init is a process the shell's command left running.
            let left = loop {
                // SAFETY: waitpid writes the status into a local.
                match unsafe { libc::waitpid(-1, &mut 0, libc::WNOHANG | libc::__WALL) } {
                    0 => break true,
                    -1 if errno() == libc::EINTR => {}
                    -1 => break false,
                    _ => {}
                }
            };
            write_i32(status_write, status);
            write_i32(status_write, if left { LEFT } else { 0 });
            exit(0);
        }
        if reaped == -1 && errno() != libc::EINTR {
            exit(1);
        }
    }
}

/// Tells the keeper why the set-up failed (`step`, and the current
/// errno), and exits.
fn fail(status_write: libc::c_int, step: Step) -> ! {
    write_i32(status_write, step.code(errno().max(1)));
    exit(1)
}

/// The errors of a failed set-up carry this tag, with the step above the
/// errno, so that [`describe`] can say what went wrong.
const FAILED: i32 = 0x4e00_0000;

/// The steps of the set-up that can fail, for the error a spawn returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Step {
    /// Making the server's user namespace (`unshare(CLONE_NEWUSER)` in a
    /// child).
    User = 1,
    /// Writing its `setgroups`, `uid_map`, `gid_map`, or opening it.
    Maps = 2,
    /// Entering it (`setns`).
    Enter = 8,
    /// `unshare(CLONE_NEWPID | CLONE_NEWNS)`.
    Namespaces = 3,
    /// Making every mount private.
    Private = 4,
    /// Mounting the private `/proc`.
    Proc = 5,
    /// Forking the init.
    Init = 6,
    /// The init forking the shell.
    Shell = 7,
}

impl Step {
    /// Every step, for reading a code back.
    const ALL: [Step; 8] = [
        Step::User,
        Step::Maps,
        Step::Enter,
        Step::Namespaces,
        Step::Private,
        Step::Proc,
        Step::Init,
        Step::Shell,
    ];

    /// The code of an `errno` at this step (no allocation: the error made
    /// of it is a raw OS error).
    pub(super) fn code(self, errno: i32) -> i32 {
        FAILED | ((self as i32) << 16) | (errno & 0xffff)
    }

    /// Turns an OS error at this step into the tagged one.
    fn tag(self) -> impl Fn(std::io::Error) -> std::io::Error {
        move |err| {
            let errno = err.raw_os_error().unwrap_or(libc::EIO);
            std::io::Error::from_raw_os_error(self.code(errno))
        }
    }

    /// What failed, in words, with what it usually means.
    fn words(self) -> &'static str {
        match self {
            Step::User => {
                "this host does not let the server's user make a user namespace (the sysctl \
                 user.max_user_namespaces is 0, or a policy forbids it: Ubuntu's \
                 kernel.apparmor_restrict_unprivileged_userns, a container's seccomp profile)"
            }
            Step::Maps => "the user namespace's uid and gid maps could not be written",
            Step::Enter => "the server's user namespace could not be entered",
            Step::Namespaces => "a PID and mount namespace could not be made",
            Step::Private => "the new mount namespace's mounts could not be made private",
            Step::Proc => {
                "a private /proc could not be mounted (a container that hides parts of the \
                 host's /proc forbids it)"
            }
            Step::Init => "the namespace's init could not be started",
            Step::Shell => "the namespace's init could not start the command",
        }
    }
}

/// The words for an error a namespace's set-up returned (what failed, and
/// the system's reason), or `None` for any other error.
pub(super) fn describe(err: &std::io::Error) -> Option<String> {
    let code = err.raw_os_error()?;
    if code & !0x00ff_ffff != FAILED {
        return None;
    }
    let step = Step::ALL.into_iter().find(|step| step.code(0) == code & !0xffff)?;
    let cause = std::io::Error::from_raw_os_error(code & 0xffff);
    Some(format!("{}: {cause}", step.words()))
}

/// Waits for child `pid` to end (and reaps it).
fn wait_for(pid: libc::pid_t) {
    let mut status = 0;
    // SAFETY: waitpid writes the status into a local.
    while unsafe { libc::waitpid(pid, &mut status, libc::__WALL) } == -1 && errno() == libc::EINTR {
    }
}

/// Ends this process by `signal` (its default action), without a core
/// dump (this process is a copy of the server).
fn die_of(signal: libc::c_int) -> ! {
    let none = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: setrlimit reads a local; sigprocmask and kill take no
    // memory of ours but a local set.
    unsafe {
        libc::setrlimit(libc::RLIMIT_CORE, &none);
        set_disposition(signal, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, signal);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        #[allow(clippy::disallowed_methods, reason = "the keeper ends itself as its shell ended")]
        libc::kill(libc::getpid(), signal);
    }
    exit(128 + signal)
}

/// Sets `signal`'s disposition to `handler` (`SIG_IGN` or `SIG_DFL`).
fn set_disposition(signal: libc::c_int, handler: libc::sighandler_t) {
    // SAFETY: a zeroed sigaction with a plain disposition and an empty
    // mask, on the stack; no handler of ours runs.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = handler;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(signal, &action, std::ptr::null_mut());
    }
}

/// Names this process (`/proc/PID/comm`).
fn set_name(name: &CStr) {
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16
    // bytes; both names are shorter.
    unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr(), 0, 0, 0) };
}

/// What the init sends after the shell's status when the shell left
/// processes running.
const LEFT: i32 = 1;

/// Closes every descriptor but `first` and `second` (the same one twice to
/// keep one): the keeper and the init must not hold the spawn's error pipe
/// (the server would wait for its end), the terminal, or anything else of
/// the server's.
fn close_all_but(first: libc::c_int, second: libc::c_int) {
    let (low, high) = (first.min(second), first.max(second));
    close_around(low, high);
}

/// Closes every descriptor but `low` and `high` (`low <= high`).
fn close_around(low: libc::c_int, high: libc::c_int) {
    let close_range = |first: libc::c_uint, last: libc::c_uint| {
        // SAFETY: close_range takes no memory; closing descriptors no Rust
        // object of this (never returning) process uses.
        let closed = unsafe { libc::syscall(libc::SYS_close_range, first, last, 0) };
        if closed == -1 {
            for fd in first..=last.min(65_535) {
                close(fd as libc::c_int);
            }
        }
    };
    if low > 0 {
        close_range(0, low as libc::c_uint - 1);
    }
    if high > low + 1 {
        close_range(low as libc::c_uint + 1, high as libc::c_uint - 1);
    }
    close_range(high as libc::c_uint + 1, libc::c_uint::MAX);
}

/// A pipe whose both ends close on exec: (read, write).
fn pipe() -> std::io::Result<(libc::c_int, libc::c_int)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the local array.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    Ok((fds[0], fds[1]))
}

/// Writes one `i32` to a pipe (4 bytes: atomic).
fn write_i32(fd: libc::c_int, value: i32) {
    let bytes = value.to_ne_bytes();
    // SAFETY: the local buffer is valid for reads of its length.
    unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
}

/// Reads one `i32` from a pipe; `None` at its end (the writer is gone).
fn read_i32(fd: libc::c_int) -> Option<i32> {
    let mut bytes = [0u8; 4];
    let mut got = 0;
    while got < bytes.len() {
        // SAFETY: reads into the unfilled rest of the local buffer.
        let read = unsafe { libc::read(fd, bytes[got..].as_mut_ptr().cast(), bytes.len() - got) };
        match read {
            -1 if errno() == libc::EINTR => continue,
            n if n <= 0 => return None,
            n => got += n as usize,
        }
    }
    Some(i32::from_ne_bytes(bytes))
}

/// Closes a descriptor, ignoring errors.
fn close(fd: libc::c_int) {
    // SAFETY: close takes no memory; the descriptor is not used after.
    unsafe { libc::close(fd) };
}

/// Ends this process at once (no destructors, no `atexit`: it is a copy of
/// the server).
fn exit(code: libc::c_int) -> ! {
    // SAFETY: _exit is async-signal-safe and ends this process only.
    unsafe { libc::_exit(code) }
}

/// The current errno.
fn errno() -> libc::c_int {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
}

/// A system call's result, or the errno it set.
fn check(result: libc::c_int) -> std::io::Result<libc::c_int> {
    if result == -1 { Err(std::io::Error::last_os_error()) } else { Ok(result) }
}

/// The pid, as the server sees it, of the process that went on to exec in
/// the namespace the spawned child `keeper` made (its init's child whose
/// pid inside is 2), or `None` if it is gone. Reads `/proc`: called once,
/// after the spawn returned (by then the process has exec'd).
///
/// The server's bookkeeping stays true with one change: a terminal
/// session registers the shell's pid as the server sees it (the init's
/// child whose pid inside is 2: [`shell_of`]) instead of the keeper's. The
/// integration's records carry that pid (`SCM_CREDENTIALS` translates pids
/// into the receiver's namespace), the shell leads its session and process
/// group, and its commands descend from it, so the scans of `/proc` by
/// session, group and ancestry see what they saw. Neither the keeper nor
/// the init is in any view of a shell's commands: neither is in the
/// shell's session or descends from it, neither carries a scope marker
/// (their environment is the server's). A `run` command's shell stays in
/// the keeper's process group (the group's SIGTERM reaches it), and the
/// keeper waits for the init to be gone before it exits, so what the
/// server counts as left after a command never includes the init. What a
/// command left running dies with the namespace before the server could
/// count it, so the init counts it as the shell ends (a live child of its
/// own) and the keeper says so on the scope's `Report` pipe. A pid a
/// reply names is translated to the one the commands see ([`pid_inside`]).
pub(crate) fn shell_of(keeper: u32) -> Option<i32> {
    let init = children_of(keeper as i32).into_iter().next()?;
    children_of(init).into_iter().find(|&pid| inner_pid(pid) == Some(2))
}

/// The pid a process has as the commands of a sandboxed session see it
/// (in the PID namespace one level below the server's, where the
/// sandbox's commands live), for words an agent reads: `pid` itself for a
/// process outside every namespace of ours, or one that is gone.
pub(crate) fn pid_inside(pid: i32) -> i32 {
    let Some(pids) = status_field(pid, "NSpid:") else { return pid };
    pids.split_whitespace().nth(1).and_then(|inside| inside.parse().ok()).unwrap_or(pid)
}

/// The live processes whose parent is `parent`.
fn children_of(parent: i32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| status_field(pid, "PPid:").and_then(|v| v.parse().ok()) == Some(parent))
        .collect()
}

/// The pid of `pid` in its own (innermost) PID namespace.
fn inner_pid(pid: i32) -> Option<i32> {
    status_field(pid, "NSpid:")?.split_whitespace().last()?.parse().ok()
}

/// A field of `/proc/PID/status`, trimmed.
fn status_field(pid: i32, name: &str) -> Option<String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|line| line.strip_prefix(name)).map(|value| value.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use std::process::Stdio;
    use std::time::Duration;

    use crate::process::terminate::wait_until;
    use crate::process::{Scope, group_command, namespace_probe, spawn};

    /// Runs `script` through `bash -c` in a namespace of its own; its
    /// output and exit code.
    async fn run_inside(script: &str) -> (String, Option<i32>) {
        let scope = Scope::new("test").with_namespace();
        let mut command = group_command("bash", &scope);
        command.arg("-c").arg(script).stdin(Stdio::null()).stdout(Stdio::piped());
        let child = spawn(&mut command).expect("spawn bash in a namespace");
        let output = child.wait_with_output().await.expect("wait");
        (String::from_utf8_lossy(&output.stdout).into_owned(), output.status.code())
    }

    /// This host allows namespaces (root, and users without privileges).
    #[test]
    fn the_probe_finds_a_namespace_here() {
        assert_eq!(namespace_probe(), Ok(()));
    }

    /// `$$`, `ps`, `pgrep` and `kill` speak the same pids inside; the
    /// init is pid 1 and is ours. (`pgrep` is asked until the child has
    /// become `sleep`: right after the fork it is still `bash`, and a busy
    /// machine shows that moment.)
    #[tokio::test]
    async fn pids_agree_inside() {
        let (out, code) = run_inside(
            "echo \"self $$\"; sleep 300 & echo \"bang $!\"; \
             for i in $(seq 1000); do p=$(pgrep -x sleep) && break; sleep 0.01; done; \
             echo \"pgrep $p\"; ps -e -o pid=,comm= | tr -s ' ' | sed 's/^ //;s/^/ps /'; \
             kill $p && wait $!; echo \"waited $?\"; \
             echo \"init $(cat /proc/1/comm)\"; echo \"procs $(ls /proc | grep -c '^[0-9]')\"",
        )
        .await;
        assert_eq!(code, Some(0), "{out}");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "self 2", "{out}");
        let bang = lines[1].strip_prefix("bang ").expect("$!");
        assert_eq!(lines[2], format!("pgrep {bang}"), "{out}");
        assert!(lines.contains(&"ps 1 shellkeep-init"), "{out}");
        assert!(lines.contains(&"ps 2 bash"), "{out}");
        assert!(lines.contains(&format!("ps {bang} sleep").as_str()), "{out}");
        // Killed by SIGTERM: `wait` gives 128 + 15.
        assert!(lines.contains(&"waited 143"), "{out}");
        assert!(lines.contains(&"init shellkeep-init"), "{out}");
    }

    /// Every signal a process inside sends to the init is dropped: it
    /// still reaps, and the command goes on.
    #[tokio::test]
    async fn no_signal_from_inside_stops_the_init() {
        let (out, code) = run_inside(
            "for s in $(seq 1 31) $(seq 34 64); do kill -s $s 1 2>/dev/null; done; \
             /bin/kill -9 1; kill -STOP 1; \
             echo \"state $(cut -d' ' -f3 /proc/1/stat)\"; \
             (sleep 0.1 &); sleep 0.3; echo \"zombies $(grep -l '^State:.*Z' /proc/[0-9]*/status \
             2>/dev/null | wc -l)\"; exit 7",
        )
        .await;
        assert_eq!(code, Some(7), "{out}");
        assert!(out.contains("state S"), "{out}");
        assert!(out.contains("zombies 0"), "{out}");
    }

    /// The keeper ends as the shell ended: its exit code, or its signal.
    #[tokio::test]
    async fn the_keeper_reports_the_shells_status() {
        use std::os::unix::process::ExitStatusExt as _;
        let (_, code) = run_inside("exit 42").await;
        assert_eq!(code, Some(42));
        let scope = Scope::new("test").with_namespace();
        let mut command = group_command("bash", &scope);
        command.arg("-c").arg("kill -USR2 $$").stdin(Stdio::null());
        let status = spawn(&mut command).expect("spawn").wait().await.expect("wait");
        assert_eq!(status.signal(), Some(libc::SIGUSR2));
    }

    /// Processes that left the group and the session, wiped their
    /// environment, double forked or moved themselves to the root of every
    /// control group hierarchy they could write all end when the keeper is
    /// killed (as the server's death kills it): nothing of the namespace
    /// survives.
    #[tokio::test]
    async fn nothing_survives_the_keeper() {
        let token = format!("ns-marker-{}", crate::random::random_hex(6).expect("random"));
        let scope = Scope::new("test").with_namespace();
        let mut command = group_command("bash", &scope);
        command
            .arg("-c")
            .arg(format!(
                "(setsid env -i bash -c 'exec -a {token} sleep 300' &); \
                 (setsid bash -c '(trap \"\" TERM HUP; exec -a {token} sleep 300 &)' &); \
                 env -i bash -c 'exec -a {token} sleep 300' & \
                 (for procs in /sys/fs/cgroup/cgroup.procs /sys/fs/cgroup/*/cgroup.procs; do \
                     echo $BASHPID >\"$procs\"; done 2>/dev/null; \
                  exec -a {token} sleep 300) & \
                 trap '' TERM; exec -a {token} sleep 300"
            ))
            .stdin(Stdio::null());
        let mut child = spawn(&mut command).expect("spawn");
        let keeper = child.id().expect("pid") as i32;
        let marked = || {
            std::fs::read_dir("/proc")
                .into_iter()
                .flatten()
                .flatten()
                .filter(|entry| {
                    std::fs::read(entry.path().join("cmdline"))
                        .is_ok_and(|line| line.starts_with(token.as_bytes()))
                })
                .count()
        };
        assert!(wait_until(Duration::from_secs(10), || marked() == 5).await, "{}", marked());
        #[allow(
            clippy::disallowed_methods,
            reason = "the test kills the keeper as the kernel would"
        )]
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(keeper), nix::sys::signal::SIGKILL)
            .expect("kill the keeper");
        child.wait().await.expect("reaped");
        assert!(wait_until(Duration::from_secs(10), || marked() == 0).await, "{}", marked());
    }
}
