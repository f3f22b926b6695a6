//! A `run` reply's words and structured content: the seed's fields (status,
//! exit code, timeout reason, termination mode, duration), the limits that
//! applied, the two streams with what was cut and the `output` calls that
//! read it, and the notices an agent acts on.
//!
//! Not here: running the command (the engine's `oneshot`), the sandbox's
//! sentences (`sandbox`), or the notices every reply carries (`tools`).
//!
//! Invariant: the text and the structured content each carry every fact of
//! the reply; the snapshot tests below are the record of every word.

use super::output::OutputCall;
use schemars::JsonSchema;
use serde::Serialize;
use shellkeep_engine::Shown;
use shellkeep_engine::Stream;
use shellkeep_engine::TerminationMode;
use shellkeep_engine::{Decision, DecisionSource};
use shellkeep_engine::{RunEnd, RunOutcome, TimeoutReason};

use super::{
    Blocks, LimitHitOutput, Text, full_cut, full_path, is_zero, limit_hit_facts, limit_hit_line,
    round_secs, seconds, terminal,
};
use rmcp::schemars;

/// Structured result of the `run` tool: the seed's fields, plus what was
/// applied and where cut output went. The status and exit code come first
/// and the two streams last (stdout, then stderr), with what was cut and
/// the calls that read it before them, so a client that shows only the
/// start of a long reply, or cuts its middle, keeps the facts.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunOutput {
    /// `success` (ran to completion, whatever its exit code), `timeout` (a
    /// limit fired and the command was killed) or `error` (it could not
    /// start, or was cancelled).
    pub status: &'static str,
    /// The exit code; 128+N when killed by signal N; -1 on timeout or error.
    pub exit_code: i32,
    /// `exec_timeout` or `no_output_timeout` when a limit fired.
    pub timeout_reason: Option<&'static str>,
    /// `soft` (ended after SIGTERM) or `hard` (needed SIGKILL).
    pub termination_mode: Option<&'static str>,
    /// Wall time in whole milliseconds.
    pub duration_ms: u64,
    /// The policy category applied, or null for an explicit timeout.
    pub category: Option<String>,
    /// The policy pattern that chose the category, when one matched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// The execution limit applied, in seconds (one decimal).
    pub exec_timeout_sec: f64,
    /// The no-output limit applied, in seconds (one decimal).
    pub no_output_timeout_sec: f64,
    /// How many secret values in stdout and stderr were replaced by
    /// `<secret-hidden>`.
    #[serde(skip_serializing_if = "is_zero")]
    pub secrets_masked: u64,
    /// The resource limits that stopped something in the command, as the
    /// kernel counted them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub limit_hit: Vec<LimitHitOutput>,
    /// The reply's notices besides its fields, worded as in the text (what
    /// to do about a silent command that was stopped).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// When stdout was cut: characters left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdout_omitted_chars: Option<u64>,
    /// When stdout was cut: lines left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdout_omitted_lines: Option<u64>,
    /// When stdout was cut: the arguments of the `output` call that reads
    /// the lines left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdout_output_call: Option<OutputCall>,
    /// When stderr was cut: characters left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr_omitted_chars: Option<u64>,
    /// When stderr was cut: lines left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr_omitted_lines: Option<u64>,
    /// When stderr was cut: the arguments of the `output` call that reads
    /// the lines left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr_output_call: Option<OutputCall>,
    /// The file with the complete stdout, when it was cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub full_stdout_path: Option<String>,
    /// The file with the complete stderr, when it was cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub full_stderr_path: Option<String>,
    /// Where and why the stdout file was cut, when it reached its limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub full_stdout_cut: Option<String>,
    /// Where and why the stderr file was cut, when it reached its limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub full_stderr_cut: Option<String>,
    /// Why the complete stdout could not be saved, when it was cut and no
    /// file holds it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub full_stdout_error: Option<String>,
    /// Why the complete stderr could not be saved, when it was cut and no
    /// file holds it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub full_stderr_error: Option<String>,
    /// Standard output (head and tail when cut; the two streams share one
    /// cap).
    pub stdout: String,
    /// Standard error (head and tail when cut). Always last.
    pub stderr: String,
}

/// The structured result and readable text of a `run`: the streams, a
/// footer with the end and the limits, then the notices.
pub(crate) fn run(outcome: &RunOutcome, decision: &Decision) -> (Blocks, RunOutput) {
    let mut structured = structured(outcome, decision);
    let mut text = Text::default();
    text.output(&outcome.stdout);
    if !outcome.stderr.text.is_empty() {
        text.line("[stderr]".to_owned());
        text.output(&outcome.stderr);
    }
    text.line(footer(outcome, decision));
    for hit in &outcome.limit_hits {
        text.note(limit_hit_line(hit, "this command"));
    }
    if outcome.timeout_reason() == Some(TimeoutReason::NoOutput) {
        text.note(
            "[If it is silent by nature, run it with no_output_timeout_sec: the seconds of \
             silence to allow.]"
                .to_owned(),
        );
    }
    for (name, call) in
        [("stdout", &structured.stdout_output_call), ("stderr", &structured.stderr_output_call)]
    {
        if let Some(call) = call {
            text.line(format!(
                "[Read the lines of {name} left out with the output tool: {}]",
                call.arguments()
            ));
        }
    }
    if let Some(line) = terminal::masked_note(structured.secrets_masked) {
        text.line(line);
    }
    structured.notes = text.notes;
    (text.blocks, structured)
}

/// The structured content of a `run`, its notes still empty.
fn structured(outcome: &RunOutcome, decision: &Decision) -> RunOutput {
    let omitted = |shown: &Shown, count: fn(&Shown) -> u64| shown.truncated.then(|| count(shown));
    RunOutput {
        status: outcome.status().as_str(),
        exit_code: outcome.exit_code(),
        timeout_reason: outcome.timeout_reason().map(|r| r.as_str()),
        termination_mode: outcome.termination_mode().map(|m| m.as_str()),
        duration_ms: outcome.duration.as_millis() as u64,
        category: decision.category.clone(),
        pattern: match &decision.source {
            DecisionSource::Pattern { pattern, .. } => Some(pattern.clone()),
            _ => None,
        },
        exec_timeout_sec: round_secs(outcome.limits.exec),
        no_output_timeout_sec: round_secs(outcome.limits.no_output),
        secrets_masked: outcome.stdout.masked + outcome.stderr.masked,
        limit_hit: limit_hit_facts(outcome.limit_hits.iter().copied()),
        notes: Vec::new(),
        stdout_omitted_chars: omitted(&outcome.stdout, |shown| shown.omitted_chars),
        stdout_omitted_lines: omitted(&outcome.stdout, |shown| shown.omitted_lines),
        stdout_output_call: OutputCall::for_cut(outcome.number, Stream::Stdout, &outcome.stdout),
        stderr_omitted_chars: omitted(&outcome.stderr, |shown| shown.omitted_chars),
        stderr_omitted_lines: omitted(&outcome.stderr, |shown| shown.omitted_lines),
        stderr_output_call: OutputCall::for_cut(outcome.number, Stream::Stderr, &outcome.stderr),
        full_stdout_path: full_path(&outcome.stdout),
        full_stderr_path: full_path(&outcome.stderr),
        full_stdout_cut: full_cut(&outcome.stdout),
        full_stderr_cut: full_cut(&outcome.stderr),
        full_stdout_error: outcome.stdout.full_output_error.clone(),
        full_stderr_error: outcome.stderr.full_output_error.clone(),
        stdout: outcome.stdout.text.clone(),
        stderr: outcome.stderr.text.clone(),
    }
}

/// The footer line: `[status · how it ended · duration · limits: ...]`.
/// It names the category and limits, not the pattern that chose them (that
/// is in the structured content): a regex is noise to an agent.
fn footer(outcome: &RunOutcome, decision: &Decision) -> String {
    let limits = format!(
        "exec {}, no output {}",
        seconds(outcome.limits.exec),
        seconds(outcome.limits.no_output)
    );
    let limits = match &decision.category {
        Some(category) => format!("{category} ({limits})"),
        None => format!("explicit ({limits})"),
    };
    format!(
        "[{} · {} · {} · limits: {limits}]",
        outcome.status().as_str(),
        summary(outcome),
        seconds(outcome.duration),
    )
}

/// How the run ended, in the footer's words.
fn summary(outcome: &RunOutcome) -> String {
    let mode = |stopped| match stopped {
        TerminationMode::Hard => "stopped hard (SIGKILL after the grace period)",
        TerminationMode::Soft => "stopped soft (SIGTERM)",
    };
    match outcome.end {
        RunEnd::Exited { .. } | RunEnd::Killed { .. } => {
            format!("exit code {}", outcome.exit_code())
        }
        RunEnd::TimedOut { reason: TimeoutReason::NoOutput, stopped } => format!(
            "no_output_timeout: no output for {}, {}",
            seconds(outcome.limits.no_output),
            mode(stopped)
        ),
        RunEnd::TimedOut { reason: TimeoutReason::Exec, stopped } => format!(
            "exec_timeout: still running after {}, {}",
            seconds(outcome.limits.exec),
            mode(stopped)
        ),
        RunEnd::Cancelled { .. } | RunEnd::NotStarted => "error".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    //! Snapshot tests of `run` replies, one per way a run ends or is shown:
    //! the text blocks (separated by a line of `=`) and the structured
    //! content an agent reads. `UPDATE_EXPECT=1 cargo test -p shellkeep
    //! --bin shellkeep render::run` rewrites them after a deliberate change.

    use std::path::PathBuf;
    use std::time::Duration;

    use expect_test::{Expect, expect};
    use shellkeep_engine::Shown;
    use shellkeep_engine::TerminationMode;
    use shellkeep_engine::{Decision, DecisionSource, PolicyLimits as Limits};
    use shellkeep_engine::{Denial, SandboxMode as Mode, SandboxPolicy as Policy};
    use shellkeep_engine::{LimitHit, Resource};
    use shellkeep_engine::{RunEnd, RunOutcome, TimeoutReason};

    use super::run;

    /// The limits of the `quick` category in these fixtures.
    fn limits() -> Limits {
        Limits { exec: Duration::from_secs(30), no_output: Duration::from_secs(10) }
    }

    /// The policy's default category chose the limits.
    fn by_default() -> Decision {
        Decision {
            limits: limits(),
            category: Some("quick".to_owned()),
            source: DecisionSource::Default,
        }
    }

    /// Run 7, which ended as `end` after printing `stdout` and `stderr`.
    fn outcome(end: RunEnd, stdout: &str, stderr: &str) -> RunOutcome {
        RunOutcome {
            end,
            number: 7,
            stdout: Shown { text: stdout.to_owned(), ..Shown::empty() },
            stderr: Shown { text: stderr.to_owned(), ..Shown::empty() },
            duration: Duration::from_millis(1_234),
            limits: limits(),
            pgid: Some(4242),
            limit_hits: Vec::new(),
        }
    }

    /// A main process that exited with `code` on its own.
    fn exited(code: i32) -> RunEnd {
        RunEnd::Exited { code, stopped_leftovers: false }
    }

    /// Checks the text and structured content of the reply for `outcome`.
    fn check(outcome: &RunOutcome, decision: &Decision, expected: Expect) {
        let (blocks, structured) = run(outcome, decision);
        let text = blocks.into_texts().join("\n=====\n");
        let json = serde_json::to_string_pretty(&structured).expect("serializable");
        expected.assert_eq(&format!("{text}\n-----\n{json}\n"));
    }

    #[test]
    fn completed() {
        check(
            &outcome(exited(0), "hi\n", ""),
            &by_default(),
            expect![[r#"
            hi
            [success · exit code 0 · 1.2 s · limits: quick (exec 30 s, no output 10 s)]
            -----
            {
              "status": "success",
              "exitCode": 0,
              "timeoutReason": null,
              "terminationMode": null,
              "durationMs": 1234,
              "category": "quick",
              "execTimeoutSec": 30.0,
              "noOutputTimeoutSec": 10.0,
              "stdout": "hi\n",
              "stderr": ""
            }
        "#]],
        );
    }

    #[test]
    fn failed_with_stderr() {
        check(
            &outcome(exited(3), "out\n", "err\n"),
            &by_default(),
            expect![[r#"
            out
            [stderr]
            err
            [success · exit code 3 · 1.2 s · limits: quick (exec 30 s, no output 10 s)]
            -----
            {
              "status": "success",
              "exitCode": 3,
              "timeoutReason": null,
              "terminationMode": null,
              "durationMs": 1234,
              "category": "quick",
              "execTimeoutSec": 30.0,
              "noOutputTimeoutSec": 10.0,
              "stdout": "out\n",
              "stderr": "err\n"
            }
        "#]],
        );
    }

    #[test]
    fn chosen_by_a_pattern() {
        let decision = Decision {
            source: DecisionSource::Pattern { pattern: "^cargo build".to_owned(), index: 0 },
            category: Some("build".to_owned()),
            ..by_default()
        };
        check(
            &outcome(exited(0), "Finished\n", ""),
            &decision,
            expect![[r#"
            Finished
            [success · exit code 0 · 1.2 s · limits: build (exec 30 s, no output 10 s)]
            -----
            {
              "status": "success",
              "exitCode": 0,
              "timeoutReason": null,
              "terminationMode": null,
              "durationMs": 1234,
              "category": "build",
              "pattern": "^cargo build",
              "execTimeoutSec": 30.0,
              "noOutputTimeoutSec": 10.0,
              "stdout": "Finished\n",
              "stderr": ""
            }
        "#]],
        );
    }

    #[test]
    fn explicit_timeout() {
        let decision =
            Decision { category: None, source: DecisionSource::Explicit, ..by_default() };
        check(
            &outcome(exited(0), "hi\n", ""),
            &decision,
            expect![[r#"
            hi
            [success · exit code 0 · 1.2 s · limits: explicit (exec 30 s, no output 10 s)]
            -----
            {
              "status": "success",
              "exitCode": 0,
              "timeoutReason": null,
              "terminationMode": null,
              "durationMs": 1234,
              "category": null,
              "execTimeoutSec": 30.0,
              "noOutputTimeoutSec": 10.0,
              "stdout": "hi\n",
              "stderr": ""
            }
        "#]],
        );
    }

    #[test]
    fn killed_by_a_signal_we_did_not_send() {
        let end = RunEnd::Killed { signal: 9, stopped_leftovers: false };
        check(
            &outcome(end, "before\n", ""),
            &by_default(),
            expect![[r#"
            before
            [success · exit code 137 · 1.2 s · limits: quick (exec 30 s, no output 10 s)]
            -----
            {
              "status": "success",
              "exitCode": 137,
              "timeoutReason": null,
              "terminationMode": null,
              "durationMs": 1234,
              "category": "quick",
              "execTimeoutSec": 30.0,
              "noOutputTimeoutSec": 10.0,
              "stdout": "before\n",
              "stderr": ""
            }
        "#]],
        );
    }

    #[test]
    fn timed_out_by_no_output() {
        let end =
            RunEnd::TimedOut { reason: TimeoutReason::NoOutput, stopped: TerminationMode::Soft };
        check(
            &outcome(end, "started\n", ""),
            &by_default(),
            expect![[r#"
            started
            [timeout · no_output_timeout: no output for 10 s, stopped soft (SIGTERM) · 1.2 s · limits: quick (exec 30 s, no output 10 s)]
            [If it is silent by nature, run it with no_output_timeout_sec: the seconds of silence to allow.]
            -----
            {
              "status": "timeout",
              "exitCode": -1,
              "timeoutReason": "no_output_timeout",
              "terminationMode": "soft",
              "durationMs": 1234,
              "category": "quick",
              "execTimeoutSec": 30.0,
              "noOutputTimeoutSec": 10.0,
              "notes": [
                "[If it is silent by nature, run it with no_output_timeout_sec: the seconds of silence to allow.]"
              ],
              "stdout": "started\n",
              "stderr": ""
            }
        "#]],
        );
    }

    #[test]
    fn timed_out_by_the_exec_limit_stopped_hard() {
        let end = RunEnd::TimedOut { reason: TimeoutReason::Exec, stopped: TerminationMode::Hard };
        check(
            &outcome(end, "still running\nstill running\n", ""),
            &by_default(),
            expect![[r#"
            still running
            still running
            [timeout · exec_timeout: still running after 30 s, stopped hard (SIGKILL after the grace period) · 1.2 s · limits: quick (exec 30 s, no output 10 s)]
            -----
            {
              "status": "timeout",
              "exitCode": -1,
              "timeoutReason": "exec_timeout",
              "terminationMode": "hard",
              "durationMs": 1234,
              "category": "quick",
              "execTimeoutSec": 30.0,
              "noOutputTimeoutSec": 10.0,
              "stdout": "still running\nstill running\n",
              "stderr": ""
            }
        "#]],
        );
    }

    #[test]
    fn cancelled() {
        let end = RunEnd::Cancelled { stopped: TerminationMode::Soft };
        check(
            &outcome(end, "started\n", ""),
            &by_default(),
            expect![[r#"
            started
            [error · error · 1.2 s · limits: quick (exec 30 s, no output 10 s)]
            -----
            {
              "status": "error",
              "exitCode": -1,
              "timeoutReason": null,
              "terminationMode": "soft",
              "durationMs": 1234,
              "category": "quick",
              "execTimeoutSec": 30.0,
              "noOutputTimeoutSec": 10.0,
              "stdout": "started\n",
              "stderr": ""
            }
        "#]],
        );
    }

    #[test]
    fn not_started() {
        let reason = "the working directory /nope does not exist; choose an existing directory";
        check(
            &outcome(RunEnd::NotStarted, "", reason),
            &by_default(),
            expect![[r#"
            [stderr]
            the working directory /nope does not exist; choose an existing directory
            [error · error · 1.2 s · limits: quick (exec 30 s, no output 10 s)]
            -----
            {
              "status": "error",
              "exitCode": -1,
              "timeoutReason": null,
              "terminationMode": null,
              "durationMs": 1234,
              "category": "quick",
              "execTimeoutSec": 30.0,
              "noOutputTimeoutSec": 10.0,
              "stdout": "",
              "stderr": "the working directory /nope does not exist; choose an existing directory"
            }
        "#]],
        );
    }

    #[test]
    fn leftovers_stopped() {
        let end = RunEnd::Exited { code: 0, stopped_leftovers: true };
        check(
            &outcome(end, "server started\n", ""),
            &by_default(),
            expect![[r#"
            server started
            [success · exit code 0 · 1.2 s · limits: quick (exec 30 s, no output 10 s)]
            -----
            {
              "status": "success",
              "exitCode": 0,
              "timeoutReason": null,
              "terminationMode": null,
              "durationMs": 1234,
              "category": "quick",
              "execTimeoutSec": 30.0,
              "noOutputTimeoutSec": 10.0,
              "stdout": "server started\n",
              "stderr": ""
            }
        "#]],
        );
    }

    #[test]
    fn output_cut_in_both_streams() {
        let cut = |head: &str, tail: &str, chars: u64, lines: u64, before: u64, name: &str| {
            let notice = format!("[... {chars} characters ({lines} lines) omitted ...]\n");
            let text = format!("{head}{notice}{tail}");
            Shown {
                omission: Some(head.len()..head.len() + notice.len()),
                text,
                truncated: true,
                omitted_chars: chars,
                omitted_lines: lines,
                lines_before_omission: before,
                full_output_path: Some(PathBuf::from(format!("/tmp/spill/run-7-ab12.{name}"))),
                ..Shown::empty()
            }
        };
        let outcome = RunOutcome {
            stdout: cut("1\n2\n", "9999\n10000\n", 48_863, 9_994, 2, "stdout"),
            stderr: cut("warning 1\n", "warning 300\n", 3_100, 298, 1, "stderr"),
            ..outcome(exited(0), "", "")
        };
        check(
            &outcome,
            &by_default(),
            expect![[r#"
            1
            2
            [... 48863 characters (9994 lines) omitted ...]
            9999
            10000
            [stderr]
            warning 1
            [... 3100 characters (298 lines) omitted ...]
            warning 300
            [success · exit code 0 · 1.2 s · limits: quick (exec 30 s, no output 10 s)]
            [Read the lines of stdout left out with the output tool: {"run": 7, "offset": 2, "limit": 5000}]
            [Read the lines of stderr left out with the output tool: {"run": 7, "stream": "stderr", "offset": 1, "limit": 299}]
            -----
            {
              "status": "success",
              "exitCode": 0,
              "timeoutReason": null,
              "terminationMode": null,
              "durationMs": 1234,
              "category": "quick",
              "execTimeoutSec": 30.0,
              "noOutputTimeoutSec": 10.0,
              "stdoutOmittedChars": 48863,
              "stdoutOmittedLines": 9994,
              "stdoutOutputCall": {
                "run": 7,
                "stream": "stdout",
                "offset": 2,
                "limit": 5000
              },
              "stderrOmittedChars": 3100,
              "stderrOmittedLines": 298,
              "stderrOutputCall": {
                "run": 7,
                "stream": "stderr",
                "offset": 1,
                "limit": 299
              },
              "fullStdoutPath": "/tmp/spill/run-7-ab12.stdout",
              "fullStderrPath": "/tmp/spill/run-7-ab12.stderr",
              "stdout": "1\n2\n[... 48863 characters (9994 lines) omitted ...]\n9999\n10000\n",
              "stderr": "warning 1\n[... 3100 characters (298 lines) omitted ...]\nwarning 300\n"
            }
        "#]],
        );
    }

    #[test]
    fn a_memory_limit_stopped_something() {
        let hit = LimitHit { resource: Resource::Memory, max: 512 << 20, times: 1, counted: true };
        let outcome = RunOutcome { limit_hits: vec![hit], ..outcome(exited(137), "", "Killed\n") };
        check(
            &outcome,
            &by_default(),
            expect![[r#"
            [stderr]
            Killed
            [success · exit code 137 · 1.2 s · limits: quick (exec 30 s, no output 10 s)]
            [The memory limit of this command (512 MiB) stopped it: the kernel killed 1 process that went past it (out of memory). Use less memory at once, or ask for a higher limit (--memory-max, or the limits of the policy's category).]
            -----
            {
              "status": "success",
              "exitCode": 137,
              "timeoutReason": null,
              "terminationMode": null,
              "durationMs": 1234,
              "category": "quick",
              "execTimeoutSec": 30.0,
              "noOutputTimeoutSec": 10.0,
              "limitHit": [
                {
                  "limit": "memory",
                  "max": 536870912,
                  "times": 1,
                  "counted": true
                }
              ],
              "notes": [
                "[The memory limit of this command (512 MiB) stopped it: the kernel killed 1 process that went past it (out of memory). Use less memory at once, or ask for a higher limit (--memory-max, or the limits of the policy's category).]"
              ],
              "stdout": "",
              "stderr": "Killed\n"
            }
        "#]],
        );
    }

    #[test]
    fn secrets_masked() {
        let mut outcome = outcome(exited(0), "token=<secret-hidden>\n", "");
        outcome.stdout.masked = 1;
        check(
            &outcome,
            &by_default(),
            expect![[r#"
            token=<secret-hidden>
            [success · exit code 0 · 1.2 s · limits: quick (exec 30 s, no output 10 s)]
            [1 secret value in the output was replaced by <secret-hidden>; the values are unchanged for commands, so use the variable (for example "$GITHUB_TOKEN") where one is needed.]
            -----
            {
              "status": "success",
              "exitCode": 0,
              "timeoutReason": null,
              "terminationMode": null,
              "durationMs": 1234,
              "category": "quick",
              "execTimeoutSec": 30.0,
              "noOutputTimeoutSec": 10.0,
              "secretsMasked": 1,
              "stdout": "token=<secret-hidden>\n",
              "stderr": ""
            }
        "#]],
        );
    }

    /// A write the sandbox refused: the `run` reply, then the line the
    /// sandbox's words add to it (`tools` appends it to the reply).
    #[test]
    fn blocked_by_the_sandbox() {
        let stderr = "touch: cannot touch '/etc/x': Read-only file system\n";
        let (blocks, _) = run(&outcome(exited(1), "", stderr), &by_default());
        let policy = Policy { mode: Mode::ReadOnly, ..Policy::off() };
        let denial = Denial::Write { path: Some("/etc/x".to_owned()) };
        let (line, field) = crate::render::sandbox::denial(&denial, &policy);
        let text = blocks.into_texts().join("\n=====\n");
        let field = serde_json::to_string_pretty(&field).expect("serializable");
        expect![[r#"
            [stderr]
            touch: cannot touch '/etc/x': Read-only file system
            [success · exit code 1 · 1.2 s · limits: quick (exec 30 s, no output 10 s)]
            [The sandbox, not the program, most likely refused writing "/etc/x": the sandbox is read-only: commands may write only in their temporary directory ($TMPDIR) and the terminal. Write under $TMPDIR instead, or work in a session whose sandbox lets it write the workspace.]
            -----
            {
              "denied": "write",
              "path": "/etc/x"
            }
        "#]].assert_eq(&format!("{text}\n{line}\n-----\n{field}\n"));
    }
}
