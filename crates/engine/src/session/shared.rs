//! The state a shell's PTY reader thread shares with the calls and tasks
//! that drive it ([`Shared`], [`State`]): the renderer, the command (running,
//! or finished and not yet reported), text printed between commands, the
//! levels of shells that carry the integration, the completion channel, and
//! how the shell exited; [`wait_for`], the one way to wait on it.
//!
//! It knows nothing of the shell driver: it starts nothing, writes nothing to
//! the terminal and builds no replies. Invariants: every raw byte of the
//! terminal passes [`State::ingest`] and every committed text `output::pass`;
//! a command ends only on a record of the completion channel sent by one of
//! our shells, and every way it ends calls `Command::finish`; the lock is
//! held by the reader for one chunk and by others for short sections, never
//! across an `.await`.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::bash_script;
use crate::mask::Secrets;
use crate::output::IdleOutput;
use crate::output::{self, Masking};
pub(super) use crate::process::exit_code;
use crate::screen::{Marker, Screen, Stop};
use crate::terminal::{Gate, pty};

use super::call::{AtPrompt, Event, ShellExit};
use super::channel::{Captured, Channel, Message, Record, StateParts};
use super::command::Command;
use super::levels::{LevelEvent, Levels};

/// What the shell is doing with its command, as a call sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CommandState {
    /// No command: the shell waits at its prompt.
    Idle,
    /// A command runs (or is being killed).
    Running,
    /// A command ended and no reply has reported it yet.
    Finished,
}

/// State shared between the reader thread and the call.
///
/// Lock: `Shared::state`, a `std::sync::Mutex`, held by the reader thread
/// for one chunk and by calls and tasks for short sections, never across an
/// `.await`. `Shared::changed` wakes every waiter after each change;
/// [`wait_for`] is how anyone waits on the state.
pub(super) struct Shared {
    /// A std mutex: held only for short sections with no `.await`.
    state: Mutex<State>,
    /// Woken after every chunk of output and when the shell exits.
    changed: Notify,
}

impl Shared {
    pub(super) fn new(state: State) -> Shared {
        Shared { state: Mutex::new(state), changed: Notify::new() }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves consistent-enough state for
        // reporting; keep going rather than poisoning every later call.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Wakes everyone waiting on a change.
    pub(super) fn notify(&self) {
        self.changed.notify_waiters();
    }

    /// A future that completes at the next [`Shared::notify`]; enable it
    /// before looking at the state, so no change is missed.
    pub(super) fn changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.changed.notified()
    }
}

pub(super) struct State {
    screen: Screen,
    /// The first prompt has been seen: the shell is ready for commands.
    ready: bool,
    command: Option<Command>,
    /// Text printed while no command was running, kept for the next reply.
    idle_output: IdleOutput,
    /// How the shell exited, once it has.
    exited: Option<std::process::ExitStatus>,
    /// The reader thread has seen the terminal hang up.
    reader_done: bool,
    /// The shells carrying the integration and a reinstall in progress.
    levels: Levels,
    /// The server's end of the completion channel.
    channel: Channel,
    /// Records received from the shells we believe, not yet matched with
    /// their end marker (bounded by [`RECORDS_KEPT`]).
    records: VecDeque<Record>,
    /// The pieces of the state a shell of ours is sending, and the last
    /// state it committed (working directory, `PATH`).
    state_parts: StateParts,
    shell_state: Option<(Vec<u8>, Vec<u8>)>,
    /// The exported environment a shell is sending for a background job.
    capture: Option<Captured>,
    /// What is masked in the shell's output.
    secrets: Arc<Secrets>,
    /// The shell's prompt while the running command had not ended.
    prompted: Option<Prompted>,
    /// The innermost shell's pid and its count of the command lines it had
    /// read at the last start marker; forgotten when the levels change.
    lines_read: Option<(i32, u64)>,
    /// Who may type, and what a person typed (`terminal::gate`).
    gate: Arc<Gate>,
    /// A person typed between the last command and the running one: the
    /// lines the shell read meanwhile were theirs.
    person_lines: bool,
    /// Line editing was asked back for a person since the agent's last
    /// command ([`State::person_editing_due`]).
    person_editing: bool,
    /// The echo of the line that asks for it has not ended yet (its marker,
    /// [`Marker::Editing`], has not come).
    editing_echo: bool,
    /// The raw bytes of the last chunk for those watching the terminal:
    /// all of it but the echo of the lines we type.
    shown: Vec<u8>,
}

/// Records kept waiting for their marker; a shell sends one per prompt.
const RECORDS_KEPT: usize = 32;

/// The shell printed its prompt marker while command `seq` ran with no
/// record of its end: the shell is back at its prompt, and the
/// integration's prompt did not end the command.
///
/// The prompt marker (`P`, which `PS1` holds while a command runs) means
/// the shell came back to its prompt and nothing of the integration ended
/// the command: what came before it is the command's output, and the
/// command waits for the watcher to type the fallback line, whose record
/// the shell itself sends. The echo of that line is dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Prompted {
    /// The running command.
    seq: u64,
    /// The fallback line was typed (once per command).
    typed: bool,
    /// The shell printed its prompt again after the line: the line did
    /// not end the command (its function removed), and nothing more will.
    spent: bool,
}

impl State {
    /// The state of a shell that has not reached its first prompt, whose
    /// output is masked with `secrets`, on a terminal whose writers `gate`
    /// says.
    pub(super) fn new(
        screen: Screen,
        levels: Levels,
        channel: Channel,
        secrets: Arc<Secrets>,
        gate: Arc<Gate>,
    ) -> State {
        State {
            screen,
            ready: false,
            command: None,
            idle_output: IdleOutput::new(Arc::clone(&secrets)),
            exited: None,
            reader_done: false,
            levels,
            channel,
            records: VecDeque::new(),
            state_parts: StateParts::default(),
            shell_state: None,
            capture: None,
            secrets,
            prompted: None,
            lines_read: None,
            gate,
            person_lines: false,
            person_editing: false,
            editing_echo: false,
            shown: Vec::new(),
        }
    }

    /// What the last chunk showed for those watching the terminal (see
    /// `shown`); empty once taken.
    pub(super) fn take_shown(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.shown)
    }

    /// What the reader thread saw; returns the answers to terminal queries
    /// to write back.
    pub(super) fn on_event(&mut self, event: pty::Event<'_>) -> Vec<u8> {
        match event {
            pty::Event::Output(bytes) => self.ingest(bytes),
            pty::Event::Ready => self.receive_records(),
            pty::Event::HangUp => self.reader_done = true,
        }
        self.screen.take_responses()
    }

    /// The single place every raw byte of the terminal passes, in order,
    /// before the renderer (escape sequences included): it feeds them
    /// through the renderer and routes what it commits, to the command once
    /// its start marker has passed (the echo of our line before it is
    /// dropped), else to the idle output (`store::IdleOutput`, what
    /// background jobs print between commands, about
    /// `store::IDLE_OUTPUT_CAP` bytes); both pass it through `output::pass`.
    ///
    /// A command ends only on a record of the completion channel
    /// (`channel.rs`) sent by one of our shells (`levels.rs` judges the
    /// sender); its end marker only says where its output ends, and a
    /// marker with no such record is ignored. Every way a command ends here
    /// (its record and marker, a nested shell's handshake or exit, the
    /// shell's exit, a stop) commits the screen and calls `Command::finish`.
    ///
    /// The shell at its prompt is watched: a record or a start marker that
    /// comes while no command runs means something ran there that no call
    /// typed, and the next reply is told (`Event::RanAtPrompt`). A command
    /// counts as started only on its start marker: one the shell exits, or
    /// reads its terminal again, before is ended as never started.
    fn ingest(&mut self, bytes: &[u8]) {
        // Records come before their markers: the shell sends its record,
        // then prints the marker, so every record for a marker in `bytes`
        // is already queued.
        self.receive_records();
        let now = Instant::now();
        let mut rest = bytes;
        while !rest.is_empty() {
            // While our line is being typed, the terminal echoes it: a
            // person watching sees the command (`Tap::Command`), not the
            // line that runs it.
            let echoing = self.editing_echo
                || self.command.as_ref().is_some_and(|c| !c.has_started() && !c.is_finished());
            let (consumed, stop) = self.screen.feed(rest);
            if !echoing {
                self.shown.extend_from_slice(&rest[..consumed]);
            }
            rest = &rest[consumed..];
            self.route_committed(now);
            match stop {
                Some(Stop::Marker(Marker::Start { seq, lines_read })) => {
                    let ours = self
                        .command
                        .as_ref()
                        .is_some_and(|c| c.seq() == seq && !c.has_started() && !c.is_finished());
                    let typing =
                        self.command.as_ref().is_some_and(|c| !c.has_started() && !c.is_finished());
                    if !ours && typing {
                        // Before our line is read, the shell starts nothing
                        // else: another number is forged (a job printed it
                        // while the line was on its way).
                        tracing::warn!(seq, "a start marker before our command's own");
                        let what = AtPrompt::StartMarker;
                        self.levels.note(Event::RanAtPrompt { what, seq, sender: None });
                    } else if !ours {
                        // The shell started something no call typed.
                        self.ran_at_prompt(AtPrompt::StartMarker, seq, None);
                    } else if let Some(lines) = lines_read {
                        self.count_lines(seq, lines);
                    }
                    if let Some(command) = &mut self.command
                        && ours
                    {
                        // What came before is the echo of the line we
                        // typed, and what a background job printed since
                        // the command began: that is kept as idle output.
                        let printed = take_echoed(&mut self.screen, command.typed_line());
                        command.mark_started();
                        self.push_idle(&printed);
                    }
                }
                Some(Stop::Marker(Marker::End { seq, status })) => self.on_prompt(seq, status, now),
                Some(Stop::Marker(Marker::Prompt { seq })) => self.on_prompt_unended(seq, now),
                Some(Stop::Marker(Marker::Editing)) => self.on_editing(),
                Some(Stop::AlternateScreen(_)) | None => {}
            }
        }
        if let Some(command) = &mut self.command
            && command.has_started()
            && !command.is_finished()
        {
            command.output_seen(now);
        }
    }

    /// Reads the completion channel and keeps the records and the state of
    /// the shells that carry the integration, and the environment of the
    /// one a capture waits for; anything else (a child writing to the
    /// descriptor it inherited) is dropped.
    fn receive_records(&mut self) {
        let mut received = Vec::new();
        self.channel.receive(|message| received.push(message));
        // One look at `/proc` per sender and batch, however many records a
        // child floods the channel with.
        let mut judged: Vec<(i32, bool)> = Vec::new();
        let mut judged_data: Vec<(i32, bool)> = Vec::new();
        for message in received {
            let record = match message {
                Message::Record(record) => record,
                Message::Data { pid, kind, bytes } => {
                    self.on_data(pid, kind, &bytes, &mut judged_data);
                    continue;
                }
            };
            let believed = match judged.iter().find(|(pid, _)| *pid == record.pid) {
                Some(&(_, believed)) => believed,
                None => {
                    let believed = self.levels.believes(record.pid);
                    judged.push((record.pid, believed));
                    believed
                }
            };
            if !believed {
                tracing::debug!(pid = record.pid, "dropped an end record from another process");
                // Named as the shell's commands see it (a sandbox's
                // namespace has pids of its own).
                let sender = crate::process::pid_inside(record.pid);
                self.ran_at_prompt(AtPrompt::EndRecord, record.seq, Some(sender));
                continue;
            }
            if self.at_prompt() && self.gate.typed_since_command() {
                // A person attached typed a command at the prompt.
                self.levels.note(Event::PersonRan { status: record.status });
            } else {
                self.ran_at_prompt(AtPrompt::EndRecord, record.seq, None);
            }
            if self.records.len() >= RECORDS_KEPT {
                self.records.pop_front();
            }
            self.records.push_back(record);
        }
    }

    /// A piece of data from `pid`: the environment only from the shell a
    /// capture waits for, the state only from a shell of ours (the pid the
    /// server registered, or one `Levels::believes`).
    fn on_data(&mut self, pid: i32, kind: u8, bytes: &[u8], judged: &mut Vec<(i32, bool)>) {
        if kind == b'V' {
            if let Some(capture) = self.capture.as_mut().filter(|capture| capture.pid == pid) {
                capture.keep(bytes);
            }
            return;
        }
        let believed = match judged.iter().find(|(sender, _)| *sender == pid) {
            Some(&(_, believed)) => believed,
            None => {
                let believed = self.levels.is_integrated_shell(pid) || self.levels.believes(pid);
                judged.push((pid, believed));
                believed
            }
        };
        if !believed {
            tracing::debug!(pid, "dropped the state sent by another process");
            return;
        }
        if let Some(state) = self.state_parts.add(pid, kind, bytes) {
            self.shell_state = Some(state);
        }
    }

    /// The working directory and `PATH` the shell last sent.
    pub(super) fn shell_state(&mut self) -> Option<bash_script::ShellState> {
        use std::os::unix::ffi::OsStrExt;
        self.receive_records();
        let (cwd, path) = self.shell_state.as_ref()?;
        Some(bash_script::ShellState {
            cwd: std::ffi::OsStr::from_bytes(cwd).into(),
            path: String::from_utf8_lossy(path).into_owned(),
        })
    }

    /// Starts gathering the exported environment shell `pid` sends, at
    /// most `limit` bytes.
    pub(super) fn begin_capture(&mut self, pid: i32, limit: usize) {
        self.receive_records();
        self.capture = Some(Captured::new(pid, limit));
    }

    /// What the shell sent since [`State::begin_capture`].
    pub(super) fn take_capture(&mut self) -> Option<Captured> {
        self.receive_records();
        self.capture.take()
    }

    /// A record or a start marker (`what`, claiming command `seq`, sent by
    /// `sender` when that is not the shell) came: while no command runs,
    /// the shell sits at its prompt, so something ran there that no call
    /// typed (a line pushed into its input, legacy `TIOCSTI`), and the
    /// session is marked tampered with for the next reply. Before the
    /// first prompt, the shell's start-up sends the first record.
    fn ran_at_prompt(&mut self, what: AtPrompt, seq: u64, sender: Option<i32>) {
        if !self.at_prompt() {
            return;
        }
        if what == AtPrompt::EndRecord && sender.is_none() && self.levels.launched_by(seq) {
            // A nested shell exited (the next reply says so): its parent
            // is back at its prompt and reports the command that started it.
            return;
        }
        tracing::warn!(seq, ?sender, ?what, "something ran at the shell's prompt");
        self.levels.note(Event::RanAtPrompt { what, seq, sender });
    }

    /// Whether the shell is past its first prompt and no command runs.
    fn at_prompt(&self) -> bool {
        self.ready && self.command.as_ref().is_none_or(Command::is_finished)
    }

    /// The start marker of our command `seq` says the shell has read
    /// `lines` command lines: each command is one line we typed, so more
    /// than one since the last start marker (in the same shell) means lines
    /// ran at its prompt that no call typed (pushed into its input, even
    /// ones that emptied PROMPT_COMMAND so that no record told).
    fn count_lines(&mut self, seq: u64, lines: u64) {
        let top = self.levels.top().map(|level| level.pid());
        if let (Some(top), Some((shell, last))) = (top, self.lines_read)
            && shell == top
            && lines > last + 1
            && !self.person_lines
        {
            let what = AtPrompt::Lines { count: lines - last - 1 };
            tracing::warn!(seq, ?what, "lines ran at the shell's prompt");
            self.levels.note(Event::RanAtPrompt { what, seq, sender: None });
        }
        self.lines_read = top.map(|top| (top, lines));
    }

    /// Whether the shell sent the record of command `seq`.
    pub(super) fn has_record(&mut self, seq: u64) -> bool {
        self.receive_records();
        self.records.iter().any(|r| r.seq == seq)
    }

    /// Takes the record of command `seq`, if the shell sent it.
    fn take_record(&mut self, seq: u64, token: Option<i32>) -> Option<Record> {
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
        let Some(seq) = self.command.as_ref().filter(|c| !c.is_finished()).map(Command::seq) else {
            return false;
        };
        let Some(record) = self.take_record(seq, None) else { return false };
        self.levels.note(Event::EndMarkerMissing);
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

    /// The prompt marker: the shell printed its prompt while command `seq`
    /// ran. When nothing ended the command, what came before is its
    /// output, and the watcher is to type the fallback line
    /// ([`State::fallback_due`]); when that line was typed already and the
    /// shell prompts again, the window holds only its echo, and nothing
    /// more will end the command (the integration is broken).
    fn on_prompt_unended(&mut self, seq: u64, now: Instant) {
        // Its start marker may be missing (`__sk_mark` removed): `PS1`
        // holds this marker only once `__sk_pre` ran for `seq`.
        if self.unfinished(Some(seq)).is_none() || self.has_record(seq) {
            return;
        }
        match &mut self.prompted {
            Some(prompted) if prompted.seq == seq && prompted.typed => {
                self.screen.discard_window();
                prompted.spent = true;
            }
            _ => {
                self.screen.commit_all();
                if let Some(command) = self.command.as_mut().filter(|c| !c.has_started()) {
                    // No start marker came (`__sk_mark` removed): what
                    // came before is the echo of our line, then the
                    // command's output.
                    let before = self.screen.take_committed();
                    let printed = without_echo(&before, command.typed_line());
                    command.mark_started();
                    command.push(&printed, now);
                }
                self.route_committed(now);
                self.prompted = Some(Prompted { seq, typed: false, spent: false });
            }
        }
    }

    /// The command whose fallback line is due: the shell printed its prompt
    /// while it ran, nothing ended it, and the line was not typed yet.
    pub(super) fn fallback_due(&mut self) -> Option<u64> {
        let seq = self.prompted.filter(|p| !p.typed).map(|p| p.seq)?;
        (self.unfinished(Some(seq)).is_some() && !self.has_record(seq)).then_some(seq)
    }

    /// The fallback line of command `seq` is about to be typed: once.
    pub(super) fn fallback_typed(&mut self, seq: u64) {
        if let Some(prompted) = self.prompted.as_mut().filter(|p| p.seq == seq) {
            prompted.typed = true;
        }
    }

    /// Whether the running command waits for its fallback line or for what
    /// it sends: the shell reading the terminal at its prompt is then not
    /// a program waiting for input.
    pub(super) fn awaits_fallback(&self) -> bool {
        self.prompted.is_some_and(|p| {
            !p.spent && self.command.as_ref().is_some_and(|c| c.seq() == p.seq && !c.is_finished())
        })
    }

    /// The running command `seq` (any, for `None`), if it has not ended.
    fn unfinished(&mut self, seq: Option<u64>) -> Option<&mut Command> {
        self.command.as_mut().filter(|c| !c.is_finished() && seq.is_none_or(|seq| seq == c.seq()))
    }

    /// What the shell's record of command `record.seq` ends.
    fn end(&mut self, record: Record, now: Instant) {
        let (seq, status) = (record.seq, record.status);
        if record.output_elsewhere && self.ready {
            self.levels.note(Event::OutputElsewhere);
        }
        if record.not_run
            && let Some(command) = self.unfinished(Some(seq))
        {
            // The shell is at its prompt, but the command never ran: it is
            // not reported as ended, and nothing more will run.
            command.set_damaged();
            return;
        }
        if self.ready && self.unfinished(Some(seq)).is_some() {
            // The integration's prompt did not run: it is damaged (or
            // PROMPT_COMMAND was cleared).
            if record.fallback {
                self.levels.note(Event::PromptNotRun);
            }
            // Nothing kept the command's status.
            if record.status_lost {
                self.levels.note(Event::StatusLost);
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
        if self.prompted.is_some_and(|p| p.seq == seq && p.typed) {
            // The window holds the prompt and the echo of the fallback
            // line; the command's output was committed at the prompt.
            self.screen.discard_window();
        }
        let level_event = self.levels.on_marker(seq, status);
        if level_event.is_some() {
            // Another shell, or the same one replaced: its own count.
            self.lines_read = None;
        }
        match level_event {
            Some(LevelEvent::Handshake) => {
                // What is left in the window is the new shell's prompt and
                // the line we typed; the command's own output was committed
                // first. The shell now waits for the next command: as far as
                // the agent is concerned, the command that started it is
                // done.
                self.screen.discard_window();
                self.finish_command(None, 0, now);
            }
            // The shell started by command `seq` exited and its parent is
            // back at its prompt: the command typed into the nested shell
            // (`exit`) ended with the nested shell's status.
            Some(LevelEvent::NestedExited { status }) => self.finish_command(None, status, now),
            None => self.finish_command(Some(seq), status, now),
        }
    }

    /// Ends the running command (`seq`, or whichever runs) with `status` at
    /// `now`, with what is left on the screen; text that was not the
    /// command's goes to the idle output.
    fn finish_command(&mut self, seq: Option<u64>, status: i32, now: Instant) {
        self.screen.commit_all();
        self.screen.leave_alternate();
        let text = self.screen.take_committed();
        match self.unfinished(seq) {
            Some(command) => {
                command.finish(&text, status, now);
                // A person's keys before this were for the command.
                self.gate.command_turn();
            }
            None => self.push_idle(&text),
        }
    }

    /// The shell is gone (it exited, or it is being stopped): the running
    /// command ends with the shell's exit code (-1 when it is not known),
    /// with all it printed.
    pub(super) fn finish_with_shell(&mut self, now: Instant) {
        let status = self.exited.map_or(-1, exit_code);
        if self.unfinished(None).is_some_and(|c| !c.start_seen()) {
            // It never started: the shell exited before its start marker.
            self.end_never_started(true, now);
            return;
        }
        self.finish_command(None, status, now);
    }

    /// The shell was seen back reading its terminal, with all it wrote
    /// read, before command `seq`'s start marker: the command never
    /// started. Returns whether that ended it (its marker may have come
    /// since the look).
    pub(super) fn never_started(&mut self, seq: u64, now: Instant) -> bool {
        if !self.unfinished(Some(seq)).is_some_and(|c| !c.start_seen() && !c.is_damaged()) {
            return false;
        }
        self.end_never_started(false, now);
        true
    }

    /// Ends the running command as never started; what the screen holds
    /// (what was echoed of the line typed, what others printed) was no
    /// command's output and goes to the idle output.
    fn end_never_started(&mut self, shell_exited: bool, now: Instant) {
        self.screen.commit_all();
        let text = self.screen.take_committed();
        self.screen.discard_window();
        if let Some(command) = self.unfinished(None) {
            command.finish_never_started(shell_exited, now);
        }
        self.push_idle(&text);
    }

    /// Makes every finished line on the screen final and routes it (to the
    /// running command, or the idle output).
    pub(super) fn commit_lines(&mut self, now: Instant) {
        self.screen.commit_complete_lines();
        self.route_committed(now);
    }

    fn route_committed(&mut self, now: Instant) {
        if !self.screen.has_committed() {
            return;
        }
        let text = self.screen.take_committed();
        match &mut self.command {
            Some(command) if !command.is_finished() => {
                // Before the start marker it is the echo of our own line.
                if command.has_started() {
                    command.push(&text, now);
                }
            }
            _ => self.push_idle(&text),
        }
    }

    fn push_idle(&mut self, text: &str) {
        if !self.ready || text.is_empty() {
            return;
        }
        self.idle_output.push(text);
    }

    /// Takes what was printed between commands.
    pub(super) fn take_idle_output(&mut self) -> String {
        self.idle_output.take().0
    }

    /// The line the cursor is on, as output shown once (a shell that never
    /// reached its prompt): it passes the one place all output passes.
    pub(super) fn current_line_shown(&self) -> String {
        let line = self.screen.current_line();
        output::pass(&mut Masking::new(Arc::clone(&self.secrets)), &line, true).into_string()
    }

    /// Whether a person's keys are to wait for [`bash_script::EDIT_LINE`]:
    /// the shell carrying the integration sits at its idle prompt, where
    /// the agent's last command turned line editing off, and nobody asked
    /// it back since. Asking is recorded here, and the echo of the line is
    /// kept from those watching and from the agent's next reply.
    pub(super) fn person_editing_due(&mut self) -> bool {
        if self.person_editing
            || !self.at_prompt()
            || self.levels.top().is_none()
            || self.levels.reinstall().is_some()
        {
            return false;
        }
        self.person_editing = true;
        self.editing_echo = true;
        true
    }

    /// Whether the echo of [`bash_script::EDIT_LINE`] is still awaited.
    pub(super) fn editing_echo_pending(&self) -> bool {
        self.editing_echo
    }

    /// Stops awaiting that echo (the shell never answered): what comes is
    /// then shown and reported as it is.
    pub(super) fn give_up_editing_echo(&mut self) {
        self.editing_echo = false;
    }

    /// The shell edits lines again for a person: what the screen holds
    /// since the last command, but the echo of the line that asked it, is
    /// output between commands.
    fn on_editing(&mut self) {
        if !std::mem::take(&mut self.editing_echo) {
            return;
        }
        let printed = take_echoed(&mut self.screen, bash_script::EDIT_LINE);
        self.push_idle(&printed);
    }

    /// Starts `command` at `now`: whatever was printed before it (by
    /// background jobs) is returned for its reply, not mixed into its
    /// output.
    pub(super) fn begin(&mut self, command: Command, now: Instant) -> String {
        // What the shell sent while it sat at its prompt is judged as such.
        self.receive_records();
        self.person_lines = self.gate.command_turn();
        self.person_editing = false;
        self.editing_echo = false;
        self.screen.commit_all();
        self.route_committed(now);
        self.command = Some(command);
        self.take_idle_output()
    }

    /// Starts `command`, a command of shellkeep's own that no reply
    /// reports (reading the environment for a background job), at `now`:
    /// what background jobs printed stays for the next reply, and the
    /// finished command no reply has reported yet is handed back, to be put
    /// back with [`State::restore`].
    pub(super) fn begin_own(&mut self, command: Command, now: Instant) -> Option<Command> {
        self.receive_records();
        self.person_editing = false;
        self.editing_echo = false;
        self.screen.commit_all();
        self.route_committed(now);
        self.command.replace(command)
    }

    /// Puts back the command [`State::begin_own`] handed back, once that
    /// command of shellkeep's has ended; returns the one it replaces.
    pub(super) fn restore(&mut self, command: Option<Command>) -> Option<Command> {
        std::mem::replace(&mut self.command, command)
    }

    /// The command, running or finished and not yet reported.
    pub(super) fn command(&self) -> Option<&Command> {
        self.command.as_ref()
    }

    /// The command, to record what a call or task learnt about it.
    pub(super) fn command_mut(&mut self) -> Option<&mut Command> {
        self.command.as_mut()
    }

    /// The command `seq`, if it is still the session's.
    pub(super) fn command_seq_mut(&mut self, seq: u64) -> Option<&mut Command> {
        self.command.as_mut().filter(|c| c.seq() == seq)
    }

    /// Takes the command for the reply that reports its end.
    pub(super) fn take_command(&mut self) -> Option<Command> {
        self.command.take()
    }

    pub(super) fn command_state(&self) -> CommandState {
        match &self.command {
            None => CommandState::Idle,
            Some(command) if command.is_done() => CommandState::Finished,
            Some(_) => CommandState::Running,
        }
    }

    pub(super) fn screen(&self) -> &Screen {
        &self.screen
    }

    pub(super) fn is_ready(&self) -> bool {
        self.ready
    }

    pub(super) fn exited(&self) -> Option<std::process::ExitStatus> {
        self.exited
    }

    /// The waiter saw the shell exit with `status`.
    pub(super) fn set_exited(&mut self, status: std::process::ExitStatus) {
        self.exited = Some(status);
    }

    pub(super) fn reader_done(&self) -> bool {
        self.reader_done
    }

    pub(super) fn levels(&self) -> &Levels {
        &self.levels
    }

    pub(super) fn levels_mut(&mut self) -> &mut Levels {
        &mut self.levels
    }

    /// A handle on the completion channel for the reader thread to poll.
    pub(super) fn channel_handle(&self) -> std::io::Result<std::os::fd::OwnedFd> {
        self.channel.handle()
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
        let notified = shared.changed();
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

/// A call waiting on the running command, for as long as it waits: the
/// command is watched, so the unwatched-time limit does not run. When the
/// wait ends in any way (reply, timeout, cancellation, or the call's future
/// dropped), unwatched time starts counting from that moment.
pub(super) struct Watch<'a> {
    shared: &'a Shared,
    seq: Option<u64>,
}

impl Watch<'_> {
    pub(super) fn begin(shared: &Shared) -> Watch<'_> {
        let seq = shared.lock().command_mut().map(|command| {
            command.begin_watch();
            command.seq()
        });
        Watch { shared, seq }
    }
}

impl Drop for Watch<'_> {
    fn drop(&mut self) {
        let Some(seq) = self.seq else { return };
        if let Some(command) = self.shared.lock().command_seq_mut(seq) {
            command.end_watch(Instant::now());
        }
        self.shared.notify();
    }
}

/// How a shell that ended with `status` ended.
pub(super) fn shell_exit(status: std::process::ExitStatus) -> ShellExit {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => ShellExit::Code(code),
        (None, Some(signal)) => ShellExit::Signal(signal),
        _ => ShellExit::Unknown,
    }
}

/// What `screen` has shown since the last command, but the `echo` of a
/// line we typed (which a marker of ours has just ended): committed, taken,
/// and the window discarded.
fn take_echoed(screen: &mut Screen, echo: &str) -> String {
    screen.commit_all();
    let before = screen.take_committed();
    screen.discard_window();
    without_echo(&before, echo)
}

/// What `screen` holds besides the `echo` of the line we typed: the text
/// others printed while it was typed. The shell echoes what is typed a
/// byte at a time, so another writer's text can land before the echo,
/// inside it or after it; the echo's characters are taken out in order
/// from where it starts (its first word, `\__sk_pre N`), with the newline
/// of its Enter. Without the echo in it, all of `screen` is kept.
fn without_echo(screen: &str, echo: &str) -> String {
    let first_word = echo.trim_start().split(';').next().unwrap_or_default();
    let Some(at) = screen.find(first_word) else { return screen.to_owned() };
    // The echo's leading blanks are on the screen just before its first word.
    let lead = echo.len() - echo.trim_start().len();
    let start = screen[..at].trim_end_matches(' ').len().max(at.saturating_sub(lead));
    let mut kept = screen[..start].to_owned();
    let mut echo_chars = echo.trim_start().chars().peekable();
    let mut enter = false;
    for c in screen[at..].chars() {
        match echo_chars.peek() {
            Some(&e) if e == c => {
                echo_chars.next();
            }
            // The echo is whole: its Enter's newline is the first one at
            // the start of a line, or right after it.
            None if !enter && c == '\n' && (kept.is_empty() || kept.ends_with('\n')) => {
                enter = true;
            }
            _ => kept.push(c),
        }
    }
    kept
}

#[cfg(test)]
mod tests {

    /// Another writer's lines before, inside and after the echo of the
    /// typed line are kept; the echo and its Enter are not.
    #[test]
    fn the_echo_is_taken_out_and_what_others_printed_is_kept() {
        let echo = " \\__sk_pre 7;\\builtin eval \"$__sk_c\"";
        let whole = |screen: &str| super::without_echo(screen, echo);
        assert_eq!(whole(&format!("{echo}\n")), "");
        assert_eq!(whole(&format!("tick-1\n{echo}\n")), "tick-1\n");
        assert_eq!(whole(&format!("{echo}\ntick-2\n")), "tick-2\n");
        assert_eq!(whole(&format!("{echo}tick-3\n\n")), "tick-3\n");
        let (head, tail) = echo.split_at(12);
        assert_eq!(whole(&format!("{head}tick-4\n{tail}\n")), "tick-4\n");
        assert_eq!(whole(&format!("a\n{head}b\n{tail}\nc\n")), "a\nb\nc\n");
        // No echo at all (a shell that does not echo): all of it is kept.
        assert_eq!(whole("tick-5\n"), "tick-5\n");
        assert_eq!(whole(""), "");
    }
    use std::os::fd::OwnedFd;
    use std::sync::Arc;

    use super::*;
    use crate::output::{CommandLog, OutputStore, StoreLimits};
    use crate::output::{SpillLimits, SpillStore};
    use crate::proc_shell;

    use super::super::command::CommandOutput;
    use super::super::levels::{REINSTALL_SEQ_BASE, Reinstall, ReinstallStart, ShellId};

    const NONCE: &str = "0123abcd";

    /// A shared state whose shell is this test process (so the kernel
    /// names it as the records' sender), past its first prompt, and the
    /// shell's end of the completion channel.
    fn ready_state() -> (State, OwnedFd) {
        let (channel, shell) = Channel::open().expect("channel");
        let me = std::process::id() as i32;
        let levels = Levels::new(me, proc_shell::fingerprint(me));
        let (secrets, gate) = (Arc::new(Secrets::none()), Arc::new(Gate::default()));
        let mut state = State::new(Screen::new(24, 80, NONCE), levels, channel, secrets, gate);
        end(&mut state, &shell, 0, 0, 1);
        assert!(state.is_ready());
        (state, shell)
    }

    /// The shell's record of command `seq` and then its end marker.
    fn end(state: &mut State, shell: &OwnedFd, seq: u64, status: i32, token: i32) {
        let record = format!("E;{seq};{status};;{token}");
        nix::unistd::write(shell, record.as_bytes()).expect("send a record");
        let marker = format!("\x1b]6973;{NONCE};E;{seq};{token}\x07");
        state.on_event(pty::Event::Output(marker.as_bytes()));
    }

    /// Starts command `seq`, logged in a store of its own, and feeds its
    /// start marker and `output`.
    fn run(state: &mut State, seq: u64, output: &str) -> Arc<CommandLog> {
        let dir = std::env::temp_dir().join(format!(
            "shellkeep-shared-{}-{seq}-{}",
            std::process::id(),
            output.len()
        ));
        let spill = SpillStore::new(dir, "", SpillLimits::default(), None);
        let store = OutputStore::new(Arc::clone(&spill), "test", StoreLimits::default());
        let log = store.begin("a command");
        let out = CommandOutput::new(1_000, Arc::clone(&log), Arc::new(Secrets::none()));
        let now = Instant::now();
        let command = Command::new(
            (seq, "a command".to_owned()),
            (None, None),
            (0, crate::bash_script::Typing::EDITOR),
            out,
            now,
        );
        state.begin(command, now);
        let start = format!("echo of our line\x1b]6973;{NONCE};S;{seq}\x07{output}");
        state.on_event(pty::Event::Output(start.as_bytes()));
        log
    }

    /// The command's end as the state, its log and its reply see it.
    fn ended(state: &mut State, log: &CommandLog) -> (Option<i32>, bool, Option<i32>, String) {
        let page = log.read(0, 100).expect("the log reads");
        let command = state.take_command().expect("a command");
        let code = command.finished().map(|(code, _)| code);
        assert_eq!(page.text, command.into_shown().text, "the log and the reply disagree");
        (code, page.running, page.exit_code, page.text)
    }

    #[test]
    fn a_command_ends_on_its_record_and_marker_with_all_its_text() {
        let (mut state, shell) = ready_state();
        let log = run(&mut state, 1, "hello\n");
        // A marker with no record, or with another token, is text.
        state.on_event(pty::Event::Output(format!("\x1b]6973;{NONCE};E;1;9\x07").as_bytes()));
        nix::unistd::write(&shell, b"E;1;5;;77").expect("send a record");
        state.on_event(pty::Event::Output(format!("\x1b]6973;{NONCE};E;1;78\x07").as_bytes()));
        assert_eq!(state.command_state(), CommandState::Running);
        state.on_event(pty::Event::Output(format!("\x1b]6973;{NONCE};E;1;77\x07").as_bytes()));
        assert_eq!(state.command_state(), CommandState::Finished);
        assert_eq!(ended(&mut state, &log), (Some(5), false, Some(5), "hello\n".to_owned()));
    }

    #[test]
    fn nested_shell_commands_end_through_the_same_finish() {
        let (mut state, shell) = ready_state();
        let me = std::process::id() as i32;
        let fingerprint = proc_shell::fingerprint(me).expect("fingerprint");
        // `bash`: the new shell's handshake ends it.
        let log = run(&mut state, 2, "started\n");
        let handshake = REINSTALL_SEQ_BASE + 1;
        let nested = ShellId { pid: me, fingerprint };
        let start = ReinstallStart { handshake, command_seq: 2, shell: nested, replaced: false };
        let reinstall = Reinstall::new(start, Instant::now());
        // As the watcher does before it types the reinstall line: what the
        // command printed is kept; the new prompt and our line are not.
        state.commit_lines(Instant::now());
        state.levels_mut().begin_reinstall(reinstall);
        state.on_event(pty::Event::Output(b"inner$ the line we typed"));
        end(&mut state, &shell, handshake, 0, 11);
        assert_eq!(ended(&mut state, &log), (Some(0), false, Some(0), "started\n".to_owned()));
        assert_eq!(state.levels_mut().take_events(), vec![Event::NestedShellStarted]);
        // `exit 4` in it: the outer shell's marker for command 2 ends it.
        let log = run(&mut state, 3, "bye\n");
        end(&mut state, &shell, 2, 4, 12);
        assert_eq!(ended(&mut state, &log), (Some(4), false, Some(4), "bye\n".to_owned()));
        assert_eq!(state.levels_mut().take_events(), vec![Event::NestedShellExited { status: 4 }]);
    }

    /// A record or a start marker while no command runs means something
    /// ran at the prompt: the next reply is told, with the number claimed
    /// and the sender when it is not the shell. While a command runs, or
    /// before the first prompt, neither is news.
    #[test]
    fn a_record_or_a_start_marker_at_the_prompt_is_tampering() {
        let (mut state, shell) = ready_state();
        assert_eq!(state.levels_mut().take_events(), vec![], "the first prompt is no news");
        let log = run(&mut state, 1, "hello\n");
        end(&mut state, &shell, 1, 0, 5);
        ended(&mut state, &log);
        assert_eq!(state.levels_mut().take_events(), vec![]);
        // The shell's prompt ran again, with no command: its record.
        end(&mut state, &shell, 1, 0, 6);
        let what = AtPrompt::EndRecord;
        let events = state.levels_mut().take_events();
        assert_eq!(events, vec![Event::RanAtPrompt { what, seq: 1, sender: None }]);
        // A start marker no call typed.
        let marker = format!("\x1b]6973;{NONCE};S;7\x07");
        state.on_event(pty::Event::Output(marker.as_bytes()));
        let what = AtPrompt::StartMarker;
        let events = state.levels_mut().take_events();
        assert_eq!(events, vec![Event::RanAtPrompt { what, seq: 7, sender: None }]);
        // A record queued at the prompt and read only as the next command
        // begins is still judged as sent at the prompt.
        nix::unistd::write(&shell, b"E;1;0;;8").expect("send a record");
        let log = run(&mut state, 2, "next\n");
        let what = AtPrompt::EndRecord;
        let events = state.levels_mut().take_events();
        assert_eq!(events, vec![Event::RanAtPrompt { what, seq: 1, sender: None }]);
        end(&mut state, &shell, 2, 3, 9);
        assert_eq!(ended(&mut state, &log).0, Some(3));
        assert_eq!(state.levels_mut().take_events(), vec![]);
        // A start marker of another number read while our line is on its
        // way (printed at the prompt, read after the command began): the
        // shell starts nothing before our line, so it is forged.
        let dir =
            std::env::temp_dir().join(format!("shellkeep-shared-typing-{}", std::process::id()));
        let spill = SpillStore::new(dir, "", SpillLimits::default(), None);
        let store = OutputStore::new(Arc::clone(&spill), "test", StoreLimits::default());
        let out = CommandOutput::new(1_000, store.begin("c"), Arc::new(Secrets::none()));
        let now = Instant::now();
        state.begin(
            Command::new(
                (3, "c".to_owned()),
                (None, None),
                (0, crate::bash_script::Typing::EDITOR),
                out,
                now,
            ),
            now,
        );
        let forged = format!("\x1b]6973;{NONCE};S;99\x07");
        state.on_event(pty::Event::Output(forged.as_bytes()));
        let what = AtPrompt::StartMarker;
        let events = state.levels_mut().take_events();
        assert_eq!(events, vec![Event::RanAtPrompt { what, seq: 99, sender: None }]);
        // Our own start marker then starts our command, told nothing more.
        let ours = format!("echo\x1b]6973;{NONCE};S;3\x07out\n");
        state.on_event(pty::Event::Output(ours.as_bytes()));
        assert!(state.command().is_some_and(Command::has_started));
        assert_eq!(state.levels_mut().take_events(), vec![]);
    }

    /// A command whose start marker never came did not start: when the
    /// shell exits, or is back reading its terminal, it ends as never
    /// started, and what the screen held (the echo of the line typed) goes
    /// to the idle output. Once its marker came, neither applies.
    #[test]
    fn a_command_without_its_start_marker_never_started() {
        for shell_exits in [true, false] {
            let (mut state, _shell) = ready_state();
            let log = run(&mut state, 1, "");
            state.take_command().expect("the command");
            // As if typed and not started: a fresh command, no marker.
            let out = CommandOutput::new(1_000, Arc::clone(&log), Arc::new(Secrets::none()));
            let now = Instant::now();
            let fresh = Command::new(
                (2, "a command".to_owned()),
                (None, None),
                (0, crate::bash_script::Typing::EDITOR),
                out,
                now,
            );
            state.begin(fresh, now);
            state.on_event(pty::Event::Output(b" \\__sexit"));
            if shell_exits {
                state.finish_with_shell(now);
            } else {
                assert!(state.never_started(2, now));
            }
            let ended = state.take_command().expect("a command");
            assert_eq!(ended.never_started(), Some(shell_exits));
            assert_eq!(ended.into_shown().text, "");
            assert_eq!(state.take_idle_output(), " \\__sexit");
            // A command past its start marker ends with the shell as usual,
            // and is never ended as not started.
            let log = run(&mut state, 3, "partial");
            assert!(!state.never_started(3, now));
            state.finish_with_shell(now);
            let ended = state.take_command().expect("a command");
            assert_eq!(ended.never_started(), None);
            assert_eq!(log.read(0, 10).expect("log").text, "partial");
        }
    }

    /// The start marker carries the shell's count of the lines it read:
    /// one more than at the last command is ours alone; more says lines
    /// ran at the prompt that no call typed, even with no record to tell.
    #[test]
    fn lines_read_between_two_commands_are_counted() {
        let (mut state, shell) = ready_state();
        let start = |state: &mut State, seq: u64, lines: u64| {
            let dir = std::env::temp_dir()
                .join(format!("shellkeep-shared-lines-{}-{seq}", std::process::id()));
            let spill = SpillStore::new(dir, "", SpillLimits::default(), None);
            let store = OutputStore::new(spill, "test", StoreLimits::default());
            let out = CommandOutput::new(1_000, store.begin("c"), Arc::new(Secrets::none()));
            let now = Instant::now();
            state.begin(
                Command::new(
                    (seq, "c".to_owned()),
                    (None, None),
                    (0, crate::bash_script::Typing::EDITOR),
                    out,
                    now,
                ),
                now,
            );
            let marker = format!("\x1b]6973;{NONCE};S;{seq};{lines}\x07");
            state.on_event(pty::Event::Output(marker.as_bytes()));
            end(state, &shell, seq, 0, seq as i32);
            state.take_command().expect("the command");
            state.levels_mut().take_events()
        };
        assert_eq!(start(&mut state, 1, 4), vec![], "the first sets where the count is");
        assert_eq!(start(&mut state, 2, 5), vec![]);
        let what = AtPrompt::Lines { count: 2 };
        assert_eq!(
            start(&mut state, 3, 8),
            vec![Event::RanAtPrompt { what, seq: 3, sender: None }]
        );
        assert_eq!(start(&mut state, 4, 9), vec![]);
        // A count that went back is another shell's: it starts over.
        assert_eq!(start(&mut state, 5, 2), vec![]);
        assert_eq!(start(&mut state, 6, 3), vec![]);
    }

    /// A nested shell that exits while no command runs is no tampering:
    /// its parent's record for the command that started it says it exited.
    #[test]
    fn a_nested_shell_exiting_at_the_prompt_is_no_tampering() {
        let (mut state, shell) = ready_state();
        let me = std::process::id() as i32;
        let fingerprint = proc_shell::fingerprint(me).expect("fingerprint");
        let log = run(&mut state, 2, "");
        let handshake = REINSTALL_SEQ_BASE + 1;
        let nested = ShellId { pid: me, fingerprint };
        let start = ReinstallStart { handshake, command_seq: 2, shell: nested, replaced: false };
        let reinstall = Reinstall::new(start, Instant::now());
        state.levels_mut().begin_reinstall(reinstall);
        end(&mut state, &shell, handshake, 0, 11);
        ended(&mut state, &log);
        assert_eq!(state.levels_mut().take_events(), vec![Event::NestedShellStarted]);
        end(&mut state, &shell, 2, 0, 12);
        assert_eq!(state.levels_mut().take_events(), vec![Event::NestedShellExited { status: 0 }]);
        // Its parent's prompt again, with no nested shell left: tampering.
        end(&mut state, &shell, 2, 0, 13);
        let what = AtPrompt::EndRecord;
        let events = state.levels_mut().take_events();
        assert_eq!(events, vec![Event::RanAtPrompt { what, seq: 2, sender: None }]);
    }

    #[test]
    fn a_prompt_without_an_end_waits_for_the_fallback_line_and_drops_its_echo() {
        let (mut state, shell) = ready_state();
        let log = run(&mut state, 1, "out\npartial");
        assert_eq!(state.fallback_due(), None, "no prompt yet");
        // The shell prints its prompt (`PS1`'s marker): nothing ended it.
        let prompt = format!("\x1b]6973;{NONCE};P;1\x07");
        state.on_event(pty::Event::Output(prompt.as_bytes()));
        assert_eq!(state.fallback_due(), Some(1));
        assert!(state.awaits_fallback());
        state.fallback_typed(1);
        assert_eq!(state.fallback_due(), None, "typed once");
        assert!(state.awaits_fallback());
        // The echo of the fallback line, then the shell's own record.
        state.on_event(pty::Event::Output(b" { \\__sk_fallback 1; } 2>/dev/null\r\n"));
        nix::unistd::write(&shell, b"E;1;130;f;5").expect("send a record");
        state.on_event(pty::Event::Output(format!("\x1b]6973;{NONCE};E;1;5\x07").as_bytes()));
        assert!(!state.awaits_fallback());
        assert_eq!(
            ended(&mut state, &log),
            (Some(130), false, Some(130), "out\npartial".to_owned())
        );
        assert!(state.levels_mut().take_events().contains(&Event::PromptNotRun));

        // A fallback line that ends nothing (its function removed): the
        // shell prompts again, and the command no longer waits for it.
        let _log = run(&mut state, 2, "two\n");
        let prompt = format!("\x1b]6973;{NONCE};P;2\x07");
        state.on_event(pty::Event::Output(prompt.as_bytes()));
        state.fallback_typed(2);
        state.on_event(pty::Event::Output(b" { \\__sk_fallback 2; } 2>/dev/null\r\n"));
        state.on_event(pty::Event::Output(prompt.as_bytes()));
        assert!(!state.awaits_fallback());
        assert_eq!(state.fallback_due(), None);
        assert_eq!(state.command_state(), CommandState::Running);
        // A prompt marker for another command, or a command that ended,
        // means nothing.
        let stale = format!("\x1b]6973;{NONCE};P;1\x07");
        state.on_event(pty::Event::Output(stale.as_bytes()));
        assert_eq!(state.fallback_due(), None);
    }

    #[test]
    fn a_command_ends_with_its_shell() {
        let (mut state, _shell) = ready_state();
        let log = run(&mut state, 1, "partial line");
        state.finish_with_shell(Instant::now());
        let end = ended(&mut state, &log);
        assert_eq!(end, (Some(-1), false, Some(-1), "partial line".to_owned()));
    }
}
