//! The supervisor: one task per shell that watches the running command. It
//! samples whether the foreground job is blocked reading the terminal (no
//! kernel event exists for that), soon after the output goes quiet, and
//! accounts that time; it stops the command once it has run unwatched past
//! its limit, with no call waiting on it ([`Watch`]), polling it or sending
//! it input. It stops the whole command line, never the shell or its `&`
//! jobs, and never while a call waits.
//!
//! It never takes the session's `tokio` mutex (it must act while no call
//! runs, and must not hold up one that does); it takes the shared state's
//! std mutex for short sections, never across `.await`. It builds no
//! replies: the kill is recorded in the running command for the next one.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::input_wait;
use crate::process::{self, TerminationMode};
use crate::pty;

use super::state::{Shared, wait_for};

/// What the supervisor of one shell needs.
pub(super) struct Supervisor {
    pub(super) shared: Arc<Shared>,
    /// A handle on the PTY master: the foreground group.
    pub(super) master: std::os::fd::OwnedFd,
    /// The PTY slave's path, to recognise reads of the terminal.
    pub(super) tty: PathBuf,
    pub(super) shell_pid: i32,
    pub(super) grace: Duration,
}

/// A command whose output (and our input) has been quiet this long is
/// looked at: is it waiting for input? Short, so that a prompt is answered
/// within about a second; long enough that a program that just got input
/// has woken up to read it.
pub(super) const INPUT_QUIET: Duration = Duration::from_millis(150);
/// Between looks while the command stays quiet: from the first interval,
/// doubling up to the longest while it is not waiting for input.
const INPUT_SAMPLE: Duration = Duration::from_millis(250);
/// After a look finds the program waiting, the look that confirms it. One
/// look is not enough: the shell back at its prompt reads the terminal too,
/// and the output it wrote before (its end marker) may not have been read
/// from the terminal yet when the machine is busy.
const INPUT_CONFIRM: Duration = Duration::from_millis(100);
const INPUT_SAMPLE_MAX: Duration = Duration::from_secs(1);

/// The supervisor's last look at one command.
struct Look {
    seq: u64,
    at: Option<Instant>,
    waiting: bool,
    confirmed: bool,
    interval: Duration,
}

impl Look {
    fn new(seq: u64) -> Look {
        Look { seq, at: None, waiting: false, confirmed: false, interval: INPUT_SAMPLE }
    }

    /// When to look next: soon after the output goes quiet, then at a
    /// growing interval while nothing changes.
    fn due(&self, quiet_from: Instant) -> Instant {
        let after_quiet = quiet_from + INPUT_QUIET;
        match self.at {
            Some(at) if at >= after_quiet && self.waiting && !self.confirmed => at + INPUT_CONFIRM,
            Some(at) if at >= after_quiet => at + self.interval,
            _ => after_quiet,
        }
    }

    fn record(&mut self, now: Instant, waiting: bool, fresh: bool) {
        // Confirmed: waiting at two looks with no output in between.
        self.confirmed = waiting && self.waiting && !fresh;
        self.interval =
            if waiting || fresh { INPUT_SAMPLE } else { (self.interval * 2).min(INPUT_SAMPLE_MAX) };
        self.at = Some(now);
        self.waiting = waiting;
    }
}

/// What the supervisor reads of the running command.
struct Watched {
    seq: u64,
    quiet_from: Instant,
    limit: Option<Duration>,
    watchers: u32,
    unwatched_since: Instant,
    input_wait: Duration,
}

/// Watches the running command for the life of the shell: looks whether
/// it is blocked reading the terminal (no kernel event exists for that, so
/// it samples, soon after the output goes quiet), accounts that time, and
/// stops the command once it has run unwatched past its limit: no call
/// waiting on it, polling it or sending it input for longer than the limit
/// (time waiting for input not counted). While a call waits, it never kills.
pub(super) async fn supervise(supervisor: Supervisor) {
    let Supervisor { shared, master, tty, .. } = &supervisor;
    let mut look = Look::new(0);
    // A record seen without its marker: the command and when.
    let mut record_seen: Option<(u64, Instant)> = None;
    loop {
        let notified = shared.changed.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let watched = {
            let state = shared.lock();
            match &state.running {
                // Before its start marker too: a shell whose integration a
                // command damaged may never print it, and must not hang.
                Some(running) if running.finished.is_none() && running.kill.is_none() => {
                    Some(Watched {
                        seq: running.seq,
                        quiet_from: running.quiet_from(),
                        limit: running.unwatched_limit,
                        watchers: running.watchers,
                        unwatched_since: running.unwatched_since,
                        input_wait: running.input_wait,
                    })
                }
                _ => None,
            }
        };
        let Some(watched) = watched else {
            notified.await;
            continue;
        };
        if look.seq != watched.seq {
            look = Look::new(watched.seq);
        }
        let now = Instant::now();
        let due = look.due(watched.quiet_from);
        if now >= due {
            // Output still unread from the terminal is news the blocked read
            // may be about to answer (the shell's end marker, a new prompt):
            // look again once it has been read.
            let drained = !pty::has_unread_output(master);
            if drained && shared.lock().has_record(watched.seq) {
                // The shell sent the end record. Its marker follows at once,
                // unless a command redirected or swallowed it: after a
                // moment with everything read, the record alone ends it.
                let seen = *record_seen.get_or_insert((watched.seq, now));
                if seen.0 == watched.seq && now >= seen.1 + MARKER_GRACE {
                    shared.lock().end_without_marker(Instant::now());
                    shared.changed.notify_waiters();
                    continue;
                }
                if seen.0 != watched.seq {
                    record_seen = Some((watched.seq, now));
                }
                tokio::select! {
                    () = &mut notified => {}
                    () = tokio::time::sleep(MARKER_GRACE) => {}
                }
                continue;
            }
            let front = pty::foreground_group(master);
            let top = shared.lock().integ.top().map(|level| level.pid);
            if let Some(shell) = top
                && stopped(shell)
            {
                // `kill -STOP $$`: nothing else would ever wake the shell.
                tracing::info!(shell, "the shell was stopped; continuing it");
                process::signal_group(shell, nix::sys::signal::Signal::SIGCONT);
            }
            let waiting =
                front.is_some_and(|group| input_wait::group_reads_terminal(group, tty)) && drained;
            let shell_reading = waiting && front.is_some() && front == top;
            let accrued = match look.at {
                Some(at) if look.waiting && waiting => now - at,
                _ => Duration::ZERO,
            };
            let fresh = look.at.is_none_or(|at| at < watched.quiet_from + INPUT_QUIET);
            look.record(now, waiting, fresh);
            if let Some(running) = shared.lock().running.as_mut().filter(|r| r.seq == watched.seq) {
                running.input_wait += accrued;
                running.waiting_for_input = waiting;
                running.shell_reading = shell_reading;
                running.input_confirmed_at = look.confirmed.then_some(now);
            }
            // A waiting call returns as soon as the program waits for input.
            shared.changed.notify_waiters();
            continue;
        }
        let stop_at = match watched.limit {
            Some(limit) if watched.watchers == 0 => {
                Some((limit, watched.unwatched_since + limit + watched.input_wait))
            }
            _ => None,
        };
        if let Some((limit, at)) = stop_at
            && now >= at
            && !look.waiting
        {
            kill_foreground(&supervisor, watched.seq, limit).await;
            continue;
        }
        let wake = match stop_at {
            Some((_, at)) if at > now => due.min(at),
            _ => due,
        };
        tokio::select! {
            () = &mut notified => {}
            () = tokio::time::sleep_until(wake) => {}
        }
    }
}

/// Stops the running command as a whole, never the shell, and records how
/// it died: no later part of its command line runs.
///
/// Interactive bash abandons the rest of a command line (and any loop) when
/// it receives SIGINT itself while its job runs, whatever then ends the job;
/// a job killed by SIGTERM alone lets the next part run. So the shell gets
/// SIGINT first, then the foreground job and the groups the command left
/// behind get SIGTERM, and SIGKILL after the grace period. A shell busy
/// with builtins (a `while :` loop) ends its loop on the SIGINT; if it does
/// not come back to its prompt, it is ended (and restarted).
async fn kill_foreground(supervisor: &Supervisor, seq: u64, limit: Duration) {
    let Supervisor { shared, master, shell_pid, grace, .. } = supervisor;
    let since = {
        let mut state = shared.lock();
        let Some(running) = state.running.as_mut().filter(|r| r.seq == seq) else { return };
        running.kill = Some((limit, None));
        running.started_ticks
    };
    tracing::info!(seq, ?limit, "stopping a terminal command that ran unwatched past its limit");
    process::signal_group(*shell_pid, nix::sys::signal::Signal::SIGINT);
    let mut targets = process::command_targets(*shell_pid, seq, since);
    // A nested shell of ours in the foreground is not the command: it stays.
    let foreground = pty::foreground_group(master)
        .filter(|&group| group != *shell_pid && !shared.lock().is_integrated_shell(group));
    targets.groups.extend(foreground);
    let mode = process::terminate(&targets, *grace).await;
    let finished = wait_for(shared, *grace, |state| {
        state.running.as_ref().is_none_or(|r| r.seq != seq || r.finished.is_some())
    })
    .await;
    let mode = if finished {
        mode.unwrap_or(TerminationMode::Soft)
    } else {
        process::terminate_session(*shell_pid, None, *grace).await;
        TerminationMode::Hard
    };
    if let Some(running) = shared.lock().running.as_mut().filter(|r| r.seq == seq) {
        running.kill = Some((limit, Some(mode)));
    }
    shared.changed.notify_waiters();
}

/// A call waiting on the running command, for as long as it waits: the
/// command is watched, so the unwatched-time limit does not run. When the
/// wait ends in any way (reply, timeout, cancellation, or the call's future
/// dropped), unwatched time starts counting from that moment.
pub(super) struct Watch<'a> {
    shared: &'a Shared,
    seq: Option<u64>,
}

impl Watch<'_> {
    pub(super) fn begin(shared: &Shared) -> Watch<'_> {
        let seq = shared.lock().running.as_mut().map(|running| {
            running.watchers += 1;
            running.seq
        });
        Watch { shared, seq }
    }
}

impl Drop for Watch<'_> {
    fn drop(&mut self) {
        let Some(seq) = self.seq else { return };
        if let Some(running) = self.shared.lock().running.as_mut().filter(|r| r.seq == seq) {
            running.watchers = running.watchers.saturating_sub(1);
            running.unwatched_since = Instant::now();
            running.input_wait = Duration::ZERO;
        }
        self.shared.changed.notify_waiters();
    }
}

/// How long an end record may wait for its marker once all the output has
/// been read.
const MARKER_GRACE: Duration = Duration::from_millis(100);

/// Whether process `pid` is stopped (`T` in `/proc/PID/stat`): by a
/// signal, not by a tracer.
fn stopped(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
    stat.rfind(')').and_then(|end| stat[end + 1..].split_ascii_whitespace().next()) == Some("T")
}
