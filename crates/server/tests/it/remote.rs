//! Remote and interactive sessions left alone: a program blocked on a wait
//! that holds the terminal, using no CPU (an `ssh` session, a client that
//! also holds a connected socket), is not a hang and survives the
//! unwatched-time limit; a program blocked on a socket or a pipe alone, or
//! spinning, is still stopped. A menu that answers a key and waits again
//! with a socket open comes back within about 3 s. The `ssh` test starts
//! an `sshd` of its own on a free port (it needs `openssh-server`; in CI,
//! where `CI=true`, its absence fails the test).

use serde_json::{Value, json};

use crate::{EVENTUALLY, Reply, Scratch, Server, poll_until, wait_until};

/// A server whose default category allows 2 s of unwatched time.
async fn short_limits() -> (Server, Scratch) {
    let dir = Scratch::new();
    let server = Server::with(&["--policy", &dir.short_policy(), "--grace", "1"]).await;
    (server, dir)
}

/// Python that opens a connected TCP socket (a peer that may send at any
/// time, as ssh's server does) and then runs `body`.
fn with_socket(body: &str) -> String {
    format!(
        "python3 -c 'import socket, select, sys, os\n\
         l = socket.socket(); l.bind((\"127.0.0.1\", 0)); l.listen(1)\n\
         c = socket.create_connection(l.getsockname()); a, _ = l.accept()\n\
         {body}'"
    )
}

/// A program that waits on the terminal and a connected socket, and
/// answers each line it reads.
fn remote_like() -> String {
    with_socket(
        "print(\"ready\", flush=True)\n\
         while True:\n    \
             r, _, _ = select.select([sys.stdin, c], [], [])\n    \
             if sys.stdin in r: print(\"got\", sys.stdin.readline().strip(), flush=True)",
    )
}

/// The row of session `name` in a `sessions` listing.
fn row<'a>(listing: &'a Reply, name: &str) -> &'a Value {
    listing["sessions"]
        .as_array()
        .and_then(|rows| rows.iter().find(|row| row["name"] == name))
        .unwrap_or(&Value::Null)
}

/// Starts each command in a session of its own and waits until every one
/// of them has been stopped by the unwatched-time limit (its session is no
/// longer running: `sessions` does not count as a look at them).
async fn all_stopped(server: &Server, commands: &[(&str, &str)]) {
    for (session, command) in commands {
        let r =
            server.terminal(json!({"command": command, "session": session, "timeout": 0.5})).await;
        assert_eq!(r["status"], "running", "{session}: {r:#?}");
    }
    poll_until(
        EVENTUALLY,
        async || server.call("sessions", json!({})).await,
        |listing| commands.iter().all(|(session, _)| row(listing, session)["state"] == "finished"),
    )
    .await;
    for (session, _) in commands {
        let r = server.terminal(json!({"command": "", "session": session})).await;
        assert_eq!(r["status"], "killed", "{session}: {r:#?}");
        assert_eq!(r["timeout_reason"], "exec_timeout", "{session}: {r:#?}");
    }
}

/// Issue 18: a program waiting on the terminal and a connected socket (as
/// ssh, `docker exec -it`) left alone for more than twice the limit
/// survives and still answers; a program blocked on a socket alone, on a
/// pipe alone, or polling the terminal in a busy loop, is stopped meanwhile.
#[tokio::test]
async fn a_client_waiting_on_the_terminal_and_a_socket_is_not_a_hang() {
    let (server, _dir) = short_limits().await;
    let r = server.terminal(json!({"command": remote_like(), "timeout": 1})).await;
    assert_eq!(r["status"], "running", "not a sure prompt, so running: {r:#?}");
    assert!(r.output().contains("ready"), "{r:#?}");
    // Two waves of real hangs, each stopped after its 2 s: the client above
    // has been left alone for more than twice its limit by then.
    let socket_alone = with_socket("c.recv(1)");
    let pipe_alone = "python3 -c 'import os; r, w = os.pipe(); os.read(r, 1)'";
    all_stopped(&server, &[("socket", &socket_alone), ("pipe", pipe_alone)]).await;
    let spinning =
        "python3 -c 'import select, sys\nwhile True: select.select([sys.stdin], [], [], 0)'";
    let spinning_socket = with_socket("while True: select.select([sys.stdin, c], [], [], 0)");
    all_stopped(&server, &[("spin", spinning), ("spin-socket", &spinning_socket)]).await;
    let listing = server.call("sessions", json!({})).await;
    assert_eq!(row(&listing, "default")["state"], "running", "{listing:#?}");
    let r = server.terminal(json!({"command": "hello", "is_input": true, "timeout": 5})).await;
    assert_eq!(r["status"], "running", "{r:#?}");
    assert!(r.output().contains("got hello"), "{r:#?}");
    let r = server.terminal(json!({"command": "C-c", "is_input": true})).await;
    assert_eq!(r["status"], "completed", "{r:#?}");
}

/// A menu that draws its choices, marks the selected one, and redraws the
/// whole list on each arrow key (cursor up over it, erase below), leaving
/// the cursor on a blank line, with a connected socket open as a Node CLI
/// keeps its keep-alive connections.
fn socket_menu() -> String {
    with_socket(
        "import tty, termios\n\
         choices = [\"vanilla\", \"react\", \"vue\"]; at = 0\n\
         old = termios.tcgetattr(0); tty.setcbreak(0)\n\
         def draw(first):\n    \
             out = \"\" if first else \"\\x1b[4A\\r\\x1b[J\"\n    \
             out += \"? Select a framework:\\r\\n\"\n    \
             for i, name in enumerate(choices): out += (\"> \" if i == at else \"  \") + name + \"\\r\\n\"\n    \
             sys.stdout.write(out); sys.stdout.flush()\n\
         draw(True)\n\
         try:\n    \
             while True:\n        \
                 r, _, _ = select.select([0, c], [], [])\n        \
                 key = os.read(0, 8)\n        \
                 if key in (b\"\\r\", b\"\\n\"): print(\"chose\", choices[at]); break\n        \
                 if key == b\"\\x1b[B\": at = min(at + 1, 2)\n        \
                 if key == b\"\\x1b[A\": at = max(at - 1, 0)\n        \
                 draw(False)\n\
         finally: termios.tcsetattr(0, termios.TCSADRAIN, old)",
    )
}

/// Issue 18: a menu that redraws on a key and waits again, with a socket
/// open and the cursor on a blank line, is handed back within about 3 s of
/// going quiet (not the 30 s silence rule), as running.
#[tokio::test]
async fn a_menu_holding_a_socket_comes_back_soon_after_each_key() {
    let server = Server::start().await;
    // Drawn by the call that started it, in key mode: back after the short
    // quiet too, well before the call's timeout.
    let r = server.terminal(json!({"command": socket_menu(), "timeout": 60})).await;
    assert_eq!(r["wait_ended"], "no_new_output", "{r:#?}");
    assert!(r.output().contains("> vanilla"), "{r:#?}");
    for expected in ["> react", "> vue"] {
        // With a long timeout only the short-quiet rule ends the wait
        // before it (as no new output); the silence rule would take 30 s.
        let r = server.terminal(json!({"keys": ["DOWN"], "timeout": 60})).await;
        assert_eq!(r["status"], "running", "{r:#?}");
        assert_eq!(r["wait_ended"], "no_new_output", "{r:#?}");
        assert!(r.output().contains(expected), "{r:#?}");
    }
    let r = server.terminal(json!({"keys": ["ENTER"]})).await;
    assert_eq!(r["status"], "completed", "{r:#?}");
    assert!(r.output().contains("chose vue"), "{r:#?}");
}

/// Issue 18: a quiet client holding a socket, after a finished line, in
/// line mode (`ssh host make` between two steps), is not handed back by the
/// short-quiet rule, neither by the call that started it nor by a poll
/// without input: the call's timeout (or the silence rule) decides.
#[tokio::test]
async fn a_quiet_client_without_input_waits_out_the_calls_timeout() {
    let server = Server::start().await;
    let r = server.terminal(json!({"command": remote_like(), "timeout": 6})).await;
    assert_eq!(r["wait_ended"], "timeout", "{r:#?}");
    assert!(r.output().contains("ready"), "{r:#?}");
    let r = server.terminal(json!({"command": "", "timeout": 6})).await;
    assert_eq!(r["status"], "running", "{r:#?}");
    assert_eq!(r["wait_ended"], "timeout", "{r:#?}");
}

/// An OpenSSH server of the test's own on a free local port, with its own
/// host key and one authorized client key, stopped when dropped.
struct Sshd {
    child: std::process::Child,
    port: u16,
    /// The client's private key.
    key: std::path::PathBuf,
}

impl Sshd {
    /// Starts `sshd` in `dir`; `None` when this machine has no `sshd`,
    /// unless the tests run in CI (`CI=true`), where that fails the test:
    /// CI installs `openssh-server` so that this test runs.
    fn start(dir: &std::path::Path) -> Option<Sshd> {
        let sshd = std::path::Path::new("/usr/sbin/sshd");
        if !sshd.exists() {
            crate::skipping("no /usr/sbin/sshd (install openssh-server)");
            return None;
        }
        // sshd running as root wants its privilege separation directory.
        if nix::unistd::geteuid().is_root() {
            std::fs::create_dir_all("/run/sshd").expect("create /run/sshd");
        }
        for name in ["host", "id"] {
            let status = std::process::Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                .arg(dir.join(name))
                .status()
                .expect("run ssh-keygen");
            assert!(status.success(), "ssh-keygen failed");
        }
        std::fs::copy(dir.join("id.pub"), dir.join("authorized_keys")).expect("authorize the key");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        let config = format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {host}\nAuthorizedKeysFile {keys}\n\
             PidFile {dir}/sshd.pid\nStrictModes no\nPasswordAuthentication no\n\
             KbdInteractiveAuthentication no\nUsePAM no\nPermitRootLogin yes\n",
            host = dir.join("host").display(),
            keys = dir.join("authorized_keys").display(),
            dir = dir.display(),
        );
        std::fs::write(dir.join("sshd_config"), config).expect("write sshd_config");
        let child = std::process::Command::new(sshd)
            .args(["-D", "-e", "-f"])
            .arg(dir.join("sshd_config"))
            .stderr(std::fs::File::create(dir.join("sshd.log")).expect("sshd log"))
            .spawn()
            .expect("start sshd");
        Some(Sshd { child, port, key: dir.join("id") })
    }

    /// The `ssh` command line that logs in to it as the current user.
    fn login(&self) -> String {
        format!(
            "ssh -F /dev/null -i {} -p {} -o StrictHostKeyChecking=no \
             -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o BatchMode=yes \
             {}@127.0.0.1",
            self.key.display(),
            self.port,
            nix::unistd::User::from_uid(nix::unistd::geteuid())
                .ok()
                .flatten()
                .map_or_else(|| "root".to_owned(), |user| user.name),
        )
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Issue 18: a real `ssh` session at its remote prompt, left alone for more
/// than twice the unwatched-time limit, survives with its remote state; a
/// real hang started meanwhile is stopped.
#[tokio::test]
async fn an_idle_ssh_session_survives_twice_the_limit() {
    let (server, dir) = short_limits().await;
    let Some(sshd) = Sshd::start(&dir.path) else { return };
    wait_until(
        EVENTUALLY,
        || std::net::TcpStream::connect(("127.0.0.1", sshd.port)).is_ok(),
        || std::fs::read_to_string(dir.path.join("sshd.log")).unwrap_or_default(),
    )
    .await;
    let r = server.terminal(json!({"command": sshd.login(), "timeout": 1})).await;
    assert_eq!(r["status"], "running", "{r:#?}");
    // The remote shell keeps state: a variable set before the pause.
    let r = poll_until(
        EVENTUALLY,
        async || {
            server
                .terminal(json!({"command": "REMOTE=$((6*7)); echo set-$REMOTE", "is_input": true}))
                .await
        },
        |r| r.output().contains("set-42") || r["status"] != "running",
    )
    .await;
    assert!(r.output().contains("set-42"), "{r:#?}\n{}", server.log());
    let hang = with_socket("c.recv(1)");
    all_stopped(&server, &[("hang1", &hang)]).await;
    all_stopped(&server, &[("hang2", &hang)]).await;
    let r = server.terminal(json!({"command": "echo still-$REMOTE", "is_input": true})).await;
    assert_eq!(r["status"], "running", "{r:#?}");
    assert!(r.output().contains("still-42"), "{r:#?}");
    let r = server.terminal(json!({"command": "exit", "is_input": true, "timeout": 10})).await;
    assert_eq!(r["status"], "completed", "{r:#?}");
}

/// A Node menu as clack and inquirer draw one: raw mode, keypress events,
/// the whole list redrawn on each arrow key with the cursor left on a blank
/// line, and a connected socket open (npm's keep-alive connections).
const NODE_MENU: &str = r#"
const net = require('net'), readline = require('readline');
const choices = ['vanilla', 'react', 'vue'];
let at = 0;
const draw = (first) => process.stdout.write((first ? '' : '\x1b[4A\r\x1b[J') +
  '? Select a framework:\n' + choices.map((c, i) => (i === at ? '> ' : '  ') + c + '\n').join(''));
const server = net.createServer(() => {}).listen(0, '127.0.0.1', () => {
  const socket = net.connect(server.address().port, '127.0.0.1', () => {
    readline.emitKeypressEvents(process.stdin);
    process.stdin.setRawMode(true);
    draw(true);
    process.stdin.on('keypress', (_, key) => {
      if (key.name === 'return') {
        process.stdin.setRawMode(false);
        console.log('chose ' + choices[at]);
        process.exit(0);
      }
      if (key.name === 'down') at = Math.min(at + 1, 2);
      if (key.name === 'up') at = Math.max(at - 1, 0);
      draw(false);
    });
  });
});
"#;

/// Issue 18: a Node menu with a socket open answers each key within the
/// short quiet, not the 30 s silence rule. Skipped without `node`.
#[tokio::test]
async fn a_node_menu_comes_back_soon_after_each_key() {
    if !crate::installed("node") {
        return;
    }
    let server = Server::start().await;
    std::fs::write(server.cwd().join("menu.js"), NODE_MENU).expect("write the menu");
    let r = server.terminal(json!({"command": "node menu.js", "timeout": 60})).await;
    assert_eq!(r["wait_ended"], "no_new_output", "{r:#?}");
    assert!(r.output().contains("> vanilla"), "{r:#?}");
    for (key, expected) in [("DOWN", "> react"), ("DOWN", "> vue"), ("UP", "> react")] {
        let r = server.terminal(json!({"keys": [key], "timeout": 60})).await;
        assert_eq!(r["status"], "running", "{r:#?}");
        assert_eq!(r["wait_ended"], "no_new_output", "{r:#?}");
        assert!(r.output().contains(expected), "{r:#?}");
    }
    let r = server.terminal(json!({"keys": ["ENTER"]})).await;
    assert_eq!(r["status"], "completed", "{r:#?}");
    assert!(r.output().contains("chose react"), "{r:#?}");
}

/// Issue 18: a program that was answered and then waits on the terminal,
/// a socket and a child still at work (as apt waits on dpkg, with npm's
/// sockets open; the child in a session of its own, so only the pipe it
/// writes says it works) is not handed back by the short quiet after its
/// finished line: the call sees it to its end.
#[tokio::test]
async fn an_answered_program_whose_child_works_is_seen_to_its_end() {
    let server = Server::start().await;
    let program = with_socket(
        "import subprocess\n\
         input(\"go? \")\n\
         child = subprocess.Popen([\"sh\", \"-c\", \"sleep 4; echo child-done\"], \
         stdout=subprocess.PIPE, start_new_session=True)\n\
         print(\"working\", flush=True)\n\
         select.select([sys.stdin, c, child.stdout], [], [])\n\
         print(child.stdout.read().decode().strip(), flush=True)",
    );
    let r = server.terminal(json!({"command": program})).await;
    assert_eq!(r["status"], "waiting_for_input", "{r:#?}");
    let r = server.terminal(json!({"command": "y", "is_input": true, "timeout": 20})).await;
    assert_eq!(r["status"], "completed", "{r:#?}");
    assert!(r.output().contains("working") && r.output().contains("child-done"), "{r:#?}");
}
