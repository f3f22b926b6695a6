//! The `run` tool and `policy_explain` end to end: the seed's result schema
//! for a success, a no-output timeout and a command that cannot start, and
//! the policy decisions an agent can ask about, compound commands included.

use std::path::Path;

use serde_json::{Value, json};

use crate::{Scratch, Server};

#[tokio::test]
async fn run_separates_stdout_stderr_and_exit_code() {
    let server = Server::start().await;
    let r = server
        .run(json!({"command": "echo out; echo err >&2; printf 'more'; exit 3", "timeout_sec": 20}))
        .await;
    assert!(!r.is_error, "{r:#?}");
    assert_eq!(r["status"], "success", "{r:#?}");
    assert_eq!(r["stdout"], "out\nmore");
    assert_eq!(r["stderr"], "err\n");
    assert_eq!(r["exitCode"], 3);
    assert!(r["timeoutReason"].is_null(), "{r:#?}");
    assert!(r["terminationMode"].is_null(), "{r:#?}");
    assert!(r["durationMs"].as_u64() < Some(10_000), "{r:#?}");
    assert!(r.text.contains("out\nmore"), "{}", r.text);
    assert!(r.text.contains("[stderr]\nerr"), "{}", r.text);
    assert!(r.text.contains("exit code 3"), "{}", r.text);

    // The command runs in the server's directory, with stdin and env as given.
    let r = server
        .run(json!({
            "command": "pwd; read line; echo \"$line/$EXTRA\"",
            "stdin": "typed\n",
            "env": {"EXTRA": "from-env"},
        }))
        .await;
    assert_eq!(r["status"], "success", "{r:#?}");
    assert_eq!(r["stdout"], format!("{}\ntyped/from-env\n", server.cwd().display()));
    assert_eq!(r["exitCode"], 0);
}

/// The seed's second test, scaled down: `sleep 600` with `timeout_sec` 2
/// hits the no-output limit, 2/4 = 0.5 s raised to the 1 s floor.
#[tokio::test]
async fn run_sleep_hits_the_no_output_limit() {
    let server = Server::start().await;
    let r = server.run(json!({"command": "sleep 600", "timeout_sec": 2})).await;
    assert_eq!(r["status"], "timeout", "{r:#?}");
    assert_eq!(r["timeoutReason"], "no_output_timeout", "{r:#?}");
    assert_eq!(r["terminationMode"], "soft", "{r:#?}");
    assert_eq!(r["exitCode"], -1, "{r:#?}");
    assert_eq!(r["execTimeoutSec"], 2.0, "{r:#?}");
    assert_eq!(r["noOutputTimeoutSec"], 1.0, "{r:#?}");
    let duration = r["durationMs"].as_u64().expect("durationMs");
    assert!((900..=3000).contains(&duration), "durationMs {duration}");
    assert_eq!(r["stdout"], "");
    assert!(r.text.contains("no_output_timeout"), "{}", r.text);
    // Issue 14: the reply says how to allow a longer silence.
    assert!(r.text.contains("no_output_timeout_sec"), "{}", r.text);
}

#[tokio::test]
async fn run_in_a_missing_cwd_is_an_error_that_says_why() {
    let server = Server::start().await;
    let missing = server.cwd().join("does-not-exist");
    let r =
        server.run(json!({"command": "echo never", "cwd": missing.display().to_string()})).await;
    assert_eq!(r["status"], "error", "{r:#?}");
    assert_eq!(r["exitCode"], -1, "{r:#?}");
    assert_eq!(r["stdout"], "");
    let stderr = r["stderr"].as_str().unwrap_or_default();
    assert!(stderr.contains(&missing.display().to_string()), "names the directory: {stderr:?}");
    assert!(
        stderr.contains("No such file or directory") || stderr.contains("does not exist"),
        "says why: {stderr:?}"
    );
}

#[tokio::test]
async fn policy_explain_categories_and_explicit_timeouts() {
    let server = Server::start().await;
    let r = server.call("policy_explain", json!({"command": "git status"})).await;
    assert!(!r.is_error, "{r:#?}");
    assert_eq!(r["category"], "quick", "{r:#?}");
    assert_eq!(r["source"], "pattern", "{r:#?}");
    assert!(r["pattern"].as_str().is_some_and(|p| p.contains("git")), "{r:#?}");
    assert!(r["exec_timeout_sec"].as_f64() > Some(0.0), "{r:#?}");
    assert_eq!(r["policy"], "embedded default", "{r:#?}");
    assert!(r.text.contains("quick"), "{}", r.text);

    let r = server.call("policy_explain", json!({"command": "git status", "timeout_sec": 8})).await;
    assert_eq!(r["source"], "explicit", "{r:#?}");
    assert!(r["category"].is_null(), "{r:#?}");
    assert_eq!(r["exec_timeout_sec"], 8.0, "{r:#?}");
    assert_eq!(r["no_output_timeout_sec"], 2.0, "{r:#?}");

    let r = server.call("policy_explain", json!({"command": "git status; make"})).await;
    assert_ne!(r["category"], "quick", "a chain is never quick: {r:#?}");
}

/// A custom policy named by `SHELLKEEP_POLICY` decides `run`'s limits.
#[tokio::test]
async fn run_uses_the_policy_category() {
    let dir = crate::Scratch::new();
    let policy = dir.path.join("policy.json");
    std::fs::write(
        &policy,
        json!({
            "version": "1.0",
            "description": "test",
            "categories": {
                "tiny": {"exec_timeout_sec": 1, "no_output_timeout_sec": 1},
                "normal": {"exec_timeout_sec": 60, "no_output_timeout_sec": 30},
            },
            "command_patterns": {"tiny": ["^sleep "], "normal": []},
            "default_category": "normal",
        })
        .to_string(),
    )
    .unwrap();
    let server = Server::with_env(&[], &[("SHELLKEEP_POLICY", policy.to_str().unwrap())]).await;
    let r = server.run(json!({"command": "sleep 30"})).await;
    assert_eq!(r["status"], "timeout", "{r:#?}");
    assert_eq!(r["category"], "tiny", "{r:#?}");
    assert_eq!(r["execTimeoutSec"], 1.0, "{r:#?}");
    let duration = r["durationMs"].as_u64().expect("durationMs");
    assert!((900..=5000).contains(&duration), "durationMs {duration}");
}

/// Issue 14 §5: the policy matches each part of a compound command, and the
/// part with the longest limits decides: `cd … && cargo build --release`
/// gets the release build's 900 s, not the default 120 s. `cargo` here is a
/// shell function, so nothing is built.
#[tokio::test]
async fn compound_commands_get_the_limits_of_their_work() {
    let server = Server::start().await;
    let command = "cargo() { echo \"built $*\"; }; cd /tmp && sleep 0 && cargo build --release";
    let r = server.run(json!({"command": command})).await;
    assert_eq!(
        (r["status"].as_str(), r["exitCode"].as_i64()),
        (Some("success"), Some(0)),
        "{r:#?}"
    );
    assert_eq!(r["stdout"], "built build --release\n", "{r:#?}");
    assert_eq!(r["category"], "extended", "{r:#?}");
    assert_eq!(r["pattern"], "cargo build --release", "{r:#?}");
    assert_eq!(
        (r["execTimeoutSec"].as_f64(), r["noOutputTimeoutSec"].as_f64()),
        (Some(900.0), Some(120.0))
    );
    assert!(r.text.contains("limits: extended (exec 900 s, no output 120 s)"), "{}", r.text);

    let r = server.call("policy_explain", json!({"command": command})).await;
    assert!(!r.is_error, "{r:#?}");
    assert_eq!((r["category"].as_str(), r["source"].as_str()), (Some("extended"), Some("pattern")));
    assert_eq!(r["part"], "cargo build --release", "{r:#?}");
    assert_eq!(r["exec_timeout_sec"], 900.0, "{r:#?}");
    let parts: Vec<(&str, &str)> = r["parts"]
        .as_array()
        .expect("the parts considered")
        .iter()
        .map(|p| (p["text"].as_str().unwrap(), p["category"].as_str().unwrap()))
        .collect();
    assert_eq!(
        parts,
        [
            ("cargo() { echo \"built $*\"", "quick"),
            ("cd /tmp", "quick"),
            ("sleep 0", "medium"),
            ("cargo build --release", "extended"),
        ]
    );
    assert_eq!(r["parts"][0]["matched_text"], "echo \"built $*\"", "{r:#?}");
    assert!(r["parts"][3].get("matched_text").is_none(), "{r:#?}");
    assert!(
        r.text.contains("extended (exec 900 s, no output 120 s; matched \"cargo build --release\") from the part \"cargo build --release\""),
        "{}",
        r.text
    );
    assert!(r.text.contains("\"sleep 0\" medium"), "{}", r.text);

    // The seed's example from the issue, and the other operators.
    for (command, category, part) in [
        ("cd demo && cargo build --release", "extended", "cargo build --release"),
        ("make || npm ci", "long", "npm ci"),
        ("ls; pip install requests", "long", "pip install requests"),
        ("cat data | python train.py", "extended", "python train.py"),
        ("(cd demo && make -j8) > log 2>&1", "long", "make -j8"),
        ("echo \"$(go build ./...)\"", "long", "go build ./..."),
        ("sudo -E env A=1 nice cargo build", "long", "sudo -E env A=1 nice cargo build"),
        ("bash -c 'cd demo && cargo build --release'", "extended", "cargo build --release"),
    ] {
        let r = server.call("policy_explain", json!({"command": command})).await;
        assert_eq!(
            (r["category"].as_str(), r["part"].as_str()),
            (Some(category), Some(part)),
            "{command}: {r:#?}"
        );
    }
    // Quotes and escapes do not split: one `echo`, matched as written.
    let r = server
        .call("policy_explain", json!({"command": "echo 'a && cargo build --release'"}))
        .await;
    assert_ne!(r["category"], "extended", "{r:#?}");
    assert!(r["part"].is_null() && r["parts"].is_null(), "one part, matched as written: {r:#?}");
    // A prefix looked through is named.
    let r =
        server.call("policy_explain", json!({"command": "sudo -u me cargo build --release"})).await;
    assert_eq!(r["category"], "extended", "{r:#?}");
    assert_eq!(r["parts"][0]["matched_text"], "cargo build --release", "{r:#?}");
    assert!(r.text.contains("(as \"cargo build --release\")"), "{}", r.text);
    // An explicit timeout still beats every part.
    let r = server
        .call(
            "policy_explain",
            json!({"command": "cd demo && cargo build --release", "timeout_sec": 30}),
        )
        .await;
    assert_eq!(
        (r["source"].as_str(), r["exec_timeout_sec"].as_f64()),
        (Some("explicit"), Some(30.0)),
        "{r:#?}"
    );
}

/// The list of parts is bounded, and a hostile command costs a reply like
/// any other.
#[tokio::test]
async fn policy_explain_lists_a_bounded_number_of_parts() {
    let server = Server::start().await;
    let many: Vec<String> = (0..30).map(|i| format!("tool{i}")).collect();
    let command = format!("{}; cargo build --release", many.join(" && "));
    let r = server.call("policy_explain", json!({"command": command})).await;
    assert_eq!(r["category"], "extended", "{r:#?}");
    assert_eq!(r["part"], "cargo build --release", "{r:#?}");
    assert_eq!(r["parts"].as_array().map(Vec::len), Some(20), "{r:#?}");
    assert_eq!(r["more_parts"], 11, "{r:#?}");
    assert!(r.text.contains("and 11 more"), "{}", r.text);

    let hostile = format!("{}{}", "( ".repeat(50_000), ";".repeat(500_000));
    let r = server.call("policy_explain", json!({"command": hostile})).await;
    assert!(!r.is_error, "{r:#?}");
    assert!(r.text.len() < 20_000, "{} characters", r.text.len());
    let distinct: String = (0..2_000).map(|i| format!("t{i};")).collect();
    let r = server.call("policy_explain", json!({"command": distinct})).await;
    assert_eq!(r["more_parts"], 2_000 - 20, "{r:#?}");
    assert!(r.text.contains("were not matched"), "{}", r.text);
}

/// `run`'s description states the silence rule in its first sentence.
#[tokio::test]
async fn run_description_states_the_silence_rule_first() {
    let server = Server::start().await;
    let tools = server.client().list_all_tools().await.expect("tools/list");
    let run = tools.iter().find(|tool| tool.name == "run").expect("the run tool");
    let description = run.description.as_deref().unwrap_or_default();
    let first = description.split(". ").next().unwrap_or_default();
    for words in ["min(timeout_sec / 4, 60) s", "no_output_timeout_sec", "printing nothing"] {
        assert!(first.contains(words), "{words:?} in the first sentence: {first}");
    }
}

/// The terminal takes its limit from the same rule: the audit log's start
/// line records the category and limits a command got.
#[tokio::test]
async fn the_terminal_gets_the_limits_of_the_work_too() {
    let dir = Scratch::new();
    let log = dir.path.join("audit.jsonl");
    let server = Server::with(&["--audit-log", log.to_str().expect("utf-8")]).await;
    let command = "cargo() { echo built; }; cd /tmp && cargo build --release; unset -f cargo";
    let r = server.terminal(json!({"command": command})).await;
    assert!(r.output().contains("built"), "{r:#?}");
    let start = audit_start(&log, command);
    assert_eq!(start["category"], "extended", "{start}");
    assert_eq!(start["limits"]["exec_sec"], 900.0, "{start}");
}

/// The audit log's start line for `command`.
fn audit_start(log: &Path, command: &str) -> Value {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).expect("a JSON line"))
        .find(|line| line["event"] == "start" && line["command"] == command)
        .unwrap_or_else(|| panic!("no start line for {command:?} in {}", log.display()))
}

/// Issue 14 §5: `sleep 3; echo done` with `timeout_sec` 10 is stopped after
/// 2.5 s of silence (the original design's rule, which stays); the reply
/// says how to allow a longer silence, and doing so lets it finish.
#[tokio::test]
async fn a_silent_command_is_told_how_to_allow_longer_silence() {
    let server = Server::start().await;
    let r = server.run(json!({"command": "sleep 3; echo done", "timeout_sec": 10})).await;
    assert_eq!(
        (r["status"].as_str(), r["timeoutReason"].as_str()),
        (Some("timeout"), Some("no_output_timeout")),
        "{r:#?}"
    );
    assert_eq!(r["noOutputTimeoutSec"], 2.5, "{r:#?}");
    assert!(
        r.text.ends_with(
            "[If it is silent by nature, run it with no_output_timeout_sec: the seconds of \
             silence to allow.]"
        ),
        "{}",
        r.text
    );
    let r = server
        .run(
            json!({"command": "sleep 3; echo done", "timeout_sec": 10, "no_output_timeout_sec": 5}),
        )
        .await;
    assert_eq!((r["status"].as_str(), r["stdout"].as_str()), (Some("success"), Some("done\n")));
    assert!(!r.text.contains("no_output_timeout_sec"), "no hint after a success: {}", r.text);
}

/// The parts policy_explain names are masked as the command is, even a part
/// that holds only a piece of a secret a separator split.
#[tokio::test]
async fn policy_explain_masks_the_parts_it_names() {
    let whole = "sk-policy-secret-4242";
    let split = "pa55w0rd;split-secret";
    let server = Server::with_env(
        &["--secret", "SK_POLICY_WHOLE", "--secret", "SK_POLICY_SPLIT"],
        &[("SK_POLICY_WHOLE", whole), ("SK_POLICY_SPLIT", split)],
    )
    .await;
    let command = format!(
        "cd /tmp && curl -H 'X-Key: {whole}' https://example.com; sudo -E env K={whole} cargo build \
         --release; echo {split} && make -j8"
    );
    let r = server.call("policy_explain", json!({"command": command})).await;
    assert_eq!(r["category"], "extended", "{r:#?}");
    let everything = format!("{} {}", r.text, r.structured);
    for piece in [whole, split, "pa55w0rd", "split-secret"] {
        assert!(!everything.contains(piece), "{piece:?} shown: {everything}");
    }
    assert!(r.text.contains("X-Key: <secret-hidden>"), "{}", r.text);
    assert!(r.text.contains("K=<secret-hidden>"), "{}", r.text);
}

/// `shellkeep policy explain` applies the same rule and names the part; a
/// single argument is a shell command line.
#[test]
fn the_cli_explains_a_compound_command() {
    let output = std::process::Command::new(crate::binary())
        .args(["--policy", "/nonexistent/policy.json"])
        .args(["policy", "explain", "--", "cd demo && cargo build --release"])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("the binary runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{output:?}");
    assert!(
        stdout.starts_with(
            "\"cd demo && cargo build --release\": extended (exec 900 s, no output 120 s; \
             matched \"cargo build --release\") from the part \"cargo build --release\""
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("Parts considered (the longest limits win): \"cd demo\" quick; \"cargo build --release\" extended."),
        "{stdout}"
    );
}
