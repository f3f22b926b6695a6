//! Turning engine outcomes into what an agent reads: readable text in the
//! OpenHands style models already know, plus lean structured content.
//!
//! This is the only place that words replies. It does not run anything.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Serialize;
use shellkeep_engine::oneshot::{RunOutcome, RunStatus};
use shellkeep_engine::output::Shown;
use shellkeep_engine::policy::{Decision, DecisionSource};
use shellkeep_engine::process::TerminationMode;
use shellkeep_engine::session::{Note, Reply, Status, WaitEnded};

use rmcp::schemars;

/// Structured result of the `terminal` tool.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TerminalOutput {
    /// What the command printed since the last reply (head and tail when cut).
    pub output: String,
    /// The exit code, or -1 while the command is still running.
    pub exit_code: i32,
    /// `completed`, `running` (control came back before the command
    /// finished), or `not_executed` (another command is still running).
    pub status: &'static str,
    /// The shell's working directory.
    pub cwd: String,
    /// The Python interpreter `python` runs, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub python_interpreter: Option<String>,
    /// Time since the command started, in milliseconds.
    pub duration_ms: u64,
    /// Whether the middle of `output` was cut.
    pub truncated: bool,
    /// The file with the complete output, when it was cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub full_output_path: Option<String>,
    /// `exec_timeout` when the command was killed for running past its
    /// execution limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_reason: Option<&'static str>,
    /// How a killed command died: `soft` (SIGTERM) or `hard` (SIGKILL).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub termination_mode: Option<&'static str>,
    /// True when the program is blocked waiting for terminal input.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub waiting_for_input: bool,
}

/// The text and structured content for a terminal reply.
pub fn terminal(reply: &Reply) -> (String, TerminalOutput) {
    let mut text = String::new();
    if let Some(previous) = &reply.previous {
        text.push_str(&format!(
            "[The previous command finished with exit code {} before this one started; its \
             last output follows.]\n",
            previous.exit_code.unwrap_or(-1)
        ));
        push_output(&mut text, &previous.output.text);
        text.push('\n');
    }
    for note in &reply.notes {
        match note {
            Note::Reset => text.push_str(&format!(
                "[The terminal was reset: a fresh shell in {}. Variables, functions and jobs \
                 from before are gone.]\n",
                reply.cwd.display()
            )),
            Note::IdleOutput(idle) => {
                text.push_str("[Printed while no command was running (background jobs):]\n");
                push_output(&mut text, idle);
            }
            Note::FullScreen => text.push_str(
                "[A full-screen program is showing this screen; send keys with is_input=true \
                 (for example q, ESC or C-c).]\n",
            ),
            _ => {}
        }
    }
    if reply.continued && !reply.output.text.is_empty() {
        text.push_str("[Below is the output of the previous command.]\n");
    }
    push_output(&mut text, &reply.output.text);
    let key = reply.notes.iter().find_map(|note| match note {
        Note::KeySent(name) => Some(name.as_str()),
        _ => None,
    });
    let not_executed = reply.notes.iter().find_map(|note| match note {
        Note::NotExecuted { command } => Some(command.as_str()),
        _ => None,
    });
    let status = match (reply.status, not_executed) {
        (_, Some(command)) => {
            text.push_str(&format!(
                "[Your command {command:?} was NOT executed: the previous command is still \
                 running. {NEXT_STEPS}]\n"
            ));
            "not_executed"
        }
        (Status::Completed, None) => {
            let code = reply.exit_code.unwrap_or(-1);
            match key {
                Some(key) => text.push_str(&format!(
                    "[The command completed with exit code {code} after {key} was sent.]\n"
                )),
                None => text.push_str(&format!("[The command completed with exit code {code}.]\n")),
            }
            text.push_str(&format!("[Current working directory: {}]\n", reply.cwd.display()));
            if let Some(python) = &reply.python {
                text.push_str(&format!("[Python interpreter: {}]\n", python.display()));
            }
            "completed"
        }
        (Status::Running(ended), None) => {
            let why = match ended {
                WaitEnded::NoNewOutput(quiet) => {
                    format!("has printed nothing new for {}", seconds(quiet))
                }
                WaitEnded::Timeout(limit) => {
                    format!("is still running after waiting {}", seconds(limit))
                }
                WaitEnded::NotWaited => "is still running".to_owned(),
            };
            let sent = key.map(|key| format!(" {key} was sent.")).unwrap_or_default();
            text.push_str(&format!(
                "[The command {why} (running for {}).{sent} {NEXT_STEPS}]\n",
                seconds(reply.duration)
            ));
            "running"
        }
    };
    for note in &reply.notes {
        match note {
            Note::ShellRestarted { how, cwd } => text.push_str(&format!(
                "[The shell exited ({how}); a new shell was started in {}. Variables, \
                 functions and background jobs from before are gone.]\n",
                cwd.display()
            )),
            Note::InputNotSent => {
                text.push_str("[Your input was not sent: the command had already finished.]\n")
            }
            Note::WaitingForInput if reply.notes.contains(&Note::Incomplete) => {}
            Note::WaitingForInput => {
                text.push_str("[The program is waiting for input: send it with is_input=true.]\n")
            }
            Note::Incomplete => text.push_str(
                "[The command is incomplete, so the shell waits for the rest of it (as at a `>` \
                 prompt). Send the remaining lines with is_input=true, or C-c to discard it.]\n",
            ),
            Note::NestedShellStarted => text.push_str(
                "[A nested shell started; shellkeep's integration was installed in it, so your \
                 commands now run inside it with exit codes and the working directory. `exit` \
                 returns to the outer shell.]\n",
            ),
            Note::NestedShellExited { status } => text.push_str(&format!(
                "[The nested shell exited (exit code {status}); commands run in the outer shell \
                 again.]\n"
            )),
            Note::IntegrationReinstalled => text.push_str(
                "[The shell was replaced (exec) and lost shellkeep's integration; it was \
                 reinstalled, so commands keep their exit codes and working directory.]\n",
            ),
            Note::ReinstallFailed => text.push_str(
                "[A shell without shellkeep's integration is waiting at its prompt and the \
                 integration could not be installed in it: send its commands with \
                 is_input=true, or reset=true for a fresh shell.]\n",
            ),
            Note::OtherShell(name) => text.push_str(&format!(
                "[`{name}` is an interactive shell without shellkeep's integration: send its \
                 commands with is_input=true (exit codes and the working directory are not \
                 tracked inside it); `exit` returns to bash.]\n"
            )),
            Note::RemoteShell(name) => text.push_str(&format!(
                "[`{name}` is a remote or container session, driven as an interactive program: \
                 send its commands with is_input=true; `exit` (or C-d) ends it.]\n"
            )),
            Note::Killed { limit, mode } => text.push_str(&format!(
                "[The command was killed: it ran past its execution limit of {} (time spent \
                 waiting for input not counted); {}.]\n",
                seconds(*limit),
                match mode {
                    TerminationMode::Soft => "it ended on SIGTERM",
                    TerminationMode::Hard => {
                        "it ignored SIGTERM and got SIGKILL after the grace period"
                    }
                }
            )),
            _ => {}
        }
    }
    let killed = reply.notes.iter().find_map(|note| match note {
        Note::Killed { mode, .. } => Some(*mode),
        _ => None,
    });
    let structured = TerminalOutput {
        output: reply.output.text.clone(),
        exit_code: match reply.status {
            Status::Completed => reply.exit_code.unwrap_or(-1),
            Status::Running(_) => -1,
        },
        status,
        cwd: reply.cwd.display().to_string(),
        python_interpreter: reply.python.as_ref().map(|p| p.display().to_string()),
        duration_ms: reply.duration.as_millis() as u64,
        truncated: reply.output.truncated,
        full_output_path: full_path(&reply.output),
        timeout_reason: killed.map(|_| "exec_timeout"),
        termination_mode: killed.map(|mode| mode.as_str()),
        waiting_for_input: reply.notes.contains(&Note::WaitingForInput),
    };
    (text.trim_end().to_owned(), structured)
}

const NEXT_STEPS: &str = "Send an empty command to wait for more output, send text or keys \
     (C-c to interrupt, C-d for end of input) with is_input=true, or reset=true to start a \
     fresh shell.";

fn push_output(text: &mut String, output: &str) {
    text.push_str(output);
    if !output.is_empty() && !output.ends_with('\n') {
        text.push('\n');
    }
}

fn full_path(shown: &Shown) -> Option<String> {
    shown.full_output_path.as_ref().map(|p| p.display().to_string())
}

fn seconds(duration: Duration) -> String {
    let secs = duration.as_secs_f64();
    if secs >= 10.0 || secs.fract() == 0.0 {
        format!("{secs:.0} s")
    } else {
        format!("{secs:.1} s")
    }
}

/// Structured result of the `run` tool: the seed's fields, plus what was
/// applied and where cut output went.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunOutput {
    /// `success` (ran to completion, whatever its exit code), `timeout` (a
    /// limit fired and the command was killed) or `error` (it could not
    /// start, or was cancelled).
    pub status: &'static str,
    /// Standard output (head and tail when cut).
    pub stdout: String,
    /// Standard error (head and tail when cut).
    pub stderr: String,
    /// The exit code; 128+N when killed by signal N; -1 on timeout or error.
    pub exit_code: i32,
    /// `exec_timeout` or `no_output_timeout` when a limit fired.
    pub timeout_reason: Option<&'static str>,
    /// `soft` (ended after SIGTERM) or `hard` (needed SIGKILL).
    pub termination_mode: Option<&'static str>,
    /// Wall time in milliseconds.
    pub duration_ms: u64,
    /// The policy category applied, or null for an explicit timeout.
    pub category: Option<String>,
    /// The execution limit applied, in seconds.
    pub exec_timeout_sec: f64,
    /// The no-output limit applied, in seconds.
    pub no_output_timeout_sec: f64,
    /// The file with the complete stdout, when it was cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub full_stdout_path: Option<String>,
    /// The file with the complete stderr, when it was cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub full_stderr_path: Option<String>,
}

/// The structured result and readable text of a `run`.
pub fn run(outcome: &RunOutcome, decision: &Decision) -> (String, RunOutput) {
    let structured = RunOutput {
        status: outcome.status.as_str(),
        stdout: outcome.stdout.text.clone(),
        stderr: outcome.stderr.text.clone(),
        exit_code: outcome.exit_code,
        timeout_reason: outcome.timeout_reason.map(|r| r.as_str()),
        termination_mode: outcome.termination_mode.map(|m| m.as_str()),
        duration_ms: outcome.duration.as_millis() as u64,
        category: decision.category.clone(),
        exec_timeout_sec: outcome.limits.exec.as_secs_f64(),
        no_output_timeout_sec: outcome.limits.no_output.as_secs_f64(),
        full_stdout_path: full_path(&outcome.stdout),
        full_stderr_path: full_path(&outcome.stderr),
    };
    let mut text = String::new();
    push_output(&mut text, &outcome.stdout.text);
    if !outcome.stderr.text.is_empty() {
        text.push_str("[stderr]\n");
        push_output(&mut text, &outcome.stderr.text);
    }
    let summary = match outcome.status {
        RunStatus::Success => format!("exit code {}", outcome.exit_code),
        RunStatus::Timeout => format!(
            "timeout: {} after {}, stopped {} ({})",
            outcome.timeout_reason.map_or("limit", |r| r.as_str()),
            seconds(outcome.duration),
            outcome.termination_mode.map_or("", |m| m.as_str()),
            match outcome.termination_mode.map(|m| m.as_str()) {
                Some("hard") => "SIGKILL after the grace period",
                _ => "SIGTERM",
            }
        ),
        RunStatus::Error => "error".to_owned(),
    };
    text.push_str(&format!(
        "[{} · {summary} · {} · limits: {}]",
        outcome.status.as_str(),
        seconds(outcome.duration),
        describe_limits(decision)
    ));
    (text, structured)
}

/// One line naming the category and limits a decision applies.
pub fn describe_limits(decision: &Decision) -> String {
    let limits = format!(
        "exec {}, no output {}",
        seconds(decision.limits.exec),
        seconds(decision.limits.no_output)
    );
    match (&decision.source, &decision.category) {
        (DecisionSource::Explicit, _) => format!("explicit timeout ({limits})"),
        (DecisionSource::Pattern { pattern, .. }, Some(category)) => {
            format!("{category} ({limits}; matched {pattern:?})")
        }
        (_, Some(category)) => format!("{category} ({limits}; default category)"),
        (_, None) => limits,
    }
}

/// Structured result of `policy_explain`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ExplainOutput {
    /// The category, or null when an explicit timeout decides.
    pub category: Option<String>,
    /// `explicit`, `pattern` or `default`.
    pub source: &'static str,
    /// The pattern that matched, for `pattern`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// The execution limit, in seconds.
    pub exec_timeout_sec: f64,
    /// The no-output limit, in seconds.
    pub no_output_timeout_sec: f64,
    /// Where the policy came from.
    pub policy: String,
}

/// The structured result and text of a policy explanation.
pub fn explain(command: &str, decision: &Decision, origin: &str) -> (String, ExplainOutput) {
    let (source, pattern) = match &decision.source {
        DecisionSource::Explicit => ("explicit", None),
        DecisionSource::Pattern { pattern, .. } => ("pattern", Some(pattern.clone())),
        DecisionSource::Default => ("default", None),
    };
    let output = ExplainOutput {
        category: decision.category.clone(),
        source,
        pattern,
        exec_timeout_sec: decision.limits.exec.as_secs_f64(),
        no_output_timeout_sec: decision.limits.no_output.as_secs_f64(),
        policy: origin.to_owned(),
    };
    let text = format!("{command:?}: {} [policy: {origin}]", describe_limits(decision));
    (text, output)
}
