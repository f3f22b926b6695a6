//! Resource limits (issue 21, deliver §2): a fork bomb and a memory hog are
//! stopped by the kernel at their session's or command's limit, the reply
//! says which limit, and another session answers meanwhile; every shell and
//! `run` command starts at `nice` 10; a normal build is not stopped by the
//! defaults; without control groups the limits set on purpose are resource
//! limits of the process; the policy file's category limits apply to `run`;
//! bad limit flags stop start-up with the flag's name and range.
//!
//! The tests that need a control group for a limit ask `shellkeep doctor`
//! what applies it on this host (and under `SHELLKEEP_TEST_CONTAINMENT`),
//! and skip where none does: a fork bomb under `RLIMIT_NPROC` would take the
//! processes of every test of the same user, and root is exempt from it.

use serde_json::{Value, json};

use crate::{EVENTUALLY, Scratch, Server, installed, poll_until, skipping};

/// The containment the tests run under: the one CI asks for, else `auto`.
fn mode() -> String {
    std::env::var("SHELLKEEP_TEST_CONTAINMENT")
        .ok()
        .filter(|mode| !mode.is_empty())
        .unwrap_or_else(|| "auto".into())
}

/// `shellkeep doctor`'s line for `resource` (`memory`, `tasks`) under
/// containment `mode` with `flags`.
fn doctor_line(mode: &str, flags: &[&str], resource: &str) -> String {
    let output = std::process::Command::new(crate::binary())
        .args(flags)
        .arg("doctor")
        .env("SHELLKEEP_CONTAINMENT", mode)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("doctor runs");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.lines()
        .find(|line| line.trim_start().starts_with(&format!("{resource}:")))
        .unwrap_or_else(|| panic!("no {resource} line in doctor's output:\n{text}"))
        .to_owned()
}

/// Whether a control group applies `resource`'s limit here; says why not
/// when it does not.
fn cgroup_applies(flags: &[&str], resource: &str) -> bool {
    let line = doctor_line(&mode(), flags, resource);
    let applies = line.contains("through the cgroup");
    if !applies {
        // Not a skip of the kernel's making: the host gives us no such
        // controller (a fork bomb under RLIMIT_NPROC would take every
        // process of the user's other tests; root is exempt from it).
        eprintln!("skipped: no control group applies the {resource} limit here: {line}");
    }
    applies
}

/// The entries of `limit_hit` in a reply's structured content for `limit`.
fn hits<'a>(structured: &'a Value, limit: &str) -> Vec<&'a Value> {
    structured["limit_hit"]
        .as_array()
        .or_else(|| structured["limitHit"].as_array())
        .map(|hits| hits.iter().filter(|hit| hit["limit"] == limit).collect())
        .unwrap_or_default()
}

/// A Python program that allocates a MiB at a time, for ever.
const HOG: &str = "python3 -c 'a = []\nwhile True: a.append(bytearray(1 << 20))'";

/// The `nice` value of the process reading it: field 19 of its stat.
const NICE_OF_SHELL: &str = "read -ra f < /proc/$$/stat; echo \"nice=${f[18]}\"";

#[tokio::test(flavor = "multi_thread")]
async fn a_fork_bomb_stops_at_the_tasks_limit_while_another_session_answers() {
    let flags = ["--tasks-max", "64"];
    if !cgroup_applies(&flags, "tasks") {
        return;
    }
    let server = Server::with_env(
        &[&flags[..], &["--grace", "0.5"]].concat(),
        &[("SHELLKEEP_CONTAINMENT", &mode())],
    )
    .await;
    let other = server.terminal(json!({"command": "echo ready", "session": "other"})).await;
    assert!(other.output().contains("ready"), "{other:#?}");

    // The bomb's first process may end (its `wait` returns) while what it
    // started still forks in the background: running or not, the session
    // says its tasks limit stopped it, in this reply or a poll's.
    let bomb = server
        .terminal(json!({
            "command": "bomb() { bomb | bomb & }; bomb; wait",
            "session": "bomb",
            "timeout": 2,
        }))
        .await;
    assert!(bomb["status"] == "running" || bomb["status"] == "completed", "{bomb:#?}");

    // While the bomb runs at its limit, another session and a `run`
    // answer (within a deadline: no timed assertion).
    let answer = tokio::time::timeout(
        EVENTUALLY,
        server.terminal(json!({"command": "echo alive-$((6 * 7))", "session": "other"})),
    )
    .await
    .expect("another session answers while the bomb runs");
    assert!(answer.output().contains("alive-42"), "{answer:#?}");
    assert!(hits(&answer.structured, "tasks").is_empty(), "{answer:#?}");
    let run = tokio::time::timeout(EVENTUALLY, server.run(json!({"command": "echo run-ok"})))
        .await
        .expect("a run answers while the bomb runs");
    assert_eq!(run["stdout"], "run-ok\n", "{run:#?}");

    // The bomb's session says its tasks limit stopped it: in a poll's
    // reply while its first process waits, or once the shell is back at
    // its prompt (the forks its background copies try still count), in
    // the next command's.
    let told = if hits(&bomb.structured, "tasks").is_empty() {
        poll_until(
            EVENTUALLY,
            async || {
                let poll = json!({"command": "", "session": "bomb", "timeout": 1});
                let reply = server.terminal(poll).await;
                if !reply.is_error {
                    return reply;
                }
                assert!(reply.text.contains("No command is running"), "{reply:#?}");
                server.terminal(json!({"command": ":", "session": "bomb", "timeout": 1})).await
            },
            |reply| !hits(&reply.structured, "tasks").is_empty(),
        )
        .await
    } else {
        bomb
    };
    let hit = hits(&told.structured, "tasks")[0];
    assert_eq!(
        (hit["max"].as_u64(), hit["counted"].as_bool()),
        (Some(64), Some(true)),
        "{told:#?}"
    );
    assert!(hit["times"].as_u64().unwrap_or(0) > 0, "{told:#?}");
    assert!(told.text.contains("The tasks limit of this session (64 processes"), "{}", told.text);

    // It is told once: the next reply of that session has no new hits
    // unless the bomb kept forking, and interrupting it ends it all.
    let closed = server.call("session_close", json!({"session": "bomb"})).await;
    assert!(!closed.is_error, "{closed:#?}");
    let after =
        server.terminal(json!({"command": "echo still-$((1 + 1))", "session": "other"})).await;
    assert!(after.output().contains("still-2"), "{after:#?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_memory_hog_is_killed_at_the_memory_limit_and_the_reply_says_so() {
    if !installed("python3") {
        return skipping("python3 is not installed");
    }
    let flags = ["--memory-max", "64"];
    if !cgroup_applies(&flags, "memory") {
        return;
    }
    let server = Server::with_env(&flags, &[("SHELLKEEP_CONTAINMENT", &mode())]).await;

    // In a terminal session: the hog dies, the shell lives on.
    let reply = server.terminal(json!({"command": HOG, "timeout": 60})).await;
    assert_eq!(
        (reply["status"].as_str(), reply["exit_code"].as_i64()),
        (Some("completed"), Some(137)),
        "{reply:#?}"
    );
    let hit = hits(&reply.structured, "memory");
    assert_eq!(hit.len(), 1, "{reply:#?}");
    assert_eq!(hit[0]["max"].as_u64(), Some(64 << 20), "{reply:#?}");
    assert!(
        reply.text.contains("The memory limit of this session (64 MiB) stopped it"),
        "{}",
        reply.text
    );
    let next = server.terminal(json!({"command": "echo fine"})).await;
    assert!(
        next.output().contains("fine") && hits(&next.structured, "memory").is_empty(),
        "{next:#?}"
    );

    // In a `run` command: its own group, its own limit.
    let run = server.run(json!({"command": HOG, "timeout_sec": 60})).await;
    assert_eq!(run["exitCode"].as_i64().or(run["exit_code"].as_i64()), Some(137), "{run:#?}");
    let hit = hits(&run.structured, "memory");
    assert_eq!((hit.len(), hit[0]["counted"].as_bool()), (1, Some(true)), "{run:#?}");
    assert!(
        run.text.contains("The memory limit of this command (64 MiB) stopped it"),
        "{}",
        run.text
    );
}

/// The `cpu.stat` of the group that limits process `pid`'s CPU: its v1
/// `cpu` hierarchy's group, else its cgroup2 group.
fn cpu_stat_of(pid: &str) -> Option<std::path::PathBuf> {
    let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mount = |v2: bool| {
        mountinfo.lines().find_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let fields: Vec<&str> = left.split(' ').collect();
            let right: Vec<&str> = right.split(' ').collect();
            let wanted = if v2 {
                right.first() == Some(&"cgroup2")
            } else {
                right.first() == Some(&"cgroup")
                    && right.get(2).is_some_and(|opts| opts.split(',').any(|o| o == "cpu"))
            };
            (wanted && fields.get(3) == Some(&"/")).then(|| fields.get(4).map(|p| p.to_string()))?
        })
    };
    let path = |v2: bool| {
        cgroups.lines().find_map(|line| {
            let mut parts = line.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            let wanted = if v2 {
                controllers.is_empty()
            } else {
                controllers.split(',').any(|c| c == "cpu")
            };
            wanted.then(|| path.to_owned())
        })
    };
    [false, true].into_iter().find_map(|v2| {
        let file = std::path::PathBuf::from(format!("{}{}/cpu.stat", mount(v2)?, path(v2)?));
        std::fs::read_to_string(&file).ok()?.contains("nr_throttled").then_some(file)
    })
}

/// `--cpu-max`: a busy loop in the session is throttled by the kernel.
#[tokio::test(flavor = "multi_thread")]
async fn a_cpu_limit_throttles_a_busy_session() {
    let flags = ["--cpu-max", "0.2"];
    if !cgroup_applies(&flags, "cpu") {
        return;
    }
    let server = Server::with_env(&flags, &[("SHELLKEEP_CONTAINMENT", &mode())]).await;
    let pid = server.terminal(json!({"command": "echo $$"})).await;
    let pid = pid.output().trim().to_owned();
    let stat = cpu_stat_of(&pid).expect("the shell's cpu.stat");
    let throttled = || {
        std::fs::read_to_string(&stat)
            .ok()
            .and_then(|text| {
                text.lines()
                    .find_map(|line| line.strip_prefix("nr_throttled ")?.parse::<u64>().ok())
            })
            .unwrap_or(0)
    };
    assert_eq!(throttled(), 0, "{}", stat.display());
    poll_until(
        EVENTUALLY,
        async || {
            let busy = "timeout 0.5 bash -c 'while :; do :; done'; echo spun";
            server.terminal(json!({"command": busy, "timeout": 10})).await;
            throttled()
        },
        |&times| times > 0,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn shells_and_run_commands_start_at_nice_10_unless_told_otherwise() {
    let server = Server::with_env(&[], &[("SHELLKEEP_CONTAINMENT", &mode())]).await;
    let shell = server.terminal(json!({"command": NICE_OF_SHELL})).await;
    assert!(shell.output().contains("nice=10"), "{shell:#?}");
    // What the shell starts inherits it.
    let child =
        server.terminal(json!({"command": "awk '{print \"child=\" $19}' /proc/self/stat"})).await;
    assert!(child.output().contains("child=10"), "{child:#?}");
    let run = server.run(json!({"command": "awk '{print $19}' /proc/self/stat"})).await;
    assert_eq!(run["stdout"], "10\n", "{run:#?}");

    // --nice 0: the server's own priority (never raised above it).
    let server = Server::with_env(&["--nice", "0"], &[("SHELLKEEP_CONTAINMENT", &mode())]).await;
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", server.pid)).expect("stat");
    let own =
        stat.rsplit(')').next().and_then(|rest| rest.split_whitespace().nth(16)).expect("nice");
    let shell = server.terminal(json!({"command": NICE_OF_SHELL})).await;
    assert!(shell.output().contains(&format!("nice={own}")), "{own}: {shell:#?}");
    let run = server.run(json!({"command": "awk '{print $19}' /proc/self/stat"})).await;
    assert_eq!(run["stdout"], format!("{own}\n"), "{run:#?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_small_parallel_build_is_not_stopped_by_the_default_limits() {
    if !installed("cc") {
        return skipping("cc is not installed");
    }
    let server = Server::with_env(&[], &[("SHELLKEEP_CONTAINMENT", &mode())]).await;
    let dir = server.cwd().join("build");
    std::fs::create_dir(&dir).expect("mkdir");
    for n in 1..=4 {
        std::fs::write(dir.join(format!("f{n}.c")), format!("int f{n}(void) {{ return {n}; }}\n"))
            .expect("write");
    }
    std::fs::write(
        dir.join("main.c"),
        "int f1(void); int f2(void); int f3(void); int f4(void);\n\
         int main(void) { return f1() + f2() + f3() + f4() - 10; }\n",
    )
    .expect("write");
    let cwd = dir.display().to_string();
    // Every file compiled at once, as `make -j` would.
    let build =
        "for f in *.c; do cc -O2 -c \"$f\" & done; wait; cc -o prog ./*.o && ./prog && echo built";
    let run = server.run(json!({"command": build, "cwd": cwd})).await;
    assert_eq!(run["stdout"].as_str().map(|out| out.ends_with("built\n")), Some(true), "{run:#?}");
    assert!(run["limitHit"].is_null(), "{run:#?}");
    let shell = server
        .terminal(
            json!({"command": format!("cd {cwd} && rm -f ./*.o prog && {build}"), "timeout": 120}),
        )
        .await;
    assert!(shell.output().contains("built"), "{shell:#?}");
    assert!(shell["limit_hit"].is_null(), "{shell:#?}");
    // A cargo build (rustc's threads and its jobserver), where cargo is.
    if installed("cargo") {
        let cargo = "cargo new --vcs none --quiet tiny && cd tiny && CARGO_TARGET_DIR=$PWD/target \
                     cargo run --offline --quiet";
        let shell = server.terminal(json!({"command": cargo, "timeout": 300})).await;
        assert!(shell.output().contains("Hello, world!"), "{shell:#?}");
        assert!(shell["limit_hit"].is_null(), "{shell:#?}");
    }
}

/// Without control groups (markers mode), limits set on purpose are
/// resource limits of the process (RLIMIT_AS, RLIMIT_NPROC); the defaults
/// are not, and a failed allocation under RLIMIT_AS is told as its likely
/// cause.
#[tokio::test(flavor = "multi_thread")]
async fn markers_mode_applies_limits_set_on_purpose_as_resource_limits_of_the_process() {
    let markers = [("SHELLKEEP_CONTAINMENT", "markers")];
    let server = Server::with_env(&["--memory-max", "64", "--tasks-max", "2000"], &markers).await;
    let shell = server.terminal(json!({"command": "echo \"$(ulimit -v) $(ulimit -u)\""})).await;
    assert!(shell.output().contains("65536 2000"), "{shell:#?}");
    let run = server.run(json!({"command": "echo \"$(ulimit -v) $(ulimit -u)\""})).await;
    assert_eq!(run["stdout"], "65536 2000\n", "{run:#?}");
    if installed("python3") {
        let hog = server.terminal(json!({"command": HOG, "timeout": 60})).await;
        let hit = hits(&hog.structured, "memory");
        assert_eq!((hit.len(), hit[0]["counted"].as_bool()), (1, Some(false)), "{hog:#?}");
        assert!(
            hog.text.contains("under a memory limit of 64 MiB per process (RLIMIT_AS"),
            "{}",
            hog.text
        );
        let run = server.run(json!({"command": HOG, "timeout_sec": 60})).await;
        assert_eq!(hits(&run.structured, "memory").len(), 1, "{run:#?}");
    }

    // The defaults are applied through control groups only.
    let server = Server::with_env(&[], &markers).await;
    let shell = server.terminal(json!({"command": "echo \"$(ulimit -v) $(ulimit -u)\""})).await;
    let unlimited_v = shell.output().contains("unlimited ");
    assert!(unlimited_v, "{shell:#?}");
    let doctor = doctor_line("markers", &[], "memory");
    assert!(doctor.contains("NOT applied"), "{doctor}");
    let doctor = doctor_line("markers", &["--memory-max", "64"], "memory");
    assert!(doctor.contains("RLIMIT_AS"), "{doctor}");
}

/// A policy category's `limits` apply to the `run` commands of that
/// category, and `policy_explain` shows them.
#[tokio::test(flavor = "multi_thread")]
async fn a_policy_category_sets_the_limits_of_its_run_commands() {
    let scratch = Scratch::new();
    let mut policy: Value =
        serde_json::from_str(shellkeep_policy_json()).expect("the embedded policy is JSON");
    policy["categories"]["quick"]["limits"] = json!({"memory_mib": 96, "tasks": 300});
    let file = scratch.path.join("policy.json");
    std::fs::write(&file, policy.to_string()).expect("write the policy");
    let path = file.display().to_string();
    let server = Server::with_env(
        &["--policy", &path, "--memory-max", "200"],
        &[("SHELLKEEP_CONTAINMENT", "markers")],
    )
    .await;
    // `cat` is quick: its category's limits.
    let quick = server.run(json!({"command": "cat /proc/self/limits"})).await;
    let limits = quick["stdout"].as_str().unwrap_or_default();
    let line = |name: &str| {
        let line = limits.lines().find(|line| line.starts_with(name)).unwrap_or_default();
        let values = line[name.len().min(line.len())..].split_whitespace();
        values.take(2).collect::<Vec<_>>().join(" ")
    };
    assert_eq!(line("Max address space"), format!("{} {}", 96 << 20, 96 << 20), "{limits}");
    assert_eq!(line("Max processes"), "300 300", "{limits}");
    // A command of another category: the server's.
    let other = server.run(json!({"command": "ulimit -v"})).await;
    assert_eq!(other["stdout"], "204800\n", "{other:#?}");
    let check = std::process::Command::new(crate::binary())
        .args(["policy", "check", &path])
        .output()
        .expect("policy check runs");
    let text = String::from_utf8_lossy(&check.stdout);
    assert!(text.contains("patterns, run limits: memory 96 MiB, tasks 300\n"), "{text}");
    let explained = server.call("policy_explain", json!({"command": "cat x"})).await;
    assert!(explained.text.contains("memory 96 MiB, tasks 300"), "{}", explained.text);
    assert_eq!(explained["run_limits"]["memory_mib"], 96, "{explained:#?}");
}

/// The embedded default policy, as the binary prints it.
fn shellkeep_policy_json() -> &'static str {
    include_str!("../../../engine/src/default_policy.json")
}

/// Bad limit flags stop start-up, naming the flag and its range.
#[test]
fn bad_limit_flags_stop_start_up_naming_the_flag_and_its_range() {
    let cases: &[(&[&str], &str)] = &[
        (&["--memory-max", "8"], "--memory-max must be a whole number of MiB from 16 to"),
        (&["--memory-max", "lots"], "--memory-max must be a whole number of MiB"),
        (&["--tasks-max", "3"], "--tasks-max must be a whole number of tasks from 8 to"),
        (&["--cpu-max", "0.001"], "--cpu-max must be a number of CPUs from 0.01 to 4096"),
        (&["--nice", "20"], "--nice must be a whole number from 0 to 19"),
        (&["--nice=-1"], "--nice must be a whole number from 0 to 19"),
    ];
    for (args, says) in cases {
        let output = std::process::Command::new(crate::binary())
            .args(*args)
            .stdin(std::process::Stdio::null())
            .current_dir(std::env::temp_dir())
            .output()
            .expect("the binary runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(output.stdout.is_empty(), "{args:?}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    // `none` and 0 lift a limit; they are not errors.
    let line = doctor_line(&mode(), &["--memory-max", "none", "--tasks-max", "0"], "memory");
    assert!(line.contains("memory: none"), "{line}");
}

/// Inside the sandbox (`workspace-write`, the network off) the limits hold
/// the same: the child joins its limit groups and sets its priority before
/// the sandbox is applied.
#[tokio::test(flavor = "multi_thread")]
async fn the_limits_hold_inside_the_sandbox() {
    let flags = ["--memory-max", "64", "--tasks-max", "64"];
    if !installed("python3")
        || !cgroup_applies(&flags, "memory")
        || !cgroup_applies(&flags, "tasks")
    {
        return;
    }
    let sandbox = ["--sandbox", "workspace-write", "--network", "off", "--sandbox-best-effort"];
    let server = Server::with_env(
        &[&flags[..], &sandbox[..]].concat(),
        &[("SHELLKEEP_CONTAINMENT", &mode())],
    )
    .await;
    let shell = server.terminal(json!({"command": NICE_OF_SHELL})).await;
    assert!(shell.output().contains("nice=10"), "{shell:#?}");
    let hog = server.terminal(json!({"command": HOG, "timeout": 60})).await;
    assert_eq!(hog["exit_code"].as_i64(), Some(137), "{hog:#?}");
    assert_eq!(hits(&hog.structured, "memory").len(), 1, "{hog:#?}");
    // The command ends once a fork of the bomb failed (the builtins it
    // waits with need no fork), or at its time limit. Bash says `fork:
    // retry: …` while it retries and `fork: …` when it gives up: either.
    // The command's own shell forks once, before the bomb exists: a fork
    // of its own that failed would hold it in bash's retries (up to half a
    // minute) on a busy machine.
    let bomb = "exec 2>bomb.err; bomb() { bomb | bomb & }; bomb & \
                until read -r -d '' t <bomb.err; [[ $t == *'fork: '* ]]; do :; done; echo hit";
    let run = server.run(json!({"command": bomb, "timeout_sec": 60})).await;
    assert_eq!(run["stdout"], "hit\n", "{run:#?}");
    let hit = hits(&run.structured, "tasks");
    assert_eq!((hit.len(), hit[0]["max"].as_u64()), (1, Some(64)), "{run:#?}");
}
