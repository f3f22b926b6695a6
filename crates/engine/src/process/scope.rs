//! Owners of processes ([`Scope`]): a terminal shell or one `run` call,
//! its marker `SHELLKEEP_SCOPE=<server token>/<owner>` and its control
//! group; which markers a sweep looks for ([`Mark`]) and how an environment
//! relates to them; its resource limits (`limits::OwnerLimits`, written
//! into its groups when they are made, before any child joins); and when
//! each owner lived, to attribute unmarked orphans by their start time;
//! and the sandbox rules its children apply ([`ChildRules`]: built by
//! `sandbox`, applied between fork and exec by `spawn`, which uses this
//! room and is never used by it). Starts and signals nothing.

use std::collections::BTreeSet;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use super::proc_scan::boot_ticks_now;
use crate::cgroup;
use crate::limits::{OwnerLimits, ResourceLimits};

/// The environment variable that marks every process we start and all
/// their descendants: `SHELLKEEP_SCOPE=<server token>/<owner>`.
pub const SCOPE_VAR: &str = "SHELLKEEP_SCOPE";

/// This process's token, the first half of every scope marker it hands
/// out: `<pid>-<start ticks>-<pid namespace>-<24 random hex digits>`.
/// Chosen once, on first use. Its first three parts say which server it
/// is, so that a later server can tell a token of a server that is gone
/// (that pid does not live with that start time in this pid namespace)
/// from a live one's (`dead_server_tokens`); the random part keeps it
/// unique and unguessable by other users.
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
        let random: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let pid = std::process::id() as i32;
        let start = super::proc_scan::start_ticks(pid).unwrap_or(0);
        format!("{pid}-{start}-{}-{random}", pid_namespace())
    })
}

/// The inode of this process's pid namespace (0 if it cannot be read).
fn pid_namespace() -> u64 {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata("/proc/self/ns/pid").map_or(0, |meta| meta.ino())
}

/// The tokens ([`server_token`]) among the scope markers in `environ` whose
/// server is gone: of this pid namespace, and no process `pid` alive with
/// that start time. Tokens of another shape (an older server's) or of
/// another namespace are never taken for dead.
pub(super) fn dead_server_tokens(environ: &[u8]) -> Vec<String> {
    let namespace = pid_namespace();
    marker_values(environ)
        .filter_map(|value| {
            let value = std::str::from_utf8(value).ok()?;
            let token = value.split('/').next()?;
            let mut parts = token.split('-');
            let pid: i32 = parts.next()?.parse().ok()?;
            let start: u64 = parts.next()?.parse().ok()?;
            let ns: u64 = parts.next()?.parse().ok()?;
            let random = parts.next()?;
            let shaped = parts.next().is_none()
                && random.len() == 24
                && random.bytes().all(|b| b.is_ascii_hexdigit());
            let gone = super::proc_scan::start_ticks(pid) != Some(start);
            (shaped && ns == namespace && pid > 1 && gone && token != server_token())
                .then(|| token.to_owned())
        })
        .collect()
}

/// An owner of processes: a terminal shell or one `run` call. Its marker is
/// set in the environment of the child we start for it, so every process
/// that child starts carries it too, whatever it does to its process group
/// or session; in a cgroup mode it also has a control group of its own,
/// which the child joins before it runs anything.
#[derive(Debug, Clone)]
pub struct Scope {
    inner: Arc<ScopeInner>,
    /// Its children start in a PID namespace of their own
    /// (`super::namespace`).
    namespace: bool,
    /// Where the namespace's keeper says that its shell left processes
    /// running (`None`: no namespace, or no pipe could be made).
    report: Option<Arc<super::namespace::Report>>,
}

#[derive(Debug)]
struct ScopeInner {
    /// `<server token>/<kind>-<n>`.
    value: String,
    /// Its control group (a cgroup mode), or why it could not be made:
    /// then every spawn in this scope fails, containment is never silently
    /// off.
    group: Result<Option<Arc<cgroup::Group>>, Arc<std::io::Error>>,
    /// Its resource limits as applied, or why they could not be: then,
    /// too, every spawn in this scope fails.
    limits: Result<OwnerLimits, Arc<std::io::Error>>,
    /// The sandbox its children start in (`None`: none).
    confinement: Option<Arc<ChildRules>>,
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
    /// orphan is attributed by its start time (`Unmarked`).
    pub fn new(kind: &str) -> Scope {
        Scope::limited(kind, &ResourceLimits::none())
    }

    /// A new owner ([`Scope::new`]) whose processes run under `limits`,
    /// written into its control groups before any child joins them.
    pub fn limited(kind: &str, limits: &ResourceLimits) -> Scope {
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
        let owner_group = group.as_ref().ok().and_then(Option::as_deref);
        let limits =
            OwnerLimits::apply(limits, owner_group, &format!("{kind}-{n}")).map_err(|err| {
                tracing::error!("{err}; nothing can be started in this scope");
                Arc::new(err)
            });
        Scope {
            inner: Arc::new(ScopeInner { value, group, limits, confinement: None }),
            namespace: false,
            report: None,
        }
    }

    /// This owner, whose children start in `confinement`'s sandbox (and,
    /// where it enforces one, a PID namespace of their own: see
    /// [`Scope::with_namespace`]). Only for a scope just made, before it is
    /// cloned.
    ///
    /// # Panics
    ///
    /// If the scope was already cloned (its children could start
    /// unconfined).
    pub fn with_confinement(mut self, confinement: Arc<ChildRules>) -> Scope {
        let namespace = confinement.namespace();
        Arc::get_mut(&mut self.inner)
            .expect("a scope is confined before it is shared")
            .confinement = Some(confinement);
        if namespace { self.with_namespace() } else { self }
    }

    /// The same owner, whose children each start in a PID namespace of
    /// their own (see `process::namespace`): only where
    /// [`super::namespace_probe`] said the host allows it. A confinement
    /// whose report says the namespace is enforced asks for it.
    pub fn with_namespace(mut self) -> Scope {
        self.namespace = true;
        self.report = match super::namespace::Report::new() {
            Ok(report) => Some(Arc::new(report)),
            Err(err) => {
                tracing::warn!("a namespace's keeper cannot say what its shell left: {err}");
                None
            }
        };
        self
    }

    /// Whether its children start in a PID namespace of their own.
    pub fn namespace(&self) -> bool {
        self.namespace
    }

    /// Where the namespace's keeper says that its shell left processes
    /// running when it ended.
    pub(super) fn report(&self) -> Option<&Arc<super::namespace::Report>> {
        self.report.as_ref()
    }

    /// Whether a shell of this scope's namespace ended while processes it
    /// started were still running (the kernel killed them as the
    /// namespace ended, before anyone could count them); reading it
    /// forgets it. `false` without a namespace.
    pub fn left_in_namespace(&self) -> bool {
        self.report.as_ref().is_some_and(|report| report.take())
    }

    /// The sandbox its children start in.
    pub fn confinement(&self) -> Option<&Arc<ChildRules>> {
        self.inner.confinement.as_ref()
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

    /// Its resource limits as applied; `None` when they could not be (then
    /// every spawn in this scope fails).
    pub fn limits(&self) -> Option<&OwnerLimits> {
        self.inner.limits.as_ref().ok()
    }

    /// Its resource limits as applied, or why they could not be.
    pub(super) fn limits_state(&self) -> &Result<OwnerLimits, Arc<std::io::Error>> {
        &self.inner.limits
    }

    /// Its control group (a cgroup mode: `Some`), or why it could not be
    /// made: then every spawn in this scope fails.
    pub(super) fn group_state(&self) -> &Result<Option<Arc<cgroup::Group>>, Arc<std::io::Error>> {
        &self.inner.group
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

/// What `Mark::matches` found in an environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Marked {
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
pub(super) fn classify(marks: &[Mark], environ: &[u8]) -> Marked {
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
/// orphan is attributed by (`Unmarked`). Ended owners are kept (at most
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
pub(super) fn owner_at(started: u64) -> Option<String> {
    let owners = OWNERS.lock().unwrap_or_else(PoisonError::into_inner);
    owners
        .iter()
        .filter(|owner| owner.started <= started && owner.ended.is_none_or(|end| end > started))
        .max_by_key(|owner| owner.started)
        .map(|owner| owner.value.clone())
}

/// The scope value a shell we started carries, from its environment at
/// start (what we set; a shell cannot change its own `/proc/PID/environ`
/// by exporting).
pub(super) fn shell_scope(shell_pid: i32) -> Option<String> {
    let environ = std::fs::read(format!("/proc/{shell_pid}/environ")).ok()?;
    let token = Mark::Token(server_token().to_owned());
    marker_values(&environ)
        .find(|value| token.matches_value(value))
        .map(|value| String::from_utf8_lossy(value).into_owned())
}

/// The live control group of the owner `value`, if it has one.
pub(super) fn cgroup_of_owner(value: &str) -> Option<Arc<cgroup::Group>> {
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

/// What a sandboxed owner's children apply between fork and exec, built
/// by the parent (`sandbox::Confinement` builds it from a policy): the
/// Landlock ruleset's descriptor, the compiled seccomp programs, and
/// whether they start in a PID namespace of their own.
#[derive(Debug)]
pub struct ChildRules {
    /// The Landlock ruleset to restrict the child with.
    pub(super) landlock: Option<OwnedFd>,
    /// The seccomp programs to load, in order.
    pub(super) filters: Vec<seccompiler::BpfProgram>,
    /// Whether the children start in a PID namespace of their own.
    namespace: bool,
}

impl ChildRules {
    /// Rules from their parts.
    pub fn new(
        landlock: Option<OwnedFd>,
        filters: Vec<seccompiler::BpfProgram>,
        namespace: bool,
    ) -> ChildRules {
        ChildRules { landlock, filters, namespace }
    }

    /// Whether the children start in a PID namespace of their own.
    pub fn namespace(&self) -> bool {
        self.namespace
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_well_shaped_tokens_of_gone_servers_of_this_namespace_are_dead() {
        let me = std::process::id() as i32;
        let start = crate::process::proc_scan::start_ticks(me).expect("our start");
        let ns = pid_namespace();
        let hex = "0123456789abcdef01234567";
        let environ = |token: &str| format!("A=1\0{SCOPE_VAR}={token}/shell-1/c2\0B=2\0");
        // Our own token, and a live pid with its own start time: alive.
        assert!(dead_server_tokens(environ(server_token()).as_bytes()).is_empty());
        let live = format!("{me}-{start}-{ns}-{hex}");
        assert!(dead_server_tokens(environ(&live).as_bytes()).is_empty());
        // The same pid with another start time: a server that is gone.
        let gone = format!("{me}-{}-{ns}-{hex}", start + 1);
        assert_eq!(dead_server_tokens(environ(&gone).as_bytes()), vec![gone.clone()]);
        // Another namespace, another shape, init: never taken for dead.
        for token in [
            format!("{me}-{}-{}-{hex}", start + 1, ns + 1),
            hex.to_owned(),
            format!("{me}-{}-{ns}-{hex}-x", start + 1),
            format!("{me}-{}-{ns}-0123", start + 1),
            format!("1-{}-{ns}-{hex}", start + 1),
        ] {
            assert!(dead_server_tokens(environ(&token).as_bytes()).is_empty(), "{token}");
        }
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
}
