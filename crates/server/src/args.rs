//! Tool arguments: their types and schemas as the agent sees them, and the
//! one place they are checked, before the engine is called. One rule per
//! meaning: every timeout (`timeout`, `timeout_sec`, `no_output_timeout_sec`,
//! `--timeout`) is a positive number of seconds up to [`MAX_TIMEOUT`]; NUL
//! bytes, environment names, session names and meaningless combinations of
//! flags are refused with the argument's own name. Numbers and booleans may
//! come as strings holding only them, as many model clients send them.
//! [`sort_arguments`] first applies one rule to every tool's argument names
//! (`null` is "not given", unknown names are taken out, near misses and
//! other tools' names are errors).
//!
//! Not for words: a refusal is an [`ArgError`], data (defined beside its
//! words, in `render`) that `render::argument_error` words. It runs nothing. Invariant: the agent reads
//! one wording per rule, the server's, never the engine's second net.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use rmcp::model::JsonObject;
use rmcp::schemars::{self, JsonSchema};
use serde::Deserialize;
use serde_json::Value;
use shellkeep_engine::ExplicitTimeout;
use shellkeep_engine::SCOPE_VAR;
use shellkeep_engine::SandboxMode as Mode;
use shellkeep_engine::Stream;
use shellkeep_engine::validate_name;

use crate::render::{self, ArgError};

/// The longest timeout a call may give: one day. Longer waits are surely
/// mistakes; the policy file's own limits have their own bound.
pub(crate) const MAX_TIMEOUT: Duration = Duration::from_secs(86_400);

/// Tool arguments of type `T` whose errors name the argument at fault
/// ("`is_input`: invalid type: string \"yes\", expected a boolean"), so the
/// agent knows which one to fix. The schema is `T`'s.
#[derive(Debug)]
pub(crate) struct Checked<T>(pub T);

impl<T: JsonSchema> JsonSchema for Checked<T> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        T::schema_name()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        T::json_schema(generator)
    }

    fn inline_schema() -> bool {
        T::inline_schema()
    }
}

impl<'de, T: serde::de::DeserializeOwned> Deserialize<'de> for Checked<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let value = serde_json::Value::deserialize(deserializer)?;
        serde_path_to_error::deserialize(value).map(Checked).map_err(|err| {
            let path = err.path().to_string();
            match path.as_str() {
                "." => D::Error::custom(err.into_inner()),
                _ => D::Error::custom(format!("`{path}`: {}", err.into_inner())),
            }
        })
    }
}

/// Arguments of the `terminal` tool. Descriptions that state configured
/// limits are set at start-up (see `tools::terminal::describe_arguments`).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TerminalArgs {
    /// The shell command to run (any bash: pipes, multi-line blocks, heredocs). Empty (or
    /// omitted) to wait for more output of a running command (after exit code -1). With
    /// is_input=true: text typed to the running program as it is, followed by Enter (`up`,
    /// `END` are text), or a control key: `C-c`, `C-d`, `C-z`, any `C-<letter>`. Other keys,
    /// and text without Enter: `keys`.
    #[serde(default)]
    pub command: String,
    /// If true, `command` is input for the running program instead of a new command.
    #[serde(default, deserialize_with = "lenient::flag")]
    pub is_input: bool,
    /// Seconds this call may wait before handing control back (the command keeps running, exit
    /// code -1).
    #[serde(default, deserialize_with = "lenient::number")]
    pub timeout: Option<f64>,
    /// If true, kill the shell and everything it runs and start a fresh one in the original
    /// directory (variables, functions and jobs are lost); `command`, if any, then runs in it.
    #[serde(default, deserialize_with = "lenient::flag")]
    pub reset: bool,
    /// The session: a name of 1 to 32 characters from A-Z a-z 0-9 _ . - (omit for `default`).
    /// Naming a session that does not exist starts it. Commands in different sessions run in
    /// parallel; calls to the same session wait their turn.
    #[serde(default)]
    pub session: Option<String>,
    /// Where a new session starts; only used by the call that starts it (default: the server's
    /// start directory; for a background job, the directory of session `default`). Use `cd` to
    /// move an existing session.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Whether a new session is recorded (an asciinema recording of its terminal, masked, for a
    /// person to replay); only used by the call that starts it (default: recorded when the
    /// server records, `--record`). true needs a server started with `--record`.
    #[serde(default, deserialize_with = "lenient::optional_flag")]
    pub record: Option<bool>,
    /// The sandbox of a new session (its shell and everything it runs): `read-only` (writes
    /// only in its temporary directory) or `workspace-write`, at least as strict as the
    /// server's; only used by the call that starts it (default: the server's). The server's own
    /// setting is stated at start-up.
    #[serde(default)]
    pub sandbox: Option<SandboxArg>,
    /// The network of a new session: `off` denies every socket but Unix ones; `on` only if
    /// the server allows it; only used by the call that starts it (default: the server's).
    #[serde(default, deserialize_with = "lenient::network")]
    pub network: Option<NetworkArg>,
    /// Start `command` as a long-lived job (dev server, watcher, `tail -f`) in a new session of
    /// its own, named by `session` if given and free, else `job-N`, in the directory and with
    /// the exported environment (activated venv, exports) of session `default`, which must be at
    /// its prompt. The call returns after about a second with the session name; the job is not
    /// under the execution limit and runs until it ends, is closed with session_close, or the
    /// server stops; once ended, its session and output are kept for a while. Poll it, send it
    /// input or keys with that `session`.
    #[serde(default, deserialize_with = "lenient::flag")]
    pub background: bool,
    /// Keys for the running program, sent in order with no Enter added (arrows in the
    /// program's cursor mode, as a terminal sends them). An item that is exactly one of these
    /// names is that key: `UP` `DOWN` `LEFT` `RIGHT` `HOME` `END` `PGUP` `PGDN` `INS` `DEL`
    /// `TAB` `S-TAB` `ESC` `BS` `ENTER` `SPACE` `F1`..`F12`, `C-<x>` (control, e.g. `C-c`),
    /// `M-<x>` (Alt, e.g. `M-x`, `M-ENTER`); any other item is typed as text: `["q"]` is one `q`,
    /// `["DOWN", "DOWN", "ENTER"]` picks the third menu item, `["ESC", ":wq", "ENTER"]` leaves
    /// vim. At most 64 items and 4096 bytes. Not with a `command`, `reset` or `background`;
    /// at the shell's prompt (no command running) nothing is sent.
    #[serde(default)]
    pub keys: Option<Vec<String>>,
}

/// A `terminal` call's arguments, checked.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Terminal {
    /// The command, the input or the key.
    pub command: String,
    /// Whether `command` is input for the running program.
    pub is_input: bool,
    /// How long the call may wait, when the agent said.
    pub timeout: Option<Duration>,
    /// Whether to start a fresh shell first.
    pub reset: bool,
    /// The session's name, when not `default`; it follows the naming rule.
    pub session: Option<String>,
    /// Where a new session starts.
    pub cwd: Option<PathBuf>,
    /// Whether a new session is recorded, when the agent said.
    pub record: Option<bool>,
    /// The sandbox a new session asks for, when the agent said.
    pub sandbox: Option<Mode>,
    /// Whether a new session may use the network, when the agent said.
    pub network: Option<bool>,
    /// Whether `command` starts a background job.
    pub background: bool,
    /// Keys for the running program, as given (an empty list is none).
    pub keys: Option<Vec<String>>,
}

impl TerminalArgs {
    /// Checks every argument; the first that breaks its rule is the error.
    pub(crate) fn check(self) -> Result<Terminal, String> {
        command_text("command", &self.command)?;
        let keys = self.keys.filter(|keys| !keys.is_empty());
        if keys.is_some() && (!self.command.trim().is_empty() || self.reset || self.background) {
            return Err(refuse(ArgError::KeysNotAlone));
        }
        if self.reset && self.is_input {
            return Err(refuse(ArgError::ResetWithInput));
        }
        if self.background && (self.is_input || self.reset || self.command.trim().is_empty()) {
            return Err(refuse(ArgError::BackgroundWithoutCommand));
        }
        Ok(Terminal {
            timeout: self.timeout.map(|secs| seconds("timeout", secs)).transpose()?,
            session: self.session.map(session).transpose()?,
            cwd: self.cwd.map(|cwd| path("cwd", cwd)).transpose()?,
            record: self.record,
            sandbox: self.sandbox.map(Mode::from),
            network: self.network.map(NetworkArg::allows),
            command: self.command,
            is_input: self.is_input,
            reset: self.reset,
            background: self.background,
            keys,
        })
    }
}

/// Arguments of the `session_close` tool.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SessionCloseArgs {
    /// The session to close. Closing `default` resets it.
    pub session: String,
}

impl SessionCloseArgs {
    /// The session's name, checked.
    pub(crate) fn check(self) -> Result<String, String> {
        session(self.session)
    }
}

/// Arguments of the `output` tool. The description of `limit`, which
/// states configured limits, is set at start-up.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct OutputArgs {
    /// The session (omit for `default`).
    #[serde(default)]
    pub session: Option<String>,
    /// The command's number, as a cut reply names it; omit for the latest.
    #[serde(default, deserialize_with = "lenient::number")]
    pub command: Option<u64>,
    /// Read a `run` command's output instead of a terminal command's: its number, as a cut
    /// `run` reply names it. Not with `session` or `command`.
    #[serde(default, deserialize_with = "lenient::number")]
    pub run: Option<u64>,
    /// With `run`: which stream to read, `stdout` (default) or `stderr`.
    #[serde(default)]
    pub stream: Option<StreamArg>,
    /// The first line to return, from 0; negative counts from the end (-50: the last 50 lines,
    /// as `tail`). Default 0.
    #[serde(default, deserialize_with = "lenient::number")]
    pub offset: Option<i64>,
    /// How many lines at most.
    #[serde(default, deserialize_with = "lenient::number")]
    pub limit: Option<u64>,
}

impl OutputArgs {
    /// Checks the session's name, and that a `run` output is asked for with
    /// `run` (and maybe `stream`) alone, never with `session` or `command`;
    /// the other arguments take any value.
    pub(crate) fn check(mut self) -> Result<OutputArgs, String> {
        if self.stream.is_some() && self.run.is_none() {
            return Err(refuse(ArgError::StreamWithoutRun));
        }
        if self.run.is_some() && (self.session.is_some() || self.command.is_some()) {
            return Err(refuse(ArgError::RunWithSession));
        }
        self.session = self.session.map(session).transpose()?;
        Ok(self)
    }
}

/// A stream of a `run` command, as the `output` tool names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum StreamArg {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

impl From<StreamArg> for Stream {
    fn from(stream: StreamArg) -> Stream {
        match stream {
            StreamArg::Stdout => Stream::Stdout,
            StreamArg::Stderr => Stream::Stderr,
        }
    }
}

/// A sandbox mode, as the `sandbox` argument of `terminal` and `run`
/// names it (the values of `--sandbox`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxArg {
    /// No sandbox (only where the server runs without one).
    Off,
    /// Writes only in the workspace, the temporary directory and the terminal.
    WorkspaceWrite,
    /// Writes only in the temporary directory and the terminal.
    ReadOnly,
}

impl From<SandboxArg> for Mode {
    fn from(mode: SandboxArg) -> Mode {
        match mode {
            SandboxArg::Off => Mode::Off,
            SandboxArg::WorkspaceWrite => Mode::WorkspaceWrite,
            SandboxArg::ReadOnly => Mode::ReadOnly,
        }
    }
}

/// The `network` argument of `terminal` and `run` (the values of
/// `--network`; `true` and `false` are read as `on` and `off`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum NetworkArg {
    /// Every socket but Unix ones is denied.
    Off,
    /// The network as the server allows it.
    On,
}

impl NetworkArg {
    /// Whether it lets the command use the network.
    pub(crate) fn allows(self) -> bool {
        self == NetworkArg::On
    }
}

/// Arguments of the `sessions` tool (none).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SessionsArgs {}

/// Arguments of the `run` tool.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RunArgs {
    /// The command, run with `bash -c` in a fresh process (no state is kept between runs).
    pub command: String,
    /// Execution limit in seconds; the no-output limit is then min(timeout/4, 60) s, at least
    /// 1 s, unless no_output_timeout_sec is given. Without it, the policy's category for the
    /// command decides.
    #[serde(default, deserialize_with = "lenient::number")]
    pub timeout_sec: Option<f64>,
    /// Seconds the command may print nothing (on stdout or stderr) before it is stopped. Give
    /// it for commands that stay silent for a while (a download, a compile step).
    #[serde(default, deserialize_with = "lenient::number")]
    pub no_output_timeout_sec: Option<f64>,
    /// Working directory (default: the server's).
    #[serde(default)]
    pub cwd: Option<String>,
    /// Extra environment variables.
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
    /// Text for the command's standard input (default: none, stdin is /dev/null).
    #[serde(default)]
    pub stdin: Option<String>,
    /// The command's sandbox: `read-only` (writes only in its temporary directory) or
    /// `workspace-write`, at least as strict as the server's (default: the server's).
    #[serde(default)]
    pub sandbox: Option<SandboxArg>,
    /// The command's network: `off` denies every socket but Unix ones; `on` only if the
    /// server allows it (default: the server's).
    #[serde(default, deserialize_with = "lenient::network")]
    pub network: Option<NetworkArg>,
}

/// A `run` call's arguments, checked.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Run {
    /// The command for `bash -c`.
    pub command: String,
    /// The explicit limits, when given.
    pub limits: ExplicitLimits,
    /// The working directory, when given.
    pub cwd: Option<PathBuf>,
    /// Extra environment variables, in name order.
    pub env: Vec<(String, String)>,
    /// The command's standard input, when given.
    pub stdin: Option<String>,
    /// The sandbox the command asks for, when given.
    pub sandbox: Option<Mode>,
    /// Whether the command may use the network, when given.
    pub network: Option<bool>,
}

/// The limits a call gave explicitly (`timeout_sec`, `no_output_timeout_sec`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) struct ExplicitLimits {
    /// The execution limit.
    pub timeout: Option<ExplicitTimeout>,
    /// The no-output limit.
    pub no_output: Option<ExplicitTimeout>,
}

impl ExplicitLimits {
    /// `timeout_sec` and `no_output_timeout_sec`, checked.
    fn check(timeout_sec: Option<f64>, no_output_sec: Option<f64>) -> Result<Self, String> {
        Ok(ExplicitLimits {
            timeout: timeout_sec.map(|secs| explicit_timeout("timeout_sec", secs)).transpose()?,
            no_output: no_output_sec
                .map(|secs| explicit_timeout("no_output_timeout_sec", secs))
                .transpose()?,
        })
    }
}

impl RunArgs {
    /// Checks every argument: what the kernel cannot take (a NUL byte in
    /// the command, the working directory or the environment; environment
    /// names that are empty or contain `=`), the variable shellkeep keeps
    /// for itself, and the timeouts.
    pub(crate) fn check(self) -> Result<Run, String> {
        command_text("command", &self.command)?;
        let cwd = self.cwd.map(|cwd| path("cwd", cwd)).transpose()?;
        let env = self.env.unwrap_or_default();
        for (name, value) in &env {
            environment(name, value)?;
        }
        Ok(Run {
            limits: ExplicitLimits::check(self.timeout_sec, self.no_output_timeout_sec)?,
            command: self.command,
            cwd,
            env: env.into_iter().collect(),
            stdin: self.stdin,
            sandbox: self.sandbox.map(Mode::from),
            network: self.network.map(NetworkArg::allows),
        })
    }
}

/// Arguments of the `policy_explain` tool.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ExplainArgs {
    /// The command to classify.
    pub command: String,
    /// An explicit timeout in seconds, as `run` would get it.
    #[serde(default, deserialize_with = "lenient::number")]
    pub timeout_sec: Option<f64>,
    /// An explicit no-output limit in seconds, as `run` would get it.
    #[serde(default, deserialize_with = "lenient::number")]
    pub no_output_timeout_sec: Option<f64>,
}

impl ExplainArgs {
    /// The command (any text: it is only classified) and its limits.
    pub(crate) fn check(self) -> Result<(String, ExplicitLimits), String> {
        let limits = ExplicitLimits::check(self.timeout_sec, self.no_output_timeout_sec)?;
        Ok((self.command, limits))
    }
}

/// Keys some clients add to every tool's arguments on their own, which are
/// no argument of any tool: Gemini CLI's `wait_for_previous` (a scheduling
/// hint, honoured by the tools' turns: see `tools::Turns`), and `summary` and
/// `security_risk`, which models trained on OpenHands send. They are taken
/// out silently.
pub(crate) const CLIENT_KEYS: &[&str] = &["wait_for_previous", "summary", "security_risk"];

/// The longest argument name that can be a near miss of a known one, in
/// characters: longer names are taken out as unknown (this bounds the work
/// of [`near_miss`] per name).
const NEAR_MISS_CHARS: usize = 64;

/// The most near misses one error names; the rest are counted.
const NEAR_MISSES_NAMED: usize = 5;

/// The argument names of one tool, as its input schema declares them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ArgumentNames {
    /// The tool's name.
    pub tool: String,
    /// Every argument it takes, in the schema's order.
    pub known: Vec<String>,
    /// The arguments it requires.
    pub required: Vec<String>,
}

impl ArgumentNames {
    /// The names an input schema (`properties` and `required`) declares
    /// for `tool`.
    pub(crate) fn from_schema(tool: &str, schema: &JsonObject) -> ArgumentNames {
        // In name order, whatever order the schema keeps, so notices that
        // list them read the same from one build to the next.
        let mut known: Vec<String> = match schema.get("properties") {
            Some(Value::Object(properties)) => properties.keys().cloned().collect(),
            _ => Vec::new(),
        };
        known.sort_unstable();
        let required = match schema.get("required") {
            Some(Value::Array(names)) => {
                names.iter().filter_map(Value::as_str).map(str::to_owned).collect()
            }
            _ => Vec::new(),
        };
        ArgumentNames { tool: tool.to_owned(), known, required }
    }
}

/// Sorts a call's arguments for `tool` before they are parsed; `all` holds
/// the names of every tool of the server. The one rule for every tool:
///
/// - `null` means "not given": an argument whose value is `null` is taken
///   out, unless the tool requires it (its check then refuses the `null`,
///   naming the argument);
/// - the [`CLIENT_KEYS`] are taken out silently;
/// - a name that is a near miss of one the tool takes ([`near_miss`]:
///   `timout`, `Timeout`, `session_name`) is an error that names the right
///   one, and so is one that is, or nearly is, an argument of another tool
///   (`env` given to `terminal`): ignoring those would run something else
///   than what was asked;
/// - any other name is taken out and returned, to be named in the reply's
///   notes.
///
/// Returns the names taken out that way, in the order of `arguments`.
/// Linear in the number of arguments (each name is compared with the
/// server's few argument names, and only up to [`NEAR_MISS_CHARS`]).
pub(crate) fn sort_arguments(
    arguments: &mut JsonObject,
    tool: &ArgumentNames,
    all: &[ArgumentNames],
) -> Result<Vec<String>, String> {
    arguments.retain(|name, value| !value.is_null() || tool.required.contains(name));
    let mut ignored = Vec::new();
    let mut misses = Vec::new();
    let unknown: Vec<String> =
        arguments.keys().filter(|name| !tool.known.contains(name)).cloned().collect();
    for name in unknown {
        arguments.remove(&name);
        if CLIENT_KEYS.contains(&name.as_str()) {
            continue;
        }
        if let Some(right) = near_miss(&name, &tool.known) {
            misses.push(refuse(ArgError::NearMiss { given: &name, right }));
        } else if let Some(message) = of_another_tool(&name, tool, all) {
            misses.push(message);
        } else {
            ignored.push(name);
        }
    }
    if misses.is_empty() {
        return Ok(ignored);
    }
    let more = misses.len().saturating_sub(NEAR_MISSES_NAMED);
    misses.truncate(NEAR_MISSES_NAMED);
    Err(render::unknown_arguments(&misses, more))
}

/// The error for `name`, which `tool` does not take, when it is (or is a
/// near miss of) an argument of other tools of the server.
fn of_another_tool(name: &str, tool: &ArgumentNames, all: &[ArgumentNames]) -> Option<String> {
    let others: Vec<&ArgumentNames> = all.iter().filter(|other| other.tool != tool.tool).collect();
    let candidates: Vec<String> = others
        .iter()
        .flat_map(|other| other.known.iter())
        .filter(|known| !tool.known.contains(known))
        .cloned()
        .collect();
    let right = near_miss(name, &candidates)?;
    let takers: Vec<&str> = others
        .iter()
        .filter(|other| other.known.iter().any(|known| known == right))
        .map(|other| other.tool.as_str())
        .collect();
    Some(refuse(ArgError::OfAnotherTool {
        given: name,
        tool: &tool.tool,
        right,
        takers: &takers,
        known: &tool.known,
    }))
}

/// The name among `known` that `given` is a near miss of, if any. `given`
/// is a near miss of a name when, both taken as words (split at `_`, `-`,
/// `.`, spaces and camelCase humps, lowercased):
///
/// 1. they are the same words (`Timeout`, `is-input`, `isInput`);
/// 2. the name's words appear together among the given ones
///    (`session_name`, `timeout_sec` for `timeout`, `run_in_background`),
///    or the given words begin the name (`timeout` for `timeout_sec`); the
///    shorter of the two has at least 3 letters;
/// 3. the given name is an abbreviation of 3 or 4 letters of a name of one
///    word: its start (`sess`, `lim`), or its first letter and then only
///    consonants of it, in order (`cmd`, `bkg`);
/// 4. their letters are a few edits apart (an edit: a letter added, taken
///    out, replaced, or two neighbours swapped): none for a name of up to
///    4 letters, 1 up to 7 (`timout`, `comand`), 2 up to 12 (`backgroud`),
///    3 beyond.
///
/// Among several names, the first rule that holds decides, then the
/// closest name (fewest extra words or edits; in rule 2, a name that ends
/// the given words before one that does not: `command_timeout` is a
/// timeout), then the first in `known`. A given name longer than
/// [`NEAR_MISS_CHARS`] is no near miss. Free-form keys that models add
/// (`thought`, `description`, `reasoning`) are near misses of nothing.
pub(crate) fn near_miss<'a>(given: &str, known: &'a [String]) -> Option<&'a str> {
    if given.chars().count() > NEAR_MISS_CHARS {
        return None;
    }
    let given_words = words(given);
    if given_words.is_empty() {
        return None;
    }
    known
        .iter()
        .enumerate()
        .filter_map(|(at, name)| closeness(&given_words, &words(name)).map(|rank| (rank, at)))
        .min()
        .map(|(_, at)| known[at].as_str())
}

/// How close the words `given` are to a known name's words `name`, as
/// (rule, distance): smaller is closer; `None` when not a near miss.
fn closeness(given: &[String], name: &[String]) -> Option<(u8, usize)> {
    let (g, n) = (given.concat(), name.concat());
    if g == n {
        return Some((0, 0));
    }
    let letters = |words: &[String]| words.iter().map(String::len).sum::<usize>();
    // 2: the name's words among the given ones, or the given words first in
    // the name.
    if name.len() < given.len() && letters(name) >= 3 {
        let last = (0..=given.len() - name.len())
            .rev()
            .find(|&start| given[start..start + name.len()] == *name);
        if let Some(start) = last {
            let ends = usize::from(start + name.len() != given.len());
            return Some((1, (given.len() - name.len()) * 2 + ends));
        }
    }
    if given.len() < name.len() && letters(given) >= 3 && name.starts_with(given) {
        return Some((1, (name.len() - given.len()) * 2));
    }
    // 3: an abbreviation.
    let (gc, nc): (Vec<char>, Vec<char>) = (g.chars().collect(), n.chars().collect());
    if name.len() == 1 && (3..=4).contains(&gc.len()) && gc.len() < nc.len() && gc[0] == nc[0] {
        let consonant = |c: &char| c.is_ascii_alphabetic() && !"aeiou".contains(*c);
        let mut rest = nc[1..].iter();
        let skeleton = gc[1..].iter().all(|c| consonant(c) && rest.any(|n| n == c));
        if nc.starts_with(&gc) || skeleton {
            return Some((2, nc.len() - gc.len()));
        }
    }
    // 4: a few edits.
    let allowed = match nc.len() {
        0..=4 => 0,
        5..=7 => 1,
        8..=12 => 2,
        _ => 3,
    };
    let distance = edit_distance(&gc, &nc);
    (distance <= allowed).then_some((3, distance))
}

/// A name's words: split at `_`, `-`, `.`, spaces and where a lowercase
/// letter or digit is followed by an uppercase one; lowercased.
fn words(name: &str) -> Vec<String> {
    let mut words = vec![String::new()];
    let mut previous: Option<char> = None;
    for c in name.chars() {
        if matches!(c, '_' | '-' | '.' | ' ') {
            words.push(String::new());
        } else {
            if c.is_uppercase() && previous.is_some_and(|p| p.is_lowercase() || p.is_ascii_digit())
            {
                words.push(String::new());
            }
            if let Some(word) = words.last_mut() {
                word.extend(c.to_lowercase());
            }
        }
        previous = Some(c);
    }
    words.retain(|word| !word.is_empty());
    words
}

/// The edits between `a` and `b` (optimal string alignment: a letter
/// added, taken out or replaced, or two neighbours swapped, each counts
/// one). Quadratic: callers bound the lengths.
fn edit_distance(a: &[char], b: &[char]) -> usize {
    let mut rows = vec![(0..=b.len()).collect::<Vec<usize>>()];
    for i in 1..=a.len() {
        let mut row = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            row[j] = (rows[i - 1][j] + 1).min(row[j - 1] + 1).min(rows[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                row[j] = row[j].min(rows[i - 2][j - 2] + 1);
            }
        }
        rows.push(row);
    }
    rows[a.len()][b.len()]
}

/// Whether a call asks to wait for the calls before it: its
/// `wait_for_previous` is `true` (or the string `"true"`, as numbers and
/// booleans may come as strings). Any other value, or none, is no.
pub(crate) fn waits_for_previous(arguments: Option<&JsonObject>) -> bool {
    is_true(arguments.and_then(|arguments| arguments.get("wait_for_previous")))
}

/// Whether a flag as sent (not yet checked) is set: `true` or `"true"`.
pub(crate) fn is_true(value: Option<&Value>) -> bool {
    match value {
        Some(Value::Bool(flag)) => *flag,
        Some(Value::String(text)) => text == "true",
        _ => false,
    }
}

/// The rule for every timeout, of a tool or a flag: a positive number of
/// seconds, at most [`MAX_TIMEOUT`]. `name` is what the caller wrote
/// (`timeout_sec`, `--timeout`).
pub(crate) fn seconds(name: &str, value: f64) -> Result<Duration, String> {
    seconds_up_to(name, value, MAX_TIMEOUT)
}

/// A positive number of seconds, at most `max`.
pub(crate) fn seconds_up_to(name: &str, value: f64, max: Duration) -> Result<Duration, String> {
    if value.is_finite() && value > 0.0 && value <= max.as_secs_f64() {
        let duration = Duration::from_secs_f64(value);
        if !duration.is_zero() {
            return Ok(duration);
        }
    }
    Err(refuse(ArgError::Seconds { name, max, got: value }))
}

/// A timeout as the policy takes it, under the rule of [`seconds`].
pub(crate) fn explicit_timeout(name: &str, value: f64) -> Result<ExplicitTimeout, String> {
    seconds(name, value)?;
    ExplicitTimeout::from_secs_f64(value).map_err(|err| render::invalid_timeout(name, &err))
}

/// A session's name: 1 to 32 characters from `[A-Za-z0-9_.-]`.
pub(crate) fn session(name: String) -> Result<String, String> {
    match validate_name(&name) {
        Ok(()) => Ok(name),
        Err(err) => Err(render::registry_error(&err)),
    }
}

/// What no command line can carry: a NUL byte.
fn command_text(name: &str, text: &str) -> Result<(), String> {
    if text.contains('\0') {
        return Err(refuse(ArgError::NulInCommand { name }));
    }
    Ok(())
}

/// A path: anything but a NUL byte.
fn path(name: &str, text: String) -> Result<PathBuf, String> {
    if text.contains('\0') {
        return Err(refuse(ArgError::NulInPath { name }));
    }
    Ok(PathBuf::from(text))
}

/// One environment variable: a name without `=` or NUL that is not
/// shellkeep's own, and a value without NUL.
fn environment(name: &str, value: &str) -> Result<(), String> {
    let refused = if name.is_empty() {
        ArgError::EnvEmptyName
    } else if name.contains('=') {
        ArgError::EnvNameWithEquals { name }
    } else if name.contains('\0') {
        ArgError::EnvNameNul { name }
    } else if name == SCOPE_VAR {
        ArgError::EnvNameReserved { name }
    } else if value.contains('\0') {
        ArgError::EnvValueNul { name }
    } else {
        return Ok(());
    };
    Err(refuse(refused))
}

/// The message of `err`, worded by `render`.
fn refuse(err: ArgError<'_>) -> String {
    render::argument_error(&err)
}

/// Numbers and booleans as the schemas declare them, or as strings holding
/// only them: `"5"`, `"-2"`, `"5.5"`, `"true"`, as many model clients send
/// them. A string is read with JSON's own number syntax, so what it holds
/// gets exactly the checks a number would (`"-2"` is no line count, `"5.5"`
/// no command number); anything else in it (`"five"`, `" 5"`, `"1e999"`,
/// `"0x10"`) is refused with the string quoted. `Checked` puts the
/// argument's name in front of each message.
mod lenient {
    use serde::de::{Deserialize, DeserializeOwned, Deserializer, Error};
    use serde_json::Value;

    use super::{ArgError, refuse};

    /// An optional number (`null` is left out).
    pub(super) fn number<'de, D: Deserializer<'de>, T: DeserializeOwned>(
        deserializer: D,
    ) -> Result<Option<T>, D::Error> {
        let value = match Option::<Value>::deserialize(deserializer)? {
            None => return Ok(None),
            Some(Value::String(text)) => Value::Number(number_in(&text).map_err(D::Error::custom)?),
            Some(value) => value,
        };
        T::deserialize(value).map(Some).map_err(D::Error::custom)
    }

    /// A boolean, or `"true"` or `"false"`; `null` is false (not given).
    pub(super) fn flag<'de, D: Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
        match Value::deserialize(deserializer)? {
            Value::Bool(flag) => Ok(flag),
            Value::Null => Ok(false),
            Value::String(text) if text == "true" => Ok(true),
            Value::String(text) if text == "false" => Ok(false),
            Value::String(text) => Err(D::Error::custom(refuse(ArgError::NotAFlag(&text)))),
            other => bool::deserialize(other).map_err(D::Error::custom),
        }
    }

    /// An optional boolean, read as [`flag`] reads one; `null` is `None`
    /// (not given).
    pub(super) fn optional_flag<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<bool>, D::Error> {
        match Value::deserialize(deserializer)? {
            Value::Null => Ok(None),
            value => flag(value).map(Some).map_err(D::Error::custom),
        }
    }

    /// An optional `network`: `"on"`, `"off"`, or a boolean (`true` is
    /// on) as models may send one; `null` is `None` (not given).
    pub(super) fn network<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<super::NetworkArg>, D::Error> {
        use super::NetworkArg;
        match Value::deserialize(deserializer)? {
            Value::Null => Ok(None),
            Value::Bool(on) => Ok(Some(if on { NetworkArg::On } else { NetworkArg::Off })),
            Value::String(text) if text == "on" => Ok(Some(NetworkArg::On)),
            Value::String(text) if text == "off" => Ok(Some(NetworkArg::Off)),
            Value::String(text) => Err(D::Error::custom(refuse(ArgError::NotANetwork(&text)))),
            other => {
                let other = other.to_string();
                Err(D::Error::custom(refuse(ArgError::NotANetwork(&other))))
            }
        }
    }

    /// The number a string holds, written as JSON writes numbers.
    pub(super) fn number_in(text: &str) -> Result<serde_json::Number, String> {
        let plain = !text.is_empty()
            && !text.starts_with(char::is_whitespace)
            && !text.ends_with(char::is_whitespace);
        match serde_json::from_str::<serde_json::Number>(text) {
            Ok(number) if plain => Ok(number),
            _ => Err(refuse(ArgError::NotANumber(text))),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    /// What checking `args` as `T` gives: `Ok` with the checked value shown
    /// with `{:?}`, or the error's message.
    fn check<T: serde::de::DeserializeOwned, C: std::fmt::Debug>(
        args: Value,
        check: fn(T) -> Result<C, String>,
    ) -> Result<String, String> {
        let raw: T = serde_json::from_value(args).map_err(|err| format!("serde: {err}"))?;
        check(raw).map(|checked| format!("{checked:?}"))
    }

    /// Runs a table of (arguments, expected message or `None` for valid)
    /// through `checker` and reports every case that went wrong.
    fn table(checker: impl Fn(Value) -> Result<String, String>, cases: &[(Value, Option<&str>)]) {
        let mut problems = Vec::new();
        for (args, expected) in cases {
            match (checker(args.clone()), expected) {
                (Ok(_), None) => {}
                (Err(message), Some(expected)) if message == *expected => {}
                (got, _) => problems.push(format!("{args}: expected {expected:?}, got {got:?}")),
            }
        }
        assert!(problems.is_empty(), "{} problems:\n{}", problems.len(), problems.join("\n"));
    }

    const NOT_A_TIMEOUT: &str = "must be a positive number of seconds, at most 86400 (1 day), got";

    #[test]
    fn terminal_arguments() {
        let timeout = |got: &str| format!("timeout {NOT_A_TIMEOUT} {got}");
        let (m1, m0, mbig) = (timeout("-1"), timeout("0"), timeout("86400.5"));
        // Too small to be a nanosecond: zero, not positive.
        let mtiny = timeout("0.000000000001");
        table(
            |args| check(args, TerminalArgs::check),
            &[
                (json!({"command": "ls"}), None),
                (json!({"command": "ls", "timeout": 0.1}), None),
                (json!({"command": "ls", "timeout": 86400}), None),
                (json!({"command": "ls", "timeout": -1}), Some(&m1)),
                (json!({"command": "ls", "timeout": 0}), Some(&m0)),
                (json!({"command": "ls", "timeout": 86400.5}), Some(&mbig)),
                (json!({"command": "ls", "timeout": 1e-12}), Some(&mtiny)),
                (
                    json!({"command": "echo a\u{0}b"}),
                    Some(
                        "`command` contains a NUL byte (\\0), which a command line cannot \
                         carry; remove it (printf '\\0' writes one; to pass binary data to \
                         `run`, use `stdin` or a file)",
                    ),
                ),
                (
                    json!({"command": "a\u{0}", "is_input": true}),
                    Some(
                        "`command` contains a NUL byte (\\0), which a command line cannot \
                         carry; remove it (printf '\\0' writes one; to pass binary data to \
                         `run`, use `stdin` or a file)",
                    ),
                ),
                (
                    json!({"command": "", "reset": true, "is_input": true}),
                    Some(
                        "reset cannot be combined with is_input: reset starts a fresh shell, so \
                         there is no running program to send input to. Send reset=true alone \
                         (optionally with a command to run in the new shell).",
                    ),
                ),
                (json!({"command": "ls", "reset": true}), None),
                (json!({"command": "make", "background": true, "session": "dev"}), None),
                (
                    json!({"command": "C-c", "is_input": true, "background": true}),
                    Some(
                        "background=true starts a new command as a job in a session of its own: \
                         give a command, without is_input or reset. To poll a job or send it \
                         input, call terminal with its `session` and background=false.",
                    ),
                ),
                (
                    json!({"command": "make", "reset": true, "background": true}),
                    Some(
                        "background=true starts a new command as a job in a session of its own: \
                         give a command, without is_input or reset. To poll a job or send it \
                         input, call terminal with its `session` and background=false.",
                    ),
                ),
                (
                    json!({"command": " ", "background": true}),
                    Some(
                        "background=true starts a new command as a job in a session of its own: \
                         give a command, without is_input or reset. To poll a job or send it \
                         input, call terminal with its `session` and background=false.",
                    ),
                ),
                (json!({"command": "ls", "session": "dev.server_2"}), None),
                (
                    json!({"command": "ls", "session": "a b"}),
                    Some(
                        "invalid session name \"a b\": use 1 to 32 characters from A-Z, a-z, \
                         0-9, `_`, `.` and `-`",
                    ),
                ),
                (
                    json!({"command": "ls", "session": ""}),
                    Some(
                        "invalid session name \"\": use 1 to 32 characters from A-Z, a-z, 0-9, \
                         `_`, `.` and `-`",
                    ),
                ),
                (json!({"command": "ls", "cwd": "/tmp"}), None),
                (json!({"command": "ls", "record": true}), None),
                (json!({"command": "ls", "record": "false"}), None),
                (json!({"command": "ls", "record": null}), None),
                (json!({"command": "ls", "sandbox": "read-only", "network": "off"}), None),
                (json!({"command": "ls", "sandbox": "workspace-write", "network": false}), None),
                (json!({"command": "ls", "sandbox": "off", "network": true}), None),
                (
                    json!({"command": "ls", "sandbox": "readonly"}),
                    Some(
                        "serde: unknown variant `readonly`, expected one of `off`, \
                         `workspace-write`, `read-only`",
                    ),
                ),
                (
                    json!({"command": "ls", "network": "none"}),
                    Some("serde: expected \"on\" or \"off\" (or true or false), got \"none\""),
                ),
                (
                    json!({"command": "ls", "record": "yes"}),
                    Some(
                        "serde: invalid type: string \"yes\", expected a boolean (true or \
                         false; the strings \"true\" and \"false\" are read as such)",
                    ),
                ),
                (
                    json!({"command": "ls", "cwd": "/tmp\u{0}x"}),
                    Some("`cwd` contains a NUL byte (\\0), which a path cannot carry; remove it"),
                ),
            ],
        );
        let checked = TerminalArgs {
            command: "sleep 1".into(),
            is_input: false,
            timeout: Some(2.5),
            reset: false,
            session: Some("dev".into()),
            cwd: Some("/tmp".into()),
            record: Some(false),
            sandbox: Some(SandboxArg::ReadOnly),
            network: Some(NetworkArg::Off),
            background: false,
            keys: None,
        }
        .check()
        .expect("valid");
        assert_eq!(checked.record, Some(false));
        assert_eq!((checked.sandbox, checked.network), (Some(Mode::ReadOnly), Some(false)));
        assert_eq!(checked.timeout, Some(Duration::from_millis(2500)));
        assert_eq!(checked.session.as_deref(), Some("dev"));
        assert_eq!(checked.cwd, Some(PathBuf::from("/tmp")));
    }

    /// `keys` go alone to the running program: `command` may be left out
    /// (it defaults to empty) or empty, `is_input` does not matter, and an
    /// empty list is no list. Key names are read later (`keys::parse_keys`).
    #[test]
    fn terminal_keys_arguments() {
        let alone = "`keys` go to the running program, alone: send them without `command` \
                     (start the program in a call of its own first), reset or background.";
        table(
            |args| check(args, TerminalArgs::check),
            &[
                (json!({"keys": ["q"]}), None),
                (json!({"keys": ["UP", "text", "F13"]}), None),
                (json!({"keys": ["DOWN"], "command": ""}), None),
                (json!({"keys": ["DOWN"], "command": "  "}), None),
                (json!({"keys": ["DOWN"], "is_input": true}), None),
                (json!({"keys": ["DOWN"], "session": "dev", "timeout": 5}), None),
                (json!({"keys": [], "command": "ls", "reset": true}), None),
                (json!({"keys": null, "command": "ls"}), None),
                (json!({}), None),
                (json!({"keys": ["ENTER"], "command": "ls"}), Some(alone)),
                (json!({"keys": ["ENTER"], "command": "C-c", "is_input": true}), Some(alone)),
                (json!({"keys": ["ENTER"], "reset": true}), Some(alone)),
                (json!({"keys": ["ENTER"], "background": true}), Some(alone)),
            ],
        );
        let keys = |args: Value| {
            let args: TerminalArgs = serde_json::from_value(args).expect("parses");
            args.check().expect("valid").keys
        };
        assert_eq!(keys(json!({"keys": ["q", "ENTER"]})), Some(vec!["q".into(), "ENTER".into()]));
        assert_eq!(keys(json!({"keys": [], "command": "ls"})), None);
        assert_eq!(keys(json!({"command": "ls"})), None);
        // The description states the bounds the engine holds lists to.
        let schema = serde_json::to_value(schemars::schema_for!(TerminalArgs)).unwrap();
        let about = schema["properties"]["keys"]["description"].as_str().unwrap_or_default();
        let bounds = format!(
            "At most {} items and {} bytes.",
            shellkeep_engine::MAX_KEYS,
            shellkeep_engine::MAX_KEYS_BYTES
        );
        assert!(about.contains(&bounds), "{about}");
        // Not a list of strings: the argument is named.
        for bad in [json!({"keys": "UP"}), json!({"keys": [1]})] {
            let err = serde_json::from_value::<Checked<TerminalArgs>>(bad).expect_err("refused");
            assert!(err.to_string().starts_with("`keys"), "{err}");
        }
    }

    #[test]
    fn run_arguments() {
        let nul_env = "contains a NUL byte (\\0), which an environment variable cannot carry; \
                       remove it";
        let (env_name_nul, env_value_nul) =
            (format!("`env` name \"A\\0B\" {nul_env}"), format!("`env` value of \"V\" {nul_env}"));
        let scope = format!(
            "`env` name \"{SCOPE_VAR}\" cannot be set: shellkeep marks every process a command \
             starts with it, to stop them all when the command ends; remove it"
        );
        let t = |name: &str, got: &str| format!("{name} {NOT_A_TIMEOUT} {got}");
        let (t1, t2, t3, t4) = (
            t("timeout_sec", "-1"),
            t("timeout_sec", "0"),
            t("no_output_timeout_sec", "0"),
            t("no_output_timeout_sec", "1000000000000"),
        );
        table(
            |args| check(args, RunArgs::check),
            &[
                (json!({"command": "true"}), None),
                (
                    json!({"command": "true", "timeout_sec": 86400, "no_output_timeout_sec": 1}),
                    None,
                ),
                (json!({"command": "true", "timeout_sec": -1}), Some(&t1)),
                (json!({"command": "true", "timeout_sec": 0}), Some(&t2)),
                (json!({"command": "true", "no_output_timeout_sec": 0}), Some(&t3)),
                (json!({"command": "true", "no_output_timeout_sec": 1e12}), Some(&t4)),
                (
                    json!({"command": "a\u{0}"}),
                    Some(
                        "`command` contains a NUL byte (\\0), which a command line cannot \
                         carry; remove it (printf '\\0' writes one; to pass binary data to \
                         `run`, use `stdin` or a file)",
                    ),
                ),
                (
                    json!({"command": "true", "cwd": "/\u{0}"}),
                    Some("`cwd` contains a NUL byte (\\0), which a path cannot carry; remove it"),
                ),
                (
                    json!({"command": "true", "env": {"": "1"}}),
                    Some("`env` has an empty variable name; give each variable a name"),
                ),
                (
                    json!({"command": "true", "env": {"A=B": "1"}}),
                    Some(
                        "`env` name \"A=B\" contains `=`, which cannot be part of a variable \
                         name; put the value on the right-hand side",
                    ),
                ),
                (json!({"command": "true", "env": {"A\u{0}B": "1"}}), Some(&env_name_nul)),
                (json!({"command": "true", "env": {"V": "a\u{0}b"}}), Some(&env_value_nul)),
                (json!({"command": "true", "env": {SCOPE_VAR: "x"}}), Some(&scope)),
                (json!({"command": "true", "env": {"OK": "1"}, "stdin": "a\u{0}b"}), None),
                (json!({"command": "true", "sandbox": "read-only", "network": "off"}), None),
                (
                    json!({"command": "true", "network": 0}),
                    Some("serde: expected \"on\" or \"off\" (or true or false), got \"0\""),
                ),
            ],
        );
        let run = RunArgs {
            command: "make".into(),
            timeout_sec: Some(8.0),
            no_output_timeout_sec: None,
            cwd: None,
            env: Some(BTreeMap::from([("B".into(), "2".into()), ("A".into(), "1".into())])),
            stdin: None,
            sandbox: Some(SandboxArg::WorkspaceWrite),
            network: None,
        }
        .check()
        .expect("valid");
        assert_eq!((run.sandbox, run.network), (Some(Mode::WorkspaceWrite), None));
        assert_eq!(run.env, [("A".into(), "1".into()), ("B".into(), "2".into())]);
        assert_eq!(run.limits.timeout.map(ExplicitTimeout::duration), Some(Duration::from_secs(8)));
        assert_eq!(run.limits.no_output, None);
    }

    #[test]
    fn policy_explain_arguments_follow_the_run_rules() {
        let t = |name: &str, got: &str| format!("{name} {NOT_A_TIMEOUT} {got}");
        let (t1, t2) = (t("timeout_sec", "-5"), t("no_output_timeout_sec", "1000000000000"));
        table(
            |args| check(args, ExplainArgs::check),
            &[
                (json!({"command": "ls"}), None),
                // Only classified, never run: any text will do.
                (json!({"command": "a\u{0}b"}), None),
                (json!({"command": "ls", "timeout_sec": -5}), Some(&t1)),
                (json!({"command": "ls", "no_output_timeout_sec": 1e12}), Some(&t2)),
            ],
        );
    }

    /// Numbers and booleans given as strings are read as the numbers and
    /// booleans they hold, with the same rules; other strings are refused
    /// with the string quoted.
    #[test]
    fn numbers_and_booleans_may_come_as_strings() {
        let number = |got: &str| {
            format!(
                "serde: invalid type: string {got}, expected a number (a string is read as one \
                 when it holds only a number, such as \"5\" or \"-2.5\")"
            )
        };
        let (five, spaced, huge, hex, empty, plus) = (
            number("\"five\""),
            number("\" 5\""),
            number("\"1e999\""),
            number("\"0x10\""),
            number("\"\""),
            number("\"+5\""),
        );
        let yes = "serde: invalid type: string \"yes\", expected a boolean (true or false; the \
                   strings \"true\" and \"false\" are read as such)";
        let zero = format!("timeout {NOT_A_TIMEOUT} 0");
        table(
            |args| check(args, TerminalArgs::check),
            &[
                (json!({"command": "ls", "timeout": "5"}), None),
                (json!({"command": "ls", "timeout": "5.5"}), None),
                (json!({"command": "ls", "timeout": "2e1"}), None),
                (json!({"command": "ls", "timeout": "0"}), Some(&zero)),
                (json!({"command": "ls", "timeout": "five"}), Some(&five)),
                (json!({"command": "ls", "timeout": " 5"}), Some(&spaced)),
                (json!({"command": "ls", "timeout": "5 "}), Some(&number("\"5 \""))),
                (json!({"command": "ls", "timeout": "1e999"}), Some(&huge)),
                (json!({"command": "ls", "timeout": "0x10"}), Some(&hex)),
                (json!({"command": "ls", "timeout": ""}), Some(&empty)),
                (json!({"command": "ls", "timeout": "+5"}), Some(&plus)),
                (json!({"command": "ls", "timeout": "NaN"}), Some(&number("\"NaN\""))),
                (json!({"command": "ls", "timeout": null}), None),
                (json!({"command": "C-c", "is_input": "true"}), None),
                (json!({"command": "ls", "reset": "false", "background": "false"}), None),
                (json!({"command": "ls", "reset": "yes"}), Some(yes)),
                (
                    json!({"command": "ls", "reset": 1}),
                    Some("serde: invalid type: integer `1`, expected a boolean"),
                ),
            ],
        );
        let checked: TerminalArgs =
            serde_json::from_value(json!({"command": "x", "timeout": "5.5", "is_input": "true"}))
                .expect("valid");
        assert_eq!((checked.timeout, checked.is_input), (Some(5.5), true));
        let checked: TerminalArgs =
            serde_json::from_value(json!({"command": "x", "is_input": "false"})).expect("valid");
        assert!(!checked.is_input);

        table(
            |args| check(args, OutputArgs::check),
            &[
                (json!({"offset": "-2", "limit": "100", "command": "3"}), None),
                (json!({"run": "4", "stream": "stderr"}), None),
                (json!({"limit": "-2"}), Some("serde: invalid value: integer `-2`, expected u64")),
                (
                    json!({"command": "5.5"}),
                    Some("serde: invalid type: floating point `5.5`, expected u64"),
                ),
                (json!({"offset": "last"}), Some(&number("\"last\""))),
            ],
        );
        let read: OutputArgs =
            serde_json::from_value(json!({"offset": "-2", "limit": "100"})).expect("valid");
        assert_eq!((read.offset, read.limit), (Some(-2), Some(100)));

        let t3 = format!("no_output_timeout_sec {NOT_A_TIMEOUT} -3");
        for checker in
            [(|args| check(args, RunArgs::check)) as fn(Value) -> Result<String, String>, |args| {
                check(args, ExplainArgs::check)
            }]
        {
            table(
                checker,
                &[
                    (
                        json!({"command": "true", "timeout_sec": "5", "no_output_timeout_sec": "30"}),
                        None,
                    ),
                    (json!({"command": "true", "no_output_timeout_sec": "-3"}), Some(&t3)),
                    (json!({"command": "true", "timeout_sec": "soon"}), Some(&number("\"soon\""))),
                ],
            );
        }
        let run: RunArgs = serde_json::from_value(
            json!({"command": "x", "timeout_sec": "5", "no_output_timeout_sec": "30.5"}),
        )
        .expect("valid");
        assert_eq!((run.timeout_sec, run.no_output_timeout_sec), (Some(5.0), Some(30.5)));
    }

    #[test]
    fn session_names_follow_one_rule_in_every_tool() {
        let bad = "invalid session name \"a/b\": use 1 to 32 characters from A-Z, a-z, 0-9, \
                   `_`, `.` and `-`";
        table(
            |args| check(args, SessionCloseArgs::check),
            &[(json!({"session": "dev"}), None), (json!({"session": "a/b"}), Some(bad))],
        );
        let stream_alone = "`stream` is only for `run` outputs (a terminal command's output is \
                            one stream): give `run` with it, or leave `stream` out";
        let run_and_session = "`run` reads a `run` command's output; `session` and `command` \
                               read a terminal command's. Give one or the other, not both.";
        table(
            |args| check(args, OutputArgs::check),
            &[
                (json!({}), None),
                (json!({"session": "dev", "offset": -5}), None),
                (json!({"session": "a/b"}), Some(bad)),
                (json!({"run": 3}), None),
                (json!({"run": 3, "stream": "stderr", "offset": -5}), None),
                (json!({"stream": "stderr"}), Some(stream_alone)),
                (json!({"run": 3, "session": "dev"}), Some(run_and_session)),
                (json!({"run": 3, "command": 2}), Some(run_and_session)),
            ],
        );
        let long = "x".repeat(10_000);
        let message = session(long).expect_err("too long");
        assert!(message.len() < 200, "{message}");
    }

    /// Argument names as the tools' schemas declare them (`keys` stands for
    /// any argument added later: the rule reads the schemas).
    fn names() -> Vec<ArgumentNames> {
        let tool = |tool: &str, known: &[&str], required: &[&str]| ArgumentNames {
            tool: tool.to_owned(),
            known: known.iter().map(|name| (*name).to_owned()).collect(),
            required: required.iter().map(|name| (*name).to_owned()).collect(),
        };
        vec![
            tool(
                "terminal",
                &[
                    "background",
                    "command",
                    "cwd",
                    "is_input",
                    "network",
                    "reset",
                    "sandbox",
                    "session",
                    "timeout",
                ],
                &["command"],
            ),
            tool(
                "run",
                &[
                    "command",
                    "cwd",
                    "env",
                    "network",
                    "no_output_timeout_sec",
                    "sandbox",
                    "stdin",
                    "timeout_sec",
                ],
                &["command"],
            ),
            tool("output", &["command", "limit", "offset", "run", "session", "stream"], &[]),
            tool("sessions", &[], &[]),
            tool("session_close", &["session"], &["session"]),
            tool(
                "policy_explain",
                &["command", "no_output_timeout_sec", "timeout_sec"],
                &["command"],
            ),
        ]
    }

    fn known(tool: &str) -> Vec<String> {
        names().into_iter().find(|names| names.tool == tool).expect("a tool").known
    }

    #[test]
    fn near_misses_name_the_right_argument() {
        let cases: &[(&str, &str, &str)] = &[
            // Case, separators and camelCase.
            ("terminal", "Timeout", "timeout"),
            ("terminal", "TIMEOUT", "timeout"),
            ("terminal", "is-input", "is_input"),
            ("terminal", "isInput", "is_input"),
            ("terminal", "IsInput", "is_input"),
            ("terminal", "CWD", "cwd"),
            ("run", "noOutputTimeoutSec", "no_output_timeout_sec"),
            ("run", "TimeoutSec", "timeout_sec"),
            // A known name among the given words, or the given words first.
            ("terminal", "session_name", "session"),
            ("terminal", "sessionName", "session"),
            ("terminal", "session_id", "session"),
            ("terminal", "timeout_sec", "timeout"),
            ("terminal", "timeout_ms", "timeout"),
            ("terminal", "max_timeout_sec", "timeout"),
            ("terminal", "command_timeout", "timeout"),
            ("terminal", "is_background", "background"),
            ("terminal", "run_in_background", "background"),
            ("run", "timeout", "timeout_sec"),
            ("run", "no_output", "no_output_timeout_sec"),
            ("run", "env_vars", "env"),
            ("policy_explain", "timeout", "timeout_sec"),
            ("output", "run_id", "run"),
            ("output", "command_number", "command"),
            ("session_close", "session_name", "session"),
            // Abbreviations of one-word names.
            ("terminal", "cmd", "command"),
            ("run", "cmd", "command"),
            ("terminal", "sess", "session"),
            ("terminal", "time", "timeout"),
            ("terminal", "bkg", "background"),
            ("run", "std", "stdin"),
            ("output", "lim", "limit"),
            ("output", "off", "offset"),
            // A few edits.
            ("terminal", "timout", "timeout"),
            ("terminal", "comand", "command"),
            ("terminal", "commands", "command"),
            ("terminal", "sesion", "session"),
            ("terminal", "is_inptu", "is_input"),
            ("terminal", "backgroud", "background"),
            ("terminal", "rest", "reset"),
            ("run", "timeout_secs", "timeout_sec"),
            ("run", "stdinn", "stdin"),
            ("output", "limits", "limit"),
            ("output", "ofset", "offset"),
            ("output", "streams", "stream"),
            // The sandbox's arguments.
            ("terminal", "sandbox_mode", "sandbox"),
            ("terminal", "sandboxMode", "sandbox"),
            ("terminal", "Sandbox", "sandbox"),
            ("terminal", "sandbx", "sandbox"),
            ("terminal", "network_access", "network"),
            ("terminal", "Network", "network"),
            ("run", "sandbox_mode", "sandbox"),
            ("run", "netwrok", "network"),
        ];
        let mut problems = Vec::new();
        for (tool, given, expected) in cases {
            let known = known(tool);
            let got = near_miss(given, &known);
            if got != Some(*expected) {
                problems.push(format!("{tool} {given}: expected {expected}, got {got:?}"));
            }
        }
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }

    #[test]
    fn keys_models_add_and_names_of_other_meanings_are_no_near_misses() {
        let every: Vec<String> = names().into_iter().flat_map(|names| names.known).collect();
        let long = "timeout_".repeat(20);
        let mut problems = Vec::new();
        for given in [
            "thought",
            "thoughts",
            "description",
            "desc",
            "reasoning",
            "reason",
            "explanation",
            "title",
            "intent",
            "goal",
            "note",
            "notes",
            "confidence",
            "foo",
            "bar",
            "baz",
            "car",
            "cat",
            "tail",
            "loop",
            "input",
            "lines",
            "workdir",
            "directory",
            "path",
            "name",
            "text",
            "test",
            "id",
            "bg",
            "no",
            "to",
            "x",
            "",
            "_",
            "sec",
            "code",
            "user",
            "tags",
            "mode",
            long.as_str(),
        ] {
            if let Some(hit) = near_miss(given, &every) {
                problems.push(format!("{given:?} was taken for {hit}"));
            }
        }
        assert!(problems.is_empty(), "{}", problems.join("\n"));
        // An exact name is no near miss of another: it is that name.
        assert_eq!(near_miss("timeout", &known("terminal")), Some("timeout"));
        // A short name needs the exact letters.
        assert_eq!(near_miss("cdw", &known("terminal")), None);
        assert_eq!(near_miss("enb", &known("run")), None);
    }

    #[test]
    fn the_closest_name_wins() {
        assert_eq!(edit_distance(&['a', 'b'], &['b', 'a']), 1);
        assert_eq!(edit_distance(&[], &['a', 'b']), 2);
        let ch = |s: &str| s.chars().collect::<Vec<_>>();
        assert_eq!(edit_distance(&ch("thought"), &ch("timeout")), 5);
        assert_eq!(words("noOutputTimeoutSec"), ["no", "output", "timeout", "sec"]);
        assert_eq!(words("x2Y-z.w v"), ["x2", "y", "z", "w", "v"]);
        // Same words before more words; fewer extra words before more.
        assert_eq!(near_miss("timeout", &known("run")), Some("timeout_sec"));
        assert_eq!(near_miss("output_timeout", &known("run")), None);
        // The head noun (last word) before an earlier one.
        assert_eq!(near_miss("command_timeout", &known("terminal")), Some("timeout"));
        assert_eq!(near_miss("timeout_command", &known("terminal")), Some("command"));
    }

    /// Sorts `args` for `tool`: the arguments kept and the names ignored,
    /// or the error.
    fn sorted(tool: &str, args: Value) -> Result<(Value, Vec<String>), String> {
        let all = names();
        let names = all.iter().find(|names| names.tool == tool).expect("a tool");
        let Value::Object(mut arguments) = args else { unreachable!() };
        let ignored = sort_arguments(&mut arguments, names, &all)?;
        Ok((Value::Object(arguments), ignored))
    }

    #[test]
    fn unknown_arguments_are_ignored_and_named_client_keys_silently() {
        let ok = |tool: &str, args: Value, kept: Value, ignored: &[&str]| {
            let got = sorted(tool, args.clone());
            let ignored: Vec<String> = ignored.iter().map(|name| (*name).to_owned()).collect();
            assert_eq!(got, Ok((kept, ignored)), "{tool} {args}");
        };
        ok(
            "terminal",
            json!({"command": "ls", "wait_for_previous": true, "summary": "list", "security_risk": "LOW"}),
            json!({"command": "ls"}),
            &[],
        );
        ok(
            "terminal",
            json!({"command": "ls", "foo": 1, "thought": "t", "description": "d"}),
            json!({"command": "ls"}),
            &["foo", "thought", "description"],
        );
        for tool in ["run", "policy_explain"] {
            ok(
                tool,
                json!({"command": "ls", "bogus": [1], "wait_for_previous": false}),
                json!({"command": "ls"}),
                &["bogus"],
            );
        }
        ok(
            "sessions",
            json!({"wait_for_previous": true, "verbose": true}),
            json!({}),
            &["verbose"],
        );
        ok("output", json!({"summary": "s", "foo": null}), json!({}), &[]);
        ok(
            "session_close",
            json!({"session": "dev", "reasoning": "done"}),
            json!({"session": "dev"}),
            &["reasoning"],
        );
    }

    #[test]
    fn null_means_not_given_but_for_a_required_argument() {
        let (kept, ignored) = sorted(
            "terminal",
            json!({"command": "ls", "is_input": null, "reset": null, "background": null,
                   "timeout": null, "session": null, "cwd": null}),
        )
        .expect("valid");
        assert_eq!((kept, ignored), (json!({"command": "ls"}), Vec::<String>::new()));
        let (kept, _) = sorted(
            "run",
            json!({"command": "ls", "timeout_sec": null, "no_output_timeout_sec": null,
                   "cwd": null, "env": null, "stdin": null}),
        )
        .expect("valid");
        assert_eq!(kept, json!({"command": "ls"}));
        let (kept, _) = sorted(
            "output",
            json!({"session": null, "command": null, "run": null, "stream": null,
                   "offset": null, "limit": null}),
        )
        .expect("valid");
        assert_eq!(kept, json!({}));
        // A required argument keeps its null, and its check says so.
        let (kept, _) = sorted("terminal", json!({"command": null})).expect("sorted");
        assert_eq!(kept, json!({"command": null}));
        let err = check(kept, TerminalArgs::check).expect_err("null is no command");
        assert_eq!(err, "serde: invalid type: null, expected a string");
        // The types read null as not given too.
        table(
            |args| check(args, TerminalArgs::check),
            &[(
                json!({"command": "ls", "is_input": null, "reset": null, "background": null}),
                None,
            )],
        );
    }

    #[test]
    fn a_near_miss_is_an_error_naming_the_right_argument() {
        let err = |tool: &str, args: Value| sorted(tool, args).expect_err("a near miss");
        assert_eq!(
            err("terminal", json!({"command": "ls", "timout": 5})),
            "unknown argument `timout`: did you mean `timeout`?"
        );
        assert_eq!(
            err("run", json!({"command": "ls", "timeout": 5})),
            "unknown argument `timeout`: did you mean `timeout_sec`?"
        );
        assert_eq!(
            err("policy_explain", json!({"cmd": "ls"})),
            "unknown argument `cmd`: did you mean `command`?"
        );
        assert_eq!(
            err("terminal", json!({"command": "ls", "Session_Name": "dev", "timeout_sec": 1})),
            "unknown argument `Session_Name`: did you mean `session`?; unknown argument \
             `timeout_sec`: did you mean `timeout`?"
        );
        // Another tool's argument: ignoring it would run something else.
        assert_eq!(
            err("terminal", json!({"command": "deploy", "env": {"DRY_RUN": "1"}})),
            "unknown argument `env`: `terminal` does not take it (`env` is an argument of run); \
             `terminal` takes background, command, cwd, is_input, network, reset, sandbox, \
             session, timeout"
        );
        assert_eq!(
            err("run", json!({"command": "ls", "session": "dev"})),
            "unknown argument `session`: `run` does not take it (`session` is an argument of \
             terminal, output and session_close); `run` takes command, cwd, env, network, \
             no_output_timeout_sec, sandbox, stdin, timeout_sec"
        );
        assert_eq!(
            err("sessions", json!({"command": "ls"})),
            "unknown argument `command`: `sessions` does not take it (`command` is an argument \
             of terminal, run, output and policy_explain); `sessions` takes no arguments"
        );
        // A name is quoted cut and escaped; many near misses are counted.
        let long = format!("timeout_{}", "x".repeat(50));
        assert_eq!(
            err("terminal", json!({"command": "ls", long: 1})),
            format!("unknown argument `timeout_{}…`: did you mean `timeout`?", "x".repeat(32))
        );
        // Too long to be a near miss (`NEAR_MISS_CHARS`): ignored.
        let longer = format!("timeout_{}", "x".repeat(60));
        let ignored = sorted("terminal", json!({"command": "ls", longer.clone(): 1}));
        assert_eq!(ignored, Ok((json!({"command": "ls"}), vec![longer])));
        let mut many = json!({"command": "ls"});
        for typo in ["timout", "tmeout", "timeot", "timeuot", "imeout", "tiemout", "timeoutt"] {
            many[typo] = json!(1);
        }
        let message = err("terminal", many);
        assert!(message.ends_with("; and 2 more unknown arguments"), "{message}");
        assert_eq!(message.matches("did you mean `timeout`?").count(), 5, "{message}");
    }

    #[test]
    fn wait_for_previous_is_true_or_the_string_true() {
        let waits = |args: Value| {
            let Value::Object(arguments) = args else { unreachable!() };
            waits_for_previous(Some(&arguments))
        };
        assert!(waits(json!({"wait_for_previous": true})));
        assert!(waits(json!({"wait_for_previous": "true"})));
        for no in [json!(false), json!("false"), json!(null), json!(1), json!("yes")] {
            assert!(!waits(json!({"wait_for_previous": no})), "{no}");
        }
        assert!(!waits(json!({})));
        assert!(!waits_for_previous(None));
    }

    #[test]
    fn the_cli_timeout_follows_the_same_rule_in_its_own_words() {
        assert_eq!(
            explicit_timeout("--timeout", -1.0).unwrap_err(),
            format!("--timeout {NOT_A_TIMEOUT} -1")
        );
        assert_eq!(
            explicit_timeout("--timeout", 1e9).unwrap_err(),
            format!("--timeout {NOT_A_TIMEOUT} 1000000000")
        );
        let ok = explicit_timeout("--timeout", 120.0).expect("valid");
        assert_eq!(ok.duration(), Duration::from_secs(120));
    }
}
