//! The MCP tools: the `Shellkeep` handler, what the tools share, and the
//! helpers every tool's reply goes through (tool errors, structured
//! results, notices of ended background jobs and of the orphan guard).
//! Each tool is a file of its own: its description (stating the limits
//! this server was started with), and the call into the engine.
//!
//! This is the only module that knows `rmcp`'s tool API. Arguments are
//! checked in `args`, replies worded in `render`, schemas rewritten in
//! `schema`; nothing here runs a command itself.

mod output;
mod policy_explain;
mod run;
mod session_close;
mod sessions;
mod terminal;

use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities};
use rmcp::{ServerHandler, tool_handler};
use serde::Serialize;
use shellkeep_engine::guard::Guard;
use shellkeep_engine::policy::{Decision, Policy};
use shellkeep_engine::registry::Registry;
use shellkeep_engine::store::OutputStore;

use crate::args::ExplicitLimits;
use crate::audit::{self, AuditCall, AuditLog};
use crate::config::ServerConfig;
use crate::{render, schema};

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
    /// The server's checked configuration: `run`'s stream cap and grace
    /// period, and the limits tool descriptions state.
    pub config: ServerConfig,
    /// The orphan guard, if running.
    pub guard: Option<Arc<Guard>>,
    /// The outputs of `run` calls, numbered, for the `output` tool.
    pub runs: Arc<OutputStore>,
    /// Where every call that runs something leaves a start and an end
    /// line, if the server keeps an audit log.
    pub audit: Option<Arc<AuditLog>>,
}

/// The MCP server: a cheap handle on the shared state.
#[derive(Clone)]
pub struct Shellkeep {
    shared: Arc<Shared>,
    tool_router: rmcp::handler::server::tool::ToolRouter<Shellkeep>,
}

impl Shellkeep {
    /// A server over `shared`: every tool, its schemas made portable and
    /// its descriptions stating `shared.config`'s limits.
    pub fn new(shared: Arc<Shared>) -> Shellkeep {
        let mut tool_router = Self::terminal_router()
            + Self::run_router()
            + Self::policy_explain_router()
            + Self::sessions_router()
            + Self::output_router()
            + Self::session_close_router();
        let config = &shared.config;
        for route in tool_router.map.values_mut() {
            let tool = &mut route.attr;
            let mut input = schema::portable(&tool.input_schema);
            let description = match tool.name.as_ref() {
                "terminal" => terminal::describe(config, &mut input),
                "run" => run::describe(config, &mut input),
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
                schema::declare_jobs_ended(&mut output);
                tool.output_schema = Some(Arc::new(schema::portable(&output)));
            }
        }
        Shellkeep { shared, tool_router }
    }

    /// Adds the notices of background jobs that ended since the last reply
    /// to `result`: a line of text each and `jobs_ended` in the structured
    /// content; the audit log gets each job's end line.
    fn with_job_notices(&self, mut result: CallToolResult) -> CallToolResult {
        let mut ended = self.shared.sessions.take_ended_jobs();
        if ended.is_empty() {
            return result;
        }
        // A job's command is masked as output is, in the notice and the log.
        for job in &mut ended {
            job.command = self.shared.config.masks.mask(&job.command).0.into_owned();
        }
        if let Some(log) = &self.shared.audit {
            ended.iter().for_each(|job| log.job_ended(job));
        }
        let (text, structured) = render::jobs_ended(&ended);
        push_notice(&mut result, text);
        if let Some(serde_json::Value::Object(map)) = &mut result.structured_content {
            render::insert_before_body(map, "jobs_ended", structured);
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
        {
            render::push_note(map, notice.clone());
        }
        push_notice(&mut result, notice);
        result
    }

    /// Writes the start line of a call that runs something, with the
    /// client that `peer` named in its `initialize` request; the returned
    /// call writes the end line.
    fn audit(
        &self,
        peer: &rmcp::service::Peer<rmcp::RoleServer>,
        start: audit::Start,
    ) -> AuditCall {
        let Some(log) = &self.shared.audit else { return AuditCall::none() };
        let client = peer.peer_info().map(|info| audit::Client::new(&info.client_info));
        log.begin(client, start)
    }

    /// The limits for `command`: the agent's explicit values, else the
    /// policy's.
    fn decide(&self, command: &str, explicit: ExplicitLimits) -> Decision {
        let decision = self.shared.policy.decide(command, explicit.timeout);
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
    async fn call_tool(
        &self,
        request: rmcp::model::CallToolRequestParams,
        context: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, rmcp::ErrorData> {
        let call = rmcp::handler::server::tool::ToolCallContext::new(self, request, context);
        let mut response = self.tool_router.call(call).await;
        let masks = &self.shared.config.masks;
        match &mut response {
            Ok(rmcp::model::CallToolResponse::Complete(result))
                if result.is_error == Some(true) =>
            {
                for block in &mut result.content {
                    if let ContentBlock::Text(text) = block {
                        text.text = masks.mask(&text.text).0.into_owned();
                    }
                }
            }
            Err(error) => error.message = masks.mask(&error.message).0.into_owned().into(),
            _ => {}
        }
        response
    }

    fn get_info(&self) -> rmcp::model::ServerConfig {
        rmcp::model::ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("shellkeep", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
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

/// Appends a block of shellkeep's notices to `result`, on a line of its
/// own also for a client that joins text blocks as they are.
fn push_notice(result: &mut CallToolResult, text: String) {
    let glued = result
        .content
        .last()
        .and_then(|block| block.as_text())
        .is_some_and(|last| !last.text.is_empty() && !last.text.ends_with('\n'));
    let text = if glued { format!("\n{text}") } else { text };
    result.content.push(ContentBlock::text(text));
}

/// A tool error the agent reads: what went wrong and what to do.
fn tool_error(message: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}

#[cfg(test)]
mod tests {
    use super::{INSTRUCTIONS, Shellkeep};

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
