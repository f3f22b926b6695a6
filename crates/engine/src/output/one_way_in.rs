//! Every path of output passes `pass` exactly once, end to end: a real
//! shell's committed text (reply and log, cut and spilled to a file), the
//! unfinished line and the full screen a reply shows, a progress report,
//! what a background job prints between commands, and both streams of a
//! `run` (view and log). In test builds `pass` marks a witness word (see
//! `pass::tests`): a path that skipped it shows the word bare, one that
//! passed it twice shows it doubled. The commands spell the word in two
//! halves, so the echo of the typed line never holds it.
//!
//! Test code only.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::*;
use crate::keys::Input;
use crate::oneshot::{self, RunRequest};
use crate::output::pass::tests::{PASS_WITNESS, witness_passes};
use crate::policy::Limits;
use crate::session::{Call, Progress, ProgressHook, Reply, Request, Session, SessionConfig};

/// The shell's words for printing the witness (`printf` of its halves).
const PRINT: &str = "printf 'pass-%s' witness-7f3a";

/// A scratch directory, removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scratch(name: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!(
        "shellkeep-one-way-{}-{name}-{}",
        std::process::id(),
        crate::private_fs::random_hex(4).expect("random")
    ));
    std::fs::create_dir_all(dir.join("work")).expect("scratch");
    Scratch(dir)
}

/// Asserts that `text` (named `surface`) shows the witness `times`
/// times, each marked exactly once.
fn passed_once(surface: &str, text: &str, times: usize) {
    assert_eq!(
        witness_passes(text),
        (times, 0, 0),
        "{surface}: (passed once, more than once, never) for {PASS_WITNESS} in {text:?}"
    );
}

async fn call(session: &Session, request: Request) -> Reply {
    session.execute(request, CancellationToken::new()).await.expect("the call succeeds")
}

fn command(text: &str) -> Request {
    Request {
        call: Call::Run { command: text.into() },
        timeout: Some(Duration::from_secs(20)),
        ..Request::default()
    }
}

fn input(text: &str) -> Request {
    Request { call: Call::Input(Input::Text(text.into())), ..command(text) }
}

/// The whole log of the session's latest command.
fn logged(session: &Session) -> String {
    let log = session.output().get(None).expect("a command in the store");
    let mut text = String::new();
    let mut offset = 0;
    loop {
        let page = log.read(offset as i64, MAX_READ_LINES).expect("the log reads");
        text.push_str(&page.text);
        offset += page.lines;
        if offset >= page.total_lines {
            return text;
        }
    }
}

/// Takes the session's last words until `done` holds for all taken so
/// far (what background jobs print reaches the session on the reader
/// thread, and its lines are committed when looked at); fails after
/// 20 s.
async fn wait_for_last_words(session: &Session, done: impl Fn(&str) -> bool) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut taken = String::new();
    while !done(&taken) {
        assert!(std::time::Instant::now() < deadline, "not within 20 s: {taken:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
        // Lines stay on the screen until something commits them.
        session.commit_screen();
        taken.push_str(&session.last_words().await.output);
    }
    taken
}

#[tokio::test]
async fn every_path_of_output_passes_the_one_place_once() {
    let dir = scratch("terminal");
    let mut config = SessionConfig::new(
        "witness",
        dir.0.join("work"),
        dir.0.join("private"),
        dir.0.join("spill"),
    );
    config.user_rc = None;
    config.output_cap = 2_000;
    let session = Session::new(config);
    session.start().await.expect("the shell starts");

    // Committed text, cut in the reply and spilled to the log's file.
    let reply =
        call(&session, command(&format!("{PRINT}; echo; seq 1 20000; {PRINT}; echo"))).await;
    assert!(!reply.is_running(), "{reply:?}");
    assert!(reply.output.truncated, "{reply:?}");
    passed_once("a cut reply", &reply.output.text, 2);
    passed_once("a spilled log", &logged(&session), 2);

    // The unfinished line a reply shows while the program waits; the
    // rest of the line, once committed, is not shown again.
    let reply = call(&session, command(&format!("{PRINT}; read x; echo ' end'"))).await;
    assert!(reply.is_running(), "{reply:?}");
    passed_once("an unfinished line", &reply.output.text, 1);
    let reply = call(&session, input("y")).await;
    assert!(!reply.is_running(), "{reply:?}");
    passed_once("the rest of the line", &reply.output.text, 0);
    passed_once("its log", &logged(&session), 1);

    // A full-screen program's screen.
    let reply = call(
        &session,
        command(&format!("printf '\\e[?1049h'; {PRINT}; read x; printf '\\e[?1049l'")),
    )
    .await;
    assert!(reply.is_running(), "{reply:?}");
    passed_once("a full screen", &reply.output.text, 1);
    call(&session, input("y")).await;

    // A progress report shows the line the command is on.
    let lines = std::sync::Arc::new(Mutex::new(String::new()));
    let heard = std::sync::Arc::clone(&lines);
    let hook = ProgressHook::new(move |progress: Progress| {
        heard.lock().expect("lock").push_str(&format!("{}\n", progress.line));
    });
    let reply = call(
        &session,
        Request { progress: Some(hook), ..command(&format!("{PRINT}; sleep 1.5; echo")) },
    )
    .await;
    assert!(!reply.is_running(), "{reply:?}");
    let reports = lines.lock().expect("lock").clone();
    let shown = reports.lines().filter(|line| !line.is_empty()).count();
    assert!(shown > 0, "no progress report showed a line: {reports:?}");
    passed_once("progress reports", &reports, shown);
    passed_once("the reply after them", &reply.output.text, 1);

    // What a background job prints between commands (once told to:
    // after the command that started it ended).
    let go = dir.0.join("work/go");
    let job = format!("(while [ ! -e go ]; do sleep 0.02; done; {PRINT}; echo) &");
    let reply = call(&session, command(&job)).await;
    assert!(!reply.is_running(), "{reply:?}");
    std::fs::write(&go, "").expect("go");
    let idle = wait_for_last_words(&session, |taken| taken.contains(PASS_WITNESS)).await;
    passed_once("background output", &idle, 1);
    session.close().await;

    // Both streams of a `run`: the cut view and the complete log.
    let run_dir = scratch("run");
    let limits = Limits { exec: Duration::from_secs(20), no_output: Duration::from_secs(20) };
    let both = format!("{PRINT}; echo; seq 1 20000; {PRINT}; echo; {PRINT} >&2; echo >&2");
    let request =
        RunRequest { stream_cap: 2_000, ..RunRequest::new(both, limits, &run_dir.0, "run") };
    let store = Arc::clone(&request.output);
    let outcome = oneshot::run(request, CancellationToken::new()).await;
    assert!(outcome.stdout.truncated, "{outcome:?}");
    passed_once("run's cut stdout", &outcome.stdout.text, 2);
    passed_once("run's stderr", &outcome.stderr.text, 1);
    let stdout = store.get_stream(Some(outcome.number), Stream::Stdout).expect("stdout");
    let ends = [stdout.read(0, 1), stdout.read(-1, 1)].map(|page| page.expect("reads").text);
    passed_once("run's stdout log", &ends.concat(), 2);
    let stderr = store.get_stream(Some(outcome.number), Stream::Stderr).expect("stderr");
    passed_once("run's stderr log", &stderr.read(0, 10).expect("reads").text, 1);
}

/// A secret registered for a session and for `run`, and the forms of it
/// that must never appear: the value, its base64 at each alignment, its
/// URL and JSON encodings.
const SECRET: &str = "Zq9!secret-VALUE_2026/xyz";

fn forbidden() -> Vec<String> {
    let mut all = vec![SECRET.to_owned(), crate::mask::url_encode(SECRET)];
    all.extend((0..3).map(|k| crate::mask::base64_aligned(SECRET.as_bytes(), k)));
    let json = serde_json::to_string(SECRET).expect("json");
    all.push(json[1..json.len() - 1].to_owned());
    all
}

/// Asserts that `text` (named `surface`) holds no form of the secret.
fn hidden(surface: &str, text: &str) {
    for form in forbidden() {
        assert!(!text.contains(&form), "{surface} shows {form:?}: {text:?}");
    }
}

fn secrets() -> Arc<crate::mask::Secrets> {
    Arc::new(crate::mask::Secrets::new([("T".to_owned(), SECRET.to_owned())], true))
}

/// Every file under `dir`, read.
fn files_under(dir: &std::path::Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_under(&path));
        } else if let Ok(bytes) = std::fs::read(&path) {
            found.push((path, bytes));
        }
    }
    found
}

/// A registered secret printed by terminal commands in every way the
/// issue lists (in pieces with a pause, redrawn by `\r`, on a full
/// screen, by a background job, in the middle of 5 MB, across the
/// renderer's line limit, base64-encoded) and by a `run` (stdout and
/// stderr, in pieces) never appears raw or encoded in a reply, a
/// progress line, a log or any file written; `$T` still works.
#[tokio::test]
async fn a_registered_secret_never_appears() {
    let dir = scratch("secret");
    let mut config = SessionConfig::new(
        "secret",
        dir.0.join("work"),
        dir.0.join("private"),
        dir.0.join("spill"),
    );
    config.user_rc = None;
    config.output_cap = 2_000;
    config.env = vec![("T".to_owned(), SECRET.to_owned())];
    config.secrets = secrets();
    let (rows, cols) = (usize::from(config.rows), usize::from(config.cols));
    let session = Session::new(config);
    session.start().await.expect("the shell starts");
    let mut seen = String::new();
    let mut masked = 0;
    let mut check = |surface: &str, reply: &Reply| {
        hidden(surface, &reply.output.text);
        seen.push_str(&reply.output.text);
        masked += reply.output.masked;
    };

    // A command that holds the secret itself is logged masked.
    let reply = call(&session, command(&format!("echo '{SECRET}' >/dev/null"))).await;
    check("a command holding it", &reply);
    let page = session.output().get(None).expect("kept").read(0, 1).expect("reads");
    hidden("its logged command", &page.command);

    // In pieces with a pause; and the secret still works in commands.
    let reply = call(
        &session,
        command(r#"printf '%s' "${T:0:5}"; sleep 0.3; printf '%s\n' "${T:5}"; echo ${#T}"#),
    )
    .await;
    check("a split printf", &reply);
    assert_eq!(reply.output.text, format!("<secret-hidden>\n{}\n", SECRET.len()));
    assert_eq!(reply.output.masked, 1);

    // A credential's shape, registered nowhere, split by a pause.
    let token = "0123456789abcdefghijABCDEFGHIJ012345";
    let shaped =
        format!("printf 'x ghp_{}'; sleep 0.3; printf '{} y\\n'", &token[..9], &token[9..]);
    let reply = call(&session, command(&shaped)).await;
    assert_eq!(reply.output.text, "x <secret-hidden> y\n");
    check("a GitHub token", &reply);

    // Encoded.
    let reply = call(
        &session,
        command(
            r#"for p in '' u us 'user:'; do printf '%s%s' "$p" "$T" | base64 -w0; echo; done; printf '%s' "$T" | jq -Rs . 2>/dev/null; python3 -c 'import os,urllib.parse;print(urllib.parse.quote(os.environ["T"],safe=""))' 2>/dev/null"#,
        ),
    )
    .await;
    check("encodings", &reply);

    // A progress line redrawn over it, reported while it runs.
    let lines = std::sync::Arc::new(Mutex::new(String::new()));
    let heard = std::sync::Arc::clone(&lines);
    let hook = ProgressHook::new(move |progress: Progress| {
        heard.lock().expect("lock").push_str(&format!("{}\n", progress.line));
    });
    let redraw = r#"for i in 1 2 3 4 5 6; do printf '\rstep %s %s' $i "$T"; sleep 0.3; done; echo"#;
    let reply = call(&session, Request { progress: Some(hook), ..command(redraw) }).await;
    check("a redrawn line", &reply);
    let reports = lines.lock().expect("lock").clone();
    assert!(reports.contains("<secret-hidden>"), "no progress showed the line: {reports:?}");
    hidden("progress", &reports);

    // A full-screen view.
    let reply = call(
        &session,
        command(r#"printf '\e[?1049h'; printf 'env T=%s\n' "$T"; read x; printf '\e[?1049l'"#),
    )
    .await;
    assert!(reply.is_running() && reply.screen, "{reply:?}");
    assert!(reply.output.text.contains("<secret-hidden>"), "{reply:?}");
    check("a full screen", &reply);
    check("after it", &call(&session, input("q")).await);

    // Longer than the window, shown unfinished, then ended. The rows of
    // a line that scroll off the window are final: the line is cut at
    // the start of the first row still in the window, and the secret
    // straddles that place.
    let cut = 20 * cols;
    let long = format!(
        r#"printf '%*s' {} '' | tr ' ' a; printf '%s' "$T"; printf '%*s' {} '' | tr ' ' b; read x; echo"#,
        cut - 10,
        rows * cols - SECRET.len(),
    );
    let reply = call(&session, command(&long)).await;
    assert!(reply.is_running(), "{reply:?}");
    // The line was cut inside the secret: its start is held, and shown
    // masked with the rest of the line.
    assert!(reply.output.text.contains("aaa<secret-hidden>bbb"), "{reply:?}");
    assert!(!reply.output.text.contains("2026/xyz"), "{reply:?}");
    check("an unfinished long line", &reply);
    check("its end", &call(&session, input("y")).await);
    hidden("its log", &logged(&session));

    // 5 MB with the secret in the middle.
    let big = r#"seq 1 400000; printf 'mid %s\n' "$T"; seq 1 400000"#;
    let reply = call(&session, command(big)).await;
    assert!(!reply.is_running() && reply.output.truncated, "{reply:?}");
    check("a 5 MB output", &reply);
    let log = logged(&session);
    assert!(log.len() > 5_000_000 && log.contains("mid <secret-hidden>\n"), "{}", log.len());
    hidden("its log", &log);

    // A background job's output, between commands.
    let job = r#"(sleep 0.3; printf 'bg %s\n' "$T") &"#;
    check("starting a job", &call(&session, command(job)).await);
    let idle = wait_for_last_words(&session, |taken| taken.contains("bg ")).await;
    assert!(idle.contains("bg <secret-hidden>"), "{idle:?}");
    hidden("background output", &idle);
    assert!(masked >= 8, "masks counted: {masked}");
    session.close().await;

    // Both streams of a `run`, in pieces.
    let run_dir = scratch("secret-run");
    let limits = Limits { exec: Duration::from_secs(20), no_output: Duration::from_secs(20) };
    let both = r#"printf '%s' "${T:0:7}"; sleep 0.3; printf '%s\n' "${T:7}"; printf 'err %s\n' "$T" >&2; seq 1 3000; printf '%s' "$T" | base64"#;
    let request = RunRequest {
        stream_cap: 2_000,
        env: vec![("T".to_owned(), SECRET.to_owned())],
        secrets: secrets(),
        ..RunRequest::new(both, limits, &run_dir.0, "run")
    };
    let store = Arc::clone(&request.output);
    let outcome = oneshot::run(request, CancellationToken::new()).await;
    assert!(outcome.stdout.text.starts_with("<secret-hidden>\n1\n"), "{outcome:?}");
    assert_eq!(outcome.stderr.text, "err <secret-hidden>\n");
    hidden("run's stdout", &outcome.stdout.text);
    hidden("run's stderr", &outcome.stderr.text);
    assert!(outcome.stdout.masked >= 1 && outcome.stderr.masked == 1, "{outcome:?}");
    for stream in [Stream::Stdout, Stream::Stderr] {
        let log = store.get_stream(Some(outcome.number), stream).expect("kept");
        hidden("run's log", &log.read(0, MAX_READ_LINES).expect("reads").text);
    }
    // A command that holds the secret itself is logged masked.
    let literal = format!("printf '%s\\n' '{SECRET}'");
    let request = RunRequest {
        secrets: secrets(),
        output: Arc::clone(&store),
        ..RunRequest::new(literal, limits, &run_dir.0, "run")
    };
    let outcome = oneshot::run(request, CancellationToken::new()).await;
    assert_eq!(outcome.stdout.text, "<secret-hidden>\n");
    let page = store.get(Some(outcome.number)).expect("kept").read(0, 10).expect("reads");
    hidden("run's logged command", &page.command);
    drop(store);

    // Every file written: the command logs, the shell's own files.
    for root in [&dir.0, &run_dir.0] {
        for (path, bytes) in files_under(root) {
            hidden(&path.display().to_string(), &String::from_utf8_lossy(&bytes));
        }
    }
    assert!(seen.contains("<secret-hidden>"));
}
