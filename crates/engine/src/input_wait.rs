//! Whether a process group is blocked reading the terminal: the one test
//! behind `waiting_for_input`.
//!
//! A group waits for input when one of its threads is asleep in a system
//! call that reads the terminal: `read` on a descriptor that is the PTY
//! slave or `/dev/tty` (`getpass`, `sudo` and `ssh` open `/dev/tty`), or
//! `poll`, `select`, `pselect6`, `ppoll` or an `epoll` wait whose set
//! includes such a descriptor for reading (line editors wait there before
//! they read). A server asleep on its sockets is not waiting for input.
//!
//! The kernel has no event for this, so callers sample it. Everything comes
//! from `/proc`: the blocked call and its arguments from
//! `/proc/PID/task/TID/syscall`, descriptor targets from `/proc/PID/fd`,
//! `poll`/`select` sets from the process's memory (`/proc/PID/mem`, which
//! the server may read because it is the ancestor of every command it
//! runs), `epoll` interest lists from `/proc/PID/fdinfo`. Plain file reads,
//! no `ptrace`. A process we may not inspect (a set-uid `sudo`) counts as
//! not waiting. This module only looks; it signals nothing.
//!
//! Bounded by construction: at most [`MAX_TASKS`] threads per process,
//! [`MAX_FDS`] descriptors and a [`MAX_SET_BYTES`] descriptor set are read
//! per look.

use std::collections::BTreeSet;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::process;

/// Threads looked at per process.
pub const MAX_TASKS: usize = 256;
/// Descriptors looked at per process.
pub const MAX_FDS: usize = 4096;
/// Bytes of a `poll` array or `select` set read from a process's memory.
pub const MAX_SET_BYTES: usize = 32 * 1024;

/// Whether some member of process group `pgid` is blocked reading the
/// terminal `tty` (the PTY slave's path) or `/dev/tty`.
pub fn group_reads_terminal(pgid: i32, tty: &Path) -> bool {
    if pgid <= 1 {
        return false;
    }
    // The leader first: it is usually the program the agent started, and
    // looking at it alone costs a few small reads instead of a /proc scan.
    if process_reads_terminal(pgid, tty) {
        return true;
    }
    process::live_group_members(pgid)
        .into_iter()
        .filter(|&pid| pid != pgid)
        .any(|pid| process_reads_terminal(pid, tty))
}

/// Whether a thread of process `pid` is blocked reading the terminal.
pub fn process_reads_terminal(pid: i32, tty: &Path) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return false };
    let mut terminal_fds: Option<BTreeSet<i64>> = None;
    for task in tasks.flatten().take(MAX_TASKS) {
        let Ok(text) = std::fs::read_to_string(task.path().join("syscall")) else { continue };
        let Some(call) = BlockedCall::parse(&text) else { continue };
        if !call.may_read_terminal() {
            continue;
        }
        let fds = terminal_fds.get_or_insert_with(|| terminal_descriptors(pid, tty));
        if fds.is_empty() {
            return false;
        }
        if call.reads_any_of(pid, fds) {
            return true;
        }
    }
    false
}

/// The descriptors of `pid` open on the terminal `tty` or on `/dev/tty`.
fn terminal_descriptors(pid: i32, tty: &Path) -> BTreeSet<i64> {
    let mut fds = BTreeSet::new();
    let Ok(entries) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return fds };
    for entry in entries.flatten().take(MAX_FDS) {
        let Some(fd) = entry.file_name().to_str().and_then(|n| n.parse::<i64>().ok()) else {
            continue;
        };
        if std::fs::read_link(entry.path())
            .is_ok_and(|target| target == tty || target == Path::new("/dev/tty"))
        {
            fds.insert(fd);
        }
    }
    fds
}

/// A system call a thread is asleep in, with its first arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct BlockedCall {
    number: i64,
    args: [u64; 4],
}

impl BlockedCall {
    /// Parses `/proc/PID/task/TID/syscall`: `NR arg1 … arg6 sp pc` for a
    /// thread in a call; `running` or `-1 …` otherwise.
    fn parse(text: &str) -> Option<BlockedCall> {
        let mut fields = text.split_ascii_whitespace();
        let number = fields.next()?.parse::<i64>().ok().filter(|&n| n >= 0)?;
        let mut args = [0u64; 4];
        for arg in &mut args {
            *arg = u64::from_str_radix(fields.next()?.trim_start_matches("0x"), 16).ok()?;
        }
        Some(BlockedCall { number, args })
    }

    fn may_read_terminal(&self) -> bool {
        self.number == libc::SYS_read
            || POLL_CALLS.contains(&self.number)
            || SELECT_CALLS.contains(&self.number)
            || EPOLL_CALLS.contains(&self.number)
    }

    /// Whether this call waits to read one of `fds` (descriptors of `pid`).
    fn reads_any_of(&self, pid: i32, fds: &BTreeSet<i64>) -> bool {
        let [a0, a1, ..] = self.args;
        if self.number == libc::SYS_read {
            return fds.contains(&(a0 as i32 as i64));
        }
        if POLL_CALLS.contains(&self.number) {
            return poll_set(pid, a0, a1).is_some_and(|set| set.iter().any(|fd| fds.contains(fd)));
        }
        if SELECT_CALLS.contains(&self.number) {
            return select_set(pid, a0, a1)
                .is_some_and(|set| set.iter().any(|fd| fds.contains(fd)));
        }
        if EPOLL_CALLS.contains(&self.number) {
            return epoll_set(pid, a0 as i32 as i64).iter().any(|fd| fds.contains(fd));
        }
        false
    }
}

/// The descriptors a `poll(fds, nfds, …)` waits to read.
fn poll_set(pid: i32, address: u64, count: u64) -> Option<Vec<i64>> {
    // struct pollfd { int fd; short events; short revents; }
    let len = usize::try_from(count).ok()?.checked_mul(8)?.min(MAX_SET_BYTES);
    let bytes = read_memory(pid, address, len)?;
    let readable = (libc::POLLIN | libc::POLLPRI) as u16;
    Some(
        bytes
            .chunks_exact(8)
            .filter(|entry| u16::from_ne_bytes([entry[4], entry[5]]) & readable != 0)
            .map(|entry| i64::from(i32::from_ne_bytes([entry[0], entry[1], entry[2], entry[3]])))
            .filter(|&fd| fd >= 0)
            .collect(),
    )
}

/// The descriptors in the read set of a `select(nfds, readfds, …)`.
fn select_set(pid: i32, nfds: u64, address: u64) -> Option<Vec<i64>> {
    if address == 0 {
        return Some(Vec::new());
    }
    // An fd_set is an array of longs, one bit per descriptor.
    let words = usize::try_from(nfds).ok()?.div_ceil(64);
    let bytes = read_memory(pid, address, (words * 8).min(MAX_SET_BYTES))?;
    let mut set = Vec::new();
    for (index, byte) in bytes.iter().enumerate() {
        for bit in 0..8 {
            let fd = (index * 8 + bit) as u64;
            if fd < nfds && byte & (1 << bit) != 0 {
                set.push(fd as i64);
            }
        }
    }
    Some(set)
}

/// The descriptors an epoll instance `epfd` of `pid` watches for reading,
/// from the `tfd:` lines of its fdinfo.
fn epoll_set(pid: i32, epfd: i64) -> Vec<i64> {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{epfd}")) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split_ascii_whitespace();
            (fields.next()? == "tfd:").then_some(())?;
            let fd = fields.next()?.parse::<i64>().ok()?;
            (fields.next()? == "events:").then_some(())?;
            let events = u32::from_str_radix(fields.next()?, 16).ok()?;
            (events & (libc::EPOLLIN | libc::EPOLLPRI) as u32 != 0).then_some(fd)
        })
        .collect()
}

/// `len` bytes of the memory of `pid` at `address`.
fn read_memory(pid: i32, address: u64, len: usize) -> Option<Vec<u8>> {
    let file = std::fs::File::open(format!("/proc/{pid}/mem")).ok()?;
    let mut bytes = vec![0u8; len];
    file.read_exact_at(&mut bytes, address).ok()?;
    Some(bytes)
}

#[cfg(target_arch = "x86_64")]
const POLL_CALLS: &[i64] = &[libc::SYS_poll, libc::SYS_ppoll];
#[cfg(not(target_arch = "x86_64"))]
const POLL_CALLS: &[i64] = &[libc::SYS_ppoll];

#[cfg(target_arch = "x86_64")]
const SELECT_CALLS: &[i64] = &[libc::SYS_select, libc::SYS_pselect6];
#[cfg(not(target_arch = "x86_64"))]
const SELECT_CALLS: &[i64] = &[libc::SYS_pselect6];

#[cfg(target_arch = "x86_64")]
const EPOLL_CALLS: &[i64] = &[libc::SYS_epoll_wait, libc::SYS_epoll_pwait, libc::SYS_epoll_pwait2];
#[cfg(not(target_arch = "x86_64"))]
const EPOLL_CALLS: &[i64] = &[libc::SYS_epoll_pwait, libc::SYS_epoll_pwait2];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_blocked_and_running_threads() {
        let read = format!("{} 0x3 0x7ffd 0x1 0x0 0x0 0x0 0x7ffc 0x7f00", libc::SYS_read);
        assert_eq!(
            BlockedCall::parse(&read),
            Some(BlockedCall { number: libc::SYS_read, args: [3, 0x7ffd, 1, 0] })
        );
        assert_eq!(BlockedCall::parse("running"), None);
        assert_eq!(BlockedCall::parse("-1 0x7ffc 0x7f00"), None);
    }

    #[test]
    fn sets_of_this_process_are_read_from_its_memory() {
        let me = std::process::id() as i32;
        // A pollfd array: fd 7 for reading, fd 9 for writing only.
        let mut array = Vec::new();
        for (fd, events) in [(7i32, libc::POLLIN), (9, libc::POLLOUT)] {
            array.extend_from_slice(&fd.to_ne_bytes());
            array.extend_from_slice(&(events as u16).to_ne_bytes());
            array.extend_from_slice(&0u16.to_ne_bytes());
        }
        assert_eq!(poll_set(me, array.as_ptr() as u64, 2), Some(vec![7]));
        // An fd_set with descriptors 0 and 65.
        let set: [u64; 2] = [1, 1 << 1];
        assert_eq!(select_set(me, 66, set.as_ptr() as u64), Some(vec![0, 65]));
        assert_eq!(select_set(me, 65, set.as_ptr() as u64), Some(vec![0]));
    }
}
