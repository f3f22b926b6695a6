//! `tools/list` and the tool surface: names, portable schemas and annotations;
//! `run`'s limits and footer; the terminal's wording and structured content.

use serde_json::{Value, json};

use crate::Server;

#[tokio::test]
async fn tools_list_names_schemas_and_annotations() {
    let server = Server::start().await;
    let tools = server.client().list_all_tools().await.expect("tools/list");
    let tools: Vec<Value> =
        tools.iter().map(|tool| serde_json::to_value(tool).expect("a tool serializes")).collect();
    let mut names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    names.sort_unstable();
    assert_eq!(names, ["output", "policy_explain", "run", "session_close", "sessions", "terminal"]);

    for tool in &tools {
        let name = &tool["name"];
        assert_eq!(tool["inputSchema"]["type"], "object", "inputSchema of {name}: {tool:#}");
        let takes = if name == "sessions" || name == "output" {
            None
        } else if name == "session_close" {
            Some("session")
        } else {
            Some("command")
        };
        if let Some(argument) = takes {
            assert!(
                tool["inputSchema"]["properties"][argument].is_object(),
                "{name} takes {argument}: {tool:#}"
            );
        }
        assert_eq!(tool["outputSchema"]["type"], "object", "outputSchema of {name}: {tool:#}");
        assert!(tool["outputSchema"]["properties"].is_object(), "outputSchema of {name}");
        assert!(tool["description"].as_str().is_some_and(|d| !d.is_empty()), "{name}");
        let annotations = &tool["annotations"];
        let expected = if ["policy_explain", "sessions", "output"].contains(&name.as_str().unwrap())
        {
            json!({"readOnlyHint": true})
        } else if name == "session_close" {
            json!({"readOnlyHint": false, "destructiveHint": true, "openWorldHint": false})
        } else {
            json!({"readOnlyHint": false, "destructiveHint": true, "openWorldHint": true})
        };
        for (hint, value) in expected.as_object().unwrap() {
            assert_eq!(&annotations[hint], value, "{hint} of {name}: {annotations:#}");
        }
    }

    let schema = |tool: &str, part: &str| {
        tools.iter().find(|t| t["name"] == tool).unwrap()[part]["properties"].clone()
    };
    for field in [
        "command",
        "is_input",
        "timeout",
        "reset",
        "session",
        "cwd",
        "background",
        "record",
        "sandbox",
        "network",
    ] {
        assert!(schema("terminal", "inputSchema")[field].is_object(), "terminal takes {field}");
    }
    for field in ["output", "exit_code", "status", "cwd", "duration_ms", "truncated"] {
        assert!(schema("terminal", "outputSchema")[field].is_object(), "terminal gives {field}");
    }
    for field in ["command", "timeout_sec", "cwd", "env", "stdin", "sandbox", "network"] {
        assert!(schema("run", "inputSchema")[field].is_object(), "run takes {field}");
    }
    for tool in ["terminal", "run", "sessions", "output", "session_close", "policy_explain"] {
        for field in ["sandbox", "sandbox_denial"] {
            assert!(schema(tool, "outputSchema")[field].is_object(), "{tool} may give {field}");
        }
    }
    for field in
        ["status", "stdout", "stderr", "exitCode", "timeoutReason", "terminationMode", "durationMs"]
    {
        assert!(schema("run", "outputSchema")[field].is_object(), "run gives {field}");
    }
}

/// The description of `tool` and of its `argument` (if given) in `tools`.
fn described(tools: &[Value], tool: &str, argument: Option<&str>) -> String {
    let tool = tools.iter().find(|t| t["name"] == tool).expect("the tool is listed");
    let text = match argument {
        Some(argument) => &tool["inputSchema"]["properties"][argument]["description"],
        None => &tool["description"],
    };
    text.as_str().unwrap_or_else(|| panic!("no description: {tool:#}")).to_owned()
}

/// Issue 12: tool descriptions state the limits the server was started
/// with, never the defaults written into the code.
#[tokio::test]
async fn descriptions_state_the_limits_the_server_runs_with() {
    let flags = [
        "--max-wait",
        "20",
        "--no-output-return",
        "7",
        "--max-sessions",
        "5",
        "--session-idle-expiry",
        "7200",
        "--output-keep-commands",
        "12",
        "--output-keep-mib",
        "64",
        "--output-cap",
        "5000",
        "--grace",
        "2.5",
        "--job-keep-secs",
        "90",
    ];
    let mut described_by = Vec::new();
    for server in [Server::start().await, Server::with(&flags).await] {
        let tools = server.client().list_all_tools().await.expect("tools/list");
        let tools: Vec<Value> = tools.iter().map(|t| serde_json::to_value(t).unwrap()).collect();
        described_by.push(tools);
    }
    let [defaults, configured] = &described_by[..] else { unreachable!() };
    // (tool, argument, what the default server says, what the configured one says)
    let cases: &[(&str, Option<&str>, &str, &str)] = &[
        ("terminal", None, "after at most 50 s", "after at most 20 s"),
        ("terminal", None, "Output over 30,000 characters", "Output over 5,000 characters"),
        (
            "terminal",
            Some("timeout"),
            "after 30 s without new output, and after 50 s at most",
            "after 7 s without new output, and after 20 s at most",
        ),
        ("terminal", Some("timeout"), "at most 86400 (1 day)", "at most 86400 (1 day)"),
        ("sessions", None, "at most 16 are open at once", "at most 5 are open at once"),
        ("sessions", None, "idle at its prompt for 30 minutes", "idle at its prompt for 2 hours"),
        ("sessions", None, "kept for 10 minutes after its end", "kept for 90 s after its end"),
        ("output", None, "the last 100 commands and 256 MiB", "the last 12 commands and 64 MiB"),
        (
            "output",
            Some("limit"),
            "at most 5,000); a page also stops at 30,000 characters",
            "at most 5,000); a page also stops at 30,000 characters",
        ),
        ("run", None, "SIGKILL after 5 s", "SIGKILL after 2.5 s"),
        (
            "run",
            None,
            "Output over 30,000 characters (stdout and stderr together",
            "Output over 5,000 characters (stdout and stderr together",
        ),
        ("run", Some("timeout_sec"), "at most 86400 (1 day)", "at most 86400 (1 day)"),
        ("policy_explain", Some("no_output_timeout_sec"), "at most 86400", "at most 86400"),
        ("session_close", None, "SIGKILL after 5 s", "SIGKILL after 2.5 s"),
    ];
    let mut problems = Vec::new();
    for (tool, argument, default, configured_text) in cases {
        for (tools, says) in [(defaults, default), (configured, configured_text)] {
            let text = described(tools, tool, *argument);
            if !text.contains(says) {
                problems.push(format!("{tool} {argument:?} should say {says:?}: {text}"));
            }
        }
    }
    // No default number survives in the configured server's descriptions.
    for tool in ["terminal", "sessions", "output", "run", "session_close"] {
        let text = described(configured, tool, None);
        for default in
            ["50 s", "16 are", "30 minutes", "256 MiB", "100 commands", "30,000 characters"]
        {
            if text.contains(default) {
                problems.push(format!("{tool} still says {default:?}: {text}"));
            }
        }
    }
    assert!(problems.is_empty(), "{} problems:\n{}", problems.len(), problems.join("\n"));
}

/// Issue 6 §6: every tool's input and output schema uses the subset of JSON
/// Schema every client accepts: no type lists (`["number", "null"]`), no
/// `null` defaults, no `format` outside JSON Schema's own (`double`,
/// `uint64`), and optional arguments are simply not required.
#[tokio::test]
async fn schemas_use_the_portable_subset_of_json_schema() {
    let server = Server::start().await;
    let tools = server.client().list_all_tools().await.expect("tools/list");
    let mut problems = Vec::new();
    for tool in &tools {
        let tool = serde_json::to_value(tool).unwrap();
        for part in ["inputSchema", "outputSchema"] {
            let at = format!("{}.{part}", tool["name"].as_str().unwrap());
            walk(&tool[part], &at, &mut problems);
        }
        // Optional arguments are not required; only `command` is (`session`
        // for `session_close`; nothing for `sessions`, `output`, and
        // `terminal`, whose `command` may be left out to poll or with `keys`).
        let required = match tool["name"].as_str() {
            Some("sessions" | "output" | "terminal") => Value::Null,
            Some("session_close") => json!(["session"]),
            _ => json!(["command"]),
        };
        assert_eq!(tool["inputSchema"]["required"], required, "{tool:#}");
    }
    assert!(problems.is_empty(), "{} problems:\n{}", problems.len(), problems.join("\n"));

    let run = tools.iter().find(|t| t.name == "run").unwrap();
    let run = serde_json::to_value(run).unwrap();
    assert_eq!(
        run["inputSchema"]["properties"]["no_output_timeout_sec"]["type"], "number",
        "{run:#}"
    );
    // A field that is always present but may be null is an `anyOf` of
    // single types.
    assert_eq!(
        run["outputSchema"]["properties"]["timeoutReason"]["anyOf"],
        json!([{"type": "string"}, {"type": "null"}]),
        "{run:#}"
    );
}

/// The JSON Schema `format` values; anything else is non-standard.
const STANDARD_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// Collects what is not portable in `schema` and everything under it.
fn walk(schema: &Value, at: &str, problems: &mut Vec<String>) {
    match schema {
        Value::Object(map) => {
            if let Some(kind) = map.get("type")
                && !kind.is_string()
            {
                problems.push(format!("{at}: type {kind} is not a single type"));
            }
            if map.get("default") == Some(&Value::Null) {
                problems.push(format!("{at}: a null default"));
            }
            if let Some(format) = map.get("format")
                && !format.as_str().is_some_and(|f| STANDARD_FORMATS.contains(&f))
            {
                problems.push(format!("{at}: non-standard format {format}"));
            }
            for (key, value) in map {
                walk(value, &format!("{at}.{key}"), problems);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                walk(item, &format!("{at}[{i}]"), problems);
            }
        }
        _ => {}
    }
}

/// Issue 6 §6: `run` takes an explicit no-output limit; before, a model
/// asking for 8 s got a 2 s silence limit it could not change.
#[tokio::test]
async fn run_takes_an_explicit_no_output_limit() {
    let server = Server::start().await;
    let r = server
        .run(json!({
            "command": "sleep 2.5; echo done",
            "timeout_sec": 8,
            "no_output_timeout_sec": 8,
        }))
        .await;
    assert_eq!(r["status"], "success", "{r:#?}");
    assert_eq!(r["stdout"], "done\n", "{r:#?}");
    assert_eq!(
        (r["execTimeoutSec"].as_f64(), r["noOutputTimeoutSec"].as_f64()),
        (Some(8.0), Some(8.0))
    );
    assert!(r.text.contains("explicit (exec 8 s, no output 8 s)"), "{}", r.text);

    // Alone, it keeps the category's execution limit, and the limit that
    // fired is what the reply states.
    let r = server.run(json!({"command": "sleep 30", "no_output_timeout_sec": 0.5})).await;
    assert_eq!(
        (r["status"].as_str(), r["timeoutReason"].as_str()),
        (Some("timeout"), Some("no_output_timeout")),
        "{r:#?}"
    );
    assert_eq!(r["noOutputTimeoutSec"], 0.5, "{r:#?}");
    assert!(r["category"].is_string(), "{r:#?}");
    assert!(r.text.contains("no_output_timeout: no output for 0.5 s"), "{}", r.text);

    let r =
        server.call("policy_explain", json!({"command": "ls", "no_output_timeout_sec": 7})).await;
    assert_eq!(
        (r["category"].as_str(), r["no_output_timeout_sec"].as_f64()),
        (Some("quick"), Some(7.0)),
        "{r:#?}"
    );
}

/// Issue 6 §6: `run`'s footer names the category and limits, not the
/// pattern that matched (structured content keeps it).
#[tokio::test]
async fn run_footer_is_short_and_the_pattern_is_structured() {
    let server = Server::start().await;
    let r = server.run(json!({"command": "ls"})).await;
    assert_eq!(r["category"], "quick", "{r:#?}");
    let pattern = r["pattern"].as_str().expect("the pattern that matched");
    let footer = r.text.lines().last().unwrap();
    assert!(footer.starts_with("[success · exit code 0 · "), "{footer}");
    assert!(footer.ends_with("limits: quick (exec 30 s, no output 10 s)]"), "{footer}");
    assert!(!r.text.contains(pattern), "{}", r.text);
    assert!(!r.text.contains("matched"), "{}", r.text);
}

/// Asserts each notice of a reply is in its text and in its structured
/// `notes`, so a client that shows only one of them loses nothing.
#[track_caller]
fn assert_notice(r: &crate::Reply, notice: &str) {
    assert!(r.text.contains(notice), "text lacks {notice:?}:\n{}", r.text);
    let notes = r["notes"].as_array().map(Vec::as_slice).unwrap_or_default();
    assert!(
        notes.iter().any(|n| n.as_str().is_some_and(|n| n.contains(notice))),
        "notes lack {notice:?}: {r:#?}"
    );
}

/// Issue 6 §6: where a message means what the OpenHands terminal's does,
/// it uses OpenHands' exact words: the timeout and no-new-output notices,
/// "[Below is the output of the previous command.]" on later polls and
/// before "NOT executed", "CTRL+C was sent", the reset notice.
#[tokio::test]
async fn terminal_speaks_openhands_words() {
    let server = Server::with(&["--no-output-return", "1"]).await;
    let r = server.terminal(json!({"command": "echo started; sleep 30", "timeout": 0.5})).await;
    assert_eq!(r["status"], "running", "{r:#?}");
    assert!(r.text.starts_with("started\n"), "no prefix on the first reply: {}", r.text);
    // OpenHands' sentence, then the short notice that replaces its long
    // `TIMEOUT_MESSAGE_TEMPLATE` (issue 14): in the text only, its facts
    // in fields.
    let still = "It is still running (";
    assert!(
        r.text.contains(&format!("[The command timed out after 0.5 seconds. {still}")),
        "{}",
        r.text
    );
    assert_eq!(r["wait_ended"], "timeout", "{r:#?}");

    let r = server.terminal(json!({"command": ""})).await;
    assert_eq!(r["status"], "running", "{r:#?}");
    assert!(r.text.starts_with("[Below is the output of the previous command.]\n"), "{}", r.text);
    assert!(
        r.text.contains(&format!("[The command has no new output after 1 seconds. {still}")),
        "{}",
        r.text
    );
    assert_eq!(r["wait_ended"], "no_new_output", "{r:#?}");

    let r = server.terminal(json!({"command": "echo second"})).await;
    assert_eq!(r["status"], "not_executed", "{r:#?}");
    assert!(r.text.starts_with("[Below is the output of the previous command.]\n"), "{}", r.text);
    assert_notice(
        &r,
        "[Your command \"echo second\" is NOT executed. The previous command is still running - \
         You CANNOT send new commands until the previous command is completed.]",
    );
    assert!(r.text.contains("\n[Running for "), "{}", r.text);

    let r = server.terminal(json!({"command": "C-c", "is_input": true, "timeout": 10})).await;
    assert_eq!((r["status"].as_str(), r["exit_code"].as_i64()), (Some("completed"), Some(130)));
    assert!(
        r.text.contains("[The command completed with exit code 130. CTRL+C was sent.]"),
        "{}",
        r.text
    );
    assert_eq!(r["key_sent"], "C-c", "a field, not a copied notice: {r:#?}");

    let r = server.terminal(json!({"command": "echo fresh", "reset": true})).await;
    assert_eq!(r.output(), "fresh\n", "{r:#?}");
    assert_notice(
        &r,
        "Terminal session has been reset. All previous environment variables and session state \
         have been cleared.",
    );
}

/// Issue 6 §6: structured content carries what the text does: the output
/// and exit code of a previous command that finished while no call waited,
/// and output background jobs printed between commands.
#[tokio::test]
async fn structured_content_carries_previous_and_background_output() {
    let server = Server::start().await;
    let done = server.cwd().join("done");
    let r = server
        .terminal(json!({
            "command": "sleep 0.3; echo late; touch done; (exit 3)",
            "timeout": 0.1,
        }))
        .await;
    assert_eq!(r["status"], "running", "{r:#?}");
    crate::wait_until(crate::EVENTUALLY, || done.exists(), || "the command to finish".into()).await;
    // The command may need a moment to end after `touch`: until then a new
    // command is not executed (and the reply shows what was printed since
    // the last reply).
    let mut shown = r.output().to_owned();
    let r = crate::poll_until(
        crate::EVENTUALLY,
        async || {
            let r = server.terminal(json!({"command": "echo next"})).await;
            if r["status"] == "not_executed" {
                shown.push_str(r.output());
            }
            r
        },
        |r| r["status"] != "not_executed",
    )
    .await;
    assert_eq!(r.output(), "next\n", "{r:#?}");
    assert_eq!(r["previous_exit_code"], 3, "{r:#?}");
    let previous = r["previous_output"].as_str().expect("previous_output");
    // `late` is shown once: by a reply while the command still ran, or
    // else as the end of the previous command.
    assert_eq!(format!("{shown}{previous}"), "late\n", "shown while running: {shown:?}; {r:#?}");
    assert!(r.text.contains("finished with exit code 3"), "{}", r.text);
    assert!(r.text.contains(previous), "{}", r.text);

    // The job prints only once the command that started it has returned
    // (the test creates `go`), so its output falls between commands.
    let marker = server.cwd().join("bg");
    let job = "(while [ ! -e go ]; do sleep 0.02; done; echo bg-out; touch bg) &";
    let r = server.terminal(json!({"command": job})).await;
    assert_eq!(r["exit_code"], 0, "{r:#?}");
    assert!(!r.output().contains("bg-out"), "{r:#?}");
    std::fs::write(server.cwd().join("go"), "").unwrap();
    crate::wait_until(crate::EVENTUALLY, || marker.exists(), || "the job to print".into()).await;
    let r = server.terminal(json!({"command": "echo after"})).await;
    assert_eq!(r.output(), "after\n", "{r:#?}");
    // What lands while that command's line is typed is reported with the
    // reply after it.
    let r = if r["background_output"].as_str().unwrap_or_default().contains("bg-out") {
        r
    } else {
        server.terminal(json!({"command": "echo again"})).await
    };
    let background = r["background_output"].as_str().unwrap_or_default();
    assert!(background.contains("bg-out"), "{r:#?}");
    assert!(r.text.contains("bg-out"), "{}", r.text);
    assert_notice(&r, "[Printed while no command was running (background jobs):]");
}
