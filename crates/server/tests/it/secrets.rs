//! Where secrets come from, through the binary: start-up errors for named
//! secrets and secrets files, the notice for a variable skipped, and the
//! secrets file's values arriving in every shell through the environment
//! only (never a file shellkeep writes, never a command line).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::json;

use crate::{EVENTUALLY, Server, random_u64, wait_until};

/// A directory of the test's own, removed when dropped.
struct Dir(PathBuf);

impl Dir {
    fn new() -> Dir {
        let path = std::env::temp_dir().join(format!("sk-sec-{:08x}", random_u64() as u32));
        std::fs::create_dir(&path).expect("mkdir");
        Dir(path)
    }

    /// A file of `text` with `mode`.
    fn file(&self, name: &str, text: &str, mode: u32) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text).expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        path
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Starts the server with `args` and `env` (no other `SHELLKEEP_`
/// variable) and no client: stdin at its end, so a server that starts
/// stops at once. Its exit code, stdout and stderr.
fn start(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let dir = Dir::new();
    let mut command = Command::new(crate::binary());
    command
        .arg("--no-rc")
        .args(args)
        .current_dir(&dir.0)
        .env("XDG_CONFIG_HOME", dir.0.join("config"))
        .env("XDG_STATE_HOME", dir.0.join("state"))
        .stdin(Stdio::null());
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("SHELLKEEP_") {
            command.env_remove(key);
        }
    }
    let output = command.envs(env.iter().copied()).output().expect("the binary runs");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Asserts that starting with `args` and `env` fails before any MCP
/// traffic, with `message` on stderr and never `value`.
fn assert_refused(args: &[&str], env: &[(&str, &str)], message: &str, value: &str) {
    let (code, stdout, stderr) = start(args, env);
    assert_eq!((code, stdout.as_str()), (2, ""), "{args:?}: {stderr}");
    assert!(stderr.contains(message), "{args:?}: expected {message:?} in {stderr}");
    assert!(!stderr.contains(value), "{args:?}: the value is on stderr: {stderr}");
}

/// Asserts that the server got past its configuration and served (until
/// its input ended, before a client's handshake).
fn assert_started(stderr: &str) {
    assert!(stderr.contains("MCP handshake failed"), "{stderr}");
}

#[test]
fn a_named_secret_that_cannot_be_masked_stops_start_up() {
    let short = "s3cr3t!";
    assert_refused(
        &["--secret", "SK_SHORT"],
        &[("SK_SHORT", short)],
        "shellkeep: secret SK_SHORT (from --secret or SHELLKEEP_SECRETS): its value is shorter \
         than 8 characters",
        short,
    );
    assert_refused(
        &[],
        &[
            ("SHELLKEEP_SECRETS", "SK_LONG_ENOUGH, SK_SHORT"),
            ("SK_LONG_ENOUGH", "long-enough-value"),
        ],
        "secret SK_SHORT (from --secret or SHELLKEEP_SECRETS): the server's environment has no \
         variable SK_SHORT",
        "long-enough-value",
    );
    assert_refused(
        &["--secret", "SK_EMPTY"],
        &[("SK_EMPTY", "")],
        "secret SK_EMPTY (from --secret or SHELLKEEP_SECRETS): its value is empty",
        "\u{0}",
    );
    assert_refused(&["--secret", "1BAD"], &[], "secret 1BAD (from --secret", "\u{0}");
    // Named and long enough, the server starts (and ends with its input).
    let (_, _, stderr) =
        start(&["--secret", "SK_LONG_ENOUGH"], &[("SK_LONG_ENOUGH", "long-enough-value")]);
    assert_started(&stderr);
}

#[test]
fn a_secrets_file_that_is_not_private_or_not_valid_stops_start_up() {
    let dir = Dir::new();
    let value = "file-secret-value-1";
    let text = format!("SK_FILE_SECRET={value}\n");
    let open = dir.file("open.env", &text, 0o644);
    let open_text = open.to_str().expect("utf-8");
    assert_refused(
        &["--secrets-file", open_text],
        &[],
        &format!(
            "shellkeep: the secrets file {open_text} is open to other users (mode 0644); make it \
             private: chmod 600 {open_text}"
        ),
        value,
    );
    let private = dir.file("private.env", &text, 0o600);
    let link = dir.0.join("link.env");
    std::os::unix::fs::symlink(&private, &link).expect("symlink");
    assert_refused(
        &[],
        &[("SHELLKEEP_SECRETS_FILE", link.to_str().expect("utf-8"))],
        "is a symbolic link",
        value,
    );
    let broken = dir.file("broken.env", &format!("# ok\nSK_A='{value}\n"), 0o600);
    assert_refused(
        &["--secrets-file", broken.to_str().expect("utf-8")],
        &[],
        &format!(
            "{} line 2: the single quote that opens the value of SK_A is never closed",
            broken.display()
        ),
        value,
    );
    let short = dir.file("short.env", "SK_OK=long-enough-1\nSK_PIN=1234\n", 0o600);
    assert_refused(
        &["--secrets-file", short.to_str().expect("utf-8")],
        &[],
        &format!("{} line 2: SK_PIN: its value is shorter than 8 characters", short.display()),
        "1234\n",
    );
    let (_, _, stderr) = start(&["--secrets-file", private.to_str().expect("utf-8")], &[]);
    assert_started(&stderr);
}

#[test]
fn a_variable_found_by_its_name_but_too_short_is_skipped_with_a_notice() {
    let short = "pw-4711";
    let (_, _, stderr) = start(&[], &[("SK_DB_PASSWORD", short), ("SK_API_KEY", "")]);
    assert_started(&stderr);
    assert!(
        stderr.contains(
            "shellkeep: the environment variable SK_DB_PASSWORD looks secret by its name, but its \
             value is shorter than 8 characters"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("SK_API_KEY looks secret by its name, but its value is empty"));
    assert!(!stderr.contains(short), "{stderr}");
    // Without the defaults nothing is looked for by name.
    let (_, _, stderr) =
        start(&["--no-default-secrets"], &[("SK_DB_PASSWORD", short), ("SK_API_KEY", "")]);
    assert_started(&stderr);
    assert!(!stderr.contains("SK_DB_PASSWORD"), "{stderr}");
    let (_, _, stderr) =
        start(&[], &[("SHELLKEEP_NO_DEFAULT_SECRETS", "true"), ("SK_DB_PASSWORD", short)]);
    assert_started(&stderr);
    assert!(!stderr.contains("SK_DB_PASSWORD"), "{stderr}");
}

#[test]
fn help_describes_the_secret_flags() {
    let (code, stdout, _) = start(&["--help"], &[]);
    assert_eq!(code, 0);
    for needle in [
        "--secret <NAME>",
        "SHELLKEEP_SECRETS",
        "--secrets-file <FILE>",
        "SHELLKEEP_SECRETS_FILE",
        "--no-default-secrets",
        "SHELLKEEP_NO_DEFAULT_SECRETS",
    ] {
        assert!(stdout.contains(needle), "{needle} missing from --help:\n{stdout}");
    }
}

/// Every regular file under `dir` whose bytes contain `needle`.
fn files_containing(dir: &Path, needle: &[u8]) -> Vec<PathBuf> {
    crate::no_leak::files_under(dir)
        .into_iter()
        .filter(|(_, bytes)| bytes.windows(needle.len()).any(|w| w == needle))
        .map(|(path, _)| path)
        .collect()
}

/// Processes on this machine whose command line contains `needle`.
fn command_lines_containing(needle: &[u8]) -> Vec<String> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let raw = std::fs::read(entry.path().join("cmdline")).ok()?;
            raw.windows(needle.len())
                .any(|w| w == needle)
                .then(|| String::from_utf8_lossy(&raw).replace('\0', " "))
        })
        .collect()
}

/// Issue 13 §1: the secrets file's values reach every shell (the default
/// session, a named one, a background job, a shell started again) through
/// the environment, exactly, with nothing expanded; they are in no file
/// shellkeep wrote, on no process's command line, in no history and not on
/// the server's stderr.
#[tokio::test]
async fn the_secrets_files_values_reach_every_shell_through_the_environment_only() {
    let dir = Dir::new();
    let tag = format!("{:08x}", random_u64() as u32);
    // Quotes, a dollar, a backquote and a newline: nothing may expand or
    // break.
    let one = format!("it's $HOME `id` \"q\" {tag}-one");
    let two = format!("line one {tag}\nline two {tag}-two");
    let file = dir.file(
        "secrets.env",
        &format!(
            "# secrets\nexport SK_FILE_ONE=\"it's $HOME `id` \\\"q\\\" {tag}-one\" # c\nSK_FILE_TWO='{two}'\n"
        ),
        0o600,
    );
    let tmp = dir.0.join("tmp");
    std::fs::create_dir(&tmp).expect("mkdir");
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o1777)).expect("chmod");
    let out = dir.0.join("out");
    std::fs::create_dir(&out).expect("mkdir");
    let server = Server::with_env(
        &["--secrets-file", file.to_str().expect("utf-8")],
        &[("TMPDIR", tmp.to_str().expect("utf-8")), ("XDG_RUNTIME_DIR", "")],
    )
    .await;

    let dump = |name: &str| {
        format!(
            "printf %s \"$SK_FILE_ONE\" > {0}/{name}-one; printf %s \"$SK_FILE_TWO\" > \
             {0}/{name}-two; echo ${{#SK_FILE_ONE}} ${{#SK_FILE_TWO}}",
            out.display()
        )
    };
    let lengths = format!("{} {}\n", one.chars().count(), two.chars().count());
    let r = server.terminal(json!({"command": dump("default")})).await;
    assert_eq!(r.output(), lengths, "{r:#?}");
    let r = server.terminal(json!({"command": dump("named"), "session": "other"})).await;
    assert_eq!(r.output(), lengths, "{r:#?}");
    let r = server
        .terminal(json!({"command": format!("{}; sleep 300", dump("job")), "background": true}))
        .await;
    assert!(!r.is_error, "{}", r.text);
    wait_until(
        EVENTUALLY,
        || out.join("job-two").exists(),
        || "the background job to write its values".to_owned(),
    )
    .await;
    // A shell that exits is started again with the same environment.
    server.terminal(json!({"command": "exit"})).await;
    let r = server.terminal(json!({"command": dump("again")})).await;
    assert_eq!(r.output(), lengths, "{r:#?}");
    // A `run` gets them too, and its own `env` wins over them.
    let r = server.run(json!({"command": dump("run")})).await;
    assert!(r.text.contains(lengths.trim_end()), "{}", r.text);
    let r = server
        .run(json!({"command": "printf %s \"$SK_FILE_ONE\"", "env": {"SK_FILE_ONE": "mine"}}))
        .await;
    assert!(r.text.starts_with("mine"), "{}", r.text);
    for name in ["default", "named", "job", "again", "run"] {
        let read = |part: &str| {
            std::fs::read_to_string(out.join(format!("{name}-{part}"))).expect("written")
        };
        assert_eq!((read("one"), read("two")), (one.clone(), two.clone()), "{name}");
    }

    // In the shell's environment, and nowhere else.
    let r = server.terminal(json!({"command": "echo $$; history"})).await;
    let shell: u32 = r.output().lines().next().and_then(|l| l.parse().ok()).expect("a pid");
    let environ = std::fs::read(format!("/proc/{shell}/environ")).expect("environ");
    let entry = format!("SK_FILE_ONE={one}\0");
    assert!(environ.windows(entry.len()).any(|w| w == entry.as_bytes()), "not in the environ");
    let r = server.terminal(json!({"command": "cat /proc/$$/cmdline; echo"})).await;
    assert!(r.output().contains("bash"), "{r:#?}");
    for value in [&one, &two, &format!("{tag}-two")] {
        let needle = value.as_bytes();
        assert!(!r.output().contains(value.as_str()), "{r:#?}");
        assert_eq!(command_lines_containing(needle), Vec::<String>::new());
        let history = server.terminal(json!({"command": "history"})).await;
        assert!(!history.output().contains(value.as_str()), "{history:#?}");
        // The runtime directory (start-up files, command files, state),
        // the state directory (full outputs) and the server's stderr.
        for written in [&tmp, &server.cwd().to_owned()] {
            assert_eq!(files_containing(written, needle), Vec::<PathBuf>::new(), "{value}");
        }
    }
    // The searches find what is there: the values the shells wrote, and
    // the shell's own command line.
    assert_eq!(files_containing(&out, format!("{tag}-two").as_bytes()).len(), 5);
    assert!(!command_lines_containing(b"--rcfile").is_empty());
    // Where the shell's start-up and command files are.
    let r = server.terminal(json!({"command": "echo \"$__sk_dir\""})).await;
    let shell_dir = PathBuf::from(r.output().trim_end());
    assert!(
        shell_dir.starts_with(&tmp),
        "{} is not under {}\n{}",
        shell_dir.display(),
        tmp.display(),
        server.log()
    );
    // The files there were searched above; none holds what a command
    // typed or where it ran: the command text, the working directory and
    // `PATH` travel over descriptors only the server and the shell hold.
    let cwd = server.cwd().to_str().expect("utf-8").as_bytes().to_owned();
    assert_eq!(files_containing(&shell_dir, &cwd), Vec::<PathBuf>::new());
    assert_eq!(files_containing(&shell_dir, b"__sk_dir"), Vec::<PathBuf>::new());
}
