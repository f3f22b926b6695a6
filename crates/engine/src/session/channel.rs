//! The completion channel: how a shell tells the server that a command
//! ended, and hands it its state (directory, `PATH`) and a background job's
//! environment, in a way no other process can forge and through no path a
//! command could write. This module opens and reads the socket and parses
//! what comes; it does not decide which senders to believe (`levels.rs`).
//!
//! Invariant: every message carries its sender's pid from the kernel
//! (`SO_PASSCRED`), never from its text; the server's end is read without
//! blocking, so a child that floods the channel never blocks the shell.

use std::io::IoSliceMut;
use std::os::fd::{AsRawFd, OwnedFd};

use nix::sys::socket::{
    AddressFamily, ControlMessageOwned, MsgFlags, SockFlag, SockType, recvmsg, setsockopt,
    socketpair, sockopt,
};

/// The shell's descriptor for its end of the channel. High, so that
/// commands using small descriptors (`exec 3>file`) never meet it.
pub(super) const SHELL_FD: i32 = 62;

/// At most this many datagrams are read per call of [`Channel::receive`];
/// more wait for the next call (the reader thread is told again).
const MAX_PER_RECEIVE: usize = 256;

/// The largest datagram read: the shell's are at most 2,001 bytes; a
/// larger one is dropped.
const MAX_DATAGRAM: usize = 4096;

/// The bound on each of the working directory and `PATH` in the shell's
/// state: a longer one is not taken (the last state stands).
pub(crate) const MAX_STATE_FIELD: usize = 64 * 1024;

/// The server's end of one shell's completion channel.
///
/// At spawn the shell gets the other end of a `socketpair(AF_UNIX,
/// SOCK_DGRAM)`, which its start-up file moves to descriptor [`SHELL_FD`]
/// before anything else runs; the server's end has `SO_PASSCRED` set, so
/// the kernel attaches the sending process's pid to every datagram
/// (`SCM_CREDENTIALS`). A process cannot put another pid there without
/// `CAP_SYS_ADMIN`. The prompt writes one record per command end with the
/// builtin `printf … >&62`, from the shell process itself. Children
/// inherit the descriptor and may write to it too, but their records carry
/// their own pid and are dropped by whoever reads them.
#[derive(Debug)]
pub(crate) struct Channel {
    socket: OwnedFd,
}

/// A command's end as the shell reported it.
///
/// A record is `E;<seq>;<status>;<flags>;<token>`: command `seq` ended
/// with `status`; `token` is a random number the shell draws at that
/// moment and also prints in the end marker, which so marks the end's
/// position in the output (a marker printed earlier, even by the shell,
/// which knows the sequence number, cannot carry it). The flags: `o`, the
/// shell's standard output is not the terminal (`exec >file`); `n`, the
/// command never reached the `eval` that runs it (something broke the line
/// we typed); `f`, the fallback line sent it (typed once the shell prompted
/// with the command not ended), not `PROMPT_COMMAND`; `d`, the function
/// that keeps the command's status is gone (the status may be wrong).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Record {
    /// The process that sent it (from the kernel, not from the record).
    pub(crate) pid: i32,
    /// The command's sequence number.
    pub(crate) seq: u64,
    /// Its exit status.
    pub(crate) status: i32,
    /// The shell's standard output was not the terminal.
    pub(crate) output_elsewhere: bool,
    /// The command never started: the line that runs it failed.
    pub(crate) not_run: bool,
    /// The fallback line sent it: the integration's prompt did not run.
    pub(crate) fallback: bool,
    /// The function that keeps the command's status is gone: the status
    /// may be wrong.
    pub(crate) status_lost: bool,
    /// The random number its end marker carries.
    pub(crate) token: i32,
}

/// What a shell sent on the channel.
///
/// Besides records, the shell sends data as datagrams that start with a
/// letter of their own: `D`, `P` and `C`, pieces of the working directory
/// and of `PATH` and the commit of both, or `S`, both at once, at every
/// prompt and at exit (the shell's state, [`StateParts`]); `V`, pieces of
/// its exported environment for a background job ([`Captured`]). Each
/// datagram the shell writes is one `printf` of at most 500 characters
/// (2,001 bytes), below the 4 KiB buffer of the shell's output, so that it
/// is written whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Message {
    /// A command's end.
    Record(Record),
    /// A piece of data: `kind` is its first byte (`D`, `P`, `C`, `S`, `V`),
    /// `bytes` the rest.
    Data {
        /// The process that sent it (from the kernel).
        pid: i32,
        /// The datagram's first byte.
        kind: u8,
        /// The rest of it.
        bytes: Vec<u8>,
    },
}

/// The shell's state as its prompt (or its exit) last sent it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct StateParts {
    /// The sender of the pieces gathered so far.
    pid: i32,
    cwd: Vec<u8>,
    path: Vec<u8>,
    /// A field grew past [`MAX_STATE_FIELD`]: the state is not taken.
    over: bool,
}

impl StateParts {
    /// Adds a piece `kind` from `pid` (a shell already judged to be ours);
    /// returns the working directory and `PATH` on a commit (`C`) whose
    /// fields stayed within their bound. Pieces from another sender than
    /// the last one's start afresh.
    pub(crate) fn add(&mut self, pid: i32, kind: u8, bytes: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
        if pid != self.pid {
            *self = StateParts { pid, ..StateParts::default() };
        }
        let field = match kind {
            b'S' => {
                // Both fields at once: the directory, a NUL, `PATH`.
                *self = StateParts { pid, ..StateParts::default() };
                let at = bytes.iter().position(|&b| b == 0)?;
                let (cwd, path) = (&bytes[..at], &bytes[at + 1..]);
                return (!cwd.is_empty()).then(|| (cwd.to_vec(), path.to_vec()));
            }
            b'D' => &mut self.cwd,
            b'P' => &mut self.path,
            b'C' => {
                let parts = std::mem::replace(self, StateParts { pid, ..StateParts::default() });
                return (!parts.over && !parts.cwd.is_empty()).then_some((parts.cwd, parts.path));
            }
            _ => return None,
        };
        if field.len() + bytes.len() > MAX_STATE_FIELD {
            self.over = true;
        } else {
            field.extend_from_slice(bytes);
        }
        None
    }
}

/// A shell's exported environment, gathered from its `V` datagrams while a
/// background job is being started: at most `limit` bytes are kept, what
/// comes beyond is counted.
#[derive(Debug)]
pub(crate) struct Captured {
    /// The shell whose datagrams count.
    pub(crate) pid: i32,
    /// `NAME=value` entries ended by NUL, as `env -0` writes them.
    pub(crate) bytes: Vec<u8>,
    /// How many bytes came beyond the limit.
    pub(crate) dropped: u64,
    limit: usize,
}

impl Captured {
    /// An empty capture of the environment of shell `pid`, keeping at most
    /// `limit` bytes.
    pub(crate) fn new(pid: i32, limit: usize) -> Captured {
        Captured { pid, bytes: Vec::new(), dropped: 0, limit }
    }

    /// Keeps what fits of `bytes`; counts the rest.
    pub(crate) fn keep(&mut self, bytes: &[u8]) {
        let room = self.limit.saturating_sub(self.bytes.len()).min(bytes.len());
        self.bytes.extend_from_slice(&bytes[..room]);
        self.dropped += (bytes.len() - room) as u64;
    }
}

impl Channel {
    /// A new channel: the server's end, and the shell's end to pass to
    /// the shell, which moves it to [`SHELL_FD`] first thing. Both are
    /// closed on exec here; the shell's copy is kept open across its exec.
    pub(crate) fn open() -> std::io::Result<(Channel, OwnedFd)> {
        let (server, shell) =
            socketpair(AddressFamily::Unix, SockType::Datagram, None, SockFlag::SOCK_CLOEXEC)?;
        setsockopt(&server, sockopt::PassCred, &true)?;
        Ok((Channel { socket: server }, shell))
    }

    /// Another handle on the server's end, for the reader thread to poll.
    pub(crate) fn handle(&self) -> std::io::Result<OwnedFd> {
        self.socket.try_clone()
    }

    /// Reads the datagrams waiting (at most [`MAX_PER_RECEIVE`]), without
    /// blocking, and gives each well-formed record or piece of data, with
    /// its sender's pid, to `each`. Malformed datagrams and datagrams
    /// without credentials are dropped. The reader thread polls the
    /// server's end and calls this continuously, so a child that floods
    /// the channel can never fill the queue and block the shell's prompt;
    /// each datagram costs one `recvmsg`.
    pub(crate) fn receive(&self, mut each: impl FnMut(Message)) {
        let mut buf = [0u8; MAX_DATAGRAM];
        for _ in 0..MAX_PER_RECEIVE {
            let mut space = nix::cmsg_space!(nix::sys::socket::UnixCredentials);
            let mut iov = [IoSliceMut::new(&mut buf)];
            let received = recvmsg::<()>(
                self.socket.as_raw_fd(),
                &mut iov,
                Some(&mut space),
                MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_CMSG_CLOEXEC,
            );
            let Ok(message) = received else { return };
            let truncated = message.flags.contains(MsgFlags::MSG_TRUNC);
            let pid = message.cmsgs().ok().and_then(|mut cmsgs| {
                cmsgs.find_map(|cmsg| match cmsg {
                    ControlMessageOwned::ScmCredentials(creds) => Some(creds.pid()),
                    _ => None,
                })
            });
            let len = message.bytes;
            if truncated {
                continue;
            }
            let Some(pid) = pid else { continue };
            match buf[..len].first() {
                Some(&kind @ (b'D' | b'P' | b'C' | b'S' | b'V')) => {
                    each(Message::Data { pid, kind, bytes: buf[1..len].to_vec() });
                }
                _ => {
                    if let Some(record) = parse(pid, &buf[..len]) {
                        each(Message::Record(record));
                    }
                }
            }
        }
    }
}

/// Parses `E;<seq>;<status>;<flags>` sent by `pid`.
fn parse(pid: i32, bytes: &[u8]) -> Option<Record> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut fields = text.split(';');
    if fields.next()? != "E" {
        return None;
    }
    let seq = fields.next()?.parse().ok()?;
    let status = fields.next()?.parse().ok()?;
    let flags = fields.next()?;
    let token = fields.next()?.parse().ok()?;
    if fields.next().is_some() || flags.len() > 8 {
        return None;
    }
    Some(Record {
        pid,
        seq,
        status,
        output_elsewhere: flags.contains('o'),
        not_run: flags.contains('n'),
        fallback: flags.contains('f'),
        status_lost: flags.contains('d'),
        token,
    })
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    #[test]
    fn records_parse_strictly() {
        let record = |seq, status, output_elsewhere, not_run, fallback| {
            let status_lost = false;
            let token = 99;
            Some(Record {
                pid: 7,
                seq,
                status,
                output_elsewhere,
                not_run,
                fallback,
                status_lost,
                token,
            })
        };
        assert_eq!(parse(7, b"E;3;0;;99"), record(3, 0, false, false, false));
        assert_eq!(parse(7, b"E;12;130;o;99"), record(12, 130, true, false, false));
        assert_eq!(parse(7, b"E;4;1;on;99"), record(4, 1, true, true, false));
        assert_eq!(parse(7, b"E;5;7;f;99"), record(5, 7, false, false, true));
        assert!(parse(7, b"E;6;127;d;99").is_some_and(|r| r.status_lost && !r.fallback));
        let bad: [&[u8]; 9] = [
            b"E;3;0",
            b"E;3;0;",
            b"E;3;0;;",
            b"E;3;0;;x",
            b"S;3;0;;1",
            b"E;x;0;;1",
            b"E;3;;;1",
            b"",
            b"\xff",
        ];
        for bad in bad {
            assert_eq!(parse(7, bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_kernel_names_the_sender() {
        let (channel, shell) = Channel::open().expect("channel");
        nix::unistd::write(&shell, b"E;5;42;;7").expect("send");
        nix::unistd::write(&shell, b"nonsense").expect("send");
        nix::unistd::write(&shell, b"E;6;0;o;8").expect("send");
        nix::unistd::write(&shell, b"Dpart").expect("send");
        let mut got = Vec::new();
        channel.receive(|message| got.push(message));
        let me = std::process::id() as i32;
        assert_eq!(
            got,
            vec![
                Message::Record(Record {
                    pid: me,
                    seq: 5,
                    status: 42,
                    output_elsewhere: false,
                    not_run: false,
                    fallback: false,
                    status_lost: false,
                    token: 7,
                }),
                Message::Record(Record {
                    pid: me,
                    seq: 6,
                    status: 0,
                    output_elsewhere: true,
                    not_run: false,
                    fallback: false,
                    status_lost: false,
                    token: 8,
                }),
                Message::Data { pid: me, kind: b'D', bytes: b"part".to_vec() },
            ]
        );
        // Nothing waits: the next receive returns at once with nothing.
        channel.receive(|message| panic!("unexpected {message:?}"));
    }

    /// The state is taken on its commit, from one sender's pieces, within
    /// its bound; pieces of another sender start afresh.
    #[test]
    fn the_state_is_its_pieces_up_to_the_commit() {
        let mut parts = StateParts::default();
        assert_eq!(parts.add(7, b'D', b"/a "), None);
        assert_eq!(parts.add(7, b'D', b"b"), None);
        assert_eq!(parts.add(7, b'P', b"/bin:/usr/bin"), None);
        assert_eq!(parts.add(7, b'C', b""), Some((b"/a b".to_vec(), b"/bin:/usr/bin".to_vec())));
        // Nothing left over for the next one.
        assert_eq!(parts.add(7, b'D', b"/c"), None);
        assert_eq!(parts.add(7, b'C', b""), Some((b"/c".to_vec(), Vec::new())));
        // A commit without a directory, or after pieces of another sender.
        assert_eq!(parts.add(7, b'C', b""), None);
        assert_eq!(parts.add(8, b'D', b"/other"), None);
        assert_eq!(parts.add(7, b'C', b""), None);
        // Past the bound: not taken, and the next one is whole again.
        let piece = vec![b'x'; 2001];
        for _ in 0..=MAX_STATE_FIELD / piece.len() {
            assert_eq!(parts.add(7, b'D', &piece), None);
        }
        assert_eq!(parts.add(7, b'C', b""), None);
        assert_eq!(parts.add(7, b'D', b"/d"), None);
        assert_eq!(parts.add(7, b'C', b""), Some((b"/d".to_vec(), Vec::new())));
        // Both at once; pieces gathered before it do not count.
        assert_eq!(parts.add(7, b'D', b"/stale"), None);
        assert_eq!(
            parts.add(7, b'S', b"/e f\0/bin:/x"),
            Some((b"/e f".to_vec(), b"/bin:/x".to_vec()))
        );
        assert_eq!(parts.add(7, b'C', b""), None);
        assert_eq!(parts.add(7, b'S', b"/no-path"), None);
        assert_eq!(parts.add(7, b'S', b"\0/bin"), None);
    }

    /// What the prompt's `__sk_state` sends adds up to the directory and
    /// `PATH`, whatever their length and characters (pieces of 500
    /// characters of up to four bytes each stay single datagrams).
    #[test]
    #[allow(clippy::disallowed_methods, reason = "the test runs bash")]
    fn the_shell_sends_its_state_in_pieces_that_add_up() {
        use std::os::unix::ffi::OsStrExt;
        let (server, shell) =
            socketpair(AddressFamily::Unix, SockType::Datagram, None, SockFlag::empty())
                .expect("socketpair");
        setsockopt(&server, sockopt::PassCred, &true).expect("passcred");
        let channel = Channel { socket: server };
        let mut dir = std::env::temp_dir().join(format!("shellkeep-state-{}", std::process::id()));
        for part in ["é", "a", "😀", "\u{1}\n", "z"] {
            dir.push(part.repeat(40));
        }
        std::fs::create_dir_all(&dir).expect("dir");
        let path = format!("/p/{}:{}:/a\nb\n:/usr/bin:/bin", "ü".repeat(700), "/x".repeat(300));
        let files = crate::bash_script::ShellFiles { dir: PathBuf::from("/nonexistent") };
        let script = crate::bash_script::reinstall_script(&files, 1, false);
        let out = std::process::Command::new("bash")
            .args(["--norc", "--noprofile", "-c"])
            .arg(format!(
                "exec 62>&{}\n{script}\ntrap - EXIT; cd \"$SK_DIR\" && PATH=\"$SK_PATH\" __sk_state >&62",
                shell.as_raw_fd()
            ))
            .env("SK_DIR", &dir)
            .env("SK_PATH", &path)
            .env("LANG", "C.UTF-8")
            .output()
            .expect("run bash");
        std::fs::remove_dir_all(
            std::env::temp_dir().join(format!("shellkeep-state-{}", std::process::id())),
        )
        .expect("cleanup");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let mut parts = StateParts::default();
        let mut state = None;
        channel.receive(|message| match message {
            Message::Data { pid, kind, bytes } => {
                state = parts.add(pid, kind, &bytes).or(state.take());
            }
            Message::Record(record) => panic!("unexpected {record:?}"),
        });
        let (cwd, got_path) = state.expect("a committed state");
        assert_eq!(cwd, dir.as_os_str().as_bytes());
        assert_eq!(String::from_utf8(got_path).expect("utf-8"), path);
    }

    #[test]
    fn a_capture_keeps_its_limit_and_counts_the_rest() {
        let mut captured = Captured::new(7, 10);
        captured.keep(b"A=1\0B=2\0");
        captured.keep(b"CC=3\0");
        assert_eq!((captured.bytes.as_slice(), captured.dropped), (&b"A=1\0B=2\0CC"[..], 3));
    }
}
