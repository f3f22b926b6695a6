//! The bash protocol of one shell: `Shell`, one bash process in its PTY with
//! its private files and the three tasks that live as long as it does. It
//! starts the shell (the start-up handshake), types the line that runs a
//! command (the command's text goes over the command socket,
//! `driver/command_socket.rs`), sends input and keys to the running program,
//! settles a command that is ending, cleans up after an interrupt, and stops
//! the shell with everything it started; `driver/place.rs` reads and restores
//! a background job's environment.
//!
//! It does not decide what a call does (`mod.rs`), how long a call waits or
//! what a reply holds (`wait.rs`), or when a command is stopped
//! (`supervise.rs`). Invariant: what the shell trusts never passes through a
//! path a command can write: the completion channel (descriptor 62), the
//! sealed keys file (61) and the command socket (60) are given at its start.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::bash_script::{self, ShellFiles, Typing};
use crate::input_wait::{self, ShellReads};
use crate::keys::Input;
use crate::limits::{Counts, OwnerLimits};
use crate::output;
use crate::output::OutputStore;
use crate::private_fs;
use crate::proc_shell;
use crate::process;
use crate::terminal::{Gate, Terminal, pty};

use super::call::{
    Event, InputReport, NotRun, Outcome, ProgressHook, Reply, Request, SessionConfig, SessionError,
    ShellExit, ShellFailure, StartStep, Written,
};
use super::command::{Command, CommandOutput};
use super::incomplete::Incomplete;
use super::shared::{CommandState, Shared, State, shell_exit, wait_for};
use super::supervise::{Supervisor, supervise};
use super::wait::{self, CallCancel, CallParts, ShellView, Waited};
use super::watcher::{Watcher, watch_integration};
use command_socket::CommandSocket;
use start::{
    Descriptors, StartFrom, private_files, shared_state, shell_command, shell_pid, shell_scope,
    start_failed, start_terminal, wait_for_exit,
};

mod command_socket;
mod place;
mod start;

/// How long a command waits for the shell to come to read its terminal
/// after the previous command ended, before it is refused as not at the
/// prompt.
const PROMPT_WAIT: Duration = Duration::from_millis(500);

/// How long a new command or key waits for the end marker of a command
/// whose job has just ended, and, when the shell is already reading the
/// terminal again, for the marker it wrote before.
const SETTLE: Duration = Duration::from_millis(500);
const SETTLE_READING: Duration = Duration::from_millis(50);
/// How long text input may wait for the program to make room for it.
const INPUT_STALL: Duration = Duration::from_millis(300);

/// How long cursor keys wait for the reader to take output the program
/// printed before them: it may set the cursor-key mode they are sent in.
const MODE_SETTLE: Duration = Duration::from_millis(100);

/// One bash process and its PTY.
pub(super) struct Shell {
    shared: Arc<Shared>,
    terminal: Arc<Terminal>,
    /// The PTY slave's path, to discard unread input before ^C.
    tty: PathBuf,
    pid: i32,
    /// The marker every process the shell starts inherits, so that `reset`
    /// and the end of the session reach what left the session.
    scope: process::Scope,
    /// The kernel's counters of the shell's resource limits at the last
    /// reply that reported them.
    limits_seen: std::sync::Mutex<Counts>,
    files: ShellFiles,
    /// Where the commands' text goes.
    commands: CommandSocket,
    /// The session's store of complete command outputs, where each
    /// command's log is begun.
    output: Arc<OutputStore>,
    next_seq: u64,
    /// The directory and `PATH` the prompt reported last.
    view: ShellView,
    /// The tasks that live as long as the shell.
    tasks: Tasks,
    /// An incomplete command the shell would be waiting to complete.
    incomplete: Option<Incomplete>,
}

/// The tasks that live as long as a shell, aborted when it stops.
struct Tasks {
    /// Notices the shell's exit.
    waiter: tokio::task::JoinHandle<()>,
    /// Stops a command past its limit (`supervise.rs`).
    supervisor: tokio::task::JoinHandle<()>,
    /// Watches for a shell that lost the integration (`watcher.rs`).
    watcher: tokio::task::JoinHandle<()>,
}

impl Tasks {
    /// Ends the tasks.
    fn abort(&self) {
        self.waiter.abort();
        self.supervisor.abort();
        self.watcher.abort();
    }
}

/// The error of a write of `what` to the shell's terminal that failed with
/// `error`.
fn write_failed(what: Written) -> impl FnOnce(std::io::Error) -> SessionError {
    move |error| SessionError::Shell(ShellFailure::Write { what, error })
}

impl Shell {
    /// Starts a shell for a session configured by `config`, in `cwd`,
    /// writing its commands' logs to `output`, with `gate` saying who may
    /// type; returns once it showed its first prompt (the start-up
    /// handshake) and, for a background job, took back its calling shell's
    /// environment.
    pub(super) async fn spawn(
        config: &SessionConfig,
        output: &Arc<OutputStore>,
        cwd: &Path,
        gate: &Arc<Gate>,
    ) -> Result<Shell, SessionError> {
        let nonce = private_fs::random_hex(16).map_err(start_failed(StartStep::RandomNonce))?;
        let files = private_files(config)?;
        let Descriptors { channel, commands, command_link, shell: ends } =
            Descriptors::open(config)?;
        let opened = pty::open(config.rows, config.cols).map_err(start_failed(StartStep::Pty))?;
        let scope = shell_scope(config, &files)?;
        let from = StartFrom {
            slave: &opened.slave,
            scope: &scope,
            files: &files,
            ends: &ends,
            nonce: &nonce,
        };
        let mut command = shell_command(config, cwd, &from)?;
        let step = StartStep::Spawn { shell: config.shell.clone(), cwd: cwd.to_owned() };
        let child = process::spawn(&mut command).map_err(start_failed(step))?;
        // Only the child may hold the slave side, so that the reader sees
        // the terminal hang up once the shell and its jobs are gone.
        drop(opened.slave);
        let env_fd = ends.env.as_ref().map(AsRawFd::as_raw_fd);
        let marks = ends.release(command_link);
        let pid = shell_pid(&child, &scope);
        let shared = shared_state(config, gate, &nonce, pid, channel);
        if let Some(guard) = &config.guard {
            guard.watch_session(pid);
        }
        let terminal = Arc::new(start_terminal(config, gate, opened.master, &shared)?);
        let waiter = tokio::spawn(wait_for_exit(child, Arc::clone(&shared)));
        let pty = terminal.pty();
        let watcher = Watcher::new(
            Arc::clone(&shared),
            pty.access(&opened.tty).map_err(start_failed(StartStep::Pty))?,
            files.clone(),
            nonce,
            proc_shell::running_program(pid),
            marks,
            commands.handle().map_err(start_failed(StartStep::CommandSocket))?,
        );
        let supervisor = Supervisor::new(
            Arc::clone(&shared),
            pty.access(&opened.tty).map_err(start_failed(StartStep::Pty))?,
            pty.in_hand(),
            pid,
            config.grace,
        );
        let tasks = Tasks {
            waiter,
            supervisor: tokio::spawn(supervise(supervisor)),
            watcher: tokio::spawn(watch_integration(watcher)),
        };
        let shell = Shell {
            shared,
            terminal,
            tty: opened.tty,
            pid,
            limits_seen: std::sync::Mutex::new(
                scope.limits().map(OwnerLimits::counts).unwrap_or_default(),
            ),
            scope,
            files,
            commands,
            output: Arc::clone(output),
            next_seq: 1,
            view: ShellView::new(cwd.to_owned(), None),
            tasks,
            incomplete: None,
        };
        shell.finish_start(config, env_fd).await
    }

    /// The end of the start: waits for the first prompt (a shell that does
    /// not show it is stopped), removes the start-up file, and gives a
    /// background job's shell the environment in its sealed file at
    /// `env_fd`.
    async fn finish_start(
        mut self,
        config: &SessionConfig,
        env_fd: Option<i32>,
    ) -> Result<Shell, SessionError> {
        let ready = self.wait_ready(config.startup_timeout).await;
        // Read once; nothing else should find it.
        let _ = std::fs::remove_file(self.files.rc_file());
        if let Err(err) = ready {
            self.stop(config, "the shell did not start").await;
            return Err(err);
        }
        if let Some(env_fd) = env_fd
            && let Err(err) = self.restore_env(config, env_fd).await
        {
            tracing::warn!("a background job's shell kept its start-up files' environment: {err}");
        }
        self.refresh_state();
        Ok(self)
    }

    /// The shell's terminal.
    pub(super) fn terminal(&self) -> &Arc<Terminal> {
        &self.terminal
    }

    /// The start-up handshake: wait for the first prompt's marker, so the
    /// first command never races the shell's start.
    async fn wait_ready(&self, limit: Duration) -> Result<(), SessionError> {
        if wait_for(&self.shared, limit, |state| state.is_ready() || state.exited().is_some()).await
            && self.shared.lock().is_ready()
        {
            return Ok(());
        }
        let state = self.shared.lock();
        Err(SessionError::Shell(ShellFailure::NoFirstPrompt {
            ended: state.exited().map(shell_exit),
            waited: limit,
            // Bounded: a start-up file may print a line of any length. It is
            // output, so it passes the one place all output passes.
            last_line: output::head_tail(&state.current_line_shown(), 2_000, "").0,
        }))
    }

    /// What the shell is doing with its command.
    pub(super) fn command_state(&self) -> CommandState {
        self.shared.lock().command_state()
    }

    /// The state the reader thread shares, for the session's read-only
    /// views.
    pub(super) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// The shell's pid.
    pub(super) fn pid(&self) -> i32 {
        self.pid
    }

    /// The shell's private files.
    pub(super) fn files(&self) -> &ShellFiles {
        &self.files
    }

    /// The incomplete command held for the shell, if any.
    pub(super) fn incomplete(&mut self) -> &mut Option<Incomplete> {
        &mut self.incomplete
    }

    /// What the shell's prompt last reported.
    pub(super) fn view(&self) -> &ShellView {
        &self.view
    }

    /// A call looks at the running command: unwatched time starts again,
    /// and the limit becomes the larger of the category's and the call's
    /// `timeout`.
    pub(super) fn touch(&self, timeout: Option<Duration>) {
        if let Some(command) = self.shared.lock().command_mut()
            && !command.is_finished()
        {
            command.touch(Instant::now(), timeout);
        }
    }

    /// Gives a command that seems to be running a moment to show that it
    /// has in fact ended: a kill in progress finishes (within its grace
    /// period), and when the shell is back in the foreground its end marker
    /// may still be on its way.
    pub(super) async fn settle(&self, config: &SessionConfig) {
        let killing = |state: &State| state.command().is_some_and(Command::is_being_killed);
        if killing(&self.shared.lock()) {
            wait_for(&self.shared, 2 * config.grace + Duration::from_secs(3), |state| {
                !killing(state)
            })
            .await;
        }
        // The job in front has ended when the shell has the terminal back,
        // or when nothing is left of the group that had it.
        let front =
            self.terminal.pty().handle().ok().and_then(|master| pty::foreground_group(&master));
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
                state.exited().is_some() || state.command().is_none_or(Command::is_done)
            })
            .await;
        }
    }

    pub(super) fn has_exited(&self) -> bool {
        self.shared.lock().exited().is_some()
    }

    /// How the shell ended (once it has).
    pub(super) fn exit(&self) -> ShellExit {
        use std::os::unix::process::ExitStatusExt;
        let status = self.shared.lock().exited();
        match status.map(|status| (status.code(), status.signal())) {
            Some((Some(code), _)) => ShellExit::Code(code),
            Some((None, Some(signal))) => ShellExit::Signal(signal),
            _ => ShellExit::Unknown,
        }
    }

    /// Where a replacement shell should start: the last directory if it
    /// still exists, else the original one.
    pub(super) fn restart_dir(&mut self, config: &SessionConfig) -> PathBuf {
        self.refresh_state();
        let cwd = self.view.cwd();
        if cwd.is_dir() { cwd.clone() } else { config.cwd.clone() }
    }

    /// Takes the directory and `PATH` the prompt last sent.
    pub(super) fn refresh_state(&mut self) {
        let state = self.shared.lock().shell_state();
        if let Some(state) = state {
            self.view = ShellView::new(state.cwd, bash_script::python_interpreter(&state.path));
        }
    }

    /// Starts `command` and waits for it as a call with `request`'s
    /// options would.
    pub(super) async fn run(
        &mut self,
        config: &SessionConfig,
        command: &str,
        request: &Request,
        mut parts: CallParts,
        cancel: &CallCancel,
    ) -> Result<Reply, SessionError> {
        let timeout = request.timeout;
        let exec_limit = request.exec_limit;
        if let Some(since) = self.terminal.held_since() {
            let why = NotRun::PersonHolds { since };
            return Ok(wait::refused_reply(&self.view, command, why, parts));
        }
        let typing = match self.shell_reading().await {
            Ok(typing) => typing,
            Err((pid, command_line)) => {
                // Named as the shell's commands see it (`ps` in a sandbox's
                // namespace speaks its own pids).
                let why = NotRun::NotAtPrompt { pid: process::pid_inside(pid), command_line };
                return Ok(wait::refused_reply(&self.view, command, why, parts));
            }
        };
        let seq = self.next_seq;
        self.next_seq += 1;
        // A command may have removed the private directory (rm -rf
        // /tmp/*): it is the session's own, made again. One look at the
        // directory itself when it is still there; its parents were
        // checked when it was made.
        if private_fs::check_private_dir(&self.files.dir).is_err()
            && let Err(err) = private_fs::ensure_private_dir(&self.files.dir)
        {
            tracing::debug!("could not make the private directory again: {err}");
        }
        let frame = bash_script::command_frame(seq, command);
        let written = self.commands.start(&frame);
        let now = Instant::now();
        // The log names its command (a read of the log shows it): masked.
        let named = config.secrets.mask(command).0;
        let log = self.output.begin(&named);
        let output = CommandOutput::new(config.output_cap, log, Arc::clone(&config.secrets));
        let started = Command::new(
            (seq, command.to_owned()),
            (exec_limit, timeout),
            (process::boot_ticks_now(), typing),
            output,
            now,
        );
        let line = started.typed_keys();
        // Whatever background jobs printed since the last command is
        // reported now, not mixed into this command's output.
        let idle = self.shared.lock().begin(started, now);
        parts.idle_output = (!idle.trim().is_empty()).then_some(idle);
        // Tell the supervisor a command with a limit has started.
        self.shared.notify();
        self.terminal
            .type_line(command, line.as_bytes(), Duration::from_secs(5))
            .await
            .map_err(write_failed(Written::Command))?;
        let shared = Arc::clone(&self.shared);
        self.commands.finish(&frame, written, || shared.lock().exited().is_some()).await;
        self.wait_reply(config, timeout, parts, cancel, request.progress.as_ref()).await
    }

    /// Waits for the running command as the call's timeout allows, then
    /// replies with what happened; `parts` is what the call adds to the
    /// reply.
    pub(super) async fn wait_reply(
        &mut self,
        config: &SessionConfig,
        timeout: Option<Duration>,
        mut parts: CallParts,
        cancel: &CallCancel,
        progress: Option<&ProgressHook>,
    ) -> Result<Reply, SessionError> {
        match wait::wait(&self.shared, config, timeout, cancel.token(), progress).await {
            Waited::Finished => {
                self.reap_interrupted(config.grace).await;
                Ok(self.finished_reply(parts))
            }
            Waited::ShellExited => {
                wait::finish_after_exit(&self.shared).await;
                Ok(self.finished_reply(parts))
            }
            Waited::Cancelled => {
                Ok(wait::cancelled_reply(&self.shared.lock(), &self.view, cancel.why(), parts))
            }
            waited => {
                let mut state = self.shared.lock();
                let fallback = state.awaits_fallback();
                let Some(outcome) = state.command().map(|c| wait::stopped(c, &waited, fallback))
                else {
                    return Ok(wait::idle_reply(&self.view, parts));
                };
                if matches!(outcome, Outcome::WaitingForInput { .. }) && self.terminal.hides_input()
                {
                    parts.events.push(Event::InputHidden);
                }
                Ok(wait::partial_reply(&mut state, &self.view, config, outcome, parts))
            }
        }
    }

    /// The reply for a finished command; clears it from the session.
    pub(super) fn finished_reply(&mut self, parts: CallParts) -> Reply {
        let command = self.shared.lock().take_command();
        self.refresh_state();
        wait::finished_reply(command, &self.view, parts)
    }

    /// Events of the integration gathered since the last reply.
    pub(super) fn take_integration_events(&self) -> Vec<Event> {
        self.shared.lock().levels_mut().take_events()
    }

    /// The resource limits that stopped something in the session since the
    /// last reply, as the kernel counted them (a control group's counters).
    /// Without a control group, the resource limits of the process that
    /// `output` (what this reply shows of a command that failed) suggests
    /// stopped something.
    pub(super) fn take_limit_events(&self, output: Option<&str>) -> Vec<Event> {
        let Some(limits) = self.scope.limits() else { return Vec::new() };
        let mut seen = self.limits_seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut hits = limits.hits_since(&seen);
        if !hits.is_empty() {
            *seen = limits.counts();
        }
        if let Some(output) = output {
            hits.extend(limits.inferred_hits(output));
        }
        hits.into_iter().map(Event::LimitHit).collect()
    }

    /// A command is typed only when the innermost shell with the
    /// integration has its terminal's foreground; otherwise the line would
    /// be read by whatever program holds it (one still running after a
    /// sourced script or the shell itself reported an end). Returns the
    /// program in front (its pid and command line) when that is not so.
    fn not_at_prompt(&self) -> Option<(i32, String)> {
        let top = self.shared.lock().levels().top().map(|level| level.pid())?;
        let front = self.terminal.pty().foreground()?;
        // A nested shell on a terminal of its own (`script`, `pty.spawn`):
        // the foreground of its own terminal is the one that matters. The
        // session's own shell is on this terminal (nothing to read).
        let own = (top != self.pid).then(|| proc_shell::terminal_foreground(top)).flatten();
        let front = match own {
            Some((terminal, own_front)) if Some(terminal) != self.terminal_device() => own_front,
            _ => front,
        };
        (front != top).then(|| named_program(front))
    }

    /// Whether the shell is at its prompt, to type a line there: first the
    /// terminal's foreground ([`Shell::not_at_prompt`]). That alone is not
    /// enough: a program the shell still waits for can hand the foreground
    /// to the shell's group and take it back once a line was typed. At its
    /// prompt the shell itself is blocked reading its terminal, so that is
    /// checked too, for a moment (it may still be on its way there after
    /// the end of the previous command).
    /// Returns how to type there ([`Typing`]: as into readline, or into a
    /// shell that reads lines itself), or the program the shell waits for
    /// (a child of it, else the shell) when the shell does not come to
    /// read. Where the shell's blocked call cannot be read
    /// (`/proc/PID/syscall` needs ptrace access), the foreground check
    /// stands alone, and the line is typed as into readline.
    async fn shell_reading(&self) -> Result<Typing, (i32, String)> {
        let typing = |reads| match reads {
            ShellReads::Lines => Typing::lines(self.terminal.kill_character()),
            ShellReads::Keys | ShellReads::Not => Typing::EDITOR,
        };
        if let Some(front) = self.not_at_prompt() {
            return Err(front);
        }
        let Some(shell) = self.shared.lock().levels().top().map(|level| level.pid()) else {
            return Ok(Typing::EDITOR);
        };
        // Its terminal as it names it (a sandbox's mounts may name it
        // otherwise than this process does).
        let Ok(tty) = std::fs::read_link(format!("/proc/{shell}/fd/0")) else {
            return Ok(Typing::EDITOR);
        };
        match input_wait::shell_reads_terminal(shell, &tty) {
            None => return Ok(Typing::EDITOR),
            Some(ShellReads::Not) => {}
            Some(reads) => return Ok(typing(reads)),
        }
        let start = Instant::now();
        let deadline = start + PROMPT_WAIT;
        // Usually the shell is there already, or within a fraction of a
        // millisecond of its prompt's last work: for the first millisecond
        // the task only yields between looks, since the runtime's timer
        // sleeps a whole millisecond at least; then it sleeps.
        let mut pause = Duration::from_millis(1);
        loop {
            if let Some(reads @ (ShellReads::Lines | ShellReads::Keys)) =
                input_wait::shell_reads_terminal(shell, &tty)
            {
                return Ok(typing(reads));
            }
            let now = Instant::now();
            if now >= deadline {
                let waited_for = proc_shell::children(shell).into_iter().next().unwrap_or(shell);
                return Err((waited_for, proc_shell::command_line(waited_for)));
            }
            if now - start < Duration::from_millis(1) {
                tokio::task::yield_now().await;
            } else {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(50));
            }
        }
    }

    /// The terminal device number of the session's own shell.
    fn terminal_device(&self) -> Option<u64> {
        proc_shell::terminal_foreground(self.pid).map(|(terminal, _)| terminal)
    }

    /// Sends text (with Enter) or keys to the running program, the cursor
    /// keys as its cursor-key mode asks (as the renderer last saw it: a
    /// program sets the mode before it reads the keys). Never blocks the
    /// session: what the terminal does not accept within a brief wait is
    /// dropped and reported. The keys that make the terminal signal the
    /// program (C-c, C-\, C-z) first discard the input nobody has read, as
    /// a terminal does, so they are never stuck behind it.
    ///
    /// Bounded: at most the input's bytes, [`MODE_SETTLE`] of waiting for
    /// the mode, and [`INPUT_STALL`] of waiting per stall of the program.
    pub(super) async fn send_input(&mut self, input: Input) -> Result<InputReport, SessionError> {
        if let Some(since) = self.terminal.held_since() {
            return Ok(InputReport::PersonHolds { since });
        }
        if input.has_key("C-c") {
            self.note_interrupt();
        }
        if ["C-c", "C-\\", "C-z"].into_iter().any(|name| input.has_key(name))
            && let Err(err) = pty::discard_input(&self.tty)
        {
            tracing::debug!("could not discard unread terminal input: {err}");
        }
        if input.follows_cursor_mode() {
            self.take_pending_output().await;
        }
        let mode = self.shared.lock().screen().cursor_keys();
        let (bytes, key) = (input.bytes(mode), input.describe());
        // Write only while the command that was sent the input runs, with
        // the same job in front: input must never reach the shell's prompt.
        let master = self.terminal.pty().handle().map_err(write_failed(Written::Input))?;
        let front = pty::foreground_group(&master);
        let seq = self.shared.lock().command().map(Command::seq);
        let shared = Arc::clone(&self.shared);
        let still_running = move || {
            let unfinished =
                shared.lock().command().is_some_and(|c| Some(c.seq()) == seq && !c.is_finished());
            unfinished && pty::foreground_group(&master) == front
        };
        let sent = self
            .terminal
            .write_input(&bytes, INPUT_STALL, still_running)
            .await
            .map_err(write_failed(Written::Input))?;
        if let Some(command) = self.shared.lock().command_mut() {
            command.input_sent(Instant::now());
        }
        Ok(InputReport::Sent { key, delivered: sent, total: bytes.len() })
    }

    /// Waits, at most [`MODE_SETTLE`], until the reader has taken what the
    /// terminal holds (it reads continuously; this only closes the gap of a
    /// program that set its mode an instant ago).
    async fn take_pending_output(&self) {
        let Ok(master) = self.terminal.pty().handle() else { return };
        let deadline = Instant::now() + MODE_SETTLE;
        while pty::has_unread_output(&master) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// Remembers the foreground group about to get ^C.
    fn note_interrupt(&self) {
        let Ok(master) = self.terminal.pty().handle() else { return };
        let Some(group) = pty::foreground_group(&master).filter(|&g| g != self.pid) else { return };
        let mut state = self.shared.lock();
        // A nested shell running a builtin is not the command's to stop.
        if state.levels().is_integrated_shell(group) {
            return;
        }
        if let Some(command) = state.command_mut() {
            command.note_interrupted(group);
        }
    }

    /// After an interrupted command ends, stops what is left of it: children
    /// that ignore SIGINT (as `&` jobs of a script do) and groups it left
    /// behind. Background jobs of the shell are not touched.
    pub(super) async fn reap_interrupted(&self, grace: Duration) {
        let (groups, since, seq) = {
            let state = self.shared.lock();
            match state.command() {
                Some(command) if !command.interrupted().is_empty() => {
                    (command.interrupted().to_vec(), command.started_ticks(), command.seq())
                }
                _ => return,
            }
        };
        let mut targets = process::command_targets(self.pid, seq, since);
        targets.groups.extend(groups);
        process::terminate(&targets, grace).await;
    }

    /// Stops the shell, every process in its session and every process
    /// carrying its scope marker (what left the session with `setsid`):
    /// SIGHUP (which bash passes on to its jobs) and SIGTERM, then SIGKILL
    /// after `grace`.
    /// A command still running ends with the shell (reset, close), through
    /// the same finish as every other end: its log reads as ended.
    pub(super) async fn stop(self, config: &SessionConfig, how: &str) {
        process::terminate_session(self.pid, Some(&self.scope), config.grace).await;
        // What the reader thread already has is the command's last text.
        self.shared.lock().finish_with_shell(Instant::now());
        self.shared.notify();
        if let Some(guard) = &config.guard {
            guard.forget_session(self.pid);
        }
        self.tasks.abort();
        self.terminal.close(how);
        drop(self.terminal);
        let _ = std::fs::remove_dir_all(&self.files.dir);
    }
}

/// The process of foreground group `group` to name in a reply, with its
/// command line: the group's leader while it lives, else another living
/// member; an empty command line once every member has ended (zombies
/// included: an exited program whose parent has not reaped it yet no
/// longer holds anything but its place in the group).
fn named_program(group: i32) -> (i32, String) {
    let living = process::live_group_members(group);
    let named = if living.contains(&group) { Some(group) } else { living.first().copied() };
    named.map_or((group, String::new()), |pid| (pid, proc_shell::command_line(pid)))
}
