//! Tool arguments: their types and schemas as the agent sees them, and the
//! one place they are checked. One rule per argument, the same rule for the
//! same meaning: every timeout (`terminal`'s `timeout`, `run`'s and
//! `policy_explain`'s `timeout_sec` and `no_output_timeout_sec`, the CLI's
//! `--timeout`) is a positive number of seconds, at most [`MAX_TIMEOUT`];
//! NUL bytes, environment names, session names and the combinations of
//! flags that mean nothing are refused here, with the argument's own name,
//! before the engine is called. A number or a boolean may also come as a
//! string holding only it (`"5"`, `"-2"`, `"true"`), as many model clients
//! send them; the schemas still say number and boolean.
//!
//! The engine checks some of these again as a second net; its words are not
//! what the agent reads for them. This module runs nothing and words no
//! reply (see `render`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use rmcp::schemars::{self, JsonSchema};
use serde::Deserialize;
use shellkeep_engine::policy::ExplicitTimeout;
use shellkeep_engine::process::SCOPE_VAR;
use shellkeep_engine::registry;
use shellkeep_engine::store::Stream;

use crate::render;

/// The longest timeout a call may give: one day. Longer waits are surely
/// mistakes; the policy file's own limits have their own bound.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(86_400);

/// Tool arguments of type `T` whose errors name the argument at fault
/// ("`is_input`: invalid type: string \"yes\", expected a boolean"), so the
/// agent knows which one to fix. The schema is `T`'s.
#[derive(Debug)]
pub struct Checked<T>(pub T);

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
pub struct TerminalArgs {
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
pub struct Terminal {
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
    /// Whether `command` starts a background job.
    pub background: bool,
    /// Keys for the running program, as given (an empty list is none).
    pub keys: Option<Vec<String>>,
}

impl TerminalArgs {
    /// Checks every argument; the first that breaks its rule is the error.
    pub fn check(self) -> Result<Terminal, String> {
        command_text("command", &self.command)?;
        let keys = self.keys.filter(|keys| !keys.is_empty());
        if keys.is_some() && (!self.command.trim().is_empty() || self.reset || self.background) {
            return Err("`keys` go to the running program, alone: send them without `command` \
                 (start the program in a call of its own first), reset or background."
                .to_owned());
        }
        if self.reset && self.is_input {
            return Err("reset cannot be combined with is_input: reset starts a fresh shell, so \
                 there is no running program to send input to. Send reset=true alone \
                 (optionally with a command to run in the new shell)."
                .to_owned());
        }
        if self.background && (self.is_input || self.reset || self.command.trim().is_empty()) {
            return Err("background=true starts a new command as a job in a session of its own: \
                 give a command, without is_input or reset. To poll a job or send it input, call \
                 terminal with its `session` and background=false."
                .to_owned());
        }
        Ok(Terminal {
            timeout: self.timeout.map(|secs| seconds("timeout", secs)).transpose()?,
            session: self.session.map(session).transpose()?,
            cwd: self.cwd.map(|cwd| path("cwd", cwd)).transpose()?,
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
pub struct SessionCloseArgs {
    /// The session to close. Closing `default` resets it.
    pub session: String,
}

impl SessionCloseArgs {
    /// The session's name, checked.
    pub fn check(self) -> Result<String, String> {
        session(self.session)
    }
}

/// Arguments of the `output` tool. The description of `limit`, which
/// states configured limits, is set at start-up.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OutputArgs {
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
    pub fn check(mut self) -> Result<OutputArgs, String> {
        if self.stream.is_some() && self.run.is_none() {
            return Err("`stream` is only for `run` outputs (a terminal command's output is one \
                        stream): give `run` with it, or leave `stream` out"
                .to_owned());
        }
        if self.run.is_some() && (self.session.is_some() || self.command.is_some()) {
            return Err("`run` reads a `run` command's output; `session` and `command` read a \
                        terminal command's. Give one or the other, not both."
                .to_owned());
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

/// Arguments of the `sessions` tool (none).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionsArgs {}

/// Arguments of the `run` tool.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunArgs {
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
}

/// A `run` call's arguments, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
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
}

/// The limits a call gave explicitly (`timeout_sec`, `no_output_timeout_sec`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ExplicitLimits {
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
    pub fn check(self) -> Result<Run, String> {
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
        })
    }
}

/// Arguments of the `policy_explain` tool.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExplainArgs {
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
    pub fn check(self) -> Result<(String, ExplicitLimits), String> {
        let limits = ExplicitLimits::check(self.timeout_sec, self.no_output_timeout_sec)?;
        Ok((self.command, limits))
    }
}

/// The rule for every timeout, of a tool or a flag: a positive number of
/// seconds, at most [`MAX_TIMEOUT`]. `name` is what the caller wrote
/// (`timeout_sec`, `--timeout`).
pub fn seconds(name: &str, value: f64) -> Result<Duration, String> {
    seconds_up_to(name, value, MAX_TIMEOUT)
}

/// A positive number of seconds, at most `max`.
pub fn seconds_up_to(name: &str, value: f64, max: Duration) -> Result<Duration, String> {
    if value.is_finite() && value > 0.0 && value <= max.as_secs_f64() {
        let duration = Duration::from_secs_f64(value);
        if !duration.is_zero() {
            return Ok(duration);
        }
    }
    Err(format!(
        "{name} must be a positive number of seconds, at most {} ({}), got {value}",
        max.as_secs(),
        render::span(max)
    ))
}

/// A timeout as the policy takes it, under the rule of [`seconds`].
pub fn explicit_timeout(name: &str, value: f64) -> Result<ExplicitTimeout, String> {
    seconds(name, value)?;
    ExplicitTimeout::from_secs_f64(value).map_err(|err| render::invalid_timeout(name, &err))
}

/// A session's name: 1 to 32 characters from `[A-Za-z0-9_.-]`.
pub fn session(name: String) -> Result<String, String> {
    match registry::validate_name(&name) {
        Ok(()) => Ok(name),
        Err(err) => Err(render::registry_error(&err)),
    }
}

/// What no command line can carry: a NUL byte.
fn command_text(name: &str, text: &str) -> Result<(), String> {
    if text.contains('\0') {
        return Err(format!(
            "`{name}` contains a NUL byte (\\0), which a command line cannot carry; remove it \
             (printf '\\0' writes one; to pass binary data to `run`, use `stdin` or a file)"
        ));
    }
    Ok(())
}

/// A path: anything but a NUL byte.
fn path(name: &str, text: String) -> Result<PathBuf, String> {
    if text.contains('\0') {
        return Err(format!(
            "`{name}` contains a NUL byte (\\0), which a path cannot carry; remove it"
        ));
    }
    Ok(PathBuf::from(text))
}

/// One environment variable: a name without `=` or NUL that is not
/// shellkeep's own, and a value without NUL.
fn environment(name: &str, value: &str) -> Result<(), String> {
    const NUL: &str = "contains a NUL byte (\\0), which an environment variable cannot carry; \
                       remove it";
    let shown = render::echo(name);
    if name.is_empty() {
        return Err("`env` has an empty variable name; give each variable a name".to_owned());
    }
    if name.contains('=') {
        return Err(format!(
            "`env` name {shown} contains `=`, which cannot be part of a variable name; put the \
             value on the right-hand side"
        ));
    }
    if name.contains('\0') {
        return Err(format!("`env` name {shown} {NUL}"));
    }
    if name == SCOPE_VAR {
        return Err(format!(
            "`env` name {shown} cannot be set: shellkeep marks every process a command starts \
             with it, to stop them all when the command ends; remove it"
        ));
    }
    if value.contains('\0') {
        return Err(format!("`env` value of {shown} {NUL}"));
    }
    Ok(())
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

    use crate::render;

    /// An optional number (`null` is left out).
    pub fn number<'de, D: Deserializer<'de>, T: DeserializeOwned>(
        deserializer: D,
    ) -> Result<Option<T>, D::Error> {
        let value = match Option::<Value>::deserialize(deserializer)? {
            None => return Ok(None),
            Some(Value::String(text)) => Value::Number(number_in(&text).map_err(D::Error::custom)?),
            Some(value) => value,
        };
        T::deserialize(value).map(Some).map_err(D::Error::custom)
    }

    /// A boolean, or `"true"` or `"false"`.
    pub fn flag<'de, D: Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
        match Value::deserialize(deserializer)? {
            Value::Bool(flag) => Ok(flag),
            Value::String(text) if text == "true" => Ok(true),
            Value::String(text) if text == "false" => Ok(false),
            Value::String(text) => Err(D::Error::custom(format!(
                "invalid type: string {}, expected a boolean (true or false; the strings \
                 \"true\" and \"false\" are read as such)",
                render::echo(&text)
            ))),
            other => bool::deserialize(other).map_err(D::Error::custom),
        }
    }

    /// The number a string holds, written as JSON writes numbers.
    pub fn number_in(text: &str) -> Result<serde_json::Number, String> {
        let plain = !text.is_empty()
            && !text.starts_with(char::is_whitespace)
            && !text.ends_with(char::is_whitespace);
        match serde_json::from_str::<serde_json::Number>(text) {
            Ok(number) if plain => Ok(number),
            _ => Err(format!(
                "invalid type: string {}, expected a number (a string is read as one when it \
                 holds only a number, such as \"5\" or \"-2.5\")",
                render::echo(text)
            )),
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
            background: false,
            keys: None,
        }
        .check()
        .expect("valid");
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
            shellkeep_engine::keys::MAX_KEYS,
            shellkeep_engine::keys::MAX_KEYS_BYTES
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
            ],
        );
        let run = RunArgs {
            command: "make".into(),
            timeout_sec: Some(8.0),
            no_output_timeout_sec: None,
            cwd: None,
            env: Some(BTreeMap::from([("B".into(), "2".into()), ("A".into(), "1".into())])),
            stdin: None,
        }
        .check()
        .expect("valid");
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
