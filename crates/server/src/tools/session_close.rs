//! The `session_close` tool: stops a session's shell and everything it
//! started, and gives its last output; closing `default` resets it. Its
//! description states the grace period. It does not word the reply
//! (`render`).

use rmcp::handler::server::tool::schema_for_output;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::service::RequestContext;
use rmcp::{RoleServer, tool, tool_router};
use shellkeep_engine::DEFAULT_SESSION;
use shellkeep_engine::{Activity, Call, LastWords, Request};

use super::{Shellkeep, structured_result, tool_error};
use crate::args::{Checked, SessionCloseArgs};
use crate::audit;
use crate::config::ServerConfig;
use crate::render::{self, span};

/// The tool's description, with the grace period this server uses.
pub(super) fn describe(config: &ServerConfig) -> String {
    format!(
        "Close a terminal session: its shell and every process it started are stopped \
         (SIGTERM, then SIGKILL after {}), and the reply gives its last output and final state. \
         Closing `default` resets it to a fresh shell.",
        span(config.grace)
    )
}

#[tool_router(router = session_close_router, vis = "pub(super)")]
impl Shellkeep {
    /// Closes a session (resets `default`).
    #[tool(
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
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let name = match args.check() {
            Ok(name) => name,
            Err(message) => return self.with_job_notices(tool_error(message)),
        };
        let audit = self.audit(&context.peer, audit::Start::session_close(&name));
        let result = match self.close(&name).await {
            Ok((mut last, reset)) => {
                // The command it names is masked as output is.
                if let Activity::Running { command, .. } | Activity::Finished { command, .. } =
                    &mut last.activity
                {
                    *command = render::mask(&self.core.config.masks, command);
                }
                audit.end_session_close(Ok((&last.activity, reset)), last.output.len() as u64);
                // Its last lines are bounded in number, not in size.
                let cap = self.core.config.output_cap;
                last.output = render::newest_within(&last.output, cap, "its earlier output");
                let (text, structured) = render::session_closed(&name, &last, reset);
                structured_result(text, &structured, false)
            }
            Err(message) => {
                audit.end_session_close(Err(&message), 0);
                tool_error(message)
            }
        };
        self.with_job_notices(result)
    }
}

impl Shellkeep {
    /// Closes the session `name` (resets `default`): its last words, and
    /// whether it was a reset; errors are worded for the agent.
    async fn close(&self, name: &str) -> Result<(LastWords, bool), String> {
        if name == DEFAULT_SESSION {
            let session = self
                .client
                .sessions
                .get(DEFAULT_SESSION)
                .map_err(|e| render::registry_error(&e))?;
            let last = session.last_words().await;
            let request = Request::new(Call::Reset { then: None });
            session
                .execute(request, Default::default())
                .await
                .map_err(|e| render::session_refused(&e))?;
            return Ok((last, true));
        }
        let session = self.client.sessions.remove(name).map_err(|e| render::registry_error(&e))?;
        // A call waiting on the session returns at once rather than holding
        // up the close.
        session.interrupt_waits();
        let last = session.last_words().await;
        session.close().await;
        Ok((last, false))
    }
}
