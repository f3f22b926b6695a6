//! The bytes on the wire: raw JSON-RPC lines to and from the binary, with no
//! client library in between, so the whole reply can be measured and
//! messages no client would send can be sent.

use std::process::ExitStatus;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

use crate::{EVENTUALLY, Scratch, assert_none_survive, marker, spawn_binary, wait_alive};

/// The default `PATH` of a fresh Debian or Ubuntu machine. The reply names
/// the Python interpreter (`/usr/bin/python3` there), so the test fixes
/// `PATH` for the same reason it uses a short working directory: to measure
/// our overhead, not the length of the paths of whoever runs the tests.
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The server's limit on one request line (`MAX_LINE` in `wire.rs`).
pub(crate) const MAX_LINE: usize = 4 * 1024 * 1024;

/// The binary driven by raw JSON-RPC lines.
pub(crate) struct Raw {
    pub child: Child,
    pub pid: u32,
    stdin: Option<ChildStdin>,
    lines: Option<Lines<BufReader<ChildStdout>>>,
    /// Replies read while looking for another one, by id.
    pending: Vec<Value>,
    pub scratch: Scratch,
}

impl Raw {
    /// Starts the binary with `env` and completes the MCP handshake.
    pub(crate) async fn start(env: &[(&str, &str)]) -> Raw {
        let mut raw = Raw::spawn(env);
        raw.send(&json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "wire-test", "version": "0"},
            },
        }))
        .await;
        let init = raw.reply(0).await;
        assert_eq!(init["result"]["serverInfo"]["name"], "shellkeep", "{init}");
        raw.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
        raw
    }

    /// Starts the binary without a handshake.
    pub(crate) fn spawn(env: &[(&str, &str)]) -> Raw {
        let scratch = Scratch::new();
        let mut child = spawn_binary(&scratch, &[], env);
        let pid = child.id().expect("a pid");
        let stdin = child.stdin.take();
        let lines = Some(BufReader::new(child.stdout.take().expect("piped stdout")).lines());
        Raw { child, pid, stdin, lines, pending: Vec::new(), scratch }
    }

    /// Writes raw bytes (a newline is not added).
    pub(crate) async fn write(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(bytes).await.expect("write to the server");
        stdin.flush().await.expect("flush");
    }

    /// Sends one message as a line.
    pub(crate) async fn send(&mut self, message: &Value) {
        let mut line = serde_json::to_vec(message).expect("serialize");
        line.push(b'\n');
        self.write(&line).await;
    }

    /// Sends a `tools/call` request.
    pub(crate) async fn call(&mut self, id: u64, tool: &str, arguments: Value) {
        self.send(&json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        }))
        .await;
    }

    /// The next message from the server, in order.
    pub(crate) async fn next(&mut self) -> Value {
        if !self.pending.is_empty() {
            return self.pending.remove(0);
        }
        self.read().await
    }

    async fn read(&mut self) -> Value {
        let lines = self.lines.as_mut().expect("stdout is open");
        let line = tokio::time::timeout(EVENTUALLY, lines.next_line())
            .await
            .expect("a message in time")
            .expect("read stdout")
            .expect("the server replies");
        serde_json::from_str(&line).unwrap_or_else(|err| panic!("not JSON ({err}): {line}"))
    }

    /// The reply with `id`, keeping others for later.
    pub(crate) async fn reply(&mut self, id: impl Into<Value>) -> Value {
        let id = id.into();
        if let Some(at) = self.pending.iter().position(|m| m["id"] == id) {
            return self.pending.remove(at);
        }
        loop {
            let message = self.read().await;
            if message["id"] == id && message.get("method").is_none() {
                return message;
            }
            self.pending.push(message);
        }
    }

    /// Calls a tool and returns its result.
    pub(crate) async fn tool(&mut self, id: u64, tool: &str, arguments: Value) -> Value {
        self.call(id, tool, arguments).await;
        let reply = self.reply(id).await;
        assert!(reply.get("error").is_none(), "{reply}");
        reply["result"].clone()
    }

    /// Checks that the terminal answers `echo <word>` correctly.
    pub(crate) async fn assert_alive(&mut self, id: u64) {
        let word = format!("alive{id}");
        let result = self.tool(id, "terminal", json!({"command": format!("echo {word}")})).await;
        assert_eq!(result["structuredContent"]["output"], format!("{word}\n"), "{result}");
        assert_eq!(result["structuredContent"]["exit_code"], 0, "{result}");
    }

    /// Closes the server's stdin (the end of the connection).
    pub(crate) fn close_stdin(&mut self) {
        self.stdin.take();
    }

    /// Closes our end of the server's stdout: the client stopped reading.
    pub(crate) fn close_stdout(&mut self) {
        self.lines.take();
    }

    /// Waits for the server to exit.
    pub(crate) async fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        match tokio::time::timeout(within, self.child.wait()).await {
            Ok(status) => status.expect("wait"),
            Err(_) => panic!(
                "the server did not exit within {within:?}; log:\n{}",
                std::fs::read_to_string(self.scratch.log()).unwrap_or_default()
            ),
        }
    }

    /// The server's peak resident memory (`VmHWM`), in KiB.
    pub(crate) fn peak_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid))
            .expect("the server is alive");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmHWM in /proc/PID/status")
    }
}

impl Drop for Raw {
    /// Ends the connection (the server then stops everything it runs and
    /// exits); kills the server if it has not exited within 10 s.
    fn drop(&mut self) {
        self.stdin.take();
        crate::exit_or_kill(&mut self.child);
    }
}

/// Asserts `reply` is a JSON-RPC error with `code` and `id`, whose message
/// contains `says`.
#[track_caller]
fn assert_error(reply: &Value, code: i64, id: &Value, says: &str) {
    assert_eq!(reply["jsonrpc"], "2.0", "{reply}");
    assert_eq!(&reply["error"]["code"], code, "{reply}");
    assert!(reply.get("id").is_some(), "the error has an id member: {reply}");
    assert_eq!(&reply["id"], id, "{reply}");
    let message = reply["error"]["message"].as_str().unwrap_or_default();
    assert!(message.to_lowercase().contains(&says.to_lowercase()), "{says:?} in {reply}");
}

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

/// Issue 7 §4: every broken message gets the JSON-RPC error the
/// specification names, with the request's id when it has a usable one;
/// before this, a line that was not JSON got no reply at all, an invalid
/// request got an error without its id, and `tools/call` with bad
/// parameters got -32601 (method not found).
#[tokio::test]
async fn broken_messages_get_json_rpc_errors_with_their_ids() {
    let mut raw = Raw::start(&[]).await;
    let null = Value::Null;
    let cases: &[(&[u8], i64, Value, &str)] = &[
        (b"not json\n", -32700, null.clone(), "parse error"),
        (b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\"\n", -32700, null.clone(), "not valid JSON"),
        (b"\xff\xfe{}\n", -32700, null.clone(), "parse error"),
        (b"[]\n", -32600, null.clone(), "batches"),
        (b"[{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"ping\"}]\n", -32600, null.clone(), "batches"),
        (b"42\n", -32600, null.clone(), "object"),
        (b"{\"id\":7}\n", -32600, json!(7), "jsonrpc"),
        (b"{\"jsonrpc\":\"1.0\",\"id\":\"a\",\"method\":\"ping\"}\n", -32600, json!("a"), "2.0"),
        (b"{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":5}\n", -32600, json!(8), "method"),
        (b"{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"ping\"}\n", -32600, null.clone(), "id"),
        (b"{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}\n", -32600, null.clone(), "id"),
        (b"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\",\"params\":3}\n", -32600, json!(9), "params"),
        (b"{\"jsonrpc\":\"2.0\",\"id\":10}\n", -32600, json!(10), "method"),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"tools/call\",\"params\":{\"name\":5}}\n",
            -32602,
            json!(11),
            "invalid params for tools/call",
        ),
        (b"{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":\"tools/call\"}\n", -32602, json!(12), "tools/call"),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":\"13\",\"method\":\"tools/call\",\"params\":{\"arguments\":{}}}\n",
            -32602,
            json!("13"),
            "name",
        ),
        (b"{\"jsonrpc\":\"2.0\",\"id\":14,\"method\":\"initialize\",\"params\":{}}\n", -32602, json!(14), "initialize"),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":15,\"method\":\"no/such\"}\n",
            -32601,
            json!(15),
            "method not found: \"no/such\". This server offers",
        ),
    ];
    let mut problems = Vec::new();
    for (line, code, id, says) in cases {
        raw.write(line).await;
        let reply = raw.next().await;
        let result = std::panic::catch_unwind(|| assert_error(&reply, *code, id, says));
        if result.is_err() {
            problems.push(format!("{}: got {reply}", String::from_utf8_lossy(line).trim_end()));
        }
    }
    // Blank lines, a byte-order mark and CRLF are tolerated; notifications
    // and responses that do not parse get no reply (JSON-RPC), so the next
    // message is the answer to the call after them.
    raw.write(b"\n  \n\r\n").await;
    raw.write(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":7}\n").await;
    raw.write(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/whatever\"}\n").await;
    raw.write(b"\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"id\":16,\"method\":\"ping\"}\r\n").await;
    let pong = raw.next().await;
    if pong["id"] != 16 || pong.get("result").is_none() {
        problems.push(format!("ping after blank lines and notifications: got {pong}"));
    }
    assert!(problems.is_empty(), "{} problems:\n{}", problems.len(), problems.join("\n"));
    raw.assert_alive(17).await;
}

/// Issue 19, F13: a request whose arguments nest deeper than the parser
/// goes is valid JSON: it is answered with its id (before or after the
/// nesting), never with `id: null` that leaves the client waiting, and the
/// server keeps serving.
#[tokio::test]
async fn json_nested_past_the_bound_is_answered_with_its_id() {
    let mut raw = Raw::start(&[]).await;
    for depth in [129, 200, 10_000] {
        let nested = format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
        let after = format!(
            "{{\"jsonrpc\":\"2.0\",\"method\":\"tools/call\",\"params\":{{\"name\":\"terminal\",\
             \"arguments\":{{\"command\":{nested}}}}},\"id\":{depth}}}\n"
        );
        raw.write(after.as_bytes()).await;
        assert_error(&raw.next().await, -32600, &json!(depth), "deeper than 128 levels");
        let before = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":\"deep-{depth}\",\"method\":\"tools/call\",\
             \"params\":{{\"name\":\"terminal\",\"arguments\":{{\"x\":{nested}}}}}}}\n"
        );
        raw.write(before.as_bytes()).await;
        assert_error(&raw.next().await, -32600, &json!(format!("deep-{depth}")), "deeper");
    }
    // Nesting within the bound is read as usual: the arguments are refused
    // for what they are.
    let nested = format!("{}1{}", "[".repeat(100), "]".repeat(100));
    let line = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{{\"name\":\"terminal\",\
         \"arguments\":{{\"command\":{nested}}}}}}}\n"
    );
    raw.write(line.as_bytes()).await;
    let reply = raw.next().await;
    assert_eq!(reply["id"], 7, "{reply}");
    raw.assert_alive(8).await;
}

/// Issue 7 §4: a request that reuses the id of one still running gets an
/// error, and the first request's command runs to its end (rmcp replaced
/// the first request's cancellation token with the second's, so whichever
/// finished first cancelled the other's command).
#[tokio::test]
async fn a_duplicate_in_flight_id_is_refused_and_the_first_command_completes() {
    let mut raw = Raw::start(&[]).await;
    raw.call(5, "run", json!({"command": "sleep 1; echo first"})).await;
    raw.call(5, "run", json!({"command": "echo second"})).await;
    let refused = raw.next().await;
    assert_error(&refused, -32600, &json!(5), "already used");
    let first = raw.reply(5).await;
    assert_eq!(first["result"]["structuredContent"]["stdout"], "first\n", "{first}");
    assert_eq!(first["result"]["structuredContent"]["status"], "success", "{first}");
    // The id is free again once answered; string ids are distinct from
    // numbers.
    raw.call(6, "run", json!({"command": "sleep 1; echo a"})).await;
    raw.send(&json!({
        "jsonrpc": "2.0", "id": "6", "method": "tools/call",
        "params": {"name": "run", "arguments": {"command": "echo b"}},
    }))
    .await;
    let b = raw.reply("6").await;
    assert_eq!(b["result"]["structuredContent"]["stdout"], "b\n", "{b}");
    let a = raw.reply(6).await;
    assert_eq!(a["result"]["structuredContent"]["stdout"], "a\n", "{a}");
    let again = raw.tool(5, "run", json!({"command": "echo again"})).await;
    assert_eq!(again["structuredContent"]["stdout"], "again\n", "{again}");
}

/// Issue 7 §4: an id freed by `notifications/cancelled` can be used again.
#[tokio::test]
async fn a_cancelled_request_frees_its_id() {
    let mut raw = Raw::start(&[]).await;
    raw.call(3, "run", json!({"command": "sleep 30"})).await;
    raw.send(&json!({
        "jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 3, "reason": "test"},
    }))
    .await;
    let result = raw.tool(3, "run", json!({"command": "echo reused"})).await;
    assert_eq!(result["structuredContent"]["stdout"], "reused\n", "{result}");
}

/// Issue 7 §4: a request line over the limit gets a clear error naming the
/// limit (with the request's id, found at the start of the line), its bytes
/// are not kept, and the server keeps serving.
#[tokio::test]
async fn an_oversized_request_line_gets_an_error_and_the_server_keeps_serving() {
    let mut raw = Raw::start(&[]).await;
    let before = raw.peak_kib();
    let big = "x".repeat(10 * 1024 * 1024);
    let line = json!({
        "jsonrpc": "2.0", "id": 21, "method": "tools/call",
        "params": {"name": "run", "arguments": {"command": format!("echo {big}")}},
    });
    raw.send(&line).await;
    let reply = raw.next().await;
    assert_error(&reply, -32600, &json!(21), &MAX_LINE.to_string());
    // Without an id near its start, the error has `id: null`.
    let mut no_id = vec![b'['; 5 * 1024 * 1024];
    no_id.push(b'\n');
    raw.write(&no_id).await;
    assert_error(&raw.next().await, -32600, &Value::Null, "4 MiB");
    raw.assert_alive(22).await;
    // The 15 MB were not buffered: peak memory grew by at most about one
    // limit (the part read before the line was known to be too long).
    let growth = raw.peak_kib().saturating_sub(before);
    assert!(growth < 2 * MAX_LINE as u64 / 1024, "peak memory grew by {growth} KiB");
    // Just under the limit is accepted.
    let fits = "y".repeat(MAX_LINE - 200);
    let result = raw.tool(23, "policy_explain", json!({"command": fits})).await;
    assert!(result.get("isError").is_none_or(|e| e == false), "{result}");
}

/// A `policy_explain` request for `id` that is exactly `size` bytes of JSON.
fn request_of_size(id: u64, size: usize) -> Vec<u8> {
    let with = |command: &str| {
        serde_json::to_vec(&json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "policy_explain", "arguments": {"command": command}},
        }))
        .expect("serialize")
    };
    let overhead = with("").len();
    let line = with(&"y".repeat(size - overhead));
    assert_eq!(line.len(), size);
    line
}

/// Issue 11, F14: the limit is 4 MiB of JSON; the newline that ends the
/// line (or a `\r\n`) does not count. One byte more is refused.
#[tokio::test]
async fn a_request_of_exactly_4_mib_of_json_is_accepted() {
    let mut raw = Raw::start(&[]).await;
    let mut line = request_of_size(31, MAX_LINE);
    line.push(b'\n');
    raw.write(&line).await;
    let reply = raw.reply(31).await;
    assert!(reply.get("error").is_none(), "{}", &reply.to_string()[..200]);
    assert_eq!(reply["result"]["structuredContent"]["source"], "default");

    let mut line = request_of_size(32, MAX_LINE);
    line.extend_from_slice(b"\r\n");
    raw.write(&line).await;
    let reply = raw.reply(32).await;
    assert!(reply.get("error").is_none(), "{}", &reply.to_string()[..200]);

    let mut line = request_of_size(33, MAX_LINE + 1);
    line.push(b'\n');
    raw.write(&line).await;
    let reply = raw.reply(33).await;
    assert_error(&reply, -32600, &json!(33), &format!("{} bytes", MAX_LINE + 1));
    raw.assert_alive(34).await;
}

/// Issue 11, F14: a flood of notifications the server has no use for
/// (100,000 unknown ones, progress, repeated `initialized`) is dropped at
/// the wire, each after one parse: none reaches `rmcp`, which logged each
/// one and spawned a task for it (about 20 s for 100,000), so the request
/// behind them is answered right after they are read; cancellation still
/// works.
#[tokio::test]
async fn a_flood_of_notifications_does_not_hold_up_requests() {
    let mut raw = Raw::start(&[]).await;
    let mut flood = Vec::new();
    for i in 0..100_000 {
        let method = match i % 4 {
            0 => "notifications/progress".to_owned(),
            1 => "notifications/initialized".to_owned(),
            _ => format!("notifications/unknown{i}"),
        };
        let mut line =
            serde_json::to_vec(&json!({"jsonrpc": "2.0", "method": method})).expect("serialize");
        line.push(b'\n');
        flood.extend_from_slice(&line);
    }
    raw.write(&flood).await;
    raw.send(&json!({"jsonrpc": "2.0", "id": 41, "method": "ping"})).await;
    let reply = raw.reply(41).await;
    assert_eq!(reply["result"], json!({}), "{reply}");
    let log = std::fs::read_to_string(raw.scratch.log()).expect("the log");
    assert!(
        !log.contains("unknown"),
        "an unknown notification reached rmcp: {}",
        &log[..2000.min(log.len())]
    );
    assert!(!log.contains("ProgressNotification"), "{}", &log[..2000.min(log.len())]);
    assert_eq!(log.matches("notification=InitializedNotification").count(), 1, "{log}");
    // A cancellation still reaches the running call: `run` stops its command.
    let sleep = format!("sleep 300.{}", marker());
    raw.call(42, "run", json!({"command": sleep.clone()})).await;
    wait_alive(&[&sleep]).await;
    raw.send(&json!({
        "jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 42, "reason": "test"},
    }))
    .await;
    assert_none_survive(&[&sleep], EVENTUALLY).await;
    raw.assert_alive(43).await;
}

/// Issue 7 §2: once the client stops reading stdout, the server stops what
/// it runs and exits, instead of running commands until stdin closes.
#[tokio::test]
async fn the_server_exits_when_the_client_stops_reading() {
    let mut raw = Raw::start(&[]).await;
    let terminal_marker = marker();
    let run_marker = marker();
    raw.call(1, "terminal", json!({"command": format!("sleep 300.{terminal_marker}")})).await;
    raw.call(2, "run", json!({"command": format!("sleep 300.{run_marker}")})).await;
    let markers = [format!("300.{terminal_marker}"), format!("300.{run_marker}")];
    let markers: Vec<&str> = markers.iter().map(String::as_str).collect();
    wait_alive(&markers).await;
    // stdin stays open: only stdout closes.
    raw.close_stdout();
    let status = raw.wait_exit(EVENTUALLY).await;
    assert!(status.success(), "{status}");
    assert_none_survive(&markers, EVENTUALLY).await;
}

/// The same when stdin and stdout are socket pairs, as Node.js clients
/// (the Inspector, the TypeScript SDK) pass them.
#[tokio::test]
async fn the_server_exits_when_a_socket_client_stops_reading() {
    use std::os::unix::net::UnixStream;
    let scratch = Scratch::new();
    let (stdin_ours, stdin_theirs) = UnixStream::pair().expect("socket pair");
    let (stdout_ours, stdout_theirs) = UnixStream::pair().expect("socket pair");
    let log = std::fs::File::create(scratch.log()).expect("log");
    let mut child = tokio::process::Command::new(crate::binary())
        .arg("--no-rc")
        .arg("--cwd")
        .arg(&scratch.path)
        .current_dir(&scratch.path)
        .env("XDG_CONFIG_HOME", scratch.path.join(".sk/config"))
        .env("SHELLKEEP_LOG", "info")
        .stdin(std::process::Stdio::from(std::os::fd::OwnedFd::from(stdin_theirs)))
        .stdout(std::process::Stdio::from(std::os::fd::OwnedFd::from(stdout_theirs)))
        .stderr(log)
        .spawn()
        .expect("start the binary");
    let mut stdin = tokio::net::UnixStream::from_std({
        stdin_ours.set_nonblocking(true).unwrap();
        stdin_ours
    })
    .unwrap();
    let mut lines = BufReader::new(
        tokio::net::UnixStream::from_std({
            stdout_ours.set_nonblocking(true).unwrap();
            stdout_ours
        })
        .unwrap(),
    )
    .lines();
    let m = marker();
    for message in [
        json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "wire-test", "version": "0"},
            },
        }),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({
            "jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "run", "arguments": {"command": format!("sleep 300.{m}")}},
        }),
    ] {
        let mut line = serde_json::to_vec(&message).unwrap();
        line.push(b'\n');
        stdin.write_all(&line).await.unwrap();
    }
    let init = tokio::time::timeout(EVENTUALLY, lines.next_line()).await.unwrap().unwrap();
    assert!(init.is_some_and(|l| l.contains("shellkeep")));
    let mark = format!("300.{m}");
    wait_alive(&[&mark]).await;
    drop(lines);
    let status = tokio::time::timeout(EVENTUALLY, child.wait())
        .await
        .unwrap_or_else(|_| {
            panic!("no exit; log:\n{}", std::fs::read_to_string(scratch.log()).unwrap_or_default())
        })
        .expect("wait");
    assert!(status.success(), "{status}");
    assert_none_survive(&[&mark], EVENTUALLY).await;
    drop(stdin);
}
