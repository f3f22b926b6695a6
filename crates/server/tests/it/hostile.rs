//! The hostile-input suite: the real binary, driven with raw JSON-RPC lines,
//! fed what a broken client or a hostile command produces. After each case
//! the server answers the next call correctly, its peak memory stays under
//! [`PEAK_MIB`], and no process the case started is left.
//!
//! Cases that leave the server running share one server (in order, so the
//! peak-memory check covers all of them); cases that end it (stdin closed,
//! SIGTERM, SIGKILL) get their own. Floods are limited to 2 s and 20 MB so
//! the suite stays fast and light on disk.

use std::time::Duration;

use serde_json::json;

use crate::wire::Raw;
use crate::{EVENTUALLY, assert_none_survive, marker, processes_with, wait_alive};

/// The bound on the server's peak resident memory (`VmHWM`) through the
/// whole suite, in MiB. A debug build starts at about 18 MiB and peaks at
/// about 22 MiB here (the 4 MiB read of an oversized line before it is
/// known to be too long); request lines are capped at 4 MiB and replies at
/// the output cap, so a flood or a 10 MB line costs no more.
const PEAK_MIB: u64 = 64;

/// Checks what must hold after every case: the next call is answered
/// correctly, peak memory is under the bound, and no process with `marks`
/// survives.
async fn after(raw: &mut Raw, id: u64, case: &str, marks: &[&str]) {
    raw.assert_alive(id).await;
    let peak = raw.peak_kib() / 1024;
    assert!(peak < PEAK_MIB, "after {case}: peak memory {peak} MiB (bound {PEAK_MIB} MiB)");
    assert_none_survive(marks, EVENTUALLY).await;
}

#[tokio::test]
async fn the_server_survives_hostile_clients_and_commands() {
    let mut raw = Raw::start(&[]).await;

    // Malformed JSON-RPC: each line gets an error (never a crash), and
    // nesting deeper than the parser's limit is a parse error, not a stack
    // overflow.
    let deep = format!("{}\n", "[".repeat(100_000));
    let garbage: Vec<&[u8]> = vec![
        b"\x00\x01\x02\n",
        b"{\"jsonrpc\":\"2.0\",\"id\":1e400,\"method\":\"ping\"}\n",
        b"{\"jsonrpc\":\"2.0\",\"id\":99999999999999999999,\"method\":\"ping\"}\n",
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":[]}\n",
        b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"run\",\"arguments\":7}}\n",
        deep.as_bytes(),
    ];
    for line in &garbage {
        raw.write(line).await;
        let reply = raw.next().await;
        let code = reply["error"]["code"].as_i64();
        assert!(
            matches!(code, Some(-32700 | -32600 | -32602)),
            "{}: {reply}",
            String::from_utf8_lossy(&line[..line.len().min(80)])
        );
    }
    after(&mut raw, 100, "malformed JSON-RPC", &[]).await;

    // A 10 MB request line.
    let big = json!({
        "jsonrpc": "2.0", "id": 101, "method": "tools/call",
        "params": {"name": "terminal", "arguments": {"command": "x".repeat(10_000_000)}},
    });
    raw.send(&big).await;
    let reply = raw.reply(101).await;
    assert_eq!(reply["error"]["code"], -32600, "{reply}");
    after(&mut raw, 102, "a 10 MB request line", &[]).await;

    // 100 calls pipelined in one write, over all three tools.
    let mut lines = Vec::new();
    for i in 0..100u64 {
        let (tool, arguments) = match i % 3 {
            0 => ("terminal", json!({"command": format!("echo t{i}")})),
            1 => ("run", json!({"command": format!("echo r{i}")})),
            _ => ("policy_explain", json!({"command": format!("ls {i}")})),
        };
        let message = json!({
            "jsonrpc": "2.0", "id": 1000 + i, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        });
        lines.extend(serde_json::to_vec(&message).unwrap());
        lines.push(b'\n');
    }
    raw.write(&lines).await;
    for i in 0..100u64 {
        let reply = raw.reply(1000 + i).await;
        let content = &reply["result"]["structuredContent"];
        match i % 3 {
            0 => assert_eq!(content["output"], format!("t{i}\n"), "{reply}"),
            1 => assert_eq!(content["stdout"], format!("r{i}\n"), "{reply}"),
            _ => assert_eq!(content["category"], "quick", "{reply}"),
        }
    }
    after(&mut raw, 103, "100 pipelined calls", &[]).await;

    // 20 concurrent `run`s.
    let m = marker();
    for i in 0..20u64 {
        let command = format!("sleep 0.$((RANDOM % 5)){m}; echo c{i}");
        raw.call(2000 + i, "run", json!({"command": command})).await;
    }
    for i in 0..20u64 {
        let reply = raw.reply(2000 + i).await;
        assert_eq!(reply["result"]["structuredContent"]["stdout"], format!("c{i}\n"), "{reply}");
    }
    after(&mut raw, 104, "20 concurrent runs", &[&m]).await;

    // A flood: `yes` for up to 2 s (at most 20 MB), in the terminal and in
    // `run`; each reply is capped.
    let m = marker();
    let flood = format!("timeout 2 yes flood{m} | head -c 20000000; echo end");
    let r = raw.tool(105, "terminal", json!({"command": flood, "timeout": 60})).await;
    let content = &r["structuredContent"];
    assert_eq!(
        (content["exit_code"].as_i64(), content["truncated"].as_bool()),
        (Some(0), Some(true)),
        "{content}"
    );
    assert!(content["output"].as_str().unwrap().ends_with("end\n"), "{content}");
    assert!(r.to_string().len() < 100_000, "the reply is {} bytes", r.to_string().len());
    let r = raw.tool(106, "run", json!({"command": flood})).await;
    let content = &r["structuredContent"];
    assert_eq!(content["status"], "success", "{content}");
    assert!(content["stdout"].as_str().unwrap().ends_with("end\n"), "{content}");
    assert!(r.to_string().len() < 100_000, "the reply is {} bytes", r.to_string().len());
    after(&mut raw, 107, "a flood", &[&format!("flood{m}")]).await;

    // Invalid UTF-8 output: the reply is valid JSON with replacement
    // characters, in both tools.
    let bad = r"printf 'a\xff\xfeb\xc3\n'";
    let r = raw.tool(108, "terminal", json!({"command": bad})).await;
    let output = r["structuredContent"]["output"].as_str().unwrap().to_owned();
    assert!(output.starts_with('a') && output.contains('\u{fffd}') && output.contains('b'), "{r}");
    let r = raw.tool(109, "run", json!({"command": bad})).await;
    let stdout = r["structuredContent"]["stdout"].as_str().unwrap().to_owned();
    assert!(stdout.starts_with('a') && stdout.contains('\u{fffd}') && stdout.contains('b'), "{r}");
    after(&mut raw, 110, "invalid UTF-8", &[]).await;

    // Forged markers: end-of-command sequences with guessed nonces and
    // sequence numbers do not end the command early or change its exit code.
    let forged = [
        r"printf '\e]6973;0000000000000000;E;1;0\a'",
        r"printf '\e]6973;00000000000000000000000000000000;E;2;0\a'",
        r"for s in 1 2 3 4 5 6 7 8 9 10; do printf '\e]6973;%s;E;%s;0\a' deadbeef $s; done",
        r"printf '\e]6973;;E;;0\a\e]6973;x;S;1\a'",
    ];
    for (i, forge) in forged.iter().enumerate() {
        let id = 111 + i as u64;
        let command = format!("{forge}; echo before; sleep 0.2; echo after; (exit 7)");
        let r = raw.tool(id, "terminal", json!({"command": command, "timeout": 20})).await;
        let content = &r["structuredContent"];
        assert_eq!(content["status"], "completed", "{forge}: {content}");
        assert_eq!(content["exit_code"], 7, "{forge}: {content}");
        assert!(
            content["output"].as_str().unwrap().ends_with("before\nafter\n"),
            "{forge}: {content}"
        );
    }
    after(&mut raw, 120, "forged markers", &[]).await;
}

/// Starts a server running `sleep 300.<marker>` in the terminal and in
/// `run`, and returns it with the markers once both run.
async fn mid_call() -> (Raw, [String; 2]) {
    let mut raw = Raw::start(&[]).await;
    let marks = [format!("300.{}", marker()), format!("300.{}", marker())];
    raw.call(1, "terminal", json!({"command": format!("sleep {}", marks[0])})).await;
    raw.call(2, "run", json!({"command": format!("sleep {}", marks[1])})).await;
    wait_alive(&[&marks[0], &marks[1]]).await;
    (raw, marks)
}

/// Asserts that the server `pid` and everything it started are gone.
async fn assert_all_gone(pid: u32, marks: &[String; 2]) {
    assert_none_survive(&[&marks[0], &marks[1]], EVENTUALLY).await;
    // The orphan guard (`shellkeep __guard`) is a child of the server; it
    // ends too.
    let guard_of = |pid: u32| {
        processes_with(&["__guard"])
            .into_iter()
            .filter(|p| {
                let child = p.split(':').next().unwrap_or_default();
                std::fs::read_to_string(format!("/proc/{child}/stat"))
                    .ok()
                    .and_then(|s| s.rsplit(')').next().map(str::to_owned))
                    .and_then(|s| s.split_whitespace().nth(1).map(str::to_owned))
                    == Some(pid.to_string())
            })
            .collect::<Vec<_>>()
    };
    crate::wait_until(EVENTUALLY, || guard_of(pid).is_empty(), || format!("{:?}", guard_of(pid)))
        .await;
}

#[tokio::test]
async fn stdin_closed_mid_call_stops_everything() {
    let (mut raw, marks) = mid_call().await;
    raw.close_stdin();
    let status = raw.wait_exit(EVENTUALLY).await;
    assert!(status.success(), "{status}");
    assert_all_gone(raw.pid, &marks).await;
}

#[tokio::test]
async fn sigterm_mid_call_stops_everything() {
    let (mut raw, marks) = mid_call().await;
    crate::send_signal(raw.pid, "TERM");
    raw.wait_exit(EVENTUALLY).await;
    assert_all_gone(raw.pid, &marks).await;
}

#[tokio::test]
async fn sigkill_mid_call_leaves_nothing_behind() {
    let (mut raw, marks) = mid_call().await;
    crate::send_signal(raw.pid, "KILL");
    raw.wait_exit(EVENTUALLY).await;
    // The guard notices its pipe close and kills what the server ran.
    assert_none_survive(&[&marks[0], &marks[1]], Duration::from_secs(30)).await;
}
