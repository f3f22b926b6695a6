//! The `policy_explain` tool: which timeout policy category and limits a
//! command would get, without running it, and for a compound command the
//! part that decided them and the parts considered. It does not check
//! arguments (`args`) or word the reply (`render`).

use rmcp::handler::server::tool::schema_for_output;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, JsonObject};
use rmcp::{tool, tool_router};

use super::{Shellkeep, structured_result, tool_error};
use crate::args::{Checked, ExplainArgs};
use crate::render;

/// The tool's description; its timeouts take `run`'s range.
pub(super) fn describe(input: &mut JsonObject) -> String {
    super::run::describe_timeouts(input);
    "Show which timeout policy category and limits a command would get, without running it. \
     Each part of a compound command (`cd x && make`, pipes, subshells, `$(…)`) is matched; the \
     part with the longest limits decides, and the reply names it."
        .to_owned()
}

#[tool_router(router = policy_explain_router, vis = "pub(super)")]
impl Shellkeep {
    /// Explains the limits a command would get.
    #[tool(
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
        match args.check() {
            Ok((command, limits)) => {
                let mut explanation = self.core.policy.explain(&command, limits.timeout);
                if let Some(no_output) = limits.no_output {
                    explanation.decision = explanation.decision.with_no_output(no_output);
                }
                // The command and the parts it names are masked as output is.
                let masks = &self.core.config.masks;
                let named = render::mask(masks, &command);
                let mask = render::part_masker(masks, &named, named != command);
                let (mut text, mut structured) =
                    render::explain(&named, &explanation, &self.core.policy_origin, &mask);
                let (category, resources) = self.core.policy.resources_for(&command);
                render::add_run_limits(&mut text, &mut structured, &category.name, &resources);
                structured_result(text, &structured, false)
            }
            Err(message) => tool_error(message),
        }
    }
}
