//! Resource limits of a session's shell or a `run` command: memory, the
//! number of tasks (processes and threads) and CPU, and the CPU priority
//! (`nice`) every agent shell and command runs at.
//!
//! [`ResourceLimits`] says what an owner may take; [`OwnerLimits`] is how it
//! is applied to one owner (a [`crate::process::Scope`]), chosen once per
//! server from what the host allows ([`mechanism`]):
//!
//! - **Control groups** (a cgroup containment mode): the limits are written
//!   into a group of the owner's before any child joins it: `memory.max`
//!   and `memory.swap.max` 0 (a hog is killed at its limit rather than paging
//!   for ever), `pids.max`, `cpu.max` in cgroup v2, where the controller is
//!   enabled for the server's directory (it is enabled there when our own
//!   group lets it); else the v1 hierarchy of that controller
//!   (`memory.limit_in_bytes` and `memory.memsw.limit_in_bytes`,
//!   `pids.max`, `cpu.cfs_quota_us`), where the owner gets one more group
//!   that its child joins between fork and exec. The kernel's counters say
//!   which limit stopped a command ([`OwnerLimits::hits_since`]):
//!   `memory.events` / `memory.oom_control` (`oom_kill`) and `pids.events`
//!   (`max`).
//! - **Resource limits of the process** otherwise (markers mode, or a
//!   controller we may not use): `RLIMIT_AS` for memory (per process, its
//!   address space, not what it uses), `RLIMIT_NPROC` for tasks (which
//!   counts every task of the user, on the whole host, and which the
//!   kernel does not apply to root); none for CPU (`RLIMIT_CPU` is time,
//!   not a rate). These apply only to a limit set on purpose ([`Bound::Set`]),
//!   never to a default: a default address-space cap breaks programs that
//!   reserve large areas (JIT runtimes, sanitizers), and a default process
//!   count would stop the shell of a user whose other programs already run
//!   that many.
//!
//! The `nice` value is set in the child between fork and exec, whatever the
//! mechanism. This module reads and writes cgroup files; the child's part
//! (joining, `setrlimit`, `setpriority`) is in `process`'s spawn room. It
//! starts no process and contains no `unsafe`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use crate::cgroup;

/// The default number of tasks (processes and threads) of one owner: far
/// above what a parallel build of a large project starts (a `cargo build`
/// or `make -j` runs a few hundred threads on a big machine), far below
/// what makes a host unresponsive.
pub(crate) const DEFAULT_TASKS: u64 = 4096;

/// The default `nice` value of every agent shell and command: lower
/// priority than the server and a person's own programs, so a build in
/// one session does not slow another session's replies.
pub(crate) const DEFAULT_NICE: i32 = 10;

/// The highest `nice` value (the lowest priority).
pub const MAX_NICE: i32 = 19;

/// The least memory a limit may be: bash and the integration need a few
/// MiB, and a smaller limit would only make every command fail.
pub const MIN_MEMORY: u64 = 16 << 20;

/// The fewest tasks a limit may be: the shell, a pipeline and a command
/// substitution need a handful.
pub const MIN_TASKS: u64 = 8;

/// The most CPUs a limit may name: more is surely a mistake.
pub const MAX_CPU: f64 = 4096.0;

/// The least CPU a limit may name (1 % of one core).
pub const MIN_CPU: f64 = 0.01;

/// The period of a CPU limit, in microseconds: the group runs at most
/// `cpu × period` in each period.
const CPU_PERIOD_US: u64 = 100_000;

/// One limit: none, the documented default, or a value set on purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// No limit.
    None,
    /// The default (applied through control groups only, see the module's
    /// header).
    Default(u64),
    /// A value set on purpose (a flag, the policy file): applied through
    /// control groups or, without them, resource limits of the process.
    Set(u64),
}

impl Bound {
    /// The limit, if there is one.
    pub fn value(self) -> Option<u64> {
        match self {
            Bound::None => None,
            Bound::Default(value) | Bound::Set(value) => Some(value),
        }
    }
}

/// What one owner (a session's shell and everything it starts, or one
/// `run` command) may take.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ResourceLimits {
    /// Bytes of memory (with no swap, in a control group).
    pub memory: Bound,
    /// Tasks: processes and threads together.
    pub tasks: Bound,
    /// CPUs' worth of time per period (1.5: one and a half cores); `None`:
    /// no limit. Only a control group can apply it.
    pub cpu: Option<f64>,
    /// The `nice` value (0 to [`MAX_NICE`]) the shell or command starts at.
    pub nice: i32,
}

impl Default for ResourceLimits {
    /// The documented defaults: half the machine's memory
    /// ([`default_memory`]), [`DEFAULT_TASKS`], no CPU limit, `nice`
    /// [`DEFAULT_NICE`].
    fn default() -> ResourceLimits {
        ResourceLimits {
            memory: Bound::Default(default_memory()),
            tasks: Bound::Default(DEFAULT_TASKS),
            cpu: None,
            nice: DEFAULT_NICE,
        }
    }
}

impl ResourceLimits {
    /// No limit and `nice` 0: what the server's own helpers run with.
    pub fn none() -> ResourceLimits {
        ResourceLimits { memory: Bound::None, tasks: Bound::None, cpu: None, nice: 0 }
    }

    /// These limits with a policy category's own in place of theirs.
    pub fn with_category(mut self, category: &CategoryLimits) -> ResourceLimits {
        if let Some(mib) = category.memory_mib {
            self.memory = Bound::Set(mib.saturating_mul(1 << 20));
        }
        if let Some(tasks) = category.tasks {
            self.tasks = Bound::Set(tasks);
        }
        if let Some(cpu) = category.cpu {
            self.cpu = Some(cpu);
        }
        self
    }
}

/// The limits a policy category sets for its `run` commands (the optional
/// `limits` object of a category); each `None` keeps the server's.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CategoryLimits {
    /// Memory in MiB.
    pub memory_mib: Option<u64>,
    /// Tasks.
    pub tasks: Option<u64>,
    /// CPUs.
    pub cpu: Option<f64>,
}

/// Half the machine's memory (`MemTotal` of `/proc/meminfo`), and at least
/// 1 GiB (or all of it, on a smaller machine): a build that needs more
/// than half the machine is rare, and one runaway owner then leaves the
/// server, the other sessions and the host the other half. 4 GiB when the
/// total cannot be read.
pub(crate) fn default_memory() -> u64 {
    let total = std::fs::read_to_string("/proc/meminfo").ok().and_then(|text| {
        text.lines()
            .find_map(|line| line.strip_prefix("MemTotal:"))
            .and_then(|rest| rest.trim().strip_suffix("kB"))
            .and_then(|kib| kib.trim().parse::<u64>().ok())
            .map(|kib| kib.saturating_mul(1024))
    });
    match total {
        Some(total) => (total / 2).max(total.min(1 << 30)),
        None => 4 << 30,
    }
}

/// A resource an owner's use of is limited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Resource {
    /// Memory.
    Memory,
    /// Tasks (processes and threads).
    Tasks,
    /// CPU time per period.
    Cpu,
}

impl Resource {
    /// The resource's name in replies and `doctor`.
    pub fn as_str(self) -> &'static str {
        match self {
            Resource::Memory => "memory",
            Resource::Tasks => "tasks",
            Resource::Cpu => "cpu",
        }
    }

    /// The controller's name in the cgroup file system.
    fn controller(self) -> &'static str {
        match self {
            Resource::Memory => "memory",
            Resource::Tasks => "pids",
            Resource::Cpu => "cpu",
        }
    }

    const ALL: [Resource; 3] = [Resource::Memory, Resource::Tasks, Resource::Cpu];
}

/// What applies a resource's limit on this host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    /// A cgroup v2 controller in the owner's own group.
    Cgroup2,
    /// A cgroup v1 controller in a group of that hierarchy.
    Cgroup1,
    /// A resource limit of the process (`setrlimit`).
    Rlimit,
    /// Nothing on this host can apply it.
    Unenforced,
}

impl Mechanism {
    /// Its name in replies and `doctor`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mechanism::Cgroup2 => "cgroup2",
            Mechanism::Cgroup1 => "cgroup1",
            Mechanism::Rlimit => "rlimit",
            Mechanism::Unenforced => "none",
        }
    }
}

/// Where a controller is, for this server.
#[derive(Debug)]
enum Place {
    /// In the owner's containment group itself (cgroup v2, enabled in the
    /// server's directory; or v1 with the controller in the freezer's
    /// hierarchy).
    Containment(Mechanism),
    /// In a v1 hierarchy of its own: the server's directory there.
    V1(PathBuf),
    /// Nowhere: why, in words.
    Absent(String),
}

/// Where each controller is ([`Resource::ALL`] order), found once, on first
/// use, from the containment in use.
#[derive(Debug)]
struct Controllers {
    places: [Place; 3],
}

static CONTROLLERS: OnceLock<Controllers> = OnceLock::new();

fn controllers() -> &'static Controllers {
    CONTROLLERS.get_or_init(|| {
        let active = cgroup::active();
        let places = Resource::ALL.map(|resource| find_place(active, resource));
        Controllers { places }
    })
}

fn place(resource: Resource) -> &'static Place {
    &controllers().places[resource as usize]
}

/// Where `resource`'s controller is for a server with `active` containment.
fn find_place(active: &cgroup::Active, resource: Resource) -> Place {
    let controller = resource.controller();
    let Some(dir) = active.dir.as_deref() else {
        return Place::Absent("no control groups (markers containment)".to_owned());
    };
    let mut why = Vec::new();
    match active.mode {
        cgroup::Mode::Cgroup2 => match enable_v2(dir, controller) {
            Ok(()) => return Place::Containment(Mechanism::Cgroup2),
            Err(err) => why.push(err),
        },
        cgroup::Mode::Cgroup1 => {
            // The freezer's hierarchy may have the controller too.
            if cgroup::v1_own_group(controller).is_ok_and(|own| Some(own.as_path()) == dir.parent())
            {
                return Place::Containment(Mechanism::Cgroup1);
            }
        }
        cgroup::Mode::Markers => {}
    }
    match v1_server_dir(dir, controller) {
        Ok(v1) => Place::V1(v1),
        Err(err) => {
            why.push(err);
            Place::Absent(why.join("; "))
        }
    }
}

/// Enables `controller` for the groups under the server's cgroup v2
/// directory `dir`: in `dir`'s `cgroup.subtree_control`, after our own
/// group's when `dir` does not have it yet (possible only where our own
/// group has no processes, such as a container's root group).
fn enable_v2(dir: &Path, controller: &str) -> Result<(), String> {
    let has = |group: &Path| {
        std::fs::read_to_string(group.join("cgroup.controllers"))
            .is_ok_and(|list| list.split_whitespace().any(|name| name == controller))
    };
    if !has(dir) {
        let parent = dir.parent().unwrap_or(dir);
        if !has(parent) {
            return Err(format!(
                "the cgroup2 {controller} controller is not available to {} (it is bound to \
                 a v1 hierarchy, or not delegated)",
                parent.display()
            ));
        }
        std::fs::write(parent.join("cgroup.subtree_control"), format!("+{controller}")).map_err(
            |err| {
                format!(
                    "cannot enable the cgroup2 {controller} controller in {}: {err}",
                    parent.join("cgroup.subtree_control").display()
                )
            },
        )?;
    }
    std::fs::write(dir.join("cgroup.subtree_control"), format!("+{controller}")).map_err(|err| {
        format!(
            "cannot enable the cgroup2 {controller} controller in {}: {err}",
            dir.join("cgroup.subtree_control").display()
        )
    })
}

/// The server's directory in the v1 hierarchy of `controller`, named as
/// its containment directory `containment` is, made under our own group
/// there (after removing those of servers that are gone).
fn v1_server_dir(containment: &Path, controller: &str) -> Result<PathBuf, String> {
    let own = cgroup::v1_own_group(controller)?;
    cgroup::remove_dead_limit_dirs(&own);
    let name = containment.file_name().ok_or("the containment directory has no name")?;
    let dir = own.join(name);
    match std::fs::create_dir(&dir) {
        Ok(()) => {}
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(err) => {
            return Err(format!("cannot create the {controller} group {}: {err}", dir.display()));
        }
    }
    // Proves that an owner's group can be made and joined there.
    let probe = dir.join("probe");
    let made = std::fs::create_dir(&probe).and_then(|()| {
        std::fs::OpenOptions::new().write(true).open(probe.join("cgroup.procs")).map(drop)
    });
    let _ = std::fs::remove_dir(&probe);
    match made {
        Ok(()) => Ok(dir),
        Err(err) => {
            let _ = std::fs::remove_dir(&dir);
            Err(format!("cannot use the v1 {controller} hierarchy at {}: {err}", own.display()))
        }
    }
}

/// What applies `resource`'s limit on this host (`set`: a limit set on
/// purpose, which resource limits of the process apply where no control
/// group can), and why a better mechanism is not used.
pub fn mechanism(resource: Resource, set: bool) -> (Mechanism, Option<String>) {
    match place(resource) {
        Place::Containment(mechanism) => (*mechanism, None),
        Place::V1(_) => (Mechanism::Cgroup1, None),
        Place::Absent(why) => {
            let fallback = match resource {
                Resource::Memory | Resource::Tasks if set => Mechanism::Rlimit,
                _ => Mechanism::Unenforced,
            };
            (fallback, Some(why.clone()))
        }
    }
}

/// Whether this process is exempt from `RLIMIT_NPROC` (root, or
/// `CAP_SYS_RESOURCE` / `CAP_SYS_ADMIN`): the kernel does not apply it.
pub fn nproc_exempt() -> bool {
    const CAP_SYS_ADMIN: u32 = 21;
    const CAP_SYS_RESOURCE: u32 = 24;
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let effective = status
        .lines()
        .find_map(|line| line.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or(0);
    crate::private_fs::euid() == 0
        || effective & (1 << CAP_SYS_ADMIN) != 0
        || effective & (1 << CAP_SYS_RESOURCE) != 0
}

/// Removes this server's directories in the v1 hierarchies used only for
/// limits (their processes were stopped with the containment's groups).
pub(crate) fn end() {
    if let Some(controllers) = CONTROLLERS.get() {
        for place in &controllers.places {
            if let Place::V1(dir) = place {
                cgroup::remove_tree(dir);
            }
        }
    }
}

/// A limit that stopped something: the kernel counted it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitHit {
    /// Which limit.
    pub resource: Resource,
    /// The limit (bytes, tasks).
    pub max: u64,
    /// How many times it stopped something since the last look: processes
    /// the OOM killer killed, forks refused (0 when not counted).
    pub times: u64,
    /// Whether the kernel counted it (a control group); false: a resource
    /// limit of the process applied, and the output shows the failure it
    /// causes (an allocation or a fork that failed), which is all that can
    /// be known without a control group.
    pub counted: bool,
}

/// One of the kernel's counters of a limit: a `key value` line of `file`.
#[derive(Debug, Clone)]
struct Counter {
    resource: Resource,
    max: u64,
    file: PathBuf,
    key: &'static str,
}

impl Counter {
    fn read(&self) -> u64 {
        crate::small_file::read(&self.file)
            .ok()
            .and_then(|text| {
                text.lines().find_map(|line| {
                    let (key, value) = line.split_once(' ')?;
                    (key == self.key).then(|| value.trim().parse().ok()).flatten()
                })
            })
            .unwrap_or(0)
    }
}

/// The values of an owner's counters at one moment ([`OwnerLimits::counts`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts(Vec<u64>);

/// The limits applied to one owner: the groups its child joins, the
/// resource limits of the process and the `nice` value its child sets,
/// and the kernel's counters of what the limits stopped.
#[derive(Debug)]
pub struct OwnerLimits {
    asked: ResourceLimits,
    /// v1 groups of their own, joined between fork and exec.
    joins: Vec<Arc<cgroup::Group>>,
    counters: Vec<Counter>,
    /// `RLIMIT_AS` to set, in bytes.
    address_space: Option<u64>,
    /// `RLIMIT_NPROC` to set.
    processes: Option<u64>,
    /// Which resource each applied limit uses.
    mechanisms: Vec<(Resource, Mechanism)>,
}

impl OwnerLimits {
    /// Applies `limits` to an owner named `name` whose containment group
    /// (a cgroup mode) is `group`: writes the limits into it, or into new
    /// groups of the v1 hierarchies, before any child joins; or keeps the
    /// resource limits of the process its child sets.
    pub(crate) fn apply(
        limits: &ResourceLimits,
        group: Option<&cgroup::Group>,
        name: &str,
    ) -> std::io::Result<OwnerLimits> {
        let mut owner = OwnerLimits {
            asked: *limits,
            joins: Vec::new(),
            counters: Vec::new(),
            address_space: None,
            processes: None,
            mechanisms: Vec::new(),
        };
        let cpu_quota = limits.cpu.map(|cpu| (cpu * CPU_PERIOD_US as f64).ceil() as u64);
        let wanted = [
            (Resource::Memory, limits.memory),
            (Resource::Tasks, limits.tasks),
            // Only a control group applies a CPU limit, as it does a default.
            (Resource::Cpu, cpu_quota.map_or(Bound::None, Bound::Default)),
        ];
        for (resource, bound) in wanted {
            let Some(value) = bound.value() else { continue };
            let (dir, mechanism) = match (place(resource), group) {
                (Place::Containment(mechanism), Some(group)) => {
                    (group.path().to_path_buf(), *mechanism)
                }
                (Place::V1(server), _) => {
                    let joined = owner.joins.iter().find(|g| g.path().parent() == Some(server));
                    let group = match joined {
                        Some(group) => Arc::clone(group),
                        None => {
                            let group = cgroup::Group::create_in(server, name)?;
                            owner.joins.push(Arc::clone(&group));
                            group
                        }
                    };
                    (group.path().to_path_buf(), Mechanism::Cgroup1)
                }
                _ => {
                    let mechanism = match (resource, bound) {
                        (Resource::Memory, Bound::Set(_)) => {
                            owner.address_space = Some(value);
                            Mechanism::Rlimit
                        }
                        (Resource::Tasks, Bound::Set(_)) => {
                            owner.processes = Some(value);
                            Mechanism::Rlimit
                        }
                        _ => Mechanism::Unenforced,
                    };
                    owner.mechanisms.push((resource, mechanism));
                    continue;
                }
            };
            owner.write_limit(&dir, resource, value, mechanism)?;
            owner.mechanisms.push((resource, mechanism));
        }
        Ok(owner)
    }

    /// Writes one limit into the group at `dir` and keeps its counter.
    fn write_limit(
        &mut self,
        dir: &Path,
        resource: Resource,
        value: u64,
        mechanism: Mechanism,
    ) -> std::io::Result<()> {
        let v2 = mechanism == Mechanism::Cgroup2;
        let (max, counter) = match (resource, v2) {
            (Resource::Memory, true) => {
                write(dir, "memory.max", &value.to_string())?;
                if dir.join("memory.swap.max").exists() {
                    write(dir, "memory.swap.max", "0")?;
                }
                (value, Some(("memory.events", "oom_kill")))
            }
            (Resource::Memory, false) => {
                write(dir, "memory.limit_in_bytes", &value.to_string())?;
                if dir.join("memory.memsw.limit_in_bytes").exists() {
                    write(dir, "memory.memsw.limit_in_bytes", &value.to_string())?;
                }
                (value, Some(("memory.oom_control", "oom_kill")))
            }
            (Resource::Tasks, _) => {
                write(dir, "pids.max", &value.to_string())?;
                (value, Some(("pids.events", "max")))
            }
            (Resource::Cpu, true) => {
                write(dir, "cpu.max", &format!("{value} {CPU_PERIOD_US}"))?;
                (value, None)
            }
            (Resource::Cpu, false) => {
                write(dir, "cpu.cfs_period_us", &CPU_PERIOD_US.to_string())?;
                write(dir, "cpu.cfs_quota_us", &value.to_string())?;
                (value, None)
            }
        };
        if let Some((file, key)) = counter {
            self.counters.push(Counter { resource, max, file: dir.join(file), key });
        }
        Ok(())
    }

    /// The limits asked for.
    pub fn asked(&self) -> &ResourceLimits {
        &self.asked
    }

    /// Which mechanism applies each limit that was asked for.
    pub fn mechanisms(&self) -> &[(Resource, Mechanism)] {
        &self.mechanisms
    }

    /// The v1 groups of its own the child joins between fork and exec.
    pub(crate) fn joins(&self) -> &[Arc<cgroup::Group>] {
        &self.joins
    }

    /// `RLIMIT_AS` and `RLIMIT_NPROC` for the child, where they apply.
    pub(crate) fn rlimits(&self) -> (Option<u64>, Option<u64>) {
        (self.address_space, self.processes)
    }

    /// The kernel's counters of what the limits stopped, now.
    pub fn counts(&self) -> Counts {
        Counts(self.counters.iter().map(Counter::read).collect())
    }

    /// The limits that stopped something since `before` (an earlier
    /// [`OwnerLimits::counts`]), with how many times.
    pub fn hits_since(&self, before: &Counts) -> Vec<LimitHit> {
        self.counters
            .iter()
            .enumerate()
            .filter_map(|(i, counter)| {
                let then = before.0.get(i).copied().unwrap_or(0);
                let times = counter.read().saturating_sub(then);
                (times > 0).then_some(LimitHit {
                    resource: counter.resource,
                    max: counter.max,
                    times,
                    counted: true,
                })
            })
            .collect()
    }
}

impl OwnerLimits {
    /// The resource limits of the process that `output` (what a command
    /// printed, as shown) suggests stopped something: an allocation that
    /// failed under `RLIMIT_AS`, a fork that failed under `RLIMIT_NPROC`.
    /// Nothing where no such limit applies.
    pub fn inferred_hits(&self, output: &str) -> Vec<LimitHit> {
        let mut hits = Vec::new();
        let mut infer = |resource, max: Option<u64>, signs: &[&str]| {
            if let Some(max) = max
                && signs.iter().any(|sign| output.contains(sign))
            {
                hits.push(LimitHit { resource, max, times: 0, counted: false });
            }
        };
        infer(Resource::Memory, self.address_space, &MEMORY_FAILURES);
        infer(Resource::Tasks, self.processes, &FORK_FAILURES);
        hits
    }
}

/// What programs print when an allocation fails (Python, C, C++, Rust,
/// Node, the shell).
const MEMORY_FAILURES: [&str; 6] = [
    "MemoryError",
    "Cannot allocate memory",
    "std::bad_alloc",
    "memory allocation of",
    "out of memory",
    "Out of memory",
];

/// What programs print when a fork fails for want of processes (bash,
/// Python, coreutils).
const FORK_FAILURES: [&str; 2] = ["fork: retry", "Resource temporarily unavailable"];

/// Writes `value` into the control file `name` of the group at `dir`, with
/// an error that names the file.
fn write(dir: &Path, name: &str, value: &str) -> std::io::Result<()> {
    let path = dir.join(name);
    std::fs::write(&path, value).map_err(|err| {
        std::io::Error::new(
            err.kind(),
            format!("cannot write {value} to {}: {err}", path.display()),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_documented_values() {
        let limits = ResourceLimits::default();
        assert_eq!(limits.tasks, Bound::Default(DEFAULT_TASKS));
        assert_eq!(limits.nice, DEFAULT_NICE);
        assert_eq!(limits.cpu, None);
        let memory = limits.memory.value().expect("a memory limit");
        assert!(memory >= 1 << 30 || memory == default_memory(), "{memory}");
    }

    #[test]
    fn a_category_overrides_only_what_it_sets() {
        let base = ResourceLimits::default();
        let category = CategoryLimits { memory_mib: Some(64), tasks: None, cpu: Some(0.5) };
        let limits = base.with_category(&category);
        assert_eq!(limits.memory, Bound::Set(64 << 20));
        assert_eq!(limits.tasks, base.tasks);
        assert_eq!(limits.cpu, Some(0.5));
        assert_eq!(limits.nice, base.nice);
    }

    #[test]
    fn failures_under_resource_limits_of_the_process_are_inferred_from_output() {
        let owner = |address_space, processes| OwnerLimits {
            asked: ResourceLimits::none(),
            joins: Vec::new(),
            counters: Vec::new(),
            address_space,
            processes,
            mechanisms: Vec::new(),
        };
        let memory = LimitHit { resource: Resource::Memory, max: 64, times: 0, counted: false };
        let tasks = LimitHit { resource: Resource::Tasks, max: 99, times: 0, counted: false };
        let both = owner(Some(64), Some(99));
        assert_eq!(both.inferred_hits("Traceback ...\nMemoryError\n"), vec![memory]);
        assert_eq!(
            both.inferred_hits("bash: fork: retry: Resource temporarily unavailable"),
            vec![tasks]
        );
        assert_eq!(both.inferred_hits("error: No such file or directory"), vec![]);
        // Where no resource limit of the process applies, nothing is inferred.
        assert_eq!(owner(None, None).inferred_hits("MemoryError fork: retry"), vec![]);
    }

    #[test]
    fn counters_are_read_by_key() {
        let dir = std::env::temp_dir().join(format!("shellkeep-limits-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let file = dir.join("memory.events");
        std::fs::write(&file, "low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\n").expect("write");
        let counter = Counter { resource: Resource::Memory, max: 1, file, key: "oom_kill" };
        assert_eq!(counter.read(), 2);
        let owner = OwnerLimits {
            asked: ResourceLimits::none(),
            joins: Vec::new(),
            counters: vec![counter],
            address_space: None,
            processes: None,
            mechanisms: Vec::new(),
        };
        let before = owner.counts();
        assert!(owner.hits_since(&before).is_empty());
        std::fs::write(dir.join("memory.events"), "oom_kill 5\n").expect("write");
        assert_eq!(
            owner.hits_since(&before),
            vec![LimitHit { resource: Resource::Memory, max: 1, times: 3, counted: true }]
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
