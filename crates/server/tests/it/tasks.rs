//! MCP Tasks (`io.modelcontextprotocol/tasks`) over stdio, in raw JSON-RPC
//! as the extension specifies: 2026-07-28 requests without a handshake,
//! each declaring (or not) the extension in its own `_meta`. The helpers
//! ([`Tasks`]) take a transport-neutral request and reply, for another
//! transport's tests to reuse.

use std::time::Duration;

use serde_json::{Value, json};

use crate::wire::Raw;
use crate::{EVENTUALLY, assert_none_survive, marker, poll_until, wait_alive};

/// The extension's id.
const TASKS: &str = "io.modelcontextprotocol/tasks";

/// A request's `_meta` for the 2026-07-28 protocol, declaring the Tasks
/// extension or not.
pub(crate) fn meta(declares_tasks: bool) -> Value {
    let extensions = if declares_tasks { json!({TASKS: {}}) } else { json!({}) };
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": extensions},
        "io.modelcontextprotocol/clientInfo": {"name": "tasks-test", "version": "0"},
    })
}

/// A JSON-RPC request `id` of `method` with `params` and [`meta`].
pub(crate) fn request(id: u64, method: &str, mut params: Value, declares_tasks: bool) -> Value {
    params["_meta"] = meta(declares_tasks);
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// The binary on stdio, spoken to in raw 2026-07-28 requests.
struct Tasks {
    raw: Raw,
    next: u64,
}

impl Tasks {
    fn start() -> Tasks {
        Tasks { raw: Raw::spawn(&[]), next: 1 }
    }

    /// Sends `method` with `params` and returns the whole reply.
    async fn ask(&mut self, method: &str, params: Value, declares_tasks: bool) -> Value {
        let id = self.next;
        self.next += 1;
        self.raw.send(&request(id, method, params, declares_tasks)).await;
        self.raw.reply(id).await
    }

    /// Calls `tool` and returns the result (a reply or a task).
    async fn call(&mut self, tool: &str, arguments: Value, declares_tasks: bool) -> Value {
        let params = json!({"name": tool, "arguments": arguments});
        let reply = self.ask("tools/call", params, declares_tasks).await;
        assert!(reply.get("error").is_none(), "{reply}");
        reply["result"].clone()
    }

    /// Calls `tool` as a task and returns the task's id, checking the
    /// handle's fields.
    async fn start_task(&mut self, tool: &str, arguments: Value) -> String {
        let task = self.call(tool, arguments, true).await;
        assert_eq!(task["resultType"], "task", "{task}");
        assert_eq!(task["status"], "working", "{task}");
        let id = task["taskId"].as_str().expect("a taskId").to_owned();
        assert!(id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()), "128 bits: {task}");
        for field in ["createdAt", "lastUpdatedAt"] {
            assert!(task[field].as_str().is_some_and(|t| t.ends_with('Z')), "{field}: {task}");
        }
        assert!(task["ttlMs"].as_u64().is_some_and(|ttl| ttl > 0), "{task}");
        assert!(task["pollIntervalMs"].as_u64().is_some_and(|ms| ms > 0), "{task}");
        assert!(task.get("content").is_none(), "a task is no reply: {task}");
        id
    }

    /// `tasks/get` of `id`: the result, or the error.
    async fn get(&mut self, id: &str) -> Value {
        self.ask("tasks/get", json!({"taskId": id}), true).await
    }

    /// Polls `tasks/get` until the task `id` has `status`; returns it.
    async fn until(&mut self, id: &str, status: &str, within: Duration) -> Value {
        let reply = poll_until(
            within,
            async || self.get(id).await,
            |reply| {
                reply["result"]["status"] == status
                    || reply["result"]["status"].as_str().is_some_and(|s| {
                        ["completed", "failed", "cancelled"].contains(&s) && s != status
                    })
                    || reply.get("error").is_some()
            },
        )
        .await;
        assert_eq!(reply["result"]["status"], status, "{reply}");
        reply["result"].clone()
    }
}

/// A reply's text and structured content with the run's duration left out
/// (the one thing two runs of the same command may not share).
pub(crate) fn without_duration(result: &Value) -> (Vec<String>, Value) {
    let texts = result["content"]
        .as_array()
        .expect("content")
        .iter()
        .map(|block| {
            let text = block["text"].as_str().unwrap_or_default();
            text.split(" · ")
                .filter(|piece| piece.strip_suffix(" s").is_none_or(|n| n.parse::<f64>().is_err()))
                .collect::<Vec<_>>()
                .join(" · ")
        })
        .collect();
    let mut structured = result["structuredContent"].clone();
    structured.as_object_mut().expect("structured content").remove("durationMs");
    (texts, structured)
}

/// A `run` as a task: `working` while its command runs, then `completed`
/// with exactly the reply a blocking call of the same command gives (text
/// and structured content), and nothing more.
#[tokio::test]
async fn a_run_task_ends_with_the_reply_a_blocking_run_gives() {
    let mut server = Tasks::start();
    let go = server.raw.scratch.path.join("go");
    let command =
        format!("until [ -e {} ]; do sleep 0.05; done; echo done; echo warn >&2", go.display());
    let arguments = json!({"command": command, "timeout_sec": 60});
    let id = server.start_task("run", arguments.clone()).await;
    let working = server.get(&id).await;
    assert_eq!(working["result"]["status"], "working", "{working}");
    assert_eq!(working["result"]["taskId"], id.as_str(), "{working}");
    assert!(working["result"].get("result").is_none(), "{working}");
    std::fs::write(&go, "").expect("let the command end");
    let ended = server.until(&id, "completed", EVENTUALLY).await;
    let result = &ended["result"];
    assert_eq!(result["structuredContent"]["stdout"], "done\n", "{ended}");
    assert_eq!(result["structuredContent"]["stderr"], "warn\n", "{ended}");
    assert_eq!(result["structuredContent"]["exitCode"], 0, "{ended}");
    // The task's record stays: a second look finds the same result.
    assert_eq!(server.get(&id).await["result"]["result"], *result);

    // The same call, blocking (the request does not declare Tasks).
    let blocking = server.call("run", arguments, false).await;
    assert_eq!(blocking["resultType"], "complete", "{blocking}");
    assert_eq!(without_duration(result), without_duration(&blocking));
}

/// The case the feature is for (90 s, beside the rest of the suite): a
/// `run` longer than a 60 s client's patience, as a task polled to its
/// end, with the reply a blocking call gives.
#[tokio::test]
async fn a_90_s_run_completes_as_a_task() {
    let mut server = Tasks::start();
    let arguments =
        json!({"command": "sleep 90; echo done", "timeout_sec": 120, "no_output_timeout_sec": 120});
    // The blocking call runs beside the task, so its reply comes as the
    // task ends; its id is far from the polls'.
    const BESIDE: u64 = 1 << 40;
    let params = json!({"name": "run", "arguments": arguments});
    server.raw.send(&request(BESIDE, "tools/call", params, false)).await;
    let id = server.start_task("run", arguments.clone()).await;
    let ended = server.until(&id, "completed", Duration::from_secs(150)).await;
    let result = &ended["result"];
    assert_eq!(result["structuredContent"]["stdout"], "done\n", "{ended}");
    assert_eq!(result["structuredContent"]["status"], "success", "{ended}");
    let blocking = server.raw.reply(BESIDE).await;
    assert_eq!(without_duration(result), without_duration(&blocking["result"]));
}

/// `tasks/cancel` stops a `run` task's command as the run's limits would
/// (its whole group), and the task ends `cancelled`; a terminal task's
/// command gets C-c and the session goes on.
#[tokio::test]
async fn a_cancelled_task_leaves_no_process() {
    let mut server = Tasks::start();
    let sleeper = format!("sleep 300.{}", marker());
    let child = format!("sleep 300.{}", marker());
    let command = format!("{child} & {sleeper}; wait");
    let id = server.start_task("run", json!({"command": command, "timeout_sec": 600})).await;
    wait_alive(&[&sleeper, &child]).await;
    let ack = server.ask("tasks/cancel", json!({"taskId": id}), true).await;
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    let ended = server.until(&id, "cancelled", EVENTUALLY).await;
    assert!(ended.get("result").is_none(), "{ended}");
    assert_none_survive(&[&sleeper, &child], EVENTUALLY).await;
    // Cancelling again changes nothing.
    let again = server.ask("tasks/cancel", json!({"taskId": id}), true).await;
    assert!(again.get("error").is_none(), "{again}");
    assert_eq!(server.get(&id).await["result"]["status"], "cancelled");

    let sleeper = format!("sleep 300.{}", marker());
    let arguments = json!({"command": sleeper, "session": "long", "timeout": 600});
    let id = server.start_task("terminal", arguments).await;
    wait_alive(&[&sleeper]).await;
    // The session is the task's while its command runs: another call is
    // refused at once, naming the task (not left to wait behind it).
    let held = server.call("terminal", json!({"command": "", "session": "long"}), false).await;
    assert_eq!(held["isError"], true, "{held}");
    let text = held["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains(&id) && text.contains("tasks/cancel"), "{held}");
    let other = server.call("terminal", json!({"command": "echo free"}), false).await;
    assert_eq!(other["structuredContent"]["output"], "free\n", "other sessions are free: {other}");
    server.ask("tasks/cancel", json!({"taskId": id}), true).await;
    server.until(&id, "cancelled", EVENTUALLY).await;
    assert_none_survive(&[&sleeper], EVENTUALLY).await;
    let after =
        server.call("terminal", json!({"command": "echo on", "session": "long"}), true).await;
    assert_eq!(after["structuredContent"]["output"], "on\n", "{after}");
}

/// A terminal task whose command waits for input is `input_required`, with
/// the prompt and the call that answers it; the terminal's `is_input` on
/// that session answers, and the task ends with the command.
#[tokio::test]
async fn a_task_waiting_for_input_is_answered_with_is_input() {
    let mut server = Tasks::start();
    let command = "read -p 'Name? ' name; echo \"hello $name\"";
    let arguments = json!({"command": command, "session": "asks", "timeout": 600});
    let id = server.start_task("terminal", arguments).await;
    let waiting = server.until(&id, "input_required", EVENTUALLY).await;
    let message = waiting["statusMessage"].as_str().expect("a status message");
    assert!(message.contains("Name?") && message.contains("\"session\":\"asks\""), "{waiting}");
    assert!(message.contains("\"is_input\":true"), "{waiting}");
    let requests = waiting["inputRequests"].as_object().expect("inputRequests");
    assert_eq!(requests.len(), 1, "{waiting}");
    let (_, request) = requests.iter().next().expect("one");
    assert_eq!(request["method"], "elicitation/create", "{waiting}");
    assert_eq!(request["params"]["message"], message, "{waiting}");
    // Its input goes to the terminal, not through tasks/update.
    let update = server
        .ask("tasks/update", json!({"taskId": id, "inputResponses": {"input-1": {}}}), true)
        .await;
    assert_eq!(update["error"]["code"], -32602, "{update}");
    assert!(update["error"]["message"].as_str().is_some_and(|m| m.contains("is_input")));

    let answer = json!({"command": "Ada", "is_input": true, "session": "asks"});
    let answered = server.call("terminal", answer, true).await;
    let ended = server.until(&id, "completed", EVENTUALLY).await;
    let result = &ended["result"];
    assert_eq!(result["structuredContent"]["status"], "completed", "{ended}");
    assert_eq!(result["structuredContent"]["exit_code"], 0, "{ended}");
    let said = |reply: &Value| {
        reply["structuredContent"]["output"].as_str().is_some_and(|o| o.contains("hello Ada"))
    };
    assert!(said(&answered) || said(result), "{answered}\n{ended}");
}

/// A request that does not declare the extension gets today's replies,
/// also from a server that offers Tasks, and so does a 2025-11-25 session
/// (the extension is not defined there); calls that cannot block long
/// never become tasks.
#[tokio::test]
async fn a_client_that_does_not_declare_tasks_gets_todays_replies() {
    let mut server = Tasks::start();
    let discover = server.ask("server/discover", json!({}), false).await;
    assert_eq!(discover["result"]["capabilities"]["extensions"][TASKS], json!({}), "{discover}");

    let run = server.call("run", json!({"command": "echo hi"}), false).await;
    assert_eq!(
        (&run["resultType"], &run["structuredContent"]["stdout"]),
        (&json!("complete"), &json!("hi\n"))
    );
    let long = json!({"command": "echo long", "timeout": 600});
    let terminal = server.call("terminal", long.clone(), false).await;
    assert_eq!(terminal["structuredContent"]["output"], "long\n", "{terminal}");
    // Without the declaration, tasks/* are refused as the extension says.
    let get = server.ask("tasks/get", json!({"taskId": "0"}), false).await;
    assert_eq!(get["error"]["code"], -32021, "{get}");

    // Declared: a terminal call that hands control back within --max-wait
    // is no task (a plain command, a poll, input).
    for arguments in [
        json!({"command": "echo short"}),
        json!({"command": "echo short", "timeout": 10}),
        json!({"command": ""}),
        json!({"command": "", "timeout": 600}),
        json!({"command": "C-c", "is_input": true, "timeout": 600}),
    ] {
        let reply = server.call("terminal", arguments.clone(), true).await;
        assert_eq!(reply["resultType"], "complete", "{arguments}: {reply}");
    }
    let task = server.start_task("terminal", long).await;
    let ended = server.until(&task, "completed", EVENTUALLY).await;
    assert_eq!(ended["result"]["structuredContent"]["output"], "long\n", "{ended}");

    // A 2025-11-25 session, even one that declared the extension when it
    // began, gets replies.
    let mut old = Raw::spawn(&[]);
    old.send(&json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {"extensions": {TASKS: {}}},
            "clientInfo": {"name": "old", "version": "0"},
        },
    }))
    .await;
    old.reply(0).await;
    old.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
    let reply = old.tool(1, "run", json!({"command": "echo old"})).await;
    assert_eq!(reply["structuredContent"]["stdout"], "old\n", "{reply}");
}

/// `tasks/result` and `tasks/list` are not in this version of the
/// extension (-32601, saying what to do instead); an unknown task id is
/// invalid params (-32602) for every tasks method.
#[tokio::test]
async fn removed_methods_and_unknown_ids_are_refused() {
    let mut server = Tasks::start();
    for (method, says) in [("tasks/result", "poll tasks/get"), ("tasks/list", "keep the taskId")] {
        for declares in [true, false] {
            let reply = server.ask(method, json!({"taskId": "0"}), declares).await;
            assert_eq!(reply["error"]["code"], -32601, "{reply}");
            let message = reply["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains(method) && message.contains(says), "{reply}");
        }
    }
    let unknown = "0123456789abcdef0123456789abcdef";
    for method in ["tasks/get", "tasks/cancel"] {
        let reply = server.ask(method, json!({"taskId": unknown}), true).await;
        assert_eq!(reply["error"]["code"], -32602, "{reply}");
        assert!(reply["error"]["message"].as_str().is_some_and(|m| m.contains("Unknown task")));
    }
    let update = json!({"taskId": unknown, "inputResponses": {}});
    let reply = server.ask("tasks/update", update, true).await;
    assert_eq!(reply["error"]["code"], -32602, "{reply}");
    assert!(reply["error"]["message"].as_str().is_some_and(|m| m.contains("Unknown task")));
}

/// Without Tasks, a `run` the client cancels is killed, and the next reply
/// says it was the client's cancellation (once).
#[tokio::test]
async fn a_run_killed_by_the_clients_cancellation_is_told_in_the_next_reply() {
    let mut server = Tasks::start();
    let sleeper = format!("sleep 300.{}", marker());
    let params = json!({"name": "run", "arguments": {"command": sleeper, "timeout_sec": 600}});
    server.raw.send(&request(100, "tools/call", params, false)).await;
    wait_alive(&[&sleeper]).await;
    server
        .raw
        .send(&json!({
            "jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 100, "reason": "the client gave up"},
        }))
        .await;
    assert_none_survive(&[&sleeper], EVENTUALLY).await;
    let note = |reply: &Value| {
        reply["structuredContent"]["notes"].as_array().into_iter().flatten().any(|note| {
            note.as_str().is_some_and(|n| {
                n.contains("killed by the client's cancellation") && n.contains(&sleeper)
            })
        })
    };
    // The note comes once the run's end is known (its group is gone first).
    let next = poll_until(
        EVENTUALLY,
        async || server.call("run", json!({"command": "echo next"}), false).await,
        note,
    )
    .await;
    let text = next["content"].to_string();
    assert!(text.contains("background=true"), "{next}");
    let after = server.call("run", json!({"command": "echo after"}), false).await;
    assert!(!note(&after), "told once: {after}");
}

/// A `run` task takes a place of the server's session budget while it
/// runs (a terminal task holds its session): over the budget the call is
/// refused, saying why, and the place comes back as the task ends.
#[tokio::test]
async fn a_run_task_counts_in_the_session_budget() {
    let mut server = Tasks { raw: Raw::spawn(&[("SHELLKEEP_MAX_SESSIONS", "2")]), next: 1 };
    // `default` takes the first place.
    let first = server.call("terminal", json!({"command": "echo one"}), true).await;
    assert_eq!(first["structuredContent"]["output"], "one\n", "{first}");
    let sleeper = format!("sleep 300.{}", marker());
    let id = server.start_task("run", json!({"command": sleeper, "timeout_sec": 600})).await;
    wait_alive(&[&sleeper]).await;
    let refused = server.call("run", json!({"command": "echo two"}), true).await;
    assert_eq!(refused["isError"], true, "{refused}");
    let text = refused["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("2 places (--max-sessions)"), "{refused}");
    let session = server.call("terminal", json!({"command": "echo x", "session": "b"}), true).await;
    assert_eq!(session["isError"], true, "no session either: {session}");
    // Without Tasks, a run blocks and takes no place.
    let blocking = server.call("run", json!({"command": "echo three"}), false).await;
    assert_eq!(blocking["structuredContent"]["stdout"], "three\n", "{blocking}");

    server.ask("tasks/cancel", json!({"taskId": id}), true).await;
    server.until(&id, "cancelled", EVENTUALLY).await;
    let again = poll_until(
        EVENTUALLY,
        async || server.call("run", json!({"command": "echo four"}), true).await,
        |result| result["resultType"] == "task",
    )
    .await;
    let id = again["taskId"].as_str().expect("a task").to_owned();
    let ended = server.until(&id, "completed", EVENTUALLY).await;
    assert_eq!(ended["result"]["structuredContent"]["stdout"], "four\n", "{ended}");
}

/// What a task shows is masked as every reply is: its result (the same
/// path as a reply), and the prompt and words of a task waiting for input.
#[tokio::test]
async fn a_tasks_result_and_prompt_are_masked() {
    const TOKEN: &str = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
    let mut server = Tasks::start();
    let id = server.start_task("run", json!({"command": format!("echo {TOKEN}")})).await;
    let ended = server.until(&id, "completed", EVENTUALLY).await;
    assert_eq!(ended["result"]["structuredContent"]["stdout"], "<secret-hidden>\n", "{ended}");
    assert!(!ended.to_string().contains(TOKEN), "{ended}");

    let command = format!("read -p '{TOKEN}? ' answer; echo \"got $answer\"");
    let id = server.start_task("terminal", json!({"command": command, "timeout": 600})).await;
    let waiting = server.until(&id, "input_required", EVENTUALLY).await;
    assert!(!waiting.to_string().contains(TOKEN), "{waiting}");
    assert!(waiting["statusMessage"].as_str().is_some_and(|m| m.contains("<secret-hidden>")));
    server.call("terminal", json!({"command": "yes", "is_input": true}), true).await;
    let ended = server.until(&id, "completed", EVENTUALLY).await;
    assert!(!ended.to_string().contains(TOKEN), "{ended}");
}
