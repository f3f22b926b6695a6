//! The one-shot runner against a real bash: nothing a command starts
//! outlives its run, whatever it does to its process group or session, and
//! commands and environments of any size or content either run or are
//! refused with an error that names the argument (issue 7).
//!
//! Process trees carry unique markers (`sleep 300.<digits>`) so that
//! survivors can be found in `/proc` without confusing parallel tests.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::time::Duration;

use shellkeep_engine::PolicyLimits as Limits;
use shellkeep_engine::TerminationMode;
use shellkeep_engine::{
    InvalidRunRequest, RunOutcome, RunRequest, RunStatus, TimeoutReason, run_oneshot,
};
use shellkeep_engine::{SandboxMode as Mode, SandboxPolicy as Policy};
use tokio_util::sync::CancellationToken;

use crate::{Scratch, eventually, processes_with};

/// `300.<nine random digits>`: an argument for `sleep` found by nothing else.
fn marker() -> String {
    format!("300.{:09}", RandomState::new().hash_one(std::process::id()) % 1_000_000_000)
}

fn limits(exec: f64, no_output: f64) -> Limits {
    Limits { exec: Duration::from_secs_f64(exec), no_output: Duration::from_secs_f64(no_output) }
}

async fn run(scratch: &Scratch, command: &str, limits: Limits) -> RunOutcome {
    let request = RunRequest {
        grace: Duration::from_millis(500),
        ..RunRequest::new(command, limits, &scratch.0, "run")
    };
    run_request(request).await
}

async fn run_request(request: RunRequest) -> RunOutcome {
    run_oneshot(request, CancellationToken::new()).await
}

/// Every way of leaving the command's process group or session that the
/// issue names, each starting a `sleep` with its own marker, in the
/// background. Returns the command and the markers.
fn escapes() -> (String, Vec<String>) {
    let markers: Vec<String> = (0..6).map(|_| marker()).collect();
    let [setsid, double_fork, timeout, setpgid, nohup, env_cleared] = &markers[..] else {
        unreachable!()
    };
    let command = [
        format!("setsid sleep {setsid} &"),
        format!("bash -c '(sleep {double_fork} &) &'"),
        format!("timeout 600 sleep {timeout} &"),
        format!(
            "python3 -c 'import os; os.setpgid(0, 0); os.execvp(\"sleep\", [\"sleep\", \"{setpgid}\"])' &"
        ),
        format!("nohup sleep {nohup} >/dev/null 2>&1 & disown"),
        // A cleared environment, but still a descendant while the run lasts.
        format!("env -i /bin/sleep {env_cleared} &"),
    ]
    .join("\n");
    (command, markers)
}

/// Waits until every marker has a live process.
async fn wait_alive(markers: &[String]) {
    for marker in markers {
        eventually(|| !processes_with(marker).is_empty()).await;
    }
}

fn survivors(markers: &[String]) -> Vec<(String, Vec<i32>)> {
    markers
        .iter()
        .map(|m| (m.clone(), processes_with(m)))
        .filter(|(_, pids)| !pids.is_empty())
        .collect()
}

#[tokio::test]
async fn nothing_a_timed_out_command_started_survives_it() {
    let scratch = Scratch::new("run-escape-timeout");
    let (background, mut markers) = escapes();
    // `timeout` in the foreground moves itself to a group of its own, so
    // a kill of the command's group alone misses it.
    let foreground = marker();
    let command = format!("{background}\necho started; timeout 600 sleep {foreground}");
    markers.push(foreground);
    let markers_now = markers.clone();
    let watcher = tokio::spawn(async move { wait_alive(&markers_now).await });
    let outcome = run(&scratch, &command, limits(60.0, 3.0)).await;
    watcher.await.expect("every escape was seen alive before the limit");
    assert_eq!(
        (outcome.status(), outcome.timeout_reason(), outcome.termination_mode()),
        (RunStatus::Timeout, Some(TimeoutReason::NoOutput), Some(TerminationMode::Soft)),
        "{outcome:#?}"
    );
    // The outcome comes only once everything is gone: no waiting here.
    assert_eq!(survivors(&markers), []);
}

#[tokio::test]
async fn nothing_a_finished_command_started_survives_it() {
    let scratch = Scratch::new("run-escape-end");
    let (background, markers) = escapes();
    let wait_for_all: String = markers
        .iter()
        .map(|m| format!("until pgrep -f 'sleep {m}' >/dev/null; do sleep 0.05; done\n"))
        .collect();
    let command = format!("{background}\n{wait_for_all}echo started");
    let outcome = run(&scratch, &command, limits(60.0, 30.0)).await;
    assert_eq!(
        (
            outcome.status(),
            outcome.exit_code(),
            outcome.stopped_leftovers(),
            outcome.stdout.text.as_str()
        ),
        (RunStatus::Success, 0, true, "started\n"),
        "{outcome:#?}"
    );
    assert_eq!(survivors(&markers), []);
}

/// In a PID namespace of its own, every escape ends with the command,
/// whether it finished, timed out or was cancelled; its exit code, and
/// what its group's SIGTERM did, are the shell's.
#[tokio::test]
async fn nothing_a_command_in_a_namespace_started_survives_it() {
    let scratch = Scratch::new("run-escape-namespace");
    for ending in ["finished", "timed out", "cancelled"] {
        let (background, markers) = escapes();
        let wait_for_all: String = markers
            .iter()
            .map(|m| format!("until pgrep -f 'sleep {m}' >/dev/null; do sleep 0.05; done\n"))
            .collect();
        let last = match ending {
            "finished" => "exit 3",
            _ => "sleep 100",
        };
        let command = format!("echo \"pid $$\"\n{background}\n{wait_for_all}{last}");
        let request = RunRequest {
            grace: Duration::from_millis(500),
            sandbox: Policy {
                mode: Mode::WorkspaceWrite,
                writable: vec![scratch.0.clone()],
                ..Policy::off()
            },
            ..RunRequest::new(command, limits(60.0, 2.0), &scratch.0, "run")
        };
        let cancel = CancellationToken::new();
        if ending == "cancelled" {
            let (markers, cancel) = (markers.clone(), cancel.clone());
            tokio::spawn(async move {
                wait_alive(&markers).await;
                cancel.cancel();
            });
        }
        let outcome = run_oneshot(request, cancel).await;
        assert_eq!(outcome.stdout.text, "pid 2\n", "{ending}: {outcome:#?}");
        // What a finished command left is reported as stopped, as without
        // a namespace (the kernel ended it with the shell).
        let expected = match ending {
            "finished" => (RunStatus::Success, 3, None, true),
            "timed out" => (RunStatus::Timeout, -1, Some(TerminationMode::Soft), false),
            _ => (RunStatus::Error, -1, Some(TerminationMode::Soft), false),
        };
        assert_eq!(
            (
                outcome.status(),
                outcome.exit_code(),
                outcome.termination_mode(),
                outcome.stopped_leftovers()
            ),
            expected,
            "{ending}: {outcome:#?}"
        );
        assert_eq!(survivors(&markers), [], "{ending}");
    }
    // A command that leaves nothing is not said to: the init is not
    // counted.
    let request = RunRequest {
        sandbox: Policy {
            mode: Mode::WorkspaceWrite,
            writable: vec![scratch.0.clone()],
            ..Policy::off()
        },
        ..RunRequest::new("echo \"pid $$\"; sleep 0.1", limits(60.0, 30.0), &scratch.0, "run")
    };
    let outcome = run_request(request).await;
    assert_eq!(
        (outcome.stdout.text.as_str(), outcome.exit_code(), outcome.stopped_leftovers()),
        ("pid 2\n", 0, false),
        "{outcome:#?}"
    );
}

#[tokio::test]
async fn an_escaped_process_that_ignores_sigterm_makes_the_stop_hard() {
    let scratch = Scratch::new("run-escape-hard");
    let stubborn = marker();
    let command =
        format!("setsid bash -c 'trap \"\" TERM; sleep {stubborn}; :' & echo started; sleep 100");
    let outcome = run(&scratch, &command, limits(60.0, 1.0)).await;
    // Before, the group kill missed it and the reply said "soft".
    assert_eq!(
        (outcome.status(), outcome.termination_mode()),
        (RunStatus::Timeout, Some(TerminationMode::Hard)),
        "{outcome:#?}"
    );
    assert_eq!(processes_with(&stubborn), Vec::<i32>::new());
}

#[tokio::test]
async fn a_command_of_a_mebibyte_runs() {
    let scratch = Scratch::new("run-big-command");
    // Over the kernel's 128 KiB limit for one argument, and with quotes,
    // newlines and expansions that must arrive untouched.
    let filler = "x'\"$(echo no)\\".repeat(100_000);
    let command = format!("echo start\n: '{}'\necho \"$#:$0\"\necho end", filler.replace('\'', ""));
    assert!(command.len() > 1 << 20);
    let outcome = run(&scratch, &command, limits(30.0, 30.0)).await;
    assert_eq!(
        (outcome.status(), outcome.stdout.text.as_str(), outcome.stderr.text.as_str()),
        (RunStatus::Success, "start\n0:bash\nend\n", ""),
        "{}",
        outcome.stderr.text
    );
    // The pipe the command came through is not left open for it: it sees
    // the same descriptors as a small command does.
    let small = run(&scratch, "ls /proc/self/fd", limits(30.0, 30.0)).await;
    let padding = "y".repeat(200_000);
    let big = run(&scratch, &format!(": '{padding}'\nls /proc/self/fd"), limits(30.0, 30.0)).await;
    assert_eq!(big.stdout.text, small.stdout.text);
}

#[tokio::test]
async fn big_environment_values_arrive_whole() {
    let scratch = Scratch::new("run-big-env");
    let tricky = "it's \"quoted\" $(echo no) `no` \\ \n";
    let medium = tricky.repeat(3_000); // about 100 KiB: exported
    let huge = tricky.repeat(20_000); // about 700 KiB: over the kernel's limit
    let request = RunRequest {
        env: vec![
            ("MEDIUM".into(), medium.clone()),
            ("HUGE".into(), huge.clone()),
            ("SMALL".into(), "small".into()),
        ],
        cwd: Some(scratch.0.clone()),
        ..RunRequest::new(
            "printf %s \"$MEDIUM\" > medium; printf %s \"$HUGE\" > huge\n\
             /usr/bin/env | grep -c '^MEDIUM=' ; /usr/bin/env | grep -c '^HUGE='; echo \"$SMALL\"",
            limits(30.0, 30.0),
            &scratch.0,
            "run",
        )
    };
    let outcome = run_request(request).await;
    // MEDIUM reaches programs; HUGE only the command itself, since the
    // kernel would refuse it to any program.
    assert_eq!(
        (outcome.status(), outcome.stdout.text.as_str(), outcome.stderr.text.as_str()),
        (RunStatus::Success, "1\n0\nsmall\n", ""),
    );
    assert_eq!(std::fs::read_to_string(scratch.0.join("medium")).expect("medium"), medium);
    assert_eq!(std::fs::read_to_string(scratch.0.join("huge")).expect("huge"), huge);
}

#[tokio::test]
async fn many_small_values_over_the_total_limit_still_run() {
    let scratch = Scratch::new("run-many-env");
    let env: Vec<(String, String)> =
        (0..40).map(|i| (format!("V{i}"), format!("{i}:{}", "v".repeat(60_000)))).collect();
    let request = RunRequest {
        env,
        ..RunRequest::new("echo ${V0:0:2} ${V39:0:3}", limits(30.0, 30.0), &scratch.0, "run")
    };
    let outcome = run_request(request).await;
    assert_eq!((outcome.status(), outcome.stdout.text.as_str()), (RunStatus::Success, "0: 39:\n"));
}

/// A request's environment.
type Env = Vec<(String, String)>;

/// A request bash or the kernel cannot take is refused with a typed reason
/// (the server checks its arguments first and words them itself), and
/// nothing starts.
#[tokio::test]
async fn nul_bytes_and_bad_names_are_refused_with_a_typed_reason() {
    let scratch = Scratch::new("run-invalid");
    let named = |name: &str| name.to_owned();
    let cases: [(&str, Env, InvalidRunRequest); 6] = [
        ("echo a\0b", vec![], InvalidRunRequest::NulInCommand { at: 6 }),
        (
            "true",
            vec![("A".into(), "x\0y".into())],
            InvalidRunRequest::NulInEnvValue { name: named("A") },
        ),
        (
            "true",
            vec![("A\0B".into(), "x".into())],
            InvalidRunRequest::NulInEnvName { name: named("A\0B") },
        ),
        ("true", vec![(String::new(), "x".into())], InvalidRunRequest::EmptyEnvName),
        (
            "true",
            vec![("A=B".into(), "x".into())],
            InvalidRunRequest::EqualsInEnvName { name: named("A=B") },
        ),
        ("true", vec![("SHELLKEEP_SCOPE".into(), "x".into())], InvalidRunRequest::ScopeVarInEnv),
    ];
    for (command, env, expected) in cases {
        let request =
            RunRequest { env, ..RunRequest::new(command, limits(5.0, 5.0), &scratch.0, "run") };
        assert_eq!(request.validate(), Err(expected.clone()), "{command:?}");
        let outcome = run_request(request).await;
        assert_eq!((outcome.status(), outcome.pgid), (RunStatus::Error, None), "{command:?}");
        assert_eq!(outcome.stderr.text, expected.to_string(), "{command:?}");
    }
    // The reason speaks of the request, never of a tool's arguments.
    assert_eq!(
        InvalidRunRequest::NulInEnvName { name: named("A\0B") }.to_string(),
        "the environment variable name \"A\\0B\" contains a NUL byte"
    );
}

/// Issue 11, F5: `env` cannot replace the scope marker that finds what a
/// command started: the name is refused and nothing runs; the marker every
/// process of a run carries is the run's own.
#[tokio::test]
async fn the_scope_marker_cannot_be_set_through_env() {
    let scratch = Scratch::new("run-scope");
    let witness = scratch.0.join("ran");
    let command = format!("touch {}", witness.display());
    let request = RunRequest {
        env: vec![("SHELLKEEP_SCOPE".into(), "x".into())],
        ..RunRequest::new(command, limits(5.0, 5.0), &scratch.0, "run")
    };
    let outcome = run_request(request).await;
    assert_eq!((outcome.status(), outcome.pgid), (RunStatus::Error, None));
    assert!(
        outcome.stderr.text.contains("SHELLKEEP_SCOPE, the marker that finds every process"),
        "{:?}",
        outcome.stderr.text
    );
    assert!(!witness.exists(), "the command ran");

    let token = shellkeep_engine::server_token();
    let outcome = run(&scratch, "echo \"$SHELLKEEP_SCOPE\"", limits(5.0, 5.0)).await;
    let marker = outcome.stdout.text.trim();
    assert!(marker.starts_with(&format!("{token}/run-")), "{marker:?}");
}

#[tokio::test]
async fn an_env_path_cannot_break_the_start() {
    let scratch = Scratch::new("run-path");
    let request = RunRequest {
        env: vec![("PATH".into(), "/nonexistent".into())],
        ..RunRequest::new("echo \"$PATH\"; /bin/echo ok", limits(5.0, 5.0), &scratch.0, "run")
    };
    let outcome = run_request(request).await;
    assert_eq!(
        (outcome.status(), outcome.stdout.text.as_str(), outcome.stderr.text.as_str()),
        (RunStatus::Success, "/nonexistent\nok\n", "")
    );
}

#[tokio::test]
async fn a_value_the_kernel_refuses_is_reported_as_such() {
    let scratch = Scratch::new("run-e2big");
    // Not a name bash can assign, so it must go through the environment,
    // where the kernel refuses a string over 128 KiB.
    let request = RunRequest {
        env: vec![("not-a-name".into(), "v".repeat(200_000))],
        ..RunRequest::new("true", limits(5.0, 5.0), &scratch.0, "run")
    };
    let outcome = run_request(request).await;
    assert_eq!(outcome.status(), RunStatus::Error);
    assert!(
        outcome.stderr.text.contains("refused its environment as too large"),
        "{}",
        outcome.stderr.text
    );
    assert!(!outcome.stderr.text.contains("installed"), "{}", outcome.stderr.text);
}

#[tokio::test]
async fn cancelling_or_dropping_a_run_stops_what_escaped() {
    let scratch = Scratch::new("run-escape-cancel");
    let (background, markers) = escapes();
    let command = format!("{background}\nsleep 100");

    let cancel = CancellationToken::new();
    let request = RunRequest {
        grace: Duration::from_millis(500),
        ..RunRequest::new(command.clone(), limits(60.0, 60.0), &scratch.0, "run")
    };
    let call = tokio::spawn(run_oneshot(request, cancel.clone()));
    wait_alive(&markers).await;
    cancel.cancel();
    let outcome = call.await.expect("the run task");
    assert_eq!((outcome.status(), outcome.cancelled()), (RunStatus::Error, true), "{outcome:#?}");
    assert_eq!(survivors(&markers), []);

    // A run whose task is dropped mid-way (its caller went away) kills
    // what it started on the spot.
    let (background, markers) = escapes();
    let command = format!("{background}\nsleep 100");
    let request = RunRequest::new(command, limits(60.0, 60.0), &scratch.0, "run");
    let call = tokio::spawn(run_oneshot(request, CancellationToken::new()));
    wait_alive(&markers).await;
    call.abort();
    assert!(call.await.is_err_and(|err| err.is_cancelled()));
    eventually(|| survivors(&markers).is_empty()).await;
}
