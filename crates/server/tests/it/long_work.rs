//! Long and interactive work through the `terminal` tool, as an MCP host
//! drives it: the unwatched-time limit and its whole-command stop, client
//! cancellation that loses nothing, progress notifications, prompts
//! answered within a second, and C-c after input nobody read.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::handler::client::ClientHandler;
use rmcp::model::{CallToolRequestParams, CallToolResponse, ProgressNotificationParam};
use rmcp::service::NotificationContext;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

use crate::{EVENTUALLY, Scratch, Server, spawn_binary, wait_until};

/// A server whose default category allows 2 s of unwatched time.
async fn short_limits() -> (Server, Scratch) {
    let dir = Scratch::new();
    let server = Server::with(&["--policy", &dir.short_policy(), "--grace", "1"]).await;
    (server, dir)
}

/// Issue 6: a job left unwatched past its limit stops as a whole, and the
/// reply tells one story.
#[tokio::test]
async fn an_unwatched_command_is_stopped_whole_with_one_coherent_reply() {
    let (server, _dir) = short_limits().await;
    let r = server
        .terminal(json!({"command": "echo start; sleep 135; echo end", "timeout": 0.5}))
        .await;
    assert_eq!(r["status"], "running", "{r:#?}");
    assert_eq!(r["look_again_within_sec"], 2.0, "{r:#?}");
    assert!(r.text.contains("Look again within 2 s to keep it running."), "{}", r.text);
    // Unwatched for longer than 2 s: stopped. Wait for it with a poll that
    // starts late enough.
    wait_until(
        EVENTUALLY,
        || server.log().contains("stopping a terminal command"),
        || server.log(),
    )
    .await;
    let r = server.terminal(json!({"command": "", "timeout": 10})).await;
    assert_eq!(r["status"], "killed", "{r:#?}");
    assert_eq!(r["timeout_reason"], "exec_timeout", "{r:#?}");
    assert_eq!(r["termination_mode"], "soft", "{r:#?}");
    assert!(matches!(r["exit_code"].as_i64(), Some(130 | 143)), "{r:#?}");
    assert!(!r.output().contains("end"), "the rest of the line ran: {r:#?}");
    assert!(!r.text.contains("completed with exit code"), "{}", r.text);
    assert_eq!(r.text.matches("exit code").count(), 1, "{}", r.text);
    let r = server.terminal(json!({"command": "echo alive"})).await;
    assert_eq!(r.output(), "alive\n", "{r:#?}");
}

/// Issue 6: a command stopped while nobody watched is reported, as stopped,
/// before the next command; the next command is not refused.
#[tokio::test]
async fn a_command_stopped_unwatched_is_reported_before_the_next_one() {
    let (server, _dir) = short_limits().await;
    let r = server.terminal(json!({"command": "sleep 100; echo never", "timeout": 0.2})).await;
    assert_eq!(r["status"], "running", "{r:#?}");
    wait_until(
        EVENTUALLY,
        || server.log().contains("stopping a terminal command"),
        || server.log(),
    )
    .await;
    let r = server.terminal(json!({"command": "echo next"})).await;
    assert_eq!((r["status"].as_str(), r.output()), (Some("completed"), "next\n"), "{r:#?}");
    assert!(r.text.contains("The previous command was stopped"), "{}", r.text);
    assert!(!r.text.contains("never"), "{}", r.text);
}

/// Issue 6: the agent following a long job keeps it alive.
#[tokio::test]
async fn polling_keeps_a_job_alive_past_its_limit() {
    let (server, _dir) = short_limits().await;
    let mut r = server
        .terminal(
            json!({"command": "for i in 1 2 3 4 5 6; do echo $i; sleep 1; done", "timeout": 1}),
        )
        .await;
    let mut seen = r.output().to_owned();
    let deadline = Instant::now() + EVENTUALLY;
    while r["status"] == "running" {
        assert!(Instant::now() < deadline, "still running after {EVENTUALLY:?}: {seen:?}");
        r = server.terminal(json!({"command": "", "timeout": 1.5})).await;
        seen.push_str(r.output());
    }
    assert_eq!(r["status"], "completed", "{r:#?}");
    assert_eq!(seen, "1\n2\n3\n4\n5\n6\n");
}

/// Issue 6: a client that gives up on a call (here: drops the request,
/// which rmcp's client turns into `notifications/cancelled`) loses nothing.
#[tokio::test]
async fn a_cancelled_call_leaves_the_command_running_and_the_next_call_gets_everything() {
    let server = Server::start().await;
    let command = "for i in 1 2 3; do echo line$i; sleep 0.4; done; echo finished";
    let call = server.terminal(json!({"command": command, "timeout": 30}));
    assert!(tokio::time::timeout(Duration::from_millis(600), call).await.is_err());
    wait_until(EVENTUALLY, || server.log().contains("cancelled"), || server.log()).await;
    let r = server.terminal(json!({"command": "", "timeout": 20})).await;
    assert_eq!(r["status"], "completed", "{r:#?} {}", server.log());
    assert_eq!(r.output(), "line1\nline2\nline3\nfinished\n", "{r:#?}");
    assert!(r.text.contains("cancelled by the client"), "{}", r.text);
    assert!(r["previous_call_cancelled_sec_ago"].as_f64().is_some(), "{r:#?}");
    assert!(!r.text.contains("C-c"), "nothing was interrupted: {}", r.text);
    let r = server.terminal(json!({"command": "echo after"})).await;
    assert_eq!((r["status"].as_str(), r.output()), (Some("completed"), "after\n"), "{r:#?}");
}

/// Records the progress notifications the server sends.
#[derive(Clone, Default)]
struct ProgressRecorder(Arc<Mutex<Vec<ProgressNotificationParam>>>);

impl ClientHandler for ProgressRecorder {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.0.lock().expect("lock").push(params);
    }
}

/// Issue 6: while a call waits, the client hears about it once a second.
#[tokio::test]
async fn a_waiting_call_sends_progress_with_the_newest_line() {
    let scratch = Scratch::new();
    let mut child = spawn_binary(&scratch, &[], &[]);
    let stdout = child.stdout.take().expect("piped stdout");
    let stdin = child.stdin.take().expect("piped stdin");
    let recorder = ProgressRecorder::default();
    let client = recorder.clone().serve((stdout, stdin)).await.expect("handshake");
    // rmcp's client puts a progressToken in every request's _meta.
    let Value::Object(arguments) = json!({
        "command": "for i in 1 2 3; do echo step$i; sleep 1; done",
        "timeout": 30,
    }) else {
        unreachable!()
    };
    let params = CallToolRequestParams::new("terminal").with_arguments(arguments);
    let response = client.peer().call_tool_once(params).await.expect("the call succeeds");
    let CallToolResponse::Complete(result) = response else { panic!("{response:?}") };
    let reply = serde_json::to_value(&result).expect("serializes");
    assert_eq!(reply["structuredContent"]["status"], "completed", "{reply:#?}");
    let seen = recorder.0.lock().expect("lock").clone();
    assert!((2..=4).contains(&seen.len()), "{seen:#?}");
    assert!(seen.windows(2).all(|w| w[1].progress > w[0].progress), "{seen:#?}");
    assert!(seen.iter().all(|p| p.message.as_deref().is_some_and(|m| m.starts_with("step"))));
    assert!(seen.iter().all(|p| p.progress_token == seen[0].progress_token));
    // None after the result.
    let count = seen.len();
    let Value::Object(arguments) = json!({"command": "echo quick"}) else { unreachable!() };
    let params = CallToolRequestParams::new("terminal").with_arguments(arguments);
    client.peer().call_tool_once(params).await.expect("the call succeeds");
    assert_eq!(recorder.0.lock().expect("lock").len(), count);
    let _ = client.cancel().await;
    let _ = child.kill().await;
}

/// Issue 6: a password prompt (getpass reads /dev/tty) is reported within
/// about a second, not after the 30 s silence return.
#[tokio::test]
async fn a_password_prompt_comes_back_as_waiting_for_input() {
    let server = Server::start().await;
    let started = Instant::now();
    let r = server
        .terminal(json!({"command": "python3 -c 'import getpass; print(len(getpass.getpass()))'"}))
        .await;
    assert_eq!(r["status"], "waiting_for_input", "{r:#?}");
    assert_eq!(r["waiting_for_input"], true, "{r:#?}");
    assert_eq!(r.output(), "Password: ", "{r:#?}");
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    let r = server.terminal(json!({"command": "hunter2", "is_input": true})).await;
    assert_eq!(r["status"], "completed", "{r:#?}");
    assert!(r.output().ends_with("7\n"), "{r:#?}");
}

/// Issue 6: after text nobody reads, C-c still interrupts; a key at an
/// idle prompt is harmless.
#[tokio::test]
async fn c_c_interrupts_after_unread_input_and_is_harmless_when_idle() {
    let server = Server::start().await;
    let r = server.terminal(json!({"command": "sleep 100", "timeout": 0.3})).await;
    assert_eq!(r["status"], "running", "{r:#?}");
    let text = "x".repeat(8 * 1024);
    let r = server.terminal(json!({"command": text, "is_input": true, "timeout": 0.3})).await;
    assert!(!r.is_error, "{r:#?}");
    let r = server.terminal(json!({"command": "C-c", "is_input": true, "timeout": 10})).await;
    assert_eq!((r["status"].as_str(), r["exit_code"].as_i64()), (Some("completed"), Some(130)));
    assert!(!r.text.contains("SIGTERM"), "{}", r.text);
    let r = server.terminal(json!({"command": "C-c", "is_input": true})).await;
    assert!(!r.is_error, "{r:#?}");
    assert_eq!(r["status"], "completed", "{r:#?}");
    let r = server.terminal(json!({"command": "echo fine"})).await;
    assert_eq!(r.output(), "fine\n", "{r:#?}");
}

/// Issue 6: a call without `timeout` hands control back after the longest
/// wait (`--max-wait`, 50 s by default) even while output keeps coming.
#[tokio::test]
async fn a_chatty_command_hands_control_back_after_the_longest_wait() {
    let server = Server::with(&["--max-wait", "1"]).await;
    let started = Instant::now();
    let r = server.terminal(json!({"command": "while :; do echo tick; sleep 0.1; done"})).await;
    assert_eq!(r["status"], "running", "{r:#?}");
    assert!(r.output().starts_with("tick\n"), "{r:#?}");
    assert!(started.elapsed() < Duration::from_secs(15), "{:?}", started.elapsed());
    let r = server.terminal(json!({"command": "C-c", "is_input": true, "timeout": 10})).await;
    assert_eq!(r["exit_code"], 130, "{r:#?}");
    let help = std::process::Command::new(crate::binary())
        .arg("--help")
        .output()
        .expect("shellkeep --help");
    let help = String::from_utf8_lossy(&help.stdout).replace('\n', " ");
    assert!(help.contains("--max-wait"), "{help}");
    assert!(help.contains("[default: 50]"), "{help}");
}
