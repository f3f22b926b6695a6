//! The single-shell driver: `Shell`, one bash process in its PTY, with its
//! private files and the three tasks that live as long as it does (the
//! waiter that notices its exit, the supervisor, the integration watcher).
//! It spawns the shell and waits for its first prompt (the start-up
//! handshake), writes a command to the command file and types the line that
//! runs it, sends text and keys to the running program, gives a command that
//! is ending a moment to show it, stops what an interrupt left behind, and
//! stops the shell with everything it started.
//!
//! It does not decide what a call does (`mod.rs`), wait for a command or
//! build replies (`wait.rs`), or stop a command past its limit
//! (`supervise.rs`). It is driven by the one call that holds the session's
//! `tokio` mutex (hence `&mut Shell`), and takes the shared state's std
//! mutex only for short sections.

use std::collections::VecDeque;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::bash_script::{self as shell, ShellFiles};
use crate::input_wait;
use crate::integration;
use crate::keys::Input;
use crate::output;
use crate::private_fs;
use crate::process;
use crate::pty::{self, Pty};
use crate::screen::Screen;

use super::channel::Channel;
use super::incomplete::Incomplete;
use super::integration::{Integ, Watcher, watch_integration};
use super::state::{Running, RunningState, Shared, State, describe_exit, wait_for};
use super::supervise::{Supervisor, supervise};
use super::wait::spill_name;
use super::{Note, Reply, Request, SessionConfig, SessionError};

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

/// One bash process and its PTY.
pub(super) struct Shell {
    pub(super) shared: Arc<Shared>,
    pty: Pty,
    /// The PTY slave's path, to discard unread input before ^C.
    tty: PathBuf,
    pub(super) pid: i32,
    /// The marker every process the shell starts inherits, so that `reset`
    /// and the end of the session reach what left the session.
    scope: process::Scope,
    pub(super) files: ShellFiles,
    next_seq: u64,
    /// The directory and `PATH` the prompt reported last.
    pub(super) cwd: PathBuf,
    pub(super) python: Option<PathBuf>,
    waiter: tokio::task::JoinHandle<()>,
    supervisor: tokio::task::JoinHandle<()>,
    /// Watches for a shell that lost the integration (`integration.rs`).
    watcher: tokio::task::JoinHandle<()>,
    /// An incomplete command the shell would be waiting to complete.
    pub(super) incomplete: Option<Incomplete>,
}

impl Shell {
    pub(super) async fn spawn(config: &SessionConfig, cwd: &Path) -> Result<Shell, SessionError> {
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
        let rc = shell::rc_script(&files, config.user_rc.as_deref());
        private_fs::write_new_file(&files.rc_file(), rc.as_bytes())
            .map_err(|err| fail("start-up file", err))?;
        // Created private here; the shell only rewrites it.
        private_fs::write_new_file(&files.state_file(), b"")
            .map_err(|err| fail("state file", err))?;
        let (channel, shell_end) =
            Channel::open().map_err(|err| fail("completion channel", err))?;

        let opened = pty::open(config.rows, config.cols).map_err(|err| fail("PTY", err))?;
        let scope = process::Scope::new("shell");
        let mut command =
            process::pty_command(&config.shell, &opened.slave, &scope, Some(&shell_end))
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
            .envs(config.env.iter().map(|(k, v)| (k, v)))
            .env(shell::NONCE_VAR, &nonce)
            .env(shell::CHANNEL_VAR, shell_end.as_raw_fd().to_string());
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
        let pid = child.id().map_or(-1, |pid| pid as i32);
        // The child has run `exec` by now (spawn returns after it): this is
        // the program image whose records are believed.
        let first_level = integration::fingerprint(pid);
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
                integ: Integ::new(pid, first_level),
                channel,
                records: VecDeque::new(),
            }),
            changed: Notify::new(),
        });
        let reader_shared = Arc::clone(&shared);
        let channel_handle =
            shared.lock().channel.handle().map_err(|err| fail("completion channel", err))?;
        let pty = Pty::start(opened.master, &config.name, Some(channel_handle), move |event| {
            let answers = {
                let mut state = reader_shared.lock();
                match event {
                    pty::Event::Output(bytes) => state.ingest(bytes),
                    pty::Event::Ready => state.receive_records(),
                    pty::Event::HangUp => state.reader_done = true,
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
            bash: integration::running_program(pid),
            channel_link,
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
        // Read once; nothing else should find it.
        let _ = std::fs::remove_file(shell.files.rc_file());
        if let Err(err) = ready {
            shell.stop(config).await;
            return Err(err);
        }
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

    pub(super) fn running_state(&self) -> RunningState {
        match &self.shared.lock().running {
            None => RunningState::None,
            Some(running) if running.is_done() => RunningState::Finished,
            Some(_) => RunningState::Unfinished,
        }
    }

    /// A call looks at the running command: unwatched time starts again,
    /// and the limit becomes the larger of the category's and the call's
    /// `timeout`.
    pub(super) fn touch(&self, timeout: Option<Duration>) {
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
    pub(super) async fn settle(&self, config: &SessionConfig) {
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

    pub(super) fn has_exited(&self) -> bool {
        self.shared.lock().exited.is_some()
    }

    pub(super) fn exit_description(&self) -> String {
        self.shared.lock().exited.map_or_else(|| "it stopped".to_owned(), describe_exit)
    }

    /// Where a replacement shell should start: the last directory if it
    /// still exists, else the original one.
    pub(super) fn restart_dir(&mut self, config: &SessionConfig) -> PathBuf {
        self.refresh_state();
        if self.cwd.is_dir() { self.cwd.clone() } else { config.cwd.clone() }
    }

    /// Reads the directory and `PATH` the prompt last recorded.
    pub(super) fn refresh_state(&mut self) {
        if let Some(state) = shell::read_state(&self.files) {
            self.python = shell::python_interpreter(&state.path);
            self.cwd = state.cwd;
        }
    }

    /// Starts `command` and waits for it as a call with `timeout` would.
    pub(super) async fn run(
        &mut self,
        config: &SessionConfig,
        request: &Request,
        mut notes: Vec<Note>,
        cancel: CancellationToken,
    ) -> Result<Reply, SessionError> {
        let command = request.command.as_str();
        let timeout = request.timeout;
        let exec_limit = request.exec_limit;
        let blocked = match self.not_at_prompt() {
            Some(front) => Some(front),
            None => self.shell_not_reading().await,
        };
        if let Some((pid, command_line)) = blocked {
            notes.push(Note::NotExecuted { command: command.to_owned() });
            notes.push(Note::ShellNotAtPrompt { pid, command_line });
            let mut reply = self.idle_reply(command, notes);
            reply.status = super::Status::Running(super::WaitEnded::NotWaited);
            reply.exit_code = None;
            return Ok(reply);
        }
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
                shell_reading: false,
                damaged: false,
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

    /// A command is typed only when the innermost shell with the
    /// integration has its terminal's foreground; otherwise the line would
    /// be read by whatever program holds it (one still running after a
    /// sourced script or the shell itself reported an end). Returns the
    /// program in front (its pid and command line) when that is not so.
    fn not_at_prompt(&self) -> Option<(i32, String)> {
        let top = self.shared.lock().integ.top().map(|level| level.pid)?;
        let master = self.pty.handle().ok()?;
        let front = pty::foreground_group(&master)?;
        // A nested shell on a terminal of its own (`script`, `pty.spawn`):
        // the foreground of its own terminal is the one that matters.
        let own = integration::terminal_foreground(top);
        let front = match own {
            Some((terminal, own_front)) if Some(terminal) != self.terminal() => own_front,
            _ => front,
        };
        (front != top).then(|| (front, integration::command_line(front)))
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
        let shell = self.shared.lock().integ.top().map(|level| level.pid)?;
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
                let waited_for = integration::children(shell).into_iter().next().unwrap_or(shell);
                return Some((waited_for, integration::command_line(waited_for)));
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
    fn terminal(&self) -> Option<u64> {
        integration::terminal_foreground(self.pid).map(|(terminal, _)| terminal)
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
    pub(super) async fn send_input(&mut self, input: Input) -> Result<Vec<Note>, SessionError> {
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
    pub(super) async fn reap_interrupted(&self, grace: Duration) {
        let (groups, since, seq) = {
            let state = self.shared.lock();
            match &state.running {
                Some(running) if !running.interrupted.is_empty() => {
                    (running.interrupted.clone(), running.started_ticks, running.seq)
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
    pub(super) async fn stop(self, config: &SessionConfig) {
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

fn random_hex(n_bytes: usize) -> std::io::Result<String> {
    let mut bytes = vec![0u8; n_bytes];
    getrandom::fill(&mut bytes).map_err(|err| std::io::Error::other(err.to_string()))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}
