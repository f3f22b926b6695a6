//! A terminal session whose shell runs in a PID namespace of its own: the
//! pids inside agree (`$$`, `ps`, `pgrep`, `kill`), no signal from inside
//! stops the init, the integration works as outside (exit codes, cwd,
//! background jobs, C-c, nested shells), and a stop (reset, close) ends
//! everything inside, whatever it did to leave its group, session or
//! environment.

use shellkeep_engine::sandbox::{Mode, Policy};
use shellkeep_engine::session::{Call, Event, Outcome, Request};

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
    let reply = term.run("echo $$; cat /proc/1/comm; ps -o pid= -p $$ | tr -d ' '").await;
    assert_eq!(reply.outcome, Outcome::Completed { exit_code: 0 }, "{reply:?}");
    assert_eq!(reply.output.text, "2\nshellkeep-init\n2\n", "{reply:?}");
    // A background job: `$!`, `jobs -p`, `pgrep` and `kill` name it alike.
    let reply = term.run("sleep 300 & echo \"$!\"; jobs -p; pgrep -x sleep").await;
    let text = &reply.output.text;
    let job = text.strip_prefix("[1] ").and_then(|rest| rest.lines().next()).expect("a job");
    assert_eq!(*text, format!("[1] {job}\n{job}\n{job}\n{job}\n"), "{reply:?}");
    let reply = term.run("kill $(pgrep -x sleep); wait; pgrep -x sleep; echo $?").await;
    assert!(reply.output.text.ends_with("1\n"), "{reply:?}");
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
    term.session.close().await;
}

/// What left the shell's group and session, wiped its environment, or
/// double forked ignoring SIGTERM and SIGHUP, ends with a reset and with a
/// close.
#[tokio::test]
async fn a_stop_ends_everything_inside() {
    for how in ["reset", "close"] {
        let term = term(&format!("ns-stop-{how}")).await;
        let mark = marker(how);
        let reply = term
            .run(&format!(
                "(setsid env -i bash -c 'exec -a {mark} sleep 300' &); \
                 (setsid bash -c '(trap \"\" TERM HUP; exec -a {mark} sleep 300 &)' &); \
                 (trap '' TERM HUP; exec -a {mark} sleep 300 &); echo started"
            ))
            .await;
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
