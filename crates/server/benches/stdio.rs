//! The stdio benchmark: the release `shellkeep` binary driven by a real MCP
//! client, as an agent's host drives it.
//!
//! Run it with `cargo bench -p shellkeep --bench stdio`. It measures
//! 1. the round trip of `terminal` `echo hi` in a warm session, through
//!    `rmcp`'s client (p50 and p95 over [`TIMED_CALLS`] calls);
//! 2. the wall time of `seq 1 2000000` through the same client, and the
//!    server's peak resident memory (`VmHWM` in `/proc/<pid>/status`) right
//!    after it, with what the reply said about the cut output;
//! 3. the exact bytes of the JSON-RPC reply line to `echo hi`, from a raw
//!    JSON-lines exchange with no client library, in both protocol eras.
//!
//! It is a benchmark, not a test: it prints a table and says whether each
//! target was met or missed, and exits non-zero only when the measurement
//! itself fails (the server does not start, a call errors, a reply is not
//! what `echo hi` prints).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// The server under test: `cargo bench` builds it in the bench profile,
/// which inherits `release`.
const SERVER: &str = env!("CARGO_BIN_EXE_shellkeep");

/// Calls made before timing starts, so the shell is up and every cache warm.
const WARM_UP_CALLS: usize = 20;

/// Timed `echo hi` calls.
const TIMED_CALLS: usize = 300;

/// The large-output command.
const SEQ_COMMAND: &str = "seq 1 2000000";

/// The longest any single step may take before the benchmark gives up.
const STEP_LIMIT: Duration = Duration::from_secs(60);

/// Target: median `echo hi` round trip.
const TARGET_P50: Duration = Duration::from_millis(2);

/// Target: wall time of `seq 1 2000000`.
const TARGET_SEQ_TIME: Duration = Duration::from_millis(500);

/// Target: the server's peak resident memory, in bytes (50 MB).
const TARGET_PEAK_MEMORY: u64 = 50_000_000;

/// Target: bytes of the whole JSON-RPC reply to `echo hi` (issue 2).
const TARGET_REPLY_BYTES: usize = 400;

fn main() -> ExitCode {
    // `cargo bench` passes `--bench` (and any filter); there is nothing to
    // select, so the arguments are ignored.
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("stdio bench: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(bench()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("stdio bench failed: {err:#}");
            ExitCode::FAILURE
        }
    }
}

async fn bench() -> anyhow::Result<()> {
    let scratch = Scratch::new()?;
    let mut table = Table::default();

    let latency = echo_latency_and_seq(&scratch, &mut table).await;
    let wire = wire_bytes(&scratch, &mut table).await;
    // Print what was measured even when a later step failed.
    table.print(&scratch);
    latency?;
    wire?;
    Ok(())
}

/// Steps 1 and 2: `echo hi` latency and `seq 1 2000000`, through rmcp's
/// client over the child's stdio.
async fn echo_latency_and_seq(scratch: &Scratch, table: &mut Table) -> anyhow::Result<()> {
    let log = scratch.log("rmcp-client")?;
    let (transport, _) = TokioChildProcess::builder(server_command(scratch))
        .stderr(log)
        .spawn()
        .context("start the server")?;
    let pid = transport.id().context("the server has no pid")?;
    let client =
        within(().serve(transport), "the MCP handshake").await?.context("MCP handshake")?;

    for _ in 0..WARM_UP_CALLS {
        echo_hi(&client).await?;
    }
    let mut samples = Vec::with_capacity(TIMED_CALLS);
    for _ in 0..TIMED_CALLS {
        let start = Instant::now();
        echo_hi(&client).await?;
        samples.push(start.elapsed());
    }
    samples.sort();
    let p50 = percentile(&samples, 50);
    let p95 = percentile(&samples, 95);
    table.target(
        format!("echo hi round trip, p50 of {TIMED_CALLS}"),
        millis(p50),
        format!("<= {}", millis(TARGET_P50)),
        p50 <= TARGET_P50,
    );
    table.row("echo hi round trip, p95", millis(p95));
    table.row(
        "echo hi round trip, min / max",
        format!("{} / {}", millis(samples[0]), millis(samples[samples.len() - 1])),
    );
    let idle_peak = peak_memory(pid)?;
    table.row("server peak RSS before seq (VmHWM)", megabytes(idle_peak));

    let start = Instant::now();
    let result = call(&client, json!({"command": SEQ_COMMAND, "timeout": 60})).await?;
    let seq_time = start.elapsed();
    let peak = peak_memory(pid)?;
    let reply = structured(&result)?;
    ensure!(
        reply["status"] == "completed" && reply["exit_code"] == 0,
        "{SEQ_COMMAND} did not complete: {reply}"
    );
    table.target(
        format!("{SEQ_COMMAND}: wall time of the call"),
        format!("{:.3} s", seq_time.as_secs_f64()),
        format!("<= {:.1} s", TARGET_SEQ_TIME.as_secs_f64()),
        seq_time <= TARGET_SEQ_TIME,
    );
    table.target(
        format!("{SEQ_COMMAND}: server peak RSS (VmHWM)"),
        megabytes(peak),
        format!("< {}", megabytes(TARGET_PEAK_MEMORY)),
        peak < TARGET_PEAK_MEMORY,
    );
    let output_chars = reply["output"].as_str().map_or(0, |o| o.chars().count());
    table.row(
        format!("{SEQ_COMMAND}: reply"),
        format!(
            "truncated={}, {output_chars} chars shown, {} bytes of text content",
            reply["truncated"],
            result.content.iter().filter_map(|c| c.as_text()).map(|t| t.text.len()).sum::<usize>()
        ),
    );
    let full = match reply["full_output_path"].as_str() {
        Some(path) => match std::fs::metadata(path) {
            Ok(meta) => format!("{} bytes (seq prints {} bytes)", meta.len(), seq_output_bytes()),
            Err(err) => format!("{path}: {err}"),
        },
        None => "no full_output_path".to_owned(),
    };
    table.row(format!("{SEQ_COMMAND}: full output file"), full);

    within(client.cancel(), "closing the connection").await?.context("close the connection")?;
    Ok(())
}

/// One `echo hi` through the client; anything but `hi` is an error.
async fn echo_hi(client: &RunningService<rmcp::RoleClient, ()>) -> anyhow::Result<()> {
    let result = call(client, json!({"command": "echo hi"})).await?;
    let reply = structured(&result)?;
    ensure!(reply["output"] == "hi\n" && reply["exit_code"] == 0, "unexpected reply: {reply}");
    Ok(())
}

/// Calls `terminal` with `arguments`; a tool error is an error.
async fn call(
    client: &RunningService<rmcp::RoleClient, ()>,
    arguments: Value,
) -> anyhow::Result<CallToolResult> {
    let Value::Object(arguments) = arguments else { bail!("arguments must be an object") };
    let params = CallToolRequestParams::new("terminal").with_arguments(arguments);
    let result =
        within(client.call_tool(params), "a terminal call").await?.context("tools/call")?;
    ensure!(result.is_error != Some(true), "tool error: {result:?}");
    Ok(result)
}

/// The structured content of a reply, which must be an object.
fn structured(result: &CallToolResult) -> anyhow::Result<&Value> {
    result
        .structured_content
        .as_ref()
        .filter(|value| value.is_object())
        .context("the reply has no structured content")
}

/// Step 3: the reply line to `echo hi`, byte for byte, in both eras.
async fn wire_bytes(scratch: &Scratch, table: &mut Table) -> anyhow::Result<()> {
    for era in [Era::Legacy, Era::Modern] {
        let mut wire = Wire::start(scratch, era)?;
        let measured = wire.measure_echo_hi().await;
        wire.stop().await;
        let line = measured.with_context(|| format!("{} era", era.name()))?;
        let target_met = line.len() < TARGET_REPLY_BYTES;
        table.target(
            format!("echo hi reply on the wire, {} era", era.name()),
            format!("{} bytes", line.len()),
            format!("< {TARGET_REPLY_BYTES} bytes"),
            target_met,
        );
        table.wire_lines.push((era.name(), line));
    }
    Ok(())
}

/// A protocol era, as a client opens it.
#[derive(Clone, Copy)]
enum Era {
    /// `initialize` handshake, 2025-11-25.
    Legacy,
    /// No handshake; every request carries `_meta`, 2026-07-28.
    Modern,
}

impl Era {
    fn name(self) -> &'static str {
        match self {
            Era::Legacy => "2025-11-25",
            Era::Modern => "2026-07-28",
        }
    }

    /// The `_meta` a modern request must carry.
    fn meta() -> Value {
        json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "shellkeep-bench", "version": "0"},
        })
    }
}

/// A server spoken to in raw JSON lines.
struct Wire {
    era: Era,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Wire {
    fn start(scratch: &Scratch, era: Era) -> anyhow::Result<Wire> {
        let mut command = server_command(scratch);
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(scratch.log(&format!("wire-{}", era.name()))?)
            .kill_on_drop(true);
        let mut child = command.spawn().context("start the server")?;
        let stdin = child.stdin.take().context("piped stdin")?;
        let stdout = child.stdout.take().context("piped stdout")?;
        Ok(Wire { era, child, stdin: Some(stdin), lines: BufReader::new(stdout).lines() })
    }

    /// Opens the connection, runs `echo hi` twice (the first waits for the
    /// shell), and returns the second reply line without its newline.
    async fn measure_echo_hi(&mut self) -> anyhow::Result<String> {
        match self.era {
            Era::Legacy => {
                self.send(json!({
                    "jsonrpc": "2.0", "id": 1, "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-11-25",
                        "capabilities": {},
                        "clientInfo": {"name": "shellkeep-bench", "version": "0"},
                    },
                }))
                .await?;
                self.reply_to(1).await?;
                self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await?;
            }
            Era::Modern => {
                self.send(json!({
                    "jsonrpc": "2.0", "id": 1, "method": "server/discover",
                    "params": {"_meta": Era::meta()},
                }))
                .await?;
                self.reply_to(1).await?;
            }
        }
        let mut line = String::new();
        for id in [2, 3] {
            let mut params = json!({"name": "terminal", "arguments": {"command": "echo hi"}});
            if let Era::Modern = self.era {
                params["_meta"] = Era::meta();
            }
            self.send(
                json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}),
            )
            .await?;
            line = self.reply_to(id).await?;
            let reply: Value = serde_json::from_str(&line)?;
            ensure!(
                reply["result"]["structuredContent"]["output"] == "hi\n",
                "unexpected reply: {line}"
            );
        }
        Ok(line)
    }

    async fn send(&mut self, message: Value) -> anyhow::Result<()> {
        let stdin = self.stdin.as_mut().context("the connection is closed")?;
        let mut line = serde_json::to_vec(&message)?;
        line.push(b'\n');
        stdin.write_all(&line).await?;
        stdin.flush().await?;
        Ok(())
    }

    /// The reply line to request `id` (other lines, such as notifications,
    /// are skipped).
    async fn reply_to(&mut self, id: u64) -> anyhow::Result<String> {
        loop {
            let line = within(self.lines.next_line(), "a reply")
                .await??
                .context("the server closed stdout")?;
            let value: Value =
                serde_json::from_str(&line).with_context(|| format!("not a JSON line: {line}"))?;
            if value["id"] == id {
                ensure!(value.get("error").is_none(), "JSON-RPC error: {line}");
                return Ok(line);
            }
        }
    }

    /// Closes stdin (the end of the connection) and waits for the server to
    /// exit; if it does not, it is killed.
    async fn stop(&mut self) {
        drop(self.stdin.take());
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await.is_err() {
            let _ = self.child.kill().await;
        }
    }
}

/// The server command: no ~/.bashrc, started in the scratch directory,
/// with no policy or settings from the machine's environment.
fn server_command(scratch: &Scratch) -> Command {
    let mut command = Command::new(SERVER);
    command
        .arg("--no-rc")
        .arg("--cwd")
        .arg(&scratch.path)
        .current_dir(&scratch.path)
        .env("XDG_CONFIG_HOME", &scratch.path)
        .env("XDG_STATE_HOME", &scratch.path)
        .env("SHELLKEEP_LOG", "warn");
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("SHELLKEEP_") && key != "SHELLKEEP_LOG" {
            command.env_remove(key);
        }
    }
    command
}

/// Waits for `future`, giving up after [`STEP_LIMIT`].
async fn within<T>(future: impl Future<Output = T>, what: &str) -> anyhow::Result<T> {
    tokio::time::timeout(STEP_LIMIT, future)
        .await
        .map_err(|_| anyhow::anyhow!("{what} took longer than {STEP_LIMIT:?}"))
}

/// The server's peak resident set size so far, in bytes.
fn peak_memory(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("read /proc/{pid}/status"))?;
    let line = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .context("no VmHWM in /proc/<pid>/status")?;
    let kib: u64 = line.trim().trim_end_matches("kB").trim().parse().context("parse VmHWM")?;
    Ok(kib * 1024)
}

/// Bytes `seq 1 2000000` prints: each number and its newline.
fn seq_output_bytes() -> u64 {
    (1..=2_000_000u64).map(|n| n.to_string().len() as u64 + 1).sum()
}

/// The sample at `percent` of a sorted, non-empty slice (nearest rank).
fn percentile(sorted: &[Duration], percent: usize) -> Duration {
    let rank = (sorted.len() * percent).div_ceil(100).max(1);
    sorted[rank - 1]
}

fn millis(duration: Duration) -> String {
    format!("{:.3} ms", duration.as_secs_f64() * 1000.0)
}

fn megabytes(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

/// A scratch directory for the servers' working directory and logs,
/// removed when dropped.
struct Scratch {
    path: PathBuf,
}

impl Scratch {
    fn new() -> anyhow::Result<Scratch> {
        let path = std::env::temp_dir().join(format!("shellkeep-bench-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).with_context(|| format!("create {}", path.display()))?;
        Ok(Scratch { path })
    }

    /// A file for one server's stderr.
    fn log(&self, name: &str) -> anyhow::Result<File> {
        let path = self.path.join(format!("{name}.log"));
        File::create(&path).with_context(|| format!("create {}", path.display()))
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// The results, printed once at the end.
#[derive(Default)]
struct Table {
    rows: Vec<Row>,
    /// The measured reply lines, per era.
    wire_lines: Vec<(&'static str, String)>,
}

/// One measurement.
struct Row {
    metric: String,
    value: String,
    target: Option<Target>,
}

/// A target and whether the measurement met it.
struct Target {
    text: String,
    met: bool,
}

impl Table {
    /// A measurement with no target.
    fn row(&mut self, metric: impl Into<String>, value: String) {
        self.rows.push(Row { metric: metric.into(), value, target: None });
    }

    /// A measurement checked against a target.
    fn target(&mut self, metric: impl Into<String>, value: String, text: String, met: bool) {
        self.rows.push(Row { metric: metric.into(), value, target: Some(Target { text, met }) });
    }

    #[allow(clippy::print_stdout, reason = "a benchmark's report is its output")]
    fn print(&self, scratch: &Scratch) {
        println!();
        println!("shellkeep stdio benchmark");
        println!("server: {SERVER}");
        println!("terminal cwd: {} (--no-rc)", scratch.path().display());
        println!();
        let width = self.rows.iter().map(|row| row.metric.len()).max().unwrap_or(0);
        let value_width = self
            .rows
            .iter()
            .filter(|row| row.target.is_some())
            .map(|row| row.value.len())
            .max()
            .unwrap_or(0);
        for Row { metric, value, target } in &self.rows {
            match target {
                Some(Target { text, met }) => println!(
                    "{metric:<width$}  {value:<value_width$}  target {text}: {}",
                    if *met { "met" } else { "MISSED" }
                ),
                None => println!("{metric:<width$}  {value}"),
            }
        }
        for (era, line) in &self.wire_lines {
            println!();
            println!("echo hi reply line, {era} era ({} bytes + newline):", line.len());
            println!("{line}");
        }
    }
}
