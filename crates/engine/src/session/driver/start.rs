//! The steps of a shell's start, each named: its private files, the
//! descriptors it inherits, its scope (limits, sandbox), the command that
//! starts it, its pid, the shared state, its terminal, and the task that
//! notices its exit. `Shell::spawn` (in `driver.rs`) runs them in order.
//!
//! It does not wait for the first prompt or run anything in the shell.
//! Invariant: what the shell trusts is given as inherited descriptors
//! (completion channel 62, sealed keys file 61, command socket 60, a job's
//! sealed environment), never through a path a command can write; the
//! server drops its copies of the shell's ends once the child has them.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::bash_script::{self, ShellFiles};
use crate::private_fs;
use crate::proc_shell;
use crate::process;
use crate::sandbox;
use crate::screen::Screen;
use crate::session::call::{SessionConfig, SessionError, ShellFailure, StartStep};
use crate::session::channel::Channel;
use crate::session::levels::Levels;
use crate::session::shared::{Shared, State};
use crate::session::watcher::ShellMarks;
use crate::terminal::{Gate, Rendered, Setup, Sink, Terminal};

use super::command_socket::CommandSocket;
use super::place::{ENV_FD_MIN, NOT_INHERITED, on_server_path, restored_entries};

/// The error of a start step that failed with `error`.
pub(super) fn start_failed(step: StartStep) -> impl FnOnce(std::io::Error) -> SessionError {
    move |error| SessionError::Shell(ShellFailure::Start { step, error })
}

/// The shell's ends of what it is given at its start, which the child
/// inherits at fixed descriptors; the server drops its copies once the
/// child has them.
pub(super) struct ShellEnds {
    /// The completion channel (descriptor 62).
    pub(super) channel: OwnedFd,
    /// The sealed memory file of key bindings (61).
    pub(super) keys: OwnedFd,
    /// The command socket (60).
    pub(super) commands: OwnedFd,
    /// A background job's environment, sealed (at [`ENV_FD_MIN`] or above).
    pub(super) env: Option<OwnedFd>,
}

/// What a shell is given at its start: the server's ends and the shell's.
pub(super) struct Descriptors {
    /// The server's end of the completion channel.
    pub(super) channel: Channel,
    /// The server's end of the command socket.
    pub(super) commands: CommandSocket,
    /// What the shell's end of the command socket links to in `/proc`.
    pub(super) command_link: PathBuf,
    /// The shell's ends.
    pub(super) shell: ShellEnds,
}

impl Descriptors {
    /// Opens the completion channel, the keys file, the command socket and,
    /// for a background job's shell, the sealed file of the environment it
    /// takes back from its calling shell (read once its start-up files
    /// ran). No command can write any of them.
    pub(super) fn open(config: &SessionConfig) -> Result<Descriptors, SessionError> {
        let (channel, channel_end) =
            Channel::open().map_err(start_failed(StartStep::CompletionChannel))?;
        let keys = bash_script::keys_file().map_err(start_failed(StartStep::KeysFile))?;
        let (commands, command_end, command_link) =
            CommandSocket::open().map_err(start_failed(StartStep::CommandSocket))?;
        let env = match &config.start_env {
            Some(start_env) => Some(
                private_fs::sealed_memfd("shellkeep-env", &restored_entries(start_env))
                    .and_then(|fd| process::dup_at_least(&fd, ENV_FD_MIN))
                    .map_err(start_failed(StartStep::EnvironmentFile))?,
            ),
            None => None,
        };
        let shell = ShellEnds { channel: channel_end, keys, commands: command_end, env };
        Ok(Descriptors { channel, commands, command_link, shell })
    }
}

impl ShellEnds {
    /// Every descriptor the child inherits.
    fn all(&self) -> Vec<&OwnedFd> {
        let mut inherited = vec![&self.channel, &self.keys, &self.commands];
        inherited.extend(self.env.as_ref());
        inherited
    }

    /// Drops the server's copies once the child has its own (only the
    /// child may hold them), keeping how another shell holding them is
    /// recognised.
    pub(super) fn release(self, command_link: PathBuf) -> ShellMarks {
        let channel_link = nix::sys::stat::fstat(&self.channel)
            .ok()
            .map(|stat| PathBuf::from(format!("socket:[{}]", stat.st_ino)));
        let keys_id = nix::sys::stat::fstat(&self.keys).ok().map(|stat| (stat.st_dev, stat.st_ino));
        ShellMarks { channel_link, keys_id, command_link: Some(command_link) }
    }
}

/// The shell's private directory, under the session's (both made private
/// now), with its start-up file written. The directory's name is random,
/// but not from the markers' nonce.
pub(super) fn private_files(config: &SessionConfig) -> Result<ShellFiles, SessionError> {
    let tag = private_fs::random_hex(4).map_err(start_failed(StartStep::RandomName))?;
    let files = ShellFiles { dir: config.work_dir.join(format!("shell-{tag}")) };
    private_fs::ensure_private_dir(&config.work_dir)
        .and_then(|()| private_fs::create_private_dir(&files.dir))
        .map_err(start_failed(StartStep::PrivateDirectory))?;
    let rc = bash_script::rc_script(&files, config.user_rc.as_deref());
    private_fs::write_new_file(&files.rc_file(), rc.as_bytes())
        .map_err(start_failed(StartStep::StartupFile))?;
    Ok(files)
}

/// The scope the shell and everything it starts carry, with its resource
/// limits and, for a sandboxed session, its confinement: a sandboxed shell
/// writes its own directory (its integration's files) and a temporary
/// directory inside it, made now and exported as `TMPDIR`.
pub(super) fn shell_scope(
    config: &SessionConfig,
    files: &ShellFiles,
) -> Result<process::Scope, SessionError> {
    let scope = process::Scope::limited("shell", &config.resources);
    if !config.sandbox.is_confined() {
        return Ok(scope);
    }
    private_fs::create_private_dir(&sandbox_tmp(files))
        .map_err(start_failed(StartStep::TemporaryDirectory))?;
    let protect = sandbox::protected_pids(config.guard.as_deref().map(crate::guard::Guard::pid));
    let confinement = sandbox::Confinement::build(&config.sandbox, &[&files.dir], &protect)
        .map_err(start_failed(StartStep::Sandbox))?;
    Ok(scope.with_confinement(confinement.rules()))
}

/// A sandboxed shell's temporary directory.
pub(super) fn sandbox_tmp(files: &ShellFiles) -> PathBuf {
    files.dir.join("tmp")
}

/// What a shell process is started from: its terminal, scope, files,
/// inherited descriptors and markers' nonce.
pub(super) struct StartFrom<'a> {
    /// The PTY's slave side: the shell's standard input, output and error.
    pub(super) slave: &'a OwnedFd,
    /// The scope it and everything it starts carry.
    pub(super) scope: &'a process::Scope,
    /// Its private files.
    pub(super) files: &'a ShellFiles,
    /// The descriptors it inherits.
    pub(super) ends: &'a ShellEnds,
    /// The nonce of its markers.
    pub(super) nonce: &'a str,
}

/// The command that starts the shell in `cwd` as `from` says: an
/// interactive bash with our start-up file, the environment the session
/// gives it, and the descriptors it inherits named in its environment.
pub(super) fn shell_command(
    config: &SessionConfig,
    cwd: &Path,
    from: &StartFrom<'_>,
) -> Result<tokio::process::Command, SessionError> {
    // With an environment of its own, a bare shell name is still looked
    // for where the server looks, not in that environment's `PATH`.
    let program = match &config.start_env {
        Some(_) => on_server_path(&config.shell).unwrap_or_else(|| config.shell.clone()),
        None => config.shell.clone(),
    };
    let mut command = process::pty_command(&program, from.slave, from.scope, &from.ends.all())
        .map_err(start_failed(StartStep::Pty))?;
    command
        .arg("--noprofile")
        .arg("--rcfile")
        .arg(from.files.rc_file())
        .arg("-i")
        .current_dir(cwd)
        .env("TERM", "xterm-256color")
        .env_remove("PROMPT_COMMAND")
        .env_remove("BASH_ENV")
        .env_remove("ENV")
        .envs(config.env.iter().map(|(k, v)| (k, v)));
    if let Some(start_env) = &config.start_env {
        // A background job's shell gets the exported environment of the
        // shell it was started from, as a child of that shell would
        // (what the user unset there stays unset), with its own scope
        // marker and a fresh shell level.
        command
            .env_clear()
            .envs(
                start_env
                    .0
                    .iter()
                    .filter(|(name, _)| !NOT_INHERITED.iter().any(|n| name == n))
                    .map(|(name, value)| (name, value)),
            )
            .env(process::SCOPE_VAR, from.scope.value())
            .env("TERM", "xterm-256color")
            .env_remove("PROMPT_COMMAND")
            .env_remove("BASH_ENV")
            .env_remove("ENV");
    }
    if config.sandbox.is_confined() {
        command.env("TMPDIR", sandbox_tmp(from.files));
    }
    command
        .env(bash_script::NONCE_VAR, from.nonce)
        .env(bash_script::CHANNEL_VAR, from.ends.channel.as_raw_fd().to_string())
        .env(bash_script::KEYS_VAR, from.ends.keys.as_raw_fd().to_string())
        .env(bash_script::COMMAND_VAR, from.ends.commands.as_raw_fd().to_string());
    Ok(command)
}

/// The pid of the shell `child` runs. In a namespace of its own the
/// spawned child is the keeper, and the shell is the init's child (see
/// `process::namespaced_shell`): its pid is the one the records carry and
/// every scan starts from. The keeper ends as the shell ends, so waiting
/// for it stays right.
pub(super) fn shell_pid(child: &tokio::process::Child, scope: &process::Scope) -> i32 {
    let spawned = child.id().map_or(-1, |pid| pid as i32);
    if scope.namespace() {
        process::namespaced_shell(spawned as u32).unwrap_or(spawned)
    } else {
        spawned
    }
}

/// The state the PTY reader shares with calls and tasks, for shell `pid`
/// whose markers carry `nonce` and whose records come on `channel`.
pub(super) fn shared_state(
    config: &SessionConfig,
    gate: &Arc<Gate>,
    nonce: &str,
    pid: i32,
    channel: Channel,
) -> Arc<Shared> {
    // The child has run `exec` by now (spawn returns after it): this is
    // the program image whose records are believed.
    let first_level = proc_shell::fingerprint(pid);
    Arc::new(Shared::new(State::new(
        Screen::new(config.rows, config.cols, nonce),
        Levels::new(pid, first_level),
        channel,
        Arc::clone(&config.secrets),
        Arc::clone(gate),
    )))
}

/// Starts the shell's terminal on the PTY's `master` side: its reader
/// thread feeds every chunk to the shared state's renderer (and to the
/// session's recording, if it is recorded) and wakes whoever waits on it.
pub(super) fn start_terminal(
    config: &SessionConfig,
    gate: &Arc<Gate>,
    master: OwnedFd,
    shared: &Arc<Shared>,
) -> Result<Terminal, SessionError> {
    let channel_handle =
        shared.lock().channel_handle().map_err(start_failed(StartStep::CompletionChannel))?;
    let size = (config.rows, config.cols);
    let mut sinks: Vec<Box<dyn Sink>> = Vec::new();
    if let Some(recorder) = &config.record {
        match recorder.start(&config.file_label(), Arc::clone(&config.secrets), size) {
            Ok(recording) => sinks.push(Box::new(recording)),
            Err(err) => tracing::warn!("session {} is not recorded: {err}", config.name),
        }
    }
    let (reader_shared, woken_shared) = (Arc::clone(shared), Arc::clone(shared));
    Terminal::start(
        master,
        Setup {
            name: &config.name,
            also: Some(channel_handle),
            size,
            gate: Arc::clone(gate),
            sinks,
        },
        move |event| {
            let mut state = reader_shared.lock();
            let answers = state.on_event(event);
            let shown = state.take_shown();
            Rendered { answers, shown }
        },
        move || woken_shared.notify(),
    )
    .map_err(start_failed(StartStep::ReaderThread))
}

/// Waits for the shell `child` to exit, and records how it did.
pub(super) async fn wait_for_exit(mut child: tokio::process::Child, shared: Arc<Shared>) {
    let status = child.wait().await;
    if let Ok(status) = status {
        shared.lock().set_exited(status);
    }
    shared.notify();
}
