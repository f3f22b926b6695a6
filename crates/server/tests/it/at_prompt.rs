//! The shell at its prompt is watched (issue 19, findings F3 and F7): end to
//! end through the real binary, with the attacks as a hostile command makes
//! them. A `&` job that pushes a line into the idle shell's input with
//! legacy `TIOCSTI` cannot redefine the integration's functions, and the
//! next reply says something ran at the prompt.

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
