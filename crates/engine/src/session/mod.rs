//! A persistent shell session: one bash in a real PTY that keeps its working
//! directory, environment, functions and jobs between commands.
//!
//! One call at a time drives the session (a `tokio::sync::Mutex` held for
//! the whole call); the PTY reader thread feeds every byte through the
//! renderer into shared state and wakes the call, so a command's end is
//! seen the moment its marker arrives. Calls return softly (the command
//! keeps running, exit code -1) when output stops for a while, when the
//! program waits for input, or when the agent's wait runs out; a cancelled
//! call takes nothing, so the next one reports everything. A supervisor
//! stops a command only after it has run unwatched (no call waiting on it,
//! polling it or sending it input) past its limit, and then stops the whole
//! command line. A shell that dies is restarted in the same directory. This
//! module does not know about MCP or how replies are worded.
//!
//! This file holds the public face: the request, reply and note types,
//! [`Session`] with its `execute` dispatch (from the request and what the
//! shell is doing: run, poll, send input, or refuse), restarting a shell
//! that died, and the read-only views that listings use. Behind it:
//!
//! - `driver`: `Shell`, one bash and its PTY: spawn and the start-up
//!   handshake, running a command, input and keys, settling a command that
//!   is ending, clean-up after an interrupt, stop.
//! - `state`: what the PTY reader thread shares with calls and tasks
//!   (`Shared`, `State`, `Running`): ingesting output through the renderer
//!   and routing what it commits; `wait_for`, the one way to wait on it.
//! - `wait`: a call waiting on the running command (end, quiet, input wait,
//!   timeout, cancellation, progress) and the replies it builds.
//! - `supervise`: the per-shell supervisor task: input-wait sampling,
//!   unwatched time, stopping a command past its limit.
//! - `integration`: keeping the shell integration alive: nested shells, the
//!   reinstall handshake, the watcher task.
//! - `incomplete`: commands `bash -n` finds incomplete, held until complete.
//!
//! Locks: `Session::shell` (tokio) is held for the whole of a call;
//! `current`, `live` and `cancelled_at` (std) only to copy or swap a value,
//! never while taking another lock; the shared state's std mutex briefly,
//! never across `.await`. A session is owned by the registry
//! (`crate::registry`), which alone starts and closes it.

mod channel;
mod driver;
mod incomplete;
mod integration;
mod state;
mod supervise;
mod wait;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::bash_script::{self as shell, ShellFiles};
use crate::guard::Guard;
use crate::keys;
use crate::output::{Shown, SpillLimits, SpillStore};
use crate::process::{self, TerminationMode};
use crate::store::{OutputStore, StoreLimits};

use driver::Shell;
use incomplete::Step;
use state::{RunningState, Shared, exit_code, wait_for};

/// How a session is set up. Every field has a sensible default from
/// [`SessionConfig::new`].
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// A short name used in thread names and spill file names.
    pub name: String,
    /// Where the shell starts, and where `reset` takes it back to.
    pub cwd: PathBuf,
    /// The shell program.
    pub shell: PathBuf,
    /// A start-up file sourced before our settings (normally `~/.bashrc`).
    pub user_rc: Option<PathBuf>,
    /// Extra environment for the shell.
    pub env: Vec<(String, String)>,
    /// Terminal size.
    pub rows: u16,
    /// Terminal size.
    pub cols: u16,
    /// Private directory for the shell's files (created, mode 0700).
    pub work_dir: PathBuf,
    /// Where complete outputs that were cut are saved, and their limits.
    pub spill: Arc<SpillStore>,
    /// Characters of output shown in one reply before head and tail are cut.
    pub output_cap: usize,
    /// A call without a timeout returns after this long without new output.
    pub no_output_return: Duration,
    /// A call without a timeout returns after this long in any case, even
    /// while output keeps coming (below the 60 s after which common clients
    /// give up on a request).
    pub max_wait: Duration,
    /// How long bash may take to start and show its first prompt.
    pub startup_timeout: Duration,
    /// Time between SIGTERM and SIGKILL when processes are stopped.
    pub grace: Duration,
    /// The orphan guard told about every shell, if the server runs one.
    pub guard: Option<Arc<Guard>>,
    /// How many commands' complete output the session keeps, and how much.
    pub output_limits: StoreLimits,
    /// The session's store of complete outputs: made by [`Session::new`]
    /// (from `spill` and `output_limits`), so `None` in a template.
    pub output: Option<Arc<OutputStore>>,
}

impl SessionConfig {
    /// Defaults: bash with the user's `~/.bashrc`, 50x200, 30,000
    /// characters, a 30 s soft return, a 50 s longest wait, a 5 s kill
    /// grace, spill files in `spill_dir` with the default [`SpillLimits`]
    /// and no retention.
    pub fn new(name: &str, cwd: PathBuf, work_dir: PathBuf, spill_dir: PathBuf) -> SessionConfig {
        let user_rc = std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".bashrc"));
        SessionConfig {
            name: name.to_owned(),
            cwd,
            shell: PathBuf::from("bash"),
            user_rc,
            env: Vec::new(),
            rows: 50,
            cols: 200,
            work_dir,
            spill: SpillStore::new(spill_dir, "", SpillLimits::default(), None),
            output_cap: 30_000,
            no_output_return: Duration::from_secs(30),
            max_wait: Duration::from_secs(50),
            startup_timeout: Duration::from_secs(15),
            grace: Duration::from_secs(5),
            guard: None,
            output_limits: StoreLimits::default(),
            output: None,
        }
    }
}

/// One call on a session, in the terms of the OpenHands `terminal` tool.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// A command to run; empty to poll a running one; with `is_input`, text
    /// or a key for the running program.
    pub command: String,
    /// Send `command` to the running program instead of running it.
    pub is_input: bool,
    /// How long this call may wait before handing control back.
    pub timeout: Option<Duration>,
    /// Start a fresh shell in the original directory first.
    pub reset: bool,
    /// The longest a new command may run in the foreground **unwatched**
    /// (no call waiting on it, polling it or sending it input) before it is
    /// stopped: the policy's execution limit; `None` for no limit. The limit
    /// in force is the larger of this and the last call's `timeout`, and
    /// time the command spends blocked reading the terminal is not counted.
    pub exec_limit: Option<Duration>,
    /// Told about once a second while the call waits, if set.
    pub progress: Option<ProgressHook>,
}

/// What a waiting call reports about once a second.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    /// The report's number within the call, from 1: strictly increasing.
    pub count: u64,
    /// Time since the call began.
    pub elapsed: Duration,
    /// The newest line of output with text on it; empty when there is
    /// none yet.
    pub line: String,
}

/// A callback a waiting call tells its [`Progress`] to. It runs on the
/// call's task, so it must return quickly (hand the value to a channel or
/// spawn the work).
#[derive(Clone)]
pub struct ProgressHook(Arc<dyn Fn(Progress) + Send + Sync>);

impl ProgressHook {
    /// A hook that calls `report`.
    pub fn new(report: impl Fn(Progress) + Send + Sync + 'static) -> ProgressHook {
        ProgressHook(Arc::new(report))
    }
}

impl std::fmt::Debug for ProgressHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProgressHook")
    }
}

/// How often a waiting call reports progress.
pub const PROGRESS_INTERVAL: Duration = Duration::from_secs(1);

/// Whether the command finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// The command finished; `exit_code` is set.
    Completed,
    /// The command is still running; the call stopped waiting because of
    /// this.
    Running(WaitEnded),
}

/// Why a call stopped waiting for a running command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitEnded {
    /// It printed nothing new for this long.
    NoNewOutput(Duration),
    /// The call's wait (its `timeout`, or the longest wait) ran out.
    Timeout(Duration),
    /// The call did not wait (its command was not executed).
    NotWaited,
    /// The program is blocked reading the terminal and its output has
    /// stopped: it waits for the agent.
    WaitingForInput,
    /// The shell reported that the command never ran: something broke the
    /// shell integration (`reset` restores it).
    IntegrationDamaged,
    /// The client cancelled the call. The command was not touched, and
    /// nothing it printed was consumed: the next call reports it.
    Cancelled,
}

/// Something the agent should be told besides the output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Note {
    /// The session was reset before this call's command.
    Reset,
    /// The shell exited (how, as text); a new one was started in `cwd`.
    ShellRestarted {
        /// How the old shell ended, e.g. "exit code 3" or "signal 9".
        how: String,
        /// Where the new shell starts.
        cwd: PathBuf,
    },
    /// A new command arrived while another was running; it was not run.
    NotExecuted {
        /// The command that was not run.
        command: String,
    },
    /// A key was sent to the running program.
    KeySent(String),
    /// Text was typed to the running program.
    InputSent,
    /// Input was not sent: the command had already finished.
    InputNotSent,
    /// Only `sent` of the `total` bytes of text were delivered: the program
    /// is not reading its input, and the terminal's queue is full.
    InputPartlySent {
        /// Bytes the terminal accepted.
        sent: usize,
        /// Bytes of the input, Enter included.
        total: usize,
    },
    /// A key arrived while no command was running; nothing needed it, so
    /// it was not sent (the shell's prompt is left as it is).
    KeyNotNeeded(String),
    /// This call stopped waiting because the session is being closed.
    SessionClosing,
    /// The client cancelled the previous call on this session this long
    /// ago; the command was left running, and this reply carries what it
    /// printed since.
    PreviousCallCancelled {
        /// Time since the cancellation.
        ago: Duration,
    },
    /// The output is the current screen of a full-screen program.
    FullScreen,
    /// Text printed while no command was running (background jobs).
    IdleOutput(String),
    /// The program is blocked waiting for input from the terminal.
    WaitingForInput,
    /// The command ran unwatched past its limit and was stopped, with
    /// everything later in the same command line.
    Killed {
        /// The limit it exceeded: time with no call waiting on it, polling
        /// it or sending it input (time waiting for input not counted).
        limit: Duration,
        /// How it died: after SIGTERM, or SIGKILL after the grace period.
        mode: TerminationMode,
    },
    /// A nested interactive bash started (`bash`, `nix-shell`); the
    /// integration was installed in it, so commands now run inside it
    /// with exit codes and cwd, and `exit` returns to the outer shell.
    NestedShellStarted,
    /// A nested shell exited with `status`; commands run in the shell one
    /// level out again.
    NestedShellExited {
        /// The nested shell's exit status.
        status: i32,
    },
    /// The shell was replaced (`exec bash`) and lost the integration; it
    /// was reinstalled in the new shell.
    IntegrationReinstalled,
    /// A shell lost the integration and it could not be reinstalled within
    /// a few seconds; the command is driven as an interactive program.
    ReinstallFailed,
    /// An interactive shell other than bash (named) is reading the
    /// terminal: its commands are sent with `is_input`, without exit codes.
    OtherShell(String),
    /// A remote or container session (named: `ssh`, `docker`) is reading
    /// the terminal: it is driven with `is_input`.
    RemoteShell(String),
    /// The shell reported that the command never ran: the shell
    /// integration is damaged, and `reset` restores it.
    IntegrationDamaged,
    /// The command's end (and exit code) came from the fallback in `PS1`,
    /// not from the integration's prompt (`PROMPT_COMMAND`), which did not
    /// run: the integration is damaged, and `reset` restores it.
    PromptNotRun,
    /// The integration's function that keeps a command's status is gone,
    /// so the exit code may be wrong: the integration is damaged, and
    /// `reset` restores it.
    StatusLost,
    /// A program that calls itself bash (its command line here) but does
    /// not run the session's bash is reading the terminal: the integration
    /// is not installed in it.
    NamedBash(String),
    /// The shell itself is reading the terminal and has not reported the
    /// end of the command: a builtin such as `read` waits for input, or a
    /// command damaged the shell integration and the shell sits at its
    /// prompt (`reset` restores it).
    ShellReading,
    /// The shell reported the command's end but its end marker never
    /// appeared in the output (a command redirected or swallowed it): the
    /// command ended after all its output was read.
    EndMarkerMissing,
    /// A command was not typed because the shell is not at its prompt:
    /// this process (pid, command line) has the terminal.
    ShellNotAtPrompt {
        /// The foreground process group's leader.
        pid: i32,
        /// Its command line.
        command_line: String,
    },
    /// The shell's standard output is not the terminal (`exec >file`), so
    /// commands' output does not reach the reply.
    OutputElsewhere,
    /// The command is incomplete (an open quote, `if` without `fi`, a
    /// here-document without its end): the shell waits for the rest, sent
    /// with `is_input`; C-c discards it.
    Incomplete,
}

/// What one call returns.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The command this reply is about.
    pub command: String,
    /// What the command printed since the last reply, cut to the cap.
    pub output: Shown,
    /// Whether it finished, or why the call stopped waiting.
    pub status: Status,
    /// The exit code, once finished.
    pub exit_code: Option<i32>,
    /// The shell's working directory.
    pub cwd: PathBuf,
    /// The Python interpreter `python` would run.
    pub python: Option<PathBuf>,
    /// Time since the command started.
    pub duration: Duration,
    /// Whether earlier replies already showed part of this command's output.
    pub continued: bool,
    /// What else the agent should know.
    pub notes: Vec<Note>,
    /// The end of a previous command that finished while nobody was
    /// listening, reported before this one.
    pub previous: Option<Box<Reply>>,
    /// The command's number in the session's output store, to read its
    /// complete output by line.
    pub number: Option<u64>,
    /// The line of the command's complete output where this reply's output
    /// begins.
    pub first_line: u64,
    /// For a command still running under a limit: if no call waits on it,
    /// polls it or sends it input within this time from now (time it spends
    /// waiting for input not counted), it is stopped.
    pub look_again_within: Option<Duration>,
}

/// A request we cannot carry out; the message says what to do instead.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The request itself is wrong.
    #[error("{0}")]
    Invalid(String),
    /// The shell could not be started or driven.
    #[error("{0}")]
    Shell(String),
}

/// A persistent shell session.
pub struct Session {
    config: SessionConfig,
    /// The shell, locked for the whole of each call: one call at a time.
    shell: tokio::sync::Mutex<Option<Shell>>,
    /// The live shell's shared state, readable while a call is waiting.
    current: Mutex<Option<Arc<Shared>>>,
    /// The live shell's pid and private files, for listings.
    live: Mutex<Option<(i32, ShellFiles)>>,
    /// When the client last cancelled a call that had not been reported on
    /// since; the next call says so.
    cancelled_at: Mutex<Option<Instant>>,
    /// Cancelled when the session is being closed: a call waiting on it
    /// returns at once instead of holding up the close.
    closing: CancellationToken,
}

/// What a session is doing, as a listing shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Activity {
    /// No shell has been started yet.
    NotStarted,
    /// At the prompt, waiting for a command.
    Idle,
    /// Running `command` for `elapsed`.
    Running {
        /// The command.
        command: String,
        /// Time since it started.
        elapsed: Duration,
    },
    /// `command` finished with `exit_code`; its end is not reported yet.
    Finished {
        /// The command.
        command: String,
        /// Its exit code.
        exit_code: i32,
    },
}

impl Session {
    /// A session whose shell starts on first use (or on [`Session::start`]).
    pub fn new(mut config: SessionConfig) -> Session {
        let store = OutputStore::new(Arc::clone(&config.spill), &config.name, config.output_limits);
        config.output = Some(store);
        Session {
            config,
            shell: tokio::sync::Mutex::new(None),
            current: Mutex::new(None),
            live: Mutex::new(None),
            cancelled_at: Mutex::new(None),
            closing: CancellationToken::new(),
        }
    }

    /// What the session is doing now. Never waits for a call in progress.
    pub fn activity(&self) -> Activity {
        let current = self.current.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let Some(shared) = current else { return Activity::NotStarted };
        let state = shared.lock();
        match &state.running {
            None => Activity::Idle,
            Some(running) => match running.finished {
                Some((exit_code, _)) => {
                    Activity::Finished { command: running.command.clone(), exit_code }
                }
                None => Activity::Running {
                    command: running.command.clone(),
                    elapsed: running.started_at.elapsed(),
                },
            },
        }
    }

    /// Puts a newly started shell in `slot`.
    fn install<'a>(&self, slot: &'a mut Option<Shell>, shell: Shell) -> &'a mut Shell {
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::clone(&shell.shared));
        *self.live.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((shell.pid, shell.files.clone()));
        slot.insert(shell)
    }

    /// The session's configuration.
    pub fn config(&self) -> &SessionConfig {
        &self.config
    }

    /// Starts the shell now, so the first command does not wait for it.
    pub async fn start(&self) -> Result<(), SessionError> {
        let mut shell = self.shell.lock().await;
        self.live_shell(&mut shell, &mut Vec::new()).await?;
        Ok(())
    }

    /// Carries out one call. `cancel` means the client gave up on the call:
    /// the wait ends, the command is left running untouched (under the
    /// unwatched-time limit), nothing it printed is consumed, and the next
    /// call reports it and says that this one was cancelled.
    pub async fn execute(
        &self,
        request: Request,
        cancel: CancellationToken,
    ) -> Result<Reply, SessionError> {
        validate(&request)?;
        // The wait ends when the client cancels, or when the session is
        // being closed (not for calls made by the close itself).
        let client = cancel;
        let (cancel, _link) = if self.closing.is_cancelled() {
            (client.clone(), None)
        } else {
            let call = self.closing.child_token();
            let link = {
                let (client, call) = (client.clone(), call.clone());
                tokio::spawn(async move {
                    tokio::select! {
                        () = client.cancelled() => call.cancel(),
                        () = call.cancelled() => {}
                    }
                })
            };
            (call, Some(AbortOnDrop(link)))
        };
        let mut slot = self.shell.lock().await;
        let mut notes = Vec::new();
        if cancel.is_cancelled() {
            // The client gave up before this call's turn came: do nothing
            // for it (its answer would be dropped).
            self.note_cancelled();
            return Err(SessionError::Invalid("the client cancelled this call".into()));
        }
        if let Some(at) = self.cancelled_at.lock().unwrap_or_else(|p| p.into_inner()).take() {
            notes.push(Note::PreviousCallCancelled { ago: at.elapsed() });
        }
        if request.reset {
            if let Some(old) = slot.take() {
                old.stop(&self.config).await;
            }
            notes.push(Note::Reset);
            let shell = self.live_shell(&mut slot, &mut Vec::new()).await?;
            if request.command.trim().is_empty() {
                return Ok(shell.idle_reply("", notes));
            }
        }
        let shell = self.live_shell(&mut slot, &mut notes).await?;
        let mut request = request;
        match shell.incomplete_step(&self.config, &request).await? {
            Step::Reply(reply) => {
                let mut reply = *reply;
                reply.notes.splice(0..0, notes);
                reply.notes.extend(shell.take_integration_notes());
                return Ok(reply);
            }
            Step::Run(command) => {
                request.command = command;
                request.is_input = false;
            }
            Step::Pass => {}
        }
        let command = request.command.as_str();
        let is_key = keys::is_key(command);
        let mut running = shell.running_state();
        if running == RunningState::Unfinished && !command.trim().is_empty() {
            // Never refuse a command, or drop a key, for a command that has
            // in fact just ended.
            shell.settle(&self.config).await;
            running = shell.running_state();
        }
        if running == RunningState::Finished {
            shell.reap_interrupted(self.config.grace).await;
        }
        if running == RunningState::Unfinished {
            // Any call about the running command is a look at it.
            shell.touch(request.timeout);
        }
        let progress = request.progress.as_ref();
        let reply = match running {
            RunningState::Unfinished if command.trim().is_empty() => {
                shell.wait_reply(&self.config, request.timeout, notes, cancel, progress).await
            }
            RunningState::Unfinished if request.is_input || is_key => {
                let input = keys::parse(command).map_err(SessionError::Invalid)?;
                notes.extend(shell.send_input(input).await?);
                shell.wait_reply(&self.config, request.timeout, notes, cancel, progress).await
            }
            RunningState::Unfinished => {
                notes.push(Note::NotExecuted { command: command.to_owned() });
                Ok(shell.partial_reply(&self.config, WaitEnded::NotWaited, notes))
            }
            RunningState::Finished if command.trim().is_empty() => Ok(shell.finished_reply(notes)),
            RunningState::Finished if request.is_input || is_key => {
                notes.push(Note::InputNotSent);
                Ok(shell.finished_reply(notes))
            }
            RunningState::Finished => {
                let previous = shell.finished_reply(Vec::new());
                let mut reply = shell.run(&self.config, &request, notes, cancel).await?;
                reply.previous = Some(Box::new(previous));
                Ok(reply)
            }
            RunningState::None if command.trim().is_empty() => Err(SessionError::Invalid(
                "No command is running, so there is nothing to wait for. \
                 Send a command to run it."
                    .into(),
            )),
            RunningState::None if is_key => {
                // As at a prompt: a key with nothing to receive it is
                // harmless. It is not typed into the idle shell, where C-d
                // would end it and C-c would disturb its prompt.
                let name = match keys::parse(command) {
                    Ok(keys::Input::Key { name, .. }) => name,
                    _ => command.trim().to_owned(),
                };
                notes.push(Note::KeyNotNeeded(name));
                Ok(shell.idle_reply("", notes))
            }
            RunningState::None if request.is_input => Err(SessionError::Invalid(
                "No command is running, so there is nothing to send input to. \
                 Run a command first, or send this as a command with is_input=false."
                    .into(),
            )),
            RunningState::None => shell.run(&self.config, &request, notes, cancel).await,
        }?;
        if shell.has_exited() {
            // The command ended the shell: report it and start a new one in
            // the directory it was in.
            let cwd = shell.restart_dir(&self.config);
            let how = shell.exit_description();
            let mut reply = reply;
            reply.notes.extend(shell.take_integration_notes());
            if let Some(old) = slot.take() {
                old.stop(&self.config).await;
            }
            self.install(&mut slot, Shell::spawn(&self.config, &cwd).await?);
            reply.notes.push(Note::ShellRestarted { how, cwd });
            return Ok(reply);
        }
        let mut reply = reply;
        if reply.status == Status::Running(WaitEnded::Cancelled) {
            if client.is_cancelled() {
                self.note_cancelled();
            } else {
                reply.notes.push(Note::SessionClosing);
            }
        }
        reply.notes.extend(shell.take_integration_notes());
        Ok(reply)
    }

    /// Remembers that the client cancelled a call, for the next reply.
    fn note_cancelled(&self) {
        *self.cancelled_at.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
    }

    /// Makes a call waiting on this session return at once (with nothing
    /// taken from the session), so that closing it does not wait out that
    /// call's wait. Only for a session about to be closed.
    pub fn interrupt_waits(&self) {
        self.closing.cancel();
    }

    /// Stops the shell and everything it started.
    pub async fn close(&self) {
        if let Some(shell) = self.shell.lock().await.take() {
            shell.stop(&self.config).await;
        }
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = None;
        *self.live.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// The live shell, starting one when there is none or when the old one
    /// died while idle (which `notes` then reports).
    async fn live_shell<'a>(
        &self,
        slot: &'a mut Option<Shell>,
        notes: &mut Vec<Note>,
    ) -> Result<&'a mut Shell, SessionError> {
        if let Some(shell) = slot.as_mut()
            && shell.has_exited()
            && shell.running_state() == RunningState::None
        {
            let cwd = shell.restart_dir(&self.config);
            notes.push(Note::ShellRestarted { how: shell.exit_description(), cwd: cwd.clone() });
            if let Some(old) = slot.take() {
                old.stop(&self.config).await;
            }
            self.install(slot, Shell::spawn(&self.config, &cwd).await?);
        }
        match slot {
            Some(shell) => Ok(shell),
            None => Ok(self.install(slot, Shell::spawn(&self.config, &self.config.cwd).await?)),
        }
    }
}

/// How many lines [`Session::last_words`] keeps.
const LAST_WORDS_LINES: usize = 20;

/// A session's state and last output when it was closed.
#[derive(Debug, Clone)]
pub struct LastWords {
    /// What it was doing.
    pub activity: Activity,
    /// Its last lines of output not shown before (at most 20).
    pub output: String,
}

/// The last `n` lines of `text`.
fn last_lines(text: &str, n: usize) -> String {
    let trimmed = text.trim_end_matches('\n');
    let start = trimmed.rmatch_indices('\n').nth(n.saturating_sub(1)).map_or(0, |(i, _)| i + 1);
    trimmed[start..].to_owned()
}

/// Read-only views for listings and job watchers; none of them waits for a
/// call in progress.
impl Session {
    /// The shell's working directory as its last prompt reported it (the
    /// start directory before the shell has run anything).
    pub fn cwd(&self) -> PathBuf {
        let live = self.live.lock().unwrap_or_else(|p| p.into_inner()).clone();
        live.and_then(|(_, files)| shell::read_state(&files))
            .map_or_else(|| self.config.cwd.clone(), |state| state.cwd)
    }

    /// Whether the running command is blocked reading the terminal, as the
    /// supervisor last saw it.
    pub fn waiting_for_input(&self) -> bool {
        let current = self.current.lock().unwrap_or_else(|p| p.into_inner()).clone();
        current.is_some_and(|shared| {
            shared.lock().running.as_ref().is_some_and(|r| r.waiting_for_input)
        })
    }

    /// What the session was doing and the last lines it printed that no
    /// reply has shown yet, for a session about to be closed. Does not wait
    /// for a call in progress (its output is then not collected).
    pub async fn last_words(&self) -> LastWords {
        let activity = self.activity();
        let output = match activity {
            Activity::Running { .. } | Activity::Finished { .. } => {
                let poll = Request { timeout: Some(Duration::ZERO), ..Request::default() };
                // Once waits are interrupted, a call in progress returns at
                // once, so taking our turn is quick.
                if self.closing.is_cancelled() || self.shell.try_lock().is_ok() {
                    match self.execute(poll, CancellationToken::new()).await {
                        Ok(reply) => reply.output.text,
                        Err(_) => String::new(),
                    }
                } else {
                    String::new()
                }
            }
            Activity::Idle | Activity::NotStarted => {
                let current = self.current.lock().unwrap_or_else(|p| p.into_inner()).clone();
                current
                    .map(|shared| std::mem::take(&mut shared.lock().idle_output))
                    .unwrap_or_default()
            }
        };
        LastWords { activity, output: last_lines(&output, LAST_WORDS_LINES) }
    }

    /// Makes every finished line on the screen final, so that a read of the
    /// running command's output sees all its complete lines (a program can
    /// then no longer redraw them with cursor movement, as after a reply).
    pub fn commit_screen(&self) {
        let current = self.current.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(shared) = current {
            let mut state = shared.lock();
            state.screen.commit_complete_lines();
            state.route_committed(Instant::now());
        }
    }

    /// The session's store of complete command outputs.
    pub fn output(&self) -> &OutputStore {
        self.config.output.as_deref().expect("Session::new makes the store")
    }

    /// Live processes in the shell's session, the shell included; 0 before
    /// the shell starts.
    pub fn process_count(&self) -> usize {
        let live = self.live.lock().unwrap_or_else(|p| p.into_inner()).clone();
        live.map_or(0, |(pid, _)| process::live_session_members(pid).len())
    }

    /// Waits until the command running now ends, and returns it with its
    /// exit code; `None` at once when nothing is running, and `None` when a
    /// reply reported its end first (the agent already knows).
    pub async fn command_end(&self) -> Option<(String, i32)> {
        let shared = self.current.lock().unwrap_or_else(|p| p.into_inner()).clone()?;
        let seq = shared.lock().running.as_ref()?.seq;
        let mut outcome = None;
        // Ten years: a job that runs longer is not waited for.
        wait_for(&shared, Duration::from_secs(10 * 365 * 86_400), |state| {
            let exited = state.exited.map(exit_code);
            match &state.running {
                Some(running) if running.seq == seq => match (running.finished, exited) {
                    (Some((code, _)), _) | (None, Some(code)) => {
                        outcome = Some((running.command.clone(), code));
                        true
                    }
                    (None, None) => false,
                },
                // Reported by a reply, or replaced by a newer command.
                _ => true,
            }
        })
        .await;
        outcome
    }
}

fn validate(request: &Request) -> Result<(), SessionError> {
    if request.reset && request.is_input {
        return Err(SessionError::Invalid(
            "reset cannot be combined with is_input: reset starts a fresh shell, so there is \
             no running program to send input to. Send reset=true alone (optionally with a \
             command to run in the new shell)."
                .into(),
        ));
    }
    if request.command.contains('\0') {
        return Err(SessionError::Invalid(
            "the command contains a NUL byte, which no shell command can contain. \
             Remove it (use printf '\\0' to produce one)."
                .into(),
        ));
    }
    Ok(())
}

/// Aborts a task when dropped: the link between a call's cancellation and
/// the client's lives exactly as long as the call.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
