//! The `output` tool: a terminal command's complete output, by line, from
//! the session's store, or a `run` command's stream from the server's store
//! of runs. Its description states what each session keeps and
//! the page limits. It does not check arguments (`args`) or word the reply
//! (`render`).

use rmcp::handler::server::tool::schema_for_output;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, JsonObject};
use rmcp::{tool, tool_router};
use shellkeep_engine::DEFAULT_SESSION;
use shellkeep_engine::{MAX_READ_LINES, READ_CAP, Stream};

use super::{Shellkeep, structured_result, tool_error};
use crate::args::{Checked, OutputArgs};
use crate::config::ServerConfig;
use crate::render::{self, count, size};
use crate::schema;

/// Lines a page holds when the call gives no `limit`.
const DEFAULT_LINES: u64 = 200;

/// The tool's description and its `limit` argument's, with the limits this
/// server runs with.
pub(super) fn describe(config: &ServerConfig, input: &mut JsonObject) -> String {
    schema::describe_property(
        input,
        "limit",
        format!(
            "How many lines at most (default {DEFAULT_LINES}, at most {}); a page also stops at \
             {} characters.",
            count(MAX_READ_LINES),
            count(READ_CAP as u64),
        ),
    );
    format!(
        "Read the complete output of a terminal command by line, for running and finished \
         commands: every line it printed is kept (per session, the last {} commands and {}) even \
         when a reply was cut. Give the session (default `default`), the command number a cut \
         reply names (default: the latest), an offset (negative counts from the end, as tail) \
         and a limit in lines. The reply says how many lines there are so far and whether the \
         command is still running; follow a running job by reading again from the offset it \
         gives. `run` outputs are kept the same way (the last {} runs): give `run` (the number a \
         cut `run` reply names) and `stream` (`stdout` or `stderr`) instead of session and \
         command.",
        config.output_keep.max_commands,
        size(config.output_keep.max_bytes),
        config.output_keep.max_commands,
    )
}

#[tool_router(router = output_router, vis = "pub(super)")]
impl Shellkeep {
    /// Reads a command's complete output by line.
    #[tool(
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
        let args = match args.check() {
            Ok(args) => args,
            Err(message) => return self.with_job_notices(tool_error(message)),
        };
        if args.run.is_some() {
            return self.with_job_notices(self.run_output(&args));
        }
        let name = args.session.as_deref().unwrap_or(DEFAULT_SESSION);
        let session = match self.client.sessions.get(name) {
            Ok(session) => session,
            Err(err) => return self.with_job_notices(tool_error(render::registry_error(&err))),
        };
        session.commit_screen();
        let page = session.output().get(args.command).and_then(|log| {
            log.read(args.offset.unwrap_or(0), args.limit.unwrap_or(DEFAULT_LINES))
        });
        match page {
            Ok(mut page) => {
                render::fit_page(&mut page, READ_CAP);
                let (text, structured) = render::output_page(&render::Source::Session(name), &page);
                self.with_job_notices(structured_result(text, &structured, false))
            }
            Err(err) => self.with_job_notices(tool_error(render::session_output_error(&err))),
        }
    }
}

impl Shellkeep {
    /// The `output` tool for a `run` command's stream (`args` checked: `run`
    /// is given, `session` and `command` are not).
    fn run_output(&self, args: &OutputArgs) -> CallToolResult {
        let Some(number) = args.run else {
            return tool_error("`run` is missing: give the number a cut `run` reply names".into());
        };
        let stream = args.stream.map_or(Stream::Stdout, Stream::from);
        let page = self.client.runs.get_stream(Some(number), stream).and_then(|log| {
            log.read(args.offset.unwrap_or(0), args.limit.unwrap_or(DEFAULT_LINES))
        });
        match page {
            Ok(mut page) => {
                render::fit_page(&mut page, READ_CAP);
                let (text, structured) = render::output_page(&render::Source::Run(stream), &page);
                structured_result(text, &structured, false)
            }
            Err(err) => tool_error(render::run_output_error(number, &err)),
        }
    }
}
