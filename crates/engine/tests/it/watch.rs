//! Calls that end early: a cancelled call leaves the command running and
//! loses nothing; progress is reported while a call waits; a command that
//! has ended is never refused or misreported because its end was still in
//! flight.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use shellkeep_engine::{
    Activity, Call, Event, InputReport, Outcome, Progress, ProgressHook, Request, SessionConfig,
    WaitEnded,
};
use tokio_util::sync::CancellationToken;

use crate::{Term, eventually, key_sent, processes_with};

/// Runs `request` and cancels it, as a client does, once `ready` holds.
async fn cancelled_call(term: &Term, request: Request, ready: impl Fn(&Term) -> bool) {
    let cancel = CancellationToken::new();
    let call = term.session.execute(request, cancel.clone());
    let canceller = async {
        eventually(|| ready(term)).await;
        cancel.cancel();
    };
    let (reply, ()) = tokio::join!(call, canceller);
    let reply = reply.expect("a cancelled call still returns");
    assert_eq!(reply.outcome, Outcome::Running { why: WaitEnded::Cancelled });
    assert_eq!(reply.output.text, "", "a cancelled call consumes nothing");
}

fn running_for(term: &Term, at_least: Duration) -> bool {
    matches!(term.session.activity(), Activity::Running { elapsed, .. } if elapsed >= at_least)
}

#[tokio::test]
async fn a_cancelled_call_leaves_the_command_running_and_loses_nothing() {
    let term = Term::new("cancel").await;
    let command = "for i in 1 2 3 4; do echo line$i; sleep 0.3; done; echo finished";
    let request = Request {
        call: Call::run(command),
        timeout: Some(Duration::from_secs(30)),
        ..Request::default()
    };
    cancelled_call(&term, request, |term| running_for(term, Duration::from_millis(400))).await;
    // The command was not interrupted: the next call gets all it printed,
    // including what it printed before the cancellation.
    let reply =
        term.call(Request { timeout: Some(Duration::from_secs(20)), ..Request::default() }).await;
    assert_eq!(reply.output.text, "line1\nline2\nline3\nline4\nfinished\n");
    assert_eq!(reply.exit_code(), Some(0));
    assert!(
        reply.events.iter().any(|e| matches!(e, Event::PreviousCallCancelled { .. })),
        "{:?}",
        reply.events
    );
    // Said once only.
    let reply = term.run("echo next").await;
    assert!(reply.events.is_empty(), "{reply:?}");
    term.session.close().await;
}

#[tokio::test]
async fn after_a_cancel_the_next_command_runs_once_the_old_one_ended() {
    // Today's bug: `echo after` right after a cancel was "NOT executed",
    // and C-c then said the command had already finished.
    let term = Term::new("aftercancel").await;
    let marker = format!("0.3{}", std::process::id());
    let request = Request::new(Call::run(format!("sleep {marker}; echo slept")));
    cancelled_call(&term, request, |_| !processes_with(&format!("sleep {marker}")).is_empty())
        .await;
    // The moment the sleep is gone, the shell's end marker may still be on
    // its way; the command must run all the same.
    eventually(|| processes_with(&format!("sleep {marker}")).is_empty()).await;
    let reply = term.run("echo after").await;
    assert_eq!(reply.output.text, "after\n", "{reply:?}");
    let previous = reply.previous.expect("the cancelled command is reported");
    assert_eq!((previous.output.text.as_str(), previous.exit_code()), ("slept\n", Some(0)));
    assert!(reply.events.iter().any(|e| matches!(e, Event::PreviousCallCancelled { .. })));
    term.session.close().await;
}

#[tokio::test]
async fn after_a_timed_out_call_a_command_that_has_ended_is_never_refused() {
    let term = Term::new("aftertimeout").await;
    for round in 0..3 {
        let marker = format!("0.3{}{round}", std::process::id());
        let reply = term.run_for(&format!("sleep {marker}; echo slept"), 0.05).await;
        assert_eq!(reply.exit_code(), None);
        // The moment the job is gone, send the next command (or a key).
        eventually(|| processes_with(&format!("sleep {marker}")).is_empty()).await;
        let reply =
            if round == 2 { term.input("C-c", 10.0).await } else { term.run("echo after").await };
        assert!(!matches!(reply.outcome, Outcome::NotExecuted { .. }), "{reply:?}");
        match reply.previous {
            Some(previous) => assert_eq!(previous.output.text, "slept\n"),
            None => assert_eq!(reply.output.text, "slept\n", "{reply:?}"),
        }
    }
    term.session.close().await;
}

#[tokio::test]
async fn after_a_cancel_c_c_interrupts_the_command_that_still_runs() {
    let term = Term::new("cancelkey").await;
    let request = Request::new(Call::run("sleep 100"));
    cancelled_call(&term, request, |term| running_for(term, Duration::from_millis(200))).await;
    // Still running: a new command is refused, and C-c interrupts it.
    let reply = term.run("echo after").await;
    assert!(matches!(reply.outcome, Outcome::NotExecuted { .. }), "{reply:?}");
    let reply = term.input("C-c", 10.0).await;
    assert_eq!(reply.outcome, Outcome::Completed { exit_code: 130 });
    assert!(key_sent(&reply, "C-c"), "{reply:?}");
    assert!(reply.input != Some(InputReport::NotSent), "{reply:?}");
    assert_eq!(term.run("echo after").await.output.text, "after\n");
    term.session.close().await;
}

#[tokio::test]
async fn a_command_cancelled_unwatched_is_still_stopped_by_its_limit() {
    let term = Term::new("cancellimit").await;
    let request = Request {
        call: Call::run("sleep 100; echo never"),
        exec_limit: Some(Duration::from_secs(1)),
        ..Request::default()
    };
    cancelled_call(&term, request, |term| running_for(term, Duration::from_millis(200))).await;
    eventually(|| matches!(term.session.activity(), Activity::Finished { .. })).await;
    let reply = term.run("").await;
    assert!(matches!(reply.outcome, Outcome::Killed { .. }), "{reply:?}");
    assert!(!reply.output.text.contains("never"));
    term.session.close().await;
}

#[tokio::test]
async fn a_waiting_call_reports_progress_about_once_a_second() {
    let term = Term::new("progress").await;
    let reports: Arc<Mutex<Vec<Progress>>> = Arc::default();
    let sink = Arc::clone(&reports);
    let hook = ProgressHook::new(move |progress| sink.lock().expect("lock").push(progress));
    let reply = term
        .call(Request {
            call: Call::run(
                "for i in 1 2 3; do echo step$i; sleep 1; done; printf 'almost'; sleep 1",
            ),
            timeout: Some(Duration::from_secs(30)),
            progress: Some(hook),
            ..Request::default()
        })
        .await;
    assert_eq!(reply.exit_code(), Some(0));
    let seen = reports.lock().expect("lock").clone();
    assert!((2..=6).contains(&seen.len()), "{seen:?}");
    assert!(seen.windows(2).all(|w| w[1].count > w[0].count && w[1].elapsed > w[0].elapsed));
    assert!(seen.iter().all(|p| p.line.starts_with("step") || p.line == "almost"), "{seen:?}");
    // Nothing is reported once the call has returned.
    let count = seen.len();
    term.run("sleep 1.2").await;
    assert_eq!(reports.lock().expect("lock").len(), count);
    term.session.close().await;
}

#[test]
fn a_call_without_a_timeout_waits_at_most_50_seconds_by_default() {
    let config = SessionConfig::new("d", "/".into(), "/tmp".into(), "/tmp".into());
    assert_eq!(config.max_wait, Duration::from_secs(50));
}
