//! Issue 18 (m6): every override of the non-interactive environment works
//! as the table in the docs writes it, in a real terminal session. A pager
//! that pages leaves the command running on the terminal until `q`; one
//! that does not lets it complete. A prompt asked for comes back as a
//! wait for input; one turned off fails at once. (The editors,
//! `GIT_EDITOR=vim git commit` and `git -c core.editor=vim commit`, are
//! tested in `traps.rs`.)

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::json;

use crate::{EVENTUALLY, Reply, Server, poll_until};

/// Whether `program` is on the tests' `PATH`.
fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|d| d.join(program).is_file()))
}

/// Runs `command` and checks that it completed with `code`.
async fn completes(server: &Server, command: &str, code: i64) -> Reply {
    let r = server.terminal(json!({"command": command, "timeout": 30})).await;
    assert_eq!(
        (r["status"].as_str(), r["exit_code"].as_i64()),
        (Some("completed"), Some(code)),
        "{command} should not wait: {r:#?}"
    );
    r
}

/// Runs `command`, checks that it is held by its pager (still running, its
/// first page on the screen, containing `shown`), quits the pager with the key `q`
/// and checks that the command then completes with exit code 0.
async fn pages(server: &Server, command: &str, shown: &str) {
    let r = server.terminal(json!({"command": command, "timeout": 10})).await;
    assert_eq!(r["exit_code"], -1, "{command} should page: {r:#?}");
    assert!(r.text.contains(shown), "{command}: {shown} not shown: {r:#?}");
    let mut r = server.terminal(json!({"keys": ["q"], "timeout": 10})).await;
    if r["status"] == "running" {
        r = poll_until(
            EVENTUALLY,
            async || server.terminal(json!({"command": "", "timeout": 5})).await,
            |r| r["status"] != "running",
        )
        .await;
    }
    assert_eq!(
        (&r["status"], &r["exit_code"]),
        (&json!("completed"), &json!(0)),
        "{command} after q: {r:#?}"
    );
}

/// Runs `command`, checks that it is held at `prompt` (the last thing it
/// printed; a program that also holds a connected socket may be reported
/// as running rather than waiting for input), and stops it with C-c.
async fn prompts(server: &Server, command: &str, prompt: &str) {
    let r = server.terminal(json!({"command": command, "timeout": 30})).await;
    assert_eq!(r["exit_code"], -1, "{command} should ask: {r:#?}");
    let last = r.output().trim_end().lines().last().unwrap_or_default().to_owned();
    assert!(last.starts_with(prompt), "{command}: {prompt} not asked: {r:#?}");
    let r = server.terminal(json!({"command": "C-c", "is_input": true, "timeout": 10})).await;
    assert_eq!(r["status"], "completed", "{command} after C-c: {r:#?}");
}

/// Pagers are off, and each way the table names to page for one command
/// pages: `git -c core.pager=less`, `GIT_PAGER=less git`, `PAGER=less man`,
/// `MANPAGER=less man`, `SYSTEMD_PAGER=less systemctl`. `PAGER=less git
/// log` does not (git's `core.pager` comes before `PAGER`, as the table
/// says). A `GIT_PAGER` or `MANPAGER` in the server's own environment does
/// not turn paging on for every command.
#[tokio::test]
async fn each_pager_override_pages_as_written() {
    let server = Server::with_env(&[], &[("GIT_PAGER", "less"), ("MANPAGER", "less")]).await;
    completes(
        &server,
        "git init -q repo && cd repo && git config user.email a@b.c && git config user.name A \
         && for i in $(seq 300); do git commit -q --allow-empty -m \"change $i\"; done",
        0,
    )
    .await;
    let r = completes(&server, "git log", 0).await;
    assert!(r.text.contains("change 1\n") || r["truncated"] == true, "{r:#?}");
    completes(&server, "PAGER=less git log", 0).await;
    pages(&server, "git -c core.pager=less log", "change 300").await;
    pages(&server, "GIT_PAGER=less git log", "change 300").await;
    // git's own pager settings for one command: `pager.log`.
    pages(&server, "git -c pager.log=less log", "change 300").await;

    if crate::installed("man")
        && std::process::Command::new("man")
            .args(["-w", "ls"])
            .output()
            .is_ok_and(|o| o.status.success())
    {
        completes(&server, "man ls", 0).await;
        pages(&server, "PAGER=less man ls", "LS(1)").await;
        pages(&server, "MANPAGER=less man ls", "LS(1)").await;
    } else {
        eprintln!("man's pagers are not tested: man or the ls page is not installed (man-db)");
    }
    if on_path("systemctl") {
        let r = completes(&server, "systemctl --help", 0).await;
        assert!(r.text.contains("systemctl"), "{r:#?}");
        pages(&server, "SYSTEMD_PAGER=less systemctl --help", "systemctl").await;
    } else {
        eprintln!("SYSTEMD_PAGER is not tested: systemctl is not installed");
    }
    if on_path("gh") {
        completes(&server, "gh help environment", 0).await;
        pages(&server, "GH_PAGER=less gh help environment", "GH_").await;
    } else {
        eprintln!("GH_PAGER is not tested: gh is not installed");
    }
}

/// A local HTTP server that answers every request with 401 and a Basic
/// challenge, so that git and pip ask for a user name. Stopped when
/// dropped.
struct Unauthorized {
    port: u16,
    stop: Arc<AtomicBool>,
}

impl Unauthorized {
    fn start() -> Unauthorized {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("address").port();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopping.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(mut stream) = stream else { continue };
                let mut request = Vec::new();
                let mut buffer = [0u8; 4096];
                // The request's head, up to 64 KiB.
                while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < 65536 {
                    match stream.read(&mut buffer) {
                        Ok(0) | Err(_) => break,
                        Ok(read) => request.extend_from_slice(&buffer[..read]),
                    }
                }
                let _ = stream.write_all(
                    b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"test\"\r\n\
                      Content-Length: 0\r\nConnection: close\r\n\r\n",
                );
            }
        });
        Unauthorized { port, stop }
    }
}

impl Drop for Unauthorized {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wakes the accepting thread so that it sees the flag.
        let _ = std::net::TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Prompts are off, and the table's override for one command turns each
/// back on: `GIT_TERMINAL_PROMPT=1 git clone …`, `PIP_NO_INPUT= pip …`,
/// `DEBIAN_FRONTEND=readline` for a package's debconf questions;
/// `PYTHONUNBUFFERED= python …` gives Python its buffered output again.
#[tokio::test]
async fn each_prompt_override_asks_as_written() {
    let server = Server::start().await;
    let http = Unauthorized::start();
    let url = format!("http://127.0.0.1:{}", http.port);

    let clone = format!("git clone {url}/repo.git");
    let r = server.terminal(json!({"command": clone, "timeout": 30})).await;
    assert_eq!(r["status"], "completed", "{r:#?}");
    assert!(r.text.contains("terminal prompts disabled"), "{r:#?}");
    prompts(&server, &format!("GIT_TERMINAL_PROMPT=1 {clone}"), "Username for").await;

    if on_path("pip") {
        let pip = format!("pip download -q --no-deps -d dl --index-url {url}/simple/ nothing-here");
        let r = server.terminal(json!({"command": pip, "timeout": 60})).await;
        assert_eq!(r["status"], "completed", "{r:#?}");
        assert_ne!(r["exit_code"], 0, "{r:#?}");
        // The README's `PIP_NO_INPUT=0` did not work: pip refuses to ask
        // whenever the variable is not empty, whatever its value.
        let r = completes(&server, &format!("PIP_NO_INPUT=0 {pip}"), 2).await;
        assert!(r.text.contains("No input was expected"), "{r:#?}");
        prompts(&server, &format!("PIP_NO_INPUT= {pip}"), "User for 127.0.0.1").await;
    } else {
        eprintln!("PIP_NO_INPUT is not tested: pip is not installed");
    }

    // A package's configuration script, as apt and dpkg run it: debconf
    // asks through the frontend `DEBIAN_FRONTEND` names (its database in a
    // file of the test's, so that no root is needed).
    if std::path::Path::new("/usr/share/debconf/confmodule").is_file() {
        std::fs::write(
            server.cwd().join("ask.templates"),
            "Template: sktest/colour\nType: string\nDescription: Your favourite colour?\n",
        )
        .expect("write the template");
        std::fs::write(
            server.cwd().join("ask.sh"),
            "#!/bin/sh\nset -e\n. /usr/share/debconf/confmodule\n\
             db_x_loadtemplatefile \"$(dirname \"$0\")/ask.templates\" sktest\n\
             db_fset sktest/colour seen false\ndb_input critical sktest/colour || true\n\
             db_go || true\ndb_get sktest/colour\necho \"answer: $RET\"\n",
        )
        .expect("write the script");
        completes(
            &server,
            "chmod +x ask.sh && export DEBCONF_DB_REPLACE=\"File{$PWD/debconf.dat}\"",
            0,
        )
        .await;
        let r = completes(&server, "./ask.sh", 0).await;
        assert_eq!(r.output().trim_end(), "answer:", "no question asked: {r:#?}");
        prompts(&server, "DEBIAN_FRONTEND=readline ./ask.sh", "Your favourite colour?").await;
    } else {
        eprintln!("DEBIAN_FRONTEND is not tested: debconf is not installed");
    }

    if crate::installed("python3") {
        let probe = "python3 -c 'import sys; print(type(sys.stdout.buffer).__name__)'";
        let r = completes(&server, probe, 0).await;
        assert_eq!(r.output(), "FileIO\n", "unbuffered: {r:#?}");
        let r = completes(&server, &format!("PYTHONUNBUFFERED= {probe}"), 0).await;
        assert_eq!(r.output(), "BufferedWriter\n", "buffered again: {r:#?}");
    }
}
