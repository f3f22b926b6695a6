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

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::guard::Guard;
use crate::input_wait;
use crate::integration::{self, Level, Prompting, Reinstall};
use crate::keys::{self, Input};
use crate::output::{self, CappedOutput, CommandSpill, Shown, ShownLine, SpillLimits, SpillStore};
use crate::private_fs;
use crate::process::{self, TerminationMode};
use crate::pty::{self, Pty};
use crate::screen::{Marker, Screen, Stop};
use crate::shell::{self, ShellFiles};
use crate::store::{CommandLog, OutputStore, StoreLimits};

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
        if reply.status == Status::Running(WaitEnded::Cancelled) {
            self.note_cancelled();
        }
        let mut reply = reply;
        reply.notes.extend(shell.take_integration_notes());
        Ok(reply)
    }

    /// Remembers that the client cancelled a call, for the next reply.
    fn note_cancelled(&self) {
        *self.cancelled_at.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
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
                match self.shell.try_lock() {
                    Ok(guard) => {
                        drop(guard);
                        match self.execute(poll, CancellationToken::new()).await {
                            Ok(reply) => reply.output.text,
                            Err(_) => String::new(),
                        }
                    }
                    Err(_) => String::new(),
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RunningState {
    None,
    Unfinished,
    Finished,
}

/// One bash process and its PTY.
struct Shell {
    shared: Arc<Shared>,
    pty: Pty,
    /// The PTY slave's path, to discard unread input before ^C.
    tty: PathBuf,
    pid: i32,
    /// The marker every process the shell starts inherits, so that `reset`
    /// and the end of the session reach what left the session.
    scope: process::Scope,
    files: ShellFiles,
    next_seq: u64,
    /// The directory and `PATH` the prompt reported last.
    cwd: PathBuf,
    python: Option<PathBuf>,
    waiter: tokio::task::JoinHandle<()>,
    supervisor: tokio::task::JoinHandle<()>,
    /// Watches for a shell that lost the integration (integration.rs).
    watcher: tokio::task::JoinHandle<()>,
    /// An incomplete command the shell would be waiting to complete.
    incomplete: Option<Incomplete>,
}

/// State shared between the reader thread and the call.
struct Shared {
    /// A std mutex: held only for short sections with no `.await`.
    state: Mutex<State>,
    /// Woken after every chunk of output and when the shell exits.
    changed: Notify,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves consistent-enough state for
        // reporting; keep going rather than poisoning every later call.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

struct State {
    screen: Screen,
    /// The first prompt has been seen: the shell is ready for commands.
    ready: bool,
    running: Option<Running>,
    /// Text printed while no command was running, kept for the next reply.
    idle_output: String,
    /// How the shell exited, once it has.
    exited: Option<std::process::ExitStatus>,
    /// The reader thread has seen the terminal hang up.
    reader_done: bool,
    /// The shells carrying the integration and a reinstall in progress.
    integ: Integ,
}

/// The command being run, or finished but not yet reported.
struct Running {
    seq: u64,
    command: String,
    started_at: Instant,
    /// The start marker arrived: output from now on is the command's.
    started: bool,
    /// Output not yet shown to the agent.
    pending: CappedOutput,
    /// How many replies already showed part of the output.
    replies: u32,
    last_output_at: Instant,
    finished: Option<(i32, Instant)>,
    /// The command's share of the spill limits, and its files' stem.
    spill: CommandSpill,
    spill_stem: String,
    /// The unfinished line the last reply showed, to show only what is
    /// new of it next time.
    line_shown: Option<ShownLine>,
    /// The complete output, kept in the session's store.
    log: Option<Arc<CommandLog>>,
    /// The line of `log` where the output not yet replied begins.
    part_first_line: u64,
    /// The category's execution limit, if any.
    exec_limit: Option<Duration>,
    /// The unwatched-time limit in force: the larger of `exec_limit` and the
    /// last call's `timeout`.
    unwatched_limit: Option<Duration>,
    /// Calls waiting on the command right now.
    watchers: u32,
    /// When the last call about the command began or ended: unwatched time
    /// counts from here while `watchers` is 0.
    unwatched_since: Instant,
    /// When a call last sent the program input.
    last_input_at: Option<Instant>,
    /// When the supervisor confirmed that the program waits for input: a
    /// second look, with no output in between, found it still blocked
    /// reading the terminal.
    input_confirmed_at: Option<Instant>,
    /// When it started, in the clock ticks `/proc` uses.
    started_ticks: u64,
    /// Time the program spent blocked on terminal input since
    /// `unwatched_since` (not counted against the limit), and whether it
    /// was blocked at the last look.
    input_wait: Duration,
    waiting_for_input: bool,
    /// Set once the supervisor starts killing it; the mode once it is done.
    kill: Option<(Duration, Option<TerminationMode>)>,
    /// The foreground groups that were sent ^C; what is left of them when
    /// the command ends is stopped, so an interrupt leaves nothing behind.
    interrupted: Vec<i32>,
}

impl Running {
    /// Adds committed text to the output not yet shown. The start of a
    /// line an earlier reply showed unfinished goes to the full output but
    /// is not shown again.
    fn push_output(&mut self, text: &str) {
        if let Some(log) = &self.log {
            log.push(text);
        }
        self.pending.push_continuing(self.line_shown.take(), text);
    }

    /// Finished, and not still being killed.
    fn is_done(&self) -> bool {
        self.finished.is_some() && !matches!(self.kill, Some((_, None)))
    }

    /// Since when neither the program's output nor our input changed.
    fn quiet_from(&self) -> Instant {
        self.last_output_at.max(self.last_input_at.unwrap_or(self.started_at))
    }

    /// Blocked reading the terminal, as confirmed by looks taken after its
    /// output (and our input) went quiet: it waits for the agent.
    fn waits_for_input(&self) -> bool {
        self.waiting_for_input
            && self.input_confirmed_at.is_some_and(|at| at >= self.quiet_from() + INPUT_QUIET)
    }
}

/// Keep this much of what is printed between commands.
const IDLE_OUTPUT_CAP: usize = 8_000;

impl State {
    fn ingest(&mut self, bytes: &[u8]) {
        let now = Instant::now();
        let mut rest = bytes;
        while !rest.is_empty() {
            let (consumed, stop) = self.screen.feed(rest);
            rest = &rest[consumed..];
            self.route_committed(now);
            match stop {
                Some(Stop::Marker(Marker::Start { seq })) => {
                    if let Some(running) = &mut self.running
                        && running.seq == seq
                        && !running.started
                    {
                        // What came before is the echo of the line we typed.
                        self.screen.discard_window();
                        running.started = true;
                    }
                }
                Some(Stop::Marker(Marker::End { seq, status })) => self.on_prompt(seq, status, now),
                Some(Stop::AlternateScreen(_)) | None => {}
            }
        }
        if let Some(running) = &mut self.running
            && running.started
            && running.finished.is_none()
        {
            running.last_output_at = now;
        }
    }

    fn on_prompt(&mut self, seq: u64, status: i32, now: Instant) {
        if !self.ready {
            if seq == 0 {
                // The first prompt: whatever start-up files printed before
                // it is not a command's output.
                self.screen.discard_window();
                self.screen.take_committed();
                self.ready = true;
            }
            return;
        }
        if self.integration_marker(seq, status, now) {
            return;
        }
        self.screen.commit_all();
        self.screen.leave_alternate();
        let text = self.screen.take_committed();
        match &mut self.running {
            Some(running) if running.seq == seq && running.finished.is_none() => {
                running.started = true;
                running.push_output(&text);
                running.finished = Some((status, now));
                if let Some(log) = &running.log {
                    log.finish(status);
                }
            }
            _ => self.push_idle(&text),
        }
    }

    fn route_committed(&mut self, now: Instant) {
        if !self.screen.has_committed() {
            return;
        }
        let text = self.screen.take_committed();
        match &mut self.running {
            Some(running) if running.finished.is_none() => {
                // Before the start marker it is the echo of our own line.
                if running.started {
                    running.push_output(&text);
                    running.last_output_at = now;
                }
            }
            _ => self.push_idle(&text),
        }
    }

    fn push_idle(&mut self, text: &str) {
        if !self.ready || text.is_empty() {
            return;
        }
        self.idle_output.push_str(text);
        if self.idle_output.len() > 2 * IDLE_OUTPUT_CAP {
            let cut = self.idle_output.len() - IDLE_OUTPUT_CAP;
            let cut = (cut..self.idle_output.len())
                .find(|&i| self.idle_output.is_char_boundary(i))
                .unwrap_or(0);
            self.idle_output.drain(..cut);
        }
    }
}

impl Shell {
    async fn spawn(config: &SessionConfig, cwd: &Path) -> Result<Shell, SessionError> {
        let fail = |what: &str, err: std::io::Error| {
            SessionError::Shell(format!("could not start the shell ({what}): {err}"))
        };
        let nonce = random_hex(16).map_err(|err| fail("random nonce", err))?;
        // The directory's name is random, but not from the nonce.
        let tag = private_fs::random_hex(4).map_err(|err| fail("random name", err))?;
        let files = ShellFiles { dir: config.work_dir.join(format!("shell-{tag}")) };
        private_fs::ensure_private_dir(&config.work_dir)
            .and_then(|()| private_fs::create_private_dir(&files.dir))
            .map_err(|err| fail("private directory", err))?;
        let rc = shell::rc_script(&files, &nonce, config.user_rc.as_deref());
        private_fs::write_new_file(&files.rc_file(), rc.as_bytes())
            .map_err(|err| fail("start-up file", err))?;

        let opened = pty::open(config.rows, config.cols).map_err(|err| fail("PTY", err))?;
        let scope = process::Scope::new("shell");
        let mut command = process::pty_command(&config.shell, &opened.slave, &scope)
            .map_err(|err| fail("PTY", err))?;
        command
            .arg("--noprofile")
            .arg("--rcfile")
            .arg(files.rc_file())
            .arg("-i")
            .current_dir(cwd)
            .env("TERM", "xterm-256color")
            .env_remove("PROMPT_COMMAND")
            .env_remove("BASH_ENV")
            .env_remove("ENV")
            .envs(config.env.iter().map(|(k, v)| (k, v)));
        let mut child = process::spawn(&mut command).map_err(|err| {
            fail(&format!("{} in {}", config.shell.display(), cwd.display()), err)
        })?;
        // Only the child may hold the slave side, so that the reader sees
        // the terminal hang up once the shell and its jobs are gone.
        drop(opened.slave);
        let pid = child.id().map_or(-1, |pid| pid as i32);
        if let Some(guard) = &config.guard {
            guard.watch_session(pid);
        }

        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                screen: Screen::new(config.rows, config.cols, &nonce),
                ready: false,
                running: None,
                idle_output: String::new(),
                exited: None,
                reader_done: false,
                integ: Integ::default(),
            }),
            changed: Notify::new(),
        });
        let reader_shared = Arc::clone(&shared);
        let pty = Pty::start(opened.master, &config.name, move |bytes| {
            let answers = {
                let mut state = reader_shared.lock();
                match bytes {
                    Some(bytes) => state.ingest(bytes),
                    None => state.reader_done = true,
                }
                state.screen.take_responses()
            };
            reader_shared.changed.notify_waiters();
            answers
        })
        .map_err(|err| fail("reader thread", err))?;
        let waiter_shared = Arc::clone(&shared);
        let waiter = tokio::spawn(async move {
            let status = child.wait().await;
            if let Ok(status) = status {
                waiter_shared.lock().exited = Some(status);
            }
            waiter_shared.changed.notify_waiters();
        });

        let watcher = tokio::spawn(watch_integration(Watcher {
            shared: Arc::clone(&shared),
            master: pty.handle().map_err(|err| fail("PTY", err))?,
            tty: opened.tty.clone(),
            files: files.clone(),
            nonce,
        }));
        let supervisor = tokio::spawn(supervise(Supervisor {
            shared: Arc::clone(&shared),
            master: pty.handle().map_err(|err| fail("PTY", err))?,
            tty: opened.tty.clone(),
            shell_pid: pid,
            grace: config.grace,
        }));
        let shell = Shell {
            shared,
            pty,
            tty: opened.tty,
            pid,
            scope,
            files,
            next_seq: 1,
            cwd: cwd.to_owned(),
            python: None,
            waiter,
            supervisor,
            watcher,
            incomplete: None,
        };
        let ready = shell.wait_ready(config.startup_timeout).await;
        // The start-up file holds the nonce: it goes once it was read.
        let _ = std::fs::remove_file(shell.files.rc_file());
        if let Err(err) = ready {
            shell.stop(config).await;
            return Err(err);
        }
        let mut shell = shell;
        shell.refresh_state();
        shell.record_first_level();
        Ok(shell)
    }

    /// The start-up handshake: wait for the first prompt's marker, so the
    /// first command never races the shell's start.
    async fn wait_ready(&self, limit: Duration) -> Result<(), SessionError> {
        if wait_for(&self.shared, limit, |state| state.ready || state.exited.is_some()).await
            && self.shared.lock().ready
        {
            return Ok(());
        }
        let state = self.shared.lock();
        Err(SessionError::Shell(format!(
            "the shell did not reach its first prompt ({}). Check the shell and its start-up \
             files; the last line it printed: {:?}",
            match state.exited {
                Some(status) => describe_exit(status),
                None => format!("still starting after {limit:?}"),
            },
            // Bounded: a start-up file may print a line of any length.
            output::head_tail(&state.screen.current_line(), 2_000, "").0,
        )))
    }

    fn running_state(&self) -> RunningState {
        match &self.shared.lock().running {
            None => RunningState::None,
            Some(running) if running.is_done() => RunningState::Finished,
            Some(_) => RunningState::Unfinished,
        }
    }

    /// A call looks at the running command: unwatched time starts again,
    /// and the limit becomes the larger of the category's and the call's
    /// `timeout`.
    fn touch(&self, timeout: Option<Duration>) {
        if let Some(running) = &mut self.shared.lock().running
            && running.finished.is_none()
        {
            running.unwatched_since = Instant::now();
            running.input_wait = Duration::ZERO;
            running.unwatched_limit =
                running.exec_limit.map(|limit| limit.max(timeout.unwrap_or_default()));
        }
    }

    /// Gives a command that seems to be running a moment to show that it
    /// has in fact ended: a kill in progress finishes (within its grace
    /// period), and when the shell is back in the foreground its end marker
    /// may still be on its way.
    async fn settle(&self, config: &SessionConfig) {
        let killing = |state: &State| {
            state.running.as_ref().is_some_and(|r| matches!(r.kill, Some((_, None))))
        };
        if killing(&self.shared.lock()) {
            wait_for(&self.shared, 2 * config.grace + Duration::from_secs(3), |state| {
                !killing(state)
            })
            .await;
        }
        // The job in front has ended when the shell has the terminal back,
        // or when nothing is left of the group that had it.
        let front = self.pty.handle().ok().and_then(|master| pty::foreground_group(&master));
        let job_ended = match front {
            Some(group) if group == self.pid => true,
            Some(group) => process::live_group_members(group).is_empty(),
            None => false,
        };
        if job_ended {
            // A shell reading the terminal is either at its prompt, with the
            // end marker already written, or in `read`, with no marker to
            // come: a moment settles both. Otherwise it is finishing the
            // command line, and its marker follows shortly.
            let reading =
                front == Some(self.pid) && input_wait::process_reads_terminal(self.pid, &self.tty);
            let limit = if reading { SETTLE_READING } else { SETTLE };
            wait_for(&self.shared, limit, |state| {
                state.exited.is_some() || state.running.as_ref().is_none_or(|r| r.is_done())
            })
            .await;
        }
    }

    fn has_exited(&self) -> bool {
        self.shared.lock().exited.is_some()
    }

    fn exit_description(&self) -> String {
        self.shared.lock().exited.map_or_else(|| "it stopped".to_owned(), describe_exit)
    }

    /// Where a replacement shell should start: the last directory if it
    /// still exists, else the original one.
    fn restart_dir(&mut self, config: &SessionConfig) -> PathBuf {
        self.refresh_state();
        if self.cwd.is_dir() { self.cwd.clone() } else { config.cwd.clone() }
    }

    /// Reads the directory and `PATH` the prompt last recorded.
    fn refresh_state(&mut self) {
        if let Some(state) = shell::read_state(&self.files) {
            self.python = shell::python_interpreter(&state.path);
            self.cwd = state.cwd;
        }
    }

    /// Starts `command` and waits for it as a call with `timeout` would.
    async fn run(
        &mut self,
        config: &SessionConfig,
        request: &Request,
        mut notes: Vec<Note>,
        cancel: CancellationToken,
    ) -> Result<Reply, SessionError> {
        let command = request.command.as_str();
        let timeout = request.timeout;
        let exec_limit = request.exec_limit;
        let seq = self.next_seq;
        self.next_seq += 1;
        // The directory may have been removed by a command (rm -rf /tmp/*).
        let written = private_fs::rewrite_file(&self.files.command_file(), command.as_bytes())
            .or_else(|err| {
                if err.kind() != std::io::ErrorKind::NotFound {
                    return Err(err);
                }
                private_fs::ensure_private_dir(&self.files.dir)?;
                private_fs::rewrite_file(&self.files.command_file(), command.as_bytes())
            });
        written.map_err(|err| {
            SessionError::Shell(format!("could not write the command file: {err}"))
        })?;
        let now = Instant::now();
        {
            let mut state = self.shared.lock();
            // Whatever background jobs printed since the last command is
            // reported now, not mixed into this command's output.
            state.screen.commit_all();
            state.route_committed(now);
            let idle = std::mem::take(&mut state.idle_output);
            if !idle.trim().is_empty() {
                notes.push(Note::IdleOutput(idle));
            }
            // Unique among this server's shells without naming the nonce.
            let spill_stem = format!("{}-{seq}-{}", config.name, self.files_tag());
            let spill = config.spill.command();
            let pending = spill.capped(config.output_cap, &spill_name(&spill_stem, 0));
            state.running = Some(Running {
                seq,
                command: command.to_owned(),
                started_at: now,
                started: false,
                pending,
                replies: 0,
                last_output_at: now,
                finished: None,
                spill,
                spill_stem,
                line_shown: None,
                log: config.output.as_ref().map(|store| store.begin(command)),
                part_first_line: 0,
                exec_limit,
                unwatched_limit: exec_limit.map(|limit| limit.max(timeout.unwrap_or_default())),
                watchers: 0,
                unwatched_since: now,
                last_input_at: None,
                input_confirmed_at: None,
                started_ticks: process::boot_ticks_now(),
                input_wait: Duration::ZERO,
                waiting_for_input: false,
                kill: None,
                interrupted: Vec::new(),
            });
        }
        // Tell the supervisor a command with a limit has started.
        self.shared.changed.notify_waiters();
        self.pty
            .write_all(shell::run_line(seq, command).as_bytes(), Duration::from_secs(5))
            .await
            .map_err(|err| SessionError::Shell(format!("could not write to the shell: {err}")))?;
        self.wait_reply(config, timeout, notes, cancel, request.progress.as_ref()).await
    }

    fn files_tag(&self) -> String {
        self.files.dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
    }

    /// Sends text (with Enter) or a key to the running program. Never
    /// blocks the session: what the terminal does not accept within a
    /// brief wait is dropped and reported. The keys that make the terminal
    /// signal the program (C-c, C-\, C-z) first discard the input nobody
    /// has read, as a terminal does, so they are never stuck behind it.
    ///
    /// Bounded: at most the input's bytes, and [`INPUT_STALL`] of waiting
    /// per stall of the program.
    async fn send_input(&mut self, input: Input) -> Result<Vec<Note>, SessionError> {
        let (bytes, note) = match input {
            Input::Key { name, bytes } => {
                if name == "C-c" {
                    self.note_interrupt();
                }
                if matches!(name.as_str(), "C-c" | "C-\\" | "C-z")
                    && let Err(err) = pty::discard_input(&self.tty)
                {
                    tracing::debug!("could not discard unread terminal input: {err}");
                }
                (bytes, Note::KeySent(name))
            }
            Input::Text(text) => {
                let mut bytes = text.into_bytes();
                bytes.push(b'\r');
                (bytes, Note::InputSent)
            }
        };
        // Write only while the command that was sent the input runs, with
        // the same job in front: input must never reach the shell's prompt.
        let master = self.pty.handle().map_err(|err| {
            SessionError::Shell(format!("could not send the input to the program: {err}"))
        })?;
        let front = pty::foreground_group(&master);
        let seq = self.shared.lock().running.as_ref().map(|r| r.seq);
        let shared = Arc::clone(&self.shared);
        let still_running = move || {
            let unfinished = shared
                .lock()
                .running
                .as_ref()
                .is_some_and(|r| Some(r.seq) == seq && r.finished.is_none());
            unfinished && pty::foreground_group(&master) == front
        };
        let sent =
            self.pty.write_accepted(&bytes, INPUT_STALL, still_running).await.map_err(|err| {
                SessionError::Shell(format!("could not send the input to the program: {err}"))
            })?;
        if let Some(running) = &mut self.shared.lock().running {
            running.last_input_at = Some(Instant::now());
        }
        let mut notes = vec![note];
        if sent < bytes.len() {
            notes.push(Note::InputPartlySent { sent, total: bytes.len() });
        }
        Ok(notes)
    }

    /// Remembers the foreground group about to get ^C.
    fn note_interrupt(&self) {
        let Ok(master) = self.pty.handle() else { return };
        let Some(group) = pty::foreground_group(&master).filter(|&g| g != self.pid) else { return };
        let mut state = self.shared.lock();
        // A nested shell running a builtin is not the command's to stop.
        if state.is_integrated_shell(group) {
            return;
        }
        if let Some(running) = &mut state.running {
            running.interrupted.push(group);
        }
    }

    /// After an interrupted command ends, stops what is left of it: children
    /// that ignore SIGINT (as `&` jobs of a script do) and groups it left
    /// behind. Background jobs of the shell are not touched.
    async fn reap_interrupted(&self, grace: Duration) {
        let (mut groups, since) = {
            let state = self.shared.lock();
            match &state.running {
                Some(running) if !running.interrupted.is_empty() => {
                    (running.interrupted.clone(), running.started_ticks)
                }
                _ => return,
            }
        };
        groups.extend(process::orphaned_groups(self.pid, since));
        process::terminate_groups(&groups, grace).await;
    }

    /// Waits for the running command as the call's timeout allows, then
    /// replies with what happened.
    async fn wait_reply(
        &mut self,
        config: &SessionConfig,
        timeout: Option<Duration>,
        notes: Vec<Note>,
        cancel: CancellationToken,
        progress: Option<&ProgressHook>,
    ) -> Result<Reply, SessionError> {
        let waited = self.wait(config, timeout, &cancel, progress).await;
        // A call the client cancelled consumes nothing, even when the
        // command ended at the same moment: its answer would be dropped,
        // and the next call must report what this one saw.
        let waited = match waited {
            Waited::ShellExited => waited,
            _ if cancel.is_cancelled() => Waited::Cancelled,
            _ => waited,
        };
        match waited {
            Waited::Finished => {
                self.reap_interrupted(config.grace).await;
                Ok(self.finished_reply(notes))
            }
            Waited::ShellExited => {
                self.drain_after_exit().await;
                let mut state = self.shared.lock();
                state.screen.commit_all();
                state.route_committed(Instant::now());
                let code = state.exited.map_or(-1, exit_code);
                if let Some(running) = &mut state.running
                    && running.finished.is_none()
                {
                    running.finished = Some((code, Instant::now()));
                    if let Some(log) = &running.log {
                        log.finish(code);
                    }
                }
                drop(state);
                Ok(self.finished_reply(notes))
            }
            Waited::Stopped(reason) => Ok(self.partial_reply(config, reason, notes)),
            Waited::Cancelled => Ok(self.cancelled_reply(notes)),
        }
    }

    /// The reply to a cancelled call, which nobody will read: it takes
    /// nothing from the session, so the next call reports everything.
    fn cancelled_reply(&self, notes: Vec<Note>) -> Reply {
        let mut reply = self.idle_reply("", notes);
        if let Some(running) = &self.shared.lock().running {
            reply.command = running.command.clone();
            reply.duration = running.started_at.elapsed();
        }
        reply.status = Status::Running(WaitEnded::Cancelled);
        reply.exit_code = None;
        reply
    }

    /// Waits until the command ends, the shell exits, the program waits
    /// for input with its output quiet, the call's wait runs out, or the
    /// call is cancelled. While it waits, the command is watched (never
    /// stopped by the unwatched-time limit) and `progress`, if any, is told
    /// about once a second.
    async fn wait(
        &self,
        config: &SessionConfig,
        timeout: Option<Duration>,
        cancel: &CancellationToken,
        progress: Option<&ProgressHook>,
    ) -> Waited {
        let call_start = Instant::now();
        let _watch = Watch::begin(&self.shared);
        let mut reports = 0u64;
        let mut next_report = call_start + PROGRESS_INTERVAL;
        loop {
            let notified = self.shared.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let deadline = {
                let state = self.shared.lock();
                let Some(running) = &state.running else { return Waited::Finished };
                if running.is_done() {
                    return Waited::Finished;
                }
                if state.exited.is_some() {
                    return Waited::ShellExited;
                }
                // A shell at its prompt while the integration is being
                // installed in it is not a program waiting for input.
                if running.waits_for_input() && state.integ.reinstall.is_none() {
                    return Waited::Stopped(WaitEnded::WaitingForInput);
                }
                let now = Instant::now();
                match timeout {
                    // An explicit wait: the agent said how long it is willing
                    // to wait, so silence alone does not end it.
                    Some(limit) => {
                        if now >= call_start + limit {
                            return Waited::Stopped(WaitEnded::Timeout(limit));
                        }
                        call_start + limit
                    }
                    None => {
                        let quiet_since = running.last_output_at.max(call_start);
                        if now >= quiet_since + config.no_output_return {
                            return Waited::Stopped(WaitEnded::NoNewOutput(
                                config.no_output_return,
                            ));
                        }
                        if now >= call_start + config.max_wait {
                            return Waited::Stopped(WaitEnded::Timeout(config.max_wait));
                        }
                        (quiet_since + config.no_output_return).min(call_start + config.max_wait)
                    }
                }
            };
            tokio::select! {
                () = &mut notified => {}
                () = tokio::time::sleep_until(deadline) => {}
                () = cancel.cancelled() => return Waited::Cancelled,
                () = tokio::time::sleep_until(next_report), if progress.is_some() => {
                    reports += 1;
                    next_report += PROGRESS_INTERVAL;
                    if let Some(hook) = progress {
                        let line = self.newest_line();
                        (hook.0)(Progress { count: reports, elapsed: call_start.elapsed(), line });
                    }
                }
            }
        }
    }

    /// The newest line of the running command's output, for progress: the
    /// last one on the screen, else the last one committed and not yet shown.
    fn newest_line(&self) -> String {
        let state = self.shared.lock();
        if !state.running.as_ref().is_some_and(|r| r.started) {
            // Before the start marker the screen holds the echo of our line.
            return String::new();
        }
        let newest = state.screen.newest_line();
        if !newest.is_empty() {
            return newest;
        }
        state.running.as_ref().map(|r| r.pending.last_line().to_owned()).unwrap_or_default()
    }

    /// After the shell exits, its last output may still be in flight: wait
    /// briefly for the reader to see the hang-up.
    async fn drain_after_exit(&self) {
        wait_for(&self.shared, Duration::from_millis(500), |state| state.reader_done).await;
    }

    /// The reply for a finished command; clears it from the session.
    fn finished_reply(&mut self, notes: Vec<Note>) -> Reply {
        let running = self.shared.lock().running.take();
        self.refresh_state();
        let Some(running) = running else { return self.idle_reply("", notes) };
        let (exit_code, finished_at) = running.finished.unwrap_or((-1, Instant::now()));
        let mut notes = notes;
        if let Some((limit, Some(mode))) = running.kill {
            notes.push(Note::Killed { limit, mode });
        }
        Reply {
            command: running.command,
            output: running.pending.finish(),
            status: Status::Completed,
            exit_code: Some(exit_code),
            cwd: self.cwd.clone(),
            python: self.python.clone(),
            duration: finished_at - running.started_at,
            continued: running.replies > 0,
            notes,
            previous: None,
            number: running.log.as_ref().map(|log| log.number()),
            first_line: running.part_first_line,
            look_again_within: None,
        }
    }

    /// The reply for a command that is still running: what it printed since
    /// the last reply, and the line it is on now.
    fn partial_reply(
        &mut self,
        config: &SessionConfig,
        reason: WaitEnded,
        mut notes: Vec<Note>,
    ) -> Reply {
        let mut state = self.shared.lock();
        state.screen.commit_complete_lines();
        state.route_committed(Instant::now());
        let current_line = state.screen.current_line();
        let alternate = state.screen.alternate_contents();
        let Some(running) = state.running.as_mut() else {
            drop(state);
            return self.idle_reply("", notes);
        };
        if running.waits_for_input() {
            notes.push(Note::WaitingForInput);
        }
        let look_again_within = running.unwatched_limit;
        let part = running.replies + 1;
        let next_name = spill_name(&running.spill_stem, part);
        let next = running.spill.capped(config.output_cap, &next_name);
        let mut output = std::mem::replace(&mut running.pending, next).finish();
        let first_line = running.part_first_line;
        if let Some(log) = &running.log {
            running.part_first_line = log.complete_lines();
        }
        match alternate {
            Some(screen) => {
                notes.push(Note::FullScreen);
                output.text = screen;
                running.line_shown = None;
            }
            None => {
                let room = config
                    .output_cap
                    .saturating_sub(output::count_chars(&output.text))
                    .max(config.output_cap / 4);
                let line = output::show_unfinished_line(&current_line, running.line_shown, room);
                if line.omitted > 0 {
                    output.truncated = true;
                    output.omitted_chars += line.omitted;
                }
                output.text.push_str(&line.text);
                running.line_shown = line.shown;
            }
        }
        let reply = Reply {
            command: running.command.clone(),
            output,
            status: Status::Running(reason),
            exit_code: None,
            cwd: self.cwd.clone(),
            python: self.python.clone(),
            duration: running.started_at.elapsed(),
            continued: running.replies > 0,
            notes,
            previous: None,
            number: running.log.as_ref().map(|log| log.number()),
            first_line,
            look_again_within,
        };
        running.replies += 1;
        reply
    }

    /// A reply with no command output (reset alone, say).
    fn idle_reply(&self, command: &str, notes: Vec<Note>) -> Reply {
        Reply {
            command: command.to_owned(),
            output: Shown::empty(),
            status: Status::Completed,
            exit_code: Some(0),
            cwd: self.cwd.clone(),
            python: self.python.clone(),
            duration: Duration::ZERO,
            continued: false,
            notes,
            previous: None,
            number: None,
            first_line: 0,
            look_again_within: None,
        }
    }

    /// Stops the shell, every process in its session and every process
    /// carrying its scope marker (what left the session with `setsid`):
    /// SIGHUP (which bash passes on to its jobs) and SIGTERM, then SIGKILL
    /// after `grace`.
    async fn stop(self, config: &SessionConfig) {
        process::terminate_session(self.pid, Some(&self.scope), config.grace).await;
        if let Some(guard) = &config.guard {
            guard.forget_session(self.pid);
        }
        self.waiter.abort();
        self.supervisor.abort();
        self.watcher.abort();
        drop(self.pty);
        let _ = std::fs::remove_dir_all(&self.files.dir);
    }
}

/// What the supervisor of one shell needs.
struct Supervisor {
    shared: Arc<Shared>,
    /// A handle on the PTY master: the foreground group.
    master: std::os::fd::OwnedFd,
    /// The PTY slave's path, to recognise reads of the terminal.
    tty: PathBuf,
    shell_pid: i32,
    grace: Duration,
}

/// A command whose output (and our input) has been quiet this long is
/// looked at: is it waiting for input? Short, so that a prompt is answered
/// within about a second; long enough that a program that just got input
/// has woken up to read it.
const INPUT_QUIET: Duration = Duration::from_millis(150);
/// Between looks while the command stays quiet: from the first interval,
/// doubling up to the longest while it is not waiting for input.
const INPUT_SAMPLE: Duration = Duration::from_millis(250);
/// After a look finds the program waiting, the look that confirms it. One
/// look is not enough: the shell back at its prompt reads the terminal too,
/// and the output it wrote before (its end marker) may not have been read
/// from the terminal yet when the machine is busy.
const INPUT_CONFIRM: Duration = Duration::from_millis(100);
const INPUT_SAMPLE_MAX: Duration = Duration::from_secs(1);
/// How long a new command or key waits for the end marker of a command
/// whose job has just ended, and, when the shell is already reading the
/// terminal again, for the marker it wrote before.
const SETTLE: Duration = Duration::from_millis(500);
const SETTLE_READING: Duration = Duration::from_millis(50);
/// How long text input may wait for the program to make room for it.
const INPUT_STALL: Duration = Duration::from_millis(300);

/// The supervisor's last look at one command.
struct Look {
    seq: u64,
    at: Option<Instant>,
    waiting: bool,
    confirmed: bool,
    interval: Duration,
}

impl Look {
    fn new(seq: u64) -> Look {
        Look { seq, at: None, waiting: false, confirmed: false, interval: INPUT_SAMPLE }
    }

    /// When to look next: soon after the output goes quiet, then at a
    /// growing interval while nothing changes.
    fn due(&self, quiet_from: Instant) -> Instant {
        let after_quiet = quiet_from + INPUT_QUIET;
        match self.at {
            Some(at) if at >= after_quiet && self.waiting && !self.confirmed => at + INPUT_CONFIRM,
            Some(at) if at >= after_quiet => at + self.interval,
            _ => after_quiet,
        }
    }

    fn record(&mut self, now: Instant, waiting: bool, fresh: bool) {
        // Confirmed: waiting at two looks with no output in between.
        self.confirmed = waiting && self.waiting && !fresh;
        self.interval =
            if waiting || fresh { INPUT_SAMPLE } else { (self.interval * 2).min(INPUT_SAMPLE_MAX) };
        self.at = Some(now);
        self.waiting = waiting;
    }
}

/// What the supervisor reads of the running command.
struct Watched {
    seq: u64,
    quiet_from: Instant,
    limit: Option<Duration>,
    watchers: u32,
    unwatched_since: Instant,
    input_wait: Duration,
}

/// Watches the running command for the life of the shell: looks whether
/// it is blocked reading the terminal (no kernel event exists for that, so
/// it samples, soon after the output goes quiet), accounts that time, and
/// stops the command once it has run unwatched past its limit: no call
/// waiting on it, polling it or sending it input for longer than the limit
/// (time waiting for input not counted). While a call waits, it never kills.
async fn supervise(supervisor: Supervisor) {
    let Supervisor { shared, master, tty, .. } = &supervisor;
    let mut look = Look::new(0);
    loop {
        let notified = shared.changed.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let watched = {
            let state = shared.lock();
            match &state.running {
                Some(running)
                    if running.started && running.finished.is_none() && running.kill.is_none() =>
                {
                    Some(Watched {
                        seq: running.seq,
                        quiet_from: running.quiet_from(),
                        limit: running.unwatched_limit,
                        watchers: running.watchers,
                        unwatched_since: running.unwatched_since,
                        input_wait: running.input_wait,
                    })
                }
                _ => None,
            }
        };
        let Some(watched) = watched else {
            notified.await;
            continue;
        };
        if look.seq != watched.seq {
            look = Look::new(watched.seq);
        }
        let now = Instant::now();
        let due = look.due(watched.quiet_from);
        if now >= due {
            // Output still unread from the terminal is news the blocked read
            // may be about to answer (the shell's end marker, a new prompt):
            // look again once it has been read.
            let waiting = pty::foreground_group(master)
                .is_some_and(|group| input_wait::group_reads_terminal(group, tty))
                && !pty::has_unread_output(master);
            let accrued = match look.at {
                Some(at) if look.waiting && waiting => now - at,
                _ => Duration::ZERO,
            };
            let fresh = look.at.is_none_or(|at| at < watched.quiet_from + INPUT_QUIET);
            look.record(now, waiting, fresh);
            if let Some(running) = shared.lock().running.as_mut().filter(|r| r.seq == watched.seq) {
                running.input_wait += accrued;
                running.waiting_for_input = waiting;
                running.input_confirmed_at = look.confirmed.then_some(now);
            }
            // A waiting call returns as soon as the program waits for input.
            shared.changed.notify_waiters();
            continue;
        }
        let stop_at = match watched.limit {
            Some(limit) if watched.watchers == 0 => {
                Some((limit, watched.unwatched_since + limit + watched.input_wait))
            }
            _ => None,
        };
        if let Some((limit, at)) = stop_at
            && now >= at
            && !look.waiting
        {
            kill_foreground(&supervisor, watched.seq, limit).await;
            continue;
        }
        let wake = match stop_at {
            Some((_, at)) if at > now => due.min(at),
            _ => due,
        };
        tokio::select! {
            () = &mut notified => {}
            () = tokio::time::sleep_until(wake) => {}
        }
    }
}

/// Stops the running command as a whole, never the shell, and records how
/// it died: no later part of its command line runs.
///
/// Interactive bash abandons the rest of a command line (and any loop) when
/// it receives SIGINT itself while its job runs, whatever then ends the job;
/// a job killed by SIGTERM alone lets the next part run. So the shell gets
/// SIGINT first, then the foreground job and the groups the command left
/// behind get SIGTERM, and SIGKILL after the grace period. A shell busy
/// with builtins (a `while :` loop) ends its loop on the SIGINT; if it does
/// not come back to its prompt, it is ended (and restarted).
async fn kill_foreground(supervisor: &Supervisor, seq: u64, limit: Duration) {
    let Supervisor { shared, master, shell_pid, grace, .. } = supervisor;
    let since = {
        let mut state = shared.lock();
        let Some(running) = state.running.as_mut().filter(|r| r.seq == seq) else { return };
        running.kill = Some((limit, None));
        running.started_ticks
    };
    tracing::info!(seq, ?limit, "stopping a terminal command that ran unwatched past its limit");
    process::signal_group(*shell_pid, nix::sys::signal::Signal::SIGINT);
    let mut groups = process::orphaned_groups(*shell_pid, since);
    // A nested shell of ours in the foreground is not the command: it stays.
    let foreground = pty::foreground_group(master)
        .filter(|&group| group != *shell_pid && !shared.lock().is_integrated_shell(group));
    groups.extend(foreground);
    let mode = process::terminate_groups(&groups, *grace).await;
    let finished = wait_for(shared, *grace, |state| {
        state.running.as_ref().is_none_or(|r| r.seq != seq || r.finished.is_some())
    })
    .await;
    let mode = if finished {
        mode.unwrap_or(TerminationMode::Soft)
    } else {
        process::terminate_session(*shell_pid, None, *grace).await;
        TerminationMode::Hard
    };
    if let Some(running) = shared.lock().running.as_mut().filter(|r| r.seq == seq) {
        running.kill = Some((limit, Some(mode)));
    }
    shared.changed.notify_waiters();
}

/// A call waiting on the running command, for as long as it waits: the
/// command is watched, so the unwatched-time limit does not run. When the
/// wait ends in any way (reply, timeout, cancellation, or the call's future
/// dropped), unwatched time starts counting from that moment.
struct Watch<'a> {
    shared: &'a Shared,
    seq: Option<u64>,
}

impl Watch<'_> {
    fn begin(shared: &Shared) -> Watch<'_> {
        let seq = shared.lock().running.as_mut().map(|running| {
            running.watchers += 1;
            running.seq
        });
        Watch { shared, seq }
    }
}

impl Drop for Watch<'_> {
    fn drop(&mut self) {
        let Some(seq) = self.seq else { return };
        if let Some(running) = self.shared.lock().running.as_mut().filter(|r| r.seq == seq) {
            running.watchers = running.watchers.saturating_sub(1);
            running.unwatched_since = Instant::now();
            running.input_wait = Duration::ZERO;
        }
        self.shared.changed.notify_waiters();
    }
}

/// Waits until `done` holds for the shared state, or `limit` passes.
async fn wait_for(shared: &Shared, limit: Duration, mut done: impl FnMut(&State) -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        let notified = shared.changed.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if done(&shared.lock()) {
            return true;
        }
        tokio::select! {
            () = &mut notified => {}
            () = tokio::time::sleep_until(deadline) => return false,
        }
    }
}

enum Waited {
    Finished,
    ShellExited,
    Stopped(WaitEnded),
    Cancelled,
}

fn spill_name(spill_stem: &str, part: u32) -> String {
    format!("{spill_stem}-part{part}.log")
}

fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

fn describe_exit(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        _ => "it stopped".to_owned(),
    }
}

fn random_hex(n_bytes: usize) -> std::io::Result<String> {
    let mut bytes = vec![0u8; n_bytes];
    getrandom::fill(&mut bytes).map_err(|err| std::io::Error::other(err.to_string()))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

// ---- Keeping the integration alive, and incomplete commands ----------------

/// The shells that carry the integration, outermost first, a reinstall in
/// progress, and notes for the next reply. Part of [`State`].
#[derive(Default)]
struct Integ {
    levels: Vec<Level>,
    reinstall: Option<Reinstall>,
    /// What happened to the integration since the last reply.
    notes: Vec<Note>,
}

impl State {
    /// Handles the end markers that belong to the integration rather than
    /// to a command: a reinstall's handshake, and the prompt of an outer
    /// shell after a nested one exited. Returns whether `seq` was one.
    fn integration_marker(&mut self, seq: u64, status: i32, now: Instant) -> bool {
        if let Some(reinstall) = self.integ.reinstall.take_if(|r| r.seq == seq) {
            let _ = std::fs::remove_file(&reinstall.script);
            // What is left in the window is the new shell's prompt and the
            // line we typed; the command's own output was committed first.
            self.screen.discard_window();
            if reinstall.replaced {
                if let Some(level) =
                    self.integ.levels.iter_mut().rev().find(|l| l.pid == reinstall.pid)
                {
                    level.fingerprint = reinstall.fingerprint;
                }
                self.integ.notes.push(Note::IntegrationReinstalled);
            } else {
                self.integ.levels.push(Level {
                    pid: reinstall.pid,
                    fingerprint: reinstall.fingerprint,
                    launched_by: Some(reinstall.command_seq),
                });
                self.integ.notes.push(Note::NestedShellStarted);
            }
            // The shell now waits for the next command: as far as the
            // agent is concerned, the command that started it is done.
            self.finish_running(None, 0, now);
            return true;
        }
        let Some(depth) = self.integ.levels.iter().position(|l| l.launched_by == Some(seq)) else {
            return false;
        };
        // The shell started by command `seq` exited and its parent is back
        // at its prompt: the command typed into the nested shell (`exit`)
        // ended with the nested shell's status.
        self.integ.levels.truncate(depth);
        self.integ.notes.push(Note::NestedShellExited { status });
        self.finish_running(None, status, now);
        true
    }

    /// Whether `pid` is one of the shells carrying the integration (the
    /// session's own, or a nested one).
    fn is_integrated_shell(&self, pid: i32) -> bool {
        self.integ.levels.iter().any(|level| level.pid == pid)
    }

    /// Ends the running command (`seq`, or whichever runs) with `status`;
    /// text that was not the command's goes to the idle output.
    fn finish_running(&mut self, seq: Option<u64>, status: i32, now: Instant) {
        self.screen.commit_all();
        self.screen.leave_alternate();
        let text = self.screen.take_committed();
        match &mut self.running {
            Some(running)
                if running.finished.is_none() && seq.is_none_or(|seq| seq == running.seq) =>
            {
                running.started = true;
                running.pending.push(&text);
                running.finished = Some((status, now));
            }
            _ => self.push_idle(&text),
        }
    }
}

/// An incomplete command: what the shell would hold at its `>` prompt.
/// Bounded: past [`INCOMPLETE_CAP`] bytes it is run as it is.
struct Incomplete {
    text: String,
    since: Instant,
    replies: u32,
}

/// The most text an incomplete command may gather from `is_input` lines
/// before it is run as it is (bash then reports what is missing).
const INCOMPLETE_CAP: usize = 4 << 20;

/// What to do with a call while a command may be incomplete.
enum Step {
    /// Reply with this; nothing runs.
    Reply(Box<Reply>),
    /// Run this text (the completed command) as a new command.
    Run(String),
    /// Nothing to do with incomplete commands: carry on.
    Pass,
}

impl Shell {
    /// Records the session's own shell as the first level.
    fn record_first_level(&mut self) {
        if let Some(fingerprint) = integration::fingerprint(self.pid) {
            let mut state = self.shared.lock();
            state.integ.levels = vec![Level { pid: self.pid, fingerprint, launched_by: None }];
        }
    }

    /// Notes about the integration gathered since the last reply.
    fn take_integration_notes(&self) -> Vec<Note> {
        std::mem::take(&mut self.shared.lock().integ.notes)
    }

    /// Incomplete input behaves as at a prompt: a command that is not
    /// complete is held (the shell would wait at its `>` prompt); lines sent
    /// with `is_input` are added until it is complete, then it runs; C-c
    /// discards it, C-d runs it as it is (bash then reports the error).
    async fn incomplete_step(
        &mut self,
        config: &SessionConfig,
        request: &Request,
    ) -> Result<Step, SessionError> {
        let command = request.command.as_str();
        let is_key = keys::is_key(command);
        let Some(mut held) = self.incomplete.take() else {
            let fresh = !request.is_input && !is_key && !command.trim().is_empty();
            if fresh
                && self.running_state() != RunningState::Unfinished
                && integration::is_incomplete(&config.shell, command).await
            {
                let previous = (self.running_state() == RunningState::Finished)
                    .then(|| Box::new(self.finished_reply(Vec::new())));
                let held =
                    Incomplete { text: command.to_owned(), since: Instant::now(), replies: 0 };
                let mut reply = self.incomplete_reply(&held, Vec::new());
                reply.previous = previous;
                self.incomplete = Some(held);
                return Ok(Step::Reply(Box::new(reply)));
            }
            return Ok(Step::Pass);
        };
        if command.trim().is_empty() && !request.is_input {
            held.replies += 1;
            let reply = self.incomplete_reply(&held, Vec::new());
            self.incomplete = Some(held);
            return Ok(Step::Reply(Box::new(reply)));
        }
        if is_key {
            return match keys::parse(command).map_err(SessionError::Invalid)? {
                Input::Key { name, .. } if name == "C-c" => {
                    let mut reply = self.idle_reply(&held.text, vec![Note::KeySent(name)]);
                    reply.exit_code = Some(130);
                    reply.duration = held.since.elapsed();
                    Ok(Step::Reply(Box::new(reply)))
                }
                Input::Key { name, .. } if name == "C-d" => Ok(Step::Run(held.text)),
                _ => {
                    self.incomplete = Some(held);
                    Err(SessionError::Invalid(
                        "The shell is waiting for the rest of an incomplete command, so keys \
                         other than C-c (discard it) and C-d (end of input) do nothing. Send \
                         the remaining lines with is_input=true."
                            .into(),
                    ))
                }
            };
        }
        if !request.is_input {
            held.replies += 1;
            let notes = vec![Note::NotExecuted { command: command.to_owned() }];
            let reply = self.incomplete_reply(&held, notes);
            self.incomplete = Some(held);
            return Ok(Step::Reply(Box::new(reply)));
        }
        held.text.push('\n');
        held.text.push_str(command);
        if held.text.len() <= INCOMPLETE_CAP
            && integration::is_incomplete(&config.shell, &held.text).await
        {
            held.replies += 1;
            let reply = self.incomplete_reply(&held, vec![Note::InputSent]);
            self.incomplete = Some(held);
            return Ok(Step::Reply(Box::new(reply)));
        }
        Ok(Step::Run(held.text))
    }

    /// The reply while an incomplete command is held: still "running",
    /// waiting for input, nothing printed (no `>` prompts).
    fn incomplete_reply(&self, held: &Incomplete, mut notes: Vec<Note>) -> Reply {
        notes.push(Note::Incomplete);
        notes.push(Note::WaitingForInput);
        let mut reply = self.idle_reply(&held.text, notes);
        reply.status = Status::Running(WaitEnded::NotWaited);
        reply.exit_code = None;
        reply.duration = held.since.elapsed();
        reply.continued = held.replies > 0;
        reply
    }
}

/// What the integration watcher of one shell needs.
struct Watcher {
    shared: Arc<Shared>,
    /// A handle on the PTY master: the foreground group, and typing the
    /// reinstall line.
    master: std::os::fd::OwnedFd,
    /// The PTY slave's path, to recognise reads of the terminal.
    tty: PathBuf,
    files: ShellFiles,
    nonce: String,
}

/// How long a running command must have been quiet before the watcher
/// looks for a shell at its prompt, and how often it looks again. There is
/// no kernel event for "a shell is waiting at its prompt", so it is sampled
/// while a command runs quietly; an idle session is never looked at.
const WATCH_QUIET: Duration = Duration::from_millis(150);
const WATCH_SAMPLE: Duration = Duration::from_millis(250);

/// Watches a running command for a shell that sits at its prompt without
/// the integration (after `exec bash` or in a nested `bash`) and reinstalls
/// it: it types a line that sources a fresh script, whose first prompt is
/// the handshake ([`State::integration_marker`]). Other shells and remote
/// sessions are named in a note. Runs for the life of the shell.
async fn watch_integration(watcher: Watcher) {
    let shared = &watcher.shared;
    let mut attempts: u64 = 0;
    let mut failed: Vec<(i32, u64)> = Vec::new();
    let mut noted: Option<u64> = None;
    loop {
        let notified = shared.changed.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let now = Instant::now();
        let look = {
            let mut state = shared.lock();
            if let Some(reinstall) = state.integ.reinstall.take_if(|r| now >= r.deadline) {
                let _ = std::fs::remove_file(&reinstall.script);
                // Remembered so the same shell is not tried again; bounded.
                if failed.len() >= 16 {
                    failed.remove(0);
                }
                failed.push((reinstall.pid, reinstall.fingerprint));
                state.integ.notes.push(Note::ReinstallFailed);
            }
            let reinstall_deadline = state.integ.reinstall.as_ref().map(|r| r.deadline);
            match (&state.running, reinstall_deadline) {
                (_, Some(deadline)) => Err(Some(deadline)),
                (Some(running), None)
                    if state.ready && running.started && running.finished.is_none() =>
                {
                    let quiet_at = running.last_output_at.max(running.started_at) + WATCH_QUIET;
                    Ok((running.seq, quiet_at, state.integ.levels.last().cloned()))
                }
                _ => Err(None),
            }
        };
        let wake = match look {
            Err(deadline) => deadline,
            Ok((_, quiet_at, _)) if now < quiet_at => Some(quiet_at),
            Ok((seq, _, top)) => {
                look_for_prompt(&watcher, seq, top, &mut attempts, &failed, &mut noted);
                Some(now + WATCH_SAMPLE)
            }
        };
        match wake {
            Some(wake) => tokio::select! {
                () = &mut notified => {}
                () = tokio::time::sleep_until(wake) => {}
            },
            None => notified.await,
        }
    }
}

/// One look at the terminal's foreground group while command `seq` runs
/// quietly; `top` is the innermost shell with the integration.
fn look_for_prompt(
    watcher: &Watcher,
    seq: u64,
    top: Option<Level>,
    attempts: &mut u64,
    failed: &[(i32, u64)],
    noted: &mut Option<u64>,
) {
    let Watcher { shared, master, tty, files, nonce } = watcher;
    let Some(group) = pty::foreground_group(master) else { return };
    if let Some(top) = &top
        && top.pid == group
        && integration::fingerprint(group) == Some(top.fingerprint)
    {
        // Our own shell runs a builtin that reads (`read`): not a prompt.
        return;
    }
    if !process::waiting_for_terminal_input(group, tty) {
        return;
    }
    let found = integration::inspect(group).or_else(|| integration::wrapped_shell(group));
    match found {
        Some(Prompting::Bash { pid, fingerprint }) if !failed.contains(&(pid, fingerprint)) => {
            let state = shared.lock();
            if state.integ.levels.iter().any(|l| l.pid == pid && l.fingerprint == fingerprint) {
                return;
            }
            let replaced = state.integ.levels.iter().any(|l| l.pid == pid);
            drop(state);
            *attempts += 1;
            let handshake = integration::REINSTALL_SEQ_BASE + *attempts;
            let script = files.reinstall_file(*attempts);
            let text = shell::reinstall_script(files, nonce, handshake);
            if private_fs::write_new_file(&script, text.as_bytes()).is_err() {
                return;
            }
            tracing::info!(pid, replaced, "reinstalling the shell integration");
            {
                let mut state = shared.lock();
                // Keep what the command printed before the new prompt; the
                // prompt line and the echo of our line are dropped on the
                // handshake.
                state.screen.commit_complete_lines();
                state.route_committed(Instant::now());
                state.integ.reinstall = Some(Reinstall {
                    seq: handshake,
                    pid,
                    fingerprint,
                    replaced,
                    command_seq: seq,
                    script: script.clone(),
                    deadline: Instant::now() + integration::REINSTALL_TIMEOUT,
                });
            }
            let _ = pty::write_key(master, shell::reinstall_line(&script).as_bytes());
        }
        Some(Prompting::OtherShell(name)) if *noted != Some(seq) => {
            *noted = Some(seq);
            shared.lock().integ.notes.push(Note::OtherShell(name));
            shared.changed.notify_waiters();
        }
        Some(Prompting::Remote(name)) if *noted != Some(seq) => {
            *noted = Some(seq);
            shared.lock().integ.notes.push(Note::RemoteShell(name));
            shared.changed.notify_waiters();
        }
        _ => {}
    }
}
