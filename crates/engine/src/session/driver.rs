//! The single-shell driver: `Shell`, one bash process in its PTY, with its
//! private files and the three tasks that live as long as it does (the
//! waiter that notices its exit, the supervisor, the integration watcher).
//! It spawns the shell and waits for its first prompt (the start-up
//! handshake), writes a command to the command socket
//! (`driver/command_socket.rs`) and types the line that runs it through the
//! shell's terminal (`terminal::Terminal`, refused while a person holds
//! the session), sends text and keys to the running program, gives a
//! command that is ending a moment to show it, stops what an interrupt left
//! behind, and stops the shell with everything it started. For a background
//! job it reads the shell's exported environment and starts a job's shell
//! with it (`driver/place.rs`).
//!
//! What the shell trusts never passes through a path a command can write:
//! the shell gets, at its start, the completion channel (descriptor 62),
//! a sealed memory file of key bindings (61) and its end of the command
//! socket (60); the state, the environment and the commands travel over
//! those.
//!
//! It does not decide what a call does (`mod.rs`), decide how long a call
//! waits or word a reply's parts (`wait.rs`, `timing.rs`), or stop a command
//! past its limit (`supervise.rs`). Nothing below it in `session/` knows it.
//! It is driven by the one call that holds the session's `tokio` mutex
//! (hence `&mut Shell`), and takes the shared state's std mutex only for
//! short sections.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::bash_script::{self, ShellFiles};
use crate::input_wait;
use crate::keys::Input;
use crate::limits::{Counts, OwnerLimits};
use crate::output;
use crate::output::OutputStore;
use crate::private_fs;
use crate::proc_shell;
use crate::process;
use crate::sandbox;
use crate::screen::Screen;
use crate::terminal::{Gate, Rendered, Setup, Sink, Terminal, pty};

use super::call::{
    Event, InputReport, NotRun, Outcome, ProgressHook, Reply, Request, SessionConfig, SessionError,
    ShellExit,
};
use super::channel::Channel;
use super::command::{Command, CommandOutput};
use super::incomplete::Incomplete;
use super::levels::Levels;
use super::shared::{CommandState, Shared, State, describe_exit, wait_for};
use super::supervise::{Supervisor, supervise};
use super::wait::{self, ShellView, Waited};
use super::watcher::{Watcher, watch_integration};
use command_socket::CommandSocket;
use place::{ENV_FD_MIN, NOT_INHERITED, on_server_path, restored_entries};

mod command_socket;
mod place;

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
    next_seq: u64,
    /// The directory and `PATH` the prompt reported last.
    view: ShellView,
    waiter: tokio::task::JoinHandle<()>,
    supervisor: tokio::task::JoinHandle<()>,
    /// Watches for a shell that lost the integration (`watcher.rs`).
    watcher: tokio::task::JoinHandle<()>,
    /// An incomplete command the shell would be waiting to complete.
    incomplete: Option<Incomplete>,
}

impl Shell {
    pub(super) async fn spawn(
        config: &SessionConfig,
        cwd: &Path,
        gate: &Arc<Gate>,
    ) -> Result<Shell, SessionError> {
        let fail = |what: &str, err: std::io::Error| {
            SessionError::Shell(format!("could not start the shell ({what}): {err}"))
        };
        let nonce = private_fs::random_hex(16).map_err(|err| fail("random nonce", err))?;
        // The directory's name is random, but not from the nonce.
        let tag = private_fs::random_hex(4).map_err(|err| fail("random name", err))?;
        let files = ShellFiles { dir: config.work_dir.join(format!("shell-{tag}")) };
        private_fs::ensure_private_dir(&config.work_dir)
            .and_then(|()| private_fs::create_private_dir(&files.dir))
            .map_err(|err| fail("private directory", err))?;
        let rc = bash_script::rc_script(&files, config.user_rc.as_deref());
        private_fs::write_new_file(&files.rc_file(), rc.as_bytes())
            .map_err(|err| fail("start-up file", err))?;
        let (channel, shell_end) =
            Channel::open().map_err(|err| fail("completion channel", err))?;
        // The keys the prompt binds again, from a file no command can write.
        let keys = bash_script::keys_file().map_err(|err| fail("keys file", err))?;
        let (commands, command_end, command_link) =
            CommandSocket::open().map_err(|err| fail("command socket", err))?;
        // A background job's shell takes its calling shell's values back from
        // a sealed file it inherits, read once its start-up files ran.
        let env_file = match &config.start_env {
            Some(start_env) => Some(
                private_fs::sealed_memfd("shellkeep-env", &restored_entries(start_env))
                    .and_then(|fd| process::dup_at_least(&fd, ENV_FD_MIN))
                    .map_err(|err| fail("environment file", err))?,
            ),
            None => None,
        };
        let mut inherited = vec![&shell_end, &keys, &command_end];
        inherited.extend(env_file.as_ref());

        let opened = pty::open(config.rows, config.cols).map_err(|err| fail("PTY", err))?;
        let mut scope = process::Scope::limited("shell", &config.resources);
        // A sandboxed shell writes its own directory (its integration's
        // files) and a temporary directory inside it, exported as TMPDIR.
        let sandbox_tmp = files.dir.join("tmp");
        if config.sandbox.is_confined() {
            private_fs::create_private_dir(&sandbox_tmp)
                .map_err(|err| fail("temporary directory", err))?;
            let protect =
                sandbox::protected_pids(config.guard.as_deref().map(crate::guard::Guard::pid));
            let confinement = sandbox::Confinement::build(&config.sandbox, &[&files.dir], &protect)
                .map_err(|err| fail("sandbox", err))?;
            scope = scope.with_confinement(confinement.rules());
        }
        // With an environment of its own, a bare shell name is still looked
        // for where the server looks, not in that environment's `PATH`.
        let program = match &config.start_env {
            Some(_) => on_server_path(&config.shell).unwrap_or_else(|| config.shell.clone()),
            None => config.shell.clone(),
        };
        let mut command = process::pty_command(&program, &opened.slave, &scope, &inherited)
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
        if let Some(start_env) = &config.start_env {
            // A background job's shell gets the exported environment of the
            // shell it was started from, as a child of that shell would
            // (what the user unset there stays unset), with its own scope
            // marker and a fresh shell level.
            command
                .env_clear()
                .envs(
                    start_env
                        .0
                        .iter()
                        .filter(|(name, _)| !NOT_INHERITED.iter().any(|n| name == n))
                        .map(|(name, value)| (name, value)),
                )
                .env(process::SCOPE_VAR, scope.value())
                .env("TERM", "xterm-256color")
                .env_remove("PROMPT_COMMAND")
                .env_remove("BASH_ENV")
                .env_remove("ENV");
        }
        if config.sandbox.is_confined() {
            command.env("TMPDIR", &sandbox_tmp);
        }
        command
            .env(bash_script::NONCE_VAR, &nonce)
            .env(bash_script::CHANNEL_VAR, shell_end.as_raw_fd().to_string())
            .env(bash_script::KEYS_VAR, keys.as_raw_fd().to_string())
            .env(bash_script::COMMAND_VAR, command_end.as_raw_fd().to_string());
        let mut child = process::spawn(&mut command).map_err(|err| {
            fail(&format!("{} in {}", config.shell.display(), cwd.display()), err)
        })?;
        // Only the child may hold the slave side, so that the reader sees
        // the terminal hang up once the shell and its jobs are gone.
        drop(opened.slave);
        let channel_link = nix::sys::stat::fstat(&shell_end)
            .ok()
            .map(|stat| PathBuf::from(format!("socket:[{}]", stat.st_ino)));
        drop(shell_end);
        let keys_id = nix::sys::stat::fstat(&keys).ok().map(|stat| (stat.st_dev, stat.st_ino));
        drop(keys);
        drop(command_end);
        let spawned = child.id().map_or(-1, |pid| pid as i32);
        // In a namespace of its own the spawned child is the keeper, and the
        // shell is the init's child (see `process::namespaced_shell`): its
        // pid is the one the records carry and every scan starts from. The
        // keeper ends as the shell ends, so waiting for it stays right.
        let pid = if scope.namespace() {
            process::namespaced_shell(spawned as u32).unwrap_or(spawned)
        } else {
            spawned
        };
        // The child has run `exec` by now (spawn returns after it): this is
        // the program image whose records are believed.
        let first_level = proc_shell::fingerprint(pid);
        if let Some(guard) = &config.guard {
            guard.watch_session(pid);
        }

        let shared = Arc::new(Shared::new(State::new(
            Screen::new(config.rows, config.cols, &nonce),
            Levels::new(pid, first_level),
            channel,
            (Arc::clone(&config.secrets), Arc::clone(gate)),
        )));
        let reader_shared = Arc::clone(&shared);
        let channel_handle =
            shared.lock().channel_handle().map_err(|err| fail("completion channel", err))?;
        let size = (config.rows, config.cols);
        let mut sinks: Vec<Box<dyn Sink>> = Vec::new();
        if let Some(recorder) = &config.record {
            match recorder.start(&config.file_label(), Arc::clone(&config.secrets), size) {
                Ok(recording) => sinks.push(Box::new(recording)),
                Err(err) => tracing::warn!("session {} is not recorded: {err}", config.name),
            }
        }
        let woken_shared = Arc::clone(&shared);
        let terminal = Terminal::start(
            opened.master,
            (&config.name, Some(channel_handle)),
            Setup { size, gate: Arc::clone(gate), sinks },
            move |event| {
                let mut state = reader_shared.lock();
                let answers = state.on_event(event);
                let shown = state.take_shown();
                Rendered { answers, shown }
            },
            move || woken_shared.notify(),
        )
        .map_err(|err| fail("reader thread", err))?;
        let terminal = Arc::new(terminal);
        let pty = terminal.pty();
        let waiter_shared = Arc::clone(&shared);
        let waiter = tokio::spawn(async move {
            let status = child.wait().await;
            if let Ok(status) = status {
                waiter_shared.lock().set_exited(status);
            }
            waiter_shared.notify();
        });

        let watcher = tokio::spawn(watch_integration(Watcher::new(
            Arc::clone(&shared),
            (pty.handle().map_err(|err| fail("PTY", err))?, opened.tty.clone()),
            (files.clone(), nonce),
            proc_shell::running_program(pid),
            (channel_link, keys_id, Some(command_link)),
            commands.handle().map_err(|err| fail("command socket", err))?,
        )));
        let supervisor = tokio::spawn(supervise(Supervisor::new(
            Arc::clone(&shared),
            (pty.handle().map_err(|err| fail("PTY", err))?, opened.tty.clone(), pty.in_hand()),
            pid,
            config.grace,
        )));
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
            next_seq: 1,
            view: ShellView::new(cwd.to_owned(), None),
            waiter,
            supervisor,
            watcher,
            incomplete: None,
        };
        let ready = shell.wait_ready(config.startup_timeout).await;
        // Read once; nothing else should find it.
        let _ = std::fs::remove_file(shell.files.rc_file());
        if let Err(err) = ready {
            shell.stop(config, "the shell did not start").await;
            return Err(err);
        }
        let mut shell = shell;
        let env_fd = env_file.as_ref().map(AsRawFd::as_raw_fd);
        drop(env_file);
        if let Some(env_fd) = env_fd
            && let Err(err) = shell.restore_env(config, env_fd).await
        {
            tracing::warn!("a background job's shell kept its start-up files' environment: {err}");
        }
        shell.refresh_state();
        Ok(shell)
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
        Err(SessionError::Shell(format!(
            "the shell did not reach its first prompt ({}). Check the shell and its start-up \
             files; the last line it printed: {:?}",
            match state.exited() {
                Some(status) => describe_exit(status),
                None => format!("still starting after {limit:?}"),
            },
            // Bounded: a start-up file may print a line of any length. It is
            // output, so it passes the one place all output passes.
            output::head_tail(&state.current_line_shown(), 2_000, "").0,
        )))
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
        events: Vec<Event>,
        cancel: CancellationToken,
    ) -> Result<Reply, SessionError> {
        let timeout = request.timeout;
        let exec_limit = request.exec_limit;
        if let Some(since) = self.terminal.held_since() {
            let mut reply = wait::idle_reply(&self.view, command, events);
            reply.outcome = Outcome::NotExecuted {
                command: command.to_owned(),
                why: NotRun::PersonHolds { since },
            };
            return Ok(reply);
        }
        let blocked = match self.not_at_prompt() {
            Some(front) => Some(front),
            None => self.shell_not_reading().await,
        };
        if let Some((pid, command_line)) = blocked {
            let mut reply = wait::idle_reply(&self.view, command, events);
            // Named as the shell's commands see it (`ps` in a sandbox's
            // namespace speaks its own pids).
            let why = NotRun::NotAtPrompt { pid: process::pid_inside(pid), command_line };
            reply.outcome = Outcome::NotExecuted { command: command.to_owned(), why };
            return Ok(reply);
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        // A command may have removed the private directory (rm -rf
        // /tmp/*): it is the session's own, made again.
        if let Err(err) = private_fs::ensure_private_dir(&self.files.dir) {
            tracing::debug!("could not make the private directory again: {err}");
        }
        let frame = bash_script::command_frame(seq, command);
        let written = self.commands.start(&frame);
        let now = Instant::now();
        // The log names its command (a read of the log shows it): masked.
        let named = config.secrets.mask(command).0;
        let log = match &config.output {
            Some(store) => store.begin(&named),
            // A session always has a store; a bare config gets one of its own.
            None => OutputStore::new(
                Arc::clone(&config.spill),
                &config.file_label(),
                config.output_limits,
            )
            .begin(&named),
        };
        let output = CommandOutput::new(config.output_cap, log, Arc::clone(&config.secrets));
        let started = Command::new(
            (seq, command.to_owned()),
            (exec_limit, timeout),
            process::boot_ticks_now(),
            output,
            now,
        );
        // Whatever background jobs printed since the last command is
        // reported now, not mixed into this command's output.
        let idle = self.shared.lock().begin(started, now);
        let idle_output = (!idle.trim().is_empty()).then_some(idle);
        // Tell the supervisor a command with a limit has started.
        self.shared.notify();
        self.terminal
            .type_line(
                command,
                bash_script::run_line(seq, command).as_bytes(),
                Duration::from_secs(5),
            )
            .await
            .map_err(|err| SessionError::Shell(format!("could not write to the shell: {err}")))?;
        let shared = Arc::clone(&self.shared);
        self.commands.finish(&frame, written, || shared.lock().exited().is_some()).await;
        let mut reply =
            self.wait_reply(config, timeout, events, cancel, request.progress.as_ref()).await?;
        reply.idle_output = idle_output;
        Ok(reply)
    }

    /// Waits for the running command as the call's timeout allows, then
    /// replies with what happened.
    pub(super) async fn wait_reply(
        &mut self,
        config: &SessionConfig,
        timeout: Option<Duration>,
        events: Vec<Event>,
        cancel: CancellationToken,
        progress: Option<&ProgressHook>,
    ) -> Result<Reply, SessionError> {
        match wait::wait(&self.shared, config, timeout, &cancel, progress).await {
            Waited::Finished => {
                self.reap_interrupted(config.grace).await;
                Ok(self.finished_reply(events))
            }
            Waited::ShellExited => {
                wait::finish_after_exit(&self.shared).await;
                Ok(self.finished_reply(events))
            }
            Waited::Cancelled => Ok(wait::cancelled_reply(&self.shared.lock(), &self.view, events)),
            waited => {
                let fallback = self.shared.lock().awaits_fallback();
                let mut reply =
                    self.partial_reply(config, |c| wait::stopped(c, &waited, fallback), events);
                if matches!(reply.outcome, Outcome::WaitingForInput { .. })
                    && self.terminal.hides_input()
                {
                    reply.events.push(Event::InputHidden);
                }
                Ok(reply)
            }
        }
    }

    /// The reply for a finished command; clears it from the session.
    pub(super) fn finished_reply(&mut self, events: Vec<Event>) -> Reply {
        let command = self.shared.lock().take_command();
        self.refresh_state();
        wait::finished_reply(command, &self.view, events)
    }

    /// The reply for a command that is still running: what it printed since
    /// the last reply, and the line it is on now.
    pub(super) fn partial_reply(
        &mut self,
        config: &SessionConfig,
        outcome: impl FnOnce(&Command) -> Outcome,
        events: Vec<Event>,
    ) -> Reply {
        wait::partial_reply(&mut self.shared.lock(), &self.view, config, outcome, events)
    }

    /// The reply about the running command to a new command that was not
    /// run because of it.
    pub(super) fn not_executed_reply(
        &mut self,
        config: &SessionConfig,
        command: &str,
        events: Vec<Event>,
    ) -> Reply {
        let outcome = |running: &Command| Outcome::NotExecuted {
            command: command.to_owned(),
            why: wait::blocking(running),
        };
        self.partial_reply(config, outcome, events)
    }

    /// A reply with no command output (reset alone, say).
    pub(super) fn idle_reply(&self, command: &str, events: Vec<Event>) -> Reply {
        wait::idle_reply(&self.view, command, events)
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
        let master = self.terminal.pty().handle().ok()?;
        let front = pty::foreground_group(&master)?;
        // A nested shell on a terminal of its own (`script`, `pty.spawn`):
        // the foreground of its own terminal is the one that matters.
        let own = proc_shell::terminal_foreground(top);
        let front = match own {
            Some((terminal, own_front)) if Some(terminal) != self.terminal_device() => own_front,
            _ => front,
        };
        (front != top).then(|| named_program(front))
    }

    /// The foreground alone is not enough: a program the shell still waits
    /// for can hand the foreground to the shell's group and take it back
    /// once a line was typed. At its prompt the shell itself is blocked
    /// reading its terminal, so that is checked too, for a moment (it may
    /// still be on its way there after the end of the previous command).
    /// Returns the program the shell waits for (a child of it, else the
    /// shell) when the shell does not come to read. Where the shell's
    /// blocked call cannot be read (`/proc/PID/syscall` needs ptrace
    /// access), the foreground check stands alone.
    async fn shell_not_reading(&self) -> Option<(i32, String)> {
        let shell = self.shared.lock().levels().top().map(|level| level.pid())?;
        let tty = std::fs::read_link(format!("/proc/{shell}/fd/0")).ok()?;
        std::fs::read_to_string(format!("/proc/{shell}/syscall")).ok()?;
        let start = Instant::now();
        let deadline = start + PROMPT_WAIT;
        // Usually the shell is there already, or within a fraction of a
        // millisecond of its prompt's last work: for the first millisecond
        // the task only yields between looks, since the runtime's timer
        // sleeps a whole millisecond at least; then it sleeps.
        let mut pause = Duration::from_millis(1);
        while !input_wait::process_reads_terminal(shell, &tty) {
            let now = Instant::now();
            if now >= deadline {
                let waited_for = proc_shell::children(shell).into_iter().next().unwrap_or(shell);
                return Some((waited_for, proc_shell::command_line(waited_for)));
            }
            if now - start < Duration::from_millis(1) {
                tokio::task::yield_now().await;
            } else {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(50));
            }
        }
        None
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
        let master = self.terminal.pty().handle().map_err(|err| {
            SessionError::Shell(format!("could not send the input to the program: {err}"))
        })?;
        let front = pty::foreground_group(&master);
        let seq = self.shared.lock().command().map(Command::seq);
        let shared = Arc::clone(&self.shared);
        let still_running = move || {
            let unfinished =
                shared.lock().command().is_some_and(|c| Some(c.seq()) == seq && !c.is_finished());
            unfinished && pty::foreground_group(&master) == front
        };
        let sent =
            self.terminal.write_input(&bytes, INPUT_STALL, still_running).await.map_err(|err| {
                SessionError::Shell(format!("could not send the input to the program: {err}"))
            })?;
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
        self.waiter.abort();
        self.supervisor.abort();
        self.watcher.abort();
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
