//! The completion channel: how a shell tells the server that a command
//! ended, in a way no other process can forge.
//!
//! At spawn the shell gets one end of a `socketpair(AF_UNIX, SOCK_DGRAM)`,
//! which its start-up file moves to descriptor [`SHELL_FD`] before anything
//! else runs; the server keeps the other, with
//! `SO_PASSCRED` set, so the kernel attaches the sending process's pid to
//! every datagram (`SCM_CREDENTIALS`). A process cannot put another pid
//! there without `CAP_SYS_ADMIN`. The prompt writes one record per command
//! end with the builtin `printf … >&62`, from the shell process itself.
//! Children inherit the descriptor and may write to it too, but their
//! records carry their own pid and are dropped by whoever reads them
//! ([`Channel::receive`] reports the pid; `state.rs` decides).
//!
//! A record is `E;<seq>;<status>;<flags>;<token>`: command `seq` ended
//! with `status`; `token` is a random number the shell draws at that
//! moment and also prints in the end marker, which so marks the end's
//! position in the output (a marker printed earlier, even by the shell,
//! which knows the sequence number, cannot carry it); the flag `o` says the shell's standard output is not the
//! terminal (`exec >file`), the flag `n` that the command never reached the
//! `eval` that runs it (something broke the line we typed), the flag `f`
//! that the fallback line sent it (typed once the shell prompted with the
//! command not ended), not `PROMPT_COMMAND` (the integration's prompt did
//! not run), the flag `d` that the function that
//! keeps the command's status is gone (the status may be wrong).
//!
//! The server's end is read without blocking, continuously (the PTY reader
//! thread polls it), so a child that floods the channel can never fill the
//! queue and block the shell's prompt; each datagram costs one `recvmsg`.
//! This module opens and reads the socket and parses records; it does not
//! decide which senders to believe.

use std::io::IoSliceMut;
use std::os::fd::{AsRawFd, OwnedFd};

use nix::sys::socket::{
    AddressFamily, ControlMessageOwned, MsgFlags, SockFlag, SockType, recvmsg, setsockopt,
    socketpair, sockopt,
};

/// The shell's descriptor for its end of the channel. High, so that
/// commands using small descriptors (`exec 3>file`) never meet it.
pub const SHELL_FD: i32 = 62;

/// At most this many datagrams are read per call of [`Channel::receive`];
/// more wait for the next call (the reader thread is told again).
const MAX_PER_RECEIVE: usize = 256;

/// The server's end of one shell's completion channel.
#[derive(Debug)]
pub(crate) struct Channel {
    socket: OwnedFd,
}

/// A command's end as the shell reported it.
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
    /// blocking, and gives each well-formed record, with its sender's pid,
    /// to `each`. Malformed datagrams and datagrams without credentials are
    /// dropped.
    pub(crate) fn receive(&self, mut each: impl FnMut(Record)) {
        let mut buf = [0u8; 64];
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
            if let Some(pid) = pid
                && let Some(record) = parse(pid, &buf[..len])
            {
                each(record);
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
        let mut got = Vec::new();
        channel.receive(|record| got.push(record));
        let me = std::process::id() as i32;
        assert_eq!(
            got,
            vec![
                Record {
                    pid: me,
                    seq: 5,
                    status: 42,
                    output_elsewhere: false,
                    not_run: false,
                    fallback: false,
                    status_lost: false,
                    token: 7,
                },
                Record {
                    pid: me,
                    seq: 6,
                    status: 0,
                    output_elsewhere: true,
                    not_run: false,
                    fallback: false,
                    status_lost: false,
                    token: 8,
                }
            ]
        );
        // Nothing waits: the next receive returns at once with nothing.
        channel.receive(|record| panic!("unexpected {record:?}"));
    }
}
