//! The runtime directories: the per-user base (`$XDG_RUNTIME_DIR/shellkeep`
//! or a private directory in the temporary directory), one directory per
//! server named `<pid>-<start>-<random>`, and the removal of those whose
//! server is dead.
//!
//! Not here: how a directory is created and checked (`private_fs`, which
//! this module calls) or what goes into it.
//!
//! Invariant: a directory is removed only when it is ours and its name
//! proves its server dead (its pid gone, or running with another start
//! time); the start times come from `/proc` (`process::proc_scan`).

use std::io;
use std::path::{Path, PathBuf};

use crate::private_fs::{
    check_private_dir, check_safe_ancestors, create_private_dir, ensure_private_dir, euid,
    usable_temp_dir,
};
use crate::process::proc_scan;
use crate::random::random_hex;

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
/// it does not exist. A pid with the start time a server recorded is that
/// server, still running.
pub fn start_ticks(pid: u32) -> Option<u64> {
    proc_scan::start_ticks(i32::try_from(pid).ok()?)
}

#[cfg(test)]
#[allow(clippy::disallowed_methods, reason = "a test starts a short-lived process of its own")]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;
    use crate::private_fs::tests::{Scratch, chown, mode, other_uid};

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
