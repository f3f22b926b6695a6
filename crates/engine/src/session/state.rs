//! The state a shell's PTY reader thread shares with the calls and tasks
//! that drive it: the renderer, the running command (or the finished one
//! no reply has reported yet), text printed between commands, and how the
//! shell exited. [`State::ingest`] feeds the reader's bytes through the
//! renderer and routes what it commits: to the running command's output
//! once its start marker has passed (the echo of our line before it is
//! dropped), else to the idle output. A command ends only on a record of
//! the completion channel (`channel.rs`) sent by the shell itself; its end
//! marker in the output only says where its output ends, and a marker with
//! no such record is ignored.
//!
//! Lock: `Shared::state`, a `std::sync::Mutex`, held by the reader thread
//! for one chunk and by calls and tasks for short sections, never across an
//! `.await`. `Shared::changed` wakes every waiter after each change;
//! [`wait_for`] is how anyone waits on the state.
//!
//! Every piece of a command's committed output goes through its
//! `store::OutputSink` ([`Running::push_output`]): the command log and the
//! view the next reply shows.
//!
//! Bounds: the idle output keeps at most about [`IDLE_OUTPUT_CAP`]
//! characters; a command's shown output is bounded by its sink's view.
//!
//! This module starts nothing, writes nothing to the terminal and builds no
//! replies.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::process::TerminationMode;
use crate::screen::{Marker, Screen, Stop};
use crate::store::OutputSink;

use super::Note;
use super::channel::{Channel, Record};
use super::integration::Integ;
use super::supervise::INPUT_QUIET;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RunningState {
    None,
    Unfinished,
    Finished,
}

/// State shared between the reader thread and the call.
pub(super) struct Shared {
    /// A std mutex: held only for short sections with no `.await`.
    pub(super) state: Mutex<State>,
    /// Woken after every chunk of output and when the shell exits.
    pub(super) changed: Notify,
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves consistent-enough state for
        // reporting; keep going rather than poisoning every later call.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

pub(super) struct State {
    pub(super) screen: Screen,
    /// The first prompt has been seen: the shell is ready for commands.
    pub(super) ready: bool,
    pub(super) running: Option<Running>,
    /// Text printed while no command was running, kept for the next reply.
    pub(super) idle_output: String,
    /// How the shell exited, once it has.
    pub(super) exited: Option<std::process::ExitStatus>,
    /// The reader thread has seen the terminal hang up.
    pub(super) reader_done: bool,
    /// The shells carrying the integration and a reinstall in progress.
    pub(super) integ: Integ,
    /// The server's end of the completion channel.
    pub(super) channel: Channel,
    /// Records received from the shells we believe, not yet matched with
    /// their end marker (bounded by [`RECORDS_KEPT`]).
    pub(super) records: VecDeque<Record>,
}

/// Records kept waiting for their marker; a shell sends one per prompt.
const RECORDS_KEPT: usize = 32;

/// The command being run, or finished but not yet reported.
pub(super) struct Running {
    pub(super) seq: u64,
    pub(super) command: String,
    pub(super) started_at: Instant,
    /// The start marker arrived: output from now on is the command's.
    pub(super) started: bool,
    /// Where its output goes: the command's log (complete) and the view
    /// of what no reply has shown yet.
    pub(super) output: OutputSink,
    /// How many replies already showed part of the output.
    pub(super) replies: u32,
    pub(super) last_output_at: Instant,
    pub(super) finished: Option<(i32, Instant)>,
    /// The line of the command's log where the output not yet replied
    /// begins.
    pub(super) part_first_line: u64,
    /// The category's execution limit, if any.
    pub(super) exec_limit: Option<Duration>,
    /// The unwatched-time limit in force: the larger of `exec_limit` and the
    /// last call's `timeout`.
    pub(super) unwatched_limit: Option<Duration>,
    /// Calls waiting on the command right now.
    pub(super) watchers: u32,
    /// When the last call about the command began or ended: unwatched time
    /// counts from here while `watchers` is 0.
    pub(super) unwatched_since: Instant,
    /// When a call last sent the program input.
    pub(super) last_input_at: Option<Instant>,
    /// When the supervisor confirmed that the program waits for input: a
    /// second look, with no output in between, found it still blocked
    /// reading the terminal.
    pub(super) input_confirmed_at: Option<Instant>,
    /// When it started, in the clock ticks `/proc` uses.
    pub(super) started_ticks: u64,
    /// Time the program spent blocked on terminal input since
    /// `unwatched_since` (not counted against the limit), and whether it
    /// was blocked at the last look.
    pub(super) input_wait: Duration,
    pub(super) waiting_for_input: bool,
    /// The shell itself (not a program it runs) was the one reading the
    /// terminal at the supervisor's last look: a builtin (`read`), or a
    /// shell at its prompt that sent no end record (a damaged integration).
    pub(super) shell_reading: bool,
    /// The shell reported that the command never ran (the line that runs
    /// it failed): the integration is damaged.
    pub(super) damaged: bool,
    /// Set once the supervisor starts killing it; the mode once it is done.
    pub(super) kill: Option<(Duration, Option<TerminationMode>)>,
    /// The foreground groups that were sent ^C; what is left of them when
    /// the command ends is stopped, so an interrupt leaves nothing behind.
    pub(super) interrupted: Vec<i32>,
}

impl Running {
    /// Adds committed text to the command's output, through its sink only.
    /// The start of a line an earlier reply showed unfinished goes to the
    /// log but is not shown again.
    pub(super) fn push_output(&mut self, text: &str) {
        self.output.push(text);
    }

    /// Finished, and not still being killed.
    pub(super) fn is_done(&self) -> bool {
        self.finished.is_some() && !matches!(self.kill, Some((_, None)))
    }

    /// Since when neither the program's output nor our input changed.
    pub(super) fn quiet_from(&self) -> Instant {
        self.last_output_at.max(self.last_input_at.unwrap_or(self.started_at))
    }

    /// Blocked reading the terminal, as confirmed by looks taken after its
    /// output (and our input) went quiet: it waits for the agent.
    pub(super) fn waits_for_input(&self) -> bool {
        self.waiting_for_input
            && self.input_confirmed_at.is_some_and(|at| at >= self.quiet_from() + INPUT_QUIET)
    }
}

/// Keep this much of what is printed between commands.
const IDLE_OUTPUT_CAP: usize = 8_000;

impl State {
    pub(super) fn ingest(&mut self, bytes: &[u8]) {
        // Records come before their markers: the shell sends its record,
        // then prints the marker, so every record for a marker in `bytes`
        // is already queued.
        self.receive_records();
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

    /// Reads the completion channel and keeps the records of the shells
    /// that carry the integration; anything else (a child writing to the
    /// descriptor it inherited) is dropped.
    pub(super) fn receive_records(&mut self) {
        let mut received = Vec::new();
        self.channel.receive(|record| received.push(record));
        // One look at `/proc` per sender and batch, however many records a
        // child floods the channel with.
        let mut judged: Vec<(i32, bool)> = Vec::new();
        for record in received {
            let believed = match judged.iter().find(|(pid, _)| *pid == record.pid) {
                Some(&(_, believed)) => believed,
                None => {
                    let believed = self.integ.believes(record.pid);
                    judged.push((record.pid, believed));
                    believed
                }
            };
            if !believed {
                tracing::debug!(pid = record.pid, "dropped an end record from another process");
                continue;
            }
            if self.records.len() >= RECORDS_KEPT {
                self.records.pop_front();
            }
            self.records.push_back(record);
        }
    }

    /// Whether the shell sent the record of command `seq`.
    pub(super) fn has_record(&mut self, seq: u64) -> bool {
        self.receive_records();
        self.records.iter().any(|r| r.seq == seq)
    }

    /// Takes the record of command `seq`, if the shell sent it.
    pub(super) fn take_record(&mut self, seq: u64, token: Option<i32>) -> Option<Record> {
        let find = |records: &VecDeque<Record>| {
            records.iter().position(|r| r.seq == seq && token.is_none_or(|token| r.token == token))
        };
        let at = find(&self.records).or_else(|| {
            self.receive_records();
            find(&self.records)
        })?;
        self.records.remove(at)
    }

    /// Ends the running command on a record whose marker never came (a
    /// command swallowed or redirected it): called once the terminal's
    /// output has been read. Returns whether it did.
    pub(super) fn end_without_marker(&mut self, now: Instant) -> bool {
        let Some(seq) = self.running.as_ref().filter(|r| r.finished.is_none()).map(|r| r.seq)
        else {
            return false;
        };
        let Some(record) = self.take_record(seq, None) else { return false };
        self.integ.note(Note::EndMarkerMissing);
        self.end(record, now);
        true
    }

    /// An end marker: it ends command `seq` only with the record whose
    /// token it carries (the shell draws the token as the command ends, so
    /// a marker printed before that, even by the shell, never matches).
    fn on_prompt(&mut self, seq: u64, token: i32, now: Instant) {
        let Some(record) = self.take_record(seq, Some(token)) else {
            // Text that looks like our marker, not sent by the shell.
            tracing::debug!(seq, "an end marker without its record: ignored");
            return;
        };
        self.end(record, now);
    }

    /// What the shell's record of command `record.seq` ends.
    fn end(&mut self, record: Record, now: Instant) {
        let (seq, status) = (record.seq, record.status);
        if record.output_elsewhere && self.ready {
            self.integ.note(Note::OutputElsewhere);
        }
        if record.not_run
            && let Some(running) = &mut self.running
            && running.seq == seq
            && running.finished.is_none()
        {
            // The shell is at its prompt, but the command never ran: it is
            // not reported as ended, and nothing more will run.
            running.damaged = true;
            return;
        }
        if self.ready && self.running.as_ref().is_some_and(|r| r.seq == seq && r.finished.is_none())
        {
            // The integration's prompt did not run: it is damaged (or
            // PROMPT_COMMAND was cleared).
            if record.fallback {
                self.integ.note(Note::PromptNotRun);
            }
            // Nothing kept the command's status.
            if record.status_lost {
                self.integ.note(Note::StatusLost);
            }
        }
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
        if self.integration_marker(seq, status, now) {
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
                running.output.log().finish(status);
            }
            _ => self.push_idle(&text),
        }
    }

    pub(super) fn route_committed(&mut self, now: Instant) {
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

    pub(super) fn push_idle(&mut self, text: &str) {
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

/// Waits until `done` holds for the shared state, or `limit` passes.
pub(super) async fn wait_for(
    shared: &Shared,
    limit: Duration,
    mut done: impl FnMut(&State) -> bool,
) -> bool {
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

pub(super) fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

pub(super) fn describe_exit(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        _ => "it stopped".to_owned(),
    }
}
