//! The soak benchmark: 10,000 `terminal` commands in one session, through
//! the release `shellkeep` binary and rmcp's client over stdio, watching
//! the server for leaks.
//!
//! Run it with `cargo bench -p shellkeep --bench soak`. After a warm-up it
//! samples the server's resident memory (`VmRSS`) and its open file
//! descriptors (`/proc/<pid>/fd`) every [`SAMPLE_EVERY`] commands, and
//! prints the first and last samples with the peak (`VmHWM`). Memory and
//! descriptors must be flat: the target is less than [`RSS_GROWTH_LIMIT`]
//! of growth and not one descriptor more at the end than at the start.
//!
//! The commands rotate through the kinds a session sees: plain output, a
//! failing command, a directory change, a few hundred lines, a pipeline,
//! and a command with no output. Each reply is checked, so a wrong answer
//! fails the run. Like the stdio benchmark it prints a table, and exits
//! non-zero only when the measurement itself fails.
#![allow(clippy::disallowed_methods, reason = "the benchmark starts the server it measures")]

mod common;

use std::fs::File;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};
use tokio::process::Command;

use common::measure::proc_status;

/// The server under test, built in the bench profile (inherits `release`).
const SERVER: &str = env!("CARGO_BIN_EXE_shellkeep");

/// Commands in the soak.
const COMMANDS: usize = 10_000;

/// Commands before the first sample: the shell is up, caches are warm.
const WARM_UP: usize = 200;

/// Commands between two samples.
const SAMPLE_EVERY: usize = 1_000;

/// Target: resident memory may grow by less than this over the soak.
const RSS_GROWTH_LIMIT: u64 = 2_000_000;

/// The longest one call may take before the benchmark gives up.
const CALL_LIMIT: Duration = Duration::from_secs(60);

/// A command and what its reply must say.
struct Case {
    command: &'static str,
    output: &'static str,
    exit_code: i64,
}

/// The rotation. `seq 1 300 | tail -1` and friends keep each call short.
const CASES: &[Case] = &[
    Case { command: "echo hi", output: "hi\n", exit_code: 0 },
    Case { command: "false", output: "", exit_code: 1 },
    Case { command: "cd /tmp && cd - >/dev/null", output: "", exit_code: 0 },
    Case { command: "seq 1 300 | wc -l", output: "300\n", exit_code: 0 },
    Case { command: "printf 'a\\tb\\n' | cut -f2", output: "b\n", exit_code: 0 },
    Case { command: "x=$((6*7)); echo $x", output: "42\n", exit_code: 0 },
];

fn main() -> ExitCode {
    common::main("soak", soak())
}

/// One look at the server.
struct Sample {
    commands: usize,
    elapsed: Duration,
    rss: u64,
    fds: usize,
}

async fn soak() -> anyhow::Result<()> {
    let scratch = std::env::temp_dir().join(format!("shellkeep-soak-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).with_context(|| format!("create {}", scratch.display()))?;
    let result = run(&scratch).await;
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

async fn run(scratch: &Path) -> anyhow::Result<()> {
    let log = File::create(scratch.join("server.log")).context("create the server log")?;
    let (transport, _) =
        TokioChildProcess::builder(server_command(scratch)).stderr(log).spawn().context("start")?;
    let pid = transport.id().context("the server has no pid")?;
    let client = tokio::time::timeout(CALL_LIMIT, ().serve(transport))
        .await
        .context("the MCP handshake took too long")?
        .context("MCP handshake")?;

    let started = Instant::now();
    let mut samples = Vec::new();
    for n in 0..COMMANDS {
        if n >= WARM_UP && (n - WARM_UP).is_multiple_of(SAMPLE_EVERY) {
            samples.push(sample(pid, n, started.elapsed())?);
        }
        let case = &CASES[n % CASES.len()];
        let reply = call(&client, case.command).await?;
        ensure!(
            reply["output"] == case.output && reply["exit_code"] == case.exit_code,
            "command {n}, {:?}: unexpected reply {reply}",
            case.command
        );
    }
    samples.push(sample(pid, COMMANDS, started.elapsed())?);
    let peak = proc_status(pid, "VmHWM:")?;
    let _ = tokio::time::timeout(CALL_LIMIT, client.cancel()).await;

    report(&samples, peak);
    Ok(())
}

/// Calls `terminal` with `command`; returns the structured content.
async fn call(
    client: &RunningService<rmcp::RoleClient, ()>,
    command: &str,
) -> anyhow::Result<Value> {
    let Value::Object(arguments) = json!({"command": command}) else { bail!("not an object") };
    let params = CallToolRequestParams::new("terminal").with_arguments(arguments);
    let result: CallToolResult = tokio::time::timeout(CALL_LIMIT, client.call_tool(params))
        .await
        .with_context(|| format!("{command:?} took longer than {CALL_LIMIT:?}"))?
        .context("tools/call")?;
    ensure!(result.is_error != Some(true), "tool error: {result:?}");
    result.structured_content.context("the reply has no structured content")
}

fn sample(pid: u32, commands: usize, elapsed: Duration) -> anyhow::Result<Sample> {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .with_context(|| format!("list /proc/{pid}/fd"))?
        .count();
    Ok(Sample { commands, elapsed, rss: proc_status(pid, "VmRSS:")?, fds })
}

/// The server command: no ~/.bashrc, no settings from the environment.
fn server_command(scratch: &Path) -> Command {
    let mut command = Command::new(SERVER);
    command
        .arg("--no-rc")
        .arg("--cwd")
        .arg(scratch)
        .current_dir(scratch)
        .env("XDG_CONFIG_HOME", scratch)
        .env("SHELLKEEP_LOG", "warn");
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("SHELLKEEP_") && key != "SHELLKEEP_LOG" {
            command.env_remove(key);
        }
    }
    command
}

#[allow(clippy::print_stdout, reason = "a benchmark's report is its output")]
fn report(samples: &[Sample], peak: u64) {
    let (Some(first), Some(last)) = (samples.first(), samples.last()) else { return };
    println!();
    println!("shellkeep soak benchmark: {COMMANDS} terminal commands in one session");
    println!("server: {SERVER}");
    println!();
    println!("{:>8}  {:>9}  {:>9}  {:>4}", "commands", "elapsed", "VmRSS", "fds");
    for s in samples {
        println!(
            "{:>8}  {:>7.1} s  {:>6.1} MB  {:>4}",
            s.commands,
            s.elapsed.as_secs_f64(),
            s.rss as f64 / 1e6,
            s.fds
        );
    }
    let per_call = (last.elapsed - first.elapsed) / (last.commands - first.commands).max(1) as u32;
    let growth = last.rss.saturating_sub(first.rss);
    println!();
    println!("mean call after warm-up: {:.3} ms", per_call.as_secs_f64() * 1000.0);
    println!("peak RSS (VmHWM): {:.1} MB", peak as f64 / 1e6);
    println!(
        "RSS growth: {:.2} MB, target < {:.1} MB: {}",
        growth as f64 / 1e6,
        RSS_GROWTH_LIMIT as f64 / 1e6,
        if growth < RSS_GROWTH_LIMIT { "met" } else { "MISSED" }
    );
    println!(
        "open descriptors: {} -> {}, target no growth: {}",
        first.fds,
        last.fds,
        if last.fds <= first.fds { "met" } else { "MISSED" }
    );
}
