//! A call waiting on the running command, and the replies. The wait ends
//! when the command ends, the shell exits, the program waits for input, the
//! call's wait runs out (`timing.rs` says when) or the call is cancelled;
//! while it waits, the command is watched and a progress hook is told about
//! once a second. Each reply kind has one constructor here (idle, refused,
//! held, finished, partial, cancelled), taking what the call adds
//! ([`CallParts`]).
//!
//! It does not start, type or signal anything, and knows nothing of the
//! shell driver, which calls it with the shared state and a [`ShellView`].
//! Invariant: a reply is built once, complete; a cancelled call takes
//! nothing from the session.

use std::path::PathBuf;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::output::{self, Shown};

use super::call::{
    Event, InputReport, NotRun, Outcome, PROGRESS_INTERVAL, Progress, ProgressHook, Reader, Reply,
    SessionConfig, WaitEnded,
};
use super::command::{Command, KillState};
use super::shared::{Shared, State, Watch, wait_for};
use super::timing::{self, ScreenSeen, WaitBudget};

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

/// What ends a call's wait early: its token is cancelled when the client
/// gives up on the call or when the session is being closed; the client's
/// own token tells the two apart.
pub(super) struct CallCancel {
    /// Ends the wait.
    token: CancellationToken,
    /// The client's cancellation.
    client: CancellationToken,
}

impl CallCancel {
    /// A call's cancellation: `token` ends its wait, `client` is the
    /// client's.
    pub(super) fn new(token: CancellationToken, client: CancellationToken) -> CallCancel {
        CallCancel { token, client }
    }

    /// The token that ends the wait.
    pub(super) fn token(&self) -> &CancellationToken {
        &self.token
    }

    /// Why a wait that was cut short ended: the client cancelled the call,
    /// or else the session is being closed.
    pub(super) fn why(&self) -> WaitEnded {
        if self.client.is_cancelled() { WaitEnded::Cancelled } else { WaitEnded::SessionClosing }
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
    /// The program is blocked reading the terminal with its output quiet.
    InputWait,
    /// The shell reported that the command never ran.
    Damaged,
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

/// What one call's wait keeps from one wake-up to the next.
struct CallWait {
    /// When the call began waiting.
    start: Instant,
    /// The call's limits on its wait.
    budget: WaitBudget,
    /// What this call has seen of a full-screen program on the alternate
    /// screen (it changes only with output, which wakes the wait).
    screen: Option<ScreenSeen>,
}

/// The loop of [`wait`]: after each change, each deadline and each
/// progress report, [`next_turn`] says whether the wait is over.
async fn wait_until_turn(
    shared: &Shared,
    config: &SessionConfig,
    timeout: Option<Duration>,
    cancel: &CancellationToken,
    progress: Option<&ProgressHook>,
) -> Waited {
    let start = Instant::now();
    let budget = WaitBudget::new(timeout, config.no_output_return, config.max_wait);
    let mut call = CallWait { start, budget, screen: None };
    let _watch = Watch::begin(shared);
    let mut reports = 0u64;
    let mut next_report = start + PROGRESS_INTERVAL;
    loop {
        let notified = shared.changed();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let deadline = match next_turn(&shared.lock(), &mut call, Instant::now()) {
            Ok(deadline) => deadline,
            Err(waited) => return waited,
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
                    hook.report(Progress { count: reports, elapsed: start.elapsed(), line });
                }
            }
        }
    }
}

/// Whether the call's wait is over as `state` stands `now` (`Err`: how it
/// ended), else when to look again, the earliest of the timing rules'
/// turns (`timing.rs`): the call's wait, an unsure read of the terminal,
/// a full-screen program at rest.
fn next_turn(state: &State, call: &mut CallWait, now: Instant) -> Result<Instant, Waited> {
    let Some(command) = state.command() else { return Err(Waited::Finished) };
    if command.is_done() {
        return Err(Waited::Finished);
    }
    if state.exited().is_some() {
        return Err(Waited::ShellExited);
    }
    if command.is_damaged() {
        return Err(Waited::Damaged);
    }
    // A shell at its prompt while the integration is being installed in
    // it, or while it is to send its command's end itself (the fallback),
    // is not a program waiting for input.
    if command.waits_for_input() && state.levels().reinstall().is_none() && !state.awaits_fallback()
    {
        return Err(Waited::InputWait);
    }
    let last_output_at = command.last_output_at();
    call.screen = state.screen().is_alternate().then(|| {
        let mut seen = call.screen.unwrap_or_else(|| ScreenSeen::new(now, last_output_at));
        seen.observe(last_output_at);
        seen
    });
    let unsure = timing::unsure_applies(
        command.reads_terminal_unsure(),
        !state.screen().current_line().trim().is_empty(),
        command.idle_at_terminal()
            && (command.input_this_call() || (command.reads_keys() && command.in_first_call())),
    );
    let early = [
        timing::unsure_turn(unsure, call.start, command.quiet_from(), now),
        timing::screen_turn(call.budget, call.screen, call.start, now),
    ];
    let mut deadline =
        timing::wait_turn(call.budget, call.start, last_output_at, now).map_err(Waited::Stopped)?;
    for turn in early {
        if let Some(at) = turn.map_err(Waited::Stopped)? {
            deadline = at.min(deadline);
        }
    }
    Ok(deadline)
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

/// What a call brings to its reply besides the command's own state: the
/// events so far, the input it sent, the end of a previous command it
/// reports first, and what background jobs printed before its command
/// started. Every reply constructor takes it, so a reply is built once.
#[derive(Debug, Default)]
pub(super) struct CallParts {
    /// What happened to the session so far, in order.
    pub(super) events: Vec<Event>,
    /// What became of the input the call sent, if it sent any.
    pub(super) input: Option<InputReport>,
    /// The end of a previous command, reported before this one.
    pub(super) previous: Option<Box<Reply>>,
    /// Text printed while no command was running, before this call's
    /// command started.
    pub(super) idle_output: Option<String>,
}

impl CallParts {
    /// A call's parts with `events` and nothing else yet.
    pub(super) fn new(events: Vec<Event>) -> CallParts {
        CallParts { events, ..CallParts::default() }
    }
}

/// A reply with no command output, about `command` (empty: none).
fn blank(view: &ShellView, command: &str, outcome: Outcome, parts: CallParts) -> Reply {
    let CallParts { events, input, previous, idle_output } = parts;
    Reply {
        command: command.to_owned(),
        outcome,
        output: Shown::empty(),
        screen: false,
        input,
        idle_output,
        events,
        cwd: view.cwd.clone(),
        python: view.python.clone(),
        duration: Duration::ZERO,
        continued: false,
        previous,
        number: None,
        first_line: 0,
        look_again_within: None,
        unfinished_line: None,
    }
}

/// A reply with no command running (reset alone, or a key with nothing
/// to receive it).
pub(super) fn idle_reply(view: &ShellView, parts: CallParts) -> Reply {
    blank(view, "", Outcome::Idle, parts)
}

/// The reply to a new `command` that was not run, for `why`, while no
/// command of ours runs (a person holds the session, or another program
/// has the terminal).
pub(super) fn refused_reply(
    view: &ShellView,
    command: &str,
    why: NotRun,
    parts: CallParts,
) -> Reply {
    let outcome = Outcome::NotExecuted { command: command.to_owned(), why };
    blank(view, command, outcome, parts)
}

/// A command held because `bash -n` finds it incomplete, as a reply
/// reports it.
pub(super) struct HeldCommand {
    /// The text gathered so far.
    pub(super) text: String,
    /// When it was first sent.
    pub(super) since: Instant,
    /// Whether earlier replies already reported it.
    pub(super) continued: bool,
    /// What the call did with it.
    pub(super) outcome: Outcome,
}

/// The reply about a held incomplete command: nothing printed (no `>`
/// prompts).
pub(super) fn held_reply(view: &ShellView, held: HeldCommand, parts: CallParts) -> Reply {
    let HeldCommand { text, since, continued, outcome } = held;
    Reply { duration: since.elapsed(), continued, ..blank(view, &text, outcome, parts) }
}

/// The reply for a finished command, taken from the session (`None`: an
/// idle reply).
pub(super) fn finished_reply(
    command: Option<Command>,
    view: &ShellView,
    parts: CallParts,
) -> Reply {
    let Some(command) = command else { return idle_reply(view, parts) };
    let (exit_code, finished_at) = command.finished().unwrap_or((-1, Instant::now()));
    let outcome = match (command.never_started(), command.kill()) {
        (Some(shell_exited), _) => Outcome::NeverStarted { shell_exited },
        (None, KillState::Killed { limit, mode }) => Outcome::Killed { limit, mode, exit_code },
        (None, _) => Outcome::Completed { exit_code },
    };
    let base = blank(view, command.text(), outcome, parts);
    Reply {
        duration: finished_at - command.started_at(),
        continued: command.replies() > 0,
        number: Some(command.output().number()),
        first_line: command.first_unreplied_line(),
        output: command.into_shown(),
        ..base
    }
}

/// How a running command stands: blocked reading the terminal (and who
/// reads it), or not.
fn reading(command: &Command) -> Option<Reader> {
    match (command.waits_for_input(), command.shell_reading()) {
        (false, _) => None,
        (true, false) => Some(Reader::Program),
        (true, true) => Some(Reader::Shell),
    }
}

/// What keeps a new command out while this one runs.
pub(super) fn blocking(command: &Command) -> NotRun {
    if command.is_damaged() {
        NotRun::IntegrationDamaged
    } else {
        NotRun::CommandRunning { reading: reading(command) }
    }
}

/// What a call that stopped waiting (`waited`) says about the running
/// command: damaged, waiting for input (and who reads), or running. While
/// the shell is to send the command's end itself (`awaits_fallback`), the
/// shell reading at its prompt is not a wait for input.
pub(super) fn stopped(command: &Command, waited: &Waited, awaits_fallback: bool) -> Outcome {
    if command.is_damaged() || matches!(waited, Waited::Damaged) {
        return Outcome::IntegrationDamaged;
    }
    let reading = reading(command).filter(|_| !awaits_fallback);
    match (waited, reading) {
        (_, Some(reader)) => Outcome::WaitingForInput { shell_reading: reader == Reader::Shell },
        (Waited::Stopped(why), None) => Outcome::Running { why: *why },
        (_, None) => Outcome::WaitingForInput { shell_reading: command.shell_reading() },
    }
}

/// The reply for a command that is still running, which reports
/// `outcome`: what it printed since the last reply, and the line it is on
/// now (with no command: an idle reply).
pub(super) fn partial_reply(
    state: &mut State,
    view: &ShellView,
    config: &SessionConfig,
    outcome: Outcome,
    parts: CallParts,
) -> Reply {
    state.commit_lines(Instant::now());
    let current_line = state.screen().current_line();
    let alternate = state.screen().alternate_contents();
    let Some(command) = state.command_mut() else {
        return idle_reply(view, parts);
    };
    let look_again_within = command.unwatched_limit();
    let out = command.output_mut();
    let unfinished_line = (alternate.is_none() && !current_line.trim().is_empty())
        .then(|| out.progress_line(current_line.clone()));
    let (mut output, first_line, continued) = out.take_part();
    let screen = alternate.is_some();
    match alternate {
        Some(screen) => (output.text, output.masked) = out.show_screen(screen),
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
            output.masked += line.masked;
        }
    }
    let number = Some(out.number());
    Reply {
        output,
        screen,
        duration: command.started_at().elapsed(),
        continued,
        number,
        first_line,
        look_again_within,
        unfinished_line,
        ..blank(view, command.text(), outcome, parts)
    }
}

/// The reply to a cancelled call: it takes nothing from the session, so
/// the next call reports everything. `why` says who ended the wait: the
/// client (whose answer nobody reads) or the session being closed.
pub(super) fn cancelled_reply(
    state: &State,
    view: &ShellView,
    why: WaitEnded,
    parts: CallParts,
) -> Reply {
    let outcome = Outcome::Running { why };
    match state.command() {
        Some(command) => Reply {
            duration: command.started_at().elapsed(),
            ..blank(view, command.text(), outcome, parts)
        },
        None => blank(view, "", outcome, parts),
    }
}
