//! Building a call's lines: what its start line says ([`Start`], from what
//! the tool knows before it runs anything), how its end line is drawn from
//! the engine's reply or the `run` outcome, and the end line that is
//! written once, by an `end_*` method or on drop ([`AuditCall`]).
//!
//! It opens no file and reads nothing back. It holds that a line is
//! bounded: the command is masked and cut to [`COMMAND_BOUND`] characters,
//! and text sent with `is_input` is recorded by its size only.

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};
use shellkeep_engine::Decision;
use shellkeep_engine::Input;
use shellkeep_engine::JobEnded;
use shellkeep_engine::{Activity, Call, NotRun, Outcome, Reply, SessionError, WaitEnded};
use shellkeep_engine::{RunOutcome, RunStatus};

use super::{AuditLog, COMMAND_BOUND, Line, rfc3339};

/// The client that made the call, from its `initialize` request.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct Client {
    /// The client's name.
    pub(super) name: String,
    /// The client's version.
    pub(super) version: String,
}

impl Client {
    /// The client `info` names, each part cut to 100 characters.
    pub(crate) fn new(info: &rmcp::model::Implementation) -> Client {
        Client { name: cut(&info.name, 100).0, version: cut(&info.version, 100).0 }
    }
}

/// The limits a command runs under, in seconds.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub(super) struct LimitsSec {
    pub exec_sec: f64,
    pub no_output_sec: f64,
}

/// What a call's start line says, from what the tool knows before it runs
/// anything.
#[derive(Debug, Clone, Default)]
pub(crate) struct Start {
    pub(super) tool: &'static str,
    /// `command`, `background`, `reset`, `input`, `key` or `poll` for
    /// `terminal`; the tool's name otherwise.
    pub(super) call: &'static str,
    /// The HTTP principal that made the call (`None`: the local client).
    pub(super) principal: Option<String>,
    /// The session, as `PRINCIPAL/NAME` for a principal's (the name a
    /// person's view gives it), so that two principals' sessions of one
    /// name stay apart in the log.
    pub(super) session: Option<String>,
    pub(super) command: Option<String>,
    pub(super) key: Option<String>,
    pub(super) input_bytes: Option<usize>,
    pub(super) category: Option<String>,
    pub(super) limits: Option<LimitsSec>,
}

impl Start {
    /// A `terminal` call on `session`: `call`, under `decision` (none for a
    /// background job, which has no limit).
    pub(crate) fn terminal(session: &str, call: &Call, decision: Option<&Decision>) -> Start {
        let (kind, command, key, input_bytes) = match call {
            Call::Run { command } if decision.is_none() => {
                ("background", Some(command), None, None)
            }
            Call::Run { command } => ("command", Some(command), None, None),
            Call::Reset { then } => ("reset", then.as_ref(), None, None),
            Call::Input(Input::Text(text)) => ("input", None, None, Some(text.len())),
            // Names only: text in a list is recorded by its size.
            Call::Input(keys @ Input::Keys(_)) => {
                let text = Some(keys.text_bytes()).filter(|&bytes| bytes > 0);
                ("key", None, keys.describe(), text)
            }
            Call::Poll => ("poll", None, None, None),
        };
        let about_command = command.is_some();
        Start {
            tool: "terminal",
            call: kind,
            session: Some(session.to_owned()),
            command: command.cloned(),
            key,
            input_bytes,
            ..Start::decided(decision.filter(|_| about_command))
        }
    }

    /// A `run` call of `command` under `decision`.
    pub(crate) fn run(command: &str, decision: &Decision) -> Start {
        Start {
            tool: "run",
            call: "run",
            command: Some(command.to_owned()),
            ..Start::decided(Some(decision))
        }
    }

    /// A `session_close` call on `session`.
    pub(crate) fn session_close(session: &str) -> Start {
        Start {
            tool: "session_close",
            call: "session_close",
            session: Some(session.to_owned()),
            ..Start::default()
        }
    }

    /// The same call made by `principal` (`None`: the local client): its
    /// session named `PRINCIPAL/NAME`, and the principal on its lines.
    pub(crate) fn by(mut self, principal: Option<&str>) -> Start {
        if let Some(principal) = principal {
            self.session = self.session.map(|session| format!("{principal}/{session}"));
            self.principal = Some(principal.to_owned());
        }
        self
    }

    fn decided(decision: Option<&Decision>) -> Start {
        Start {
            category: decision.map(|d| d.category.clone().unwrap_or_else(|| "explicit".to_owned())),
            limits: decision.map(|d| LimitsSec {
                exec_sec: d.limits.exec.as_secs_f64(),
                no_output_sec: d.limits.no_output.as_secs_f64(),
            }),
            ..Start::default()
        }
    }
}

/// What a call's end line says.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct End {
    pub(super) status: &'static str,
    pub(super) exit_code: Option<i32>,
    pub(super) reason: Option<&'static str>,
    pub(super) detail: Option<String>,
    pub(super) termination_mode: Option<&'static str>,
    /// How long the command ran (so far, if it still runs); else the call.
    pub(super) duration: Option<Duration>,
    pub(super) output_bytes: Option<u64>,
    /// The command the reply is about, when the call named none itself
    /// (input, a key, a poll) or a close stopped one.
    pub(super) command: Option<String>,
    /// The command's number in its session, to match a later poll's end
    /// with the call that started it.
    pub(super) command_number: Option<u64>,
}

/// A call that wrote its start line: its end line is written once, by an
/// `end_*` method or, if the call's task goes away first, on drop.
pub(crate) struct AuditCall {
    log: Option<Arc<AuditLog>>,
    id: String,
    start: Start,
    started: Instant,
    ended: bool,
}

impl AuditCall {
    /// A call nothing is written for: the server has no audit log.
    pub(crate) fn none() -> AuditCall {
        AuditCall {
            log: None,
            id: String::new(),
            start: Start::default(),
            started: Instant::now(),
            ended: true,
        }
    }

    /// Ends a `terminal` call with what the engine replied; `output_bytes`:
    /// what the command printed so far.
    pub(crate) fn end_terminal(
        mut self,
        executed: &Result<Reply, SessionError>,
        output_bytes: Option<u64>,
    ) {
        let end = terminal_end(&self.start, executed, output_bytes);
        self.finish(end);
    }

    /// Ends a `run` call with its outcome; `output_bytes`: both streams.
    pub(crate) fn end_run(mut self, outcome: &RunOutcome, output_bytes: u64) {
        self.finish(run_end(outcome, output_bytes));
    }

    /// Ends a `session_close` call: the session was closed (or `default`
    /// reset) with its last words, or the call was refused with `error`.
    pub(crate) fn end_session_close(
        mut self,
        closed: Result<(&Activity, bool), &str>,
        output_bytes: u64,
    ) {
        self.finish(close_end(closed, output_bytes));
    }

    fn finish(&mut self, mut end: End) {
        self.ended = true;
        let Some(log) = &self.log else { return };
        end.duration = end.duration.or(Some(self.started.elapsed()));
        let command =
            end.command.as_deref().map(|c| (log.mask)(c)).or_else(|| self.start.command.clone());
        let (command, command_chars) = cut_command(command.as_deref());
        let line = Line {
            time: rfc3339(SystemTime::now()),
            event: "end",
            id: &self.id,
            principal: self.start.principal.as_deref(),
            tool: self.start.tool,
            call: self.start.call,
            session: self.start.session.as_deref(),
            command,
            command_chars,
            key: self.start.key.as_deref(),
            status: Some(end.status),
            exit_code: end.exit_code,
            reason: end.reason,
            detail: end.detail.as_deref().map(|d| cut(&(log.mask)(d), 200).0),
            termination_mode: end.termination_mode,
            duration_ms: end.duration.map(|d| d.as_millis() as u64),
            output_bytes: end.output_bytes,
            command_number: end.command_number,
            ..Line::default()
        };
        log.write(&line);
        // A job that ended within the call that started it has no end to
        // report later.
        if self.start.call == "background"
            && end.status != "running"
            && let Some(session) = &self.start.session
        {
            log.jobs.lock().unwrap_or_else(PoisonError::into_inner).remove(session);
        }
    }
}

impl Drop for AuditCall {
    /// The call's task went away before it could say how it ended: the
    /// client cancelled it or the server is stopping.
    fn drop(&mut self) {
        if !self.ended {
            self.finish(End { status: "cancelled", reason: Some("cancel"), ..End::default() });
        }
    }
}

impl AuditLog {
    /// Writes `start`'s line and returns the call it begins, whose end line
    /// is written by [`AuditCall`]'s `end_*` methods, or when it is dropped
    /// (the call's task went away: `cancel`).
    pub(crate) fn begin(self: &Arc<Self>, client: Option<Client>, mut start: Start) -> AuditCall {
        let id = format!("{}-{}", self.server, self.next_id.fetch_add(1, Ordering::Relaxed));
        start.command = start.command.map(|command| (self.mask)(&command));
        let (command, command_chars) = cut_command(start.command.as_deref());
        let line = Line {
            time: rfc3339(SystemTime::now()),
            event: "start",
            id: &id,
            client: client.as_ref(),
            principal: start.principal.as_deref(),
            tool: start.tool,
            call: start.call,
            session: start.session.as_deref(),
            command,
            command_chars,
            key: start.key.as_deref(),
            input_bytes: start.input_bytes,
            category: start.category.as_deref(),
            limits: start.limits,
            ..Line::default()
        };
        self.write(&line);
        if start.call == "background"
            && let Some(session) = &start.session
        {
            let mut jobs = self.jobs.lock().unwrap_or_else(PoisonError::into_inner);
            jobs.insert(session.clone(), id.clone());
        }
        AuditCall { log: Some(Arc::clone(self)), id, start, started: Instant::now(), ended: false }
    }

    /// Writes the `job_end` line of a background job the server reports
    /// ended, with the id of the call that started it. A principal's job
    /// comes with its session named `PRINCIPAL/NAME`, as [`Start::by`]
    /// named it.
    pub(crate) fn job_ended(&self, job: &JobEnded) {
        let started = self.jobs.lock().unwrap_or_else(PoisonError::into_inner).remove(&job.session);
        let id = started.unwrap_or_else(|| {
            format!("{}-{}", self.server, self.next_id.fetch_add(1, Ordering::Relaxed))
        });
        let (command, command_chars) = cut_command(Some(&(self.mask)(&job.command)));
        let signal = signal_of(job.exit_code);
        let line = Line {
            time: rfc3339(SystemTime::now()),
            event: "job_end",
            id: &id,
            tool: "terminal",
            call: "background",
            session: Some(&job.session),
            command,
            command_chars,
            status: Some("completed"),
            exit_code: Some(job.exit_code),
            reason: signal.map(|_| "signal"),
            detail: signal.map(|signal| format!("signal {signal}")),
            duration_ms: Some(job.ran_for.as_millis() as u64),
            ..Line::default()
        };
        self.write(&line);
    }
}

/// The end of a `terminal` call, from the engine's reply.
pub(super) fn terminal_end(
    start: &Start,
    executed: &Result<Reply, SessionError>,
    output_bytes: Option<u64>,
) -> End {
    let reply = match executed {
        Ok(reply) => reply,
        Err(SessionError::Cancelled) => {
            return End { status: "not_executed", reason: Some("cancel"), ..End::default() };
        }
        Err(err) => {
            return End {
                status: "refused",
                reason: Some("not_executed"),
                detail: Some(crate::render::session_error(err)),
                ..End::default()
            };
        }
    };
    let about_command = !matches!(reply.outcome, Outcome::Idle | Outcome::NotExecuted { .. });
    let mut end = End {
        exit_code: reply.exit_code(),
        duration: about_command.then_some(reply.duration),
        output_bytes: output_bytes.filter(|_| about_command),
        command: (start.command.is_none() && !reply.command.is_empty())
            .then(|| reply.command.clone()),
        command_number: reply.number.filter(|_| about_command),
        ..End::default()
    };
    (end.status, end.reason) = match &reply.outcome {
        Outcome::Idle => ("idle", (start.call == "reset").then_some("reset")),
        Outcome::Completed { exit_code } => {
            let reason = if start.key.as_deref() == Some("C-c") {
                Some("C-c")
            } else {
                signal_of(*exit_code).map(|_| "signal")
            };
            ("completed", reason)
        }
        Outcome::Killed { limit, mode, .. } => {
            end.termination_mode = Some(mode.as_str());
            end.detail = Some(format!("ran unwatched past its limit of {} s", limit.as_secs_f64()));
            ("killed", Some("limit"))
        }
        Outcome::Running { why } => {
            let reason = match why {
                WaitEnded::Cancelled => Some("cancel"),
                WaitEnded::SessionClosing => Some("close"),
                WaitEnded::NoNewOutput(_)
                | WaitEnded::Timeout(_)
                | WaitEnded::MaxWait(_)
                | WaitEnded::FullScreen => None,
            };
            ("running", reason)
        }
        Outcome::WaitingForInput { .. } => ("waiting_for_input", None),
        Outcome::Incomplete => ("incomplete", None),
        Outcome::IntegrationDamaged => ("integration_damaged", None),
        Outcome::NeverStarted { .. } => ("not_executed", Some("never_started")),
        Outcome::NotExecuted { command, why } => {
            end.command = Some(command.clone());
            end.exit_code = None;
            end.detail = Some(not_run_detail(why));
            ("not_executed", Some("not_executed"))
        }
    };
    if let Some(signal) = end.exit_code.and_then(signal_of).filter(|_| end.reason == Some("signal"))
    {
        end.detail = Some(format!("signal {signal}"));
    }
    end
}

/// Why a command was not run, as an end line's detail says it.
fn not_run_detail(why: &NotRun) -> String {
    match why {
        NotRun::CommandRunning { .. } => "another command is running".to_owned(),
        NotRun::Incomplete => "an incomplete command is held".to_owned(),
        NotRun::NotAtPrompt { pid, command_line } => {
            format!("the shell is not at its prompt: {pid} {command_line}")
        }
        NotRun::IntegrationDamaged => "the shell integration is damaged".to_owned(),
        NotRun::PersonHolds { .. } => "a person holds the session for writing".to_owned(),
    }
}

/// The end of a `run` call, from its outcome.
pub(super) fn run_end(outcome: &RunOutcome, output_bytes: u64) -> End {
    let (reason, detail) = match outcome.status() {
        RunStatus::Timeout => {
            (Some("limit"), outcome.timeout_reason().map(|reason| reason.as_str().to_owned()))
        }
        RunStatus::Error if outcome.cancelled() => {
            (Some("cancel"), Some("killed by the client's cancellation".to_owned()))
        }
        RunStatus::Error => (Some("not_executed"), None),
        RunStatus::Success => match signal_of(outcome.exit_code()) {
            Some(signal) => (Some("signal"), Some(format!("signal {signal}"))),
            None => (None, None),
        },
    };
    End {
        status: outcome.status().as_str(),
        exit_code: Some(outcome.exit_code()),
        reason,
        detail,
        termination_mode: outcome.termination_mode().map(|mode| mode.as_str()),
        duration: Some(outcome.duration),
        output_bytes: Some(output_bytes),
        ..End::default()
    }
}

/// The end of a `session_close` call.
fn close_end(closed: Result<(&Activity, bool), &str>, output_bytes: u64) -> End {
    match closed {
        Ok((activity, reset)) => {
            let command = match activity {
                Activity::Running { command, .. } => Some(command.clone()),
                _ => None,
            };
            End {
                status: if reset { "reset" } else { "closed" },
                reason: Some("close"),
                detail: command.is_some().then(|| "its running command was stopped".to_owned()),
                output_bytes: Some(output_bytes),
                command,
                ..End::default()
            }
        }
        Err(error) => End {
            status: "refused",
            reason: Some("not_executed"),
            detail: Some(error.to_owned()),
            ..End::default()
        },
    }
}

/// The signal a shell's exit code says killed the command (128 + N).
pub(super) fn signal_of(exit_code: i32) -> Option<i32> {
    (129..=128 + 64).contains(&exit_code).then(|| exit_code - 128)
}

/// A command as a line holds it: cut to [`COMMAND_BOUND`] characters;
/// when cut, how many characters it had.
pub(super) fn cut_command(command: Option<&str>) -> (Option<String>, Option<usize>) {
    let Some(command) = command else { return (None, None) };
    let (text, was_cut) = cut(command, COMMAND_BOUND);
    (Some(text), was_cut.then(|| command.chars().count()))
}

/// `text`'s first `bound` characters, and whether anything was left out.
pub(super) fn cut(text: &str, bound: usize) -> (String, bool) {
    match text.char_indices().nth(bound) {
        Some((at, _)) => (text[..at].to_owned(), true),
        None => (text.to_owned(), false),
    }
}
