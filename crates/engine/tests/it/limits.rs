//! The timeout policy in the terminal: the unwatched-time rule. A command
//! is stopped only when no call has waited on it, polled it or sent it
//! input for longer than its limit (the category's execution limit, or the
//! last call's `timeout` if larger); time it spends blocked reading the
//! terminal is not counted; while a call waits, it is never stopped. When
//! the limit fires, the whole command line stops, never the shell.
//!
//! The limits here are a second or two, so the tests are quick. When to
//! stop is a pure rule (`session::timing`, unit-tested with made-up
//! instants); these tests check each rule once end to end, waiting on what
//! the command itself does (its output, in the session's store) rather than
//! on a fixed sleep.

use std::time::Duration;

use shellkeep_engine::LogPage;
use shellkeep_engine::TerminationMode;
use shellkeep_engine::{Activity, Call, Outcome, Reply, Request, WaitEnded};

use crate::{Term, eventually, processes_with};

fn limited(command: &str, limit: f64, timeout: Option<f64>) -> Request {
    Request {
        call: Call::run(command),
        timeout: timeout.map(Duration::from_secs_f64),
        exec_limit: Some(Duration::from_secs_f64(limit)),
        ..Request::default()
    }
}

/// Whether `reply` says its command was stopped past `limit` seconds, in
/// `mode`.
fn killed(reply: &Reply, limit: f64, mode: TerminationMode) -> bool {
    let expected = (Duration::from_secs_f64(limit), mode);
    matches!(reply.outcome, Outcome::Killed { limit, mode, .. } if (limit, mode) == expected)
}

/// The running command's complete output so far, as the session's store
/// keeps it; reading it does not watch the command.
fn logged_text(term: &Term) -> String {
    term.session.commit_screen();
    logged(term).text
}

/// The latest command's log in the session's store.
fn logged(term: &Term) -> LogPage {
    let log = term.session.output().get(None).expect("a command in the store");
    log.read(0, 10_000).expect("the log reads")
}

/// Waits, without any call watching, until the supervisor has ended the
/// running command, then polls for its reply.
async fn stopped_unwatched(term: &Term) -> Reply {
    eventually(|| matches!(term.session.activity(), Activity::Finished { .. })).await;
    let reply = term.run("").await;
    assert!(reply.exit_code().is_some(), "{reply:?}");
    reply
}

#[tokio::test]
async fn an_unwatched_command_is_stopped_and_the_rest_of_its_line_never_runs() {
    let term = Term::new("limit").await;
    term.run("export KEPT=1").await;
    let reply = term.call(limited("echo start; sleep 100; echo end", 1.0, Some(0.3))).await;
    assert_eq!(
        reply.outcome,
        Outcome::Running { why: WaitEnded::Timeout(Duration::from_millis(300)) }
    );
    assert_eq!(reply.output.text, "start\n");
    // The reply says by when to look again: the limit, as the call's
    // timeout is smaller.
    assert_eq!(reply.look_again_within, Some(Duration::from_secs(1)));
    // Before any call reports it, the listing and the store agree that it
    // ended, with the same exit code (issue 12).
    eventually(|| matches!(term.session.activity(), Activity::Finished { .. })).await;
    let Activity::Finished { exit_code, .. } = term.session.activity() else { unreachable!() };
    let page = logged(&term);
    assert_eq!((page.running, page.exit_code), (false, Some(exit_code)), "{page:?}");
    assert!(page.text.starts_with("start\n") && !page.text.contains("end"), "{page:?}");
    let reply = stopped_unwatched(&term).await;
    // The first reply showed `start`; this one shows the rest.
    assert_eq!(format!("start\n{}", reply.output.text), page.text, "reply and store disagree");
    assert!(killed(&reply, 1.0, TerminationMode::Soft), "{reply:?}");
    assert!(!reply.output.text.contains("end"), "the rest of the line ran: {:?}", reply.output);
    // One exit code, from the shell that abandoned the line.
    assert!(matches!(reply.exit_code(), Some(130 | 143)), "{:?}", reply.exit_code());
    assert_eq!(reply.exit_code(), Some(exit_code));
    assert_eq!(term.run("echo $KEPT").await.output.text, "1\n");
    term.session.close().await;
}

#[tokio::test]
async fn an_unwatched_loop_stops_for_good() {
    let term = Term::new("loop").await;
    let reply =
        term.call(limited("while true; do sleep 0.2; echo tick; done", 1.0, Some(0.1))).await;
    assert_eq!(reply.exit_code(), None);
    let reply = stopped_unwatched(&term).await;
    assert!(matches!(reply.outcome, Outcome::Killed { .. }), "{reply:?}");
    // Nothing ticks afterwards, between commands or in the next one.
    let reply = term.run("sleep 0.6; echo quiet").await;
    assert_eq!(reply.output.text, "quiet\n");
    let reply = term.run("true").await;
    assert!(reply.idle_output.is_none(), "{reply:?}");
    term.session.close().await;
}

#[tokio::test]
async fn a_job_that_ignores_sigterm_gets_sigkill() {
    let term = Term::new("hardkill").await;
    let reply =
        term.call(limited("bash -c \"trap '' TERM; sleep 100\"; echo end", 1.0, Some(0.1))).await;
    assert_eq!(reply.exit_code(), None);
    let reply = stopped_unwatched(&term).await;
    assert!(killed(&reply, 1.0, TerminationMode::Hard), "{reply:?}");
    assert!(!reply.output.text.contains("end"), "{:?}", reply.output.text);
    term.session.close().await;
}

#[tokio::test]
async fn a_busy_shell_loop_is_interrupted() {
    let term = Term::new("busyloop").await;
    term.call(limited("while :; do :; done", 1.0, Some(0.1))).await;
    let reply = stopped_unwatched(&term).await;
    assert_eq!(reply.exit_code(), Some(130));
    assert!(killed(&reply, 1.0, TerminationMode::Soft), "{reply:?}");
    assert_eq!(term.run("echo ok").await.output.text, "ok\n");
    term.session.close().await;
}

#[tokio::test]
async fn a_watched_command_is_never_stopped() {
    // A call waiting far past the limit, with and without a timeout.
    let term = Term::with("watched", |c| c.no_output_return = Duration::from_secs(20)).await;
    let reply = term.call(limited("sleep 2; echo done", 0.5, Some(10.0))).await;
    assert_eq!((reply.output.text.as_str(), reply.exit_code()), ("done\n", Some(0)));
    let reply = term.call(limited("sleep 2; echo done", 0.5, None)).await;
    assert_eq!((reply.output.text.as_str(), reply.exit_code()), ("done\n", Some(0)));
    assert!(!matches!(reply.outcome, Outcome::Killed { .. }));
    term.session.close().await;
}

#[tokio::test]
async fn polling_keeps_a_long_job_alive() {
    // A job printing for four times its limit, followed by polls with short
    // gaps, with and without a timeout: it runs to the end.
    let term = Term::with("polled", |c| c.no_output_return = Duration::from_millis(300)).await;
    let mut reply = term
        .call(limited("for i in 1 2 3 4 5 6 7 8; do sleep 0.5; echo $i; done", 1.0, Some(0.2)))
        .await;
    let mut seen = reply.output.text.clone();
    let mut polls = 0;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while reply.is_running() {
        assert!(std::time::Instant::now() < deadline, "still running after 30 s: {seen:?}");
        polls += 1;
        let timeout = if polls % 2 == 0 { Some(Duration::from_millis(400)) } else { None };
        reply = term.call(Request { timeout, ..Request::default() }).await;
        seen.push_str(&reply.output.text);
    }
    assert_eq!(seen, "1\n2\n3\n4\n5\n6\n7\n8\n");
    assert_eq!(reply.exit_code(), Some(0));
    assert!(!matches!(reply.outcome, Outcome::Killed { .. }));
    term.session.close().await;
}

#[tokio::test]
async fn the_last_calls_timeout_raises_the_limit() {
    let term = Term::new("raised").await;
    let reply = term.call(limited("sleep 3; echo mid; sleep 1; echo done", 0.5, Some(2.0))).await;
    assert_eq!(reply.outcome, Outcome::Running { why: WaitEnded::Timeout(Duration::from_secs(2)) });
    assert_eq!(reply.look_again_within, Some(Duration::from_secs(2)));
    // The call returned after 2 s, so `mid` comes after about 1 s
    // unwatched: past the category's limit, within the call's. Stopped at
    // the category's limit, the command would never print it.
    eventually(|| logged_text(&term).contains("mid")).await;
    assert!(matches!(term.session.activity(), Activity::Running { .. }));
    let reply = term.call(Request { timeout: Some(Duration::from_secs(10)), ..Request::default() });
    let reply = reply.await;
    assert_eq!((reply.output.text.as_str(), reply.exit_code()), ("mid\ndone\n", Some(0)));
    term.session.close().await;
}

#[tokio::test]
async fn waiting_for_input_does_not_count() {
    let term = Term::new("inputwait").await;
    // A prompt that gives up by itself after 3.5 s, then a second one.
    let command = "read -t 3.5 -p 'first: ' x; echo gave up; read -p 'answer: ' x; echo got $x";
    // A call without a timeout: the limit in force is the category's 2 s.
    let reply = term.call(limited(command, 2.0, None)).await;
    // `read` is the shell itself reading the terminal.
    assert_eq!(reply.outcome, Outcome::WaitingForInput { shell_reading: true });
    assert_eq!(reply.output.text, "first: ");
    // Unwatched well past the limit, nearly all of it at the prompt: were
    // that time counted, the command would be stopped before it gave up.
    eventually(|| logged_text(&term).contains("gave up")).await;
    assert!(matches!(term.session.activity(), Activity::Running { .. }));
    let reply = term.call(Request { timeout: Some(Duration::from_secs(5)), ..Request::default() });
    let reply = reply.await;
    assert_eq!(reply.outcome, Outcome::WaitingForInput { shell_reading: true });
    let reply = term.input("42", 10.0).await;
    // The prompt was shown by the reply before; only what is new follows.
    assert_eq!((reply.output.text.as_str(), reply.exit_code()), ("42\ngot 42\n", Some(0)));
    term.session.close().await;
}

#[tokio::test]
async fn leftovers_of_the_command_die_but_background_jobs_do_not() {
    let term = Term::new("leftovers").await;
    let orphan = format!("300.{}1", std::process::id());
    let job = format!("300.{}2", std::process::id());
    term.call(limited(&format!("sleep {job} & (sleep {orphan} &); sleep 100"), 1.0, Some(0.1)))
        .await;
    let reply = stopped_unwatched(&term).await;
    assert!(killed(&reply, 1.0, TerminationMode::Soft), "{reply:?}");
    eventually(|| processes_with(&format!("sleep {orphan}")).is_empty()).await;
    // The job started with & is the shell's, not the timed-out command's.
    assert_eq!(processes_with(&format!("sleep {job}")).len(), 1);
    term.session.close().await;
    eventually(|| processes_with(&format!("sleep {job}")).is_empty()).await;
}

/// Issue 11, F6: what the command moved into sessions of its own
/// (`setsid` in a subshell, `setsid -f`, `nohup setsid … &`, a `setsid`
/// tree that ignores SIGTERM) is stopped with it; the shell's `&` jobs, from
/// an earlier command and from the same line, are not.
#[tokio::test]
async fn what_the_command_moved_to_other_sessions_dies_with_it() {
    let term = Term::new("sessions").await;
    let mark = |n: u32| format!("300.{}{n}", std::process::id());
    let (earlier, same_line) = (mark(1), mark(2));
    let escaped = [mark(3), mark(4), mark(5), mark(6)];
    term.run(&format!("sleep {earlier} &")).await;
    let command = format!(
        "sleep {same_line} & (setsid sleep {} &); setsid -f sleep {}; \
         nohup setsid sleep {} >/dev/null 2>&1 & (setsid bash -c 'trap \"\" TERM; sleep {}' &); \
         sleep 100",
        escaped[0], escaped[1], escaped[2], escaped[3]
    );
    term.call(limited(&command, 1.0, Some(0.3))).await;
    for marker in &escaped {
        eventually(|| !processes_with(&format!("sleep {marker}")).is_empty()).await;
    }
    let reply = stopped_unwatched(&term).await;
    assert!(matches!(reply.outcome, Outcome::Killed { .. }), "{reply:?}");
    for marker in &escaped {
        eventually(|| processes_with(&format!("sleep {marker}")).is_empty()).await;
    }
    for job in [&earlier, &same_line] {
        assert_eq!(processes_with(&format!("sleep {job}")).len(), 1, "the shell's job {job}");
    }
    term.session.close().await;
    for job in [&earlier, &same_line] {
        eventually(|| processes_with(&format!("sleep {job}")).is_empty()).await;
    }
}
