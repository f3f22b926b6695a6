//! The timeout policy in the terminal: the execution limit kills the
//! foreground job (never the shell), time spent waiting for input does not
//! count, and a call's wait never ends in a kill.

use std::time::Duration;

use shellkeep_engine::process::TerminationMode;
use shellkeep_engine::session::{Note, Request, Status};

use crate::{Term, eventually, processes_with};

fn limited(command: &str, limit: f64, timeout: Option<f64>) -> Request {
    Request {
        command: command.into(),
        timeout: timeout.map(Duration::from_secs_f64),
        exec_limit: Some(Duration::from_secs_f64(limit)),
        ..Request::default()
    }
}

fn killed(limit: f64, mode: TerminationMode) -> Note {
    Note::Killed { limit: Duration::from_secs_f64(limit), mode }
}

#[tokio::test]
async fn a_command_past_its_limit_is_killed_and_the_shell_lives() {
    let term = Term::new("limit").await;
    term.run("export KEPT=1").await;
    let reply = term.call(limited("echo started; sleep 100", 1.0, None)).await;
    assert_eq!((reply.status, reply.exit_code), (Status::Completed, Some(143)));
    assert!(reply.notes.contains(&killed(1.0, TerminationMode::Soft)), "{:?}", reply.notes);
    // bash reports the job it lost, as in any terminal.
    assert_eq!(reply.output.text, "started\nTerminated\n");
    assert_eq!(term.run("echo $KEPT").await.output.text, "1\n");
    term.session.close().await;
}

#[tokio::test]
async fn a_job_that_ignores_sigterm_gets_sigkill() {
    let term = Term::new("hardkill").await;
    let reply = term.call(limited("bash -c \"trap '' TERM; sleep 100\"", 1.0, None)).await;
    assert_eq!(reply.exit_code, Some(137));
    assert!(reply.notes.contains(&killed(1.0, TerminationMode::Hard)), "{:?}", reply.notes);
    term.session.close().await;
}

#[tokio::test]
async fn a_busy_shell_loop_is_interrupted() {
    let term = Term::new("busyloop").await;
    let reply = term.call(limited("while :; do :; done", 1.0, None)).await;
    assert_eq!(reply.exit_code, Some(130));
    assert!(reply.notes.contains(&killed(1.0, TerminationMode::Soft)), "{:?}", reply.notes);
    assert_eq!(term.run("echo ok").await.output.text, "ok\n");
    term.session.close().await;
}

#[tokio::test]
async fn the_call_timeout_never_lowers_the_limit() {
    let term = Term::new("longer").await;
    let reply = term.call(limited("sleep 2; echo done", 0.5, Some(10.0))).await;
    assert_eq!((reply.output.text.as_str(), reply.exit_code), ("done\n", Some(0)));
    assert!(!reply.notes.iter().any(|n| matches!(n, Note::Killed { .. })));
    term.session.close().await;
}

#[tokio::test]
async fn waiting_for_input_does_not_count() {
    let term = Term::new("inputwait").await;
    // Wait well past the limit while the program sits at its prompt.
    let reply = term.call(limited("read -p 'answer: ' x; echo got $x", 1.0, Some(3.0))).await;
    assert_eq!(
        reply.status,
        Status::Running(shellkeep_engine::session::WaitEnded::Timeout(Duration::from_secs(3)))
    );
    assert!(reply.notes.contains(&Note::WaitingForInput), "{:?}", reply.notes);
    let reply = term.input("42", 10.0).await;
    // The prompt was shown by the reply before; only what is new follows.
    assert_eq!((reply.output.text.as_str(), reply.exit_code), ("42\ngot 42\n", Some(0)));
    term.session.close().await;
}

#[tokio::test]
async fn leftovers_of_the_command_die_but_background_jobs_do_not() {
    let term = Term::new("leftovers").await;
    let orphan = format!("300.{}1", std::process::id());
    let job = format!("300.{}2", std::process::id());
    let reply = term
        .call(limited(&format!("sleep {job} & (sleep {orphan} &); sleep 100"), 1.0, None))
        .await;
    assert!(reply.notes.contains(&killed(1.0, TerminationMode::Soft)), "{:?}", reply.notes);
    eventually(|| processes_with(&format!("sleep {orphan}")).is_empty()).await;
    // The job started with & is the shell's, not the timed-out command's.
    assert_eq!(processes_with(&format!("sleep {job}")).len(), 1);
    term.session.close().await;
    eventually(|| processes_with(&format!("sleep {job}")).is_empty()).await;
}
