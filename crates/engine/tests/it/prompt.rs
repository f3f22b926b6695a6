//! Waiting for input means a prompt (issue 14): a job that waits on the
//! terminal together with something still producing (a child's pipe, a
//! socket with a live peer) or with a process still at work is not a
//! prompt, and a call hands it back as running after a short quiet; real
//! prompts (REPLs, `read -s`, password prompts on `/dev/tty`) still come
//! back within about a second; full-screen programs that redraw for ever
//! (`watch`, `tmux`) hand control back once drawn, while a chatty command
//! keeps the silence rule. Fake programs live in `tests/fake/`.

use std::path::PathBuf;
use std::time::Duration;

use shellkeep_engine::{Call, NotRun, Outcome, Reply, Request, WaitEnded};

use crate::{Term, call, installed, poll_until};

const WAITING: Outcome = Outcome::WaitingForInput { shell_reading: false };

/// How long a job that may still be at work stays quiet before a call
/// hands it back as running (`timing::UNSURE_QUIET`).
const UNSURE: Outcome = Outcome::Running { why: WaitEnded::NoNewOutput(Duration::from_secs(3)) };

/// A terminal whose calls without a timeout would otherwise wait 20 s for
/// silence (and 50 s in all): a reply in less says why it came early.
async fn term(name: &str) -> Term {
    Term::with(name, |c| c.no_output_return = Duration::from_secs(20)).await
}

/// A fake program of `tests/fake/`, quoted for the shell.
fn fake(name: &str) -> String {
    let path: PathBuf = [env!("CARGO_MANIFEST_DIR"), "tests", "fake", name].iter().collect();
    format!("'{}'", path.display())
}

/// Sends `text` as input with no timeout, as an agent answering a prompt.
async fn answer(term: &Term, text: &str) -> Reply {
    term.call(Request::new(call(text, true))).await
}

/// The reply that reports the command's end: `last` if it does, else the
/// first poll that does.
async fn until_done(term: &Term, last: Reply) -> Reply {
    if last.exit_code().is_some() {
        return last;
    }
    poll_until(async || term.run_for("", 5.0).await, |reply| reply.exit_code().is_some()).await
}

/// Runs `command` and polls it to its end as an agent does, failing if any
/// reply claims it waits for input; returns all it printed and the last
/// reply.
async fn run_to_the_end_without_a_prompt(term: &Term, command: &str) -> (String, Reply) {
    let mut reply = term.run(command).await;
    let mut text = String::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        assert!(!matches!(reply.outcome, Outcome::WaitingForInput { .. }), "{reply:?}");
        text.push_str(&reply.output.text);
        if reply.exit_code().is_some() {
            return (text, reply);
        }
        assert!(std::time::Instant::now() < deadline, "not ended within 60 s: {reply:?}");
        reply = term.run_for("", 10.0).await;
    }
}

#[tokio::test]
async fn apt_polling_the_terminal_while_dpkg_works_is_not_a_prompt() {
    let term = term("apt").await;
    // Silent 1.2 s between lines: long enough for a look to find apt in
    // its poll on the terminal, short beside the quiet fallback.
    let apt = format!("python3 {} 3 1.2", fake("apt.py"));
    let (text, reply) = run_to_the_end_without_a_prompt(&term, &apt).await;
    assert_eq!(reply.exit_code(), Some(0), "{reply:?}");
    for line in ["package-0", "package-2", "Processing triggers for man-db", "Done"] {
        assert!(text.contains(line), "{line}: {text:?}");
    }
    assert_eq!(term.run("echo next").await.output.text, "next\n");

    // dpkg silent for longer than the quiet fallback, after a finished
    // line: no question was asked, so the call keeps waiting as for any
    // command at work and sees apt to its end.
    let (text, reply) =
        run_to_the_end_without_a_prompt(&term, &format!("python3 {} 1 5", fake("apt.py"))).await;
    assert_eq!(reply.exit_code(), Some(0), "{reply:?}");
    assert!(text.ends_with("Done\n"), "{text:?}");

    // A call whose timeout ends while dpkg is silent comes back as running,
    // never as a prompt; a new command is refused only because apt runs,
    // and no one is said to read.
    let reply = term.run_for(&format!("python3 {} 1 6", fake("apt.py")), 2.0).await;
    assert!(matches!(reply.outcome, Outcome::Running { .. }), "{reply:?}");
    let reply = term.run("echo next").await;
    let running = NotRun::CommandRunning { reading: None };
    assert_eq!(
        reply.outcome,
        Outcome::NotExecuted { command: "echo next".into(), why: running },
        "{reply:?}"
    );
    // It still takes input, as apt passes keys to dpkg.
    let reply = term.input("yes", 1.0).await;
    assert!(reply.output.text.contains("typed: yes"), "{reply:?}");
    let reply = until_done(&term, reply).await;
    assert_eq!(reply.exit_code(), Some(0), "{reply:?}");
    assert!(reply.output.text.ends_with("Done\n"), "{reply:?}");
    assert_eq!(term.run("echo next").await.output.text, "next\n");
    term.session.close().await;
}

#[tokio::test]
async fn pip_and_npm_waiting_on_their_children_are_not_prompts() {
    let term = term("children").await;
    // pip: the parent reads its child's pipe; both have the terminal as
    // stdin; the child pauses between lines.
    let pip = r#"python3 -c 'import subprocess, sys
child = subprocess.Popen(["sh", "-c", "for i in 1 2 3; do echo building $i; sleep 1; done"], stdout=subprocess.PIPE)
for line in child.stdout: print("pip:", line.decode().strip(), flush=True)
sys.exit(child.wait())'"#;
    let (text, reply) = run_to_the_end_without_a_prompt(&term, pip).await;
    assert_eq!(reply.exit_code(), Some(0), "{reply:?}");
    assert!(text.ends_with("pip: building 3\n"), "{text:?}");
    // npm: node's event loop waits on the terminal (stdin is read) and on
    // its child's pipe in one epoll set.
    if installed("node") {
        let npm = r#"node -e "const c = require('child_process').spawn('sh', ['-c', 'for i in 1 2 3; do echo step \$i; sleep 1; done'], {stdio: ['inherit', 'pipe', 'inherit']}); process.stdin.on('data', d => console.log('typed', String(d).trim())); c.stdout.on('data', d => process.stdout.write('npm: ' + d)); c.on('exit', code => process.exit(code));""#;
        let (text, reply) = run_to_the_end_without_a_prompt(&term, npm).await;
        assert_eq!(reply.exit_code(), Some(0), "{reply:?}");
        assert!(text.ends_with("npm: step 3\n"), "{text:?}");
    }
    term.session.close().await;
}

#[tokio::test]
async fn repls_and_password_prompts_are_still_prompts() {
    let term = term("repls").await;
    let reply = term.run("python3 -i -q").await;
    assert_eq!(reply.outcome, WAITING, "{reply:?}");
    let reply = answer(&term, "print(6 * 7)").await;
    assert_eq!(reply.outcome, WAITING, "{reply:?}");
    assert!(reply.output.text.ends_with("42\n>>> "), "{:?}", reply.output.text);
    assert_eq!(term.input("C-d", 10.0).await.exit_code(), Some(0));

    // asyncio's REPL: its event loop waits on a socket pair it holds both
    // ends of, in one thread, while another reads the terminal.
    let reply = term.run("python3 -m asyncio").await;
    assert_eq!(reply.outcome, WAITING, "{reply:?}");
    assert!(reply.output.text.ends_with(">>> "), "{:?}", reply.output.text);
    let reply = answer(&term, "await asyncio.sleep(0, result=5)").await;
    assert_eq!(reply.outcome, WAITING, "{reply:?}");
    assert!(reply.output.text.contains('5'), "{:?}", reply.output.text);
    let reply = term.input("C-d", 10.0).await;
    until_done(&term, reply).await;

    if installed("node") {
        // libuv waits on the terminal, its own signal pipe and an eventfd.
        let reply = term.run("node").await;
        assert_eq!(reply.outcome, WAITING, "{reply:?}");
        let reply = answer(&term, "6 * 7").await;
        assert_eq!(reply.outcome, WAITING, "{reply:?}");
        assert!(reply.output.text.contains("42"), "{:?}", reply.output.text);
        let reply = term.input(".exit", 10.0).await;
        until_done(&term, reply).await;
    }

    let reply = term.run("read -s -p Password: pw; echo; echo ${#pw}").await;
    assert_eq!(reply.outcome, Outcome::WaitingForInput { shell_reading: true }, "{reply:?}");
    assert_eq!(reply.output.text, "Password:");
    let reply = answer(&term, "hunter2").await;
    assert_eq!(reply.exit_code(), Some(0));
    assert!(reply.output.text.ends_with("7\n"), "{:?}", reply.output.text);

    // ssh and sudo ask on /dev/tty with echo off, whatever stdin is.
    let ssh = "echo piped | python3 -c \"import getpass, sys; \
               p = getpass.getpass('me@host password: '); print(len(p), sys.stdin.read().strip())\"";
    let reply = term.run(ssh).await;
    assert_eq!(reply.outcome, WAITING, "{reply:?}");
    assert_eq!(reply.output.text, "me@host password: ");
    let reply = answer(&term, "secret").await;
    assert_eq!(reply.exit_code(), Some(0));
    assert!(reply.output.text.ends_with("6 piped\n"), "{:?}", reply.output.text);

    // A prompt whose output goes down a pipeline: the reader's own pipe
    // to `cat` is not something else producing.
    let reply = term.run("python3 -c \"print('hi', input('name? '))\" | cat").await;
    assert_eq!(reply.outcome, WAITING, "{reply:?}");
    let reply = answer(&term, "Bob").await;
    assert!(reply.output.text.contains("hi Bob"), "{reply:?}");

    // A writer blocked on a full pipe waits for its reader, as `git log`
    // waits for `less`: the reader at its prompt is at a prompt.
    let reply = term
        .run(
            "seq 1 1000000 | python3 -c \"import sys; sys.stdin.readline(); \
              print('got', open('/dev/tty').readline().strip())\"",
        )
        .await;
    assert_eq!(reply.outcome, WAITING, "{reply:?}");
    let reply = answer(&term, "q").await;
    assert!(reply.output.text.contains("got q"), "{reply:?}");
    term.session.close().await;
}

#[tokio::test]
async fn a_socket_or_pty_with_a_live_peer_is_not_a_prompt_and_a_pipe_at_its_end_is() {
    let term = term("sets").await;
    let waits_on = fake("waits_on.py");
    for (kind, expected) in [
        ("socket", UNSURE),
        ("pty", UNSURE),
        ("eof-pipe", WAITING),
        ("eof-pipe-edge", WAITING),
        ("self-pipe", WAITING),
    ] {
        let reply = term.run(&format!("python3 {waits_on} {kind}")).await;
        assert_eq!(reply.outcome, expected, "{kind}: {reply:?}");
        assert!(reply.output.text.starts_with("ready"), "{kind}: {reply:?}");
        let reply = term.input("hello", 10.0).await;
        assert_eq!(reply.exit_code(), Some(0), "{kind}: {reply:?}");
        assert!(reply.output.text.ends_with("got hello\n"), "{kind}: {reply:?}");
    }
    term.session.close().await;
}

/// An attacker's view: a command that keeps a pipe open to look busy for
/// ever, or a job with a process asleep beside the reader, only delays the
/// answer until the quiet fallback; no call waits past its own timeout.
#[tokio::test]
async fn faking_busy_only_delays_the_answer_to_the_quiet_fallback() {
    let term = term("fakebusy").await;
    let command = format!("python3 {} busy-pipe", fake("waits_on.py"));
    let reply = term.run(&command).await;
    assert_eq!(reply.outcome, UNSURE, "{reply:?}");
    let reply = term.input("C-c", 10.0).await;
    assert!(reply.exit_code().is_some(), "{reply:?}");
    // With a timeout the call still comes back at the fallback.
    let reply = term
        .call(Request {
            call: Call::run(&command),
            timeout: Some(Duration::from_secs(15)),
            ..Request::default()
        })
        .await;
    assert_eq!(reply.outcome, UNSURE, "{reply:?}");
    let reply = term.input("answer", 10.0).await;
    assert!(reply.output.text.ends_with("got answer\n"), "{reply:?}");

    // A process of the job asleep (not waiting on anything) beside one
    // that reads /dev/tty: the job is busy.
    let reply = term
        .run(
            "{ sleep 60; } | python3 -c \"import sys; sys.stdout.write('answer? '); \
             sys.stdout.flush(); print('got', open('/dev/tty').readline().strip())\"",
        )
        .await;
    assert_eq!(reply.outcome, UNSURE, "{reply:?}");
    let reply = term.input("x", 2.0).await;
    assert!(reply.output.text.contains("got x"), "{reply:?}");
    let reply = term.input("C-c", 10.0).await;
    assert!(reply.exit_code().is_some(), "{reply:?}");

    // The same after a finished line: no question was asked, so the call's
    // own timeout decides, and it holds.
    let reply = term
        .run_for(
            "{ sleep 60; } | python3 -c \"print('working', flush=True); \
             print('got', open('/dev/tty').readline().strip())\"",
            2.0,
        )
        .await;
    assert_eq!(
        reply.outcome,
        Outcome::Running { why: WaitEnded::Timeout(Duration::from_secs(2)) },
        "{reply:?}"
    );
    let reply = term.input("C-c", 10.0).await;
    assert!(reply.exit_code().is_some(), "{reply:?}");
    term.session.close().await;
}

#[tokio::test]
async fn watch_redrawing_for_ever_hands_control_back_and_c_c_ends_it() {
    if !installed("watch") {
        return;
    }
    let term = term("watch").await;
    let reply = term.run("watch -n 0.5 date").await;
    assert_eq!(reply.outcome, Outcome::Running { why: WaitEnded::FullScreen }, "{reply:?}");
    assert!(reply.screen, "{reply:?}");
    assert!(reply.output.text.contains("Every 0.5s"), "{:?}", reply.output.text);
    // A poll comes back the same way.
    let reply = term.run("").await;
    assert_eq!(reply.outcome, Outcome::Running { why: WaitEnded::FullScreen }, "{reply:?}");
    let reply = term.input("C-c", 10.0).await;
    assert!(reply.exit_code().is_some(), "{reply:?}");
    assert_eq!(term.run("echo after").await.output.text, "after\n");
    term.session.close().await;
}

/// A full screen drawn once, with the program at work behind it, is
/// handed back as running once still, and nothing it shows or prints after
/// is lost: the end comes with a poll.
#[tokio::test]
async fn a_still_full_screen_is_handed_back_and_loses_nothing() {
    let term = term("drawnonce").await;
    let reply =
        term.run("printf '\\e[?1049h'; echo drawn; sleep 5; echo IMPORTANT; (exit 3)").await;
    assert_eq!(reply.outcome, Outcome::Running { why: WaitEnded::FullScreen }, "{reply:?}");
    assert!(reply.screen && reply.output.text.contains("drawn"), "{reply:?}");
    let reply = until_done(&term, reply).await;
    assert_eq!(reply.exit_code(), Some(3), "{reply:?}");
    assert!(reply.output.text.ends_with("IMPORTANT\n"), "{:?}", reply.output.text);
    term.session.close().await;
}

#[tokio::test]
async fn tmux_starts_hands_control_back_and_exit_ends_it() {
    if !installed("tmux") {
        return;
    }
    let term = term("tmux").await;
    // A server of its own, without the user's configuration.
    let socket = format!("shellkeep-it-{}", std::process::id());
    let reply = term.run(&format!("SHELL=/bin/sh tmux -L {socket} -f /dev/null new-session")).await;
    // Its client waits on its server, which reads the terminal: the screen
    // is drawn, then still.
    assert_eq!(reply.outcome, Outcome::Running { why: WaitEnded::FullScreen }, "{reply:?}");
    assert!(reply.screen, "{reply:?}");
    let reply = answer(&term, "echo inside-$((6 * 7))").await;
    assert_eq!(reply.outcome, Outcome::Running { why: WaitEnded::FullScreen }, "{reply:?}");
    assert!(reply.output.text.contains("inside-42"), "{reply:?}");
    let reply = term.input("exit", 1.0).await;
    let reply = until_done(&term, reply).await;
    assert_eq!(reply.exit_code(), Some(0), "{reply:?}");
    assert_eq!(term.run("echo after").await.output.text, "after\n");

    // Detached with C-b d: the client ends, the server keeps the session.
    let tmux = format!("SHELL=/bin/sh tmux -L {socket} -f /dev/null");
    let reply = term.run(&format!("{tmux} new-session")).await;
    assert_eq!(reply.outcome, Outcome::Running { why: WaitEnded::FullScreen }, "{reply:?}");
    term.input("C-b", 1.0).await;
    // Text gets Enter, which reaches the shell once tmux has gone.
    let reply = term.input("d", 5.0).await;
    let reply = until_done(&term, reply).await;
    assert_eq!(reply.exit_code(), Some(0), "{reply:?}");
    assert!(reply.output.text.contains("detached"), "{reply:?}");
    let reply = term.run(&format!("{tmux} kill-server; echo killed")).await;
    assert!(reply.output.text.ends_with("killed\n"), "{reply:?}");
    term.session.close().await;
}

#[tokio::test]
async fn a_chatty_command_still_waits_for_the_silence_rule_or_its_timeout() {
    let term = Term::with("chatty", |c| {
        c.no_output_return = Duration::from_secs(20);
        c.max_wait = Duration::from_secs(4);
    })
    .await;
    let reply = term.run("while :; do date; sleep 0.5; done").await;
    assert_eq!(reply.outcome, Outcome::Running { why: WaitEnded::MaxWait(Duration::from_secs(4)) });
    let reply = term.run_for("", 2.0).await;
    assert_eq!(reply.outcome, Outcome::Running { why: WaitEnded::Timeout(Duration::from_secs(2)) });
    let reply = term.input("C-c", 10.0).await;
    assert!(reply.exit_code().is_some(), "{reply:?}");
    term.session.close().await;
}
