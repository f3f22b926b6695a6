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
//! exec`) are only named.
//!
//! Such a bash is given the integration (and its records believed) only
//! when it is the foreground job of the command typed into our shell
//! ([`typed_shell`]): a child of that shell started after the command
//! began and its only live child started since, reached from the bash
//! through wrappers the command names (`su`, `script`, `python -c`). A
//! bash that a command's program starts (a build script's `bash -i`, which
//! takes the terminal for itself), or that an earlier command left in the
//! background and something handed the terminal, is only named. What a
//! process looks like is never proof of who started it: this is the
//! process tree and start times the kernel keeps, held against what the
//! command typed.
//!
//! This module only reads `/proc`: it starts nothing, types nothing into
//! the terminal and keeps no session state (the levels of nested shells
//! are `session::levels`).

use std::path::Path;

/// What a program blocked reading the terminal turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Prompting {
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
pub(crate) type ProgramId = (u64, u64);

/// The program file at `path` (symbolic links followed).
pub(crate) fn program_id(path: &Path) -> Option<ProgramId> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|meta| (meta.dev(), meta.ino()))
}

/// The program process `pid` runs.
pub(crate) fn running_program(pid: i32) -> Option<ProgramId> {
    program_id(Path::new(&format!("/proc/{pid}/exe")))
}

/// The parent of process `pid`, from `/proc/PID/stat`.
pub(crate) fn parent(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields follow the
    // last `)`.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_ascii_whitespace().nth(1)?.parse().ok()
}

/// The controlling terminal of process `pid` (its device number) and
/// that terminal's foreground process group, from `/proc/PID/stat`.
pub(crate) fn terminal_foreground(pid: i32) -> Option<(u64, i32)> {
    let stat = crate::small_file::read(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    // After the name: state ppid pgrp session tty_nr tpgid ...
    let fields: Vec<&str> = rest.split_ascii_whitespace().take(6).collect();
    Some((fields.get(4)?.parse().ok()?, fields.get(5)?.parse().ok()?))
}

/// Process `pid`'s command line for a reply: its arguments joined by
/// spaces, at most 200 characters; its name when that is all we can read.
pub(crate) fn command_line(pid: i32) -> String {
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
pub(crate) fn fingerprint(pid: i32) -> Option<u64> {
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
pub(crate) fn inspect(group: i32, bash: Option<ProgramId>) -> Option<Prompting> {
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

/// Whether the interactive bash `pid`, found at its prompt, is the
/// foreground job of the command `typed` into `shell` (the innermost
/// shell with the integration), which began at `since` (clock ticks since
/// boot, as `/proc/PID/stat` counts them):
/// - `shell` itself, replaced by `exec bash` (only the shell runs `exec`);
/// - else every process between the bash and `shell` is a wrapper the
///   command names (`WRAPPERS`, as a word of `typed`; Python only with a
///   program typed inline, `-c`, or a module, `-m`) or the `sh -c` such a
///   wrapper runs its command through, and the child of
///   `shell` they lead to (the bash itself, or the outermost wrapper) was
///   started once the command began and is the only live child of `shell`
///   started since. A program of the command that starts a bash (a build
///   script's `bash -i`, which takes the terminal for itself) is no
///   wrapper the command names; a bash an earlier command left in the
///   background started before; and a bash a program made a child of the
///   shell (`clone` with `CLONE_PARENT`) has that program, the command's
///   own job, alive beside it as another child of the shell.
///
/// What this reads is the process tree and the start times the kernel
/// keeps; a process's name only has to match what the command typed.
/// `Err` names the program that started the bash (or the bash itself, one
/// left in the background), by its command line.
pub(crate) fn typed_shell(pid: i32, shell: i32, since: u64, typed: &str) -> Result<(), String> {
    if pid == shell {
        return Ok(());
    }
    let mut job = pid;
    for _ in 0..WRAPPER_DEPTH {
        match parent(job) {
            Some(up) if up == shell => {
                let started = crate::process::start_ticks(job).is_some_and(|at| at >= since);
                let alone = children(shell)
                    .into_iter()
                    .filter(|&child| !zombie(child))
                    .filter(|&child| {
                        crate::process::start_ticks(child).is_some_and(|at| at >= since)
                    })
                    .all(|child| child == job);
                return match (started, alone) {
                    (true, true) => Ok(()),
                    (false, _) => Err(command_line(job)),
                    (true, false) => Err(command_line(shell_child_other_than(shell, job, since))),
                };
            }
            Some(up) if named_wrapper(up, typed) => job = up,
            Some(up) if runs_for_wrapper(up, typed) => job = up,
            Some(up) => return Err(command_line(up)),
            None => return Err(command_line(job)),
        }
    }
    Err(command_line(job))
}

/// Wrappers between a bash and the shell followed at most.
const WRAPPER_DEPTH: usize = 4;

/// A live child of `shell` started at `since` or later, other than `job`
/// (the command's own job beside a bash made the shell's child).
fn shell_child_other_than(shell: i32, job: i32, since: u64) -> i32 {
    children(shell)
        .into_iter()
        .filter(|&child| child != job && !zombie(child))
        .find(|&child| crate::process::start_ticks(child).is_some_and(|at| at >= since))
        .unwrap_or(job)
}

/// Whether process `pid` is the shell a named wrapper runs its command
/// through (`script -c bash` starts `$SHELL -c bash`, and where `SHELL` is
/// unset or `sh`, dash does not replace itself with the bash): a POSIX
/// shell given `-c` whose parent is a wrapper the command `typed` names.
fn runs_for_wrapper(pid: i32, typed: &str) -> bool {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    let args = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let given_c = args.split(|&b| b == 0).nth(1) == Some(b"-c".as_slice());
    matches!(comm.trim(), "sh" | "dash" | "bash")
        && given_c
        && parent(pid).is_some_and(|up| named_wrapper(up, typed))
}

/// Whether process `pid` has exited and waits to be reaped.
fn zombie(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return true };
    stat.rfind(')').and_then(|end| stat[end + 1..].split_ascii_whitespace().next()) == Some("Z")
}

/// Whether process `pid` is a wrapper that runs a shell (`WRAPPERS`, or
/// Python) and the command `typed` names it: its name as a word (a path's
/// last part), and for Python also `-c` or `-m` (a program typed inline
/// or a module run as a tool, not a script file).
fn named_wrapper(pid: i32, typed: &str) -> bool {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    let name = comm.trim();
    let words: Vec<&str> = typed
        .split(|c: char| c.is_whitespace() || ";|&()<>'\"`".contains(c))
        .filter(|word| !word.is_empty())
        .collect();
    let named = |wanted: &dyn Fn(&str) -> bool| {
        words.iter().any(|word| wanted(word.rsplit('/').next().unwrap_or(word)))
    };
    if name.starts_with("python") {
        named(&|word| word.starts_with("python"))
            && words.iter().any(|word| {
                word.starts_with('-')
                    && !word.starts_with("--")
                    && word.chars().any(|c| c == 'c' || c == 'm')
            })
    } else {
        WRAPPERS.contains(&name) && named(&|word| word == name)
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
pub(crate) fn wrapped_shell(group: i32, bash: Option<ProgramId>) -> Option<Prompting> {
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
pub(crate) fn children(pid: i32) -> Vec<i32> {
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

    #[test]
    fn this_process_is_not_a_shell_typed_into_its_parent() {
        let me = std::process::id() as i32;
        // Replaced by `exec`: the shell itself.
        assert_eq!(typed_shell(me, me, u64::MAX, ""), Ok(()));
        // pid 1 is no wrapper any command names, nor our parent.
        assert!(typed_shell(me, 1, 0, "bash").is_err());
        // Started before the command began.
        let parent = parent(me).expect("a parent");
        assert!(typed_shell(me, parent, u64::MAX, "bash").is_err());
    }

    #[test]
    fn wrappers_count_only_when_the_command_names_them() {
        let me = std::process::id() as i32;
        // The test runner is no wrapper, whatever the command says.
        assert!(!named_wrapper(me, "script -qc bash /dev/null"));
    }
}
