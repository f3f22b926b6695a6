//! Stopping processes: what a stop reaches ([`Targets`]: groups,
//! sessions, descendants, control groups, markers, unmarked processes of
//! ours attributed to an owner; sparing a shell's jobs) and the stop itself
//! (SIGTERM, grace, then rounds that freeze the control groups, SIGKILL and
//! kill the groups; or, with no grace, SIGSTOP to everything, then the
//! kill). Sends signals; starts nothing.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::time::Instant;

use super::children::spawned;
use super::proc_scan::{Root, for_each_proc, orphaned_groups};
use super::scope::{
    Mark, Marked, Scope, cgroup_of_owner, classify, owner_at, server_token, shell_scope,
};
use crate::cgroup;

/// Sends `signal` to every process in group `pgid`. Returns false when the
/// group no longer exists.
pub(crate) fn signal_group(pgid: i32, signal: Signal) -> bool {
    if pgid <= 1 {
        return false;
    }
    #[allow(clippy::disallowed_methods, reason = "process is where signals are sent")]
    killpg(Pid::from_raw(pgid), signal).is_ok()
}

/// What a stop reaches: every live process that is in one of `groups`,
/// `sessions` or `cgroups`, descends from one of `roots`, carries one of
/// `marks` in its environment, or is an unmarked process of ours that
/// `unmarked` attributes to the stop; never this process or one in
/// `exclude`, and (with `spare_jobs_of`) the shell's own jobs only when named
/// by `groups`, `sessions`, `roots` or `cgroups`.
///
/// Each check is one scan of `/proc` (the `stat` of every process, and the
/// `environ` of those not already matched when there are marks), so its
/// cost grows with the number of processes on the machine, not with what
/// is found.
///
/// How containment holds. In a cgroup mode ([`super::init_containment`],
/// `cgroup`), every owner has a control group its child joins between fork
/// and exec; nothing it starts leaves it without privileges, and stopping
/// the owner kills the group. The rest is the second net there, and the
/// only one in markers mode: every child carries an inherited marker in its
/// environment, `SHELLKEEP_SCOPE=<server token>/<owner>` ([`Scope`]), which
/// every descendant inherits whatever it does to its group or session (a
/// terminal shell exports `<owner>/c<seq>` for each command, so one
/// command's processes can be told apart). Stopping an owner stops every
/// process of ours whose `/proc/PID/environ` carries its marker, plus the
/// groups, sessions and descendants it names, plus the processes of ours
/// with no readable marker of a live owner (a marker of an owner that never
/// existed or has ended counts as none) that descend from it or are adopted
/// orphans attributed to it ([`Unmarked`]). The server is a child
/// subreaper ([`super::reap_adopted_orphans`]), so orphans stay its descendants.
/// The orphan guard, which outlives the server, sees markers, groups,
/// sessions, control groups, and the orphans the server adopted that only
/// their ancestry ties to it (told at every SIGCHLD the server gets). What
/// still escapes in markers mode: an unmarked orphan taken for another
/// owner's (see [`Unmarked`]), a process relabelled with another live
/// owner's marker (stopped with that owner), an unmarked one alive after a
/// server SIGKILL that the guard was not yet told of, and in every mode a
/// process that asks something outside our tree (`systemd-run`, `at`, a
/// daemon) to start it.
///
/// A sandboxed owner (its scope has a confinement whose report has the
/// namespace) also gets a PID namespace of its own whose init is ours
/// (`namespace`): what it starts can leave its group, session, environment
/// and control group, but not the namespace, which the kernel empties when
/// the owner's shell ends, when the owner is stopped, or when the server
/// dies, guard or no guard. This closes every escape above but the last.
///
/// Whatever must end with no chance to react is stopped first
/// ([`stop_then_kill`]: SIGSTOP to everything before SIGKILL), and in a
/// cgroup mode every SIGKILL round, and the last look of a stop, freeze the
/// control groups.
#[derive(Debug, Clone, Default)]
pub struct Targets {
    /// Process groups.
    pub groups: Vec<i32>,
    /// Sessions (a PTY shell and its jobs).
    pub sessions: Vec<i32>,
    /// Processes whose descendants (and themselves) are reached.
    pub roots: Vec<Root>,
    /// Scope markers.
    pub marks: Vec<Mark>,
    /// Control groups: everything in them (and under them) is reached, and
    /// killed as a whole after the grace period.
    pub cgroups: Vec<Arc<cgroup::Group>>,
    /// Processes of ours whose environment carries no marker of a live
    /// owner of this server (cleared, unreadable: non-dumpable, another
    /// user's, or relabelled with a made-up or ended owner): which of them
    /// this stop reaches.
    pub unmarked: Option<Unmarked>,
    /// Processes never reached (the orphan guard).
    pub exclude: Vec<i32>,
    /// A shell whose own jobs the sweeps by marker and by attribution never
    /// reach: the shell, every process group led by a child of the shell
    /// (other than `groups`), and their descendants. For stopping one
    /// command of a shell.
    pub spare_jobs_of: Option<i32>,
    /// Send SIGHUP before SIGTERM: interactive bash ignores SIGTERM but not
    /// SIGHUP, and passes SIGHUP on to its jobs.
    pub hangup: bool,
}

/// Which unmarked processes of ours (see [`Targets::unmarked`]) a stop
/// reaches: those that started at or after `since` and either descend
/// (now) from `under`, are in `cgroup`, or descend from an orphan the
/// server adopted (its parent is the server, which did not start it) that
/// is attributed to `owner`. An adopted orphan has lost its ancestry, so it
/// is attributed by its start time: to the newest `shell` or `run` owner
/// alive when it started. When several were alive (a `run` while a session
/// is open, two sessions), an orphan of the older one is taken for the
/// newer one's: stopped when that one stops, missed when its own owner
/// stops, and in any case stopped when the server ends. In a cgroup mode
/// the group decides instead, exactly; and an adopted orphan that left the
/// server's groups (root, a delegated subtree: `cgroup::outside_server_dir`)
/// did so on purpose, so it belongs to every stop, whoever's it was.
#[derive(Debug, Clone, Default)]
pub struct Unmarked {
    /// The owner's scope value.
    pub owner: String,
    /// Clock ticks since boot (see [`super::boot_ticks_now`]).
    pub since: u64,
    /// A process whose descendants are the owner's (its shell, its bash).
    pub under: Option<i32>,
    /// The owner's control group.
    pub cgroup: Option<Arc<cgroup::Group>>,
}

impl Targets {
    /// Everything `scope` owns.
    pub fn scope(scope: &Scope) -> Targets {
        Targets {
            marks: vec![scope.mark()],
            cgroups: scope.group().cloned().into_iter().collect(),
            unmarked: Some(Unmarked {
                owner: scope.value().to_owned(),
                cgroup: scope.group().cloned(),
                ..Unmarked::default()
            }),
            ..Targets::default()
        }
    }

    /// Everything this server started: its descendants (orphans included,
    /// once [`super::reap_adopted_orphans`] made it a subreaper) and whatever
    /// carries its token, except `exclude`. Its control-group directory is
    /// killed apart, when the containment ends ([`super::end_containment`]).
    pub fn whole_server(exclude: &[i32]) -> Targets {
        Targets {
            roots: Root::of(std::process::id() as i32).into_iter().collect(),
            marks: vec![Mark::Token(server_token().to_owned())],
            exclude: exclude.to_vec(),
            ..Targets::default()
        }
    }

    /// The live processes these targets reach now: one look at every
    /// process (`ProcTable`), then each is tested against what is named
    /// outright, and the rest against the marks and the attribution of
    /// unmarked processes (`Targets::reaches`).
    pub fn members(&self) -> Vec<i32> {
        let me = std::process::id() as i32;
        let (table, live_roots) = ProcTable::read(&self.roots);
        let look = Look {
            me,
            reached: table.descendants(live_roots),
            spared: self.spared_jobs(&table),
            in_cgroups: self.cgroups.iter().flat_map(|group| group.members()).collect(),
            unmarked_cgroup: self
                .unmarked
                .as_ref()
                .and_then(|unmarked| unmarked.cgroup.as_ref())
                .map(|group| group.members().into_iter().collect())
                .unwrap_or_default(),
            under: self
                .unmarked
                .as_ref()
                .and_then(|unmarked| unmarked.under)
                .map(|pid| table.descendants(vec![pid]))
                .unwrap_or_default(),
            spawned: spawned(),
            table,
        };
        look.table
            .rows
            .iter()
            .filter(|row| row.pid != me && !self.exclude.contains(&row.pid))
            .filter(|row| self.reaches(row, &look))
            .map(|row| row.pid)
            .collect()
    }

    /// The processes of the shell's jobs (`spare_jobs_of`), and the shell:
    /// spared from the sweeps by marker and by attribution.
    fn spared_jobs(&self, table: &ProcTable) -> HashSet<i32> {
        let Some(shell) = self.spare_jobs_of else { return HashSet::new() };
        let leaders: Vec<i32> = table
            .rows
            .iter()
            .filter(|row| {
                row.ppid == shell && row.pgrp == row.pid && !self.groups.contains(&row.pgrp)
            })
            .map(|row| row.pid)
            .collect();
        let mut jobs: Vec<i32> = table
            .rows
            .iter()
            .filter(|row| leaders.contains(&row.pgrp))
            .map(|row| row.pid)
            .collect();
        jobs.push(shell);
        let mut spared = table.descendants(jobs);
        spared.insert(shell);
        spared
    }

    /// Whether the targets reach `row`. What is named outright is reached;
    /// the shell's jobs are spared only from the sweeps by marker and by
    /// attribution.
    fn reaches(&self, row: &ProcRow, look: &Look) -> bool {
        look.reached.contains(&row.pid)
            || self.groups.contains(&row.pgrp)
            || self.sessions.contains(&row.session)
            || look.in_cgroups.contains(&row.pid)
            || !look.spared.contains(&row.pid)
                && match self.environ_marked(row.pid) {
                    Marked::Yes => true,
                    Marked::Other => false,
                    Marked::Unmarked => self.attributed(row, look),
                }
    }

    /// Whether the unmarked process `row` is the owner's: started after the
    /// owner, and under its process, in its control group, or below a
    /// process of this server that we did not spawn and that the owner
    /// started (or that is outside the server's control group).
    fn attributed(&self, row: &ProcRow, look: &Look) -> bool {
        let Some(unmarked) = &self.unmarked else { return false };
        row.start >= unmarked.since
            && (look.under.contains(&row.pid)
                || look.unmarked_cgroup.contains(&row.pid)
                || look.table.top_of(row.pid, look.me).is_some_and(|top| {
                    !look.spawned.contains(&top)
                        && (owner_at(top.1).as_deref() == Some(unmarked.owner.as_str())
                            || cgroup::outside_server_dir(row.pid))
                }))
    }

    /// Whether `pid`'s environment carries one of the marks ([`classify`]);
    /// an environment that cannot be read (a non-dumpable process, another
    /// user's) counts as unmarked.
    fn environ_marked(&self, pid: i32) -> Marked {
        if self.marks.is_empty() && self.unmarked.is_none() {
            return Marked::Other;
        }
        match std::fs::read(format!("/proc/{pid}/environ")) {
            Ok(environ) => classify(&self.marks, &environ),
            Err(_) => Marked::Unmarked,
        }
    }

    /// Sends `signal` to every member, and to the groups and sessions'
    /// groups as a whole (atomic against a fork in progress within them).
    fn signal(&self, members: &[i32], signal: Signal) {
        for &group in &self.groups {
            signal_group(group, signal);
        }
        for &pid in members {
            if pid > 1 {
                #[allow(clippy::disallowed_methods, reason = "process is where signals are sent")]
                let _ = nix::sys::signal::kill(Pid::from_raw(pid), signal);
            }
        }
    }

    /// The control groups a stop freezes while it kills: its own, and the
    /// owner's group its unmarked processes are looked for in (a shell's,
    /// whose shell and jobs are spared: frozen for a moment, then thawed).
    fn groups_to_freeze(&self) -> Vec<&Arc<cgroup::Group>> {
        let owner = self.unmarked.as_ref().and_then(|unmarked| unmarked.cgroup.as_ref());
        let mut groups: Vec<&Arc<cgroup::Group>> = self.cgroups.iter().collect();
        groups.extend(owner.filter(|owner| !self.cgroups.iter().any(|g| Arc::ptr_eq(g, owner))));
        groups
    }

    /// One round of the kill: the control groups frozen (nothing in them
    /// can fork or signal meanwhile), SIGKILL to every member, the groups'
    /// own kill, then the groups thawed. Returns whether nothing was left
    /// to kill.
    fn kill_round(&self) -> bool {
        let frozen = self.groups_to_freeze();
        for group in &frozen {
            if let Err(err) = group.set_frozen(true) {
                tracing::debug!(
                    "cannot freeze the control group {}: {err}",
                    group.path().display()
                );
            }
        }
        let members = self.members();
        self.signal(&members, Signal::SIGKILL);
        self.kill_cgroups();
        for group in &frozen {
            if let Err(err) = group.set_frozen(false) {
                tracing::warn!("cannot thaw the control group {}: {err}", group.path().display());
            }
        }
        members.is_empty()
    }

    /// The live members, looked for with the control groups frozen (see
    /// [`Targets::kill_round`]), or plainly where there are none.
    fn frozen_members(&self) -> Vec<i32> {
        let frozen = self.groups_to_freeze();
        for group in &frozen {
            let _ = group.set_frozen(true);
        }
        let members = self.members();
        for group in &frozen {
            if let Err(err) = group.set_frozen(false) {
                tracing::warn!("cannot thaw the control group {}: {err}", group.path().display());
            }
        }
        members
    }

    /// Kills the control groups as a whole.
    fn kill_cgroups(&self) {
        for group in &self.cgroups {
            if let Err(err) = group.kill() {
                tracing::warn!("cannot kill the control group {}: {err}", group.path().display());
            }
        }
    }
}

/// Stops every process `targets` reach: SIGTERM (after SIGHUP when
/// `targets.hangup`) and SIGCONT, then, after `grace`, the control groups'
/// kill and SIGKILL to whatever else is still alive. Processes that appear
/// meanwhile (a fork in progress) get the same. Where there are control
/// groups, the last look (that nothing is left, or what to kill) is taken
/// with them frozen: a fork chain (each process forks the next and exits)
/// slips between two looks at `/proc`, never through a frozen group.
/// Returns `None` when there was nothing alive to stop.
///
/// There is no kernel event for "these processes are gone", so the grace
/// period checks for survivors at a short, growing interval.
pub async fn terminate(targets: &Targets, grace: Duration) -> Option<TerminationMode> {
    let mut members = targets.members();
    if members.is_empty() && !targets.groups_to_freeze().is_empty() {
        members = targets.frozen_members();
    }
    if members.is_empty() {
        return None;
    }
    let mut signalled: HashSet<i32> = HashSet::new();
    let mut polite = |members: &[i32]| {
        let fresh: Vec<i32> =
            members.iter().copied().filter(|pid| signalled.insert(*pid)).collect();
        if targets.hangup {
            targets.signal(&fresh, Signal::SIGHUP);
        }
        targets.signal(&fresh, Signal::SIGTERM);
        // A stopped process does not act on SIGTERM until it continues.
        targets.signal(&fresh, Signal::SIGCONT);
    };
    polite(&members);
    let gone = wait_until(grace, || {
        let members = targets.members();
        polite(&members);
        members.is_empty()
    })
    .await;
    // A look that finds nothing may fall between two generations of a fork
    // chain; one within frozen control groups cannot (and kills what it
    // finds).
    if gone && (targets.groups_to_freeze().is_empty() || targets.kill_round()) {
        return Some(TerminationMode::Soft);
    }
    // Each round freezes the control groups first: a fork chain (each
    // process forks the next and exits) outruns a look at /proc, not a
    // frozen group.
    wait_until(Duration::from_secs(2), || targets.kill_round()).await;
    Some(TerminationMode::Hard)
}

/// How long [`stop_then_kill`] keeps stopping what appears before it kills
/// whatever it has.
const STOP_LIMIT: Duration = Duration::from_secs(2);

/// Stops every process `targets` reach with no grace and no chance to react
/// (the orphan guard's stop, after the server's death: nothing must fork,
/// signal the guard or write in between). First SIGSTOP: to the groups as a
/// whole (atomic against a fork in progress) and to every member, again to
/// whatever appeared meanwhile until a look finds nothing new (at most
/// `STOP_LIMIT`); a stopped process cannot run, and a stop cannot be
/// caught or ignored. Then SIGKILL to every member, in rounds that freeze
/// the control groups (see [`terminate`]) until none is left (at most 2 s).
/// Blocking. Returns `None` when nothing was alive.
pub(crate) fn stop_then_kill(targets: &Targets) -> Option<TerminationMode> {
    let mut stopped: HashSet<i32> = HashSet::new();
    let deadline = std::time::Instant::now() + STOP_LIMIT;
    loop {
        for &group in &targets.groups {
            signal_group(group, Signal::SIGSTOP);
        }
        let fresh: Vec<i32> =
            targets.members().into_iter().filter(|&pid| stopped.insert(pid)).collect();
        if fresh.is_empty() || std::time::Instant::now() >= deadline {
            break;
        }
        targets.signal(&fresh, Signal::SIGSTOP);
    }
    if stopped.is_empty() {
        return None;
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    let mut pause = Duration::from_millis(1);
    while !targets.kill_round() && std::time::Instant::now() < deadline {
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(50));
    }
    Some(TerminationMode::Hard)
}

/// Sends SIGKILL at once to every process `targets` reach (the control
/// groups as a whole), a few rounds to catch forks in progress; for paths
/// that cannot wait (a dropped run).
pub(crate) fn kill_now(targets: &Targets) {
    for _ in 0..3 {
        targets.kill_cgroups();
        let members = targets.members();
        if members.is_empty() {
            return;
        }
        targets.signal(&members, Signal::SIGKILL);
    }
}

/// Stops every process in each of `groups`: SIGTERM first, then SIGKILL to
/// whatever is still alive after `grace`. Returns `None` when there was
/// nothing alive to stop.
/// How a process group we stopped went away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TerminationMode {
    /// It exited within the grace period after SIGTERM.
    Soft,
    /// It was still alive after the grace period and got SIGKILL.
    Hard,
}

impl TerminationMode {
    /// The seed's spelling: `"soft"` or `"hard"`.
    pub fn as_str(self) -> &'static str {
        match self {
            TerminationMode::Soft => "soft",
            TerminationMode::Hard => "hard",
        }
    }
}

#[cfg(test)]
pub(crate) async fn terminate_groups(groups: &[i32], grace: Duration) -> Option<TerminationMode> {
    terminate(&Targets { groups: groups.to_vec(), ..Targets::default() }, grace).await
}

/// Stops every process in session `sid` (a PTY shell and everything it
/// started) and, when given, everything `scope` owns (its control group,
/// what carries its marker, what descends from the shell, and unmarked
/// orphans attributed to it): SIGHUP, SIGTERM and SIGCONT, then the
/// group's kill and SIGKILL to whatever is left after `grace`.
pub(crate) async fn terminate_session(sid: i32, scope: Option<&Scope>, grace: Duration) {
    let mut targets = scope.map(Targets::scope).unwrap_or_default();
    targets.sessions.push(sid);
    targets.roots.extend(Root::of(sid));
    if let Some(unmarked) = &mut targets.unmarked {
        unmarked.under = Some(sid);
    }
    targets.hangup = true;
    terminate(&targets, grace).await;
}

/// What stopping one command of the terminal shell `shell_pid` reaches
/// (`C-c`, the execution-limit kill): the groups it left behind in the
/// shell's session, every process carrying the command's own marker
/// (`<shell's scope>/c<seq>`, which the shell exports before it runs
/// command `seq`) in any session, and unmarked processes of the shell's
/// owner that started at or after `since`; never the shell or its own jobs
/// (groups led by a child of the shell). The caller adds the foreground
/// group.
pub(crate) fn command_targets(shell_pid: i32, seq: u64, since: u64) -> Targets {
    let scope = shell_scope(shell_pid);
    let group = scope.as_deref().and_then(cgroup_of_owner);
    Targets {
        groups: orphaned_groups(shell_pid, since),
        marks: scope.iter().map(|value| Mark::Exact(format!("{value}/c{seq}"))).collect(),
        unmarked: scope.map(|owner| Unmarked {
            owner,
            since,
            under: Some(shell_pid),
            cgroup: group,
        }),
        spare_jobs_of: Some(shell_pid),
        ..Targets::default()
    }
}

/// Waits until `done` holds or `limit` passes; returns whether it held.
pub(super) async fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    let mut interval = Duration::from_millis(2);
    loop {
        if done() {
            return true;
        }
        let now = Instant::now();
        if now >= deadline {
            return false;
        }
        tokio::time::sleep(interval.min(deadline - now)).await;
        interval = (interval * 2).min(Duration::from_millis(50));
    }
}

/// One process as one look at `/proc` saw it.
#[derive(Debug, Clone, Copy)]
struct ProcRow {
    pid: i32,
    ppid: i32,
    pgrp: i32,
    session: i32,
    /// Clock ticks since boot.
    start: u64,
}

/// One look at every process: who is whose child, to walk down to
/// descendants and up to the process of ours a process descends from.
struct ProcTable {
    rows: Vec<ProcRow>,
    children: HashMap<i32, Vec<i32>>,
    /// Each process's parent, and the process's own start time.
    parent: HashMap<i32, (i32, u64)>,
}

impl ProcTable {
    /// Reads every process once; also returns which of `roots` are alive.
    fn read(roots: &[Root]) -> (ProcTable, Vec<i32>) {
        let mut rows = Vec::new();
        let mut live_roots = Vec::new();
        for_each_proc(|stat| {
            rows.push(ProcRow {
                pid: stat.pid,
                ppid: stat.ppid,
                pgrp: stat.pgrp,
                session: stat.session,
                start: stat.start_ticks,
            });
            if roots.contains(&Root { pid: stat.pid, start_ticks: stat.start_ticks }) {
                live_roots.push(stat.pid);
            }
        });
        let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
        let mut parent = HashMap::new();
        for row in &rows {
            children.entry(row.ppid).or_default().push(row.pid);
            parent.insert(row.pid, (row.ppid, row.start));
        }
        (ProcTable { rows, children, parent }, live_roots)
    }

    /// `roots` and all their descendants.
    fn descendants(&self, roots: Vec<i32>) -> HashSet<i32> {
        let mut reached: HashSet<i32> = HashSet::new();
        let mut stack = roots;
        while let Some(pid) = stack.pop() {
            if reached.insert(pid) {
                stack.extend(self.children.get(&pid).into_iter().flatten());
            }
        }
        reached
    }

    /// The ancestor of `pid` whose parent is `me` (this server), with its
    /// start time, if any (a bounded walk up).
    fn top_of(&self, pid: i32, me: i32) -> Option<(i32, u64)> {
        let mut current = pid;
        for _ in 0..4096 {
            let (ppid, start) = *self.parent.get(&current)?;
            if ppid == me {
                return Some((current, start));
            }
            current = ppid;
        }
        None
    }
}

/// What [`Targets::members`] computed once for every process it tests.
struct Look {
    /// This server's pid.
    me: i32,
    table: ProcTable,
    /// The live roots and their descendants.
    reached: HashSet<i32>,
    /// The shell's jobs, spared from marker and attribution sweeps.
    spared: HashSet<i32>,
    /// Members of the targets' control groups.
    in_cgroups: HashSet<i32>,
    /// Members of the unmarked owner's control group.
    unmarked_cgroup: HashSet<i32>,
    /// Descendants of the unmarked owner's process.
    under: HashSet<i32>,
    /// The children this server spawned, with their start times.
    spawned: Vec<(i32, u64)>,
}

#[cfg(test)]
mod tests {
    use std::process::Stdio;

    use super::*;
    use crate::process::{group_command, live_group_members};

    #[tokio::test]
    async fn terminate_groups_kills_a_whole_tree() {
        let mut child = group_command("bash", &Scope::new("test"))
            .arg("-c")
            .arg("trap '' TERM; sleep 300 & sleep 300 & wait")
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn bash");
        let pgid = child.id().expect("pid") as i32;
        // Wait until both sleeps exist, so the kill has a tree to kill.
        assert!(wait_until(Duration::from_secs(10), || live_group_members(pgid).len() >= 3).await);
        let mode = terminate_groups(&[pgid], Duration::from_millis(300)).await;
        // bash ignores SIGTERM, so it takes SIGKILL.
        assert_eq!(mode, Some(TerminationMode::Hard));
        assert!(live_group_members(pgid).is_empty());
        child.wait().await.expect("reaped");
    }
}
