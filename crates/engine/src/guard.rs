//! The orphan guard: a separate process that outlives the server and stops
//! whatever the server was running when the server dies.
//!
//! Every child of the server gets a parent-death signal, but that reaches
//! only the direct child: a `sleep 300 &` started by a command, or the jobs
//! of a PTY session, would survive a server killed with SIGKILL. So the
//! server starts a guard (its own executable with a hidden subcommand) and
//! tells it, one line per event on the guard's stdin, which process groups
//! and sessions are live; it also gives it the server's scope token and
//! runtime directory on the command line. When that pipe reaches end of
//! file, because the server closed it or died, the guard stops every
//! process that carries the token in its environment and everything still
//! watched, removes the runtime directory, and exits.
//!
//! The guard can itself be killed (by a command, with `kill -9`). The
//! server's [`Guard`] handle notices at once (a thread waits for it),
//! starts a new one, tells it everything watched, logs it and keeps a
//! notice for the next reply.
//!
//! [`Guard`] is the server's handle; [`serve`] is the guard process's whole
//! life. This module does not decide what to watch (the runner and the
//! sessions do), and it neither builds processes nor sends signals itself:
//! `process` does both.
//!
//! The protocol is one line per event: `+g PGID` and `-g PGID` watch and
//! forget a process group, `+s SID` and `-s SID` a session.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ExitStatus};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, mpsc};
use std::time::{Duration, Instant};

use crate::process::{self, Mark, Targets, TerminationMode};

/// How long the guard gives what it stops between SIGTERM and SIGKILL.
pub const GUARD_GRACE: Duration = Duration::from_secs(2);

/// A guard that dies this soon after it started, this many times in a row,
/// is not started again: it cannot run (its executable was replaced, say).
const SHORT_LIFE: Duration = Duration::from_secs(1);
const SHORT_LIVES_BEFORE_GIVING_UP: u32 = 5;

/// The server's handle on its orphan guard process.
///
/// Telling the guard what to watch is a blocking write of a few bytes to a
/// pipe the guard keeps draining, so it is cheap enough to call from async
/// code. The handle remembers what is watched, so that a guard that died
/// can be replaced and told everything again; a thread of its own waits for
/// the guard and does that. A missing safety net never breaks the server:
/// failures are logged and kept as a notice. Dropping the handle closes the
/// pipe, which tells the guard the server has ended.
#[derive(Debug)]
pub struct Guard {
    shared: Arc<Mutex<GuardState>>,
    /// Where the waiting thread sends the guard's exit status once the
    /// handle closed its input (or it gave up restarting it).
    finished: Mutex<Option<mpsc::Receiver<io::Result<ExitStatus>>>>,
}

/// What the handle and its waiting thread share.
#[derive(Debug)]
struct GuardState {
    /// The write end of the current guard's stdin; `None` once closed, or
    /// while a dead guard is being replaced.
    input: Option<ChildStdin>,
    /// The current guard's process id.
    pid: u32,
    /// Everything watched, to tell a replacement guard.
    watched: BTreeSet<Target>,
    /// Set when the handle closes the pipe on purpose: the guard's exit is
    /// then expected.
    closing: bool,
    /// What happened to the guard that the next reply should mention.
    notices: Vec<String>,
}

impl Guard {
    /// Starts `program args` as the orphan guard (the server passes its own
    /// executable and its hidden guard subcommand). The guard gets its own
    /// process group and no parent-death signal, so it outlives the server.
    pub fn spawn(program: &Path, args: &[&str]) -> io::Result<Guard> {
        let program = program.to_owned();
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        let mut child = start(&program, &args)?;
        let state = GuardState {
            input: child.stdin.take(),
            pid: child.id(),
            watched: BTreeSet::new(),
            closing: false,
            notices: Vec::new(),
        };
        tracing::debug!(pid = state.pid, program = %program.display(), "started the orphan guard");
        let shared = Arc::new(Mutex::new(state));
        let (sender, receiver) = mpsc::channel();
        let keeper = Keeper { shared: Arc::clone(&shared), program, args };
        let spawned = std::thread::Builder::new()
            .name("shellkeep-guard-keeper".into())
            .spawn(move || keeper.run(child, &sender));
        if let Err(err) = spawned {
            tracing::warn!(%err, "could not start a thread to watch the orphan guard");
        }
        Ok(Guard { shared, finished: Mutex::new(Some(receiver)) })
    }

    fn lock(&self) -> MutexGuard<'_, GuardState> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The current guard's process id.
    pub fn pid(&self) -> u32 {
        self.lock().pid
    }

    /// Whether a guard is listening, as far as we know: false once a write
    /// to it has failed and no replacement has taken over.
    pub fn is_connected(&self) -> bool {
        self.lock().input.is_some()
    }

    /// What happened to the guard since the last call (it died and was
    /// replaced, or could not be), worded for an agent; `None` if nothing.
    pub fn take_notice(&self) -> Option<String> {
        let notices = std::mem::take(&mut self.lock().notices);
        (!notices.is_empty()).then(|| notices.join("\n"))
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

    /// Closes the guard's input and waits up to `wait` for it to exit.
    /// Returns its exit status, or `None` if it had not exited by then (it
    /// is then reaped in the background whenever it does).
    ///
    /// On a clean shutdown the server has already stopped what it ran, so
    /// the guard finds nothing alive and exits at once.
    pub fn shutdown(self, wait: Duration) -> Option<ExitStatus> {
        self.close_input();
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
        match message {
            Message::Watch(target) => state.watched.insert(target),
            Message::Forget(target) => state.watched.remove(&target),
        };
        let pid = state.pid;
        let Some(pipe) = state.input.as_mut() else { return };
        if let Err(err) = pipe.write_all(message.line().as_bytes()) {
            // The keeper thread sees the guard die and replaces it, telling
            // the new one everything watched, this included.
            tracing::debug!(pid, %err, "the orphan guard stopped listening");
            state.input = None;
        }
    }

    /// Closing the pipe is the guard's signal that the server has ended.
    fn close_input(&self) {
        let mut state = self.lock();
        state.closing = true;
        state.input = None;
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        // The keeper thread reaps the guard whenever it exits, so dropping
        // never blocks and the guard never stays a zombie.
        self.close_input();
    }
}

/// Starts one guard process.
fn start(program: &Path, args: &[OsString]) -> io::Result<Child> {
    process::spawn_std(process::guard_command(program).args(args))
}

/// The thread that waits for the guard and replaces it when it dies
/// before the handle closed its input.
struct Keeper {
    shared: Arc<Mutex<GuardState>>,
    program: PathBuf,
    args: Vec<OsString>,
}

impl Keeper {
    fn run(self, mut child: Child, finished: &mpsc::Sender<io::Result<ExitStatus>>) {
        let mut short_lives = 0;
        loop {
            let started = Instant::now();
            let status = child.wait();
            let mut state = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
            if state.closing {
                let _ = finished.send(status);
                return;
            }
            state.input = None;
            let old = state.pid;
            let how = match &status {
                Ok(status) => status.to_string(),
                Err(err) => format!("could not be waited for: {err}"),
            };
            short_lives = if started.elapsed() < SHORT_LIFE { short_lives + 1 } else { 0 };
            if short_lives >= SHORT_LIVES_BEFORE_GIVING_UP {
                let notice = format!(
                    "The orphan guard (pid {old}) keeps ending at once ({how}); it is not \
                     restarted again, so if the server is killed, what it runs may be left \
                     behind."
                );
                tracing::error!("{notice}");
                state.notices.push(notice);
                let _ = finished.send(status);
                return;
            }
            match start(&self.program, &self.args) {
                Ok(mut new) => {
                    let mut input = new.stdin.take();
                    let lines: String =
                        state.watched.iter().map(|&t| Message::Watch(t).line()).collect();
                    if let Some(pipe) = input.as_mut()
                        && let Err(err) = pipe.write_all(lines.as_bytes())
                    {
                        tracing::warn!(%err, "could not brief the new orphan guard");
                        input = None;
                    }
                    state.input = input;
                    state.pid = new.id();
                    let notice = format!(
                        "The orphan guard (pid {old}) ended unexpectedly ({how}); a new one \
                         (pid {}) took over.",
                        state.pid
                    );
                    tracing::warn!("{notice}");
                    state.notices.push(notice);
                    child = new;
                }
                Err(err) => {
                    let notice = format!(
                        "The orphan guard (pid {old}) ended unexpectedly ({how}) and could not \
                         be restarted ({err}); if the server is killed, what it runs may be \
                         left behind."
                    );
                    tracing::error!("{notice}");
                    state.notices.push(notice);
                    let _ = finished.send(status);
                    return;
                }
            }
        }
    }
}

/// What the guard process is told on its command line.
#[derive(Debug, Clone, Default)]
pub struct GuardOptions {
    /// The server's scope token ([`process::server_token`]): every process
    /// carrying it is stopped once the server is gone.
    pub token: Option<String>,
    /// The server's runtime directory, removed once the server is gone.
    pub runtime_dir: Option<PathBuf>,
}

/// The guard process's main loop, run by the server binary's hidden guard
/// subcommand with the pipe from the server as `input`.
///
/// It records what the server watches and forgets until `input` ends
/// (the server closed it, or died), then stops every process carrying the
/// server's token, every process group still watched, and every process in
/// each watched session: SIGTERM, a grace of [`GUARD_GRACE`], then SIGKILL.
/// Then it removes the runtime directory. It returns how the processes went
/// away (`None` when nothing was alive), or an error if it could not start.
///
/// It ignores SIGINT and SIGHUP first, so that a ^C or a closing terminal
/// does not take the safety net down before the server.
pub fn serve(input: impl Read, options: &GuardOptions) -> io::Result<Option<TerminationMode>> {
    if let Err(err) = process::ignore_interrupt_and_hangup() {
        // A guard that a ^C can kill still beats no guard.
        tracing::warn!(%err, "the orphan guard could not ignore SIGINT and SIGHUP");
    }
    let mode = watch_until_closed(input, GUARD_GRACE, options)?;
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
    let ours = std::fs::metadata("/proc/self").map(|me| me.uid()).ok();
    if !meta.is_dir() || Some(meta.uid()) != ours {
        tracing::warn!(dir = %dir.display(), "not removing a runtime directory that is not ours");
        return;
    }
    if let Err(err) = std::fs::remove_dir_all(dir) {
        tracing::warn!(dir = %dir.display(), %err, "could not remove the server's runtime directory");
    }
}

/// [`serve`] without touching signal dispositions, which would leak into
/// every later child of the process (tests run it inside the test binary).
fn watch_until_closed(
    input: impl Read,
    grace: Duration,
    options: &GuardOptions,
) -> io::Result<Option<TerminationMode>> {
    // Built before listening, so that a failure shows while the server is
    // still there to notice the guard is gone.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
    let mut watched = BTreeSet::new();
    let mut reader = BufReader::new(input);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => break,
            // A line cut short means the server died while writing it; its
            // number may be a prefix of the real one, so it is not trusted.
            Ok(_) if !line.ends_with(b"\n") => break,
            Ok(_) => match Message::parse(&line) {
                Some(Message::Watch(target)) => {
                    watched.insert(target);
                }
                Some(Message::Forget(target)) => {
                    watched.remove(&target);
                }
                None => tracing::warn!(
                    line = %String::from_utf8_lossy(&line).trim_end(),
                    "the orphan guard ignored a line it does not understand"
                ),
            },
            Err(err) => {
                tracing::warn!(%err, "the orphan guard lost its input; treating the server as gone");
                break;
            }
        }
    }
    let targets = targets_to_stop(&watched, options.token.as_deref());
    let members = targets.members();
    if members.is_empty() {
        tracing::debug!("the server has ended and left nothing running");
        return Ok(None);
    }
    tracing::info!(?members, "the server has ended; stopping what it left running");
    Ok(runtime.block_on(process::terminate(&targets, grace)))
}

/// Everything to stop for `watched` and the server's `token`.
fn targets_to_stop(watched: &BTreeSet<Target>, token: Option<&str>) -> Targets {
    let mut targets = Targets::default();
    for target in watched {
        match *target {
            Target::Group(pgid) => targets.groups.push(pgid),
            Target::Session(sid) => targets.sessions.push(sid),
        }
    }
    targets.marks.extend(token.map(|token| Mark::Token(token.to_owned())));
    targets
}

/// One line of the protocol between the server and its guard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Message {
    Watch(Target),
    Forget(Target),
}

/// What the guard can watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Target {
    Group(i32),
    Session(i32),
}

impl Message {
    /// The line for this message, newline included.
    fn line(self) -> String {
        let (sign, target) = match self {
            Message::Watch(target) => ('+', target),
            Message::Forget(target) => ('-', target),
        };
        let (kind, id) = match target {
            Target::Group(pgid) => ('g', pgid),
            Target::Session(sid) => ('s', sid),
        };
        format!("{sign}{kind} {id}\n")
    }

    /// Parses one line. Ids 0 and 1 are refused: signalling those would
    /// reach our own group or init.
    fn parse(line: &[u8]) -> Option<Message> {
        let line = std::str::from_utf8(line).ok()?.trim_end();
        let (head, id) = line.split_once(' ')?;
        let id: i32 = id.parse().ok().filter(|&id| id > 1)?;
        let target = match head.get(1..)? {
            "g" => Target::Group(id),
            "s" => Target::Session(id),
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
mod tests {
    use std::os::unix::net::UnixStream;
    use std::process::Stdio;
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

    /// Runs the guard loop on a thread, fed by the returned socket; its
    /// result arrives on the returned channel once the socket is dropped.
    fn start_guard_loop() -> (UnixStream, mpsc::Receiver<io::Result<Option<TerminationMode>>>) {
        let (server_end, guard_end) = UnixStream::pair().expect("socket pair");
        let (sender, receiver) = mpsc::channel();
        std::thread::spawn(move || {
            let _ =
                sender.send(watch_until_closed(guard_end, GUARD_GRACE, &GuardOptions::default()));
        });
        (server_end, receiver)
    }

    #[test]
    fn protocol_lines_round_trip() {
        let messages = [
            Message::Watch(Target::Group(123)),
            Message::Forget(Target::Group(123)),
            Message::Watch(Target::Session(456)),
            Message::Forget(Target::Session(456)),
        ];
        let lines: Vec<String> = messages.iter().map(|m| m.line()).collect();
        assert_eq!(lines, ["+g 123\n", "-g 123\n", "+s 456\n", "-s 456\n"]);
        for (message, line) in messages.iter().zip(&lines) {
            assert_eq!(Message::parse(line.as_bytes()), Some(*message));
        }
        for bad in ["", "+g", "+g x", "+x 5", "*g 5", "+g 1", "+g 0", "+g -7", "+gg 5"] {
            assert_eq!(Message::parse(bad.as_bytes()), None, "{bad:?}");
        }
    }

    #[tokio::test]
    async fn a_closed_pipe_stops_a_watched_group_with_its_grandchildren() {
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
        assert_eq!(mode.expect("guard loop ran"), Some(TerminationMode::Soft));
        assert_eq!(process::live_group_members(pgid), Vec::<i32>::new());
        child.wait().await.expect("reaped");
    }

    #[tokio::test]
    async fn a_closed_pipe_stops_every_group_of_a_watched_session() {
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
        assert_eq!(mode.expect("guard loop ran"), Some(TerminationMode::Soft));
        assert_eq!(process::live_session_members(sid), Vec::<i32>::new());
        child.wait().await.expect("reaped");
    }

    #[tokio::test]
    async fn forgotten_groups_and_a_cut_line_are_left_alone() {
        let mut child = process::spawn(
            process::group_command("sleep", &Scope::new("test")).arg("300").stdin(Stdio::null()),
        )
        .expect("spawn sleep");
        let pgid = child.id().expect("pid") as i32;
        let (mut server_end, result) = start_guard_loop();
        // The last line has no newline, as if the server died writing it.
        let lines = format!("+g {pgid}\n-g {pgid}\n+g {pgid}");
        server_end.write_all(lines.as_bytes()).expect("write");
        drop(server_end);
        let mode = result.recv_timeout(Duration::from_secs(10)).expect("guard loop ended");
        assert_eq!(mode.expect("guard loop ran"), None);
        assert_eq!(process::live_group_members(pgid), vec![pgid]);
        child.kill().await.expect("killed");
    }

    #[test]
    fn the_handle_writes_one_line_per_event_and_shutdown_reaps_the_guard() {
        let dir = std::env::temp_dir().join(format!("shellkeep-guard-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let record = dir.join("lines");
        let record_arg = record.to_str().expect("utf-8 path");
        // A stand-in guard that records what it is told.
        let guard = Guard::spawn(Path::new("bash"), &["-c", "cat > \"$0\"", record_arg])
            .expect("spawn guard");
        guard.watch_group(123);
        guard.watch_session(456);
        guard.forget_group(123);
        guard.forget_session(456);
        assert!(guard.is_connected());
        let status = guard.shutdown(Duration::from_secs(10)).expect("the guard exited");
        assert!(status.success());
        let lines = std::fs::read_to_string(&record).expect("recorded lines");
        assert_eq!(lines, "+g 123\n+s 456\n-g 123\n-s 456\n");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_guard_that_cannot_run_is_given_up_and_the_handle_stays_quiet() {
        let guard = Guard::spawn(Path::new("bash"), &["-c", "exit 0"]).expect("spawn guard");
        assert!(wait_until(Duration::from_secs(20), || guard
            .lock()
            .notices
            .iter()
            .any(|n| n.contains("not restarted"))));
        for pgid in 100..110 {
            guard.watch_group(pgid);
        }
        assert!(!guard.is_connected());
        let notice = guard.take_notice().expect("a notice");
        assert!(notice.contains("keeps ending at once"), "{notice}");
        drop(guard);
    }

    #[test]
    fn a_killed_guard_is_replaced_and_told_everything_watched() {
        let dir =
            std::env::temp_dir().join(format!("shellkeep-guard-restart-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        // Each stand-in guard appends what it is told to its own file.
        let script = "cat > \"$0/$$\"";
        let dir_arg = dir.to_str().expect("utf-8 path");
        let guard = Guard::spawn(Path::new("bash"), &["-c", script, dir_arg]).expect("spawn guard");
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
        let notice = guard.take_notice().expect("a notice");
        assert!(notice.contains(&format!("(pid {first}) ended unexpectedly")), "{notice}");
        assert!(notice.contains(&format!("(pid {second}) took over")), "{notice}");
        assert_eq!(guard.take_notice(), None);
        guard.watch_group(321);
        assert!(guard.shutdown(Duration::from_secs(10)).is_some());
        let lines = std::fs::read_to_string(dir.join(second.to_string())).expect("recorded lines");
        assert_eq!(lines, "+g 123\n+s 456\n+g 321\n");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_closed_pipe_stops_everything_carrying_the_token_and_removes_the_runtime_dir() {
        let dir =
            std::env::temp_dir().join(format!("shellkeep-guard-token-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sessions")).expect("runtime dir");
        std::fs::write(dir.join("sessions/cmd"), "secret").expect("a file");
        let marker = format!("300.{}", std::process::id());
        // A token of its own: the test binary's is shared by every test.
        let token = format!("guardtest{}", std::process::id());
        // setsid leaves the group and the session; only the token finds it.
        let mut child = process::guard_command("bash")
            .args(["-c", &format!("setsid sleep {marker} & wait")])
            .env(process::SCOPE_VAR, format!("{token}/run-1"))
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn bash");
        assert!(wait_until(Duration::from_secs(10), || !pids_with_argument(&marker).is_empty()));
        let (server_end, guard_end) = UnixStream::pair().expect("socket pair");
        drop(server_end);
        let options = GuardOptions { token: Some(token), runtime_dir: Some(dir.clone()) };
        // `serve` would also ignore SIGINT in this test process; the loop
        // and the removal are what it adds to nothing else.
        let mode = watch_until_closed(guard_end, GUARD_GRACE, &options).expect("guard loop ran");
        remove_runtime_dir(&dir);
        assert_eq!(mode, Some(TerminationMode::Soft));
        assert_eq!(pids_with_argument(&marker), Vec::<i32>::new());
        assert!(!dir.exists());
        child.wait().expect("reaped");
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
