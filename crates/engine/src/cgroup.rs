//! Control groups: containment the kernel enforces, where the host lets us
//! manage them: finding what the host allows (cgroup v2, or v1 with a
//! writable `freezer` hierarchy, else nothing), the server's directory
//! `shellkeep-<pid>-<random>` under its own group, one [`Group`] per owner
//! under it, and stopping a group ([`Group::kill`]).
//!
//! Not here: the polite signals before a kill and the joining of a group
//! between fork and exec (`process`); it starts no process and holds no
//! `unsafe`. It reads and writes cgroup files and sends SIGKILL only to the
//! members of a frozen group.
//!
//! Invariant: a child that joined its owner's group before exec cannot
//! leave it without write access to a `cgroup.procs` outside it, whatever
//! it does to its environment, session or process group.

use std::fs::File;
use std::os::fd::{AsRawFd as _, RawFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nix::unistd::Pid;

/// The environment variable that forces a containment mode: `auto` (the
/// default), `cgroup2`, `cgroup1` or `markers`.
pub(crate) const MODE_VAR: &str = "SHELLKEEP_CONTAINMENT";

/// What contains the processes of this server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// One cgroup v2 group per owner.
    Cgroup2,
    /// One group per owner in the cgroup v1 `freezer` hierarchy.
    Cgroup1,
    /// Scope markers in the environment, process groups, sessions and
    /// ancestry only (`process`).
    Markers,
}

impl Mode {
    /// The spelling of [`MODE_VAR`] and `shellkeep doctor`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Cgroup2 => "cgroup2",
            Mode::Cgroup1 => "cgroup1",
            Mode::Markers => "markers",
        }
    }

    fn version(self) -> Option<Version> {
        match self {
            Mode::Cgroup2 => Some(Version::V2),
            Mode::Cgroup1 => Some(Version::V1),
            Mode::Markers => None,
        }
    }
}

/// The containment mode asked for ([`MODE_VAR`] or `--containment`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requested {
    /// The best mode the host allows.
    Auto,
    /// Exactly this mode; start-up fails if the host does not allow it.
    Only(Mode),
}

impl std::str::FromStr for Requested {
    type Err = String;

    fn from_str(text: &str) -> Result<Requested, String> {
        match text {
            "" | "auto" => Ok(Requested::Auto),
            "cgroup2" => Ok(Requested::Only(Mode::Cgroup2)),
            "cgroup1" => Ok(Requested::Only(Mode::Cgroup1)),
            "markers" => Ok(Requested::Only(Mode::Markers)),
            other => Err(format!(
                "unknown containment mode {other:?}: use auto, cgroup2, cgroup1 or markers"
            )),
        }
    }
}

impl Requested {
    /// The modes to try, best first.
    pub fn candidates(self) -> Vec<Mode> {
        match self {
            Requested::Auto => vec![Mode::Cgroup2, Mode::Cgroup1, Mode::Markers],
            Requested::Only(mode) => vec![mode],
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    V1,
    V2,
}

/// The containment this server uses, once chosen.
#[derive(Debug)]
pub struct Active {
    /// The mode.
    pub mode: Mode,
    /// The server's own directory (cgroup modes).
    pub dir: Option<PathBuf>,
    /// Why each better mode is not used, worded for a person.
    pub unavailable: Vec<String>,
}

static ACTIVE: OnceLock<Active> = OnceLock::new();

/// The containment in use; markers when none was chosen (a library user
/// that never called `process::init_containment`).
pub(crate) fn active() -> &'static Active {
    ACTIVE.get_or_init(|| Active { mode: Mode::Markers, dir: None, unavailable: Vec::new() })
}

/// Sets the containment in use; the first call wins. Returns the one in use.
pub(crate) fn set_active(active: Active) -> &'static Active {
    if let Err(unused) = ACTIVE.set(active)
        && let Some(dir) = &unused.dir
    {
        // Chosen already (or markers taken by default before any choice):
        // the directory just made is not used.
        let _ = kill_tree(dir);
    }
    self::active()
}

/// The server's cgroup directory, when a cgroup mode is in use: what the
/// orphan guard is told, to [`kill_tree`] it after the server's death.
pub fn server_dir() -> Option<&'static Path> {
    active().dir.as_deref()
}

/// Whether process `pid` is in none of this server's control groups, in a
/// cgroup mode: every child of ours joins one before it runs anything, so
/// such a process left its group on purpose (possible where the user may
/// write a `cgroup.procs` outside it: root, a delegated subtree). False in
/// markers mode, and for a process that is gone.
pub(crate) fn outside_server_dir(pid: i32) -> bool {
    let Some(name) = server_dir().and_then(Path::file_name).and_then(|name| name.to_str()) else {
        return false;
    };
    let Ok(groups) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) else { return false };
    let v1 = active().mode == Mode::Cgroup1;
    let path = groups.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let wanted = if v1 {
            controllers.split(',').any(|c| c == "freezer")
        } else {
            controllers.is_empty()
        };
        wanted.then_some(path)
    });
    path.is_some_and(|path| !path.split('/').any(|part| part == name))
}

/// Where a cgroup hierarchy is mounted and where our own group is in it.
#[derive(Debug, Clone)]
struct Hierarchy {
    /// Our own group, as a path under the mount point.
    own: PathBuf,
}

/// Finds our own group in the hierarchy of `version`.
fn hierarchy(version: Version) -> Result<Hierarchy, String> {
    match version {
        Version::V2 => own_group(None),
        Version::V1 => own_group(Some("freezer")),
    }
}

/// Our own group in the cgroup v1 hierarchy that has `controller` (such as
/// `memory` or `pids`), as a directory: where the resource limits put their
/// groups when the containment's hierarchy lacks that controller.
pub(crate) fn v1_own_group(controller: &str) -> Result<PathBuf, String> {
    own_group(Some(controller)).map(|hierarchy| hierarchy.own)
}

/// Finds our own group in the cgroup2 hierarchy (`None`) or in the v1
/// hierarchy with `controller`.
fn own_group(controller: Option<&str>) -> Result<Hierarchy, String> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|err| format!("cannot read /proc/self/mountinfo: {err}"))?;
    let cgroups = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|err| format!("cannot read /proc/self/cgroup: {err}"))?;
    let (mount_root, mount_point) = mountinfo
        .lines()
        .find_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let fields: Vec<&str> = left.split(' ').collect();
            let mut right = right.split(' ');
            let fstype = right.next()?;
            let _source = right.next()?;
            let options = right.next().unwrap_or_default();
            let wanted = match controller {
                None => fstype == "cgroup2",
                Some(name) => fstype == "cgroup" && options.split(',').any(|o| o == name),
            };
            if !wanted {
                return None;
            }
            Some((unescape(fields.get(3)?), unescape(fields.get(4)?)))
        })
        .ok_or_else(|| match controller {
            None => "no cgroup2 file system is mounted".to_owned(),
            Some(name) => format!("no cgroup v1 {name} hierarchy is mounted"),
        })?;
    let own = cgroups
        .lines()
        .find_map(|line| {
            let mut parts = line.splitn(3, ':');
            let _id = parts.next()?;
            let controllers = parts.next()?;
            let path = parts.next()?;
            let wanted = match controller {
                None => controllers.is_empty(),
                Some(name) => controllers.split(',').any(|c| c == name),
            };
            wanted.then(|| path.to_owned())
        })
        .ok_or_else(|| "this process is in no group of that hierarchy".to_owned())?;
    let relative = Path::new(&own)
        .strip_prefix(&mount_root)
        .map_err(|_| format!("our group {own} is outside the mounted part {mount_root}"))?;
    let own = Path::new(&mount_point).join(relative);
    if !own.is_dir() {
        return Err(format!("our group {} is not a directory", own.display()));
    }
    Ok(Hierarchy { own })
}

/// Undoes mountinfo's octal escapes (`\040` for a space).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && let Some(digits) = bytes.get(i + 1..i + 4)
            && let Ok(code) = u8::from_str_radix(std::str::from_utf8(digits).unwrap_or("x"), 8)
        {
            out.push(code);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Creates the server's directory for `mode` under our own group and checks
/// that a group can be made in it and joined: `cgroup.procs` of our own
/// group (the common ancestor of where a child starts and where it goes)
/// and of a new group are writable, and the group can be killed. Returns
/// the directory; the caller proves it with a real spawn.
pub(crate) fn prepare(mode: Mode) -> Result<PathBuf, String> {
    let Some(version) = mode.version() else { return Err("not a cgroup mode".into()) };
    let hierarchy = hierarchy(version)?;
    let own_procs = hierarchy.own.join("cgroup.procs");
    nix::unistd::access(&own_procs, nix::unistd::AccessFlags::W_OK).map_err(|err| {
        format!(
            "cannot move processes out of our group ({} is not writable: {err}); run as root \
             or in a delegated subtree (a systemd user service with Delegate=yes, a container \
             with its own cgroup namespace)",
            own_procs.display()
        )
    })?;
    remove_dead_servers(&hierarchy.own);
    let random = crate::random::random_hex(4).map_err(|err| err.to_string())?;
    let dir = hierarchy.own.join(format!("shellkeep-{}-{random}", std::process::id()));
    std::fs::create_dir(&dir)
        .map_err(|err| format!("cannot create the group {}: {err}", dir.display()))?;
    let check = || -> Result<(), String> {
        let kill_file = match version {
            Version::V2 => ["cgroup.kill", "cgroup.freeze"]
                .iter()
                .map(|name| dir.join(name))
                .find(|path| path.exists()),
            Version::V1 => Some(dir.join("freezer.state")).filter(|path| path.exists()),
        };
        if kill_file.is_none() {
            return Err(format!(
                "{} has neither cgroup.kill nor a freezer: a group could not be stopped as a whole",
                dir.display()
            ));
        }
        let procs = dir.join("cgroup.procs");
        File::options()
            .write(true)
            .open(&procs)
            .map(drop)
            .map_err(|err| format!("cannot open {} for writing: {err}", procs.display()))
    };
    if let Err(err) = check() {
        let _ = std::fs::remove_dir(&dir);
        return Err(err);
    }
    Ok(dir)
}

/// Kills and removes the directories of servers that are gone (killed
/// before they could remove their own, and the orphan guard could not):
/// `shellkeep-<pid>-<random>` under `own` whose pid no longer exists.
fn remove_dead_servers(own: &Path) {
    for dir in dead_server_dirs(own) {
        match kill_tree(&dir) {
            Ok(()) => tracing::info!(
                "removed the control group {}, left by a server that is gone",
                dir.display()
            ),
            Err(err) => tracing::debug!("{err}"),
        }
    }
}

/// Removes the empty groups of servers that are gone from `own`, a group
/// of a hierarchy that only limits resources (a v1 `memory` or `pids`
/// hierarchy beside the containment's): their processes were also in the
/// containment's groups, which stopped them; only the directories are left.
pub(crate) fn remove_dead_limit_dirs(own: &Path) {
    for dir in dead_server_dirs(own) {
        remove_tree(&dir);
    }
}

/// Removes `dir` and the groups under it, bottom-up; a group that still
/// has processes stays.
pub(crate) fn remove_tree(dir: &Path) {
    walk(dir, &mut |group| {
        let _ = std::fs::remove_dir(group);
    });
}

/// The directories `shellkeep-<pid>-<random>` under `own` whose server is
/// gone: no process `pid`, and no member we cannot see.
fn dead_server_dirs(own: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(own) else { return Vec::new() };
    let mut dead = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|name| name.strip_prefix("shellkeep-"))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        // A process we cannot see (another pid namespace's) is listed as
        // 0: then the directory may be another namespace's live server.
        let foreign = || {
            let mut zero = false;
            walk(&entry.path(), &mut |group| {
                zero |= std::fs::read_to_string(group.join("cgroup.procs"))
                    .is_ok_and(|text| text.lines().any(|line| line.trim() == "0"));
            });
            zero
        };
        if !Path::new(&format!("/proc/{pid}")).exists() && !foreign() {
            dead.push(entry.path());
        }
    }
    dead
}

/// One owner's group: a directory under the server's, and its
/// `cgroup.procs` open for writing so a child can join between fork and
/// exec. Removed when the last handle goes, if it is empty by then (else
/// at the next group's creation, or with the server's directory).
///
/// At start-up `process::init_containment` finds what this host allows, in
/// order: cgroup v2 (the `cgroup2` mount and our own group, where we can
/// create a group under our own and move a process into it: root, or a
/// delegated subtree such as a systemd user service or a container with its
/// own cgroup namespace), then cgroup v1 with a writable `freezer`
/// hierarchy, else nothing (the scope markers of `process` are then the
/// only containment). A child joins its owner's group between fork and exec
/// (`process` does that, through [`Group::procs_fd`], opened before the
/// fork), so everything it starts is in the group. Stopping it is
/// [`Group::kill`]: `cgroup.kill` (v2; recursive), or freeze, SIGKILL every
/// member, thaw (v1, or v2 without `cgroup.kill`).
#[derive(Debug)]
pub struct Group {
    path: PathBuf,
    version: Version,
    procs: File,
}

/// Groups dropped while processes were still in them, removed later.
static LEFT_BEHIND: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

impl Group {
    /// A new group named `name` in the server's directory; `None` when no
    /// cgroup mode is in use.
    pub fn create(name: &str) -> std::io::Result<Option<Arc<Group>>> {
        match &active().dir {
            Some(dir) => Group::create_in(dir, name).map(Some),
            None => Ok(None),
        }
    }

    /// A new group named `name` in `dir`.
    pub(crate) fn create_in(dir: &Path, name: &str) -> std::io::Result<Arc<Group>> {
        let version = version_of(dir);
        {
            let mut left = LEFT_BEHIND.lock().unwrap_or_else(PoisonError::into_inner);
            left.retain(|path| std::fs::remove_dir(path).is_err() && path.exists());
        }
        let path = dir.join(name);
        std::fs::create_dir(&path).map_err(|err| {
            std::io::Error::new(
                err.kind(),
                format!("cannot create the control group {}: {err}", path.display()),
            )
        })?;
        let procs = match File::options().write(true).open(path.join("cgroup.procs")) {
            Ok(file) => file,
            Err(err) => {
                let _ = std::fs::remove_dir(&path);
                return Err(std::io::Error::new(
                    err.kind(),
                    format!("cannot open {}/cgroup.procs: {err}", path.display()),
                ));
            }
        };
        Ok(Arc::new(Group { path, version, procs }))
    }

    /// The group's directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The descriptor of its `cgroup.procs`, open for writing (close on
    /// exec): writing `0` to it moves the writer into the group.
    pub fn procs_fd(&self) -> RawFd {
        self.procs.as_raw_fd()
    }

    /// The processes in the group and the groups under it.
    pub fn members(&self) -> Vec<i32> {
        members(&self.path)
    }

    /// Kills every process in the group and under it, at once.
    pub fn kill(&self) -> std::io::Result<()> {
        kill_dir(&self.path, self.version)
    }

    /// Freezes (`frozen`) or thaws the group and the groups under it:
    /// frozen, its processes cannot run, so none can fork or signal while
    /// a stop looks for them, and a fatal signal still kills them (v2; in
    /// v1 they die once thawed). Waits, at most a second, until the kernel
    /// says the freeze is complete.
    pub fn set_frozen(&self, frozen: bool) -> std::io::Result<()> {
        set_frozen(&self.path, self.version, frozen)
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if std::fs::remove_dir(&self.path).is_err() && self.path.exists() {
            LEFT_BEHIND.lock().unwrap_or_else(PoisonError::into_inner).push(self.path.clone());
        }
    }
}

/// The live processes in the group at `dir` and every group under it.
pub(crate) fn members(dir: &Path) -> Vec<i32> {
    let mut pids = Vec::new();
    walk(dir, &mut |group| {
        if let Ok(text) = std::fs::read_to_string(group.join("cgroup.procs")) {
            pids.extend(text.lines().filter_map(|line| line.trim().parse::<i32>().ok()));
        }
    });
    pids.retain(|&pid| is_live(pid));
    pids.sort_unstable();
    pids.dedup();
    pids
}

/// Whether `pid` exists and is not a zombie (v1 lists zombies).
fn is_live(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rfind(')')
            .and_then(|end| stat[end + 1..].split_ascii_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X")
    })
}

/// Calls `visit` for `dir` and every group under it, children first.
fn walk(dir: &Path, visit: &mut dyn FnMut(&Path)) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                walk(&entry.path(), visit);
            }
        }
    }
    visit(dir);
}

fn kill_dir(dir: &Path, version: Version) -> std::io::Result<()> {
    let kill_file = dir.join("cgroup.kill");
    if version == Version::V2 && kill_file.exists() {
        return std::fs::write(kill_file, "1");
    }
    // Freeze, so nothing forks while we kill; then kill and thaw, so the
    // kills are delivered.
    set_frozen(dir, version, true)?;
    for pid in members(dir) {
        #[allow(
            clippy::disallowed_methods,
            reason = "a frozen group's members are killed here, where the group is thawed after"
        )]
        let _ = nix::sys::signal::kill(Pid::from_raw(pid), Signal::SIGKILL);
    }
    set_frozen(dir, version, false)
}

/// Freezes or thaws the group at `dir`; a freeze waits, at most a second,
/// until it is complete.
fn set_frozen(dir: &Path, version: Version, frozen: bool) -> std::io::Result<()> {
    let (file, value) = match (version, frozen) {
        (Version::V2, true) => (dir.join("cgroup.freeze"), "1"),
        (Version::V2, false) => (dir.join("cgroup.freeze"), "0"),
        (Version::V1, true) => (dir.join("freezer.state"), "FROZEN"),
        (Version::V1, false) => (dir.join("freezer.state"), "THAWED"),
    };
    std::fs::write(&file, value)?;
    if frozen {
        let deadline = Instant::now() + Duration::from_secs(1);
        let mut pause = Duration::from_micros(200);
        while !is_frozen(dir, version) && Instant::now() < deadline {
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(5));
        }
    }
    Ok(())
}

fn is_frozen(dir: &Path, version: Version) -> bool {
    match version {
        Version::V1 => std::fs::read_to_string(dir.join("freezer.state"))
            .is_ok_and(|state| state.trim() == "FROZEN"),
        Version::V2 => std::fs::read_to_string(dir.join("cgroup.events"))
            .is_ok_and(|events| events.lines().any(|line| line == "frozen 1")),
    }
}

fn version_of(dir: &Path) -> Version {
    if dir.join("freezer.state").exists() { Version::V1 } else { Version::V2 }
}

/// Kills everything in the server directory `dir` (v2 or v1) and removes
/// it and the groups under it, bottom-up, once they are empty. For the
/// server's shutdown and the orphan guard after the server's death.
pub(crate) fn kill_tree(dir: &Path) -> std::io::Result<()> {
    if !dir.exists() {
        return Ok(());
    }
    let version = version_of(dir);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        kill_dir(dir, version)?;
        let mut pause = Duration::from_millis(1);
        while !members(dir).is_empty() && Instant::now() < deadline {
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(20));
        }
        if members(dir).is_empty() || Instant::now() >= deadline {
            break;
        }
    }
    let mut result = Ok(());
    walk(dir, &mut |group| {
        if let Err(err) = std::fs::remove_dir(group)
            && err.kind() != std::io::ErrorKind::NotFound
        {
            result = Err(std::io::Error::new(
                err.kind(),
                format!("cannot remove the control group {}: {err}", group.display()),
            ));
        }
    });
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse() {
        assert_eq!("".parse::<Requested>(), Ok(Requested::Auto));
        assert_eq!("auto".parse::<Requested>(), Ok(Requested::Auto));
        assert_eq!("cgroup1".parse::<Requested>(), Ok(Requested::Only(Mode::Cgroup1)));
        assert_eq!("markers".parse::<Requested>(), Ok(Requested::Only(Mode::Markers)));
        assert!("cgroup3".parse::<Requested>().unwrap_err().contains("cgroup2"));
    }

    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(unescape(r"/sys/fs/a\040b"), "/sys/fs/a b");
        assert_eq!(unescape(r"/plain"), "/plain");
        assert_eq!(unescape(r"/end\04"), r"/end\04");
    }
}
