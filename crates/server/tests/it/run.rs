//! The `run` tool and `policy_explain` end to end: the seed's result schema
//! for a success, a no-output timeout and a command that cannot start, and
//! the policy decisions an agent can ask about.

use serde_json::json;

use crate::Server;

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
