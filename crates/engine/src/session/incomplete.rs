//! Incomplete commands, handled as at a prompt: a command that `bash -n`
//! finds incomplete (an open quote, `if` without `fi`, a here-document
//! without its end) is held, not typed, as the shell would wait at its `>`
//! prompt; `is_input` lines are added until it is complete, and then it
//! runs; C-c discards it and C-d runs it as it is.
//!
//! It types nothing into the shell and waits for nothing but the `bash -n`
//! check; it runs inside a call that holds the session's `tokio` mutex.
//! Bounded: at most [`INCOMPLETE_CAP`] bytes are gathered.

use tokio::time::Instant;

use crate::integration;
use crate::keys::{self, Input};

use super::driver::Shell;
use super::state::RunningState;
use super::{Note, Reply, Request, SessionConfig, SessionError, Status, WaitEnded};

/// An incomplete command: what the shell would hold at its `>` prompt.
/// Bounded: past [`INCOMPLETE_CAP`] bytes it is run as it is.
pub(super) struct Incomplete {
    text: String,
    since: Instant,
    replies: u32,
}

/// The most text an incomplete command may gather from `is_input` lines
/// before it is run as it is (bash then reports what is missing).
const INCOMPLETE_CAP: usize = 4 << 20;

/// What to do with a call while a command may be incomplete.
pub(super) enum Step {
    /// Reply with this; nothing runs.
    Reply(Box<Reply>),
    /// Run this text (the completed command) as a new command.
    Run(String),
    /// Nothing to do with incomplete commands: carry on.
    Pass,
}

impl Shell {
    /// Incomplete input behaves as at a prompt: a command that is not
    /// complete is held (the shell would wait at its `>` prompt); lines sent
    /// with `is_input` are added until it is complete, then it runs; C-c
    /// discards it, C-d runs it as it is (bash then reports the error).
    pub(super) async fn incomplete_step(
        &mut self,
        config: &SessionConfig,
        request: &Request,
    ) -> Result<Step, SessionError> {
        let command = request.command.as_str();
        let is_key = keys::is_key(command);
        let Some(mut held) = self.incomplete.take() else {
            let fresh = !request.is_input && !is_key && !command.trim().is_empty();
            if fresh
                && self.running_state() != RunningState::Unfinished
                && integration::is_incomplete(&config.shell, command).await
            {
                let previous = (self.running_state() == RunningState::Finished)
                    .then(|| Box::new(self.finished_reply(Vec::new())));
                let held =
                    Incomplete { text: command.to_owned(), since: Instant::now(), replies: 0 };
                let mut reply = self.incomplete_reply(&held, Vec::new());
                reply.previous = previous;
                self.incomplete = Some(held);
                return Ok(Step::Reply(Box::new(reply)));
            }
            return Ok(Step::Pass);
        };
        if command.trim().is_empty() && !request.is_input {
            held.replies += 1;
            let reply = self.incomplete_reply(&held, Vec::new());
            self.incomplete = Some(held);
            return Ok(Step::Reply(Box::new(reply)));
        }
        if is_key {
            return match keys::parse(command).map_err(SessionError::Invalid)? {
                Input::Key { name, .. } if name == "C-c" => {
                    let mut reply = self.idle_reply(&held.text, vec![Note::KeySent(name)]);
                    reply.exit_code = Some(130);
                    reply.duration = held.since.elapsed();
                    Ok(Step::Reply(Box::new(reply)))
                }
                Input::Key { name, .. } if name == "C-d" => Ok(Step::Run(held.text)),
                _ => {
                    self.incomplete = Some(held);
                    Err(SessionError::Invalid(
                        "The shell is waiting for the rest of an incomplete command, so keys \
                         other than C-c (discard it) and C-d (end of input) do nothing. Send \
                         the remaining lines with is_input=true."
                            .into(),
                    ))
                }
            };
        }
        if !request.is_input {
            held.replies += 1;
            let notes = vec![Note::NotExecuted { command: command.to_owned() }];
            let reply = self.incomplete_reply(&held, notes);
            self.incomplete = Some(held);
            return Ok(Step::Reply(Box::new(reply)));
        }
        held.text.push('\n');
        held.text.push_str(command);
        if held.text.len() <= INCOMPLETE_CAP
            && integration::is_incomplete(&config.shell, &held.text).await
        {
            held.replies += 1;
            let reply = self.incomplete_reply(&held, vec![Note::InputSent]);
            self.incomplete = Some(held);
            return Ok(Step::Reply(Box::new(reply)));
        }
        Ok(Step::Run(held.text))
    }

    /// The reply while an incomplete command is held: still "running",
    /// waiting for input, nothing printed (no `>` prompts).
    fn incomplete_reply(&self, held: &Incomplete, mut notes: Vec<Note>) -> Reply {
        notes.push(Note::Incomplete);
        notes.push(Note::WaitingForInput);
        let mut reply = self.idle_reply(&held.text, notes);
        reply.status = Status::Running(WaitEnded::NotWaited);
        reply.exit_code = None;
        reply.duration = held.since.elapsed();
        reply.continued = held.replies > 0;
        reply
    }
}
