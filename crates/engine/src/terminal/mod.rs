//! The terminal layer: one owner of a shell's PTY ([`Terminal`]), its
//! reader thread, who may write to it, and the fan-out of what it reads.
//!
//! Every chunk the reader thread reads goes first to the session's
//! renderer (the callback `Terminal::start` is given: `session::shared`'s
//! `State::on_event`), then to the taps (`taps.rs`): the sinks (a recorder,
//! in the reader thread), the watchers (a person attached, through a
//! broadcast channel that skips a slow one ahead) and the replay ring.
//! Everything written goes through the [`Gate`]: the agent's command line
//! whole, a person's keys between lines, and never the agent's new
//! command while a person holds the session.
//!
//! The raw stream is not masked here: a view that leaves the engine masks
//! it with [`RawMasker`] (what raw masking cannot catch is said there).

pub(crate) mod gate;
mod markers;
mod masked;
pub(crate) mod pty;
mod taps;

use std::io;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::Duration;

pub(crate) use gate::{Gate, Held};
pub use gate::{Hold, PersonTyped};
pub use masked::RawMasker;
use pty::Pty;
pub(crate) use taps::Sink;
use taps::Taps;
pub use taps::{Tap, Tapped, Watch, typed_at_prompt};

/// How long a person's keys may wait for the terminal to take them.
const PERSON_WRITE_LIMIT: Duration = Duration::from_secs(5);

/// How long a person's first keys at the idle prompt wait for the shell to
/// edit lines again ([`Terminal::person_line_editing`]).
const EDITING_WAIT: Duration = Duration::from_secs(1);

/// How often that wait looks.
const EDITING_LOOK: Duration = Duration::from_millis(2);

/// The error for keys from someone who does not hold the session.
fn not_holder() -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        "this person no longer holds the session for writing",
    )
}

/// What a terminal starts with.
pub(crate) struct Setup<'a> {
    /// The session's name, in the reader thread's name.
    pub(crate) name: &'a str,
    /// A descriptor the reader thread also watches (see [`Pty::start`]).
    pub(crate) also: Option<OwnedFd>,
    /// Its window: rows, columns.
    pub(crate) size: (u16, u16),
    /// The session's gate.
    pub(crate) gate: Arc<Gate>,
    /// Sinks in place before the first byte (a recorder).
    pub(crate) sinks: Vec<Box<dyn Sink>>,
}

/// What the renderer made of one event of the reader thread.
#[derive(Debug, Default)]
pub(crate) struct Rendered {
    /// Answers to terminal queries, to write back.
    pub(crate) answers: Vec<u8>,
    /// The bytes those watching the terminal are shown: the chunk, but
    /// for the echo of the line that runs an agent's command (the
    /// `Tap::Command` before it names the command). The integration's
    /// markers are taken out after (`markers.rs`).
    pub(crate) shown: Vec<u8>,
}

/// One shell's terminal: the PTY, its reader, its taps and its gate.
///
/// Shared as an `Arc` outside the session's call lock, so that a person's
/// keys and a watcher's join never wait for an agent's call. Holders other
/// than the shell take what they need (a [`Watch`]) and let it go: the
/// shell's end closes the taps (`Terminal::close`) whoever still holds it.
pub struct Terminal {
    pty: Pty,
    taps: Arc<Taps>,
    gate: Arc<Gate>,
    size: (u16, u16),
}

impl std::fmt::Debug for Terminal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Terminal").field("size", &self.size).finish_non_exhaustive()
    }
}

impl Terminal {
    /// Starts the reader thread of the PTY `master` as `setup` says (of
    /// `size`, rows and columns, also watching `also`, see [`Pty::start`]),
    /// with `sinks` in place before the first byte: every event goes to `renderer`
    /// first (its answers are written back to the terminal), then what it
    /// says was shown goes to the taps, and only then is `woken` called
    /// (it wakes the calls waiting on the session), so that a view has a
    /// command's last output before the agent can send the next command.
    pub(crate) fn start(
        master: OwnedFd,
        Setup { name, also, size, gate, sinks }: Setup<'_>,
        mut renderer: impl FnMut(pty::Event<'_>) -> Rendered + Send + 'static,
        woken: impl Fn() + Send + 'static,
    ) -> io::Result<Terminal> {
        let taps = Arc::new(Taps::new());
        for sink in sinks {
            taps.add_sink(sink);
        }
        let tapped = Arc::clone(&taps);
        let mut markers = markers::Markers::default();
        let pty = Pty::start(master, name, also, move |event| {
            let Rendered { answers, shown } = renderer(event);
            let shown = markers.filter(&shown);
            if !shown.is_empty() {
                tapped.publish(Tap::Output(Arc::from(shown)));
            }
            if let pty::Event::HangUp = event {
                tapped.close("the shell ended".to_owned());
            }
            woken();
            answers
        })?;
        Ok(Terminal { pty, taps, gate, size })
    }

    /// The replay and a live receiver (see [`Watch`]); with `since`, the
    /// replay is only what came within that span.
    pub fn watch(&self, since: Option<Duration>) -> Watch {
        self.taps.watch(since)
    }

    /// The terminal's window size: rows, columns. The agent's size wins; a
    /// person's terminal does not change it.
    pub fn size(&self) -> (u16, u16) {
        self.size
    }

    /// Adds a sink that sees every tap from now on, in the reader thread.
    pub fn add_sink(&self, sink: Box<dyn Sink>) {
        self.taps.add_sink(sink);
    }

    /// How many watchers are subscribed now.
    pub fn watchers(&self) -> usize {
        self.taps.watchers()
    }

    /// Whether what is typed now stays hidden (a password prompt: see
    /// [`pty::hides_input`]).
    pub fn hides_input(&self) -> bool {
        self.pty.handle().is_ok_and(|master| pty::hides_input(&master))
    }

    /// The character that discards a partial line typed into the terminal
    /// (see [`pty::kill_character`]).
    pub(crate) fn kill_character(&self) -> Option<u8> {
        self.pty.handle().ok().and_then(|master| pty::kill_character(&master))
    }

    /// Since when a person holds the session for writing, if one does.
    pub(crate) fn held_since(&self) -> Option<std::time::SystemTime> {
        self.gate.held_since()
    }

    /// The PTY (its master's handle, its reader's flag).
    pub(crate) fn pty(&self) -> &Pty {
        &self.pty
    }

    /// Types the agent's `line` (which runs `command`) whole, with no
    /// person's key in between; waits at most `limit` for the terminal.
    pub(crate) async fn type_line(
        &self,
        command: &str,
        line: &[u8],
        limit: Duration,
    ) -> io::Result<()> {
        let _typing = self.gate.typing().await;
        if !command.is_empty() {
            self.taps.publish(Tap::Command(command.to_owned()));
        }
        self.pty.write_all(line, limit).await
    }

    /// Writes the agent's input to the running program (see
    /// [`Pty::write_accepted`]), with no person's key in between.
    pub(crate) async fn write_input(
        &self,
        bytes: &[u8],
        stall: Duration,
        keep_going: impl FnMut() -> bool,
    ) -> io::Result<usize> {
        let _typing = self.gate.typing().await;
        self.pty.write_accepted(bytes, stall, keep_going).await
    }

    /// Before a person's first keys at the shell's idle prompt: when
    /// `due()` says so (under the typing lock), types `line`, which turns
    /// the shell's line editing back on for them, then waits until the
    /// shell reads keys (readline set the terminal up) and the server has
    /// seen the line's echo end (`echo_pending()` is false), so that their
    /// keys reach readline, echoed once. At most [`EDITING_WAIT`]. Neither
    /// has an event of its own (a terminal's mode changes without one), so
    /// it looks every [`EDITING_LOOK`]: once per hold at most. Returns
    /// false when the line was typed and the shell did not answer in time.
    /// Refused unless `hold` is this session's current hold.
    pub(crate) async fn person_line_editing(
        &self,
        hold: &Hold,
        line: &[u8],
        due: impl FnOnce() -> bool,
        echo_pending: impl Fn() -> bool,
    ) -> io::Result<bool> {
        if !self.gate.is_holder(hold) {
            return Err(not_holder());
        }
        let _typing = self.gate.typing().await;
        if !due() {
            return Ok(true);
        }
        self.pty.write_all(line, PERSON_WRITE_LIMIT).await?;
        let deadline = tokio::time::Instant::now() + EDITING_WAIT;
        while echo_pending() || !self.pty.handle().is_ok_and(|master| pty::reads_keys(&master)) {
            if tokio::time::Instant::now() >= deadline {
                return Ok(false);
            }
            tokio::time::sleep(EDITING_LOOK).await;
        }
        Ok(true)
    }

    /// Writes a person's keys, once no agent line is being typed; counts
    /// them for the agent's next reply (those typed with echo off only by
    /// number) and taps them. Refused unless `hold` is this session's
    /// current hold.
    pub(crate) async fn person_keys(&self, hold: &Hold, bytes: &[u8]) -> io::Result<()> {
        if !self.gate.is_holder(hold) {
            return Err(not_holder());
        }
        let _typing = self.gate.typing().await;
        let echo = !self.hides_input();
        // Counted before they are written: the shell may run a line they
        // end and report it before this task runs again.
        self.gate.note_typed(bytes, echo);
        self.taps.publish(Tap::Input { bytes: Arc::from(bytes), echo });
        self.pty.write_all(bytes, PERSON_WRITE_LIMIT).await
    }

    /// The shell ended (`how`): watchers are told and their channel closes.
    pub(crate) fn close(&self, how: &str) {
        self.taps.close(how.to_owned());
    }
}
