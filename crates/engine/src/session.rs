//! A persistent shell session: one bash in a real PTY that keeps its working
//! directory, environment, functions and jobs between commands.
//!
//! One call at a time drives the session (a `tokio::sync::Mutex` held for
//! the whole call); the PTY reader thread feeds every byte through the
//! renderer into shared state and wakes the call, so a command's end is
//! seen the moment its marker arrives. Calls return softly (the command
//! keeps running, exit code -1) when output stops for a while or the
//! agent's wait runs out. A shell that dies is restarted in the same
//! directory. This module does not know about MCP or how replies are worded.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::guard::Guard;
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
    /// A call without a timeout returns after this long in any case.
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
    /// characters, a 30 s soft return, a 5 s kill grace, spill files in
    /// `spill_dir` with the default [`SpillLimits`] and no retention.
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
            max_wait: Duration::from_secs(120),
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
    /// The longest a new command may run in the foreground before its
    /// process group is killed (the policy's execution limit); `None` for
    /// no limit. A call's `timeout` never lowers it: the limit in force is
    /// at least as long as any wait the agent asked for.
    pub exec_limit: Option<Duration>,
}

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
    /// The output is the current screen of a full-screen program.
    FullScreen,
    /// Text printed while no command was running (background jobs).
    IdleOutput(String),
    /// The program is blocked waiting for input from the terminal.
    WaitingForInput,
    /// The command ran past its execution limit and was killed.
    Killed {
        /// The limit it exceeded (time waiting for input not counted).
        limit: Duration,
        /// How it died: after SIGTERM, or SIGKILL after the grace period.
        mode: TerminationMode,
    },
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

    /// Carries out one call. `cancel` stops the wait and interrupts the
    /// command (the agent's request was cancelled).
    pub async fn execute(
        &self,
        request: Request,
        cancel: CancellationToken,
    ) -> Result<Reply, SessionError> {
        validate(&request)?;
        let mut slot = self.shell.lock().await;
        let mut notes = Vec::new();
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
        let running = shell.running_state();
        if running == RunningState::Finished {
            shell.reap_interrupted(self.config.grace).await;
        }
        let command = request.command.as_str();
        let is_key = keys::is_key(command);
        if running == RunningState::Unfinished
            && let Some(timeout) = request.timeout
        {
            shell.extend_limit(timeout);
        }
        let reply = match running {
            RunningState::Unfinished if command.trim().is_empty() => {
                shell.wait_reply(&self.config, request.timeout, notes, cancel).await
            }
            RunningState::Unfinished if request.is_input || is_key => {
                let input = keys::parse(command).map_err(SessionError::Invalid)?;
                notes.push(shell.send_input(input).await?);
                shell.wait_reply(&self.config, request.timeout, notes, cancel).await
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
            RunningState::None if request.is_input || is_key => Err(SessionError::Invalid(
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
            if let Some(old) = slot.take() {
                old.stop(&self.config).await;
            }
            let mut reply = reply;
            self.install(&mut slot, Shell::spawn(&self.config, &cwd).await?);
            reply.notes.push(Note::ShellRestarted { how, cwd });
            return Ok(reply);
        }
        Ok(reply)
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
    /// The execution limit in force, if any.
    exec_limit: Option<Duration>,
    /// When it started, in the clock ticks `/proc` uses.
    started_ticks: u64,
    /// Time the program spent blocked on terminal input (not counted
    /// against the limit), and whether it was blocked at the last look.
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
            }),
            changed: Notify::new(),
        });
        let reader_shared = Arc::clone(&shared);
        let pty = Pty::start(opened.master, &config.name, move |bytes| {
            {
                let mut state = reader_shared.lock();
                match bytes {
                    Some(bytes) => state.ingest(bytes),
                    None => state.reader_done = true,
                }
            }
            reader_shared.changed.notify_waiters();
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

        let supervisor = tokio::spawn(supervise(Supervisor {
            shared: Arc::clone(&shared),
            master: pty.handle().map_err(|err| fail("PTY", err))?,
            tty: opened.tty,
            shell_pid: pid,
            grace: config.grace,
        }));
        let shell = Shell {
            shared,
            pty,
            pid,
            scope,
            files,
            next_seq: 1,
            cwd: cwd.to_owned(),
            python: None,
            waiter,
            supervisor,
        };
        shell.wait_ready(config.startup_timeout).await?;
        let mut shell = shell;
        shell.refresh_state();
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

    /// A wait the agent asks for never ends in a kill: the limit in force
    /// grows to cover it.
    fn extend_limit(&self, timeout: Duration) {
        if let Some(running) = &mut self.shared.lock().running
            && let Some(limit) = &mut running.exec_limit
        {
            *limit = (*limit).max(running.started_at.elapsed() + timeout);
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
        let exec_limit = request.exec_limit.map(|limit| limit.max(timeout.unwrap_or_default()));
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
            .write_all(shell::run_line(seq).as_bytes(), Duration::from_secs(5))
            .await
            .map_err(|err| SessionError::Shell(format!("could not write to the shell: {err}")))?;
        self.wait_reply(config, timeout, notes, cancel).await
    }

    fn files_tag(&self) -> String {
        self.files.dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
    }

    async fn send_input(&mut self, input: Input) -> Result<Note, SessionError> {
        if matches!(&input, Input::Key { name, .. } if name == "C-c") {
            self.note_interrupt();
        }
        let (bytes, note) = match input {
            Input::Key { name, bytes } => (bytes, Note::KeySent(name)),
            Input::Text(text) => {
                let mut bytes = text.into_bytes();
                bytes.push(b'\r');
                (bytes, Note::InputSent)
            }
        };
        self.pty.write_all(&bytes, Duration::from_secs(5)).await.map_err(|err| {
            SessionError::Shell(format!("could not send the input to the program: {err}"))
        })?;
        Ok(note)
    }

    /// Remembers the foreground group about to get ^C.
    fn note_interrupt(&self) {
        let Ok(master) = self.pty.handle() else { return };
        let Some(group) = pty::foreground_group(&master).filter(|&g| g != self.pid) else { return };
        if let Some(running) = &mut self.shared.lock().running {
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
    ) -> Result<Reply, SessionError> {
        let waited = self.wait(config, timeout, &cancel).await;
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
            Waited::Cancelled => {
                // The agent gave up on this call: interrupt the command, as
                // a person would press ^C.
                self.note_interrupt();
                let _ = self.pty.write_all(b"\x03", Duration::from_secs(1)).await;
                Ok(self.partial_reply(config, WaitEnded::NotWaited, notes))
            }
        }
    }

    async fn wait(
        &self,
        config: &SessionConfig,
        timeout: Option<Duration>,
        cancel: &CancellationToken,
    ) -> Waited {
        let call_start = Instant::now();
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
            }
        }
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
        if running.waiting_for_input {
            notes.push(Note::WaitingForInput);
        }
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
        drop(self.pty);
        let _ = std::fs::remove_dir_all(&self.files.dir);
    }
}

/// What the supervisor of one shell needs.
struct Supervisor {
    shared: Arc<Shared>,
    /// A handle on the PTY master: the foreground group, and ^C.
    master: std::os::fd::OwnedFd,
    /// The PTY slave's path, to recognise reads of the terminal.
    tty: PathBuf,
    shell_pid: i32,
    grace: Duration,
}

/// How often a running command is checked for waiting on input. There is
/// no kernel event for "blocked reading the terminal", so it is sampled;
/// commands that end within the first second are never looked at.
const INPUT_SAMPLE: Duration = Duration::from_millis(250);
const FIRST_SAMPLE_AFTER: Duration = Duration::from_secs(1);

/// Watches the running command: accounts time spent waiting for terminal
/// input, and kills the foreground job when it runs past its limit. Runs
/// for the life of the shell, whether or not a call is waiting.
async fn supervise(supervisor: Supervisor) {
    let Supervisor { shared, master, tty, .. } = &supervisor;
    let mut last_look: Option<(u64, Instant, bool)> = None;
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
                    Some((running.seq, running.started_at, running.exec_limit, running.input_wait))
                }
                _ => None,
            }
        };
        let Some((seq, started_at, limit, input_wait)) = watched else {
            last_look = None;
            notified.await;
            continue;
        };
        let now = Instant::now();
        let mut input_wait = input_wait;
        if now >= started_at + FIRST_SAMPLE_AFTER {
            let waiting = pty::foreground_group(master)
                .is_some_and(|group| process::waiting_for_terminal_input(group, tty));
            if let Some((last_seq, at, was_waiting)) = last_look
                && last_seq == seq
                && was_waiting
                && waiting
            {
                input_wait += now - at;
            }
            last_look = Some((seq, now, waiting));
            let mut state = shared.lock();
            if let Some(running) = &mut state.running
                && running.seq == seq
            {
                running.input_wait = input_wait;
                running.waiting_for_input = waiting;
            }
        }
        let waiting = last_look.is_some_and(|(_, _, waiting)| waiting);
        if let Some(limit) = limit
            && !waiting
            && now >= started_at + limit + input_wait
        {
            kill_foreground(&supervisor, seq, limit).await;
            continue;
        }
        let next_look = (now + INPUT_SAMPLE).max(started_at + FIRST_SAMPLE_AFTER);
        let wake = match limit {
            Some(limit) => next_look.min(started_at + limit + input_wait),
            None => next_look,
        };
        tokio::select! {
            () = &mut notified => {}
            () = tokio::time::sleep_until(wake) => {}
        }
    }
}

/// Kills the running command's foreground job (and the groups it left
/// behind), never the shell, and records how it died.
async fn kill_foreground(supervisor: &Supervisor, seq: u64, limit: Duration) {
    let Supervisor { shared, master, shell_pid, grace, .. } = supervisor;
    let since = {
        let mut state = shared.lock();
        let Some(running) = state.running.as_mut().filter(|r| r.seq == seq) else { return };
        running.kill = Some((limit, None));
        running.started_ticks
    };
    tracing::info!(seq, ?limit, "killing a terminal command that ran past its execution limit");
    let mut groups = process::orphaned_groups(*shell_pid, since);
    let foreground = pty::foreground_group(master).filter(|&group| group != *shell_pid);
    groups.extend(foreground);
    let mode = if foreground.is_some() {
        process::terminate_groups(&groups, *grace).await.unwrap_or(TerminationMode::Soft)
    } else {
        // The shell itself is busy (a loop of builtins): interrupt it as a
        // person would, and if that does not work, end the shell, which is
        // then restarted.
        let _ = pty::write_key(master, b"\x03");
        process::terminate_groups(&groups, *grace).await;
        let finished = wait_for(shared, *grace, |state| {
            state.running.as_ref().is_none_or(|r| r.seq != seq || r.finished.is_some())
        })
        .await;
        if finished {
            TerminationMode::Soft
        } else {
            process::terminate_session(*shell_pid, None, *grace).await;
            TerminationMode::Hard
        }
    };
    if let Some(running) = shared.lock().running.as_mut().filter(|r| r.seq == seq) {
        running.kill = Some((limit, Some(mode)));
    }
    shared.changed.notify_waiters();
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
