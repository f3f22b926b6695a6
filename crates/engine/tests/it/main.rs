//! Engine integration tests: a real bash in a real PTY.
#![allow(clippy::disallowed_methods, reason = "the tests start and signal processes of their own")]

mod bash_script;
mod input;
mod integration;
mod limits;
mod namespace;
mod person;
mod prompt;
mod real_keys;
mod record;
mod recorded;
mod run;
mod sandbox;
mod screen;
mod terminal;
mod watch;

use std::path::PathBuf;
use std::time::Duration;

use shellkeep_engine::{Call, InputReport, Reply, Request, Session, SessionConfig};
use shellkeep_engine::{Input, control_key, parse_keys};
use tokio_util::sync::CancellationToken;

#[path = "skip.rs"]
mod skip;
pub use skip::{in_ci, installed, kernel_forbids, skipping};

/// A scratch directory removed when dropped.
pub struct Scratch(pub PathBuf);

impl Scratch {
    /// A fresh, empty directory named after the test.
    pub fn new(name: &str) -> Scratch {
        let unique =
            format!("shellkeep-it-{name}-{}-{:?}", std::process::id(), std::thread::current().id())
                .replace(['(', ')'], "");
        let dir = std::env::temp_dir().join(unique);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A session in a scratch directory, without the user's bashrc.
pub struct Term {
    /// The session under test.
    pub session: Session,
    /// Its directories.
    pub scratch: Scratch,
}

impl Term {
    /// A started session with the default settings.
    pub async fn new(name: &str) -> Term {
        Term::with(name, |_| {}).await
    }

    /// A started session with settings adjusted by `adjust`.
    pub async fn with(name: &str, adjust: impl FnOnce(&mut SessionConfig)) -> Term {
        let scratch = Scratch::new(name);
        let cwd = scratch.0.join("work");
        std::fs::create_dir_all(&cwd).expect("work dir");
        let mut config =
            SessionConfig::new(name, cwd, scratch.0.join("private"), scratch.0.join("spill"));
        config.user_rc = None;
        config.grace = Duration::from_millis(500);
        adjust(&mut config);
        let session = Session::new(config);
        session.start().await.expect("shell starts");
        Term { session, scratch }
    }

    /// The directory the shell starts in.
    pub fn cwd(&self) -> PathBuf {
        self.scratch.0.join("work")
    }

    /// One call, which must not be an error.
    pub async fn call(&self, request: Request) -> Reply {
        self.session.execute(request, CancellationToken::new()).await.expect("call succeeds")
    }

    /// Runs `command`, waiting as a call without a timeout does.
    pub async fn run(&self, command: &str) -> Reply {
        self.call(Request::new(Call::run(command))).await
    }

    /// Runs `command`, waiting at most `timeout` seconds.
    pub async fn run_for(&self, command: &str, timeout: f64) -> Reply {
        self.call(Request {
            call: Call::run(command),
            timeout: Some(Duration::from_secs_f64(timeout)),
            ..Request::default()
        })
        .await
    }

    /// Sends text or a control key to the running program.
    pub async fn input(&self, text: &str, timeout: f64) -> Reply {
        self.call(Request {
            call: call(text, true),
            timeout: Some(Duration::from_secs_f64(timeout)),
            ..Request::default()
        })
        .await
    }

    /// Sends a list of keys to the running program.
    pub async fn keys(&self, items: &[&str], timeout: f64) -> Reply {
        self.call(Request {
            call: keys_call(items),
            timeout: Some(Duration::from_secs_f64(timeout)),
            ..Request::default()
        })
        .await
    }
}

/// The call a tool's `command` and `is_input` ask for, as the server maps
/// them: text, or a control key, with `is_input`; a control key alone is a
/// key; empty is a poll; anything else a command to run.
pub fn call(command: impl Into<String>, is_input: bool) -> Call {
    let command = command.into();
    match control_key(&command) {
        Some(Ok(key)) => Call::Input(Input::key(key)),
        Some(Err(err)) if is_input => panic!("{err}"),
        _ if is_input => Call::Input(Input::Text(command)),
        _ if command.trim().is_empty() => Call::Poll,
        _ => Call::run(command),
    }
}

/// The call for a tool's `keys`: the list, sent to the running program.
pub fn keys_call(items: &[&str]) -> Call {
    let items: Vec<String> = items.iter().map(|item| (*item).to_owned()).collect();
    Call::Input(parse_keys(&items).expect("valid keys"))
}

/// Whether `reply` says the key `name` was sent.
pub fn key_sent(reply: &Reply, name: &str) -> bool {
    matches!(&reply.input, Some(InputReport::Sent { key: Some(key), .. }) if key == name)
}

/// Waits until `condition` holds, failing the test after 20 s.
pub async fn eventually(mut condition: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !condition() {
        assert!(std::time::Instant::now() < deadline, "condition not met within 20 s");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Repeats `attempt` (a call, say) every 10 ms until `done` holds for what
/// it returned, and returns that; fails the test with the last value after
/// 20 s.
pub async fn poll_until<T: std::fmt::Debug>(
    mut attempt: impl AsyncFnMut() -> T,
    mut done: impl FnMut(&T) -> bool,
) -> T {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let value = attempt().await;
        if done(&value) {
            return value;
        }
        assert!(std::time::Instant::now() < deadline, "not within 20 s: {value:#?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Pids of live processes whose command line contains `needle`.
pub fn processes_with(needle: &str) -> Vec<i32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else { continue };
        let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z'))
        });
        if text.contains(needle) && !zombie {
            pids.push(pid);
        }
    }
    pids
}
