//! The integration watcher: one task per shell that finds a bash sitting at
//! its prompt without the integration (after `exec bash`, in a nested
//! `bash`) while a command runs quietly, and reinstalls it: the script goes
//! as a frame on the command socket that shell inherited, and the typed line
//! reads and `eval`s it; its first prompt is the handshake (`levels.rs`).
//! Other shells and remote sessions are only named in a note. It also types
//! the fallback line into a shell of ours that prompted before its command
//! ended.
//!
//! It does not know the shell driver or build replies. Invariant: only a
//! bash the running command started, holding the session's own descriptors,
//! is given the integration (nothing goes through a file); at most 16 failed
//! shells are remembered.

use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::bash_script::{self, ShellFiles};
use crate::input_wait;
use crate::proc_shell::{self, Prompting};
use crate::terminal::pty::{self, PtyAccess};

use super::call::Event;
use super::levels::{Level, REINSTALL_SEQ_BASE, Reinstall, ReinstallStart, ShellId};
use super::shared::Shared;

/// What the integration watcher of one shell needs.
pub(super) struct Watcher {
    shared: Arc<Shared>,
    /// A handle on the PTY master: the foreground group, and typing the
    /// reinstall line.
    master: std::os::fd::OwnedFd,
    /// The PTY slave's path, to recognise reads of the terminal.
    tty: PathBuf,
    files: ShellFiles,
    nonce: String,
    /// The program the session's shell runs (device and inode): only a
    /// shell running it is given the integration.
    bash: Option<proc_shell::ProgramId>,
    /// How the session's own descriptors are recognised in another shell.
    marks: ShellMarks,
    /// The server's end of the shell's command socket (non-blocking): the
    /// reinstall script goes there, for the shell holding the other end at
    /// its descriptor 60 to read.
    commands: std::os::unix::net::UnixStream,
}

/// How the descriptors the session's shell was given at its start are
/// recognised in a shell that inherited them.
pub(super) struct ShellMarks {
    /// What `/proc/PID/fd/62` of a shell holding the completion channel
    /// links to (`socket:[inode]`): a shell without it could never report
    /// a command's end, so it is not given the integration.
    pub(super) channel_link: Option<PathBuf>,
    /// The device and inode of the session's sealed keys file: a shell
    /// holding that very file at its descriptor 61 binds its keys from it,
    /// any other from the integration's own list.
    pub(super) keys_id: Option<(u64, u64)>,
    /// What `/proc/PID/fd/60` of a shell holding its end of the command
    /// socket links to (`socket:[inode]`): a shell without it could never
    /// load a command, so it is not given the integration.
    pub(super) command_link: Option<PathBuf>,
}

impl Watcher {
    /// The watcher of a shell running program `bash`, on the terminal
    /// `pty`, with its private `files`, marker `nonce`, descriptors
    /// recognised by `marks`, and the server end of its command socket,
    /// `commands`.
    pub(super) fn new(
        shared: Arc<Shared>,
        pty: PtyAccess,
        files: ShellFiles,
        nonce: String,
        bash: Option<proc_shell::ProgramId>,
        marks: ShellMarks,
        commands: std::os::fd::OwnedFd,
    ) -> Watcher {
        let commands = std::os::unix::net::UnixStream::from(commands);
        let PtyAccess { master, tty } = pty;
        Watcher { shared, master, tty, files, nonce, bash, marks, commands }
    }
}

/// What the watcher remembers from one look to the next.
#[derive(Default)]
struct Memory {
    /// Reinstalls attempted: each has a handshake number of its own.
    attempts: u64,
    /// Shells whose reinstall failed, not tried again; at most 16.
    failed: Vec<ShellId>,
    /// The command a note was made for (one note per command).
    noted: Option<u64>,
}

impl Memory {
    /// Notes `event` for the next reply, once per command `seq`.
    fn note_once(&mut self, shared: &Shared, seq: u64, event: Event) {
        if self.noted != Some(seq) {
            self.noted = Some(seq);
            shared.lock().levels_mut().note(event);
            shared.notify();
        }
    }
}

/// The running command, as the watcher looks at it.
struct Running {
    /// Its sequence number.
    seq: u64,
    /// When it began, in clock ticks since boot.
    since: u64,
    /// Its text.
    typed: String,
}

/// What the watcher does next.
enum Next {
    /// Look for a shell at its prompt now, while `running` runs quietly,
    /// with `top` the innermost shell with the integration.
    Look {
        /// The command.
        running: Running,
        /// The innermost shell with the integration.
        top: Option<Level>,
    },
    /// Wait for a change, or until this instant.
    Wait(Option<Instant>),
}

/// How long a running command must have been quiet before the watcher
/// looks for a shell at its prompt, and how often it looks again. There is
/// no kernel event for "a shell is waiting at its prompt", so it is sampled
/// while a command runs quietly; an idle session is never looked at.
const WATCH_QUIET: Duration = Duration::from_millis(150);
const WATCH_SAMPLE: Duration = Duration::from_millis(250);

/// Watches a running command for a shell that sits at its prompt without
/// the integration (after `exec bash` or in a nested `bash`) and reinstalls
/// it: it writes a fresh script as a frame on the command socket and types
/// the line that reads and runs it, whose first prompt is the handshake
/// (`Levels::on_marker`). Other shells and remote
/// sessions are named in a note. Runs for the life of the shell.
pub(super) async fn watch_integration(watcher: Watcher) {
    let shared = &watcher.shared;
    let mut memory = Memory::default();
    loop {
        let notified = shared.changed();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let now = Instant::now();
        let fallback = {
            let mut state = shared.lock();
            state.fallback_due().zip(state.levels().top().map(Level::pid))
        };
        if let Some((seq, shell)) = fallback {
            type_fallback(&watcher, seq, shell);
        }
        let wake = match next(shared, &mut memory, now) {
            Next::Wait(wake) => wake,
            Next::Look { running, top } => {
                watcher.look_for_prompt(&mut memory, &running, top.as_ref());
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

/// What to do at `now`: a reinstall past its deadline is given up (its
/// shell remembered, so it is not tried again); during a reinstall, wait
/// for its deadline; a command of ours that has run quietly for
/// [`WATCH_QUIET`] is looked at; else wait for a change.
fn next(shared: &Shared, memory: &mut Memory, now: Instant) -> Next {
    let mut state = shared.lock();
    if let Some(shell) = state.levels_mut().give_up_reinstall(now) {
        if memory.failed.len() >= 16 {
            memory.failed.remove(0);
        }
        memory.failed.push(shell);
    }
    if let Some(reinstall) = state.levels().reinstall() {
        return Next::Wait(Some(reinstall.deadline()));
    }
    match state.command() {
        Some(command) if state.is_ready() && command.has_started() && !command.is_finished() => {
            let quiet_at = command.last_output_at().max(command.started_at()) + WATCH_QUIET;
            if now < quiet_at {
                return Next::Wait(Some(quiet_at));
            }
            let running = Running {
                seq: command.seq(),
                since: command.started_ticks(),
                typed: command.text().to_owned(),
            };
            Next::Look { running, top: state.levels().top().cloned() }
        }
        _ => Next::Wait(None),
    }
}

/// Types the fallback line of command `seq` once `shell`, the innermost
/// shell with the integration, which printed its prompt while the command
/// had not ended, is the terminal's foreground group and blocked reading
/// it: at its prompt. Until then, the next change (output, or the
/// supervisor's look at the terminal) or look wakes the watcher again. The
/// line is typed once per command.
fn type_fallback(watcher: &Watcher, seq: u64, shell: i32) {
    if pty::foreground_group(&watcher.master) != Some(shell)
        || !input_wait::process_reads_terminal(shell, &watcher.tty)
    {
        return;
    }
    {
        let mut state = watcher.shared.lock();
        if state.fallback_due() != Some(seq) {
            return;
        }
        state.fallback_typed(seq);
    }
    tracing::info!(seq, "the shell prompted before its command ended; typing the fallback line");
    let _ = pty::write_key(&watcher.master, bash_script::fallback_line(seq).as_bytes());
}

impl Watcher {
    /// One look at the terminal's foreground group while `running` runs
    /// quietly; `top` is the innermost shell with the integration. A bash
    /// is given the integration only when it is the foreground job of that
    /// command (`proc_shell::typed_shell`); any other is named.
    fn look_for_prompt(&self, memory: &mut Memory, running: &Running, top: Option<&Level>) {
        let Some(group) = pty::foreground_group(&self.master) else { return };
        if let Some(top) = top
            && top.pid() == group
            && proc_shell::fingerprint(group) == Some(top.fingerprint())
        {
            // Our own shell runs a builtin that reads (`read`): not a prompt.
            return;
        }
        if !input_wait::process_reads_terminal(group, &self.tty) {
            return;
        }
        let found = proc_shell::inspect(group, self.bash)
            .or_else(|| proc_shell::wrapped_shell(group, self.bash));
        let event = match found {
            Some(Prompting::Bash { pid, fingerprint }) => {
                let shell = ShellId { pid, fingerprint };
                if !memory.failed.contains(&shell) {
                    self.offer_integration(memory, running, top, shell);
                }
                return;
            }
            Some(Prompting::OtherShell(name)) => Event::OtherShell(name),
            Some(Prompting::NamedBash(command_line)) => Event::NamedBash(command_line),
            Some(Prompting::Remote(name)) => Event::RemoteShell(name),
            None => return,
        };
        memory.note_once(&self.shared, running.seq, event);
    }

    /// Gives `shell`, a bash at its prompt, the integration, when the
    /// running command started it and it holds the session's descriptors;
    /// otherwise notes why not, once per command.
    fn offer_integration(
        &self,
        memory: &mut Memory,
        running: &Running,
        top: Option<&Level>,
        shell: ShellId,
    ) {
        let Some(outer) = top.map(Level::pid) else { return };
        if let Err(starter) =
            proc_shell::typed_shell(shell.pid, outer, running.since, &running.typed)
        {
            if memory.noted != Some(running.seq) {
                tracing::info!(
                    pid = shell.pid,
                    starter,
                    "a bash the command did not ask for: not adopted"
                );
            }
            memory.note_once(&self.shared, running.seq, Event::UnaskedShell(starter));
            return;
        }
        let state = self.shared.lock();
        if state.levels().carries(shell.pid, shell.fingerprint) {
            return;
        }
        let replaced = state.levels().is_integrated_shell(shell.pid);
        drop(state);
        if !self.holds_descriptors(shell.pid) {
            // A wrapper closed the descriptors it inherited (`sudo`,
            // pexpect): this shell could not report any end, or load any
            // command.
            memory.note_once(&self.shared, running.seq, Event::ReinstallFailed);
            return;
        }
        memory.attempts += 1;
        let handshake = REINSTALL_SEQ_BASE + memory.attempts;
        let start = ReinstallStart { handshake, command_seq: running.seq, shell, replaced };
        self.reinstall(start);
    }

    /// Whether shell `pid` holds the session's completion channel and its
    /// end of the command socket.
    fn holds_descriptors(&self, pid: i32) -> bool {
        let ShellMarks { channel_link, command_link, .. } = &self.marks;
        let fd = format!("/proc/{pid}/fd/{}", super::channel::SHELL_FD);
        let command_fd = format!("/proc/{pid}/fd/{}", bash_script::COMMAND_FD);
        channel_link.is_some()
            && std::fs::read_link(fd).ok() == *channel_link
            && command_link.is_some()
            && std::fs::read_link(command_fd).ok() == *command_link
    }

    /// Writes a fresh integration script as a frame on the command socket,
    /// records the reinstall as begun, and types the line that reads and
    /// runs it. The shell holding the other end reads it: the command that
    /// started it waits, so its outer shell reads nothing. A frame the
    /// socket does not take whole now is never completed: no line is typed,
    /// what was written loads nothing (the next load flushes it), and the
    /// attempt is given up at its deadline, as one whose shell never
    /// answers.
    fn reinstall(&self, start: ReinstallStart) {
        let pid = start.shell.pid;
        let keys = format!("/proc/{pid}/fd/{}", bash_script::KEYS_FD);
        let keys = self.marks.keys_id.is_some()
            && std::fs::metadata(keys).ok().map(|meta| (meta.dev(), meta.ino()))
                == self.marks.keys_id;
        let text = bash_script::reinstall_script(&self.files, start.handshake, keys);
        let frame = bash_script::command_frame(start.handshake, &text);
        let written = (&self.commands).write_all(&frame);
        if let Err(err) = &written {
            tracing::debug!("could not write the reinstall script to its socket: {err}");
        }
        tracing::info!(pid, replaced = start.replaced, "reinstalling the shell integration");
        {
            let mut state = self.shared.lock();
            // Keep what the command printed before the new prompt; the
            // prompt line and the echo of our line are dropped on the
            // handshake.
            let now = Instant::now();
            state.commit_lines(now);
            state.levels_mut().begin_reinstall(Reinstall::new(start, now));
        }
        if written.is_ok() {
            let line = bash_script::reinstall_line(start.handshake, text.len(), &self.nonce);
            let _ = pty::write_key(&self.master, line.as_bytes());
        }
    }
}
