//! Named terminal sessions: the registry that starts, finds, lists, expires
//! and closes them, and tells about background jobs that began waiting for
//! input or ended. Each session is a full [`Session`] (its own shell, PTY and
//! lock), so commands in different sessions run in parallel.
//!
//! It does not run commands (sessions do) or word replies (the server does).
//! Invariants: the registry owns every session: one is started only through
//! [`Registry::open`] or [`Registry::open_background`], and stopped only after
//! it left the map, so a slow stop never blocks calls to other sessions; the
//! map's `std::sync::Mutex` is held for short, non-async sections. Bounds: at
//! most `max_sessions` live sessions and as many ended jobs; names of at most
//! 32 characters from `[A-Za-z0-9_.-]`; the expired names and ended-job
//! notices remembered are capped.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::sandbox::Policy;
use crate::session::{Activity, CommandEnd, Place, Session, SessionConfig};

/// The name of the session used when a call names none.
pub const DEFAULT_SESSION: &str = "default";

/// The longest session name.
pub const MAX_NAME_LEN: usize = 32;

/// How many expired names, and how many unreported job ends, are
/// remembered at most (the oldest are forgotten first).
const MAX_REMEMBERED: usize = 64;

/// Limits on the sessions of one server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegistryLimits {
    /// Live sessions at most, `default` included.
    pub max_sessions: usize,
    /// A session idle at its prompt this long, with no call in progress, is
    /// closed. `default` and background jobs never expire.
    pub idle_expiry: Duration,
    /// An ended background job's session (and its output) is kept this
    /// long after the job's end, or after its last use if later, then
    /// closed.
    pub job_keep: Duration,
    /// Whether a generated job name carries 64 random bits
    /// (`job-N-0123456789abcdef`), so that it cannot be guessed from
    /// another's (a shared endpoint); else it is `job-N`.
    pub unguessable_jobs: bool,
}

impl Default for RegistryLimits {
    /// 16 sessions, 30 minutes, ended jobs kept 10 minutes.
    fn default() -> RegistryLimits {
        RegistryLimits {
            max_sessions: 16,
            idle_expiry: Duration::from_secs(30 * 60),
            job_keep: Duration::from_secs(10 * 60),
            unguessable_jobs: false,
        }
    }
}

/// Why a session could not be opened or found: the facts, which the
/// server words for the agent; the `Display` is a short form for logs.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The name breaks the naming rule ([`validate_name`]); the name is cut
    /// to a little over [`MAX_NAME_LEN`] characters.
    #[error("invalid session name {0:?}")]
    InvalidName(String),
    /// No session has this name.
    #[error("unknown session {name:?}")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The names of the open sessions, in order.
        open: Vec<String>,
    },
    /// Starting one more would pass the limit.
    #[error("session {name:?} refused: {limit} sessions open, the limit")]
    TooMany {
        /// The name asked for.
        name: String,
        /// The limit.
        limit: usize,
        /// The names of the open sessions, in order.
        open: Vec<String>,
    },
    /// The system's random source failed, so no unguessable job name
    /// could be made; the source's own error.
    #[error("no random job name: {0}")]
    NoRandom(String),
    /// A background job was asked for under a name already in use.
    #[error("session {0:?} exists already")]
    NameTaken(String),
    /// The directory a new session was to start in is not a directory.
    #[error("{0:?} is not a directory")]
    BadCwd(PathBuf),
}

/// What opening a session found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Opened {
    /// The session already existed.
    Existing,
    /// A new session was started in `cwd`.
    Started {
        /// Where its shell starts.
        cwd: PathBuf,
        /// The name had been used by a session that expired.
        expired_before: bool,
    },
}

/// A background job that ended, reported once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobEnded {
    /// Its session's name.
    pub session: String,
    /// The command it ran.
    pub command: String,
    /// Its exit code.
    pub exit_code: i32,
    /// How long it ran, from its start to its end.
    pub ran_for: Duration,
    /// How long its session and output are kept from now, unless used.
    pub kept_for: Duration,
}

/// A background job that began waiting for input, reported once per wait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobWaiting {
    /// Its session's name.
    pub session: String,
    /// The command it runs.
    pub command: String,
    /// The text on its cursor's line: its prompt, maybe empty.
    pub prompt: String,
}

/// How a background job ended, as a listing shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobEnd {
    /// Its exit code.
    pub exit_code: i32,
    /// How long it ran, from its start to its end.
    pub ran_for: Duration,
    /// Time left until its session is closed.
    pub closes_in: Duration,
}

/// One row of [`Registry::list`].
#[derive(Debug, Clone)]
pub struct SessionInfo {
    /// The session's name.
    pub name: String,
    /// Its shell's working directory (as the last prompt reported it).
    pub cwd: PathBuf,
    /// What it is doing.
    pub activity: Activity,
    /// Set for a session started with `background: true`: its command.
    pub background: Option<String>,
    /// Set once that background job ended.
    pub job_end: Option<JobEnd>,
    /// When a call last used it.
    pub last_used: SystemTime,
    /// Live processes in its shell's session, the shell included.
    pub processes: usize,
    /// Whether its command is blocked reading the terminal.
    pub waiting_for_input: bool,
    /// Its command's prompt, once its wait for input is confirmed.
    pub prompt: Option<String>,
    /// Bytes of command output its store keeps.
    pub output_bytes: u64,
    /// The sandbox its shells run in.
    pub sandbox: Policy,
}

/// A live session and what the registry knows about it.
struct Entry {
    session: Arc<Session>,
    /// Set for a background job's session.
    job: Option<Job>,
    last_used: SystemTime,
    /// When, on the monotonic clock, it was last used.
    last_used_at: Instant,
    /// Calls in progress on it.
    in_use: usize,
}

/// A background job, as the registry keeps it.
struct Job {
    /// Its command.
    command: String,
    /// When its session was opened.
    started: Instant,
    /// How it ended, once it has.
    end: Option<Ended>,
    /// Its current wait for input was reported (by a notice, or by a reply
    /// about its own session); cleared when it no longer waits.
    wait_reported: bool,
}

/// How a job ended, and when (monotonic).
#[derive(Clone, Copy)]
struct Ended {
    exit_code: i32,
    ran_for: Duration,
    at: Instant,
}

impl Entry {
    /// An ended background job's session, not running a command the agent
    /// typed into it since: it does not count against the session limit,
    /// and it is closed after the keep time.
    fn ended_job(&self) -> Option<Ended> {
        let end = self.job.as_ref()?.end?;
        let running = matches!(self.session.activity(), Activity::Running { .. });
        (!running).then_some(end)
    }

    /// When an ended job's session is closed: `keep` after its end, or
    /// after its last use if later.
    fn closes_at(&self, end: Ended, keep: Duration) -> Instant {
        end.at.max(self.last_used_at) + keep
    }
}

struct Inner {
    sessions: BTreeMap<String, Entry>,
    /// Names that expired, so that the next call to one says so.
    expired: VecDeque<String>,
    /// Background jobs that ended, not yet reported.
    ended: VecDeque<JobEnded>,
    /// The number of the last generated job name.
    last_job: u64,
}

/// The session limit of a whole server, shared by the registries of its
/// clients: a session is started only while the live sessions of all of
/// them together stay within it.
pub struct SessionBudget {
    max: usize,
    /// Held from a registry's check of the room to the update of its
    /// count, so that two registries cannot both take the last place.
    gate: Mutex<()>,
    /// The registries that draw on it.
    members: Mutex<Vec<std::sync::Weak<Registry>>>,
    /// Places held by work that is not a session (a server's `run` task,
    /// [`SessionBudget::hold`]): each counts as a live session.
    held: std::sync::atomic::AtomicUsize,
}

impl SessionBudget {
    /// A budget of `max` live sessions.
    pub fn new(max: usize) -> Arc<SessionBudget> {
        Arc::new(SessionBudget {
            max,
            gate: Mutex::new(()),
            members: Mutex::new(Vec::new()),
            held: std::sync::atomic::AtomicUsize::new(0),
        })
    }

    /// The live sessions of every registry but `except`, as last counted,
    /// and the places held.
    fn live_elsewhere(&self, except: &Registry) -> usize {
        let mut members = self.members.lock().unwrap_or_else(|p| p.into_inner());
        members.retain(|member| member.strong_count() > 0);
        let sessions: usize = members
            .iter()
            .filter_map(std::sync::Weak::upgrade)
            .filter(|member| !std::ptr::eq(member.as_ref(), except))
            .map(|member| member.live.load(std::sync::atomic::Ordering::Acquire))
            .sum();
        sessions + self.held.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Takes one place of the budget, as a session would, for work that is
    /// not one (a `run` that outlives its call), until the returned hold is
    /// dropped; `None` when every place is taken.
    pub fn hold(self: &Arc<Self>) -> Option<BudgetHold> {
        let _gate = self.gate.lock().unwrap_or_else(|p| p.into_inner());
        let live = {
            let members = self.members.lock().unwrap_or_else(|p| p.into_inner());
            members
                .iter()
                .filter_map(std::sync::Weak::upgrade)
                .map(|member| member.live.load(std::sync::atomic::Ordering::Acquire))
                .sum::<usize>()
        };
        if live + self.held.load(std::sync::atomic::Ordering::Acquire) >= self.max {
            return None;
        }
        self.held.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        Some(BudgetHold(Arc::clone(self)))
    }

    /// The most live sessions (and holds) at once.
    pub fn max(&self) -> usize {
        self.max
    }
}

/// One place of a [`SessionBudget`] held by work that is not a session;
/// given back when dropped.
pub struct BudgetHold(Arc<SessionBudget>);

impl Drop for BudgetHold {
    fn drop(&mut self) {
        self.0.held.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// All sessions of one client (on stdio, of the server).
///
/// A session leaves the map through [`Registry::remove`] (the caller then
/// closes it), idle expiry, or [`Registry::close_all`] at shutdown. A
/// background job is a session of its own, started in the place
/// ([`Place`]) of the session it was started from; when its command ends,
/// the end is recorded (exit code, the true run time), announced once
/// unless a reply reported it first, and the session, with its output, is
/// kept for `job_keep` after its end (or its last use, if later), then
/// closed. An ended job does not count against the session limit.
pub struct Registry {
    template: SessionConfig,
    limits: RegistryLimits,
    inner: Mutex<Inner>,
    /// Woken when the earliest expiry may have changed.
    changed: Notify,
    /// The server's session limit, which other registries may share.
    budget: Arc<SessionBudget>,
    /// The live sessions (ended jobs not counted), as of the last release
    /// of `inner`: what the budget's other registries read.
    live: std::sync::atomic::AtomicUsize,
}

/// The registry's state while locked; releasing it updates the count of
/// live sessions the budget reads.
struct Locked<'a> {
    registry: &'a Registry,
    inner: MutexGuard<'a, Inner>,
}

impl std::ops::Deref for Locked<'_> {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.inner
    }
}

impl std::ops::DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut Inner {
        &mut self.inner
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        let live = live_count(&self.inner.sessions);
        self.registry.live.store(live, std::sync::atomic::Ordering::Release);
    }
}

/// Live sessions: every session but ended background jobs.
fn live_count(sessions: &BTreeMap<String, Entry>) -> usize {
    sessions.values().filter(|entry| entry.ended_job().is_none()).count()
}

/// A session borrowed for one call: it counts as in use (so it cannot
/// expire) until dropped.
pub struct Lease {
    registry: Arc<Registry>,
    name: String,
    session: Arc<Session>,
}

impl Lease {
    /// The session.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let mut inner = self.registry.lock();
        if let Some(entry) = inner.sessions.get_mut(&self.name)
            && Arc::ptr_eq(&entry.session, &self.session)
        {
            entry.in_use = entry.in_use.saturating_sub(1);
            entry.last_used = SystemTime::now();
            entry.last_used_at = Instant::now();
        }
        drop(inner);
        self.registry.changed.notify_one();
    }
}

impl Registry {
    /// A registry whose sessions are configured like `template` (each gets
    /// its own name and start directory). No shell starts until a session
    /// is opened.
    pub fn new(template: SessionConfig, limits: RegistryLimits) -> Arc<Registry> {
        Registry::sharing(template, limits, SessionBudget::new(limits.max_sessions))
    }

    /// A registry like [`Registry::new`]'s whose live sessions count in
    /// `budget`, with those of every other registry that shares it (the
    /// clients of one server).
    pub fn sharing(
        template: SessionConfig,
        limits: RegistryLimits,
        budget: Arc<SessionBudget>,
    ) -> Arc<Registry> {
        let registry = Arc::new(Registry {
            template,
            limits,
            inner: Mutex::new(Inner {
                sessions: BTreeMap::new(),
                expired: VecDeque::new(),
                ended: VecDeque::new(),
                last_job: 0,
            }),
            changed: Notify::new(),
            budget: Arc::clone(&budget),
            live: std::sync::atomic::AtomicUsize::new(0),
        });
        budget.members.lock().unwrap_or_else(|p| p.into_inner()).push(Arc::downgrade(&registry));
        registry
    }

    /// The limits in force.
    pub fn limits(&self) -> RegistryLimits {
        self.limits
    }

    /// The session budget it draws on (the server's, shared by its
    /// clients' registries).
    pub fn budget(&self) -> &Arc<SessionBudget> {
        &self.budget
    }

    /// The directory new sessions start in unless a call names another.
    pub fn start_dir(&self) -> &std::path::Path {
        &self.template.cwd
    }

    fn lock(&self) -> Locked<'_> {
        let inner = self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        Locked { registry: self, inner }
    }

    /// The session `name` for one call, started (in `cwd`, else the start
    /// directory; recorded if the server records and `record` is true;
    /// under `sandbox`, else the template's) when it does not exist. `cwd`,
    /// `record` and `sandbox` are ignored for an existing session.
    pub fn open(
        self: &Arc<Self>,
        name: &str,
        cwd: Option<PathBuf>,
        record: bool,
        sandbox: Option<Policy>,
    ) -> Result<(Lease, Opened), RegistryError> {
        validate_name(name)?;
        let mut inner = self.lock();
        if let Some(entry) = inner.sessions.get_mut(name) {
            entry.in_use += 1;
            entry.last_used = SystemTime::now();
            entry.last_used_at = Instant::now();
            let session = Arc::clone(&entry.session);
            return Ok((self.lease(name, session), Opened::Existing));
        }
        let cwd = self.checked_cwd(cwd)?;
        let gate = self.budget.gate.lock().unwrap_or_else(|p| p.into_inner());
        self.check_room(&inner, name)?;
        let expired_before = match inner.expired.iter().position(|n| n == name) {
            Some(i) => {
                inner.expired.remove(i);
                true
            }
            None => false,
        };
        let place = Place { cwd: cwd.clone(), env: None };
        let session = self.insert(&mut inner, name, place, None, record, sandbox);
        // Counted before another registry may look.
        drop(inner);
        drop(gate);
        self.changed.notify_one();
        Ok((self.lease(name, session), Opened::Started { cwd, expired_before }))
    }

    /// Starts a background job's session in `place` (its directory, and
    /// its environment unless `None`: then the server's): named `name` if
    /// given (it must not exist), else `job-N` (with a random suffix when
    /// the limits ask for unguessable names); recorded if the server
    /// records and `record` is true; under `sandbox`, else the template's.
    /// The caller runs the job's command in
    /// it and then calls [`Registry::watch_job`], or
    /// [`Registry::forget_job`] if it could not be started.
    pub fn open_background(
        self: &Arc<Self>,
        name: Option<&str>,
        place: Place,
        command: &str,
        record: bool,
        sandbox: Option<Policy>,
    ) -> Result<(Lease, PathBuf), RegistryError> {
        let mut inner = self.lock();
        let (name, generated) = match name {
            Some(name) => {
                validate_name(name)?;
                if inner.sessions.contains_key(name) {
                    return Err(RegistryError::NameTaken(name.to_owned()));
                }
                (name.to_owned(), None)
            }
            None => {
                let mut number = inner.last_job;
                loop {
                    number += 1;
                    let candidate = if self.limits.unguessable_jobs {
                        let random = crate::private_fs::random_hex(8)
                            .map_err(|err| RegistryError::NoRandom(err.to_string()))?;
                        format!("job-{number}-{random}")
                    } else {
                        format!("job-{number}")
                    };
                    if !inner.sessions.contains_key(&candidate) {
                        break (candidate, Some(number));
                    }
                }
            }
        };
        let cwd = self.checked_cwd(Some(place.cwd))?;
        let gate = self.budget.gate.lock().unwrap_or_else(|p| p.into_inner());
        self.check_room(&inner, &name)?;
        // A generated number is used up only by a job that starts.
        if let Some(number) = generated {
            inner.last_job = number;
        }
        inner.expired.retain(|n| *n != name);
        let place = Place { cwd: cwd.clone(), env: place.env };
        let command = Some(command.to_owned());
        let session = self.insert(&mut inner, &name, place, command, record, sandbox);
        // Counted before another registry may look.
        drop(inner);
        drop(gate);
        // An ended job may have to make room.
        self.changed.notify_one();
        Ok((self.lease(&name, session), cwd))
    }

    /// Removes the session of a background job that could not be started
    /// (its shell did not start there), to be closed by the caller.
    pub fn forget_job(&self, lease: &Lease) -> Option<Arc<Session>> {
        let mut inner = self.lock();
        let ours = inner
            .sessions
            .get(&lease.name)
            .is_some_and(|e| Arc::ptr_eq(&e.session, &lease.session));
        ours.then(|| inner.sessions.remove(&lease.name)).flatten().map(|entry| entry.session)
    }

    /// Watches the background job, command `number` of `lease`'s session:
    /// when it ends, records how (and queues a notice, unless a reply
    /// reported its end first or the session was closed).
    pub fn watch_job(self: &Arc<Self>, lease: &Lease, number: u64) {
        let registry = Arc::downgrade(self);
        let name = lease.name.clone();
        let session = Arc::clone(&lease.session);
        tokio::spawn(async move {
            let Some(end) = session.command_end(number).await else { return };
            let Some(registry) = registry.upgrade() else { return };
            registry.job_ended(&name, &session, end);
        });
    }

    /// Records that the job in session `name` ended (if that session is
    /// still `session`), and queues its notice unless a reply reported it.
    fn job_ended(&self, name: &str, session: &Arc<Session>, end: CommandEnd) {
        let keep = self.limits.job_keep;
        let mut inner = self.lock();
        let Some(entry) = inner.sessions.get_mut(name) else { return };
        if !Arc::ptr_eq(&entry.session, session) {
            return;
        }
        let Some(job) = entry.job.as_mut() else { return };
        let at = Instant::now();
        // A reply that reported the end said how long it ran; here it is
        // told from when the job's session was opened.
        let ran_for = if end.reported { at - job.started } else { end.ran_for };
        job.end = Some(Ended { exit_code: end.exit_code, ran_for, at });
        if !end.reported {
            let notice = JobEnded {
                session: name.to_owned(),
                command: end.command,
                exit_code: end.exit_code,
                ran_for: end.ran_for,
                kept_for: keep,
            };
            push_capped(&mut inner.ended, notice);
        }
        drop(inner);
        // Its session now closes after the keep time.
        self.changed.notify_one();
    }

    /// Background jobs that ended since the last call, each reported once.
    pub fn take_ended_jobs(&self) -> Vec<JobEnded> {
        self.lock().ended.drain(..).collect()
    }

    /// Background jobs that began waiting for input since the last call,
    /// each wait reported once: a job that waits at its prompt is named
    /// here once, and again only after it stopped waiting (it was
    /// answered) and waits anew. `reported` names the job whose own reply
    /// (this call's) says it waits: that wait is reported there, not
    /// here. Looks at each running job once (at most the session limit),
    /// outside the registry's lock, as [`Registry::list`] does.
    pub fn take_waiting_jobs(&self, reported: Option<&str>) -> Vec<JobWaiting> {
        let jobs: Vec<(String, Arc<Session>)> = {
            let inner = self.lock();
            let running = |e: &&Entry| e.job.as_ref().is_some_and(|job| job.end.is_none());
            inner
                .sessions
                .iter()
                .filter(|(_, e)| running(e))
                .map(|(name, e)| (name.clone(), Arc::clone(&e.session)))
                .collect()
        };
        let prompts: Vec<(String, Arc<Session>, Option<String>)> =
            jobs.into_iter().map(|(name, s)| (name, Arc::clone(&s), s.input_prompt())).collect();
        let mut inner = self.lock();
        let mut waiting = Vec::new();
        for (name, session, prompt) in prompts {
            let Some(entry) = inner.sessions.get_mut(&name) else { continue };
            if !Arc::ptr_eq(&entry.session, &session) {
                continue;
            }
            let Some(job) = entry.job.as_mut() else { continue };
            match (reported, prompt) {
                (Some(own), _) if own == name => job.wait_reported = true,
                (_, None) => job.wait_reported = false,
                (_, Some(prompt)) if !job.wait_reported => {
                    job.wait_reported = true;
                    let command = job.command.clone();
                    waiting.push(JobWaiting { session: name, command, prompt });
                }
                _ => {}
            }
        }
        waiting
    }

    /// Every open session, `default` first, then by name, with current
    /// figures: the lines a running command finished are committed first,
    /// so its output kept counts them (as a read with `output` would).
    pub fn list(&self) -> Vec<SessionInfo> {
        let now = Instant::now();
        let keep = self.limits.job_keep;
        type Row = (String, Arc<Session>, Option<String>, Option<JobEnd>, SystemTime);
        let entries: Vec<Row> = {
            let inner = self.lock();
            inner
                .sessions
                .iter()
                .map(|(name, e)| {
                    let job_end = e.ended_job().map(|end| JobEnd {
                        exit_code: end.exit_code,
                        ran_for: end.ran_for,
                        closes_in: e.closes_at(end, keep).saturating_duration_since(now),
                    });
                    let background = e.job.as_ref().map(|job| job.command.clone());
                    (name.clone(), Arc::clone(&e.session), background, job_end, e.last_used)
                })
                .collect()
        };
        let mut rows: Vec<SessionInfo> = entries
            .into_iter()
            .map(|(name, session, background, job_end, last_used)| {
                session.commit_screen();
                SessionInfo {
                    cwd: session.cwd(),
                    activity: session.activity(),
                    processes: session.process_count(),
                    waiting_for_input: session.waiting_for_input(),
                    prompt: session.input_prompt(),
                    output_bytes: session.output().bytes(),
                    sandbox: session.config().sandbox.clone(),
                    name,
                    background,
                    job_end,
                    last_used,
                }
            })
            .collect();
        rows.sort_by_key(|row| (row.name != DEFAULT_SESSION, row.name.clone()));
        rows
    }

    /// The names of the open sessions, in order.
    pub fn names(&self) -> Vec<String> {
        open_names(&self.lock().sessions)
    }

    /// Removes session `name` from the registry and returns it, to be
    /// stopped by the caller ([`Session::close`]). `default` cannot be
    /// removed: closing it means resetting it, which the caller does.
    pub fn remove(&self, name: &str) -> Result<Arc<Session>, RegistryError> {
        let mut inner = self.lock();
        match inner.sessions.remove(name) {
            Some(entry) => Ok(entry.session),
            None => Err(RegistryError::Unknown {
                name: name.to_owned(),
                open: open_names(&inner.sessions),
            }),
        }
    }

    /// The session `name` without starting it.
    pub fn get(&self, name: &str) -> Result<Arc<Session>, RegistryError> {
        let inner = self.lock();
        match inner.sessions.get(name) {
            Some(entry) => Ok(Arc::clone(&entry.session)),
            None => Err(RegistryError::Unknown {
                name: name.to_owned(),
                open: open_names(&inner.sessions),
            }),
        }
    }

    /// Stops every session and everything it started (server shutdown). A
    /// call still waiting on a session returns at once, with what it has
    /// (nothing taken from the session), so that it is answered and the
    /// close does not wait out its wait.
    pub async fn close_all(&self) {
        let sessions: Vec<Arc<Session>> = {
            let mut inner = self.lock();
            std::mem::take(&mut inner.sessions).into_values().map(|e| e.session).collect()
        };
        let mut closing = tokio::task::JoinSet::new();
        for session in sessions {
            session.interrupt_waits();
            closing.spawn(async move { session.close().await });
        }
        while closing.join_next().await.is_some() {}
    }

    /// Closes sessions that sat idle at their prompt past the expiry, for
    /// as long as the registry lives. Sleeps until the earliest possible
    /// expiry, and is woken whenever a session is used.
    pub async fn expire_idle(self: Arc<Self>) {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let (due, next) = self.due_for_expiry(Instant::now());
            for (name, session) in due {
                tracing::info!(session = %name, "closing a session idle past its expiry");
                session.close().await;
            }
            match next {
                Some(at) => {
                    tokio::select! {
                        () = &mut notified => {}
                        () = tokio::time::sleep_until(at) => {}
                    }
                }
                None => notified.await,
            }
        }
    }

    /// Takes out the sessions whose expiry has passed at `now` (idle
    /// sessions past the idle expiry, ended jobs past the keep time, and the
    /// oldest ended jobs beyond `max_sessions` of them), and says when the
    /// next one could expire.
    fn due_for_expiry(&self, now: Instant) -> (Vec<(String, Arc<Session>)>, Option<Instant>) {
        let expiry = self.limits.idle_expiry;
        let keep = self.limits.job_keep;
        let mut inner = self.lock();
        let mut due = Vec::new();
        let mut next: Option<Instant> = None;
        let names: Vec<String> = inner.sessions.keys().cloned().collect();
        let mut ended_jobs: Vec<(Instant, String)> = Vec::new();
        for name in names {
            let entry = &inner.sessions[&name];
            if entry.in_use > 0 {
                continue;
            }
            if let Some(end) = entry.ended_job() {
                let deadline = entry.closes_at(end, keep);
                if deadline <= now {
                    // Not remembered as expired: it did not sit idle, and
                    // the notice of its end said until when it is kept.
                    let entry = inner.sessions.remove(&name).expect("listed above");
                    due.push((name, entry.session));
                } else {
                    next = Some(next.map_or(deadline, |n| n.min(deadline)));
                    ended_jobs.push((end.at, name));
                }
                continue;
            }
            if name == DEFAULT_SESSION || entry.job.is_some() {
                continue;
            }
            let at_prompt =
                matches!(entry.session.activity(), Activity::Idle | Activity::NotStarted);
            let deadline = entry.last_used_at + expiry;
            if !at_prompt {
                // A running command keeps its session; look again later.
                next = Some(next.map_or(deadline, |n| n.min(deadline)).max(now + expiry / 4));
                continue;
            }
            if deadline <= now {
                let entry = inner.sessions.remove(&name).expect("listed above");
                push_capped(&mut inner.expired, name.clone());
                due.push((name, entry.session));
            } else {
                next = Some(next.map_or(deadline, |n| n.min(deadline)));
            }
        }
        // Ended jobs do not count against the limit, but no more than
        // `max_sessions` of them are kept: the oldest ends go first.
        ended_jobs.sort();
        let excess = ended_jobs.len().saturating_sub(self.limits.max_sessions);
        for (_, name) in ended_jobs.into_iter().take(excess) {
            if let Some(entry) = inner.sessions.remove(&name) {
                tracing::info!(session = %name, "closing an ended job: too many are kept");
                due.push((name, entry.session));
            }
        }
        (due, next)
    }

    fn lease(self: &Arc<Self>, name: &str, session: Arc<Session>) -> Lease {
        Lease { registry: Arc::clone(self), name: name.to_owned(), session }
    }

    fn checked_cwd(&self, cwd: Option<PathBuf>) -> Result<PathBuf, RegistryError> {
        match cwd {
            None => Ok(self.template.cwd.clone()),
            Some(dir) if dir.is_dir() => Ok(dir),
            Some(dir) => Err(RegistryError::BadCwd(dir)),
        }
    }

    /// Live sessions (ended jobs not counted), this registry's and those
    /// of every other registry sharing its budget, must stay within the
    /// limit. Called with the budget's gate held. The error names this
    /// registry's sessions only: another client's are not this one's to see.
    fn check_room(&self, inner: &Inner, name: &str) -> Result<(), RegistryError> {
        let limit = self.budget.max.min(self.limits.max_sessions);
        let live = live_count(&inner.sessions) + self.budget.live_elsewhere(self);
        if live >= limit {
            return Err(RegistryError::TooMany {
                name: name.to_owned(),
                limit,
                open: open_names(&inner.sessions),
            });
        }
        Ok(())
    }

    fn insert(
        &self,
        inner: &mut Inner,
        name: &str,
        place: Place,
        background: Option<String>,
        record: bool,
        sandbox: Option<Policy>,
    ) -> Arc<Session> {
        let mut config = self.template.clone();
        config.name = name.to_owned();
        config.cwd = place.cwd;
        if !record {
            config.record = None;
        }
        if let Some(sandbox) = sandbox {
            config.sandbox = sandbox;
        }
        if place.env.is_some() {
            config.start_env = place.env;
        }
        let session = Arc::new(Session::new(config));
        inner.sessions.insert(
            name.to_owned(),
            Entry {
                session: Arc::clone(&session),
                job: background.map(|command| Job {
                    command,
                    started: Instant::now(),
                    end: None,
                    wait_reported: false,
                }),
                last_used: SystemTime::now(),
                last_used_at: Instant::now(),
                in_use: 1,
            },
        );
        session
    }
}

/// Checks a session name: 1 to 32 characters from `[A-Za-z0-9_.-]`.
pub fn validate_name(name: &str) -> Result<(), RegistryError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if ok { Ok(()) } else { Err(RegistryError::InvalidName(truncate_name(name))) }
}

/// A name shown in an error, cut so a huge name cannot make a huge reply.
fn truncate_name(name: &str) -> String {
    match name.char_indices().nth(MAX_NAME_LEN + 8) {
        Some((i, _)) => format!("{}…", &name[..i]),
        None => name.to_owned(),
    }
}

/// The names of `sessions`, in order, for an error to list.
fn open_names(sessions: &BTreeMap<String, Entry>) -> Vec<String> {
    sessions.keys().cloned().collect()
}

fn push_capped<T>(queue: &mut VecDeque<T>, item: T) {
    if queue.len() >= MAX_REMEMBERED {
        queue.pop_front();
    }
    queue.push_back(item);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A registry of `max` sessions on `budget`, whose sessions are never
    /// started (opening one starts no shell).
    fn sharing(budget: &Arc<SessionBudget>, max: usize) -> Arc<Registry> {
        let dir = std::env::temp_dir();
        let template = SessionConfig::new("t", dir.clone(), dir.join("w"), dir.join("s"));
        let limits = RegistryLimits { max_sessions: max, ..RegistryLimits::default() };
        Registry::sharing(template, limits, Arc::clone(budget))
    }

    #[test]
    fn registries_sharing_a_budget_stay_within_it_together() {
        let budget = SessionBudget::new(2);
        let (one, two) = (sharing(&budget, 16), sharing(&budget, 16));
        let a = one.open("a", None, false, None).expect("the first place");
        let b = two.open("a", None, false, None).expect("the second place, same name elsewhere");
        // The third session, in either registry, is refused; one that is
        // open already is still reached.
        for (registry, name) in [(&one, "c"), (&two, "c")] {
            let refused = registry.open(name, None, false, None).err();
            assert!(
                matches!(refused, Some(RegistryError::TooMany { limit: 2, .. })),
                "{refused:?}"
            );
        }
        assert!(one.open("a", None, false, None).is_ok());
        // The refusal names only the registry's own sessions.
        let Err(RegistryError::TooMany { open, .. }) = two.open("d", None, false, None) else {
            panic!("not refused");
        };
        assert_eq!(open, ["a"]);
        // A place given back is free for any registry.
        drop(b);
        drop(two.remove("a").expect("open"));
        assert!(one.open("c", None, false, None).is_ok());
        drop(a);
        // A registry's own, lower limit still holds.
        let small = sharing(&SessionBudget::new(8), 1);
        let _kept = small.open("x", None, false, None).expect("room");
        assert!(small.open("y", None, false, None).is_err());
    }

    /// Generated job names are `job-N`, or `job-N-` and 16 random hex
    /// digits when asked for: different every time, and valid names.
    #[test]
    fn generated_job_names_are_unguessable_when_asked() {
        let dir = std::env::temp_dir();
        let names = |unguessable_jobs: bool| {
            let template = SessionConfig::new("t", dir.clone(), dir.join("w"), dir.join("s"));
            let limits = RegistryLimits { unguessable_jobs, ..RegistryLimits::default() };
            let registry = Registry::new(template, limits);
            let mut leases = Vec::new();
            for _ in 0..2 {
                let place = Place { cwd: dir.clone(), env: None };
                let (lease, _) =
                    registry.open_background(None, place, "true", false, None).expect("a job");
                leases.push(lease);
            }
            leases.iter().map(|lease| lease.name().to_owned()).collect::<Vec<_>>()
        };
        assert_eq!(names(false), ["job-1", "job-2"]);
        let random = names(true);
        for (name, number) in random.iter().zip(["job-1-", "job-2-"]) {
            let suffix = name.strip_prefix(number).unwrap_or_else(|| panic!("{name}"));
            assert_eq!(suffix.len(), 16, "{name}");
            assert!(suffix.bytes().all(|b| b.is_ascii_hexdigit()), "{name}");
            assert!(validate_name(name).is_ok(), "{name}");
        }
        assert_ne!(random[0][6..], random[1][6..]);
    }

    #[test]
    fn a_hold_takes_a_place_of_the_budget_as_a_session_does() {
        let budget = SessionBudget::new(2);
        let one = sharing(&budget, 16);
        let _a = one.open("a", None, false, None).expect("the first place");
        let hold = budget.hold().expect("the second place");
        assert!(budget.hold().is_none(), "no third place for a hold");
        let refused = one.open("b", None, false, None).err();
        assert!(matches!(refused, Some(RegistryError::TooMany { limit: 2, .. })), "{refused:?}");
        // Given back, the place serves a session or a hold.
        drop(hold);
        let b = one.open("b", None, false, None).expect("the place given back");
        assert!(budget.hold().is_none());
        drop(b);
        drop(one.remove("b").expect("open"));
        assert!(budget.hold().is_some() && Arc::ptr_eq(one.budget(), &budget));
    }

    #[test]
    fn names_follow_the_rule() {
        for good in ["default", "a", "job-1", "dev.server_2", &"x".repeat(32)] {
            assert!(validate_name(good).is_ok(), "{good}");
        }
        for bad in ["", "a b", "a/b", "é", "semi;colon", &"x".repeat(33)] {
            assert!(validate_name(bad).is_err(), "{bad}");
        }
        let long = "y".repeat(10_000);
        let message = validate_name(&long).expect_err("too long").to_string();
        assert!(message.len() < 200, "{message}");
    }
}
