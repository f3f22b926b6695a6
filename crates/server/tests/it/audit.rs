//! Issue 13 §3: the audit log. Every call that runs something leaves a
//! start and an end line (the same id) in a private file that rotates;
//! a server killed mid-command leaves the start line; `shellkeep audit`
//! reads it back.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::{EVENTUALLY, Scratch, Server, marker, wait_until};

/// The audit log's lines, parsed (each must be JSON).
fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

/// The start and end lines of the call whose start line satisfies `which`.
fn pair(lines: &[Value], which: impl Fn(&Value) -> bool) -> (Value, Value) {
    let start = lines
        .iter()
        .find(|l| l["event"] == "start" && which(l))
        .unwrap_or_else(|| panic!("no such start line in {lines:#?}"))
        .clone();
    let end = lines
        .iter()
        .find(|l| l["event"] == "end" && l["id"] == start["id"])
        .unwrap_or_else(|| panic!("no end line for {start}"))
        .clone();
    (start, end)
}

fn command_is(command: &str) -> impl Fn(&Value) -> bool + '_ {
    move |line| line["command"] == command
}

/// A server whose audit log is `log` (in a directory of the test's).
async fn audited(log: &Path, extra: &[&str]) -> Server {
    let mut args = vec!["--audit-log", log.to_str().expect("utf-8")];
    args.extend_from_slice(extra);
    Server::with(&args).await
}

/// `shellkeep audit ARGS`: its exit code, stdout and stderr.
fn audit_command(args: &[&str]) -> (i32, String, String) {
    let output = Command::new(crate::binary())
        .arg("audit")
        .args(args)
        .env_remove("SHELLKEEP_AUDIT_LOG")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("the binary runs");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn log_in(dir: &Scratch) -> PathBuf {
    dir.path.join("audit/audit.jsonl")
}

#[tokio::test]
async fn terminal_and_run_calls_leave_a_start_and_an_end_line() {
    let dir = Scratch::new();
    let log = log_in(&dir);
    let server = audited(&log, &[]).await;
    server.terminal(json!({"command": "echo hi"})).await;
    server.terminal(json!({"command": "false"})).await;
    let r = server.run(json!({"command": "echo out; echo err >&2; exit 3"})).await;
    assert_eq!(r["exitCode"], 3, "{r:#?}");
    let sleeper = format!("sleep 300.{}", marker());
    let r = server.run(json!({"command": sleeper, "timeout_sec": 1})).await;
    assert_eq!(r["status"], "timeout", "{r:#?}");
    let background = format!("sleep 300.{}", marker());
    server.terminal(json!({"command": background, "background": true, "session": "job"})).await;

    let lines = lines(&log);
    assert_eq!(
        std::fs::metadata(&log).expect("the log exists").permissions().mode() & 0o777,
        0o600
    );
    let (start, end) = pair(&lines, command_is("echo hi"));
    assert_eq!(
        (&start["tool"], &start["call"], &start["session"]),
        (&json!("terminal"), &json!("command"), &json!("default"))
    );
    assert!(start["client"]["name"].as_str().is_some_and(|n| !n.is_empty()), "{start}");
    assert!(start["client"]["version"].is_string(), "{start}");
    assert!(start["category"].is_string() && start["limits"]["exec_sec"].is_number(), "{start}");
    assert!(start["time"].as_str().is_some_and(|t| t.ends_with('Z') && t.contains('T')), "{start}");
    assert_eq!(
        (&end["status"], &end["exit_code"], &end["output_bytes"]),
        (&json!("completed"), &json!(0), &json!(3))
    );
    assert!(end["duration_ms"].is_u64(), "{end}");

    let (_, end) = pair(&lines, command_is("false"));
    assert_eq!((&end["status"], &end["exit_code"]), (&json!("completed"), &json!(1)));

    let (start, end) = pair(&lines, command_is("echo out; echo err >&2; exit 3"));
    assert_eq!(
        (&start["tool"], &end["status"], &end["exit_code"]),
        (&json!("run"), &json!("success"), &json!(3))
    );
    assert_eq!(end["output_bytes"], 8, "both streams: {end}");

    let (start, end) = pair(&lines, command_is(&sleeper));
    assert_eq!(
        (&start["category"], &start["limits"]["exec_sec"]),
        (&json!("explicit"), &json!(1.0))
    );
    assert_eq!((&end["status"], &end["reason"]), (&json!("timeout"), &json!("limit")));
    assert!(end["termination_mode"].is_string() && end["detail"].is_string(), "{end}");

    let (start, end) = pair(&lines, command_is(&background));
    assert_eq!((&start["call"], &start["session"]), (&json!("background"), &json!("job")));
    assert!(start.get("limits").is_none(), "a background job has no limit: {start}");
    assert_eq!(end["status"], "running", "{end}");
}

#[tokio::test]
async fn input_keys_a_cancelled_call_and_a_close_each_leave_their_lines() {
    let dir = Scratch::new();
    let log = log_in(&dir);
    let server = audited(&log, &[]).await;
    let r = server
        .terminal(json!({"command": "read -r line; echo got $line; cat", "timeout": 0.3}))
        .await;
    assert_ne!(r["status"], "completed", "{r:#?}");
    server.terminal(json!({"command": "hunter2", "is_input": true, "timeout": 0.3})).await;
    let r = server.terminal(json!({"command": "C-c", "is_input": true})).await;
    assert_eq!(r["status"], "completed", "{r:#?}");

    // A call the client gives up on still ends, as cancelled.
    let slow = format!("sleep 2.{}; echo done", marker());
    let call = server.terminal(json!({"command": slow, "timeout": 30}));
    assert!(tokio::time::timeout(Duration::from_millis(500), call).await.is_err());
    wait_until(
        EVENTUALLY,
        || lines(&log).iter().any(|l| l["event"] == "end" && l["reason"] == "cancel"),
        || format!("{:#?}", lines(&log)),
    )
    .await;
    let r = server.terminal(json!({"command": "", "timeout": 20})).await;
    assert_eq!(r["status"], "completed", "{r:#?}");

    server.terminal(json!({"command": "echo in work", "session": "work"})).await;
    let r = server.call("session_close", json!({"session": "work"})).await;
    assert!(!r.is_error, "{r:#?}");

    let lines = lines(&log);
    let (start, end) = pair(&lines, |l| l["call"] == "input");
    assert_eq!(start["input_bytes"], 7, "{start}");
    let text = serde_json::to_string(&lines).expect("serializes");
    assert!(!text.contains("hunter2"), "input text is never recorded: {text}");
    assert_eq!(end["command"], "read -r line; echo got $line; cat", "{end}");

    let (start, end) = pair(&lines, |l| l["call"] == "key");
    assert_eq!(start["key"], "C-c");
    assert_eq!((&end["status"], &end["reason"]), (&json!("completed"), &json!("C-c")), "{end}");
    assert!(end["exit_code"].as_i64().is_some_and(|c| c != 0), "{end}");

    let (_, end) = pair(&lines, command_is(&slow));
    assert_eq!((&end["status"], &end["reason"]), (&json!("running"), &json!("cancel")), "{end}");
    let (_, end) = pair(&lines, |l| l["call"] == "poll");
    assert_eq!((&end["status"], &end["command"]), (&json!("completed"), &json!(slow)), "{end}");

    let (start, end) = pair(&lines, |l| l["tool"] == "session_close");
    assert_eq!(start["session"], "work");
    assert_eq!((&end["status"], &end["reason"]), (&json!("closed"), &json!("close")), "{end}");
}

/// A command stopped after running unwatched past its limit: the poll
/// that reports it says killed, and `shellkeep audit --failed` lists it
/// with the other failures.
#[tokio::test]
async fn a_killed_command_and_the_failures_are_listed_by_shellkeep_audit() {
    let dir = Scratch::new();
    let log = log_in(&dir);
    let server = audited(&log, &["--policy", &dir.short_policy(), "--grace", "1"]).await;
    server.terminal(json!({"command": "echo fine"})).await;
    server.terminal(json!({"command": "exit_with() { return $1; }; exit_with 4"})).await;
    // A background job's end comes with a later reply, and its line then.
    let job = "sleep 1.5; exit 5";
    server.terminal(json!({"command": job, "background": true, "session": "bg"})).await;
    crate::poll_until(
        EVENTUALLY,
        async || server.call("sessions", json!({})).await,
        |r| !r["jobs_ended"].is_null(),
    )
    .await;
    let r = server.terminal(json!({"command": "echo start; sleep 135", "timeout": 0.5})).await;
    assert_eq!(r["status"], "running", "{r:#?}");
    wait_until(
        EVENTUALLY,
        || server.log().contains("stopping a terminal command"),
        || server.log(),
    )
    .await;
    let r = server.terminal(json!({"command": "", "timeout": 10})).await;
    assert_eq!(r["status"], "killed", "{r:#?}");

    let lines = lines(&log);
    let (_, end) = pair(&lines, |l| l["call"] == "poll");
    assert_eq!((&end["status"], &end["reason"]), (&json!("killed"), &json!("limit")), "{end}");
    assert!(end["termination_mode"].is_string(), "{end}");
    assert_eq!(end["command"], "echo start; sleep 135");

    let start = lines.iter().find(|l| l["command"] == job).expect("the job's start");
    let job_end = lines.iter().find(|l| l["event"] == "job_end").expect("the job's end");
    assert_eq!((&job_end["id"], &job_end["exit_code"]), (&start["id"], &json!(5)), "{job_end}");

    let file = log.to_str().expect("utf-8");
    let (code, all, stderr) = audit_command(&["--since", "1h", file]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(all.lines().count(), 4, "polls are not listed:\n{all}");
    let (code, failed, stderr) = audit_command(&["--failed", file]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(failed.lines().count(), 3, "{failed}");
    let job = failed.lines().find(|l| l.contains("exit 5")).expect(&failed);
    assert!(job.contains("completed") && job.contains(" 5 ") && job.contains("bg"), "{job}");
    assert!(!failed.contains("echo fine"), "{failed}");
    let killed = failed.lines().find(|l| l.contains("sleep 135")).expect(&failed);
    assert!(killed.contains("killed") && killed.contains("default"), "{killed}");
    let four = failed.lines().find(|l| l.contains("exit_with 4")).expect(&failed);
    assert!(four.contains("completed") && four.contains(" 4 "), "{four}");
    // Nothing from the future.
    let (_, none, _) = audit_command(&["--since", "0s", file]);
    assert!(none.is_empty(), "{none}");
    let (code, _, stderr) = audit_command(&["--since", "1 week", file]);
    assert_ne!(code, 0);
    assert!(stderr.contains("as in 1h"), "{stderr}");
}

/// The start line is on disk while the command runs, so a server killed
/// with SIGKILL leaves it.
#[tokio::test]
async fn a_server_killed_mid_command_leaves_the_start_line() {
    let dir = Scratch::new();
    let log = log_in(&dir);
    let mut server = audited(&log, &[]).await;
    let sleeper = format!("sleep 300.{}", marker());
    let peer = server.peer();
    let command = sleeper.clone();
    let call = tokio::spawn(async move {
        let _ =
            crate::call_with(&peer, "terminal", json!({"command": command, "timeout": 60})).await;
    });
    crate::wait_alive(&[sleeper.as_str()]).await;
    server.signal("KILL");
    server.wait_exit(EVENTUALLY).await;
    call.abort();
    let lines = lines(&log);
    let start = lines.iter().find(|l| l["command"] == sleeper.as_str()).expect("the start line");
    assert_eq!(start["event"], "start");
    assert!(!lines.iter().any(|l| l["event"] == "end" && l["id"] == start["id"]), "{lines:#?}");
    let (_, listed, _) = audit_command(&[log.to_str().expect("utf-8")]);
    assert!(listed.lines().any(|l| l.contains(&sleeper) && l.contains("unfinished")), "{listed}");
}

#[tokio::test]
async fn the_log_rotates_at_its_size_keeping_the_newest() {
    let dir = Scratch::new();
    let log = log_in(&dir);
    let server = audited(&log, &["--audit-log-max-mib", "0.01", "--audit-log-keep", "2"]).await;
    // About 3 KiB of lines per call: ten calls rotate more than twice.
    let filler = "x".repeat(1200);
    for n in 0..10 {
        server.run(json!({"command": format!(": {filler} {n}")})).await;
    }
    let rotated = |n: u32| PathBuf::from(format!("{}.{n}", log.display()));
    assert!(rotated(1).exists() && rotated(2).exists(), "rotated twice");
    assert!(!rotated(3).exists(), "only two kept");
    for file in [log.clone(), rotated(1), rotated(2)] {
        let meta = std::fs::metadata(&file).expect("exists");
        assert!(meta.len() <= 10_485, "{}: {} bytes", file.display(), meta.len());
        assert_eq!(meta.permissions().mode() & 0o777, 0o600, "{}", file.display());
    }
    assert!(lines(&log).iter().any(|l| l["command"] == format!(": {filler} 9")));
    let (_, listed, _) = audit_command(&[log.to_str().expect("utf-8")]);
    assert!(listed.lines().last().is_some_and(|l| l.ends_with(" 9")), "{listed}");
}

#[test]
fn a_symlink_or_a_bad_size_stops_start_up() {
    let dir = Scratch::new();
    let target = dir.path.join("elsewhere");
    std::fs::write(&target, "").expect("write");
    let link = dir.path.join("audit.jsonl");
    std::os::unix::fs::symlink(&target, &link).expect("symlink");
    let start = |args: &[&str]| {
        let output = Command::new(crate::binary())
            .args(args)
            .env_remove("SHELLKEEP_AUDIT_LOG")
            .stdin(std::process::Stdio::null())
            .output()
            .expect("the binary runs");
        (output.status.code(), String::from_utf8_lossy(&output.stderr).into_owned())
    };
    let (code, stderr) = start(&["--audit-log", link.to_str().expect("utf-8")]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--audit-log") && stderr.contains("is a symlink"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&target).expect("read"), "", "nothing written through it");
    let file = dir.path.join("a.jsonl");
    let (code, stderr) =
        start(&["--audit-log", file.to_str().expect("utf-8"), "--audit-log-max-mib", "0"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--audit-log-max-mib must be from 0.01"), "{stderr}");
}

/// A log that cannot be written never fails a call: the error is logged on
/// stderr once, and lines come again once it can be written.
#[tokio::test]
async fn a_write_error_is_logged_once_and_calls_go_on() {
    let dir = Scratch::new();
    let log = log_in(&dir);
    let server = audited(&log, &[]).await;
    server.terminal(json!({"command": "echo one"})).await;
    // The log's path becomes a directory: it cannot be opened for writing.
    std::fs::remove_file(&log).expect("remove the log");
    std::fs::create_dir(&log).expect("a directory in its place");
    for command in ["echo two", "echo three"] {
        let r = server.terminal(json!({"command": command})).await;
        assert_eq!((r["status"].as_str(), r["exit_code"].as_i64()), (Some("completed"), Some(0)));
    }
    let r = server.run(json!({"command": "echo four"})).await;
    assert_eq!(r["stdout"], "four\n", "{r:#?}");
    assert_eq!(server.log().matches("cannot write the audit log").count(), 1, "{}", server.log());
    std::fs::remove_dir(&log).expect("remove the directory");
    server.terminal(json!({"command": "echo five"})).await;
    wait_until(EVENTUALLY, || server.log().contains("is written again"), || server.log()).await;
    let lines = lines(&log);
    assert!(pair(&lines, command_is("echo five")).1["status"] == "completed", "{lines:#?}");
    assert_eq!(std::fs::metadata(&log).expect("the log").permissions().mode() & 0o777, 0o600);
}

/// A `run` the client gives up on is stopped, and its end line says so.
#[tokio::test]
async fn a_cancelled_run_ends_with_cancel() {
    let dir = Scratch::new();
    let log = log_in(&dir);
    let server = audited(&log, &[]).await;
    let sleeper = format!("sleep 300.{}", marker());
    let call = server.run(json!({"command": sleeper, "timeout_sec": 60}));
    assert!(tokio::time::timeout(Duration::from_millis(500), call).await.is_err());
    let ended = || {
        lines(&log).into_iter().find(|l| l["event"] == "end" && l["command"] == sleeper.as_str())
    };
    wait_until(EVENTUALLY, || ended().is_some(), || format!("{:#?}", lines(&log))).await;
    let end = ended().expect("the end line");
    assert_eq!((&end["status"], &end["reason"]), (&json!("error"), &json!("cancel")), "{end}");
    assert_eq!(end["detail"], "killed by the client's cancellation", "{end}");
    crate::assert_none_survive(&[sleeper.as_str()], EVENTUALLY).await;
}
