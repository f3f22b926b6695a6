//! Who may type into a session's terminal, and when: the arbitration
//! between the agent and a person attached for writing.
//!
//! - One writer at a time: the agent's command line is written whole
//!   while it holds the typing lock (`Gate::typing`), and a person's keys
//!   wait for it to end, so a line is never broken up by keys.
//! - One person at a time holds the session for writing ([`Gate::hold`]);
//!   while they do, the session refuses the agent's new commands and input
//!   (`NotRun::PersonHolds`), so nothing is typed into the person's line.
//! - What a person typed is counted for the agent's next reply
//!   ([`Gate::take_typed`]): when and how many keys, and how many of them
//!   were typed with the terminal's echo off (a password), never the text.
//!
//! Bounds: a few counters; the lock is held for one write of at most the
//! bytes given, within the terminal's write limit.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

/// The arbitration state of one session (it outlives a reset).
#[derive(Debug, Default)]
pub struct Gate {
    typing: tokio::sync::Mutex<()>,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Who holds the session for writing: a number and since when.
    holder: Option<(u64, SystemTime)>,
    next_id: u64,
    /// What a person typed since the agent was last told.
    typed: Option<PersonTyped>,
    /// Whether a person typed since the agent's last command began: a
    /// command that then runs at the prompt is theirs.
    since_command: bool,
}

/// What a person typed into the session since the agent was last told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PersonTyped {
    /// The first key.
    pub first: SystemTime,
    /// The last key.
    pub last: SystemTime,
    /// Keys in all (an escape sequence such as an arrow counts once).
    pub keys: u64,
    /// Of them, keys typed while the terminal's echo was off (a password
    /// prompt): what they were is never kept.
    pub hidden: u64,
}

/// A person's hold on the session for writing; dropping it lets go.
#[derive(Debug)]
pub struct Hold {
    gate: Arc<Gate>,
    id: u64,
}

/// The session is held for writing by someone else, since `since`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    /// When they took it.
    pub since: SystemTime,
}

impl Gate {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Takes the session for writing, unless someone holds it.
    pub fn hold(self: &Arc<Self>) -> Result<Hold, Held> {
        let mut state = self.lock();
        if let Some((_, since)) = state.holder {
            return Err(Held { since });
        }
        state.next_id += 1;
        let id = state.next_id;
        state.holder = Some((id, SystemTime::now()));
        Ok(Hold { gate: Arc::clone(self), id })
    }

    /// Since when a person holds the session for writing, if one does.
    pub fn held_since(&self) -> Option<SystemTime> {
        self.lock().holder.map(|(_, since)| since)
    }

    /// Whether `hold` is the current hold of this gate.
    pub(crate) fn is_holder(&self, hold: &Hold) -> bool {
        std::ptr::eq(self, Arc::as_ptr(&hold.gate))
            && self.lock().holder.is_some_and(|(id, _)| id == hold.id)
    }

    /// The typing lock: held for the whole of one write.
    pub(crate) async fn typing(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.typing.lock().await
    }

    /// Counts a person's `bytes`, written with the terminal's echo on or off.
    pub(crate) fn note_typed(&self, bytes: &[u8], echo: bool) {
        let keys = count_keys(bytes);
        if keys == 0 {
            return;
        }
        let now = SystemTime::now();
        let mut state = self.lock();
        state.since_command = true;
        let typed =
            state.typed.get_or_insert(PersonTyped { first: now, last: now, keys: 0, hidden: 0 });
        typed.last = now;
        typed.keys += keys;
        if !echo {
            typed.hidden += keys;
        }
    }

    /// What a person typed since the last call of this, for a reply.
    pub fn take_typed(&self) -> Option<PersonTyped> {
        self.lock().typed.take()
    }

    /// Whether a person typed since the agent's last command began or
    /// ended.
    pub(crate) fn typed_since_command(&self) -> bool {
        self.lock().since_command
    }

    /// The agent's command began or ended: what runs at the prompt after
    /// it is the person's only if they type again. Returns whether they
    /// had typed.
    pub(crate) fn command_turn(&self) -> bool {
        std::mem::take(&mut self.lock().since_command)
    }
}

impl Hold {
    /// The gate this hold is on.
    pub fn gate(&self) -> &Arc<Gate> {
        &self.gate
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        let mut state = self.gate.lock();
        if state.holder.is_some_and(|(id, _)| id == self.id) {
            state.holder = None;
        }
    }
}

/// Keys in `bytes` as a person typed them: each character once, and an
/// escape sequence (an arrow, a function key: `ESC [ … final` or `ESC O x`)
/// once.
pub(crate) fn count_keys(bytes: &[u8]) -> u64 {
    let text = String::from_utf8_lossy(bytes);
    let mut chars = text.chars().peekable();
    let mut keys = 0;
    while let Some(c) = chars.next() {
        keys += 1;
        if c != '\x1b' {
            continue;
        }
        match chars.peek() {
            Some('[') => {
                chars.next();
                while let Some(&next) = chars.peek() {
                    chars.next();
                    if ('\x40'..='\x7e').contains(&next) {
                        break;
                    }
                }
            }
            Some('O') => {
                chars.next();
                chars.next();
            }
            _ => {}
        }
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_person_holds_at_a_time_and_letting_go_frees_it() {
        let gate = Arc::new(Gate::default());
        let hold = gate.hold().expect("free");
        assert!(gate.is_holder(&hold));
        let since = gate.held_since().expect("held");
        assert_eq!(gate.hold().expect_err("held"), Held { since });
        drop(hold);
        assert_eq!(gate.held_since(), None);
        let again = gate.hold().expect("free again");
        // A hold of another gate is not this gate's holder.
        let other = Arc::new(Gate::default());
        assert!(!other.is_holder(&again));
    }

    #[test]
    fn keys_are_counted_as_typed_and_hidden_ones_apart() {
        assert_eq!(count_keys(b"ls\r"), 3);
        assert_eq!(count_keys(b"\x1b[A\x1b[B\x1bOP"), 3);
        assert_eq!(count_keys("é\x1b".as_bytes()), 2);
        assert_eq!(count_keys(b"\x1b[1;5C"), 1);
        let gate = Gate::default();
        assert_eq!(gate.take_typed(), None);
        gate.note_typed(b"hunter2\r", false);
        gate.note_typed(b"\x1b[A", true);
        assert!(gate.typed_since_command());
        let typed = gate.take_typed().expect("typed");
        assert_eq!((typed.keys, typed.hidden), (9, 8));
        assert!(typed.first <= typed.last);
        assert_eq!(gate.take_typed(), None);
        assert!(gate.command_turn());
        assert!(!gate.typed_since_command());
        assert!(!gate.command_turn());
    }
}
