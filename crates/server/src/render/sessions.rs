//! The words of sessions: the `sessions` listing, `session_close`'s
//! reply, and the lines that say a session was started or that `record`
//! did not apply.
//!
//! Not for the registry's rules (the engine's) nor for the tool calls
//! (`tools/sessions.rs`, `tools/session_close.rs`). Each row of a listing
//! and its structured row carry the same facts.

use std::time::{Duration, SystemTime};

use rmcp::schemars::{self, JsonSchema};
use serde::Serialize;
use shellkeep_engine::{Activity, LastWords};
use shellkeep_engine::{RegistryLimits, SessionInfo};

use super::jobs::{JobStart, job_started, prompt_words};
use super::units::{bytes, round_secs, seconds, span};
use super::{Blocks, capped_echo, in_text, sandbox};

/// How the session of a `terminal` call was found, for the reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SessionNote {
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
pub(crate) fn session_opened(name: &str, note: &SessionNote) -> Option<String> {
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
pub(crate) fn recording_off() -> String {
    "record=true needs a server started with --record DIR (or SHELLKEEP_RECORD): this server \
     records no session. Omit record, or ask the person running the server to add --record."
        .to_owned()
}

/// The line that says `record` did not apply: the session already ran,
/// recorded or not.
pub(crate) fn record_ignored(name: &str, recorded: bool) -> String {
    let state = if recorded { "is recorded" } else { "is not recorded" };
    format!(
        "[record applies only to the call that starts a session: session {name:?} was already \
         running and {state}; close it with session_close to start it again.]"
    )
}

/// Structured result of the `sessions` tool.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct SessionsOutput {
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
pub(crate) struct SessionRow {
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

/// The text and structured content of the `sessions` listing, as of
/// `now` (how long each session has sat idle).
pub(crate) fn sessions(
    rows: &[SessionInfo],
    limits: RegistryLimits,
    now: SystemTime,
) -> (String, SessionsOutput) {
    let mut text = listing_header(rows, limits);
    let mut out = Vec::new();
    for row in rows {
        let idle = now.duration_since(row.last_used).unwrap_or_default();
        let state = RowState::of(row);
        text.push_str(&row_line(row, &state, idle));
        out.push(row_fields(row, state, idle));
    }
    let structured = SessionsOutput {
        sessions: out,
        max_sessions: limits.max_sessions as u32,
        idle_expiry_sec: round_secs(limits.idle_expiry),
        job_keep_sec: round_secs(limits.job_keep),
    };
    (text.trim_end().to_owned(), structured)
}

/// The first line of a listing: how many sessions are open of how many,
/// when idle ones close, and the ended background jobs, which are not
/// counted against the limit and so are told apart.
fn listing_header(rows: &[SessionInfo], limits: RegistryLimits) -> String {
    let ended = rows.iter().filter(|row| row.job_end.is_some()).count();
    let ended_jobs = match ended {
        0 => String::new(),
        n => format!(
            "; and {n} ended background job{}, not counted, each closed {} after its end",
            if n == 1 { "" } else { "s" },
            span(limits.job_keep)
        ),
    };
    format!(
        "{} of at most {} sessions open (idle sessions close after {}{ended_jobs}):\n",
        rows.len() - ended,
        limits.max_sessions,
        seconds(limits.idle_expiry)
    )
}

/// What a listed session is doing, as its row states it.
struct RowState {
    /// The `state` field's value.
    state: &'static str,
    /// The command running or finished (cut).
    command: Option<String>,
    /// How long the running command has run.
    running: Option<Duration>,
    /// The finished command's or the ended job's exit code.
    exit_code: Option<i32>,
}

impl RowState {
    /// The state of `row`. An ended job is told by its end, whatever its
    /// shell shows.
    fn of(row: &SessionInfo) -> RowState {
        if let (Some(end), Some(job)) = (&row.job_end, &row.background) {
            let command = Some(capped_echo(job));
            return RowState {
                state: "ended",
                command,
                running: None,
                exit_code: Some(end.exit_code),
            };
        }
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
        RowState { state, command, running, exit_code }
    }

    /// What the row says the session is doing.
    fn doing(&self, row: &SessionInfo) -> String {
        match (self.state, &self.command, self.running, self.exit_code, row.job_end) {
            ("ended", Some(c), _, Some(code), Some(end)) => format!(
                "{c:?} ended with exit code {code} after {}; closes in {}",
                seconds(end.ran_for),
                span(end.closes_in)
            ),
            ("running", Some(c), Some(t), ..) => format!("running {c:?} for {}", seconds(t)),
            ("waiting_for_input", Some(c), Some(t), ..) => format!(
                "{c:?} is waiting for input (running for {}){}",
                seconds(t),
                row.prompt.as_deref().map(prompt_words).unwrap_or_default()
            ),
            ("finished", Some(c), _, Some(code), _) => {
                format!("{c:?} ended with exit code {code} (not yet reported)")
            }
            ("not_started", ..) => "not started yet".to_owned(),
            _ => "idle at the prompt".to_owned(),
        }
    }
}

/// The line of a listing for `row`, idle for `idle`.
fn row_line(row: &SessionInfo, state: &RowState, idle: Duration) -> String {
    let kind = if row.background.is_some() { "background job; " } else { "" };
    let boxed = sandbox::short(&row.sandbox).map(|s| format!("; sandbox {s}")).unwrap_or_default();
    format!(
        "- {}: {kind}{}; cwd {}{boxed}; {} process{}; {} of output kept; last used {} ago\n",
        row.name,
        state.doing(row),
        in_text(&row.cwd),
        row.processes,
        if row.processes == 1 { "" } else { "es" },
        bytes(row.output_bytes),
        seconds(idle),
    )
}

/// The structured row of `row`, idle for `idle`: the facts of its line.
fn row_fields(row: &SessionInfo, state: RowState, idle: Duration) -> SessionRow {
    let RowState { state, command, running, exit_code } = state;
    SessionRow {
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
        sandbox: sandbox::short(&row.sandbox),
    }
}

/// Structured result of `session_close`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct SessionClosedOutput {
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
pub(crate) fn session_closed(
    name: &str,
    last: &LastWords,
    reset: bool,
) -> (Blocks, SessionClosedOutput) {
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
    use super::*;

    #[test]
    fn an_ended_job_is_listed_apart_with_its_end_and_its_closing() {
        use shellkeep_engine::JobEnd;
        let row = |name: &str, activity: Activity, job_end: Option<JobEnd>| SessionInfo {
            name: name.to_owned(),
            cwd: "/p".into(),
            activity,
            background: job_end.map(|_| "make test".to_owned()),
            job_end,
            last_used: now(),
            processes: 1,
            waiting_for_input: false,
            prompt: None,
            output_bytes: 12,
            sandbox: shellkeep_engine::SandboxPolicy::off(),
        };
        let end = JobEnd {
            exit_code: 2,
            ran_for: Duration::from_millis(2_040),
            closes_in: Duration::from_secs(599),
        };
        // Its shell may still show the command as finished: the end wins.
        let finished = Activity::Finished { command: "make test".to_owned(), exit_code: 2 };
        let rows = [row("default", Activity::Idle, None), row("job-1", finished, Some(end))];
        let (text, structured) = sessions(&rows, RegistryLimits::default(), now());
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

    /// The time the listings of these tests are taken at.
    fn now() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
    }

    /// A row of a listing: `name`, used `idle_secs` ago, doing `activity`.
    fn listed(name: &str, activity: Activity, idle_secs: u64) -> SessionInfo {
        SessionInfo {
            name: name.to_owned(),
            cwd: "/home/me/project".into(),
            activity,
            background: None,
            job_end: None,
            last_used: now() - Duration::from_secs(idle_secs),
            processes: 1,
            waiting_for_input: false,
            prompt: None,
            output_bytes: 0,
            sandbox: shellkeep_engine::SandboxPolicy::off(),
        }
    }

    fn check_sessions(rows: &[SessionInfo], expected: expect_test::Expect) {
        let (text, structured) = sessions(rows, RegistryLimits::default(), now());
        expected.assert_eq(&super::super::snapshot(&text, &structured));
    }

    #[test]
    fn snapshot_sessions_none_open() {
        check_sessions(
            &[],
            expect_test::expect![[r#"
            0 of at most 16 sessions open (idle sessions close after 1800 s):
            -----
            {
              "sessions": [],
              "max_sessions": 16,
              "idle_expiry_sec": 1800.0,
              "job_keep_sec": 600.0
            }
        "#]],
        );
    }

    #[test]
    fn snapshot_sessions_several() {
        let running = Activity::Running {
            command: "cargo build".to_owned(),
            elapsed: Duration::from_millis(12_300),
        };
        let waiting =
            Activity::Running { command: "./migrate".to_owned(), elapsed: Duration::from_secs(4) };
        let finished = Activity::Finished { command: "make test".to_owned(), exit_code: 2 };
        let rows = [
            SessionInfo { output_bytes: 2_048, ..listed("default", Activity::Idle, 30) },
            SessionInfo { processes: 3, output_bytes: 5 << 20, ..listed("build", running, 0) },
            SessionInfo {
                waiting_for_input: true,
                prompt: Some("Apply 3 migrations? [y/N] ".to_owned()),
                ..listed("db", waiting, 0)
            },
            listed("tests", finished, 60),
            SessionInfo { processes: 0, ..listed("fresh", Activity::NotStarted, 5) },
            SessionInfo {
                background: Some("npm run dev".to_owned()),
                ..listed(
                    "job-1",
                    Activity::Running {
                        command: "npm run dev".to_owned(),
                        elapsed: Duration::from_secs(300),
                    },
                    0,
                )
            },
        ];
        check_sessions(
            &rows,
            expect_test::expect![[r#"
                6 of at most 16 sessions open (idle sessions close after 1800 s):
                - default: idle at the prompt; cwd /home/me/project; 1 process; 2.0 KiB of output kept; last used 30 s ago
                - build: running "cargo build" for 12 s; cwd /home/me/project; 3 processes; 5.0 MiB of output kept; last used 0 s ago
                - db: "./migrate" is waiting for input (running for 4 s); its prompt is "Apply 3 migrations? [y/N] "; cwd /home/me/project; 1 process; 0 B of output kept; last used 0 s ago
                - tests: "make test" ended with exit code 2 (not yet reported); cwd /home/me/project; 1 process; 0 B of output kept; last used 60 s ago
                - fresh: not started yet; cwd /home/me/project; 0 processes; 0 B of output kept; last used 5 s ago
                - job-1: background job; running "npm run dev" for 300 s; cwd /home/me/project; 1 process; 0 B of output kept; last used 0 s ago
                -----
                {
                  "sessions": [
                    {
                      "name": "default",
                      "cwd": "/home/me/project",
                      "state": "idle",
                      "background": false,
                      "idle_sec": 30.0,
                      "processes": 1,
                      "output_bytes": 2048
                    },
                    {
                      "name": "build",
                      "cwd": "/home/me/project",
                      "state": "running",
                      "command": "cargo build",
                      "running_sec": 12.3,
                      "background": false,
                      "idle_sec": 0.0,
                      "processes": 3,
                      "output_bytes": 5242880
                    },
                    {
                      "name": "db",
                      "cwd": "/home/me/project",
                      "state": "waiting_for_input",
                      "command": "./migrate",
                      "running_sec": 4.0,
                      "prompt": "Apply 3 migrations? [y/N] ",
                      "background": false,
                      "idle_sec": 0.0,
                      "processes": 1,
                      "output_bytes": 0
                    },
                    {
                      "name": "tests",
                      "cwd": "/home/me/project",
                      "state": "finished",
                      "command": "make test",
                      "exit_code": 2,
                      "background": false,
                      "idle_sec": 60.0,
                      "processes": 1,
                      "output_bytes": 0
                    },
                    {
                      "name": "fresh",
                      "cwd": "/home/me/project",
                      "state": "not_started",
                      "background": false,
                      "idle_sec": 5.0,
                      "processes": 0,
                      "output_bytes": 0
                    },
                    {
                      "name": "job-1",
                      "cwd": "/home/me/project",
                      "state": "running",
                      "command": "npm run dev",
                      "running_sec": 300.0,
                      "background": true,
                      "idle_sec": 0.0,
                      "processes": 1,
                      "output_bytes": 0
                    }
                  ],
                  "max_sessions": 16,
                  "idle_expiry_sec": 1800.0,
                  "job_keep_sec": 600.0
                }
            "#]],
        );
    }

    #[test]
    fn snapshot_sessions_of_a_sandboxed_principal() {
        // Over HTTP each principal lists only its own sessions, each in
        // the sandbox it was started in.
        let sandbox = shellkeep_engine::SandboxPolicy {
            mode: shellkeep_engine::SandboxMode::ReadOnly,
            network: false,
            ..shellkeep_engine::SandboxPolicy::off()
        };
        let rows = [SessionInfo { sandbox, ..listed("default", Activity::Idle, 12) }];
        check_sessions(
            &rows,
            expect_test::expect![[r#"
            1 of at most 16 sessions open (idle sessions close after 1800 s):
            - default: idle at the prompt; cwd /home/me/project; sandbox read-only, network off; 1 process; 0 B of output kept; last used 12 s ago
            -----
            {
              "sessions": [
                {
                  "name": "default",
                  "cwd": "/home/me/project",
                  "state": "idle",
                  "background": false,
                  "idle_sec": 12.0,
                  "processes": 1,
                  "output_bytes": 0,
                  "sandbox": "read-only, network off"
                }
              ],
              "max_sessions": 16,
              "idle_expiry_sec": 1800.0,
              "job_keep_sec": 600.0
            }
        "#]],
        );
    }

    fn check_closed(name: &str, last: &LastWords, reset: bool, expected: expect_test::Expect) {
        let (blocks, structured) = session_closed(name, last, reset);
        let text = blocks.into_texts().join("\n=====\n");
        expected.assert_eq(&super::super::snapshot(&text, &structured));
    }

    #[test]
    fn snapshot_session_close() {
        let last =
            |activity: Activity, output: &str| LastWords { activity, output: output.to_owned() };
        check_closed(
            "dev",
            &last(Activity::Idle, ""),
            false,
            expect_test::expect![[r#"
            [Session "dev" was closed (it was idle at its prompt); every process it ran was stopped.]
            -----
            {
              "session": "dev",
              "final_state": "idle",
              "reset": false,
              "last_output": ""
            }
        "#]],
        );
        let running = Activity::Running {
            command: "npm run dev".to_owned(),
            elapsed: Duration::from_millis(95_000),
        };
        check_closed(
            "dev",
            &last(running, "listening on :3000\n"),
            false,
            expect_test::expect![[r#"
                listening on :3000
                [Session "dev" was closed (it was running "npm run dev" for 95 s, now stopped); every process it ran was stopped.]
                -----
                {
                  "session": "dev",
                  "final_state": "running",
                  "command": "npm run dev",
                  "reset": false,
                  "last_output": "listening on :3000\n"
                }
            "#]],
        );
        let finished = Activity::Finished { command: "make".to_owned(), exit_code: 0 };
        check_closed(
            "default",
            &last(finished, "done\n"),
            true,
            expect_test::expect![[r#"
                done
                [Session "default" was reset ("make" had ended with exit code 0): a fresh shell in its start directory; every process it ran was stopped.]
                -----
                {
                  "session": "default",
                  "final_state": "finished",
                  "command": "make",
                  "reset": true,
                  "last_output": "done\n"
                }
            "#]],
        );
        check_closed(
            "new",
            &last(Activity::NotStarted, ""),
            false,
            expect_test::expect![[r#"
            [Session "new" was closed (it had not started); every process it ran was stopped.]
            -----
            {
              "session": "new",
              "final_state": "not_started",
              "reset": false,
              "last_output": ""
            }
        "#]],
        );
    }

    #[test]
    fn snapshot_session_notes() {
        let started = SessionNote::Started { cwd: "/srv/app".into(), expired_before: false };
        let expired = SessionNote::Started { cwd: "/srv/app".into(), expired_before: true };
        let job = SessionNote::Background(JobStart {
            cwd: "/srv/app".into(),
            venv: Some("/srv/app/.venv".into()),
            env_from: Some("default".to_owned()),
        });
        let lines = [
            session_opened("dev", &SessionNote::Existing).unwrap_or_default(),
            session_opened("dev", &started).unwrap_or_default(),
            session_opened("dev", &expired).unwrap_or_default(),
            session_opened("job-1", &job).unwrap_or_default(),
            recording_off(),
            record_ignored("dev", true),
            record_ignored("dev", false),
        ];
        expect_test::expect![[r#"

            [New session "dev" started in /srv/app.]
            [Session "dev" had expired after sitting idle, and its shell was closed; a new session was started in /srv/app.]
            [Background job started in session "job-1", in /srv/app (venv /srv/app/.venv), with the environment of session "default", which is free.]
            record=true needs a server started with --record DIR (or SHELLKEEP_RECORD): this server records no session. Omit record, or ask the person running the server to add --record.
            [record applies only to the call that starts a session: session "dev" was already running and is recorded; close it with session_close to start it again.]
            [record applies only to the call that starts a session: session "dev" was already running and is not recorded; close it with session_close to start it again.]"#]].assert_eq(&lines.join("\n"));
    }
}
