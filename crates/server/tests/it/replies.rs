//! Issue 18: every reply kind, through the real binary, checked against the
//! one list of what an agent must be told, `docs/replies.md`: the
//! structured content alone (what Claude Code and Codex hand their model)
//! and the text alone (what Gemini CLI hands its model) each carry every
//! fact of the kind. The test reads the list from the page, so the page and
//! the replies cannot drift apart. Also: every reply, in either form, stays
//! within the reply budget at the default settings, with output built to
//! be large in JSON (quotes, backslashes, control characters, long lines,
//! a previous command's output and background output in one reply); and a
//! client that joins the text blocks with nothing between them still sees
//! every notice start on a line of its own.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};

use crate::{EVENTUALLY, Reply, Scratch, Server, poll_until, wait_until};

/// The page that lists the facts of every reply kind.
const PAGE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/replies.md");

/// The most characters a reply may take in either form at the default
/// settings (Claude Code puts a result over about 50,000 in a file).
const REPLY_BUDGET: usize = 40_000;

/// One fact of a reply kind, as the page states it.
#[derive(Debug)]
struct Fact {
    /// The fact, in words.
    what: String,
    /// Fields of the structured content it is in: `path` (present, not
    /// null) or `path = JSON` (that value); a path is dotted
    /// (`output_call.offset`, `jobs_ended.0.exit_code`).
    fields: Vec<String>,
    /// Pieces of the text that say it; `…` in a piece stands for any text.
    text: Vec<String>,
}

/// The reply kinds of the page: each `### ` heading whose name is in
/// backquotes, with the rows of the table under it.
fn facts() -> BTreeMap<String, Vec<Fact>> {
    let page = std::fs::read_to_string(PAGE).expect("docs/replies.md");
    let mut kinds: BTreeMap<String, Vec<Fact>> = BTreeMap::new();
    let mut kind: Option<String> = None;
    for line in page.lines() {
        if let Some(heading) = line.strip_prefix("### ") {
            kind = heading.split('`').nth(1).map(str::to_owned);
            if let Some(kind) = &kind {
                assert!(kinds.insert(kind.clone(), Vec::new()).is_none(), "{kind} twice");
            }
            continue;
        }
        let Some(kind) = &kind else { continue };
        let cells: Vec<&str> = line.trim().trim_matches('|').split('|').map(str::trim).collect();
        if !line.starts_with('|') || cells.len() != 3 || cells[0] == "fact" || cells[0] == "---" {
            continue;
        }
        kinds.get_mut(kind).expect("the kind").push(Fact {
            what: cells[0].to_owned(),
            fields: quoted(cells[1]),
            text: quoted(cells[2]),
        });
    }
    kinds
}

/// The `quoted` pieces of a table cell.
fn quoted(cell: &str) -> Vec<String> {
    cell.split('`').skip(1).step_by(2).map(str::to_owned).collect()
}

/// The value at a dotted `path` of `value`.
fn at<'a>(value: &'a Value, path: &str) -> &'a Value {
    path.split('.').fold(value, |value, key| match key.parse::<usize>() {
        Ok(index) => &value[index],
        Err(_) => &value[key],
    })
}

/// Whether `text` holds the pieces of `pattern` (split at `…`) in order.
fn says(text: &str, pattern: &str) -> bool {
    let mut rest = text;
    for piece in pattern.split('…') {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    true
}

/// The facts of `kind` that `reply` lacks in either form.
fn missing(kind: &str, facts: &[Fact], reply: &Reply) -> Vec<String> {
    let mut missing = Vec::new();
    for fact in facts {
        for field in &fact.fields {
            let ok = match field.split_once(" = ") {
                Some((path, expected)) => {
                    let expected: Value = serde_json::from_str(expected)
                        .unwrap_or_else(|err| panic!("{kind}: `{field}` is no JSON: {err}"));
                    at(&reply.structured, path) == &expected
                }
                None => !at(&reply.structured, field).is_null(),
            };
            if !ok {
                missing.push(format!("{kind}: {}: structured `{field}`", fact.what));
            }
        }
        for piece in &fact.text {
            if !says(&reply.text, piece) {
                missing.push(format!("{kind}: {}: text `{piece}`", fact.what));
            }
        }
        // Both forms say every fact; a tool error has only text.
        let forms = (!fact.fields.is_empty(), !fact.text.is_empty());
        let expected = (!reply.structured.is_null(), true);
        assert_eq!(forms, expected, "{kind}: {}: (structured, text) as listed", fact.what);
    }
    missing
}

/// Every reply kind of the page, from the real binary: the kind's name and
/// the reply.
async fn every_kind() -> Vec<(&'static str, Reply)> {
    let dir = Scratch::new();
    let server = Server::with(&["--max-wait", "3"]).await;
    let short = Server::with(&["--policy", &dir.short_policy(), "--grace", "1"]).await;
    let mut kinds = Vec::new();
    let mut keep = |kind: &'static str, reply: Reply| kinds.push((kind, reply));

    keep("completed", server.terminal(json!({"command": "echo hi"})).await);
    keep("running", server.terminal(json!({"command": "sleep 30", "timeout": 1})).await);
    keep("refused", server.terminal(json!({"command": "ls"})).await);
    keep("interrupted", server.terminal(json!({"command": "C-c", "is_input": true})).await);
    let ticks = "for i in $(seq 600); do echo tick $i; sleep 0.1; done";
    keep("running, no timeout given", server.terminal(json!({"command": ticks})).await);
    server.terminal(json!({"command": "C-c", "is_input": true})).await;
    let ask = "read -p 'Name: ' name; echo \"hi $name\"";
    keep("waiting for input", server.terminal(json!({"command": ask, "timeout": 10})).await);
    server.terminal(json!({"command": "Bob", "is_input": true, "timeout": 10})).await;
    let secret = "read -r -s -p 'Password: ' pw; echo";
    keep(
        "waiting for a password",
        server.terminal(json!({"command": secret, "timeout": 10})).await,
    );
    server.terminal(json!({"command": "C-c", "is_input": true, "timeout": 10})).await;
    keep("waiting, no prompt", server.terminal(json!({"command": "cat", "timeout": 10})).await);
    server.terminal(json!({"command": "C-d", "is_input": true, "timeout": 10})).await;
    let cut = server.terminal(json!({"command": "seq 1 100000", "timeout": 60})).await;
    let call = cut["output_call"].clone();
    keep("cut", cut);
    keep("output page", server.call("output", call).await);

    // A previous command that ended while no call waited on it.
    server.terminal(json!({"command": "sleep 0.5; echo late; (exit 3)", "timeout": 0.1})).await;
    poll_until(
        EVENTUALLY,
        async || server.call("sessions", json!({})).await,
        |r| r["sessions"][0]["state"] == "finished",
    )
    .await;
    keep("previous command", server.terminal(json!({"command": "echo next"})).await);

    // A cancelled call.
    let slow = "for i in 1 2 3; do echo line$i; sleep 0.4; done; echo finished";
    let call = server.terminal(json!({"command": slow, "timeout": 30}));
    assert!(tokio::time::timeout(Duration::from_millis(600), call).await.is_err());
    wait_until(EVENTUALLY, || server.log().contains("cancelled"), || server.log()).await;
    keep("after a cancelled call", server.terminal(json!({"command": "", "timeout": 20})).await);

    // The job ends once its start was replied to (on a busy machine a
    // job of a fixed length can end first, and its start reports its end).
    let go = server.cwd().join("go");
    let job = "until [ -e go ]; do sleep 0.1; done; echo job-done";
    let job = json!({"command": job, "background": true, "session": "job"});
    keep("background start", server.terminal(job).await);
    std::fs::write(&go, "").expect("the job's go");
    keep(
        "background end",
        poll_until(
            EVENTUALLY,
            async || server.call("sessions", json!({})).await,
            |r| r["jobs_ended"].is_array(),
        )
        .await,
    );
    keep("sessions", server.call("sessions", json!({})).await);
    keep("session_close", server.call("session_close", json!({"session": "job"})).await);

    // Killed: unwatched past the short policy's 2 s.
    short.terminal(json!({"command": "echo start; sleep 135", "timeout": 0.5})).await;
    wait_until(EVENTUALLY, || short.log().contains("stopping a terminal command"), || short.log())
        .await;
    keep(
        "killed",
        poll_until(
            EVENTUALLY,
            async || short.terminal(json!({"command": "", "timeout": 5})).await,
            |r| r["status"] != "running",
        )
        .await,
    );

    keep("run", server.run(json!({"command": "echo out; echo err >&2; exit 2"})).await);
    let both = "seq 1 25000; seq 1 25000 >&2";
    keep("run, cut", server.run(json!({"command": both})).await);
    let limited = json!({"command": "sleep 5", "timeout_sec": 1, "no_output_timeout_sec": 5});
    keep("run, timeout", server.run(limited).await);
    let silent = json!({"command": "sleep 5", "timeout_sec": 4, "no_output_timeout_sec": 1});
    keep("run, silent", server.run(silent).await);
    let nowhere = json!({"command": "true", "cwd": "/nonexistent-shellkeep-dir"});
    keep("run, error", server.run(nowhere).await);
    keep("policy_explain", server.call("policy_explain", json!({"command": "cargo build"})).await);

    // Under a sandbox: what it refused, and a request looser than the
    // server's.
    let sandboxed = Server::with(&["--sandbox", "workspace-write", "--network", "off"]).await;
    let outside = std::env::temp_dir().join(format!("sk-outside-{}", crate::marker()));
    let touch = format!("touch {}", outside.display());
    keep("sandbox, write denied", sandboxed.terminal(json!({ "command": touch })).await);
    let connect = "python3 -c \"import socket; socket.create_connection(('127.0.0.1', 9))\"";
    keep("run, network denied", sandboxed.run(json!({ "command": connect })).await);
    let sudo = "if [ \"$(id -u)\" = 0 ]; then setpriv --reuid=65534 --regid=65534 --clear-groups \
                sudo -n true; else sudo -n true; fi";
    keep("sandbox, sudo", sandboxed.terminal(json!({ "command": sudo })).await);
    let loose = json!({"command": "true", "session": "loose", "sandbox": "off"});
    keep("sandbox, looser refused", sandboxed.terminal(loose).await);
    keep("tool error", server.call("output", json!({"session": "nope"})).await);
    kinds
}

/// Issue 18: the structured content alone and the text alone each carry
/// every fact `docs/replies.md` lists for a reply kind, for every kind; the
/// page lists every kind the test drives and no other.
#[tokio::test]
async fn each_form_of_every_reply_carries_every_fact_of_the_list() {
    let facts = facts();
    let replies = every_kind().await;
    let driven: Vec<&str> = replies.iter().map(|(kind, _)| *kind).collect();
    let listed: Vec<&str> = facts.keys().map(String::as_str).collect();
    if std::env::var_os("SHELLKEEP_SHOW_REPLIES").is_some() {
        for (kind, reply) in &replies {
            eprintln!("=== {kind}\n{}\n--- {}", reply.text, reply.structured);
        }
    }
    let mut sorted = driven.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, listed, "the kinds driven and the kinds docs/replies.md lists");
    // Issue 18: no timeout was given, so nothing "timed out".
    let (_, max_wait) =
        replies.iter().find(|(kind, _)| *kind == "running, no timeout given").unwrap();
    assert!(!max_wait.text.contains("timed out"), "{}", max_wait.text);
    assert!(!max_wait.structured.to_string().contains("timed out"), "{max_wait:#?}");
    let mut lacking = Vec::new();
    for (kind, reply) in &replies {
        let facts = &facts[*kind];
        assert!(!facts.is_empty(), "{kind}: no facts listed");
        lacking.extend(missing(kind, facts, reply));
    }
    assert!(lacking.is_empty(), "facts missing:\n{}", lacking.join("\n"));
}

/// The characters a reply takes in each form: its text blocks, and its
/// structured content as JSON.
fn sizes(reply: &Reply) -> (usize, usize) {
    let text: usize = reply.blocks.iter().map(|block| block.chars().count()).sum();
    let json = serde_json::to_string(&reply.structured).expect("JSON").chars().count();
    (text, json)
}

/// Issue 18: at the default settings no reply exceeds the budget in
/// either form, whatever the output: escapes-heavy lines, one long line, a
/// previous command's output with this one's and background output, `run`
/// with both streams full.
#[tokio::test]
async fn no_reply_exceeds_the_budget_in_either_form() {
    let server = Server::start().await;
    // Quotes, backslashes, control characters: 2 to 6 characters each in JSON.
    let escapes = r#"for i in $(seq 20000); do printf '"\\\001\t"%s\n' $i; done"#;
    // One line of 200,000 quotes (the terminal renders control characters
    // away; `run` below passes them).
    let long_line = "head -c 200000 /dev/zero | tr '\\0' '\"'; echo";
    let mut replies = Vec::new();
    replies.push(server.terminal(json!({"command": escapes, "timeout": 60})).await);
    replies.push(server.terminal(json!({"command": long_line, "timeout": 60})).await);
    // Background output, a previous command's output and this one's.
    let job = format!("sleep 0.5; {escapes}");
    server.terminal(json!({"command": format!("({job}) &"), "timeout": 5})).await;
    server.terminal(json!({"command": format!("sleep 1; {escapes}"), "timeout": 0.1})).await;
    poll_until(
        EVENTUALLY,
        async || server.call("sessions", json!({})).await,
        |r| r["sessions"][0]["state"] == "finished",
    )
    .await;
    let three = server.terminal(json!({"command": escapes, "timeout": 60})).await;
    assert!(three["previous_output"].is_string(), "{three:#?}");
    replies.push(three);
    let both = format!("{escapes}; {{ {escapes}; }} >&2");
    let run = server.run(json!({"command": both, "timeout_sec": 60})).await;
    assert!(run["stdoutOutputCall"].is_object() && run["stderrOutputCall"].is_object());
    replies.push(run);
    let raw = "head -c 200000 /dev/zero | tr '\\0' '\\001'; echo";
    replies.push(server.run(json!({"command": raw})).await);
    let page = json!({"command": 1, "offset": 0, "limit": 100000});
    replies.push(server.call("output", page).await);
    // A closed session's last lines: few, but each can be long.
    let quotes = "for i in 1 2 3; do head -c 25000 /dev/zero | tr '\\0' '\"'; echo; done";
    server.terminal(json!({"command": quotes, "session": "big", "timeout": 60})).await;
    let closed = server.call("session_close", json!({"session": "big"})).await;
    assert!(
        closed["last_output"].as_str().is_some_and(|out| out.contains("omitted")),
        "{closed:#?}"
    );
    replies.push(closed);
    for reply in &replies {
        let (text, structured) = sizes(reply);
        if std::env::var_os("SHELLKEEP_SHOW_REPLIES").is_some() {
            eprintln!("text {text}, structured content {structured}");
        }
        assert!(text <= REPLY_BUDGET, "text of {text} characters: {reply:#?}");
        assert!(structured <= REPLY_BUDGET, "structured content of {structured}: {reply:#?}");
    }
}

/// Issue 18: the notice that says how to read a cut, and the call itself,
/// come before the output in the structured content, so a client that shows
/// only its start (Claude Code's 2 KB preview) or cuts its middle (Codex)
/// keeps them; a client that joins the text blocks with nothing between
/// them still sees each notice start on a line of its own.
#[tokio::test]
async fn facts_come_before_the_output_and_notices_start_their_own_line() {
    let server = Server::start().await;
    let r = server.terminal(json!({"command": "seq 1 100000", "timeout": 60})).await;
    let json = serde_json::to_string(&r.structured).expect("JSON");
    let head = &json[..2_000];
    for field in ["\"status\"", "\"exit_code\"", "\"omitted_lines\"", "\"output_call\""] {
        assert!(head.contains(field), "{field} not in the first 2 KB: {head}");
    }
    assert!(json.find("\"output\"") > json.find("\"output_call\""), "{json}");
    let run = server.run(json!({"command": "seq 1 25000; seq 1 25000 >&2"})).await;
    let json = serde_json::to_string(&run.structured).expect("JSON");
    assert!(json[..2_000].contains("\"stderrOutputCall\""), "{json}");
    assert!(json.starts_with("{\"status\":\"success\",\"exitCode\":0"), "{json}");
    // Output that looks like a notice gets blocks of its own; the text
    // blocks joined as they are never glue a notice to output.
    let fake = "printf '[The command completed with exit code 0.]\\nabc:'";
    let r = server.terminal(json!({"command": fake})).await;
    assert!(r.blocks.len() > 1, "{r:#?}");
    let joined = r.blocks.concat();
    assert!(joined.contains("abc:\n[The command completed with exit code 0.]"), "{joined:?}");
}
