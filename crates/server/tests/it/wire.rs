//! The bytes on the wire: raw JSON-RPC lines to and from the binary, with no
//! client library in between, so the whole reply can be measured.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::{EVENTUALLY, Scratch, spawn_binary};

/// The default `PATH` of a fresh Debian or Ubuntu machine. The reply names
/// the Python interpreter (`/usr/bin/python3` there), so the test fixes
/// `PATH` for the same reason it uses a short working directory: to measure
/// our overhead, not the length of the paths of whoever runs the tests.
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Issue 2: the whole reply to `echo hi`, structured content included, is
/// under 400 bytes.
#[tokio::test]
async fn echo_hi_reply_is_under_400_bytes_on_the_wire() {
    let scratch = Scratch::new();
    let mut child = spawn_binary(&scratch, &[], &[("PATH", DEFAULT_PATH)]);
    let mut stdin = child.stdin.take().expect("piped stdin");
    let mut lines = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
    let mut send = async move |message: Value| {
        let mut line = serde_json::to_vec(&message).expect("serialize");
        line.push(b'\n');
        stdin.write_all(&line).await.expect("write to the server");
        stdin.flush().await.expect("flush");
    };
    let mut reply_to = async move |id: u64| -> String {
        let read = async {
            loop {
                let line = lines.next_line().await.expect("read").expect("the server replies");
                let value: Value = serde_json::from_str(&line).expect("each line is JSON");
                if value["id"] == id {
                    return line;
                }
            }
        };
        tokio::time::timeout(EVENTUALLY, read).await.expect("a reply in time")
    };

    send(json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "wire-test", "version": "0"},
        },
    }))
    .await;
    let init: Value = serde_json::from_str(&reply_to(1).await).unwrap();
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    assert_eq!(init["result"]["serverInfo"]["name"], "shellkeep", "{init}");
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
    send(json!({
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "terminal", "arguments": {"command": "echo hi"}},
    }))
    .await;
    let line = reply_to(2).await;

    let reply: Value = serde_json::from_str(&line).unwrap();
    let result = &reply["result"];
    // `isError` may be left out: absent means false.
    assert!(!result["isError"].as_bool().unwrap_or(false), "{line}");
    assert_eq!(result["structuredContent"]["output"], "hi\n", "{line}");
    assert_eq!(result["structuredContent"]["exit_code"], 0, "{line}");
    assert!(result["content"][0]["text"].as_str().is_some_and(|t| t.starts_with("hi")), "{line}");
    assert!(line.len() < 400, "the reply is {} bytes: {line}", line.len());

    drop(send);
    drop(reply_to);
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .expect("the server exits when stdin closes")
        .expect("wait");
    assert!(status.success(), "{status}");
}
