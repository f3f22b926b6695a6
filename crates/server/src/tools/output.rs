//! The `output` tool: a terminal command's complete output, by line, from
//! the session's store. Its description states what each session keeps and
//! the page limits. It does not check arguments (`args`) or word the reply
//! (`render`).

use rmcp::handler::server::tool::schema_for_output;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, JsonObject};
use rmcp::{tool, tool_router};
use shellkeep_engine::registry::DEFAULT_SESSION;
use shellkeep_engine::store::{MAX_READ_LINES, READ_CAP};

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
         gives.",
        config.output_keep.max_commands,
        size(config.output_keep.max_bytes),
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
        let name = args.session.as_deref().unwrap_or(DEFAULT_SESSION);
        let session = match self.shared.sessions.get(name) {
            Ok(session) => session,
            Err(err) => return self.with_job_notices(tool_error(render::registry_error(&err))),
        };
        session.commit_screen();
        let page =
            session.output().get(args.command).map_err(|err| err.to_string()).and_then(|log| {
                log.read(args.offset.unwrap_or(0), args.limit.unwrap_or(DEFAULT_LINES))
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
}
