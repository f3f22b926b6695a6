//! Unit tests of line building, rotation, reading back and times.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use serde_json::Value;
use shellkeep_engine::Shown;
use shellkeep_engine::TerminationMode;
use shellkeep_engine::{DecisionSource, PolicyLimits as Limits};
use shellkeep_engine::{RunEnd, TimeoutReason};

use super::call::{cut_command, run_end, terminal_end};
use super::dead::{DeadCommand, boot_id, dead_servers, server_alive};
use super::read::{Record, parse_span, read_tail, rows};
use super::*;
use shellkeep_engine::Decision;
use shellkeep_engine::Input;
use shellkeep_engine::RunOutcome;
use shellkeep_engine::start_ticks;
use shellkeep_engine::{Call, NotRun, Outcome, Reply, SessionError, WaitEnded};
use std::time::Duration;

/// A fresh private directory, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        let dir = std::env::temp_dir()
            .join(format!("shellkeep-audit-test-{}", shellkeep_engine::random_hex(8).unwrap()));
        shellkeep_engine::create_private_dir(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).expect("each line is JSON"))
        .collect()
}

fn decision(exec: u64) -> Decision {
    Decision {
        limits: Limits { exec: Duration::from_secs(exec), no_output: Duration::from_secs(30) },
        category: Some("quick".to_owned()),
        source: DecisionSource::Default,
    }
}

fn reply(command: &str, outcome: Outcome) -> Reply {
    Reply {
        command: command.to_owned(),
        outcome,
        output: Shown::empty(),
        screen: false,
        input: None,
        idle_output: None,
        events: Vec::new(),
        cwd: PathBuf::from("/"),
        python: None,
        duration: Duration::from_millis(1500),
        continued: false,
        previous: None,
        number: Some(3),
        first_line: 0,
        look_again_within: None,
        unfinished_line: None,
    }
}

#[test]
fn times_are_rfc3339_utc_and_read_back() {
    assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
    let time = UNIX_EPOCH + Duration::from_millis(1_700_000_000_123);
    assert_eq!(rfc3339(time), "2023-11-14T22:13:20.123Z");
    // A leap day and the turn of a century.
    let leap = UNIX_EPOCH + Duration::from_secs(951_782_400);
    assert_eq!(rfc3339(leap), "2000-02-29T00:00:00.000Z");
    for secs in [0, 951_782_400, 1_700_000_000, 4_102_444_799, 1_234_567_890] {
        let time = UNIX_EPOCH + Duration::from_millis(secs * 1000 + 7);
        assert_eq!(parse_rfc3339(&rfc3339(time)), Some(time), "{secs}");
    }
    assert_eq!(
        parse_rfc3339("2023-11-14T22:13:20Z"),
        Some(UNIX_EPOCH + Duration::from_secs(1_700_000_000))
    );
    assert_eq!(parse_rfc3339("yesterday"), None);
}

#[test]
fn spans_for_since() {
    assert_eq!(parse_span("90s").unwrap(), Duration::from_secs(90));
    assert_eq!(parse_span("30m").unwrap(), Duration::from_secs(1800));
    assert_eq!(parse_span("1h").unwrap(), Duration::from_secs(3600));
    assert_eq!(parse_span("2d").unwrap(), Duration::from_secs(172_800));
    assert_eq!(parse_span("45").unwrap(), Duration::from_secs(45));
    assert_eq!(parse_span("1.5h").unwrap(), Duration::from_secs(5400));
    for bad in ["1w", "h", "-1h", ""] {
        let err = parse_span(bad).map(|_| ()).unwrap_err().to_string();
        assert!(bad.is_empty() || err.contains("as in 1h"), "{bad}: {err}");
    }
}

#[test]
fn a_long_command_is_cut_and_says_how_long_it_was() {
    let long = "é".repeat(COMMAND_BOUND + 5);
    let (text, chars) = cut_command(Some(&long));
    assert_eq!(text.unwrap().chars().count(), COMMAND_BOUND);
    assert_eq!(chars, Some(COMMAND_BOUND + 5));
    assert_eq!(cut_command(Some("ls")), (Some("ls".to_owned()), None));
    assert_eq!(cut_command(None), (None, None));
}

/// The input of a list of keys.
fn keys(items: &[&str]) -> Input {
    let items: Vec<String> = items.iter().map(|item| (*item).to_owned()).collect();
    shellkeep_engine::parse_keys(&items).expect("valid keys")
}

#[test]
fn a_terminal_start_names_the_kind_of_call() {
    let d = decision(10);
    let kinds = [
        (Call::run("make"), Some(&d), "command", Some("make"), None, None),
        (Call::run("server"), None, "background", Some("server"), None, None),
        (Call::Reset { then: Some("ls".into()) }, Some(&d), "reset", Some("ls"), None, None),
        (Call::Reset { then: None }, Some(&d), "reset", None, None, None),
        (Call::Input(Input::Text("hunter2".into())), Some(&d), "input", None, None, Some(7)),
        (Call::Input(keys(&["C-c"])), Some(&d), "key", None, Some("C-c"), None),
        // Text in a list of keys is recorded by its size only.
        (
            Call::Input(keys(&["ESC", ":wq", "ENTER"])),
            Some(&d),
            "key",
            None,
            Some("ESC text(3) ENTER"),
            Some(3),
        ),
        (Call::Poll, Some(&d), "poll", None, None, None),
    ];
    for (call, decision, kind, command, key, input_bytes) in kinds {
        let start = Start::terminal("work", &call, decision);
        assert_eq!(start.call, kind);
        assert_eq!(start.session.as_deref(), Some("work"));
        assert_eq!(start.command.as_deref(), command, "{kind}");
        assert_eq!(start.key.as_deref(), key, "{kind}");
        assert_eq!(start.input_bytes, input_bytes, "{kind}");
        // Limits only for a call that runs a command under them.
        assert_eq!(start.category.is_some(), command.is_some() && kind != "background", "{kind}");
    }
}

#[test]
fn a_terminal_end_says_how_the_command_ended() {
    let start = Start::terminal("default", &Call::run("make"), Some(&decision(10)));
    let completed =
        terminal_end(&start, &Ok(reply("make", Outcome::Completed { exit_code: 2 })), Some(40));
    assert_eq!(
        (completed.status, completed.exit_code, completed.reason, completed.output_bytes),
        ("completed", Some(2), None, Some(40))
    );
    assert_eq!(completed.duration, Some(Duration::from_millis(1500)));
    assert_eq!(completed.command_number, Some(3));

    let killed = Outcome::Killed {
        limit: Duration::from_secs(10),
        mode: TerminationMode::Hard,
        exit_code: 137,
    };
    let killed = terminal_end(&start, &Ok(reply("make", killed)), None);
    assert_eq!(
        (killed.status, killed.reason, killed.termination_mode),
        ("killed", Some("limit"), Some("hard"))
    );
    assert_eq!(killed.exit_code, Some(137));

    let signal =
        terminal_end(&start, &Ok(reply("make", Outcome::Completed { exit_code: 143 })), None);
    assert_eq!((signal.reason, signal.detail.as_deref()), (Some("signal"), Some("signal 15")));

    let cancelled = Outcome::Running { why: WaitEnded::Cancelled };
    let cancelled = terminal_end(&start, &Ok(reply("make", cancelled)), None);
    assert_eq!(
        (cancelled.status, cancelled.reason, cancelled.exit_code),
        ("running", Some("cancel"), None)
    );

    let key = Start::terminal("default", &Call::Input(keys(&["C-c"])), None);
    let interrupted =
        terminal_end(&key, &Ok(reply("sleep 9", Outcome::Completed { exit_code: 130 })), None);
    assert_eq!(
        (interrupted.reason, interrupted.command.as_deref()),
        (Some("C-c"), Some("sleep 9"))
    );

    let not_run = Outcome::NotExecuted {
        command: "ls".into(),
        why: NotRun::CommandRunning { reading: None },
    };
    let not_run = terminal_end(&start, &Ok(reply("sleep 9", not_run)), Some(5));
    assert_eq!((not_run.status, not_run.reason), ("not_executed", Some("not_executed")));
    assert_eq!(
        (not_run.exit_code, not_run.output_bytes, not_run.command_number),
        (None, None, None)
    );

    let reset = Start::terminal("default", &Call::Reset { then: None }, Some(&decision(10)));
    let idle = terminal_end(&reset, &Ok(reply("", Outcome::Idle)), None);
    assert_eq!((idle.status, idle.reason), ("idle", Some("reset")));

    let refused = terminal_end(&start, &Err(SessionError::Cancelled), None);
    assert_eq!((refused.status, refused.reason), ("not_executed", Some("cancel")));
    let refused = terminal_end(&start, &Err(SessionError::NothingToWaitFor), None);
    assert_eq!(refused.status, "refused");
}

#[test]
fn a_run_end_says_which_limit() {
    let outcome = RunOutcome {
        end: RunEnd::TimedOut { reason: TimeoutReason::NoOutput, stopped: TerminationMode::Soft },
        number: 1,
        stdout: Shown::empty(),
        stderr: Shown::empty(),
        duration: Duration::from_secs(2),
        limits: decision(1).limits,
        pgid: None,
        limit_hits: Vec::new(),
    };
    let end = run_end(&outcome, 12);
    assert_eq!(
        (end.status, end.reason, end.detail.as_deref()),
        ("timeout", Some("limit"), Some("no_output_timeout"))
    );
    assert_eq!(
        (end.termination_mode, end.output_bytes, end.exit_code),
        (Some("soft"), Some(12), Some(-1))
    );
    let cancelled =
        RunOutcome { end: RunEnd::Cancelled { stopped: TerminationMode::Soft }, ..outcome.clone() };
    let end = run_end(&cancelled, 0);
    assert_eq!(end.reason, Some("cancel"));
    assert_eq!(end.detail.as_deref(), Some("killed by the client's cancellation"));
    let failed =
        RunOutcome { end: RunEnd::Exited { code: 1, stopped_leftovers: false }, ..outcome };
    assert_eq!((run_end(&failed, 0).status, run_end(&failed, 0).reason), ("success", None));
}

#[test]
fn lines_are_written_masked_with_a_shared_id() {
    let dir = TempDir::new();
    let path = dir.0.join("audit.jsonl");
    let mask: Mask = Arc::new(|text: &str| text.replace("s3cr3tvalue", "<secret-hidden>"));
    let log = Arc::new(AuditLog::with_limits(&path, 1 << 20, 5, mask).unwrap());
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    let client = Client { name: "tester".into(), version: "1.2".into() };
    let call = log.begin(
        Some(client),
        Start::terminal("default", &Call::run("echo s3cr3tvalue"), Some(&decision(10))),
    );
    // The start line is on disk before the command starts.
    let written = lines(&path);
    assert_eq!(written.len(), 1);
    let start = &written[0];
    assert_eq!(start["event"], "start");
    assert_eq!(start["command"], "echo <secret-hidden>");
    assert_eq!(start["client"]["name"], "tester");
    assert_eq!(start["category"], "quick");
    assert_eq!(start["limits"]["exec_sec"], 10.0);
    assert!(parse_rfc3339(start["time"].as_str().unwrap()).is_some());
    call.end_terminal(
        &Ok(reply("echo s3cr3tvalue", Outcome::Completed { exit_code: 0 })),
        Some(12),
    );
    let written = lines(&path);
    let end = &written[1];
    assert_eq!((&end["event"], &end["id"]), (&Value::from("end"), &start["id"]));
    assert_eq!(end["command"], "echo <secret-hidden>");
    assert_eq!(
        (&end["status"], &end["exit_code"], &end["output_bytes"]),
        (&"completed".into(), &0.into(), &12.into())
    );
    assert_eq!(end["duration_ms"], 1500);
    assert!(!std::fs::read_to_string(&path).unwrap().contains("s3cr3tvalue"));

    // A call whose task goes away still ends: cancelled.
    drop(log.begin(None, Start::run("sleep 100", &decision(10))));
    let written = lines(&path);
    assert_eq!(
        (&written[3]["status"], &written[3]["reason"]),
        (&"cancelled".into(), &"cancel".into())
    );
    assert_eq!(written[2]["id"], written[3]["id"]);
    assert_ne!(written[0]["id"], written[2]["id"]);
}

#[test]
fn the_log_rotates_at_its_bound_keeping_n_files() {
    let dir = TempDir::new();
    let path = dir.0.join("audit.jsonl");
    let log = Arc::new(AuditLog::with_limits(&path, 1000, 2, no_mask()).unwrap());
    for n in 0..40 {
        log.begin(None, Start::run(&format!("echo {n}"), &decision(10))).end_run(
            &RunOutcome {
                end: RunEnd::Exited { code: 0, stopped_leftovers: false },
                number: n,
                stdout: Shown::empty(),
                stderr: Shown::empty(),
                duration: Duration::ZERO,
                limits: decision(10).limits,
                pgid: None,
                limit_hits: Vec::new(),
            },
            0,
        );
    }
    let rotated = |n: u32| dir.0.join(format!("audit.jsonl.{n}"));
    assert!(rotated(1).exists() && rotated(2).exists());
    assert!(!rotated(3).exists(), "only two rotations are kept");
    for file in [path.clone(), rotated(1), rotated(2)] {
        let meta = std::fs::metadata(&file).unwrap();
        assert!(meta.len() <= 1000, "{} is {} bytes", file.display(), meta.len());
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        // Whole lines only.
        assert_eq!(
            lines(&file).len() as u64,
            std::fs::read_to_string(&file).unwrap().matches('\n').count() as u64
        );
    }
    // The newest command is in the current file, and the read-back sees
    // the rotations oldest first.
    assert!(std::fs::read_to_string(&path).unwrap().contains("echo 39"));
    let mut out = Vec::new();
    print(&AuditQuery { since: None, failed: false, file: Some(path.clone()) }, &mut out).unwrap();
    let out = String::from_utf8(out).unwrap();
    let numbers: Vec<u64> =
        out.lines().map(|l| l.rsplit(' ').next().unwrap().parse().unwrap()).collect();
    assert!(numbers.windows(2).all(|w| w[1] == w[0] + 1), "{out}");
    assert_eq!(numbers.last(), Some(&39));

    // With no rotations kept, the log starts afresh.
    let single = dir.0.join("single.jsonl");
    let log = Arc::new(AuditLog::with_limits(&single, 400, 0, no_mask()).unwrap());
    for n in 0..10 {
        drop(log.begin(None, Start::run(&format!("echo {n}"), &decision(10))));
    }
    assert!(std::fs::metadata(&single).unwrap().len() <= 400);
    assert!(!dir.0.join("single.jsonl.1").exists());
}

#[test]
fn a_symlink_or_a_file_of_another_user_is_refused() {
    let dir = TempDir::new();
    let target = dir.0.join("target");
    std::fs::write(&target, "").unwrap();
    let link = dir.0.join("audit.jsonl");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let err = AuditLog::with_limits(&link, 1000, 1, no_mask()).map(|_| ()).unwrap_err();
    assert!(err.to_string().contains("is a symlink"), "{err}");
    if shellkeep_engine::euid() == 0 {
        let theirs = dir.0.join("theirs.jsonl");
        std::fs::write(&theirs, "").unwrap();
        std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
        let err = AuditLog::with_limits(&theirs, 1000, 1, no_mask()).map(|_| ()).unwrap_err();
        assert!(err.to_string().contains("is not owned by us"), "{err}");
    }
    // A file others could read is made private.
    let open = dir.0.join("open.jsonl");
    std::fs::write(&open, "").unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o644)).unwrap();
    AuditLog::with_limits(&open, 1000, 1, no_mask()).unwrap();
    assert_eq!(std::fs::metadata(&open).unwrap().permissions().mode() & 0o777, 0o600);
}

#[test]
fn the_read_back_takes_a_commands_end_from_a_later_poll() {
    let record = |json: Value| serde_json::from_value::<Record>(json).unwrap();
    let records = [
        record(
            serde_json::json!({"time": "2026-01-01T00:00:00.000Z", "event": "start", "id": "ab-1", "tool": "terminal", "call": "command", "session": "default", "command": "make"}),
        ),
        record(
            serde_json::json!({"event": "end", "id": "ab-1", "tool": "terminal", "call": "command", "session": "default", "status": "running", "command_number": 4, "duration_ms": 50000}),
        ),
        record(
            serde_json::json!({"event": "start", "id": "ab-2", "tool": "terminal", "call": "poll", "session": "default"}),
        ),
        record(
            serde_json::json!({"event": "end", "id": "ab-2", "tool": "terminal", "call": "poll", "session": "default", "status": "completed", "exit_code": 2, "command_number": 4, "duration_ms": 70000}),
        ),
        // Another server's command 4 on its own default session.
        record(
            serde_json::json!({"event": "end", "id": "cd-9", "tool": "terminal", "call": "poll", "session": "default", "status": "completed", "exit_code": 0, "command_number": 4}),
        ),
        record(
            serde_json::json!({"time": "2026-01-01T00:01:00.000Z", "event": "start", "id": "ab-3", "tool": "run", "call": "run", "command": "sleep 100"}),
        ),
    ];
    let rows = rows(&records);
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(
        (rows[0].status.as_str(), rows[0].exit_code, rows[0].duration_ms),
        ("completed", Some(2), Some(70000))
    );
    assert!(rows[0].failed());
    // A start line without its end: the server was killed mid-command.
    assert_eq!((rows[1].status.as_str(), rows[1].session.as_str()), ("unfinished", "(run)"));
    assert!(!rows[1].failed());
}

fn record(json: Value) -> Record {
    serde_json::from_value::<Record>(json).unwrap()
}

/// The lines a server `server` writes for a command `n` in `session`
/// started at `time`, whose call ended with `status` (`None`: no end).
fn command_lines(
    server: &str,
    n: u64,
    call: &str,
    session: &str,
    status: Option<&str>,
) -> Vec<Record> {
    let id = format!("{server}-{n}");
    let tool = if call == "run" { "run" } else { "terminal" };
    let mut lines = vec![record(serde_json::json!({
        "time": format!("2026-01-01T00:00:{n:02}.000Z"), "event": "start", "id": id,
        "tool": tool, "call": call, "session": session, "command": format!("cmd {server} {n}")
    }))];
    if let Some(status) = status {
        lines.push(record(serde_json::json!({
            "time": format!("2026-01-01T00:00:{:02}.500Z", n), "event": "end", "id": id,
            "tool": tool, "call": call, "session": session, "status": status,
            "command_number": n, "duration_ms": 500
        })));
    }
    lines
}

fn server_line(event: &str, server: &str, pid: u32) -> Record {
    record(serde_json::json!({
        "time": "2026-01-01T00:00:00.000Z", "event": event, "id": format!("{server}-0"),
        "pid": pid, "pid_start": 1, "full_output_dir": "/out", "output_prefix": format!("{pid}-abc")
    }))
}

/// A server is reported dead when it started, has no end line or death
/// line, and is not alive; with it go the commands the log shows running
/// (not input, not a finished command, not one a later poll ended).
#[test]
fn dead_servers_are_those_gone_without_an_end_and_their_open_commands() {
    let mut records = vec![
        server_line("server_start", "aa", 11),
        server_line("server_start", "bb", 22),
        server_line("server_start", "cc", 33),
        server_line("server_start", "dd", 44),
        server_line("server_start", "ee", 55),
    ];
    records.extend(command_lines("aa", 1, "command", "default", None));
    records.extend(command_lines("aa", 2, "background", "job", Some("running")));
    records.extend(command_lines("aa", 3, "command", "other", Some("running")));
    records.extend(command_lines("aa", 4, "poll", "other", Some("completed")));
    records.extend(command_lines("aa", 5, "input", "default", None));
    records.extend(command_lines("aa", 6, "run", "", None));
    records.extend(command_lines("aa", 7, "command", "default", Some("completed")));
    records.extend(command_lines("bb", 1, "command", "default", Some("running")));
    records.extend(command_lines("cc", 1, "command", "default", Some("running")));
    records.extend(command_lines("dd", 1, "command", "default", Some("running")));
    records.push(server_line("server_end", "cc", 33));
    records.push(server_line("server_died", "dd", 44));
    // The poll of command 3 ended it: it reports number 3.
    records.iter_mut().filter(|r| r.id == "aa-4").for_each(|r| r.command_number = Some(3));
    let alive = |start: &Record| start.server() == "bb";
    let dead = dead_servers(&records, "ee", &alive);
    assert_eq!(dead.len(), 1, "{dead:#?}");
    let aa = &dead[0];
    assert_eq!((aa.server.as_str(), aa.pid), ("aa", 11));
    assert_eq!(aa.started.as_deref(), Some("2026-01-01T00:00:00.000Z"));
    assert_eq!(
        (aa.full_output_dir.as_deref(), aa.output_prefix.as_deref()),
        (Some("/out"), Some("11-abc"))
    );
    let commands: Vec<(&str, &str, bool)> = aa
        .commands
        .iter()
        .map(|c| (c.session.as_str(), c.command.as_str(), c.background))
        .collect();
    assert_eq!(
        commands,
        [("default", "cmd aa 1", false), ("job", "cmd aa 2", true), ("(run)", "cmd aa 6", false)]
    );
    // Nothing is said of a server whose start line has no pid (an older
    // server's), nor twice of one whose start line is repeated.
    let mut older = server_line("server_start", "ff", 66);
    older.pid = None;
    records.push(older);
    records.push(server_line("server_start", "aa", 11));
    assert_eq!(dead_servers(&records, "ee", &alive).len(), 1);
}

/// A server runs while its pid has the start time it recorded, in this
/// boot, and is not a zombie.
#[test]
fn a_server_is_alive_while_its_pid_has_its_start_time() {
    let pid = std::process::id();
    let ticks = start_ticks(pid).expect("our own start time");
    let boot = boot_id();
    let mut start = server_line("server_start", "aa", pid);
    start.pid_start = Some(ticks);
    start.boot_id = boot.clone();
    assert!(server_alive(&start, boot.as_deref()));
    start.pid_start = Some(ticks + 1);
    assert!(!server_alive(&start, boot.as_deref()), "the pid was reused");
    start.pid_start = Some(ticks);
    start.boot_id = Some("another boot".to_owned());
    assert!(!server_alive(&start, boot.as_deref()), "the machine rebooted");
    start.pid = Some(u32::MAX / 2);
    start.boot_id = boot.clone();
    assert!(!server_alive(&start, boot.as_deref()), "no such process");
    start.pid_start = None;
    assert!(server_alive(&start, boot.as_deref()), "nothing can be said without a start time");
}

/// The tail is bounded: the current file's end, then the rotation's; the
/// line the bound cuts is left out.
#[test]
fn the_tail_is_bounded_and_starts_on_a_whole_line() {
    let dir = TempDir::new();
    let path = dir.0.join("audit.jsonl");
    let line = |n: u32| format!("{{\"event\":\"start\",\"id\":\"aa-{n}\",\"call\":\"command\"}}\n");
    let old: String = (1..=3).map(line).collect();
    let new: String = (4..=6).map(line).collect();
    std::fs::write(dir.0.join("audit.jsonl.1"), &old).unwrap();
    std::fs::write(&path, &new).unwrap();
    let ids =
        |bound: u64| -> Vec<String> { read_tail(&path, bound).into_iter().map(|r| r.id).collect() };
    assert_eq!(ids(10_000), ["aa-1", "aa-2", "aa-3", "aa-4", "aa-5", "aa-6"]);
    let one = line(1).len() as u64;
    assert_eq!(ids(one * 3), ["aa-4", "aa-5", "aa-6"]);
    assert_eq!(ids(one * 3 + 5), ["aa-4", "aa-5", "aa-6"], "a cut line is left out");
    assert_eq!(ids(one * 4 + 1), ["aa-3", "aa-4", "aa-5", "aa-6"]);
    assert_eq!(ids(one * 2 - 1), ["aa-6"]);
    std::fs::remove_file(&path).unwrap();
    assert_eq!(ids(10_000), ["aa-1", "aa-2", "aa-3"], "only the rotation is left");
}

/// A command the log shows running takes the end of a later close or
/// reset of its session, else its server's fate; a command of a server
/// that still runs stays running.
#[test]
fn the_read_back_folds_closes_resets_and_dead_servers_into_commands() {
    let mut records = Vec::new();
    records.extend(command_lines("aa", 1, "background", "job", Some("running")));
    records.extend(command_lines("aa", 2, "command", "default", Some("running")));
    records.extend(command_lines("aa", 3, "command", "work", Some("running")));
    records.extend(command_lines("bb", 1, "command", "job", Some("running")));
    records.push(record(serde_json::json!({
        "time": "2026-01-01T00:00:09.000Z", "event": "end", "id": "aa-4",
        "tool": "session_close", "call": "session_close", "session": "job", "status": "closed"
    })));
    records.push(record(serde_json::json!({
        "time": "2026-01-01T00:00:12.000Z", "event": "end", "id": "aa-5",
        "tool": "terminal", "call": "reset", "session": "default", "status": "idle"
    })));
    records.push(server_line("server_died", "aa", 11));
    let rows = rows(&records);
    let status = |command: &str| -> (String, Option<u64>) {
        let row = rows.iter().find(|row| row.command == command).unwrap();
        (row.status.clone(), row.duration_ms)
    };
    assert_eq!(status("cmd aa 1"), ("closed".to_owned(), Some(8000)));
    assert_eq!(status("cmd aa 2"), ("reset".to_owned(), Some(10_000)));
    assert_eq!(status("cmd aa 3"), ("server_died".to_owned(), None));
    assert_eq!(status("cmd bb 1"), ("running".to_owned(), Some(500)), "another server's session");
    assert!(rows.iter().find(|row| row.command == "cmd aa 3").unwrap().failed());
    // A close before the command started does not end it.
    let mut later = command_lines("aa", 1, "background", "job", Some("running"));
    later.splice(0..0, records.iter().filter(|r| r.id == "aa-4").cloned());
    assert_eq!(rows_status(&later), ["running"]);
    later.push(server_line("server_end", "aa", 11));
    assert_eq!(rows_status(&later), ["server_ended"]);
    assert!(!super::read::rows(&later)[0].failed());
}

fn rows_status(records: &[Record]) -> Vec<String> {
    rows(records).into_iter().filter(|row| row.is_command()).map(|row| row.status).collect()
}

/// The notice names at most five commands and counts the rest, says where
/// the files are, and is absent when no server died with commands.
#[test]
fn the_crash_notice_is_bounded_and_says_where_the_outputs_are() {
    assert_eq!(crate::render::servers_died(&[]), None);
    let commands = (1..=7)
        .map(|n| DeadCommand {
            session: format!("s{n}"),
            command: format!("sleep {n}"),
            background: n == 1,
        })
        .collect();
    let dead = DeadServer {
        server: "aa".to_owned(),
        pid: 1234,
        started: Some("2026-01-01T00:00:00.000Z".to_owned()),
        commands,
        full_output_dir: Some("/state/output".to_owned()),
        output_prefix: Some("1234-abcdef".to_owned()),
    };
    let (text, structured) = crate::render::servers_died(&[dead]).expect("a notice");
    assert!(
        text.starts_with(
            "[An earlier shellkeep server (pid 1234, started 2026-01-01T00:00:00.000Z)"
        ),
        "{text}"
    );
    assert!(text.contains("while 7 commands ran: background job \"sleep 1\" in session \"s1\", command \"sleep 2\""), "{text}");
    assert!(text.contains("\"sleep 5\" in session \"s5\", 2 more."), "{text}");
    assert!(!text.contains("sleep 6"), "{text}");
    assert!(text.contains("/state/output/1234-abcdef-*"), "{text}");
    assert!(text.ends_with(']') && !text.contains('\n'), "{text}");
    assert_eq!(structured[0]["commands"], 7);
    assert_eq!(structured[0]["running"].as_array().map(Vec::len), Some(5));
    assert_eq!(structured[0]["output_files"], "/state/output/1234-abcdef-*");
}

/// One start claims at most [`MAX_DEAD_SERVERS`], the oldest first; the
/// next start claims the rest.
#[test]
fn dead_servers_are_claimed_a_few_at_a_time() {
    let mut records: Vec<Record> =
        (0..5).map(|n| server_line("server_start", &format!("s{n}"), 100 + n)).collect();
    let dead = |records: &[Record]| dead_servers(records, "own", &|_: &Record| false);
    let first: Vec<u32> = dead(&records).iter().map(|server| server.pid).collect();
    assert_eq!(first, [100, 101, 102]);
    for pid in first {
        records.push(server_line("server_died", &format!("s{}", pid - 100), pid));
    }
    let second: Vec<u32> = dead(&records).iter().map(|server| server.pid).collect();
    assert_eq!(second, [103, 104]);
}

/// A principal's call says who made it, and its session is named
/// `PRINCIPAL/NAME`: two principals' `default` stay apart in the log and in
/// `shellkeep audit`, and a local call names neither.
#[test]
fn a_principals_calls_carry_it_and_keep_its_sessions_apart() {
    let dir = TempDir::new();
    let path = dir.0.join("audit.jsonl");
    let log = Arc::new(AuditLog::with_limits(&path, 1 << 20, 5, no_mask()).unwrap());
    for (principal, command) in
        [(Some("alice"), "echo a"), (Some("bob"), "echo b"), (None, "echo l")]
    {
        let start = Start::terminal("default", &Call::run(command), Some(&decision(10)));
        log.begin(None, start.by(principal))
            .end_terminal(&Ok(reply(command, Outcome::Completed { exit_code: 0 })), Some(2));
    }
    let written = lines(&path);
    assert_eq!(
        (&written[0]["principal"], &written[0]["session"]),
        (&"alice".into(), &"alice/default".into())
    );
    assert_eq!(written[1]["principal"], "alice", "the end line too");
    assert_eq!(written[2]["session"], "bob/default");
    assert_eq!(
        (&written[4]["principal"], &written[4]["session"]),
        (&Value::Null, &"default".into())
    );
    let mut out = Vec::new();
    print(&AuditQuery { since: None, failed: false, file: Some(path.clone()) }, &mut out).unwrap();
    let printed = String::from_utf8(out).unwrap();
    for session in ["alice/default", "bob/default"] {
        assert_eq!(printed.matches(session).count(), 1, "{printed}");
    }
}
