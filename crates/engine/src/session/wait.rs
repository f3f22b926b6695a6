//! Waiting for the running command and replying about it. A call waits
//! until the command ends, the shell exits, the program waits for input with
//! its output quiet, the call's wait runs out (its `timeout`; without one,
//! silence or the longest wait: `timing::wait_turn`), or the client
//! cancels; while it waits it holds a `Watch` (the command is watched, so
//! the unwatched-time limit does not run) and tells a progress hook about
//! once a second. The replies: finished (from the command taken from the
//! session), partial (what is new since the last reply plus the current
//! line, capped), cancelled (takes nothing) or idle.
//!
//! It depends on the shared state, never on the shell driver: the driver
//! calls it with the shared state and a [`ShellView`] (what the shell's
//! prompt reported). It takes the shared state's std mutex for short
//! sections, never across `.await`, and starts and signals nothing.

use std::path::PathBuf;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::output::{self, Shown};

use super::call::{
    Note, PROGRESS_INTERVAL, Progress, ProgressHook, Reply, SessionConfig, Status, WaitEnded,
};
use super::command::{Command, KillState};
use super::shared::{Shared, State, Watch, wait_for};
use super::timing::{self, WaitBudget};

/// What the shell's prompt last reported, for replies.
#[derive(Debug, Clone)]
pub(super) struct ShellView {
    /// The shell's working directory.
    cwd: PathBuf,
    /// The Python interpreter `python` would run.
    python: Option<PathBuf>,
}

impl ShellView {
    pub(super) fn new(cwd: PathBuf, python: Option<PathBuf>) -> ShellView {
        ShellView { cwd, python }
    }

    pub(super) fn cwd(&self) -> &PathBuf {
        &self.cwd
    }
}

/// How a call's wait ended.
pub(super) enum Waited {
    /// The command ended (or there is none).
    Finished,
    /// The shell exited while the command ran.
    ShellExited,
    /// The call stops waiting; the command keeps running.
    Stopped(WaitEnded),
    /// The client cancelled the call.
    Cancelled,
}

/// Waits until the command ends, the shell exits, the program waits for
/// input with its output quiet, the call's wait runs out, or the call is
/// cancelled. While it waits, the command is watched (never stopped by the
/// unwatched-time limit) and `progress`, if any, is told about once a
/// second. A call the client cancelled is reported cancelled even when the
/// command ended at the same moment (its answer would be dropped, and the
/// next call must report what this one saw), unless the shell exited.
pub(super) async fn wait(
    shared: &Shared,
    config: &SessionConfig,
    timeout: Option<Duration>,
    cancel: &CancellationToken,
    progress: Option<&ProgressHook>,
) -> Waited {
    let waited = wait_until_turn(shared, config, timeout, cancel, progress).await;
    match waited {
        Waited::ShellExited => waited,
        _ if cancel.is_cancelled() => Waited::Cancelled,
        _ => waited,
    }
}

async fn wait_until_turn(
    shared: &Shared,
    config: &SessionConfig,
    timeout: Option<Duration>,
    cancel: &CancellationToken,
    progress: Option<&ProgressHook>,
) -> Waited {
    let call_start = Instant::now();
    let budget = WaitBudget::new(timeout, config.no_output_return, config.max_wait);
    let _watch = Watch::begin(shared);
    let mut reports = 0u64;
    let mut next_report = call_start + PROGRESS_INTERVAL;
    loop {
        let notified = shared.changed();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let deadline = {
            let state = shared.lock();
            let Some(command) = state.command() else { return Waited::Finished };
            if command.is_done() {
                return Waited::Finished;
            }
            if state.exited().is_some() {
                return Waited::ShellExited;
            }
            if command.is_damaged() {
                return Waited::Stopped(WaitEnded::IntegrationDamaged);
            }
            // A shell at its prompt while the integration is being
            // installed in it is not a program waiting for input.
            if command.waits_for_input() && state.levels().reinstall().is_none() {
                return Waited::Stopped(WaitEnded::WaitingForInput);
            }
            match timing::wait_turn(budget, call_start, command.last_output_at(), Instant::now()) {
                Ok(deadline) => deadline,
                Err(reason) => return Waited::Stopped(reason),
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
                    let line = newest_line(&shared.lock());
                    hook.report(Progress { count: reports, elapsed: call_start.elapsed(), line });
                }
            }
        }
    }
}

/// The newest line of the running command's output, for progress: the
/// last one on the screen, else the last one committed and not yet shown.
fn newest_line(state: &State) -> String {
    let Some(command) = state.command().filter(|c| c.has_started()) else {
        // Before the start marker the screen holds the echo of our line.
        return String::new();
    };
    command.output().progress_line(state.screen().newest_line())
}

/// After the shell exits, its last output may still be in flight: waits
/// briefly for the reader to see the hang-up, then ends the command with
/// the shell's exit code and all it printed.
pub(super) async fn finish_after_exit(shared: &Shared) {
    wait_for(shared, Duration::from_millis(500), State::reader_done).await;
    shared.lock().finish_with_shell(Instant::now());
}

/// The reply for a finished command, taken from the session (`None`: an
/// idle reply).
pub(super) fn finished_reply(
    command: Option<Command>,
    view: &ShellView,
    notes: Vec<Note>,
) -> Reply {
    let Some(command) = command else { return idle_reply(view, "", notes) };
    let (exit_code, finished_at) = command.finished().unwrap_or((-1, Instant::now()));
    let mut notes = notes;
    if let KillState::Killed { limit, mode } = command.kill() {
        notes.push(Note::Killed { limit, mode });
    }
    Reply {
        command: command.text().to_owned(),
        status: Status::Completed,
        exit_code: Some(exit_code),
        cwd: view.cwd.clone(),
        python: view.python.clone(),
        duration: finished_at - command.started_at(),
        continued: command.replies() > 0,
        notes,
        previous: None,
        number: Some(command.output().number()),
        first_line: command.first_unreplied_line(),
        look_again_within: None,
        output: command.into_shown(),
    }
}

/// The reply for a command that is still running: what it printed since
/// the last reply, and the line it is on now.
pub(super) fn partial_reply(
    state: &mut State,
    view: &ShellView,
    config: &SessionConfig,
    reason: WaitEnded,
    mut notes: Vec<Note>,
) -> Reply {
    state.commit_lines(Instant::now());
    let current_line = state.screen().current_line();
    let alternate = state.screen().alternate_contents();
    let Some(command) = state.command_mut() else {
        return idle_reply(view, "", notes);
    };
    if command.is_damaged() {
        notes.push(Note::IntegrationDamaged);
    } else if command.waits_for_input() || reason == WaitEnded::WaitingForInput {
        notes.push(Note::WaitingForInput);
        if command.shell_reading() {
            notes.push(Note::ShellReading);
        }
    }
    let look_again_within = command.unwatched_limit();
    let out = command.output_mut();
    let (mut output, first_line, continued) = out.take_part();
    match alternate {
        Some(screen) => {
            notes.push(Note::FullScreen);
            output.text = out.show_screen(screen);
        }
        None => {
            let room = config
                .output_cap
                .saturating_sub(output::count_chars(&output.text))
                .max(config.output_cap / 4);
            let line = out.show_unfinished(&current_line, room);
            if line.omitted > 0 {
                output.truncated = true;
                output.omitted_chars += line.omitted;
            }
            output.text.push_str(&line.text);
        }
    }
    let number = Some(out.number());
    Reply {
        command: command.text().to_owned(),
        output,
        status: Status::Running(reason),
        exit_code: None,
        cwd: view.cwd.clone(),
        python: view.python.clone(),
        duration: command.started_at().elapsed(),
        continued,
        notes,
        previous: None,
        number,
        first_line,
        look_again_within,
    }
}

/// The reply to a cancelled call, which nobody will read: it takes
/// nothing from the session, so the next call reports everything.
pub(super) fn cancelled_reply(state: &State, view: &ShellView, notes: Vec<Note>) -> Reply {
    let mut reply = idle_reply(view, "", notes);
    if let Some(command) = state.command() {
        reply.command = command.text().to_owned();
        reply.duration = command.started_at().elapsed();
    }
    reply.status = Status::Running(WaitEnded::Cancelled);
    reply.exit_code = None;
    reply
}

/// A reply with no command output (reset alone, say).
pub(super) fn idle_reply(view: &ShellView, command: &str, notes: Vec<Note>) -> Reply {
    Reply {
        command: command.to_owned(),
        output: Shown::empty(),
        status: Status::Completed,
        exit_code: Some(0),
        cwd: view.cwd.clone(),
        python: view.python.clone(),
        duration: Duration::ZERO,
        continued: false,
        notes,
        previous: None,
        number: None,
        first_line: 0,
        look_again_within: None,
    }
}
