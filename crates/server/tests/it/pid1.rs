//! shellkeep as a container's PID 1, as `deploy/Dockerfile` runs it (no
//! init in front): started as the first process of a new PID namespace, it
//! reaps the orphans that end in it (no zombie piles up), and the SIGTERM a
//! container runtime sends from outside the namespace (whose sender the
//! server cannot see: pid 0) stops it cleanly, with everything its shell
//! started.
//!
//! The namespace comes from `unshare --pid --fork --mount-proc` (as root;
//! otherwise inside a user namespace of our own). `unshare` stays outside
//! as the namespace's parent and ignores SIGTERM, so the signal goes to the
//! server's own pid.

use std::time::Duration;

use serde_json::json;

use crate::{
    EVENTUALLY, Server, assert_none_survive, kernel_forbids, marker, poll_until, send_signal,
    wait_alive,
};

/// How long what the server started may take to be gone after it stops.
const CLEANUP: Duration = Duration::from_secs(10);

/// The wrapper that starts the server as PID 1 of a new PID namespace, or
/// `None` (said as a skip) when this host forbids one.
fn new_pid_namespace() -> Option<Vec<&'static str>> {
    let mut wrapper = vec!["unshare"];
    if !nix::unistd::geteuid().is_root() {
        wrapper.extend(["--user", "--map-root-user"]);
    }
    wrapper.extend(["--pid", "--fork", "--mount-proc"]);
    let probe = std::process::Command::new(wrapper[0])
        .args(&wrapper[1..])
        .arg("true")
        .output()
        .expect("run unshare");
    if probe.status.success() {
        Some(wrapper)
    } else {
        kernel_forbids("a new PID namespace", String::from_utf8_lossy(&probe.stderr).trim());
        None
    }
}

/// The pid, as this test sees it, of `parent`'s only child.
fn only_child(parent: u32) -> u32 {
    let children = std::fs::read_to_string(format!("/proc/{parent}/task/{parent}/children"))
        .expect("read the children of unshare");
    match children.split_whitespace().collect::<Vec<_>>()[..] {
        [child] => child.parse().expect("a pid"),
        ref other => panic!("unshare {parent} has children {other:?}, not one"),
    }
}

#[tokio::test]
async fn as_pid_1_the_server_reaps_orphans_and_stops_on_a_runtime_sigterm() {
    let Some(wrapper) = new_pid_namespace() else { return };
    let mut server = Server::wrapped(&wrapper, &[], &[]).await;
    let r = server.terminal(json!({"command": "cat /proc/1/comm; ps -o ppid= -p $$"})).await;
    assert_eq!(r.output().split_whitespace().collect::<Vec<_>>(), ["shellkeep", "1"], "{r:#?}");

    // Orphans: each `sleep` loses its parent at once and is adopted by
    // PID 1; once it is killed, only PID 1 can collect it.
    let orphans: Vec<String> = (0..3).map(|_| format!("300.{}", marker())).collect();
    let start: String = orphans.iter().map(|m| format!("bash -c 'sleep {m} & exit 0'; ")).collect();
    let r = server.terminal(json!({"command": format!("{start}echo started")})).await;
    assert_eq!(r["exit_code"], 0, "{r:#?}");
    let refs: Vec<&str> = orphans.iter().map(String::as_str).collect();
    wait_alive(&refs).await;
    let adopted = "ps -o ppid=,args= -C sleep | grep -c '^ *1 sleep 300[.]'";
    let r = server.terminal(json!({"command": adopted})).await;
    assert_eq!(r.output().trim(), "3", "the orphans are PID 1's children: {r:#?}");
    let r = server.terminal(json!({"command": "pkill -f 'sleep 300[.]'; echo killed"})).await;
    assert_eq!(r["exit_code"], 0, "{r:#?}");
    assert_none_survive(&refs, CLEANUP).await;
    poll_until(
        EVENTUALLY,
        async || server.terminal(json!({"command": "ps -e -o stat=,pid=,ppid=,comm="})).await,
        |r| {
            r.output().contains("shellkeep")
                && !r.output().lines().any(|line| line.trim_start().starts_with('Z'))
        },
    )
    .await;

    // A runtime's SIGTERM, from outside the namespace: the server stops
    // and takes what its shell left running with it.
    let left = format!("300.{}", marker());
    let r = server.terminal(json!({"command": format!("(sleep {left} &); echo left")})).await;
    assert_eq!(r["exit_code"], 0, "{r:#?}");
    wait_alive(&[&left]).await;
    send_signal(only_child(server.pid), "TERM");
    let status = server.wait_exit(Duration::from_secs(30)).await;
    assert!(status.success(), "the server exited with {status}\n{}", server.log());
    assert_none_survive(&[&left], CLEANUP).await;
}
