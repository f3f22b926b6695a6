//! A command's end is believed only from a shell the server registered
//! (issue 19, items 1, 5 and 6): end to end through the real binary. A
//! child that makes itself look like its shell (`PR_SET_MM_MAP`: the
//! shell's auxiliary vector and command line) cannot end its command or
//! change its exit code, with the integration whole or with its prompt
//! broken (the fallback, once believed from forks of the shell); the
//! fallback itself, sent by the shell, reports the true status; a bash
//! that a command starts on its own is not adopted as a nested shell.

use serde_json::json;

use crate::Server;

/// A child of the shell that copies the shell's `/proc/PPID/auxv` and
/// command line onto itself with `prctl(PR_SET_MM, PR_SET_MM_MAP)` (no
/// privilege needed), checks that its own `/proc` files now read as the
/// shell's (`IMPERSONATED`), then sends an end record with status 0 for
/// the running command (its number from `SHELLKEEP_SCOPE`) on the
/// descriptor 62 it inherited and prints the matching end marker with the
/// nonce from the shell's environment. It then prints the rest of its
/// output and exits 42.
const IMPERSONATOR: &str = r#"
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

static size_t slurp(const char *path, char *buf, size_t cap) {
    int fd = open(path, O_RDONLY);
    size_t n = 0;
    ssize_t r;
    if (fd < 0) return 0;
    while (n < cap && (r = read(fd, buf + n, cap - n)) > 0) n += (size_t)r;
    close(fd);
    return n;
}

static int same(const char *mine, const char *theirs, size_t len) {
    static char buf[8192];
    return slurp(mine, buf, sizeof buf) == len && memcmp(buf, theirs, len) == 0;
}

int main(void) {
    static char cmdline[4096], auxv[4096], stat[4096], environ[65536], path[64];
    pid_t shell = getppid();
    snprintf(path, sizeof path, "/proc/%d/cmdline", shell);
    size_t cmdline_len = slurp(path, cmdline, sizeof cmdline);
    snprintf(path, sizeof path, "/proc/%d/auxv", shell);
    size_t auxv_len = slurp(path, auxv, sizeof auxv);
    snprintf(path, sizeof path, "/proc/%d/environ", shell);
    size_t environ_len = slurp(path, environ, sizeof environ - 1);
    size_t stat_len = slurp("/proc/self/stat", stat, sizeof stat - 1);
    stat[stat_len] = 0;
    unsigned long long field[64] = {0};
    char *save = NULL;
    int at = 3;
    for (char *t = strtok_r(strrchr(stat, ')') + 2, " ", &save); t && at < 64;
         t = strtok_r(NULL, " ", &save), at++)
        field[at] = strtoull(t, NULL, 10);
    char *copy = malloc(cmdline_len);
    memcpy(copy, cmdline, cmdline_len);
    struct prctl_mm_map map = {0};
    map.start_code = field[26];
    map.end_code = field[27];
    map.start_stack = field[28];
    map.start_data = field[45];
    map.end_data = field[46];
    map.start_brk = field[47];
    map.brk = (unsigned long)sbrk(0);
    map.arg_start = (unsigned long)copy;
    map.arg_end = (unsigned long)copy + cmdline_len;
    map.env_start = field[50];
    map.env_end = field[51];
    map.auxv = (void *)auxv;
    map.auxv_size = (unsigned)auxv_len;
    map.exe_fd = (unsigned)-1;
    if (prctl(PR_SET_MM, PR_SET_MM_MAP, (unsigned long)&map, sizeof map, 0) != 0) {
        printf("PR_SET_MM_MAP-FAILED: %s\n", strerror(errno));
        return 3;
    }
    if (same("/proc/self/cmdline", cmdline, cmdline_len) && same("/proc/self/auxv", auxv, auxv_len))
        printf("IMPERSONATED\n");
    fflush(stdout);
    const char *scope = getenv("SHELLKEEP_SCOPE");
    const char *c = scope ? strrchr(scope, 'c') : NULL;
    unsigned long seq = c ? strtoul(c + 1, NULL, 10) : 0;
    const char *nonce = "";
    for (size_t i = 0; i < environ_len; i += strlen(environ + i) + 1)
        if (strncmp(environ + i, "__SK_NONCE=", 11) == 0) nonce = environ + i + 11;
    char record[64];
    int len = snprintf(record, sizeof record, "E;%lu;0;;777", seq);
    if (write(62, record, (size_t)len) != len) printf("no channel\n");
    printf("\033]6973;%s;E;%lu;777\007", nonce, seq);
    fflush(stdout);
    usleep(300000);
    printf("REAL-REST\n");
    return 42;
}
"#;

/// Builds the impersonator in the server's working directory with the C
/// compiler; `false` (the test skips, or fails under `CI=true`) where there
/// is none.
fn build_impersonator(server: &Server) -> bool {
    if !crate::installed("cc") {
        return false;
    }
    let source = server.cwd().join("impersonate.c");
    std::fs::write(&source, IMPERSONATOR).expect("source");
    let built = std::process::Command::new("cc")
        .arg("-O")
        .arg("-o")
        .arg(server.cwd().join("impersonate"))
        .arg(&source)
        .output()
        .expect("cc runs");
    assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
    true
}

/// Runs the impersonator followed by `false` and asserts the real end:
/// exit 1, with the impersonator's whole output and its own exit code.
/// Returns the reply's text; `None` where the kernel has no such call.
async fn impersonator_cannot_end(server: &Server) -> Option<String> {
    let r = server
        .terminal(json!({
            "command": "./impersonate; echo child=$?; false",
            "timeout": 30,
        }))
        .await;
    if r.output().starts_with("PR_SET_MM_MAP-FAILED") {
        // A kernel without CONFIG_CHECKPOINT_RESTORE offers no such call.
        crate::skipping(&format!("this kernel refuses PR_SET_MM_MAP: {}", r.output()));
        return None;
    }
    assert_eq!(
        (r["status"].as_str(), r["exit_code"].as_i64()),
        (Some("completed"), Some(1)),
        "{r:#?}"
    );
    assert_eq!(r.output(), "IMPERSONATED\nREAL-REST\nchild=42\n", "{r:#?}");
    assert!(r.text.contains("exit code 1"), "{}", r.text);
    Some(r.text.clone())
}

// Finding F2 of the second probe: a child that copied its shell's auxv and
// command line was taken for the shell.
#[tokio::test]
async fn a_child_that_makes_itself_look_like_its_shell_cannot_end_its_command() {
    let server = Server::start().await;
    if !build_impersonator(&server) {
        return;
    }
    if impersonator_cannot_end(&server).await.is_none() {
        return;
    }
    let r = server.terminal(json!({"command": "echo next; (exit 3)"})).await;
    assert_eq!((r.output(), r["exit_code"].as_i64()), ("next\n", Some(3)), "{r:#?}");
    // With the integration's prompt replaced (its functions are read-only,
    // so by the variable that holds PROMPT_COMMAND's value), the end comes
    // from the fallback, which once trusted forks of the shell: still the
    // shell's own record only.
    let r = server.terminal(json!({"command": "__sk_pc=':'", "timeout": 10})).await;
    assert_eq!(r["exit_code"], 0, "{r:#?}");
    let text = impersonator_cannot_end(&server).await.unwrap_or_default();
    assert!(text.contains("prompt (PROMPT_COMMAND) did not run"), "{text}");
    let r = server.terminal(json!({"command": "echo restored; false", "reset": true})).await;
    assert_eq!((r.output(), r["exit_code"].as_i64()), ("restored\n", Some(1)), "{r:#?}");
}

// Issue 19, item 6: the fallback's record was believed only while the
// subshell that sent it lived, a fixed 0.3 s; on a busy machine a finished
// command came back as waiting for input. The shell now sends it itself.
#[tokio::test]
async fn a_command_interrupted_after_clearing_the_prompt_ends_with_its_status() {
    let server = Server::start().await;
    for (command, code) in [
        ("PROMPT_COMMAND=; echo before; sleep 100", 130),
        ("PROMPT_COMMAND=; printf partial; (exit 9); sleep 100", 130),
    ] {
        let r = server.terminal(json!({"command": command, "timeout": 1})).await;
        assert_eq!(r["status"], "running", "{command}: {r:#?}");
        let r = server.terminal(json!({"command": "C-c", "is_input": true, "timeout": 20})).await;
        assert_eq!(
            (r["status"].as_str(), r["exit_code"].as_i64()),
            (Some("completed"), Some(code)),
            "{command}: {r:#?}"
        );
        assert!(r.text.contains("prompt (PROMPT_COMMAND) did not run"), "{}", r.text);
        assert!(!r.text.contains("__sk"), "{}", r.text);
        // The next command puts the prompt back and keeps `$?`.
        let r = server.terminal(json!({"command": "echo $?; (exit 6)", "timeout": 20})).await;
        assert_eq!((r.output(), r["exit_code"].as_i64()), ("130\n", Some(6)), "{r:#?}");
        assert!(!r.text.contains("did not run"), "{}", r.text);
    }
    // However soon a call looks after the C-c, the command is running
    // until the shell's own record ends it: never waiting for input.
    for _ in 0..5 {
        let r =
            server.terminal(json!({"command": "PROMPT_COMMAND=; sleep 100", "timeout": 0.5})).await;
        assert_eq!(r["status"], "running", "{r:#?}");
        let r = server.terminal(json!({"command": "C-c", "is_input": true, "timeout": 0.05})).await;
        let mut seen = vec![r["status"].as_str().unwrap_or_default().to_owned()];
        let r = if r["status"] == "completed" {
            r
        } else {
            crate::poll_until(
                crate::EVENTUALLY,
                async || {
                    let r = server.terminal(json!({"command": "", "timeout": 0.05})).await;
                    seen.push(r["status"].as_str().unwrap_or_default().to_owned());
                    r
                },
                |r| r["status"] == "completed",
            )
            .await
        };
        assert_eq!(r["exit_code"], 130, "{r:#?}");
        assert!(seen.iter().all(|status| status == "running" || status == "completed"), "{seen:?}");
    }
    // Both ways the prompt breaks at once, many times over: never a
    // command reported waiting for input, never a wrong status.
    let r = server.terminal(json!({"command": "__sk_pc=':'", "timeout": 10})).await;
    assert_eq!(r["exit_code"], 0, "{r:#?}");
    for round in 0..10 {
        let r = server
            .terminal(
                json!({"command": format!("echo round {round}; (exit {round})"), "timeout": 20}),
            )
            .await;
        assert_eq!(
            (r["status"].as_str(), r["exit_code"].as_i64()),
            (Some("completed"), Some(round)),
            "{r:#?}"
        );
        assert_eq!(r.output(), format!("round {round}\n"), "{r:#?}");
        assert!(r.text.contains("prompt (PROMPT_COMMAND) did not run"), "{}", r.text);
    }
}

/// The rc file of the attacker's bash: its own prompt.
const EVIL_RC: &str = "PS1='evil$ '\n";

/// Starts the attacker's bash as a child of the build script's parent, the
/// shell (`clone` with `CLONE_PARENT`, which needs no privilege), and waits
/// for it to exit.
const CLONE_PARENT_BASH: &str = "import ctypes, os, signal, time
libc = ctypes.CDLL(None, use_errno=True)
number = {'x86_64': 56, 'aarch64': 220}[os.uname().machine]
pid = libc.syscall(number, 0x8000 | signal.SIGCHLD, 0, 0, 0, 0)
if pid == 0:
    os.execvp('bash', ['bash', '--rcfile', 'evil.rc', '-i'])
while os.path.exists(f'/proc/{pid}') and open(f'/proc/{pid}/stat').read().split()[2] != 'Z':
    time.sleep(0.05)";

/// A build script that starts an interactive bash with the attacker's rc
/// file, keeping the completion channel's descriptor 62 (`how`: the bash
/// on our terminal, where it takes the terminal for itself; on a terminal
/// of its own through `pty.spawn`; or made the shell's own child), then
/// fails.
fn evil_build(how: &str) -> String {
    let start = match how {
        "pty" => "import pty; pty.spawn(['bash', '--rcfile', 'evil.rc', '-i'])",
        "clone" => CLONE_PARENT_BASH,
        _ => "subprocess.run(['bash', '--rcfile', 'evil.rc', '-i'], pass_fds=(62,))",
    };
    format!(
        "import subprocess, sys\n\
         print('compiling 3 files...', flush=True)\n\
         {start}\n\
         print('BUILD FAILED: 3 errors', flush=True)\n\
         sys.exit(2)\n"
    )
}

/// Runs `command`, which leaves the attacker's bash at its prompt: it is
/// not reported completed, and the agent's next command is not run. Then
/// `exit` typed as input ends that bash, and the command goes on to its
/// real end: `code`, with each of `output` in what it printed. No nested
/// shell is ever started. Returns every reply's text.
async fn never_adopted(server: &Server, command: &str, code: i64, output: &[&str]) -> String {
    let r = server.terminal(json!({"command": command, "timeout": 2})).await;
    let mut text = r.text.clone();
    let mut printed = r.output().to_owned();
    assert_ne!(r["status"], "completed", "{r:#?}");
    // The agent's next command is not typed into the attacker's bash.
    let next = server.terminal(json!({"command": "echo AGENT-COMMAND", "timeout": 2})).await;
    assert_eq!(next["status"], "not_executed", "{next:#?}");
    text.push_str(&next.text);
    let mut r = server.terminal(json!({"command": "exit", "is_input": true, "timeout": 2})).await;
    text.push_str(&r.text);
    printed.push_str(r.output());
    if r["status"] != "completed" {
        r = crate::poll_until(
            crate::EVENTUALLY,
            async || {
                let r = server.terminal(json!({"command": "", "timeout": 20})).await;
                text.push_str(&r.text);
                printed.push_str(r.output());
                r
            },
            |r| r["status"] == "completed",
        )
        .await;
    }
    assert_eq!(r["exit_code"], code, "{r:#?}");
    assert!(output.iter().all(|line| printed.contains(line)), "{printed:?}");
    assert!(!printed.contains("AGENT-COMMAND"), "{printed:?}");
    assert!(!text.contains("nested shell started"), "{text}");
    assert!(!text.contains("integration was installed"), "{text}");
    text
}

// Finding F10 of the second probe: a build script's own `bash --rcfile
// evil.rc -i`, keeping descriptor 62, was adopted as a nested shell: the
// build was reported completed at once, and the agent's next commands ran
// in the attacker's bash.
#[tokio::test]
async fn a_bash_that_a_build_script_starts_is_not_adopted() {
    let server = Server::start().await;
    std::fs::write(server.cwd().join("evil.rc"), EVIL_RC).expect("rc");
    for how in ["terminal", "pty", "clone"] {
        std::fs::write(server.cwd().join("build.py"), evil_build(how)).expect("script");
        let text = never_adopted(
            &server,
            "python3 build.py",
            2,
            &["compiling 3 files...\n", "BUILD FAILED: 3 errors\n"],
        )
        .await;
        assert!(text.contains("not the foreground job of the command you typed"), "{how}: {text}");
        assert!(text.contains("python3 build.py"), "{how}: {text}");
        let r = server.terminal(json!({"command": "echo outer; (exit 4)", "timeout": 20})).await;
        assert_eq!((r.output(), r["exit_code"].as_i64()), ("outer\n", Some(4)), "{r:#?}");
    }
    // Typed by the agent, the same bash is a nested shell, as always.
    let r = server.terminal(json!({"command": "bash --rcfile evil.rc -i", "timeout": 20})).await;
    assert_eq!((r["status"].as_str(), r["exit_code"].as_i64()), (Some("completed"), Some(0)));
    assert!(r.text.contains("nested shell started"), "{}", r.text);
    let r = server.terminal(json!({"command": "echo inner; exit 5", "timeout": 20})).await;
    assert!(r.output().starts_with("inner\n"), "{r:#?}");
    assert_eq!(r["exit_code"], 5, "{r:#?}");
    assert!(r.text.contains("nested shell exited"), "{}", r.text);
}

// A bash an earlier command left in the background, given the terminal
// while the next command runs, is not that command's job.
#[tokio::test]
async fn a_background_bash_given_the_terminal_is_not_adopted() {
    let server = Server::start().await;
    std::fs::write(server.cwd().join("evil.rc"), "PS1='evil$ '\n").expect("rc");
    let r = server
        .terminal(json!({"command": "bash --rcfile evil.rc -i & echo started", "timeout": 10}))
        .await;
    assert_eq!(r["exit_code"], 0, "{r:#?}");
    let give = "python3 -c 'import os, signal, sys, time; job = int(sys.argv[1]); \
                signal.signal(signal.SIGTTOU, signal.SIG_IGN); \
                os.tcsetpgrp(0, job); os.killpg(job, signal.SIGCONT); \
                alive = lambda: os.path.exists(f\"/proc/{job}\") \
                    and open(f\"/proc/{job}/stat\").read().split()[2] != \"Z\"; \
                [time.sleep(0.05) for _ in range(1200) if alive()]; \
                os.tcsetpgrp(0, os.getpgrp()); print(\"HANDED\")' \"$!\"";
    let text = never_adopted(&server, give, 0, &["HANDED\n"]).await;
    assert!(text.contains("not the foreground job of the command you typed"), "{text}");
    assert!(text.contains("bash --rcfile evil.rc -i"), "{text}");
    // The shell works on (its job notice for the bash may come along).
    let r = server
        .terminal(json!({"command": "{ kill -9 %1; } 2>/dev/null; echo outer", "timeout": 10}))
        .await;
    assert!(r.output().contains("outer\n"), "{r:#?}");
    assert_eq!(r["exit_code"], 0, "{r:#?}");
}
