//! The person's end of attach: `shellkeep ls` and `shellkeep attach`.
//! Finds this user's running servers in the runtime directories, talks to
//! their sockets, and shows a session in the person's terminal (raw mode,
//! restored on every way out) or, without a terminal, as a plain stream.
//! The words the person reads are here; nothing here touches a session
//! other than through the socket.

use std::io::Write;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::Context;
use shellkeep_engine::terminal_size;
use shellkeep_engine::{check_private_dir, euid, start_ticks, usable_temp_dir};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::mpsc;

use super::listen::SOCKET_NAME;
use super::protocol::{
    self, Accepted, AttachRequest, Event, Frame, GREETING, GREETING_PREFIX, Kind, Listing,
    MAX_SERVER_FRAME, Refused, Request, Window, Writing,
};

/// The detach key: `C-]`, as telnet's; never passed to the program.
pub(super) const DETACH_KEY: u8 = 0x1d;

/// The detach key as the person types it.
pub(super) const DETACH_KEY_NAME: &str = "C-]";

/// `C-c`: detaches a read-only view (its keys go nowhere).
const INTERRUPT_KEY: u8 = 0x03;

/// Written to the person's terminal when a view ends: the modes a
/// session's program may have switched on through the stream, off again
/// (the alternate screen, a hidden cursor, mouse reports, bracketed paste,
/// application keys, colours, the line-drawing character set), and the
/// title the view set cleared.
const TERMINAL_RESET: &[u8] = b"\x1b[?1049l\x1b[?1047l\x1b[?25h\x1b[0m\x1b(B\x1b[?1000l\x1b[?1002l\
\x1b[?1003l\x1b[?1006l\x1b[?2004l\x1b[?1l\x1b>\x1b]0;\x07";

/// How long a server has to answer a listing.
const ANSWER_WITHIN: Duration = Duration::from_secs(5);

/// How long a view that leaves (detach key, signal) waits for the server
/// to let go of the session: the keys it sent are typed first, a frame of
/// them waiting at most a second for the shell's line editing and five for
/// a program that does not read its input.
const LET_GO_WITHIN: Duration = Duration::from_secs(7);

/// What `shellkeep attach` was asked.
#[derive(Debug, Clone)]
pub(crate) struct AttachOptions {
    /// The session (`default` when not given).
    pub session: Option<String>,
    /// The server's process id, when several run.
    pub server: Option<u32>,
    /// The server's socket, as `ls` shows it.
    pub socket: Option<PathBuf>,
    /// Ask to type.
    pub write: bool,
    /// Replay only this last stretch.
    pub since: Option<Duration>,
    /// Show the raw stream, unmasked.
    pub show_secrets: bool,
}

/// A running server of this user, found by its runtime directory.
#[derive(Debug, Clone)]
pub(super) struct Found {
    /// Its process id.
    pub pid: u32,
    /// Its attach socket.
    pub socket: PathBuf,
}

/// The runtime bases a server of this user may have used: the usual one
/// (`$XDG_RUNTIME_DIR/shellkeep`, else `$TMPDIR/shellkeep-<uid>`) and the
/// fresh fallbacks next to it (`shellkeep-<uid>-<16 hex digits>`). Only
/// private directories of ours count; nothing is created.
fn runtime_bases() -> Vec<PathBuf> {
    let xdg = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute() && dir.is_dir());
    let (temp, _) = usable_temp_dir(&std::env::temp_dir());
    let uid = euid();
    let mut bases = Vec::new();
    if let Some(xdg) = xdg {
        bases.push(xdg.join("shellkeep"));
    }
    bases.push(temp.join(format!("shellkeep-{uid}")));
    let prefix = format!("shellkeep-{uid}-");
    for entry in std::fs::read_dir(&temp).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.strip_prefix(&prefix).is_some_and(|rest| is_hex(rest, 16)) {
            bases.push(entry.path());
        }
    }
    bases.retain(|base| check_private_dir(base).is_ok());
    bases.dedup();
    bases
}

fn is_hex(text: &str, len: usize) -> bool {
    text.len() == len && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The pid of the live server that made the runtime directory `name`
/// (`<pid>-<start ticks>-<8 hex digits>`); `None` for another name or a
/// server that is gone (its pid free, or reused by a later process).
fn live_server(name: &str) -> Option<u32> {
    let mut fields = name.split('-');
    let (pid, start, random) = (fields.next()?, fields.next()?, fields.next()?);
    if fields.next().is_some() || !is_hex(random, 8) {
        return None;
    }
    let pid: u32 = pid.parse().ok()?;
    let start: u64 = start.parse().ok()?;
    (start_ticks(pid) == Some(start)).then_some(pid)
}

/// This user's running servers that listen for attach, by pid.
pub(super) fn find_servers() -> Vec<Found> {
    let mut found = Vec::new();
    for base in runtime_bases() {
        for entry in std::fs::read_dir(&base).into_iter().flatten().flatten() {
            let Some(pid) = live_server(&entry.file_name().to_string_lossy()) else { continue };
            let socket = entry.path().join(SOCKET_NAME);
            if check_private_dir(&entry.path()).is_ok() && socket.exists() {
                found.push(Found { pid, socket });
            }
        }
    }
    found.sort_by_key(|server| server.pid);
    found
}

/// A connection to a server past its greeting.
struct Connection {
    read: BufReader<OwnedReadHalf>,
    write: OwnedWriteHalf,
}

/// Connects to `socket`, reads the greeting and sends `request`. A
/// refusal (another user's server, too many viewers) is an error that
/// quotes it.
async fn connect(socket: &Path, request: &Request) -> anyhow::Result<Connection> {
    let stream = UnixStream::connect(socket)
        .await
        .with_context(|| format!("cannot reach the server at {}", socket.display()))?;
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);
    let line = tokio::time::timeout(ANSWER_WITHIN, protocol::read_line(&mut read))
        .await
        .context("the server does not answer")??;
    if line != GREETING.trim_end() {
        if line.starts_with(GREETING_PREFIX) {
            anyhow::bail!(
                "the server speaks another version of the attach protocol ({line:?}; this is \
                 version {}): use the shellkeep that runs it",
                protocol::VERSION
            );
        }
        let said = if line.is_empty() { "it closed the connection".to_owned() } else { line };
        anyhow::bail!("{said}");
    }
    protocol::write_frame(&mut write, &Frame::json(Kind::Hello, request)).await?;
    Ok(Connection { read, write })
}

/// Asks one server for its listing.
async fn list_one(socket: &Path) -> anyhow::Result<Listing> {
    let mut connection = connect(socket, &Request::List).await?;
    let frame = tokio::time::timeout(
        ANSWER_WITHIN,
        protocol::read_frame(&mut connection.read, MAX_SERVER_FRAME),
    )
    .await
    .context("the server does not answer")??;
    match frame {
        Some(frame) if frame.kind == Kind::Listing => Ok(frame.parse()?),
        Some(frame) if frame.kind == Kind::Refused => {
            anyhow::bail!("{}", frame.parse::<Refused>()?.error)
        }
        _ => anyhow::bail!("the server gave no listing"),
    }
}

/// `shellkeep ls`: this user's running servers and their sessions.
pub(crate) async fn ls(out: &mut impl Write) -> anyhow::Result<()> {
    let servers = find_servers();
    if servers.is_empty() {
        writeln!(out, "no shellkeep server of yours is running")?;
        return Ok(());
    }
    let now = protocol::unix_secs(SystemTime::now());
    for server in servers {
        match list_one(&server.socket).await {
            Ok(listing) => write_listing(out, &listing, &server.socket, now)?,
            Err(err) => writeln!(out, "server {}: not answering ({err:#})", server.pid)?,
        }
    }
    Ok(())
}

/// One server's part of `ls`.
fn write_listing(
    out: &mut impl Write,
    listing: &Listing,
    socket: &Path,
    now: f64,
) -> std::io::Result<()> {
    writeln!(
        out,
        "server {}: started in {}, client {}, up {}",
        listing.pid,
        listing.start_dir,
        listing.client.as_deref().unwrap_or("(not connected yet)"),
        span(now - listing.started)
    )?;
    writeln!(out, "  attach socket: {}", socket.display())?;
    if listing.sessions.is_empty() {
        writeln!(out, "  no session open")?;
    }
    for row in &listing.sessions {
        let mut line = format!("  {}: {}", row.name, row.state);
        if let Some(command) = &row.command {
            let command: String = command.chars().take(60).collect();
            line.push_str(&format!(" `{command}`"));
        }
        if let Some(secs) = row.running_secs {
            line.push_str(&format!(" for {}", span(secs)));
        }
        match row.watchers {
            0 => line.push_str(", nobody attached"),
            1 => line.push_str(", 1 watching"),
            n => line.push_str(&format!(", {n} watching")),
        }
        if let Some(since) = row.writer_since {
            line.push_str(&format!(", a person writing for {}", span(now - since)));
        }
        writeln!(out, "{line}")?;
    }
    Ok(())
}

/// `secs` in words: `45s`, `3m 05s`, `2h 10m`.
fn span(secs: f64) -> String {
    let secs = secs.max(0.0) as u64;
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m {:02}s", secs / 60, secs % 60),
        _ => format!("{}h {:02}m", secs / 3600, secs % 3600 / 60),
    }
}

/// The socket to attach to: the one named, the server named, or the only
/// one running; several without a choice is an error that lists them.
async fn choose_server(options: &AttachOptions) -> anyhow::Result<PathBuf> {
    if let Some(socket) = &options.socket {
        return Ok(socket.clone());
    }
    let servers = find_servers();
    if let Some(pid) = options.server {
        return servers
            .iter()
            .find(|server| server.pid == pid)
            .map(|s| s.socket.clone())
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "no shellkeep server of yours runs as pid {pid} (running: {})",
                    pids(&servers)
                )
            });
    }
    match servers.as_slice() {
        [] => anyhow::bail!(
            "no shellkeep server of yours is running (looked in {})",
            runtime_bases().iter().map(|b| b.display().to_string()).collect::<Vec<_>>().join(", ")
        ),
        [only] => Ok(only.socket.clone()),
        several => {
            let mut lines = String::new();
            for server in several {
                let what = match list_one(&server.socket).await {
                    Ok(listing) => format!(
                        "started in {}, client {}",
                        listing.start_dir,
                        listing.client.as_deref().unwrap_or("(not connected yet)")
                    ),
                    Err(err) => format!("not answering ({err:#})"),
                };
                lines.push_str(&format!("\n  --server {}: {what}", server.pid));
            }
            anyhow::bail!(
                "{} shellkeep servers of yours are running; choose one:{lines}",
                several.len()
            )
        }
    }
}

fn pids(servers: &[Found]) -> String {
    if servers.is_empty() {
        return "none".to_owned();
    }
    servers.iter().map(|s| s.pid.to_string()).collect::<Vec<_>>().join(", ")
}

/// How a view ended, for the last line the person reads.
#[derive(Debug, Clone, PartialEq, Eq)]
enum End {
    /// The person pressed the detach key.
    Detached,
    /// The attach process got this signal.
    Signal(&'static str),
    /// The session was closed.
    SessionClosed,
    /// The server ended (or the connection broke).
    ServerEnded,
}

impl End {
    fn words(&self, session: &str) -> String {
        match self {
            End::Detached => format!("detached from {session}; the session goes on untouched"),
            End::Signal(signal) => {
                format!("stopped by {signal}; detached from {session}, which goes on untouched")
            }
            End::SessionClosed => format!("the session {session} was closed"),
            End::ServerEnded => "the server ended".to_owned(),
        }
    }
}

/// The person's terminal in raw mode; restored when dropped (every way
/// out of the view, a panic included).
struct RawMode {
    saved: nix::sys::termios::Termios,
}

impl RawMode {
    fn enter() -> anyhow::Result<RawMode> {
        use nix::sys::termios::{OutputFlags, SetArg, cfmakeraw, tcgetattr, tcsetattr};
        let stdin = std::io::stdin();
        let saved = tcgetattr(stdin.as_fd()).context("cannot read the terminal's settings")?;
        let mut raw = saved.clone();
        cfmakeraw(&mut raw);
        // The session's terminal sends bare line feeds (its PTY does no
        // output processing) and shellkeep's renderer takes each for a new
        // line: the person's terminal does the same.
        raw.output_flags.insert(OutputFlags::OPOST | OutputFlags::ONLCR);
        tcsetattr(stdin.as_fd(), SetArg::TCSAFLUSH, &raw).context("cannot set raw mode")?;
        Ok(RawMode { saved })
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        use nix::sys::termios::{SetArg, tcsetattr};
        let _ = tcsetattr(std::io::stdin().as_fd(), SetArg::TCSAFLUSH, &self.saved);
    }
}

/// The person's window, if stdout is a terminal.
fn own_window() -> Option<Window> {
    let (rows, cols) = terminal_size(&std::io::stdout()).ok()?;
    (rows > 0 && cols > 0).then_some(Window { rows, cols })
}

/// What a viewer is told when its terminal is smaller than the session's.
fn size_words(own: Option<Window>, session: Window) -> Option<String> {
    let own = own?;
    let mut what = Vec::new();
    if own.cols < session.cols {
        what.push("lines longer than your width wrap");
    }
    if own.rows < session.rows {
        what.push("a full-screen program's lower rows do not fit");
    }
    (!what.is_empty()).then(|| {
        format!(
            "your terminal ({}x{}) is smaller than the session's ({}x{}): {}; the agent's size \
             wins (make your terminal at least as large to see it as the agent does)",
            own.cols,
            own.rows,
            session.cols,
            session.rows,
            what.join(", and ")
        )
    })
}

/// `shellkeep attach`: shows the session in this terminal until the
/// person detaches, a signal comes, the session closes or the server ends.
pub(crate) async fn attach(options: AttachOptions) -> anyhow::Result<()> {
    let tty = nix::unistd::isatty(std::io::stdin().as_fd()).unwrap_or(false)
        && nix::unistd::isatty(std::io::stdout().as_fd()).unwrap_or(false);
    anyhow::ensure!(
        tty || !options.write,
        "--write needs a terminal (stdin and stdout); without one, attach only watches"
    );
    let socket = choose_server(&options).await?;
    let session = options.session.clone().unwrap_or_else(|| "default".to_owned());
    let request = Request::Attach(AttachRequest {
        session: session.clone(),
        write: options.write,
        since_secs: options.since.map(|since| since.as_secs_f64()),
        show_secrets: options.show_secrets,
        window: own_window(),
    });
    let mut connection = connect(&socket, &request).await?;
    let first = tokio::time::timeout(
        ANSWER_WITHIN,
        protocol::read_frame(&mut connection.read, MAX_SERVER_FRAME),
    )
    .await
    .context("the server does not answer")??;
    let accepted: Accepted = match first {
        Some(frame) if frame.kind == Kind::Accepted => frame.parse()?,
        Some(frame) if frame.kind == Kind::Refused => {
            anyhow::bail!("{}", frame.parse::<Refused>()?.error)
        }
        _ => anyhow::bail!("the server closed the connection"),
    };
    let mut screen = Screen { tty, out: std::io::stdout() };
    let raw = if tty { Some(RawMode::enter()?) } else { None };
    let writing = matches!(accepted.writing, Writing::Granted);
    if tty {
        // The terminal's title names the view for as long as it lasts.
        screen.raw(
            format!(
                "\x1b]0;shellkeep: {} on server {} ({})\x07",
                accepted.session,
                accepted.server_pid,
                if writing { "writing" } else { "read-only" }
            )
            .as_bytes(),
        );
    }
    screen.line(&banner(&accepted, options.since));
    if let Some(words) = size_words(own_window(), accepted.window) {
        screen.line(&words);
    }
    let end = run_view(&mut connection, &mut screen, &accepted, tty, writing).await;
    if matches!(end, End::Detached | End::Signal(_)) {
        let_go(&mut connection).await;
    }
    if tty {
        // What the session's programs switched on must not outlive the view.
        screen.raw(TERMINAL_RESET);
    }
    drop(raw);
    // On a line of its own, after whatever the program left on the last.
    let _ = writeln!(std::io::stderr(), "\r\nshellkeep: {}", end.words(&accepted.session));
    Ok(())
}

/// The first line of a view.
fn banner(accepted: &Accepted, since: Option<Duration>) -> String {
    let mode = match accepted.writing {
        Writing::ReadOnly => "read-only".to_owned(),
        Writing::Granted => "writing: your keys go to the session".to_owned(),
        Writing::HeldElsewhere { since } => format!(
            "read-only: another person has held it for writing for {}",
            span(protocol::unix_secs(SystemTime::now()) - since)
        ),
    };
    let replay = match since {
        Some(since) => format!("the last {} first", span(since.as_secs_f64())),
        None => "its recent output first".to_owned(),
    };
    let masked = if accepted.masked { "secrets masked" } else { "SECRETS SHOWN" };
    format!(
        "shellkeep: session {} of server {} ({}x{}), {mode}; {replay}; {masked}; detach with {}",
        accepted.session,
        accepted.server_pid,
        accepted.window.cols,
        accepted.window.rows,
        DETACH_KEY_NAME
    )
}

/// Where a view writes: the terminal (lines end with `\r\n` in raw mode)
/// or a plain stream (output to stdout, notices to stderr).
struct Screen {
    tty: bool,
    out: std::io::Stdout,
}

impl Screen {
    /// The session's output, as it is.
    fn raw(&mut self, bytes: &[u8]) {
        let mut out = self.out.lock();
        let _ = out.write_all(bytes);
        let _ = out.flush();
    }

    /// A notice of shellkeep's own, on a line of its own.
    fn line(&mut self, text: &str) {
        if self.tty {
            self.raw(format!("\r\n[{text}]\r\n").as_bytes());
        } else {
            let _ = writeln!(std::io::stderr(), "{text}");
        }
    }
}

/// What the view waits on besides the server.
enum Local {
    /// Keys the person typed.
    Keys(Vec<u8>),
    /// The person's window changed.
    Resized,
    /// A stop signal.
    Signal(&'static str),
}

/// The view's loop: the server's frames to the screen, the person's keys
/// and window to the server.
async fn run_view(
    connection: &mut Connection,
    screen: &mut Screen,
    accepted: &Accepted,
    tty: bool,
    writing: bool,
) -> End {
    let (local_in, mut local) = mpsc::channel(64);
    if tty {
        read_keys(local_in.clone());
    }
    let signals = watch_signals(local_in);
    let mut told_read_only = false;
    let mut session_window = accepted.window;
    let end = loop {
        tokio::select! {
            frame = protocol::read_frame(&mut connection.read, MAX_SERVER_FRAME) => {
                let frame = match frame {
                    Ok(Some(frame)) => frame,
                    _ => break End::ServerEnded,
                };
                match frame.kind {
                    Kind::Output => screen.raw(&frame.payload),
                    Kind::Event => match frame.parse::<Event>() {
                        Ok(event) => {
                            if let Some(end) = show_event(screen, &event, &mut session_window) {
                                break end;
                            }
                        }
                        Err(err) => screen.line(&format!("shellkeep: {err}")),
                    },
                    _ => {}
                }
            }
            Some(local) = local.recv() => match local {
                Local::Keys(bytes) => {
                    let (keys, detach) = match bytes.iter().position(|&b| b == DETACH_KEY) {
                        Some(at) => (&bytes[..at], true),
                        None => (&bytes[..], false),
                    };
                    if writing && !keys.is_empty() {
                        let frame = Frame { kind: Kind::Keys, payload: keys.to_vec() };
                        for chunk in frame.payload.chunks(protocol::MAX_CLIENT_FRAME) {
                            let frame = Frame { kind: Kind::Keys, payload: chunk.to_vec() };
                            if protocol::write_frame(&mut connection.write, &frame).await.is_err() {
                                break;
                            }
                        }
                    }
                    if detach || (!writing && keys.contains(&INTERRUPT_KEY)) {
                        break End::Detached;
                    }
                    if !writing && !keys.is_empty() && !told_read_only {
                        told_read_only = true;
                        screen.line(&format!(
                            "read-only: your keys are not sent (attach with --write to type); \
                             detach with {DETACH_KEY_NAME}"
                        ));
                    }
                }
                Local::Resized => {
                    if let Some(own) = own_window() {
                        let _ = protocol::write_frame(
                            &mut connection.write,
                            &Frame::json(Kind::Window, &own),
                        )
                        .await;
                        if let Some(words) = size_words(Some(own), session_window) {
                            screen.line(&words);
                        }
                    }
                }
                Local::Signal(name) => break End::Signal(name),
            },
        }
    };
    drop(signals);
    end
}

/// Leaves the session: ends the keys (the server then types what it has
/// and lets go of the session) and waits, at most [`LET_GO_WITHIN`], for
/// the server to close the connection, which it does only once the
/// session is no longer held. So "detached" is said when the agent can
/// type again, not before. What the session prints meanwhile is not shown.
async fn let_go(connection: &mut Connection) {
    let _ = connection.write.shutdown().await;
    let _ = tokio::time::timeout(LET_GO_WITHIN, async {
        while let Ok(Some(_)) = protocol::read_frame(&mut connection.read, MAX_SERVER_FRAME).await {
        }
    })
    .await;
}

/// Shows `event`; returns how the view ends, if it does.
fn show_event(screen: &mut Screen, event: &Event, window: &mut Window) -> Option<End> {
    match event {
        Event::Live { cut: true } => {
            screen.line("older output was already dropped; live from here");
        }
        Event::Live { cut: false } => {}
        Event::Skipped { taps } => {
            screen.line(&format!("skipped {taps} pieces of output: this view was too slow"));
        }
        Event::Resize { window: new } => {
            *window = *new;
            screen.line(&format!(
                "the session's window is now {}x{} (the agent's size wins)",
                new.cols, new.rows
            ));
            if let Some(words) = size_words(own_window(), *new) {
                screen.line(&words);
            }
        }
        Event::ShellEnded { how } => screen.line(&format!("the session's shell ended ({how})")),
        Event::Reset => {
            screen.line("the session's shell was replaced (reset); its new shell follows")
        }
        Event::Waiting => screen.line("the session has no shell at the moment; waiting for one"),
        Event::Closed => return Some(End::SessionClosed),
        Event::ServerEnded => return Some(End::ServerEnded),
    }
    None
}

/// Reads the person's keys on a thread of its own (a blocking read of the
/// terminal); it ends with the process.
fn read_keys(keys: mpsc::Sender<Local>) {
    let spawned = std::thread::Builder::new().name("attach-keys".into()).spawn(move || {
        let mut buffer = [0u8; 1024];
        loop {
            let read = nix::unistd::read(std::io::stdin().as_fd(), &mut buffer);
            match read {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if keys.blocking_send(Local::Keys(buffer[..n].to_vec())).is_err() {
                        return;
                    }
                }
            }
        }
    });
    if let Err(err) = spawned {
        tracing::warn!("cannot read the keyboard: {err}");
    }
}

/// Passes SIGINT, SIGTERM and SIGHUP (as a stop) and SIGWINCH (as a new
/// window) on; the returned task ends the watch when dropped... or aborted.
fn watch_signals(to: mpsc::Sender<Local>) -> Option<AbortOnDrop> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut stops = [
        (signal(SignalKind::interrupt()).ok()?, "SIGINT"),
        (signal(SignalKind::terminate()).ok()?, "SIGTERM"),
        (signal(SignalKind::hangup()).ok()?, "SIGHUP"),
    ];
    let mut winch = signal(SignalKind::window_change()).ok()?;
    let task = tokio::spawn(async move {
        loop {
            let [(int, _), (term, _), (hup, _)] = &mut stops;
            let local = tokio::select! {
                _ = int.recv() => Local::Signal("SIGINT"),
                _ = term.recv() => Local::Signal("SIGTERM"),
                _ = hup.recv() => Local::Signal("SIGHUP"),
                _ = winch.recv() => Local::Resized,
            };
            if to.send(local).await.is_err() {
                return;
            }
        }
    });
    Some(AbortOnDrop(task))
}

/// Aborts its task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_read_as_people_write_them() {
        assert_eq!(span(0.4), "0s");
        assert_eq!(span(59.9), "59s");
        assert_eq!(span(185.0), "3m 05s");
        assert_eq!(span(7800.0), "2h 10m");
        assert_eq!(span(-3.0), "0s");
    }

    /// Only a directory named as a live server names it: this process is
    /// one, with its own start time; another start time is a reused pid.
    #[test]
    fn only_live_servers_directories_are_found() {
        let me = std::process::id();
        let start = start_ticks(me).expect("our start");
        assert_eq!(live_server(&format!("{me}-{start}-0a1b2c3d")), Some(me));
        assert_eq!(live_server(&format!("{me}-{}-0a1b2c3d", start + 1)), None);
        for bad in [format!("{me}-{start}"), format!("{me}-{start}-0A1B2C3D"), "output".into()] {
            assert_eq!(live_server(&bad), None, "{bad}");
        }
    }

    #[test]
    fn a_smaller_terminal_is_told_and_a_larger_one_is_not() {
        let session = Window { rows: 50, cols: 120 };
        let both = size_words(Some(Window { rows: 24, cols: 80 }), session).expect("smaller");
        assert!(both.contains("(80x24)") && both.contains("(120x50)"), "{both}");
        assert!(both.contains("wrap") && both.contains("lower rows"), "{both}");
        let narrow = size_words(Some(Window { rows: 60, cols: 100 }), session).expect("narrower");
        assert!(narrow.contains("wrap") && !narrow.contains("rows"), "{narrow}");
        let short = size_words(Some(Window { rows: 40, cols: 200 }), session).expect("shorter");
        assert!(!short.contains("wrap") && short.contains("lower rows"), "{short}");
        assert_eq!(size_words(Some(Window { rows: 50, cols: 120 }), session), None);
        assert_eq!(size_words(None, session), None);
    }
}
