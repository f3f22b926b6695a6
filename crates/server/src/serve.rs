//! A serving server's life: [`Running::start`] builds what outlives
//! clients (the guard, containment, full outputs, the audit log, the
//! clients and the attach listener), a transport serves it
//! ([`serve_stdio`]), and [`Running::stop`] stops everything it started, in
//! one order whatever the transport.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use rmcp::ServiceExt;
use shellkeep_engine::cgroup;
use shellkeep_engine::guard::Guard;
use shellkeep_engine::private_fs;
use shellkeep_engine::process;
use shellkeep_engine::record::Recorder;
use shellkeep_engine::registry::DEFAULT_SESSION;
use shellkeep_engine::sandbox;
use tokio_util::sync::CancellationToken;

use crate::config::ServerConfig;
use crate::{ContainmentEnd, RuntimeDir, attach, audit, tools, wire};

/// A server that serves: its core and what must be stopped at its end.
pub struct Running {
    /// What every client's calls share.
    pub core: Arc<tools::Core>,
    /// Cancelled by the first stop signal that is not our commands'.
    pub stop: CancellationToken,
    /// The person's view of the sessions, if it listens.
    pub listener: Option<attach::Listener>,
    signals: signal_hook::iterator::Handle,
    sweep: tokio::task::JoinHandle<usize>,
    reaper: tokio::task::JoinHandle<()>,
    recorder: Option<Arc<Recorder>>,
    guard: Option<Arc<Guard>>,
    containment: ContainmentEnd,
    audit: Option<Arc<audit::AuditLog>>,
    grace: Duration,
    dir: RuntimeDir,
}

impl Running {
    /// Starts a server with `config` (the policy from `policy_file`):
    /// everything but a transport. Only wiring: every value was checked by
    /// [`ServerConfig::from_args`].
    pub async fn start(
        policy_file: Option<&std::path::Path>,
        config: ServerConfig,
        audit: Option<Arc<audit::AuditLog>>,
    ) -> anyhow::Result<Running> {
        // First of all: a command running as the same user must not be able
        // to open our stdout through /proc and forge protocol messages.
        if let Err(err) = private_fs::make_process_undumpable() {
            tracing::warn!(
                "cannot make the server non-dumpable ({err}); commands could write to its stdout through /proc"
            );
        }
        let loaded = crate::load_policy(policy_file)?;
        // Before anything is started: every child joins its owner's group.
        let containment = crate::start_containment(config.containment)?;
        // What servers that are gone left running (killed with their
        // guard): stopped in the background, so that the start does not
        // wait.
        let sweep = tokio::task::spawn_blocking(process::sweep_dead_servers);
        let cwd = match &config.cwd {
            Some(dir) => dir.clone(),
            None => std::env::current_dir().context("cannot read the working directory")?,
        };
        anyhow::ensure!(cwd.is_dir(), "--cwd {} is not a directory", cwd.display());
        // Resolved once, before any command's `env` can change `PATH`.
        let _ = process::bash();
        let dir = RuntimeDir::create()?;
        // A sandboxed `run`'s temporary directory goes where the guard looks
        // after a server SIGKILL.
        sandbox::set_private_tmp_base(dir.path.clone());
        let guard =
            match std::env::current_exe().and_then(|exe| crate::start_guard(&exe, &dir.path)) {
                Ok(guard) => Some(Arc::new(guard)),
                // Replies say so: a missing safety net is never silent.
                Err(err) => Some(Arc::new(Guard::unavailable(&err.to_string()))),
            };
        // After a server SIGKILL the guard kills the server's control
        // groups, whatever their processes did to their markers.
        if let (Some(guard), Some(dir)) = (&guard, cgroup::server_dir()) {
            guard.watch_cgroup(dir);
        }
        // Orphans of everything we start become our children, so that
        // nothing leaves our tree; they are reaped here as they end, and
        // those that only their ancestry ties to us are told to the guard,
        // which cannot see that ancestry once we are gone.
        let adopted_guard = guard.clone();
        let reaper = tokio::spawn(async move {
            let told = move |roots: &[process::Root]| {
                if let Some(guard) = &adopted_guard {
                    guard.watch_trees(roots);
                }
            };
            if let Err(err) = process::reap_adopted_orphans(told).await {
                tracing::warn!("cannot become a subreaper ({err}); orphans may outlive the server");
            }
        });
        // Unique among servers sharing the directory.
        let prefix = shellkeep_engine::output::server_prefix()?;
        let spill = crate::full_output_store(&config, &dir.path.join("output"), &prefix)?;
        // Said in the log, with where full outputs go, so that a later
        // server can tell if this one dies; and earlier servers that died
        // are found.
        if let Some(log) = &audit {
            let full_output_dir = spill.dir().to_owned();
            log.server_started(&audit::ServerFacts {
                full_output_dir,
                output_prefix: prefix.clone(),
            });
        }
        let pruning = Arc::clone(&spill);
        tokio::task::spawn_blocking(move || {
            for removed in pruning.prune() {
                tracing::info!("removed the old full output {}", removed.display());
            }
        });
        let recorder = crate::recorder(&config, &prefix)?;
        let mut template = config.session_template(
            cwd,
            dir.path.join("sessions"),
            Arc::clone(&spill),
            guard.clone(),
        );
        template.record = recorder.clone();
        let clients = Arc::new(tools::Clients::new(template, config.sessions, config.output_keep));
        let grace = config.grace;
        let core = Arc::new(tools::Core {
            clients: Arc::clone(&clients),
            policy: loaded.policy,
            policy_origin: loaded.origin,
            spill,
            config,
            guard: guard.clone(),
            audit: audit.clone(),
        });
        // Start the local client's shell now, so the first command does not
        // wait for bash.
        let local = clients.local();
        tokio::spawn(async move {
            let started = local.sessions.open(DEFAULT_SESSION, None, true, None);
            let Ok((lease, _)) = started else { return };
            if let Err(err) = lease.session().start().await {
                tracing::warn!("the terminal could not start yet: {err}");
            }
        });
        // A person's view of the sessions (`shellkeep attach`): without it
        // the server still serves, and says why in the log.
        let start_dir = clients.start_dir().to_owned();
        let listener = match attach::Listener::start(&dir.path, Arc::clone(&clients), start_dir) {
            Ok(listener) => {
                tracing::info!("attach socket: {}", listener.path().display());
                Some(listener)
            }
            Err(err) => {
                tracing::warn!("cannot listen for shellkeep attach: {err}");
                None
            }
        };
        let stop = CancellationToken::new();
        let signals = crate::watch_stop_signals(stop.clone())
            .context("cannot watch for stop signals (SIGTERM, SIGINT, SIGHUP)")?;
        Ok(Running {
            core,
            stop,
            listener,
            signals,
            sweep,
            reaper,
            recorder,
            guard,
            containment,
            audit,
            grace,
            dir,
        })
    }

    /// Stops everything the server started, whatever the transport: every
    /// client's sessions and what they started, then anything else we
    /// started, wherever it went (`setsid`, a double fork, a cleared
    /// environment: orphans are our children); the guard is told last.
    pub async fn stop(self) {
        let Running {
            core,
            listener,
            signals,
            sweep,
            reaper,
            recorder,
            guard,
            containment,
            audit,
            grace,
            dir,
            stop: _,
        } = self;
        signals.close();
        sweep.abort();
        // Viewers learn that the server ends, before their sessions close.
        if let Some(listener) = listener {
            listener.stop().await;
        }
        core.clients.close_all().await;
        drop(core);
        // The recordings of the closed shells are written to their end.
        if let Some(recorder) = recorder {
            let _ = tokio::task::spawn_blocking(move || recorder.wait_idle(Duration::from_secs(3)))
                .await;
        }
        // Every session is stopped: a later server must not report this one.
        if let Some(log) = &audit {
            log.server_ended();
        }
        // A guard given up is not spared: its old pid may be anything's now.
        let guard_pid = guard.as_ref().and_then(|guard| guard.live_pid()).map(|pid| pid as i32);
        process::terminate(
            &process::Targets::whole_server(&guard_pid.into_iter().collect::<Vec<_>>()),
            grace,
        )
        .await;
        // Whatever is still in our control groups (nothing leaves them
        // without privileges) is killed, and the groups removed.
        drop(containment);
        // The reaper holds the guard too (to tell it of adopted orphans): it
        // must be gone, not only told to go, before the guard is ours alone
        // to tell that the server ended normally.
        reaper.abort();
        let _ = reaper.await;
        match guard.map(Arc::try_unwrap) {
            Some(Ok(guard)) => {
                guard.shutdown(Duration::from_secs(3));
            }
            // Never expected: the guard then takes this end for a crash.
            Some(Err(_)) => {
                tracing::warn!("the orphan guard is still shared; it is not told of the end")
            }
            None => {}
        }
        drop(dir);
    }
}

/// Serves MCP on stdio until the client leaves or a stop signal comes.
pub async fn serve_stdio(running: &Running) -> anyhow::Result<()> {
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
