//! Issue 18 "After a crash": a server that starts where an earlier one of
//! the same audit log died with commands running says so once, in its
//! first reply (text and `servers_died`); `shellkeep audit` shows those
//! commands as `server_died`, and a job whose session was closed as
//! `closed`. A server running beside a live one says nothing of it.

use std::path::Path;

use serde_json::{Value, json};

use crate::{EVENTUALLY, Scratch, Server, marker};

/// Words every crash notice has.
const NOTICE: &str = "An earlier shellkeep server";

/// A server whose audit log is `log`.
async fn audited(log: &Path) -> Server {
    Server::with(&["--audit-log", log.to_str().expect("utf-8")]).await
}

/// `shellkeep audit LOG`: its lines.
fn audit_rows(log: &Path) -> String {
    let output = std::process::Command::new(crate::binary())
        .arg("audit")
        .arg(log)
        .env_remove("SHELLKEEP_AUDIT_LOG")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("the binary runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The row of `rows` about `command`.
fn row<'a>(rows: &'a str, command: &str) -> &'a str {
    rows.lines().find(|line| line.contains(command)).unwrap_or_else(|| panic!("{command}:\n{rows}"))
}

/// The audit log's lines of `event`.
fn events(log: &Path, event: &str) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line["event"] == event)
        .collect()
}

/// Server A dies (SIGKILL) with a command and a background job running;
/// its guard stops them. Server B's first reply says so once, with A's pid,
/// when A started, the two commands and where A's full outputs are; its
/// second reply does not. Server C, started beside B, says nothing: A was
/// reported already, and B is alive. `shellkeep audit` shows A's two
/// commands as `server_died`, not running.
#[tokio::test]
async fn the_server_after_a_crash_says_so_once() {
    let dir = Scratch::new();
    let log = dir.path.join("audit/audit.jsonl");
    let mut a = audited(&log).await;
    let command = format!("sleep 300.{}", marker());
    let job = format!("sleep 300.{}", marker());
    // A job starts from a shell at its prompt: before the command, and
    // once the shell is up (a job asked for while the server still starts the
    // shell is refused: "another call on session default is in progress").
    a.terminal(json!({"command": "echo ready"})).await;
    let r = a.terminal(json!({"command": job, "background": true, "session": "job"})).await;
    assert_eq!(r["status"], "running", "{r:#?}");
    let r = a.terminal(json!({"command": command, "timeout": 0.5})).await;
    assert_eq!(r["status"], "running", "{r:#?}");
    // A command that completed is not among the dead server's commands.
    a.terminal(json!({"command": "echo done", "session": "other"})).await;
    a.signal("KILL");
    a.wait_exit(EVENTUALLY).await;
    crate::assert_none_survive(&[command.as_str(), job.as_str()], EVENTUALLY).await;
    // The guard says so in the client's log, with or without an audit log.
    crate::wait_until(EVENTUALLY, || a.log().contains("without ending normally"), || a.log()).await;
    let rows = audit_rows(&log);
    assert!(row(&rows, &command).contains("running"), "before the next server:\n{rows}");

    let b = audited(&log).await;
    let first = b.terminal(json!({"command": "echo first"})).await;
    assert_eq!(first.text.matches(NOTICE).count(), 1, "{first:#?}");
    assert!(first.text.starts_with("first\n"), "the output comes first: {first:#?}");
    for said in [
        format!("pid {}", a.pid),
        "started 20".to_owned(),
        "while 2 commands ran".to_owned(),
        format!("{command:?} in session \"default\""),
        format!("background job {job:?} in session \"job\""),
        "server_died".to_owned(),
    ] {
        assert!(first.text.contains(&said), "{said} not in {}", first.text);
    }
    assert!(!first.text.contains("echo done"), "{}", first.text);
    let died = &first["servers_died"];
    assert_eq!(died.as_array().map(Vec::len), Some(1), "{first:#?}");
    let died = &died[0];
    assert_eq!((&died["pid"], &died["commands"]), (&json!(a.pid), &json!(2)), "{died}");
    assert!(died["started"].as_str().is_some_and(|t| t.ends_with('Z')), "{died}");
    let running: Vec<&str> = died["running"]
        .as_array()
        .expect("running")
        .iter()
        .filter_map(|c| c["command"].as_str())
        .collect();
    assert_eq!(running, [job.as_str(), command.as_str()], "{died}");
    let dir_said = died["full_output_dir"].as_str().expect("the full-output directory");
    let files = died["output_files"].as_str().expect("the files");
    assert!(
        files.starts_with(dir_said) && files.contains(&format!("/shellkeep-{}-", a.pid)),
        "{died}"
    );
    assert!(first.text.contains(files), "{}", first.text);
    // The schema declares the field.
    let tools = b.client().list_all_tools().await.expect("tools/list");
    let terminal = tools.iter().find(|t| t.name == "terminal").expect("terminal");
    let schema = serde_json::to_value(terminal.output_schema.as_deref()).expect("schema");
    assert_eq!(schema["properties"]["servers_died"]["type"], "array", "{schema}");
    assert!(schema["properties"]["servers_died"]["items"].get("$defs").is_none(), "{schema}");

    let second = b.terminal(json!({"command": "echo second"})).await;
    assert!(!second.text.contains(NOTICE), "said once: {second:#?}");
    assert!(second["servers_died"].is_null(), "{second:#?}");
    let other_tool = b.call("sessions", json!({})).await;
    assert!(!other_tool.text.contains(NOTICE), "{other_tool:#?}");

    let c = audited(&log).await;
    let r = c.terminal(json!({"command": "echo beside"})).await;
    assert!(!r.text.contains(NOTICE), "A was reported, B is alive: {r:#?}");
    assert!(r["servers_died"].is_null(), "{r:#?}");
    let died = events(&log, "server_died");
    assert_eq!(died.len(), 1, "one server died, recorded once: {died:#?}");
    assert_eq!((&died[0]["pid"], &died[0]["commands"]), (&json!(a.pid), &json!(2)), "{died:#?}");

    let rows = audit_rows(&log);
    for command in [&command, &job] {
        let line = row(&rows, command);
        assert!(line.contains("server_died") && !line.contains("running"), "{line}");
    }
    assert!(row(&rows, "echo done").contains("completed"), "{rows}");
    assert!(row(&rows, "echo beside").contains("completed"), "{rows}");
}

/// A server started beside a live one that runs a command says nothing of
/// it, however long the first runs; a background job whose session was
/// closed shows as `closed` in `shellkeep audit`, not as running; a server
/// that ends normally leaves an end line, and the next one says nothing.
#[tokio::test]
async fn a_live_server_is_not_reported_and_a_closed_job_is_closed() {
    let dir = Scratch::new();
    let log = dir.path.join("audit/audit.jsonl");
    let mut a = audited(&log).await;
    let job = format!("sleep 300.{}", marker());
    a.terminal(json!({"command": "echo ready"})).await;
    let r = a.terminal(json!({"command": job, "background": true, "session": "bg"})).await;
    assert_eq!(r["status"], "running", "{r:#?}");
    let r = a.call("session_close", json!({"session": "bg"})).await;
    assert!(!r.is_error, "{r:#?}");
    let command = format!("sleep 300.{}", marker());
    let r = a.terminal(json!({"command": command, "timeout": 0.5})).await;
    assert_eq!(r["status"], "running", "{r:#?}");

    let b = audited(&log).await;
    let r = b.terminal(json!({"command": "echo beside"})).await;
    assert!(!r.text.contains(NOTICE), "A is alive: {r:#?}");
    assert!(r["servers_died"].is_null(), "{r:#?}");
    assert!(events(&log, "server_died").is_empty(), "{:#?}", events(&log, "server_died"));
    let rows = audit_rows(&log);
    assert!(row(&rows, &command).contains("running"), "A still runs it:\n{rows}");
    let job_row = row(&rows, &job);
    assert!(job_row.contains("closed") && !job_row.contains("running"), "{job_row}");

    // A ends normally: it stops its command and says so in the log.
    a.close_connection().await;
    a.wait_exit(EVENTUALLY).await;
    assert_eq!(events(&log, "server_end").len(), 1, "{:#?}", events(&log, "server_end"));
    let c = audited(&log).await;
    let r = c.terminal(json!({"command": "echo after"})).await;
    assert!(!r.text.contains(NOTICE), "A ended normally: {r:#?}");
    assert!(events(&log, "server_died").is_empty(), "{:#?}", events(&log, "server_died"));
    assert!(row(&audit_rows(&log), &command).contains("server_ended"), "{}", audit_rows(&log));
}

/// Issue 18 (clients, 7): on a host whose server control group is gone by
/// the time the guard looks (the server removed it as it ended), every
/// exit logged `WARN … not a control group; left alone`. A normal end now
/// logs no warning about it, nor about work left behind.
#[tokio::test]
async fn a_normal_end_warns_of_nothing_left_behind() {
    let mut server = Server::start().await;
    server.terminal(json!({"command": "echo hi"})).await;
    let guard = crate::guard_of(server.pid).expect("the server runs a guard");
    server.close_connection().await;
    server.wait_exit(EVENTUALLY).await;
    crate::wait_until(EVENTUALLY, || !crate::alive(guard), || server.log()).await;
    let log = server.log();
    for unwanted in ["not a control group", "without ending normally"] {
        assert!(!log.contains(unwanted), "{unwanted}:\n{log}");
    }
}

/// Without `--audit-log` a server keeps its log in the state directory
/// (`$XDG_STATE_HOME/shellkeep/audit.jsonl`, private), so the server after
/// a crash says so with no flag at all; `--no-audit-log` keeps none and
/// says nothing.
#[tokio::test]
async fn the_default_audit_log_tells_of_a_crash_and_no_audit_log_keeps_none() {
    use std::os::unix::fs::PermissionsExt;
    let dir = Scratch::new();
    let state = dir.path.join("state");
    let state_env = [("XDG_STATE_HOME", state.to_str().expect("utf-8"))];
    let crash = async |args: &[&str]| {
        let mut server = Server::with_env(args, &state_env).await;
        let command = format!("sleep 300.{}", marker());
        let r = server.terminal(json!({"command": command, "timeout": 0.5})).await;
        assert_eq!(r["status"], "running", "{r:#?}");
        server.signal("KILL");
        server.wait_exit(EVENTUALLY).await;
        crate::assert_none_survive(&[command.as_str()], EVENTUALLY).await;
        command
    };
    let command = crash(&[]).await;
    let log = state.join("shellkeep/audit.jsonl");
    let mode = std::fs::metadata(&log).expect("the default log").permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{}", log.display());
    let next = Server::with_env(&[], &state_env).await;
    let first = next.terminal(json!({"command": "echo first"})).await;
    assert_eq!(first.text.matches(NOTICE).count(), 1, "{first:#?}");
    assert!(first.text.contains(&command), "{}", first.text);
    assert!(row(&audit_rows(&log), &command).contains("server_died"));
    drop(next);

    let unlogged = crash(&["--no-audit-log"]).await;
    let next = Server::with_env(&["--no-audit-log"], &state_env).await;
    let first = next.terminal(json!({"command": "echo first"})).await;
    assert!(!first.text.contains(NOTICE), "{first:#?}");
    let lines = std::fs::read_to_string(&log).expect("the default log");
    assert!(!lines.contains(&unlogged), "--no-audit-log wrote {unlogged}:\n{lines}");
}
