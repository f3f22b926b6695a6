//! The `sessions` tool: the terminal sessions, one row each. Its
//! description states the session limit and idle expiry. It does not word
//! the reply (`render`).

use std::time::SystemTime;

use rmcp::handler::server::tool::schema_for_output;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router};
use shellkeep_engine::Activity;

use super::{Shellkeep, structured_result};
use crate::args::{Checked, SessionsArgs};
use crate::config::ServerConfig;
use crate::render::{self, span};

/// The tool's description, with the limits this server runs with.
pub(super) fn describe(config: &ServerConfig) -> String {
    format!(
        "List the terminal sessions: name, working directory, state (idle; running a command, \
         for how long; waiting for input, with its prompt; a background job; finished with its exit \
         code; an \
         ended background job, with its exit code, run time and when it closes), when each was \
         last used, how much output it keeps and how many processes it has. Sessions are started \
         by naming them in `terminal`; at most {} are open at once, and a session idle at its \
         prompt for {} is closed (not `default`, not background jobs). An ended background job \
         does not count against that limit; its session and output are kept for {} after its \
         end (or its last use), then closed.",
        config.sessions.max_sessions,
        span(config.sessions.idle_expiry),
        span(config.sessions.job_keep),
    )
}

#[tool_router(router = sessions_router, vis = "pub(super)")]
impl Shellkeep {
    /// Lists the terminal sessions.
    #[tool(
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
        let masks = &self.core.config.masks;
        let mut rows = self.client.sessions.list();
        // The commands a listing names are masked as output is.
        for row in &mut rows {
            if let Activity::Running { command, .. } | Activity::Finished { command, .. } =
                &mut row.activity
            {
                *command = render::mask(masks, command);
            }
            if let Some(background) = &mut row.background {
                *background = render::mask(masks, background);
            }
        }
        let (text, structured) =
            render::sessions(&rows, self.client.sessions.limits(), SystemTime::now());
        self.with_job_notices(structured_result(text, &structured, false))
    }
}
