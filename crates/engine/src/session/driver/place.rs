//! A background job's environment: what the calling shell exports, read
//! by a command of shellkeep's own that sends it on the completion channel
//! (`Shell::capture_env`), and given to the job's shell in a sealed memory
//! file it reads once its start-up files ran (`Shell::restore_env`).
//!
//! Bounds: [`MAX_START_ENV`] bytes of environment, [`CAPTURE_WAIT`] for the
//! shell.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::Shell;
use crate::bash_script::{self, Typing};
use crate::output::OutputStore;
use crate::process;
use crate::session::call::{MAX_START_ENV, PlaceError, PlaceFailure, SessionConfig, StartEnv};
use crate::session::command::{Command, CommandOutput};
use crate::session::shared::wait_for;

/// How long the shell may take to write its environment for a background
/// job (one builtin and one `env`, normally a few milliseconds).
const CAPTURE_WAIT: Duration = Duration::from_secs(10);

/// Variables of a calling shell's environment a background job's shell does
/// not take: its own scope marker is set instead, bash counts its own level
/// and directory, and `_` is the last command's argument.
pub(super) const NOT_INHERITED: [&str; 4] = [process::SCOPE_VAR, "SHLVL", "PWD", "_"];

/// The text of the command shellkeep's own that a calling shell runs for a
/// background job: `env -0` (the environment a child of the shell inherits,
/// exported functions included, in `NAME=value` entries ended by NUL), read
/// by the shell itself from a pipe of its own (`mapfile` from a process
/// substitution) and sent on the completion channel as `V` datagrams
/// (`__sk_send`, then `V` and a NUL after each entry, all with standard
/// output sent to the channel once), so that the kernel
/// names the shell as their sender and no other process can add to them;
/// then `$?` back as it was (a function's `return`, so that nothing forks;
/// under `set -e` it is 0). `env` runs by the program's full path (a `PATH`
/// the user changed cannot hide it, a function cannot replace it, and
/// `\builtin` is no alias).
fn capture_text(env_program: &Path) -> String {
    format!(
        "__sk_k=$?; \\builtin mapfile -d '' -t __sk_e < <(\\builtin command {} -0); {{ for __sk_v \
         in \"${{__sk_e[@]}}\"; do __sk_send V \"$__sk_v\" && \\builtin printf 'V\\0' || \
         \\builtin break; done; }} >&62; \\builtin unset __sk_e __sk_v; __sk_rs() {{ \\builtin local \
         s=$__sk_k; \\builtin unset __sk_k; \\builtin unset -f __sk_rs; \\builtin return \
         \"$s\"; }}; __sk_rs",
        bash_script::shell_quote(&env_program.to_string_lossy()),
    )
}

/// The `env` program: the first in the server's `PATH`, else
/// `/usr/bin/env`.
fn env_program() -> PathBuf {
    on_server_path(Path::new("env")).unwrap_or_else(|| PathBuf::from("/usr/bin/env"))
}

/// `program` found as the server would run it: a path as it is, a bare name
/// in the server's own `PATH` (not the one a job's environment brings).
pub(super) fn on_server_path(program: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    if program.components().count() != 1 {
        return Some(program.to_owned());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).filter(|dir| dir.is_absolute()).map(|dir| dir.join(program)).find(
        |candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        },
    )
}

/// The entries of `start_env` a background job's shell takes back after
/// its start-up files ran: `NAME=value` ended by NUL, without the variables
/// it does not inherit, the start-up hooks, or exported functions (those
/// came with its environment and are left alone).
pub(super) fn restored_entries(start_env: &StartEnv) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    let mut bytes = Vec::new();
    for (name, value) in &start_env.0 {
        let skip = NOT_INHERITED.iter().any(|n| name == n)
            || ["PROMPT_COMMAND", "BASH_ENV", "ENV"].iter().any(|n| name == n)
            || name.as_bytes().starts_with(b"BASH_FUNC_");
        if !skip {
            bytes.extend_from_slice(name.as_bytes());
            bytes.push(b'=');
            bytes.extend_from_slice(value.as_bytes());
            bytes.push(0);
        }
    }
    bytes
}

/// The lowest descriptor a background job's environment file is given at:
/// above the integration's own (61, 62), so that the start-up file moving
/// those never lands on it.
pub(super) const ENV_FD_MIN: i32 = 63;

/// `NAME=value` entries ended by NUL, as `env -0` writes them.
fn parse_env(bytes: &[u8]) -> StartEnv {
    use std::os::unix::ffi::OsStrExt;
    let entries = bytes
        .split(|&b| b == 0)
        .filter_map(|entry| {
            let eq = entry.iter().position(|&b| b == b'=').filter(|&i| i > 0)?;
            let (name, value) = (&entry[..eq], &entry[eq + 1..]);
            Some((OsStr::from_bytes(name).to_owned(), OsStr::from_bytes(value).to_owned()))
        })
        .collect();
    StartEnv(entries)
}

impl Shell {
    /// Puts the calling shell's exported values back over what this shell's
    /// start-up files changed (a `~/.bashrc` that puts `pyenv` or `nvm`
    /// first in `PATH` would otherwise hide an activated venv): the job
    /// then sees what a command started from the calling shell would. The
    /// values come from the sealed memory file the shell inherited at
    /// descriptor `env_fd` ([`restored_entries`]): no path, nothing another
    /// process can write into; opened afresh by its `/dev/fd` name, so
    /// where a child left the shared offset does not matter; closed once
    /// read.
    pub(super) async fn restore_env(
        &mut self,
        config: &SessionConfig,
        env_fd: i32,
    ) -> Result<(), PlaceError> {
        let text = format!(
            "while IFS= \\builtin read -r -d '' __sk_v; do \\builtin export -- \"$__sk_v\" \
             2>/dev/null; done </dev/fd/{env_fd}; \\exec {env_fd}<&-; \\builtin unset __sk_v"
        );
        // The first line this shell reads: its first prompt still edits
        // lines (the typed line's last word, `__sk_noedit`, turns that off).
        let ran = self.run_own(config, &text, Typing::EDITOR).await;
        // Nothing of it is the agent's to see.
        self.shared.lock().take_idle_output();
        ran.map(drop)
    }

    /// The exported environment of the shell at its prompt, as a child of
    /// it would inherit it, for a background job started from this
    /// session. The shell runs a command of shellkeep's own (see
    /// [`capture_text`]) that no reply reports: its number, output and
    /// history entry go nowhere, `$?` is kept, and a finished command no
    /// reply has reported yet stays for the next one. The environment comes
    /// on the completion channel, in datagrams the kernel names the shell
    /// as the sender of: only the shell at the prompt adds to it, no
    /// process left running can, and nothing of it is stored in a file.
    ///
    /// Bounded: [`MAX_START_ENV`] bytes are kept (more is read and
    /// dropped, so the shell never blocks, and refused), and
    /// [`CAPTURE_WAIT`] for the shell. Only for a shell with no command
    /// running.
    pub(in crate::session) async fn capture_env(
        &mut self,
        config: &SessionConfig,
    ) -> Result<StartEnv, PlaceError> {
        let typing = self
            .shell_reading()
            .await
            .map_err(|(pid, command_line)| PlaceError::NotAtPrompt { pid, command_line })?;
        let text = capture_text(&env_program());
        let shell = {
            let mut state = self.shared.lock();
            let shell = state.levels().top().map_or(self.pid, |level| level.pid());
            state.begin_capture(shell, MAX_START_ENV as usize);
            shell
        };
        let captured = self.run_own(config, &text, typing).await;
        // The shell sent its datagrams before its end record: all are read.
        let received = self.shared.lock().take_capture();
        let last_line = captured?;
        let received = received
            .filter(|received| received.pid == shell)
            .ok_or(PlaceError::Failed(PlaceFailure::NotGathered))?;
        if received.dropped > 0 {
            return Err(PlaceError::TooLarge);
        }
        let env = parse_env(&received.bytes);
        if env.0.is_empty() {
            // `env` could not start (an environment too large for any
            // program, E2BIG), or the shell's channel is closed: the shell
            // said why.
            return Err(PlaceError::Failed(PlaceFailure::Empty { last_line }));
        }
        Ok(env)
    }

    /// Runs `text`, a command of shellkeep's own, in the shell at its
    /// prompt, typed as `typing` says, and waits for its end; returns the
    /// last line it printed (output of its own is otherwise dropped: it is
    /// not the agent's).
    async fn run_own(
        &mut self,
        config: &SessionConfig,
        text: &str,
        typing: Typing,
    ) -> Result<String, PlaceError> {
        let seq = self.next_seq;
        self.next_seq += 1;
        let frame = bash_script::command_frame(seq, text);
        let written = self.commands.start(&frame);
        let now = Instant::now();
        // A store of its own: the session's numbers and logs are the agent's.
        let store =
            OutputStore::new(Arc::clone(&config.spill), &config.file_label(), config.output_limits);
        let output =
            CommandOutput::new(config.output_cap, store.begin(""), Arc::clone(&config.secrets));
        let own = Command::new(
            (seq, "(reading the environment for a background job)".to_owned()),
            (None, None),
            (process::boot_ticks_now(), typing),
            output,
            now,
        )
        .running(text);
        let line = own.typed_keys();
        let unreported = self.shared.lock().begin_own(own, now);
        self.terminal
            .type_line("", line.as_bytes(), Duration::from_secs(5))
            .await
            .map_err(|err| PlaceError::Failed(PlaceFailure::NotTyped { error: err.to_string() }))?;
        let shared = Arc::clone(&self.shared);
        self.commands.finish(&frame, written, || shared.lock().exited().is_some()).await;
        let ended = wait_for(&self.shared, CAPTURE_WAIT, |state| {
            state.exited().is_some() || state.command().is_none_or(Command::is_done)
        })
        .await;
        if !ended || self.has_exited() {
            // Left as the session's command: the next reply reports it.
            return Err(PlaceError::Failed(PlaceFailure::NotRun));
        }
        let own = self.shared.lock().restore(unreported);
        self.refresh_state();
        let shown = own.map(|own| own.into_shown().text).unwrap_or_default();
        Ok(shown.trim_end().lines().last().unwrap_or_default().to_owned())
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods, reason = "the test runs `bash -n` on the capture line")]
mod tests {
    use super::*;

    #[test]
    fn env_entries_keep_any_byte_but_nul() {
        let bytes = b"A=1\0WEIRD=a\nb \"q\" 's' =x\0\0NOEQUALS\0=novalue\0EMPTY=\0BASH_FUNC_f%%=() { echo; }\0";
        let parsed: Vec<(String, String)> = parse_env(bytes)
            .0
            .into_iter()
            .map(|(n, v)| (n.to_string_lossy().into_owned(), v.to_string_lossy().into_owned()))
            .collect();
        let expected = [
            ("A", "1"),
            ("WEIRD", "a\nb \"q\" 's' =x"),
            ("EMPTY", ""),
            ("BASH_FUNC_f%%", "() { echo; }"),
        ];
        let expected: Vec<(String, String)> =
            expected.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect();
        assert_eq!(parsed, expected);
    }

    #[test]
    fn an_environment_shows_no_value_in_debug() {
        let env = parse_env(b"TOKEN=hunter2-secret\0A=1\0");
        assert_eq!(format!("{env:?}"), "StartEnv(2 variables)");
    }

    #[test]
    fn the_capture_line_parses_and_quotes_its_paths() {
        let text = capture_text(Path::new("/opt/it's here/env"));
        assert!(text.contains(r"'/opt/it'\''s here/env' -0"), "{text}");
        let out = std::process::Command::new("bash")
            .args(["-n", "-c", &text])
            .output()
            .expect("run bash -n");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
}
