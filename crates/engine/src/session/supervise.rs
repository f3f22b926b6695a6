//! The supervisor: one task per shell that watches the running command. It
//! looks whether the foreground job is blocked reading the terminal (no
//! kernel event exists for that, so it samples soon after the output goes
//! quiet), ends a command whose end record lost its marker or whose line
//! another program read, and stops a command that ran unwatched past its
//! limit: the whole command line, never the shell or its `&` jobs.
//!
//! It does not decide when to look or stop (the pure rules of `timing.rs`),
//! build replies (the kill is recorded in the command for the next one) or
//! know the shell driver. Invariant: it never stops a command while a call
//! waits on it, and never takes the session's `tokio` mutex; the shared
//! state's std mutex only for short sections, never across `.await`.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use tokio::time::Instant;

use crate::input_wait::{self, Reading};
use crate::process::{self, TerminationMode};
use crate::terminal::pty::{self, PtyAccess};

use super::command::{KillState, TerminalLook};
use super::shared::{Shared, wait_for};
use super::timing::{self, Found, Look};

/// What the supervisor of one shell needs.
pub(super) struct Supervisor {
    shared: Arc<Shared>,
    /// A handle on the PTY master: the foreground group.
    master: std::os::fd::OwnedFd,
    /// The PTY slave's path, to recognise reads of the terminal.
    tty: PathBuf,
    /// The PTY reader's "chunk in hand" flag (`pty::all_output_taken`).
    in_hand: Arc<AtomicBool>,
    shell_pid: i32,
    grace: Duration,
}

impl Supervisor {
    /// The supervisor of shell `shell_pid` on the terminal `pty` (with
    /// `in_hand`, its reader's flag), stopping with `grace` between SIGTERM
    /// and SIGKILL.
    pub(super) fn new(
        shared: Arc<Shared>,
        pty: PtyAccess,
        in_hand: Arc<AtomicBool>,
        shell_pid: i32,
        grace: Duration,
    ) -> Supervisor {
        let PtyAccess { master, tty } = pty;
        Supervisor { shared, master, tty, in_hand, shell_pid, grace }
    }
}

/// What the supervisor reads of the running command.
struct Watched {
    seq: u64,
    quiet_from: Instant,
    limit: Option<Duration>,
    stop_at: Option<Instant>,
}

impl Watched {
    /// The running command, while it is to be watched: not finished and not
    /// being killed (before its start marker too: a shell whose integration
    /// a command damaged may never print it, and must not hang).
    fn take(shared: &Shared) -> Option<Watched> {
        let state = shared.lock();
        let command = state.command()?;
        (!command.is_finished() && command.kill() == KillState::NotKilled).then(|| Watched {
            seq: command.seq(),
            quiet_from: command.quiet_from(),
            limit: command.unwatched_limit(),
            stop_at: command.stop_at(),
        })
    }
}

/// A command, and an instant that concerns it.
#[derive(Clone, Copy)]
struct SeenAt {
    seq: u64,
    at: Instant,
}

/// The supervisor's last look at the foreground job.
struct JobSeen {
    /// The command and when.
    when: SeenAt,
    /// Whether the job sat at the terminal.
    at_terminal: bool,
    /// Its CPU time.
    cpu: input_wait::JobCpu,
}

/// What the supervisor remembers from one look to the next.
struct Memory {
    /// When the running command's input wait is looked at.
    look: Look,
    /// The command a look found the shell back reading its terminal before
    /// its start marker, with everything it wrote read: a second look in a
    /// row that finds it so ends the command as never started.
    unstarted: Option<u64>,
    /// An end record seen without its marker: the command and when.
    record_seen: Option<SeenAt>,
    /// The last look at the job.
    last_job: Option<JobSeen>,
}

/// Watches the running command for the life of the shell: looks whether
/// it is blocked reading the terminal (no kernel event exists for that, so
/// it samples, soon after the output goes quiet), accounts that time, and
/// stops the command once it has run unwatched past its limit: no call
/// waiting on it, polling it or sending it input for longer than the limit
/// (time waiting for input not counted). While a call waits, it never kills.
pub(super) async fn supervise(supervisor: Supervisor) {
    let shared = &supervisor.shared;
    let mut memory =
        Memory { look: Look::new(0), unstarted: None, record_seen: None, last_job: None };
    loop {
        let notified = shared.changed();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let Some(watched) = Watched::take(shared) else {
            notified.await;
            continue;
        };
        if memory.look.seq() != watched.seq {
            memory.look = Look::new(watched.seq);
        }
        let now = Instant::now();
        let due = memory.look.due(watched.quiet_from);
        let wake = if now >= due {
            match supervisor.look(&mut memory, &watched, now) {
                Some(pause) => now + pause,
                None => continue,
            }
        } else if let Some(limit) = watched.limit
            && timing::stops_now(watched.stop_at, now, memory.look.waiting() || memory.look.idle())
        {
            kill_foreground(&supervisor, watched.seq, limit).await;
            continue;
        } else {
            match watched.stop_at {
                Some(at) if at > now => due.min(at),
                _ => due,
            }
        };
        tokio::select! {
            () = &mut notified => {}
            () = tokio::time::sleep_until(wake) => {}
        }
    }
}

impl Supervisor {
    /// One look at the running command, due `now`: an end record that lost
    /// its marker, a command that never started, a stopped shell, and
    /// whether the job waits for input. Returns how long to wait for news
    /// before the next look (`None`: look again at once).
    fn look(&self, memory: &mut Memory, watched: &Watched, now: Instant) -> Option<Duration> {
        let Supervisor { shared, master, .. } = self;
        // Output still unread from the terminal is news the blocked read
        // may be about to answer (the shell's end marker, a new prompt):
        // look again once it has been read.
        let drained = !pty::has_unread_output(master);
        if drained && shared.lock().has_record(watched.seq) {
            return self.end_by_record(memory, watched.seq, now);
        }
        let front = pty::foreground_group(master);
        let top = shared.lock().levels().top().map(|level| level.pid());
        if self.never_started(memory, watched.seq, top) {
            return None;
        }
        if let Some(shell) = top
            && stopped(shell)
        {
            // `kill -STOP $$`: nothing else would ever wake the shell.
            tracing::info!(shell, "the shell was stopped; continuing it");
            process::signal_group(shell, nix::sys::signal::Signal::SIGCONT);
        }
        self.look_at_job(memory, watched, front, top, drained, now);
        None
    }

    /// The shell sent the end record of command `seq`. Its marker follows
    /// at once, unless a command redirected or swallowed it: after a moment
    /// with everything read, the record alone ends it. Returns how long to
    /// wait for the marker (`None`: it was ended now).
    fn end_by_record(&self, memory: &mut Memory, seq: u64, now: Instant) -> Option<Duration> {
        let seen = *memory.record_seen.get_or_insert(SeenAt { seq, at: now });
        if seen.seq == seq && now >= seen.at + MARKER_GRACE {
            self.shared.lock().end_without_marker(Instant::now());
            self.shared.notify();
            return None;
        }
        if seen.seq != seq {
            memory.record_seen = Some(SeenAt { seq, at: now });
        }
        Some(MARKER_GRACE)
    }

    /// Whether command `seq` was just ended as never started. Before its
    /// start marker the command has not begun: a shell (`top`) back reading
    /// its terminal (whoever has the foreground: a program that takes it
    /// may have read the line typed) will never begin it. The marker is
    /// written before the shell reads again, so once all it wrote is read,
    /// its absence is final; a second look confirms the shell did not just
    /// pass through a read.
    fn never_started(&self, memory: &mut Memory, seq: u64, top: Option<i32>) -> bool {
        let Supervisor { shared, master, tty, in_hand, .. } = self;
        let before_start =
            shared.lock().command_seq_mut(seq).is_some_and(|c| !c.start_seen() && !c.is_damaged());
        let back_at_prompt = before_start
            && top.is_some_and(|shell| input_wait::process_reads_terminal(shell, tty))
            && pty::all_output_taken(master, in_hand);
        if !back_at_prompt {
            memory.unstarted = None;
        } else if memory.unstarted == Some(seq) {
            memory.unstarted = None;
            if shared.lock().never_started(seq, Instant::now()) {
                tracing::info!(seq, "the shell read again before the start");
            }
            shared.notify();
            return true;
        } else {
            memory.unstarted = Some(seq);
        }
        false
    }

    /// Looks at the foreground job (`front`, with `top` the innermost
    /// shell of ours): whether it waits for input (with everything it wrote
    /// `drained`), or sits at the terminal using no CPU, and records that
    /// in the command. A waiting call returns as soon as the program waits
    /// for input, so the call is woken.
    fn look_at_job(
        &self,
        memory: &mut Memory,
        watched: &Watched,
        front: Option<i32>,
        top: Option<i32>,
        drained: bool,
        now: Instant,
    ) {
        let Supervisor { shared, master, tty, shell_pid, .. } = self;
        let job = front.map(|group| input_wait::job_look(group, tty, *shell_pid));
        let reading = job.as_ref().map_or(Reading::No, |job| job.reading);
        let waiting = reading == Reading::Prompt && drained;
        // At the terminal at this look and the last, using no CPU in
        // between: a remote or interactive session at rest.
        let at_terminal = job.as_ref().is_some_and(|job| job.at_terminal);
        let idle = match (&job, &memory.last_job) {
            (Some(job), Some(last)) => {
                at_terminal
                    && last.at_terminal
                    && last.when.seq == watched.seq
                    && job.cpu.still_since(&last.cpu, now.saturating_duration_since(last.when.at))
            }
            _ => false,
        };
        memory.last_job = job.map(|job| JobSeen {
            when: SeenAt { seq: watched.seq, at: now },
            at_terminal,
            cpu: job.cpu,
        });
        let accrued = memory.look.observe(now, Found { waiting, idle }, watched.quiet_from);
        if let Some(command) = shared.lock().command_seq_mut(watched.seq) {
            let seen = TerminalLook {
                waiting,
                unsure: reading == Reading::Unsure,
                shell_reading: waiting && front.is_some() && front == top,
                confirmed: memory.look.confirmed(),
                idle: memory.look.idle(),
                keys: pty::reads_keys(master),
            };
            command.record_look(now, seen, accrued);
        }
        shared.notify();
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
        let Some(command) = state.command_seq_mut(seq) else { return };
        command.begin_kill(limit);
        command.started_ticks()
    };
    tracing::info!(seq, ?limit, "stopping a terminal command that ran unwatched past its limit");
    process::signal_group(*shell_pid, nix::sys::signal::Signal::SIGINT);
    let mut targets = process::command_targets(*shell_pid, seq, since);
    // A nested shell of ours in the foreground is not the command: it stays.
    let foreground = pty::foreground_group(master)
        .filter(|&group| group != *shell_pid && !shared.lock().levels().is_integrated_shell(group));
    targets.groups.extend(foreground);
    let mode = process::terminate(&targets, *grace).await;
    let finished = wait_for(shared, *grace, |state| {
        state.command().is_none_or(|c| c.seq() != seq || c.is_finished())
    })
    .await;
    let mode = if finished {
        mode.unwrap_or(TerminationMode::Soft)
    } else {
        process::terminate_session(*shell_pid, None, *grace).await;
        TerminationMode::Hard
    };
    if let Some(command) = shared.lock().command_seq_mut(seq) {
        command.end_kill(limit, mode);
    }
    shared.notify();
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
