//! Notices a reply carries beyond its own call: an earlier server that
//! died with commands running, and stop signals the server ignored from
//! its own commands.
//!
//! Not for finding dead servers (the audit log's job) nor for handling
//! signals (`serve.rs`): this module only words what they found, and
//! defines those facts ([`DeadServer`], [`RefusedSignal`]) so that the
//! finders use it, not the other way round.

use rmcp::schemars::{self, JsonSchema};
use serde::Serialize;

use super::units::count;
use super::{capped_echo, echo};

// The facts worded here, found elsewhere (the audit log finds dead
// servers, the signal watch refuses signals): plain data, kept with their
// words so that this module uses no other module of the server.

/// An earlier server of the same log that is gone without having ended
/// normally (killed, crashed, its machine rebooted).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DeadServer {
    /// Its name in the log's ids.
    pub server: String,
    /// Its process id.
    pub pid: u32,
    /// When it started (RFC 3339), if its start line says.
    pub started: Option<String>,
    /// The commands it was running: started and not ended, as far as the
    /// log's tail tells.
    pub commands: Vec<DeadCommand>,
    /// Where it saved full outputs, if its start line says.
    pub full_output_dir: Option<String>,
    /// The prefix of its files there.
    pub output_prefix: Option<String>,
}

/// A command that was running when its server died.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DeadCommand {
    /// Its session (`(run)` for the `run` tool).
    pub session: String,
    /// The command, masked and cut as the log holds it.
    pub command: String,
    /// Whether it was a background job.
    pub background: bool,
}

/// A stop signal the server refused because one of its own processes
/// sent it (see `main`'s signal watch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RefusedSignal {
    /// The signal's name (`SIGTERM`).
    pub signal: &'static str,
    /// The sender's pid.
    pub pid: i32,
    /// The sender's command line as it was when the signal came (bounded,
    /// `process::command_line`), `None` if it was already gone.
    pub command: Option<String>,
}

// After a crash: the one-time notice that an earlier server of the same
// audit log died with commands running (which server, how many commands,
// where their outputs are). Finding dead servers is the audit log's job.

/// Commands of one dead server named in the notice; the rest are counted.
const NAMED_COMMANDS: usize = 5;

/// An earlier server that died with commands running, as a reply's
/// `servers_died` holds it.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ServerDiedOutput {
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
pub(crate) struct DiedCommandOutput {
    /// Its session (`(run)` for the `run` tool).
    pub session: String,
    /// The command (cut to 200 characters).
    pub command: String,
    /// Whether it was a background job.
    pub background: bool,
}

/// The notice that the server ignored stop signals its own processes sent
/// it (`named`, and `more` others): who sent them, so the agent can find
/// the command that tried.
pub(crate) fn refused_signals(named: &[RefusedSignal], more: usize) -> String {
    let senders: Vec<String> = named
        .iter()
        .map(|refused| match &refused.command {
            Some(command) => {
                format!("{} from pid {} ({})", refused.signal, refused.pid, echo(command))
            }
            None => format!("{} from pid {} (already gone)", refused.signal, refused.pid),
        })
        .collect();
    let more = if more == 0 { String::new() } else { format!(" and {} more", count(more as u64)) };
    format!(
        "[shellkeep ignored a stop signal sent by one of its own commands: {}{more}. \
         The server and its sessions go on; only a signal from outside them (or the client closing) stops it.]",
        senders.join("; ")
    )
}

/// The text and structured content telling that `dead` servers died with
/// commands running; `None` when there are none.
pub(crate) fn servers_died(dead: &[DeadServer]) -> Option<(String, serde_json::Value)> {
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
                command: capped_echo(&command.command),
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
