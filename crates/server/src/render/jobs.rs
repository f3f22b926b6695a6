//! The words of background jobs: where one started, why one was not,
//! and the notices of jobs that ended or began waiting for input, each
//! with its structured row.
//!
//! Not for running jobs (the engine's) nor for listing sessions
//! (`sessions.rs`). Every command a notice names is cut with
//! `capped_echo`, so a megabyte command never comes back whole.

use rmcp::schemars::{self, JsonSchema};
use serde::Serialize;
use shellkeep_engine::{JobEnded, JobWaiting};
use shellkeep_engine::{MAX_START_ENV, PlaceError, Reply};

use super::units::{bytes, round_secs, seconds, span};
use super::{Blocks, TerminalOutput, capped_echo, echo, in_text, terminal};

/// Where a background job started, for its start reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JobStart {
    /// Its directory.
    pub cwd: std::path::PathBuf,
    /// The active Python virtual environment, if any.
    pub venv: Option<std::path::PathBuf>,
    /// The session whose exported environment it has; `None`: the
    /// server's.
    pub env_from: Option<String>,
}

/// The line that says where a background job started.
pub(super) fn job_started(name: &str, job: &JobStart) -> String {
    let venv = job.venv.as_deref().map(|venv| format!(" (venv {})", in_text(venv)));
    let env = match &job.env_from {
        Some(from) => format!("the environment of session {from:?}, which is free"),
        None => "the server's environment".to_owned(),
    };
    format!(
        "[Background job started in session {name:?}, in {}{}, with {env}.]",
        in_text(&job.cwd),
        venv.unwrap_or_default()
    )
}

/// The reply that starts a background job still running: the started
/// line, its first output, and how to follow and stop it (not the notices
/// of a command that timed out: nothing did, and the calling session is
/// free).
pub(crate) fn background_started(
    name: &str,
    job: &JobStart,
    reply: &Reply,
) -> (Blocks, TerminalOutput) {
    let (_, mut structured) = terminal(reply);
    let started = job_started(name, job);
    let follow = format!(
        "[No time limit. Poll it with {{\"command\": \"\", \"session\": {name:?}}}, read all of \
         it with the output tool, stop it with session_close.]"
    );
    let mut text = Blocks::default();
    text.notice(&started);
    text.shown(&reply.output);
    text.notice(&follow);
    // `status: running` alone reads as "the terminal is busy": the fields
    // say it is a job of its own, and the notes how to follow it.
    structured.background = true;
    structured.no_time_limit = true;
    structured.notes = vec![started, follow];
    (text, structured)
}

/// Why a background job was not started: the session it starts from
/// (`from`) could not give its place.
pub(crate) fn job_place_error(from: &str, err: &PlaceError) -> String {
    let why = match err {
        PlaceError::Busy { command, elapsed } => format!(
            "session {from:?} is running {:?} ({} so far)",
            capped_echo(command),
            seconds(*elapsed)
        ),
        PlaceError::InUse => format!("another call on session {from:?} is in progress"),
        PlaceError::NotAtPrompt { pid, command_line } => format!(
            "the shell of session {from:?} is not at its prompt: process {pid} (`{}`) has the \
             terminal",
            capped_echo(command_line)
        ),
        PlaceError::TooLarge => format!(
            "the exported environment of session {from:?} is larger than {}, the most a job takes",
            bytes(MAX_START_ENV)
        ),
        PlaceError::Failed(why) => format!(
            "the environment of session {from:?} could not be read ({})",
            capped_echo(&super::session_words::place_failure(why))
        ),
    };
    let what = match err {
        PlaceError::Busy { .. } | PlaceError::InUse | PlaceError::NotAtPrompt { .. } => {
            "A job starts in the directory and with the exported environment of that session's \
             shell, read at its prompt: wait for the command to end (poll it with {\"command\": \
             \"\"}) or stop it (C-c), or run the job in a named session of its own \
             ({\"command\": \"cd DIR && …\", \"session\": \"dev\"})."
        }
        PlaceError::TooLarge => "Unset its largest exported variables, then start the job again.",
        PlaceError::Failed(_) => "reset=true gives that session a working shell.",
    };
    format!("The background job was NOT started: {why}. {what}")
}

/// Why a background job was not started: the directory of the session it
/// starts from (`from`) is gone.
pub(crate) fn job_dir_gone(from: &str, dir: &std::path::Path) -> String {
    format!(
        "The background job was NOT started: session {from:?} is in {}, which is no longer a \
         directory. `cd` to one that exists there, or give `cwd`.",
        in_text(dir)
    )
}

/// A background job that ended, in structured content.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct JobEndedOutput {
    /// The job's session.
    pub session: String,
    /// Its command (cut to 200 characters).
    pub command: String,
    /// Its exit code.
    pub exit_code: i32,
    /// How long it ran, in seconds.
    pub ran_sec: f64,
    /// Seconds its session, and its output, are kept from now (unless
    /// used again), before the session is closed.
    pub kept_sec: f64,
}

/// The text and structured content announcing ended background jobs.
pub(crate) fn jobs_ended(ended: &[JobEnded]) -> (String, serde_json::Value) {
    let mut text = String::new();
    let mut rows = Vec::new();
    for job in ended {
        let command = capped_echo(&job.command);
        text.push_str(&format!(
            "[Background job in session {:?} ({command:?}) ended with exit code {} after {}; its \
             output stays readable until the session closes in {}.]\n",
            job.session,
            job.exit_code,
            seconds(job.ran_for),
            span(job.kept_for)
        ));
        rows.push(JobEndedOutput {
            session: job.session.clone(),
            command,
            exit_code: job.exit_code,
            ran_sec: round_secs(job.ran_for),
            kept_sec: round_secs(job.kept_for),
        });
    }
    (text.trim_end().to_owned(), serde_json::to_value(rows).unwrap_or_default())
}

/// A background job that began waiting for input, in structured content.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct JobWaitingOutput {
    /// The job's session.
    pub session: String,
    /// Its command (cut to 200 characters).
    pub command: String,
    /// Its prompt, the text on its cursor's line (cut to 200 characters;
    /// empty when it shows none).
    pub prompt: String,
}

/// The text and structured content announcing background jobs that began
/// waiting for input, each once per wait.
pub(crate) fn jobs_waiting(waiting: &[JobWaiting]) -> (String, serde_json::Value) {
    let mut text = String::new();
    let mut rows = Vec::new();
    for job in waiting {
        let command = capped_echo(&job.command);
        text.push_str(&format!(
            "[Background job in session {:?} ({command:?}) waits for input{}. Answer it with \
             {{\"command\": \"<answer>\", \"is_input\": true, \"session\": {:?}}}.]\n",
            job.session,
            prompt_words(&job.prompt),
            job.session,
        ));
        rows.push(JobWaitingOutput {
            session: job.session.clone(),
            command,
            prompt: capped_echo(&job.prompt),
        });
    }
    (text.trim_end().to_owned(), serde_json::to_value(rows).unwrap_or_default())
}

/// How a wait for input's prompt reads after "waits for input".
pub(super) fn prompt_words(prompt: &str) -> String {
    if prompt.trim().is_empty() {
        " with no prompt (C-d ends input)".to_owned()
    } else {
        format!("; its prompt is {}", echo(prompt))
    }
}

#[cfg(test)]
mod tests {
    use shellkeep_engine::PlaceFailure;
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_waiting_job_is_announced_with_its_prompt_and_how_to_answer() {
        let job = |prompt: &str| JobWaiting {
            session: "job-1".to_owned(),
            command: "./migrate".to_owned(),
            prompt: prompt.to_owned(),
        };
        let (text, structured) = jobs_waiting(&[job("Apply 3 migrations? [y/N] ")]);
        assert_eq!(
            text,
            "[Background job in session \"job-1\" (\"./migrate\") waits for input; its prompt is \
             \"Apply 3 migrations? [y/N] \". Answer it with {\"command\": \"<answer>\", \
             \"is_input\": true, \"session\": \"job-1\"}.]"
        );
        assert_eq!(structured[0]["prompt"], "Apply 3 migrations? [y/N] ");
        let (text, _) = jobs_waiting(&[job("")]);
        assert!(text.contains("waits for input with no prompt (C-d ends input)."), "{text}");
    }

    #[test]
    fn a_job_end_says_how_long_its_output_stays() {
        let ended = JobEnded {
            session: "job-1".to_owned(),
            command: "sleep 2".to_owned(),
            exit_code: 0,
            ran_for: Duration::from_millis(2_003),
            kept_for: Duration::from_secs(600),
        };
        let (text, structured) = jobs_ended(&[ended]);
        assert_eq!(
            text,
            "[Background job in session \"job-1\" (\"sleep 2\") ended with exit code 0 after 2.0 \
             s; its output stays readable until the session closes in 10 minutes.]"
        );
        assert_eq!(structured[0]["ran_sec"], 2.0);
        assert_eq!(structured[0]["kept_sec"], 600.0);
    }

    #[test]
    fn snapshot_jobs_ended() {
        let ended = |session: &str, command: &str, exit_code: i32, ran_ms: u64| JobEnded {
            session: session.to_owned(),
            command: command.to_owned(),
            exit_code,
            ran_for: Duration::from_millis(ran_ms),
            kept_for: Duration::from_secs(600),
        };
        let long = format!("echo {}", "x".repeat(300));
        let (text, structured) = jobs_ended(&[
            ended("job-1", "make test", 0, 2_003),
            ended("job-2", &long, 137, 95_000),
        ]);
        expect_test::expect![[r#"
            [Background job in session "job-1" ("make test") ended with exit code 0 after 2.0 s; its output stays readable until the session closes in 10 minutes.]
            [Background job in session "job-2" ("echo xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…") ended with exit code 137 after 95 s; its output stays readable until the session closes in 10 minutes.]
            -----
            [
              {
                "session": "job-1",
                "command": "make test",
                "exit_code": 0,
                "ran_sec": 2.0,
                "kept_sec": 600.0
              },
              {
                "session": "job-2",
                "command": "echo xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…",
                "exit_code": 137,
                "ran_sec": 95.0,
                "kept_sec": 600.0
              }
            ]
        "#]].assert_eq(&super::super::snapshot(&text, &structured));
    }

    #[test]
    fn snapshot_jobs_waiting() {
        let waiting = |prompt: &str| JobWaiting {
            session: "job-1".to_owned(),
            command: "./migrate".to_owned(),
            prompt: prompt.to_owned(),
        };
        let (text, structured) = jobs_waiting(&[waiting("Password: "), waiting("")]);
        expect_test::expect![[r#"
            [Background job in session "job-1" ("./migrate") waits for input; its prompt is "Password: ". Answer it with {"command": "<answer>", "is_input": true, "session": "job-1"}.]
            [Background job in session "job-1" ("./migrate") waits for input with no prompt (C-d ends input). Answer it with {"command": "<answer>", "is_input": true, "session": "job-1"}.]
            -----
            [
              {
                "session": "job-1",
                "command": "./migrate",
                "prompt": "Password: "
              },
              {
                "session": "job-1",
                "command": "./migrate",
                "prompt": ""
              }
            ]
        "#]].assert_eq(&super::super::snapshot(&text, &structured));
    }

    #[test]
    fn snapshot_jobs_not_started() {
        let errors = [
            PlaceError::Busy { command: "make".to_owned(), elapsed: Duration::from_millis(4_500) },
            PlaceError::InUse,
            PlaceError::NotAtPrompt { pid: 4242, command_line: "vim notes.txt".to_owned() },
            PlaceError::TooLarge,
            PlaceError::Failed(PlaceFailure::Empty { last_line: "env: broken pipe".to_owned() }),
        ];
        let mut lines: Vec<String> =
            errors.iter().map(|err| job_place_error("default", err)).collect();
        lines.push(job_dir_gone("default", std::path::Path::new("/tmp/gone")));
        expect_test::expect![[r#"
            The background job was NOT started: session "default" is running "make" (4.5 s so far). A job starts in the directory and with the exported environment of that session's shell, read at its prompt: wait for the command to end (poll it with {"command": ""}) or stop it (C-c), or run the job in a named session of its own ({"command": "cd DIR && …", "session": "dev"}).
            The background job was NOT started: another call on session "default" is in progress. A job starts in the directory and with the exported environment of that session's shell, read at its prompt: wait for the command to end (poll it with {"command": ""}) or stop it (C-c), or run the job in a named session of its own ({"command": "cd DIR && …", "session": "dev"}).
            The background job was NOT started: the shell of session "default" is not at its prompt: process 4242 (`vim notes.txt`) has the terminal. A job starts in the directory and with the exported environment of that session's shell, read at its prompt: wait for the command to end (poll it with {"command": ""}) or stop it (C-c), or run the job in a named session of its own ({"command": "cd DIR && …", "session": "dev"}).
            The background job was NOT started: the exported environment of session "default" is larger than 1.0 MiB, the most a job takes. Unset its largest exported variables, then start the job again.
            The background job was NOT started: the environment of session "default" could not be read (env: broken pipe). reset=true gives that session a working shell.
            The background job was NOT started: session "default" is in /tmp/gone, which is no longer a directory. `cd` to one that exists there, or give `cwd`."#]].assert_eq(&lines.join("\n"));
    }
}
