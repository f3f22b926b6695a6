//! The command line as written: clap's structs for the subcommands and the
//! server's flags (the audit log's too), with their help texts, defaults
//! and environment variables. Values here are raw (seconds as `f64`, sizes
//! in MiB, the containment mode as text): `config` checks and converts them
//! before anything starts; only `--since` is parsed here, as clap reads it
//! ([`parse_since`]). This module starts nothing and uses no other module
//! of the server: every module may use it.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

/// An MCP server that gives AI agents a persistent shell in a real
/// terminal, and a one-shot runner that can never hang them.
///
/// Without a subcommand it serves MCP on stdin/stdout.
#[derive(Debug, Parser)]
#[command(version, about, long_about = None)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub serve: ServeArgs,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Serve MCP on stdin/stdout (the default), or over Streamable HTTP
    /// with --http.
    Serve,
    /// Run one command under the timeout policy and print the result as JSON
    /// (`{status, stdout, stderr, exitCode, timeoutReason, terminationMode,
    /// durationMs}`); exits with the command's exit code (124 on timeout).
    Run {
        /// Execution limit in seconds, more than 0 and at most 86400 (default:
        /// the policy's category).
        #[arg(long)]
        timeout: Option<f64>,
        /// Working directory.
        #[arg(long)]
        cwd: Option<PathBuf>,
        /// The command: one argument is a command line for bash (`'make | tail'`);
        /// several are a command and its arguments, each passed as it is.
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
    /// Inspect the timeout policy.
    Policy {
        #[command(subcommand)]
        action: PolicyAction,
    },
    /// Run the timeout policy's four acceptance tests and write the
    /// verification document from the results.
    VerifyTimeouts {
        /// Where to write the document.
        #[arg(long, default_value = "docs/TERMINAL_TIMEOUT_VERIFICATION.md")]
        output: PathBuf,
    },
    /// Print what protects this host's sessions: the containment mode, who
    /// can read a process's memory, Landlock, seccomp, and the private
    /// directories. Changes nothing of yours (it removes what servers that
    /// are gone left behind); exits 0.
    Doctor,
    /// Play a recording of a session (`--record`) in this terminal, with
    /// its timing (pauses capped as the recording says).
    Replay {
        /// The recording (an asciicast v2 file).
        file: PathBuf,
        /// How many times faster than recorded: more than 0, at most 1000.
        #[arg(long, default_value_t = 1.0)]
        speed: f64,
        /// The longest pause, in seconds (default: the recording's own
        /// limit); more than 0, at most 86400.
        #[arg(long)]
        idle_limit: Option<f64>,
    },
    /// What the agent ran, from the audit log: one line per command. A
    /// command still running when its server died shows as server_died,
    /// one stopped as its server ended as server_ended, one stopped by
    /// closing or resetting its session as closed or reset.
    Audit(AuditQuery),
    /// This user's running servers (pid, start directory, client, uptime)
    /// and their sessions (state, running command, who is attached).
    Ls,
    /// Watch a session live in this terminal: first its recent output, then
    /// everything as it happens. Read-only unless `--write`. Detach with
    /// `C-]` (never passed to the program); the session goes on untouched.
    /// Without a terminal, prints the stream (read-only).
    Attach {
        /// The session (default: `default`).
        session: Option<String>,
        /// The server's pid, when several run (`shellkeep ls` lists them).
        #[arg(long)]
        server: Option<u32>,
        /// The server's attach socket, as `shellkeep ls` shows it.
        #[arg(long, conflicts_with = "server")]
        socket: Option<PathBuf>,
        /// Type into the session (one person at a time; the agent's new
        /// commands are refused meanwhile).
        #[arg(long)]
        write: bool,
        /// Replay only the last stretch of output: 90, 30s, 5m, 1h.
        #[arg(long, value_parser = parse_since)]
        since: Option<std::time::Duration>,
        /// Show the raw stream: secrets are not masked.
        #[arg(long)]
        show_secrets: bool,
    },
    /// The orphan guard (internal: started by the server itself, which
    /// sends it the scope token over its stdin, never on the command line).
    #[command(name = "__guard", hide = true)]
    Guard {
        /// The server's runtime directory, removed once the server is gone.
        #[arg(long)]
        runtime_dir: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum PolicyAction {
    /// Validate a policy file (default: the one the server would use) and
    /// summarise it.
    Check {
        /// The policy file.
        file: Option<PathBuf>,
    },
    /// Print the category and limits a command would get.
    Explain {
        /// An explicit timeout in seconds, as an agent might give (more than 0,
        /// at most 86400).
        #[arg(long)]
        timeout: Option<f64>,
        /// The command.
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
}

#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// The timeout policy file. Otherwise $SHELLKEEP_POLICY,
    /// ./config/terminal_timeout_policy.json, then
    /// $XDG_CONFIG_HOME/shellkeep/policy.json; else the embedded default.
    #[arg(long, global = true)]
    pub policy: Option<PathBuf>,
    /// Directory the terminal starts in (and returns to on reset).
    #[arg(long, global = true, env = "SHELLKEEP_CWD")]
    pub cwd: Option<PathBuf>,
    /// Seconds without new output after which a terminal call hands control
    /// back (the command keeps running); more than 0, at most 86400.
    #[arg(long, global = true, default_value_t = 30.0, env = "SHELLKEEP_NO_OUTPUT_RETURN")]
    pub no_output_return: f64,
    /// Longest a terminal call waits when the agent gives no timeout, even
    /// while output keeps coming (keep it below the client's request
    /// timeout, commonly 60 s); more than 0, at most 86400.
    #[arg(long, global = true, default_value_t = 50.0, env = "SHELLKEEP_MAX_WAIT")]
    pub max_wait: f64,
    /// Characters of output one reply shows (all its outputs together:
    /// `run`'s stdout and stderr, a terminal command's and the previous
    /// one's; counted as JSON writes them) before the middle is cut; the
    /// full output is saved to a file. From 100 to 100000000. About 10000
    /// suits Codex.
    #[arg(long, global = true, default_value_t = 30_000, env = "SHELLKEEP_OUTPUT_CAP")]
    pub output_cap: usize,
    /// The terminal's width in columns (what `tput cols` and `COLUMNS`
    /// say; lines wider than this wrap for programs, not in replies); from
    /// 20 to 1000, and columns times rows at most 10000.
    #[arg(long, global = true, default_value_t = 120, env = "SHELLKEEP_COLUMNS")]
    pub columns: u32,
    /// The terminal's height in rows (a full-screen program's screen);
    /// from 5 to 1000, and columns times rows at most 10000.
    #[arg(long, global = true, default_value_t = 50, env = "SHELLKEEP_ROWS")]
    pub rows: u32,
    /// Seconds between SIGTERM and SIGKILL when a command is killed; more
    /// than 0, at most 86400.
    #[arg(long, global = true, default_value_t = 5.0, env = "SHELLKEEP_GRACE")]
    pub grace: f64,
    /// The shell to run in the terminal.
    #[arg(long, global = true, default_value = "bash", env = "SHELLKEEP_SHELL")]
    pub shell: PathBuf,
    /// Do not source ~/.bashrc in the terminal.
    #[arg(long, global = true, env = "SHELLKEEP_NO_RC")]
    pub no_rc: bool,
    /// The most terminal sessions open at once, `default` included.
    #[arg(long, global = true, default_value_t = 16, env = "SHELLKEEP_MAX_SESSIONS")]
    pub max_sessions: usize,
    /// Seconds a named session may sit idle at its prompt before it is
    /// closed (`default` and background jobs never expire); more than 0, at
    /// most 365 days.
    #[arg(long, global = true, default_value_t = 1800.0, env = "SHELLKEEP_SESSION_IDLE_EXPIRY")]
    pub session_idle_expiry: f64,
    /// Seconds an ended background job's session, and its output, is kept
    /// after the job's end (or its last use, if later) before it is closed;
    /// more than 0, at most 365 days.
    #[arg(long, global = true, default_value_t = 600.0, env = "SHELLKEEP_JOB_KEEP_SECS")]
    pub job_keep_secs: f64,
    /// Commands whose complete output each session keeps for the `output`
    /// tool (the oldest are dropped first).
    #[arg(long, global = true, default_value_t = 100, env = "SHELLKEEP_OUTPUT_KEEP_COMMANDS")]
    pub output_keep_commands: usize,
    /// MiB of complete command output each session keeps for the `output`
    /// tool (the oldest commands are dropped first).
    #[arg(long, global = true, default_value_t = 256, env = "SHELLKEEP_OUTPUT_KEEP_MIB")]
    pub output_keep_mib: u64,
    /// Where full outputs of cut replies are kept, so their paths stay
    /// valid after the server ends [default: $XDG_STATE_HOME/shellkeep/output,
    /// else ~/.local/state/shellkeep/output].
    #[arg(long, global = true, env = "SHELLKEEP_FULL_OUTPUT_DIR")]
    pub full_output_dir: Option<PathBuf>,
    /// MiB of full output saved per command (all its streams and replies);
    /// the file then ends with a line saying where it was cut.
    #[arg(long, global = true, default_value_t = 100, env = "SHELLKEEP_FULL_OUTPUT_MAX_MIB")]
    pub full_output_max_mib: u64,
    /// MiB of full output one server saves in all.
    #[arg(
        long,
        global = true,
        default_value_t = 1024,
        env = "SHELLKEEP_FULL_OUTPUT_SERVER_MAX_MIB"
    )]
    pub full_output_server_max_mib: u64,
    /// Full-output files older than this many days are deleted (at start-up
    /// and when a file is added).
    #[arg(long, global = true, default_value_t = 7.0, env = "SHELLKEEP_FULL_OUTPUT_KEEP_DAYS")]
    pub full_output_keep_days: f64,
    /// Beyond this many MiB in the full-output directory, the oldest files
    /// are deleted.
    #[arg(long, global = true, default_value_t = 1024, env = "SHELLKEEP_FULL_OUTPUT_KEEP_MIB")]
    pub full_output_keep_mib: u64,
    /// Record every terminal session as asciinema recordings (asciicast v2,
    /// one file per shell, masked like replies) in this directory, made
    /// private (0700) if missing; a session started with record=false is
    /// not recorded. Play one with `shellkeep replay FILE` or `asciinema
    /// play FILE`.
    #[arg(long, global = true, value_name = "DIR", env = "SHELLKEEP_RECORD")]
    pub record: Option<PathBuf>,
    /// MiB one recording may hold; it then ends with a marker saying it
    /// was cut.
    #[arg(long, global = true, default_value_t = 100, env = "SHELLKEEP_RECORD_MAX_MIB")]
    pub record_max_mib: u64,
    /// MiB of recordings one server writes in all; and beyond this many MiB
    /// of recordings in the directory, the oldest are deleted.
    #[arg(long, global = true, default_value_t = 1024, env = "SHELLKEEP_RECORD_KEEP_MIB")]
    pub record_keep_mib: u64,
    /// Recordings older than this many days are deleted (at start-up and
    /// when a recording starts).
    #[arg(long, global = true, default_value_t = 7.0, env = "SHELLKEEP_RECORD_KEEP_DAYS")]
    pub record_keep_days: f64,
    /// An environment variable of the server whose value is secret: masked
    /// in everything shellkeep shows or writes. Repeatable; its value must
    /// have at least 8 characters. Or a comma-separated list in
    /// $SHELLKEEP_SECRETS.
    #[arg(
        long = "secret",
        global = true,
        value_name = "NAME",
        env = "SHELLKEEP_SECRETS",
        value_delimiter = ','
    )]
    pub secrets: Vec<String>,
    /// A file of `NAME=value` lines (dotenv syntax: quotes, `#` comments,
    /// `export`) whose values are secret: masked, and exported into every
    /// terminal session and `run` command through the environment. It
    /// must be yours and private (chmod 600), not a symlink.
    #[arg(long, global = true, value_name = "FILE", env = "SHELLKEEP_SECRETS_FILE")]
    pub secrets_file: Option<PathBuf>,
    /// Mask only the secrets named with --secret and --secrets-file: not
    /// the variables whose names say secret (`*_TOKEN`, `*_KEY`,
    /// `*PASSWORD*`, …), nor the shapes of well-known credentials.
    #[arg(long, global = true, env = "SHELLKEEP_NO_DEFAULT_SECRETS")]
    pub no_default_secrets: bool,
    /// What contains the processes of every session and `run` command:
    /// `auto` (the best the host allows), `cgroup2`, `cgroup1` or `markers`.
    /// A mode named here that the host does not allow stops start-up.
    #[arg(long, global = true, default_value = "auto", env = "SHELLKEEP_CONTAINMENT")]
    pub containment: String,
    /// What every terminal shell and `run` command may write, enforced by
    /// the kernel (Landlock, seccomp) before bash starts: `off`,
    /// `workspace-write` (the --writable directories, a private temporary
    /// directory and the terminal) or `read-only` (only that temporary
    /// directory). Any mode but `off` also stops commands from tracing the
    /// shell, pushing input into the terminal and signalling the server. A
    /// session or `run` may ask for a stricter sandbox, never a looser one.
    /// A mode the kernel cannot enforce stops start-up (see
    /// --sandbox-best-effort).
    #[arg(
        long,
        global = true,
        default_value = "off",
        value_name = "MODE",
        env = "SHELLKEEP_SANDBOX"
    )]
    pub sandbox: String,
    /// A directory commands may write under `--sandbox workspace-write`
    /// (with everything below it). Repeatable, or a `:`-separated list in
    /// $SHELLKEEP_WRITABLE; each must exist. Default: the server's start
    /// directory (--cwd, else its working directory).
    #[arg(
        long = "writable",
        global = true,
        value_name = "DIR",
        env = "SHELLKEEP_WRITABLE",
        value_delimiter = ':'
    )]
    pub writable: Vec<PathBuf>,
    /// `off` denies every socket but Unix ones to every terminal shell and
    /// `run` command (no TCP, UDP or raw network; a local server on a Unix
    /// socket still works); `on` leaves the network alone.
    #[arg(
        long,
        global = true,
        default_value = "on",
        value_name = "on|off",
        env = "SHELLKEEP_NETWORK"
    )]
    pub network: String,
    /// Start even where the kernel cannot enforce all of --sandbox and
    /// --network (an old kernel, Landlock not enabled): what is and is not
    /// enforced is then said by `doctor` and in every reply.
    #[arg(long, global = true, env = "SHELLKEEP_SANDBOX_BEST_EFFORT")]
    pub sandbox_best_effort: bool,
    /// Memory one session (its shell and everything it starts) or one
    /// `run` command may use, in MiB (at least 16), or `none`. Default: half
    /// the machine's memory, applied through control groups only. Without
    /// control groups a value set here limits each process's address space.
    #[arg(long, value_name = "MIB", global = true, env = "SHELLKEEP_MEMORY_MAX")]
    pub memory_max: Option<String>,
    /// Tasks (processes and threads) one session or `run` command may run
    /// at once (at least 8), or `none`. Default: 4096, applied through
    /// control groups only. Without control groups a value set here limits
    /// the user's processes as a whole (RLIMIT_NPROC), and not for root.
    #[arg(long, value_name = "N", global = true, env = "SHELLKEEP_TASKS_MAX")]
    pub tasks_max: Option<String>,
    /// CPUs one session or `run` command may use (1.5: one and a half
    /// cores; from 0.01), or `none` (the default). Control groups only.
    #[arg(long, value_name = "CORES", global = true, env = "SHELLKEEP_CPU_MAX")]
    pub cpu_max: Option<String>,
    /// The `nice` value (0 to 19) every session's shell and `run` command
    /// starts at: 10 gives the server's replies priority over builds.
    #[arg(long, value_name = "N", global = true, env = "SHELLKEEP_NICE")]
    pub nice: Option<String>,
    #[command(flatten)]
    pub audit: AuditArgs,
    #[command(flatten)]
    pub http: HttpArgs,
}

/// The Streamable HTTP transport's flags (`serve --http ADDR`), as written.
#[derive(Debug, Args)]
pub(crate) struct HttpArgs {
    /// Serve MCP over Streamable HTTP on this address (`127.0.0.1:8765`;
    /// port 0 picks a free one) instead of stdio: the endpoint is `/mcp`,
    /// and `GET /healthz` answers `ok` without authentication. Every
    /// request to `/mcp` needs `Authorization: Bearer TOKEN`.
    #[arg(long, global = true, value_name = "ADDR", env = "SHELLKEEP_HTTP")]
    pub http: Option<String>,
    /// A file of tokens for --http, one `NAME:TOKEN` a line (`#` comments
    /// and blank lines ignored): each NAME is a client of its own, with its
    /// own sessions and outputs. It must be yours and private (chmod 600).
    /// Without it, $SHELLKEEP_TOKEN is the one token (client `default`);
    /// without either, a token is generated at start into a private file
    /// whose path is printed on stderr.
    #[arg(long, global = true, value_name = "FILE", env = "SHELLKEEP_TOKEN_FILE")]
    pub token_file: Option<PathBuf>,
    /// An `Origin` allowed to call --http (`https://app.example.com`, with
    /// its scheme; a port, `:*` for any). Repeatable. The bound loopback
    /// origins are always allowed; a request with any other `Origin` gets
    /// 403 (requests without one, as non-browser clients send, pass).
    #[arg(
        long = "allowed-origin",
        global = true,
        value_name = "ORIGIN",
        env = "SHELLKEEP_ALLOWED_ORIGINS",
        value_delimiter = ','
    )]
    pub allowed_origins: Vec<String>,
    /// A `Host` (a name, or `name:port`) --http answers, beside the bound
    /// loopback names (`127.0.0.1:PORT`, `localhost:PORT`, `[::1]:PORT`):
    /// the public name a reverse proxy forwards, say. Repeatable. Other
    /// hosts get 403.
    #[arg(
        long = "allowed-host",
        global = true,
        value_name = "HOST",
        env = "SHELLKEEP_ALLOWED_HOSTS",
        value_delimiter = ','
    )]
    pub allowed_hosts: Vec<String>,
    /// Allow --http to bind an address that is not loopback (for a
    /// container or a pod). It then also needs a configured token
    /// ($SHELLKEEP_TOKEN or --token-file): TLS belongs to a reverse proxy.
    #[arg(long, global = true, env = "SHELLKEEP_ALLOW_REMOTE")]
    pub allow_remote: bool,
}

/// The server's audit flags, as written.
#[derive(Debug, Args)]
pub(crate) struct AuditArgs {
    /// Append one JSON line to FILE when a tool call that runs something
    /// starts and one when it ends (created private, mode 0600; a symlink or
    /// a file of another user is refused). The server notes its own start
    /// and end there too: the next server with the same FILE says, once,
    /// if this one died with commands running. Default:
    /// `$XDG_STATE_HOME/shellkeep/audit.jsonl`, else
    /// `~/.local/state/shellkeep/audit.jsonl`.
    #[arg(long, value_name = "FILE", env = "SHELLKEEP_AUDIT_LOG")]
    pub audit_log: Option<PathBuf>,
    /// Keep no audit log (and so say nothing of an earlier server that
    /// died with commands running).
    #[arg(long, conflicts_with = "audit_log")]
    pub no_audit_log: bool,
    /// MiB the audit log may reach before it is rotated to FILE.1 (FILE.1
    /// to FILE.2, and so on); from 0.01 to 1048576.
    #[arg(long, default_value_t = 10.0, env = "SHELLKEEP_AUDIT_LOG_MAX_MIB")]
    pub audit_log_max_mib: f64,
    /// Rotated audit logs kept (FILE.1 … FILE.N, the oldest dropped); from
    /// 0 to 1000.
    #[arg(long, default_value_t = 5, env = "SHELLKEEP_AUDIT_LOG_KEEP")]
    pub audit_log_keep: u32,
}

/// `shellkeep audit`: what ran, as one line per command.
#[derive(Debug, Args)]
pub(crate) struct AuditQuery {
    /// Only calls that started within this long: `90s`, `30m`, `1h`, `2d`.
    #[arg(long)]
    pub since: Option<String>,
    /// Only commands that failed: a non-zero exit code, killed, timed out,
    /// not executed, refused or cancelled.
    #[arg(long)]
    pub failed: bool,
    /// The audit log (its rotations FILE.1, FILE.2, … are read too);
    /// default: the server's default log.
    #[arg(value_name = "FILE", env = "SHELLKEEP_AUDIT_LOG")]
    pub file: Option<PathBuf>,
}

/// The longest `--since` a client may ask for (the replay ring holds far
/// less anyway); the attach listener holds to it too.
pub(crate) const MAX_SINCE: Duration = Duration::from_secs(7 * 24 * 3600);

/// Parses `--since`: a number with `s`, `m`, `h` or `d` (seconds without
/// one): `90`, `30s`, `5m`, `1h`; more than 0, at most 7 days.
pub(crate) fn parse_since(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.char_indices().last() {
        Some((at, c)) if c.is_ascii_alphabetic() => (&text[..at], c),
        _ => (text, 's'),
    };
    let scale = match unit {
        's' => 1.0,
        'm' => 60.0,
        'h' => 3600.0,
        'd' => 86400.0,
        _ => return Err(format!("{text:?}: the unit must be s, m, h or d (as in 5m)")),
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a duration (as in 90, 30s, 5m, 1h)"))?;
    let secs = value * scale;
    if !secs.is_finite() || secs <= 0.0 || secs > MAX_SINCE.as_secs_f64() {
        return Err(format!("{text:?}: more than 0 and at most 7 days"));
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use clap::Parser;

    use super::{Cli, Command, parse_since};

    #[test]
    fn the_servers_flags_go_before_or_after_serve() {
        let words = ["--no-rc", "--max-sessions", "3", "--http", "127.0.0.1:0"];
        let before = ["shellkeep"].into_iter().chain(words).chain(["serve"]);
        let after = ["shellkeep", "serve"].into_iter().chain(words);
        for argv in [before.collect::<Vec<_>>(), after.collect()] {
            let cli = Cli::try_parse_from(&argv).unwrap_or_else(|err| panic!("{argv:?}: {err}"));
            assert!(matches!(cli.command, Some(Command::Serve)), "{argv:?}");
            let serve = &cli.serve;
            assert_eq!(
                (serve.no_rc, serve.max_sessions, serve.http.http.as_deref()),
                (true, 3, Some("127.0.0.1:0")),
                "{argv:?}"
            );
        }
    }

    #[test]
    fn since_takes_a_number_and_a_unit() {
        assert_eq!(parse_since("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_since("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_since("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_since("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_since("7d"), Ok(Duration::from_secs(7 * 86400)));
        for bad in ["", "m", "5x", "-1m", "0", "8d", "nan", "inf", "5 minutes"] {
            assert!(parse_since(bad).is_err(), "{bad}");
        }
    }
}
