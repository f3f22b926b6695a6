//! The shell at its prompt is watched (issue 19, findings F3 and F7): end to
//! end through the real binary, with the attacks as a hostile command makes
//! them. A `&` job that pushes a line into the idle shell's input with
//! legacy `TIOCSTI` cannot redefine the integration's functions, and the
//! next reply says something ran at the prompt (so does a record or a start
//! marker that comes while no command runs). A command whose typed line a
//! job that flips the terminal's foreground steals is reported NOT
//! executed, never completed or waiting for input.

use std::path::Path;

use serde_json::json;

use crate::{EVENTUALLY, Server, installed, kernel_forbids, poll_until, wait_until};

/// The kernel's switch for legacy `TIOCSTI`.
const LEGACY_TIOCSTI: &str = "/proc/sys/dev/tty/legacy_tiocsti";

/// A job that waits for the file `go`, then pushes `line` and a newline into
/// its controlling terminal with `TIOCSTI`, a byte at a time, as finding F3
/// did; it writes `pushed`, or `refused <errno>` when the kernel refuses,
/// into the file `result`. It gives up after 60 s.
const PUSH: &str = r#"
import fcntl, os, sys, termios, time
go, line, result = sys.argv[1:4]
deadline = time.monotonic() + 60
while not os.path.exists(go) and time.monotonic() < deadline:
    time.sleep(0.01)
tty = os.open("/dev/tty", os.O_RDWR)
try:
    for byte in line.encode() + b"\n":
        fcntl.ioctl(tty, termios.TIOCSTI, bytes([byte]))
    status = "pushed"
except OSError as err:
    status = f"refused {err.errno}"
with open(result + ".tmp", "w") as out:
    out.write(status)
os.rename(result + ".tmp", result)
"#;

/// Whether this host lets a process push input into its terminal; `None`
/// when the switch is absent (a kernel before 6.2: it allows it unless
/// built without `CONFIG_LEGACY_TIOCSTI`, which only trying tells).
fn legacy_tiocsti() -> Option<bool> {
    std::fs::read_to_string(LEGACY_TIOCSTI).ok().map(|value| value.trim() != "0")
}

/// Starts the pushing job in `server`'s shell with `line`, lets it push
/// once the shell is idle, and waits for its result: `false` when the
/// kernel refused (and the test must skip, saying why).
async fn push_at_the_prompt(server: &Server, line: &str) -> bool {
    let dir = server.cwd();
    std::fs::write(dir.join("push.py"), PUSH).expect("script");
    let command = format!(
        "python3 push.py go {} result </dev/null >/dev/null 2>&1 & echo started",
        shellkeep_quote(line)
    );
    let r = server.terminal(json!({"command": command, "timeout": 10})).await;
    assert_eq!(r["status"], "completed", "{r:#?}");
    // The reply is out: the shell waits at its prompt, and no command runs.
    std::fs::write(dir.join("go"), "").expect("go");
    let result = dir.join("result");
    wait_until(EVENTUALLY, || result.exists(), || "the job never pushed".to_owned()).await;
    let status = std::fs::read_to_string(&result).expect("result");
    if let Some(errno) = status.strip_prefix("refused ") {
        kernel_forbids("legacy TIOCSTI", &format!("the ioctl failed with errno {errno}"));
        return false;
    }
    assert_eq!(status, "pushed");
    true
}

/// `text` quoted for bash in single quotes.
fn shellkeep_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// Waits until the line pushed into the shell has run (it creates `ran`).
async fn wait_ran(dir: &Path) {
    let ran = dir.join("ran");
    wait_until(EVENTUALLY, || ran.exists(), || "the pushed line never ran".to_owned()).await;
}

/// Finding F3: a `&` job pushes a line that redefines the integration's end
/// function into the idle shell's input. The redefinition is refused (the
/// functions are read-only), so later commands report their true exit
/// codes.
#[tokio::test]
async fn a_line_pushed_into_the_idle_shell_cannot_redefine_the_integration() {
    if legacy_tiocsti() == Some(false) {
        kernel_forbids("legacy TIOCSTI", &format!("{LEGACY_TIOCSTI} is 0"));
        return;
    }
    if !installed("python3") {
        return;
    }
    let server = Server::start().await;
    let line = " __sk_end(){ builtin printf 'E;%s;0;;7' \"$__sk_seq\" >&62; \
                __sk_mark \"E;$__sk_seq;7\"; }; : >ran";
    if !push_at_the_prompt(&server, line).await {
        return;
    }
    wait_ran(server.cwd()).await;
    for (at, (command, code)) in
        [("false", 1), ("ls /nonexistent", 2), ("sh -c 'exit 17'", 17)].into_iter().enumerate()
    {
        let r = server.terminal(json!({"command": command, "timeout": 10})).await;
        assert_eq!(
            (r["status"].as_str(), r["exit_code"].as_i64()),
            (Some("completed"), Some(code)),
            "{command}: {r:#?}"
        );
        // The first reply after the line ran says the session was tampered
        // with, and how; the next ones have nothing new to say.
        let warned = r.text.contains("WARNING: the session was tampered with");
        assert_eq!(warned, at == 0, "{command}: {}", r.text);
        if at == 0 {
            assert!(r.text.contains("something ran in the shell at its prompt"), "{}", r.text);
            assert!(r.text.contains("legacy TIOCSTI"), "{}", r.text);
            let notes = r["notes"].to_string();
            assert!(notes.contains("tampered with"), "in the structured content too: {notes}");
        }
    }
}

/// A line pushed into the idle shell that empties PROMPT_COMMAND first, so
/// that the shell sends no record for it: the shell's count of the lines it
/// read, in the next start marker, still tells, and the next reply warns.
#[tokio::test]
async fn a_pushed_line_that_silences_the_prompt_is_still_counted() {
    if legacy_tiocsti() == Some(false) {
        kernel_forbids("legacy TIOCSTI", &format!("{LEGACY_TIOCSTI} is 0"));
        return;
    }
    if !installed("python3") {
        return;
    }
    let server = Server::start().await;
    if !push_at_the_prompt(&server, " PROMPT_COMMAND=; : >ran").await {
        return;
    }
    wait_ran(server.cwd()).await;
    let r = server.terminal(json!({"command": "false", "timeout": 10})).await;
    assert_eq!(r["exit_code"], 1, "{r:#?}");
    assert!(r.text.contains("WARNING: the session was tampered with"), "{}", r.text);
    assert!(r.text.contains("the shell ran 1 command line at its prompt"), "{}", r.text);
    let r = server.terminal(json!({"command": "(exit 3)", "timeout": 10})).await;
    assert_eq!(r["exit_code"], 3, "{r:#?}");
    assert!(!r.text.contains("tampered"), "{}", r.text);
}

/// A process left behind by a command sends an end record (on the
/// descriptor it inherited) while no command runs: it is ignored, and the
/// next reply names the sender. On every host: no TIOCSTI needed.
#[tokio::test]
async fn a_record_sent_while_no_command_runs_is_named_with_its_sender() {
    if !installed("python3") {
        return;
    }
    let server = Server::start().await;
    let job = "import os, sys, time\n\
               deadline = time.monotonic() + 60\n\
               while not os.path.exists('go') and time.monotonic() < deadline: time.sleep(0.01)\n\
               os.write(62, b'E;1;0;;5')\n\
               open('sent', 'w').close()\n";
    std::fs::write(server.cwd().join("job.py"), job).expect("script");
    let r = server
        .terminal(json!({"command": "python3 job.py </dev/null >/dev/null 2>&1 & echo $!"}))
        .await;
    let pid = r.output().trim().lines().last().unwrap_or_default().to_owned();
    assert!(pid.parse::<u32>().is_ok(), "{r:#?}");
    std::fs::write(server.cwd().join("go"), "").expect("go");
    let sent = server.cwd().join("sent");
    wait_until(EVENTUALLY, || sent.exists(), || "the job sent nothing".to_owned()).await;
    // The record is read at the latest as the next command begins.
    let r = server.terminal(json!({"command": "false", "timeout": 10})).await;
    assert_eq!(r["exit_code"], 1, "{r:#?}");
    assert!(r.text.contains("WARNING: the session was tampered with"), "{}", r.text);
    assert!(r.text.contains(&format!("process {pid}, not the shell")), "{}", r.text);
    let r = server.terminal(json!({"command": "true", "timeout": 10})).await;
    assert!(!r.text.contains("tampered"), "{}", r.text);
}

/// A start marker (with the session's nonce, which a command can read)
/// printed while no command runs: the next reply says the shell started
/// something no call typed.
#[tokio::test]
async fn a_start_marker_while_no_command_runs_is_tampering() {
    let server = Server::start().await;
    let r = server.terminal(json!({"command": "echo $__sk_nonce"})).await;
    let nonce = r.output().trim().to_owned();
    assert!(!nonce.is_empty(), "{r:#?}");
    let command = format!(
        "(until [ -e go ]; do sleep 0.01; done; printf '\\033]6973;{nonce};S;99\\007' \
         >/dev/tty; : >sent) </dev/null >/dev/null 2>&1 & echo started"
    );
    let r = server.terminal(json!({"command": command})).await;
    assert!(r.output().ends_with("started\n"), "{r:#?}");
    std::fs::write(server.cwd().join("go"), "").expect("go");
    let sent = server.cwd().join("sent");
    wait_until(EVENTUALLY, || sent.exists(), || "the job printed nothing".to_owned()).await;
    // Output printed at the prompt is read by the time the shell is at its
    // prompt again: poll until a reply tells it.
    let r = poll_until(
        EVENTUALLY,
        async || server.terminal(json!({"command": "true", "timeout": 10})).await,
        |r| r.text.contains("tampered"),
    )
    .await;
    assert!(r.text.contains("the shell started a command (number 99)"), "{}", r.text);
}

/// A job that takes the terminal's foreground for 1 ms out of every 2 and
/// reads whatever is typed meanwhile (finding F7), until the file `stop`
/// exists or 120 s pass. It logs what it read to `grabbed`.
const GRAB: &str = r#"
import os, signal, time
signal.signal(signal.SIGTTOU, signal.SIG_IGN)
signal.signal(signal.SIGTTIN, signal.SIG_IGN)
tty = os.open("/dev/tty", os.O_RDWR | os.O_NONBLOCK)
me = os.getpgrp()
shell = os.getpgid(os.getppid())
log = open("grabbed", "ab")
deadline = time.monotonic() + 120
open("grabbing", "w").close()
while not os.path.exists("stop") and time.monotonic() < deadline:
    try:
        front = os.tcgetpgrp(tty)
        os.tcsetpgrp(tty, me)
        until = time.monotonic() + 0.001
        while time.monotonic() < until:
            try:
                log.write(os.read(tty, 4096))
                log.flush()
            except (BlockingIOError, OSError):
                pass
        os.tcsetpgrp(tty, front if front != me else shell)
    except OSError:
        pass
    time.sleep(0.001)
# Gives the terminal back as it found it: a program that ends holding it
# leaves the shell unable to read (that is a wedge of its own, named in the
# reply, not this test's subject).
try:
    if os.tcgetpgrp(tty) == me:
        os.tcsetpgrp(tty, shell)
except OSError:
    pass
"#;

/// Finding F7: while a job flips the terminal's foreground to itself and
/// back every millisecond, stealing what shellkeep types, each of 20
/// commands either ran (reported completed, and its file exists) or is
/// reported NOT executed (and it never runs, then or later): never a
/// command reported completed that did not run, never one reported waiting
/// for input.
#[tokio::test]
async fn a_typed_line_another_program_steals_is_never_reported_as_run() {
    if !installed("python3") {
        return;
    }
    let server = Server::start().await;
    let dir = server.cwd().to_owned();
    std::fs::write(dir.join("grab.py"), GRAB).expect("script");
    let grabbing = dir.join("grabbing");
    // Starts the grabber in the session's shell (again, once the shell it
    // took the terminal from exited and a new one started).
    let grab = async || {
        let _ = std::fs::remove_file(&grabbing);
        let r = poll_until(
            EVENTUALLY,
            async || {
                let start = "python3 grab.py </dev/null >/dev/null 2>&1 & echo started";
                server.terminal(json!({"command": start, "timeout": 10})).await
            },
            |r| r["status"] == "completed",
        )
        .await;
        assert!(r.output().ends_with("started\n"), "{r:#?}");
        wait_until(EVENTUALLY, || grabbing.exists(), || "no grabber".to_owned()).await;
    };
    grab().await;
    let mut not_run = Vec::new();
    let mut counts = std::collections::BTreeMap::new();
    for k in 0..20 {
        let command = format!("touch AGENT-RAN-{k}; echo AGENT-{k}");
        let r = server.terminal(json!({"command": command, "timeout": 10})).await;
        let status = r["status"].as_str().unwrap_or_default().to_owned();
        let ran = dir.join(format!("AGENT-RAN-{k}"));
        match status.as_str() {
            "completed" => {
                assert!(ran.exists(), "reported completed, never ran: {r:#?}");
                assert_eq!(r["exit_code"], 0, "{r:#?}");
            }
            "not_executed" => {
                assert!(r.text.contains("NOT"), "{}", r.text);
                assert!(!ran.exists(), "reported NOT executed, but it ran: {r:#?}");
                not_run.push(ran);
            }
            _ => panic!("try {k}: neither run nor refused: {r:#?}"),
        }
        let kind = if r.text.contains("the shell exited before it started") {
            "never started: the shell exited"
        } else if r.text.contains("never came") {
            "never started: the shell read again"
        } else if r.text.contains("not at its prompt") {
            "refused: not at its prompt"
        } else {
            status.as_str()
        };
        *counts.entry(kind.to_owned()).or_insert(0) += 1;
        if r.text.contains("a new shell was started") {
            grab().await;
        }
    }
    std::fs::write(dir.join("stop"), "").expect("stop");
    // What was reported NOT executed never runs later either: once the
    // grabber has stopped (it may be reported holding the terminal until
    // then), a command runs again.
    let r = poll_until(
        EVENTUALLY,
        async || server.terminal(json!({"command": "echo settled", "timeout": 10})).await,
        |r| r["status"] == "completed",
    )
    .await;
    assert!(r.output().contains("settled"), "{r:#?}");
    for file in &not_run {
        assert!(!file.exists(), "{} ran after all", file.display());
    }
    eprintln!("20 tries under a foreground flipper: {counts:?}");
}

/// A program that takes the terminal's foreground and ends without giving
/// it back leaves the shell unable to read its terminal. Between the
/// agent's commands the shell reads without line editing, so its read
/// fails and it ends as at the end of input: the next command runs in a
/// fresh shell, and the reply says the shell exited and what is gone.
#[tokio::test]
async fn a_program_that_ends_holding_the_terminal_is_named_as_gone() {
    let Some(server) = terminal_taken_and_left(false).await else { return };
    let r = server.terminal(json!({"command": "echo after", "timeout": 10})).await;
    assert_eq!((r["status"].as_str(), r.output()), (Some("completed"), "after\n"), "{r:#?}");
    assert!(r.text.contains("The shell exited"), "{}", r.text);
    assert!(r.text.contains("a new shell was started"), "{}", r.text);
}

/// The same with line editing on at the prompt (an interrupted command
/// leaves it on): readline waits for input that cannot come, so the next
/// command is NOT executed, and the reply says that the group holding the
/// terminal has ended (not to wait for it) and that reset=true gives a
/// fresh shell, which then runs commands.
#[tokio::test]
async fn a_shell_in_line_editing_left_without_its_terminal_is_named_as_gone() {
    let Some(server) = terminal_taken_and_left(true).await else { return };
    let r = server.terminal(json!({"command": "echo after", "timeout": 10})).await;
    assert_eq!(r["status"], "not_executed", "{r:#?}");
    assert!(r.text.contains("whose programs have all ended"), "{}", r.text);
    assert!(!r.text.contains("Wait for that program"), "{}", r.text);
    let r = server.terminal(json!({"command": "echo after", "reset": true, "timeout": 10})).await;
    assert_eq!((r["status"].as_str(), r.output()), (Some("completed"), "after\n"), "{r:#?}");
}

/// A server whose shell started a background program that took the
/// terminal's foreground once the shell was back at its idle prompt and
/// ended without giving it back; the command that started it was
/// `interrupted` (C-c) or ended; `None` without python3.
async fn terminal_taken_and_left(interrupted: bool) -> Option<Server> {
    if !installed("python3") {
        return None;
    }
    let server = Server::start().await;
    // It takes the terminal once the shell is back at its idle prompt.
    let take = "(sleep 1; python3 -c 'import os, signal; \
                signal.signal(signal.SIGTTOU, signal.SIG_IGN); t = os.open(\"/dev/tty\", os.O_RDWR); \
                os.tcsetpgrp(t, os.getpgrp()); open(\"took\", \"w\").write(str(os.getpid()))') &";
    if interrupted {
        let command = format!("{take} sleep 100");
        let r = server.terminal(json!({"command": command, "timeout": 0.2})).await;
        assert_eq!(r["status"], "running", "{r:#?}");
        let r = server.terminal(json!({"command": "C-c", "is_input": true})).await;
        assert_eq!(r["exit_code"], 130, "{r:#?}");
    } else {
        let r = server.terminal(json!({"command": take, "timeout": 10})).await;
        assert_eq!(r["status"], "completed", "{r:#?}");
    }
    let took = server.cwd().join("took");
    let pid = poll_until(
        EVENTUALLY,
        async || std::fs::read_to_string(&took).unwrap_or_default(),
        |pid| pid.parse::<i32>().is_ok(),
    )
    .await;
    // Ended: gone, or a zombie its parent has not reaped yet (a process on
    // its way out has lost its command line before it is a zombie).
    let ended = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
            stat.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('Z'))
        })
    };
    wait_until(EVENTUALLY, ended, || format!("process {pid} never ended")).await;
    Some(server)
}
