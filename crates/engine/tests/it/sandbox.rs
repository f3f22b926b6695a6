//! The sandbox against a real bash in a real PTY and the one-shot runner:
//! each mode writes where it may and nowhere else, the network off leaves
//! Unix sockets, and the integrity filter holds in every mode, while the
//! shell's own machinery (prompts, exit codes, `TMPDIR`) keeps working.

use std::path::Path;
use std::time::Duration;

use shellkeep_engine::PolicyLimits as Limits;
use shellkeep_engine::{RunRequest, run_oneshot};
use shellkeep_engine::{SandboxMode as Mode, SandboxPolicy as Policy, check_sandbox};
use tokio_util::sync::CancellationToken;

use crate::{Scratch, Term, in_ci};

/// Whether this kernel enforces `policy`; off the CI a host without
/// Landlock or seccomp skips with a note.
fn enforced(policy: &Policy) -> bool {
    match check_sandbox(policy) {
        Ok(_) => true,
        Err(why) if !in_ci() => {
            eprintln!("skipped: {why}");
            false
        }
        Err(why) => panic!("the CI host must enforce the sandbox: {why}"),
    }
}

fn workspace(dir: &Path, network: bool) -> Policy {
    Policy {
        mode: Mode::WorkspaceWrite,
        writable: vec![dir.to_owned()],
        network,
        best_effort: false,
    }
}

/// A sandboxed session whose workspace is its start directory.
async fn sandboxed(name: &str, mode: Mode, network: bool) -> Option<Term> {
    let scratch = Scratch::new(&format!("{name}-probe"));
    let policy = Policy { mode, ..workspace(&scratch.0, network) };
    if !enforced(&policy) {
        return None;
    }
    Some(
        Term::with(name, |config| {
            let work = config.cwd.clone();
            config.sandbox = Policy { mode, ..workspace(&work, network) };
        })
        .await,
    )
}

#[tokio::test]
async fn workspace_write_writes_the_workspace_and_tmpdir_only() {
    let Some(term) = sandboxed("sandbox-ws", Mode::WorkspaceWrite, true).await else { return };
    let outside = term.scratch.0.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let reply = term.run("echo in > inside.txt && cat inside.txt").await;
    assert_eq!(reply.exit_code(), Some(0), "{reply:?}");
    assert!(reply.output.text.contains("in"), "{reply:?}");
    let reply = term.run("echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\" && echo $TMPDIR").await;
    assert_eq!(reply.exit_code(), Some(0), "{reply:?}");
    // Outside: a file, a directory, a removal, a rename into it.
    for command in [
        format!("echo x > {}/f", outside.display()),
        format!("mkdir {}/d", outside.display()),
        format!("mv inside.txt {}/moved", outside.display()),
        "touch /tmp/shellkeep-sandbox-escape".to_owned(),
    ] {
        let reply = term.run(&command).await;
        assert_ne!(reply.exit_code(), Some(0), "{command}: {reply:?}");
        assert!(reply.output.text.contains("Permission denied"), "{command}: {reply:?}");
    }
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
    assert!(term.cwd().join("inside.txt").exists(), "a refused rename leaves the file");
    // The shell's integration still works: cwd and exit codes come back.
    let reply = term.run("cd / && false").await;
    assert_eq!(reply.exit_code(), Some(1), "{reply:?}");
    assert_eq!(reply.cwd, Path::new("/"));
}

#[tokio::test]
async fn read_only_writes_nowhere_but_tmpdir() {
    let Some(term) = sandboxed("sandbox-ro", Mode::ReadOnly, true).await else { return };
    let reply = term.run("echo x > here.txt").await;
    assert_ne!(reply.exit_code(), Some(0), "{reply:?}");
    assert!(!term.cwd().join("here.txt").exists());
    let reply =
        term.run("echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\" > /dev/null && echo ok").await;
    assert_eq!(reply.exit_code(), Some(0), "{reply:?}");
    // Reading is the user's as before.
    let reply = term.run("head -c 5 /etc/passwd >/dev/null && echo read").await;
    assert_eq!(reply.exit_code(), Some(0), "{reply:?}");
}

#[tokio::test]
async fn the_integrity_filter_holds_in_every_mode() {
    let Some(term) = sandboxed("sandbox-integrity", Mode::WorkspaceWrite, true).await else {
        return;
    };
    let server = std::process::id();
    // A signal to the server (which would end it), and to every process.
    let reply = term.run(&format!("kill -0 {server}; echo rc=$?")).await;
    assert!(reply.output.text.contains("rc=1"), "{reply:?}");
    let reply = term.run("kill -0 -1; echo rc=$?").await;
    assert!(reply.output.text.contains("rc=1"), "{reply:?}");
    // ptrace of the shell, TIOCSTI into its terminal.
    let python = r#"python3 -c '
import ctypes, fcntl, os, termios
libc = ctypes.CDLL(None, use_errno=True)
r = libc.ptrace(16, os.getppid(), 0, 0)
print("ptrace", r, ctypes.get_errno())
try:
    fcntl.ioctl(0, termios.TIOCSTI, b"x")
    print("tiocsti allowed")
except OSError as e:
    print("tiocsti", e.errno)
'"#;
    let reply = term.run(python).await;
    let text = &reply.output.text;
    assert!(text.contains(&format!("ptrace -1 {}", libc::EPERM)), "{reply:?}");
    assert!(text.contains(&format!("tiocsti {}", libc::EPERM)), "{reply:?}");
    // The memory of a process outside the sandbox (pid 1: the namespace's
    // init, or the host's) is closed to it, whatever the user's rights.
    let reply = term.run("exec 3< /proc/1/mem && echo opened; echo rc=$?").await;
    assert!(!reply.output.text.contains("opened"), "{reply:?}");
    assert!(reply.output.text.contains("Permission denied"), "{reply:?}");
    // Its own children it still signals and waits for: job control works.
    let reply = term.run("sleep 30 & kill %1; wait; echo done").await;
    assert!(reply.output.text.contains("done"), "{reply:?}");
}

#[tokio::test]
async fn the_network_off_leaves_unix_sockets() {
    let Some(term) = sandboxed("sandbox-net", Mode::WorkspaceWrite, false).await else { return };
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let python = format!(
        r#"python3 -c '
import socket
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=5); print("tcp allowed")
except OSError as e:
    print("tcp", e.errno)
try:
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM); print("udp allowed")
except OSError as e:
    print("udp", e.errno)
a, b = socket.socketpair(); a.send(b"unix ok"); print(b.recv(10).decode())
s = socket.socket(socket.AF_UNIX); s.bind("sock"); s.listen(); print("listening")
'"#
    );
    let reply = term.run(&python).await;
    let text = &reply.output.text;
    assert!(text.contains(&format!("tcp {}", libc::EACCES)), "{reply:?}");
    assert!(text.contains(&format!("udp {}", libc::EACCES)), "{reply:?}");
    assert!(text.contains("unix ok") && text.contains("listening"), "{reply:?}");
    drop(listener);
}

#[tokio::test]
async fn a_run_command_is_sandboxed_and_its_tmpdir_removed() {
    let scratch = Scratch::new("sandbox-run");
    let work = scratch.0.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let policy = workspace(&work, false);
    if !enforced(&policy) {
        return;
    }
    let limits = Limits { exec: Duration::from_secs(30), no_output: Duration::from_secs(30) };
    let command = format!(
        "echo ok > {work}/in.txt; echo $TMPDIR; touch $TMPDIR/t && echo tmp; \
         touch {outside}/out.txt; kill -0 {server}; echo rc=$?",
        work = work.display(),
        outside = scratch.0.display(),
        server = std::process::id(),
    );
    let request = RunRequest {
        sandbox: policy,
        grace: Duration::from_millis(500),
        ..RunRequest::new(command, limits, scratch.0.join("spill"), "run")
    };
    let outcome = run_oneshot(request, CancellationToken::new()).await;
    let stdout = &outcome.stdout.text;
    assert!(work.join("in.txt").exists(), "{outcome:?}");
    assert!(!scratch.0.join("out.txt").exists(), "{outcome:?}");
    assert!(stdout.contains("tmp") && stdout.contains("rc=1"), "{outcome:?}");
    assert!(outcome.stderr.text.contains("Permission denied"), "{outcome:?}");
    let tmp = stdout.lines().next().unwrap();
    assert!(tmp.contains("shellkeep-tmp-") && !Path::new(tmp).exists(), "{tmp}");
}

#[tokio::test]
async fn an_unconfined_session_is_unchanged() {
    let term = Term::new("sandbox-off").await;
    let reply = term
        .run(&format!("kill -0 {}; echo rc=$?; echo ${{TMPDIR:-unset}}", std::process::id()))
        .await;
    assert!(reply.output.text.contains("rc=0"), "{reply:?}");
    assert!(!reply.output.text.contains("shell-"), "{reply:?}");
}

/// The work a day brings, inside the workspace with the network off: git,
/// python, a nested shell, a C-c, a build with cargo from its cache.
#[tokio::test]
async fn a_day_of_work_fits_in_the_workspace() {
    let Some(term) = sandboxed("sandbox-day", Mode::WorkspaceWrite, false).await else { return };
    for (command, expected) in [
        (
            "git init -q repo && cd repo && echo a > a && git add a && \
             git -c user.email=a@b -c user.name=n commit -qm first && git log --oneline | wc -l",
            "1",
        ),
        ("python3 -c 'import tempfile; print(tempfile.mkdtemp())'", "shellkeep"),
        ("bash -c 'echo nested $((6*7))'", "nested 42"),
        ("printf 'b\\na\\n' | sort | head -1", "a"),
    ] {
        let reply = term.run(command).await;
        assert_eq!(reply.exit_code(), Some(0), "{command}: {reply:?}");
        assert!(reply.output.text.contains(expected), "{command}: {reply:?}");
    }
    let reply = term.run_for("sleep 30", 0.5).await;
    assert!(reply.exit_code().is_none(), "{reply:?}");
    let reply = term.input("C-c", 5.0).await;
    assert!(reply.exit_code().is_some(), "C-c ends the sleep: {reply:?}");
    if crate::installed("cargo") {
        let reply = term
            .run_for(
                "cargo new -q --vcs none hello && cd hello && \
                 CARGO_TARGET_DIR=$PWD/target cargo build -q --offline && ./target/debug/hello",
                120.0,
            )
            .await;
        assert!(reply.output.text.contains("Hello, world!"), "{reply:?}");
    } else {
        eprintln!("cargo build skipped: no cargo on PATH");
    }
}
