//! The server's end of attach: the Unix socket in its private runtime
//! directory, the peer check, and one task per viewer that streams a
//! session's terminal (replay, then live) and passes a writer's keys on.
//!
//! Bounds: [`MAX_VIEWERS`] connections at once (one more is told so and
//! closed), a request within [`HELLO_WITHIN`] and [`MAX_CLIENT_FRAME`]
//! bytes, every later client frame within the same size, and at most
//! [`KEY_FRAMES`] frames of keys waiting while the session takes the
//! previous ones. A slow viewer is never waited on: the terminal's
//! broadcast skips it ahead, and it is told how much it missed.
//!
//! It does not mask by itself (the engine's `RawMasker` does, with the
//! session's secrets), nor decide who may type (the session's hold does).

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, SystemTime};

use crate::tools::Clients;
use shellkeep_engine::{Activity, Session};
use shellkeep_engine::{RawMasker, Tap, Tapped, Terminal, typed_at_prompt};
use shellkeep_engine::{check_private_dir, euid};
use shellkeep_engine::{is_ours, peer_credentials};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::{Semaphore, broadcast, mpsc};
use tokio_util::sync::CancellationToken;

use super::protocol::{
    self, Accepted, AttachRequest, Event, Frame, GREETING, Kind, Listing, MAX_CLIENT_FRAME,
    MAX_OUTPUT_FRAME, Refused, Request, SessionRow, Window, Writing,
};

/// The socket's name in the server's runtime directory.
pub(super) const SOCKET_NAME: &str = "attach.sock";

/// The most viewers (and `ls` requests) connected at once.
pub(super) const MAX_VIEWERS: usize = 16;

/// How long a connected peer has to send its request.
pub(super) const HELLO_WITHIN: Duration = Duration::from_secs(10);

/// Frames of keys read ahead of the session.
const KEY_FRAMES: usize = 16;

/// How often a view without a shell looks for the session's next one.
const SHELL_POLL: Duration = Duration::from_millis(100);

/// What a peer of another user reads before the connection closes: no
/// name, no number, nothing about the server.
pub(super) const REFUSAL_OTHER_USER: &str =
    "shellkeep: refused: this server belongs to another user\n";

/// What a process of the server's own sessions reads.
pub(super) const REFUSAL_OWN_PROCESS: &str =
    "shellkeep: refused: a process of this server's own sessions cannot attach to them\n";

/// What one viewer too many reads.
const REFUSAL_TOO_MANY: &str = "shellkeep: refused: too many viewers are attached to this server\n";

/// What the listener shares with its connections: its state, one per
/// server, read by every viewer.
struct ListenerState {
    /// The server's clients, whose sessions a person sees.
    clients: Arc<Clients>,
    /// The directory sessions start in.
    start_dir: PathBuf,
    /// When the server started.
    started: SystemTime,
    /// The MCP client's name, once the handshake gave it.
    client: OnceLock<String>,
    /// Viewers per session name.
    viewers: Mutex<HashMap<String, u32>>,
    /// Cancelled when the server ends.
    stop: CancellationToken,
    /// One permit per connection.
    slots: Arc<Semaphore>,
}

/// The attach listener of one server. [`Listener::stop`] tells every
/// viewer the server ends and waits (briefly) for them to be told.
pub(crate) struct Listener {
    shared: Arc<ListenerState>,
    /// The socket's path.
    path: PathBuf,
    accept: tokio::task::JoinHandle<()>,
}

impl Listener {
    /// Listens on [`SOCKET_NAME`] in `runtime_dir` (a private directory of
    /// the server's own) for the sessions of `clients`, whose shells start
    /// in `start_dir`.
    pub(crate) fn start(
        runtime_dir: &Path,
        clients: Arc<Clients>,
        start_dir: PathBuf,
    ) -> std::io::Result<Listener> {
        check_private_dir(runtime_dir)?;
        let path = runtime_dir.join(SOCKET_NAME);
        let listener = tokio::net::UnixListener::bind(&path)?;
        // The directory already keeps others out; the socket says so too.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
        let shared = Arc::new(ListenerState {
            clients,
            start_dir,
            started: SystemTime::now(),
            client: OnceLock::new(),
            viewers: Mutex::new(HashMap::new()),
            stop: CancellationToken::new(),
            slots: Arc::new(Semaphore::new(MAX_VIEWERS)),
        });
        let accept = tokio::spawn(accept_loop(listener, Arc::clone(&shared)));
        Ok(Listener { shared, path, accept })
    }

    /// The socket's path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Records the MCP client's name (from its `initialize`), cut to 100
    /// characters, for listings.
    pub(crate) fn set_client(&self, name: &str) {
        let _ = self.shared.client.set(name.chars().take(100).collect());
    }

    /// Stops accepting, tells every viewer the server ends, and waits up
    /// to a second for them to be told. Call it before the sessions close,
    /// so that viewers learn the server ended, not that their session did.
    pub(crate) async fn stop(self) {
        self.accept.abort();
        self.shared.stop.cancel();
        // Every connection holds a slot: all slots back, all viewers told.
        let all = self.shared.slots.acquire_many(MAX_VIEWERS as u32);
        let _ = tokio::time::timeout(Duration::from_secs(1), all).await;
        let _ = std::fs::remove_file(&self.path);
    }
}

async fn accept_loop(listener: tokio::net::UnixListener, shared: Arc<ListenerState>) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(err) => {
                // Out of descriptors, say: wait a little rather than spin.
                tracing::warn!("attach: cannot accept a connection: {err}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            if let Err(err) = connection(stream, shared).await {
                tracing::debug!("attach: a connection ended: {err}");
            }
        });
    }
}

/// One connection: the peer check, the request, then a listing or a view.
async fn connection(mut stream: UnixStream, shared: Arc<ListenerState>) -> std::io::Result<()> {
    let (peer_pid, peer_uid) = peer_credentials(&stream)?;
    if peer_uid != euid() {
        tracing::warn!(peer_pid, peer_uid, "attach: refused a connection of another user");
        stream.write_all(REFUSAL_OTHER_USER.as_bytes()).await?;
        return stream.shutdown().await;
    }
    // A command of the server's own sessions (same user) must not watch its
    // session's raw stream, nor hold it as if it were a person, nor type
    // into it as one: the agent would be told a person did.
    let ours = tokio::task::spawn_blocking(move || is_ours(peer_pid)).await;
    if ours.unwrap_or(true) {
        tracing::warn!(peer_pid, "attach: refused a process of the server's own sessions");
        stream.write_all(REFUSAL_OWN_PROCESS.as_bytes()).await?;
        return stream.shutdown().await;
    }
    let Ok(_slot) = Arc::clone(&shared.slots).try_acquire_owned() else {
        stream.write_all(REFUSAL_TOO_MANY.as_bytes()).await?;
        return stream.shutdown().await;
    };
    stream.write_all(GREETING.as_bytes()).await?;
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);
    let hello =
        tokio::time::timeout(HELLO_WITHIN, protocol::read_frame(&mut read, MAX_CLIENT_FRAME))
            .await
            .map_err(|_| {
                std::io::Error::new(std::io::ErrorKind::TimedOut, "no request in time")
            })??;
    let request = match hello {
        Some(frame) if frame.kind == Kind::Hello => frame.parse::<Request>(),
        Some(frame) => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("expected a request, got {:?}", frame.kind),
        )),
        None => return Ok(()),
    };
    let request = match request {
        Ok(request) => request,
        Err(err) => {
            let refused = Refused { error: format!("the request is not understood ({err})") };
            return protocol::write_frame(&mut write, &Frame::json(Kind::Refused, &refused)).await;
        }
    };
    match request {
        Request::List => {
            let listing = listing(&shared);
            protocol::write_frame(&mut write, &Frame::json(Kind::Listing, &listing)).await
        }
        Request::Attach(request) => {
            tracing::info!(peer_pid, session = %request.session, write = request.write, "attach");
            view(read, write, request, &shared).await
        }
    }
}

/// The server and its sessions, now.
fn listing(shared: &ListenerState) -> Listing {
    let viewers = shared.viewers.lock().unwrap_or_else(PoisonError::into_inner).clone();
    let sessions = shared
        .clients
        .all()
        .into_iter()
        .flat_map(|client| {
            let sessions = Arc::clone(&client.sessions);
            sessions.list().into_iter().map(move |mut info| {
                let session = sessions.get(&info.name).ok();
                info.name = client.qualified(&info.name);
                (info, session)
            })
        })
        .map(|(info, session)| {
            let (state, command, running_secs) = match info.activity {
                Activity::NotStarted => ("not started", None, None),
                Activity::Idle => ("idle", None, None),
                Activity::Running { command, elapsed } => {
                    ("running", Some(command), Some(elapsed.as_secs_f64()))
                }
                Activity::Finished { command, .. } => ("finished", Some(command), None),
            };
            let writer_since =
                session.and_then(|session| session.held_since()).map(protocol::unix_secs);
            SessionRow {
                watchers: viewers.get(&info.name).copied().unwrap_or(0),
                name: info.name,
                state: state.to_owned(),
                command,
                running_secs,
                writer_since,
            }
        })
        .collect();
    Listing {
        pid: std::process::id(),
        start_dir: shared.start_dir.display().to_string(),
        client: shared.client.get().cloned(),
        started: protocol::unix_secs(shared.started),
        sessions,
    }
}

/// Counts a viewer of a session for as long as it lives.
struct Counted<'a> {
    shared: &'a ListenerState,
    name: String,
}

impl<'a> Counted<'a> {
    fn new(shared: &'a ListenerState, name: &str) -> Counted<'a> {
        *shared
            .viewers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(name.to_owned())
            .or_default() += 1;
        Counted { shared, name: name.to_owned() }
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        let mut viewers = self.shared.viewers.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = viewers.get_mut(&self.name) {
            *count -= 1;
            if *count == 0 {
                viewers.remove(&self.name);
            }
        }
    }
}

/// What the viewer's reader task passes on.
enum FromViewer {
    /// Keys for the session.
    Keys(Vec<u8>),
    /// The viewer left (or broke the protocol).
    Gone,
}

/// Streams session `request.session` to the viewer until it leaves, the
/// session closes or the server ends.
async fn view(
    read: BufReader<tokio::net::unix::OwnedReadHalf>,
    mut write: OwnedWriteHalf,
    request: AttachRequest,
    shared: &ListenerState,
) -> std::io::Result<()> {
    let session = match find(shared, &request.session) {
        Some(session) => session,
        None => {
            let open: Vec<String> = listing(shared).sessions.into_iter().map(|s| s.name).collect();
            let refused = Refused {
                error: format!(
                    "no session named {:?} (open: {})",
                    request.session,
                    if open.is_empty() { "none".to_owned() } else { open.join(", ") }
                ),
            };
            return protocol::write_frame(&mut write, &Frame::json(Kind::Refused, &refused)).await;
        }
    };
    let (hold, writing) = match request.write {
        false => (None, Writing::ReadOnly),
        true => match session.hold() {
            Ok(hold) => (Some(hold), Writing::Granted),
            Err(held) => (None, Writing::HeldElsewhere { since: protocol::unix_secs(held.since) }),
        },
    };
    let config = session.config();
    let window =
        session.terminal().map_or(Window { rows: config.rows, cols: config.cols }, |terminal| {
            let (rows, cols) = terminal.size();
            Window { rows, cols }
        });
    let accepted = Accepted {
        server_pid: std::process::id(),
        session: request.session.clone(),
        window,
        writing,
        masked: !request.show_secrets,
    };
    protocol::write_frame(&mut write, &Frame::json(Kind::Accepted, &accepted)).await?;
    let _counted = Counted::new(shared, &request.session);
    // The viewer's frames, read on their own so that a frame half read is
    // never lost to a `select!`.
    let (keys_in, mut keys) = mpsc::channel(KEY_FRAMES);
    let reader = tokio::spawn(read_viewer(read, keys_in));
    let mut out = Viewer {
        write,
        secrets: (!request.show_secrets).then(|| Arc::clone(&session.config().secrets)),
        masker: None,
    };
    let since = request
        .since_secs
        .filter(|secs| secs.is_finite() && *secs >= 0.0)
        .map(|secs| Duration::from_secs_f64(secs).min(protocol::MAX_SINCE));
    let name = request.session.as_str();
    let ended =
        watch_shells(&mut out, (name, &session), shared, since, &mut keys, hold.as_ref()).await;
    reader.abort();
    // The session is let go before the viewer sees the connection end (the
    // write half goes with `out`): a view that waits for that end to say
    // "detached" says it when the agent may type again.
    drop(hold);
    let event = ended?;
    out.event(&event).await?;
    out.write.shutdown().await
}

/// Follows the session's shells, one after the other, until the viewer
/// leaves (`Ok(Event::Closed)` is not sent then: the caller gets an error
/// or an end to report).
async fn watch_shells(
    out: &mut Viewer,
    (name, session): (&str, &Arc<Session>),
    shared: &ListenerState,
    mut since: Option<Duration>,
    keys: &mut mpsc::Receiver<FromViewer>,
    hold: Option<&shellkeep_engine::Hold>,
) -> std::io::Result<Event> {
    let mut last: Option<Arc<Terminal>> = None;
    let mut waiting_told = false;
    loop {
        let current = session.terminal();
        match (&current, &last) {
            (Some(terminal), Some(old)) if Arc::ptr_eq(terminal, old) => {}
            (Some(terminal), _) => {
                if last.is_some() {
                    out.event(&Event::Reset).await?;
                }
                waiting_told = false;
                last = Some(Arc::clone(terminal));
                let watch = terminal.watch(since.take());
                for tapped in &watch.replay {
                    out.tap(tapped).await?;
                }
                out.flush_masker().await?;
                out.event(&Event::Live { cut: watch.cut }).await?;
                match follow(out, watch.live, (name, session), shared, keys, hold).await? {
                    Followed::Ended(event) => return Ok(event),
                    Followed::ShellGone => continue,
                }
            }
            (None, _) => {}
        }
        // No shell (not started yet, or it ended): closed, or wait.
        if shared.stop.is_cancelled() {
            return Ok(Event::ServerEnded);
        }
        if !still_open(name, session, shared) {
            return Ok(Event::Closed);
        }
        if !waiting_told {
            out.event(&Event::Waiting).await?;
            waiting_told = true;
        }
        tokio::select! {
            () = shared.stop.cancelled() => return Ok(Event::ServerEnded),
            () = tokio::time::sleep(SHELL_POLL) => {}
            from = keys.recv() => match from {
                Some(FromViewer::Keys(_)) => {} // no shell to type into
                Some(FromViewer::Gone) | None => return Err(gone()),
            },
        }
    }
}

/// How following one shell ended.
enum Followed {
    /// The view ends with this event.
    Ended(Event),
    /// The shell's terminal closed: look for the next.
    ShellGone,
}

/// Passes one shell's live output to the viewer, and the viewer's keys to
/// the session, until the shell goes, the viewer leaves or the server ends.
async fn follow(
    out: &mut Viewer,
    mut live: broadcast::Receiver<Arc<Tapped>>,
    (name, session): (&str, &Arc<Session>),
    shared: &ListenerState,
    keys: &mut mpsc::Receiver<FromViewer>,
    hold: Option<&shellkeep_engine::Hold>,
) -> std::io::Result<Followed> {
    loop {
        tokio::select! {
            // The server's end first: its sessions close after it.
            biased;
            () = shared.stop.cancelled() => {
                out.flush_masker().await?;
                return Ok(Followed::Ended(Event::ServerEnded));
            }
            tapped = live.recv() => match tapped {
                Ok(tapped) => out.tap(&tapped).await?,
                Err(broadcast::error::RecvError::Lagged(taps)) => {
                    // What the filters held back belongs to output now lost.
                    out.masker = None;
                    out.event(&Event::Skipped { taps }).await?;
                }
                Err(broadcast::error::RecvError::Closed) => {
                    out.flush_masker().await?;
                    if shared.stop.is_cancelled() {
                        return Ok(Followed::Ended(Event::ServerEnded));
                    }
                    if !still_open(name, session, shared) {
                        return Ok(Followed::Ended(Event::Closed));
                    }
                    return Ok(Followed::ShellGone);
                }
            },
            from = keys.recv() => match from {
                Some(FromViewer::Keys(bytes)) => {
                    if let Some(hold) = hold
                        && let Err(err) = session.type_keys(hold, &bytes).await
                    {
                        tracing::debug!("attach: keys not typed: {err}");
                    }
                }
                Some(FromViewer::Gone) | None => return Err(gone()),
            },
        }
    }
}

/// Whether `session` is still the session a person's view names `name`.
fn still_open(name: &str, session: &Arc<Session>, shared: &ListenerState) -> bool {
    find(shared, name).is_some_and(|open| Arc::ptr_eq(&open, session))
}

/// The session a person's view names `qualified` (a principal's as
/// `PRINCIPAL/NAME`).
fn find(shared: &ListenerState, qualified: &str) -> Option<Arc<Session>> {
    let (client, name) = shared.clients.find(qualified)?;
    client.sessions.get(&name).ok()
}

fn gone() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::ConnectionAborted, "the viewer left")
}

/// Reads the viewer's frames after its request: keys go on, a window size
/// is noted in the log; anything else, or the end, means it left.
async fn read_viewer(
    mut read: BufReader<tokio::net::unix::OwnedReadHalf>,
    keys: mpsc::Sender<FromViewer>,
) {
    loop {
        let frame = protocol::read_frame(&mut read, MAX_CLIENT_FRAME).await;
        let from = match frame {
            Ok(Some(frame)) if frame.kind == Kind::Keys => FromViewer::Keys(frame.payload),
            Ok(Some(frame)) if frame.kind == Kind::Window => {
                if let Ok(window) = frame.parse::<Window>() {
                    tracing::debug!(
                        rows = window.rows,
                        cols = window.cols,
                        "attach: viewer window"
                    );
                }
                continue;
            }
            _ => FromViewer::Gone,
        };
        let leaving = matches!(from, FromViewer::Gone);
        if keys.send(from).await.is_err() || leaving {
            return;
        }
    }
}

/// The viewer's end of the socket, with its masker.
struct Viewer {
    write: OwnedWriteHalf,
    /// The session's secrets; `None` shows the raw stream.
    secrets: Option<Arc<shellkeep_engine::Secrets>>,
    /// The masker of the current stretch of output (it may hold back the
    /// start of a secret until the next piece shows whether it is one).
    masker: Option<RawMasker>,
}

impl Viewer {
    /// Sends one piece of the terminal's stream.
    async fn tap(&mut self, tapped: &Tapped) -> std::io::Result<()> {
        match &tapped.tap {
            Tap::Output(bytes) => self.show(bytes).await,
            Tap::Command(command) => self.show(typed_at_prompt(command).as_bytes()).await,
            Tap::Resize { rows, cols } => {
                self.event(&Event::Resize { window: Window { rows: *rows, cols: *cols } }).await
            }
            Tap::Exit(how) => {
                self.flush_masker().await?;
                self.event(&Event::ShellEnded { how: how.clone() }).await
            }
            // The terminal echoes what it echoes: keys typed with echo on
            // are in the output already; keys typed with echo off must never
            // be shown.
            Tap::Input { .. } => Ok(()),
        }
    }

    /// Sends output, masked with the session's secrets unless the viewer
    /// asked for the raw stream (`show_secrets`: the same user, the secrets
    /// are theirs). The engine has taken the integration's markers out of
    /// it, and the echo of the lines that run the agent's commands (which
    /// [`Viewer::tap`] shows as `$ command`). Raw masking cannot see a
    /// secret that the program breaks up with escape sequences (colour in
    /// the middle of a token): that stays visible.
    async fn show(&mut self, cleaned: &[u8]) -> std::io::Result<()> {
        let shown = match &self.secrets {
            Some(secrets) => self
                .masker
                .get_or_insert_with(|| RawMasker::new(Arc::clone(secrets)))
                .push(cleaned)
                .into_bytes(),
            None => cleaned.to_vec(),
        };
        self.output(&shown).await
    }

    /// Sends what the masker held back: the stream of this shell ends.
    async fn flush_masker(&mut self) -> std::io::Result<()> {
        let Some(mut masker) = self.masker.take() else { return Ok(()) };
        let rest = masker.finish();
        self.output(rest.as_bytes()).await
    }

    async fn output(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        for chunk in bytes.chunks(MAX_OUTPUT_FRAME) {
            let frame = Frame { kind: Kind::Output, payload: chunk.to_vec() };
            protocol::write_frame(&mut self.write, &frame).await?;
        }
        Ok(())
    }

    async fn event(&mut self, event: &Event) -> std::io::Result<()> {
        protocol::write_frame(&mut self.write, &Frame::json(Kind::Event, event)).await
    }
}
