//! Nothing the integration trusts is read from a path a command can write
//! (issue 19, item 2): end to end through the real binary, with the attacks
//! as they were found. A child that rewrites the keys file the prompt binds
//! from; a process left running that writes into every background job's
//! environment on its way; a child that rewrites the shell's state to claim
//! another working directory; a child that races to replace the next
//! command's text. Each runs as the session's own user, so it holds
//! everything that user can open.

use serde_json::json;

use crate::Server;

/// Finds the shell's private directory from its command line
/// (`--rcfile <dir>/init.sh`) and puts an Enter macro where the prompt
/// once read its keys: appended to every line shellkeep types, it would
/// redefine the end function to report exit 0. Then tries the keys file
/// the prompt now binds from, descriptor 61: through the shell's own
/// descriptor (`/proc/PPID/fd/61`) and its inherited copy, to write,
/// truncate or replace it. Prints what each attempt did.
const KEYS_POISON: &str = r#"
import os
ppid = os.getppid()
args = open(f"/proc/{ppid}/cmdline", "rb").read().split(b"\0")
rc = args[args.index(b"--rcfile") + 1].decode()
macro = (
    '"\\C-m": "\\C-e; __sk_end(){ builtin printf \'E;%s;0;;7\' \\"$__sk_seq\\" >&62; '
    '__sk_mark \\"E;$__sk_seq;7\\"; }\\C-j"\n"\\C-j": accept-line\n"\\C-u": unix-line-discard\n'
)
with open(os.path.join(os.path.dirname(rc), "keys"), "w") as f:
    f.write(macro)
for path in [f"/proc/{ppid}/fd/61", "/proc/self/fd/61"]:
    for flags in [os.O_WRONLY, os.O_RDWR, os.O_WRONLY | os.O_TRUNC]:
        try:
            fd = os.open(path, flags)
            try:
                os.write(fd, macro.encode())
                print("WROTE", path)
            finally:
                os.close(fd)
        except OSError as err:
            print("refused", err.errno)
    try:
        os.truncate(path, 0)
        print("TRUNCATED", path)
    except OSError as err:
        print("refused", err.errno)
print("poisoned", flush=True)
"#;

/// F4 (a): a child that rewrites the keys the prompt binds from cannot
/// make later commands report exit 0; the keys file cannot be written,
/// whoever holds it.
#[tokio::test]
async fn a_child_rewriting_the_keys_file_cannot_forge_later_exit_codes() {
    let server = Server::start().await;
    std::fs::write(server.cwd().join("keys_poison.py"), KEYS_POISON).expect("script");
    let r = server.terminal(json!({"command": "python3 keys_poison.py", "timeout": 30})).await;
    assert_eq!(r["exit_code"].as_i64(), Some(0), "{r:#?}");
    assert!(r.output().ends_with("poisoned\n"), "{r:#?}");
    assert!(!r.output().contains("WROTE") && !r.output().contains("TRUNCATED"), "{r:#?}");
    for (command, code, output) in [
        ("false", 1, ""),
        ("ls /nonexistent 2>/dev/null", 2, ""),
        ("sh -c 'exit 17'", 17, ""),
        ("echo still-$((6 * 7)); (exit 3)", 3, "still-42\n"),
    ] {
        let r = server.terminal(json!({"command": command, "timeout": 30})).await;
        assert_eq!(
            (r["status"].as_str(), r["exit_code"].as_i64(), r.output()),
            (Some("completed"), Some(code), output),
            "{command}: {r:#?}"
        );
    }
}

/// A process left running (a `&` job of an earlier command) that writes
/// `INJECTED…=yes` and a `PATH` of its own wherever a job's environment
/// might pass: every FIFO named `env` under the server's runtime
/// directory (where it once went), its own inherited copy of the
/// completion channel (as `V` datagrams, the way the shell now sends it),
/// and every environment file a shell of the session holds
/// (`/proc/PID/fd/N`). Counts the writes that went through, in `sent`,
/// until the file `stop` exists.
const ENV_INJECT: &str = r#"
import glob, os, sys, time
payload = b"INJECTED_BY_LINGERING_PROCESS=yes\0PATH=/tmp/evil-bin:/usr/bin:/bin\0"
shell = os.getppid()
args = open(f"/proc/{shell}/cmdline", "rb").read().split(b"\0")
rc = args[args.index(b"--rcfile") + 1].decode()
runtime = os.path.dirname(rc)
while os.path.basename(runtime) not in ("", "sessions"):
    runtime = os.path.dirname(runtime)
runtime = os.path.dirname(runtime)
sent = 0
def note():
    with open("sent.tmp", "w") as f:
        f.write(str(sent))
    os.replace("sent.tmp", "sent")
def once():
    global sent
    for path in glob.glob(f"{runtime}/**/env", recursive=True):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            try:
                os.write(fd, payload)
                sent += 1
            finally:
                os.close(fd)
        except OSError:
            pass
    for chunk in [b"V" + payload, b"V" + payload[:34], b"V" + payload[34:]]:
        try:
            os.write(62, chunk)
            sent += 1
        except OSError:
            pass
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if "shellkeep-env" not in os.readlink(f"/proc/{pid}/fd/{fd}"):
                    continue
                out = os.open(f"/proc/{pid}/fd/{fd}", os.O_WRONLY)
                try:
                    os.write(out, payload)
                    sent += 1
                finally:
                    os.close(out)
            except OSError:
                pass
while not os.path.exists("stop"):
    try:
        once()
    except Exception:
        import traceback
        with open("inject.err", "a") as f:
            f.write(traceback.format_exc())
    note()
    time.sleep(0.002)
"#;

/// F4 (b): a process left running cannot put values into the environment
/// of the background jobs started after it (found: 6 of 6 jobs).
#[tokio::test]
async fn a_lingering_process_cannot_write_into_the_environment_of_later_jobs() {
    let server = Server::start().await;
    std::fs::write(server.cwd().join("env_inject.py"), ENV_INJECT).expect("script");
    let r = server.terminal(json!({"command": "echo ${PATH%%:*}"})).await;
    let first = r.output().trim().to_owned();
    let r = server.terminal(json!({"command": "python3 env_inject.py &"})).await;
    assert_eq!(r["exit_code"].as_i64(), Some(0), "{r:#?}");
    let sent = server.cwd().join("sent");
    let count = || {
        std::fs::read_to_string(&sent).ok().and_then(|n| n.trim().parse::<u64>().ok()).unwrap_or(0)
    };
    crate::wait_until(crate::EVENTUALLY, || count() > 0, || "the injector at work".to_owned())
        .await;
    for job in 1..=6 {
        let r = server
            .terminal(json!({
                "command": "echo \"inj=${INJECTED_BY_LINGERING_PROCESS-no} first=${PATH%%:*}\"",
                "background": true,
            }))
            .await;
        assert!(!r.is_error, "job {job}: {r:#?}");
        assert_eq!(r.output(), format!("inj=no first={first}\n"), "job {job}: {r:#?}");
    }
    // The attack ran the whole time: it is no test of an idle injector.
    let before = count();
    let error = server.cwd().join("inject.err");
    crate::wait_until(
        crate::EVENTUALLY,
        || count() > before,
        || format!("the injector: {:?}", std::fs::read_to_string(&error)),
    )
    .await;
    std::fs::write(server.cwd().join("stop"), "").expect("stop");
}

/// Claims the session is in `evil` (with its own `python3` first in
/// `PATH`): rewrites the state file where the prompt once wrote it, and
/// sends the state pieces the prompt now sends on the completion channel,
/// from the copy it inherited, until the file `stop` exists. Counts its
/// rounds in `sent`.
const STATE_FORGE: &str = r#"
import os, sys, time
evil = sys.argv[1]
shell = os.getppid()
args = open(f"/proc/{shell}/cmdline", "rb").read().split(b"\0")
state = os.path.join(os.path.dirname(args[args.index(b"--rcfile") + 1].decode()), "state")
rounds = 0
while not os.path.exists("stop"):
    try:
        with open(state, "wb") as f:
            f.write(f"{evil}\0{evil}\0".encode())
    except OSError:
        pass
    for piece in [b"D" + evil.encode(), b"P" + evil.encode(), b"C"]:
        try:
            os.write(62, piece)
        except OSError:
            pass
    rounds += 1
    with open("sent.tmp", "w") as f:
        f.write(str(rounds))
    os.replace("sent.tmp", "sent")
    time.sleep(0.001)
"#;

/// F4 (state): a child that rewrites the shell's state cannot make the
/// server report another working directory or interpreter, nor restart the
/// shell there.
#[tokio::test]
async fn a_child_rewriting_the_state_cannot_claim_another_directory() {
    use std::os::unix::fs::PermissionsExt;
    let server = Server::start().await;
    let cwd = server.cwd().to_owned();
    std::fs::write(cwd.join("state_forge.py"), STATE_FORGE).expect("script");
    let evil = cwd.join("evil");
    for dir in [&evil, &cwd.join("real"), &cwd.join("again")] {
        std::fs::create_dir(dir).expect("dir");
    }
    let python = evil.join("python3");
    std::fs::write(&python, "#!/bin/sh\n").expect("write");
    std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let command = format!("python3 state_forge.py '{}' &", evil.display());
    let r = server.terminal(json!({"command": command})).await;
    assert_eq!(r["exit_code"].as_i64(), Some(0), "{r:#?}");
    let sent = cwd.join("sent");
    let count = || {
        std::fs::read_to_string(&sent).ok().and_then(|n| n.trim().parse::<u64>().ok()).unwrap_or(0)
    };
    crate::wait_until(crate::EVENTUALLY, || count() > 0, || "the forger at work".to_owned()).await;
    let evil_text = evil.to_str().expect("utf-8");
    for (command, dir) in [("cd real", "real"), ("true", "real"), ("cd ../again", "again")] {
        let r = server.terminal(json!({"command": command})).await;
        assert_eq!(r["exit_code"].as_i64(), Some(0), "{command}: {r:#?}");
        let expected = cwd.join(dir);
        assert_eq!(r["cwd"].as_str(), expected.to_str(), "{command}: {r:#?}");
        assert_ne!(r["python_interpreter"].as_str(), python.to_str(), "{command}: {r:#?}");
        assert!(!r.text.contains(evil_text), "{command}: {}", r.text);
    }
    // The shell ends in `real`: the next one starts there, not where the
    // forger claims.
    let before = count();
    crate::wait_until(crate::EVENTUALLY, || count() > before, || "the forger".to_owned()).await;
    server.terminal(json!({"command": "cd ../real && exit"})).await;
    let r = server.terminal(json!({"command": "pwd"})).await;
    let real = cwd.join("real");
    assert_eq!(r.output().trim(), real.to_str().expect("utf-8"), "{r:#?}");
    std::fs::write(cwd.join("stop"), "").expect("stop");
}

/// Races to replace the next command's text: rewrites the command file
/// where the shell once read it, and writes forged frames for the next
/// sequence numbers wherever it can (its inherited copy of the shell's
/// descriptor 60, and that descriptor opened again through `/proc`, which
/// gives a way into a pipe). Counts its rounds in `sent` and the ways in
/// it found in `opened`, until the file `stop` exists.
const COMMAND_SWAP: &str = r#"
import os, time
shell = os.getppid()
args = open(f"/proc/{shell}/cmdline", "rb").read().split(b"\0")
cmd = os.path.join(os.path.dirname(args[args.index(b"--rcfile") + 1].decode()), "cmd")
evil = b"echo PWNED; (exit 0)"
rounds = opened = 0
while not os.path.exists("stop"):
    try:
        with open(cmd, "wb") as f:
            f.write(evil)
    except OSError:
        pass
    frames = b"".join(b"%d %d\n%s" % (seq, len(evil), evil) for seq in range(1, 40))
    for path in ["/proc/self/fd/60", f"/proc/{shell}/fd/60"]:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            opened += 1
            try:
                os.write(fd, frames)
            finally:
                os.close(fd)
        except OSError:
            pass
    try:
        os.set_blocking(60, False)
        os.write(60, frames)
    except OSError:
        pass
    rounds += 1
    with open("sent.tmp", "w") as f:
        f.write(f"{rounds} {opened}")
    os.replace("sent.tmp", "sent")
    time.sleep(0.002)
"#;

/// The rounds a script of this module has counted in `sent`, and its
/// second number (0 if it counts one thing).
fn rounds(cwd: &std::path::Path) -> (u64, u64) {
    let text = std::fs::read_to_string(cwd.join("sent")).unwrap_or_default();
    let mut numbers = text.split_whitespace().map(|n| n.parse::<u64>().unwrap_or(0));
    (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0))
}

/// F4 (c): a child racing to replace the next command's text cannot: every
/// command runs as sent, with its own output and exit code.
#[tokio::test]
async fn a_child_cannot_replace_the_next_commands_text() {
    let server = Server::start().await;
    let cwd = server.cwd().to_owned();
    std::fs::write(cwd.join("command_swap.py"), COMMAND_SWAP).expect("script");
    let r = server.terminal(json!({"command": "python3 command_swap.py &"})).await;
    assert_eq!(r["exit_code"].as_i64(), Some(0), "{r:#?}");
    crate::wait_until(crate::EVENTUALLY, || rounds(&cwd).0 > 0, || "the racer".to_owned()).await;
    for (command, code, output) in [
        ("false", 1, ""),
        ("echo real-$((6 * 7))", 0, "real-42\n"),
        ("sh -c 'exit 17'", 17, ""),
        ("printf 'a\\nb\\n'; (exit 4)", 4, "a\nb\n"),
    ] {
        let r = server.terminal(json!({"command": command, "timeout": 30})).await;
        assert_eq!(
            (r["status"].as_str(), r["exit_code"].as_i64(), r.output()),
            (Some("completed"), Some(code), output),
            "{command}: {r:#?}"
        );
    }
    let before = rounds(&cwd).0;
    crate::wait_until(crate::EVENTUALLY, || rounds(&cwd).0 > before, || "the racer".to_owned())
        .await;
    // No way in through `/proc` either: the descriptor is a socket.
    assert_eq!(rounds(&cwd).1, 0, "the racer opened the command descriptor to write");
    std::fs::write(cwd.join("stop"), "").expect("stop");
}

/// Reads whatever comes on the shell's descriptor 60 that it inherited,
/// counting the bytes it took in `sent`, until the file `stop` exists.
const COMMAND_THIEF: &str = r#"
import os, select
taken = 0
while not os.path.exists("stop"):
    ready, _, _ = select.select([60], [], [], 0.05)
    if ready:
        taken += len(os.read(60, 1 << 20))
    with open("sent.tmp", "w") as f:
        f.write(str(taken))
    os.replace("sent.tmp", "sent")
"#;

/// F4 (c): a child that takes the next command's text out of the shell's
/// descriptor makes that command fail to run, and the reply says it was
/// NOT run (and the next one NOT executed, until a reset): never a
/// completion of a command that did not run. A reset, which ends the
/// thief, gives a working shell again.
#[tokio::test]
async fn a_stolen_command_is_reported_not_run_never_completed() {
    let server = Server::start().await;
    let cwd = server.cwd().to_owned();
    std::fs::write(cwd.join("command_thief.py"), COMMAND_THIEF).expect("script");
    let r = server.terminal(json!({"command": "python3 command_thief.py &"})).await;
    assert_eq!(r["exit_code"].as_i64(), Some(0), "{r:#?}");
    std::fs::write(cwd.join("marker-file"), "").expect("write");
    crate::wait_until(crate::EVENTUALLY, || cwd.join("sent").exists(), || "the thief".to_owned())
        .await;
    let mut stolen = 0;
    for round in 0..2 {
        let r = server
            .terminal(json!({"command": "rm marker-file; echo ran; (exit 3)", "timeout": 60}))
            .await;
        match r["status"].as_str() {
            // The shell read it first: it ran, as sent.
            Some("completed") => {
                assert_eq!((r["exit_code"].as_i64(), r.output()), (Some(3), "ran\n"), "{r:#?}");
                std::fs::write(cwd.join("marker-file"), "").expect("write");
            }
            _ => {
                stolen += 1;
                assert_eq!(r["status"].as_str(), Some("not_executed"), "{round}: {r:#?}");
                assert!(
                    r.text.contains("NOT run") || r.text.contains("NOT executed"),
                    "{round}: {}",
                    r.text
                );
                assert!(cwd.join("marker-file").exists(), "{round}: it ran: {r:#?}");
            }
        }
    }
    assert!(stolen > 0 || rounds(&cwd).0 == 0, "the thief took bytes, yet all ran");
    std::fs::write(cwd.join("stop"), "").expect("stop");
    let r = server
        .terminal(json!({"command": "echo after; (exit 5)", "reset": true, "timeout": 30}))
        .await;
    assert_eq!(
        (r["status"].as_str(), r["exit_code"].as_i64(), r.output()),
        (Some("completed"), Some(5), "after\n"),
        "{r:#?}"
    );
}
