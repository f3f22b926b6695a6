//! Nothing escapes, in every containment mode (issue 11, deliver §1;
//! findings F5, F6, F7 of the hostile notes): a command starts processes
//! that leave its process group and session every way a same-user program
//! can (`setsid` in a subshell, `setsid -f`, `nohup setsid … &`, a `tmux`
//! server, a `setsid` tree that ignores SIGTERM, a non-dumpable double
//! fork, a double fork that wipes its environment in memory, `env -i`, a
//! replaced `SHELLKEEP_SCOPE`, one relabelled with this server's token and
//! an owner that never existed or has ended), and after each way the command can end
//! (`C-c`, the execution-limit kill, `run`'s timeout and its end, `reset`,
//! `session_close`, the server's SIGTERM and SIGKILL) none of them is
//! alive; the shell and its own `&` jobs are.
//!
//! Every test runs once per containment mode: `auto` (a control group where
//! the host allows it) and `markers`, or only the one
//! `SHELLKEEP_TEST_CONTAINMENT` names (CI runs the suite as an unprivileged
//! user in each mode that way).

use std::time::Duration;

use serde_json::json;

use crate::{Scratch, Server, assert_none_survive, marker, processes_with, wait_alive, wait_until};

/// How long cleanup may take: the grace is 0.5 s, the guard's 2 s.
const CLEANUP: Duration = Duration::from_secs(15);

/// The containment modes each test runs in.
fn modes() -> Vec<String> {
    match std::env::var("SHELLKEEP_TEST_CONTAINMENT") {
        Ok(mode) if !mode.is_empty() => vec![mode],
        _ => vec!["auto".into(), "markers".into()],
    }
}

/// The mode for the tests that need control groups: the one CI asks for
/// (`SHELLKEEP_TEST_CONTAINMENT=cgroup2`), else whatever the host allows.
fn cgroup_mode() -> String {
    match std::env::var("SHELLKEEP_TEST_CONTAINMENT") {
        Ok(mode) if mode.starts_with("cgroup") => mode,
        _ => "auto".into(),
    }
}

/// Such a test may pass without control groups only when nobody asked
/// for them: a run that asked must not turn into a skip.
fn skip_without_cgroups(why: &str) {
    assert_eq!(cgroup_mode(), "auto", "control groups were asked for, but {why}");
    crate::skipping(why);
}

/// Whether a `/proc/PID/cgroup` line is of a hierarchy containment uses:
/// cgroup2 (`0::`) or the v1 `freezer` (not the v1 `memory` or `pids`
/// hierarchies, whose groups only limit resources).
fn containment_line(line: &str) -> bool {
    line.starts_with("0::")
        || line.split(':').nth(1).is_some_and(|names| names.split(',').any(|n| n == "freezer"))
}

/// A server in containment `mode`, with a short grace, and extra `args`.
async fn server(mode: &str, args: &[&str]) -> Server {
    let mut all = vec!["--grace", "0.5"];
    all.extend_from_slice(args);
    Server::with_env(&all, &[("SHELLKEEP_CONTAINMENT", mode)]).await
}

/// A program that makes itself non-dumpable (its environment can then not
/// be read by an unprivileged server), leaves its session and is orphaned.
const NON_DUMPABLE: &str = "import ctypes,os,time; ctypes.CDLL(None).prctl(4,0,0,0,0); \
                            os.fork() and os._exit(0); os.setsid(); os.fork() and os._exit(0); \
                            time.sleep(300)";

/// A program that overwrites its own environment in memory with zeros (no
/// exec), leaves its session and is orphaned.
const WIPES_ITS_ENVIRONMENT: &str = "import os,time; \
    f=open(\"/proc/self/stat\").read().rsplit(\")\",1)[1].split(); s,e=int(f[47]),int(f[48]); \
    m=open(\"/proc/self/mem\",\"r+b\"); m.seek(s); m.write(bytes(e-s)); m.close(); \
    os.fork() and os._exit(0); os.setsid(); os.fork() and os._exit(0); time.sleep(300)";

/// Every escape shape, as one line of shell that starts them all in the
/// background, and the markers that find each in `/proc`. With
/// `marked_only`, only the shapes that keep a readable marker (what the
/// orphan guard finds after a server SIGKILL in markers mode).
fn escapes(marked_only: bool) -> (String, Vec<String>) {
    let mut markers = Vec::new();
    let mut next = || {
        let found_by = format!("300.{}", marker());
        markers.push(found_by.clone());
        found_by
    };
    let mut parts = vec![
        format!("(setsid sleep {} &);", next()),
        format!("setsid -f sleep {};", next()),
        format!("nohup setsid sleep {} >/dev/null 2>&1 &", next()),
        format!("(setsid bash -c 'trap \"\" TERM HUP; sleep {}' &);", next()),
    ];
    let tmux = next();
    parts.push(format!("tmux -L sk-{tmux} -f /dev/null new -d 'sleep {tmux}';"));
    if !marked_only {
        parts.extend([
            format!("(python3 -c '{NON_DUMPABLE}' {} </dev/null >/dev/null 2>&1 &);", next()),
            format!(
                "(python3 -c '{WIPES_ITS_ENVIRONMENT}' {} </dev/null >/dev/null 2>&1 &);",
                next()
            ),
            format!("(env -i setsid /bin/sleep {} &);", next()),
            format!("(SHELLKEEP_SCOPE=x setsid sleep {} &);", next()),
        ]);
        // Relabelled with this server's token and an owner that never
        // existed: only a live owner's marker counts as marked.
        for owner in ["ghost", "run-99"] {
            parts.push(format!(
                "(SHELLKEEP_SCOPE=${{SHELLKEEP_SCOPE%%/*}}/{owner} setsid -f sleep {} \
                 </dev/null >/dev/null 2>&1);",
                next()
            ));
        }
    }
    (parts.join(" "), markers)
}

/// Waits until every process of `markers` that forks itself away (the
/// Python shapes) has finished doing so: one process left, an orphan the
/// server adopted, its environment wiped where it wipes it, or none left at
/// all. Before that, a sweep could still find its marker, and the test
/// would prove less.
async fn wait_settled(server: &Server, markers: &[String]) {
    let server_pid = server.pid.to_string();
    let settled = |marker: &String| {
        let found = processes_with(&[marker]);
        // Gone already (a `run` whose limit came first on a busy machine)
        // is as settled as it gets; nothing of it can be found any more.
        if found.is_empty() || !found.iter().all(|line| line.contains("python3")) {
            return true;
        }
        let [line] = &found[..] else { return false };
        let pid = line.split(':').next().unwrap_or_default();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let ppid = stat.rsplit_once(") ").and_then(|(_, rest)| rest.split(' ').nth(1));
        let wipes = line.contains("/proc/self/mem");
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        ppid == Some(server_pid.as_str()) && (!wipes || !environ.contains(&b'='))
    };
    wait_until(
        CLEANUP,
        || markers.iter().all(settled),
        || format!("not settled: {:?}", processes_with(&refs(markers))),
    )
    .await;
}

fn refs(markers: &[String]) -> Vec<&str> {
    markers.iter().map(String::as_str).collect()
}

/// A `sleep` with a fresh marker, and the marker.
fn sleep() -> (String, String) {
    let found_by = format!("300.{}", marker());
    (format!("sleep {found_by}"), found_by)
}

/// Runs every escape shape (unmarked ones too) and a foreground `sleep`
/// after `before`, as a command still running when the call returns, and
/// waits until all of them are alive and settled. Returns what finds them.
async fn run_escapes(server: &Server, mode: &str, before: &str) -> Vec<String> {
    let (escapes, mut markers) = escapes(false);
    let (foreground, f) = sleep();
    let command = format!("{before}{escapes} {foreground}");
    let r = server.terminal(json!({"command": command, "timeout": 0.5})).await;
    assert_eq!(r["status"], "running", "{mode}: {r:#?}");
    let settling = markers.clone();
    markers.push(f);
    wait_alive(&refs(&markers)).await;
    wait_settled(server, &settling).await;
    markers
}

/// Starts a `&` job of the shell with its own command, and returns its
/// marker: it must outlive every stop of a later command.
async fn start_job(server: &Server) -> String {
    let (job, found_by) = sleep();
    let r = server.terminal(json!({"command": format!("{job} &")})).await;
    assert_eq!(r["exit_code"], 0, "{r:#?}");
    wait_alive(&[&found_by]).await;
    found_by
}

/// Issue 11, F6 and F7: `C-c` stops the command's processes in any session,
/// whatever they did to their environment; never the shell's own jobs, those
/// started earlier or by the same command line.
#[tokio::test]
async fn ctrl_c_stops_every_escape_shape_but_not_the_shells_jobs() {
    for mode in modes() {
        let server = server(&mode, &[]).await;
        let earlier_job = start_job(&server).await;
        let (same_line_job, job) = sleep();
        let all = run_escapes(&server, &mode, &format!("{same_line_job} & ")).await;
        let all = refs(&all);

        let r = server.terminal(json!({"command": "C-c", "is_input": true, "timeout": 10})).await;
        assert_eq!(r["status"], "completed", "{mode}: {r:#?}");
        assert_none_survive(&all, CLEANUP).await;
        for kept in [&earlier_job, &job] {
            assert_eq!(processes_with(&[kept]).len(), 1, "{mode}: the shell's job {kept} died");
        }
        let r = server.terminal(json!({"command": "echo ok"})).await;
        assert_eq!(r.output(), "ok\n", "{mode}: {r:#?}");
        let r = server.terminal(json!({"command": "", "reset": true})).await;
        assert!(!r.is_error, "{r:#?}");
        assert_none_survive(&[&earlier_job, &job], CLEANUP).await;
    }
}

/// In a nested shell, `C-c` stops its command and what the command started
/// in other sessions, never the nested shell itself or its `&` jobs.
#[tokio::test]
async fn ctrl_c_in_a_nested_shell_stops_its_command_not_the_shell() {
    for mode in modes() {
        let server = server(&mode, &[]).await;
        let r = server.terminal(json!({"command": "bash --norc"})).await;
        assert!(r.text.contains("nested shell started"), "{mode}: {}", r.text);
        let job = start_job(&server).await;
        let all = run_escapes(&server, &mode, "").await;
        let all = refs(&all);
        let r = server.terminal(json!({"command": "C-c", "is_input": true, "timeout": 10})).await;
        assert_eq!(r["status"], "completed", "{mode}: {r:#?}");
        assert_none_survive(&all, CLEANUP).await;
        assert_eq!(processes_with(&[&job]).len(), 1, "{mode}: the nested shell's job died");
        let r = server.terminal(json!({"command": "exit 3"})).await;
        assert_eq!(r["exit_code"], 3, "{mode}: the nested shell is gone: {r:#?}");
        assert!(r.text.contains("nested shell exited"), "{mode}: {}", r.text);
    }
}

/// Issue 11, F6: the execution-limit kill of a command left unwatched
/// stops what it started in other sessions too; the shell's jobs live on.
#[tokio::test]
async fn the_limit_kill_stops_every_escape_shape_but_not_the_shells_jobs() {
    for mode in modes() {
        let dir = Scratch::new();
        let server = server(&mode, &["--policy", &dir.short_policy()]).await;
        let job = start_job(&server).await;
        let all = run_escapes(&server, &mode, "").await;
        let all = refs(&all);
        wait_until(
            CLEANUP,
            || server.log().contains("stopping a terminal command"),
            || server.log(),
        )
        .await;
        let r = server.terminal(json!({"command": "", "timeout": 10})).await;
        assert_eq!(r["status"], "killed", "{mode}: {r:#?}");
        assert_none_survive(&all, CLEANUP).await;
        assert_eq!(processes_with(&[&job]).len(), 1, "{mode}: the shell's job died");

        // In a nested shell, the kill stops the command, not the nested shell.
        let r = server.terminal(json!({"command": "bash --norc"})).await;
        assert!(r.text.contains("nested shell started"), "{mode}: {}", r.text);
        let (escapes, markers) = self::escapes(false);
        let (foreground, f) = sleep();
        let r = server
            .terminal(json!({"command": format!("{escapes} {foreground}"), "timeout": 0.5}))
            .await;
        assert_eq!(r["status"], "running", "{mode}: {r:#?}");
        let mut all = refs(&markers);
        all.push(&f);
        wait_alive(&all).await;
        wait_settled(&server, &markers).await;
        wait_until(
            CLEANUP,
            || server.log().matches("stopping a terminal command").count() >= 2,
            || server.log(),
        )
        .await;
        let r = server.terminal(json!({"command": "", "timeout": 10})).await;
        assert_eq!(r["status"], "killed", "{mode}: {r:#?}");
        assert_none_survive(&all, CLEANUP).await;
        // The nested shell lived on: it is the one `exit` ends. (Its exit
        // code after the kill is not checked: the kill's SIGINT to the
        // outer shell makes it report 130 for `exit 3`.)
        let r = server.terminal(json!({"command": "exit 3"})).await;
        assert!(r.text.contains("nested shell exited"), "{mode}: {}", r.text);
    }
}

/// Issue 11, F5 and F7: `run` stops everything its command started, at its
/// timeout and at its end.
#[tokio::test]
async fn run_stops_every_escape_shape_at_its_timeout_and_at_its_end() {
    for mode in modes() {
        let server = server(&mode, &[]).await;
        let (escapes_line, markers) = escapes(false);
        let (foreground, f) = sleep();
        let peer = server.peer();
        let command = format!("{escapes_line} {foreground}");
        // Long enough for a dozen Python processes to start on a busy
        // machine before the limit ends them all.
        let call = tokio::spawn(async move {
            crate::call_with(&peer, "run", json!({"command": command, "timeout_sec": 12})).await
        });
        let mut all = refs(&markers);
        all.push(&f);
        wait_alive(&all).await;
        wait_settled(&server, &markers).await;
        let r = call.await.expect("the call task").expect("run replies");
        assert_eq!(r["status"], "timeout", "{mode}: {r:#?}");
        assert_none_survive(&all, CLEANUP).await;

        let (escapes_line, markers) = escapes(false);
        let wait_for_all: String = markers
            .iter()
            .map(|m| format!("until pgrep -f '{m}' >/dev/null; do sleep 0.05; done; "))
            .collect();
        let r = server
            .run(json!({"command": format!("{escapes_line} {wait_for_all} echo done"),
                        "timeout_sec": 30}))
            .await;
        assert_eq!((r["status"].as_str(), r["exitCode"].as_i64()), (Some("success"), Some(0)));
        assert_none_survive(&refs(&markers), CLEANUP).await;
    }
}

/// Issue 11, F5: `run`'s `env` cannot replace the scope marker: the name is
/// refused with a tool error that says why, and nothing runs.
#[tokio::test]
async fn run_refuses_to_set_the_scope_marker() {
    let server = server("markers", &[]).await;
    let (escaped, found_by) = sleep();
    let witness = server.cwd().join("ran");
    let command = format!("touch {}; ({escaped} &)", witness.display());
    let r = server
        .run(json!({"command": command, "env": {"SHELLKEEP_SCOPE": "x"}, "timeout_sec": 5}))
        .await;
    assert!(r.is_error, "{r:#?}");
    assert!(r.text.contains("SHELLKEEP_SCOPE") && r.text.contains("cannot be set"), "{}", r.text);
    assert!(!witness.exists(), "the command ran");
    assert!(processes_with(&[&found_by]).is_empty());
    // Other variables still work, and the marker is the server's.
    let r = server
        .run(json!({"command": "echo \"$A ${SHELLKEEP_SCOPE%%/*}\"", "env": {"A": "1"}}))
        .await;
    assert_eq!(r["exitCode"], 0, "{r:#?}");
    let stdout = r["stdout"].as_str().expect("stdout");
    assert!(stdout.starts_with("1 ") && stdout.trim().len() > 10, "{stdout:?}");
}

/// `reset` and `session_close` stop every escape shape of the shell.
#[tokio::test]
async fn reset_and_session_close_stop_every_escape_shape() {
    for mode in modes() {
        let server = server(&mode, &[]).await;
        let (escapes_line, markers) = escapes(false);
        let r = server.terminal(json!({"command": format!("{escapes_line} echo started")})).await;
        assert_eq!(r["exit_code"], 0, "{mode}: {r:#?}");
        wait_alive(&refs(&markers)).await;
        wait_settled(&server, &markers).await;
        let r = server.terminal(json!({"command": "", "reset": true})).await;
        assert!(!r.is_error, "{r:#?}");
        assert_none_survive(&refs(&markers), CLEANUP).await;

        let (escapes_line, markers) = escapes(false);
        let r = server
            .terminal(json!({"command": format!("{escapes_line} echo started"), "session": "w"}))
            .await;
        assert_eq!(r["exit_code"], 0, "{mode}: {r:#?}");
        wait_alive(&refs(&markers)).await;
        wait_settled(&server, &markers).await;
        let r = server.call("session_close", json!({"session": "w"})).await;
        assert!(!r.is_error, "{r:#?}");
        assert_none_survive(&refs(&markers), CLEANUP).await;
    }
}

/// A line that starts an orphan in a session of its own, relabelled with
/// `marker_value`, and the marker that finds it.
fn relabelled(marker_value: &str) -> (String, String) {
    let found_by = format!("300.{}", marker());
    let line = format!(
        "(SHELLKEEP_SCOPE={marker_value} setsid -f sleep {found_by} </dev/null >/dev/null 2>&1);"
    );
    (line, found_by)
}

/// A process relabelled with the marker of an owner that has ended (a
/// `run` that returned) counts as unmarked, and is stopped by `C-c`,
/// `reset`, `session_close` and `run`'s end like any unmarked process.
#[tokio::test]
async fn a_process_relabelled_with_an_ended_owner_is_stopped() {
    for mode in modes() {
        let server = server(&mode, &[]).await;
        let r = server.run(json!({"command": "echo \"$SHELLKEEP_SCOPE\""})).await;
        assert_eq!(r["exitCode"], 0, "{mode}: {r:#?}");
        let ended = r["stdout"].as_str().expect("stdout").trim().to_owned();
        assert!(ended.contains("/run-"), "{mode}: {ended:?}");

        let (line, escaped) = relabelled(&ended);
        let (foreground, f) = sleep();
        let r = server
            .terminal(json!({"command": format!("{line} {foreground}"), "timeout": 0.5}))
            .await;
        assert_eq!(r["status"], "running", "{mode}: {r:#?}");
        wait_alive(&[&escaped, &f]).await;
        let r = server.terminal(json!({"command": "C-c", "is_input": true, "timeout": 10})).await;
        assert_eq!(r["status"], "completed", "{mode}: {r:#?}");
        assert_none_survive(&[&escaped, &f], CLEANUP).await;

        let (line, escaped) = relabelled(&ended);
        let r = server.terminal(json!({"command": format!("{line} echo started")})).await;
        assert_eq!(r["exit_code"], 0, "{mode}: {r:#?}");
        wait_alive(&[&escaped]).await;
        let r = server.terminal(json!({"command": "", "reset": true})).await;
        assert!(!r.is_error, "{r:#?}");
        assert_none_survive(&[&escaped], CLEANUP).await;

        let (line, escaped) = relabelled(&ended);
        let r = server
            .terminal(json!({"command": format!("{line} echo started"), "session": "w"}))
            .await;
        assert_eq!(r["exit_code"], 0, "{mode}: {r:#?}");
        wait_alive(&[&escaped]).await;
        let r = server.call("session_close", json!({"session": "w"})).await;
        assert!(!r.is_error, "{r:#?}");
        assert_none_survive(&[&escaped], CLEANUP).await;

        let (line, escaped) = relabelled(&ended);
        let wait = format!("until pgrep -f '{escaped}' >/dev/null; do sleep 0.05; done;");
        let r = server
            .run(json!({"command": format!("{line} {wait} echo done"), "timeout_sec": 30}))
            .await;
        assert_eq!(r["exitCode"], 0, "{mode}: {r:#?}");
        assert_none_survive(&[&escaped], CLEANUP).await;
    }
}

/// The server's SIGTERM stops every escape shape, of a shell and of a run.
#[tokio::test]
async fn sigterm_to_the_server_stops_every_escape_shape() {
    for mode in modes() {
        let mut server = server(&mode, &[]).await;
        let (escapes_line, mut markers) = escapes(false);
        let r = server.terminal(json!({"command": format!("{escapes_line} echo started")})).await;
        assert_eq!(r["exit_code"], 0, "{mode}: {r:#?}");
        let (run_escapes, run_markers) = escapes(false);
        let (foreground, f) = sleep();
        let peer = server.peer();
        let command = format!("{run_escapes} {foreground}");
        let _call = tokio::spawn(async move {
            crate::call_with(&peer, "run", json!({"command": command, "timeout_sec": 60})).await
        });
        markers.extend(run_markers);
        markers.push(f);
        wait_alive(&refs(&markers)).await;
        wait_settled(&server, &markers).await;
        server.signal("TERM");
        let status = server.wait_exit(Duration::from_secs(30)).await;
        assert!(status.success(), "{mode}: {status}\n{}", server.log());
        assert_none_survive(&refs(&markers), CLEANUP).await;
    }
}

/// The server's SIGKILL, with the orphan guard alive: the guard stops what
/// carries the server's marker, wherever it went.
#[tokio::test]
async fn sigkill_to_the_server_leaves_no_marked_escape_shape() {
    for mode in modes() {
        let mut server = server(&mode, &[]).await;
        let (escapes_line, markers) = escapes(true);
        let r = server.terminal(json!({"command": format!("{escapes_line} echo started")})).await;
        assert_eq!(r["exit_code"], 0, "{mode}: {r:#?}");
        wait_alive(&refs(&markers)).await;
        server.signal("KILL");
        server.wait_exit(Duration::from_secs(10)).await;
        assert_none_survive(&refs(&markers), CLEANUP).await;
    }
}

/// In a cgroup mode, a process that wiped its environment in memory (no
/// marker to find) is killed after a server SIGKILL all the same: the guard
/// kills the dead server's control groups.
#[tokio::test]
async fn the_guard_kills_what_a_killed_server_left_in_its_control_group() {
    let mut server = server(&cgroup_mode(), &[]).await;
    let r = server.terminal(json!({"command": "cat /proc/self/cgroup"})).await;
    if !r.output().contains(&format!("shellkeep-{}-", server.pid)) {
        skip_without_cgroups("no control groups here; markers mode cannot see this process");
        return;
    }
    let wiped = format!("300.{}", marker());
    let command = format!(
        "(python3 -c '{WIPES_ITS_ENVIRONMENT}' {wiped} </dev/null >/dev/null 2>&1 &); echo started"
    );
    let r = server.terminal(json!({"command": command})).await;
    assert_eq!(r["exit_code"], 0, "{r:#?}");
    // Until it has wiped its environment and become the server's orphan,
    // the guard could still find its marker.
    let server_pid = server.pid;
    let settled = || {
        let found = processes_with(&[&wiped]);
        let [line] = &found[..] else { return false };
        let pid = line.split(':').next().unwrap_or_default();
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let ppid = stat.rsplit_once(") ").and_then(|(_, rest)| rest.split(' ').nth(1));
        !environ.contains(&b'=') && ppid == Some(server_pid.to_string().as_str())
    };
    wait_until(CLEANUP, settled, || format!("{:?}", processes_with(&[&wiped]))).await;
    server.signal("KILL");
    server.wait_exit(Duration::from_secs(10)).await;
    assert_none_survive(&[&wiped], CLEANUP).await;
}

/// In a cgroup mode, a command that may write `cgroup.procs` outside its
/// group (root, or a subtree delegated to the user) can move itself out of
/// it; the scope marker, the second net, still stops it.
#[tokio::test]
async fn a_process_that_leaves_its_control_group_is_still_stopped() {
    let server = server(&cgroup_mode(), &[]).await;
    let r = server.terminal(json!({"command": "cat /proc/self/cgroup"})).await;
    if !r.output().contains(&format!("shellkeep-{}-", server.pid)) {
        skip_without_cgroups("no control groups here");
        return;
    }
    let (_, found_by) = sleep();
    let command = format!(
        "m=$(awk '$9 == \"cgroup2\" {{ print $5; exit }}' /proc/self/mountinfo); \
         g=$(sed -n 's/^0:://p' /proc/self/cgroup); \
         (setsid bash -c \"echo \\$\\$ > $m${{g%/shellkeep-*}}/cgroup.procs && exec sleep {found_by}\" &); \
         echo started"
    );
    let r = server.terminal(json!({"command": command})).await;
    assert_eq!(r["exit_code"], 0, "{r:#?}");
    let dir_name = format!("shellkeep-{}-", server.pid);
    let escaped = || {
        let found = processes_with(&[&found_by]);
        let [line] = &found[..] else { return false };
        let pid = line.split(':').next().unwrap_or_default();
        std::fs::read_to_string(format!("/proc/{pid}/cgroup")).is_ok_and(|groups| {
            groups.lines().any(|l| l.starts_with("0::") && !l.contains(&dir_name))
        })
    };
    wait_until(CLEANUP, escaped, || {
        format!("{:?}\n{}", processes_with(&[&found_by]), server.log())
    })
    .await;
    let r = server.terminal(json!({"command": "", "reset": true})).await;
    assert!(!r.is_error, "{r:#?}");
    assert_none_survive(&[&found_by], CLEANUP).await;
}

/// Issue 19, item 9 (F9): in a cgroup mode where a command may write a
/// `cgroup.procs` outside its group (a delegated subtree, root), a process
/// that leaves the server's groups, turns non-dumpable (an unprivileged
/// server cannot read its marker) and double-forks is still ended: by
/// `reset` of its session while a newer session is open (an orphan that
/// left the groups belongs to every stop), and by the guard after a server
/// SIGKILL (the server tells it every orphan that left its groups).
#[tokio::test]
async fn a_process_that_leaves_the_servers_groups_and_hides_is_still_ended() {
    for sigkill in [false, true] {
        let mut server = server(&cgroup_mode(), &[]).await;
        let r = server.terminal(json!({"command": "cat /proc/self/cgroup"})).await;
        let dir_name = format!("shellkeep-{}-", server.pid);
        if !r.output().contains(&dir_name) {
            skip_without_cgroups("no control groups here");
            return;
        }
        // A newer session is open when the orphan starts: attribution by
        // start time would give the orphan to it.
        let r = server.terminal(json!({"command": "echo other", "session": "newer"})).await;
        assert_eq!(r.output(), "other\n", "{r:#?}");
        let found_by = format!("300.{}", marker());
        // Into the group that holds the server's directory: the one a
        // delegated subtree's owner (or root) may always write.
        let command = format!(
            "m=$(awk '$9 == \"cgroup2\" {{ print $5; exit }}' /proc/self/mountinfo); \
             g=$(sed -n 's/^0:://p' /proc/self/cgroup); \
             (bash -c \"echo \\$BASHPID > $m${{g%/shellkeep-*}}/cgroup.procs && \
             exec python3 -c '{NON_DUMPABLE}' {found_by}\" </dev/null >/dev/null 2>&1 &); \
             echo started"
        );
        let r = server.terminal(json!({ "command": command })).await;
        assert_eq!(r["exit_code"], 0, "{r:#?}");
        // Settled: one process left, the second fork (its session's leader,
        // the first fork, is gone), an orphan of the server's, outside its
        // groups.
        let server_pid = server.pid.to_string();
        let escaped = || {
            let found = processes_with(&[&found_by]);
            let [line] = &found[..] else { return None };
            let pid = line.split(':').next().unwrap_or_default().to_owned();
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let fields: Vec<&str> = stat
                .rsplit_once(") ")
                .map(|(_, rest)| rest.split(' ').collect())
                .unwrap_or_default();
            let (ppid, session) = (fields.get(1).copied(), fields.get(3).copied().unwrap_or("0"));
            // Outside the containment's groups (the v1 groups that only
            // limit resources keep it: their limits still apply).
            let outside =
                std::fs::read_to_string(format!("/proc/{pid}/cgroup")).is_ok_and(|groups| {
                    groups.lines().filter(|l| containment_line(l)).all(|l| !l.contains(&dir_name))
                });
            let forked_twice = line.contains("python3")
                && session != pid
                && !std::path::Path::new(&format!("/proc/{session}")).exists();
            (ppid == Some(server_pid.as_str()) && outside && forked_twice).then_some(pid)
        };
        wait_until(
            CLEANUP,
            || escaped().is_some(),
            || format!("{:?}\n{}", processes_with(&[&found_by]), server.log()),
        )
        .await;
        let pid = escaped().expect("settled");
        if sigkill {
            wait_until(
                CLEANUP,
                || server.log().contains(&format!("pid {pid} left the server's control groups")),
                || format!("the guard was not told of {pid}:\n{}", server.log()),
            )
            .await;
            server.signal("KILL");
            server.wait_exit(Duration::from_secs(20)).await;
        } else {
            let r = server.terminal(json!({"command": "", "reset": true})).await;
            assert!(!r.is_error, "{r:#?}");
        }
        assert_none_survive(&[&found_by], CLEANUP).await;
    }
}

/// A fork chain: each process sleeps 2 ms, forks the next (which leaves
/// its session and group) and exits, writing its generation to the file
/// named second; the first argument finds it in `/proc`. No look at `/proc`
/// catches one generation alive long enough to signal it.
const FORK_CHAIN: &str = "import os, sys, time
n = 0
while True:
    time.sleep(0.002)
    n += 1
    if os.fork():
        os._exit(0)
    os.setsid()
    with open(sys.argv[2], 'w') as out:
        out.write(str(n))
";

/// Issue 19, item 13: in a cgroup mode, `C-c` stops a fork chain the
/// command started, with the rest of the command: the kill freezes the
/// shell's group while it looks (the shell and its jobs are thawed after).
#[tokio::test]
async fn ctrl_c_stops_a_fork_chain_in_a_cgroup_mode() {
    let server = server(&cgroup_mode(), &[]).await;
    let r = server.terminal(json!({"command": "cat /proc/self/cgroup"})).await;
    if !r.output().contains(&format!("shellkeep-{}-", server.pid)) {
        skip_without_cgroups("no control groups here");
        return;
    }
    let job = start_job(&server).await;
    std::fs::write(server.cwd().join("chain.py"), FORK_CHAIN).expect("write the chain");
    let chain = format!("300.{}", marker());
    let generations = server.cwd().join("generations");
    let generation = || {
        std::fs::read_to_string(&generations)
            .ok()
            .and_then(|n| n.trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    let (foreground, f) = sleep();
    let command = format!(
        "(python3 chain.py {chain} {} </dev/null >/dev/null 2>&1 &); {foreground}",
        generations.display()
    );
    let r = server.terminal(json!({"command": command, "timeout": 0.5})).await;
    assert_eq!(r["status"], "running", "{r:#?}");
    wait_until(CLEANUP, || generation() >= 20, || format!("generation {}", generation())).await;

    let r = server.terminal(json!({"command": "C-c", "is_input": true, "timeout": 10})).await;
    assert_eq!(r["status"], "completed", "{r:#?}");
    assert_none_survive(&[&chain, &f], CLEANUP).await;
    // Still gone after another call: the chain is not hiding between two
    // generations, and it does not count on.
    let last = generation();
    let r = server.terminal(json!({"command": "echo ok"})).await;
    assert_eq!(r.output(), "ok\n", "{r:#?}");
    assert!(
        processes_with(&[&chain]).is_empty(),
        "{:?}\n{}",
        processes_with(&[&chain]),
        server.log()
    );
    assert_eq!(generation(), last, "the chain still forks\n{}", server.log());
    // The shell's own job was frozen for a moment, not killed.
    assert_eq!(processes_with(&[&job]).len(), 1, "the shell's job died");
}

/// In a cgroup mode, each owner has a control group of its own under the
/// server's directory, and the directory is gone once the server has ended.
#[tokio::test]
async fn each_owner_has_its_own_control_group_and_the_server_removes_them() {
    let mut server = server(&cgroup_mode(), &[]).await;
    let r = server.terminal(json!({"command": "cat /proc/self/cgroup"})).await;
    let shell = r.output().to_owned();
    let r = server.run(json!({"command": "cat /proc/self/cgroup"})).await;
    let run = r["stdout"].as_str().expect("stdout").to_owned();
    let dir_name = format!("shellkeep-{}-", server.pid);
    let group_of = |text: &str| {
        text.lines()
            .find(|line| containment_line(line) && line.contains(&dir_name))
            .map(|line| line.rsplit(':').next().unwrap_or_default().to_owned())
    };
    match (group_of(&shell), group_of(&run)) {
        (Some(shell_group), Some(run_group)) => {
            assert_ne!(shell_group, run_group);
            assert!(shell_group.contains("/shell-") && run_group.contains("/run-"));
            let log = server.log();
            let dir = log
                .lines()
                .find_map(|line| line.split_once("containment: ")?.1.split_once(" in "))
                .map(|(_, dir)| std::path::PathBuf::from(dir.trim()))
                .unwrap_or_else(|| panic!("the log names the server's group: {log}"));
            assert!(dir.is_dir(), "{}", dir.display());
            server.close_connection().await;
            server.wait_exit(Duration::from_secs(20)).await;
            assert!(!dir.exists(), "{} is left behind", dir.display());
        }
        (None, None) => {
            // Markers only on this host: nothing is in a group of ours.
            skip_without_cgroups("markers only on this host");
            assert!(server.log().contains("containment: scope markers only"), "{}", server.log());
        }
        other => panic!("one owner in a group, the other not: {other:?}\n{shell}\n{run}"),
    }
}

/// `shellkeep doctor` says what protects this host, and exits 0.
#[tokio::test]
async fn doctor_reports_the_containment_and_the_hosts_protections() {
    let run = |mode: &str| {
        let output = std::process::Command::new(crate::binary())
            .arg("doctor")
            .env("SHELLKEEP_CONTAINMENT", mode)
            .output()
            .expect("run shellkeep doctor");
        assert!(output.status.success(), "{output:?}");
        String::from_utf8(output.stdout).expect("utf-8")
    };
    let text = run("markers");
    for line in [
        "containment: markers",
        "same-user memory access: ",
        "landlock: ",
        "seccomp: ",
        "runtime directory: ",
        "full-output directory: ",
        "same-user signals: a command can stop or kill the server and its orphan guard",
    ] {
        assert!(text.contains(line), "{line:?} missing from:\n{text}");
    }
    let auto = run("auto");
    let mode = auto
        .lines()
        .find_map(|line| line.strip_prefix("containment: "))
        .and_then(|rest| rest.split(' ').next())
        .expect("a containment line");
    assert!(["cgroup2", "cgroup1", "markers"].contains(&mode), "{auto}");
    if mode == "markers" {
        assert!(auto.contains("not used: cgroup2"), "why not cgroup2 is said:\n{auto}");
    }
    let forced = run("cgroup2");
    assert!(
        forced.contains("containment: cgroup2") || forced.contains("not available as asked"),
        "{forced}"
    );
    assert!(run("nonsense").contains("unknown containment mode"));
}

/// `doctor` names legacy `TIOCSTI` (issue 19: where the kernel allows it, a
/// command's `&` job can push a line into the idle shell's input) as this
/// host has it, read from the kernel's own switch, with the way to turn it
/// off.
#[test]
fn doctor_reports_legacy_tiocsti_as_the_kernel_has_it() {
    let output = std::process::Command::new(crate::binary())
        .arg("doctor")
        .env("SHELLKEEP_CONTAINMENT", "markers")
        .output()
        .expect("run shellkeep doctor");
    assert!(output.status.success(), "{output:?}");
    let text = String::from_utf8(output.stdout).expect("utf-8");
    let line = text
        .lines()
        .find(|line| line.starts_with("legacy TIOCSTI: "))
        .unwrap_or_else(|| panic!("no legacy TIOCSTI line in:\n{text}"));
    match std::fs::read_to_string("/proc/sys/dev/tty/legacy_tiocsti").as_deref().map(str::trim) {
        Ok("0") => {
            assert!(line.starts_with("legacy TIOCSTI: off"), "{line}");
            assert!(!line.contains("sysctl"), "nothing to turn off: {line}");
        }
        Ok("1") => {
            assert!(line.starts_with("legacy TIOCSTI: ON (dev.tty.legacy_tiocsti = 1"), "{line}");
            assert!(line.contains("push a line into the shell's input"), "{line}");
            assert!(line.contains("`sysctl dev.tty.legacy_tiocsti=0`"), "{line}");
        }
        Ok(other) => assert!(line.contains(&format!("{other:?}")), "{line}"),
        Err(_) => {
            assert!(line.starts_with("legacy TIOCSTI: probably ON"), "{line}");
            assert!(line.contains("CONFIG_LEGACY_TIOCSTI"), "{line}");
        }
    }
}
