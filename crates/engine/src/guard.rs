//! The orphan guard: a separate process that outlives the server and stops
//! whatever the server was running when the server dies. Every child of the
//! server gets a parent-death signal, but that reaches only the direct child:
//! a `sleep 300 &` started by a command, or the jobs of a PTY session, would
//! survive a server killed with SIGKILL. [`Guard`] is the server's handle,
//! which tells the guard over a Unix socket pair what is live; [`serve`] is
//! the guard process's whole life.
//!
//! Not for: deciding what to watch (the runner and the sessions do), nor
//! building processes or sending signals (`process` does both), nor stopping
//! what the server ran when it ends normally (the server does that itself).
//!
//! Invariants: commands, which run as the same user, cannot reach, blind or
//! steer the guard (non-dumpable, close-on-exec ends, `SO_PEERCRED`, the
//! token never on a command line: [`serve`], [`Guard::spawn_with_token`]).
//! The server never blocks on its guard ([`OUTBOX_LIMIT`]). When the server is
//! gone, everything is stopped before anything is killed ([`serve`]). A guard
//! that is replaced, given up or never started is told in every session's
//! next reply ([`Guard::take_notice`]).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::ffi::OsString;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, mpsc};
use std::time::{Duration, Instant};

use crate::private_fs;
use crate::process::{self, Mark, Targets, TerminationMode};

/// The longest line the guard accepts (a control group's path is the
/// longest thing the server sends); longer ones are ignored, and so is,
/// with a logged warning, a line it does not understand.
pub(crate) const LINE_LIMIT: usize = 4096;

/// A guard that dies this soon after it started, this many times in a row,
/// is not started again: it cannot run (its executable was replaced, say),
/// or something kills it as soon as it starts. Every session's next reply
/// says it was given up, and the server still stops everything itself when
/// it ends normally.
const SHORT_LIFE: Duration = Duration::from_secs(1);
const SHORT_LIVES_BEFORE_GIVING_UP: u32 = 5;

/// Bytes the server queues for a guard that does not read them (it is
/// stopped, say) before it stops queueing and later sends the whole list
/// again instead: the server never blocks on its guard.
const OUTBOX_LIMIT: usize = 256 * 1024;

/// Adopted orphans the guard is told about at most ([`Guard::watch_trees`]).
pub(crate) const TREES_LIMIT: usize = 1024;

/// Notices kept for one reader that has not replied for a while.
const NOTICES_PER_READER: usize = 8;
/// Readers (session names) remembered for notices.
const READERS_LIMIT: usize = 1024;

/// The server's handle on its orphan guard process.
///
/// Telling the guard what to watch is a non-blocking write of a few bytes,
/// cheap enough to call from async code. The handle remembers what is
/// watched, so that a guard that died can be replaced and told everything
/// again; a thread of its own waits for the guard and does that. A missing
/// safety net never breaks the server: failures are logged and kept as a
/// notice. Dropping the handle closes the socket, which tells the guard the
/// server has ended.
#[derive(Debug)]
pub struct Guard {
    shared: Arc<Mutex<GuardState>>,
    /// Where the waiting thread sends the guard's exit status once the
    /// handle closed its channel (or it gave up restarting it).
    finished: Mutex<Option<mpsc::Receiver<io::Result<ExitStatus>>>>,
}

/// What the handle and its waiting thread share.
#[derive(Debug)]
struct GuardState {
    /// The server's end of the current guard's channel; `None` once closed,
    /// or while a dead guard is being replaced.
    channel: Option<Channel>,
    /// The current guard's process id.
    pid: u32,
    /// Set once the guard is given up: no guard runs any more.
    given_up: bool,
    /// The server's scope token, the first thing every guard is told.
    token: Option<String>,
    /// Everything watched, to tell a replacement guard.
    watched: BTreeSet<Target>,
    /// Set when the handle closes the channel on purpose: the guard's exit
    /// is then expected.
    closing: bool,
    /// What happened to the guard that replies should mention.
    notices: Notices,
}

impl Guard {
    /// Starts `program args` as the orphan guard, with no scope token (tests
    /// start stand-ins this way). See [`Guard::spawn_with_token`].
    pub fn spawn(program: &Path, args: &[&str]) -> io::Result<Guard> {
        Guard::spawn_with_token(program, args, None)
    }

    /// Starts `program args` as the orphan guard (the server passes its own
    /// executable and its hidden guard subcommand) and tells it `token`
    /// first, over the channel: never on its command line, where every
    /// user can read it. The guard gets its own process group and no
    /// parent-death signal from us, so it outlives the server. It is started
    /// by the handle's own thread, which lives as long as the guard is
    /// wanted: a parent-death signal the guard asks for is tied to that
    /// thread.
    pub fn spawn_with_token(
        program: &Path,
        args: &[&str],
        token: Option<&str>,
    ) -> io::Result<Guard> {
        let state = GuardState {
            channel: None,
            pid: 0,
            given_up: false,
            token: token.map(str::to_owned),
            watched: BTreeSet::new(),
            closing: false,
            notices: Notices::default(),
        };
        let shared = Arc::new(Mutex::new(state));
        let (sender, receiver) = mpsc::channel();
        let (started_sender, started) = mpsc::sync_channel(1);
        let keeper = Keeper {
            shared: Arc::clone(&shared),
            program: program.to_owned(),
            args: args.iter().map(OsString::from).collect(),
        };
        std::thread::Builder::new()
            .name("shellkeep-guard-keeper".into())
            .spawn(move || keeper.run(&started_sender, &sender))?;
        match started.recv() {
            Ok(Ok(())) => Ok(Guard { shared, finished: Mutex::new(Some(receiver)) }),
            Ok(Err(err)) => Err(err),
            Err(_) => Err(io::Error::other("the orphan guard's keeper thread ended at once")),
        }
    }

    /// A handle with no guard behind it, for a server whose guard could not
    /// start (`reason`): it watches nothing, and every session's next reply
    /// says that a server SIGKILL may leave processes behind.
    pub fn unavailable(reason: &str) -> Guard {
        let notice = format!(
            "[The orphan guard could not be started ({reason}). If the server is killed, what \
             its sessions run may be left behind; a normal end of the server still stops \
             everything.]"
        );
        tracing::error!("{notice}");
        let mut notices = Notices::default();
        notices.give_up(notice);
        let state = GuardState {
            channel: None,
            pid: 0,
            given_up: true,
            token: None,
            watched: BTreeSet::new(),
            closing: false,
            notices,
        };
        Guard { shared: Arc::new(Mutex::new(state)), finished: Mutex::new(None) }
    }

    fn lock(&self) -> MutexGuard<'_, GuardState> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The current guard's process id (the last one's, once given up; 0 if
    /// none ever started).
    pub fn pid(&self) -> u32 {
        self.lock().pid
    }

    /// The current guard's process id, or `None` once no guard runs (given
    /// up): the server then must not spare that pid when it stops
    /// everything, since it may belong to anything by now.
    pub fn live_pid(&self) -> Option<u32> {
        let state = self.lock();
        (!state.given_up).then_some(state.pid)
    }

    /// Whether a guard is listening, as far as we know: false once a write
    /// to it has failed and no replacement has taken over.
    pub fn is_connected(&self) -> bool {
        self.lock().channel.is_some()
    }

    /// What happened to the guard that `reader` (a session's name, or the
    /// kind of reply for replies of no session) has not been told yet,
    /// worded for an agent; `None` if nothing. A guard that was given up is
    /// told to every reader once, readers that appear later included.
    pub fn take_notice(&self, reader: &str) -> Option<String> {
        self.lock().notices.take(reader)
    }

    /// Asks the guard to stop process group `pgid` if the server dies.
    pub fn watch_group(&self, pgid: i32) {
        self.send(Message::Watch(Target::Group(pgid)));
    }

    /// Tells the guard process group `pgid` has ended and needs no watching.
    pub fn forget_group(&self, pgid: i32) {
        self.send(Message::Forget(Target::Group(pgid)));
    }

    /// Asks the guard to stop every process group in session `sid` if the
    /// server dies.
    pub fn watch_session(&self, sid: i32) {
        self.send(Message::Watch(Target::Session(sid)));
    }

    /// Tells the guard session `sid` has ended and needs no watching.
    pub fn forget_session(&self, sid: i32) {
        self.send(Message::Forget(Target::Session(sid)));
    }

    /// Asks the guard to kill everything in control group `dir` (and its
    /// descendants) if the server dies, then remove them. A path the
    /// protocol cannot carry (relative, with `..`, a line feed, too long)
    /// is refused and logged.
    pub fn watch_cgroup(&self, dir: &Path) {
        if let Some(target) = Target::cgroup(dir) {
            self.send(Message::Watch(target));
        }
    }

    /// Tells the guard control group `dir` needs no watching.
    pub fn forget_cgroup(&self, dir: &Path) {
        if let Some(target) = Target::cgroup(dir) {
            self.send(Message::Forget(target));
        }
    }

    /// Asks the guard to stop each of `roots` (orphans the server adopted
    /// that only their ancestry ties to it) and its descendants if the
    /// server dies, and to forget the roots watched so far that are not
    /// among them (they ended). At most [`TREES_LIMIT`] are watched.
    pub fn watch_trees(&self, roots: &[process::Root]) {
        if roots.len() > TREES_LIMIT {
            tracing::warn!(
                roots = roots.len(),
                limit = TREES_LIMIT,
                "too many adopted orphans to tell the orphan guard about; the rest are found by \
                 their marker or control group only"
            );
        }
        let wanted: BTreeSet<Target> = roots
            .iter()
            .take(TREES_LIMIT)
            .map(|root| Target::Tree(root.pid(), root.start_ticks()))
            .collect();
        let current: BTreeSet<Target> = {
            let state = self.lock();
            state
                .watched
                .iter()
                .filter(|target| matches!(target, Target::Tree(..)))
                .cloned()
                .collect()
        };
        for gone in current.difference(&wanted) {
            self.send(Message::Forget(gone.clone()));
        }
        for new in wanted.difference(&current) {
            if let Target::Tree(pid, _) = new {
                if crate::cgroup::server_dir().is_some() {
                    tracing::info!(
                        "pid {pid} left the server's control groups; the orphan guard will stop \
                         it if the server dies"
                    );
                } else {
                    tracing::debug!("the orphan guard watches the adopted orphan pid {pid}");
                }
            }
            self.send(Message::Watch(new.clone()));
        }
    }

    /// Closes the guard's channel and waits up to `wait` for it to exit.
    /// Returns its exit status, or `None` if it had not exited by then (it
    /// is then reaped in the background whenever it does) or no guard ran.
    ///
    /// On a clean shutdown the server has already stopped what it ran, so
    /// the guard finds nothing alive and exits at once.
    pub fn shutdown(self, wait: Duration) -> Option<ExitStatus> {
        self.send(Message::End);
        self.close_channel();
        let finished = self.finished.lock().unwrap_or_else(PoisonError::into_inner).take()?;
        match finished.recv_timeout(wait) {
            Ok(Ok(status)) => Some(status),
            Ok(Err(err)) => {
                tracing::warn!(%err, "could not wait for the orphan guard");
                None
            }
            Err(_) => None,
        }
    }

    fn send(&self, message: Message) {
        let mut state = self.lock();
        let state = &mut *state;
        match &message {
            Message::Watch(target) => state.watched.insert(target.clone()),
            Message::Forget(target) => state.watched.remove(target),
            Message::Scope(_) | Message::Reset | Message::End => false,
        };
        let pid = state.pid;
        let Some(channel) = state.channel.as_mut() else { return };
        if let Err(err) = channel.send(&message.line(), &state.watched) {
            // The keeper thread sees the guard die and replaces it, telling
            // the new one everything watched, this included.
            tracing::debug!(pid, %err, "the orphan guard stopped listening");
            state.channel = None;
        }
    }

    /// Closing the channel is the guard's signal that the server has ended.
    fn close_channel(&self) {
        let mut state = self.lock();
        state.closing = true;
        if let Some(mut channel) = state.channel.take() {
            // What is queued, and everything watched if it fell behind, for
            // up to a second: a guard that still does not read learns the
            // rest from the processes' token.
            if channel.behind {
                channel.outbox.extend_from_slice(briefing(None, &state.watched, true).as_bytes());
            }
            let blocking = channel.stream.set_nonblocking(false);
            let timeout = channel.stream.set_write_timeout(Some(Duration::from_secs(1)));
            if blocking.and(timeout).is_ok() {
                let _ = channel.flush();
            }
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        // The keeper thread reaps the guard whenever it exits, so dropping
        // never blocks and the guard never stays a zombie.
        self.close_channel();
    }
}

/// The server's end of a guard's channel, with what it has not taken yet.
#[derive(Debug)]
struct Channel {
    /// Non-blocking and close-on-exec.
    stream: UnixStream,
    /// Lines written but not yet taken by the socket.
    outbox: Vec<u8>,
    /// Set when lines were dropped because the outbox was full: once it
    /// empties, the guard is told `reset` and everything watched.
    behind: bool,
}

impl Channel {
    /// Queues `line` and writes what the socket takes. Errors only when the
    /// guard is gone.
    fn send(&mut self, line: &str, watched: &BTreeSet<Target>) -> io::Result<()> {
        if self.behind || self.outbox.len() + line.len() > OUTBOX_LIMIT {
            if !self.behind {
                tracing::warn!(
                    "the orphan guard is not reading (stopped?); it will be told everything \
                     watched once it reads again"
                );
            }
            self.behind = true;
        } else {
            self.outbox.extend_from_slice(line.as_bytes());
        }
        self.flush()?;
        if self.behind && self.outbox.is_empty() {
            self.behind = false;
            self.outbox = briefing(None, watched, true).into_bytes();
            self.flush()?;
        }
        Ok(())
    }

    /// Writes what the socket takes without blocking.
    fn flush(&mut self) -> io::Result<()> {
        while !self.outbox.is_empty() {
            match self.stream.write(&self.outbox) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(written) => {
                    self.outbox.drain(..written);
                }
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) => return Err(err),
            }
        }
        Ok(())
    }
}

/// The lines that tell a guard `token` (if any), then everything watched,
/// after a `reset` when `reset`.
fn briefing(token: Option<&str>, watched: &BTreeSet<Target>, reset: bool) -> String {
    let mut lines = String::new();
    if let Some(token) = token {
        lines.push_str(&Message::Scope(token.to_owned()).line());
    }
    if reset {
        lines.push_str(&Message::Reset.line());
    }
    for target in watched {
        lines.push_str(&Message::Watch(target.clone()).line());
    }
    lines
}

/// What happened to the guard, for each reader that has not been told.
#[derive(Debug, Default)]
struct Notices {
    /// Notices each known reader has not been told yet (at most
    /// [`NOTICES_PER_READER`], the latest).
    pending: HashMap<String, Vec<String>>,
    /// Why the guard was given up, once it was: every reader is told once.
    given_up: Option<String>,
    /// Readers told that the guard was given up.
    told_given_up: HashSet<String>,
}

impl Notices {
    /// Keeps `notice` for every known reader.
    fn post(&mut self, notice: &str) {
        for queue in self.pending.values_mut() {
            if queue.len() >= NOTICES_PER_READER {
                queue.remove(0);
            }
            queue.push(notice.to_owned());
        }
    }

    /// Keeps `notice` for every reader, those not known yet included.
    fn give_up(&mut self, notice: String) {
        self.given_up = Some(notice);
    }

    fn take(&mut self, reader: &str) -> Option<String> {
        if !self.pending.contains_key(reader) {
            if self.pending.len() >= READERS_LIMIT {
                self.pending.retain(|_, queue| !queue.is_empty());
            }
            self.pending.insert(reader.to_owned(), Vec::new());
        }
        let mut notices = self.pending.get_mut(reader).map(std::mem::take).unwrap_or_default();
        if let Some(given_up) = &self.given_up {
            if self.told_given_up.len() >= READERS_LIMIT {
                // Telling a reader twice beats remembering without bound.
                self.told_given_up.clear();
            }
            if self.told_given_up.insert(reader.to_owned()) {
                notices.push(given_up.clone());
            }
        }
        (!notices.is_empty()).then(|| notices.join("\n"))
    }
}

/// The thread that starts the guard, waits for it and replaces it when it
/// dies before the handle closed its channel.
///
/// A command can still stop or kill the guard (SIGSTOP, SIGKILL). Since
/// this thread waits for it, stops included, it notices at once: a stopped
/// guard is continued, a dead one replaced by a new one that is told
/// everything watched; either is logged and kept as a notice for the next
/// reply of every session. One that keeps dying at once is given up
/// ([`SHORT_LIFE`]).
struct Keeper {
    shared: Arc<Mutex<GuardState>>,
    program: PathBuf,
    args: Vec<OsString>,
}

impl Keeper {
    fn lock(&self) -> MutexGuard<'_, GuardState> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn run(
        self,
        started: &mpsc::SyncSender<io::Result<()>>,
        finished: &mpsc::Sender<io::Result<ExitStatus>>,
    ) {
        let first = {
            let mut state = self.lock();
            self.start(&mut state)
        };
        let mut child = match first {
            Ok(child) => {
                tracing::debug!(pid = child.id(), program = %self.program.display(), "started the orphan guard");
                let _ = started.send(Ok(()));
                child
            }
            Err(err) => {
                let _ = started.send(Err(err));
                return;
            }
        };
        let mut short_lives = 0;
        loop {
            let started = Instant::now();
            let status = self.wait_continuing(child.id());
            drop(child);
            let mut state = self.lock();
            if state.closing {
                let _ = finished.send(status);
                return;
            }
            state.channel = None;
            let old = state.pid;
            let how = match &status {
                Ok(status) => status.to_string(),
                Err(err) => format!("could not be waited for: {err}"),
            };
            short_lives = if started.elapsed() < SHORT_LIFE { short_lives + 1 } else { 0 };
            if short_lives >= SHORT_LIVES_BEFORE_GIVING_UP {
                let notice = format!(
                    "[The orphan guard (pid {old}) kept ending at once ({how}, \
                     {SHORT_LIVES_BEFORE_GIVING_UP} times in a row, perhaps killed by a command); \
                     it is not restarted again. If the server is killed, what its sessions run \
                     may be left behind; a normal end of the server still stops everything.]"
                );
                self.give_up(&mut state, notice, status, finished);
                return;
            }
            match self.start(&mut state) {
                Ok(new) => {
                    let notice = format!(
                        "[The orphan guard (pid {old}) ended unexpectedly ({how}); a new one \
                         (pid {}) took over.]",
                        state.pid
                    );
                    tracing::warn!("{notice}");
                    state.notices.post(&notice);
                    child = new;
                }
                Err(err) => {
                    let notice = format!(
                        "[The orphan guard (pid {old}) ended unexpectedly ({how}) and could not \
                         be restarted ({err}). If the server is killed, what its sessions run \
                         may be left behind; a normal end of the server still stops everything.]"
                    );
                    self.give_up(&mut state, notice, status, finished);
                    return;
                }
            }
        }
    }

    /// Waits for the guard `pid` to exit and returns how it did. A guard
    /// stopped meanwhile (SIGSTOP from a command: stopped, it could not act
    /// on the server's death) is continued at once, and every reader is
    /// told.
    fn wait_continuing(&self, pid: u32) -> io::Result<ExitStatus> {
        use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
        use std::os::unix::process::ExitStatusExt as _;
        let guard = nix::unistd::Pid::from_raw(pid as i32);
        loop {
            match waitpid(guard, Some(WaitPidFlag::WUNTRACED)) {
                Ok(WaitStatus::Exited(_, code)) => return Ok(ExitStatus::from_raw(code << 8)),
                Ok(WaitStatus::Signaled(_, signal, core)) => {
                    return Ok(ExitStatus::from_raw(signal as i32 | if core { 0x80 } else { 0 }));
                }
                Ok(WaitStatus::Stopped(_, signal)) => {
                    // Its own group: the guard alone.
                    process::signal_group(pid as i32, nix::sys::signal::Signal::SIGCONT);
                    let notice = format!(
                        "[The orphan guard (pid {pid}) was stopped ({signal}), perhaps by a \
                         command; it was continued at once.]"
                    );
                    tracing::warn!("{notice}");
                    self.lock().notices.post(&notice);
                }
                Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                Err(err) => return Err(err.into()),
            }
        }
    }

    fn give_up(
        &self,
        state: &mut GuardState,
        notice: String,
        status: io::Result<ExitStatus>,
        finished: &mpsc::Sender<io::Result<ExitStatus>>,
    ) {
        tracing::error!("{notice}");
        state.given_up = true;
        state.notices.give_up(notice);
        let _ = finished.send(status);
    }

    /// Starts one guard with a fresh channel and tells it the token and
    /// everything watched. The guard's end of the pair becomes its stdin;
    /// the server keeps no copy of it, so the guard reads end of file once
    /// the server's end is closed. Both ends are close-on-exec in the server
    /// (itself not dumpable), so no command inherits either.
    fn start(&self, state: &mut GuardState) -> io::Result<Child> {
        // Both ends are close-on-exec: no other child inherits either.
        let (server_end, guard_end) = UnixStream::pair()?;
        let mut command = process::guard_command(&self.program);
        command.args(&self.args).stdin(Stdio::from(OwnedFd::from(guard_end)));
        let child = process::spawn_std(&mut command)?;
        drop(command);
        server_end.set_nonblocking(true)?;
        let mut channel = Channel { stream: server_end, outbox: Vec::new(), behind: false };
        channel.outbox = briefing(state.token.as_deref(), &state.watched, false).into_bytes();
        if let Err(err) = channel.flush() {
            tracing::warn!(%err, "could not brief the new orphan guard");
        } else {
            state.channel = Some(channel);
        }
        state.pid = child.id();
        Ok(child)
    }
}

/// What the guard process is given on its command line: nothing secret
/// (the runtime directory is the one thing given there).
#[derive(Debug, Clone, Default)]
pub struct GuardOptions {
    /// The server's runtime directory, removed once the server is gone.
    pub runtime_dir: Option<PathBuf>,
}

/// The guard process's whole life, run by the server binary's hidden guard
/// subcommand with its end of the channel from the server (its stdin).
///
/// Commands run as the same user as the guard; they must not reach, blind
/// or steer it. First, before reading anything, it makes itself
/// non-dumpable, so that its `/proc/PID/fd`, memory and environment belong
/// to root (a socket, unlike a pipe, cannot be reopened through `/proc`
/// anyway); its end of the channel is a close-on-exec copy
/// (`process::guard_channel_from_stdin`). It ignores SIGINT and SIGHUP (a
/// ^C or a closing terminal must not take the safety net down before the
/// server), blocks SIGTERM and asks for it as its parent-death signal, read
/// through a `signalfd` (so a command's `kill` cannot end the guard with it
/// either), and checks (`SO_PEERCRED`) that the other end of `channel` is
/// its parent, of its user.
///
/// Then it records what the server watches and forgets until the server is
/// gone, which it notices three ways so that no held descriptor can hide
/// it: end of file, the parent-death signal, or a parent that is not the
/// server any more ([`watch_until_gone`]). Then it ends every process in
/// each watched control group (`cgroup.kill`), every process carrying the
/// server's token in its environment, every process group still watched
/// and every process in each watched session, with no grace: all stopped
/// first (SIGSTOP, or killed as a control group), then killed
/// ([`process::stop_then_kill`]), so that none can fork, or kill the guard,
/// in between. Then it removes the runtime directory and exits. It returns
/// how the processes went away (`None` when nothing was alive), or an error
/// if it could not start.
pub fn serve(channel: OwnedFd, options: &GuardOptions) -> io::Result<Option<TerminationMode>> {
    // Before anything else: from here on, no process of our user can open
    // our descriptors through /proc, take them with pidfd_getfd, or read
    // our memory.
    if let Err(err) = private_fs::make_process_undumpable() {
        tracing::warn!(%err, "the orphan guard could not make itself non-dumpable");
    }
    let channel = UnixStream::from(channel);
    if let Err(err) = process::ignore_interrupt_and_hangup() {
        // A guard that a ^C can kill still beats no guard.
        tracing::warn!(%err, "the orphan guard could not ignore SIGINT and SIGHUP");
    }
    let wake = process::parent_death_wakeup()?;
    let parent = nix::unistd::getppid().as_raw();
    let (peer, peer_uid) = process::peer_credentials(&channel)?;
    if peer_uid != private_fs::euid() {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("the orphan guard's channel belongs to user {peer_uid}; refusing it"),
        ));
    }
    if peer != parent {
        // Either the server died before we got here (we were adopted), or
        // whoever started us is not the end of the channel: both mean the
        // server is gone as far as we are concerned.
        tracing::warn!(peer, parent, "the orphan guard's parent is not the end of its channel");
    }
    let server_alive = move || nix::unistd::getppid().as_raw() == peer;
    let mode = watch_until_gone(&channel, Some(wake.as_fd()), &server_alive)?;
    if let Some(dir) = &options.runtime_dir {
        remove_runtime_dir(dir);
    }
    Ok(mode)
}

/// Removes the server's runtime directory, if it is a real directory (not a
/// symbolic link) owned by us.
fn remove_runtime_dir(dir: &Path) {
    use std::os::unix::fs::MetadataExt as _;
    let Ok(meta) = std::fs::symlink_metadata(dir) else { return };
    if !meta.is_dir() || meta.uid() != private_fs::euid() {
        tracing::warn!(dir = %dir.display(), "not removing a runtime directory that is not ours");
        return;
    }
    if let Err(err) = std::fs::remove_dir_all(dir) {
        tracing::warn!(dir = %dir.display(), %err, "could not remove the server's runtime directory");
    }
}

/// What the server has told the guard so far, and the line being read.
#[derive(Debug, Default)]
struct Orders {
    token: Option<String>,
    watched: BTreeSet<Target>,
    /// The start of a line whose end has not arrived yet.
    partial: Vec<u8>,
    /// Set while the rest of an over-long line is skipped.
    skipping: bool,
    /// Set when the server said it is ending normally.
    ended: bool,
}

/// What reading the channel found.
#[derive(Debug, PartialEq, Eq)]
enum Drained {
    /// Everything there was, for now.
    All,
    /// End of file (or a read error): the server is gone.
    Closed,
}

impl Orders {
    /// Reads what `channel` (non-blocking) holds and applies its lines.
    fn read(&mut self, mut channel: &UnixStream) -> Drained {
        let mut buffer = [0u8; 8192];
        loop {
            match channel.read(&mut buffer) {
                Ok(0) => return Drained::Closed,
                Ok(read) => self.feed(&buffer[..read]),
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => return Drained::All,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) => {
                    tracing::warn!(%err, "the orphan guard lost its channel; treating the server as gone");
                    return Drained::Closed;
                }
            }
        }
    }

    /// Applies the complete lines in `bytes`, keeping an unfinished one.
    fn feed(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let end = memchr::memchr(b'\n', bytes);
            let (part, rest) = match end {
                Some(at) => (&bytes[..at], &bytes[at + 1..]),
                None => (bytes, &[][..]),
            };
            bytes = rest;
            if !self.skipping {
                self.partial.extend_from_slice(part);
                if self.partial.len() > LINE_LIMIT {
                    tracing::warn!(
                        limit = LINE_LIMIT,
                        "the orphan guard ignored a line over its length limit"
                    );
                    self.partial.clear();
                    self.skipping = true;
                }
            }
            if end.is_some() {
                if !self.skipping {
                    let line = std::mem::take(&mut self.partial);
                    self.apply(&line);
                }
                self.skipping = false;
            }
        }
    }

    fn apply(&mut self, line: &[u8]) {
        match Message::parse(line) {
            Some(Message::Scope(token)) if self.token.is_none() => self.token = Some(token),
            Some(Message::Scope(_)) => {
                tracing::warn!("the orphan guard ignored a second scope token");
            }
            Some(Message::Reset) => self.watched.clear(),
            Some(Message::End) => self.ended = true,
            Some(Message::Watch(target)) => {
                self.watched.insert(target);
            }
            Some(Message::Forget(target)) => {
                self.watched.remove(&target);
            }
            None => tracing::warn!(
                line = %String::from_utf8_lossy(line),
                "the orphan guard ignored a line it does not understand"
            ),
        }
    }
}

/// The guard's loop, without what [`serve`] does to the process (which
/// would leak into every later child of a test binary): reads `channel`
/// until the server is gone, then ends what it was told to, with no grace.
///
/// The server is gone when `channel` ends, or when `server_alive` says so:
/// at start, and whenever the loop wakes (a message, or `wake` becoming
/// readable: the parent-death signal). What is still queued on the channel
/// is read before acting on it: the server may have died just after
/// writing.
fn watch_until_gone(
    channel: &UnixStream,
    wake: Option<std::os::fd::BorrowedFd<'_>>,
    server_alive: &dyn Fn() -> bool,
) -> io::Result<Option<TerminationMode>> {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    channel.set_nonblocking(true)?;
    let mut orders = Orders::default();
    loop {
        if !server_alive() {
            tracing::info!("the orphan guard's server is gone");
            orders.read(channel);
            break;
        }
        let mut fds = vec![PollFd::new(channel.as_fd(), PollFlags::POLLIN)];
        fds.extend(wake.map(|wake| PollFd::new(wake, PollFlags::POLLIN)));
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(err) => {
                tracing::warn!(%err, "the orphan guard cannot wait; treating the server as gone");
                orders.read(channel);
                break;
            }
        }
        let woken = fds.get(1).and_then(PollFd::revents).is_some_and(|r| !r.is_empty());
        drop(fds);
        if woken && let Some(wake) = wake {
            drain(wake);
        }
        if orders.read(channel) == Drained::Closed {
            break;
        }
    }
    let Orders { token, watched, ended, .. } = orders;
    if !ended {
        // A server that ends normally says so first; one that did not was
        // killed or crashed: worth a line in the client's log, with or
        // without an audit log.
        tracing::warn!(
            "the server is gone without ending normally (killed or crashed); stopping what it \
             left running"
        );
    }
    let cgroups: Vec<&Path> = watched
        .iter()
        .filter_map(|target| match target {
            Target::Cgroup(dir) => Some(dir.as_path()),
            _ => None,
        })
        .collect();
    let targets = targets_to_stop(&watched, token.as_deref());
    for dir in &cgroups {
        // Killed at once, whatever its processes did to themselves, and
        // removed; what left the groups is stopped with the rest.
        stop_cgroup(dir);
    }
    // No grace: a process that got SIGTERM could fork, or kill the guard,
    // before its SIGKILL. Everything is stopped first, then killed.
    let mode = process::stop_then_kill(&targets);
    match mode {
        None => tracing::debug!("the server has ended and left nothing running"),
        Some(_) => tracing::info!("stopped and killed what the server left running"),
    }
    Ok(mode)
}

/// Reads everything `wake` (non-blocking: a `signalfd`, or a socket in
/// tests) holds, so that `poll` sleeps again.
fn drain(wake: std::os::fd::BorrowedFd<'_>) {
    // A signalfd hands out whole 128-byte records.
    let mut buffer = [0u8; 1024];
    while let Ok(read) = nix::unistd::read(wake, &mut buffer) {
        if read == 0 {
            break;
        }
    }
}

/// Everything to stop for `watched` and the server's `token`, control
/// groups aside.
fn targets_to_stop(watched: &BTreeSet<Target>, token: Option<&str>) -> Targets {
    let mut targets = Targets::default();
    for target in watched {
        match target {
            Target::Group(pgid) => targets.groups.push(*pgid),
            Target::Session(sid) => targets.sessions.push(*sid),
            Target::Tree(pid, start) => targets.roots.push(process::Root::at(*pid, *start)),
            Target::Cgroup(_) => {}
        }
    }
    targets.marks.extend(token.map(|token| Mark::Token(token.to_owned())));
    targets
}

/// Kills everything in the control-group directory `dir` and the groups
/// below it, and removes them (`cgroup::kill_tree`, v2 or v1). Only a
/// directory with a `cgroup.procs` file is touched: a watched path that is
/// not a control group is left alone. A directory that is gone (the server
/// removed its groups as it ended normally) left nothing behind: that is
/// only logged at debug level.
fn stop_cgroup(dir: &Path) {
    if !dir.join("cgroup.procs").is_file() {
        if std::fs::symlink_metadata(dir).is_err() {
            tracing::debug!(dir = %dir.display(), "the control group is already gone");
        } else {
            tracing::warn!(dir = %dir.display(), "not a control group; left alone");
        }
        return;
    }
    if let Err(err) = crate::cgroup::kill_tree(dir) {
        tracing::warn!(dir = %dir.display(), %err, "could not stop a control group");
    }
}

/// One line of the protocol between the server and its guard, one per
/// event: `scope TOKEN` (first), `+g PGID` and `-g PGID` watch and forget a
/// process group, `+s SID` and `-s SID` a session, `+p PID START` and
/// `-p PID START` a process (by its start time) and its descendants,
/// `+c DIR` and `-c DIR` a control-group directory; then `reset` and `end`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Message {
    /// The server's scope token.
    Scope(String),
    /// Forget everything watched. The server sends it before telling a
    /// guard that fell behind the whole list again.
    Reset,
    /// The server is ending normally and has stopped what it ran. A server
    /// gone without it was killed or crashed, and the guard logs a warning
    /// saying so.
    End,
    Watch(Target),
    Forget(Target),
}

/// What the guard can watch.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Target {
    Group(i32),
    Session(i32),
    /// A process, by pid and start time, and its descendants.
    Tree(i32, u64),
    /// A control group's directory: absolute, no `.` or `..`, no line
    /// feed, at most [`LINE_LIMIT`] bytes with its line.
    Cgroup(PathBuf),
}

impl Target {
    /// A control-group target for `dir`, if the protocol can carry it.
    fn cgroup(dir: &Path) -> Option<Target> {
        let target = dir.to_str().and_then(Target::parse_cgroup);
        if target.is_none() {
            tracing::warn!(dir = %dir.display(), "a control group the orphan guard cannot be told about");
        }
        target
    }

    fn parse_cgroup(dir: &str) -> Option<Target> {
        let plain = dir.len() + 4 <= LINE_LIMIT
            && !dir.contains(['\n', '\0'])
            && dir.strip_prefix('/').is_some_and(|relative| {
                relative.split('/').all(|name| !matches!(name, "" | "." | ".."))
            });
        plain.then(|| Target::Cgroup(PathBuf::from(dir)))
    }
}

impl Message {
    /// The line for this message, newline included.
    fn line(&self) -> String {
        let (sign, target) = match self {
            Message::Scope(token) => return format!("scope {token}\n"),
            Message::Reset => return "reset\n".to_owned(),
            Message::End => return "end\n".to_owned(),
            Message::Watch(target) => ('+', target),
            Message::Forget(target) => ('-', target),
        };
        match target {
            Target::Group(pgid) => format!("{sign}g {pgid}\n"),
            Target::Session(sid) => format!("{sign}s {sid}\n"),
            Target::Tree(pid, start) => format!("{sign}p {pid} {start}\n"),
            Target::Cgroup(dir) => format!("{sign}c {}\n", dir.display()),
        }
    }

    /// Parses one line (without its line feed). Ids 0 and 1 are refused:
    /// signalling those would reach our own group or init. A token is 1 to
    /// 64 letters, digits, `-` or `_`.
    fn parse(line: &[u8]) -> Option<Message> {
        let line = std::str::from_utf8(line).ok()?;
        match line {
            "reset" => return Some(Message::Reset),
            "end" => return Some(Message::End),
            _ => {}
        }
        let (head, rest) = line.split_once(' ')?;
        if head == "scope" {
            let plain = (1..=64).contains(&rest.len())
                && rest.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
            return plain.then(|| Message::Scope(rest.to_owned()));
        }
        let id = || rest.parse::<i32>().ok().filter(|&id| id > 1);
        let target = match head.get(1..)? {
            "g" => Target::Group(id()?),
            "s" => Target::Session(id()?),
            "p" => {
                let (pid, start) = rest.split_once(' ')?;
                let pid = pid.parse::<i32>().ok().filter(|&pid| pid > 1)?;
                Target::Tree(pid, start.parse().ok()?)
            }
            "c" => Target::parse_cgroup(rest)?,
            _ => return None,
        };
        match head.get(..1)? {
            "+" => Some(Message::Watch(target)),
            "-" => Some(Message::Forget(target)),
            _ => None,
        }
    }
}

#[cfg(test)]
#[allow(
    clippy::disallowed_methods,
    reason = "the tests start and kill guards and victims of their own"
)]
mod tests {
    use std::process::Stdio;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Instant;

    use tokio::io::AsyncBufReadExt;

    use super::*;
    use crate::process::Scope;

    /// Waits until `done` holds or `limit` passes; returns whether it held.
    fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if done() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        done()
    }

    type LoopResult = io::Result<Option<TerminationMode>>;

    /// Runs the guard loop on a thread, fed by the returned socket, with a
    /// server that stays alive; its result arrives on the returned channel
    /// once the socket is dropped.
    fn start_guard_loop() -> (UnixStream, mpsc::Receiver<LoopResult>) {
        let (server_end, guard_end) = UnixStream::pair().expect("socket pair");
        let (sender, receiver) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = sender.send(watch_until_gone(&guard_end, None, &|| true));
        });
        (server_end, receiver)
    }

    /// The lines of `messages`, as the server writes them.
    fn lines(messages: &[Message]) -> String {
        messages.iter().map(Message::line).collect()
    }

    #[test]
    fn protocol_lines_round_trip() {
        let messages = [
            Message::Scope("0a1b2c".to_owned()),
            Message::Reset,
            Message::End,
            Message::Watch(Target::Group(123)),
            Message::Forget(Target::Group(123)),
            Message::Watch(Target::Session(456)),
            Message::Forget(Target::Session(456)),
            Message::Watch(Target::Tree(789, 123_456)),
            Message::Forget(Target::Tree(789, 1)),
            Message::Watch(Target::Cgroup("/sys/fs/cgroup/a b/shellkeep-1".into())),
            Message::Forget(Target::Cgroup("/sys/fs/cgroup/x".into())),
        ];
        let lines: Vec<String> = messages.iter().map(Message::line).collect();
        assert_eq!(
            lines,
            [
                "scope 0a1b2c\n",
                "reset\n",
                "end\n",
                "+g 123\n",
                "-g 123\n",
                "+s 456\n",
                "-s 456\n",
                "+p 789 123456\n",
                "-p 789 1\n",
                "+c /sys/fs/cgroup/a b/shellkeep-1\n",
                "-c /sys/fs/cgroup/x\n"
            ]
        );
        for (message, line) in messages.iter().zip(&lines) {
            let line = line.strip_suffix('\n').expect("a line feed");
            assert_eq!(Message::parse(line.as_bytes()), Some(message.clone()));
        }
        let long_token = format!("scope {}", "a".repeat(65));
        let long_dir = format!("+c /{}", "d".repeat(LINE_LIMIT));
        for bad in [
            "",
            "+g",
            "+g x",
            "+x 5",
            "*g 5",
            "+g 1",
            "+g 0",
            "+g -7",
            "+gg 5",
            "+p 5",
            "+p 1 5",
            "+p 5 x",
            "+p 5 -1",
            "+p 5 6 7",
            "+g 5 ",
            "reset ",
            "end ",
            "scope",
            "scope ",
            "scope a/b",
            "scope a b",
            &long_token,
            "+c relative/dir",
            "+c ",
            "+c /sys/fs/cgroup/../../home",
            "+c /sys/./fs",
            "+c /",
            "+c /a//b",
            "+c /a/",
            &long_dir,
            "+c /a\0b",
        ] {
            assert_eq!(Message::parse(bad.as_bytes()), None, "{bad:?}");
        }
        assert_eq!(Message::parse(b"+g 5\xff"), None);
    }

    /// Lines arrive in any pieces; an over-long line and lines that do not
    /// parse are ignored, and the lines after them still count.
    #[test]
    fn orders_are_read_from_any_pieces_and_bad_lines_are_ignored() {
        let long = format!("+g {}\n", "7".repeat(LINE_LIMIT + 10));
        let stream = format!(
            "scope tok-1\n+g 10\n{long}garbage\n+s 20\n-g 10\nscope other\n+g 30\n+c /sys/fs/cgroup/q\n+g 40"
        );
        for split in [1, 2, 3, 7, 4095, 4096, 4097, 5000, stream.len()] {
            let mut orders = Orders::default();
            for piece in stream.as_bytes().chunks(split) {
                orders.feed(piece);
            }
            assert_eq!(orders.token.as_deref(), Some("tok-1"), "split {split}");
            let expected: BTreeSet<Target> =
                [Target::Session(20), Target::Group(30), Target::Cgroup("/sys/fs/cgroup/q".into())]
                    .into();
            assert_eq!(orders.watched, expected, "split {split}");
            // The last line has no line feed yet: it is not applied.
            assert_eq!(orders.partial, b"+g 40", "split {split}");
            orders.feed(b"\nreset\n");
            assert!(orders.watched.is_empty());
        }
    }

    #[tokio::test]
    async fn a_closed_channel_stops_a_watched_group_with_its_grandchildren() {
        let mut child = process::spawn(
            process::group_command("bash", &Scope::new("test"))
                .args(["-c", "sleep 300 & sleep 300 & wait"])
                .stdin(Stdio::null()),
        )
        .expect("spawn bash");
        let pgid = child.id().expect("pid") as i32;
        assert!(
            wait_until(Duration::from_secs(10), || process::live_group_members(pgid).len() >= 3)
        );

        let (mut server_end, result) = start_guard_loop();
        let watch = format!("+g {pgid}\n+g 999999\n-g 999999\n");
        server_end.write_all(watch.as_bytes()).expect("write");
        drop(server_end);

        let mode = result.recv_timeout(Duration::from_secs(10)).expect("guard loop ended");
        assert_eq!(mode.expect("guard loop ran"), Some(TerminationMode::Hard));
        assert_eq!(process::live_group_members(pgid), Vec::<i32>::new());
        child.wait().await.expect("reaped");
    }

    #[tokio::test]
    async fn a_closed_channel_stops_every_group_of_a_watched_session() {
        // setsid(1) forks when it leads its group, so the session's bash
        // reports its own id, which is also the session's. With job control
        // on, each background job gets a process group of its own.
        let mut child = process::spawn(
            process::group_command("setsid", &Scope::new("test"))
                .args(["bash", "-c", "set -m; echo $$; sleep 300 & (sleep 300 & wait) & wait"])
                .stdin(Stdio::null())
                .stdout(Stdio::piped()),
        )
        .expect("spawn setsid");
        let stdout = child.stdout.take().expect("stdout");
        let mut first_line = String::new();
        tokio::io::BufReader::new(stdout).read_line(&mut first_line).await.expect("read sid");
        let sid: i32 = first_line.trim().parse().expect("a session id");
        assert!(
            wait_until(Duration::from_secs(10), || process::live_session_members(sid).len() >= 4)
        );
        assert_eq!(process::session_groups(sid).len(), 3);

        let (mut server_end, result) = start_guard_loop();
        server_end.write_all(format!("+s {sid}\n").as_bytes()).expect("write");
        drop(server_end);

        let mode = result.recv_timeout(Duration::from_secs(10)).expect("guard loop ended");
        assert_eq!(mode.expect("guard loop ran"), Some(TerminationMode::Hard));
        assert_eq!(process::live_session_members(sid), Vec::<i32>::new());
        child.wait().await.expect("reaped");
    }

    #[tokio::test]
    async fn forgotten_groups_reset_and_a_cut_line_are_left_alone() {
        let mut first = process::spawn(
            process::group_command("sleep", &Scope::new("test")).arg("300").stdin(Stdio::null()),
        )
        .expect("spawn sleep");
        let mut second = process::spawn(
            process::group_command("sleep", &Scope::new("test")).arg("300").stdin(Stdio::null()),
        )
        .expect("spawn sleep");
        let (a, b) = (first.id().expect("pid") as i32, second.id().expect("pid") as i32);
        let (mut server_end, result) = start_guard_loop();
        // The last line has no newline, as if the server died writing it.
        let lines = format!("+g {a}\n-g {a}\n+g {b}\nreset\n+g {a}");
        server_end.write_all(lines.as_bytes()).expect("write");
        drop(server_end);
        let mode = result.recv_timeout(Duration::from_secs(10)).expect("guard loop ended");
        assert_eq!(mode.expect("guard loop ran"), None);
        assert_eq!(process::live_group_members(a), vec![a]);
        assert_eq!(process::live_group_members(b), vec![b]);
        first.kill().await.expect("killed");
        second.kill().await.expect("killed");
    }

    /// Issue 11 (F1): a channel held open by someone else does not blind
    /// the guard: when it wakes (the parent-death signal) and finds its
    /// parent gone, it reads what is still queued and stops everything.
    #[tokio::test]
    async fn a_dead_server_is_noticed_while_the_channel_is_held_open() {
        let mut child = process::spawn(
            process::group_command("sleep", &Scope::new("test")).arg("300").stdin(Stdio::null()),
        )
        .expect("spawn sleep");
        let pgid = child.id().expect("pid") as i32;
        let (mut server_end, guard_end) = UnixStream::pair().expect("socket pair");
        let (wake_sender, wake) = UnixStream::pair().expect("socket pair");
        wake.set_nonblocking(true).expect("non-blocking");
        let alive = Arc::new(AtomicBool::new(true));
        let (sender, result) = mpsc::channel();
        let server_alive = Arc::clone(&alive);
        std::thread::spawn(move || {
            let alive = move || server_alive.load(Ordering::SeqCst);
            let _ = sender.send(watch_until_gone(&guard_end, Some(wake.as_fd()), &alive));
        });
        server_end.write_all(b"+g 999999\n").expect("write");
        // Someone else's wake-up, with the server still there: nothing.
        (&wake_sender).write_all(b"x").expect("wake");
        assert!(result.recv_timeout(Duration::from_millis(300)).is_err(), "the loop went on");
        // The server's last line is queued, then it dies; the channel stays
        // open (held by another process, say).
        server_end.write_all(format!("+g {pgid}\n").as_bytes()).expect("write");
        alive.store(false, Ordering::SeqCst);
        (&wake_sender).write_all(b"x").expect("wake");
        let mode = result.recv_timeout(Duration::from_secs(10)).expect("guard loop ended");
        assert_eq!(mode.expect("guard loop ran"), Some(TerminationMode::Hard));
        assert_eq!(process::live_group_members(pgid), Vec::<i32>::new());
        child.wait().await.expect("reaped");
        drop(server_end);
    }

    /// A server already gone when the guard starts (its parent is not the
    /// end of the channel) is acted on at once, with what it queued.
    #[tokio::test]
    async fn a_server_gone_before_the_guard_started_is_acted_on_at_once() {
        let mut child = process::spawn(
            process::group_command("sleep", &Scope::new("test")).arg("300").stdin(Stdio::null()),
        )
        .expect("spawn sleep");
        let pgid = child.id().expect("pid") as i32;
        let (mut server_end, guard_end) = UnixStream::pair().expect("socket pair");
        server_end.write_all(format!("+g {pgid}\n").as_bytes()).expect("write");
        // The loop blocks: not on this runtime's thread.
        let looped = std::thread::spawn(move || {
            watch_until_gone(&guard_end, None, &|| false).expect("loop ran")
        });
        let mode = looped.join().expect("the loop ended");
        assert_eq!(mode, Some(TerminationMode::Hard));
        assert_eq!(process::live_group_members(pgid), Vec::<i32>::new());
        child.wait().await.expect("reaped");
        drop(server_end);
    }

    #[test]
    fn the_handle_writes_one_line_per_event_and_shutdown_reaps_the_guard() {
        let dir = std::env::temp_dir().join(format!("shellkeep-guard-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let record = dir.join("lines");
        let record_arg = record.to_str().expect("utf-8 path");
        // A stand-in guard that records what it is told.
        let guard = Guard::spawn_with_token(
            Path::new("bash"),
            &["-c", "cat > \"$0\"", record_arg],
            Some("tok"),
        )
        .expect("spawn guard");
        guard.watch_group(123);
        guard.watch_session(456);
        guard.watch_cgroup(Path::new("/sys/fs/cgroup/sk"));
        guard.watch_cgroup(Path::new("relative"));
        guard.forget_group(123);
        guard.forget_session(456);
        guard.forget_cgroup(Path::new("/sys/fs/cgroup/sk"));
        assert!(guard.is_connected());
        let status = guard.shutdown(Duration::from_secs(10)).expect("the guard exited");
        assert!(status.success());
        let lines = std::fs::read_to_string(&record).expect("recorded lines");
        assert_eq!(
            lines,
            "scope tok\n+g 123\n+s 456\n+c /sys/fs/cgroup/sk\n-g 123\n-s 456\n-c /sys/fs/cgroup/sk\nend\n",
            "a normal shutdown says so last"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The guard's end of the channel is its stdin and nothing else: the
    /// server keeps no copy (else no end of file), and no other child
    /// inherits either end.
    #[test]
    fn only_the_guard_holds_its_end_of_the_channel() {
        // A stand-in that prints its descriptors, then waits for its input.
        let dir = std::env::temp_dir().join(format!("shellkeep-guard-fds-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let record = dir.join("fds");
        let script = "ls -l /proc/$$/fd > \"$0\"; cat >/dev/null";
        let guard =
            Guard::spawn(Path::new("bash"), &["-c", script, record.to_str().expect("utf-8")])
                .expect("spawn guard");
        assert!(wait_until(Duration::from_secs(10), || std::fs::read_to_string(&record)
            .is_ok_and(|fds| fds.contains(" 0 -> "))));
        let fds = std::fs::read_to_string(&record).expect("fds");
        assert!(fds.contains(" 0 -> socket:"), "{fds}");
        let sockets = fds.lines().filter(|line| line.contains("socket:")).count();
        assert_eq!(sockets, 1, "{fds}");
        // Another child started now inherits no socket of the guard's.
        let other = std::process::Command::new("bash")
            .args(["-c", "ls -l /proc/$$/fd"])
            .stdin(Stdio::null())
            .output()
            .expect("another child");
        let other = String::from_utf8_lossy(&other.stdout);
        assert!(!other.contains("socket:"), "{other}");
        assert!(guard.shutdown(Duration::from_secs(10)).is_some(), "end of file reached it");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_guard_that_cannot_run_is_given_up_and_every_reader_is_told_once() {
        // A stand-in that ends as soon as it is told anything: alive until
        // the first line, so a reader can be known before it gives up.
        let guard =
            Guard::spawn(Path::new("bash"), &["-c", "read -r _; exit 0"]).expect("spawn guard");
        assert_eq!(guard.take_notice("early"), None);
        for pgid in 100..110 {
            guard.watch_group(pgid);
        }
        assert!(wait_until(Duration::from_secs(20), || guard.live_pid().is_none()));
        assert!(!guard.is_connected());
        for reader in ["early", "default", "late", "run"] {
            let notice = guard.take_notice(reader).expect("a notice");
            assert!(notice.contains("kept ending at once"), "{notice}");
            assert!(notice.contains("not restarted again"), "{notice}");
            assert_eq!(guard.take_notice(reader), None, "told once");
        }
        drop(guard);
    }

    #[test]
    fn a_guard_that_could_not_start_is_told_to_every_reader() {
        let guard = Guard::unavailable("no such file");
        guard.watch_group(123);
        assert!(!guard.is_connected());
        assert_eq!(guard.live_pid(), None);
        for reader in ["default", "other", ""] {
            let notice = guard.take_notice(reader).expect("a notice");
            assert!(notice.contains("could not be started (no such file)"), "{notice}");
            assert_eq!(guard.take_notice(reader), None);
        }
        assert_eq!(guard.shutdown(Duration::from_secs(1)), None);
    }

    /// Restarts are told to the readers known when they happen (the latest
    /// few, for a reader that has not replied for long); a guard given up is
    /// told to every reader once, new ones included.
    #[test]
    fn notices_reach_each_reader_once() {
        let mut notices = Notices::default();
        assert_eq!(notices.take("a"), None);
        notices.post("first");
        assert_eq!(notices.take("a").as_deref(), Some("first"));
        assert_eq!(notices.take("a"), None);
        assert_eq!(notices.take("b"), None, "b was not known then");
        for n in 0..20 {
            notices.post(&format!("restart {n}"));
        }
        let told = notices.take("b").expect("restarts");
        assert_eq!(told.lines().count(), NOTICES_PER_READER, "{told}");
        assert!(told.ends_with("restart 19"), "{told}");
        notices.give_up("given up".to_owned());
        for reader in ["a", "b", "new"] {
            let told = notices.take(reader).expect("told");
            assert!(told.ends_with("given up"), "{reader}: {told}");
            assert_eq!(notices.take(reader), None, "{reader}");
        }
        // Many readers are never remembered without bound.
        for n in 0..(3 * READERS_LIMIT) {
            notices.take(&format!("reader-{n}"));
        }
        assert!(notices.pending.len() <= READERS_LIMIT + 1);
        assert!(notices.told_given_up.len() <= READERS_LIMIT);
    }

    #[test]
    fn a_killed_guard_is_replaced_and_told_everything_watched() {
        let dir =
            std::env::temp_dir().join(format!("shellkeep-guard-restart-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        // Each stand-in guard appends what it is told to its own file.
        let script = "cat > \"$0/$$\"";
        let dir_arg = dir.to_str().expect("utf-8 path");
        let guard =
            Guard::spawn_with_token(Path::new("bash"), &["-c", script, dir_arg], Some("tok"))
                .expect("spawn guard");
        assert_eq!(guard.take_notice("default"), None);
        guard.watch_group(123);
        guard.watch_session(456);
        guard.watch_group(789);
        guard.forget_group(789);
        let first = guard.pid();
        assert!(wait_until(Duration::from_secs(10), || dir.join(first.to_string()).exists()));
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(first as i32),
            nix::sys::signal::Signal::SIGKILL,
        )
        .expect("kill the guard");
        assert!(
            wait_until(Duration::from_secs(10), || guard.pid() != first && guard.is_connected())
        );
        let second = guard.pid();
        assert_eq!(guard.live_pid(), Some(second));
        let notice = guard.take_notice("default").expect("a notice");
        assert!(notice.contains(&format!("(pid {first}) ended unexpectedly")), "{notice}");
        assert!(notice.contains(&format!("(pid {second}) took over")), "{notice}");
        assert_eq!(guard.take_notice("default"), None);
        guard.watch_group(321);
        assert!(guard.shutdown(Duration::from_secs(10)).is_some());
        let lines = std::fs::read_to_string(dir.join(second.to_string())).expect("recorded lines");
        assert_eq!(lines, "scope tok\n+g 123\n+s 456\n+g 321\nend\n");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A guard that stops reading (blocked elsewhere: a stopped one is
    /// continued at once) never blocks the server: lines past the outbox
    /// are dropped, and once it reads again it is told `reset` and
    /// everything watched.
    #[test]
    fn a_guard_that_stops_reading_never_blocks_the_server() {
        let dir =
            std::env::temp_dir().join(format!("shellkeep-guard-stopped-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let record = dir.join("lines");
        // The stand-in reads its channel only once the gate is opened.
        let gate = dir.join("gate");
        let _ = std::fs::remove_file(&gate);
        nix::unistd::mkfifo(&gate, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
        let guard = Guard::spawn(
            Path::new("bash"),
            &[
                "-c",
                "read -r _ < \"$1\"; exec cat > \"$0\"",
                record.to_str().expect("utf-8 path"),
                gate.to_str().expect("utf-8 path"),
            ],
        )
        .expect("spawn guard");
        let started = Instant::now();
        let behind = || guard.lock().channel.as_ref().is_some_and(|channel| channel.behind);
        // However much the socket buffers, the outbox fills at last.
        let mut pgid = 2;
        while !behind() && pgid < 10_000_000 {
            guard.watch_group(pgid);
            guard.forget_group(pgid);
            pgid += 1;
        }
        assert!(behind(), "the guard fell behind");
        guard.watch_group(77);
        assert!(started.elapsed() < Duration::from_secs(60), "never blocked for long");
        std::fs::write(&gate, "go\n").expect("open the gate");
        // Whatever it now reads ends with the full list: nothing but 77.
        guard.watch_session(88);
        assert!(guard.shutdown(Duration::from_secs(10)).is_some());
        let lines = std::fs::read_to_string(&record).expect("recorded lines");
        let mut orders = Orders::default();
        orders.feed(lines.as_bytes());
        let expected: BTreeSet<Target> = [Target::Group(77), Target::Session(88)].into();
        assert_eq!(orders.watched, expected);
        assert!(
            lines.contains("reset\n"),
            "it fell behind and was told everything again ({} bytes)",
            lines.len()
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_guard_stops_everything_carrying_the_token_it_was_sent() {
        let marker = format!("300.{}", std::process::id());
        // A token of its own: the test binary's is shared by every test.
        let token = format!("guardtest{}", std::process::id());
        // setsid leaves the group and the session; only the token finds it.
        let mut child = process::guard_command("bash")
            .args(["-c", &format!("setsid sleep {marker} & wait")])
            .env(process::SCOPE_VAR, format!("{token}/run-1"))
            .spawn()
            .expect("spawn bash");
        assert!(wait_until(Duration::from_secs(10), || !pids_with_argument(&marker).is_empty()));
        let (mut server_end, guard_end) = UnixStream::pair().expect("socket pair");
        server_end.write_all(lines(&[Message::Scope(token)]).as_bytes()).expect("write");
        drop(server_end);
        let mode = watch_until_gone(&guard_end, None, &|| true).expect("loop ran");
        assert_eq!(mode, Some(TerminationMode::Hard));
        assert_eq!(pids_with_argument(&marker), Vec::<i32>::new());
        child.wait().expect("reaped");
    }

    /// Issue 19 (F1): the guard gives no grace. What it ends is stopped
    /// before anything else reaches it, so a process that would react to
    /// SIGTERM (fork a new escapee, kill the guard) never runs again: its
    /// trap never fires, and nothing it would have started exists.
    #[test]
    fn what_the_guard_ends_cannot_react_before_it_dies() {
        let marker = format!("300.{}", std::process::id() + 7);
        let late = format!("301.{}", std::process::id() + 7);
        let token = format!("nograce{}", std::process::id());
        let dir =
            std::env::temp_dir().join(format!("shellkeep-guard-nograce-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let trapped = dir.join("trapped");
        // It would leave a witness and start another process on SIGTERM,
        // and it ignores SIGTERM; setsid takes it out of any group.
        let script = format!(
            "trap 'touch {trapped}; setsid sleep {late} & ' TERM; \
             while :; do sleep {marker}; done",
            trapped = trapped.display()
        );
        let mut child = process::guard_command("setsid")
            .args(["bash", "-c", &script])
            .env(process::SCOPE_VAR, format!("{token}/run-1"))
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn setsid");
        assert!(wait_until(Duration::from_secs(10), || !pids_with_argument(&marker).is_empty()));
        let (mut server_end, guard_end) = UnixStream::pair().expect("socket pair");
        server_end.write_all(lines(&[Message::Scope(token)]).as_bytes()).expect("write");
        drop(server_end);
        let mode = watch_until_gone(&guard_end, None, &|| true).expect("loop ran");
        assert_eq!(mode, Some(TerminationMode::Hard));
        assert_eq!(pids_with_argument(&marker), Vec::<i32>::new());
        assert_eq!(pids_with_argument(&late), Vec::<i32>::new(), "it reacted");
        assert!(!trapped.exists(), "its SIGTERM trap ran");
        child.wait().expect("reaped");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_runtime_dir_is_removed_only_when_it_is_ours() {
        let dir =
            std::env::temp_dir().join(format!("shellkeep-guard-runtime-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sessions")).expect("runtime dir");
        std::fs::write(dir.join("sessions/cmd"), "secret").expect("a file");
        let link = dir.with_extension("link");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&dir, &link).expect("symlink");
        remove_runtime_dir(&link);
        assert!(dir.join("sessions/cmd").exists(), "a symbolic link is not followed");
        remove_runtime_dir(&dir);
        assert!(!dir.exists());
        let _ = std::fs::remove_file(&link);
    }

    /// A watched directory that is not a control group is never touched.
    #[test]
    fn a_cgroup_target_that_is_not_a_control_group_is_left_alone() {
        let dir = std::env::temp_dir().join(format!("shellkeep-guard-cg-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("child")).expect("dirs");
        stop_cgroup(&dir);
        assert!(dir.join("child").is_dir());
        assert!(!dir.join("cgroup.kill").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// This process's cgroup v2 directory, if cgroup2 is mounted.
    fn own_cgroup2_dir() -> Option<PathBuf> {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        let mount = mountinfo.lines().find_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            right.starts_with("cgroup2 ").then(|| left.split(' ').nth(4).map(PathBuf::from))?
        })?;
        let cgroup = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let path = cgroup.lines().find_map(|line| line.strip_prefix("0::"))?;
        Some(mount.join(path.trim_start_matches('/')))
    }

    /// Where the host lets us make control groups (root, a delegated
    /// subtree): a watched one is killed and removed, with the groups below
    /// it. Elsewhere the refusal must be the kernel's permission check.
    #[tokio::test]
    async fn a_watched_control_group_is_killed_and_removed() {
        let refused = |err: &io::Error| {
            matches!(
                err.kind(),
                io::ErrorKind::PermissionDenied
                    | io::ErrorKind::ReadOnlyFilesystem
                    | io::ErrorKind::NotFound
                    | io::ErrorKind::ResourceBusy
            )
        };
        let Some(parent) = own_cgroup2_dir() else { return };
        let dir = parent.join(format!("shellkeep-guard-test-{}", std::process::id()));
        let inner = dir.join("inner");
        if let Err(err) = std::fs::create_dir(&dir).and_then(|()| std::fs::create_dir(&inner)) {
            assert!(refused(&err), "{err}");
            let _ = std::fs::remove_dir(&dir);
            return;
        }
        let mut child = process::spawn(
            process::group_command("sleep", &Scope::new("test")).arg("300").stdin(Stdio::null()),
        )
        .expect("spawn sleep");
        let pid = child.id().expect("pid");
        if let Err(err) = std::fs::write(inner.join("cgroup.procs"), pid.to_string()) {
            child.kill().await.expect("killed");
            stop_cgroup(&dir);
            assert!(refused(&err), "{err}");
            return;
        }
        let (mut server_end, guard_end) = UnixStream::pair().expect("socket pair");
        let line = Message::Watch(Target::cgroup(&dir).expect("a plain path")).line();
        server_end.write_all(line.as_bytes()).expect("write");
        drop(server_end);
        let looped = std::thread::spawn(move || {
            watch_until_gone(&guard_end, None, &|| true).expect("loop ran")
        });
        looped.join().expect("the loop ended");
        let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
            .await
            .expect("the sleep ended")
            .expect("reaped");
        use std::os::unix::process::ExitStatusExt as _;
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        assert!(!dir.exists(), "removed with the group below it");
    }

    /// Pids of live processes with `argument` among their arguments.
    fn pids_with_argument(argument: &str) -> Vec<i32> {
        let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
        entries
            .flatten()
            .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmdline| {
                    cmdline.split(|&b| b == 0).any(|arg| arg == argument.as_bytes())
                })
            })
            .collect()
    }
}
