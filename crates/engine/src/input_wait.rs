//! Whether the foreground job waits for input: the one test behind
//! `waiting_for_input` ([`job_look`], [`Reading`]); whether it sits at the
//! terminal using no CPU ([`JobLook::at_terminal`], [`JobCpu`]); and whether
//! one process, a shell at its prompt, is blocked reading the terminal
//! ([`process_reads_terminal`], [`shell_reads_terminal`]). The kernel has no
//! event for this, so callers sample it; everything comes from `/proc` and
//! `sock_diag` netlink queries.
//!
//! Not for: when to look and what a wait does to a command (the supervisor,
//! `session/supervise.rs`, and `session/timing.rs`); recognising which shell
//! sits at a prompt (`proc_shell.rs`); signals (`process/`).
//!
//! Invariants: it only looks: plain reads of `/proc` files, no `ptrace`, no
//! signal, nothing written to a process. A look is bounded by construction
//! ([`MAX_TASKS`], [`MAX_FDS`], [`MAX_SET_BYTES`], [`MAX_MEMBERS`],
//! [`MAX_SESSION_PROCESSES`]). A job is a prompt only when nothing else of it
//! can still wake it; anything in doubt is [`Reading::Unsure`] ([`job_look`]).

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::process;

/// Threads looked at per process, per look.
pub(crate) const MAX_TASKS: usize = 256;
/// Descriptors looked at per process, per look.
pub(crate) const MAX_FDS: usize = 4096;
/// Bytes of a `poll` array or `select` set read from a process's memory,
/// per set.
pub(crate) const MAX_SET_BYTES: usize = 32 * 1024;
/// Processes of the foreground job looked at, per look (one `stat` file each
/// for the CPU time).
pub(crate) const MAX_MEMBERS: usize = 256;
/// Processes of the session whose descriptors are searched for writers, per
/// look: the processes of the shell's session and their descendants, and
/// only when a set holds a pipe, a socket or a PTY master, so a plain prompt
/// (`read`, a line editor's `select` on the terminal alone) costs no more
/// than the job's own `/proc` files.
pub(crate) const MAX_SESSION_PROCESSES: usize = 1024;

/// What a look at the foreground job found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reading {
    /// No process of the job is blocked reading the terminal.
    No,
    /// A process of the job is blocked reading the terminal and nothing
    /// else in the job is running or can still produce: a prompt.
    Prompt,
    /// A process of the job is blocked reading the terminal, but the job
    /// may still be at work (a process running or sleeping, a live writer
    /// on a pipe it waits on, a connected socket): not a prompt. Callers
    /// treat it as running, never as a prompt.
    Unsure,
}

/// What one look at the foreground job found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JobLook {
    /// Whether it reads the terminal, and whether that is a prompt.
    pub reading: Reading,
    /// It sits at the terminal, without being a sure prompt: a process of
    /// it waits on a set that holds the terminal, nothing of it runs or
    /// sleeps elsewhere, and what else may still produce for it is a socket
    /// only (`ssh`'s connection, `docker exec -it`'s stream, a Node CLI's
    /// keep-alive sockets) or nothing (a prompt), never a local pipe or PTY
    /// a live process writes (apt's dpkg, a child's output). With no CPU
    /// used between two looks ([`JobCpu::still_since`]) this tells a remote
    /// or interactive session at rest from a hang, and the caller discounts
    /// such time as it does time at a prompt: a process blocked on a socket
    /// or a pipe alone does not read the terminal, and a busy loop uses CPU.
    pub at_terminal: bool,
    /// Its processes and the CPU time they used, at this look.
    pub cpu: JobCpu,
}

/// The processes of a job (pid and start time) and the CPU time they and
/// their reaped children used, in clock ticks, from `/proc/PID/stat`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct JobCpu {
    members: Vec<(i32, u64)>,
    ticks: u64,
}

impl JobCpu {
    /// The CPU time of processes `members`, from their `/proc/PID/stat`.
    fn of(members: &[i32]) -> JobCpu {
        let mut cpu = JobCpu::default();
        for &pid in members {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
            let Some((start, ticks)) = cpu_fields(&stat) else { continue };
            cpu.members.push((pid, start));
            cpu.ticks = cpu.ticks.saturating_add(ticks);
        }
        cpu
    }

    /// Whether the job used no CPU from `earlier` to this look, `elapsed`
    /// apart: the same processes, and at most one clock tick (the
    /// kernel's rounding) plus 1% of the time (a keep-alive timer) used
    /// between them. A busy loop uses all of it.
    pub(crate) fn still_since(&self, earlier: &JobCpu, elapsed: std::time::Duration) -> bool {
        let per_second = clock_ticks_per_second();
        let allowance = 1 + elapsed.as_millis() as u64 * per_second / 100_000;
        !self.members.is_empty()
            && self.members == earlier.members
            && self.ticks.saturating_sub(earlier.ticks) <= allowance
    }
}

/// The start time and the CPU time (user and system, its own and its
/// reaped children's) of a `/proc/PID/stat` line, in clock ticks.
fn cpu_fields(stat: &str) -> Option<(u64, u64)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    // After the command: state is field 3, utime..cstime 14..17, starttime 22.
    let number = |field: usize| fields.get(field - 3)?.parse::<u64>().ok();
    let ticks = (14..=17).map(number).sum::<Option<u64>>()?;
    Some((number(22)?, ticks))
}

/// Clock ticks per second, the unit of `/proc/PID/stat`'s times.
fn clock_ticks_per_second() -> u64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .and_then(|ticks| u64::try_from(ticks).ok())
        .filter(|&ticks| ticks > 0)
        .unwrap_or(100)
}

/// Whether process group `pgid`, the terminal's foreground job, waits for
/// input on the terminal `tty` (the PTY slave's path) or `/dev/tty`
/// (`JobLook::reading`); writers are looked for among the processes of
/// session `session` (the shell's) and their descendants. Also whether the
/// job sits at the terminal, and its CPU time.
///
/// Reading the terminal is not enough for a prompt: the job waits for input
/// only when nothing else in it is still at work. It is [`Reading::Unsure`]
/// when a process of the job is busy ([`ProcessLook`]), or when a set that
/// holds the terminal (or any set a process of the job waits on) also holds
/// something that may still produce ([`Source::may_produce`]).
///
/// The supervisor looks only after the output went quiet, at most once
/// every second or so while nothing changes, so an `ssh` session left for
/// an hour costs one such look a second.
pub(crate) fn job_look(pgid: i32, tty: &Path, session: i32) -> JobLook {
    let mut look = JobLook { reading: Reading::No, at_terminal: false, cpu: JobCpu::default() };
    if pgid <= 1 {
        return look;
    }
    let mut members = process::live_group_members(pgid);
    members.truncate(MAX_MEMBERS);
    look.cpu = JobCpu::of(&members);
    let looks: Vec<(i32, ProcessLook)> =
        members.iter().map(|&pid| (pid, ProcessLook::of(pid, tty))).collect();
    if !looks.iter().any(|(_, look)| look.reads_terminal) {
        return look;
    }
    look.reading = Reading::Unsure;
    if looks.iter().any(|(_, look)| look.busy) {
        return look;
    }
    let readers: BTreeSet<i32> =
        looks.iter().filter(|(_, look)| look.reads_terminal).map(|&(pid, _)| pid).collect();
    let mut sources = Vec::new();
    for (pid, look) in &looks {
        for &fd in &look.other_fds {
            if let Some(source) = Source::of(*pid, fd) {
                sources.push(source);
            }
        }
    }
    look.at_terminal = true;
    if sources.is_empty() {
        look.reading = Reading::Prompt;
        return look;
    }
    let holders = Holders::of(&process::session_tree(session, MAX_SESSION_PROCESSES), &readers);
    // Local producers first (no queries): a live one is work in progress.
    let (sockets, local): (Vec<&Source>, Vec<&Source>) =
        sources.iter().partition(|source| matches!(source, Source::Socket(_)));
    if local.iter().any(|source| source.may_produce(&holders)) {
        look.at_terminal = false;
        return look;
    }
    if !sockets.iter().any(|source| source.may_produce(&holders)) {
        look.reading = Reading::Prompt;
    }
    look
}

/// Whether a thread of process `pid` is blocked reading the terminal,
/// whatever else it waits on (a shell at its prompt, for the driver and the
/// watcher): asleep in a call whose set ([`BlockedCall::wait_set`]) holds
/// the terminal ([`waits_on_terminal`]). A server asleep on its sockets does
/// not read the terminal.
pub(crate) fn process_reads_terminal(pid: i32, tty: &Path) -> bool {
    // The driver asks this before typing every command: no more reads than
    // the answer needs (no thread states, no other descriptors).
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return false };
    for task in tasks.flatten().take(MAX_TASKS) {
        let Ok(text) = crate::small_file::read(task.path().join("syscall")) else { continue };
        let set = BlockedCall::parse(&text).and_then(|call| call.wait_set(pid));
        if set.is_some_and(|set| waits_on_terminal(pid, &set, tty)) {
            return true;
        }
    }
    false
}

/// Whether one of the descriptors `set` of process `pid` is the terminal
/// `tty` (by the path it links to, or `/dev/tty`, which `getpass`, `sudo`
/// and `ssh` open).
fn waits_on_terminal(pid: i32, set: &[i64], tty: &Path) -> bool {
    set.iter().take(MAX_FDS).any(|fd| {
        std::fs::read_link(format!("/proc/{pid}/fd/{fd}"))
            .is_ok_and(|target| target == tty || target == Path::new("/dev/tty"))
    })
}

/// How a shell at its prompt reads its terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ShellReads {
    /// It does not: it is blocked elsewhere (waiting for a program).
    Not,
    /// Lines, blocked in `read` on the terminal itself: no line editor
    /// (the terminal's line mode, or raw bytes, reach the shell as typed).
    Lines,
    /// Keys: it waits on the terminal in `select` or `poll` before each
    /// read, as readline does.
    Keys,
}

/// How the main thread of process `pid`, a shell (whose one thread is its
/// main thread), reads the terminal `tty`; `None` when its blocked call
/// cannot be read (`/proc/PID/syscall` needs ptrace access). The driver
/// asks this before typing every command, so it reads only what the answer
/// needs: the blocked call, then the link of each descriptor it waits on
/// (a shell at its prompt waits on one).
pub(crate) fn shell_reads_terminal(pid: i32, tty: &Path) -> Option<ShellReads> {
    let text = crate::small_file::read(format!("/proc/{pid}/syscall")).ok()?;
    let Some(call) = BlockedCall::parse(&text) else { return Some(ShellReads::Not) };
    if !call.wait_set(pid).is_some_and(|set| waits_on_terminal(pid, &set, tty)) {
        return Some(ShellReads::Not);
    }
    Some(if call.number == libc::SYS_read { ShellReads::Lines } else { ShellReads::Keys })
}

/// One process of the job at one look, from `/proc/PID/task/TID/syscall`
/// and `stat` for each thread and `/proc/PID/fd` for the terminal.
#[derive(Debug, Default)]
struct ProcessLook {
    /// A thread is blocked reading the terminal, as for
    /// [`process_reads_terminal`]. A process we may not inspect (a set-uid
    /// `sudo`) counts as not reading.
    reads_terminal: bool,
    /// A thread is running (`R`, or `D` in the kernel), or the process is
    /// asleep in something other than a wait for input, for its children,
    /// on descriptors or to write into a full pipe (`sleep`, a lock).
    busy: bool,
    /// The descriptors other than the terminal that its blocked reads and
    /// waits also wait on.
    other_fds: BTreeSet<i64>,
}

impl ProcessLook {
    fn of(pid: i32, tty: &Path) -> ProcessLook {
        let mut look = ProcessLook::default();
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return look };
        let mut terminal_fds: Option<BTreeSet<i64>> = None;
        // Whether some thread waits on descriptors or for children: a
        // process whose threads all sleep otherwise is at work.
        let mut waits = false;
        let mut others = false;
        for task in tasks.flatten().take(MAX_TASKS) {
            let path = task.path();
            let running = std::fs::read_to_string(path.join("stat"))
                .is_ok_and(|stat| matches!(thread_state(&stat), Some(b'R' | b'D')));
            let call = std::fs::read_to_string(path.join("syscall"))
                .ok()
                .and_then(|text| BlockedCall::parse(&text));
            let Some(call) = call.filter(|_| !running) else {
                // Running, or between calls: at work.
                look.busy |= running;
                others |= !running;
                continue;
            };
            if call.is_child_wait() || call.writes_to_pipe(pid) {
                waits = true;
                continue;
            }
            let Some(set) = call.wait_set(pid) else {
                others = true;
                continue;
            };
            waits = true;
            let fds = terminal_fds.get_or_insert_with(|| terminal_descriptors(pid, tty));
            let (terminal, other): (Vec<i64>, Vec<i64>) =
                set.into_iter().partition(|fd| fds.contains(fd));
            look.reads_terminal |= !terminal.is_empty();
            look.other_fds.extend(other);
        }
        // A thread asleep elsewhere (a lock, a timer) beside one that waits
        // is a helper thread; a process that only sleeps is at work.
        look.busy |= others && !waits;
        look
    }
}

/// The state letter of a `/proc/…/stat` line.
fn thread_state(stat: &str) -> Option<u8> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_ascii_whitespace().next()?.bytes().next()
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

/// Something other than the terminal that a process of the job waits on,
/// and that may still produce.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Source {
    /// The read end of a pipe (its inode): a child's stdout, as apt's when
    /// it waits for dpkg while it polls the terminal.
    Pipe(u64),
    /// A PTY master; its slave is `/dev/pts/N` (apt runs dpkg on a terminal
    /// of its own).
    Master(String),
    /// A socket (its inode).
    Socket(u64),
}

impl Source {
    /// What descriptor `fd` of `pid` is, if it can produce.
    fn of(pid: i32, fd: i64) -> Option<Source> {
        let target = std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).ok()?;
        let target = target.to_str()?;
        if let Some(inode) = bracketed(target, "pipe:") {
            return Some(Source::Pipe(inode));
        }
        if let Some(inode) = bracketed(target, "socket:") {
            return Some(Source::Socket(inode));
        }
        if target == "/dev/ptmx" || target == "/dev/pts/ptmx" {
            let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}")).ok()?;
            let index = info.lines().find_map(|line| line.strip_prefix("tty-index:"))?;
            return Some(Source::Master(format!("/dev/pts/{}", index.trim())));
        }
        // Files, event and timer descriptors: nothing a writer holds.
        None
    }

    /// Whether a live process other than the terminal's readers may still
    /// write to it: a pipe whose write end a live process holds, a PTY
    /// master whose slave a live process holds, a Unix socket with a
    /// connected peer ([`UnixSocket::has_live_peer`]); any other socket (TCP,
    /// or when `sock_diag` cannot say) may. A pipe or socket whose writers
    /// are all gone (end of file pending) produces nothing more: a set of
    /// only those is a prompt.
    fn may_produce(&self, holders: &Holders) -> bool {
        match self {
            Source::Pipe(inode) => holders.pipe_writers.contains(inode),
            Source::Master(slave) => holders.slaves.contains(slave),
            Source::Socket(inode) => match unix_socket(*inode) {
                Some(socket) => socket.has_live_peer(holders),
                // Not a Unix socket (TCP, say), or no `sock_diag`: a peer
                // may be there.
                None => true,
            },
        }
    }
}

/// `prefix[N]` → N.
fn bracketed(target: &str, prefix: &str) -> Option<u64> {
    target.strip_prefix(prefix)?.strip_prefix('[')?.strip_suffix(']')?.parse().ok()
}

/// What the processes of the session other than the terminal's readers
/// hold: write ends of pipes, PTY slaves, sockets. A process that itself
/// reads the terminal never counts as a producer: its pipe to the next
/// command of a pipeline, or a self-pipe or socket pair an event loop keeps
/// for wake-ups (Python's asyncio, libuv), waits on the same prompt.
#[derive(Debug, Default)]
struct Holders {
    pipe_writers: BTreeSet<u64>,
    slaves: BTreeSet<String>,
    /// Socket inodes, and whether a process other than a reader holds it.
    sockets: BTreeMap<u64, bool>,
}

impl Holders {
    fn of(processes: &[i32], readers: &BTreeSet<i32>) -> Holders {
        let mut holders = Holders::default();
        for &pid in processes {
            let reader = readers.contains(&pid);
            let Ok(entries) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { continue };
            for entry in entries.flatten().take(MAX_FDS) {
                let Ok(target) = std::fs::read_link(entry.path()) else { continue };
                let Some(target) = target.to_str() else { continue };
                if let Some(inode) = bracketed(target, "socket:") {
                    *holders.sockets.entry(inode).or_default() |= !reader;
                    continue;
                }
                if reader {
                    continue;
                }
                if let Some(inode) = bracketed(target, "pipe:") {
                    let fd = entry.file_name();
                    if writes(pid, fd.to_str().unwrap_or_default()) {
                        holders.pipe_writers.insert(inode);
                    }
                } else if target.starts_with("/dev/pts/") {
                    holders.slaves.insert(target.to_owned());
                }
            }
        }
        holders
    }
}

/// Whether descriptor `fd` of `pid` is open for writing (its `fdinfo`
/// flags).
fn writes(pid: i32, fd: &str) -> bool {
    let Ok(info) = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}")) else {
        return false;
    };
    info.lines()
        .find_map(|line| line.strip_prefix("flags:"))
        .and_then(|flags| u32::from_str_radix(flags.trim(), 8).ok())
        .is_some_and(|flags| flags & libc::O_ACCMODE as u32 != libc::O_RDONLY as u32)
}

/// A Unix socket as `sock_diag` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct UnixSocket {
    /// `TCP_LISTEN` and friends (`TCP_ESTABLISHED` for a connected one).
    state: u8,
    /// The peer's inode; 0 when it has none (never connected, or its last
    /// descriptor was closed).
    peer: u64,
    /// `sk_shutdown`: bit 0 set when nothing more can be received.
    shutdown: u8,
}

impl UnixSocket {
    /// Whether a live peer may still send on it: connected, not shut down
    /// for receiving, and the peer held by a process other than the
    /// terminal's readers (or by one we cannot see, outside the session:
    /// the `tmux` server).
    fn has_live_peer(&self, holders: &Holders) -> bool {
        const TCP_LISTEN: u8 = 10;
        if self.state == TCP_LISTEN || self.peer == 0 || self.shutdown & 1 != 0 {
            return false;
        }
        holders.sockets.get(&self.peer).is_none_or(|&other| other)
    }

    /// Parses a `sock_diag` answer: `nlmsghdr`, `unix_diag_msg`, attributes.
    fn parse(reply: &[u8]) -> Option<UnixSocket> {
        const NLMSG_ERROR: u16 = 2;
        const UNIX_DIAG_PEER: u16 = 2;
        const UNIX_DIAG_SHUTDOWN: u16 = 6;
        let length = u32::from_ne_bytes(reply.get(0..4)?.try_into().ok()?) as usize;
        let kind = u16::from_ne_bytes(reply.get(4..6)?.try_into().ok()?);
        if kind == NLMSG_ERROR {
            return None;
        }
        let message = reply.get(16..length.min(reply.len()))?;
        let mut socket = UnixSocket { state: *message.get(2)?, peer: 0, shutdown: 0 };
        let mut attributes = message.get(16..)?;
        while attributes.len() >= 4 {
            let len = u16::from_ne_bytes([attributes[0], attributes[1]]) as usize;
            let kind = u16::from_ne_bytes([attributes[2], attributes[3]]);
            if len < 4 || len > attributes.len() {
                break;
            }
            let value = &attributes[4..len];
            match kind {
                UNIX_DIAG_PEER if value.len() >= 4 => {
                    socket.peer = u64::from(u32::from_ne_bytes(value[..4].try_into().ok()?));
                }
                UNIX_DIAG_SHUTDOWN if !value.is_empty() => socket.shutdown = value[0],
                _ => {}
            }
            attributes = attributes.get(len.next_multiple_of(4)..).unwrap_or_default();
        }
        Some(socket)
    }
}

/// The Unix socket with `inode`, from a `sock_diag` netlink query; `None`
/// if it is not a Unix socket of our network namespace or the kernel does
/// not answer such queries.
fn unix_socket(inode: u64) -> Option<UnixSocket> {
    use nix::sys::socket::{
        AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType, recv, sendto,
        socket,
    };
    use std::os::fd::AsRawFd;
    const SOCK_DIAG_BY_FAMILY: u16 = 20;
    const UDIAG_SHOW_PEER: u32 = 0x04;
    let inode = u32::try_from(inode).ok()?;
    let netlink = socket(
        AddressFamily::Netlink,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkSockDiag,
    )
    .ok()?;
    // nlmsghdr (16 bytes), then unix_diag_req (24 bytes).
    let mut request = Vec::with_capacity(40);
    request.extend_from_slice(&40u32.to_ne_bytes());
    request.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    request.extend_from_slice(&(libc::NLM_F_REQUEST as u16).to_ne_bytes());
    request.extend_from_slice(&1u32.to_ne_bytes());
    request.extend_from_slice(&0u32.to_ne_bytes());
    request.extend_from_slice(&[libc::AF_UNIX as u8, 0, 0, 0]);
    request.extend_from_slice(&u32::MAX.to_ne_bytes());
    request.extend_from_slice(&inode.to_ne_bytes());
    request.extend_from_slice(&UDIAG_SHOW_PEER.to_ne_bytes());
    request.extend_from_slice(&u32::MAX.to_ne_bytes());
    request.extend_from_slice(&u32::MAX.to_ne_bytes());
    sendto(netlink.as_raw_fd(), &request, &NetlinkAddr::new(0, 0), MsgFlags::empty()).ok()?;
    // The kernel answers before `sendto` returns.
    let mut reply = [0u8; 512];
    let len = recv(netlink.as_raw_fd(), &mut reply, MsgFlags::MSG_DONTWAIT).ok()?;
    UnixSocket::parse(&reply[..len])
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

    /// `read`, or a `poll`, `select` or `epoll` wait.
    fn waits_on_descriptors(&self) -> bool {
        self.number == libc::SYS_read
            || POLL_CALLS.contains(&self.number)
            || SELECT_CALLS.contains(&self.number)
            || EPOLL_CALLS.contains(&self.number)
    }

    /// Blocked writing to a full pipe (`git log | less`): it waits for its
    /// reader, and produces nothing more until that reads.
    fn writes_to_pipe(&self, pid: i32) -> bool {
        (self.number == libc::SYS_write || self.number == libc::SYS_writev)
            && std::fs::read_link(format!("/proc/{pid}/fd/{}", self.args[0] as i32))
                .is_ok_and(|target| target.to_str().is_some_and(|t| t.starts_with("pipe:")))
    }

    /// Waits for a child or a signal (`wait4`, `waitid`, `pause`,
    /// `rt_sigsuspend`): a shell or a parent waiting on the job's programs.
    fn is_child_wait(&self) -> bool {
        CHILD_WAIT_CALLS.contains(&self.number)
    }

    /// The descriptors this call waits to read (descriptors of `pid`):
    /// one for `read`, the set of a `poll`, `ppoll`, `select`, `pselect6` or
    /// `epoll` wait (line editors wait there before they read); `None` for
    /// any other call, or a set that cannot be read.
    fn wait_set(&self, pid: i32) -> Option<Vec<i64>> {
        let [a0, a1, ..] = self.args;
        if !self.waits_on_descriptors() {
            return None;
        }
        if self.number == libc::SYS_read {
            return Some(vec![i64::from(a0 as i32)]);
        }
        if POLL_CALLS.contains(&self.number) {
            return poll_set(pid, a0, a1);
        }
        if SELECT_CALLS.contains(&self.number) {
            return select_set(pid, a0, a1);
        }
        if EPOLL_CALLS.contains(&self.number) {
            return Some(epoll_set(pid, i64::from(a0 as i32)));
        }
        None
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

/// `len` bytes of the memory of `pid` at `address`, from `/proc/PID/mem`,
/// which the server may read because it is the ancestor of every command
/// it runs.
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
const CHILD_WAIT_CALLS: &[i64] =
    &[libc::SYS_wait4, libc::SYS_waitid, libc::SYS_pause, libc::SYS_rt_sigsuspend];
#[cfg(not(target_arch = "x86_64"))]
const CHILD_WAIT_CALLS: &[i64] = &[libc::SYS_wait4, libc::SYS_waitid, libc::SYS_rt_sigsuspend];

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

    fn inode(fd: &impl std::os::fd::AsRawFd) -> u64 {
        let target = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap();
        let target = target.to_str().unwrap();
        bracketed(target, "socket:").or_else(|| bracketed(target, "pipe:")).unwrap()
    }

    #[test]
    fn a_socket_pairs_peer_is_known_until_it_is_closed() {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let Some(socket) = unix_socket(inode(&a)) else {
            // A kernel without `sock_diag` for Unix sockets: every socket
            // then counts as producing, which `job_look` tests cover.
            eprintln!("skipped: no sock_diag for Unix sockets");
            return;
        };
        assert_eq!(socket.peer, inode(&b));
        assert_eq!(socket.state, 1, "TCP_ESTABLISHED");
        drop(b);
        let socket = unix_socket(inode(&a)).unwrap();
        assert!(socket.peer == 0 || socket.shutdown & 1 != 0, "{socket:?}");
        assert!(!socket.has_live_peer(&Holders::default()));
        // A listening socket waits for anyone: no peer.
        let dir = std::env::temp_dir().join(format!("sk-iw-{}", std::process::id()));
        let _ = std::fs::remove_file(&dir);
        let listener = std::os::unix::net::UnixListener::bind(&dir).unwrap();
        let socket = unix_socket(inode(&listener)).unwrap();
        assert!(!socket.has_live_peer(&Holders::default()), "{socket:?}");
        let _ = std::fs::remove_file(&dir);
    }

    #[test]
    fn a_peer_held_only_by_the_readers_is_a_self_pipe() {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let Some(socket) = unix_socket(inode(&a)) else { return };
        let me = std::process::id() as i32;
        // This process holds both ends: as a reader, the pair is its own
        // wake-up channel; as anyone else, a live peer.
        let readers = BTreeSet::from([me]);
        assert!(!socket.has_live_peer(&Holders::of(&[me], &readers)));
        assert!(socket.has_live_peer(&Holders::of(&[me], &BTreeSet::new())));
        // A peer nobody in the session holds is held outside it (a
        // server): live.
        assert!(socket.has_live_peer(&Holders::default()));
        drop(b);
    }

    #[test]
    fn pipe_write_ends_are_told_from_read_ends() {
        let (read, write) = std::io::pipe().unwrap();
        let me = std::process::id() as i32;
        let fd = |end: &dyn std::os::fd::AsRawFd| end.as_raw_fd().to_string();
        assert!(!writes(me, &fd(&read)));
        assert!(writes(me, &fd(&write)));
        let holders = Holders::of(&[me], &BTreeSet::new());
        assert!(Source::Pipe(inode(&read)).may_produce(&holders));
        drop(write);
        let holders = Holders::of(&[me], &BTreeSet::new());
        assert!(!Source::Pipe(inode(&read)).may_produce(&holders), "no writer left");
    }

    #[test]
    fn cpu_time_is_read_from_stat_and_a_busy_loop_is_not_still() {
        // A command with spaces and a parenthesis, as `comm` may hold.
        let stat = "42 (a b) c) S 1 42 42 0 -1 4194560 100 0 0 0 7 3 2 1 20 0 1 0 555 0 0";
        assert_eq!(cpu_fields(stat), Some((555, 13)));
        assert_eq!(cpu_fields("42 (x) S 1"), None);
        let me = std::process::id() as i32;
        let before = JobCpu::of(&[me]);
        assert_eq!(before.members.len(), 1);
        let second = std::time::Duration::from_secs(1);
        assert!(before.still_since(&before, second));
        // Spin for a while: the ticks grow past the allowance.
        let start = std::time::Instant::now();
        let mut spun = JobCpu::of(&[me]);
        while spun.ticks < before.ticks + clock_ticks_per_second() / 5 {
            std::hint::black_box((0..10_000u64).sum::<u64>());
            spun = JobCpu::of(&[me]);
        }
        assert!(!spun.still_since(&before, start.elapsed()));
        // Other processes, or none, are never still.
        let other = JobCpu { members: vec![(me, 1)], ticks: before.ticks };
        assert!(!other.still_since(&before, second));
        assert!(!JobCpu::default().still_since(&JobCpu::default(), second));
    }

    #[test]
    fn a_diag_answer_is_parsed_and_an_error_is_not_a_socket() {
        let mut reply = Vec::new();
        reply.extend_from_slice(&44u32.to_ne_bytes());
        reply.extend_from_slice(&20u16.to_ne_bytes());
        reply.extend_from_slice(&[0; 10]);
        // unix_diag_msg: family, type, state, pad, inode, cookie.
        reply.extend_from_slice(&[1, 1, 1, 0]);
        reply.extend_from_slice(&[0; 12]);
        // UNIX_DIAG_PEER = 77, then UNIX_DIAG_SHUTDOWN = 0 (padded).
        reply.extend_from_slice(&8u16.to_ne_bytes());
        reply.extend_from_slice(&2u16.to_ne_bytes());
        reply.extend_from_slice(&77u32.to_ne_bytes());
        reply.extend_from_slice(&5u16.to_ne_bytes());
        reply.extend_from_slice(&6u16.to_ne_bytes());
        reply.extend_from_slice(&[0, 0, 0, 0]);
        assert_eq!(UnixSocket::parse(&reply), Some(UnixSocket { state: 1, peer: 77, shutdown: 0 }));
        reply[4..6].copy_from_slice(&2u16.to_ne_bytes());
        assert_eq!(UnixSocket::parse(&reply), None);
        assert_eq!(UnixSocket::parse(&[0; 3]), None);
    }
}
