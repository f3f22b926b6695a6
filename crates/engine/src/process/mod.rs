//! Building child processes, signalling them, and containing what they
//! start: the only module that builds a child `Command`, holds `unsafe`
//! (in `spawn`, and in `namespace` between fork and exec), and sends
//! signals (`cgroup` only SIGKILLs the members of a frozen group).
//!
//! Not here: sessions, policies, MCP.
//!
//! Invariant: every child we start gets the same non-interactive
//! environment, default signal dispositions and an empty signal mask, its
//! own process group (a PTY shell: its own session), a parent-death signal
//! (but the orphan guard, which exists to outlive the server), a scope
//! marker, and in a cgroup mode its owner's control group, joined before
//! exec; and a stop reaches everything an owner started, as far as
//! [`Targets`] documents.

mod child_env;
mod children;
mod namespace;
pub(crate) mod proc_scan;
mod scope;
mod spawn;
mod terminate;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use self::spawn::{become_subreaper, prove_cgroup};
use crate::cgroup;

pub use self::children::spawn_std;
pub(crate) use self::namespace::{pid_inside, shell_of as namespaced_shell};
#[cfg(test)]
pub(crate) use self::proc_scan::session_groups;
pub use self::proc_scan::{Root, command_line};
pub(crate) use self::proc_scan::{
    boot_ticks_now, live_group_members, live_session_members, session_tree, start_ticks,
};
pub(crate) use self::scope::{ChildRules, Mark, Scope};
pub use self::scope::{SCOPE_VAR, server_token};
pub(crate) use self::spawn::{
    dup_at_least, group_command, group_command_with_fds, guard_command,
    ignore_interrupt_and_hangup, parent_death_wakeup, pty_command, seccomp_filters_available,
    spawn,
};
pub use self::spawn::{
    guard_channel_from_stdin, landlock_abi, peer_credentials, seccomp_status, terminal_size,
};
pub use self::terminate::{Targets, TerminationMode, terminate};
pub(crate) use self::terminate::{
    command_targets, kill_now, signal_group, stop_then_kill, terminate_session,
};

/// Makes this process a child subreaper, so that orphans of everything it
/// started stay its descendants, and reaps those orphans (zombies that are
/// children of ours but were not started by [`spawn()`]) every time a child
/// changes state. Each time, `adopted` is given the live orphans that only
/// their ancestry ties to us (see `children::reap_and_list`), for the
/// orphan guard. Runs until the task is dropped; only the server calls it.
pub async fn reap_adopted_orphans(mut adopted: impl FnMut(&[Root])) -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut children = signal(SignalKind::child())?;
    become_subreaper()?;
    loop {
        let (_, orphans) = children::reap_and_list();
        adopted(&orphans);
        if children.recv().await.is_none() {
            return Ok(());
        }
    }
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

/// Ends this server's containment: kills everything left in its control
/// group directory and removes the directory (nothing in markers mode),
/// then its directories in the hierarchies used only for limits.
pub fn end_containment() {
    if let Some(dir) = cgroup::server_dir()
        && let Err(err) = cgroup::kill_tree(dir)
    {
        tracing::warn!("{err}");
    }
    crate::limits::end();
}

/// Whether process `pid` is one of this server's own: a descendant of the
/// server (zombies included, so a `kill` that has just exited still counts;
/// orphans stay descendants, the server being a subreaper), a process that
/// carries the server's token, or a member of its control groups. For
/// telling a stop signal from a command apart from a person's. The server
/// itself is not its own. One bounded scan of `/proc`.
pub fn is_ours(pid: i32) -> bool {
    let me = std::process::id() as i32;
    if pid <= 1 || pid == me {
        return false;
    }
    proc_scan::descends_from(pid, me)
        || Targets::whole_server(&[]).members().contains(&pid)
        || cgroup::server_dir().is_some_and(|dir| cgroup::members(dir).contains(&pid))
}

/// Ends every process that carries the scope marker of a server of this
/// user that is gone (killed with its guard, say: nothing else is left to
/// stop them), with no grace, as the guard would have ([`stop_then_kill`]);
/// returns how many it found. Markers of live servers, of another pid
/// namespace or of another shape are left alone. One scan of `/proc`, then
/// the stop; blocking. Every start and `doctor` run it.
pub fn sweep_dead_servers() -> usize {
    let mut tokens = std::collections::BTreeSet::new();
    let me = crate::private_fs::euid();
    proc_scan::for_each_proc(|stat| {
        if let Ok(environ) = std::fs::read(format!("/proc/{}/environ", stat.pid)) {
            let dead = scope::dead_server_tokens(&environ);
            // Only our user's servers: root reads everyone's environment.
            if !dead.is_empty() && proc_scan::real_uid(stat.pid) == Some(me) {
                tokens.extend(dead);
            }
        }
    });
    if tokens.is_empty() {
        return 0;
    }
    let targets =
        Targets { marks: tokens.into_iter().map(Mark::Token).collect(), ..Targets::default() };
    let found = targets.members().len();
    if found > 0 {
        tracing::warn!("stopping {found} processes left by servers that are gone");
        stop_then_kill(&targets);
    }
    found
}

/// The exit code a shell would report for `status`: the code, or 128+N for
/// signal N; -1 if it has neither.
pub(crate) fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt as _;
    status.code().or_else(|| status.signal().map(|n| 128 + n)).unwrap_or(-1)
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

/// Whether this host gives a confined owner a PID namespace of its own,
/// or why not (in words for `doctor` and the sandbox's `missing`). Proved
/// once per process by starting `cat /proc/self/stat` in one: it must say
/// it is pid 2, read from the private `/proc`.
pub(crate) fn namespace_probe() -> Result<(), String> {
    static PROBED: OnceLock<Result<(), String>> = OnceLock::new();
    PROBED.get_or_init(spawn::prove_namespace).clone()
}

#[cfg(test)]
mod tests {
    use super::child_env::noninteractive_env;

    /// git's editor comes after the configuration entries the server's own
    /// environment gives git, which stay.
    #[test]
    fn the_git_editor_is_added_after_inherited_configuration() {
        let tail = |env: Vec<(String, String)>| -> Vec<String> {
            env.iter()
                .filter(|(name, _)| name.starts_with("GIT_CONFIG"))
                .map(|(n, v)| format!("{n}={v}"))
                .collect()
        };
        let fresh = [
            "GIT_CONFIG_COUNT=2",
            "GIT_CONFIG_KEY_0=core.editor",
            "GIT_CONFIG_VALUE_0=true",
            "GIT_CONFIG_KEY_1=core.pager",
            "GIT_CONFIG_VALUE_1=cat",
        ];
        assert_eq!(tail(noninteractive_env(None)), fresh);
        assert_eq!(tail(noninteractive_env(Some("bogus"))), fresh);
        assert_eq!(
            tail(noninteractive_env(Some("2"))),
            [
                "GIT_CONFIG_COUNT=4",
                "GIT_CONFIG_KEY_2=core.editor",
                "GIT_CONFIG_VALUE_2=true",
                "GIT_CONFIG_KEY_3=core.pager",
                "GIT_CONFIG_VALUE_3=cat",
            ]
        );
        // Nothing set outranks a way to ask for an editor or a pager.
        for name in ["GIT_EDITOR", "GIT_PAGER", "MANPAGER"] {
            assert!(noninteractive_env(None).iter().all(|(set, _)| set != name), "{name}");
        }
    }
}
