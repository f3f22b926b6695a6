//! Recognising a shell from `/proc`: whether the program blocked reading
//! the terminal is an interactive bash that sits at its prompt without our
//! integration (after `exec bash`, a nested `bash`, a `nix-shell`), another
//! shell, a remote session or a program that only calls itself bash; and the
//! small `/proc` readings that go with it (a process's parent, children,
//! command line, terminal and the fingerprint of its program image).
//!
//! A shell that lost the integration is recognised from `/proc`: the
//! terminal's foreground group is led by an interactive bash (no script,
//! no `-c`) that is blocked reading the terminal, runs the very program
//! the session's shell runs (`/proc/PID/exe`, by device and inode: a
//! program that merely calls itself `bash` in its `argv[0]` is only named),
//! and is not one of the shells we installed the integration in (a shell is
//! identified by its pid and its auxiliary vector, which changes on
//! `exec`). Other shells (`sh`, `zsh`) and remote shells (`ssh`, `docker
//! exec`) are only named. This module only reads `/proc`: it starts
//! nothing, types nothing into the terminal and keeps no session state
//! (the levels of nested shells are `session::levels`).

use std::path::Path;

/// What a program blocked reading the terminal turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prompting {
    /// An interactive bash: the integration can be installed in it.
    Bash {
        /// Its pid.
        pid: i32,
        /// Its identity (see [`fingerprint`]).
        fingerprint: u64,
    },
    /// An interactive shell that is not bash (`sh`, `dash`, `zsh`, ...).
    OtherShell(String),
    /// A remote or container shell (`ssh`, `docker`, `kubectl`, ...).
    Remote(String),
    /// A program whose `argv[0]` says bash but that does not run the
    /// session's bash (its command line): only named, never typed into.
    NamedBash(String),
}

/// A program file, by device and inode.
pub type ProgramId = (u64, u64);

/// The program file at `path` (symbolic links followed).
pub fn program_id(path: &Path) -> Option<ProgramId> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|meta| (meta.dev(), meta.ino()))
}

/// The program process `pid` runs.
pub fn running_program(pid: i32) -> Option<ProgramId> {
    program_id(Path::new(&format!("/proc/{pid}/exe")))
}

/// The parent of process `pid`, from `/proc/PID/stat`.
pub fn parent(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields follow the
    // last `)`.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_ascii_whitespace().nth(1)?.parse().ok()
}

/// The controlling terminal of process `pid` (its device number) and
/// that terminal's foreground process group, from `/proc/PID/stat`.
pub fn terminal_foreground(pid: i32) -> Option<(u64, i32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    // After the name: state ppid pgrp session tty_nr tpgid ...
    let fields: Vec<&str> = rest.split_ascii_whitespace().take(6).collect();
    Some((fields.get(4)?.parse().ok()?, fields.get(5)?.parse().ok()?))
}

/// Process `pid`'s command line for a reply: its arguments joined by
/// spaces, at most 200 characters; its name when that is all we can read.
pub fn command_line(pid: i32) -> String {
    let args = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let mut line: String = args
        .split(|&b| b == 0)
        .filter(|arg| !arg.is_empty())
        .map(String::from_utf8_lossy)
        .collect::<Vec<_>>()
        .join(" ");
    if line.is_empty() {
        line = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        line = line.trim().to_owned();
    }
    if line.chars().count() > 200 {
        line = line.chars().take(200).collect::<String>() + "…";
    }
    line
}

/// A number that changes when process `pid` calls `exec`: a hash of its
/// auxiliary vector, which holds the addresses of the new program's stack
/// and entry point (different on every exec under address randomisation,
/// and different for another program or argument list without it).
pub fn fingerprint(pid: i32) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let bytes = std::fs::read(format!("/proc/{pid}/auxv")).ok()?;
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut hasher);
    std::fs::read(format!("/proc/{pid}/cmdline")).ok()?.hash(&mut hasher);
    Some(hasher.finish())
}

/// Looks at the leader of the terminal's foreground group `group`, which
/// the caller found blocked reading the terminal: is it a shell at its
/// prompt, and which kind? `None` for any other program. Only a process
/// running `bash` (the program the session's shell runs) counts as bash.
pub fn inspect(group: i32, bash: Option<ProgramId>) -> Option<Prompting> {
    let cmdline = std::fs::read(format!("/proc/{group}/cmdline")).ok()?;
    let args: Vec<String> = cmdline
        .split(|&b| b == 0)
        .filter(|arg| !arg.is_empty())
        .map(|arg| String::from_utf8_lossy(arg).into_owned())
        .collect();
    let program = args.first()?;
    let name = program.rsplit('/').next().unwrap_or(program).trim_start_matches('-');
    match name {
        // A shell of another user (`su someone`) could not read our script.
        "bash" if interactive(&args[1..]) && !same_user(group) => {
            Some(Prompting::OtherShell("bash of another user".to_owned()))
        }
        "bash" if interactive(&args[1..]) && (bash.is_none() || running_program(group) != bash) => {
            Some(Prompting::NamedBash(command_line(group)))
        }
        "bash" if interactive(&args[1..]) => {
            Some(Prompting::Bash { pid: group, fingerprint: fingerprint(group)? })
        }
        "sh" | "dash" | "zsh" | "ksh" | "mksh" | "fish" | "tcsh" | "csh" | "ash" | "busybox"
            if interactive(&args[1..]) =>
        {
            Some(Prompting::OtherShell(name.to_owned()))
        }
        "ssh" | "mosh" | "mosh-client" | "telnet" | "docker" | "podman" | "kubectl" | "lxc"
        | "machinectl" | "vagrant" => Some(Prompting::Remote(name.to_owned())),
        _ => None,
    }
}

/// Programs that run an interactive shell on a terminal of their own and
/// pass ours through (`poetry shell` and `pipenv shell` use pexpect).
/// `sudo` runs its command on a terminal of its own too (`use_pty`).
const WRAPPERS: &[&str] =
    &["script", "poetry", "pipenv", "hatch", "pdm", "pew", "sudo", "su", "doas", "runuser"];

/// When the foreground group's leader `group` is a program that runs a
/// shell on a terminal of its own (`WRAPPERS`), finds that shell if it is
/// an interactive bash of ours waiting at its prompt. Lines typed into our
/// terminal reach it through the wrapper, and its markers come back the
/// same way. Looks only at those programs and Python, and only at their
/// descendants.
pub fn wrapped_shell(group: i32, bash: Option<ProgramId>) -> Option<Prompting> {
    let comm = std::fs::read_to_string(format!("/proc/{group}/comm")).ok()?;
    let comm = comm.trim();
    // Python covers `pty.spawn("bash")` and pexpect run as `python -m`.
    if !WRAPPERS.contains(&comm) && !comm.starts_with("python") {
        return None;
    }
    // Breadth first from the wrapper, a few levels deep at most.
    let mut frontier = vec![group];
    for _ in 0..4 {
        let children: Vec<i32> = frontier.iter().flat_map(|&pid| children(pid)).collect();
        for &pid in &children {
            let Ok(tty) = std::fs::read_link(format!("/proc/{pid}/fd/0")) else { continue };
            if tty.starts_with("/dev/pts")
                && crate::input_wait::process_reads_terminal(pid, &tty)
                && let Some(found @ Prompting::Bash { .. }) = inspect(pid, bash)
            {
                return Some(found);
            }
        }
        if children.is_empty() {
            break;
        }
        frontier = children;
    }
    None
}

/// The children of `pid`, from `/proc/<pid>/task/*/children` (a few small
/// reads; no scan of every process).
pub fn children(pid: i32) -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|text| {
            text.split_ascii_whitespace().filter_map(|p| p.parse().ok()).collect::<Vec<i32>>()
        })
        .collect()
}

/// Whether process `pid` runs with our effective user id (root may read
/// our files whatever it is, so `sudo -i` counts as the same user).
fn same_user(pid: i32) -> bool {
    let effective_uid = |who: &str| {
        let status = std::fs::read_to_string(format!("/proc/{who}/status")).ok()?;
        status
            .lines()
            .find_map(|line| line.strip_prefix("Uid:"))
            .and_then(|ids| ids.split_ascii_whitespace().nth(1))
            .and_then(|id| id.parse::<u32>().ok())
    };
    match (effective_uid(&pid.to_string()), effective_uid("self")) {
        (Some(theirs), Some(ours)) => theirs == ours || theirs == 0,
        _ => false,
    }
}

/// Whether a shell with these arguments reads commands from the terminal:
/// no `-c`, and no script operand.
fn interactive(args: &[String]) -> bool {
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-c" => return false,
            "--rcfile" | "--init-file" | "-O" | "+O" | "-o" | "+o" => {
                args.next();
            }
            "-i" | "-s" => return true,
            "--" => return args.next().is_none(),
            flag if flag.starts_with('-') || flag.starts_with('+') => {
                // Combined short options: `-ic` still means a command.
                if !flag.starts_with("--") && flag.contains('c') {
                    return false;
                }
            }
            _ => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|&a| a.to_owned()).collect()
    }

    #[test]
    fn interactive_shells_are_told_from_scripts() {
        assert!(interactive(&strings(&[])));
        assert!(interactive(&strings(&["-l"])));
        assert!(interactive(&strings(&["--rcfile", "/tmp/rc", "-i"])));
        assert!(interactive(&strings(&["--norc", "--noprofile"])));
        assert!(!interactive(&strings(&["-c", "read x"])));
        assert!(!interactive(&strings(&["-ec", "read x"])));
        assert!(!interactive(&strings(&["script.sh"])));
        assert!(!interactive(&strings(&["-x", "script.sh", "arg"])));
    }
}
