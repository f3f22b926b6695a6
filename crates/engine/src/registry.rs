//! Named terminal sessions: the registry that starts, finds, lists, expires
//! and closes them, and tells about background jobs that ended.
//!
//! Each session is a full [`Session`] (its own shell, PTY and lock), so
//! commands in different sessions run in parallel while calls to the same
//! session wait their turn. The registry owns every session: a session is
//! started only through [`Registry::open`] (or [`Registry::open_background`]
//! for a job) and stopped only after it left
//! the map: through [`Registry::remove`] (the caller then closes it), idle
//! expiry, or [`Registry::close_all`] at shutdown.
//! Its map is a `std::sync::Mutex` held for short, non-async sections;
//! stopping a shell happens after the entry has left the map, so a slow
//! stop never blocks calls to other sessions.
//!
//! Bounds: at most `max_sessions` live sessions (a clear error beyond);
//! names of at most 32 characters from `[A-Za-z0-9_.-]`; the list of names
//! that expired is capped, and so is the list of ended-job notices.
//!
//! This module does not run commands (sessions do) or word replies (the
//! server does).

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::session::{Activity, Session, SessionConfig};

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
}

impl Default for RegistryLimits {
    /// 16 sessions, 30 minutes.
    fn default() -> RegistryLimits {
        RegistryLimits { max_sessions: 16, idle_expiry: Duration::from_secs(30 * 60) }
    }
}

/// Why a session could not be opened or found. The texts state the fact
/// and name no tool or argument: the server words what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The name breaks the naming rule ([`validate_name`]).
    #[error(
        "invalid session name {0:?}: use 1 to {MAX_NAME_LEN} characters from A-Z, a-z, 0-9, \
         `_`, `.` and `-`"
    )]
    InvalidName(String),
    /// No session has this name.
    #[error("no session is named {name:?}. Open sessions: {open}")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The open sessions, listed for the reader.
        open: String,
    },
    /// Starting one more would pass the limit.
    #[error("cannot start session {name:?}: {limit} sessions are open, the limit")]
    TooMany {
        /// The name asked for.
        name: String,
        /// The limit.
        limit: usize,
        /// The open sessions, listed for the reader.
        open: String,
    },
    /// A background job was asked for under a name already in use.
    #[error("session {0:?} already exists: a background job needs a new session")]
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
    /// How long it ran.
    pub ran_for: Duration,
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
    /// When a call last used it.
    pub last_used: SystemTime,
    /// Live processes in its shell's session, the shell included.
    pub processes: usize,
    /// Whether its command is blocked reading the terminal.
    pub waiting_for_input: bool,
    /// Bytes of command output its store keeps.
    pub output_bytes: u64,
}

/// A live session and what the registry knows about it.
struct Entry {
    session: Arc<Session>,
    /// The command of a background job.
    background: Option<String>,
    last_used: SystemTime,
    /// When, on the monotonic clock, it was last used.
    last_used_at: Instant,
    /// Calls in progress on it.
    in_use: usize,
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

/// All sessions of one server.
pub struct Registry {
    template: SessionConfig,
    limits: RegistryLimits,
    inner: Mutex<Inner>,
    /// Woken when the earliest expiry may have changed.
    changed: Notify,
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
        Arc::new(Registry {
            template,
            limits,
            inner: Mutex::new(Inner {
                sessions: BTreeMap::new(),
                expired: VecDeque::new(),
                ended: VecDeque::new(),
                last_job: 0,
            }),
            changed: Notify::new(),
        })
    }

    /// The limits in force.
    pub fn limits(&self) -> RegistryLimits {
        self.limits
    }

    /// The directory new sessions start in unless a call names another.
    pub fn start_dir(&self) -> &std::path::Path {
        &self.template.cwd
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The session `name` for one call, started (in `cwd`, else the start
    /// directory) when it does not exist. `cwd` is ignored for an existing
    /// session.
    pub fn open(
        self: &Arc<Self>,
        name: &str,
        cwd: Option<PathBuf>,
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
        self.check_room(&inner, name)?;
        let expired_before = match inner.expired.iter().position(|n| n == name) {
            Some(i) => {
                inner.expired.remove(i);
                true
            }
            None => false,
        };
        let session = self.insert(&mut inner, name, cwd.clone(), None);
        drop(inner);
        self.changed.notify_one();
        Ok((self.lease(name, session), Opened::Started { cwd, expired_before }))
    }

    /// Starts a background job's session: named `name` if given (it must
    /// not exist), else `job-N`. The caller runs the job's command in it
    /// and then calls [`Registry::watch_job`].
    pub fn open_background(
        self: &Arc<Self>,
        name: Option<&str>,
        cwd: Option<PathBuf>,
        command: &str,
    ) -> Result<(Lease, PathBuf), RegistryError> {
        let mut inner = self.lock();
        let name = match name {
            Some(name) => {
                validate_name(name)?;
                if inner.sessions.contains_key(name) {
                    return Err(RegistryError::NameTaken(name.to_owned()));
                }
                name.to_owned()
            }
            None => loop {
                inner.last_job += 1;
                let candidate = format!("job-{}", inner.last_job);
                if !inner.sessions.contains_key(&candidate) {
                    break candidate;
                }
            },
        };
        let cwd = self.checked_cwd(cwd)?;
        self.check_room(&inner, &name)?;
        inner.expired.retain(|n| *n != name);
        let session = self.insert(&mut inner, &name, cwd.clone(), Some(command.to_owned()));
        drop(inner);
        Ok((self.lease(&name, session), cwd))
    }

    /// Watches the background job running in `lease`'s session, and queues
    /// a notice when it ends (unless the session was closed first).
    pub fn watch_job(self: &Arc<Self>, lease: &Lease) {
        let registry = Arc::downgrade(self);
        let name = lease.name.clone();
        let session = Arc::clone(&lease.session);
        tokio::spawn(async move {
            let started = Instant::now();
            let Some((command, exit_code)) = session.command_end().await else { return };
            let Some(registry) = registry.upgrade() else { return };
            let mut inner = registry.lock();
            let still_open =
                inner.sessions.get(&name).is_some_and(|e| Arc::ptr_eq(&e.session, &session));
            if still_open {
                push_capped(
                    &mut inner.ended,
                    JobEnded { session: name, command, exit_code, ran_for: started.elapsed() },
                );
            }
        });
    }

    /// Background jobs that ended since the last call, each reported once.
    pub fn take_ended_jobs(&self) -> Vec<JobEnded> {
        self.lock().ended.drain(..).collect()
    }

    /// Every open session, `default` first, then by name.
    pub fn list(&self) -> Vec<SessionInfo> {
        let entries: Vec<(String, Arc<Session>, Option<String>, SystemTime)> = {
            let inner = self.lock();
            inner
                .sessions
                .iter()
                .map(|(name, e)| {
                    (name.clone(), Arc::clone(&e.session), e.background.clone(), e.last_used)
                })
                .collect()
        };
        let mut rows: Vec<SessionInfo> = entries
            .into_iter()
            .map(|(name, session, background, last_used)| SessionInfo {
                cwd: session.cwd(),
                activity: session.activity(),
                processes: session.process_count(),
                waiting_for_input: session.waiting_for_input(),
                output_bytes: session.output().bytes(),
                name,
                background,
                last_used,
            })
            .collect();
        rows.sort_by_key(|row| (row.name != DEFAULT_SESSION, row.name.clone()));
        rows
    }

    /// The names of the open sessions, for error messages.
    pub fn names(&self) -> String {
        describe_names(&self.lock().sessions)
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
                open: describe_names(&inner.sessions),
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
                open: describe_names(&inner.sessions),
            }),
        }
    }

    /// Stops every session and everything it started (server shutdown).
    pub async fn close_all(&self) {
        let sessions: Vec<Arc<Session>> = {
            let mut inner = self.lock();
            std::mem::take(&mut inner.sessions).into_values().map(|e| e.session).collect()
        };
        let mut closing = tokio::task::JoinSet::new();
        for session in sessions {
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

    /// Takes out the sessions whose expiry has passed at `now`, and says
    /// when the next one could expire.
    fn due_for_expiry(&self, now: Instant) -> (Vec<(String, Arc<Session>)>, Option<Instant>) {
        let expiry = self.limits.idle_expiry;
        let mut inner = self.lock();
        let mut due = Vec::new();
        let mut next: Option<Instant> = None;
        let names: Vec<String> = inner.sessions.keys().cloned().collect();
        for name in names {
            let entry = &inner.sessions[&name];
            if name == DEFAULT_SESSION || entry.background.is_some() || entry.in_use > 0 {
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

    fn check_room(&self, inner: &Inner, name: &str) -> Result<(), RegistryError> {
        if inner.sessions.len() >= self.limits.max_sessions {
            return Err(RegistryError::TooMany {
                name: name.to_owned(),
                limit: self.limits.max_sessions,
                open: describe_names(&inner.sessions),
            });
        }
        Ok(())
    }

    fn insert(
        &self,
        inner: &mut Inner,
        name: &str,
        cwd: PathBuf,
        background: Option<String>,
    ) -> Arc<Session> {
        let mut config = self.template.clone();
        config.name = name.to_owned();
        config.cwd = cwd;
        let session = Arc::new(Session::new(config));
        inner.sessions.insert(
            name.to_owned(),
            Entry {
                session: Arc::clone(&session),
                background,
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

fn describe_names(sessions: &BTreeMap<String, Entry>) -> String {
    if sessions.is_empty() {
        return "none".to_owned();
    }
    sessions.keys().map(String::as_str).collect::<Vec<_>>().join(", ")
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
