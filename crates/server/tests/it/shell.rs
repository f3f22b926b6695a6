//! The shell integration end to end: `exec bash`, `PROMPT_COMMAND=` and a
//! nested shell keep the session working, `set -x` shows nothing of ours,
//! and a here-document is fed line by line (issue 6's "done when").

use serde_json::json;

use crate::Server;

#[tokio::test]
async fn exec_bash_and_prompt_command_keep_the_session_working() {
    let server = Server::start().await;
    let r = server.terminal(json!({"command": "exec bash --norc"})).await;
    assert_eq!((r["status"].as_str(), r["exit_code"].as_i64()), (Some("completed"), Some(0)));
    assert!(r.text.contains("reinstalled"), "{}", r.text);
    let r = server.terminal(json!({"command": "PROMPT_COMMAND="})).await;
    assert_eq!(r["exit_code"], 0, "{r:#?}");
    let r = server.terminal(json!({"command": "mkdir -p d && cd d && false"})).await;
    assert_eq!((r["status"].as_str(), r["exit_code"].as_i64()), (Some("completed"), Some(1)));
    assert_eq!(r["cwd"], server.cwd().join("d").display().to_string());

    let r = server.terminal(json!({"command": "bash --norc"})).await;
    assert!(r.text.contains("nested shell started"), "{}", r.text);
    let r = server.terminal(json!({"command": "set -x; echo inner"})).await;
    assert!(!r.output().contains("__sk"), "{r:#?}");
    let r = server.terminal(json!({"command": "exit 4"})).await;
    assert_eq!(r["exit_code"], 4, "{r:#?}");
    assert!(r.text.contains("nested shell exited"), "{}", r.text);
    let r = server.terminal(json!({"command": "echo outer"})).await;
    assert_eq!(r.output(), "outer\n", "{r:#?}");
}

/// OpenHands' `test_interactive_command`, second half.
#[tokio::test]
async fn a_here_document_is_fed_line_by_line() {
    let server = Server::start().await;
    let r = server.terminal(json!({"command": "cat << EOF"})).await;
    assert_eq!((r["status"].as_str(), r["exit_code"].as_i64()), (Some("running"), Some(-1)));
    assert_eq!(r["waiting_for_input"], true, "{r:#?}");
    assert_eq!(r.output(), "", "{r:#?}");
    for line in ["line 1", "line 2"] {
        let r = server.terminal(json!({"command": line, "is_input": true})).await;
        assert_eq!(r["exit_code"], -1, "{r:#?}");
    }
    let r = server.terminal(json!({"command": "EOF", "is_input": true})).await;
    assert_eq!(r.output(), "line 1\nline 2\n", "{r:#?}");
    assert_eq!((r["status"].as_str(), r["exit_code"].as_i64()), (Some("completed"), Some(0)));
}

/// Issue 12: `output` read a command that a nested shell's start or `exit`
/// ended as still running, with its end missing.
#[tokio::test]
async fn output_reads_nested_shell_commands_as_finished() {
    let server = Server::start().await;
    for (command, code, text) in [
        ("echo into; bash --norc", 0, "into\n"),
        ("echo out; exit 3", 3, "out\n"),
        ("echo replaced; exec bash --norc", 0, "replaced\n"),
    ] {
        let r = server.terminal(json!({"command": command})).await;
        assert_eq!(
            (r["status"].as_str(), r["exit_code"].as_i64()),
            (Some("completed"), Some(code))
        );
        let page = server.call("output", json!({})).await;
        assert!(!page.is_error, "{}", page.text);
        assert_eq!(
            (page["running"].as_bool(), page["exit_code"].as_i64()),
            (Some(false), Some(code)),
            "{command}: {page:#?}"
        );
        assert!(page["lines"].as_str().is_some_and(|lines| lines.contains(text)), "{page:#?}");
    }
}
