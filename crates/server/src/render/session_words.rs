//! The words for what went wrong with a session's shell: why it could not
//! be started or driven ([`ShellFailure`]), and why the environment a
//! background job takes from it could not be read ([`PlaceFailure`]). The
//! engine reports those as data; this module alone words them, as the
//! clause a tool error wraps (`session_refused`, `job_place_error`), and a
//! refused call as the audit log's neutral sentence ([`session_error`]).
//!
//! It does not word the rest of a refusal or a reply, and decides nothing.

use shellkeep_engine::{PlaceFailure, SessionError, ShellExit, ShellFailure, StartStep, Written};

/// A refused call, as a neutral sentence for a log (the audit log's
/// `detail`): what was refused and why, naming no tool or argument.
pub(crate) fn session_error(err: &SessionError) -> String {
    match err {
        SessionError::Cancelled => "the call was cancelled before it started".to_owned(),
        SessionError::NulByte => "the command contains a NUL byte".to_owned(),
        SessionError::Shell(failure) => shell_failure(failure),
        SessionError::NothingToWaitFor => {
            "no command is running, so there is nothing to wait for".to_owned()
        }
        SessionError::NothingToSendInputTo => {
            "no command is running, so there is nothing to send input to".to_owned()
        }
        SessionError::KeyWhileIncomplete => "an incomplete command is held: keys other than C-c \
                                             (discard it) and C-d (end of input) do nothing"
            .to_owned(),
        SessionError::PersonHolds { .. } => "a person holds the session for writing".to_owned(),
    }
}

/// What went wrong with the session's shell, as a clause.
pub(super) fn shell_failure(failure: &ShellFailure) -> String {
    match failure {
        ShellFailure::Start { step, error } => {
            format!("could not start the shell ({}): {error}", start_step(step))
        }
        ShellFailure::NoFirstPrompt { ended, waited, last_line } => {
            let how = match ended {
                Some(exit) => shell_exit(*exit),
                None => format!("still starting after {waited:?}"),
            };
            format!(
                "the shell did not reach its first prompt ({how}). Check the shell and its \
                 start-up files; the last line it printed: {last_line:?}"
            )
        }
        ShellFailure::Write { what: Written::Command, error } => {
            format!("could not write to the shell: {error}")
        }
        ShellFailure::Write { what: Written::Input, error } => {
            format!("could not send the input to the program: {error}")
        }
    }
}

/// The step of a shell's start that failed, as a parenthesis names it.
fn start_step(step: &StartStep) -> String {
    let name = match step {
        StartStep::RandomNonce => "random nonce",
        StartStep::RandomName => "random name",
        StartStep::PrivateDirectory => "private directory",
        StartStep::StartupFile => "start-up file",
        StartStep::CompletionChannel => "completion channel",
        StartStep::KeysFile => "keys file",
        StartStep::CommandSocket => "command socket",
        StartStep::EnvironmentFile => "environment file",
        StartStep::Pty => "PTY",
        StartStep::TemporaryDirectory => "temporary directory",
        StartStep::Sandbox => "sandbox",
        StartStep::ReaderThread => "reader thread",
        StartStep::Spawn { shell, cwd } => {
            return format!("{} in {}", shell.display(), cwd.display());
        }
    };
    name.to_owned()
}

/// How a shell ended, in words (a restarted shell, a shell that never
/// reached its first prompt).
pub(super) fn shell_exit(exit: ShellExit) -> String {
    match exit {
        ShellExit::Code(code) => format!("exit code {code}"),
        ShellExit::Signal(signal) => format!("killed by signal {signal}"),
        ShellExit::Unknown => "it stopped".to_owned(),
    }
}

/// Why a session's shell did not write its exported environment, as a
/// clause (what the shell said, when it said something).
pub(super) fn place_failure(failure: &PlaceFailure) -> String {
    match failure {
        PlaceFailure::NotGathered => "the shell's environment was not gathered".to_owned(),
        PlaceFailure::Empty { last_line } if last_line.is_empty() => {
            "the shell wrote nothing".to_owned()
        }
        PlaceFailure::Empty { last_line } => last_line.clone(),
        PlaceFailure::NotTyped { error } => format!("writing to the shell: {error}"),
        PlaceFailure::NotRun => "the shell did not run shellkeep's command".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::Duration;

    use expect_test::expect;

    use super::*;

    #[test]
    fn shell_failures() {
        let failures = [
            ShellFailure::Start {
                step: StartStep::Spawn { shell: PathBuf::from("bash"), cwd: PathBuf::from("/x") },
                error: std::io::ErrorKind::NotFound.into(),
            },
            ShellFailure::Start { step: StartStep::Pty, error: std::io::ErrorKind::Other.into() },
            ShellFailure::NoFirstPrompt {
                ended: Some(ShellExit::Code(2)),
                waited: Duration::from_secs(15),
                last_line: "bash: oops".into(),
            },
            ShellFailure::NoFirstPrompt {
                ended: None,
                waited: Duration::from_secs(15),
                last_line: String::new(),
            },
            ShellFailure::Write {
                what: Written::Input,
                error: std::io::ErrorKind::BrokenPipe.into(),
            },
        ];
        let words: Vec<String> = failures.iter().map(shell_failure).collect();
        expect![[r#"
            could not start the shell (bash in /x): entity not found
            could not start the shell (PTY): other error
            the shell did not reach its first prompt (exit code 2). Check the shell and its start-up files; the last line it printed: "bash: oops"
            the shell did not reach its first prompt (still starting after 15s). Check the shell and its start-up files; the last line it printed: ""
            could not send the input to the program: broken pipe"#]]
        .assert_eq(&words.join("\n"));
    }

    #[test]
    fn log_sentences() {
        let errors = [
            SessionError::NulByte,
            SessionError::NothingToWaitFor,
            SessionError::NothingToSendInputTo,
            SessionError::KeyWhileIncomplete,
            SessionError::PersonHolds { since: std::time::SystemTime::UNIX_EPOCH },
        ];
        let words: Vec<String> = errors.iter().map(session_error).collect();
        expect![[r#"
            the command contains a NUL byte
            no command is running, so there is nothing to wait for
            no command is running, so there is nothing to send input to
            an incomplete command is held: keys other than C-c (discard it) and C-d (end of input) do nothing
            a person holds the session for writing"#]].assert_eq(&words.join("\n"));
    }

    #[test]
    fn place_failures() {
        let failures = [
            PlaceFailure::NotGathered,
            PlaceFailure::Empty { last_line: String::new() },
            PlaceFailure::Empty { last_line: "env: argument list too long".into() },
            PlaceFailure::NotTyped { error: "broken pipe".into() },
            PlaceFailure::NotRun,
        ];
        let words: Vec<String> = failures.iter().map(place_failure).collect();
        expect![[r#"
            the shell's environment was not gathered
            the shell wrote nothing
            env: argument list too long
            writing to the shell: broken pipe
            the shell did not run shellkeep's command"#]]
        .assert_eq(&words.join("\n"));
    }
}
