//! A command's end cannot be forged (issue 11, findings F2, F3, F4, F11):
//! end to end through the real binary. A child that steals the nonce, a
//! program that calls itself bash, the shell itself reporting an end while
//! a program still reads the terminal, and tampering with the integration
//! from inside the shell: the reply always carries the real exit status and
//! all the output, the next command is never typed into a running program,
//! and a damaged integration is reported with `reset` as the remedy.

use serde_json::json;

use crate::Server;

/// Steals the nonce from the parent shell's memory (`/proc/PPID/mem`, open
/// to a same-user process where ptrace is not restricted) or environment,
/// then forges end markers and end records for many sequence numbers.
const STEAL: &str = r#"
import os, re, sys, time
found = set()
ppid = os.getppid()
try:
    found.update(re.findall(rb"__SK_NONCE=([0-9a-f]{32})", open(f"/proc/{ppid}/environ", "rb").read()))
    mem = open(f"/proc/{ppid}/mem", "rb", 0)
    for line in open(f"/proc/{ppid}/maps").read().splitlines():
        fields = line.split()
        if "rw" in fields[1] and (len(fields) < 6 or fields[5] == "[heap]"):
            start, end = (int(x, 16) for x in fields[0].split("-"))
            mem.seek(start)
            found.update(re.findall(rb"(?<![0-9a-f])([0-9a-f]{32})(?![0-9a-f])", mem.read(end - start)))
except OSError:
    pass
print("stolen=" + ("yes" if sys.argv[1].encode() in found else "no"), flush=True)
# Where ptrace is restricted (Yama) the theft fails; forge with the real
# nonce anyway: knowing it must make no difference.
found.add(sys.argv[1].encode())
for nonce in list(found)[:50]:
    for n in range(1, 30):
        os.write(1, b"\x1b]6973;%s;E;%d;0\x07" % (nonce, n))
        os.write(62, b"E;%d;0;;0" % n)
print("CHILD-CONTINUES", flush=True)
time.sleep(0.5)
print("REALLY-DONE", flush=True)
sys.exit(42)
"#;

#[tokio::test]
async fn a_child_with_the_stolen_nonce_cannot_end_the_command_or_change_its_status() {
    let server = Server::start().await;
    std::fs::write(server.cwd().join("steal.py"), STEAL).expect("script");
    let r = server.terminal(json!({"command": "echo $__sk_nonce"})).await;
    let nonce = r.output().trim().to_owned();
    let r = server
        .terminal(json!({
            "command": format!("python3 steal.py {nonce}; echo child=$?; sleep 0.3; (exit 5)"),
            "timeout": 30,
        }))
        .await;
    assert_eq!((r["status"].as_str(), r["exit_code"].as_i64()), (Some("completed"), Some(5)));
    let yama = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .is_ok_and(|scope| scope.trim() != "0");
    let rest = r.output().strip_prefix("stolen=yes\n").or_else(|| {
        // Only where the kernel keeps a child out of its parent's memory.
        yama.then(|| r.output().strip_prefix("stolen=no\n")).flatten()
    });
    assert_eq!(rest, Some("CHILD-CONTINUES\nREALLY-DONE\nchild=42\n"), "{r:#?}");
    assert!(r.text.contains("exit code 5"), "{}", r.text);
    let r = server.terminal(json!({"command": "echo next; false"})).await;
    assert_eq!((r.output(), r["exit_code"].as_i64()), ("next\n", Some(1)), "{r:#?}");
}

#[tokio::test]
async fn a_program_that_calls_itself_bash_is_named_not_typed_into() {
    let server = Server::start().await;
    std::fs::write(
        server.cwd().join("fake.py"),
        r#"
import os, select
ready, _, _ = select.select([0], [], [], 2.0)
if ready:
    print("TYPED-INTO:" + os.read(0, 4096).decode(errors="replace"), flush=True)
print("FAKE-DONE", flush=True)
os._exit(9)
"#,
    )
    .expect("script");
    let home = std::process::Command::new("python3")
        .args([
            "-c",
            "import os, sys; print(os.path.realpath(sys.executable)); print(sys.base_prefix)",
        ])
        .output()
        .expect("python3");
    let text = String::from_utf8_lossy(&home.stdout).into_owned();
    let (python, home) = text.trim().split_once('\n').expect("two lines");
    let command =
        format!("(PYTHONHOME={home} exec -a bash {python} -i fake.py); echo REAL-EXIT=$?; false");
    let mut r = server.terminal(json!({"command": command, "timeout": 30})).await;
    let mut seen = r.text.clone();
    let mut output = r.output().to_owned();
    // A call returns at once while it waits at its fake prompt: look again
    // until it ends.
    if r["status"] != "completed" {
        r = crate::poll_until(
            crate::EVENTUALLY,
            async || {
                let r = server.terminal(json!({"command": "", "timeout": 30})).await;
                seen.push_str(&r.text);
                output.push_str(r.output());
                r
            },
            |r| r["status"] == "completed",
        )
        .await;
    }
    assert_eq!(r["exit_code"], 1, "{r:#?}");
    assert!(output.contains("FAKE-DONE\nREAL-EXIT=9\n"), "{output:?}");
    assert!(!output.contains("TYPED-INTO"), "{output:?}");
    assert!(seen.contains("calls itself bash but is not the bash shellkeep runs"), "{seen}");
}

#[tokio::test]
async fn the_next_command_waits_for_the_shell_at_its_prompt() {
    let server = Server::start().await;
    let captured = server.cwd().join("captured");
    // The shell itself says the command ended (a sourced script can do the
    // same), then runs a program that reads the terminal.
    let r = server
        .terminal(json!({
            "command": "printf 'E;%s;0;;0' \"$__sk_seq\" >&62; \
                        python3 -c 'import sys; l = sys.stdin.readline(); open(\"captured\", \"w\").write(l)'",
            "timeout": 10,
        }))
        .await;
    assert_eq!(r["status"], "completed", "{r:#?}");
    let r = server.terminal(json!({"command": "echo SECRET-COMMAND-TEXT", "timeout": 5})).await;
    assert_eq!(r["status"], "not_executed", "{r:#?}");
    assert_eq!(r["exit_code"], -1, "{r:#?}");
    assert!(r.text.contains("NOT executed: the shell is not at its prompt"), "{}", r.text);
    assert!(r.text.contains("python3 -c"), "{}", r.text);
    assert!(!r.text.contains("completed"), "{}", r.text);
    assert!(
        !captured.exists(),
        "the command was typed into the program: {:?}",
        std::fs::read_to_string(&captured)
    );
    let r = server.terminal(json!({"command": "echo fresh", "reset": true})).await;
    assert_eq!(r.output(), "fresh\n", "{r:#?}");
    assert!(
        !captured.exists() || std::fs::read_to_string(&captured).unwrap_or_default().is_empty()
    );
}

#[tokio::test]
async fn a_damaged_integration_says_so_and_reset_restores_it() {
    let server = Server::start().await;
    // The command never reached its eval: not run, never "completed".
    let r = server.terminal(json!({"command": "enable -n eval", "timeout": 10})).await;
    let r = if r["status"] == "completed" {
        server.terminal(json!({"command": "echo ran", "timeout": 10})).await
    } else {
        r
    };
    assert_eq!(r["status"], "not_executed", "{r:#?}");
    assert!(r.text.contains("damaged"), "{}", r.text);
    assert!(r.text.contains("reset=true restores"), "{}", r.text);
    let r = server.terminal(json!({"command": "echo after", "timeout": 10})).await;
    assert_eq!(r["status"], "not_executed", "{r:#?}");
    assert!(r.text.contains("reset=true restores"), "{}", r.text);
    let r = server.terminal(json!({"command": "echo restored", "reset": true})).await;
    assert_eq!((r.output(), r["exit_code"].as_i64()), ("restored\n", Some(0)), "{r:#?}");

    // The prompt and its fallback pointed elsewhere (their functions are
    // read-only, their variables are not): the shell sits at its prompt
    // with no end. The reply says what that can mean and how to recover; no
    // call hangs.
    let r =
        server.terminal(json!({"command": "__sk_pc=':'; __sk_ps1=; PS1=", "timeout": 10})).await;
    assert_eq!(r["status"], "waiting_for_input", "{r:#?}");
    assert!(r.text.contains("a broken integration that reset=true restores"), "{}", r.text);
    let r = server.terminal(json!({"command": "echo after", "timeout": 10})).await;
    assert_eq!(r["status"], "not_executed", "{r:#?}");
    assert!(r.text.contains("a broken integration that reset=true restores"), "{}", r.text);
    let r = server.terminal(json!({"command": "echo restored", "reset": true})).await;
    assert_eq!(r.output(), "restored\n", "{r:#?}");
}

#[tokio::test]
async fn without_its_prompt_exit_codes_stay_true_and_the_reply_says_so() {
    let server = Server::start().await;
    let r = server.terminal(json!({"command": "unset -f __sk_prompt", "timeout": 10})).await;
    assert_eq!(r["exit_code"], 1, "its functions are read-only: {r:#?}");
    let r = server.terminal(json!({"command": "__sk_pc=':'", "timeout": 10})).await;
    assert_eq!(r["exit_code"], 0, "{r:#?}");
    for (command, code) in [("false", 1), ("echo out; (exit 7)", 7), ("ls /nonexistent", 2)] {
        let r = server.terminal(json!({"command": command, "timeout": 10})).await;
        assert_eq!(
            (r["status"].as_str(), r["exit_code"].as_i64()),
            (Some("completed"), Some(code))
        );
        assert!(r.text.contains(&format!("exit code {code}")), "{}", r.text);
        assert!(r.text.contains("prompt (PROMPT_COMMAND) did not run"), "{}", r.text);
        assert!(r.text.contains("reset=true restores a working shell"), "{}", r.text);
    }
    let r = server.terminal(json!({"command": "echo restored; false", "reset": true})).await;
    assert_eq!((r.output(), r["exit_code"].as_i64()), ("restored\n", Some(1)), "{r:#?}");
    assert!(!r.text.contains("did not run"), "{}", r.text);
}

#[tokio::test]
async fn a_shell_that_stops_itself_is_continued() {
    let server = Server::start().await;
    let r = server.terminal(json!({"command": "kill -STOP $$; echo woke", "timeout": 10})).await;
    assert_eq!((r.output(), r["exit_code"].as_i64()), ("woke\n", Some(0)), "{r:#?}");
    let r = server.terminal(json!({"command": "echo again; (exit 3)", "timeout": 10})).await;
    assert_eq!((r.output(), r["exit_code"].as_i64()), ("again\n", Some(3)), "{r:#?}");
}
