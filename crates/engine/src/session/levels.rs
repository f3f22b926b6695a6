//! The shells of one session that carry the integration (the session's own,
//! then nested ones), a reinstall in progress, and the events about them for
//! the next reply; [`Levels::on_marker`] says what an end marker of the
//! integration means (a reinstall's handshake, or an outer shell's prompt
//! after a nested one exited).
//!
//! Plain data behind methods: it reads and writes nothing, touches neither
//! the terminal nor the command, and takes no lock (it lives inside the
//! shared state). Invariant: an end record is believed only from the shells
//! of the levels and the one being given the integration, by the pid the
//! kernel names, never by what a process looks like (its program, auxiliary
//! vector or command line, which it can set on itself) and never by a timer;
//! a program image (`proc_shell::fingerprint`) only notices `exec bash`.

use std::time::Duration;

use tokio::time::Instant;

use super::call::Event;

/// A shell that carries the integration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Level {
    /// Its pid.
    pid: i32,
    /// Its identity when the integration was installed.
    fingerprint: u64,
    /// The command (by sequence number) that started it, in the shell one
    /// level out; `None` for the session's own shell and for a shell that
    /// replaced one with `exec`.
    launched_by: Option<u64>,
}

impl Level {
    /// Its pid.
    pub(super) fn pid(&self) -> i32 {
        self.pid
    }

    /// Its program image's identity when the integration was installed.
    pub(super) fn fingerprint(&self) -> u64 {
        self.fingerprint
    }
}

/// A reinstall in progress: the line was typed, the handshake (an end
/// marker carrying `seq`) has not arrived yet.
#[derive(Debug, Clone)]
pub(super) struct Reinstall {
    /// The handshake's sequence number.
    seq: u64,
    /// The shell being given the integration.
    pid: i32,
    /// Its identity.
    fingerprint: u64,
    /// Whether it replaced the shell of the current level (`exec`).
    replaced: bool,
    /// The running command when it was started (the `bash` or `exec bash`).
    command_seq: u64,
    /// When the attempt is given up.
    deadline: Instant,
}

impl Reinstall {
    /// A reinstall as `start` says, begun at `now`.
    pub(super) fn new(start: ReinstallStart, now: Instant) -> Reinstall {
        let ReinstallStart { handshake, command_seq, shell, replaced } = start;
        let deadline = now + REINSTALL_TIMEOUT;
        Reinstall {
            seq: handshake,
            pid: shell.pid,
            fingerprint: shell.fingerprint,
            replaced,
            command_seq,
            deadline,
        }
    }

    /// When the attempt is given up.
    pub(super) fn deadline(&self) -> Instant {
        self.deadline
    }
}

/// What a reinstall is begun with.
#[derive(Debug, Clone, Copy)]
pub(super) struct ReinstallStart {
    /// The handshake's sequence number.
    pub(super) handshake: u64,
    /// The running command (the `bash` or `exec bash`).
    pub(super) command_seq: u64,
    /// The shell being given the integration.
    pub(super) shell: ShellId,
    /// Whether it replaced the shell of the current level (`exec`).
    pub(super) replaced: bool,
}

/// A shell process as it is told apart from another: its pid and its
/// program image's identity (`proc_shell::fingerprint`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ShellId {
    /// Its pid.
    pub(super) pid: i32,
    /// Its program image's identity.
    pub(super) fingerprint: u64,
}

/// First sequence number of reinstall handshakes; command numbers stay far
/// below it.
pub(super) const REINSTALL_SEQ_BASE: u64 = 1 << 40;

/// How long a reinstall may take before it is given up.
pub(super) const REINSTALL_TIMEOUT: Duration = Duration::from_secs(5);

/// What an end marker of the integration means for the running command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LevelEvent {
    /// A reinstall's handshake: the new shell is at its first prompt, so the
    /// command that started it is done (status 0). What is left on the
    /// screen is the new shell's prompt and the line we typed.
    Handshake,
    /// The shell started by a command exited and its parent is back at its
    /// prompt: the command typed last (`exit`) ended with `status`.
    NestedExited {
        /// The nested shell's exit status.
        status: i32,
    },
}

/// The shells that carry the integration, outermost first, a reinstall in
/// progress, and events for the next reply.
/// Bounded: one level per nested shell, and each event is kept once.
#[derive(Default)]
pub(super) struct Levels {
    levels: Vec<Level>,
    reinstall: Option<Reinstall>,
    /// What happened to the integration since the last reply.
    events: Vec<Event>,
}

impl Levels {
    /// The levels of a session whose own shell is `pid`, with its program
    /// image's `fingerprint`.
    pub(super) fn new(pid: i32, fingerprint: Option<u64>) -> Levels {
        let levels = fingerprint
            .map(|fingerprint| vec![Level { pid, fingerprint, launched_by: None }])
            .unwrap_or_default();
        Levels { levels, reinstall: None, events: Vec::new() }
    }

    /// Whether an end record sent by process `pid` is believed: `pid` is
    /// the shell of a level, or the shell a reinstall in progress is for.
    /// The kernel reports the sender's pid; a child of the shell (even a
    /// fork that did not `exec`, even one that made its auxiliary vector
    /// and command line the shell's) has a pid of its own.
    pub(super) fn believes(&self, pid: i32) -> bool {
        self.levels.iter().any(|level| level.pid == pid)
            || self.reinstall.as_ref().is_some_and(|reinstall| reinstall.pid == pid)
    }

    /// Adds `event` for the next reply, once.
    pub(super) fn note(&mut self, event: Event) {
        if !self.events.contains(&event) {
            self.events.push(event);
        }
    }

    /// The events gathered since the last reply.
    pub(super) fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    /// The innermost shell carrying the integration.
    pub(super) fn top(&self) -> Option<&Level> {
        self.levels.last()
    }

    /// Whether a nested shell carrying the integration was started by
    /// command `seq`: its parent's record for `seq` means it exited.
    pub(super) fn launched_by(&self, seq: u64) -> bool {
        self.levels.iter().any(|level| level.launched_by == Some(seq))
    }

    /// Whether `pid` is one of the shells carrying the integration (the
    /// session's own, or a nested one).
    pub(super) fn is_integrated_shell(&self, pid: i32) -> bool {
        self.levels.iter().any(|level| level.pid == pid)
    }

    /// Whether the shell `pid` with program image `fingerprint` already
    /// carries the integration.
    pub(super) fn carries(&self, pid: i32, fingerprint: u64) -> bool {
        self.levels.iter().any(|l| l.pid == pid && l.fingerprint == fingerprint)
    }

    /// The reinstall in progress, if any.
    pub(super) fn reinstall(&self) -> Option<&Reinstall> {
        self.reinstall.as_ref()
    }

    /// A reinstall line is about to be typed.
    pub(super) fn begin_reinstall(&mut self, reinstall: Reinstall) {
        self.reinstall = Some(reinstall);
    }

    /// Gives up a reinstall whose deadline passed at `now` (the next reply
    /// says so); returns the shell it was for.
    pub(super) fn give_up_reinstall(&mut self, now: Instant) -> Option<ShellId> {
        let reinstall = self.reinstall.take_if(|r| now >= r.deadline)?;
        self.events.push(Event::ReinstallFailed);
        Some(ShellId { pid: reinstall.pid, fingerprint: reinstall.fingerprint })
    }

    /// What the end marker `seq` (with `status`) means, when it belongs to
    /// the integration rather than to a command; the levels are updated.
    pub(super) fn on_marker(&mut self, seq: u64, status: i32) -> Option<LevelEvent> {
        if let Some(reinstall) = self.reinstall.take_if(|r| r.seq == seq) {
            if reinstall.replaced {
                if let Some(level) = self.levels.iter_mut().rev().find(|l| l.pid == reinstall.pid) {
                    level.fingerprint = reinstall.fingerprint;
                }
                self.events.push(Event::IntegrationReinstalled);
            } else {
                self.levels.push(Level {
                    pid: reinstall.pid,
                    fingerprint: reinstall.fingerprint,
                    launched_by: Some(reinstall.command_seq),
                });
                self.events.push(Event::NestedShellStarted);
            }
            return Some(LevelEvent::Handshake);
        }
        let depth = self.levels.iter().position(|l| l.launched_by == Some(seq))?;
        self.levels.truncate(depth);
        self.events.push(Event::NestedShellExited { status });
        Some(LevelEvent::NestedExited { status })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reinstall(seq: u64, pid: i32, replaced: bool, command_seq: u64) -> Reinstall {
        let shell = ShellId { pid, fingerprint: 7 };
        Reinstall::new(
            ReinstallStart { handshake: seq, command_seq, shell, replaced },
            Instant::now(),
        )
    }

    #[test]
    fn a_nested_shell_is_a_level_until_its_parent_prompts_again() {
        let mut levels = Levels::new(100, Some(1));
        assert_eq!(levels.on_marker(3, 0), None, "a command's own marker");
        levels.begin_reinstall(reinstall(REINSTALL_SEQ_BASE + 1, 200, false, 3));
        assert_eq!(levels.on_marker(REINSTALL_SEQ_BASE + 1, 0), Some(LevelEvent::Handshake));
        assert_eq!(levels.top().map(Level::pid), Some(200));
        assert!(levels.is_integrated_shell(100) && levels.is_integrated_shell(200));
        assert_eq!(levels.take_events(), vec![Event::NestedShellStarted]);
        // The outer shell's marker for command 3 (the `bash`): the nested
        // shell exited, and the command typed last ends with its status.
        assert_eq!(levels.on_marker(3, 5), Some(LevelEvent::NestedExited { status: 5 }));
        assert_eq!(levels.top().map(Level::pid), Some(100));
        assert!(!levels.is_integrated_shell(200));
        assert_eq!(levels.take_events(), vec![Event::NestedShellExited { status: 5 }]);
    }

    #[test]
    fn records_are_believed_from_registered_shells_only() {
        let mut levels = Levels::new(100, Some(1));
        assert!(levels.believes(100));
        // A child of the shell, whatever it looks like.
        assert!(!levels.believes(101));
        levels.begin_reinstall(reinstall(REINSTALL_SEQ_BASE + 1, 200, false, 3));
        assert!(levels.believes(200), "the shell being given the integration");
        assert_eq!(levels.on_marker(REINSTALL_SEQ_BASE + 1, 0), Some(LevelEvent::Handshake));
        assert!(levels.believes(100) && levels.believes(200) && !levels.believes(201));
        // Once the nested shell exited, its pid means nothing any more.
        assert_eq!(levels.on_marker(3, 0), Some(LevelEvent::NestedExited { status: 0 }));
        assert!(levels.believes(100) && !levels.believes(200));
    }

    #[test]
    fn a_replaced_shell_keeps_its_level_with_its_new_image() {
        let mut levels = Levels::new(100, Some(1));
        levels.begin_reinstall(reinstall(REINSTALL_SEQ_BASE + 1, 100, true, 4));
        assert_eq!(levels.on_marker(REINSTALL_SEQ_BASE + 1, 0), Some(LevelEvent::Handshake));
        assert!(levels.carries(100, 7) && !levels.carries(100, 1));
        assert_eq!(levels.take_events(), vec![Event::IntegrationReinstalled]);
        // `exec` started no level: command 4's number means nothing more.
        assert_eq!(levels.on_marker(4, 0), None);
    }

    #[test]
    fn a_reinstall_is_given_up_only_past_its_deadline() {
        let mut levels = Levels::new(100, Some(1));
        let attempt = reinstall(REINSTALL_SEQ_BASE + 1, 200, false, 3);
        let deadline = attempt.deadline();
        levels.begin_reinstall(attempt);
        assert_eq!(levels.give_up_reinstall(deadline - Duration::from_millis(1)), None);
        assert_eq!(levels.give_up_reinstall(deadline), Some(ShellId { pid: 200, fingerprint: 7 }));
        assert!(levels.reinstall().is_none());
        assert_eq!(levels.take_events(), vec![Event::ReinstallFailed]);
    }
}
