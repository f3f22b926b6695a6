//! Background jobs where the agent is, and their bookkeeping (issue 14,
//! item 2): a job starts in the directory and with the exported environment
//! of the calling session's shell; its end is told on a line of its own with
//! its true duration; `sessions` shows it ended; ended jobs are kept for
//! `--job-keep-secs`, then closed, and do not count against the session
//! limit; `session_close` on an idle session gives its last lines. Through
//! the real binary, as an agent would use it and as an attacker would.

use serde_json::json;

use crate::sessions::free_port;
use crate::{EVENTUALLY, Reply, Server, poll_until};

/// A project directory with a real virtual environment (`python3 -m venv`,
/// offline, without pip) under the server's directory.
fn project_with_venv(server: &Server) -> std::path::PathBuf {
    let project = server.cwd().join("project");
    std::fs::create_dir(&project).expect("mkdir project");
    let made = std::process::Command::new("python3")
        .args(["-m", "venv", "--without-pip", "venv"])
        .current_dir(&project)
        .status()
        .expect("run python3 -m venv");
    assert!(made.success(), "python3 -m venv failed");
    project
}

/// The rows of a `sessions` listing, by name.
fn row<'a>(listing: &'a Reply, name: &str) -> Option<&'a serde_json::Value> {
    listing["sessions"].as_array().expect("rows").iter().find(|row| row["name"] == name)
}

/// Everything command `number` (the latest if `None`) of `session` printed
/// so far, through the `output` tool.
async fn job_output(server: &Server, session: &str) -> Reply {
    server.call("output", json!({"session": session, "offset": 0, "limit": 5000})).await
}

#[tokio::test]
async fn a_background_server_starts_in_the_agents_directory_venv_and_environment() {
    let server = Server::start().await;
    let project = project_with_venv(&server);
    let venv = project.join("venv");
    let port = free_port();
    // The agent's usual steps, in `default`; an exported function too.
    let r = server
        .terminal(json!({"command": format!(
            "cd project && source venv/bin/activate && export PORT={port} && \
             greet() {{ echo hello-from-fn; }} && export -f greet && false"
        )}))
        .await;
    assert_eq!(r["exit_code"], 1, "{r:#?}");
    let r = server
        .terminal(json!({
            "command": "echo \"pwd=$(pwd)\"; echo \"port=$PORT\"; echo \"py=$(command -v python3)\"; \
                        echo \"venv=$VIRTUAL_ENV\"; greet; \
                        python3 -m http.server $PORT --bind 127.0.0.1",
            "background": true
        }))
        .await;
    assert!(!r.is_error, "{r:#?}");
    assert_eq!((&r["session"], &r["status"]), (&json!("job-1"), &json!("running")), "{r:#?}");
    let started = format!(
        "[Background job started in session \"job-1\", in {} (venv {}), with the environment \
         of session \"default\", which is free.]",
        project.display(),
        venv.display()
    );
    assert!(r.text.contains(&started), "{}", r.text);
    assert!(r.text.contains("output tool") && r.text.contains("session_close"), "{}", r.text);
    // Nothing timed out, and the calling session need not be interrupted.
    for wrong in ["timed out", "interrupt/kill", "no new output"] {
        assert!(!r.text.contains(wrong), "{wrong:?} in {}", r.text);
    }

    // The job's own view of where it is.
    let out = poll_until(
        EVENTUALLY,
        async || job_output(&server, "job-1").await,
        |page| page["lines"].as_str().is_some_and(|l| l.contains("hello-from-fn")),
    )
    .await;
    let lines = out["lines"].as_str().expect("lines");
    for expected in [
        format!("pwd={}", project.display()),
        format!("port={port}"),
        format!("py={}", venv.join("bin/python3").display()),
        format!("venv={}", venv.display()),
    ] {
        assert!(lines.lines().any(|line| line == expected), "{expected:?} in {lines}");
    }

    // The calling session is free, and kept its `$?`, directory and
    // environment: it reaches the server on its own $PORT.
    let r = server.terminal(json!({"command": "echo $?; pwd"})).await;
    assert_eq!(r.output(), format!("1\n{}\n", project.display()), "{r:#?}");
    let fetch =
        json!({"command": "curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$PORT/"});
    poll_until(EVENTUALLY, async || server.terminal(fetch.clone()).await, |r| r.output() == "200")
        .await;
    // No shellkeep command shows up in the calling session's numbering.
    let r = server.call("output", json!({"command": 1})).await;
    assert!(r["lines"].as_str().is_some_and(str::is_empty), "the agent's first command: {r:#?}");

    // `cwd` says where; the environment is still the calling session's.
    let elsewhere = server.cwd().join("elsewhere");
    std::fs::create_dir(&elsewhere).expect("mkdir");
    let r = server
        .terminal(json!({
            "command": "echo \"$(pwd) $PORT ${VIRTUAL_ENV##*/}\"; sleep 30",
            "background": true,
            "cwd": elsewhere,
        }))
        .await;
    assert_eq!(r["session"], "job-2", "{r:#?}");
    assert!(r.text.contains(&format!("in {} (venv", elsewhere.display())), "{}", r.text);
    let out = poll_until(
        EVENTUALLY,
        async || job_output(&server, "job-2").await,
        |page| page["lines"].as_str().is_some_and(|l| l.contains('\n')),
    )
    .await;
    assert_eq!(out["lines"], format!("{} {port} venv\n", elsewhere.display()), "{out:#?}");
    for name in ["job-1", "job-2"] {
        let r = server.call("session_close", json!({"session": name})).await;
        assert!(!r.is_error, "{r:#?}");
    }
}

#[tokio::test]
async fn an_ended_job_is_told_on_its_own_line_with_its_true_duration_and_kept_for_a_while() {
    let server = Server::with(&["--job-keep-secs", "3"]).await;
    let r = server
        .terminal(json!({
            "command": "echo started; sleep 2; echo finished; (exit 3)",
            "background": true,
            "session": "short"
        }))
        .await;
    assert_eq!(r["status"], "running", "{r:#?}");
    // While it runs, the listing's figures are current: its first line is
    // counted although no reply has shown it since.
    let listing = server.call("sessions", json!({})).await;
    let short = row(&listing, "short").expect("listed");
    assert_eq!(short["state"], "running", "{listing:#?}");
    assert!(short["output_bytes"].as_u64() >= Some("started\n".len() as u64), "{listing:#?}");

    // The next reply of any call tells the end once, on a line of its own
    // even after output that ends without a newline.
    let notice = poll_until(
        EVENTUALLY,
        async || server.terminal(json!({"command": "printf no-newline"})).await,
        |r| r.text.contains("ended with exit code 3"),
    )
    .await;
    let joined = notice.blocks.concat();
    let line = joined
        .lines()
        .find(|line| line.contains("ended with exit code 3"))
        .unwrap_or_else(|| panic!("{joined}"));
    assert!(line.starts_with("[Background job in session \"short\""), "{joined:?}");
    assert!(line.contains("output stays readable until the session closes in 3 s"), "{line}");
    let ended = &notice["jobs_ended"][0];
    assert_eq!((&ended["session"], &ended["exit_code"]), (&json!("short"), &json!(3)));
    // It ran two seconds at least (sleep 2), not a second less.
    assert!(ended["ran_sec"].as_f64().expect("ran_sec") >= 2.0, "{ended}");
    assert_eq!(ended["kept_sec"], 3.0, "{ended}");

    // Listed as ended, with its code and run time, never as running.
    let listing = server.call("sessions", json!({})).await;
    let short = row(&listing, "short").expect("still listed");
    assert_eq!(
        (&short["state"], &short["exit_code"]),
        (&json!("ended"), &json!(3)),
        "{listing:#?}"
    );
    assert!(short["ran_sec"].as_f64() >= Some(2.0), "{listing:#?}");
    assert!(short["closes_in_sec"].as_f64() <= Some(3.0), "{listing:#?}");
    assert!(listing.text.contains("ended with exit code 3 after"), "{}", listing.text);
    assert!(!listing.text.contains("short: background job; running"), "{}", listing.text);
    // Its output is readable until then.
    let out = job_output(&server, "short").await;
    assert_eq!(out["lines"], "started\nfinished\n", "{out:#?}");

    // Then it is closed, and its name is free.
    poll_until(
        EVENTUALLY,
        async || server.call("sessions", json!({})).await,
        |listing| row(listing, "short").is_none(),
    )
    .await;
    let r = server.call("output", json!({"session": "short"})).await;
    assert!(r.is_error && r.text.contains("no session is named \"short\""), "{r:#?}");
}

#[tokio::test]
async fn ended_jobs_do_not_count_against_the_session_limit() {
    let server = Server::with(&["--max-sessions", "2"]).await;
    server.terminal(json!({"command": "true"})).await;
    // Four jobs, each ending (in its start reply, or later); while one
    // runs, the limit holds the next back.
    for n in 1..=4 {
        let command = if n % 2 == 0 { "true" } else { "sleep 1.5" };
        let started = poll_until(
            EVENTUALLY,
            async || server.terminal(json!({"command": command, "background": true})).await,
            |r| !r.is_error,
        )
        .await;
        assert_eq!(started["session"], format!("job-{n}"), "{started:#?}");
    }
    poll_until(
        EVENTUALLY,
        async || server.call("sessions", json!({})).await,
        |listing| {
            let rows = listing["sessions"].as_array().expect("rows");
            rows.iter().filter(|row| row["state"] == "ended").count() == 2
                && !rows.iter().any(|row| row["state"] == "running")
        },
    )
    .await;
    // Beyond the limit, the oldest ended jobs were closed; a new session
    // still opens.
    let r = server.terminal(json!({"command": "echo fine", "session": "work"})).await;
    assert_eq!(r.output(), "fine\n", "{r:#?}");
    let listing = server.call("sessions", json!({})).await;
    assert!(listing.text.starts_with("2 of at most 2 sessions open"), "{}", listing.text);
    assert!(listing.text.contains("2 ended background jobs, not counted"), "{}", listing.text);
}

#[tokio::test]
async fn a_busy_calling_session_refuses_the_job_clearly() {
    let server = Server::start().await;
    let r = server.terminal(json!({"command": "sleep 30", "timeout": 0.3})).await;
    assert_eq!(r["status"], "running", "{r:#?}");
    let r = server.terminal(json!({"command": "echo job", "background": true})).await;
    assert!(r.is_error, "{r:#?}");
    assert!(
        r.text.starts_with(
            "The background job was NOT started: session \"default\" is running \"sleep 30\""
        ),
        "{}",
        r.text
    );
    assert!(r.text.contains("\"session\": \"dev\""), "{}", r.text);
    let listing = server.call("sessions", json!({})).await;
    assert!(row(&listing, "job-1").is_none(), "no job session is left: {listing:#?}");
    // A name that cannot be used is told first.
    for (name, said) in [("default", "already exists"), ("a b", "invalid session name")] {
        let r = server
            .terminal(json!({"command": "echo job", "background": true, "session": name}))
            .await;
        assert!(r.is_error && r.text.contains(said), "{name}: {r:#?}");
    }
    // Once the command is stopped, the job starts.
    let r = server.terminal(json!({"command": "C-c", "is_input": true})).await;
    assert_eq!(r["status"], "completed", "{r:#?}");
    let r = server.terminal(json!({"command": "echo job; sleep 30", "background": true})).await;
    assert!(!r.is_error && r.output().contains("job"), "{r:#?}");
}

#[tokio::test]
async fn a_hostile_calling_shell_cannot_misplace_or_break_a_job() {
    let server = Server::start().await;
    // An alias and functions in the way of the words the shell is given.
    let r = server
        .terminal(json!({"command": "alias builtin='echo hijacked'; env() { echo fn; }; \
                                     command() { echo fn; }; __sk_rs() { echo fn; }"}))
        .await;
    assert_eq!(r["exit_code"], 0, "{r:#?}");
    // A value with a newline, quotes and a backslash; `PATH` with no `env`
    // in it; the shell's private directory removed.
    let r = server
        .terminal(json!({"command": "export WEIRD=$'a\\nb \"q\" \\'s\\' \\\\'; \
                                     printf '%q\\n' \"$WEIRD\"; rm -rf \"$__sk_dir\"; \
                                     export PATH=/nonexistent"}))
        .await;
    assert_eq!(r["exit_code"], 0, "{r:#?}");
    let quoted = r.output().to_owned();
    let r = server
        .terminal(
            json!({"command": "printf '%q\\n' \"$WEIRD\"; echo \"$PATH\"", "background": true}),
        )
        .await;
    assert!(!r.is_error, "{r:#?}");
    let out = poll_until(
        EVENTUALLY,
        async || job_output(&server, "job-1").await,
        |page| page["running"] == false,
    )
    .await;
    assert_eq!(out["lines"], format!("{quoted}/nonexistent\n"), "{out:#?}");

    // A directory the shell is in but that is gone: the job is not started,
    // and says why.
    let r = server
        .terminal(
            json!({"command": "export PATH=/usr/bin:/bin; mkdir gone && cd gone && rmdir ../gone"}),
        )
        .await;
    assert_eq!(r["exit_code"], 0, "{r:#?}");
    let r = server.terminal(json!({"command": "echo never", "background": true})).await;
    assert!(r.is_error, "{r:#?}");
    assert!(
        r.text.starts_with("The background job was NOT started: session \"default\" is in /")
            && r.text.contains("/gone, which is no longer a directory"),
        "{}",
        r.text
    );
    let listing = server.call("sessions", json!({})).await;
    assert!(row(&listing, "job-2").is_none(), "{listing:#?}");
    server.terminal(json!({"command": "cd .."})).await;

    // A huge environment is refused with its bound; one a program cannot
    // even start with (a value over the kernel's 128 KiB) too.
    let r = server
        .terminal(json!({"command": "for i in 1 2 3 4 5 6 7 8 9 10; do \
                                     export BIG$i=$(head -c 110000 /dev/zero | tr '\\0' x); done"}))
        .await;
    assert_eq!(r["exit_code"], 0, "{r:#?}");
    let r = server.terminal(json!({"command": "echo never", "background": true})).await;
    assert!(r.is_error, "{r:#?}");
    assert!(r.text.contains("is larger than 1.0 MiB, the most a job takes"), "{}", r.text);
    let r = server
        .terminal(json!({"command": "unset BIG1 BIG2 BIG3 BIG4 BIG5 BIG6 BIG7 BIG8 BIG9 BIG10; \
                                     export HUGE=$(head -c 200000 /dev/zero | tr '\\0' x)"}))
        .await;
    assert_eq!(r["exit_code"], 0, "{r:#?}");
    let r = server.terminal(json!({"command": "echo never", "background": true})).await;
    assert!(r.is_error, "{r:#?}");
    assert!(r.text.contains("could not be read (") && r.text.contains("too long"), "{}", r.text);
    // Nothing of the environment stays on disk.
    let r = server.terminal(json!({"command": "unset HUGE; ls -A \"$__sk_dir\""})).await;
    assert!(!r.output().lines().any(|name| name == "env"), "{r:#?}");
    let r = server.terminal(json!({"command": "echo fine; sleep 30", "background": true})).await;
    assert!(!r.is_error && r.output().contains("fine"), "{r:#?}");
}

#[tokio::test]
async fn reading_the_calling_shell_leaves_its_unreported_command_and_output_alone() {
    let server = Server::start().await;
    // A command that ends while no call waits on it: reported by the next
    // call to `default`, even with a job started from it in between.
    let r = server
        .terminal(json!({"command": "sleep 0.3; echo late-line; (exit 4)", "timeout": 0.1}))
        .await;
    assert_eq!(r["status"], "running", "{r:#?}");
    poll_until(
        EVENTUALLY,
        async || server.call("sessions", json!({})).await,
        |listing| row(listing, "default").is_some_and(|row| row["state"] == "finished"),
    )
    .await;
    let r = server.terminal(json!({"command": "sleep 30", "background": true})).await;
    assert!(!r.is_error, "{r:#?}");
    let r = server.terminal(json!({"command": "echo next"})).await;
    assert_eq!((r.output(), &r["previous_exit_code"]), ("next\n", &json!(4)), "{r:#?}");
    assert_eq!(r["previous_output"], "late-line\n", "{r:#?}");
}

#[tokio::test]
async fn a_job_keeps_the_secrets_file_values_and_masks_them() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = crate::Scratch::new();
    let file = dir.path.join("secrets.env");
    let value = "job-secret-value-0123456789";
    std::fs::write(&file, format!("SK_JOB_TOKEN={value}\n")).expect("write");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let server = Server::with(&["--secrets-file", file.to_str().expect("utf-8")]).await;
    server.terminal(json!({"command": "export OTHER=1"})).await;
    let r = server
        .terminal(json!({
            "command": "echo \"$SK_JOB_TOKEN ${#SK_JOB_TOKEN} $OTHER\"; sleep 30",
            "background": true
        }))
        .await;
    assert!(!r.is_error, "{r:#?}");
    let out = poll_until(
        EVENTUALLY,
        async || job_output(&server, "job-1").await,
        |page| page["lines"].as_str().is_some_and(|l| l.contains('\n')),
    )
    .await;
    assert_eq!(out["lines"], format!("<secret-hidden> {} 1\n", value.len()), "{out:#?}");
    assert!(!r.text.contains(value) && !out.text.contains(value), "{r:#?} {out:#?}");
}

#[tokio::test]
async fn a_calling_shell_in_a_directory_the_job_cannot_enter_refuses_the_job() {
    // Root enters any directory; the check needs an ordinary user.
    use std::os::unix::fs::MetadataExt as _;
    if std::fs::metadata("/proc/self").expect("/proc/self").uid() == 0 {
        return;
    }
    let server = Server::start().await;
    let r =
        server.terminal(json!({"command": "mkdir -p locked && cd locked && chmod 000 ."})).await;
    assert_eq!(r["exit_code"], 0, "{r:#?}");
    let r = server.terminal(json!({"command": "echo never", "background": true})).await;
    assert!(r.is_error && r.text.contains("could not start the shell"), "{r:#?}");
    let listing = server.call("sessions", json!({})).await;
    assert!(row(&listing, "job-1").is_none(), "no job session is left: {listing:#?}");
    server.terminal(json!({"command": "chmod 755 . && cd .."})).await;
}

#[tokio::test]
async fn a_job_that_ends_its_shell_is_listed_as_ended_not_running() {
    let server = Server::start().await;
    // `exec` makes the job the shell: its end is the shell's.
    let r = server
        .terminal(json!({"command": "echo before-exec; exec sleep 1.5", "background": true}))
        .await;
    assert_eq!(r["status"], "running", "{r:#?}");
    // Its command may be listed as finished (not yet reported) a moment
    // before the job's end is recorded: on a busy machine a listing can
    // fall in between. Then it is listed as ended.
    let listing = poll_until(
        EVENTUALLY,
        async || server.call("sessions", json!({})).await,
        |listing| row(listing, "job-1").is_some_and(|row| row["state"] == "ended"),
    )
    .await;
    let job = row(&listing, "job-1").expect("listed");
    assert_eq!((&job["state"], &job["exit_code"]), (&json!("ended"), &json!(0)), "{listing:#?}");
    assert!(job["ran_sec"].as_f64() >= Some(1.5), "{listing:#?}");
    assert!(!listing.text.contains("running"), "{}", listing.text);
    let out = job_output(&server, "job-1").await;
    assert_eq!(out["lines"], "before-exec\n", "{out:#?}");
}

#[tokio::test]
async fn the_listing_counts_a_running_commands_output_as_it_comes() {
    let server = Server::start().await;
    let r = server
        .terminal(json!({"command": "sleep 1.2; echo later-line; sleep 30", "background": true}))
        .await;
    assert_eq!((&r["status"], r.output()), (&json!("running"), ""), "{r:#?}");
    // No reply shows the line; the listing counts it all the same.
    let listing = poll_until(
        EVENTUALLY,
        async || server.call("sessions", json!({})).await,
        |listing| {
            row(listing, "job-1").is_some_and(|row| {
                row["output_bytes"].as_u64() == Some("later-line\n".len() as u64)
            })
        },
    )
    .await;
    assert!(listing.text.contains("11 B of output kept"), "{}", listing.text);
}

#[tokio::test]
async fn the_calling_shells_options_and_traces_stay_its_own() {
    let server = Server::start().await;
    let r = server.terminal(json!({"command": "set -xu; (exit 7)"})).await;
    assert_eq!(r["exit_code"], 7, "{r:#?}");
    let r = server.terminal(json!({"command": "sleep 30", "background": true})).await;
    assert!(!r.is_error, "{r:#?}");
    // Tracing still on, `$?` still 7, and none of shellkeep's own lines
    // shown anywhere.
    let r = server.terminal(json!({"command": "echo $?"})).await;
    // (The trace's `+` count is the eval's nesting, as for every command.)
    let lines: Vec<&str> = r.output().lines().collect();
    assert!(matches!(lines[..], [trace, "7"] if trace.ends_with("+ echo 7")), "{r:#?}");
    assert!(!r.text.contains("__sk") && !r.text.contains("env -0"), "{r:#?}");
}

/// Regression: the end of the environment's writer was sometimes read
/// before the runtime saw the FIFO become readable, and the job was refused
/// as if the shell had written nothing (about one start in 30).
#[tokio::test]
async fn the_environment_is_read_whole_on_every_start() {
    let server = Server::start().await;
    for i in 0..60 {
        server.terminal(json!({"command": format!("export ROUND={i}")})).await;
        let r = server.terminal(json!({"command": "echo $ROUND", "background": true})).await;
        assert!(!r.is_error, "{i}: {r:#?}");
        assert_eq!(r.output(), format!("{i}\n"), "{i}: {r:#?}");
    }
}

/// A server that reads `rc` as its shells' `~/.bashrc` (the harness starts
/// every server with `--no-rc`: a wrapper drops the flag), in `dir`.
async fn with_bashrc(dir: &crate::Scratch, rc: &str) -> Server {
    std::fs::write(dir.path.join(".bashrc"), rc).expect("write .bashrc");
    let with_rc = dir.path.join("with-rc");
    executable(
        &with_rc,
        "#!/bin/bash\nargs=()\nfor a in \"$@\"; do [[ $a == --no-rc ]] || args+=(\"$a\"); done\n\
         exec \"${args[@]}\"\n",
    );
    let home = dir.path.to_str().expect("utf-8");
    Server::wrapped(&[with_rc.to_str().expect("utf-8")], &[], &[("HOME", home)]).await
}

/// Writes an executable file.
fn executable(path: &std::path::Path, text: &str) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::write(path, text).expect("write");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// A background job asked for as the server's very first call, while
/// `default`'s shell is still starting (its rc takes longer than the wait
/// for a call in progress), starts once that shell is up: it is not
/// refused as if a call were in progress.
#[tokio::test]
async fn a_job_asked_for_while_the_first_shell_starts_is_started() {
    let dir = crate::Scratch::new();
    let server = with_bashrc(&dir, "sleep 3\n").await;
    let job = format!("sleep 300.{}", crate::marker());
    let r = server.terminal(json!({"command": job, "background": true})).await;
    assert!(!r.is_error, "{r:#?}");
    assert_eq!(r["status"], "running", "{r:#?}");
    assert_eq!(r["session"], "job-1", "{r:#?}");
}

/// A `~/.bashrc` that puts its own directory first in `PATH` (as `pyenv
/// init` or `nvm` does) does not hide the venv the agent activated from the
/// job: the calling shell's values are put back over what it changed.
#[tokio::test]
async fn a_job_keeps_the_callers_path_over_what_its_bashrc_changed() {
    let dir = crate::Scratch::new();
    let shims = dir.path.join("shims");
    std::fs::create_dir(&shims).expect("mkdir");
    executable(&shims.join("python3"), "#!/bin/sh\necho shim\n");
    let rc = format!("export PATH={}:$PATH\nexport FROM_RC=1\n", shims.display());
    let server = with_bashrc(&dir, &rc).await;
    let project = project_with_venv(&server);
    let r = server.terminal(json!({"command": "command -v python3"})).await;
    assert_eq!(r.output(), format!("{}\n", shims.join("python3").display()), "the rc ran: {r:#?}");
    let r = server
        .terminal(
            json!({"command": "cd project && source venv/bin/activate && command -v python3"}),
        )
        .await;
    let venv_python = project.join("venv/bin/python3");
    assert_eq!(r.output(), format!("{}\n", venv_python.display()), "{r:#?}");
    let r = server
        .terminal(json!({
            "command": "echo \"$(command -v python3) ${FROM_RC-}\"; sleep 30",
            "background": true
        }))
        .await;
    assert!(!r.is_error, "{r:#?}");
    let out = poll_until(
        EVENTUALLY,
        async || job_output(&server, "job-1").await,
        |page| page["lines"].as_str().is_some_and(|l| l.contains('\n')),
    )
    .await;
    // The job's shell read the rc too, but the venv comes first again.
    assert_eq!(out["lines"], format!("{} 1\n", venv_python.display()), "{out:#?}");
}
