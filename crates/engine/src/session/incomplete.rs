//! Incomplete commands, handled as at a prompt: a command that `bash -n`
//! finds incomplete (an open quote, `if` without `fi`, a here-document
//! without its end) is held, not typed, as the shell would wait at its `>`
//! prompt; input lines are added until it is complete, and then it runs;
//! C-c discards it and C-d runs it as it is.
//!
//! A small state machine: [`step`] takes what is held (if anything), the
//! call and what the shell is doing, and says what to do ([`Step`]). It
//! types nothing into the shell and waits for nothing but the `bash -n`
//! check (`crate::syntax`); it knows nothing of the shell driver, and
//! builds no reply: it says what the reply reports ([`HeldCommand`]).
//! Bounded: at most [`INCOMPLETE_CAP`] bytes are gathered.

use std::path::Path;

use tokio::time::Instant;

use crate::keys::Input;
use crate::syntax;

use super::call::{Call, InputReport, NotRun, Outcome, SessionError};
use super::shared::CommandState;
use super::wait::HeldCommand;

/// An incomplete command: what the shell would hold at its `>` prompt.
/// Bounded: past [`INCOMPLETE_CAP`] bytes it is run as it is.
pub(super) struct Incomplete {
    text: String,
    since: Instant,
    replies: u32,
}

/// The most text an incomplete command may gather from input lines before
/// it is run as it is (bash then reports what is missing).
const INCOMPLETE_CAP: usize = 4 << 20;

/// What to do with a call while a command may be incomplete.
pub(super) enum Step {
    /// Reply about the held command, with what the call sent it (if
    /// anything); nothing runs.
    Reply(HeldCommand, Option<InputReport>),
    /// A new command is held: reply about it, after reporting the end of
    /// the command that finished before it.
    Held(HeldCommand),
    /// Run this text (the completed command) as a new command.
    Run(String),
    /// Nothing to do with incomplete commands: carry on.
    Pass,
}

impl Incomplete {
    /// The held command as a reply reports it, with `outcome`.
    fn reported(&self, outcome: Outcome) -> HeldCommand {
        HeldCommand {
            text: self.text.clone(),
            since: self.since,
            continued: self.replies > 0,
            outcome,
        }
    }
}

/// Incomplete input behaves as at a prompt: a command that is not
/// complete is held (the shell would wait at its `>` prompt); input lines
/// are added until it is complete, then it runs; C-c discards it, C-d runs
/// it as it is (bash then reports the error). `held` is what the session
/// holds, before and after; `shell` is the program that checks the syntax.
pub(super) async fn step(
    held: &mut Option<Incomplete>,
    shell: &Path,
    call: &Call,
    state: CommandState,
) -> Result<Step, SessionError> {
    let Some(mut text) = held.take() else {
        if let Call::Run { command } = call
            && !command.trim().is_empty()
            && state != CommandState::Running
            && syntax::is_incomplete(shell, command).await
        {
            let new = Incomplete { text: command.clone(), since: Instant::now(), replies: 0 };
            let reply = new.reported(Outcome::Incomplete);
            *held = Some(new);
            return Ok(match state {
                CommandState::Finished => Step::Held(reply),
                _ => Step::Reply(reply, None),
            });
        }
        return Ok(Step::Pass);
    };
    let line = match call {
        Call::Input(input) if input.single_key() == Some("C-c") => {
            // Discarded, as the shell's `>` prompt would: the held command
            // reads as ended by the interrupt, never as continued.
            let reply = HeldCommand {
                continued: false,
                ..text.reported(Outcome::Completed { exit_code: 130 })
            };
            let sent = InputReport::Sent { key: input.describe(), delivered: 1, total: 1 };
            return Ok(Step::Reply(reply, Some(sent)));
        }
        Call::Input(input) if input.single_key() == Some("C-d") => return Ok(Step::Run(text.text)),
        Call::Input(Input::Keys(_)) => {
            *held = Some(text);
            return Err(SessionError::KeyWhileIncomplete);
        }
        Call::Input(Input::Text(line)) => line,
        Call::Run { command } if !command.trim().is_empty() => {
            text.replies += 1;
            let why = NotRun::Incomplete;
            let reply = text.reported(Outcome::NotExecuted { command: command.clone(), why });
            *held = Some(text);
            return Ok(Step::Reply(reply, None));
        }
        // A poll (a reset never reaches a held command: it starts a new shell).
        Call::Run { .. } | Call::Poll | Call::Reset { .. } => {
            text.replies += 1;
            let reply = text.reported(Outcome::Incomplete);
            *held = Some(text);
            return Ok(Step::Reply(reply, None));
        }
    };
    text.text.push('\n');
    text.text.push_str(line);
    if text.text.len() <= INCOMPLETE_CAP && syntax::is_incomplete(shell, &text.text).await {
        text.replies += 1;
        // The line and its Enter, as the shell's `>` prompt would take them.
        let total = line.len() + 1;
        let input = InputReport::Sent { key: None, delivered: total, total };
        let reply = text.reported(Outcome::Incomplete);
        *held = Some(text);
        return Ok(Step::Reply(reply, Some(input)));
    }
    Ok(Step::Run(text.text))
}
