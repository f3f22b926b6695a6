//! The server outlives its commands' stop signals (issue 19, item 7): a
//! SIGTERM, SIGINT or SIGHUP that a process of its own sessions or `run`
//! commands sends it (`kill $PPID`) is ignored, and the next reply names
//! the sender (pid and command line), once; the same signal from outside
//! (this test process) still stops it cleanly, with nothing left behind.
//! In every containment mode the host offers (`SHELLKEEP_TEST_CONTAINMENT`
//! picks one, as in the containment tests).
//!
//! And what a SIGKILL leaves when a command stopped the guard first
//! (issue 19, item 8): the next server's start stops what carries the dead
//! server's token.

use std::time::Duration;

use serde_json::json;

use crate::{
    EVENTUALLY, Reply, Server, alive, assert_none_survive, guard_of, marker, poll_until,
    send_signal, wait_alive, wait_until,
};

/// How long a clean stop may take (the grace is 0.5 s).
const CLEANUP: Duration = Duration::from_secs(30);

/// The containment modes to run in: the one CI asks for, else the host's
/// best and markers.
fn modes() -> Vec<String> {
    match std::env::var("SHELLKEEP_TEST_CONTAINMENT") {
        Ok(mode) if !mode.is_empty() => vec![mode],
        _ => vec!["auto".into(), "markers".into()],
    }
}

/// A server in containment `mode`, with a short grace.
async fn server(mode: &str) -> Server {
    Server::with_env(&["--grace", "0.5"], &[("SHELLKEEP_CONTAINMENT", mode)]).await
}

/// The notes of `reply` (structured) joined, and whether its text says the
/// same.
fn notes(reply: &Reply) -> String {
    let notes: Vec<&str> = reply["notes"]
        .as_array()
        .map(|notes| notes.iter().filter_map(|note| note.as_str()).collect())
        .unwrap_or_default();
    for note in &notes {
        assert!(reply.text.contains(note), "a note missing from the text: {note}\n{reply:#?}");
    }
    notes.join("\n")
}

/// The notes of the replies from `first`'s on, until one names `expected`,
/// plus one more reply's: the signal may be taken after the reply of the
/// command that sent it was made, and the notice comes with the next one.
/// Each reply is of a `terminal` call in `default` (so the shell answers).
async fn told_until(server: &Server, first: String, expected: &str) -> String {
    let mut told = first;
    if !told.contains(expected) {
        told = poll_until(
            EVENTUALLY,
            async || {
                let next = server.terminal(json!({"command": "true"})).await;
                told.push_str(&notes(&next));
                told.clone()
            },
            |told| told.contains(expected),
        )
        .await;
    }
    let after = server.terminal(json!({"command": "true"})).await;
    told.push_str(&notes(&after));
    told
}

/// A command of the terminal sends the server SIGTERM, SIGINT and SIGHUP
/// with `kill $PPID`: the server answers on, the shell lives, and the
/// reply (or a later one) names the shell as the sender, once each.
#[tokio::test]
async fn a_stop_signal_from_a_terminal_command_is_ignored_and_named() {
    for mode in modes() {
        let server = server(&mode).await;
        let shell = server.terminal(json!({"command": "echo $$"})).await;
        let shell_pid = shell.output().trim().to_owned();
        for signal in ["TERM", "INT", "HUP"] {
            let r = server
                .terminal(json!({"command": format!("kill -{signal} $PPID; echo after-{signal}")}))
                .await;
            assert_eq!(r["exit_code"], 0, "{mode} {signal}: {r:#?}\n{}", server.log());
            assert!(r.output().contains(&format!("after-{signal}")), "{mode}: {r:#?}");
            let expected = format!("SIG{signal} from pid {shell_pid} (");
            let told = told_until(&server, notes(&r), &expected).await;
            assert_eq!(told.matches(&expected).count(), 1, "{mode}: named once: {told}");
            assert!(told.contains("bash"), "{mode}: the sender's command line: {told}");
            assert!(alive(server.pid), "{mode}: the server lives");
        }
        // Told once: a later reply says nothing more; the same shell answers.
        let later = server.terminal(json!({"command": "echo $$"})).await;
        assert!(!notes(&later).contains("stop signal"), "{mode}: {later:#?}");
        assert_eq!(later.output().trim(), shell_pid, "{mode}: the same shell answers");
    }
}

/// A `run` command sends the server each stop signal: its own reply or the
/// next one of any session names the sender, and the server answers on.
#[tokio::test]
async fn a_stop_signal_from_a_run_command_is_ignored_and_named() {
    for mode in modes() {
        let server = server(&mode).await;
        for signal in ["TERM", "INT", "HUP"] {
            // The sender goes on working after its kill, as a build would.
            let command = format!(
                "echo sender=$$; kill -{signal} $PPID; for i in 1 2 3; do sleep 0.1; done; echo after"
            );
            let r = server.run(json!({"command": command, "timeout_sec": 30})).await;
            assert_eq!(r["exitCode"], 0, "{mode} {signal}: {r:#?}\n{}", server.log());
            let stdout = r["stdout"].as_str().expect("stdout");
            assert!(stdout.contains("after"), "{mode}: {r:#?}");
            let sender = stdout
                .lines()
                .find_map(|line| line.strip_prefix("sender="))
                .expect("the sender's pid")
                .to_owned();
            let expected = format!("SIG{signal} from pid {sender} (");
            let told = told_until(&server, notes(&r), &expected).await;
            assert_eq!(told.matches(&expected).count(), 1, "{mode}: named once: {told}");
            assert!(told.contains("kill"), "{mode}: the sender's command line: {told}");
        }
        assert!(alive(server.pid), "{mode}: the server lives");
    }
}

/// SIGTERM from outside (this test process, which is none of the server's)
/// still stops the server cleanly, after a refused one, and nothing it
/// started is left: a shell's background job and a `setsid` escape.
#[tokio::test]
async fn a_stop_signal_from_outside_still_stops_the_server_cleanly() {
    for mode in modes() {
        let mut server = server(&mode).await;
        let (job, escaped) = (format!("300.{}", marker()), format!("300.{}", marker()));
        let command = format!(
            "sleep {job} & (setsid sleep {escaped} </dev/null >/dev/null 2>&1 &); kill $PPID; echo started"
        );
        let r = server.terminal(json!({ "command": command })).await;
        assert_eq!(r["exit_code"], 0, "{mode}: {r:#?}");
        wait_alive(&[&job, &escaped]).await;
        assert!(alive(server.pid), "{mode}: the command's SIGTERM stopped the server");
        server.signal("TERM");
        let status = server.wait_exit(CLEANUP).await;
        assert!(status.success(), "{mode}: {status}\n{}", server.log());
        assert_none_survive(&[&job, &escaped], CLEANUP).await;
    }
}

/// A command stops the guard (SIGSTOP), the server is SIGKILLed, then the
/// guard is killed: nothing was left to stop the escaped processes (one of
/// them ignores SIGTERM), and the next server's start stops them, because
/// their marker names a server that is gone. (Another test's server
/// starting meanwhile may stop them first, by the same sweep.)
#[tokio::test]
async fn the_next_start_stops_what_a_killed_server_left_with_its_guard_down() {
    for mode in modes() {
        let mut first = server(&mode).await;
        let (escaped, stubborn) = (format!("300.{}", marker()), format!("300.{}", marker()));
        let command = format!(
            "(setsid sleep {escaped} </dev/null >/dev/null 2>&1 &); \
             (setsid bash -c 'trap \"\" TERM; exec sleep {stubborn}' </dev/null >/dev/null 2>&1 &); \
             echo started"
        );
        let r = first.terminal(json!({ "command": command })).await;
        assert_eq!(r["exit_code"], 0, "{mode}: {r:#?}");
        wait_alive(&[&escaped, &stubborn]).await;
        let guard = guard_of(first.pid).expect("the server runs an orphan guard");
        send_signal(guard, "STOP");
        first.signal("KILL");
        first.wait_exit(CLEANUP).await;
        send_signal(guard, "KILL");
        wait_until(CLEANUP, || !alive(guard), || format!("the guard {guard} lives")).await;

        let second = server(&mode).await;
        let r = second.terminal(json!({"command": "echo up"})).await;
        assert_eq!(r["exit_code"], 0, "{mode}: {r:#?}");
        assert_none_survive(&[&escaped, &stubborn], CLEANUP).await;
    }
}
