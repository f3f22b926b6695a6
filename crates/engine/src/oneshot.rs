//! The one-shot runner behind the `run` tool: one command through `bash -c`,
//! under both limits of the timeout policy, with each stream kept whole in
//! a command log of the caller's store and shown capped.
//!
//! The command runs in a process group, a scope and (where the host allows
//! it) a control group of its own (see `process` and `cgroup`: they find
//! what left the process group; `env` cannot set the scope marker) with
//! stdin from
//! `/dev/null` (or the text the caller supplies), stdout and stderr on
//! separate pipes, and `TERM=dumb NO_COLOR=1` on top of the non-interactive
//! environment. A command or environment value too big for an argument
//! reaches bash through a pipe instead; a NUL byte or a malformed variable
//! name is refused before anything starts. Two deadlines run against it: the whole run (`exec`) and
//! the silence since the last byte on either stream (`no_output`). When one
//! fires, or the caller cancels, the whole group gets SIGTERM, a grace
//! period, then SIGKILL, and its pipes are read all the while, so what a
//! SIGTERM handler prints is kept. When the main process exits on its own,
//! anything it left running, in its group or anywhere else, is stopped
//! too: a one-shot run leaves nothing behind (background jobs belong in a
//! shell session).
//!
//! Each stream's bytes are decoded (UTF-8, a character split between reads
//! kept whole) and then pass through the stream's `store::OutputSink`: its
//! log (stdout and stderr of one run share the per-command disk budget) and
//! the capped view the outcome shows (the two views share one cap, counted
//! as JSON writes the text).
//!
//! Whatever happens to the command, the result is a [`RunOutcome`] value.
//! This module does not choose the limits (`policy` does), render the
//! outcome for an agent (the server does). Secrets are masked where every
//! piece of output passes (`output::pass`, through the sinks), with the
//! request's [`Secrets`].

use std::collections::BTreeSet;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::guard::Guard;
use crate::limits::{Counts, LimitHit, ResourceLimits};
use crate::mask::Secrets;
use crate::output::{self, Shown, SpillLimits, SpillStore};
use crate::output::{OutputSink, OutputStore, StoreLimits};
use crate::policy::Limits;
use crate::process::{self, Scope, Targets, TerminationMode};
use crate::sandbox::{self, Confinement, Policy, PrivateTmp};
use crate::utf8::Utf8Decoder;

/// The grace period between SIGTERM and SIGKILL unless a request sets one.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(5);

/// Characters shown of each stream unless a request sets a cap.
pub const DEFAULT_STREAM_CAP: usize = 20_000;

/// How long the pipes are read after the command's group is gone. A
/// process that left the group (with `setsid`, say) can hold a pipe open for
/// ever; its output after this is not waited for.
const DRAIN_LIMIT: Duration = Duration::from_secs(2);

/// Bytes read from a pipe at a time.
const READ_CHUNK: usize = 8 * 1024;

/// One command to run, and how.
#[derive(Debug, Clone)]
pub struct RunRequest {
    /// The command line, run as `bash -c COMMAND`.
    pub command: String,
    /// The working directory; the server's own when `None`. It must exist.
    pub cwd: Option<PathBuf>,
    /// Environment variables set on top of the inherited environment and
    /// our non-interactive defaults; these win over both.
    pub env: Vec<(String, String)>,
    /// Text for the command's stdin; `/dev/null` when `None`.
    pub stdin: Option<String>,
    /// The limits the command runs under.
    pub limits: Limits,
    /// How long the process group has to exit after SIGTERM before SIGKILL.
    pub grace: Duration,
    /// Characters shown of stdout and stderr together, as JSON writes them
    /// (see [`run`]); the rest is in each stream's log.
    pub stream_cap: usize,
    /// The store that keeps the run's stdout and stderr (numbered by it:
    /// a store labelled `run` names the files of its 7th command
    /// `run-7-<tag>.stdout` and `.stderr`, each made only when its stream
    /// outgrows memory or the cap), with its retention and disk limits
    /// (per command: stdout and stderr together).
    pub output: Arc<OutputStore>,
    /// The orphan guard to tell about the command's process group while it
    /// runs, so that it dies with the server.
    pub guard: Option<Arc<Guard>>,
    /// What is masked in both streams (and their logs); nothing by default.
    pub secrets: Arc<Secrets>,
    /// What the command and everything it starts may take, and its `nice`
    /// value; the documented defaults ([`ResourceLimits::default`]).
    pub resources: ResourceLimits,
    /// The sandbox the command runs in; none by default.
    pub sandbox: Policy,
}

impl RunRequest {
    /// A request for `command` under `limits`, keeping its output in
    /// `spill_dir` (a store of its own labelled `label`, with the default
    /// limits; set `output` to share one), with no cwd, env or stdin,
    /// [`DEFAULT_GRACE`], [`DEFAULT_STREAM_CAP`], no guard and no secrets. Set the other
    /// fields with struct update syntax.
    pub fn new(
        command: impl Into<String>,
        limits: Limits,
        spill_dir: impl Into<PathBuf>,
        label: impl Into<String>,
    ) -> RunRequest {
        RunRequest {
            command: command.into(),
            cwd: None,
            env: Vec::new(),
            stdin: None,
            limits,
            grace: DEFAULT_GRACE,
            stream_cap: DEFAULT_STREAM_CAP,
            output: OutputStore::new(
                SpillStore::new(spill_dir.into(), "", SpillLimits::default(), None),
                &label.into(),
                StoreLimits::default(),
            ),
            guard: None,
            secrets: Arc::new(Secrets::none()),
            resources: ResourceLimits::default(),
            sandbox: Policy::off(),
        }
    }
}

impl RunRequest {
    /// Checks what bash and the kernel cannot take: a NUL byte in the
    /// command or in the environment, environment names that are empty or
    /// contain `=`, and the scope marker among them. [`run`] checks this
    /// first and refuses the request without starting anything; a server
    /// checks its arguments before it builds a request (in the words of its
    /// own interface), so this is a second net.
    pub fn validate(&self) -> Result<(), InvalidRunRequest> {
        if let Some(at) = self.command.find('\0') {
            return Err(InvalidRunRequest::NulInCommand { at });
        }
        for (name, value) in &self.env {
            let problem = if name.is_empty() {
                InvalidRunRequest::EmptyEnvName
            } else if name.contains('=') {
                InvalidRunRequest::EqualsInEnvName { name: name.clone() }
            } else if name.contains('\0') {
                InvalidRunRequest::NulInEnvName { name: name.clone() }
            } else if name == process::SCOPE_VAR {
                InvalidRunRequest::ScopeVarInEnv
            } else if value.contains('\0') {
                InvalidRunRequest::NulInEnvValue { name: name.clone() }
            } else {
                continue;
            };
            return Err(problem);
        }
        Ok(())
    }
}

/// Why a [`RunRequest`] cannot run. The words of its `Display` speak of the
/// request, not of any interface's arguments: whoever takes the request
/// from a person or an agent checks it first and says what to do in its own
/// terms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidRunRequest {
    /// The command holds a NUL byte, which no command line can carry.
    #[error("the command contains a NUL byte (at byte {at}), which no command line can carry")]
    NulInCommand {
        /// Its byte offset in the command.
        at: usize,
    },
    /// An environment variable has an empty name.
    #[error("an environment variable has an empty name")]
    EmptyEnvName,
    /// An environment variable's name contains `=`.
    #[error("the environment variable name {name:?} contains `=`")]
    EqualsInEnvName {
        /// The name.
        name: String,
    },
    /// An environment variable's name contains a NUL byte.
    #[error("the environment variable name {name:?} contains a NUL byte")]
    NulInEnvName {
        /// The name.
        name: String,
    },
    /// The environment sets the scope marker, which every process of the
    /// run carries so that all of them can be stopped.
    #[error(
        "the environment sets {}, the marker that finds every process of the run; it cannot be \
         set",
        process::SCOPE_VAR
    )]
    ScopeVarInEnv,
    /// An environment variable's value contains a NUL byte.
    #[error("the value of the environment variable {name} contains a NUL byte")]
    NulInEnvValue {
        /// The variable's name.
        name: String,
    },
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

/// How a run ended, in the seed's three words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStatus {
    /// The command ran to completion, whatever its exit code.
    Success,
    /// A limit fired and the command was stopped.
    Timeout,
    /// The command could not start (stderr says why), or the request was
    /// cancelled and the command was stopped (`cancelled` is set).
    Error,
}

impl RunStatus {
    /// The seed's spelling: `"success"`, `"timeout"` or `"error"`.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Success => "success",
            RunStatus::Timeout => "timeout",
            RunStatus::Error => "error",
        }
    }
}

/// Which limit stopped a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeoutReason {
    /// It ran longer than `Limits::exec` in all.
    Exec,
    /// It printed nothing, on either stream, for `Limits::no_output`.
    NoOutput,
}

impl TimeoutReason {
    /// The seed's spelling: `"exec_timeout"` or `"no_output_timeout"`.
    pub fn as_str(self) -> &'static str {
        match self {
            TimeoutReason::Exec => "exec_timeout",
            TimeoutReason::NoOutput => "no_output_timeout",
        }
    }
}

/// Everything about one run: a command that fails, times out or is
/// cancelled is an outcome too, with all the output it printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOutcome {
    /// How the run ended.
    pub status: RunStatus,
    /// The run's number in its store ([`RunRequest::output`]), to read its
    /// streams back by line.
    pub number: u64,
    /// What is shown of stdout, and where the rest is.
    pub stdout: Shown,
    /// What is shown of stderr, and where the rest is. When the command
    /// could not start, the reason and what to do about it.
    pub stderr: Shown,
    /// The exit code; 128+N when the command died of signal N we did not
    /// send; -1 when we stopped it or it never started.
    pub exit_code: i32,
    /// Which limit fired, for [`RunStatus::Timeout`].
    pub timeout_reason: Option<TimeoutReason>,
    /// How the process group went away when we stopped it (timeout or
    /// cancel): within the grace period, or by SIGKILL.
    pub termination_mode: Option<TerminationMode>,
    /// Whether the request was cancelled (the status is then `Error`).
    pub cancelled: bool,
    /// Whether the main process exited but left processes running in its
    /// group (`server &`, say), which were then stopped.
    pub stopped_leftovers: bool,
    /// From just before the start until the output was collected.
    pub duration: Duration,
    /// The limits the command ran under.
    pub limits: Limits,
    /// The process group the command ran in (its id is the main process's
    /// pid); `None` if it never started. The group is gone by now.
    pub pgid: Option<i32>,
    /// The resource limits that stopped something in the command (a
    /// process the OOM killer killed at the memory limit, forks refused
    /// at the tasks limit), as the kernel counted them.
    pub limit_hits: Vec<LimitHit>,
}

/// Runs `request.command` to completion, a limit, or `cancel`, and returns
/// the outcome. bash is the one [`process::bash`] found at start-up, whatever
/// `PATH` the request's `env` sets. It never fails: a command that cannot start is an outcome
/// with [`RunStatus::Error`].
///
/// stdout and stderr share one cap, [`RunRequest::stream_cap`], counted as
/// JSON writes them ([`output::json_chars`]): a stream that needs less
/// than half leaves the rest to the other (see [`output::share`]), and a
/// stream cut to its share names its log and the lines left out.
pub async fn run(request: RunRequest, cancel: CancellationToken) -> RunOutcome {
    let (cap, store) = (request.stream_cap, Arc::clone(&request.output));
    let mut outcome = run_streams(request, cancel).await;
    let sizes = [outcome.stdout.json_chars(), outcome.stderr.json_chars()];
    let [stdout, stderr] = output::share(cap, &sizes)[..] else { return outcome };
    let number = outcome.number;
    let saved = |stream| {
        let store = &store;
        move || store.get_stream(Some(number), stream).map(|log| log.saved()).unwrap_or_default()
    };
    outcome.stdout.fit(stdout, saved(crate::output::Stream::Stdout));
    outcome.stderr.fit(stderr, saved(crate::output::Stream::Stderr));
    outcome
}

/// [`run`], each stream shown up to the whole cap.
async fn run_streams(mut request: RunRequest, cancel: CancellationToken) -> RunOutcome {
    let started = Instant::now();
    // The log names its command (a read of the log shows it): masked.
    let logs = request.output.begin_run(&request.secrets.mask(&request.command).0);
    let number = logs.number;
    let stdout = OutputSink::new(logs.stdout, request.stream_cap, Arc::clone(&request.secrets));
    let stderr = OutputSink::new(logs.stderr, request.stream_cap, Arc::clone(&request.secrets));
    let not_started = |reason: String, mut stdout: OutputSink, mut stderr: OutputSink| {
        let command = request.secrets.mask(&request.command).0;
        tracing::debug!(%command, %reason, "command did not start");
        stderr.push(&reason);
        RunOutcome {
            number,
            status: RunStatus::Error,
            stdout: finish_sink(&mut stdout, -1),
            stderr: finish_sink(&mut stderr, -1),
            exit_code: -1,
            timeout_reason: None,
            termination_mode: None,
            cancelled: false,
            stopped_leftovers: false,
            duration: started.elapsed(),
            limits: request.limits,
            pgid: None,
            limit_hits: Vec::new(),
        }
    };
    if let Err(invalid) = request.validate() {
        return not_started(invalid.to_string(), stdout, stderr);
    }
    if let Some(reason) = request.cwd.as_deref().and_then(cwd_problem) {
        return not_started(reason, stdout, stderr);
    }

    let mut scope = Scope::limited("run", &request.resources);
    // A sandboxed command writes a temporary directory of its own, removed
    // when the run ends.
    let mut sandbox_tmp = None;
    if request.sandbox.is_confined() {
        let protect = sandbox::protected_pids(request.guard.as_deref().map(Guard::pid));
        let confined = PrivateTmp::create().and_then(|tmp| {
            Confinement::build(&request.sandbox, &[tmp.path()], &protect).map(|c| (c, tmp))
        });
        match confined {
            Ok((confinement, tmp)) => {
                scope = scope.with_confinement(confinement.rules());
                sandbox_tmp = Some(tmp);
            }
            Err(err) => {
                return not_started(format!("could not build the sandbox: {err}"), stdout, stderr);
            }
        }
    }
    let inline = Inline::decide(&request);
    let mut passed: Vec<(OwnedFd, String)> = Vec::new();
    let mut inherited: Vec<OwnedFd> = Vec::new();
    let mut command = if inline.command {
        let mut command = process::group_command(process::bash(), &scope);
        command.arg("-c").arg(&request.command);
        command
    } else {
        // Too big for an argument (the kernel refuses any one argument or
        // environment string over 128 KiB): the command, and big
        // environment values, go through pipes the bootstrap reads.
        let mut script = String::new();
        let mut fds = Vec::new();
        let pipe = |text: String, passed: &mut Vec<(OwnedFd, String)>| {
            nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map(|(read, write)| {
                passed.push((write, text));
                read
            })
        };
        let prelude = inline.prelude(&request.env);
        if !prelude.is_empty() {
            match pipe(prelude, &mut passed) {
                Ok(read) => inherited.push(read),
                Err(err) => {
                    return not_started(format!("could not create a pipe: {err}"), stdout, stderr);
                }
            }
            script.push_str(". /dev/fd/4; exec 4<&-; ");
        }
        match pipe(request.command.clone(), &mut passed) {
            Ok(read) => inherited.insert(0, read),
            Err(err) => {
                return not_started(format!("could not create a pipe: {err}"), stdout, stderr);
            }
        }
        // The substitution is expanded before `3<&-` applies, so the
        // command never sees the descriptor.
        script.push_str("eval \"$(< /dev/fd/3)\" 3<&-");
        for (fd, target) in inherited.iter().zip([3, 4]) {
            fds.push((fd, target));
        }
        let mut command = process::group_command_with_fds(process::bash(), &scope, &fds);
        command.arg("-c").arg(script);
        command
    };
    // bash names itself after argv[0] in `$0` and its error messages.
    command
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
        command.current_dir(cwd);
    }
    if let Some(tmp) = &sandbox_tmp {
        command.env("TMPDIR", tmp.path());
    }
    let spawned = process::spawn(&mut command);
    // Only the child may hold the read ends: a writer must see a broken
    // pipe, not block for ever, if bash dies before reading.
    drop(command);
    drop(inherited);
    let mut child = match spawned {
        Ok(child) => child,
        Err(err) => return not_started(start_failure(&err), stdout, stderr),
    };
    for (pipe, text) in passed {
        // A blocking thread per pipe: bash reads them one after the other,
        // and a pipe holds only 64 KiB. The thread ends when the text is
        // written or bash is gone (EPIPE).
        tokio::task::spawn_blocking(move || {
            let mut file = std::fs::File::from(pipe);
            let _ = std::io::Write::write_all(&mut file, text.as_bytes());
        });
    }
    // The pid is known until the child has been waited for, which it has not.
    let Some(pgid) = child.id().map(|pid| pid as i32) else {
        return not_started("the command exited before it could be watched".into(), stdout, stderr);
    };
    let mut targets = Targets::scope(&scope);
    targets.groups = vec![pgid];
    // Its descendants, as long as it is the process we started.
    targets.roots = process::Root::of(pgid).into_iter().collect();
    if let Some(unmarked) = &mut targets.unmarked {
        unmarked.under = Some(pgid);
    }
    let mut watch = GroupWatch::new(pgid, targets.clone(), request.guard.clone());
    tracing::debug!(pgid, scope = scope.value(), "command started");

    // Writing stdin from its own task means a command that never reads it
    // cannot block us; the pipe closes when the text is written.
    let stdin_writer = match (child.stdin.take(), request.stdin.take()) {
        (Some(mut pipe), Some(text)) => Some(tokio::spawn(async move {
            // A command that exits without reading gives EPIPE: not our
            // problem to report.
            let _ = pipe.write_all(text.as_bytes()).await;
        })),
        _ => None,
    };

    let mut streams = Streams {
        stdout: Stream::new(child.stdout.take(), stdout),
        stderr: Stream::new(child.stderr.take(), stderr),
    };
    let ending = supervise(&mut child, &targets, &request, &cancel, &mut streams).await;
    watch.finished();
    if let Some(writer) = stdin_writer {
        writer.abort();
    }

    let (status, exit_code, timeout_reason) = match ending.stop {
        Some(Stop::Limit(reason)) => (RunStatus::Timeout, -1, Some(reason)),
        Some(Stop::Cancelled) => (RunStatus::Error, -1, None),
        Some(Stop::Leftovers) | None => {
            (RunStatus::Success, ending.exit.map_or(-1, process::exit_code), None)
        }
    };
    let stopped_by_us = matches!(ending.stop, Some(Stop::Limit(_) | Stop::Cancelled));
    // When the group was already gone at the moment we came to stop it, it
    // went away without needing SIGKILL.
    let termination_mode = stopped_by_us.then(|| ending.kill.unwrap_or(TerminationMode::Soft));
    let outcome = RunOutcome {
        number,
        status,
        stdout: streams.stdout.finish(exit_code),
        stderr: streams.stderr.finish(exit_code),
        exit_code,
        timeout_reason,
        termination_mode,
        cancelled: matches!(ending.stop, Some(Stop::Cancelled)),
        // In a PID namespace, what the command left died with its shell
        // before we could look: its keeper says so.
        stopped_leftovers: (matches!(ending.stop, Some(Stop::Leftovers)) && ending.kill.is_some())
            || (ending.stop.is_none() && scope.left_in_namespace()),
        duration: started.elapsed(),
        limits: request.limits,
        pgid: Some(pgid),
        limit_hits: Vec::new(),
    };
    let mut outcome = outcome;
    if let Some(limits) = scope.limits() {
        // The group is the command's own, so its counters started at 0.
        outcome.limit_hits = limits.hits_since(&Counts::default());
        if outcome.exit_code != 0 {
            let printed = format!("{}\n{}", outcome.stdout.text, outcome.stderr.text);
            outcome.limit_hits.extend(limits.inferred_hits(&printed));
        }
    }
    tracing::debug!(
        pgid,
        status = outcome.status.as_str(),
        exit_code,
        reason = timeout_reason.map(TimeoutReason::as_str),
        duration_ms = outcome.duration.as_millis() as u64,
        "command ended"
    );
    outcome
}

/// Why we stopped the command's process group ourselves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// A limit fired.
    Limit(TimeoutReason),
    /// The caller cancelled the request.
    Cancelled,
    /// The main process exited and left others running in its group.
    Leftovers,
}

/// What [`supervise`] saw happen.
struct Ending {
    /// The main process's exit status, if it was collected.
    exit: Option<ExitStatus>,
    /// Why we stopped the group, if we did.
    stop: Option<Stop>,
    /// How the group went away when we stopped it (`None`: nothing was
    /// alive any more when we came to it).
    kill: Option<TerminationMode>,
}

/// The command's two output streams.
struct Streams {
    stdout: Stream<tokio::process::ChildStdout>,
    stderr: Stream<tokio::process::ChildStderr>,
}

/// Watches the running command until it has exited and its output is
/// collected: reads both pipes, enforces the limits and `cancel`, and stops
/// the process group when needed.
///
/// Everything happens in one `select!` over events (bytes arriving, the
/// child exiting, a deadline, a cancel, the kill finishing), so there is no
/// polling, and the pipes are read while the group is being stopped.
async fn supervise(
    child: &mut tokio::process::Child,
    targets: &Targets,
    request: &RunRequest,
    cancel: &CancellationToken,
    streams: &mut Streams,
) -> Ending {
    let pgid = targets.groups.first().copied().unwrap_or_default();
    let limits = request.limits;
    let exec_deadline = tokio::time::sleep_until(deadline_after(limits.exec));
    let silence_deadline = tokio::time::sleep_until(deadline_after(limits.no_output));
    tokio::pin!(exec_deadline, silence_deadline);

    let mut ending = Ending { exit: None, stop: None, kill: None };
    // The stopping of the group, while it is under way.
    let mut kill: Option<std::pin::Pin<Box<dyn Future<Output = Option<TerminationMode>> + Send>>> =
        None;
    // Set once the main process has exited and any stopping is done: from
    // then on only the pipes are read, up to this deadline.
    let mut drain_deadline: Option<Instant> = None;

    loop {
        // The limits and the cancel apply while the command runs on its own.
        let running = ending.exit.is_none() && ending.stop.is_none();
        let mut start_stop = None;
        tokio::select! {
            read = streams.stdout.read() => {
                if streams.stdout.absorb(read) && running {
                    silence_deadline.as_mut().reset(deadline_after(limits.no_output));
                }
            }
            read = streams.stderr.read() => {
                if streams.stderr.absorb(read) && running {
                    silence_deadline.as_mut().reset(deadline_after(limits.no_output));
                }
            }
            exit = child.wait(), if ending.exit.is_none() => {
                match exit {
                    Ok(status) => ending.exit = Some(status),
                    Err(err) => {
                        // Waiting cannot really fail for our own child; if it
                        // does, stop the group so nothing is left running.
                        tracing::warn!(pgid, %err, "could not wait for the command");
                        if ending.stop.is_none() {
                            start_stop = Some(Stop::Leftovers);
                        }
                        ending.exit = Some(ExitStatus::default());
                    }
                }
                if ending.stop.is_none() && !targets.members().is_empty() {
                    start_stop = Some(Stop::Leftovers);
                }
            }
            () = &mut exec_deadline, if running => {
                start_stop = Some(Stop::Limit(TimeoutReason::Exec));
            }
            () = &mut silence_deadline, if running => {
                start_stop = Some(Stop::Limit(TimeoutReason::NoOutput));
            }
            () = cancel.cancelled(), if running => {
                start_stop = Some(Stop::Cancelled);
            }
            mode = finish(&mut kill), if kill.is_some() => {
                kill = None;
                ending.kill = mode;
                if ending.exit.is_none() {
                    // The main process left the group it leads, so the group
                    // kill missed it; stop it by pid.
                    #[allow(
                        clippy::disallowed_methods,
                        reason = "the child we wait for, by its handle, which knows whether it was reaped"
                    )]
                    let _ = child.start_kill();
                }
            }
            () = sleep_until_some(drain_deadline), if drain_deadline.is_some() => {
                tracing::debug!(pgid, "stopped reading output held open by an escaped process");
                break;
            }
        }
        if let Some(stop) = start_stop
            && ending.stop.is_none()
        {
            tracing::debug!(pgid, ?stop, "stopping the command's process group");
            ending.stop = Some(stop);
            let grace = request.grace;
            let targets = targets.clone();
            kill = Some(Box::pin(async move { process::terminate(&targets, grace).await }));
        }
        if ending.exit.is_some() && kill.is_none() {
            if streams.stdout.is_closed() && streams.stderr.is_closed() {
                break;
            }
            drain_deadline.get_or_insert_with(|| Instant::now() + DRAIN_LIMIT);
        }
    }
    ending
}

/// Awaits the future in `slot`; never completes when the slot is empty.
async fn finish<F: Future + Unpin>(slot: &mut Option<F>) -> F::Output {
    match slot {
        Some(future) => future.await,
        None => std::future::pending().await,
    }
}

/// Sleeps until `deadline`; never completes when there is none.
async fn sleep_until_some(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// `limit` from now, or far in the future for limits too large to add.
fn deadline_after(limit: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(limit).unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 24 * 3600))
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

/// Ends a stream's log with the run's `exit_code` and returns what the
/// outcome shows of it.
fn finish_sink(sink: &mut OutputSink, exit_code: i32) -> Shown {
    sink.finish(exit_code);
    sink.take_shown()
}

/// One output pipe, decoded, then through its sink.
struct Stream<R> {
    /// The pipe, until it reaches end of file.
    pipe: Option<R>,
    buffer: Box<[u8]>,
    decoder: Utf8Decoder,
    output: OutputSink,
}

impl<R: AsyncRead + Unpin> Stream<R> {
    fn new(pipe: Option<R>, output: OutputSink) -> Stream<R> {
        Stream { pipe, buffer: vec![0; READ_CHUNK].into(), decoder: Utf8Decoder::default(), output }
    }

    /// Reads the next chunk into the buffer. Never completes once the pipe
    /// is closed, so a `select!` branch on it simply goes quiet. Cancel-safe:
    /// a read that loses the race has taken no bytes.
    async fn read(&mut self) -> std::io::Result<usize> {
        match &mut self.pipe {
            Some(pipe) => pipe.read(&mut self.buffer).await,
            None => std::future::pending().await,
        }
    }

    /// Takes in the result of [`Stream::read`]; returns whether bytes came.
    fn absorb(&mut self, read: std::io::Result<usize>) -> bool {
        match read {
            Ok(0) => {
                self.close();
                false
            }
            Ok(n) => {
                let text = self.decoder.decode(&self.buffer[..n]);
                self.output.push(&text);
                true
            }
            Err(err) => {
                tracing::debug!(%err, "reading command output failed; treating it as ended");
                self.close();
                false
            }
        }
    }

    fn close(&mut self) {
        self.pipe = None;
        self.output.push(&self.decoder.finish());
    }

    fn is_closed(&self) -> bool {
        self.pipe.is_none()
    }

    fn finish(mut self, exit_code: i32) -> Shown {
        if !self.is_closed() {
            self.close();
        }
        finish_sink(&mut self.output, exit_code)
    }
}

/// Tells the guard about the command's process group while it runs. If the
/// run is dropped before it ends (its task aborted), the group is killed
/// here, since nobody else would stop it.
struct GroupWatch {
    pgid: i32,
    /// Everything the run owns: its group, its descendants, its scope.
    targets: Targets,
    guard: Option<Arc<Guard>>,
    finished: bool,
}

impl GroupWatch {
    fn new(pgid: i32, targets: Targets, guard: Option<Arc<Guard>>) -> GroupWatch {
        if let Some(guard) = &guard {
            guard.watch_group(pgid);
        }
        GroupWatch { pgid, targets, guard, finished: false }
    }

    /// The run is over and the group has been dealt with.
    fn finished(&mut self) {
        self.finished = true;
    }
}

impl Drop for GroupWatch {
    fn drop(&mut self) {
        if !self.finished {
            tracing::debug!(pgid = self.pgid, "run abandoned; killing what it started");
            process::kill_now(&self.targets);
        }
        if let Some(guard) = &self.guard {
            guard.forget_group(self.pgid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::Stream;

    /// A directory for spill files, removed when dropped.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(name: &str) -> TempDir {
            let path = std::env::temp_dir()
                .join(format!("shellkeep-oneshot-test-{}-{name}", std::process::id()));
            std::fs::create_dir_all(&path).expect("temp dir");
            TempDir(path)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// A silence limit that outlasts bash's start even on a busy machine,
    /// for commands that must print or set a trap before it strikes.
    const STARTED: f64 = 2.0;

    fn limits(exec_secs: f64, no_output_secs: f64) -> Limits {
        Limits {
            exec: Duration::from_secs_f64(exec_secs),
            no_output: Duration::from_secs_f64(no_output_secs),
        }
    }

    fn request(dir: &TempDir, command: &str, limits: Limits) -> RunRequest {
        RunRequest {
            grace: Duration::from_millis(300),
            ..RunRequest::new(command, limits, &dir.0, "run")
        }
    }

    async fn run_now(request: RunRequest) -> RunOutcome {
        run(request, CancellationToken::new()).await
    }

    /// The parts of an outcome that do not vary between runs, on one line.
    fn summary(outcome: &RunOutcome) -> String {
        format!(
            "{} exit={} reason={} mode={} cancelled={} leftovers={} stdout={:?} stderr={:?}",
            outcome.status.as_str(),
            outcome.exit_code,
            outcome.timeout_reason.map_or("-", TimeoutReason::as_str),
            outcome.termination_mode.map_or("-", TerminationMode::as_str),
            outcome.cancelled,
            outcome.stopped_leftovers,
            outcome.stdout.text,
            outcome.stderr.text,
        )
    }

    /// Extra time allowed above every upper bound: tests share two cores
    /// with the rest of the suite, and speed is measured by the benchmark,
    /// not here. The bounds only tell which limit fired.
    const LOAD_SLACK: f64 = 2.0;

    fn assert_duration(outcome: &RunOutcome, at_least: f64, below: f64) {
        let below = below + LOAD_SLACK;
        let secs = outcome.duration.as_secs_f64();
        assert!(at_least <= secs && secs < below, "took {secs:.3} s, expected {at_least}..{below}");
    }

    /// Asserts the command's process group has no live member left.
    fn assert_group_gone(outcome: &RunOutcome) {
        let pgid = outcome.pgid.expect("the command started");
        assert_eq!(process::live_group_members(pgid), Vec::<i32>::new());
    }

    #[tokio::test]
    async fn seed_1_a_quick_command_succeeds() {
        let dir = TempDir::new("seed1");
        let outcome = run_now(request(&dir, "echo 'timeout test 1'", limits(30.0, 10.0))).await;
        assert_eq!(
            summary(&outcome),
            r#"success exit=0 reason=- mode=- cancelled=false leftovers=false stdout="timeout test 1\n" stderr="""#
        );
        assert_duration(&outcome, 0.0, 1.0);
        assert_eq!(outcome.limits, limits(30.0, 10.0));
    }

    #[tokio::test]
    async fn seed_2_a_silent_command_hits_the_no_output_limit() {
        let dir = TempDir::new("seed2");
        let outcome = run_now(request(&dir, "sleep 600", limits(5.0, 0.5))).await;
        assert_eq!(
            summary(&outcome),
            r#"timeout exit=-1 reason=no_output_timeout mode=soft cancelled=false leftovers=false stdout="" stderr="""#
        );
        assert_duration(&outcome, 0.5, 1.2);
        assert_group_gone(&outcome);
    }

    #[tokio::test]
    async fn seed_3_a_chatty_command_hits_the_exec_limit_and_keeps_its_output() {
        let dir = TempDir::new("seed3");
        let command = "for i in $(seq 1 100); do echo \"still running $i\"; sleep 0.2; done";
        let outcome = run_now(request(&dir, command, limits(3.0, STARTED))).await;
        assert_eq!(
            (outcome.status, outcome.exit_code, outcome.timeout_reason, outcome.termination_mode),
            (RunStatus::Timeout, -1, Some(TimeoutReason::Exec), Some(TerminationMode::Soft))
        );
        assert!(outcome.stdout.text.starts_with("still running 1\nstill running 2\n"));
        let lines = outcome.stdout.text.lines().count();
        // At most one line per 0.2 s sleep, however busy the machine.
        assert!((2..=16).contains(&lines), "{:?}", outcome.stdout.text);
        assert_duration(&outcome, 3.0, 3.8);
        assert_group_gone(&outcome);
    }

    #[tokio::test]
    async fn seed_4_a_longer_command_that_finishes_in_time_succeeds() {
        let dir = TempDir::new("seed4");
        let outcome = run_now(request(&dir, "sleep 0.3; echo done", limits(2.0, 1.0))).await;
        assert_eq!(
            summary(&outcome),
            r#"success exit=0 reason=- mode=- cancelled=false leftovers=false stdout="done\n" stderr="""#
        );
        assert_duration(&outcome, 0.3, 1.5);
    }

    #[tokio::test]
    async fn stderr_is_kept_apart_and_a_failing_exit_code_is_still_success() {
        let dir = TempDir::new("stderr");
        let outcome =
            run_now(request(&dir, "echo out; echo err >&2; exit 3", limits(5.0, 2.0))).await;
        assert_eq!(
            summary(&outcome),
            r#"success exit=3 reason=- mode=- cancelled=false leftovers=false stdout="out\n" stderr="err\n""#
        );
    }

    #[tokio::test]
    async fn death_by_a_signal_we_did_not_send_is_128_plus_the_signal() {
        let dir = TempDir::new("signal");
        let outcome = run_now(request(&dir, "echo before; kill -9 $$", limits(5.0, 2.0))).await;
        assert_eq!(
            summary(&outcome),
            r#"success exit=137 reason=- mode=- cancelled=false leftovers=false stdout="before\n" stderr="""#
        );
    }

    #[tokio::test]
    async fn stdin_text_is_read_and_without_it_stdin_is_empty() {
        let dir = TempDir::new("stdin");
        let with_text = RunRequest {
            stdin: Some("hello\nwörld\n".into()),
            ..request(&dir, "cat; echo end", limits(5.0, 2.0))
        };
        let outcome = run_now(with_text).await;
        assert_eq!(outcome.stdout.text, "hello\nwörld\nend\n");
        let outcome = run_now(request(&dir, "cat; echo end", limits(5.0, 2.0))).await;
        assert_eq!(
            summary(&outcome),
            r#"success exit=0 reason=- mode=- cancelled=false leftovers=false stdout="end\n" stderr="""#
        );
    }

    #[tokio::test]
    async fn stdin_a_command_never_reads_does_not_block_the_run() {
        let dir = TempDir::new("stdin-unread");
        let big = RunRequest {
            stdin: Some("x".repeat(1 << 20)),
            ..request(&dir, "echo ignored", limits(5.0, 2.0))
        };
        let outcome = run_now(big).await;
        assert_eq!(
            (outcome.status, outcome.stdout.text.as_str()),
            (RunStatus::Success, "ignored\n")
        );
        assert_duration(&outcome, 0.0, 2.0);
    }

    #[tokio::test]
    async fn env_cwd_and_terminal_settings_reach_the_command() {
        let dir = TempDir::new("env");
        let with_env = RunRequest {
            env: vec![("SHELLKEEP_TEST".into(), "yes".into()), ("PAGER".into(), "less".into())],
            cwd: Some(dir.0.clone()),
            ..request(
                &dir,
                "echo \"$TERM $NO_COLOR $SHELLKEEP_TEST $PAGER $(pwd)\"",
                limits(5.0, 2.0),
            )
        };
        let outcome = run_now(with_env).await;
        let cwd = dir.0.canonicalize().expect("canonical temp dir");
        assert_eq!(outcome.stdout.text, format!("dumb 1 yes less {}\n", cwd.display()));
    }

    #[tokio::test]
    async fn output_in_the_grace_period_is_kept() {
        let dir = TempDir::new("grace-output");
        let command = "trap 'echo caught TERM; exit 3' TERM; echo started; sleep 600 & wait";
        // The silence limit must outlast bash's start on a busy machine, or
        // SIGTERM comes before the trap; the grace, its answer.
        let patient = RunRequest {
            grace: Duration::from_secs(5),
            ..request(&dir, command, limits(30.0, STARTED))
        };
        let outcome = run_now(patient).await;
        assert_eq!(
            summary(&outcome),
            r#"timeout exit=-1 reason=no_output_timeout mode=soft cancelled=false leftovers=false stdout="started\ncaught TERM\n" stderr="""#
        );
    }

    #[tokio::test]
    async fn a_command_that_ignores_sigterm_is_killed_after_the_grace() {
        let dir = TempDir::new("hard");
        let outcome =
            run_now(request(&dir, "trap '' TERM; sleep 600", limits(30.0, STARTED))).await;
        assert_eq!(
            summary(&outcome),
            r#"timeout exit=-1 reason=no_output_timeout mode=hard cancelled=false leftovers=false stdout="" stderr="""#
        );
        // The silence limit, then the whole grace, then SIGKILL.
        assert_duration(&outcome, STARTED + 0.3, STARTED + 1.0);
        assert_group_gone(&outcome);
    }

    #[tokio::test]
    async fn background_grandchildren_die_with_the_command() {
        let dir = TempDir::new("grandchildren");
        let command = "sleep 300 & sleep 300 & echo started; wait";
        let outcome = run_now(request(&dir, command, limits(30.0, STARTED))).await;
        assert_eq!(
            summary(&outcome),
            r#"timeout exit=-1 reason=no_output_timeout mode=soft cancelled=false leftovers=false stdout="started\n" stderr="""#
        );
        assert_group_gone(&outcome);
    }

    #[tokio::test]
    async fn a_daemonised_subshell_dies_with_the_command() {
        let dir = TempDir::new("subshell");
        let command = "(sleep 300 &); echo started; sleep 100";
        let outcome = run_now(request(&dir, command, limits(30.0, STARTED))).await;
        assert_eq!(
            summary(&outcome),
            r#"timeout exit=-1 reason=no_output_timeout mode=soft cancelled=false leftovers=false stdout="started\n" stderr="""#
        );
        assert_group_gone(&outcome);
    }

    #[tokio::test]
    async fn what_a_finished_command_leaves_running_is_stopped() {
        let dir = TempDir::new("leftovers");
        // The background sleep holds stdout open, so without stopping it the
        // run would wait for it.
        let outcome = run_now(request(&dir, "sleep 300 & echo hi", limits(30.0, 10.0))).await;
        assert_eq!(
            summary(&outcome),
            r#"success exit=0 reason=- mode=- cancelled=false leftovers=true stdout="hi\n" stderr="""#
        );
        assert_duration(&outcome, 0.0, 1.0);
        assert_group_gone(&outcome);
    }

    #[tokio::test]
    async fn output_beyond_the_cap_is_cut_and_complete_in_its_log() {
        let dir = TempDir::new("spill");
        let capped = RunRequest {
            stream_cap: 100,
            ..request(&dir, "seq 1 10000; echo oops >&2", limits(10.0, 5.0))
        };
        let store = Arc::clone(&capped.output);
        let outcome = run_now(capped).await;
        let full: String = (1..=10000).map(|i| format!("{i}\n")).collect();
        assert_eq!(outcome.status, RunStatus::Success);
        assert!(outcome.stdout.truncated);
        assert!(outcome.stdout.text.starts_with("1\n2\n3\n"), "{}", outcome.stdout.text);
        assert!(outcome.stdout.text.ends_with("9999\n10000\n"), "{}", outcome.stdout.text);
        // Cut on line boundaries: what is shown and what is left out make
        // the whole.
        let (head, tail) = outcome.stdout.text.split_once("[... ").expect("an omission line");
        let tail = tail.split_once(" ...]\n").expect("its end").1;
        assert_eq!(head.len() + tail.len() + outcome.stdout.omitted_chars as usize, full.len());
        let spill = outcome.stdout.full_output_path.as_ref().expect("saved");
        let name = spill.file_name().expect("name").to_string_lossy().into_owned();
        assert!(name.starts_with("run-1-") && name.ends_with(".stdout"), "{name}");
        assert_eq!(std::fs::read_to_string(spill).expect("log file"), full);
        // stderr's "oops\n" takes 6 of the 100 characters the two streams
        // share, as JSON writes them (a newline is `\n`): the head has room
        // for 47, lines 1 to 14 whole; "15", the line (0-based: 14) where
        // the text left out begins, is not cut.
        assert_eq!(outcome.stdout.lines_before_omission, 14);
        assert!(outcome.stdout.text.contains("13\n14\n[... "), "{}", outcome.stdout.text);
        // The store reads the whole stream back, and the run is over.
        let log = store.get_stream(Some(outcome.number), Stream::Stdout).expect("kept");
        let page = log.read(19, 5000).expect("read");
        let from_20: String = (20..=5019).map(|i| format!("{i}\n")).collect();
        assert!(page.text == from_20, "{} lines from {}", page.lines, page.first_line);
        assert_eq!((page.total_lines, page.running, page.exit_code), (10_000, false, Some(0)));
        assert_eq!(log.read(-1, 1).expect("read").text, "10000\n");
        // The short stream is whole, kept in memory, and no file was made.
        assert_eq!((outcome.stderr.text.as_str(), outcome.stderr.truncated), ("oops\n", false));
        let err = store.get_stream(Some(outcome.number), Stream::Stderr).expect("kept");
        assert_eq!((err.read(0, 10).expect("read").text, err.path()), ("oops\n".to_owned(), None));
        assert_eq!(std::fs::read_dir(&dir.0).expect("dir").count(), 1, "one file: stdout's");
    }

    /// Issue 18: stdout and stderr share one cap, counted as JSON writes
    /// them; a quiet stream leaves its part to the other.
    #[tokio::test]
    async fn the_two_streams_share_one_cap() {
        let dir = TempDir::new("share");
        let own = |shown: &Shown| {
            let notice = shown.omission.clone().map_or("", |range| &shown.text[range]);
            output::json_chars(&shown.text) - output::json_chars(notice)
        };
        let both = "seq 1 20000; seq 1 20000 >&2; printf '\\\"\\001%.0s' $(seq 500) >&2";
        let capped = RunRequest { stream_cap: 2_000, ..request(&dir, both, limits(10.0, 5.0)) };
        let outcome = run_now(capped).await;
        assert!(outcome.stdout.truncated && outcome.stderr.truncated);
        assert!(own(&outcome.stdout) + own(&outcome.stderr) <= 2_000);
        assert!(own(&outcome.stdout) > 900 && own(&outcome.stderr) > 900);
        assert!(outcome.stderr.full_output_path.is_some(), "{:?}", outcome.stderr);
        assert!(outcome.stderr.text.ends_with("\"\u{1}"), "{:?}", outcome.stderr.text);
        let quiet = "seq 1 20000; echo oops >&2";
        let capped = RunRequest { stream_cap: 2_000, ..request(&dir, quiet, limits(10.0, 5.0)) };
        let outcome = run_now(capped).await;
        assert_eq!(outcome.stderr.text, "oops\n");
        assert!((1_900..=1_994).contains(&own(&outcome.stdout)), "{}", own(&outcome.stdout));
    }

    #[tokio::test]
    async fn a_character_split_between_writes_is_decoded_whole() {
        let dir = TempDir::new("utf8");
        let command =
            r"printf 'caf\xc3'; sleep 0.2; printf '\xa9 \xe2\x82'; sleep 0.2; printf '\xac \xff\n'";
        let outcome = run_now(request(&dir, command, limits(5.0, 2.0))).await;
        assert_eq!(outcome.stdout.text, "café € \u{FFFD}\n");
    }

    #[tokio::test]
    async fn a_missing_cwd_is_an_error_that_says_what_to_do() {
        let dir = TempDir::new("nocwd");
        let missing = dir.0.join("nope");
        let bad_cwd =
            RunRequest { cwd: Some(missing.clone()), ..request(&dir, "true", limits(5.0, 2.0)) };
        let outcome = run_now(bad_cwd).await;
        let expected = format!(
            "the working directory {} does not exist; choose an existing directory",
            missing.display()
        );
        assert_eq!(
            summary(&outcome),
            format!(
                "error exit=-1 reason=- mode=- cancelled=false leftovers=false stdout=\"\" stderr={expected:?}"
            )
        );
        assert_eq!(outcome.pgid, None);
    }

    #[tokio::test]
    async fn cancelling_the_request_stops_the_command_quickly() {
        let dir = TempDir::new("cancel");
        let cancel = CancellationToken::new();
        let canceller = cancel.clone();
        // Cancel as soon as the command is known to be running: when it says
        // its marked sleep started, through a FIFO (opened for reading and
        // writing, so it never reads as ended before the command writes).
        let ready = dir.0.join("ready");
        nix::unistd::mkfifo(&ready, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
        let mut said = tokio::net::unix::pipe::OpenOptions::new()
            .read_write(true)
            .open_receiver(&ready)
            .expect("the FIFO opens");
        tokio::spawn(async move {
            let mut line = [0u8; 1];
            let heard = tokio::time::timeout(
                Duration::from_secs(10),
                tokio::io::AsyncReadExt::read(&mut said, &mut line),
            )
            .await;
            assert!(matches!(heard, Ok(Ok(1))), "the command never said it started: {heard:?}");
            canceller.cancel();
        });
        let command = format!("echo started; sleep 300.4242 & echo > {}; wait", ready.display());
        let outcome = run(request(&dir, &command, limits(60.0, 60.0)), cancel).await;
        assert_eq!(
            summary(&outcome),
            r#"error exit=-1 reason=- mode=soft cancelled=true leftovers=false stdout="started\n" stderr="""#
        );
        assert_duration(&outcome, 0.0, 2.0);
        assert_group_gone(&outcome);
        assert_eq!(pids_with_argument("300.4242"), Vec::<i32>::new());
    }

    #[tokio::test]
    async fn the_guard_hears_of_the_group_while_it_runs() {
        let dir = TempDir::new("guard");
        let record = dir.0.join("guard-lines");
        let record_arg = record.to_str().expect("utf-8 path");
        let guard = Arc::new(
            Guard::spawn(Path::new("bash"), &["-c", "cat > \"$0\"", record_arg]).expect("guard"),
        );
        let watched =
            RunRequest { guard: Some(guard.clone()), ..request(&dir, "true", limits(5.0, 2.0)) };
        let outcome = run_now(watched).await;
        let pgid = outcome.pgid.expect("started");
        let guard = Arc::into_inner(guard).expect("the run let go of the guard");
        assert!(guard.shutdown(Duration::from_secs(10)).is_some());
        let lines = std::fs::read_to_string(&record).expect("recorded lines");
        assert_eq!(lines, format!("+g {pgid}\n-g {pgid}\nend\n"));
    }

    /// Pids of live processes with `argument` among their arguments.
    fn pids_with_argument(argument: &str) -> Vec<i32> {
        let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
        entries
            .flatten()
            .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmdline| {
                    cmdline.split(|&b| b == 0).any(|arg| arg == argument.as_bytes())
                })
            })
            .filter(|pid| {
                // A killed process can linger as a zombie; it is dead all the same.
                std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                    !stat.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z')
                })
            })
            .collect()
    }
}
