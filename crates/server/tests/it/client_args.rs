//! Arguments real clients send (issue 18): the keys clients add on their
//! own (`wait_for_previous` from Gemini CLI, `summary` and `security_risk`
//! from models trained on OpenHands) are ignored silently on every tool;
//! another unknown argument is ignored and named in the reply's notes (text
//! and structured content); a near miss of a name is an error naming the
//! right one, and nothing runs; `null` means "not given" for every optional
//! argument. And `wait_for_previous: true` orders a call after the earlier
//! calls of its scope, in the order the requests arrived on the wire
//! (checked with raw lines written at once, so the arrival order is known).

use serde_json::{Value, json};

use crate::wire::Raw;
use crate::{Reply, Server};

/// The keys clients add on their own, as Gemini CLI and OpenHands-trained
/// models send them.
fn client_keys() -> Value {
    json!({"wait_for_previous": true, "summary": "a step", "security_risk": "LOW"})
}

/// `args` with the keys clients add.
fn with_client_keys(args: Value) -> Value {
    let (Value::Object(mut args), Value::Object(keys)) = (args, client_keys()) else {
        unreachable!()
    };
    args.extend(keys);
    Value::Object(args)
}

/// Asserts that `r` succeeded and says nothing of the client keys.
#[track_caller]
fn assert_silent_success(tool: &str, r: &Reply) {
    assert!(!r.is_error, "{tool}: {r:#?}");
    for key in ["wait_for_previous", "summary", "security_risk", "Ignored"] {
        assert!(!r.text.contains(key), "{tool} names {key}: {}", r.text);
        assert!(!r.structured.to_string().contains(key), "{tool} names {key}: {r:#?}");
    }
}

#[tokio::test]
async fn the_keys_clients_add_are_ignored_silently_on_every_tool() {
    let server = Server::start().await;
    let r = server.call("terminal", with_client_keys(json!({"command": "echo hi"}))).await;
    assert_silent_success("terminal", &r);
    assert_eq!(r.output(), "hi\n", "{r:#?}");
    let r = server
        .call("terminal", with_client_keys(json!({"command": "true", "session": "dev"})))
        .await;
    assert!(r.text.contains("New session \"dev\""), "{r:#?}");
    let r = server.call("output", with_client_keys(json!({}))).await;
    assert_silent_success("output", &r);
    let r = server.call("run", with_client_keys(json!({"command": "echo ran"}))).await;
    assert_silent_success("run", &r);
    assert_eq!(r["stdout"], "ran\n", "{r:#?}");
    let r = server.call("policy_explain", with_client_keys(json!({"command": "ls"}))).await;
    assert_silent_success("policy_explain", &r);
    let r = server.call("sessions", with_client_keys(json!({}))).await;
    assert_silent_success("sessions", &r);
    assert!(r.text.contains("dev"), "{r:#?}");
    let r = server.call("session_close", with_client_keys(json!({"session": "dev"}))).await;
    assert_silent_success("session_close", &r);
    // `wait_for_previous: false`, and as a string, are fine too.
    for wait in [json!(false), json!("true"), json!(null)] {
        let r = server
            .call("terminal", json!({"command": "echo again", "wait_for_previous": wait}))
            .await;
        assert_silent_success("terminal", &r);
    }
}

#[tokio::test]
async fn an_unknown_argument_is_named_once_in_the_notes_and_the_call_works() {
    let server = Server::start().await;
    let note = |tool: &str, names: &str, takes: &str| {
        format!("[Ignored the unknown {names}: {tool} takes {takes}.]")
    };
    let terminal_takes = "background, command, cwd, is_input, keys, network, record, reset, \
                          sandbox, session, timeout";
    let r = server
        .terminal(json!({"command": "echo ok", "foo": 1, "thought": "t", "description": "d"}))
        .await;
    assert!(!r.is_error, "{r:#?}");
    assert_eq!(r.output(), "ok\n", "{r:#?}");
    let expected = note("terminal", "arguments `foo`, `thought` and `description`", terminal_takes);
    assert_eq!(r.text.matches(&expected).count(), 1, "{}", r.text);
    assert_eq!(r["notes"], json!([expected]), "{r:#?}");
    // On a line of its own after the output.
    assert!(r.text.contains(&format!("\n{expected}")), "{}", r.text);

    let cases = [
        ("run", json!({"command": "echo ran", "foo": 1}), "command, cwd, env"),
        ("output", json!({"foo": 1}), "command, limit, offset, run, session, stream"),
        ("policy_explain", json!({"command": "ls", "foo": 1}), "command, no_output_timeout_sec"),
        ("sessions", json!({"foo": 1}), "no arguments"),
        ("terminal", json!({"command": "true", "session": "gone", "foo": 1}), terminal_takes),
        ("session_close", json!({"session": "gone", "foo": 1}), "session"),
    ];
    for (tool, args, takes) in cases {
        let r = server.call(tool, args.clone()).await;
        assert!(!r.is_error, "{tool} {args}: {r:#?}");
        let start = format!("[Ignored the unknown argument `foo`: {tool} takes {takes}");
        assert_eq!(r.text.matches(&start).count(), 1, "{tool}: {}", r.text);
        let notes = r["notes"].as_array().unwrap_or_else(|| panic!("{tool}: {r:#?}"));
        assert_eq!(notes.iter().filter(|n| n.as_str().unwrap().starts_with(&start)).count(), 1);
    }

    // An error reply for another reason still names it, in its text.
    let r = server.terminal(json!({"command": "ls", "foo": 1, "timeout": -1})).await;
    assert!(r.is_error, "{r:#?}");
    assert!(r.text.contains("timeout must be a positive number"), "{}", r.text);
    assert!(r.text.contains("[Ignored the unknown argument `foo`"), "{}", r.text);
}

#[tokio::test]
async fn a_near_miss_is_an_error_naming_the_right_argument_and_nothing_runs() {
    let server = Server::start().await;
    let cases = [
        (
            "terminal",
            json!({"command": "touch made", "timout": 5}),
            "`timout`: did you mean `timeout`?",
        ),
        (
            "terminal",
            json!({"command": "touch made", "Timeout": 5}),
            "`Timeout`: did you mean `timeout`?",
        ),
        (
            "terminal",
            json!({"command": "touch made", "session_name": "dev"}),
            "`session_name`: did you mean `session`?",
        ),
        (
            "terminal",
            json!({"command": "touch made", "timeout_sec": 5}),
            "`timeout_sec`: did you mean `timeout`?",
        ),
        (
            "terminal",
            json!({"command": "touch made", "env": {"A": "1"}}),
            "`env`: `terminal` does not take it (`env` is an argument of run)",
        ),
        (
            "run",
            json!({"command": "touch made", "timeout": 5}),
            "`timeout`: did you mean `timeout_sec`?",
        ),
        ("run", json!({"cmd": "touch made"}), "`cmd`: did you mean `command`?"),
        (
            "run",
            json!({"command": "touch made", "session": "dev"}),
            "`session`: `run` does not take it",
        ),
        ("output", json!({"limits": 5}), "`limits`: did you mean `limit`?"),
        ("session_close", json!({"sesion": "default"}), "`sesion`: did you mean `session`?"),
    ];
    let mut problems = Vec::new();
    for (tool, args, says) in cases {
        let r = server.call(tool, args.clone()).await;
        if !r.is_error || !r.text.starts_with(&format!("unknown argument {says}")) {
            problems.push(format!("{tool} {args}: {r:?}"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(!server.cwd().join("made").exists(), "a refused call ran");
    let r = server.terminal(json!({"command": "echo alive"})).await;
    assert_eq!(r.output(), "alive\n", "{r:#?}");
}

#[tokio::test]
async fn null_means_not_given_for_every_optional_argument() {
    let server = Server::start().await;
    let r = server
        .terminal(json!({"command": "echo a", "is_input": null, "timeout": null, "reset": null,
                         "session": null, "cwd": null, "background": null}))
        .await;
    assert!(!r.is_error, "{r:#?}");
    assert_eq!(r.output(), "a\n", "{r:#?}");
    let r = server
        .run(json!({"command": "echo b", "timeout_sec": null, "no_output_timeout_sec": null,
                    "cwd": null, "env": null, "stdin": null}))
        .await;
    assert_eq!((&r["status"], &r["stdout"]), (&json!("success"), &json!("b\n")), "{r:#?}");
    let r = server
        .call(
            "output",
            json!({"session": null, "command": null, "run": null, "stream": null,
                               "offset": null, "limit": null}),
        )
        .await;
    assert!(!r.is_error, "{r:#?}");
    assert_eq!(r["lines"], "a\n", "{r:#?}");
    let r = server
        .call(
            "policy_explain",
            json!({"command": "ls", "timeout_sec": null,
                                       "no_output_timeout_sec": null}),
        )
        .await;
    assert!(!r.is_error, "{r:#?}");
    // While a command runs: null flags are false, so input goes as input.
    let r = server.terminal(json!({"command": "read x; echo got $x", "timeout": null})).await;
    assert_eq!(r["status"], "waiting_for_input", "{r:#?}");
    let r = server
        .terminal(json!({"command": "yes", "is_input": true, "reset": null, "background": null}))
        .await;
    assert!(r.output().ends_with("got yes\n"), "{r:#?}");
    // `terminal`'s `command` is optional too: null is not given, a poll
    // (of nothing here).
    let r = server.terminal(json!({"command": null, "keys": null})).await;
    assert!(r.is_error && r.text.contains("No command is running"), "{r:#?}");
    // A required argument cannot be null.
    let r = server.call("session_close", json!({"session": null})).await;
    assert!(r.is_error && r.text.contains("`session`: invalid type: null"), "{r:#?}");
    // Nor does a null stand for an unknown argument: it is not given.
    let r = server.terminal(json!({"command": "echo c", "foo": null})).await;
    assert!(!r.text.contains("Ignored"), "{r:#?}");
}

/// Sends `calls` (tool, arguments) as raw requests numbered from `first`,
/// written to the server's stdin at once, so they arrive in this order;
/// returns their results in the same order.
async fn send_at_once(raw: &mut Raw, first: u64, calls: &[(&str, Value)]) -> Vec<Value> {
    let mut bytes = Vec::new();
    for (id, (tool, arguments)) in (first..).zip(calls) {
        let request = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                             "params": {"name": tool, "arguments": arguments}});
        bytes.extend(serde_json::to_vec(&request).expect("serialize"));
        bytes.push(b'\n');
    }
    raw.write(&bytes).await;
    let mut results = Vec::new();
    for id in (first..).take(calls.len()) {
        let reply = raw.reply(id).await;
        assert!(reply.get("error").is_none(), "{reply}");
        results.push(reply["result"].clone());
    }
    results
}

#[tokio::test]
async fn a_waiting_call_starts_after_the_earlier_calls_of_its_scope_returned() {
    let mut raw = Raw::start(&[]).await;
    let mut id = 1;
    for round in 0..4 {
        // The same session: the second call waits for the first to return.
        let results = send_at_once(
            &mut raw,
            id,
            &[
                ("terminal", json!({"command": "sleep 1; echo first > f", "timeout": 60})),
                ("terminal", json!({"command": "cat f; rm f", "wait_for_previous": true})),
            ],
        )
        .await;
        assert_eq!(
            results[1]["structuredContent"]["output"], "first\n",
            "round {round}: {results:#?}"
        );
        // `run` is of every session: a terminal call waits for it, and a
        // `run` for a terminal call.
        let results = send_at_once(
            &mut raw,
            id + 2,
            &[
                ("run", json!({"command": "sleep 1; echo second > g"})),
                (
                    "terminal",
                    json!({"command": "cat g", "session": "other", "wait_for_previous": true}),
                ),
                ("run", json!({"command": "cat g; rm g", "wait_for_previous": true})),
                ("output", json!({"session": "other", "wait_for_previous": true})),
            ],
        )
        .await;
        assert_eq!(results[1]["structuredContent"]["output"], "second\n", "{results:#?}");
        assert_eq!(results[2]["structuredContent"]["stdout"], "second\n", "{results:#?}");
        assert_eq!(results[3]["structuredContent"]["lines"], "second\n", "{results:#?}");
        id += 6;
    }
}

#[tokio::test]
async fn calls_on_other_sessions_and_calls_without_the_flag_do_not_wait() {
    let mut raw = Raw::start(&[]).await;
    // The first call ends only once the second has run: a wait here would
    // hold the first until its timeout, and it would come back `running`.
    let results = send_at_once(
        &mut raw,
        1,
        &[
            (
                "terminal",
                json!({"command": "until [ -e go ]; do sleep 0.05; done; echo went",
                       "session": "a", "timeout": 60}),
            ),
            ("terminal", json!({"command": "touch go", "session": "b", "wait_for_previous": true})),
            (
                "terminal",
                json!({"command": "until [ -e went ]; do sleep 0.05; done; echo ok",
                       "session": "c", "timeout": 60}),
            ),
            ("run", json!({"command": "touch went"})),
        ],
    )
    .await;
    let first = &results[0]["structuredContent"];
    assert_eq!((&first["status"], &first["output"]), (&json!("completed"), &json!("went\n")));
    assert_eq!(results[2]["structuredContent"]["output"], "ok\n", "{results:#?}");
}

#[tokio::test]
async fn a_waiting_command_after_a_call_that_returned_running_is_refused_as_ever() {
    let mut raw = Raw::start(&[]).await;
    let results = send_at_once(
        &mut raw,
        1,
        &[
            ("terminal", json!({"command": "sleep 30; echo late", "timeout": 0.5})),
            ("terminal", json!({"command": "echo b", "wait_for_previous": true})),
            ("terminal", json!({"command": "C-c", "is_input": true, "wait_for_previous": true})),
        ],
    )
    .await;
    assert_eq!(results[0]["structuredContent"]["status"], "running", "{results:#?}");
    let refused = &results[1];
    assert_eq!(refused["isError"], true, "{refused:#?}");
    assert_eq!(refused["structuredContent"]["status"], "not_executed", "{refused:#?}");
    // The interrupt waited its turn too, and stopped the command.
    assert_eq!(results[2]["structuredContent"]["exit_code"], 130, "{results:#?}");
}

#[tokio::test]
async fn many_waiting_calls_run_one_after_another_in_arrival_order() {
    let mut raw = Raw::start(&[]).await;
    // Terminal calls and `run` calls, all sent at once: `run` is of every
    // session, so each call waits for every one before it.
    let calls: Vec<(&str, Value)> = (1..=12)
        .map(|n| {
            let command = format!("echo {n} >> order");
            if n % 3 == 0 {
                ("run", json!({"command": command, "wait_for_previous": true}))
            } else {
                ("terminal", json!({"command": command, "wait_for_previous": true}))
            }
        })
        .collect();
    let results = send_at_once(&mut raw, 1, &calls).await;
    for result in &results {
        assert!(result.get("isError").is_none_or(|e| e == false), "{result:#?}");
    }
    let order = std::fs::read_to_string(raw.scratch.path.join("order")).expect("the file");
    let expected: String = (1..=12).map(|n| format!("{n}\n")).collect();
    assert_eq!(order, expected);
}

#[tokio::test]
async fn at_most_32_calls_wait_at_once_and_one_more_is_refused() {
    let mut raw = Raw::start(&[]).await;
    let blocker =
        ("terminal", json!({"command": "until [ -e go ]; do sleep 0.05; done", "timeout": 60}));
    let mut bytes = Vec::new();
    let waiting = json!({"wait_for_previous": true});
    for (id, (tool, arguments)) in
        (1u64..).zip(std::iter::once(blocker).chain(std::iter::repeat_n(("sessions", waiting), 33)))
    {
        let request = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                             "params": {"name": tool, "arguments": arguments}});
        bytes.extend(serde_json::to_vec(&request).expect("serialize"));
        bytes.push(b'\n');
    }
    raw.write(&bytes).await;
    // The one that found 32 waiting is refused at once, while the first runs.
    let refused = raw.next().await;
    let text = refused["result"]["content"][0]["text"].as_str().unwrap_or_default();
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    assert!(text.starts_with("Not run: 32 calls already wait"), "{refused}");
    std::fs::write(raw.scratch.path.join("go"), "").expect("release the first call");
    let first = raw.reply(1).await;
    assert_eq!(first["result"]["structuredContent"]["status"], "completed", "{first}");
    let refused_id = refused["id"].as_u64().expect("an id");
    for id in (2..=34).filter(|&id| id != refused_id) {
        let reply = raw.reply(id).await;
        assert!(reply["result"].get("isError").is_none(), "{reply}");
    }
}
