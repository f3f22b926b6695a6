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
//! budget of about 200 characters, and every reply, in either form, to the
//! reply budget of 40,000 characters: the table says whether each met them.
//! The script covers every reply kind of `docs/replies.md`, each as large
//! as the default settings let it be where that matters (escape-heavy
//! output, `run` with both streams full).
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

/// The most characters a reply may take in either form at the default
/// settings (Claude Code replaces a result over about 50,000 with a file
/// path and a 2 KB preview).
const REPLY_BUDGET: usize = 40_000;

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

/// The script: the same calls, in the same order, as the OpenHands script
/// (the first ten), then every other reply kind of `docs/replies.md`,
/// among them the largest each can be at the default settings.
fn script() -> Vec<Step> {
    let step = |kind, tool, arguments, budgeted| Step { kind, tool, arguments, budgeted };
    // Quotes, backslashes and tabs: two characters each in JSON.
    let escapes = r#"for i in $(seq 20000); do printf '"\\\t"%s\n' $i; done"#;
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
        step("waiting, no prompt", "terminal", json!({"command": "cat", "timeout": 2}), true),
        step("C-d", "terminal", json!({"command": "C-d", "is_input": true, "timeout": 10}), false),
        step("cut, escapes", "terminal", json!({"command": escapes, "timeout": 60}), false),
        step(
            "`output` page, escapes (at most)",
            "output",
            json!({"offset": 0, "limit": 5000}),
            false,
        ),
        step("sessions", "sessions", json!({}), false),
        step("session_close", "session_close", json!({"session": "job-1"}), false),
        step("run", "run", json!({"command": "echo out; echo err >&2"}), false),
        step(
            "run, both streams cut",
            "run",
            json!({"command": "seq 1 25000; seq 1 25000 >&2"}),
            false,
        ),
        step(
            "run, escapes on both",
            "run",
            json!({"command": format!("{escapes}; {{ {escapes}; }} >&2")}),
            false,
        ),
        step("run, timeout", "run", json!({"command": "sleep 5", "timeout_sec": 1}), false),
        step("policy_explain", "policy_explain", json!({"command": "cargo build"}), false),
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
    let fields: &[&str] = match step.tool {
        "output" => &["lines"],
        "run" => &["stdout", "stderr"],
        "session_close" => &["last_output"],
        _ => &["output", "previous_output", "background_output"],
    };
    let output: String = fields.iter().filter_map(|field| structured[*field].as_str()).collect();
    let output = output.as_str();
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
    println!(
        "| reply | text | of it, not output | structured content | running/waiting notice | \
         within {REPLY_BUDGET} |"
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    for m in measured {
        let notice = match m.notice {
            Some(n) if n <= NOTICE_BUDGET => format!("{n} (budget {NOTICE_BUDGET}: met)"),
            Some(n) => format!("{n} (budget {NOTICE_BUDGET}: MISSED)"),
            None => String::new(),
        };
        let within = if m.text.max(m.structured) <= REPLY_BUDGET { "yes" } else { "NO" };
        println!(
            "| {} | {} | {} | {} | {notice} | {within} |",
            m.kind, m.text, m.notices, m.structured
        );
    }
    // The OpenHands script's calls but its cut output, as the README
    // compares them.
    let openhands = &measured[..measured.len().min(10)];
    let (text, structured): (usize, usize) = openhands
        .iter()
        .filter(|m| !m.kind.starts_with("cut"))
        .fold((0, 0), |(t, s), m| (t + m.text, s + m.structured));
    println!("| the first ten but the cut output | {text} | | {structured} | | |");
}
