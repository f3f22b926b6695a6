//! The children we spawned ourselves, registered by pid and start time at
//! spawn, and the reaping of orphans the server adopted as a subreaper
//! (zombies among its children that it did not spawn). No `unsafe`, and
//! nothing of `spawn`, which registers what it starts here.

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};

use nix::unistd::Pid;

use super::proc_scan::{Root, for_each_stat};

/// Children we started ourselves, by pid and start time, so that the reaper
/// of adopted orphans never takes the exit status of a child a `Child`
/// handle waits for. Held across each spawn, so a child that exits at once
/// is registered before the reaper can see its zombie.
static SPAWNED: Mutex<Vec<(i32, u64)>> = Mutex::new(Vec::new());

/// Runs `spawn` while holding the registry and registers the child it
/// returns (`pid` reads its pid), so that a child that exits at once is
/// registered before the reaper can see its zombie.
pub(super) fn spawn_registered<T>(
    spawn: impl FnOnce() -> std::io::Result<T>,
    pid: impl FnOnce(&T) -> Option<u32>,
) -> std::io::Result<T> {
    let mut spawned = SPAWNED.lock().unwrap_or_else(PoisonError::into_inner);
    let child = spawn()?;
    if let Some(pid) = pid(&child) {
        register(&mut spawned, pid as i32);
    }
    Ok(child)
}

/// Spawns a blocking `std` command (the orphan guard's) and registers the
/// child as ours.
pub fn spawn_std(command: &mut std::process::Command) -> std::io::Result<std::process::Child> {
    spawn_registered(|| command.spawn(), |child| Some(child.id()))
}

/// A copy of the registry of children we spawned, by pid and start time.
pub(super) fn spawned() -> Vec<(i32, u64)> {
    SPAWNED.lock().unwrap_or_else(PoisonError::into_inner).clone()
}

/// Registers `pid`. Outside the server nothing reaps, so the list is pruned
/// of children that are gone once it grows: it holds about as many entries
/// as there are live children, plus at most 256.
fn register(spawned: &mut Vec<(i32, u64)>, pid: i32) {
    if spawned.len() >= 256 {
        spawned.retain(|&(pid, start)| Root::of(pid).is_some_and(|root| root.start_ticks == start));
    }
    spawned.push((pid, Root::of(pid).map_or(0, |root| root.start_ticks)));
}

/// Reaps the zombies among our children that we did not spawn ourselves
/// (forgetting registered children that are gone), and lists the live orphans we adopted (children of ours
/// we did not spawn) that only their ancestry ties to us: in a cgroup mode,
/// those that left the server's control groups; in markers mode, all of
/// them. The orphan guard is told these, so that it can stop them and what
/// they start after the server's death, when that ancestry is gone.
pub(super) fn reap_and_list() -> (usize, Vec<Root>) {
    let me = std::process::id() as i32;
    let mut spawned = SPAWNED.lock().unwrap_or_else(PoisonError::into_inner);
    let mut present = HashSet::new();
    let mut zombies = Vec::new();
    let mut adopted = Vec::new();
    for_each_stat(|stat| {
        present.insert((stat.pid, stat.start_ticks));
        if stat.ppid == me {
            if stat.state == b'Z' {
                zombies.push((stat.pid, stat.start_ticks));
            } else {
                adopted.push((stat.pid, stat.start_ticks));
            }
        }
    });
    spawned.retain(|entry| present.contains(entry));
    let in_cgroup_mode = crate::cgroup::server_dir().is_some();
    let adopted: Vec<Root> = adopted
        .into_iter()
        .filter(|entry| !spawned.contains(entry))
        .filter(|&(pid, _)| !in_cgroup_mode || crate::cgroup::outside_server_dir(pid))
        .map(|(pid, start)| Root::at(pid, start))
        .collect();
    let mut reaped = 0;
    for zombie in zombies {
        if spawned.contains(&zombie) {
            continue;
        }
        let pid = Pid::from_raw(zombie.0);
        if nix::sys::wait::waitpid(pid, Some(nix::sys::wait::WaitPidFlag::WNOHANG)).is_ok() {
            reaped += 1;
        }
    }
    (reaped, adopted)
}
