//! The orphan guard: a separate process that outlives the server and stops
//! whatever the server was running when the server dies.
//!
//! Every child of the server gets a parent-death signal, but that reaches
//! only the direct child: a `sleep 300 &` started by a command, or the jobs
//! of a PTY session, would survive a server killed with SIGKILL. So the
//! server starts a guard (its own executable with a hidden subcommand) and
//! tells it, one line per event on the guard's stdin, which process groups
//! and sessions are live. When that pipe reaches end of file, because the
//! server closed it or died, the guard stops everything still watched and
//! exits.
//!
//! [`Guard`] is the server's handle; [`serve`] is the guard process's whole
//! life. This module does not decide what to watch (the runner and the
//! sessions do), and it neither builds processes nor sends signals itself:
//! `process` does both.
//!
//! The protocol is one line per event: `+g PGID` and `-g PGID` watch and
//! forget a process group, `+s SID` and `-s SID` a session.

use std::collections::BTreeSet;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ExitStatus};
use std::sync::{Mutex, PoisonError, mpsc};
use std::time::Duration;

use crate::process::{self, TerminationMode};

/// How long the guard gives what it stops between SIGTERM and SIGKILL.
pub const GUARD_GRACE: Duration = Duration::from_secs(2);

/// The server's handle on its orphan guard process.
///
/// Telling the guard what to watch is a blocking write of a few bytes to a
/// pipe the guard keeps draining, so it is cheap enough to call from async
/// code. If the guard has died, the first failed write is logged and later
/// calls do nothing: a missing safety net must not break the server.
/// Dropping the handle closes the pipe, which tells the guard the server has
/// ended.
#[derive(Debug)]
pub struct Guard {
    /// The write end of the guard's stdin; `None` once closed, or once a
    /// write failed because the guard is gone.
    input: Mutex<Option<ChildStdin>>,
    /// The guard process, until it is handed to a reaper on shutdown.
    child: Option<Child>,
    /// The guard's process id, for logs.
    pid: u32,
}

impl Guard {
    /// Starts `program args` as the orphan guard (the server passes its own
    /// executable and its hidden guard subcommand). The guard gets its own
    /// process group and no parent-death signal, so it outlives the server.
    pub fn spawn(program: &Path, args: &[&str]) -> io::Result<Guard> {
        let mut child = process::guard_command(program).args(args).spawn()?;
        let input = child.stdin.take();
        let pid = child.id();
        tracing::debug!(pid, program = %program.display(), "started the orphan guard");
        Ok(Guard { input: Mutex::new(input), child: Some(child), pid })
    }

    /// The guard's process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Whether the guard is still listening, as far as we know: false once a
    /// write to it has failed.
    pub fn is_connected(&self) -> bool {
        self.input.lock().unwrap_or_else(PoisonError::into_inner).is_some()
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
    pub fn shutdown(mut self, wait: Duration) -> Option<ExitStatus> {
        self.close_input();
        let finished = reap_in_background(self.child.take()?)?;
        match finished.recv_timeout(wait) {
            Ok(Ok(status)) => Some(status),
            Ok(Err(err)) => {
                tracing::warn!(pid = self.pid, %err, "could not wait for the orphan guard");
                None
            }
            Err(_) => None,
        }
    }

    fn send(&self, message: Message) {
        let mut input = self.input.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(pipe) = input.as_mut() else { return };
        if let Err(err) = pipe.write_all(message.line().as_bytes()) {
            tracing::warn!(
                pid = self.pid,
                %err,
                "the orphan guard is gone; if the server dies, what it runs will not be cleaned up"
            );
            *input = None;
        }
    }

    /// Closing the pipe is the guard's signal that the server has ended.
    fn close_input(&mut self) {
        self.input.get_mut().unwrap_or_else(PoisonError::into_inner).take();
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.close_input();
        // Dropping must not block, but the guard must not stay a zombie
        // while the server lives on either, so a thread waits for it.
        if let Some(child) = self.child.take() {
            reap_in_background(child);
        }
    }
}

/// Waits for `child` on a thread of its own, which ends when the child does,
/// and returns where its exit status will arrive. `None` if no thread could
/// be started (the child then stays a zombie until the server exits).
fn reap_in_background(mut child: Child) -> Option<mpsc::Receiver<io::Result<ExitStatus>>> {
    let (sender, receiver) = mpsc::channel();
    let spawned =
        std::thread::Builder::new().name("shellkeep-guard-reaper".into()).spawn(move || {
            // Nobody may be listening any more; the status only matters to
            // `shutdown`.
            let _ = sender.send(child.wait());
        });
    match spawned {
        Ok(_) => Some(receiver),
        Err(err) => {
            tracing::warn!(%err, "could not start a thread to reap the orphan guard");
            None
        }
    }
}

/// The guard process's main loop, run by the server binary's hidden guard
/// subcommand with the pipe from the server as `input`.
///
/// It records what the server watches and forgets until `input` ends
/// (the server closed it, or died), then stops every process group still
/// watched, and every process group in each watched session: SIGTERM, a
/// grace of [`GUARD_GRACE`], then SIGKILL. It returns how they went away
/// (`None` when nothing was alive), or an error if it could not start.
///
/// It ignores SIGINT and SIGHUP first, so that a ^C or a closing terminal
/// does not take the safety net down before the server.
pub fn serve(input: impl Read) -> io::Result<Option<TerminationMode>> {
    if let Err(err) = process::ignore_interrupt_and_hangup() {
        // A guard that a ^C can kill still beats no guard.
        tracing::warn!(%err, "the orphan guard could not ignore SIGINT and SIGHUP");
    }
    watch_until_closed(input, GUARD_GRACE)
}

/// [`serve`] without touching signal dispositions, which would leak into
/// every later child of the process (tests run it inside the test binary).
fn watch_until_closed(input: impl Read, grace: Duration) -> io::Result<Option<TerminationMode>> {
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
    let groups = groups_to_stop(&watched);
    if groups.is_empty() {
        tracing::debug!("the server has ended and left nothing running");
        return Ok(None);
    }
    tracing::info!(?groups, "the server has ended; stopping what it left running");
    Ok(runtime.block_on(process::terminate_groups(&groups, grace)))
}

/// The process groups behind `watched`: the groups themselves, and every
/// group with a live member in each session.
fn groups_to_stop(watched: &BTreeSet<Target>) -> Vec<i32> {
    let mut groups = BTreeSet::new();
    for target in watched {
        match *target {
            Target::Group(pgid) => {
                groups.insert(pgid);
            }
            Target::Session(sid) => groups.extend(process::session_groups(sid)),
        }
    }
    groups.into_iter().collect()
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
            let _ = sender.send(watch_until_closed(guard_end, GUARD_GRACE));
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
        let mut child = process::group_command("bash")
            .args(["-c", "sleep 300 & sleep 300 & wait"])
            .stdin(Stdio::null())
            .spawn()
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
        let mut child = process::group_command("setsid")
            .args(["bash", "-c", "set -m; echo $$; sleep 300 & (sleep 300 & wait) & wait"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
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
        let mut child = process::group_command("sleep")
            .arg("300")
            .stdin(Stdio::null())
            .spawn()
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
    fn a_dead_guard_makes_the_handle_quiet_not_fatal() {
        let guard = Guard::spawn(Path::new("bash"), &["-c", "exit 0"]).expect("spawn guard");
        let pgid = guard.pid() as i32;
        assert!(
            wait_until(Duration::from_secs(10), || process::live_group_members(pgid).is_empty())
        );
        for pgid in 100..110 {
            guard.watch_group(pgid);
        }
        assert!(!guard.is_connected());
        drop(guard);
    }
}
