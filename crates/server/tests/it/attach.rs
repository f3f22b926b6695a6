//! `shellkeep attach` and `shellkeep ls` beside an agent: a real attach in
//! a real terminal (tmux, read with `capture-pane`) or as a plain stream,
//! while the agent drives the same server through the rmcp client.
//!
//! Each test gives its server (and its own `ls` and `attach`) a runtime
//! directory of its own through `XDG_RUNTIME_DIR` and `TMPDIR`, so that
//! parallel tests never see each other's servers.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::json;
use tokio::io::AsyncReadExt;

use crate::{
    EVENTUALLY, Scratch, Server, binary, installed, marker, poll_until, processes_with, wait_until,
};

const VALUE: &str = "e2e-Secret-Value-0123456789";

/// A private runtime directory for one test's servers and clients.
struct Runtime {
    scratch: Scratch,
}

impl Runtime {
    fn new() -> Runtime {
        let scratch = Scratch::new();
        for dir in ["xdg", "tmp"] {
            std::fs::create_dir(scratch.path.join(dir)).expect("mkdir");
            std::fs::set_permissions(
                scratch.path.join(dir),
                std::os::unix::fs::PermissionsExt::from_mode(0o700),
            )
            .expect("chmod");
        }
        Runtime { scratch }
    }

    fn xdg(&self) -> PathBuf {
        self.scratch.path.join("xdg")
    }

    fn tmp(&self) -> PathBuf {
        self.scratch.path.join("tmp")
    }

    /// The environment of a server of this test.
    fn server_env(&self) -> Vec<(&'static str, String)> {
        vec![("XDG_RUNTIME_DIR", self.xdg().display().to_string())]
    }

    /// Starts a server of this test with `args` and `env`.
    async fn server(&self, args: &[&str], env: &[(&str, &str)]) -> Server {
        let own = self.server_env();
        let mut all: Vec<(&str, &str)> = own.iter().map(|(k, v)| (*k, v.as_str())).collect();
        all.extend_from_slice(env);
        Server::with_env(args, &all).await
    }

    /// `shellkeep ARGS` as a client of this test's servers.
    fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(binary());
        command
            .args(args)
            .env("XDG_RUNTIME_DIR", self.xdg())
            .env("TMPDIR", self.tmp())
            .stdin(Stdio::null())
            .kill_on_drop(true);
        command
    }

    /// Runs `shellkeep ARGS` to its end: (success, stdout, stderr).
    async fn output(&self, args: &[&str]) -> (bool, String, String) {
        let out = tokio::time::timeout(EVENTUALLY, self.command(args).output())
            .await
            .expect("the command ends in time")
            .expect("run shellkeep");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// `shellkeep ls`'s output.
    async fn ls(&self) -> String {
        let (ok, stdout, stderr) = self.output(&["ls"]).await;
        assert!(ok, "ls failed: {stderr}");
        stdout
    }
}

/// A `shellkeep attach` in a tmux terminal of 120x40 of its own (its own
/// tmux server, killed when dropped). The pane stays when attach ends.
struct Tmux {
    /// The tmux server's socket name (`-L`).
    socket: String,
}

impl Tmux {
    /// A view attached with `args` that holds the session for writing
    /// (it said so); `None` without tmux.
    async fn writing(runtime: &Runtime, args: &[&str]) -> Option<Tmux> {
        let view = Tmux::start(runtime, args)?;
        view.wait_for("writing: your keys go to the session").await;
        Some(view)
    }

    fn start(runtime: &Runtime, args: &[&str]) -> Option<Tmux> {
        if !installed("tmux") {
            return None;
        }
        let socket = format!("sk-{}", marker());
        let config = runtime.scratch.path.join("tmux.conf");
        std::fs::write(&config, "set -g remain-on-exit on\nset -g status off\n").expect("write");
        let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
        let line = format!(
            "exec env XDG_RUNTIME_DIR='{}' TMPDIR='{}' '{}' attach {}",
            runtime.xdg().display(),
            runtime.tmp().display(),
            binary().display(),
            quoted.join(" ")
        );
        let status = std::process::Command::new("tmux")
            .args(["-L", &socket, "-f"])
            .arg(&config)
            .args(["new-session", "-d", "-s", "view", "-x", "120", "-y", "40", &line])
            .status()
            .expect("run tmux");
        assert!(status.success(), "tmux new-session failed");
        Some(Tmux { socket })
    }

    fn tmux(&self, args: &[&str]) -> String {
        let out = std::process::Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .expect("run tmux");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// What the pane shows, its history included, wrapped lines joined.
    fn pane(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-J", "-S", "-1000", "-t", "view"])
    }

    /// Types `text` as it is.
    fn type_text(&self, text: &str) {
        self.tmux(&["send-keys", "-t", "view", "-l", text]);
    }

    /// Presses `key` (tmux's name: `Enter`, `C-c`, `C-]`).
    fn press(&self, key: &str) {
        self.tmux(&["send-keys", "-t", "view", key]);
    }

    /// Waits until the pane shows `needle`; returns the pane.
    async fn wait_for(&self, needle: &str) -> String {
        let mut pane = String::new();
        wait_until(
            EVENTUALLY,
            || {
                pane = self.pane();
                pane.contains(needle)
            },
            || format!("the pane shows no {needle:?}:\n{}", self.pane()),
        )
        .await;
        pane
    }

    /// Whether the attach process has ended (the pane is dead).
    fn ended(&self) -> bool {
        self.tmux(&["display-message", "-p", "-t", "view", "#{pane_dead}"]).trim() == "1"
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = std::process::Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .stderr(Stdio::null())
            .status();
    }
}

/// A plain-stream `shellkeep attach` (stdin not a terminal), its stdout and
/// stderr collected as they come.
struct Plain {
    child: tokio::process::Child,
    stdout: Arc<Mutex<String>>,
    stderr: Arc<Mutex<String>>,
    /// The tasks that collect them, done once the pipes close.
    collectors: Vec<tokio::task::JoinHandle<()>>,
}

impl Plain {
    fn start(runtime: &Runtime, args: &[&str]) -> Plain {
        let mut all = vec!["attach"];
        all.extend_from_slice(args);
        let mut child = runtime
            .command(&all)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start attach");
        let collect = |mut pipe: Box<dyn tokio::io::AsyncRead + Unpin + Send>| {
            let text = Arc::new(Mutex::new(String::new()));
            let into = Arc::clone(&text);
            let collector = tokio::spawn(async move {
                let mut buffer = [0u8; 4096];
                while let Ok(n) = pipe.read(&mut buffer).await {
                    if n == 0 {
                        break;
                    }
                    into.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push_str(&String::from_utf8_lossy(&buffer[..n]));
                }
            });
            (text, collector)
        };
        let (stdout, out) = collect(Box::new(child.stdout.take().expect("stdout")));
        let (stderr, err) = collect(Box::new(child.stderr.take().expect("stderr")));
        Plain { child, stdout, stderr, collectors: vec![out, err] }
    }

    fn stdout(&self) -> String {
        self.stdout.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    async fn wait_stdout(&self, needle: &str) {
        wait_until(
            EVENTUALLY,
            || self.stdout().contains(needle),
            || format!("no {needle:?} in stdout:\n{}\nstderr:\n{}", self.stdout(), self.stderr()),
        )
        .await;
    }

    /// Waits for the process to end and for all it wrote to be collected;
    /// its exit status's success.
    async fn wait_end(&mut self) -> bool {
        let status = tokio::time::timeout(EVENTUALLY, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("attach did not end; stderr:\n{}", self.stderr()))
            .expect("wait");
        for collector in self.collectors.drain(..) {
            let _ = tokio::time::timeout(EVENTUALLY, collector).await;
        }
        status.success()
    }
}

/// The person watches `default` while the agent runs commands: the
/// banner names the server and session, the view is read-only, the agent's
/// commands and their output appear live, and `ls` counts the watcher.
#[tokio::test]
async fn a_person_watches_the_agent_run_commands() {
    let runtime = Runtime::new();
    let server = runtime.server(&[], &[]).await;
    let first = marker();
    server.terminal(json!({"command": format!("echo before-{first}")})).await;
    let Some(view) = Tmux::start(&runtime, &[]) else { return };
    let pane = view.wait_for(&format!("\nbefore-{first}\n")).await;
    assert!(pane.contains(&format!("session default of server {}", server.pid)), "{pane}");
    assert!(pane.contains("read-only") && pane.contains("detach with C-]"), "{pane}");
    for n in 0..3 {
        let m = marker();
        let r = server.terminal(json!({"command": format!("echo live-{n}-{m}")})).await;
        assert_eq!(r.output(), format!("live-{n}-{m}\n"), "{r:#?}");
        let pane = view.wait_for(&format!("\nlive-{n}-{m}\n")).await;
        // The agent's command shows as a person would have typed it.
        assert!(pane.contains(&format!("\n$ echo live-{n}-{m}\n")), "{pane}");
        assert!(!pane.contains("__sk_"), "nothing of the integration: {pane}");
    }
    let title = view.tmux(&["display-message", "-p", "-t", "view", "#{pane_title}"]);
    let named = format!("shellkeep: default on server {} (read-only)", server.pid);
    assert_eq!(title.trim(), named);
    let ls = runtime.ls().await;
    assert!(ls.contains("default: idle, 1 watching"), "{ls}");
    // The person's window shrinks: told what no longer fits.
    view.tmux(&["resize-window", "-t", "view", "-x", "100", "-y", "40"]);
    view.wait_for("your terminal (100x40) is smaller than the session's (120x50): lines").await;
    // Keys of a read-only view go nowhere, and it says so.
    view.type_text("echo typed-by-the-person");
    view.wait_for("read-only: your keys are not sent").await;
    let r = server.terminal(json!({"command": "echo next"})).await;
    assert_eq!(r.output(), "next\n", "the person's keys reached nothing: {r:#?}");
}

/// `ls` names the server (pid, start directory, client, uptime) and each
/// session with its state, its running command, and who is attached.
#[tokio::test]
async fn ls_lists_the_server_and_its_sessions() {
    let runtime = Runtime::new();
    let server = runtime.server(&[], &[]).await;
    let m = marker();
    let r = server
        .terminal(json!({"command": format!("sleep 300.{m}"), "session": "build", "timeout": 0.5}))
        .await;
    assert_eq!(r["status"], "running", "{r:#?}");
    server.terminal(json!({"command": "true"})).await;
    let ls = runtime.ls().await;
    let head = format!("server {}: started in {}, client ", server.pid, server.cwd().display());
    assert!(ls.contains(&head) && ls.contains(", up "), "{ls}");
    assert!(!ls.contains("not connected yet"), "the client named itself: {ls}");
    assert!(ls.contains("attach socket: "), "{ls}");
    assert!(ls.contains("default: idle, nobody attached"), "{ls}");
    assert!(ls.contains(&format!("build: running `sleep 300.{m}` for ")), "{ls}");
    // A directory a dead server left (its pid free, or reused by a process
    // that started later) is skipped without a word.
    let base = runtime.xdg().join("shellkeep");
    let stale = base.join(format!("{}-1-0a1b2c3d", std::process::id()));
    std::fs::create_dir(&stale).expect("mkdir");
    std::fs::set_permissions(&stale, std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .expect("chmod");
    std::fs::write(stale.join("attach.sock"), "").expect("write");
    let ls = runtime.ls().await;
    assert_eq!(ls.matches("server ").count(), 1, "{ls}");
    assert!(!ls.contains(&format!("server {}", std::process::id())), "{ls}");
    let default_at = ls.find("default:").expect("default");
    assert!(default_at < ls.find("build:").expect("build"), "default first: {ls}");
    // Nothing of another test's servers, and nothing when none runs.
    drop(server);
    let empty = Runtime::new();
    assert_eq!(empty.ls().await, "no shellkeep server of yours is running\n");
}

/// The password the model must never see: the agent starts a `read -s`,
/// the person attaches with `--write` and types it, the agent's poll then
/// completes, and neither the pane nor any reply shows the password.
#[tokio::test]
async fn a_person_answers_the_password_prompt_the_agent_started() {
    let runtime = Runtime::new();
    let server = runtime.server(&[], &[]).await;
    let r = server
        .terminal(
            json!({"command": "read -s -p 'Password: ' pw; echo \"got ${#pw}\"", "timeout": 10}),
        )
        .await;
    assert_eq!(r["status"], "waiting_for_input", "{r:#?}");
    let Some(view) = Tmux::writing(&runtime, &["--write"]).await else { return };
    view.wait_for("Password: ").await;
    let password = format!("pw-{}", marker());
    view.type_text(&password);
    view.press("Enter");
    // The person sees the program end; the agent's poll then has it all.
    let pane = view.wait_for(&format!("got {}", password.len())).await;
    assert!(!pane.contains(&password), "echo was off: {pane}");
    let r = server.terminal(json!({"command": "", "timeout": 20})).await;
    assert_eq!(r["status"], "completed", "{r:#?}");
    assert!(r.output().contains(&format!("got {}", password.len())), "{r:#?}");
    // Told that a person answered, never what: the keys are counted.
    let echo_off = r["person_typed"]["echo_off_keys"].as_u64().unwrap_or(0);
    assert!(echo_off > password.len() as u64, "{r:#?}");
    let everything = format!("{}\n{}", r.text, r.structured);
    assert!(!everything.contains(&password), "the agent saw the password: {everything}");
    // The person gives the keyboard back; the agent types again.
    view.press("C-]");
    view.wait_for("detached from default").await;
    let r = server.terminal(json!({"command": "echo after"})).await;
    assert_eq!(r.output(), "after\n", "{r:#?}");
}

/// While a person holds the session for writing, the agent's new command
/// is refused with words saying so, and nothing is typed into the
/// person's line; polls still work; after the person detaches it runs.
#[tokio::test]
async fn the_agent_is_refused_while_a_person_holds_the_line() {
    let runtime = Runtime::new();
    let server = runtime.server(&[], &[]).await;
    server.terminal(json!({"command": "true"})).await;
    let Some(view) = Tmux::writing(&runtime, &["--write"]).await else { return };
    let ls = runtime.ls().await;
    assert!(ls.contains("a person writing for"), "{ls}");
    let m = marker();
    let r = server.terminal(json!({"command": format!("echo agent-{m}")})).await;
    assert!(r.text.contains("person"), "{r:#?}");
    assert!(!r.text.contains(&format!("agent-{m}\n")), "it did not run: {r:#?}");
    // A second person asking to write gets a read-only view, and is told.
    let Some(second) = Tmux::start(&runtime, &["--write"]) else { return };
    second.wait_for("read-only: another person has held it for writing for").await;
    drop(second);
    view.press("C-]");
    view.wait_for("detached from default").await;
    let r = server.terminal(json!({"command": format!("echo agent-{m}")})).await;
    assert_eq!(r.output(), format!("agent-{m}\n"), "{r:#?}");
}

/// Detaching (the detach key in a writing view, C-c in a read-only one)
/// leaves the session untouched: its running command goes on, nothing was
/// typed into it, and the pane says so.
#[tokio::test]
async fn detaching_leaves_the_session_untouched() {
    let runtime = Runtime::new();
    let server = runtime.server(&[], &[]).await;
    let m = marker();
    let r = server.terminal(json!({"command": format!("sleep 300.{m}"), "timeout": 0.5})).await;
    assert_eq!(r["status"], "running", "{r:#?}");
    for (args, key) in [(&["--write"][..], "C-]"), (&[][..], "C-c")] {
        let Some(view) = Tmux::start(&runtime, args) else { return };
        view.wait_for("detach with C-]").await;
        view.press(key);
        let pane = view.wait_for("the session goes on untouched").await;
        assert!(pane.contains("detached from default"), "{pane}");
        wait_until(EVENTUALLY, || view.ended(), || format!("attach still runs:\n{}", view.pane()))
            .await;
        assert!(!processes_with(&[&format!("300.{m}")]).is_empty(), "{key} reached the session");
    }
    let r = server.terminal(json!({"command": "", "timeout": 0.5})).await;
    assert_eq!(r["status"], "running", "{r:#?}");
    assert!(!r.text.contains("person"), "nobody typed: {r:#?}");
}

/// A secret the server masks never reaches the person's pane; asked for
/// with `--show-secrets`, the owner sees the raw stream.
#[tokio::test]
async fn a_masked_secret_does_not_reach_the_pane() {
    let runtime = Runtime::new();
    let server = runtime.server(&["--secret", "SK_E2E_VALUE"], &[("SK_E2E_VALUE", VALUE)]).await;
    server.terminal(json!({"command": "true"})).await;
    let Some(view) = Tmux::start(&runtime, &[]) else { return };
    view.wait_for("secrets masked").await;
    let mut raw = Plain::start(&runtime, &["--show-secrets"]);
    wait_until(EVENTUALLY, || raw.stderr().contains("SECRETS SHOWN"), || raw.stderr()).await;
    let m = marker();
    let split = format!(
        r#"printf '%s' "${{SK_E2E_VALUE:0:6}}"; sleep 0.3; printf '%s\n' "${{SK_E2E_VALUE:6}}"; echo done-{m}"#
    );
    server.terminal(json!({"command": split})).await;
    let pane = view.wait_for(&format!("\ndone-{m}\n")).await;
    assert!(!pane.contains(VALUE), "{pane}");
    assert!(pane.contains("<secret-hidden>"), "{pane}");
    raw.wait_stdout(VALUE).await;
    // Even the raw stream never carries the integration's markers (their
    // nonce would let a viewer forge a command's end).
    assert!(!raw.stdout().contains("\u{1b}]6973;"), "{:?}", raw.stdout());
    assert!(!raw.stdout().contains("__sk_"), "{:?}", raw.stdout());
    raw.child.start_kill().expect("kill");
    let _ = raw.wait_end().await;
}

/// Without a terminal, attach is a plain read-only stream (for `| less`
/// and scripts) that ends, with a line saying why, when its session closes
/// or its server ends; `--write` needs a terminal.
#[tokio::test]
async fn a_plain_stream_ends_when_the_session_closes_or_the_server_ends() {
    let runtime = Runtime::new();
    let mut server = runtime.server(&[], &[]).await;
    server.terminal(json!({"command": "echo in-build", "session": "build"})).await;
    let mut build = Plain::start(&runtime, &["build"]);
    build.wait_stdout("in-build").await;
    let mut default = Plain::start(&runtime, &[]);
    let m = marker();
    server.terminal(json!({"command": format!("echo plain-{m}")})).await;
    default.wait_stdout(&format!("plain-{m}")).await;
    server.call("session_close", json!({"session": "build"})).await;
    assert!(build.wait_end().await, "{}", build.stderr());
    assert!(build.stderr().contains("the session build was closed"), "{}", build.stderr());
    server.close_connection().await;
    assert!(default.wait_end().await, "{}", default.stderr());
    assert!(default.stderr().contains("the server ended"), "{}", default.stderr());
    let _ = server.wait_exit(EVENTUALLY).await;
    let (ok, _, stderr) = runtime.output(&["attach", "--write"]).await;
    assert!(!ok && stderr.contains("--write needs a terminal"), "{stderr}");
}

/// Choosing the server and the session: none running, several running
/// without `--server` (an error listing them), `--server PID`, and a
/// session that does not exist (an error naming the open ones).
#[tokio::test]
async fn attach_chooses_its_server_and_session_or_says_why_not() {
    let runtime = Runtime::new();
    let (ok, _, stderr) = runtime.output(&["attach"]).await;
    assert!(!ok && stderr.contains("no shellkeep server of yours is running"), "{stderr}");
    let one = runtime.server(&[], &[]).await;
    let two = runtime.server(&[], &[]).await;
    let (ok, _, stderr) = runtime.output(&["attach"]).await;
    assert!(!ok && stderr.contains("2 shellkeep servers of yours are running"), "{stderr}");
    for server in [&one, &two] {
        let line = format!("--server {}: started in {}", server.pid, server.cwd().display());
        assert!(stderr.contains(&line), "{stderr}");
    }
    let (ok, _, stderr) = runtime.output(&["attach", "--server", "1"]).await;
    assert!(!ok && stderr.contains("no shellkeep server of yours runs as pid 1"), "{stderr}");
    let (ok, _, stderr) =
        runtime.output(&["attach", "nosuch", "--server", &two.pid.to_string()]).await;
    assert!(!ok && stderr.contains("no session named \"nosuch\" (open: default"), "{stderr}");
    let m = marker();
    let mut view = Plain::start(&runtime, &["--server", &two.pid.to_string()]);
    wait_until(
        EVENTUALLY,
        || view.stderr().contains(&format!("server {}", two.pid)),
        || view.stderr(),
    )
    .await;
    two.terminal(json!({"command": format!("echo two-{m}")})).await;
    view.wait_stdout(&format!("two-{m}")).await;
    view.child.start_kill().expect("kill");
    let _ = view.wait_end().await;
}

/// Another local user is refused and learns nothing, not even a session
/// name: by the directory's mode when it cannot reach the socket, and by
/// the peer check when it can (the server's directory opened up here to
/// let it try).
#[tokio::test]
async fn another_user_is_refused_and_learns_nothing() {
    let user = "shellkeep-ci";
    if nix::unistd::geteuid().as_raw() != 0 || !user_exists(user) {
        crate::skipping(&format!("needs root and the user {user} (scripts/test-unprivileged)"));
        return;
    }
    if !installed("runuser") {
        return;
    }
    let runtime = Runtime::new();
    let server = runtime.server(&[], &[]).await;
    server.terminal(json!({"command": "echo secret-session-work", "session": "private"})).await;
    let socket = find_socket(&runtime.xdg()).expect("the server's socket");
    // A copy of the binary the other user can run.
    let bin = runtime.scratch.path.join("bin");
    std::fs::create_dir(&bin).expect("mkdir");
    let copy = bin.join("shellkeep");
    std::fs::copy(binary(), &copy).expect("copy");
    set_mode(&runtime.scratch.path, 0o755);
    set_mode(&bin, 0o755);
    set_mode(&copy, 0o755);
    let as_other = |socket: &Path| {
        let out = std::process::Command::new("runuser")
            .args(["-u", user, "--"])
            .arg(&copy)
            .args(["attach", "--socket"])
            .arg(socket)
            .env("TMPDIR", "/tmp")
            .env_remove("XDG_RUNTIME_DIR")
            .stdin(Stdio::null())
            .output()
            .expect("runuser");
        (
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    };
    let (ok, said) = as_other(&socket);
    assert!(!ok && said.contains("Permission denied"), "{said}");
    // Opened up, as a careless setup might: the peer check still refuses.
    let mut dir = socket.parent().expect("dir").to_path_buf();
    while dir.starts_with(&runtime.scratch.path) && dir != runtime.scratch.path {
        set_mode(&dir, 0o711);
        dir.pop();
    }
    set_mode(&socket, 0o777);
    let (ok, said) = as_other(&socket);
    assert!(!ok, "{said}");
    assert!(said.contains("refused: this server belongs to another user"), "{said}");
    assert!(!said.contains("private") && !said.contains("default"), "it learnt nothing: {said}");
    let log = server.log();
    assert!(log.contains("refused a connection of another user"), "{log}");
}

fn user_exists(user: &str) -> bool {
    std::process::Command::new("id")
        .args(["-u", user])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(mode))
        .expect("chmod");
}

/// The attach socket of the one server whose runtime base is in `xdg`.
fn find_socket(xdg: &Path) -> Option<PathBuf> {
    std::fs::read_dir(xdg.join("shellkeep"))
        .ok()?
        .flatten()
        .map(|entry| entry.path().join("attach.sock"))
        .find(|socket| socket.exists())
}

/// What the socket reads is bounded: a request past 4 KiB ends the
/// connection, one of the wrong kind or that does not parse is refused in
/// words, and one connection past the 16 the server takes at once reads a
/// refusal line and nothing else.
#[tokio::test]
async fn the_socket_bounds_what_it_reads() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let runtime = Runtime::new();
    let _server = runtime.server(&[], &[]).await;
    let socket = find_socket(&runtime.xdg()).expect("the server's socket");
    let greeted = async || {
        let stream = tokio::net::UnixStream::connect(&socket).await.expect("connect");
        let mut stream = BufReader::new(stream);
        let mut line = String::new();
        stream.read_line(&mut line).await.expect("greeting");
        assert_eq!(line, "shellkeep-attach 1\n");
        stream
    };
    let rest = async |mut stream: BufReader<tokio::net::UnixStream>| {
        let mut rest = Vec::new();
        tokio::time::timeout(EVENTUALLY, stream.read_to_end(&mut rest))
            .await
            .expect("the server ends the connection")
            .expect("read");
        rest
    };
    // 4 KiB and one byte: closed without a word.
    let mut big = greeted().await;
    big.get_mut().write_all(&frame_of(b'H', &[b' '; 4097])).await.expect("write");
    assert_eq!(rest(big).await, b"");
    // Keys before a request, or a request that does not parse: refused in
    // words.
    for wrong in [frame_of(b'K', b"a"), frame_of(b'H', br#"{"op":"dance"}"#)] {
        let mut odd = greeted().await;
        odd.get_mut().write_all(&wrong).await.expect("write");
        let answer = rest(odd).await;
        assert_eq!(answer.first(), Some(&b'R'), "{answer:?}");
        assert!(String::from_utf8_lossy(&answer).contains("not understood"), "{answer:?}");
    }
    // Sixteen connections waiting to send their request hold every slot.
    let mut held = Vec::new();
    for _ in 0..16 {
        held.push(greeted().await);
    }
    let stream = tokio::net::UnixStream::connect(&socket).await.expect("connect");
    let extra = rest(BufReader::new(stream)).await;
    assert_eq!(
        String::from_utf8_lossy(&extra),
        "shellkeep: refused: too many viewers are attached to this server\n"
    );
    drop(held);
    // Their slots come back as the server sees them leave.
    let list = async || {
        let stream = tokio::net::UnixStream::connect(&socket).await.expect("connect");
        let mut stream = BufReader::new(stream);
        let mut line = String::new();
        stream.read_line(&mut line).await.expect("first line");
        if line != "shellkeep-attach 1\n" {
            return line;
        }
        stream.get_mut().write_all(&frame_of(b'H', br#"{"op":"list"}"#)).await.expect("write");
        String::from_utf8_lossy(&rest(stream).await).into_owned()
    };
    poll_until(EVENTUALLY, list, |answer| answer.starts_with('L')).await;
}

/// A frame of the attach protocol: its kind, its length, its payload.
fn frame_of(kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut frame = vec![kind];
    frame.extend_from_slice(&u32::try_from(payload.len()).expect("small").to_be_bytes());
    frame.extend_from_slice(payload);
    frame
}

/// The person's terminal is given back as it was: a full-screen program
/// the view replayed (alternate screen, hidden cursor, mouse reports) does
/// not outlive the view.
#[tokio::test]
async fn a_full_screen_program_does_not_outlive_the_view() {
    let runtime = Runtime::new();
    let server = runtime.server(&[], &[]).await;
    let m = marker();
    let full_screen =
        format!("printf '\\e[?1049h\\e[?25l\\e[?1000h'; echo in-alt-screen-{m}; sleep 300.{m}");
    let r = server.terminal(json!({"command": full_screen, "timeout": 0.5})).await;
    assert_eq!(r["status"], "running", "{r:#?}");
    // Detached by a key, or stopped by a signal to the attach process.
    for way in ["C-c", "TERM", "HUP", "INT"] {
        let Some(view) = Tmux::start(&runtime, &[]) else { return };
        view.wait_for(&format!("\nin-alt-screen-{m}\n")).await;
        let modes = || {
            view.tmux(&[
                "display-message",
                "-p",
                "-t",
                "view",
                "#{alternate_on} #{cursor_flag} #{mouse_any_flag}",
            ])
        };
        assert_eq!(modes().trim(), "1 0 1", "the replay switched them on");
        let said = if way == "C-c" {
            view.press(way);
            "detached from default".to_owned()
        } else {
            let pid = view.tmux(&["display-message", "-p", "-t", "view", "#{pane_pid}"]);
            crate::send_signal(pid.trim().parse().expect("a pid"), way);
            format!("stopped by SIG{way}; detached from default")
        };
        let pane = view.wait_for(&said).await;
        assert!(pane.contains("[shellkeep: session default"), "the main screen is back: {pane}");
        let printed = format!("in-alt-screen-{m}");
        assert!(!pane.lines().any(|line| line.trim() == printed), "{pane}");
        // (tmux says a hidden cursor for every pane whose process ended.)
        let modes = modes();
        let [alternate, _, mouse] = modes.split_whitespace().collect::<Vec<_>>()[..] else {
            panic!("{modes}")
        };
        assert_eq!((alternate, mouse), ("0", "0"), "{way}: {pane}");
    }
    assert!(!processes_with(&[&format!("300.{m}")]).is_empty(), "the program goes on");
}

/// A command of the server's own sessions runs as the same user, yet it
/// cannot watch its session (the raw stream), hold it or type into it as a
/// person: `shellkeep attach` and `ls` from inside a session are refused.
#[tokio::test]
async fn a_command_of_the_servers_own_sessions_cannot_attach() {
    let runtime = Runtime::new();
    let server = runtime.server(&[], &[]).await;
    let socket = find_socket(&runtime.xdg()).expect("the server's socket");
    let (bin, xdg) = (binary(), runtime.xdg());
    let attach = format!("'{}' attach --socket '{}'", bin.display(), socket.display());
    let ls = format!("XDG_RUNTIME_DIR='{}' '{}' ls", xdg.display(), bin.display());
    for command in [attach, ls] {
        let command = format!("{command} </dev/null 2>&1; echo \"exit $?\"");
        let r = server.terminal(json!({"command": command, "timeout": 20})).await;
        let out = r.output();
        assert!(out.contains("refused: a process of this server's own sessions"), "{r:#?}");
        assert!(!out.contains("session default"), "{r:#?}");
    }
    let log = server.log();
    assert!(log.contains("refused a process of the server's own sessions"), "{log}");
    let r = server.terminal(json!({"command": "echo untouched"})).await;
    assert_eq!(r.output(), "untouched\n", "{r:#?}");
}

/// A view follows its session through a reset (the next shell's output
/// follows, and the viewer is told) and through the shell's own end.
#[tokio::test]
async fn a_view_follows_its_session_through_a_reset_and_the_shells_end() {
    let runtime = Runtime::new();
    let server = runtime.server(&[], &[]).await;
    server.terminal(json!({"command": "echo first-shell"})).await;
    let mut view = Plain::start(&runtime, &[]);
    view.wait_stdout("\nfirst-shell\n").await;
    let r = server.terminal(json!({"command": "", "reset": true})).await;
    assert!(!r.is_error, "{r:#?}");
    let m = marker();
    server.terminal(json!({"command": format!("echo second-shell-{m}")})).await;
    view.wait_stdout(&format!("\nsecond-shell-{m}\n")).await;
    assert!(
        view.stderr().contains("the session's shell was replaced (reset)"),
        "{}",
        view.stderr()
    );
    server.terminal(json!({"command": "exit 3", "timeout": 5})).await;
    wait_until(
        EVENTUALLY,
        || view.stderr().contains("the session's shell ended"),
        || view.stderr(),
    )
    .await;
    let m = marker();
    server.terminal(json!({"command": format!("echo third-shell-{m}")})).await;
    view.wait_stdout(&format!("\nthird-shell-{m}\n")).await;
    view.child.start_kill().expect("kill");
    let _ = view.wait_end().await;
}

/// A viewer that reads nothing is never waited on: the agent's command
/// runs to its end, and the viewer, reading at last, is told what it
/// skipped.
#[tokio::test]
async fn a_slow_viewer_is_skipped_never_waited_on() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let runtime = Runtime::new();
    let server = runtime.server(&[], &[]).await;
    server.terminal(json!({"command": "true"})).await;
    let socket = find_socket(&runtime.xdg()).expect("the server's socket");
    let stream = tokio::net::UnixStream::connect(&socket).await.expect("connect");
    let mut stream = BufReader::new(stream);
    let mut line = String::new();
    stream.read_line(&mut line).await.expect("greeting");
    let request = json!({"op": "attach", "session": "default", "write": false,
        "since_secs": null, "show_secrets": false, "window": null});
    let request = serde_json::to_vec(&request).expect("json");
    stream.get_mut().write_all(&frame_of(b'H', &request)).await.expect("write");
    // Enough to fill the socket, then many more pieces of output than the
    // server keeps for a viewer (each write its own piece, mostly).
    let program = "import os, time\nos.write(1, b'y' * 2000000 + b'\\n')\n\
                   for i in range(8000):\n    os.write(1, b'%d\\n' % i)\n    time.sleep(0.0002)\n";
    let r = server
        .terminal(json!({"command": format!("python3 -c \"{program}\"; echo end"), "timeout": 120}))
        .await;
    assert_eq!(r["status"], "completed", "{r:#?}");
    assert!(r.output().ends_with("7999\nend\n"), "{r:#?}");
    let mut skipped = false;
    let deadline = std::time::Instant::now() + EVENTUALLY;
    while !skipped {
        assert!(std::time::Instant::now() < deadline, "no skipped event");
        let mut head = [0u8; 5];
        tokio::time::timeout(EVENTUALLY, stream.read_exact(&mut head))
            .await
            .expect("a frame in time (no skipped event came)")
            .expect("a frame");
        let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
        let mut payload = vec![0u8; len];
        stream.read_exact(&mut payload).await.expect("its payload");
        if head[0] == b'E' {
            let event: serde_json::Value = serde_json::from_slice(&payload).expect("json");
            skipped = event["event"] == "skipped" && event["taps"].as_u64() > Some(0);
        }
    }
}

/// `--since` replays only the last stretch of output: what came before it
/// is not shown, what comes after is; without it the replay has both.
#[tokio::test]
async fn since_replays_only_the_last_stretch() {
    let runtime = Runtime::new();
    let server = runtime.server(&[], &[]).await;
    let (old, new) = (marker(), marker());
    server.terminal(json!({"command": format!("echo old-{old}")})).await;
    let mut late = Plain::start(&runtime, &["--since", "0.001s"]);
    wait_until(EVENTUALLY, || late.stderr().contains("the last 0s first"), || late.stderr()).await;
    server.terminal(json!({"command": format!("echo new-{new}")})).await;
    late.wait_stdout(&format!("\nnew-{new}\n")).await;
    assert!(!late.stdout().contains(&format!("old-{old}")), "{}", late.stdout());
    let mut all = Plain::start(&runtime, &[]);
    all.wait_stdout(&format!("\nnew-{new}\n")).await;
    assert!(all.stdout().contains(&format!("\nold-{old}\n")), "{}", all.stdout());
    for view in [&mut late, &mut all] {
        view.child.start_kill().expect("kill");
        let _ = view.wait_end().await;
    }
}

/// Asking for a person: a program that reads a password with echo off
/// makes the waiting reply name the exact command a person runs (with
/// `--server`, which two servers make necessary); run as given, it lets
/// the person answer, and the agent's next poll has the program's end.
#[tokio::test]
async fn the_command_the_agent_is_given_lets_a_person_answer() {
    let runtime = Runtime::new();
    let _other = runtime.server(&[], &[]).await;
    let server = runtime.server(&[], &[]).await;
    let r = server
        .terminal(json!({"command": "python3 -c 'import getpass; print(len(getpass.getpass()))'"}))
        .await;
    assert_eq!(r["status"], "waiting_for_input", "{r:#?}");
    let given = r["person_can_answer"].as_str().unwrap_or_else(|| panic!("{r:#?}")).to_owned();
    assert!(r.text.contains(&format!("`{given}`")), "{r:#?}");
    let words: Vec<&str> = given.split_whitespace().collect();
    let ["shellkeep", "attach", args @ ..] = words.as_slice() else { panic!("{given}") };
    assert!(args.contains(&server.pid.to_string().as_str()), "{given}");
    let Some(view) = Tmux::writing(&runtime, args).await else { return };
    view.type_text("hunter2");
    view.press("Enter");
    view.wait_for("\n7\n").await;
    let r = server.terminal(json!({"command": "", "timeout": 20})).await;
    assert_eq!(r["status"], "completed", "{r:#?}");
    assert!(r.output().ends_with("7\n"), "{r:#?}");
    assert!(!format!("{}{}", r.text, r.structured).contains("hunter2"), "{r:#?}");
}

/// A person's command at the idle prompt runs as a command of its own; the
/// agent's next reply shows its output and exit code as output between
/// commands, and says a person typed.
#[tokio::test]
async fn a_persons_command_at_the_prompt_is_reported_to_the_agent() {
    let runtime = Runtime::new();
    let server = runtime.server(&[], &[]).await;
    server.terminal(json!({"command": "true"})).await;
    let Some(view) = Tmux::writing(&runtime, &["--write"]).await else { return };
    let m = marker();
    view.type_text(&format!("echo by-person-{m}; (exit 4)"));
    view.press("Enter");
    view.wait_for(&format!("\nby-person-{m}\n")).await;
    view.press("C-]");
    view.wait_for("detached from default").await;
    let r = server.terminal(json!({"command": "echo agent-again"})).await;
    assert!(r.text.contains(&format!("by-person-{m}")), "{r:#?}");
    assert_eq!(r["person_command_exit_code"], 4, "{r:#?}");
    assert!(r["person_typed"]["keys"].as_u64() > Some(0), "{r:#?}");
    assert!(r.output().ends_with("agent-again\n"), "{r:#?}");
}

/// A view that detaches says so only once the server has let go of the
/// session: keys typed just before the detach key are typed first (the
/// server first has the shell turn its line editing back on for them,
/// which a DEBUG trap makes slow here), and the agent's command sent as
/// soon as "detached" shows runs, never refused as if the person still
/// held the session.
#[tokio::test]
async fn detached_means_the_agent_may_type_again() {
    let runtime = Runtime::new();
    let server = runtime.server(&[], &[]).await;
    let slow = server.terminal(json!({"command": "trap 'sleep 0.3' DEBUG", "timeout": 30})).await;
    assert_eq!(slow["status"], "completed", "{slow:#?}");
    let Some(view) = Tmux::writing(&runtime, &["--write"]).await else { return };
    // Half a line, never run: the agent's line starts by clearing it.
    view.type_text("echo half-typed");
    view.press("C-]");
    view.wait_for("detached from default").await;
    let r = server.terminal(json!({"command": "echo agent-again", "timeout": 30})).await;
    assert_eq!(r["status"], "completed", "{r:#?}");
    assert_eq!(r.output(), "agent-again\n", "{r:#?}");
}
