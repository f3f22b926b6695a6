//! The words of a refused call: an argument the server cannot use, a
//! session the registry could not open or find, a timeout the policy
//! refused, a call that waited too long behind others.
//!
//! Not for finding them: `args.rs` finds an [`ArgError`] (defined here,
//! beside its words) and the engine hands over typed errors; this module
//! alone turns them into the sentence an agent reads, each ending with
//! what to do next. It runs nothing.

use std::time::Duration;

use shellkeep_engine::{InvalidTimeout, MAX_TIMEOUT};
use shellkeep_engine::{MAX_NAME_LEN, RegistryError};

use super::echo;
use super::units::{size, span};

/// A timeout the policy refused, named as the caller wrote it
/// (`timeout_sec`, `--timeout`).
pub(crate) fn invalid_timeout(name: &str, err: &InvalidTimeout) -> String {
    match err {
        InvalidTimeout::NotPositive(got) => {
            format!("{name} must be a positive number of seconds, got {got}")
        }
        InvalidTimeout::TooLarge(got) => format!(
            "{name} must be at most {} seconds (365 days), got {got}",
            MAX_TIMEOUT.as_secs()
        ),
    }
}

/// Why a session could not be opened or found, with what to do about it.
pub(crate) fn registry_error(err: &RegistryError) -> String {
    let listed = |open: &[String]| match open {
        [] => "none".to_owned(),
        open => open.join(", "),
    };
    match err {
        RegistryError::InvalidName(name) => format!(
            "invalid session name {name:?}: use 1 to {MAX_NAME_LEN} characters from A-Z, a-z, \
             0-9, `_`, `.` and `-`"
        ),
        RegistryError::Unknown { name, open } => {
            format!("no session is named {name:?}. Open sessions: {}", listed(open))
        }
        RegistryError::TooMany { name, limit, open } => format!(
            "cannot start session {name:?}: {limit} sessions are open, the limit. Close one with \
             session_close first. Open sessions: {}",
            listed(open)
        ),
        RegistryError::NameTaken(name) => format!(
            "session {name:?} already exists: a background job needs a new session. Omit \
             `session` to get a generated name, or close that session first"
        ),
        RegistryError::BadCwd(dir) => format!("cwd {dir:?} is not a directory"),
        RegistryError::NoRandom(why) => {
            format!("cannot name a background job: the system's random source failed ({why})")
        }
    }
}

/// The most characters of an argument's name a reply quotes.
const ARGUMENT_NAME_CHARS: usize = 40;

/// The most ignored arguments a notice names; the rest are counted.
const IGNORED_NAMED: usize = 5;

/// An argument's name as a reply quotes it: in backticks, control
/// characters escaped, cut to [`ARGUMENT_NAME_CHARS`] characters with an
/// ellipsis (a client can send a name of megabytes).
pub(crate) fn argument_name(name: &str) -> String {
    let shown: String =
        name.chars().take(ARGUMENT_NAME_CHARS).flat_map(char::escape_debug).collect();
    let cut = if name.chars().nth(ARGUMENT_NAME_CHARS).is_some() { "…" } else { "" };
    format!("`{shown}{cut}`")
}

/// `items` as a sentence lists them: `a`, `a and b`, `a, b and c`.
pub(crate) fn and_list(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => (*one).to_owned(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// The notice naming the arguments a call gave that its tool does not
/// take, which were ignored (the call ran without them), with the ones it
/// takes: at most [`IGNORED_NAMED`] names, each quoted with
/// [`argument_name`].
pub(crate) fn ignored_arguments(tool: &str, ignored: &[String], known: &[String]) -> String {
    let mut names: Vec<String> =
        ignored.iter().take(IGNORED_NAMED).map(|name| argument_name(name)).collect();
    if ignored.len() > IGNORED_NAMED {
        names.push(format!("{} more", ignored.len() - IGNORED_NAMED));
    }
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let what = if ignored.len() == 1 { "argument" } else { "arguments" };
    let takes = match known {
        [] => "takes no arguments".to_owned(),
        known => format!("takes {}", known.join(", ")),
    };
    format!("[Ignored the unknown {what} {}: {tool} {takes}.]", and_list(&names))
}

/// The reply of a call the client cancelled while it waited for earlier
/// calls (`wait_for_previous`); the wire sends no reply to a cancelled
/// request, so no client reads it.
pub(crate) fn cancelled_while_waiting() -> String {
    "Not run: the call was cancelled while it waited for earlier calls to return.".to_owned()
}

/// Why a call that asked to wait for the calls before it
/// (`wait_for_previous`) was not run: `max` calls wait already.
pub(crate) fn too_many_waiting(max: usize) -> String {
    format!(
        "Not run: {max} calls already wait for earlier calls to return (wait_for_previous), \
         the most that may wait at once. Send it again when some of them have returned, or \
         without wait_for_previous."
    )
}

/// An argument a tool or a flag cannot use, as data: `args` finds it,
/// [`argument_error`] words it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ArgError<'a> {
    /// `keys` with a command, a reset or a background job.
    KeysNotAlone,
    /// `reset` with `is_input`.
    ResetWithInput,
    /// `background` without a command, or with `is_input` or `reset`.
    BackgroundWithoutCommand,
    /// `stream` without `run`.
    StreamWithoutRun,
    /// `run` with `session` or `command`.
    RunWithSession,
    /// A number of seconds that is not positive or is over `max`.
    Seconds {
        /// The argument or flag, as the caller wrote it.
        name: &'a str,
        /// The most it may be.
        max: Duration,
        /// The value given.
        got: f64,
    },
    /// A command (or other text for a command line) with a NUL byte.
    NulInCommand {
        /// The argument.
        name: &'a str,
    },
    /// A path with a NUL byte.
    NulInPath {
        /// The argument.
        name: &'a str,
    },
    /// An `env` variable without a name.
    EnvEmptyName,
    /// An `env` name with `=`.
    EnvNameWithEquals {
        /// The name given.
        name: &'a str,
    },
    /// An `env` name with a NUL byte.
    EnvNameNul {
        /// The name given.
        name: &'a str,
    },
    /// An `env` name shellkeep sets itself.
    EnvNameReserved {
        /// The name given.
        name: &'a str,
    },
    /// An `env` value with a NUL byte.
    EnvValueNul {
        /// The variable's name.
        name: &'a str,
    },
    /// An unknown argument that is a near miss of one the tool takes.
    NearMiss {
        /// The name given.
        given: &'a str,
        /// The tool's argument it is a near miss of.
        right: &'a str,
    },
    /// An unknown argument that is (a near miss of) another tool's.
    OfAnotherTool {
        /// The name given.
        given: &'a str,
        /// The tool called.
        tool: &'a str,
        /// The other tools' argument it is a near miss of.
        right: &'a str,
        /// The tools that take `right`.
        takers: &'a [&'a str],
        /// The arguments `tool` takes.
        known: &'a [String],
    },
    /// A string where a boolean goes that is not `"true"` or `"false"`.
    NotAFlag(&'a str),
    /// A `network` that is not `"on"`, `"off"` or a boolean (as JSON).
    NotANetwork(&'a str),
    /// A string where a number goes that does not hold only a number.
    NotANumber(&'a str),
}

/// The message of an argument a tool or a flag cannot use, with what to
/// send instead.
pub(crate) fn argument_error(err: &ArgError<'_>) -> String {
    const NUL: &str = "contains a NUL byte (\\0), which an environment variable cannot carry; \
                       remove it";
    match err {
        ArgError::KeysNotAlone => "`keys` go to the running program, alone: send them without \
                                   `command` (start the program in a call of its own first), \
                                   reset or background."
            .to_owned(),
        ArgError::ResetWithInput => "reset cannot be combined with is_input: reset starts a \
                                     fresh shell, so there is no running program to send input \
                                     to. Send reset=true alone (optionally with a command to run \
                                     in the new shell)."
            .to_owned(),
        ArgError::BackgroundWithoutCommand => "background=true starts a new command as a job in \
                                               a session of its own: give a command, without \
                                               is_input or reset. To poll a job or send it input, \
                                               call terminal with its `session` and \
                                               background=false."
            .to_owned(),
        ArgError::StreamWithoutRun => "`stream` is only for `run` outputs (a terminal command's \
                                       output is one stream): give `run` with it, or leave \
                                       `stream` out"
            .to_owned(),
        ArgError::RunWithSession => "`run` reads a `run` command's output; `session` and \
                                     `command` read a terminal command's. Give one or the other, \
                                     not both."
            .to_owned(),
        ArgError::Seconds { name, max, got } => format!(
            "{name} must be a positive number of seconds, at most {} ({}), got {got}",
            max.as_secs(),
            span(*max)
        ),
        ArgError::NulInCommand { name } => format!(
            "`{name}` contains a NUL byte (\\0), which a command line cannot carry; remove it \
             (printf '\\0' writes one; to pass binary data to `run`, use `stdin` or a file)"
        ),
        ArgError::NulInPath { name } => {
            format!("`{name}` contains a NUL byte (\\0), which a path cannot carry; remove it")
        }
        ArgError::EnvEmptyName => {
            "`env` has an empty variable name; give each variable a name".to_owned()
        }
        ArgError::EnvNameWithEquals { name } => format!(
            "`env` name {} contains `=`, which cannot be part of a variable name; put the value \
             on the right-hand side",
            echo(name)
        ),
        ArgError::EnvNameNul { name } => format!("`env` name {} {NUL}", echo(name)),
        ArgError::EnvNameReserved { name } => format!(
            "`env` name {} cannot be set: shellkeep marks every process a command starts with \
             it, to stop them all when the command ends; remove it",
            echo(name)
        ),
        ArgError::EnvValueNul { name } => format!("`env` value of {} {NUL}", echo(name)),
        ArgError::NearMiss { given, right } => {
            format!("unknown argument {}: did you mean `{right}`?", argument_name(given))
        }
        ArgError::OfAnotherTool { given, tool, right, takers, known } => {
            another_tools_argument(given, tool, right, takers, known)
        }
        ArgError::NotAFlag(got) => format!(
            "invalid type: string {}, expected a boolean (true or false; the strings \"true\" and \
             \"false\" are read as such)",
            echo(got)
        ),
        ArgError::NotANetwork(got) => {
            format!("expected \"on\" or \"off\" (or true or false), got {}", echo(got))
        }
        ArgError::NotANumber(got) => format!(
            "invalid type: string {}, expected a number (a string is read as one when it holds \
             only a number, such as \"5\" or \"-2.5\")",
            echo(got)
        ),
    }
}

/// The message of `given`, an argument `tool` does not take (it takes
/// `known`) that is, or is a near miss of, `right`, an argument of the
/// tools `takers`.
fn another_tools_argument(
    given: &str,
    tool: &str,
    right: &str,
    takers: &[&str],
    known: &[String],
) -> String {
    let takes = match known {
        [] => format!("`{tool}` takes no arguments"),
        known => format!("`{tool}` takes {}", known.join(", ")),
    };
    format!(
        "unknown argument {}: `{tool}` does not take it (`{right}` is an argument of {}); {takes}",
        argument_name(given),
        and_list(takers),
    )
}

/// The error of a call with unknown arguments that are near misses
/// (`misses`, each worded by [`argument_error`]), and `more` not named.
pub(crate) fn unknown_arguments(misses: &[String], more: usize) -> String {
    let mut message = misses.join("; ");
    if more > 0 {
        message.push_str(&format!("; and {more} more unknown arguments"));
    }
    message
}

/// A JSON-RPC message refused before any method sees it: the facts, which
/// [`wire_refusal`] words (the transports send the JSON-RPC code).
#[derive(Debug, Clone, Copy)]
pub(crate) enum WireRefusal<'a> {
    /// A line of `length` bytes, over the limit of `max` per message.
    TooLong {
        /// Its length in bytes.
        length: usize,
        /// The limit in bytes.
        max: usize,
    },
    /// Arrays and objects nested deeper than `max` levels.
    TooDeep {
        /// The deepest nesting read.
        max: usize,
    },
    /// Not JSON: the parser's error.
    NotJson(&'a str),
    /// JSON, but not a message this server takes: what is wrong with it.
    Invalid(&'a str),
    /// An HTTP request whose body is empty.
    EmptyBody,
    /// A known method whose parameters do not parse: the parser's error,
    /// when it names one.
    BadParams {
        /// The method.
        method: &'a str,
        /// What the parser found wrong.
        detail: Option<&'a str>,
    },
}

/// The message of a refused JSON-RPC message, starting with the name of
/// its JSON-RPC error (`Parse error`, `Invalid request`, `Invalid params`).
pub(crate) fn wire_refusal(refusal: &WireRefusal<'_>) -> String {
    match refusal {
        WireRefusal::TooLong { length, max } => format!(
            "Invalid request: the message is {length} bytes, over the limit of {max} bytes ({}) \
             per message; it was discarded. Send large inputs through a file (write it with one \
             call, use it in the next).",
            size(*max as u64)
        ),
        WireRefusal::TooDeep { max } => format!(
            "Invalid request: the message nests arrays and objects deeper than {max} levels, \
             more than this server reads"
        ),
        WireRefusal::NotJson(err) => format!(
            "Parse error: the message is not valid JSON ({err}); send one JSON-RPC message per \
             line"
        ),
        WireRefusal::Invalid(what) => format!("Invalid request: {what}"),
        WireRefusal::EmptyBody => {
            "Invalid request: the body is empty; send one JSON-RPC message".to_owned()
        }
        WireRefusal::BadParams { method, detail: Some(err) } => {
            format!("Invalid params for {method}: {err}")
        }
        WireRefusal::BadParams { method, detail: None } => {
            format!("Invalid params for {method}: they do not match the method's parameters")
        }
    }
}

/// An HTTP request refused before MCP sees it: the facts, which
/// [`http_refusal`] words (the transport sends the status).
#[derive(Debug, Clone, Copy)]
pub(crate) enum HttpRefusal<'a> {
    /// A session id this principal has no session under (404).
    NoSuchSession,
    /// The body could not be read (400): the reader's error.
    UnreadableBody(&'a str),
    /// The body did not arrive within this time (408).
    BodyTimeout(Duration),
    /// A bearer token that is not one of the server's (401).
    WrongToken,
    /// No bearer token (401).
    NoToken,
    /// A body past this many bytes (413).
    TooLarge(usize),
}

/// The body of a refused HTTP request, starting with its status's name.
pub(crate) fn http_refusal(refusal: &HttpRefusal<'_>) -> String {
    match refusal {
        HttpRefusal::NoSuchSession => "Not Found: no such session".to_owned(),
        HttpRefusal::UnreadableBody(err) => format!("Bad Request: cannot read the body: {err}"),
        HttpRefusal::BodyTimeout(limit) => {
            format!("Request Timeout: the body did not arrive within {} s", limit.as_secs())
        }
        HttpRefusal::WrongToken => {
            "Unauthorized: this bearer token is not one of the server's".to_owned()
        }
        HttpRefusal::NoToken => "Unauthorized: send Authorization: Bearer TOKEN (the token is \
                                 in the file the server named on stderr at start, \
                                 $SHELLKEEP_TOKEN or --token-file)"
            .to_owned(),
        HttpRefusal::TooLarge(max) => format!(
            "Payload Too Large: a request may have at most {} MiB; put larger commands, inputs \
             or environments in a file",
            max >> 20
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_invalid_timeout_is_worded_with_its_argument_and_value() {
        let cases = [
            (-3.0, "must be a positive number of seconds, got -3"),
            (0.0, "must be a positive number of seconds, got 0"),
            (-0.0, "must be a positive number of seconds, got -0"),
            (f64::NAN, "must be a positive number of seconds, got NaN"),
            (f64::INFINITY, "must be a positive number of seconds, got inf"),
            (1e-12, "must be a positive number of seconds, got 0.000000000001"),
            (31_536_001.0, "must be at most 31536000 seconds (365 days), got 31536001"),
            (
                1e30,
                "must be at most 31536000 seconds (365 days), got 1000000000000000000000000000000",
            ),
        ];
        for (value, message) in cases {
            let error = shellkeep_engine::ExplicitTimeout::try_from(value).unwrap_err();
            assert_eq!(invalid_timeout("timeout", &error), format!("timeout {message}"));
        }
    }

    #[test]
    fn engine_errors_are_worded_with_the_tools_to_use() {
        let too_many = RegistryError::TooMany {
            name: "three".into(),
            limit: 3,
            open: vec!["default".into(), "one".into(), "two".into()],
        };
        let cases = [
            (
                registry_error(&too_many),
                "cannot start session \"three\": 3 sessions are open, the limit. Close one with \
                 session_close first. Open sessions: default, one, two",
            ),
            (
                registry_error(&RegistryError::NameTaken("dev".into())),
                "session \"dev\" already exists: a background job needs a new session. Omit \
                 `session` to get a generated name, or close that session first",
            ),
            (
                registry_error(&RegistryError::BadCwd("/nowhere".into())),
                "cwd \"/nowhere\" is not a directory",
            ),
            (
                registry_error(&RegistryError::Unknown {
                    name: "x".into(),
                    open: vec!["default".into()],
                }),
                "no session is named \"x\". Open sessions: default",
            ),
            (
                invalid_timeout("--timeout", &InvalidTimeout::NotPositive(-1.0)),
                "--timeout must be a positive number of seconds, got -1",
            ),
        ];
        for (got, expected) in cases {
            assert_eq!(got, expected);
        }
    }

    #[test]
    fn snapshot_refused_calls() {
        let lines = [
            registry_error(&RegistryError::InvalidName("a b".into())),
            registry_error(&RegistryError::Unknown { name: "x".into(), open: Vec::new() }),
            registry_error(&RegistryError::NoRandom("getrandom: unavailable".into())),
            invalid_timeout("timeout_sec", &InvalidTimeout::TooLarge(1e9)),
            ignored_arguments("sessions", &["verbose".into()], &[]),
            ignored_arguments(
                "terminal",
                &(1..=7).map(|n| format!("extra{n}")).collect::<Vec<_>>(),
                &["command".into(), "session".into()],
            ),
            argument_name(&format!("weird\n{}", "y".repeat(60))),
            cancelled_while_waiting(),
            too_many_waiting(64),
        ];
        expect_test::expect![[r#"
            invalid session name "a b": use 1 to 32 characters from A-Z, a-z, 0-9, `_`, `.` and `-`
            no session is named "x". Open sessions: none
            cannot name a background job: the system's random source failed (getrandom: unavailable)
            timeout_sec must be at most 31536000 seconds (365 days), got 1000000000
            [Ignored the unknown argument `verbose`: sessions takes no arguments.]
            [Ignored the unknown arguments `extra1`, `extra2`, `extra3`, `extra4`, `extra5` and 2 more: terminal takes command, session.]
            `weird\nyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy…`
            Not run: the call was cancelled while it waited for earlier calls to return.
            Not run: 64 calls already wait for earlier calls to return (wait_for_previous), the most that may wait at once. Send it again when some of them have returned, or without wait_for_previous."#]].assert_eq(&lines.join("\n"));
    }

    #[test]
    fn snapshot_wire_refusals() {
        let lines = [
            wire_refusal(&WireRefusal::TooLong { length: 5_000_000, max: 4 << 20 }),
            wire_refusal(&WireRefusal::TooDeep { max: 128 }),
            wire_refusal(&WireRefusal::NotJson("expected value at line 1 column 1")),
            wire_refusal(&WireRefusal::Invalid("`jsonrpc` must be \"2.0\"")),
            wire_refusal(&WireRefusal::EmptyBody),
            wire_refusal(&WireRefusal::BadParams {
                method: "tools/call",
                detail: Some("missing field `name`"),
            }),
            wire_refusal(&WireRefusal::BadParams { method: "initialize", detail: None }),
        ];
        expect_test::expect![[r#"
            Invalid request: the message is 5000000 bytes, over the limit of 4194304 bytes (4 MiB) per message; it was discarded. Send large inputs through a file (write it with one call, use it in the next).
            Invalid request: the message nests arrays and objects deeper than 128 levels, more than this server reads
            Parse error: the message is not valid JSON (expected value at line 1 column 1); send one JSON-RPC message per line
            Invalid request: `jsonrpc` must be "2.0"
            Invalid request: the body is empty; send one JSON-RPC message
            Invalid params for tools/call: missing field `name`
            Invalid params for initialize: they do not match the method's parameters"#]].assert_eq(&lines.join("\n"));
    }

    #[test]
    fn snapshot_http_refusals() {
        let lines = [
            http_refusal(&HttpRefusal::NoSuchSession),
            http_refusal(&HttpRefusal::UnreadableBody("connection reset")),
            http_refusal(&HttpRefusal::BodyTimeout(Duration::from_secs(30))),
            http_refusal(&HttpRefusal::WrongToken),
            http_refusal(&HttpRefusal::NoToken),
            http_refusal(&HttpRefusal::TooLarge(16 << 20)),
        ];
        expect_test::expect![[r#"
            Not Found: no such session
            Bad Request: cannot read the body: connection reset
            Request Timeout: the body did not arrive within 30 s
            Unauthorized: this bearer token is not one of the server's
            Unauthorized: send Authorization: Bearer TOKEN (the token is in the file the server named on stderr at start, $SHELLKEEP_TOKEN or --token-file)
            Payload Too Large: a request may have at most 16 MiB; put larger commands, inputs or environments in a file"#]].assert_eq(&lines.join("\n"));
    }

    #[test]
    fn snapshot_argument_errors() {
        let max = Duration::from_secs(365 * 86_400);
        let errors = [
            ArgError::KeysNotAlone,
            ArgError::ResetWithInput,
            ArgError::BackgroundWithoutCommand,
            ArgError::StreamWithoutRun,
            ArgError::RunWithSession,
            ArgError::Seconds { name: "timeout", max, got: -2.0 },
            ArgError::NulInCommand { name: "command" },
            ArgError::NulInPath { name: "cwd" },
            ArgError::EnvEmptyName,
            ArgError::EnvNameWithEquals { name: "A=B" },
            ArgError::EnvNameNul { name: "A\0" },
            ArgError::EnvNameReserved { name: "SHELLKEEP_SCOPE" },
            ArgError::EnvValueNul { name: "PATH" },
            ArgError::NearMiss { given: "timout", right: "timeout" },
            ArgError::OfAnotherTool {
                given: "stream",
                tool: "terminal",
                right: "stream",
                takers: &["output"],
                known: &["command".to_owned(), "timeout".to_owned()],
            },
            ArgError::OfAnotherTool {
                given: "command",
                tool: "sessions",
                right: "command",
                takers: &["terminal", "run"],
                known: &[],
            },
            ArgError::NotAFlag("yes"),
            ArgError::NotANetwork("maybe"),
            ArgError::NotANetwork("3"),
            ArgError::NotANumber(" 5"),
        ];
        let mut lines: Vec<String> = errors.iter().map(argument_error).collect();
        let misses = ["unknown argument `a`: did you mean `b`?".to_owned()];
        lines.push(unknown_arguments(&misses, 2));
        expect_test::expect![[r#"
            `keys` go to the running program, alone: send them without `command` (start the program in a call of its own first), reset or background.
            reset cannot be combined with is_input: reset starts a fresh shell, so there is no running program to send input to. Send reset=true alone (optionally with a command to run in the new shell).
            background=true starts a new command as a job in a session of its own: give a command, without is_input or reset. To poll a job or send it input, call terminal with its `session` and background=false.
            `stream` is only for `run` outputs (a terminal command's output is one stream): give `run` with it, or leave `stream` out
            `run` reads a `run` command's output; `session` and `command` read a terminal command's. Give one or the other, not both.
            timeout must be a positive number of seconds, at most 31536000 (365 days), got -2
            `command` contains a NUL byte (\0), which a command line cannot carry; remove it (printf '\0' writes one; to pass binary data to `run`, use `stdin` or a file)
            `cwd` contains a NUL byte (\0), which a path cannot carry; remove it
            `env` has an empty variable name; give each variable a name
            `env` name "A=B" contains `=`, which cannot be part of a variable name; put the value on the right-hand side
            `env` name "A\0" contains a NUL byte (\0), which an environment variable cannot carry; remove it
            `env` name "SHELLKEEP_SCOPE" cannot be set: shellkeep marks every process a command starts with it, to stop them all when the command ends; remove it
            `env` value of "PATH" contains a NUL byte (\0), which an environment variable cannot carry; remove it
            unknown argument `timout`: did you mean `timeout`?
            unknown argument `stream`: `terminal` does not take it (`stream` is an argument of output); `terminal` takes command, timeout
            unknown argument `command`: `sessions` does not take it (`command` is an argument of terminal and run); `sessions` takes no arguments
            invalid type: string "yes", expected a boolean (true or false; the strings "true" and "false" are read as such)
            expected "on" or "off" (or true or false), got "maybe"
            expected "on" or "off" (or true or false), got "3"
            invalid type: string " 5", expected a number (a string is read as one when it holds only a number, such as "5" or "-2.5")
            unknown argument `a`: did you mean `b`?; and 2 more unknown arguments"#]].assert_eq(&lines.join("\n"));
    }
}
