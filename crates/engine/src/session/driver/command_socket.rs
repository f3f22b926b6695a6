//! The server's end of a shell's command socket, where each command's
//! text goes as a frame before the line that runs it is typed.

use std::path::PathBuf;
use std::time::Duration;

use tokio::time::Instant;

/// How long the rest of a command's frame that did not fit in the socket at
/// once may wait for the shell to read it (a command of several MiB).
const FRAME_WAIT: Duration = Duration::from_secs(30);

/// The server's end of a shell's command socket: each command's text goes
/// there as a frame (`bash_script::command_frame`), which the shell reads
/// from its descriptor 60, the other end of a `socketpair(AF_UNIX,
/// SOCK_STREAM)`. A process that inherited the shell's end can take bytes
/// out, but what it writes there comes here (and is dropped), never to the
/// shell; unlike a pipe, a socket cannot be opened again through
/// `/proc/PID/fd` to get a way in.
pub(super) struct CommandSocket {
    socket: tokio::net::UnixStream,
}

impl CommandSocket {
    /// A new socket pair: the server's end, the shell's end to hand the
    /// shell, and what `/proc/PID/fd/N` of a process holding the shell's
    /// end links to.
    pub(super) fn open() -> std::io::Result<(CommandSocket, std::os::fd::OwnedFd, PathBuf)> {
        use nix::sys::socket::{
            AddressFamily, SockFlag, SockType, setsockopt, socketpair, sockopt,
        };
        let (server, shell) =
            socketpair(AddressFamily::Unix, SockType::Stream, None, SockFlag::SOCK_CLOEXEC)?;
        // Room for most commands at once, where the system allows it; the
        // rest is written as the shell reads.
        let _ = setsockopt(&server, sockopt::SndBuf, &(1 << 20));
        let _ = setsockopt(&shell, sockopt::RcvBuf, &(1 << 20));
        let link = PathBuf::from(format!("socket:[{}]", nix::sys::stat::fstat(&shell)?.st_ino));
        let server = std::os::unix::net::UnixStream::from(server);
        server.set_nonblocking(true)?;
        let socket = tokio::net::UnixStream::from_std(server)?;
        Ok((CommandSocket { socket }, shell, link))
    }

    /// Another handle on the server's end, for the integration watcher to
    /// write a reinstall script there.
    pub(super) fn handle(&self) -> std::io::Result<std::os::fd::OwnedFd> {
        std::os::fd::AsFd::as_fd(&self.socket).try_clone_to_owned()
    }

    /// Sends `frame`: drops what processes holding the shell's end wrote
    /// here, writes what the socket takes now, and returns how much that
    /// was.
    pub(super) fn start(&self, frame: &[u8]) -> usize {
        let mut chunk = [0u8; 64 * 1024];
        // Bounded: at most the socket's receive buffer.
        while let Ok(1..) = self.socket.try_read(&mut chunk) {}
        let mut written = 0;
        while written < frame.len() {
            match self.socket.try_write(&frame[written..]) {
                Ok(n) => written += n,
                Err(_) => break,
            }
        }
        written
    }

    /// Writes the rest of `frame` from `written` on as the shell reads it,
    /// at most [`FRAME_WAIT`], and not past the shell's exit (`exited`).
    pub(super) async fn finish(&self, frame: &[u8], mut written: usize, exited: impl Fn() -> bool) {
        let deadline = Instant::now() + FRAME_WAIT;
        while written < frame.len() && Instant::now() < deadline && !exited() {
            let ready = tokio::time::timeout(Duration::from_millis(100), self.socket.writable());
            if !matches!(ready.await, Ok(Ok(()))) {
                continue;
            }
            match self.socket.try_write(&frame[written..]) {
                Ok(n) => written += n,
                Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(err) => {
                    tracing::debug!("could not write the command to its socket: {err}");
                    return;
                }
            }
        }
    }
}
