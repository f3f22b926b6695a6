//! Who a call belongs to: the server's clients, each with its own terminal
//! sessions, `run` outputs and tasks. On stdio there is one, the local client; over
//! HTTP each authenticated principal is one, made on its first call and kept
//! while the server runs. A client's sessions, numbers and names are its
//! own (another principal's `default` is not yours); the session limit is
//! one budget of the whole server ([`SessionBudget`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use shellkeep_engine::SessionConfig;
use shellkeep_engine::{OutputStore, StoreLimits};
use shellkeep_engine::{Registry, RegistryLimits, SessionBudget};
use tokio::task::JoinHandle;

use crate::tasks::Tasks;

/// Who an HTTP request is: the name its bearer token was configured under.
/// The HTTP layer's authentication puts it in the request's
/// `http::request::Parts` extensions, which `rmcp` hands to the handler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Principal(pub String);

/// One client's part of the server.
pub(crate) struct Client {
    /// The principal it is (`None`: the local client, stdio's).
    pub principal: Option<String>,
    /// Its terminal sessions, `default` among them.
    pub sessions: Arc<Registry>,
    /// Its `run` outputs, numbered, for the `output` tool.
    pub runs: Arc<OutputStore>,
    /// Its tasks (the Tasks extension): another client's ids are unknown
    /// to it.
    pub tasks: Arc<Tasks>,
    /// Closes its idle sessions as they expire.
    expiry: JoinHandle<()>,
}

impl Client {
    /// The reader of guard notices for replies about `session` (a
    /// `terminal` reply's session; `None` for the replies of no session):
    /// each client reads its own.
    pub(crate) fn notice_reader(&self, session: Option<&str>) -> String {
        let session = session.unwrap_or("");
        match &self.principal {
            None => session.to_owned(),
            Some(principal) => format!("{session}@{principal}"),
        }
    }

    /// The name a person's view (`shellkeep ls`, `attach`) gives session
    /// `name` of this client: the local client's by its name, a
    /// principal's as `PRINCIPAL/NAME`.
    pub(crate) fn qualified(&self, name: &str) -> String {
        match &self.principal {
            None => name.to_owned(),
            Some(principal) => format!("{principal}/{name}"),
        }
    }
}

/// Every client of the server, and what a new one is made of.
pub(crate) struct Clients {
    /// How a session of any client is set up.
    template: SessionConfig,
    /// The limits of each client's sessions.
    limits: RegistryLimits,
    /// The server's session limit, shared by every client.
    budget: Arc<SessionBudget>,
    /// What each client keeps of its `run` outputs.
    output_keep: StoreLimits,
    /// Stdio's client (made at start).
    local: Arc<Client>,
    /// The principals' clients, by name.
    principals: Mutex<BTreeMap<String, Arc<Client>>>,
}

impl Clients {
    /// The clients of a server whose sessions are set up like `template`
    /// within `limits` (the session limit counts every client's together),
    /// keeping `output_keep` of each client's `run` outputs; the local
    /// client is made now. Needs a Tokio runtime (each client's idle
    /// sessions are closed by a task of its own).
    pub(crate) fn new(
        template: SessionConfig,
        limits: RegistryLimits,
        output_keep: StoreLimits,
    ) -> Clients {
        let budget = SessionBudget::new(limits.max_sessions);
        let local = Arc::new(make_client(None, &template, limits, &budget, output_keep));
        Clients {
            template,
            limits,
            budget,
            output_keep,
            local,
            principals: Mutex::new(BTreeMap::new()),
        }
    }

    /// Stdio's client.
    pub(crate) fn local(&self) -> Arc<Client> {
        Arc::clone(&self.local)
    }

    /// Principal `name`'s client, made on first use.
    pub(crate) fn principal(&self, name: &str) -> Arc<Client> {
        let mut principals = self.principals.lock().unwrap_or_else(PoisonError::into_inner);
        let client = principals.entry(name.to_owned()).or_insert_with(|| {
            let principal = Some(name.to_owned());
            Arc::new(make_client(
                principal,
                &self.template,
                self.limits,
                &self.budget,
                self.output_keep,
            ))
        });
        Arc::clone(client)
    }

    /// Every client: the local one first, then the principals by name.
    pub(crate) fn all(&self) -> Vec<Arc<Client>> {
        let principals = self.principals.lock().unwrap_or_else(PoisonError::into_inner);
        std::iter::once(self.local()).chain(principals.values().cloned()).collect()
    }

    /// The client and session a person's view names `qualified` (see
    /// [`Client::qualified`]).
    pub(crate) fn find(&self, qualified: &str) -> Option<(Arc<Client>, String)> {
        match qualified.split_once('/') {
            None => Some((self.local(), qualified.to_owned())),
            Some((principal, name)) => {
                let principals = self.principals.lock().unwrap_or_else(PoisonError::into_inner);
                Some((Arc::clone(principals.get(principal)?), name.to_owned()))
            }
        }
    }

    /// The directory new sessions start in unless a call names another.
    pub(crate) fn start_dir(&self) -> &std::path::Path {
        &self.template.cwd
    }

    /// Stops expiring sessions and closes every client's sessions (each
    /// with everything it started).
    pub(crate) async fn close_all(&self) {
        for client in self.all() {
            client.expiry.abort();
            // Its tasks stop with the sessions they wait on.
            client.tasks.close();
            client.sessions.close_all().await;
        }
    }
}

/// A client of `principal` (`None`: the local one) whose sessions are set
/// up like `template`, drawing on `budget`.
fn make_client(
    principal: Option<String>,
    template: &SessionConfig,
    limits: RegistryLimits,
    budget: &Arc<SessionBudget>,
    output_keep: StoreLimits,
) -> Client {
    let mut template = template.clone();
    template.client = principal.clone().unwrap_or_default();
    // `run` outputs are kept as a session's are, under the same retention,
    // in files of the client's own names.
    let label = match &principal {
        None => "run".to_owned(),
        Some(principal) => format!("run@{principal}"),
    };
    let runs = OutputStore::new(Arc::clone(&template.spill), &label, output_keep);
    // On a shared endpoint a generated job name cannot be guessed.
    let limits = RegistryLimits { unguessable_jobs: principal.is_some(), ..limits };
    let sessions = Registry::sharing(template, limits, Arc::clone(budget));
    let expiry = tokio::spawn(Arc::clone(&sessions).expire_idle());
    Client { principal, sessions, runs, tasks: Arc::default(), expiry }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use shellkeep_engine::RegistryLimits;
    use shellkeep_engine::SessionConfig;
    use shellkeep_engine::StoreLimits;

    use super::*;
    use crate::tasks::Kind;

    /// The clients of a server whose sessions are never started.
    fn clients() -> Clients {
        let dir = std::env::temp_dir();
        let template = SessionConfig::new("t", dir.clone(), dir.join("w"), dir.join("s"));
        Clients::new(template, RegistryLimits::default(), StoreLimits::default())
    }

    #[tokio::test]
    async fn another_principals_task_reads_as_unknown() {
        let clients = clients();
        let (alice, bob) = (clients.principal("alice"), clients.principal("bob"));
        let (task, _handle) =
            alice.tasks.create(Kind::Run, Duration::from_secs(60), 4).expect("made");
        assert!(alice.tasks.get(&task.task_id).is_some());
        for other in [&bob, &clients.local()] {
            assert!(other.tasks.get(&task.task_id).is_none() && !other.tasks.knows(&task.task_id));
            assert!(!other.tasks.cancel(&task.task_id), "not cancelled by another");
        }
        // The same principal is the same client, with the same tasks.
        assert!(clients.principal("alice").tasks.knows(&task.task_id));
    }

    #[tokio::test]
    async fn closing_the_clients_stops_their_tasks() {
        let clients = clients();
        let ttl = Duration::from_secs(60);
        let (_, local) = clients.local().tasks.create(Kind::Run, ttl, 4).expect("made");
        let (_, remote) = clients.principal("a").tasks.create(Kind::Run, ttl, 4).expect("made");
        clients.close_all().await;
        assert!(local.cancel.is_cancelled() && remote.cancel.is_cancelled());
    }
}
