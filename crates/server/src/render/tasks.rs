//! The words of MCP Tasks: a terminal task's input request, the refusals
//! of `tasks/update`, of a task over the budget and of an unknown task id,
//! the methods this version of the extension does not have, and the note
//! that a `run` was killed by the client's cancellation. It decides
//! nothing: `tasks` does.

use std::time::Duration;

use super::{attach_command, echo, span};

/// The message of a terminal task waiting for input (its status message
/// and the text of its input request): the prompt (`None`: it waits with
/// no prompt) and how to answer it, with the session's name.
pub(crate) fn task_waits_for_input(session: &str, prompt: Option<&str>) -> String {
    let what = match prompt.map(str::trim).filter(|prompt| !prompt.is_empty()) {
        Some(prompt) => format!("The command waits for input at the prompt {}.", echo(prompt)),
        None => "The command waits for input (no prompt shown).".to_owned(),
    };
    let call = serde_json::json!({"session": session, "command": "ANSWER", "is_input": true});
    format!(
        "{what} Answer it with the terminal tool: {call} (or `keys`, or C-c to stop it); the \
         task then goes on and ends with the command. A password is the person's: they answer it \
         with `{}` in a terminal of their own.",
        attach_command(session)
    )
}

/// Why a terminal call on `session` is refused while the terminal task
/// `task` runs its command there.
pub(crate) fn session_held_by_task(session: &str, task: &str) -> String {
    format!(
        "Not run: the session {} is held by the task {task}, whose command runs there. Poll it \
         with tasks/get, stop it with tasks/cancel, or use another session.",
        echo(session)
    )
}

/// Why `tasks/update` is refused.
pub(crate) fn task_update_refused() -> String {
    "tasks/update is not taken: a command's input goes to its terminal, never through the \
     client's forms (where a password would pass through the client). Answer the prompt with the \
     terminal tool and is_input=true on the task's session, as the task's status message says."
        .to_owned()
}

/// Why a call did not become a task: `limit` tasks of this client run.
pub(crate) fn too_many_tasks(limit: usize) -> String {
    format!(
        "Not run: {limit} tasks of this client run already, as many as the server's sessions \
         (--max-sessions). Poll one with tasks/get until it ends, or stop one with tasks/cancel, \
         then call again."
    )
}

/// The error for a task id this client does not have.
pub(crate) fn unknown_task(id: &str) -> String {
    format!(
        "Unknown task {}: this client has no task with that id (a task is kept for its ttlMs \
         from its creation; another client's tasks are not yours).",
        echo(id)
    )
}

/// The `-32601` error of a method this server does not have (a method of
/// the Tasks extension that this version no longer has says what to do
/// instead).
pub(crate) fn unknown_method(method: &str) -> String {
    removed_task_method(method).unwrap_or_else(|| {
        format!(
            "Method not found: {method:?}. This server offers the MCP methods initialize, ping, \
             tools/list and tools/call."
        )
    })
}

/// The `-32601` error of a method the Tasks extension had in 2025-11-25
/// and no longer has (`tasks/result`, `tasks/list`), or `None` for another
/// method.
fn removed_task_method(method: &str) -> Option<String> {
    let instead = match method {
        "tasks/result" => "poll tasks/get: once the task ended, its result is there, inline",
        "tasks/list" => "keep the taskId the tools/call returned; tasks/get reads one task",
        _ => return None,
    };
    Some(format!(
        "Method not found: {method} is not part of the Tasks extension \
         (io.modelcontextprotocol/tasks) as the 2026-07-28 protocol defines it; {instead}."
    ))
}

/// The note, on the next reply, that a `run` was killed because the client
/// cancelled its call (`command` masked and cut, `number` its output's,
/// `after` how long it ran).
pub(crate) fn run_cancelled_by_client(command: &str, number: u64, after: Duration) -> String {
    format!(
        "[The previous run {} (run {number}) was killed by the client's cancellation after {}; \
         what it printed is kept: output {{\"run\": {number}}}. For work longer than the client \
         waits, start a background job (terminal background=true) or a terminal command and \
         poll it.]",
        echo(command),
        span(after),
    )
}

/// The note for `more` cancelled runs beyond those named.
pub(crate) fn more_runs_cancelled(more: usize) -> String {
    format!(
        "[{more} more runs were killed by the client's cancellation; `shellkeep audit` lists them.]"
    )
}

/// What `run`'s description says of how long a call blocks (`longest`: the
/// policy's longest execution limit and the grace period) and what to use
/// for longer work.
pub(crate) fn run_blocks(longest: Duration) -> String {
    format!(
        "A call blocks until its command ends: up to {} under this policy's categories, up to \
         timeout_sec when given. A client that stops waiting sooner (many stop at 60 s) cancels \
         the call, which kills the command (the next reply says so). For longer work start a \
         background job (terminal with background=true) or a terminal command, and poll it. A \
         client that declares the Tasks extension (io.modelcontextprotocol/tasks) gets a task at \
         once instead, to poll with tasks/get.",
        span(longest)
    )
}

/// What `terminal`'s `timeout` description says of tasks: which calls
/// become one (`max_wait`: the server's `--max-wait`).
pub(crate) fn terminal_task_rule(max_wait: Duration) -> String {
    format!(
        "For a client that declares the Tasks extension, a new command with a timeout over {} \
         becomes a task: the call returns at once, tasks/get gives this reply when the command \
         ends (or the timeout runs out), and the session is the task's meanwhile.",
        span(max_wait)
    )
}

/// Why a `run` did not become a task: the server's `limit` places are
/// taken by sessions and running tasks.
pub(crate) fn budget_full(limit: usize) -> String {
    format!(
        "Not run: the server's {limit} places (--max-sessions) are all taken by sessions and \
         running tasks, and a run task takes one. Close a session you no longer need \
         (session_close), or wait for a task to end (tasks/get), then call again."
    )
}

/// The error of a task whose call gave what no call gives (a task, or a
/// reply that is not JSON): a bug of ours, never the command's doing.
pub(crate) fn task_broken() -> String {
    "The task's call ended in a way no call ends (a bug of shellkeep's): run the command again."
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removed_methods_say_what_to_do_instead_and_others_are_unknown() {
        let result = unknown_method("tasks/result");
        assert!(result.contains("tasks/result is not part") && result.contains("poll tasks/get"));
        assert!(unknown_method("tasks/list").contains("keep the taskId"));
        let other = unknown_method("foo/bar");
        assert!(other.starts_with("Method not found: \"foo/bar\"") && !other.contains("Tasks"));
    }

    #[test]
    fn the_input_message_gives_the_prompt_the_call_and_the_persons_way() {
        let message = task_waits_for_input("build", Some("Continue? [y/N] "));
        assert!(message.contains("at the prompt \"Continue? [y/N]\""), "{message}");
        assert!(
            message.contains(r#"{"session":"build","command":"ANSWER","is_input":true}"#),
            "{message}"
        );
        assert!(message.contains("shellkeep attach build --server"), "{message}");
        let bare = task_waits_for_input("default", None);
        assert!(bare.contains("no prompt shown") && bare.contains(r#""session":"default""#));
        // A prompt of any length is cut.
        assert!(task_waits_for_input("a", Some(&"x".repeat(100_000))).len() < 1_000);
    }

    #[test]
    fn runs_description_states_how_long_a_call_blocks() {
        let text = run_blocks(Duration::from_secs(905));
        assert!(text.contains("up to 15 min 5 s") || text.contains("905"), "{text}");
        assert!(text.contains("background=true") && text.contains("tasks/get"), "{text}");
    }

    #[test]
    fn snapshot_task_words() {
        let lines = [
            task_waits_for_input("dev", Some("Password: ")),
            task_waits_for_input("dev", None),
            session_held_by_task("dev", "3f2a"),
            task_update_refused(),
            too_many_tasks(16),
            unknown_task("nope"),
            unknown_method("tasks/result"),
            unknown_method("foo/bar"),
            run_cancelled_by_client("sleep 100", 3, Duration::from_millis(2_500)),
            more_runs_cancelled(4),
            run_blocks(Duration::from_secs(1800)),
            terminal_task_rule(Duration::from_secs(600)),
            budget_full(8),
            task_broken(),
        ];
        // The attach command names this server's process id.
        expect_test::expect![[r#"
            The command waits for input at the prompt "Password:". Answer it with the terminal tool: {"session":"dev","command":"ANSWER","is_input":true} (or `keys`, or C-c to stop it); the task then goes on and ends with the command. A password is the person's: they answer it with `shellkeep attach dev --server PID --write` in a terminal of their own.
            The command waits for input (no prompt shown). Answer it with the terminal tool: {"session":"dev","command":"ANSWER","is_input":true} (or `keys`, or C-c to stop it); the task then goes on and ends with the command. A password is the person's: they answer it with `shellkeep attach dev --server PID --write` in a terminal of their own.
            Not run: the session "dev" is held by the task 3f2a, whose command runs there. Poll it with tasks/get, stop it with tasks/cancel, or use another session.
            tasks/update is not taken: a command's input goes to its terminal, never through the client's forms (where a password would pass through the client). Answer the prompt with the terminal tool and is_input=true on the task's session, as the task's status message says.
            Not run: 16 tasks of this client run already, as many as the server's sessions (--max-sessions). Poll one with tasks/get until it ends, or stop one with tasks/cancel, then call again.
            Unknown task "nope": this client has no task with that id (a task is kept for its ttlMs from its creation; another client's tasks are not yours).
            Method not found: tasks/result is not part of the Tasks extension (io.modelcontextprotocol/tasks) as the 2026-07-28 protocol defines it; poll tasks/get: once the task ended, its result is there, inline.
            Method not found: "foo/bar". This server offers the MCP methods initialize, ping, tools/list and tools/call.
            [The previous run "sleep 100" (run 3) was killed by the client's cancellation after 2.5 s; what it printed is kept: output {"run": 3}. For work longer than the client waits, start a background job (terminal background=true) or a terminal command and poll it.]
            [4 more runs were killed by the client's cancellation; `shellkeep audit` lists them.]
            A call blocks until its command ends: up to 30 minutes under this policy's categories, up to timeout_sec when given. A client that stops waiting sooner (many stop at 60 s) cancels the call, which kills the command (the next reply says so). For longer work start a background job (terminal with background=true) or a terminal command, and poll it. A client that declares the Tasks extension (io.modelcontextprotocol/tasks) gets a task at once instead, to poll with tasks/get.
            For a client that declares the Tasks extension, a new command with a timeout over 10 minutes becomes a task: the call returns at once, tasks/get gives this reply when the command ends (or the timeout runs out), and the session is the task's meanwhile.
            Not run: the server's 8 places (--max-sessions) are all taken by sessions and running tasks, and a run task takes one. Close a session you no longer need (session_close), or wait for a task to end (tasks/get), then call again.
            The task's call ended in a way no call ends (a bug of shellkeep's): run the command again."#]].assert_eq(&lines.join("\n").replace(&format!("--server {} ", std::process::id()), "--server PID "));
    }
}
