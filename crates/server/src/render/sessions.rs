//! The words of sessions: the `sessions` listing, `session_close`'s
//! reply, and the lines that say a session was started or that `record`
//! did not apply.
//!
//! Not for the registry's rules (the engine's) nor for the tool calls
//! (`tools/sessions.rs`, `tools/session_close.rs`). Each row of a listing
//! and its structured row carry the same facts.

use rmcp::schemars::{self, JsonSchema};
use serde::Serialize;
use shellkeep_engine::registry::{RegistryLimits, SessionInfo};
use shellkeep_engine::session::{Activity, LastWords};

use super::jobs::{JobStart, job_started, prompt_words};
use super::units::{bytes, round_secs, seconds, span};
use super::{Blocks, capped_echo, in_text, sandbox};

/// How the session of a `terminal` call was found, for the reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionNote {
    /// It existed.
    Existing,
    /// It was started in `cwd`; its name had expired before.
    Started {
        /// Where its shell started.
        cwd: std::path::PathBuf,
        /// The name belonged to a session closed for idling.
        expired_before: bool,
    },
    /// A background job's session was started.
    Background(JobStart),
}

/// The line that says a session was started, if one was.
pub fn session_opened(name: &str, note: &SessionNote) -> Option<String> {
    match note {
        SessionNote::Existing => None,
        SessionNote::Started { cwd, expired_before: false } => {
            Some(format!("[New session {name:?} started in {}.]", in_text(cwd)))
        }
        SessionNote::Started { cwd, expired_before: true } => Some(format!(
            "[Session {name:?} had expired after sitting idle, and its shell was closed; a new \
             session was started in {}.]",
            in_text(cwd)
        )),
        SessionNote::Background(job) => Some(job_started(name, job)),
    }
}

/// Why `record=true` was refused: this server records nothing.
pub fn recording_off() -> String {
    "record=true needs a server started with --record DIR (or SHELLKEEP_RECORD): this server \
     records no session. Omit record, or ask the person running the server to add --record."
        .to_owned()
}

/// The line that says `record` did not apply: the session already ran,
/// recorded or not.
pub fn record_ignored(name: &str, recorded: bool) -> String {
    let state = if recorded { "is recorded" } else { "is not recorded" };
    format!(
        "[record applies only to the call that starts a session: session {name:?} was already \
         running and {state}; close it with session_close to start it again.]"
    )
}

/// Structured result of the `sessions` tool.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SessionsOutput {
    /// The open sessions, `default` first.
    pub sessions: Vec<SessionRow>,
    /// The most sessions that may be open at once.
    pub max_sessions: u32,
    /// Seconds a session may sit idle at its prompt before it is closed.
    pub idle_expiry_sec: f64,
    /// Seconds an ended background job's session is kept after its end.
    pub job_keep_sec: f64,
}

/// One session in the `sessions` listing.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SessionRow {
    /// Its name.
    pub name: String,
    /// Its working directory.
    pub cwd: String,
    /// `idle`, `running`, `waiting_for_input`, `finished` (ended, not yet
    /// reported), `ended` (a background job that ended) or `not_started`.
    pub state: &'static str,
    /// The command running or finished.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// How long the command has run, in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub running_sec: Option<f64>,
    /// The finished command's exit code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// A command waiting for input: its prompt (cut to 200 characters;
    /// empty when it shows none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// An ended background job: how long it ran, in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ran_sec: Option<f64>,
    /// An ended background job: seconds until its session is closed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub closes_in_sec: Option<f64>,
    /// Whether it was started as a background job.
    pub background: bool,
    /// Seconds since a call last used it.
    pub idle_sec: f64,
    /// Live processes in it, its shell included.
    pub processes: u32,
    /// Bytes of command output it keeps (readable with the `output` tool).
    pub output_bytes: u64,
    /// Its sandbox, when it has one: the mode and the network
    /// (`read-only, network off`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
}

/// The text and structured content of the `sessions` listing.
pub fn sessions(rows: &[SessionInfo], limits: RegistryLimits) -> (String, SessionsOutput) {
    let now = std::time::SystemTime::now();
    // Ended jobs are not counted against the limit, so they are told apart.
    let ended = rows.iter().filter(|row| row.job_end.is_some()).count();
    let ended_jobs = match ended {
        0 => String::new(),
        n => format!(
            "; and {n} ended background job{}, not counted, each closed {} after its end",
            if n == 1 { "" } else { "s" },
            span(limits.job_keep)
        ),
    };
    let mut text = format!(
        "{} of at most {} sessions open (idle sessions close after {}{ended_jobs}):\n",
        rows.len() - ended,
        limits.max_sessions,
        seconds(limits.idle_expiry)
    );
    let mut out = Vec::new();
    for row in rows {
        let idle = now.duration_since(row.last_used).unwrap_or_default();
        let (state, command, running, exit_code) = match &row.activity {
            Activity::NotStarted => ("not_started", None, None, None),
            Activity::Idle => ("idle", None, None, None),
            Activity::Running { command, elapsed } => {
                let state = if row.waiting_for_input { "waiting_for_input" } else { "running" };
                (state, Some(capped_echo(command)), Some(*elapsed), None)
            }
            Activity::Finished { command, exit_code } => {
                ("finished", Some(capped_echo(command)), None, Some(*exit_code))
            }
        };
        // An ended job is told by its end, whatever its shell shows.
        let (state, command, exit_code) = match (&row.job_end, &row.background) {
            (Some(end), Some(job)) => ("ended", Some(capped_echo(job)), Some(end.exit_code)),
            _ => (state, command, exit_code),
        };
        let what = match (state, &command, running, exit_code) {
            ("ended", Some(c), _, Some(code)) => {
                let end = row.job_end.expect("an ended job");
                format!(
                    "{c:?} ended with exit code {code} after {}; closes in {}",
                    seconds(end.ran_for),
                    span(end.closes_in)
                )
            }
            ("running", Some(c), Some(t), _) => format!("running {c:?} for {}", seconds(t)),
            ("waiting_for_input", Some(c), Some(t), _) => format!(
                "{c:?} is waiting for input (running for {}){}",
                seconds(t),
                row.prompt.as_deref().map(prompt_words).unwrap_or_default()
            ),
            ("finished", Some(c), _, Some(code)) => {
                format!("{c:?} ended with exit code {code} (not yet reported)")
            }
            ("not_started", ..) => "not started yet".to_owned(),
            _ => "idle at the prompt".to_owned(),
        };
        let kind = if row.background.is_some() { "background job; " } else { "" };
        let sandbox = sandbox::short(&row.sandbox);
        let boxed = sandbox.as_deref().map(|s| format!("; sandbox {s}")).unwrap_or_default();
        text.push_str(&format!(
            "- {}: {kind}{what}; cwd {}{boxed}; {} process{}; {} of output kept; last used {} \
             ago\n",
            row.name,
            in_text(&row.cwd),
            row.processes,
            if row.processes == 1 { "" } else { "es" },
            bytes(row.output_bytes),
            seconds(idle),
        ));
        out.push(SessionRow {
            name: row.name.clone(),
            cwd: row.cwd.display().to_string(),
            state,
            command,
            running_sec: running.filter(|_| state != "ended").map(round_secs),
            exit_code,
            prompt: row.prompt.as_deref().filter(|_| state == "waiting_for_input").map(capped_echo),
            ran_sec: row.job_end.map(|end| round_secs(end.ran_for)),
            closes_in_sec: row.job_end.map(|end| round_secs(end.closes_in)),
            background: row.background.is_some(),
            idle_sec: round_secs(idle),
            processes: row.processes as u32,
            output_bytes: row.output_bytes,
            sandbox,
        });
    }
    let structured = SessionsOutput {
        sessions: out,
        max_sessions: limits.max_sessions as u32,
        idle_expiry_sec: round_secs(limits.idle_expiry),
        job_keep_sec: round_secs(limits.job_keep),
    };
    (text.trim_end().to_owned(), structured)
}

/// Structured result of `session_close`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SessionClosedOutput {
    /// The session.
    pub session: String,
    /// What it was doing when closed: `idle`, `running`, `finished` or
    /// `not_started`.
    pub final_state: &'static str,
    /// The command it was running, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// True for `default`, which is reset rather than removed.
    pub reset: bool,
    /// Its last lines of output that no reply had shown; when there are
    /// none, the last lines of its last command. Always last.
    pub last_output: String,
}

/// The text and structured content of a closed session.
pub fn session_closed(name: &str, last: &LastWords, reset: bool) -> (Blocks, SessionClosedOutput) {
    let (state, command, what) = match &last.activity {
        Activity::NotStarted => ("not_started", None, "it had not started".to_owned()),
        Activity::Idle => ("idle", None, "it was idle at its prompt".to_owned()),
        Activity::Running { command, elapsed } => {
            let command = capped_echo(command);
            let what = format!("it was running {command:?} for {}, now stopped", seconds(*elapsed));
            ("running", Some(command), what)
        }
        Activity::Finished { command, exit_code } => {
            let command = capped_echo(command);
            let what = format!("{command:?} had ended with exit code {exit_code}");
            ("finished", Some(command), what)
        }
    };
    let mut text = Blocks::default();
    text.output(&last.output);
    if reset {
        text.notice(&format!(
            "[Session {name:?} was reset ({what}): a fresh shell in its start directory; every \
             process it ran was stopped.]"
        ));
    } else {
        text.notice(&format!(
            "[Session {name:?} was closed ({what}); every process it ran was stopped.]"
        ));
    }
    let structured = SessionClosedOutput {
        session: name.to_owned(),
        final_state: state,
        command,
        reset,
        last_output: last.output.clone(),
    };
    (text, structured)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn an_ended_job_is_listed_apart_with_its_end_and_its_closing() {
        use shellkeep_engine::registry::JobEnd;
        let row = |name: &str, activity: Activity, job_end: Option<JobEnd>| SessionInfo {
            name: name.to_owned(),
            cwd: "/p".into(),
            activity,
            background: job_end.map(|_| "make test".to_owned()),
            job_end,
            last_used: std::time::SystemTime::now(),
            processes: 1,
            waiting_for_input: false,
            prompt: None,
            output_bytes: 12,
            sandbox: shellkeep_engine::sandbox::Policy::off(),
        };
        let end = JobEnd {
            exit_code: 2,
            ran_for: Duration::from_millis(2_040),
            closes_in: Duration::from_secs(599),
        };
        // Its shell may still show the command as finished: the end wins.
        let finished = Activity::Finished { command: "make test".to_owned(), exit_code: 2 };
        let rows = [row("default", Activity::Idle, None), row("job-1", finished, Some(end))];
        let (text, structured) = sessions(&rows, RegistryLimits::default());
        let mut lines = text.lines();
        assert_eq!(
            lines.next(),
            Some(
                "1 of at most 16 sessions open (idle sessions close after 1800 s; and 1 ended \
                 background job, not counted, each closed 10 minutes after its end):"
            )
        );
        let job = lines.nth(1).expect("the job's row");
        assert!(
            job.starts_with(
                "- job-1: background job; \"make test\" ended with exit code 2 after 2.0 s; \
                 closes in 599 s; cwd /p;"
            ),
            "{job}"
        );
        let job = &structured.sessions[1];
        assert_eq!((job.state, job.exit_code, job.ran_sec), ("ended", Some(2), Some(2.0)));
        assert_eq!((job.closes_in_sec, job.running_sec), (Some(599.0), None));
    }
}
