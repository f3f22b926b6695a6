//! No orphans, proven (issue 3, point 5): process trees started through
//! the server are seen alive in `/proc`, then, after a timeout, `C-c`, a
//! reset, the end of the connection, SIGTERM or SIGKILL to the server,
//! nothing carrying their markers survives.
//!
//! Every tree uses `sleep 300.<marker>` (and `100.`/`200.` variants) so that
//! parallel tests, and anything else on the machine, cannot be mistaken for
//! a survivor.

use std::os::unix::fs::MetadataExt;
use std::time::Duration;

use serde_json::json;

use crate::{Server, assert_none_survive, call_with, marker, wait_alive, wait_until};

/// How long cleanup may take before a survivor fails the test: the 5 s
/// default grace is not involved (the trees here die on SIGTERM), and the
/// guard's own grace is 2 s.
const CLEANUP: Duration = Duration::from_secs(10);

/// `sleep <secs>.<marker>` with a fresh marker, and the text that finds it
/// in `/proc`.
fn sleep(secs: u32) -> (String, String) {
    let found_by = format!("{secs}.{}", marker());
    (format!("sleep {found_by}"), found_by)
}

/// Whether process `pid` is alive (present and not a zombie).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z')),
        Err(_) => false,
    }
}

/// The orphan guard the server `pid` started: its child running
/// `shellkeep __guard`.
fn guard_of(pid: u32) -> Option<u32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|entry| {
        let child: u32 = entry.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
        let ppid: u32 = stat.rsplit_once(") ")?.1.split(' ').nth(1)?.parse().ok()?;
        let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
        (ppid == pid && String::from_utf8_lossy(&cmdline).contains("__guard")).then_some(child)
    })
}

#[tokio::test]
async fn run_timeout_leaves_no_orphans() {
    let server = Server::start().await;
    let ((background, a), (foreground, b)) = (sleep(300), sleep(100));
    let peer = server.peer();
    let command = format!("({background} &); {foreground}");
    let call = tokio::spawn(async move {
        call_with(&peer, "run", json!({"command": command, "timeout_sec": 1})).await
    });
    wait_alive(&[&a, &b]).await;
    let r = call.await.expect("the call task").expect("run replies");
    assert_eq!(r["status"], "timeout", "{r:#?}");
    assert_eq!(r["terminationMode"], "soft", "{r:#?}");
    assert_none_survive(&[&a, &b], CLEANUP).await;
}

#[tokio::test]
async fn run_child_ignoring_sigterm_is_killed_hard() {
    let server = Server::with(&["--grace", "0.5"]).await;
    let (stubborn, a) = sleep(300);
    let peer = server.peer();
    let command = format!("trap '' TERM; {stubborn}");
    let call = tokio::spawn(async move {
        call_with(&peer, "run", json!({"command": command, "timeout_sec": 2})).await
    });
    wait_alive(&[&a]).await;
    let r = call.await.expect("the call task").expect("run replies");
    assert_eq!(r["status"], "timeout", "{r:#?}");
    assert_eq!(r["timeoutReason"], "no_output_timeout", "{r:#?}");
    assert_eq!(r["terminationMode"], "hard", "{r:#?}");
    let duration = r["durationMs"].as_u64().expect("durationMs");
    assert!((1400..=5000).contains(&duration), "1 s limit + 0.5 s grace, took {duration} ms");
    assert!(r.text.contains("SIGKILL"), "{}", r.text);
    assert_none_survive(&[&a], CLEANUP).await;
}

#[tokio::test]
async fn terminal_ctrl_c_leaves_no_orphans() {
    let server = Server::start().await;
    let ((first, a), (second, b)) = (sleep(300), sleep(300));
    let command = format!("bash -c '{first} & {second} & wait'");
    let r = server.terminal(json!({"command": command, "timeout": 0.5})).await;
    assert_eq!(r["status"], "running", "{r:#?}");
    wait_alive(&[&a, &b]).await;

    let r = server.terminal(json!({"command": "C-c", "is_input": true, "timeout": 10})).await;
    assert_eq!(r["status"], "completed", "{r:#?}");
    assert_none_survive(&[&a, &b], CLEANUP).await;
    let r = server.terminal(json!({"command": "echo ok"})).await;
    assert_eq!(r.output(), "ok\n", "{r:#?}");
}

#[tokio::test]
async fn terminal_reset_leaves_no_orphans() {
    let server = Server::start().await;
    let ((background, a), (foreground, b)) = (sleep(300), sleep(100));
    let command = format!("({background} &); {foreground}");
    let r = server.terminal(json!({"command": command, "timeout": 0.5})).await;
    assert_eq!(r["status"], "running", "{r:#?}");
    wait_alive(&[&a, &b]).await;

    let r = server.terminal(json!({"command": "", "reset": true})).await;
    assert!(!r.is_error, "{r:#?}");
    assert!(r.text.contains("reset"), "{}", r.text);
    assert_none_survive(&[&a, &b], CLEANUP).await;
    let r = server.terminal(json!({"command": "echo ok"})).await;
    assert_eq!(r.output(), "ok\n", "{r:#?}");
}

#[tokio::test]
async fn end_of_connection_leaves_no_orphans() {
    let mut server = Server::start().await;
    let ((background, a), (foreground, b)) = (sleep(300), sleep(100));
    let command = format!("{background} & {foreground}");
    let r = server.terminal(json!({"command": command, "timeout": 0.5})).await;
    assert_eq!(r["status"], "running", "{r:#?}");
    wait_alive(&[&a, &b]).await;

    server.close_connection().await;
    let status = server.wait_exit(Duration::from_secs(20)).await;
    assert!(status.success(), "the server exits cleanly: {status}\n{}", server.log());
    assert_none_survive(&[&a, &b], CLEANUP).await;
}

#[tokio::test]
async fn sigterm_to_the_server_leaves_no_orphans() {
    let mut server = Server::start().await;
    let ((first, a), (second, b), (single, c)) = (sleep(300), sleep(300), sleep(200));
    let command = format!("bash -c '{first} & {second} & wait'");
    let r = server.terminal(json!({"command": command, "timeout": 0.5})).await;
    assert_eq!(r["status"], "running", "{r:#?}");
    let peer = server.peer();
    let call = tokio::spawn(async move {
        call_with(&peer, "run", json!({"command": single, "timeout_sec": 240})).await
    });
    wait_alive(&[&a, &b, &c]).await;

    server.signal("TERM");
    assert_none_survive(&[&a, &b, &c], CLEANUP).await;
    server.wait_exit(Duration::from_secs(20)).await;
    call.abort();
}

#[tokio::test]
async fn sigkill_to_the_server_leaves_cleanup_to_the_guard() {
    let mut server = Server::start().await;
    // Besides the plain trees, one process each that neither the PTY hangup
    // (nohup) nor the parent-death signal (a grandchild) can reach: only
    // the orphan guard can stop those.
    let (background, a) = sleep(300);
    let (hangup_proof, b) = sleep(300);
    let (foreground, c) = sleep(100);
    let (grandchild, d) = sleep(250);
    let (single, e) = sleep(200);
    let command = format!("{background} & nohup {hangup_proof} >/dev/null 2>&1 & {foreground}");
    let r = server.terminal(json!({"command": command, "timeout": 0.5})).await;
    assert_eq!(r["status"], "running", "{r:#?}");
    let peer = server.peer();
    let command = format!("({grandchild} &); {single}");
    let call = tokio::spawn(async move {
        call_with(&peer, "run", json!({"command": command, "timeout_sec": 240})).await
    });
    let markers = [a.as_str(), &b, &c, &d, &e];
    wait_alive(&markers).await;
    let guard = guard_of(server.pid).expect("the server runs an orphan guard");

    server.signal("KILL");
    server.wait_exit(Duration::from_secs(20)).await;
    assert_none_survive(&markers, CLEANUP).await;
    wait_until(CLEANUP, || !alive(guard), || format!("the guard {guard} is still running")).await;
    call.abort();
    remove_runtime_dir(server.pid);
}

/// Removes the private directory of the server `pid`, which a server killed
/// with SIGKILL cannot remove itself (`$TMPDIR/shellkeep-UID/PID-XXXXXXXX`).
fn remove_runtime_dir(pid: u32) {
    let uid = std::fs::metadata("/proc/self").map(|m| m.uid()).expect("our uid");
    let parent = std::env::temp_dir().join(format!("shellkeep-{uid}"));
    for entry in std::fs::read_dir(&parent).into_iter().flatten().flatten() {
        if entry.file_name().to_string_lossy().starts_with(&format!("{pid}-")) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}
