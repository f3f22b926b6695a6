//! A sandboxed terminal session, whose shell runs in a PID namespace of its
//! own: the pids inside agree (`$$`, `ps`, `pgrep`, `kill`), no signal from
//! inside stops the init, the integration works as outside (exit codes,
//! cwd, background jobs, C-c, nested shells), and a stop (reset, close) or
//! the SIGKILL of the process that started it (with no orphan guard) ends
//! everything inside, whatever it did to leave its group, session or
//! environment.

use shellkeep_engine::spawn_std;
use shellkeep_engine::{Call, Event, NotRun, Outcome, Request, ShellExit};
use shellkeep_engine::{SandboxMode as Mode, SandboxPolicy as Policy};

use crate::{Term, processes_with};

/// A session sandboxed to write its work directory: its shell has a
/// namespace of its own.
async fn term(name: &str) -> Term {
    Term::with(name, |config| {
        config.sandbox = Policy {
            mode: Mode::WorkspaceWrite,
            writable: vec![config.cwd.clone()],
            ..Policy::off()
        };
    })
    .await
}

/// A marker only this test knows, for the command lines it starts.
fn marker(what: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("time")
        .subsec_nanos();
    format!("ns-{what}-{}-{nanos}", std::process::id())
}

#[tokio::test]
async fn pids_inside_agree_and_the_init_is_ours() {
    let term = term("ns-pids").await;
    // The session's process count is its shell's alone: neither the keeper
    // nor the init is one of its processes.
    assert_eq!(term.session.process_count(), 1);
    let reply = term.run("echo $$; cat /proc/1/comm; ps -o pid= -p $$ | tr -d ' '").await;
    assert_eq!(reply.outcome, Outcome::Completed { exit_code: 0 }, "{reply:?}");
    assert_eq!(reply.output.text, "2\nshellkeep-init\n2\n", "{reply:?}");
    // A background job: `$!`, `jobs -p`, `pgrep` and `kill` name it alike.
    // (`pgrep` again until the job has exec'd `sleep`.)
    let reply =
        term.run("sleep 300 & echo \"$!\"; jobs -p; until pgrep -x sleep; do :; done").await;
    let text = &reply.output.text;
    let job = text.strip_prefix("[1] ").and_then(|rest| rest.lines().next()).expect("a job");
    assert_eq!(*text, format!("[1] {job}\n{job}\n{job}\n{job}\n"), "{reply:?}");
    let reply = term.run("kill $(pgrep -x sleep); wait; pgrep -x sleep; echo $?").await;
    assert!(reply.output.text.ends_with("1\n"), "{reply:?}");
    // Nothing outside is in sight: not the server (this process), not its
    // namespace; `/proc` lists the init, the shell and this command's
    // processes only.
    let me = std::process::id();
    let ours = std::fs::read_link("/proc/self/ns/pid").expect("our pid namespace");
    let reply = term
        .run(&format!(
            "test -e /proc/{me} && echo 'the server is in sight'; readlink /proc/self/ns/pid; \
             ls -d /proc/[0-9]* | wc -l"
        ))
        .await;
    let lines: Vec<&str> = reply.output.text.lines().collect();
    assert_eq!(lines.len(), 2, "{reply:?}");
    assert_ne!(lines[0], ours.to_string_lossy(), "{reply:?}");
    let count: usize = lines[1].trim().parse().expect("a count");
    assert!(count <= 6, "{reply:?}");
    term.session.close().await;
}

#[tokio::test]
async fn no_signal_from_inside_stops_the_init() {
    let term = term("ns-init").await;
    let reply = term
        .run(
            "for s in $(seq 1 31) $(seq 34 64); do kill -s $s 1 2>/dev/null; done; \
             kill -9 1; /bin/kill -KILL 1; cat /proc/1/comm",
        )
        .await;
    // Refused by the sandbox's signal scope where Landlock has one (the
    // init is outside it), dropped by the kernel otherwise (the process
    // tests without a sandbox check that): the init is alive either way.
    assert_eq!(reply.outcome, Outcome::Completed { exit_code: 0 }, "{reply:?}");
    assert_eq!(reply.output.text.lines().last(), Some("shellkeep-init"), "{reply:?}");
    // The shell still starts commands (a namespace whose init died could
    // not fork).
    let reply = term.run("(exit 3)").await;
    assert_eq!(reply.outcome, Outcome::Completed { exit_code: 3 }, "{reply:?}");
    term.session.close().await;
}

#[tokio::test]
async fn the_integration_works_inside() {
    let term = term("ns-integration").await;
    let reply = term.run("false").await;
    assert_eq!(reply.outcome, Outcome::Completed { exit_code: 1 }, "{reply:?}");
    let reply = term.run("cd /tmp").await;
    assert_eq!(reply.cwd, std::path::PathBuf::from("/tmp"), "{reply:?}");
    // C-c ends the foreground job, and the shell goes on.
    let reply = term.run_for("sleep 300", 0.3).await;
    assert!(matches!(reply.outcome, Outcome::Running { .. }), "{reply:?}");
    let reply = term.input("C-c", 10.0).await;
    assert_eq!(reply.outcome, Outcome::Completed { exit_code: 130 }, "{reply:?}");
    // Job control: a background job, its end reported by `wait`.
    let reply = term.run("sleep 0.2 & wait %1; echo \"job $?\"").await;
    assert!(reply.output.text.ends_with("Done                    sleep 0.2\njob 0\n"), "{reply:?}");
    // A nested shell gets the integration, and its exit returns.
    let reply = term.run("bash").await;
    assert!(reply.events.contains(&Event::NestedShellStarted), "{reply:?}");
    let reply = term.run("echo $$; exit 5").await;
    assert!(reply.events.contains(&Event::NestedShellExited { status: 5 }), "{reply:?}");
    let reply = term.run("echo $$").await;
    assert_eq!(reply.output.text, "2\n", "{reply:?}");
    // `exec bash` keeps the shell's pid: the integration comes back.
    let reply = term.run("exec bash").await;
    assert!(reply.events.contains(&Event::IntegrationReinstalled), "{reply:?}");
    // The shell's end, by exit code or by a signal from inside, is seen
    // as it is (the keeper ends as the shell did), and the new shell has
    // a namespace of its own again.
    let how = |reply: &shellkeep_engine::Reply| {
        reply.events.iter().find_map(|event| match event {
            Event::ShellRestarted { how, .. } => Some(*how),
            _ => None,
        })
    };
    let reply = term.run("cd ..; exit 4").await;
    assert_eq!(how(&reply), Some(ShellExit::Code(4)), "{reply:?}");
    let reply = term.run("kill -9 $$").await;
    assert_eq!(how(&reply), Some(ShellExit::Signal(9)), "{reply:?}");
    let reply = term.run("echo $$; cat /proc/1/comm").await;
    assert_eq!(reply.output.text, "2\nshellkeep-init\n", "{reply:?}");
    term.session.close().await;
}

/// Commands that leave the shell's group and session, wipe their
/// environment, or double fork ignoring SIGTERM and SIGHUP, each starting
/// a `sleep` named `mark`: three processes in all.
fn escapes(mark: &str) -> String {
    format!(
        "(setsid env -i bash -c 'exec -a {mark} sleep 300' &); \
         (setsid bash -c '(trap \"\" TERM HUP; exec -a {mark} sleep 300 &)' &); \
         (trap '' TERM HUP; exec -a {mark} sleep 300 &); echo started"
    )
}

/// The variable that makes [`helper_server_with_a_sandboxed_session`] run:
/// the mark its escapes carry.
const HELPER_MARK: &str = "SHELLKEEP_TEST_NAMESPACE_MARK";

/// What escaped ends with a reset and with a close.
#[tokio::test]
async fn a_stop_ends_everything_inside() {
    for how in ["reset", "close"] {
        let term = term(&format!("ns-stop-{how}")).await;
        let mark = marker(how);
        let reply = term.run(&escapes(&mark)).await;
        assert_eq!(reply.outcome, Outcome::Completed { exit_code: 0 }, "{reply:?}");
        crate::eventually(|| processes_with(&mark).len() == 3).await;
        if how == "reset" {
            let reply = term.call(Request::new(Call::Reset { then: None })).await;
            assert!(reply.events.contains(&Event::Reset), "{reply:?}");
            let reply = term.run("echo $$").await;
            assert_eq!(reply.output.text, "2\n", "{reply:?}");
        } else {
            term.session.close().await;
        }
        crate::eventually(|| processes_with(&mark).is_empty()).await;
        term.session.close().await;
    }
}

/// The SIGKILL of the process that started a sandboxed session (a server,
/// here this test binary run again as a helper, with no orphan guard)
/// leaves nothing of the namespace: the keeper dies of its parent-death
/// signal, the init of its own, and the kernel kills everything inside.
#[tokio::test]
async fn a_killed_server_leaves_nothing_in_the_namespace() {
    let mark = marker("server");
    let mut helper = std::process::Command::new(std::env::current_exe().expect("test binary"));
    helper
        .args(["namespace::helper_server_with_a_sandboxed_session", "--exact", "--ignored"])
        .env(HELPER_MARK, &mark)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // Registered as a child of ours, so that the other tests' stops do not
    // take it for an orphan one of their commands left.
    let mut helper = spawn_std(&mut helper).expect("the helper starts");
    crate::poll_until(async || processes_with(&mark), |pids| pids.len() == 3).await;
    helper.kill().expect("SIGKILL the helper");
    helper.wait().expect("reaped");
    crate::poll_until(async || processes_with(&mark), Vec::is_empty).await;
    // Its scratch directory, which its SIGKILL left.
    let prefix = format!("shellkeep-it-ns-helper-{}-", helper.id());
    for entry in std::fs::read_dir(std::env::temp_dir()).expect("temp dir").flatten() {
        if entry.file_name().to_string_lossy().starts_with(&prefix) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// A helper for [`a_killed_server_leaves_nothing_in_the_namespace`]: with
/// [`HELPER_MARK`] set, makes itself not dumpable (as a server does),
/// starts a sandboxed session whose command escapes, and waits to be
/// killed; without it, does nothing.
#[tokio::test]
#[ignore = "a helper, run by a_killed_server_leaves_nothing_in_the_namespace"]
async fn helper_server_with_a_sandboxed_session() {
    let Ok(mark) = std::env::var(HELPER_MARK) else { return };
    // Not dumpable, as a server is: its forks (the keepers) cannot write
    // their own `/proc/self` files.
    shellkeep_engine::make_process_undumpable().expect("not dumpable");
    let term = term("ns-helper").await;
    let reply = term.run(&escapes(&mark)).await;
    assert_eq!(reply.outcome, Outcome::Completed { exit_code: 0 }, "{reply:?}");
    std::future::pending::<()>().await;
}

/// The pid a reply names is the one the shell's commands see: a program
/// that holds the terminal after the shell's integration reported the end
/// of its command (as a sourced script can) is named by its pid inside.
#[tokio::test]
async fn a_reply_names_pids_as_seen_inside() {
    let term = term("ns-named").await;
    let reply = term
        .run_for(
            "printf 'E;%s;0;;0' \"$__sk_seq\" >&62; echo AFTERFAKE; \
             python3 -c 'import os, sys; open(\"pid\", \"w\").write(str(os.getpid())); \
             sys.stdin.readline()'; exit 7",
            20.0,
        )
        .await;
    assert!(reply.output.text.contains("AFTERFAKE"), "{reply:?}");
    let file = term.cwd().join("pid");
    crate::eventually(|| std::fs::read_to_string(&file).is_ok_and(|pid| !pid.is_empty())).await;
    let inside: i32 = std::fs::read_to_string(&file).expect("pid").parse().expect("a pid");
    let reply = term.run_for("echo next", 5.0).await;
    assert!(
        matches!(
            &reply.outcome,
            Outcome::NotExecuted { why: NotRun::NotAtPrompt { pid, command_line }, .. }
                if *pid == inside && command_line.contains("python3")
        ),
        "{inside}: {reply:?}"
    );
    // A process other than the shell that sends an end record is named by
    // its pid inside too.
    let reply = term.call(Request::new(Call::Reset { then: None })).await;
    assert!(reply.events.contains(&Event::Reset), "{reply:?}");
    let reply = term
        .run(
            // It stays alive until the session closes: a sender already
            // gone when the server reads its record is named by its pid
            // outside (it has no pid inside any more).
            "(exec python3 -c 'import os, time; open(\"sender\", \"w\").write(str(os.getpid())); \
              os.write(62, b\"E;1;0;;0\"); time.sleep(300)') &",
        )
        .await;
    assert_eq!(reply.outcome, Outcome::Completed { exit_code: 0 }, "{reply:?}");
    let file = term.cwd().join("sender");
    crate::eventually(|| std::fs::read_to_string(&file).is_ok_and(|pid| !pid.is_empty())).await;
    let inside: i32 = std::fs::read_to_string(&file).expect("pid").parse().expect("a pid");
    let reply = crate::poll_until(
        async || term.run("true").await,
        |reply| reply.events.iter().any(|e| matches!(e, Event::RanAtPrompt { .. })),
    )
    .await;
    assert!(
        reply.events.iter().any(|event| matches!(
            event,
            Event::RanAtPrompt { sender: Some(sender), .. } if *sender == inside
        )),
        "{inside}: {reply:?}"
    );
    term.session.close().await;
}
