//! The command a shell runs (or ran, until a reply reports its end), as
//! plain data in the groups that different code owns: [`CommandOutput`] (its
//! committed text and complete log), [`WatchBudget`] (its unwatched-time
//! limit and the input wait discounted from it), [`InputWait`] (what the
//! supervisor last saw) and [`Lifecycle`] (started, finished, killed,
//! interrupted, damaged).
//!
//! No locks, no tasks, no clock (callers pass `now`; the rules are
//! `timing.rs`); it lives inside the shared state, whose lock guards it.
//! Invariants: [`CommandOutput::push`] is the one way text enters it, and
//! [`Command::finish`] the one way it ends, whatever ended it (it pushes the
//! last text, finishes the log and sets the exit code), so the reply, the
//! log, the listing and a job's end agree.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::bash_script;
use crate::mask::Secrets;
use crate::output::{CommandLog, OutputSink};
use crate::output::{Shown, UnfinishedLine};
use crate::process::TerminationMode;

use super::timing;

/// Where the supervisor's limit kill stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum KillState {
    /// Not stopped by its limit.
    NotKilled,
    /// The supervisor is stopping it for running unwatched past `limit`.
    Killing {
        /// The limit it ran past.
        limit: Duration,
    },
    /// It was stopped for running unwatched past `limit`, by `mode`.
    Killed {
        /// The limit it ran past.
        limit: Duration,
        /// How it died.
        mode: TerminationMode,
    },
}

/// What a command printed: its sink (the complete log in the session's
/// store, and the view of the text no reply has shown yet: head and tail in
/// memory), and how far replies have read it.
pub(super) struct CommandOutput {
    /// The one way its text comes in: the command's log (complete, the
    /// only stored copy) and the view the next reply shows.
    sink: OutputSink,
    /// How many replies already showed part of the output.
    replies: u32,
    /// The line of the log where the output not yet replied begins.
    first_unreplied_line: u64,
}

impl CommandOutput {
    /// The output of a command logged in `log`, whose replies show at most
    /// `cap` characters each, with `secrets` masked.
    pub(super) fn new(cap: usize, log: Arc<CommandLog>, secrets: Arc<Secrets>) -> CommandOutput {
        let sink = OutputSink::new(log, cap, secrets);
        CommandOutput { sink, replies: 0, first_unreplied_line: 0 }
    }

    /// The single place every byte of a command's committed text passes,
    /// after rendering and before it is kept or shown: the sink passes it
    /// through `output::pass` and puts it in the complete log and the view
    /// not yet shown. The start of a line an
    /// earlier reply showed unfinished goes to the log but is not shown
    /// again.
    pub(super) fn push(&mut self, text: &str) {
        self.sink.push(text);
    }

    /// The log is complete: the command ended with `status` (what masking
    /// held back is released first).
    fn finish(&mut self, status: i32) {
        self.sink.finish(status);
    }

    /// The line a progress report shows: the screen's newest line while
    /// there is one, else the last line not yet shown.
    pub(super) fn progress_line(&self, screen_line: String) -> String {
        self.sink.progress_line(screen_line)
    }

    /// Hands the text not yet shown to a reply of a running command:
    /// returns it, the log's line where it begins, and whether an earlier
    /// reply showed part of the output. Later text goes to a fresh view.
    pub(super) fn take_part(&mut self) -> (Shown, u64, bool) {
        let continued = self.replies > 0;
        self.replies += 1;
        let shown = self.sink.take_shown();
        let first_line = self.first_unreplied_line;
        self.first_unreplied_line = self.sink.log().complete_lines();
        (shown, first_line, continued)
    }

    /// What this reply shows of the line the command has not finished: only
    /// what is new since the last reply, cut to `room` characters.
    pub(super) fn show_unfinished(&mut self, line: &str, room: usize) -> UnfinishedLine {
        self.sink.show_unfinished(line, room)
    }

    /// What this reply shows of a full-screen program: `screen` as it is,
    /// and the secrets masked in it.
    pub(super) fn show_screen(&mut self, screen: String) -> (String, u64) {
        self.sink.show_screen(screen)
    }

    /// The command's number in the session's store.
    pub(super) fn number(&self) -> u64 {
        self.sink.log().number()
    }
}

/// How long the command may run unwatched, who watches it, and the input
/// wait discounted from its unwatched time.
pub(super) struct WatchBudget {
    /// The category's execution limit, if any.
    exec_limit: Option<Duration>,
    /// The unwatched-time limit in force: the larger of `exec_limit` and the
    /// last call's `timeout`.
    unwatched_limit: Option<Duration>,
    /// Calls waiting on the command right now.
    watchers: u32,
    /// When the last call about the command began or ended: unwatched time
    /// counts from here while `watchers` is 0.
    unwatched_since: Instant,
    /// Time the program spent blocked on terminal input since
    /// `unwatched_since` (not counted against the limit).
    input_wait: Duration,
}

impl WatchBudget {
    fn new(exec_limit: Option<Duration>, timeout: Option<Duration>, now: Instant) -> WatchBudget {
        WatchBudget {
            exec_limit,
            unwatched_limit: timing::unwatched_limit(exec_limit, timeout),
            watchers: 0,
            unwatched_since: now,
            input_wait: Duration::ZERO,
        }
    }

    /// A call looks at the command at `now`: unwatched time starts again,
    /// and the limit becomes the larger of the category's and `timeout`.
    fn touch(&mut self, now: Instant, timeout: Option<Duration>) {
        self.restart(now);
        self.unwatched_limit = timing::unwatched_limit(self.exec_limit, timeout);
    }

    fn restart(&mut self, now: Instant) {
        self.unwatched_since = now;
        self.input_wait = Duration::ZERO;
    }

    /// When the command is stopped if nothing changes.
    fn stop_at(&self) -> Option<Instant> {
        timing::stop_at(self.unwatched_limit, self.watchers, self.unwatched_since, self.input_wait)
    }
}

/// Whether the program waits for input, as the supervisor last saw it.
#[derive(Default)]
pub(super) struct InputWait {
    /// When a call last sent the program input.
    last_input_at: Option<Instant>,
    /// When the supervisor confirmed that the program waits for input: a
    /// second look, with no output in between, found it still blocked
    /// reading the terminal.
    confirmed_at: Option<Instant>,
    /// Blocked reading the terminal at the last look.
    waiting: bool,
    /// Reading the terminal at the last look, but something of the job may
    /// still be at work (`input_wait::Reading::Unsure`): not a prompt.
    unsure: bool,
    /// The shell itself (not a program it runs) was the one reading the
    /// terminal at the last look: a builtin (`read`), or a shell at its
    /// prompt that sent no end record (a damaged integration).
    shell_reading: bool,
    /// The job sat at the terminal using no CPU between the last two looks
    /// (`input_wait::JobLook`): a remote or interactive session at rest.
    idle: bool,
    /// The terminal was out of line mode at the last look (no `ICANON`):
    /// the program reads keys, as menus and remote shells do.
    keys: bool,
}

/// Where the command is in its life.
pub(super) struct Lifecycle {
    started_at: Instant,
    /// When it started, in the clock ticks `/proc` uses.
    started_ticks: u64,
    /// The start marker arrived: output from now on is the command's.
    started: bool,
    /// The start marker arrived (`started` is also set by any end): the
    /// shell began the command. Only this says that it ran.
    start_seen: bool,
    /// The shell exited (`Some(true)`) or was back reading its terminal
    /// (`Some(false)`) before the start marker: the command never started.
    never_started: Option<bool>,
    last_output_at: Instant,
    finished: Option<(i32, Instant)>,
    /// The shell reported that the command never ran (the line that runs
    /// it failed): the integration is damaged.
    damaged: bool,
    kill: KillState,
    /// The foreground groups that were sent ^C; what is left of them when
    /// the command ends is stopped, so an interrupt leaves nothing behind.
    interrupted: Vec<i32>,
}

/// The command being run, or finished but not yet reported.
pub(super) struct Command {
    seq: u64,
    text: String,
    /// The line typed to run it ([`bash_script::run_line`]): the shell
    /// echoes it before the start marker, and that echo is taken out of
    /// what it printed.
    typed: String,
    /// How it is typed at this prompt (what comes before and after it).
    typing: bash_script::Typing,
    output: CommandOutput,
    budget: WatchBudget,
    input: InputWait,
    life: Lifecycle,
}

impl Command {
    /// Command `seq` of its shell, the command line `text`, started at
    /// `now` (`started_ticks` in the clock ticks `/proc` uses) under the
    /// category's `exec_limit` by a call with `timeout`; not yet past its
    /// start marker.
    pub(super) fn new(
        (seq, text): (u64, String),
        (exec_limit, timeout): (Option<Duration>, Option<Duration>),
        (started_ticks, typing): (u64, bash_script::Typing),
        output: CommandOutput,
        now: Instant,
    ) -> Command {
        Command {
            seq,
            typed: bash_script::run_line(seq, &text),
            typing,
            text,
            output,
            budget: WatchBudget::new(exec_limit, timeout, now),
            input: InputWait::default(),
            life: Lifecycle {
                started_at: now,
                started_ticks,
                started: false,
                start_seen: false,
                never_started: None,
                last_output_at: now,
                finished: None,
                damaged: false,
                kill: KillState::NotKilled,
                interrupted: Vec::new(),
            },
        }
    }

    /// Its sequence number in the shell.
    pub(super) fn seq(&self) -> u64 {
        self.seq
    }

    /// The command line.
    pub(super) fn text(&self) -> &str {
        &self.text
    }

    /// The line typed to run it, as its shell echoes it.
    pub(super) fn typed_line(&self) -> &str {
        &self.typed
    }

    /// The keys typed to run it: the line with what comes before and after
    /// it ([`bash_script::Typing`]).
    pub(super) fn typed_keys(&self) -> String {
        self.typing.line(&self.typed)
    }

    /// The command, run from a frame that holds `frame_text` rather than
    /// the text it is named by (a command of shellkeep's own): the line
    /// typed names that text.
    pub(super) fn running(mut self, frame_text: &str) -> Command {
        self.typed = bash_script::run_line(self.seq, frame_text);
        self
    }

    pub(super) fn started_at(&self) -> Instant {
        self.life.started_at
    }

    pub(super) fn started_ticks(&self) -> u64 {
        self.life.started_ticks
    }

    /// Its output.
    pub(super) fn output(&self) -> &CommandOutput {
        &self.output
    }

    /// Its output, to hand part of it to a reply.
    pub(super) fn output_mut(&mut self) -> &mut CommandOutput {
        &mut self.output
    }

    /// Past its start marker: output is the command's.
    pub(super) fn has_started(&self) -> bool {
        self.life.started
    }

    /// The start marker arrived.
    pub(super) fn mark_started(&mut self) {
        self.life.started = true;
        self.life.start_seen = true;
    }

    /// Whether the shell's start marker for it arrived: it was started.
    pub(super) fn start_seen(&self) -> bool {
        self.life.start_seen
    }

    /// Ends it at `now` as never started: the shell exited
    /// (`shell_exited`) or was back reading its terminal before its start
    /// marker, so nothing of it ran. Its exit code is unknown (-1).
    pub(super) fn finish_never_started(&mut self, shell_exited: bool, now: Instant) {
        if self.life.finished.is_some() {
            return;
        }
        self.life.never_started = Some(shell_exited);
        self.finish("", -1, now);
    }

    /// `Some(shell_exited)` for a command that ended without ever starting
    /// (see [`Command::finish_never_started`]).
    pub(super) fn never_started(&self) -> Option<bool> {
        self.life.never_started
    }

    /// Committed text of the running command at `now`.
    pub(super) fn push(&mut self, text: &str, now: Instant) {
        self.output.push(text);
        self.life.last_output_at = now;
    }

    /// The terminal showed something new of the command at `now`.
    pub(super) fn output_seen(&mut self, now: Instant) {
        self.life.last_output_at = now;
    }

    pub(super) fn last_output_at(&self) -> Instant {
        self.life.last_output_at
    }

    /// Ends the command with `status` at `now`, with `text`, the last it
    /// printed: the one way a command ends (its end record and marker, a
    /// nested shell's handshake or exit, the shell's exit, a reset or the
    /// session's close). The text goes through [`CommandOutput::push`] like
    /// all the rest, the log is finished, and the exit code is set, once: a
    /// command that already ended keeps its end.
    pub(super) fn finish(&mut self, text: &str, status: i32, now: Instant) {
        if self.life.finished.is_some() {
            return;
        }
        self.life.started = true;
        self.output.push(text);
        self.output.finish(status);
        self.life.finished = Some((status, now));
    }

    /// Its exit code and when it ended, once it has.
    pub(super) fn finished(&self) -> Option<(i32, Instant)> {
        self.life.finished
    }

    pub(super) fn is_finished(&self) -> bool {
        self.life.finished.is_some()
    }

    /// Finished, and not still being killed.
    pub(super) fn is_done(&self) -> bool {
        self.is_finished() && !self.is_being_killed()
    }

    /// The shell says the command never ran: the integration is damaged.
    pub(super) fn set_damaged(&mut self) {
        self.life.damaged = true;
    }

    pub(super) fn is_damaged(&self) -> bool {
        self.life.damaged
    }

    /// The supervisor started stopping it (it ran past `limit`).
    pub(super) fn begin_kill(&mut self, limit: Duration) {
        self.life.kill = KillState::Killing { limit };
    }

    /// The supervisor's stop ended, by `mode`.
    pub(super) fn end_kill(&mut self, limit: Duration, mode: TerminationMode) {
        self.life.kill = KillState::Killed { limit, mode };
    }

    pub(super) fn kill(&self) -> KillState {
        self.life.kill
    }

    pub(super) fn is_being_killed(&self) -> bool {
        matches!(self.life.kill, KillState::Killing { .. })
    }

    /// Group `group` is about to get ^C.
    pub(super) fn note_interrupted(&mut self, group: i32) {
        self.life.interrupted.push(group);
    }

    /// The groups that got ^C.
    pub(super) fn interrupted(&self) -> &[i32] {
        &self.life.interrupted
    }

    /// A call looks at the command at `now` with its `timeout`.
    pub(super) fn touch(&mut self, now: Instant, timeout: Option<Duration>) {
        self.budget.touch(now, timeout);
    }

    /// A call begins waiting on the command.
    pub(super) fn begin_watch(&mut self) {
        self.budget.watchers += 1;
    }

    /// A call stopped waiting at `now`: unwatched time counts from here.
    pub(super) fn end_watch(&mut self, now: Instant) {
        self.budget.watchers = self.budget.watchers.saturating_sub(1);
        self.budget.restart(now);
    }

    /// The unwatched-time limit in force.
    pub(super) fn unwatched_limit(&self) -> Option<Duration> {
        self.budget.unwatched_limit
    }

    /// When the supervisor stops it, if nothing changes.
    pub(super) fn stop_at(&self) -> Option<Instant> {
        self.budget.stop_at()
    }

    /// A call sent the program input at `now`.
    pub(super) fn input_sent(&mut self, now: Instant) {
        self.input.last_input_at = Some(now);
    }

    /// The supervisor's look at `now` (what it found: [`TerminalLook`]);
    /// `accrued` more of its time counts as input wait.
    pub(super) fn record_look(&mut self, now: Instant, seen: TerminalLook, accrued: Duration) {
        self.budget.input_wait += accrued;
        self.input.waiting = seen.waiting;
        self.input.unsure = seen.unsure;
        self.input.shell_reading = seen.shell_reading;
        self.input.confirmed_at = seen.confirmed.then_some(now);
        self.input.idle = seen.idle;
        self.input.keys = seen.keys;
    }

    /// The job sat at the terminal using no CPU between the last two looks.
    pub(super) fn idle_at_terminal(&self) -> bool {
        self.input.idle
    }

    /// The terminal was out of line mode at the last look: the program
    /// reads keys.
    pub(super) fn reads_keys(&self) -> bool {
        self.input.keys
    }

    /// The call now looking at the command sent it input (input came after
    /// the call's look began).
    pub(super) fn input_this_call(&self) -> bool {
        self.input.last_input_at.is_some_and(|at| at >= self.budget.unwatched_since)
    }

    /// No call has looked at the command since the one that started it:
    /// that call is still the one waiting on it.
    pub(super) fn in_first_call(&self) -> bool {
        self.budget.unwatched_since == self.life.started_at
    }

    /// Blocked reading the terminal at the supervisor's last look.
    pub(super) fn reads_terminal(&self) -> bool {
        self.input.waiting
    }

    /// Reading the terminal at the last look while something of the job
    /// may still be at work: handed back as running after a short quiet.
    pub(super) fn reads_terminal_unsure(&self) -> bool {
        self.input.unsure
    }

    /// The shell itself was the reader at the last look.
    pub(super) fn shell_reading(&self) -> bool {
        self.input.shell_reading
    }

    /// Since when neither the program's output nor our input changed.
    pub(super) fn quiet_from(&self) -> Instant {
        self.life.last_output_at.max(self.input.last_input_at.unwrap_or(self.life.started_at))
    }

    /// Blocked reading the terminal, as confirmed by looks taken after its
    /// output (and our input) went quiet: it waits for the agent.
    pub(super) fn waits_for_input(&self) -> bool {
        timing::waits_for_input(self.input.waiting, self.input.confirmed_at, self.quiet_from())
    }

    /// Ends it as the reply that reports its end: the text not yet shown.
    pub(super) fn into_shown(mut self) -> Shown {
        self.output.sink.take_shown()
    }

    /// How many replies showed part of it.
    pub(super) fn replies(&self) -> u32 {
        self.output.replies
    }

    /// The log's line where the text not yet shown begins.
    pub(super) fn first_unreplied_line(&self) -> u64 {
        self.output.first_unreplied_line
    }
}

/// What one look of the supervisor found the running job doing at its
/// terminal.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct TerminalLook {
    /// Blocked reading the terminal, with all its output read: waiting for
    /// input.
    pub(super) waiting: bool,
    /// Reading the terminal while something of the job may still be at
    /// work.
    pub(super) unsure: bool,
    /// The shell itself is the reader.
    pub(super) shell_reading: bool,
    /// A second look confirmed the wait.
    pub(super) confirmed: bool,
    /// At the terminal at this look and the last, using no CPU in between.
    pub(super) idle: bool,
    /// The terminal was out of line mode (`ICANON` off): the program reads
    /// keys.
    pub(super) keys: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::{OutputStore, StoreLimits};
    use crate::output::{SpillLimits, SpillStore};

    /// A command logged in a store of its own, and its log.
    fn command(name: &str) -> (Command, Arc<CommandLog>) {
        let dir =
            std::env::temp_dir().join(format!("shellkeep-command-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let spill = SpillStore::new(dir, "", SpillLimits::default(), None);
        let store = OutputStore::new(Arc::clone(&spill), "test", StoreLimits::default());
        let log = store.begin("a command");
        let output = CommandOutput::new(1_000, Arc::clone(&log), Arc::new(Secrets::none()));
        let command = Command::new(
            (1, "a command".to_owned()),
            (None, None),
            (0, crate::bash_script::Typing::EDITOR),
            output,
            Instant::now(),
        );
        (command, log)
    }

    #[test]
    fn finishing_pushes_the_last_text_finishes_the_log_and_sets_the_exit_code_once() {
        let (mut command, log) = command("finish");
        let now = Instant::now();
        command.push("first\n", now);
        assert!(log.read(0, 100).expect("reads").running);
        command.finish("last\n", 3, now);
        // A second end (a late marker, the shell's exit) changes nothing.
        command.finish("again\n", 4, now + Duration::from_secs(1));
        assert_eq!(command.finished(), Some((3, now)));
        let page = log.read(0, 100).expect("reads");
        assert_eq!(
            (page.running, page.exit_code, page.text.as_str()),
            (false, Some(3), "first\nlast\n")
        );
        assert_eq!(command.into_shown().text, "first\nlast\n");
    }

    #[test]
    fn a_line_a_reply_showed_unfinished_is_logged_whole_and_shown_once() {
        let (mut command, log) = command("shown");
        let now = Instant::now();
        command.push("a\n", now);
        let (shown, first_line, continued) = command.output_mut().take_part();
        assert_eq!((shown.text.as_str(), first_line, continued), ("a\n", 0, false));
        // The reply showed the prompt the program is on.
        command.output_mut().show_unfinished("name? ", 1_000);
        // Its end, committed as the command ends, is the rest of that line.
        command.finish("name? bob\n", 0, now);
        let page = log.read(0, 100).expect("reads");
        assert_eq!((page.running, page.text.as_str()), (false, "a\nname? bob\n"));
        assert_eq!((command.replies(), command.first_unreplied_line()), (1, 1));
        assert_eq!(command.into_shown().text, "bob\n");
    }

    #[test]
    fn a_command_being_killed_is_not_done_until_the_kill_ends() {
        let (mut command, _log) = command("kill");
        let now = Instant::now();
        command.begin_kill(Duration::from_secs(1));
        command.finish("", 130, now);
        assert!(command.is_finished() && !command.is_done());
        command.end_kill(Duration::from_secs(1), TerminationMode::Soft);
        assert!(command.is_done());
        let killed =
            KillState::Killed { limit: Duration::from_secs(1), mode: TerminationMode::Soft };
        assert_eq!(command.kill(), killed);
    }
}
