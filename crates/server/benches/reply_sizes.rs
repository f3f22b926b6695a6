//! The reply-size benchmark: how many characters an agent reads for each
//! kind of reply, for a fixed script of calls to the real `shellkeep`
//! binary over stdio (as `benches/stdio.rs` drives it).
//!
//! Run it with `cargo bench -p shellkeep --bench reply_sizes`
//! (`SHELLKEEP_BENCH_SERVER=/path/to/shellkeep` measures another build). It
//! prints a Markdown table: per call, the characters of the reply's text
//! (its text blocks joined with a newline, as a client shows them), of that
//! the characters that are not the command's output (shellkeep's notices),
//! and the characters of the structured content (its JSON). The notice of a
//! running or waiting reply (the line that says how to poll) is held to the
//! budget of about 200 characters: the table says whether each met it.
//!
//! `SHELLKEEP_BENCH_SHOW=1` also prints each reply's text to stderr.
//!
//! `benches/reply_sizes/openhands_replies.py`, run by hand, prints
//! OpenHands' replies to the same calls; the README puts both side by
//! side. Reply sizes do not depend on the build profile: a debug binary
//! gives the same table.
//!
//! It is a benchmark, not a test: it exits non-zero only when the
//! measurement fails (the server does not start, a call errors where the
//! script expects none).
#![allow(clippy::disallowed_methods, reason = "the benchmark starts the server it measures")]

mod common;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use rmcp::RoleClient;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};
use tokio::process::Command;

/// The server under test, or [`SERVER_OVERRIDE`]'s.
const SERVER: &str = env!("CARGO_BIN_EXE_shellkeep");

/// An environment variable naming a `shellkeep` binary to measure instead.
const SERVER_OVERRIDE: &str = "SHELLKEEP_BENCH_SERVER";

/// The longest any call may take before the benchmark gives up.
const STEP_LIMIT: Duration = Duration::from_secs(60);

/// The budget of the notice of a running or waiting reply, in characters
/// ("about 200").
const NOTICE_BUDGET: usize = 220;

/// One call of the script.
struct Step {
    /// The kind of reply it gets.
    kind: &'static str,
    /// The tool.
    tool: &'static str,
    /// Its arguments.
    arguments: Value,
    /// Whether the reply is about a command still running or waiting for
    /// input: its notice is held to [`NOTICE_BUDGET`].
    budgeted: bool,
}

/// The script: the same calls, in the same order, as the OpenHands script.
fn script() -> Vec<Step> {
    let step = |kind, tool, arguments, budgeted| Step { kind, tool, arguments, budgeted };
    vec![
        step("completed", "terminal", json!({"command": "echo hi"}), false),
        step("running", "terminal", json!({"command": "sleep 30", "timeout": 1}), true),
        step("running, polled", "terminal", json!({"command": "", "timeout": 1}), true),
        step(
            "killed (C-c)",
            "terminal",
            json!({"command": "C-c", "is_input": true, "timeout": 10}),
            false,
        ),
        step(
            "waiting for input",
            "terminal",
            json!({"command": "read -p 'Your name: ' name; echo \"hi $name\"", "timeout": 2}),
            true,
        ),
        step("refused", "terminal", json!({"command": "ls"}), true),
        step(
            "answer",
            "terminal",
            json!({"command": "Bob", "is_input": true, "timeout": 10}),
            false,
        ),
        step(
            "cut (100,000 lines)",
            "terminal",
            json!({"command": "seq 1 100000", "timeout": 60}),
            false,
        ),
        step(
            "background start",
            "terminal",
            json!({"command": "sleep 60", "background": true}),
            false,
        ),
        step("`output` page", "output", json!({"offset": 50000, "limit": 20}), false),
    ]
}

/// What was measured of one reply.
struct Measured {
    kind: &'static str,
    text: usize,
    notices: usize,
    structured: usize,
    /// The running or waiting notice's length, for a budgeted reply.
    notice: Option<usize>,
}

fn main() -> ExitCode {
    common::main("reply_sizes", bench())
}

async fn bench() -> anyhow::Result<()> {
    // As long as the OpenHands script's directory (`mkdtemp`: 8 characters),
    // so that the working-directory lines compare.
    let scratch = std::env::temp_dir().join(format!("shellkeep-bench-{:08}", std::process::id()));
    std::fs::create_dir_all(&scratch).with_context(|| format!("create {}", scratch.display()))?;
    let result = measure(&scratch).await;
    let _ = std::fs::remove_dir_all(&scratch);
    print(&result?, &scratch);
    Ok(())
}

/// Runs the script against a fresh server in `scratch`.
async fn measure(scratch: &PathBuf) -> anyhow::Result<Vec<Measured>> {
    let server = std::env::var_os(SERVER_OVERRIDE).unwrap_or_else(|| SERVER.into());
    let mut command = Command::new(server);
    command
        .arg("--no-rc")
        .arg("--cwd")
        .arg(scratch)
        .current_dir(scratch)
        .env("XDG_CONFIG_HOME", scratch)
        .env("XDG_STATE_HOME", scratch)
        .env("SHELLKEEP_LOG", "warn");
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("SHELLKEEP_") && key != "SHELLKEEP_LOG" {
            command.env_remove(key);
        }
    }
    let (transport, _) = TokioChildProcess::builder(command)
        .stderr(std::process::Stdio::null())
        .spawn()
        .context("start the server")?;
    let client: RunningService<RoleClient, ()> =
        within(().serve(transport), "the MCP handshake").await?.context("MCP handshake")?;
    let mut measured = Vec::new();
    for step in script() {
        let result = call(&client, step.tool, &step.arguments).await?;
        let reply = measure_reply(&step, &result);
        if std::env::var_os("SHELLKEEP_BENCH_SHOW").is_some() {
            eprintln!("--- {}: {}\n{}", step.kind, step.arguments, reply.1);
        }
        measured.push(reply.0);
    }
    within(client.cancel(), "closing the connection").await?.context("close the connection")?;
    Ok(measured)
}

/// The sizes of one reply, and its text.
fn measure_reply(step: &Step, result: &CallToolResult) -> (Measured, String) {
    let blocks: Vec<&str> =
        result.content.iter().filter_map(|c| c.as_text()).map(|t| t.text.as_str()).collect();
    let text = blocks.join("\n");
    let structured = result.structured_content.clone().unwrap_or(Value::Null);
    let output_field = if step.tool == "output" { "lines" } else { "output" };
    let output = structured[output_field].as_str().unwrap_or("");
    let chars = |s: &str| s.chars().count();
    let notice = step.budgeted.then(|| {
        // The one line that says how to poll; a build without it: every
        // line that is not output.
        let notice = text.lines().find(|line| line.contains("send '' to wait"));
        notice.map_or(chars(&text) - chars(output), chars)
    });
    let measured = Measured {
        kind: step.kind,
        text: chars(&text),
        notices: chars(&text).saturating_sub(chars(output)),
        structured: serde_json::to_string(&structured).map_or(0, |json| chars(&json)),
        notice,
    };
    (measured, text)
}

/// Calls `tool` with `arguments`. A tool error is a reply too (a refused
/// command is one); only a failed call is an error.
async fn call(
    client: &RunningService<RoleClient, ()>,
    tool: &str,
    arguments: &Value,
) -> anyhow::Result<CallToolResult> {
    let Value::Object(arguments) = arguments.clone() else { bail!("arguments must be an object") };
    let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
    within(client.call_tool(params), "a call").await?.with_context(|| format!("{tool} call"))
}

/// Waits for `future`, giving up after [`STEP_LIMIT`].
async fn within<T>(future: impl Future<Output = T>, what: &str) -> anyhow::Result<T> {
    tokio::time::timeout(STEP_LIMIT, future)
        .await
        .map_err(|_| anyhow::anyhow!("{what} took longer than {STEP_LIMIT:?}"))
}

#[allow(clippy::print_stdout, reason = "a benchmark's report is its output")]
fn print(measured: &[Measured], scratch: &std::path::Path) {
    let server = std::env::var_os(SERVER_OVERRIDE).unwrap_or_else(|| SERVER.into());
    println!();
    println!("shellkeep reply-size benchmark");
    println!("server: {}", server.to_string_lossy());
    println!("terminal cwd: {} (--no-rc)", scratch.display());
    println!();
    println!("| reply | text | of it, not output | structured content | running/waiting notice |");
    println!("| --- | --- | --- | --- | --- |");
    for m in measured {
        let notice = match m.notice {
            Some(n) if n <= NOTICE_BUDGET => format!("{n} (budget {NOTICE_BUDGET}: met)"),
            Some(n) => format!("{n} (budget {NOTICE_BUDGET}: MISSED)"),
            None => String::new(),
        };
        println!("| {} | {} | {} | {} | {notice} |", m.kind, m.text, m.notices, m.structured);
    }
    let (text, structured): (usize, usize) =
        measured.iter().fold((0, 0), |(t, s), m| (t + m.text, s + m.structured));
    println!(
        "| all but the cut output | {} | | {} | |",
        text - cut(measured).0,
        structured - cut(measured).1
    );
}

/// The text and structured sizes of the cut reply, which dwarfs the rest.
fn cut(measured: &[Measured]) -> (usize, usize) {
    measured.iter().find(|m| m.kind.starts_with("cut")).map_or((0, 0), |m| (m.text, m.structured))
}
