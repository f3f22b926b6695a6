//! A persistent shell session: one bash in a real PTY that keeps its working
//! directory, environment, functions and jobs between commands. This file is
//! its public face: [`Session`] with its `execute` dispatch (a typed [`Call`]
//! meets what the shell is doing: run, poll, send input, or refuse), the
//! restart of a shell that died, read-only views for listings and job
//! watchers, and the place a background job starts in.
//!
//! Behind it, layers that each know only those below: `driver` (one bash and
//! its PTY), `incomplete`, `wait` (waiting and replies), `supervise`,
//! `watcher`, `shared` (what the PTY reader shares), `command`, `levels`,
//! `timing`, `channel`, `call` (the terms every layer shares). It knows
//! nothing of MCP or of how replies are worded. Invariant: one call at a
//! time (`Session::shell`, a `tokio` mutex held for the whole call); the std
//! mutexes only to copy or swap a value, never across `.await`.

mod call;
mod channel;
mod command;
mod driver;
mod incomplete;
mod levels;
mod shared;
mod supervise;
mod timing;
mod wait;
mod watcher;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::bash_script::ShellFiles;
use crate::keys::Input;
use crate::output::OutputStore;
use crate::process;
use crate::terminal::{Gate, Held, Hold, Terminal};

pub use call::{
    AtPrompt, Call, Event, InputReport, MAX_START_ENV, NotRun, Outcome, Place, PlaceError,
    PlaceFailure, Progress, ProgressHook, Reader, Reply, Request, SessionConfig, SessionError,
    ShellExit, ShellFailure, StartStep, WaitEnded, Written,
};
use driver::Shell;
use incomplete::Step;
use shared::{CommandState, Shared, exit_code, wait_for};
use wait::{CallCancel, CallParts};

/// A persistent shell session.
pub struct Session {
    config: SessionConfig,
    /// The session's store of complete command outputs (made from the
    /// configuration's `spill` and `output_limits`), which every shell the
    /// session starts writes its commands' logs to.
    output: Arc<OutputStore>,
    /// The shell, locked for the whole of each call: one call at a time.
    shell: tokio::sync::Mutex<Option<Shell>>,
    /// The live shell's shared state, readable while a call is waiting.
    current: Mutex<Option<Arc<Shared>>>,
    /// The live shell's pid and private files, for listings.
    live: Mutex<Option<(i32, ShellFiles)>>,
    /// The live shell's terminal, for a person watching or typing.
    terminal: Mutex<Option<Arc<Terminal>>>,
    /// Who may type, and when (outlives a reset).
    gate: Arc<Gate>,
    /// When the client last cancelled a call that had not been reported on
    /// since; the next call says so.
    cancelled_at: Mutex<Option<Instant>>,
    /// Cancelled when the session is being closed: a call waiting on it
    /// returns at once instead of holding up the close.
    closing: CancellationToken,
    /// Whether [`Session::start`] holds the shell to start it (the server
    /// starts `default`'s shell at once): [`Session::place`] then waits for
    /// the start, which has a bound of its own, not for a call.
    starting: std::sync::atomic::AtomicBool,
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
    pub fn new(config: SessionConfig) -> Session {
        let output =
            OutputStore::new(Arc::clone(&config.spill), &config.file_label(), config.output_limits);
        Session {
            config,
            output,
            shell: tokio::sync::Mutex::new(None),
            current: Mutex::new(None),
            live: Mutex::new(None),
            terminal: Mutex::new(None),
            gate: Arc::new(Gate::default()),
            cancelled_at: Mutex::new(None),
            closing: CancellationToken::new(),
            starting: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// What the session is doing now. Never waits for a call in progress.
    pub fn activity(&self) -> Activity {
        let current = self.current.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let Some(shared) = current else { return Activity::NotStarted };
        let state = shared.lock();
        // A shell that is gone ended its command, whether or not the
        // waiter has finished it yet.
        let exited = state.exited().map(exit_code);
        match state.command() {
            None => Activity::Idle,
            Some(command) => match command.finished().map(|(code, _)| code).or(exited) {
                Some(exit_code) => {
                    Activity::Finished { command: command.text().to_owned(), exit_code }
                }
                None => Activity::Running {
                    command: command.text().to_owned(),
                    elapsed: command.started_at().elapsed(),
                },
            },
        }
    }

    /// Puts a newly started shell in `slot`.
    fn install<'a>(&self, slot: &'a mut Option<Shell>, shell: Shell) -> &'a mut Shell {
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::clone(shell.shared()));
        *self.live.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((shell.pid(), shell.files().clone()));
        *self.terminal.lock().unwrap_or_else(|p| p.into_inner()) =
            Some(Arc::clone(shell.terminal()));
        slot.insert(shell)
    }

    /// The live shell's terminal, for a person watching (`None` before the
    /// shell starts and once the session is closed; a reset gives a new
    /// one). Take what is needed (a `Watch`) and let it go.
    pub fn terminal(&self) -> Option<Arc<Terminal>> {
        self.terminal.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Takes the session for a person's writing: while the hold lives, the
    /// agent's new commands and input are refused
    /// (`NotRun::PersonHolds`). One person at a time.
    pub fn hold(&self) -> Result<Hold, Held> {
        self.gate.hold()
    }

    /// Since when a person holds the session for writing, if one does.
    pub fn held_since(&self) -> Option<std::time::SystemTime> {
        self.gate.held_since()
    }

    /// Types a person's keys into the live shell's terminal, once no agent
    /// line is being typed; the agent's next reply says a person typed
    /// (when, how many keys; never the text typed with echo off).
    ///
    /// At the shell's idle prompt, the agent's last command left line
    /// editing off (the shell reads the agent's lines faster without it):
    /// before the first keys, the shell is asked to edit lines again, and
    /// the keys wait until it does.
    pub async fn type_keys(&self, hold: &Hold, bytes: &[u8]) -> std::io::Result<()> {
        let Some(terminal) = self.terminal() else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotConnected,
                "the session has no shell running",
            ));
        };
        let current = self.current.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(shared) = current {
            let typing = crate::bash_script::Typing::lines(terminal.kill_character());
            let line = typing.line(crate::bash_script::EDIT_LINE);
            let due = || shared.lock().person_editing_due();
            let echo_pending = || shared.lock().editing_echo_pending();
            let answered =
                terminal.person_line_editing(hold, line.as_bytes(), due, echo_pending).await;
            // A shell that did not answer: what comes is shown and reported
            // as it is.
            if !matches!(answered, Ok(true)) {
                shared.lock().give_up_editing_echo();
            }
            answered?;
        }
        terminal.person_keys(hold, bytes).await
    }

    /// The session's configuration.
    pub fn config(&self) -> &SessionConfig {
        &self.config
    }

    /// Starts the shell now, so the first command does not wait for it.
    pub async fn start(&self) -> Result<(), SessionError> {
        use std::sync::atomic::Ordering;
        let mut shell = self.shell.lock().await;
        self.starting.store(true, Ordering::Release);
        let started = self.live_shell(&mut shell, &mut Vec::new()).await;
        self.starting.store(false, Ordering::Release);
        started?;
        Ok(())
    }

    /// Carries out one call. `cancel` means the client gave up on the call:
    /// the wait ends, the command is left running untouched (under the
    /// unwatched-time limit), nothing it printed is consumed, and the next
    /// call reports it and says that this one was cancelled.
    ///
    /// A reset comes first; then an incomplete command may take the call;
    /// else what it asks (run, poll, input) meets what the shell is doing.
    pub async fn execute(
        &self,
        request: Request,
        cancel: CancellationToken,
    ) -> Result<Reply, SessionError> {
        let mut reply = self.carry_out(request, cancel).await?;
        // What a person typed meanwhile, told once.
        if let Some(typed) = self.gate.take_typed() {
            reply.events.push(Event::PersonTyped(typed));
        }
        Ok(reply)
    }

    /// [`Session::execute`] without what a person typed.
    async fn carry_out(
        &self,
        request: Request,
        cancel: CancellationToken,
    ) -> Result<Reply, SessionError> {
        validate(&request)?;
        if let (Call::Reset { .. }, Some(since)) = (&request.call, self.gate.held_since()) {
            return Err(SessionError::PersonHolds { since });
        }
        let (cancel, _link) = self.call_token(cancel);
        let mut slot = self.shell.lock().await;
        let mut events = self.begin_call(cancel.token())?;
        let mut request = request;
        let call = match std::mem::take(&mut request.call) {
            Call::Reset { then } => {
                if let Some(old) = slot.take() {
                    old.stop(&self.config, "the agent reset the session").await;
                }
                events.push(Event::Reset);
                let shell = self.live_shell(&mut slot, &mut Vec::new()).await?;
                match then {
                    Some(command) if !command.trim().is_empty() => Call::Run { command },
                    _ => return Ok(wait::idle_reply(shell.view(), CallParts::new(events))),
                }
            }
            call => call,
        };
        let shell = self.live_shell(&mut slot, &mut events).await?;
        let state = shell.command_state();
        let step = incomplete::step(shell.incomplete(), &self.config.shell, &call, state).await?;
        let act = match step {
            Step::Reply(held, input) => {
                events.extend(shell.take_integration_events());
                let parts = CallParts { input, ..CallParts::new(events) };
                return Ok(wait::held_reply(shell.view(), held, parts));
            }
            Step::Held(held) => {
                // The command that finished before it is reported first.
                let previous = shell.finished_reply(CallParts::default());
                events.extend(shell.take_integration_events());
                let parts =
                    CallParts { previous: Some(Box::new(previous)), ..CallParts::new(events) };
                return Ok(wait::held_reply(shell.view(), held, parts));
            }
            Step::Run(command) => Act::Run(command),
            Step::Pass => Act::from(call),
        };
        let reply = self.act(shell, act, &request, CallParts::new(events), &cancel).await?;
        self.end_call(&mut slot, reply).await
    }

    /// The cancellation of this call's wait: the client's, or the session
    /// being closed (not for calls made by the close itself), with the task
    /// that links them, aborted when the call ends.
    fn call_token(&self, client: CancellationToken) -> (CallCancel, Option<AbortOnDrop>) {
        if self.closing.is_cancelled() {
            return (CallCancel::new(client.clone(), client), None);
        }
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
        (CallCancel::new(call, client), Some(AbortOnDrop(link)))
    }

    /// The start of a call whose turn has come: refused if the client gave
    /// up meanwhile (its answer would be dropped), else the events it
    /// begins with (a previous call that was cancelled).
    fn begin_call(&self, cancel: &CancellationToken) -> Result<Vec<Event>, SessionError> {
        if cancel.is_cancelled() {
            self.note_cancelled();
            return Err(SessionError::Cancelled);
        }
        let cancelled_at = self.cancelled_at.lock().unwrap_or_else(|p| p.into_inner()).take();
        Ok(cancelled_at
            .map(|at| Event::PreviousCallCancelled { ago: at.elapsed() })
            .into_iter()
            .collect())
    }

    /// What the call asks (`act`) meets what the shell is doing: the
    /// dispatch. `parts` is what the call brings to its reply so far.
    async fn act(
        &self,
        shell: &mut Shell,
        act: Act,
        request: &Request,
        mut parts: CallParts,
        cancel: &CallCancel,
    ) -> Result<Reply, SessionError> {
        let running = self.settled_state(shell, &act, request).await;
        let (config, timeout) = (&self.config, request.timeout);
        let progress = request.progress.as_ref();
        match (running, act) {
            (CommandState::Running, Act::Poll) => {
                shell.wait_reply(config, timeout, parts, cancel, progress).await
            }
            (CommandState::Running, Act::Input(input)) => {
                parts.input = Some(shell.send_input(input).await?);
                shell.wait_reply(config, timeout, parts, cancel, progress).await
            }
            (CommandState::Running, Act::Run(command)) => {
                let mut state = shell.shared().lock();
                let Some(why) = state.command().map(wait::blocking) else {
                    return Ok(wait::idle_reply(shell.view(), parts));
                };
                let outcome = Outcome::NotExecuted { command, why };
                Ok(wait::partial_reply(&mut state, shell.view(), config, outcome, parts))
            }
            (CommandState::Finished, Act::Poll) => Ok(shell.finished_reply(parts)),
            (CommandState::Finished, Act::Input(_)) => {
                parts.input = Some(InputReport::NotSent);
                Ok(shell.finished_reply(parts))
            }
            (CommandState::Finished, Act::Run(command)) => {
                let previous = shell.finished_reply(CallParts::default());
                parts.previous = Some(Box::new(previous));
                shell.run(config, &command, request, parts, cancel).await
            }
            (CommandState::Idle, Act::Poll) => Err(SessionError::NothingToWaitFor),
            (CommandState::Idle, Act::Input(keys @ Input::Keys(_))) => {
                // As at a prompt: a key with nothing to receive it is
                // harmless. It is not typed into the idle shell, where C-d
                // would end it and C-c would disturb its prompt; nor is
                // text without Enter, which the next command would be
                // glued to.
                let key = keys.describe().unwrap_or_default();
                parts.input = Some(InputReport::KeyNotNeeded(key));
                Ok(wait::idle_reply(shell.view(), parts))
            }
            (CommandState::Idle, Act::Input(Input::Text(_))) => {
                Err(SessionError::NothingToSendInputTo)
            }
            (CommandState::Idle, Act::Run(command)) => {
                shell.run(config, &command, request, parts, cancel).await
            }
        }
    }

    /// What the shell is doing, once a command that seems to run had a
    /// moment to show it ended (never refuse a command, or drop a key, for
    /// a command that has in fact just ended); what an interrupted command
    /// that finished left behind is stopped, and a running command is
    /// looked at.
    async fn settled_state(&self, shell: &mut Shell, act: &Act, request: &Request) -> CommandState {
        let mut running = shell.command_state();
        if running == CommandState::Running && *act != Act::Poll {
            shell.settle(&self.config).await;
            running = shell.command_state();
        }
        if running == CommandState::Finished {
            shell.reap_interrupted(self.config.grace).await;
        }
        if running == CommandState::Running {
            // Any call about the running command is a look at it.
            shell.touch(request.timeout);
        }
        running
    }

    /// The end of a call: a shell the command ended is replaced (in the
    /// directory it was in) and the reply says so; a call the client
    /// cancelled is remembered for the next; the integration's events and
    /// the resource limits that stopped something are added to the reply's
    /// events, which stay in order as they happened.
    async fn end_call(
        &self,
        slot: &mut Option<Shell>,
        mut reply: Reply,
    ) -> Result<Reply, SessionError> {
        let Some(shell) = slot.as_mut() else { return Ok(reply) };
        let restart = shell.has_exited().then(|| (shell.restart_dir(&self.config), shell.exit()));
        if restart.is_none() && reply.outcome == (Outcome::Running { why: WaitEnded::Cancelled }) {
            self.note_cancelled();
        }
        reply.events.extend(shell.take_integration_events());
        let failed = reply.exit_code().is_some_and(|code| code != 0);
        let limits = shell.take_limit_events(failed.then_some(reply.output.text.as_str()));
        reply.events.extend(limits);
        if let Some((cwd, how)) = restart {
            if let Some(old) = slot.take() {
                old.stop(&self.config, "the shell ended").await;
            }
            self.install(slot, Shell::spawn(&self.config, &self.output, &cwd, &self.gate).await?);
            reply.events.push(Event::ShellRestarted { how, cwd });
        }
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
            shell.stop(&self.config, "the session was closed").await;
        }
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = None;
        *self.terminal.lock().unwrap_or_else(|p| p.into_inner()) = None;
        *self.live.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// The live shell, starting one when there is none or when the old one
    /// died while idle (which `events` then reports).
    async fn live_shell<'a>(
        &self,
        slot: &'a mut Option<Shell>,
        events: &mut Vec<Event>,
    ) -> Result<&'a mut Shell, SessionError> {
        if let Some(shell) = slot.as_mut()
            && shell.has_exited()
            && shell.command_state() == CommandState::Idle
        {
            let cwd = shell.restart_dir(&self.config);
            events.push(Event::ShellRestarted { how: shell.exit(), cwd: cwd.clone() });
            if let Some(old) = slot.take() {
                old.stop(&self.config, "the shell ended").await;
            }
            self.install(slot, Shell::spawn(&self.config, &self.output, &cwd, &self.gate).await?);
        }
        match slot {
            Some(shell) => Ok(shell),
            None => {
                let shell =
                    Shell::spawn(&self.config, &self.output, &self.config.cwd, &self.gate).await?;
                Ok(self.install(slot, shell))
            }
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
    /// Its last lines of output not shown before (at most 20); when there
    /// are none, the last lines of its last command.
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
        let current = self.current.lock().unwrap_or_else(|p| p.into_inner()).clone();
        current
            .and_then(|shared| shared.lock().shell_state())
            .map_or_else(|| self.config.cwd.clone(), |state| state.cwd)
    }

    /// Whether the running command is blocked reading the terminal, as the
    /// supervisor last saw it.
    pub fn waiting_for_input(&self) -> bool {
        let current = self.current.lock().unwrap_or_else(|p| p.into_inner()).clone();
        current.is_some_and(|shared| shared.lock().command().is_some_and(|c| c.reads_terminal()))
    }

    /// The prompt of the running command while it waits for input (as the
    /// supervisor confirmed it: blocked reading the terminal, output quiet):
    /// the text on the cursor's line, maybe empty. `None` while it runs or
    /// when there is none.
    pub fn input_prompt(&self) -> Option<String> {
        let current = self.current.lock().unwrap_or_else(|p| p.into_inner()).clone()?;
        let state = current.lock();
        let command = state.command().filter(|c| c.has_started() && !c.is_finished())?;
        let waits = command.waits_for_input()
            && state.levels().reinstall().is_none()
            && !state.awaits_fallback();
        waits.then(|| state.screen().current_line())
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
                current.map(|shared| shared.lock().take_idle_output()).unwrap_or_default()
            }
        };
        // Nothing new (an idle session, or an end a reply already showed):
        // the last lines of its last command, as its log keeps them.
        let output = if output.trim().is_empty() { self.last_logged_lines() } else { output };
        LastWords { activity, output: last_lines(&output, LAST_WORDS_LINES) }
    }

    /// The last [`LAST_WORDS_LINES`] lines of the newest command's output.
    fn last_logged_lines(&self) -> String {
        let lines = LAST_WORDS_LINES as u64;
        let log = self.output().get(None).ok();
        let page = log.and_then(|log| log.read(-(lines as i64), lines).ok());
        page.map(|page| page.text).unwrap_or_default()
    }

    /// Makes every finished line on the screen final, so that a read of the
    /// running command's output sees all its complete lines (a program can
    /// then no longer redraw them with cursor movement, as after a reply).
    pub fn commit_screen(&self) {
        let current = self.current.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(shared) = current {
            shared.lock().commit_lines(Instant::now());
        }
    }

    /// The session's store of complete command outputs.
    pub fn output(&self) -> &OutputStore {
        &self.output
    }

    /// Live processes in the shell's session, the shell included; 0 before
    /// the shell starts.
    pub fn process_count(&self) -> usize {
        let live = self.live.lock().unwrap_or_else(|p| p.into_inner()).clone();
        live.map_or(0, |(pid, _)| process::live_session_members(pid).len())
    }

    /// Waits until command `number` (as its log is numbered) ends, and
    /// says how: its exit code, how long it ran (from its start to its end,
    /// as the shell reported them) and whether a reply reported its end
    /// first (then what its log says; `None` if it no longer says).
    pub async fn command_end(&self, number: u64) -> Option<CommandEnd> {
        let shared = self.current.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let ours = |state: &shared::State| {
            state.command().filter(|c| c.output().number() == number).map(|c| {
                let exited = state.exited().map(exit_code);
                let end = c.finished().or(exited.map(|code| (code, Instant::now())));
                (c.text().to_owned(), c.started_at(), end)
            })
        };
        let mut seen = shared.as_ref().and_then(|shared| ours(&shared.lock()));
        if let Some(shared) = &shared
            && seen.as_ref().is_some_and(|(_, _, end)| end.is_none())
        {
            // Ten years: a job that runs longer is not waited for.
            wait_for(shared, Duration::from_secs(10 * 365 * 86_400), |state| {
                seen = ours(state);
                // Ended, or reported by a reply (taken), or replaced.
                seen.as_ref().is_none_or(|(_, _, end)| end.is_some())
            })
            .await;
        }
        match seen {
            Some((command, started, Some((exit_code, at)))) => Some(CommandEnd {
                command,
                exit_code,
                ran_for: at.saturating_duration_since(started),
                reported: false,
            }),
            _ => {
                let log = self.output().get(Some(number)).ok()?;
                let page = log.read(-1, 1).ok()?;
                Some(CommandEnd {
                    command: page.command,
                    exit_code: page.exit_code.unwrap_or(-1),
                    ran_for: Duration::ZERO,
                    reported: true,
                })
            }
        }
    }

    /// Where a background job started from this session starts: the
    /// directory and exported environment of its shell, at its prompt
    /// (taken from the shell itself, see `Shell::capture_env`). A session
    /// with no shell yet gives its start directory and environment. Waits
    /// at most `PLACE_WAIT` (2 s) for a call in progress on the session; a
    /// session running a command is [`PlaceError::Busy`].
    pub async fn place(&self) -> Result<Place, PlaceError> {
        let busy = || match self.activity() {
            Activity::Running { command, elapsed } => PlaceError::Busy { command, elapsed },
            _ => PlaceError::InUse,
        };
        let mut slot = match tokio::time::timeout(PLACE_WAIT, self.shell.lock()).await {
            Ok(slot) => slot,
            // Its shell is still starting (on a busy machine that can take
            // longer than the wait for a call): the start is bounded.
            Err(_) if self.starting.load(std::sync::atomic::Ordering::Acquire) => {
                self.shell.lock().await
            }
            Err(_) => return Err(busy()),
        };
        let start = || Place { cwd: self.config.cwd.clone(), env: self.config.start_env.clone() };
        let Some(shell) = slot.as_mut() else { return Ok(start()) };
        if shell.has_exited() {
            // The next call starts a new shell there, as it was started.
            return Ok(Place { cwd: shell.restart_dir(&self.config), ..start() });
        }
        if shell.command_state() == CommandState::Running {
            shell.settle(&self.config).await;
            if shell.command_state() == CommandState::Running {
                return Err(busy());
            }
        }
        let env = shell.capture_env(&self.config).await?;
        Ok(Place { cwd: shell.view().cwd().clone(), env: Some(Arc::new(env)) })
    }
}

/// How long [`Session::place`] waits for a call in progress on the session.
const PLACE_WAIT: Duration = Duration::from_secs(2);

/// How a command that a job watcher waited for ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandEnd {
    /// The command.
    pub command: String,
    /// Its exit code (-1 when its log no longer says).
    pub exit_code: i32,
    /// From its start to its end (zero when a reply reported its end
    /// first: that reply said how long it ran).
    pub ran_for: Duration,
    /// A reply reported its end first: the agent knows.
    pub reported: bool,
}

fn validate(request: &Request) -> Result<(), SessionError> {
    let text = match &request.call {
        Call::Run { command } | Call::Reset { then: Some(command) } => command.as_str(),
        Call::Input(Input::Text(text)) => text.as_str(),
        // Keys reach a program, never a command line: C-@ sends a NUL.
        Call::Poll | Call::Input(Input::Keys(_)) | Call::Reset { then: None } => "",
    };
    if text.contains('\0') {
        return Err(SessionError::NulByte);
    }
    Ok(())
}

/// What a call does once a reset is behind it and no incomplete command
/// takes it: the three things a call can ask of a live shell.
#[derive(Debug, PartialEq, Eq)]
enum Act {
    /// Run a new command.
    Run(String),
    /// Wait for the running command.
    Poll,
    /// Send text or a key to the running program.
    Input(Input),
}

impl From<Call> for Act {
    /// A blank command, or blank text, is a poll (as an empty line is at a
    /// prompt); a reset was carried out before.
    fn from(call: Call) -> Act {
        match call {
            Call::Run { command } if !command.trim().is_empty() => Act::Run(command),
            Call::Input(Input::Text(text)) if text.trim().is_empty() => Act::Poll,
            Call::Input(input) => Act::Input(input),
            Call::Run { .. } | Call::Poll | Call::Reset { .. } => Act::Poll,
        }
    }
}

/// Aborts a task when dropped: the link between a call's cancellation and
/// the client's lives exactly as long as the call.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
