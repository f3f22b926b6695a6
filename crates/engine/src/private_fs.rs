//! Private files and directories: the only way shellkeep creates anything on
//! disk, so that no other user of the machine can read, replace or redirect
//! what we write. Not here: what goes into the files, or where the runtime
//! directories are and when they go (`runtime_dir`). A leaf: it names no
//! module of ours but `random`.
//!
//! Invariant, held by every writer calling this module:
//! - a directory we create is new (`mkdir` mode 0700); one we reuse is a
//!   real directory of ours, closed to others, under ancestors only we or
//!   root can write (or sticky, like `/tmp`);
//! - a file we create is new (`O_CREAT | O_EXCL | O_NOFOLLOW`, mode 0600);
//!   one we rewrite is a regular file of ours with a single link;
//! - what a shell of ours must read and nobody may change is a sealed
//!   memory file ([`sealed_memfd`]), not a file.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

/// Random names for what we create; here too for the modules that name
/// their files with it.
pub use crate::random::random_hex;

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
pub(crate) fn check_safe_ancestors(dir: &Path) -> io::Result<()> {
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
pub(crate) fn create_new_file(path: &Path) -> io::Result<File> {
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
pub(crate) fn sealed_memfd(name: &str, contents: &[u8]) -> io::Result<std::os::fd::OwnedFd> {
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
pub(crate) const DEFAULT_TEMP_DIR: &str = "/tmp";

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

#[cfg(test)]
#[allow(clippy::disallowed_methods, reason = "a test starts a short-lived process of its own")]
pub(crate) mod tests {
    use super::*;

    /// A scratch directory (mode 0700, ours) removed when dropped.
    pub(crate) struct Scratch(pub(crate) PathBuf);

    impl Scratch {
        pub(crate) fn new(name: &str) -> Scratch {
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

    pub(crate) fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path).expect("stat").mode() & 0o7777
    }

    pub(crate) fn chown(path: &Path, uid: u32) {
        std::os::unix::fs::lchown(path, Some(uid), Some(uid)).expect("chown");
    }

    /// Another user, when we can make files look like theirs (as root).
    pub(crate) fn other_uid() -> Option<u32> {
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
        let dangling = scratch.0.join("dangling");
        std::os::unix::fs::symlink(scratch.0.join("nowhere"), &dangling).expect("symlink");
        assert!(create_new_file(&dangling).is_err());
        assert!(!scratch.0.join("nowhere").exists(), "nothing created through a symlink");
        assert_eq!(std::fs::read_to_string(&victim).expect("read"), "precious");
    }
}
