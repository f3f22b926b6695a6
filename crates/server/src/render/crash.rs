//! The one-time notice that an earlier server of the same audit log died
//! with commands running: which server, how many commands, where their
//! outputs are. Words only; finding dead servers is the audit log's job.

use rmcp::handler::server::tool::schema_for_output;
use rmcp::model::JsonObject;
use rmcp::schemars;
use schemars::JsonSchema;
use serde::Serialize;

use crate::audit::DeadServer;

/// Commands of one dead server named in the notice; the rest are counted.
const NAMED_COMMANDS: usize = 5;

/// An earlier server that died with commands running, as a reply's
/// `servers_died` holds it.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ServerDiedOutput {
    /// Its process id.
    pub pid: u32,
    /// When it started (RFC 3339, UTC), if known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started: Option<String>,
    /// How many commands it was running when it died.
    pub commands: usize,
    /// The first of those commands (at most 5).
    pub running: Vec<DiedCommandOutput>,
    /// The directory where it saved full outputs, if known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub full_output_dir: Option<String>,
    /// Its files there, as a shell pattern.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_files: Option<String>,
}

/// A command that died with its server.
#[derive(Debug, Serialize, JsonSchema)]
pub struct DiedCommandOutput {
    /// Its session (`(run)` for the `run` tool).
    pub session: String,
    /// The command (cut to 200 characters).
    pub command: String,
    /// Whether it was a background job.
    pub background: bool,
}

/// The text and structured content telling that `dead` servers died with
/// commands running; `None` when there are none.
pub fn servers_died(dead: &[DeadServer]) -> Option<(String, serde_json::Value)> {
    if dead.is_empty() {
        return None;
    }
    let mut text = String::new();
    let mut rows = Vec::new();
    for server in dead {
        let count = server.commands.len();
        let started =
            server.started.as_deref().map(|time| format!(", started {time}")).unwrap_or_default();
        let running: Vec<DiedCommandOutput> = server
            .commands
            .iter()
            .take(NAMED_COMMANDS)
            .map(|command| DiedCommandOutput {
                session: command.session.clone(),
                command: super::capped_echo(&command.command),
                background: command.background,
            })
            .collect();
        let mut named: Vec<String> = running
            .iter()
            .map(|command| {
                let what = if command.background { "background job" } else { "command" };
                format!("{what} {:?} in session {:?}", command.command, command.session)
            })
            .collect();
        if count > running.len() {
            named.push(format!("{} more", count - running.len()));
        }
        let output_files = match (&server.full_output_dir, &server.output_prefix) {
            (Some(dir), Some(prefix)) => Some(format!("{dir}/{prefix}-*")),
            _ => None,
        };
        let where_outputs = match &output_files {
            Some(files) => format!(
                "what they printed past 8 KiB, or past a cut, is in the files {files} (read them \
                 with cat or less; the output tool cannot)"
            ),
            None => "where it saved full outputs is not known".to_owned(),
        };
        text.push_str(&format!(
            "[An earlier shellkeep server (pid {}{started}) ended without stopping its work \
             (killed or crashed) while {count} {} ran: {}. They are gone with it, and so are its \
             sessions; {where_outputs}. `shellkeep audit` lists them as server_died.]\n",
            server.pid,
            if count == 1 { "command" } else { "commands" },
            named.join(", "),
        ));
        rows.push(ServerDiedOutput {
            pid: server.pid,
            started: server.started.clone(),
            commands: count,
            running,
            full_output_dir: server.full_output_dir.clone(),
            output_files,
        });
    }
    Some((text.trim_end().to_owned(), serde_json::to_value(rows).unwrap_or_default()))
}

/// Declares `servers_died`, which the first reply of a server may carry,
/// in an output schema.
pub fn declare_servers_died(schema: &mut JsonObject) {
    let mut item = (*schema_for_output::<ServerDiedOutput>()).clone();
    item.remove("$schema");
    item.remove("title");
    // The item sits inside another schema: its definitions go in place.
    if let Some(serde_json::Value::Object(defs)) = item.remove("$defs") {
        for value in item.values_mut() {
            inline_refs(value, &defs);
        }
    }
    let servers = serde_json::json!({
        "type": "array",
        "description": "Earlier servers that died with commands running; said once, in the \
                        first reply of the server after them.",
        "items": serde_json::Value::Object(item),
    });
    if let Some(serde_json::Value::Object(properties)) = schema.get_mut("properties") {
        properties.insert("servers_died".to_owned(), servers);
    }
}

/// Replaces each `{"$ref": "#/$defs/NAME"}` in `value` with `NAME`'s
/// schema from `defs` (which hold no references of their own).
fn inline_refs(value: &mut serde_json::Value, defs: &JsonObject) {
    match value {
        serde_json::Value::Object(map) => {
            let target = map
                .get("$ref")
                .and_then(|r| r.as_str())
                .and_then(|r| r.strip_prefix("#/$defs/"))
                .and_then(|name| defs.get(name));
            if let Some(def) = target {
                *value = def.clone();
            } else {
                map.values_mut().for_each(|v| inline_refs(v, defs));
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(|v| inline_refs(v, defs)),
        _ => {}
    }
}
