//! Issue 21: the sandbox through the real binary. Each mode allows what it
//! must and denies what it must (a write outside the workspace, a TCP
//! connect with the network off, tracing the shell, pushing input into its
//! terminal, a signal to the server or its guard), and the reply says when
//! the sandbox was the cause; a session or `run` may only tighten the
//! server's sandbox; interactive work goes on under `workspace-write
//! --network off`; `doctor` and the replies agree on what is enforced.

use std::time::Duration;

use serde_json::{Value, json};

use crate::{EVENTUALLY, Reply, Server, binary, guard_of, installed, marker, poll_until};

/// The flags of a server that runs a day of work: the workspace (its start
/// directory) writable, no network.
const WORKSPACE_OFFLINE: &[&str] = &["--sandbox", "workspace-write", "--network", "off"];

/// The sentence a reply gives a write the sandbox refused.
const WRITE_REFUSED: &str = "[The sandbox, not the program, most likely refused";

/// Asserts that `reply` is a completed command with `exit_code`.
#[track_caller]
fn completed(reply: &Reply, exit_code: i64) {
    assert_eq!(
        (&reply["status"], &reply["exit_code"]),
        (&json!("completed"), &json!(exit_code)),
        "{reply:#?}"
    );
}

/// Asserts that `reply` says the sandbox refused what `denied` names
/// (`write`, `network`, `sudo`), in its text and its fields.
#[track_caller]
fn denied(reply: &Reply, denied: &str) {
    assert_eq!(reply["sandbox_denial"]["denied"], denied, "{reply:#?}");
    let sentence = match denied {
        "sudo" => "[sudo cannot work in the sandbox",
        "signal" => "[The sandbox most likely refused that signal",
        "trace" => "[The sandbox, not the program, most likely refused tracing",
        _ => WRITE_REFUSED,
    };
    assert!(reply.text.contains(sentence), "{}", reply.text);
    let notes = reply["notes"].to_string();
    assert!(notes.contains(&sentence[1..20]), "{reply:#?}");
}

/// Asserts that `reply` carries no sandbox denial.
#[track_caller]
fn not_denied(reply: &Reply) {
    assert!(reply["sandbox_denial"].is_null(), "{reply:#?}");
    assert!(!reply.text.contains("most likely refused"), "{}", reply.text);
}

/// A path outside every workspace the tests give (and outside the
/// sessions' temporary directories): in the system's temporary directory,
/// unique to the test.
fn outside() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("sk-outside-{}", marker()))
}

#[tokio::test]
async fn workspace_write_writes_the_workspace_and_tmpdir_and_nothing_else() {
    let server = Server::with(&["--sandbox", "workspace-write"]).await;
    let inside =
        server.terminal(json!({"command": "echo in > inside.txt && cat inside.txt"})).await;
    completed(&inside, 0);
    assert_eq!(inside.output(), "in\n");
    assert_eq!(std::fs::read_to_string(server.cwd().join("inside.txt")).unwrap(), "in\n");
    not_denied(&inside);
    assert_eq!(inside["sandbox"]["mode"], "workspace-write", "{inside:#?}");
    assert_eq!(inside["sandbox"]["network"], "on", "{inside:#?}");
    assert_eq!(inside["sandbox"]["filesystem"], true, "{inside:#?}");
    assert_eq!(inside["sandbox"]["filter"], true, "{inside:#?}");

    let tmp = server
        .terminal(json!({"command": "echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\" && mktemp"}))
        .await;
    completed(&tmp, 0);
    assert!(tmp.output().starts_with("t\n"), "{tmp:#?}");

    let target = outside();
    let command = format!("touch {}", target.display());
    let refused = server.terminal(json!({ "command": command })).await;
    completed(&refused, 1);
    denied(&refused, "write");
    assert!(refused.text.contains("workspace-write: commands may write only in"), "{refused:#?}");
    assert!(refused.text.contains(&server.cwd().display().to_string()), "{}", refused.text);
    assert!(!target.exists(), "{} was written", target.display());
    // Also beside the workspace, and in the home directory.
    let beside = format!("echo x > {}-beside", server.cwd().display());
    let refused = server.terminal(json!({ "command": beside })).await;
    completed(&refused, 1);
    denied(&refused, "write");
    let home = server.terminal(json!({"command": "mkdir \"$HOME/sk-sandbox-test-$$\""})).await;
    completed(&home, 1);
    denied(&home, "write");

    // `run` is under the same sandbox.
    let run = server.run(json!({ "command": command })).await;
    assert_eq!(run["exitCode"], 1, "{run:#?}");
    denied(&run, "write");
    assert_eq!(run["sandbox"]["mode"], "workspace-write", "{run:#?}");
    let run = server.run(json!({"command": "echo r > run.txt && cat run.txt"})).await;
    assert_eq!((&run["exitCode"], &run["stdout"]), (&json!(0), &json!("r\n")), "{run:#?}");
    assert!(!target.exists());
}

#[tokio::test]
async fn read_only_writes_nowhere_but_its_temporary_directory() {
    let server = Server::with(&["--sandbox", "read-only"]).await;
    let refused = server.terminal(json!({"command": "echo in > inside.txt"})).await;
    completed(&refused, 1);
    denied(&refused, "write");
    assert!(refused.text.contains("read-only: commands may write only in their temporary"));
    assert!(!server.cwd().join("inside.txt").exists());
    assert_eq!(refused["sandbox"]["mode"], "read-only", "{refused:#?}");
    let tmp =
        server.terminal(json!({"command": "echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\""})).await;
    completed(&tmp, 0);
    assert_eq!(tmp.output(), "t\n");
    // Reading is not refused.
    let read =
        server.terminal(json!({"command": "head -c 4 /etc/passwd; echo; ls / >/dev/null"})).await;
    completed(&read, 0);
    let run = server.run(json!({"command": "touch inside.txt"})).await;
    assert_eq!(run["exitCode"], 1, "{run:#?}");
    denied(&run, "write");
    let run = server.run(json!({"command": "echo r > \"$TMPDIR/r\" && cat \"$TMPDIR/r\""})).await;
    assert_eq!((&run["exitCode"], &run["stdout"]), (&json!(0), &json!("r\n")), "{run:#?}");
    // `shellkeep run` on the command line: the same sandbox, the same facts.
    let cli = std::process::Command::new(binary())
        .args(["run", "--sandbox", "read-only", "--", "touch inside.txt"])
        .current_dir(server.cwd())
        .output()
        .expect("shellkeep run");
    let json: Value = serde_json::from_slice(&cli.stdout).expect("JSON");
    assert_eq!(cli.status.code(), Some(1), "{json:#}");
    assert_eq!(json["sandbox"]["mode"], "read-only", "{json:#}");
    assert_eq!(json["sandbox_denial"]["denied"], "write", "{json:#}");
    assert!(
        json["notes"][0].as_str().is_some_and(|n| n.contains("Write under $TMPDIR")),
        "{json:#}"
    );
    assert!(!server.cwd().join("inside.txt").exists());
}

/// Connects to `port` on the loopback from Python, printing `connected`
/// (or Python's error and traceback).
fn connect(port: u16) -> String {
    format!(
        "python3 -c \"import socket\nsocket.create_connection(('127.0.0.1', {port}), \
         timeout=5)\nprint('connected')\""
    )
}

#[tokio::test]
async fn with_the_network_off_a_tcp_connect_is_refused_and_unix_sockets_work() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback listener");
    listener.set_nonblocking(true).expect("non-blocking");
    let port = listener.local_addr().expect("its address").port();
    let server = Server::with(WORKSPACE_OFFLINE).await;
    let refused = server.terminal(json!({"command": connect(port), "timeout": 20})).await;
    completed(&refused, 1);
    assert!(refused.output().contains("PermissionError"), "{refused:#?}");
    assert_eq!(refused["sandbox_denial"]["denied"], "network", "{refused:#?}");
    assert!(refused.text.contains("most likely refused a network socket"), "{}", refused.text);
    assert_eq!(refused["sandbox"]["network"], "off", "{refused:#?}");
    let run = server.run(json!({"command": connect(port)})).await;
    assert_eq!(run["exitCode"], 1, "{run:#?}");
    assert_eq!(run["sandbox_denial"]["denied"], "network", "{run:#?}");
    // UDP too: every socket but Unix ones.
    let udp = "python3 -c \"import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\"";
    completed(&server.terminal(json!({ "command": udp })).await, 1);
    assert!(
        matches!(listener.accept(), Err(err) if err.kind() == std::io::ErrorKind::WouldBlock),
        "the listener was reached"
    );

    // A background server on a Unix socket answers a client of another
    // session.
    let serve = "python3 -c \"import socket\ns=socket.socket(socket.AF_UNIX)\ns.bind('srv.sock')\n\
                 s.listen()\nwhile True:\n c,_=s.accept(); c.sendall(b'pong-unix'); c.close()\"";
    let job =
        server.terminal(json!({"command": serve, "background": true, "session": "srv"})).await;
    assert_eq!(job["status"], "running", "{job:#?}");
    let ask = "python3 -c \"import socket\ns=socket.socket(socket.AF_UNIX)\ns.connect('srv.sock')\n\
               print(s.recv(100).decode())\"";
    let answered = poll_until(
        EVENTUALLY,
        async || server.terminal(json!({"command": ask, "session": "client"})).await,
        |reply| reply["exit_code"] == 0,
    )
    .await;
    assert_eq!(answered.output(), "pong-unix\n", "{answered:#?}");
    not_denied(&answered);

    // A server with the network on lets a command turn it off for itself.
    let open = Server::with(&[]).await;
    let run = open.run(json!({"command": connect(port), "network": "off"})).await;
    assert_eq!(run["sandbox_denial"]["denied"], "network", "{run:#?}");
    assert_eq!(
        (&run["sandbox"]["mode"], &run["sandbox"]["network"]),
        (&json!("off"), &json!("off"))
    );
    let run = open.run(json!({"command": connect(port)})).await;
    assert_eq!((&run["exitCode"], &run["stdout"]), (&json!(0), &json!("connected\n")), "{run:#?}");
    assert!(run["sandbox"].is_null(), "{run:#?}");
}

#[tokio::test]
async fn tracing_the_shell_pushing_input_and_signalling_the_server_are_refused() {
    let server = Server::with(&["--sandbox", "workspace-write"]).await;
    // PTRACE_ATTACH (16) to the shell, from a command it runs.
    let attach = "python3 -c \"import ctypes,os\nlibc=ctypes.CDLL(None, use_errno=True)\n\
                  r=libc.ptrace(16, os.getppid(), 0, 0)\nprint('ptrace', r, os.strerror(ctypes.get_errno()))\"";
    let traced = server.terminal(json!({ "command": attach })).await;
    completed(&traced, 0);
    assert!(traced.output().starts_with("ptrace -1 "), "{traced:#?}");
    // A tracer cannot attach; one that fails is named as the sandbox's.
    for (tracer, program) in [("gdb -batch -p $$ -ex 'print 1'", "gdb"), ("strace -p $$", "strace")]
    {
        if !installed(program) {
            continue;
        }
        let traced = server.terminal(json!({"command": tracer, "timeout": 60})).await;
        assert!(traced.output().contains("Operation not permitted"), "{traced:#?}");
        // gdb goes on and exits 0: no failure, no note.
        if program == "strace" {
            denied(&traced, "trace");
        }
    }
    // TIOCSTI: pushing `echo pushed` into the terminal's input.
    let push = "python3 -c \"import fcntl,termios\nfor c in 'echo pushed-line\\n': fcntl.ioctl(0, termios.TIOCSTI, c.encode())\"";
    let pushed = server.terminal(json!({ "command": push })).await;
    completed(&pushed, 1);
    assert!(pushed.output().contains("Error"), "{pushed:#?}");
    let after = server.terminal(json!({"command": "echo next"})).await;
    completed(&after, 0);
    assert_eq!(after.output(), "next\n", "{after:#?}");
    assert!(!after.text.contains("pushed-line"), "{after:#?}");

    // Signals to the server and its guard.
    let pid = server.pid;
    let guard = guard_of(pid).expect("the server's guard");
    for (target, signal) in [(pid, "TERM"), (pid, "STOP"), (pid, "KILL"), (guard, "KILL")] {
        let command = format!("kill -{signal} {target}");
        let killed = server.terminal(json!({ "command": command })).await;
        completed(&killed, 1);
        assert!(killed.output().contains("Operation not permitted"), "{killed:#?}");
        denied(&killed, "signal");
    }
    assert!(crate::alive(pid) && crate::alive(guard));
    completed(&server.terminal(json!({"command": "true"})).await, 0);
    assert!(!server.log().contains("ignored SIGTERM"), "{}", server.log());
}

#[tokio::test]
async fn a_session_or_run_may_only_tighten_the_servers_sandbox() {
    let server = Server::with(WORKSPACE_OFFLINE).await;
    for (args, tool) in [
        (json!({"command": "true", "session": "loose", "sandbox": "off"}), "terminal"),
        (json!({"command": "true", "session": "loose", "network": "on"}), "terminal"),
        (json!({"command": "true", "sandbox": "off"}), "run"),
        (json!({"command": "true", "network": true}), "run"),
    ] {
        let refused = server.call(tool, args.clone()).await;
        assert!(refused.is_error, "{args}: {refused:#?}");
        assert!(
            refused.text.contains("This server runs with --sandbox workspace-write --network off"),
            "{args}: {}",
            refused.text
        );
    }
    let sessions = server.call("sessions", json!({})).await;
    assert!(!sessions.structured.to_string().contains("loose"), "{sessions:#?}");

    // Stricter is fine; the session keeps its own, and a later call that
    // asks for another is told so.
    let strict = json!({"command": "touch inside.txt", "session": "ro", "sandbox": "read-only"});
    let strict = server.terminal(strict).await;
    completed(&strict, 1);
    denied(&strict, "write");
    assert_eq!(strict["sandbox"]["mode"], "read-only", "{strict:#?}");
    let again = json!({"command": "true", "session": "ro", "sandbox": "workspace-write"});
    let again = server.terminal(again).await;
    completed(&again, 0);
    assert!(
        again.text.contains("sandbox and network apply only to the call that starts a session")
    );
    assert_eq!(again["sandbox"]["mode"], "read-only", "{again:#?}");
    let run = server.run(json!({"command": "touch inside.txt", "sandbox": "read-only"})).await;
    denied(&run, "write");
    // The listing says each session's.
    let listed = server.call("sessions", json!({})).await;
    let row = |name: &str| {
        listed["sessions"]
            .as_array()
            .and_then(|rows| rows.iter().find(|r| r["name"] == name))
            .cloned()
    };
    assert_eq!(row("ro").expect("ro is listed")["sandbox"], "read-only, network off");
    assert!(listed.text.contains("sandbox read-only, network off"), "{}", listed.text);
    // A background job may ask for a stricter sandbox too.
    let job = json!({"command": "touch inside.txt; sleep 2", "background": true,
                     "session": "job", "sandbox": "read-only"});
    let job = server.terminal(job).await;
    assert_eq!(job["sandbox"]["mode"], "read-only", "{job:#?}");
    let refused = json!({"command": "sleep 1", "background": true, "network": "on"});
    assert!(server.terminal(refused).await.is_error);
    // The default session is the server's.
    let default = server.terminal(json!({"command": "touch inside.txt"})).await;
    completed(&default, 0);
    assert_eq!(default["sandbox"]["mode"], "workspace-write", "{default:#?}");

    // A server without a sandbox: a session may ask for one; the others
    // have none.
    let open = Server::with(&[]).await;
    let ro = open
        .terminal(json!({"command": "touch inside.txt", "session": "ro", "sandbox": "read-only"}))
        .await;
    completed(&ro, 1);
    denied(&ro, "write");
    let plain = open.terminal(json!({"command": "touch inside.txt"})).await;
    completed(&plain, 0);
    assert!(plain["sandbox"].is_null(), "{plain:#?}");
    not_denied(&plain);
    let listed = open.call("sessions", json!({})).await;
    let rows = listed["sessions"].as_array().cloned().unwrap_or_default();
    let sandboxes: Vec<(&Value, &Value)> =
        rows.iter().map(|r| (&r["name"], &r["sandbox"])).collect();
    assert_eq!(
        sandboxes,
        [(&json!("default"), &Value::Null), (&json!("ro"), &json!("read-only, network on"))]
    );
}

/// Every tool's reply carries `sandbox` on a confined server, and none on
/// a server without one.
#[tokio::test]
async fn every_reply_of_a_confined_server_says_what_is_enforced() {
    let server = Server::with(&["--network", "off"]).await;
    let replies = [
        server.terminal(json!({"command": "echo hi"})).await,
        server.run(json!({"command": "echo hi"})).await,
        server.call("sessions", json!({})).await,
        server.call("output", json!({})).await,
        server.call("policy_explain", json!({"command": "make"})).await,
        server.terminal(json!({"command": "true", "session": "x"})).await,
        server.call("session_close", json!({"session": "x"})).await,
    ];
    for reply in &replies {
        assert_eq!(reply["sandbox"]["network"], "off", "{reply:#?}");
        assert_eq!(reply["sandbox"]["mode"], "off", "{reply:#?}");
        assert_eq!(reply["sandbox"]["filter"], true, "{reply:#?}");
    }
    // The descriptions say it too.
    let tools = server.client().list_all_tools().await.expect("tools/list");
    for tool in tools.iter().filter(|tool| ["terminal", "run"].contains(&tool.name.as_ref())) {
        let description = tool.description.as_deref().unwrap_or_default();
        assert!(
            description.contains(
                "Sandbox (enforced by the kernel): off: commands may write \
                                  wherever the server's user may; the network is off"
            ),
            "{description}"
        );
    }
    // The same from the environment, with a workspace of two directories.
    let extra = std::env::temp_dir().join(format!("sk-writable-{}", marker()));
    std::fs::create_dir_all(&extra).expect("a second workspace directory");
    let from_env = Server::with_env(
        &[],
        &[
            ("SHELLKEEP_SANDBOX", "workspace-write"),
            ("SHELLKEEP_NETWORK", "off"),
            ("SHELLKEEP_WRITABLE", &format!("{}:.", extra.display())),
        ],
    )
    .await;
    let write =
        format!("echo a > {}/a && echo b > b && cat {}/a b", extra.display(), extra.display());
    let reply = from_env.terminal(json!({ "command": write })).await;
    let _ = std::fs::remove_dir_all(&extra);
    completed(&reply, 0);
    assert_eq!(reply.output(), "a\nb\n", "{reply:#?}");
    assert_eq!(
        (&reply["sandbox"]["mode"], &reply["sandbox"]["network"]),
        (&json!("workspace-write"), &json!("off"))
    );

    let open = Server::with(&[]).await;
    let reply = open.terminal(json!({"command": "echo hi"})).await;
    assert!(reply["sandbox"].is_null(), "{reply:#?}");
    let tools = open.client().list_all_tools().await.expect("tools/list");
    assert!(
        tools.iter().all(|tool| !tool
            .description
            .as_deref()
            .unwrap_or_default()
            .contains("Sandbox ("))
    );
}

#[tokio::test]
async fn sudo_cannot_gain_privileges_and_the_reply_says_why() {
    if !installed("sudo") || !installed("setpriv") {
        return;
    }
    let server = Server::with(&["--sandbox", "workspace-write"]).await;
    // As root, sudo gains nothing, so it runs as nobody to need privileges.
    let command = "if [ \"$(id -u)\" = 0 ]; then setpriv --reuid=65534 --regid=65534 \
                   --clear-groups sudo -n true; else sudo -n true; fi";
    let reply = server.terminal(json!({ "command": command })).await;
    completed(&reply, 1);
    assert!(reply.output().contains("no new privileges"), "{reply:#?}");
    denied(&reply, "sudo");
}

/// `doctor` and a best-effort server's replies agree on what this kernel
/// does not enforce; without `--sandbox-best-effort`, a server that would
/// miss something does not start, naming it.
#[tokio::test]
async fn what_is_not_enforced_stops_start_up_unless_best_effort_and_is_said() {
    let doctor = std::process::Command::new(binary())
        .args(["doctor", "--sandbox", "workspace-write", "--network", "off"])
        .output()
        .expect("doctor runs");
    let text = String::from_utf8_lossy(&doctor.stdout).into_owned();
    assert!(doctor.status.success(), "{text}");
    let line = text.lines().find(|line| line.starts_with("sandbox: ")).expect("a sandbox line");
    assert!(line.contains("workspace-write"), "{text}");
    assert!(text.contains("  read-only with network off: "), "{text}");
    if !line.contains("FAILS") {
        // What the sandbox's filter closes is no longer said to be open.
        assert!(
            text.contains("its filter denies TIOCSTI") || text.contains("legacy TIOCSTI: off"),
            "{text}"
        );
        assert!(text.contains("the sandbox's filter denies commands every signal"), "{text}");
    }
    let server = Server::with(&[
        "--sandbox",
        "workspace-write",
        "--network",
        "off",
        "--sandbox-best-effort",
    ])
    .await;
    let reply = server.terminal(json!({"command": "true"})).await;
    completed(&reply, 0);
    let not_enforced: Vec<String> = reply["sandbox"]["not_enforced"]
        .as_array()
        .map(|list| list.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default();
    for missing in &not_enforced {
        assert!(line.contains(missing.as_str()), "doctor: {line}\nreply: {reply:#?}");
    }
    if line.contains("FAILS") {
        // Without best effort the server refuses to start, saying why.
        let started = std::process::Command::new(binary())
            .args(["--sandbox", "workspace-write", "--network", "off"])
            .stdin(std::process::Stdio::null())
            .output()
            .expect("the server runs");
        let stderr = String::from_utf8_lossy(&started.stderr);
        assert_eq!(started.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(&not_enforced[0]), "{stderr}");
    } else {
        assert!(!line.contains("NOT enforced") || !not_enforced.is_empty(), "{line}");
    }
}

/// Writes a wheel of a one-module package (`skdemo`, version 1.0) to
/// `dir`, by hand (no build backend, no network), and returns its name.
fn write_wheel(dir: &std::path::Path) -> String {
    let name = "skdemo-1.0-py3-none-any.whl";
    let script = format!(
        "import zipfile\nz=zipfile.ZipFile({:?},'w')\n\
         z.writestr('skdemo.py','ANSWER = 42\\n')\n\
         z.writestr('skdemo-1.0.dist-info/METADATA','Metadata-Version: 2.1\\nName: skdemo\\nVersion: 1.0\\n')\n\
         z.writestr('skdemo-1.0.dist-info/WHEEL','Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n')\n\
         z.writestr('skdemo-1.0.dist-info/RECORD','')\nz.close()\n",
        dir.join(name).display().to_string()
    );
    let made =
        std::process::Command::new("python3").arg("-c").arg(script).output().expect("python3");
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    name.to_owned()
}

#[tokio::test]
async fn interactive_work_goes_on_under_workspace_write_without_network() {
    let server =
        Server::with_env(WORKSPACE_OFFLINE, &[("DEPLOY_TOKEN", "tok-sandbox-secret-42")]).await;
    let wait =
        |reply: &Reply| reply["status"] == "waiting_for_input" || reply["status"] == "running";

    // vim: write a file and leave.
    let vim = server.terminal(json!({"command": "vim -u NONE notes.txt", "timeout": 10})).await;
    assert!(wait(&vim), "{vim:#?}");
    let keys = json!({"keys": ["i", "hello from vim", "ESC", ":wq", "ENTER"], "timeout": 10});
    completed(&server.terminal(keys).await, 0);
    assert_eq!(
        std::fs::read_to_string(server.cwd().join("notes.txt")).unwrap(),
        "hello from vim\n"
    );

    // less, then q.
    let less = server.terminal(json!({"command": "seq 1 500 | less", "timeout": 10})).await;
    assert!(wait(&less), "{less:#?}");
    completed(&server.terminal(json!({"keys": ["q"], "timeout": 10})).await, 0);

    // The Python REPL.
    let repl = server.terminal(json!({"command": "python3 -q", "timeout": 10})).await;
    assert!(wait(&repl), "{repl:#?}");
    let answer =
        server.terminal(json!({"command": "print(6 * 7)", "is_input": true, "timeout": 10})).await;
    assert!(answer.output().contains("42"), "{answer:#?}");
    completed(
        &server.terminal(json!({"command": "C-d", "is_input": true, "timeout": 10})).await,
        0,
    );

    // git: a repository in the workspace, a commit.
    let git = "git init -q repo && cd repo && git config user.email t@example.com && \
               git config user.name T && echo a > a && git add a && git commit -q -m first && \
               git log --oneline | wc -l && cd ..";
    let git = server.terminal(json!({"command": git, "timeout": 60})).await;
    completed(&git, 0);
    assert_eq!(git.output().trim(), "1", "{git:#?}");

    // pip install --target of a local wheel, inside the workspace.
    let wheel = write_wheel(server.cwd());
    // The interpreter itself, not a version manager's shim (which would
    // write its own files after an install).
    let pip = format!(
        "py=$(python3 -c 'import sys; print(sys.executable)') && $py -m pip install -q --no-index --no-cache-dir --disable-pip-version-check \
         --target site {wheel} && PYTHONPATH=site $py -c 'import skdemo; print(skdemo.ANSWER)'"
    );
    let pip = server.terminal(json!({"command": pip, "timeout": 120})).await;
    completed(&pip, 0);
    assert!(pip.output().ends_with("42\n"), "{pip:#?}");

    // C-c, job control, a nested shell, a background job.
    let sleeping = format!("sleep 300.{}", marker());
    let running = server.terminal(json!({"command": sleeping, "timeout": 1})).await;
    assert_eq!(running["status"], "running", "{running:#?}");
    let stopped = server.terminal(json!({"command": "C-c", "is_input": true, "timeout": 10})).await;
    assert_eq!(stopped["exit_code"], 130, "{stopped:#?}");
    // The job's status, not bash's `Terminated` notice: bash prints that
    // only if `wait` finds the job still running (when the shell reaps it
    // first, a plain interactive bash prints nothing either).
    let jobs = server
        .terminal(json!({"command": "sleep 60 & jobs | wc -l; kill %1; wait $!; echo \"done $?\""}))
        .await;
    completed(&jobs, 0);
    assert!(jobs.output().contains("\n1\n") && jobs.output().contains("done 143"), "{jobs:#?}");
    let nested = server.terminal(json!({"command": "bash --norc", "timeout": 10})).await;
    assert_ne!(nested["status"], "not_executed", "{nested:#?}");
    let inner = server.terminal(json!({"command": "echo level $SHLVL", "timeout": 10})).await;
    assert!(inner.output().contains("level"), "{inner:#?}");
    completed(&server.terminal(json!({"command": "exit", "timeout": 10})).await, 0);
    let job =
        json!({"command": "for i in 1 2 3; do echo tick $i; sleep 0.2; done", "background": true});
    let job = server.terminal(job).await;
    let name = job["session"].as_str().expect("a job session").to_owned();
    poll_until(
        EVENTUALLY,
        async || server.call("output", json!({"session": name})).await,
        |page| page["lines"].as_str().is_some_and(|lines| lines.contains("tick 3")),
    )
    .await;

    // `output` reads a cut reply back; masking holds.
    let cut = server.terminal(json!({"command": "seq 1 100000", "timeout": 60})).await;
    let page = server.call("output", cut["output_call"].clone()).await;
    assert!(page["lines"].as_str().is_some_and(|lines| !lines.is_empty()), "{page:#?}");
    let masked = server.terminal(json!({"command": "echo $DEPLOY_TOKEN"})).await;
    assert!(!masked.text.contains("tok-sandbox-secret-42"), "{masked:#?}");
    assert!(masked.output().contains("<secret-hidden>"), "{masked:#?}");

    // doctor, run inside the sandbox.
    let doctor = format!("{} doctor >/dev/null 2>&1; echo $?", binary().display());
    let doctor = server.terminal(json!({"command": doctor, "timeout": 60})).await;
    assert_eq!(doctor.output().trim(), "0", "{doctor:#?}");
}

/// Issue 21: a server SIGKILL leaves nothing of a sandboxed session or
/// `run` command: the guard (outside the sandbox) stops what they started,
/// however it left their groups, and their private temporary directories
/// go with them.
#[tokio::test]
async fn a_server_sigkill_leaves_nothing_of_a_sandboxed_session_or_run() {
    let mut server = Server::with(WORKSPACE_OFFLINE).await;
    let markers: Vec<String> = (0..5).map(|_| marker()).collect();
    let [a, b, c, d, e] = &markers[..] else { unreachable!() };
    let shell = format!(
        "echo \"$TMPDIR\" > shell-tmp; (sleep 300.{a} &); setsid sleep 300.{b} & \
         nohup sleep 300.{c} >/dev/null 2>&1 & echo started"
    );
    let started = server.terminal(json!({ "command": shell })).await;
    completed(&started, 0);
    let peer = server.peer();
    let run = format!("echo \"$TMPDIR\" > run-tmp; (sleep 300.{d} &); sleep 300.{e}");
    let call = tokio::spawn(async move {
        crate::call_with(&peer, "run", json!({"command": run, "timeout_sec": 240})).await
    });
    let names: Vec<&str> = markers.iter().map(String::as_str).collect();
    crate::wait_alive(&names).await;
    let temporary = |file: &str| {
        let text = std::fs::read_to_string(server.cwd().join(file)).unwrap_or_default();
        std::path::PathBuf::from(text.trim())
    };
    // `run`'s bash carries the markers in its command line before it has
    // written its file: wait for the file.
    crate::wait_until(
        Duration::from_secs(15),
        || !temporary("run-tmp").as_os_str().is_empty(),
        || "run-tmp was not written".to_owned(),
    )
    .await;
    let (shell_tmp, run_tmp) = (temporary("shell-tmp"), temporary("run-tmp"));
    assert!(shell_tmp.is_dir() && run_tmp.is_dir(), "{shell_tmp:?} {run_tmp:?}");
    let guard = guard_of(server.pid).expect("the server runs an orphan guard");

    server.signal("KILL");
    server.wait_exit(Duration::from_secs(20)).await;
    crate::assert_none_survive(&names, Duration::from_secs(15)).await;
    crate::wait_until(
        Duration::from_secs(15),
        || !crate::alive(guard),
        || format!("the guard {guard} is still running"),
    )
    .await;
    crate::wait_until(
        Duration::from_secs(15),
        || !shell_tmp.exists() && !run_tmp.exists(),
        || {
            format!(
                "left behind: {shell_tmp:?} {}, {run_tmp:?} {}",
                shell_tmp.exists(),
                run_tmp.exists()
            )
        },
    )
    .await;
    call.abort();
}
