//! The `shellkeep` binary: the MCP server on stdio (its main job), plus a
//! small command line for people and scripts (`run`, `policy check`,
//! `policy explain`, `doctor`, `audit`, `ls` and `attach` to watch or
//! help the agent's sessions, and `replay` to play one's recording).
//!
//! It parses (`cli`), checks (`config`) and wires (`serve`); it words no
//! reply (`render` does). It holds that stdout belongs to the MCP
//! transport while serving: everything else is logged with `tracing` to
//! stderr, masked with the server's secrets.

// Layers, lowest first: a module uses only modules of layers below its
// own, never one beside or above it (`tests/tidy.rs` finds any circle).
//  1. `render`, `cli`: the words, and the command line as written; they
//     use no other module (the facts `render` words that no lower module
//     owns are defined beside their words).
//  2. `args`, `auth`, `logging`, `schema`, `wire`, `verify`: checked
//     arguments, HTTP tokens, the masked log, schemas, the JSON-RPC edge,
//     the timing check (use `render`).
//  3. `config` (uses `args`, `auth`, `cli`).
//  4. `audit` (uses `config`, `cli`).
//  5. `tasks` (uses `args`, `audit`).
//  6. `tools`: the MCP tools, on top of all the above.
//  7. `attach`, `http`: what serves `tools` to people and over HTTP.
//  8. `serve`: a serving server's life.
// This file stands over them all, and nothing below uses it: the start-up
// steps are `serve`'s, the log is `logging`'s.
mod args;
mod attach;
mod audit;
mod auth;
mod cli;
mod config;
mod http;
mod logging;
mod render;
mod schema;
mod serve;
mod tasks;
mod tools;
mod verify;
mod wire;

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Parser;
use shellkeep_engine::shell_command_line;
use shellkeep_engine::{CgroupMode, CgroupRequested};
use shellkeep_engine::{
    Enforcement, SandboxMode, SandboxPolicy, check_sandbox, set_private_tmp_base,
};
use shellkeep_engine::{ExplicitTimeout, Policy};
use shellkeep_engine::{GuardOptions, serve_guard};
use shellkeep_engine::{RunRequest, RunStatus, run_oneshot};
use shellkeep_engine::{check_private_dir, euid};
use shellkeep_engine::{
    end_containment, guard_channel_from_stdin, init_containment, landlock_abi,
    reap_adopted_orphans, seccomp_status, sweep_dead_servers,
};
use shellkeep_engine::{read_cast, replay_delay};
use tokio_util::sync::CancellationToken;

use crate::cli::{Cli, Command, PolicyAction, ServeArgs};
use crate::config::ServerConfig;

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    if let Some(Command::Guard { runtime_dir }) = &cli.command {
        // No runtime: the guard only waits. Its log lines go to the
        // server's stderr. Its stdin is its channel from the server.
        logging::init_logging();
        let options = GuardOptions { runtime_dir: runtime_dir.clone() };
        let served = guard_channel_from_stdin().and_then(|channel| serve_guard(channel, &options));
        return match served {
            Ok(_) => std::process::ExitCode::SUCCESS,
            Err(err) => {
                tracing::error!("the orphan guard cannot run: {err}");
                std::process::ExitCode::FAILURE
            }
        };
    }
    logging::init_logging();
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if cli.serve.http.http.is_none() {
        // One client over stdio: a call is a chain of short steps that wake
        // one another, and a second worker thread only adds thread switches
        // (about 20 a call, measured, against 3 with one). HTTP
        // serves clients that call at once: a worker per core.
        builder.worker_threads(1);
    }
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            tracing::error!("cannot start the async runtime: {err}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(dispatch(cli));
    // The stdio transport reads stdin on a blocking thread that only ends
    // when stdin closes; after a signal it may never close, so do not wait
    // for it. Everything we started has been stopped by now.
    runtime.shutdown_background();
    match result {
        Ok(code) => code,
        Err(err) => {
            let _ = writeln!(std::io::stderr(), "shellkeep: {err:#}");
            std::process::ExitCode::from(2)
        }
    }
}

/// Runs the subcommand `cli` names (serving MCP when it names none).
async fn dispatch(cli: Cli) -> anyhow::Result<std::process::ExitCode> {
    match cli.command {
        None | Some(Command::Serve) => serve_mcp(&cli.serve).await,
        Some(Command::Run { timeout, cwd, command }) => {
            run_once(&cli.serve, timeout, cwd, command).await
        }
        Some(Command::Policy { action }) => policy_command(&cli.serve, action),
        Some(Command::Replay { file, speed, idle_limit }) => {
            // Its pauses are real sleeps: off the runtime's threads.
            tokio::task::spawn_blocking(move || replay(&file, speed, idle_limit)).await?
        }
        Some(Command::Doctor) => doctor(&cli.serve).await,
        Some(Command::Ls) => {
            let mut out = Vec::new();
            attach::ls(&mut out).await?;
            std::io::stdout().lock().write_all(&out)?;
            Ok(std::process::ExitCode::SUCCESS)
        }
        Some(Command::Attach { session, server, socket, write, since, show_secrets }) => {
            let options =
                attach::AttachOptions { session, server, socket, write, since, show_secrets };
            attach::attach(options).await?;
            Ok(std::process::ExitCode::SUCCESS)
        }
        Some(Command::Audit(query)) => {
            audit::print(&query, &mut std::io::stdout().lock())?;
            Ok(std::process::ExitCode::SUCCESS)
        }
        Some(Command::VerifyTimeouts { output }) => verify_timeouts(&cli.serve, &output).await,
        Some(Command::Guard { .. }) => unreachable!("handled before the runtime starts"),
    }
}

/// Serves MCP (on stdio, or over HTTP when asked) until the client
/// leaves or a stop signal comes, then stops everything it started.
async fn serve_mcp(args: &ServeArgs) -> anyhow::Result<std::process::ExitCode> {
    // Every flag is checked before anything starts.
    let env: Vec<_> = std::env::vars_os().collect();
    let config = ServerConfig::from_args(args, &env)?;
    for notice in &config.secrets.notices {
        let _ = writeln!(std::io::stderr(), "shellkeep: {notice}");
    }
    // The log and the audit log mask what every reply masks.
    let _ = logging::LOG_MASKS.set(Arc::clone(&config.masks));
    let masks = Arc::clone(&config.masks);
    let mask: audit::Mask = Arc::new(move |text: &str| render::mask(&masks, text));
    let audit = audit::AuditLog::open(&args.audit, mask)?;
    // The HTTP socket is bound before anything starts: an address in
    // use stops start-up before any shell runs.
    let http = match &config.http {
        Some(http) => Some((http.clone(), http::bind(http).await?)),
        None => None,
    };
    let running = serve::Running::start(args.policy.as_deref(), config, audit).await?;
    let Some((http, listening)) = http else {
        serve::serve_stdio(&running).await?;
        running.stop().await;
        return Ok(std::process::ExitCode::SUCCESS);
    };
    // The listener closes first; every session is stopped (calls in
    // flight end and are answered); then the last responses go out.
    let served = serve::serve_http(&running, &http, listening).await;
    running.stop().await;
    served?.finish().await;
    Ok(std::process::ExitCode::SUCCESS)
}

/// `shellkeep verify-timeouts`: runs the four timeout tests and writes
/// their document to `output`.
async fn verify_timeouts(
    args: &ServeArgs,
    output: &std::path::Path,
) -> anyhow::Result<std::process::ExitCode> {
    // Its directory is made first (`docs/` of a fresh checkout), so
    // that a path that cannot be written fails before the tests run,
    // naming the path.
    if let Some(dir) = output.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| {
            let full = std::path::absolute(dir).unwrap_or_else(|_| dir.to_owned());
            format!("cannot create the directory {} for the document", full.display())
        })?;
    }
    let loaded = serve::load_policy(args.policy.as_deref())?;
    let dir = serve::RuntimeDir::create()?;
    let passed = verify::run(&loaded.policy, output, &dir.path).await?;
    let _ = writeln!(
        std::io::stdout(),
        "{}: {}",
        output.display(),
        if passed { "all four tests passed" } else { "some tests FAILED" }
    );
    Ok(if passed { std::process::ExitCode::SUCCESS } else { std::process::ExitCode::FAILURE })
}

/// `shellkeep replay`: writes a recording's output to stdout with its
/// timing (each pause capped at `idle_limit` seconds, else at the
/// recording's own limit, and divided by `speed`). Markers, input and size
/// changes are not played.
fn replay(
    file: &std::path::Path,
    speed: f64,
    idle_limit: Option<f64>,
) -> anyhow::Result<std::process::ExitCode> {
    anyhow::ensure!(
        speed.is_finite() && speed > 0.0 && speed <= 1000.0,
        "--speed must be a number more than 0 and at most 1000, got {speed}"
    );
    let idle_limit = idle_limit
        .map(|secs| args::seconds("--idle-limit", secs).map_err(anyhow::Error::msg))
        .transpose()?
        .map(|limit| limit.as_secs_f64());
    let opened = std::fs::File::open(file)
        .with_context(|| format!("cannot open the recording {}", file.display()))?;
    let (header, mut events) = read_cast(std::io::BufReader::new(opened))
        .map_err(|err| anyhow::anyhow!("{}: {err}", file.display()))?;
    let idle_limit = idle_limit.or(header.idle_time_limit);
    let mut stdout = std::io::stdout().lock();
    let mut previous = 0.0;
    while let Some(event) =
        events.next_event().map_err(|err| anyhow::anyhow!("{}: {err}", file.display()))?
    {
        if event.code != "o" {
            continue;
        }
        std::thread::sleep(replay_delay(previous, event.time, idle_limit, speed));
        previous = event.time;
        stdout.write_all(event.data.as_bytes())?;
        stdout.flush()?;
    }
    Ok(std::process::ExitCode::SUCCESS)
}

async fn run_once(
    args: &ServeArgs,
    timeout: Option<f64>,
    cwd: Option<PathBuf>,
    command: Vec<String>,
) -> anyhow::Result<std::process::ExitCode> {
    let explicit = cli_timeout(timeout)?;
    let grace = config::grace(args)?;
    // As the server: a sandbox the kernel cannot enforce runs nothing.
    let sandbox = config::sandbox_policy(args)?;
    let enforcement = config::enforcement(&sandbox)?;
    let loaded = serve::load_policy(args.policy.as_deref())?;
    let command = cli_command(command);
    let decision = loaded.policy.decide(&command, explicit);
    let _containment = serve::start_containment(config::containment(args)?)?;
    // As in `serve`: orphans stay our children, so the markers sweep finds
    // them even with a cleared environment.
    let reaper = tokio::spawn(async { reap_adopted_orphans(|_| {}).await });
    let dir = serve::RuntimeDir::create()?;
    set_private_tmp_base(dir.path.clone());
    let request_cwd = cwd.clone();
    let (_, category_limits) = loaded.policy.resources_for(&command);
    let request = RunRequest {
        cwd,
        grace,
        stream_cap: usize::MAX / 4,
        sandbox: sandbox.clone(),
        resources: config::resources(args)?.with_category(&category_limits),
        ..RunRequest::new(command, decision.limits, &dir.path, "run")
    };
    let outcome = run_oneshot(request, CancellationToken::new()).await;
    reaper.abort();
    let (_, structured) = render::run(&outcome, &decision);
    let mut value = serde_json::to_value(&structured)?;
    // As a `run` reply says: what the sandbox enforced, and what it most
    // likely refused.
    if let serde_json::Value::Object(map) = &mut value {
        tools::insert_sandbox(map, enforcement.as_ref());
        let output = format!("{}\n{}", outcome.stderr.text, outcome.stdout.text);
        let cwd = request_cwd.or_else(|| std::env::current_dir().ok());
        let failed = outcome.exit_code() != 0;
        if let Some(denial) = tools::denial_of(&sandbox, failed, &output, cwd.as_deref()) {
            let (line, field) = render::sandbox::denial(&denial, &sandbox);
            render::insert_before_body(map, "sandbox_denial", serde_json::to_value(field)?);
            render::push_note(map, line);
        }
    }
    let json = serde_json::to_string_pretty(&value)?;
    drop(dir);
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{json}")?;
    let code = match outcome.status() {
        RunStatus::Success => outcome.exit_code(),
        RunStatus::Timeout => 124,
        RunStatus::Error => 125,
    };
    Ok(std::process::ExitCode::from(code.clamp(0, 255) as u8))
}

/// The command of `run` and `policy explain`: one argument is a shell
/// command line as it is (`'make test | tail'`); several are a command and
/// its arguments, each passed as it is (`touch 'a b'` makes one file),
/// quoted into the line the policy and bash see.
fn cli_command(mut words: Vec<String>) -> String {
    if words.len() == 1 { words.remove(0) } else { shell_command_line(&words) }
}

/// `--timeout` of `run` and `policy explain`, under the rule every timeout
/// follows (see [`args::seconds`]), in the CLI's own words.
fn cli_timeout(timeout: Option<f64>) -> anyhow::Result<Option<ExplicitTimeout>> {
    timeout
        .map(|secs| args::explicit_timeout("--timeout", secs))
        .transpose()
        .map_err(anyhow::Error::msg)
}

/// `doctor`'s lines about the resource limits: each limit, its value and
/// what applies it on this host (found with the containment in use).
fn limits_lines(args: &ServeArgs) -> Vec<String> {
    use shellkeep_engine::{Bound, Mechanism, Resource, limit_mechanism, nproc_exempt};
    let asked = match config::resources(args) {
        Ok(asked) => asked,
        Err(err) => return vec![format!("resource limits: {err}")],
    };
    let mut lines = vec![
        "resource limits (each session's shell with everything it starts, and \
                          each run command):"
            .to_owned(),
    ];
    let size = |bytes: u64| format!("{} MiB", bytes >> 20);
    for (resource, bound) in [
        (Resource::Memory, asked.memory),
        (Resource::Tasks, asked.tasks),
        (Resource::Cpu, asked.cpu.map_or(Bound::None, |cpu| Bound::Set((cpu * 100.0) as u64))),
    ] {
        let value = match (resource, bound.value()) {
            (_, None) => "none".to_owned(),
            (Resource::Memory, Some(bytes)) => size(bytes),
            (Resource::Tasks, Some(tasks)) => format!("{tasks} tasks"),
            (Resource::Cpu, Some(_)) => format!("{} CPUs", asked.cpu.unwrap_or_default()),
        };
        let origin = if matches!(bound, Bound::Default(_)) { " (default)" } else { "" };
        let set = matches!(bound, Bound::Set(_));
        let (mechanism, why) = limit_mechanism(resource, set);
        let how = match mechanism {
            _ if bound == Bound::None => String::new(),
            Mechanism::Cgroup2 => {
                " through the cgroup2 controller of each owner's group".to_owned()
            }
            Mechanism::Cgroup1 => " through the cgroup v1 controller, a group per owner".to_owned(),
            Mechanism::Rlimit if resource == Resource::Memory => {
                " through RLIMIT_AS: each process's address space, not the session's total"
                    .to_owned()
            }
            Mechanism::Rlimit if nproc_exempt() => {
                " NOT applied: RLIMIT_NPROC does not apply to root or CAP_SYS_RESOURCE".to_owned()
            }
            Mechanism::Rlimit => " through RLIMIT_NPROC: it counts every process and thread of \
                                  your user on this host, not only the session's"
                .to_owned(),
            Mechanism::Unenforced if set || resource == Resource::Cpu => {
                " NOT applied: no control group can (only a control group limits CPU)".to_owned()
            }
            Mechanism::Unenforced => " NOT applied: a default is applied through control \
                                       groups only (set it with its flag for a resource limit \
                                       of the process)"
                .to_owned(),
        };
        lines.push(format!("  {}: {value}{origin}{how}", resource.as_str()));
        if let Some(why) = why.filter(|_| bound != Bound::None) {
            lines.push(format!("    no control group: {why}"));
        }
    }
    lines.push(format!(
        "  nice: {} (every shell and run command starts at this CPU priority; the server keeps \
         its own)",
        asked.nice
    ));
    lines
}

/// `shellkeep doctor`: what protects this host's sessions, one fact per
/// line, each with what it means. Never fails for what it finds.
async fn doctor(args: &ServeArgs) -> anyhow::Result<std::process::ExitCode> {
    let mut lines =
        vec![format!("shellkeep {} doctor (uid {})", env!("CARGO_PKG_VERSION"), euid())];
    let mode = doctor_containment(args, &mut lines);
    // What the flags ask of the sandbox, and what the kernel enforces of it.
    let asked = config::sandbox_policy(args).map_err(|err| err.0);
    let check = asked.as_ref().ok().filter(|policy| policy.is_confined()).map(check_sandbox);
    let filtered = matches!(&check, Some(Ok(enforcement)) if enforcement.filter);
    lines.push(doctor_memory(&check));
    let tiocsti = legacy_tiocsti_line(std::fs::read_to_string(LEGACY_TIOCSTI).ok().as_deref());
    lines.push(if filtered && !tiocsti.starts_with("legacy TIOCSTI: off") {
        format!("{tiocsti}; with this sandbox its filter denies TIOCSTI to every command")
    } else {
        tiocsti
    });
    lines.push(match landlock_abi() {
        Ok(abi) => format!("landlock: ABI {abi} (available)"),
        Err(err) => format!("landlock: not available ({err})"),
    });
    lines.push(format!("seccomp: {}", seccomp_status()));
    lines.extend(doctor_sandbox_modes(&asked, check.as_ref()));
    lines.push(doctor_runtime_dir());
    let env: Vec<_> = std::env::vars_os().collect();
    lines.push(http::doctor_line(config::http(args, &env).map_err(|err| err.0)));
    lines.push(doctor_full_output_dir(args));
    // As every start does: what servers that are gone left running.
    lines.push(match tokio::task::spawn_blocking(sweep_dead_servers).await.unwrap_or(0) {
        0 => "processes left by servers that are gone: none".to_owned(),
        found => format!("processes left by servers that are gone: {found}, stopped now"),
    });
    lines.push(doctor_signals(mode, filtered));
    let mut out = String::new();
    for line in lines {
        out.push_str(&line);
        out.push('\n');
    }
    std::io::stdout().lock().write_all(out.as_bytes())?;
    Ok(std::process::ExitCode::SUCCESS)
}

/// `doctor`'s lines on containment (and, where it works, the resource
/// limits), pushed to `lines`: the mode it found, if any. Containment is
/// ended again before it returns.
fn doctor_containment(args: &ServeArgs, lines: &mut Vec<String>) -> Option<CgroupMode> {
    let requested = args.containment.parse::<CgroupRequested>();
    let mut mode = None;
    match requested.as_ref().map_err(Clone::clone).and_then(|r| init_containment(*r)) {
        Ok(active) => {
            mode = Some(active.mode);
            let what = match active.mode {
                CgroupMode::Cgroup2 | CgroupMode::Cgroup1 => format!(
                    "every session and run command in a control group of its own under {}; \
                     stopping one kills everything in its group",
                    active.dir.as_deref().and_then(|d| d.parent()).map_or_else(
                        || "?".to_owned(),
                        |parent| parent.join("shellkeep-<pid>-<random>").display().to_string()
                    ),
                ),
                CgroupMode::Markers => "no control groups: scope markers in the \
                                          environment, process groups, sessions and ancestry"
                    .to_owned(),
            };
            lines.push(format!("containment: {} ({what})", active.mode.as_str()));
            for why in &active.unavailable {
                lines.push(format!("  not used: {why}"));
            }
            if requested == Ok(CgroupRequested::Auto) && active.unavailable.is_empty() {
                lines.push("  this is the best mode shellkeep has".to_owned());
            }
        }
        Err(err) => lines.push(format!("containment: not available as asked ({err})")),
    }
    if mode.is_some() {
        lines.extend(limits_lines(args));
    }
    end_containment();
    mode
}

/// `doctor`'s line on whether a process of the same user can read another's
/// memory, and what the sandbox `check` found does about it.
fn doctor_memory(check: &Option<Result<Enforcement, String>>) -> String {
    let memory = match std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope") {
        Ok(scope) => {
            let scope = scope.trim().to_owned();
            let meaning = match scope.as_str() {
                "0" => "yes: a process of your user can read another's memory",
                "1" => "only their own descendants: a command can read its children, not the shell",
                "2" => "no: only administrators can",
                _ => "no: nobody can",
            };
            format!("same-user memory access: Yama ptrace_scope {scope} ({meaning})")
        }
        Err(_) => "same-user memory access: yes (no Yama LSM: a process of your user can read \
                   another's memory through /proc/PID/mem and ptrace)"
            .to_owned(),
    };
    // Landlock keeps a sandboxed process from tracing, or reading the
    // memory of, any process outside its domain.
    let domain = matches!(check, Some(Ok(e)) if e.filesystem || e.tcp || e.signals);
    if domain {
        format!(
            "{memory}; with this sandbox Landlock denies commands the memory and tracing of every \
             process outside it"
        )
    } else {
        memory
    }
}

/// `doctor`'s lines on the sandbox: what is asked (`asked`, checked as
/// `check`), and what each mode would get on this kernel (best effort, so
/// that what is missing is listed, not an error).
fn doctor_sandbox_modes(
    asked: &Result<SandboxPolicy, String>,
    check: Option<&Result<Enforcement, String>>,
) -> Vec<String> {
    let workspace = asked.as_ref().map_or_else(|_| Vec::new(), |policy| policy.writable.clone());
    let modes: Vec<(SandboxPolicy, Result<Enforcement, String>)> =
        [SandboxMode::WorkspaceWrite, SandboxMode::ReadOnly]
            .into_iter()
            .map(|mode| {
                let policy = SandboxPolicy {
                    mode,
                    writable: workspace.clone(),
                    network: false,
                    best_effort: true,
                };
                let result = check_sandbox(&policy);
                (policy, result)
            })
            .collect();
    render::sandbox::doctor(asked, check, &modes)
}

/// `doctor`'s line on the private runtime directory.
fn doctor_runtime_dir() -> String {
    match serve::RuntimeDir::create() {
        Ok(dir) => format!(
            "runtime directory: {} (private: ok)",
            dir.path.parent().map_or_else(|| dir.path.clone(), Into::into).display()
        ),
        Err(err) => format!("runtime directory: FAILS ({err:#})"),
    }
}

/// `doctor`'s line on the directory full outputs are saved in.
fn doctor_full_output_dir(args: &ServeArgs) -> String {
    let wanted = args.full_output_dir.clone().or_else(serve::default_full_output_dir);
    match wanted {
        Some(dir) if !dir.is_absolute() => {
            format!("full-output directory: {} FAILS (not an absolute path)", dir.display())
        }
        Some(dir) if !dir.exists() => {
            format!(
                "full-output directory: {} (does not exist yet; made private at first use)",
                dir.display()
            )
        }
        Some(dir) => match check_private_dir(&dir) {
            Ok(()) => format!("full-output directory: {} (private: ok)", dir.display()),
            Err(err) => format!(
                "full-output directory: {} FAILS ({err}); full outputs would go to the runtime \
                 directory and be removed when the server ends",
                dir.display()
            ),
        },
        None => "full-output directory: none (no $XDG_STATE_HOME or $HOME); full outputs go to \
                 the runtime directory"
            .to_owned(),
    }
}

/// `doctor`'s line on what no process of the same user can be kept from
/// doing (under containment `mode`, with or without the sandbox's signal
/// filter).
fn doctor_signals(mode: Option<CgroupMode>, filtered: bool) -> String {
    let left = match mode {
        Some(CgroupMode::Markers) | None => {
            "what still carries its marker (a process that also cleared its environment or \
             turned non-dumpable survives)"
        }
        Some(_) => {
            "what is still in its control groups or carries its marker (where a command may \
             leave its group, a process that also hid its marker survives)"
        }
    };
    if filtered {
        "same-user signals: the sandbox's filter denies commands every signal to the server \
         and its orphan guard"
            .to_owned()
    } else {
        format!(
            "same-user signals: a command can stop or kill the server and its orphan guard \
             together (SIGSTOP and SIGKILL cannot be refused); the next start of shellkeep, or \
             doctor, then ends {left}"
        )
    }
}

/// The kernel's switch for legacy `TIOCSTI` (Linux 6.2 and later).
const LEGACY_TIOCSTI: &str = "/proc/sys/dev/tty/legacy_tiocsti";

/// `doctor`'s line on legacy `TIOCSTI`, from the content of
/// [`LEGACY_TIOCSTI`] (`None`: the file is absent). Where it is allowed, any
/// process with the terminal open (a command's `&` job) can push a line into
/// the idle shell's input, which bash then runs at its prompt: shellkeep
/// notices it and re-asserts its functions, but cannot stop it.
fn legacy_tiocsti_line(content: Option<&str>) -> String {
    const WAY_IN: &str = "a command can push a line into the shell's input, which the shell \
                          runs at its prompt (shellkeep marks the session tampered when it \
                          sees one, but cannot stop it)";
    match content.map(str::trim) {
        Some("0") => "legacy TIOCSTI: off (dev.tty.legacy_tiocsti = 0: a command cannot push \
                      input into the shell)"
            .to_owned(),
        Some("1") => format!(
            "legacy TIOCSTI: ON (dev.tty.legacy_tiocsti = 1: {WAY_IN}); turn it off with \
             `sysctl dev.tty.legacy_tiocsti=0` (as root)"
        ),
        Some(other) => format!(
            "legacy TIOCSTI: unknown (dev.tty.legacy_tiocsti = {other:?}; 0 is off, 1 is on: \
             {WAY_IN})"
        ),
        None => format!(
            "legacy TIOCSTI: probably ON (no {LEGACY_TIOCSTI}: this kernel predates the switch \
             of Linux 6.2 and allows it unless built without CONFIG_LEGACY_TIOCSTI: {WAY_IN}); \
             a kernel of 6.2 or later with `sysctl dev.tty.legacy_tiocsti=0` turns it off"
        ),
    }
}

fn policy_command(
    args: &ServeArgs,
    action: PolicyAction,
) -> anyhow::Result<std::process::ExitCode> {
    let mut stdout = std::io::stdout().lock();
    match action {
        PolicyAction::Check { file } => {
            let (policy, origin) = match file {
                Some(path) => (Policy::from_file(&path)?, path.display().to_string()),
                None => {
                    let loaded = serve::load_policy(args.policy.as_deref())?;
                    (loaded.policy, loaded.origin)
                }
            };
            writeln!(stdout, "{origin}: valid")?;
            for category in policy.categories() {
                let default =
                    if category.name == policy.default_category().name { " (default)" } else { "" };
                let patterns = policy.patterns().filter(|p| p.category == category.name).count();
                let resources = &category.resources;
                let run_limits: Vec<String> = [
                    resources.memory_mib.map(|mib| format!("memory {mib} MiB")),
                    resources.tasks.map(|tasks| format!("tasks {tasks}")),
                    resources.cpu.map(|cpu| format!("cpu {cpu}")),
                ]
                .into_iter()
                .flatten()
                .collect();
                let run_limits = if run_limits.is_empty() {
                    String::new()
                } else {
                    format!(", run limits: {}", run_limits.join(", "))
                };
                writeln!(
                    stdout,
                    "  {}{default}: exec {} s, no output {} s, {patterns} patterns{run_limits}",
                    category.name,
                    category.limits.exec.as_secs_f64(),
                    category.limits.no_output.as_secs_f64(),
                )?;
            }
        }
        PolicyAction::Explain { timeout, command } => {
            let explicit = cli_timeout(timeout)?;
            let loaded = serve::load_policy(args.policy.as_deref())?;
            let command = cli_command(command);
            let explanation = loaded.policy.explain(&command, explicit);
            let (mut text, mut output) =
                render::explain(&command, &explanation, &loaded.origin, &str::to_owned);
            let (category, limits) = loaded.policy.resources_for(&command);
            render::add_run_limits(&mut text, &mut output, &category.name, &limits);
            writeln!(stdout, "{text}")?;
        }
    }
    Ok(std::process::ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::legacy_tiocsti_line;

    /// Each state of the kernel's switch has its own words; only where it is
    /// on (or may be) does the line say how to turn it off.
    #[test]
    fn legacy_tiocsti_line_says_each_state_of_the_switch() {
        let off = legacy_tiocsti_line(Some("0\n"));
        assert!(off.starts_with("legacy TIOCSTI: off"), "{off}");
        assert!(!off.contains("sysctl"), "{off}");
        let on = legacy_tiocsti_line(Some("1\n"));
        assert!(on.starts_with("legacy TIOCSTI: ON"), "{on}");
        assert!(on.contains("`sysctl dev.tty.legacy_tiocsti=0`"), "{on}");
        let absent = legacy_tiocsti_line(None);
        assert!(absent.starts_with("legacy TIOCSTI: probably ON"), "{absent}");
        assert!(absent.contains("CONFIG_LEGACY_TIOCSTI"), "{absent}");
        let odd = legacy_tiocsti_line(Some("7"));
        assert!(odd.starts_with("legacy TIOCSTI: unknown"), "{odd}");
        assert!(odd.contains("\"7\""), "{odd}");
    }
}
