//! Recordings through the binary: a session of a server started with
//! `--record` (commands, a full-screen program, a secret from the secrets
//! file printed in pieces) written as an asciicast v2 file that the real
//! asciinema CLI plays with the session's text and no raw secret;
//! `record` per session (off, and refused on a server that records
//! nothing); a directory that cannot be private stopping start-up; and
//! `shellkeep replay`.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::{EVENTUALLY, Server, random_u64, wait_until};

/// The secret the tests' secrets file holds.
const SECRET: &str = "rec-Secret-7Hq2-value";

/// A directory of the test's own, removed when dropped.
struct Dir(PathBuf);

impl Dir {
    fn new() -> Dir {
        let path = std::env::temp_dir().join(format!("sk-rec-{:08x}", random_u64() as u32));
        std::fs::create_dir(&path).expect("mkdir");
        Dir(path)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The recordings in `dir` (files ending in `.cast`), by name.
fn recordings(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| entries.flatten().map(|entry| entry.path()).collect())
        .unwrap_or_default();
    found.retain(|path| path.extension().is_some_and(|ext| ext == "cast"));
    found.sort();
    found
}

/// The recordings of session `name` in `dir`.
fn recordings_of(dir: &Path, name: &str) -> Vec<PathBuf> {
    let ending = format!("-{name}-");
    recordings(dir)
        .into_iter()
        .filter(|path| path.file_name().is_some_and(|n| n.to_string_lossy().contains(&ending)))
        .collect()
}

/// A server recording into `dir/casts`, with [`SECRET`] in its secrets
/// file (exported into every shell as `REC_TOKEN`).
async fn recording_server(dir: &Dir, extra: &[&str]) -> (Server, PathBuf) {
    let secrets = dir.0.join("secrets.env");
    std::fs::write(&secrets, format!("REC_TOKEN={SECRET}\n")).expect("write");
    std::fs::set_permissions(&secrets, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let casts = dir.0.join("casts");
    let mut args = vec![
        "--record",
        casts.to_str().expect("utf-8"),
        "--secrets-file",
        secrets.to_str().expect("utf-8"),
    ];
    args.extend_from_slice(extra);
    (Server::with(&args).await, casts)
}

/// The events of a recording's text, after its header (which is checked:
/// version 2, a width and a height); every line must be a whole event.
fn events(text: &str) -> Vec<(f64, String, String)> {
    let mut lines = text.lines();
    let header: Value = serde_json::from_str(lines.next().expect("a header")).expect("JSON");
    assert_eq!(header["version"], 2, "{header}");
    assert!(header["width"].is_u64() && header["height"].is_u64(), "{header}");
    lines.map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"))).collect()
}

/// The data of the events with `code`, in order.
fn data(events: &[(f64, String, String)], code: &str) -> Vec<String> {
    events.iter().filter(|(_, c, _)| c == code).map(|(_, _, d)| d.clone()).collect()
}

/// Waits until `path` holds the marker of the shell's end; returns its text.
async fn ended(path: &Path) -> String {
    let read = || std::fs::read_to_string(path).unwrap_or_default();
    wait_until(
        EVENTUALLY,
        || read().contains("\"m\", \"the shell ended"),
        || format!("the end of the recording {}: {}", path.display(), read()),
    )
    .await;
    read()
}

/// The text the installed asciinema CLI prints for a recording: `cat`
/// (2.x, which needs a terminal: it runs under `script`) or `convert -f
/// txt` (3.x). `None` when asciinema (or `script`) is missing and this is
/// not CI.
fn asciinema_text(path: &Path) -> Option<String> {
    if !crate::installed("asciinema") {
        return None;
    }
    let version = Command::new("asciinema").arg("--version").output().expect("asciinema runs");
    let version = String::from_utf8_lossy(&version.stdout).into_owned();
    let output = if version.starts_with("asciinema 2.") {
        if !crate::installed("script") {
            return None;
        }
        let line = format!("asciinema cat '{}'", path.display());
        Command::new("script")
            .args(["-qec", &line, "/dev/null"])
            .stdin(Stdio::null())
            .output()
            .expect("script runs")
    } else {
        let text = path.with_extension("txt");
        let converted = Command::new("asciinema")
            .args(["convert", "-f", "txt"])
            .arg(path)
            .arg(&text)
            .output()
            .expect("asciinema runs");
        assert!(converted.status.success(), "{converted:?}");
        let mut output = converted;
        output.stdout = std::fs::read(&text).expect("the converted text");
        output
    };
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{version}: {:?}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    Some(stdout)
}

/// Issue 20: a recorded session (commands, vim run and quit, a secret
/// printed in two pieces) is an asciicast v2 file, private, with a marker
/// per command and the shell's end; the real asciinema CLI plays it with
/// the session's text, and nowhere is the raw secret.
#[tokio::test]
async fn a_recorded_session_plays_in_asciinema_with_its_secret_masked() {
    let dir = Dir::new();
    let (server, casts) = recording_server(&dir, &[]).await;
    let r = server.terminal(json!({"command": "echo hello-recording; seq 1 3"})).await;
    assert_eq!(r.output(), "hello-recording\n1\n2\n3\n", "{r:#?}");
    // The secret in two writes, read as two chunks of output.
    let split =
        "printf 'token=%s' \"${REC_TOKEN:0:9}\"; sleep 0.3; printf '%s.\\n' \"${REC_TOKEN:9}\"";
    let r = server.terminal(json!({"command": split})).await;
    assert_eq!(r.output(), "token=<secret-hidden>.\n", "{r:#?}");
    let r = server.terminal(json!({"command": "echo \"whole $REC_TOKEN\""})).await;
    assert_eq!(r.output(), "whole <secret-hidden>\n", "{r:#?}");
    if crate::installed("vim") {
        std::fs::write(server.cwd().join("notes.txt"), "vim-line-one\n").expect("write");
        let r =
            server.terminal(json!({"command": "vim -u NONE -N notes.txt", "timeout": 10})).await;
        assert_eq!(r["status"], "waiting_for_input", "{r:#?}");
        let r = server.terminal(json!({"keys": ["ESC", ":q!", "ENTER"], "timeout": 10})).await;
        assert_eq!(r["status"], "completed", "{r:#?}");
    }
    let r = server.terminal(json!({"command": "echo after-vim"})).await;
    assert_eq!(r.output(), "after-vim\n", "{r:#?}");
    // Closing `default` resets it: the shell ends, its recording with it.
    server.call("session_close", json!({"session": "default"})).await;

    let files = recordings_of(&casts, "default");
    assert!(!files.is_empty(), "no recording in {}: {:?}", casts.display(), recordings(&casts));
    let path = &files[0];
    let text = ended(path).await;
    let mode = |path: &Path| std::fs::metadata(path).expect("meta").permissions().mode() & 0o777;
    assert_eq!((mode(path), mode(&casts)), (0o600, 0o700));
    let events = events(&text);
    let markers = data(&events, "m");
    for command in ["echo hello-recording; seq 1 3", "echo \"whole $REC_TOKEN\"", "echo after-vim"]
    {
        assert!(markers.iter().any(|m| m == command), "no marker {command:?} in {markers:?}");
    }
    assert!(markers.last().is_some_and(|m| m.starts_with("the shell ended")), "{markers:?}");
    let output: String = data(&events, "o").concat();
    for expected in
        ["hello-recording", "token=<secret-hidden>.", "whole <secret-hidden>", "after-vim"]
    {
        assert!(output.contains(expected), "{expected:?} is not in {output:?}");
    }
    if crate::installed("vim") {
        // The full screen: vim entered and left the alternate screen.
        assert!(output.contains("\x1b[?1049h") && output.contains("vim-line-one"), "{output:?}");
    }
    let times: Vec<f64> = events.iter().map(|(time, _, _)| *time).collect();
    assert!(times.windows(2).all(|pair| pair[0] <= pair[1]), "{times:?}");
    assert!(!text.contains(SECRET) && !text.contains(&SECRET[..9]), "{text}");
    // Nothing of shellkeep's own traffic: no marker (they carry the marker
    // nonce), and each command shows as typed, not as the line that runs it.
    assert!(!text.contains("\\u001b]6973;") && !text.contains("__sk"), "{text}");
    assert!(output.contains("$ echo hello-recording; seq 1 3\r\nhello-recording\n"), "{output:?}");

    if let Some(played) = asciinema_text(path) {
        for expected in ["hello-recording", "token=<secret-hidden>.", "after-vim"] {
            assert!(played.contains(expected), "{expected:?} is not in {played:?}");
        }
        assert!(!played.contains(SECRET) && !played.contains(&SECRET[..9]), "{played}");
    }

    // `shellkeep replay` writes the same output, fast.
    let replayed = Command::new(crate::binary())
        .args(["replay", "--speed", "1000"])
        .arg(path)
        .stdin(Stdio::null())
        .output()
        .expect("replay runs");
    assert!(replayed.status.success(), "{replayed:?}");
    assert_eq!(String::from_utf8_lossy(&replayed.stdout), output);
}

/// Issue 20: `record` per session: false leaves a session unrecorded on a
/// server that records; a session that already runs keeps what it was (and
/// the reply says so); a background job is recorded too; true on a server
/// without `--record` is refused with what to do.
#[tokio::test]
async fn record_per_session_follows_what_the_server_allows() {
    let dir = Dir::new();
    let (server, casts) = recording_server(&dir, &[]).await;
    let r = server
        .terminal(json!({"command": "echo quiet", "session": "quiet", "record": false}))
        .await;
    assert_eq!(r.output(), "quiet\n", "{r:#?}");
    let r = server.terminal(json!({"command": "echo loud", "session": "loud"})).await;
    assert_eq!(r.output(), "loud\n", "{r:#?}");
    let r =
        server.terminal(json!({"command": "echo still", "session": "quiet", "record": true})).await;
    assert_eq!(r.output(), "still\n", "{r:#?}");
    assert!(
        r.text.contains(
            "[record applies only to the call that starts a session: session \"quiet\" was \
             already running and is not recorded; close it with session_close to start it again.]"
        ),
        "{}",
        r.text
    );
    // The same value as the session has: nothing to say.
    let r =
        server.terminal(json!({"command": "echo again", "session": "loud", "record": true})).await;
    assert!(!r.text.contains("record applies"), "{}", r.text);
    let r = server
        .terminal(
            json!({"command": "echo job-out; sleep 30", "background": true, "session": "job"}),
        )
        .await;
    assert!(!r.is_error, "{r:#?}");
    wait_until(
        EVENTUALLY,
        || {
            recordings_of(&casts, "job").iter().any(|path| {
                std::fs::read_to_string(path).is_ok_and(|text| text.contains("job-out"))
            })
        },
        || format!("the job's recording: {:?}", recordings(&casts)),
    )
    .await;
    assert!(recordings_of(&casts, "quiet").is_empty(), "{:?}", recordings(&casts));
    assert_eq!(recordings_of(&casts, "loud").len(), 1, "{:?}", recordings(&casts));

    let plain = Server::start().await;
    let r = plain.terminal(json!({"command": "echo hi", "session": "rec", "record": true})).await;
    assert!(r.is_error, "{r:#?}");
    assert_eq!(
        r.text,
        "record=true needs a server started with --record DIR (or SHELLKEEP_RECORD): this server \
         records no session. Omit record, or ask the person running the server to add --record."
    );
    // false is what it has anyway.
    let r = plain.terminal(json!({"command": "echo hi", "record": false})).await;
    assert_eq!(r.output(), "hi\n", "{r:#?}");
}

/// Issue 20: a `--record` directory that others can enter, or that is a
/// file, stops start-up with an error naming the flag; a missing one is
/// made private.
#[test]
fn a_record_directory_that_cannot_be_private_stops_start_up() {
    let dir = Dir::new();
    let open = dir.0.join("open");
    std::fs::create_dir(&open).expect("mkdir");
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let file = dir.0.join("file");
    std::fs::write(&file, "x").expect("write");
    for (path, why) in [
        (&open, "has mode 755; it must be 700 (no access for group or others)"),
        (&file, "is not a directory"),
    ] {
        let output = Command::new(crate::binary())
            .args(["--no-rc", "--record"])
            .arg(path)
            .current_dir(&dir.0)
            .env("XDG_STATE_HOME", dir.0.join("state"))
            .env_remove("SHELLKEEP_RECORD")
            .stdin(Stdio::null())
            .output()
            .expect("the binary runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        let expected = format!("--record {}: cannot keep recordings there", path.display());
        assert!(stderr.contains(&expected) && stderr.contains(why), "{stderr}");
    }
    let missing = dir.0.join("new/casts");
    let output = Command::new(crate::binary())
        .args(["--no-rc", "--record"])
        .arg(&missing)
        .current_dir(&dir.0)
        .env("XDG_STATE_HOME", dir.0.join("state"))
        .stdin(Stdio::null())
        .output()
        .expect("the binary runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("MCP handshake failed"), "{stderr}");
    let mode = std::fs::metadata(&missing).expect("made").permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
}

/// Issue 20: `shellkeep replay` plays output events only, and refuses what
/// it cannot play with the line and the reason.
#[test]
fn replay_plays_output_and_refuses_what_is_not_a_recording() {
    let dir = Dir::new();
    let cast = dir.0.join("t.cast");
    std::fs::write(
        &cast,
        "{\"version\": 2, \"width\": 80, \"height\": 24, \"idle_time_limit\": 0.01}\n\
         [0.1, \"o\", \"one\\r\\n\"]\n[0.2, \"m\", \"a marker\"]\n[0.3, \"i\", \"typed\"]\n\
         [99.0, \"r\", \"100x30\"]\n[500.0, \"o\", \"\\u001b[1mtwo\\u001b[0m\\r\\n\"]\n",
    )
    .expect("write");
    let replay = |args: &[&str], file: &Path| {
        Command::new(crate::binary())
            .arg("replay")
            .args(args)
            .arg(file)
            .stdin(Stdio::null())
            .output()
            .expect("replay runs")
    };
    // The 500 s pause is capped by the recording's limit.
    let played = replay(&[], &cast);
    assert!(played.status.success(), "{played:?}");
    assert_eq!(String::from_utf8_lossy(&played.stdout), "one\r\n\x1b[1mtwo\x1b[0m\r\n");

    let bad = dir.0.join("bad.cast");
    for (text, args, error) in [
        ("", &[][..], "the file is empty: no asciicast header"),
        (
            "{\"version\": 3, \"term\": {\"cols\": 80, \"rows\": 24}}\n",
            &[],
            "line 1: only asciicast version 2 is read here, got version 3",
        ),
        (
            "{\"version\": 2, \"width\": 80, \"height\": 24}\n[1, \"o\"]\n",
            &[],
            "line 2 is not an event [time, code, data]",
        ),
        ("{\"version\": 2, \"width\": 80, \"height\": 24}\n", &["--speed", "0"], "--speed must be"),
    ] {
        std::fs::write(&bad, text).expect("write");
        let output = replay(args, &bad);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success() && stderr.contains(error), "{text:?}: {stderr}");
    }
    let output = replay(&[], &dir.0.join("missing.cast"));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("cannot open the recording"), "{stderr}");
}
