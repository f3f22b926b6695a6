//! Starting a one-shot command: checks of the request, the sandbox's
//! private temporary directory, `bash -c` in its own process group and
//! scope, with the command and big environment values through pipes when
//! they are too big for an argument, and stdin written from a task of its
//! own.
//!
//! Not here: watching the command (`watch`) or making its outcome (the
//! parent module). Every way a start can fail is a reason in words of the
//! request, which the outcome shows as the command's stderr.
//!
//! Invariant: only the child holds the read ends of the pipes it reads, so
//! a writer sees a broken pipe, never blocks, if bash dies before reading.

use std::collections::BTreeSet;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::Stdio;

use tokio::io::AsyncWriteExt;
use tokio::task::JoinHandle;

use super::RunRequest;
use crate::guard::Guard;
use crate::process::{self, Scope, Targets};
use crate::sandbox::{self, Confinement, PrivateTmp};

/// A command that has started: what the watch and the outcome need of it.
pub(super) struct Launched {
    /// The main process (`bash`).
    pub(super) child: tokio::process::Child,
    /// Its process group (its pid).
    pub(super) pgid: i32,
    /// Its scope: the marker all its processes carry, its control group.
    pub(super) scope: Scope,
    /// Everything the run owns, to stop it all.
    pub(super) targets: Targets,
    /// The sandbox's temporary directory, removed when the run ends.
    _sandbox_tmp: Option<PrivateTmp>,
}

/// Starts `request.command`, or says why it cannot start.
pub(super) fn launch(request: &RunRequest) -> Result<Launched, String> {
    request.validate().map_err(|invalid| invalid.to_string())?;
    if let Some(reason) = request.cwd.as_deref().and_then(cwd_problem) {
        return Err(reason);
    }
    let (scope, sandbox_tmp) = confine(request)?;
    let Prepared { mut command, passed, inherited } = prepare(request, &scope)?;
    if let Some(tmp) = &sandbox_tmp {
        command.env("TMPDIR", tmp.path());
    }
    let spawned = process::spawn(&mut command);
    // Only the child may hold the read ends: a writer must see a broken
    // pipe, not block for ever, if bash dies before reading.
    drop(command);
    drop(inherited);
    let child = spawned.map_err(|err| start_failure(&err))?;
    for piped in passed {
        piped.write_in_background();
    }
    // The pid is known until the child has been waited for, which it has not.
    let Some(pgid) = child.id().map(|pid| pid as i32) else {
        return Err("the command exited before it could be watched".into());
    };
    let targets = targets_of(&scope, pgid);
    Ok(Launched { child, pgid, scope, targets, _sandbox_tmp: sandbox_tmp })
}

/// The run's scope, with its resource limits and, for a sandboxed command,
/// its confinement and a temporary directory of its own (removed when the
/// run ends).
fn confine(request: &RunRequest) -> Result<(Scope, Option<PrivateTmp>), String> {
    let scope = Scope::limited("run", &request.resources);
    if !request.sandbox.is_confined() {
        return Ok((scope, None));
    }
    let protect = sandbox::protected_pids(request.guard.as_deref().map(Guard::pid));
    let confined = PrivateTmp::create().and_then(|tmp| {
        Confinement::build(&request.sandbox, &[tmp.path()], &protect).map(|c| (c, tmp))
    });
    match confined {
        Ok((confinement, tmp)) => Ok((scope.with_confinement(confinement.rules()), Some(tmp))),
        Err(err) => Err(format!("could not build the sandbox: {err}")),
    }
}

/// Everything the run owns: its group, its main process's descendants (as
/// long as it is the process we started), its scope, and unmarked processes
/// under it.
fn targets_of(scope: &Scope, pgid: i32) -> Targets {
    let mut targets = Targets::scope(scope);
    targets.groups = vec![pgid];
    targets.roots = process::Root::of(pgid).into_iter().collect();
    if let Some(unmarked) = &mut targets.unmarked {
        unmarked.under = Some(pgid);
    }
    targets
}

/// Text a pipe carries to bash: the write end and what to write.
struct Piped {
    /// The write end; the child holds the read end.
    write: OwnedFd,
    /// The command, or the prelude that sets big environment values.
    text: String,
}

impl Piped {
    /// Writes the text from a blocking thread: bash reads the pipes one
    /// after the other, and a pipe holds only 64 KiB. The thread ends when
    /// the text is written or bash is gone (EPIPE).
    fn write_in_background(self) {
        let Piped { write, text } = self;
        tokio::task::spawn_blocking(move || {
            let mut file = std::fs::File::from(write);
            let _ = std::io::Write::write_all(&mut file, text.as_bytes());
        });
    }
}

/// The command to spawn, with the pipes that carry parts of the request.
struct Prepared {
    /// `bash -c ...` with its environment and standard streams.
    command: tokio::process::Command,
    /// The texts to write once bash has started.
    passed: Vec<Piped>,
    /// The read ends the child inherits (as descriptors 3 and 4); ours are
    /// dropped as soon as it has started.
    inherited: Vec<OwnedFd>,
}

/// The `bash -c` command for `request` in `scope`: the command as an
/// argument, or (too big for one) read from pipes; the non-interactive
/// environment, the request's own, and the scope marker last.
fn prepare(request: &RunRequest, scope: &Scope) -> Result<Prepared, String> {
    let inline = Inline::decide(request);
    let mut prepared = if inline.command {
        let mut command = process::group_command(process::bash(), scope);
        command.arg("-c").arg(&request.command);
        Prepared { command, passed: Vec::new(), inherited: Vec::new() }
    } else {
        through_pipes(request, &inline, scope)
            .map_err(|err| format!("could not create a pipe: {err}"))?
    };
    // bash names itself after argv[0] in `$0` and its error messages.
    prepared
        .command
        .arg0("bash")
        .env("TERM", "dumb")
        .env("NO_COLOR", "1")
        .envs(
            request
                .env
                .iter()
                .filter(|(name, value)| inline.env_inline(name, value))
                .map(|(name, value)| (name, value)),
        )
        // Last, so that nothing in `env` can replace the marker.
        .env(process::SCOPE_VAR, scope.value())
        .stdin(if request.stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(cwd) = &request.cwd {
        prepared.command.current_dir(cwd);
    }
    Ok(prepared)
}

/// A command too big for an argument (the kernel refuses any one argument
/// or environment string over 128 KiB): the command, and big environment
/// values, go through pipes the bootstrap script reads.
fn through_pipes(request: &RunRequest, inline: &Inline, scope: &Scope) -> nix::Result<Prepared> {
    let mut script = String::new();
    let mut passed = Vec::new();
    let mut inherited = Vec::new();
    let pipe = |text: String, passed: &mut Vec<Piped>| {
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map(|(read, write)| {
            passed.push(Piped { write, text });
            read
        })
    };
    let prelude = inline.prelude(&request.env);
    if !prelude.is_empty() {
        inherited.push(pipe(prelude, &mut passed)?);
        script.push_str(". /dev/fd/4; exec 4<&-; ");
    }
    inherited.insert(0, pipe(request.command.clone(), &mut passed)?);
    // The substitution is expanded before `3<&-` applies, so the
    // command never sees the descriptor.
    script.push_str("eval \"$(< /dev/fd/3)\" 3<&-");
    let fds: Vec<(&OwnedFd, i32)> = inherited.iter().zip([3, 4]).collect();
    let mut command = process::group_command_with_fds(process::bash(), scope, &fds);
    command.arg("-c").arg(script);
    Ok(Prepared { command, passed, inherited })
}

/// Writes `text` to the child's stdin from a task of its own, so that a
/// command that never reads it cannot block the run; the pipe closes when
/// the text is written. `None` when there is no text.
pub(super) fn write_stdin(
    child: &mut tokio::process::Child,
    text: Option<String>,
) -> Option<JoinHandle<()>> {
    let (Some(mut pipe), Some(text)) = (child.stdin.take(), text) else { return None };
    Some(tokio::spawn(async move {
        // A command that exits without reading gives EPIPE: not our
        // problem to report.
        let _ = pipe.write_all(text.as_bytes()).await;
    }))
}

/// The largest command or environment value passed to bash as an argument
/// or environment string; anything bigger goes through a pipe. The kernel's
/// own limit is 128 KiB per string and about 2 MiB for all of them.
const INLINE_LIMIT: usize = 64 * 1024;

/// The kernel's limit on one argument or `NAME=value` string, its NUL
/// included (`MAX_ARG_STRLEN`, 32 pages).
const MAX_ENV_STRING: usize = 128 * 1024;

/// The most bytes of request environment passed inline in all; past it the
/// largest values go through a pipe.
const INLINE_ENV_TOTAL: usize = 512 * 1024;

/// Which parts of a request go to bash as arguments and environment, and
/// which through pipes.
///
/// Memory: a piped command or value is copied once into its writer thread,
/// so a run holds about twice its request's size until bash has read it.
struct Inline {
    /// Whether the command is an argument of `bash -c` (else it is read
    /// from descriptor 3).
    command: bool,
    /// Names of `env` variables set by a prelude read from descriptor 4.
    piped_env: BTreeSet<String>,
}

impl Inline {
    fn decide(request: &RunRequest) -> Inline {
        let mut piped_env = BTreeSet::new();
        // Only names bash can assign can go through the prelude; others stay
        // in the environment, where the kernel may refuse a huge value
        // (and the error says so).
        let assignable: Vec<&(String, String)> =
            request.env.iter().filter(|(name, _)| is_shell_name(name)).collect();
        let mut total: usize = request.env.iter().map(|(n, v)| n.len() + v.len() + 2).sum();
        let mut by_size = assignable.clone();
        by_size.sort_by_key(|(_, value)| std::cmp::Reverse(value.len()));
        for (name, value) in by_size {
            if value.len() > INLINE_LIMIT || total > INLINE_ENV_TOTAL {
                piped_env.insert(name.clone());
                total -= name.len() + value.len() + 2;
            }
        }
        Inline { command: request.command.len() <= INLINE_LIMIT && piped_env.is_empty(), piped_env }
    }

    /// Whether `name=value` is set in bash's environment directly.
    fn env_inline(&self, name: &str, _value: &str) -> bool {
        !self.piped_env.contains(name)
    }

    /// The bash source that sets the piped variables: one
    /// `export NAME='value'` line each, quoted so that any text survives.
    /// A value the kernel would refuse to any program (a string over
    /// [`MAX_ENV_STRING`]) is set with `declare +x`: a shell variable the
    /// command can use, which the programs it starts do not inherit (had
    /// they inherited it, every one of them would fail to start).
    fn prelude(&self, env: &[(String, String)]) -> String {
        let mut prelude = String::new();
        // The last setting of a name wins, as in the environment.
        for (name, value) in env.iter().filter(|(name, _)| self.piped_env.contains(name)) {
            let exportable = name.len() + value.len() + 2 <= MAX_ENV_STRING;
            prelude.push_str(if exportable { "export " } else { "declare +x " });
            prelude.push_str(name);
            prelude.push_str("='");
            prelude.push_str(&value.replace('\'', "'\\''"));
            prelude.push_str("'\n");
        }
        prelude
    }
}

/// Whether bash accepts `name` as a variable name.
fn is_shell_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes.next().is_some_and(|b| b == b'_' || b.is_ascii_alphabetic())
        && bytes.all(|b| b == b'_' || b.is_ascii_alphanumeric())
}

/// Why bash did not start, naming the real cause.
fn start_failure(err: &std::io::Error) -> String {
    let bash = process::bash().display();
    match err.raw_os_error() {
        Some(libc::ENOENT) => format!(
            "could not start the command: {bash} does not exist; install bash, or start the \
             server with bash on its PATH"
        ),
        Some(libc::E2BIG) => format!(
            "could not start the command: the system refused its environment as too large \
             ({err}); pass big values as variables with plain names, or in a file"
        ),
        Some(libc::EACCES) => {
            format!("could not start the command: {bash} cannot be executed ({err})")
        }
        _ => format!("could not start the command with {bash}: {err}"),
    }
}

/// Why `cwd` cannot be the working directory, said so that whoever asked
/// knows what to do (in words of the request, not of any interface's
/// arguments); `None` if it can.
fn cwd_problem(cwd: &Path) -> Option<String> {
    match std::fs::metadata(cwd) {
        Ok(meta) if meta.is_dir() => None,
        Ok(_) => Some(format!(
            "the working directory {} is not a directory; choose a directory",
            cwd.display()
        )),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Some(format!(
            "the working directory {} does not exist; choose an existing directory",
            cwd.display()
        )),
        Err(err) => Some(format!(
            "the working directory {} cannot be used: {err}; choose a directory you can enter",
            cwd.display()
        )),
    }
}
