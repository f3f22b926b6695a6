//! The load benchmark: a fleet's clients over Streamable HTTP, and stdio's
//! one client beside them, against the release `shellkeep` binary.
//!
//! Run it with `cargo bench -p shellkeep --bench load`. It measures
//! 1. [`CLIENTS`] clients at once over HTTP, each a principal of its own
//!    (a token file of [`CLIENTS`] names) in its own `default` session:
//!    each makes [`ECHO_CALLS`] `terminal` calls of `echo` with a marker
//!    of its own, then one command that prints [`BIG_OUTPUT`] bytes. Every
//!    reply must carry its own marker (no reply lost or given to another
//!    client) and the big one must say it was cut and where it is saved.
//!    It prints the p50 and p99 of an `echo` call, the wall time, the big
//!    output's time, and the server's peak resident memory (`VmHWM`);
//! 2. the same over HTTP with one client, to tell the transport's cost
//!    from the load's;
//! 3. the same work by stdio's single client: [`ECHO_CALLS`] `echo` calls
//!    and one big output, p50 and p99.
//!
//! It is a benchmark, not a test: it prints a table and exits non-zero
//! only when the measurement itself fails (the server does not start, a
//! call errors, a reply is not the one that was asked for).
#![allow(clippy::disallowed_methods, reason = "the benchmark starts the server it measures")]

mod common;

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use rmcp::RoleClient;
use rmcp::ServiceExt;
use rmcp::model::CallToolResult;
use rmcp::service::{Peer, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use serde_json::{Value, json};
use tokio::process::Command;

use common::calls::structured;
use common::measure::{megabytes, millis, percentile, proc_status};

/// The server under test (the bench profile inherits `release`).
const SERVER: &str = env!("CARGO_BIN_EXE_shellkeep");

/// An environment variable naming another `shellkeep` binary to measure.
const SERVER_OVERRIDE: &str = "SHELLKEEP_BENCH_SERVER";

/// Clients over HTTP at once.
const CLIENTS: usize = 32;

/// `echo` calls each client makes.
const ECHO_CALLS: usize = 200;

/// Bytes of the big output each client asks for once (10 MB).
const BIG_OUTPUT: usize = 10_000_000;

/// The longest any single call may take before the benchmark gives up.
const CALL_LIMIT: Duration = Duration::from_secs(120);

fn main() -> ExitCode {
    common::main("load", bench())
}

/// The binary measured: [`SERVER_OVERRIDE`] if set, else [`SERVER`].
fn server() -> std::ffi::OsString {
    std::env::var_os(SERVER_OVERRIDE).unwrap_or_else(|| SERVER.into())
}

async fn bench() -> anyhow::Result<()> {
    let scratch = Scratch::new()?;
    let mut rows = Vec::new();
    http_fleet(&scratch, CLIENTS, &mut rows).await?;
    http_fleet(&scratch, 1, &mut rows).await?;
    stdio_client(&scratch, &mut rows).await?;
    let width = rows.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
    let mut out = std::io::stdout().lock();
    writeln!(out)?;
    for (name, value) in rows {
        writeln!(out, "{name:<width$}  {value}")?;
    }
    Ok(())
}

/// What one client measured.
struct ClientRun {
    echoes: Vec<Duration>,
    big: Duration,
}

/// Steps 1 and 2: `clients` principals over HTTP at once (a token file
/// and a log of their own in `scratch`).
async fn http_fleet(
    scratch: &Scratch,
    clients: usize,
    rows: &mut Vec<(String, String)>,
) -> anyhow::Result<()> {
    let tokens: Vec<(String, String)> = (0..clients)
        .map(|i| (format!("client{i}"), format!("token-{i:02}-{}", "x".repeat(32))))
        .collect();
    let token_file = scratch.path.join(format!("tokens-{clients}"));
    let lines: String = tokens.iter().map(|(name, token)| format!("{name}:{token}\n")).collect();
    std::fs::write(&token_file, lines)?;
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600))?;
    let log = scratch.path.join(format!("http-{clients}.log"));
    let mut child = Command::new(server())
        .args(["--no-rc", "--no-audit-log", "--max-sessions", &(clients + 4).to_string()])
        .args(["serve", "--http", "127.0.0.1:0", "--token-file"])
        .arg(&token_file)
        .current_dir(&scratch.path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?)
        .kill_on_drop(true)
        .spawn()
        .context("start the server")?;
    let pid = child.id().context("the server's pid")?;
    let url = served_at(&log, &mut child).await?;
    let started = Instant::now();
    let runs = futures_join(tokens.iter().enumerate().map(|(i, (_, token))| {
        let url = url.clone();
        let token = token.clone();
        async move {
            let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(token);
            let client = ().serve(StreamableHttpClientTransport::from_config(config)).await?;
            let run = one_client(client.peer(), &format!("c{i}")).await;
            client.cancel().await.ok();
            run
        }
    }))
    .await?;
    let wall = started.elapsed();
    let peak = proc_status(pid, "VmHWM:")?;
    child.start_kill().ok();
    let mut echoes: Vec<Duration> =
        runs.iter().flat_map(|run| run.echoes.iter().copied()).collect();
    echoes.sort();
    let mut bigs: Vec<Duration> = runs.iter().map(|run| run.big).collect();
    bigs.sort();
    let label = format!("HTTP, {clients} client{}", if clients == 1 { "" } else { "s" });
    rows.push((format!("{label}: echo p50"), millis(percentile(&echoes, 50))));
    rows.push((format!("{label}: echo p99"), millis(percentile(&echoes, 99))));
    rows.push((format!("{label}: 10 MB output, median"), millis(percentile(&bigs, 50))));
    rows.push((format!("{label}: wall time ({} calls)", clients * (ECHO_CALLS + 1)), millis(wall)));
    rows.push((format!("{label}: server peak RSS (VmHWM)"), megabytes(peak)));
    rows.push((format!("{label}: replies lost or mixed up"), "0 (each checked)".to_owned()));
    Ok(())
}

/// Step 3: stdio's one client, the same work.
async fn stdio_client(scratch: &Scratch, rows: &mut Vec<(String, String)>) -> anyhow::Result<()> {
    let mut command = Command::new(server());
    command.args(["--no-rc", "--no-audit-log"]).current_dir(&scratch.path);
    let (transport, _stderr) =
        TokioChildProcess::builder(command).stderr(Stdio::null()).spawn().context("start")?;
    let pid = transport.id().context("the server's pid")?;
    let client: RunningService<RoleClient, ()> = ().serve(transport).await?;
    let run = one_client(client.peer(), "stdio").await?;
    let peak = proc_status(pid, "VmHWM:")?;
    client.cancel().await.ok();
    let mut echoes = run.echoes;
    echoes.sort();
    rows.push(("stdio, 1 client: echo p50".to_owned(), millis(percentile(&echoes, 50))));
    rows.push(("stdio, 1 client: echo p99".to_owned(), millis(percentile(&echoes, 99))));
    rows.push(("stdio, 1 client: 10 MB output".to_owned(), millis(run.big)));
    rows.push(("stdio, 1 client: server peak RSS (VmHWM)".to_owned(), megabytes(peak)));
    Ok(())
}

/// One client's work: [`ECHO_CALLS`] `echo`s of markers of its own, each
/// reply checked to be its own, then the big output.
async fn one_client(peer: &Peer<RoleClient>, marker: &str) -> anyhow::Result<ClientRun> {
    // The shell is up before timing starts.
    call(peer, json!({"command": "true"})).await?;
    let mut echoes = Vec::with_capacity(ECHO_CALLS);
    for n in 0..ECHO_CALLS {
        let expected = format!("{marker}-{n}\n");
        let start = Instant::now();
        let result = call(peer, json!({"command": format!("echo {marker}-{n}")})).await?;
        echoes.push(start.elapsed());
        let reply = structured(&result)?;
        ensure!(reply["output"] == expected.as_str(), "{marker} got another reply: {reply}");
    }
    let lines = BIG_OUTPUT / 10;
    let start = Instant::now();
    let result =
        call(peer, json!({"command": format!("yes {marker:.<9} | head -n {lines}")})).await?;
    let big = start.elapsed();
    let reply = structured(&result)?;
    ensure!(reply["exit_code"] == 0, "{marker}: the big output failed: {reply}");
    let output = reply["output"].as_str().unwrap_or_default();
    let own = format!("{marker:.<9}\n");
    ensure!(output.starts_with(&own), "{marker}: another's output: {:?}", output.get(..40));
    let saved = reply["truncated"] == true && reply.get("full_output_path").is_some();
    ensure!(saved, "{marker}: the big output was not cut and saved: {}", reply["status"]);
    Ok(ClientRun { echoes, big })
}

/// Runs every future at once, in order of their results; the first error
/// is returned.
async fn futures_join<T>(
    futures: impl Iterator<Item = impl std::future::Future<Output = anyhow::Result<T>> + Send + 'static>,
) -> anyhow::Result<Vec<T>>
where
    T: Send + 'static,
{
    let handles: Vec<_> = futures.map(tokio::spawn).collect();
    let mut results = Vec::with_capacity(handles.len());
    for handle in handles {
        results.push(handle.await.context("a client's task")??);
    }
    Ok(results)
}

/// Waits for the line in the server's log that says where it serves.
async fn served_at(log: &Path, child: &mut tokio::process::Child) -> anyhow::Result<String> {
    let started = Instant::now();
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(rest) = text.split("serving MCP on ").nth(1) {
            let url = rest.split_whitespace().next().unwrap_or_default();
            return Ok(url.trim_end_matches([',', '.', ';']).to_owned());
        }
        if let Some(status) = child.try_wait()? {
            bail!("the server exited ({status}) before serving:\n{text}");
        }
        ensure!(started.elapsed() < CALL_LIMIT, "the server never said where it serves:\n{text}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A private scratch directory, removed at the end.
struct Scratch {
    path: PathBuf,
}

impl Scratch {
    fn new() -> anyhow::Result<Scratch> {
        let path = std::env::temp_dir().join(format!("shellkeep-load-{}", std::process::id()));
        std::fs::create_dir_all(&path)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700))?;
        Ok(Scratch { path })
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Calls `terminal` with `arguments`, within [`CALL_LIMIT`].
async fn call(peer: &Peer<RoleClient>, arguments: Value) -> anyhow::Result<CallToolResult> {
    common::calls::terminal(peer, arguments, CALL_LIMIT).await
}
