//! The MCP tools: the `Shellkeep` handler, one file per tool (its
//! description and its call into the engine), and what every reply goes
//! through: tool errors, structured results, notices of jobs and of the
//! orphan guard, and the sandbox's facts.
//!
//! Every call takes one path (`call_tool`, then `Shellkeep::reply`, a task's
//! too): its arguments sorted by one rule (`args::sort_arguments`), its turn
//! awaited when it asked to wait for earlier calls ([`Turns`]), its tool
//! called, its notes added and every string masked (`render::mask`).
//!
//! The only module that knows `rmcp`'s tool API. Not for checking arguments
//! (`args`), wording replies (`render`) or rewriting schemas (`schema`);
//! nothing here runs a command itself.

mod clients;
mod output;
mod policy_explain;
mod run;
mod session_close;
mod sessions;
mod terminal;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientRequest, ContentBlock, Implementation, JsonObject,
    RequestId, ServerCapabilities,
};
use rmcp::{ServerHandler, tool_handler};
use serde::Serialize;
use serde_json::Value;
use shellkeep_engine::Guard;
use shellkeep_engine::{DEFAULT_SESSION, JobEnded};
use shellkeep_engine::{Decision, Policy};
use shellkeep_engine::{Denial, Enforcement, SandboxPolicy, check_sandbox, sandbox_denial};
use tokio_util::sync::CancellationToken;

use crate::args::{self, ArgumentNames, ExplicitLimits};
use crate::audit::{self, AuditCall, AuditLog};
use crate::config::ServerConfig;
pub(crate) use crate::render::RefusedSignal;
use crate::tasks;
use crate::wire::Arrivals;
use crate::{render, schema};

pub(crate) use clients::{Client, Clients, Principal};

/// What outlives clients, built once at start-up and shared by every
/// client's calls: the policy, full outputs, the guard, the audit log and
/// the clients themselves.
pub(crate) struct Core {
    /// Every client, each with its own sessions and `run` outputs.
    pub clients: Arc<Clients>,
    /// The timeout policy in force.
    pub policy: Policy,
    /// Where the policy came from, for explanations.
    pub policy_origin: String,
    /// Where cut outputs are saved in full, and the limits on them.
    pub spill: Arc<shellkeep_engine::SpillStore>,
    /// The server's checked configuration: `run`'s stream cap and grace
    /// period, and the limits tool descriptions state.
    pub config: ServerConfig,
    /// The orphan guard, if running.
    pub guard: Option<Arc<Guard>>,
    /// Where every call that runs something leaves a start and an end
    /// line, if the server keeps an audit log.
    pub audit: Option<Arc<AuditLog>>,
}

/// The MCP server: a cheap handle on the core and, for one call, on the
/// client it belongs to.
#[derive(Clone)]
pub(crate) struct Shellkeep {
    core: Arc<Core>,
    /// The client of the call being served (the local one outside calls).
    client: Arc<Client>,
    tool_router: Arc<rmcp::handler::server::tool::ToolRouter<Shellkeep>>,
    /// Every tool's argument names, read from its input schema.
    names: Arc<Vec<ArgumentNames>>,
    /// The calls in flight, in arrival order, for `wait_for_previous`.
    turns: Arc<Turns>,
}

impl Shellkeep {
    /// A server over `core`: every tool, its schemas made portable and
    /// its descriptions stating `core.config`'s limits. Each call is served
    /// for its client: the principal the request carries (HTTP), else the
    /// local client (stdio).
    pub(crate) fn new(core: Arc<Core>) -> Shellkeep {
        let mut tool_router = Self::terminal_router()
            + Self::run_router()
            + Self::policy_explain_router()
            + Self::sessions_router()
            + Self::output_router()
            + Self::session_close_router();
        let config = &core.config;
        for route in tool_router.map.values_mut() {
            let tool = &mut route.attr;
            let mut input = schema::portable(&tool.input_schema);
            let description = match tool.name.as_ref() {
                "terminal" => terminal::describe(config, &mut input),
                "run" => run::describe(config, &core.policy, &mut input),
                "policy_explain" => policy_explain::describe(&mut input),
                "sessions" => sessions::describe(config),
                "output" => output::describe(config, &mut input),
                "session_close" => session_close::describe(config),
                other => unreachable!("the tool {other} has no description"),
            };
            tool.description = Some(description.into());
            tool.input_schema = Arc::new(input);
            if let Some(output) = &tool.output_schema {
                let mut output = (**output).clone();
                schema::declare_notices(&mut output);
                tool.output_schema = Some(Arc::new(schema::portable(&output)));
            }
        }
        let names = tool_router
            .map
            .values()
            .map(|route| ArgumentNames::from_schema(&route.attr.name, &route.attr.input_schema))
            .collect();
        let client = core.clients.local();
        Shellkeep {
            core,
            client,
            tool_router: Arc::new(tool_router),
            names: Arc::new(names),
            turns: Arc::default(),
        }
    }

    /// The client `context`'s request belongs to: its principal's, when
    /// the HTTP layer authenticated one, else the local client.
    pub(crate) fn client(
        &self,
        context: &rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Arc<Client> {
        let principal = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Principal>());
        match principal {
            Some(Principal(name)) => self.core.clients.principal(name),
            None => self.core.clients.local(),
        }
    }

    /// The calls in flight in arrival order: the wire tells it of each
    /// request as it arrives (see [`Arrivals`]).
    pub(crate) fn turns(&self) -> Arc<Turns> {
        Arc::clone(&self.turns)
    }

    /// Sorts `request`'s arguments by the one rule of
    /// [`args::sort_arguments`]; returns the unknown names taken out, to
    /// name in the reply, or the error for a near miss. A tool that does
    /// not exist is left to the router.
    fn sort_arguments(&self, request: &mut CallToolRequestParams) -> Result<Vec<String>, String> {
        let Some(tool) = self.names.iter().find(|names| names.tool == request.name) else {
            return Ok(Vec::new());
        };
        match &mut request.arguments {
            Some(arguments) => args::sort_arguments(arguments, tool, &self.names),
            None => Ok(Vec::new()),
        }
    }

    /// Adds the notices of background jobs that ended, or began waiting
    /// for input, since the last reply to `result`: a line of text each and
    /// `jobs_ended` or `jobs_waiting` in the structured content; the audit
    /// log gets each job's end line.
    fn with_job_notices(&self, result: CallToolResult) -> CallToolResult {
        self.with_waiting_jobs(self.with_ended_jobs(result))
    }

    /// Adds the notices of background jobs that began waiting for input,
    /// each wait once. A reply about a job's own session (its start, a
    /// poll) that says it waits reports that wait itself.
    fn with_waiting_jobs(&self, mut result: CallToolResult) -> CallToolResult {
        let fields = result.structured_content.as_ref();
        let own = fields
            .filter(|fields| {
                fields.get("waiting_for_input").and_then(serde_json::Value::as_bool) == Some(true)
                    || fields.get("status").and_then(serde_json::Value::as_str)
                        == Some("waiting_for_input")
            })
            .and_then(|fields| fields.get("session")?.as_str());
        let mut waiting = self.client.sessions.take_waiting_jobs(own);
        if waiting.is_empty() {
            return result;
        }
        // A job's command and prompt are masked as output is.
        let masks = &self.core.config.masks;
        for job in &mut waiting {
            job.command = render::mask(masks, &job.command);
            job.prompt = render::mask(masks, &job.prompt);
        }
        let (text, structured) = render::jobs_waiting(&waiting);
        push_notice(&mut result, text, "jobs_waiting", structured);
        result
    }

    /// Adds the notices of background jobs that ended since the last
    /// reply; the audit log gets each job's end line.
    fn with_ended_jobs(&self, mut result: CallToolResult) -> CallToolResult {
        let mut ended = self.client.sessions.take_ended_jobs();
        if ended.is_empty() {
            return result;
        }
        // A job's command is masked as output is, in the notice and the log.
        for job in &mut ended {
            job.command = render::mask(&self.core.config.masks, &job.command);
        }
        if let Some(log) = &self.core.audit {
            for job in &ended {
                let session = self.client.qualified(&job.session);
                log.job_ended(&JobEnded { session, ..job.clone() });
            }
        }
        let (text, structured) = render::jobs_ended(&ended);
        push_notice(&mut result, text, "jobs_ended", structured);
        result
    }

    /// Adds what happened to the orphan guard that this reply's reader has
    /// not been told yet: a line of text and an entry of `notes`
    /// (`session`: the reader, a `terminal` reply's session; `run` replies,
    /// `None`, are one reader together).
    fn with_guard_notice(
        &self,
        mut result: CallToolResult,
        session: Option<&str>,
    ) -> CallToolResult {
        if let Some(notice) = take_refused_signals() {
            push_note(&mut result, render::mask(&self.core.config.masks, &notice));
        }
        let guard = self.core.guard.as_ref();
        let reader = self.client.notice_reader(session);
        let Some(notice) = guard.and_then(|guard| guard.take_notice(&reader)) else {
            return result;
        };
        push_note(&mut result, notice);
        result
    }

    /// Adds, to the server's first complete reply only, that earlier
    /// servers of the audit log died with commands running (found at
    /// start): a text block and `servers_died` in the structured content.
    fn with_servers_died(&self, result: &mut CallToolResult) {
        let Some(log) = &self.core.audit else { return };
        let Some((text, structured)) = render::servers_died(&log.take_dead_servers()) else {
            return;
        };
        push_notice(result, text, "servers_died", structured);
    }

    /// Writes the start line of a call that runs something, with the
    /// client that `peer` named in its `initialize` request; the returned
    /// call writes the end line.
    fn audit(
        &self,
        peer: &rmcp::service::Peer<rmcp::RoleServer>,
        start: audit::Start,
    ) -> AuditCall {
        let Some(log) = &self.core.audit else { return AuditCall::none() };
        let client = peer.peer_info().map(|info| audit::Client::new(&info.client_info));
        log.begin(client, start.by(self.client.principal.as_deref()))
    }

    /// The limits for `command`: the agent's explicit values, else the
    /// policy's.
    fn decide(&self, command: &str, explicit: ExplicitLimits) -> Decision {
        let decision = self.core.policy.decide(command, explicit.timeout);
        match explicit.no_output {
            Some(no_output) => decision.with_no_output(no_output),
            None => decision,
        }
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Shellkeep {
    /// Calls the tool. An error's text can quote what the agent sent (an
    /// argument that did not parse, a session name): it is masked as
    /// output is.
    ///
    /// First, for every tool alike: the arguments are sorted (a near miss
    /// of a name is an error, other unknown names are taken out and named
    /// in a note of the reply), and a call with `wait_for_previous: true`
    /// waits for its turn ([`Self::reply`]).
    ///
    /// A call that declares the Tasks extension and may block long
    /// (`tasks::wanted`) is answered at once with a task; a terminal call on
    /// a session whose task's command runs is refused, naming the task; a
    /// terminal call's reply is offered to a task of its session that waits
    /// for input (the answer to its prompt).
    async fn call_tool(
        &self,
        request: rmcp::model::CallToolRequestParams,
        context: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, rmcp::ErrorData> {
        if let Some(kind) = tasks::wanted(&request, &context.meta, self.core.config.max_wait) {
            return Ok(self.start_task(kind, request, context));
        }
        let session = tasks::session_of(&request);
        let client = self.client(&context);
        if let Some(task) = session.as_deref().and_then(|session| client.tasks.holding(session)) {
            let message = render::session_held_by_task(session.as_deref().unwrap_or(""), &task);
            let message = render::mask(&self.core.config.masks, &message);
            return Ok(rmcp::model::CallToolResponse::Complete(tool_error(message)));
        }
        let response = self.reply(request, context).await;
        if let (Some(session), Ok(rmcp::model::CallToolResponse::Complete(result))) =
            (session, &response)
        {
            client.tasks.session_replied(&session, result);
        }
        response
    }

    async fn get_task(
        &self,
        request: rmcp::model::GetTaskParams,
        context: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::GetTaskResult, rmcp::ErrorData> {
        let task = self.client(&context).tasks.get(&request.task_id);
        task.map(rmcp::model::GetTaskResult::new).ok_or_else(|| self.unknown_task(&request.task_id))
    }

    async fn cancel_task(
        &self,
        request: rmcp::model::CancelTaskParams,
        context: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<(), rmcp::ErrorData> {
        match self.client(&context).tasks.cancel(&request.task_id) {
            true => Ok(()),
            false => Err(self.unknown_task(&request.task_id)),
        }
    }

    /// Refused: a command's input goes to its terminal (`is_input`), never
    /// through the client's forms, where a password would pass through it.
    async fn update_task(
        &self,
        request: rmcp::model::UpdateTaskParams,
        context: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<(), rmcp::ErrorData> {
        if !self.client(&context).tasks.knows(&request.task_id) {
            return Err(self.unknown_task(&request.task_id));
        }
        Err(rmcp::ErrorData::invalid_params(render::task_update_refused(), None))
    }

    /// A method no typed request has. On stdio the wire answers it first;
    /// on another transport the words are the same (`tasks/result` and
    /// `tasks/list` say what to do instead).
    async fn on_custom_request(
        &self,
        request: rmcp::model::CustomRequest,
        _context: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::CustomResult, rmcp::ErrorData> {
        let message = render::unknown_method(&request.method);
        let message = render::mask(&self.core.config.masks, &message);
        Err(rmcp::ErrorData::new(rmcp::model::ErrorCode::METHOD_NOT_FOUND, message, None))
    }

    fn get_info(&self) -> rmcp::model::ServerConfig {
        let capabilities = ServerCapabilities::builder().enable_tools().enable_tasks().build();
        rmcp::model::ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("shellkeep", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }
}

impl Shellkeep {
    /// The reply to a call, the one path every reply takes, a task's too:
    /// the arguments sorted, the turn awaited, the tool called, the notes
    /// added and everything masked.
    async fn reply(
        &self,
        mut request: rmcp::model::CallToolRequestParams,
        context: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, rmcp::ErrorData> {
        use rmcp::model::CallToolResponse;
        // The call's turn ends when this returns, however it returns.
        let _turn = self.turns.enter(&context.id, &request);
        let masks = &self.core.config.masks;
        let ignored = match self.sort_arguments(&mut request) {
            Ok(ignored) => ignored,
            Err(message) => {
                let message = render::mask(masks, &message);
                return Ok(CallToolResponse::Complete(tool_error(message)));
            }
        };
        if let Err(not_run) = self.turns.wait(&context.id, &context.ct).await {
            return Ok(CallToolResponse::Complete(tool_error(not_run.to_string())));
        }
        let tool = request.name.clone();
        let cancelled = context.ct.clone();
        // The tools serve the call's own client.
        let this = Shellkeep { client: self.client(&context), ..self.clone() };
        let call = rmcp::handler::server::tool::ToolCallContext::new(&this, request, context);
        let mut response = this.tool_router.call(call).await;
        // A reply the client reads (not a cancelled call's) carries what
        // became of its earlier cancelled calls.
        if let Ok(CallToolResponse::Complete(result)) = &mut response
            && !cancelled.is_cancelled()
        {
            let (notes, more) = this.client.tasks.take_notes();
            notes.into_iter().for_each(|note| push_note(result, note));
            if more > 0 {
                push_note(result, render::more_runs_cancelled(more));
            }
        }
        if !ignored.is_empty()
            && let Some(names) = self.names.iter().find(|names| names.tool == tool)
            && let Ok(CallToolResponse::Complete(result)) = &mut response
        {
            let note = render::ignored_arguments(&tool, &ignored, &names.known);
            push_note(result, render::mask(masks, &note));
        }
        if let Ok(CallToolResponse::Complete(result)) = &mut response {
            self.with_servers_died(result);
            // Every reply of a confined server says what is enforced; a
            // session's or a command's own was set by its tool.
            with_sandbox(result, self.core.config.enforcement.as_ref());
        }
        // Every string a reply shows passes the masker here, whatever put
        // it there: output (masked already as it streamed), and the working
        // directory, the interpreter, session and job names, and errors
        // that quote what the agent sent.
        let mask = |text: &str| render::mask(masks, text);
        match &mut response {
            Ok(CallToolResponse::Complete(result)) => {
                for block in &mut result.content {
                    if let ContentBlock::Text(text) = block {
                        text.text = mask(&text.text);
                    }
                }
                if let Some(fields) = &mut result.structured_content {
                    render::mask_json(fields, &mask);
                }
            }
            Err(error) => error.message = mask(&error.message).into(),
            _ => {}
        }
        response
    }

    /// Makes `request` a task of `kind` and answers with its handle at
    /// once; the call goes on in a task of its own, through [`Self::reply`]
    /// with a cancellation token of the task's and no progress token
    /// (progress is not sent for tasks). Refused, as a tool error, when the
    /// server's session budget is full (a `run` task takes a place) or the
    /// client runs as many tasks as the server has places.
    fn start_task(
        &self,
        kind: tasks::Kind,
        request: rmcp::model::CallToolRequestParams,
        mut context: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> rmcp::model::CallToolResponse {
        use rmcp::model::CallToolResponse;
        let config = &self.core.config;
        let ttl = tasks::ttl(&kind, &request, &self.core.policy, config.grace);
        let client = self.client(&context);
        // A `run` task takes a place of the server's session budget while
        // it runs; a terminal task holds its session, which has one.
        let hold = match kind {
            tasks::Kind::Run => match client.sessions.budget().hold() {
                Some(hold) => Some(hold),
                None => {
                    let limit = client.sessions.budget().max();
                    return CallToolResponse::Complete(tool_error(render::budget_full(limit)));
                }
            },
            tasks::Kind::Terminal { .. } => None,
        };
        let tasks = Arc::clone(&client.tasks);
        let made = tasks.create(kind, ttl, config.sessions.max_sessions);
        let (task, handle) = match made {
            Ok(made) => made,
            Err(too_many) => {
                return CallToolResponse::Complete(tool_error(render::too_many_tasks(
                    too_many.limit,
                )));
            }
        };
        context.meta.0.0.remove("progressToken");
        context.extensions.insert(tasks::TaskCall);
        // Its own turn: the request's ends as the handle goes out.
        context.id = RequestId::String(format!("task {}", handle.id).into());
        let server = self.clone();
        let call = move |request, ct| {
            let (server, mut context) = (server.clone(), context.clone());
            context.ct = ct;
            async move {
                match server.reply(request, context).await {
                    Ok(CallToolResponse::Complete(result)) => Ok(result),
                    Ok(_) => Err(rmcp::ErrorData::internal_error(render::task_broken(), None)),
                    Err(error) => Err(error),
                }
            }
        };
        let masks = Arc::clone(&self.core.config.masks);
        tokio::spawn(async move {
            tasks::drive(tasks, handle, request, call, masks).await;
            // The place is given back as the task ends.
            drop(hold);
        });
        CallToolResponse::Task(rmcp::model::CreateTaskResult::new(task))
    }

    /// The error for a task id this client does not have (`-32602`); the
    /// id is masked as anything the agent sent is.
    fn unknown_task(&self, id: &str) -> rmcp::ErrorData {
        let message = render::unknown_task(id);
        rmcp::ErrorData::invalid_params(render::mask(&self.core.config.masks, &message), None)
    }
}

/// What a client shows its model before it loads any tool schema (Claude
/// Code and Codex defer the schemas until the model searches for a tool):
/// the tools, what each is for, and the first call to make.
const INSTRUCTIONS: &str = "shellkeep: a persistent bash shell in a real terminal, and a one-shot \
runner that never hangs. Prefer them to a built-in shell tool for work that builds on state or \
may hang.
- terminal: run a command in a shell that keeps cwd, env, venvs and jobs between calls; \
interactive programs, prompts and full screens work; background=true starts a job in its own \
session. First call: {\"command\": \"pwd\"}. Exit code -1 means still running: send \
{\"command\": \"\"} to wait, or is_input=true to answer a prompt or send C-c.
- run: one command in a fresh process with a hard time limit, stdout and stderr apart \
({\"command\": \"make test\"}).
- output: read the lines a cut reply left out (the reply gives the exact call).
- sessions: list the sessions and background jobs; session_close: stop one.
- policy_explain: the time limits a command would get.";

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

/// Adds a notice to `result`: `text` as a block of its own ([`push_line`])
/// and `structured` as the field `field` of the structured content.
fn push_notice(
    result: &mut CallToolResult,
    text: String,
    field: &str,
    structured: serde_json::Value,
) {
    push_line(result, text);
    if let Some(serde_json::Value::Object(map)) = &mut result.structured_content {
        render::insert_before_body(map, field, structured);
    }
}

/// What the kernel enforces of `policy` here, the sandbox of a session or
/// command (`None`: it confines nothing). What a policy misses is said,
/// never an error: one that the kernel could not enforce without best
/// effort never started.
fn enforcement_of(policy: &SandboxPolicy) -> Option<Enforcement> {
    if !policy.is_confined() {
        return None;
    }
    check_sandbox(&SandboxPolicy { best_effort: true, ..policy.clone() }).ok()
}

/// Adds `sandbox`, what a confined session or command runs under
/// (`enforcement`; `None`: nothing is confined), to `result`'s structured
/// content, unless it has one already.
fn with_sandbox(result: &mut CallToolResult, enforcement: Option<&Enforcement>) {
    if let Some(serde_json::Value::Object(map)) = &mut result.structured_content {
        insert_sandbox(map, enforcement);
    }
}

/// Inserts `sandbox` (see [`with_sandbox`]) into structured content `map`,
/// unless it has one already.
pub(crate) fn insert_sandbox(
    map: &mut serde_json::Map<String, serde_json::Value>,
    enforcement: Option<&Enforcement>,
) {
    let Some(enforcement) = enforcement else { return };
    if !map.contains_key("sandbox") {
        let fields = render::sandbox::SandboxOutput::new(enforcement);
        let value = serde_json::to_value(fields).unwrap_or_default();
        render::insert_before_body(map, "sandbox", value);
    }
}

/// Adds to the reply of a failed command (`failed`) whose output
/// (`output`) shows what the sandbox it ran under (`policy`) most likely
/// denied: the one sentence that says so (a note) and `sandbox_denial`.
/// `cwd`, the command's directory when known, places the relative paths
/// of its errors (`touch x` in a read-only session).
fn with_denial(
    result: &mut CallToolResult,
    policy: &SandboxPolicy,
    failed: bool,
    output: &str,
    cwd: Option<&std::path::Path>,
) {
    let Some(denial) = denial_of(policy, failed, output, cwd) else { return };
    let (line, field) = render::sandbox::denial(&denial, policy);
    if let Some(serde_json::Value::Object(map)) = &mut result.structured_content {
        let value = serde_json::to_value(field).unwrap_or_default();
        render::insert_before_body(map, "sandbox_denial", value);
    }
    push_note(result, line);
}

/// Describes a tool's `sandbox` and `network` arguments for this server
/// (`what` they apply to: "a new session", "this command"), and returns
/// the sentence its description gives the server's sandbox (with a leading
/// space), or nothing when there is none.
fn describe_sandbox(config: &ServerConfig, input: &mut JsonObject, what: &str) -> String {
    let server = &config.sandbox;
    schema::describe_property(input, "sandbox", render::sandbox::sandbox_argument(server, what));
    schema::describe_property(input, "network", render::sandbox::network_argument(server, what));
    render::sandbox::description(server, config.enforcement.as_ref())
        .map(|text| format!(" {text}"))
        .unwrap_or_default()
}

/// What the sandbox (`policy`) most likely denied a failed command
/// (`failed`), from its output, a relative path read from `cwd` (see
/// [`with_denial`] and `sandbox_denial`).
pub(crate) fn denial_of(
    policy: &SandboxPolicy,
    failed: bool,
    output: &str,
    cwd: Option<&std::path::Path>,
) -> Option<Denial> {
    if !failed {
        return None;
    }
    sandbox_denial(policy, output, cwd)
}

/// The most refused signals one notice names; more are only counted.
pub(crate) const REFUSED_SIGNALS_NAMED: usize = 4;

/// Refused signals no reply has told of yet: the first ones named, the
/// rest counted. Signals are the whole process's, so this is too.
static REFUSED_SIGNALS: Mutex<(Vec<RefusedSignal>, usize)> = Mutex::new((Vec::new(), 0));

/// Keeps `refused` for the next reply of any session or `run` (one notice).
pub(crate) fn note_refused_signal(refused: RefusedSignal) {
    let mut pending = REFUSED_SIGNALS.lock().unwrap_or_else(PoisonError::into_inner);
    if pending.0.len() < REFUSED_SIGNALS_NAMED {
        pending.0.push(refused);
    } else {
        pending.1 += 1;
    }
}

/// The notice of the signals refused since the last one, if any (unmasked).
fn take_refused_signals() -> Option<String> {
    let (named, more) =
        std::mem::take(&mut *REFUSED_SIGNALS.lock().unwrap_or_else(PoisonError::into_inner));
    (!named.is_empty()).then(|| render::refused_signals(&named, more))
}

/// A tool error the agent reads: what went wrong and what to do.
fn tool_error(message: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}

/// Adds `line` to `result`'s text as a block of its own that starts on a
/// line of its own, also for a client that joins text blocks as they are.
fn push_line(result: &mut CallToolResult, line: String) {
    let glued = result
        .content
        .last()
        .and_then(|block| block.as_text())
        .is_some_and(|last| !last.text.is_empty() && !last.text.ends_with('\n'));
    let line = if glued { format!("\n{line}") } else { line };
    result.content.push(ContentBlock::text(line));
}

/// Adds a notice to `result`: a line of its text ([`push_line`]) and an
/// entry of `notes` in its structured content, when it has one (every
/// output schema declares `notes`; a tool error has no structured content).
fn push_note(result: &mut CallToolResult, note: String) {
    if let Some(Value::Object(map)) = &mut result.structured_content {
        render::push_note(map, note.clone());
    }
    push_line(result, note);
}

/// The most calls that may wait for earlier ones at once
/// (`wait_for_previous`); one more is refused with an error saying why.
/// It is half the wire's bound on requests in flight (`wire::MAX_IN_FLIGHT`,
/// 64), so waiting calls alone never stop the server from reading requests.
pub(crate) const MAX_WAITING: usize = 32;

/// The tool calls in flight, in the order their requests arrived, so that a
/// call with `wait_for_previous: true` starts only after the earlier calls
/// it may depend on have returned.
///
/// The rule. Each call has a scope: the session it works on (`terminal`
/// without `background`, `output` of a terminal command, `session_close`:
/// the session named, `default` when none is), or every session (`run`,
/// `sessions`, `policy_explain`, `output` of a `run` command, a background
/// job's start, which reads the directory and environment of `default`). A
/// waiting call starts once no call that arrived before it and shares its
/// scope is in flight (two calls share a scope when one of them is of every
/// session, or both are of the same session); calls on other sessions run
/// on. A call without the flag starts at once, as ever. A call has
/// returned when its reply went out or the client cancelled it. If the
/// earlier call returned with its command still running (its wait ended
/// first), a waiting command finds it running and is refused as any new
/// command is then, with the notice that says how to wait for it or stop
/// it.
///
/// Arrival is the order of the requests on the wire: the wire tells of each
/// request before `rmcp` sees it ([`Arrivals`]); a call the wire did not
/// tell of (another transport) arrives when `call_tool` starts.
///
/// Bounds: one entry per request in flight, which the wire bounds (64);
/// at most [`MAX_WAITING`] calls wait at once. A waiting call ends its wait
/// when the client cancels it.
#[derive(Default)]
pub(crate) struct Turns {
    state: Mutex<TurnState>,
    /// Woken whenever a call ends.
    ended: tokio::sync::Notify,
}

/// The calls in flight.
#[derive(Default)]
struct TurnState {
    /// The arrival number of the next call.
    next: u64,
    /// The calls in flight, by arrival number.
    calls: BTreeMap<u64, Turn>,
    /// The arrival number of each call in flight, by its request's id.
    numbers: HashMap<RequestId, u64>,
    /// How many calls wait.
    waiting: usize,
}

/// One call in flight.
struct Turn {
    /// What it works on.
    scope: Scope,
    /// Whether it asked to wait for the calls before it.
    waits: bool,
}

/// What a call works on, for [`Turns`].
#[derive(Debug, Clone, PartialEq, Eq)]
enum Scope {
    /// One session, by name.
    Session(String),
    /// Every session, or none of them.
    All,
}

impl Scope {
    /// The scope of a call of `tool` with `arguments` (as sent: values of
    /// any type, not yet checked).
    fn of(tool: &str, arguments: Option<&JsonObject>) -> Scope {
        let get = |key: &str| arguments.and_then(|arguments| arguments.get(key));
        // A valid name has at most 32 characters; a longer one is refused
        // by the call's check, and its first 64 keep it apart from them.
        let session = || {
            let name = get("session").and_then(Value::as_str).unwrap_or(DEFAULT_SESSION);
            Scope::Session(name.chars().take(64).collect())
        };
        match tool {
            "terminal" if !args::is_true(get("background")) => session(),
            "output" if get("run").is_none_or(Value::is_null) => session(),
            "session_close" => session(),
            _ => Scope::All,
        }
    }

    /// Whether a call of this scope must wait for one of `other`'s.
    fn shares(&self, other: &Scope) -> bool {
        matches!((self, other), (Scope::All, _) | (_, Scope::All)) || self == other
    }
}

/// Why a waiting call was not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NotRun {
    /// [`MAX_WAITING`] calls wait already.
    TooMany,
    /// The client cancelled it while it waited (nobody reads the reply).
    Cancelled,
}

impl std::fmt::Display for NotRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotRun::TooMany => f.write_str(&render::too_many_waiting(MAX_WAITING)),
            NotRun::Cancelled => f.write_str(&render::cancelled_while_waiting()),
        }
    }
}

impl Turns {
    fn state(&self) -> std::sync::MutexGuard<'_, TurnState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records the call `id` (`params`: its tool and arguments) as arrived,
    /// unless it is known already.
    fn arrive(&self, id: &RequestId, params: &CallToolRequestParams) {
        let mut state = self.state();
        if state.numbers.contains_key(id) {
            return;
        }
        let number = state.next;
        state.next += 1;
        let arguments = params.arguments.as_ref();
        let turn = Turn {
            scope: Scope::of(&params.name, arguments),
            waits: args::waits_for_previous(arguments),
        };
        state.calls.insert(number, turn);
        state.numbers.insert(id.clone(), number);
    }

    /// The call `id` returned: calls waiting for it may start.
    fn end(&self, id: &RequestId) {
        let ended = {
            let mut state = self.state();
            let number = state.numbers.remove(id);
            number.and_then(|number| state.calls.remove(&number)).is_some()
        };
        if ended {
            self.ended.notify_waiters();
        }
    }

    /// The call `id` (`params`) is being served: records it if the wire did
    /// not; the guard returned ends it when dropped.
    fn enter(self: &Arc<Self>, id: &RequestId, params: &CallToolRequestParams) -> TurnGuard {
        self.arrive(id, params);
        TurnGuard { turns: Arc::clone(self), id: id.clone() }
    }

    /// Whether the call `id` must still wait: it asked to, and a call that
    /// arrived before it and shares its scope is in flight.
    fn blocked(state: &TurnState, id: &RequestId) -> bool {
        let Some(&number) = state.numbers.get(id) else { return false };
        let Some(turn) = state.calls.get(&number) else { return false };
        turn.waits
            && state.calls.range(..number).any(|(_, earlier)| turn.scope.shares(&earlier.scope))
    }

    /// Waits until the call `id` may start (at once for a call that did not
    /// ask to wait); refused when [`MAX_WAITING`] calls wait already, or
    /// ended when `cancel` fires.
    async fn wait(&self, id: &RequestId, cancel: &CancellationToken) -> Result<(), NotRun> {
        let mut slot: Option<WaitingSlot<'_>> = None;
        loop {
            let ended = self.ended.notified();
            tokio::pin!(ended);
            // Registered before the check, so that no end is missed.
            ended.as_mut().enable();
            {
                let mut state = self.state();
                if !Turns::blocked(&state, id) {
                    return Ok(());
                }
                if slot.is_none() {
                    if state.waiting >= MAX_WAITING {
                        return Err(NotRun::TooMany);
                    }
                    state.waiting += 1;
                    slot = Some(WaitingSlot(self));
                }
            }
            tokio::select! {
                () = &mut ended => {}
                () = cancel.cancelled() => return Err(NotRun::Cancelled),
            }
        }
    }
}

impl Arrivals for Turns {
    fn arrived(&self, id: &RequestId, request: &ClientRequest) {
        if let ClientRequest::CallToolRequest(call) = request {
            self.arrive(id, &call.params);
        }
    }

    fn ended(&self, id: &RequestId) {
        self.end(id);
    }
}

/// Ends a call's turn when dropped.
struct TurnGuard {
    turns: Arc<Turns>,
    id: RequestId,
}

impl Drop for TurnGuard {
    fn drop(&mut self) {
        self.turns.end(&self.id);
    }
}

/// Counts a waiting call in [`TurnState::waiting`] while it lives.
struct WaitingSlot<'a>(&'a Turns);

impl Drop for WaitingSlot<'_> {
    fn drop(&mut self) {
        self.0.state().waiting -= 1;
    }
}

#[cfg(test)]
mod tests {
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    use serde_json::json;

    use super::*;

    fn params(tool: &str, args: Value) -> CallToolRequestParams {
        let Value::Object(arguments) = args else { unreachable!() };
        CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments)
    }

    fn id(n: i64) -> RequestId {
        RequestId::Number(n)
    }

    /// Records the calls as the wire tells of them, numbered from 1.
    fn arrive(turns: &Turns, calls: &[(&str, Value)]) {
        for (n, (tool, args)) in (1..).zip(calls) {
            let request = ClientRequest::CallToolRequest(rmcp::model::Request::new(params(
                tool,
                args.clone(),
            )));
            turns.arrived(&id(n), &request);
        }
    }

    /// The calls in flight among `1..=count` that may start now.
    fn startable(turns: &Turns, count: i64) -> Vec<i64> {
        let state = turns.state();
        (1..=count)
            .filter(|&n| state.numbers.contains_key(&id(n)) && !Turns::blocked(&state, &id(n)))
            .collect()
    }

    #[test]
    fn a_waiting_call_waits_for_earlier_calls_of_its_scope_only() {
        let turns = Turns::default();
        arrive(
            &turns,
            &[
                ("terminal", json!({"command": "sleep 3"})),
                ("terminal", json!({"command": "ls", "session": "dev", "wait_for_previous": true})),
                ("terminal", json!({"command": "make", "wait_for_previous": true})),
                ("run", json!({"command": "ls", "wait_for_previous": "true"})),
                ("terminal", json!({"command": "pwd", "session": "dev"})),
                ("output", json!({"run": 3, "wait_for_previous": true})),
                ("output", json!({"session": "dev", "wait_for_previous": true})),
                (
                    "terminal",
                    json!({"command": "vite", "background": true, "wait_for_previous": true}),
                ),
                ("session_close", json!({"session": "other", "wait_for_previous": true})),
                ("sessions", json!({"wait_for_previous": false})),
                ("policy_explain", json!({"command": "ls"})),
            ],
        );
        // 2 is alone on `dev`; calls without the flag never wait.
        assert_eq!(startable(&turns, 11), [1, 2, 5, 10, 11]);
        turns.ended(&id(1));
        // 3 waited for 1 only; 4 and later (every session) wait for 2 and 3.
        assert_eq!(startable(&turns, 11), [2, 3, 5, 10, 11]);
        turns.ended(&id(2));
        turns.ended(&id(3));
        assert_eq!(startable(&turns, 11), [4, 5, 10, 11]);
        turns.ended(&id(4));
        // 6 (every session) waits for 5 (`dev`); 7 (`dev`) for 5 and 6.
        assert_eq!(startable(&turns, 11), [5, 10, 11]);
        turns.ended(&id(5));
        assert_eq!(startable(&turns, 11), [6, 10, 11]);
        turns.ended(&id(6));
        assert_eq!(startable(&turns, 11), [7, 10, 11]);
        // An unknown id and a second end change nothing.
        turns.ended(&id(6));
        turns.ended(&id(99));
        for n in 7..=11 {
            turns.ended(&id(n));
        }
        assert!(turns.state().calls.is_empty() && turns.state().numbers.is_empty());
    }

    /// Polls `future` once, with a waker that does nothing (the test polls
    /// again after what should wake it).
    fn poll_once<F: Future>(future: std::pin::Pin<&mut F>) -> Poll<F::Output> {
        future.poll(&mut Context::from_waker(Waker::noop()))
    }

    #[tokio::test]
    async fn a_wait_ends_when_the_earlier_call_ends_or_is_cancelled() {
        let turns = Arc::new(Turns::default());
        // Without the wire, calls arrive as they are served.
        let first = turns.enter(&id(1), &params("terminal", json!({"command": "sleep 3"})));
        let waiting = params("terminal", json!({"command": "echo b", "wait_for_previous": true}));
        let _second = turns.enter(&id(2), &waiting);
        let cancel = CancellationToken::new();
        let (two, three) = (id(2), id(3));
        let mut wait = pin!(turns.wait(&two, &cancel));
        assert!(poll_once(wait.as_mut()).is_pending());
        assert_eq!(turns.state().waiting, 1);
        drop(first);
        assert_eq!(poll_once(wait.as_mut()), Poll::Ready(Ok(())));
        assert_eq!(turns.state().waiting, 0);

        let _third = turns.enter(&id(3), &waiting);
        let mut wait = pin!(turns.wait(&three, &cancel));
        assert!(poll_once(wait.as_mut()).is_pending());
        cancel.cancel();
        assert_eq!(poll_once(wait.as_mut()), Poll::Ready(Err(NotRun::Cancelled)));
        assert_eq!(turns.state().waiting, 0);
    }

    #[tokio::test]
    async fn at_most_max_waiting_calls_wait() {
        let turns = Arc::new(Turns::default());
        let cancel = CancellationToken::new();
        let _first = turns.enter(&id(0), &params("run", json!({"command": "sleep 3"})));
        let waiting = params("sessions", json!({"wait_for_previous": true}));
        let guards: Vec<TurnGuard> =
            (1..=MAX_WAITING as i64 + 1).map(|n| turns.enter(&id(n), &waiting)).collect();
        let ids: Vec<RequestId> = (1..=MAX_WAITING as i64 + 1).map(id).collect();
        let mut waits: Vec<_> =
            ids[..MAX_WAITING].iter().map(|id| Box::pin(turns.wait(id, &cancel))).collect();
        for wait in &mut waits {
            assert!(poll_once(wait.as_mut()).is_pending());
        }
        let mut over = pin!(turns.wait(&ids[MAX_WAITING], &cancel));
        assert_eq!(poll_once(over.as_mut()), Poll::Ready(Err(NotRun::TooMany)));
        let message = NotRun::TooMany.to_string();
        assert!(message.contains("32 calls already wait"), "{message}");
        drop(waits);
        assert_eq!(turns.state().waiting, 0, "a dropped wait frees its place");
        drop(guards);
    }

    #[test]
    fn the_ignored_arguments_notice_names_them_and_what_the_tool_takes() {
        let known = ["command".to_owned(), "cwd".to_owned()];
        let names = |names: &[&str]| names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            render::ignored_arguments("run", &names(&["foo"]), &known),
            "[Ignored the unknown argument `foo`: run takes command, cwd.]"
        );
        assert_eq!(
            render::ignored_arguments("sessions", &names(&["a", "b\n"]), &[]),
            "[Ignored the unknown arguments `a` and `b\\n`: sessions takes no arguments.]"
        );
        let many = names(&["a", "b", "c", "d", "e", "f", "g"]);
        assert_eq!(
            render::ignored_arguments("run", &many, &known),
            "[Ignored the unknown arguments `a`, `b`, `c`, `d`, `e` and 2 more: run takes \
             command, cwd.]"
        );
        let long = "y".repeat(1000);
        let notice = render::ignored_arguments("run", &[long], &known);
        assert!(notice.len() < 120 && notice.contains(&format!("`{}…`", "y".repeat(40))));
    }

    /// Issue 18: the instructions, all a deferring client's model sees,
    /// name every tool and the first call to make, in a few lines.
    #[test]
    fn the_instructions_name_every_tool_and_a_first_call() {
        let router = Shellkeep::terminal_router()
            + Shellkeep::run_router()
            + Shellkeep::policy_explain_router()
            + Shellkeep::sessions_router()
            + Shellkeep::output_router()
            + Shellkeep::session_close_router();
        let tools = router.list_all();
        assert_eq!(tools.len(), 6);
        for tool in tools {
            assert!(
                INSTRUCTIONS.contains(&format!("{}:", tool.name)),
                "{} is not named",
                tool.name
            );
        }
        assert!(INSTRUCTIONS.contains("First call: {\"command\": \"pwd\"}"));
        assert!(INSTRUCTIONS.lines().count() <= 8 && INSTRUCTIONS.len() < 1_200);
    }
}
