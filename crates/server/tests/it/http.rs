//! The Streamable HTTP transport (`--http`), end to end: the real binary
//! on a loopback port, driven by `rmcp`'s Streamable HTTP client for MCP
//! calls and by raw HTTP/1.1 over a TCP socket for what no client library
//! would send (no token, a wrong one, a foreign `Origin` or `Host`, an
//! oversized body).

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::{
    EVENTUALLY, Notifications, Reply, Scratch, alive, assert_none_survive, call_with, marker,
    spawn_binary, wait_alive,
};

/// A token of 64 hex characters, as `openssl rand -hex 32` makes.
const TOKEN: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
/// Alice's token in the two-principal file.
const ALICE: &str = "a11ce0000000000000000000000000000000000000000000000000000000a11c";
/// Bob's.
const BOB: &str = "b0b0000000000000000000000000000000000000000000000000000000000b0b";

/// A server on `127.0.0.1:0` (a free port) serving MCP over HTTP.
struct HttpServer {
    child: tokio::process::Child,
    pid: u32,
    /// Where it listens.
    addr: SocketAddr,
    scratch: Scratch,
}

impl HttpServer {
    /// Starts the binary with `--http 127.0.0.1:0`, `args` and `env`, and
    /// waits for the line that says where it serves.
    async fn start(args: &[&str], env: &[(&str, &str)]) -> HttpServer {
        let scratch = Scratch::new();
        let mut all = args.to_vec();
        all.extend_from_slice(&["serve", "--http", "127.0.0.1:0"]);
        let mut child = spawn_binary(&scratch, &all, env);
        let pid = child.id().expect("a pid");
        let log = scratch.log();
        let started = Instant::now();
        let addr = loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if let Some(addr) = served_at(&text) {
                break addr;
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("the server exited ({status}) before serving:\n{text}");
            }
            assert!(
                started.elapsed() < EVENTUALLY,
                "the server never said where it serves:\n{text}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        HttpServer { child, pid, addr, scratch }
    }

    /// A server whose one token is [`TOKEN`] (`$SHELLKEEP_TOKEN`).
    async fn with_token(args: &[&str]) -> HttpServer {
        HttpServer::start(args, &[("SHELLKEEP_TOKEN", TOKEN)]).await
    }

    /// What the server wrote to stderr so far.
    fn log(&self) -> String {
        std::fs::read_to_string(self.scratch.log()).unwrap_or_default()
    }

    /// The MCP endpoint's URL.
    fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// An MCP client connected with `token`.
    async fn client(&self, token: &str) -> RunningService<RoleClient, Notifications> {
        self.client_of(StreamableHttpClientTransportConfig::with_uri(self.url()).auth_header(token))
            .await
    }

    /// An MCP client connected with `config`.
    async fn client_of(
        &self,
        config: StreamableHttpClientTransportConfig,
    ) -> RunningService<RoleClient, Notifications> {
        let transport = StreamableHttpClientTransport::from_config(config);
        match tokio::time::timeout(EVENTUALLY, Notifications::default().serve(transport)).await {
            Ok(Ok(client)) => client,
            Ok(Err(err)) => panic!("cannot connect over HTTP: {err}\nserver log:\n{}", self.log()),
            Err(_) => panic!("no connection within {EVENTUALLY:?}\nserver log:\n{}", self.log()),
        }
    }

    /// One raw HTTP/1.1 exchange: `request` (its head ends with an empty
    /// line; `Connection: close` is added) sent whole, the response read
    /// to its end.
    async fn raw(&self, head: &str, body: &[u8]) -> Response {
        raw_exchange(self.addr, head, body).await
    }

    /// A POST to `/mcp` of `body` with `headers` (each `Name: value`), the
    /// MCP content types given.
    async fn post(&self, headers: &[&str], body: &Value) -> Response {
        let mut head = format!("POST /mcp HTTP/1.1\r\nHost: {}\r\n", self.addr);
        for header in headers {
            head.push_str(header);
            head.push_str("\r\n");
        }
        let body = body.to_string();
        head.push_str(&modern_headers(&body));
        self.raw(&head, body.as_bytes()).await
    }
}

impl Drop for HttpServer {
    /// Stops the server (SIGTERM), waits up to 10 s for it to exit, then
    /// kills it.
    fn drop(&mut self) {
        crate::send_signal(self.pid, "TERM");
        crate::exit_or_kill(&mut self.child);
    }
}

/// The address in the server's `serving MCP on http://ADDR/mcp` line.
fn served_at(log: &str) -> Option<SocketAddr> {
    let rest = log.split("serving MCP on http://").nth(1)?;
    rest.split("/mcp").next()?.parse().ok()
}

/// An HTTP response, read whole.
#[derive(Debug)]
struct Response {
    status: u16,
    /// Header names in lower case, with their values.
    headers: Vec<(String, String)>,
    body: String,
}

impl Response {
    /// The first value of header `name` (lower case).
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
    }
}

/// Sends `head` (with `Connection: close` added) and `body` to `addr` and
/// reads the response to its end.
async fn raw_exchange(addr: SocketAddr, head: &str, body: &[u8]) -> Response {
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request = format!("{head}Connection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("send the head");
    stream.write_all(body).await.expect("send the body");
    let mut bytes = Vec::new();
    tokio::time::timeout(EVENTUALLY, stream.read_to_end(&mut bytes))
        .await
        .expect("a response in time")
        .expect("read the response");
    parse_response(&bytes)
}

/// Parses a whole HTTP/1.1 response (a chunked body is left as it came).
fn parse_response(bytes: &[u8]) -> Response {
    let text = String::from_utf8_lossy(bytes);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {text:?}"));
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(name, value)| name == "transfer-encoding" && value.contains("chunked"));
    let body = if chunked { dechunk(body) } else { body.to_owned() };
    Response { status, headers, body }
}

/// The body of a chunked transfer, joined.
fn dechunk(mut rest: &str) -> String {
    let mut body = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else { break };
        if size == 0 || after.len() < size {
            break;
        }
        body.push_str(&after[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
    body
}

impl Response {
    /// The JSON-RPC message that answers: the body itself, or the last
    /// `data:` event of an event stream that has an `id`.
    fn message(&self) -> Value {
        if let Ok(value) = serde_json::from_str::<Value>(&self.body) {
            return value;
        }
        self.body
            .lines()
            .rev()
            .filter_map(|line| line.strip_prefix("data:"))
            .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
            .find(|message| message.get("id").is_some())
            .unwrap_or_else(|| panic!("no JSON-RPC answer in {self:#?}"))
    }
}

/// A `tools/list` request of the 2026-07-28 era (no protocol session: it
/// carries its own version and capabilities).
fn list_tools() -> Value {
    json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/list",
        "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }},
    })
}

/// The headers a 2026-07-28 POST of `body` carries besides `Host` and
/// `Authorization`: its types, its length, its version and its method.
fn modern_headers(body: &str) -> String {
    let value = serde_json::from_str::<Value>(body).unwrap_or_default();
    let method = value["method"].as_str().map(str::to_owned);
    // `Mcp-Name`: the tool's name, or the task's id.
    let name = value["params"]["name"].as_str().or(value["params"]["taskId"].as_str());
    let name = name.map(|name| format!("Mcp-Name: {name}\r\n")).unwrap_or_default();
    format!(
        "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: {}\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: {}\r\n",
        body.len(),
        method.unwrap_or_default()
    ) + &name
}

/// Calls `tool` through `client`; a protocol error fails the test.
async fn call(
    client: &RunningService<RoleClient, Notifications>,
    tool: &str,
    args: Value,
) -> Reply {
    match call_with(client.peer(), tool, args.clone()).await {
        Ok(reply) => reply,
        Err(err) => panic!("{tool} {args} failed: {err}"),
    }
}

/// Without a token, or with a wrong one, `/mcp` answers 401 with the
/// `Bearer` challenge, whatever the method; the right token gets past.
#[tokio::test]
async fn a_missing_or_wrong_token_gets_401() {
    let server = HttpServer::with_token(&[]).await;
    for headers in [
        vec![],
        vec!["Authorization: Bearer wrong-token-of-some-length-000000".to_owned()],
        // The right token but a byte short, and one byte more.
        vec![format!("Authorization: Bearer {}", &TOKEN[..63])],
        vec![format!("Authorization: Bearer {TOKEN}0")],
        // Another scheme with the token.
        vec![format!("Authorization: Basic {TOKEN}")],
    ] {
        let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
        let response = server.post(&headers, &list_tools()).await;
        assert_eq!(response.status, 401, "{headers:?}: {response:#?}");
        let challenge = response.header("www-authenticate").unwrap_or_default();
        assert!(challenge.starts_with("Bearer"), "{headers:?}: {response:#?}");
        assert!(!response.body.contains(TOKEN), "{response:#?}");
    }
    let get = server.raw(&format!("GET /mcp HTTP/1.1\r\nHost: {}\r\n", server.addr), b"").await;
    assert_eq!(get.status, 401, "{get:#?}");
    let right = server.post(&[&format!("Authorization: Bearer {TOKEN}")], &list_tools()).await;
    assert_eq!(right.status, 200, "{right:#?}");
    assert!(right.body.contains("\"tools\""), "{right:#?}");
    assert!(!server.log().contains(TOKEN), "the token is in the log:\n{}", server.log());
}

/// A request whose `Origin` is not allowed gets 403, even with the right
/// token; the bound loopback origin and an `--allowed-origin` pass.
#[tokio::test]
async fn a_foreign_origin_gets_403() {
    let server = HttpServer::with_token(&["--allowed-origin", "https://app.example.com"]).await;
    let auth = format!("Authorization: Bearer {TOKEN}");
    for origin in
        ["https://evil.example", "http://localhost:1", "null", "https://app.example.com:444"]
    {
        let response = server.post(&[&auth, &format!("Origin: {origin}")], &list_tools()).await;
        assert_eq!(response.status, 403, "{origin}: {response:#?}");
    }
    let port = server.addr.port();
    for origin in [format!("http://localhost:{port}"), "https://app.example.com".to_owned()] {
        let response = server.post(&[&auth, &format!("Origin: {origin}")], &list_tools()).await;
        assert_eq!(response.status, 200, "{origin}: {response:#?}");
    }
}

/// A `Host` that is not one of the bound names (a DNS rebinding page's)
/// is refused; `--allowed-host` adds one.
#[tokio::test]
async fn a_wrong_host_is_refused() {
    let server = HttpServer::with_token(&["--allowed-host", "shellkeep.internal"]).await;
    let port = server.addr.port();
    let body = list_tools().to_string();
    let post = |host: String| {
        format!(
            "POST /mcp HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {TOKEN}\r\n{}",
            modern_headers(&body)
        )
    };
    for host in [format!("evil.example:{port}"), format!("127.0.0.1:{}", port ^ 1)] {
        let response = server.raw(&post(host.clone()), body.as_bytes()).await;
        assert_eq!(response.status, 403, "{host}: {response:#?}");
    }
    for host in [format!("localhost:{port}"), "shellkeep.internal".to_owned()] {
        let response = server.raw(&post(host.clone()), body.as_bytes()).await;
        assert_eq!(response.status, 200, "{host}: {response:#?}");
    }
}

/// A body past 4 MiB gets 413 without being read (the client asked with
/// `Expect: 100-continue`, as curl does); one just under passes the size
/// check.
#[tokio::test]
async fn an_oversized_body_gets_413() {
    let server = HttpServer::with_token(&[]).await;
    let head = |length: usize| {
        format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: \
             application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: \
             {length}\r\nExpect: 100-continue\r\n",
            server.addr
        )
    };
    let limit = 4 * 1024 * 1024;
    let response = server.raw(&head(limit + 1), b"").await;
    assert_eq!(response.status, 413, "{response:#?}");
    // A body of exactly the limit is read (and is not JSON-RPC).
    let response = raw_exchange(server.addr, &head(limit), &vec![b' '; limit]).await;
    assert_ne!(response.status, 413, "{:?}", (response.status, &response.headers));
}

/// `GET /healthz` answers `ok` to anyone: no token, no detail.
#[tokio::test]
async fn healthz_answers_without_a_token() {
    let server = HttpServer::with_token(&[]).await;
    let response =
        server.raw(&format!("GET /healthz HTTP/1.1\r\nHost: {}\r\n", server.addr), b"").await;
    assert_eq!(response.status, 200, "{response:#?}");
    assert_eq!(response.body, "ok");
    let other = server.raw(&format!("GET /other HTTP/1.1\r\nHost: {}\r\n", server.addr), b"").await;
    assert_eq!(other.status, 404, "{other:#?}");
}

/// A tool call over HTTP with the token works as on stdio: the shell
/// runs the command and the reply has its output.
#[tokio::test]
async fn a_tool_call_works_with_the_token() {
    let server = HttpServer::with_token(&[]).await;
    let client = server.client(TOKEN).await;
    let r = call(&client, "terminal", json!({"command": "echo hello-$((6*7))"})).await;
    assert_eq!(r["exit_code"], 0, "{r:#?}");
    assert!(r.output().contains("hello-42"), "{r:#?}");
    let tools = client.peer().list_all_tools().await.expect("tools/list");
    assert!(tools.iter().any(|tool| tool.name == "run"), "{tools:?}");
    client.cancel().await.expect("close the client");
}

/// Without any token configured, one is generated into a private file
/// whose path the server prints; the token itself is not printed.
#[tokio::test]
async fn a_generated_token_is_in_a_private_file() {
    let server = HttpServer::start(&[], &[]).await;
    let log = server.log();
    let path = log
        .split("token is in ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no token file named:\n{log}"));
    let path = path.trim_end_matches([';', ',', ')']);
    let meta = std::fs::metadata(path).expect("the token file");
    assert_eq!(meta.permissions().mode() & 0o777, 0o600, "{path}");
    let token = std::fs::read_to_string(path).expect("read the token");
    let token = token.trim();
    assert_eq!(token.len(), 64, "256 bits as hex");
    assert!(!log.contains(token), "the token is in the log:\n{log}");
    let client = server.client(token).await;
    let r = call(&client, "terminal", json!({"command": "echo ok"})).await;
    assert_eq!(r["exit_code"], 0, "{r:#?}");
    // No command sees a token in its environment.
    let r = call(&client, "run", json!({"command": "env | grep -c SHELLKEEP_TOKEN || true"})).await;
    assert_eq!(r["stdout"].as_str().map(str::trim), Some("0"), "{r:#?}");
}

/// `$SHELLKEEP_TOKEN` reaches no command: neither the terminal's shell nor
/// `run`.
#[tokio::test]
async fn the_token_is_not_in_commands_environment() {
    let server = HttpServer::with_token(&[]).await;
    let client = server.client(TOKEN).await;
    let r = call(&client, "terminal", json!({"command": "echo [${SHELLKEEP_TOKEN:-unset}]"})).await;
    assert!(r.output().contains("[unset]"), "{r:#?}");
    let r = call(&client, "run", json!({"command": "echo [${SHELLKEEP_TOKEN:-unset}]"})).await;
    assert!(r["stdout"].as_str().unwrap_or_default().contains("[unset]"), "{r:#?}");
}

/// Binding an address that is not loopback needs `--allow-remote`, and
/// then a token of one's own; start-up refuses each with the reason.
#[tokio::test]
async fn a_remote_address_needs_allow_remote_and_a_token() {
    let scratch = Scratch::new();
    let start = async |args: &[&str], env: &[(&str, &str)]| {
        let child = spawn_binary(&scratch, args, env);
        let output = tokio::time::timeout(EVENTUALLY, child.wait_with_output())
            .await
            .expect("start-up ends in time")
            .expect("wait for the binary");
        let log = std::fs::read_to_string(scratch.log()).unwrap_or_default();
        (output.status, log)
    };
    let (status, log) =
        start(&["serve", "--http", "0.0.0.0:0"], &[("SHELLKEEP_TOKEN", TOKEN)]).await;
    assert_eq!(status.code(), Some(2), "{log}");
    assert!(log.contains("is not a loopback address"), "{log}");
    assert!(log.contains("--allow-remote"), "{log}");
    let (status, log) = start(&["serve", "--http", "0.0.0.0:0", "--allow-remote"], &[]).await;
    assert_eq!(status.code(), Some(2), "{log}");
    assert!(log.contains("needs a token you chose"), "{log}");
    assert!(log.contains("$SHELLKEEP_TOKEN or --token-file"), "{log}");
}

/// Writes a token file of alice and bob (mode 0600) in `scratch` and
/// returns its path.
fn two_principals(scratch: &std::path::Path) -> String {
    let path = scratch.join("tokens");
    std::fs::write(&path, format!("# who may call\nalice:{ALICE}\nbob:{BOB}\n")).expect("write");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    path.to_str().expect("utf-8").to_owned()
}

/// Two principals side by side: each has its own `default` (a variable
/// set in one is not in the other), `sessions` lists only its own, and a
/// session name or `run` output number of the other reads as unknown.
#[tokio::test]
async fn two_principals_do_not_see_each_other() {
    let dir = Scratch::new();
    let tokens = two_principals(&dir.path);
    let audit = dir.path.join("audit.jsonl");
    let audit_flag = audit.to_str().expect("utf-8");
    let server =
        HttpServer::start(&["--token-file", &tokens, "--audit-log", audit_flag], &[]).await;
    let alice = server.client(ALICE).await;
    let bob = server.client(BOB).await;
    let word = format!("alice-{}", marker());
    let r =
        call(&alice, "terminal", json!({"command": format!("export MARK={word}; echo set")})).await;
    assert_eq!(r["exit_code"], 0, "{r:#?}");
    let r = call(&bob, "terminal", json!({"command": "echo [${MARK:-none}]"})).await;
    assert!(r.output().contains("[none]"), "bob sees alice's default: {r:#?}");
    let r = call(&alice, "terminal", json!({"command": "echo [$MARK]"})).await;
    assert!(r.output().contains(&format!("[{word}]")), "{r:#?}");
    // A named session of alice's.
    let r = call(&alice, "terminal", json!({"session": "build", "command": "echo in-build"})).await;
    assert_eq!(r["exit_code"], 0, "{r:#?}");
    let listed = call(&alice, "sessions", json!({})).await;
    assert!(listed.text.contains("build"), "{listed:#?}");
    let listed = call(&bob, "sessions", json!({})).await;
    assert!(!listed.text.contains("build"), "bob lists alice's session: {listed:#?}");
    let r = call(&bob, "output", json!({"session": "build"})).await;
    assert!(r.is_error, "bob reads alice's session: {r:#?}");
    assert!(!r.text.contains("in-build"), "{r:#?}");
    // A `run` output of alice's, by its number: her first run is number 1.
    let r = call(&alice, "run", json!({"command": format!("echo {word}-run")})).await;
    assert_eq!(r["exitCode"], 0, "{r:#?}");
    let mine = call(&alice, "output", json!({"run": 1, "stream": "stdout"})).await;
    assert!(mine.text.contains(&format!("{word}-run")), "{mine:#?}");
    let theirs = call(&bob, "output", json!({"run": 1, "stream": "stdout"})).await;
    assert!(theirs.is_error, "bob reads alice's run output: {theirs:#?}");
    assert!(!theirs.text.contains(&word), "{theirs:#?}");
    // Bob's own first run is his number 1.
    call(&bob, "run", json!({"command": "echo bob-run"})).await;
    let his = call(&bob, "output", json!({"run": 1, "stream": "stdout"})).await;
    assert!(his.text.contains("bob-run") && !his.text.contains(&word), "{his:#?}");
    // A background job's generated name cannot be guessed from another's.
    let job = call(&bob, "terminal", json!({"command": "echo job-ran", "background": true})).await;
    let name = job["session"].as_str().unwrap_or_else(|| panic!("no session: {job:#?}"));
    let suffix = name.strip_prefix("job-1-").unwrap_or_else(|| panic!("{name}"));
    assert!(suffix.len() == 16 && suffix.bytes().all(|b| b.is_ascii_hexdigit()), "{name}");
    // The audit log names each call's principal, and its sessions as
    // PRINCIPAL/NAME.
    let lines: Vec<Value> = std::fs::read_to_string(&audit)
        .expect("the audit log")
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect();
    let starts = |principal: &str| {
        lines.iter().filter(|l| l["event"] == "start" && l["principal"] == principal).count()
    };
    assert!(starts("alice") >= 4 && starts("bob") >= 3, "{lines:#?}");
    assert!(
        lines.iter().any(|l| l["principal"] == "alice" && l["session"] == "alice/build"),
        "{lines:#?}"
    );
}

/// A principal may have 64 calls in flight: the 65th is answered at once
/// with a JSON-RPC error that says so (it is not queued, and runs
/// nothing), while another principal's calls go on; once the client goes
/// away its calls are cancelled and their commands stopped.
#[tokio::test]
async fn a_principals_65th_call_in_flight_is_refused_at_once() {
    let dir = Scratch::new();
    let tokens = two_principals(&dir.path);
    let server = HttpServer::start(&["--token-file", &tokens], &[]).await;
    // The client's own bound on POSTs waiting for their response (16 by
    // default) is lifted: the server's is the one under test.
    let config = StreamableHttpClientTransportConfig::with_uri(server.url()).auth_header(ALICE);
    let alice = server.client_of(config.max_concurrent_requests(100)).await;
    let sleeper = format!("300.{}", marker());
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..64 {
        let peer = alice.peer().clone();
        let command = json!({"command": format!("sleep {sleeper}"), "timeout_sec": 600});
        calls.spawn(async move { call_with(&peer, "run", command).await });
    }
    // Every call has started its command (on a busy machine that takes a
    // while): the calls are in flight.
    crate::wait_until(
        EVENTUALLY * 2,
        || crate::processes_with(&[&sleeper]).len() >= 64,
        || format!("{} of 64 commands started", crate::processes_with(&[&sleeper]).len()),
    )
    .await;
    let witness = format!("{}-ran", marker());
    let refused = crate::poll_until(
        EVENTUALLY,
        async || {
            call_with(alice.peer(), "run", json!({"command": format!("echo {witness}")})).await
        },
        |result| result.is_err(),
    )
    .await;
    let Err(rmcp::service::ServiceError::McpError(error)) = refused else {
        panic!("not a JSON-RPC error: {refused:?}");
    };
    assert_eq!(error.code.0, -32000, "{error:?}");
    assert!(error.message.contains("64 calls in flight"), "{error:?}");
    // Bob is not held up by alice's calls.
    let bob = server.client(BOB).await;
    let r = call(&bob, "terminal", json!({"command": "echo bob-here"})).await;
    assert!(r.output().contains("bob-here"), "{r:#?}");
    // Alice leaves: her calls are cancelled and their commands stopped.
    alice.cancel().await.expect("close alice's client");
    calls.abort_all();
    assert_none_survive(&[&sleeper], EVENTUALLY).await;
}

/// SIGTERM while a call is in flight: the server stops accepting, the
/// call is answered, every session's processes are stopped, and the
/// server exits cleanly.
#[tokio::test]
async fn sigterm_answers_calls_and_stops_the_sessions() {
    let mut server = HttpServer::with_token(&[]).await;
    let client = server.client(TOKEN).await;
    let (job, waited) = (format!("300.{}", marker()), format!("300.{}", marker()));
    let r =
        call(&client, "terminal", json!({"command": format!("sleep {job} & echo started")})).await;
    assert_eq!(r["exit_code"], 0, "{r:#?}");
    let peer = client.peer().clone();
    let command = json!({"session": "other", "command": format!("sleep {waited}")});
    let waiting = tokio::spawn(async move { call_with(&peer, "terminal", command).await });
    wait_alive(&[&job, &waited]).await;
    crate::send_signal(server.pid, "TERM");
    let answered = tokio::time::timeout(EVENTUALLY, waiting).await.expect("the call ends");
    let answered = answered.expect("the call's task");
    assert!(answered.is_ok(), "the call in flight got no answer: {answered:?}\n{}", server.log());
    let status = tokio::time::timeout(EVENTUALLY, server.child.wait())
        .await
        .expect("the server exits")
        .expect("wait for the server");
    assert!(status.success(), "{status}\n{}", server.log());
    assert!(!alive(server.pid));
    assert_none_survive(&[&job, &waited], EVENTUALLY).await;
    // The port is closed.
    let connected = tokio::net::TcpStream::connect(server.addr).await;
    assert!(connected.is_err(), "the server still accepts");
}

/// `doctor` says in one line what `--http` would bind and how it would
/// authenticate, or why it would not start.
#[tokio::test]
async fn doctor_says_what_http_would_serve() {
    let scratch = Scratch::new();
    let doctor = async |args: &[&str]| {
        let mut command = vec!["doctor"];
        command.extend_from_slice(args);
        let child = spawn_binary(&scratch, &command, &[("SHELLKEEP_TOKEN", TOKEN)]);
        let output = tokio::time::timeout(EVENTUALLY, child.wait_with_output())
            .await
            .expect("doctor ends in time")
            .expect("wait for doctor");
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        text.lines().find(|line| line.starts_with("http: ")).map(str::to_owned).unwrap_or(text)
    };
    let line = doctor(&["--http", "127.0.0.1:8765"]).await;
    assert_eq!(
        line,
        "http: would serve http://127.0.0.1:8765/mcp to this host only, authenticating with the \
         bearer tokens of $SHELLKEEP_TOKEN (default); Origin and Host checked"
    );
    assert!(!line.contains(TOKEN));
    let line = doctor(&["--http", "0.0.0.0:8765"]).await;
    assert!(line.starts_with("http: FAILS (--http 0.0.0.0:8765 is not a loopback"), "{line}");
    let line = doctor(&[]).await;
    assert!(line.starts_with("http: off"), "{line}");
}

/// A task belongs to the principal that started it: another principal's
/// `tasks/get` and `tasks/cancel` of its id read as an unknown task
/// (-32602), and leave it running; its own principal cancels it, and its
/// command is stopped.
#[tokio::test]
async fn another_principals_task_reads_as_unknown() {
    let dir = Scratch::new();
    let tokens = two_principals(&dir.path);
    let server = HttpServer::start(&["--token-file", &tokens], &[]).await;
    let ask = async |token: &str, id: u64, method: &str, params: Value| {
        let body = crate::tasks::request(id, method, params, true);
        server.post(&[&format!("Authorization: Bearer {token}")], &body).await.message()
    };
    let sleeper = format!("300.{}", marker());
    let call = json!({"name": "run", "arguments": {"command": format!("sleep {sleeper}")}});
    let started = ask(ALICE, 1, "tools/call", call).await;
    assert_eq!(started["result"]["resultType"], "task", "{started}");
    let task = started["result"]["taskId"].as_str().expect("a task id").to_owned();
    wait_alive(&[&sleeper]).await;
    for method in ["tasks/get", "tasks/cancel"] {
        let theirs = ask(BOB, 2, method, json!({"taskId": task})).await;
        assert_eq!(theirs["error"]["code"], -32602, "{method}: {theirs}");
        assert!(theirs.get("result").is_none(), "{method}: {theirs}");
    }
    let mine = ask(ALICE, 3, "tasks/get", json!({"taskId": task})).await;
    assert_eq!(mine["result"]["status"], "working", "{mine}");
    assert!(!crate::processes_with(&[&sleeper]).is_empty(), "bob's cancel stopped alice's task");
    let cancelled = ask(ALICE, 4, "tasks/cancel", json!({"taskId": task})).await;
    assert!(cancelled.get("error").is_none(), "{cancelled}");
    assert_none_survive(&[&sleeper], EVENTUALLY).await;
}

/// A 2025-11-25 protocol session (`Mcp-Session-Id`) is its opener's:
/// another principal cannot post into it nor end it (404, as an unknown
/// session), and it goes on working for its owner.
#[tokio::test]
async fn another_principals_protocol_session_is_unknown() {
    let dir = Scratch::new();
    let tokens = two_principals(&dir.path);
    let server = HttpServer::start(&["--token-file", &tokens], &[]).await;
    let legacy = |token: &str, session: Option<&str>, method: &str, body: &Value| {
        let body = body.to_string();
        let mut head = format!(
            "{method} /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {token}\r\nContent-Type: \
             application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: \
             {}\r\n",
            server.addr,
            body.len()
        );
        if let Some(session) = session {
            head.push_str(&format!(
                "Mcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-11-25\r\n"
            ));
        }
        (head, body)
    };
    let initialize = json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "http-test", "version": "0"},
        },
    });
    let (head, body) = legacy(ALICE, None, "POST", &initialize);
    let opened = server.raw(&head, body.as_bytes()).await;
    assert_eq!(opened.status, 200, "{opened:#?}");
    let session = opened.header("mcp-session-id").expect("a session id").to_owned();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (head, body) = legacy(ALICE, Some(&session), "POST", &initialized);
    let sent = server.raw(&head, body.as_bytes()).await;
    assert_eq!(sent.status, 202, "{sent:#?}");
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}});
    for method in ["POST", "DELETE"] {
        let (head, body) = legacy(BOB, Some(&session), method, &list);
        let theirs = server.raw(&head, body.as_bytes()).await;
        assert_eq!(theirs.status, 404, "{method}: {theirs:#?}");
    }
    let (head, body) = legacy(ALICE, Some(&session), "POST", &list);
    let mine = server.raw(&head, body.as_bytes()).await;
    assert_eq!(mine.status, 200, "{mine:#?}");
    assert!(mine.message()["result"]["tools"].is_array(), "{mine:#?}");
}

/// A message that is not fit to serve gets the JSON-RPC error stdio gives
/// it, as JSON: not JSON (-32700, no id), a batch (-32600), a known
/// method's bad parameters (-32602, its id), an unknown method (-32601).
#[tokio::test]
async fn broken_messages_get_stdios_errors() {
    let server = HttpServer::with_token(&[]).await;
    let auth = format!("Authorization: Bearer {TOKEN}");
    let send = async |body: &str| {
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\n{auth}\r\n{}",
            server.addr,
            modern_headers(body)
        );
        let response = server.raw(&head, body.as_bytes()).await;
        (response.status, response.message())
    };
    let (status, error) = send("{not json").await;
    assert_eq!(
        (status, &error["error"]["code"], &error["id"]),
        (400, &json!(-32700), &Value::Null)
    );
    assert!(error["error"]["message"].as_str().unwrap().starts_with("Parse error"), "{error}");
    let (status, error) = send(&json!([list_tools(), list_tools()]).to_string()).await;
    assert_eq!((status, &error["error"]["code"]), (400, &json!(-32600)), "{error}");
    assert!(error["error"]["message"].as_str().unwrap().contains("batches"), "{error}");
    let mut bad = list_tools();
    bad["id"] = json!(9);
    bad["method"] = json!("tools/call");
    bad["params"]["name"] = json!(5);
    let (status, error) = send(&bad.to_string()).await;
    assert_eq!((status, &error["error"]["code"], &error["id"]), (200, &json!(-32602), &json!(9)));
    assert!(error["error"]["message"].as_str().unwrap().contains("tools/call"), "{error}");
    let mut unknown = list_tools();
    unknown["method"] = json!("no/such");
    let (status, error) = send(&unknown.to_string()).await;
    assert_eq!((status, &error["error"]["code"]), (404, &json!(-32601)), "{error}");
}

/// Over HTTP as over stdio: a `run` that declares Tasks returns a task at
/// once, polled with `tasks/get` to its end, whose result is the reply the
/// same call gives without the extension; a request that does not declare
/// it gets that reply directly, and `tasks/get` from it is refused.
#[tokio::test(flavor = "multi_thread")]
async fn a_run_task_over_http_ends_with_the_blocking_reply() {
    let server = HttpServer::with_token(&[]).await;
    let ask = async |id: u64, method: &str, params: Value, declares: bool| {
        let body = crate::tasks::request(id, method, params, declares);
        server.post(&[&format!("Authorization: Bearer {TOKEN}")], &body).await.message()
    };
    // The command waits for a file, so the task is seen working first.
    let go = server.scratch.path.join(format!("go-{}", marker()));
    let command = format!("until [ -e {} ]; do sleep 0.05; done; echo done", go.display());
    let call = json!({"name": "run", "arguments": {"command": command, "timeout_sec": 60}});
    let started = ask(1, "tools/call", call.clone(), true).await;
    assert_eq!(started["result"]["resultType"], "task", "{started}");
    assert_eq!(started["result"]["status"], "working", "{started}");
    let task = started["result"]["taskId"].as_str().expect("a task id").to_owned();
    assert_eq!(
        ask(2, "tasks/get", json!({"taskId": task}), true).await["result"]["status"],
        "working"
    );
    std::fs::write(&go, "").expect("the command's go");
    let mut id = 3;
    let ended = crate::poll_until(
        EVENTUALLY,
        async || {
            id += 1;
            ask(id, "tasks/get", json!({"taskId": task}), true).await
        },
        |reply| reply["result"]["status"] != "working",
    )
    .await;
    assert_eq!(ended["result"]["status"], "completed", "{ended}");
    let result = &ended["result"]["result"];
    assert_eq!(result["structuredContent"]["stdout"], "done\n", "{ended}");

    // Without the extension: the same reply, at once, and no task.
    let blocking = ask(100, "tools/call", call, false).await;
    assert!(blocking["result"].get("taskId").is_none(), "{blocking}");
    assert_eq!(
        crate::tasks::without_duration(result),
        crate::tasks::without_duration(&blocking["result"])
    );
    let refused = ask(101, "tasks/get", json!({"taskId": task}), false).await;
    assert_eq!(refused["error"]["code"], -32021, "{refused}");
}
