//! Keeping the shell integration alive in a session: the levels of shells
//! that carry it (the session's own, then nested ones), the end markers that
//! belong to it rather than to a command (a reinstall's handshake, an outer
//! shell's prompt after a nested one exited), and the watcher task that
//! finds a shell sitting at its prompt without the integration and types
//! the line that reinstalls it; other shells and remote sessions are only
//! named in a note. Which processes' end records are believed: the
//! shells of the levels (and one being given the integration), each by pid
//! and program image, and forks of them that did not `exec` (a subshell of
//! the shell is the shell's own code).
//!
//! Recognising shells from `/proc` and the levels' type live in
//! `crate::integration`, the scripts in `crate::bash_script`. The watcher never
//! takes the session's `tokio` mutex; everything here takes the shared
//! state's std mutex for short sections, never across `.await`. Bounded: at
//! most 16 shells whose reinstall failed are remembered.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::bash_script::{self as shell, ShellFiles};
use crate::input_wait;
use crate::integration::{self, Level, Prompting, Reinstall};
use crate::private_fs;
use crate::pty;

use super::Note;
use super::driver::Shell;
use super::state::{Shared, State};

/// The shells that carry the integration, outermost first, a reinstall in
/// progress, and notes for the next reply. Part of [`State`].
#[derive(Default)]
pub(super) struct Integ {
    levels: Vec<Level>,
    pub(super) reinstall: Option<Reinstall>,
    /// What happened to the integration since the last reply.
    notes: Vec<Note>,
}

impl Integ {
    /// The integration for a session whose own shell is `pid`, with its
    /// program image's `fingerprint`.
    pub(super) fn new(pid: i32, fingerprint: Option<u64>) -> Integ {
        let levels = fingerprint
            .map(|fingerprint| vec![Level { pid, fingerprint, launched_by: None }])
            .unwrap_or_default();
        Integ { levels, reinstall: None, notes: Vec::new() }
    }

    /// Whether an end record sent by process `pid` is believed: it is one
    /// of our shells, or a fork of one that did not `exec` (the PS1
    /// fallback's subshell), with that shell's program image. A child
    /// program has another image (its auxiliary vector changes on `exec`)
    /// and another pid, which the kernel, not the sender, reports.
    pub(super) fn believes(&self, pid: i32) -> bool {
        let shells = self
            .levels
            .iter()
            .map(|l| (l.pid, l.fingerprint))
            .chain(self.reinstall.iter().map(|r| (r.pid, r.fingerprint)));
        let mut parent = None;
        for (shell, fingerprint) in shells {
            let ours = pid == shell
                || *parent.get_or_insert_with(|| integration::parent(pid)) == Some(shell);
            if ours && integration::fingerprint(pid) == Some(fingerprint) {
                return true;
            }
        }
        false
    }

    /// Adds `note` for the next reply, once.
    pub(super) fn note(&mut self, note: Note) {
        if !self.notes.contains(&note) {
            self.notes.push(note);
        }
    }

    /// The innermost shell carrying the integration.
    pub(super) fn top(&self) -> Option<&Level> {
        self.levels.last()
    }
}

impl State {
    /// Handles the end markers that belong to the integration rather than
    /// to a command: a reinstall's handshake, and the prompt of an outer
    /// shell after a nested one exited. Returns whether `seq` was one.
    pub(super) fn integration_marker(&mut self, seq: u64, status: i32, now: Instant) -> bool {
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
    pub(super) fn is_integrated_shell(&self, pid: i32) -> bool {
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

impl Shell {
    /// Notes about the integration gathered since the last reply.
    pub(super) fn take_integration_notes(&self) -> Vec<Note> {
        std::mem::take(&mut self.shared.lock().integ.notes)
    }
}

/// What the integration watcher of one shell needs.
pub(super) struct Watcher {
    pub(super) shared: Arc<Shared>,
    /// A handle on the PTY master: the foreground group, and typing the
    /// reinstall line.
    pub(super) master: std::os::fd::OwnedFd,
    /// The PTY slave's path, to recognise reads of the terminal.
    pub(super) tty: PathBuf,
    pub(super) files: ShellFiles,
    pub(super) nonce: String,
    /// The program the session's shell runs (device and inode): only a
    /// shell running it is given the integration.
    pub(super) bash: Option<integration::ProgramId>,
    /// What `/proc/PID/fd/62` of a shell holding the completion channel
    /// links to (`socket:[inode]`): a shell without it could never report
    /// a command's end, so it is not given the integration.
    pub(super) channel_link: Option<PathBuf>,
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
pub(super) async fn watch_integration(watcher: Watcher) {
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
    let Watcher { shared, master, tty, files, nonce, bash, channel_link } = watcher;
    let Some(group) = pty::foreground_group(master) else { return };
    if let Some(top) = &top
        && top.pid == group
        && integration::fingerprint(group) == Some(top.fingerprint)
    {
        // Our own shell runs a builtin that reads (`read`): not a prompt.
        return;
    }
    if !input_wait::process_reads_terminal(group, tty) {
        return;
    }
    let found =
        integration::inspect(group, *bash).or_else(|| integration::wrapped_shell(group, *bash));
    match found {
        Some(Prompting::Bash { pid, fingerprint }) if !failed.contains(&(pid, fingerprint)) => {
            let state = shared.lock();
            if state.integ.levels.iter().any(|l| l.pid == pid && l.fingerprint == fingerprint) {
                return;
            }
            let replaced = state.integ.levels.iter().any(|l| l.pid == pid);
            drop(state);
            let fd = format!("/proc/{pid}/fd/{}", super::channel::SHELL_FD);
            if channel_link.is_none() || std::fs::read_link(fd).ok() != *channel_link {
                // A wrapper closed the descriptors it inherited (`sudo`,
                // pexpect): this shell could not report any end.
                if *noted != Some(seq) {
                    *noted = Some(seq);
                    shared.lock().integ.notes.push(Note::ReinstallFailed);
                    shared.changed.notify_waiters();
                }
                return;
            }
            *attempts += 1;
            let handshake = integration::REINSTALL_SEQ_BASE + *attempts;
            let script = files.reinstall_file(*attempts);
            let text = shell::reinstall_script(files, handshake);
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
            let _ = pty::write_key(master, shell::reinstall_line(&script, nonce).as_bytes());
        }
        Some(Prompting::OtherShell(name)) if *noted != Some(seq) => {
            *noted = Some(seq);
            shared.lock().integ.notes.push(Note::OtherShell(name));
            shared.changed.notify_waiters();
        }
        Some(Prompting::NamedBash(command_line)) if *noted != Some(seq) => {
            *noted = Some(seq);
            shared.lock().integ.notes.push(Note::NamedBash(command_line));
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
