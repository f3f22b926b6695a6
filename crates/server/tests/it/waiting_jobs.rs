//! Background jobs that wait for input: the wait is said once in the next
//! reply of any session (`jobs_waiting`, and a line of text) and in the
//! `sessions` listing with its prompt; answering it clears it, and a new
//! wait is said again. A wait the job's own reply reported is not repeated.

use serde_json::{Value, json};

use crate::{EVENTUALLY, Reply, Server, poll_until};

/// The row of session `name` in a `sessions` listing.
fn row<'a>(listing: &'a Reply, name: &str) -> &'a Value {
    listing["sessions"]
        .as_array()
        .and_then(|rows| rows.iter().find(|row| row["name"] == name))
        .unwrap_or(&Value::Null)
}

/// Runs `echo` in `default` until a reply carries a waiting job's notice,
/// and returns that reply.
async fn echo_until_notice(server: &Server) -> Reply {
    poll_until(
        EVENTUALLY,
        async || server.terminal(json!({"command": "echo hi"})).await,
        |r| !r["jobs_waiting"].is_null(),
    )
    .await
}

/// Issue 18: a job that stops at a prompt after its start reply is said in
/// a later reply of another session once, and listed with its prompt;
/// answering it clears it, and its next prompt is said again.
#[tokio::test]
async fn a_job_that_begins_waiting_later_is_said_once_and_listed_with_its_prompt() {
    let server = Server::start().await;
    let job = "sleep 1; read -p 'Apply 3 migrations? [y/N] ' x; sleep 1; \
               read -p 'Really? ' y; echo \"answers=$x$y\"";
    let r =
        server.terminal(json!({"command": job, "background": true, "session": "migrate"})).await;
    assert_eq!(r["status"], "running", "not yet at its prompt: {r:#?}");
    let r = echo_until_notice(&server).await;
    assert_eq!(r.output(), "hi\n", "{r:#?}");
    let notice = &r["jobs_waiting"][0];
    assert_eq!(notice["session"], "migrate", "{r:#?}");
    assert_eq!(notice["prompt"], "Apply 3 migrations? [y/N] ", "{r:#?}");
    assert!(
        r.text.contains(
            "[Background job in session \"migrate\" (\"sleep 1; read -p 'Apply 3 migrations? \
             [y/N] ' x;"
        ) && r.text.contains("waits for input; its prompt is \"Apply 3 migrations? [y/N] \""),
        "{}",
        r.text
    );
    // Once: the next reply, of any tool, does not say it again.
    let r = server.terminal(json!({"command": "echo again"})).await;
    assert!(r["jobs_waiting"].is_null() && !r.text.contains("waits for input"), "{r:#?}");
    // Reading the job's output is no answer and says nothing of its wait.
    let read = server.call("output", json!({"session": "migrate"})).await;
    assert!(read["jobs_waiting"].is_null(), "{read:#?}");
    let r = server.terminal(json!({"command": "echo again"})).await;
    assert!(r["jobs_waiting"].is_null(), "{r:#?}");
    let listing = server.call("sessions", json!({})).await;
    assert!(listing["jobs_waiting"].is_null(), "{listing:#?}");
    let job_row = row(&listing, "migrate");
    assert_eq!(job_row["state"], "waiting_for_input", "{listing:#?}");
    assert_eq!(job_row["prompt"], "Apply 3 migrations? [y/N] ", "{listing:#?}");
    assert!(
        listing.text.contains("is waiting for input (running for")
            && listing.text.contains("its prompt is \"Apply 3 migrations? [y/N] \""),
        "{}",
        listing.text
    );
    // Answered: no longer waiting; its next prompt is a new wait, said again.
    let r = server
        .terminal(json!({"command": "y", "is_input": true, "session": "migrate", "timeout": 0.3}))
        .await;
    assert_eq!(r["status"], "running", "{r:#?}");
    // The answered prompt is gone from the listing (the next may be there).
    let listing = server.call("sessions", json!({})).await;
    assert_ne!(row(&listing, "migrate")["prompt"], "Apply 3 migrations? [y/N] ", "{listing:#?}");
    let r = echo_until_notice(&server).await;
    assert_eq!(r["jobs_waiting"][0]["prompt"], "Really? ", "{r:#?}");
    let r = server.terminal(json!({"command": "n", "is_input": true, "session": "migrate"})).await;
    assert_eq!(r["status"], "completed", "{r:#?}");
    assert!(r.output().contains("answers=yn"), "{r:#?}");
    let r = server.terminal(json!({"command": "echo done"})).await;
    assert!(r["jobs_waiting"].is_null(), "{r:#?}");
}

/// Issue 18: a wait that the job's own reply reported (its start reply or
/// a poll of its session, at its prompt) is not said again in another
/// session's reply.
#[tokio::test]
async fn a_wait_its_own_reply_reported_is_not_said_again() {
    let server = Server::start().await;
    let r = server
        .terminal(json!({"command": "read -p 'Now? ' x; echo got-$x", "background": true}))
        .await;
    assert!(r["jobs_waiting"].is_null(), "{r:#?}");
    let name = r["session"].as_str().expect("the job's session").to_owned();
    // Its start reply says it waits, or (on a slow machine) a poll does.
    let r = server.terminal(json!({"command": "", "session": name, "timeout": 20})).await;
    assert_eq!(r["status"], "waiting_for_input", "{r:#?}");
    assert!(r["jobs_waiting"].is_null(), "{r:#?}");
    // The supervisor keeps looking at the job; replies in default never
    // repeat what its start reply said.
    for _ in 0..3 {
        let listing = server.call("sessions", json!({})).await;
        assert_eq!(row(&listing, &name)["prompt"], "Now? ", "{listing:#?}");
        let r = server.terminal(json!({"command": "echo hi"})).await;
        assert!(r["jobs_waiting"].is_null(), "{r:#?}");
    }
    let r = server.terminal(json!({"command": "ok", "is_input": true, "session": name})).await;
    assert!(r.output().contains("got-ok"), "{r:#?}");
}
