//! Private files and directories: the only way shellkeep creates anything on
//! disk, so that no other user of the machine can read, replace or redirect
//! what we write.
//!
//! The rules, which every writer follows by calling this module:
//! - A directory we create is made with `mkdir(mode 0700)`, which fails if
//!   the name exists: we never adopt a directory someone else made.
//! - A directory we reuse (the per-user runtime base, the output directory)
//!   must be a real directory (not a symlink), owned by us, with no access
//!   for group or others; every directory above it must be writable only by
//!   us or root, or be sticky like `/tmp`, so nobody else can swap a path
//!   component under us.
//! - A file we create is opened with `O_CREAT | O_EXCL | O_NOFOLLOW`, mode
//!   0600: never through a symlink, never someone else's file. A file we
//!   rewrite ([`rewrite_file`]) is opened with `O_NOFOLLOW` and must
//!   be a regular file of ours with a single link.
//! - What a shell of ours must read and nobody may change is no file at
//!   all: a sealed memory file ([`sealed_memfd`]) it inherits.
//!
//! It also lays out the runtime directories (`<base>/<pid>-<start>-<random>`,
//! one per server, so a later server can tell which belong to dead servers
//! and remove them) and makes the server process non-dumpable. It does not
//! decide what goes into the files.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

/// The effective user id: the owner every private file must have.
pub fn euid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// Creates the directory `path` with mode 0700. Fails if anything already
/// exists there (a directory, a file or a symlink), so the directory is
/// certainly new and ours. The parent must exist.
pub fn create_private_dir(path: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new().mode(0o700).create(path)?;
    // The umask may have removed owner bits; it cannot have added others.
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))?;
    check_private_dir(path)
}

/// Makes sure `path` is a private directory of ours, creating it and any
/// missing parents with mode 0700 (as `mkdir -p` would).
///
/// An existing `path` must pass [`check_private_dir`]; an existing parent
/// must not let anyone but us or root change what is below it (see
/// [`check_safe_ancestors`]). Nothing is ever chmod-ed or adopted: a
/// directory that fails a check is an error that names it.
pub fn ensure_private_dir(path: &Path) -> io::Result<()> {
    if !path.is_absolute() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}: a private directory needs an absolute path", path.display()),
        ));
    }
    // The deepest part of the path that exists; below it we create.
    let mut existing = path.to_path_buf();
    let mut missing = Vec::new();
    while std::fs::symlink_metadata(&existing).is_err() {
        let Some(name) = existing.file_name().map(OsStr::to_os_string) else { break };
        missing.push(name);
        existing.pop();
    }
    if missing.is_empty() {
        check_safe_ancestors(path.parent().unwrap_or(Path::new("/")))?;
        return check_private_dir(path);
    }
    check_safe_ancestors(&existing)?;
    let mut current = existing;
    for name in missing.into_iter().rev() {
        current.push(name);
        match create_private_dir(&current) {
            Ok(()) => {}
            // Someone (perhaps another server of ours) made it meanwhile.
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => check_private_dir(&current)?,
            Err(err) => return Err(err),
        }
    }
    Ok(())
}

/// Checks that `path` is a real directory (not a symlink), owned by us, that
/// neither group nor others can enter, list or change.
pub fn check_private_dir(path: &Path) -> io::Result<()> {
    let meta = std::fs::symlink_metadata(path)?;
    let problem = if meta.file_type().is_symlink() {
        Some("is a symlink".to_owned())
    } else if !meta.is_dir() {
        Some("is not a directory".to_owned())
    } else if meta.uid() != euid() {
        Some(format!("is owned by uid {}, not by us (uid {})", meta.uid(), euid()))
    } else if meta.mode() & 0o077 != 0 {
        Some(format!(
            "has mode {:o}; it must be 700 (no access for group or others)",
            meta.mode() & 0o7777
        ))
    } else {
        None
    };
    match problem {
        None => Ok(()),
        Some(problem) => Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{} {problem}", path.display()),
        )),
    }
}

/// Checks every directory from `/` down to `dir` (symlinks resolved): each
/// must be owned by us or root and writable by nobody else, unless it is
/// sticky (like `/tmp`), where others cannot rename or remove our entries.
/// Otherwise another user could replace a path component below it.
pub fn check_safe_ancestors(dir: &Path) -> io::Result<()> {
    let resolved = std::fs::canonicalize(dir)?;
    let mut current = PathBuf::new();
    for component in resolved.components() {
        match component {
            Component::RootDir => current.push("/"),
            Component::Normal(name) => current.push(name),
            _ => continue,
        }
        let meta = std::fs::metadata(&current)?;
        let owner_ok = meta.uid() == euid() || meta.uid() == 0;
        let others_write = meta.mode() & 0o022 != 0;
        let sticky = meta.mode() & 0o1000 != 0;
        if !owner_ok || (others_write && !sticky) {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "{} (owner uid {}, mode {:o}) lets another user replace what is below it",
                    current.display(),
                    meta.uid(),
                    meta.mode() & 0o7777
                ),
            ));
        }
    }
    Ok(())
}

/// Creates the file `path` for writing, mode 0600. Fails if anything exists
/// there, a symlink included (`O_CREAT | O_EXCL | O_NOFOLLOW`).
pub fn create_new_file(path: &Path) -> io::Result<File> {
    File::options()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// Creates the file `path` as [`create_new_file`] does and writes
/// `contents` to it.
pub fn write_new_file(path: &Path, contents: &[u8]) -> io::Result<()> {
    create_new_file(path)?.write_all(contents)
}

/// A sealed memory file holding `contents` (`memfd_create`, then every
/// seal): nobody, not even a process that holds or reopens the descriptor
/// (`/proc/self/fd/N`), can change, grow or shrink it; it has no name in
/// any directory. Close-on-exec here; a child that must read it is given
/// it explicitly. `name` only labels it in `/proc/PID/fd`.
pub fn sealed_memfd(name: &str, contents: &[u8]) -> io::Result<std::os::fd::OwnedFd> {
    use nix::fcntl::{FcntlArg, SealFlag, fcntl};
    use nix::sys::memfd::{MFdFlags, memfd_create};
    let fd = memfd_create(name, MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING)?;
    File::from(fd.try_clone()?).write_all(contents)?;
    let seals = SealFlag::F_SEAL_WRITE
        | SealFlag::F_SEAL_GROW
        | SealFlag::F_SEAL_SHRINK
        | SealFlag::F_SEAL_SEAL;
    fcntl(&fd, FcntlArg::F_ADD_SEALS(seals))?;
    Ok(fd)
}

/// Replaces the contents of the file `path` with `contents`, creating it
/// (mode 0600) if needed. An existing file must be a regular file of ours
/// with one link; it is never followed as a symlink, and a FIFO never
/// blocks the call.
pub fn rewrite_file(path: &Path, contents: &[u8]) -> io::Result<()> {
    let mut file = File::options()
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)?;
    check_own_regular_file(path, &file)?;
    let meta = file.metadata()?;
    if meta.mode() & 0o077 != 0 {
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    // Written over in place, then cut to its new length: on ext4 a file
    // truncated to nothing and written again is flushed to disk when it is
    // closed (`auto_da_alloc`), a disk write on every call.
    file.write_all(contents)?;
    let len = contents.len() as u64;
    if meta.len() > len {
        file.set_len(len)?;
    }
    Ok(())
}

/// Opens the file `path` for appending (`O_APPEND`: each write lands at
/// the end, whoever else appends), creating it with mode 0600. An existing
/// file must be a regular file of ours with one link, never followed as a
/// symlink; one others could read or write is made 0600.
pub fn open_private_append(path: &Path) -> io::Result<File> {
    let file = File::options()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
        .map_err(|err| match err.raw_os_error() {
            Some(libc::ELOOP) => io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("{} is a symlink; refusing to follow it", path.display()),
            ),
            _ => err,
        })?;
    check_own_regular_file(path, &file)?;
    if file.metadata()?.mode() & 0o077 != 0 {
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(file)
}

/// Reads at most `limit` bytes of the file `path`, which must be a regular
/// file of ours (not followed as a symlink).
pub fn read_private_file(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let file = File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)?;
    check_own_regular_file(path, &file)?;
    let mut bytes = Vec::new();
    file.take(limit).read_to_end(&mut bytes)?;
    Ok(bytes)
}

fn check_own_regular_file(path: &Path, file: &File) -> io::Result<()> {
    let meta = file.metadata()?;
    let problem = if !meta.is_file() {
        Some("is not a regular file")
    } else if meta.uid() != euid() {
        Some("is not owned by us")
    } else if meta.nlink() != 1 {
        Some("has other hard links")
    } else {
        None
    };
    match problem {
        None => Ok(()),
        Some(problem) => Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{} {problem}; refusing to use it", path.display()),
        )),
    }
}

/// Makes this process non-dumpable (`PR_SET_DUMPABLE` 0): its
/// `/proc/PID/fd`, `environ` and memory become root's, so a command running
/// as the same (non-root) user cannot open the server's stdout and write
/// forged protocol messages, nor read its memory. Children are dumpable
/// again after `exec`; root keeps full access.
pub fn make_process_undumpable() -> io::Result<()> {
    nix::sys::prctl::set_dumpable(false).map_err(io::Error::from)
}

/// Where temporary directories go when the system's default is used.
pub const DEFAULT_TEMP_DIR: &str = "/tmp";

/// `temp_dir` (`$TMPDIR`) if it can hold our directories: an absolute path
/// to an existing directory that nobody but us or root can change (see
/// [`check_safe_ancestors`]). Otherwise `/tmp`, with a notice that says why
/// `temp_dir` was not used: a missing or relative `TMPDIR`, one that is not
/// a directory or not ours, stops nothing.
pub fn usable_temp_dir(temp_dir: &Path) -> (PathBuf, Option<String>) {
    let default = Path::new(DEFAULT_TEMP_DIR);
    // An empty `TMPDIR` means the default, as for `mktemp`.
    if temp_dir == default || temp_dir.as_os_str().is_empty() {
        return (default.to_path_buf(), None);
    }
    let problem = if !temp_dir.is_absolute() {
        "is not an absolute path".to_owned()
    } else {
        match std::fs::metadata(temp_dir) {
            Err(err) => format!("cannot be used ({err})"),
            Ok(meta) if !meta.is_dir() => "is not a directory".to_owned(),
            Ok(_) => match check_safe_ancestors(temp_dir) {
                Ok(()) => return (temp_dir.to_path_buf(), None),
                Err(err) => format!("is not safe for our files ({err})"),
            },
        }
    };
    let notice =
        format!("TMPDIR {} {problem}; using {DEFAULT_TEMP_DIR} instead", temp_dir.display());
    (default.to_path_buf(), Some(notice))
}

/// Picks the per-user base of the runtime directories, checks it, and
/// creates it if needed:
///
/// 1. `$XDG_RUNTIME_DIR/shellkeep` when `xdg_runtime_dir` is given
///    (absolute);
/// 2. else `<temp_dir>/shellkeep-<uid>`, where an unusable `temp_dir` (see
///    [`usable_temp_dir`]) is replaced by `/tmp` and the notice says so;
/// 3. if the chosen one exists but fails the checks (a symlink, someone
///    else's, or open to others: another user may have made it to catch
///    our files), a fresh `<temp_dir>/shellkeep-<uid>-<random>` that must
///    not exist yet. The returned notice says why.
pub fn runtime_base(
    xdg_runtime_dir: Option<&Path>,
    temp_dir: &Path,
) -> io::Result<(PathBuf, Option<String>)> {
    let uid = euid();
    let xdg_runtime_dir = xdg_runtime_dir.filter(|dir| dir.is_absolute());
    // The temporary directory is checked only when it is needed.
    let temp = || usable_temp_dir(temp_dir);
    let (preferred, mut notices) = match xdg_runtime_dir {
        Some(dir) => (dir.join("shellkeep"), Vec::new()),
        None => {
            let (temp_dir, notice) = temp();
            (temp_dir.join(format!("shellkeep-{uid}")), notice.into_iter().collect())
        }
    };
    let refused = match ensure_private_dir(&preferred) {
        Ok(()) => return Ok((preferred, join_notices(notices))),
        Err(err) => err,
    };
    let (temp_dir, notice) = temp();
    if xdg_runtime_dir.is_some() {
        notices.extend(notice);
    }
    check_safe_ancestors(&temp_dir)?;
    let fresh = temp_dir.join(format!("shellkeep-{uid}-{}", random_hex(8)?));
    create_private_dir(&fresh)?;
    notices.push(format!(
        "not using {} ({refused}); using the fresh private directory {} instead",
        preferred.display(),
        fresh.display()
    ));
    Ok((fresh, join_notices(notices)))
}

fn join_notices(notices: Vec<String>) -> Option<String> {
    (!notices.is_empty()).then(|| notices.join("; "))
}

/// Creates this server's own runtime directory in `base`:
/// `<base>/<pid>-<start time>-<random>`, mode 0700, new. The pid and the
/// start time (in clock ticks since boot, as `/proc/PID/stat` has it) let a
/// later server tell whether we are still alive.
pub fn create_server_dir(base: &Path) -> io::Result<PathBuf> {
    let pid = std::process::id();
    let start = start_ticks(pid).unwrap_or(0);
    let dir = base.join(format!("{pid}-{start}-{}", random_hex(4)?));
    create_private_dir(&dir)?;
    Ok(dir)
}

/// Removes the runtime directories in `base` whose server is dead (killed,
/// crashed, or failed to start), returning them. A directory is left alone
/// when it is not ours, not a real directory, not named exactly as a server
/// names it (`<pid>-<start>-<8 hex digits>`, or the older
/// `<pid>-<8 hex digits>`), or when its server still runs. Fresh fallback
/// bases next to the usual one (exactly `shellkeep-<uid>-<16 hex digits>`
/// in `temp_dir`, as [`runtime_base`] makes them) are cleaned the same way,
/// and removed once empty.
pub fn remove_dead_server_dirs(base: &Path, temp_dir: &Path) -> Vec<PathBuf> {
    let mut removed = remove_dead_in(base);
    // Where `runtime_base` made its fresh bases.
    let (temp_dir, _) = usable_temp_dir(temp_dir);
    let temp_dir = temp_dir.as_path();
    let prefix = format!("shellkeep-{}-", euid());
    for entry in std::fs::read_dir(temp_dir).into_iter().flatten().flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let fresh_base = name.strip_prefix(&prefix).is_some_and(|random| is_hex(random, 16));
        if path == base || !fresh_base || check_private_dir(&path).is_err() {
            continue;
        }
        removed.extend(remove_dead_in(&path));
        // Only succeeds when empty: a live server may still be using it.
        if std::fs::remove_dir(&path).is_ok() {
            removed.push(path);
        }
    }
    removed
}

fn remove_dead_in(base: &Path) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    if check_private_dir(base).is_err() {
        return removed;
    }
    for entry in std::fs::read_dir(base).into_iter().flatten().flatten() {
        let path = entry.path();
        let Some(owner) = ServerDirName::parse(&entry.file_name().to_string_lossy()) else {
            continue;
        };
        if owner.alive() || check_private_dir(&path).is_err() {
            continue;
        }
        // `remove_dir_all` does not follow symlinks inside the tree.
        match std::fs::remove_dir_all(&path) {
            Ok(()) => removed.push(path),
            Err(err) => tracing::warn!("cannot remove {}: {err}", path.display()),
        }
    }
    removed
}

/// The owner recorded in a server directory's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ServerDirName {
    pid: u32,
    /// `None` for the older `<pid>-<random>` names.
    start: Option<u64>,
}

impl ServerDirName {
    fn parse(name: &str) -> Option<ServerDirName> {
        let fields: Vec<&str> = name.split('-').collect();
        let hex = |s: &str| is_hex(s, 8);
        match fields.as_slice() {
            [pid, start, random] if hex(random) => {
                Some(ServerDirName { pid: pid.parse().ok()?, start: Some(start.parse().ok()?) })
            }
            [pid, random] if hex(random) => {
                Some(ServerDirName { pid: pid.parse().ok()?, start: None })
            }
            _ => None,
        }
    }

    /// Whether the process that made the directory still runs. A reused
    /// pid counts as dead when the start time is known, else as alive (the
    /// directory then waits for a later start).
    fn alive(self) -> bool {
        match (start_ticks(self.pid), self.start) {
            (None, _) => false,
            (Some(now), Some(then)) => now == then,
            (Some(_), None) => true,
        }
    }
}

/// Whether `text` is exactly `len` lowercase hex digits, as [`random_hex`]
/// writes them.
fn is_hex(text: &str, len: usize) -> bool {
    text.len() == len && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The start time of process `pid` in clock ticks after boot, or `None` if
/// it does not exist (`process` parses `/proc/PID/stat` for both). A pid
/// with the start time a server recorded is that server, still running.
pub fn start_ticks(pid: u32) -> Option<u64> {
    crate::process::proc_scan::start_ticks(i32::try_from(pid).ok()?)
}

/// `n_bytes` random bytes as lowercase hex.
pub fn random_hex(n_bytes: usize) -> io::Result<String> {
    let mut bytes = vec![0u8; n_bytes];
    getrandom::fill(&mut bytes).map_err(|err| io::Error::other(err.to_string()))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
#[allow(clippy::disallowed_methods, reason = "a test starts a short-lived process of its own")]
mod tests {
    use super::*;

    /// A scratch directory (mode 0700, ours) removed when dropped.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(name: &str) -> Scratch {
            let dir = std::env::temp_dir().join(format!(
                "shellkeep-pfs-{name}-{}-{}",
                std::process::id(),
                random_hex(4).expect("random")
            ));
            create_private_dir(&dir).expect("scratch");
            Scratch(dir)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path).expect("stat").mode() & 0o7777
    }

    fn chown(path: &Path, uid: u32) {
        std::os::unix::fs::lchown(path, Some(uid), Some(uid)).expect("chown");
    }

    /// Another user, when we can make files look like theirs (as root).
    fn other_uid() -> Option<u32> {
        (euid() == 0).then_some(65534)
    }

    #[test]
    fn new_directories_are_0700_and_never_reused() {
        let scratch = Scratch::new("dir");
        let dir = scratch.0.join("d");
        create_private_dir(&dir).expect("created");
        assert_eq!(mode(&dir), 0o700);
        let err = create_private_dir(&dir).expect_err("exists");
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        let link = scratch.0.join("link");
        std::os::unix::fs::symlink(&dir, &link).expect("symlink");
        assert!(create_private_dir(&link).is_err(), "a symlink is never adopted");
    }

    #[test]
    fn ensure_creates_parents_and_rejects_what_is_not_ours() {
        let scratch = Scratch::new("ensure");
        let deep = scratch.0.join("a/b/c");
        ensure_private_dir(&deep).expect("created with parents");
        for dir in [scratch.0.join("a"), scratch.0.join("a/b"), deep.clone()] {
            assert_eq!(mode(&dir), 0o700, "{}", dir.display());
        }
        ensure_private_dir(&deep).expect("ours: reused");

        let open = scratch.0.join("open");
        std::fs::create_dir(&open).expect("mkdir");
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let err = ensure_private_dir(&open).expect_err("mode 777");
        assert!(err.to_string().contains("mode 777"), "{err}");
        assert_eq!(mode(&open), 0o777, "never chmod-ed");

        let victim = scratch.0.join("victim");
        std::fs::create_dir(&victim).expect("mkdir");
        let link = scratch.0.join("link");
        std::os::unix::fs::symlink(&victim, &link).expect("symlink");
        let err = ensure_private_dir(&link).expect_err("symlink");
        assert!(err.to_string().contains("symlink"), "{err}");

        if let Some(other) = other_uid() {
            let theirs = scratch.0.join("theirs");
            create_private_dir(&theirs).expect("mkdir");
            chown(&theirs, other);
            let err = ensure_private_dir(&theirs).expect_err("someone else's");
            assert!(err.to_string().contains("owned by uid 65534"), "{err}");
            // Below a directory another user can write to, nothing is made.
            let shared = scratch.0.join("shared");
            std::fs::create_dir(&shared).expect("mkdir");
            std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777))
                .expect("chmod");
            let err = ensure_private_dir(&shared.join("x")).expect_err("unsafe parent");
            assert!(err.to_string().contains("replace what is below"), "{err}");
            assert!(!shared.join("x").exists());
        }
    }

    #[test]
    fn sticky_world_writable_parents_are_safe() {
        check_safe_ancestors(&std::env::temp_dir()).expect("/tmp is sticky");
    }

    #[test]
    fn new_files_are_0600_and_never_follow_symlinks() {
        let scratch = Scratch::new("files");
        let path = scratch.0.join("f");
        create_new_file(&path).expect("new").write_all(b"x").expect("write");
        assert_eq!(mode(&path), 0o600);
        assert!(create_new_file(&path).is_err(), "exists");

        let victim = scratch.0.join("victim");
        std::fs::write(&victim, "precious").expect("write");
        let link = scratch.0.join("link");
        std::os::unix::fs::symlink(&victim, &link).expect("symlink");
        assert!(create_new_file(&link).is_err());
        assert!(rewrite_file(&link, b"evil").is_err());
        assert!(read_private_file(&link, 100).is_err());
        let dangling = scratch.0.join("dangling");
        std::os::unix::fs::symlink(scratch.0.join("nowhere"), &dangling).expect("symlink");
        assert!(create_new_file(&dangling).is_err());
        assert!(rewrite_file(&dangling, b"evil").is_err());
        assert!(!scratch.0.join("nowhere").exists(), "nothing created through a symlink");
        assert_eq!(std::fs::read_to_string(&victim).expect("read"), "precious");
    }

    #[test]
    fn rewritten_files_must_be_our_own_single_regular_files() {
        let scratch = Scratch::new("rewrite");
        let path = scratch.0.join("cmd");
        rewrite_file(&path, b"first command").expect("created");
        rewrite_file(&path, b"second").expect("rewritten");
        assert_eq!(read_private_file(&path, 100).expect("read"), b"second");
        assert_eq!(read_private_file(&path, 3).expect("read"), b"sec", "bounded");
        assert_eq!(mode(&path), 0o600);

        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).expect("chmod");
        rewrite_file(&path, b"third").expect("rewritten");
        assert_eq!(mode(&path), 0o600, "made private again");
        // Longer, shorter and empty contents replace what was there whole.
        for contents in [&b"a command longer than any before"[..], b"short", b"", b"again"] {
            rewrite_file(&path, contents).expect("rewritten");
            assert_eq!(read_private_file(&path, 100).expect("read"), contents);
        }

        let victim = scratch.0.join("victim");
        std::fs::write(&victim, "precious").expect("write");
        let hard = scratch.0.join("hard");
        std::fs::hard_link(&victim, &hard).expect("hard link");
        let err = rewrite_file(&hard, b"evil").expect_err("hard link");
        assert!(err.to_string().contains("hard links"), "{err}");
        assert_eq!(std::fs::read_to_string(&victim).expect("read"), "precious");

        let fifo = scratch.0.join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600))
            .expect("mkfifo");
        assert!(rewrite_file(&fifo, b"x").is_err(), "a FIFO neither blocks nor is used");

        if let Some(other) = other_uid() {
            let theirs = scratch.0.join("theirs");
            std::fs::write(&theirs, "theirs").expect("write");
            chown(&theirs, other);
            let err = rewrite_file(&theirs, b"evil").expect_err("someone else's");
            assert!(err.to_string().contains("not owned by us"), "{err}");
            assert_eq!(std::fs::read_to_string(&theirs).expect("read"), "theirs");
        }
    }

    #[test]
    fn the_runtime_base_is_private_or_fresh() {
        let scratch = Scratch::new("base");
        let tmp = scratch.0.join("tmp");
        std::fs::create_dir(&tmp).expect("mkdir");
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o1777)).expect("chmod");
        let usual = tmp.join(format!("shellkeep-{}", euid()));

        let (base, notice) = runtime_base(None, &tmp).expect("base");
        assert_eq!((base.as_path(), notice), (usual.as_path(), None));
        let (again, _) = runtime_base(None, &tmp).expect("base");
        assert_eq!(again, usual, "our own base is reused");

        let xdg = scratch.0.join("xdg");
        create_private_dir(&xdg).expect("mkdir");
        let (base, _) = runtime_base(Some(&xdg), &tmp).expect("base");
        assert_eq!(base, xdg.join("shellkeep"));
        let (base, _) = runtime_base(Some(Path::new("relative")), &tmp).expect("base");
        assert_eq!(base, usual, "a relative XDG_RUNTIME_DIR is ignored");

        // Someone made the usual name open to all: never used, nor changed.
        std::fs::remove_dir(&usual).expect("rmdir");
        std::fs::create_dir(&usual).expect("mkdir");
        std::fs::set_permissions(&usual, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let (base, notice) = runtime_base(None, &tmp).expect("base");
        assert_ne!(base, usual);
        assert!(
            base.file_name()
                .expect("name")
                .to_string_lossy()
                .starts_with(&format!("shellkeep-{}-", euid()))
        );
        assert_eq!(mode(&base), 0o700);
        assert!(notice.expect("a notice").contains("mode 777"));
        assert_eq!(mode(&usual), 0o777);
        assert_eq!(std::fs::read_dir(&usual).expect("list").count(), 0, "nothing written there");
    }

    /// Issue 11, F14: a missing, relative, non-directory or unsafe
    /// `TMPDIR` is replaced by `/tmp`, with a notice that says why.
    #[test]
    fn an_unusable_temp_dir_falls_back_to_tmp() {
        let scratch = Scratch::new("tmpdir");
        let file = scratch.0.join("file");
        std::fs::write(&file, "x").expect("write");
        let open = scratch.0.join("open");
        std::fs::create_dir(&open).expect("mkdir");
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let cases = [
            (scratch.0.join("missing"), "cannot be used"),
            (PathBuf::from("relative/tmp"), "not an absolute path"),
            (file, "not a directory"),
            (open.clone(), "replace what is below"),
        ];
        for (temp_dir, why) in cases {
            let (used, notice) = usable_temp_dir(&temp_dir);
            assert_eq!(used, Path::new("/tmp"), "{}", temp_dir.display());
            let notice = notice.expect("a notice");
            assert!(notice.contains(why) && notice.contains("using /tmp"), "{notice}");
            let (base, notice) = runtime_base(None, &temp_dir).expect("a base");
            assert!(base.starts_with("/tmp"), "{}", base.display());
            assert!(notice.is_some_and(|n| n.contains("TMPDIR")));
        }
        assert!(!scratch.0.join("missing").exists(), "nothing is made where TMPDIR pointed");
        assert_eq!(std::fs::read_dir(&open).expect("list").count(), 0);
        let good = scratch.0.join("good");
        create_private_dir(&good).expect("mkdir");
        assert_eq!(usable_temp_dir(&good), (good.clone(), None));
        assert_eq!(usable_temp_dir(Path::new("/tmp")), (PathBuf::from("/tmp"), None));
        assert_eq!(usable_temp_dir(Path::new("")), (PathBuf::from("/tmp"), None));
    }

    #[test]
    fn server_dir_names_say_who_owns_them() {
        assert_eq!(
            ServerDirName::parse("123-456-0a1b2c3d"),
            Some(ServerDirName { pid: 123, start: Some(456) })
        );
        assert_eq!(
            ServerDirName::parse("123-0a1b2c3d"),
            Some(ServerDirName { pid: 123, start: None })
        );
        for bad in
            ["output", "123", "x-1-ab", "1-2-zz", "1-2-3-4", "shell-ab", "1-2-abcd", "1-2-0A1B2C3D"]
        {
            assert_eq!(ServerDirName::parse(bad), None, "{bad}");
        }
        let me = std::process::id();
        let start = start_ticks(me).expect("our start time");
        assert!(ServerDirName { pid: me, start: Some(start) }.alive());
        assert!(!ServerDirName { pid: me, start: Some(start + 1) }.alive(), "pid reused");
        assert!(ServerDirName { pid: me, start: None }.alive());
    }

    #[test]
    fn dead_servers_dirs_are_removed_and_nothing_else() {
        let scratch = Scratch::new("dead");
        let tmp = scratch.0.clone();
        let (base, _) = runtime_base(None, &tmp).expect("base");
        let mine = create_server_dir(&base).expect("server dir");
        std::fs::write(mine.join("cmd"), "secret").expect("write");
        // A finished process: its pid is free (or reused, with another
        // start time).
        let mut child = std::process::Command::new("true").spawn().expect("spawn");
        let dead_pid = child.id();
        child.wait().expect("wait");
        let dead = base.join(format!("{dead_pid}-1-abcd0123"));
        create_private_dir(&dead).expect("mkdir");
        std::fs::write(dead.join("cmd"), "secret").expect("write");
        let unrelated = base.join("notes");
        create_private_dir(&unrelated).expect("mkdir");
        // Named almost as a server names its directory: not ours.
        let lookalike = base.join(format!("{dead_pid}-1-abcd"));
        create_private_dir(&lookalike).expect("mkdir");
        let backup = tmp.join(format!("shellkeep-{}-backup", euid()));
        create_private_dir(&backup).expect("mkdir");
        let in_backup = backup.join(format!("{dead_pid}-2-ef012345"));
        create_private_dir(&in_backup).expect("mkdir");
        let fallback = tmp.join(format!("shellkeep-{}-0123456789abcdef", euid()));
        create_private_dir(&fallback).expect("mkdir");
        let dead_in_fallback = fallback.join(format!("{dead_pid}-2-ef012345"));
        create_private_dir(&dead_in_fallback).expect("mkdir");
        let theirs = base.join(format!("{dead_pid}-3-cd012345"));
        if let Some(other) = other_uid() {
            create_private_dir(&theirs).expect("mkdir");
            chown(&theirs, other);
        }

        let removed = remove_dead_server_dirs(&base, &tmp);
        assert!(!dead.exists() && !dead_in_fallback.exists() && !fallback.exists(), "{removed:?}");
        assert!(mine.join("cmd").exists(), "a live server's directory is kept");
        assert!(unrelated.exists() && lookalike.exists() && in_backup.exists(), "{removed:?}");
        if other_uid().is_some() {
            assert!(theirs.exists(), "another user's directory is not touched");
        }
    }
}
