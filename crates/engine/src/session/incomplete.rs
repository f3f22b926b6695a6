//! Incomplete commands, handled as at a prompt: a command that `bash -n`
//! finds incomplete (an open quote, `if` without `fi`, a here-document
//! without its end) is held, not typed, as the shell would wait at its `>`
//! prompt; input lines are added until it is complete, and then it runs;
//! C-c discards it and C-d runs it as it is.
//!
//! A small state machine: [`step`] takes what is held (if anything), the
//! call and what the shell is doing, and says what to do ([`Step`]). It
//! types nothing into the shell and waits for nothing but the `bash -n`
//! check (`crate::syntax`); it knows nothing of the shell driver.
//! Bounded: at most [`INCOMPLETE_CAP`] bytes are gathered.

use std::path::Path;

use tokio::time::Instant;

use crate::keys::{self, Input};
use crate::syntax;

use super::call::{Note, Reply, Request, SessionError, Status, WaitEnded};
use super::shared::CommandState;
use super::wait::{ShellView, idle_reply};

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
    /// Reply with this; nothing runs.
    Reply(Box<Reply>),
    /// A new command is held: reply with this, after reporting the end of
    /// the command that finished before it.
    Held(Box<Reply>),
    /// Run this text (the completed command) as a new command.
    Run(String),
    /// Nothing to do with incomplete commands: carry on.
    Pass,
}

/// Incomplete input behaves as at a prompt: a command that is not
/// complete is held (the shell would wait at its `>` prompt); input lines
/// are added until it is complete, then it runs; C-c discards it, C-d runs
/// it as it is (bash then reports the error). `held` is what the session
/// holds, before and after; `shell` is the program that checks the syntax.
pub(super) async fn step(
    held: &mut Option<Incomplete>,
    shell: &Path,
    request: &Request,
    state: CommandState,
    view: &ShellView,
) -> Result<Step, SessionError> {
    let command = request.command.as_str();
    let is_key = keys::is_key(command);
    let Some(mut text) = held.take() else {
        let fresh = !request.is_input && !is_key && !command.trim().is_empty();
        if fresh && state != CommandState::Running && syntax::is_incomplete(shell, command).await {
            let new = Incomplete { text: command.to_owned(), since: Instant::now(), replies: 0 };
            let reply = incomplete_reply(&new, view, Vec::new());
            *held = Some(new);
            return Ok(match state {
                CommandState::Finished => Step::Held(Box::new(reply)),
                _ => Step::Reply(Box::new(reply)),
            });
        }
        return Ok(Step::Pass);
    };
    if command.trim().is_empty() && !request.is_input {
        text.replies += 1;
        let reply = incomplete_reply(&text, view, Vec::new());
        *held = Some(text);
        return Ok(Step::Reply(Box::new(reply)));
    }
    if is_key {
        return match keys::parse(command).map_err(SessionError::Invalid)? {
            Input::Key { name, .. } if name == "C-c" => {
                let mut reply = idle_reply(view, &text.text, vec![Note::KeySent(name)]);
                reply.exit_code = Some(130);
                reply.duration = text.since.elapsed();
                Ok(Step::Reply(Box::new(reply)))
            }
            Input::Key { name, .. } if name == "C-d" => Ok(Step::Run(text.text)),
            _ => {
                *held = Some(text);
                Err(SessionError::KeyWhileIncomplete)
            }
        };
    }
    if !request.is_input {
        text.replies += 1;
        let notes = vec![Note::NotExecuted { command: command.to_owned() }];
        let reply = incomplete_reply(&text, view, notes);
        *held = Some(text);
        return Ok(Step::Reply(Box::new(reply)));
    }
    text.text.push('\n');
    text.text.push_str(command);
    if text.text.len() <= INCOMPLETE_CAP && syntax::is_incomplete(shell, &text.text).await {
        text.replies += 1;
        let reply = incomplete_reply(&text, view, vec![Note::InputSent]);
        *held = Some(text);
        return Ok(Step::Reply(Box::new(reply)));
    }
    Ok(Step::Run(text.text))
}

/// The reply while an incomplete command is held: still "running",
/// waiting for input, nothing printed (no `>` prompts).
fn incomplete_reply(held: &Incomplete, view: &ShellView, mut notes: Vec<Note>) -> Reply {
    notes.push(Note::Incomplete);
    notes.push(Note::WaitingForInput);
    let mut reply = idle_reply(view, &held.text, notes);
    reply.status = Status::Running(WaitEnded::NotWaited);
    reply.exit_code = None;
    reply.duration = held.since.elapsed();
    reply.continued = held.replies > 0;
    reply
}
