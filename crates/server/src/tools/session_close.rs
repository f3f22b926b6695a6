//! The `session_close` tool: stops a session's shell and everything it
//! started, and gives its last output; closing `default` resets it. Its
//! description states the grace period. It does not word the reply
//! (`render`).

use rmcp::handler::server::tool::schema_for_output;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router};
use shellkeep_engine::registry::DEFAULT_SESSION;
use shellkeep_engine::session::{Call, Request};

use super::{Shellkeep, structured_result, tool_error};
use crate::args::{Checked, SessionCloseArgs};
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
    ) -> CallToolResult {
        let name = match args.check() {
            Ok(name) => name,
            Err(message) => return self.with_job_notices(tool_error(message)),
        };
        if name == DEFAULT_SESSION {
            let session = match self.shared.sessions.get(DEFAULT_SESSION) {
                Ok(session) => session,
                Err(err) => {
                    return self.with_job_notices(tool_error(render::registry_error(&err)));
                }
            };
            let last = session.last_words().await;
            let request = Request::new(Call::Reset { then: None });
            if let Err(err) = session.execute(request, Default::default()).await {
                return self.with_job_notices(tool_error(render::session_refused(&err)));
            }
            let (text, structured) = render::session_closed(&name, &last, true);
            return self.with_job_notices(structured_result(text, &structured, false));
        }
        let session = match self.shared.sessions.remove(&name) {
            Ok(session) => session,
            Err(err) => return self.with_job_notices(tool_error(render::registry_error(&err))),
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
