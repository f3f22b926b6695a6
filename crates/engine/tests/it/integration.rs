//! The shell integration survives what commands do to the shell: `exec
//! bash`, nested shells, `PROMPT_COMMAND=`, `PS1`, `set -x`, traps, `stty`;
//! commands behave as if typed at a prompt; incomplete input waits for the
//! rest; the nonce stays out of files, names, traces and the environment.

use std::time::Duration;

use shellkeep_engine::LogPage;
use shellkeep_engine::{Activity, Call, Event, NotRun, Outcome, Reader, Reply, Request, WaitEnded};

use crate::{Term, call, eventually, poll_until};

/// These tests start nested shells (some read the user's start-up files);
/// two at a time keep the machine responsive for the timing-sensitive
/// tests that run alongside.
static GATE: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(2);

/// A terminal whose shell starts at `SHLVL` 2 whatever the environment the
/// tests run in (CI runs them under a few levels of bash).
async fn fixed_shlvl(name: &str) -> Term {
    Term::with(name, |c| c.env.push(("SHLVL".to_owned(), "1".to_owned()))).await
}

/// Runs `command` and asserts it completed with `code` and `output`.
async fn expect(term: &Term, command: &str, output: &str, code: i32) {
    let reply = term.run_for(command, 20.0).await;
    assert_eq!(
        (reply.output.text.as_str(), reply.outcome.clone()),
        (output, Outcome::Completed { exit_code: code }),
        "{command:?}: {reply:?}"
    );
}

#[tokio::test]
async fn exec_bash_keeps_the_session_working() {
    let _gate = GATE.acquire().await.expect("gate");
    let term = Term::new("exec").await;
    term.run("mkdir -p sub && cd sub && export KEEP=1").await;
    let reply = term.run_for("exec bash --norc", 20.0).await;
    assert_eq!(reply.outcome, Outcome::Completed { exit_code: 0 }, "{reply:?}");
    assert!(reply.events.contains(&Event::IntegrationReinstalled), "{reply:?}");
    assert_eq!(reply.output.text, "");
    expect(&term, "echo $KEEP; false", "1\n", 1).await;
    expect(&term, "cd .. && pwd", &format!("{}\n", term.cwd().display()), 0).await;
    assert_eq!(term.run("true").await.cwd, term.cwd());
    // Twice in a row, and with the user's start-up files.
    let reply = term.run_for("exec bash", 20.0).await;
    assert!(reply.events.contains(&Event::IntegrationReinstalled), "{reply:?}");
    expect(&term, "echo again", "again\n", 0).await;
    // A shell that traces and echoes everything it reads shows nothing of
    // the integration script.
    let nonce = term.run("echo $__sk_nonce").await.output.text.trim().to_owned();
    let reply = term.run_for("exec bash --norc -xv", 20.0).await;
    assert!(reply.events.contains(&Event::IntegrationReinstalled), "{reply:?}");
    assert!(!reply.output.text.contains(&nonce), "{:?}", reply.output.text);
    assert!(!reply.output.text.contains("__sk"), "{:?}", reply.output.text);
    let reply = term.run("echo traced").await;
    assert!(reply.output.text.contains("traced\n"), "{reply:?}");
    assert!(!reply.output.text.contains(&nonce), "{:?}", reply.output.text);
    term.session.close().await;
}

#[tokio::test]
async fn a_nested_shell_has_full_command_semantics_and_exit_returns() {
    let _gate = GATE.acquire().await.expect("gate");
    let term = fixed_shlvl("nested").await;
    term.run("OUTER=1; mkdir -p a b").await;
    let reply = term.run_for("echo before; bash --norc", 20.0).await;
    assert_eq!(reply.outcome, Outcome::Completed { exit_code: 0 }, "{reply:?}");
    assert!(reply.events.contains(&Event::NestedShellStarted), "{reply:?}");
    assert_eq!(reply.output.text, "before\n");
    // Inside: exit codes, cwd, its own variables.
    expect(&term, "echo ${OUTER:-unset}; (exit 4)", "unset\n", 4).await;
    let reply = term.run("cd a").await;
    assert_eq!(reply.cwd, term.cwd().join("a"));
    // Nested twice.
    let reply = term.run_for("bash --norc", 20.0).await;
    assert!(reply.events.contains(&Event::NestedShellStarted), "{reply:?}");
    expect(&term, "cd ../b && echo $SHLVL", "4\n", 0).await;
    // exit returns one level, with the exit code it was given.
    let reply = term.run_for("exit 5", 20.0).await;
    assert_eq!(reply.outcome, Outcome::Completed { exit_code: 5 }, "{reply:?}");
    assert!(reply.events.contains(&Event::NestedShellExited { status: 5 }), "{reply:?}");
    assert_eq!(reply.cwd, term.cwd().join("a"));
    expect(&term, "echo $SHLVL", "3\n", 0).await;
    let reply = term.run_for("exit", 20.0).await;
    assert_eq!(reply.exit_code(), Some(0), "{reply:?}");
    assert!(reply.events.contains(&Event::NestedShellExited { status: 0 }), "{reply:?}");
    // The outer shell kept its state and works as before.
    expect(&term, "echo $OUTER $SHLVL; pwd", &format!("1 2\n{}\n", term.cwd().display()), 0).await;
    assert!(
        !term.run("true").await.events.iter().any(|e| matches!(e, Event::ShellRestarted { .. }))
    );
    term.session.close().await;
}

#[tokio::test]
async fn clearing_the_prompt_settings_does_not_wedge_the_session() {
    let _gate = GATE.acquire().await.expect("gate");
    let term = Term::new("prompt").await;
    for command in [
        "PROMPT_COMMAND=",
        "unset PROMPT_COMMAND",
        "PROMPT_COMMAND='echo user-hook'",
        "PS1='custom> '; PS2='more> '",
        "PS0='before: '",
    ] {
        let reply = term.run_for(command, 20.0).await;
        assert_eq!(reply.exit_code(), Some(0), "{command}: {reply:?}");
        let reply = term.run_for("echo alive; false", 20.0).await;
        assert_eq!(reply.exit_code(), Some(1), "after {command}: {reply:?}");
        assert!(reply.output.text.contains("alive\n"), "after {command}: {reply:?}");
        assert!(!reply.output.text.contains("custom>"), "{reply:?}");
        assert!(reply.idle_output.is_none(), "{reply:?}");
    }
    // Clearing PROMPT_COMMAND clears the user's hook, not ours.
    expect(&term, "PROMPT_COMMAND=", "", 0).await;
    expect(&term, "true", "", 0).await;
    // Hooks appended to ours, as `direnv hook bash` or bash-preexec do, in
    // a string or an array: they run once, before our end marker.
    expect(&term, "PROMPT_COMMAND=\"echo hook1;$PROMPT_COMMAND\"", "hook1\n", 0).await;
    expect(&term, "true", "hook1\n", 0).await;
    expect(&term, "PROMPT_COMMAND=\"$PROMPT_COMMAND; echo hook2\"", "hook1\nhook2\n", 0).await;
    expect(&term, "PROMPT_COMMAND=(\"$PROMPT_COMMAND\" 'echo hook3')", "hook1\nhook2\nhook3\n", 0)
        .await;
    expect(&term, "true", "hook1\nhook2\nhook3\n", 0).await;
    expect(&term, "PROMPT_COMMAND=", "", 0).await;
    // Standard output sent elsewhere for good.
    expect(&term, "exec 3>&1 >/dev/null", "", 0).await;
    expect(&term, "echo gone; echo kept >&3", "kept\n", 0).await;
    expect(&term, "exec >&3 3>&-", "", 0).await;
    // PROMPT_COMMAND cleared by a command that is then interrupted.
    term.run_for("PROMPT_COMMAND=; sleep 100", 0.5).await;
    let reply = term.input("C-c", 20.0).await;
    assert_eq!(reply.exit_code(), Some(130), "{reply:?}");
    expect(&term, "echo still", "still\n", 0).await;
    term.session.close().await;
}

#[tokio::test]
async fn shell_options_and_traps_do_not_wedge_the_session() {
    let _gate = GATE.acquire().await.expect("gate");
    let term = Term::new("options").await;
    expect(&term, "set -u", "", 0).await;
    expect(&term, "echo ${UNSET_THING:-dflt}", "dflt\n", 0).await;
    expect(&term, "set +u; set -o noclobber; mkdir -p c && cd c", "", 0).await;
    assert_eq!(term.run("true").await.cwd, term.cwd().join("c"));
    expect(&term, "trap 'echo dbg >/dev/null' DEBUG", "", 0).await;
    expect(&term, "echo with-trap", "with-trap\n", 0).await;
    expect(&term, "trap - DEBUG; trap 'echo bye' EXIT; shopt -s extglob", "", 0).await;
    expect(&term, "stty -echo", "", 0).await;
    expect(&term, "echo quiet", "quiet\n", 0).await;
    expect(&term, "stty echo -icanon; stty icanon", "", 0).await;
    expect(&term, "echo back", "back\n", 0).await;
    expect(&term, "stty raw -echo", "", 0).await;
    expect(&term, "echo raw", "raw\n", 0).await;
    expect(&term, "stty sane", "", 0).await;
    // Enter is no line end without `icrnl`; another kill character.
    expect(&term, "stty -icrnl", "", 0).await;
    expect(&term, "echo no-icrnl", "no-icrnl\n", 0).await;
    expect(&term, "stty icrnl kill ^K", "", 0).await;
    expect(&term, "echo other-kill", "other-kill\n", 0).await;
    expect(&term, "stty sane", "", 0).await;
    // set -e: a failure in an exempt position keeps the shell.
    expect(&term, "set -e; false && true", "", 1).await;
    expect(&term, "echo alive", "alive\n", 0).await;
    expect(&term, "set -euo pipefail; false | true && false || true", "", 0).await;
    expect(&term, "set +euo pipefail", "", 0).await;
    // vi editing, POSIX mode, no globbing, an odd IFS.
    expect(&term, "set -o vi", "", 0).await;
    expect(&term, "echo vi", "vi\n", 0).await;
    expect(&term, "set -o emacs; set -o posix; set -f; IFS=:", "", 0).await;
    expect(&term, "echo odd *; (exit 3)", "odd *\n", 3).await;
    expect(&term, "set +o posix; set +f; IFS=$' \\t\\n'; echo $?", "0\n", 0).await;
    term.session.close().await;
}

#[tokio::test]
async fn set_x_shows_the_commands_and_nothing_of_ours() {
    let _gate = GATE.acquire().await.expect("gate");
    let term = Term::new("xtrace").await;
    let reply = term.run("set -x").await;
    assert_eq!((reply.output.text.as_str(), reply.exit_code()), ("", Some(0)), "{reply:?}");
    for command in ["echo hi", "false", "cd /tmp", "x=1; echo $x"] {
        let reply = term.run(command).await;
        let text = &reply.output.text;
        assert!(text.contains("+ "), "{command}: {text:?}");
        assert!(!text.contains("__sk") && !text.contains("shell-"), "{command}: {text:?}");
        assert!(reply.idle_output.is_none(), "{reply:?}");
    }
    let reply = term.run("echo hi").await;
    assert!(reply.output.text.ends_with("echo hi\nhi\n"), "{:?}", reply.output.text);
    // Interrupted: our prompt runs without the usual epilogue.
    term.run_for("sleep 100", 0.3).await;
    let reply = term.input("C-c", 10.0).await;
    assert!(!reply.output.text.contains("__sk"), "{:?}", reply.output.text);
    let reply = term.run("echo again").await;
    assert!(reply.output.text.ends_with("echo again\nagain\n"), "{:?}", reply.output.text);
    assert!(!reply.output.text.contains("__sk"), "{:?}", reply.output.text);
    let reply = term.run("set +x; echo off").await;
    assert!(!reply.output.text.contains("__sk"), "{:?}", reply.output.text);
    assert_eq!(term.run("echo plain").await.output.text, "plain\n");
    // set -v echoes the command as typed (and the line that ends our eval,
    // which carries no nonce), never the prompt.
    term.run("set -v").await;
    let reply = term.run("echo hi").await;
    assert!(reply.output.text.starts_with("echo hi\nhi\n"), "{:?}", reply.output.text);
    assert!(!reply.output.text.contains("__sk_prompt"), "{:?}", reply.output.text);
    term.run("set +v").await;
    assert_eq!(term.run("echo quiet").await.output.text, "quiet\n");
    term.session.close().await;
}

/// Line editing is off between the agent's commands and on while each
/// runs, as the shell had it: a command that switches it (`set -o vi`)
/// runs to its end and its choice holds; `bind` works without a warning.
/// An incomplete command run as it is (C-d) as a shell's first command,
/// whose syntax error makes bash read its next line without having made
/// its prompt, leaves a working shell (bash 5.2 crashes where that line is
/// its first one without editing).
#[tokio::test]
async fn line_editing_is_the_shells_own_while_commands_run() {
    let _gate = GATE.acquire().await.expect("gate");
    let first = Term::new("editing-first").await;
    assert_eq!(first.run("echo 'open").await.outcome, Outcome::Incomplete);
    let reply = first.keys(&["C-d"], 5.0).await;
    assert!(reply.output.text.contains("unexpected EOF"), "{reply:?}");
    for _ in 0..2 {
        let reply = first.run("echo alive").await;
        assert_eq!(reply.output.text, "alive\n", "{reply:?}");
        assert!(reply.events.is_empty(), "{reply:?}");
    }
    first.session.close().await;

    let term = Term::new("editing").await;
    let probe = "[[ -o emacs ]] && echo emacs; [[ -o vi ]] && echo vi; true";
    expect(&term, probe, "emacs\n", 0).await;
    expect(&term, "set -o vi; echo after-vi", "after-vi\n", 0).await;
    expect(&term, probe, "vi\n", 0).await;
    expect(&term, "set -o emacs; bind '\"\\C-x\\C-y\": \"x\"'; echo bound", "bound\n", 0).await;
    expect(&term, probe, "emacs\n", 0).await;
    term.session.close().await;
}

#[tokio::test]
async fn commands_behave_as_if_typed_at_a_prompt() {
    let _gate = GATE.acquire().await.expect("gate");
    let term = Term::new("prompt-like").await;
    // $? survives between calls.
    expect(&term, "false", "", 1).await;
    expect(&term, "echo $?", "1\n", 0).await;
    expect(&term, "(exit 7)", "", 7).await;
    expect(&term, "echo $?; echo $?", "7\n0\n", 0).await;
    // A top-level return is refused as at a prompt, and the line goes on.
    let reply = term.run("return; echo after").await;
    assert!(reply.output.text.contains("can only `return' from a function"), "{reply:?}");
    assert!(reply.output.text.ends_with("after\n"), "{reply:?}");
    // Syntax errors read like an interactive shell's: no file, no line.
    let reply = term.run("echo )").await;
    assert_eq!(reply.output.text, "bash: syntax error near unexpected token `)'\n");
    assert_eq!(reply.exit_code(), Some(2));
    let reply = term.run("echo a\nfi\necho b").await;
    assert!(reply.output.text.starts_with("a\nbash: syntax error near unexpected token `fi'"));
    assert!(!reply.output.text.contains("line "), "{reply:?}");
    let reply = term.run("nonexistent_command_xyz").await;
    assert_eq!(reply.output.text, "bash: nonexistent_command_xyz: command not found\n");
    // Functions that return, aliases defined on an earlier line.
    expect(&term, "f() { return 3; }; f", "", 3).await;
    expect(&term, "shopt -s expand_aliases; alias hello='echo hello'", "", 0).await;
    expect(&term, "hello there", "hello there\n", 0).await;
    term.session.close().await;
}

#[tokio::test]
async fn a_here_document_fed_line_by_line() {
    let _gate = GATE.acquire().await.expect("gate");
    // OpenHands test_interactive_command.
    let term = Term::new("heredoc").await;
    let reply = term.run("cat << EOF").await;
    assert_eq!((reply.exit_code(), reply.output.text.as_str()), (None, ""), "{reply:?}");
    assert!(reply.is_running(), "{reply:?}");
    assert_eq!(reply.outcome, Outcome::Incomplete, "{reply:?}");
    for line in ["line 1", "line 2"] {
        let reply = term.input(line, 5.0).await;
        assert_eq!((reply.exit_code(), reply.output.text.as_str()), (None, ""), "{reply:?}");
        assert_eq!(reply.outcome, Outcome::Incomplete, "{reply:?}");
    }
    let reply = term.input("EOF", 5.0).await;
    assert_eq!(reply.output.text, "line 1\nline 2\n");
    assert_eq!(reply.outcome, Outcome::Completed { exit_code: 0 });
    expect(&term, "echo next", "next\n", 0).await;
    term.session.close().await;
}

#[tokio::test]
async fn incomplete_input_waits_for_the_rest() {
    let _gate = GATE.acquire().await.expect("gate");
    let term = Term::new("incomplete").await;
    // An unclosed quote: the newline is part of the string.
    assert_eq!(term.run("echo 'one").await.exit_code(), None);
    let reply = term.input("two'", 5.0).await;
    assert_eq!((reply.output.text.as_str(), reply.exit_code()), ("one\ntwo\n", Some(0)));
    // if without fi, a trailing pipe, a trailing backslash.
    assert_eq!(term.run("if true; then").await.exit_code(), None);
    assert_eq!(term.input("echo yes", 5.0).await.exit_code(), None);
    let reply = term.input("fi", 5.0).await;
    assert_eq!((reply.output.text.as_str(), reply.exit_code()), ("yes\n", Some(0)));
    assert_eq!(term.run("echo abc |").await.exit_code(), None);
    assert_eq!(term.input("tr a-z A-Z", 5.0).await.output.text, "ABC\n");
    assert_eq!(term.run("echo a \\").await.exit_code(), None);
    assert_eq!(term.input("b", 5.0).await.output.text, "a b\n");
    // A new command while one is incomplete is not run; polling waits.
    assert_eq!(term.run("for i in 1 2; do").await.exit_code(), None);
    let reply = term.run("echo other").await;
    assert!(
        matches!(&reply.outcome, Outcome::NotExecuted { command, .. } if command == "echo other")
    );
    let reply = term.call(Request::default()).await;
    assert_eq!(reply.outcome, Outcome::Incomplete, "{reply:?}");
    // C-c discards it, as at a `>` prompt.
    let reply = term.input("C-c", 5.0).await;
    assert_eq!(reply.outcome, Outcome::Completed { exit_code: 130 });
    expect(&term, "echo fresh", "fresh\n", 0).await;
    // C-d runs it as it is: bash reports the error.
    term.run("echo 'open").await;
    let reply = term.input("C-d", 5.0).await;
    assert!(reply.output.text.contains("unexpected EOF"), "{reply:?}");
    assert!(!reply.output.text.contains("line 1:"), "{reply:?}");
    term.session.close().await;
}

#[tokio::test]
async fn exit_restarts_in_the_directory_it_was_in() {
    let _gate = GATE.acquire().await.expect("gate");
    let term = Term::new("exit-cwd").await;
    let reply = term.run("mkdir -p x/y && cd x/y; exit 3").await;
    assert_eq!(reply.exit_code(), Some(3));
    let restarted = reply.events.iter().find_map(|n| match n {
        Event::ShellRestarted { cwd, .. } => Some(cwd.clone()),
        _ => None,
    });
    assert_eq!(restarted, Some(term.cwd().join("x/y")), "{reply:?}");
    assert_eq!(
        term.run("pwd").await.output.text,
        format!("{}\n", term.cwd().join("x/y").display())
    );
    // With an EXIT trap of the user's (which still runs), and after set -e.
    term.run("trap 'echo bye' EXIT").await;
    let reply = term.run("cd ..; exit 4").await;
    assert!(reply.output.text.ends_with("bye\n"), "{reply:?}");
    let restarted = reply.events.iter().find_map(|n| match n {
        Event::ShellRestarted { cwd, .. } => Some(cwd.clone()),
        _ => None,
    });
    assert_eq!(restarted, Some(term.cwd().join("x")), "{reply:?}");
    let reply = term.run("set -e; cd ..; false").await;
    assert_eq!(reply.exit_code(), Some(1));
    assert_eq!(term.run("true").await.cwd, term.cwd());
    term.session.close().await;
}

#[tokio::test]
async fn input_a_program_never_read_is_not_run_as_commands() {
    let _gate = GATE.acquire().await.expect("gate");
    let term = Term::new("drain").await;
    let marker = term.scratch.0.join("injected");
    let reply = term.run_for("sleep 1.5", 0.2).await;
    assert_eq!(reply.exit_code(), None);
    let reply = term.input(&format!("touch {}; echo INJECTED", marker.display()), 10.0).await;
    assert_eq!(reply.exit_code(), Some(0), "{reply:?}");
    let reply = term.run("echo next").await;
    assert_eq!(reply.output.text, "next\n", "{reply:?}");
    assert!(reply.idle_output.is_none(), "{reply:?}");
    assert!(!marker.exists(), "the input was run as a command");
    // Keys without Enter (a partial line) are discarded too.
    for key in ["TAB", "UP", "x"] {
        term.run_for("sleep 1", 0.2).await;
        let reply = if key == "x" {
            term.call(Request {
                call: call("C-x", true),
                timeout: Some(Duration::from_secs(10)),
                ..Request::default()
            })
            .await
        } else {
            term.keys(&[key], 10.0).await
        };
        assert_eq!(reply.exit_code(), Some(0), "{key}: {reply:?}");
        expect(&term, "echo clean", "clean\n", 0).await;
    }
    term.session.close().await;
}

#[tokio::test]
async fn the_nonce_is_nowhere_a_command_can_find_it() {
    let _gate = GATE.acquire().await.expect("gate");
    let term = Term::with("nonce", |config| config.output_cap = 1_000).await;
    // No file left on disk holds it: the start-up file is gone.
    let private = term.scratch.0.join("private");
    let files: Vec<_> = walk(&private);
    assert!(!files.iter().any(|f| f.ends_with("init.sh")), "{files:?}");
    // It is a shell variable, never exported.
    let reply = term.run("env | grep -c __sk_ ; true").await;
    assert_eq!(reply.output.text, "0\n");
    let nonce = term.run("echo $__sk_nonce").await.output.text.trim().to_owned();
    assert_eq!(nonce.len(), 32);
    let reply = term.run("bash -c 'echo ${__sk_nonce:-absent}'").await;
    assert_eq!(reply.output.text, "absent\n");
    // Not in spill file names.
    let reply = term.run("seq 1 5000").await;
    let path = reply.output.full_output_path.expect("spilled");
    assert!(!path.to_string_lossy().contains(&nonce[..8]), "{path:?}");
    // Not in any file after a reinstall either.
    term.run_for("exec bash --norc", 20.0).await;
    for file in walk(&private).into_iter().chain(walk(&term.scratch.0.join("spill"))) {
        let text = std::fs::read(&file).unwrap_or_default();
        assert!(!String::from_utf8_lossy(&text).contains(&nonce), "{file:?}");
    }
    term.session.close().await;
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

/// The integration reaches a nested or replaced shell over the command
/// socket it inherited, never as a file: while the shell is given it, no
/// file appears in the private directory (a process watching it could swap
/// one in the moment before it is read), and the shell then reports exit
/// codes and its working directory as before.
#[tokio::test]
async fn a_reinstall_writes_no_file() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let _gate = GATE.acquire().await.expect("gate");
    let term = fixed_shlvl("no-file").await;
    let private = term.scratch.0.join("private");
    let before = walk(&private);
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let watching = {
        let (stop, private) = (std::sync::Arc::clone(&stop), private.clone());
        std::thread::spawn(move || {
            let mut seen = std::collections::BTreeSet::new();
            let mut looks = 0u64;
            while !stop.load(Ordering::Relaxed) {
                // Looks again at once (a reinstall script lived for a
                // few milliseconds): no pause, only a yield.
                seen.extend(walk(&private));
                looks += 1;
                std::thread::yield_now();
            }
            (seen, looks)
        })
    };
    term.run("mkdir -p sub").await;
    let reply = term.run_for("bash --norc", 20.0).await;
    assert!(reply.events.contains(&Event::NestedShellStarted), "{reply:?}");
    expect(&term, "cd sub && (exit 6)", "", 6).await;
    assert_eq!(term.run("true").await.cwd, term.cwd().join("sub"));
    let reply = term.run_for("exec bash --norc", 20.0).await;
    assert!(reply.events.contains(&Event::IntegrationReinstalled), "{reply:?}");
    expect(&term, "echo $SHLVL; false", "3\n", 1).await;
    let reply = term.run_for("exit 7", 20.0).await;
    assert!(reply.events.contains(&Event::NestedShellExited { status: 7 }), "{reply:?}");
    assert_eq!(reply.cwd, term.cwd());
    stop.store(true, Ordering::Relaxed);
    let (seen, looks) = watching.join().expect("watcher");
    assert!(looks > 1, "the directory was looked at");
    let new: Vec<_> = seen.iter().filter(|path| !before.contains(path)).collect();
    assert!(new.is_empty(), "files appeared during the reinstalls: {new:?}");
    term.session.close().await;
}

#[tokio::test]
async fn other_shells_are_driven_as_programs_and_the_reply_says_so() {
    let _gate = GATE.acquire().await.expect("gate");
    let term = Term::new("other-shell").await;
    let reply = term.run_for("sh", 3.0).await;
    assert_eq!(reply.exit_code(), None, "{reply:?}");
    let named = |reply: &shellkeep_engine::Reply| {
        reply.events.iter().any(|n| matches!(n, Event::OtherShell(name) if name == "sh"))
    };
    let mut seen = named(&reply);
    if !seen {
        seen = named(
            &term
                .call(Request { timeout: Some(Duration::from_secs(2)), ..Request::default() })
                .await,
        );
    }
    assert!(seen, "{reply:?}");
    let reply = term.input("echo inside", 2.0).await;
    assert!(reply.output.text.contains("inside"), "{reply:?}");
    let reply = term.input("exit 2", 10.0).await;
    assert_eq!(reply.exit_code(), Some(2), "{reply:?}");
    expect(&term, "echo outer", "outer\n", 0).await;
    term.session.close().await;
}

#[tokio::test]
async fn a_shell_on_a_terminal_of_its_own_gets_the_integration_too() {
    let _gate = GATE.acquire().await.expect("gate");
    // As `poetry shell` and `pipenv shell` do (through pexpect): the
    // wrapper passes our terminal through to a shell on its own.
    let term = Term::new("wrapped").await;
    term.run("mkdir -p w").await;
    let reply = term.run_for("script -e -q -c 'bash --norc' /dev/null", 20.0).await;
    assert!(reply.events.contains(&Event::NestedShellStarted), "{reply:?}");
    expect(&term, "cd w; (exit 6)", "", 6).await;
    assert_eq!(term.run("true").await.cwd, term.cwd().join("w"));
    let reply = term.run_for("exit 2", 20.0).await;
    assert!(reply.events.contains(&Event::NestedShellExited { status: 2 }), "{reply:?}");
    expect(&term, "echo outer", "outer\n", 0).await;
    // Python's pty.spawn, the classic way to get a shell with a terminal.
    let reply =
        term.run_for("python3 -c 'import pty; pty.spawn([\"bash\", \"--norc\"])'", 20.0).await;
    assert!(reply.events.contains(&Event::NestedShellStarted), "{reply:?}");
    expect(&term, "(exit 7)", "", 7).await;
    let reply = term.run_for("exit", 20.0).await;
    assert!(reply.events.iter().any(|e| matches!(e, Event::NestedShellExited { .. })), "{reply:?}");
    expect(&term, "echo outer", "outer\n", 0).await;
    term.session.close().await;
}

#[tokio::test]
async fn remote_sessions_are_driven_as_programs_and_the_reply_says_so() {
    let _gate = GATE.acquire().await.expect("gate");
    // Anything named like a remote client (here `cat` under the name ssh)
    // is an interactive program: the reply names it.
    let term = Term::new("remote").await;
    term.run("mkdir -p bin && ln -s \"$(command -v cat)\" bin/ssh").await;
    let reply = term.run_for("./bin/ssh", 3.0).await;
    assert_eq!(reply.exit_code(), None, "{reply:?}");
    assert!(reply.events.contains(&Event::RemoteShell("ssh".into())), "{reply:?}");
    let reply = term.input("hello", 3.0).await;
    assert!(reply.output.text.contains("hello"), "{reply:?}");
    let reply = term.input("C-d", 10.0).await;
    assert_eq!(reply.exit_code(), Some(0), "{reply:?}");
    term.session.close().await;
}

#[tokio::test]
async fn interrupting_a_builtin_in_a_nested_shell_keeps_that_shell() {
    let _gate = GATE.acquire().await.expect("gate");
    let term = fixed_shlvl("nested-int").await;
    let reply = term.run_for("bash --norc", 20.0).await;
    assert!(reply.events.contains(&Event::NestedShellStarted), "{reply:?}");
    let reply = term.run_for("read line", 0.5).await;
    assert_eq!(reply.exit_code(), None, "{reply:?}");
    let reply = term.input("C-c", 10.0).await;
    assert_eq!(reply.exit_code(), Some(130), "{reply:?}");
    assert!(
        !reply.events.iter().any(|e| matches!(e, Event::NestedShellExited { .. })),
        "{reply:?}"
    );
    expect(&term, "echo $SHLVL", "3\n", 0).await;
    term.session.close().await;
}

#[tokio::test]
async fn a_shell_that_refuses_the_integration_is_driven_with_input() {
    let _gate = GATE.acquire().await.expect("gate");
    // A bash whose `eval` is disabled cannot run the script it reads from
    // the command socket: after a few seconds the reply says so, and the
    // shell is driven with is_input; `exit` ends the command.
    let term = Term::new("refused").await;
    std::fs::write(term.cwd().join("rc"), "enable -n eval\nPS1='$ '\n").expect("rc");
    let reply = term.run_for("bash --rcfile ./rc", 8.0).await;
    assert_eq!(reply.exit_code(), None, "{reply:?}");
    assert!(reply.events.contains(&Event::ReinstallFailed), "{reply:?}");
    let reply = term.input("echo inside", 3.0).await;
    assert!(reply.output.text.contains("inside"), "{reply:?}");
    let reply = term.input("exit 3", 10.0).await;
    assert_eq!(reply.outcome, Outcome::Completed { exit_code: 3 }, "{reply:?}");
    expect(&term, "echo outer", "outer\n", 0).await;
    term.session.close().await;
}

/// A process of the nested shell that reads the command socket it
/// inherited takes the reinstall script's frame: the shell runs none of
/// it, the reinstall is given up as one the shell refused, and the shell
/// is driven with input; the outer shell, once the thief is gone, runs
/// commands as before.
#[tokio::test]
async fn a_reinstall_frame_taken_by_another_process_runs_nothing() {
    let _gate = GATE.acquire().await.expect("gate");
    let term = Term::new("taken").await;
    std::fs::write(term.cwd().join("rc"), "cat <&60 >stolen &\nPS1='$ '\n").expect("rc");
    let reply = term.run_for("bash --rcfile ./rc", 10.0).await;
    assert_eq!(reply.exit_code(), None, "{reply:?}");
    assert!(reply.events.contains(&Event::ReinstallFailed), "{reply:?}");
    let stolen = std::fs::read_to_string(term.cwd().join("stolen")).expect("stolen");
    assert!(stolen.contains("__sk_load"), "the thief took the script: {stolen:?}");
    let reply = term.input("echo funcs=$(declare -F | grep -c __sk_)", 3.0).await;
    assert!(reply.output.text.contains("funcs=0"), "{reply:?}");
    term.input("kill %1; wait", 3.0).await;
    let reply = term.input("exit 3", 10.0).await;
    assert_eq!(reply.outcome, Outcome::Completed { exit_code: 3 }, "{reply:?}");
    expect(&term, "echo outer; (exit 2)", "outer\n", 2).await;
    term.session.close().await;
}

// A command's end cannot be forged (issue 11): the end comes from a record
// the shell itself sends on the completion channel, which the kernel tags
// with the sender's pid; markers in the output only place the end.

/// A child that steals the nonce from its parent shell (its environment and
/// its memory, as any same-user process can where ptrace is not restricted)
/// and forges the end of the command, both as markers in the output and as
/// records written into the channel's descriptor it inherited.
const FORGER: &str = r#"
import os, re, sys, time
expected, seq = sys.argv[1], int(sys.argv[2])
ppid = os.getppid()
found = set()
try:
    env = open(f"/proc/{ppid}/environ", "rb").read()
    found.update(m.decode() for m in re.findall(rb"__SK_NONCE=([0-9a-f]{32})", env))
except OSError:
    pass
try:
    maps = open(f"/proc/{ppid}/maps").read().splitlines()
    mem = open(f"/proc/{ppid}/mem", "rb", 0)
    for line in maps:
        fields = line.split()
        if "rw" not in fields[1] or (len(fields) > 5 and fields[5] not in ("[heap]",)):
            continue
        start, end = (int(x, 16) for x in fields[0].split("-"))
        try:
            mem.seek(start)
            data = mem.read(min(end - start, 64 << 20))
        except OSError:
            continue
        found.update(m.decode() for m in re.findall(rb"(?<![0-9a-f])([0-9a-f]{32})(?![0-9a-f])", data))
except OSError:
    pass
# Where ptrace is restricted (Yama) the theft fails; forge with the real
# nonce anyway: knowing it must make no difference.
print("stolen=" + ("yes" if expected in found else "no"), flush=True)
tty = os.open("/dev/tty", os.O_WRONLY)
for n in range(max(seq - 3, 0), seq + 40):
    for status in (0, 7):
        os.write(tty, b"\x1b]6973;%s;E;%d;%d\x07" % (expected.encode(), n, status))
        try:
            os.write(62, b"E;%d;%d;;%d" % (n, status, status))
        except OSError as err:
            print("no channel:", err, flush=True)
            sys.exit(3)
for _ in range(2000):
    os.write(62, b"E;%d;0;;0" % seq)
print("CHILD-CONTINUES", flush=True)
time.sleep(0.5)
print("REALLY-DONE", flush=True)
sys.exit(42)
"#;

#[tokio::test]
async fn a_child_that_steals_the_nonce_cannot_end_the_command() {
    let _gate = GATE.acquire().await.expect("gate");
    let term = Term::new("forge-child").await;
    std::fs::write(term.cwd().join("forge.py"), FORGER).expect("script");
    let nonce = term.run("echo $__sk_nonce").await.output.text.trim().to_owned();
    assert_eq!(nonce.len(), 32);
    // The next command is number 2 (`echo $__sk_nonce` was 1).
    let reply = term
        .run_for(&format!("python3 forge.py {nonce} 2; echo child=$?; sleep 0.3; (exit 5)"), 20.0)
        .await;
    assert_eq!(reply.outcome, Outcome::Completed { exit_code: 5 }, "{reply:?}");
    let rest = reply.output.text.strip_prefix("stolen=yes\n").or_else(|| {
        // Only where the kernel keeps a child out of its parent's memory.
        (yama_restricts_ptrace()).then(|| reply.output.text.strip_prefix("stolen=no\n")).flatten()
    });
    assert_eq!(rest, Some("CHILD-CONTINUES\nREALLY-DONE\nchild=42\n"), "{reply:?}");
    // And the session goes on, every later command with its own status.
    expect(&term, "echo next; false", "next\n", 1).await;
    term.session.close().await;
}

#[tokio::test]
async fn a_background_child_cannot_end_later_commands() {
    let _gate = GATE.acquire().await.expect("gate");
    let term = Term::new("forge-bg").await;
    std::fs::write(
        term.cwd().join("bg.py"),
        r#"
import os, time
for _ in range(60):
    for n in range(1, 12):
        os.write(62, b"E;%d;0;;0" % n)
    time.sleep(0.05)
"#,
    )
    .expect("script");
    expect(&term, "(python3 bg.py >/dev/null 2>&1 &)", "", 0).await;
    for n in 0..3 {
        let command = format!("sleep 0.4; echo slow-{n}; (exit 3)");
        expect(&term, &command, &format!("slow-{n}\n"), 3).await;
    }
    term.session.close().await;
}

/// A program that calls itself bash (`exec -a bash`) and waits at what
/// looks like a prompt: if anything is typed into it, it says so; then it
/// forges an end with the stolen nonce and keeps running.
const FAKE_BASH: &str = r#"
import os, re, select, time
ready, _, _ = select.select([0], [], [], 2.0)
if ready:
    line = os.read(0, 4096)
    print("TYPED-INTO:" + line.decode(errors="replace"), flush=True)
env = open(f"/proc/{os.getppid()}/environ", "rb").read()
nonce = re.search(rb"__SK_NONCE=([0-9a-f]{32})", env)
nonce = nonce.group(1) if nonce else b"0" * 32
for n in range(1, 40):
    os.write(1, b"\x1b]6973;%s;E;%d;0\x07" % (nonce, n))
time.sleep(0.3)
print("STILL-RUNNING-AFTER-FAKE-END", flush=True)
os._exit(9)  # `-i` would start a real interactive prompt after sys.exit
"#;

#[tokio::test]
async fn a_program_named_bash_is_never_typed_into() {
    let _gate = GATE.acquire().await.expect("gate");
    let term = Term::new("fake-bash").await;
    std::fs::write(term.cwd().join("fakebash.py"), FAKE_BASH).expect("script");
    // Python finds its library from argv[0] unless told where it is.
    let (python, home) = python();
    let command = format!(
        "(PYTHONHOME={home} exec -a bash {} -i fakebash.py); echo REAL-EXIT=$?; false",
        python.display()
    );
    let mut reply = term.run_for(&command, 20.0).await;
    let mut events = reply.events.clone();
    let mut output = reply.output.text.clone();
    // The reply may come while it still waits at its fake prompt (a poll
    // returns at once while it waits for input): wait until it ended, then
    // look.
    if reply.is_running() {
        eventually(|| matches!(term.session.activity(), Activity::Finished { .. })).await;
        reply = term
            .call(Request { timeout: Some(Duration::from_secs(20)), ..Request::default() })
            .await;
        events.extend(reply.events.clone());
        output.push_str(&reply.output.text);
    }
    assert_eq!(reply.exit_code(), Some(1), "{reply:?}");
    assert!(output.contains("STILL-RUNNING-AFTER-FAKE-END\nREAL-EXIT=9\n"), "{output:?}");
    assert!(!output.contains("TYPED-INTO"), "{output:?}");
    assert!(
        events.iter().any(|n| matches!(n, Event::NamedBash(line) if line.contains("fakebash"))),
        "{events:?}"
    );
    expect(&term, "echo after", "after\n", 0).await;
    term.session.close().await;
}

/// The Python interpreter by its real path (so `exec -a` can run it), and
/// its home.
fn python() -> (std::path::PathBuf, String) {
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import os, sys; print(os.path.realpath(sys.executable)); print(sys.base_prefix)",
        ])
        .output()
        .expect("python3");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines = text.lines();
    let path = std::path::PathBuf::from(lines.next().expect("python path"));
    (path, lines.next().expect("python home").to_owned())
}

#[tokio::test]
async fn markers_printed_by_the_shell_itself_do_not_end_the_command() {
    let _gate = GATE.acquire().await.expect("gate");
    let term = Term::new("forge-self").await;
    // A sourced script prints the marker with the shell's own nonce and
    // sequence number: text, since no record came with it.
    std::fs::write(
        term.cwd().join("env.sh"),
        "printf '\\e]6973;%s;E;%s;0\\a' \"$__sk_nonce\" \"$__sk_seq\"\necho AFTERFAKE\n",
    )
    .expect("script");
    let reply = term.run_for(". ./env.sh; sleep 0.5; echo DONE; (exit 7)", 20.0).await;
    assert_eq!(reply.outcome, Outcome::Completed { exit_code: 7 }, "{reply:?}");
    assert_eq!(reply.output.text, "AFTERFAKE\nDONE\n", "{reply:?}");
    let reply = term
        .run_for(
            "printf '\\e]6973;%s;E;%s;0\\a' \"$__sk_nonce\" \"$__sk_seq\"; echo B; false",
            20.0,
        )
        .await;
    assert_eq!(reply.outcome, Outcome::Completed { exit_code: 1 }, "{reply:?}");
    assert_eq!(reply.output.text, "B\n", "{reply:?}");
    term.session.close().await;
}

#[tokio::test]
async fn the_next_command_is_never_typed_into_a_running_program() {
    let _gate = GATE.acquire().await.expect("gate");
    let term = Term::new("not-typed").await;
    // The shell itself (a sourced script could do the same) sends the end
    // of the command on the channel, then a program reads the terminal.
    // The shell is believed: code in the shell is the shell. But the next
    // command must not reach the program's `read`.
    let captured = term.cwd().join("captured");
    let reply = term
        .run_for(
            "printf 'E;%s;0;;0' \"$__sk_seq\" >&62; echo AFTERFAKE; \
             python3 -c 'import sys; l = sys.stdin.readline(); open(\"captured\", \"w\").write(l)'; \
             exit 7",
            20.0,
        )
        .await;
    assert!(reply.output.text.contains("AFTERFAKE"), "{reply:?}");
    let reply = term.run_for("echo SECRET-COMMAND-TEXT", 5.0).await;
    assert!(reply.is_running(), "{reply:?}");
    assert!(matches!(reply.outcome, Outcome::NotExecuted { .. }), "{reply:?}");
    assert!(
        matches!(
            &reply.outcome,
            Outcome::NotExecuted { why: NotRun::NotAtPrompt { command_line, .. }, .. }
                if command_line.contains("python3")
        ),
        "{reply:?}"
    );
    assert!(!captured.exists(), "the command was typed into the program");
    // A fresh shell; the program is gone and never got the command.
    let reply = term.call(Request::new(Call::Reset { then: Some("echo fresh".into()) })).await;
    assert_eq!(reply.output.text, "fresh\n", "{reply:?}");
    assert!(
        !captured.exists() || std::fs::read_to_string(&captured).unwrap_or_default().is_empty()
    );
    term.session.close().await;
}

/// Runs `tamper`, then a command: that command either runs correctly or
/// its reply says the integration is damaged (or the shell reads the
/// terminal without an end, which `reset` also restores); it is never
/// reported as completed without running, and no call hangs. Then `reset`
/// gives a working shell again.
async fn after_tampering(term: &Term, tamper: &str) -> bool {
    let first = term.run_for(tamper, 10.0).await;
    let timed_out =
        |reply: &Reply| matches!(reply.outcome, Outcome::Running { why: WaitEnded::Timeout(_) });
    assert!(!timed_out(&first), "{tamper}: {first:?}");
    let next = term.run_for("echo ran-$((40 + 2))", 10.0).await;
    let ran = (&next.outcome, next.output.text.as_str())
        == (&Outcome::Completed { exit_code: 0 }, "ran-42\n");
    if !ran {
        assert!(next.is_running(), "{tamper}: {next:?}");
        assert!(!timed_out(&next), "{tamper}: {next:?}");
        assert!(!next.output.text.contains("ran-42"), "{tamper}: {next:?}");
        let damaged = |reply: &Reply| {
            matches!(
                reply.outcome,
                Outcome::IntegrationDamaged
                    | Outcome::NeverStarted { shell_exited: false }
                    | Outcome::WaitingForInput { shell_reading: true }
                    | Outcome::NotExecuted { why: NotRun::IntegrationDamaged, .. }
                    | Outcome::NotExecuted {
                        why: NotRun::CommandRunning { reading: Some(Reader::Shell) },
                        ..
                    }
            )
        };
        let told = damaged(&first) || damaged(&next);
        assert!(told, "{tamper}: {first:?}\n{next:?}");
    }
    let reply =
        term.call(Request::new(Call::Reset { then: Some("echo fine; (exit 4)".into()) })).await;
    assert_eq!((reply.output.text.as_str(), reply.exit_code()), ("fine\n", Some(4)), "{tamper}");
    ran
}

#[tokio::test]
async fn tampering_with_the_integration_is_reported_never_misreported() {
    let _gate = GATE.acquire().await.expect("gate");
    let term = Term::new("tamper").await;
    // These leave the integration working: the next command runs.
    for tamper in [
        "shopt -s expand_aliases; alias builtin='echo PWNED'",
        "shopt -s expand_aliases; alias eval='echo PWNED' __sk_pre='echo PWNED'",
        "__sk_dir=/nonexistent",
        "__sk_nonce=x",
        "bind '\"\\r\": \"echo hijack\\n\"'",
        "kill -STOP $$",
        // The integration's functions are read-only: removing or replacing
        // one is refused, and the shell goes on reporting true ends.
        "unset -f __sk_prompt",
        "unset -f __sk_prompt __sk_fallback",
        "unset -f __sk_pre __sk_on __sk_post __sk_end",
        "__sk_end() { builtin printf 'E;%s;0;;7' \"$__sk_seq\" >&62; }",
        "__sk_prompt() { :; }; __sk_post() { :; }",
    ] {
        assert!(after_tampering(&term, tamper).await, "{tamper} should leave a working shell");
    }
    // Refused (1), or (0) a PROMPT_COMMAND of the user's, which runs
    // before the end, that tries to change the status reported.
    for (tamper, code) in [
        ("unset -f __sk_post", 1),
        ("__sk_end() { :; }", 1),
        ("PROMPT_COMMAND+=('__sk_last=0 __sk_status=0')", 0),
    ] {
        let reply = term.run_for(tamper, 10.0).await;
        assert_eq!(reply.exit_code(), Some(code), "{tamper}: {reply:?}");
        expect(&term, "false", "", 1).await;
        expect(&term, "(exit 3)", "", 3).await;
    }
    term.call(Request::new(Call::Reset { then: None })).await;
    // These may break it: the next command then runs correctly anyway, or
    // the reply says the integration is damaged (`after_tampering` checks
    // that it is never misreported).
    for tamper in [
        "enable -n builtin",
        "enable -n eval",
        "shopt -s extdebug; trap 'return 1' DEBUG",
        "trap false DEBUG",
        "set -r",
        "__sk_seq=999",
        "readonly __sk_c __sk_seq",
        "PROMPT_COMMAND=; readonly PS1 PROMPT_COMMAND",
        "exec 62>&-",
    ] {
        after_tampering(&term, tamper).await;
    }
    term.session.close().await;
}

/// Asserts that `reply` completed with `code` and says the integration's
/// prompt did not run.
fn fallback_ended(reply: &shellkeep_engine::Reply, code: i32, what: &str) {
    assert_eq!(reply.outcome, Outcome::Completed { exit_code: code }, "{what}: {reply:?}");
    assert!(reply.events.contains(&Event::PromptNotRun), "{what}: {reply:?}");
}

#[tokio::test]
async fn without_its_prompt_the_shell_still_reports_true_exit_codes() {
    let _gate = GATE.acquire().await.expect("gate");
    let term = Term::new("fallback").await;
    // (Removing `__sk_prompt` itself is refused: its functions are
    // read-only. Pointing PROMPT_COMMAND elsewhere is what remains.)
    for tamper in ["__sk_pc=':'", "PROMPT_COMMAND=; __sk_pc=':'"] {
        let reply = term.run_for(tamper, 20.0).await;
        assert_eq!(reply.exit_code(), Some(0), "{tamper}: {reply:?}");
        for (command, code) in [("false", 1), ("(exit 7)", 7), ("ls /nonexistent", 2), ("true", 0)]
        {
            let reply = term.run_for(command, 20.0).await;
            fallback_ended(&reply, code, &format!("{tamper}; {command}"));
        }
        let reply = term.run_for("echo out; (exit 3)", 20.0).await;
        fallback_ended(&reply, 3, tamper);
        assert!(reply.output.text.contains("out\n"), "{tamper}: {reply:?}");
        // An interrupted command: `__sk_post` never ran.
        term.run_for("sleep 100", 0.5).await;
        let reply = term.input("C-c", 20.0).await;
        fallback_ended(&reply, 130, &format!("{tamper}; C-c"));
        let reply = term.run_for("(exit 5)", 20.0).await;
        fallback_ended(&reply, 5, &format!("{tamper}; after C-c"));
        let reply = term.call(Request::new(Call::Reset { then: Some("(exit 4)".into()) })).await;
        assert_eq!(reply.exit_code(), Some(4), "{tamper}: {reply:?}");
        assert!(!reply.events.contains(&Event::PromptNotRun), "{tamper}: {reply:?}");
        assert!(!reply.events.contains(&Event::StatusLost), "{tamper}: {reply:?}");
        expect(&term, "false", "", 1).await;
    }
    // `__sk_post`, which keeps the status, cannot be removed (its
    // functions are read-only): where the shell cannot even look it up
    // (`declare` disabled), the status is still true, and not said to be
    // lost.
    for tamper in ["enable -n declare", "enable -n declare; __sk_pc=':'"] {
        term.run_for(tamper, 20.0).await;
        for (command, code) in [("false", 1), ("(exit 7)", 7)] {
            let reply = term.run_for(command, 20.0).await;
            assert_eq!(reply.exit_code(), Some(code), "{tamper}; {command}: {reply:?}");
            assert!(!reply.events.contains(&Event::StatusLost), "{tamper}; {command}: {reply:?}");
        }
        let reply = term.call(Request::new(Call::Reset { then: Some("(exit 4)".into()) })).await;
        assert_eq!(reply.exit_code(), Some(4), "{tamper}: {reply:?}");
        assert!(!reply.events.contains(&Event::StatusLost), "{tamper}: {reply:?}");
    }
    // PROMPT_COMMAND cleared by a command that is then interrupted: the
    // fallback ends it with its status and says so; the next command puts
    // the prompt back.
    for (command, key, code) in [
        ("PROMPT_COMMAND=; sleep 100", "C-c", 130),
        ("PROMPT_COMMAND=; (exit 9); sleep 100", "C-c", 130),
    ] {
        term.run_for(command, 0.5).await;
        let reply = term.input(key, 20.0).await;
        fallback_ended(&reply, code, command);
        let reply = term.run_for("(exit 6)", 20.0).await;
        assert_eq!(reply.exit_code(), Some(6), "after {command}: {reply:?}");
        assert!(!reply.events.contains(&Event::PromptNotRun), "after {command}: {reply:?}");
    }
    term.session.close().await;
}

#[tokio::test]
async fn output_sent_elsewhere_is_reported() {
    let _gate = GATE.acquire().await.expect("gate");
    let term = Term::new("elsewhere").await;
    let reply = term.run_for("exec 3>&1 >/dev/null", 10.0).await;
    assert!(reply.events.contains(&Event::OutputElsewhere), "{reply:?}");
    let reply = term.run_for("echo gone; (exit 2)", 10.0).await;
    assert_eq!(reply.outcome, Outcome::Completed { exit_code: 2 }, "{reply:?}");
    assert!(reply.events.contains(&Event::OutputElsewhere), "{reply:?}");
    let reply = term.run_for("exec >&3 3>&-", 10.0).await;
    assert!(!reply.events.contains(&Event::OutputElsewhere), "{reply:?}");
    expect(&term, "echo back", "back\n", 0).await;
    term.session.close().await;
}

/// Whatever the umask, what the private directory holds is private; the
/// shell keeps its state, keys and traps in no file there (they go on the
/// completion channel, in a sealed descriptor, in the shell).
#[tokio::test]
async fn the_private_files_are_private_whatever_the_umask() {
    use std::os::unix::fs::PermissionsExt;
    let _gate = GATE.acquire().await.expect("gate");
    let term = Term::new("umask").await;
    expect(&term, "umask 000; cd /", "", 0).await;
    expect(&term, "trap 'echo bye' EXIT; cd /tmp", "", 0).await;
    assert_eq!(term.session.cwd(), std::path::PathBuf::from("/tmp"));
    let files = walk(&term.scratch.0.join("private"));
    for file in &files {
        let name = file.file_name().and_then(|name| name.to_str()).unwrap_or_default();
        assert!(!["state", "keys", "trap", "env"].contains(&name), "{file:?}");
        let mode = std::fs::metadata(file).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{file:?}");
    }
    term.session.close().await;
}

/// Whether the Yama LSM keeps a process out of its parent's memory.
fn yama_restricts_ptrace() -> bool {
    std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .is_ok_and(|scope| scope.trim() != "0")
}

#[tokio::test]
async fn a_nested_shell_without_the_channel_is_not_given_the_integration() {
    let _gate = GATE.acquire().await.expect("gate");
    let term = fixed_shlvl("no-channel").await;
    // As a wrapper that closes the descriptors it inherits would leave it.
    let first = term.run_for("bash --norc 62>&-", 5.0).await;
    let mut events = first.events.clone();
    // The watcher names it once the nested shell sits at its prompt; a poll
    // returns at once while the shell waits for input, so look again until a
    // reply carries the event.
    let mut reply = first;
    if !events.contains(&Event::ReinstallFailed) {
        reply = poll_until(
            async || {
                let reply = term
                    .call(Request { timeout: Some(Duration::from_secs(2)), ..Request::default() })
                    .await;
                events.extend(reply.events.clone());
                reply
            },
            |reply| reply.events.contains(&Event::ReinstallFailed),
        )
        .await;
    }
    assert!(!events.contains(&Event::NestedShellStarted), "{events:?}");
    assert!(reply.is_running(), "{reply:?}");
    // It is driven as a program; `exit` returns to the outer shell.
    let reply = term.input("exit 3", 10.0).await;
    assert_eq!(reply.outcome, Outcome::Completed { exit_code: 3 }, "{reply:?}");
    expect(&term, "echo outer", "outer\n", 0).await;
    term.session.close().await;
}

#[tokio::test]
async fn a_shell_starts_whatever_descriptors_the_server_has_open() {
    let _gate = GATE.acquire().await.expect("gate");
    // With descriptor 62 (and many around it) in use in the server, the
    // channel must still reach the shell without disturbing the spawn.
    use std::os::fd::AsRawFd;
    let mut held: Vec<std::fs::File> =
        (0..300).map(|_| std::fs::File::open("/dev/null").expect("open")).collect();
    // Free a window around 62 so the spawn's own descriptors land there.
    held.retain(|file| !(50..=70).contains(&file.as_raw_fd()));
    for _ in 0..6 {
        let term = Term::new("many-fds").await;
        expect(&term, "echo up; (exit 2)", "up\n", 2).await;
        term.session.close().await;
    }
    drop(held);
}

/// The complete output of command `number` as the session's store keeps
/// it (what the `output` tool reads).
fn logged(term: &Term, number: Option<u64>) -> LogPage {
    let log = term.session.output().get(number).expect("the command is in the store");
    log.read(0, 10_000).expect("the log reads")
}

/// The reply that reported a command's end and the store agree: finished,
/// the same exit code, and the same text (the reply showed all of it),
/// which holds `text`.
fn agree(term: &Term, reply: &Reply, text: &str, code: i32) {
    assert_eq!(reply.outcome, Outcome::Completed { exit_code: code }, "{reply:?}");
    let page = logged(term, reply.number);
    assert_eq!((page.running, page.exit_code), (false, Some(code)), "{page:?}");
    assert_eq!(reply.output.text, page.text, "the reply and the store disagree");
    assert!(page.text.contains(text), "{page:?}");
}

// Issue 12: a command ended by the nested-shell handshake or by `exit` from
// a nested shell read as still running in the store, with its end missing.
#[tokio::test]
async fn the_store_reads_nested_shell_commands_as_finished_with_all_their_text() {
    let _gate = GATE.acquire().await.expect("gate");
    let term = fixed_shlvl("nested-log").await;
    // `bash`: ends on the new shell's handshake.
    let reply = term.run_for("echo before; bash --norc", 20.0).await;
    assert!(reply.events.contains(&Event::NestedShellStarted), "{reply:?}");
    agree(&term, &reply, "before\n", 0);
    // `exit` from the nested shell: ends on its parent's prompt.
    let reply = term.run_for("echo leaving; exit 3", 20.0).await;
    assert!(reply.events.contains(&Event::NestedShellExited { status: 3 }), "{reply:?}");
    agree(&term, &reply, "leaving\n", 3);
    // `exec bash`: ends on the replacing shell's handshake.
    let reply = term.run_for("echo replacing; exec bash --norc", 20.0).await;
    assert!(reply.events.contains(&Event::IntegrationReinstalled), "{reply:?}");
    agree(&term, &reply, "replacing\n", 0);
    // The listing says so too, and the session goes on.
    assert_eq!(term.session.activity(), Activity::Idle);
    let reply = term.run("echo after").await;
    agree(&term, &reply, "after\n", 0);
    term.session.close().await;
}

// Every other way a command ends: `C-c`, the shell exiting, a reset and
// the session's close all leave its log finished, with its text.
#[tokio::test]
async fn the_store_reads_interrupted_exited_and_reset_commands_as_finished() {
    let _gate = GATE.acquire().await.expect("gate");
    let term = Term::new("ends-log").await;
    // C-c.
    let reply = term.run_for("echo go; sleep 100", 0.5).await;
    assert_eq!(
        reply.outcome,
        Outcome::Running { why: WaitEnded::Timeout(Duration::from_millis(500)) }
    );
    let number = reply.number;
    let reply = term.input("C-c", 10.0).await;
    assert_eq!(reply.exit_code(), Some(130), "{reply:?}");
    let page = logged(&term, number);
    assert_eq!((page.running, page.exit_code), (false, Some(130)), "{page:?}");
    assert!(page.text.starts_with("go\n"), "{page:?}");
    // The shell exiting ends its command with the shell's status.
    let reply = term.run("echo bye; exit 7").await;
    agree(&term, &reply, "bye\n", 7);
    // A reset ends the command it interrupts: its log is complete.
    let reply = term.run_for("echo reset-me; sleep 100", 0.5).await;
    let number = reply.number;
    term.call(Request::new(Call::Reset { then: None })).await;
    let page = logged(&term, number);
    assert!(!page.running && page.exit_code.is_some(), "{page:?}");
    assert_eq!(page.text, "reset-me\n");
    // So does closing the session.
    let reply = term.run_for("echo close-me; sleep 100", 0.5).await;
    term.session.close().await;
    let page = logged(&term, reply.number);
    assert!(!page.running && page.exit_code.is_some(), "{page:?}");
    assert_eq!(page.text, "close-me\n");
}

/// What a background job prints while a command is being typed (after the
/// command began, before its start marker) was dropped with the echo of
/// the typed line. Every line of a job that prints without pause while
/// commands start one after another now reaches a reply: a command's
/// output or the background output.
#[tokio::test]
async fn a_job_printing_while_commands_start_loses_no_line() {
    let term = Term::new("job-race").await;
    let job = "(for i in $(seq 1 300); do echo tick-$i; sleep 0.003; done; echo tick-end) &";
    let reply = term.run(job).await;
    let mut seen = reply.output.text.clone();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !seen.contains("tick-end\n") {
        assert!(std::time::Instant::now() < deadline, "the job did not end: {seen}");
        let reply = term.run("true").await;
        assert_eq!(reply.exit_code(), Some(0), "{reply:?}");
        seen.push_str(&reply.output.text);
        seen.push_str(reply.idle_output.as_deref().unwrap_or_default());
    }
    let missing: Vec<u32> = (1..=300).filter(|i| !seen.contains(&format!("tick-{i}\n"))).collect();
    assert!(missing.is_empty(), "lines never shown: {missing:?}");
    term.session.close().await;
}
