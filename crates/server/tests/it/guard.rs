//! The orphan guard against a hostile command (issue 11: F1, F8 and the
//! token of F14 in the hostile findings): a command cannot blind it by
//! holding its descriptors, steer it by writing protocol lines wherever it
//! can reach, end it with SIGTERM, or read the scope token on its command
//! line; killing it until it is given up is said in the next reply of every
//! session, and the server still stops everything when it ends.
//!
//! These hold as root and as an unprivileged user: as root a command can
//! list and open the guard's `/proc/PID/fd`, and the tests prove that it
//! no longer matters.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::{
    Server, alive, assert_none_survive, guard_of, marker, processes_with, wait_alive, wait_until,
};

/// How long cleanup may take: the guard's own grace is 2 s.
const CLEANUP: Duration = Duration::from_secs(10);

/// `300.<marker>`: an argument that finds a test's process in `/proc`.
fn mark() -> String {
    format!("300.{}", marker())
}

/// Our effective user id (of `/proc/self`: this test process is dumpable).
fn euid() -> u32 {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata("/proc/self").expect("/proc/self").uid()
}

/// A command's way of reaching the guard: it opens every descriptor of the
/// guard it can (`/proc/GUARD/fd/*`, for writing) and keeps them open,
/// writes protocol lines into each that would make a naive guard forget
/// the shell's session and watch `VICTIM`'s group and session instead, and
/// sleeps with `MARKER` among its arguments.
const HOLDER: &str = r#"
import os, sys, time
guard, victim, session, marker = sys.argv[1:5]
lines = f"-s {session}\n-g {session}\nreset\n+g {victim}\n+s {victim}\nscope x\n".encode()
held = []
try:
    names = os.listdir(f"/proc/{guard}/fd")
except OSError:
    names = []
for name in names:
    for flags in (os.O_WRONLY, os.O_RDWR):
        try:
            fd = os.open(f"/proc/{guard}/fd/{name}", flags | os.O_NONBLOCK)
        except OSError:
            continue
        held.append(fd)
        try:
            os.write(fd, lines)
        except OSError:
            pass
print(f"holding {len(held)} of the guard's descriptors", flush=True)
time.sleep(300)
"#;

/// A process group of the user's that has nothing to do with the server:
/// what injected lines would have the guard kill.
fn victim() -> std::process::Child {
    use std::os::unix::process::CommandExt as _;
    std::process::Command::new("sleep")
        .arg(mark())
        .process_group(0)
        .stdin(std::process::Stdio::null())
        .spawn()
        .expect("spawn the victim")
}

/// F1: a command that holds the guard's descriptors open (or tries to) and
/// writes protocol lines into them, then the server ends (`sigkill`: with
/// SIGKILL; else the connection ends). Nothing the command started
/// survives, and the victim the lines named does.
async fn hold_and_inject(sigkill: bool) {
    let mut server = Server::start().await;
    let guard = guard_of(server.pid).expect("the server runs an orphan guard");
    let mut victim = victim();
    std::fs::write(server.cwd().join("holder.py"), HOLDER).expect("write the holder");
    let (holder, escaped, plain) = (mark(), mark(), mark());
    let command = format!(
        "(setsid python3 holder.py {guard} {victim} $$ {holder} >holder.out 2>&1 </dev/null &); \
         (setsid sleep {escaped} </dev/null >/dev/null 2>&1 &); sleep {plain} & echo started",
        victim = victim.id(),
    );
    let r = server.terminal(json!({ "command": command })).await;
    assert_eq!(r["exit_code"], 0, "{r:#?}");
    let markers = [holder.as_str(), &escaped, &plain];
    wait_alive(&markers).await;
    let out = server.cwd().join("holder.out");
    wait_until(
        CLEANUP,
        || std::fs::read_to_string(&out).is_ok_and(|out| out.contains("holding")),
        || format!("the holder did not start: {:?}", std::fs::read_to_string(&out)),
    )
    .await;

    if sigkill {
        server.signal("KILL");
    } else {
        server.close_connection().await;
    }
    server.wait_exit(Duration::from_secs(20)).await;
    assert_none_survive(&markers, CLEANUP).await;
    wait_until(CLEANUP, || !alive(guard), || format!("the guard {guard} is still running")).await;
    assert!(alive(victim.id()), "the guard killed a group it was never told about");
    victim.kill().expect("kill the victim");
    victim.wait().expect("reap the victim");
}

#[tokio::test]
async fn a_command_holding_the_guards_descriptors_does_not_blind_it_after_a_sigkill() {
    hold_and_inject(true).await;
}

#[tokio::test]
async fn lines_a_command_writes_to_the_guard_are_ignored_on_a_clean_exit() {
    hold_and_inject(false).await;
}

/// A command's way of holding the channel open from the other side: it
/// takes a copy of every socket of the server and of the guard it can
/// (`pidfd_getfd`, which needs ptrace rights: root has them, an
/// unprivileged user has none over non-dumpable processes), keeps them, and
/// sleeps with `MARKER` among its arguments.
const STEALER: &str = r#"
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
SYS_pidfd_getfd = 438
marker = sys.argv[-1]
held = []
for pid in sys.argv[1:-1]:
    try:
        pidfd = os.pidfd_open(int(pid))
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        continue
    for name in names:
        try:
            if not os.readlink(f"/proc/{pid}/fd/{name}").startswith("socket:"):
                continue
        except OSError:
            continue
        fd = libc.syscall(SYS_pidfd_getfd, pidfd, int(name), 0)
        if fd >= 0:
            held.append(fd)
print(f"holding {len(held)} sockets", flush=True)
time.sleep(300)
"#;

/// F1, the other side: a command that holds the server's end of the
/// channel (where it may: as root) keeps end of file from the guard when
/// the server is SIGKILLed; the guard still notices (parent-death signal,
/// parent pid) and stops everything.
#[tokio::test]
async fn a_command_holding_the_servers_end_of_the_channel_cannot_hide_its_death() {
    let mut server = Server::start().await;
    let guard = guard_of(server.pid).expect("the server runs an orphan guard");
    std::fs::write(server.cwd().join("stealer.py"), STEALER).expect("write the stealer");
    let (stealer, escaped) = (mark(), mark());
    let command = format!(
        "(setsid python3 stealer.py $PPID {guard} {stealer} >stealer.out 2>&1 </dev/null &); \
         (setsid sleep {escaped} </dev/null >/dev/null 2>&1 &); echo started"
    );
    let r = server.terminal(json!({ "command": command })).await;
    assert_eq!(r["exit_code"], 0, "{r:#?}");
    let markers = [stealer.as_str(), &escaped];
    wait_alive(&markers).await;
    let out = server.cwd().join("stealer.out");
    wait_until(
        CLEANUP,
        || std::fs::read_to_string(&out).is_ok_and(|out| out.contains("holding")),
        || format!("the stealer did not start: {:?}", std::fs::read_to_string(&out)),
    )
    .await;
    if euid() == 0 {
        // Root may take them: then only the guard's other ways of noticing
        // the server's death remain, and they are what this proves.
        let out = std::fs::read_to_string(&out).expect("the stealer's output");
        assert!(!out.contains("holding 0 "), "{out}");
    }

    server.signal("KILL");
    server.wait_exit(Duration::from_secs(20)).await;
    assert_none_survive(&markers, CLEANUP).await;
    wait_until(CLEANUP, || !alive(guard), || format!("the guard {guard} is still running")).await;
}

/// Issue 19, item 8: the guard gives no grace after the server's death. A
/// process that would answer SIGTERM by killing the guard and starting a
/// new escapee (and ignores it) never gets to: it is stopped before it is
/// killed, its trap never runs, and the guard cleans up everything.
#[tokio::test]
async fn after_a_server_sigkill_nothing_the_guard_ends_can_react() {
    let mut server = Server::start().await;
    let guard = guard_of(server.pid).expect("the server runs an orphan guard");
    let (reacting, late, plain) = (mark(), mark(), mark());
    let witness = server.cwd().join("trapped");
    let trap = format!(
        "trap 'touch {witness}; kill -9 {guard}; setsid sleep {late} &' TERM; \
         while :; do sleep {reacting}; done",
        witness = witness.display()
    );
    let command = format!(
        "(setsid bash -c \"{trap}\" </dev/null >/dev/null 2>&1 &); \
         (setsid sleep {plain} </dev/null >/dev/null 2>&1 &); echo started"
    );
    let r = server.terminal(json!({ "command": command })).await;
    assert_eq!(r["exit_code"], 0, "{r:#?}");
    wait_alive(&[&reacting, &plain]).await;
    server.signal("KILL");
    server.wait_exit(Duration::from_secs(20)).await;
    assert_none_survive(&[&reacting, &plain, &late], CLEANUP).await;
    wait_until(CLEANUP, || !alive(guard), || format!("the guard {guard} is still running")).await;
    assert!(!witness.exists(), "a process the guard ended ran its SIGTERM trap");
    assert!(processes_with(&[&late]).is_empty(), "a process the guard ended started another");
}

/// F14 (the token) and SIGTERM: the scope token is on no process's command
/// line; the guard is not dumpable (its descriptors are root's) and blocks
/// SIGTERM, so a command's `kill` does not end it, and it still cleans up
/// after a server SIGKILL.
#[tokio::test]
async fn the_token_is_on_no_command_line_and_sigterm_does_not_end_the_guard() {
    let mut server = Server::start().await;
    let guard = guard_of(server.pid).expect("the server runs an orphan guard");
    let (background, escaped) = (mark(), mark());
    let command = format!(
        "sleep {background} & (setsid sleep {escaped} </dev/null >/dev/null 2>&1 &); \
         echo \"$SHELLKEEP_SCOPE\""
    );
    let r = server.terminal(json!({ "command": command })).await;
    // The last line: job control reports the `&` job first.
    let scope = r.output().lines().last().expect("a line").to_owned();
    let (token, _) = scope.split_once('/').expect("SHELLKEEP_SCOPE is TOKEN/OWNER");
    assert!(token.len() >= 16, "{scope:?}");
    let markers = [background.as_str(), &escaped];
    wait_alive(&markers).await;
    // A `run` in flight too: its bash is a child of the server as well.
    let run = server.run(json!({"command": "ps -eo args"})).await;
    assert_eq!(run["exitCode"], 0, "{run:#?}");
    assert!(!run["stdout"].as_str().expect("stdout").contains(token), "{run:#?}");
    let with_token = processes_with(&[token]);
    assert!(with_token.is_empty(), "the token is on a command line: {with_token:?}");

    // Non-dumpable: /proc/GUARD/fd belongs to root, so a command of an
    // unprivileged user cannot even list it.
    let fd_owner = {
        use std::os::unix::fs::MetadataExt as _;
        std::fs::metadata(format!("/proc/{guard}/fd")).expect("the guard's fd dir").uid()
    };
    assert_eq!(fd_owner, 0, "the guard is not dumpable");
    // SIGTERM (15) is blocked: it only wakes the guard.
    let status = std::fs::read_to_string(format!("/proc/{guard}/status")).expect("status");
    let blocked = status
        .lines()
        .find_map(|line| line.strip_prefix("SigBlk:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .expect("SigBlk");
    assert_ne!(blocked & (1 << (15 - 1)), 0, "SIGTERM is blocked: {status}");

    let r = server.terminal(json!({"command": format!("kill -TERM {guard}; echo sent")})).await;
    assert_eq!(r["exit_code"], 0, "{r:#?}");
    server.signal("KILL");
    server.wait_exit(Duration::from_secs(20)).await;
    assert_none_survive(&markers, CLEANUP).await;
    wait_until(CLEANUP, || !alive(guard), || format!("the guard {guard} is still running")).await;
    assert!(
        !server.log().contains("ended unexpectedly"),
        "SIGTERM ended the guard:\n{}",
        server.log()
    );
}

/// Kills every orphan guard of the shell's server as it appears, until
/// none has come back for two seconds (it was given up), at most 60 s. Only
/// bash builtins in the loop, so that each guard dies well within its
/// first second even on a loaded machine: the children of the server are
/// listed by the kernel (readable though the server is not dumpable), and
/// a guard is the child whose second argument is `__guard`.
const KILL_GUARDS: &str = r#"misses=0
for i in $(seq 600); do
  found=
  for tasks in /proc/$PPID/task/*/children; do
    kids=()
    read -r -a kids < "$tasks"
    for kid in "${kids[@]}"; do
      a1=
      { read -r -d '' a0; read -r -d '' a1; } < "/proc/$kid/cmdline" 2>/dev/null
      if [ "$a1" = __guard ]; then kill -9 "$kid" 2>/dev/null; found=1; fi
    done
  done
  if [ -n "$found" ]; then misses=0; else misses=$((misses + 1)); fi
  [ $misses -ge 20 ] && break
  sleep 0.1
done"#;

/// The words of the notice that the guard was given up.
const GIVEN_UP: &str = "not restarted again";

/// F8: a command kills the guard until it is given up. The next reply of
/// every session says so (once), sessions started later and `run` replies
/// included, in the text and in `notes`; and a normal end of the server
/// still stops everything every session started.
#[tokio::test]
async fn a_guard_killed_until_given_up_is_reported_everywhere_and_the_server_still_cleans_up() {
    let mut server = Server::start().await;
    let (other_job, other_escaped, escaped) = (mark(), mark(), mark());
    let command = format!(
        "sleep {other_job} & (setsid sleep {other_escaped} </dev/null >/dev/null 2>&1 &); echo ok"
    );
    let r = server.terminal(json!({"command": command, "session": "other"})).await;
    assert_eq!(r["exit_code"], 0, "{r:#?}");

    let command =
        format!("{KILL_GUARDS}\n(setsid sleep {escaped} </dev/null >/dev/null 2>&1 &); echo done");
    let killing = server.terminal(json!({"command": command, "timeout": 90})).await;
    assert_eq!(killing["exit_code"], 0, "{killing:#?}");
    let markers = [other_job.as_str(), &other_escaped, &escaped];
    wait_alive(&markers).await;
    wait_until(
        CLEANUP,
        || server.log().contains(GIVEN_UP),
        || format!("the guard was not given up:\n{}", server.log()),
    )
    .await;
    assert_eq!(guard_of(server.pid), None, "no guard runs any more");

    // The session that killed it: this reply or the next says so, once.
    let next = server.terminal(json!({"command": "echo next"})).await;
    let told = [&killing, &next].iter().filter(|r| r.text.contains(GIVEN_UP)).count();
    assert_eq!(told, 1, "told once:\n{}\n---\n{}", killing.text, next.text);
    // Another session's next reply, in the text and in `notes`.
    let other = server.terminal(json!({"command": "echo again", "session": "other"})).await;
    assert!(other.text.contains(GIVEN_UP), "{other:#?}");
    let notes = other["notes"].as_array().expect("notes");
    assert!(notes.iter().any(|n| n.as_str().is_some_and(|n| n.contains(GIVEN_UP))), "{other:#?}");
    assert_eq!(other.output(), "again\n", "the notice is not output");
    let again = server.terminal(json!({"command": "echo once", "session": "other"})).await;
    assert!(!again.text.contains(GIVEN_UP), "told only once: {again:#?}");
    // A session started afterwards, and `run`.
    let late = server.terminal(json!({"command": "echo late", "session": "late"})).await;
    assert!(late.text.contains(GIVEN_UP), "{late:#?}");
    let run = server.run(json!({"command": "echo run"})).await;
    assert!(run.text.contains(GIVEN_UP), "{run:#?}");

    server.close_connection().await;
    let status = server.wait_exit(Duration::from_secs(30)).await;
    assert!(status.success(), "the server exits cleanly: {status}\n{}", server.log());
    assert_none_survive(&markers, CLEANUP).await;
}

/// The guard's command line names only its runtime directory.
#[tokio::test]
async fn the_guard_is_told_nothing_secret_on_its_command_line() {
    let server = Server::start().await;
    let guard = guard_of(server.pid).expect("the server runs an orphan guard");
    let cmdline = std::fs::read(format!("/proc/{guard}/cmdline")).expect("the guard's cmdline");
    let args: Vec<String> =
        cmdline.split(|&b| b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    assert_eq!(args.len(), 5, "{args:?}");
    assert_eq!(args[1..3], ["__guard", "--runtime-dir"], "{args:?}");
    assert!(Path::new(&args[3]).is_dir(), "{args:?}");
    assert_eq!(args[4], "", "{args:?}");
}

/// A guard whose stdin is not a socket pair from its parent (someone ran
/// `shellkeep __guard` by hand, on a pipe) refuses to run and touches
/// nothing: not even the runtime directory it was named.
#[test]
fn a_guard_without_a_channel_from_its_parent_refuses_to_run() {
    let dir = std::env::temp_dir().join(format!("sk-guard-refuses-{}", marker()));
    std::fs::create_dir(&dir).expect("a directory");
    std::fs::write(dir.join("kept"), "kept").expect("a file");
    let output = std::process::Command::new(crate::binary())
        .args(["__guard", "--runtime-dir"])
        .arg(&dir)
        .stdin(std::process::Stdio::piped())
        .output()
        .expect("run the guard");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let kept = dir.join("kept").exists();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("the orphan guard cannot run"), "{stderr}");
    assert!(kept, "the runtime directory was left alone");
}

/// The containment modes a test runs in: the one CI names
/// (`SHELLKEEP_TEST_CONTAINMENT`), else `auto` (a control group where the
/// host allows it) and `markers`.
fn modes() -> Vec<String> {
    match std::env::var("SHELLKEEP_TEST_CONTAINMENT") {
        Ok(mode) if !mode.is_empty() => vec![mode],
        _ => vec!["auto".into(), "markers".into()],
    }
}

/// Whether process `pid` is stopped (`T` in its stat).
fn stopped(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| stat.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('T')))
}

/// Issue 19, item 8: a command that stops the guard while the server lives
/// does not keep it stopped: the server continues it at once, the reply of
/// the session says so (once), and the same guard still cleans up after a
/// server SIGKILL.
#[tokio::test]
async fn a_stopped_guard_is_continued_at_once_and_the_reply_says_so() {
    let mut server = Server::start().await;
    let guard = guard_of(server.pid).expect("the server runs an orphan guard");
    let r = server.terminal(json!({"command": "echo first"})).await;
    assert_eq!(r.output(), "first\n", "{r:#?}");
    let stopping =
        server.terminal(json!({"command": format!("kill -STOP {guard}; echo sent")})).await;
    assert_eq!(stopping["exit_code"], 0, "{stopping:#?}");
    wait_until(
        CLEANUP,
        || server.log().contains("was stopped") && !stopped(guard),
        || format!("the guard was not continued (stopped: {})\n{}", stopped(guard), server.log()),
    )
    .await;
    let next = server.terminal(json!({"command": "echo next"})).await;
    let told: Vec<&crate::Reply> =
        [&stopping, &next].into_iter().filter(|r| r.text.contains("was stopped")).collect();
    assert_eq!(told.len(), 1, "told once:\n{}\n---\n{}", stopping.text, next.text);
    assert!(told[0].text.contains(&format!("orphan guard (pid {guard})")), "{}", told[0].text);
    assert_eq!(guard_of(server.pid), Some(guard), "the same guard, not a new one");

    let escaped = mark();
    let command = format!("(setsid sleep {escaped} </dev/null >/dev/null 2>&1 &); echo started");
    let r = server.terminal(json!({ "command": command })).await;
    assert_eq!(r["exit_code"], 0, "{r:#?}");
    wait_alive(&[&escaped]).await;
    server.signal("KILL");
    server.wait_exit(Duration::from_secs(20)).await;
    assert_none_survive(&[&escaped], CLEANUP).await;
}

/// Escapees for the guard-killing tests: a `setsid` orphan and a plain
/// `(sleep &)` (both marked), and, where the shell is in a control group,
/// a non-dumpable double fork (unmarked: only its group finds it).
async fn start_escapees(server: &Server) -> Vec<String> {
    let r = server.terminal(json!({"command": "cat /proc/self/cgroup"})).await;
    let in_cgroup = r.output().contains(&format!("shellkeep-{}-", server.pid));
    let (setsid, plain, hidden) = (mark(), mark(), mark());
    let mut command = format!(
        "(setsid sleep {setsid} </dev/null >/dev/null 2>&1 &); \
         (sleep {plain} </dev/null >/dev/null 2>&1 &); "
    );
    let mut markers = vec![setsid, plain];
    if in_cgroup {
        command.push_str(&format!(
            "(python3 -c 'import ctypes,os,time; ctypes.CDLL(None).prctl(4,0,0,0,0); \
             os.fork() and os._exit(0); os.setsid(); os.fork() and os._exit(0); \
             time.sleep(300)' {hidden} </dev/null >/dev/null 2>&1 &); "
        ));
        markers.push(hidden);
    }
    command.push_str("echo started");
    let r = server.terminal(json!({ "command": command })).await;
    assert_eq!(r["exit_code"], 0, "{r:#?}");
    wait_alive(&markers.iter().map(String::as_str).collect::<Vec<_>>()).await;
    markers
}

/// Issue 19, item 8 (F1): one command stops the guard, SIGKILLs the server,
/// then kills the guard. Nothing is left to clean up at that moment; the
/// next start of a server (of the same user) ends everything the first
/// one's sessions started, in every containment mode.
#[tokio::test]
async fn a_command_that_stops_the_guard_and_kills_the_server_and_the_guard_leaves_nothing_after_the_next_start()
 {
    for mode in modes() {
        let mut server = Server::with_env(&[], &[("SHELLKEEP_CONTAINMENT", &mode)]).await;
        let guard = guard_of(server.pid).expect("the server runs an orphan guard");
        let markers = start_escapees(&server).await;
        let command = format!(
            "python3 -c 'import os,sys; g,s=map(int,sys.argv[1:]); os.kill(g,19); os.kill(s,9); \
             os.kill(g,9)' {guard} $PPID"
        );
        // No reply: the server dies.
        let _ = tokio::time::timeout(
            Duration::from_secs(30),
            server.try_call("terminal", json!({ "command": command })),
        )
        .await;
        server.wait_exit(Duration::from_secs(20)).await;
        wait_until(CLEANUP, || !alive(guard), || format!("{mode}: the guard {guard} lives")).await;

        let _next = Server::with_env(&[], &[("SHELLKEEP_CONTAINMENT", &mode)]).await;
        let markers: Vec<&str> = markers.iter().map(String::as_str).collect();
        assert_none_survive(&markers, CLEANUP).await;
    }
}

/// A watcher that waits on the server's pidfd and kills the guard the
/// moment the server dies (of anything), then sleeps with `MARKER` among
/// its arguments.
const PIDFD_WATCHER: &str = r#"
import os, select, sys, time
server, guard = int(sys.argv[1]), int(sys.argv[2])
fd = os.pidfd_open(server)
print("watching", flush=True)
poll = select.poll()
poll.register(fd, select.POLLIN)
poll.poll()
try:
    os.kill(guard, 9)
except OSError:
    pass
time.sleep(300)
"#;

/// Issue 19, item 8, the pidfd variant: a process of a session kills the
/// guard the moment the server dies. Whoever wins that race, nothing of the
/// server's sessions (the watcher included) outlives the next start.
#[tokio::test]
async fn a_watcher_that_kills_the_guard_when_the_server_dies_leaves_nothing_after_the_next_start() {
    for mode in modes() {
        let mut server = Server::with_env(&[], &[("SHELLKEEP_CONTAINMENT", &mode)]).await;
        let guard = guard_of(server.pid).expect("the server runs an orphan guard");
        let mut markers = start_escapees(&server).await;
        std::fs::write(server.cwd().join("watcher.py"), PIDFD_WATCHER).expect("write the watcher");
        let watcher = mark();
        let command = format!(
            "(setsid python3 watcher.py $PPID {guard} {watcher} >watcher.out 2>&1 </dev/null &); \
             echo started"
        );
        let r = server.terminal(json!({ "command": command })).await;
        assert_eq!(r["exit_code"], 0, "{r:#?}");
        let out = server.cwd().join("watcher.out");
        wait_until(
            CLEANUP,
            || std::fs::read_to_string(&out).is_ok_and(|out| out.contains("watching")),
            || format!("{mode}: the watcher did not start: {:?}", std::fs::read_to_string(&out)),
        )
        .await;
        markers.push(watcher);
        server.signal("KILL");
        server.wait_exit(Duration::from_secs(20)).await;
        wait_until(CLEANUP, || !alive(guard), || format!("{mode}: the guard {guard} lives")).await;

        let _next = Server::with_env(&[], &[("SHELLKEEP_CONTAINMENT", &mode)]).await;
        let markers: Vec<&str> = markers.iter().map(String::as_str).collect();
        assert_none_survive(&markers, CLEANUP).await;
    }
}
