//! A person beside the agent, through the session's terminal layer: a
//! watcher who joins mid-command gets the replay and the live bytes with
//! no gap and no duplicate; a person who holds the session answers a
//! password prompt the agent's command waits on, types a command at the
//! idle prompt, and keeps the agent's commands out of their line; the
//! agent is told each time, and never what was typed with echo off.

use std::sync::Arc;
use std::time::Duration;

use shellkeep_engine::Secrets;
use shellkeep_engine::{Event, InputReport, NotRun, Outcome, SessionError};
use shellkeep_engine::{RawMasker, Tap, Watch};
use tokio::sync::broadcast::error::TryRecvError;

use crate::{Term, poll_until};

/// Everything a watch has seen so far: replay, then what is queued live;
/// output as text, other taps as their debug form on lines of their own.
fn seen(watch: &mut Watch, text: &mut String) {
    let mut add = |tap: &Tap| match tap {
        Tap::Output(bytes) => text.push_str(&String::from_utf8_lossy(bytes)),
        other => text.push_str(&format!("\n{other:?}\n")),
    };
    for tapped in std::mem::take(&mut watch.replay) {
        add(&tapped.tap);
    }
    loop {
        match watch.live.try_recv() {
            Ok(tapped) => add(&tapped.tap),
            Err(TryRecvError::Empty | TryRecvError::Closed) => break,
            Err(TryRecvError::Lagged(n)) => panic!("a watcher this fast lagged by {n}"),
        }
    }
}

#[tokio::test]
async fn a_watcher_joining_mid_command_sees_every_line_once() {
    let term = Term::new("person-watch").await;
    let command = "for i in $(seq 1 400); do echo line-$i; sleep 0.002; done";
    let running = term.run_for(command, 0.3).await;
    assert!(running.is_running(), "{running:#?}");
    // Join while it prints.
    let terminal = term.session.terminal().expect("a terminal");
    let mut watch = terminal.watch(None);
    drop(terminal);
    let done = poll_until(async || term.run_for("", 5.0).await, |r| !r.is_running()).await;
    assert_eq!(done.exit_code(), Some(0), "{done:#?}");
    let mut text = String::new();
    seen(&mut watch, &mut text);
    assert!(text.contains(&format!("{:?}", Tap::Command(command.to_owned()))), "{text}");
    // The command is named; the line that runs it is not shown.
    assert!(!text.contains("__sk"), "{text}");
    // Nor the integration's markers, which carry the session's nonce.
    assert!(!text.contains("6973"), "{text}");
    // A line may begin with the shell's start marker (an OSC sequence).
    let lines: Vec<&str> = text
        .lines()
        .map(|line| line.rsplit('\x07').next().unwrap_or(line).trim_end())
        .filter(|line| line.starts_with("line-"))
        .collect();
    let wanted: Vec<String> = (1..=400).map(|i| format!("line-{i}")).collect();
    assert_eq!(lines, wanted);
    term.session.close().await;
}

#[tokio::test]
async fn a_person_answers_the_password_prompt_the_agent_must_not_see() {
    let term = Term::new("person-password").await;
    let asks = "read -r -s -p 'Password: ' pw; echo; echo \"got ${#pw} characters\"";
    let waiting = term.run_for(asks, 5.0).await;
    assert_eq!(waiting.outcome, Outcome::WaitingForInput { shell_reading: true }, "{waiting:#?}");
    assert!(waiting.events.contains(&Event::InputHidden), "{waiting:#?}");
    // A program's prompt (`sudo`, `ssh`, `getpass`) is told too; one that
    // reads keys and echoes them itself (a REPL, an editor) is not.
    let program = Term::new("person-password-program").await;
    let python = "python3 -c 'import getpass; print(len(getpass.getpass(\"Password: \")))'";
    let asked = program.run_for(python, 5.0).await;
    assert!(asked.events.contains(&Event::InputHidden), "{asked:#?}");
    assert_eq!(program.input("abc", 5.0).await.exit_code(), Some(0));
    let repl = program.run_for("python3 -q", 5.0).await;
    assert!(repl.is_running(), "{repl:#?}");
    assert!(!repl.events.contains(&Event::InputHidden), "{repl:#?}");
    assert_eq!(program.keys(&["C-d"], 5.0).await.exit_code(), Some(0));
    let line = program.run_for("read -r -p 'Name: ' name", 5.0).await;
    assert!(!line.events.contains(&Event::InputHidden), "{line:#?}");
    program.session.close().await;

    let hold = term.session.hold().expect("nobody holds it");
    let since = term.session.held_since().expect("held");
    // A second person is refused, and the agent's command and input wait.
    assert_eq!(term.session.hold().expect_err("held").since, since);
    let input = term.input("agent-typed", 1.0).await;
    assert_eq!(input.input, Some(InputReport::PersonHolds { since }));
    let reset = term
        .session
        .execute(
            shellkeep_engine::Request::new(shellkeep_engine::Call::Reset { then: None }),
            tokio_util::sync::CancellationToken::new(),
        )
        .await;
    assert!(matches!(reset, Err(SessionError::PersonHolds { .. })), "{reset:?}");

    let terminal = term.session.terminal().expect("a terminal");
    let mut watch = terminal.watch(Some(Duration::from_secs(60)));
    drop(terminal);
    term.session.type_keys(&hold, b"hunter2-secret\r").await.expect("typed");
    drop(hold);
    // The first poll may come while the shell has not read the keys yet:
    // the agent is told once, in whichever reply comes first.
    let mut told = Vec::new();
    let done = poll_until(
        async || {
            let reply = term.run_for("", 5.0).await;
            told.extend(reply.events.clone());
            reply
        },
        |r| !r.is_running(),
    )
    .await;
    assert_eq!(done.exit_code(), Some(0), "{done:#?}");
    assert!(done.output.text.contains("got 14 characters"), "{done:#?}");
    assert!(!format!("{done:?}").contains("hunter2"), "{done:#?}");
    let typed = told
        .iter()
        .find_map(|event| match event {
            Event::PersonTyped(typed) => Some(*typed),
            _ => None,
        })
        .unwrap_or_else(|| panic!("the agent is told: {told:#?}"));
    assert_eq!((typed.keys, typed.hidden), (15, 15));
    // Told once.
    let next = term.run("true").await;
    assert!(!next.events.iter().any(|e| matches!(e, Event::PersonTyped(_))), "{next:#?}");
    // The watcher saw the keys as typed with echo off.
    let mut text = String::new();
    seen(&mut watch, &mut text);
    assert!(text.contains("echo: false"), "{text}");
    term.session.close().await;
}

#[tokio::test]
async fn a_persons_command_at_the_prompt_is_reported_with_its_exit_code() {
    let term = Term::new("person-command").await;
    assert_eq!(term.run("cd /").await.exit_code(), Some(0));
    let hold = term.session.hold().expect("free");
    let since = term.session.held_since().expect("held");
    // At the idle prompt the agent's command is not typed into the
    // person's line.
    let refused = term.run("echo from the agent").await;
    assert_eq!(
        refused.outcome,
        Outcome::NotExecuted {
            command: "echo from the agent".to_owned(),
            why: NotRun::PersonHolds { since }
        }
    );
    term.session.type_keys(&hold, b"echo typed-by-a-person; (exit 3)\r").await.expect("typed");
    // The person's command ends at the prompt; then they let go.
    let terminal = term.session.terminal().expect("terminal");
    let mut watch = terminal.watch(None);
    drop(terminal);
    let mut text = String::new();
    poll_until(
        async || {
            seen(&mut watch, &mut text);
            text.clone()
        },
        |text| text.matches("typed-by-a-person").count() >= 2,
    )
    .await;
    drop(hold);
    let reply = poll_until(
        async || term.run("echo agent again").await,
        |reply| reply.events.iter().any(|e| matches!(e, Event::PersonRan { .. })),
    )
    .await;
    assert_eq!(reply.exit_code(), Some(0));
    assert_eq!(reply.output.text, "agent again\n");
    assert!(reply.events.contains(&Event::PersonRan { status: 3 }), "{reply:#?}");
    assert!(!reply.events.iter().any(|e| matches!(e, Event::RanAtPrompt { .. })), "{reply:#?}");
    let between = reply.idle_output.clone().unwrap_or_default();
    assert!(between.contains("typed-by-a-person"), "{reply:#?}");
    // Without a person, a line that runs at the prompt is still tampering:
    // the person's keys excuse only the lines before the agent's next
    // command.
    let later = term.run("echo and once more").await;
    assert!(later.events.is_empty(), "{later:#?}");
    term.session.close().await;
}

/// The agent's commands leave line editing off at the idle prompt (the
/// shell reads the agent's lines whole, faster), though each command sees
/// it on, as the shell had it; a person who holds the session and types at
/// the idle prompt has it back from their first key: the up arrow recalls
/// their last line. The line that asks for it is never shown: not to a
/// watcher, not in the agent's next reply, and it is no command of the
/// person's.
#[tokio::test]
async fn a_person_at_the_idle_prompt_edits_lines_as_in_a_terminal() {
    let term = Term::new("person-editing").await;
    let probe = "[[ -o emacs || -o vi ]] && echo editing || echo plain";
    assert_eq!(term.run(probe).await.output.text, "editing\n");
    let hold = term.session.hold().expect("free");
    let terminal = term.session.terminal().expect("terminal");
    let mut watch = terminal.watch(None);
    drop(terminal);
    let mut text = String::new();
    let mut answers = async |count: usize| {
        poll_until(
            async || {
                seen(&mut watch, &mut text);
                text.clone()
            },
            |text| text.lines().filter(|line| line.trim_end() == "42").count() >= count,
        )
        .await
    };
    term.session.type_keys(&hold, b"echo $((6 * 7))\r").await.expect("typed");
    answers(1).await;
    // Up, then Enter: readline's history, not `^[[A` as a command.
    term.session.type_keys(&hold, b"\x1b[A\r").await.expect("typed");
    let shown = answers(2).await;
    assert!(!shown.contains("__sk"), "{shown}");
    assert!(!shown.contains("command not found"), "{shown}");
    drop(hold);
    let reply = poll_until(
        async || term.run(probe).await,
        |reply| reply.events.iter().any(|e| matches!(e, Event::PersonRan { .. })),
    )
    .await;
    assert_eq!(reply.output.text, "editing\n", "{reply:#?}");
    assert!(reply.events.contains(&Event::PersonRan { status: 0 }), "{reply:#?}");
    assert!(!reply.events.iter().any(|e| matches!(e, Event::RanAtPrompt { .. })), "{reply:#?}");
    let between = reply.idle_output.clone().unwrap_or_default();
    assert_eq!(between.matches("42").count(), 2, "{reply:#?}");
    assert!(!between.contains("__sk"), "{reply:#?}");
    term.session.close().await;
}

#[tokio::test]
async fn only_the_sessions_own_hold_types_and_a_watch_ends_with_the_shell() {
    let term = Term::new("person-end").await;
    let hold = term.session.hold().expect("free");
    let stale = term.session.hold();
    assert!(stale.is_err());
    drop(hold);
    let hold = term.session.hold().expect("free again");
    // Another session's hold types nothing here.
    let other = Term::new("person-end-other").await;
    let foreign = other.session.hold().expect("free");
    let refused = term.session.type_keys(&foreign, b"echo not mine\r").await;
    assert_eq!(refused.map_err(|err| err.kind()), Err(std::io::ErrorKind::PermissionDenied));
    other.session.close().await;
    let terminal = term.session.terminal().expect("terminal");
    let mut watch = terminal.watch(None);
    drop(terminal);
    drop(hold);
    term.session.close().await;
    assert!(term.session.terminal().is_none());
    let mut ended = false;
    loop {
        match watch.live.try_recv() {
            Ok(tapped) => ended |= matches!(tapped.tap, Tap::Exit(_)),
            Err(TryRecvError::Closed) => break,
            Err(other) => panic!("{other:?}"),
        }
    }
    assert!(ended || watch.replay.iter().any(|t| matches!(t.tap, Tap::Exit(_))));
}

#[test]
fn what_leaves_the_engine_is_masked() {
    let secrets = Arc::new(Secrets::new([("DB".to_owned(), "s3cr3t-passw0rd".to_owned())], false));
    let mut masker = RawMasker::new(secrets);
    let mut text = masker.push(b"\x1b[1mpassword=s3cr3t-pa");
    text.push_str(&masker.push(b"ssw0rd\x1b[0m\r\n"));
    text.push_str(&masker.finish());
    assert!(!text.contains("s3cr3t"), "{text}");
}
