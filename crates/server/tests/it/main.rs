//! End-to-end tests: the real `shellkeep` binary, driven over stdio by
//! `rmcp`'s own client, exactly as an MCP host would drive it.
//!
//! Each test starts its own server (with `--no-rc`, a fresh scratch working
//! directory and a controlled environment), so tests run in parallel and
//! share nothing. The harness spawns the binary itself and hands its pipes
//! to the rmcp client, rather than using `TokioChildProcess`, so that a test
//! owns the server process: it can close only the server's stdin (the end of
//! the connection), signal it, and wait for it to exit. The [`Server`] drop
//! guard always stops the server.
//!
//! Waiting is always for a condition with a deadline ([`wait_until`],
//! [`poll_until`]),
//! never a fixed sleep. Process trees started by tests carry unique markers
//! (`sleep 300.<digits>`, which GNU sleep accepts) so that survivors can be
//! found in `/proc` without confusing parallel tests.
#![allow(
    clippy::disallowed_methods,
    reason = "the tests start the binary and the processes they check, and signal them"
)]

mod at_prompt;
mod attach;
mod audit;
mod bad_input;
mod cli;
mod client_args;
mod containment;
mod crash;
mod descriptors;
mod forgery;
mod guard;
mod hostile;
mod http;
mod jobs;
mod keys;
mod limits;
mod long_work;
mod masking;
mod namespace;
mod no_leak;
mod noninteractive;
mod orphans;
mod outputs;
mod pid1;
mod prompt;
mod record;
mod records;
mod remote;
mod replies;
mod run;
mod runtime;
mod sandbox;
mod screen;
mod secrets;
mod sessions;
mod shell;
mod signals;
mod tasks;
mod terminal;
mod tools;
mod traps;
mod waiting_jobs;
mod wire;

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use rmcp::handler::client::ClientHandler;
use rmcp::model::{CallToolRequestParams, CallToolResponse};
use rmcp::service::{NotificationContext, Peer, RunningService, ServiceError};
use rmcp::{RoleClient, ServiceExt};
use serde_json::Value;
use tokio::io::AsyncWrite;

/// The longest any "eventually" condition may take before a test fails.
const EVENTUALLY: Duration = Duration::from_secs(20);

#[path = "../../../engine/tests/it/skip.rs"]
mod skip;
pub use skip::{in_ci, installed, kernel_forbids, skipping};

/// A random number, different on every call (no dependency needed: std's
/// hasher keys are random per process and per `RandomState`).
fn random_u64() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    hasher.write_u32(std::process::id());
    hasher.finish()
}

/// A unique marker for a process of a test's tree: `sleep 300.<marker>`
/// runs for 300 s and can be found in `/proc` by its argument.
fn marker() -> String {
    // Nine digits after the point: unique among parallel tests, and still a
    // number GNU sleep accepts.
    format!("{:09}", random_u64() % 1_000_000_000)
}

/// The `shellkeep` binary under test: `$SHELLKEEP_BIN` when set (CI runs
/// these tests as another user, from a copy of the binaries), else the one
/// Cargo built.
fn binary() -> PathBuf {
    std::env::var_os("SHELLKEEP_BIN")
        .filter(|path| !path.is_empty())
        .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_shellkeep")), PathBuf::from)
}

/// A scratch directory with a short name (`/tmp/sk-XXXXXXXX`), removed when
/// dropped. It is the server's working directory, so its length shows in
/// replies as a real user's project path would.
struct Scratch {
    path: PathBuf,
}

impl Scratch {
    fn new() -> Scratch {
        let path = std::env::temp_dir().join(format!("sk-{:08x}", random_u64() as u32));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(path.join(".sk/config")).expect("create the scratch directory");
        Scratch { path }
    }

    /// Where the server's stderr goes.
    fn log(&self) -> PathBuf {
        self.path.join(".sk/server.log")
    }

    /// A policy file whose one category, the default, allows 2 s of
    /// unwatched time and 1 s of silence: for `--policy`.
    fn short_policy(&self) -> String {
        let path = self.path.join("policy.json");
        let policy = serde_json::json!({
            "version": "1.0",
            "description": "test",
            "categories": {"short": {"exec_timeout_sec": 2, "no_output_timeout_sec": 1}},
            "command_patterns": {"short": []},
            "default_category": "short",
        });
        std::fs::write(&path, policy.to_string()).expect("write the policy");
        path.to_str().expect("utf-8 path").to_owned()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Starts the server binary in `scratch` with `args`: stdin and stdout
/// piped (the MCP channel), stderr to the scratch log, and an environment
/// that cannot pick up a policy or settings from the machine running the
/// tests.
fn spawn_binary(scratch: &Scratch, args: &[&str], env: &[(&str, &str)]) -> tokio::process::Child {
    spawn_binary_via(scratch, &[], args, env)
}

/// [`spawn_binary`] through a `wrapper` (a program and its arguments),
/// started with the binary's path and arguments after its own; it must exec
/// the binary. No wrapper starts the binary itself.
fn spawn_binary_via(
    scratch: &Scratch,
    wrapper: &[&str],
    args: &[&str],
    env: &[(&str, &str)],
) -> tokio::process::Child {
    let log = std::fs::File::create(scratch.log()).expect("create the server log");
    let binary = binary();
    let mut command = match wrapper {
        [] => tokio::process::Command::new(binary),
        [program, wrapper_args @ ..] => {
            let mut command = tokio::process::Command::new(program);
            command.args(wrapper_args).arg(binary);
            command
        }
    };
    command
        .arg("--no-rc")
        .arg("--cwd")
        .arg(&scratch.path)
        .args(args)
        .current_dir(&scratch.path)
        .env("XDG_CONFIG_HOME", scratch.path.join(".sk/config"))
        .env("XDG_STATE_HOME", scratch.path.join(".sk/state"))
        .env("SHELLKEEP_LOG", "info")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(log);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("SHELLKEEP_") && key != "SHELLKEEP_LOG" {
            command.env_remove(key);
        }
    }
    command.envs(env.iter().copied());
    command.spawn().expect("start the shellkeep binary")
}

/// The server's stdin as the client writes it, with a switch the drop guard
/// can throw without an async runtime: [`ClosableStdin::close`] drops the
/// pipe at once, which the server takes as the end of the connection.
#[derive(Clone)]
struct ClosableStdin(Arc<Mutex<Option<tokio::process::ChildStdin>>>);

impl ClosableStdin {
    fn close(&self) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take();
    }

    /// Applies `operation` to the pipe, or fails as a closed pipe would.
    fn poll_with<T>(
        &self,
        operation: impl FnOnce(Pin<&mut tokio::process::ChildStdin>) -> Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        match self.0.lock().unwrap_or_else(PoisonError::into_inner).as_mut() {
            Some(stdin) => operation(Pin::new(stdin)),
            None => Poll::Ready(Err(io::ErrorKind::BrokenPipe.into())),
        }
    }
}

impl AsyncWrite for ClosableStdin {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_with(|stdin| stdin.poll_write(cx, buf))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_with(|stdin| stdin.poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_with(|stdin| stdin.poll_shutdown(cx))
    }
}

/// One tool call's result, as the agent sees it.
#[derive(Debug, Clone)]
struct Reply {
    /// All text content blocks, joined, each starting on a line of its own.
    text: String,
    /// The text content blocks, one by one: a command's output and
    /// shellkeep's notices never share a block when the output has a line
    /// shaped like a notice.
    blocks: Vec<String>,
    /// `structuredContent` (`Null` when absent).
    structured: Value,
    /// `isError`.
    is_error: bool,
}

impl std::ops::Index<&str> for Reply {
    type Output = Value;

    /// A field of the structured content (`Null` when absent).
    fn index(&self, key: &str) -> &Value {
        &self.structured[key]
    }
}

impl Reply {
    fn from_response(response: CallToolResponse) -> Reply {
        let CallToolResponse::Complete(result) = response else {
            panic!("expected a complete tool result, got {response:?}");
        };
        let value = serde_json::to_value(&result).expect("a tool result serializes");
        let blocks: Vec<String> = value["content"]
            .as_array()
            .map(|blocks| {
                blocks.iter().filter_map(|b| b["text"].as_str().map(str::to_owned)).collect()
            })
            .unwrap_or_default();
        let mut text = String::new();
        for block in &blocks {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(block);
        }
        Reply {
            text,
            blocks,
            structured: value["structuredContent"].clone(),
            is_error: value["isError"].as_bool().unwrap_or(false),
        }
    }

    /// `output` of a terminal reply.
    fn output(&self) -> &str {
        self["output"].as_str().unwrap_or_else(|| panic!("no output in {self:#?}"))
    }
}

/// Calls `tool` with `args` through `peer`.
async fn call_with(
    peer: &Peer<RoleClient>,
    tool: &str,
    args: Value,
) -> Result<Reply, ServiceError> {
    let Value::Object(arguments) = args else { panic!("tool arguments must be an object") };
    let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
    peer.call_tool_once(params).await.map(Reply::from_response)
}

/// The client's handler: records every progress notification
/// the server sends (rmcp's client asks for progress on every request), as
/// JSON.
#[derive(Clone, Default)]
struct Notifications(Arc<Mutex<Vec<Value>>>);

impl Notifications {
    /// The notifications received so far.
    fn all(&self) -> Vec<Value> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    fn push(&self, value: Value) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).push(value);
    }
}

impl ClientHandler for Notifications {
    async fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.push(serde_json::to_value(params).unwrap_or_default());
    }
}

/// A running server with a connected rmcp client. Dropping it stops the
/// server (SIGTERM, then SIGKILL) and removes its scratch directory.
struct Server {
    /// The client connection; `None` once the test closed it.
    client: Option<RunningService<RoleClient, Notifications>>,
    /// Every notification the server sent the client.
    notifications: Notifications,
    /// The server process.
    child: tokio::process::Child,
    /// The server's stdin, also held by the client's transport.
    stdin: ClosableStdin,
    /// The server's process id.
    pid: u32,
    /// The server's working directory and log.
    scratch: Scratch,
}

impl Server {
    /// A server with the default options.
    async fn start() -> Server {
        Server::with(&[]).await
    }

    /// A server with extra command-line `args`.
    async fn with(args: &[&str]) -> Server {
        Server::with_env(args, &[]).await
    }

    /// A server with extra command-line `args` and environment variables.
    async fn with_env(args: &[&str], env: &[(&str, &str)]) -> Server {
        Server::wrapped(&[], args, env).await
    }

    /// A server started through `wrapper`, which execs the binary (see
    /// [`spawn_binary_via`]).
    async fn wrapped(wrapper: &[&str], args: &[&str], env: &[(&str, &str)]) -> Server {
        let scratch = Scratch::new();
        let mut child = spawn_binary_via(&scratch, wrapper, args, env);
        let pid = child.id().expect("the server has a pid");
        let stdout = child.stdout.take().expect("piped stdout");
        let stdin = ClosableStdin(Arc::new(Mutex::new(child.stdin.take())));
        let notifications = Notifications::default();
        let serving = notifications.clone().serve((stdout, stdin.clone()));
        let client = match tokio::time::timeout(EVENTUALLY, serving).await {
            Ok(Ok(client)) => client,
            Ok(Err(err)) => panic!(
                "MCP handshake failed: {err}\nserver log:\n{}",
                std::fs::read_to_string(scratch.log()).unwrap_or_default()
            ),
            Err(_) => panic!("no MCP handshake within {EVENTUALLY:?}"),
        };
        Server { client: Some(client), notifications, child, stdin, pid, scratch }
    }

    /// The server's (and the terminal's starting) working directory.
    fn cwd(&self) -> &Path {
        &self.scratch.path
    }

    /// What the server wrote to stderr so far.
    fn log(&self) -> String {
        std::fs::read_to_string(self.scratch.log()).unwrap_or_default()
    }

    /// A handle for calls made concurrently with the test's own.
    fn peer(&self) -> Peer<RoleClient> {
        self.client.as_ref().expect("the connection is open").peer().clone()
    }

    /// The connected client.
    fn client(&self) -> &RunningService<RoleClient, Notifications> {
        self.client.as_ref().expect("the connection is open")
    }

    /// Calls `tool`, returning protocol errors as `Err`.
    async fn try_call(&self, tool: &str, args: Value) -> Result<Reply, ServiceError> {
        call_with(&self.peer(), tool, args).await
    }

    /// Calls `tool`; a protocol error fails the test.
    async fn call(&self, tool: &str, args: Value) -> Reply {
        match self.try_call(tool, args.clone()).await {
            Ok(reply) => reply,
            Err(err) => panic!("{tool} {args} failed: {err}\nserver log:\n{}", self.log()),
        }
    }

    /// Calls `terminal`.
    async fn terminal(&self, args: Value) -> Reply {
        self.call("terminal", args).await
    }

    /// Calls `run`.
    async fn run(&self, args: Value) -> Reply {
        self.call("run", args).await
    }

    /// Ends the MCP connection the way a host does when it quits: the
    /// server's stdin reaches end of file. The process itself is left alone.
    async fn close_connection(&mut self) {
        if let Some(client) = self.client.take() {
            let _ = tokio::time::timeout(EVENTUALLY, client.cancel()).await;
        }
        // The transport has let go of the pipe; this is its last holder.
        self.stdin.close();
    }

    /// Sends `signal` (a name such as `TERM` or `KILL`) to the server.
    fn signal(&self, signal: &str) {
        send_signal(self.pid, signal);
    }

    /// Waits for the server to exit.
    async fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        match tokio::time::timeout(within, self.child.wait()).await {
            Ok(status) => status.expect("wait for the server"),
            Err(_) => panic!("the server did not exit within {within:?}\nlog:\n{}", self.log()),
        }
    }
}

impl Drop for Server {
    /// Ends the connection, which makes the server stop its shell and
    /// everything it runs and exit; if it has not exited within 10 s, it is
    /// killed (and its orphan guard cleans up).
    fn drop(&mut self) {
        drop(self.client.take());
        self.stdin.close();
        exit_or_kill(&mut self.child);
    }
}

/// Waits up to 10 s for `child`, told to stop, to exit; then kills it.
fn exit_or_kill(child: &mut tokio::process::Child) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if !matches!(child.try_wait(), Ok(None)) {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.start_kill();
}

/// Sends `signal` to `pid` with the `kill` command (no signal crate needed).
fn send_signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .stderr(Stdio::null())
        .status()
        .expect("run kill");
    assert!(status.success() || signal == "TERM", "kill -{signal} {pid} failed");
}

/// Waits until `condition` holds, polling every 10 ms; fails the test with
/// `what()` after `within`.
async fn wait_until(
    within: Duration,
    mut condition: impl FnMut() -> bool,
    what: impl Fn() -> String,
) {
    let deadline = Instant::now() + within;
    while !condition() {
        assert!(Instant::now() < deadline, "not within {within:?}: {}", what());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Repeats `attempt` (a call, say) every 10 ms until `done` holds for what
/// it returned, and returns that; fails the test with the last value after
/// `within`.
async fn poll_until<T: std::fmt::Debug>(
    within: Duration,
    mut attempt: impl AsyncFnMut() -> T,
    mut done: impl FnMut(&T) -> bool,
) -> T {
    let deadline = Instant::now() + within;
    loop {
        let value = attempt().await;
        if done(&value) {
            return value;
        }
        assert!(Instant::now() < deadline, "not within {within:?}: {value:#?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Live processes (pid and command line) whose command line contains any of
/// `markers`. Zombies have an empty command line, so they do not count.
fn processes_with(markers: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else { return found };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().filter(|n| n.bytes().all(|b| b.is_ascii_digit())) else {
            continue;
        };
        let Ok(raw) = std::fs::read(entry.path().join("cmdline")) else { continue };
        let cmdline = String::from_utf8_lossy(&raw).replace('\0', " ");
        if markers.iter().any(|m| cmdline.contains(m)) {
            found.push(format!("{pid}: {}", cmdline.trim_end()));
        }
    }
    found
}

/// Waits until a process with each of `markers` has been seen alive (not
/// necessarily all at once: a short-lived tree may already be ending).
async fn wait_alive(markers: &[&str]) {
    let mut unseen: Vec<&str> = markers.to_vec();
    wait_until(
        EVENTUALLY,
        || {
            unseen.retain(|m| processes_with(&[m]).is_empty());
            unseen.is_empty()
        },
        || format!("processes with {markers:?}; alive: {:?}", processes_with(markers)),
    )
    .await;
}

/// Waits until no process with any of `markers` is alive.
async fn assert_none_survive(markers: &[&str], within: Duration) {
    wait_until(
        within,
        || processes_with(markers).is_empty(),
        || format!("these survived: {:?}", processes_with(markers)),
    )
    .await;
}

/// Whether process `pid` is alive (present and not a zombie).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z')),
        Err(_) => false,
    }
}

/// The orphan guard the server `pid` runs: its child running
/// `shellkeep __guard`.
fn guard_of(pid: u32) -> Option<u32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|entry| {
        let child: u32 = entry.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
        let ppid: u32 = stat.rsplit_once(") ")?.1.split(' ').nth(1)?.parse().ok()?;
        let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
        (ppid == pid && String::from_utf8_lossy(&cmdline).contains("__guard")).then_some(child)
    })
}
