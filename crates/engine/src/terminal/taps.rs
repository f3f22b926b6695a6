//! The fan-out of a terminal's raw stream: what the reader thread read,
//! the command lines the agent typed, a person's keys, resizes and the
//! end, each a [`Tapped`] handed to the terminal's sinks (a recorder, in
//! the reader thread) and to its watchers (a person attached, through a
//! broadcast channel), and kept in a replay ring for watchers who join
//! later.
//!
//! Joining takes the replay and subscribes under the lock the reader
//! publishes under ([`Taps::watch`]), so a watcher gets every tap exactly
//! once. A slow watcher is never waited on: the channel keeps the last
//! [`LIVE_CAPACITY`] taps, and one that falls further behind skips ahead
//! (`RecvError::Lagged`).
//!
//! Bounds: the ring keeps about [`REPLAY_BYTES`] of output (the oldest
//! taps go first), the channel [`LIVE_CAPACITY`] taps, each at most one
//! read of the terminal (64 KiB) or one write to it.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::broadcast;

/// Output the replay ring keeps, in bytes.
pub(crate) const REPLAY_BYTES: usize = 1024 * 1024;

/// Taps a watcher may fall behind by before it skips ahead.
pub(crate) const LIVE_CAPACITY: usize = 4096;

/// One thing that happened on the terminal, with when.
#[derive(Debug, Clone)]
pub struct Tapped {
    /// The wall-clock time (for a listing, a recording's header).
    pub at: SystemTime,
    /// The monotonic time (for intervals).
    pub mono: Instant,
    /// What happened.
    pub tap: Tap,
}

/// What happened on the terminal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tap {
    /// Bytes the terminal's programs wrote, as the reader read them:
    /// not masked, not rendered.
    Output(Arc<[u8]>),
    /// An agent's command line, as it is typed into the shell (its text,
    /// not masked).
    Command(String),
    /// A person's keys; `echo` is false when the terminal hid what was
    /// typed (a password prompt: `pty::hides_input`).
    Input {
        /// The bytes written.
        bytes: Arc<[u8]>,
        /// Whether what was typed could be seen.
        echo: bool,
    },
    /// The terminal's window size changed.
    Resize {
        /// Rows.
        rows: u16,
        /// Columns.
        cols: u16,
    },
    /// The shell's terminal ended: how, in words.
    Exit(String),
}

impl Tap {
    /// The bytes of output this tap counts for the ring's bound.
    fn weight(&self) -> usize {
        match self {
            Tap::Output(bytes) | Tap::Input { bytes, .. } => bytes.len(),
            Tap::Command(text) | Tap::Exit(text) => text.len(),
            Tap::Resize { .. } => 0,
        }
    }
}

/// How a view shows an agent's command ([`Tap::Command`]), as a person
/// would have typed it at a prompt: `$ `, its lines after the first with
/// `> `, each line ended as a terminal ends it (`\r\n`).
pub fn typed_at_prompt(command: &str) -> String {
    let mut text = String::from("$ ");
    text.push_str(&command.replace('\n', "\r\n> "));
    text.push_str("\r\n");
    text
}

/// A consumer called in the reader thread for every tap (a recorder). It
/// must not block for long: it buffers, and drops what passes its bound.
pub trait Sink: Send {
    /// Takes one tap.
    fn tap(&mut self, tapped: &Tapped);
}

/// A watcher's start: what came before, then everything after, with no
/// tap missed or doubled between the two.
#[derive(Debug)]
pub struct Watch {
    /// The taps the ring holds (all, or those of the asked-for span).
    pub replay: Vec<Arc<Tapped>>,
    /// Everything from now on. `Lagged(n)`: this watcher skipped `n`
    /// taps; `Closed`: the terminal ended.
    pub live: broadcast::Receiver<Arc<Tapped>>,
    /// The ring had already dropped output from inside the asked-for span
    /// (or, with no span, any output at all).
    pub cut: bool,
}

/// The taps of one terminal.
pub(super) struct Taps {
    inner: Mutex<Inner>,
}

struct Inner {
    ring: VecDeque<Arc<Tapped>>,
    ring_bytes: usize,
    /// When the ring last dropped a tap, if ever.
    dropped_at: Option<Instant>,
    /// `None` once the terminal ended: watchers see `Closed`.
    live: Option<broadcast::Sender<Arc<Tapped>>>,
    sinks: Vec<Box<dyn Sink>>,
}

impl Taps {
    /// Taps with nothing in them yet.
    pub(super) fn new() -> Taps {
        let (live, _) = broadcast::channel(LIVE_CAPACITY);
        Taps {
            inner: Mutex::new(Inner {
                ring: VecDeque::new(),
                ring_bytes: 0,
                dropped_at: None,
                live: Some(live),
                sinks: Vec::new(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Hands `tap` to the sinks and the watchers and keeps it for replay.
    /// After the terminal ended, nothing more is published.
    pub(super) fn publish(&self, tap: Tap) {
        let tapped = Arc::new(Tapped { at: SystemTime::now(), mono: Instant::now(), tap });
        let mut inner = self.lock();
        if inner.live.is_none() {
            return;
        }
        for sink in &mut inner.sinks {
            sink.tap(&tapped);
        }
        if let Some(live) = &inner.live
            && live.receiver_count() > 0
        {
            let _ = live.send(Arc::clone(&tapped));
        }
        inner.ring_bytes += tapped.tap.weight();
        inner.ring.push_back(tapped);
        while inner.ring_bytes > REPLAY_BYTES {
            let Some(old) = inner.ring.pop_front() else { break };
            inner.ring_bytes -= old.tap.weight();
            inner.dropped_at = Some(old.mono);
        }
    }

    /// Publishes the end (`how`) and closes the watchers' channel.
    pub(super) fn close(&self, how: String) {
        self.publish(Tap::Exit(how));
        self.lock().live = None;
    }

    /// The replay (all the ring holds, or what came within `since`) and a
    /// live receiver, under one lock. After the end, the receiver is
    /// already closed.
    pub(super) fn watch(&self, since: Option<Duration>) -> Watch {
        let inner = self.lock();
        let from = since.and_then(|span| Instant::now().checked_sub(span));
        let replay: Vec<Arc<Tapped>> = inner
            .ring
            .iter()
            .filter(|tapped| from.is_none_or(|from| tapped.mono >= from))
            .cloned()
            .collect();
        let cut = match (inner.dropped_at, from) {
            (Some(dropped), Some(from)) => dropped >= from,
            (Some(_), None) => true,
            (None, _) => false,
        };
        let live = match &inner.live {
            Some(live) => live.subscribe(),
            None => {
                let (closed, receiver) = broadcast::channel(1);
                drop(closed);
                receiver
            }
        };
        Watch { replay, live, cut }
    }

    /// Adds a sink; it sees every tap from now on.
    pub(super) fn add_sink(&self, sink: Box<dyn Sink>) {
        self.lock().sinks.push(sink);
    }

    /// How many watchers are subscribed.
    pub(super) fn watchers(&self) -> usize {
        self.lock().live.as_ref().map_or(0, broadcast::Sender::receiver_count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output(taps: &Taps, text: &str) {
        taps.publish(Tap::Output(Arc::from(text.as_bytes())));
    }

    fn text(tapped: &Tapped) -> String {
        match &tapped.tap {
            Tap::Output(bytes) => String::from_utf8_lossy(bytes).into_owned(),
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn a_watcher_gets_every_tap_once_across_the_join() {
        let taps = Arc::new(Taps::new());
        output(&taps, "before ");
        // The reader publishes on another thread while watchers join: each
        // watcher's replay plus live is the whole stream, in order.
        let writer = {
            let taps = Arc::clone(&taps);
            std::thread::spawn(move || {
                for n in 0..2000 {
                    output(&taps, &format!("{n} "));
                }
            })
        };
        let mut watches = Vec::new();
        for _ in 0..50 {
            watches.push(taps.watch(None));
            std::thread::yield_now();
        }
        writer.join().expect("writer");
        taps.close("done".to_owned());
        let whole: String = std::iter::once("before ".to_owned())
            .chain((0..2000).map(|n| format!("{n} ")))
            .collect();
        for watch in watches {
            let Watch { replay, mut live, cut } = watch;
            assert!(!cut);
            let mut seen: String = replay.iter().map(|t| text(t)).collect();
            loop {
                match live.try_recv() {
                    Ok(tapped) if matches!(tapped.tap, Tap::Exit(_)) => break,
                    Ok(tapped) => seen.push_str(&text(&tapped)),
                    Err(err) => panic!("the live stream ended early: {err:?}"),
                }
            }
            assert_eq!(seen, whole);
        }
    }

    #[test]
    fn the_ring_keeps_its_bound_and_says_it_cut() {
        let taps = Taps::new();
        let chunk = "x".repeat(64 * 1024);
        for _ in 0..40 {
            output(&taps, &chunk);
        }
        let watch = taps.watch(None);
        let kept: usize = watch.replay.iter().map(|t| t.tap.weight()).sum();
        assert!(kept <= REPLAY_BYTES, "{kept}");
        assert!(kept > REPLAY_BYTES - 64 * 1024, "{kept}");
        assert!(watch.cut);
        // A span shorter than what the ring holds is not cut.
        let recent = taps.watch(Some(Duration::ZERO));
        assert!(recent.replay.len() <= 1);
    }

    #[test]
    fn a_slow_watcher_skips_ahead_and_never_holds_up_the_reader() {
        let taps = Taps::new();
        let mut watch = taps.watch(None);
        for n in 0..(LIVE_CAPACITY + 10) {
            output(&taps, &format!("{n}\n"));
        }
        assert!(matches!(watch.live.try_recv(), Err(broadcast::error::TryRecvError::Lagged(10))));
        assert!(watch.live.try_recv().is_ok());
    }

    #[test]
    fn after_the_end_a_watcher_is_told_at_once() {
        let taps = Taps::new();
        output(&taps, "last words");
        taps.close("the shell exited".to_owned());
        let mut watch = taps.watch(None);
        assert_eq!(watch.replay.len(), 2);
        assert!(matches!(&watch.replay[1].tap, Tap::Exit(how) if how == "the shell exited"));
        assert!(matches!(watch.live.try_recv(), Err(broadcast::error::TryRecvError::Closed)));
    }

    struct Count(Arc<Mutex<usize>>);

    impl Sink for Count {
        fn tap(&mut self, _: &Tapped) {
            *self.0.lock().expect("count") += 1;
        }
    }

    #[test]
    fn a_command_reads_as_typed_at_a_prompt() {
        assert_eq!(typed_at_prompt("echo hello"), "$ echo hello\r\n");
        assert_eq!(
            typed_at_prompt("for i in 1 2\ndo echo $i; done"),
            "$ for i in 1 2\r\n> do echo $i; done\r\n"
        );
    }

    #[test]
    fn sinks_see_every_tap_from_when_they_were_added() {
        let taps = Taps::new();
        output(&taps, "before");
        let seen = Arc::new(Mutex::new(0));
        taps.add_sink(Box::new(Count(Arc::clone(&seen))));
        output(&taps, "a");
        taps.publish(Tap::Resize { rows: 10, cols: 20 });
        assert_eq!(*seen.lock().expect("count"), 2);
    }
}
