//! Bad input never kills the server: each mistake gets a tool error
//! (`isError: true`) whose message says what is wrong and what to do, and
//! the terminal keeps working afterwards. An unknown tool is a JSON-RPC
//! error, as the MCP specification asks.
//!
//! The tables are checked whole before failing, so one report lists every
//! case that went wrong.

use rmcp::service::ServiceError;
use serde_json::{Value, json};

use crate::Server;

/// A bad call and what its error message must contain (case-insensitively).
type Case = (&'static str, Value, &'static [&'static str]);

/// Calls `tool` with `args`; returns what is wrong with the reply, if
/// anything: it must be a tool error whose text contains each of `says`.
async fn check_tool_error(server: &Server, (tool, args, says): &Case) -> Option<String> {
    let r = server.call(tool, args.clone()).await;
    if !r.is_error {
        return Some(format!("{tool} {args}: not a tool error: {r:?}"));
    }
    let text = r.text.to_lowercase();
    let missing: Vec<&str> =
        says.iter().copied().filter(|words| !text.contains(&words.to_lowercase())).collect();
    (!missing.is_empty())
        .then(|| format!("{tool} {args}: the error should say {missing:?}; it says {:?}", r.text))
}

/// Checks every case, then fails with all the problems found.
async fn check_all(server: &Server, cases: &[Case]) {
    let mut problems = Vec::new();
    for case in cases {
        problems.extend(check_tool_error(server, case).await);
    }
    assert!(problems.is_empty(), "{} problems:\n{}", problems.len(), problems.join("\n"));
}

async fn assert_alive(server: &Server) {
    let r = server.terminal(json!({"command": "echo alive"})).await;
    assert!(!r.is_error, "{r:#?}");
    assert_eq!(r.output(), "alive\n", "{r:#?}");
    assert_eq!(r["exit_code"], 0);
}

/// Issue 2, point 3: `reset` with `is_input`, NUL bytes, input or polling
/// when nothing runs, wrong argument types; plus near misses of argument
/// names, out-of-range timeouts and unknown sessions.
#[tokio::test]
async fn terminal_bad_input_gets_tool_errors_and_the_server_stays_up() {
    let server = Server::start().await;
    let t = "terminal";
    let mut problems = Vec::new();
    let nothing_runs: &[Case] = &[
        (t, json!({"command": "hello", "is_input": true}), &["no command is running", "run a"]),
        (t, json!({"command": ""}), &["no command is running", "send a command"]),
        (t, json!({"command": "   "}), &["no command is running"]),
        (
            t,
            json!({"command": "ls", "reset": true, "is_input": true}),
            &["reset cannot be combined with is_input", "send reset=true alone"],
        ),
        (t, json!({"command": "echo a\u{0}b"}), &["NUL byte", "remove it"]),
        // Wrong types: the message must name the argument, or the agent
        // cannot tell which one to fix.
        (t, json!({"command": "ls", "is_input": "yes"}), &["is_input", "boolean"]),
        (t, json!({"command": "ls", "reset": 1}), &["reset", "boolean"]),
        // Issue 14: a number may come as a string, but it must hold one.
        (
            t,
            json!({"command": "ls", "timeout": "soon"}),
            &["`timeout`", "invalid type", "expected a number", "\"soon\""],
        ),
        (t, json!({"command": 42}), &["command", "string"]),
        (t, json!({"is_input": false}), &["missing field `command`"]),
        // An unknown argument is ignored with a note (`client_args.rs`); a
        // near miss of one is an error naming the right one.
        (
            t,
            json!({"command": "ls", "timout": 5}),
            &["unknown argument `timout`: did you mean `timeout`?"],
        ),
        // Issue 12: every timeout follows one rule, the same as `run`'s.
        (t, json!({"command": "ls", "timeout": -1}), &["timeout must be", "at most 86400", "-1"]),
        (t, json!({"command": "ls", "timeout": 0}), &["timeout must be a positive number"]),
        (t, json!({"command": "ls", "timeout": 1e9}), &["timeout must be"]),
        (t, json!({"command": "ls", "cwd": "/tmp\u{0}x"}), &["`cwd`", "NUL byte"]),
        (
            t,
            json!({"command": "ls", "is_input": true, "background": true}),
            &["background=true", "without is_input"],
        ),
        (t, json!({"command": "ls", "session": "a b"}), &["invalid session name", "32 characters"]),
    ];
    for case in nothing_runs {
        problems.extend(check_tool_error(&server, case).await);
    }
    assert_alive(&server).await;

    // While a command runs.
    let r = server.terminal(json!({"command": "sleep 30", "timeout": 0.3})).await;
    assert_eq!(r["status"], "running", "{r:#?}");
    let while_running: &[Case] = &[
        (
            t,
            json!({"command": "C-1", "is_input": true}),
            &["C-1", "C-c", "C-d", "C-z", "UP", "ENTER", "TAB", "ESC", "PGDN"],
        ),
        (t, json!({"command": "CTRL+F5", "is_input": true}), &["C-c", "ENTER"]),
        (t, json!({"command": "echo a\u{0}b", "is_input": true}), &["NUL byte"]),
        (t, json!({"command": "", "reset": true, "is_input": true}), &["reset cannot"]),
    ];
    for case in while_running {
        problems.extend(check_tool_error(&server, case).await);
    }
    // A new command while one runs is not executed, and the reply says why.
    let r = server.terminal(json!({"command": "echo second"})).await;
    assert!(r.is_error, "{r:#?}");
    assert_eq!(r["status"], "not_executed", "{r:#?}");
    assert!(r.text.contains("NOT executed"), "{}", r.text);
    assert!(r.text.contains("C-c"), "the reply says how to interrupt: {}", r.text);
    // The command survived all of that, and still answers to C-c.
    let r = server.terminal(json!({"command": "C-c", "is_input": true, "timeout": 10})).await;
    assert_eq!((r["status"].as_str(), r["exit_code"].as_i64()), (Some("completed"), Some(130)));
    assert_alive(&server).await;

    assert!(problems.is_empty(), "{} problems:\n{}", problems.len(), problems.join("\n"));
}

#[tokio::test]
async fn run_and_policy_explain_bad_input_gets_tool_errors() {
    let server = Server::start().await;
    check_all(
        &server,
        &[
            ("run", json!({"command": "true", "timeout_sec": -1}), &["timeout_sec", "-1"]),
            ("run", json!({"command": "true", "timeout_sec": 0}), &["timeout_sec", "positive"]),
            (
                "run",
                json!({"command": "true", "timeout_sec": "soon"}),
                &["`timeout_sec`", "expected a number", "\"soon\""],
            ),
            ("run", json!({"command": "true", "env": ["A=1"]}), &["env"]),
            (
                "run",
                json!({"command": "true", "timeout": 1}),
                &["unknown argument `timeout`: did you mean `timeout_sec`?"],
            ),
            ("run", json!({}), &["missing field `command`"]),
            (
                "run",
                json!({"command": "true", "no_output_timeout_sec": 0}),
                &["no_output_timeout_sec must be a positive number", "got 0"],
            ),
            (
                "run",
                json!({"command": "true", "timeout_sec": 5, "no_output_timeout_sec": -2}),
                &["no_output_timeout_sec", "-2"],
            ),
            ("policy_explain", json!({"command": "ls", "timeout_sec": -5}), &["timeout_sec"]),
            (
                "policy_explain",
                json!({"command": "ls", "no_output_timeout_sec": 1e12}),
                &["no_output_timeout_sec", "at most"],
            ),
            (
                "policy_explain",
                json!({"cmd": "ls"}),
                &["unknown argument `cmd`: did you mean `command`?"],
            ),
            // Issue 12: `timeout_sec` has `terminal.timeout`'s range.
            (
                "run",
                json!({"command": "true", "timeout_sec": 86_401}),
                &["timeout_sec must be", "at most 86400 (1 day)", "got 86401"],
            ),
            (
                "policy_explain",
                json!({"command": "ls", "timeout_sec": 1e7}),
                &["timeout_sec must be", "at most 86400 (1 day)"],
            ),
            (
                "session_close",
                json!({"session": "a/b"}),
                &["invalid session name", "32 characters"],
            ),
            ("output", json!({"session": "a b"}), &["invalid session name", "32 characters"]),
        ],
    )
    .await;
    assert_alive(&server).await;
}

/// Issue 14: many model clients send numbers and booleans as strings
/// (`"timeout": "5"`). Each is read as what it holds, with the rule for
/// that argument; a string that holds no number, or something besides it,
/// is an error that names the argument and quotes the string.
#[tokio::test]
async fn numbers_and_booleans_given_as_strings_are_read_as_such() {
    let server = Server::start().await;
    let r = server
        .terminal(
            json!({"command": "seq 1 5", "timeout": "5", "is_input": "false", "reset": "false"}),
        )
        .await;
    assert!(!r.is_error, "{r:#?}");
    assert_eq!((r.output(), &r["exit_code"]), ("1\n2\n3\n4\n5\n", &json!(0)), "{r:#?}");
    // A fraction where fractions are taken: the call hands control back
    // within it, the command keeps running.
    let r = server.terminal(json!({"command": "sleep 30", "timeout": "0.5"})).await;
    assert_eq!(r["status"], "running", "{r:#?}");
    let r = server.terminal(json!({"command": "C-c", "is_input": "true", "timeout": "10"})).await;
    assert_eq!((r["status"].as_str(), r["exit_code"].as_i64()), (Some("completed"), Some(130)));

    let r = server.call("output", json!({"command": "1", "offset": "-2", "limit": "100"})).await;
    assert!(!r.is_error, "{r:#?}");
    assert_eq!(r["lines"], "4\n5\n", "{r:#?}");
    let r = server.call("output", json!({"command": "1", "offset": "1", "limit": "2"})).await;
    assert_eq!(r["lines"], "2\n3\n", "{r:#?}");

    let r = server
        .run(json!({"command": "echo ran", "timeout_sec": "5", "no_output_timeout_sec": "30"}))
        .await;
    assert_eq!(
        (r["status"].as_str(), r.text.starts_with("ran")),
        (Some("success"), true),
        "{r:#?}"
    );
    let r = server.call("policy_explain", json!({"command": "ls", "timeout_sec": "5.5"})).await;
    assert!(!r.is_error, "{r:#?}");
    assert!(r.text.contains("5.5"), "{}", r.text);

    check_all(
        &server,
        &[
            ("terminal", json!({"command": "ls", "timeout": "five"}), &["`timeout`", "\"five\""]),
            ("terminal", json!({"command": "ls", "timeout": "1e999"}), &["`timeout`", "\"1e999\""]),
            ("terminal", json!({"command": "ls", "timeout": " 5"}), &["`timeout`", "\" 5\""]),
            ("terminal", json!({"command": "ls", "timeout": "0"}), &["timeout must be a positive"]),
            ("terminal", json!({"command": "ls", "timeout": "-1"}), &["timeout must be", "-1"]),
            (
                "terminal",
                json!({"command": "ls", "reset": "yes"}),
                &["`reset`", "boolean", "\"yes\""],
            ),
            (
                "terminal",
                json!({"command": "ls", "background": "True"}),
                &["`background`", "\"True\""],
            ),
            ("output", json!({"limit": "-2"}), &["`limit`", "-2"]),
            ("output", json!({"offset": "last"}), &["`offset`", "\"last\""]),
            ("output", json!({"command": "1.5"}), &["`command`", "1.5"]),
            (
                "run",
                json!({"command": "true", "no_output_timeout_sec": "0x10"}),
                &["`no_output_timeout_sec`", "\"0x10\""],
            ),
            (
                "policy_explain",
                json!({"command": "ls", "timeout_sec": "NaN"}),
                &["`timeout_sec`", "\"NaN\""],
            ),
        ],
    )
    .await;
    assert_alive(&server).await;
}

#[tokio::test]
async fn unknown_tool_is_a_protocol_error_not_a_crash() {
    let server = Server::start().await;
    match server.try_call("shell_exec", json!({"command": "ls"})).await {
        Err(ServiceError::McpError(error)) => {
            assert_eq!(error.code.0, -32602, "{error:?}");
            assert!(error.message.contains("tool"), "{error:?}");
        }
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }
    assert_alive(&server).await;
}

/// Issue 7 §4: what the kernel cannot take in a `run` request is a tool
/// error that names the argument: a NUL byte in the command, the working
/// directory or the environment, and environment names that are empty or
/// contain `=`. Nothing is run.
#[tokio::test]
async fn run_rejects_nul_bytes_and_bad_environment_names() {
    let server = Server::start().await;
    let witness = server.cwd().join("ran");
    let touch = format!("touch {}", witness.display());
    check_all(
        &server,
        &[
            ("run", json!({"command": format!("{touch}\u{0}x")}), &["`command`", "NUL byte"]),
            ("run", json!({"command": touch, "cwd": "/tmp\u{0}x"}), &["`cwd`", "NUL byte"]),
            (
                "run",
                json!({"command": touch, "env": {"A\u{0}B": "1"}}),
                &["`env` name", "NUL byte"],
            ),
            (
                "run",
                json!({"command": touch, "env": {"OK": "1", "VALUE": "a\u{0}b"}}),
                &["`env` value of \"VALUE\"", "NUL byte"],
            ),
            ("run", json!({"command": touch, "env": {"": "1"}}), &["`env`", "empty variable name"]),
            ("run", json!({"command": touch, "env": {"A=B": "1"}}), &["`env` name \"A=B\"", "`=`"]),
        ],
    )
    .await;
    assert!(!witness.exists(), "a rejected command ran");
    // A NUL in stdin is data, not an argument: it is passed on.
    let r = server.run(json!({"command": "od -An -c", "stdin": "a\u{0}b"})).await;
    assert_eq!(r["status"], "success", "{r:#?}");
    assert!(r["stdout"].as_str().unwrap().contains("\\0"), "{r:#?}");
    assert_alive(&server).await;
}

/// Issue 7 §1: a command is echoed back capped, never in full: a 1 MiB
/// command explained, or refused because another one runs, gets a reply of
/// a few hundred bytes that still identifies it.
#[tokio::test]
async fn long_commands_are_echoed_capped() {
    let server = Server::start().await;
    let command = format!("echo start{}end", "x".repeat(1024 * 1024));
    let r = server.call("policy_explain", json!({"command": command})).await;
    assert!(!r.is_error, "{r:#?}");
    assert!(r.text.len() < 1000, "{} bytes: {}", r.text.len(), &r.text[..1000]);
    assert!(r.text.contains("\"echo startxxx"), "{}", r.text);
    assert!(r.text.contains("xxxend\""), "{}", r.text);
    assert!(r.text.contains(&format!("{} characters", command.len())), "{}", r.text);

    let r = server.terminal(json!({"command": "sleep 30", "timeout": 0.3})).await;
    assert_eq!(r["status"], "running", "{r:#?}");
    let r = server.terminal(json!({"command": command})).await;
    assert_eq!(r["status"], "not_executed", "{r:#?}");
    assert!(r.text.len() < 2000, "{} bytes", r.text.len());
    let notes = serde_json::to_string(&r.structured).unwrap();
    assert!(notes.len() < 3000, "{} bytes of structured content", notes.len());
    assert!(r.text.contains(&format!("{} characters", command.len())), "{}", r.text);
    let r = server.terminal(json!({"command": "C-c", "is_input": true, "timeout": 10})).await;
    assert_eq!(r["status"], "completed", "{r:#?}");
}
