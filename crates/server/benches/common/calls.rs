//! The benchmarks' calls: `terminal` through rmcp's client, with a time
//! limit, and the structured content of its reply.

use std::time::Duration;

use anyhow::{Context, bail, ensure};
use rmcp::RoleClient;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::Peer;
use serde_json::Value;

/// Calls `terminal` with `arguments` through `peer`; a tool error, or no
/// reply within `limit`, is an error.
pub(crate) async fn terminal(
    peer: &Peer<RoleClient>,
    arguments: Value,
    limit: Duration,
) -> anyhow::Result<CallToolResult> {
    let Value::Object(arguments) = arguments else { bail!("arguments must be an object") };
    let params = CallToolRequestParams::new("terminal").with_arguments(arguments);
    let result = tokio::time::timeout(limit, peer.call_tool(params))
        .await
        .map_err(|_| anyhow::anyhow!("a terminal call took longer than {limit:?}"))?
        .context("tools/call")?;
    ensure!(result.is_error != Some(true), "tool error: {result:?}");
    Ok(result)
}

/// The structured content of a reply, which must be an object.
pub(crate) fn structured(result: &CallToolResult) -> anyhow::Result<&Value> {
    result
        .structured_content
        .as_ref()
        .filter(|value| value.is_object())
        .context("the reply has no structured content")
}
