//! The command line for people and scripts: `shellkeep run`, `policy check`,
//! `policy explain`, and what start-up does with a policy file.

use std::process::Command;

use serde_json::Value;

fn shellkeep(args: &[&str]) -> (i32, String, String) {
    shellkeep_in(&std::env::temp_dir(), args)
}

/// `shellkeep` with `args`, started in `dir`.
fn shellkeep_in(dir: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    let output = Command::new(crate::binary())
        .current_dir(dir)
        .args(args)
        .env_remove("SHELLKEEP_POLICY")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("the binary runs");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn scratch_file(name: &str, text: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("shellkeep-cli-{}-{name}", std::process::id()));
    std::fs::write(&path, text).expect("write");
    path
}

#[test]
fn run_prints_the_seed_result_and_exits_with_the_command_code() {
    let (code, stdout, _) = shellkeep(&["run", "--", "echo out; echo err >&2; exit 3"]);
    assert_eq!(code, 3);
    let result: Value = serde_json::from_str(&stdout).expect("JSON on stdout");
    assert_eq!(
        (&result["status"], &result["stdout"], &result["stderr"], &result["exitCode"]),
        (&Value::from("success"), &Value::from("out\n"), &Value::from("err\n"), &Value::from(3))
    );
    assert_eq!(
        (&result["timeoutReason"], &result["terminationMode"]),
        (&Value::Null, &Value::Null)
    );

    let (code, stdout, _) = shellkeep(&["run", "--timeout", "2", "--", "sleep", "600"]);
    assert_eq!(code, 124);
    let result: Value = serde_json::from_str(&stdout).expect("JSON on stdout");
    assert_eq!(result["timeoutReason"], "no_output_timeout");
    assert_eq!(result["terminationMode"], "soft");
}

#[test]
fn policy_check_and_explain() {
    let (code, stdout, _) = shellkeep(&["policy", "check"]);
    assert_eq!(code, 0);
    assert!(stdout.starts_with("embedded default: valid\n"), "{stdout}");
    assert!(stdout.contains("medium (default): exec 120 s, no output 30 s"), "{stdout}");

    let (code, stdout, _) = shellkeep(&["policy", "explain", "--", "git", "status"]);
    assert_eq!(code, 0);
    assert!(stdout.contains("quick (exec 30 s, no output 10 s;"), "{stdout}");
    let (_, stdout, _) = shellkeep(&["policy", "explain", "--timeout", "120", "--", "anything"]);
    assert!(stdout.contains("explicit timeout (exec 120 s, no output 30 s)"), "{stdout}");
}

#[test]
fn an_invalid_policy_stops_start_up_with_a_clear_message() {
    let bad = scratch_file(
        "bad.json",
        r#"{"categories": {"quick": {"exec_timeout_sec": -5, "no_output_timeout_sec": 1}}, "default_category": "quick"}"#,
    );
    let bad_arg = bad.to_str().expect("utf-8 path");
    let (code, _, stderr) = shellkeep(&["--policy", bad_arg, "policy", "check"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains(bad_arg) && stderr.contains("categories.quick.exec_timeout_sec"),
        "{stderr}"
    );
    // Serving refuses to start too, before any MCP traffic.
    let (code, stdout, stderr) = shellkeep(&["--policy", bad_arg]);
    assert_eq!((code, stdout.as_str()), (2, ""));
    assert!(stderr.contains("exec_timeout_sec"), "{stderr}");
    let _ = std::fs::remove_file(bad);
}

#[test]
fn a_missing_policy_file_falls_back_to_the_default_with_a_notice() {
    let (code, stdout, stderr) =
        shellkeep(&["--policy", "/nonexistent/policy.json", "policy", "explain", "--", "ls"]);
    assert_eq!(code, 0);
    assert!(stdout.contains("[policy: embedded default]"), "{stdout}");
    assert!(stderr.contains("/nonexistent/policy.json"), "{stderr}");
}

/// Issue 12: the command line checks its own flags in its own words, with
/// the rule tool timeouts follow, and never speaks of `timeout_sec`.
#[test]
fn bad_flags_are_named_as_the_command_line_spells_them() {
    let rule = "must be a positive number of seconds, at most 86400 (1 day)";
    let cases: &[(&[&str], &str)] = &[
        (&["run", "--timeout", "-1", "--", "true"], "--timeout"),
        (&["run", "--timeout=0", "--", "true"], "--timeout"),
        (&["run", "--timeout", "1e9", "--", "true"], "--timeout"),
        (&["policy", "explain", "--timeout", "-1", "--", "ls"], "--timeout"),
        (&["policy", "explain", "--timeout", "90000", "--", "ls"], "--timeout"),
    ];
    for (args, flag) in cases {
        let (code, stdout, stderr) = shellkeep(args);
        assert_eq!((code, stdout.as_str()), (2, ""), "{args:?}: {stderr}");
        assert!(stderr.contains(&format!("{flag} {rule}")), "{args:?}: {stderr}");
        assert!(!stderr.contains("timeout_sec"), "{args:?}: {stderr}");
    }
    let (_, stdout, _) = shellkeep(&["policy", "explain", "--timeout", "86400", "--", "ls"]);
    assert!(stdout.contains("explicit timeout (exec 86400 s"), "{stdout}");
}

/// Issue 12: serving refuses to start on a bad flag, before any MCP
/// traffic, and says which flag and what range; nothing is clamped.
#[test]
fn a_bad_server_flag_stops_start_up_naming_the_flag_and_its_range() {
    let serve_cases: &[(&[&str], &str)] = &[
        (&["--max-wait", "0"], "--max-wait must be a positive number of seconds"),
        (&["--no-output-return=-3"], "--no-output-return must be a positive number"),
        (&["--output-cap", "10"], "--output-cap must be a number of characters from 100"),
        (&["--max-sessions", "0"], "--max-sessions must be at least 1, got 0"),
        (&["--full-output-keep-days=-1"], "--full-output-keep-days must be a number of days"),
        (&["--containment", "jail"], "--containment: unknown containment mode"),
    ];
    for (args, says) in serve_cases {
        let (code, stdout, stderr) = shellkeep(args);
        assert_eq!((code, stdout.as_str()), (2, ""), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

/// The `stdout` of a `shellkeep run` that succeeded.
fn run_stdout(dir: &std::path::Path, args: &[&str]) -> String {
    let (code, stdout, stderr) = shellkeep_in(dir, args);
    assert_eq!(code, 0, "{args:?}: {stdout} {stderr}");
    let result: Value = serde_json::from_str(&stdout).expect("JSON on stdout");
    result["stdout"].as_str().expect("stdout").to_owned()
}

/// Issue 14: `shellkeep run -- touch 'file with space'` made three files:
/// the arguments were joined with spaces. Several arguments are now a
/// command and its arguments, each passed as it is; one argument is still
/// a shell command line.
#[test]
fn run_passes_several_arguments_as_arguments_and_one_as_a_command_line() {
    let scratch = crate::Scratch::new();
    let dir = scratch.path.join("work");
    std::fs::create_dir(&dir).expect("mkdir");
    let files = || {
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .expect("read_dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    run_stdout(&dir, &["run", "--", "touch", "file with space"]);
    assert_eq!(files(), ["file with space"]);
    run_stdout(&dir, &["run", "--", "touch", "it's $HOME", "*", "a;b"]);
    assert_eq!(files(), ["*", "a;b", "file with space", "it's $HOME"]);

    // Quotes, `$`, backquotes, newlines, empty arguments, globs and `~`
    // arrive untouched, one argument each.
    let words = ["a b", "", "it's", "$HOME", "`id`", "$(id)", "x\ny", "*", "~", "\\", "!x", "--"];
    let mut args = vec!["run", "--", "printf", "<%s>"];
    args.extend(words);
    let expected: String = words.iter().map(|w| format!("<{w}>")).collect();
    assert_eq!(run_stdout(&dir, &args), expected);
    // A command's own flags are its own, after `--` or not.
    assert_eq!(run_stdout(&dir, &["run", "printf", "%s-", "--timeout", "x"]), "--timeout-x-");

    // One argument is a command line for bash: pipes, `$`, `;` work.
    assert_eq!(run_stdout(&dir, &["run", "--", "echo a | tr a b; echo \"$((6 * 7))\""]), "b\n42\n");
    assert_eq!(run_stdout(&dir, &["run", "ls | wc -l"]).trim(), "4");
    // `policy explain` sees the same line as `run`.
    let (_, stdout, _) = shellkeep(&["policy", "explain", "--", "echo", "a b"]);
    assert!(stdout.contains("echo 'a b'"), "{stdout}");
    let (_, stdout, _) = shellkeep(&["policy", "explain", "--", "cargo", "build", "--release"]);
    assert!(stdout.contains("cargo build --release"), "{stdout}");
}

/// Issue 14: `verify-timeouts` in a directory without `docs/` failed with
/// "No such file or directory" and no path. It makes the directory; a
/// path that cannot be made is named in full, before any test runs.
#[test]
fn verify_timeouts_makes_its_directory_or_names_it() {
    let scratch = crate::Scratch::new();
    let (code, stdout, stderr) = shellkeep_in(&scratch.path, &["verify-timeouts"]);
    assert_eq!(code, 0, "{stdout} {stderr}");
    assert_eq!(stdout, "docs/TERMINAL_TIMEOUT_VERIFICATION.md: all four tests passed\n");
    let document =
        std::fs::read_to_string(scratch.path.join("docs/TERMINAL_TIMEOUT_VERIFICATION.md"))
            .expect("the document");
    assert!(document.starts_with("# Terminal timeout verification"), "{document}");

    std::fs::write(scratch.path.join("a-file"), "").expect("write");
    let (code, stdout, stderr) =
        shellkeep_in(&scratch.path, &["verify-timeouts", "--output", "a-file/sub/doc.md"]);
    assert_eq!((code, stdout.as_str()), (2, ""), "{stderr}");
    let full = scratch.path.join("a-file/sub");
    assert!(stderr.contains(&format!("{}", full.display())), "{stderr}");
    assert!(stderr.contains("Not a directory"), "{stderr}");
}
