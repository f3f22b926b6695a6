//! Waiting for the running command and replying about it. A call waits
//! until the command ends, the shell exits, the program waits for input with
//! its output quiet, the call's wait runs out (its `timeout`; without one,
//! silence or the longest wait), or the client cancels; while it waits it
//! holds a `Watch` (the command is watched, so the unwatched-time limit does
//! not run) and tells a progress hook about once a second. Then it builds
//! the reply: finished (takes the command from the session), partial (what
//! is new since the last reply plus the current line, capped), cancelled
//! (takes nothing) or idle.
//!
//! It runs inside a call that holds the session's `tokio` mutex and takes
//! the shared state's std mutex for short sections, never across `.await`.
//! It starts and signals nothing itself: once a command ended it only asks
//! the driver to stop what an interrupt left behind.

use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::output::{self, Shown};

use super::driver::Shell;
use super::state::{exit_code, wait_for};
use super::supervise::Watch;
use super::{
    Note, PROGRESS_INTERVAL, Progress, ProgressHook, Reply, SessionConfig, SessionError, Status,
    WaitEnded,
};

impl Shell {
    /// Waits for the running command as the call's timeout allows, then
    /// replies with what happened.
    pub(super) async fn wait_reply(
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
                    running.output.log().finish(code);
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
                if running.damaged {
                    return Waited::Stopped(WaitEnded::IntegrationDamaged);
                }
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
        state.running.as_ref().map(|r| r.output.progress_line(newest)).unwrap_or_default()
    }

    /// After the shell exits, its last output may still be in flight: wait
    /// briefly for the reader to see the hang-up.
    async fn drain_after_exit(&self) {
        wait_for(&self.shared, Duration::from_millis(500), |state| state.reader_done).await;
    }

    /// The reply for a finished command; clears it from the session.
    pub(super) fn finished_reply(&mut self, notes: Vec<Note>) -> Reply {
        let running = self.shared.lock().running.take();
        self.refresh_state();
        let Some(mut running) = running else { return self.idle_reply("", notes) };
        let (exit_code, finished_at) = running.finished.unwrap_or((-1, Instant::now()));
        let mut notes = notes;
        if let Some((limit, Some(mode))) = running.kill {
            notes.push(Note::Killed { limit, mode });
        }
        Reply {
            command: running.command,
            output: running.output.take_shown(),
            status: Status::Completed,
            exit_code: Some(exit_code),
            cwd: self.cwd.clone(),
            python: self.python.clone(),
            duration: finished_at - running.started_at,
            continued: running.replies > 0,
            notes,
            previous: None,
            number: Some(running.output.log().number()),
            first_line: running.part_first_line,
            look_again_within: None,
        }
    }

    /// The reply for a command that is still running: what it printed since
    /// the last reply, and the line it is on now.
    pub(super) fn partial_reply(
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
        if running.damaged {
            notes.push(Note::IntegrationDamaged);
        } else if running.waits_for_input() || reason == WaitEnded::WaitingForInput {
            notes.push(Note::WaitingForInput);
            if running.shell_reading {
                notes.push(Note::ShellReading);
            }
        }
        let look_again_within = running.unwatched_limit;
        let mut output = running.output.take_shown();
        let first_line = running.part_first_line;
        running.part_first_line = running.output.log().complete_lines();
        match alternate {
            Some(screen) => {
                notes.push(Note::FullScreen);
                output.text = running.output.show_screen(screen);
            }
            None => {
                let room = config
                    .output_cap
                    .saturating_sub(output::count_chars(&output.text))
                    .max(config.output_cap / 4);
                let line = running.output.show_unfinished(&current_line, room);
                if line.omitted > 0 {
                    output.truncated = true;
                    output.omitted_chars += line.omitted;
                }
                output.text.push_str(&line.text);
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
            number: Some(running.output.log().number()),
            first_line,
            look_again_within,
        };
        running.replies += 1;
        reply
    }

    /// A reply with no command output (reset alone, say).
    pub(super) fn idle_reply(&self, command: &str, notes: Vec<Note>) -> Reply {
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
}

enum Waited {
    Finished,
    ShellExited,
    Stopped(WaitEnded),
    Cancelled,
}
