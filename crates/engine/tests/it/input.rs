//! Input: `waiting_for_input` is precise (only a job blocked reading the
//! terminal, by any descriptor and any wait call) and answered within about
//! a second; text input never blocks the session; `C-c` always works; keys
//! sent to an idle shell are harmless.

use std::time::{Duration, Instant};

use shellkeep_engine::{
    Activity, Call, InputReport, NotRun, Outcome, Reader, Reply, Request, SessionError, WaitEnded,
};

use crate::{Term, call, eventually, keys_call};

const WAITING: Outcome = Outcome::WaitingForInput { shell_reading: false };

/// A terminal whose calls without a timeout would otherwise wait 20 s for
/// silence: a reply in less means input waiting was detected.
async fn term(name: &str) -> Term {
    Term::with(name, |c| c.no_output_return = Duration::from_secs(20)).await
}

/// Sends `text` with no timeout, as an agent answering a prompt does.
async fn answer(term: &Term, text: &str) -> Reply {
    term.call(Request::new(call(text, true))).await
}

#[tokio::test]
async fn a_prompt_is_reported_as_soon_as_the_output_stops() {
    let term = term("prompt").await;
    let started = Instant::now();
    let reply = term.run("python3 -c \"x=input('name? '); print('hello', x)\"").await;
    assert_eq!(reply.outcome, WAITING, "{reply:?}");
    assert_eq!(reply.output.text, "name? ");
    assert!(matches!(reply.outcome, Outcome::WaitingForInput { .. }));
    // Loose: far below the 20 s silence return it replaces.
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    let reply = answer(&term, "Bob").await;
    assert_eq!(reply.exit_code(), Some(0));
    assert!(reply.output.text.ends_with("hello Bob\n"), "{:?}", reply.output.text);
    term.session.close().await;
}

#[tokio::test]
async fn a_python_repl_and_read_prompts_take_seconds_not_minutes() {
    let term = term("repl").await;
    let steps: &[(&str, &str)] = &[
        ("x = 6", ">>> "),
        ("y = 7", ">>> "),
        ("print(x * y)", "42\n>>> "),
        ("name = input('name? ')", "name? "),
        ("Bob", ">>> "),
        ("print('hi', name)", "hi Bob\n>>> "),
    ];
    let reply = term.run("python3 -q").await;
    assert_eq!(reply.outcome, WAITING, "{reply:?}");
    assert!(reply.output.text.ends_with(">>> "), "{:?}", reply.output.text);
    for (input, shown) in steps {
        let started = Instant::now();
        let reply = answer(&term, input).await;
        assert_eq!(reply.outcome, WAITING, "{input}: {reply:?}");
        assert!(reply.output.text.ends_with(shown), "{input}: {:?}", reply.output.text);
        assert!(started.elapsed() < Duration::from_secs(10), "{input}: {:?}", started.elapsed());
    }
    let reply = term.input("C-d", 10.0).await;
    assert_eq!(reply.exit_code(), Some(0));

    // The same with bash's own `read -p`.
    let reply = term.run("for i in 1 2 3; do read -p \"step $i: \" v; echo \"got $v\"; done").await;
    // `read` is the shell itself reading the terminal.
    let reading = Outcome::WaitingForInput { shell_reading: true };
    assert_eq!((reply.outcome.clone(), reply.output.text.as_str()), (reading.clone(), "step 1: "));
    for (i, next) in [(1, Some("step 2: ")), (2, Some("step 3: ")), (3, None)] {
        let reply = answer(&term, &format!("v{i}")).await;
        match next {
            Some(prompt) => {
                assert_eq!(reply.outcome, reading.clone(), "{reply:?}");
                assert!(reply.output.text.ends_with(prompt), "{:?}", reply.output.text);
            }
            None => assert_eq!(reply.exit_code(), Some(0)),
        }
        assert!(reply.output.text.contains(&format!("got v{i}\n")), "{:?}", reply.output.text);
    }
    term.session.close().await;
}

#[tokio::test]
async fn getpass_reading_dev_tty_is_waiting_for_input() {
    let term = term("getpass").await;
    let reply = term.run("python3 -c 'import getpass; print(len(getpass.getpass()))'").await;
    assert_eq!(reply.outcome, WAITING, "{reply:?}");
    assert_eq!(reply.output.text, "Password: ");
    let reply = answer(&term, "secret").await;
    assert_eq!(reply.exit_code(), Some(0));
    assert!(reply.output.text.ends_with("6\n"), "{:?}", reply.output.text);
    term.session.close().await;
}

#[tokio::test]
async fn every_way_of_waiting_on_the_terminal_counts() {
    // poll, select and epoll on the terminal, through selectors.
    let term = term("selectors").await;
    for selector in ["PollSelector", "SelectSelector", "EpollSelector"] {
        let reply = term
            .run(&format!(
                "python3 -c \"import selectors, sys; s = selectors.{selector}(); \
                 s.register(sys.stdin, selectors.EVENT_READ); print('ready?'); s.select(); \
                 print('got', sys.stdin.readline().strip())\""
            ))
            .await;
        assert_eq!(reply.outcome, WAITING, "{selector}: {reply:?}");
        let reply = answer(&term, "go").await;
        assert!(reply.output.text.ends_with("got go\n"), "{selector}: {:?}", reply.output.text);
    }
    term.session.close().await;
}

#[tokio::test]
async fn a_server_blocked_on_sockets_is_not_waiting_for_input_and_stays_under_its_limit() {
    let term = term("server").await;
    // http.server waits in poll on its socket; the second program in epoll
    // on a socket pair. Neither reads the terminal.
    let programs = [
        "python3 -m http.server 0 --bind 127.0.0.1",
        "python3 -c \"import selectors, socket; s = selectors.EpollSelector(); \
         a, b = socket.socketpair(); s.register(a, selectors.EVENT_READ); print('serving'); \
         s.select()\"",
    ];
    for program in programs {
        let reply = term
            .call(Request {
                call: Call::run(program),
                timeout: Some(Duration::from_secs(2)),
                exec_limit: Some(Duration::from_secs(1)),
                ..Request::default()
            })
            .await;
        assert_eq!(
            reply.outcome,
            Outcome::Running { why: WaitEnded::Timeout(Duration::from_secs(2)) }
        );
        assert!(!matches!(reply.outcome, Outcome::WaitingForInput { .. }), "{program}: {reply:?}");
        // Left unwatched, it is stopped: blocking on a socket is not an
        // exemption from the limit.
        eventually(|| matches!(term.session.activity(), Activity::Finished { .. })).await;
        let reply = term.run("").await;
        assert!(matches!(reply.outcome, Outcome::Killed { .. }), "{reply:?}");
    }
    term.session.close().await;
}

#[tokio::test]
async fn c_c_works_after_input_nobody_reads() {
    let term = term("unread").await;
    let reply = term.run_for("sleep 100", 0.3).await;
    assert_eq!(reply.exit_code(), None);
    // 8 KiB in one line, then lines that would be commands: sleep never
    // reads any of it. The calls come back; what did not fit is reported.
    let reply = term.input(&"x".repeat(8192), 0.5).await;
    assert_eq!(reply.exit_code(), None);
    let lines = "echo INJECTED\n".repeat(600);
    let reply = term.input(&lines, 0.5).await;
    assert_eq!(reply.exit_code(), None);
    // More than the terminal's queues hold (about 68 KiB): the rest is
    // dropped, and the reply says how much.
    let reply = term.input(&"y".repeat(200_000), 0.5).await;
    assert_eq!(reply.exit_code(), None);
    assert!(
        matches!(
            reply.input,
            Some(InputReport::Sent { key: None, delivered, total: 200_001 }) if delivered < 100_000
        ),
        "{:?}",
        reply.input
    );
    let reply = term.input("C-c", 10.0).await;
    assert_eq!(reply.outcome, Outcome::Completed { exit_code: 130 });
    // The discarded input never reaches the shell.
    let reply = term.run("echo after").await;
    assert_eq!(reply.output.text, "after\n");
    assert!(!format!("{reply:?}").contains("INJECTED"), "{reply:?}");
    term.session.close().await;
}

#[tokio::test]
async fn keys_sent_to_an_idle_shell_are_harmless() {
    let term = term("idlekeys").await;
    term.run("export KEPT=1").await;
    let marker = term.cwd().join("typed");
    let typed = format!("touch {}", marker.display());
    let calls = [
        (call("C-c", true), "C-c"),
        (call("C-c", false), "C-c"),
        (call("C-d", true), "C-d"),
        (keys_call(&["ENTER"]), "ENTER"),
        // Text without Enter is not left on the prompt's line either,
        // where the next command would be glued to it.
        (keys_call(&["echo glued", "DOWN"]), "text(10) DOWN"),
        (keys_call(&[&typed, "ENTER"]), "text(0) ENTER"),
    ];
    for (call, described) in calls {
        let reply = term.call(Request::new(call.clone())).await;
        assert!(reply.exit_code().is_some());
        let described = described.replace("text(0)", &format!("text({})", typed.len()));
        assert_eq!(reply.input, Some(InputReport::KeyNotNeeded(described)), "{call:?}");
    }
    // The shell was not touched (C-d would have ended it), and nothing was
    // typed at its prompt.
    assert!(!marker.exists());
    let reply = term.run("echo $KEPT").await;
    assert_eq!(reply.output.text, "1\n");
    assert!(reply.events.is_empty(), "{reply:?}");
    term.session.close().await;
}

/// A list of keys is input like any other: C-c in it interrupts (and is
/// named in the report), and an incomplete command takes a list of C-c
/// alone (discarded) or C-d alone (run), no other keys.
#[tokio::test]
async fn a_list_of_keys_interrupts_and_meets_incomplete_commands() {
    let term = term("keylists").await;
    let reply = term.run_for("sleep 30", 0.3).await;
    assert_eq!(reply.exit_code(), None);
    let reply = term.keys(&["C-c"], 10.0).await;
    assert_eq!(reply.exit_code(), Some(130), "{reply:?}");
    assert!(crate::key_sent(&reply, "C-c"), "{reply:?}");

    assert_eq!(term.run("echo 'open").await.outcome, Outcome::Incomplete);
    for items in [&["ENTER"][..], &["C-c", "C-c"], &["C-d", "x"]] {
        let refused = term.session.execute(
            Request { call: keys_call(items), ..Request::default() },
            tokio_util::sync::CancellationToken::new(),
        );
        let refused = refused.await;
        assert!(matches!(refused, Err(SessionError::KeyWhileIncomplete)), "{items:?}: {refused:?}");
    }
    let reply = term.keys(&["C-c"], 5.0).await;
    assert_eq!(reply.outcome, Outcome::Completed { exit_code: 130 }, "{reply:?}");
    assert!(crate::key_sent(&reply, "C-c"), "{reply:?}");
    term.run("echo 'still open").await;
    let reply = term.keys(&["C-d"], 5.0).await;
    assert!(reply.output.text.contains("unexpected EOF"), "{reply:?}");
    let reply = term.run("echo fresh").await;
    assert_eq!(reply.output.text, "fresh\n", "{reply:?}");
    term.session.close().await;
}

/// Issue 12: each reply is one typed value. A program and the shell's own
/// `read` waiting for input are told apart; a new command while either
/// waits is not executed and the reply says who reads; the input a call
/// sends is reported with the bytes delivered.
#[tokio::test]
async fn who_reads_and_what_was_sent_are_typed() {
    let term = term("typed").await;
    let reply = term.run("python3 -c \"x=input('name? '); print('hello', x)\"").await;
    assert_eq!(reply.outcome, WAITING, "{reply:?}");
    assert_eq!(reply.input, None, "{reply:?}");
    let reply = term.run("echo other").await;
    let program = NotRun::CommandRunning { reading: Some(Reader::Program) };
    let expected = Outcome::NotExecuted { command: "echo other".into(), why: program };
    assert_eq!(reply.outcome, expected, "{reply:?}");
    let reply = answer(&term, "bob").await;
    assert_eq!(reply.outcome, Outcome::Completed { exit_code: 0 }, "{reply:?}");
    assert_eq!(reply.input, Some(InputReport::Sent { key: None, delivered: 4, total: 4 }));
    assert!(reply.output.text.contains("hello bob"), "{reply:?}");

    let reply = term.run("read -p 'name: ' x; echo hi $x").await;
    assert_eq!(reply.outcome, Outcome::WaitingForInput { shell_reading: true }, "{reply:?}");
    let reply = term.run("echo other").await;
    let shell = NotRun::CommandRunning { reading: Some(Reader::Shell) };
    let expected = Outcome::NotExecuted { command: "echo other".into(), why: shell };
    assert_eq!(reply.outcome, expected, "{reply:?}");
    let reply = answer(&term, "C-c").await;
    assert_eq!(reply.outcome, Outcome::Completed { exit_code: 130 }, "{reply:?}");
    assert!(crate::key_sent(&reply, "C-c"), "{reply:?}");
    term.session.close().await;
}
