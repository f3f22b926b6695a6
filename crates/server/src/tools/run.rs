//! The `run` tool: one command with `bash -c` in a fresh process, under an
//! execution limit and a no-output limit, with its stdout and stderr. Its
//! description states the cap the two streams share. It does not check arguments
//! (`args`) or word the reply (`render`); the engine's `oneshot` runs it.

use std::sync::Arc;

use rmcp::handler::server::tool::schema_for_output;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, JsonObject};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, tool, tool_router};
use shellkeep_engine::Policy;
use shellkeep_engine::Stream;
use shellkeep_engine::{RunRequest, run_oneshot};

use super::{Shellkeep, enforcement_of, structured_result, tool_error, with_denial, with_sandbox};
use crate::args::{self, Checked, RunArgs};
use crate::audit;
use crate::config::ServerConfig;
use crate::render::{self, span};
use crate::{schema, tasks};

/// The tool's description, with the limits this server runs with (how
/// long a call may block among them); the timeouts' descriptions state
/// their range.
pub(super) fn describe(config: &ServerConfig, policy: &Policy, input: &mut JsonObject) -> String {
    describe_timeouts(input);
    let sandbox = super::describe_sandbox(config, input, "this command");
    let longest = policy.categories().iter().map(|category| category.limits.exec).max();
    let blocks = render::run_blocks(longest.unwrap_or_default() + config.grace);
    format!(
        "Run one command with `bash -c` in a fresh process; it is stopped after printing \
         nothing for min(timeout_sec / 4, 60) s (at least 1 s) unless no_output_timeout_sec \
         allows longer silence (without timeout_sec, its policy category sets both limits). It \
         returns its stdout, stderr and exit code: {{status, stdout, stderr, exitCode, \
         timeoutReason, terminationMode, durationMs}}. Nothing persists between runs (use \
         `terminal` for that); stdin is empty unless given. It can never hang: the execution \
         limit (timeout_sec, or the category's) and the no-output limit end it with SIGTERM to \
         its whole process group, then SIGKILL after {}; partial output is kept. The policy \
         matches each part of a compound command (`cd x && cargo build`), and the part with the \
         longest limits decides. Output over {} characters (stdout and stderr together, counted \
         as JSON writes them; a stream that needs less leaves the rest to the other) is cut to \
         its head and tail and kept whole: the reply names the `output` call that reads the rest (`{{\"run\": N, \
         \"stream\": \"stderr\", ...}}`) and the file that holds it. {blocks}{sandbox}",
        span(config.grace),
        render::count(config.output_cap as u64),
    )
}

/// The descriptions of `timeout_sec` and `no_output_timeout_sec`, which
/// `run` and `policy_explain` share, with their range.
pub(super) fn describe_timeouts(input: &mut JsonObject) {
    let range = format!(
        "more than 0, at most {} ({})",
        args::MAX_TIMEOUT.as_secs(),
        span(args::MAX_TIMEOUT)
    );
    schema::describe_property(
        input,
        "timeout_sec",
        format!(
            "Execution limit in seconds ({range}); the no-output limit is then min(timeout/4, \
             60) s, at least 1 s, unless no_output_timeout_sec is given. Without it, the \
             policy's category for the command decides."
        ),
    );
    schema::describe_property(
        input,
        "no_output_timeout_sec",
        format!(
            "Seconds the command may print nothing (on stdout or stderr) before it is stopped \
             ({range}). Give it for commands that stay silent for a while (a download, a \
             compile step)."
        ),
    );
}

#[tool_router(router = run_router, vis = "pub(super)")]
impl Shellkeep {
    /// Runs one command in a fresh process under the timeout policy.
    #[tool(
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
        let args = match args.check() {
            Ok(args) => args,
            Err(message) => return tool_error(message),
        };
        let server = &self.core.config.sandbox;
        let sandbox = match server.narrowed(args.sandbox, args.network) {
            Ok(sandbox) => sandbox,
            Err(why) => return tool_error(render::sandbox::looser_refused(&why, server)),
        };
        let decision = self.decide(&args.command, args.limits);
        let request_cwd = args.cwd.clone();
        let (_, category_limits) = self.core.policy.resources_for(&args.command);
        let request = RunRequest {
            sandbox: sandbox.clone(),
            cwd: args.cwd,
            // The secrets file's values first, so the call's own `env` wins.
            env: self.core.config.secrets.exported().into_iter().chain(args.env).collect(),
            stdin: args.stdin,
            grace: self.core.config.grace,
            stream_cap: self.core.config.output_cap,
            guard: self.core.guard.clone(),
            output: Arc::clone(&self.client.runs),
            secrets: Arc::clone(&self.core.config.masks),
            resources: self.core.config.resources.with_category(&category_limits),
            ..RunRequest::new(args.command, decision.limits, self.core.spill.dir(), "run")
        };
        let audit = self.audit(&context.peer, audit::Start::run(&request.command, &decision));
        let command = request.command.clone();
        let outcome = run_oneshot(request, context.ct.clone()).await;
        // Nobody reads this reply: the next one says what became of it (a
        // task's cancellation is the task's status).
        if outcome.cancelled() && context.extensions.get::<tasks::TaskCall>().is_none() {
            let command = render::mask(&self.core.config.masks, &command);
            let note = render::run_cancelled_by_client(&command, outcome.number, outcome.duration);
            self.client.tasks.note_for_next_reply(note);
        }
        let bytes = [Stream::Stdout, Stream::Stderr].map(|stream| {
            self.client.runs.get_stream(Some(outcome.number), stream).map_or(0, |log| log.bytes())
        });
        audit.end_run(&outcome, bytes.iter().sum());
        let (text, structured) = render::run(&outcome, &decision);
        let mut result = structured_result(text, &structured, false);
        with_sandbox(&mut result, enforcement_of(&sandbox).as_ref());
        let failed = outcome.exit_code() != 0;
        let output = format!("{}\n{}", outcome.stderr.text, outcome.stdout.text);
        let cwd = match &request_cwd {
            Some(dir) => Some(dir.clone()),
            None => std::env::current_dir().ok(),
        };
        with_denial(&mut result, &sandbox, failed, &output, cwd.as_deref());
        self.with_guard_notice(self.with_job_notices(result), None)
    }
}
