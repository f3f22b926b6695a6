//! A serving server's life: [`Running::start`] builds what outlives
//! clients (the guard, containment, full outputs, the audit log, the
//! clients and the attach listener), a transport serves it
//! ([`serve_stdio`], or [`serve_http`] on a socket bound before the start),
//! and [`Running::stop`] stops everything it started.
//!
//! It checks no flag (`config` did) and words no reply. It holds the
//! shutdown order, one for every transport: the order of [`Running`]'s
//! fields is the order they are stopped (and dropped). Over HTTP the
//! listener closes first, and the responses of calls that were in flight
//! are let out after the stop (`http::Serving::finish`).

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use rmcp::ServiceExt;
use shellkeep_engine::DEFAULT_SESSION;
use shellkeep_engine::Guard;
use shellkeep_engine::Recorder;
use shellkeep_engine::SpillStore;
use shellkeep_engine::make_process_undumpable;
use shellkeep_engine::server_dir;
use shellkeep_engine::set_private_tmp_base;
use shellkeep_engine::{
    Root, Targets, bash_path, reap_adopted_orphans, sweep_dead_servers, terminate_targets,
};
use tokio_util::sync::CancellationToken;

use crate::config::{HttpConfig, ServerConfig};
use std::path::PathBuf;

use shellkeep_engine::{
    CgroupRequested, LoadedPolicy, create_server_dir, end_containment, ensure_private_dir,
    init_containment, is_ours, load_policy_from_environment, process_command_line,
    remove_dead_server_dirs, runtime_base, server_token,
};

use crate::{attach, audit, config, http, tools, wire};

/// A server that serves: what the transports use, then what must be
/// stopped at its end.
///
/// The stop order is the declaration order of the fields after `stop`:
/// [`Running::stop`] takes them one by one from top to bottom, and a
/// `Running` dropped without `stop` (a failed start of a transport) drops
/// them in that same order. A field that must outlive another comes after
/// it.
pub(crate) struct Running {
    /// Cancelled by the first stop signal that is not our commands'.
    pub stop: CancellationToken,
    /// Stop signals no longer watched, the sweep of dead servers given up.
    watchers: Watchers,
    /// The person's view of the sessions, if it listens: viewers learn
    /// that the server ends before their sessions close.
    pub listener: Option<attach::Listener>,
    /// What every client's calls share: every client's sessions close.
    pub core: Arc<tools::Core>,
    /// The recordings of the closed shells are written to their end.
    recorder: Option<Arc<Recorder>>,
    /// Every session is stopped: the log says the server ended, so that a
    /// later server does not report it.
    audit: Option<Arc<audit::AuditLog>>,
    /// Anything else we started, wherever it went, is terminated.
    leftovers: Leftovers,
    /// Whatever is still in our control groups is killed, and the groups
    /// removed.
    containment: ContainmentEnd,
    /// The orphan reaper, which holds the guard too: gone, not only told
    /// to go, before the guard is ours alone.
    reaper: tokio::task::JoinHandle<()>,
    /// The orphan guard is told that the server ended normally.
    guard: Option<Arc<Guard>>,
    /// The private runtime directory (the attach socket, sessions'
    /// files): removed last.
    dir: RuntimeDir,
}

/// What watches from the start: the stop signals, and the sweep of what
/// dead servers left running.
struct Watchers {
    signals: signal_hook::iterator::Handle,
    sweep: tokio::task::JoinHandle<usize>,
}

/// How long the processes the server started, and left behind by its
/// sessions, get between the polite signal and the kill.
struct Leftovers {
    grace: Duration,
}

impl Running {
    /// Starts a server with `config` (the policy from `policy_file`):
    /// everything but a transport. Only wiring: every value was checked by
    /// [`ServerConfig::from_args`].
    pub(crate) async fn start(
        policy_file: Option<&std::path::Path>,
        config: ServerConfig,
        audit: Option<Arc<audit::AuditLog>>,
    ) -> anyhow::Result<Running> {
        harden_process();
        let loaded = load_policy(policy_file)?;
        // Before anything is started: every child joins its owner's group.
        let containment = start_containment(config.containment)?;
        // What servers that are gone left running (killed with their
        // guard): stopped in the background, so that the start does not
        // wait.
        let sweep = tokio::task::spawn_blocking(sweep_dead_servers);
        let cwd = working_dir(&config)?;
        // Resolved once, before any command's `env` can change `PATH`.
        let _ = bash_path();
        let dir = RuntimeDir::create()?;
        // A sandboxed `run`'s temporary directory goes where the guard looks
        // after a server SIGKILL.
        set_private_tmp_base(dir.path.clone());
        let guard = start_guard(&dir);
        let reaper = spawn_reaper(guard.clone());
        let outputs = FullOutputs::start(&config, &dir, audit.as_deref())?;
        let recorder = recorder(&config, &outputs.prefix)?;
        let mut template = config.session_template(
            cwd,
            dir.path.join("sessions"),
            Arc::clone(&outputs.spill),
            guard.clone(),
        );
        template.record = recorder.clone();
        let clients = Arc::new(tools::Clients::new(template, config.sessions, config.output_keep));
        let leftovers = Leftovers { grace: config.grace };
        let core = Arc::new(tools::Core {
            clients: Arc::clone(&clients),
            policy: loaded.policy,
            policy_origin: loaded.origin,
            spill: outputs.spill,
            config,
            guard: guard.clone(),
            audit: audit.clone(),
        });
        start_default_shell(&clients);
        let listener = listen_for_attach(&dir, &clients);
        let stop = CancellationToken::new();
        let signals = watch_stop_signals(stop.clone())
            .context("cannot watch for stop signals (SIGTERM, SIGINT, SIGHUP)")?;
        Ok(Running {
            stop,
            watchers: Watchers { signals, sweep },
            listener,
            core,
            recorder,
            audit,
            leftovers,
            containment,
            reaper,
            guard,
            dir,
        })
    }

    /// Stops everything the server started, whatever the transport: every
    /// client's sessions and what they started, then anything else we
    /// started, wherever it went (`setsid`, a double fork, a cleared
    /// environment: orphans are our children); the guard is told last.
    /// One step per field, in the fields' declaration order.
    pub(crate) async fn stop(self) {
        let Running {
            stop: _,
            watchers,
            listener,
            core,
            recorder,
            audit,
            leftovers,
            containment,
            reaper,
            guard,
            dir,
        } = self;
        watchers.signals.close();
        watchers.sweep.abort();
        if let Some(listener) = listener {
            listener.stop().await;
        }
        core.clients.close_all().await;
        drop(core);
        if let Some(recorder) = recorder {
            let _ = tokio::task::spawn_blocking(move || recorder.wait_idle(Duration::from_secs(3)))
                .await;
        }
        if let Some(log) = &audit {
            log.server_ended();
        }
        leftovers.terminate(guard.as_deref()).await;
        drop(containment);
        reaper.abort();
        let _ = reaper.await;
        tell_guard_the_end(guard);
        drop(dir);
    }
}

impl Leftovers {
    /// Terminates every process of the server but the guard's (a guard
    /// given up is not spared: its old pid may be anything's now).
    async fn terminate(&self, guard: Option<&Guard>) {
        let guard_pid = guard.and_then(Guard::live_pid).map(|pid| pid as i32);
        terminate_targets(
            &Targets::whole_server(&guard_pid.into_iter().collect::<Vec<_>>()),
            self.grace,
        )
        .await;
    }
}

/// Tells the guard, once no one else holds it, that the server ended
/// normally; a guard still shared is not told (never expected: it then
/// takes this end for a crash).
fn tell_guard_the_end(guard: Option<Arc<Guard>>) {
    match guard.map(Arc::try_unwrap) {
        Some(Ok(guard)) => {
            guard.shutdown(Duration::from_secs(3));
        }
        Some(Err(_)) => {
            tracing::warn!("the orphan guard is still shared; it is not told of the end")
        }
        None => {}
    }
}

/// First of all: a command running as the same user must not be able to
/// open our stdout through /proc and forge protocol messages.
fn harden_process() {
    if let Err(err) = make_process_undumpable() {
        tracing::warn!(
            "cannot make the server non-dumpable ({err}); commands could write to its stdout through /proc"
        );
    }
}

/// The directory sessions start in: `--cwd`, else ours.
fn working_dir(config: &ServerConfig) -> anyhow::Result<std::path::PathBuf> {
    let cwd = match &config.cwd {
        Some(dir) => dir.clone(),
        None => std::env::current_dir().context("cannot read the working directory")?,
    };
    anyhow::ensure!(cwd.is_dir(), "--cwd {} is not a directory", cwd.display());
    Ok(cwd)
}

/// The orphan guard for the runtime directory `dir`, watching our control
/// groups too: one that could not start is kept as unavailable, so that
/// replies say so (a missing safety net is never silent).
fn start_guard(dir: &RuntimeDir) -> Option<Arc<Guard>> {
    let guard = match std::env::current_exe().and_then(|exe| spawn_guard(&exe, &dir.path)) {
        Ok(guard) => Arc::new(guard),
        Err(err) => Arc::new(Guard::unavailable(&err.to_string())),
    };
    // After a server SIGKILL the guard kills the server's control groups,
    // whatever their processes did to their markers.
    if let Some(cgroups) = server_dir() {
        guard.watch_cgroup(cgroups);
    }
    Some(guard)
}

/// Makes orphans of everything we start our children, so that nothing
/// leaves our tree; they are reaped as they end, and those that only their
/// ancestry ties to us are told to `guard`, which cannot see that ancestry
/// once we are gone.
fn spawn_reaper(guard: Option<Arc<Guard>>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let told = move |roots: &[Root]| {
            if let Some(guard) = &guard {
                guard.watch_trees(roots);
            }
        };
        if let Err(err) = reap_adopted_orphans(told).await {
            tracing::warn!("cannot become a subreaper ({err}); orphans may outlive the server");
        }
    })
}

/// Where full outputs go, under a prefix unique among servers sharing the
/// directory.
struct FullOutputs {
    spill: Arc<SpillStore>,
    prefix: String,
}

impl FullOutputs {
    /// Opens the store of full outputs and prunes old ones in the
    /// background. The audit log says where they go, so that a later
    /// server can tell if this one dies; and earlier servers that died are
    /// found.
    fn start(
        config: &ServerConfig,
        dir: &RuntimeDir,
        audit: Option<&audit::AuditLog>,
    ) -> anyhow::Result<FullOutputs> {
        let prefix = shellkeep_engine::server_prefix()?;
        let spill = full_output_store(config, &dir.path.join("output"), &prefix)?;
        if let Some(log) = audit {
            log.server_started(&audit::ServerFacts {
                full_output_dir: spill.dir().to_owned(),
                output_prefix: prefix.clone(),
            });
        }
        let pruning = Arc::clone(&spill);
        tokio::task::spawn_blocking(move || {
            for removed in pruning.prune() {
                tracing::info!("removed the old full output {}", removed.display());
            }
        });
        Ok(FullOutputs { spill, prefix })
    }
}

/// Starts the local client's shell now, so the first command does not
/// wait for bash.
fn start_default_shell(clients: &tools::Clients) {
    let local = clients.local();
    tokio::spawn(async move {
        let started = local.sessions.open(DEFAULT_SESSION, None, true, None);
        let Ok((lease, _)) = started else { return };
        if let Err(err) = lease.session().start().await {
            tracing::warn!("the terminal could not start yet: {err}");
        }
    });
}

/// A person's view of the sessions (`shellkeep attach`): without it the
/// server still serves, and says why in the log.
fn listen_for_attach(dir: &RuntimeDir, clients: &Arc<tools::Clients>) -> Option<attach::Listener> {
    let start_dir = clients.start_dir().to_owned();
    match attach::Listener::start(&dir.path, Arc::clone(clients), start_dir) {
        Ok(listener) => {
            tracing::info!("attach socket: {}", listener.path().display());
            Some(listener)
        }
        Err(err) => {
            tracing::warn!("cannot listen for shellkeep attach: {err}");
            None
        }
    }
}

/// Serves MCP over HTTP on `listening` until a stop signal comes (or the
/// server fails), then closes the listener: the returned server still
/// answers the calls in flight, for `Serving::finish` once
/// [`Running::stop`] has stopped every session. Says on stderr where it
/// serves and how it authenticates (the path of a generated token's file,
/// never a token).
pub(crate) async fn serve_http(
    running: &Running,
    config: &HttpConfig,
    listening: http::Listening,
) -> anyhow::Result<http::Serving> {
    let tokens = http::tokens(config, &running.dir.path)?;
    let generated = config.tokens.is_none();
    let names: Vec<&str> = tokens.names().collect();
    let who = if generated {
        format!("the bearer token is in {} (principal default)", tokens.origin)
    } else if names.len() == 1 {
        format!("the bearer token is {}'s (principal {})", tokens.origin, names[0])
    } else {
        format!("the bearer tokens are {}'s ({} principals)", tokens.origin, names.len())
    };
    let url = format!("http://{}{}", listening.addr, http::ENDPOINT);
    let _ = writeln!(std::io::stderr(), "shellkeep: serving MCP on {url}; {who}");
    if let Some(listener) = &running.listener {
        listener.set_client("HTTP");
    }
    let mut serving = http::serve(listening, config, tokens, Arc::clone(&running.core));
    tokio::select! {
        () = running.stop.cancelled() => {}
        err = serving.failed() => return Err(err),
    }
    serving.stop_accepting();
    Ok(serving)
}

/// Serves MCP on stdio until the client leaves or a stop signal comes.
pub(crate) async fn serve_stdio(running: &Running) -> anyhow::Result<()> {
    let server = tools::Shellkeep::new(Arc::clone(&running.core));
    // Our own JSON-RPC edge in front of rmcp: it answers broken messages
    // and tells us when the client stopped reading stdout.
    let wire = wire::Wire::stdio(server.turns());
    let stdout_closed = wire.closed();
    let stop = &running.stop;
    let serving = tokio::select! {
        serving = server.serve(wire) => Some(serving.context("MCP handshake failed")?),
        () = stop.cancelled() => None,
        () = stdout_closed.cancelled() => None,
    };
    let Some(serving) = serving else { return Ok(()) };
    if let (Some(listener), Some(info)) = (&running.listener, serving.peer().peer_info()) {
        listener.set_client(&info.client_info.name);
    }
    let cancel = serving.cancellation_token();
    tokio::select! {
        result = serving.waiting() => {
            if let Err(err) = result {
                tracing::warn!("the MCP connection ended with an error: {err}");
            }
        }
        () = stop.cancelled() => cancel.cancel(),
        // Nobody reads our replies any more: stop every call (each request's
        // cancellation token is a child of the service's) and run nothing
        // new.
        () = stdout_closed.cancelled() => cancel.cancel(),
    }
    Ok(())
}

/// Ends the containment when dropped: every path out of `serve` and `run`.
pub(crate) struct ContainmentEnd;

impl Drop for ContainmentEnd {
    fn drop(&mut self) {
        end_containment();
    }
}

/// Chooses the containment before anything is started (see
/// `shellkeep_engine::cgroup`); the returned value ends it (kills what is
/// left in the server's control group and removes it) when dropped.
pub(crate) fn start_containment(requested: CgroupRequested) -> anyhow::Result<ContainmentEnd> {
    let active = init_containment(requested).map_err(|err| anyhow::anyhow!(err))?;
    match &active.dir {
        Some(dir) => tracing::info!("containment: {} in {}", active.mode.as_str(), dir.display()),
        None => tracing::info!("containment: scope markers only"),
    }
    Ok(ContainmentEnd)
}

/// Loads the policy the flags and environment select, logging any notice.
pub(crate) fn load_policy(file: Option<&std::path::Path>) -> anyhow::Result<LoadedPolicy> {
    let loaded = load_policy_from_environment(file)?;
    if let Some(notice) = &loaded.notice {
        tracing::warn!("{notice}");
    }
    Ok(loaded)
}

/// This process's private runtime directory (the shell's start-up and
/// command files, the output of one-off runs), removed when dropped. A
/// server that cannot drop it (SIGKILL, abort) leaves it to the next start,
/// which removes the directories of servers that are gone.
pub(crate) struct RuntimeDir {
    pub(crate) path: PathBuf,
}

impl RuntimeDir {
    /// `$XDG_RUNTIME_DIR/shellkeep/<pid>-<start>-<random>` when
    /// `$XDG_RUNTIME_DIR` is an existing absolute directory, else
    /// `$TMPDIR/shellkeep-<uid>/…`; a fresh `$TMPDIR/shellkeep-<uid>-<random>`
    /// replaces a base that is not private and ours (see `private_fs`).
    pub(crate) fn create() -> anyhow::Result<RuntimeDir> {
        let xdg = std::env::var_os("XDG_RUNTIME_DIR")
            .map(PathBuf::from)
            .filter(|dir| dir.is_absolute() && dir.is_dir());
        let temp = std::env::temp_dir();
        let (base, notice) = runtime_base(xdg.as_deref(), &temp).with_context(|| {
            format!(
                "cannot make a private runtime directory in {}; set TMPDIR or \
                 XDG_RUNTIME_DIR to a directory only you can write to",
                xdg.as_deref().unwrap_or(&temp).display()
            )
        })?;
        if let Some(notice) = notice {
            tracing::warn!("{notice}");
        }
        for removed in remove_dead_server_dirs(&base, &temp) {
            tracing::info!("removed {}, left by a server that is gone", removed.display());
        }
        let path = create_server_dir(&base)
            .with_context(|| format!("cannot create a private directory in {}", base.display()))?;
        tracing::info!("runtime directory: {}", path.display());
        Ok(RuntimeDir { path })
    }
}

impl Drop for RuntimeDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// The store for full outputs: the per-user directory with retention, or,
/// if that cannot be made private, `fallback` (removed at exit) with a
/// warning. Its files are named `<prefix>-…`.
pub(crate) fn full_output_store(
    config: &ServerConfig,
    fallback: &std::path::Path,
    prefix: &str,
) -> anyhow::Result<Arc<SpillStore>> {
    let (limits, retention) = (config.full_output_limits, config.retention);
    let wanted = config.full_output_dir.clone().or_else(default_full_output_dir);
    let checked = wanted.as_ref().map(|dir| {
        anyhow::ensure!(dir.is_absolute(), "{} is not an absolute path", dir.display());
        ensure_private_dir(dir).map_err(anyhow::Error::from)
    });
    match (wanted, checked) {
        (Some(dir), Some(Ok(()))) => {
            let store = SpillStore::new(dir, prefix, limits, Some(retention));
            // The default location is ours by its path: its old files are pruned.
            if config.full_output_dir.is_none()
                && let Err(err) = store.claim_dir()
            {
                tracing::warn!("cannot mark {} as shellkeep's: {err}", store.dir().display());
            }
            Ok(store)
        }
        (wanted, checked) => {
            let why = match checked {
                Some(Err(err)) => format!("{err:#}"),
                _ => "no $XDG_STATE_HOME or $HOME".to_owned(),
            };
            tracing::warn!(
                "cannot keep full outputs in {} ({why}); they go to {} and are removed when \
                 the server ends. Set --full-output-dir to a directory only you can write to.",
                wanted.as_deref().map_or("the state directory".into(), |d| d.display().to_string()),
                fallback.display()
            );
            Ok(SpillStore::new(fallback.to_owned(), prefix, limits, None))
        }
    }
}

/// The recorder `--record` asks for, its directory made private (the
/// error names the flag); old recordings are pruned in the background.
pub(crate) fn recorder(
    config: &ServerConfig,
    prefix: &str,
) -> anyhow::Result<Option<Arc<Recorder>>> {
    let Some(settings) = &config.record else { return Ok(None) };
    ensure_private_dir(&settings.dir).with_context(|| {
        format!("--record {}: cannot keep recordings there", settings.dir.display())
    })?;
    let recorder = Recorder::new(settings.clone(), prefix);
    let pruning = Arc::clone(&recorder);
    tokio::task::spawn_blocking(move || {
        for removed in pruning.prune() {
            tracing::info!("removed the old recording {}", removed.display());
        }
    });
    Ok(Some(recorder))
}

/// `$XDG_STATE_HOME/shellkeep/output`, else `~/.local/state/shellkeep/output`.
pub(crate) fn default_full_output_dir() -> Option<PathBuf> {
    Some(config::state_dir()?.join("output"))
}

/// Starts the orphan guard for this server: it is sent the scope token and
/// told the runtime directory, which it removes once the server is gone.
pub(crate) fn spawn_guard(exe: &std::path::Path, dir: &std::path::Path) -> std::io::Result<Guard> {
    let dir = dir.to_str().ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "the runtime directory is not UTF-8")
    })?;
    Guard::spawn_with_token(exe, &["__guard", "--runtime-dir", dir], Some(server_token()))
}

/// Watches SIGTERM, SIGINT and SIGHUP on a thread of its own, and cancels
/// `stop` at the first one that does not come from the server's own
/// processes: a person's `kill`, the client, a closing terminal (the
/// kernel's, which has no sender). One sent by a process of the server's
/// sessions or `run` commands (`kill $PPID`, `kill -- -1`;
/// `is_ours`, checked at once, while a sender that has just
/// exited is still a zombie of its parent) is ignored, logged and kept for
/// the next reply ([`tools::note_refused_signal`]). A sender already reaped
/// by then cannot be told apart from a person's and stops the server.
/// The returned handle ends the watch.
pub(crate) fn watch_stop_signals(
    stop: CancellationToken,
) -> std::io::Result<signal_hook::iterator::Handle> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    use signal_hook::iterator::SignalsInfo;
    use signal_hook::iterator::exfiltrator::WithOrigin;
    let mut signals = SignalsInfo::<WithOrigin>::new([SIGTERM, SIGINT, SIGHUP])?;
    let handle = signals.handle();
    std::thread::Builder::new().name("stop-signals".into()).spawn(move || {
        for origin in signals.forever() {
            let sender = origin.process.map(|process| process.pid);
            let Some(pid) = sender.filter(|&pid| is_ours(pid)) else {
                tracing::info!(signal = origin.signal, sender, "stopping on a signal");
                stop.cancel();
                return;
            };
            let refused = tools::RefusedSignal {
                signal: signal_name(origin.signal),
                pid,
                command: process_command_line(pid),
            };
            tracing::warn!(
                "ignored {} from pid {pid}, one of the server's own processes ({})",
                refused.signal,
                refused.command.as_deref().unwrap_or("gone")
            );
            tools::note_refused_signal(refused);
        }
    })?;
    Ok(handle)
}

/// The name of a stop signal the server watches.
pub(crate) fn signal_name(signal: i32) -> &'static str {
    match signal {
        signal_hook::consts::SIGTERM => "SIGTERM",
        signal_hook::consts::SIGINT => "SIGINT",
        signal_hook::consts::SIGHUP => "SIGHUP",
        _ => "a signal",
    }
}
