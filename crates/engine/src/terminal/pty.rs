//! The pseudo-terminal: opening it, reading it on a thread of its own, and
//! writing to it.
//!
//! The reader thread is the only reader of the master side; it hands every
//! chunk to a callback, writes back what the callback returns (a terminal's
//! answers to queries, never blocking), and stops when the terminal hangs
//! up or when the [`Pty`] is dropped. This module does not interpret the
//! bytes.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use nix::errno::Errno;
use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::pty::{OpenptyResult, Winsize, openpty};
use nix::sys::termios::{InputFlags, LocalFlags, OutputFlags, SetArg, tcgetattr, tcsetattr};

/// The master side of a PTY, with its reader thread.
pub(crate) struct Pty {
    master: OwnedFd,
    /// Writing a byte here tells the reader thread to stop.
    stop: OwnedFd,
    reader: Option<JoinHandle<()>>,
    /// Set by the reader thread from just before it reads a chunk until
    /// its callback has taken it (see [`all_output_taken`]).
    in_hand: Arc<AtomicBool>,
}

/// A freshly opened PTY whose slave side is still to be given to a child.
pub(crate) struct PtyPair {
    /// The master side.
    pub master: OwnedFd,
    /// The slave side: the child's stdin, stdout and stderr.
    pub slave: OwnedFd,
    /// The slave side's device path (`/dev/pts/N`).
    pub tty: std::path::PathBuf,
}

/// Opens a PTY of `rows` by `cols` with terminal settings fit for an agent:
/// no XON/XOFF flow control (a stray ^S must not freeze the session), UTF-8
/// aware line editing, and no output post-processing.
pub(crate) fn open(rows: u16, cols: u16) -> io::Result<PtyPair> {
    let size = Winsize { ws_row: rows, ws_col: cols, ws_xpixel: 0, ws_ypixel: 0 };
    let OpenptyResult { master, slave } = openpty(Some(&size), None)?;
    let mut termios = tcgetattr(&slave)?;
    termios.input_flags.remove(InputFlags::IXON);
    termios.input_flags.insert(InputFlags::IUTF8);
    // No output post-processing (no "\n" to "\r\n"): the kernel then copies
    // output on its fast path, several times faster for big outputs, and our
    // renderer treats a bare line feed as a new line anyway.
    termios.output_flags.remove(OutputFlags::OPOST);
    tcsetattr(&slave, SetArg::TCSANOW, &termios)?;
    for fd in [&master, &slave] {
        let flags = fcntl(fd, FcntlArg::F_GETFD)?;
        let flags = nix::fcntl::FdFlag::from_bits_retain(flags) | nix::fcntl::FdFlag::FD_CLOEXEC;
        fcntl(fd, FcntlArg::F_SETFD(flags))?;
    }
    let flags = OFlag::from_bits_retain(fcntl(&master, FcntlArg::F_GETFL)?);
    fcntl(&master, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
    let tty = nix::unistd::ttyname(&slave)?;
    Ok(PtyPair { master, slave, tty })
}

impl Pty {
    /// Starts the reader thread on `master`. `on_output` gets every chunk
    /// read, then `None` once when the terminal hangs up. What it returns is
    /// written back to the terminal at once, without waiting: a terminal's
    /// answers to queries (cursor position, device attributes). They are
    /// dropped when the program has left the terminal in line mode with
    /// echo (it is not set up to read them) and, past what fits, when its
    /// input queue is full: the reader never blocks on a program that does
    /// not read.
    ///
    /// `also` is a descriptor the thread watches too (the completion
    /// channel): when it is readable, `on_output` gets [`Event::Ready`] and
    /// must read it, or the thread would spin.
    pub(crate) fn start(
        master: OwnedFd,
        name: &str,
        also: Option<OwnedFd>,
        mut on_output: impl FnMut(Event<'_>) -> Vec<u8> + Send + 'static,
    ) -> io::Result<Pty> {
        let (stop_rx, stop) = nix::unistd::pipe()?;
        let read_side = master.try_clone()?;
        let in_hand = Arc::new(AtomicBool::new(false));
        let holding = Arc::clone(&in_hand);
        let reader = std::thread::Builder::new().name(format!("pty-{name}")).spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                let chunk = read_chunk(&read_side, &stop_rx, also.as_ref(), &mut buf, &holding);
                // Cleared once the chunk (if any) was handed on, below.
                let _cleared = Cleared(&holding);
                match chunk {
                    Ok(Chunk::Output(n)) => {
                        // Sampled as close to the read as possible: the
                        // mode the program was in when it asked.
                        let welcome = reads_answers(&read_side);
                        let answer = on_output(Event::Output(&buf[..n]));
                        if welcome && !answer.is_empty() {
                            // The master side is non-blocking.
                            let _ = write_some(&read_side, &answer);
                        }
                    }
                    Ok(Chunk::Ready) => {
                        let _ = on_output(Event::Ready);
                    }
                    Ok(Chunk::Nothing) => continue,
                    // EIO: every process holding the slave side is gone.
                    Err(_) => break,
                }
            }
            let _ = on_output(Event::HangUp);
        })?;
        Ok(Pty { master, stop, reader: Some(reader), in_hand })
    }

    /// What [`all_output_taken`] needs besides the master: whether the
    /// reader thread holds a chunk its callback has not taken yet.
    pub(crate) fn in_hand(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.in_hand)
    }

    /// Writes all of `bytes`, waiting at most `limit` for a program that is
    /// not reading its input.
    pub(crate) async fn write_all(&self, bytes: &[u8], limit: Duration) -> io::Result<()> {
        let written = match write_some(&self.master, bytes) {
            Ok(n) if n == bytes.len() => return Ok(()),
            Ok(n) => n,
            Err(err) => return Err(err),
        };
        // The terminal's input queue is full: finish on a blocking thread.
        let master = self.master.try_clone()?;
        let rest = bytes[written..].to_vec();
        tokio::task::spawn_blocking(move || {
            let deadline = std::time::Instant::now() + limit;
            let mut rest = rest.as_slice();
            while !rest.is_empty() {
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the program is not reading its input",
                    ));
                }
                let mut fds = [PollFd::new(master.as_fd(), PollFlags::POLLOUT)];
                let timeout = PollTimeout::try_from(left.as_millis().min(10_000) as i32)
                    .unwrap_or(PollTimeout::MAX);
                match poll(&mut fds, timeout) {
                    Ok(_) | Err(Errno::EINTR) => {}
                    Err(err) => return Err(err.into()),
                }
                let n = write_some(&master, rest)?;
                rest = &rest[n..];
            }
            Ok(())
        })
        .await
        .map_err(io::Error::other)?
    }

    /// Writes as much of `bytes` as the terminal accepts, waiting for room
    /// at most `stall` at a time, and stops as soon as `keep_going` says
    /// the reader is gone. Returns how many bytes were written.
    ///
    /// Never blocks the session on a program that is not reading its input:
    /// the wait is event-driven (the master becomes writable) and bounded,
    /// and dropping the future stops the writing at once, so no write of
    /// ours can land after the call that made it has ended.
    pub(crate) async fn write_accepted(
        &self,
        bytes: &[u8],
        stall: Duration,
        mut keep_going: impl FnMut() -> bool,
    ) -> io::Result<usize> {
        // The deprecation is about inner types whose descriptor can change or
        // close under the registration; an `OwnedFd` of our own cannot, so
        // the safe constructor is sound here (and keeps `unsafe` out of this
        // module).
        #[allow(deprecated)]
        let master = tokio::io::unix::AsyncFd::with_interest(
            self.master.try_clone()?,
            tokio::io::Interest::WRITABLE,
        )?;
        let mut written = 0;
        while written < bytes.len() && keep_going() {
            let mut ready = match tokio::time::timeout(stall, master.writable()).await {
                Ok(ready) => ready?,
                // The terminal's input queue stayed full: the program is not
                // reading.
                Err(_) => break,
            };
            match ready.try_io(|fd| {
                nix::unistd::write(fd.get_ref(), &bytes[written..]).map_err(io::Error::from)
            }) {
                Ok(Ok(n)) => written += n,
                Ok(Err(err)) if err.kind() == io::ErrorKind::Interrupted => {}
                Ok(Err(err)) => return Err(err),
                // Not writable after all: wait for the next edge.
                Err(_would_block) => {}
            }
        }
        Ok(written)
    }

    /// The terminal's foreground process group, asked on the master side
    /// itself (no second handle: one system call).
    pub(crate) fn foreground(&self) -> Option<i32> {
        foreground_group(&self.master)
    }

    /// A second handle on the master side, for a supervisor that asks for
    /// the foreground group or sends a key.
    pub(crate) fn handle(&self) -> io::Result<OwnedFd> {
        self.master.try_clone()
    }

    /// A second handle on the master side with the slave side's path `tty`:
    /// what a task that watches the terminal from outside needs.
    pub(crate) fn access(&self, tty: &std::path::Path) -> io::Result<PtyAccess> {
        Ok(PtyAccess { master: self.handle()?, tty: tty.to_owned() })
    }
}

/// A task's view of a PTY: a handle on its master side (the foreground
/// group, writing a key) and its slave side's path (whether a process is
/// reading the terminal, discarding unread input).
pub(crate) struct PtyAccess {
    /// A handle on the master side.
    pub(crate) master: OwnedFd,
    /// The slave side's device path (`/dev/pts/N`).
    pub(crate) tty: std::path::PathBuf,
}

impl Drop for Pty {
    fn drop(&mut self) {
        let _ = nix::unistd::write(&self.stop, b"x");
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}

/// The process group in the foreground of the terminal `master`: the
/// running command's, or the shell's own when it is at its prompt.
pub(crate) fn foreground_group(master: &OwnedFd) -> Option<i32> {
    nix::unistd::tcgetpgrp(master).ok().map(|pid| pid.as_raw())
}

/// Discards the terminal's unread input (what was typed but no program has
/// read yet), as the terminal itself does when ^C is typed. Done before
/// sending ^C, so the key is never queued behind input nobody reads.
///
/// Opens the slave `tty` by its path without making it our controlling
/// terminal, and closes it at once.
pub(crate) fn discard_input(tty: &std::path::Path) -> io::Result<()> {
    let slave = nix::fcntl::open(
        tty,
        OFlag::O_RDWR | OFlag::O_NOCTTY | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )?;
    nix::sys::termios::tcflush(&slave, nix::sys::termios::FlushArg::TCIFLUSH)?;
    Ok(())
}

/// Whether the terminal `master` has output the reader thread has not read
/// yet. Does not wait.
pub(crate) fn has_unread_output(master: &OwnedFd) -> bool {
    let mut fds = [PollFd::new(master.as_fd(), PollFlags::POLLIN)];
    matches!(poll(&mut fds, PollTimeout::ZERO), Ok(n) if n > 0)
        && fds[0].revents().is_some_and(|r| r.contains(PollFlags::POLLIN))
}

/// Writes a few bytes (a key) to the terminal `master` without waiting.
pub(crate) fn write_key(master: &OwnedFd, bytes: &[u8]) -> io::Result<()> {
    write_some(master, bytes).map(|_| ())
}

/// Whether the program on the terminal can take a terminal's answer: it
/// has turned off line editing or echo, as every program that reads the
/// answers to its queries does first (prompt_toolkit, vim, `read -s`). In
/// line mode with echo (`printf`, `cat` of a binary file) the answer would
/// be echoed into the output and, once the program ends, typed into the
/// shell as a command.
/// Whether what is typed now stays hidden: the terminal reads lines
/// (canonical mode) without echoing them, as a password prompt does
/// (`getpass`, `sudo`, `ssh`, `read -s`). A program that reads keys one at
/// a time (readline, an editor) turns echo off too, and echoes them itself.
pub(crate) fn hides_input(master: &OwnedFd) -> bool {
    tcgetattr(master).is_ok_and(|termios| {
        let flags = termios.local_flags;
        flags.contains(LocalFlags::ICANON) && !flags.contains(LocalFlags::ECHO)
    })
}

/// The character that discards a partial line in the terminal's line
/// mode (`VKILL`, C-u unless `stty kill` changed it); `None` out of line
/// mode (raw), or where the terminal has none.
pub(crate) fn kill_character(master: &OwnedFd) -> Option<u8> {
    let termios = tcgetattr(master).ok()?;
    let kill = termios.control_chars[nix::sys::termios::SpecialCharacterIndices::VKILL as usize];
    (termios.local_flags.contains(LocalFlags::ICANON) && kill != 0).then_some(kill)
}

/// Whether the program on the terminal reads keys, not lines: it has
/// turned line mode (`ICANON`) off, as readline does while it edits a line.
pub(crate) fn reads_keys(master: &OwnedFd) -> bool {
    tcgetattr(master).is_ok_and(|termios| !termios.local_flags.contains(LocalFlags::ICANON))
}

fn reads_answers(master: &OwnedFd) -> bool {
    tcgetattr(master)
        .is_ok_and(|termios| !termios.local_flags.contains(LocalFlags::ICANON | LocalFlags::ECHO))
}

/// Clears the reader's "chunk in hand" flag when dropped: after the
/// callback took the chunk, or when there was none.
struct Cleared<'a>(&'a AtomicBool);

impl Drop for Cleared<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

/// Whether every byte the program wrote to the terminal `master` before
/// this call has been handed to the reader's callback: none is left unread
/// and the reader thread (`in_hand`, from [`Pty::in_hand`]) holds no chunk
/// it has read and not handed on. The flag is set before each read, so
/// checking the master first and the flag second leaves no gap.
pub(crate) fn all_output_taken(master: &OwnedFd, in_hand: &AtomicBool) -> bool {
    !has_unread_output(master) && !in_hand.load(Ordering::SeqCst)
}

/// What the reader thread's callback is told.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Event<'a> {
    /// Bytes the program wrote to the terminal.
    Output(&'a [u8]),
    /// The other watched descriptor is readable.
    Ready,
    /// The terminal hung up: every process holding its slave side is gone.
    HangUp,
}

enum Chunk {
    Output(usize),
    Ready,
    Nothing,
}

fn read_chunk(
    master: &OwnedFd,
    stop: &OwnedFd,
    also: Option<&OwnedFd>,
    buf: &mut [u8],
    in_hand: &AtomicBool,
) -> io::Result<Chunk> {
    let mut fds = vec![
        PollFd::new(master.as_fd(), PollFlags::POLLIN),
        PollFd::new(stop.as_fd(), PollFlags::POLLIN),
    ];
    if let Some(also) = also {
        fds.push(PollFd::new(also.as_fd(), PollFlags::POLLIN));
    }
    match poll(&mut fds, PollTimeout::NONE) {
        Ok(_) => {}
        Err(Errno::EINTR) => return Ok(Chunk::Nothing),
        Err(err) => return Err(err.into()),
    }
    if fds[1].revents().is_some_and(|r| !r.is_empty()) {
        return Err(io::Error::other("stopped"));
    }
    let also_ready = fds.get(2).and_then(PollFd::revents).is_some_and(|r| !r.is_empty());
    let output = fds[0].revents().is_some_and(|r| !r.is_empty());
    if !output {
        return Ok(if also_ready { Chunk::Ready } else { Chunk::Nothing });
    }
    // Before the read: what it takes is then never out of both the master
    // and this flag's sight.
    in_hand.store(true, Ordering::SeqCst);
    match nix::unistd::read(master.as_fd(), buf) {
        Ok(0) => Err(io::Error::from(io::ErrorKind::UnexpectedEof)),
        Ok(n) => Ok(Chunk::Output(n)),
        Err(Errno::EAGAIN | Errno::EINTR) => Ok(Chunk::Nothing),
        Err(err) => Err(err.into()),
    }
}

fn write_some(fd: &OwnedFd, bytes: &[u8]) -> io::Result<usize> {
    let mut written = 0;
    while written < bytes.len() {
        match nix::unistd::write(fd, &bytes[written..]) {
            Ok(n) => written += n,
            Err(Errno::EINTR) => {}
            Err(Errno::EAGAIN) => break,
            Err(err) => return Err(err.into()),
        }
    }
    Ok(written)
}
