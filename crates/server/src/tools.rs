//! The MCP tools: argument schemas, validation, and the calls into the
//! engine. This is the only module that knows `rmcp`'s tool API; wording
//! lives in `render`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rmcp::handler::server::tool::schema_for_output;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock, Implementation, ProgressNotificationParam, ProgressToken,
    ServerCapabilities, ServerConfig,
};
use rmcp::schemars::{self, JsonSchema};
use rmcp::service::{Peer, RequestContext};
use rmcp::{RoleServer, ServerHandler, tool, tool_handler, tool_router};
use serde::{Deserialize, Serialize};
use shellkeep_engine::guard::Guard;
use shellkeep_engine::oneshot::{self, RunRequest};
use shellkeep_engine::policy::{Decision, ExplicitTimeout, Policy};
use shellkeep_engine::registry::{DEFAULT_SESSION, Lease, Opened, Registry};
use shellkeep_engine::session::{Progress, ProgressHook, Request, SessionError};

use crate::render;

/// Everything the tools share, built once at start-up.
pub struct Shared {
    /// The terminal sessions, `default` among them.
    pub sessions: Arc<Registry>,
    /// The timeout policy in force.
    pub policy: Policy,
    /// Where the policy came from, for explanations.
    pub policy_origin: String,
    /// Where cut outputs are saved in full, and the limits on them.
    pub spill: Arc<shellkeep_engine::output::SpillStore>,
    /// Characters of each `run` stream shown before head and tail are cut.
    pub run_stream_cap: usize,
    /// Time between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// The orphan guard, if running.
    pub guard: Option<Arc<Guard>>,
    /// Numbers `run` calls, for spill file names.
    pub runs: AtomicU64,
}

/// The MCP server: a cheap handle on the shared state.
#[derive(Clone)]
pub struct Shellkeep {
    shared: Arc<Shared>,
    tool_router: rmcp::handler::server::tool::ToolRouter<Shellkeep>,
}

/// Tool arguments of type `T` whose errors name the argument at fault
/// ("`is_input`: invalid type: string \"yes\", expected a boolean"), so the
/// agent knows which one to fix. The schema is `T`'s.
#[derive(Debug)]
pub struct Checked<T>(pub T);

impl<T: JsonSchema> JsonSchema for Checked<T> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        T::schema_name()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        T::json_schema(generator)
    }

    fn inline_schema() -> bool {
        T::inline_schema()
    }
}

impl<'de, T: serde::de::DeserializeOwned> Deserialize<'de> for Checked<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let value = serde_json::Value::deserialize(deserializer)?;
        serde_path_to_error::deserialize(value).map(Checked).map_err(|err| {
            let path = err.path().to_string();
            match path.as_str() {
                "." => D::Error::custom(err.into_inner()),
                _ => D::Error::custom(format!("`{path}`: {}", err.into_inner())),
            }
        })
    }
}

/// Arguments of the `terminal` tool.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TerminalArgs {
    /// The shell command to run (any bash: pipes, multi-line blocks, heredocs). Empty to wait
    /// for more output of a running command (after exit code -1). With is_input=true: text to
    /// type to the running program (Enter is added), or a key: `C-c`, `C-d`, `C-z`, any
    /// `C-<letter>`, `UP`, `DOWN`, `LEFT`, `RIGHT`, `TAB`, `ESC`, `BS`, `ENTER`, `HOME`, `END`,
    /// `PGUP`, `PGDN`.
    pub command: String,
    /// If true, `command` is input for the running program instead of a new command.
    #[serde(default)]
    pub is_input: bool,
    /// Seconds this call may wait before handing control back (the command keeps running, exit
    /// code -1). Without it, control comes back after 30 s without new output, and after 50 s
    /// at most. Control also comes back as soon as the program waits for input. A larger value
    /// also raises how long the command may then run unwatched.
    #[serde(default)]
    pub timeout: Option<f64>,
    /// If true, kill the shell and everything it runs and start a fresh one in the original
    /// directory (variables, functions and jobs are lost); `command`, if any, then runs in it.
    #[serde(default)]
    pub reset: bool,
    /// The session: a name of 1 to 32 characters from A-Z a-z 0-9 _ . - (omit for `default`).
    /// Naming a session that does not exist starts it. Commands in different sessions run in
    /// parallel; calls to the same session wait their turn.
    #[serde(default)]
    pub session: Option<String>,
    /// Where a new session starts; only used by the call that starts it (default: the server's
    /// start directory). Use `cd` to move an existing session.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Start `command` as a long-lived job (dev server, watcher, `tail -f`) in a new session of
    /// its own, named by `session` if given and free, else `job-N`. The call returns after about
    /// a second with the session name; the job is not under the execution limit and runs until
    /// it ends, is closed with session_close, or the server stops. Poll it, send it input or
    /// keys with that `session`.
    #[serde(default)]
    pub background: bool,
}

/// Arguments of the `session_close` tool.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionCloseArgs {
    /// The session to close. Closing `default` resets it.
    pub session: String,
}

/// Arguments of the `output` tool.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OutputArgs {
    /// The session (omit for `default`).
    #[serde(default)]
    pub session: Option<String>,
    /// The command's number, as a cut reply names it; omit for the latest.
    #[serde(default)]
    pub command: Option<u64>,
    /// The first line to return, from 0; negative counts from the end (-50: the last 50 lines,
    /// as `tail`). Default 0.
    #[serde(default)]
    pub offset: Option<i64>,
    /// How many lines at most (default 200, at most 5000); a page also stops at 30,000
    /// characters.
    #[serde(default)]
    pub limit: Option<u64>,
}

/// Arguments of the `sessions` tool (none).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionsArgs {}

/// Arguments of the `run` tool.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunArgs {
    /// The command, run with `bash -c` in a fresh process (no state is kept between runs).
    pub command: String,
    /// Execution limit in seconds; the no-output limit is then min(timeout/4, 60) s, at least
    /// 1 s, unless no_output_timeout_sec is given. Without it, the policy's category for the
    /// command decides.
    #[serde(default)]
    pub timeout_sec: Option<f64>,
    /// Seconds the command may print nothing (on stdout or stderr) before it is stopped. Give
    /// it for commands that stay silent for a while (a download, a compile step).
    #[serde(default)]
    pub no_output_timeout_sec: Option<f64>,
    /// Working directory (default: the server's).
    #[serde(default)]
    pub cwd: Option<String>,
    /// Extra environment variables.
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
    /// Text for the command's standard input (default: none, stdin is /dev/null).
    #[serde(default)]
    pub stdin: Option<String>,
}

/// Arguments of the `policy_explain` tool.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExplainArgs {
    /// The command to classify.
    pub command: String,
    /// An explicit timeout in seconds, as `run` would get it.
    #[serde(default)]
    pub timeout_sec: Option<f64>,
    /// An explicit no-output limit in seconds, as `run` would get it.
    #[serde(default)]
    pub no_output_timeout_sec: Option<f64>,
}

#[tool_router]
impl Shellkeep {
    /// A server over `shared`.
    pub fn new(shared: Arc<Shared>) -> Shellkeep {
        let mut tool_router = Self::tool_router();
        for route in tool_router.map.values_mut() {
            let tool = &mut route.attr;
            tool.input_schema = Arc::new(schema::portable(&tool.input_schema));
            if let Some(output) = &tool.output_schema {
                let mut output = schema::portable(output);
                schema::declare_jobs_ended(&mut output);
                tool.output_schema = Some(Arc::new(output));
            }
        }
        Shellkeep { shared, tool_router }
    }

    #[tool(
        description = "Run a command in a persistent bash session in a real terminal: the working \
            directory, environment variables, virtual environments, functions and aliases persist \
            between calls. One command at a time; chain with && or ;. Interactive programs work: \
            when a call returns exit code -1 the command is still running: send an empty command \
            to wait for more output, or is_input=true with text or a key such as C-c. Long output \
            is cut to its head and tail and saved in full to a file named in the reply. A call \
            hands control back after at most 50 s (or its timeout), or within about a second \
            when the program waits for input; the command keeps running. A running command is \
            stopped, with the rest of its command line, only when no call has waited on it, \
            polled it or sent it input for longer than its limit (its timeout category's \
            execution limit, or the last call's timeout if larger; time waiting for input not \
            counted); every reply for a running command says by when to look again. If the \
            client cancels a call, the command is left running and the next call shows its \
            output. shellkeep's notices are lines in [brackets]; output that could pass for one \
            comes in a text block of its own.",
        output_schema = schema_for_output::<render::TerminalOutput>(),
        annotations(
            title = "Terminal",
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = false,
            open_world_hint = true
        )
    )]
    async fn terminal(
        &self,
        Parameters(Checked(args)): Parameters<Checked<TerminalArgs>>,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let timeout = match args.timeout {
            None => None,
            Some(secs) if (0.0..=86_400.0).contains(&secs) => Some(Duration::from_secs_f64(secs)),
            Some(secs) => {
                return tool_error(format!(
                    "timeout must be a number of seconds from 0 to 86400, got {secs}"
                ));
            }
        };
        let cwd = args.cwd.as_deref().map(PathBuf::from);
        let (lease, opened) = match self.open_for(&args, cwd) {
            Ok(opened) => opened,
            Err(message) => return self.with_job_notices(tool_error(message)),
        };
        // The policy's execution limit applies to new commands; the session
        // raises it to cover any wait the agent asks for. Background jobs
        // are not under it.
        let (exec_limit, timeout) = match opened {
            SessionOpened::Background(_) => (None, Some(BACKGROUND_FIRST_WAIT)),
            _ => (Some(self.shared.policy.decide(&args.command, None).limits.exec), timeout),
        };
        // Progress goes out while the call waits, when the client asked for
        // it: the engine reports to a channel, a task forwards to the peer.
        let (progress, forwarder) = match context.meta.get_progress_token() {
            Some(token) => {
                let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
                let hook = ProgressHook::new(move |progress| {
                    let _ = sender.send(progress);
                });
                (
                    Some(hook),
                    Some(tokio::spawn(forward_progress(context.peer.clone(), token, receiver))),
                )
            }
            None => (None, None),
        };
        let request = Request {
            command: args.command,
            is_input: args.is_input,
            timeout,
            reset: args.reset,
            exec_limit,
            progress,
        };
        let executed = lease.session().execute(request, context.ct.clone()).await;
        // The request, and with it the hook, is gone: the forwarder sends
        // what is queued and ends, so no progress follows the result.
        if let Some(forwarder) = forwarder {
            let _ = forwarder.await;
        }
        if matches!(opened, SessionOpened::Background(_)) {
            self.shared.sessions.watch_job(&lease);
        }
        let result = match executed {
            Ok(reply) => {
                let (mut text, mut structured) = render::terminal(&reply);
                let is_error = structured.status == "not_executed";
                if lease.name() != DEFAULT_SESSION {
                    structured.session = Some(lease.name().to_owned());
                }
                if let Some(line) = render::session_opened(lease.name(), &opened.as_note()) {
                    text.notice_first(&line);
                }
                // The previous command's output, reported now, may have been
                // cut too: say how to read it as well.
                if let Some(previous) = &reply.previous
                    && let Some((line, _)) = render::read_hint(lease.name(), previous)
                {
                    text.notice(&line.replacen(
                        "lines left out",
                        "lines the previous command's output left out",
                        1,
                    ));
                }
                if let Some((line, number)) = render::read_hint(lease.name(), &reply) {
                    text.notice(&line);
                    structured.command_number = Some(number);
                }
                self.with_job_notices(structured_result(text, &structured, is_error))
            }
            Err(err @ SessionError::Shell(_)) => self.with_job_notices(tool_error(format!(
                "{err}. Try again, or reset=true to start a fresh shell."
            ))),
            Err(err) => self.with_job_notices(tool_error(render::session_refused(&err))),
        };
        self.with_guard_notice(result, Some(lease.name()))
    }

    #[tool(
        description = "Run one command with `bash -c` in a fresh process and return its stdout, \
            stderr and exit code: {status, stdout, stderr, exitCode, timeoutReason, \
            terminationMode, durationMs}. Nothing persists between runs (use `terminal` for \
            that); stdin is empty unless given. It can never hang: an execution limit and a \
            no-output limit (from timeout_sec and no_output_timeout_sec, or the timeout policy's \
            category for the command) end it with SIGTERM to its whole process group, then SIGKILL after a grace \
            period; partial output is kept.",
        output_schema = schema_for_output::<render::RunOutput>(),
        annotations(
            title = "Run a command",
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = false,
            open_world_hint = true
        )
    )]
    async fn run(
        &self,
        Parameters(Checked(args)): Parameters<Checked<RunArgs>>,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        if let Err(message) = check_run_args(&args) {
            return tool_error(message);
        }
        let decision =
            match self.decide(&args.command, args.timeout_sec, args.no_output_timeout_sec) {
                Ok(decision) => decision,
                Err(message) => return tool_error(message),
            };
        let number = self.shared.runs.fetch_add(1, Ordering::Relaxed) + 1;
        let request = RunRequest {
            cwd: args.cwd.map(PathBuf::from),
            env: args.env.unwrap_or_default().into_iter().collect(),
            stdin: args.stdin,
            grace: self.shared.grace,
            stream_cap: self.shared.run_stream_cap,
            guard: self.shared.guard.clone(),
            spill: Arc::clone(&self.shared.spill),
            ..RunRequest::new(
                args.command,
                decision.limits,
                self.shared.spill.dir(),
                format!("run-{number}"),
            )
        };
        let outcome = oneshot::run(request, context.ct.clone()).await;
        let (text, structured) = render::run(&outcome, &decision);
        self.with_guard_notice(
            self.with_job_notices(structured_result(text, &structured, false)),
            None,
        )
    }

    #[tool(
        description = "Show which timeout policy category and limits a command would get, \
            without running it.",
        output_schema = schema_for_output::<render::ExplainOutput>(),
        annotations(
            title = "Explain the timeout policy",
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn policy_explain(
        &self,
        Parameters(Checked(args)): Parameters<Checked<ExplainArgs>>,
    ) -> CallToolResult {
        match self.decide(&args.command, args.timeout_sec, args.no_output_timeout_sec) {
            Ok(decision) => {
                let (text, structured) =
                    render::explain(&args.command, &decision, &self.shared.policy_origin);
                structured_result(text, &structured, false)
            }
            Err(message) => tool_error(message),
        }
    }

    #[tool(
        description = "List the terminal sessions: name, working directory, state (idle; running \
            a command, for how long; waiting for input; a background job; finished with its \
            exit code), when each was last used and how many processes it has. Sessions are \
            started by naming them in `terminal`; at most 16 are open at once (configurable), \
            and a session idle at its prompt for 30 minutes is closed (not `default`, not \
            background jobs).",
        output_schema = schema_for_output::<render::SessionsOutput>(),
        annotations(
            title = "List terminal sessions",
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn sessions(
        &self,
        Parameters(Checked(_args)): Parameters<Checked<SessionsArgs>>,
    ) -> CallToolResult {
        let rows = self.shared.sessions.list();
        let (text, structured) = render::sessions(&rows, self.shared.sessions.limits());
        self.with_job_notices(structured_result(text, &structured, false))
    }

    #[tool(
        description = "Read the complete output of a terminal command by line, for running and \
            finished commands: every line it printed is kept (per session, the last 100 commands \
            and 256 MiB by default) even when a reply was cut. Give the session (default \
            `default`), the command number a cut reply names (default: the latest), an offset \
            (negative counts from the end, as tail) and a limit in lines. The reply says how \
            many lines there are so far and whether the command is still running; follow a \
            running job by reading again from the offset it gives.",
        output_schema = schema_for_output::<render::OutputPage>(),
        annotations(
            title = "Read a command's complete output",
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn output(
        &self,
        Parameters(Checked(args)): Parameters<Checked<OutputArgs>>,
    ) -> CallToolResult {
        let name = args.session.as_deref().unwrap_or(DEFAULT_SESSION);
        let session = match self.shared.sessions.get(name) {
            Ok(session) => session,
            Err(err) => return self.with_job_notices(tool_error(err.to_string())),
        };
        session.commit_screen();
        let page =
            session.output().get(args.command).map_err(|err| err.to_string()).and_then(|log| {
                log.read(args.offset.unwrap_or(0), args.limit.unwrap_or(200))
                    .map_err(|err| err.to_string())
            });
        match page {
            Ok(page) => {
                let (text, structured) = render::output_page(name, &page);
                self.with_job_notices(structured_result(text, &structured, false))
            }
            Err(message) => self.with_job_notices(tool_error(format!(
                "{message}. List the sessions with the sessions tool; a cut reply names the \
                 command number to read."
            ))),
        }
    }

    #[tool(
        description = "Close a terminal session: its shell and every process it started are \
            stopped (SIGTERM, then SIGKILL after a grace period), and the reply gives its last \
            output and final state. Closing `default` resets it to a fresh shell.",
        output_schema = schema_for_output::<render::SessionClosedOutput>(),
        annotations(
            title = "Close a terminal session",
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn session_close(
        &self,
        Parameters(Checked(args)): Parameters<Checked<SessionCloseArgs>>,
    ) -> CallToolResult {
        let name = args.session;
        if name == DEFAULT_SESSION {
            let session = match self.shared.sessions.get(DEFAULT_SESSION) {
                Ok(session) => session,
                Err(err) => return self.with_job_notices(tool_error(err.to_string())),
            };
            let last = session.last_words().await;
            let request = Request { reset: true, ..Request::default() };
            if let Err(err) = session.execute(request, Default::default()).await {
                return self.with_job_notices(tool_error(err.to_string()));
            }
            let (text, structured) = render::session_closed(&name, &last, true);
            return self.with_job_notices(structured_result(text, &structured, false));
        }
        let session = match self.shared.sessions.remove(&name) {
            Ok(session) => session,
            Err(err) => return self.with_job_notices(tool_error(err.to_string())),
        };
        // A call waiting on the session returns at once rather than holding
        // up the close.
        session.interrupt_waits();
        let last = session.last_words().await;
        session.close().await;
        let (text, structured) = render::session_closed(&name, &last, false);
        self.with_job_notices(structured_result(text, &structured, false))
    }
}

/// How the session of a `terminal` call was found.
enum SessionOpened {
    /// It existed, or was started (with where and whether its name had
    /// expired).
    Interactive(Opened),
    /// A background job's new session, started in this directory.
    Background(PathBuf),
}

impl SessionOpened {
    fn as_note(&self) -> render::SessionNote {
        match self {
            SessionOpened::Interactive(Opened::Existing) => render::SessionNote::Existing,
            SessionOpened::Interactive(Opened::Started { cwd, expired_before }) => {
                render::SessionNote::Started { cwd: cwd.clone(), expired_before: *expired_before }
            }
            SessionOpened::Background(cwd) => render::SessionNote::Background { cwd: cwd.clone() },
        }
    }
}

/// How long the call that starts a background job waits before it
/// returns with the job's first output.
const BACKGROUND_FIRST_WAIT: Duration = Duration::from_secs(1);

impl Shellkeep {
    /// Finds or starts the session a `terminal` call names; errors are
    /// worded for the agent.
    fn open_for(
        &self,
        args: &TerminalArgs,
        cwd: Option<PathBuf>,
    ) -> Result<(Lease, SessionOpened), String> {
        let registry = &self.shared.sessions;
        if args.background {
            if args.is_input || args.reset || args.command.trim().is_empty() {
                return Err("background=true starts a new command as a job in a session of its \
                    own: give a command, without is_input or reset. To poll a job or send it \
                    input, call terminal with its `session` and background=false."
                    .to_owned());
            }
            let (lease, cwd) = registry
                .open_background(args.session.as_deref(), cwd, &args.command)
                .map_err(|err| err.to_string())?;
            return Ok((lease, SessionOpened::Background(cwd)));
        }
        let name = args.session.as_deref().unwrap_or(DEFAULT_SESSION);
        registry
            .open(name, cwd)
            .map(|(lease, opened)| (lease, SessionOpened::Interactive(opened)))
            .map_err(|err| err.to_string())
    }

    /// Adds the notices of background jobs that ended since the last reply
    /// to `result`: a line of text each and `jobs_ended` in the structured
    /// content.
    fn with_job_notices(&self, mut result: CallToolResult) -> CallToolResult {
        let ended = self.shared.sessions.take_ended_jobs();
        if ended.is_empty() {
            return result;
        }
        let (text, structured) = render::jobs_ended(&ended);
        result.content.push(ContentBlock::text(text));
        if let Some(serde_json::Value::Object(map)) = &mut result.structured_content {
            map.insert("jobs_ended".to_owned(), structured);
        }
        result
    }

    /// Adds what happened to the orphan guard that this reply's reader has
    /// not been told yet: a line of text, and for a `terminal` reply
    /// (`session`: its session's name, the reader) an entry of `notes`.
    /// `run` replies (`None`) are one reader together.
    fn with_guard_notice(
        &self,
        mut result: CallToolResult,
        session: Option<&str>,
    ) -> CallToolResult {
        let guard = self.shared.guard.as_ref();
        let reader = session.unwrap_or("");
        let Some(notice) = guard.and_then(|guard| guard.take_notice(reader)) else { return result };
        if session.is_some()
            && let Some(serde_json::Value::Object(map)) = &mut result.structured_content
            && let serde_json::Value::Array(notes) =
                map.entry("notes").or_insert_with(|| serde_json::Value::Array(Vec::new()))
        {
            notes.push(notice.clone().into());
        }
        result.content.push(ContentBlock::text(notice));
        result
    }

    /// The limits for `command`: the agent's explicit values, else the
    /// policy's.
    fn decide(
        &self,
        command: &str,
        timeout_sec: Option<f64>,
        no_output_timeout_sec: Option<f64>,
    ) -> Result<Decision, String> {
        let explicit = timeout_sec
            .map(ExplicitTimeout::try_from)
            .transpose()
            .map_err(|err| err.naming("timeout_sec"))?;
        let no_output = no_output_timeout_sec
            .map(ExplicitTimeout::try_from)
            .transpose()
            .map_err(|err| err.naming("no_output_timeout_sec"))?;
        let decision = self.shared.policy.decide(command, explicit);
        Ok(match no_output {
            Some(no_output) => decision.with_no_output(no_output),
            None => decision,
        })
    }
}

/// What the kernel cannot take in a `run` request, found before anything
/// starts: a NUL byte in the command, the working directory or the
/// environment (C strings end there), and environment names that are empty
/// or contain `=`. The message names the argument at fault.
fn check_run_args(args: &RunArgs) -> Result<(), String> {
    const NUL: &str = "contains a NUL byte (\\0), which a command line cannot carry; remove it \
         (to pass binary data, use `stdin` or a file)";
    if args.command.contains('\0') {
        return Err(format!("`command` {NUL}"));
    }
    if args.cwd.as_deref().is_some_and(|cwd| cwd.contains('\0')) {
        return Err(format!("`cwd` {NUL}"));
    }
    for (name, value) in args.env.iter().flatten() {
        let shown = render::echo(name);
        if name.is_empty() {
            return Err("`env` has an empty variable name; give each variable a name".to_owned());
        }
        if name.contains('=') {
            return Err(format!(
                "`env` name {shown} contains `=`, which cannot be part of a variable name; put \
                 the value on the right-hand side"
            ));
        }
        if name.contains('\0') {
            return Err(format!("`env` name {shown} {NUL}"));
        }
        if name == shellkeep_engine::process::SCOPE_VAR {
            return Err(format!(
                "`env` name {shown} cannot be set: shellkeep marks every process a command \
                 starts with it, to stop them all when the command ends; remove it"
            ));
        }
        if value.contains('\0') {
            return Err(format!("`env` value of {shown} {NUL}"));
        }
    }
    Ok(())
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Shellkeep {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("shellkeep", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "shellkeep gives you a persistent bash terminal (`terminal`) and a one-shot \
                 runner that never hangs (`run`). Use `terminal` for work that builds on state \
                 (cd, export, venvs); use `run` for independent commands with a hard limit.",
            )
    }
}

/// Sends each progress report of a waiting `terminal` call to the client
/// as `notifications/progress`: `progress` counts the reports (strictly
/// increasing), `message` is the newest line of output. The engine reports
/// about once a second, which is the rate limit, so the queue holds at most
/// a report or two (one per second of the call). Ends when the call ends.
async fn forward_progress(
    peer: Peer<RoleServer>,
    token: ProgressToken,
    mut reports: tokio::sync::mpsc::UnboundedReceiver<Progress>,
) {
    while let Some(report) = reports.recv().await {
        let mut param = ProgressNotificationParam::new(token.clone(), report.count as f64);
        if !report.line.trim().is_empty() {
            param = param.with_message(report.line);
        }
        if let Err(err) = peer.notify_progress(param).await {
            tracing::debug!("could not send progress: {err}");
        }
    }
}

/// A result with readable text and structured content. Output that could
/// pass for one of shellkeep's notices never shares a text block with
/// them (see [`render::Blocks`]).
fn structured_result(
    text: impl Into<render::Blocks>,
    structured: &impl Serialize,
    is_error: bool,
) -> CallToolResult {
    let content: Vec<ContentBlock> =
        text.into().into_texts().into_iter().map(ContentBlock::text).collect();
    let mut result = if is_error {
        CallToolResult::error(content)
    } else {
        let mut result = CallToolResult::success(content);
        // `isError` defaults to false: leaving it out saves every reply bytes.
        result.is_error = None;
        result
    };
    result.structured_content = serde_json::to_value(structured).ok();
    result
}

/// A tool error the agent reads: what went wrong and what to do.
fn tool_error(message: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}

/// Tool schemas in the subset of JSON Schema every client accepts. schemars
/// writes an `Option` as `"type": ["number", "null"]` and numbers with
/// `format` values such as `double` or `uint64`; some clients (those that
/// map schemas onto a single-`type` dialect, such as Gemini's function
/// declarations) reject or misread those.
pub mod schema {
    use rmcp::model::JsonObject;
    use serde_json::Value;

    /// The `format` values JSON Schema defines; any other is left out.
    pub const STANDARD_FORMATS: &[&str] = &[
        "date-time",
        "date",
        "time",
        "duration",
        "email",
        "idn-email",
        "hostname",
        "idn-hostname",
        "ipv4",
        "ipv6",
        "uri",
        "uri-reference",
        "iri",
        "iri-reference",
        "uuid",
        "uri-template",
        "json-pointer",
        "relative-json-pointer",
        "regex",
    ];

    /// Declares `jobs_ended`, which any reply may carry (background jobs
    /// that ended since the last reply, each reported once), in an output
    /// schema.
    pub fn declare_jobs_ended(schema: &mut JsonObject) {
        let jobs = serde_json::json!({
            "type": "array",
            "description": "Background jobs that ended since the last reply, each reported once.",
            "items": {
                "type": "object",
                "properties": {
                    "session": {"type": "string", "description": "The job's session."},
                    "command": {"type": "string", "description": "Its command (cut to 200 characters)."},
                    "exit_code": {"type": "integer", "description": "Its exit code."},
                    "ran_sec": {"type": "number", "description": "How long it ran, in seconds."}
                },
                "required": ["session", "command", "exit_code", "ran_sec"]
            }
        });
        if let Some(Value::Object(properties)) = schema.get_mut("properties") {
            properties.insert("jobs_ended".to_owned(), jobs);
        }
    }

    /// `schema` rewritten for portability: an optional property (one not in
    /// `required`) has its plain type without `null`; a property that is
    /// always present but may be `null` becomes `anyOf` of single-type
    /// branches; `null` defaults and non-standard formats are dropped.
    pub fn portable(schema: &JsonObject) -> JsonObject {
        let mut schema = schema.clone();
        walk(&mut schema);
        schema
    }

    fn walk(schema: &mut JsonObject) {
        if schema.get("default") == Some(&Value::Null) {
            schema.remove("default");
        }
        if let Some(Value::String(format)) = schema.get("format")
            && !STANDARD_FORMATS.contains(&format.as_str())
        {
            schema.remove("format");
        }
        let required: Vec<String> = match schema.get("required") {
            Some(Value::Array(names)) => {
                names.iter().filter_map(|n| n.as_str().map(str::to_owned)).collect()
            }
            _ => Vec::new(),
        };
        if let Some(Value::Object(properties)) = schema.get_mut("properties") {
            for (name, property) in properties.iter_mut() {
                if let Value::Object(property) = property {
                    single_type(property, required.contains(name));
                }
            }
        }
        for (key, value) in schema.iter_mut() {
            match (key.as_str(), value) {
                (
                    "properties" | "$defs" | "definitions" | "patternProperties",
                    Value::Object(map),
                ) => {
                    for sub in map.values_mut() {
                        if let Value::Object(sub) = sub {
                            walk(sub);
                        }
                    }
                }
                ("items" | "additionalProperties" | "not" | "contains", Value::Object(sub)) => {
                    walk(sub)
                }
                ("anyOf" | "oneOf" | "allOf" | "prefixItems", Value::Array(list)) => {
                    for sub in list {
                        if let Value::Object(sub) = sub {
                            walk(sub);
                        }
                    }
                }
                _ => {}
            }
        }
        // A single type, not a list of one.
        if let Some(Value::Array(types)) = schema.get("type")
            && types.len() == 1
        {
            let only = types[0].clone();
            schema.insert("type".to_owned(), only);
        }
    }

    /// Rewrites a property's `type` list: `null` dropped when the property
    /// may be left out, else one `anyOf` branch per type.
    fn single_type(property: &mut JsonObject, required: bool) {
        if let Some(Value::Array(types)) = property.get("type").cloned() {
            let non_null: Vec<Value> = types.into_iter().filter(|t| t != "null").collect();
            let nullable = non_null.len() < property["type"].as_array().map_or(0, Vec::len);
            if !nullable || !required {
                property.insert("type".to_owned(), Value::Array(non_null));
            } else {
                property.remove("type");
                let mut branches: Vec<Value> =
                    non_null.into_iter().map(|t| serde_json::json!({"type": t})).collect();
                branches.push(serde_json::json!({"type": "null"}));
                property.insert("anyOf".to_owned(), Value::Array(branches));
            }
        }
        if !required && let Some(Value::Array(branches)) = property.get_mut("anyOf") {
            branches.retain(|branch| branch.get("type") != Some(&Value::String("null".into())));
            if branches.len() == 1
                && let Some(Value::Object(only)) = branches.pop()
            {
                property.remove("anyOf");
                for (key, value) in only {
                    property.entry(key).or_insert(value);
                }
            }
        }
    }

    #[cfg(test)]
    mod tests {
        use serde_json::json;

        fn portable(schema: serde_json::Value) -> serde_json::Value {
            let serde_json::Value::Object(schema) = schema else { unreachable!() };
            serde_json::Value::Object(super::portable(&schema))
        }

        #[test]
        fn optional_properties_lose_null_and_required_ones_become_any_of() {
            let schema = json!({
                "type": "object",
                "required": ["always"],
                "properties": {
                    "optional": {"type": ["number", "null"], "format": "double", "default": null},
                    "always": {"type": ["string", "null"], "description": "d"},
                    "count": {"type": "integer", "format": "uint64", "minimum": 0},
                    "when": {"type": "string", "format": "date-time"},
                    "nested": {"type": "object", "properties": {
                        "deep": {"anyOf": [{"$ref": "#/$defs/X"}, {"type": "null"}]},
                    }},
                },
            });
            assert_eq!(
                portable(schema),
                json!({
                    "type": "object",
                    "required": ["always"],
                    "properties": {
                        "optional": {"type": "number"},
                        "always": {
                            "anyOf": [{"type": "string"}, {"type": "null"}],
                            "description": "d",
                        },
                        "count": {"type": "integer", "minimum": 0},
                        "when": {"type": "string", "format": "date-time"},
                        "nested": {"type": "object", "properties": {
                            "deep": {"$ref": "#/$defs/X"},
                        }},
                    },
                })
            );
        }
    }
}
