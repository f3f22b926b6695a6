//! The `terminal` tool: one call on a persistent session (a command, input
//! or a key, a poll, a reset, or a background job's start), with progress
//! forwarded while it waits. Its description states the server's waits and
//! caps. It does not check arguments (`args`) or word the reply (`render`).

use std::time::Duration;

use rmcp::handler::server::tool::schema_for_output;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, JsonObject, ProgressNotificationParam, ProgressToken};
use rmcp::service::{Peer, RequestContext};
use rmcp::{RoleServer, tool, tool_router};
use shellkeep_engine::{Call, Event, Outcome, Place, Progress, ProgressHook, Reply, Request};
use shellkeep_engine::{DEFAULT_SESSION, Lease, Opened, RegistryError, validate_name};
use shellkeep_engine::{Input, control_key, names_a_key, parse_input, parse_keys};

use super::{Shellkeep, enforcement_of, structured_result, tool_error, with_denial, with_sandbox};
use crate::args::{self, Checked, Terminal, TerminalArgs};
use crate::audit;
use crate::config::ServerConfig;
use crate::render::{self, HintFor, TerminalStatus, span};
use crate::schema;

/// The tool's description and its `timeout` argument's, with the limits
/// this server runs with.
pub(super) fn describe(config: &ServerConfig, input: &mut JsonObject) -> String {
    let (max_wait, quiet) = (span(config.max_wait), span(config.no_output_return));
    schema::describe_property(
        input,
        "timeout",
        format!(
            "Seconds this call may wait before handing control back (the command keeps \
             running, exit code -1): more than 0, at most {} ({}). Without it, control comes \
             back after {quiet} without new output, and after {max_wait} at most. Control also \
             comes back as soon as the program waits for input. A larger value also raises how \
             long the command may then run unwatched. {}",
            args::MAX_TIMEOUT.as_secs(),
            span(args::MAX_TIMEOUT),
            render::terminal_task_rule(config.max_wait),
        ),
    );
    let sandbox = super::describe_sandbox(config, input, "a new session");
    format!(
        "Run a command in a persistent bash session in a real terminal ({} columns by {} rows): \
         the working directory, environment variables, virtual environments, functions and \
         aliases persist between calls. One command at a time; chain with && or ;. Interactive programs work: when a \
         call returns exit code -1 the command is still running: send an empty command to wait \
         for more output, is_input=true with text (typed as it is, with Enter) or C-c, or `keys` \
         for other keys and text without Enter (keys=[\"DOWN\", \"ENTER\"], [\"q\"], \
         [\"ESC\", \":wq\", \"ENTER\"]; arrows as the program's cursor mode asks). Output over {} \
         characters in a reply (all its outputs together, counted as JSON writes them) is cut \
         to its head and tail and saved in full to a file named in the reply. \
         A call hands control back after at most {max_wait} (or its timeout), or within about a \
         second when the program waits for input, or with its screen within about 3 s for a \
         full-screen program that keeps redrawing (watch, top); the command keeps running. A running command \
         is stopped, with the rest of its command line, only when no call has waited on it, \
         polled it or sent it input for longer than its limit (its timeout category's execution \
         limit, or the last call's timeout if larger; time waiting for input not counted); every \
         reply for a running command says by when to look again. If the client cancels a call, \
         the command is left running and the next call shows its output. Pagers are off \
         (PAGER=cat, git's core.pager=cat; to page on purpose: git -c core.pager=less log, \
         PAGER=less man ls) and git's editor is `true` (core.editor: `git commit` needs -m), PIP_NO_INPUT=1, DEBIAN_FRONTEND=noninteractive; to open an \
         editor on purpose, ask for it: GIT_EDITOR=vim git commit, or vim FILE. shellkeep's notices \
         are lines in [brackets]; output that could pass for one comes in a text block of its \
         own.{sandbox}",
        config.columns,
        config.rows,
        render::count(config.output_cap as u64),
    )
}

/// How long the call that starts a background job waits before it
/// returns with the job's first output.
const BACKGROUND_FIRST_WAIT: Duration = Duration::from_secs(1);

#[tool_router(router = terminal_router, vis = "pub(super)")]
impl Shellkeep {
    /// Runs a command, sends input or a key, polls, or resets a session.
    #[tool(
        output_schema = schema_for_output::<render::TerminalOutput>(),
        annotations(
            title = "Terminal",
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = false,
            open_world_hint = true
        )
    )]
    async fn terminal(
        &self,
        Parameters(Checked(args)): Parameters<Checked<TerminalArgs>>,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let args = match args.check() {
            Ok(args) => args,
            Err(message) => return self.with_job_notices(tool_error(message)),
        };
        let (lease, opened) = match self.open_for(&args).await {
            Ok(opened) => opened,
            Err(message) => return self.with_job_notices(tool_error(message)),
        };
        // The policy's execution limit applies to new commands; the session
        // raises it to cover any wait the agent asks for. Background jobs
        // are not under it.
        let (decision, timeout) = match opened {
            SessionOpened::Background(_) => (None, Some(BACKGROUND_FIRST_WAIT)),
            _ => (Some(self.core.policy.decide(&args.command, None)), args.timeout),
        };
        let exec_limit = decision.as_ref().map(|decision| decision.limits.exec);
        let (progress, forwarder) = progress_forwarder(&context);
        let asked = Asked::of(&args);
        let call = match call(args.command, args.is_input, args.reset, args.keys) {
            Ok(call) => call,
            Err(message) => return self.with_job_notices(tool_error(message)),
        };
        let audit = self
            .audit(&context.peer, audit::Start::terminal(lease.name(), &call, decision.as_ref()));
        let request = Request { call, timeout, exec_limit, progress };
        let executed = lease.session().execute(request, context.ct.clone()).await;
        let number = executed.as_ref().ok().and_then(|reply| reply.number);
        let log = number.and_then(|number| lease.session().output().get(Some(number)).ok());
        audit.end_terminal(&executed, log.map(|log| log.bytes()));
        // The request, and with it the hook, is gone: the forwarder sends
        // what is queued and ends, so no progress follows the result.
        if let Some(forwarder) = forwarder {
            let _ = forwarder.await;
        }
        if let SessionOpened::Background(_) = &opened {
            self.settle_job(&lease, number).await;
        }
        let result = match executed {
            Ok(reply) => return self.reply_of(&lease, &opened, reply, &asked),
            Err(err) => self.with_job_notices(tool_error(render::session_refused(&err))),
        };
        self.with_guard_notice(result, Some(lease.name()))
    }
}

/// What a call asked for besides its command, kept for its reply's notes.
struct Asked {
    /// The key named by text typed as input that is exactly a key's name:
    /// it was typed as text, and the reply says how to send the key, for
    /// models taught otherwise.
    typed_key_name: Option<&'static str>,
    /// `record`, as given.
    record: Option<bool>,
    /// `sandbox`, as given.
    sandbox: Option<shellkeep_engine::SandboxMode>,
    /// `network`, as given.
    network: Option<bool>,
}

impl Asked {
    /// What `args` asked for.
    fn of(args: &Terminal) -> Asked {
        let typed_key_name = match (&args.keys, args.is_input) {
            (None, true) => names_a_key(&args.command),
            _ => None,
        };
        Asked { typed_key_name, record: args.record, sandbox: args.sandbox, network: args.network }
    }
}

/// The progress hook of a call whose client asked for progress, and the
/// task that forwards it: the engine reports to a channel, the task sends
/// to the peer while the call waits.
fn progress_forwarder(
    context: &RequestContext<RoleServer>,
) -> (Option<ProgressHook>, Option<tokio::task::JoinHandle<()>>) {
    let Some(token) = context.meta.get_progress_token() else {
        return (None, None);
    };
    let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
    let hook = ProgressHook::new(move |progress| {
        let _ = sender.send(progress);
    });
    (Some(hook), Some(tokio::spawn(forward_progress(context.peer.clone(), token, receiver))))
}

impl Shellkeep {
    /// After a background job's start: its command `number` is watched
    /// until it ends; when it never ran (its shell could not start there),
    /// there is no job and its session is closed.
    async fn settle_job(&self, lease: &Lease, number: Option<u64>) {
        match number {
            Some(number) => self.client.sessions.watch_job(lease, number),
            None => {
                if let Some(session) = self.client.sessions.forget_job(lease) {
                    session.close().await;
                }
            }
        }
    }

    /// The reply of a call the session executed: masked, its outputs fit
    /// into one budget, then worded as a background job's start or as a
    /// terminal reply with its notes.
    fn reply_of(
        &self,
        lease: &Lease,
        opened: &SessionOpened,
        mut reply: Reply,
        asked: &Asked,
    ) -> CallToolResult {
        self.mask_commands(&mut reply);
        let store = lease.session().output();
        let saved = |number| store.get(Some(number)).map(|log| log.saved()).unwrap_or_default();
        render::fit_reply(&mut reply, self.core.config.output_cap, &saved);
        let result = match opened {
            // A job still running gets the reply that says how to follow it.
            SessionOpened::Background(job) if matches!(reply.outcome, Outcome::Running { .. }) => {
                self.background_reply(lease, job, &reply)
            }
            _ => self.with_job_notices(self.terminal_reply(lease, opened, &reply, asked)),
        };
        self.with_guard_notice(result, Some(lease.name()))
    }

    /// The reply that starts a background job still running.
    fn background_reply(
        &self,
        lease: &Lease,
        job: &render::JobStart,
        reply: &Reply,
    ) -> CallToolResult {
        let (mut text, mut structured) = render::background_started(lease.name(), job, reply);
        structured.session = Some(lease.name().to_owned());
        if let Some((line, call)) = render::read_hint(lease.name(), reply, HintFor::This) {
            text.notice(&line);
            structured.command_number = Some(call.command);
            structured.output_call = Some(call);
        }
        let mut result = structured_result(text, &structured, false);
        with_sandbox(&mut result, enforcement_of(&lease.session().config().sandbox).as_ref());
        self.with_job_notices(result)
    }

    /// A terminal reply with its notes: the session started, a person who
    /// can answer, a key typed as text, arguments that did not apply, how
    /// to read what a cut left out, the sandbox and a denial it explains.
    fn terminal_reply(
        &self,
        lease: &Lease,
        opened: &SessionOpened,
        reply: &Reply,
        asked: &Asked,
    ) -> CallToolResult {
        let (mut text, mut structured) = render::terminal(reply);
        let is_error = structured.status == TerminalStatus::NotExecuted;
        if lease.name() != DEFAULT_SESSION {
            structured.session = Some(lease.name().to_owned());
        }
        if let SessionOpened::Background(_) = opened {
            structured.background = true;
            structured.no_time_limit = true;
        }
        let mut note = |line: String| {
            text.notice(&line);
            structured.notes.push(line);
        };
        if reply.events.contains(&Event::InputHidden) {
            note(render::person_can_answer(lease.name()));
        }
        if let Some(key) = asked.typed_key_name.filter(|_| reply.input.is_some()) {
            note(render::typed_key_name(key));
        }
        self.ignored_on_existing(lease, opened, asked).into_iter().for_each(note);
        if reply.events.contains(&Event::InputHidden) {
            structured.person_can_answer = Some(render::attach_command(lease.name()));
        }
        if let Some(line) = render::session_opened(lease.name(), &opened.as_note()) {
            text.notice_first(&line);
            structured.notes.insert(0, line);
        }
        // The previous command's output, reported now, may have been cut
        // too: say how to read it as well.
        if let Some(previous) = &reply.previous
            && let Some((line, call)) = render::read_hint(lease.name(), previous, HintFor::Previous)
        {
            text.notice(&line);
            structured.previous_output_call = Some(call);
        }
        if let Some((line, call)) = render::read_hint(lease.name(), reply, HintFor::This) {
            text.notice(&line);
            structured.command_number = Some(call.command);
            structured.output_call = Some(call);
        }
        let mut result = structured_result(text, &structured, is_error);
        let running = &lease.session().config().sandbox;
        with_sandbox(&mut result, enforcement_of(running).as_ref());
        let failed = matches!(reply.outcome, Outcome::Completed { exit_code } if exit_code != 0);
        // Where the shell is: a relative path in an error is there.
        with_denial(&mut result, running, failed, &reply.output.text, Some(&reply.cwd));
        result
    }

    /// The notes for `record`, `sandbox` and `network` given on a call to a
    /// session that was already running, where they do not apply.
    fn ignored_on_existing(
        &self,
        lease: &Lease,
        opened: &SessionOpened,
        asked: &Asked,
    ) -> Vec<String> {
        if !matches!(opened, SessionOpened::Interactive(Opened::Existing)) {
            return Vec::new();
        }
        let mut notes = Vec::new();
        let recorded = lease.session().config().record.is_some();
        if asked.record.is_some_and(|asked| asked != recorded) {
            notes.push(render::record_ignored(lease.name(), recorded));
        }
        let running = &lease.session().config().sandbox;
        let differs = asked.sandbox.is_some_and(|mode| mode != running.mode)
            || asked.network.is_some_and(|network| network != running.network);
        if differs {
            notes.push(render::sandbox::sandbox_ignored(lease.name(), running));
        }
        notes
    }
}

/// The engine's call for the tool's `command`, `is_input`, `reset` and
/// `keys` (already checked together): the keys, if any (for the running
/// program); a reset (then the command, if any); input (text, or a control
/// key: `parse_input`); a control key even without `is_input` (a
/// command that is exactly `C-c` is unmistakably one); a poll for an empty
/// command; else a command to run. Key names that are no key are an error
/// (the message lists the keys).
fn call(
    command: String,
    is_input: bool,
    reset: bool,
    keys: Option<Vec<String>>,
) -> Result<Call, String> {
    if let Some(items) = keys {
        return parse_keys(&items).map(Call::Input).map_err(|err| render::key_error(&err));
    }
    if reset {
        let then = (!command.trim().is_empty()).then_some(command);
        return Ok(Call::Reset { then });
    }
    if is_input {
        return parse_input(&command).map(Call::Input).map_err(|err| render::key_error(&err));
    }
    if command.trim().is_empty() {
        return Ok(Call::Poll);
    }
    match control_key(&command) {
        Some(Ok(key)) => Ok(Call::Input(Input::key(key))),
        _ => Ok(Call::run(command)),
    }
}

/// How the session of a `terminal` call was found.
enum SessionOpened {
    /// It existed, or was started (with where and whether its name had
    /// expired).
    Interactive(Opened),
    /// A background job's new session, started there.
    Background(render::JobStart),
}

impl SessionOpened {
    fn as_note(&self) -> render::SessionNote {
        match self {
            SessionOpened::Interactive(Opened::Existing) => render::SessionNote::Existing,
            SessionOpened::Interactive(Opened::Started { cwd, expired_before }) => {
                render::SessionNote::Started { cwd: cwd.clone(), expired_before: *expired_before }
            }
            SessionOpened::Background(job) => render::SessionNote::Background(job.clone()),
        }
    }
}

impl Shellkeep {
    /// Finds or starts the session a `terminal` call names; errors are
    /// worded for the agent.
    async fn open_for(&self, args: &Terminal) -> Result<(Lease, SessionOpened), String> {
        let registry = &self.client.sessions;
        let cwd = args.cwd.clone();
        if args.record == Some(true) && self.core.config.record.is_none() {
            return Err(render::recording_off());
        }
        let record = args.record != Some(false);
        // A session may only tighten the server's sandbox; without its own
        // request, it gets the server's.
        let server = &self.core.config.sandbox;
        let sandbox = match (args.sandbox, args.network) {
            (None, None) => None,
            (mode, network) => Some(
                server
                    .narrowed(mode, network)
                    .map_err(|why| render::sandbox::looser_refused(&why, server))?,
            ),
        };
        if args.background {
            // A name that cannot be used is told before the calling shell
            // is disturbed.
            if let Some(name) = args.session.as_deref() {
                validate_name(name).map_err(|err| render::registry_error(&err))?;
                if registry.get(name).is_ok() {
                    let err = RegistryError::NameTaken(name.to_owned());
                    return Err(render::registry_error(&err));
                }
            }
            let (place, env_from) = self.job_place().await?;
            let venv = place.virtual_env();
            // `cwd` says where; the environment is the calling session's.
            let place = Place { cwd: cwd.unwrap_or(place.cwd), ..place };
            let (lease, cwd) = registry
                .open_background(args.session.as_deref(), place, &args.command, record, sandbox)
                .map_err(|err| match (&err, &args.cwd) {
                    (RegistryError::BadCwd(dir), None) => {
                        render::job_dir_gone(DEFAULT_SESSION, dir)
                    }
                    _ => render::registry_error(&err),
                })?;
            return Ok((
                lease,
                SessionOpened::Background(render::JobStart { cwd, venv, env_from }),
            ));
        }
        let name = args.session.as_deref().unwrap_or(DEFAULT_SESSION);
        registry
            .open(name, cwd, record, sandbox)
            .map(|(lease, opened)| (lease, SessionOpened::Interactive(opened)))
            .map_err(|err| render::registry_error(&err))
    }
}

impl Shellkeep {
    /// Where a background job starts: the directory and exported
    /// environment of the calling session, `default` (the session calls use
    /// when they name none), read from its shell at its prompt; with the
    /// name of that session, or `None` when it has no shell yet (the job
    /// then starts where and as it would start). The error, worded for the
    /// agent, says why the job was not started.
    async fn job_place(&self) -> Result<(Place, Option<String>), String> {
        let registry = &self.client.sessions;
        let Ok(from) = registry.get(DEFAULT_SESSION) else {
            return Ok((Place { cwd: registry.start_dir().to_owned(), env: None }, None));
        };
        let place = from.place().await.map_err(|err| {
            // It may quote a command or what the shell printed.
            let message = render::job_place_error(DEFAULT_SESSION, &err);
            render::mask(&self.core.config.masks, &message)
        })?;
        let env_from = place.env.is_some().then(|| DEFAULT_SESSION.to_owned());
        Ok((place, env_from))
    }
}

/// Sends each progress report of a waiting `terminal` call to the client
/// as `notifications/progress`: `progress` counts the reports (strictly
/// increasing), `message` is the newest line of output. The engine reports
/// about once a second, which is the rate limit, so the queue holds at most
/// a report or two (one per second of the call). Ends when the call ends.
async fn forward_progress(
    peer: Peer<RoleServer>,
    token: ProgressToken,
    mut reports: tokio::sync::mpsc::UnboundedReceiver<Progress>,
) {
    while let Some(report) = reports.recv().await {
        let mut param = ProgressNotificationParam::new(token.clone(), report.count as f64);
        if !report.line.trim().is_empty() {
            param = param.with_message(report.line);
        }
        if let Err(err) = peer.notify_progress(param).await {
            tracing::debug!("could not send progress: {err}");
        }
    }
}

impl Shellkeep {
    /// Masks the commands a reply echoes back (its own, the previous one's,
    /// one that was not run) as its output is masked: an agent that typed a
    /// secret's value does not get it back.
    fn mask_commands(&self, reply: &mut Reply) {
        let masks = &self.core.config.masks;
        let mut next = Some(reply);
        while let Some(reply) = next {
            reply.command = render::mask(masks, &reply.command);
            if let Outcome::NotExecuted { command, .. } = &mut reply.outcome {
                *command = render::mask(masks, command);
            }
            next = reply.previous.as_deref_mut();
        }
    }
}

#[cfg(test)]
mod tests {
    use shellkeep_engine::Call;
    use shellkeep_engine::{Input, parse_keys};

    use super::call;

    fn keys(items: &[&str]) -> Call {
        let items: Vec<String> = items.iter().map(|item| (*item).to_owned()).collect();
        Call::Input(parse_keys(&items).expect("keys"))
    }

    #[test]
    fn the_tool_arguments_map_onto_one_call() {
        let text = |t: &str| Call::Input(Input::Text(t.to_owned()));
        let cases = [
            (("echo hi", false, false), Ok(Call::run("echo hi"))),
            (("", false, false), Ok(Call::Poll)),
            (("  ", false, false), Ok(Call::Poll)),
            (("yes", true, false), Ok(text("yes"))),
            // Empty input is an empty line (it completes a here-document's
            // blank line; to a running program the engine treats it as a poll).
            (("", true, false), Ok(text(""))),
            (("C-c", true, false), Ok(keys(&["C-c"]))),
            (("Ctrl+D", true, false), Ok(keys(&["C-d"]))),
            (("^Z", true, false), Ok(keys(&["C-z"]))),
            // Text is text, whatever it says: debugger commands and key
            // names alike.
            (("up", true, false), Ok(text("up"))),
            (("UP", true, false), Ok(text("UP"))),
            (("end", true, false), Ok(text("end"))),
            (("ENTER", true, false), Ok(text("ENTER"))),
            (("delete", true, false), Ok(text("delete"))),
            // A command that is exactly a control key is a key.
            (("C-c", false, false), Ok(keys(&["C-c"]))),
            // Other key names are commands.
            (("UP", false, false), Ok(Call::run("UP"))),
            // Text that only starts like one is a command.
            (("Cat file", false, false), Ok(Call::run("Cat file"))),
            (("", false, true), Ok(Call::Reset { then: None })),
            (("  ", false, true), Ok(Call::Reset { then: None })),
            (("ls", false, true), Ok(Call::Reset { then: Some("ls".to_owned()) })),
        ];
        for ((command, is_input, reset), expected) in cases {
            let got: Result<Call, String> = call(command.to_owned(), is_input, reset, None);
            assert_eq!(got, expected, "{command:?} is_input={is_input} reset={reset}");
        }
        let err = call("C-1".to_owned(), true, false, None).expect_err("an unknown key");
        assert!(err.contains("unknown key \"C-1\"") && err.contains("PGUP"), "{err}");
        // Without is_input, text that is no key is a command.
        assert_eq!(call("C-1".to_owned(), false, false, None), Ok(Call::run("C-1")));
        // A list of keys, with or without is_input.
        for is_input in [false, true] {
            let items = Some(vec!["DOWN".to_owned(), "q".to_owned()]);
            assert_eq!(call(String::new(), is_input, false, items), Ok(keys(&["DOWN", "q"])));
        }
        let err = call(String::new(), false, false, Some(vec!["F13".to_owned()]));
        assert!(err.expect_err("no key").contains("unknown key \"F13\""));
    }
}
