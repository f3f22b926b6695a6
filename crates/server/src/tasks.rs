//! MCP Tasks (the `io.modelcontextprotocol/tasks` extension, SEP-2663, as
//! the 2026-07-28 protocol defines it): which calls become tasks, one
//! client's table of tasks, and the loop that carries a task from its call
//! to its end.
//!
//! A task is a tool call that answers at once with a handle and goes on
//! without the client waiting: the client polls `tasks/get` and finds the
//! call's reply there once it ended, exactly the reply the call gives
//! without a task, because the task's loop calls the same function
//! (`Shellkeep::reply`) that answers every call. Only a request that
//! declares the extension in its own `_meta` (2026-07-28) gets one; which
//! calls do is [`wanted`]'s rule.
//!
//! Tasks are kept in the table of the client that made them: another
//! client's ids read as unknown. Bounds: at most `max_sessions` tasks run at
//! once per client (a `run` task counts as a session would, a terminal task
//! holds the session it runs in); at most [`MAX_ENDED`] ended ones are kept
//! besides, each until its TTL, the oldest ended dropped first. A task's TTL
//! covers the longest its command may take (its execution limit, or the
//! terminal call's wait) plus the grace period and [`KEPT_AFTER`], so a
//! 10-minute `run` never expires while it runs (rmcp's `TaskManager`, with
//! its 300-second default, is not used).
//!
//! This module words nothing (`render` does) and runs nothing itself: the
//! loop is handed the function that makes a call.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, DetailedTask, InputRequest, InputRequests, JsonObject,
    ProtocolVersion, RequestMetaObject, Task, TaskPayload, TaskStatus,
};
use serde_json::{Value, json};
use shellkeep_engine::DEFAULT_SESSION;
use shellkeep_engine::Policy;
use shellkeep_engine::Secrets;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::render;

/// Ended tasks kept per client, each until its TTL; beyond it the oldest
/// ended one is dropped.
pub(crate) const MAX_ENDED: usize = 64;

/// How long an ended task's result is kept, past the longest its command
/// may take.
pub(crate) const KEPT_AFTER: Duration = Duration::from_secs(3600);

/// The poll interval every task suggests.
pub(crate) const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// A task's id: 128 random bits, as 32 hexadecimal digits.
const ID_BYTES: usize = 16;

/// What a call that becomes a task is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A `run` call.
    Run,
    /// A `terminal` command in the session named, waiting up to `wait`.
    Terminal {
        /// The session the command runs in.
        session: String,
        /// The call's own `timeout`.
        wait: Duration,
    },
}

/// Whether `request`, a `tools/call` with `meta`, becomes a task, and
/// which. The rule: only a request that declares the Tasks extension in its
/// own 2026-07-28 `_meta` gets a task (the extension is not defined for
/// 2025-11-25 sessions); then every `run` call is one, and a `terminal` call
/// that runs a new command (not a poll, input, keys, reset or a background
/// job's start) with a `timeout` longer than `max_wait`: the one kind of
/// terminal call that may block longer than a client waits (without a
/// `timeout`, a terminal call hands control back within `max_wait`).
/// Arguments are read as sent; a task whose arguments are wrong ends at
/// once with the error the call gives.
pub(crate) fn wanted(
    request: &CallToolRequestParams,
    meta: &RequestMetaObject,
    max_wait: Duration,
) -> Option<Kind> {
    let modern = meta
        .protocol_version()
        .is_some_and(|version| version.as_str() >= ProtocolVersion::V_2026_07_28.as_str());
    let declared = meta.client_capabilities().is_some_and(|caps| caps.supports_tasks());
    if !(modern && declared) {
        return None;
    }
    let arguments = request.arguments.as_ref();
    let get = |key: &str| arguments.and_then(|arguments| arguments.get(key));
    let set = |key: &str| get(key).is_some_and(|value| !value.is_null() && value != &json!(false));
    match request.name.as_ref() {
        "run" => Some(Kind::Run),
        "terminal" => {
            let command = get("command").and_then(Value::as_str).unwrap_or("");
            if command.trim().is_empty() || set("is_input") || set("keys") || set("reset") {
                return None;
            }
            if set("background") {
                return None;
            }
            let wait = get("timeout").and_then(Value::as_f64).filter(|secs| secs.is_finite())?;
            let wait = Duration::try_from_secs_f64(wait).ok()?;
            if wait <= max_wait {
                return None;
            }
            let session = get("session").and_then(Value::as_str).unwrap_or(DEFAULT_SESSION);
            Some(Kind::Terminal { session: session.to_owned(), wait })
        }
        _ => None,
    }
}

/// Marks a call made by a task (in its context's extensions): its tool
/// knows nobody waits on the request itself.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TaskCall;

/// The session a `terminal` call works on (`default` when it names none),
/// `None` for other tools and background starts: whose replies a terminal
/// task waiting for input takes ([`Tasks::session_replied`]).
pub(crate) fn session_of(request: &CallToolRequestParams) -> Option<String> {
    let arguments = request.arguments.as_ref();
    let get = |key: &str| arguments.and_then(|arguments| arguments.get(key));
    if request.name != "terminal" || get("background").is_some_and(|value| value == &json!(true)) {
        return None;
    }
    Some(get("session").and_then(Value::as_str).unwrap_or(DEFAULT_SESSION).to_owned())
}

/// How long a task of `kind` (`request`) is kept from its creation: the
/// longest its command may take (a `run`'s execution limit, its own
/// `timeout_sec` or the policy's for the command; a terminal call's
/// `timeout`), then `grace` for its stop and [`KEPT_AFTER`] for its result.
pub(crate) fn ttl(
    kind: &Kind,
    request: &CallToolRequestParams,
    policy: &Policy,
    grace: Duration,
) -> Duration {
    let longest = match kind {
        Kind::Terminal { wait, .. } => *wait,
        Kind::Run => {
            let arguments = request.arguments.as_ref();
            let get = |key: &str| arguments.and_then(|arguments| arguments.get(key));
            let asked = get("timeout_sec")
                .and_then(Value::as_f64)
                .and_then(|secs| Duration::try_from_secs_f64(secs).ok());
            let command = get("command").and_then(Value::as_str).unwrap_or("");
            asked.unwrap_or_else(|| policy.decide(command, None).limits.exec)
        }
    };
    longest.min(crate::args::MAX_TIMEOUT) + grace + KEPT_AFTER
}

/// Notes for the client's next reply kept at most (more are counted).
pub(crate) const MAX_NOTES: usize = 4;

/// One client's tasks.
#[derive(Default)]
pub(crate) struct Tasks {
    table: Mutex<HashMap<String, Entry>>,
    /// Notes for the client's next reply (a `run` the client's cancellation
    /// killed), at most [`MAX_NOTES`], and how many more were dropped.
    notes: Mutex<(Vec<String>, usize)>,
    /// Cancelled when the client's part closes: every running task stops.
    closing: CancellationToken,
}

/// One task.
struct Entry {
    /// Its fields as `tasks/get` shows them (status, times, TTL).
    task: Task,
    /// What it holds besides the base fields.
    state: State,
    /// When it is dropped.
    expires: SystemTime,
    /// What it is.
    kind: Kind,
    /// Cancelled by `tasks/cancel`.
    cancel: CancellationToken,
    /// The replies of calls made on a terminal task's session while it
    /// waits for input, newest last (at most one waits: the loop takes it).
    answers: std::sync::Arc<Answers>,
}

/// The replies of other calls on a terminal task's session.
#[derive(Default)]
pub(crate) struct Answers {
    reply: Mutex<Option<CallToolResult>>,
    given: Notify,
}

impl Answers {
    fn slot(&self) -> std::sync::MutexGuard<'_, Option<CallToolResult>> {
        self.reply.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Forgets an earlier reply: the task asks anew.
    fn clear(&self) {
        self.slot().take();
    }

    /// Keeps `reply` for the task and wakes it.
    fn give(&self, reply: CallToolResult) {
        *self.slot() = Some(reply);
        self.given.notify_one();
    }

    /// The next reply given.
    async fn next(&self) -> CallToolResult {
        loop {
            self.given.notified().await;
            if let Some(reply) = self.slot().take() {
                return reply;
            }
        }
    }
}

/// A task's state beyond the base fields.
enum State {
    Working,
    InputRequired(InputRequests),
    Completed(JsonObject),
    Failed(JsonObject),
    Cancelled,
}

/// Why no task was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TooMany {
    /// The tasks that run at once at most.
    pub limit: usize,
}

/// The running task's side of its entry: what the loop needs.
pub(crate) struct Handle {
    /// The task's id.
    pub id: String,
    /// Fires on `tasks/cancel` and when the client's part closes.
    pub cancel: CancellationToken,
    /// What it is.
    pub kind: Kind,
    answers: std::sync::Arc<Answers>,
}

impl Tasks {
    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A new task of `kind`, `working`, kept for `ttl` from now; refused
    /// when `max_running` tasks of this client run already.
    pub(crate) fn create(
        &self,
        kind: Kind,
        ttl: Duration,
        max_running: usize,
    ) -> Result<(Task, Handle), TooMany> {
        let now = SystemTime::now();
        let mut table = self.table();
        table.retain(|_, entry| entry.expires > now);
        let running = table.values().filter(|entry| !entry.task.status.is_terminal()).count();
        if running >= max_running {
            return Err(TooMany { limit: max_running });
        }
        let ended = table.len() - running;
        if ended >= MAX_ENDED
            && let Some(oldest) = table
                .iter()
                .filter(|(_, entry)| entry.task.status.is_terminal())
                .min_by_key(|(_, entry)| entry.task.last_updated_at.clone())
                .map(|(id, _)| id.clone())
        {
            table.remove(&oldest);
        }
        let id = new_id();
        let stamp = crate::audit::rfc3339(now);
        let task = Task::new(&id, TaskStatus::Working, &stamp, &stamp)
            .with_ttl_ms(ttl.as_millis() as u64)
            .with_poll_interval_ms(POLL_INTERVAL.as_millis() as u64);
        let cancel = self.closing.child_token();
        let answers = std::sync::Arc::<Answers>::default();
        let entry = Entry {
            task: task.clone(),
            state: State::Working,
            expires: now + ttl,
            kind: kind.clone(),
            cancel: cancel.clone(),
            answers: std::sync::Arc::clone(&answers),
        };
        table.insert(id.clone(), entry);
        Ok((task, Handle { id, cancel, kind, answers }))
    }

    /// The task `id` as `tasks/get` shows it, `None` when it is unknown
    /// (never made by this client, or expired).
    pub(crate) fn get(&self, id: &str) -> Option<DetailedTask> {
        let now = SystemTime::now();
        let mut table = self.table();
        table.retain(|_, entry| entry.expires > now);
        let entry = table.get(id)?;
        let payload = match &entry.state {
            State::Working => TaskPayload::Working,
            State::InputRequired(requests) => {
                TaskPayload::InputRequired { input_requests: requests.clone() }
            }
            State::Completed(result) => TaskPayload::Completed { result: result.clone() },
            State::Failed(error) => TaskPayload::Failed { error: error.clone() },
            State::Cancelled => TaskPayload::Cancelled,
        };
        Some(DetailedTask::new(entry.task.clone(), payload))
    }

    /// Asks the task `id` to stop; `false` when it is unknown. A task that
    /// ended already stays as it ended.
    pub(crate) fn cancel(&self, id: &str) -> bool {
        let table = self.table();
        let Some(entry) = table.get(id) else { return false };
        entry.cancel.cancel();
        true
    }

    /// Whether the task `id` is known.
    pub(crate) fn knows(&self, id: &str) -> bool {
        let now = SystemTime::now();
        self.table().get(id).is_some_and(|entry| entry.expires > now)
    }

    /// The id of the terminal task that holds `session` while its command
    /// runs (`working`): another call on the session would wait for the
    /// task's whole wait behind it, so it is refused, saying why. While the
    /// task waits for input the session is free: that is how it is answered.
    pub(crate) fn holding(&self, session: &str) -> Option<String> {
        let now = SystemTime::now();
        let table = self.table();
        table
            .iter()
            .filter(|(_, entry)| entry.expires > now && matches!(entry.state, State::Working))
            .find(|(_, entry)| {
                matches!(&entry.kind, Kind::Terminal { session: name, .. } if name == session)
            })
            .map(|(id, _)| id.clone())
    }

    /// A call on `session` other than a task's own was answered with
    /// `reply`: a terminal task of that session waiting for input takes it
    /// (the answer to its prompt, or a poll that saw its command end).
    pub(crate) fn session_replied(&self, session: &str, reply: &CallToolResult) {
        let table = self.table();
        for entry in table.values() {
            let ours =
                matches!(&entry.kind, Kind::Terminal { session: name, .. } if name == session);
            // A reply about the command (not a refusal, not an error).
            let about_it = matches!(
                status(reply),
                Some("completed" | "killed" | "running" | "waiting_for_input")
            );
            if ours && about_it && matches!(entry.state, State::InputRequired(_)) {
                entry.answers.give(reply.clone());
            }
        }
    }

    /// Keeps `note` for the client's next reply.
    pub(crate) fn note_for_next_reply(&self, note: String) {
        let mut notes = self.notes.lock().unwrap_or_else(PoisonError::into_inner);
        if notes.0.len() < MAX_NOTES {
            notes.0.push(note);
        } else {
            notes.1 += 1;
        }
    }

    /// The notes kept for this reply, and how many more there were.
    pub(crate) fn take_notes(&self) -> (Vec<String>, usize) {
        std::mem::take(&mut *self.notes.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Stops every running task (the client's part closes).
    pub(crate) fn close(&self) {
        self.closing.cancel();
    }

    /// Sets the task `id`'s state, and its status to match.
    fn set(&self, id: &str, state: State, message: Option<String>) {
        let mut table = self.table();
        let Some(entry) = table.get_mut(id) else { return };
        entry.task.status = match &state {
            State::Working => TaskStatus::Working,
            State::InputRequired(_) => TaskStatus::InputRequired,
            State::Completed(_) => TaskStatus::Completed,
            State::Failed(_) => TaskStatus::Failed,
            State::Cancelled => TaskStatus::Cancelled,
        };
        entry.task.status_message = message;
        entry.task.last_updated_at = crate::audit::rfc3339(SystemTime::now());
        entry.state = state;
    }
}

/// A fresh task id: 128 random bits.
fn new_id() -> String {
    shellkeep_engine::random_hex(ID_BYTES).unwrap_or_else(|err| {
        // The kernel's random source does not fail on a working system;
        // if it does, nothing guessable is made up in its place.
        panic!("no random task id: {err}")
    })
}

/// Carries the task `handle` of `tasks` from its call (`request`) to its
/// end: `call` makes a call (the same function that answers every call) with
/// a cancellation token. A `run` task is its one call, stopped by its token
/// as `run`'s limits stop a command. A terminal task's call returns when its
/// command ends, when its `timeout` runs out, or when the command waits for
/// input: the task is then `input_required` with the prompt, until a call
/// on the same session (the agent's `is_input`) answers: a reply that shows
/// the command ended ends the task with it; one that shows it running lets
/// the task wait on (a poll with the rest of the `timeout`). Cancelled, a
/// terminal task's wait ends and C-c goes to its command (then the session
/// does as with any C-c: what is left of the interrupted group is stopped).
/// `masks` masks the words the task adds of its own.
pub(crate) async fn drive<F, Fut>(
    tasks: std::sync::Arc<Tasks>,
    handle: Handle,
    request: CallToolRequestParams,
    call: F,
    masks: std::sync::Arc<Secrets>,
) where
    F: Fn(CallToolRequestParams, CancellationToken) -> Fut,
    Fut: Future<Output = Result<CallToolResult, ErrorData>>,
{
    let Handle { id, cancel, kind, answers } = handle;
    let started = tokio::time::Instant::now();
    let (session, wait) = match &kind {
        Kind::Run => {
            let reply = call(request, cancel.clone()).await;
            end(&tasks, &id, &cancel, reply);
            return;
        }
        Kind::Terminal { session, wait } => (session.clone(), *wait),
    };
    let mut reply = call(request, cancel.clone()).await;
    let mut asked = 0u32;
    while let Ok(result) = &reply
        && let Some(prompt) = waits_for_input(result)
        && !cancel.is_cancelled()
    {
        asked += 1;
        let key = format!("input-{asked}");
        // The session's name is the agent's, masked as every name a reply
        // shows (the prompt was, with the reply).
        let message = render::task_waits_for_input(&session, prompt.as_deref());
        let message = render::mask(&masks, &message);
        answers.clear();
        tasks.set(&id, State::InputRequired(input_request(&key, &message)), Some(message));
        let answer = tokio::select! {
            answer = answers.next() => answer,
            () = cancel.cancelled() => break,
            () = tokio::time::sleep_until(started + wait) => break,
        };
        tasks.set(&id, State::Working, None);
        reply = if waits_for_input(&answer).is_none() && still_running(&answer) {
            // Answered and still at work: wait on, for the rest of the
            // call's `timeout`.
            let left = wait.saturating_sub(started.elapsed()).max(Duration::from_secs(1));
            call(terminal_call(&session, "", Some(left)), cancel.clone()).await
        } else {
            // Ended, or waiting for input again.
            Ok(answer)
        };
    }
    let closing = tasks.closing.is_cancelled();
    if cancel.is_cancelled() && !closing && reply.as_ref().is_ok_and(still_running) {
        // C-c to the command, through the call every C-c takes, with a
        // token of its own: the task's is cancelled. (A closing client's
        // sessions are stopped whole instead.)
        let mut interrupt = terminal_call(&session, "C-c", None);
        if let Some(arguments) = &mut interrupt.arguments {
            arguments.insert("is_input".to_owned(), Value::Bool(true));
        }
        let _ = call(interrupt, CancellationToken::new()).await;
    }
    end(&tasks, &id, &cancel, reply);
}

/// Ends the task `id` with `reply`: `cancelled` when `cancel` fired and the
/// command did not end on its own, else `completed` with the reply (also a
/// tool error) or `failed` with a JSON-RPC error.
fn end(
    tasks: &Tasks,
    id: &str,
    cancel: &CancellationToken,
    reply: Result<CallToolResult, ErrorData>,
) {
    let state = match reply {
        Ok(result) if cancel.is_cancelled() && was_stopped(&result) => State::Cancelled,
        Ok(result) => match serde_json::to_value(&result) {
            Ok(Value::Object(object)) => State::Completed(object),
            _ => {
                State::Failed(error_object(&ErrorData::internal_error(render::task_broken(), None)))
            }
        },
        Err(_) if cancel.is_cancelled() => State::Cancelled,
        Err(error) => State::Failed(error_object(&error)),
    };
    tasks.set(id, state, None);
}

/// A JSON-RPC error as the object `tasks/get` carries.
fn error_object(error: &ErrorData) -> JsonObject {
    match serde_json::to_value(error) {
        Ok(Value::Object(object)) => object,
        _ => JsonObject::new(),
    }
}

/// The structured content's `status`, if any.
fn status(result: &CallToolResult) -> Option<&str> {
    result.structured_content.as_ref()?.get("status")?.as_str()
}

/// Whether a terminal reply shows its command still running (waiting for
/// input or not).
fn still_running(result: &CallToolResult) -> bool {
    matches!(status(result), Some("running" | "waiting_for_input"))
}

/// Whether the reply shows a command stopped before it ended on its own:
/// still running (a terminal command the task left), or a `run` that its
/// cancellation stopped.
fn was_stopped(result: &CallToolResult) -> bool {
    still_running(result) || status(result) == Some("error")
}

/// The prompt of a terminal reply whose command waits for input (`Some(None)`:
/// it waits with no prompt), `None` when it does not wait.
fn waits_for_input(result: &CallToolResult) -> Option<Option<String>> {
    (status(result) == Some("waiting_for_input")).then(|| {
        result
            .structured_content
            .as_ref()
            .and_then(|fields| fields.get("prompt"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    })
}

/// A `terminal` call on `session`: `command`, waiting up to `timeout`.
fn terminal_call(session: &str, command: &str, timeout: Option<Duration>) -> CallToolRequestParams {
    let mut arguments = JsonObject::new();
    arguments.insert("command".to_owned(), Value::String(command.to_owned()));
    arguments.insert("session".to_owned(), Value::String(session.to_owned()));
    if let Some(timeout) = timeout {
        arguments.insert("timeout".to_owned(), json!(timeout.as_secs_f64().ceil()));
    }
    CallToolRequestParams::new("terminal").with_arguments(arguments)
}

/// The one input request of an `input_required` task: an elicitation whose
/// message names the prompt and how to answer it (no field to fill: the
/// answer goes to the terminal, see `tasks/update`'s refusal).
fn input_request(key: &str, message: &str) -> InputRequests {
    let request = json!({
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": message,
            "requestedSchema": {"type": "object", "properties": {}},
        },
    });
    let mut requests = InputRequests::new();
    if let Ok(request) = serde_json::from_value::<InputRequest>(request) {
        requests.insert(key.to_owned(), request);
    }
    requests
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn call(tool: &str, arguments: Value) -> CallToolRequestParams {
        let Value::Object(arguments) = arguments else { unreachable!() };
        CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments)
    }

    fn meta(version: &str, extensions: Value) -> RequestMetaObject {
        let Value::Object(meta) = json!({
            "io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientCapabilities": {"extensions": extensions},
        }) else {
            unreachable!()
        };
        RequestMetaObject::from(meta)
    }

    #[test]
    fn only_a_declaring_2026_request_gets_a_task_and_only_for_long_calls() {
        let max_wait = Duration::from_secs(50);
        let declares = meta("2026-07-28", json!({TASKS_ID: {}}));
        let wanted = |tool: &str, arguments: Value, meta: &RequestMetaObject| {
            super::wanted(&call(tool, arguments), meta, max_wait)
        };
        assert_eq!(wanted("run", json!({"command": "ls"}), &declares), Some(Kind::Run));
        // Not declared, or not the 2026-07-28 protocol: no task.
        for meta in [
            meta("2026-07-28", json!({})),
            meta("2025-11-25", json!({TASKS_ID: {}})),
            RequestMetaObject::default(),
        ] {
            assert_eq!(wanted("run", json!({"command": "ls"}), &meta), None);
        }
        let long = Kind::Terminal { session: "default".to_owned(), wait: Duration::from_secs(51) };
        assert_eq!(
            wanted("terminal", json!({"command": "make", "timeout": 51}), &declares),
            Some(long)
        );
        let named = wanted(
            "terminal",
            json!({"command": "make", "timeout": 600, "session": "b"}),
            &declares,
        );
        assert!(matches!(named, Some(Kind::Terminal { session, .. }) if session == "b"));
        // A terminal call that hands control back within --max-wait, or
        // that runs no new command, is no task.
        for arguments in [
            json!({"command": "make"}),
            json!({"command": "make", "timeout": 50}),
            json!({"command": "make", "timeout": "600"}),
            json!({"command": "", "timeout": 600}),
            json!({"command": "y", "is_input": true, "timeout": 600}),
            json!({"command": "", "keys": ["q"], "timeout": 600}),
            json!({"command": "make", "reset": true, "timeout": 600}),
            json!({"command": "vite", "background": true, "timeout": 600}),
        ] {
            assert_eq!(wanted("terminal", arguments.clone(), &declares), None, "{arguments}");
        }
        // `null` is "not given"; `false` is off.
        let nulls = json!({"command": "make", "timeout": 600, "is_input": null, "reset": false});
        assert!(wanted("terminal", nulls, &declares).is_some());
        for tool in ["sessions", "output", "session_close", "policy_explain"] {
            assert_eq!(wanted(tool, json!({"command": "make"}), &declares), None);
        }
    }

    const TASKS_ID: &str = rmcp::model::TASKS_EXTENSION_ID;

    #[test]
    fn ids_are_128_random_bits_and_unknown_ids_are_unknown() {
        let tasks = Tasks::default();
        let (first, _one) = tasks.create(Kind::Run, Duration::from_secs(60), 4).expect("made");
        let (second, _two) = tasks.create(Kind::Run, Duration::from_secs(60), 4).expect("made");
        for task in [&first, &second] {
            assert_eq!(task.task_id.len(), 32);
            assert!(task.task_id.bytes().all(|b| b.is_ascii_hexdigit()));
            assert_eq!((task.status, task.ttl_ms), (TaskStatus::Working, Some(60_000)));
        }
        assert_ne!(first.task_id, second.task_id);
        assert!(tasks.get(&first.task_id).is_some() && tasks.knows(&second.task_id));
        assert!(tasks.get("nope").is_none() && !tasks.cancel("nope") && !tasks.knows("nope"));
        // Another client's table does not know them.
        let other = Tasks::default();
        assert!(other.get(&first.task_id).is_none() && !other.cancel(&first.task_id));
    }

    #[test]
    fn running_tasks_are_bounded_and_ended_ones_kept_up_to_a_bound() {
        let tasks = Tasks::default();
        let ttl = Duration::from_secs(60);
        let running: Vec<_> =
            (0..3).map(|_| tasks.create(Kind::Run, ttl, 3).expect("made")).collect();
        assert_eq!(tasks.create(Kind::Run, ttl, 3).err(), Some(TooMany { limit: 3 }));
        // An ended task frees its place.
        let (task, _) = &running[0];
        tasks.set(&task.task_id, State::Cancelled, None);
        assert_eq!(tasks.get(&task.task_id).expect("kept").status(), TaskStatus::Cancelled);
        let mut ended = vec![task.task_id.clone()];
        for _ in 0..MAX_ENDED + 5 {
            let (task, _) = tasks.create(Kind::Run, ttl, 3).expect("a place");
            tasks.set(&task.task_id, State::Completed(JsonObject::new()), None);
            ended.push(task.task_id);
        }
        let table = tasks.table();
        assert_eq!(table.len(), MAX_ENDED + 2, "the oldest ended ones went; the running stay");
        assert!(running[1..].iter().all(|(task, _)| table.contains_key(&task.task_id)));
        assert!(table.contains_key(ended.last().expect("one")));
    }

    #[test]
    fn a_task_expires_after_its_ttl() {
        let tasks = Tasks::default();
        let (task, _) = tasks.create(Kind::Run, Duration::ZERO, 3).expect("made");
        assert!(tasks.get(&task.task_id).is_none() && !tasks.knows(&task.task_id));
    }

    #[test]
    fn cancel_fires_the_tasks_token_and_closing_every_one() {
        let tasks = Tasks::default();
        let ttl = Duration::from_secs(60);
        let (one, first) = tasks.create(Kind::Run, ttl, 3).expect("made");
        let (_, second) = tasks.create(Kind::Run, ttl, 3).expect("made");
        assert!(tasks.cancel(&one.task_id));
        assert!(first.cancel.is_cancelled() && !second.cancel.is_cancelled());
        tasks.close();
        assert!(second.cancel.is_cancelled());
    }

    #[test]
    fn a_waiting_terminal_task_takes_replies_about_its_command_only() {
        let tasks = Tasks::default();
        let kind = Kind::Terminal { session: "a".to_owned(), wait: Duration::from_secs(60) };
        let (task, handle) = tasks.create(kind, Duration::from_secs(60), 3).expect("made");
        let reply = |status: &str| {
            let mut result = CallToolResult::success(Vec::new());
            result.structured_content = Some(json!({"status": status}));
            result
        };
        // Working: nothing is taken, and the session is the task's.
        tasks.session_replied("a", &reply("completed"));
        assert!(handle.answers.slot().is_none());
        assert_eq!(tasks.holding("a"), Some(task.task_id.clone()));
        assert_eq!(tasks.holding("b"), None);
        tasks.set(&task.task_id, State::InputRequired(InputRequests::new()), None);
        assert_eq!(tasks.holding("a"), None, "free to be answered");
        // Another session's, a refusal's, an error's: not about it.
        tasks.session_replied("b", &reply("completed"));
        tasks.session_replied("a", &reply("not_executed"));
        tasks.session_replied("a", &CallToolResult::error(Vec::new()));
        assert!(handle.answers.slot().is_none());
        tasks.session_replied("a", &reply("running"));
        assert_eq!(status(handle.answers.slot().as_ref().expect("taken")), Some("running"));
    }

    #[test]
    fn notes_for_the_next_reply_are_bounded_and_taken_once() {
        let tasks = Tasks::default();
        for n in 0..MAX_NOTES + 3 {
            tasks.note_for_next_reply(format!("note {n}"));
        }
        let (notes, more) = tasks.take_notes();
        assert_eq!((notes.len(), more), (MAX_NOTES, 3));
        assert_eq!(tasks.take_notes(), (Vec::new(), 0));
    }
}
