//! The terminal session: persistence, completion, input, keys, shell death.
//! Regression tests for the reference tool's reproduced bugs cite them as
//! "OpenHands A.N" (shared notes, section 8.A).

use std::time::Duration;

use shellkeep_engine::{Activity, Call, Event, NotRun, Outcome, Request, SessionError, WaitEnded};

use crate::{Term, call, key_sent};

#[tokio::test]
async fn echo_and_exit_codes() {
    let term = Term::new("echo").await;
    let reply = term.run("echo hi").await;
    assert_eq!(reply.output.text, "hi\n");
    assert_eq!(reply.outcome, Outcome::Completed { exit_code: 0 });
    assert_eq!(reply.cwd, term.cwd());
    let reply = term.run("false").await;
    assert_eq!((reply.output.text.as_str(), reply.exit_code()), ("", Some(1)));
    let reply = term.run("nonexistent_command_xyz").await;
    assert!(reply.output.text.contains("nonexistent_command_xyz: command not found"));
    assert_eq!(reply.exit_code(), Some(127));
    let reply = term.run("printf 'no newline'").await;
    assert_eq!(reply.output.text, "no newline");
    term.session.close().await;
}

#[tokio::test]
async fn state_persists_between_commands() {
    let term = Term::new("persist").await;
    term.run("mkdir -p sub/dir && cd sub/dir").await;
    assert_eq!(term.run("pwd").await.output.text, format!("{}/sub/dir\n", term.cwd().display()));
    assert_eq!(term.run("true").await.cwd, term.cwd().join("sub/dir"));
    term.run("export GREETING=hello; greet() { echo \"$GREETING, $1\"; }; alias ll='echo listed'")
        .await;
    assert_eq!(term.run("greet world").await.output.text, "hello, world\n");
    assert_eq!(term.run("ll").await.output.text, "listed\n");
    // A venv-like activation changes PATH and the Python interpreter.
    term.run(
        "mkdir -p venv/bin && printf '#!/bin/sh\\n' > venv/bin/python && chmod +x venv/bin/python",
    )
    .await;
    let reply = term.run("export PATH=\"$PWD/venv/bin:$PATH\"").await;
    assert_eq!(reply.python, Some(term.cwd().join("sub/dir/venv/bin/python")));
    term.session.close().await;
}

#[tokio::test]
async fn commands_of_any_shape() {
    let term = Term::new("shapes").await;
    // History expansion is off (echo A!B), tabs and quotes are kept
    // (OpenHands A.15), and find's \; is not mangled (OpenHands A.4).
    assert_eq!(term.run("echo A!B").await.output.text, "A!B\n");
    assert_eq!(
        term.run("printf '%s\\n' 'tab\there' \"dq'sq\"").await.output.text,
        "tab\there\ndq'sq\n"
    );
    term.run("mkdir -p src && echo 'fn main() {}' > src/a.rs && echo 'x' > src/b.rs").await;
    let reply = term.run("find . -name '*.rs' -exec grep -l fn {} \\;").await;
    assert_eq!((reply.output.text.as_str(), reply.exit_code()), ("./src/a.rs\n", Some(0)));
    // Multi-line blocks run as a whole, with no PS2 prompts in the output.
    let reply = term
        .run("for i in 1 2 3; do\n  if [ $i -gt 1 ]; then\n    echo \"n=$i\"\n  fi\ndone")
        .await;
    assert_eq!(reply.output.text, "n=2\nn=3\n");
    // Several lines run like a script typed into the shell.
    assert_eq!(term.run("echo a\necho b\n\n\necho c").await.output.text, "a\nb\nc\n");
    // A 500-line heredoc, then a command after it.
    let body: String = (0..500).map(|i| format!("line {i}\n")).collect();
    let reply = term.run(&format!("cat <<'EOF' > big.txt\n{body}EOF\nwc -l < big.txt")).await;
    assert_eq!(reply.output.text, "500\n");
    // A 100 KB one-line command.
    let long = "x".repeat(100_000);
    let reply = term.run(&format!("echo {long} | wc -c")).await;
    assert_eq!(reply.output.text, "100001\n");
    term.session.close().await;
}

#[tokio::test]
async fn fake_markers_cannot_end_a_command() {
    // OpenHands A.5: output that imitates the prompt marker.
    let term = Term::new("fake").await;
    let reply = term
        .run("printf '\\e]6973;0000;E;1;0\\a###PS1JSON###\\n{\"exit_code\": \"0\"}\\n###PS1END###\\n'; sleep 0.2; echo real; false")
        .await;
    assert_eq!(reply.exit_code(), Some(1));
    assert!(reply.output.text.ends_with("real\n"), "{:?}", reply.output.text);
    assert!(reply.output.text.contains("###PS1END###"));
    term.session.close().await;
}

#[tokio::test]
async fn awkward_directories_and_strict_mode() {
    // OpenHands A.7 (quotes in the cwd) and A.8 (set -u).
    let term = Term::new("awkward").await;
    let reply = term.run("mkdir -p 'q\"uo\\te' && cd 'q\"uo\\te' && echo in").await;
    assert_eq!(reply.output.text, "in\n");
    assert_eq!(reply.cwd, term.cwd().join("q\"uo\\te"));
    let reply = term.run("set -u; echo strict").await;
    assert_eq!(reply.output.text, "strict\n");
    assert_eq!(term.run("echo still fine").await.output.text, "still fine\n");
    term.session.close().await;
}

#[tokio::test]
async fn a_dead_shell_is_restarted_in_the_same_directory() {
    // OpenHands A.10: exit, set -e, kill -9 $$.
    let term = Term::new("death").await;
    term.run("mkdir -p d && cd d && export LOST=1").await;
    for (command, code) in [("exit 3", 3), ("set -e; false", 1), ("kill -9 $$", 137)] {
        let reply = term.run(command).await;
        assert_eq!(reply.exit_code(), Some(code), "{command}");
        assert!(
            reply.events.iter().any(
                |n| matches!(n, Event::ShellRestarted { cwd, .. } if *cwd == term.cwd().join("d"))
            ),
            "{command}: {:?}",
            reply.events
        );
        let reply = term.run("pwd; echo ${LOST:-gone}").await;
        assert_eq!(reply.output.text, format!("{}/d\ngone\n", term.cwd().display()));
    }
    term.session.close().await;
}

#[tokio::test]
async fn soft_timeout_then_poll_then_reject_then_finish() {
    let term = Term::with("soft", |c| c.no_output_return = Duration::from_millis(700)).await;
    let reply = term.run("echo 1; sleep 1.5; echo 2; sleep 1.5; echo 3").await;
    assert_eq!(
        reply.outcome,
        Outcome::Running { why: WaitEnded::NoNewOutput(Duration::from_millis(700)) }
    );
    assert_eq!((reply.output.text.as_str(), reply.exit_code()), ("1\n", None));
    // A new command is not executed while one runs.
    let reply = term.run("echo never").await;
    assert!(
        matches!(&reply.outcome, Outcome::NotExecuted { command, .. } if command == "echo never")
    );
    // Polling continues where the last reply stopped.
    let mut seen = String::new();
    let mut reply = term.run("").await;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while reply.is_running() {
        assert!(std::time::Instant::now() < deadline, "still running after 30 s: {seen:?}");
        seen.push_str(&reply.output.text);
        reply = term.run("").await;
    }
    seen.push_str(&reply.output.text);
    assert_eq!(seen, "2\n3\n");
    assert!(reply.continued);
    assert_eq!(reply.exit_code(), Some(0));
    assert!(!term.run("echo after").await.output.text.contains("never"));
    term.session.close().await;
}

#[tokio::test]
async fn output_of_a_finished_but_unpolled_command_is_reported_first() {
    // OpenHands A.14.
    let term = Term::new("unpolled").await;
    let reply = term.run_for("sleep 0.3; echo late; probe() { return 4; }; probe", 0.05).await;
    assert_eq!(reply.exit_code(), None);
    crate::eventually(|| {
        matches!(term.session.activity(), Activity::Finished { exit_code: 4, .. })
    })
    .await;
    let reply = term.run("echo next").await;
    let previous = reply.previous.expect("the previous command is reported");
    assert_eq!((previous.output.text.as_str(), previous.exit_code()), ("late\n", Some(4)));
    assert_eq!(reply.output.text, "next\n");
    term.session.close().await;
}

#[tokio::test]
async fn interactive_input_and_keys() {
    let term = Term::new("input").await;
    // Without a timeout: the call comes back as soon as the prompt is up.
    let reply = term.run("python3 -c \"x=input('name? '); print('hello', x)\"").await;
    assert_eq!(reply.outcome, Outcome::WaitingForInput { shell_reading: false });
    assert_eq!(reply.output.text, "name? ");
    let reply = term.input("Bob", 10.0).await;
    assert_eq!(reply.exit_code(), Some(0));
    assert!(reply.output.text.ends_with("hello Bob\n"), "{:?}", reply.output.text);

    // read -p, then a program fed line by line until C-d.
    term.run("read -p 'Enter name: ' n && echo \"Hello $n\"").await;
    assert!(term.input("John", 10.0).await.output.text.ends_with("Hello John\n"));
    term.run("cat > fed.txt").await;
    term.input("line 1", 0.3).await;
    term.input("line 2", 0.3).await;
    let reply = term.input("C-d", 10.0).await;
    assert_eq!(reply.exit_code(), Some(0));
    assert_eq!(term.run("cat fed.txt").await.output.text, "line 1\nline 2\n");

    // C-c interrupts the foreground job, not the shell.
    let reply = term.run_for("export KEPT=yes; sleep 100", 0.3).await;
    assert_eq!(reply.exit_code(), None);
    let reply = term.input("C-c", 10.0).await;
    assert_eq!(reply.exit_code(), Some(130));
    assert!(key_sent(&reply, "C-c"));
    assert_eq!(term.run("echo $KEPT").await.output.text, "yes\n");

    // C-z stops the job and hands the prompt back.
    term.run_for("sleep 100", 0.3).await;
    let reply = term.input("C-z", 10.0).await;
    assert_eq!(reply.exit_code(), Some(148));
    assert!(reply.output.text.contains("Stopped"), "{:?}", reply.output.text);
    assert_eq!(term.run("kill %1").await.exit_code(), Some(0));
    term.session.close().await;
}

#[tokio::test]
async fn nothing_running_means_nothing_to_poll_or_feed() {
    let term = Term::new("idle").await;
    type Expected = fn(&SessionError) -> bool;
    let cases: [(Request, Expected); 4] = [
        (Request::new(Call::Poll), |err| matches!(err, SessionError::NothingToWaitFor)),
        (Request::new(call("hello", true)), |err| {
            matches!(err, SessionError::NothingToSendInputTo)
        }),
        (Request::new(Call::run("echo a\0b")), |err| matches!(err, SessionError::NulByte)),
        // Input with a NUL byte is refused before anything else (a reset
        // with input cannot be asked for at all: `Call` has no such value).
        (Request::new(call("a\0b", true)), |err| matches!(err, SessionError::NulByte)),
    ];
    for (request, expected) in cases {
        let err =
            term.session.execute(request.clone(), Default::default()).await.expect_err("rejected");
        assert!(expected(&err), "{request:?}: {err:?}");
        // The engine's words name no tool argument.
        assert!(!err.to_string().contains("is_input"), "{err}");
    }
    assert_eq!(term.run("echo alive").await.output.text, "alive\n");
    term.session.close().await;
}

#[tokio::test]
async fn reset_starts_a_fresh_shell_in_the_original_directory() {
    let term = Term::new("reset").await;
    term.run("mkdir -p elsewhere && cd elsewhere && export GONE=1").await;
    let reply = term.call(Request::new(Call::Reset { then: None })).await;
    assert!(reply.events.contains(&Event::Reset));
    assert_eq!(reply.cwd, term.cwd());
    let reply = term
        .call(Request::new(Call::Reset { then: Some("echo ${GONE:-unset}; pwd".into()) }))
        .await;
    assert_eq!(reply.output.text, format!("unset\n{}\n", term.cwd().display()));
    // Reset while a command runs stops it.
    term.run_for("sleep 100", 0.2).await;
    let reply = term.call(Request::new(Call::Reset { then: Some("echo fresh".into()) })).await;
    assert_eq!(reply.output.text, "fresh\n");
    term.session.close().await;
}

#[tokio::test]
async fn progress_bars_and_colours_render_as_a_person_sees_them() {
    let term = Term::new("render").await;
    let reply = term.run("printf '10%%\\r50%%\\r100%%\\n'; printf '\\e[31mred\\e[0m\\n'").await;
    assert_eq!(reply.output.text, "100%\nred\n");
    term.session.close().await;
}

#[tokio::test]
async fn large_output_is_cut_and_kept_whole() {
    let term = Term::with("large", |c| c.output_cap = 1000).await;
    let reply = term.run("seq 1 5000").await;
    assert!(reply.output.truncated);
    assert!(reply.output.text.starts_with("1\n2\n3\n"));
    assert!(reply.output.text.ends_with("4999\n5000\n"));
    let path = reply.output.full_output_path.expect("the command's log is named");
    let full = std::fs::read_to_string(&path).expect("log");
    let expected: String = (1..=5000).map(|i| format!("{i}\n")).collect();
    assert_eq!(full, expected);
    // The log is the only copy: one file in the output directory.
    let files: Vec<_> = std::fs::read_dir(path.parent().expect("dir")).expect("dir").collect();
    assert_eq!(files.len(), 1, "{files:?}");
    assert_eq!(reply.output.omitted_chars as usize, expected.len() - 1000);
    term.session.close().await;
}

#[tokio::test]
async fn pagers_do_not_take_over_the_terminal() {
    let term = Term::new("pager").await;
    let reply = term.run("git init -q repo && cd repo && git -c user.name=t -c user.email=t@t commit -q --allow-empty -m first && git log -p | head -1").await;
    assert!(reply.output.text.starts_with("commit "), "{:?}", reply.output.text);
    assert_eq!(reply.exit_code(), Some(0));
    term.session.close().await;
}

#[tokio::test]
async fn a_chatty_command_still_hands_control_back() {
    // OpenHands A.6: output that never stops must not block the call.
    let term = Term::with("chatty", |c| c.max_wait = Duration::from_millis(800)).await;
    let reply = term.run("while :; do echo tick; sleep 0.1; done").await;
    assert_eq!(
        reply.outcome,
        Outcome::Running { why: WaitEnded::MaxWait(Duration::from_millis(800)) }
    );
    assert!(reply.output.text.starts_with("tick\n"));
    assert_eq!(term.input("C-c", 10.0).await.exit_code(), Some(130));
    term.session.close().await;
}

#[tokio::test]
async fn the_terminal_has_a_real_size_and_type() {
    // OpenHands A.9: a 0x0 PTY made programs fall back and wrap badly.
    let term = Term::new("size").await;
    assert_eq!(term.run("stty size; echo $TERM").await.output.text, "50 120\nxterm-256color\n");
    term.session.close().await;
}

#[tokio::test]
async fn the_first_command_never_races_the_shell() {
    // OpenHands A.3: the first command's output was lost to a stale prompt.
    for round in 0..3 {
        let term = Term::new(&format!("first{round}")).await;
        assert_eq!(term.run("echo first").await.output.text, "first\n");
        term.session.close().await;
    }
}

/// Issue 7, 1.3: an unfinished line is cut to the cap in every reply, and a
/// later reply does not show again what an earlier one showed; the full
/// output still holds the whole line.
#[tokio::test]
async fn an_unfinished_line_is_capped_and_not_sent_twice() {
    let term = Term::with("longline", |c| {
        c.output_cap = 1000;
        c.no_output_return = Duration::from_millis(700);
    })
    .await;
    let size = 2_000_000;
    let command = format!("head -c {size} /dev/zero | tr '\\0' x; read answer; echo end $answer");
    let reply = term.run(&command).await;
    assert!(reply.is_running(), "{:?}", reply.outcome);
    let text = &reply.output.text;
    assert!(text.len() < 2000, "the reply is bounded: {} bytes", text.len());
    assert!(text.starts_with("xxxxx") && text.ends_with("xxxxx"), "{text}");
    assert!(text.contains("characters omitted"), "{text}");
    assert!(reply.output.truncated);
    // The renderer hands a long line on in pieces: what this reply left out
    // of them is in the command's log, which it names.
    let first_path = reply.output.full_output_path.clone().expect("the log is named");

    // Polling again: nothing new, so nothing is shown again.
    let reply = term.call(Request::default()).await;
    assert!(reply.is_running(), "{:?}", reply.outcome);
    assert_eq!(reply.output.text, "", "the line was not sent again");

    // The line ends: its new part is shown, and the file has all of it.
    let reply = term.input("42", 10.0).await;
    assert_eq!(reply.exit_code(), Some(0), "{reply:?}");
    assert!(!reply.output.text.contains("xxx"), "{:?}", reply.output.text);
    assert!(reply.output.text.ends_with("end 42\n"), "{:?}", reply.output.text);
    // The reply where the line ends names the same log, which holds the
    // whole line, each byte once.
    let last_path = reply.output.full_output_path.clone().expect("the log is named");
    assert_eq!(first_path, last_path, "one file for the command");
    let full = std::fs::read_to_string(last_path).expect("file");
    assert_eq!(
        full.len(),
        size + "42\nend 42\n".len(),
        "{:?}",
        &full[full.len().saturating_sub(50)..]
    );
    assert!(full.starts_with(&"x".repeat(size)), "{} bytes", full.len());
    assert!(full.ends_with("end 42\n"), "{:?}", &full[full.len().saturating_sub(50)..]);
    term.session.close().await;
}

/// A prompt printed without a newline is shown once: the reply after the
/// answer shows only what follows it.
#[tokio::test]
async fn a_growing_line_shows_only_its_new_part() {
    let term = Term::with("growing", |c| c.no_output_return = Duration::from_millis(500)).await;
    let reply =
        term.run("printf 'step one'; read a; printf ', step two'; read b; echo ' done'").await;
    assert_eq!(reply.output.text, "step one");
    let reply = term.input("1", 1.0).await;
    assert_eq!(reply.output.text, "1\n, step two", "{reply:?}");
    let reply = term.input("2", 10.0).await;
    assert_eq!((reply.output.text.as_str(), reply.exit_code()), ("2\n done\n", Some(0)));
    term.session.close().await;
}

/// A prompt a reply showed is not shown again when the line it is on ends,
/// even though the committed line has lost its trailing blank.
#[tokio::test]
async fn a_shown_prompt_is_not_repeated_when_its_line_ends() {
    let term = Term::new("prompt-again").await;
    let reply = term.run_for("while read -p 'ask> ' l; do echo got=$l; done", 3.0).await;
    assert!(reply.output.text.ends_with("ask> "), "{reply:?}");
    let reply = term.input("a", 3.0).await;
    assert_eq!(reply.output.text, "a\ngot=a\nask> ", "{reply:?}");
    let reply = term.keys(&["ENTER"], 3.0).await;
    assert_eq!(reply.output.text, "\ngot=\nask> ", "{reply:?}");
    let reply = term.input("C-c", 10.0).await;
    assert_eq!(reply.exit_code(), Some(130), "{reply:?}");
    term.session.close().await;
}

/// A program the shell still waits for can hand the terminal's foreground
/// to the shell's group and take it back once a line is typed: after the
/// shell reported an end early (code in the shell is the shell), the next
/// command must still not reach that program, since the shell is not
/// reading its terminal. Found by a hostile review of issue 11.
#[tokio::test]
async fn a_program_that_hands_the_foreground_back_gets_no_command() {
    let term = Term::new("foreground-back").await;
    let captured = term.cwd().join("captured");
    let program = "import os, signal, sys, time\n\
        signal.signal(signal.SIGTTOU, signal.SIG_IGN)\n\
        signal.signal(signal.SIGTTIN, signal.SIG_IGN)\n\
        tty = os.open('/dev/tty', os.O_RDWR)\n\
        me = os.getpgrp()\n\
        os.tcsetpgrp(tty, os.getpgid(os.getppid()))\n\
        open('handed', 'w').close()\n\
        while not os.path.exists('release'):\n\
        \x20   time.sleep(0.01)\n\
        os.tcsetpgrp(tty, me)\n\
        import select\n\
        ready, _, _ = select.select([tty], [], [], 2)\n\
        open('captured', 'wb').write(os.read(tty, 4096) if ready else b'')\n\
        open('done', 'w').close()\n";
    std::fs::write(term.cwd().join("hands.py"), program).expect("write the program");
    let reply = term
        .run_for(
            "printf 'E;%s;0;;0' \"$__sk_seq\" >&62; __sk_mark \"E;$__sk_seq;0\"; \
             python3 hands.py; exit 7",
            20.0,
        )
        .await;
    assert!(reply.exit_code().is_some(), "the shell's own claim is believed: {reply:?}");
    // Wait until the program has handed the foreground to the shell.
    wait_for_file(&term.cwd().join("handed")).await;
    let reply = term.run_for("echo SECRET-COMMAND-TEXT > typed", 5.0).await;
    std::fs::write(term.cwd().join("release"), "").expect("release the program");
    assert!(reply.is_running(), "{reply:?}");
    assert!(matches!(reply.outcome, Outcome::NotExecuted { .. }), "{reply:?}");
    assert!(
        matches!(
            &reply.outcome,
            Outcome::NotExecuted { why: NotRun::NotAtPrompt { command_line, .. }, .. }
                if command_line.contains("hands.py")
        ),
        "{reply:?}"
    );
    // The program takes the terminal back and finds nothing typed.
    wait_for_file(&term.cwd().join("done")).await;
    let stolen = std::fs::read_to_string(&captured).unwrap_or_default();
    assert!(!stolen.contains("__sk_pre"), "a command line was typed into the program: {stolen}");
    assert!(!term.cwd().join("typed").exists());
    term.session.close().await;
}

/// Waits (with a deadline) until `path` exists.
async fn wait_for_file(path: &std::path::Path) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !path.exists() {
        assert!(std::time::Instant::now() < deadline, "{} never appeared", path.display());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
