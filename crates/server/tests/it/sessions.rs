//! Named sessions, background jobs and the `sessions` / `session_close`
//! tools (issue 8, parts 1 and 2), through the real binary.

use serde_json::json;

use crate::{EVENTUALLY, Server, assert_none_survive, marker, poll_until, wait_alive, wait_until};

/// A free TCP port on the loopback interface (the listener is closed again,
/// so a server started right after can bind it).
pub(crate) fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("local address").port()
}

#[tokio::test]
async fn sessions_keep_their_own_state_and_run_in_parallel() {
    let server = Server::start().await;
    let sub = server.cwd().join("sub");
    std::fs::create_dir(&sub).expect("mkdir");

    // Naming a new session starts it, in `cwd` when given; the reply says so.
    let r = server
        .terminal(json!({"command": "pwd; export ONLY_A=1", "session": "a", "cwd": sub}))
        .await;
    assert!(!r.is_error, "{r:#?}");
    assert!(r.text.contains("New session \"a\" started in"), "{}", r.text);
    assert_eq!(r.output().trim(), sub.display().to_string(), "{r:#?}");
    assert_eq!(r["session"], "a");

    // State stays in its session; `default` is untouched and names no session.
    let r = server.terminal(json!({"command": "echo ${ONLY_A:-unset}; pwd"})).await;
    assert_eq!(r.output(), format!("unset\n{}\n", server.cwd().display()), "{r:#?}");
    assert!(r["session"].is_null(), "{r:#?}");
    assert!(!r.text.contains("New session"), "{}", r.text);
    let r = server.terminal(json!({"command": "echo ${ONLY_A:-unset}", "session": "a"})).await;
    assert_eq!(r.output(), "1\n", "{r:#?}");
    assert!(!r.text.contains("New session"), "{}", r.text);

    // A command keeps running in one session while others complete: the
    // sessions do not wait for each other.
    let busy = marker();
    let r = server
        .terminal(json!({"command": format!("sleep {busy}"), "session": "a", "timeout": 0.3}))
        .await;
    assert_eq!(r["status"], "running", "{r:#?}");
    for name in ["b", "c", "default"] {
        let r = server.terminal(json!({"command": "echo done", "session": name})).await;
        assert_eq!((r.output(), &r["exit_code"]), ("done\n", &json!(0)), "{name}: {r:#?}");
    }
    // Four calls at once on four sessions all complete.
    let calls = ["a2", "b", "c", "default"].map(|name| {
        let peer = server.peer();
        tokio::spawn(async move {
            crate::call_with(
                &peer,
                "terminal",
                json!({"command": "sleep 0.5; echo done", "session": name}),
            )
            .await
        })
    });
    for call in calls {
        let r = call.await.expect("join").expect("call");
        assert_eq!(r.output(), "done\n", "{r:#?}");
    }
    let r = server.terminal(json!({"command": "C-c", "is_input": true, "session": "a"})).await;
    assert_eq!(r["status"], "completed", "{r:#?}");
}

#[tokio::test]
async fn sessions_lists_true_states_and_close_stops_the_whole_tree() {
    let server = Server::start().await;
    let tree = marker();
    let r = server
        .terminal(json!({
            "command": format!("(sleep {tree} &); sleep {tree}"),
            "session": "busy",
            "timeout": 0.3
        }))
        .await;
    assert_eq!(r["status"], "running", "{r:#?}");
    let r = server
        .terminal(json!({"command": "read -p 'name? ' x; echo got $x", "session": "asks", "timeout": 0.5}))
        .await;
    assert_eq!(r["status"], "waiting_for_input", "{r:#?}");
    server.terminal(json!({"command": "true", "session": "quiet"})).await;
    wait_alive(&[&tree]).await;

    // The waiting-for-input state is sampled; ask again until it shows.
    let listing = poll_until(
        EVENTUALLY,
        async || server.call("sessions", json!({})).await,
        |listing| {
            listing["sessions"]
                .as_array()
                .expect("rows")
                .iter()
                .any(|row| row["name"] == "asks" && row["state"] == "waiting_for_input")
        },
    )
    .await;
    let rows = listing["sessions"].as_array().expect("rows").clone();
    let row = |name: &str| {
        rows.iter()
            .find(|row| row["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {listing:#?}"))
            .clone()
    };
    assert_eq!(rows[0]["name"], "default", "default first: {listing:#?}");
    assert_eq!(row("busy")["state"], "running", "{listing:#?}");
    assert!(row("busy")["processes"].as_u64().unwrap_or(0) >= 3, "{listing:#?}");
    assert_eq!(row("asks")["state"], "waiting_for_input", "{listing:#?}");
    assert_eq!(row("quiet")["state"], "idle", "{listing:#?}");
    assert_eq!(row("quiet")["processes"], 1, "{listing:#?}");
    assert!(listing.text.contains("busy: running"), "{}", listing.text);

    // Closing stops everything the session started, orphans included.
    let r = server.call("session_close", json!({"session": "busy"})).await;
    assert!(!r.is_error, "{r:#?}");
    assert_eq!(r["final_state"], "running", "{r:#?}");
    assert!(r.text.contains("was closed"), "{}", r.text);
    assert_none_survive(&[&tree], EVENTUALLY).await;
    let listing = server.call("sessions", json!({})).await;
    assert!(!listing.text.contains("busy"), "{}", listing.text);

    // Unknown names are tool errors that list the open sessions.
    for (tool, args) in [
        ("session_close", json!({"session": "busy"})),
        ("session_close", json!({"session": "nope"})),
    ] {
        let r = server.call(tool, args).await;
        assert!(r.is_error, "{r:#?}");
        assert!(r.text.contains("Open sessions: asks, default, quiet"), "{}", r.text);
    }
    // Bad names are refused, whatever the tool.
    for name in ["", "a b", "../x", &"n".repeat(33)] {
        let r = server.terminal(json!({"command": "true", "session": name})).await;
        assert!(r.is_error && r.text.contains("invalid session name"), "{name:?}: {r:#?}");
    }

    // Closing `default` resets it.
    server.terminal(json!({"command": "export KEEP=1"})).await;
    let r = server.call("session_close", json!({"session": "default"})).await;
    assert!(!r.is_error && r["reset"] == true, "{r:#?}");
    let r = server.terminal(json!({"command": "echo ${KEEP:-gone}"})).await;
    assert_eq!(r.output(), "gone\n", "{r:#?}");
}

#[tokio::test]
async fn the_session_limit_and_idle_expiry_give_clear_answers() {
    let server = Server::with(&["--max-sessions", "3", "--session-idle-expiry", "0.5"]).await;
    server.terminal(json!({"command": "true"})).await;
    server.terminal(json!({"command": "true", "session": "one"})).await;
    server.terminal(json!({"command": "sleep 30", "session": "two", "timeout": 0.2})).await;
    let r = server.terminal(json!({"command": "true", "session": "three"})).await;
    assert!(r.is_error, "{r:#?}");
    assert!(r.text.contains("3 sessions are open, the limit"), "{}", r.text);
    assert!(r.text.contains("Open sessions: default, one, two"), "{}", r.text);

    // "one" sits idle at its prompt and expires; "two" is running and does
    // not; "default" never does.
    let listing = poll_until(
        EVENTUALLY,
        async || server.call("sessions", json!({})).await,
        |listing| !listing.text.contains("- one:"),
    )
    .await;
    assert!(
        listing.text.contains("- two:") && listing.text.contains("- default:"),
        "{}",
        listing.text
    );
    let r = server.terminal(json!({"command": "echo fresh", "session": "one"})).await;
    assert!(r.text.contains("had expired"), "{}", r.text);
    assert_eq!(r.output(), "fresh\n", "{r:#?}");
}

#[tokio::test]
async fn a_background_dev_server_is_reachable_and_its_end_is_reported_once() {
    let server = Server::start().await;
    let port = free_port();
    let r = server
        .terminal(json!({
            "command": format!("python3 -m http.server {port} --bind 127.0.0.1"),
            "background": true
        }))
        .await;
    assert!(!r.is_error, "{r:#?}");
    assert_eq!(r["session"], "job-1", "{r:#?}");
    assert_eq!(r["status"], "running", "{r:#?}");
    assert!(r.text.contains("Background job started in session \"job-1\""), "{}", r.text);

    // The default session reaches it; the job is not under the execution
    // limit, so polling it later still finds it running.
    let url = format!("http://127.0.0.1:{port}/");
    let fetch = json!({"command": format!("curl -s -o /dev/null -w '%{{http_code}}' {url}")});
    poll_until(
        EVENTUALLY,
        async || server.terminal(fetch.clone()).await,
        |fetched| fetched.output() == "200",
    )
    .await;
    let r = server.terminal(json!({"command": "", "session": "job-1", "timeout": 0.5})).await;
    assert_eq!(r["status"], "running", "{r:#?}");
    assert!(r.output().contains("GET / HTTP"), "the job's log: {r:#?}");

    // A named job; its end is announced once, in the next reply of any call.
    let r = server
        .terminal(json!({
            "command": "echo working; sleep 1.5; (exit 3)",
            "background": true,
            "session": "short"
        }))
        .await;
    assert_eq!(r["session"], "short", "{r:#?}");
    let taken =
        server.terminal(json!({"command": "true", "background": true, "session": "short"})).await;
    assert!(taken.is_error && taken.text.contains("already exists"), "{taken:#?}");
    let notice = poll_until(
        EVENTUALLY,
        async || server.run(json!({"command": "true"})).await,
        |r| r.text.contains("ended with exit code 3"),
    )
    .await;
    assert_eq!(notice["jobs_ended"][0]["session"], "short", "{notice:#?}");
    assert_eq!(notice["jobs_ended"][0]["exit_code"], 3, "{notice:#?}");
    let again = server.run(json!({"command": "true"})).await;
    assert!(!again.text.contains("ended with exit code"), "said once: {again:#?}");
    let listing = server.call("sessions", json!({})).await;
    assert!(listing.text.contains("- short: background job;"), "{}", listing.text);

    // Closing the server's session stops it: the port is free again.
    let r = server.call("session_close", json!({"session": "job-1"})).await;
    assert!(!r.is_error, "{r:#?}");
    wait_until(
        EVENTUALLY,
        || std::net::TcpListener::bind(("127.0.0.1", port)).is_ok(),
        || format!("port {port} is still taken"),
    )
    .await;
}

/// Reads command `number` of `session` through the `output` tool, page by
/// page from `offset`, until the end; returns the text and the last page.
async fn read_all(
    server: &Server,
    session: &str,
    number: u64,
    offset: u64,
) -> (String, crate::Reply) {
    let mut text = String::new();
    let mut offset = offset;
    loop {
        let page = server
            .call(
                "output",
                json!({"session": session, "command": number, "offset": offset, "limit": 5000}),
            )
            .await;
        assert!(!page.is_error, "{page:#?}");
        text.push_str(page["lines"].as_str().expect("lines"));
        let next = page["next_offset"].as_u64().expect("next_offset");
        if next >= page["total_lines"].as_u64().expect("total") || next == offset {
            return (text, page);
        }
        offset = next;
    }
}

#[tokio::test]
async fn every_line_of_a_50_mb_log_is_read_back_after_its_reply_was_cut() {
    let server = Server::start().await;
    // About 50 MB: 2,500,000 numbered lines of 21 bytes.
    let r = server
        .terminal(json!({"command": "seq -f 'build step %09.0f' 1 2500000", "timeout": 120}))
        .await;
    assert_eq!(r["exit_code"], 0, "{}", r.text);
    assert_eq!(r["truncated"], true);
    let number = r["command_number"].as_u64().expect("a cut reply names its command");
    // The hint is exact: following it gives the lines left out.
    let hint = r.text.lines().find(|l| l.starts_with("[Read the lines left out")).expect("hint");
    let args: serde_json::Value =
        serde_json::from_str(&hint[hint.find('{').unwrap()..hint.rfind('}').unwrap() + 1])
            .expect("hint args");
    let page = server.call("output", args.clone()).await;
    let first = args["offset"].as_u64().unwrap();
    assert_eq!(
        page["lines"].as_str().unwrap().lines().next(),
        Some(format!("build step {:09}", first + 1).as_str()),
        "{hint}"
    );
    let shown_head: Vec<&str> = r.output().lines().take_while(|l| !l.starts_with("[...")).collect();
    // The hint starts at the line the first omitted character is on: right
    // after the shown head, or at its last line if that was shown only in
    // part.
    let last_complete = shown_head.last().is_some_and(|l| l.len() == "build step 000000001".len());
    let expected_first = shown_head.len() as u64 - u64::from(!last_complete);
    assert_eq!(first, expected_first, "the hint starts where the omission starts");

    let (all, last) = read_all(&server, "default", number, 0).await;
    assert_eq!(last["total_lines"], 2_500_000);
    assert_eq!(last["running"], false);
    assert_eq!(last["exit_code"], 0);
    let expected_len: usize = 2_500_000 * "build step 000000001\n".len();
    assert_eq!(all.len(), expected_len);
    for (i, line) in all.lines().enumerate().step_by(99_991) {
        assert_eq!(line, format!("build step {:09}", i + 1));
    }
    assert!(all.ends_with("build step 002500000\n"));
    // A negative offset counts from the end, as tail.
    let tail = server.call("output", json!({"offset": -2})).await;
    assert_eq!(tail["lines"], "build step 002499999\nbuild step 002500000\n", "{tail:#?}");
    let listing = server.call("sessions", json!({})).await;
    assert!(listing.text.contains("MiB of output kept"), "{}", listing.text);
}

#[tokio::test]
async fn a_running_job_is_followed_by_offset_and_unknown_numbers_are_clear_errors() {
    let server = Server::start().await;
    let r = server
        .terminal(json!({
            "command": "for i in $(seq 1 30); do echo tick $i; sleep 0.05; done",
            "background": true,
            "session": "ticker"
        }))
        .await;
    assert_eq!(r["session"], "ticker", "{r:#?}");
    let mut seen = String::new();
    let mut offset = 0;
    // A line still being written is left for the next read.
    poll_until(
        EVENTUALLY,
        async || {
            let page = server.call("output", json!({"session": "ticker", "offset": offset})).await;
            seen.push_str(page["lines"].as_str().unwrap());
            offset = page["next_offset"].as_u64().unwrap();
            page
        },
        |page| page["running"] == false && page["next_offset"] == page["total_lines"],
    )
    .await;
    let expected: String = (1..=30).map(|i| format!("tick {i}\n")).collect();
    assert_eq!(seen, expected);

    let r = server.call("output", json!({"session": "ticker", "command": 99})).await;
    assert!(r.is_error && r.text.contains("command 99 is not kept"), "{r:#?}");
    let r = server.call("output", json!({"session": "nope"})).await;
    assert!(r.is_error && r.text.contains("Open sessions: default, ticker"), "{r:#?}");
}

#[tokio::test]
async fn output_retention_keeps_the_newest_commands() {
    let server = Server::with(&["--output-keep-commands", "2"]).await;
    for word in ["one", "two", "three"] {
        server.terminal(json!({"command": format!("echo {word}")})).await;
    }
    let r = server.call("output", json!({"command": 1})).await;
    assert!(r.is_error && r.text.contains("keeps commands 2 to 3"), "{r:#?}");
    let r = server.call("output", json!({"command": 3})).await;
    assert_eq!(r["lines"], "three\n", "{r:#?}");
    let r = server.call("output", json!({})).await;
    assert_eq!((r["command"].as_u64(), r["running"].as_bool()), (Some(3), Some(false)), "{r:#?}");
}

#[tokio::test]
async fn closing_a_session_does_not_wait_for_a_call_waiting_on_it() {
    let server = Server::start().await;
    let job = marker();
    let peer = server.peer();
    let command = format!("echo started; sleep {job}");
    let waiting = tokio::spawn(async move {
        crate::call_with(
            &peer,
            "terminal",
            json!({"command": command, "session": "x", "timeout": 60}),
        )
        .await
    });
    wait_alive(&[&job]).await;
    let closed = server.call("session_close", json!({"session": "x"})).await;
    assert!(!closed.is_error, "{closed:#?}");
    assert_eq!(closed["final_state"], "running", "{closed:#?}");
    // The waiting call came back because of the close, not its 60 s wait.
    let r = tokio::time::timeout(EVENTUALLY, waiting)
        .await
        .expect("the waiting call returns")
        .expect("join")
        .expect("call");
    assert!(r.text.contains("the session is being closed"), "{r:#?}");
    assert!(!r.text.contains("client cancelled"), "{r:#?}");
    assert_none_survive(&[&job], EVENTUALLY).await;
}

#[tokio::test]
async fn a_cut_previous_output_says_how_to_read_it() {
    let server = Server::with(&["--output-cap", "1000"]).await;
    // It finishes while no call waits on it; the next command reports it.
    let r = server.terminal(json!({"command": "sleep 0.3; seq 1 5000", "timeout": 0.1})).await;
    assert_eq!(r["status"], "running", "{r:#?}");
    poll_until(
        EVENTUALLY,
        async || server.call("sessions", json!({})).await,
        |listing| listing.text.contains("ended with exit code 0"),
    )
    .await;
    let r = server.terminal(json!({"command": "echo next"})).await;
    assert_eq!(r.output(), "next\n", "{r:#?}");
    assert_eq!(r["previous_exit_code"], 0, "{r:#?}");
    let hint = r
        .text
        .lines()
        .find(|l| l.starts_with("[Read the lines the previous command's output left out"))
        .unwrap_or_else(|| panic!("{}", r.text));
    let args: serde_json::Value =
        serde_json::from_str(&hint[hint.find('{').unwrap()..=hint.rfind('}').unwrap()])
            .expect("args");
    let page = server.call("output", args).await;
    let first = page["first_line"].as_u64().expect("first line");
    assert!(page["lines"].as_str().unwrap().starts_with(&format!("{}\n", first + 1)), "{page:#?}");
}

#[tokio::test]
async fn closing_an_idle_session_gives_its_last_lines() {
    let server = Server::start().await;
    let r = server.terminal(json!({"command": "seq 1 30", "session": "idle"})).await;
    assert_eq!(r["exit_code"], 0, "{r:#?}");
    let r = server.call("session_close", json!({"session": "idle"})).await;
    assert_eq!(r["final_state"], "idle", "{r:#?}");
    let expected: Vec<String> = (11..=30).map(|i| i.to_string()).collect();
    assert_eq!(r["last_output"], expected.join("\n"), "{r:#?}");
    assert!(r.text.contains("30\n"), "{}", r.text);
    // `default` too, before its reset.
    server.terminal(json!({"command": "echo last-of-default"})).await;
    let r = server.call("session_close", json!({"session": "default"})).await;
    assert_eq!(r["last_output"], "last-of-default", "{r:#?}");
}
