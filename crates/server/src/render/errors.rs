//! The words of a refused call: an argument the server cannot use, a
//! session the registry could not open or find, a timeout the policy
//! refused, a call that waited too long behind others.
//!
//! Not for the data: `args.rs` and the engine hand over typed errors, and
//! this module alone turns them into the sentence an agent reads, each
//! ending with what to do next. It runs nothing.

use shellkeep_engine::policy::InvalidTimeout;
use shellkeep_engine::registry::RegistryError;

/// A timeout the policy refused, named as the caller wrote it
/// (`timeout_sec`, `--timeout`).
pub fn invalid_timeout(name: &str, err: &InvalidTimeout) -> String {
    format!("{name} {err}")
}

/// Why a session could not be opened or found, with what to do about it.
pub fn registry_error(err: &RegistryError) -> String {
    match err {
        RegistryError::InvalidName(_) | RegistryError::Unknown { .. } => err.to_string(),
        RegistryError::TooMany { open, .. } => {
            format!("{err}. Close one with session_close first. Open sessions: {open}")
        }
        RegistryError::NameTaken(_) => {
            format!("{err}. Omit `session` to get a generated name, or close that session first")
        }
        RegistryError::BadCwd(dir) => format!("cwd {dir:?} is not a directory"),
        RegistryError::NoRandom(_) => err.to_string(),
    }
}

/// The most characters of an argument's name a reply quotes.
const ARGUMENT_NAME_CHARS: usize = 40;

/// The most ignored arguments a notice names; the rest are counted.
const IGNORED_NAMED: usize = 5;

/// An argument's name as a reply quotes it: in backticks, control
/// characters escaped, cut to [`ARGUMENT_NAME_CHARS`] characters with an
/// ellipsis (a client can send a name of megabytes).
pub fn argument_name(name: &str) -> String {
    let shown: String =
        name.chars().take(ARGUMENT_NAME_CHARS).flat_map(char::escape_debug).collect();
    let cut = if name.chars().nth(ARGUMENT_NAME_CHARS).is_some() { "…" } else { "" };
    format!("`{shown}{cut}`")
}

/// `items` as a sentence lists them: `a`, `a and b`, `a, b and c`.
pub fn and_list(items: &[&str]) -> String {
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
pub fn ignored_arguments(tool: &str, ignored: &[String], known: &[String]) -> String {
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
pub fn cancelled_while_waiting() -> String {
    "Not run: the call was cancelled while it waited for earlier calls to return.".to_owned()
}

/// Why a call that asked to wait for the calls before it
/// (`wait_for_previous`) was not run: `max` calls wait already.
pub fn too_many_waiting(max: usize) -> String {
    format!(
        "Not run: {max} calls already wait for earlier calls to return (wait_for_previous), \
         the most that may wait at once. Send it again when some of them have returned, or \
         without wait_for_previous."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_errors_are_worded_with_the_tools_to_use() {
        let too_many = RegistryError::TooMany {
            name: "three".into(),
            limit: 3,
            open: "default, one, two".into(),
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
                    open: "default".into(),
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
}
