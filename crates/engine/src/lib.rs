//! The shellkeep engine: persistent shell sessions in a real PTY, a one-shot
//! runner, and the timeout policy that keeps both from hanging.
//!
//! It knows nothing about MCP, JSON-RPC or how results are rendered for an
//! agent; the `shellkeep` server crate does that.
//!
//! This file is the engine's front door: every module is private, and what
//! the server (and the engine's own integration tests, benchmarks and fuzz
//! targets) may use is named below with `pub use`. A name that would be
//! ambiguous out of its module is renamed here (`SandboxPolicy`,
//! `run_oneshot`). Adding a name is a decision about the engine's API: the
//! tidy test keeps the modules private, and `unreachable_pub` flags a `pub`
//! that nothing outside can reach.

// The engine's docs are read by its developers, with its private items
// (`cargo doc --document-private-items`): a public item's doc may name the
// private ones it is built on.
#![allow(rustdoc::private_intra_doc_links)]

mod bash_script;
mod cgroup;
mod guard;
mod input_wait;
mod keys;
mod limits;
mod mask;
mod oneshot;
mod output;
mod policy;
mod private_fs;
mod proc_shell;
mod process;
mod random;
mod record;
mod registry;
mod runtime_dir;
mod sandbox;
mod screen;
mod secrets;
mod session;
mod small_file;
mod syntax;
mod terminal;
mod utf8;

pub use bash_script::command_line as shell_command_line;
pub use cgroup::{Mode as CgroupMode, Requested as CgroupRequested, server_dir};
pub use guard::{Guard, GuardOptions, serve as serve_guard};
pub use keys::{
    Input, KeyError, MAX_KEYS, MAX_KEYS_BYTES, control_key, names as key_names, names_a_key,
    parse_input, parse_keys,
};
pub use limits::{
    Bound, CategoryLimits, LimitHit, MAX_CPU, MAX_NICE, MIN_CPU, MIN_MEMORY, MIN_TASKS, Mechanism,
    Resource, ResourceLimits, mechanism as limit_mechanism, nproc_exempt,
};
pub use mask::{MASK, Secrets, StreamMasker, is_invisible};
pub use oneshot::{
    InvalidRunRequest, RunEnd, RunOutcome, RunRequest, RunStatus, TimeoutReason, run as run_oneshot,
};
pub use output::{
    LogPage, MAX_READ_LINES, NotSaved, OutputStore, READ_CAP, Retention, Saved, Shown, SpillCut,
    SpillLimit, SpillLimits, SpillStore, StoreError, StoreLimits, Stream, json_chars,
    server_prefix, share as share_output_cap,
};
pub use policy::{
    Decision, DecisionSource, Explanation, ExplicitTimeout, InvalidTimeout, Limits as PolicyLimits,
    LoadedPolicy, MAX_TIMEOUT, Policy, load_from_environment as load_policy_from_environment,
};
pub use private_fs::{
    check_private_dir, create_private_dir, ensure_private_dir, euid, make_process_undumpable,
    open_private_append, random_hex, usable_temp_dir, write_new_file,
};
pub use process::{
    Root, SCOPE_VAR, Targets, TerminationMode, bash as bash_path,
    command_line as process_command_line, end_containment, guard_channel_from_stdin,
    init_containment, is_ours, landlock_abi, peer_credentials, reap_adopted_orphans,
    seccomp_status, server_token, spawn_std, sweep_dead_servers, terminal_size,
    terminate as terminate_targets,
};
pub use record::{DEFAULT_IDLE_LIMIT, RecordSettings, Recorder, read_cast, replay_delay};
pub use registry::{
    DEFAULT_SESSION, JobEnd, JobEnded, JobWaiting, Lease, MAX_NAME_LEN, Opened, Registry,
    RegistryError, RegistryLimits, SessionBudget, SessionInfo, validate_name,
};
pub use runtime_dir::{create_server_dir, remove_dead_server_dirs, runtime_base, start_ticks};
pub use sandbox::{
    Denial, Enforcement, Mode as SandboxMode, Policy as SandboxPolicy, check as check_sandbox,
    denial as sandbox_denial, set_private_tmp_base,
};
pub use screen::{HIGHLIGHT_MARK, Marker, Screen, Stop as ScreenStop};
pub use secrets::{Found, Sources, load as load_secrets};
pub use session::{
    Activity, AtPrompt, Call, Event, InputReport, LastWords, MAX_START_ENV, NotRun, Outcome, Place,
    PlaceError, PlaceFailure, Progress, ProgressHook, Reader, Reply, Request, Session,
    SessionConfig, SessionError, ShellExit, ShellFailure, StartStep, WaitEnded, Written,
};
pub use syntax::MAX_PARTS;
pub use terminal::{Hold, PersonTyped, RawMasker, Tap, Tapped, Terminal, Watch, typed_at_prompt};
