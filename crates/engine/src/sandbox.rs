//! The sandbox: what a command may write and whom it may reach, enforced by
//! the kernel, not by bookkeeping. A [`Policy`] says what the server (or one
//! session, one `run` command) asks for; [`check`] says what this kernel
//! enforces of it; a [`Confinement`] is that policy built for one owner: a
//! Landlock ruleset ([`landlock_ruleset`]), seccomp filters
//! ([`integrity_filter`], [`network_filter`]) and a PID namespace
//! ([`add_namespace`]). Also here: [`denial`], which reads a failed
//! command's output for the signs of the sandbox, and [`PrivateTmp`].
//!
//! Not for: applying the rules between fork and exec or making the namespace
//! (`process`, which has the `unsafe`); the sandbox's words in replies and
//! `doctor` (the server's `render/sandbox.rs`). This module builds rulesets
//! and filters, has no `unsafe` and starts nothing.
//!
//! Invariants: never silently unsandboxed: [`check`] refuses a policy this
//! kernel cannot enforce, naming what is missing, unless the policy allows
//! best effort, and the report ([`Enforcement`]) goes into `doctor` and every
//! reply. A policy is fixed for a shell's life: what the child applies can
//! only be tightened ([`Confinement`]), and a request may only tighten the
//! policy it narrows ([`Policy::narrowed`]).

use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use crate::process::ChildRules;
use landlock::{
    AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreatedAttr,
    path_beneath_rules,
};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// What a sandboxed command may write; ordered from the loosest to the
/// strictest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Mode {
    /// No filesystem rules.
    #[default]
    Off,
    /// Write only the workspace, the private temporary directory and the
    /// terminal devices.
    WorkspaceWrite,
    /// Write only the private temporary directory and the terminal devices.
    ReadOnly,
}

impl Mode {
    /// The name flags and arguments use.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Off => "off",
            Mode::WorkspaceWrite => "workspace-write",
            Mode::ReadOnly => "read-only",
        }
    }
}

impl std::str::FromStr for Mode {
    type Err = String;

    fn from_str(text: &str) -> Result<Mode, String> {
        match text {
            "off" => Ok(Mode::Off),
            "workspace-write" => Ok(Mode::WorkspaceWrite),
            "read-only" => Ok(Mode::ReadOnly),
            other => Err(format!(
                "unknown sandbox mode {other:?}: use off, workspace-write or read-only"
            )),
        }
    }
}

/// The sandbox a server, a session or a `run` command asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    /// What may be written.
    pub mode: Mode,
    /// The workspace: the directories a [`Mode::WorkspaceWrite`] command may
    /// write (absolute).
    pub writable: Vec<PathBuf>,
    /// `false`: every socket but Unix ones is denied.
    pub network: bool,
    /// Start even where the kernel cannot enforce everything asked for
    /// (the [`Enforcement`] says what is not).
    pub best_effort: bool,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy::off()
    }
}

impl Policy {
    /// No sandbox: today's behaviour.
    pub fn off() -> Policy {
        Policy { mode: Mode::Off, writable: Vec::new(), network: true, best_effort: false }
    }

    /// Whether anything is confined.
    pub fn is_confined(&self) -> bool {
        self.mode != Mode::Off || !self.network
    }

    /// This policy with a session's or command's own request, which may
    /// only tighten it: the error names what would be looser.
    pub fn narrowed(&self, mode: Option<Mode>, network: Option<bool>) -> Result<Policy, String> {
        let mut narrowed = self.clone();
        if let Some(mode) = mode {
            if mode < self.mode {
                return Err(format!(
                    "sandbox {} is looser than the server's sandbox {}: a session or command \
                     may only ask for a stricter one",
                    mode.as_str(),
                    self.mode.as_str()
                ));
            }
            narrowed.mode = mode;
        }
        if let Some(network) = network {
            if network && !self.network {
                return Err("network on is looser than the server's network off: a session or \
                            command may only turn the network off"
                    .to_owned());
            }
            narrowed.network = network;
        }
        Ok(narrowed)
    }

    /// The directories this policy lets a command write, besides the
    /// owner's private ones and the terminal devices.
    fn workspace(&self) -> &[PathBuf] {
        match self.mode {
            Mode::WorkspaceWrite => &self.writable,
            Mode::Off | Mode::ReadOnly => &[],
        }
    }
}

/// What the kernel enforces of a policy on this host.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Enforcement {
    /// The mode asked for.
    pub mode: &'static str,
    /// Whether the network is on.
    pub network: bool,
    /// The kernel's Landlock ABI; `None`: no Landlock.
    pub landlock_abi: Option<u32>,
    /// The write rules are enforced (Landlock).
    pub filesystem: bool,
    /// Landlock's TCP rules (ABI 4) back the network filter.
    pub tcp: bool,
    /// The seccomp filters (integrity, and network when off) are on.
    pub filter: bool,
    /// Landlock's signal scope (ABI 6): no signal leaves the sandbox.
    pub signals: bool,
    /// The owner has a PID namespace of its own whose init is ours (where
    /// the host refuses one, `missing` says why, and the start goes on).
    pub namespace: bool,
    /// Each thing asked for and not enforced, in words.
    pub missing: Vec<String>,
}

/// The Landlock ABI this kernel offers, or why there is none (probed once).
pub(crate) fn landlock_abi() -> Result<u32, String> {
    static ABI: OnceLock<Result<u32, String>> = OnceLock::new();
    ABI.get_or_init(|| match crate::process::landlock_abi() {
        Ok(abi) => u32::try_from(abi).map_err(|_| format!("an ABI version out of range: {abi}")),
        Err(err) if err.raw_os_error() == Some(libc::EOPNOTSUPP) => Err(
            "Landlock is built into this kernel but not enabled (add landlock to the lsm= boot \
             parameter)"
                .to_owned(),
        ),
        Err(err) if err.raw_os_error() == Some(libc::ENOSYS) => {
            Err("this kernel has no Landlock (Linux 5.13 or later with CONFIG_SECURITY_LANDLOCK)"
                .to_owned())
        }
        Err(err) => Err(format!("Landlock could not be probed: {err}")),
    })
    .clone()
}

/// The seccomp architecture of this build, or why there is none.
fn target_arch() -> Result<TargetArch, String> {
    TargetArch::try_from(std::env::consts::ARCH).map_err(|_| {
        format!(
            "seccomp filters are built for x86_64 and aarch64 only, not {}",
            std::env::consts::ARCH
        )
    })
}

/// What the kernel would enforce of `policy` here; an error, naming what is
/// missing and what to do, when something asked for cannot be enforced and
/// the policy does not allow best effort. An unconfined policy is always
/// `Ok`.
pub fn check(policy: &Policy) -> Result<Enforcement, String> {
    let mut enforcement = enforcement(policy);
    if policy.is_confined() && !policy.best_effort && !enforcement.missing.is_empty() {
        return Err(format!(
            "the sandbox asked for (--sandbox {}{}) cannot be enforced here: {}; start with \
             --sandbox-best-effort to run with what the kernel enforces, or --sandbox off",
            policy.mode.as_str(),
            if policy.network { "" } else { " --network off" },
            enforcement.missing.join("; ")
        ));
    }
    if policy.is_confined() {
        add_namespace(&mut enforcement, crate::process::namespace_probe());
    }
    Ok(enforcement)
}

/// Adds what the namespace probe found to a confined owner's report. The
/// PID namespace (where the host allows it: root, or unprivileged user
/// namespaces) puts the owner's shell at pid 2 under an init of ours, with
/// a private `/proc`; nothing it starts outlives it or the server. It is a
/// net under the rest, not part of a mode: where the host refuses it, the
/// owner keeps the containment every owner has (control group, markers,
/// guard), the report says why, and the start goes on (see
/// `process::namespace`).
fn add_namespace(enforcement: &mut Enforcement, probe: Result<(), String>) {
    match probe {
        Ok(()) => enforcement.namespace = true,
        Err(why) => enforcement.missing.push(why),
    }
}

/// The report for `policy` on this host, from the probes.
fn enforcement(policy: &Policy) -> Enforcement {
    let abi = landlock_abi();
    let level = abi.as_ref().ok().copied().unwrap_or(0);
    let filter = crate::process::seccomp_filters_available() && target_arch().is_ok();
    let mut report = Enforcement {
        mode: policy.mode.as_str(),
        network: policy.network,
        landlock_abi: abi.as_ref().ok().copied(),
        filesystem: policy.mode != Mode::Off && level >= 1,
        tcp: !policy.network && level >= 4,
        filter: policy.is_confined() && filter,
        signals: policy.is_confined() && level >= 6,
        namespace: false,
        missing: Vec::new(),
    };
    if !policy.is_confined() {
        return report;
    }
    if policy.mode != Mode::Off && level == 0 {
        report.missing.push(format!(
            "the write rules need Landlock: {}",
            abi.as_ref().err().map_or("", String::as_str)
        ));
    }
    if !filter {
        report.missing.push(match target_arch() {
            Err(why) => why,
            Ok(_) => "this kernel has no seccomp filters (CONFIG_SECCOMP_FILTER): neither the \
                      integrity filter nor the network filter can be applied"
                .to_owned(),
        });
    }
    report
}

/// A policy made concrete for one owner (a session's shell, a `run`
/// command), built in the parent: a Landlock ruleset (its descriptor) and
/// compiled seccomp programs, what the child applies between fork and exec
/// ([`Confinement::rules`], which `process` applies). Both are inherited by
/// everything the child starts and can only be tightened, never loosened,
/// so a policy is fixed for a shell's life: a stricter one needs a new
/// session.
#[derive(Debug)]
pub(crate) struct Confinement {
    /// The Landlock ruleset, the seccomp programs and the namespace.
    rules: Arc<ChildRules>,
}

/// The devices every sandboxed command may write: the terminal's and the
/// sinks programs write to.
const DEVICES: &[&str] =
    &["/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/pts", "/dev/ptmx"];

impl Confinement {
    /// Builds `policy` for one owner. `private`: directories the child must
    /// be able to write whatever the mode (the shell's private directory,
    /// its temporary directory). `protect`: pids no signal of the sandbox
    /// may reach (the server, the guard). Fails where [`check`] fails.
    pub(crate) fn build(
        policy: &Policy,
        private: &[&Path],
        protect: &[u32],
    ) -> std::io::Result<Confinement> {
        let enforcement = check(policy).map_err(std::io::Error::other)?;
        let mut landlock = None;
        let mut filters = Vec::new();
        if policy.is_confined() {
            if let Some(abi) = enforcement.landlock_abi.filter(|&abi| abi >= 1) {
                landlock = landlock_ruleset(policy, abi, private)?;
            }
            if enforcement.filter {
                filters.push(integrity_filter(protect)?);
                if !policy.network {
                    filters.push(network_filter()?);
                }
            }
        }
        let rules = Arc::new(ChildRules::new(landlock, filters, enforcement.namespace));
        Ok(Confinement { rules })
    }

    /// What the child applies between fork and exec: give it to the
    /// owner's `Scope::with_confinement`. `process` applies it with three
    /// kinds of system call and nothing that allocates:
    /// `prctl(PR_SET_NO_NEW_PRIVS)`, `landlock_restrict_self`,
    /// `seccomp(SET_MODE_FILTER)`.
    pub(crate) fn rules(&self) -> Arc<ChildRules> {
        Arc::clone(&self.rules)
    }
}

/// The Landlock ruleset of `policy` for a kernel of ABI `abi`; `None` when
/// there is nothing to restrict.
///
/// - The filesystem (ABI 1, Linux 5.13): every right to write (write,
///   truncate, create, remove, link, rename across directories) is handled
///   and granted only beneath the writable directories: the workspace
///   ([`Mode::WorkspaceWrite`]), the owner's private directories (`private`:
///   its integration files, its temporary directory, exported as `TMPDIR`),
///   and the terminal devices ([`DEVICES`]). Reading and executing are not
///   handled: they stay what the user's rights allow.
/// - The network (ABI 4, Linux 6.7): with the network off, TCP bind and
///   connect are handled with no port allowed; a second layer under
///   [`network_filter`].
/// - Signals (ABI 6, Linux 6.12): the signal scope, on in every mode: no
///   process of the sandbox can signal one outside it (the server, the
///   guard, another session).
fn landlock_ruleset(
    policy: &Policy,
    abi: u32,
    private: &[&Path],
) -> std::io::Result<Option<OwnedFd>> {
    let abi = landlock::ABI::from(i32::try_from(abi).unwrap_or(i32::MAX));
    // Rights on devices' ioctls are left to the user's: the integrity
    // filter denies the two that matter.
    let writes = AccessFs::from_write(abi) & !AccessFs::IoctlDev;
    let mut ruleset = Ruleset::default().set_compatibility(CompatLevel::BestEffort);
    let mut handled = false;
    if policy.mode != Mode::Off {
        ruleset = ruleset.handle_access(writes).map_err(std::io::Error::other)?;
        handled = true;
    }
    if !policy.network && abi >= landlock::ABI::V4 {
        ruleset = ruleset
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
            .map_err(std::io::Error::other)?;
        handled = true;
    }
    if abi >= landlock::ABI::V6 {
        ruleset = ruleset.scope(landlock::Scope::Signal).map_err(std::io::Error::other)?;
        handled = true;
    }
    if !handled {
        return Ok(None);
    }
    let mut created = ruleset.create().map_err(std::io::Error::other)?;
    if policy.mode != Mode::Off {
        let paths: Vec<&Path> = policy
            .workspace()
            .iter()
            .map(PathBuf::as_path)
            .chain(private.iter().copied())
            .chain(DEVICES.iter().map(Path::new))
            .collect();
        created =
            created.add_rules(path_beneath_rules(paths, writes)).map_err(std::io::Error::other)?;
    }
    Ok(Option::<OwnedFd>::from(created))
}

/// The pids no signal of a sandbox may reach: the server's and its
/// guard's (`guard`, the pid of the orphan guard, where one runs).
pub(crate) fn protected_pids(guard: Option<u32>) -> Vec<u32> {
    std::iter::once(std::process::id()).chain(guard).collect()
}

/// Where [`PrivateTmp`]s are made, once the server has said
/// ([`set_private_tmp_base`]).
static PRIVATE_TMP_BASE: OnceLock<PathBuf> = OnceLock::new();

/// Makes `dir` (private, existing) the place of every later
/// [`PrivateTmp`]: the server's runtime directory, which its guard removes
/// after a server SIGKILL, when no `Drop` runs. The first call wins.
pub fn set_private_tmp_base(dir: PathBuf) {
    let _ = PRIVATE_TMP_BASE.set(dir);
}

/// A private temporary directory for one sandboxed command (mode 0700 in
/// the directory [`set_private_tmp_base`] named, else the system's
/// temporary directory), removed with everything in it when dropped.
#[derive(Debug)]
pub(crate) struct PrivateTmp(PathBuf);

impl PrivateTmp {
    /// Makes one.
    pub(crate) fn create() -> std::io::Result<PrivateTmp> {
        let name = format!("shellkeep-tmp-{}", crate::private_fs::random_hex(8)?);
        let base = PRIVATE_TMP_BASE.get().cloned().unwrap_or_else(std::env::temp_dir);
        let dir = base.join(name);
        crate::private_fs::create_private_dir(&dir)?;
        Ok(PrivateTmp(dir))
    }

    /// Where it is.
    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for PrivateTmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The pseudo-architecture bit of x86_64's x32 system calls: the same
/// calls under other numbers, which a filter on the x86_64 numbers alone
/// would let through.
const X32: i64 = 0x4000_0000;

/// `PR_SET_MM`: rewrites a process's memory map descriptors.
const PR_SET_MM: u64 = 35;

/// Every syscall number of `names` for this architecture, with their x32
/// twins on x86_64.
fn with_x32(numbers: &[i64]) -> Vec<i64> {
    let mut all = numbers.to_vec();
    if cfg!(target_arch = "x86_64") {
        all.extend(numbers.iter().map(|number| number | X32));
    }
    all
}

/// The integrity filter, in every mode: what no sandboxed process may do to
/// shellkeep's machinery or another process of the user, each failing with
/// `EPERM`: `ptrace`, `process_vm_readv` and `writev`, `prctl(PR_SET_MM)`,
/// the `TIOCSTI` and `TIOCLINUX` ioctls (on the low 32 bits of the request,
/// as the kernel reads it), `io_uring_*`, `bpf`, `perf_event_open`,
/// `userfaultfd`, the key syscalls, and every signal system call aimed at
/// the pids `protect`, the server's and the guard's ([`protected_pids`]), or
/// `kill(-1, …)`, which reaches every process of the user. This is what
/// stops a command that runs as the server's user from doing to
/// shellkeep's machinery what the user may: the signal rules hold even
/// where Landlock has no signal scope.
fn integrity_filter(protect: &[u32]) -> std::io::Result<BpfProgram> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    let denied = [
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_userfaultfd,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
    ];
    for number in with_x32(&denied) {
        rules.insert(number, Vec::new());
    }
    if cfg!(target_arch = "x86_64") {
        // x32's own numbers for calls whose arguments differ: ioctl (514),
        // ptrace (521), process_vm_readv (539) and writev (540).
        for number in [514, 521, 539, 540] {
            rules.insert(number | X32, Vec::new());
        }
    }
    let rule = |conditions: Vec<SeccompCondition>| SeccompRule::new(conditions).map_err(other);
    let arg = |index, len, op, value| SeccompCondition::new(index, len, op, value).map_err(other);
    let dword_eq = |index, value| arg(index, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, value);
    for number in with_x32(&[libc::SYS_prctl]) {
        rules.insert(number, vec![rule(vec![dword_eq(0, PR_SET_MM)?])?]);
    }
    #[allow(clippy::unnecessary_cast, reason = "the request's type differs between C libraries")]
    let ioctls = [libc::TIOCSTI as u64, libc::TIOCLINUX as u64]
        .into_iter()
        .map(|request| {
            let masked = SeccompCmpOp::MaskedEq(0xffff_ffff);
            rule(vec![arg(1, SeccompCmpArgLen::Qword, masked, request)?])
        })
        .collect::<std::io::Result<Vec<_>>>()?;
    for number in with_x32(&[libc::SYS_ioctl]) {
        rules.insert(number, ioctls.clone());
    }
    // The pids no signal may reach, as `kill` and `pidfd_open` see them,
    // plus -1 (every process of the user) for `kill`.
    let pids: Vec<u64> = protect.iter().map(|&pid| u64::from(pid)).collect();
    let pid_rules = |extra: &[u64]| {
        pids.iter()
            .chain(extra)
            .map(|&pid| rule(vec![dword_eq(0, pid)?]))
            .collect::<std::io::Result<Vec<_>>>()
    };
    let everyone = u64::from(u32::MAX);
    for number in with_x32(&[libc::SYS_kill]) {
        rules.insert(number, pid_rules(&[everyone])?);
    }
    for number in with_x32(&[
        libc::SYS_tkill,
        libc::SYS_tgkill,
        libc::SYS_rt_sigqueueinfo,
        libc::SYS_rt_tgsigqueueinfo,
        libc::SYS_pidfd_open,
    ]) {
        if !pids.is_empty() {
            rules.insert(number, pid_rules(&[])?);
        }
    }
    compile(rules, libc::EPERM)
}

/// The network filter, with the network off: `socket` for every family but
/// `AF_UNIX` fails with `EACCES`: UDP, raw and netlink sockets too, which
/// Landlock does not cover. A background server on a Unix socket works.
fn network_filter() -> std::io::Result<BpfProgram> {
    let not_unix =
        SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, libc::AF_UNIX as u64)
            .map_err(other)?;
    let rule = SeccompRule::new(vec![not_unix]).map_err(other)?;
    let mut rules = BTreeMap::new();
    for number in with_x32(&[libc::SYS_socket]) {
        rules.insert(number, vec![rule.clone()]);
    }
    compile(rules, libc::EACCES)
}

/// A filter that makes each matching call fail with `errno` and allows the
/// rest.
fn compile(rules: BTreeMap<i64, Vec<SeccompRule>>, errno: i32) -> std::io::Result<BpfProgram> {
    let arch = target_arch().map_err(std::io::Error::other)?;
    let errno = u32::try_from(errno).map_err(other)?;
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(errno), arch)
        .map_err(other)?;
    BpfProgram::try_from(filter).map_err(other)
}

/// An error of a builder, as an I/O error.
fn other(err: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(err.to_string())
}

/// Why a failed command's output looks like the sandbox stopped it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Denial {
    /// A write outside what the mode allows; the path, when the output
    /// names one.
    Write {
        /// The path denied.
        path: Option<String>,
    },
    /// A network socket, with the network off.
    Network,
    /// `sudo` (or another set-user-ID program) under `no_new_privs`.
    Sudo,
    /// Tracing a process (`gdb -p`, `strace -p`): no `ptrace` in a sandbox.
    Trace,
    /// A signal to a process outside the sandbox (the server, the guard,
    /// another session): refused, or, in a PID namespace of its own, the
    /// pid names no process in sight.
    Signal,
}

/// The most output [`denial`] reads: the end of it, where errors are.
const DENIAL_SCAN: usize = 64 * 1024;

/// Whether `output` (a failed command's, in `policy`'s sandbox) shows a
/// denial of the sandbox: `sudo` refusing under `no_new_privs`, a socket
/// refused with the network off, or "Permission denied" (or "Read-only
/// file system") on a path outside what may be written; a relative path is
/// read from `cwd`, the command's directory, and not judged without it.
/// Reads at most the last 64 KiB.
pub fn denial(policy: &Policy, output: &str, cwd: Option<&Path>) -> Option<Denial> {
    if !policy.is_confined() {
        return None;
    }
    let mut start = output.len().saturating_sub(DENIAL_SCAN);
    while !output.is_char_boundary(start) {
        start += 1;
    }
    let tail = &output[start..];
    if tail.contains("\"no new privileges\" flag is set") || tail.contains("no new privileges") {
        return Some(Denial::Sudo);
    }
    if !policy.network && NETWORK_SIGNS.iter().any(|sign| tail.contains(sign)) {
        return Some(Denial::Network);
    }
    if tail.lines().any(refused_trace) {
        return Some(Denial::Trace);
    }
    if tail.lines().any(|line| {
        line.contains("kill: (")
            && (line.ends_with("Operation not permitted") || line.ends_with("No such process"))
    }) {
        return Some(Denial::Signal);
    }
    if policy.mode == Mode::Off {
        return None;
    }
    tail.lines().filter(|line| REFUSED_WRITE.iter().any(|words| line.contains(words))).find_map(
        |line| {
            let named = PathBuf::from(denied_path(line)?);
            let path = if named.is_absolute() { named } else { cwd?.join(named) };
            let writable = policy.workspace().iter().any(|dir| path.starts_with(dir));
            (!writable).then(|| Denial::Write { path: Some(path.display().to_string()) })
        },
    )
}

/// Whether a line is a tracer's refused `ptrace` (gdb's `ptrace:
/// Operation not permitted.`, strace's `attach: ptrace(PTRACE_ATTACH, 2):
/// Operation not permitted`, Python's `Could not attach to process`).
fn refused_trace(line: &str) -> bool {
    (line.contains("ptrace") || line.contains("PTRACE")) && line.contains("Operation not permitted")
        || line.contains("Could not attach to process")
}

/// What programs print when a socket is refused or a name cannot be
/// looked up: with the network off, the sandbox is why.
const NETWORK_SIGNS: &[&str] = &[
    "Could not resolve host",
    "Couldn't resolve host",
    "Temporary failure in name resolution",
    "Name or service not known",
    "Failed to establish a new connection",
    "Network is unreachable",
    "socket: Permission denied",
    "connect: Permission denied",
    "PermissionError: [Errno 13] Permission denied\n",
    "Couldn't connect to server",
    "Failed to connect to",
];

/// The path an error line names as denied: quoted (`cannot touch
/// '/etc/x': Permission denied`, `[Errno 13] Permission denied: '/etc/x'`,
/// coreutils' `‘x’` in a UTF-8 locale) or the field before the error
/// (`bash: out/x: Permission denied`); absolute or relative.
fn denied_path(line: &str) -> Option<String> {
    const QUOTES: [(char, char); 4] =
        [('\'', '\''), ('"', '"'), ('`', '\''), ('\u{2018}', '\u{2019}')];
    for (open, close) in QUOTES {
        if let Some((_, rest)) = line.split_once(open)
            && let Some((inside, _)) = rest.split_once(close)
            && !inside.is_empty()
        {
            return Some(inside.to_owned());
        }
    }
    // `program: path: Permission denied`: the field before the error.
    let fields: Vec<&str> = line.split(": ").collect();
    let at = fields
        .iter()
        .position(|field| REFUSED_WRITE.iter().any(|words| field.starts_with(words)))?;
    (at >= 2).then(|| fields[at - 1].to_owned())
}

/// The error words that say a write was refused.
const REFUSED_WRITE: [&str; 2] = ["Permission denied", "Read-only file system"];

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace(dir: &str) -> Policy {
        Policy { mode: Mode::WorkspaceWrite, writable: vec![PathBuf::from(dir)], ..Policy::off() }
    }

    /// A host that refuses the namespace still starts a sandbox that asks
    /// for no best effort; the report says why there is none.
    #[test]
    fn a_refused_namespace_is_reported_and_does_not_stop_the_start() {
        let policy = workspace("/w");
        let mut report = check(&policy).expect("this host enforces the rest");
        report.namespace = false;
        report.missing.clear();
        let mut refused = report.clone();
        add_namespace(&mut refused, Err("no user namespaces here".to_owned()));
        assert!(!refused.namespace);
        assert_eq!(refused.missing, ["no user namespaces here"]);
        add_namespace(&mut report, Ok(()));
        assert!(report.namespace && report.missing.is_empty(), "{report:?}");
        // This host allows it: a confined check says so, an unconfined one
        // asks for nothing.
        assert!(check(&policy).expect("enforced").namespace);
        assert!(!check(&Policy::off()).expect("off").namespace);
    }

    #[test]
    fn a_request_may_only_tighten() {
        let server = workspace("/w");
        assert_eq!(server.narrowed(Some(Mode::ReadOnly), None).unwrap().mode, Mode::ReadOnly);
        assert!(!server.narrowed(None, Some(false)).unwrap().network);
        let err = server.narrowed(Some(Mode::Off), None).unwrap_err();
        assert!(err.contains("looser") && err.contains("workspace-write"), "{err}");
        let closed = Policy { network: false, ..server };
        assert!(closed.narrowed(None, Some(true)).unwrap_err().contains("network on"));
        assert_eq!("read-only".parse::<Mode>(), Ok(Mode::ReadOnly));
        assert!("ro".parse::<Mode>().unwrap_err().contains("workspace-write"));
    }

    #[test]
    fn denials_are_read_from_what_programs_print() {
        let policy = Policy { network: false, ..workspace("/w") };
        for (line, path) in [
            ("touch: cannot touch '/etc/x': Permission denied", "/etc/x"),
            ("bash: /home/u/.profile: Permission denied", "/home/u/.profile"),
            ("PermissionError: [Errno 13] Permission denied: '/root/y'", "/root/y"),
            ("mkdir: cannot create directory \u{2018}/x y\u{2019}: Permission denied", "/x y"),
            ("cp: cannot create regular file '/opt/a': Read-only file system", "/opt/a"),
        ] {
            let expected = Some(Denial::Write { path: Some(path.into()) });
            assert_eq!(
                denial(&policy, &format!("some output\n{line}\n"), None),
                expected,
                "{line}"
            );
        }
        // A relative path is read from the command's directory, and not
        // judged without one.
        let relative = "touch: cannot touch 'x': Permission denied";
        assert_eq!(denial(&policy, relative, None), None);
        assert_eq!(denial(&policy, relative, Some(Path::new("/w/sub"))), None);
        assert_eq!(
            denial(&policy, "bash: out/log: Read-only file system", Some(Path::new("/elsewhere"))),
            Some(Denial::Write { path: Some("/elsewhere/out/log".into()) })
        );
        // Inside the workspace, a permission error is the file's, not ours.
        assert_eq!(denial(&policy, "bash: /w/ro.txt: Permission denied", None), None);
        assert_eq!(
            denial(&policy, "curl: (6) Could not resolve host: example.com", None),
            Some(Denial::Network)
        );
        let sudo = "sudo: The \"no new privileges\" flag is set, which prevents sudo from running as root.";
        assert_eq!(denial(&policy, sudo, None), Some(Denial::Sudo));
        let gdb = "Attaching to process 12\nptrace: Operation not permitted.";
        assert_eq!(denial(&policy, gdb, None), Some(Denial::Trace));
        let strace = "strace: test_ptrace_get_syscall_info: PTRACE_TRACEME: Operation not \
                      permitted\nstrace: attach: ptrace(PTRACE_ATTACH, 2): Operation not permitted";
        assert_eq!(denial(&policy, strace, None), Some(Denial::Trace));
        for kill in
            ["bash: kill: (4242) - Operation not permitted", "bash: kill: (4242) - No such process"]
        {
            assert_eq!(denial(&policy, kill, None), Some(Denial::Signal), "{kill}");
        }
        // No sandbox, no denial.
        assert_eq!(denial(&Policy::off(), sudo, None), None);
        // Network words mean nothing with the network on.
        assert_eq!(denial(&workspace("/w"), "Could not resolve host: x", None), None);
    }

    #[test]
    fn the_scan_reads_a_bounded_tail_on_a_char_boundary() {
        let policy = workspace("/w");
        let long = format!(
            "é{}\ntouch: cannot touch '/etc/x': Permission denied",
            "é".repeat(DENIAL_SCAN)
        );
        assert!(matches!(denial(&policy, &long, None), Some(Denial::Write { .. })));
    }

    #[test]
    fn filters_compile_for_this_machine() {
        if target_arch().is_err() {
            return;
        }
        assert!(!integrity_filter(&[1, 2]).unwrap().is_empty());
        assert!(!integrity_filter(&[]).unwrap().is_empty());
        assert!(!network_filter().unwrap().is_empty());
    }
}
