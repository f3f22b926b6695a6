//! Snapshot tests of terminal replies: for each outcome, the main events
//! and the input reports, a fixture [`Reply`] and the text and structured
//! content (JSON) an agent reads. They are the reviewable record of every
//! word; `UPDATE_EXPECT=1 cargo test -p shellkeep --bin shellkeep` rewrites
//! them after a deliberate change.

use std::path::PathBuf;
use std::time::Duration;

use expect_test::{Expect, expect};
use shellkeep_engine::Shown;
use shellkeep_engine::TerminationMode;
use shellkeep_engine::{
    AtPrompt, Event, InputReport, NotRun, Outcome, Reader, Reply, SessionError, ShellExit,
    ShellFailure, WaitEnded, Written,
};
use shellkeep_engine::{KeyError, MAX_KEYS};

use super::{key_error, session_refused, terminal, typed_key_name};

/// A reply about `echo hi` in `/home/me/project` that printed `output`.
fn reply(outcome: Outcome, output: &str) -> Reply {
    Reply {
        command: "echo hi".to_owned(),
        outcome,
        output: Shown { text: output.to_owned(), ..Shown::empty() },
        screen: false,
        input: None,
        idle_output: None,
        events: Vec::new(),
        cwd: PathBuf::from("/home/me/project"),
        python: Some(PathBuf::from("/usr/bin/python3")),
        duration: Duration::from_millis(1_500),
        continued: false,
        previous: None,
        number: Some(1),
        first_line: 0,
        look_again_within: None,
        unfinished_line: None,
    }
}

/// A reply about a command still running under a limit.
fn running(outcome: Outcome, output: &str) -> Reply {
    Reply { look_again_within: Some(Duration::from_secs(42)), ..reply(outcome, output) }
}

/// Checks the text blocks (separated by a line of `=`) and the structured
/// content of `reply` against `expected`.
fn check(reply: &Reply, expected: Expect) {
    let (blocks, structured) = terminal(reply);
    let text = blocks.into_texts().join("\n=====\n");
    let json = serde_json::to_string_pretty(&structured).expect("serializable");
    expected.assert_eq(&format!("{text}\n-----\n{json}\n"));
}

#[test]
fn completed() {
    check(
        &reply(Outcome::Completed { exit_code: 0 }, "hi\n"),
        expect![[r#"
            hi
            [The command completed with exit code 0.]
            [Current working directory: /home/me/project]
            [Python interpreter: /usr/bin/python3]
            -----
            {
              "status": "completed",
              "exit_code": 0,
              "duration_ms": 1500,
              "cwd": "/home/me/project",
              "python_interpreter": "/usr/bin/python3",
              "truncated": false,
              "output": "hi\n"
            }
        "#]],
    );
}

#[test]
fn completed_after_a_key() {
    let mut reply = reply(Outcome::Completed { exit_code: 130 }, "^C\n");
    reply.input = Some(InputReport::Sent { key: Some("C-c".into()), delivered: 1, total: 1 });
    reply.continued = true;
    check(
        &reply,
        expect![[r#"
            [Below is the output of the previous command.]
            ^C
            [The command completed with exit code 130. CTRL+C was sent.]
            [Current working directory: /home/me/project]
            [Python interpreter: /usr/bin/python3]
            -----
            {
              "status": "completed",
              "exit_code": 130,
              "key_sent": "C-c",
              "duration_ms": 1500,
              "cwd": "/home/me/project",
              "python_interpreter": "/usr/bin/python3",
              "truncated": false,
              "output": "^C\n"
            }
        "#]],
    );
}

#[test]
fn killed() {
    let outcome = Outcome::Killed {
        limit: Duration::from_secs(600),
        mode: TerminationMode::Hard,
        exit_code: 137,
    };
    check(
        &reply(outcome, "working\n"),
        expect![[r#"
            working
            [The command was stopped with exit code 137: no call waited on it, polled it or sent it input for 600 s (its limit; time waiting for input not counted). It ignored SIGTERM and got SIGKILL after the grace period; nothing after it in the command line ran.]
            [Current working directory: /home/me/project]
            [Python interpreter: /usr/bin/python3]
            -----
            {
              "status": "killed",
              "exit_code": 137,
              "timeout_reason": "exec_timeout",
              "termination_mode": "hard",
              "duration_ms": 1500,
              "cwd": "/home/me/project",
              "python_interpreter": "/usr/bin/python3",
              "notes": [
                "[The command was stopped with exit code 137: no call waited on it, polled it or sent it input for 600 s (its limit; time waiting for input not counted). It ignored SIGTERM and got SIGKILL after the grace period; nothing after it in the command line ran.]"
              ],
              "truncated": false,
              "output": "working\n"
            }
        "#]],
    );
}

#[test]
fn running_quiet() {
    let outcome = Outcome::Running { why: WaitEnded::NoNewOutput(Duration::from_secs(30)) };
    check(
        &running(outcome, "step 1\n"),
        expect![[r#"
            step 1
            [The command has no new output after 30 seconds. It is still running (1.5 s): send '' to wait for more, is_input=true with text, or `keys` (C-c interrupts). Look again within 42 s to keep it running.]
            -----
            {
              "status": "running",
              "exit_code": -1,
              "wait_ended": "no_new_output",
              "duration_ms": 1500,
              "look_again_within_sec": 42.0,
              "cwd": "/home/me/project",
              "python_interpreter": "/usr/bin/python3",
              "notes": [
                "[The command has no new output after 30 seconds. It is still running (1.5 s): send '' to wait for more, is_input=true with text, or `keys` (C-c interrupts). Look again within 42 s to keep it running.]"
              ],
              "truncated": false,
              "output": "step 1\n"
            }
        "#]],
    );
}

#[test]
fn running_past_the_call_timeout() {
    let outcome = Outcome::Running { why: WaitEnded::Timeout(Duration::from_millis(500)) };
    let mut reply = running(outcome, "step 2\n");
    reply.continued = true;
    check(
        &reply,
        expect![[r#"
            [Below is the output of the previous command.]
            step 2
            [The command timed out after 0.5 seconds. It is still running (1.5 s): send '' to wait for more, is_input=true with text, or `keys` (C-c interrupts). Look again within 42 s to keep it running.]
            -----
            {
              "status": "running",
              "exit_code": -1,
              "wait_ended": "timeout",
              "duration_ms": 1500,
              "look_again_within_sec": 42.0,
              "cwd": "/home/me/project",
              "python_interpreter": "/usr/bin/python3",
              "notes": [
                "[The command timed out after 0.5 seconds. It is still running (1.5 s): send '' to wait for more, is_input=true with text, or `keys` (C-c interrupts). Look again within 42 s to keep it running.]"
              ],
              "truncated": false,
              "output": "step 2\n"
            }
        "#]],
    );
}

#[test]
fn running_after_a_cancelled_call() {
    let reply = running(Outcome::Running { why: WaitEnded::Cancelled }, "");
    check(
        &reply,
        expect![[r#"
            [The client cancelled this call. It is still running (1.5 s): send '' to wait for more, is_input=true with text, or `keys` (C-c interrupts). Look again within 42 s to keep it running.]
            -----
            {
              "status": "running",
              "exit_code": -1,
              "wait_ended": "cancelled",
              "duration_ms": 1500,
              "look_again_within_sec": 42.0,
              "cwd": "/home/me/project",
              "python_interpreter": "/usr/bin/python3",
              "notes": [
                "[The client cancelled this call. It is still running (1.5 s): send '' to wait for more, is_input=true with text, or `keys` (C-c interrupts). Look again within 42 s to keep it running.]"
              ],
              "truncated": false,
              "output": ""
            }
        "#]],
    );
}

#[test]
fn running_while_the_session_closes() {
    let reply = running(Outcome::Running { why: WaitEnded::SessionClosing }, "");
    check(
        &reply,
        expect![[r#"
            [This call stopped waiting: the session is being closed (session_close), and the command is stopped with it.]
            -----
            {
              "status": "running",
              "exit_code": -1,
              "wait_ended": "session_closing",
              "duration_ms": 1500,
              "cwd": "/home/me/project",
              "python_interpreter": "/usr/bin/python3",
              "notes": [
                "[This call stopped waiting: the session is being closed (session_close), and the command is stopped with it.]"
              ],
              "truncated": false,
              "output": ""
            }
        "#]],
    );
}

#[test]
fn waiting_for_input() {
    let mut reply = running(Outcome::WaitingForInput { shell_reading: false }, "Password: ");
    reply.unfinished_line = Some("Password: ".to_owned());
    check(
        &reply,
        expect![[r#"
            Password: 
            [The command waits for input; its prompt is the last line above. Answer with is_input=true (C-c interrupts) or send '' to wait. Waiting pauses its 42 s limit.]
            -----
            {
              "status": "waiting_for_input",
              "exit_code": -1,
              "waiting_for_input": true,
              "reader": "program",
              "prompt": "Password: ",
              "duration_ms": 1500,
              "look_again_within_sec": 42.0,
              "cwd": "/home/me/project",
              "python_interpreter": "/usr/bin/python3",
              "notes": [
                "[The command waits for input; its prompt is the last line above. Answer with is_input=true (C-c interrupts) or send '' to wait. Waiting pauses its 42 s limit.]"
              ],
              "truncated": false,
              "output": "Password: "
            }
        "#]],
    );
}

#[test]
fn waiting_for_input_read_by_the_shell() {
    let mut reply = running(Outcome::WaitingForInput { shell_reading: true }, "Name: ");
    reply.unfinished_line = Some("Name: ".to_owned());
    check(
        &reply,
        expect![[r#"
            Name: 
            [The shell reads input (`read`, or a broken integration that reset=true restores); its prompt is the last line above. Answer with is_input=true (C-c interrupts) or send '' to wait. Waiting pauses its 42 s limit.]
            -----
            {
              "status": "waiting_for_input",
              "exit_code": -1,
              "waiting_for_input": true,
              "reader": "shell",
              "prompt": "Name: ",
              "duration_ms": 1500,
              "look_again_within_sec": 42.0,
              "cwd": "/home/me/project",
              "python_interpreter": "/usr/bin/python3",
              "notes": [
                "[The shell reads input (`read`, or a broken integration that reset=true restores); its prompt is the last line above. Answer with is_input=true (C-c interrupts) or send '' to wait. Waiting pauses its 42 s limit.]"
              ],
              "truncated": false,
              "output": "Name: "
            }
        "#]],
    );
}

#[test]
fn incomplete() {
    let mut reply = reply(Outcome::Incomplete, "");
    reply.command = "echo 'open".to_owned();
    reply.number = None;
    check(
        &reply,
        expect![[r#"
            [The command is incomplete, so the shell waits for the rest of it (as at a `>` prompt). Send the remaining lines with is_input=true, or C-c to discard it.]
            -----
            {
              "status": "running",
              "exit_code": -1,
              "waiting_for_input": true,
              "duration_ms": 1500,
              "cwd": "/home/me/project",
              "python_interpreter": "/usr/bin/python3",
              "notes": [
                "[The command is incomplete, so the shell waits for the rest of it (as at a `>` prompt). Send the remaining lines with is_input=true, or C-c to discard it.]"
              ],
              "truncated": false,
              "output": ""
            }
        "#]],
    );
}

#[test]
fn incomplete_after_a_line() {
    let mut reply = reply(Outcome::Incomplete, "");
    reply.command = "cat <<EOF\nline".to_owned();
    reply.input = Some(InputReport::Sent { key: None, delivered: 5, total: 5 });
    reply.continued = true;
    reply.number = None;
    check(
        &reply,
        expect![[r#"
            [Below is the output of the previous command.]
            [The command is incomplete, so the shell waits for the rest of it (as at a `>` prompt). Send the remaining lines with is_input=true, or C-c to discard it.]
            -----
            {
              "status": "running",
              "exit_code": -1,
              "waiting_for_input": true,
              "duration_ms": 1500,
              "cwd": "/home/me/project",
              "python_interpreter": "/usr/bin/python3",
              "notes": [
                "[The command is incomplete, so the shell waits for the rest of it (as at a `>` prompt). Send the remaining lines with is_input=true, or C-c to discard it.]"
              ],
              "truncated": false,
              "output": ""
            }
        "#]],
    );
}

#[test]
fn integration_damaged() {
    check(
        &running(Outcome::IntegrationDamaged, ""),
        expect![[r#"
            [The command was NOT run: the shell reported that it never ran. A command damaged shellkeep's shell integration (an alias, function or variable it relies on, `enable -n`, a DEBUG trap), so commands can no longer run or report their end in this shell. reset=true restores a working shell.]
            -----
            {
              "status": "not_executed",
              "exit_code": -1,
              "duration_ms": 1500,
              "look_again_within_sec": 42.0,
              "cwd": "/home/me/project",
              "python_interpreter": "/usr/bin/python3",
              "notes": [
                "[The command was NOT run: the shell reported that it never ran. A command damaged shellkeep's shell integration (an alias, function or variable it relies on, `enable -n`, a DEBUG trap), so commands can no longer run or report their end in this shell. reset=true restores a working shell.]"
              ],
              "truncated": false,
              "output": ""
            }
        "#]],
    );
}

#[test]
fn not_executed_while_a_command_runs() {
    let why = NotRun::CommandRunning { reading: None };
    let outcome = Outcome::NotExecuted { command: "echo second".into(), why };
    check(
        &running(outcome, "still going\n"),
        expect![[r#"
            [Below is the output of the previous command.]
            still going
            [Your command "echo second" is NOT executed. The previous command is still running - You CANNOT send new commands until the previous command is completed.]
            [Running for 1.5 s: send '' to wait for more, is_input=true with text, or `keys` (C-c interrupts). Look again within 42 s to keep it running.]
            -----
            {
              "status": "not_executed",
              "exit_code": -1,
              "duration_ms": 1500,
              "look_again_within_sec": 42.0,
              "cwd": "/home/me/project",
              "python_interpreter": "/usr/bin/python3",
              "notes": [
                "[Your command \"echo second\" is NOT executed. The previous command is still running - You CANNOT send new commands until the previous command is completed.]",
                "[Running for 1.5 s: send '' to wait for more, is_input=true with text, or `keys` (C-c interrupts). Look again within 42 s to keep it running.]"
              ],
              "truncated": false,
              "output": "still going\n"
            }
        "#]],
    );
}

#[test]
fn not_executed_while_a_program_waits_for_input() {
    let why = NotRun::CommandRunning { reading: Some(Reader::Program) };
    let outcome = Outcome::NotExecuted { command: "echo second".into(), why };
    // An earlier reply showed the prompt: this one repeats it.
    let mut reply = running(outcome, "");
    reply.unfinished_line = Some("Continue? [y/N] ".to_owned());
    check(
        &reply,
        expect![[r#"
            [Below is the output of the previous command.]
            [Your command "echo second" is NOT executed. The previous command is still running - You CANNOT send new commands until the previous command is completed.]
            [The command waits for input; its prompt is "Continue? [y/N] ". Answer with is_input=true (C-c interrupts) or send '' to wait. Waiting pauses its 42 s limit.]
            -----
            {
              "status": "not_executed",
              "exit_code": -1,
              "waiting_for_input": true,
              "reader": "program",
              "prompt": "Continue? [y/N] ",
              "duration_ms": 1500,
              "look_again_within_sec": 42.0,
              "cwd": "/home/me/project",
              "python_interpreter": "/usr/bin/python3",
              "notes": [
                "[Your command \"echo second\" is NOT executed. The previous command is still running - You CANNOT send new commands until the previous command is completed.]",
                "[The command waits for input; its prompt is \"Continue? [y/N] \". Answer with is_input=true (C-c interrupts) or send '' to wait. Waiting pauses its 42 s limit.]"
              ],
              "truncated": false,
              "output": ""
            }
        "#]],
    );
}

#[test]
fn not_executed_while_the_shell_reads() {
    let why = NotRun::CommandRunning { reading: Some(Reader::Shell) };
    let outcome = Outcome::NotExecuted { command: "echo second".into(), why };
    check(
        &running(outcome, ""),
        expect![[r#"
            [Below is the output of the previous command.]
            [Your command "echo second" is NOT executed. The previous command is still running - You CANNOT send new commands until the previous command is completed.]
            [The shell reads input (`read`, or a broken integration that reset=true restores) with no prompt (C-d ends input). Answer with is_input=true (C-c interrupts) or send '' to wait. Waiting pauses its 42 s limit.]
            -----
            {
              "status": "not_executed",
              "exit_code": -1,
              "waiting_for_input": true,
              "reader": "shell",
              "duration_ms": 1500,
              "look_again_within_sec": 42.0,
              "cwd": "/home/me/project",
              "python_interpreter": "/usr/bin/python3",
              "notes": [
                "[Your command \"echo second\" is NOT executed. The previous command is still running - You CANNOT send new commands until the previous command is completed.]",
                "[The shell reads input (`read`, or a broken integration that reset=true restores) with no prompt (C-d ends input). Answer with is_input=true (C-c interrupts) or send '' to wait. Waiting pauses its 42 s limit.]"
              ],
              "truncated": false,
              "output": ""
            }
        "#]],
    );
}

#[test]
fn not_executed_while_a_command_is_incomplete() {
    let outcome = Outcome::NotExecuted { command: "echo second".into(), why: NotRun::Incomplete };
    let mut reply = reply(outcome, "");
    reply.command = "echo 'open".to_owned();
    reply.continued = true;
    reply.number = None;
    check(
        &reply,
        expect![[r#"
            [Below is the output of the previous command.]
            [Your command "echo second" is NOT executed: the previous command is incomplete, and the shell waits for its remaining lines.]
            [The command is incomplete, so the shell waits for the rest of it (as at a `>` prompt). Send the remaining lines with is_input=true, or C-c to discard it.]
            -----
            {
              "status": "not_executed",
              "exit_code": -1,
              "waiting_for_input": true,
              "duration_ms": 1500,
              "cwd": "/home/me/project",
              "python_interpreter": "/usr/bin/python3",
              "notes": [
                "[Your command \"echo second\" is NOT executed: the previous command is incomplete, and the shell waits for its remaining lines.]",
                "[The command is incomplete, so the shell waits for the rest of it (as at a `>` prompt). Send the remaining lines with is_input=true, or C-c to discard it.]"
              ],
              "truncated": false,
              "output": ""
            }
        "#]],
    );
}

#[test]
fn not_executed_while_a_group_gone_holds_the_terminal() {
    let why = NotRun::NotAtPrompt { pid: 4242, command_line: String::new() };
    let mut reply = reply(Outcome::NotExecuted { command: "echo second".into(), why }, "");
    reply.command = "echo second".to_owned();
    reply.number = None;
    let (blocks, _) = terminal(&reply);
    let text = blocks.into_texts().join("\n");
    assert!(
        text.contains("process group 4242, whose programs have all ended")
            && text.contains("reset=true")
            && !text.contains("Wait for that program"),
        "{text}"
    );
}

#[test]
fn not_executed_away_from_the_prompt() {
    let why = NotRun::NotAtPrompt { pid: 4242, command_line: "python3 hands.py".into() };
    let mut reply = reply(Outcome::NotExecuted { command: "echo second".into(), why }, "");
    reply.command = "echo second".to_owned();
    reply.number = None;
    check(
        &reply,
        expect![[r#"
            [Your command "echo second" is NOT executed: the shell is not at its prompt. Process 4242 (`python3 hands.py`) still has the terminal, although the previous command reported its end (a sourced script or the shell itself can do that). Wait for that program to end and send the command again, or use reset=true to stop it and start a fresh shell.]
            -----
            {
              "status": "not_executed",
              "exit_code": -1,
              "duration_ms": 1500,
              "cwd": "/home/me/project",
              "python_interpreter": "/usr/bin/python3",
              "notes": [
                "[Your command \"echo second\" is NOT executed: the shell is not at its prompt. Process 4242 (`python3 hands.py`) still has the terminal, although the previous command reported its end (a sourced script or the shell itself can do that). Wait for that program to end and send the command again, or use reset=true to stop it and start a fresh shell.]"
              ],
              "truncated": false,
              "output": ""
            }
        "#]],
    );
}

#[test]
fn not_executed_with_the_integration_damaged() {
    let why = NotRun::IntegrationDamaged;
    let outcome = Outcome::NotExecuted { command: "echo second".into(), why };
    check(
        &running(outcome, ""),
        expect![[r#"
            [Your command "echo second" is NOT executed: the shell reported that the running command never ran. A command damaged shellkeep's shell integration (an alias, function or variable it relies on, `enable -n`, a DEBUG trap), so commands can no longer run or report their end in this shell. reset=true restores a working shell.]
            -----
            {
              "status": "not_executed",
              "exit_code": -1,
              "duration_ms": 1500,
              "look_again_within_sec": 42.0,
              "cwd": "/home/me/project",
              "python_interpreter": "/usr/bin/python3",
              "notes": [
                "[Your command \"echo second\" is NOT executed: the shell reported that the running command never ran. A command damaged shellkeep's shell integration (an alias, function or variable it relies on, `enable -n`, a DEBUG trap), so commands can no longer run or report their end in this shell. reset=true restores a working shell.]"
              ],
              "truncated": false,
              "output": ""
            }
        "#]],
    );
}

#[test]
fn reset_alone() {
    let mut reply = reply(Outcome::Idle, "");
    reply.command = String::new();
    reply.number = None;
    reply.duration = Duration::ZERO;
    reply.events = vec![Event::Reset];
    check(
        &reply,
        expect![[r#"
            Terminal session has been reset. All previous environment variables and session state have been cleared.
            [The new shell started in /home/me/project.]
            [Current working directory: /home/me/project]
            [Python interpreter: /usr/bin/python3]
            -----
            {
              "status": "completed",
              "exit_code": 0,
              "duration_ms": 0,
              "cwd": "/home/me/project",
              "python_interpreter": "/usr/bin/python3",
              "notes": [
                "Terminal session has been reset. All previous environment variables and session state have been cleared.",
                "[The new shell started in /home/me/project.]"
              ],
              "truncated": false,
              "output": ""
            }
        "#]],
    );
}

#[test]
fn a_key_nothing_needed() {
    let mut reply = reply(Outcome::Idle, "");
    reply.command = String::new();
    reply.number = None;
    reply.duration = Duration::ZERO;
    reply.input = Some(InputReport::KeyNotNeeded("C-c".into()));
    check(
        &reply,
        expect![[r#"
            [No command is running, so C-c was not sent: the shell is at its prompt.]
            [Current working directory: /home/me/project]
            [Python interpreter: /usr/bin/python3]
            -----
            {
              "status": "completed",
              "exit_code": 0,
              "duration_ms": 0,
              "cwd": "/home/me/project",
              "python_interpreter": "/usr/bin/python3",
              "notes": [
                "[No command is running, so C-c was not sent: the shell is at its prompt.]"
              ],
              "truncated": false,
              "output": ""
            }
        "#]],
    );
}

/// Keys and text without Enter at the prompt are not typed there either.
#[test]
fn keys_nothing_needed() {
    let mut reply = reply(Outcome::Idle, "");
    reply.command = String::new();
    reply.number = None;
    reply.duration = Duration::ZERO;
    reply.input = Some(InputReport::KeyNotNeeded("ESC text(3) ENTER".into()));
    check(
        &reply,
        expect![[r#"
            [No command is running, so nothing was sent (ESC text(3) ENTER): the shell is at its prompt, and keys go only to a running program.]
            [Current working directory: /home/me/project]
            [Python interpreter: /usr/bin/python3]
            -----
            {
              "status": "completed",
              "exit_code": 0,
              "duration_ms": 0,
              "cwd": "/home/me/project",
              "python_interpreter": "/usr/bin/python3",
              "notes": [
                "[No command is running, so nothing was sent (ESC text(3) ENTER): the shell is at its prompt, and keys go only to a running program.]"
              ],
              "truncated": false,
              "output": ""
            }
        "#]],
    );
}

/// A list of keys sent to a program that then waits for input again.
#[test]
fn waiting_after_keys() {
    let mut reply = running(Outcome::WaitingForInput { shell_reading: false }, "> second\n");
    let key = Some("DOWN text(1) ENTER".into());
    reply.input = Some(InputReport::Sent { key, delivered: 8, total: 8 });
    check(
        &reply,
        expect![[r#"
            > second
            [The command waits for input with no prompt (C-d ends input). Sent: DOWN text(1) ENTER. Answer with is_input=true (C-c interrupts) or send '' to wait. Waiting pauses its 42 s limit.]
            -----
            {
              "status": "waiting_for_input",
              "exit_code": -1,
              "waiting_for_input": true,
              "reader": "program",
              "key_sent": "DOWN text(1) ENTER",
              "duration_ms": 1500,
              "look_again_within_sec": 42.0,
              "cwd": "/home/me/project",
              "python_interpreter": "/usr/bin/python3",
              "notes": [
                "[The command waits for input with no prompt (C-d ends input). Sent: DOWN text(1) ENTER. Answer with is_input=true (C-c interrupts) or send '' to wait. Waiting pauses its 42 s limit.]"
              ],
              "truncated": false,
              "output": "> second\n"
            }
        "#]],
    );
}

#[test]
fn input_after_the_command_finished() {
    let mut reply = reply(Outcome::Completed { exit_code: 0 }, "done\n");
    reply.input = Some(InputReport::NotSent);
    check(
        &reply,
        expect![[r#"
            done
            [The command completed with exit code 0.]
            [Current working directory: /home/me/project]
            [Python interpreter: /usr/bin/python3]
            [Your input was not sent: the command had already finished.]
            -----
            {
              "status": "completed",
              "exit_code": 0,
              "duration_ms": 1500,
              "cwd": "/home/me/project",
              "python_interpreter": "/usr/bin/python3",
              "notes": [
                "[Your input was not sent: the command had already finished.]"
              ],
              "truncated": false,
              "output": "done\n"
            }
        "#]],
    );
}

#[test]
fn input_partly_delivered() {
    let mut reply = running(Outcome::Running { why: WaitEnded::Timeout(Duration::ZERO) }, "");
    reply.input = Some(InputReport::Sent { key: None, delivered: 69_632, total: 200_001 });
    check(
        &reply,
        expect![[r#"
            [The command timed out after 0 seconds. It is still running (1.5 s): send '' to wait for more, is_input=true with text, or `keys` (C-c interrupts). Look again within 42 s to keep it running.]
            [Only 69632 of the 200001 bytes of your input were delivered: the program is not reading its input, and the rest was dropped. C-c still interrupts it.]
            -----
            {
              "status": "running",
              "exit_code": -1,
              "wait_ended": "timeout",
              "duration_ms": 1500,
              "look_again_within_sec": 42.0,
              "cwd": "/home/me/project",
              "python_interpreter": "/usr/bin/python3",
              "notes": [
                "[The command timed out after 0 seconds. It is still running (1.5 s): send '' to wait for more, is_input=true with text, or `keys` (C-c interrupts). Look again within 42 s to keep it running.]",
                "[Only 69632 of the 200001 bytes of your input were delivered: the program is not reading its input, and the rest was dropped. C-c still interrupts it.]"
              ],
              "truncated": false,
              "output": ""
            }
        "#]],
    );
}

#[test]
fn a_previous_command_background_output_and_a_cancelled_call() {
    let mut previous = reply(Outcome::Completed { exit_code: 3 }, "late\n");
    previous.command = "sleep 1; echo late; (exit 3)".to_owned();
    let mut reply = reply(Outcome::Completed { exit_code: 0 }, "next\n");
    reply.previous = Some(Box::new(previous));
    reply.idle_output = Some("bg-out\n".to_owned());
    reply.events = vec![Event::PreviousCallCancelled { ago: Duration::from_millis(2_300) }];
    check(
        &reply,
        expect![[r#"
            [The previous command finished with exit code 3 before this one started; its last output follows.]
            late
            [The previous call was cancelled by the client 2.3 s ago; the command was left running, and what it printed since is below.]
            [Printed while no command was running (background jobs):]
            bg-out
            next
            [The command completed with exit code 0.]
            [Current working directory: /home/me/project]
            [Python interpreter: /usr/bin/python3]
            -----
            {
              "status": "completed",
              "exit_code": 0,
              "duration_ms": 1500,
              "previous_call_cancelled_sec_ago": 2.3,
              "cwd": "/home/me/project",
              "python_interpreter": "/usr/bin/python3",
              "notes": [
                "[The previous command finished with exit code 3 before this one started; its last output follows.]",
                "[The previous call was cancelled by the client 2.3 s ago; the command was left running, and what it printed since is below.]",
                "[Printed while no command was running (background jobs):]"
              ],
              "previous_exit_code": 3,
              "truncated": false,
              "background_output": "bg-out\n",
              "previous_output": "late\n",
              "output": "next\n"
            }
        "#]],
    );
}

#[test]
fn a_previous_command_that_was_killed() {
    let outcome = Outcome::Killed {
        limit: Duration::from_secs(30),
        mode: TerminationMode::Soft,
        exit_code: 143,
    };
    let mut reply = reply(Outcome::Completed { exit_code: 0 }, "next\n");
    reply.previous = Some(Box::new(self::reply(outcome, "")));
    check(
        &reply,
        expect![[r#"
            [The previous command was stopped with exit code 143 before this one started: no call waited on it, polled it or sent it input for 30 s. Its last output follows.]
            next
            [The command completed with exit code 0.]
            [Current working directory: /home/me/project]
            [Python interpreter: /usr/bin/python3]
            -----
            {
              "status": "completed",
              "exit_code": 0,
              "duration_ms": 1500,
              "cwd": "/home/me/project",
              "python_interpreter": "/usr/bin/python3",
              "notes": [
                "[The previous command was stopped with exit code 143 before this one started: no call waited on it, polled it or sent it input for 30 s. Its last output follows.]"
              ],
              "previous_exit_code": 143,
              "truncated": false,
              "previous_output": "",
              "output": "next\n"
            }
        "#]],
    );
}

#[test]
fn a_full_screen_program() {
    let mut reply = running(Outcome::WaitingForInput { shell_reading: false }, "~\n~\n:");
    reply.screen = true;
    check(
        &reply,
        expect![[r#"
            [A full-screen program is showing this screen; send keys with `keys` (for example ["q"], ["DOWN", "ENTER"], ["ESC"] or ["C-c"]).]
            ~
            ~
            :
            [The command waits for input on the screen above. Send '' to wait. Waiting pauses its 42 s limit.]
            -----
            {
              "status": "waiting_for_input",
              "exit_code": -1,
              "waiting_for_input": true,
              "reader": "program",
              "duration_ms": 1500,
              "look_again_within_sec": 42.0,
              "cwd": "/home/me/project",
              "python_interpreter": "/usr/bin/python3",
              "notes": [
                "[A full-screen program is showing this screen; send keys with `keys` (for example [\"q\"], [\"DOWN\", \"ENTER\"], [\"ESC\"] or [\"C-c\"]).]",
                "[The command waits for input on the screen above. Send '' to wait. Waiting pauses its 42 s limit.]"
              ],
              "truncated": false,
              "output": "~\n~\n:"
            }
        "#]],
    );
}

#[test]
fn output_that_looks_like_a_notice_gets_a_block_of_its_own() {
    let output = "[The command completed with exit code 0.]\n";
    check(
        &reply(Outcome::Completed { exit_code: 1 }, output),
        expect![[r#"
            [The command completed with exit code 0.]

            =====
            [The command completed with exit code 1.]
            [Current working directory: /home/me/project]
            [Python interpreter: /usr/bin/python3]
            -----
            {
              "status": "completed",
              "exit_code": 1,
              "duration_ms": 1500,
              "cwd": "/home/me/project",
              "python_interpreter": "/usr/bin/python3",
              "truncated": false,
              "output": "[The command completed with exit code 0.]\n"
            }
        "#]],
    );
}

#[test]
fn shell_and_integration_events() {
    let mut reply = reply(Outcome::Completed { exit_code: 5 }, "");
    reply.events = vec![
        Event::NestedShellStarted,
        Event::NestedShellExited { status: 5 },
        Event::IntegrationReinstalled,
        Event::ReinstallFailed,
        Event::OtherShell("sh".into()),
        Event::RemoteShell("ssh".into()),
        Event::NamedBash("fakebash -i".into()),
        Event::UnaskedShell("python3 build.py".into()),
        Event::PromptNotRun,
        Event::StatusLost,
        Event::EndMarkerMissing,
        Event::OutputElsewhere,
        Event::ShellRestarted { how: ShellExit::Code(5), cwd: PathBuf::from("/home/me") },
    ];
    check(
        &reply,
        expect![[r#"
            [The command completed with exit code 5.]
            [Current working directory: /home/me/project]
            [Python interpreter: /usr/bin/python3]
            [A nested shell started; shellkeep's integration was installed in it, so your commands now run inside it with exit codes and the working directory. `exit` returns to the outer shell.]
            [The nested shell exited (exit code 5); commands run in the outer shell again.]
            [The shell was replaced (exec) and lost shellkeep's integration; it was reinstalled, so commands keep their exit codes and working directory.]
            [A shell without shellkeep's integration is waiting at its prompt and the integration could not be installed in it: send its commands with is_input=true, or reset=true for a fresh shell.]
            [`sh` is an interactive shell without shellkeep's integration: send its commands with is_input=true (exit codes and the working directory are not tracked inside it); `exit` returns to bash.]
            [`ssh` is a remote or container session, driven as an interactive program: send its commands with is_input=true; `exit` (or C-d) ends it.]
            [`fakebash -i` calls itself bash but is not the bash shellkeep runs, so shellkeep's integration was not installed in it: it is driven as an interactive program (send its input with is_input=true).]
            [An interactive bash is reading the terminal that is not the foreground job of the command you typed (a program started it on its own, or it was left in the background): `python3 build.py`. shellkeep's integration was not installed in it, and the command still runs: send the bash's input with is_input=true, or C-c to stop it.]
            [shellkeep's shell integration is damaged: its prompt (PROMPT_COMMAND) did not run, and a fallback reported the end and the exit code of the command. A command replaced its variables (its functions are read-only), or cleared PROMPT_COMMAND: reset=true restores a working shell.]
            [The exit code above may be wrong: a command broke the function of shellkeep's shell integration that keeps the command's status, so the shell integration is damaged. reset=true restores a working shell.]
            [The shell reported the end of the command, but its end marker never reached the terminal (the terminal or standard output was redirected, or an escape sequence swallowed it): the output shown is what was read before the end.]
            [The shell's standard output does not go to the terminal (`exec >file`), so the output of commands is not shown: `exec >/dev/tty 2>&1` or reset=true restores it.]
            [The shell exited (exit code 5); a new shell was started in /home/me. Variables, functions and background jobs from before are gone.]
            -----
            {
              "status": "completed",
              "exit_code": 5,
              "duration_ms": 1500,
              "cwd": "/home/me/project",
              "python_interpreter": "/usr/bin/python3",
              "notes": [
                "[A nested shell started; shellkeep's integration was installed in it, so your commands now run inside it with exit codes and the working directory. `exit` returns to the outer shell.]",
                "[The nested shell exited (exit code 5); commands run in the outer shell again.]",
                "[The shell was replaced (exec) and lost shellkeep's integration; it was reinstalled, so commands keep their exit codes and working directory.]",
                "[A shell without shellkeep's integration is waiting at its prompt and the integration could not be installed in it: send its commands with is_input=true, or reset=true for a fresh shell.]",
                "[`sh` is an interactive shell without shellkeep's integration: send its commands with is_input=true (exit codes and the working directory are not tracked inside it); `exit` returns to bash.]",
                "[`ssh` is a remote or container session, driven as an interactive program: send its commands with is_input=true; `exit` (or C-d) ends it.]",
                "[`fakebash -i` calls itself bash but is not the bash shellkeep runs, so shellkeep's integration was not installed in it: it is driven as an interactive program (send its input with is_input=true).]",
                "[An interactive bash is reading the terminal that is not the foreground job of the command you typed (a program started it on its own, or it was left in the background): `python3 build.py`. shellkeep's integration was not installed in it, and the command still runs: send the bash's input with is_input=true, or C-c to stop it.]",
                "[shellkeep's shell integration is damaged: its prompt (PROMPT_COMMAND) did not run, and a fallback reported the end and the exit code of the command. A command replaced its variables (its functions are read-only), or cleared PROMPT_COMMAND: reset=true restores a working shell.]",
                "[The exit code above may be wrong: a command broke the function of shellkeep's shell integration that keeps the command's status, so the shell integration is damaged. reset=true restores a working shell.]",
                "[The shell reported the end of the command, but its end marker never reached the terminal (the terminal or standard output was redirected, or an escape sequence swallowed it): the output shown is what was read before the end.]",
                "[The shell's standard output does not go to the terminal (`exec >file`), so the output of commands is not shown: `exec >/dev/tty 2>&1` or reset=true restores it.]",
                "[The shell exited (exit code 5); a new shell was started in /home/me. Variables, functions and background jobs from before are gone.]"
              ],
              "truncated": false,
              "output": ""
            }
        "#]],
    );
}

/// Something ran at the shell's prompt: the warning comes first, before
/// the command's own status, and names what it can.
#[test]
fn tampering_at_the_prompt() {
    let mut reply = reply(Outcome::Completed { exit_code: 1 }, "");
    reply.events = vec![
        Event::RanAtPrompt { what: AtPrompt::EndRecord, seq: 3, sender: None },
        Event::RanAtPrompt { what: AtPrompt::EndRecord, seq: 1, sender: Some(4242) },
        Event::RanAtPrompt { what: AtPrompt::StartMarker, seq: 99, sender: None },
        Event::RanAtPrompt { what: AtPrompt::Lines { count: 2 }, seq: 4, sender: None },
    ];
    check(
        &reply,
        expect![[r#"
            [WARNING: the session was tampered with: something ran in the shell at its prompt while no command of yours was running (the shell reported the end of command number 3 again). A program may have pushed a line into the shell's input (legacy TIOCSTI: `shellkeep doctor` says whether this host allows it) or read the line shellkeep typed. Such a line can change anything in the shell (its functions, variables, traps and aliases): reset=true gives a fresh one.]
            [WARNING: the session was tampered with: process 4242, not the shell, sent the end of a command (number 1) while no command was running. It was ignored. A command you ran left a process that forges shellkeep's records: reset=true stops it with the shell.]
            [WARNING: the session was tampered with: the shell started a command (number 99) while none of yours was running. A program may have pushed a line into the shell's input (legacy TIOCSTI: `shellkeep doctor` says whether this host allows it) or read the line shellkeep typed. Such a line can change anything in the shell (its functions, variables, traps and aliases): reset=true gives a fresh one.]
            [WARNING: the session was tampered with: the shell ran 2 command lines at its prompt, between your last command and this one (number 4), that no call typed. A program may have pushed a line into the shell's input (legacy TIOCSTI: `shellkeep doctor` says whether this host allows it) or read the line shellkeep typed. Such a line can change anything in the shell (its functions, variables, traps and aliases): reset=true gives a fresh one.]
            [The command completed with exit code 1.]
            [Current working directory: /home/me/project]
            [Python interpreter: /usr/bin/python3]
            -----
            {
              "status": "completed",
              "exit_code": 1,
              "duration_ms": 1500,
              "cwd": "/home/me/project",
              "python_interpreter": "/usr/bin/python3",
              "notes": [
                "[WARNING: the session was tampered with: something ran in the shell at its prompt while no command of yours was running (the shell reported the end of command number 3 again). A program may have pushed a line into the shell's input (legacy TIOCSTI: `shellkeep doctor` says whether this host allows it) or read the line shellkeep typed. Such a line can change anything in the shell (its functions, variables, traps and aliases): reset=true gives a fresh one.]",
                "[WARNING: the session was tampered with: process 4242, not the shell, sent the end of a command (number 1) while no command was running. It was ignored. A command you ran left a process that forges shellkeep's records: reset=true stops it with the shell.]",
                "[WARNING: the session was tampered with: the shell started a command (number 99) while none of yours was running. A program may have pushed a line into the shell's input (legacy TIOCSTI: `shellkeep doctor` says whether this host allows it) or read the line shellkeep typed. Such a line can change anything in the shell (its functions, variables, traps and aliases): reset=true gives a fresh one.]",
                "[WARNING: the session was tampered with: the shell ran 2 command lines at its prompt, between your last command and this one (number 4), that no call typed. A program may have pushed a line into the shell's input (legacy TIOCSTI: `shellkeep doctor` says whether this host allows it) or read the line shellkeep typed. Such a line can change anything in the shell (its functions, variables, traps and aliases): reset=true gives a fresh one.]"
              ],
              "truncated": false,
              "output": ""
            }
        "#]],
    );
}

/// A command the shell never started (another program read the line
/// typed): NOT executed, whether the shell exited or is back at its prompt.
#[test]
fn never_started() {
    let mut exited = reply(Outcome::NeverStarted { shell_exited: true }, "");
    exited.events =
        vec![Event::ShellRestarted { how: ShellExit::Code(0), cwd: PathBuf::from("/home/me") }];
    check(
        &exited,
        expect![[r#"
        [The command was NOT run: the shell exited before it started the command (the shell marks the start of every command it runs, and that mark never came), so nothing of it ran. Another program may have read the line shellkeep typed: one that takes the terminal's foreground from the shell, such as a background job of an earlier command. Send the command again; if this repeats, reset=true stops such programs with the shell.]
        [The shell exited (exit code 0); a new shell was started in /home/me. Variables, functions and background jobs from before are gone.]
        -----
        {
          "status": "not_executed",
          "exit_code": -1,
          "duration_ms": 1500,
          "cwd": "/home/me/project",
          "python_interpreter": "/usr/bin/python3",
          "notes": [
            "[The command was NOT run: the shell exited before it started the command (the shell marks the start of every command it runs, and that mark never came), so nothing of it ran. Another program may have read the line shellkeep typed: one that takes the terminal's foreground from the shell, such as a background job of an earlier command. Send the command again; if this repeats, reset=true stops such programs with the shell.]",
            "[The shell exited (exit code 0); a new shell was started in /home/me. Variables, functions and background jobs from before are gone.]"
          ],
          "truncated": false,
          "output": ""
        }
    "#]],
    );
    check(
        &reply(Outcome::NeverStarted { shell_exited: false }, ""),
        expect![[r#"
        [The command was NOT run: the shell went back to waiting at its prompt without starting the command (the shell marks the start of every command it runs, and that mark never came), so nothing of it ran. Another program may have read the line shellkeep typed: one that takes the terminal's foreground from the shell, such as a background job of an earlier command. Send the command again; if this repeats, reset=true stops such programs with the shell.]
        -----
        {
          "status": "not_executed",
          "exit_code": -1,
          "duration_ms": 1500,
          "cwd": "/home/me/project",
          "python_interpreter": "/usr/bin/python3",
          "notes": [
            "[The command was NOT run: the shell went back to waiting at its prompt without starting the command (the shell marks the start of every command it runs, and that mark never came), so nothing of it ran. Another program may have read the line shellkeep typed: one that takes the terminal's foreground from the shell, such as a background job of an earlier command. Send the command again; if this repeats, reset=true stops such programs with the shell.]"
          ],
          "truncated": false,
          "output": ""
        }
    "#]],
    );
}

#[test]
fn refused_calls() {
    let errors = [
        SessionError::Cancelled,
        SessionError::NulByte,
        SessionError::Shell(ShellFailure::Write {
            what: Written::Command,
            error: std::io::ErrorKind::BrokenPipe.into(),
        }),
        SessionError::NothingToWaitFor,
        SessionError::NothingToSendInputTo,
        SessionError::KeyWhileIncomplete,
    ];
    let mut words: Vec<String> = errors.iter().map(session_refused).collect();
    words.extend(
        [
            KeyError::Unknown("C-1".into()),
            KeyError::Spelling { text: "Ctrl+C".into(), name: "C-c".into() },
            KeyError::Empty(2),
            KeyError::TooMany(MAX_KEYS + 1),
            KeyError::TooLong(5000),
        ]
        .iter()
        .map(key_error),
    );
    words.push(typed_key_name("UP"));
    expect![[r#"
        The client cancelled this call before it started.
        The command contains a NUL byte, which no shell command can contain. Remove it (use printf '\0' to produce one).
        The session's shell failed (could not write to the shell: broken pipe). Try again, or reset=true to start a fresh shell.
        No command is running, so there is nothing to wait for. Send a command to run it.
        No command is running, so there is nothing to send input to. Run a command first, or send this as a command with is_input=false.
        The shell is waiting for the rest of an incomplete command, so keys other than C-c (discard it) and C-d (end of input) do nothing. Send the remaining lines with is_input=true.
        unknown key "C-1". In `keys`, an item that is exactly one of these names is that key: UP, DOWN, LEFT, RIGHT, HOME, END, PGUP, PGDN, INS, DEL, TAB, S-TAB, ESC, BS, ENTER, SPACE, F1 to F12, C-<x> (control, e.g. C-c, C-d, C-z), M-<x> (Alt, e.g. M-x, M-ENTER); any other item is typed as text. With is_input=true, `command` is text typed with Enter, or a control key (C-c, C-d, C-z, any C-<letter>).
        `keys` item "Ctrl+C" is written C-c. In `keys`, an item that is exactly one of these names is that key: UP, DOWN, LEFT, RIGHT, HOME, END, PGUP, PGDN, INS, DEL, TAB, S-TAB, ESC, BS, ENTER, SPACE, F1 to F12, C-<x> (control, e.g. C-c, C-d, C-z), M-<x> (Alt, e.g. M-x, M-ENTER); any other item is typed as text. With is_input=true, `command` is text typed with Enter, or a control key (C-c, C-d, C-z, any C-<letter>).
        `keys` item 2 is empty, which sends nothing: remove it, or send SPACE for a space.
        `keys` has 65 items, more than the 64 one call sends: send the rest in another call.
        `keys` holds 5000 bytes, more than the 4096 one call sends: send the rest in another call, or write long text to a file.
        [This input was typed as text, followed by Enter. To press the key UP instead, send keys=["UP"].]"#]].assert_eq(&words.join("\n"));
}

/// The most characters the notice about a running or waiting command
/// takes, besides a quoted prompt: about 200, the reply budget of issue 14.
const NOTICE_BUDGET: usize = 220;

/// Issue 14: every notice about a running or waiting command fits the
/// budget (a quoted prompt aside) and says how to poll, answer and stop it,
/// and by when to look again; issue 18: it is in the notes too, once.
#[test]
fn running_and_waiting_notices_fit_the_budget() {
    let long = Duration::from_secs(86_400);
    let waits = [
        WaitEnded::NoNewOutput(Duration::from_secs(30)),
        WaitEnded::Timeout(Duration::from_secs(3_600)),
        WaitEnded::MaxWait(Duration::from_secs(3_600)),
        WaitEnded::Cancelled,
    ];
    let mut cases: Vec<(Reply, &str)> = Vec::new();
    for why in waits {
        cases.push((running(Outcome::Running { why }, "step\n"), "running"));
    }
    for shell_reading in [false, true] {
        let reader = if shell_reading { Reader::Shell } else { Reader::Program };
        for (output, line) in [("Name: ", Some("Name: ")), ("", Some("Name: ")), ("", None)] {
            let mut waiting = running(Outcome::WaitingForInput { shell_reading }, output);
            waiting.unfinished_line = line.map(str::to_owned);
            cases.push((waiting, "waiting"));
            let why = NotRun::CommandRunning { reading: Some(reader) };
            let outcome = Outcome::NotExecuted { command: "ls".into(), why };
            let mut refused = running(outcome, output);
            refused.unfinished_line = line.map(str::to_owned);
            cases.push((refused, "waiting"));
        }
    }
    let why = NotRun::CommandRunning { reading: None };
    cases.push((running(Outcome::NotExecuted { command: "ls".into(), why }, ""), "running"));
    for (mut reply, kind) in cases {
        // A command that ran a day, with a day left: the longest numbers.
        reply.duration = long;
        reply.look_again_within = Some(long);
        let (blocks, structured) = terminal(&reply);
        let text = blocks.into_texts().join("\n");
        let notice = text
            .lines()
            .find(|line| line.contains("send '' to wait"))
            .unwrap_or_else(|| panic!("no notice says how to poll: {text}"));
        let quoted = reply.unfinished_line.as_deref().map_or(0, |line| {
            if notice.contains(&format!("{line:?}")) { line.chars().count() + 2 } else { 0 }
        });
        let size = notice.chars().count() - quoted;
        assert!(size <= NOTICE_BUDGET, "{size} characters: {notice}");
        assert!(notice.contains("is_input=true") && notice.contains("C-c"), "{notice}");
        let clock = if kind == "running" {
            "Look again within 86400 s"
        } else {
            "Waiting pauses its 86400 s limit"
        };
        assert!(notice.contains(clock), "{notice}");
        assert_eq!(text.matches("is_input=true").count(), 1, "said once: {text}");
        // Issue 18: a client that shows only the structured content gets
        // the same line, once.
        let in_notes: Vec<&String> =
            structured.notes.iter().filter(|note| note.contains("send ''")).collect();
        assert_eq!(in_notes, [notice], "{structured:?}");
        assert_eq!(structured.look_again_within_sec, Some(86_400.0));
    }
}

/// Issue 14: "its prompt is the last line above" only when the last line
/// of the output is the whole prompt; a prompt shown in pieces over two
/// replies is quoted whole.
#[test]
fn the_prompt_is_the_last_line_only_when_it_is() {
    let notice = |output: &str, line: Option<&str>| {
        let mut reply = running(Outcome::WaitingForInput { shell_reading: false }, output);
        reply.unfinished_line = line.map(str::to_owned);
        let (blocks, _) = terminal(&reply);
        let text = blocks.into_texts().join("\n");
        text.lines().last().unwrap_or_default().to_owned()
    };
    assert!(
        notice("ok\nPassword: ", Some("Password: ")).contains("its prompt is the last line above")
    );
    let pieces = notice("word: ", Some("Password: "));
    assert!(pieces.contains("its prompt is \"Password: \""), "{pieces}");
    let none = notice("searching\n", None);
    assert!(none.contains("with no prompt (C-d ends input)") && !none.contains("above"), "{none}");
}

/// Issue 18: the secret notice agrees in number with its count.
#[test]
fn the_secret_notice_agrees_in_number() {
    let one = super::masked_note(1).expect("a notice");
    assert!(
        one.starts_with("[1 secret value in the output was replaced by <secret-hidden>;"),
        "{one}"
    );
    let two = super::masked_note(2).expect("a notice");
    assert!(
        two.starts_with("[2 secret values in the output were replaced by <secret-hidden>;"),
        "{two}"
    );
    assert_eq!(super::masked_note(0), None);
}

/// A time not past: "0 s ago" in every snapshot.
fn now() -> std::time::SystemTime {
    std::time::SystemTime::now() + Duration::from_secs(3600)
}

#[test]
fn not_executed_while_a_person_holds_the_session() {
    let why = NotRun::PersonHolds { since: now() };
    let mut refused = reply(Outcome::NotExecuted { command: "ls".to_owned(), why }, "");
    refused.number = None;
    check(
        &refused,
        expect![[r#"
            [Your command "ls" is NOT executed: a person holds this session for writing (`shellkeep attach --write`, since 0 s ago), and nothing is typed into their line. Polls and the `output` tool still work; send the command again once they detach, or use another session.]
            -----
            {
              "status": "not_executed",
              "exit_code": -1,
              "duration_ms": 1500,
              "cwd": "/home/me/project",
              "python_interpreter": "/usr/bin/python3",
              "notes": [
                "[Your command \"ls\" is NOT executed: a person holds this session for writing (`shellkeep attach --write`, since 0 s ago), and nothing is typed into their line. Polls and the `output` tool still work; send the command again once they detach, or use another session.]"
              ],
              "truncated": false,
              "person_holds_since_sec_ago": 0.0,
              "output": ""
            }
        "#]],
    );
}

#[test]
fn input_refused_while_a_person_holds_the_session() {
    let mut waiting = running(Outcome::WaitingForInput { shell_reading: false }, "Password: ");
    waiting.input = Some(InputReport::PersonHolds { since: now() });
    waiting.unfinished_line = Some("Password: ".to_owned());
    check(
        &waiting,
        expect![[r#"
        Password: 
        [The command waits for input; its prompt is the last line above. Answer with is_input=true (C-c interrupts) or send '' to wait. Waiting pauses its 42 s limit.]
        [Your input was NOT sent: a person holds this session for writing (`shellkeep attach --write`, since 0 s ago). Polls and the `output` tool still work.]
        -----
        {
          "status": "waiting_for_input",
          "exit_code": -1,
          "waiting_for_input": true,
          "reader": "program",
          "prompt": "Password: ",
          "duration_ms": 1500,
          "look_again_within_sec": 42.0,
          "cwd": "/home/me/project",
          "python_interpreter": "/usr/bin/python3",
          "notes": [
            "[The command waits for input; its prompt is the last line above. Answer with is_input=true (C-c interrupts) or send '' to wait. Waiting pauses its 42 s limit.]",
            "[Your input was NOT sent: a person holds this session for writing (`shellkeep attach --write`, since 0 s ago). Polls and the `output` tool still work.]"
          ],
          "truncated": false,
          "person_holds_since_sec_ago": 0.0,
          "output": "Password: "
        }
    "#]],
    );
}

#[test]
fn completed_after_a_person_answered_a_password_prompt() {
    let mut done = reply(Outcome::Completed { exit_code: 0 }, "\ngot 7 characters\n");
    let (first, last) = (now(), now());
    let typed = shellkeep_engine::PersonTyped { first, last, keys: 8, hidden: 8 };
    done.events.push(Event::PersonTyped(typed));
    check(
        &done,
        expect![[r#"

        got 7 characters
        [The command completed with exit code 0.]
        [Current working directory: /home/me/project]
        [Python interpreter: /usr/bin/python3]
        [A person attached to this session typed 8 keys with the terminal's echo off (a password: what was typed is not shown); the last 0 s ago.]
        -----
        {
          "status": "completed",
          "exit_code": 0,
          "duration_ms": 1500,
          "cwd": "/home/me/project",
          "python_interpreter": "/usr/bin/python3",
          "notes": [
            "[A person attached to this session typed 8 keys with the terminal's echo off (a password: what was typed is not shown); the last 0 s ago.]"
          ],
          "truncated": false,
          "person_typed": {
            "keys": 8,
            "echo_off_keys": 8,
            "last_key_sec_ago": 0.0
          },
          "output": "\ngot 7 characters\n"
        }
    "#]],
    );
}

#[test]
fn completed_after_a_person_ran_a_command_at_the_prompt() {
    let mut done = reply(Outcome::Completed { exit_code: 0 }, "hi\n");
    done.idle_output = Some("ls\nCargo.toml  src\n".to_owned());
    let (first, last) = (now(), now());
    let typed = shellkeep_engine::PersonTyped { first, last, keys: 12, hidden: 2 };
    done.events.push(Event::PersonTyped(typed));
    done.events.push(Event::PersonRan { status: 2 });
    check(
        &done,
        expect![[r#"
        [Printed while no command of yours was running (a person's command at the prompt, background jobs):]
        ls
        Cargo.toml  src
        hi
        [The command completed with exit code 0.]
        [Current working directory: /home/me/project]
        [Python interpreter: /usr/bin/python3]
        [A person attached to this session typed 12 keys, 2 of them with the terminal's echo off (a password: what was typed then is not shown); the last 0 s ago.]
        [A person attached to this session ran a command at the shell's prompt; it ended with exit code 2. What it printed is the output between commands.]
        -----
        {
          "status": "completed",
          "exit_code": 0,
          "duration_ms": 1500,
          "cwd": "/home/me/project",
          "python_interpreter": "/usr/bin/python3",
          "notes": [
            "[Printed while no command of yours was running (a person's command at the prompt, background jobs):]",
            "[A person attached to this session typed 12 keys, 2 of them with the terminal's echo off (a password: what was typed then is not shown); the last 0 s ago.]",
            "[A person attached to this session ran a command at the shell's prompt; it ended with exit code 2. What it printed is the output between commands.]"
          ],
          "truncated": false,
          "person_typed": {
            "keys": 12,
            "echo_off_keys": 2,
            "last_key_sec_ago": 0.0
          },
          "person_command_exit_code": 2,
          "background_output": "ls\nCargo.toml  src\n",
          "output": "hi\n"
        }
    "#]],
    );
}

#[test]
fn reset_refused_while_a_person_holds_the_session() {
    expect!["The session was NOT reset: a person holds this session for writing (`shellkeep attach --write`, since 0 s ago). Reset it once they detach, or use another session."].assert_eq(&session_refused(&SessionError::PersonHolds { since: now() }));
}
