//! shellkeep as a container's PID 1, as `deploy/Dockerfile` runs it (no
//! init in front): started as the first process of a new PID namespace, it
//! reaps the orphans that end in it (no zombie piles up), and the SIGTERM a
//! container runtime sends from outside the namespace (whose sender the
//! server cannot see: pid 0) stops it cleanly, with everything its shell
//! started.
//!
//! The namespace comes from `unshare --pid --fork --mount-proc`, as root,
//! and the server runs in it as `nobody` (`setpriv`), as the image runs it
//! as a user of its own; it is a copy of the binary in a directory anyone
//! may read, since the build's may not be. `unshare` stays outside as the
//! namespace's parent and ignores SIGTERM, so the signal goes to the
//! server's own pid.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;

use crate::{
    EVENTUALLY, Server, assert_none_survive, binary, kernel_forbids, marker, poll_until,
    random_u64, send_signal, skipping, wait_alive,
};

/// How long what the server started may take to be gone after it stops.
const CLEANUP: Duration = Duration::from_secs(10);

/// The user the server runs as: `nobody`.
const USER: &str = "65534";

/// The binary's copy for `nobody`, and the way to start it as PID 1 of a
/// new PID namespace; the copy is removed when dropped.
struct Pid1 {
    /// The directory of the copy.
    dir: PathBuf,
    /// The command that execs the copy there, as `nobody`, with its
    /// arguments.
    start: Vec<String>,
}

impl Pid1 {
    /// `None` (said as a skip) where the namespace cannot be made. It
    /// needs root: in a user namespace of our own the host's root is
    /// unmapped, so `/` belongs to an unknown user and the server rightly
    /// refuses to make its private directories below it (a container's
    /// root is mapped, and CI runs these tests as root).
    fn new() -> Option<Pid1> {
        if !nix::unistd::geteuid().is_root() {
            skipping("a new PID namespace needs root here");
            return None;
        }
        let dir = std::env::temp_dir().join(format!("sk-pid1-{:08x}", random_u64() as u32));
        std::fs::create_dir(&dir).expect("create the binary's directory");
        let mut pid1 = Pid1 { start: Vec::new(), dir };
        let copy = pid1.dir.join("shellkeep");
        std::fs::copy(binary(), &copy).expect("copy the binary");
        let start: Vec<String> =
            ["unshare", "--pid", "--fork", "--mount-proc", "setpriv", "--reuid", USER]
                .into_iter()
                .chain(["--regid", USER, "--clear-groups"])
                .map(str::to_owned)
                .chain([copy.to_str().expect("a UTF-8 path").to_owned()])
                .collect();
        let probe = std::process::Command::new(&start[0])
            .args(&start[1..])
            .arg("--version")
            .output()
            .expect("run unshare");
        if !probe.status.success() {
            // Root without CAP_SYS_ADMIN, say (a container's root).
            kernel_forbids("a new PID namespace", String::from_utf8_lossy(&probe.stderr).trim());
            return None;
        }
        pid1.start = start;
        Some(pid1)
    }

    /// A wrapper for [`Server::wrapped`]: it drops the path of the binary
    /// it is given and execs [`Pid1::start`] with the arguments after it.
    fn wrapper(&self) -> Vec<String> {
        let start: Vec<String> = self.start.iter().map(|word| format!("'{word}'")).collect();
        let script = format!("shift; exec {} \"$@\"", start.join(" "));
        vec!["bash".to_owned(), "-c".to_owned(), script, "pid1".to_owned()]
    }
}

impl Drop for Pid1 {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
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
    let Some(pid1) = Pid1::new() else { return };
    let wrapper = pid1.wrapper();
    let wrapper: Vec<&str> = wrapper.iter().map(String::as_str).collect();
    let mut server = Server::wrapped(&wrapper, &[], &[]).await;
    let r = server.terminal(json!({"command": "cat /proc/1/comm; ps -o ppid= -p $$; id -u"})).await;
    assert_eq!(
        r.output().split_whitespace().collect::<Vec<_>>(),
        ["shellkeep", "1", USER],
        "{r:#?}"
    );

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
