//! The server's configuration, checked: the raw flags of `cli::ServeArgs`
//! become a [`ServerConfig`] of `Duration`s, limits and caps before anything
//! starts. Each bad flag is one error that names the flag and the range it
//! takes (`--max-wait must be a positive number of seconds, at most 86400
//! (1 day), got 0`); a value out of range is refused, never clamped.
//!
//! The conversion is a function of the flags and of the environment it is
//! given; it reads two files, the secrets file (`shellkeep_engine::load_secrets`) and the
//! HTTP token file (`auth::Tokens::read_file`), resolves
//! the `--writable` directories, and asks the kernel what it can enforce of
//! the sandbox (`check_sandbox`: a sandbox it cannot enforce is a flag
//! error, never a silent start without it). It does not read the policy
//! file or start anything (`main` does, with the result).

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use shellkeep_engine::CgroupRequested;
use shellkeep_engine::Guard;
use shellkeep_engine::RegistryLimits;
use shellkeep_engine::Secrets;
use shellkeep_engine::SessionConfig;
use shellkeep_engine::StoreLimits;
use shellkeep_engine::{Bound, MAX_CPU, MAX_NICE, MIN_CPU, MIN_MEMORY, MIN_TASKS, ResourceLimits};
use shellkeep_engine::{DEFAULT_IDLE_LIMIT, RecordSettings};
use shellkeep_engine::{Enforcement, SandboxMode as Mode, SandboxPolicy, check_sandbox};
use shellkeep_engine::{Found, Sources};
use shellkeep_engine::{Retention, SpillLimits, SpillStore};

use crate::args;
use crate::auth::Tokens;
use crate::cli::ServeArgs;

/// The fewest characters a reply may show before its middle is cut: less
/// leaves no room for a head, a tail and the line saying what was cut.
pub(crate) const MIN_OUTPUT_CAP: usize = 100;
/// The most characters a reply may show before its middle is cut.
pub(crate) const MAX_OUTPUT_CAP: usize = 100_000_000;
/// The largest size flag, in MiB (1 TiB).
pub(crate) const MAX_MIB: u64 = 1 << 20;
/// The longest `--full-output-keep-days`: 100 years.
pub(crate) const MAX_KEEP_DAYS: f64 = 36_500.0;
/// The longest `--session-idle-expiry`: 365 days.
pub(crate) const MAX_IDLE_EXPIRY: Duration = shellkeep_engine::MAX_TIMEOUT;

/// Everything the server runs with, checked. Built once from the flags by
/// [`ServerConfig::from_args`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ServerConfig {
    /// Where the terminal starts (`--cwd`); `None`: the server's own
    /// working directory.
    pub cwd: Option<PathBuf>,
    /// Silence after which a terminal call hands control back.
    pub no_output_return: Duration,
    /// The longest a terminal call without `timeout` waits.
    pub max_wait: Duration,
    /// Characters of output one reply shows, all its outputs together
    /// (`run`: stdout and stderr), counted as JSON writes them.
    pub output_cap: usize,
    /// The terminal's size: columns (`--columns`) and rows (`--rows`).
    pub columns: u16,
    /// See `columns`.
    pub rows: u16,
    /// Time between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// The terminal's shell.
    pub shell: PathBuf,
    /// Whether the terminal sources `~/.bashrc`.
    pub source_rc: bool,
    /// The session limit and idle expiry.
    pub sessions: RegistryLimits,
    /// What each session keeps for the `output` tool.
    pub output_keep: StoreLimits,
    /// Where full outputs go (`--full-output-dir`); `None`: the default
    /// state directory.
    pub full_output_dir: Option<PathBuf>,
    /// How much full output one command and one server may save.
    pub full_output_limits: SpillLimits,
    /// When full-output files are deleted.
    pub retention: Retention,
    /// How sessions are recorded (`--record`); `None`: they are not.
    pub record: Option<RecordSettings>,
    /// The containment mode asked for.
    pub containment: CgroupRequested,
    /// The sandbox every session and `run` command gets unless it asks
    /// for a stricter one (`--sandbox`, `--writable`, `--network`,
    /// `--sandbox-best-effort`).
    pub sandbox: SandboxPolicy,
    /// What the kernel enforces of `sandbox` on this host
    /// (`check_sandbox`); `None` when nothing is confined.
    pub enforcement: Option<Enforcement>,
    /// What each session and `run` command may take, and its `nice` value
    /// (`--memory-max`, `--tasks-max`, `--cpu-max`, `--nice`).
    pub resources: ResourceLimits,
    /// The secrets: every value to mask (`masked()`), the secrets file's
    /// values to export into every shell and `run` command (`exported()`),
    /// whether credential shapes are masked, and the notices about
    /// variables skipped. Its `Debug` shows no value.
    pub secrets: Found,
    /// What every session and `run` masks: the secrets' values and, when
    /// on, the credential shapes (built once); the HTTP tokens among them.
    pub masks: Arc<Secrets>,
    /// The Streamable HTTP transport (`--http`); `None`: MCP on stdio.
    pub http: Option<HttpConfig>,
}

/// The Streamable HTTP transport, checked: where it binds, who may call it
/// and from which origins and hosts.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HttpConfig {
    /// The address to bind (`--http`); port 0 picks a free one.
    pub addr: SocketAddr,
    /// The tokens (`$SHELLKEEP_TOKEN`, `--token-file`); `None`: one is
    /// generated at start.
    pub tokens: Option<Tokens>,
    /// Origins allowed beside the bound loopback ones (`--allowed-origin`).
    pub allowed_origins: Vec<String>,
    /// Hosts allowed beside the bound loopback names (`--allowed-host`).
    pub allowed_hosts: Vec<String>,
}

/// A flag whose value cannot be used: the message names the flag and the
/// values it takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FlagError(pub String);

impl std::fmt::Display for FlagError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FlagError {}

impl ServerConfig {
    /// Checks every flag and converts it; the first bad one is the error
    /// (the flags are checked in the order of the steps below, and of the
    /// fields after them). `env` is the server's environment, where
    /// secrets are looked for.
    pub(crate) fn from_args(
        args: &ServeArgs,
        env: &[(OsString, OsString)],
    ) -> Result<ServerConfig, FlagError> {
        let output_cap = output_cap(args)?;
        let (columns, rows) = terminal(args)?;
        check_counts(args)?;
        let found = load_secrets(args, env)?;
        let policy = sandbox_policy(args)?;
        let http = http(args, env)?;
        let masked = masked_values(&found, http.as_ref());
        Ok(ServerConfig {
            cwd: args.cwd.clone(),
            no_output_return: seconds("--no-output-return", args.no_output_return)?,
            max_wait: seconds("--max-wait", args.max_wait)?,
            output_cap,
            columns,
            rows,
            grace: grace(args)?,
            shell: args.shell.clone(),
            source_rc: !args.no_rc,
            sessions: registry_limits(args)?,
            output_keep: StoreLimits {
                max_commands: args.output_keep_commands,
                max_bytes: mib("--output-keep-mib", args.output_keep_mib)?,
            },
            full_output_dir: args.full_output_dir.clone(),
            full_output_limits: SpillLimits {
                per_command: mib("--full-output-max-mib", args.full_output_max_mib)?,
                per_server: mib("--full-output-server-max-mib", args.full_output_server_max_mib)?,
            },
            retention: Retention {
                max_age: days("--full-output-keep-days", args.full_output_keep_days)?,
                max_total: mib("--full-output-keep-mib", args.full_output_keep_mib)?,
            },
            record: record_settings(args)?,
            containment: containment(args)?,
            sandbox: policy.clone(),
            enforcement: enforcement(&policy)?,
            resources: resources(args)?,
            masks: Arc::new(Secrets::new(masked, found.shapes)),
            secrets: found,
            http,
        })
    }

    /// The configuration every session starts from: this server's limits,
    /// with `spill` for cut outputs and `guard` for orphans. The registry
    /// gives each session its own name and directory.
    pub(crate) fn session_template(
        &self,
        cwd: PathBuf,
        work_dir: PathBuf,
        spill: Arc<SpillStore>,
        guard: Option<Arc<Guard>>,
    ) -> SessionConfig {
        let mut config = SessionConfig::new("default", cwd, work_dir, PathBuf::new());
        config.spill = spill;
        config.no_output_return = self.no_output_return;
        config.max_wait = self.max_wait;
        config.output_cap = self.output_cap;
        config.cols = self.columns;
        config.rows = self.rows;
        config.grace = self.grace;
        config.shell = self.shell.clone();
        config.guard = guard;
        config.output_limits = self.output_keep;
        // Through the environment only: never a file we write, never a
        // command line.
        config.env = self.secrets.exported();
        config.secrets = Arc::clone(&self.masks);
        // Each session's own request, if any, replaces it (only tighter).
        config.sandbox = self.sandbox.clone();
        config.resources = self.resources;
        if !self.source_rc {
            config.user_rc = None;
        }
        config
    }
}

/// `--output-cap`, checked.
fn output_cap(args: &ServeArgs) -> Result<usize, FlagError> {
    let output_cap = args.output_cap;
    if !(MIN_OUTPUT_CAP..=MAX_OUTPUT_CAP).contains(&output_cap) {
        return Err(FlagError(format!(
            "--output-cap must be a number of characters from {MIN_OUTPUT_CAP} to \
             {MAX_OUTPUT_CAP}, got {output_cap}"
        )));
    }
    Ok(output_cap)
}

/// `--columns` and `--rows`, checked each and together (the renderer's
/// memory grows with the cells).
fn terminal(args: &ServeArgs) -> Result<(u16, u16), FlagError> {
    let columns = terminal_size("--columns", args.columns, 20)?;
    let rows = terminal_size("--rows", args.rows, 5)?;
    if u32::from(columns) * u32::from(rows) > MAX_CELLS {
        return Err(FlagError(format!(
            "--columns times --rows must be at most {MAX_CELLS} cells (the renderer's memory \
             grows with them), got {columns} x {rows}"
        )));
    }
    Ok((columns, rows))
}

/// `--max-sessions` and `--output-keep-commands`: at least 1 each.
fn check_counts(args: &ServeArgs) -> Result<(), FlagError> {
    if args.max_sessions < 1 {
        return Err(FlagError(format!(
            "--max-sessions must be at least 1, got {}",
            args.max_sessions
        )));
    }
    if args.output_keep_commands < 1 {
        return Err(FlagError(format!(
            "--output-keep-commands must be at least 1, got {}",
            args.output_keep_commands
        )));
    }
    Ok(())
}

/// The secrets the flags name (and the defaults, unless turned off),
/// looked for in `env` and the secrets file.
fn load_secrets(args: &ServeArgs, env: &[(OsString, OsString)]) -> Result<Found, FlagError> {
    shellkeep_engine::load_secrets(
        &Sources {
            names: args.secrets.clone(),
            names_from: "--secret or SHELLKEEP_SECRETS".to_owned(),
            file: args.secrets_file.clone(),
            defaults: !args.no_default_secrets,
        },
        env,
    )
    .map_err(|err| FlagError(err.0))
}

/// What is masked: the secrets `found`, and every HTTP token (even with
/// the default secrets off).
fn masked_values(found: &Found, http: Option<&HttpConfig>) -> Vec<(String, String)> {
    let tokens = http.iter().flat_map(|http| http.tokens.iter()).flat_map(|tokens| {
        tokens.entries().iter().map(|(name, token)| (format!("token:{name}"), token.clone()))
    });
    found.masked().into_iter().chain(tokens).collect()
}

/// The session registry's limits: `--max-sessions`,
/// `--session-idle-expiry` and `--job-keep-secs`.
fn registry_limits(args: &ServeArgs) -> Result<RegistryLimits, FlagError> {
    Ok(RegistryLimits {
        max_sessions: args.max_sessions,
        idle_expiry: args::seconds_up_to(
            "--session-idle-expiry",
            args.session_idle_expiry,
            MAX_IDLE_EXPIRY,
        )
        .map_err(FlagError)?,
        job_keep: args::seconds_up_to("--job-keep-secs", args.job_keep_secs, MAX_IDLE_EXPIRY)
            .map_err(FlagError)?,
        // Each principal's client asks for them (`tools::Clients`).
        unguessable_jobs: false,
    })
}

/// `--http` and its flags, checked (`None` without `--http`): the address
/// parsed, the tokens read ([`Tokens`]), each allowed origin and host
/// parsed. A non-loopback address needs `--allow-remote` and a configured
/// token; the other flags need `--http`.
pub(crate) fn http(
    args: &ServeArgs,
    env: &[(OsString, OsString)],
) -> Result<Option<HttpConfig>, FlagError> {
    let flags = &args.http;
    let Some(addr) = &flags.http else {
        let stray = [
            (flags.token_file.is_some(), "--token-file"),
            (!flags.allowed_origins.is_empty(), "--allowed-origin"),
            (!flags.allowed_hosts.is_empty(), "--allowed-host"),
            (flags.allow_remote, "--allow-remote"),
        ];
        return match stray.iter().find(|(given, _)| *given) {
            Some((_, flag)) => Err(FlagError(format!(
                "{flag} is a flag of the HTTP transport: add --http ADDR (such as \
                 127.0.0.1:8765) to serve over HTTP"
            ))),
            None => Ok(None),
        };
    };
    let addr: SocketAddr = addr.trim().parse().map_err(|_| {
        FlagError(format!(
            "--http must be an IP address and a port, such as 127.0.0.1:8765 or [::1]:8765, \
             got {}",
            crate::render::echo(addr)
        ))
    })?;
    let from_env = env.iter().find(|(name, _)| name == "SHELLKEEP_TOKEN").map(|(_, value)| value);
    let tokens = match (&flags.token_file, from_env) {
        (Some(file), _) => Some(Tokens::read_file(file).map_err(FlagError)?),
        (None, Some(value)) => {
            let value = value.to_str().ok_or_else(|| {
                FlagError("$SHELLKEEP_TOKEN must be visible ASCII characters".to_owned())
            })?;
            Some(Tokens::single(value, "$SHELLKEEP_TOKEN").map_err(FlagError)?)
        }
        (None, None) => None,
    };
    if !addr.ip().is_loopback() {
        if !flags.allow_remote {
            return Err(FlagError(format!(
                "--http {addr} is not a loopback address: whoever can reach it could drive a \
                 shell here. Add --allow-remote to serve it (with a token in $SHELLKEEP_TOKEN \
                 or --token-file, and TLS at a reverse proxy), or bind 127.0.0.1"
            )));
        }
        if tokens.is_none() {
            return Err(FlagError(format!(
                "--http {addr} with --allow-remote needs a token you chose: set \
                 $SHELLKEEP_TOKEN or --token-file (a generated token lives in a file on this \
                 machine only, and changes at every start)"
            )));
        }
    }
    let allowed_origins: Vec<String> = flags
        .allowed_origins
        .iter()
        .map(|origin| allowed_origin(origin))
        .collect::<Result<_, _>>()?;
    for host in &flags.allowed_hosts {
        if http::uri::Authority::try_from(host.trim()).is_err() || host.contains('@') {
            return Err(FlagError(format!(
                "--allowed-host must be a host name or address, with a port or not \
                 (example.com, example.com:443, [::1]:8765), got {}",
                crate::render::echo(host)
            )));
        }
    }
    Ok(Some(HttpConfig {
        addr,
        tokens,
        allowed_origins,
        allowed_hosts: flags.allowed_hosts.iter().map(|h| h.trim().to_owned()).collect(),
    }))
}

/// An `--allowed-origin`, checked and made exact: `null`, or a scheme, a
/// host and maybe a port (`:*` for any), nothing more (an origin has no
/// path). Without a port, an `http` or `https` origin gets its scheme's
/// own (80, 443), so that it allows that origin only; another scheme needs
/// a port.
fn allowed_origin(origin: &str) -> Result<String, FlagError> {
    let origin = origin.trim();
    let bad = || {
        FlagError(format!(
            "--allowed-origin must be an origin: a scheme, a host and a port if not the \
             scheme's own (https://app.example.com, http://localhost:3000, \
             http://localhost:* for any port) or null, got {}",
            crate::render::echo(origin)
        ))
    };
    if origin == "null" {
        return Ok(origin.to_owned());
    }
    let any_port = origin.strip_suffix(":*");
    let uri: http::Uri = any_port.unwrap_or(origin).parse().map_err(|_| bad())?;
    let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) else {
        return Err(bad());
    };
    let plain = !authority.as_str().contains('@')
        && uri.path_and_query().is_none_or(|p| p.as_str().is_empty() || p.as_str() == "/")
        && !origin.ends_with('/');
    if !plain || (any_port.is_some() && authority.port().is_some()) {
        return Err(bad());
    }
    if any_port.is_some() || authority.port().is_some() {
        return Ok(origin.to_owned());
    }
    match scheme {
        "http" => Ok(format!("{origin}:80")),
        "https" => Ok(format!("{origin}:443")),
        _ => Err(bad()),
    }
}

/// `--record` and its limits: the directory made absolute (from the
/// server's working directory), the cap per recording, the server's total
/// (also the size the directory's recordings are pruned to) and their age.
fn record_settings(args: &ServeArgs) -> Result<Option<RecordSettings>, FlagError> {
    let Some(dir) = &args.record else { return Ok(None) };
    let dir = std::path::absolute(dir)
        .map_err(|err| FlagError(format!("--record {}: {err}", dir.display())))?;
    let total = mib("--record-keep-mib", args.record_keep_mib)?;
    Ok(Some(RecordSettings {
        dir,
        limits: SpillLimits {
            per_command: mib("--record-max-mib", args.record_max_mib)?,
            per_server: total,
        },
        retention: Retention {
            max_age: days("--record-keep-days", args.record_keep_days)?,
            max_total: total,
        },
        idle_limit: DEFAULT_IDLE_LIMIT,
    }))
}

/// `--sandbox`, `--writable`, `--network` and `--sandbox-best-effort` as
/// the engine's policy, which `shellkeep run` uses as well. Each writable
/// directory is resolved (from the server's working directory, symbolic
/// links followed) and must be an existing directory; without any, the
/// start directory (`--cwd`, else the working directory) is the workspace.
/// This only reads the flags and the file system: what the kernel can
/// enforce is [`enforcement`]'s question.
pub(crate) fn sandbox_policy(args: &ServeArgs) -> Result<SandboxPolicy, FlagError> {
    let mode: Mode =
        args.sandbox.parse().map_err(|err: String| FlagError(format!("--sandbox: {err}")))?;
    let network = match args.network.as_str() {
        "on" => true,
        "off" => false,
        other => {
            return Err(FlagError(format!(
                "--network must be on or off, got {}",
                crate::render::echo(other)
            )));
        }
    };
    let start = || match &args.cwd {
        Some(dir) => (dir.clone(), "--cwd"),
        None => (PathBuf::from("."), "the working directory (the default of --writable)"),
    };
    let wanted: Vec<(PathBuf, &str)> = if args.writable.is_empty() {
        vec![start()]
    } else {
        args.writable.iter().map(|dir| (dir.clone(), "--writable")).collect()
    };
    if wanted.len() > MAX_WRITABLE {
        return Err(FlagError(format!(
            "--writable names {} directories; at most {MAX_WRITABLE} are allowed",
            wanted.len()
        )));
    }
    let mut writable = Vec::with_capacity(wanted.len());
    for (dir, flag) in wanted {
        let resolved = std::fs::canonicalize(&dir).map_err(|err| {
            FlagError(format!("{flag} {}: {err}; name an existing directory", dir.display()))
        })?;
        if !resolved.is_dir() {
            return Err(FlagError(format!(
                "{flag} {}: {} is not a directory",
                dir.display(),
                resolved.display()
            )));
        }
        if !writable.contains(&resolved) {
            writable.push(resolved);
        }
    }
    Ok(SandboxPolicy { mode, writable, network, best_effort: args.sandbox_best_effort })
}

/// What the kernel enforces of `policy` here (`None`: it confines
/// nothing); a mode it cannot enforce, without `--sandbox-best-effort`, is
/// the error that stops start-up, naming what is missing and what to do.
pub(crate) fn enforcement(policy: &SandboxPolicy) -> Result<Option<Enforcement>, FlagError> {
    if !policy.is_confined() {
        return Ok(None);
    }
    check_sandbox(policy).map(Some).map_err(FlagError)
}

/// The most `--writable` directories: each is a Landlock rule of every
/// shell and `run` command, and a line of every tool description.
pub(crate) const MAX_WRITABLE: usize = 64;

/// `--grace`, which `shellkeep run` uses as well.
pub(crate) fn grace(args: &ServeArgs) -> Result<Duration, FlagError> {
    seconds("--grace", args.grace)
}

/// `--containment`, which every subcommand that starts processes uses.
pub(crate) fn containment(args: &ServeArgs) -> Result<CgroupRequested, FlagError> {
    args.containment.parse().map_err(|err: String| FlagError(format!("--containment: {err}")))
}

/// A flag in seconds: positive, at most a day (the rule tool timeouts
/// follow too).
fn seconds(flag: &str, value: f64) -> Result<Duration, FlagError> {
    args::seconds(flag, value).map_err(FlagError)
}

/// The most cells the terminal may have (`--columns` times `--rows`): the
/// renderer's memory is bounded by its window, under 6 MB at this size.
const MAX_CELLS: u32 = 10_000;

/// A terminal size flag: from `min` to 1000.
fn terminal_size(flag: &str, value: u32, min: u32) -> Result<u16, FlagError> {
    match u16::try_from(value) {
        Ok(size) if (min..=1000).contains(&value) => Ok(size),
        _ => Err(FlagError(format!("{flag} must be a number from {min} to 1000, got {value}"))),
    }
}

/// A flag in MiB, as bytes.
fn mib(flag: &str, value: u64) -> Result<u64, FlagError> {
    if value > MAX_MIB {
        return Err(FlagError(format!(
            "{flag} must be a number of MiB from 0 to {MAX_MIB} (1 TiB), got {value}"
        )));
    }
    Ok(value << 20)
}

/// A flag in days, 0 included.
fn days(flag: &str, value: f64) -> Result<Duration, FlagError> {
    if !(value.is_finite() && (0.0..=MAX_KEEP_DAYS).contains(&value)) {
        return Err(FlagError(format!(
            "{flag} must be a number of days from 0 to {MAX_KEEP_DAYS}, got {value}"
        )));
    }
    Ok(Duration::from_secs_f64(value * 86_400.0))
}

/// The directory shellkeep keeps its state in when no flag names one:
/// `$XDG_STATE_HOME/shellkeep`, else `~/.local/state/shellkeep` (only
/// absolute paths count); `None` when neither is set.
pub(crate) fn state_dir() -> Option<PathBuf> {
    let absolute =
        |var: &str| std::env::var_os(var).map(PathBuf::from).filter(|path| path.is_absolute());
    let state = absolute("XDG_STATE_HOME")
        .or_else(|| absolute("HOME").map(|home| home.join(".local/state")))?;
    Some(state.join("shellkeep"))
}

/// `--memory-max`, `--tasks-max`, `--cpu-max` and `--nice`, checked: a
/// flag not given keeps its default ([`ResourceLimits::default`]), `none`
/// (or `0`) lifts a limit.
pub(crate) fn resources(args: &ServeArgs) -> Result<ResourceLimits, FlagError> {
    let mut limits = ResourceLimits::default();
    if let Some(text) = &args.memory_max {
        let min = MIN_MEMORY >> 20;
        limits.memory = match whole("--memory-max", text, min, MAX_MIB, "MiB")? {
            Some(mib) => Bound::Set(mib << 20),
            None => Bound::None,
        };
    }
    if let Some(text) = &args.tasks_max {
        limits.tasks = match whole("--tasks-max", text, MIN_TASKS, 1 << 22, "tasks")? {
            Some(tasks) => Bound::Set(tasks),
            None => Bound::None,
        };
    }
    if let Some(text) = &args.cpu_max {
        limits.cpu = match text.trim() {
            "none" | "0" => None,
            value => Some(
                value
                    .parse::<f64>()
                    .ok()
                    .filter(|cpu| (MIN_CPU..=MAX_CPU).contains(cpu))
                    .ok_or_else(|| {
                        FlagError(format!(
                            "--cpu-max must be a number of CPUs from {MIN_CPU} to {MAX_CPU} (1.5: one \
                             and a half cores), or none, got {text:?}"
                        ))
                    })?,
            ),
        };
    }
    if let Some(text) = &args.nice {
        limits.nice = text
            .trim()
            .parse::<i32>()
            .ok()
            .filter(|nice| (0..=MAX_NICE).contains(nice))
            .ok_or_else(|| {
                FlagError(format!(
                    "--nice must be a whole number from 0 to {MAX_NICE} (higher: lower priority), \
                     got {text:?}"
                ))
            })?;
    }
    Ok(limits)
}

/// A whole number flag from `min` to `max` (`unit` names what it counts),
/// or `none` / `0`: no limit (`None`).
fn whole(flag: &str, text: &str, min: u64, max: u64, unit: &str) -> Result<Option<u64>, FlagError> {
    match text.trim() {
        "none" | "0" => Ok(None),
        value => {
            value.parse::<u64>().ok().filter(|n| (min..=max).contains(n)).map(Some).ok_or_else(
                || {
                    FlagError(format!(
                        "{flag} must be a whole number of {unit} from {min} to {max}, or none, got \
                     {text:?}"
                    ))
                },
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::Cli;

    /// The configuration the server flags `flags` give, or the error.
    fn config(flags: &[&str]) -> Result<ServerConfig, String> {
        config_in(flags, &[])
    }

    /// [`config`] for a server whose environment is `env`.
    fn config_in(flags: &[&str], env: &[(&str, &str)]) -> Result<ServerConfig, String> {
        let cli = Cli::try_parse_from(std::iter::once("shellkeep").chain(flags.iter().copied()))
            .map_err(|err| format!("clap: {err}"))?;
        let env: Vec<(OsString, OsString)> =
            env.iter().map(|(k, v)| (OsString::from(k), OsString::from(v))).collect();
        ServerConfig::from_args(&cli.serve, &env).map_err(|err| err.to_string())
    }

    #[test]
    fn the_defaults_are_the_documented_ones() {
        let config = config(&[]).expect("the defaults are valid");
        assert_eq!(config.no_output_return, Duration::from_secs(30));
        assert_eq!(config.max_wait, Duration::from_secs(50));
        assert_eq!(config.output_cap, 30_000);
        assert_eq!((config.columns, config.rows), (120, 50));
        assert_eq!(config.grace, Duration::from_secs(5));
        assert_eq!(config.sessions.max_sessions, 16);
        assert_eq!(config.sessions.idle_expiry, Duration::from_secs(1800));
        assert_eq!(config.sessions.job_keep, Duration::from_secs(600));
        assert_eq!(config.output_keep, StoreLimits { max_commands: 100, max_bytes: 256 << 20 });
        assert_eq!(
            config.full_output_limits,
            SpillLimits { per_command: 100 << 20, per_server: 1 << 30 }
        );
        assert_eq!(
            config.retention,
            Retention { max_age: Duration::from_secs(7 * 86_400), max_total: 1 << 30 }
        );
        assert_eq!(config.containment, CgroupRequested::Auto);
        assert_eq!(config.record, None);
        // No sandbox unless asked for; the workspace is the start directory.
        let here = std::fs::canonicalize(".").expect("the working directory");
        assert_eq!(
            config.sandbox,
            SandboxPolicy {
                mode: Mode::Off,
                writable: vec![here],
                network: true,
                best_effort: false
            }
        );
        assert!(!config.sandbox.is_confined() && config.enforcement.is_none());
        assert!(config.source_rc);
        assert!(config.secrets.secrets.is_empty() && config.secrets.shapes);
    }

    #[test]
    fn secrets_come_from_named_variables_and_names_that_say_secret() {
        let env = [
            ("DEPLOY", "deploy-value-1"),
            ("OTHER", "other-value-2"),
            ("GITHUB_TOKEN", "ghp_0123456789abcdef"),
            ("DB_PASSWORD", "short"),
        ];
        let names = |config: &ServerConfig| -> Vec<String> {
            config.secrets.masked().into_iter().map(|(name, _)| name).collect()
        };
        for flags in [
            &["--secret", "DEPLOY", "--secret", "OTHER"][..],
            &["--secret", "DEPLOY,OTHER"][..],
            &["--secret=DEPLOY", "--secret=OTHER,"][..],
        ] {
            let config = config_in(flags, &env).unwrap_or_else(|err| panic!("{flags:?}: {err}"));
            assert_eq!(names(&config), ["DEPLOY", "OTHER", "GITHUB_TOKEN"], "{flags:?}");
            assert!(config.secrets.shapes);
            assert_eq!(config.secrets.notices.len(), 1, "{:?}", config.secrets.notices);
            assert!(config.secrets.exported().is_empty());
        }
        let config = config_in(&["--secret", "DEPLOY", "--no-default-secrets"], &env).unwrap();
        assert_eq!(names(&config), ["DEPLOY"]);
        assert!(!config.secrets.shapes && config.secrets.notices.is_empty());
        // The configuration's Debug, which tests print, shows no value.
        assert!(!format!("{config:?}").contains("deploy-value-1"));

        let err = config_in(&["--secret", "DB_PASSWORD"], &env).expect_err("too short");
        assert_eq!(
            err,
            "secret DB_PASSWORD (from --secret or SHELLKEEP_SECRETS): its value is shorter than 8 \
             characters, too short to mask without wrecking ordinary output"
        );
        let err = config_in(&["--secret", "NOPE"], &env).expect_err("unset");
        assert!(err.ends_with("the server's environment has no variable NOPE"), "{err}");
        let err = config_in(&["--secrets-file", "/nonexistent/secrets.env"], &env)
            .expect_err("missing file");
        assert!(err.starts_with("cannot open the secrets file /nonexistent/secrets.env"), "{err}");
    }

    #[test]
    fn good_flags_become_typed_values() {
        type Check = fn(&ServerConfig) -> bool;
        let cases: &[(&[&str], Check)] = &[
            (&["--max-wait", "1.5"], |c| c.max_wait == Duration::from_millis(1500)),
            (&["--max-wait", "86400"], |c| c.max_wait == Duration::from_secs(86_400)),
            (&["--no-output-return", "0.25"], |c| c.no_output_return == Duration::from_millis(250)),
            (&["--grace", "0.5"], |c| c.grace == Duration::from_millis(500)),
            (&["--output-cap", "100"], |c| c.output_cap == 100),
            (&["--max-sessions", "1"], |c| c.sessions.max_sessions == 1),
            (&["--session-idle-expiry", "0.5"], |c| {
                c.sessions.idle_expiry == Duration::from_millis(500)
            }),
            (&["--job-keep-secs", "0.5"], |c| c.sessions.job_keep == Duration::from_millis(500)),
            (&["--output-keep-commands", "1"], |c| c.output_keep.max_commands == 1),
            (&["--output-keep-mib", "0"], |c| c.output_keep.max_bytes == 0),
            (&["--full-output-max-mib", "1"], |c| c.full_output_limits.per_command == 1 << 20),
            (&["--full-output-keep-days", "0"], |c| c.retention.max_age.is_zero()),
            (&["--full-output-keep-days", "0.5"], |c| {
                c.retention.max_age == Duration::from_secs(43_200)
            }),
            (&["--full-output-keep-mib", "0"], |c| c.retention.max_total == 0),
            (&["--containment", "markers"], |c| {
                c.containment == CgroupRequested::Only(shellkeep_engine::CgroupMode::Markers)
            }),
            (&["--no-rc"], |c| !c.source_rc),
            (&["--record", "/var/rec"], |c| {
                c.record
                    == Some(RecordSettings {
                        dir: PathBuf::from("/var/rec"),
                        limits: SpillLimits { per_command: 100 << 20, per_server: 1 << 30 },
                        retention: Retention {
                            max_age: Duration::from_secs(7 * 86_400),
                            max_total: 1 << 30,
                        },
                        idle_limit: Duration::from_secs(2),
                    })
            }),
            (&["--record", "rec", "--record-max-mib", "1", "--record-keep-mib", "2"], |c| {
                c.record.as_ref().is_some_and(|r| {
                    r.dir == std::env::current_dir().expect("cwd").join("rec")
                        && r.limits == SpillLimits { per_command: 1 << 20, per_server: 2 << 20 }
                        && r.retention.max_total == 2 << 20
                })
            }),
            (&["--record", "/r", "--record-keep-days", "0.5"], |c| {
                c.record
                    .as_ref()
                    .is_some_and(|r| r.retention.max_age == Duration::from_secs(43_200))
            }),
            (&["--sandbox", "read-only"], |c| {
                c.sandbox.mode == Mode::ReadOnly
                    && c.sandbox.network
                    && c.enforcement.as_ref().is_some_and(|e| e.mode == "read-only")
            }),
            (&["--sandbox", "workspace-write", "--writable", "/tmp", "--writable", "/"], |c| {
                c.sandbox.mode == Mode::WorkspaceWrite
                    && c.sandbox.writable
                        == [std::fs::canonicalize("/tmp").expect("/tmp"), PathBuf::from("/")]
            }),
            // Resolved: relative to the working directory, `..` and links
            // gone, named once.
            (&["--writable", ".", "--writable", "./src/../src/..", "--cwd", "/"], |c| {
                c.sandbox.writable == [std::fs::canonicalize(".").expect("cwd")]
            }),
            (&["--cwd", "/"], |c| c.sandbox.writable == [PathBuf::from("/")]),
            (&["--network", "off"], |c| {
                c.sandbox.mode == Mode::Off
                    && !c.sandbox.network
                    && c.sandbox.is_confined()
                    && c.enforcement.as_ref().is_some_and(|e| !e.network)
            }),
            (&["--sandbox", "read-only", "--sandbox-best-effort"], |c| c.sandbox.best_effort),
            (&["--columns", "80", "--rows", "24"], |c| (c.columns, c.rows) == (80, 24)),
            (&["--columns", "1000", "--rows", "10"], |c| (c.columns, c.rows) == (1000, 10)),
            (&["--columns", "20", "--rows", "500"], |c| (c.columns, c.rows) == (20, 500)),
        ];
        for (flags, check) in cases {
            let config = config(flags).unwrap_or_else(|err| panic!("{flags:?}: {err}"));
            assert!(check(&config), "{flags:?}: {config:#?}");
        }
    }

    /// `--http` and its flags: the address parsed, the token from the
    /// environment, origins made exact; each misuse refused with the flag
    /// named, and a non-loopback address without its two conditions.
    #[test]
    fn http_flags_are_checked() {
        let token = [("SHELLKEEP_TOKEN", "0123456789abcdef0123")];
        let http = |flags: &[&str], env: &[(&str, &str)]| config_in(flags, env).map(|c| c.http);
        assert_eq!(http(&[], &token), Ok(None));
        let checked = http(
            &["--http", "127.0.0.1:8765", "--allowed-origin", "https://app.example.com"],
            &token,
        )
        .unwrap()
        .unwrap();
        assert_eq!(checked.addr, "127.0.0.1:8765".parse().unwrap());
        assert_eq!(checked.allowed_origins, ["https://app.example.com:443"]);
        let tokens = checked.tokens.unwrap();
        assert_eq!(tokens.names().collect::<Vec<_>>(), ["default"]);
        assert_eq!(tokens.principal(b"0123456789abcdef0123"), Some("default"));
        // The token is masked like any secret.
        let config = config_in(&["--http", "[::1]:0"], &token).unwrap();
        assert!(!config.masks.mask("x 0123456789abcdef0123 y").0.contains("0123456789abcdef"));
        // No token at all: one is generated at start.
        assert_eq!(http(&["--http", "127.0.0.1:0"], &[]).unwrap().unwrap().tokens, None);
        for (flags, env, expected) in [
            (&["--http", "localhost:8765"][..], &token[..], "--http must be an IP address"),
            (&["--allow-remote"], &token, "--allow-remote is a flag of the HTTP transport"),
            (&["--allowed-host", "a.example"], &token, "--allowed-host is a flag of the HTTP"),
            (&["--http", "0.0.0.0:8765"], &token, "is not a loopback address"),
            (&["--http", "0.0.0.0:8765", "--allow-remote"], &[], "needs a token you chose"),
            (
                &["--http", "127.0.0.1:1"],
                &[("SHELLKEEP_TOKEN", "short")],
                "$SHELLKEEP_TOKEN: a token",
            ),
            (
                &["--http", "127.0.0.1:1", "--allowed-origin", "app.example.com"],
                &token,
                "--allowed-origin must be an origin",
            ),
            (
                &["--http", "127.0.0.1:1", "--allowed-origin", "https://a.example/path"],
                &token,
                "--allowed-origin must be an origin",
            ),
            (
                &["--http", "127.0.0.1:1", "--allowed-host", "a b"],
                &token,
                "--allowed-host must be a host name",
            ),
        ] {
            let err = http(flags, env).unwrap_err();
            assert!(err.contains(expected), "{flags:?}: {err}");
        }
        let remote = http(&["--http", "0.0.0.0:8765", "--allow-remote"], &token).unwrap().unwrap();
        assert!(remote.tokens.is_some());
        let any_port =
            http(&["--http", "127.0.0.1:1", "--allowed-origin", "http://localhost:*"], &token);
        assert_eq!(any_port.unwrap().unwrap().allowed_origins, ["http://localhost:*"]);
    }

    #[test]
    fn each_bad_flag_is_an_error_that_names_it_and_its_range() {
        let cases: &[(&[&str], &str)] = &[
            (
                &["--max-wait", "0"],
                "--max-wait must be a positive number of seconds, at most 86400 (1 day), got 0",
            ),
            (
                &["--max-wait=-1"],
                "--max-wait must be a positive number of seconds, at most 86400 (1 day), got -1",
            ),
            (
                &["--max-wait", "1e30"],
                "--max-wait must be a positive number of seconds, at most 86400 (1 day), got \
                 1000000000000000000000000000000",
            ),
            (
                &["--no-output-return", "NaN"],
                "--no-output-return must be a positive number of seconds, at most 86400 (1 \
                 day), got NaN",
            ),
            (
                &["--grace", "inf"],
                "--grace must be a positive number of seconds, at most 86400 (1 day), got inf",
            ),
            (
                &["--session-idle-expiry", "0"],
                "--session-idle-expiry must be a positive number of seconds, at most 31536000 \
                 (365 days), got 0",
            ),
            (
                &["--job-keep-secs", "0"],
                "--job-keep-secs must be a positive number of seconds, at most 31536000 (365 \
                 days), got 0",
            ),
            (
                &["--output-cap", "99"],
                "--output-cap must be a number of characters from 100 to 100000000, got 99",
            ),
            (&["--max-sessions", "0"], "--max-sessions must be at least 1, got 0"),
            (&["--columns", "19"], "--columns must be a number from 20 to 1000, got 19"),
            (&["--columns", "70000"], "--columns must be a number from 20 to 1000, got 70000"),
            (&["--rows", "4"], "--rows must be a number from 5 to 1000, got 4"),
            (
                &["--columns", "201"],
                "--columns times --rows must be at most 10000 cells (the renderer's memory grows \
                 with them), got 201 x 50",
            ),
            (&["--output-keep-commands", "0"], "--output-keep-commands must be at least 1, got 0"),
            (
                &["--output-keep-mib", "1048577"],
                "--output-keep-mib must be a number of MiB from 0 to 1048576 (1 TiB), got 1048577",
            ),
            (
                &["--full-output-server-max-mib", "18446744073709551615"],
                "--full-output-server-max-mib must be a number of MiB from 0 to 1048576 (1 TiB), \
                 got 18446744073709551615",
            ),
            (
                &["--full-output-keep-days=-1"],
                "--full-output-keep-days must be a number of days from 0 to 36500, got -1",
            ),
            (
                &["--full-output-keep-days", "1e20"],
                "--full-output-keep-days must be a number of days from 0 to 36500, got \
                 100000000000000000000",
            ),
            (
                &["--record", "/r", "--record-max-mib", "1048577"],
                "--record-max-mib must be a number of MiB from 0 to 1048576 (1 TiB), got 1048577",
            ),
            (
                &["--record", "/r", "--record-keep-days=-2"],
                "--record-keep-days must be a number of days from 0 to 36500, got -2",
            ),
            (
                &["--containment", "jail"],
                "--containment: unknown containment mode \"jail\": use auto, cgroup2, cgroup1 or \
                 markers",
            ),
            (
                &["--sandbox", "jail"],
                "--sandbox: unknown sandbox mode \"jail\": use off, workspace-write or read-only",
            ),
            (&["--network", "no"], "--network must be on or off, got \"no\""),
            (
                &["--writable", "/nonexistent-shellkeep-dir"],
                "--writable /nonexistent-shellkeep-dir: No such file or directory (os error 2); \
                 name an existing directory",
            ),
            (
                &["--writable", "/etc/hostname"],
                "--writable /etc/hostname: /etc/hostname is not a directory",
            ),
            (
                &["--cwd", "/nonexistent-shellkeep-dir"],
                "--cwd /nonexistent-shellkeep-dir: No such file or directory (os error 2); name \
                 an existing directory",
            ),
        ];
        let mut problems = Vec::new();
        for (flags, expected) in cases {
            match config(flags) {
                Err(message) if message == *expected => {}
                other => problems.push(format!("{flags:?}: expected {expected:?}, got {other:?}")),
            }
        }
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }
}
