//! The terms of one call on a session, shared by every layer of `session/`:
//! the session's configuration, the typed request ([`Call`] and its
//! options), the reply with its typed [`Outcome`], input report and
//! [`Event`]s, progress reports, and the errors. Plain types with no
//! behaviour beyond their defaults; they name no tool or tool argument and
//! hold no words for the agent (the server chooses every one).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::guard::Guard;
use crate::keys::Input;
use crate::limits::{LimitHit, ResourceLimits};
use crate::mask::Secrets;
use crate::output::StoreLimits;
use crate::output::{Shown, SpillLimits, SpillStore};
use crate::process::TerminationMode;
use crate::record::Recorder;

/// How a session is set up. Every field has a sensible default from
/// [`SessionConfig::new`].
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// A short name used in thread names and spill file names.
    pub name: String,
    /// The client the session belongs to, in its file names (two clients'
    /// `default` are two sessions): empty for the server's local client.
    pub client: String,
    /// Where the shell starts, and where `reset` takes it back to.
    pub cwd: PathBuf,
    /// The shell program.
    pub shell: PathBuf,
    /// A start-up file sourced before our settings (normally `~/.bashrc`).
    pub user_rc: Option<PathBuf>,
    /// Extra environment for the shell.
    pub env: Vec<(String, String)>,
    /// Terminal size.
    pub rows: u16,
    /// Terminal size.
    pub cols: u16,
    /// Private directory for the shell's files (created, mode 0700).
    pub work_dir: PathBuf,
    /// Where complete outputs that were cut are saved, and their limits.
    pub spill: Arc<SpillStore>,
    /// Records each of the session's shells, when the session is
    /// recorded; `None` by default.
    pub record: Option<Arc<Recorder>>,
    /// Characters of output shown in one reply before head and tail are cut.
    pub output_cap: usize,
    /// A call without a timeout returns after this long without new output.
    pub no_output_return: Duration,
    /// A call without a timeout returns after this long in any case, even
    /// while output keeps coming (below the 60 s after which common clients
    /// give up on a request).
    pub max_wait: Duration,
    /// How long bash may take to start and show its first prompt.
    pub startup_timeout: Duration,
    /// Time between SIGTERM and SIGKILL when processes are stopped.
    pub grace: Duration,
    /// The orphan guard told about every shell, if the server runs one.
    pub guard: Option<Arc<Guard>>,
    /// How many commands' complete output the session keeps, and how much.
    pub output_limits: StoreLimits,
    /// What is masked in everything the session's commands print (its
    /// output, logs, progress lines, background output); nothing by default.
    pub secrets: Arc<Secrets>,
    /// The sandbox the session's shells start in; none by default.
    pub sandbox: crate::sandbox::Policy,
    /// The exported environment the shell starts with instead of the
    /// server's (a background job's, taken from the session it was started
    /// from); `None`: the server's, with `env` added.
    pub start_env: Option<Arc<StartEnv>>,
    /// What the shell and everything it starts may take, and its `nice`
    /// value; the documented defaults ([`ResourceLimits::default`]).
    pub resources: ResourceLimits,
}

/// An exported environment as a shell's child would inherit it: `NAME=value`
/// pairs in order, values of any bytes. Its `Debug` shows only how many
/// there are: values can be secrets.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct StartEnv(pub Vec<(std::ffi::OsString, std::ffi::OsString)>);

impl std::fmt::Debug for StartEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StartEnv({} variables)", self.0.len())
    }
}

/// The most bytes of exported environment a background job takes from the
/// session it starts from: more is refused ([`PlaceError::TooLarge`]).
pub const MAX_START_ENV: u64 = 1 << 20;

/// Where a background job starts: the directory and exported environment of
/// the session it was started from, as that session's shell has them at its
/// prompt.
#[derive(Debug, Clone)]
pub struct Place {
    /// The shell's working directory.
    pub cwd: PathBuf,
    /// Its exported environment; `None` when the session has no shell yet
    /// (the job then starts with the server's, as that shell would).
    pub env: Option<Arc<StartEnv>>,
}

impl Place {
    /// The active Python virtual environment (`VIRTUAL_ENV`), if any.
    pub fn virtual_env(&self) -> Option<PathBuf> {
        let env = self.env.as_deref()?;
        env.0.iter().rev().find(|(name, _)| name == "VIRTUAL_ENV").map(|(_, value)| value.into())
    }
}

/// Why a session's place could not be taken: facts with their values; the
/// server words them (the `Display` is for logs).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlaceError {
    /// A command is running in it: its shell is not at its prompt.
    #[error("busy running {command:?} ({elapsed:?})")]
    Busy {
        /// The command.
        command: String,
        /// How long it has run.
        elapsed: Duration,
    },
    /// Another call on it is in progress (a reset, say).
    #[error("another call is in progress")]
    InUse,
    /// Another program holds its terminal although no command of ours runs.
    #[error("not at its prompt: process {pid} has the terminal")]
    NotAtPrompt {
        /// The program in front.
        pid: i32,
        /// Its command line.
        command_line: String,
    },
    /// Its exported environment is larger than [`MAX_START_ENV`].
    #[error("exported environment over {MAX_START_ENV} bytes")]
    TooLarge,
    /// The shell did not write its environment.
    #[error("environment not read: {0}")]
    Failed(PlaceFailure),
}

/// Why the shell did not write its exported environment, as far as known.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlaceFailure {
    /// No environment arrived on the completion channel.
    #[error("not gathered")]
    NotGathered,
    /// The environment arrived empty: `env` could not start, or the
    /// channel is closed. `last_line` is the last line the shell printed
    /// (empty: it printed nothing).
    #[error("empty ({last_line:?})")]
    Empty {
        /// The shell's last line of output, which says why.
        last_line: String,
    },
    /// The line that reads the environment could not be typed.
    #[error("not typed: {error}")]
    NotTyped {
        /// The system's error.
        error: String,
    },
    /// The shell did not run the command that reads the environment within
    /// its wait.
    #[error("not run")]
    NotRun,
}

impl SessionConfig {
    /// What names the session's full-output files: its name, masked (a
    /// secret used as a session name is not written into a file name).
    pub fn file_label(&self) -> String {
        let name = self.secrets.mask(&self.name).0.into_owned();
        // `@` is in no session name: `a@b` can only be session `a` of `b`.
        if self.client.is_empty() { name } else { format!("{name}@{}", self.client) }
    }

    /// Defaults: bash with the user's `~/.bashrc`, 50 rows of 120 columns
    /// (a width that fits agents reading text), 30,000
    /// characters, a 30 s soft return, a 50 s longest wait, a 5 s kill
    /// grace, spill files in `spill_dir` with the default [`SpillLimits`]
    /// and no retention.
    pub fn new(name: &str, cwd: PathBuf, work_dir: PathBuf, spill_dir: PathBuf) -> SessionConfig {
        let user_rc = std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".bashrc"));
        SessionConfig {
            name: name.to_owned(),
            client: String::new(),
            cwd,
            shell: PathBuf::from("bash"),
            user_rc,
            env: Vec::new(),
            rows: 50,
            cols: 120,
            work_dir,
            spill: SpillStore::new(spill_dir, "", SpillLimits::default(), None),
            record: None,
            output_cap: 30_000,
            no_output_return: Duration::from_secs(30),
            max_wait: Duration::from_secs(50),
            startup_timeout: Duration::from_secs(15),
            grace: Duration::from_secs(5),
            guard: None,
            output_limits: StoreLimits::default(),
            secrets: Arc::new(Secrets::none()),
            sandbox: crate::sandbox::Policy::off(),
            start_env: None,
            resources: ResourceLimits::default(),
        }
    }
}

/// What one call asks of a session. The server maps its tool's arguments
/// onto it; the engine knows no tool argument.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Call {
    /// Run a new command (a command `bash -n` finds incomplete is held
    /// until input lines complete it).
    Run {
        /// The command, any bash.
        command: String,
    },
    /// Wait for more output of the running command.
    #[default]
    Poll,
    /// Send text (typed, with Enter) or keys to the running program, or add
    /// a line to an incomplete command.
    Input(Input),
    /// Stop the shell and everything it runs, start a fresh one in the
    /// original directory, then run `then` in it, if given.
    Reset {
        /// A command to run in the fresh shell.
        then: Option<String>,
    },
}

impl Call {
    /// A call that runs `command`.
    pub fn run(command: impl Into<String>) -> Call {
        Call::Run { command: command.into() }
    }
}

/// One call on a session: what it asks, and how it may wait.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// What the call asks.
    pub call: Call,
    /// How long this call may wait before handing control back.
    pub timeout: Option<Duration>,
    /// The longest a new command may run in the foreground **unwatched**
    /// (no call waiting on it, polling it or sending it input) before it is
    /// stopped: the policy's execution limit; `None` for no limit. The limit
    /// in force is the larger of this and the last call's `timeout`, and
    /// time the command spends blocked reading the terminal is not counted.
    pub exec_limit: Option<Duration>,
    /// Told about once a second while the call waits, if set.
    pub progress: Option<ProgressHook>,
}

impl Request {
    /// A request for `call` with no timeout, no limit and no progress.
    pub fn new(call: Call) -> Request {
        Request { call, ..Request::default() }
    }
}

/// What a waiting call reports about once a second.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    /// The report's number within the call, from 1: strictly increasing.
    pub count: u64,
    /// Time since the call began.
    pub elapsed: Duration,
    /// The newest line of output with text on it; empty when there is
    /// none yet.
    pub line: String,
}

/// A callback a waiting call tells its [`Progress`] to. It runs on the
/// call's task, so it must return quickly (hand the value to a channel or
/// spawn the work).
#[derive(Clone)]
pub struct ProgressHook(Arc<dyn Fn(Progress) + Send + Sync>);

impl ProgressHook {
    /// A hook that calls `report`.
    pub fn new(report: impl Fn(Progress) + Send + Sync + 'static) -> ProgressHook {
        ProgressHook(Arc::new(report))
    }

    /// Tells the hook `progress`.
    pub(super) fn report(&self, progress: Progress) {
        (self.0)(progress);
    }
}

impl std::fmt::Debug for ProgressHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProgressHook")
    }
}

/// How often a waiting call reports progress.
pub(crate) const PROGRESS_INTERVAL: Duration = Duration::from_secs(1);

/// How a call ended for the command it is about: each reply's facts as
/// one value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// No command was involved: a reset alone, or a key nothing needed.
    /// The shell is at its prompt.
    Idle,
    /// The command finished.
    Completed {
        /// Its exit code.
        exit_code: i32,
    },
    /// The command ran unwatched past its limit and was stopped, with
    /// everything later in the same command line.
    Killed {
        /// The limit it exceeded: time with no call waiting on it, polling
        /// it or sending it input (time waiting for input not counted).
        limit: Duration,
        /// How it died: after SIGTERM, or SIGKILL after the grace period.
        mode: TerminationMode,
        /// Its exit code.
        exit_code: i32,
    },
    /// The command is still running; the call stopped waiting.
    Running {
        /// Why the call stopped waiting.
        why: WaitEnded,
    },
    /// The command is still running, blocked reading the terminal with its
    /// output quiet: it waits for input.
    WaitingForInput {
        /// Whether the reader is the shell itself: a builtin such as `read`
        /// waits for input, or a command damaged the shell integration and
        /// the shell sits at its prompt without reporting the end.
        shell_reading: bool,
    },
    /// The command is incomplete (an open quote, `if` without `fi`, a
    /// here-document without its end): it is held while the shell waits for
    /// the rest, sent as input; C-c discards it.
    Incomplete,
    /// The shell reported that the running command never ran: something
    /// broke the shell integration (a reset restores it).
    IntegrationDamaged,
    /// The command was typed, but the shell never started it: it exited,
    /// or was back reading its terminal, before the start marker it prints
    /// as it begins a command. Another program read the line typed (one
    /// that takes the terminal's foreground from the shell), or the line
    /// could not run. Nothing of it ran.
    NeverStarted {
        /// The shell exited (else it waits at its prompt again).
        shell_exited: bool,
    },
    /// A new command was not run; the reply is about what kept it out.
    NotExecuted {
        /// The command that was not run.
        command: String,
        /// Why.
        why: NotRun,
    },
}

/// Why a new command was not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotRun {
    /// Another command is running; the reply is about it.
    CommandRunning {
        /// Whether that command is blocked reading the terminal, and who
        /// reads it.
        reading: Option<Reader>,
    },
    /// An incomplete command is held, waiting for its remaining lines.
    Incomplete,
    /// The shell is not at its prompt: this process has the terminal,
    /// although the previous command reported its end.
    NotAtPrompt {
        /// The foreground process group's leader (or the program the shell
        /// waits for).
        pid: i32,
        /// Its command line.
        command_line: String,
    },
    /// The running command never ran: the shell integration is damaged.
    IntegrationDamaged,
    /// A person holds the session for writing (`shellkeep attach
    /// --write`), since `since`: nothing is typed into their line.
    PersonHolds {
        /// When they took it.
        since: std::time::SystemTime,
    },
}

/// Who is blocked reading the terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reader {
    /// The program the command runs.
    Program,
    /// The shell itself (a builtin such as `read`, or a shell whose
    /// integration a command damaged).
    Shell,
}

/// Why a call stopped waiting for a running command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitEnded {
    /// It printed nothing new for this long.
    NoNewOutput(Duration),
    /// The call's own wait (its `timeout`) ran out.
    Timeout(Duration),
    /// The call gave no wait of its own, and the longest a call waits ran
    /// out while the command kept printing.
    MaxWait(Duration),
    /// A full-screen program has drawn its screen and keeps redrawing it
    /// (`watch`, `tmux`): the call hands control back with the screen.
    FullScreen,
    /// The client cancelled the call. The command was not touched, and
    /// nothing it printed was consumed: the next call reports it.
    Cancelled,
    /// The session is being closed; the command is stopped with it.
    SessionClosing,
}

/// What became of the input a call sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputReport {
    /// Keys or text (with Enter) went to the program or to the incomplete
    /// command: `delivered` of its `total` bytes. Fewer means the program
    /// is not reading its input and the terminal's queue is full; the rest
    /// was dropped.
    Sent {
        /// The keys, as [`Input::describe`] names them (`C-c`, `DOWN DOWN
        /// ENTER`, `ESC text(3) ENTER`); `None` for text typed with Enter.
        key: Option<String>,
        /// Bytes the terminal accepted.
        delivered: usize,
        /// Bytes of the input, Enter included.
        total: usize,
    },
    /// Nothing was sent: the command had already finished.
    NotSent,
    /// Keys arrived while no command was running; nothing needed them, so
    /// they were not sent (the shell's prompt is left as it is): as
    /// [`Input::describe`] names them.
    KeyNotNeeded(String),
    /// Nothing was sent: a person holds the session for writing, since
    /// `since`.
    PersonHolds {
        /// When they took it.
        since: std::time::SystemTime,
    },
}

/// Something that happened to the session or its shell integration, told
/// besides the command's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The client cancelled the previous call on this session this long
    /// ago; the command was left running, and this reply carries what it
    /// printed since.
    PreviousCallCancelled {
        /// Time since the cancellation.
        ago: Duration,
    },
    /// The session was reset before this call's command.
    Reset,
    /// The shell exited; a new one was started in `cwd`.
    ShellRestarted {
        /// How the old shell ended.
        how: ShellExit,
        /// Where the new shell starts.
        cwd: PathBuf,
    },
    /// A nested interactive bash started (`bash`, `nix-shell`); the
    /// integration was installed in it, so commands now run inside it
    /// with exit codes and cwd, and `exit` returns to the outer shell.
    NestedShellStarted,
    /// A nested shell exited with `status`; commands run in the shell one
    /// level out again.
    NestedShellExited {
        /// The nested shell's exit status.
        status: i32,
    },
    /// The shell was replaced (`exec bash`) and lost the integration; it
    /// was reinstalled in the new shell.
    IntegrationReinstalled,
    /// A shell lost the integration and it could not be reinstalled within
    /// a few seconds; the command is driven as an interactive program.
    ReinstallFailed,
    /// An interactive shell other than bash (named) is reading the
    /// terminal: its commands are sent as input, without exit codes.
    OtherShell(String),
    /// A remote or container session (named: `ssh`, `docker`) is reading
    /// the terminal: it is driven as an interactive program.
    RemoteShell(String),
    /// A program that calls itself bash (its command line here) but does
    /// not run the session's bash is reading the terminal: the integration
    /// is not installed in it.
    NamedBash(String),
    /// An interactive bash sits at its prompt that is not the foreground
    /// job of the command typed: a program the command ran started it on
    /// its own, or an earlier command left it in the background and it was
    /// given the terminal. The integration is not installed in it and the
    /// command still runs; the program that started it (or the bash
    /// itself, for a background one) is named by its command line.
    UnaskedShell(String),
    /// The command's end (and exit code) came from the fallback line the
    /// server typed once the shell was back at its prompt, not from the
    /// integration's prompt (`PROMPT_COMMAND`), which did not run: the
    /// integration is damaged, and a reset restores it.
    PromptNotRun,
    /// The integration's function that keeps a command's status is gone,
    /// so the exit code may be wrong: the integration is damaged, and a
    /// reset restores it.
    StatusLost,
    /// A resource limit of the session stopped something since the last
    /// reply: the OOM killer killed a process at the memory limit, or forks
    /// were refused at the tasks limit.
    LimitHit(LimitHit),
    /// The shell reported the command's end but its end marker never
    /// appeared in the output (a command redirected or swallowed it): the
    /// command ended after all its output was read.
    EndMarkerMissing,
    /// The shell's standard output is not the terminal (`exec >file`), so
    /// commands' output does not reach the reply.
    OutputElsewhere,
    /// Something ran in the shell while no command of the agent's was
    /// running: the shell's record of an end, or its start marker, came
    /// while it sat at its prompt (a line pushed into its input with legacy
    /// `TIOCSTI`, a program that read the line shellkeep typed and gave it
    /// back changed). The session is tampered with: that line could have
    /// changed anything in the shell.
    RanAtPrompt {
        /// What came: an end record or a start marker.
        what: AtPrompt,
        /// The command number it claimed.
        seq: u64,
        /// The process that sent the record, when it is not the shell.
        sender: Option<i32>,
    },
    /// A person attached to the session typed into it (`shellkeep attach
    /// --write`): when and how many keys, and how many with the
    /// terminal's echo off (a password: never what they were).
    PersonTyped(crate::terminal::PersonTyped),
    /// A command a person typed at the shell's prompt ended with `status`;
    /// what it printed is the output between commands.
    PersonRan {
        /// Its exit status.
        status: i32,
    },
    /// The program waits for input with the terminal's echo off (a
    /// password prompt): a person can answer it without the agent seeing
    /// the answer (`shellkeep attach SESSION --write`).
    InputHidden,
}

/// What showed that something ran at the shell's prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtPrompt {
    /// An end record on the completion channel.
    EndRecord,
    /// A start marker in the output.
    StartMarker,
    /// The shell's count of the command lines it read jumped by more than
    /// the one line typed: this many lines ran between two commands.
    Lines {
        /// How many lines ran that no call typed.
        count: u64,
    },
}

/// How a shell ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShellExit {
    /// It exited with this code.
    Code(i32),
    /// A signal (this number) killed it.
    Signal(i32),
    /// It is gone, and how is not known.
    Unknown,
}

/// What one call returns.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The command this reply is about.
    pub command: String,
    /// How the call ended for it.
    pub outcome: Outcome,
    /// What the command printed since the last reply, cut to the cap.
    pub output: Shown,
    /// Whether `output` is the current screen of a full-screen program
    /// rather than the command's stream.
    pub screen: bool,
    /// What became of the input this call sent, if it sent any.
    pub input: Option<InputReport>,
    /// Text printed while no command was running (background jobs), before
    /// this call's command started.
    pub idle_output: Option<String>,
    /// What else happened to the session, in order.
    pub events: Vec<Event>,
    /// The shell's working directory.
    pub cwd: PathBuf,
    /// The Python interpreter `python` would run.
    pub python: Option<PathBuf>,
    /// Time since the command started.
    pub duration: Duration,
    /// Whether earlier replies already showed part of this command's output.
    pub continued: bool,
    /// The end of a previous command that finished while nobody was
    /// listening, reported before this one.
    pub previous: Option<Box<Reply>>,
    /// The command's number in the session's output store, to read its
    /// complete output by line.
    pub number: Option<u64>,
    /// The line of the command's complete output where this reply's output
    /// begins.
    pub first_line: u64,
    /// For a command still running under a limit: if no call waits on it,
    /// polls it or sends it input within this time from now (time it spends
    /// waiting for input not counted), it is stopped.
    pub look_again_within: Option<Duration>,
    /// For a command still running: the line the cursor is on, which the
    /// command has not ended (a prompt such as `Password: `), whole and
    /// masked, when it is not blank. `None` when the program waits on an
    /// empty line (`cat`, `grep` reading standard input) or shows a screen.
    pub unfinished_line: Option<String>,
}

impl Reply {
    /// The command's exit code, once it has ended (an idle reply: 0).
    pub fn exit_code(&self) -> Option<i32> {
        match self.outcome {
            Outcome::Idle => Some(0),
            Outcome::Completed { exit_code } | Outcome::Killed { exit_code, .. } => Some(exit_code),
            _ => None,
        }
    }

    /// Whether the command is still running (or held, or kept out by one
    /// that is).
    pub fn is_running(&self) -> bool {
        self.exit_code().is_none()
    }
}

/// A request we cannot carry out: facts with their values; the server
/// words what the agent reads (the `Display` is for logs).
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The client cancelled the call before its turn came; nothing was done.
    #[error("cancelled before it started")]
    Cancelled,
    /// The command or input holds a NUL byte, which no shell command can
    /// contain.
    #[error("NUL byte in the command")]
    NulByte,
    /// The shell could not be started or driven.
    #[error("shell failed: {0}")]
    Shell(ShellFailure),
    /// A poll while no command runs.
    #[error("nothing to wait for")]
    NothingToWaitFor,
    /// Text input while no command runs.
    #[error("nothing to send input to")]
    NothingToSendInputTo,
    /// A key other than C-c or C-d while an incomplete command is held.
    #[error("key while an incomplete command is held")]
    KeyWhileIncomplete,
    /// A reset while a person holds the session for writing, since `since`.
    #[error("a person holds the session")]
    PersonHolds {
        /// When they took it.
        since: std::time::SystemTime,
    },
}

/// How the shell could not be started or driven.
#[derive(Debug, thiserror::Error)]
pub enum ShellFailure {
    /// A step of the shell's start failed.
    #[error("start ({step:?}): {error}")]
    Start {
        /// The step.
        step: StartStep,
        /// The system's error.
        error: std::io::Error,
    },
    /// The shell did not reach its first prompt.
    #[error("no first prompt ({ended:?} after {waited:?})")]
    NoFirstPrompt {
        /// How it ended, if it did (else it was still starting).
        ended: Option<ShellExit>,
        /// How long it was waited for.
        waited: Duration,
        /// The last line it printed, masked and cut to at most 2,000
        /// characters.
        last_line: String,
    },
    /// Writing to the shell's terminal failed.
    #[error("write ({what:?}): {error}")]
    Write {
        /// What was being written.
        what: Written,
        /// The system's error.
        error: std::io::Error,
    },
}

/// A step of a shell's start, named when it fails.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartStep {
    /// Making the random nonce of its markers.
    RandomNonce,
    /// Making the random name of its private directory.
    RandomName,
    /// Making its private directory.
    PrivateDirectory,
    /// Writing its start-up file.
    StartupFile,
    /// Opening the completion channel.
    CompletionChannel,
    /// Making the sealed file of key bindings.
    KeysFile,
    /// Opening the command socket.
    CommandSocket,
    /// Making the sealed file of a background job's environment.
    EnvironmentFile,
    /// Opening or handing over the PTY.
    Pty,
    /// Making a sandboxed shell's temporary directory.
    TemporaryDirectory,
    /// Building the sandbox.
    Sandbox,
    /// Starting the shell program `shell` in `cwd`.
    Spawn {
        /// The shell program.
        shell: PathBuf,
        /// The directory it was to start in.
        cwd: PathBuf,
    },
    /// Starting the PTY's reader thread.
    ReaderThread,
}

/// What was being written to the shell's terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// The line that runs a command.
    Command,
    /// Text or keys for the running program.
    Input,
}
