//! The words of a `terminal` reply: one `match` on the engine's
//! [`Outcome`], the input report and a loop over the [`Event`]s, into the
//! text (OpenHands' words where they exist) and the structured content.
//! Every line an agent reads about a terminal call is chosen here; the
//! snapshot tests at the end of this file are the record of each.

use schemars::JsonSchema;
use serde::Serialize;
use shellkeep_engine::TerminationMode;
use shellkeep_engine::{
    AtPrompt, Event, InputReport, NotRun, Outcome, Reader, Reply, SessionError, WaitEnded,
};
use shellkeep_engine::{KeyError, MAX_KEYS, MAX_KEYS_BYTES, key_names};

use rmcp::schemars;

use super::Blocks;
use super::{
    RESET_NOTICE, Text, capped_echo, echo, full_cut, full_path, in_text, plain_secs, round_secs,
    seconds,
};

/// Structured result of the `terminal` tool. It carries every fact the
/// text does, for clients that show the model only one of the two (Claude
/// Code and Codex hand their model this, Gemini CLI the text). The fields
/// go out in this order: the status and exit code first, then what to do
/// next, the cut and how to read what it left out, and the output bodies
/// last, so a client that shows only the start of a long reply, or cuts
/// its middle, keeps the facts.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct TerminalOutput {
    /// `completed`, `killed` (stopped after running unwatched past its
    /// limit), `running` (control came back before the command finished),
    /// `waiting_for_input` (it is blocked reading the terminal), or
    /// `not_executed` (another command is still running).
    #[schemars(with = "String")]
    pub status: TerminalStatus,
    /// The exit code, or -1 while the command is still running.
    pub exit_code: i32,
    /// The session, when it is not `default`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// True when this call started a background job in `session`: it runs
    /// there on its own, and the calling session is free.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub background: bool,
    /// True for a background job: it is under no time limit (stop it with
    /// `session_close`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub no_time_limit: bool,
    /// True when the program is blocked waiting for terminal input.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub waiting_for_input: bool,
    /// While it waits for input: who reads it, `program` (the command) or
    /// `shell` (a builtin such as `read`, or a damaged integration that
    /// `reset` restores).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reader: Option<&'static str>,
    /// While it waits for input: the unfinished line it shows (its prompt),
    /// also when an earlier reply showed it; cut to 200 characters. Absent
    /// when it waits with no prompt (C-d ends input).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// The keys this call sent, in order, separated by spaces (`C-c`,
    /// `DOWN DOWN ENTER`), each piece of text sent in `keys` as `text(N)`,
    /// N its characters (`ESC text(3) ENTER`); absent for text typed with
    /// Enter and when nothing was sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_sent: Option<String>,
    /// While it runs: why this call stopped waiting (`no_new_output`,
    /// `timeout`: the call's own timeout, `max_wait`: no timeout was given
    /// and the longest wait ran out, `full_screen`, `cancelled`,
    /// `session_closing`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait_ended: Option<&'static str>,
    /// `exec_timeout` when the command was killed for running past its
    /// execution limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub timeout_reason: Option<KillReason>,
    /// How a killed command died: `soft` (SIGTERM) or `hard` (SIGKILL).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub termination_mode: Option<Termination>,
    /// Time since the command started, in whole milliseconds.
    pub duration_ms: u64,
    /// While the command runs under a limit: seconds from now (one
    /// decimal) within which a call must wait on it, poll it or send it
    /// input, or it is stopped (time it spends waiting for input not
    /// counted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub look_again_within_sec: Option<f64>,
    /// Seconds (one decimal) since the client cancelled the previous call
    /// on this session, when it did; this reply carries what the command
    /// printed since.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_call_cancelled_sec_ago: Option<f64>,
    /// The shell's working directory.
    pub cwd: String,
    /// The Python interpreter `python` runs, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub python_interpreter: Option<String>,
    /// How many secret values in this reply's output were replaced by
    /// `<secret-hidden>`.
    #[serde(skip_serializing_if = "super::is_zero")]
    pub secrets_masked: u64,
    /// The session's resource limits that stopped something since the
    /// last reply, as the kernel counted them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub limit_hit: Vec<super::LimitHitOutput>,
    /// The reply's notices, worded as in the text: what happened besides
    /// the output, and for a command still running or waiting, the one line
    /// that says how to go on (poll, answer, interrupt, by when). What has
    /// a field of its own (the status, exit code, working directory,
    /// interpreter, prompt, the call that reads a cut) is not repeated.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The exit code of a previous command that finished while no call was
    /// waiting on it, reported before this command ran (its last output is
    /// `previous_output`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_exit_code: Option<i32>,
    /// When that previous command's output was cut: the arguments of the
    /// `output` call that reads the lines left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_output_call: Option<super::ReadCall>,
    /// The file with that previous command's complete output, when it was
    /// cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_full_output_path: Option<String>,
    /// Why that previous command's complete output could not be saved,
    /// when it was cut and no file holds it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_full_output_error: Option<String>,
    /// Whether the middle of `output` was cut.
    pub truncated: bool,
    /// When `output` was cut: characters left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub omitted_chars: Option<u64>,
    /// When `output` was cut: lines left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub omitted_lines: Option<u64>,
    /// When the output was cut: the command's number, to read the rest with
    /// the `output` tool.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command_number: Option<u64>,
    /// When the output was cut: the arguments of the `output` call that
    /// reads the lines left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_call: Option<super::ReadCall>,
    /// The file with the complete output, when it was cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub full_output_path: Option<String>,
    /// Where and why that file was cut, when it reached its size limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub full_output_cut: Option<String>,
    /// Why the complete output could not be saved (a full disk, a directory
    /// that cannot be written), when the output was cut and no file holds it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub full_output_error: Option<String>,
    /// A person attached to the session (`shellkeep attach --write`) typed
    /// into it since the last reply: how many keys, how many of them with
    /// the terminal's echo off (a password, never shown), how long ago.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub person_typed: Option<PersonTypedOutput>,
    /// The exit code of a command a person typed at the shell's prompt
    /// (what it printed is `background_output`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub person_command_exit_code: Option<i32>,
    /// Seconds since a person took the session for writing, when that is
    /// why the command or input was refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub person_holds_since_sec_ago: Option<f64>,
    /// While the program reads with echo off (a password prompt): the
    /// command a person runs in their own terminal to answer it, so the
    /// secret never reaches the agent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub person_can_answer: Option<String>,
    /// Output printed while no command was running (background jobs, or a
    /// command a person ran at the prompt).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub background_output: Option<String>,
    /// The last output of the previous command (see `previous_exit_code`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_output: Option<String>,
    /// What the command printed since the last reply (head and tail when
    /// cut, with a line that says what was left out). Always last.
    pub output: String,
}

/// What a person typed into the session since the last reply.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, JsonSchema)]
pub(crate) struct PersonTypedOutput {
    /// Keys in all (an arrow counts once).
    pub keys: u64,
    /// Keys typed while the terminal's echo was off (a password): what
    /// they were is never kept.
    pub echo_off_keys: u64,
    /// Seconds (one decimal) since the last key.
    pub last_key_sec_ago: f64,
}

/// The `status` of a terminal reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum TerminalStatus {
    /// The command finished.
    Completed,
    /// It was stopped after running unwatched past its limit.
    Killed,
    /// Control came back before it finished.
    Running,
    /// It is blocked reading the terminal.
    WaitingForInput,
    /// The command was not run (another one still has the terminal, or the
    /// integration is damaged). The only status that makes the reply a tool
    /// error.
    NotExecuted,
}

/// Why a command was killed: the one reason a terminal command is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum KillReason {
    /// It ran unwatched past its execution limit.
    ExecTimeout,
}

/// How a killed command died.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Termination {
    /// It ended on SIGTERM.
    Soft,
    /// It ignored SIGTERM and got SIGKILL after the grace period.
    Hard,
}

/// Why a command is not run once the shell integration is damaged, and
/// what to do.
const DAMAGED: &str = "A command damaged shellkeep's shell integration (an alias, function or variable it relies on, `enable -n`, \
     a DEBUG trap), so commands can no longer run or report their end in this shell. \
     reset=true restores a working shell.";

/// OpenHands' prefix for output of a command earlier calls already showed
/// part of.
const CONTINUED: &str = "[Below is the output of the previous command.]";

/// The suffix OpenHands gives a key that was sent: "CTRL+C was sent." for
/// `C-c` (its exact three-character form), "UP was sent." for another key;
/// and for a list of keys, "Sent: DOWN DOWN ENTER.".
fn key_sent(key: &str) -> String {
    match key.as_bytes() {
        [b'C', b'-', letter] if letter.is_ascii_alphabetic() => {
            format!("CTRL+{} was sent.", letter.to_ascii_uppercase() as char)
        }
        _ if !one_key(key) => format!("Sent: {key}."),
        _ => format!("{key} was sent."),
    }
}

/// Whether keys sent, as the engine names them, are one key (`UP`), not a
/// list or text (`DOWN ENTER`, `text(1)`).
fn one_key(keys: &str) -> bool {
    !keys.contains(' ') && !keys.starts_with("text(")
}

/// The text and structured content for a terminal reply.
pub(crate) fn terminal(reply: &Reply) -> (Blocks, TerminalOutput) {
    let mut out = Text::default();
    before_the_status(reply, &mut out);
    let key = match &reply.input {
        Some(InputReport::Sent { key: Some(key), .. }) => Some(key.as_str()),
        _ => None,
    };
    let sent = key.map(|key| format!(" {}", key_sent(key))).unwrap_or_default();
    let status = match &reply.outcome {
        Outcome::Idle | Outcome::Completed { .. } | Outcome::Killed { .. } => {
            ended(reply, key, &mut out)
        }
        Outcome::Running { why: WaitEnded::SessionClosing } => {
            // Nothing more can be done with the command: it is stopped with
            // the session.
            out.note(format!("[{}]", wait_ended(WaitEnded::SessionClosing)));
            TerminalStatus::Running
        }
        Outcome::Running { why } => {
            out.note(still_running(reply, Some(&wait_ended(*why)), &sent, None));
            TerminalStatus::Running
        }
        Outcome::WaitingForInput { shell_reading } => {
            let reader = if *shell_reading { Reader::Shell } else { Reader::Program };
            out.note(still_running(reply, None, &sent, Some(reader)));
            TerminalStatus::WaitingForInput
        }
        // Nothing runs yet: the note about the incomplete command (below)
        // says what the shell waits for.
        Outcome::Incomplete => TerminalStatus::Running,
        Outcome::IntegrationDamaged => {
            out.note(format!(
                "[The command was NOT run: the shell reported that it never ran. {DAMAGED}]"
            ));
            TerminalStatus::NotExecuted
        }
        Outcome::NeverStarted { shell_exited } => {
            out.note(never_started(*shell_exited));
            TerminalStatus::NotExecuted
        }
        Outcome::NotExecuted { command, why } => {
            out.note(not_executed(command, why));
            // What the agent can do instead is what a poll would have said.
            if let NotRun::CommandRunning { reading } = why {
                out.note(still_running(reply, None, "", *reading));
            }
            TerminalStatus::NotExecuted
        }
    };
    input_lines(reply.input.as_ref(), &mut out);
    outcome_lines(&reply.outcome, &mut out);
    for event in reply.events.iter().filter(|event| !comes_first(event)) {
        event_lines(event, reply, &mut out);
    }
    if let Some(line) = masked_note(secrets_masked(reply)) {
        out.note(line);
    }
    let structured = structured(reply, status, out.notes);
    (out.blocks, structured)
}

/// What comes before the status: a previous command's end, the events
/// that happened before this call's command, background output, the
/// full-screen notice, and the output.
fn before_the_status(reply: &Reply, out: &mut Text) {
    if let Some(previous) = &reply.previous {
        out.note(previous_ended(previous));
        out.output(&previous.output);
    }
    for event in reply.events.iter().filter(|event| comes_first(event)) {
        event_lines(event, reply, out);
    }
    if let Some(idle) = &reply.idle_output {
        let person = reply.events.iter().any(|event| matches!(event, Event::PersonRan { .. }));
        out.note(if person {
            "[Printed while no command of yours was running (a person's command at the prompt, \
             background jobs):]"
                .to_owned()
        } else {
            "[Printed while no command was running (background jobs):]".to_owned()
        });
        out.blocks.output(idle);
    }
    if reply.screen {
        out.note(
            "[A full-screen program is showing this screen; send keys with `keys` (for example \
             [\"q\"], [\"DOWN\", \"ENTER\"], [\"ESC\"] or [\"C-c\"]).]"
                .to_owned(),
        );
    }
    // A command refused for the one still running shows that one's output
    // (OpenHands' words); one refused for any other reason shows none.
    if reply.continued
        || matches!(reply.outcome, Outcome::NotExecuted { why: NotRun::CommandRunning { .. }, .. })
    {
        out.line(CONTINUED.to_owned());
    }
    if reply.screen {
        // The screen replaced the stream's text: no omission line in it.
        out.blocks.output(&reply.output.text);
    } else {
        out.output(&reply.output);
    }
}

/// The lines of a reply whose command has ended (or that had none: a reset
/// alone, a key nothing needed), with the key the call sent, if any.
fn ended(reply: &Reply, key: Option<&str>, out: &mut Text) -> TerminalStatus {
    let code = reply.exit_code().unwrap_or(-1);
    match (&reply.outcome, &reply.input) {
        (Outcome::Killed { limit, mode, .. }, _) => out.note(killed(code, *limit, *mode)),
        (_, Some(InputReport::KeyNotNeeded(key))) if one_key(key) => out.note(format!(
            "[No command is running, so {key} was not sent: the shell is at its prompt.]"
        )),
        (_, Some(InputReport::KeyNotNeeded(keys))) => out.note(format!(
            "[No command is running, so nothing was sent ({keys}): the shell is at its prompt, \
             and keys go only to a running program.]"
        )),
        // No command ran (a reset alone): there is no exit code to tell.
        (Outcome::Idle, _) => {}
        _ => {
            let sent = key.map(|key| format!(" {}", key_sent(key))).unwrap_or_default();
            out.line(format!("[The command completed with exit code {code}.{sent}]"));
        }
    }
    out.line(format!("[Current working directory: {}]", in_text(&reply.cwd)));
    if let Some(python) = &reply.python {
        out.line(format!("[Python interpreter: {}]", in_text(python)));
    }
    match reply.outcome {
        Outcome::Killed { .. } => TerminalStatus::Killed,
        _ => TerminalStatus::Completed,
    }
}

/// The structured content of a terminal reply, with the notices `notes`.
fn structured(reply: &Reply, status: TerminalStatus, notes: Vec<String>) -> TerminalOutput {
    let previous = reply.previous.as_deref();
    let killed = termination(reply);
    let waiting_for_input = waits_for_input(reply);
    let cut = reply.output.truncated;
    TerminalOutput {
        status,
        exit_code: reply.exit_code().unwrap_or(-1),
        session: None,
        background: false,
        no_time_limit: false,
        waiting_for_input,
        reader: reader_of(reply),
        prompt: reply.unfinished_line.as_deref().filter(|_| waiting_for_input).map(capped_echo),
        key_sent: match &reply.input {
            Some(InputReport::Sent { key: Some(key), .. }) => Some(key.clone()),
            _ => None,
        },
        wait_ended: wait_ended_field(reply),
        timeout_reason: killed.map(|_| KillReason::ExecTimeout),
        termination_mode: killed,
        duration_ms: reply.duration.as_millis() as u64,
        look_again_within_sec: reply
            .look_again_within
            .filter(|_| reply.is_running() && !closing(reply))
            .map(round_secs),
        previous_call_cancelled_sec_ago: reply.events.iter().find_map(|event| match event {
            Event::PreviousCallCancelled { ago } => Some(round_secs(*ago)),
            _ => None,
        }),
        cwd: reply.cwd.display().to_string(),
        python_interpreter: reply.python.as_ref().map(|p| p.display().to_string()),
        secrets_masked: secrets_masked(reply),
        limit_hit: super::limit_hit_facts(reply.events.iter().filter_map(|event| match event {
            Event::LimitHit(hit) => Some(*hit),
            _ => None,
        })),
        notes,
        previous_exit_code: previous.map(|p| p.exit_code().unwrap_or(-1)),
        previous_output_call: None,
        previous_full_output_path: previous.and_then(|p| full_path(&p.output)),
        previous_full_output_error: previous.and_then(|p| p.output.full_output_error.clone()),
        truncated: cut,
        omitted_chars: cut.then_some(reply.output.omitted_chars),
        omitted_lines: cut.then_some(reply.output.omitted_lines),
        command_number: None,
        output_call: None,
        full_output_path: full_path(&reply.output),
        full_output_cut: full_cut(&reply.output),
        full_output_error: reply.output.full_output_error.clone(),
        person_typed: person_typed(reply),
        person_command_exit_code: reply.events.iter().rev().find_map(|event| match event {
            Event::PersonRan { status } => Some(*status),
            _ => None,
        }),
        person_holds_since_sec_ago: person_holds_since(reply).map(|since| round_secs(ago(since))),
        person_can_answer: None,
        background_output: reply.idle_output.clone(),
        previous_output: previous.map(|p| p.output.text.clone()),
        output: reply.output.text.clone(),
    }
}

/// How a killed command was stopped (`termination_mode`).
fn termination(reply: &Reply) -> Option<Termination> {
    match reply.outcome {
        Outcome::Killed { mode, .. } => Some(match mode {
            TerminationMode::Soft => Termination::Soft,
            TerminationMode::Hard => Termination::Hard,
        }),
        _ => None,
    }
}

/// Whether what runs waits for input (`waiting_for_input`).
fn waits_for_input(reply: &Reply) -> bool {
    match &reply.outcome {
        Outcome::WaitingForInput { .. } | Outcome::Incomplete => true,
        Outcome::NotExecuted { why: NotRun::Incomplete, .. } => true,
        Outcome::NotExecuted { why: NotRun::CommandRunning { reading }, .. } => reading.is_some(),
        _ => false,
    }
}

/// Who reads the input it waits for (`reader`): the shell or a program.
fn reader_of(reply: &Reply) -> Option<&'static str> {
    let reader = match &reply.outcome {
        Outcome::WaitingForInput { shell_reading } => {
            Some(if *shell_reading { Reader::Shell } else { Reader::Program })
        }
        Outcome::NotExecuted { why: NotRun::CommandRunning { reading }, .. } => *reading,
        _ => None,
    };
    reader.map(|reader| match reader {
        Reader::Shell => "shell",
        Reader::Program => "program",
    })
}

/// Why the wait for a command still running ended (`wait_ended`).
fn wait_ended_field(reply: &Reply) -> Option<&'static str> {
    match reply.outcome {
        Outcome::Running { why } => Some(match why {
            WaitEnded::NoNewOutput(_) => "no_new_output",
            WaitEnded::Timeout(_) => "timeout",
            WaitEnded::MaxWait(_) => "max_wait",
            WaitEnded::FullScreen => "full_screen",
            WaitEnded::Cancelled => "cancelled",
            WaitEnded::SessionClosing => "session_closing",
        }),
        _ => None,
    }
}

/// What a person typed in the session since the last reply (`person_typed`).
fn person_typed(reply: &Reply) -> Option<PersonTypedOutput> {
    reply.events.iter().find_map(|event| match event {
        Event::PersonTyped(typed) => Some(PersonTypedOutput {
            keys: typed.keys,
            echo_off_keys: typed.hidden,
            last_key_sec_ago: round_secs(ago(typed.last)),
        }),
        _ => None,
    })
}

/// Since when a person holds the terminal, when that refused the call or
/// its input.
fn person_holds_since(reply: &Reply) -> Option<std::time::SystemTime> {
    match (&reply.outcome, &reply.input) {
        (Outcome::NotExecuted { why: NotRun::PersonHolds { since }, .. }, _)
        | (_, Some(InputReport::PersonHolds { since })) => Some(*since),
        _ => None,
    }
}

/// How many secrets this reply's output (and the previous command's, which
/// it reports) had replaced by `<secret-hidden>`.
fn secrets_masked(reply: &Reply) -> u64 {
    reply.output.masked + reply.previous.as_deref().map_or(0, |previous| previous.output.masked)
}

/// The one line a reply carries when its output had secrets replaced, so
/// the agent knows why `<secret-hidden>` is there and that the values
/// still work in commands.
pub(super) fn masked_note(masked: u64) -> Option<String> {
    (masked > 0).then(|| {
        let what = match masked {
            1 => "1 secret value in the output was".to_owned(),
            n => format!("{n} secret values in the output were"),
        };
        format!(
            "[{what} replaced by <secret-hidden>; the values are unchanged for commands, so use \
             the variable (for example \"$GITHUB_TOKEN\") where one is needed.]"
        )
    })
}

/// Whether the reply is about a command stopped with its session.
fn closing(reply: &Reply) -> bool {
    reply.outcome == (Outcome::Running { why: WaitEnded::SessionClosing })
}

/// The line about a previous command that ended while no call waited.
fn previous_ended(previous: &Reply) -> String {
    let code = previous.exit_code().unwrap_or(-1);
    match previous.outcome {
        Outcome::Killed { limit, .. } => format!(
            "[The previous command was stopped with exit code {code} before this one started: no \
             call waited on it, polled it or sent it input for {}. Its last output follows.]",
            seconds(limit)
        ),
        _ => format!(
            "[The previous command finished with exit code {code} before this one started; its \
             last output follows.]"
        ),
    }
}

/// The line about a command stopped past its limit.
fn killed(code: i32, limit: std::time::Duration, mode: TerminationMode) -> String {
    format!(
        "[The command was stopped with exit code {code}: no call waited on it, polled it or sent \
         it input for {} (its limit; time waiting for input not counted). {}; nothing after it in \
         the command line ran.]",
        seconds(limit),
        match mode {
            TerminationMode::Soft => "It ended on SIGTERM",
            TerminationMode::Hard => "It ignored SIGTERM and got SIGKILL after the grace period",
        }
    )
}

/// The one notice about a command that is still running: why the call
/// returned (`why`, OpenHands' words; `None` when it waits for input), with
/// the key sent, then how to poll it, answer it and interrupt it, and by
/// when a call must look at it again: about 200 characters at most besides
/// a quoted prompt (the tests hold it to `NOTICE_BUDGET`). The tool
/// description explains the rules behind it.
fn still_running(reply: &Reply, why: Option<&str>, sent: &str, reader: Option<Reader>) -> String {
    let ran = seconds(reply.duration);
    let mut line = match (why, reader) {
        (Some(why), _) => {
            format!("[{why}{sent} It is still running ({ran}): send '' to wait for more")
        }
        (None, None) => format!("[Running for {ran}{sent}: send '' to wait for more"),
        (None, Some(reader)) => format!("[{}{sent}", waits_for(reply, reader)),
    };
    line.push_str(match (reader, reply.screen) {
        // The full-screen notice above says how to send keys.
        (None, true) => ".",
        (None, false) => ", is_input=true with text, or `keys` (C-c interrupts).",
        (Some(_), true) => " Send '' to wait.",
        (Some(_), false) => " Answer with is_input=true (C-c interrupts) or send '' to wait.",
    });
    if let Some(within) = reply.look_again_within.filter(|_| !closing(reply)) {
        let within = seconds(within);
        line.push_str(&match reader {
            None => format!(" Look again within {within} to keep it running."),
            Some(_) => format!(" Waiting pauses its {within} limit."),
        });
    }
    line.push(']');
    line
}

/// What the running command waits for, and where its prompt is: the last
/// line of the output above when that is the unfinished line, the line
/// quoted when an earlier reply showed it, the screen, or no prompt at all
/// (`grep` reading standard input). When the shell itself reads, the
/// command is a builtin such as `read`, or the integration is damaged and
/// the shell sits at its own prompt: from `/proc` the two look the same.
fn waits_for(reply: &Reply, reader: Reader) -> String {
    let who = match reader {
        Reader::Program => "The command waits for input",
        Reader::Shell => {
            "The shell reads input (`read`, or a broken integration that reset=true restores)"
        }
    };
    match &reply.unfinished_line {
        _ if reply.screen => format!("{who} on the screen above."),
        Some(line) if reply.output.text.rsplit('\n').next() == Some(line.as_str()) => {
            format!("{who}; its prompt is the last line above.")
        }
        Some(line) => format!("{who}; its prompt is {}.", echo(line)),
        None => format!("{who} with no prompt (C-d ends input)."),
    }
}

/// Why a call stopped waiting, in OpenHands' words where it has them.
fn wait_ended(why: WaitEnded) -> String {
    match why {
        WaitEnded::NoNewOutput(quiet) => {
            format!("The command has no new output after {} seconds.", plain_secs(quiet))
        }
        WaitEnded::Timeout(limit) => {
            format!("The command timed out after {} seconds.", plain_secs(limit))
        }
        // Not a timeout of the agent's: nothing failed, the call only
        // stopped waiting.
        WaitEnded::MaxWait(limit) => {
            format!("No timeout was given: control came back after {} s.", plain_secs(limit))
        }
        WaitEnded::FullScreen => {
            "The command shows a full screen (above) and keeps redrawing it.".to_owned()
        }
        WaitEnded::Cancelled => "The client cancelled this call.".to_owned(),
        WaitEnded::SessionClosing => "This call stopped waiting: the session is being closed \
            (session_close), and the command is stopped with it."
            .to_owned(),
    }
}

/// The line about a new command that was not run.
fn not_executed(command: &str, why: &NotRun) -> String {
    let command = echo(command);
    match why {
        // Nothing is left of the group that has the terminal: a program
        // took it and ended without giving it back, so nothing will.
        NotRun::NotAtPrompt { pid, command_line } if command_line.is_empty() => format!(
            "[Your command {command} is NOT executed: the shell is not at its prompt. The \
             terminal still belongs to process group {pid}, whose programs have all ended \
             without giving it back, so the shell cannot read its input. Use reset=true to \
             start a fresh shell.]"
        ),
        NotRun::NotAtPrompt { pid, command_line } => format!(
            "[Your command {command} is NOT executed: the shell is not at its prompt. Process \
             {pid} (`{command_line}`) still has the terminal, although the previous command \
             reported its end (a sourced script or the shell itself can do that). Wait for that \
             program to end and send the command again, or use reset=true to stop it and start \
             a fresh shell.]"
        ),
        NotRun::IntegrationDamaged => format!(
            "[Your command {command} is NOT executed: the shell reported that the running \
             command never ran. {DAMAGED}]"
        ),
        NotRun::Incomplete => format!(
            "[Your command {command} is NOT executed: the previous command is incomplete, and the \
             shell waits for its remaining lines.]"
        ),
        NotRun::CommandRunning { .. } => format!(
            "[Your command {command} is NOT executed. The previous command is still running - You \
             CANNOT send new commands until the previous command is completed.]"
        ),
        NotRun::PersonHolds { since } => format!(
            "[Your command {command} is NOT executed: {}, and nothing is typed into their line. \
             Polls and the `output` tool still work; send the command again once they detach, \
             or use another session.]",
            person_holds(*since)
        ),
    }
}

/// Who holds the session, and since when.
fn person_holds(since: std::time::SystemTime) -> String {
    format!(
        "a person holds this session for writing (`shellkeep attach --write`, since {} ago)",
        seconds(ago(since))
    )
}

/// Time since `at` (zero for a time that is not past).
fn ago(at: std::time::SystemTime) -> std::time::Duration {
    at.elapsed().unwrap_or_default()
}

/// The command a person runs to type into session `name` of this server:
/// exact even when several servers of theirs run (`--server`, this
/// process's pid), where `shellkeep attach` alone asks them to choose.
pub(crate) fn attach_command(name: &str) -> String {
    let server = std::process::id();
    if name == shellkeep_engine::DEFAULT_SESSION {
        format!("shellkeep attach --server {server} --write")
    } else {
        format!("shellkeep attach {name} --server {server} --write")
    }
}

/// The line for a program that reads with echo off in session `name`: how
/// a person answers it without the agent seeing the answer.
pub(crate) fn person_can_answer(name: &str) -> String {
    format!(
        "[The program reads with the terminal's echo off: a password or passphrase prompt. Do \
         not ask for the secret or type it yourself: ask a person to run `{}` in a terminal of \
         their own (same user, same machine) and answer it there; you never see what they type, \
         and a later reply says a person answered. Poll meanwhile.]",
        attach_command(name)
    )
}

/// The lines about input that did not all arrive.
fn input_lines(input: Option<&InputReport>, out: &mut Text) {
    match input {
        Some(InputReport::NotSent) => {
            out.note("[Your input was not sent: the command had already finished.]".to_owned())
        }
        Some(InputReport::Sent { delivered, total, .. }) if delivered < total => out.note(format!(
            "[Only {delivered} of the {total} bytes of your input were delivered: the program is \
             not reading its input, and the rest was dropped. C-c still interrupts it.]"
        )),
        Some(InputReport::PersonHolds { since }) => out.note(format!(
            "[Your input was NOT sent: {}. Polls and the `output` tool still work.]",
            person_holds(*since)
        )),
        _ => {}
    }
}

/// The line an outcome adds after the status: an incomplete command.
fn outcome_lines(outcome: &Outcome, out: &mut Text) {
    if matches!(outcome, Outcome::Incomplete | Outcome::NotExecuted { why: NotRun::Incomplete, .. })
    {
        out.note(
            "[The command is incomplete, so the shell waits for the rest of it (as at a `>` \
             prompt). Send the remaining lines with is_input=true, or C-c to discard it.]"
                .to_owned(),
        );
    }
}

/// Whether an event is told before the output (it happened before the
/// command ran) rather than after the status.
fn comes_first(event: &Event) -> bool {
    matches!(event, Event::PreviousCallCancelled { .. } | Event::Reset | Event::RanAtPrompt { .. })
}

/// The lines of one event.
fn event_lines(event: &Event, reply: &Reply, out: &mut Text) {
    let line = match event {
        Event::PreviousCallCancelled { ago } => format!(
            "[The previous call was cancelled by the client {} ago; the command was left \
             running, and what it printed since is below.]",
            seconds(*ago)
        ),
        Event::Reset => {
            out.note(format!(
                "{RESET_NOTICE} All previous environment variables and session state have been \
                 cleared."
            ));
            format!("[The new shell started in {}.]", in_text(&reply.cwd))
        }
        Event::ShellRestarted { how, cwd } => format!(
            "[The shell exited ({}); a new shell was started in {}. Variables, functions and \
             background jobs from before are gone.]",
            super::session_words::shell_exit(*how),
            in_text(cwd)
        ),
        Event::NestedShellStarted => NESTED_SHELL_STARTED.to_owned(),
        Event::NestedShellExited { status } => format!(
            "[The nested shell exited (exit code {status}); commands run in the outer shell \
             again.]"
        ),
        Event::IntegrationReinstalled => INTEGRATION_REINSTALLED.to_owned(),
        Event::ReinstallFailed => REINSTALL_FAILED.to_owned(),
        Event::OtherShell(name) => format!(
            "[`{name}` is an interactive shell without shellkeep's integration: send its \
             commands with is_input=true (exit codes and the working directory are not tracked \
             inside it); `exit` returns to bash.]"
        ),
        Event::RemoteShell(name) => format!(
            "[`{name}` is a remote or container session, driven as an interactive program: send \
             its commands with is_input=true; `exit` (or C-d) ends it.]"
        ),
        Event::NamedBash(command_line) => format!(
            "[`{command_line}` calls itself bash but is not the bash shellkeep runs, so \
             shellkeep's integration was not installed in it: it is driven as an interactive \
             program (send its input with is_input=true).]"
        ),
        Event::UnaskedShell(who) => format!(
            "[An interactive bash is reading the terminal that is not the foreground job of the \
             command you typed (a program started it on its own, or it was left in the \
             background): `{who}`. shellkeep's integration was not installed in it, and the \
             command still runs: send the bash's input with is_input=true, or C-c to stop it.]"
        ),
        Event::PromptNotRun => PROMPT_NOT_RUN.to_owned(),
        Event::StatusLost => STATUS_LOST.to_owned(),
        Event::EndMarkerMissing => END_MARKER_MISSING.to_owned(),
        Event::OutputElsewhere => OUTPUT_ELSEWHERE.to_owned(),
        Event::RanAtPrompt { what, seq, sender } => ran_at_prompt(*what, *seq, *sender),
        Event::PersonTyped(typed) => person_typed_line(typed),
        Event::PersonRan { status } => format!(
            "[A person attached to this session ran a command at the shell's prompt; it ended \
             with exit code {status}. What it printed is the output between commands.]"
        ),
        Event::LimitHit(hit) => super::limit_hit_line(hit, "this session"),
        // Worded with the session's name by the tool (`person_can_answer`).
        Event::InputHidden => return,
    };
    out.note(line);
}

/// The line that says a person attached to the session typed keys.
fn person_typed_line(typed: &shellkeep_engine::PersonTyped) -> String {
    let hidden = match typed.hidden {
        0 => String::new(),
        n if n == typed.keys => {
            " with the terminal's echo off (a password: what was typed is not shown)".to_owned()
        }
        n => format!(
            ", {n} of them with the terminal's echo off (a password: what was typed \
             then is not shown)"
        ),
    };
    format!(
        "[A person attached to this session typed {} key{}{hidden}; the last {} ago.]",
        typed.keys,
        if typed.keys == 1 { "" } else { "s" },
        seconds(ago(typed.last))
    )
}

/// A nested shell started and got the integration.
const NESTED_SHELL_STARTED: &str = "[A nested shell started; shellkeep's integration was \
            installed in it, so your commands now run inside it with exit codes and the working \
            directory. `exit` returns to the outer shell.]";

/// The shell was replaced and its integration reinstalled.
const INTEGRATION_REINSTALLED: &str = "[The shell was replaced (exec) and lost shellkeep's \
            integration; it was reinstalled, so commands keep their exit codes and working \
            directory.]";

/// A shell without the integration, which could not be installed.
const REINSTALL_FAILED: &str = "[A shell without shellkeep's integration is waiting at its \
            prompt and the integration could not be installed in it: send its commands with \
            is_input=true, or reset=true for a fresh shell.]";

/// The prompt hook did not run: the integration is damaged.
const PROMPT_NOT_RUN: &str = "[shellkeep's shell integration is damaged: its prompt \
            (PROMPT_COMMAND) did not run, and a fallback reported the end and the exit code of \
            the command. A command replaced its variables (its functions are read-only), or cleared \
            PROMPT_COMMAND: reset=true restores a working shell.]";

/// The function that keeps the status was broken.
const STATUS_LOST: &str = "[The exit code above may be wrong: a command broke the function \
            of shellkeep's shell integration that keeps the command's status, so the shell \
            integration is damaged. reset=true restores a working shell.]";

/// The end was reported but its marker never arrived.
const END_MARKER_MISSING: &str = "[The shell reported the end of the command, but its end \
            marker never reached the terminal (the terminal or standard output was redirected, \
            or an escape sequence swallowed it): the output shown is what was read before the \
            end.]";

/// The shell's standard output does not go to the terminal.
const OUTPUT_ELSEWHERE: &str = "[The shell's standard output does not go to the terminal \
            (`exec >file`), so the output of commands is not shown: `exec >/dev/tty 2>&1` or \
            reset=true restores it.]";

/// Why a command the shell never started was not run.
fn never_started(shell_exited: bool) -> String {
    let what = if shell_exited {
        "the shell exited before it started the command"
    } else {
        "the shell went back to waiting at its prompt without starting the command"
    };
    format!(
        "[The command was NOT run: {what} (the shell marks the start of every command it runs, \
         and that mark never came), so nothing of it ran. Another program may have read the \
         line shellkeep typed: one that takes the terminal's foreground from the shell, such as \
         a background job of an earlier command. Send the command again; if this repeats, \
         reset=true stops such programs with the shell.]"
    )
}

/// The warning that something ran in the shell, or tried to pass for it,
/// while no command of the agent's ran.
fn ran_at_prompt(what: AtPrompt, seq: u64, sender: Option<i32>) -> String {
    const WAY_IN: &str = "A program may have pushed a line into the shell's input (legacy \
         TIOCSTI: `shellkeep doctor` says whether this host allows it) or read the line \
         shellkeep typed. Such a line can change anything in the shell (its functions, \
         variables, traps and aliases): reset=true gives a fresh one.";
    match (what, sender) {
        (AtPrompt::EndRecord, Some(pid)) => format!(
            "[WARNING: the session was tampered with: process {pid}, not the shell, sent the end \
             of a command (number {seq}) while no command was running. It was ignored. A \
             command you ran left a process that forges shellkeep's records: reset=true stops \
             it with the shell.]"
        ),
        (AtPrompt::EndRecord, None) => format!(
            "[WARNING: the session was tampered with: something ran in the shell at its prompt \
             while no command of yours was running (the shell reported the end of command \
             number {seq} again). {WAY_IN}]"
        ),
        (AtPrompt::Lines { count }, _) => format!(
            "[WARNING: the session was tampered with: the shell ran {count} command line{} at its \
             prompt, between your last command and this one (number {seq}), that no call typed. \
             {WAY_IN}]",
            if count == 1 { "" } else { "s" }
        ),
        (AtPrompt::StartMarker, _) => format!(
            "[WARNING: the session was tampered with: the shell started a command (number \
             {seq}) while none of yours was running. {WAY_IN}]"
        ),
    }
}

/// The tool error for keys that cannot be sent: a name that looks like a
/// key but is none (with the keys there are), another spelling of a key,
/// an empty item, a list past its bounds.
pub(crate) fn key_error(err: &KeyError) -> String {
    let names = format!(
        "In `keys`, an item that is exactly one of these names is that key: {}, F1 to F12, \
         C-<x> (control, e.g. C-c, C-d, C-z), M-<x> (Alt, e.g. M-x, M-ENTER); any other item \
         is typed as text. With is_input=true, `command` is text typed with Enter, or a control \
         key (C-c, C-d, C-z, any C-<letter>).",
        key_names().filter(|name| !name.starts_with('F')).collect::<Vec<_>>().join(", ")
    );
    match err {
        KeyError::Unknown(text) => format!("unknown key {}. {names}", echo(text)),
        KeyError::Spelling { text, name } => {
            format!("`keys` item {} is written {name}. {names}", echo(text))
        }
        KeyError::Empty(at) => format!(
            "`keys` item {at} is empty, which sends nothing: remove it, or send SPACE for a space."
        ),
        KeyError::TooMany(count) => format!(
            "`keys` has {count} items, more than the {MAX_KEYS} one call sends: send the rest in \
             another call."
        ),
        KeyError::TooLong(bytes) => format!(
            "`keys` holds {bytes} bytes, more than the {MAX_KEYS_BYTES} one call sends: send the \
             rest in another call, or write long text to a file."
        ),
    }
}

/// The note for input text that is exactly a key's name (`UP`): it was
/// typed as text, with Enter; how to press the key instead.
pub(crate) fn typed_key_name(key: &str) -> String {
    format!(
        "[This input was typed as text, followed by Enter. To press the key {key} instead, send \
         keys=[\"{key}\"].]"
    )
}

/// The tool error for a call the session refused, in the `terminal` tool's
/// words (the engine's own messages name no argument).
pub(crate) fn session_refused(err: &SessionError) -> String {
    match err {
        SessionError::Cancelled => "The client cancelled this call before it started.".to_owned(),
        SessionError::NulByte => "The command contains a NUL byte, which no shell command can \
            contain. Remove it (use printf '\\0' to produce one)."
            .to_owned(),
        SessionError::Shell(failure) => {
            format!(
                "The session's shell failed ({}). Try again, or reset=true to start a fresh shell.",
                super::session_words::shell_failure(failure)
            )
        }
        SessionError::NothingToWaitFor => "No command is running, so there is nothing to wait \
            for. Send a command to run it."
            .to_owned(),
        SessionError::NothingToSendInputTo => "No command is running, so there is nothing to send \
            input to. Run a command first, or send this as a command with is_input=false."
            .to_owned(),
        SessionError::KeyWhileIncomplete => "The shell is waiting for the rest of an incomplete \
            command, so keys other than C-c (discard it) and C-d (end of input) do nothing. Send \
            the remaining lines with is_input=true."
            .to_owned(),
        SessionError::PersonHolds { since } => format!(
            "The session was NOT reset: {}. Reset it once they detach, or use another session.",
            person_holds(*since)
        ),
    }
}

#[cfg(test)]
mod tests;
