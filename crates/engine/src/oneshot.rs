//! The one-shot runner behind the `run` tool: one command through `bash -c`
//! in a fresh process group, scope and (where the host allows it) control
//! group, under both limits of the timeout policy, with stdout and stderr
//! each kept whole in a command log of the caller's store and shown capped.
//!
//! Whatever happens to the command, the result is a [`RunOutcome`] whose
//! [`RunEnd`] says which end it came to and carries only what that end has.
//! Starting the command is `launch`, watching it to its end is `watch`.
//!
//! Not here: choosing the limits (`policy`), wording the outcome for an
//! agent (the server), masking (every piece of output passes `output::pass`
//! through the sinks, with the request's [`Secrets`]).
//!
//! Invariant: a one-shot run leaves nothing behind. Whatever it started, in
//! its group or anywhere else, is stopped before [`run`] returns, and a run
//! dropped before its end kills what it started.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::guard::Guard;
use crate::limits::{Counts, LimitHit, ResourceLimits};
use crate::mask::Secrets;
use crate::output::{self, Shown, SpillLimits, SpillStore};
use crate::output::{OutputSink, OutputStore, StoreLimits};
use crate::policy::Limits;
use crate::process::{self, Scope, TerminationMode};
use crate::sandbox::Policy;

mod launch;
#[cfg(test)]
mod tests;
mod watch;

use watch::{Ending, GroupWatch, RunStop, Streams};

/// The grace period between SIGTERM and SIGKILL unless a request sets one.
pub(crate) const DEFAULT_GRACE: Duration = Duration::from_secs(5);

/// Characters shown of each stream unless a request sets a cap.
pub(crate) const DEFAULT_STREAM_CAP: usize = 20_000;

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

/// How a run ended: each end with what it has, so that no impossible
/// combination (a cancelled run with an exit code, a timeout without the
/// limit that fired) can be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEnd {
    /// The main process exited on its own.
    Exited {
        /// Its exit code (-1 if the kernel gave neither a code nor a
        /// signal).
        code: i32,
        /// Whether it left processes running (`server &`, say), which were
        /// then stopped.
        stopped_leftovers: bool,
    },
    /// The main process died of a signal we did not send.
    Killed {
        /// The signal's number.
        signal: i32,
        /// Whether it left processes running, which were then stopped.
        stopped_leftovers: bool,
    },
    /// A limit fired and we stopped the process group.
    TimedOut {
        /// Which limit.
        reason: TimeoutReason,
        /// How the group went away: within the grace period, or by SIGKILL.
        stopped: TerminationMode,
    },
    /// The caller cancelled the request and we stopped the process group.
    Cancelled {
        /// How the group went away.
        stopped: TerminationMode,
    },
    /// The command did not start; the outcome's stderr says why.
    NotStarted,
}

impl RunEnd {
    /// The end of a main process that exited with `status`.
    fn exited(status: std::process::ExitStatus, stopped_leftovers: bool) -> RunEnd {
        use std::os::unix::process::ExitStatusExt as _;
        match (status.code(), status.signal()) {
            (None, Some(signal)) => RunEnd::Killed { signal, stopped_leftovers },
            (code, _) => RunEnd::Exited { code: code.unwrap_or(-1), stopped_leftovers },
        }
    }

    /// The seed's three words for this end.
    pub fn status(self) -> RunStatus {
        match self {
            RunEnd::Exited { .. } | RunEnd::Killed { .. } => RunStatus::Success,
            RunEnd::TimedOut { .. } => RunStatus::Timeout,
            RunEnd::Cancelled { .. } | RunEnd::NotStarted => RunStatus::Error,
        }
    }

    /// The seed's exit code: the code; 128+N for death by signal N; -1 when
    /// we stopped the command or it never started.
    pub fn exit_code(self) -> i32 {
        match self {
            RunEnd::Exited { code, .. } => code,
            RunEnd::Killed { signal, .. } => 128 + signal,
            RunEnd::TimedOut { .. } | RunEnd::Cancelled { .. } | RunEnd::NotStarted => -1,
        }
    }

    /// Which limit fired, when one did.
    pub fn timeout_reason(self) -> Option<TimeoutReason> {
        match self {
            RunEnd::TimedOut { reason, .. } => Some(reason),
            _ => None,
        }
    }

    /// How the process group went away when we stopped it (timeout or
    /// cancel).
    pub fn termination_mode(self) -> Option<TerminationMode> {
        match self {
            RunEnd::TimedOut { stopped, .. } | RunEnd::Cancelled { stopped } => Some(stopped),
            _ => None,
        }
    }

    /// Whether the request was cancelled.
    pub fn cancelled(self) -> bool {
        matches!(self, RunEnd::Cancelled { .. })
    }

    /// Whether the main process exited but left processes running, which
    /// were then stopped.
    pub fn stopped_leftovers(self) -> bool {
        match self {
            RunEnd::Exited { stopped_leftovers, .. } | RunEnd::Killed { stopped_leftovers, .. } => {
                stopped_leftovers
            }
            _ => false,
        }
    }
}

/// Everything about one run: a command that fails, times out or is
/// cancelled is an outcome too, with all the output it printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOutcome {
    /// How the run ended, with what that end has.
    pub end: RunEnd,
    /// The run's number in its store ([`RunRequest::output`]), to read its
    /// streams back by line.
    pub number: u64,
    /// What is shown of stdout, and where the rest is.
    pub stdout: Shown,
    /// What is shown of stderr, and where the rest is. When the command
    /// could not start, the reason and what to do about it.
    pub stderr: Shown,
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

impl RunOutcome {
    /// The seed's three words for the end ([`RunEnd::status`]).
    pub fn status(&self) -> RunStatus {
        self.end.status()
    }

    /// The seed's exit code ([`RunEnd::exit_code`]).
    pub fn exit_code(&self) -> i32 {
        self.end.exit_code()
    }

    /// Which limit fired ([`RunEnd::timeout_reason`]).
    pub fn timeout_reason(&self) -> Option<TimeoutReason> {
        self.end.timeout_reason()
    }

    /// How the group went away when we stopped it
    /// ([`RunEnd::termination_mode`]).
    pub fn termination_mode(&self) -> Option<TerminationMode> {
        self.end.termination_mode()
    }

    /// Whether the request was cancelled ([`RunEnd::cancelled`]).
    pub fn cancelled(&self) -> bool {
        self.end.cancelled()
    }

    /// Whether leftovers were stopped ([`RunEnd::stopped_leftovers`]).
    pub fn stopped_leftovers(&self) -> bool {
        self.end.stopped_leftovers()
    }
}

/// Runs `request.command` to completion, a limit, or `cancel`, and returns
/// the outcome. bash is the one [`process::bash`] found at start-up, whatever
/// `PATH` the request's `env` sets. It never fails: a command that cannot start is an outcome
/// that ends [`RunEnd::NotStarted`].
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

/// [`run`], each stream shown up to the whole cap: the command is
/// launched, watched to its end, and its end and output made an outcome.
async fn run_streams(mut request: RunRequest, cancel: CancellationToken) -> RunOutcome {
    let started = Instant::now();
    // The log names its command (a read of the log shows it): masked.
    let logs = request.output.begin_run(&request.secrets.mask(&request.command).0);
    let number = logs.number;
    let mut stdout = OutputSink::new(logs.stdout, request.stream_cap, Arc::clone(&request.secrets));
    let mut stderr = OutputSink::new(logs.stderr, request.stream_cap, Arc::clone(&request.secrets));
    let mut launched = match launch::launch(&request) {
        Ok(launched) => launched,
        Err(reason) => {
            let command = request.secrets.mask(&request.command).0;
            tracing::debug!(%command, %reason, "command did not start");
            stderr.push(&reason);
            return RunOutcome {
                end: RunEnd::NotStarted,
                number,
                stdout: finish_sink(&mut stdout, -1),
                stderr: finish_sink(&mut stderr, -1),
                duration: started.elapsed(),
                limits: request.limits,
                pgid: None,
                limit_hits: Vec::new(),
            };
        }
    };
    let pgid = launched.pgid;
    let mut watch = GroupWatch::new(pgid, launched.targets.clone(), request.guard.clone());
    tracing::debug!(pgid, scope = launched.scope.value(), "command started");
    let stdin_writer = launch::write_stdin(&mut launched.child, request.stdin.take());
    let mut streams = Streams::new(&mut launched.child, stdout, stderr);
    let ending = watch::watch_run(&mut launched, &request, &cancel, &mut streams).await;
    watch.finished();
    if let Some(writer) = stdin_writer {
        writer.abort();
    }
    let end = end_of(&ending, &launched.scope);
    let (stdout, stderr) = streams.finish(end.exit_code());
    let limit_hits = limit_hits(&launched.scope, end, &stdout, &stderr);
    let outcome = RunOutcome {
        end,
        number,
        stdout,
        stderr,
        duration: started.elapsed(),
        limits: request.limits,
        pgid: Some(pgid),
        limit_hits,
    };
    tracing::debug!(
        pgid,
        status = outcome.status().as_str(),
        exit_code = outcome.exit_code(),
        reason = outcome.timeout_reason().map(TimeoutReason::as_str),
        duration_ms = outcome.duration.as_millis() as u64,
        "command ended"
    );
    outcome
}

/// The end of a run that started, from what its watch saw.
fn end_of(ending: &Ending, scope: &Scope) -> RunEnd {
    // When the group was already gone at the moment we came to stop it, it
    // went away without needing SIGKILL.
    let stopped = ending.kill.unwrap_or(TerminationMode::Soft);
    match ending.stop {
        Some(RunStop::Limit(reason)) => RunEnd::TimedOut { reason, stopped },
        Some(RunStop::Cancelled) => RunEnd::Cancelled { stopped },
        stop @ (Some(RunStop::Leftovers) | None) => {
            // In a PID namespace, what the command left died with its shell
            // before we could look: its keeper says so.
            let stopped_leftovers = (stop.is_some() && ending.kill.is_some())
                || (stop.is_none() && scope.left_in_namespace());
            match ending.exit {
                Some(status) => RunEnd::exited(status, stopped_leftovers),
                None => RunEnd::Exited { code: -1, stopped_leftovers },
            }
        }
    }
}

/// The resource limits that stopped something in the run, as its control
/// group counted them, and (for a run that did not exit 0) as its output
/// suggests.
fn limit_hits(scope: &Scope, end: RunEnd, stdout: &Shown, stderr: &Shown) -> Vec<LimitHit> {
    let Some(limits) = scope.limits() else { return Vec::new() };
    // The group is the command's own, so its counters started at 0.
    let mut hits = limits.hits_since(&Counts::default());
    if end.exit_code() != 0 {
        let printed = format!("{}\n{}", stdout.text, stderr.text);
        hits.extend(limits.inferred_hits(&printed));
    }
    hits
}

/// Ends a stream's log with the run's `exit_code` and returns what the
/// outcome shows of it.
fn finish_sink(sink: &mut OutputSink, exit_code: i32) -> Shown {
    sink.finish(exit_code);
    sink.take_shown()
}
