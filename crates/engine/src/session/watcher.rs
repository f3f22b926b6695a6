//! The integration watcher: one task per shell that finds a shell sitting
//! at its prompt without the integration (after `exec bash`, in a nested
//! `bash`) while a command runs quietly, writes the integration as a frame
//! on the command socket that shell inherited and types the line that
//! reads and `eval`s it (nothing goes through a file, which a process
//! watching the directory could swap); its first prompt is the handshake
//! that `levels.rs` and `shared.rs` handle. Other shells, programs that only call themselves
//! bash and remote sessions are only named in a note. It also types the
//! fallback line into a shell of ours that printed its prompt while its
//! command had not ended (`State::fallback_due`), once that shell is seen
//! reading the terminal: the shell itself then sends the command's end.
//!
//! It depends on the shared state, never on the shell driver. It never
//! takes the session's `tokio` mutex; it takes the shared state's std mutex
//! for short sections, never across `.await`. Bounded: at most 16 shells
//! whose reinstall failed are remembered.

use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::bash_script::{self, ShellFiles};
use crate::input_wait;
use crate::proc_shell::{self, Prompting};
use crate::terminal::pty;

use super::call::Event;
use super::levels::{Level, REINSTALL_SEQ_BASE, Reinstall};
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
    /// What `/proc/PID/fd/62` of a shell holding the completion channel
    /// links to (`socket:[inode]`): a shell without it could never report
    /// a command's end, so it is not given the integration.
    channel_link: Option<PathBuf>,
    /// The device and inode of the session's sealed keys file: a shell
    /// holding that very file at its descriptor 61 binds its keys from it,
    /// any other from the integration's own list.
    keys_id: Option<(u64, u64)>,
    /// What `/proc/PID/fd/60` of a shell holding its end of the command
    /// socket links to (`socket:[inode]`): a shell without it could never
    /// load a command, so it is not given the integration.
    command_link: Option<PathBuf>,
    /// The server's end of the shell's command socket (non-blocking): the
    /// reinstall script goes there, for the shell holding the other end at
    /// its descriptor 60 to read.
    commands: std::os::unix::net::UnixStream,
}

impl Watcher {
    /// The watcher of a shell running program `bash`, on the terminal `tty`
    /// (`master` its PTY master), with its private `files`, marker `nonce`,
    /// completion channel seen as `channel_link`, keys file `keys_id` and
    /// command socket seen as `command_link`, whose server end is
    /// `commands`.
    pub(super) fn new(
        shared: Arc<Shared>,
        (master, tty): (std::os::fd::OwnedFd, PathBuf),
        (files, nonce): (ShellFiles, String),
        bash: Option<proc_shell::ProgramId>,
        (channel_link, keys_id, command_link): (
            Option<PathBuf>,
            Option<(u64, u64)>,
            Option<PathBuf>,
        ),
        commands: std::os::fd::OwnedFd,
    ) -> Watcher {
        let commands = std::os::unix::net::UnixStream::from(commands);
        Watcher {
            shared,
            master,
            tty,
            files,
            nonce,
            bash,
            channel_link,
            keys_id,
            command_link,
            commands,
        }
    }
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
    let mut attempts: u64 = 0;
    let mut failed: Vec<(i32, u64)> = Vec::new();
    let mut noted: Option<u64> = None;
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
        let look = {
            let mut state = shared.lock();
            if let Some(shell) = state.levels_mut().give_up_reinstall(now) {
                // Remembered so the same shell is not tried again; bounded.
                if failed.len() >= 16 {
                    failed.remove(0);
                }
                failed.push(shell);
            }
            let reinstall_deadline = state.levels().reinstall().map(Reinstall::deadline);
            match (state.command(), reinstall_deadline) {
                (_, Some(deadline)) => Err(Some(deadline)),
                (Some(command), None)
                    if state.is_ready() && command.has_started() && !command.is_finished() =>
                {
                    let quiet_at = command.last_output_at().max(command.started_at()) + WATCH_QUIET;
                    let typed = (command.seq(), command.started_ticks(), command.text().to_owned());
                    Ok((typed, quiet_at, state.levels().top().cloned()))
                }
                _ => Err(None),
            }
        };
        let wake = match look {
            Err(deadline) => deadline,
            Ok((_, quiet_at, _)) if now < quiet_at => Some(quiet_at),
            Ok((command, _, top)) => {
                look_for_prompt(&watcher, command, top, &mut attempts, &failed, &mut noted);
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

/// One look at the terminal's foreground group while command `seq`, begun
/// at `since` (clock ticks since boot) with the text `typed`, runs
/// quietly; `top` is the innermost shell with the integration. A bash is
/// given the integration only when it is the foreground job of that
/// command (`proc_shell::typed_shell`); any other is named.
fn look_for_prompt(
    watcher: &Watcher,
    (seq, since, typed): (u64, u64, String),
    top: Option<Level>,
    attempts: &mut u64,
    failed: &[(i32, u64)],
    noted: &mut Option<u64>,
) {
    let Watcher {
        shared,
        master,
        tty,
        files,
        nonce,
        bash,
        channel_link,
        keys_id,
        command_link,
        commands,
    } = watcher;
    let Some(group) = pty::foreground_group(master) else { return };
    if let Some(top) = &top
        && top.pid() == group
        && proc_shell::fingerprint(group) == Some(top.fingerprint())
    {
        // Our own shell runs a builtin that reads (`read`): not a prompt.
        return;
    }
    if !input_wait::process_reads_terminal(group, tty) {
        return;
    }
    let found =
        proc_shell::inspect(group, *bash).or_else(|| proc_shell::wrapped_shell(group, *bash));
    match found {
        Some(Prompting::Bash { pid, fingerprint }) if !failed.contains(&(pid, fingerprint)) => {
            let Some(shell) = top.as_ref().map(Level::pid) else { return };
            if let Err(starter) = proc_shell::typed_shell(pid, shell, since, &typed) {
                if *noted != Some(seq) {
                    *noted = Some(seq);
                    tracing::info!(pid, starter, "a bash the command did not ask for: not adopted");
                    shared.lock().levels_mut().note(Event::UnaskedShell(starter));
                    shared.notify();
                }
                return;
            }
            let state = shared.lock();
            if state.levels().carries(pid, fingerprint) {
                return;
            }
            let replaced = state.levels().is_integrated_shell(pid);
            drop(state);
            let fd = format!("/proc/{pid}/fd/{}", super::channel::SHELL_FD);
            let command_fd = format!("/proc/{pid}/fd/{}", bash_script::COMMAND_FD);
            if channel_link.is_none()
                || std::fs::read_link(fd).ok() != *channel_link
                || command_link.is_none()
                || std::fs::read_link(command_fd).ok() != *command_link
            {
                // A wrapper closed the descriptors it inherited (`sudo`,
                // pexpect): this shell could not report any end, or load
                // any command.
                if *noted != Some(seq) {
                    *noted = Some(seq);
                    shared.lock().levels_mut().note(Event::ReinstallFailed);
                    shared.notify();
                }
                return;
            }
            *attempts += 1;
            let handshake = REINSTALL_SEQ_BASE + *attempts;
            let keys = format!("/proc/{pid}/fd/{}", bash_script::KEYS_FD);
            let keys = keys_id.is_some()
                && std::fs::metadata(keys).ok().map(|meta| (meta.dev(), meta.ino())) == *keys_id;
            let text = bash_script::reinstall_script(files, handshake, keys);
            // The shell holding the other end reads it: the command that
            // started it waits, so its outer shell reads nothing. A frame
            // the socket does not take whole now is never completed: no
            // line is typed, what was written loads nothing (the next
            // load flushes it), and the attempt is given up at its
            // deadline, as one whose shell never answers.
            let frame = bash_script::command_frame(handshake, &text);
            let written = (&*commands).write_all(&frame);
            if let Err(err) = &written {
                tracing::debug!("could not write the reinstall script to its socket: {err}");
            }
            tracing::info!(pid, replaced, "reinstalling the shell integration");
            {
                let mut state = shared.lock();
                // Keep what the command printed before the new prompt; the
                // prompt line and the echo of our line are dropped on the
                // handshake.
                let now = Instant::now();
                state.commit_lines(now);
                state.levels_mut().begin_reinstall(Reinstall::new(
                    (handshake, seq),
                    (pid, fingerprint),
                    replaced,
                    now,
                ));
            }
            if written.is_ok() {
                let line = bash_script::reinstall_line(handshake, text.len(), nonce);
                let _ = pty::write_key(master, line.as_bytes());
            }
        }
        Some(Prompting::OtherShell(name)) if *noted != Some(seq) => {
            *noted = Some(seq);
            shared.lock().levels_mut().note(Event::OtherShell(name));
            shared.notify();
        }
        Some(Prompting::NamedBash(command_line)) if *noted != Some(seq) => {
            *noted = Some(seq);
            shared.lock().levels_mut().note(Event::NamedBash(command_line));
            shared.notify();
        }
        Some(Prompting::Remote(name)) if *noted != Some(seq) => {
            *noted = Some(seq);
            shared.lock().levels_mut().note(Event::RemoteShell(name));
            shared.notify();
        }
        _ => {}
    }
}
